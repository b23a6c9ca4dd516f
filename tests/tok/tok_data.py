"""Test data and reference tokenizers for parley's tokenizer tests.

Builds real tokenizers with the Hugging Face `tokenizers` library (trained
locally, no download) and writes each one into a vocab-only GGUF with the
tokenizer.ggml.* keys llama.cpp's converter writes, so the C tokenizer
(through tests/tok/tok_tool) can be compared id for id with HF:

  bpe_llama3   byte-level BPE, Llama 3 pre-tokenizer (Split on Llama 3's
               regex + ByteLevel), ignore_merges as Llama 3's tokenizer.json
  bpe_qwen2    same vocab/merges, Qwen2's regex (single \\p{N})
  bpe_gpt2     same vocab/merges, GPT-2's ByteLevel regex
  spm_llama2   SentencePiece-style BPE with byte fallback as Llama 2's
               tokenizer.json: Prepend("▁") + Replace(" ", "▁") normalizer,
               no pre-tokenizer, merges = every split of every piece ordered
               by piece score (transformers' SentencePieceExtractor)
  spm_gemma    the same vocabulary without the prepended "▁" (Gemma)

Text: training on Python stdlib sources + /usr/share/doc + generated
multilingual lines; evaluation on disjoint held-out lines (other files,
other generator seeds) covering ASCII, whitespace runs, code, numbers, CJK,
emoji, RTL scripts, combining marks and invalid UTF-8.  Invalid UTF-8 goes
to HF as bytes.decode("utf-8", "replace"), which is parley's documented
behaviour for ill-formed input.
"""
import glob
import os
import random

import gguf
from tokenizers import (AddedToken, Regex, Tokenizer, decoders, models,
                        normalizers, pre_tokenizers, trainers)

LLAMA3_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
             r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
            r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

BPE_SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>",
                "<|end_header_id|>", "<|eot_id|>", "<|im_start|>", "<|im_end|>"]
SPM_SPECIALS = ["<unk>", "<s>", "</s>", "<bos>", "<eos>", "<start_of_turn>",
                "<end_of_turn>"]
PYLIB = "/root/.pyenv/versions/3.11.7/lib/python3.11"
TEMPLATES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "templates")

# ---------------------------------------------------------------- text

_POOLS = {
    "cjk": [chr(c) for c in range(0x4E00, 0x4E00 + 3000)],
    "kana": [chr(c) for c in range(0x3041, 0x3097)] + [chr(c) for c in range(0x30A1, 0x30FB)],
    "hangul": [chr(c) for c in range(0xAC00, 0xAC00 + 800)],
    "arabic": [chr(c) for c in range(0x0621, 0x064B)] + [chr(c) for c in range(0x0660, 0x066A)],
    "hebrew": [chr(c) for c in range(0x05D0, 0x05EB)],
    "cyrillic": [chr(c) for c in range(0x0410, 0x0450)],
    "greek": [chr(c) for c in range(0x03B1, 0x03CA)],
    "devanagari": [chr(c) for c in range(0x0905, 0x0940)] + [chr(c) for c in range(0x0966, 0x0970)],
    "thai": [chr(c) for c in range(0x0E01, 0x0E3A)],
    "latin_ext": list("àáâãäåæçèéêëìíîïñòóôõöøùúûüýÿœšžßĳſǅ"),
    "digits": list("0123456789") + list("٠١٢٣٤٥٦٧٨٩") + list("०१२३४५") + list("²³¹½⅓Ⅻ①０１２"),
    "punct": list("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~¡¿«»—–…‘’“”„†‰、。「」『』！？（）"),
    "emoji": ["😀", "😂", "🥲", "👍", "👍🏽", "❤️", "🇫🇷", "🇯🇵", "👨‍👩‍👧‍👦", "🧑🏿‍💻", "🐍", "✨", "🔥", "🤖",
              "\u2764", "\u2601\ufe0f", "#️⃣", "🏳️‍🌈"],
    "combining": ["e\u0301", "a\u0308", "n\u0303", "o\u0302\u0323", "\u0915\u094d\u0937", "\u0645\u064e",
                  "\u05e9\u05c1", "Z\u0351\u036b\u0343", "\u0301", "\u20dd"],
    "space": [" ", "  ", "\t", "\u00a0", "\u3000", "\u2028", "\u2009", "\x0b", "\x0c", "\x1c", "\x1f",
              "\x85", "\r\n", "\n", "\r", "    ", " \n ", "\u200b", "\ufeff"],
    # assigned in Unicode 15.0-16.0 (unknown to Python 3.11's unicodedata,
    # letters/numbers for HF's Oniguruma) and unassigned code points
    "new_unicode": [chr(c) for c in (0x1C89, 0x1C8A, 0x31350, 0x31351, 0x2EBF0, 0x2EBF1, 0x10D4A, 0x10D50,
                                     0x1E030, 0x11F04, 0x1D2C0, 0x1D2C5, 0x1E4F0, 0x1E4F5, 0x1CCF0, 0x1CCF5,
                                     0x0378, 0xE01F0, 0x10FFFD, 0xFDD0)],
    "words": ["the", "The", "don't", "DON'T", "it's", "IT'S", "we're", "they've", "I'm", "you'll",
              "she'd", "'S", "'ſ", "ſ", "hello", "world", "x", "foo_bar", "café", "naïve", "Straße",
              "Москва", "東京", "서울", "القاهرة", "ירושלים", "नमस्ते", "ภาษาไทย", "Ελλάδα"],
}


