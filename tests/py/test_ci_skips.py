"""Under CI=true a skip cannot hide a missing component (tests/py/conftest.py).

Runs pytest (as tests/run.sh does, --continue-on-collection-errors) on a
small test file beside a copy of parley's conftest.py,
once with CI=true and once without: a skip naming a missing tool, and a
module-level importorskip of a missing module, fail under CI=true and skip
otherwise; a skip whose reason starts with "hardware:" stays a skip.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

TESTS = '''
import pytest

def test_tool_missing():
    pytest.skip("clang-format is not installed")

def test_no_such_isa():
    pytest.skip("hardware: this CPU has no AMX")

def test_passes():
    assert True
'''

MODULE_SKIP = '''
import pytest
pytest.importorskip("parley_no_such_module_xyz")

def test_never_runs():
    pass
'''


def run(tmp_path, ci):
    d = tmp_path / ("ci" if ci else "hand")
    d.mkdir()
    shutil.copy(HERE / "conftest.py", d / "conftest.py")
    (d / "test_a.py").write_text(TESTS)
    (d / "test_b.py").write_text(MODULE_SKIP)
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    if ci:
        env["CI"] = "true"
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rfEs", "-p", "no:cacheprovider",
                           "--continue-on-collection-errors", str(d)],
                          capture_output=True, text=True, env=env, timeout=120)


def test_skips_fail_under_ci(tmp_path):
    r = run(tmp_path, ci=True)
    out = r.stdout
    assert r.returncode == 1, out
    assert "1 failed, 1 passed, 1 skipped, 1 error" in out, out
    assert "FAILED" in out and "test_tool_missing" in out
    assert "would hide a missing component: clang-format is not installed" in out
    assert "parley_no_such_module_xyz" in out
    assert "hardware: this CPU has no AMX" in out  # listed with -rs, not failed


def test_skips_stay_skips_by_hand(tmp_path):
    r = run(tmp_path, ci=False)
    assert r.returncode == 0, r.stdout
    assert "1 passed, 3 skipped" in r.stdout, r.stdout
