"""The worker against a secured Redis: TLS with a CA the test makes, and ACL
users (issue 16, section 3).

One private redis-server per module, TLS only (`--port 0 --tls-port P`),
its certificate signed by a CA made here with openssl (SAN localhost and
127.0.0.1), the default user disabled and two ACL users:

  parley  password `s3cret`, keys ~parley:kv:* (the cache's prefix), +@all
  nokeys  password `n0keys`, keys ~other:* only

Tests run the real `parley worker` (cai-tiny synthetic model) on the real
Kafka broker (PARLEY_TEST_KAFKA):

  * the right user and password over TLS: the worker's KV goes to Redis,
    and a second worker (which never computed it) answers the next turns
    with cached_tokens > 0 fetched from Redis;
  * a wrong password, an untrusted CA (the client trusts another CA), a
    server certificate that does not carry redis.tls.server_name, an ACL
    user without the key prefix: every turn is still answered
    (recomputed), the worker stays up, and its log names the cause in one
    rate-limited line (WRONGPASS / certificate verification / NOPERM).
"""

import shutil
import signal
import subprocess
import time

import pytest

msgpack = pytest.importorskip("msgpack")
ck = pytest.importorskip("confluent_kafka")
redis_py = pytest.importorskip("redis")

from worker_kit import (  # noqa: E402  (helpers only: no test functions)
    Env, collect, free_port, http_get, metric, model, produce_turn, read_to_end)

__all__ = ["model"]  # the module-scoped cai-tiny model fixture, shared

PASSWORD = "s3cret"
NOKEYS_PASSWORD = "n0keys"


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def make_ca(d, name):
    """A self-signed CA: d/<name>.crt, d/<name>.key."""
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
            f"/CN=parley test {name}", "-keyout", f"{name}.key", "-out", f"{name}.crt", cwd=d)


def make_server_cert(d, ca):
    """server.crt/server.key for localhost and 127.0.0.1, signed by ca."""
    (d / "san.ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost",
            "-keyout", "server.key", "-out", "server.csr", cwd=d)
    openssl("x509", "-req", "-in", "server.csr", "-CA", f"{ca}.crt", "-CAkey", f"{ca}.key",
            "-CAcreateserial", "-days", "2", "-extfile", "san.ext", "-out", "server.crt", cwd=d)


@pytest.fixture(scope="module")
def secure_redis(tmp_path_factory, parley_bin):
    """A TLS-only redis-server with ACL users; yields its settings.  A
    parley built without a working hiredis_ssl has no redis.tls: these tests
    skip there by hand, and fail under CI=true (a missing TLS build)."""
    ver = subprocess.run([str(parley_bin), "--version"], capture_output=True, text=True,
                         timeout=10).stdout
    if "+tls" not in ver:
        pytest.skip("this parley has no Redis TLS (hiredis without hiredis_ssl); build "
                    "against deploy/setup.sh libs")
    if not shutil.which("redis-server") or not shutil.which("openssl"):
        pytest.fail("redis-server and openssl are needed (deploy/setup.sh installs them)")
    d = tmp_path_factory.mktemp("secure-redis")
    make_ca(d, "ca")
    make_ca(d, "rogue")  # a CA that did not sign the server: "untrusted"
    make_server_cert(d, "ca")
    port = free_port()
    args = ["redis-server", "--bind", "127.0.0.1", "--port", "0", "--tls-port", str(port),
            "--tls-cert-file", str(d / "server.crt"), "--tls-key-file", str(d / "server.key"),
            "--tls-ca-cert-file", str(d / "ca.crt"), "--tls-auth-clients", "no",
            "--save", "", "--appendonly", "no", "--dir", str(d),
            "--logfile", str(d / "redis.log"),
            "--user", "default", "off",
            "--user", "parley", "on", f">{PASSWORD}", "~parley:kv:*", "+@all",
            "--user", "nokeys", "on", f">{NOKEYS_PASSWORD}", "~other:*", "+@all"]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    client = redis_py.Redis(host="127.0.0.1", port=port, ssl=True,
                            ssl_ca_certs=str(d / "ca.crt"), username="parley",
                            password=PASSWORD, socket_timeout=5, socket_connect_timeout=5)
    end = time.time() + 20
    while True:
        try:
            client.ping()
            break
        except redis_py.exceptions.RedisError:
            if proc.poll() is not None or time.time() > end:
                log = (d / "redis.log").read_text(errors="replace") if (d / "redis.log").exists() else ""
                proc.kill()
                pytest.fail(f"TLS redis-server did not start (built without TLS?): {log[-1500:]}")
            time.sleep(0.1)
    yield {"addr": f"127.0.0.1:{port}", "ca": str(d / "ca.crt"),
           "rogue_ca": str(d / "rogue.crt"), "client": client}
    client.close()
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def redis_flags(srv, ca=None, user="parley", server_name=None):
    return ["--redis.addr", srv["addr"], "--redis.tls", "true",
            "--redis.tls.ca", ca or srv["ca"], "--redis.user", user,
            *(["--redis.tls.server_name", server_name] if server_name else [])]


def answered(records):
    return [msgpack.unpackb(m.value(), raw=False) for m in records]


