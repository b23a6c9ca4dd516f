"""worker_kit.py -- what the worker tests share (no test functions here):
the module-scoped cai-tiny `model` fixture; `Env`, one test's topics,
consumer group and `parley worker` processes; producing ChatTurns
(`turn_record`, `produce_workload`, `produce_turn`); reading the outputs
back (`collect`, `read_to_end`, `drain`, `watermarks`); the exactly-once
check of results and chunks (`check_results`); and the worker's HTTP
endpoint (`free_port`, `wait_listening`, `http_get`, `metric`).
"""

import os
import re
import signal
import socket
import subprocess
import urllib.error
import urllib.request
import time
import uuid
from collections import defaultdict

import pytest

msgpack = pytest.importorskip("msgpack")
ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

SYSTEM = ("You are a helpful assistant that answers briefly and politely, "
          "always in plain English, and never repeats the question back.")


@pytest.fixture(scope="module")
def model(parley_bin, tmp_path_factory):
    path = tmp_path_factory.mktemp("wkmodel") / "cai-tiny.gguf"
    subprocess.run([str(parley_bin), "mkmodel", "--preset", "cai-tiny", "--out", str(path)],
                   check=True, capture_output=True, timeout=60)
    return path


class Env:
    """Topics, group and worker processes of one test."""

    def __init__(self, bootstrap, parley_bin, model, tmp_path, partitions=4, protocol="classic",
                 replication=1, topic_config=None):
        self.bootstrap = bootstrap
        self.protocol = protocol  # consumer group protocol: classic or consumer (KIP-848)
        self.bin = str(parley_bin)
        self.model = str(model)
        self.tmp = tmp_path
        sfx = uuid.uuid4().hex[:10]
        self.topics = {k: f"wk-{k}-{sfx}" for k in ("turns", "tokens", "responses", "dlq")}
        self.group = f"wk-group-{sfx}"
        self.procs = {}
        admin = AdminClient({"bootstrap.servers": bootstrap})
        # replication / topic_config: a cluster's (test_cluster_faults.py)
        cfg = dict(topic_config or {})
        futs = admin.create_topics([
            NewTopic(self.topics["turns"], partitions, replication, config=cfg),
            NewTopic(self.topics["tokens"], partitions, replication, config=cfg),
            NewTopic(self.topics["responses"], partitions, replication, config=cfg),
            NewTopic(self.topics["dlq"], 1, replication, config=cfg),
        ])
        for f in futs.values():
            f.result(30)

    def start(self, wid, *extra, env=None):
        """Start worker `wid` with extra flags; `env` adds environment variables."""
        log = open(self.tmp / f"{wid}.log", "wb")
        args = [self.bin, "worker",
                "--model.path", self.model,
                "--model.threads", "1",
                "--worker.id", wid,
                "--worker.group", self.group,
                "--worker.topic.turns", self.topics["turns"],
                "--worker.topic.tokens", self.topics["tokens"],
                "--worker.topic.responses", self.topics["responses"],
                "--worker.topic.dlq", self.topics["dlq"],
                "--worker.chunk_tokens", "3",
                "--scheduler.batch_window_us", "2000",
                "--kafka.bootstrap.servers", self.bootstrap,
                # classic: session and heartbeat are the client's; KIP-848: the
                # broker's (deploy/kafka.sh sets the same 6 s / 500 ms)
                *(["--kafka.session.timeout.ms", "6000", "--kafka.heartbeat.interval.ms", "500"]
                  if self.protocol == "classic" else ["--kafka.group.protocol", "consumer"]),
                "--kafka.transaction.timeout.ms", "8000", *extra]
        self.procs[wid] = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT,
                                           env={**os.environ, **(env or {})})
        if "--worker.http" in extra:
            # the endpoint opens once the worker's Kafka clients are set up
            # (init_transactions, refusal checks): seconds on a busy machine
            addr = extra[list(extra).index("--worker.http") + 1]
            wait_listening(int(str(addr).rsplit(":", 1)[-1]), self.procs[wid], self.log, wid)
        return self.procs[wid]

    def log(self, wid):
        return (self.tmp / f"{wid}.log").read_text(errors="replace")

    def stop_all(self):
        for p in self.procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs.values():
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def consumer(self, topic, isolation):
        c = ck.Consumer({"bootstrap.servers": self.bootstrap,
                         "group.id": f"reader-{uuid.uuid4().hex[:8]}",
                         "auto.offset.reset": "earliest",
                         "enable.auto.commit": False,
                         "isolation.level": isolation})
        c.subscribe([self.topics[topic]])
        return c


def turn_record(conv, t, max_tokens, model=None, service_class=None):
    msgs = [{"role": "system", "content": SYSTEM}]
    for k in range(t + 1):
        msgs.append({"role": "user", "content": f"conversation {conv} question {k}: how are you?"})
        if k < t:
            msgs.append({"role": "assistant", "content": f"answer {k} of conversation {conv}"})
    rec = {"v": 1, "conversation_id": f"conv-{conv}", "turn_id": f"conv-{conv}-t{t}",
           "messages": msgs, "params": {"max_tokens": max_tokens, "temperature": 0.0},
           "stream": True}
    if model:
        rec["model"] = model
    if service_class:
        rec["service_class"] = service_class
    return msgpack.packb(rec, use_bin_type=True)


TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
CANCEL_CT = "application/x-parley-cancel+msgpack; v=1"  # a CancelTurn's content type


def cancel_record(conv, tid, reason):
    """A CancelTurn (spec 1.4) for turn tid of conversation conv."""
    return msgpack.packb({"v": 1, "conversation_id": conv, "turn_id": tid, "reason": reason})


def produce_workload(env, convs, turns, max_tokens, poison=True, first_turn=0):
    """Produce convs x turns ChatTurns (turn-major, so conversations interleave;
    turns first_turn..turns-1) and the poison records; returns the expected
    DLQ codes."""
    p = ck.Producer({"bootstrap.servers": env.bootstrap, "enable.idempotence": True})
    topic = env.topics["turns"]
    expected_dlq = []
    for t in range(first_turn, turns):
        for c in range(convs):
            p.produce(topic, key=f"conv-{c}", value=turn_record(c, t, max_tokens),
                      headers=[("traceparent", TRACEPARENT)])
        if poison and t == 0:
            p.produce(topic, key="poison-1", value=b"\x93\x01\x02\x03")  # an array
            expected_dlq.append("E_NOT_MAP")
            p.produce(topic, key="poison-2", value=msgpack.packb({"v": 1, "turn_id": "x"}))
            expected_dlq.append("E_MISSING_FIELD")
            p.produce(topic, key="someone-else", value=turn_record(0, 0, 4))
            expected_dlq.append("E_KEY_MISMATCH")
            p.produce(topic, key="conv-x", value=msgpack.packb(
                {"v": 1, "conversation_id": "conv-x", "turn_id": "conv-x-t0",
                 "messages": [{"role": "user", "content": "hi"}], "model": "no-such-model"}))
            expected_dlq.append("E_UNKNOWN_MODEL")
            p.produce(topic, key="conv-y", value=msgpack.packb(
                {"v": 1, "conversation_id": "conv-y", "turn_id": "conv-y-t0",
                 "messages": [{"role": "user", "content": "hi"}], "model": "x" + "modèle-é" * 20}))
            expected_dlq.append("E_UNKNOWN_MODEL")  # reason quotes a cut multibyte name
            # a turn past its deadline is answered (finish_reason expired), not DLQ'd
            p.produce(topic, key="conv-z", value=msgpack.packb(
                {"v": 1, "conversation_id": "conv-z", "turn_id": "conv-z-t0", "deadline_ms": 1,
                 "messages": [{"role": "user", "content": "too late"}]}))
    p.flush(30)
    return sorted(expected_dlq)


def collect(consumer, want, timeout, procs_alive=None):
    """Poll until `want` records arrived or timeout; returns the messages."""
    out = []
    end = time.time() + timeout
    while time.time() < end and len(out) < want:
        m = consumer.poll(0.5)
        if m is None or m.error():
            continue
        out.append(m)
    return out


def wait_assigned(*consumers, timeout=60):
    """Poll the consumers until each owns its topic's partitions (messages
    polled meanwhile would be lost: call it before anything is produced)."""
    end = time.time() + timeout
    while time.time() < end and not all(c.assignment() for c in consumers):
        for c in consumers:
            c.poll(0.1)
    assert all(c.assignment() for c in consumers)


def watermarks(consumer, tp, end):
    """(low, high) of tp, asked again while the answer is a retriable error
    (a leader that just moved: NOT_LEADER_FOR_PARTITION from a broker the
    client's metadata still names) until time `end`."""
    while True:
        try:
            return consumer.get_watermark_offsets(tp, timeout=10, cached=False)
        except ck.KafkaException as e:
            err = e.args[0]
            moving = err.code() in (ck.KafkaError.NOT_LEADER_FOR_PARTITION,
                                    ck.KafkaError.LEADER_NOT_AVAILABLE,
                                    ck.KafkaError._TRANSPORT, ck.KafkaError._TIMED_OUT)
            if not (moving or err.retriable()) or time.time() >= end:
                raise
            time.sleep(0.2)


def read_to_end(consumer, limit=60.0):
    """Every record from the consumer's position up to the end offsets its
    partitions have now: the high watermark, reached by a read_committed
    reader once the transactions below it are resolved (its position moves
    past their markers).  The exactly-once checks read this, not a fixed
    time: a duplicate committed before the check is always seen."""
    out, end = [], time.time() + limit
    while not consumer.assignment() and time.time() < end:
        m = consumer.poll(0.2)
        if m is not None and not m.error():
            out.append(m)
    parts = consumer.assignment()
    assert parts, "the reader got no partitions"
    marks = {}
    for tp in parts:
        marks[(tp.topic, tp.partition)] = watermarks(consumer, tp, end)
    while True:
        pos = {(tp.topic, tp.partition): tp.offset for tp in consumer.position(parts)}
        if all(hi <= lo or pos[k] >= hi for k, (lo, hi) in marks.items()):
            return out
        assert time.time() < end, f"end offsets {marks} not reached in {limit} s: at {pos}"
        m = consumer.poll(0.2)
        if m is not None and not m.error():
            out.append(m)


