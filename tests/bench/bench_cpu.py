"""bench_cpu.py -- parley's CPU engine against llama.cpp on the same GGUF, in
one run: prefill, single-stream decode (with the measured bandwidth
roofline) and batched decode of 64 sequences, per ISA level.

Not part of the test suite (a benchmark, numbers only).  Usage:

  python tests/bench/bench_cpu.py --parley build/consumer/parley \\
      --model /tmp/llama-1b.gguf [--model /tmp/cai-1b.gguf] \\
      --llama-cpp /tmp/llama-1b.gguf [--threads 2] [--prompt 512] [--gen 32] \\
      [--batch 64] [--batch-prompt 32] [--repeat 5] [--isa avx2,amx]
      [--weights native,int8]

parley: `parley bench --workload engine --json` once per model and ISA
level (default: the machine's best level and avx2; PARLEY_ISA=scalar is
very slow, name it with --isa to include it) and weight form (--weights:
native keeps 4-bit tensors 4-bit, int8 requantises them; default native);
the figures are the JSON object on its last line, its readable report is
echoed.

llama.cpp: llama-cpp-python's low-level API (llama_batch_init /
llama_decode), measured the way parley measures itself:
  prefill  --prompt tokens in one llama_decode call (n_batch = n_ubatch >=
           prompt), logits for the last token only;
  decode   --gen single-token llama_decode calls after that prompt, greedy;
  batch    --batch sequences (n_seq_max = batch, distinct seq ids), each with
           its own --batch-prompt-token prompt decoded once untimed, then
           --gen llama_decode calls of one token per sequence; aggregate
           tokens / seconds.  Each repeat removes the decoded positions
           (llama_memory_seq_rm) and decodes the same tokens again.
           One KV stream per sequence (kv_unified = false).
Only the llama_decode calls are timed (argmax is not), medians over
--repeat after one short warm-up, the same thread count for both engines,
the same prompt ids (parley generate's --random-prompt generator: seed 0
for the single stream, seed 1 + i for batched sequence i).

The machine is shared: the load average is printed at the start and the
end, with a warning when other work ran (llama.cpp's spinning thread
barriers suffer more than parley's pool when other processes take the
cores).

Targets (issue 9): decode >= 1.2x llama.cpp and >= 80% of the roofline;
batch-64 >= 4x; prefill-512 >= 2x.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

from bench_generate import random_prompt  # parley generate --random-prompt ids


def machine_isas():
    """ISA levels this CPU reports, lowest first (parley re-checks OS support)."""
    flags = set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    break
    except OSError:
        pass
    isas = ["scalar"]
    if "avx2" in flags and "fma" in flags:
        isas.append("avx2")
        if {"avx512f", "avx512bw", "avx512vl", "avx512_vnni"} <= flags:
            isas.append("avx512vnni")
            if {"amx_tile", "amx_int8"} <= flags:
                isas.append("amx")
    return isas


def run_parley(a, model, isa, weights):
    cmd = [a.parley, "bench", "--workload", "engine", "--model", model, "--threads",
           str(a.threads), "--isa", isa, "--prompt", str(a.prompt), "--gen", str(a.gen),
           "--batch", str(a.batch), "--batch-prompt", str(a.batch_prompt), "--repeat",
           str(a.repeat), "--weights", weights, "--json"]
    return parley_bench_json(cmd)


def parley_bench_json(cmd):
    """Run a `parley bench --workload engine ... --json` command line: echo
    its readable report, return the JSON object of its last line."""
    print("$ " + " ".join(cmd), flush=True)
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.stderr.write(r.stderr)
        raise RuntimeError(f"parley bench failed ({r.returncode}): {' '.join(cmd)}")
    lines = r.stdout.rstrip("\n").split("\n")
    print("\n".join(lines[:-1]), flush=True)
    return json.loads(lines[-1])


class LlamaCpp:
    """A llama.cpp model and a context on it (low-level API)."""

    def __init__(self, lc, model, threads):
        self.lc = lc
        lc.llama_backend_init()
        mp = lc.llama_model_default_params()
        self.model = lc.llama_model_load_from_file(model.encode(), mp)
        if not self.model:
            raise RuntimeError(f"llama.cpp cannot load {model}")
        self.n_vocab = lc.llama_vocab_n_tokens(lc.llama_model_get_vocab(self.model))
        self.threads = threads
        self.ctx = None

    def context(self, n_ctx, n_batch, n_seq):
        lc = self.lc
        self.close_context()
        cp = lc.llama_context_default_params()
        cp.n_ctx = n_ctx
        cp.n_batch = n_batch
        cp.n_ubatch = n_batch
        cp.n_seq_max = n_seq
        cp.n_threads = self.threads
        cp.n_threads_batch = self.threads
        # one KV stream per sequence: attention of a sequence reads only its
        # own cells (a unified buffer makes every query scan all sequences)
        cp.kv_unified = False
        self.ctx = lc.llama_init_from_model(self.model, cp)
        if not self.ctx:
            raise RuntimeError("llama.cpp cannot create a context")
        self.mem = lc.llama_get_memory(self.ctx)
        self.batch = lc.llama_batch_init(n_batch, 0, 1)

    def close_context(self):
        if self.ctx:
            self.lc.llama_batch_free(self.batch)
            self.lc.llama_free(self.ctx)
            self.ctx = None

    def close(self):
        self.close_context()
        self.lc.llama_model_free(self.model)

    def decode(self, items):
        """items: (token, pos, seq, want_logits); returns seconds in llama_decode."""
        b = self.batch
        b.n_tokens = len(items)
        for i, (tok, pos, seq, lg) in enumerate(items):
            b.token[i] = tok
            b.pos[i] = pos
            b.n_seq_id[i] = 1
            b.seq_id[i][0] = seq
            b.logits[i] = 1 if lg else 0
        t0 = time.perf_counter()
        rc = self.lc.llama_decode(self.ctx, b)
        self.lc.llama_synchronize(self.ctx)
        dt = time.perf_counter() - t0
        if rc != 0:
            raise RuntimeError(f"llama_decode returned {rc}")
        return dt

    def argmax(self, n_out):
        """Argmax of each of the last call's n_out output rows."""
        p = self.lc.llama_get_logits(self.ctx)
        v = np.ctypeslib.as_array(p, shape=(n_out * self.n_vocab,))
        return [int(x) for x in v.reshape(n_out, self.n_vocab).argmax(axis=1)]


