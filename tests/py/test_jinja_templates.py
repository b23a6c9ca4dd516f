"""parley's Jinja-subset renderer (engine/tok/eng_jinja.h) against jinja2.

The data is ../shared/chat_templates/ beside the repository, or
/work/shared/chat_templates for a clone made elsewhere (README.md there): 42 real chat templates x 10 conversations, and jinja2's output for
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

Tools through the worker (test_tools_through_the_worker_match_jinja2):
the corpus's conversations with tools, tool calls and tool results, sent
as an OpenAI client sends them (arguments as JSON text, no name on tool
messages), go through tests/worker/wk_render_tool -- the worker's
conversion to the template's variables (wk_tools_file_msgs) and the
engine's (eng_tmpl_file_context) -- and must render as jinja2 renders
the transformers-style conversation, on every template of the corpus.
One difference is by design: an assistant message of calls only with
content null reaches the worker as "" (the gateway writes "", the wire
has no null), so such a conversation is compared with jinja2's live
render of it with content "" rather than with expected/.
"""
import json
import os
import subprocess
import tempfile

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("PARLEY_BUILD", os.path.join(REPO, "build"))
TOOL = os.path.join(BUILD, "tests", "tok", "jinja_tool")
WK_TOOL = os.path.join(BUILD, "tests", "worker", "wk_render_tool")
# The corpus's homes, first found wins: PARLEY_CHAT_TEMPLATES, then
# ../shared beside this checkout, then /work/shared (where the project's
# machines keep it, for a clone made elsewhere: CI's clean clone).
_HOMES = [os.environ.get("PARLEY_CHAT_TEMPLATES"),
          os.path.join(REPO, "..", "shared", "chat_templates"),
          "/work/shared/chat_templates"]
DATA = next((d for d in _HOMES if d and os.path.isdir(d)), _HOMES[0] or _HOMES[1])
CI = os.environ.get("CI") == "true"
NOW = 1721952000  # 2024-07-26 00:00:00 UTC, render_reference.py's FIXED_NOW

# (template stem, conversation name or "*") -> why the subset refuses it
REFUSED: dict = {}


def _tool_or_fail():
    if not os.access(TOOL, os.X_OK):
        pytest.fail("jinja_tool not built at %s (set PARLEY_BUILD)" % TOOL, pytrace=False)


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


