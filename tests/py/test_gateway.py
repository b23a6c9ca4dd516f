"""`parley gateway` against the real Kafka broker and a real worker
(cai-tiny), with the official `openai` package as the client:
non-streaming and streaming chat, models.list, a bad request (400), a
wrong key (401), an oversized body (400), an unknown model (404 via the
worker's DLQ), every request field parley cannot honour (400 naming it) and
/metrics showing nothing left in flight; 20 concurrent
two-turn conversations (the second turn reporting cached tokens), a client
leaving mid-stream or closing a non-streaming request (its turn
cancelled), a stopped worker (504, and 429 under backpressure) and
a turn redone mid-stream after kill -9."""

import json
import os
import re
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
import uuid

import pytest

openai = pytest.importorskip("openai")
ck = pytest.importorskip("confluent_kafka")
msgpack = pytest.importorskip("msgpack")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402


def start_fleet(kafka_bootstrap, parley_bin, tmp, prefix, partitions=4, wid=None, topics=True,
                revision=1, env=None, extra=()):
    """Topics under prefix (unless topics is false: they exist) and one
    worker serving model `cai-tiny`, its log in tmp/<wid>.log.  revision
    picks the synthetic weights (mkmodel --seed): another revision of the
    model under the same name, as in a rolling model update; env adds
    environment variables (fault injection); extra, worker options."""
    model = tmp / f"cai-tiny-r{revision}.gguf"
    if not model.exists():
        subprocess.run([str(parley_bin), "mkmodel", "--preset", "cai-tiny", "--seed", str(revision),
                        "--out", str(model)], check=True, capture_output=True, timeout=60)
    if topics:
        admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
        futs = admin.create_topics([NewTopic(f"{prefix}.{k}", partitions if k != "dlq" else 1, 1)
                                    for k in ("turns", "tokens", "responses", "dlq")])
        for f in futs.values():
            f.result(30)
    wid = wid or "worker"
    logf = tmp / f"{wid}.log"
    log = open(logf, "wb")
    proc = subprocess.Popen(
        [str(parley_bin), "worker", "--model.path", str(model), "--model.name", "cai-tiny",
         "--model.threads", "1",
         "--worker.id", f"{wid}-{prefix}", "--worker.group", f"g-{prefix}",
         "--worker.topic.turns", f"{prefix}.turns", "--worker.topic.tokens", f"{prefix}.tokens",
         "--worker.topic.responses", f"{prefix}.responses", "--worker.topic.dlq", f"{prefix}.dlq",
         "--worker.chunk_tokens", "2", "--scheduler.batch_window_us", "2000",
         "--kafka.bootstrap.servers", kafka_bootstrap, "--kafka.session.timeout.ms", "6000",
         "--kafka.heartbeat.interval.ms", "500", "--kafka.transaction.timeout.ms", "8000",
         *extra],
        stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})})
    # turns produced before the worker owns its partitions would be skipped
    # (a new group starts at the end): wait for its assignment
    end = time.time() + 60
    while time.time() < end and "event=assigned" not in logf.read_text(errors="replace"):
        time.sleep(0.1)
    return proc


