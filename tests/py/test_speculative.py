"""Speculative decoding by prompt lookup on the real Gemma 3 270M Q4_K_M:
greedy output is identical, token for token, with drafting on and off.

* `parley generate --speculative ngram` against `--speculative off` on a
  prompt that quotes its context (repeat a paragraph of licence text) and
  an open-ended one; the quoting prompt must have had drafts accepted.
* the scheduler's path (the worker's): `parley bench --workload spec`
  runs each prompt through two schedulers, drafting off and on, and fails
  when their tokens differ; its JSON reports drafted / accepted tokens.

The distribution under temperature sampling is tested statistically in
tests/sched/test_sampler.c (verify_keeps_the_distribution).
"""
import json
import re
import subprocess

PARA = open("/usr/share/common-licenses/GPL-3", encoding="utf-8").read()[2000:3200]
QUOTING = f"Text: {PARA}\n\nThe same text, repeated exactly:\n"
OPEN = "Once upon a time, in a small village by the sea,"
GEN = 48


def generate(exe, model, prompt, spec):
    r = subprocess.run([str(exe), "generate", str(model), "--prompt", prompt, "-n", str(GEN),
                        "--threads", "2", "--print-ids", "--quiet", "--speculative", spec],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    ids = next(ln for ln in r.stdout.splitlines() if ln.startswith("ids: "))
    m = re.search(r"speculative: ngram k \d+, (\d+) drafted, (\d+) accepted", r.stderr)
    return [int(x) for x in ids[5:].split(",")], (m and (int(m.group(1)), int(m.group(2))))


def test_generate_greedy_identical(parley_bin, gemma_model):
    for prompt, quoting in ((QUOTING, True), (OPEN, False)):
        off, none = generate(parley_bin, gemma_model, prompt, "off")
        on, (drafted, accepted) = generate(parley_bin, gemma_model, prompt, "ngram")
        assert none is None
        assert on == off, (prompt[:40], off, on)
        assert 0 <= accepted <= drafted
        if quoting:
            assert len(off) == GEN and accepted >= GEN // 2, (drafted, accepted)


def test_scheduler_greedy_identical(parley_bin, gemma_model, tmp_path):
    f = tmp_path / "prompts.txt"
    f.write_text(f"{QUOTING}\n%%\n{OPEN}\n")
    r = subprocess.run([str(parley_bin), "bench", "--workload", "spec", "--model", str(gemma_model),
                        "--threads", "2", "--prompts", str(f), "--gen", str(GEN), "--repeat", "1",
                        "--json"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr  # a token difference fails the run
    assert "MISMATCH" not in r.stdout
    j = json.loads(r.stdout.strip().splitlines()[-1])
    quoting, other = j["prompts"]
    assert quoting["n_gen"] == GEN and quoting["accepted"] >= GEN // 2, quoting
    assert 0 <= other["accepted"] <= other["drafted"]
    assert quoting["verify_steps"] < GEN // 2  # several tokens per step
