"""The worker against a Kafka broker that authenticates, encrypts and
authorizes: a second real broker started here by deploy/kafka.sh with
PARLEY_KAFKA_SECURE=1 (a SASL_SSL listener, SCRAM-SHA-512 users, a CA and
broker certificate made with openssl, ACLs enforced by StandardAuthorizer;
its PLAINTEXT listener is the super user the test administers it through).

* With its principal's least-privilege ACLs (READ on the turns topic and
  its group, WRITE on the tokens, responses and DLQ topics, WRITE on its
  transactional id, DESCRIBE on those) the worker serves every turn exactly
  once over SASL_SSL.
* A wrong password, a CA that did not sign the broker's certificate, a
  principal with no ACLs and one missing only its group ACL: the worker
  exits with status 3 within seconds, printing one "worker: Kafka refused
  the worker: <what>" line that names the cause -- it does not retry
  forever -- and commits nothing, so no consumed turn is lost.
"""
import os
import subprocess
import time
import uuid

import msgpack
import pytest

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType,  # noqa: E402
                                   AdminClient, NewTopic, ResourcePatternType, ResourceType)

from worker_kit import model  # noqa: E402,F401  (the module-scoped cai-tiny fixture)

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
USERS = {"parley": "parley-secret", "intruder": "intruder-secret", "nogroup": "nogroup-secret"}


@pytest.fixture(scope="module")
def secure_kafka(tmp_path_factory, have_java):
    run = tmp_path_factory.mktemp("secure-kafka")
    env = dict(os.environ, PARLEY_RUN_DIR=str(run), PARLEY_KAFKA_SECURE="1",
               PARLEY_KAFKA_SCRAM_USERS=" ".join(f"{u}:{p}" for u, p in USERS.items()))
    r = subprocess.run([os.path.join(REPO, "deploy", "kafka.sh"), "start"], env=env, capture_output=True,
                       text=True, timeout=180)
    assert r.returncode == 0, r.stdout + r.stderr
    try:
        yield {"plain": (run / "kafka.addr").read_text().strip(),
               "sasl": (run / "kafka.sasl_addr").read_text().strip(),
               "ca": str(run / "kafka" / "tls" / "ca.pem"), "dir": run}
    finally:
        subprocess.run([os.path.join(REPO, "deploy", "kafka.sh"), "stop"], env=env, capture_output=True,
                       timeout=120)


def setup_topics(k, user, wid, group_acl=True):
    """Topics of one test, and `user`'s least-privilege ACLs for worker wid."""
    admin = AdminClient({"bootstrap.servers": k["plain"]})
    sfx = uuid.uuid4().hex[:8]
    t = {n: f"sec-{n}-{sfx}" for n in ("turns", "tokens", "responses", "dlq")}
    for f in admin.create_topics([NewTopic(x, 2, 1) for x in t.values()]).values():
        f.result(30)
    p, lit, allow = f"User:{user}", ResourcePatternType.LITERAL, AclPermissionType.ALLOW
    acl = [(ResourceType.TOPIC, t["turns"], op) for op in (AclOperation.READ, AclOperation.DESCRIBE)]
    for n in ("tokens", "responses", "dlq"):
        acl += [(ResourceType.TOPIC, t[n], op) for op in (AclOperation.WRITE, AclOperation.DESCRIBE)]
    acl += [(ResourceType.TRANSACTIONAL_ID, f"parley-{wid}", op)
            for op in (AclOperation.WRITE, AclOperation.DESCRIBE)]
    if group_acl:
        acl.append((ResourceType.GROUP, f"g-{sfx}", AclOperation.READ))
    for f in admin.create_acls([AclBinding(rt, name, lit, p, "*", op, allow) for rt, name, op in acl]).values():
        f.result(30)
    return t, f"g-{sfx}"


def worker(parley_bin, model, k, topics, group, wid, user, password, ca, tmp_path):
    log = open(tmp_path / f"{wid}.log", "wb")
    return subprocess.Popen(
        [str(parley_bin), "worker", "--model.path", str(model), "--model.threads", "1",
         "--worker.id", wid, "--worker.group", group,
         "--worker.topic.turns", topics["turns"], "--worker.topic.tokens", topics["tokens"],
         "--worker.topic.responses", topics["responses"], "--worker.topic.dlq", topics["dlq"],
         "--kafka.bootstrap.servers", k["sasl"], "--kafka.security.protocol", "SASL_SSL",
         "--kafka.sasl.mechanisms", "SCRAM-SHA-512", "--kafka.sasl.username", user,
         "--kafka.sasl.password", password, "--kafka.ssl.ca.location", ca],
        stdout=log, stderr=subprocess.STDOUT)


