"""`parley bench --workload engine` end to end on a synthetic model
(consumer/cli/cmd_bench_engine.c): it runs, prints its JSON figures, and
survives batched prompts longer than a sliding window (the repeats used to
stop at "cannot truncate a batched sequence to its prompt" once decode had
released window blocks the prompt's end still attends)."""
import json
import subprocess


def test_bench_engine_batched_prompts_past_the_window(parley_bin, tmp_path):
    model = tmp_path / "tiny-gemma3.gguf"  # sliding window 16
    r = subprocess.run([str(parley_bin), "mkmodel", "--preset", "tiny-gemma3", "--out", str(model)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([str(parley_bin), "bench", "--workload", "engine", "--model", str(model), "--prompt", "40",
                        "--gen", "8", "--batch", "3", "--batch-prompt", "24", "--repeat", "2", "--membw-mib", "16",
                        "--threads", "1", "--json"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    figs = json.loads(r.stdout.strip().splitlines()[-1])
    print(json.dumps(figs)[:400])
    flat = json.dumps(figs)
    for key in ("prefill", "decode", "batch"):
        assert key in flat
