"""q_block_error.py -- for block-format weights other than Q8_0 (Q4_0 ...
Q6_K, IQ4_*), measure the two int8 forms the engine could hold, against the
float values the file encodes (gguf.quants.dequantize, which parley's
eng_gguf_row_to_f32 matches bit for bit):
  * per channel: s_r = max|w_r| / 127, q = round(w / s_r)
  * block 32:    d_b = fp16(max|w_b| / 127) per 32 values (the packer keeps
                 fp16 block scales), q = clamp(round(w / d_b), -127, 127)
  * engine: what engine/model/model.c does -- Q4_0 / Q5_0 / IQ4_NL keep the
    file's codes and fp16 scales (exact: d * small integer), the others
    block 32.
Errors, aggregated over every non-Q8_0 linear weight of the model (all rows;
Q8_0 tensors are kept as is either way), as RMS error / RMS reference:
  * weights;
  * the W8A8 GEMM output (activations per-token int8, as the engine does),
    relative to the float GEMM with the float weights, for three activation
    sets: Gaussian; Gaussian with 4 outlier channels x20; and, for weights
    reading the residual stream (attn_q/k/v, ffn_gate/up), "normed
    embeddings": RMS-normed rows of token_embd (x sqrt(n_embd)) for random
    tokens, times that layer's norm weight -- the layer-0 input
    distribution.

Usage: python tests/bench/q_block_error.py MODEL.gguf [--tokens 32]
"""

import argparse
from collections import defaultdict

import numpy as np

import gguf

QT = gguf.GGMLQuantizationType


def per_channel(w):
    s = np.abs(w).max(1, keepdims=True) / 127.0
    return np.round(np.divide(w, s, out=np.zeros_like(w), where=s > 0)) * s


def block32(w):
    b = w.reshape(w.shape[0], -1, 32)
    d = (np.abs(b).max(-1, keepdims=True) / np.float32(127.0)).astype(np.float16).astype(np.float32)
    q = np.clip(np.round(np.divide(b, d, out=np.zeros_like(b), where=d > 0)), -127, 127)
    return (q * d).reshape(w.shape)


def act_quant(x):
    s = np.abs(x).max(1, keepdims=True) / 127.0
    return np.round(x / s) * s


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--tokens", type=int, default=32)
    a = ap.parse_args()
    r = gguf.GGUFReader(a.model)
    ts = {t.name: t for t in r.tensors}
    rng = np.random.default_rng(0)

    def deq(t):
        return gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32).reshape(-1, int(t.shape[0]))

    embd = ts["token_embd.weight"]
    E = int(embd.shape[0])
    tok = rng.integers(1000, int(embd.shape[1]), size=a.tokens)
    er = gguf.quants.dequantize(embd.data[tok], embd.tensor_type).astype(np.float32).reshape(a.tokens, E)
    er = er * np.sqrt(E)  # gemma scales the embedding by sqrt(n_embd)
    normed = er / np.sqrt(np.mean(er ** 2, 1, keepdims=True) + 1e-6)

    # acc[(set, form)] = [sum sq err, sum sq ref]; per type too
    acc = defaultdict(lambda: [0.0, 0.0])
    n_w = defaultdict(int)
    for name, t in ts.items():
        if len(t.shape) < 2 or not name.startswith("blk.") or t.tensor_type in (QT.F32, QT.F16, QT.Q8_0):
            continue
        w = deq(t)
        K = w.shape[1]
        typ = t.tensor_type.name
        n_w[typ] += w.size
        exact = t.tensor_type in (QT.Q4_0, QT.Q5_0, QT.IQ4_NL)
        forms = {"per-channel": per_channel(w), "block-32": block32(w)}
        forms["engine"] = w if exact else forms["block-32"]
        xg = rng.standard_normal((a.tokens, K)).astype(np.float32)
        xo = xg.copy()
        xo[:, :4] *= 20
        sets = {"gaussian": xg, "outliers": xo}
        kind = name.split(".")[2]
        if K == E and kind in ("attn_q", "attn_k", "attn_v", "ffn_gate", "ffn_up"):
            blk = name.split(".")[1]
            nw = ts[f"blk.{blk}.{'attn_norm' if kind.startswith('attn') else 'ffn_norm'}.weight"]
            g = gguf.quants.dequantize(nw.data, nw.tensor_type).astype(np.float32).ravel()
            sets["normed-embd"] = normed * g  # llama.cpp stores gemma norms with the +1 folded in
        for fname, wq in forms.items():
            for key in (("weights", fname, "all"), ("weights", fname, typ)):
                acc[key][0] += float(np.sum((wq - w) ** 2))
                acc[key][1] += float(np.sum(w ** 2))
            for sname, x in sets.items():
                y = x @ w.T
                yq = act_quant(x) @ wq.T
                for key in (("gemm " + sname, fname, "all"), ("gemm " + sname, fname, typ)):
                    acc[key][0] += float(np.sum((yq - y) ** 2))
                    acc[key][1] += float(np.sum(y ** 2))
    print(f"model {a.model}: non-Q8_0 linear weights " +
          ", ".join(f"{k} {v / 1e6:.1f}M" for k, v in sorted(n_w.items())) + f"; {a.tokens} tokens")
    measures = sorted({k[0] for k in acc})
    groups = ["all"] + sorted(n_w)
    for m in measures:
        for gname in groups:
            cells = []
            for fname in ("per-channel", "block-32", "engine"):
                e, ref = acc[(m, fname, gname)]
                if ref:
                    cells.append(f"{fname} {np.sqrt(e / ref):.3%}")
            if cells:
                print(f"  {m:18s} {gname:6s} " + "  ".join(cells))


if __name__ == "__main__":
    main()
