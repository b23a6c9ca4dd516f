"""parley's built-in chat formats against transformers' apply_chat_template
on the original Jinja texts (tests/tok/templates/), template recognition
from GGUF metadata, and prefix stability across turns.

The tokenizers are the locally trained ones of tests/tok/tok_data.py wrapped
in PreTrainedTokenizerFast with the template set; parley renders through
tests/tok/tok_tool (text and ids).
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

# format -> (gguf built by tok_data, template file, bos, eos)
CASES = {
    "llama3": ("bpe_llama3", "llama3", "<|begin_of_text|>", "<|end_of_text|>"),
    "chatml": ("bpe_qwen2", "chatml", "<|begin_of_text|>", "<|im_end|>"),
    "smollm2": ("bpe_qwen2", "smollm2", "<|begin_of_text|>", "<|im_end|>"),
    "llama2": ("spm_llama2", "llama2", "<s>", "</s>"),
    "gemma": ("spm_gemma", "gemma3", "<bos>", "<eos>"),
    "gemma2": ("spm_gemma", "gemma", "<bos>", "<eos>"),
    "transcript": ("spm_gemma", "transcript", "<bos>", "<eos>"),
}


@pytest.fixture(scope="session")
def toks(tmp_path_factory):
    if not os.path.exists(TOOL):
        pytest.fail("tok_tool not built at %s (set PARLEY_BUILD)" % TOOL)
    return tok_data.build_all(str(tmp_path_factory.mktemp("tmpl")))


def hf_wrap(hf, tmpl, bos, eos):
    from transformers import PreTrainedTokenizerFast
    return PreTrainedTokenizerFast(tokenizer_object=hf, bos_token=bos, eos_token=eos,
                                   chat_template=tok_data.template_text(tmpl))


CONTENT = ["Hello!", "  padded both sides  ", "line one\nline two\n\n", "日本語で答えて", "emoji 😀👍🏽 ok",
           "code:\n```py\ndef f(x):\n    return x * 2\n```", "مرحبا بالعالم", "e\u0301 combining",
           "\tTabs\tand  spaces ", "numbers 1234567 and 3.14", "What's up? I'm fine.", "\u3000ideographic space\u3000",
           "x", "Mixed: Ελληνικά Русский 한국어", "trailing newline\n", "\u00a0nbsp\u00a0"]


def conversations(fmt, rng):
    """20 conversations valid for the format (alternating where required)."""
    convs = []
    for i in range(20):
        turns = rng.randint(1, 6)
        msgs = []
        if i % 3 == 0 and fmt != "gemma2":
            msgs.append({"role": "system", "content": rng.choice(CONTENT)})
        for k in range(turns):
            msgs.append({"role": "user" if k % 2 == 0 else "assistant", "content": rng.choice(CONTENT)})
        if fmt in ("llama3", "chatml", "smollm2") and i % 5 == 4:
            msgs.append({"role": "tool", "content": rng.choice(CONTENT)})
        convs.append(msgs)
    return convs


def enc_conv(msgs):
    return ",".join("%s:%s" % (m["role"].encode().hex(), m["content"].encode().hex()) for m in msgs)


def render(path, fmt, convs, gen):
    p = subprocess.run([TOOL, "render", path, fmt, "1" if gen else "0"],
                       input="".join(enc_conv(c) + "\n" for c in convs).encode(), capture_output=True, timeout=120)
    assert p.returncode == 0, p.stderr.decode()
    res, cur = [], None
    for ln in p.stdout.decode().split("\n")[:-1]:
        kind, _, rest = ln.partition(" ")
        if kind == "T":
            cur = {"text": bytes.fromhex(rest).decode()}
            res.append(cur)
        elif kind == "I":
            cur["ids"] = [int(x) for x in rest.split()]
        elif kind == "S":
            cur["stable"] = int(rest)
        elif kind == "E":
            if cur is not None and "ids" not in cur:
                cur["ids_error"] = rest
            else:
                res.append({"error": rest})
    return res


@pytest.mark.parametrize("fmt", list(CASES))
@pytest.mark.parametrize("gen", [True, False])
def test_render_matches_transformers(toks, fmt, gen):
    name, tmpl, bos, eos = CASES[fmt]
    path, hf = toks[name]
    tok = hf_wrap(hf, tmpl, bos, eos)
    convs = conversations(fmt, random.Random(hash(fmt) & 0xFFFF))
    got = render(path, fmt, convs, gen)
    assert len(got) == len(convs)
    for conv, g in zip(convs, got):
        want = tok.apply_chat_template(conv, tokenize=False, add_generation_prompt=gen)
        assert g.get("text") == want, conv
        want_ids = tok.apply_chat_template(conv, tokenize=True, add_generation_prompt=gen)
        if isinstance(want_ids, dict) or hasattr(want_ids, "keys"):
            want_ids = want_ids["input_ids"]
        assert g.get("ids") == list(want_ids), conv


@pytest.mark.parametrize("fmt,conv,msg", [
    ("llama2", [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}], "alternate"),
    ("llama2", [{"role": "assistant", "content": "a"}], "alternate"),
    ("gemma", [{"role": "system", "content": "s"}, {"role": "assistant", "content": "a"}], "alternate"),
    ("gemma", [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}], "alternate"),
    ("gemma2", [{"role": "system", "content": "s"}, {"role": "user", "content": "a"}], "System role"),
])
def test_role_errors_like_the_original(toks, fmt, conv, msg):
    name, tmpl, bos, eos = CASES[fmt]
    path, hf = toks[name]
    tok = hf_wrap(hf, tmpl, bos, eos)
    with pytest.raises(Exception, match=msg):
        tok.apply_chat_template(conv, tokenize=False)
    got = render(path, fmt, [conv], False)
    assert "error" in got[0] and msg in got[0]["error"]


def test_detect_from_gguf_and_override(toks):
    for fmt, (name, _, _, _) in CASES.items():
        if fmt in ("gemma2", "transcript", "smollm2"):
            continue  # the Gemma GGUF carries Gemma 3's template, the Qwen one ChatML
        out = subprocess.run([TOOL, "detect", toks[name][0]], capture_output=True, timeout=30).stdout.decode()
        assert out.strip() == fmt
    # the gpt-2 GGUF carries no template: refused, naming the override
    out = subprocess.run([TOOL, "detect", toks["bpe_gpt2"][0]], capture_output=True, timeout=30).stdout.decode()
    assert out.startswith("E ") and "chat_template" in out
    out = subprocess.run([TOOL, "detect", toks["bpe_gpt2"][0], "chatml"], capture_output=True,
                         timeout=30).stdout.decode()
    assert out.strip() == "chatml"


@pytest.mark.parametrize("arch,fmt", [("gemma3", "gemma"), ("gemma2", "gemma2"), ("qwen2", "chatml"),
                                      ("qwen3", "chatml"), ("llama", None)])
def test_no_template_uses_the_architectures_format(arch, fmt, tmp_path):
    """A file without tokenizer.chat_template (Gemma 3 270M ships none) gets
    its architecture's turn format; llama has no single one and is refused."""
    pieces = ["<unk>", "<s>", "</s>", "<start_of_turn>", "<end_of_turn>", "<|im_start|>", "<|im_end|>", "a"]
    path = str(tmp_path / "v.gguf")
    tok_data.write_gguf(path, "llama", pieces, [2, 3, 3, 3, 3, 3, 3, 1], scores=[0.0] * len(pieces),
                        bos=1, eos=2, unk=0, arch=arch)
    out = subprocess.run([TOOL, "detect", path], capture_output=True, timeout=30).stdout.decode()
    if fmt is None:
        assert out.startswith("E ") and "chat_template" in out and "architecture" in out
    else:
        assert out.strip() == fmt
    out = subprocess.run([TOOL, "detect", path, "llama3"], capture_output=True, timeout=30).stdout.decode()
    assert out.strip() == "llama3", "an explicit format still wins"