def _render(tmpl, ctx, tmp, tool=TOOL):
    path = os.path.join(tmp, "ctx.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(ctx, f, ensure_ascii=False)
    p = subprocess.run([tool, tmpl, path, str(NOW)], capture_output=True, timeout=30)
    if p.returncode not in (0, 1):
        raise AssertionError("%s crashed (%d): %s" % (os.path.basename(tool), p.returncode,
                                                      p.stderr.decode(errors="replace")))
    return p.returncode == 0, p.stdout


def _check(base, rendered, out, bad, stem, conv):
    """Compare one render with jinja2's expected/<base>.txt or .error;
    append a mismatch to bad.  Returns "txt" or "err" (which it was)."""
    if os.path.exists(base + ".txt"):
        with open(base + ".txt", "rb") as f:
            want = f.read()
        if not (rendered and out == want):
            bad.append((stem, conv, "render", want[:300], out[:300]))
        return "txt"
    with open(base + ".error", encoding="utf-8") as f:
        want = f.read().rstrip("\n")
    msg = out.decode("utf-8", errors="replace")
    if rendered:
        bad.append((stem, conv, "should fail", want, out[:200]))
    elif want.startswith("TemplateError: ") and not msg.endswith(" " + want[len("TemplateError: "):]):
        bad.append((stem, conv, "message", want, msg))
    return "err"


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
            mism = []
            kind = _check(base, rendered, out, mism, stem, conv)
            if kind == "txt":
                n_txt += 1
                ok += not mism
                if mism and reason:
                    refused.append((stem, conv, reason))
                    mism = []
            else:
                n_err += 1
                err_ok += not mism
            bad += mism
    print("\njinja subset vs jinja2: %d/%d renders, %d/%d errors, %d refused" % (ok, n_txt, err_ok, n_err, len(refused)))
    for r in refused:
        print("  refused %s__%s: %s" % r)
    for b in bad[:15]:
        print("  MISMATCH %s__%s (%s)\n    want %r\n    got  %r" % b)
    assert not bad, "%d pairs differ from jinja2 (first: %s__%s)" % (len(bad), bad[0][0], bad[0][1])


def _tool_convs(convs):
    """The conversations with tools, tool calls or tool results."""
    return [c for c in convs
            if c.get("tools") or any(m["role"] == "tool" or m.get("tool_calls") for m in c["messages"])]


def _openai_messages(messages):
    """A transformers-style conversation as an OpenAI client sends it:
    each call's arguments as JSON text, tool messages without name (the
    worker finds it by tool_call_id), null content as it is."""
    out = []
    for m in messages:
        m = dict(m)
        if m.get("tool_calls"):
            m["tool_calls"] = [dict(c, function=dict(c["function"], arguments=json.dumps(c["function"]["arguments"])))
                               if not isinstance(c["function"].get("arguments"), str) else c
                               for c in m["tool_calls"]]
        if m["role"] == "tool":
            m.pop("name", None)
        out.append(m)
    return out


def _wk_request(conv, kwargs, tools=None, tool_choice=None):
    req = {"messages": _openai_messages(conv["messages"]), "tools": tools if tools is not None else conv.get("tools"),
           "add_generation_prompt": conv["add_generation_prompt"], "vars": kwargs}
    if tool_choice is not None:
        req["tool_choice"] = tool_choice
    return req


def _wk_tool_or_fail():
    if not os.access(WK_TOOL, os.X_OK):
        pytest.fail("wk_render_tool not built at %s (set PARLEY_BUILD)" % WK_TOOL, pytrace=False)


def _as_the_wire_has_it(messages):
    """content null (beside calls) as the gateway puts it on the wire: ""."""
    return [dict(m, content="") if m.get("content") is None else m for m in messages]


def _live(env, src, ctx):
    """jinja2's render of ctx: (True, bytes) or (False, "Class: message")."""
    import jinja2
    try:
        return True, env.from_string(src).render(**ctx).encode("utf-8")
    except jinja2.exceptions.TemplateError as e:
        return False, "%s: %s" % ("TemplateError" if type(e) is jinja2.exceptions.TemplateError
                                  else type(e).__name__, e)
    except Exception as e:  # noqa: BLE001 -- TypeError and the like, as render_reference.py records them
        return False, "%s: %s" % (type(e).__name__, e)


def _check_live(want, rendered, out, bad, stem, conv):
    ok, w = want
    msg = out.decode("utf-8", errors="replace")
    if ok and not (rendered and out == w):
        bad.append((stem, conv, "render", w[:300], out[:300]))
    elif not ok and rendered:
        bad.append((stem, conv, "should fail", w, out[:200]))
    elif not ok and w.startswith("TemplateError: ") and not msg.endswith(" " + w[len("TemplateError: "):]):
        bad.append((stem, conv, "message", w, msg))
    return "txt" if ok else "err"


def test_tools_through_the_worker_match_jinja2():
    _data_or_fail()
    _wk_tool_or_fail()
    env = _jinja2_env()
    with open(os.path.join(DATA, "conversations.json"), encoding="utf-8") as f:
        convs = _tool_convs(json.load(f))
    with open(os.path.join(DATA, "template_kwargs.json"), encoding="utf-8") as f:
        kwargs = json.load(f)
    assert len(convs) >= 3
    stems = sorted(n[: -len(".jinja")] for n in os.listdir(DATA) if n.endswith(".jinja"))
    bad, n_txt, n_err, uses_tools, n_live = [], 0, 0, 0, 0
    with tempfile.TemporaryDirectory() as tmp:
        for stem in stems:
            tmpl = os.path.join(DATA, stem + ".jinja")
            with open(tmpl, encoding="utf-8") as f:
                src = f.read()
            uses_tools += "tools" in src
            kw = kwargs.get(stem, kwargs["_default"])
            for conv in convs:
                req = _wk_request(conv, kw)
                rendered, out = _render(tmpl, req, tmp, WK_TOOL)
                wire = _as_the_wire_has_it(conv["messages"])
                if wire == conv["messages"]:
                    kind = _check(os.path.join(DATA, "expected", "%s__%s" % (stem, conv["name"])), rendered,
                                  out, bad, stem, conv["name"])
                else:
                    n_live += 1
                    want = _live(env, src, dict(kw, messages=wire, tools=conv.get("tools"), documents=None,
                                                add_generation_prompt=conv["add_generation_prompt"]))
                    kind = _check_live(want, rendered, out, bad, stem, conv["name"])
                n_txt += kind == "txt"
                n_err += kind == "err"
    print("\ntools through the worker vs jinja2: %d pairs (%d renders, %d raised; %d against a live render "
          "with content \"\"), %d templates use tools, %d differ"
          % (n_txt + n_err, n_txt, n_err, n_live, uses_tools, len(bad)))
    for b in bad[:15]:
        print("  MISMATCH %s__%s (%s)\n    want %r\n    got  %r" % b)
    assert uses_tools >= 15 and n_txt >= 40
    assert not bad, "%d pairs differ from jinja2 (first: %s__%s)" % (len(bad), bad[0][0], bad[0][1])


def _jinja2_env():
    """jinja2 set up as transformers' apply_chat_template: the corpus's own
    render_reference.py's environment, loaded in place."""
    pytest.importorskip("jinja2")
    import importlib.util
    spec = importlib.util.spec_from_file_location("render_reference", os.path.join(DATA, "render_reference.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.make_env()


# Shapes the corpus lacks: two parallel calls with text beside them and
# their two results, non-ASCII and nested arguments, a second round; and
# tool_choice "none" (the worker passes tools=None then).
PARALLEL = {
    "name": "parallel_calls",
    "add_generation_prompt": True,
    "messages": [
        {"role": "system", "content": "Tu es un assistant météo."},
        {"role": "user", "content": "Météo à Zürich et heure à Tōkyō ?"},
        {"role": "assistant", "content": "Je regarde.", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "get_weather",
                                                           "arguments": {"city": "Zürich", "opts": {"unit": "celsius", "days": [1, 2]}}}},
            {"id": "c2", "type": "function", "function": {"name": "get_time", "arguments": {"timezone": "Asia/Tokyo"}}}]},
        {"role": "tool", "tool_call_id": "c1", "name": "get_weather", "content": "{\"temp\": -3.5}"},
        {"role": "tool", "tool_call_id": "c2", "name": "get_time", "content": "09:00"},
        {"role": "assistant", "content": "-3.5 °C à Zürich, 09:00 à Tōkyō."},
        {"role": "user", "content": "Et demain ?"},
    ],
}


