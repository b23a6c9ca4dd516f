"""bench_commit.py -- what the worker adds to a turn (its own `event=stopped`
figures: overhead_p50_ms, post_mean_ms, ...) and the turns/s and tokens/s
`parley load` gets, at several numbers of concurrent conversations, for one
or more parley builds run alternately on the same broker and model.

Not part of the test suite (a benchmark, numbers only).  Usage:

  python tests/bench/bench_commit.py --kafka HOST:9092 \
      --build before=/tmp/parley-base/build/consumer/parley \
      --build after=build/consumer/parley \
      [--model cai-tiny | --model PATH.gguf] [--threads 2] \
      [--concurrency 1,4,32,64] [--repeat 5] [--turns 96] [--max-tokens 8:32] \
      [--worker-arg after=--worker.txn_horizon_ms=10 ...] [--json out.jsonl]

(--kafka defaults to $PARLEY_TEST_KAFKA.)  What replication costs: give
--kafka more than once as NAME=BOOTSTRAP@RF, e.g. `--kafka one=HOST:P1@1
--kafka three=H:P2,H:P3,H:P4@3` (deploy/kafka.sh start, and start --nodes
3): every build then runs on every cluster, alternately, with topics of
that replication factor (min.insync.replicas 2 where RF > 1).  One trial:
fresh topics
(bench-cm-<random>.*, 8 turn partitions), one worker of the build with
--model.threads, `parley load` (always the first build's client) sending C
conversations closed-loop (--rate 1e6: every conversation has a turn in
flight, its next turn leaves when the TurnResult is visible) for about
--turns turns in all (at least 3 and at most --max-turns per conversation),
the worker stopped with SIGTERM and its `event=stopped` line read.  Trials run in rounds:
every round runs every concurrency for every build, the builds' order
alternating between rounds, so drift of the machine's load hits them alike.
Prints per (concurrency, build) the median over rounds (min..max) and
/proc/loadavg at each trial's start.
"""

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

WORKER_KEYS = ("overhead_p50_ms", "overhead_mean_ms", "pre_mean_ms", "sched_queue_mean_ms",
               "engine_mean_ms", "post_mean_ms", "commits", "results")
LOAD_KEYS = ("turns_per_s", "tokens_per_s", "total_p50_ms", "lost", "duplicated", "done")


def kv(line):
    return {k: v for k, v in re.findall(r"(\w+)=(\S+)", line)}


def loadavg():
    return Path("/proc/loadavg").read_text().split()[0]


