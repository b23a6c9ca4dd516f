"""Architectures qwen2 / qwen3 and rope scaling (linear, Llama 3, YaRN) in
the engine (issue: real models, items 2 and 3).

Random-initialised transformers models (tests/py/hf2gguf.py, no download)
converted to F32 GGUF as llama.cpp's converter does, run through
tests/model/eng_logits:

* qwen2 (Q/K/V biases, tied output), llama with Q/K/V biases, qwen3
  (per-head Q/K RMSNorm, head_dim 32 != hidden / heads, MQA), llama with
  Llama 3.1 "llama3" rope scaling (rope_freqs.weight; rope_theta 100 and
  original_max_position_embeddings 32, so every branch of the factor
  formula is hit and 96 positions pass the low-frequency wavelengths), llama
  with linear scaling (factor 4),
  gemma3 with linear scaling of its global layers, qwen3 and qwen2 with
  YaRN (factor 4, original context 32; the qwen2 file also carries the
  default betas 32 / 1 as keys).  Non-default betas are refused: llama.cpp
  (llama-cpp-python 0.3.36) ignores those keys while transformers applies
  them.
* fp32 path vs transformers: a 64-token prefill then 32 decode steps;
  metric per position max_v |engine - hf| / max_v |hf|, worst position
  below 1e-4 (test_engine_numerics.py's metric).
* the scaling matters: transformers without the scaling (same weights)
  differs from the scaled model by far more than the engine does.
* greedy decoding of 32 tokens equals llama.cpp's (llama-cpp-python) on the
  same file, from three 48-token prompts (positions up to 80).
* int8 vs fp32: test_engine_numerics.test_int8_vs_fp32's metric.
* files whose architecture, rope scaling or biases parley cannot apply are
  refused with a message naming them.
"""

import subprocess

import numpy as np
import pytest

torch = pytest.importorskip("torch")
gguf = pytest.importorskip("gguf")

import hf2gguf  # noqa: E402
from test_engine_numerics import (ISAS, N_DECODE, N_PREFILL, eng_logits,  # noqa: E402,F401
                                  llama_cpp_greedy, rel_err, run_engine)

LLAMA3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 32}
LINEAR = {"rope_type": "linear", "factor": 4.0}
YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32}

def llama_qkv_bias():
    """Llama with Q/K/V biases only (llama.cpp's llama graph applies them;
    the converter permutes the Q/K biases like the rows): transformers'
    attention_bias also gives o_proj a bias, zeroed here and left out of
    the file (parley refuses an attn_output bias)."""
    model = hf2gguf.build_llama(2, seed=33, attention_bias=True)
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.o_proj.bias.zero_()
    return model


def drop_output_bias(t):
    for k in [k for k in t if k.endswith("attn_output.bias")]:
        del t[k]


# name -> (builder, builder of the same weights without rope scaling or None
#          [, edit of the GGUF tensors before writing])
ARCH_MODELS = {
    "llama_qkv_bias": (llama_qkv_bias, None, drop_output_bias),
    "qwen2": (lambda: hf2gguf.build_qwen2(seed=21), None),
    "qwen3": (lambda: hf2gguf.build_qwen3(seed=22), None),
    "llama_rope_llama3": (
        lambda: hf2gguf.build_llama(2, seed=23, rope_theta=100.0, rope_scaling=LLAMA3),
        lambda: hf2gguf.build_llama(2, seed=23, rope_theta=100.0)),
    "llama_rope_linear": (
        lambda: hf2gguf.build_llama(1, seed=26, rope_scaling=LINEAR),
        lambda: hf2gguf.build_llama(1, seed=26)),
    "qwen3_rope_yarn": (
        lambda: hf2gguf.build_qwen3(seed=27, rope_scaling=YARN),
        lambda: hf2gguf.build_qwen3(seed=27)),
    "qwen2_rope_yarn_betas": (
        lambda: hf2gguf.build_qwen2(seed=29, rope_theta=1000.0,
                                    rope_scaling={**YARN, "beta_fast": 32.0, "beta_slow": 1.0}),
        lambda: hf2gguf.build_qwen2(seed=29, rope_theta=1000.0)),
    "gemma3_rope_linear": (
        lambda: hf2gguf.build_gemma3(seed=25, sliding_window=8, rope_scaling=LINEAR),
        lambda: hf2gguf.build_gemma3(seed=25, sliding_window=8)),
}


