"""Structured outputs, logprobs, n > 1 and legacy completions end to end:
the official `openai` client against `parley gateway`, one worker on the
real Gemma 3 270M (transcript template), the real Kafka broker.

* JSON schema conformance, a quick subset of the campaign
  (tests/bench/json_schema_campaign.py runs >= 200): schemas drawn by
  tests/py/schema_gen.py from a seed, greedy and at temperature 1; every
  reply that finished with `stop` parses and validates (formats checked);
  how many hit `length` is printed.  json_object replies parse as objects;
  a regex and a Lark grammar (extensions) hold.
* A schema the constraint engine refuses: 400 naming response_format (the
  worker's DeadLetter E_BAD_CONSTRAINT), never an unconstrained reply.
* logprobs: present on every token, top_logprobs sorted, exp-sum <= 1, the
  greedy token is the top alternative; streamed too.
* n = 3: three choices with distinct index; the prompt's tokens computed
  once (the worker's parley_sched_prefill_tokens_total grows by the prompt
  once, parley_sched_fork_tokens_total by it twice).
* POST /v1/completions: text, echo, legacy logprobs, streaming.
* tools: tool_choice required (greedy and T=1) and a named function give
  tool_calls whose arguments validate against the function's parameters;
  streamed as OpenAI streams them; a call and its result go back to the
  model; auto gives text or valid calls; bad tools are 400 naming tools.
"""
import json
import math
import re
import subprocess
import time
import urllib.request
import uuid

import pytest

import schema_gen
from test_gateway import start_gateway, stop
from worker_kit import free_port

openai = pytest.importorskip("openai")
ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

QUICK_SEED = 2033  # the suite's subset; the campaign draws its own seeds


def start_gemma_worker(kafka, parley_bin, model, tmp, prefix, *extra):
    """Topics under prefix and one Gemma worker (model name `gemma`), its
    /metrics on a free port; returns (process, metrics url)."""
    admin = AdminClient({"bootstrap.servers": kafka})
    futs = admin.create_topics([NewTopic(f"{prefix}.{k}", 2 if k != "dlq" else 1, 1)
                                for k in ("turns", "tokens", "responses", "dlq")])
    for f in futs.values():
        f.result(30)
    logf = tmp / "worker.log"
    port = free_port()
    proc = subprocess.Popen(
        [str(parley_bin), "worker", "--model.path", str(model), "--model.name", "gemma",
         "--model.chat_template", "transcript", "--model.threads", "2",
         "--worker.id", f"w-{prefix}", "--worker.group", f"g-{prefix}",
         "--worker.topic.turns", f"{prefix}.turns", "--worker.topic.tokens", f"{prefix}.tokens",
         "--worker.topic.responses", f"{prefix}.responses", "--worker.topic.dlq", f"{prefix}.dlq",
         "--worker.http", f"127.0.0.1:{port}", "--worker.chunk_tokens", "2",
         "--kafka.bootstrap.servers", kafka, "--kafka.session.timeout.ms", "6000",
         "--kafka.heartbeat.interval.ms", "500", *extra],
        stdout=open(logf, "wb"), stderr=subprocess.STDOUT)
    end = time.time() + 180
    while time.time() < end and proc.poll() is None and \
            "event=assigned" not in logf.read_text(errors="replace"):
        time.sleep(0.2)
    assert proc.poll() is None, logf.read_text(errors="replace")[-3000:]
    return proc, f"http://127.0.0.1:{port}"


def worker_metric(url, name):
    with urllib.request.urlopen(url + "/metrics", timeout=10) as h:
        m = re.search(rf"^{name} (\S+)$", h.read().decode(), re.M)
    return float(m.group(1))


