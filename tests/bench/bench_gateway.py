"""bench_gateway.py -- what `parley gateway` adds per request, and how many
requests/s it carries, on a real Kafka broker and one cai-tiny worker.

Not part of the test suite (a benchmark, numbers only).  Usage:

  python tests/bench/bench_gateway.py --parley build/consumer/parley \
      --kafka HOST:9092 [--requests 200] [--concurrency 1,8,32] [--threads 1]

(--kafka defaults to $PARLEY_TEST_KAFKA.)  It creates its own topics
(bench-gw-<random>.*), makes the cai-tiny model, starts one worker and one
gateway, then:

  1. latency: --requests sequential requests with a 1-token reply
     (max_tokens 1, temperature 0), each a new conversation, alternately
     (a) produced as a msgpack ChatTurn straight to the turns topic and
     waited for as a TurnResult (read_committed), and (b) sent through the
     gateway with the official `openai` client (non-streaming).  Prints
     p50/p99 of both and of their difference (the gateway's overhead: HTTP,
     JSON, its own Kafka producer and reader);
  2. throughput: --requests gateway requests from each concurrency level of
     client threads; prints requests/s;
  3. the worker's own account of every turn above (its `event=stopped`
     line: overhead p50, scheduler queue, engine and post-engine means,
     transactions).

The figures include the Python clients on the same machine; the direct path
has the same Kafka round trip and worker time, so the difference is what the
gateway adds.
"""

import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import msgpack
import openai
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


