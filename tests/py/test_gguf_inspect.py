"""`parley inspect` and `parley mkmodel` end to end.

inspect on good files prints the engine's view (checked through --json:
config, per-layer plan, parameter count = tensor elements, KV figures and
the cai KV reduction); on bad files it names the problem on stderr and
exits 1.  mkmodel files also load in llama.cpp (llama-cpp-python), whose
tokenizer round-trips text with the embedded vocabulary.
"""

from __future__ import annotations

import json
import subprocess

import pytest

import gguf


def run(parley_bin, *args, timeout=60):
    return subprocess.run([str(parley_bin), *map(str, args)], capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def models(tmp_path_factory, parley_bin):
    d = tmp_path_factory.mktemp("models")
    files = {}
    for preset in ["tiny-llama", "tiny-gemma3", "cai-tiny"]:
        files[preset] = d / f"{preset}.gguf"
        out = run(parley_bin, "mkmodel", "--preset", preset, "--out", files[preset], "--seed", 5)
        assert out.returncode == 0, out.stderr
    return files


def inspect_json(parley_bin, path):
    out = run(parley_bin, "inspect", path, "--json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_inspect_cai_tiny(parley_bin, models):
    j = inspect_json(parley_bin, models["cai-tiny"])
    c = j["config"]
    assert c["arch"] == "llama" and c["n_head_kv"] == 1 and c["n_layer"] == 12
    assert [l["window"] for l in j["layers"]] == [0 if (i + 1) % 6 == 0 else 1024 for i in range(12)]
    assert [l["kv_src"] for l in j["layers"]] == [0, 0, 2, 2, 4, 5, 6, 6, 8, 8, 10, 5]
    assert j["n_params"] == j["tensors"]["elements"]
    kv = j["kv"]
    assert kv["mha_fp16_bytes_per_token"] == 2 * 12 * 4 * 32 * 2
    assert kv["bytes_per_token"] == 2 * 1 * (32 + 4)  # one global KV owner
    assert kv["ratio"] >= 20 and kv["at_ref_ctx"]["ratio"] >= 20
    assert j["metadata"]["llama.attention.layer_kv_source"]["n"] == 12
    assert j["error"] is None


def test_inspect_gemma3_text(parley_bin, models):
    out = run(parley_bin, "inspect", models["tiny-gemma3"])
    assert out.returncode == 0, out.stderr
    assert "architecture (engine view): gemma3" in out.stdout
    assert "rope neox base 1e+06 (local 10000)" in out.stdout
    assert "layer   5  window      0" in out.stdout and "layer   4  window     16" in out.stdout
    assert "tokenizer.ggml.tokens" in out.stdout and "n=768" in out.stdout
    j = inspect_json(parley_bin, models["tiny-gemma3"])
    assert j["config"]["has_qk_norm"] == 1 and j["config"]["ffn_gelu"] == 1
    assert j["n_params"] == j["tensors"]["elements"]


def test_inspect_bad_files(parley_bin, models, tmp_path):
    data = models["tiny-llama"].read_bytes()
    cases = {
        "truncated.gguf": (data[: len(data) // 2], "lies outside the data section"),
        "header_cut.gguf": (data[:100], "metadata count 28 exceeds the limit"),
        "magic.gguf": (b"GGML" + data[4:], "not a GGUF file"),
        "v1.gguf": (data[:4] + b"\x01\x00\x00\x00" + data[8:], "version 1 is not supported"),
        "huge_kv.gguf": (data[:16] + b"\xff" * 8 + data[24:], "metadata count"),
        "empty.gguf": (b"", "empty"),
    }
    for name, (content, want) in cases.items():
        p = tmp_path / name
        p.write_bytes(content)
        out = run(parley_bin, "inspect", p)
        assert out.returncode == 1, name
        assert want in out.stderr, (name, out.stderr)
        assert str(p) in out.stderr
    out = run(parley_bin, "inspect", tmp_path / "missing.gguf")
    assert out.returncode == 1 and "cannot open" in out.stderr

    # parses, but the engine cannot run it: metadata printed, error named, exit 1
    p = tmp_path / "arch.gguf"
    w = gguf.GGUFWriter(str(p), "gpt2")
    w.add_uint32("gpt2.block_count", 1)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    out = run(parley_bin, "inspect", p)
    assert out.returncode == 1
    assert "unsupported architecture 'gpt2' (supported: llama, qwen2, qwen3, gemma3)" in out.stderr
    assert "gpt2.block_count" in out.stdout
    out = run(parley_bin, "inspect", p, "--json")
    assert out.returncode == 1 and "unsupported architecture" in json.loads(out.stdout)["error"]


def test_mkmodel_cli(parley_bin, tmp_path):
    a, b = tmp_path / "a.gguf", tmp_path / "b.gguf"
    for p in (a, b):
        assert run(parley_bin, "mkmodel", "--preset", "cai-tiny", "--out", p, "--seed", 11).returncode == 0
    assert a.read_bytes() == b.read_bytes()
    out = run(parley_bin, "mkmodel", "--preset", "tiny-llama", "--out", a, "--window", 8)
    assert out.returncode == 2 and "no local layers" in out.stderr
    out = run(parley_bin, "mkmodel", "--preset", "nope", "--out", a)
    assert out.returncode == 2 and "unknown preset" in out.stderr
    assert run(parley_bin, "mkmodel", "--help").returncode == 0


def test_llama_cpp_loads_mkmodel(models):
    llama_cpp = pytest.importorskip("llama_cpp")
    for preset in ["tiny-llama", "tiny-gemma3"]:
        m = llama_cpp.Llama(model_path=str(models[preset]), n_ctx=64, verbose=False)
        text = b"Hello world, the user said: what is the time?"
        ids = m.tokenize(text, add_bos=False)
        assert m.detokenize(ids) == text
        assert len(ids) < len(text) // 2  # the merges do compress English
        assert m.tokenize(b"<|eot_id|>", add_bos=False, special=True) == [int(m.metadata["tokenizer.ggml.eot_token_id"])]
        assert m.n_vocab() == 768
        m.close()
