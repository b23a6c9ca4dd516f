"""hf2gguf.py -- tiny Hugging Face models to GGUF, as llama.cpp's converter does.

Reusable by any test that needs a real model file the engine, llama.cpp and
transformers can all run:

  build_llama(n_kv_heads, ...)   random-init LlamaForCausalLM (no download),
                                 optionally with rope_scaling (linear, llama3)
  build_qwen2(...)               random-init Qwen2ForCausalLM (Q/K/V biases)
  build_qwen3(...)               random-init Qwen3ForCausalLM (Q/K norms,
                                 head_dim != hidden / heads)
  build_gemma3(...)              random-init Gemma3ForCausalLM (text only)
  convert(model, path)           write the model as an F32 (or F16) GGUF
  gguf_tensors(model)            what convert writes, to edit before write_gguf
  write_gguf(path, arch, hp, tensors, ...)  write GGUF from numpy arrays

Conversion follows llama.cpp's convert_hf_to_gguf.py:
  * tensor names: model.embed_tokens -> token_embd, layers.N.self_attn.q_proj
    -> blk.N.attn_q, k/v/o_proj -> attn_k/attn_v/attn_output, mlp.gate/up/
    down_proj -> ffn_gate/ffn_up/ffn_down, input_layernorm -> attn_norm,
    post_attention_layernorm -> ffn_norm (llama) / post_attention_norm
    (gemma3), gemma3 pre_feedforward_layernorm -> ffn_norm,
    post_feedforward_layernorm -> post_ffw_norm, q_norm/k_norm ->
    attn_q_norm/attn_k_norm, model.norm -> output_norm, lm_head -> output;
  * llama: Q and K rows permuted (LlamaModel.permute) so the rotary pairs
    become adjacent (llama.cpp's NORM rope);
  * qwen2 / qwen3: no permutation (llama.cpp runs them with NEOX rope);
    qwen2's q/k/v_proj.bias -> blk.N.attn_q/attn_k/attn_v.bias, qwen3's
    q_norm/k_norm -> attn_q_norm/attn_k_norm stored as they are (x * w);
  * rope scaling: "linear" -> <arch>.rope.scaling.type = linear and
    rope.scaling.factor (gemma3: the global layers' parameters, as
    Gemma3Model writes them); "yarn" (llama, qwen2, qwen3) -> type yarn,
    factor, rope.scaling.original_context_length and, when given,
    yarn_beta_fast / yarn_beta_slow (attention_factor / mscale are not
    converted: ValueError); llama "llama3" (LlamaModel) -> the tensor rope_freqs.weight
    (head_dim / 2 floats: 1 for wavelengths below original / high_freq_factor,
    factor above original / low_freq_factor, 1 / ((1 - s) / factor + s) in
    between, LlamaModel.generate_extra_tensors) and no scaling keys.  One
    difference: llama.cpp's converter reads original_max_position_embeddings
    from the top level of config.json (default 8192, which is what Llama 3.1
    has), transformers from rope_scaling; here it comes from the rope
    parameters, so small test values reach the file;
  * gemma3: every *norm.weight stored as 1 + w (Gemma3Model.modify_tensors);
  * a minimal SentencePiece ("llama") vocabulary of n_vocab entries
    (<unk>, <s>, </s>, the 256 byte tokens, then filler pieces), because
    llama.cpp refuses a model without a vocab.

Weights are re-initialised with a fixed seed at scales that give logits of
order 1-10 (the default 0.02 init makes every logit nearly equal, so greedy
decoding and top-1 comparisons would be decided by rounding noise).
"""

from __future__ import annotations

import numpy as np

import gguf


def _reinit(model, seed: int, gemma: bool) -> None:
    import torch

    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                base = 0.0 if gemma else 1.0
                p.copy_(base + 0.1 * torch.randn(p.shape, generator=g))
            elif name.endswith(".bias"):
                # qwen2's Q/K/V biases: sizeable, so that a bias the engine
                # dropped would show
                p.copy_(0.5 * torch.randn(p.shape, generator=g))
            elif "embed_tokens" in name:
                # gemma3 multiplies embeddings by sqrt(hidden) and ties the
                # output: unit-size rows would make every token predict itself
                # (so would any tied output, e.g. qwen2's)
                small = gemma or model.config.tie_word_embeddings
                std = 1.0 / np.sqrt(p.shape[-1]) if small else 1.0
                p.copy_(std * torch.randn(p.shape, generator=g))
            else:
                p.copy_(torch.randn(p.shape, generator=g) / np.sqrt(p.shape[-1]))


