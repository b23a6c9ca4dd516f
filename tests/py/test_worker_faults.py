"""Fault-injection tests of `parley worker` against real Kafka and Redis.

The happy path, kill -9, SIGTERM, the two-worker Redis handoff and the
poison records (every DeadLetter code interleaved with good turns, checked
in test_worker_exactly_once_two_workers) live in test_worker_e2e.py; this
file reuses worker_kit.py's helpers and fault_kit.py's (produce, read back, count and
explain, restart a broker) and adds the faults of issue 8's verification:

  * the broker stopped and restarted mid-run (a private broker on a fixed
    port, restarted with its data kept);
  * a third worker joining mid-run under live load (cooperative
    rebalance; the moved conversations' first turns on the new owner start
    from KV read back from Redis);
  * Redis killed mid-run (a private Redis), followed by a rebalance whose
    handoff and prefetches then fail: turns complete by recomputing;
  * backpressure: 2000 turns produced at once against a small
    worker.max_inflight; the worker's RSS is sampled every 100 ms and must
    stay under a budget derived from its configuration;
  * a fatal error on the idempotent chunk producer (injected: the broker
    cannot raise one on demand): the producer is rebuilt, streaming goes on.

Every fault test prints its counts: turns sent, results, duplicates, lost
and redone (turns streamed by more than one attempt).  Services that a test
stops are private (deploy/kafka.sh / deploy/redis.sh with their own
PARLEY_RUN_DIR under tmp_path), so the shared test services are never
disturbed.
"""

import os
import re
import shutil
import signal
import subprocess
import threading
import time
from collections import defaultdict
from pathlib import Path

import pytest

msgpack = pytest.importorskip("msgpack")
ck = pytest.importorskip("confluent_kafka")

from worker_kit import (  # noqa: E402  (helpers only: no test functions)
    TRACEPARENT, Env, check_results, collect, free_port, http_get, metric, model, owned,
    read_to_end, turn_record)

__all__ = ["model"]  # the module-scoped cai-tiny model fixture, shared

REPO = Path(__file__).resolve().parents[2]
from fault_kit import (  # noqa: E402
    assert_exactly_once, produce_all, read_chunks, read_outputs, restart_broker, running, svc,
    tally, wait_results)


@pytest.fixture
def private_kafka(have_java, tmp_path):
    """A private single-node broker on a fixed port: (bootstrap, run_dir)."""
    run = tmp_path / "kafka-run"
    port = free_port()
    svc("kafka.sh", run, "start", PARLEY_KAFKA_PORT=str(port))
    yield f"127.0.0.1:{port}", run
    log = run / "kafka" / "broker.log"  # kept: kafka.sh stop deletes the run's data
    if log.exists():
        shutil.copy(log, tmp_path / "broker.log")
    svc("kafka.sh", run, "stop")


@pytest.fixture
def private_redis(tmp_path):
    run = tmp_path / "redis-run"
    svc("redis.sh", run, "start")
    yield (run / "redis.addr").read_text().strip(), run
    svc("redis.sh", run, "stop")


# -------------------------------------------------------------- tests

def test_broker_restart_mid_run_exactly_once(private_kafka, parley_bin, model, tmp_path):
    """The broker is stopped and restarted (about 10 s down) while two
    workers are busy, with transaction.timeout.ms (30 s) longer than the
    outage: both reconnect to the same address and survive, and every turn
    still gets exactly one committed TurnResult."""
    bootstrap, run = private_kafka
    env = Env(bootstrap, parley_bin, model, tmp_path)
    convs, turns = 10, 3
    try:
        for wid in ("b1", "b2"):
            env.start(wid, "--kafka.transaction.timeout.ms", "30000")
        sent = produce_all(env, convs, turns, max_tokens=12)
        rc = env.consumer("responses", "read_committed")
        first = wait_results(rc, 4, 90)
        assert len(first) >= 4, env.log("b1")[-2000:]
        rc.close()
        down = restart_broker(run, bootstrap)
        results, chunks = read_outputs(env, convs * turns, 150)
        counts = tally("broker restart", sent, results, chunks)
        aborts = {w: env.log(w).count("event=txn_abort ") for w in env.procs}
        renewed = {w: env.log(w).count("event=producer_rebuilt reason=abort ") for w in env.procs}
        print(f"broker unreachable for {down:.1f} s after {len(first)} results; "
              f"aborted transactions by worker {aborts}, producers renewed after them {renewed}")
        for wid in env.procs:
            assert env.procs[wid].poll() is None, env.log(wid)[-3000:]
        # every abort is followed by a new producer epoch before the next
        # transaction (a late request of the aborted one must not join it)
        assert aborts == renewed, env.log("b1")[-3000:]
        assert_exactly_once(env, counts, sent, results)
        check_results(env, results, chunks, convs, turns)
    finally:
        env.stop_all()
    for wid, p in env.procs.items():
        assert p.returncode == 0, env.log(wid)[-2000:]


