"""The gateway's fleet view (GET /v1/fleet and the page at GET /fleet,
docs/fleet.md) in a real headless Chromium against the real gateway, a
SmolLM2 worker and Kafka, with the playground's fixtures and browser
(test_playground.py):

- /v1/fleet lists the worker as a member of its group with its partitions
  and, from its status record, its model and state; it needs the API key;
- the page loads with no console error and lists the worker with its
  partition, model and state;
- the lag rises while the worker is stopped (SIGSTOP) and turns are sent,
  its status record goes stale, and both recover after SIGCONT;
- a second worker joins and is listed; when it stops its last record says
  `stopped` and it leaves the group;
- status records that are garbage are counted and skipped, markup in a
  valid one is shown as text, a tombstone removes its worker;
- a fleet that cannot be read (the turns topic deleted under a running
  gateway: Kafka answers with an error) shows the gateway's 503 on the
  page, and a gateway that is gone shows that it does not answer;
- a stopped cluster (a private broker) gives a prompt 503 and the error on
  the page, never a hang.

A screenshot of the page goes to $PARLEY_TEST_ARTIFACTS/fleet.png."""

import json
import re
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request

from test_worker_faults import private_kafka  # noqa: F401
from test_playground import (MARKUP, WEB, artifacts, browser, console_errors,  # noqa: F401
                             create_topics, fleet, get, start_gateway, start_worker, stop, wait)


def fleet_json(url, key="sk-test"):
    st, _, body = get(url + "/v1/fleet", key)
    return st, json.loads(body)


def the_worker(f, wid):
    return next((w for w in f.get("workers", []) if w["id"] == wid), None)


def send_turn(url, text, timeout=2):
    """Post a chat turn and leave before its reply: the turn is on Kafka."""
    req = urllib.request.Request(
        url + "/v1/chat/completions", method="POST",
        data=json.dumps({"model": "smollm", "max_tokens": 4, "temperature": 0,
                         "messages": [{"role": "user", "content": text}]}).encode(),
        headers={"Authorization": "Bearer sk-test", "Content-Type": "application/json"})
    try:
        urllib.request.urlopen(req, timeout=timeout).read()
    except (urllib.error.URLError, TimeoutError, OSError):
        pass


def open_fleet(d, url, key="sk-test"):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    d.get(url + "/fleet")
    if key:
        d.find_element(By.ID, "key").send_keys(key + Keys.ENTER)


def page_state(d):
    return d.execute_script("return document.body.dataset.state")


def worker_row(d, wid):
    return d.execute_script("""
        const tr = [...document.querySelectorAll('#workers tbody tr')]
            .find(r => r.dataset.worker === arguments[0]);
        if (!tr) return null;
        const o = {state: tr.dataset.state};
        for (const td of tr.cells) o[td.dataset.col] = td.textContent;
        o.lag_value = tr.querySelector('[data-col=lag]').dataset.value;
        return o;""", wid)


def test_fleet_json(fleet):  # noqa: F811
    wid = f"w-{fleet['prefix']}"
    assert get(fleet["url"] + "/v1/fleet")[0] == 401
    f = wait(lambda: (r := fleet_json(fleet["url"]))[0] == 200 and
             (w := the_worker(r[1], wid)) and w["status"] and r[1], 30, "the fleet with the worker")
    assert f["object"] == "fleet" and f["group"] == f"g-{fleet['prefix']}"
    assert f["topic"] == f"{fleet['prefix']}.turns" and f["group_state"] == "Stable"
    w = the_worker(f, wid)
    assert w["member"] and w["partitions"] == [0], w
    assert w["status"]["model"] == "smollm" and w["status"]["state"] == "running", w
    assert not w["status"]["stale"]
    assert [p["partition"] for p in f["partitions"]] == [0]
    assert f["partitions"][0]["owner"] == wid and f["partitions"][0]["lag"] >= 0
    assert f["total_lag"] == f["partitions"][0]["lag"] and f["bad_status_records"] == 0
    assert isinstance(f["history"], list)
    st, h, body = get(fleet["url"] + "/fleet")
    assert st == 200 and h["Content-Type"].startswith("text/html")
    assert h["Content-Security-Policy"] == get(fleet["url"] + "/")[1]["Content-Security-Policy"]
    assert '<script src="/fleet.js"' in body


