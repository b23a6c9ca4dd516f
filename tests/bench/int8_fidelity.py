#!/usr/bin/env python3
"""int8 path vs the fp32 reference on real text, next to llama.cpp: a report.

    PARLEY_BUILD=build python tests/bench/int8_fidelity.py [MODEL.gguf] [--seqs 8] [--len 512]

Text: the licence texts under /usr/share/common-licenses (English prose that
is on every Debian machine), tokenised by llama.cpp, cut into SEQS
sequences of BOS + LEN-1 tokens, teacher-forced.  The fp32 reference is
parley's fp32 path (tests/py/test_real_model.py checks it against
transformers within 1e-4).  On the same positions it compares:

  parley int8                 (tests/model/eng_logits, default path: 4-bit
                               tensors kept as the file has them, W4A8)
  parley int8, int8 weights   (--weights int8: Q4_K requantised to int8)
  llama.cpp on the file       (llama-cpp-python, logits_all, the file's own
                               q4_K/q5_0/q6_K/q8_0 kernels)

against the reference: top-1 agreement, mean KL(ref || x) in nats over the
full vocabulary, and each one's perplexity on the next token.  The model
defaults to $PARLEY_GEMMA_MODEL (deploy/setup.sh model).
"""
import argparse
import glob
import os
import subprocess
import sys
import tempfile

import numpy as np

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def licence_text():
    out = []
    for p in sorted(glob.glob("/usr/share/common-licenses/*")):
        if os.path.isfile(p) and not os.path.islink(p):
            out.append(open(p, encoding="utf-8", errors="replace").read())
    return "\n\n".join(out)


def log_softmax(x):
    x = x.astype(np.float64)
    m = x.max(axis=1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=1, keepdims=True))


class Stats:
    def __init__(self):
        self.top1 = self.kl = self.nll = 0.0
        self.n = 0

    def add(self, ref_lp, lp, targets):
        self.top1 += float((ref_lp.argmax(1) == lp.argmax(1)).sum())
        self.kl += float((np.exp(ref_lp) * (ref_lp - lp)).sum())
        self.nll += float(-lp[np.arange(len(targets)), targets].sum())
        self.n += len(targets)

    def row(self):
        return self.top1 / self.n, self.kl / self.n, float(np.exp(self.nll / self.n))


def parley_logits(exe, model, ids, tmp, fp32, extra=()):
    ids_f, out_f = os.path.join(tmp, "ids.bin"), os.path.join(tmp, "out.bin")
    np.asarray(ids, np.int32).tofile(ids_f)
    r = subprocess.run([exe, model, ids_f, out_f] + (["--fp32"] if fp32 else []) + list(extra),
                       capture_output=True, text=True, timeout=1800)
    if r.returncode:
        sys.exit("eng_logits failed: " + r.stderr)
    out = np.fromfile(out_f, np.float32).reshape(len(ids), -1)
    os.unlink(out_f)
    return out


def measure(model, seqs, length, build):
    """{name: (top1, kl, ppl)} plus the number of scored positions."""
    import llama_cpp

    exe = os.path.join(build, "tests", "model", "eng_logits")
    llm = llama_cpp.Llama(model_path=model, n_ctx=length, logits_all=True, n_threads=os.cpu_count(),
                          n_batch=length, verbose=False)
    toks = llm.tokenize(licence_text().encode(), add_bos=False)
    need = seqs * (length - 1)
    if len(toks) < need:
        sys.exit("only %d tokens of licence text, need %d" % (len(toks), need))
    st = {"parley int8": Stats(), "int8 weights": Stats(), "llama.cpp": Stats(),
          "parley fp32": Stats()}
    with tempfile.TemporaryDirectory() as tmp:
        for s in range(seqs):
            ids = [llm.token_bos()] + toks[s * (length - 1):(s + 1) * (length - 1)]
            targets = np.asarray(ids[1:])
            ref = log_softmax(parley_logits(exe, model, ids, tmp, True)[:-1])
            i8 = log_softmax(parley_logits(exe, model, ids, tmp, False)[:-1])
            i8w = log_softmax(parley_logits(exe, model, ids, tmp, False, ["--weights", "int8"])[:-1])
            llm.reset()
            llm.eval(ids)
            lc = log_softmax(np.asarray(llm.scores[:len(ids)], np.float32)[:-1])
            st["parley fp32"].add(ref, ref, targets)
            st["parley int8"].add(ref, i8, targets)
            st["int8 weights"].add(ref, i8w, targets)
            st["llama.cpp"].add(ref, lc, targets)
    return {k: v.row() for k, v in st.items()}, st["parley int8"].n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model", nargs="?", default=os.environ.get("PARLEY_GEMMA_MODEL"))
    ap.add_argument("--seqs", type=int, default=8)
    ap.add_argument("--len", type=int, default=512)
    a = ap.parse_args()
    if not a.model or not os.path.isfile(a.model):
        sys.exit("no model: pass MODEL.gguf or run deploy/setup.sh model")
    rows, n = measure(a.model, a.seqs, a.len, os.environ.get("PARLEY_BUILD", os.path.join(REPO, "build")))
    print("%s: %d teacher-forced positions (%d x %d), reference = parley fp32" % (
        os.path.basename(a.model), n, a.seqs, a.len))
    print("%-12s %10s %14s %10s" % ("engine", "top-1", "mean KL nats", "ppl"))
    for k, (t, kl, ppl) in rows.items():
        print("%-12s %9.2f%% %14.6f %10.3f" % (k, 100 * t, kl, ppl))


if __name__ == "__main__":
    main()