def test_broker_outage_past_txn_timeout_worker_stays_up(private_kafka, parley_bin, model,
                                                        tmp_path):
    """The broker stays down longer than transaction.timeout.ms (4 s) while a
    transaction is open: the coordinator aborts it and librdkafka reports
    the late abort as a fatal producer error.  That is not a fence, so the
    worker rebuilds its transactional producer in place (same
    transactional.id), keeps its turns and uncommitted results, drops the
    ones the committed offsets show landed, and carries on: no worker
    exits, and still exactly one committed result per turn.

    The open transaction is not left to timing: o1 runs with
    PARLEY_TEST_TXN_HOLD, so its 5th transaction stays open 45 s once its
    records reached the broker (event=test_txn_hold); the broker is stopped
    right then, kept down 6 s and started again, and its coordinator aborts
    the timed-out transaction while o1 still holds it, so o1's next step
    meets the fatal error every time.  Turns keep arriving through the outage
    (a new single-turn conversation every 50 ms).  The rebuild is asserted
    every run, on o1 at least, with exactly one rebuild per fatal error."""
    bootstrap, run = private_kafka
    env = Env(bootstrap, parley_bin, model, tmp_path)
    sent, results = [], []
    stop = threading.Event()

    def flow():
        p = ck.Producer({"bootstrap.servers": env.bootstrap, "enable.idempotence": True,
                         "linger.ms": 5})
        while not stop.is_set():
            c = len(sent)
            p.produce(env.topics["turns"], key=f"conv-{c}", value=turn_record(c, 0, 4),
                      headers=[("traceparent", TRACEPARENT)])
            sent.append(f"conv-{c}-t0")
            p.poll(0)
            time.sleep(0.05)
        assert p.flush(60) == 0

    producer = threading.Thread(target=flow)
    try:
        args = ("--kafka.transaction.timeout.ms", "4000", "--kafka.session.timeout.ms", "30000",
                "--worker.txn_interval_ms", "1")
        env.start("o1", *args, env={"PARLEY_TEST_TXN_HOLD": "5:45000"})
        env.start("o2", *args)
        rc = env.consumer("responses", "read_committed")
        producer.start()
        results += wait_results(rc, 10, 90)  # results are streaming
        end = time.time() + 90
        while time.time() < end and "event=test_txn_hold " not in env.log("o1"):
            time.sleep(0.05)
        assert "event=test_txn_hold " in env.log("o1"), env.log("o1")[-3000:]
        # The restarted coordinator looks for timed-out transactions every
        # 200 ms (default 10 s), before the workers' own aborts.
        down = restart_broker(run, bootstrap, hold=6.0, props=[
            "transaction.abort.timed.out.transaction.cleanup.interval.ms=200"])
        time.sleep(2)
        stop.set()
        producer.join()
        results += wait_results(rc, len(sent) - len(results), 120)
        results += read_to_end(rc)
        rc.close()
        chunks = read_chunks(env, results)
        counts = tally("broker outage past the transaction timeout", set(sent), results, chunks)
        fatal = {w: env.log(w).count("event=producer_fatal ") for w in env.procs}
        rebuilt = {w: env.log(w).count("event=producer_rebuilt reason=fatal ")
                   for w in env.procs}
        print(f"broker down {down:.1f} s under o1's open transaction; fatal producer errors by "
              f"worker {fatal}, producers rebuilt {rebuilt}")
        for wid, p in env.procs.items():
            assert p.poll() is None, env.log(wid)[-3000:]
            assert "event=kafka_fatal" not in env.log(wid), env.log(wid)[-3000:]
        assert_exactly_once(env, counts, sent, results)
        check_results(env, results, chunks, len(sent), 1)
        assert fatal["o1"] >= 1, env.log("o1")[-3000:]  # the held transaction was aborted
        assert all(rebuilt[w] == fatal[w] for w in env.procs), (fatal, rebuilt)
    finally:
        stop.set()
        if producer.is_alive():
            producer.join()
        env.stop_all()
    for wid, p in env.procs.items():
        assert p.returncode == 0, env.log(wid)[-2000:]


