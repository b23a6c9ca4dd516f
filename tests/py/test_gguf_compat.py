"""GGUF interoperability: parley's reader and writer against gguf-py.

Both directions, on every metadata value type and the tensor types parley
writes (F32, F16, BF16, Q8_0; the ggml block formats parley reads are
checked against gguf-py in test_gguf_quants.py):
  * files written by gguf-py's GGUFWriter are read by parley (through the
    tests/gguf/gguf_dump helper, which prints what eng_gguf sees as JSON)
    with the same keys, types, values, tensor shapes and bytes as gguf-py's
    GGUFReader and as the values the test wrote; parley's row conversion
    equals gguf.quants.dequantize;
  * files written by parley's writer (gguf_dump --write, and the models of
    `parley mkmodel`) are read by GGUFReader with the same content.
"""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

import numpy as np
import pytest

import gguf
from gguf import GGMLQuantizationType as QT
from gguf import GGUFValueType as VT



def dump(exe: Path, path: Path) -> dict:
    out = subprocess.run([str(exe), str(path)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def fnv64(data: bytes) -> str:
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def norm(v):
    """Comparable form of a metadata value (bools as bool, floats exact)."""
    if isinstance(v, list):
        return [norm(x) for x in v]
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (float, np.floating)):
        return float(v)
    if isinstance(v, (int, np.integer)):
        return int(v)
    return v


def reader_view(path: Path) -> tuple[list, gguf.GGUFReader]:
    """gguf-py's view: [{key, type, arr_type, value}] in file order, reader."""
    r = gguf.GGUFReader(str(path))
    kv = []
    for name, f in r.fields.items():
        if name.startswith("GGUF."):
            continue
        types = [int(t) for t in f.types]
        # gguf-py records no element type for an empty array: None = unknown
        arr_type = (types[1] if len(types) > 1 else None) if types[0] == VT.ARRAY else -1
        val = f.contents() if arr_type is not None else []
        if types[0] == VT.BOOL:
            val = bool(val)
        elif arr_type == VT.BOOL:
            val = [bool(x) for x in val]
        kv.append({"key": name, "type": types[0], "arr_type": arr_type, "value": norm(val)})
    return kv, r


def compare_to_reader(d: dict, path: Path) -> None:
    """parley's dump of path == gguf-py's reading of path."""
    kv, r = reader_view(path)
    assert [e["key"] for e in d["kv"]] == [e["key"] for e in kv]
    for ours, theirs in zip(d["kv"], kv):
        assert ours["type"] == theirs["type"], ours["key"]
        if theirs["arr_type"] is not None:
            assert ours["arr_type"] == theirs["arr_type"], ours["key"]
        assert norm(ours["value"]) == theirs["value"], ours["key"]
    assert d["alignment"] == r.alignment
    assert [t["name"] for t in d["tensors"]] == [t.name for t in r.tensors]
    for ours, t in zip(d["tensors"], r.tensors):
        assert ours["type"] == int(t.tensor_type), t.name
        assert ours["ne"] == [int(x) for x in t.shape], t.name
        assert ours["nbytes"] == int(t.n_bytes), t.name
        assert d["data_offset"] + ours["offset"] == int(t.data_offset), t.name
        assert ours["fnv"] == fnv64(np.ascontiguousarray(t.data).tobytes()), t.name
        if "f32" in ours:
            ref = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32).ravel()
            np.testing.assert_array_equal(np.array(ours["f32"], dtype=np.float32), ref, t.name)


# ---- gguf-py writes, parley reads ----

SCALARS = [
    ("s.u8", 250, VT.UINT8), ("s.i8", -120, VT.INT8), ("s.u16", 65000, VT.UINT16),
    ("s.i16", -32000, VT.INT16), ("s.u32", 4_000_000_000, VT.UINT32),
    ("s.i32", -2_000_000_000, VT.INT32), ("s.f32", 0.1, VT.FLOAT32), ("s.bool", True, VT.BOOL),
    ("s.str", "grüße ✓", VT.STRING), ("s.u64", 2**64 - 1, VT.UINT64),
    ("s.i64", -(2**63), VT.INT64), ("s.f64", math.pi, VT.FLOAT64),
]
ARRAYS = [
    ("a.i32", [1, -2, 3], VT.INT32), ("a.u8", [0, 255], VT.UINT8), ("a.f32", [0.5, -1e-3], VT.FLOAT32),
    ("a.f64", [1e300, -2.5], VT.FLOAT64), ("a.bool", [True, False, True], VT.BOOL),
    ("a.str", ["", "x", "日本"], VT.STRING), ("a.u64", [2**63 + 5], VT.UINT64),
]