def stop(proc):
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def start_gateway(kafka_bootstrap, parley_bin, prefix, *extra):
    """A gateway on the fleet's topics (key sk-test); returns (process, url)."""
    gw = subprocess.Popen(
        [str(parley_bin), "gateway", "--kafka.bootstrap.servers", kafka_bootstrap,
         "--gateway.listen", "127.0.0.1:0", "--gateway.topic.turns", f"{prefix}.turns",
         "--gateway.topic.tokens", f"{prefix}.tokens",
         "--gateway.topic.responses", f"{prefix}.responses", "--gateway.topic.dlq", f"{prefix}.dlq",
         "--gateway.api_keys", "sk-test=tenant-a", *extra],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    line = gw.stdout.readline()
    m = re.search(r"listening on (http://[0-9.]+:\d+)", line)
    assert m, line
    return gw, m.group(1)


@pytest.fixture(scope="module")
def gateway(kafka_bootstrap, parley_bin, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("gateway")
    prefix = f"gw-{uuid.uuid4().hex[:10]}"
    # while it exists, the worker's engine stops at a first chunk (at the
    # first chunk of N tokens when the file holds N)
    hold = tmp / "engine-hold"
    whttp = free_port()  # the worker's /metrics: its engine steps
    worker = start_fleet(kafka_bootstrap, parley_bin, tmp, prefix,
                         env={"PARLEY_TEST_ENGINE_HOLD": f"chunk:{hold}"},
                         extra=("--worker.http", f"127.0.0.1:{whttp}"))
    gw, url = start_gateway(kafka_bootstrap, parley_bin, prefix, "--gateway.max_body_bytes",
                            "65536", "--gateway.timeout_ms", "30000")
    yield {"url": url, "worker": worker, "log": tmp / "worker.log", "prefix": prefix,
           "kafka": kafka_bootstrap, "bin": parley_bin, "tmp": tmp, "hold": hold,
           "whttp": whttp}
    stop(gw)
    stop(worker)


def client(g, key="sk-test"):
    return openai.OpenAI(base_url=g["url"] + "/v1", api_key=key, max_retries=0, timeout=60)


def test_chat_nonstream_and_stream(gateway):
    c = client(gateway)
    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello?"}]
    r = c.chat.completions.create(model="cai-tiny", messages=msgs, max_tokens=6, temperature=0)
    assert r.object == "chat.completion" and r.choices[0].message.role == "assistant"
    assert r.choices[0].finish_reason in ("stop", "length")
    assert r.usage.completion_tokens >= 1 and r.usage.prompt_tokens > 0
    # the module's first request to a fresh worker: nothing of it was cached
    assert r.usage.prompt_tokens_details.cached_tokens == 0
    text = ""
    finish = None
    usage = None
    for ch in c.chat.completions.create(model="cai-tiny", messages=msgs, max_tokens=6,
                                        temperature=0, stream=True,
                                        stream_options={"include_usage": True}):
        if ch.choices:
            text += ch.choices[0].delta.content or ""
            finish = ch.choices[0].finish_reason or finish
        if ch.usage:
            usage = ch.usage
    assert finish in ("stop", "length")
    # greedy: the streamed reply equals the non-streamed one; the second turn of
    # the same conversation found the prompt in the worker's cache
    assert text == r.choices[0].message.content
    assert usage.prompt_tokens == r.usage.prompt_tokens
    assert usage.prompt_tokens_details.cached_tokens > 0


def test_models_and_errors(gateway):
    c = client(gateway)
    assert [m.id for m in c.models.list().data] == []  # gateway.models not set
    with pytest.raises(openai.BadRequestError) as e:
        c.chat.completions.create(model="cai-tiny", messages=[{"role": "bot", "content": "x"}])
    assert "role" in str(e.value)
    with pytest.raises(openai.BadRequestError):
        c.chat.completions.create(model="cai-tiny", messages=[{"role": "user", "content": "x"}],
                                  temperature=7)
    with pytest.raises(openai.AuthenticationError):
        client(gateway, "sk-wrong").chat.completions.create(
            model="cai-tiny", messages=[{"role": "user", "content": "x"}])
    with pytest.raises(openai.NotFoundError):
        c.chat.completions.create(model="no-such-model",
                                  messages=[{"role": "user", "content": "x"}], max_tokens=2)
    for body in (b"{not json", b"[1,2]", json.dumps({"model": "cai-tiny", "messages": [
            {"role": "user", "content": "x" * 70000}]}).encode()):
        req = urllib.request.Request(gateway["url"] + "/v1/chat/completions", data=body,
                                     headers={"Authorization": "Bearer sk-test",
                                              "Content-Type": "application/json"})
        with pytest.raises(urllib.error.HTTPError) as he:
            urllib.request.urlopen(req, timeout=30)
        assert he.value.code == 400
        assert "message" in json.loads(he.value.read())["error"]
    with urllib.request.urlopen(gateway["url"] + "/healthz", timeout=10) as h:
        assert json.loads(h.read()) == {"status": "ok"}
    with urllib.request.urlopen(gateway["url"] + "/metrics", timeout=10) as h:
        metrics = h.read().decode()
    assert "parley_gateway_inflight 0" in metrics
    assert re.search(r'parley_gateway_requests_total\{code="400"\} [1-9]', metrics)


# Request fields parley does not implement, each with a value that asks for
# something: the gateway refuses them with 400 naming the field (the same
# fields at their defaults are accepted: tests/openai/test_oa_request.c).
UNSUPPORTED = [
    ("audio", {"voice": "alloy", "format": "wav"}),
    ("frequency_penalty", 0.5),
    ("presence_penalty", 0.5),
    ("functions", [{"name": "f", "parameters": {"type": "object"}}]),
    ("function_call", "auto"),
    ("logit_bias", {"42": 10}),
    ("metadata", {"k": "v"}),
    ("modalities", ["text", "audio"]),
    ("prediction", {"type": "content", "content": "x"}),
    ("prompt_cache_key", "k"),
    ("reasoning_effort", "low"),
    ("service_tier", "priority"),
    ("store", True),
    ("verbosity", "low"),
    ("web_search_options", {}),
    ("n", 17),
]


def test_unsupported_fields_refused(gateway):
    """Every request field parley cannot honour gets 400 with `param` naming
    it (official client); so does a field that is not OpenAI's, and the
    defaults of the unsupported ones are accepted and answered."""
    c = client(gateway)
    msgs = [{"role": "user", "content": "x"}]
    for field, value in UNSUPPORTED:
        with pytest.raises(openai.BadRequestError) as e:
            c.chat.completions.create(model="cai-tiny", messages=msgs, max_tokens=2,
                                      **{field: value})
        assert e.value.status_code == 400
        assert e.value.param == field, (field, e.value.body)
        assert e.value.code in ("unsupported_parameter", "unsupported_value"), e.value.body
        assert field in e.value.message
    with pytest.raises(openai.BadRequestError) as e:
        c.chat.completions.create(model="cai-tiny", messages=msgs, max_tokens=2,
                                  extra_body={"best_of": 2})
    assert e.value.param == "best_of" and e.value.code == "unknown_parameter"
    r = c.chat.completions.create(model="cai-tiny", messages=msgs, max_tokens=2, temperature=0,
                                  n=1, logprobs=False, store=False, frequency_penalty=0,
                                  presence_penalty=0, response_format={"type": "text"},
                                  tool_choice="none", service_tier="auto", modalities=["text"])
    assert r.choices[0].finish_reason in ("stop", "length")


def metric(url, name):
    """One unlabelled value of the gateway's /metrics."""
    with urllib.request.urlopen(url + "/metrics", timeout=10) as h:
        m = re.search(rf"^{name} (\S+)$", h.read().decode(), re.M)
    return float(m.group(1))


def wait_metric(url, name, value, timeout=30):
    """Poll /metrics until name reads value (bounded); returns the last value."""
    end = time.time() + timeout
    v = metric(url, name)
    while time.time() < end and v != value:
        time.sleep(0.1)
        v = metric(url, name)
    return v


def records(kafka_bootstrap, topic, turn_ids, timeout=30, committed=True):
    """turn_id -> decoded record of topic for every id in turn_ids (read from
    the start, read_committed unless told; first record per id)."""
    c = ck.Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": f"chk-{uuid.uuid4().hex}",
                     "auto.offset.reset": "earliest", "enable.auto.commit": False,
                     "isolation.level": "read_committed" if committed else "read_uncommitted"})
    c.subscribe([topic])
    out = {}
    end = time.time() + timeout
    try:
        while time.time() < end and not set(turn_ids) <= set(out):
            m = c.poll(0.3)
            if m is None or m.error():
                continue
            r = msgpack.unpackb(m.value(), raw=False)
            if r.get("turn_id") in turn_ids:
                out.setdefault(r["turn_id"], r)
    finally:
        c.close()
    return out