class Results:
    """A read_committed reader of the responses topic from its end now,
    handing each TurnResult to whoever waits for its turn_id."""

    def __init__(self, brokers, topic):
        self.c = Consumer({"bootstrap.servers": brokers, "group.id": f"bench-{uuid.uuid4().hex}",
                           "enable.auto.commit": False, "isolation.level": "read_committed",
                           "fetch.wait.max.ms": 5})
        md = self.c.list_topics(topic, timeout=10).topics[topic]
        tps = []
        for p in md.partitions:
            lo, hi = self.c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            tps.append(TopicPartition(topic, p, hi))
        self.c.assign(tps)
        self.mu = threading.Lock()
        self.waiting, self.got = {}, {}
        self.stop = False
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self):
        while not self.stop:
            m = self.c.poll(0.05)
            if m is None or m.error():
                continue
            r = msgpack.unpackb(m.value(), raw=False)
            with self.mu:
                ev = self.waiting.get(r["turn_id"])
                self.got[r["turn_id"]] = r
            if ev:
                ev.set()

    def expect(self, turn_id):
        ev = threading.Event()
        with self.mu:
            self.waiting[turn_id] = ev
        return ev

    def close(self):
        self.stop = True
        self.t.join()
        self.c.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--parley", default=os.environ.get("PARLEY_BIN", "build/consumer/parley"))
    ap.add_argument("--kafka", default=os.environ.get("PARLEY_TEST_KAFKA"))
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--concurrency", default="1,8,32")
    ap.add_argument("--threads", type=int, default=1, help="worker model threads")
    a = ap.parse_args()
    if not a.kafka:
        sys.exit("bench_gateway: --kafka HOST:PORT (or PARLEY_TEST_KAFKA) is required")
    tmp = Path(tempfile.mkdtemp(prefix="bench-gw-"))
    prefix = f"bench-gw-{uuid.uuid4().hex[:8]}"
    topics = {k: f"{prefix}.{k}" for k in ("turns", "tokens", "responses", "dlq")}
    model = tmp / "cai-tiny.gguf"
    subprocess.run([a.parley, "mkmodel", "--preset", "cai-tiny", "--out", str(model)],
                   check=True, capture_output=True)
    admin = AdminClient({"bootstrap.servers": a.kafka})
    for f in admin.create_topics([NewTopic(t, 4 if k != "dlq" else 1, 1)
                                  for k, t in topics.items()]).values():
        f.result(30)
    log = open(tmp / "worker.log", "wb")
    worker = subprocess.Popen(
        [a.parley, "worker", "--model.path", str(model), "--model.threads", str(a.threads),
         "--worker.id", f"w-{prefix}", "--worker.group", f"g-{prefix}",
         "--worker.topic.turns", topics["turns"], "--worker.topic.tokens", topics["tokens"],
         "--worker.topic.responses", topics["responses"], "--worker.topic.dlq", topics["dlq"],
         "--kafka.bootstrap.servers", a.kafka], stdout=log, stderr=subprocess.STDOUT)
    gw = subprocess.Popen(
        [a.parley, "gateway", "--kafka.bootstrap.servers", a.kafka,
         "--gateway.listen", "127.0.0.1:0", "--gateway.topic.turns", topics["turns"],
         "--gateway.topic.tokens", topics["tokens"], "--gateway.topic.responses",
         topics["responses"], "--gateway.topic.dlq", topics["dlq"],
         "--gateway.api_keys", "sk-bench=default", "--gateway.max_inflight", "1024"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        url = re.search(r"listening on (http://[0-9.]+:\d+)", gw.stdout.readline()).group(1)
        end = time.time() + 60
        while time.time() < end and "event=assigned" not in (tmp / "worker.log").read_text():
            time.sleep(0.1)
        res = Results(a.kafka, topics["responses"])
        prod = Producer({"bootstrap.servers": a.kafka, "enable.idempotence": True,
                         "linger.ms": 0})
        client = openai.OpenAI(base_url=url + "/v1", api_key="sk-bench", max_retries=0,
                               timeout=60)

        def direct(i):
            conv, tid = f"{prefix}-d{i}", f"{prefix}-d{i}-t0"
            rec = msgpack.packb({"v": 1, "conversation_id": conv, "turn_id": tid,
                                 "model": "cai-tiny", "stream": False,
                                 "messages": [{"role": "user", "content": f"direct {i}"}],
                                 "params": {"max_tokens": 1, "temperature": 0.0}},
                                use_bin_type=True)
            ev = res.expect(tid)
            t0 = time.perf_counter()
            prod.produce(topics["turns"], key=conv, value=rec)
            prod.poll(0)
            if not ev.wait(60):
                raise RuntimeError(f"no TurnResult for {tid}")
            return time.perf_counter() - t0

        def via_gateway(i, c=client, tag="g"):
            t0 = time.perf_counter()
            r = c.chat.completions.create(
                model="cai-tiny", max_tokens=1, temperature=0,
                messages=[{"role": "user", "content": f"gateway {tag} {i}"}])
            assert r.choices[0].finish_reason in ("stop", "length")
            return time.perf_counter() - t0

        for i in range(10):  # warm-up: connections, the worker's first turns
            direct(-1 - i)
            via_gateway(-1 - i)
        d, g = [], []
        for i in range(a.requests):
            d.append(direct(i))
            g.append(via_gateway(i))
        ms = lambda x: x * 1000.0  # noqa: E731
        diff = [y - x for x, y in zip(d, g)]
        print(f"latency, {a.requests} sequential requests each, max_tokens 1, cai-tiny:")
        for name, xs in (("direct Kafka", d), ("gateway", g)):
            print(f"  {name:13s} p50 {ms(pct(xs, 50)):7.2f} ms  p99 {ms(pct(xs, 99)):7.2f} ms  "
                  f"mean {ms(statistics.mean(xs)):7.2f} ms")
        print(f"  overhead      p50 {ms(pct(g, 50) - pct(d, 50)):7.2f} ms  "
              f"p99 {ms(pct(g, 99) - pct(d, 99)):7.2f} ms  (p50 of pairwise differences "
              f"{ms(pct(diff, 50)):.2f} ms)")
        print(f"throughput through the gateway, {a.requests} requests per level:")
        for n in (int(x) for x in a.concurrency.split(",")):
            clients = [openai.OpenAI(base_url=url + "/v1", api_key="sk-bench", max_retries=0,
                                     timeout=120) for _ in range(n)]
            pending = list(range(a.requests))
            mu = threading.Lock()
            lat = []

            def run(c, tag):
                while True:
                    with mu:
                        if not pending:
                            return
                        i = pending.pop()
                    x = via_gateway(i, c, tag)
                    with mu:
                        lat.append(x)

            t0 = time.perf_counter()
            ts = [threading.Thread(target=run, args=(clients[k], f"c{n}-{k}"))
                  for k in range(n)]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
            wall = time.perf_counter() - t0
            print(f"  {n:3d} clients: {a.requests / wall:7.1f} requests/s  "
                  f"(p50 {ms(pct(lat, 50)):.1f} ms, p99 {ms(pct(lat, 99)):.1f} ms)")
        prod.flush(10)
        res.close()
    finally:
        gw.send_signal(signal.SIGTERM)
        worker.send_signal(signal.SIGTERM)
        for p in (gw, worker):
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
        admin.delete_topics(list(topics.values()))
    stopped = [x for x in (tmp / "worker.log").read_text(errors="replace").splitlines()
               if "event=stopped" in x]
    if stopped:  # where the worker says a turn's time went, over every request above
        ws = dict(re.findall(r"(\w+)=(\S+)", stopped[-1]))
        print("worker: " + "  ".join(f"{k} {ws.get(k)}" for k in (
            "overhead_p50_ms", "overhead_mean_ms", "sched_queue_mean_ms", "engine_mean_ms",
            "post_mean_ms", "commits", "results")))


if __name__ == "__main__":
    main()