def _gen_line(rng):
    kinds = list(_POOLS)
    parts = []
    for _ in range(rng.randint(1, 14)):
        pool = _POOLS[rng.choice(kinds)]
        k = rng.randint(1, 6)
        parts.append("".join(rng.choice(pool) for _ in range(k)))
        if rng.random() < 0.5:
            parts.append(rng.choice([" ", " ", " ", "", "  ", "\t", "\n"]))
    return "".join(parts)


def _gen_numbers(rng):
    return rng.choice([
        lambda: str(rng.randint(0, 10 ** rng.randint(1, 15))),
        lambda: "%d.%d" % (rng.randint(0, 999), rng.randint(0, 99999)),
        lambda: " ".join(str(rng.randint(0, 99999)) for _ in range(rng.randint(1, 6))),
        lambda: "x%d=%de%d" % (rng.randint(0, 9), rng.randint(0, 999), rng.randint(-9, 9)),
        lambda: "١٢٣٤٥ and ४२ and ５６７８",
    ])()


def _gen_ws(rng):
    return "".join(rng.choice(["word", " ", "  ", "\t", "\n", "\r\n", "   \n\n", "x", "  y  "])
                   for _ in range(rng.randint(1, 20)))


def _read_lines(paths, limit):
    out = []
    for p in paths:
        try:
            with open(p, "rb") as f:
                data = f.read(200_000)
        except OSError:
            continue
        for ln in data.split(b"\n"):
            out.append(ln.decode("utf-8", "replace"))
            if len(out) >= limit:
                return out
    return out


def _doc_files():
    files = sorted(glob.glob("/usr/share/doc/*/copyright")) + sorted(glob.glob("/usr/share/doc/*/README*"))
    return [f for f in files if not f.endswith(".gz")]


def training_text():
    """Lines to train on (deterministic)."""
    rng = random.Random(1)
    py = sorted(glob.glob(PYLIB + "/*.py"))
    lines = _read_lines(py[::2], 40000)
    lines += _read_lines(_doc_files()[::2], 15000)
    lines += [_gen_line(rng) for _ in range(6000)]
    lines += [_gen_numbers(rng) for _ in range(1000)]
    return lines


