"""The fault tests' kit: produce turns, read back every committed result and
chunk, count them (sent, results, duplicates, lost, redone) and explain a
failed exactly-once check, and stop/start private services (a broker
restarted with its data kept).  Shared by test_worker_faults.py,
test_cluster_faults.py, test_worker_liveness.py, test_kafka_versions.py and
tests/chaos/chaos.py; no tests of its own."""

import os
import re
import shutil
import signal
import subprocess
import time
from collections import defaultdict
from pathlib import Path

import msgpack
import confluent_kafka as ck
from confluent_kafka.admin import AdminClient

from worker_kit import TRACEPARENT, collect, read_to_end, turn_record

REPO = Path(__file__).resolve().parents[2]


def drain_idle(consumer, idle=2.0, limit=30.0):
    """Read until nothing arrived for `idle` seconds (or `limit` passed): for
    the at-least-once token topic; exactly-once checks use read_to_end."""
    out, end, last = [], time.time() + limit, time.time()
    while time.time() < end and time.time() - last < idle:
        m = consumer.poll(0.3)
        if m is not None and not m.error():
            out.append(m)
            last = time.time()
    return out


def read_chunks(env, results, limit=60.0):
    """Every token chunk, reading until each counted attempt's last chunk
    arrived (chunks are at-least-once and asynchronous: after a broker
    restart they can trail the committed results by seconds), then until
    the topic is idle; bounded by `limit`."""
    want = set()
    for m in results:
        r = msgpack.unpackb(m.value(), raw=False)
        want.add((r["turn_id"], r["attempt"]))
    tc = env.consumer("tokens", "read_uncommitted")
    out, end = [], time.time() + limit
    while time.time() < end and want:
        m = tc.poll(0.3)
        if m is None or m.error():
            continue
        out.append(m)
        ch = msgpack.unpackb(m.value(), raw=False)
        if ch.get("last"):
            want.discard((ch["turn_id"], ch["attempt"]))
    out += drain_idle(tc, 2)
    tc.close()
    return out


def produce_all(env, convs, turns, max_tokens, first=0):
    """Produce ChatTurns first..turns-1 of convs conversations turn-major;
    returns the turn ids."""
    p = ck.Producer({"bootstrap.servers": env.bootstrap, "enable.idempotence": True,
                     "linger.ms": 5})
    for t in range(first, turns):
        for c in range(convs):
            p.produce(env.topics["turns"], key=f"conv-{c}", value=turn_record(c, t, max_tokens),
                      headers=[("traceparent", TRACEPARENT)])
    assert p.flush(30) == 0
    return {f"conv-{c}-t{t}" for c in range(convs) for t in range(first, turns)}


def tally(name, sent_ids, results, chunks):
    """Print and return the counts of one fault run: turns sent, results,
    duplicates, lost, redone."""
    seen = defaultdict(int)
    for m in results:
        seen[msgpack.unpackb(m.value(), raw=False)["turn_id"]] += 1
    attempts = defaultdict(set)
    for m in chunks:
        ch = msgpack.unpackb(m.value(), raw=False)
        attempts[ch["turn_id"]].add(ch["attempt"])
    counts = {"sent": len(sent_ids), "results": len(results),
              "duplicates": sum(n - 1 for n in seen.values() if n > 1),
              "lost": len(sent_ids - set(seen)),
              "redone": sum(1 for a in attempts.values() if len(a) > 1)}
    print(f"\n{name}: " + " ".join(f"{k}={v}" for k, v in counts.items()))
    return counts


def where_lost(env, lost_ids, limit=20):
    """Explain lost turns: each one's input partition and offset (read
    back from the turns topic); whether a result of it exists uncommitted
    (a transaction left open or aborted: the read_committed view stops at
    it) or not at all (never answered); the worker group's committed
    offsets on the turns topic; and every worker's recovery, transaction
    and rebalance log lines, so a failure says where the loss happened."""
    tc = env.consumer("turns", "read_committed")
    pos = {}
    for m in drain_idle(tc, 3, 60):
        try:  # poison records are not maps (or not msgpack at all)
            rec = msgpack.unpackb(m.value(), raw=False)
        except Exception:
            continue
        tid = rec.get("turn_id") if isinstance(rec, dict) else None
        pos[tid] = (m.partition(), m.offset())
    tc.close()
    rc = env.consumer("responses", "read_uncommitted")
    uncommitted = defaultdict(list)
    for m in drain_idle(rc, 3, 60):
        try:
            tid = msgpack.unpackb(m.value(), raw=False).get("turn_id")
        except Exception:
            continue
        if tid in lost_ids:
            uncommitted[tid].append((m.partition(), m.offset()))
    rc.close()
    lines = [f"lost (partition, offset): "
             f"{sorted(pos.get(t, (None, None)) for t in lost_ids)[:limit]}",
             f"lost turns with an uncommitted result (partition, offset): "
             f"{dict(sorted(uncommitted.items())[:limit])}"]
    try:
        admin = AdminClient({"bootstrap.servers": env.bootstrap})
        fut = admin.list_consumer_group_offsets(
            [ck.ConsumerGroupTopicPartitions(env.group)])[env.group]
        got = fut.result(20)
        lines.append("group offsets on turns: " + ", ".join(
            f"{tp.partition}:{tp.offset}" for tp in sorted(got.topic_partitions,
                                                           key=lambda tp: tp.partition)))
    except Exception as e:  # the explanation must not hide the failure
        lines.append(f"group offsets on turns: unread ({e})")
    ev = re.compile(r"event=(producer_fatal|producer_rebuilt|rewound|rewind_retry|assigned|"
                    r"revoked|lost|offset_skip|init_transactions_retry|txn_\w+|"
                    r"reconcile\w*|batch_reconciled|consume_error|assign_failed) ")
    for wid in env.procs:
        lines += [f"{wid}: {ln}" for ln in env.log(wid).splitlines() if ev.search(ln)][-40:]
        lines += [f"{wid}: {ln}" for ln in poll_stack(env.procs[wid])]
    return "\n".join(lines)


