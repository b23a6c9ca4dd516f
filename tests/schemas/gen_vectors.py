#!/usr/bin/env python3
"""gen_vectors.py -- writes parley's golden wire vectors (schemas/testdata/).

Each vector is NAME.msgpack (the record bytes) plus NAME.json:

    {"kind": "turn|chunk|result|dead|cancel",
     "description": "...",
     "limits": {...},              # sch_limits overrides, omitted if none
     "expect": "ok",  "value": VIEW}      # the decoded view (sch_json.h)
  or "expect": "error", "code": "E_..."}

Valid records are packed with the PyPI msgpack package (an encoder we did not
write).  Invalid bytes that msgpack will not produce (bad UTF-8 in str,
duplicate keys, forced integer widths, truncation) come from the small
hand-written encoder `mp()` (mp_hand.py).  The VIEW of a valid record is
computed by sch_views.py: a Python reading of the spec's defaults,
independent of the C decoder; tests/py/test_schemas_interop.py uses it too.

Usage: gen_vectors.py [OUTDIR]   (default: schemas/testdata of this repo)
The output is deterministic, so re-running it must reproduce the committed
files byte for byte (the interop test checks this).
"""
import json
import os
import sys

import msgpack

from mp_hand import F32, Int, Pairs, Raw, RawStr, mp
from sch_views import VIEWS

# ------------------------------------------------------------- vectors

def base_turn(**kw):
    d = {"v": 1, "conversation_id": "conv-1", "turn_id": "turn-1",
         "messages": [{"role": "user", "content": "Hello"}]}
    d.update(kw)
    return d


def base_chunk(**kw):
    d = {"v": 1, "conversation_id": "conv-1", "turn_id": "turn-1",
         "attempt": 7, "seq": 0, "text": "Hel", "tokens": [15043]}
    d.update(kw)
    return d


def base_result(**kw):
    d = {"v": 1, "conversation_id": "conv-1", "turn_id": "turn-1",
         "attempt": 7, "text": "Hello there.", "tokens": [15043, 727, 29889],
         "finish_reason": "stop",
         "usage": {"prompt_tokens": 12, "cached_tokens": 8,
                   "completion_tokens": 3},
         "timing": {"queue_ms": 4, "ttft_ms": 31, "total_ms": 95},
         "worker": "worker-0"}
    d.update(kw)
    return d


def base_dead(**kw):
    d = {"v": 1, "reason": "messages[0].role: \"bot\" is not system, user "
         "or assistant", "error_code": "E_BAD_ROLE", "topic": "parley.turns",
         "partition": 3, "offset": 1042}
    d.update(kw)
    return d


def base_cancel(**kw):
    d = {"v": 1, "conversation_id": "conv-1", "turn_id": "turn-1"}
    d.update(kw)
    return d


def without(d, *keys):
    return {k: v for k, v in d.items() if k not in keys}


