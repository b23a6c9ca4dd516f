"""bench_mixed.py -- interactive chat latency next to a bulk batch backlog
(issue 40 section 3; docs/service-classes.md): one worker, one gateway, a
real Kafka broker, Gemma 3 270M.

Not part of the test suite (a benchmark, numbers only; tests/run.sh does not
run it).  Usage:

  python tests/bench/bench_mixed.py --kafka HOST:9092 \
      [--parley build/consumer/parley] [--model $PARLEY_GEMMA_MODEL] [--threads 2] \
      [--conversations 8] [--turns 6] [--rate 1.0] [--max-tokens 48] \
      [--backlog 2000] [--bulk-max-tokens 48] [--bulk-alone-s 30] \
      [--phases alone,bulk,mixed,baseline,fair,cancel] [--cancel-streams 32]
      [--cancel-max-tokens 512] [--cancel-after 8] [--cancel-window-s 10]
      [--out results.json]

(--kafka defaults to $PARLEY_TEST_KAFKA; start a broker with
`PARLEY_RUN_DIR=/tmp/x deploy/kafka.sh start`, whose address is in
/tmp/x/kafka.addr.)  Every phase runs on its own fresh topics
(bench-mx-<random>.*), worker (--model.threads N, --worker.http for
/metrics, defaults otherwise) and gateway, so no phase inherits another's
queue.  Phases:

  alone     interactive load alone: --conversations conversations of --turns
            streaming turns each (turn t sends the whole conversation so
            far), temperature 0, max_tokens --max-tokens, through the
            gateway.  Turns arrive at a steady --rate turns/s over all
            conversations (turn t of conversation i is due at
            (t * K + i) / rate s; a turn whose predecessor has not ended is
            sent when it ends, and its lateness is recorded).  TTFT (request
            sent -> first content delta) and turn latency (-> stream end),
            p50 / p99.
  bulk      bulk alone: `parley batch` (default class: bulk) on a backlog of
            --backlog one-turn requests (max_tokens --bulk-max-tokens), the
            worker's generated tokens/s over --bulk-alone-s s once bulk runs.
  mixed     the alone phase's load while the bulk backlog runs: TTFT ratios
            to alone, total generated tokens/s (both classes) vs bulk alone.
  baseline  the same as mixed with the batch sent as interactive
            (`parley batch --service-tier default`): what the classes buy.
  cancel    (issue 40 section 3.4) --cancel-streams streaming requests with
            max_tokens --cancel-max-tokens, each client closing after its
            first --cancel-after tokens (counted by their logprobs entries),
            while the bulk backlog runs.  Per turn, from its committed
            TurnResult: tokens generated after the close (result tokens -
            tokens received; an upper bound: tokens made before the close
            but still on their way count too) against one engine step's
            worth (one token a step for a sequence, plus accepted drafts),
            the time from close to the committed result in engine steps
            (step_ms_busy); the tokens the closes saved (max_tokens -
            generated, summed) and the engine time they stand for; and
            the throughput the other work (the backlog) gets: generated
            tokens/s (est) over --cancel-window-s before the streams and
            over the same time from when the last stream closed.
  fair      tenants (one API key each): tenant B alone sends --fair-b-turns
            one-turn requests at 1/s; then tenant A sends a burst of
            --fair-burst requests at once and B repeats its run during it.
            B's TTFT p99 with A's burst vs alone.

Engine step time: from the worker's /metrics, polled every 0.5 s during a
window: time / parley_sched_steps_total delta over the polls with sequences
running at both ends (step_ms_busy, the table's "step ms"; step_ms_metrics
is the whole window's time / steps, idle time included).  From token
timing: per interactive turn (latency - TTFT) / (completion tokens - 1),
median ("tok ms"; stream chunks may carry several tokens).  Generated
tokens/s: parley_completion_tokens_total delta / window time (the counter
moves when a turn ends, so with turns of equal length it moves in waves of
a whole batch: use long windows), and "(est)": the sum over polls of steps x
running sequences, plus accepted speculative drafts, / time (one token per
running sequence a step, more with a draft), which does not.  The batch, the gateway (namespace per API key) and the
interactive turns share the namespace `default` in mixed and baseline, so
the class is the only difference between the two.

On a shared machine (other builds on the same cores) the figures move from
run to run: compare a phase only with phases of the same run, and repeat.
"""

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from pathlib import Path