def test_worker_serves_turns_over_sasl_ssl_with_least_privilege(secure_kafka, parley_bin, model, tmp_path):
    k = secure_kafka
    topics, group = setup_topics(k, "parley", "s1")
    w = worker(parley_bin, model, k, topics, group, "s1", "parley", USERS["parley"], k["ca"], tmp_path)
    try:
        p = ck.Producer({"bootstrap.servers": k["plain"]})
        n = 12
        for i in range(n):
            rec = {"v": 1, "conversation_id": f"c{i}", "turn_id": f"c{i}-t0",
                   "messages": [{"role": "user", "content": f"hello {i}"}],
                   "params": {"max_tokens": 3, "temperature": 0.0}}
            p.produce(topics["turns"], key=f"c{i}", value=msgpack.packb(rec))
        p.flush(10)
        c = ck.Consumer({"bootstrap.servers": k["plain"], "group.id": f"r-{uuid.uuid4().hex[:6]}",
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
        c.subscribe([topics["responses"]])
        got, end = [], time.time() + 120
        while len(got) < n and time.time() < end:
            m = c.poll(0.5)
            if m is not None and not m.error():
                got.append(msgpack.unpackb(m.value(), raw=False)["turn_id"])
        end = time.time() + 2
        while time.time() < end:  # a duplicate would show up here
            m = c.poll(0.3)
            if m is not None and not m.error():
                got.append(msgpack.unpackb(m.value(), raw=False)["turn_id"])
        c.close()
        assert sorted(got) == sorted(f"c{i}-t0" for i in range(n)), (got, (tmp_path / "s1.log").read_text()[-2000:])
        assert w.poll() is None
    finally:
        w.terminate()
        w.wait(30)
    log = (tmp_path / "s1.log").read_text()
    assert w.returncode == 0 and "kafka_refused" not in log, log[-2000:]


REFUSALS = {
    "wrong_password": ("parley", "not-the-password", "ca", True, "SASL authentication failed"),
    "untrusted_ca": ("parley", USERS["parley"], "other", True, "TLS certificate verification failed"),
    "no_acls": ("intruder", USERS["intruder"], "ca", None, "not authorized"),
    "no_group_acl": ("nogroup", USERS["nogroup"], "ca", False, "not authorized"),
}


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_refused_worker_exits_3_naming_the_cause(secure_kafka, parley_bin, model, tmp_path, case):
    k = secure_kafka
    user, password, ca, acls, want = REFUSALS[case]
    if acls is None:
        topics, group = setup_topics(k, "parley", "r-" + case)  # ACLs for someone else
    else:
        topics, group = setup_topics(k, user, "r-" + case, group_acl=acls)
    if ca == "other":
        ca = str(tmp_path / "other.pem")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                        "-subj", "/CN=not the test CA", "-keyout", str(tmp_path / "other.key"), "-out", ca],
                       check=True, capture_output=True, timeout=60)
    else:
        ca = k["ca"]
    # a turn waiting in the topic: nothing may be committed past it
    p = ck.Producer({"bootstrap.servers": k["plain"]})
    p.produce(topics["turns"], key="c0", value=msgpack.packb(
        {"v": 1, "conversation_id": "c0", "turn_id": "c0-t0",
         "messages": [{"role": "user", "content": "hi"}], "params": {"max_tokens": 2}}))
    p.flush(10)
    t0 = time.time()
    w = worker(parley_bin, model, k, topics, group, "r-" + case, user, password, ca, tmp_path)
    try:
        rc = w.wait(90)
    except subprocess.TimeoutExpired:
        w.kill()
        w.wait()
        pytest.fail(f"{case}: the worker kept retrying for 90 s:\n" +
                    (tmp_path / f"r-{case}.log").read_text()[-2000:])
    took = time.time() - t0
    log = (tmp_path / f"r-{case}.log").read_text()
    lines = [ln for ln in log.splitlines() if ln.startswith("worker: Kafka refused the worker: ")]
    print(f"\n{case}: exit {rc} after {took:.1f} s: {lines[0][:160] if lines else log[-300:]}")
    assert rc == 3, log[-2000:]
    assert len(lines) == 1 and want in lines[0], log[-2000:]
    # nothing was committed for the group: the waiting turn is still there for the next reader
    admin_c = ck.Consumer({"bootstrap.servers": k["plain"], "group.id": group})
    tp = [ck.TopicPartition(topics["turns"], i) for i in range(2)]
    committed = admin_c.committed(tp, timeout=30)
    admin_c.close()
    assert all(x.offset < 0 for x in committed), committed
