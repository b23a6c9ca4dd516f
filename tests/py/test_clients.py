"""End-to-end tests of the `parley load` and `parley chat` clients against
the real Kafka broker and a real `parley worker` on a synthetic cai-tiny
model.

One worker serves a fresh set of topics (module-scoped, so both tests share
it and its start-up cost):

  * `parley load` sends 10 conversations x 3 turns with Poisson arrivals at
    20 turns/s and streaming on; it must exit 0 and its machine-readable
    last line must report every turn done, lost=0, duplicated=0, measured
    TTFT and a cache share above 0 (later turns reuse the earlier prefix);
    the results on the responses topic are cross-checked independently:
    exactly one committed TurnResult per turn it sent.
  * `parley chat --file` with three user lines prints three streamed
    replies, each followed by its `[turn N]` statistics line; turns 2 and 3
    report cached prompt tokens > 0, and each statistics line's prompt
    length grows as the history does.
"""

import re
import signal
import subprocess
import time
import uuid
from collections import Counter

import pytest

msgpack = pytest.importorskip("msgpack")
ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402


@pytest.fixture(scope="module")
def served(kafka_bootstrap, parley_bin, tmp_path_factory):
    """Topics under a fresh prefix and one worker serving them."""
    tmp = tmp_path_factory.mktemp("clients")
    model = tmp / "cai-tiny.gguf"
    subprocess.run([str(parley_bin), "mkmodel", "--preset", "cai-tiny", "--out", str(model)],
                   check=True, capture_output=True, timeout=60)
    prefix = f"cl-{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    futs = admin.create_topics([NewTopic(f"{prefix}.{k}", 4 if k != "dlq" else 1, 1)
                                for k in ("turns", "tokens", "responses", "dlq")])
    for f in futs.values():
        f.result(30)
    log = open(tmp / "worker.log", "wb")
    proc = subprocess.Popen(
        [str(parley_bin), "worker",
         "--model.path", str(model),
         "--model.threads", "1",
         "--worker.id", f"w-{prefix}",
         "--worker.group", f"g-{prefix}",
         "--worker.topic.turns", f"{prefix}.turns",
         "--worker.topic.tokens", f"{prefix}.tokens",
         "--worker.topic.responses", f"{prefix}.responses",
         "--worker.topic.dlq", f"{prefix}.dlq",
         "--worker.chunk_tokens", "2",
         "--scheduler.batch_window_us", "2000",
         "--kafka.bootstrap.servers", kafka_bootstrap,
         "--kafka.session.timeout.ms", "6000",
         "--kafka.heartbeat.interval.ms", "500",
         "--kafka.transaction.timeout.ms", "8000"],
        stdout=log, stderr=subprocess.STDOUT)
    yield {"prefix": prefix, "bin": str(parley_bin), "brokers": kafka_bootstrap,
           "log": tmp / "worker.log"}
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def last_fields(stdout, tag):
    """key=value fields of the last line starting with `tag`."""
    lines = [ln for ln in stdout.splitlines() if ln.startswith(tag)]
    assert lines, f"no line starting with {tag!r} in:\n{stdout}"
    return dict(kv.split("=", 1) for kv in lines[-1][len(tag):].split() if "=" in kv)


def committed_results(brokers, topic, prefix_of_conv, want, timeout=20):
    """Count committed TurnResults per turn_id of conversations starting
    with prefix_of_conv, reading the topic from the beginning."""
    c = ck.Consumer({"bootstrap.servers": brokers, "group.id": f"chk-{uuid.uuid4().hex[:8]}",
                     "auto.offset.reset": "earliest", "enable.auto.commit": False,
                     "isolation.level": "read_committed"})
    c.subscribe([topic])
    counts = Counter()
    end = time.time() + timeout
    quiet_until = None
    try:
        while time.time() < end:
            m = c.poll(0.3)
            if m is None or m.error():
                if sum(counts.values()) >= want:
                    quiet_until = quiet_until or time.time() + 1.0
                    if time.time() > quiet_until:
                        break
                continue
            r = msgpack.unpackb(m.value(), raw=False)
            if r["conversation_id"].startswith(prefix_of_conv):
                counts[r["turn_id"]] += 1
    finally:
        c.close()
    return counts


def test_load_exactly_once_with_cache(served):
    s = served
    p = subprocess.run(
        [s["bin"], "load", "--brokers", s["brokers"], "--topic-prefix", s["prefix"],
         "--conversations", "10", "--turns", "3", "--rate", "20",
         "--user", "3:12", "--max-tokens", "4:10", "--temperature", "0",
         "--timeout-s", "40", "--grace-ms", "1000", "--stream", "--seed", "7"],
        capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr + s["log"].read_text(errors="replace")[-3000:]
    f = last_fields(p.stdout, "load:")
    assert f["turns"] == "30" and f["done"] == "30", p.stdout
    assert f["lost"] == "0" and f["duplicated"] == "0" and f["timeout"] == "0", p.stdout
    assert f["errors"] == "0", p.stdout
    assert float(f["cache_share"]) > 0, p.stdout
    assert int(f["cached_tokens"]) > 0 and int(f["prompt_tokens"]) > int(f["cached_tokens"])
    assert f["ttft_p50_ms"] != "n/a" and float(f["ttft_p50_ms"]) > 0, p.stdout
    assert float(f["total_p50_ms"]) >= float(f["ttft_p50_ms"])
    assert float(f["total_p99_ms"]) >= float(f["total_p50_ms"])
    assert float(f["turns_per_s"]) > 0 and float(f["tokens_per_s"]) > 0
    # independent check on the topic: one committed result per turn sent
    counts = committed_results(s["brokers"], f"{s['prefix']}.responses", "load-", 30)
    assert len(counts) == 30, counts
    assert set(counts.values()) == {1}, counts
    assert all(re.fullmatch(r"load-[0-9a-f]+-[0-9a-f]{4}-c\d-t[0-2]", t) for t in counts)


def test_chat_file_three_turns(served, tmp_path):
    s = served
    turns = tmp_path / "turns.txt"
    turns.write_text("Hello there, who are you?\n\nTell me about the river.\n"
                     "And the mountain?\n")
    conv = f"chat-{uuid.uuid4().hex[:8]}"
    p = subprocess.run(
        [s["bin"], "chat", "--brokers", s["brokers"], "--topic-prefix", s["prefix"],
         "--conversation", conv, "--system", "You are terse.", "--file", str(turns),
         "--max-tokens", "8", "--temperature", "0", "--timeout-ms", "20000"],
        capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    out = p.stdout
    assert out.count("assistant> ") >= 3, out
    stats = [dict(kv.split("=", 1) for kv in ln.split("] ", 1)[1].split())
             for ln in out.splitlines() if re.match(r"\[turn \d+\] finish=", ln)]
    assert len(stats) == 3, out
    assert [ln for ln in out.splitlines() if ln.startswith("[turn")][0].startswith("[turn 1]")
    for st in stats:
        assert st["finish"] in ("stop", "length")
        assert int(st["completion"]) >= 1
        assert float(st["client_total_ms"]) >= float(st["client_ttft_ms"]) > 0
        assert int(st["worker_total_ms"]) >= int(st["worker_ttft_ms"])
    prompts = [int(st["prompt"]) for st in stats]
    assert prompts[0] < prompts[1] < prompts[2], out
    assert int(stats[1]["cached"]) > 0 and int(stats[2]["cached"]) > 0, out
    # the authoritative replies on the topic match the streamed turns
    counts = committed_results(s["brokers"], f"{s['prefix']}.responses", conv, 3)
    assert sorted(counts.values()) == [1, 1, 1], counts