def build_llama(n_kv_heads: int, *, seed: int = 0, vocab: int = 320, hidden: int = 64,
                layers: int = 3, heads: int = 4, ff: int = 128, tied: bool = False,
                rope_theta: float = 10000.0, rope_scaling: dict | None = None,
                attention_bias: bool = False):
    """attention_bias: q/k/v/o_proj biases (transformers' Llama has all four).
    rope_scaling: None, or transformers' rope parameters without the
    theta, e.g. {"rope_type": "linear", "factor": 4.0} or {"rope_type":
    "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor":
    4.0, "original_max_position_embeddings": 32}."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    rope = {"rope_type": "default", **(rope_scaling or {}), "rope_theta": rope_theta}
    cfg = LlamaConfig(vocab_size=vocab, hidden_size=hidden, intermediate_size=ff,
                      num_hidden_layers=layers, num_attention_heads=heads,
                      num_key_value_heads=n_kv_heads, head_dim=hidden // heads,
                      max_position_embeddings=512, rms_norm_eps=1e-5, rope_parameters=rope,
                      tie_word_embeddings=tied, attention_bias=attention_bias, mlp_bias=False,
                      bos_token_id=1, eos_token_id=2, attn_implementation="eager")
    torch.manual_seed(seed)
    model = LlamaForCausalLM(cfg).float().eval()
    _reinit(model, seed, gemma=False)
    return model


def _max_pos(rope_scaling: dict | None) -> int:
    """max_position_embeddings: 512, or for YaRN factor x original (what
    transformers expects the two to satisfy)."""
    if rope_scaling and rope_scaling.get("rope_type") == "yarn":
        return int(rope_scaling["factor"] * rope_scaling["original_max_position_embeddings"])
    return 512


def build_qwen2(*, seed: int = 0, vocab: int = 320, hidden: int = 64, layers: int = 3,
                heads: int = 4, kv_heads: int = 2, ff: int = 128, tied: bool = True,
                rope_theta: float = 10000.0, rope_scaling: dict | None = None):
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    cfg = Qwen2Config(vocab_size=vocab, hidden_size=hidden, intermediate_size=ff,
                      num_hidden_layers=layers, num_attention_heads=heads,
                      num_key_value_heads=kv_heads,
                      max_position_embeddings=_max_pos(rope_scaling),
                      rms_norm_eps=1e-6, rope_parameters={"rope_type": "default",
                                                          **(rope_scaling or {}),
                                                          "rope_theta": rope_theta},
                      use_sliding_window=False, tie_word_embeddings=tied,
                      bos_token_id=1, eos_token_id=2, attn_implementation="eager")
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(cfg).float().eval()
    _reinit(model, seed, gemma=False)
    return model


def build_qwen3(*, seed: int = 0, vocab: int = 320, hidden: int = 64, layers: int = 3,
                heads: int = 4, kv_heads: int = 1, head_dim: int = 32, ff: int = 128,
                tied: bool = False, rope_theta: float = 10000.0,
                rope_scaling: dict | None = None):
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    cfg = Qwen3Config(vocab_size=vocab, hidden_size=hidden, intermediate_size=ff,
                      num_hidden_layers=layers, num_attention_heads=heads,
                      num_key_value_heads=kv_heads, head_dim=head_dim,
                      max_position_embeddings=_max_pos(rope_scaling), rms_norm_eps=1e-6,
                      rope_parameters={"rope_type": "default", **(rope_scaling or {}),
                                       "rope_theta": rope_theta},
                      attention_bias=False, use_sliding_window=False, tie_word_embeddings=tied,
                      bos_token_id=1, eos_token_id=2, attn_implementation="eager")
    torch.manual_seed(seed)
    model = Qwen3ForCausalLM(cfg).float().eval()
    _reinit(model, seed, gemma=False)
    return model


def build_gemma3(*, seed: int = 0, vocab: int = 320, hidden: int = 64, layers: int = 6,
                 heads: int = 4, kv_heads: int = 1, head_dim: int = 16, ff: int = 128,
                 sliding_window: int = 8, rope_scaling: dict | None = None):
    """rope_scaling: None or {"rope_type": "linear", "factor": f}, applied to
    the global layers only (as transformers and llama.cpp do for gemma3)."""
    import torch
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    rope = {} if rope_scaling is None else {"rope_parameters": {
        "full_attention": {**rope_scaling, "rope_theta": 1000000.0},
        "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}}
    cfg = Gemma3TextConfig(**rope, vocab_size=vocab, hidden_size=hidden, intermediate_size=ff,
                           num_hidden_layers=layers, num_attention_heads=heads,
                           num_key_value_heads=kv_heads, head_dim=head_dim,
                           query_pre_attn_scalar=head_dim, sliding_window=sliding_window,
                           max_position_embeddings=512, rms_norm_eps=1e-6,
                           rope_theta=1000000.0, rope_local_base_freq=10000.0,
                           final_logit_softcapping=None, attn_logit_softcapping=None,
                           hidden_activation="gelu_pytorch_tanh", tie_word_embeddings=True,
                           bos_token_id=2, eos_token_id=1, pad_token_id=0,
                           attn_implementation="eager")
    torch.manual_seed(seed)
    model = Gemma3ForCausalLM(cfg).float().eval()
    _reinit(model, seed, gemma=True)
    return model


def permute_qk(w: np.ndarray, n_head: int, n_head_kv: int | None) -> np.ndarray:
    """llama.cpp's LlamaModel.permute: HF rotate-half rows -> adjacent pairs."""
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return (w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


def spm_vocab(n_vocab: int):
    """<unk>, <s>, </s>, <0x00>..<0xFF>, then filler pieces."""
    assert n_vocab >= 259 + 1
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{i:02X}>" for i in range(256)]
    types = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL] + \
            [gguf.TokenType.BYTE] * 256
    letters = "abcdefghijklmnopqrstuvwxyz"
    i = 0
    while len(tokens) < n_vocab:
        a, b = letters[i % 26], letters[(i // 26) % 26]
        tokens.append("\u2581" + a + b + (str(i // 676) if i >= 676 else ""))
        types.append(gguf.TokenType.NORMAL)
        i += 1
    scores = [0.0] * 3 + [-1000.0] * 256 + [-float(k) for k in range(n_vocab - 259)]
    return tokens, scores, types


def write_gguf(path, arch: str, hp: dict, tensors: dict, *, ext_window=None, ext_kv_src=None,
               vocab: bool = True, ftype: str = "f32", extra=None) -> None:
    """Write a GGUF: hp has n_vocab, n_embd, n_layer, n_head, n_head_kv, head_dim,
    n_ff, eps, rope_base (+ sliding_window for gemma3; optional
    rope_scaling_type / rope_scaling_factor); tensors maps GGUF names to
    numpy arrays in PyTorch orientation ([out][in]); extra(writer) adds keys."""
    w = gguf.GGUFWriter(str(path), arch)
    w.add_context_length(512)
    w.add_embedding_length(hp["n_embd"])
    w.add_block_count(hp["n_layer"])
    w.add_feed_forward_length(hp["n_ff"])
    w.add_head_count(hp["n_head"])
    w.add_head_count_kv(hp["n_head_kv"])
    w.add_key_length(hp["head_dim"])
    w.add_value_length(hp["head_dim"])
    w.add_rope_dimension_count(hp["head_dim"])
    w.add_layer_norm_rms_eps(hp["eps"])
    w.add_rope_freq_base(hp["rope_base"])
    w.add_vocab_size(hp["n_vocab"])
    if arch == "gemma3":
        w.add_sliding_window(hp["sliding_window"])
    if hp.get("rope_scaling_type"):
        w.add_rope_scaling_type(hp["rope_scaling_type"])
        w.add_rope_scaling_factor(hp["rope_scaling_factor"])
    if "rope_yarn_orig_ctx" in hp:
        w.add_rope_scaling_orig_ctx_len(hp["rope_yarn_orig_ctx"])
    if "rope_yarn_beta_fast" in hp:
        w.add_rope_scaling_yarn_beta_fast(hp["rope_yarn_beta_fast"])
    if "rope_yarn_beta_slow" in hp:
        w.add_rope_scaling_yarn_beta_slow(hp["rope_yarn_beta_slow"])
    if extra is not None:
        extra(w)
    w.add_file_type(gguf.LlamaFileType.ALL_F32 if ftype == "f32" else gguf.LlamaFileType.MOSTLY_F16)
    if ext_window is not None:
        w.add_array(f"{arch}.attention.layer_window", [int(x) for x in ext_window])
    if ext_kv_src is not None:
        w.add_array(f"{arch}.attention.layer_kv_source", [int(x) for x in ext_kv_src])
    if vocab:
        tokens, scores, types = spm_vocab(hp["n_vocab"])
        w.add_tokenizer_model("llama")
        w.add_token_list(tokens)
        w.add_token_scores(scores)
        w.add_token_types(types)
        w.add_unk_token_id(0)
        w.add_bos_token_id(1)
        w.add_eos_token_id(2)
        w.add_add_bos_token(False)
    for name, arr in tensors.items():
        a = np.ascontiguousarray(arr, dtype=np.float32)
        if ftype == "f16" and a.ndim == 2:
            a = a.astype(np.float16)
        w.add_tensor(name, a)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def llama3_rope_factors(rp: dict, head_dim: int) -> np.ndarray:
    """rope_freqs.weight for transformers' "llama3" rope parameters, as
    llama.cpp's LlamaModel.generate_extra_tensors computes it."""
    import math

    import torch

    base = rp["rope_theta"]
    freqs = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
    factor, lo, hi = rp["factor"], rp.get("low_freq_factor", 1.0), rp.get("high_freq_factor", 4.0)
    old = rp.get("original_max_position_embeddings", 8192)
    lo_wl, hi_wl = old / lo, old / hi
    out = []
    for f in freqs.tolist():
        wl = 2 * math.pi / f
        if wl < hi_wl:
            out.append(1.0)
        elif wl > lo_wl:
            out.append(factor)
        else:
            smooth = (old / wl - lo) / (hi - lo)
            out.append(1 / ((1 - smooth) / factor + smooth))
    return np.asarray(out, np.float32)


def hparams(model) -> tuple[str, dict]:
    c = model.config
    arch = next((a for a in ("gemma3", "qwen2", "qwen3") if a == c.model_type or
                 (a == "gemma3" and "gemma3" in c.model_type)), "llama")
    hp = dict(n_vocab=c.vocab_size, n_embd=c.hidden_size, n_layer=c.num_hidden_layers,
              n_head=c.num_attention_heads, n_head_kv=c.num_key_value_heads,
              head_dim=getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads,
              n_ff=c.intermediate_size, eps=c.rms_norm_eps)
    if arch == "gemma3":
        rp = c.rope_parameters["full_attention"]
        hp["rope_base"] = rp["rope_theta"]
        hp["sliding_window"] = c.sliding_window
    else:
        rp = getattr(c, "rope_parameters", None) or {}
        hp["rope_base"] = rp.get("rope_theta", getattr(c, "rope_theta", 10000.0))
    # rope scaling (gemma3: of the global layers)
    rt = rp.get("rope_type", "default")
    if rt == "linear":
        hp["rope_scaling_type"] = gguf.RopeScalingType.LINEAR
        hp["rope_scaling_factor"] = float(rp["factor"])
    elif rt == "llama3" and arch == "llama":
        hp["rope_freqs"] = llama3_rope_factors(rp, hp["head_dim"])
    elif rt == "yarn" and arch != "gemma3":
        unconverted = {"attention_factor", "mscale", "mscale_all_dim", "partial_rotary_factor"}
        if unconverted & set(rp) or rp.get("truncate", True) is not True:
            raise ValueError(f"hf2gguf: YaRN parameters {sorted(rp)} are not converted here")
        hp["rope_scaling_type"] = gguf.RopeScalingType.YARN
        hp["rope_scaling_factor"] = float(rp["factor"])
        hp["rope_yarn_orig_ctx"] = int(rp["original_max_position_embeddings"])
        for k in ("beta_fast", "beta_slow"):
            if rp.get(k):
                hp[f"rope_yarn_{k}"] = float(rp[k])
    elif rt != "default":
        raise ValueError(f"hf2gguf: rope_type {rt!r} on {arch} is not converted here")
    return arch, hp


def convert(model, path, ftype: str = "f32") -> tuple[str, dict]:
    """Write model as GGUF at path; returns (arch, hparams)."""
    arch, hp, t = gguf_tensors(model)
    write_gguf(path, arch, hp, t, ftype=ftype)
    return arch, hp


def gguf_tensors(model) -> tuple[str, dict, dict]:
    """(arch, hparams, {GGUF name: numpy array}) as convert writes them (for
    tests that edit a model file before writing it)."""
    arch, hp = hparams(model)
    sd = {k: v.detach().float().numpy() for k, v in model.state_dict().items()}
    t = {"token_embd.weight": sd["model.embed_tokens.weight"],
         "output_norm.weight": sd["model.norm.weight"]}
    if "lm_head.weight" in sd and not model.config.tie_word_embeddings:
        t["output.weight"] = sd["lm_head.weight"]
    names = {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
             "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output",
             "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down",
             "input_layernorm": "attn_norm",
             "self_attn.q_norm": "attn_q_norm", "self_attn.k_norm": "attn_k_norm",
             "pre_feedforward_layernorm": "ffn_norm",
             "post_feedforward_layernorm": "post_ffw_norm",
             "post_attention_layernorm": "post_attention_norm" if arch == "gemma3" else "ffn_norm"}
    if "rope_freqs" in hp:
        t["rope_freqs.weight"] = hp["rope_freqs"]
    for i in range(hp["n_layer"]):
        for hf, gg in names.items():
            for kind in ("weight", "bias"):
                key = f"model.layers.{i}.{hf}.{kind}"
                if key not in sd:
                    continue
                w = sd[key]
                if arch == "llama" and gg == "attn_q":
                    w = permute_qk(w, hp["n_head"], hp["n_head"])
                elif arch == "llama" and gg == "attn_k":
                    w = permute_qk(w, hp["n_head"], hp["n_head_kv"])
                t[f"blk.{i}.{gg}.{kind}"] = w
    if arch == "gemma3":
        for k in list(t):
            if k.endswith("norm.weight"):
                t[k] = t[k] + 1.0
    return arch, hp, t