import msgpack
import openai
from confluent_kafka import Consumer
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

TOPICS = ["bees", "tides", "glaciers", "bridges", "volcanoes", "owls", "comets", "deserts",
          "lighthouses", "maps", "rivers", "forests", "trains", "clocks", "kites", "salt"]

KEYS = "sk-bench=default,sk-a=tenant-a,sk-b=tenant-b"


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))] if xs else float("nan")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def loadavg():
    return Path("/proc/loadavg").read_text().split()[0]


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


def stop(procs, timeout=20):
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in procs:
        try:
            p.wait(timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


class Stack:
    """Fresh topics, one worker (with /metrics) and one gateway."""

    def __init__(self, a, tmp, name):
        self.a, self.name = a, name
        self.prefix = f"bench-mx-{name}-{uuid.uuid4().hex[:6]}"
        self.topics = {k: f"{self.prefix}.{k}" for k in ("turns", "tokens", "responses", "dlq")}
        self.admin = AdminClient({"bootstrap.servers": a.kafka})
        for f in self.admin.create_topics(
                [NewTopic(t, 8 if k == "turns" else 4 if k != "dlq" else 1, 1)
                 for k, t in self.topics.items()]).values():
            f.result(30)
        # the broker answers CreateTopics before every client sees the metadata
        wait_for(lambda: all(len(getattr(self.admin.list_topics(t, timeout=5).topics.get(t),
                                         "partitions", {}) or {}) > 0
                             for t in self.topics.values()), 30, "the topics")
        self.wlog = tmp / f"worker-{self.prefix}.log"
        self.glog = tmp / f"gateway-{self.prefix}.log"
        self.mport = free_port()
        self.procs = []
        t = self.topics
        self.worker = subprocess.Popen(
            [a.parley, "worker", "--model.path", a.model, "--model.name", "bench",
             "--model.threads", str(a.threads), "--worker.id", f"w-{self.prefix}",
             "--worker.group", f"g-{self.prefix}", "--worker.topic.turns", t["turns"],
             "--worker.topic.tokens", t["tokens"], "--worker.topic.responses", t["responses"],
             "--worker.topic.dlq", t["dlq"], "--worker.http", f"127.0.0.1:{self.mport}",
             "--kafka.bootstrap.servers", a.kafka] + a.worker_arg,
            stdout=open(self.wlog, "wb"), stderr=subprocess.STDOUT)
        self.procs.append(self.worker)
        port = free_port()
        self.gw = subprocess.Popen(
            [a.parley, "gateway", "--kafka.bootstrap.servers", a.kafka,
             "--gateway.listen", f"127.0.0.1:{port}", "--gateway.topic.turns", t["turns"],
             "--gateway.topic.tokens", t["tokens"], "--gateway.topic.responses",
             t["responses"], "--gateway.topic.dlq", t["dlq"], "--gateway.api_keys", KEYS,
             "--gateway.max_inflight", "4096", "--gateway.timeout_ms", str(a.gateway_timeout_ms)],
            stdout=open(self.glog, "wb"), stderr=subprocess.STDOUT)
        self.procs.append(self.gw)
        self.url = f"http://127.0.0.1:{port}/v1"
        try:
            wait_for(lambda: "event=assigned" in self.wlog.read_text(errors="replace"), 120,
                     "parley worker", self.worker, self.wlog)
            wait_for(lambda: "listening on" in self.glog.read_text(errors="replace"), 60,
                     "parley gateway", self.gw, self.glog)
            warm = openai.OpenAI(base_url=self.url, api_key="sk-bench", max_retries=0,
                                 timeout=600)
            one_turn(warm, [{"role": "user", "content": "Say hello."}], 8)
        except BaseException:
            self.close()
            raise

    def metrics(self):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.mport}/metrics", timeout=10) as r:
            text = r.read().decode()
        out = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                k, _, v = line.rpartition(" ")
                try:
                    out[k] = float(v)
                except ValueError:
                    pass
        return out

    def batch(self, backlog, tier, tmp):
        """Start `parley batch` on a fresh backlog; returns the process."""
        inp = tmp / f"batch-{self.prefix}.jsonl"
        with open(inp, "w") as f:
            for i in range(backlog):
                body = {"model": "bench", "max_tokens": self.a.bulk_max_tokens, "temperature": 0,
                        "messages": [{"role": "user", "content":
                                      f"Write a short paragraph about {TOPICS[i % len(TOPICS)]} "
                                      f"for reader number {i}."}]}
                f.write(json.dumps({"custom_id": f"r{i}", "method": "POST",
                                    "url": "/v1/chat/completions", "body": body}) + "\n")
        cmd = [self.a.parley, "batch", "--input", str(inp), "--output",
               str(tmp / f"batch-{self.prefix}.out.jsonl"), "--brokers", self.a.kafka,
               "--topic-prefix", self.prefix, "--dlq-topic", self.topics["dlq"],
               "--namespace", "default", "--progress-s", "5"]
        if tier:
            cmd += ["--service-tier", tier]
        p = subprocess.Popen(cmd, stdout=open(tmp / f"batch-{self.prefix}.log", "wb"),
                             stderr=subprocess.STDOUT)
        self.procs.insert(0, p)
        # steady state: bulk turns (or the batch's interactive ones) fill the batch
        cls = "bulk" if not tier else "interactive"
        key = f'parley_sched_running_by_class{{class="{cls}"}}'
        wait_for(lambda: self.metrics().get(key, 0) >= 1, 120, f"batch turns ({cls}) running",
                 p, tmp / f"batch-{self.prefix}.log")
        time.sleep(self.a.settle_s)
        return p

    def close(self):
        stop(self.procs)
        self.admin.delete_topics(list(self.topics.values()))


