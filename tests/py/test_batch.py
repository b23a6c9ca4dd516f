"""`parley batch` against the real Kafka broker and a real worker
(cai-tiny): 200 requests, the batch command killed -9 midway and rerun;
the output ends with exactly 200 lines, each custom_id once, each body
the committed TurnResult's reply; a malformed line gets an error line.
Failures (malformed line, unknown model, wrong url, a body the gateway
would refuse, repeated custom_id) land in the error file; progress is a
plain line per interval off a terminal and a redrawn bar on one.  A JSONL mixing json_schema, tool
calls, logprobs, n > 1 and /v1/completions lines, killed with -9 and
resumed, ends with exactly one line per custom_id of the shape asked for.
Turns are bulk unless --service-tier or a line's service_tier says otherwise."""

import json
import os
import pty
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
        # the broken line's error is in the error file once, not again on the rerun
        errs = [json.loads(ln) for ln in (tmp_path / "results.jsonl.errors.jsonl").read_text()
                .splitlines()]
        assert [(e["custom_id"], e["line"]) for e in errs] == [(None, 201)]
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


def test_batch_errors_and_progress(kafka_bootstrap, parley_bin, tmp_path):
    prefix = f"bp-{uuid.uuid4().hex[:10]}"
    worker = start_fleet(kafka_bootstrap, parley_bin, tmp_path, prefix)
    try:
        inp, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"

        def req(cid, model="cai-tiny", url="/v1/chat/completions"):
            return json.dumps({"custom_id": cid, "method": "POST", "url": url,
                               "body": {"model": model, "max_tokens": 4, "messages": [
                                   {"role": "user", "content": f"about {cid}"}]}}) + "\n"
        inp.write_text(req("ok-1") + req("bad-model", model="no-such-model") + "{broken\n"
                       + req("ok-2") + req("bad-url", url="/v1/embeddings") + req("ok-1")
                       + json.dumps({"custom_id": "bad-body", "method": "POST",
                                     "url": "/v1/chat/completions",
                                     "body": {"model": "cai-tiny", "messages": "hi"}}) + "\n"
                       + req("ok-3"))
        cmd = [str(parley_bin), "batch", "--input", str(inp), "--output", str(out),
               "--brokers", kafka_bootstrap, "--topic-prefix", prefix,
               "--dlq-topic", f"{prefix}.dlq", "--progress-s", "1"]
        # off a terminal: a plain line per interval.  The worker is stopped
        # until two interval lines were printed, so the run cannot end first.
        err = open(tmp_path / "stderr.txt", "w")
        worker.send_signal(signal.SIGSTOP)
        try:
            p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err)
            end = time.time() + 30
            while time.time() < end and \
                    (tmp_path / "stderr.txt").read_text().count("batch: done=") < 2:
                time.sleep(0.1)
        finally:
            worker.send_signal(signal.SIGCONT)
        assert p.wait(60) == 3  # all lines written, some are errors
        err.close()
        progress = [ln for ln in (tmp_path / "stderr.txt").read_text().splitlines()
                    if ln.startswith("batch: done=")]
        assert len(progress) >= 3, progress  # two while stopped, one at the end
        assert progress[-1].startswith("batch: done=7 total=7 failed=4 inflight=0 ")
        lines = [json.loads(ln) for ln in out.read_text().splitlines()]
        by_id = {ln["custom_id"]: ln for ln in lines}
        assert len(lines) == 7 and len(by_id) == 7
        for cid in ("ok-1", "ok-2", "ok-3"):
            assert by_id[cid]["response"]["status_code"] == 200 and by_id[cid]["error"] is None
        assert by_id["bad-model"]["response"]["status_code"] == 404
        assert by_id["bad-model"]["response"]["body"]["error"]["code"] == "model_not_found"
        assert by_id["bad-url"]["error"]["code"] == "invalid_request"
        # a body the gateway would refuse: the gateway's status and error object
        bad = by_id["bad-body"]
        assert bad["error"] is None and bad["response"]["status_code"] == 400
        assert bad["response"]["body"]["error"]["param"] == "messages"
        assert "messages" in bad["response"]["body"]["error"]["message"]
        assert by_id[None]["line"] == 3 and by_id[None]["error"]["code"] == "invalid_request"
        errs = [json.loads(ln) for ln in (tmp_path / "out.jsonl.errors.jsonl").read_text()
                .splitlines()]
        assert sorted(str(e["custom_id"]) for e in errs) == \
            ["None", "bad-body", "bad-model", "bad-url", "ok-1"]
        dup = [e for e in errs if e["custom_id"] == "ok-1"]
        assert dup[0]["line"] == 6 and dup[0]["error"]["code"] == "duplicate_custom_id"
        # a rerun of the finished batch writes nothing new anywhere (exit 0:
        # the errors were the first run's)
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        assert len(out.read_text().splitlines()) == 7
        assert len((tmp_path / "out.jsonl.errors.jsonl").read_text().splitlines()) == 5
        # on a terminal: a redrawn bar (carriage returns), ended by a newline
        inp2, out2 = tmp_path / "in2.jsonl", tmp_path / "out2.jsonl"
        inp2.write_text(req("t-1") + req("t-2"))
        master, slave = pty.openpty()
        p = subprocess.Popen([*cmd[:2], "--input", str(inp2), "--output", str(out2),
                              *cmd[6:]], stdout=subprocess.DEVNULL, stderr=slave)
        os.close(slave)
        tty = b""
        while True:
            try:
                b = os.read(master, 4096)
            except OSError:  # EIO: the batch closed its end
                break
            if not b:
                break
            tty += b
        os.close(master)
        assert p.wait(60) == 0
        assert b"\r[##############################] 2/2 failed=0 " in tty, tty
        assert tty.endswith(b"\r\n") or tty.endswith(b"\n"), tty
        assert b"batch: done=" not in tty
    finally:
        stop(worker)


