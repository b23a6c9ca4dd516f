"""parley's tokenizers against Hugging Face `tokenizers`, id for id.

Trains a byte-level BPE (Llama 3 pre-tokenizer; also run with the Qwen2 and
GPT-2 pre-tokenizers) and a SentencePiece-style BPE with byte fallback
(Llama 2 and Gemma settings) on local text, writes them as GGUF vocabularies
(tests/tok/tok_data.py) and compares parley's ids (tests/tok/tok_tool) with
HF's on >= 10,000 held-out lines, including invalid UTF-8 (parley replaces
ill-formed bytes by U+FFFD exactly as bytes.decode("utf-8", "replace"), so
HF gets the replaced string).  Also: special tokens only when asked,
decode(encode(x)) == x, decode agrees with HF, and the streaming decoder
(checked inside tok_tool decode) emits only complete UTF-8.
"""
import os
import random
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tok"))
import tok_data  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("PARLEY_BUILD", os.path.join(REPO, "build"))
TOOL = os.path.join(BUILD, "tests", "tok", "tok_tool")
STRICT = os.environ.get("PARLEY_TEST_STRICT") == "1"
NAMES = ["bpe_llama3", "bpe_qwen2", "bpe_gpt2", "spm_llama2", "spm_gemma"]


@pytest.fixture(scope="session")
def toks(tmp_path_factory):
    if not os.path.exists(TOOL):
        pytest.fail("tok_tool not built at %s (set PARLEY_BUILD)" % TOOL)
    return tok_data.build_all(str(tmp_path_factory.mktemp("tok")))


@pytest.fixture(scope="session")
def lines():
    return tok_data.held_out_lines()


def run_tool(args, items):
    p = subprocess.run([TOOL] + args, input="".join(x + "\n" for x in items).encode(),
                       capture_output=True, timeout=300)
    assert p.returncode == 0, p.stderr.decode(errors="replace") + p.stdout.decode(errors="replace")[:500]
    return p.stdout.decode().split("\n")[:-1]


def encode(path, texts, special=True):
    out = run_tool(["encode", path] + (["special"] if special else []), [t.hex() for t in texts])
    assert len(out) == len(texts)
    return [[int(x) for x in ln.split()] for ln in out]


def decode(path, id_lists, special=False):
    out = run_tool(["decode", path] + (["special"] if special else []),
                   [" ".join(map(str, ids)) for ids in id_lists])
    return [bytes.fromhex(x) for x in out]


def test_held_out_covers_the_required_kinds(lines):
    assert len(lines) >= 10000
    text = b"\n".join(lines).decode("utf-8", "replace")
    assert any(0x4E00 <= ord(c) <= 0x9FFF for c in text)           # CJK
    assert any(0x1F600 <= ord(c) <= 0x1F64F for c in text)         # emoji
    assert any(0x0590 <= ord(c) <= 0x06FF for c in text)           # Hebrew/Arabic
    assert any(0x0300 <= ord(c) <= 0x036F for c in text)           # combining marks
    assert sum(1 for ln in lines if ln != ln.decode("utf-8", "replace").encode()) >= 500  # invalid UTF-8


@pytest.mark.parametrize("name", NAMES)
def test_ids_identical_to_hf(toks, lines, name):
    path, hf = toks[name]
    texts = [ln.decode("utf-8", "replace") for ln in lines]
    ref = [e.ids for e in hf.encode_batch(texts)]
    got = encode(path, lines)
    bad = [i for i in range(len(lines)) if got[i] != ref[i]]
    detail = ["%r\n hf  %s\n got %s" % (texts[i][:120], ref[i][:30], got[i][:30]) for i in bad[:5]]
    assert not bad, "%d of %d lines differ:\n%s" % (len(bad), len(lines), "\n".join(detail))


def test_pre_tokenizers_really_differ(toks):
    """The three byte-level variants split digits/contractions differently,
    so the comparisons above exercise each matcher."""
    text = [b"12345 don't 'S"]
    ids = {n: encode(toks[n][0], text)[0] for n in ("bpe_llama3", "bpe_qwen2", "bpe_gpt2")}
    assert ids["bpe_llama3"] != ids["bpe_qwen2"] != ids["bpe_gpt2"]