def vectors():
    """Yield (name, kind, description, bytes, expect, limits)."""
    V = []

    def ok(kind, name, desc, rec, limits=None, raw=None, view_of=None):
        data = raw if raw is not None else msgpack.packb(rec)
        view = VIEWS[kind](view_of if view_of is not None else rec, limits)
        V.append((f"{kind}_ok_{name}", kind, desc, data,
                  {"expect": "ok", "value": view}, limits))

    def err(kind, name, desc, data, code, limits=None):
        if not isinstance(data, (bytes, bytearray)):
            data = mp(data)
        V.append((f"{kind}_err_{name}", kind, desc, bytes(data),
                  {"expect": "error", "code": code}, limits))

    # ---- ChatTurn: valid
    ok("turn", "minimal", "only the required fields", base_turn())
    full = base_turn(
        messages=[{"role": "system", "content": "You are a terse assistant."},
                  {"role": "user", "content": "What is KV caching?"},
                  {"role": "assistant", "content": "Reusing attention keys."},
                  {"role": "user", "content": "Why does it help?"}],
        params={"max_tokens": 128, "temperature": 0.7, "top_p": 0.9,
                "top_k": 40, "seed": 1234567890123,
                "stop": ["\nUser:", "</s>"], "repetition_penalty": 1.1},
        stream=True, namespace="tenant-a", deadline_ms=1764700030000,
        created_ms=1764700000000, model="cai-tiny")
    ok("turn", "full", "every field set", full)
    uni = base_turn(
        conversation_id="разговор-42", turn_id="ターン\u00e9",
        messages=[{"role": "system", "content": "Réponds en français. 🚀"},
                  {"role": "user", "content": "مرحبا — ñandú 中文 e\u0301 "
                   "\U0010FFFF \uFFFF \u0000 tab\there\nnewline"},
                  {"role": "assistant", "content": ""}],
        params={"stop": ["。", "🛑"]})
    ok("turn", "unicode", "multilingual text, emoji, U+10FFFF, U+0000, "
       "empty content, unicode ids and stops", uni)
    big = base_turn(messages=[
        {"role": ("system", "user", "assistant")[0 if i == 0 else 1 + i % 2],
         "content": f"message {i}: " + "lorem ipsum dolor sit amet " * (
             1 + i % 20)} for i in range(180)])
    ok("turn", "large", "180 messages (a long Character.AI-style dialogue)",
       big)
    ok("turn", "prompt_tokens", "pre-tokenized prompt instead of messages",
       without(base_turn(prompt_tokens=[1, 15043, 29892, 2147483647, 0]),
               "messages"))
    unk = Pairs([("v", 1), ("future_top", {"nested": [1, [2, {"x": None}]]}),
                 ("conversation_id", "conv-1"), ("turn_id", "turn-1"),
                 ("messages", [Pairs([("content", "hi"), ("name", "ann"),
                                      ("role", "user")])]),
                 ("params", Pairs([("temperature", F32(0.5)),
                                   ("future_param", True),
                                   ("seed", None), ("stop", "###")])),
                 ("model", None), ("prompt_tokens", None),
                 ("ts", Raw(b"\xd6\xff\x65\x5b\x60\x00"))])
    ok("turn", "unknown_fields", "unknown fields at every level, nil "
       "optionals, float32 temperature, stop as one string, ext value",
       None, raw=mp(unk), view_of=base_turn(
           messages=[{"role": "user", "content": "hi"}],
           params={"temperature": 0.5, "stop": "###"}))
    widths = Pairs([("v", Int(1, 0xcf)), ("conversation_id", "c"),
                    ("turn_id", "t"),
                    ("prompt_tokens", [Int(5, 0xd0), Int(6, 0xce)]),
                    ("params", {"max_tokens": Int(64, 0xd3),
                                "temperature": Int(0, 0xd0)})])
    ok("turn", "int_widths", "non-minimal integer encodings (uint64 v, "
       "int8/int64 values, int temperature)", None, raw=mp(widths),
       view_of={"conversation_id": "c", "turn_id": "t", "prompt_tokens":
                [5, 6], "params": {"max_tokens": 64, "temperature": 0}})
    at = {"max_messages": 2, "max_content_bytes": 5, "max_stop": 1,
          "max_stop_bytes": 3, "max_tokens": 10, "max_id_bytes": 4}
    ok("turn", "at_limits", "every configured limit reached, none exceeded",
       base_turn(conversation_id="abcd", turn_id="wxyz",
                 messages=[{"role": "user", "content": "12345"},
                           {"role": "assistant", "content": "é€"}],
                 params={"max_tokens": 10, "stop": ["abc"]}), limits=at)

    # ---- ChatTurn: structure
    good = msgpack.packb(full)
    err("turn", "empty", "zero bytes", b"", "E_TRUNCATED")
    err("turn", "truncated", "a valid record cut in half",
        good[:len(good) // 2], "E_TRUNCATED")
    err("turn", "truncated_header", "map32 header cut", b"\xdf\x00\x00",
        "E_TRUNCATED")
    err("turn", "huge_count", "array header claiming 2^32-1 elements",
        mp(Pairs([("x", Raw(b"\xdd\xff\xff\xff\xff"))])), "E_TRUNCATED")
    err("turn", "trailing_garbage", "bytes after the root map",
        msgpack.packb(base_turn()) + b"\x00garbage", "E_TRAILING_BYTES")
    err("turn", "two_records", "two maps back to back",
        msgpack.packb(base_turn()) * 2, "E_TRAILING_BYTES")
    err("turn", "malformed_c1", "the never-used byte 0xc1",
        mp(Pairs([("v", Raw(b"\xc1"))])), "E_MALFORMED")
    err("turn", "not_map_array", "root is an array",
        msgpack.packb([base_turn()]), "E_NOT_MAP")
    err("turn", "not_map_str", "root is a str", msgpack.packb("hello"),
        "E_NOT_MAP")
    err("turn", "not_map_int", "root is an int", msgpack.packb(7),
        "E_NOT_MAP")
    err("turn", "deep_nesting", "1000 nested arrays in an unknown field",
        mp(Pairs(list(base_turn().items()) + [
            ("junk", Raw(b"\x91" * 1000 + b"\xc0"))])), "E_TOO_DEEP")
    err("turn", "depth_17", "one level over the default max_depth of 16",
        mp(Pairs(list(base_turn().items()) + [
            ("junk", Raw(b"\x91" * 16 + b"\xc0"))])), "E_TOO_DEEP")
    err("turn", "duplicate_key", "turn_id twice",
        Pairs(list(base_turn().items()) + [("turn_id", "turn-2")]),
        "E_DUPLICATE_KEY")
    err("turn", "duplicate_key_message", "role twice in a message",
        base_turn(messages=[Pairs([("role", "user"), ("content", "a"),
                                   ("role", "system")])]), "E_DUPLICATE_KEY")
    err("turn", "duplicate_key_params", "top_k twice in params",
        base_turn(params=Pairs([("top_k", 1), ("top_k", 2)])),
        "E_DUPLICATE_KEY")
    err("turn", "bad_key_int", "an integer key",
        Pairs(list(base_turn().items()) + [(5, 5)]), "E_BAD_KEY")
    err("turn", "bad_key_long", "a 65-byte key",
        Pairs(list(base_turn().items()) + [("k" * 65, 5)]), "E_BAD_KEY")
    err("turn", "too_many_fields", "root map of 65 entries",
        Pairs(list(base_turn().items()) + [(f"x{i}", i) for i in range(61)]),
        "E_TOO_MANY_FIELDS")
    # ---- version, presence, types
    err("turn", "version_2", "major version 2", base_turn(v=2),
        "E_UNSUPPORTED_VERSION")
    err("turn", "version_0", "version 0", base_turn(v=0),
        "E_UNSUPPORTED_VERSION")
    err("turn", "version_str", "v as a str", base_turn(v="1"),
        "E_WRONG_TYPE")
    err("turn", "missing_v", "no v", without(base_turn(), "v"),
        "E_MISSING_FIELD")
    err("turn", "missing_conversation_id", "no conversation_id",
        without(base_turn(), "conversation_id"), "E_MISSING_FIELD")
    err("turn", "missing_turn_id", "turn_id nil",
        base_turn(turn_id=None), "E_MISSING_FIELD")
    err("turn", "missing_role", "message without role",
        base_turn(messages=[{"content": "x"}]), "E_MISSING_FIELD")
    err("turn", "missing_content", "message without content",
        base_turn(messages=[{"role": "user"}]), "E_MISSING_FIELD")
    types = [
        ("conversation_id_int", {"conversation_id": 42}),
        ("conversation_id_bin", {"conversation_id": b"conv"}),
        ("messages_map", {"messages": {"role": "user"}}),
        ("message_str", {"messages": ["hello"]}),
        ("role_int", {"messages": [{"role": 1, "content": "x"}]}),
        ("content_bin", {"messages": [{"role": "user", "content": b"x"}]}),
        ("params_array", {"params": [1, 2]}),
        ("max_tokens_float", {"params": {"max_tokens": 16.0}}),
        ("temperature_str", {"params": {"temperature": "0.7"}}),
        ("stop_int", {"params": {"stop": 5}}),
        ("stop_item_int", {"params": {"stop": ["a", 5]}}),
        ("stream_int", {"stream": 1}),
        ("model_int", {"model": 3}),
    ]
    for name, kw in types:
        err("turn", "type_" + name, f"wrong msgpack type: {kw}",
            base_turn(**kw), "E_WRONG_TYPE")
    err("turn", "type_prompt_tokens_str", "prompt_tokens as a str",
        without(base_turn(prompt_tokens="1 2 3"), "messages"),
        "E_WRONG_TYPE")
    err("turn", "type_token_float", "a float token id",
        without(base_turn(prompt_tokens=[1, 2.0]), "messages"),
        "E_WRONG_TYPE")
    ranges = [
        ("max_tokens_0", {"max_tokens": 0}),
        ("temperature_negative", {"temperature": -0.5}),
        ("temperature_nan", {"temperature": float("nan")}),
        ("temperature_inf", {"temperature": float("inf")}),
        ("temperature_101", {"temperature": 101}),
        ("top_p_0", {"top_p": 0.0}),
        ("top_p_above_1", {"top_p": 1.5}),
        ("top_k_negative", {"top_k": -1}),
        ("top_k_2_31", {"top_k": 1 << 31}),
        ("repetition_penalty_0", {"repetition_penalty": 0}),
        ("seed_negative", {"seed": -1}),
    ]
    for name, p in ranges:
        err("turn", "range_" + name, f"params out of range: {p}",
            base_turn(params=p), "E_OUT_OF_RANGE")
    err("turn", "range_token_2_31", "token id 2^31",
        without(base_turn(prompt_tokens=[1 << 31]), "messages"),
        "E_OUT_OF_RANGE")
    err("turn", "range_deadline_negative", "negative deadline_ms",
        base_turn(deadline_ms=-5), "E_OUT_OF_RANGE")
    # ---- UTF-8, ids, roles, inputs
    bad_utf8 = [("overlong", b"\xc0\xaf"), ("overlong3", b"\xe0\x80\xaf"),
                ("surrogate", b"\xed\xa0\x80"),
                ("above_10ffff", b"\xf4\x90\x80\x80"),
                ("truncated_seq", b"ok\xe2\x82"),
                ("stray_continuation", b"\x80abc"), ("ff", b"\xff")]
    for name, b in bad_utf8:
        err("turn", "utf8_" + name, f"content bytes {b!r}",
            base_turn(messages=[{"role": "user", "content": RawStr(b)}]),
            "E_BAD_UTF8")
    err("turn", "utf8_conversation_id", "conversation_id with a surrogate",
        base_turn(conversation_id=RawStr(b"c\xed\xbf\xbf")), "E_BAD_UTF8")
    err("turn", "utf8_stop", "stop string with an overlong",
        base_turn(params={"stop": [RawStr(b"\xc1\x81")]}), "E_BAD_UTF8")
    err("turn", "value_empty_conversation_id", "empty conversation_id",
        base_turn(conversation_id=""), "E_BAD_VALUE")
    err("turn", "value_control_turn_id", "turn_id with a newline",
        base_turn(turn_id="a\nb"), "E_BAD_VALUE")
    err("turn", "value_namespace", "namespace with ':'",
        base_turn(namespace="a:b"), "E_BAD_VALUE")
    err("turn", "value_empty_stop", "an empty stop string",
        base_turn(params={"stop": [""]}), "E_BAD_VALUE")
    err("turn", "role_bot", "role \"bot\"",
        base_turn(messages=[{"role": "bot", "content": "x"}]), "E_BAD_ROLE")
    err("turn", "role_case", "role \"User\" (roles are case-sensitive)",
        base_turn(messages=[{"role": "User", "content": "x"}]), "E_BAD_ROLE")
    err("turn", "no_input", "neither messages nor prompt_tokens",
        without(base_turn(), "messages"), "E_MISSING_INPUT")
    err("turn", "both_inputs", "messages and prompt_tokens",
        base_turn(prompt_tokens=[1]), "E_BOTH_INPUTS")
    err("turn", "empty_messages", "messages = []", base_turn(messages=[]),
        "E_EMPTY_INPUT")
    err("turn", "empty_prompt_tokens", "prompt_tokens = []",
        without(base_turn(prompt_tokens=[]), "messages"), "E_EMPTY_INPUT")
    # ---- limits (small configured limits keep the files small)
    m = {"role": "user", "content": "x"}
    err("turn", "limit_messages", "4 messages, max_messages 3",
        base_turn(messages=[m] * 4), "E_TOO_MANY_MESSAGES",
        {"max_messages": 3})
    err("turn", "limit_content", "6-byte content, max_content_bytes 5",
        base_turn(messages=[{"role": "user", "content": "123456"}]),
        "E_CONTENT_TOO_LONG", {"max_content_bytes": 5})
    err("turn", "limit_total", "record over max_total_bytes 64", full,
        "E_RECORD_TOO_LARGE", {"max_total_bytes": 64})
    err("turn", "limit_objects", "more values than max_objects 10", full,
        "E_TOO_MANY_OBJECTS", {"max_objects": 10})
    err("turn", "limit_depth", "messages deeper than max_depth 2",
        base_turn(), "E_TOO_DEEP", {"max_depth": 2})
    err("turn", "limit_stop_count", "3 stop strings, max_stop 2",
        base_turn(params={"stop": ["a", "b", "c"]}),
        "E_TOO_MANY_STOP_STRINGS", {"max_stop": 2})
    err("turn", "limit_stop_bytes", "4-byte stop, max_stop_bytes 3",
        base_turn(params={"stop": ["abcd"]}), "E_STOP_STRING_TOO_LONG",
        {"max_stop_bytes": 3})
    err("turn", "limit_max_tokens", "max_tokens 32769 over the default",
        base_turn(params={"max_tokens": 32769}), "E_MAX_TOKENS_TOO_LARGE")
    err("turn", "limit_prompt_tokens", "5 tokens, max_prompt_tokens 4",
        without(base_turn(prompt_tokens=[1, 2, 3, 4, 5]), "messages"),
        "E_TOO_MANY_PROMPT_TOKENS", {"max_prompt_tokens": 4})
    err("turn", "limit_id", "257-byte conversation_id (default limit 256)",
        base_turn(conversation_id="c" * 257), "E_STRING_TOO_LONG")

    # ---- TokenChunk
    ok("chunk", "minimal", "a one-token chunk", base_chunk())
    ok("chunk", "full", "last chunk of an attempt, several tokens",
       base_chunk(attempt=(1 << 64) - 1, seq=4096, text=" world.",
                  tokens=[1917, 29889], last=True))
    ok("chunk", "unicode", "multi-byte text; empty text with no tokens",
       base_chunk(text="日本語 🚀 \u0000", tokens=[]))
    ok("chunk", "large", "1000 tokens in one chunk",
       base_chunk(text="x" * 4000, tokens=list(range(1000))))
    err("chunk", "missing_tokens", "no tokens",
        without(base_chunk(), "tokens"), "E_MISSING_FIELD")
    err("chunk", "missing_attempt", "no attempt",
        without(base_chunk(), "attempt"), "E_MISSING_FIELD")
    err("chunk", "type_tokens", "tokens as a str", base_chunk(tokens="1"),
        "E_WRONG_TYPE")
    err("chunk", "type_last", "last as an int", base_chunk(last=1),
        "E_WRONG_TYPE")
    err("chunk", "range_seq", "negative seq", base_chunk(seq=-1),
        "E_OUT_OF_RANGE")
    err("chunk", "utf8_text", "text cut inside a code point",
        base_chunk(text=RawStr(b"caf\xc3")), "E_BAD_UTF8")
    err("chunk", "limit_tokens", "3 tokens, max_tokens 2",
        base_chunk(tokens=[1, 2, 3]), "E_TOO_MANY_TOKENS", {"max_tokens": 2})
    err("chunk", "limit_text", "text over max_content_bytes 4",
        base_chunk(text="hello"), "E_CONTENT_TOO_LONG",
        {"max_content_bytes": 4})
    err("chunk", "version_9", "v 9", base_chunk(v=9),
        "E_UNSUPPORTED_VERSION")
    err("chunk", "truncated", "cut record", msgpack.packb(base_chunk())[:20],
        "E_TRUNCATED")
    err("chunk", "duplicate_key", "seq twice",
        Pairs(list(base_chunk().items()) + [("seq", 1)]), "E_DUPLICATE_KEY")
    err("chunk", "not_map", "root nil", b"\xc0", "E_NOT_MAP")

    # ---- TurnResult
    ok("result", "minimal", "a plain successful reply", base_result())
    ok("result", "full", "an error result with model",
       base_result(finish_reason="error", text="", tokens=[], model="tiny",
                   error={"code": "E_CONTEXT_OVERFLOW",
                          "message": "prompt of 9000 tokens exceeds 8192"}))
    ok("result", "expired", "expired with its error",
       base_result(finish_reason="expired",
                   error={"code": "E_EXPIRED", "message": "deadline passed"}))
    ok("result", "unicode", "unicode text", base_result(
        text="Voilà — 答案是 42 🙂", finish_reason="length"))
    ok("result", "large", "4000 generated tokens",
       base_result(text="token " * 4000, tokens=list(range(4000)),
                   usage={"prompt_tokens": 50000, "cached_tokens": 49000,
                          "completion_tokens": 4000}))
    ok("result", "future_code", "an error code this reader does not know",
       base_result(finish_reason="error",
                   error={"code": "E_FROM_THE_FUTURE", "message": "x"}))
    err("result", "finish_unknown", "finish_reason \"done\"",
        base_result(finish_reason="done"), "E_BAD_VALUE")
    err("result", "error_missing", "finish_reason error without error",
        base_result(finish_reason="error"), "E_MISSING_FIELD")
    err("result", "error_code_syntax", "error.code in lower case",
        base_result(error={"code": "oops", "message": "m"}), "E_BAD_VALUE")
    err("result", "cached_above_prompt", "cached_tokens > prompt_tokens",
        base_result(usage={"prompt_tokens": 1, "cached_tokens": 2,
                           "completion_tokens": 0}), "E_OUT_OF_RANGE")
    err("result", "usage_missing_field", "usage without completion_tokens",
        base_result(usage={"prompt_tokens": 1, "cached_tokens": 0}),
        "E_MISSING_FIELD")
    err("result", "missing_worker", "no worker",
        without(base_result(), "worker"), "E_MISSING_FIELD")
    err("result", "type_timing", "timing as an array",
        base_result(timing=[1, 2, 3]), "E_WRONG_TYPE")
    err("result", "limit_error_message", "error.message over "
        "max_text_bytes 4", base_result(
            finish_reason="error",
            error={"code": "E_INTERNAL", "message": "hello"}),
        "E_STRING_TOO_LONG", {"max_text_bytes": 4})
    err("result", "limit_tokens", "3 tokens, max_tokens 2", base_result(),
        "E_TOO_MANY_TOKENS", {"max_tokens": 2})
    err("result", "trailing", "a byte after the map",
        msgpack.packb(base_result()) + b"\x01", "E_TRAILING_BYTES")
    err("result", "truncated", "cut inside usage",
        msgpack.packb(base_result())[:-30], "E_TRUNCATED")

    # ---- spec 1.2: structured outputs, logprobs, n, tools, raw prompts
    schema = json.dumps({"type": "object", "properties": {
        "name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}},
        "required": ["name", "age"], "additionalProperties": False})
    tools = json.dumps([{"type": "function", "function": {
        "name": "get_weather", "description": "Weather of a city",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string"}}, "required": ["city"]}}}])
    ok("turn", "structured", "1.2: response_format json_schema (the schema "
       "as JSON text), logprobs with 5 alternatives, n 3",
       base_turn(params={"response_format": {"type": "json_schema",
                                             "schema": schema},
                         "logprobs": 5, "n": 3}))
    ok("turn", "regex", "1.2: response_format regex, logprobs 0 (the chosen "
       "token only)", base_turn(params={"response_format": {
           "type": "regex", "pattern": "(yes|no)"}, "logprobs": 0}))
    ok("turn", "grammar", "1.2: response_format grammar (Lark)",
       base_turn(params={"response_format": {
           "type": "grammar", "grammar": 'start: "a"+ "b"'}}))
    ok("turn", "json_object", "1.2: response_format json_object; text is "
       "the default", base_turn(params={"response_format": {
           "type": "json_object", "schema": "ignored for json_object"}}))
    ok("turn", "tools", "1.2: tools and tool_choice as JSON text, no "
       "parallel calls; a tool call and its result in the conversation",
       base_turn(messages=[
           {"role": "user", "content": "Weather in Paris?"},
           {"role": "assistant", "content": "", "tool_calls": json.dumps(
               [{"id": "call_1", "type": "function", "function": {
                   "name": "get_weather",
                   "arguments": "{\"city\": \"Paris\"}"}}])},
           {"role": "tool", "content": "18C, clear", "tool_call_id": "call_1"}],
           params={"tools": tools, "tool_choice": '"required"',
                   "parallel_tool_calls": False}))
    ok("turn", "prompt", "1.2: a raw prompt text (no chat template)",
       without(base_turn(prompt="Once upon a time"), "messages"))
    ok("turn", "defaults_12", "1.2 params at their defaults (text, n 1, "
       "parallel_tool_calls true) read as if absent",
       base_turn(params={"response_format": {"type": "text"}, "n": 1,
                         "parallel_tool_calls": True}))
    err("turn", "rf_type", "response_format type \"xml\"",
        base_turn(params={"response_format": {"type": "xml"}}), "E_BAD_VALUE")
    err("turn", "rf_missing_schema", "json_schema without schema",
        base_turn(params={"response_format": {"type": "json_schema"}}),
        "E_MISSING_FIELD")
    err("turn", "rf_schema_map", "the schema as a map, not JSON text",
        base_turn(params={"response_format": {"type": "json_schema",
                                              "schema": {"type": "object"}}}),
        "E_WRONG_TYPE")
    err("turn", "rf_empty_pattern", "an empty regex",
        base_turn(params={"response_format": {"type": "regex",
                                              "pattern": ""}}), "E_BAD_VALUE")
    err("turn", "limit_constraint", "a schema over max_constraint_bytes 8",
        base_turn(params={"response_format": {"type": "json_schema",
                                              "schema": schema}}),
        "E_STRING_TOO_LONG", {"max_constraint_bytes": 8})
    err("turn", "range_logprobs_21", "logprobs 21 (alternatives 0..20)",
        base_turn(params={"logprobs": 21}), "E_OUT_OF_RANGE")
    err("turn", "type_logprobs_bool", "logprobs true (it is a count)",
        base_turn(params={"logprobs": True}), "E_WRONG_TYPE")
    err("turn", "range_n_0", "n 0", base_turn(params={"n": 0}),
        "E_OUT_OF_RANGE")
    err("turn", "range_n_17", "n 17", base_turn(params={"n": 17}),
        "E_OUT_OF_RANGE")
    err("turn", "type_tools_array", "tools as an array, not JSON text",
        base_turn(params={"tools": []}), "E_WRONG_TYPE")
    err("turn", "value_empty_tools", "tools as an empty string",
        base_turn(params={"tools": ""}), "E_BAD_VALUE")
    err("turn", "type_parallel", "parallel_tool_calls as an int",
        base_turn(params={"parallel_tool_calls": 1}), "E_WRONG_TYPE")
    err("turn", "value_tool_call_id", "a tool_call_id with a newline",
        base_turn(messages=[{"role": "tool", "content": "x",
                             "tool_call_id": "a\nb"}]), "E_BAD_VALUE")
    # ---- spec 1.3: service classes
    ok("turn", "class_bulk", "1.3: service_class bulk",
       base_turn(service_class="bulk"))
    ok("turn", "class_interactive", "1.3: service_class interactive (the "
       "default) reads as if absent", base_turn(service_class="interactive"))
    err("turn", "class_unknown", "service_class \"flex\" (OpenAI's tier "
        "name is the gateway's business, not the wire's)",
        base_turn(service_class="flex"), "E_BAD_VALUE")
    err("turn", "class_case", "service_class \"Bulk\" (case-sensitive)",
        base_turn(service_class="Bulk"), "E_BAD_VALUE")
    err("turn", "type_class_int", "service_class 1, not a name",
        base_turn(service_class=1), "E_WRONG_TYPE")
    err("turn", "three_inputs", "messages and prompt",
        base_turn(prompt="x"), "E_BOTH_INPUTS")
    err("turn", "empty_prompt", "an empty prompt",
        without(base_turn(prompt=""), "messages"), "E_EMPTY_INPUT")
    lp = [{"id": 15043, "token": "Hel", "logprob": -0.25, "top": [
        {"id": 15043, "token": "Hel", "logprob": -0.25},
        {"id": 10994, "token": "Hi", "logprob": -1.75}]}]
    ok("chunk", "logprobs", "1.2: choice 2's chunk with the logprobs of "
       "its token and 2 alternatives",
       base_chunk(index=2, logprobs=lp))
    ok("chunk", "logprob_bytes", "1.2: a token that is not whole UTF-8: "
       "U+FFFD in token, its raw bytes in bytes", base_chunk(
           text="", tokens=[239], logprobs=[{
               "id": 239, "token": "\ufffd", "logprob": -0.5,
               "bytes": [0xe2, 0x82]}]))
    err("chunk", "logprobs_count", "2 logprobs for 1 token",
        base_chunk(logprobs=lp * 2), "E_BAD_VALUE")
    err("chunk", "range_logprob_positive", "a logprob above 0",
        base_chunk(logprobs=[{"id": 15043, "token": "Hel", "logprob": 0.5}]),
        "E_OUT_OF_RANGE")
    err("chunk", "range_top_21", "21 alternatives",
        base_chunk(logprobs=[dict(lp[0], top=(lp[0]["top"] * 11)[:21])]),
        "E_OUT_OF_RANGE")
    err("chunk", "range_byte", "a byte of 256",
        base_chunk(logprobs=[{"id": 15043, "token": "Hel", "logprob": -1.0,
                              "bytes": [256]}]), "E_OUT_OF_RANGE")
    err("chunk", "range_index", "index 16", base_chunk(index=16),
        "E_OUT_OF_RANGE")
    calls = [{"id": "call_7", "name": "get_weather",
              "arguments": "{\"city\": \"Paris\"}"}]
    ok("result", "tool_calls", "1.2: a reply that calls a tool (text "
       "empty, finish_reason stop)",
       base_result(text="", tool_calls=calls))
    ok("result", "choices", "1.2: n 3: choice 0 in the result's fields, "
       "choices 1 and 2 in choices, with logprobs", base_result(
           tokens=[15043], text="Hel", logprobs=lp,
           usage={"prompt_tokens": 12, "cached_tokens": 0,
                  "completion_tokens": 4},
           choices=[{"index": 1, "text": "Hi", "tokens": [10994],
                     "finish_reason": "stop", "logprobs": [
                         {"id": 10994, "token": "Hi", "logprob": -1.75}]},
                    {"index": 2, "text": "", "tokens": [2, 3],
                     "finish_reason": "length", "tool_calls": calls}]))
    err("result", "choice_index", "choices numbered from 2",
        base_result(choices=[{"index": 2, "text": "", "tokens": [],
                              "finish_reason": "stop"}]), "E_BAD_VALUE")
    err("result", "choice_missing_tokens", "a choice without tokens",
        base_result(choices=[{"index": 1, "text": "",
                              "finish_reason": "stop"}]), "E_MISSING_FIELD")
    err("result", "tool_call_missing_arguments", "a tool call without "
        "arguments", base_result(tool_calls=[{"id": "c", "name": "f"}]),
        "E_MISSING_FIELD")
    err("result", "tool_call_name_empty", "a tool call with an empty name",
        base_result(tool_calls=[{"id": "c", "name": "", "arguments": "{}"}]),
        "E_BAD_VALUE")
    err("result", "logprobs_count", "logprobs for 1 of 3 tokens",
        base_result(logprobs=lp), "E_BAD_VALUE")

    # ---- DeadLetter
    ok("dead", "minimal", "required fields only", base_dead())
    ok("dead", "full", "everything, including binary and null headers",
       base_dead(timestamp_ms=1764700000000, key=b"conv-1",
                 value=b"\x81\xa1v\x02", value_size=4,
                 headers=[["traceparent",
                           b"00-4bf92f3577b34da6a3ce929d0e0e4736-"
                           b"00f067aa0ba902b7-01"],
                          [b"\xff\xfe", b"\x00\x01"], ["empty", None]],
                 conversation_id="conv-1", turn_id="turn-1",
                 worker="worker-0", dead_ms=1764700000123))
    ok("dead", "truncated_value", "value cut to a prefix, value_size keeps "
       "the original length", base_dead(value=b"\x00" * 16,
                                        value_size=10 << 20,
                                        error_code="E_RECORD_TOO_LARGE"))
    ok("dead", "unicode", "unicode reason and ids", base_dead(
        reason="conversation_id: не подходит ✗", conversation_id="会話"))
    ok("dead", "large", "a 20000-byte original value",
       base_dead(value=bytes(range(256)) * 78 + b"\x00" * 32))
    err("dead", "missing_offset", "no offset",
        without(base_dead(), "offset"), "E_MISSING_FIELD")
    err("dead", "range_partition", "negative partition",
        base_dead(partition=-1), "E_OUT_OF_RANGE")
    err("dead", "range_value_size", "value_size below the value's length",
        base_dead(value=b"abc", value_size=2), "E_OUT_OF_RANGE")
    err("dead", "header_not_pair", "a header of one element",
        base_dead(headers=[["a"]]), "E_WRONG_TYPE")
    err("dead", "limit_headers", "2 headers, max_headers 1",
        base_dead(headers=[["a", None], ["b", None]]), "E_TOO_MANY_HEADERS",
        {"max_headers": 1})
    err("dead", "error_code_syntax", "error_code with a space",
        base_dead(error_code="E BAD"), "E_BAD_VALUE")
    err("dead", "type_value", "value as an int", base_dead(value=5),
        "E_WRONG_TYPE")
    err("dead", "utf8_reason", "reason not UTF-8",
        base_dead(reason=RawStr(b"\xfe")), "E_BAD_UTF8")
    err("dead", "not_map", "root array", msgpack.packb([1]), "E_NOT_MAP")
    err("dead", "truncated", "cut record", msgpack.packb(base_dead())[:-3],
        "E_TRUNCATED")

    # ---- 1.4: CancelTurn, and finish_reason "cancelled"
    ok("result", "cancelled", "1.4: a turn stopped by a CancelTurn, with "
       "what it had generated", base_result(finish_reason="cancelled",
                                            text="Hel", tokens=[15043]))
    ok("cancel", "minimal", "1.4: the turn it names, nothing else",
       base_cancel())
    ok("cancel", "full", "1.4: with cancelled_ms and reason",
       base_cancel(cancelled_ms=1796601600123,
                   reason="client disconnected"))
    ok("cancel", "unicode", "1.4: unicode ids and reason",
       base_cancel(conversation_id="会話-ü", turn_id="🚀",
                   reason="услуга отменена"))
    ok("cancel", "large", "1.4: a 4000-byte reason, an unknown field",
       base_cancel(reason="x" * 4000, x_extension=[1, 2, 3]),
       view_of=base_cancel(reason="x" * 4000))
    err("cancel", "missing_turn_id", "no turn_id",
        without(base_cancel(), "turn_id"), "E_MISSING_FIELD")
    err("cancel", "type_cancelled_ms", "cancelled_ms as a str",
        base_cancel(cancelled_ms="1"), "E_WRONG_TYPE")
    err("cancel", "version_2", "v 2", base_cancel(v=2),
        "E_UNSUPPORTED_VERSION")
    err("cancel", "limit_reason", "reason over max_text_bytes 4",
        base_cancel(reason="hello"), "E_STRING_TOO_LONG",
        {"max_text_bytes": 4})
    err("cancel", "not_map", "root array", msgpack.packb([1]), "E_NOT_MAP")
    return V


def write(outdir):
    os.makedirs(outdir, exist_ok=True)
    names = []
    for name, kind, desc, data, expect, limits in vectors():
        with open(os.path.join(outdir, name + ".msgpack"), "wb") as f:
            f.write(data)
        doc = {"kind": kind, "description": desc}
        if limits:
            doc["limits"] = limits
        doc.update(expect)
        with open(os.path.join(outdir, name + ".json"), "w",
                  encoding="utf-8") as f:
            json.dump(doc, f, ensure_ascii=False, indent=1, sort_keys=True,
                      allow_nan=False)
            f.write("\n")
        names.append(name)
    return names


if __name__ == "__main__":
    here = os.path.dirname(os.path.abspath(__file__))
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        here, "..", "..", "schemas", "testdata")
    print(f"{len(write(out))} vectors written to {os.path.normpath(out)}")
