"""Every parley Kafka client against a broker that authenticates, encrypts
and authorizes (the SASL_SSL listener of deploy/kafka.sh with
PARLEY_KAFKA_SECURE=1, the fixture of test_kafka_secure.py): the gateway,
`parley batch`, `chat`, `load` and `topics` build their clients
through the one Kafka layer (consumer/common/cm_kafka.h), so the kafka.*
keys (flags, or a --config file) reach them.

* Served: the gateway answers a chat completion and a stream over SASL_SSL
  with a worker on SASL_SSL behind it; `parley batch` runs a small file;
  `parley chat --file` gets its turns answered (its keys from a --config
  file); `parley load` gets every turn answered once; `parley topics`
  creates topics.  The clients' principal has topic ACLs only.
* Refused: with a wrong password, and as a principal without ACLs, each of
  them exits with status 1 and one line "CMD: Kafka refused parley CMD:
  <what>" naming the refusal -- not the start-up deadline's give-up line,
  so it stopped at the refusal, not at the deadline.
* Every command refuses, at start and naming it, a kafka.* key none of its
  clients takes or that parley sets itself (exit status 2, a
  configuration error like every other bad key).
"""
import json
import os
import re
import signal
import socket
import subprocess
import time
import urllib.request
import uuid

import pytest

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType,  # noqa: E402
                                   AdminClient, ResourcePatternType, ResourceType)

from test_kafka_secure import USERS, secure_kafka, setup_topics, worker  # noqa: E402,F401
from worker_kit import model  # noqa: E402,F401  (the module-scoped cai-tiny fixture)


def sasl_flags(k, user="parley", password=None):
    return ["--kafka.security.protocol", "SASL_SSL", "--kafka.sasl.mechanisms", "SCRAM-SHA-512",
            "--kafka.sasl.username", user, "--kafka.sasl.password",
            USERS[user] if password is None else password, "--kafka.ssl.ca.location", k["ca"]]


def grant_client_acls(k, user, topics, create_prefix=None):
    """What the gateway and the command-line clients need as `user`, and no
    more: WRITE on the turns topic, READ on tokens, responses and the DLQ
    (DESCRIBE on each; no group: their readers are assigned, never join or
    commit), and CREATE on topics named create_prefix* (parley topics)."""
    admin = AdminClient({"bootstrap.servers": k["plain"]})
    p, allow = f"User:{user}", AclPermissionType.ALLOW
    lit, pre = ResourcePatternType.LITERAL, ResourcePatternType.PREFIXED
    acl = [(ResourceType.TOPIC, topics["turns"], lit, op)
           for op in (AclOperation.WRITE, AclOperation.DESCRIBE)]
    for n in ("tokens", "responses", "dlq"):
        acl += [(ResourceType.TOPIC, topics[n], lit, op)
                for op in (AclOperation.READ, AclOperation.DESCRIBE)]
    if create_prefix:
        acl += [(ResourceType.TOPIC, create_prefix, pre, op)
                for op in (AclOperation.CREATE, AclOperation.DESCRIBE)]
    for f in admin.create_acls([AclBinding(rt, name, pt, p, "*", op, allow)
                                for rt, name, pt, op in acl]).values():
        f.result(30)


@pytest.fixture(scope="module")
def fleet(secure_kafka, parley_bin, model, tmp_path_factory):  # noqa: F811
    """Topics, the principal parley's worker and client ACLs, and one worker
    on SASL_SSL that owns its partitions."""
    k = secure_kafka
    tmp = tmp_path_factory.mktemp("secure-fleet")
    topics, group = setup_topics(k, "parley", "sc1")
    grant_client_acls(k, "parley", topics, create_prefix="sect-")
    w = worker(parley_bin, model, k, topics, group, "sc1", "parley", USERS["parley"], k["ca"], tmp)
    log = tmp / "sc1.log"
    end = time.time() + 120
    while time.time() < end and w.poll() is None and "event=assigned" not in log.read_text(
            errors="replace"):
        time.sleep(0.1)
    assert w.poll() is None and "event=assigned" in log.read_text(errors="replace"), \
        log.read_text(errors="replace")[-2000:]
    yield {"k": k, "topics": topics, "tmp": tmp, "bin": str(parley_bin), "model": model.stem}
    w.send_signal(signal.SIGTERM)
    try:
        w.wait(30)
    except subprocess.TimeoutExpired:
        w.kill()
        w.wait()


def topic_flags(t):
    return ["--turns-topic", t["turns"], "--tokens-topic", t["tokens"],
            "--responses-topic", t["responses"]]