def test_fenced_worker_exits(kafka_bootstrap, parley_bin, model, tmp_path):
    """A second instance started with the same worker.id takes over the
    transactional.id: the first one's next transaction is fenced, which is
    not rebuilt around (two live workers with one id is a deployment
    error): it exits with status 1.  The successor serves every turn
    exactly once."""
    env = Env(kafka_bootstrap, parley_bin, model, tmp_path)
    convs = 8
    try:
        env.start("f1")
        end = time.time() + 30
        while time.time() < end and owned(env, "f1") < 4:
            time.sleep(0.2)
        assert owned(env, "f1") == 4, env.log("f1")[-2000:]
        env.start("f1-twin", "--worker.id", "f1")
        while time.time() < end + 30 and "event=worker_ready" not in env.log("f1-twin"):
            time.sleep(0.2)
        assert "event=worker_ready" in env.log("f1-twin"), env.log("f1-twin")[-2000:]
        sent = produce_all(env, convs, 1, max_tokens=4)
        try:
            env.procs["f1"].wait(60)
        except subprocess.TimeoutExpired:
            raise AssertionError("fenced worker still running:\n" + env.log("f1")[-3000:])
        log = env.log("f1")
        assert env.procs["f1"].returncode == 1, log[-2000:]
        assert "event=kafka_fatal" in log and "fenced" in log.lower(), log[-2000:]
        assert "event=producer_rebuilt" not in log
        rc = env.consumer("responses", "read_committed")
        results = collect(rc, convs, 60) + read_to_end(rc)
        rc.close()
        ids = [msgpack.unpackb(m.value(), raw=False)["turn_id"] for m in results]
        print(f"\nfence: sent={len(sent)} results={len(ids)} by "
              f"{sorted(set(msgpack.unpackb(m.value(), raw=False)['worker'] for m in results))}")
        assert sorted(ids) == sorted(sent), ids
        assert env.procs["f1-twin"].poll() is None, env.log("f1-twin")[-2000:]
    finally:
        env.stop_all()


@pytest.mark.parametrize("mode", ["open", "landed"])
def test_txn_producer_fatal_keeps_work(kafka_bootstrap, parley_bin, model, tmp_path, mode):
    """A fatal error on the transactional producer that is not a fence
    (injected with rd_kafka_test_fatal_error through
    PARLEY_TEST_TXN_FATAL_AFTER, deterministic where a broker outage only
    sometimes hits an open transaction), under load: the worker keeps its
    running turns and its batch, rebuilds the producer and commits them, so
    nothing is lost, doubled or redone.  "open": the failed transaction
    never landed, so the whole batch must be committed again; "landed": it
    did commit and only the client saw an error, so the reconcile must drop
    exactly the outputs the committed offsets cover (else they would be
    doubled)."""
    env = Env(kafka_bootstrap, parley_bin, model, tmp_path)
    convs, turns = 12, 3
    inj = "1:landed" if mode == "landed" else "1"
    try:
        env.start("tf", "--worker.txn_interval_ms", "1",
                  env={"PARLEY_TEST_TXN_FATAL_AFTER": inj})
        sent = produce_all(env, convs, turns, max_tokens=6)
        results, chunks = read_outputs(env, convs * turns, 120)
        counts = tally(f"txn producer fatal ({mode})", sent, results, chunks)
        log = env.log("tf")
        rec = re.findall(r"event=batch_reconciled landed=(\d+) kept=(\d+)", log)
        print(f"batch reconciled (landed, kept): {rec}")
        assert "event=producer_fatal " in log and "event=producer_rebuilt " in log, log[-3000:]
        assert "event=kafka_fatal" not in log, log[-3000:]
        assert env.procs["tf"].poll() is None, log[-3000:]
        assert_exactly_once(env, counts, sent, results)
        assert counts["redone"] == 0, counts
        check_results(env, results, chunks, convs, turns)
        assert len(rec) == 1
        if mode == "landed":
            assert int(rec[0][0]) >= 1, rec
        else:
            assert int(rec[0][0]) == 0, rec
    finally:
        env.stop_all()
    assert env.procs["tf"].returncode == 0, env.log("tf")[-2000:]