def test_fleet_page_lists_the_worker(fleet, browser):  # noqa: F811
    d = browser
    wid = f"w-{fleet['prefix']}"
    open_fleet(d, fleet["url"])
    assert d.title == "parley fleet"
    r = wait(lambda: (r := worker_row(d, wid)) and r["state"] == "running" and r, 30,
             "the worker's row")
    assert r["partitions"] == "0" and r["model"] == "smollm" and r["host"], r
    assert page_state(d) == "ok"
    assert d.execute_script("return document.querySelectorAll('#partitions tbody tr').length") == 1
    assert console_errors(d) == []


def test_lag_rises_while_stopped_and_falls_after(fleet, browser):  # noqa: F811
    d = browser
    wid = f"w-{fleet['prefix']}"
    open_fleet(d, fleet["url"])
    wait(lambda: (r := worker_row(d, wid)) and r["state"] == "running" and r["lag_value"] == "0",
         60, "a running worker with no lag")
    fleet["worker"].send_signal(signal.SIGSTOP)
    try:
        senders = [threading.Thread(target=send_turn, args=(fleet["url"], f"Count to {i}."))
                   for i in range(3)]
        for t in senders:
            t.start()
        for t in senders:
            t.join()
        wait(lambda: (r := worker_row(d, wid)) and r["lag_value"] and int(r["lag_value"]) >= 3,
             30, "the lag to rise")
        # its status record stops: the page calls it stale
        wait(lambda: worker_row(d, wid)["state"] == "stale", 30, "the worker to go stale")
    finally:
        fleet["worker"].send_signal(signal.SIGCONT)
    wait(lambda: (r := worker_row(d, wid)) and r["lag_value"] == "0" and r["state"] == "running",
         180, "the lag to fall after SIGCONT")
    # the charts' history holds the rise of the lag and the turns done after
    f = wait(lambda: (r := fleet_json(fleet["url"]))[0] == 200 and
             max(s[2] for s in r[1]["history"]) > 0 and r[1], 30, "the throughput sample")
    assert max(s[1] for s in f["history"]) >= 3, f["history"]
    d.save_screenshot(str(artifacts() / "fleet.png"))


def test_a_second_worker_joins_and_its_stop_is_shown(fleet, browser):  # noqa: F811
    """A second worker joins the group (the one partition stays with one of
    them); when it stops, its last record says so and it leaves the group."""
    d = browser
    open_fleet(d, fleet["url"])
    prefix = fleet["prefix"]
    logf = fleet["tmp"] / "worker2.log"
    w2 = start_worker(fleet["kafka"], fleet["bin"], fleet["model"], prefix, logf,
                      "--worker.id", f"w2-{prefix}", "--kafka.session.timeout.ms", "6000",
                      wait_assigned=False)
    try:
        wait(lambda: (r := worker_row(d, f"w2-{prefix}")) and r["state"] == "running", 90,
             "the second worker's row")
        # both members of the settled group
        f = wait(lambda: (r := fleet_json(fleet["url"])[1]) and r.get("group_state") == "Stable"
                 and (w := the_worker(r, f"w2-{prefix}")) and w["member"] and r, 90,
                 "the second worker in the stable group")
        assert sum(len(w["partitions"]) for w in f["workers"] if w["member"]) == 1, f
    finally:
        stop(w2)
    wait(lambda: (r := worker_row(d, f"w2-{prefix}")) and r["state"] == "stopped", 60,
         "the second worker's stopped record")
    # (it leaves the group at the latest after its 6 s session timeout)
    wait(lambda: (r := fleet_json(fleet["url"])[1]) and not the_worker(r, f"w2-{prefix}")["member"],
         90, "the second worker to leave the group")
    assert worker_row(d, f"w-{prefix}")["state"] == "running"