def test_batch_structured_kill9_and_resume(kafka_bootstrap, parley_bin, tmp_path):
    """A JSONL mixing json_schema, forced tool calls, logprobs, n = 2 and
    legacy /v1/completions lines, the batch killed with -9 midway and rerun:
    exactly one output line per custom_id, each a 200 whose body has the
    shape its request asked for."""
    import sys
    sys.path.insert(0, os.path.dirname(__file__))
    import schema_gen
    prefix = f"bs-{uuid.uuid4().hex[:10]}"
    worker = start_fleet(kafka_bootstrap, parley_bin, tmp_path, prefix)
    schemas = schema_gen.schemas(11, 12)
    tool = {"type": "function", "function": {"name": "lookup", "parameters": {
        "type": "object", "properties": {"q": {"type": "string", "maxLength": 8}},
        "required": ["q"], "additionalProperties": False}}}
    kinds = {}
    try:
        inp, out = tmp_path / "requests.jsonl", tmp_path / "results.jsonl"
        with open(inp, "w") as f:
            for i in range(60):
                k = ("schema", "tools", "logprobs", "n", "completion")[i % 5]
                body = {"model": "cai-tiny", "max_tokens": 24, "temperature": 0,
                        "messages": [{"role": "user", "content": f"item {i}"}]}
                url = "/v1/chat/completions"
                if k == "schema":
                    body["response_format"] = {"type": "json_schema", "json_schema": {
                        "name": "r", "schema": schemas[i % len(schemas)]}}
                    body["max_tokens"] = 64
                elif k == "tools":
                    body.update(tools=[tool], tool_choice="required", parallel_tool_calls=False)
                elif k == "logprobs":
                    body.update(logprobs=True, top_logprobs=2)
                elif k == "n":
                    body.update(n=2, temperature=1.0)
                else:
                    url = "/v1/completions"
                    body = {"model": "cai-tiny", "prompt": f"item {i}", "max_tokens": 8,
                            "logprobs": 1}
                kinds[f"r-{i}"] = (k, body)
                f.write(json.dumps({"custom_id": f"r-{i}", "method": "POST", "url": url,
                                    "body": body}) + "\n")
        cmd = [str(parley_bin), "batch", "--input", str(inp), "--output", str(out),
               "--brokers", kafka_bootstrap, "--topic-prefix", prefix,
               "--dlq-topic", f"{prefix}.dlq", "--window", "8", "--progress-s", "1"]
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        end = time.time() + 120
        while time.time() < end and (not out.exists() or out.read_text().count("\n") < 15):
            time.sleep(0.05)
        p.send_signal(signal.SIGKILL)
        p.wait()
        first = out.read_text().count("\n")
        assert 0 < first < 60, first
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        lines = [json.loads(ln) for ln in out.read_text().splitlines()]
        ids = Counter(ln["custom_id"] for ln in lines)
        assert len(lines) == 60 and all(ids[c] == 1 for c in kinds), ids
        for ln in lines:
            k, req = kinds[ln["custom_id"]]
            assert ln["error"] is None and ln["response"]["status_code"] == 200, ln
            b = ln["response"]["body"]
            ch = b["choices"][0]
            if k == "schema" and ch["finish_reason"] == "stop":
                doc = json.loads(ch["message"]["content"])
                schema = req["response_format"]["json_schema"]["schema"]
                assert not list(schema_gen.validator(schema).iter_errors(doc)), doc
            elif k == "tools" and ch["finish_reason"] == "tool_calls":
                call = ch["message"]["tool_calls"][0]
                assert call["function"]["name"] == "lookup"
                schema_gen.validator(tool["function"]["parameters"]).validate(
                    json.loads(call["function"]["arguments"]))
            elif k == "tools":
                assert ch["finish_reason"] == "length", ch
            elif k == "logprobs":
                content = ch["logprobs"]["content"]
                assert len(content) == b["usage"]["completion_tokens"]
                assert all(len(e["top_logprobs"]) == 2 for e in content)
            elif k == "n":
                assert sorted(c["index"] for c in b["choices"]) == [0, 1]
            elif k == "completion":
                assert b["object"] == "text_completion"
                assert len(ch["logprobs"]["tokens"]) == b["usage"]["completion_tokens"]
    finally:
        stop(worker)


