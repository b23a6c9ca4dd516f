"""Tests of the local service scripts deploy/kafka.sh and deploy/redis.sh,
and of the servers tests/run.sh started with them.

- a broker that cannot start (its port is taken) makes `kafka.sh start`
  exit non-zero with the broker's log on stderr, and leaves no process;
- redis.sh survives repeated start/stop in its own run directory and
  configures the cache tier (no persistence, maxmemory, allkeys-lru);
- the shared broker and Redis carry the settings tests rely on.
"""

import os
import socket
import subprocess
from pathlib import Path

import pytest


REPO = Path(__file__).resolve().parents[2]


def _run(script: str, action: str, run_dir: Path, timeout: int, **env):
    full_env = dict(os.environ, PARLEY_RUN_DIR=str(run_dir), **env)
    return subprocess.run([str(REPO / "deploy" / script), action], env=full_env,
                          capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def _processes_mentioning(text: str) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if text.encode() in cmdline:
            pids.append(int(entry.name))
    return pids


def test_kafka_start_fails_with_log_when_port_taken(tmp_path, have_java):
    run_dir = tmp_path / "run"
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", 0))
        blocker.listen()
        port = blocker.getsockname()[1]
        r = _run("kafka.sh", "start", run_dir, 150, PARLEY_KAFKA_PORT=str(port),
                 PARLEY_KAFKA_START_TIMEOUT="60")
    assert r.returncode != 0, r.stdout
    assert "----- broker log" in r.stderr
    assert "Address already in use" in r.stderr or "BindException" in r.stderr, r.stderr[-3000:]
    assert not (run_dir / "kafka.addr").exists()
    assert _processes_mentioning(str(run_dir)) == []


def test_redis_script_repeated_start_stop(tmp_path, redis_addr):
    import redis

    run_dir = tmp_path / "run"
    ports = []
    for _ in range(2):
        r = _run("redis.sh", "start", run_dir, 30)
        assert r.returncode == 0, r.stderr
        assert "ready at 127.0.0.1:" in r.stdout
        host, port = (run_dir / "redis.addr").read_text().strip().rsplit(":", 1)
        ports.append(int(port))
        assert _run("redis.sh", "status", run_dir, 10).returncode == 0
        client = redis.Redis(host=host, port=int(port), socket_timeout=5)
        assert client.ping()
        assert client.config_get("maxmemory-policy")["maxmemory-policy"] == "allkeys-lru"
        client.close()
        r = _run("redis.sh", "stop", run_dir, 30)
        assert r.returncode == 0, r.stderr
        assert _run("redis.sh", "status", run_dir, 10).returncode == 1
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection((host, int(port)), timeout=2).close()
    assert _processes_mentioning(str(run_dir)) == []


def test_shared_redis_is_a_cache(redis_client):
    cfg = redis_client.config_get("*")
    assert cfg["maxmemory-policy"] == "allkeys-lru"
    assert int(cfg["maxmemory"]) > 0
    assert cfg["save"] == ""
    assert cfg["appendonly"] == "no"


def test_shared_kafka_broker_config(kafka_bootstrap):
    from confluent_kafka.admin import AdminClient, ConfigResource

    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    md = admin.list_topics(timeout=15)
    assert len(md.brokers) == 1
    broker_id = next(iter(md.brokers))
    res = ConfigResource(ConfigResource.Type.BROKER, str(broker_id))
    cfg = admin.describe_configs([res])[res].result(timeout=15)
    assert cfg["auto.create.topics.enable"].value == "false"
    assert cfg["group.initial.rebalance.delay.ms"].value == "0"
    assert cfg["process.roles"].value == "broker,controller"
    assert cfg["offsets.topic.replication.factor"].value == "1"