def held_out_lines():
    """Evaluation lines as bytes, disjoint from training: >= 10,000."""
    rng = random.Random(2)
    py = sorted(glob.glob(PYLIB + "/*.py"))
    lines = [ln.encode() for ln in _read_lines(py[1::2], 4000)]
    lines += [ln.encode() for ln in _read_lines(_doc_files()[1::2], 1500)]
    lines += [_gen_line(rng).encode() for _ in range(3000)]
    lines += [_gen_numbers(rng).encode() for _ in range(500)]
    lines += [_gen_ws(rng).encode() for _ in range(500)]
    # whole multi-line chunks of code (newline and indentation runs)
    src = open(py[3], "rb").read().split(b"\n")
    lines += [b"\n".join(src[i:i + 12]) for i in range(0, min(len(src), 3000), 12)]
    # invalid UTF-8: random bytes spliced into valid lines
    bad = [b"\xff", b"\xfe", b"\xc0\xaf", b"\xe2\x82", b"\xed\xa0\x80", b"\xf0\x9f\x98", b"\x80\x80",
           b"\xf4\x90\x80\x80", b"\xc3", b"\xe0\x80\x80"]
    for i in range(600):
        base = lines[rng.randrange(len(lines))]
        pos = rng.randint(0, len(base))
        lines.append(base[:pos] + rng.choice(bad) + base[pos:])
    for i in range(200):
        lines.append(bytes(rng.randrange(256) for _ in range(rng.randint(1, 40))))
    # special-token texts inside content (must stay text) and edge cases
    lines += [b"<|eot_id|>hello", b"<s>[INST] hi [/INST]", b"</s>", b"<unk>", b"", b" ", b"  ", b"\n",
              b"a" * 3000, b" " * 1000, b"\t\n" * 300, "😀".encode() * 200, "'ſ 'S 'LL".encode()]
    return lines


# ---------------------------------------------------------------- tokenizers

def _train_bpe(lines):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_RE), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    trainer = trainers.BpeTrainer(vocab_size=4000, special_tokens=BPE_SPECIALS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(lines, trainer)
    m = tok.to_str()
    import json
    j = json.loads(m)
    vocab = j["model"]["vocab"]
    merges = [tuple(x.split(" ", 1)) if isinstance(x, str) else tuple(x) for x in j["model"]["merges"]]
    return vocab, merges


def bpe_tokenizer(vocab, merges, pre):
    """HF tokenizer for a byte-level vocab with pre in llama3|qwen2|gpt2."""
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, ignore_merges=(pre == "llama3")))
    if pre == "gpt2":
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    else:
        rx = LLAMA3_RE if pre == "llama3" else QWEN2_RE
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(rx), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in BPE_SPECIALS])
    return tok


def _train_spm(lines):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always")
    trainer = trainers.BpeTrainer(vocab_size=3000, show_progress=False, limit_alphabet=1500)
    tok.train_from_iterator(lines, trainer)
    trained = sorted(tok.get_vocab().items(), key=lambda kv: kv[1])
    pieces = SPM_SPECIALS[:3] + ["<0x%02X>" % b for b in range(256)] + SPM_SPECIALS[3:]
    nspecial = len(pieces)
    seen = set(pieces)
    for p, _ in trained:
        if p not in seen:
            seen.add(p)
            pieces.append(p)
    vocab = {p: i for i, p in enumerate(pieces)}
    scores = [0.0 if i < nspecial else -float(i) for i in range(len(pieces))]
    # transformers' SentencePieceExtractor: every split of every piece into
    # two pieces, ordered by the merged piece's score (control/byte pieces
    # never merge, as in SentencePiece)
    merges = []
    for i, piece in enumerate(pieces):
        if i < nspecial:
            continue
        local = []
        for k in range(1, len(piece)):
            l, r = piece[:k], piece[k:]
            if l in vocab and r in vocab and vocab[l] >= nspecial and vocab[r] >= nspecial:
                local.append((l, r, scores[i]))
        local.sort(key=lambda x: (vocab[x[0]], vocab[x[1]]))
        merges.extend(local)
    merges.sort(key=lambda x: x[2], reverse=True)
    return pieces, scores, [(l, r) for l, r, _ in merges], nspecial


