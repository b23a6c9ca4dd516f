"""bench_spec.py -- speculative decoding by prompt lookup: single-stream
decode tok/s with drafting off and on, on a prompt set that quotes its
context and one that does not, next to llama.cpp's plain decode of the
same prompt ids in the same run.

Not part of the test suite (a benchmark, numbers only).  Usage:

  python tests/bench/bench_spec.py --parley build/consumer/parley \\
      [--model ~/.cache/parley/models/gemma-3-270m-q4_k_m.gguf] \\
      [--threads 2] [--gen 128] [--repeat 5] [--no-llama-cpp]

parley: `parley bench --workload spec` (engine/cli/bench_spec.c): first --cost
(the verify-chunk and batched-decode step costs behind the scheduler's
drafting rule; 15 calls each, median and fastest), then each prompt of each set through the scheduler (one
`parley bench` per prompt), drafting off and on alternately, --repeat
times after a warm-up; decode
tok/s = (generated - 1) / (end - first token), greedy, to --gen tokens or
the end-of-generation token.  Both runs must give the same tokens (the
bench fails otherwise).  A set's figure (all three engines) is its decode
tokens over the sum of its prompts' median times.

llama.cpp: llama-cpp-python's low-level API (tests/bench/bench_cpu.py's
LlamaCpp), right after parley's runs of the same prompt (so both see the
same machine load): the same prompt ids (from parley's JSON) prefilled in
one call,
then the same number of greedy single-token llama_decode calls as parley
generated (EOS ignored, so the count matches); timed: the decode calls and
the argmax (parley's figure includes its sampling and scheduler too),
median over --repeat after one warm-up.

Prompts: no chat template (Gemma 3 270M is a base model); the quoting set
asks to repeat, summarise or edit a paragraph of a licence text from
/usr/share/common-licenses, the open set is open-ended.  The load average
is printed at the start and the end: the machine is shared.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def lic(name, a, b):
    return open(f"/usr/share/common-licenses/{name}", encoding="utf-8").read()[a:b].strip()


QUOTING = [
    f"Text: {lic('GPL-3', 2000, 3200)}\n\nThe same text, repeated exactly:\n",
    f"Here is a paragraph:\n\n{lic('Apache-2.0', 3000, 4000)}\n\nSummary of the paragraph above:\n",
    f"Original:\n{lic('GPL-3', 8000, 9000)}\n\nThe same paragraph with British spelling:\n",
    f"Fix the typos in this text.\n\nText: {lic('MPL-2.0', 1500, 2400)}\n\nCorrected text:\n",
    f"{lic('LGPL-3', 500, 1400)}\n\nQuote the first sentence of the text above:\n",
]
OPEN = [
    "Once upon a time, in a small village by the sea,",
    "The history of the Roman Empire begins",
    "Here is a list of ideas for a birthday party:",
    "Write a short essay about why people enjoy music.",
    "The best way to learn a new programming language is",
]


def loadavg():
    return open("/proc/loadavg").read().split()[:3]


def run_parley(a, args):
    cmd = [a.parley, "bench", "--workload", "spec", "--model", a.model, "--threads",
           str(a.threads), "--repeat", str(a.repeat), "--json", *args]
    print("$ " + " ".join(cmd), flush=True)
    r = subprocess.run(cmd, capture_output=True, text=True)
    lines = r.stdout.rstrip("\n").split("\n")
    print("\n".join(lines[:-1]), flush=True)
    if r.returncode != 0:
        sys.stderr.write(r.stderr)
        raise RuntimeError(f"parley bench --workload spec failed ({r.returncode})")
    return json.loads(lines[-1])


def run_prompt(a, prompt):
    """One prompt through `parley bench --workload spec`; its JSON entry."""
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write(prompt + "\n")
    try:
        return run_parley(a, ["--prompts", f.name, "--gen", str(a.gen)])["prompts"][0]
    finally:
        os.unlink(f.name)


def llama_cpp_prompt(a, L, p):
    """Plain greedy decode of the prompt's ids for parley's token count;
    the median seconds of the n_gen - 1 decode steps."""
    lc = L.lc
    ids, n = p["ids"], p["n_gen"]
    L.context(len(ids) + n + 16, max(len(ids), 64), 1)
    times = []
    for r in range(a.repeat + 1):  # 0: warm-up
        lc.llama_memory_clear(L.mem, True)
        L.decode([(t, i, 0, i == len(ids) - 1) for i, t in enumerate(ids)])
        tok = L.argmax(1)[0]
        t0 = time.perf_counter()
        for s in range(n - 1):
            L.decode([(tok, len(ids) + s, 0, True)])
            tok = L.argmax(1)[0]
        if r:
            times.append(time.perf_counter() - t0)
    med = statistics.median(times)
    print(f"  llama.cpp: {len(ids)} ids, {n} generated: {(n - 1) / med:.1f} tok/s", flush=True)
    return med


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--parley", default="build/consumer/parley")
    ap.add_argument("--model", default=os.path.expanduser(
        "~/.cache/parley/models/gemma-3-270m-q4_k_m.gguf"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--gen", type=int, default=128)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--no-cost", action="store_true", help="skip the step-cost table")
    ap.add_argument("--no-llama-cpp", action="store_true")
    a = ap.parse_args()
    print(f"load average at start: {' '.join(loadavg())}", flush=True)
    if not a.no_cost:
        # more calls than the sets' repeats: the fastest is the figure least
        # disturbed by other processes
        run_parley(a, ["--cost", "--repeat", str(max(15, a.repeat))])
    L = None
    if not a.no_llama_cpp:
        import llama_cpp as lc
        from bench_cpu import LlamaCpp

        try:
            lc._logger.set_verbose(False)
        except AttributeError:
            pass
        L = LlamaCpp(lc, a.model, a.threads)
    # per prompt: parley (off and on), then llama.cpp on the same ids, so
    # the three see the same machine load
    sets = {}
    try:
        for name, prompts in (("quoting", QUOTING), ("open", OPEN)):
            print(f"\n== set {name}: {len(prompts)} prompts", flush=True)
            sets[name] = []
            for prompt in prompts:
                p = run_prompt(a, prompt)
                p["llama_s"] = llama_cpp_prompt(a, L, p) if L else None
                sets[name].append(p)
    finally:
        if L:
            L.close()
    print(f"\nload average at end: {' '.join(loadavg())}")
    print(f"\n== single-stream decode tok/s, {os.path.basename(a.model)}, {a.threads} threads, "
          f"greedy, up to {a.gen} tokens, medians of {a.repeat}")
    hdr = f"{'set':<9} {'parley off':>11} {'parley on':>10} {'on/off':>7} {'accept':>7} " \
          f"{'tok/step':>9} {'llama.cpp':>10}"
    print(hdr)
    print("-" * len(hdr))
    for name, ps in sets.items():
        tok = sum(p["n_gen"] - 1 for p in ps)
        off = tok / sum(p["off_s"] for p in ps)
        on = tok / sum(p["on_s"] for p in ps)
        dr = sum(p["drafted"] for p in ps)
        ac = sum(p["accepted"] for p in ps)
        vs = sum(p["verify_steps"] for p in ps)
        ll = tok / sum(p["llama_s"] for p in ps) if all(p["llama_s"] for p in ps) else None
        print(f"{name:<9} {off:>11.1f} {on:>10.1f} {on / off:>6.2f}x {100 * ac / max(dr, 1):>6.1f}% "
              f"{(ac + vs) / vs if vs else 0:>9.2f} {'-' if ll is None else f'{ll:.1f}':>10}")


if __name__ == "__main__":
    main()
