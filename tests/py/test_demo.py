"""Tests of `parley demo`, the embedded mode (README command 1).

The demo runs librdkafka's in-process mock cluster, the real worker with an
in-memory KV cache and a model, so it needs no Kafka or Redis: only the
built `parley` binary.  The test runs a small setting with the synthetic
cai-tiny model (--synthetic) and checks what a user relies on: exit status
0, every turn answered with a summary, streamed text on the terminal, later
turns of a conversation served partly from the KV cache, and a clean worker
shutdown.  Then the default run, which picks the installed Gemma 3 270M:
real replies (English words, stopped at the transcript's "\nUser:"), and
the note that it is a base model.
"""

import os
import re
import subprocess

import pytest


def run_demo(parley_bin, tmp_path, *args, timeout=180):
    env = dict(os.environ, PARLEY_DEPS=str(tmp_path / "deps"))
    return subprocess.run([str(parley_bin), "demo", *args], capture_output=True, text=True,
                          env=env, timeout=timeout)


@pytest.fixture(scope="module")
def demo(parley_bin, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("demo")
    return run_demo(parley_bin, tmp, "--synthetic", "--conversations", "2", "--turns", "3",
                    "--max-tokens", "12")


def test_demo_answers_every_turn(demo):
    out = demo.stdout
    assert demo.returncode == 0, f"stdout:\n{out}\nstderr:\n{demo.stderr}"
    done = re.findall(r"^-- (demo-\d+) turn (\d+)/3 done: (\d+) tokens", out, re.M)
    assert sorted((c, int(t)) for c, t, _ in done) == [
        (c, t) for c in ("demo-1", "demo-2") for t in (1, 2, 3)]
    assert all(int(n) >= 1 for _, _, n in done)
    assert re.search(r"^turns answered\s+6/6 \(0 failed\)", out, re.M)
    # streamed chunks were printed, prefixed by conversation and turn
    assert re.search(r"^  \[demo-1 t1\] ", out, re.M)
    assert re.search(r"^  \[demo-2 t3\] ", out, re.M)


def test_demo_summary_and_cache(demo):
    out = demo.stdout
    m = re.search(r"^generated tokens\s+(\d+) in ([\d.]+) s = ([\d.]+) tokens/s", out, re.M)
    assert m and int(m.group(1)) >= 6 and float(m.group(3)) > 0
    rows = {int(r[0]): r for r in re.findall(
        r"^\s*(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)%\s+([\d.]+)\s+([\d.]+)$", out, re.M)}
    assert sorted(rows) == [1, 2, 3]
    # later turns reuse the conversation so far (a first turn may reuse only
    # the system prompt another conversation cached: not asserted)
    for t in (2, 3):
        assert float(rows[t][2]) > 0 and float(rows[t][3]) > 0
        # later prompts contain the earlier ones
        assert float(rows[t][1]) > float(rows[t - 1][1])
    share = re.search(r"^turns 2\.\.3\s+cache hit share ([\d.]+)%", out, re.M)
    assert share and float(share.group(1)) > 0


def test_demo_says_text_is_synthetic(demo):
    out = demo.stdout
    assert "meaningless" in out
    assert "--model FILE" in out and "parley worker" in out
    assert "stopped cleanly" in out


def test_demo_rejects_bad_options(parley_bin, tmp_path):
    r = run_demo(parley_bin, tmp_path, "--turns", "0", timeout=30)
    assert r.returncode == 2 and "--turns" in r.stderr
    r = run_demo(parley_bin, tmp_path, "--bogus", timeout=30)
    assert r.returncode == 2 and "--bogus" in r.stderr
    r = run_demo(parley_bin, tmp_path, "--model", str(tmp_path / "missing.gguf"), timeout=60)
    assert r.returncode == 1 and "missing.gguf" in r.stderr
    r = run_demo(parley_bin, tmp_path, "--synthetic", "--model", "x.gguf", timeout=30)
    assert r.returncode == 2 and "exclude" in r.stderr
    r = run_demo(parley_bin, tmp_path, "--help", timeout=30)
    assert r.returncode == 0 and "usage: parley demo" in r.stdout


def test_demo_chats_with_the_real_model(parley_bin, gemma_model, tmp_path):
    r = subprocess.run([str(parley_bin), "demo", "--conversations", "2", "--turns", "2", "--max-tokens", "32"],
                       capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, PARLEY_GEMMA_MODEL=str(gemma_model), PARLEY_DEPS=str(tmp_path)))
    out = r.stdout
    assert r.returncode == 0, f"stdout:\n{out}\nstderr:\n{r.stderr}"
    assert str(gemma_model) in out and "base (pretrained)" in out and "not an assistant" in out
    assert "meaningless" not in out
    assert re.search(r"^turns answered\s+4/4 \(0 failed\)", out, re.M)
    streamed = " ".join(ln.split("] ", 1)[1] for ln in out.splitlines() if re.match(r"^  \[demo-\d t\d\] ", ln))
    words = re.findall(r"[A-Za-z]+", streamed)
    common = {"the", "a", "to", "you", "and", "of", "is", "it", "i", "in", "for", "that", "can", "your"}
    assert len(words) >= 20 and sum(w.lower() in common for w in words) >= 5, streamed