def hf_logits(model, ids):
    with torch.no_grad():
        return model(torch.tensor(ids)[None]).logits[0].float().numpy()


@pytest.fixture(scope="module", params=sorted(ARCH_MODELS))
def arch_model(request, tmp_path_factory):
    build, build_plain, *edit = ARCH_MODELS[request.param]
    model = build()
    path = tmp_path_factory.mktemp(request.param) / "model.gguf"
    arch, hp, t = hf2gguf.gguf_tensors(model)
    for e in edit:
        e(t)
    hf2gguf.write_gguf(path, arch, hp, t)
    ids = np.random.default_rng(8).integers(3, model.config.vocab_size, N_PREFILL + N_DECODE)
    ref = hf_logits(model, ids)
    plain = hf_logits(build_plain(), ids) if build_plain else None
    return request.param, path, ids, ref, plain


@pytest.mark.parametrize("isa", ISAS)
def test_fp32_matches_transformers(arch_model, eng_logits, tmp_path, isa):
    name, path, ids, ref, plain = arch_model
    got, _ = run_engine(eng_logits, path, ids, tmp_path, "--fp32", "--prefill", str(N_PREFILL),
                        isa=isa)
    err = rel_err(got, ref)
    print(f"{name} [{isa}]: fp32 vs transformers, worst position rel err {err.max():.2e}")
    assert err.max() < 1e-4, f"{name}: position {err.argmax()} rel err {err.max():.3e}"
    assert (got.argmax(1) == ref.argmax(1)).all()


@pytest.mark.parametrize("arch_model", sorted(n for n, b in ARCH_MODELS.items() if b[1]),
                         indirect=True)
def test_rope_scaling_matters(arch_model):
    """Without its scaling the same model gives other logits: the scaled
    positions really are past the wavelengths the scaling changes (only the
    models that have rope scaling: the others are not parametrized)."""
    name, _, _, ref, plain = arch_model
    d = rel_err(plain, ref)
    print(f"{name}: unscaled vs scaled transformers, worst position rel err {d.max():.2e}, "
          f"top-1 differs at {(plain.argmax(1) != ref.argmax(1)).sum()}/{len(ref)} positions")
    assert d.max() > 0.1
    assert (plain.argmax(1) != ref.argmax(1)).any()


def test_greedy_matches_llama_cpp(arch_model, eng_logits, tmp_path):
    name, path, ids, _, _ = arch_model
    seen = set()
    for k in range(3):
        prompt = ids[16 * k:16 * k + 48]
        ref = llama_cpp_greedy(path, prompt, 32)
        _, out = run_engine(eng_logits, path, prompt, tmp_path, "--fp32", "--greedy", "32")
        mine = [int(x) for x in out.strip().split(",")]
        assert mine == ref, f"{name} prompt {k}: engine {mine} vs llama.cpp {ref}"
        seen.update(ref)
    print(f"{name}: greedy 3 x 32 tokens equal llama.cpp's ({len(seen)} distinct)")
    assert len(seen) > 3, f"{name}: degenerate reference {sorted(seen)}"


@pytest.mark.parametrize("isa", ISAS)
def test_int8_vs_fp32(arch_model, eng_logits, tmp_path, isa):
    """As test_engine_numerics.test_int8_vs_fp32: mean rel err < 6%, top-1
    agreement >= 85% over all positions and >= 99% over the positions whose
    fp32 top-1/top-2 margin exceeds 3x the RMS int8-vs-fp32 difference."""
    name, path, ids, _, _ = arch_model
    f32, _ = run_engine(eng_logits, path, ids, tmp_path, "--fp32")
    i8, _ = run_engine(eng_logits, path, ids, tmp_path, isa=isa)
    err = rel_err(i8, f32)
    top = np.sort(f32, axis=1)
    margin = top[:, -1] - top[:, -2]
    clear = margin > 3 * np.sqrt(np.mean((i8 - f32) ** 2))
    agree = i8.argmax(1) == f32.argmax(1)
    print(f"{name} [{isa}]: int8 vs fp32 rel err mean {err.mean():.3%} max {err.max():.3%}; "
          f"top-1 agreement {agree.mean():.1%} all, {agree[clear].mean():.1%} on "
          f"{clear.sum()}/{len(ids)} clear-margin positions")
    assert err.mean() < 0.06
    assert agree.mean() >= 0.85
    assert clear.sum() >= len(ids) // 3
    assert agree[clear].mean() >= 0.99