def start_gateway(f, user="parley", password=None):
    t = f["topics"]
    return subprocess.Popen(
        [f["bin"], "gateway", "--kafka.bootstrap.servers", f["k"]["sasl"],
         *sasl_flags(f["k"], user, password), "--gateway.listen", "127.0.0.1:0",
         "--gateway.topic.turns", t["turns"], "--gateway.topic.tokens", t["tokens"],
         "--gateway.topic.responses", t["responses"], "--gateway.topic.dlq", t["dlq"],
         "--gateway.startup_timeout_ms", "120000"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def post(url, body):
    req = urllib.request.Request(url + "/v1/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    return urllib.request.urlopen(req, timeout=120)


def test_gateway_serves_over_sasl_ssl(fleet):
    gw = start_gateway(fleet)
    try:
        line = gw.stdout.readline()
        m = re.search(r"listening on (http://[0-9.]+:\d+)", line)
        assert m, line + gw.stderr.read() if gw.poll() is not None else line
        url = m.group(1)
        msgs = [{"role": "user", "content": "Hello over TLS?"}]
        with post(url, {"model": fleet["model"], "messages": msgs, "max_tokens": 4,
                        "temperature": 0}) as r:
            j = json.loads(r.read())
        assert j["object"] == "chat.completion", j
        assert j["choices"][0]["finish_reason"] in ("stop", "length") and j["usage"][
            "completion_tokens"] >= 1, j
        chunks, done = [], False
        with post(url, {"model": fleet["model"], "messages": msgs, "max_tokens": 4,
                        "temperature": 0, "stream": True}) as r:
            for raw in r:
                ln = raw.decode().strip()
                if ln == "data: [DONE]":
                    done = True
                    break
                if ln.startswith("data: "):
                    chunks.append(json.loads(ln[6:]))
        assert done and chunks, chunks
        text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
        assert text == j["choices"][0]["message"]["content"], (text, j)
    finally:
        gw.send_signal(signal.SIGTERM)
        gw.wait(30)


def test_batch_chat_load_and_topics_over_sasl_ssl(fleet, tmp_path):
    k, t = fleet["k"], fleet["topics"]
    # parley batch, the keys as flags
    inp, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    inp.write_text("".join(json.dumps(
        {"custom_id": f"r{i}", "method": "POST", "url": "/v1/chat/completions",
         "body": {"model": fleet["model"], "max_tokens": 3, "temperature": 0,
                  "messages": [{"role": "user", "content": f"item {i}"}]}}) + "\n"
        for i in range(3)))
    r = subprocess.run([fleet["bin"], "batch", "--input", str(inp), "--output", str(out),
                        "--brokers", k["sasl"], *sasl_flags(k), *topic_flags(t),
                        "--dlq-topic", t["dlq"], "--startup-timeout-s", "120"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    lines = [json.loads(ln) for ln in out.read_text().splitlines()]
    assert sorted(ln["custom_id"] for ln in lines) == ["r0", "r1", "r2"]
    assert all(ln["response"]["status_code"] == 200 for ln in lines), lines
    # parley chat --file, the keys from a --config file
    conf = tmp_path / "kafka.conf"
    flags = sasl_flags(k)
    conf.write_text("# SASL_SSL\n" + "".join(f"{flags[i][2:]} = {flags[i + 1]}\n"
                                             for i in range(0, len(flags), 2)))
    turns = tmp_path / "turns.txt"
    turns.write_text("Hello there.\nAnd again?\n")
    r = subprocess.run([fleet["bin"], "chat", "--config", str(conf), "--brokers", k["sasl"],
                        *topic_flags(t), "--file", str(turns), "--max-tokens", "3",
                        "--temperature", "0", "--timeout-ms", "120000",
                        "--startup-timeout-s", "120"],
                       capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stdout[-1000:] + r.stderr[-2000:]
    assert len(re.findall(r"^\[turn \d+\] finish=", r.stdout, re.M)) == 2, r.stdout
    # parley load, streaming: every turn exactly once
    r = subprocess.run([fleet["bin"], "load", "--brokers", k["sasl"], *sasl_flags(k),
                        *topic_flags(t), "--conversations", "2", "--turns", "2", "--rate", "50",
                        "--max-tokens", "2:3", "--temperature", "0", "--stream",
                        "--timeout-s", "240", "--grace-ms", "500", "--startup-timeout-s", "120"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-1000:] + r.stderr[-2000:]
    assert re.search(r"^load: turns=4 done=4 lost=0 duplicated=0 ", r.stdout, re.M), r.stdout
    # parley topics (the principal may create sect-* topics)
    prefix = f"sect-{uuid.uuid4().hex[:8]}"
    r = subprocess.run([fleet["bin"], "topics", "--brokers", k["sasl"], *sasl_flags(k),
                        "--topic-prefix", prefix, "--partitions", "2",
                        "--startup-timeout-s", "120"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert len(re.findall(rf"^created  {prefix}\.", r.stdout, re.M)) == 6, r.stdout


REFUSALS = {
    "wrong_password": ("parley", "not-the-password", "SASL authentication failed"),
    "no_acls": ("intruder", None, "not authorized"),
}


def refused_run(fleet, prog, user, password, tmp_path):
    """Run prog as user; its (returncode, stdout, stderr)."""
    k, t = fleet["k"], fleet["topics"]
    sasl = sasl_flags(k, user, password)
    if prog == "gateway":
        gw = start_gateway(fleet, user, password)
        try:
            out, err = gw.communicate(timeout=240)
        except subprocess.TimeoutExpired:
            gw.kill()
            out, err = gw.communicate()
        return gw.returncode, out, err
    common = ["--brokers", k["sasl"], *sasl, "--startup-timeout-s", "120"]
    if prog == "batch":
        inp = tmp_path / "in.jsonl"
        inp.write_text(json.dumps({"custom_id": "a", "method": "POST",
                                   "url": "/v1/chat/completions",
                                   "body": {"model": fleet["model"], "messages": [
                                       {"role": "user", "content": "hi"}]}}) + "\n")
        args = ["--input", str(inp), "--output", str(tmp_path / "out.jsonl"), *topic_flags(t),
                "--dlq-topic", t["dlq"]]
    elif prog == "chat":
        args = ["--file", "/dev/null", *topic_flags(t)]
    elif prog == "load":
        args = ["--conversations", "1", "--turns", "1", *topic_flags(t)]
    else:
        args = ["--topic-prefix", f"sect-{uuid.uuid4().hex[:8]}"]
    r = subprocess.run([fleet["bin"], prog, *common, *args], capture_output=True, text=True,
                       timeout=240, stdin=subprocess.DEVNULL)
    return r.returncode, r.stdout, r.stderr


@pytest.mark.parametrize("prog", ["gateway", "batch", "chat", "load", "topics"])
@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_refused_client_exits_1_naming_the_refusal(fleet, tmp_path, prog, case):
    user, password, want = REFUSALS[case]
    rc, out, err = refused_run(fleet, prog, user, password, tmp_path)
    lines = [ln for ln in err.splitlines() if f"Kafka refused parley {prog}: " in ln]
    print(f"\n{prog}/{case}: exit {rc}: {lines[0][:200] if lines else err[-300:]}")
    assert rc == 1, (rc, out[-500:], err[-2000:])
    assert len(lines) == 1 and lines[0].startswith(f"{prog}: ") and want in lines[0], err[-2000:]
    assert "gave up after" not in err, err[-2000:]  # the refusal ended it, not the deadline
    assert "listening on" not in out


def closed_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"127.0.0.1:{port}"


# A kafka.* key each command cannot use: (command, arguments, key).  None of
# these runs connects: the key is refused before any client is built.
UNUSABLE = [
    ("worker", ["--model.path", "m.gguf"], "kafka.transactional.id", "t1"),
    ("worker", ["--model.path", "m.gguf"], "kafka.enable.auto.commit", "true"),
    ("gateway", [], "kafka.isolation.level", "read_uncommitted"),
    ("gateway", [], "kafka.group.id", "g"),
    ("chat", ["--file", "/dev/null"], "kafka.isolation.level", "read_committed"),
    ("load", [], "kafka.transactional.id", "t1"),
    ("batch", ["--input", "in.jsonl", "--output", "out.jsonl"], "kafka.group.id", "g"),
    ("topics", [], "kafka.fetch.wait.max.ms", "10"),
    ("topics", [], "kafka.producer.linger.ms", "5"),
    ("chat", ["--file", "/dev/null"], "kafka.no.such.property", "1"),
]


@pytest.mark.parametrize("prog,args,key,val", UNUSABLE,
                         ids=[f"{u[0]}-{u[2]}" for u in UNUSABLE])
def test_unusable_kafka_key_is_refused_naming_it(parley_bin, tmp_path, prog, args, key, val):
    brokers = (["--kafka.bootstrap.servers", closed_port()] if prog in ("worker", "gateway")
               else ["--brokers", closed_port()])
    r = subprocess.run([str(parley_bin), prog, *brokers, *args, f"--{key}", val],
                       capture_output=True, text=True, timeout=60, cwd=tmp_path,
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 2, (r.returncode, r.stderr[-2000:])
    assert f"'{key}'" in r.stderr and r.stderr.startswith(f"{prog}: "), r.stderr[-2000:]
    assert "gave up" not in r.stderr


def test_client_config_file_is_checked_naming_file_and_key(parley_bin, tmp_path):
    conf = tmp_path / "c.conf"
    conf.write_text("kafka.security.protocol = SASL_SSL\nmodel.path = x\n")
    r = subprocess.run([str(parley_bin), "chat", "--brokers", closed_port(), "--config", str(conf),
                        "--file", "/dev/null"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "'model.path'" in r.stderr and "line 2" in r.stderr, r.stderr
    conf.write_text("kafka.fetch.wait.max.ms = 10\n")
    r = subprocess.run([str(parley_bin), "topics", "--brokers", closed_port(), "--config",
                        str(conf)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "'kafka.fetch.wait.max.ms'" in r.stderr, r.stderr