def poll_stack(proc):
    """Where a live worker's threads that run parley code are (gdb, when
    installed): a worker alive but silent is blocked in some call, e.g. a
    transaction call of librdkafka that outlives its timeout (librdkafka
    #5456).  [] when the process is gone or gdb is missing."""
    if proc.poll() is not None or not shutil.which("gdb"):
        return []
    try:
        r = subprocess.run(["gdb", "-batch", "-p", str(proc.pid), "-ex", "thread apply all bt 16"],
                           capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return ["stack: gdb timed out"]
    out, cur = [], []
    for ln in r.stdout.splitlines() + ["Thread end"]:
        if ln.startswith("Thread "):
            if any((" wk_" in f and "wk_status_main" not in f) or " cm_" in f for f in cur):
                out += [f"stack: {f.strip()[:200]}" for f in cur]
            cur = [ln]
        elif ln.startswith("#"):
            cur.append(ln)
    return out


def where_doubled(env, results, limit=20):
    """Explain duplicated results: each copy's (partition, offset, attempt)
    on the responses topic, with every worker's transaction, recovery and
    rebalance log lines, so a failure says how the second copy landed."""
    copies = defaultdict(list)
    for m in results:
        r = msgpack.unpackb(m.value(), raw=False)
        copies[r["turn_id"]].append((m.partition(), m.offset(), r.get("attempt")))
    doubled = {t: c for t, c in copies.items() if len(c) > 1}
    lines = [f"doubled turn -> [(partition, offset, attempt)]: "
             f"{dict(sorted(doubled.items())[:limit])}"]
    ev = re.compile(r"event=(producer_fatal|producer_rebuilt|rewound|rewind_retry|assigned|"
                    r"revoked|lost|offset_skip|init_transactions_retry|txn_\w+|"
                    r"reconcile\w*|batch_reconciled) ")
    for wid in env.procs:
        lines += [f"{wid}: {ln}" for ln in env.log(wid).splitlines() if ev.search(ln)][-60:]
    return "\n".join(lines)


def assert_exactly_once(env, counts, sent, results):
    """The exactly-once check of a fault run, explaining a failure: where
    the lost turns were and how the doubled ones landed."""
    why = []  # in the assertion's message: a CI report may cut captured stdout
    if counts["lost"]:
        seen = {msgpack.unpackb(m.value(), raw=False)["turn_id"] for m in results}
        why.append(where_lost(env, set(sent) - seen))
    if counts["duplicates"]:
        why.append(where_doubled(env, results))
    assert counts["duplicates"] == 0 and counts["lost"] == 0, f"{counts}\n" + "\n".join(why)


def read_outputs(env, want, timeout):
    """All committed TurnResults (waiting for `want`, then for any
    duplicate) and every token chunk."""
    rc = env.consumer("responses", "read_committed")
    results = collect(rc, want, timeout)
    results += read_to_end(rc)
    rc.close()
    return results, read_chunks(env, results)


def svc(script, run_dir, verb, **env):
    e = dict(os.environ, PARLEY_RUN_DIR=str(run_dir), **env)
    r = subprocess.run([str(REPO / "deploy" / script), verb], env=e, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0 or verb == "stop", r.stderr
    return r


def wait_results(consumer, n, timeout):
    """Read committed results until n arrived; returns them."""
    got = []
    end = time.time() + timeout
    while time.time() < end and len(got) < n:
        got += collect(consumer, n - len(got), 2)
    return got


def running(pid):
    """Whether pid still runs: a killed process of another parent may stay a
    zombie until that parent reaps it."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def alive(pid):
    """Whether pid runs (a broker restarted by restart_broker is this
    process's child: reap it when it has exited)."""
    try:
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False
    except ChildProcessError:
        pass
    return Path(f"/proc/{pid}").exists()


def restart_broker(run, bootstrap, hold=0.0, props=()):
    """Stop the private broker cleanly, wait `hold` seconds and start it
    again on the same ports with the same data (kafka.sh stop would delete
    the data, so the broker is relaunched with its own command line), with
    the `props` lines added to its server.properties.  Returns the seconds
    it was unreachable."""
    pid = int((run / "kafka.pid").read_text())
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().rstrip(b"\0").split(b"\0")
    t0 = time.time()
    os.kill(pid, signal.SIGTERM)
    while alive(pid) and time.time() - t0 < 30:
        time.sleep(0.1)
    assert not alive(pid), "broker did not stop"
    time.sleep(hold)
    if props:
        with open(run / "kafka" / "server.properties", "a") as f:
            f.write("".join(f"{line}\n" for line in props))
    with open(run / "kafka" / "broker.log", "ab") as log:
        p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL, start_new_session=True)
    (run / "kafka.pid").write_text(f"{p.pid}\n")  # kafka.sh stop kills the new one
    end = time.time() + 60
    while time.time() < end:
        r = subprocess.run(["kcat", "-b", bootstrap, "-L", "-m", "3"], capture_output=True,
                           text=True)
        if "1 brokers:" in r.stdout:
            return time.time() - t0
        assert p.poll() is None, (run / "kafka" / "broker.log").read_text()[-3000:]
        time.sleep(0.3)
    raise AssertionError("broker not back after 60 s")
