"""Liveness of `parley worker`: /healthz fails while the poll loop is stuck.

A Kafka call can block the worker's poll thread for good (librdkafka
2.12.1's rd_kafka_send_offsets_to_transaction when the group coordinator's
broker leaves: librdkafka #5511, docs/known-gaps.md).  The worker cannot
unblock it, but it must not look healthy meanwhile: /healthz answers 503
once the loop has been silent for worker.stall_ms, and logs
event=loop_stalled once, so that an orchestrator's liveness probe
(deploy/k8s, the Containerfile's HEALTHCHECK) restarts it; exactly-once
holds through such a restart (the kill -9 tests).

The stuck call is played by PARLEY_TEST_TXN_HOLD, which holds the poll
thread inside a transaction (after its records reached the broker) for a
fixed time: the test waits on what it observes -- the hold's log line, the
503, the 200 after it -- never on a window sized for one machine.
"""
import time

import pytest

msgpack = pytest.importorskip("msgpack")
pytest.importorskip("confluent_kafka")

from worker_kit import Env, collect, free_port, http_get, model, read_to_end  # noqa: E402
from fault_kit import produce_all  # noqa: E402

__all__ = ["model"]  # the module-scoped cai-tiny model fixture, shared


def wait_for(what, cond, proc, log, timeout):
    end = time.time() + timeout
    while time.time() < end:
        if cond():
            return
        assert proc.poll() is None, log()[-3000:]
        time.sleep(0.05)
    raise AssertionError(f"not seen in {timeout} s: {what}\n" + log()[-3000:])


def test_healthz_fails_while_the_poll_loop_is_stuck(kafka_bootstrap, parley_bin, model, tmp_path):
    env = Env(kafka_bootstrap, parley_bin, model, tmp_path)
    port = free_port()
    hold_ms = 20000
    try:
        # the transaction timeout outlasts the hold: the hold is the only fault
        proc = env.start("s1", "--worker.http", f"127.0.0.1:{port}", "--worker.stall_ms", "1000",
                         "--kafka.transaction.timeout.ms", "60000",
                         env={"PARLEY_TEST_TXN_HOLD": f"0:{hold_ms}"})  # the 1st transaction
        log = lambda: env.log("s1")  # noqa: E731
        wait_for("worker_ready", lambda: "event=worker_ready" in log(), proc, log, 120)
        assert http_get(port, "/healthz") == (200, "ok\n")
        sent = produce_all(env, 4, 2, max_tokens=4)
        wait_for("the held transaction", lambda: "event=test_txn_hold" in log(), proc, log, 120)
        held_at = time.time()
        wait_for("/healthz 503", lambda: http_get(port, "/healthz")[0] == 503, proc, log,
                 hold_ms / 1000)
        status, body = http_get(port, "/healthz")
        stalled_after = time.time() - held_at
        wait_for("/healthz 200 after the hold", lambda: http_get(port, "/healthz")[0] == 200,
                 proc, log, 120)
        assert log().count("event=loop_stalled ") == 1, log()[-3000:]
        rc = env.consumer("responses", "read_committed")
        results = collect(rc, len(sent), 120) + read_to_end(rc)
        rc.close()
        ids = sorted(msgpack.unpackb(m.value(), raw=False)["turn_id"] for m in results)
        print(f"\nliveness: held {hold_ms} ms; /healthz {status} {body.strip()!r} "
              f"{stalled_after:.1f} s into the hold; {len(ids)} results for {len(sent)} turns")
        assert ids == sorted(sent)
        assert status == 503 and body.startswith("stalled: the poll loop has not run for ")
    finally:
        env.stop_all()
    assert env.procs["s1"].returncode == 0, env.log("s1")[-2000:]
