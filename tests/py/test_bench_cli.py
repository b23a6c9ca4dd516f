"""`parley bench --workload engine` end to end on a synthetic model
(engine/cli/bench_engine.c): it runs, prints its JSON figures, and
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
    # the compute roofline next to the bandwidth one (0 where the ISA has no probe)
    for key in ("macs_best_gmacs", "prefill_compute_pct", "batch_compute_pct", "macs_layers"):
        assert key in figs, key
    # the paired bandwidth probe: one best pass per repeat, decode's share of its own roofline
    lo, hi = figs["paired_bw_range"]
    assert 0 < lo <= hi, figs["paired_bw_range"]
    assert figs["roofline_pct"] > 0 and figs["start_roofline_pct"] > 0
    # the decode compute roofline: the paired MAC probe over a token's GEMM MACs (0: no probe)
    assert figs["decode_compute_roofline_tps"] >= 0
    if figs["macs_best_gmacs"] > 0:
        assert figs["decode_compute_roofline_tps"] > 0
    assert abs(figs["roofline_tps"] * figs["weight_bytes"] / 1e9 - lo) <= hi - lo + 1e-3 * hi


def test_bench_chat_runs_every_kind_of_run_on_the_real_model(parley_bin, gemma_model):
    """`parley bench --workload chat` (consumer/cli/cmd_bench_chat.c), small:
    every run finishes without failed turns; every later turn of the splice
    run is spliced; the cache serves something in the runs that have it and
    nothing without it; the runs with partial blocks lose fewer shared
    tokens than the whole-blocks run."""
    r = subprocess.run([str(parley_bin), "bench", "--workload", "chat", "--model", str(gemma_model),
                        "--chat-template", "transcript", "--conversations", "2", "--turns", "4",
                        "--reply", "12", "--threads", "1"], capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr
    print(r.stdout[-3000:])
    runs = {}
    for block in r.stdout.split("\n== ")[1:]:
        name = block.split(" ", 1)[0]
        head = block.splitlines()[0]
        assert "failed turns 0" in head, head
        share = float(block.split("from cache ")[1].split(" = ")[1].split("%")[0])
        spliced = int(block.split("turns 2..4: ")[2].split(" spliced")[0]) if name else 0
        lost = int(block.split(", lost ")[1].split(" ")[0])
        runs[name] = (share, spliced, lost)
    assert set(runs) == {"splice", "retok", "before", "nocache"}
    assert runs["splice"][1] == 6 and runs["retok"][1] == 0
    assert runs["nocache"][0] == 0 and all(runs[k][0] > 0 for k in ("splice", "retok", "before"))
    assert runs["splice"][2] < runs["before"][2] and runs["retok"][2] < runs["before"][2]