def test_inspect_counts_every_parameter(arch_model, parley_bin):
    """parley inspect's parameter count (the config's formula: biases,
    Q/K norms, rope_freqs.weight included) equals the file's tensor
    elements."""
    import json

    name, path, *_ = arch_model
    out = subprocess.run([str(parley_bin), "inspect", str(path), "--json"], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    want = sum(int(np.prod(t.shape)) for t in gguf.GGUFReader(str(path)).tensors)
    d = json.loads(out.stdout)
    assert d["n_params"] == want, name
    # and it says which scaling and biases the engine applies
    scaling = next((k for k in ("llama3", "linear", "yarn") if f"_rope_{k}" in name), "none")
    assert d["config"]["rope_scaling"] == scaling, name
    assert d["config"]["has_qkv_bias"] == int(name.startswith(("qwen2", "llama_qkv_bias"))), name


# ---- refusals ---------------------------------------------------------------

def _small(kind):
    """(arch, hparams, tensors) of a tiny model of that kind (2 layers)."""
    build = {"llama": lambda: hf2gguf.build_llama(2, seed=30, layers=2),
             "qwen2": lambda: hf2gguf.build_qwen2(seed=31, layers=2),
             "qwen3": lambda: hf2gguf.build_qwen3(seed=32, layers=2)}[kind]
    return hf2gguf.gguf_tensors(build())


def _keys(**kv):
    def extra(w):
        for k, v in kv.items():
            k = k.replace("__", ".")
            if isinstance(v, str):
                w.add_string(k, v)
            else:
                w.add_float32(k, float(v))
    return extra


# case -> (model kind, edit(arch, hp, tensors) -> extra-keys writer or None,
#          expected message, or None: the file loads)
REFUSALS = {
    "yarn_loads": ("llama", lambda a, hp, t: _keys(llama__rope__scaling__type="yarn",
                                                    llama__rope__scaling__factor=4.0), None),
    "yarn_attn_factor": ("qwen3", lambda a, hp, t: _keys(
        qwen3__rope__scaling__type="yarn", qwen3__rope__scaling__factor=4.0,
        qwen3__rope__scaling__yarn_attn_factor=0.8),
        "key 'qwen3.rope.scaling.yarn_attn_factor' = 0.8: YaRN with a value other than 1 is "
        "not supported"),
    "yarn_log_multiplier": ("qwen2", lambda a, hp, t: _keys(
        qwen2__rope__scaling__type="yarn", qwen2__rope__scaling__factor=4.0,
        qwen2__rope__scaling__yarn_log_multiplier=0.1),
        "'qwen2.rope.scaling.yarn_log_multiplier' = 0.1: YaRN with a value other than 0"),
    "yarn_with_rope_freqs": ("llama", lambda a, hp, t: (
        t.update({"rope_freqs.weight": np.ones(8, np.float32)}),
        _keys(llama__rope__scaling__type="yarn", llama__rope__scaling__factor=4.0))[1],
        "frequency factors and YaRN together are not supported"),
    "yarn_betas": ("qwen3", lambda a, hp, t: _keys(
        qwen3__rope__scaling__type="yarn", qwen3__rope__scaling__factor=4.0,
        qwen3__rope__scaling__yarn_beta_fast=0.5),
        "'qwen3.rope.scaling.yarn_beta_fast' = 0.5: YaRN with a value other than 32"),
    "yarn_factor_below_one": ("llama", lambda a, hp, t: _keys(
        llama__rope__scaling__type="yarn", llama__rope__scaling__factor=0.5),
        "'llama.rope.scaling.factor' = 0.5 is out of range [1, 1e6] for YaRN"),
    "longrope": ("qwen2", lambda a, hp, t: _keys(qwen2__rope__scaling__type="longrope"),
                 "qwen2.rope.scaling.type = 'longrope': this rope scaling type is not supported "
                 "(supported: none, linear, yarn, and Llama 3 frequency factors in "
                 "rope_freqs.weight)"),
    "llama3_type_key": ("llama", lambda a, hp, t: _keys(llama__rope__scaling__type="llama3"),
                        "'llama3': this rope scaling type is not supported"),
    "none_with_factor": ("llama", lambda a, hp, t: _keys(llama__rope__scaling__type="none",
                                                          llama__rope__scaling__factor=2.0),
                         "= 'none' but llama.rope.scaling.factor = 2: inconsistent"),
    "none": ("llama", lambda a, hp, t: _keys(llama__rope__scaling__type="none"), None),
    "factor_only_is_linear": ("llama", lambda a, hp, t: _keys(llama__rope__scaling__factor=8.0),
                              None),
    "rope_freqs_on_qwen2": ("qwen2", lambda a, hp, t: t.update(
        {"rope_freqs.weight": np.ones(8, np.float32)}),
        "tensor rope_freqs.weight (rope frequency factors) on architecture qwen2: only llama "
        "files apply it"),
    "rope_freqs_zero": ("llama", lambda a, hp, t: t.update(
        {"rope_freqs.weight": np.array([1, 1, 2, 0, 8, 8, 8, 8], np.float32)}),
        "rope_freqs.weight[3] = 0: rope frequency factors must be finite and > 0"),
    "rope_freqs_length": ("llama", lambda a, hp, t: t.update(
        {"rope_freqs.weight": np.ones(16, np.float32)}),
        "tensor 'rope_freqs.weight' has shape [16, 1, 1, 1], expected [8, 1]"),
    "qwen2_without_bias": ("qwen2", lambda a, hp, t: t.pop("blk.1.attn_k.bias"),
                           "tensor 'blk.1.attn_k.bias' is missing"),
    "qwen3_with_bias": ("qwen3", lambda a, hp, t: t.update(
        {"blk.0.attn_q.bias": np.zeros(128, np.float32)}),
        "tensor 'blk.0.attn_q.bias': qwen3 has no attn_q bias (supported: Q/K/V biases on "
        "qwen2 and llama)"),
    "output_bias": ("qwen2", lambda a, hp, t: t.update(
        {"blk.0.attn_output.bias": np.zeros(64, np.float32)}),
        "tensor 'blk.0.attn_output.bias': qwen2 has no attn_output bias"),
    "qwen3_no_qk_norm": ("qwen3", lambda a, hp, t: t.pop("blk.0.attn_k_norm.weight"),
                         "tensor 'blk.0.attn_k_norm.weight' is missing"),
}


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_unsupported_refused(case, eng_logits, tmp_path):
    """What parley cannot apply is refused, naming the key or tensor;
    never run with the scaling or the tensor ignored."""
    kind, edit, want = REFUSALS[case]
    arch, hp, t = _small(kind)
    extra = edit(arch, hp, t)
    path = tmp_path / f"{case}.gguf"
    hf2gguf.write_gguf(path, arch, hp, t, extra=extra if callable(extra) else None)
    ids = np.arange(3, 13, dtype=np.int32)
    ids_f, out_f = tmp_path / "ids.bin", tmp_path / "out.bin"
    ids.tofile(ids_f)
    r = subprocess.run([str(eng_logits), str(path), str(ids_f), str(out_f), "--fp32"],
                       capture_output=True, text=True, timeout=60)
    if want is None:
        assert r.returncode == 0, r.stderr
    else:
        assert r.returncode == 1, (r.stdout, r.stderr)
        assert want in r.stderr, r.stderr


def test_unknown_architecture_lists_supported(eng_logits, tmp_path):
    arch, hp, t = _small("llama")
    path = tmp_path / "mistral3.gguf"
    hf2gguf.write_gguf(path, "mistral3", hp, t)
    ids_f = tmp_path / "ids.bin"
    np.arange(3, 6, dtype=np.int32).tofile(ids_f)
    r = subprocess.run([str(eng_logits), str(path), str(ids_f), str(tmp_path / "o.bin")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    assert "unsupported architecture 'mistral3' (supported: llama, qwen2, qwen3, gemma3)" in r.stderr
