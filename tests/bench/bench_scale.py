"""bench_scale.py -- how parley's cost grows with the work, each figure next
to a peer from the same run.

Not part of the test suite (a benchmark, numbers only).  Sections:

  context   prefill and decode tok/s of one sequence at several context
            lengths (default 512, 2048, 8192, 32000), parley against
            llama.cpp (llama-cpp-python) on the same GGUF, the same threads
            and the same prompt ids; the attention share of a prefill chunk
            and of a decode step (parley's profile); and the KV bytes one
            token of context holds, against an fp16 cache of the same heads
            (what llama.cpp keeps for this model) and an fp16 multi-head
            model of the same dimensions.

The other figures of the issue (thousands of conversations against a host
RAM budget with Redis behind it, restore against recompute, RSS) are not
measured here yet.

Usage:

  python tests/bench/bench_scale.py context --parley build/consumer/parley \\
      --model ~/.cache/parley/models/gemma-3-270m-q4_k_m.gguf \\
      [--lengths 512,2048,8192,32000] [--gen 32] [--threads 2] [--repeat 3] \\
      [--isa NAME] [--ubatch 2048] [--json-out F]

parley: `parley bench --workload engine --prompt L --gen G --batch 0` per
length: the prompt is one prefill chunk of L tokens (medians over
--repeat; decode is G greedy steps after it, and its share of the paired
bandwidth roofline is printed); the attention shares come from the
profiled run after the timed ones.  Gemma 3's sliding-window layers keep
only their window (the engine's two KV block kinds), its global layers the
whole context.

llama.cpp: one context of L + G + 16 cells; the prompt decoded in calls of
--ubatch tokens (n_batch = n_ubatch; llama.cpp's own default is 512: one
call of all 32,000 tokens would need a 16 GB attention buffer, which is why
an earlier run of bench_cpu.py --prompt 32000 could not create its
context), logits for the last token only, then G single-token greedy
calls.  Only llama_decode is timed; medians over --repeat after a short
warm-up.  llama.cpp keeps an fp16 cache for every layer, windowed or not
("full-size SWA cache").

The machine is shared: the load average is printed at the start and the
end.
"""

import argparse
import json
import os
import statistics

from bench_cpu import LlamaCpp, parley_bench_json
from bench_generate import random_prompt


def run_parley(a, length):
    cmd = [a.parley, "bench", "--workload", "engine", "--model", a.model, "--threads",
           str(a.threads), "--prompt", str(length), "--gen", str(a.gen), "--batch", "0",
           "--repeat", str(a.repeat), "--json"]
    if a.isa:
        cmd += ["--isa", a.isa]
    return parley_bench_json(cmd)


def run_llama(a, L, length):
    """Prefill of `length` tokens in --ubatch calls, then --gen greedy steps."""
    ub = max(64, min(length, a.ubatch))
    L.context(length + a.gen + 16, ub, 1)
    ids = random_prompt(length, L.n_vocab, 0)
    pre, dec = [], []
    for r in range(a.repeat + 1):  # 0: warm-up (32-token prompt, two steps)
        n = min(length, 32) if r == 0 else length
        L.lc.llama_memory_clear(L.mem, True)
        tp = 0.0
        for c in range(0, n, ub):
            tp += L.decode([(t, c + i, 0, c + i == n - 1) for i, t in enumerate(ids[c:min(n, c + ub)])])
        tok = L.argmax(1)[0]
        td = 0.0
        for s in range(2 if r == 0 else a.gen):
            td += L.decode([(tok, n + s, 0, True)])
            tok = L.argmax(1)[0]
        if r:
            pre.append(length / tp)
            dec.append(a.gen / td)
            print(f"  llama.cpp {length}: repeat {r}: prefill {pre[-1]:.1f} tok/s, decode "
                  f"{dec[-1]:.2f} tok/s", flush=True)
    return {"prefill_tps": statistics.median(pre), "decode_tps": statistics.median(dec),
            "ubatch": ub}