@pytest.mark.parametrize("name", ["bpe_llama3", "spm_llama2"])
def test_special_tokens_only_when_asked(toks, name):
    path, hf = toks[name]
    sp = [t for t in (tok_data.BPE_SPECIALS if name.startswith("bpe") else tok_data.SPM_SPECIALS)]
    texts = [("x%sy" % s).encode() for s in sp]
    with_special = encode(path, texts, special=True)
    plain = encode(path, texts, special=False)
    special_ids = {hf.token_to_id(s) for s in sp}
    for w, p in zip(with_special, plain):
        assert special_ids & set(w)
        assert not (special_ids & set(p)), "user text became a control token"


@pytest.mark.parametrize("name", NAMES)
def test_round_trip_and_decode_matches_hf(toks, lines, name):
    path, hf = toks[name]
    valid = [ln for ln in lines if ln == ln.decode("utf-8", "replace").encode()]
    ids = encode(path, valid, special=False)
    back = decode(path, ids)
    bad = [i for i in range(len(valid)) if back[i] != valid[i]]
    assert not bad, "%d lines do not round-trip, e.g. %r -> %r" % (len(bad), valid[bad[0]][:80],
                                                                  back[bad[0]][:80])
    hf_dec = hf.decode_batch(ids[:2000], skip_special_tokens=True)
    assert [b.decode() for b in back[:2000]] == hf_dec


@pytest.mark.parametrize("name", ["bpe_llama3", "spm_gemma"])
def test_random_ids_decode_and_stream(toks, name):
    """Arbitrary id sequences (partial UTF-8 byte tokens included): decode
    is valid UTF-8; tok_tool checks that the streaming chunks are each valid
    and concatenate to the same text.  For the byte-level vocabulary the
    text equals HF's decode (both replace per maximal subpart)."""
    path, hf = toks[name]
    rng = random.Random(5)
    n = hf.get_vocab_size()
    lists = [[rng.randrange(n) for _ in range(rng.randint(0, 30))] for _ in range(1000)]
    out = decode(path, lists)
    for b in out:
        b.decode("utf-8")  # raises if invalid
    if name.startswith("bpe"):
        assert [b.decode() for b in out] == hf.decode_batch(lists, skip_special_tokens=True)


@pytest.mark.parametrize("name", NAMES)
def test_ids_match_llama_cpp(toks, lines, name):
    """An independent implementation on the same GGUF: llama.cpp (through
    llama-cpp-python, vocab only).  Lines with characters assigned in
    Unicode 15.0-16.0 are left out: llama.cpp's own Unicode tables are older
    than HF's Oniguruma (there parley follows HF, see
    tests/tok/gen_unicode_tables.py)."""
    import llama_cpp  # in the test venv (tests/run.sh installs it)
    path, _ = toks[name]
    new = set(tok_data._POOLS["new_unicode"])
    sel = [ln for ln in lines if not new & set(ln.decode("utf-8", "replace"))]
    m = llama_cpp.Llama(path, vocab_only=True, verbose=False)
    got = encode(path, sel, special=False)
    bad = [i for i, ln in enumerate(sel)
           if m.tokenize(ln.decode("utf-8", "replace").encode(), add_bos=False, special=False) != got[i]]
    assert not bad, "%d of %d lines differ from llama.cpp, e.g. %r" % (len(bad), len(sel), sel[bad[0]][:80])


def test_mkmodel_vocab(tmp_path):
    """parley mkmodel's synthetic vocabulary: the chat template is
    recognised as llama3 and ids agree with llama.cpp."""
    parley = os.environ.get("PARLEY_BIN", os.path.join(BUILD, "consumer", "parley"))
    if not os.path.exists(parley):
        (pytest.fail if STRICT else pytest.skip)("parley binary not built at %s" % parley)
    import llama_cpp
    path = str(tmp_path / "tiny.gguf")
    subprocess.run([parley, "mkmodel", "--preset", "tiny-llama", "--out", path], check=True,
                   capture_output=True, timeout=60)
    out = subprocess.run([TOOL, "detect", path], capture_output=True, timeout=30).stdout.decode()
    assert out.strip() == "llama3"
    texts = [b"Hello world, how are you today?", b"The user said: 12345!\n\n  ok", "naïve café 😀".encode()]
    m = llama_cpp.Llama(path, vocab_only=True, verbose=False)
    assert encode(path, texts, special=False) == [m.tokenize(t, add_bos=False, special=False) for t in texts]
