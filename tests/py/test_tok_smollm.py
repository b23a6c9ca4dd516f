r"""parley's tokenizer on SmolLM2's vocabulary: 49,152 byte-level BPE tokens
and 48,900 merges with tokenizer.ggml.pre "smollm", read from the real
SmolLM2-135M-Instruct Q4_1 GGUF (deploy/setup.sh model).

"smollm" is two splits in sequence (llama.cpp's two-regex list for
LLAMA_VOCAB_PRE_TYPE_SMOLLM, HF's Sequence[Digits(individual_digits=True),
ByteLevel] in SmolLM2's tokenizer.json): every \p{N} code point alone,
then GPT-2's regex on each run of non-numbers.

References on the same file, on the >= 10,000 held-out lines of
tests/tok/tok_data.py (code, prose, numbers, CJK, emoji, RTL, combining
marks, whitespace runs, invalid UTF-8):

* llama.cpp (llama-cpp-python 0.3.36, vocab only), with special-token
  parsing on (template text) and off (user content): ids identical on all
  but 15 of the 10,322 lines, and each of those 15 holds one of two things
  where llama.cpp departs from HF's tokenizers (the tokenizer the model
  was trained with), which parley follows:
  - a code point assigned after Unicode 14 that is \p{L} or \p{N} in
    Unicode 16 (HF's Oniguruma, parley's tables; e.g. U+1CCF0 OUTLINED
    DIGIT ZERO, new in 16.0).  llama.cpp's tables predate it, so its
    "smollm" split neither isolates it as a number nor groups it as a
    letter (13 lines);
  - a byte that has no token in this vocabulary (21 of the 256 GPT-2 byte
    tokens are missing: 0x04, 0x06, 0x13, 0x14, 0x16, 0x1D, 0xC0, 0xC1,
    0xF1, 0xF2, 0xF5-0xFF).  HF (no unk token) drops it before merging, so
    "=\x04{" is "={"; llama.cpp keeps it as a symbol that blocks merges
    and drops it after, giving "=", "{" (2 lines).
  The test asserts that every differing line holds such a code point or
  byte, and that they are under 0.5% of the lines.
* the tokenizer transformers builds from the GGUF (AutoTokenizer with
  gguf_file=).  transformers' GGUF converter does not read
  tokenizer.ggml.pre: it gives every byte-level BPE file of architecture
  llama the plain ByteLevel pre-tokenizer (GPT-2's regex alone), without
  SmolLM2's Digits(individual_digits) step.  The vocabulary has no
  multi-digit tokens, so digit runs come out the same either way; what
  differs is whitespace before a number: "x   4" is "x", "   ", "4" for
  the model's own tokenizer, llama.cpp and parley, but "x", "  ", " ",
  "4" for transformers' GGUF tokenizer, whose \s+(?!\S) gives the last
  space to the digit.  The test asserts that transformers equals parley on
  every line without a \p{N} code point
  (6,699 of them here), and that every line where they differ holds one.

Also: decode(encode(x)) == x and matches llama.cpp's detokenizer, the
ChatML control tokens are parsed only in template text, and every digit
(ASCII, Arabic-Indic, Roman numeral) is a piece of its own.
"""
import subprocess
import unicodedata

import pytest

regex = pytest.importorskip("regex")
NUMBER = regex.compile(r"\p{N}")
LETTER_OR_NUMBER = regex.compile(r"[\p{L}\p{N}]")

from test_tok_gemma import encode, run_tool, texts  # noqa: E402  (texts: the held-out lines)

__all__ = ["texts"]  # the module-scoped fixture, shared


@pytest.fixture(scope="module")
def llama(smollm_model):
    llama_cpp = pytest.importorskip("llama_cpp")
    return llama_cpp.Llama(model_path=str(smollm_model), vocab_only=True, verbose=False)


def has_number(t):
    """A \\p{N} code point in Unicode 16 (the `regex` module's tables;
    Python 3.11's str.isnumeric is Unicode 14)."""
    return NUMBER.search(t) is not None


@pytest.fixture(scope="module")
def missing_bytes(smollm_model):
    """The bytes whose GPT-2 byte token this vocabulary lacks."""
    gguf = pytest.importorskip("gguf")
    f = gguf.GGUFReader(str(smollm_model)).fields["tokenizer.ggml.tokens"]
    toks = {bytes(f.parts[i]).decode() for i in f.data}
    return {b for b in range(256) if gpt2_byte_char(b) not in toks}


def gpt2_byte_char(b):
    if 0x21 <= b <= 0x7E or 0xA1 <= b <= 0xAC or b >= 0xAE:
        return chr(b)
    return chr(0x100 + (b if b <= 0x20 else b - 0x7F + 0x21 if b <= 0xA0 else 0x21 + 0x22))