# The corpus templates whose probes say they write tool use themselves
# (eng_tmpl_file_renders_tools), "str" where they want a call's arguments
# as the JSON string (eng_tmpl_file_tool_args_string).  The others
# (Llama 3, Gemma, Phi, DeepSeek, Command R+'s Cohere-format tools,
# firefunction's `functions`, Granite 3.0, Mistral Large 2411...) get
# parley's family text.
WRITES_TOOLS = {
    "CohereForAI-c4ai-command-r7b-12-2024-tool_use": "obj", "HuggingFaceTB-SmolLM3-3B": "obj",
    "NousResearch-Hermes-3-Llama-3.1-8B-tool_use": "obj", "Qwen-QwQ-32B": "obj",
    "Qwen-Qwen2.5-7B-Instruct": "obj", "Qwen-Qwen3-0.6B": "obj", "ibm-granite-granite-3.3-2B-Instruct": "obj",
    "meetkai-functionary-medium-v3.1": "str", "meetkai-functionary-medium-v3.2": "str",
    "meta-llama-Llama-3.1-8B-Instruct": "obj", "meta-llama-Llama-3.2-3B-Instruct": "obj",
    "mistralai-Mistral-7B-Instruct-v0.3": "obj", "mistralai-Mistral-Nemo-Instruct-2407": "obj",
    "mistralai-Mistral-Small-3.2-24B-Instruct-2506": "obj", "moonshotai-Kimi-K2": "obj",
    "openai-gpt-oss-120b": "obj", "yandex-YandexGPT-5-Lite-8B-instruct": "obj",
}


def _probe(tmpl):
    p = subprocess.run([WK_TOOL, "probe", tmpl], capture_output=True, timeout=30)
    assert p.returncode in (0, 1), p.stderr
    out = p.stdout.decode().split()
    return None if p.returncode else ("str" if out[1] == "1" else "obj") if out[0] == "1" else None


def test_tool_probes_find_the_templates_that_write_tools():
    _data_or_fail()
    _wk_tool_or_fail()
    stems = sorted(n[: -len(".jinja")] for n in os.listdir(DATA) if n.endswith(".jinja"))
    got = {s: k for s in stems if (k := _probe(os.path.join(DATA, s + ".jinja")))}
    print("\ntemplates that write tool use: %d of %d: %s" % (len(got), len(stems), ", ".join(sorted(got))))
    assert got == WRITES_TOOLS


