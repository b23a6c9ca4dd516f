"""q8_0_error.py -- for Q8_0 weights, measure the two ways the int8 engine
can hold them: requantised to one scale per output channel, or keeping the
file's 32-value block scales (the int8 values are then used unchanged).

Two measurements on the same weights:
  1. file-relative: error of each option vs the Q8_0 values the file holds
     (the model as published);
  2. source-relative: start from float weights W (a tensor of the GGUF
     dequantised, or Gaussian if --gaussian), quantise them to Q8_0 as
     llama.cpp does (d = amax/127 per 32, q = round(x/d)), and compare
     each option and a direct per-channel quantisation of W against W.
Errors are reported for the weights (RMS error / RMS weight) and for a
GEMM output with per-token int8 activations (random Gaussian rows, and the
same with 4 outlier channels x20), relative to the float GEMM.

Usage: python tests/bench/q8_0_error.py MODEL.gguf [--tensors 4]
"""

import argparse

import numpy as np

import gguf


def q8_0(w):
    b = w.reshape(w.shape[0], -1, 32)
    d = np.abs(b).max(-1, keepdims=True) / 127.0
    d = d.astype(np.float16).astype(np.float32)  # the file stores d as f16
    q = np.round(np.divide(b, d, out=np.zeros_like(b), where=d > 0))
    return (q * d).reshape(w.shape)


def per_channel(w):
    s = np.abs(w).max(1, keepdims=True) / 127.0
    return np.round(np.divide(w, s, out=np.zeros_like(w), where=s > 0)) * s


def act_quant(x):
    s = np.abs(x).max(1, keepdims=True) / 127.0
    return np.round(x / s) * s


def rel(a, b):
    return float(np.sqrt(np.mean((a - b) ** 2)) / np.sqrt(np.mean(b ** 2)))


def report(label, ref, variants, x):
    xq = act_quant(x)
    y = x @ ref.T
    parts = []
    for name, w in variants.items():
        parts.append(f"{name}: weights {rel(w, ref):.3%}, gemm {rel(xq @ w.T, y):.3%}")
    print(f"  {label}: " + "; ".join(parts))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--tensors", type=int, default=4)
    a = ap.parse_args()
    r = gguf.GGUFReader(a.model)
    rng = np.random.default_rng(0)
    picked = [t for t in r.tensors if t.tensor_type == gguf.GGMLQuantizationType.Q8_0
              and t.name.startswith("blk.")][: a.tensors]
    for t in picked:
        w = gguf.dequantize(t.data, t.tensor_type).astype(np.float32).reshape(-1, int(t.shape[0]))
        w = w[:1024]  # rows: enough for the statistics, fast
        xg = rng.standard_normal((64, w.shape[1])).astype(np.float32)
        xo = xg.copy()
        xo[:, :4] *= 20  # outlier channels, as real activations have
        print(f"{t.name} {w.shape}")
        q = q8_0(w)  # treat the dequantised values as a float source
        for label, x in (("gaussian activations", xg), ("activations with outliers", xo)):
            print(f" {label}")
            report("vs file Q8_0", w, {"keep block scales": w, "requant per channel": per_channel(w)}, x)
            report("vs float source", w, {"Q8_0 block scales": q, "Q8_0 -> per channel": per_channel(q),
                                          "direct per channel": per_channel(w)}, x)


if __name__ == "__main__":
    main()