def test_tls_acl_user_hands_kv_to_redis(kafka_bootstrap, parley_bin, model, tmp_path,
                                       secure_redis):
    """Right user and password (from PARLEY_REDIS_PASSWORD) over TLS: the
    first worker's KV reaches Redis when it stops (partition revocation
    handoff); a second worker answers the next turns from that KV."""
    env = Env(kafka_bootstrap, parley_bin, model, tmp_path)
    convs = 6
    secret_env = {"PARLEY_REDIS_PASSWORD": PASSWORD}
    port = free_port()
    client = secure_redis["client"]
    try:
        env.start("t1", *redis_flags(secure_redis), env=secret_env)
        rc = env.consumer("responses", "read_committed")
        produce_turn(env, convs, 0, max_tokens=6)
        first = collect(rc, convs, 90)
        assert len(first) == convs, env.log("t1")[-2000:]
        env.procs["t1"].send_signal(signal.SIGTERM)
        assert env.procs["t1"].wait(30) == 0, env.log("t1")[-2000:]
        log1 = env.log("t1")
        assert "kv_handoff" in log1 and "drained=yes" in log1, log1[-2000:]
        assert "event=redis " not in log1, log1[-2000:]  # no trouble reported
        keys = list(client.scan_iter(match="parley:kv:*", count=1000))
        assert keys, "no KV block in the TLS Redis after the handoff"

        env.start("t2", *redis_flags(secure_redis), "--worker.http", f"127.0.0.1:{port}",
                  env=secret_env)
        produce_turn(env, convs, 1, max_tokens=6)
        second = answered(collect(rc, convs, 90) + read_to_end(rc))
        rc.close()
        assert len(second) == convs, env.log("t2")[-2000:]
        assert all(r["worker"] == "t2" for r in second)
        cached = [r["usage"]["cached_tokens"] for r in second]
        print(f"\nTLS + ACL: {len(keys)} blocks in Redis; cached tokens on t2: {cached}")
        assert all(c > 0 for c in cached), cached
        status, text = http_get(port, "/metrics")
        assert status == 200
        assert metric(text, 'parley_cache_hits_total{tier="redis"}') > 0
        assert metric(text, 'parley_cache_hit_tokens_total{tier="redis"}') > 0
        assert metric(text, "parley_cache_redis_refused_total") == 0
        for wid in ("t1", "t2"):
            assert PASSWORD not in env.log(wid)
    finally:
        env.stop_all()


REFUSALS = {
    # case: (flags beyond redis_flags, password, what the log must name)
    "wrong_password": ({}, "not-the-password", ("WRONGPASS", "auth")),
    "untrusted_ca": ({"ca": "rogue_ca"}, PASSWORD, ("certificate verification", "tls")),
    "acl_without_key_prefix": ({"user": "nokeys"}, NOKEYS_PASSWORD, ("NOPERM", "noperm")),
    # the CA is right but the certificate does not name the host asked for
    "server_name_mismatch": ({"server_name": "redis.example.com"}, PASSWORD,
                             ("certificate verification", "tls")),
}


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_redis_refusing_the_worker_means_recompute(kafka_bootstrap, parley_bin, model, tmp_path,
                                                   secure_redis, case):
    """A Redis that refuses the worker (wrong password, a server certificate
    the worker cannot verify, an ACL user without the parley:kv:* keys):
    every turn is answered (KV recomputed), the worker stays up, and one
    log line names the cause; it is not repeated per block or per turn."""
    opts, password, (cause, tag) = REFUSALS[case]
    ca = secure_redis[opts["ca"]] if "ca" in opts else None
    env = Env(kafka_bootstrap, parley_bin, model, tmp_path)
    convs, turns = 4, 3
    port = free_port()
    try:
        proc = env.start("r1", *redis_flags(secure_redis, ca=ca, user=opts.get("user", "parley"),
                                            server_name=opts.get("server_name")),
                         "--worker.http", f"127.0.0.1:{port}",
                         env={"PARLEY_REDIS_PASSWORD": password})
        t0 = time.time()
        rc = env.consumer("responses", "read_committed")
        got = []
        for t in range(turns):
            produce_turn(env, convs, t, max_tokens=6)
            got += answered(collect(rc, convs, 90))
            assert proc.poll() is None, env.log("r1")[-2000:]
        rc.close()
        assert len(got) == convs * turns, env.log("r1")[-2000:]
        assert {r["turn_id"] for r in got} == {f"conv-{c}-t{t}" for c in range(convs)
                                               for t in range(turns)}
        assert all(r["finish_reason"] in ("stop", "length") and "error" not in r for r in got)
        status, text = http_get(port, "/metrics")
        assert status == 200
        assert metric(text, "parley_cache_redis_up") == 0
        assert metric(text, "parley_cache_redis_refused_total") > 0
        assert metric(text, 'parley_cache_hits_total{tier="redis"}') == 0
        log = env.log("r1")
        lines = [ln for ln in log.splitlines() if "event=redis " in ln]
        print(f"\n{case}: {lines[0] if lines else 'no redis line'}")
        assert lines, log[-2000:]
        assert cause in lines[0] and f"({tag}" in lines[0], lines[0]
        assert "level=warn" in lines[0]
        # rate-limited: one line per cause and per 30 s, not one per attempt
        assert len(lines) <= 1 + int((time.time() - t0) / 30) + 1, lines
        assert password not in log
        assert proc.poll() is None
    finally:
        env.stop_all()
    assert env.procs["r1"].returncode == 0, env.log("r1")[-2000:]