def test_partition_revoked_while_paused_is_served_when_it_returns(kafka_bootstrap, parley_bin,
                                                                 model, tmp_path):
    """Regression test for the lost turns of a fresh clone's CI run:
    librdkafka (2.0.2: rdkafka_assignment.c) clears only its own pause flag
    when it unassigns or assigns a partition, not the application's, and
    the worker's resume covers only what is assigned; so a partition
    revoked (or lost) while the worker was paused (there: during a
    producer rebuild; also backpressure or shutdown) was never fetched
    again once it came back, and every later turn on it was lost.

    w1's transactional producer fails (injected) and its rebuild is held
    (PARLEY_TEST_REBUILD_HOLD_FILE) until w1 has logged the revocation, so
    it is paused when w2 joins and takes partitions from it; the rebuild
    ends and w1 resumes what it still owns; w2 leaves and w1 gets the
    partitions back, unpaused.  Turns produced to exactly those partitions
    must all be served.  (The hold was 10 s once: on a loaded machine w2's
    join took longer and the revocation came after the rebuild.)"""
    env = Env(kafka_bootstrap, parley_bin, model, tmp_path, partitions=4)
    rc = env.consumer("responses", "read_committed")
    hold = tmp_path / "rebuild.hold"
    hold.write_text("")
    try:
        env.start("w1", "--worker.txn_interval_ms", "1",
                  env={"PARLEY_TEST_TXN_FATAL_AFTER": "1",
                       "PARLEY_TEST_REBUILD_HOLD_FILE": str(hold)})
        sent = produce_turns(env, range(8), 4)
        results = collect(rc, len(sent), 60)  # the first transaction commits
        sent |= produce_turns(env, range(8, 16), 4)  # the second one fails
        end = time.time() + 60
        while time.time() < end and "event=producer_fatal " not in env.log("w1"):
            time.sleep(0.1)
        assert "event=producer_fatal " in env.log("w1"), env.log("w1")[-2000:]
        env.start("w2")
        end = time.time() + 60
        while time.time() < end and owned(env, "w2") == 0:
            time.sleep(0.2)
        pat = r"event=revoked partitions=\d+ ids=([\d,]+) inflight=\d+ paused=(\d)"
        end = time.time() + 60
        while time.time() < end and not re.search(pat, env.log("w1")):
            time.sleep(0.2)
        revoked = re.findall(pat, env.log("w1"))
        hold.unlink()  # the rebuild may go on
        print(f"\nw1 revocations (ids, paused): {revoked}")
        back = sorted({int(i) for ids, p in revoked if p == "1" for i in ids.split(",")})
        assert back, env.log("w1")[-2000:]
        end = time.time() + 60
        while time.time() < end and "event=producer_rebuilt " not in env.log("w1"):
            time.sleep(0.2)
        assert "event=producer_rebuilt " in env.log("w1"), env.log("w1")[-2000:]
        results += collect(rc, len(sent) - len(results), 60)
        env.procs["w2"].send_signal(signal.SIGTERM)
        env.procs["w2"].wait(30)
        end = time.time() + 60  # w1 owns all 4 partitions again
        while time.time() < end and owned(env, "w1") != 4:
            time.sleep(0.2)
        assert owned(env, "w1") == 4, env.log("w1")[-2000:]
        sent |= produce_turns(env, range(100, 100 + 4 * len(back)), 4, partitions=back)
        results += collect(rc, len(sent) - len(results), 60) + read_to_end(rc)
        seen = [msgpack.unpackb(m.value(), raw=False)["turn_id"] for m in results]
        lost = sent - set(seen)
        print(f"revoked while paused, then returned (partitions {back}): sent={len(sent)} "
              f"results={len(seen)} lost={len(lost)} duplicates={len(seen) - len(set(seen))}")
        assert not lost, (sorted(lost)[:10], env.log("w1")[-3000:])
        assert len(seen) == len(set(seen))
    finally:
        hold.unlink(missing_ok=True)
        rc.close()
        env.stop_all()


def produce_turns(env, convs, max_tokens, partitions=None):
    """One first turn for each conversation number in convs (round-robin
    onto `partitions` when given, else by key); returns the turn ids."""
    p = ck.Producer({"bootstrap.servers": env.bootstrap, "enable.idempotence": True,
                     "linger.ms": 5})
    for i, c in enumerate(convs):
        kw = {"partition": partitions[i % len(partitions)]} if partitions else {}
        p.produce(env.topics["turns"], key=f"conv-{c}", value=turn_record(c, 0, max_tokens),
                  headers=[("traceparent", TRACEPARENT)], **kw)
    assert p.flush(30) == 0
    return {f"conv-{c}-t0" for c in convs}