def test_hostile_status_records(fleet, browser):  # noqa: F811
    """Anyone who may write to the status topic chooses its bytes: garbage
    is counted and skipped, and markup in a valid record is shown as text."""
    from confluent_kafka import Producer

    d = browser
    p = Producer({"bootstrap.servers": fleet["kafka"]})
    topic = f"{fleet['prefix']}.status"
    for junk in (b"not json", b"[1]", b'{"v": 99}', b"\xff" * 5000,
                 b'{"v":1,"worker":"x","state":"running"}'):
        p.produce(topic, key=b"junk", value=junk)
    evil = {"v": 1, "worker": MARKUP, "host": "<b>h</b>", "model": "<b>bold</b>",
            "state": "running", "ts_ms": int(time.time() * 1000), "interval_ms": 60000,
            "turns": 1, "prompt_tokens": 1, "cached_tokens": 0, "turns_per_s": 0,
            "cache_share": 0}
    p.produce(topic, key=MARKUP.encode(), value=json.dumps(evil).encode())
    p.flush(30)
    f = wait(lambda: (r := fleet_json(fleet["url"]))[0] == 200 and
             r[1]["bad_status_records"] >= 5 and the_worker(r[1], MARKUP) and r[1], 30,
             "the records read")
    assert not the_worker(f, MARKUP)["member"]
    open_fleet(d, fleet["url"])
    r = wait(lambda: worker_row(d, MARKUP), 30, "the hostile worker's row")
    assert r["worker"] == MARKUP and r["model"] == "<b>bold</b>" and r["host"] == "<b>h</b>"
    assert d.execute_script("return document.querySelectorAll('#workers img, #workers b')"
                            ".length") == 0
    time.sleep(0.5)  # an image error handler would have run by now
    assert d.execute_script("return window.pwned === undefined")
    # a tombstone removes it
    p.produce(topic, key=MARKUP.encode(), value=None)
    p.flush(30)
    wait(lambda: worker_row(d, MARKUP) is None, 30, "the tombstoned worker to go")


def test_fleet_script_never_renders_text_as_markup():
    code = re.sub(r"/\*.*?\*/", "", (WEB / "fleet.js").read_text(), flags=re.S)
    for bad in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(",
                "new Function", "DOMParser", "createContextualFragment", "srcdoc"):
        assert bad not in code, bad
    assert "sessionStorage" in code and "localStorage" not in code


def test_unreadable_fleet_shows_an_error(kafka_bootstrap, parley_bin, browser):  # noqa: F811
    d = browser
    prefix = f"fl-{time.time_ns() % 10**10}"
    admin = create_topics(kafka_bootstrap, prefix)
    gw, url = start_gateway(kafka_bootstrap, parley_bin, prefix)
    try:
        open_fleet(d, url)
        wait(lambda: page_state(d) == "ok", 30, "the fleet of no workers")
        assert d.execute_script("return document.querySelectorAll('#workers tbody tr').length") == 0
        for f in admin.delete_topics([f"{prefix}.turns"]).values():
            f.result(30)
        wait(lambda: page_state(d) == "error", 60, "the error")
        msg = d.execute_script("return document.getElementById('fleet-error').textContent")
        assert "HTTP 503" in msg and "cannot read the fleet from Kafka" in msg, msg
        st, f = fleet_json(url)
        assert st == 503 and f["error"]["code"] == "fleet_unavailable", f
    finally:
        stop(gw)
    wait(lambda: "does not answer" in d.execute_script(
        "return document.getElementById('fleet-error').textContent"), 30, "the gateway gone")
    assert page_state(d) == "error"


def test_kafka_gone_shows_an_error(private_kafka, parley_bin, browser):  # noqa: F811
    """The cluster itself stopped: /v1/fleet still answers at once (the
    admin queries run on the fleet's own thread), with 503, and the page
    shows it."""
    from fault_kit import svc

    d = browser
    bootstrap, run = private_kafka
    prefix = f"fk-{time.time_ns() % 10**10}"
    create_topics(bootstrap, prefix)
    gw, url = start_gateway(bootstrap, parley_bin, prefix)
    try:
        open_fleet(d, url)
        wait(lambda: page_state(d) == "ok", 60, "the fleet read")
        svc("kafka.sh", run, "stop")
        # each read returns (get() gives up after 10 s: a hang fails it)
        st, f = wait(lambda: (r := fleet_json(url))[0] == 503 and r, 60, "the 503")
        assert f["error"]["code"] == "fleet_unavailable", f
        wait(lambda: page_state(d) == "error" and "cannot read the fleet from Kafka" in
             d.execute_script("return document.getElementById('fleet-error').textContent"), 30,
             "the error on the page")
        assert get(url + "/healthz")[0] == 200
    finally:
        stop(gw)


def test_parley_topics_makes_the_status_topic_compacted(kafka_bootstrap, parley_bin):
    from confluent_kafka.admin import AdminClient, ConfigResource

    prefix = f"ft-{time.time_ns() % 10**10}"
    r = subprocess.run([str(parley_bin), "topics", "--brokers", kafka_bootstrap, "--topic-prefix",
                        prefix, "--partitions", "1"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert f"created  {prefix}.status (1 partition, " in r.stdout and "compacted" in r.stdout
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    res = ConfigResource("topic", f"{prefix}.status")
    cfg = wait(lambda: admin.describe_configs([res])[res].result(30), 30, "the topic's config")
    assert cfg["cleanup.policy"].value == "compact"
