"""The OpenAI Responses API of `parley gateway` (POST/GET/DELETE
/v1/responses) with the official `openai` client, against the real Kafka
broker and one worker on the real Gemma 3 270M:

* responses.create non-streamed and streamed: the same greedy text, and
  the same as chat.completions gives for the same conversation;
* previous_response_id over three turns: the conversation is kept in the
  compacted store topic, turn 3 reports cached input tokens (the turns
  reach the same worker and its KV cache) and equals chat.completions
  over the whole conversation;
* the conversation continued after a gateway restart, and through a second
  gateway replica that never saw it (its store reader catches up);
* GET and DELETE by id, scoped to the tenant (another key gets 404), and
  the delete's tombstone seen by the other replica;
* function tools (tool_choice required gives function_call items, streamed
  as argument deltas) and a function_call_output going back;
* text.format json_schema;
* expiry (gateway.responses_ttl_ms) and the memory bound
  (gateway.responses_max_bytes: the oldest records dropped first);
* every field parley cannot honour refused with 400 naming it, and an
  unknown previous_response_id refused (400, previous_response_not_found);
* a turn the worker refuses: 404, or in a stream an error event and
  response.failed; a gateway without its store topic (store false).
"""
import json
import subprocess
import uuid

import pytest

from test_gateway import start_gateway, stop
from test_structured import start_gemma_worker

openai = pytest.importorskip("openai")
ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, ConfigResource  # noqa: E402

KEYS = "sk-test=tenant-a,sk-other=tenant-b"


def gateway(g, *extra):
    """A gateway replica on the fleet's topics and store; (process, url)."""
    return start_gateway(g["kafka"], g["bin"], g["prefix"], "--gateway.timeout_ms", "120000",
                         "--gateway.api_keys", KEYS, "--gateway.topic.stored",
                         f"{g['prefix']}.stored", *extra)