def test_chunk_producer_fatal_is_rebuilt(kafka_bootstrap, parley_bin, model, tmp_path):
    """A fatal error on the idempotent chunk producer (injected with
    librdkafka's rd_kafka_test_fatal_error through
    PARLEY_TEST_CHUNK_FATAL_AFTER: the real broker cannot be made to
    raise one on demand) does not end streaming: the worker builds a new
    chunk producer, every turn still gets exactly one result, and the turns
    served after the rebuild stream complete chunk sequences."""
    env = Env(kafka_bootstrap, parley_bin, model, tmp_path)
    convs = 6
    try:
        env.start("cf", env={"PARLEY_TEST_CHUNK_FATAL_AFTER": "5"})
        rc = env.consumer("responses", "read_committed")
        sent = produce_all(env, convs, 1, max_tokens=8)
        first = collect(rc, convs, 60)
        assert len(first) == convs, env.log("cf")[-3000:]
        log = env.log("cf")
        assert "event=chunk_producer_rebuilt" in log, log[-3000:]
        sent |= produce_all(env, convs, 2, max_tokens=8, first=1)
        second = collect(rc, convs, 60) + read_to_end(rc)
        rc.close()
        results = first + second
        chunks = read_chunks(env, second)
        counts = tally("chunk producer fatal", sent, results, chunks)
        assert_exactly_once(env, counts, sent, results)
        by_attempt = defaultdict(list)
        for m in chunks:
            ch = msgpack.unpackb(m.value(), raw=False)
            by_attempt[(ch["turn_id"], ch["attempt"])].append(ch)
        for m in second:
            r = msgpack.unpackb(m.value(), raw=False)
            cs = sorted(by_attempt[(r["turn_id"], r["attempt"])], key=lambda x: x["seq"])
            assert [x["seq"] for x in cs] == list(range(len(cs))) and cs[-1]["last"], r["turn_id"]
            assert "".join(x["text"] for x in cs) == r["text"], r["turn_id"]
        assert env.procs["cf"].poll() is None, env.log("cf")[-2000:]
        print(f"chunk producer rebuilds: {env.log('cf').count('event=chunk_producer_rebuilt')}")
    finally:
        env.stop_all()
    assert "chunk_rebuilds=1 " in env.log("cf"), env.log("cf")[-2000:]


def test_backpressure_on_kv_memory(kafka_bootstrap, parley_bin, model, tmp_path):
    """The in-flight budget is out of reach (worker.max_inflight 100000) and
    the KV pool is tiny (cache.budget_mib 1).  A first wave of long turns
    fills the pool with running sequences: the worker pauses its partitions
    for KV memory.  A second wave produced meanwhile stays unconsumed while
    the pause holds; once the pool drains the worker resumes, and every
    turn of both waves is answered exactly once.

    The pool is held by the test, not by the length of the first wave: with
    PARLEY_TEST_ENGINE_HOLD=kv_pause:FILE the worker holds its engine (no
    step runs) from the moment it pauses for KV memory until the test
    removes the file, so
    the pause lasts through the second wave however fast or loaded the
    machine is (a first wave sized to outlast the window drained within it
    on a loaded 2-core Zen 4).  The pause and the resume are still the
    worker's own marks: the hold only stops the engine."""
    env = Env(kafka_bootstrap, parley_bin, model, tmp_path, partitions=2)
    wave1, wave2 = 40, 120
    port = free_port()
    hold = tmp_path / "kv-hold"
    hold.touch()

    def metrics():
        status, text = http_get(port, "/metrics")
        assert status == 200
        return text

    def kv_paused(text):
        return 'parley_backpressure_paused{reason="kv_memory"} 1' in text

    try:
        proc = env.start("k1", "--worker.max_inflight", "100000", "--cache.budget_mib", "1",
                         "--worker.pause_kv_pct", "60", "--worker.resume_kv_pct", "30",
                         "--worker.http", f"127.0.0.1:{port}",
                         env={"PARLEY_TEST_ENGINE_HOLD": f"kv_pause:{hold}"})
        sent = produce_all(env, wave1, 1, max_tokens=400)
        end = time.time() + 120
        while time.time() < end and not kv_paused(metrics()):
            assert proc.poll() is None, env.log("k1")[-3000:]
            time.sleep(0.05)
        text = metrics()
        assert kv_paused(text), env.log("k1")[-3000:]
        assert "event=test_engine_hold held=1" in env.log("k1")  # logged before the gauge moved
        consumed_at_pause = metric(text, "parley_records_consumed_total")
        pauses_at_pause = metric(text, "parley_backpressure_kv_pauses_total")
        steps_at_pause = metric(text, "parley_sched_steps_total")
        held = metric(text, "parley_kv_held_ratio")
        p = ck.Producer({"bootstrap.servers": env.bootstrap, "enable.idempotence": True})
        for c in range(wave2):
            p.produce(env.topics["turns"], key=f"conv-{1000 + c}",
                      value=turn_record(1000 + c, 0, 8))
        assert p.flush(30) == 0
        sent |= {f"conv-{1000 + c}-t0" for c in range(wave2)}
        # The hold keeps the pool (and so the pause) for as long as this
        # takes; the second only gives a worker that wrongly consumed while
        # paused the time to show it.
        time.sleep(1.0)
        text = metrics()
        still_paused = kv_paused(text) and \
            metric(text, "parley_backpressure_kv_pauses_total") == pauses_at_pause
        consumed_while_paused = metric(text, "parley_records_consumed_total")
        steps_held = metric(text, "parley_sched_steps_total") - steps_at_pause
        hold.unlink()  # the engine runs again; the pool drains; the worker resumes
        rc = env.consumer("responses", "read_committed")
        results = collect(rc, len(sent), 180) + read_to_end(rc)
        rc.close()
        text = metrics()
        assert proc.poll() is None, env.log("k1")[-3000:]
        kv_pauses = metric(text, "parley_backpressure_kv_pauses_total")
        ids = [msgpack.unpackb(m.value(), raw=False)["turn_id"] for m in results]
        print(f"\nkv backpressure: paused for KV memory with {consumed_at_pause:.0f} turns "
              f"consumed, KV held {held:.2f} of the pool; second wave of {wave2} produced, "
              f"consumed after the window {consumed_while_paused:.0f} (the first pause still held: "
              f"{still_paused}, engine steps while held {steps_held:.0f}); "
              f"results={len(ids)}/{len(sent)} kv pauses={kv_pauses:.0f}")
        assert held >= 0.6
        assert still_paused, env.log("k1")[-3000:]
        assert steps_held <= 1  # at most the step in progress when the hold began
        assert consumed_while_paused == consumed_at_pause  # nothing of the second wave taken
        assert sorted(ids) == sorted(sent)
        assert kv_pauses >= 1
        assert "event=pause reason=kv_memory" in env.log("k1")
        assert "event=test_engine_hold held=0" in env.log("k1")
        assert metric(text, "parley_kv_held_ratio") <= 0.3  # drained: below the resume mark
        assert not kv_paused(text)
    finally:
        if hold.exists():
            hold.unlink()
        env.stop_all()
    assert env.procs["k1"].returncode == 0, env.log("k1")[-2000:]


