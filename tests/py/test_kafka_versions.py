"""The oldest broker release parley supports (docs/worker.md, "Broker
versions"): a short exactly-once test -- a worker killed (-9) mid-turn, its
turns redone by the survivor, one committed result per turn -- against
Apache Kafka $KAFKA_OLD_VERSION (3.3.2, the first release whose KRaft mode
is production-ready) in KRaft mode, with the classic group protocol (KIP-447
transactions; KIP-848 needs a 4.0 broker).  The suite's own broker is the
newest release (deploy/setup.sh), so both ends of the supported range run in
tests/run.sh.  The broker is private to this module: deploy/kafka.sh with
KAFKA_LIBS pointing at the old release's jars (deploy/setup.sh kafka)."""
import os
import shutil
from pathlib import Path

import pytest

from conftest import _missing
from test_worker_e2e import kill9_redoes_turns_exactly_once
from worker_kit import Env, model  # noqa: F401 (fixture)
from fault_kit import svc


@pytest.fixture(scope="module")
def old_kafka(tmp_path_factory):
    """(bootstrap, version) of a private broker of the oldest supported release."""
    libs, version = os.environ.get("KAFKA_OLD_LIBS", ""), os.environ.get("KAFKA_OLD_VERSION", "")
    if not libs or not Path(libs, f"kafka_2.13-{version}.jar").exists():
        _missing(f"no Kafka {version or '(KAFKA_OLD_VERSION unset)'} jars at "
                 f"KAFKA_OLD_LIBS={libs!r} (deploy/setup.sh kafka)")
    if not shutil.which("java"):
        _missing("no java on PATH (deploy/setup.sh installs it)")
    run = tmp_path_factory.mktemp("old-kafka")
    svc("kafka.sh", run, "start", KAFKA_LIBS=libs)
    pid = int((run / "kafka.pid").read_text())
    cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    assert libs in cmdline  # the broker runs the old release's jars, not the suite's
    yield (run / "kafka.addr").read_text().strip(), version
    svc("kafka.sh", run, "stop")


def test_kill9_exactly_once_on_oldest_supported_broker(old_kafka, parley_bin, model, tmp_path):
    bootstrap, version = old_kafka
    print(f"\nApache Kafka {version}, KRaft, classic group protocol:")
    kill9_redoes_turns_exactly_once(Env(bootstrap, parley_bin, model, tmp_path,
                                        protocol="classic"))
