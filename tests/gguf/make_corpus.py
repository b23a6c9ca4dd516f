"""Regenerates tests/gguf/corpus/, the seed corpus of the fuzz_gguf target.

Small GGUF files written with gguf-py (the reference writer): a complete
1-layer llama model with tiny shapes (so the config and tensor checks run),
the same as gemma3 with parley's extension keys, a file with every
metadata value type, and one with a tensor of every block format parley
dequantises (quant_types: two rows each, so the fuzzer's row conversion
runs on every format's bytes).  Run with the venv python from the repository root:
    python tests/gguf/make_corpus.py
plus parley's own writer's fixed file:
    build/tests/gguf/gguf_dump --write tests/gguf/corpus/parley_writer
The files carry no .gguf suffix (the repository ignores *.gguf); they are
committed so the fuzz run needs no generation step.
"""

from pathlib import Path

import numpy as np

import gguf

OUT = Path(__file__).resolve().parent / "corpus"


def model(path: Path, arch: str, ext: bool) -> None:
    w = gguf.GGUFWriter(str(path), arch)
    e, nh, hd, ff, nv, nl = 32, 2, 16, 64, 8, 2
    w.add_uint32(f"{arch}.vocab_size", nv)
    w.add_uint32(f"{arch}.embedding_length", e)
    w.add_uint32(f"{arch}.block_count", nl)
    w.add_uint32(f"{arch}.feed_forward_length", ff)
    w.add_uint32(f"{arch}.attention.head_count", nh)
    w.add_uint32(f"{arch}.attention.head_count_kv", 1)
    w.add_uint32(f"{arch}.attention.key_length", hd)
    w.add_float32(f"{arch}.attention.layer_norm_rms_epsilon", 1e-6)
    if arch == "gemma3":
        w.add_uint32(f"{arch}.attention.sliding_window", 4)
    if ext:
        w.add_array(f"{arch}.attention.layer_window", [4, 4])
        w.add_array(f"{arch}.attention.layer_kv_source", [0, 0])
    w.add_array("tokenizer.ggml.tokens", [f"t{i}" for i in range(nv)])
    rng = np.random.default_rng(0)

    def t(name, *shape):
        w.add_tensor(name, rng.standard_normal(shape[::-1]).astype(np.float16 if len(shape) > 1 else np.float32))

    t("token_embd.weight", e, nv)
    t("output_norm.weight", e)
    for l in range(nl):
        t(f"blk.{l}.attn_norm.weight", e)
        t(f"blk.{l}.attn_q.weight", e, nh * hd)
        if not ext or l == 0:
            t(f"blk.{l}.attn_k.weight", e, hd)
            t(f"blk.{l}.attn_v.weight", e, hd)
            if arch == "gemma3":
                t(f"blk.{l}.attn_k_norm.weight", hd)
        t(f"blk.{l}.attn_output.weight", nh * hd, e)
        t(f"blk.{l}.ffn_norm.weight", e)
        t(f"blk.{l}.ffn_gate.weight", e, ff)
        t(f"blk.{l}.ffn_up.weight", e, ff)
        t(f"blk.{l}.ffn_down.weight", ff, e)
        if arch == "gemma3":
            t(f"blk.{l}.attn_q_norm.weight", hd)
            t(f"blk.{l}.post_attention_norm.weight", e)
            t(f"blk.{l}.post_ffw_norm.weight", e)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def all_types(path: Path) -> None:
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_uint8("a.u8", 7)
    w.add_int8("a.i8", -7)
    w.add_uint16("a.u16", 700)
    w.add_int16("a.i16", -700)
    w.add_uint32("a.u32", 70000)
    w.add_int32("a.i32", -70000)
    w.add_float32("a.f32", 0.25)
    w.add_bool("a.bool", True)
    w.add_string("a.str", "text")
    w.add_uint64("a.u64", 1 << 40)
    w.add_int64("a.i64", -(1 << 40))
    w.add_float64("a.f64", 1e-3)
    w.add_array("a.arr.str", ["x", "yz", ""])
    w.add_array("a.arr.i", [1, 2, 3])
    w.add_tensor("q", gguf.quants.quantize(np.linspace(-1, 1, 64, dtype=np.float32).reshape(2, 32),
                                           gguf.GGMLQuantizationType.Q8_0),
                 raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


# fp16 scale offsets inside one block, per block format (gguf_quant.c)
QUANT_SCALES = {
    "Q4_0": [0], "Q4_1": [0, 2], "Q5_0": [0], "Q5_1": [0, 2], "Q8_0": [0], "IQ4_NL": [0],
    "Q2_K": [80, 82], "Q3_K": [108], "Q4_K": [0, 2], "Q5_K": [0, 2], "Q6_K": [208], "IQ4_XS": [0],
}


def quant_types(path: Path) -> None:
    rng = np.random.default_rng(14)
    w = gguf.GGUFWriter(str(path), "llama")
    for name, offs in QUANT_SCALES.items():
        qt = gguf.GGMLQuantizationType[name]
        blck, bsz = gguf.GGML_QUANT_SIZES[qt]
        data = rng.integers(0, 256, size=(2, bsz), dtype=np.uint8)
        for off in offs:
            data[:, off:off + 2] = (rng.standard_normal(2) * 0.1).astype(np.float16).view(np.uint8).reshape(2, 2)
        w.add_tensor(name.lower(), data, raw_dtype=qt)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    OUT.mkdir(exist_ok=True)
    model(OUT / "llama_tiny", "llama", False)
    model(OUT / "gemma3_ext", "gemma3", True)
    all_types(OUT / "all_types")
    quant_types(OUT / "quant_types")
