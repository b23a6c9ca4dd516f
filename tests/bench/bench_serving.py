"""bench_serving.py -- one multi-turn chat workload served end to end by
parley (`parley gateway` -> Kafka -> `parley worker`) and by llama.cpp's own
`llama-server`, one after the other, on the same GGUF and thread count.

Not part of the test suite (a benchmark, numbers only).  Usage:

  python tests/bench/bench_serving.py --kafka HOST:9092 \
      --parley build/consumer/parley \
      --llama-server ~/.cache/parley/llama-server/bin/llama-server \
      [--model ~/.cache/parley/models/gemma-3-270m-q4_k_m.gguf] [--threads 2] \
      [--conversations 8] [--turns 6] [--max-tokens 48] [--rounds 1] \
      [--systems parley,llama] [--json out.jsonl]

(--kafka defaults to $PARLEY_TEST_KAFKA; tests/bench/build_llama_server.sh
builds llama-server, test-only, from the llama.cpp sources vendored in the
pinned llama-cpp-python sdist.)

The workload: --conversations conversations run at once, each --turns
turns one after the other; turn t of conversation i sends the whole
conversation so far (every user message and every reply the server gave)
plus a new user message from a fixed script, streaming, temperature 0,
max_tokens --max-tokens, through the OpenAI chat-completions API with
stream_options.include_usage.  Both servers get exactly the same requests up
to their own replies, which differ (two engines, two numerics).

parley: one worker (--model.threads N, the prefix cache on, defaults
otherwise) and one gateway, on fresh topics (bench-sv-<random>.*).
llama.cpp: `llama-server -m MODEL -t N -tb N -np C -c C*--slot-ctx -cb`:
continuous batching and one slot per conversation, so a conversation's next
turn finds its own previous KV in its slot (prompt caching is on by
default).  Measured at the client, per system: completion tokens/s over the
run (completion tokens / wall time), turns/s, TTFT (request sent -> first
content delta) and turn latency (request sent -> stream end) p50 and p90 by
turn index, and the cached share: sum of usage.prompt_tokens_details.
cached_tokens over sum of prompt_tokens (both servers report it).  A warm-up
request (one conversation, one turn) runs before each system's timed run.
With --rounds R the two systems alternate R times.

On a machine shared with other work, llama.cpp's OpenMP threads spin at
their barriers and lose their cores to it (on the 2-core test machine at a
load average of 5-6, a lone 32-token completion ran at 5 tokens/s, 10 with
OMP_WAIT_POLICY=passive): the environment passes through to llama-server,
and its report names OMP_WAIT_POLICY when it is set.
"""

import argparse
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import openai
from confluent_kafka.admin import AdminClient, NewTopic

SCRIPT = [
    "Hi! I am planning a week-long trip along a river valley in late spring. "
    "What should I pack?",
    "Good. The mornings will be cold and the afternoons warm. How should I layer?",
    "Which of those things could I buy in a small town on the way instead?",
    "I also want to take photos at dawn. Any advice on light and timing?",
    "What is a simple daily plan that leaves time for walking and photos?",
    "If it rains for two days, what could I do indoors in a river town?",
    "Summarise the packing list in one short paragraph.",
    "Thanks. One last question: how do I keep a camera battery warm overnight?",
    "Tell me a short story about a lighthouse keeper who collects old maps.",
    "Continue the story: a storm brings a stranger to the lighthouse door.",
    "What does the stranger want from the keeper's map collection?",
    "End the story in three sentences.",
]


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))] if xs else float("nan")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def user_msg(conv, turn):
    return SCRIPT[(conv * 5 + turn) % len(SCRIPT)]


def one_turn(client, model, messages, max_tokens):
    """Stream one turn; returns (reply, ttft_s, total_s, usage)."""
    t0 = time.perf_counter()
    ttft, parts, usage = None, [], None
    stream = client.chat.completions.create(
        model=model, messages=messages, max_tokens=max_tokens, temperature=0, stream=True,
        stream_options={"include_usage": True})
    for ch in stream:
        if ch.choices and ch.choices[0].delta and ch.choices[0].delta.content:
            if ttft is None:
                ttft = time.perf_counter() - t0
            parts.append(ch.choices[0].delta.content)
        if getattr(ch, "usage", None):
            usage = ch.usage
    total = time.perf_counter() - t0
    if usage is None:
        raise RuntimeError("no usage chunk in the stream")
    return "".join(parts), ttft if ttft is not None else total, total, usage