def turns_by_content(brokers, topic, want, timeout=30):
    """The ChatTurns on topic, by their first message's content."""
    c = ck.Consumer({"bootstrap.servers": brokers, "group.id": f"chk-{uuid.uuid4().hex[:8]}",
                     "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    out = {}
    end = time.time() + timeout
    try:
        while time.time() < end and len(out) < want:
            m = c.poll(0.3)
            if m is None or m.error():
                continue
            r = msgpack.unpackb(m.value(), raw=False)
            out.setdefault(r["messages"][0]["content"], r)
    finally:
        c.close()
    return out


def test_batch_service_tier(kafka_bootstrap, parley_bin, tmp_path):
    """`parley batch` sends bulk turns by default (service_class "bulk"); a
    line's own body.service_tier wins; --service-tier auto makes the lines
    naming none interactive; an unknown --service-tier is a usage error."""
    prefix = f"bt-{uuid.uuid4().hex[:10]}"
    worker = start_fleet(kafka_bootstrap, parley_bin, tmp_path, prefix)
    try:
        def req(cid, **body):
            return json.dumps({"custom_id": cid, "method": "POST", "url": "/v1/chat/completions",
                               "body": {"model": "cai-tiny", "max_tokens": 2, "messages": [
                                   {"role": "user", "content": cid}], **body}}) + "\n"
        runs = [([], {"plain-1": "bulk", "auto-1": None, "flex-1": "bulk"}),
                (["--service-tier", "auto"], {"plain-2": None, "auto-2": None, "flex-2": "bulk"})]
        for i, (extra, want) in enumerate(runs):
            inp, out = tmp_path / f"in{i}.jsonl", tmp_path / f"out{i}.jsonl"
            inp.write_text("".join(req(cid, **({"service_tier": cid.split("-")[0]}
                                               if not cid.startswith("plain") else {}))
                                   for cid in want))
            r = subprocess.run([str(parley_bin), "batch", "--input", str(inp), "--output",
                                str(out), "--brokers", kafka_bootstrap, "--topic-prefix", prefix,
                                "--dlq-topic", f"{prefix}.dlq", *extra],
                               capture_output=True, text=True, timeout=120)
            assert r.returncode == 0, r.stderr
            assert len(out.read_text().splitlines()) == 3
        turns = turns_by_content(kafka_bootstrap, f"{prefix}.turns", 6)
        for _, want in runs:
            for cid, cls in want.items():
                assert turns[cid].get("service_class") == cls, (cid, turns[cid])
        r = subprocess.run([str(parley_bin), "batch", "--input", str(inp), "--output",
                            str(tmp_path / "x.jsonl"), "--brokers", kafka_bootstrap,
                            "--service-tier", "priority"], capture_output=True, text=True,
                           timeout=30)
        assert r.returncode == 2 and "--service-tier" in r.stderr, r.stderr
    finally:
        stop(worker)


def read_all(brokers, topic, committed=False):
    """Every record of topic (every partition read to its end), decoded,
    with its content-type header: [(content_type, record)]."""
    c = ck.Consumer({"bootstrap.servers": brokers, "group.id": f"chk-{uuid.uuid4().hex[:8]}",
                     "auto.offset.reset": "earliest", "enable.auto.commit": False,
                     "enable.partition.eof": True,
                     "isolation.level": "read_committed" if committed else "read_uncommitted"})
    c.subscribe([topic])
    out, eof = [], set()
    end = time.time() + 30
    try:
        while time.time() < end:
            m = c.poll(0.3)
            if m is None:
                continue
            if m.error():
                if m.error().code() == ck.KafkaError._PARTITION_EOF:
                    eof.add(m.partition())
                    if c.assignment() and len(eof) >= len(c.assignment()):
                        break
                continue
            eof.discard(m.partition())
            ct = dict(m.headers() or []).get("content-type", b"").decode()
            out.append((ct, msgpack.unpackb(m.value(), raw=False)))
    finally:
        c.close()
    return out


def test_batch_cancel(kafka_bootstrap, parley_bin, tmp_path):
    """`parley batch --cancel` after the batch was killed -9 with 3 turns
    out (window 3) of 6: the 3 sent get a CancelTurn each, the worker
    (its engine held at the first turn's second token, so none can finish
    first) stops them, and the 3 never sent are answered at once.  That
    run is killed -9 too, once its CancelTurns are in Kafka and before the
    worker (stopped meanwhile with SIGSTOP) can answer them, and the plain
    command resumes the cancelling (the state says so: it sends no turn,
    takes the results that came meanwhile and cancels again what has
    none).  The output ends with exactly one
    line per request, finish_reason cancelled; Kafka holds 3 ChatTurns,
    CancelTurns for those 3 only and exactly one committed TurnResult per
    sent turn, cancelled.  A plain rerun after it sends nothing."""
    prefix = f"bt-{uuid.uuid4().hex[:10]}"
    hold = tmp_path / "hold"
    hold.touch()
    # the worker is stopped for a while below: its session and transaction
    # must outlast that
    worker = start_fleet(kafka_bootstrap, parley_bin, tmp_path, prefix,
                         env={"PARLEY_TEST_ENGINE_HOLD": f"chunk:{hold}"},
                         extra=("--kafka.session.timeout.ms", "60000",
                                "--kafka.transaction.timeout.ms", "120000"))
    log = tmp_path / "worker.log"
    stopped = False
    try:
        inp, out = tmp_path / "requests.jsonl", tmp_path / "results.jsonl"
        inp.write_text("".join(
            json.dumps({"custom_id": f"c-{i}", "method": "POST", "url": "/v1/chat/completions",
                        "body": {"model": "cai-tiny", "max_tokens": 512, "temperature": 0,
                                 "messages": [{"role": "user", "content": f"saga {i}"}]}}) + "\n"
            for i in range(6)))
        cmd = [str(parley_bin), "batch", "--input", str(inp), "--output", str(out),
               "--brokers", kafka_bootstrap, "--topic-prefix", prefix,
               "--dlq-topic", f"{prefix}.dlq", "--window", "3", "--timeout-s", "300"]
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        end = time.time() + 60  # a turn runs (held) and the window's 3 turns are out
        while time.time() < end and ("event=test_engine_hold held=1" not in log.read_text() or
                                     sum(ct.startswith("application/x-parley-turn") or "messages" in r
                                         for ct, r in read_all(kafka_bootstrap,
                                                               f"{prefix}.turns")) < 3):
            time.sleep(0.1)
        p.send_signal(signal.SIGKILL)
        p.wait()
        assert not out.exists() or out.read_text() == ""
        # the worker cannot answer a cancel until the cancelling run is
        # killed: that run's output then holds the never-sent ones only
        worker.send_signal(signal.SIGSTOP)
        stopped = True
        c = subprocess.Popen(cmd + ["--cancel"], stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
        end = time.time() + 60  # the 3 never sent answered, the 3 CancelTurns in Kafka
        while time.time() < end and (
                not out.exists() or len(out.read_text().splitlines()) < 3 or
                sum(ct.startswith("application/x-parley-cancel")
                    for ct, _ in read_all(kafka_bootstrap, f"{prefix}.turns")) < 3):
            time.sleep(0.1)
        c.send_signal(signal.SIGKILL)
        c.wait()
        worker.send_signal(signal.SIGCONT)
        stopped = False
        early = [json.loads(ln)["custom_id"] for ln in out.read_text().splitlines()]
        assert len(early) == 3 and len(set(early)) == 3, early  # the never-sent ones
        end = time.time() + 60  # the worker took the 3 cancels (the engine still held)
        while time.time() < end and log.read_text().count('event=cancel turn_id="b-') < 3:
            time.sleep(0.05)
        assert log.read_text().count('event=cancel turn_id="b-') == 3, log.read_text()[-3000:]
        # the plain command resumes the cancelling (the state says so): it
        # reads the results that came meanwhile, and cancels again what has
        # none
        c = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        hold.unlink()
        _, err = c.communicate(timeout=120)
        assert c.returncode == 0, err
        lines = [json.loads(ln) for ln in out.read_text().splitlines()]
        assert sorted(ln["custom_id"] for ln in lines) == [f"c-{i}" for i in range(6)]
        for ln in lines:
            assert ln["error"] is None and ln["response"]["status_code"] == 200, ln
            ch = ln["response"]["body"]["choices"][0]
            assert ch["finish_reason"] == "cancelled", ln
        recs = read_all(kafka_bootstrap, f"{prefix}.turns")
        turns = [r["turn_id"] for ct, r in recs if "messages" in r]
        cancels = [r["turn_id"] for ct, r in recs if ct.startswith("application/x-parley-cancel")]
        assert len(turns) == 3 and set(cancels) == set(turns), (turns, cancels)
        assert "cancelling: " in err
        res = [r for _, r in read_all(kafka_bootstrap, f"{prefix}.responses", committed=True)]
        assert Counter(r["turn_id"] for r in res) == Counter(turns), res
        assert all(r["finish_reason"] == "cancelled" for r in res), res
        sent = {ln["response"]["request_id"]: ln for ln in lines}
        for r in res:  # a sent request's line is its committed result
            assert sent[r["turn_id"]]["response"]["body"]["usage"]["completion_tokens"] == \
                len(r["tokens"])
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        assert len(out.read_text().splitlines()) == 6
        assert sum("messages" in r for _, r in read_all(kafka_bootstrap, f"{prefix}.turns")) == 3
    finally:
        if stopped:
            worker.send_signal(signal.SIGCONT)
        if hold.exists():
            hold.unlink()
        stop(worker)


def test_batch_bad_state_refused(parley_bin, tmp_path):
    """A state file whose sent_max or cancel is malformed is refused at
    start (exit 1, the field named), before anything is sent."""
    inp, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    inp.write_text(json.dumps({"custom_id": "a", "method": "POST", "url": "/v1/chat/completions",
                               "body": {"model": "m", "messages": [
                                   {"role": "user", "content": "x"}]}}) + "\n")
    for bad in ({"sent_max": "zz"}, {"sent_max": 7}, {"sent_max": "1" * 17}, {"cancel": "yes"}):
        (tmp_path / "out.jsonl.state").write_text(json.dumps(
            {"batch_id": "0123456789abcdef", "offsets": [], **bad}))
        r = subprocess.run([str(parley_bin), "batch", "--input", str(inp), "--output", str(out),
                            "--brokers", "127.0.0.1:1", "--startup-timeout-s", "1"],
                           capture_output=True, text=True, timeout=30)
        assert r.returncode == 1 and "sent_max or cancel" in r.stderr, (bad, r.stderr)
