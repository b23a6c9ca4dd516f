"""Tests of `parley demo`, the embedded mode (README command 1).

The demo runs librdkafka's in-process mock cluster, the real worker with an
in-memory KV cache and a model, so it needs no Kafka or Redis: only the
built `parley` binary.  The test runs a small setting with the synthetic
cai-tiny model (--synthetic) and checks what a user relies on: exit status
0, every turn answered with a summary, each turn shown as the user's
message and the reply (a finished block per turn when the output is not a
terminal; live lines redrawn in place on a terminal), later turns of a
conversation served partly from the KV cache, and a clean worker shutdown.
Then the default run, which picks the installed SmolLM2-135M-Instruct with
its own chat template (the file's, rendered by parley's Jinja renderer, as
the banner says): real replies, no template
text in them (a turn ends at the template's <|im_end|>, although the demo
sends no stop string), and no base-model note; and Gemma 3 270M passed with --model: real replies, ended
at the transcript format's own end of turn "\nUser:", and the note that it
is a base model.  (Start-up deadlines: tests/py/test_startup.py.)
"""

import os
import pty
import re
import select
import subprocess
import time

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


# One finished turn block: header, the user's message, the reply, figures.
BLOCK = re.compile(r"^-- (demo-\d+), turn (\d+)/(\d+)\n   You:       (.*)\n"
                   r"   Assistant: (.*(?:\n             .*)*)\n   \((\d+) tokens, (\w+);", re.M)


def test_demo_answers_every_turn(demo):
    out = demo.stdout
    assert demo.returncode == 0, f"stdout:\n{out}\nstderr:\n{demo.stderr}"
    blocks = BLOCK.findall(out)
    assert sorted((c, int(t)) for c, t, *_ in blocks) == [
        (c, t) for c in ("demo-1", "demo-2") for t in (1, 2, 3)]
    assert all(int(b[5]) >= 1 for b in blocks)
    assert re.search(r"^turns answered\s+6/6 \(0 failed\)", out, re.M)
    # each block shows the user's message of that turn: the built-in ones
    users = {(c, int(t)): u for c, t, _, u, *_ in blocks}
    assert users[("demo-1", 1)].startswith("Hi! I would like to plan")
    assert users[("demo-2", 2)].startswith("How long should the dough rise")
    # not a terminal: no live lines, no escape sequences
    assert "\033[" not in out and "| Assistant:" not in out
    # the worker's info lines do not interleave with the conversation view
    assert "event=assigned" not in demo.stderr + out


def test_demo_on_a_terminal_redraws_live_lines(parley_bin, tmp_path):
    """On a terminal each conversation has one live line (the user's message
    and the streamed reply), redrawn in place with ANSI escapes, and each
    finished turn is still printed as a block above them."""
    pid, fd = pty.fork()
    if pid == 0:
        os.environ["PARLEY_DEPS"] = str(tmp_path / "deps")
        os.execv(str(parley_bin), [str(parley_bin), "demo", "--synthetic", "--conversations", "2",
                                   "--turns", "2", "--max-tokens", "12"])
    chunks, deadline = [], time.monotonic() + 180
    while time.monotonic() < deadline:
        r, _, _ = select.select([fd], [], [], 1.0)
        if not r:
            continue
        try:
            b = os.read(fd, 65536)
        except OSError:
            break
        if not b:
            break
        chunks.append(b)
    _, status = os.waitpid(pid, 0)
    out = b"".join(chunks).decode("utf-8", "replace").replace("\r\n", "\n")
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, out[-3000:]
    assert re.search(r"demo-1 1/2  You: Hi! I would like.*\| Assistant:", out), out[-3000:]
    assert "\033[J" in out and "\033[K" in out  # erased and redrawn in place
    plain = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", out).replace("\r", "")
    assert len(re.findall(r"^-- demo-\d, turn \d/2$", plain, re.M)) == 4, plain[-3000:]
    assert re.search(r"^turns answered\s+4/4 \(0 failed\)", plain, re.M)


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
    assert "--model FILE" in out and "parley worker" in out and "parley topics" in out
    assert "stopped cleanly" in out
    # the mock cluster gives no read_committed semantics: no exactly-once claim
    assert "not the exactly-once guarantee" in out
    assert not re.search(r"exactly[- ]once (replies|results|delivery)", out)


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


COMMON = {"the", "a", "to", "you", "and", "of", "is", "it", "i", "in", "for", "that", "can", "your"}


def demo_replies(parley_bin, env, *args):
    """Run a real model's demo of 2 conversations x 2 turns: its output, and
    the four replies joined, once they read as English and ended well."""
    r = subprocess.run([str(parley_bin), "demo", "--conversations", "2", "--turns", "2", *args],
                       capture_output=True, text=True, timeout=300, env=dict(os.environ, **env))
    out = r.stdout
    assert r.returncode == 0, f"stdout:\n{out}\nstderr:\n{r.stderr}"
    assert re.search(r"^turns answered\s+4/4 \(0 failed\)", out, re.M)
    blocks = BLOCK.findall(out)
    assert len(blocks) == 4, out
    replies = " ".join(b[4] for b in blocks)
    words = re.findall(r"[A-Za-z]+", replies)
    assert len(words) >= 20 and sum(w.lower() in COMMON for w in words) >= 5, replies
    # the worker ended the turns at the format's end of turn: no reply runs
    # on into an invented next turn
    assert "User:" not in replies and all(b[6] in ("stop", "length") for b in blocks)
    return out, r.stderr, replies


def test_demo_default_is_the_assistant(parley_bin, smollm_model, tmp_path):
    out, err, replies = demo_replies(parley_bin, {"PARLEY_SMOLLM_MODEL": str(smollm_model),
                                                  "PARLEY_DEPS": str(tmp_path)})
    header = out.splitlines()[0]
    assert header.startswith("== parley demo: model ") and str(smollm_model) in header, header
    assert re.search(r"^   chat template: the file's own \(tokenizer\.chat_template\), rendered by parley's "
                     r"Jinja renderer$", out, re.M), out
    assert "not an assistant" not in out and "meaningless" not in out
    assert "constraints_off" not in out + err, "the binary was built without llguidance"
    assert "<|im" not in replies  # the turn ends at <|im_end|>


def test_demo_chats_with_gemma_as_a_base_model(parley_bin, gemma_model, tmp_path):
    out, _, _ = demo_replies(parley_bin, {"PARLEY_DEPS": str(tmp_path)},
                             "--model", str(gemma_model), "--max-tokens", "32")
    header = out.splitlines()[0]
    assert header.startswith("== parley demo: model Gemma 3") and str(gemma_model) in header, header
    assert "base (pretrained)" in out and "not an assistant" in out
    assert "meaningless" not in out
