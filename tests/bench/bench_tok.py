#!/usr/bin/env python3
"""Encode throughput: parley's tokenizer vs HF tokenizers on the same 1 MB
of mixed text (code, prose, multilingual, emoji, whitespace runs), for each
vocabulary of tests/tok/tok_data.py.  A benchmark, not a test.

    PARLEY_BUILD=build python tests/bench/bench_tok.py [--mb 1] [--reps 3]

parley: tok_tool bench (one thread, whole text in one eng_tok_count call,
best of REPS).  HF: Tokenizer.encode on the same string (one call, Rust,
TOKENIZERS_PARALLELISM=false), and encode_batch over its lines (HF's own
thread pool) for reference.

With --gguf MODEL.gguf (a real vocabulary, e.g. Gemma 3's 262,144 pieces
from deploy/setup.sh model) the same text is encoded by parley, llama.cpp
(llama-cpp-python, vocab only, one tokenize call) and the tokenizer
transformers builds from the file, and each one's vocabulary load time is
printed too.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tok"))
import tok_data  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=float, default=1.0)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--gguf", help="bench this file's vocabulary against llama.cpp and transformers")
    a = ap.parse_args()
    repo = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    tool = os.path.join(os.environ.get("PARLEY_BUILD", os.path.join(repo, "build")), "tests", "tok", "tok_tool")
    with tempfile.TemporaryDirectory() as d:
        toks = tok_data.build_all(d)
        # valid UTF-8 and no special-token texts (HF would parse those as
        # control tokens; parley's plain encode keeps them text)
        specials = [t.encode() for t in tok_data.BPE_SPECIALS + tok_data.SPM_SPECIALS]
        lines = [ln for ln in tok_data.held_out_lines()
                 if ln == ln.decode("utf-8", "replace").encode() and not any(t in ln for t in specials)]
        text = b""
        while len(text) < a.mb * 1e6:
            text += b"\n".join(lines) + b"\n"
        text = text[: int(a.mb * 1e6)].decode("utf-8", "ignore").encode()
        path = os.path.join(d, "text.txt")
        with open(path, "wb") as f:
            f.write(text)
        s = text.decode()
        print("text: %d bytes, %d characters" % (len(text), len(s)))
        if a.gguf:
            return bench_gguf(tool, a.gguf, path, s, a.reps)
        print("%-11s %9s %14s %14s %16s" % ("vocab", "tokens", "parley tok/s", "HF tok/s", "HF batch tok/s"))
        for name, (gg, hf) in toks.items():
            out = subprocess.run([tool, "bench", gg, path, str(a.reps)], capture_output=True, text=True,
                                 check=True).stdout.split()
            p_tokens, p_rate = int(out[3]), float(out[7])
            best = 1e9
            for _ in range(a.reps):
                t = time.perf_counter()
                n = len(hf.encode(s).ids)
                best = min(best, time.perf_counter() - t)
            parts = s.split("\n")
            t = time.perf_counter()
            nb = sum(len(e.ids) for e in hf.encode_batch(parts))
            tb = time.perf_counter() - t
            flag = "" if n == p_tokens else "  (token counts differ: %d vs %d)" % (p_tokens, n)
            print("%-11s %9d %14.0f %14.0f %16.0f%s" % (name, p_tokens, p_rate, n / best, nb / tb, flag))


def bench_gguf(tool, gg, path, s, reps):
    out = subprocess.run([tool, "bench", gg, path, str(reps)], capture_output=True, text=True,
                         check=True).stdout.split()
    rows = [("parley", int(out[3]), float(out[7]), float(out[9]))]
    import llama_cpp
    t = time.perf_counter()
    llm = llama_cpp.Llama(model_path=gg, vocab_only=True, verbose=False)
    load = time.perf_counter() - t
    best = 1e9
    for _ in range(reps):
        t = time.perf_counter()
        n = len(llm.tokenize(s.encode(), add_bos=False, special=False))
        best = min(best, time.perf_counter() - t)
    rows.append(("llama.cpp", n, n / best, load))
    from transformers import AutoTokenizer
    t = time.perf_counter()
    hf = AutoTokenizer.from_pretrained(os.path.dirname(os.path.abspath(gg)), gguf_file=os.path.basename(gg))
    load = time.perf_counter() - t
    best = 1e9
    for _ in range(reps):
        t = time.perf_counter()
        n = len(hf.encode(s, add_special_tokens=False))
        best = min(best, time.perf_counter() - t)
    rows.append(("transformers", n, n / best, load))
    print("%-13s %9s %14s %14s" % ("tokenizer", "tokens", "tok/s", "vocab load s"))
    for name, n, rate, load in rows:
        print("%-13s %9d %14.0f %14.3f" % (name, n, rate, load))


if __name__ == "__main__":
    main()
