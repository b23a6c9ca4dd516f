#!/usr/bin/env python3
"""chaos.py -- a randomized fault campaign against real parley workers, a
real Kafka broker and a real Redis, with a checker that reads only Kafka.

    tests/chaos/chaos.py --minutes 30 [--seed N] [--workers 3] [--convs 24]
                         [--protocol classic|consumer] [--nodes 1|3] [--no-mix]

(with tests/run.sh's environment: PARLEY_BUILD, the venv; it starts its own
broker and Redis on fixed ports under a temporary run dir, so restarts keep
their addresses.)  tests/py/test_chaos.py runs a 2-minute campaign in the
suite.

What runs: `--workers` workers (cai-tiny synthetic model, Redis tier on)
serve `--convs` conversations at a time; every ROUND seconds the next turn
of each is produced (full history, turn-major, so a conversation's turns
are ordered in its partition); after TURNS turns a fresh conversation takes
the slot, so prompts stay within the model's context; now and then a
poison record.  Production stops at a round that completes the current
conversations.

Both service classes are mixed (unless --no-mix): every third conversation
is bulk (`service_class` bulk, 4x the tokens), the rest interactive, on
workers with 4 running slots, so bulk sequences are parked (their KV kept)
for interactive ones and a kill -9 finds parked sequences in a worker's
cache.  Cancels are among the faults: in a round, with probability 0.3,
CancelTurns for 1-2 of the turns just produced (one may be running, queued
behind its conversation, finished already or about to commit: the cancel
races it) -- and a cancelled turn's worker may be the next one killed.
Meanwhile a seeded schedule (printed first: `--seed` replays it) applies
one fault every 6-12 s:

  kill9       SIGKILL a worker, restart it with the same worker.id 1-3 s later
  stop_cont   SIGSTOP a worker past the 6 s session timeout, then SIGCONT
  broker      stop the broker (data kept), 0-3 s down, start it again
  redis_kill  SIGKILL Redis, start it again on the same port 2 s later
  redis_stall SIGSTOP Redis for 3 s
  join_leave  start one more worker, SIGTERM it 8-12 s later

With --nodes 3 the broker is a three-broker cluster (deploy/kafka.sh start
--nodes 3; topics with replication factor 3 and min.insync.replicas 2),
and `broker` gives way to the faults only a cluster has:

  broker_kill9  SIGKILL one broker, start it again 1-3 s later
  zombie        SIGSTOP one broker for 8-12 s (past the 6 s broker session
                timeout: it is fenced and leaves the ISRs), then SIGCONT
  two_down      SIGKILL two brokers (produces fail with NOT_ENOUGH_REPLICAS),
                start them again 2-5 s later

A broker fault spares the broker that coordinates the workers' group:
with the pinned librdkafka 2.12.1 a worker hangs for good when that broker
leaves while a commit's offsets wait on it (librdkafka #5511/#5456, see
tests/py/test_cluster_faults.py).  Each fault waits for the cluster to be
whole and in sync again before the next one.

The checker (read_committed, after the faults stop and the last turns are
answered) asserts: exactly one TurnResult per turn (`stop` or `length`, or
`cancelled` for a turn a CancelTurn named), results of each conversation
in turn order, every poison record in the DLQ, and the streamed chunks of
each counted attempt concatenating to its result.  It
prints the counts: turns, faults of each kind, lost, doubled, redone, and
for each kind of fault the longest gap between two results that starts
during or after one (the recovery time).

A worker exit the campaign did not inject -- anything but the SIGKILL of a
kill9 fault, or exit status 0 after the SIGTERM of join_leave -- fails the
campaign, with the exit status or signal and the tail of that worker's log
(the worker is restarted so the rest of the campaign still runs and is
checked).  Each run takes a new seed unless --seed is given; the seed is the
first line printed.
"""
import argparse
import os
import random
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "py"))

import confluent_kafka as ck  # noqa: E402
import msgpack  # noqa: E402

from worker_kit import (CANCEL_CT, Env, TRACEPARENT, cancel_record, check_results,  # noqa: E402
                        collect, free_port, read_to_end, turn_record)
