"""The gateway's chat playground (GET /, docs/playground.md) in a real
headless Chromium (Debian's chromium + chromium-driver through selenium,
deploy/setup.sh browser) against the real gateway, a SmolLM2-135M-Instruct
worker and Kafka:

- the page loads with no console error, lists the model, and a message
  sent with the Enter key streams: its text grows between two reads
  before the reply is done; the second turn of the conversation (the
  whole history sent again) shows cached tokens > 0, and every reply shows
  prompt tokens, time to first token, tokens/s and the finish reason;
- json_schema mode with a pasted schema gives JSON valid for the schema,
  in each of n = 2 choices;
- markup from the user and from the model (forced by a schema whose only
  value is an <img onerror> tag) is shown as text: no element is made and
  no handler runs;
- a stopped fleet (SIGSTOP, a gateway with a 3 s timeout) shows an error,
  not an endless spinner, and so does a gateway that is gone; a wrong key
  shows the gateway's 401;
- without a browser: the page's Content-Security-Policy and other headers,
  the API keys still guarding every API call, gateway.playground=false
  giving 404, and the script never handing text to innerHTML & co.

A screenshot of the page goes to $PARLEY_TEST_ARTIFACTS (default
build/test-artifacts)/playground.png.  The browser is $PARLEY_CHROMIUM
else chromium on PATH, its driver $PARLEY_CHROMEDRIVER else chromedriver.
Without chromium, chromedriver or selenium the browser tests skip, which
CI=true turns into failures (only missing hardware may skip)."""

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest

from conftest import REPO_ROOT

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

WEB = REPO_ROOT / "consumer" / "gateway" / "web"
MARKUP = "<img src=x onerror=window.pwned=1>"