def drain(consumer, seconds):
    """Records arriving within `seconds` (for at-least-once topics read
    while something may still come; exactly-once checks use read_to_end)."""
    out = []
    end = time.time() + seconds
    while time.time() < end:
        m = consumer.poll(0.3)
        if m is not None and not m.error():
            out.append(m)
    return out


def uncached_later_turns(results):
    """Later turns (t1, t2, ...) served by the same worker as the turn before
    them whose prompt nonetheless got no cached tokens: that worker holds
    the conversation's KV, so each of these is a prefix-cache miss."""
    by_conv = defaultdict(dict)
    for m in results:
        r = msgpack.unpackb(m.value(), raw=False)
        by_conv[r["conversation_id"]][int(r["turn_id"].rsplit("-t", 1)[1])] = r
    return [r["turn_id"] for turns in by_conv.values() for t, r in turns.items()
            if t > 0 and t - 1 in turns and turns[t - 1]["worker"] == r["worker"]
            and r["usage"]["cached_tokens"] == 0]


def check_results(env, results, chunks, convs, turns, cancellable=frozenset()):
    """Exactly one result per turn, each conversation's in turn order, the
    counted attempt's chunks equal to its result; a turn in `cancellable`
    (a CancelTurn was sent for it) may end `cancelled`, with what it had
    generated (nothing, when cancelled before it ran: then no chunks)."""
    by_turn = defaultdict(list)
    order = defaultdict(list)
    for m in results:
        r = msgpack.unpackb(m.value(), raw=False)
        by_turn[r["turn_id"]].append(r)
        order[r["conversation_id"]].append(r["turn_id"])
        assert m.key().decode() == r["conversation_id"]
        assert dict(m.headers() or []).get("traceparent") == TRACEPARENT.encode()
    expected = {f"conv-{c}-t{t}" for c in range(convs) for t in range(turns)}
    assert set(by_turn) == expected, f"missing {sorted(expected - set(by_turn))[:5]}"
    dups = {k: len(v) for k, v in by_turn.items() if len(v) != 1}
    assert not dups, f"duplicated results: {dups}"
    for c in range(convs):
        assert order[f"conv-{c}"] == [f"conv-{c}-t{t}" for t in range(turns)]
    chunk_map = defaultdict(list)
    for m in chunks:
        ch = msgpack.unpackb(m.value(), raw=False)
        chunk_map[(ch["turn_id"], ch["attempt"])].append(ch)
    attempts = defaultdict(set)
    for (tid, att) in chunk_map:
        attempts[tid].add(att)
    cached_later = 0
    for tid, (r,) in by_turn.items():
        cs = sorted(chunk_map[(tid, r["attempt"])], key=lambda x: x["seq"])
        if tid in cancellable and r["finish_reason"] == "cancelled":
            assert r["usage"]["completion_tokens"] == len(r["tokens"]), r
        else:
            assert r["finish_reason"] in ("stop", "length"), r
            assert r["usage"]["completion_tokens"] == len(r["tokens"]) >= 1
            assert cs and cs[-1].get("last") is True
        assert [x["seq"] for x in cs] == list(range(len(cs))), tid
        assert "".join(x["text"] for x in cs) == r["text"], tid
        assert [t for x in cs for t in x["tokens"]] == r["tokens"], tid
        if not tid.endswith("-t0"):
            cached_later += r["usage"]["cached_tokens"] > 0
    redone = sum(1 for v in attempts.values() if len(v) > 1)
    return cached_later, redone


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(port, proc, log, wid, timeout=90):
    """Wait until the worker proc accepts connections on 127.0.0.1:port."""
    end = time.time() + timeout
    while time.time() < end and proc.poll() is None:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"worker {wid} never listened on {port}: {log(wid)[-2000:]}")


def http_get(port, path):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def metric(text, name):
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"{name} not in /metrics")


def owned(env, wid):
    """Partitions the worker owns now, from its assigned/revoked/lost log lines."""
    n = 0
    for m in re.finditer(r"event=(assigned|revoked|lost) partitions=(\d+)", env.log(wid)):
        n += int(m.group(2)) if m.group(1) == "assigned" else -int(m.group(2))
    return n


def produce_turn(env, convs, t, max_tokens):
    p = ck.Producer({"bootstrap.servers": env.bootstrap, "enable.idempotence": True})
    for c in range(convs):
        p.produce(env.topics["turns"], key=f"conv-{c}", value=turn_record(c, t, max_tokens))
    p.flush(30)
