"""`parley worker` command line: configuration errors exit 2 with a message
naming the key and its source, before any model or Kafka work; the
generated configuration reference lists every key.  No services needed."""

import re
import subprocess


def run(parley_bin, *args, env=None):
    return subprocess.run([str(parley_bin), "worker", *args], capture_output=True, text=True,
                          timeout=30, env=env)


def test_config_errors_name_the_key(parley_bin, tmp_path):
    r = run(parley_bin, "--model.path", "m.gguf", "--worker.max_inflight", "0")
    assert r.returncode == 2 and "worker.max_inflight" in r.stderr and "outside" in r.stderr
    r = run(parley_bin, "--model.path", "m.gguf", "--set", "cache.enable=true")
    assert r.returncode == 2 and "unknown configuration key 'cache.enable'" in r.stderr
    r = run(parley_bin, "--model.path", "m.gguf", "--kafka.no.such.thing", "1")
    assert r.returncode == 2 and "kafka.no.such.thing" in r.stderr
    r = run(parley_bin)
    assert r.returncode == 2 and "model.path" in r.stderr
    r = run(parley_bin, "--model.path", "m.gguf",
            env={"PARLEY_SCHEDULER_STEP_TOKENS": "lots", "PATH": "/usr/bin:/bin"})
    assert r.returncode == 2 and "PARLEY_SCHEDULER_STEP_TOKENS" in r.stderr
    cfg = tmp_path / "w.conf"
    cfg.write_text("model.path = m.gguf\nworker.chunk_tokens = 99999\n")
    r = run(parley_bin, "--config", str(cfg))
    assert r.returncode == 2 and "line 2" in r.stderr and "worker.chunk_tokens" in r.stderr
    # a bad value fails wherever it comes from, even when a later source
    # would override it; the flag's own value is checked too
    cfg.write_text("model.path = m.gguf\nworker.chunk_tokens = 5\n")
    r = run(parley_bin, "--config", str(cfg), "--worker.chunk_tokens", "0")
    assert r.returncode == 2 and "command line" in r.stderr and "worker.chunk_tokens" in r.stderr
    r = run(parley_bin, "--config", str(cfg), "--worker.chunk_tokens", "8")
    assert r.returncode == 2 and "kafka.bootstrap.servers" in r.stderr


def test_missing_model_is_a_runtime_failure(parley_bin, tmp_path):
    r = run(parley_bin, "--model.path", str(tmp_path / "absent.gguf"),
            "--kafka.bootstrap.servers", "127.0.0.1:1")
    assert r.returncode == 1 and "model.path" in r.stderr


# Every key whose value is one of a fixed set (the table's enum kind), with
# the values it takes.
ENUM_KEYS = {
    "model.backend": ["auto", "cpu", "cuda"],
    "model.weights": ["native", "int8"],
    "model.chat_template": ["", "llama2", "llama3", "gemma", "gemma2", "chatml", "smollm2",
                            "transcript"],
    "scheduler.speculative": ["ngram", "off"],
    "worker.namespace_from": ["field", "header", "topic", "fixed"],
}


def test_enum_keys_refuse_bad_values(parley_bin, tmp_path):
    """A value outside an enum key's set is a configuration error (exit 2,
    the key and its values named), refused when set: before the model is
    read (the model here does not exist) or a broker is asked.  model.backend
    and model.weights were once checked at model load and exited 1."""
    doc = run(parley_bin, "--print-config-doc").stdout
    listed = {m.group(1) for m in re.finditer(r"^\| `([^`]+)` \| one of ", doc, re.M)}
    assert listed == set(ENUM_KEYS), listed
    base = ["--model.path", str(tmp_path / "absent.gguf"), "--kafka.bootstrap.servers",
            "127.0.0.1:1"]
    for key, values in ENUM_KEYS.items():
        for source in ("flag", "env"):
            if source == "flag":
                r = run(parley_bin, *base, f"--{key}", "bogus")
            else:
                env = {"PATH": "/usr/bin:/bin",
                       "PARLEY_" + key.upper().replace(".", "_"): "bogus"}
                r = run(parley_bin, *base, env=env)
            assert r.returncode == 2, (key, source, r.returncode, r.stderr)
            listed_values = ", ".join(v or '""' for v in values)
            assert key in r.stderr and f"'bogus' is not one of {listed_values}" in r.stderr, \
                r.stderr


def test_config_reference(parley_bin):
    r = run(parley_bin, "--print-config-doc")
    assert r.returncode == 0
    for key in ("model.path", "worker.topic.turns", "worker.txn_interval_ms", "cache.budget_mib",
                "redis.addr", "scheduler.max_running", "worker.http", "PARLEY_MODEL_PATH"):
        assert f"`{key}`" in r.stdout, key


def test_committed_config_reference_is_current(parley_bin, repo_root):
    """consumer/CONFIG.md is the generated reference: the worker's part is
    `parley worker --print-config-doc` (the file starts with it), the
    gateway's table rows are `parley gateway --print-config-doc` (under
    its "## parley gateway" heading).  Regenerate after changing either
    property table."""
    r = run(parley_bin, "--print-config-doc")
    assert r.returncode == 0
    committed = (repo_root / "consumer" / "CONFIG.md").read_text()
    assert committed.startswith(r.stdout), "consumer/CONFIG.md (worker part) is stale: regenerate it"
    g = subprocess.run([str(parley_bin), "gateway", "--print-config-doc"], capture_output=True,
                       text=True, timeout=10)
    assert g.returncode == 0, g.stderr
    rest = committed[len(r.stdout):]
    assert "## parley gateway" in rest and g.stdout in rest, \
        "consumer/CONFIG.md (gateway part) is stale: regenerate it"


def test_version_names_the_libraries(parley_bin):
    """`parley --version` prints its own version and those of the client
    libraries it runs with (librdkafka's at run time)."""
    r = subprocess.run([str(parley_bin), "--version"], capture_output=True, text=True, timeout=10)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("parley ")
    names = [ln.split()[0] for ln in lines[1:]]
    assert names == ["librdkafka", "hiredis", "msgpack-c"], r.stdout
    for ln in lines:
        assert re.fullmatch(r"\S+ \d+\.\d+\.\d+\S*", ln), ln


def test_namespace_settings_are_checked(parley_bin, tmp_path):
    """worker.namespace_from takes field/header/topic/fixed; fixed needs
    worker.namespace.  Both are refused before any broker is contacted."""
    base = ["--model.path", str(tmp_path / "none.gguf"), "--kafka.bootstrap.servers",
            "127.0.0.1:1"]
    r = run(parley_bin, *base, "--worker.namespace_from", "record")
    assert r.returncode != 0 and "worker.namespace_from" in r.stderr, r.stderr
    r = run(parley_bin, *base, "--worker.namespace_from", "fixed")
    assert r.returncode != 0 and "worker.namespace" in r.stderr, r.stderr
