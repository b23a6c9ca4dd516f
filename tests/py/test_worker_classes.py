"""Service classes through the worker (docs/service-classes.md): with one
running slot, a bulk ChatTurn part-way through its reply is parked when an
interactive turn arrives, both are answered once, the bulk turn's chunks
still add up to its result, and /metrics counts the classes; a bad
scheduler.tenant_weights stops the worker at start."""

import os
import time

import pytest

from worker_kit import Env, collect, free_port, http_get, metric, model  # noqa: F401

msgpack = pytest.importorskip("msgpack")
ck = pytest.importorskip("confluent_kafka")


def turn(conv, text, max_tokens, cls=None):
    rec = {"v": 1, "conversation_id": conv, "turn_id": f"{conv}-t0",
           "messages": [{"role": "user", "content": text}],
           "params": {"max_tokens": max_tokens, "temperature": 0.0}, "stream": True}
    if cls:
        rec["service_class"] = cls
    return msgpack.packb(rec)


def test_bulk_parked_for_interactive(kafka_bootstrap, parley_bin, model, tmp_path):  # noqa: F811
    env = Env(kafka_bootstrap, parley_bin, model, tmp_path, partitions=1)
    port = free_port()
    hold = tmp_path / "hold"  # while it exists, the engine stops at a first chunk
    hold.touch()
    rc = env.consumer("responses", "read_committed")
    tc = env.consumer("tokens", "read_uncommitted")
    p = ck.Producer({"bootstrap.servers": kafka_bootstrap})
    try:
        env.start("cls", "--scheduler.max_running", "1", "--worker.http", f"127.0.0.1:{port}",
                  "--scheduler.tenant_weights", "default=2,other-tenant=0.5",
                  env={"PARLEY_TEST_ENGINE_HOLD": f"chunk:{hold}"})
        end = time.time() + 60
        while time.time() < end and "event=assigned" not in env.log("cls"):
            time.sleep(0.1)
        p.produce(env.topics["turns"], key="bulk", value=turn("bulk", "a long bulk job", 64,
                                                               "bulk"))
        p.flush(10)
        end = time.time() + 60
        while time.time() < end and "held=1" not in env.log("cls"):
            time.sleep(0.05)
        assert "held=1" in env.log("cls"), env.log("cls")[-2000:]
        p.produce(env.topics["turns"], key="int", value=turn("int", "a person waits", 8))
        p.flush(10)
        sub = 'parley_sched_submitted_by_class_total{class="interactive"}'
        end = time.time() + 60
        while time.time() < end and metric(http_get(port, "/metrics")[1], sub) < 1:
            time.sleep(0.05)
        os.unlink(hold)  # the engine goes on: the bulk sequence is parked first
        res = {}
        for m in collect(rc, 2, 120):
            r = msgpack.unpackb(m.value(), raw=False)
            res[r["conversation_id"]] = r
        assert set(res) == {"bulk", "int"}, res
        for r in res.values():
            assert r["finish_reason"] in ("stop", "length"), r
        text = http_get(port, "/metrics")[1]
        assert metric(text, "parley_sched_class_preemptions_total") >= 1
        assert metric(text, "parley_sched_resumes_total") >= 1
        assert metric(text, "parley_sched_parked") == 0
        assert metric(text, 'parley_class_turns_total{class="bulk"}') == 1
        assert metric(text, 'parley_class_turns_total{class="interactive"}') == 1
        assert metric(text, 'parley_ttft_by_class_seconds_count{class="interactive"}') == 1
        assert 0 < metric(text, "parley_sched_bulk_step_ratio") < 1
        # the parked turn's stream has no gap and no repeat
        chunks = {}
        end = time.time() + 30
        while time.time() < end and sum(len(c["tokens"]) for c in chunks.values()) < \
                len(res["bulk"]["tokens"]):
            for m in collect(tc, 1, 1):
                c = msgpack.unpackb(m.value(), raw=False)
                if c["conversation_id"] == "bulk" and c["attempt"] == res["bulk"]["attempt"]:
                    chunks[c["seq"]] = c
        toks = [t for s in sorted(chunks) for t in chunks[s]["tokens"]]
        assert toks == res["bulk"]["tokens"]
    finally:
        rc.close()
        tc.close()
        env.stop_all()


def test_bad_tenant_weights_refused(kafka_bootstrap, parley_bin, model, tmp_path):  # noqa: F811
    """A scheduler.tenant_weights entry that is not NAMESPACE=WEIGHT (W > 0)
    stops the worker at start with a message naming the key."""
    env = Env(kafka_bootstrap, parley_bin, model, tmp_path, partitions=1)
    try:
        p = env.start("bad", "--scheduler.tenant_weights", "gold=3,free=0")
        assert p.wait(60) != 0
        log = env.log("bad")
        assert "scheduler.tenant_weights" in log and "free=0" in log, log[-2000:]
    finally:
        env.stop_all()
