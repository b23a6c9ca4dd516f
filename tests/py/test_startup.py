"""Start-up never waits without limit (cm_startup.h).

Every Kafka program of the binary pointed at an address where no broker
answers (a closed port on loopback: librdkafka retries the connection
forever) must stop with exit status 1 within its start-up bound, printing
exactly one line that names what it waited for and the setting that
bounds the wait.  The same for a cluster without the topics: the clients
name the `parley topics` command that creates them, and `parley topics`
creates them (tests/py/test_clients.py runs it against the real broker).
"""

import re
import socket
import subprocess
import time

import pytest


def closed_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    return f"127.0.0.1:{port}"


def gave_up(r, prog, setting, bound_s):
    lines = [ln for ln in r.stderr.splitlines() if "gave up after" in ln]
    assert r.returncode == 1, (r.returncode, r.stderr[-2000:])
    assert len(lines) == 1, r.stderr[-2000:]
    assert re.match(rf"^{prog}: gave up after {bound_s} s waiting for \S.* \(bounded by "
                    rf"{re.escape(setting)}\)$", lines[0]), lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def tiny_model(parley_bin, tmp_path_factory):
    p = tmp_path_factory.mktemp("m") / "cai-tiny.gguf"
    subprocess.run([str(parley_bin), "mkmodel", "--preset", "cai-tiny", "--out", str(p)],
                   check=True, capture_output=True, timeout=120)
    return p


def run_timed(cmd, timeout=60, **kw):
    t0 = time.monotonic()
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    return r, time.monotonic() - t0


def test_worker_gives_up_on_an_unreachable_cluster(parley_bin, tiny_model, tmp_path):
    r, took = run_timed([str(parley_bin), "worker", "--model.path", str(tiny_model),
                         "--kafka.bootstrap.servers", closed_port(), "--cache.enabled", "false",
                         "--worker.startup_timeout_ms", "3000"])
    line = gave_up(r, "worker", "worker.startup_timeout_ms", 3)
    assert "init_transactions" in line
    assert took < 20


@pytest.mark.parametrize("prog", ["chat", "load", "topics"])
def test_clients_give_up_on_an_unreachable_cluster(parley_bin, prog):
    args = {"chat": ["--file", "/dev/null"], "load": ["--conversations", "1"], "topics": []}[prog]
    r, took = run_timed([str(parley_bin), prog, "--brokers", closed_port(),
                         "--startup-timeout-s", "2", *args], stdin=subprocess.DEVNULL)
    line = gave_up(r, prog, "--startup-timeout-s", 2)
    assert closed_port.__name__ and ("metadata" in line or "CreateTopics" in line), line
    assert took < 20


def test_batch_gives_up_on_an_unreachable_cluster(parley_bin, tmp_path):
    inp = tmp_path / "in.jsonl"
    inp.write_text('{"custom_id": "a", "method": "POST", "url": "/v1/chat/completions", '
                   '"body": {"model": "m", "messages": [{"role": "user", "content": "hi"}]}}\n')
    r, took = run_timed([str(parley_bin), "batch", "--input", str(inp), "--output",
                         str(tmp_path / "out.jsonl"), "--brokers", closed_port(),
                         "--startup-timeout-s", "2"])
    gave_up(r, "batch", "--startup-timeout-s", 2)
    assert took < 20


def test_gateway_gives_up_on_an_unreachable_cluster(parley_bin):
    r, took = run_timed([str(parley_bin), "gateway", "--kafka.bootstrap.servers", closed_port(),
                         "--gateway.listen", "127.0.0.1:0", "--gateway.startup_timeout_ms", "2000"])
    gave_up(r, "gateway", "gateway.startup_timeout_ms", 2)
    assert took < 20
