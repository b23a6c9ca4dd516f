"""sch_views.py -- the Python reading of parley's wire spec (schemas/README.md):
the view (sch_json.h's decoded form, with the spec's defaults filled in)
of each record kind, independent of the C decoder.  gen_vectors.py writes
the views of valid vectors into their NAME.json; tests/py/test_schemas_interop.py
compares the C decoder's view of any record with these.
"""

# Mirror of sch_limits_default(); the interop test checks it against C.
DEFAULT_LIMITS = {
    "max_total_bytes": 4 << 20, "max_depth": 16, "max_objects": 1 << 19,
    "max_messages": 4096, "max_content_bytes": 256 << 10, "max_stop": 16,
    "max_stop_bytes": 256, "max_tokens": 32768, "max_prompt_tokens": 131072,
    "max_id_bytes": 256, "max_text_bytes": 4096, "max_headers": 64,
    "max_constraint_bytes": 64 << 10,
}

# spec 1.2: the member of response_format holding the constraint, by type
RF_KEYS = {"json_schema": "schema", "regex": "pattern", "grammar": "grammar"}


def _text(s):
    return s.decode() if isinstance(s, (bytes, bytearray)) else s


def _hex(b):
    if b is None:
        return None
    if isinstance(b, str):
        b = b.encode()
    return bytes(b).hex()


def turn_view(d, limits=None):
    """Decoded view of a valid ChatTurn dict (spec defaults applied)."""
    lim = dict(DEFAULT_LIMITS, **(limits or {}))
    p = d.get("params") or {}
    stop = p.get("stop")
    if stop is None:
        stop = []
    elif isinstance(stop, str):
        stop = [stop]
    msgs = d.get("messages")
    toks = d.get("prompt_tokens")

    def opt(v, default):
        return default if v is None else v

    def message(m):
        out = {"role": m["role"], "content": m["content"]}
        for k in ("tool_calls", "tool_call_id"):  # 1.2, shown when set
            if m.get(k) is not None:
                out[k] = m[k]
        return out

    params = {
        "max_tokens": opt(p.get("max_tokens"), min(256, lim["max_tokens"])),
        "temperature": float(opt(p.get("temperature"), 1.0)),
        "top_p": float(opt(p.get("top_p"), 1.0)),
        "top_k": opt(p.get("top_k"), 0),
        "seed": p.get("seed"),
        "stop": list(stop),
        "repetition_penalty": float(opt(p.get("repetition_penalty"), 1.0)),
    }
    # 1.2 params, shown only when they differ from their defaults
    rf = p.get("response_format")
    if rf is not None and rf["type"] != "text":
        params["response_format"] = {"type": rf["type"]}
        if rf["type"] in RF_KEYS:
            params["response_format"]["spec"] = rf[RF_KEYS[rf["type"]]]
    if p.get("logprobs") is not None:
        params["logprobs"] = p["logprobs"]
    if opt(p.get("n"), 1) != 1:
        params["n"] = p["n"]
    for k in ("tools", "tool_choice"):
        if p.get(k) is not None:
            params[k] = p[k]
    if p.get("parallel_tool_calls") is False:
        params["parallel_tool_calls"] = False
    view = {
        "v": 1,
        "conversation_id": d["conversation_id"],
        "turn_id": d["turn_id"],
        "messages": None if msgs is None else [message(m) for m in msgs],
        "prompt_tokens": None if toks is None else list(toks),
        "params": params,
        "stream": opt(d.get("stream"), False),
        "namespace": opt(d.get("namespace"), "default"),
        "deadline_ms": opt(d.get("deadline_ms"), 0),
        "created_ms": opt(d.get("created_ms"), 0),
        "model": d.get("model"),
    }
    if d.get("prompt") is not None:  # 1.2
        view["prompt"] = d["prompt"]
    if opt(d.get("service_class"), "interactive") != "interactive":  # 1.3
        view["service_class"] = d["service_class"]
    return view


def logprob_view(e, with_top=True):
    """A logprob entry (1.2): bytes when present, top when not empty."""
    out = {"id": e["id"], "token": e["token"], "logprob": float(e["logprob"])}
    if e.get("bytes") is not None:
        out["bytes"] = list(e["bytes"])
    if with_top and e.get("top"):
        out["top"] = [logprob_view(t, False) for t in e["top"]]
    return out


def reply_extras(d, out):
    """The 1.2 parts of a chunk, result or choice, shown when not empty."""
    if d.get("logprobs"):
        out["logprobs"] = [logprob_view(e) for e in d["logprobs"]]
    if d.get("tool_calls"):
        out["tool_calls"] = [{"id": t["id"], "name": t["name"],
                              "arguments": t["arguments"]}
                             for t in d["tool_calls"]]
    return out


def chunk_view(d, limits=None):
    out = {
        "v": 1, "conversation_id": d["conversation_id"],
        "turn_id": d["turn_id"], "attempt": d["attempt"], "seq": d["seq"],
        "text": d["text"], "tokens": list(d["tokens"]),
        "last": bool(d.get("last") or False),
    }
    if d.get("index"):
        out["index"] = d["index"]
    if d.get("logprobs"):
        out["logprobs"] = [logprob_view(e) for e in d["logprobs"]]
    return out


def result_view(d, limits=None):
    e = d.get("error")
    out = {
        "v": 1, "conversation_id": d["conversation_id"],
        "turn_id": d["turn_id"], "attempt": d["attempt"], "text": d["text"],
        "tokens": list(d["tokens"]), "finish_reason": d["finish_reason"],
        "usage": {k: d["usage"][k] for k in
                  ("prompt_tokens", "cached_tokens", "completion_tokens")},
        "timing": {k: d["timing"][k] for k in
                   ("queue_ms", "ttft_ms", "total_ms")},
        "worker": d["worker"], "model": d.get("model"),
        "error": None if e is None else
        {"code": e["code"], "message": e["message"]},
    }
    reply_extras(d, out)
    if d.get("choices"):
        out["choices"] = [reply_extras(c, {
            "index": c["index"], "text": c["text"], "tokens": list(c["tokens"]),
            "finish_reason": c["finish_reason"]}) for c in d["choices"]]
    return out


def dead_view(d, limits=None):
    value = d.get("value")
    size = d.get("value_size")
    return {
        "v": 1, "reason": d["reason"], "error_code": d["error_code"],
        "topic": d["topic"], "partition": d["partition"],
        "offset": d["offset"],
        "timestamp_ms": -1 if d.get("timestamp_ms") is None
        else d["timestamp_ms"],
        "key": _hex(d.get("key")), "value": _hex(value),
        "value_size": size if size is not None
        else (len(value) if value is not None else 0),
        "headers": [[_hex(n), _hex(v)] for n, v in (d.get("headers") or [])],
        "conversation_id": d.get("conversation_id"),
        "turn_id": d.get("turn_id"), "worker": d.get("worker"),
        "dead_ms": d.get("dead_ms") or 0,
    }


def cancel_view(d, limits=None):
    """CancelTurn (1.4)."""
    return {"v": 1, "conversation_id": d["conversation_id"],
            "turn_id": d["turn_id"],
            "cancelled_ms": d.get("cancelled_ms") or 0,
            "reason": d.get("reason")}


VIEWS = {"turn": turn_view, "chunk": chunk_view, "result": result_view,
         "dead": dead_view, "cancel": cancel_view}