def run_workload(base_url, model, a, tag):
    """All conversations at once; returns the per-turn records and the wall time."""
    recs, mu, errs = [], threading.Lock(), []

    def conv(i):
        c = openai.OpenAI(base_url=base_url, api_key="sk-bench", max_retries=0, timeout=600)
        msgs = []
        try:
            for t in range(a.turns):
                msgs.append({"role": "user", "content": user_msg(i, t)})
                reply, ttft, total, u = one_turn(c, model, msgs, a.max_tokens)
                msgs.append({"role": "assistant", "content": reply})
                cached = 0
                if u.prompt_tokens_details is not None:
                    cached = u.prompt_tokens_details.cached_tokens or 0
                with mu:
                    recs.append({"system": tag, "conv": i, "turn": t + 1, "ttft": ttft,
                                 "total": total, "prompt": u.prompt_tokens,
                                 "cached": cached, "completion": u.completion_tokens})
        except Exception as e:  # noqa: BLE001 -- reported after the run
            with mu:
                errs.append(f"conversation {i}: {e!r}")

    t0 = time.perf_counter()
    ts = [threading.Thread(target=conv, args=(i,)) for i in range(a.conversations)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    wall = time.perf_counter() - t0
    if errs:
        raise RuntimeError(f"{tag}: " + "; ".join(errs[:4]))
    return recs, wall


def warm_up(base_url, model, a):
    c = openai.OpenAI(base_url=base_url, api_key="sk-bench", max_retries=0, timeout=600)
    one_turn(c, model, [{"role": "user", "content": "Say hello."}], 8)


def report(tag, recs, wall, la):
    comp = sum(r["completion"] for r in recs)
    prompt = sum(r["prompt"] for r in recs)
    cached = sum(r["cached"] for r in recs)
    print(f"{tag}: {len(recs)} turns in {wall:.2f} s: {comp / wall:.1f} completion tokens/s, "
          f"{len(recs) / wall:.2f} turns/s, cached share {cached}/{prompt} = "
          f"{cached / max(prompt, 1):.3f}  (loadavg at start {la})")
    print(f"  {'turn':>4s} {'prompt':>7s} {'cached':>7s} {'compl':>6s}  {'TTFT p50':>9s} "
          f"{'p90':>8s}  {'latency p50':>11s} {'p90':>8s}   (ms; prompt/cached/compl: means)")
    for t in sorted({r["turn"] for r in recs}):
        rs = [r for r in recs if r["turn"] == t]
        f = [r["ttft"] * 1e3 for r in rs]
        x = [r["total"] * 1e3 for r in rs]
        print(f"  {t:4d} {statistics.mean(r['prompt'] for r in rs):7.1f} "
              f"{statistics.mean(r['cached'] for r in rs):7.1f} "
              f"{statistics.mean(r['completion'] for r in rs):6.1f}  {pct(f, 50):9.1f} "
              f"{pct(f, 90):8.1f}  {pct(x, 50):11.1f} {pct(x, 90):8.1f}")
    f = [r["ttft"] * 1e3 for r in recs]
    x = [r["total"] * 1e3 for r in recs]
    print(f"   all {'':7s} {'':7s} {'':6s}  {pct(f, 50):9.1f} {pct(f, 90):8.1f}  "
          f"{pct(x, 50):11.1f} {pct(x, 90):8.1f}")
    return {"system": tag, "turns": len(recs), "wall_s": wall, "tokens_per_s": comp / wall,
            "turns_per_s": len(recs) / wall, "cached_share": cached / max(prompt, 1),
            "ttft_p50_ms": pct(f, 50), "ttft_p90_ms": pct(f, 90), "total_p50_ms": pct(x, 50),
            "total_p90_ms": pct(x, 90), "loadavg": la}


def wait_for(cond, timeout, what, proc=None, log=None):
    end = time.time() + timeout
    while time.time() < end:
        if cond():
            return
        if proc is not None and proc.poll() is not None:
            break
        time.sleep(0.1)
    tail = Path(log).read_text(errors="replace")[-3000:] if log else ""
    raise RuntimeError(f"{what} did not come up\n{tail}")


def run_parley(a, tmp):
    prefix = f"bench-sv-{uuid.uuid4().hex[:8]}"
    topics = {k: f"{prefix}.{k}" for k in ("turns", "tokens", "responses", "dlq")}
    admin = AdminClient({"bootstrap.servers": a.kafka})
    for f in admin.create_topics([NewTopic(t, 8 if k == "turns" else 4 if k != "dlq" else 1, 1)
                                  for k, t in topics.items()]).values():
        f.result(30)
    wlog = tmp / f"worker-{prefix}.log"
    glog = tmp / f"gateway-{prefix}.log"
    worker = subprocess.Popen(
        [a.parley, "worker", "--model.path", a.model, "--model.name", "bench",
         "--model.threads", str(a.threads), "--worker.id", f"w-{prefix}",
         "--worker.group", f"g-{prefix}", "--worker.topic.turns", topics["turns"],
         "--worker.topic.tokens", topics["tokens"], "--worker.topic.responses",
         topics["responses"], "--worker.topic.dlq", topics["dlq"],
         "--kafka.bootstrap.servers", a.kafka] + a.worker_arg,
        stdout=open(wlog, "wb"), stderr=subprocess.STDOUT)
    port = free_port()
    gw = subprocess.Popen(
        [a.parley, "gateway", "--kafka.bootstrap.servers", a.kafka,
         "--gateway.listen", f"127.0.0.1:{port}", "--gateway.topic.turns", topics["turns"],
         "--gateway.topic.tokens", topics["tokens"], "--gateway.topic.responses",
         topics["responses"], "--gateway.topic.dlq", topics["dlq"],
         "--gateway.api_keys", "sk-bench=default", "--gateway.max_inflight", "1024"],
        stdout=open(glog, "wb"), stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: "event=assigned" in wlog.read_text(errors="replace"), 120,
                 "parley worker", worker, wlog)
        wait_for(lambda: "listening on" in glog.read_text(errors="replace"), 60,
                 "parley gateway", gw, glog)
        url = f"http://127.0.0.1:{port}/v1"
        warm_up(url, "bench", a)
        la = Path("/proc/loadavg").read_text().split()[0]
        recs, wall = run_workload(url, "bench", a, "parley")
    finally:
        gw.send_signal(signal.SIGTERM)
        worker.send_signal(signal.SIGTERM)
        for p in (gw, worker):
            try:
                p.wait(60)
            except subprocess.TimeoutExpired:
                p.kill()
        admin.delete_topics(list(topics.values()))
    note = ""
    stopped = [x for x in wlog.read_text(errors="replace").splitlines() if "event=stopped" in x]
    if stopped:  # the warm-up turn included
        ws = dict(re.findall(r"(\w+)=(\S+)", stopped[-1]))
        note = ("  worker: " + "  ".join(f"{k} {ws.get(k)}" for k in (
            "overhead_p50_ms", "sched_queue_mean_ms", "engine_mean_ms", "post_mean_ms",
            "commits", "results")))
    return recs, wall, la, note


def run_llama(a, tmp):
    port = free_port()
    log = tmp / f"llama-server-{port}.log"
    srv = subprocess.Popen(
        [a.llama_server, "-m", a.model, "-t", str(a.threads), "-tb", str(a.threads),
         "-np", str(a.conversations), "-c", str(a.conversations * a.slot_ctx), "-cb",
         "--host", "127.0.0.1", "--port", str(port), "--no-webui"] + a.llama_arg,
        stdout=open(log, "wb"), stderr=subprocess.STDOUT)
    try:
        def up():
            try:
                import urllib.request
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                    return r.status == 200
            except Exception:  # noqa: BLE001 -- not up yet
                return False

        wait_for(up, 120, "llama-server", srv, log)
        url = f"http://127.0.0.1:{port}/v1"
        warm_up(url, "bench", a)
        la = Path("/proc/loadavg").read_text().split()[0]
        recs, wall = run_workload(url, "bench", a, "llama-server")
    finally:
        srv.send_signal(signal.SIGTERM)
        try:
            srv.wait(30)
        except subprocess.TimeoutExpired:
            srv.kill()
    omp = os.environ.get("OMP_WAIT_POLICY")
    return recs, wall, la, f"  llama-server: OMP_WAIT_POLICY={omp}" if omp else ""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kafka", default=os.environ.get("PARLEY_TEST_KAFKA"))
    ap.add_argument("--parley", default=os.environ.get("PARLEY_BIN", "build/consumer/parley"))
    ap.add_argument("--llama-server", default=str(Path.home() / ".cache/parley/llama-server/bin/"
                                                  "llama-server"))
    ap.add_argument("--model", default=str(Path.home() / ".cache/parley/models/"
                                           "gemma-3-270m-q4_k_m.gguf"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--conversations", type=int, default=8)
    ap.add_argument("--turns", type=int, default=6)
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--slot-ctx", type=int, default=4096, help="llama-server context per slot")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--systems", default="parley,llama")
    ap.add_argument("--worker-arg", action="append", default=[],
                    help="an extra worker flag (repeatable), e.g. --worker-arg=--x=1")
    ap.add_argument("--llama-arg", action="append", default=[],
                    help="an extra llama-server argument (repeatable)")
    ap.add_argument("--json", help="append each system's summary as a JSON line to this file")
    a = ap.parse_args()
    a.worker_arg = [y for x in a.worker_arg for y in x.split("=", 1)]
    systems = a.systems.split(",")
    if "parley" in systems and not a.kafka:
        sys.exit("bench_serving: --kafka HOST:PORT (or PARLEY_TEST_KAFKA) is required")
    if "llama" in systems and not os.access(a.llama_server, os.X_OK):
        sys.exit(f"bench_serving: no llama-server at {a.llama_server} "
                 "(tests/bench/build_llama_server.sh builds it)")
    tmp = Path(tempfile.mkdtemp(prefix="bench-sv-"))
    cpu = next((x.split(":", 1)[1].strip() for x in open("/proc/cpuinfo")
                if x.startswith("model name")), "?")
    print(f"model {a.model}, {a.threads} threads, {cpu}, {os.cpu_count()} CPUs; "
          f"{a.conversations} conversations x {a.turns} turns, max_tokens {a.max_tokens}",
          flush=True)
    for rnd in range(a.rounds):
        order = systems if rnd % 2 == 0 else systems[::-1]
        for s in order:
            recs, wall, la, note = run_parley(a, tmp) if s == "parley" else run_llama(a, tmp)
            summary = report(recs[0]["system"], recs, wall, la)
            if note:
                print(note)
            summary["round"] = rnd
            sys.stdout.flush()
            if a.json:
                with open(a.json, "a") as f:
                    f.write(json.dumps(summary) + "\n")


if __name__ == "__main__":
    main()