def expected_value(val, vtype):
    if vtype == VT.FLOAT32:
        return float(np.float32(val))
    return val


@pytest.mark.parametrize("alignment", [None, 64])
def test_gguf_py_file_reads_identically(tmp_path, gguf_dump, alignment):
    path = tmp_path / "py.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    if alignment:
        w.add_custom_alignment(alignment)
    for key, val, vt in SCALARS:
        w.add_key_value(key, val, vt)
    for key, val, vt in ARRAYS:
        w.add_key_value(key, val, VT.ARRAY, sub_type=vt)
    rng = np.random.default_rng(1)
    f32 = rng.standard_normal((3, 5)).astype(np.float32)
    f16 = (rng.standard_normal((2, 8)) * 100).astype(np.float16)
    bf16_src = rng.standard_normal((4, 6)).astype(np.float32)
    bf16 = (bf16_src.view(np.uint32) >> 16).astype(np.uint16)  # truncation is fine here
    q8 = rng.standard_normal((3, 64)).astype(np.float32)
    w.add_tensor("t.f32", f32)
    w.add_tensor("t.f16", f16)
    w.add_tensor("t.bf16", bf16.view(np.uint8), raw_dtype=QT.BF16)
    w.add_tensor("t.q8_0", gguf.quants.quantize(q8, QT.Q8_0), raw_dtype=QT.Q8_0)
    w.add_tensor("t.3d", np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()

    d = dump(gguf_dump, path)
    assert d["version"] == 3
    assert d["alignment"] == (alignment or 32)
    assert d["data_offset"] % d["alignment"] == 0
    by_key = {e["key"]: e for e in d["kv"]}
    assert by_key["general.architecture"]["value"] == "llama"
    for key, val, vt in SCALARS:
        assert by_key[key]["type"] == int(vt), key
        assert norm(by_key[key]["value"]) == expected_value(val, vt), key
    for key, val, vt in ARRAYS:
        assert by_key[key]["type"] == int(VT.ARRAY) and by_key[key]["arr_type"] == int(vt), key
        assert norm(by_key[key]["value"]) == [expected_value(x, vt) for x in val], key
    t = {x["name"]: x for x in d["tensors"]}
    assert t["t.f32"]["ne"] == [5, 3] and t["t.3d"]["ne"] == [4, 3, 2]
    assert t["t.bf16"]["ne"] == [6, 4] and t["t.q8_0"]["ne"] == [64, 3]
    np.testing.assert_array_equal(np.array(t["t.f32"]["f32"], np.float32), f32.ravel())
    np.testing.assert_array_equal(np.array(t["t.f16"]["f32"], np.float32), f16.astype(np.float32).ravel())
    np.testing.assert_array_equal(np.array(t["t.bf16"]["f32"], np.float32),
                                  (bf16.astype(np.uint32) << 16).view(np.float32).ravel())
    assert np.max(np.abs(np.array(t["t.q8_0"]["f32"]) - q8.ravel())) < 0.05
    compare_to_reader(d, path)


# ---- parley writes, gguf-py reads ----

def test_parley_writer_file_read_by_gguf_py(tmp_path, gguf_dump):
    path = tmp_path / "parley.gguf"
    out = subprocess.run([str(gguf_dump), "--write", str(path)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    kv, r = reader_view(path)
    got = {e["key"]: e for e in kv}
    expect = {  # what gguf_dump --write stores (tests/gguf/gguf_dump.c)
        "general.alignment": (VT.UINT32, 16), "w.u8": (VT.UINT8, 255), "w.i8": (VT.INT8, -128),
        "w.u16": (VT.UINT16, 65535), "w.i16": (VT.INT16, -32768), "w.u32": (VT.UINT32, 2**32 - 1),
        "w.i32": (VT.INT32, -(2**31)), "w.f32": (VT.FLOAT32, 1.5), "w.bool": (VT.BOOL, True),
        "w.str": (VT.STRING, "héllo ✓"), "w.u64": (VT.UINT64, 2**64 - 1),
        "w.i64": (VT.INT64, -(2**63)), "w.f64": (VT.FLOAT64, -2.25),
    }
    arrays = {
        "w.arr.u8": (VT.UINT8, [0, 1, 255]), "w.arr.i16": (VT.INT16, [-1, 2]),
        "w.arr.f32": (VT.FLOAT32, [0.5, -1.25]), "w.arr.f64": (VT.FLOAT64, [1e300]),
        "w.arr.bool": (VT.BOOL, [True, False]), "w.arr.u64": (VT.UINT64, [1, 2**63]),
        "w.arr.empty": (VT.INT32, []), "w.arr.str": (VT.STRING, ["a", "", "ü"]),
    }
    assert list(got) == list(expect) + list(arrays)
    for k, (vt, v) in expect.items():
        assert got[k]["type"] == vt and got[k]["value"] == v, k
    for k, (vt, v) in arrays.items():
        assert got[k]["type"] == VT.ARRAY and got[k]["value"] == v, k
        assert got[k]["arr_type"] == (vt if v else None), k
    assert r.alignment == 16
    ts = {t.name: t for t in r.tensors}
    assert [int(x) for x in ts["t.f32"].shape] == [4, 3]
    deq = {n: gguf.quants.dequantize(t.data, t.tensor_type).ravel() for n, t in ts.items()}
    np.testing.assert_array_equal(deq["t.f32"], np.arange(12, dtype=np.float32) * 0.5 - 1)
    np.testing.assert_array_equal(deq["t.f16"], (np.arange(16, dtype=np.float32) - 8) * 0.25)
    np.testing.assert_array_equal(deq["t.bf16"], np.arange(6, dtype=np.float32) * -1.5)
    i = np.arange(128)
    q = (37 * i) % 255 - 127
    np.testing.assert_array_equal(deq["t.q8_0"], (q * 2.0 ** -(i // 32)).astype(np.float32))
    assert ts["t.q8_0"].tensor_type == QT.Q8_0 and [int(x) for x in ts["t.q8_0"].shape] == [64, 2]
    compare_to_reader(dump(gguf_dump, path), path)


@pytest.fixture(scope="module")
def mkmodel_files(tmp_path_factory, parley_bin):
    d = tmp_path_factory.mktemp("mk")
    files = {}
    for preset, typ in [("tiny-llama", "q8_0"), ("tiny-gemma3", "f16"), ("cai-tiny", "q8_0")]:
        path = d / f"{preset}.gguf"
        out = subprocess.run([str(parley_bin), "mkmodel", "--preset", preset, "--out", str(path),
                              "--type", typ], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        files[preset] = path
    return files


@pytest.mark.parametrize("preset", ["tiny-llama", "tiny-gemma3", "cai-tiny"])
def test_mkmodel_file_read_by_gguf_py(mkmodel_files, gguf_dump, preset):
    path = mkmodel_files[preset]
    compare_to_reader(dump(gguf_dump, path), path)
    _, r = reader_view(path)
    f = r.fields
    assert f["parley.preset"].contents() == preset
    arch = f["general.architecture"].contents()
    tokens = f["tokenizer.ggml.tokens"].contents()
    assert len(tokens) == f[f"{arch}.vocab_size"].contents()
    merges = f["tokenizer.ggml.merges"].contents()
    vocab = set(tokens)
    assert len(merges) > 100 and all(m.replace(" ", "", 1) in vocab for m in merges)
    assert tokens[f["tokenizer.ggml.eot_token_id"].contents()] == "<|eot_id|>"
    assert "<|start_header_id|>" in f["tokenizer.chat_template"].contents()