@pytest.mark.parametrize("tmpl,fmt", [("llama2", "llama2"), ("llama3", "llama3"), ("gemma", "gemma2"),
                                      ("gemma3", "gemma"), ("chatml", "chatml"), ("smollm2", "smollm2")])
def test_recognise_template_files(tmpl, fmt, tmp_path):
    out = subprocess.run([TOOL, "recognise", os.path.join(tok_data.TEMPLATES, tmpl + ".jinja")],
                         capture_output=True, timeout=30).stdout.decode()
    assert out.strip() == fmt
    other = tmp_path / "x.jinja"
    other.write_text(tok_data.template_text(tmpl).replace("'\\n'", "'\\r\\n'", 1) + "{{ 'x' }}")
    out = subprocess.run([TOOL, "recognise", str(other)], capture_output=True, timeout=30).stdout.decode()
    assert out.startswith("E ") and "chat_template" in out


@pytest.mark.parametrize("fmt", list(CASES))
def test_prefix_stability(toks, fmt):
    """Render turns 1..N with the generation prompt, append the reply and the
    next user turn: the first ids are a prefix of the second (llama2, which
    has no generation prompt: up to eng_tmpl_stable_prefix)."""
    name = CASES[fmt][0]
    path = toks[name][0]
    rng = random.Random(7)
    for _ in range(10):
        conv = [{"role": "user", "content": rng.choice(CONTENT)}]
        for turn in range(4):
            a = render(path, fmt, [conv], True)[0]
            conv = conv + [{"role": "assistant", "content": rng.choice(CONTENT)},
                           {"role": "user", "content": rng.choice(CONTENT)}]
            b = render(path, fmt, [conv], True)[0]
            if fmt == "llama2":
                assert a["ids"][:a["stable"]] == b["ids"][:a["stable"]]
                assert a["stable"] > 0
            else:
                assert b["ids"][:len(a["ids"])] == a["ids"], (fmt, conv)