def newer_than_unicode14(t):
    """Code points Python 3.11 (Unicode 14) leaves unassigned that are
    letters or numbers in Unicode 16 (HF's and parley's tables)."""
    return [c for c in t if unicodedata.category(c) == "Cn" and LETTER_OR_NUMBER.match(c)]


@pytest.mark.parametrize("special", [True, False], ids=["special", "plain"])
def test_ids_identical_to_llama_cpp(smollm_model, llama, texts, missing_bytes, special):
    got = encode(smollm_model, texts, special)
    ref = [llama.tokenize(t.encode(), add_bos=False, special=special) for t in texts]
    bad = [i for i in range(len(texts)) if got[i] != ref[i]]
    unexplained = [i for i in bad if not newer_than_unicode14(texts[i])
                   and not missing_bytes.intersection(texts[i].encode())]
    detail = ["%r\n llama.cpp %s\n parley    %s" % (texts[i][:100], ref[i][:24], got[i][:24])
              for i in unexplained[:5]]
    assert not unexplained, "%d of %d lines differ:\n%s" % (len(unexplained), len(texts), "\n".join(detail))
    assert len(bad) < 0.005 * len(texts)
    print(f"\nllama.cpp: {len(texts) - len(bad)} of {len(texts)} lines identical; {len(bad)} differ, "
          "each on a code point newer than llama.cpp's tables or a byte with no token")
    # the held-out set exercises the digit split
    assert sum(has_number(t) for t in texts) > 1000


def test_ids_vs_transformers(smollm_model, llama, texts):
    transformers = pytest.importorskip("transformers")
    hf = transformers.AutoTokenizer.from_pretrained(str(smollm_model.parent), gguf_file=smollm_model.name)
    ref = [hf.encode(t, add_special_tokens=False) for t in texts]
    got = encode(smollm_model, texts, True)
    differ = [i for i in range(len(texts)) if got[i] != ref[i]]
    odd = [i for i in differ if not has_number(texts[i])]
    detail = ["%r\n hf     %s\n parley %s" % (texts[i][:100], ref[i][:24], got[i][:24]) for i in odd[:5]]
    assert not odd, "%d lines without numbers differ from transformers:\n%s" % (len(odd), "\n".join(detail))
    print(f"\ntransformers: {len(texts) - len(differ)} of {len(texts)} lines identical; "
          f"{len(differ)} differ, each with a number")
    # and the digit split is why: whitespace before a number
    mine = got_one(smollm_model, "x   4")
    assert mine == llama.tokenize(b"x   4", add_bos=False, special=False)
    assert hf.encode("x   4", add_special_tokens=False) != mine


def got_one(path, text):
    return encode(path, [text], False)[0]


def test_digits_split_one_by_one(smollm_model, llama):
    for text in ["In 2024, 3.14159 and ٣٤ (Arabic-Indic) or Ⅻ", "x=12345;y = 6  7\t8\n9"]:
        ids = got_one(smollm_model, text)
        assert ids == llama.tokenize(text.encode(), add_bos=False, special=False)
        pieces = [llama.detokenize([i]).decode("utf-8", "replace") for i in ids]
        assert all(len(p) == 1 for p in pieces if any(c.isdigit() for c in p)), pieces


def test_round_trip_and_decode_matches_llama_cpp(smollm_model, llama, texts, missing_bytes):
    # a byte with no token cannot come back
    valid = [t for t in texts if "\ufffd" not in t and not missing_bytes.intersection(t.encode())]
    ids = encode(smollm_model, valid, False)
    back = [bytes.fromhex(x) for x in run_tool(["decode", str(smollm_model)], [" ".join(map(str, v)) for v in ids])]
    bad = [i for i in range(len(valid)) if back[i] != valid[i].encode()]
    assert not bad, "%d lines do not round-trip, e.g. %r -> %r" % (len(bad), valid[bad[0]][:80], back[bad[0]][:80])
    for i in range(0, len(valid), 7):
        assert llama.detokenize(ids[i]) == back[i]


def test_chatml_control_tokens_only_in_template_text(smollm_model):
    im_start, im_end = 1, 2  # "<|im_start|>", "<|im_end|>" in this vocabulary
    plain = encode(smollm_model, ["<|im_start|>user\nhi<|im_end|>"], False)[0]
    assert im_start not in plain and im_end not in plain, "user text became a control token"
    special = encode(smollm_model, ["<|im_start|>user\nhi<|im_end|>"], True)[0]
    assert special[0] == im_start and special[-1] == im_end


def test_file_metadata(smollm_model, gguf_dump):
    meta = subprocess.run([str(gguf_dump), str(smollm_model)], capture_output=True, text=True, timeout=60).stdout
    assert "smollm" in meta and "tokenizer.chat_template" in meta