class Sampler:
    """Polls the worker's /metrics every period s while a window runs:
    generated tokens estimated as the sum over polls of (forward steps since
    the last poll) x (running sequences, mean of the two polls) -- each
    running sequence gets one token a step -- which, unlike the turn-end
    counter, does not move in waves of whole turns (plus the speculative
    drafts accepted: scheduler.speculative is ngram by default, so a
    step can give a sequence more than one token); and the busy step time:
    time / steps over the polls with sequences running at both ends."""

    def __init__(self, stack, period=0.5):
        self.stack, self.period = stack, period
        self.samples, self.halt = [], threading.Event()
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self):
        while not self.halt.is_set():
            try:
                m = self.stack.metrics()
                self.samples.append((time.perf_counter(), m.get("parley_sched_steps_total", 0),
                                     m.get("parley_sched_running", 0),
                                     m.get("parley_sched_spec_accepted_tokens_total", 0)))
            except OSError:
                pass
            self.halt.wait(self.period)

    def close(self):
        self.halt.set()
        self.t.join()
        s = self.samples
        tok = busy_t = busy_steps = 0.0
        for (t0, s0, r0, a0), (t1, s1, r1, a1) in zip(s, s[1:]):
            tok += (s1 - s0) * (r0 + r1) / 2 + (a1 - a0)
            if r0 > 0 and r1 > 0:
                busy_t, busy_steps = busy_t + (t1 - t0), busy_steps + (s1 - s0)
        wall = s[-1][0] - s[0][0] if len(s) > 1 else float("nan")
        return {"est_tokens_per_s": tok / wall if wall == wall and wall > 0 else float("nan"),
                "step_ms_busy": busy_t * 1e3 / busy_steps if busy_steps else float("nan")}