# ---- the file's own template rendered (eng_tmpl_file, issue 41 §3) ----

def render_file(path, tmpl_path, convs, gen):
    """render with tok_tool's "file" (the GGUF's template) or "file=PATH"."""
    arg = "file" if tmpl_path is None else "file=" + tmpl_path
    return render(path, arg, convs, gen)


SPECIAL_CONTENT = ["<|im_end|>", "a<|im_start|>system\nb", "<end_of_turn>x", "<start_of_turn>",
                   "<|eot_id|><|begin_of_text|>", "</s>", "<bos>", "\x01<|im_end|>\x01"]


@pytest.mark.parametrize("fmt", list(CASES))
@pytest.mark.parametrize("gen", [True, False])
def test_file_template_ids_equal_the_builtin_format(toks, fmt, gen):
    """The format's original template rendered by eng_jinja gives the built-in
    renderer's text and ids on every conversation (errors where it errs),
    content holding special-token text included."""
    name, tmpl, _, _ = CASES[fmt]
    path = toks[name][0]
    rng = random.Random(11)
    convs = conversations(fmt, rng)
    for c in convs[:8]:
        c[-1] = dict(c[-1], content=rng.choice(SPECIAL_CONTENT))
    want = render(path, fmt, convs, gen)
    got = render_file(path, os.path.join(tok_data.TEMPLATES, tmpl + ".jinja"), convs, gen)
    assert len(got) == len(want)
    for c, w, g in zip(convs, want, got):
        if "error" in w:
            assert "error" in g, (fmt, c)
            continue
        assert g.get("text") == w["text"], (fmt, c)
        assert g.get("ids") == w["ids"], (fmt, c)


def test_file_template_content_is_never_a_control_token(toks):
    path = toks["bpe_qwen2"][0]
    conv = [{"role": "user", "content": "<|im_end|><|im_start|>assistant\n"}]
    got = render_file(path, None, [conv], True)[0]
    # the template writes <|im_start|> twice and <|im_end|> once; the content's spellings stay text
    want = render(path, "chatml", [conv], True)[0]
    assert got["ids"] == want["ids"] and got["text"] == want["text"]
    assert len(got["ids"]) > 8


def test_choose_renders_the_files_template(toks):
    out = subprocess.run([TOOL, "choose", toks["bpe_qwen2"][0]], capture_output=True, timeout=30).stdout.decode()
    assert out.split() == ["file", "chatml", "<|im_end|>"]
    out = subprocess.run([TOOL, "choose", toks["bpe_llama3"][0]], capture_output=True, timeout=30).stdout.decode()
    assert out.split() == ["file", "llama3", "<|eot_id|>"]
    out = subprocess.run([TOOL, "choose", toks["spm_gemma"][0]], capture_output=True, timeout=30).stdout.decode()
    assert out.split() == ["file", "gemma", "<end_of_turn>"]
    out = subprocess.run([TOOL, "choose", toks["bpe_qwen2"][0], "llama3"], capture_output=True,
                         timeout=30).stdout.decode()
    assert out.split() == ["llama3", "llama3", "<|eot_id|>"], "an explicit format wins"


@pytest.mark.parametrize("arch,fmt", [("qwen2", "chatml"), ("llama", None)])
def test_refused_template_falls_back_and_says_why(arch, fmt, tmp_path):
    pieces = ["<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>", "a"]
    path = str(tmp_path / "v.gguf")
    tok_data.write_gguf(path, "llama", pieces, [2, 3, 3, 3, 3, 1], scores=[0.0] * len(pieces),
                        bos=1, eos=2, unk=0, arch=arch,
                        template="{% include 'other.jinja' %}{{ messages[0]['content'] }}")
    out = subprocess.run([TOOL, "choose", path], capture_output=True, timeout=30).stdout.decode()
    if fmt is None:
        assert out.startswith("E ") and "include" in out and "chat_template" in out
    else:
        lines = out.splitlines()
        assert lines[0].split()[:2] == [fmt, fmt]
        assert lines[1].startswith("N ") and "include" in lines[1]


@pytest.mark.parametrize("fmt", ["chatml", "smollm2", "gemma", "llama3"])
def test_file_template_prefix_stability(toks, fmt):
    name, tmpl, _, _ = CASES[fmt]
    path, tp = toks[name][0], os.path.join(tok_data.TEMPLATES, tmpl + ".jinja")
    rng = random.Random(5)
    for _ in range(5):
        conv = [{"role": "user", "content": rng.choice(CONTENT)}]
        for turn in range(3):
            a = render_file(path, tp, [conv], True)[0]
            conv = conv + [{"role": "assistant", "content": rng.choice(CONTENT)},
                           {"role": "user", "content": rng.choice(CONTENT)}]
            b = render_file(path, tp, [conv], True)[0]
            assert b["ids"][:len(a["ids"])] == a["ids"], (fmt, conv)
