"""parley's tokenizer on a real vocabulary: Gemma 3's 262,144 SentencePiece
pieces, read from the real Gemma 3 270M GGUF (deploy/setup.sh model).

Two independent references on the same file, on the >= 10,000 held-out
lines of tests/tok/tok_data.py (code, prose, CJK, emoji, RTL, combining
marks, whitespace runs, invalid UTF-8):

* llama.cpp (llama-cpp-python, vocab only): ids identical on every line,
  with special-token parsing on (template text) and off (user content).
* the tokenizer transformers builds from the GGUF (AutoTokenizer with
  gguf_file=): ids identical on every line where the two references agree.
  They disagree only on whitespace runs of 32 or more: the vocabulary keeps
  runs of up to 31 spaces, tabs and newlines as USER_DEFINED pieces, which
  SentencePiece and llama.cpp match greedily in raw text (31 + rest), while
  transformers' conversion leaves them to the merges.  parley follows
  llama.cpp there; the test asserts that every disagreement is such a line
  and that parley equals llama.cpp on them.

Also: decode(encode(x)) == x, the USER_DEFINED pieces are matched even in
user content while control tokens are not, "</s>" (typed USER_DEFINED in the
file) is a control end-of-generation token as in llama.cpp, and the file,
which carries no chat template, gets the gemma turn format.
"""
import os
import re
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tok"))
import tok_data  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("PARLEY_BUILD", os.path.join(REPO, "build"))
TOOL = os.path.join(BUILD, "tests", "tok", "tok_tool")
LONG_RUN = re.compile(r" {32}|\t{32}|\n{32}")


def run_tool(args, items):
    p = subprocess.run([TOOL] + args, input="".join(x + "\n" for x in items).encode(),
                       capture_output=True, timeout=300)
    assert p.returncode == 0, p.stderr.decode(errors="replace") + p.stdout.decode(errors="replace")[:500]
    return p.stdout.decode().split("\n")[:-1]


def encode(path, texts, special):
    out = run_tool(["encode", str(path)] + (["special"] if special else []),
                   [t.encode().hex() for t in texts])
    assert len(out) == len(texts)
    return [[int(x) for x in ln.split()] for ln in out]


@pytest.fixture(scope="module")
def texts():
    lines = tok_data.held_out_lines()
    assert len(lines) >= 10000
    # both references take str: ill-formed bytes replaced as parley does
    return [ln.decode("utf-8", "replace") for ln in lines]


@pytest.fixture(scope="module")
def llama(gemma_model):
    llama_cpp = pytest.importorskip("llama_cpp")
    return llama_cpp.Llama(model_path=str(gemma_model), vocab_only=True, verbose=False)


@pytest.mark.parametrize("special", [True, False], ids=["special", "plain"])
def test_ids_identical_to_llama_cpp(gemma_model, llama, texts, special):
    got = encode(gemma_model, texts, special)
    ref = [llama.tokenize(t.encode(), add_bos=False, special=special) for t in texts]
    bad = [i for i in range(len(texts)) if got[i] != ref[i]]
    detail = ["%r\n llama.cpp %s\n parley    %s" % (texts[i][:100], ref[i][:24], got[i][:24]) for i in bad[:5]]
    assert not bad, "%d of %d lines differ:\n%s" % (len(bad), len(texts), "\n".join(detail))


def test_ids_identical_to_transformers(gemma_model, llama, texts):
    transformers = pytest.importorskip("transformers")
    hf = transformers.AutoTokenizer.from_pretrained(str(gemma_model.parent), gguf_file=gemma_model.name)
    ref = [hf.encode(t, add_special_tokens=False) for t in texts]
    got = encode(gemma_model, texts, True)
    ll = [llama.tokenize(t.encode(), add_bos=False, special=True) for t in texts]
    refs_differ = {i for i in range(len(texts)) if ref[i] != ll[i]}
    bad = [i for i in range(len(texts)) if got[i] != ref[i] and i not in refs_differ]
    detail = ["%r\n hf     %s\n parley %s" % (texts[i][:100], ref[i][:24], got[i][:24]) for i in bad[:5]]
    assert not bad, "%d of %d lines differ from transformers:\n%s" % (len(bad), len(texts), "\n".join(detail))
    # where the references disagree: only whitespace runs past the longest piece
    odd = [texts[i][:80] for i in refs_differ if not LONG_RUN.search(texts[i])]
    assert not odd, "llama.cpp and transformers disagree on lines without long runs: %r" % odd[:3]
    assert len(refs_differ) < 0.01 * len(texts)


def test_round_trip_and_decode_matches_llama_cpp(gemma_model, llama, texts):
    valid = [t for t in texts if "\ufffd" not in t]
    ids = encode(gemma_model, valid, False)
    back = [bytes.fromhex(x) for x in run_tool(["decode", str(gemma_model)], [" ".join(map(str, v)) for v in ids])]
    bad = [i for i in range(len(valid)) if back[i] != valid[i].encode()]
    assert not bad, "%d lines do not round-trip, e.g. %r -> %r" % (len(bad), valid[bad[0]][:80], back[bad[0]][:80])
    for i in range(0, len(valid), 7):
        assert llama.detokenize(ids[i]) == back[i]


def test_user_defined_pieces_match_in_user_text_control_tokens_do_not(gemma_model):
    space4, end_turn, s_close = 140, 106, 212  # "    ", "<end_of_turn>", "</s>" in this vocabulary
    plain = encode(gemma_model, ["    x", "<end_of_turn>", "</s>"], False)
    assert plain[0][0] == space4
    assert end_turn not in plain[1] and s_close not in plain[2], "user text became a control token"
    special = encode(gemma_model, ["<end_of_turn>", "</s>"], True)
    assert special == [[end_turn], [s_close]]


def test_no_template_in_file_gives_gemma_turns(gemma_model, gguf_dump):
    meta = subprocess.run([str(gguf_dump), str(gemma_model)], capture_output=True, text=True, timeout=60).stdout
    assert "tokenizer.chat_template" not in meta
    out = subprocess.run([TOOL, "detect", str(gemma_model)], capture_output=True, timeout=60).stdout.decode()
    assert out.strip() == "gemma"
