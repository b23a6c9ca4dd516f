#!/usr/bin/env python3
"""Where an int8 path's error comes from, simulated in transformers: a report.

    $PARLEY_PY tests/bench/int8_breakdown.py [MODEL.gguf] [--len 512]

Loads MODEL (default $PARLEY_SMOLLM_MODEL) with transformers (gguf_file=,
dequantised to fp32: the reference), then rounds one thing at a time the
way parley's int8 path does and reports mean KL(ref || x) in nats and
top-1 agreement over LEN teacher-forced tokens of the GPL-3 text
(tokenised by llama.cpp, no BOS):

  activations   every Linear's input, int8 per block of 32 values
                (kern_gemm.h's block-scaled activations; llama.cpp's Q8_1
                rounds the same way)
  weights       every layer Linear's weight, int8 per block of 32 input
                values (what model_load.c does to Q4_1/Q5_1/K-quants that
                it does not keep 4-bit; not the output table)
  K             k_proj's output, int8 per block of 32 (eng_kv.h; rounded
                here before RoPE, the cache rounds after: an approximation)
  V             v_proj's output, int8 with one scale per head row
  all           the four together

A simulation, not parley: tests/bench/int8_fidelity.py measures the
engine itself.  The sum of the parts need not equal "all".
"""
import argparse
import os

import numpy as np
import torch
import transformers


def q32(x, group=32):
    """Round to int8 with one scale per `group` consecutive last-axis values."""
    sh = x.shape
    y = x.reshape(*sh[:-1], sh[-1] // group, group)
    s = y.abs().amax(-1, keepdim=True).clamp_min(1e-30) / 127
    return (torch.round(y / s).clamp(-127, 127) * s).reshape(sh)


def measure(hf, ids, ref, act=False, weights=False, k=False, v=False):
    hooks, saved = [], {}
    head = hf.config.hidden_size // hf.config.num_attention_heads
    for name, mod in hf.named_modules():
        if not isinstance(mod, torch.nn.Linear):
            continue
        if act:
            hooks.append(mod.register_forward_pre_hook(lambda m, a: (q32(a[0]),)))
        if k and name.endswith("k_proj"):
            hooks.append(mod.register_forward_hook(lambda m, a, o: q32(o)))
        if v and name.endswith("v_proj"):
            hooks.append(mod.register_forward_hook(lambda m, a, o: q32(o, head)))
        if weights and "lm_head" not in name:
            saved[name] = mod.weight.data
            mod.weight.data = q32(mod.weight.data)
    try:
        with torch.no_grad():
            lp = torch.log_softmax(hf(ids).logits[0].float(), -1)
    finally:
        for h in hooks:
            h.remove()
        for name, mod in hf.named_modules():
            if name in saved:
                mod.weight.data = saved[name]
    kl = (ref.exp() * (ref - lp)).sum(-1).mean().item()
    top1 = (lp.argmax(-1) == ref.argmax(-1)).float().mean().item()
    return top1, kl


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", nargs="?", default=os.environ.get("PARLEY_SMOLLM_MODEL"))
    ap.add_argument("--len", type=int, default=512)
    a = ap.parse_args()
    if not a.model:
        ap.error("no model (give MODEL.gguf or set PARLEY_SMOLLM_MODEL)")
    import llama_cpp

    tok = llama_cpp.Llama(model_path=a.model, vocab_only=True, verbose=False)
    text = open("/usr/share/common-licenses/GPL-3", encoding="utf-8").read()
    ids = torch.tensor([tok.tokenize(text.encode(), add_bos=False)[:a.len]])
    hf = transformers.AutoModelForCausalLM.from_pretrained(
        os.path.dirname(os.path.abspath(a.model)), gguf_file=os.path.basename(a.model),
        dtype=torch.float32).eval()
    with torch.no_grad():
        ref = torch.log_softmax(hf(ids).logits[0].float(), -1)
    print(f"{os.path.basename(a.model)}: {ids.shape[1]} teacher-forced positions, reference = transformers fp32")
    print(f"{'rounded':<14} {'top-1':>8} {'mean KL nats':>14}")
    for label, kw in [("activations", dict(act=True)), ("weights", dict(weights=True)), ("K", dict(k=True)),
                      ("V", dict(v=True)), ("all", dict(act=True, weights=True, k=True, v=True))]:
        top1, kl = measure(hf, ids, ref, **kw)
        print(f"{label:<14} {top1:>8.2%} {kl:>14.6f}")


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