def trial(a, name, parley, client, model, conc, extra, tmp, kafka, rf):
    prefix = f"bench-cm-{uuid.uuid4().hex[:8]}"
    topics = {k: f"{prefix}.{k}" for k in ("turns", "tokens", "responses", "dlq")}
    admin = AdminClient({"bootstrap.servers": kafka})
    cfg = {"min.insync.replicas": "2"} if rf > 1 else {}
    for f in admin.create_topics([NewTopic(t, 8 if k == "turns" else 4 if k != "dlq" else 1, rf,
                                           config=cfg)
                                  for k, t in topics.items()]).values():
        f.result(30)
    la = loadavg()
    logp = tmp / f"worker-{prefix}.log"
    log = open(logp, "wb")
    worker = subprocess.Popen(
        [parley, "worker", "--model.path", str(model), "--model.name", "bench",
         "--model.threads", str(a.threads), "--worker.id", f"w-{prefix}",
         "--worker.group", f"g-{prefix}", "--worker.topic.turns", topics["turns"],
         "--worker.topic.tokens", topics["tokens"], "--worker.topic.responses",
         topics["responses"], "--worker.topic.dlq", topics["dlq"],
         "--kafka.bootstrap.servers", kafka] + extra, stdout=log, stderr=subprocess.STDOUT)
    try:
        end = time.time() + 120
        while time.time() < end and "event=assigned" not in logp.read_text(errors="replace"):
            if worker.poll() is not None:
                raise RuntimeError(f"worker exited: {logp.read_text()[-2000:]}")
            time.sleep(0.1)
        turns = min(a.max_turns, max(3, -(-a.turns // conc)))
        lo = subprocess.run(
            [client, "load", "--brokers", kafka, "--conversations", str(conc), "--turns",
             str(turns), "--rate", "1000000", "--max-tokens", a.max_tokens, "--user", a.user,
             "--seed", "7", "--model", "bench", "--grace-ms", "0", "--timeout-s", "900",
             "--turns-topic", topics["turns"], "--tokens-topic", topics["tokens"],
             "--responses-topic", topics["responses"]], capture_output=True, text=True)
        ll = [x for x in lo.stdout.splitlines() if x.startswith("load: ")]
        if lo.returncode != 0 or not ll:
            raise RuntimeError(f"load failed ({lo.returncode}): {lo.stdout[-2000:]}"
                               f"{lo.stderr[-2000:]}")
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(60)
        except subprocess.TimeoutExpired:
            worker.kill()
        admin.delete_topics(list(topics.values()))
    stopped = [x for x in logp.read_text(errors="replace").splitlines() if "event=stopped" in x]
    if not stopped:
        raise RuntimeError(f"no event=stopped line: {logp.read_text()[-2000:]}")
    w, lv = kv(stopped[-1]), kv(ll[-1])
    r = {"build": name, "conc": conc, "turns_per_conv": turns, "loadavg": la}
    r.update({k: float(w[k]) for k in WORKER_KEYS})
    r.update({k: float(lv[k]) for k in LOAD_KEYS})
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kafka", action="append", default=[],
                    help="HOST:PORT, or NAME=BOOTSTRAP@RF (repeatable: one run per cluster)")
    ap.add_argument("--build", action="append", required=True, help="NAME=PATH to parley")
    ap.add_argument("--model", default="cai-tiny", help="cai-tiny, or a GGUF file")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--concurrency", default="1,4,32,64")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--turns", type=int, default=96, help="turns per trial (>= 3 per conv)")
    ap.add_argument("--max-turns", type=int, default=24,
                    help="turns per conversation at most (each turn resends the history: "
                    "cai-tiny's 4096-token context holds about 45)")
    ap.add_argument("--max-tokens", default="8:32")
    ap.add_argument("--user", default="5:30", help="words per user message MIN:MAX")
    ap.add_argument("--worker-arg", action="append", default=[],
                    help="NAME=--flag=value: an extra worker flag for build NAME")
    ap.add_argument("--json", help="append every trial as a JSON line to this file")
    a = ap.parse_args()
    if not a.kafka and os.environ.get("PARLEY_TEST_KAFKA"):
        a.kafka = [os.environ["PARLEY_TEST_KAFKA"]]
    if not a.kafka:
        sys.exit("bench_commit: --kafka HOST:PORT (or PARLEY_TEST_KAFKA) is required")
    clusters = []  # (name, bootstrap, replication factor)
    for k in a.kafka:
        name, _, rest = k.rpartition("=") if "=" in k else ("", "", k)
        boot, _, rf = rest.partition("@")
        clusters.append((name, boot, int(rf or 1)))
    builds = [b.split("=", 1) for b in a.build]
    if len(clusters) > 1:  # every build on every cluster: NAME becomes build/cluster
        builds = [(f"{b}/{c[0]}", p, c) for b, p in builds for c in clusters]
    else:
        builds = [(b, p, clusters[0]) for b, p in builds]
    extra = {n: [] for n, _, _ in builds}
    for x in a.worker_arg:
        n, flag = x.split("=", 1)
        for b in extra:
            if b == n or b.split("/")[0] == n:
                extra[b] += flag.split("=", 1)
    tmp = Path(tempfile.mkdtemp(prefix="bench-cm-"))
    model = a.model
    if model == "cai-tiny":
        model = tmp / "cai-tiny.gguf"
        subprocess.run([builds[0][1], "mkmodel", "--preset", "cai-tiny", "--out", str(model)],
                       check=True, capture_output=True)
    cpu = next((x.split(":", 1)[1].strip() for x in open("/proc/cpuinfo")
                if x.startswith("model name")), "?")
    print(f"model {a.model}, {a.threads} threads, {cpu}, {os.cpu_count()} CPUs; "
          f"max_tokens {a.max_tokens}, {a.repeat} rounds", flush=True)
    rows = []
    conc = [int(x) for x in a.concurrency.split(",")]
    for rnd in range(a.repeat):
        order = builds if rnd % 2 == 0 else builds[::-1]
        for c in conc:
            for name, path, (_, kafka, rf) in order:
                r = trial(a, name, path, builds[0][1], model, c, extra[name], tmp, kafka, rf)
                r["round"] = rnd
                rows.append(r)
                print(f"round {rnd} conc {c:3d} {name:8s} load {r['loadavg']:>5s}: "
                      f"overhead p50 {r['overhead_p50_ms']:6.1f} ms  post {r['post_mean_ms']:6.1f} "
                      f"ms  {r['turns_per_s']:6.2f} turns/s  {r['tokens_per_s']:7.1f} tok/s  "
                      f"commits {r['commits']:.0f}/{r['results']:.0f} results", flush=True)
                if a.json:
                    with open(a.json, "a") as f:
                        f.write(json.dumps(r) + "\n")
    print("\nmedians over rounds (min..max):")
    for c in conc:
        for name, _, _ in builds:
            rs = [r for r in rows if r["conc"] == c and r["build"] == name]

            def m(k, rs=rs):
                xs = [r[k] for r in rs]
                return f"{statistics.median(xs):.2f} ({min(xs):.2f}..{max(xs):.2f})"

            las = [float(r["loadavg"]) for r in rs]
            print(f"conc {c:3d} {name:8s} overhead_p50_ms {m('overhead_p50_ms')}  "
                  f"post_mean_ms {m('post_mean_ms')}  turns/s {m('turns_per_s')}  "
                  f"tokens/s {m('tokens_per_s')}  total_p50_ms {m('total_p50_ms')}  "
                  f"loadavg {min(las):.2f}..{max(las):.2f}")


if __name__ == "__main__":
    main()
