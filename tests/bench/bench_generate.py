"""bench_generate.py -- single-stream prefill / decode speed of `parley
generate` next to llama.cpp (llama-cpp-python) on the same GGUF.

Not part of the test suite (a benchmark, numbers only).  Usage:

  python tests/bench/bench_generate.py --parley build/consumer/parley \
      --model /tmp/llama-1b.gguf [--model /tmp/cai-1b.gguf] \
      [--prompt 128] [--gen 32] [--threads 2] [--llama-cpp /tmp/llama-1b.gguf]

Both engines get the same pseudo-random prompt ids (parley's
--random-prompt generator is re-implemented here), the same thread count,
greedy decoding of --gen tokens with EOS ignored.  Prefill tok/s = prompt
tokens / time to the first logits; decode tok/s = (gen - 1) / time of the
remaining single-token steps.
"""

import argparse
import re
import subprocess
import time

import numpy as np


def random_prompt(n, n_vocab, seed=0):
    """Same ids as `parley generate --random-prompt n --seed seed`."""
    mask = (1 << 64) - 1
    x = (seed * 0x9E3779B97F4A7C15 + 1) & mask
    out = []
    for _ in range(n):
        x ^= (x << 13) & mask
        x ^= x >> 7
        x ^= (x << 17) & mask
        out.append(x % n_vocab)
    return out


def bench_parley(exe, model, prompt, gen, threads, extra=()):
    cmd = [exe, "generate", model, "--random-prompt", str(prompt), "-n", str(gen),
           "--threads", str(threads), "--ignore-eos", "--quiet", *extra]
    r = subprocess.run(cmd, capture_output=True, text=True, check=True)
    pre = re.search(r"prefill: (\d+) tokens in ([\d.]+) s \(([\d.]+) tok/s\)", r.stderr)
    dec = re.search(r"decode: (\d+) tokens in ([\d.]+) s \(([\d.]+) tok/s\)", r.stderr)
    return float(pre.group(3)), float(dec.group(3))


def bench_llama_cpp(model, prompt, gen, threads):
    import llama_cpp

    llm = llama_cpp.Llama(model_path=model, n_ctx=prompt + gen + 8, n_threads=threads,
                          n_threads_batch=threads, n_batch=512, verbose=False)
    ids = random_prompt(prompt, llm.n_vocab())
    t0 = time.perf_counter()
    llm.eval(ids)
    t1 = time.perf_counter()
    tok = int(np.argmax(llm.scores[llm.n_tokens - 1]))
    for _ in range(gen - 1):
        llm.eval([tok])
        tok = int(np.argmax(llm.scores[llm.n_tokens - 1]))
    t2 = time.perf_counter()
    return prompt / (t1 - t0), (gen - 1) / (t2 - t1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--parley", required=True)
    ap.add_argument("--model", action="append", required=True)
    ap.add_argument("--llama-cpp", help="GGUF to run with llama.cpp too")
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--gen", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    print(f"prompt {a.prompt} tokens, {a.gen} generated, {a.threads} threads")
    for m in a.model:
        p, d = bench_parley(a.parley, m, a.prompt, a.gen, a.threads)
        print(f"parley int8   {m}: prefill {p:7.1f} tok/s  decode {d:6.2f} tok/s")
    if a.llama_cpp:
        p, d = bench_llama_cpp(a.llama_cpp, a.prompt, a.gen, a.threads)
        print(f"llama.cpp     {a.llama_cpp}: prefill {p:7.1f} tok/s  decode {d:6.2f} tok/s")


if __name__ == "__main__":
    main()