def bench_llama_cpp(a, model):
    import llama_cpp as lc

    try:  # llama.cpp logs every tensor and graph at info level otherwise
        lc._logger.set_verbose(False)
    except AttributeError:
        pass
    L = LlamaCpp(lc, model, a.threads)
    try:
        # single stream: prefill in one call, then greedy decode
        L.context(a.prompt + a.gen + 16, max(a.prompt, 64), 1)
        ids = random_prompt(a.prompt, L.n_vocab, 0)
        pre, dec = [], []
        for r in range(a.repeat + 1):  # 0: warm-up (32-token prompt, two steps)
            n = min(a.prompt, 32) if r == 0 else a.prompt
            lc.llama_memory_clear(L.mem, True)
            tp = L.decode([(t, i, 0, i == n - 1) for i, t in enumerate(ids[:n])])
            tok = L.argmax(1)[0]
            td = 0.0
            for s in range(min(a.gen, 2) if r == 0 else a.gen):
                td += L.decode([(tok, n + s, 0, True)])
                tok = L.argmax(1)[0]
            if r:
                pre.append(a.prompt / tp)
                dec.append(a.gen / td)
                print(f"  llama.cpp repeat {r}: prefill {pre[-1]:.1f} tok/s, "
                      f"decode {dec[-1]:.2f} tok/s", flush=True)
        out = {"prefill_tps": statistics.median(pre), "decode_tps": statistics.median(dec)}
        if a.batch > 0:
            B, P = a.batch, a.batch_prompt
            n_batch = max(B, 512)
            L.context(B * ((P + a.gen + 8 + 255) // 256 * 256), n_batch, B)
            first, group = [], max(1, n_batch // P)
            for g in range(0, B, group):  # prompts, untimed, as many sequences per call as fit
                items = []
                for i in range(g, min(B, g + group)):
                    p = random_prompt(P, L.n_vocab, 1 + i)
                    items += [(t, j, i, j == P - 1) for j, t in enumerate(p)]
                L.decode(items)
                first += L.argmax(min(B, g + group) - g)
            agg = []
            for r in range(a.repeat + 1):  # 0: warm-up (one step)
                for i in range(B):
                    lc.llama_memory_seq_rm(L.mem, i, P, -1)
                toks, t = list(first), 0.0
                for s in range(a.gen if r else 1):
                    t += L.decode([(toks[i], P + s, i, True) for i in range(B)])
                    toks = L.argmax(B)
                if r:
                    agg.append(B * a.gen / t)
                    print(f"  llama.cpp repeat {r}: batch-{B} decode {agg[-1]:.1f} tok/s",
                          flush=True)
            out["batch_tps"] = statistics.median(agg)
        return out
    finally:
        L.close()


def fmt(x, spec, width, suffix=""):
    return format("-" if x is None else format(x, spec) + suffix, f">{width}")


def print_table(a, parley, llama):
    """parley: {(model, isa, weights): json}; llama: {model: figures}."""
    print("\n== parley vs llama.cpp "
          f"({a.threads} threads, prompt {a.prompt}, gen {a.gen}, batch {a.batch}, "
          f"medians of {a.repeat})")
    hdr = f"{'model':<22} {'isa':<10} {'weights':<7} {'figure':<26} {'parley':>10} {'llama.cpp':>10} " \
          f"{'ratio':>7}  {'target':<17} {'met':<4}"
    print(hdr)
    print("-" * len(hdr))
    rows = []
    for (model, isa, weights), j in parley.items():
        ll = llama.get(model)
        name = os.path.basename(model)
        figs = [
            ("membw GB/s", j["membw_gbs"], None, None, None),
            ("resident MiB (llama.cpp: file)", j["resident_bytes"] / 1048576.0,
             os.path.getsize(model) / 1048576.0, None, None),
            ("weight MiB read per step", j["weight_bytes"] / 1048576.0, None, None, None),
            (f"prefill-{a.prompt} tok/s", j["prefill_tps"], ll and ll["prefill_tps"], 2.0, "x"),
            ("decode tok/s", j["decode_tps"], ll and ll["decode_tps"], 1.2, "x"),
            ("decode % roofline", j["roofline_pct"], None, 80.0, "%"),
        ]
        if a.batch > 0:
            figs.append((f"batch-{a.batch} tok/s", j["batch_tps"], ll and ll.get("batch_tps"),
                         4.0, "x"))
        for fig, pv, lv, target, kind in figs:
            ratio = pv / lv if lv else None
            if kind == "x":
                tgt = f">= {target:g}x llama.cpp"
                met = "-" if ratio is None else ("yes" if ratio >= target else "NO")
            elif kind == "%":
                tgt = f">= {target:g}%"
                met = "yes" if pv >= target else "NO"
            else:
                tgt, met = "", ""
            print(f"{name:<22} {j['isa']:<10} {weights:<7} {fig:<26} {fmt(pv, '.2f', 10)} "
                  f"{fmt(lv, '.2f', 10)} {fmt(ratio, '.2f', 7, 'x')}  {tgt:<17} {met:<4}")
            rows.append({"model": name, "isa": j["isa"], "weights": weights, "figure": fig,
                         "parley": pv,
                         "llama_cpp": lv, "ratio": ratio, "met": met})
    for model, ll in llama.items():  # llama.cpp models parley did not run
        if any(m == model for m, _, _ in parley):
            continue
        for fig, key in (("prefill tok/s", "prefill_tps"), ("decode tok/s", "decode_tps"),
                         ("batch tok/s", "batch_tps")):
            print(f"{os.path.basename(model):<22} {'-':<10} {fig:<26} {'-':>10} "
                  f"{fmt(ll.get(key), '.2f', 10)}")
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--parley", default=os.environ.get(
        "PARLEY_BIN", os.path.join(os.environ.get("PARLEY_BUILD", "build"), "consumer", "parley")))
    ap.add_argument("--model", action="append", default=[], help="GGUF for parley (repeatable)")
    ap.add_argument("--llama-cpp", action="append", default=[],
                    help="GGUF to run with llama.cpp too (repeatable)")
    ap.add_argument("--isa", help="comma-separated ISA levels for parley "
                    "(default: the machine's best and avx2)")
    ap.add_argument("--weights", default="native",
                    help="comma-separated weight forms for parley: native, int8 (default native)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prompt", type=int, default=512)
    ap.add_argument("--gen", type=int, default=32)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--batch-prompt", type=int, default=32)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json-out", help="write every figure as JSON to this file")
    a = ap.parse_args()
    if not a.model and not a.llama_cpp:
        ap.error("give --model and/or --llama-cpp")
    have = machine_isas()
    if a.isa:
        isas = [s.strip() for s in a.isa.split(",") if s.strip()]
        for s in isas:
            if s not in have:
                print(f"note: this machine does not support {s}; parley will run its best "
                      f"level below it", flush=True)
    else:
        isas = [have[-1]] + (["avx2"] if "avx2" in have and have[-1] != "avx2" else [])
    busy = False
    try:
        load = os.getloadavg()
        print(f"load average at start: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; "
              f"machine ISA levels: {', '.join(have)}", flush=True)
        busy = load[0] > 0.5
    except OSError:
        pass
    parley, llama = {}, {}
    for m in a.model:
        for weights in [w.strip() for w in a.weights.split(",") if w.strip()]:
            seen = set()
            for isa in isas:
                j = run_parley(a, m, isa, weights)
                if j["isa"] in seen:  # the cap resolved to a level already measured
                    continue
                seen.add(j["isa"])
                parley[(m, j["isa"], weights)] = j
    for m in a.llama_cpp:
        print(f"$ llama.cpp (llama-cpp-python) on {m}", flush=True)
        llama[m] = bench_llama_cpp(a, m)
    rows = print_table(a, parley, llama)
    try:
        load = os.getloadavg()
        print(f"load average at end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} "
              f"(the benchmark itself accounts for about {a.threads})")
        if busy or load[1] > a.threads + 0.5:
            print("WARNING: the machine was busy (1-minute load above 0.5 at the start, or "
                  "5-minute load at the end above the benchmark's threads + 0.5). "
                  "llama.cpp's threads spin at barriers and slow down far more than parley's "
                  "when other processes take the cores; the ratios are not reliable -- "
                  "rerun on an idle machine.")
    except OSError:
        pass
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump({"parley": [v for v in parley.values()],
                       "llama_cpp": llama, "table": rows}, f, indent=1)


if __name__ == "__main__":
    main()