def test_tool_shapes_through_the_worker_match_live_jinja2():
    _data_or_fail()
    _wk_tool_or_fail()
    env = _jinja2_env()
    with open(os.path.join(DATA, "conversations.json"), encoding="utf-8") as f:
        tools = next(c["tools"] for c in json.load(f) if c.get("tools"))
    with open(os.path.join(DATA, "template_kwargs.json"), encoding="utf-8") as f:
        kwargs = json.load(f)
    stems = sorted(n[: -len(".jinja")] for n in os.listdir(DATA) if n.endswith(".jinja"))
    bad, n_same, n_both_fail = [], 0, 0
    with tempfile.TemporaryDirectory() as tmp:
        for stem in stems:
            tmpl = os.path.join(DATA, stem + ".jinja")
            with open(tmpl, encoding="utf-8") as f:
                src = f.read()
            kw = kwargs.get(stem, kwargs["_default"])
            as_str = WRITES_TOOLS.get(stem) == "str"  # the worker keeps arguments the string then
            msgs = _openai_messages(PARALLEL["messages"]) if as_str else PARALLEL["messages"]
            for choice, shown in ((None, tools), ("none", None)):
                want = _live(env, src, dict(kw, messages=msgs, tools=shown, documents=None,
                                            add_generation_prompt=True))
                req = dict(_wk_request(PARALLEL, kw, tools, choice), args_string=as_str)
                rendered, out = _render(tmpl, req, tmp, WK_TOOL)
                n = len(bad)
                kind = _check_live(want, rendered, out, bad, stem, "tool_choice=%s" % choice)
                n_same += kind == "txt" and len(bad) == n
                n_both_fail += kind == "err" and len(bad) == n
    print("\nparallel calls through the worker vs jinja2: %d same, %d both refuse, %d differ"
          % (n_same, n_both_fail, len(bad)))
    for b in bad[:10]:
        print("  MISMATCH %s %s (%s)\n    want %r\n    got  %r" % b)
    assert n_same >= 40
    assert not bad