def kv_per_token(kv, length):
    """Bytes of parley's KV per token of a `length`-token context (global
    layers hold every token, windowed ones their window), and of fp16 caches
    of the same KV heads and of a multi-head model of the same dimensions."""
    g, l = kv["bytes_per_token"]
    held = l * min(length, kv["window"]) if kv["window"] else l * length
    parley = (g * length + held) / length
    fp16_same = 2 * kv["n_layer"] * kv["n_head_kv"] * kv["head_dim"] * 2
    fp16_mha = 2 * kv["n_layer"] * kv["n_head"] * kv["head_dim"] * 2
    return parley, fp16_same, fp16_mha


def section_context(a):
    import llama_cpp as lc

    try:
        lc._logger.set_verbose(False)
    except AttributeError:
        pass
    lengths = [int(x) for x in a.lengths.split(",")]
    rows = []
    L = LlamaCpp(lc, a.model, a.threads)
    try:
        for n in lengths:
            p = run_parley(a, n)
            ll = run_llama(a, L, n)
            pf, dc = p["profile"]["prefill"], p["profile"]["decode"]
            kvp, kv16, kvmha = kv_per_token(p["kv"], n)
            rows.append({
                "length": n, "isa": p["isa"],
                "parley_prefill_tps": p["prefill_tps"], "llama_prefill_tps": ll["prefill_tps"],
                "parley_decode_tps": p["decode_tps"], "llama_decode_tps": ll["decode_tps"],
                "decode_roofline_pct": p["roofline_pct"],
                "paired_bw_range": p["paired_bw_range"],
                "attn_share_prefill": pf["slots"]["attention"]["share"],
                "attn_share_decode": dc["slots"]["attention"]["share"],
                "kv_bytes_per_token": kvp, "kv_fp16_same_heads": kv16, "kv_fp16_mha": kvmha,
                "llama_ubatch": ll["ubatch"],
            })
    finally:
        L.close()
    print(f"\n== context length: parley vs llama.cpp ({a.threads} threads, gen {a.gen}, "
          f"medians of {a.repeat}, isa {rows[0]['isa'] if rows else '-'})")
    hdr = (f"{'context':>8} {'prefill tok/s':>14} {'llama.cpp':>10} {'ratio':>6} "
           f"{'decode tok/s':>13} {'llama.cpp':>10} {'ratio':>6} {'roofline':>9} "
           f"{'attn pre':>9} {'attn dec':>9} {'KV B/tok':>9} {'fp16 same':>10} {'fp16 MHA':>9}")
    print(hdr)
    print("-" * len(hdr))
    for r in rows:
        print(f"{r['length']:>8} {r['parley_prefill_tps']:>14.1f} {r['llama_prefill_tps']:>10.1f} "
              f"{r['parley_prefill_tps'] / r['llama_prefill_tps']:>5.2f}x "
              f"{r['parley_decode_tps']:>13.2f} {r['llama_decode_tps']:>10.2f} "
              f"{r['parley_decode_tps'] / r['llama_decode_tps']:>5.2f}x "
              f"{r['decode_roofline_pct']:>8.1f}% {100 * r['attn_share_prefill']:>8.1f}% "
              f"{100 * r['attn_share_decode']:>8.1f}% {r['kv_bytes_per_token']:>9.0f} "
              f"{r['kv_fp16_same_heads']:>10.0f} {r['kv_fp16_mha']:>9.0f}")
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("section", choices=["context"])
    ap.add_argument("--parley", default="build/consumer/parley")
    ap.add_argument("--model", default=os.environ.get("PARLEY_GEMMA_MODEL"), help="GGUF")
    ap.add_argument("--lengths", default="512,2048,8192,32000")
    ap.add_argument("--gen", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--isa", help="cap parley's kernels (default: the machine's best)")
    ap.add_argument("--ubatch", type=int, default=2048, help="llama.cpp prompt tokens per call")
    ap.add_argument("--json-out", help="write every figure as JSON to this file")
    a = ap.parse_args()
    if not a.model:
        ap.error("--model FILE (or PARLEY_GEMMA_MODEL) is required")
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    rows = section_context(a)
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump({"context": rows}, f, indent=1)


if __name__ == "__main__":
    main()