@pytest.fixture(scope="module")
def fleet(kafka_bootstrap, parley_bin, gemma_model, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("responses")
    prefix = f"rs-{uuid.uuid4().hex[:10]}"
    worker, _ = start_gemma_worker(kafka_bootstrap, parley_bin, gemma_model, tmp, prefix)
    # `parley topics` adds the compacted store topic (the other four exist)
    r = subprocess.run([str(parley_bin), "topics", "--brokers", kafka_bootstrap, "--topic-prefix",
                        prefix, "--partitions", "2", "--replication-factor", "1"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert f"created  {prefix}.stored (2 partitions" in r.stdout, r.stdout
    assert r.stdout.count("exists") == 4, r.stdout
    res = ConfigResource("topic", f"{prefix}.stored")
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    assert admin.describe_configs([res])[res].result(30)["cleanup.policy"].value == "compact"
    g = {"kafka": kafka_bootstrap, "bin": parley_bin, "prefix": prefix}
    gw, url = gateway(g)
    g.update(gw=gw, url=url)
    yield g
    stop(g["gw"])
    stop(worker)


def client(url, key="sk-test"):
    return openai.OpenAI(base_url=url + "/v1", api_key=key, max_retries=0, timeout=180)


def chat_text(c, messages, max_tokens=12, **kw):
    r = c.chat.completions.create(model="gemma", messages=messages, max_tokens=max_tokens,
                                  temperature=0, **kw)
    return r.choices[0].message.content


def test_create_plain_streamed_and_as_chat(fleet):
    c = client(fleet["url"])
    r = c.responses.create(model="gemma", instructions="Answer briefly.",
                           input="Name a colour.", max_output_tokens=12, temperature=0)
    assert r.id.startswith("resp_") and r.object == "response"
    assert r.status in ("completed", "incomplete")
    assert r.output[0].type == "message" and r.output[0].role == "assistant"
    assert r.output_text and r.usage.output_tokens >= 1
    assert r.usage.total_tokens == r.usage.input_tokens + r.usage.output_tokens
    assert r.usage.input_tokens_details.cached_tokens >= 0
    types, text, done = [], "", None
    for ev in c.responses.create(model="gemma", instructions="Answer briefly.",
                                 input="Name a colour.", max_output_tokens=12, temperature=0,
                                 stream=True):
        types.append(ev.type)
        if ev.type == "response.output_text.delta":
            text += ev.delta
        if ev.type == "response.completed":
            done = ev.response
    assert types[0] == "response.created" and types[-1] == "response.completed", types
    assert "response.output_text.delta" in types and "response.output_item.done" in types
    assert text == r.output_text == done.output_text
    assert [s for s in types if s.startswith("response.output_text.done")]
    assert text == chat_text(c, [{"role": "system", "content": "Answer briefly."},
                                 {"role": "user", "content": "Name a colour."}])
    # a longer reply arrives in several deltas that add up to the result
    deltas, done = [], None
    for ev in c.responses.create(model="gemma", input="Count from one to thirty in words.",
                                 max_output_tokens=48, temperature=0, stream=True):
        if ev.type == "response.output_text.delta":
            deltas.append(ev.delta)
        if ev.type == "response.completed":
            done = ev.response
    assert len(deltas) >= 2 and "".join(deltas) == done.output_text
    assert done.usage.output_tokens > 8


def three_turns(fleet, urls):
    """Three turns chained by previous_response_id, turn k through urls[k];
    returns the responses and the conversation as chat messages."""
    msgs, out, prev = [], [], None
    for k, q in enumerate(["Say a number.", "Add one to it.", "And one more."]):
        c = client(urls[k])
        r = c.responses.create(model="gemma", input=q, previous_response_id=prev,
                               max_output_tokens=10, temperature=0)
        assert r.previous_response_id == prev
        msgs += [{"role": "user", "content": q}, {"role": "assistant", "content": r.output_text}]
        out.append(r)
        prev = r.id
    return out, msgs


def check_conversation(fleet, out, msgs):
    c = client(fleet["url"])
    # turn 3 found turns 1-2 in the worker's KV cache: same worker, same key
    assert out[2].usage.input_tokens_details.cached_tokens > 0
    assert out[2].usage.input_tokens > out[1].usage.input_tokens
    # the same conversation as chat completions: the same greedy reply
    assert chat_text(c, msgs[:-1], max_tokens=10) == out[2].output_text


def test_previous_response_id_three_turns(fleet):
    out, msgs = three_turns(fleet, [fleet["url"]] * 3)
    check_conversation(fleet, out, msgs)
    # GET returns the stored response
    got = client(fleet["url"]).responses.retrieve(out[2].id)
    assert got.id == out[2].id and got.output_text == out[2].output_text


def test_second_replica_and_restart(fleet):
    gw2, url2 = gateway(fleet)
    try:
        out, msgs = three_turns(fleet, [fleet["url"], url2, fleet["url"]])
        check_conversation(fleet, out, msgs)
        assert client(url2).responses.retrieve(out[0].id).output_text == out[0].output_text
    finally:
        stop(gw2)
    # a gateway restarted between turns continues from the topic
    c = client(fleet["url"])
    r1 = c.responses.create(model="gemma", input="Say a number.", max_output_tokens=10,
                            temperature=0)
    stop(fleet["gw"])
    fleet["gw"], fleet["url"] = gateway(fleet)
    c = client(fleet["url"])
    r2 = c.responses.create(model="gemma", input="Add one to it.", previous_response_id=r1.id,
                            max_output_tokens=10, temperature=0)
    assert r2.usage.input_tokens_details.cached_tokens > 0
    assert r2.output_text == chat_text(c, [{"role": "user", "content": "Say a number."},
                                           {"role": "assistant", "content": r1.output_text},
                                           {"role": "user", "content": "Add one to it."}],
                                       max_tokens=10)


def test_get_delete_tenant_scoped(fleet):
    a, b = client(fleet["url"]), client(fleet["url"], "sk-other")
    r = a.responses.create(model="gemma", input="Hi.", max_output_tokens=4, temperature=0)
    with pytest.raises(openai.NotFoundError):
        b.responses.retrieve(r.id)
    with pytest.raises(openai.NotFoundError):
        b.responses.delete(r.id)
    with pytest.raises(openai.BadRequestError) as e:
        b.responses.create(model="gemma", input="More.", previous_response_id=r.id,
                           max_output_tokens=4)
    assert e.value.body["param"] == "previous_response_id"
    assert e.value.body["code"] == "previous_response_not_found"
    assert a.responses.retrieve(r.id).id == r.id
    a.responses.delete(r.id)
    with pytest.raises(openai.NotFoundError):
        a.responses.retrieve(r.id)
    # a replica started afterwards reads the record and then its tombstone
    gw2, url2 = gateway(fleet)
    try:
        with pytest.raises(openai.NotFoundError):
            client(url2).responses.retrieve(r.id)
        with pytest.raises(openai.BadRequestError):
            client(url2).responses.create(model="gemma", input="x", previous_response_id=r.id)
    finally:
        stop(gw2)
    r2 = a.responses.create(model="gemma", input="Hi.", max_output_tokens=4, temperature=0,
                            store=False)
    assert r2.store is False
    with pytest.raises(openai.NotFoundError):
        a.responses.retrieve(r2.id)


def test_expired_responses(fleet):
    """A replica whose responses live 1 ms: stored, then expired on read."""
    gw2, url2 = gateway(fleet, "--gateway.responses_ttl_ms", "1")
    try:
        c = client(url2)
        r = c.responses.create(model="gemma", input="Hi.", max_output_tokens=4, temperature=0)
        assert r.store is True
        with pytest.raises(openai.NotFoundError):
            c.responses.retrieve(r.id)
        with pytest.raises(openai.BadRequestError) as e:
            c.responses.create(model="gemma", input="x", previous_response_id=r.id)
        assert e.value.body["code"] == "previous_response_not_found"
    finally:
        stop(gw2)
    # the default TTL still holds it
    assert client(fleet["url"]).responses.retrieve(r.id).id == r.id


def test_memory_bound_drops_the_oldest(fleet):
    """A replica holding at most 1 KiB of records keeps only the newest one
    it read or made (each record is larger): the others answer as expired
    there, and the fleet's own gateway (256 MiB) still has them all."""
    c = client(fleet["url"])
    rs = [c.responses.create(model="gemma", input=f"Hi {k}.", max_output_tokens=4,
                             temperature=0) for k in range(3)]
    gw2, url2 = gateway(fleet, "--gateway.responses_max_bytes", "1024")

    def held(c2, rid):
        try:
            return c2.responses.retrieve(rid).id == rid
        except openai.NotFoundError:
            return False
    try:
        c2 = client(url2)
        # the topic's partitions are read in no set order: one record is left
        assert sum(held(c2, r.id) for r in rs) <= 1
        r3 = c2.responses.create(model="gemma", input="Hi.", max_output_tokens=4, temperature=0)
        assert held(c2, r3.id)
        assert not any(held(c2, r.id) for r in rs)
    finally:
        stop(gw2)
    assert all(held(c, r.id) for r in rs + [r3])


def test_store_topic_missing(fleet):
    """A gateway whose store topic does not exist still starts (a warning
    after its listening line), answers with store false, refuses
    previous_response_id (400 naming it) and finds no stored id."""
    gw2, url2 = start_gateway(fleet["kafka"], fleet["bin"], fleet["prefix"],
                              "--gateway.timeout_ms", "120000", "--gateway.topic.stored",
                              f"{fleet['prefix']}.no-such-topic")
    try:
        c = client(url2)
        r = c.responses.create(model="gemma", input="Hi.", max_output_tokens=4, temperature=0)
        assert r.store is False and r.output_text
        with pytest.raises(openai.BadRequestError) as e:
            c.responses.create(model="gemma", input="x", previous_response_id=r.id)
        assert e.value.body["param"] == "previous_response_id"
        with pytest.raises(openai.NotFoundError):
            c.responses.retrieve(r.id)
    finally:
        stop(gw2)
    out = gw2.stdout.read()
    assert "no-such-topic does not exist (parley topics creates it)" in out, out


TOOL = {"type": "function", "name": "get_weather", "description": "Weather of a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                       "required": ["city"], "additionalProperties": False}}


def test_function_tools_and_output(fleet):
    c = client(fleet["url"])
    r = c.responses.create(model="gemma", input="What is the weather in Paris?", tools=[TOOL],
                           tool_choice="required", max_output_tokens=40, temperature=0)
    calls = [o for o in r.output if o.type == "function_call"]
    assert calls and calls[0].name == "get_weather"
    assert isinstance(json.loads(calls[0].arguments)["city"], str)
    args, types = {}, []
    for ev in c.responses.create(model="gemma", input="What is the weather in Paris?",
                                 tools=[TOOL], tool_choice="required", max_output_tokens=40,
                                 temperature=0, stream=True):
        types.append(ev.type)
        if ev.type == "response.function_call_arguments.delta":
            args[ev.output_index] = args.get(ev.output_index, "") + ev.delta
    assert list(args.values()) == [k.arguments for k in calls]
    assert types[-1] == "response.completed"
    # the call and its output go back, continuing the stored response
    r2 = c.responses.create(model="gemma", previous_response_id=r.id, tools=[TOOL],
                            input=[{"type": "function_call_output", "call_id": calls[0].call_id,
                                    "output": "sunny, 21 C"}],
                            max_output_tokens=12, temperature=0)
    conv = [{"role": "user", "content": "What is the weather in Paris?"},
            {"role": "assistant", "content": r.output_text or "",
             "tool_calls": [{"id": k.call_id, "type": "function",
                             "function": {"name": k.name, "arguments": k.arguments}}
                            for k in calls]},
            {"role": "tool", "tool_call_id": calls[0].call_id, "content": "sunny, 21 C"}]
    tools = [{"type": "function", "function": {k: v for k, v in TOOL.items() if k != "type"}}]
    assert (r2.output_text or "") == (chat_text(c, conv, tools=tools) or "")


def test_json_schema_format(fleet):
    c = client(fleet["url"])
    schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12}},
              "required": ["name"], "additionalProperties": False}
    r = c.responses.create(model="gemma", input="Give a name as JSON.", max_output_tokens=40,
                           temperature=0, text={"format": {"type": "json_schema", "name": "n",
                                                           "schema": schema, "strict": True}})
    assert isinstance(json.loads(r.output_text)["name"], str)


@pytest.mark.parametrize("field,value", [
    ("background", True), ("reasoning", {"effort": "low"}), ("prompt_cache_key", "k"),
    ("tools", [{"type": "web_search"}]), ("tools", [{"type": "file_search"}]),
    ("include", ["file_search_call.results"]), ("max_tool_calls", 2), ("truncation", "auto"),
    ("conversation", "conv_1"), ("top_logprobs", 2), ("metadata", {"a": "b"}),
    ("text", {"format": {"type": "yaml"}}), ("input", [{"type": "image_url"}]),
    ("max_output_tokens", 0), ("temperature", 3), ("made_up_field", 1)])
def test_refused_fields(fleet, field, value):
    c = client(fleet["url"])
    body = {"model": "gemma", "input": "Hi.", field: value}
    with pytest.raises(openai.BadRequestError) as e:
        c.post("/responses", body=body, cast_to=object)
    assert e.value.status_code == 400
    assert e.value.body["param"].split(".")[0].split("[")[0] == field, e.value.body


def test_bad_requests(fleet):
    c = client(fleet["url"])
    # a turn the worker refuses (unknown model, via its DLQ): 404, or in a
    # stream an error event and response.failed
    with pytest.raises(openai.NotFoundError):
        c.responses.create(model="no-such-model", input="x", max_output_tokens=4)
    types = [ev.type for ev in c.responses.create(model="no-such-model", input="x",
                                                  max_output_tokens=4, stream=True)]
    assert types[0] == "response.created" and types[-2:] == ["error", "response.failed"], types
    with pytest.raises(openai.BadRequestError) as e:
        c.responses.create(model="gemma", input="x", previous_response_id="resp_nope")
    assert e.value.body["code"] == "previous_response_not_found"
    with pytest.raises(openai.NotFoundError):
        c.responses.retrieve("resp_nope")
    with pytest.raises(openai.AuthenticationError):
        client(fleet["url"], "sk-wrong").responses.create(model="gemma", input="x")
    out = subprocess.run(["curl", "-s", "-X", "POST", fleet["url"] + "/v1/responses", "-H",
                          "Authorization: Bearer sk-test", "-d", "{not json"],
                         capture_output=True, text=True, timeout=30).stdout
    assert json.loads(out)["error"]["message"].startswith("the request body is not valid JSON")