def free_port():
    with socket.socket() as so:
        so.bind(("127.0.0.1", 0))
        return so.getsockname()[1]


def engine_steps(g):
    """The worker's parley_sched_steps_total (engine steps so far)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{g['whttp']}/metrics", timeout=10) as h:
        m = re.search(r"^parley_sched_steps_total (\S+)$", h.read().decode(), re.M)
    return float(m.group(1))


def wait_hold_released(log):
    """An earlier test's hold is released first (its file is gone, but the
    worker notices that on its own time): else the next turn would stay
    held.  Returns the holds so far."""
    end = time.time() + 60
    while time.time() < end and log.read_text().count("event=test_engine_hold held=0") < \
            log.read_text().count("event=test_engine_hold held=1"):
        time.sleep(0.05)
    holds = log.read_text().count("event=test_engine_hold held=1")
    assert log.read_text().count("event=test_engine_hold held=0") == holds
    return holds


def wait_log_count(log, text, n, timeout=60):
    end = time.time() + timeout
    while time.time() < end and log.read_text().count(text) < n:
        time.sleep(0.05)
    assert log.read_text().count(text) >= n, log.read_text()[-3000:]


def results_of_conv(kafka_bootstrap, topic, conv, timeout=60):
    """Every committed TurnResult of conversation conv, read from the start
    of topic to its end offsets once one has come (bounded)."""
    c = ck.Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": f"chk-{uuid.uuid4().hex}",
                     "auto.offset.reset": "earliest", "enable.auto.commit": False,
                     "isolation.level": "read_committed", "enable.partition.eof": True})
    c.subscribe([topic])
    out, eof = [], set()
    end = time.time() + timeout
    try:
        while time.time() < end:
            m = c.poll(0.3)
            if m is None:
                continue
            if m.error():
                if m.error().code() == ck.KafkaError._PARTITION_EOF:
                    eof.add(m.partition())
                    n = len(c.assignment())
                    if out and n and len(eof) >= n:
                        break
                continue
            eof.discard(m.partition())
            r = msgpack.unpackb(m.value(), raw=False)
            if r.get("conversation_id") == conv:
                out.append(r)
    finally:
        c.close()
    return out


def turn_of(completion_id):
    assert completion_id.startswith("chatcmpl-"), completion_id
    return completion_id[len("chatcmpl-"):]


def test_service_tier_maps_to_class(gateway):
    """service_tier flex produces a bulk ChatTurn (service_class "bulk"),
    auto an interactive one (the field left out, as a 1.2 turn), and both
    are answered; an unknown tier is 400 naming the field (also in
    test_unsupported_fields_refused)."""
    c = client(gateway)
    msgs = [{"role": "user", "content": "tiers"}]
    ids = {}
    for tier in ("flex", "auto"):
        r = c.chat.completions.create(model="cai-tiny", messages=msgs, max_tokens=2,
                                      temperature=0, service_tier=tier)
        assert r.choices[0].finish_reason in ("stop", "length")
        ids[tier] = turn_of(r.id)
    turns = records(gateway["kafka"], f"{gateway['prefix']}.turns", list(ids.values()))
    assert turns[ids["flex"]]["service_class"] == "bulk"
    assert "service_class" not in turns[ids["auto"]]
    with pytest.raises(openai.BadRequestError) as e:
        c.chat.completions.create(model="cai-tiny", messages=msgs, max_tokens=2,
                                  service_tier="scale")
    assert e.value.status_code == 400 and e.value.param == "service_tier"
    assert "service_tier" in e.value.message


def test_20_concurrent_conversations(gateway):
    """20 threads, each a two-turn conversation (the second streamed): every
    reply is the committed TurnResult of that client's own turn (its own
    prompt, as the ChatTurn on Kafka shows), and every second turn reports
    cached tokens."""
    n = 20
    got, errors = {}, []

    def conv(i):
        try:
            c = client(gateway)
            msgs = [{"role": "user", "content": f"client {i} asks question {i * 7}"}]
            r = c.chat.completions.create(model="cai-tiny", messages=msgs, max_tokens=8,
                                          temperature=0)
            msgs += [{"role": "assistant", "content": r.choices[0].message.content},
                     {"role": "user", "content": f"and then, client {i}?"}]
            text, cid, usage = "", None, None
            for ch in c.chat.completions.create(model="cai-tiny", messages=msgs, max_tokens=8,
                                                temperature=0, stream=True,
                                                stream_options={"include_usage": True}):
                cid = ch.id
                if ch.choices:
                    text += ch.choices[0].delta.content or ""
                if ch.usage:
                    usage = ch.usage
            got[i] = [(turn_of(r.id), msgs[0]["content"], r.choices[0].message.content, r.usage),
                      (turn_of(cid), msgs[2]["content"], text, usage)]
        except Exception as e:  # reported below, with the client number
            errors.append((i, repr(e)))

    threads = [threading.Thread(target=conv, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    assert len(got) == n
    ids = [t[0] for turns in got.values() for t in turns]
    assert len(set(ids)) == 2 * n
    prefix, kafka = gateway["prefix"], gateway["kafka"]
    results = records(kafka, f"{prefix}.responses", ids)
    turns = records(kafka, f"{prefix}.turns", ids, committed=False)
    for i, (first, second) in got.items():
        for tid, prompt, text, usage in (first, second):
            assert results[tid]["text"] == text, (i, tid)
            assert turns[tid]["messages"][-1] == {"role": "user", "content": prompt}, (i, tid)
            assert usage.completion_tokens == results[tid]["usage"]["completion_tokens"]
        assert turns[second[0]]["conversation_id"] == turns[first[0]]["conversation_id"]
        assert second[3].prompt_tokens_details.cached_tokens > 0, (i, second[3])


def test_client_disconnect_mid_stream_releases_the_request(gateway):
    """A streaming client reads its first event and goes away while the
    turn cannot finish (the worker's engine is held from the turn's first
    chunk: PARLEY_TEST_ENGINE_HOLD, so a fast machine cannot finish the
    turn first): the gateway notices (it looks at the socket between its
    waits) and nothing is left in flight."""
    url, hold, log = gateway["url"], gateway["hold"], gateway["log"]
    before = metric(url, "parley_gateway_disconnects_total")
    holds = log.read_text().count("event=test_engine_hold held=1")
    c = client(gateway)
    hold.touch()
    try:
        s = c.chat.completions.create(model="cai-tiny", max_tokens=320, temperature=0,
                                      stream=True,
                                      messages=[{"role": "user", "content": "a long story"}])
        for ch in s:
            if ch.choices:
                break
        end = time.time() + 60
        while time.time() < end and \
                log.read_text().count("event=test_engine_hold held=1") == holds:
            time.sleep(0.05)
        assert log.read_text().count("event=test_engine_hold held=1") == holds + 1
        assert metric(url, "parley_gateway_inflight") == 1
        s.close()
        c.close()
        assert wait_metric(url, "parley_gateway_inflight", 0) == 0
        assert wait_metric(url, "parley_gateway_turns_waiting", 0) == 0
        assert metric(url, "parley_gateway_disconnects_total") == before + 1
    finally:
        hold.unlink()


def test_client_disconnect_cancels_the_turn(gateway):
    """A streaming client that goes away after its first 8 tokens (issue
    40's case) cancels its turn (spec 1.4): the gateway produces a
    CancelTurn, the worker stops the turn and commits its one TurnResult
    with finish_reason cancelled.  The engine is held at the chunk that
    reaches 8 tokens (so a fast machine cannot finish first), and the
    tokens made after the close are bounded by engine steps, observed on
    the worker's /metrics (one sequence: one token a step): from the close
    to the result at most 2 steps, the one that may have been in flight
    when the hold began and the one the cancel lands at.  Tokens, not
    steps, would be wrong: tokens made before the hold can still be on
    their way to the stream when the client closes."""
    url, hold, log = gateway["url"], gateway["hold"], gateway["log"]
    before = metric(url, "parley_gateway_cancels_total")
    holds = wait_hold_released(log)
    c = client(gateway)
    hold.write_text("8")
    try:
        s = c.chat.completions.create(model="cai-tiny", max_tokens=512, temperature=0,
                                      stream=True, logprobs=True,
                                      messages=[{"role": "user", "content": "a longer story"}])
        cid, seen = None, 0  # tokens received, one logprob entry each
        for ch in s:
            cid = ch.id
            if ch.choices and ch.choices[0].logprobs and ch.choices[0].logprobs.content:
                seen += len(ch.choices[0].logprobs.content)
            if seen >= 8:
                break
        assert seen >= 8, seen
        wait_log_count(log, "event=test_engine_hold held=1", holds + 1)
        steps_close = engine_steps(gateway)
        s.close()
        c.close()
        assert wait_metric(url, "parley_gateway_cancels_total", before + 1) == before + 1
        tid = turn_of(cid)
        end = time.time() + 60  # the worker took the cancel while the turn ran
        while time.time() < end and f'event=cancel turn_id="{tid}"' not in log.read_text():
            time.sleep(0.05)
        assert f'event=cancel turn_id="{tid}" state=running' in log.read_text()
        hold.unlink()
        r = records(gateway["kafka"], f"{gateway['prefix']}.responses", [tid], timeout=60)[tid]
        after = engine_steps(gateway) - steps_close  # = tokens made after the close
        assert r["finish_reason"] == "cancelled" and "error" not in r, r
        assert after <= 2, (steps_close, after)
        assert seen <= len(r["tokens"]) < 512
    finally:
        if hold.exists():
            hold.unlink()


def test_nonstream_client_close_cancels_the_turn(gateway):
    """A non-streaming client that closes its connection while it waits
    cancels its turn too: the gateway sees the closed socket, counts a
    disconnect, produces a CancelTurn, and the turn's one committed
    TurnResult says cancelled, the engine stopped within two steps of the
    close (held at the turn's second token so it cannot finish first;
    steps on the worker's /metrics, as above)."""
    url, hold, log = gateway["url"], gateway["hold"], gateway["log"]
    d0 = metric(url, "parley_gateway_disconnects_total")
    c0 = metric(url, "parley_gateway_cancels_total")
    holds = wait_hold_released(log)
    running = log.read_text().count("state=running")
    conv = f"close-{uuid.uuid4().hex[:10]}"
    host, port = url[len("http://"):].split(":")
    body = json.dumps({"model": "cai-tiny", "max_tokens": 512, "temperature": 0,
                       "messages": [{"role": "user", "content": "an endless story"}]}).encode()
    hold.touch()
    try:
        so = socket.create_connection((host, int(port)), timeout=30)
        so.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                   b"Authorization: Bearer sk-test\r\nContent-Type: application/json\r\n"
                   b"X-Parley-Conversation: " + conv.encode() + b"\r\n"
                   b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        wait_log_count(log, "event=test_engine_hold held=1", holds + 1)
        assert metric(url, "parley_gateway_inflight") == 1
        steps_close = engine_steps(gateway)
        so.close()
        assert wait_metric(url, "parley_gateway_cancels_total", c0 + 1) == c0 + 1
        assert metric(url, "parley_gateway_disconnects_total") == d0 + 1
        assert wait_metric(url, "parley_gateway_inflight", 0) == 0
        wait_log_count(log, "state=running", running + 1)  # the worker took the cancel
        hold.unlink()
        res = results_of_conv(gateway["kafka"], f"{gateway['prefix']}.responses", conv)
        after = engine_steps(gateway) - steps_close
        assert len(res) == 1, res  # exactly one committed TurnResult
        r = res[0]
        assert r["finish_reason"] == "cancelled" and "error" not in r, r
        assert after <= 2, (steps_close, after)  # one token a step: bounded
        assert len(r["tokens"]) < 512
    finally:
        if hold.exists():
            hold.unlink()


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_responses_client_close_cancels_the_turn(gateway, stream):
    """A Responses client (POST /v1/responses) that closes its connection
    while its turn runs cancels the turn as a chat client does: a
    disconnect and a CancelTurn counted, and the turn's one committed
    TurnResult says cancelled (the engine held so it cannot finish first)."""
    url, hold, log = gateway["url"], gateway["hold"], gateway["log"]
    d0 = metric(url, "parley_gateway_disconnects_total")
    c0 = metric(url, "parley_gateway_cancels_total")
    holds = wait_hold_released(log)
    cancels = log.read_text().count("event=cancel turn_id=")
    host, port = url[len("http://"):].split(":")
    body = json.dumps({"model": "cai-tiny", "max_output_tokens": 512, "temperature": 0,
                       "stream": stream, "store": False, "input": "an endless story"}).encode()
    hold.touch()
    try:
        so = socket.create_connection((host, int(port)), timeout=30)
        so.sendall(b"POST /v1/responses HTTP/1.1\r\nHost: x\r\n"
                   b"Authorization: Bearer sk-test\r\nContent-Type: application/json\r\n"
                   b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        wait_log_count(log, "event=test_engine_hold held=1", holds + 1)
        so.close()
        assert wait_metric(url, "parley_gateway_cancels_total", c0 + 1) == c0 + 1
        assert metric(url, "parley_gateway_disconnects_total") == d0 + 1
        assert wait_metric(url, "parley_gateway_inflight", 0) == 0
        wait_log_count(log, "event=cancel turn_id=", cancels + 1)  # the worker took it
        tid = re.findall(r'event=cancel turn_id="([^"]+)"', log.read_text())[cancels]
        hold.unlink()
        r = records(gateway["kafka"], f"{gateway['prefix']}.responses", [tid], timeout=60)[tid]
        assert r["finish_reason"] == "cancelled" and "error" not in r, r
        assert len(r["tokens"]) < 512
    finally:
        if hold.exists():
            hold.unlink()


def test_stopped_worker_gives_504_and_backpressure_429(gateway):
    """The worker is stopped (SIGSTOP) under a gateway with a 2.5 s timeout
    and at most 2 requests in flight: a plain and a streamed request wait,
    a third gets 429 with Retry-After, the two then end with OpenAI timeout
    errors (504; an error event in the stream) and no reply text.  Resumed,
    the worker answers the next request with the same reply the prompt got
    before the stop (no late reply of a timed-out turn is handed out)."""
    prefix, kafka, worker = gateway["prefix"], gateway["kafka"], gateway["worker"]
    gw, url = start_gateway(kafka, gateway["bin"], prefix, "--gateway.timeout_ms", "2500",
                            "--gateway.max_inflight", "2")
    g = {"url": url}
    msgs = [{"role": "user", "content": "what time is it?"}]
    try:
        # the reply this prompt gets (through the patient gateway: the worker
        # may still be busy with the previous test's long turn)
        before = client(gateway).chat.completions.create(model="cai-tiny", messages=msgs,
                                                         max_tokens=6, temperature=0)
        out = {}

        def plain():
            try:
                client(g).chat.completions.create(model="cai-tiny", messages=msgs, max_tokens=6,
                                                  temperature=0)
                out["plain"] = "answered"
            except openai.APIStatusError as e:
                out["plain"] = (e.status_code, e.code, e.type)

        def streamed():
            text = ""
            try:
                for ch in client(g).chat.completions.create(
                        model="cai-tiny", messages=msgs, max_tokens=6, temperature=0,
                        stream=True):
                    if ch.choices:
                        text += ch.choices[0].delta.content or ""
                out["stream"] = "answered"
            except openai.APIError as e:
                out["stream"] = (text, e.code)

        worker.send_signal(signal.SIGSTOP)
        try:
            ts = [threading.Thread(target=f) for f in (plain, streamed)]
            for t in ts:
                t.start()
            assert wait_metric(url, "parley_gateway_inflight", 2, timeout=10) == 2
            with pytest.raises(openai.RateLimitError) as e:
                client(g).chat.completions.create(model="cai-tiny", messages=msgs, max_tokens=6)
            assert e.value.status_code == 429
            assert e.value.response.headers["retry-after"] == "1"
            assert e.value.code == "rate_limit_exceeded"
            for t in ts:
                t.join(30)
        finally:
            worker.send_signal(signal.SIGCONT)
        assert out["plain"] == (504, "timeout", "timeout"), out
        assert out["stream"] == ("", "timeout"), out
        after = client(gateway).chat.completions.create(model="cai-tiny", messages=msgs,
                                                        max_tokens=6, temperature=0)
        assert after.choices[0].message.content == before.choices[0].message.content
        assert wait_metric(url, "parley_gateway_inflight", 0) == 0
    finally:
        stop(gw)


def stream_raw(url, body, on_first):
    """POST a streaming chat request and read the SSE stream by hand (the
    openai client hides [DONE]): (content text, error event or None, the
    completion id, whether `data: [DONE]` ended the stream).  on_first()
    runs at the first streamed content."""
    req = urllib.request.Request(url + "/v1/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json",
                                          "Authorization": "Bearer sk-test"})
    text, error, cid, done, first = "", None, None, False, True
    with urllib.request.urlopen(req, timeout=120) as resp:
        for raw in resp:
            line = raw.decode().rstrip("\n")
            if not line.startswith("data: "):
                continue
            data = line[6:]
            if data == "[DONE]":
                done = True
                break
            ev = json.loads(data)
            if "error" in ev:
                error = ev["error"]
                continue
            cid = ev["id"]
            for ch in ev.get("choices", []):
                piece = ch.get("delta", {}).get("content")
                if piece:
                    if first:
                        first = False
                        on_first()
                    text += piece
    return text, error, cid, done


@pytest.mark.parametrize("temperature,revision", [(0, 1), (1.0, 1), (1.0, 2)],
                         ids=["greedy-same-model", "sampled-same-model", "sampled-new-revision"])
def test_turn_redone_mid_stream(kafka_bootstrap, parley_bin, tmp_path, temperature, revision):
    """kill -9 of the worker at the first streamed token of a long reply; a
    second worker takes the partition over and redoes the turn under a new
    attempt.  The client never sees a token twice.
      - Same model (greedy or sampled): a turn without a seed samples with
        one derived from its turn_id, and the engine's results do not
        depend on batching, so the redo spells the same text: the stream is
        exactly the committed reply, with no error.
      - A new revision of the model under the same name (a rolling model
        update; sampled): the redo's text differs from what was streamed,
        so the stream ends with a `stream_restarted` error event and then
        `data: [DONE]`, and the committed reply is the redo's."""
    prefix = f"gr-{uuid.uuid4().hex[:10]}"
    # r1 can never commit the turn (its first transaction is held open until
    # the kill): a reply that ends within a few tokens is still redone
    w1 = start_fleet(kafka_bootstrap, parley_bin, tmp_path, prefix, partitions=1, wid="r1",
                     env={"PARLEY_TEST_TXN_HOLD": "0:600000"})
    gw, url = start_gateway(kafka_bootstrap, parley_bin, prefix, "--gateway.timeout_ms", "90000")
    w2 = []
    try:
        def kill_and_replace():
            w1.send_signal(signal.SIGKILL)
            w1.wait()
            w2.append(start_fleet(kafka_bootstrap, parley_bin, tmp_path, prefix, wid="r2",
                                  topics=False, revision=revision))

        body = {"model": "cai-tiny", "max_tokens": 1500, "temperature": temperature,
                "stream": True, "messages": [{"role": "user", "content": "tell me everything"}]}
        text, error, cid, done = stream_raw(url, body, kill_and_replace)
        assert w2, "no token was streamed before the worker was killed"
        res = records(kafka_bootstrap, f"{prefix}.responses", [turn_of(cid)])[turn_of(cid)]
        assert res["worker"] == f"r2-{prefix}", res["worker"]  # the turn really was redone
        print(f"\nredone mid-stream ({temperature=}, {revision=}): streamed {len(text)} bytes, "
              f"committed {len(res['text'])}, error event {error}")
        assert done, "the stream did not end with data: [DONE]"
        if revision == 1:
            assert error is None, error
            assert text == res["text"]
        else:
            assert error is not None and error["code"] == "stream_restarted", error
            assert error["type"] == "server_error" and "retry" in error["message"]
            assert text and not res["text"].startswith(text)
    finally:
        stop(gw)
        for w in (w1, *w2):
            if w.poll() is None:
                stop(w)
