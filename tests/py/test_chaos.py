"""A 2-minute randomized fault campaign (tests/chaos/chaos.py), on one broker
and on a three-broker cluster: 3 workers on private real brokers and Redis,
one fault every 6-12 s (kill -9, SIGSTOP past the session timeout, Redis
kill and stall, a worker joining and leaving; on one broker its restart, on
the cluster a broker killed, a zombie broker and two brokers down) and
poison records, checked from Kafka alone:
exactly one result per turn, in conversation order, chunks equal to the
result, every poison record in the DLQ, and no worker exit that the
campaign did not inject (a crash fails it, naming the signal).  Each run
takes a new seed, printed first (PARLEY_CHAOS_SEED sets it), so a failure
replays with `tests/chaos/chaos.py --minutes 2 --seed N --nodes 1|3`."""
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "chaos"))


@pytest.mark.parametrize("nodes", [1, 3])
def test_chaos_two_minutes(have_java, parley_bin, tmp_path, nodes):
    import subprocess

    import chaos

    seed = int(os.environ.get("PARLEY_CHAOS_SEED") or chaos.new_seed())
    model = tmp_path / "cai-tiny.gguf"
    subprocess.run([str(parley_bin), "mkmodel", "--preset", "cai-tiny", "--out", str(model)], check=True,
                   capture_output=True, timeout=60)
    counts, kinds, rec, problems = chaos.campaign(parley_bin, model, tmp_path, minutes=2, seed=seed,
                                                  nodes=nodes)
    assert not problems, "\n".join(problems)
    assert sum(kinds.values()) >= 6, kinds
    assert counts["lost"] == 0 and counts["duplicates"] == 0