# Constructs beyond what the corpus exercises, each rendered by jinja2 set
# up as transformers does (the environment of render_reference.py) and by
# parley over the same context.
SNIPPETS = [
    "{{ messages[0].content | upper }}|{{ 'Hello World' | lower }}|{{ 'hello wORLD' | title }}|{{ 'hELLO' | capitalize }}",
    "{{ [3, 1, 2] | first }}{{ [3, 1, 2] | last }}{{ 'abc' | list }}{{ {'a': 1} | items | list }}",
    "{{ messages | map(attribute='role') | join(', ') }}|{{ messages | selectattr('role', 'equalto', 'user') | list | length }}",
    "{{ [1, none, 2] | reject('none') | list }}|{{ [1, 2, 3] | select('odd') | list }}|{{ ['a', 'A', 'b'] | unique | list }}",
    "{{ x | default('d') }}|{{ '' | default('e', true) }}|{{ none | default('n') }}",
    "{{ 'a\\nb\\n\\nc' | indent(2) }}|{{ 'a\\nb' | indent(2, first=true) }}|{{ 'x\\n\\ny' | indent(4, blank=true) }}",
    "{{ ' a ' | trim }}|{{ '--a--'.strip('-') }}|{{ 'xxa'.lstrip('x') }}|{{ 'a  b c'.split() }}|{{ 'a b c'.split(' ', 1) }}",
    "{{ 'abc'.startswith(('x', 'a')) }}{{ 'abc'.endswith('bc') }}{{ 'a-b'.replace('-', '+') }}{{ 'aaa'.replace('a', 'b', 2) }}",
    "{{ {'b': 1, 'a': [1, 2.5, none, true, 'é']} | tojson }}|{{ {'b': 1, 'a': 2} | tojson(sort_keys=true) }}|{{ 'ü\\u0001\\t' | tojson }}",
    "{{ {'a': {'b': [1, {}]}, 'c': []} | tojson(indent=2) }}",
    "{{ 10 / 4 }} {{ 10 // 4 }} {{ -10 // 4 }} {{ -10 % 3 }} {{ 2 ** 0.5 }} {{ 1e100 }} {{ 3.0 * 2 }} {{ 1 == 1.0 }} {{ 7 / 7 }}",
    "{{ 'ab' * 3 }}{{ [1] + [2] }}{{ (1, 2) }}{{ (1,) }}{{ 'x' ~ 1.5 ~ true ~ none }}",
    "{{ messages[1:] | length }}{{ messages[-1].role }}{{ 'héllo'[1] }}{{ 'héllo'[1:3] }}{{ [1,2,3,4][::2] }}{{ [1,2,3][::-1] }}",
    "{% for a, b in {'x': 1, 'y': 2} | items %}{{ a }}={{ b }}{{ loop.revindex }}{% endfor %}",
    "{% for m in messages %}{{ loop.index0 }}{{ loop.previtem.role if loop.previtem is defined }}{{ loop.nextitem.role if loop.nextitem }}{% else %}none{% endfor %}",
    "{% for x in [] %}{{ x }}{% else %}empty{% endfor %}|{% for c in 'ab' %}{{ c }}{% endfor %}",
    "{% set a, b = 1, 2 %}{{ a + b }}{% set t = (3, 4) %}{% set c, d = t %}{{ c * d }}",
    "{% macro greet(name, punct='!') -%}Hi {{ name }}{{ punct }}{%- endmacro %}{{ greet('A') }} {{ greet('B', punct='?') }} {{ greet(name='C') }}",
    "{% macro wrap() %}<{{ caller() }}>{% endmacro %}{% call wrap() %}inner{% endcall %}",
    "{% if x is not defined and messages is iterable and messages is sequence and 1 is number and 'a' is string %}ok{% endif %}",
    "{% if {} is mapping and none is none and true is boolean and 3 is divisibleby(3) and 4 is even %}ok{% endif %}",
    "{{ messages[0] }}|{{ {'k': 'it\\'s', 'q': \"a\\\"b\"} }}|{{ [1.0, -0.0, 1e-7] }}",
    "{{ messages[0]['role'] }}{{ messages[0].get('missing', 'dflt') }}{{ messages[0].get('role') }}{{ messages[0].keys() | list }}",
    "{%- set ns = namespace(found=false, n=0) -%}{%- for m in messages -%}{%- if m.role == 'user' -%}{%- set ns.found = true -%}{%- set ns.n = ns.n + 1 -%}{%- endif -%}{%- endfor -%}{{ ns.found }}{{ ns.n }}",
    "  {% if true %}\n    x\n  {% endif %}\n{%+ if true %}y{% endif %}\n{{ 'z' }}\n\n{# c #}\n  {#- c -#}  w\n",
    "{% filter upper %}a{{ 'b' }}{% endfilter %}{% set blk %}  q  {% endset %}[{{ blk }}]",
    "{{ strftime_now('%Y-%m-%d %d %b %Y') }}|{{ range(3) | list }}{{ range(1, 7, 2) | list }}|{{ dict(a=1) }}",
    "{{ 'a' if messages else 'b' }}{{ messages and 'y' }}{{ none or 'z' }}{{ not messages }}{{ 3 > 2 > 1 }}{{ 'b' > 'a' }}",
    "{{ '<b>' | safe + '<i>' }}|{{ '<b>' + '<i>' | safe }}|{{ ('<b>' | safe) ~ '<i>' }}",
    "{{ 12 | string + 'x' }}{{ '42' | int + 1 }}{{ '3.5' | float }}{{ 3.9 | int }}{{ -5 | abs }}{{ [1,2] | count }}",
    "{% for x in [1, 2, 3] %}{{ loop.cycle('a', 'b') }}{% endfor %}|{{ 3 is gt(2) }}{{ 3 is lessthan 2 }}|{{ ' x ' | trim('x ') }}",
    "{{ [3, 1, 2] | sort | list }}{{ ['b', 'A', 'c'] | sort(reverse=true) }}{{ [3, 1, 2] | max }}{{ ['b', 'A'] | min }}{{ [1, 2.5] | sum }}",
    "{{ messages | sort(attribute='role') | map(attribute='role') | join }}{{ 2.5 | round }}{{ 3.14159 | round(2) }}{{ 2.1 | round(method='ceil') }}",
    "{{ ' \\u00a0 a \\u3000' | trim }}|{{ '\\u2003x '.strip() }}|{{ 'x\\u00a0y z'.split() }}|{{ '  a b  '.split(None, 1) }}|{{ ' é '.rstrip() }}",
    "{% raw %}{{ x }}{% endraw %}|{% raw -%}  {% if %} {#  {%- endraw %}|\n  {% raw %}\na{% endraw %}\nb\n",
    "{{ '%s-%d' % ('a', 3) }}|{{ '%.2f' % 2.5 }}|{{ '%5s|%-4d|%03d' % ('ab', 7, 5) }}|{{ '%r' % 'x' }}|{{ '%s' % [1, 2] }}|{{ '%x' % 255 }}",
    "{{ '{} and {}'.format('a', 'b') }}|{{ '{0}{1}{0}'.format('x', 'y') }}|{{ '{name}!'.format(name='Bo') }}|{{ '%s=%s' | format('k', 1.5) }}",
    "{{ \"o'neil 3rd x-ray (ab) [cd] hello_world\" | title }}|{{ \"o'neil 3rd x-ray (ab) hello_world\".title() }}",
    "{{ 'ǆemal ŉ ﬁx straße İx' | upper }}|{{ 'ÀÉ İx' | lower }}|{{ 'héllo wörld-ñu (éx)' | title }}|{{ 'éa 3rd'.title() }}|{{ 'éA' | capitalize }}",
    "{{ messages | length }}{{ 'héllo' | length }}{{ {'a': 1} | length }}{{ 'abc' | reverse }}{{ [1,2] | reverse | list }}",
]


