"""The real SmolLM2-135M-Instruct Q4_1 file (deploy/setup.sh model): the
`llama` architecture at this model's shapes (30 layers, n_embd 576, 9
query heads over 3 KV heads, head_dim 64, rope base 100000, tied Q8_0
embedding/output table, Q4_1 everywhere else), against two references.

* fp32 path vs transformers, which dequantises the same GGUF to fp32
  (from_pretrained(..., gguf_file=...)): logits over a 128-token prefill of
  English prose (the GPL-3 text on every Debian machine) plus 32
  single-token decode steps.  Metric: per position,
  max_v |parley - hf| / max_v |hf|; the worst position must be below 1e-4
  (measured 4.4e-6).
* greedy decoding vs llama.cpp (llama-cpp-python): 5 ChatML prompts (the
  file's default system prompt), 32 tokens each, identical.  llama.cpp
  runs an F32 GGUF of the same weights (transformers' exact dequantisation
  of this file, written back by tests/py/hf2gguf.py as llama.cpp's
  converter does), so both sides compute the same model in fp32.  On the
  Q4_1 file itself llama.cpp rounds every activation to 8 bits (Q8_1)
  before its Q4_1 dot products, which is a different model: it answers
  "What is the capital of France?" with "L'Étoile, ..." where the fp32
  model (transformers, llama.cpp on F32, parley --fp32) says "The capital
  of France is Paris."  That comparison is tests/bench/int8_fidelity.py's.
* the int8 path against the fp32 path on 511 tokens of licence text, next
  to llama.cpp on the Q4_1 file against the same reference.  parley's int8
  path is behind llama.cpp on this model (4,088 tokens: top-1 94.69% and
  KL 0.0090 nats against llama.cpp's 96.21% and 0.0051; docs/known-gaps.md),
  so this is a regression bound, not the Gemma test's "no worse than
  llama.cpp".
"""
import os
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

N_PREFILL, N_DECODE, N_GREEDY = 128, 32, 32
SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
QUESTIONS = ["What is the capital of France?", "Write a Python function that reverses a string.",
             "Give me three tips for baking bread.", "Why is the sky blue?",
             "Translate 'good morning' into Spanish and German."]


@pytest.fixture(scope="module")
def hf(smollm_model):
    m = transformers.AutoModelForCausalLM.from_pretrained(str(smollm_model.parent), gguf_file=smollm_model.name,
                                                          dtype=torch.float32)
    return m.eval()


def prompt_ids(parley_bin, model, text):
    r = subprocess.run([str(parley_bin), "generate", str(model), "--prompt", text, "-n", "1",
                        "--print-ids", "--quiet", "--print-prompt-ids"], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("prompt ids: "))
    return [int(x) for x in line[len("prompt ids: "):].split(",")]


@pytest.fixture(scope="module")
def prose_ids(smollm_model, parley_bin):
    text = open("/usr/share/common-licenses/GPL-3", encoding="utf-8").read()[2000:4000]
    ids = prompt_ids(parley_bin, smollm_model, text)
    # tokenizer.ggml.add_bos_token is false in this file: the text alone
    assert ids[0] != 1 and len(ids) >= N_PREFILL + N_DECODE
    return ids[:N_PREFILL + N_DECODE]


def engine_logits(exe, model, ids, tmp_path, *args):
    ids_f, out_f = tmp_path / "ids.bin", tmp_path / "out.bin"
    np.asarray(ids, np.int32).tofile(ids_f)
    r = subprocess.run([str(exe), str(model), str(ids_f), str(out_f), *args],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    return np.fromfile(out_f, np.float32).reshape(len(ids), -1), r.stdout


def test_fp32_logits_match_transformers(smollm_model, parley_build, hf, prose_ids, tmp_path):
    with torch.no_grad():
        ref = hf(torch.tensor(prose_ids)[None]).logits[0].float().numpy()
    got, _ = engine_logits(parley_build / "tests" / "model" / "eng_logits", smollm_model, prose_ids, tmp_path,
                           "--prefill", str(N_PREFILL), "--fp32")
    err = np.abs(got - ref).max(axis=1) / np.abs(ref).max(axis=1)
    print(f"\nfp32 vs transformers: worst position {err.argmax()} rel err {err.max():.3g}, mean {err.mean():.3g}")
    assert err.max() < 1e-4, "worst position %d: rel err %.3g" % (err.argmax(), err.max())
    assert (got.argmax(1) == ref.argmax(1)).all()


def test_greedy_matches_llama_cpp(smollm_model, parley_build, hf, tmp_path):
    llama_cpp = pytest.importorskip("llama_cpp")
    sys.path.insert(0, os.path.dirname(__file__))
    import hf2gguf

    f32 = tmp_path / "smollm2-f32.gguf"
    hf2gguf.convert(hf, f32)
    vocab = llama_cpp.Llama(model_path=str(smollm_model), vocab_only=True, verbose=False)
    llm = llama_cpp.Llama(model_path=str(f32), n_ctx=256, n_threads=2, n_batch=64, logits_all=True,
                          verbose=False)
    answers = []
    for q in QUESTIONS:
        chat = (f"<|im_start|>system\n{SYSTEM}<|im_end|>\n<|im_start|>user\n{q}<|im_end|>\n"
                "<|im_start|>assistant\n")
        ids = vocab.tokenize(chat.encode(), add_bos=False, special=True)
        llm.reset()
        llm.eval(ids)
        ref = []
        for _ in range(N_GREEDY):
            ref.append(int(np.argmax(np.asarray(llm.scores[llm.n_tokens - 1]))))
            llm.eval([ref[-1]])
        _, out = engine_logits(parley_build / "tests" / "model" / "eng_logits", smollm_model, ids, tmp_path,
                               "--fp32", "--greedy", str(N_GREEDY))
        mine = [int(x) for x in out.strip().split(",")]
        assert mine == ref, "%r:\n llama.cpp %r\n parley    %r" % (q, vocab.detokenize(ref), vocab.detokenize(mine))
        answers.append(ref)
    assert len({t for a in answers for t in a}) > 50, "degenerate reference"
    # the fp32 model answers the first question
    assert b"Paris" in vocab.detokenize(answers[0])


def test_int8_fidelity_next_to_llama_cpp(smollm_model, parley_build):
    """int8 vs the fp32 path on 511 teacher-forced tokens of licence text,
    next to llama.cpp on the Q4_1 file against the same reference
    (tests/bench/int8_fidelity.py).  A regression bound: parley's int8 is
    behind llama.cpp here (see the module docstring)."""
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "bench"))
    import int8_fidelity

    rows, n = int8_fidelity.measure(str(smollm_model), 1, 512, str(parley_build))
    (p_top1, p_kl, p_ppl), (l_top1, l_kl, l_ppl) = rows["parley int8"], rows["llama.cpp"]
    print(f"\n{n} positions: parley int8 top-1 {p_top1:.2%} KL {p_kl:.4f} ppl {p_ppl:.3f}; "
          f"llama.cpp top-1 {l_top1:.2%} KL {l_kl:.4f} ppl {l_ppl:.3f}; fp32 ppl {rows['parley fp32'][2]:.3f}")
    assert p_kl < 0.015 and p_top1 > 0.92
    assert p_kl < 3 * l_kl