from fault_kit import read_chunks, restart_broker, svc, tally, where_lost  # noqa: E402

ROUND = 2.0  # seconds between rounds of turns
TURNS = 20   # turns per conversation; then a fresh conversation takes its slot (bounded prompts)
POISON = [b"\xc1 not msgpack", msgpack.packb({"v": 1, "conversation_id": "x"}), b"",
          msgpack.packb([1, 2, 3])]


class Campaign:
    def __init__(self, a, parley_bin, model, tmp):
        self.a, self.bin, self.model, self.tmp = a, parley_bin, model, Path(tmp)
        self.rng = random.Random(a.seed)
        self.krun, self.rrun = self.tmp / "kafka-run", self.tmp / "redis-run"
        kport, rport = free_port(), free_port()
        self.cluster = None
        if a.nodes == 3:
            from test_cluster_faults import Cluster, TOPIC_CONFIG
            kafka_sh(self.krun, "start", "--nodes", "3")
            self.cluster = Cluster(self.krun)
            self.bootstrap = self.cluster.bootstrap
            repl, cfg = 3, TOPIC_CONFIG
        else:
            svc("kafka.sh", self.krun, "start", PARLEY_KAFKA_PORT=str(kport))
            self.bootstrap = f"127.0.0.1:{kport}"
            repl, cfg = 1, None
        svc("redis.sh", self.rrun, "start", PARLEY_REDIS_PORT=str(rport))
        self.rport = rport
        self.redis = (self.rrun / "redis.addr").read_text().strip()
        self.env = Env(self.bootstrap, parley_bin, model, self.tmp / "workers", partitions=6,
                       protocol=a.protocol, replication=repl, topic_config=cfg)
        (self.tmp / "workers").mkdir(exist_ok=True)
        self.faults = []  # (kind, start, end, detail)
        self.stopped = set()  # SIGSTOPped workers
        self.extra = 0
        self.injected = {}  # Popen -> the return code the injected fault gives it
        self.crashes = []  # unexpected worker exits: problem texts
        self.cancelled = set()  # turn ids a CancelTurn was sent for

    def worker_args(self):
        mix = ["--scheduler.max_running", "4"] if self.a.mix else []
        return ["--redis.addr", self.redis, "--redis.timeout_ms", "100", "--worker.chunk_tokens", "2",
                *mix]

    def produce_turn(self, p, k, t):
        """Turn t of conversation k: bulk for every third conversation (with
        4x the tokens) when the classes are mixed."""
        bulk = self.a.mix and k % 3 == 0
        p.produce(self.env.topics["turns"], key=f"conv-{k}",
                  value=turn_record(k, t, self.a.max_tokens * (4 if bulk else 1),
                                    service_class="bulk" if bulk else None),
                  headers=[("traceparent", TRACEPARENT)])

    def produce_cancels(self, p, ks, t):
        """CancelTurns for turn t of 1-2 of the conversations ks."""
        for k in self.rng.sample(ks, self.rng.randint(1, 2)):
            tid = f"conv-{k}-t{t}"
            p.produce(self.env.topics["turns"], key=f"conv-{k}",
                      value=cancel_record(f"conv-{k}", tid, "chaos"),
                      headers=[("content-type", CANCEL_CT)])
            self.cancelled.add(tid)

    def start_worker(self, wid):
        self.env.start(wid, *self.worker_args())

    def redis_pid(self):
        return int((self.rrun / "redis.pid").read_text())

    def watch(self):
        """Any worker exit the campaign did not inject is a problem (status or
        signal, log tail); the worker is restarted so the campaign goes on."""
        for w, proc in list(self.env.procs.items()):
            rc = proc.poll()
            if rc is None or proc in self.injected and self.injected[proc] in (rc, "seen"):
                if rc is not None:
                    self.injected[proc] = "seen"
                continue
            how = f"killed by signal {signal.Signals(-rc).name}" if rc < 0 else f"exit status {rc}"
            tail = "\n".join(self.env.log(w).splitlines()[-25:])
            msg = f"worker {w} (pid {proc.pid}) exited, not by an injected fault: {how}\n{tail}"
            print(f"  t={time.time() - self.t_start:6.1f}s UNEXPECTED: worker {w} {how}", flush=True)
            self.crashes.append(msg)
            self.injected[proc] = "seen"
            if w.startswith("w"):
                self.start_worker(w)

    # ------------------------------------------------------------ faults
    def fault(self, kind):
        t0 = time.time()
        live = [w for w, p in self.env.procs.items() if w.startswith("w") and p.poll() is None
                and w not in self.stopped]
        detail = ""
        if kind == "kill9" and live:
            w = self.rng.choice(live)
            self.injected[self.env.procs[w]] = -signal.SIGKILL
            self.env.procs[w].kill()
            self.env.procs[w].wait()
            time.sleep(self.rng.uniform(1, 3))
            self.start_worker(w)
            detail = w
        elif kind == "stop_cont" and live:
            w = self.rng.choice(live)
            self.env.procs[w].send_signal(signal.SIGSTOP)
            self.stopped.add(w)
            time.sleep(self.rng.uniform(7, 9))
            self.env.procs[w].send_signal(signal.SIGCONT)
            self.stopped.discard(w)
            detail = w
        elif kind == "broker":
            down = restart_broker(self.krun, self.bootstrap, hold=self.rng.uniform(0, 3))
            detail = f"down {down:.1f}s"
        elif kind in ("broker_kill9", "zombie", "two_down"):
            detail = self.cluster_fault(kind)
        elif kind == "redis_kill":
            os.kill(self.redis_pid(), signal.SIGKILL)
            time.sleep(2)
            svc("redis.sh", self.rrun, "start", PARLEY_REDIS_PORT=str(self.rport))
        elif kind == "redis_stall":
            pid = self.redis_pid()
            os.kill(pid, signal.SIGSTOP)
            time.sleep(3)
            os.kill(pid, signal.SIGCONT)
        elif kind == "join_leave":
            self.extra += 1
            w = f"x{self.extra}"
            self.start_worker(w)
            time.sleep(self.rng.uniform(8, 12))
            self.injected[self.env.procs[w]] = 0  # a clean shutdown, nothing else
            self.env.procs[w].send_signal(signal.SIGTERM)
            detail = w
        else:
            return
        self.faults.append((kind, t0, time.time(), detail))
        print(f"  t={t0 - self.t_start:6.1f}s fault {kind} {detail}", flush=True)

    def cluster_fault(self, kind):
        """One of the three-broker faults on brokers other than the group
        coordinator; returns once the cluster is whole and in sync again."""
        from test_cluster_faults import group_coordinator
        c = self.cluster
        spare = group_coordinator(c, self.env)
        others = sorted({1, 2, 3} - {spare})
        if kind == "broker_kill9":
            b = [self.rng.choice(others)]
            c.kill(b[0])
            time.sleep(self.rng.uniform(1, 3))
        elif kind == "zombie":
            b = [self.rng.choice(others)]
            c.signal(b[0], signal.SIGSTOP)
            time.sleep(self.rng.uniform(8, 12))
            c.signal(b[0], signal.SIGCONT)
        else:  # two_down
            b = others
            for n in b:
                c.kill(n)
            time.sleep(self.rng.uniform(2, 5))
        for n in {1, 2, 3} - c.running():
            c.start(n)
        c.wait(c.in_sync, "every replica in sync on 3 brokers", 300)
        return f"brokers {b} (group coordinator {spare})"

    # ------------------------------------------------------------ run
    def run(self):
        a = self.a
        kinds = ["kill9", "stop_cont", "redis_kill", "redis_stall", "join_leave"]
        kinds += ["broker_kill9", "zombie", "two_down"] if a.nodes == 3 else ["broker"]
        print(f"chaos: {a.minutes} min, {a.workers} workers, {a.convs} conversations, "
              f"classes {'mixed, with cancels' if a.mix else 'interactive only'}, "
              f"group protocol {a.protocol}, {a.nodes} broker(s), "
              f"broker {self.bootstrap}, redis {self.redis}", flush=True)
        for i in range(a.workers):
            self.start_worker(f"w{i}")
        p = ck.Producer({"bootstrap.servers": self.bootstrap, "enable.idempotence": True, "linger.ms": 5})
        self.t_start = time.time()
        end = self.t_start + a.minutes * 60
        next_round, next_fault, rnd, self.poison = self.t_start, self.t_start + 5, 0, 0
        while time.time() < end or rnd % TURNS:
            self.watch()
            now = time.time()
            if now >= next_round:
                gen, t = divmod(rnd, TURNS)
                ks = [gen * a.convs + c for c in range(a.convs)]
                for k in ks:
                    self.produce_turn(p, k, t)
                if a.mix and self.rng.random() < 0.3:
                    self.produce_cancels(p, ks, t)
                if self.rng.random() < 0.2:
                    p.produce(self.env.topics["turns"], key=f"poison-{self.poison}",
                              value=self.rng.choice(POISON))
                    self.poison += 1
                p.poll(0)
                rnd += 1
                next_round += ROUND
            if now >= next_fault and now < end:
                self.fault(self.rng.choice(kinds))  # blocks while the fault lasts
                next_fault = time.time() + self.rng.uniform(6, 12)
            time.sleep(0.05)
        assert p.flush(60) == 0
        self.rounds = rnd
        return self.check()

    def check(self):
        env, a = self.env, self.a
        for w in list(self.stopped):
            env.procs[w].send_signal(signal.SIGCONT)
        time.sleep(1)
        self.watch()  # (restarts a crashed worker: nothing may wait on it)
        n_conv = a.convs * (self.rounds // TURNS)
        want = n_conv * TURNS
        rc = env.consumer("responses", "read_committed")
        results = []
        end = time.time() + 300
        while len(results) < want and time.time() < end:
            got = collect(rc, want - len(results), 2)
            results += got
            self.watch()
        results += read_to_end(rc)
        rc.close()
        chunks = read_chunks(env, results)
        dc = env.consumer("dlq", "read_committed")
        dead = collect(dc, self.poison, 60) + read_to_end(dc)
        dc.close()
        sent = {f"conv-{c}-t{t}" for c in range(n_conv) for t in range(TURNS)}
        counts = tally("chaos", sent, results, chunks)
        n_cancelled = sum(msgpack.unpackb(m.value(), raw=False)["finish_reason"] == "cancelled"
                          for m in results)
        # recovery, per kind of fault: the longest gap between consecutive
        # results (by broker timestamp) that starts inside one of its windows
        ts = sorted(m.timestamp()[1] / 1000.0 for m in results)
        gaps = [(y - x, x) for x, y in zip(ts, ts[1:])]
        rec_by = {}
        for kind, t0, t1, _ in self.faults:
            g = max((g for g, x in gaps if t0 - 1 <= x <= t1 + 30), default=0.0)
            rec_by[kind] = round(max(rec_by.get(kind, 0.0), g), 1)
        rec = max(rec_by.values(), default=0.0)
        kinds = Counter(f[0] for f in self.faults)
        poison_dlq = sum(1 for m in dead if (m.key() or b"").startswith(b"poison-"))
        print(f"chaos summary: seed={a.seed} minutes={a.minutes} turns={want} "
              f"results={counts['results']} lost={counts['lost']} doubled={counts['duplicates']} "
              f"redone={counts['redone']} cancels={len(self.cancelled)} cancelled={n_cancelled} "
              f"poison={self.poison} in_dlq={poison_dlq} "
              f"faults={dict(kinds)} max_recovery_s={rec:.1f} recovery_s_by_kind={rec_by}",
              flush=True)
        self.watch()
        problems = list(self.crashes)
        if counts["lost"] or counts["duplicates"]:
            lost = sent - {msgpack.unpackb(m.value(), raw=False)["turn_id"] for m in results}
            problems.append(f"lost {counts['lost']} doubled {counts['duplicates']}\n" + where_lost(env, lost))
        if poison_dlq != self.poison:
            problems.append(f"poison records: {self.poison} sent, {poison_dlq} in the DLQ")
        if not problems:
            # order, chunks == result
            check_results(env, results, chunks, n_conv, TURNS, cancellable=self.cancelled)
        return counts, kinds, rec, problems

    def close(self):
        for w in list(self.stopped):
            self.env.procs[w].send_signal(signal.SIGCONT)
        self.env.stop_all()
        if self.cluster:
            keep = self.tmp / "cluster-logs"  # kafka.sh stop deletes the nodes' directories
            keep.mkdir(exist_ok=True)
            for log in (self.krun / "kafka").glob("*/*.log"):
                shutil.copy(log, keep / f"{log.parent.name}-{log.name}")
            kafka_sh(self.krun, "stop")
        else:
            svc("kafka.sh", self.krun, "stop")
        svc("redis.sh", self.rrun, "stop")


def kafka_sh(run, *args):
    """deploy/kafka.sh ARGS for a cluster in run (start-up can take minutes
    of a loaded 2-core machine: 6 JVMs)."""
    r = subprocess.run([str(HERE.parents[1] / "deploy" / "kafka.sh"), *args],
                       env=dict(os.environ, PARLEY_RUN_DIR=str(run), PARLEY_KAFKA_START_TIMEOUT="240"),
                       capture_output=True, text=True, timeout=400, stdin=subprocess.DEVNULL)
    assert r.returncode == 0 or args[0] == "stop", r.stderr[-3000:]


def new_seed():
    return secrets.randbelow(10**9)


def campaign(parley_bin, model, tmp, minutes, seed, workers=3, convs=24, max_tokens=4, protocol="classic",
             nodes=1, mix=True):
    print(f"chaos: seed {seed} (replay: tests/chaos/chaos.py --minutes {minutes} --seed {seed} "
          f"--protocol {protocol} --nodes {nodes}{'' if mix else ' --no-mix'})", flush=True)
    a = argparse.Namespace(minutes=minutes, seed=seed, workers=workers, convs=convs, max_tokens=max_tokens,
                           protocol=protocol, nodes=nodes, mix=mix)
    c = Campaign(a, parley_bin, model, tmp)
    try:
        return c.run()
    finally:
        c.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--minutes", type=float, default=30)
    ap.add_argument("--seed", type=int, default=None, help="replay a run (default: a new seed)")
    ap.add_argument("--workers", type=int, default=3)
    ap.add_argument("--convs", type=int, default=24)
    ap.add_argument("--max-tokens", type=int, default=4)
    ap.add_argument("--protocol", choices=["classic", "consumer"], default="classic",
                    help="consumer group protocol: classic cooperative-sticky, or consumer (KIP-848)")
    ap.add_argument("--nodes", type=int, choices=[1, 3], default=1,
                    help="one broker, or a three-broker cluster with the cluster faults")
    ap.add_argument("--no-mix", dest="mix", action="store_false",
                    help="interactive turns only, no cancels (default: both classes and cancels)")
    ap.add_argument("--dir", default=None, help="work directory (default: a new temporary one)")
    a = ap.parse_args()
    if a.seed is None:
        a.seed = new_seed()
    build = Path(os.environ.get("PARLEY_BUILD", HERE.parents[1] / "build"))
    parley = build / "consumer" / "parley"
    import tempfile
    tmp = Path(a.dir or tempfile.mkdtemp(prefix="parley-chaos-"))
    tmp.mkdir(parents=True, exist_ok=True)
    model = tmp / "cai-tiny.gguf"
    subprocess.run([str(parley), "mkmodel", "--preset", "cai-tiny", "--out", str(model)], check=True,
                   capture_output=True)
    counts, kinds, rec, problems = campaign(parley, model, tmp, a.minutes, a.seed, a.workers, a.convs,
                                            a.max_tokens, a.protocol, a.nodes, a.mix)
    for p in problems:
        print("PROBLEM:", p)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