@pytest.fixture(scope="module")
def fleet(kafka_bootstrap, parley_bin, gemma_model, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("structured")
    prefix = f"so-{uuid.uuid4().hex[:10]}"
    worker, murl = start_gemma_worker(kafka_bootstrap, parley_bin, gemma_model, tmp, prefix)
    gw, url = start_gateway(kafka_bootstrap, parley_bin, prefix, "--gateway.timeout_ms", "120000")
    c = openai.OpenAI(base_url=url + "/v1", api_key="sk-test", max_retries=0, timeout=180)
    yield {"client": c, "url": url, "metrics": murl, "worker": worker, "log": tmp / "worker.log"}
    stop(gw)
    stop(worker)


def ask_schema(c, schema, temperature, max_tokens=160, seed=None):
    return c.chat.completions.create(
        model="gemma", max_tokens=max_tokens, temperature=temperature, seed=seed,
        messages=[{"role": "user", "content": "Fill in this record with realistic values."}],
        response_format={"type": "json_schema",
                         "json_schema": {"name": "record", "strict": True, "schema": schema}})


def check_reply(schema, choice):
    """(parsed, finish) of a reply: a `stop` reply must parse and validate."""
    if choice.finish_reason != "stop":
        return None, choice.finish_reason
    doc = json.loads(choice.message.content)
    errors = sorted(schema_gen.validator(schema).iter_errors(doc), key=str)
    assert not errors, (json.dumps(schema), choice.message.content, errors[0].message)
    return doc, "stop"


def test_json_schema_conformance_quick(fleet):
    c = fleet["client"]
    stops = lengths = 0
    for i, schema in enumerate(schema_gen.schemas(QUICK_SEED, 6)):
        for temperature in (0, 1.0):
            r = ask_schema(c, schema, temperature, seed=i)
            _, finish = check_reply(schema, r.choices[0])
            stops += finish == "stop"
            lengths += finish == "length"
    print(f"\nquick json_schema subset: {stops} stop (all valid), {lengths} length of 12")
    assert stops >= 6  # most of them finish within max_tokens


def test_json_object_regex_and_grammar(fleet):
    c = fleet["client"]
    r = c.chat.completions.create(model="gemma", max_tokens=200, temperature=0,
                                  response_format={"type": "json_object"},
                                  messages=[{"role": "user", "content":
                                             "A cat as JSON with its name and color:"}])
    assert r.choices[0].finish_reason == "stop", r.choices[0]  # greedy: the same every run
    assert isinstance(json.loads(r.choices[0].message.content), dict)
    r = c.chat.completions.create(model="gemma", max_tokens=20, temperature=1.0, seed=3,
                                  response_format={"type": "regex", "regex": r"(yes|no), [0-9]{2}"},
                                  messages=[{"role": "user", "content": "Answer."}])
    assert r.choices[0].finish_reason == "stop"
    assert re.fullmatch(r"(yes|no), [0-9]{2}", r.choices[0].message.content)
    r = c.chat.completions.create(model="gemma", max_tokens=40, temperature=1.0, seed=3,
                                  response_format={"type": "grammar",
                                                   "grammar": 'start: "<" ("a" | "b")+ ">"'},
                                  messages=[{"role": "user", "content": "Go."}])
    text = r.choices[0].message.content
    assert r.choices[0].finish_reason == "stop", r.choices[0]  # seeded: the same every run
    assert re.fullmatch(r"<[ab]+>", text), text


def test_bad_schema_refused(fleet):
    c = fleet["client"]
    with pytest.raises(openai.BadRequestError) as e:
        ask_schema(c, {"type": "object", "properties": {"x": {"type": "no-such-type"}}}, 0)
    assert e.value.param == "response_format", e.value.body
    assert e.value.code == "E_BAD_CONSTRAINT"
    with pytest.raises(openai.BadRequestError) as e:
        c.chat.completions.create(model="gemma", max_tokens=8,
                                  response_format={"type": "regex", "regex": "(unclosed"},
                                  messages=[{"role": "user", "content": "x"}])
    assert e.value.param == "response_format"


def check_logprobs(content, text, top):
    assert content, "no logprobs"
    for e in content:
        assert e.logprob <= 0
        assert len(e.top_logprobs) == top
        lps = [t.logprob for t in e.top_logprobs]
        assert lps == sorted(lps, reverse=True)
        assert sum(math.exp(v) for v in lps) <= 1 + 1e-4
        assert bytes(e.bytes) == e.token.encode() or "\ufffd" in e.token
    joined = "".join(e.token for e in content)
    assert joined.startswith(text[:8]) or "\ufffd" in joined, (joined, text)


def test_logprobs(fleet):
    c = fleet["client"]
    r = c.chat.completions.create(model="gemma", max_tokens=12, temperature=0, logprobs=True,
                                  top_logprobs=3, stop=["\nUser:"],
                                  messages=[{"role": "user", "content": "Name a colour."}])
    ch = r.choices[0]
    check_logprobs(ch.logprobs.content, ch.message.content, 3)
    assert len(ch.logprobs.content) == r.usage.completion_tokens
    for e in ch.logprobs.content:  # greedy: the chosen token is the most likely one
        assert abs(e.logprob - e.top_logprobs[0].logprob) < 1e-6
    # streamed: the same entries arrive with the deltas
    entries, text = [], ""
    for chunk in c.chat.completions.create(
            model="gemma", max_tokens=12, temperature=0, logprobs=True, top_logprobs=3,
            stop=["\nUser:"], stream=True,
            messages=[{"role": "user", "content": "Name a colour."}]):
        for cc in chunk.choices:
            text += cc.delta.content or ""
            if cc.logprobs and cc.logprobs.content:
                entries += cc.logprobs.content
    assert text == ch.message.content
    assert [e.token for e in entries] == [e.token for e in ch.logprobs.content]


def test_n3_choices_share_the_prompt(fleet):
    c, murl = fleet["client"], fleet["metrics"]
    prompt = f"Invent a name for a boat ({uuid.uuid4().hex}):"  # nothing cached
    pre0 = worker_metric(murl, "parley_sched_prefill_tokens_total")
    fork0 = worker_metric(murl, "parley_sched_fork_tokens_total")
    r = c.chat.completions.create(model="gemma", max_tokens=8, temperature=1.0, n=3,
                                  stop=["\nUser:"], messages=[{"role": "user", "content": prompt}])
    assert sorted(ch.index for ch in r.choices) == [0, 1, 2]
    assert all(ch.finish_reason in ("stop", "length") for ch in r.choices)
    assert r.usage.completion_tokens >= 3
    prompt_tokens = r.usage.prompt_tokens - r.usage.prompt_tokens_details.cached_tokens
    pre = worker_metric(murl, "parley_sched_prefill_tokens_total") - pre0
    fork = worker_metric(murl, "parley_sched_fork_tokens_total") - fork0
    print(f"\nn=3: prompt {r.usage.prompt_tokens} tokens ({prompt_tokens} not cached), "
          f"prefill grew {pre:.0f}, forked choices got {fork:.0f}")
    assert pre == prompt_tokens  # computed once
    assert fork == 2 * r.usage.prompt_tokens
    # streamed with n = 2: every choice ends, with its own index
    ends = {}
    for chunk in c.chat.completions.create(model="gemma", max_tokens=6, temperature=1.0, n=2,
                                           stream=True, stop=["\nUser:"],
                                           messages=[{"role": "user", "content": prompt}]):
        for cc in chunk.choices:
            if cc.finish_reason:
                ends[cc.index] = cc.finish_reason
    assert sorted(ends) == [0, 1]


def test_completions(fleet):
    c = fleet["client"]
    r = c.completions.create(model="gemma", prompt="The capital of France is", max_tokens=5,
                             temperature=0)
    assert r.object == "text_completion" and r.choices[0].text
    assert r.choices[0].finish_reason in ("stop", "length")
    e = c.completions.create(model="gemma", prompt="The capital of France is", max_tokens=5,
                             temperature=0, echo=True)
    assert e.choices[0].text == "The capital of France is" + r.choices[0].text
    lp = c.completions.create(model="gemma", prompt="The capital of France is", max_tokens=5,
                              temperature=0, logprobs=2)
    assert lp.choices[0].text == r.choices[0].text
    assert len(lp.choices[0].logprobs.tokens) == lp.usage.completion_tokens
    assert all(len(t) <= 2 for t in lp.choices[0].logprobs.top_logprobs)
    text = "".join(ch.choices[0].text for ch in c.completions.create(
        model="gemma", prompt="The capital of France is", max_tokens=5, temperature=0,
        stream=True) if ch.choices)
    assert text == r.choices[0].text
    with pytest.raises(openai.BadRequestError) as err:
        c.completions.create(model="gemma", prompt="x", suffix="y", max_tokens=2)
    assert err.value.param == "suffix"


WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather of a city",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "maxLength": 40},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["city", "unit"], "additionalProperties": False}}}
ADD = {"type": "function", "function": {
    "name": "add", "description": "Add two integers",
    "parameters": {"type": "object", "properties": {
        "a": {"type": "integer", "minimum": -1000, "maximum": 1000},
        "b": {"type": "integer", "minimum": -1000, "maximum": 1000}},
        "required": ["a", "b"], "additionalProperties": False}}}
PARAMS = {t["function"]["name"]: t["function"]["parameters"] for t in (WEATHER, ADD)}


def check_calls(choice, names):
    """A reply that finished with tool_calls: each call names one of names
    and its arguments validate against the function's parameters."""
    assert choice.finish_reason == "tool_calls", choice
    assert choice.message.tool_calls, choice
    for call in choice.message.tool_calls:
        assert call.type == "function" and call.id.startswith("call_")
        assert call.function.name in names
        args = json.loads(call.function.arguments)
        schema_gen.validator(PARAMS[call.function.name]).validate(args)
    return choice.message.tool_calls


def test_tools_required_and_named(fleet):
    c = fleet["client"]
    msgs = [{"role": "user", "content": "What is the weather in Paris, and what is 2 + 3?"}]
    # greedy with one call; sampled (seeded: the same reply every run) with
    # parallel calls allowed (OpenAI's default) and with one call.  A small
    # model sampling an array of calls may go on adding calls until
    # max_tokens (finish_reason length, the incomplete JSON as text: seed 6
    # does); the integers are bounded, as a sampled unbounded integer can run
    # on digit after digit.
    for temperature, parallel, seed in ((0, False, None), (1.0, True, 2), (1.0, False, 11)):
        r = c.chat.completions.create(model="gemma", max_tokens=200, temperature=temperature,
                                      seed=seed, tools=[WEATHER, ADD], tool_choice="required",
                                      parallel_tool_calls=parallel, messages=msgs)
        check_calls(r.choices[0], {"get_weather", "add"})
    r = c.chat.completions.create(model="gemma", max_tokens=120, temperature=0,
                                  tools=[WEATHER, ADD], parallel_tool_calls=False,
                                  tool_choice={"type": "function", "function": {"name": "add"}},
                                  messages=msgs)
    calls = check_calls(r.choices[0], {"add"})
    assert len(calls) == 1
    # the call and its result go back to the model; tool_choice none: text
    msgs += [{"role": "assistant", "content": None, "tool_calls": [
        {"id": calls[0].id, "type": "function",
         "function": {"name": "add", "arguments": calls[0].function.arguments}}]},
        {"role": "tool", "tool_call_id": calls[0].id, "content": "5"}]
    r = c.chat.completions.create(model="gemma", max_tokens=16, temperature=0,
                                  tools=[WEATHER, ADD], tool_choice="none", messages=msgs,
                                  stop=["\nUser:"])
    assert r.choices[0].finish_reason in ("stop", "length")
    assert not r.choices[0].message.tool_calls


def test_tools_streamed_and_auto(fleet):
    c = fleet["client"]
    msgs = [{"role": "user", "content": "Weather in Oslo?"}]
    calls, finish = {}, None
    for chunk in c.chat.completions.create(model="gemma", max_tokens=120, temperature=0,
                                           tools=[WEATHER], tool_choice="required", stream=True,
                                           parallel_tool_calls=False, messages=msgs):
        for cc in chunk.choices:
            for d in cc.delta.tool_calls or []:
                e = calls.setdefault(d.index, {"id": None, "name": "", "arguments": ""})
                e["id"] = d.id or e["id"]
                if d.function:
                    e["name"] += d.function.name or ""
                    e["arguments"] += d.function.arguments or ""
            finish = cc.finish_reason or finish
    assert finish == "tool_calls" and calls, calls
    for e in calls.values():
        assert e["id"].startswith("call_") and e["name"] == "get_weather"
        schema_gen.validator(PARAMS["get_weather"]).validate(json.loads(e["arguments"]))
    # auto: the model chooses; either text or calls that validate
    r = c.chat.completions.create(model="gemma", max_tokens=60, temperature=0, tools=[WEATHER],
                                  stop=["\nUser:"], messages=msgs)
    ch = r.choices[0]
    if ch.message.tool_calls:
        check_calls(ch, {"get_weather"})
    else:
        assert ch.finish_reason in ("stop", "length") and ch.message.content is not None
    # a tool_choice naming no tool, tools with a bad schema
    with pytest.raises(openai.BadRequestError) as e:
        c.chat.completions.create(model="gemma", max_tokens=8, tools=[WEATHER], messages=msgs,
                                  tool_choice={"type": "function", "function": {"name": "x"}})
    assert e.value.param == "tool_choice"
    bad = {"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"x": {"type": "no-such-type"}}}}}
    with pytest.raises(openai.BadRequestError) as e:
        c.chat.completions.create(model="gemma", max_tokens=8, tools=[bad],
                                  tool_choice="required", messages=msgs)
    assert e.value.param == "tools" and e.value.code == "E_BAD_CONSTRAINT", e.value.body
