"""Every ggml block format parley converts, against gguf-py.

For each type (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K,
IQ4_NL, IQ4_XS):
  * a GGUF with a random tensor of that type (quantised by gguf.quants.quantize
    where gguf-py implements it, else random block bytes with finite fp16
    scales -- equally valid input) is read by parley (tests/gguf/gguf_dump)
    and parley's dequantisation (eng_gguf_row_to_f32) equals
    gguf.quants.dequantize bit for bit;
  * a block with an infinite or nan fp16 scale is refused (no values dumped);
  * a small llama model whose linear weights and embedding are all of that
    type loads and generates in both precisions (int8 and --fp32).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

gguf = pytest.importorskip("gguf", reason="no gguf-py: run deploy/setup.sh (venv)")
from gguf import GGMLQuantizationType as QT  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import hf2gguf  # noqa: E402


# type -> byte offsets of the fp16 scales inside one block
SCALES = {
    QT.Q4_0: [0], QT.Q4_1: [0, 2], QT.Q5_0: [0], QT.Q5_1: [0, 2], QT.Q8_0: [0],
    QT.IQ4_NL: [0], QT.Q2_K: [80, 82], QT.Q3_K: [108], QT.Q4_K: [0, 2], QT.Q5_K: [0, 2],
    QT.Q6_K: [208], QT.IQ4_XS: [0],
}
TYPES = list(SCALES)


def can_quantize(qt) -> bool:
    try:
        gguf.quants.quantize(np.zeros((1, 256), dtype=np.float32), qt)
        return True
    except (NotImplementedError, gguf.quants.QuantError):
        return False


def random_blocks(qt, rows: int, cols: int, rng, bad_scale=None) -> np.ndarray:
    """[rows][row bytes] uint8 of random blocks with finite fp16 scales."""
    blck, bsz = gguf.GGML_QUANT_SIZES[qt]
    nb = rows * cols // blck
    data = rng.integers(0, 256, size=(nb, bsz), dtype=np.uint8)
    for off in SCALES[qt]:
        s = (rng.standard_normal(nb) * 0.05).astype(np.float16)
        data[:, off:off + 2] = s.view(np.uint8).reshape(nb, 2)
    if bad_scale is not None:
        data[0, SCALES[qt][0]:SCALES[qt][0] + 2] = np.array([bad_scale], np.float16).view(np.uint8)
    return data.reshape(rows, cols // blck * bsz)


def encode(qt, w: np.ndarray, rng) -> np.ndarray:
    if can_quantize(qt):
        return gguf.quants.quantize(w.astype(np.float32), qt)
    return random_blocks(qt, w.shape[0], w.shape[1], rng)


def dump(exe: Path, path: Path) -> dict:
    out = subprocess.run([str(exe), str(path)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout, parse_int=float)  # keeps "-0" a negative zero


@pytest.mark.parametrize("qt", TYPES, ids=lambda t: t.name)
def test_dequant_bit_exact(gguf_dump, tmp_path, qt):
    rng = np.random.default_rng(int(qt))
    rows, cols = 3, 512
    w = gguf.GGUFWriter(str(tmp_path / "q.gguf"), "test")
    quantised = encode(qt, rng.standard_normal((rows, cols)).astype(np.float32) * 0.1, rng)
    raw = random_blocks(qt, rows, cols, rng)
    w.add_tensor("t.quantised", quantised, raw_dtype=qt)
    w.add_tensor("t.raw", raw, raw_dtype=qt)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    got = {t["name"]: t for t in dump(gguf_dump, tmp_path / "q.gguf")["tensors"]}
    for t in gguf.GGUFReader(str(tmp_path / "q.gguf")).tensors:
        name = t.name
        assert got[name]["type"] == int(qt) and got[name]["ne"] == [cols, rows]
        assert "f32" in got[name], f"parley did not convert {name} ({qt.name})"
        ref = gguf.quants.dequantize(t.data, qt).astype(np.float32).ravel()
        par = np.array(got[name]["f32"], dtype=np.float64).astype(np.float32)
        assert ref.shape == par.shape
        diff = np.nonzero(ref.view(np.uint32) != par.view(np.uint32))[0]
        assert diff.size == 0, f"{qt.name} {name}: {diff.size} values differ, first at {diff[0]}: " \
                               f"parley {par[diff[0]]!r} gguf-py {ref[diff[0]]!r}"


@pytest.mark.parametrize("qt", [QT.Q4_0, QT.Q4_1, QT.Q4_K, QT.Q6_K, QT.IQ4_XS], ids=lambda t: t.name)
@pytest.mark.parametrize("bad", [np.inf, np.nan])
def test_nonfinite_scale_refused(gguf_dump, tmp_path, qt, bad):
    rng = np.random.default_rng(7)
    w = gguf.GGUFWriter(str(tmp_path / "bad.gguf"), "test")
    w.add_tensor("t.bad", random_blocks(qt, 2, 256, rng, bad_scale=bad), raw_dtype=qt)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    (t,) = dump(gguf_dump, tmp_path / "bad.gguf")["tensors"]
    assert "f32" not in t, f"{qt.name} row with a {bad} scale was converted"


def write_model(path: Path, qt, seed: int, extra=None) -> None:
    """Tiny llama (n_embd 256, so every block format fits) with all linear
    weights and the (tied) embedding in type qt, norms f32; extra(writer),
    when given, adds keys or tensors."""
    rng = np.random.default_rng(seed)
    E, F, H, HKV, HD, V, L = 256, 512, 2, 1, 128, 300, 2
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_context_length(256)
    w.add_embedding_length(E)
    w.add_block_count(L)
    w.add_feed_forward_length(F)
    w.add_head_count(H)
    w.add_head_count_kv(HKV)
    w.add_key_length(HD)
    w.add_value_length(HD)
    w.add_rope_dimension_count(HD)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(10000.0)
    w.add_vocab_size(V)
    tokens, scores, types = hf2gguf.spm_vocab(V)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_unk_token_id(0)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_add_bos_token(False)

    def lin(name, rows, cols):
        m = (rng.standard_normal((rows, cols)) / np.sqrt(cols)).astype(np.float32)
        w.add_tensor(name, encode(qt, m, rng), raw_dtype=qt)

    def norm(name):
        w.add_tensor(name, (1 + 0.1 * rng.standard_normal(E)).astype(np.float32))

    if extra:
        extra(w)
    lin("token_embd.weight", V, E)
    norm("output_norm.weight")
    for i in range(L):
        norm(f"blk.{i}.attn_norm.weight")
        norm(f"blk.{i}.ffn_norm.weight")
        lin(f"blk.{i}.attn_q.weight", H * HD, E)
        lin(f"blk.{i}.attn_k.weight", HKV * HD, E)
        lin(f"blk.{i}.attn_v.weight", HKV * HD, E)
        lin(f"blk.{i}.attn_output.weight", E, H * HD)
        lin(f"blk.{i}.ffn_gate.weight", F, E)
        lin(f"blk.{i}.ffn_up.weight", F, E)
        lin(f"blk.{i}.ffn_down.weight", E, F)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


@pytest.mark.parametrize("qt", TYPES, ids=lambda t: t.name)
def test_model_loads_both_precisions(parley_bin, tmp_path, qt):
    path = tmp_path / f"m_{qt.name}.gguf"
    write_model(path, qt, seed=int(qt))
    outs = {}
    for prec in ([], ["--fp32"]):
        out = subprocess.run([str(parley_bin), "generate", str(path), "--ids", "1,5,9,13", "-n", "4",
                              "--ignore-eos", "--threads", "1", "--print-ids", "--quiet", *prec],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, f"{qt.name} {prec}: {out.stderr}"
        outs[bool(prec)] = out.stdout
    assert outs[False].strip() and outs[True].strip()


def test_inspect_real_model(parley_bin, gemma_model):
    out = subprocess.run([str(parley_bin), "inspect", str(gemma_model)], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "supported:" not in out.stdout + out.stderr