def one_turn(client, messages, max_tokens):
    """Stream one turn; returns (reply, ttft_s, total_s, completion_tokens)."""
    t0 = time.perf_counter()
    ttft, parts, usage = None, [], None
    stream = client.chat.completions.create(
        model="bench", messages=messages, max_tokens=max_tokens, temperature=0, stream=True,
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
    return "".join(parts), ttft if ttft is not None else total, total, usage.completion_tokens


def interactive(url, key, convs, turns, rate, max_tokens, tag):
    """convs x turns streaming turns at a steady rate; returns records, wall."""
    recs, mu, errs = [], threading.Lock(), []
    t0 = time.perf_counter()

    def conv(i):
        c = openai.OpenAI(base_url=url, api_key=key, max_retries=0, timeout=900)
        msgs = []
        try:
            for t in range(turns):
                due = t0 + (t * convs + i) / rate
                now = time.perf_counter()
                if now < due:
                    time.sleep(due - now)
                late = max(0.0, time.perf_counter() - due)
                msgs.append({"role": "user", "content":
                             SCRIPT[(i * 5 + t) % len(SCRIPT)] if turns > 1 else
                             f"{SCRIPT[i % len(SCRIPT)]} (request {tag}-{i})"})
                reply, ttft, total, comp = one_turn(c, msgs, max_tokens)
                msgs.append({"role": "assistant", "content": reply})
                with mu:
                    recs.append({"conv": i, "turn": t + 1, "ttft": ttft, "total": total,
                                 "completion": comp, "late": late})
        except openai.APIError as e:  # a 504 behind the backlog: counted, the conversation ends
            with mu:
                errs.append(f"{tag} conversation {i}: {e!r}")
                recs.append({"conv": i, "turn": len(msgs) // 2 + 1, "error": repr(e)})

    ts = [threading.Thread(target=conv, args=(i,)) for i in range(convs)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    wall = time.perf_counter() - t0
    for e in errs:
        print(f"  failed turn: {e}", flush=True)
    return recs, wall


def summarize(recs):
    failed = sum(1 for r in recs if "error" in r)
    recs = [r for r in recs if "error" not in r]
    f = [r["ttft"] * 1e3 for r in recs]
    x = [r["total"] * 1e3 for r in recs]
    per_tok = [(r["total"] - r["ttft"]) * 1e3 / (r["completion"] - 1) for r in recs
               if r["completion"] > 1]
    return {"turns": len(recs), "ttft_p50_ms": pct(f, 50), "ttft_p99_ms": pct(f, 99),
            "latency_p50_ms": pct(x, 50), "latency_p99_ms": pct(x, 99),
            "token_ms_p50": statistics.median(per_tok) if per_tok else float("nan"),
            "late_max_s": max((r["late"] for r in recs), default=0.0),
            "completion_tokens": sum(r["completion"] for r in recs), "failed_turns": failed}


def window(m0, m1, wall):
    d = lambda k: m1.get(k, 0) - m0.get(k, 0)  # noqa: E731
    steps = d("parley_sched_steps_total")
    return {"window_s": wall, "gen_tokens_per_s": d("parley_completion_tokens_total") / wall,
            "steps": steps, "step_ms_metrics": wall * 1e3 / steps if steps else float("nan"),
            "class_preemptions": d("parley_sched_class_preemptions_total"),
            "bulk_turns_ended": d('parley_class_turns_total{class="bulk"}'),
            "interactive_turns_ended": d('parley_class_turns_total{class="interactive"}'),
            "bulk_step_share": (d("parley_sched_bulk_steps_total") / steps) if steps else 0.0}


def phase_alone(a, tmp):
    s = Stack(a, tmp, "alone")
    try:
        la = loadavg()
        m0, smp = s.metrics(), Sampler(s)
        recs, wall = interactive(s.url, "sk-bench", a.conversations, a.turns, a.rate,
                                 a.max_tokens, "alone")
        m1, est = s.metrics(), smp.close()
    finally:
        s.close()
    return {"phase": "alone", "loadavg": la, **summarize(recs), **window(m0, m1, wall), **est}


def phase_bulk(a, tmp):
    s = Stack(a, tmp, "bulk")
    try:
        s.batch(a.backlog, None, tmp)
        la = loadavg()
        m0, t0, smp = s.metrics(), time.perf_counter(), Sampler(s)
        time.sleep(a.bulk_alone_s)
        m1, wall, est = s.metrics(), time.perf_counter() - t0, smp.close()
    finally:
        s.close()
    return {"phase": "bulk", "loadavg": la, **window(m0, m1, wall), **est}


def phase_mixed(a, tmp, name, tier):
    s = Stack(a, tmp, name)
    try:
        b = s.batch(a.backlog, tier, tmp)
        la = loadavg()
        m0, smp = s.metrics(), Sampler(s)
        recs, wall = interactive(s.url, "sk-bench", a.conversations, a.turns, a.rate,
                                 a.max_tokens, name)
        m1, est = s.metrics(), smp.close()
        cls = "bulk" if not tier else "interactive"
        busy = b.poll() is None and (
            m1.get(f'parley_sched_running_by_class{{class="{cls}"}}', 0) > 0)
    finally:
        s.close()
    return {"phase": name, "loadavg": la, "batch_tier": tier or "flex (bulk)",
            "backlog_busy_to_the_end": busy, **summarize(recs), **window(m0, m1, wall), **est}


def phase_fair(a, tmp):
    s = Stack(a, tmp, "fair")
    try:
        la = loadavg()
        b_alone, _ = interactive(s.url, "sk-b", a.fair_b_turns, 1, 1.0, a.max_tokens, "b0")
        burst_done = []

        def burst(i):
            c = openai.OpenAI(base_url=s.url, api_key="sk-a", max_retries=0, timeout=900)
            msg = f"Write a short paragraph about {TOPICS[i % len(TOPICS)]} (request a-{i})."
            _, _, total, _ = one_turn(c, [{"role": "user", "content": msg}], a.bulk_max_tokens)
            burst_done.append(total)

        ts = [threading.Thread(target=burst, args=(i,)) for i in range(a.fair_burst)]
        for t in ts:
            t.start()
        time.sleep(a.settle_s)
        m0, smp = s.metrics(), Sampler(s)
        b_mixed, wall = interactive(s.url, "sk-b", a.fair_b_turns, 1, 1.0, a.max_tokens, "b1")
        m1, est = s.metrics(), smp.close()
        a_waiting = m1.get('parley_sched_waiting_by_class{class="interactive"}', 0)
        for t in ts:
            t.join()
    finally:
        s.close()
    sa, sm = summarize(b_alone), summarize(b_mixed)
    return {"phase": "fair", "loadavg": la, "b_alone": sa, "b_with_a_burst": sm,
            "a_burst": a.fair_burst, "waiting_at_end_of_b": a_waiting,
            "b_ttft_p99_ratio": sm["ttft_p99_ms"] / sa["ttft_p99_ms"],
            "b_ttft_p50_ratio": sm["ttft_p50_ms"] / sa["ttft_p50_ms"],
            **window(m0, m1, wall), **est}


def close_after(url, n_tokens, max_tokens, i):
    """One streaming request that closes after its first n_tokens tokens;
    returns (turn id, tokens received, monotonic close time)."""
    c = openai.OpenAI(base_url=url, api_key="sk-bench", max_retries=0, timeout=900)
    msg = f"Tell a very long story about {TOPICS[i % len(TOPICS)]} (request c-{i})."
    s = c.chat.completions.create(model="bench", max_tokens=max_tokens, temperature=0,
                                  stream=True, logprobs=True,
                                  messages=[{"role": "user", "content": msg}])
    cid, seen = None, 0
    for ch in s:
        cid = ch.id
        if ch.choices and ch.choices[0].logprobs and ch.choices[0].logprobs.content:
            seen += len(ch.choices[0].logprobs.content)
        if seen >= n_tokens:
            break
    s.close()
    c.close()
    return cid.split("-", 1)[1], seen, time.perf_counter()


def committed_results(a, topic, turn_ids, timeout=600):
    """turn id -> (committed TurnResult, monotonic time it was read) for
    every id in turn_ids, read_committed from the start of topic."""
    c = Consumer({"bootstrap.servers": a.kafka, "group.id": f"bench-{uuid.uuid4().hex[:8]}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                  "isolation.level": "read_committed"})
    c.subscribe([topic])
    out, end = {}, time.time() + timeout
    try:
        while time.time() < end and not set(turn_ids) <= set(out):
            m = c.poll(0.2)
            if m is None or m.error():
                continue
            r = msgpack.unpackb(m.value(), raw=False)
            if r.get("turn_id") in turn_ids:
                out.setdefault(r["turn_id"], (r, time.perf_counter()))
    finally:
        c.close()
    return out


def phase_cancel(a, tmp):
    s = Stack(a, tmp, "cancel")
    try:
        b = s.batch(a.backlog, None, tmp) if a.backlog else None
        la = loadavg()
        smp = Sampler(s)
        time.sleep(a.cancel_window_s)
        before = smp.close()
        m0 = s.metrics()
        closed = [None] * a.cancel_streams

        def one(i):
            closed[i] = close_after(s.url, a.cancel_after, a.cancel_max_tokens, i)

        ts = [threading.Thread(target=one, args=(i,)) for i in range(a.cancel_streams)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        smp, t_after = Sampler(s), time.perf_counter()
        res = committed_results(a, s.topics["responses"], {c[0] for c in closed if c})
        time.sleep(max(0.0, a.cancel_window_s - (time.perf_counter() - t_after)))
        after = smp.close()
        m1 = s.metrics()
        busy = b is not None and b.poll() is None
    finally:
        s.close()
    step_ms = after["step_ms_busy"] if after["step_ms_busy"] == after["step_ms_busy"] \
        else before["step_ms_busy"]
    spec = m1.get("parley_sched_spec_accepted_tokens_total", 0) - \
        m0.get("parley_sched_spec_accepted_tokens_total", 0)
    per = []
    for c in closed:
        if not c or c[0] not in res:
            continue
        r, t_res = res[c[0]]
        gen = len(r.get("tokens", []))
        per.append({"turn_id": c[0], "received": c[1], "generated": gen,
                    "after_close": gen - c[1], "finish_reason": r.get("finish_reason"),
                    "close_to_result_ms": (t_res - c[2]) * 1e3})
    after_close = [p["after_close"] for p in per]
    saved = sum(a.cancel_max_tokens - p["generated"] for p in per)
    gen_s = after["est_tokens_per_s"]
    return {"phase": "cancel", "loadavg": la, "streams": a.cancel_streams,
            "results": len(per), "cancelled": sum(p["finish_reason"] == "cancelled" for p in per),
            "after_close_p50": pct(after_close, 50) if after_close else float("nan"),
            "after_close_max": max(after_close, default=float("nan")),
            "one_step_tokens": 1, "spec_accepted_during": spec,
            "within_one_step": sum(x <= 1 for x in after_close),
            "step_ms_busy": step_ms,
            "close_to_result_p50_ms": pct([p["close_to_result_ms"] for p in per], 50)
            if per else float("nan"),
            "tokens_saved": saved,
            "engine_s_saved_est": saved / gen_s if gen_s and gen_s == gen_s else float("nan"),
            "other_tokens_per_s_before": before["est_tokens_per_s"],
            "other_tokens_per_s_after": gen_s, "backlog_busy_to_the_end": busy,
            "turns": per}


def fmt(x, spec=".1f"):
    return "-" if x is None or (isinstance(x, float) and x != x) else format(x, spec)


def table(res):
    ph = {r["phase"]: r for r in res if "phase" in r}
    print("\nphase     TTFT p50   p99 ms  ratio p50/p99   latency p50  p99 ms  tok ms  "
          "step ms  gen tok/s (est)  preempt  load")
    for name in ("alone", "bulk", "mixed", "baseline"):
        r = ph.get(name)
        if not r:
            continue
        ratio = "-"
        if "ttft_p50_ms" in r and "alone" in ph and name != "alone":
            ratio = (f"{r['ttft_p50_ms'] / ph['alone']['ttft_p50_ms']:.2f}/"
                     f"{r['ttft_p99_ms'] / ph['alone']['ttft_p99_ms']:.2f}")
        print(f"{name:8s} {fmt(r.get('ttft_p50_ms')):>9s} {fmt(r.get('ttft_p99_ms')):>8s}  "
              f"{ratio:>13s}   {fmt(r.get('latency_p50_ms')):>11s} "
              f"{fmt(r.get('latency_p99_ms')):>7s} {fmt(r.get('token_ms_p50')):>7s} "
              f"{fmt(r.get('step_ms_busy')):>8s} {fmt(r.get('gen_tokens_per_s')):>9s} "
              f"({fmt(r.get('est_tokens_per_s'))}) "
              f"{fmt(r.get('class_preemptions'), '.0f'):>8s}  {r['loadavg']}"
              + (f"  FAILED TURNS {r['failed_turns']}" if r.get("failed_turns") else ""))
    for name in ("mixed", "baseline"):
        if name in ph and "bulk" in ph:
            r = [ph[name][k] / ph["bulk"][k] if ph["bulk"][k] else float("nan")
                 for k in ("gen_tokens_per_s", "est_tokens_per_s")]
            print(f"{name}: total generated tokens/s / bulk alone: {fmt(r[0], '.2f')} "
                  f"(turn-end counter), {fmt(r[1], '.2f')} (steps x running estimate)")
    for name in ("mixed", "baseline"):
        if name in ph and not ph[name]["backlog_busy_to_the_end"]:
            print(f"WARNING: {name}: the backlog ran out before the interactive load ended "
                  "(raise --backlog)")
    if "cancel" in ph:
        c = ph["cancel"]
        print(f"cancel: {c['results']}/{c['streams']} results ({c['cancelled']} cancelled); "
              f"tokens generated after the close p50 {fmt(c['after_close_p50'], '.0f')} max "
              f"{fmt(c['after_close_max'], '.0f')} (one step = {c['one_step_tokens']} token a "
              f"sequence; {c['within_one_step']} turns within it; close -> result p50 "
              f"{fmt(c['close_to_result_p50_ms'])} ms, step {fmt(c['step_ms_busy'])} ms); "
              f"{c['tokens_saved']} tokens saved (~{fmt(c['engine_s_saved_est'])} s of "
              f"engine); other work {fmt(c['other_tokens_per_s_before'])} tok/s before, "
              f"{fmt(c['other_tokens_per_s_after'])} after the closes")
    if "fair" in ph:
        f = ph["fair"]
        print(f"fair: tenant B TTFT p50/p99 alone {fmt(f['b_alone']['ttft_p50_ms'])}/"
              f"{fmt(f['b_alone']['ttft_p99_ms'])} ms, with A's burst of {f['a_burst']} "
              f"{fmt(f['b_with_a_burst']['ttft_p50_ms'])}/"
              f"{fmt(f['b_with_a_burst']['ttft_p99_ms'])} ms (p99 ratio "
              f"{f['b_ttft_p99_ratio']:.2f})")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kafka", default=os.environ.get("PARLEY_TEST_KAFKA"))
    ap.add_argument("--parley", default=os.environ.get("PARLEY_BIN", "build/consumer/parley"))
    ap.add_argument("--model", default=os.environ.get(
        "PARLEY_GEMMA_MODEL", str(Path.home() / ".cache/parley/models/gemma-3-270m-q4_k_m.gguf")))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--conversations", type=int, default=8)
    ap.add_argument("--turns", type=int, default=6)
    ap.add_argument("--rate", type=float, default=1.0,
                    help="interactive turns/s over all conversations (arrival schedule)")
    ap.add_argument("--max-tokens", type=int, default=48, help="interactive max_tokens")
    ap.add_argument("--backlog", type=int, default=2000, help="bulk batch requests")
    ap.add_argument("--bulk-max-tokens", type=int, default=48)
    ap.add_argument("--bulk-alone-s", type=float, default=30.0,
                    help="bulk alone: measured seconds once bulk runs")
    ap.add_argument("--settle-s", type=float, default=3.0,
                    help="wait after the backlog (or burst) starts running")
    ap.add_argument("--gateway-timeout-ms", type=int, default=600000,
                    help="gateway.timeout_ms (its default, 60 s, is shorter than an "
                    "interactive turn behind a bulk backlog on 2 cores)")
    ap.add_argument("--fair-burst", type=int, default=128, help="tenant A's burst (requests)")
    ap.add_argument("--fair-b-turns", type=int, default=10, help="tenant B's turns at 1/s")
    ap.add_argument("--phases", default="alone,bulk,mixed,baseline,fair,cancel")
    ap.add_argument("--cancel", action="store_true",
                    help="run the cancellation phase only (issue 40 section 3.4; "
                    "same as --phases cancel)")
    ap.add_argument("--cancel-streams", type=int, default=32)
    ap.add_argument("--cancel-max-tokens", type=int, default=512)
    ap.add_argument("--cancel-after", type=int, default=8,
                    help="tokens each cancel-phase client reads before it closes")
    ap.add_argument("--cancel-window-s", type=float, default=10.0,
                    help="the other work's throughput window before and after the closes")
    ap.add_argument("--worker-arg", action="append", default=[],
                    help="an extra worker flag (repeatable), e.g. --worker-arg=--x=1")
    ap.add_argument("--out", help="write the results as JSON to this file")
    a = ap.parse_args()
    a.worker_arg = [y for x in a.worker_arg for y in x.split("=", 1)]
    if a.cancel:
        a.phases = "cancel"
    if not a.kafka:
        sys.exit("bench_mixed: --kafka HOST:PORT (or PARLEY_TEST_KAFKA) is required")
    phases = a.phases.split(",")
    bad = set(phases) - {"alone", "bulk", "mixed", "baseline", "fair", "cancel"}
    if bad:
        sys.exit(f"bench_mixed: unknown phases {sorted(bad)}")
    tmp = Path(tempfile.mkdtemp(prefix="bench-mx-"))
    cpu = next((x.split(":", 1)[1].strip() for x in open("/proc/cpuinfo")
                if x.startswith("model name")), "?")
    flags = next((x.split(":", 1)[1].split() for x in open("/proc/cpuinfo")
                  if x.startswith("flags")), [])
    isa = [f for f in ("avx2", "avx512f", "avx512_vnni", "avx_vnni") if f in flags]
    meta = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "cpu": cpu,
            "cpus": os.cpu_count(), "isa": isa, "model": a.model, "threads": a.threads,
            "conversations": a.conversations, "turns": a.turns, "rate": a.rate,
            "max_tokens": a.max_tokens, "backlog": a.backlog,
            "bulk_max_tokens": a.bulk_max_tokens, "argv": sys.argv[1:],
            "logs": str(tmp)}
    print(f"{meta['date']}: {cpu} ({' '.join(isa)}), {os.cpu_count()} CPUs, load {loadavg()}; "
          f"{a.threads} threads; interactive {a.conversations} x {a.turns} at {a.rate}/s, "
          f"max_tokens {a.max_tokens}; backlog {a.backlog} x {a.bulk_max_tokens}; logs {tmp}",
          flush=True)
    res = [meta]
    for p in phases:
        t0 = time.time()
        if p == "alone":
            r = phase_alone(a, tmp)
        elif p == "bulk":
            r = phase_bulk(a, tmp)
        elif p == "mixed":
            r = phase_mixed(a, tmp, "mixed", None)
        elif p == "baseline":
            r = phase_mixed(a, tmp, "baseline", "default")
        elif p == "cancel":
            r = phase_cancel(a, tmp)
        else:
            r = phase_fair(a, tmp)
        r["phase_wall_s"] = time.time() - t0
        res.append(r)
        print(json.dumps(r), flush=True)
        if a.out:  # after every phase: a cut-short run keeps what it measured
            Path(a.out).write_text(json.dumps(res, indent=1) + "\n")
    table(res)


if __name__ == "__main__":
    main()