def test_snippets_match_jinja2():
    _tool_or_fail()
    jinja2 = pytest.importorskip("jinja2")
    import jinja2.ext
    from datetime import datetime
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = lambda x, ensure_ascii=False, indent=None, separators=None, sort_keys=False: json.dumps(
        x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)
    env.globals["strftime_now"] = lambda fmt: datetime(2024, 7, 26).strftime(fmt)
    ctx = {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi <you>"}],
           "add_generation_prompt": True}
    bad = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, src in enumerate(SNIPPETS):
            want = env.from_string(src).render(**ctx)
            path = os.path.join(tmp, "t%d.jinja" % i)
            with open(path, "w", encoding="utf-8") as f:
                f.write(src)
            rendered, out = _render(path, ctx, tmp)
            got = out.decode("utf-8", errors="replace")
            if not rendered or got != want:
                bad.append((src, want, got))
    for src, want, got in bad:
        print("\n  SNIPPET %r\n    jinja2 %r\n    parley %r" % (src, want, got))
    assert not bad, "%d of %d snippets differ from jinja2" % (len(bad), len(SNIPPETS))


# parley's built-in C renderers (eng_template.h) against eng_jinja running
# each format's original template (tests/tok/templates/), with the
# tokenizer-less spellings the built-ins use: the two must agree on every
# role/content conversation of the corpus (text, or both refuse).
BUILTINS = {  # format -> (template file, bos_token, eos_token)
    "llama2": ("llama2", "<s>", "</s>"),
    "llama3": ("llama3", "<|begin_of_text|>", "</s>"),
    "gemma": ("gemma3", "<bos>", "<eos>"),
    "gemma2": ("gemma", "<bos>", "<eos>"),
    "chatml": ("chatml", "<s>", "</s>"),
    "smollm2": ("smollm2", "<s>", "</s>"),
    "transcript": ("transcript", "<bos>", "<eos>"),
}


def test_builtin_formats_match_their_templates():
    _data_or_fail()
    with open(os.path.join(DATA, "conversations.json"), encoding="utf-8") as f:
        convs = [c for c in json.load(f)
                 if all(isinstance(m.get("content"), str) and set(m) <= {"role", "content"} for m in c["messages"])]
    assert len(convs) >= 5
    bad, n = [], 0
    with tempfile.TemporaryDirectory() as tmp:
        for fmt, (tfile, bos, eos) in BUILTINS.items():
            tmpl = os.path.join(REPO, "tests", "tok", "templates", tfile + ".jinja")
            for conv in convs:
                for gen in (False, True):
                    lines = "".join("%s:%s\n" % (m["role"].encode().hex(), m["content"].encode().hex())
                                    for m in conv["messages"])
                    p = subprocess.run([TOOL, "builtin", fmt, "1" if gen else "0"], input=lines.encode(),
                                       capture_output=True, timeout=30)
                    assert p.returncode in (0, 1), p.stderr
                    ctx = {"messages": conv["messages"], "add_generation_prompt": gen, "bos_token": bos,
                           "eos_token": eos}
                    ok, out = _render(tmpl, ctx, tmp)
                    n += 1
                    if (p.returncode == 0) != ok or (ok and out != p.stdout):
                        bad.append((fmt, conv["name"], gen, p.stdout[:200], out[:200]))
    for b in bad[:10]:
        print("\n  %s %s gen=%s\n    built-in %r\n    eng_jinja %r" % b)
    print("\nbuilt-in formats vs eng_jinja on their templates: %d/%d agree" % (n - len(bad), n))
    assert not bad