def spm_tokenizer(pieces, merges, prefix):
    vocab = {p: i for i, p in enumerate(pieces)}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token="<unk>", fuse_unk=True,
                               byte_fallback=True))
    norms = [normalizers.Replace(" ", "\u2581")]
    if prefix:
        norms.insert(0, normalizers.Prepend("\u2581"))
    tok.normalizer = normalizers.Sequence(norms)
    dec = [decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse()]
    if prefix:
        dec.append(decoders.Strip(" ", 1, 0))
    tok.decoder = decoders.Sequence(dec)
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in SPM_SPECIALS])
    return tok


def write_gguf(path, model, pieces, types, scores=None, merges=None, pre=None, bos=None, eos=None,
               eot=None, unk=None, add_bos=True, add_space_prefix=None, template=None, arch="llama"):
    w = gguf.GGUFWriter(path, arch)
    w.add_tokenizer_model(model)
    if pre:
        w.add_tokenizer_pre(pre)
    w.add_token_list(pieces)
    w.add_token_types(types)
    if scores is not None:
        w.add_token_scores(scores)
    if merges is not None:
        w.add_token_merges(["%s %s" % m for m in merges])
    for fn, v in ((w.add_bos_token_id, bos), (w.add_eos_token_id, eos), (w.add_eot_token_id, eot),
                  (w.add_unk_token_id, unk)):
        if v is not None:
            fn(v)
    w.add_add_bos_token(add_bos)
    if add_space_prefix is not None:
        w.add_add_space_prefix(add_space_prefix)
    if template is not None:
        w.add_chat_template(template)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def template_text(name):
    with open(os.path.join(TEMPLATES, name + ".jinja")) as f:
        return f.read()


_BUILT = {}


def build_all(outdir):
    """Train both vocabularies and write the five GGUFs into outdir; returns
    {name: (gguf_path, hf_tokenizer)}.  Built once per process: later calls
    return the first build (its directory must outlive them, as pytest's
    session temporary directories do)."""
    if _BUILT:
        return _BUILT
    lines = training_text()
    out = {}
    vocab, merges = _train_bpe(lines)
    pieces = [p for p, _ in sorted(vocab.items(), key=lambda kv: kv[1])]
    types = [3 if p in BPE_SPECIALS else 1 for p in pieces]
    ids = {p: i for i, p in enumerate(pieces)}
    for name, pre, gpre, tmpl in (("bpe_llama3", "llama3", "llama-bpe", "llama3"),
                                  ("bpe_qwen2", "qwen2", "qwen2", "chatml"),
                                  ("bpe_gpt2", "gpt2", "gpt-2", None)):
        path = os.path.join(outdir, name + ".gguf")
        write_gguf(path, "gpt2", pieces, types, merges=merges, pre=gpre, bos=ids["<|begin_of_text|>"],
                   eos=ids["<|end_of_text|>"], eot=ids["<|eot_id|>"], add_bos=True,
                   template=template_text(tmpl) if tmpl else None)
        out[name] = (path, bpe_tokenizer(vocab, merges, pre))
    spieces, scores, smerges, nspecial = _train_spm(lines)
    stypes = [2 if p == "<unk>" else 3 if p in SPM_SPECIALS else 6 if i < nspecial else 1
              for i, p in enumerate(spieces)]
    sid = {p: i for i, p in enumerate(spieces)}
    for name, prefix, tmpl, bos, eos in (("spm_llama2", True, "llama2", "<s>", "</s>"),
                                         ("spm_gemma", False, "gemma3", "<bos>", "<eos>")):
        path = os.path.join(outdir, name + ".gguf")
        write_gguf(path, "llama", spieces, stypes, scores=scores, bos=sid[bos], eos=sid[eos], unk=0,
                   add_bos=True, add_space_prefix=prefix, template=template_text(tmpl))
        out[name] = (path, spm_tokenizer(spieces, smerges, prefix))
    _BUILT.update(out)
    return out
