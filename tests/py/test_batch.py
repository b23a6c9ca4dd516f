"""`parley batch` against the real Kafka broker and a real worker
(cai-tiny): 200 requests, the batch command killed -9 midway and rerun;
the output ends with exactly 200 lines, each custom_id once, each body
the committed TurnResult's reply; a malformed line gets an error line."""

import json
import signal
import subprocess
import time
import uuid
from collections import Counter

import pytest

from test_gateway import start_fleet, stop

ck = pytest.importorskip("confluent_kafka")
msgpack = pytest.importorskip("msgpack")


def committed(brokers, topic, want, timeout=30):
    c = ck.Consumer({"bootstrap.servers": brokers, "group.id": f"chk-{uuid.uuid4().hex[:8]}",
                     "auto.offset.reset": "earliest", "enable.auto.commit": False,
                     "isolation.level": "read_committed"})
    c.subscribe([topic])
    out = {}
    end = time.time() + timeout
    try:
        while time.time() < end and len(out) < want:
            m = c.poll(0.3)
            if m is None or m.error():
                continue
            r = msgpack.unpackb(m.value(), raw=False)
            out.setdefault(r["turn_id"], r["text"])
    finally:
        c.close()
    return out


def test_batch_kill9_and_resume(kafka_bootstrap, parley_bin, tmp_path):
    prefix = f"bt-{uuid.uuid4().hex[:10]}"
    worker = start_fleet(kafka_bootstrap, parley_bin, tmp_path, prefix)
    try:
        inp, out = tmp_path / "requests.jsonl", tmp_path / "results.jsonl"
        with open(inp, "w") as f:
            for i in range(200):
                f.write(json.dumps({"custom_id": f"req-{i}", "method": "POST",
                                    "url": "/v1/chat/completions",
                                    "body": {"model": "cai-tiny", "max_tokens": 8,
                                             "temperature": 0, "messages": [
                                                 {"role": "user", "content": f"item {i}"}]}}) + "\n")
            f.write("{broken\n")
        cmd = [str(parley_bin), "batch", "--input", str(inp), "--output", str(out),
               "--brokers", kafka_bootstrap, "--topic-prefix", prefix,
               "--dlq-topic", f"{prefix}.dlq", "--window", "16", "--progress-s", "1"]
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        end = time.time() + 90
        while time.time() < end and (not out.exists() or out.read_text().count("\n") < 60):
            time.sleep(0.05)
        p.send_signal(signal.SIGKILL)
        p.wait()
        first = out.read_text().count("\n")
        assert 0 < first < 201, first
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
        assert r.returncode in (0, 3), r.stderr  # 3 only if this run wrote a failure
        lines = [json.loads(ln) for ln in out.read_text().splitlines()]
        assert len(lines) == 201
        ids = Counter(ln["custom_id"] for ln in lines)
        assert ids[None] == 1 and all(ids[f"req-{i}"] == 1 for i in range(200))
        results = committed(kafka_bootstrap, f"{prefix}.responses", 200)
        for ln in lines:
            if ln["custom_id"] is None:
                assert ln["error"]["code"] == "invalid_request" and ln["line"] == 201
                continue
            resp = ln["response"]
            assert resp["status_code"] == 200 and ln["error"] is None
            assert resp["body"]["choices"][0]["message"]["content"] == \
                results[resp["request_id"]]
    finally:
        stop(worker)
