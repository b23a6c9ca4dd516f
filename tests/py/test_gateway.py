"""`parley gateway` against the real Kafka broker and a real worker
(cai-tiny), with the official `openai` package as the client:
non-streaming and streaming chat, models.list, a bad request (400), a
wrong key (401), an oversized body (400), an unknown model (404 via the
worker's DLQ) and /metrics showing nothing left in flight."""

import json
import re
import signal
import subprocess
import time
import urllib.error
import urllib.request
import uuid

import pytest

openai = pytest.importorskip("openai")
ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402


def start_fleet(kafka_bootstrap, parley_bin, tmp, prefix):
    """Topics under prefix and one worker serving model `cai-tiny`."""
    model = tmp / "cai-tiny.gguf"
    subprocess.run([str(parley_bin), "mkmodel", "--preset", "cai-tiny", "--out", str(model)],
                   check=True, capture_output=True, timeout=60)
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    futs = admin.create_topics([NewTopic(f"{prefix}.{k}", 4 if k != "dlq" else 1, 1)
                                for k in ("turns", "tokens", "responses", "dlq")])
    for f in futs.values():
        f.result(30)
    log = open(tmp / "worker.log", "wb")
    proc = subprocess.Popen(
        [str(parley_bin), "worker", "--model.path", str(model), "--model.threads", "1",
         "--worker.id", f"w-{prefix}", "--worker.group", f"g-{prefix}",
         "--worker.topic.turns", f"{prefix}.turns", "--worker.topic.tokens", f"{prefix}.tokens",
         "--worker.topic.responses", f"{prefix}.responses", "--worker.topic.dlq", f"{prefix}.dlq",
         "--worker.chunk_tokens", "2", "--scheduler.batch_window_us", "2000",
         "--kafka.bootstrap.servers", kafka_bootstrap, "--kafka.session.timeout.ms", "6000",
         "--kafka.heartbeat.interval.ms", "500", "--kafka.transaction.timeout.ms", "8000"],
        stdout=log, stderr=subprocess.STDOUT)
    # turns produced before the worker owns its partitions would be skipped
    # (a new group starts at the end): wait for its assignment
    end = time.time() + 60
    while time.time() < end and "event=assigned" not in (tmp / "worker.log").read_text(
            errors="replace"):
        time.sleep(0.1)
    return proc


def stop(proc):
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="module")
def gateway(kafka_bootstrap, parley_bin, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("gateway")
    prefix = f"gw-{uuid.uuid4().hex[:10]}"
    worker = start_fleet(kafka_bootstrap, parley_bin, tmp, prefix)
    gw = subprocess.Popen(
        [str(parley_bin), "gateway", "--kafka.bootstrap.servers", kafka_bootstrap,
         "--gateway.listen", "127.0.0.1:0", "--gateway.topic.turns", f"{prefix}.turns",
         "--gateway.topic.tokens", f"{prefix}.tokens",
         "--gateway.topic.responses", f"{prefix}.responses", "--gateway.topic.dlq", f"{prefix}.dlq",
         "--gateway.api_keys", "sk-test=tenant-a", "--gateway.max_body_bytes", "65536",
         "--gateway.timeout_ms", "30000"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    line = gw.stdout.readline()
    m = re.search(r"listening on (http://[0-9.]+:\d+)", line)
    assert m, line
    yield {"url": m.group(1), "worker": worker, "log": tmp / "worker.log"}
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
    assert r.usage.prompt_tokens_details.cached_tokens >= 0
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