def test_third_worker_joins_under_load(kafka_bootstrap, redis_addr, parley_bin, model,
                                       tmp_path):
    """Two workers serve a live load; a third joins mid-run.  Cooperative
    rebalance moves some conversations to it: exactly one result per turn,
    and each moved conversation's first turn on the new owner reports
    cached tokens (its KV came from Redis), as does its /metrics."""
    env = Env(kafka_bootstrap, parley_bin, model, tmp_path, partitions=6)
    redis = f"{redis_addr[0]}:{redis_addr[1]}"
    convs, turns = 12, 4
    port = free_port()
    try:
        env.start("j1", "--redis.addr", redis)
        env.start("j2", "--redis.addr", redis)
        sent = produce_all(env, convs, 1, max_tokens=8)  # turn 0 of every conversation
        rc = env.consumer("responses", "read_committed")
        first = wait_results(rc, convs, 120)  # turn 0 done everywhere
        assert len(first) >= convs, env.log("j1")[-2000:]
        rc.close()
        t_join = time.time()
        env.start("j3", "--redis.addr", redis, "--worker.http", f"127.0.0.1:{port}")
        # the later turns go out once j3 owns partitions, so some of them
        # are served by j3 whatever the scheduling of the two others
        end = time.time() + 60
        while time.time() < end and owned(env, "j3") == 0:
            time.sleep(0.3)
        assert owned(env, "j3") > 0, env.log("j3")[-2000:]
        sent |= produce_all(env, convs, turns, max_tokens=8, first=1)
        results, chunks = read_outputs(env, convs * turns, 150)
        counts = tally("third worker joins", sent, results, chunks)
        assert_exactly_once(env, counts, sent, results)
        check_results(env, results, chunks, convs, turns)
        by_conv = defaultdict(list)
        for m in results:
            r = msgpack.unpackb(m.value(), raw=False)
            by_conv[r["conversation_id"]].append(r)
        moved = {}
        for conv, rs in by_conv.items():
            rs.sort(key=lambda r: int(r["turn_id"].rsplit("-t", 1)[1]))
            k = next((i for i, r in enumerate(rs) if r["worker"] == "j3"), None)
            if k:  # served elsewhere first, then by j3
                moved[conv] = rs[k]["usage"]["cached_tokens"]
        status, text = http_get(port, "/metrics")
        assert status == 200
        hits = metric(text, 'parley_cache_hits_total{tier="redis"}')
        print(f"j3 joined {time.time() - t_join:.1f} s before the end; moved conversations "
              f"and the cached tokens of their first turn on j3: {moved}; j3 redis hits={hits:.0f}")
        assert moved, "no conversation moved to the joining worker"
        assert all(v > 0 for v in moved.values()), moved
        assert hits > 0
    finally:
        env.stop_all()
    for wid, p in env.procs.items():
        assert p.returncode == 0, env.log(wid)[-2000:]


