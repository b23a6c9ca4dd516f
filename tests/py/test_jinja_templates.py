"""parley's Jinja-subset renderer (engine/tok/eng_jinja.h) against jinja2.

The data is ../shared/chat_templates/ beside the repository (README.md
there): 42 real chat templates x 10 conversations, and jinja2's output for
each pair as transformers' apply_chat_template produces it (349 renders,
71 raised errors).  It is read in place, never copied into the tree;
PARLEY_CHAT_TEMPLATES overrides the folder.  Under CI=true a missing folder
is a failure.

Every pair goes through tests/tok/jinja_tool (template file + JSON context,
strftime_now pinned to 2024-07-26 as the reference was made):
  * a pair jinja2 rendered must render byte for byte the same;
  * a pair jinja2 refused must fail too, and where the template itself
    raised (raise_exception -> "TemplateError: msg") with the same message.
REFUSED lists the pairs the subset deliberately does not render, each
with its reason; it is meant to stay short.
"""
import json
import os
import subprocess
import tempfile

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("PARLEY_BUILD", os.path.join(REPO, "build"))
TOOL = os.path.join(BUILD, "tests", "tok", "jinja_tool")
DATA = os.environ.get("PARLEY_CHAT_TEMPLATES", os.path.join(REPO, "..", "shared", "chat_templates"))
CI = os.environ.get("CI") == "true"
NOW = 1721952000  # 2024-07-26 00:00:00 UTC, render_reference.py's FIXED_NOW

# (template stem, conversation name or "*") -> why the subset refuses it
REFUSED: dict = {}


def _data_or_fail():
    if not os.path.isdir(DATA):
        msg = "chat template corpus not found at %s (PARLEY_CHAT_TEMPLATES)" % DATA
        if CI:
            pytest.fail(msg, pytrace=False)
        pytest.skip(msg)
    if not os.access(TOOL, os.X_OK):
        pytest.fail("jinja_tool not built at %s (set PARLEY_BUILD)" % TOOL, pytrace=False)


def _pairs():
    with open(os.path.join(DATA, "conversations.json"), encoding="utf-8") as f:
        convs = json.load(f)
    with open(os.path.join(DATA, "template_kwargs.json"), encoding="utf-8") as f:
        kwargs = json.load(f)
    stems = sorted(n[: -len(".jinja")] for n in os.listdir(DATA) if n.endswith(".jinja"))
    for stem in stems:
        for conv in convs:
            ctx = dict(kwargs.get(stem, kwargs["_default"]))
            ctx.update(messages=conv["messages"], tools=conv.get("tools"), documents=None,
                       add_generation_prompt=conv["add_generation_prompt"])
            yield stem, conv["name"], ctx


def _render(tmpl, ctx, tmp):
    path = os.path.join(tmp, "ctx.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(ctx, f, ensure_ascii=False)
    p = subprocess.run([TOOL, tmpl, path, str(NOW)], capture_output=True, timeout=30)
    if p.returncode not in (0, 1):
        raise AssertionError("jinja_tool crashed (%d): %s" % (p.returncode, p.stderr.decode(errors="replace")))
    return p.returncode == 0, p.stdout


def test_corpus_matches_jinja2():
    _data_or_fail()
    ok = err_ok = n_txt = n_err = 0
    bad = []
    refused = []
    with tempfile.TemporaryDirectory() as tmp:
        for stem, conv, ctx in _pairs():
            base = os.path.join(DATA, "expected", "%s__%s" % (stem, conv))
            reason = REFUSED.get((stem, conv)) or REFUSED.get((stem, "*"))
            rendered, out = _render(os.path.join(DATA, stem + ".jinja"), ctx, tmp)
            if os.path.exists(base + ".txt"):
                n_txt += 1
                with open(base + ".txt", "rb") as f:
                    want = f.read()
                if rendered and out == want:
                    ok += 1
                elif reason:
                    refused.append((stem, conv, reason))
                else:
                    bad.append((stem, conv, "render", want[:300], out[:300]))
            else:
                n_err += 1
                with open(base + ".error", encoding="utf-8") as f:
                    want = f.read().rstrip("\n")
                msg = out.decode("utf-8", errors="replace")
                if rendered:
                    bad.append((stem, conv, "should fail", want, out[:200]))
                elif want.startswith("TemplateError: ") and not msg.endswith(" " + want[len("TemplateError: "):]):
                    bad.append((stem, conv, "message", want, msg))
                else:
                    err_ok += 1
    print("\njinja subset vs jinja2: %d/%d renders, %d/%d errors, %d refused" % (ok, n_txt, err_ok, n_err, len(refused)))
    for r in refused:
        print("  refused %s__%s: %s" % r)
    for b in bad[:15]:
        print("  MISMATCH %s__%s (%s)\n    want %r\n    got  %r" % b)
    assert not bad, "%d pairs differ from jinja2 (first: %s__%s)" % (len(bad), bad[0][0], bad[0][1])
