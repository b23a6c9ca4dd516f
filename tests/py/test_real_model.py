"""The real Gemma 3 270M Q4_K_M file (deploy/setup.sh model) against
transformers, which dequantises the same GGUF to fp32
(from_pretrained(..., gguf_file=...)).

* fp32 path: logits over a 128-token prefill of English prose (the GPL-3
  text on every Debian machine) plus 32 single-token decode steps.  Metric:
  per position, max_v |parley - hf| / max_v |hf|; the worst position must be
  below 1e-4.
* greedy decoding: 64 tokens from 5 prompts, identical to transformers'
  greedy generate (EOS ignored on both sides).
* the int8 path against the fp32 path on 511 tokens of licence text, next
  to llama.cpp against the same reference (tests/bench/int8_fidelity.py
  reports the full comparison on 4,088 tokens).
"""
import os
import subprocess

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

N_PREFILL, N_DECODE, N_GREEDY = 128, 32, 64
PROMPTS = ["The capital of France is", "Once upon a time, in a small village by the sea,",
           "def fibonacci(n):", "The three primary colors are", "Water boils at a temperature of"]


@pytest.fixture(scope="module")
def hf(gemma_model):
    m = transformers.AutoModelForCausalLM.from_pretrained(str(gemma_model.parent), gguf_file=gemma_model.name,
                                                          dtype=torch.float32)
    return m.eval()


@pytest.fixture(scope="module")
def prose_ids(gemma_model, parley_bin):
    text = open("/usr/share/common-licenses/GPL-3", encoding="utf-8").read()[2000:4000]
    r = subprocess.run([str(parley_bin), "generate", str(gemma_model), "--prompt", text, "-n", "1",
                        "--print-ids", "--quiet", "--print-prompt-ids"], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("prompt ids: "))
    ids = [int(x) for x in line[len("prompt ids: "):].split(",")]
    assert ids[0] == 2 and len(ids) >= N_PREFILL + N_DECODE  # BOS, then the text
    return ids[:N_PREFILL + N_DECODE]


def engine_logits(exe, model, ids, tmp_path, *args):
    ids_f, out_f = tmp_path / "ids.bin", tmp_path / "out.bin"
    np.asarray(ids, np.int32).tofile(ids_f)
    r = subprocess.run([str(exe), str(model), str(ids_f), str(out_f), "--prefill", str(N_PREFILL), *args],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    return np.fromfile(out_f, np.float32).reshape(len(ids), -1)


@pytest.fixture(scope="module")
def ref_logits(hf, prose_ids):
    with torch.no_grad():
        return hf(torch.tensor(prose_ids)[None]).logits[0].float().numpy()


def test_fp32_logits_match_transformers(gemma_model, parley_build, prose_ids, ref_logits, tmp_path):
    got = engine_logits(parley_build / "tests" / "model" / "eng_logits", gemma_model, prose_ids, tmp_path,
                        "--fp32")
    err = np.abs(got - ref_logits).max(axis=1) / np.abs(ref_logits).max(axis=1)
    assert err.max() < 1e-4, "worst position %d: rel err %.3g" % (err.argmax(), err.max())
    assert (got.argmax(1) == ref_logits.argmax(1)).all()


def test_int8_fidelity_next_to_llama_cpp(gemma_model, parley_build):
    """int8 vs the fp32 path on 511 teacher-forced tokens of licence text,
    next to llama.cpp running the file's own 4-6 bit kernels against the
    same reference (tests/bench/int8_fidelity.py; its 4,088-token run is in
    docs/kernels.md and docs/known-gaps.md).  The issue's target: parley's
    KL no worse than llama.cpp's (measured here 0.0030 vs 0.0054 nats),
    top-1 agreement not below it (97.3% vs 95.7%; 0.5 points of slack for
    another machine's llama.cpp kernels)."""
    import sys

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "bench"))
    import int8_fidelity

    rows, n = int8_fidelity.measure(str(gemma_model), 1, 512, str(parley_build))
    (p_top1, p_kl, p_ppl), (l_top1, l_kl, l_ppl) = rows["parley int8"], rows["llama.cpp"]
    print(f"\n{n} positions: parley int8 top-1 {p_top1:.2%} KL {p_kl:.4f} ppl {p_ppl:.3f}; "
          f"llama.cpp top-1 {l_top1:.2%} KL {l_kl:.4f} ppl {l_ppl:.3f}; fp32 ppl {rows['parley fp32'][2]:.3f}")
    assert p_kl < l_kl and p_top1 > l_top1 - 0.005


@pytest.mark.parametrize("prompt", PROMPTS)
def test_greedy_64_tokens_match_transformers(gemma_model, parley_bin, hf, prompt):
    r = subprocess.run([str(parley_bin), "generate", str(gemma_model), "--fp32", "--prompt", prompt,
                        "-n", str(N_GREEDY), "--ignore-eos", "--print-ids", "--quiet", "--print-prompt-ids"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    lines = dict(ln.split(": ", 1) for ln in r.stdout.splitlines() if ": " in ln)
    prompt_ids = [int(x) for x in lines["prompt ids"].split(",")]
    got = [int(x) for x in lines["ids"].split(",")]
    with torch.no_grad():
        out = hf.generate(torch.tensor([prompt_ids]), max_new_tokens=N_GREEDY, min_new_tokens=N_GREEDY,
                          do_sample=False, top_p=None, top_k=None, temperature=None)
    ref = out[0, len(prompt_ids):].tolist()
    assert got == ref


def test_inspect_reports_types_resident_and_kv_bytes(gemma_model, parley_bin):
    import json
    r = subprocess.run([str(parley_bin), "inspect", str(gemma_model), "--json"], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["error"] is None
    assert set(d["tensors"]["by_type"]) == {"f32", "q5_0", "q8_0", "q4_K", "q6_K"}
    res = d["resident"]
    assert res["file_tensor_bytes"] == d["tensors"]["bytes"]
    # int8 values + scales of every weight (4-6 bit formats widened to 8); the
    # tied 262144 x 640 table is held once, in the output GEMM's pack
    assert res["file_tensor_bytes"] < res["bytes"] < 1.3 * res["file_tensor_bytes"]
    assert 0 < res["decode_step_bytes"] < res["bytes"]
    # per token at long context only the 3 global layers grow (the 15 sliding-window layers are
    # capped at 512 tokens): int8 K and V rows of 256, f32 scales: K one per 32 values, V one
    assert d["kv"]["bytes_per_token"] == 3 * (2 * 256 + 4 * (256 // 32 + 1))