def test_redis_killed_mid_run_turns_recompute(kafka_bootstrap, private_redis, parley_bin,
                                              model, tmp_path):
    """Redis is killed (SIGKILL) under a worker that uses it, between turns
    of live conversations; a second worker then joins, so the revocation
    handoff and the new owner's prefetches meet a dead Redis.  Every turn
    completes (stop/length, no error) by recomputing, exactly once.  r2
    reads nothing from Redis; what its first turns find cached is at most
    what it computed itself (the system prompt all conversations share,
    once one of them has finished a turn on r2)."""
    addr, run = private_redis
    env = Env(kafka_bootstrap, parley_bin, model, tmp_path)
    convs, turns = 10, 4
    port, port2 = free_port(), free_port()
    try:
        env.start("r1", "--redis.addr", addr, "--redis.timeout_ms", "100",
                  "--worker.http", f"127.0.0.1:{port}")
        sent = produce_all(env, convs, 2, max_tokens=8)
        rc = env.consumer("responses", "read_committed")
        first = wait_results(rc, 2 * convs, 120)
        assert len(first) == 2 * convs, env.log("r1")[-2000:]
        rc.close()
        status, text = http_get(port, "/metrics")
        assert status == 200
        lookups_before = metric(text, 'parley_cache_lookups_total{tier="redis"}')
        up_before = metric(text, "parley_cache_redis_up")
        redis_pid = int((run / "redis.pid").read_text())
        os.kill(redis_pid, signal.SIGKILL)
        end = time.time() + 30
        while time.time() < end and running(redis_pid):  # gone, not merely signalled
            time.sleep(0.05)
        assert not running(redis_pid)
        env.start("r2", "--redis.addr", addr, "--redis.timeout_ms", "100",
                  "--worker.http", f"127.0.0.1:{port2}")
        end = time.time() + 60
        while time.time() < end and "event=assigned partitions=2" not in env.log("r2"):
            time.sleep(0.3)
        assert "event=assigned partitions=2" in env.log("r2"), env.log("r2")[-2000:]
        sent |= produce_all(env, convs, turns, max_tokens=8, first=2)
        results, chunks = read_outputs(env, convs * turns, 150)
        counts = tally("redis killed", sent, results, chunks)
        status, text = http_get(port, "/metrics")
        assert status == 200
        redis_up = metric(text, "parley_cache_redis_up")
        status, text2 = http_get(port2, "/metrics")
        assert status == 200
        r2_redis_tokens = metric(text2, 'parley_cache_hit_tokens_total{tier="redis"}')
        r2_first = min(r["usage"]["prompt_tokens"] for r in
                       (msgpack.unpackb(m.value(), raw=False) for m in results)
                       if r["worker"] == "r2")
        by_worker = defaultdict(int)
        moved = {}  # conversation -> cached tokens of its first turn on r2
        for m in sorted(results, key=lambda m: (m.partition(), m.offset())):
            r = msgpack.unpackb(m.value(), raw=False)
            by_worker[r["worker"]] += 1
            if r["worker"] == "r2" and r["conversation_id"] not in moved:
                moved[r["conversation_id"]] = r["usage"]["cached_tokens"]
        handoff = [l for l in env.log("r1").splitlines() if "event=kv_handoff" in l]
        print(f"before the kill: r1 redis lookups={lookups_before:.0f} up={up_before:.0f}; "
              f"results by worker {dict(by_worker)}; r1 parley_cache_redis_up after="
              f"{redis_up:.0f}; r2 first turns' cached tokens {moved}; r1 handoff {handoff}")
        assert lookups_before > 0 and up_before == 1  # r1 did use Redis before it died
        for wid in env.procs:
            assert env.procs[wid].poll() is None, env.log(wid)[-3000:]
        assert_exactly_once(env, counts, sent, results)
        check_results(env, results, chunks, convs, turns)  # all stop/length
        assert redis_up == 0
        assert moved, "no conversation moved to r2"
        assert r2_redis_tokens == 0, text2  # recomputed: no Redis to read
        assert 0 in moved.values(), moved  # the first moved conversation found nothing
        # nothing beyond a prefix shorter than any prompt (the shared system
        # prompt), so no conversation's own history came from anywhere
        assert all(v < r2_first for v in moved.values()), (moved, r2_first)
    finally:
        env.stop_all()
    for wid, p in env.procs.items():
        assert p.returncode == 0, env.log(wid)[-2000:]