def stop(proc):
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def start_gateway(kafka, parley_bin, prefix, *extra):
    """A gateway on the fleet's topics (key sk-test, model smollm)."""
    gw = subprocess.Popen(
        [str(parley_bin), "gateway", "--kafka.bootstrap.servers", kafka,
         "--gateway.listen", "127.0.0.1:0", "--gateway.topic.turns", f"{prefix}.turns",
         "--gateway.topic.tokens", f"{prefix}.tokens",
         "--gateway.topic.responses", f"{prefix}.responses", "--gateway.topic.dlq", f"{prefix}.dlq",
         "--gateway.topic.status", f"{prefix}.status", "--gateway.fleet.group", f"g-{prefix}",
         "--gateway.api_keys", "sk-test=tenant-a", "--gateway.models", "smollm", *extra],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    line = gw.stdout.readline()
    m = re.search(r"listening on (http://[0-9.]+:\d+)", line)
    assert m, line
    return gw, m.group(1)


def start_worker(kafka, parley_bin, model, prefix, logf, *extra, wait_assigned=True):
    """A SmolLM2 worker (model `smollm`, 2-token chunks) on the fleet's topics,
    publishing its status record (docs/fleet.md) every 500 ms; returns once
    it holds its partitions (unless not wait_assigned)."""
    worker = subprocess.Popen(
        [str(parley_bin), "worker", "--model.path", str(model), "--model.name", "smollm",
         "--model.threads", "2", "--worker.id", f"w-{prefix}", "--worker.group", f"g-{prefix}",
         "--worker.topic.turns", f"{prefix}.turns", "--worker.topic.tokens", f"{prefix}.tokens",
         "--worker.topic.responses", f"{prefix}.responses", "--worker.topic.dlq", f"{prefix}.dlq",
         "--worker.topic.status", f"{prefix}.status", "--worker.status_ms", "500",
         "--worker.chunk_tokens", "2", "--scheduler.batch_window_us", "2000",
         "--kafka.bootstrap.servers", kafka, *extra],
        stdout=open(logf, "wb"), stderr=subprocess.STDOUT)
    end = time.time() + 60
    while wait_assigned and time.time() < end and "event=assigned" not in logf.read_text(
            errors="replace"):
        time.sleep(0.1)
    return worker


def create_topics(kafka, prefix, partitions=1):
    """The fleet's topics; the status topic compacted, as `parley topics` makes it."""
    admin = AdminClient({"bootstrap.servers": kafka})
    new = [NewTopic(f"{prefix}.{k}", partitions, 1) for k in ("turns", "tokens", "responses")]
    new += [NewTopic(f"{prefix}.dlq", 1, 1),
            NewTopic(f"{prefix}.status", 1, 1, config={"cleanup.policy": "compact"})]
    for f in admin.create_topics(new).values():
        f.result(30)
    return admin


@contextlib.contextmanager
def running_fleet(kafka, parley_bin, model, tmp, partitions=1):
    """Topics, one SmolLM2 worker and a gateway that shows the fleet."""
    prefix = f"pg-{uuid.uuid4().hex[:10]}"
    create_topics(kafka, prefix, partitions)
    worker = start_worker(kafka, parley_bin, model, prefix, tmp / "worker.log")
    gw, url = start_gateway(kafka, parley_bin, prefix, "--gateway.timeout_ms", "60000")
    try:
        yield {"url": url, "worker": worker, "prefix": prefix, "kafka": kafka, "bin": parley_bin,
               "model": model, "tmp": tmp}
    finally:
        stop(gw)
        stop(worker)


@pytest.fixture(scope="module")
def fleet(kafka_bootstrap, parley_bin, smollm_model, tmp_path_factory):
    """Topics, one SmolLM2 worker (model `smollm`, 2-token chunks) and a gateway."""
    with running_fleet(kafka_bootstrap, parley_bin, smollm_model,
                       tmp_path_factory.mktemp("playground")) as f:
        yield f


@pytest.fixture(scope="module")
def browser():
    """Headless Debian chromium through its own chromedriver."""
    webdriver = pytest.importorskip("selenium.webdriver",
                                    reason="no selenium: run deploy/setup.sh browser")
    chromium = os.environ.get("PARLEY_CHROMIUM") or shutil.which("chromium")
    driver = os.environ.get("PARLEY_CHROMEDRIVER") or shutil.which("chromedriver")
    if not (chromium and os.access(chromium, os.X_OK) and driver and os.access(driver, os.X_OK)):
        pytest.skip(f"no chromium / chromedriver ({chromium}, {driver}): run deploy/setup.sh "
                    "browser")
    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--window-size=1280,860", "--no-first-run"):
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    d = webdriver.Chrome(options=opts, service=webdriver.ChromeService(executable_path=driver))
    d.set_script_timeout(30)
    yield d
    d.quit()


# ---- page helpers -----------------------------------------------------------

def open_page(d, url, key="sk-test"):
    """Load the page, enter the key (Enter submits it), wait for the models."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    d.get(url + "/")
    d.find_element(By.ID, "key").send_keys(key + Keys.ENTER)
    wait(lambda: d.execute_script("return document.getElementById('model').options.length") > 0,
         10, "the model list")


def wait(cond, timeout, what):
    end = time.time() + timeout
    while time.time() < end:
        v = cond()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def set_field(d, id_, value):
    d.execute_script("const e = document.getElementById(arguments[0]); e.value = arguments[1];"
                     "e.dispatchEvent(new Event('change'));", id_, value)


def type_message(d, text):
    """Type text into the composer and send it with the Enter key."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    box = d.find_element(By.ID, "input")
    box.send_keys(text)
    box.send_keys(Keys.ENTER)


def last_reply(d):
    """The last assistant turn: state, choice texts, stats, error."""
    return d.execute_script("""
        const m = [...document.querySelectorAll('#log .msg.assistant')].pop();
        if (!m) return null;
        const stats = {};
        for (const s of m.querySelectorAll('.stat')) stats[s.dataset.stat] = s.dataset.value;
        const e = m.querySelector('.error');
        return {state: m.dataset.state, texts: [...m.querySelectorAll('.text')].map(t => t.textContent),
                stats: stats, error: e ? e.textContent : null};""")


def finished(d, timeout=120):
    return wait(lambda: (r := last_reply(d)) and r["state"] in ("done", "error") and r, timeout,
                "the reply")


def console_errors(d):
    return [e for e in d.get_log("browser") if e["level"] == "SEVERE"]


def new_chat(d, **fields):
    from selenium.webdriver.common.by import By

    d.find_element(By.ID, "new-chat").click()
    for k, v in fields.items():
        set_field(d, k.replace("_", "-"), v)


def artifacts() -> Path:
    out = Path(os.environ.get("PARLEY_TEST_ARTIFACTS",
                              Path(os.environ.get("PARLEY_BUILD", REPO_ROOT / "build")) / "test-artifacts"))
    out.mkdir(parents=True, exist_ok=True)
    return out


# ---- browser tests ----------------------------------------------------------

def test_page_streams_and_second_turn_is_cached(fleet, browser):
    d = browser
    open_page(d, fleet["url"])
    assert d.title == "parley playground"
    assert d.execute_script("return document.getElementById('model').value") == "smollm"
    assert d.execute_script("return sessionStorage.getItem('parley.playground.key')") == "sk-test"
    assert "sk-test" not in d.current_url
    new_chat(d, temperature="0", max_tokens="60", system="You are a helpful assistant.")
    type_message(d, "Write a short poem about the sea.")
    # read the reply's text while it streams: it must grow between two reads
    # before the reply is done (a page that waits for the whole reply shows
    # its text once, with the stats)
    seen = []
    end = time.time() + 120
    while time.time() < end:
        r = last_reply(d)
        if r and r["state"] in ("done", "error"):
            break
        if r and r["texts"][0] and (not seen or seen[-1] != len(r["texts"][0])):
            seen.append(len(r["texts"][0]))
        time.sleep(0.02)
    r = finished(d)
    assert r["state"] == "done", r
    assert len(seen) >= 2 and seen == sorted(seen), \
        f"text lengths seen while streaming: {seen}, final {len(r['texts'][0])}"
    assert int(r["stats"]["prompt_tokens"]) > 0
    assert r["stats"]["finish_reason"] in ("stop", "length")
    assert r["stats"]["ttft_ms"].endswith(" ms") and r["stats"]["tokens_per_s"] != "-"
    first = r["texts"][0]
    # the second turn sends the whole conversation: its prompt was cached
    type_message(d, "Now make it about the sky.")
    r = finished(d)
    assert r["state"] == "done", r
    assert int(r["stats"]["cached_tokens"]) > 0, r
    texts = d.execute_script("return [...document.querySelectorAll('#log .msg .text')]"
                             ".map(t => t.textContent)")
    assert texts[0] == "Write a short poem about the sea." and texts[1] == first
    assert console_errors(d) == []
    d.save_screenshot(str(artifacts() / "playground.png"))


def test_json_schema_mode(fleet, browser):
    d = browser
    open_page(d, fleet["url"])
    schema = {"type": "object", "additionalProperties": False, "required": ["name", "age"],
              "properties": {"name": {"type": "string", "maxLength": 24},
                             "age": {"type": "integer", "minimum": 0, "maximum": 120}}}
    # n = 2 (greedy, so deterministic): each choice shown, each valid for the schema
    new_chat(d, temperature="0", max_tokens="100", n="2", format="json_schema",
             schema=json.dumps(schema))
    type_message(d, "Invent a person and give their name and age.")
    r = finished(d)
    assert r["state"] == "done" and len(r["texts"]) == 2, r
    for text in r["texts"]:
        v = json.loads(text)
        assert set(v) == {"name", "age"} and isinstance(v["name"], str) and len(v["name"]) <= 24
        assert isinstance(v["age"], int) and 0 <= v["age"] <= 120
    set_field(d, "n", "1")
    assert console_errors(d) == []


def test_markup_is_shown_as_text(fleet, browser):
    """The user's markup and the model's (a schema with one possible value
    forces the model to write an <img onerror> tag) both appear as text."""
    d = browser
    open_page(d, fleet["url"])
    schema = {"type": "object", "additionalProperties": False, "required": ["html"],
              "properties": {"html": {"const": MARKUP}}}
    new_chat(d, temperature="0", max_tokens="40", format="json_schema",
             schema=json.dumps(schema))
    type_message(d, "<b>bold</b> " + MARKUP)
    r = finished(d)
    assert r["state"] == "done", r
    assert MARKUP in r["texts"][0] and json.loads(r["texts"][0]) == {"html": MARKUP}
    user = d.execute_script("return document.querySelector('#log .msg.user .text').textContent")
    assert user == "<b>bold</b> " + MARKUP
    assert d.execute_script("return document.querySelectorAll('#log img, #log b').length") == 0
    time.sleep(0.5)  # an image error handler would have run by now
    assert d.execute_script("return window.pwned === undefined")


def test_stopped_fleet_shows_an_error(fleet, browser):
    d = browser
    gw, url = start_gateway(fleet["kafka"], fleet["bin"], fleet["prefix"],
                            "--gateway.timeout_ms", "3000")
    try:
        open_page(d, url)
        new_chat(d, max_tokens="8")
        fleet["worker"].send_signal(signal.SIGSTOP)
        try:
            type_message(d, "Anyone there?")
            r = finished(d, timeout=30)
        finally:
            fleet["worker"].send_signal(signal.SIGCONT)
        assert r["state"] == "error" and "timeout" in r["error"], r
        assert d.execute_script("return document.getElementById('send').disabled") is False
        assert "timeout" in d.execute_script("return document.getElementById('status').textContent")
    finally:
        stop(gw)
    # the gateway itself gone: the request fails at once, shown as such
    type_message(d, "Still there?")
    r = finished(d, timeout=30)
    assert r["state"] == "error" and "the request failed" in r["error"], r


def test_wrong_key_is_shown(fleet, browser):
    """The page loads without a key; its API calls carry the key entered,
    and a wrong one is refused like any client's (401 shown on the page)."""
    d = browser
    d.get(fleet["url"] + "/")
    d.execute_script("sessionStorage.clear()")
    d.get(fleet["url"] + "/")
    assert "enter the API key" in d.execute_script(
        "return document.getElementById('status').textContent")
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    d.find_element(By.ID, "key").send_keys("sk-wrong" + Keys.ENTER)
    wait(lambda: "HTTP 401" in d.execute_script(
        "return document.getElementById('status').textContent"), 10, "the 401")
    assert d.execute_script("return document.getElementById('model').options.length") == 0


# ---- without a browser ------------------------------------------------------

def get(url, key=None):
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {key}"} if key else {})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, dict(r.headers), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read().decode()


def test_page_headers_and_keys(fleet):
    st, h, body = get(fleet["url"] + "/")
    assert st == 200 and h["Content-Type"].startswith("text/html")
    csp = h["Content-Security-Policy"]
    for d in ("default-src 'none'", "script-src 'self'", "connect-src 'self'",
              "frame-ancestors 'none'", "base-uri 'none'"):
        assert d in csp, csp
    assert "unsafe" not in csp and "http" not in csp
    assert h["X-Content-Type-Options"] == "nosniff" and h["X-Frame-Options"] == "DENY"
    # no inline script or style: everything comes from the gateway's own paths
    assert not re.search(r"<script(?![^>]*\bsrc=)", body) and "<style" not in body
    assert not re.search(r"\son[a-z]+\s*=", body)  # no inline event handlers
    assert '<script src="/playground.js"' in body
    st, h, js = get(fleet["url"] + "/playground.js")
    assert st == 200 and h["Content-Type"].startswith("text/javascript")
    assert h["Content-Security-Policy"] == csp
    st, h, _ = get(fleet["url"] + "/playground.css")
    assert st == 200 and h["Content-Type"].startswith("text/css")
    st, h, _ = get(fleet["url"] + "/favicon.svg")
    assert st == 200 and h["Content-Type"] == "image/svg+xml"
    # the page needs no key; the API it calls does
    assert get(fleet["url"] + "/v1/models")[0] == 401
    assert get(fleet["url"] + "/v1/models", "sk-test")[0] == 200
    assert get(fleet["url"] + "/nothing-here")[0] == 404


def test_playground_off_is_404(fleet):
    gw, url = start_gateway(fleet["kafka"], fleet["bin"], fleet["prefix"],
                            "--gateway.playground", "false")
    try:
        for p in ("/", "/playground.js", "/playground.css", "/favicon.svg"):
            st, _, body = get(url + p)
            assert st == 404 and json.loads(body)["error"]["code"] == "not_found", (p, st)
        assert get(url + "/v1/models", "sk-test")[0] == 200
    finally:
        stop(gw)


def test_script_never_renders_text_as_markup():
    """Text reaches the page through textContent only: no innerHTML,
    outerHTML, insertAdjacentHTML, document.write or eval, and no external
    origin in the page or its script."""
    js = (WEB / "playground.js").read_text()
    code = re.sub(r"/\*.*?\*/", "", js, flags=re.S)
    for bad in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(",
                "new Function", "DOMParser", "createContextualFragment", "srcdoc"):
        assert bad not in code, bad
    assert "el.textContent = text" in code
    # the key goes only into the Authorization header, never into a URL
    assert "sessionStorage" in code and "localStorage" not in code
    assert not re.search(r"[?&](key|api_key|token)=", code)
    for f in [*WEB.glob("*.html"), *WEB.glob("*.js"), *WEB.glob("*.css")]:
        assert not re.search(r"https?://", re.sub(r"/\*.*?\*/", "", f.read_text(), flags=re.S)), f