def rss_kib(pid):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def test_backpressure_bounds_rss(kafka_bootstrap, parley_bin, model, tmp_path):
    """2000 small turns arrive at once, far faster than one worker with
    worker.max_inflight=8 serves them.  The worker pauses its partitions:
    in-flight turns stay within the bound and its RSS, sampled every
    100 ms, stays under its idle RSS (model loaded, clients up) + the cache
    budget + the fetch queue + 16 MiB (thread stacks, scheduler and batch
    state of 8 small turns, librdkafka buffers; the peak over idle measured
    6.5 MiB of the 36 MiB this allows, with the cache never full)."""
    env = Env(kafka_bootstrap, parley_bin, model, tmp_path, partitions=4)
    max_inflight, cache_mib, queue_kib = 8, 16, 4096
    convs, turns = 400, 5
    port = free_port()
    samples, inflight = [], []
    stop = threading.Event()
    try:
        proc = env.start("p1", "--worker.max_inflight", str(max_inflight),
                         "--cache.budget_mib", str(cache_mib),
                         "--kafka.queued.max.messages.kbytes", str(queue_kib),
                         "--worker.http", f"127.0.0.1:{port}", "--worker.grace_ms", "0")
        end = time.time() + 30
        while time.time() < end and "event=assigned" not in env.log("p1"):
            time.sleep(0.2)
        assert "event=assigned" in env.log("p1"), env.log("p1")[-2000:]
        idle_rss = rss_kib(proc.pid)

        def sample():
            while not stop.is_set() and proc.poll() is None:
                samples.append(rss_kib(proc.pid))
                stop.wait(0.1)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        t0 = time.time()
        sent = produce_all(env, convs, turns, max_tokens=1)
        produce_s = time.time() - t0
        # Sample while the flood is being served: at least 100 RSS samples
        # (10 s), and until the worker has paused; the assertions below
        # hold at any speed (a faster worker only serves more of the flood).
        end = time.time() + 120
        while time.time() < end:
            status, text = http_get(port, "/metrics")
            assert status == 200
            inflight.append(metric(text, "parley_inflight_turns"))
            pauses = metric(text, "parley_backpressure_pauses_total")
            if len(samples) >= 100 and pauses >= 1:
                break
            time.sleep(0.25)
        window = time.time() - t0
        status, text = http_get(port, "/metrics")
        served = metric(text, "parley_turns_total")
        pauses = metric(text, "parley_backpressure_pauses_total")
        stop.set()
        sampler.join()
        assert proc.poll() is None, env.log("p1")[-3000:]
        serve_rate = served / (time.time() - t0)
        produce_rate = len(sent) / produce_s
        budget_kib = idle_rss + cache_mib * 1024 + queue_kib + 16 * 1024
        peak = max(samples)
        print(f"\nbackpressure: produced {len(sent)} turns at {produce_rate:.0f}/s, worker "
              f"served {served:.0f} in {window:.0f} s ({serve_rate:.1f}/s, "
              f"{produce_rate / max(serve_rate, 1e-9):.0f}x slower); pauses={pauses:.0f}; "
              f"max inflight={max(inflight):.0f} (bound {max_inflight}); RSS idle="
              f"{idle_rss / 1024:.1f} MiB peak={peak / 1024:.1f} MiB over {len(samples)} "
              f"samples; budget={budget_kib / 1024:.1f} MiB (idle {idle_rss / 1024:.1f} + "
              f"cache {cache_mib} + fetch queue {queue_kib // 1024} + slack 16)")
        assert served > 0
        assert pauses >= 1  # it was behind: the flood paused it
        assert max(inflight) <= max_inflight
        assert len(samples) >= 100
        assert peak < budget_kib
    finally:
        stop.set()
        env.stop_all()
    assert env.procs["p1"].returncode == 0, env.log("p1")[-2000:]
