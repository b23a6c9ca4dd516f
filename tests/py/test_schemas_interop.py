"""Wire-format interop: parley's C codec against the PyPI msgpack package.

Both directions, plus the golden vectors:
  * every schemas/testdata vector through the C decoder (sch_tool) with the
    expected view or error code, and every valid vector through PyPI msgpack
    and the Python reading of the spec (sch_views.py) with the same
    view; the committed vectors must be what gen_vectors.py generates;
  * Python-encoded random turns (and chunks, results, dead letters) decoded
    by C and compared field by field with the Python view;
  * C-encoded records (built in C by `sch_tool sample`, and re-encoded by C
    from Python input by `sch_tool reencode`) decoded by PyPI msgpack and
    compared field by field; C's bytes must also equal what msgpack itself
    packs from the decoded data (same canonical, minimal encoding);
  * the error-code table and default limits agree between C, the Python
    generator and schemas/README.md.
Needs $PARLEY_BUILD/tests/schemas/sch_tool (PARLEY_BUILD defaults to
/work/main/build).
"""
import json
import os
import pathlib
import random
import struct
import subprocess
import sys

import msgpack
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "schemas"))
import gen_vectors as gv  # noqa: E402
import sch_views as sv  # noqa: E402

BUILD = pathlib.Path(os.environ.get("PARLEY_BUILD", "/work/main/build"))
TOOL = BUILD / "tests" / "schemas" / "sch_tool"
TESTDATA = ROOT / "schemas" / "testdata"
KINDS = ("turn", "chunk", "result", "dead", "cancel")


@pytest.fixture(scope="module")
def tool():
    if not TOOL.exists():
        pytest.fail(f"{TOOL} not built (build target sch_tool)")
    return str(TOOL)


def c_decode(tool, kind, data, limits=None):
    args = [tool, "decode", kind]
    for k, v in (limits or {}).items():
        args += ["--limit", f"{k}={v}"]
    args.append("-")
    out = subprocess.run(args, input=data, capture_output=True, check=True)
    return json.loads(out.stdout)


def c_reencode(tool, kind, data):
    out = subprocess.run([tool, "reencode", kind, "-"], input=data,
                         capture_output=True)
    assert out.returncode == 0, out.stderr.decode()
    return out.stdout


def vector_docs():
    return sorted(TESTDATA.glob("*.json"))


# ------------------------------------------------------- golden vectors

def test_vectors_exist_for_every_kind():
    names = [p.stem for p in vector_docs()]
    for kind in KINDS:
        for want in ("_ok_minimal", "_ok_full", "_ok_unicode", "_ok_large"):
            assert f"{kind}{want}" in names
        assert any(n.startswith(f"{kind}_err_") for n in names)
    codes = {json.loads(p.read_text(encoding="utf-8")).get("code") for p in vector_docs()}
    for c in ("E_TRUNCATED", "E_TRAILING_BYTES", "E_DUPLICATE_KEY",
              "E_NOT_MAP", "E_TOO_DEEP", "E_BAD_UTF8", "E_WRONG_TYPE",
              "E_TOO_MANY_MESSAGES", "E_CONTENT_TOO_LONG",
              "E_RECORD_TOO_LARGE", "E_TOO_MANY_STOP_STRINGS",
              "E_STOP_STRING_TOO_LONG", "E_MAX_TOKENS_TOO_LARGE"):
        assert c in codes


def test_vectors_reproducible(tmp_path):
    names = gv.write(str(tmp_path))
    assert len(names) == len(vector_docs())
    for name in names:
        for ext in (".msgpack", ".json"):
            assert (tmp_path / (name + ext)).read_bytes() == \
                (TESTDATA / (name + ext)).read_bytes(), name + ext


@pytest.mark.parametrize("doc", vector_docs(), ids=lambda p: p.stem)
def test_vector_through_c(tool, doc):
    spec = json.loads(doc.read_text(encoding="utf-8"))
    data = doc.with_suffix(".msgpack").read_bytes()
    out = c_decode(tool, spec["kind"], data, spec.get("limits"))
    if spec["expect"] == "ok":
        assert out["ok"], out
        assert out["value"] == spec["value"]
    else:
        assert not out["ok"], f"decoded, expected {spec['code']}"
        assert out["code"] == spec["code"], out["message"]
        assert out["message"].isascii() and out["message"]


@pytest.mark.parametrize("doc", [d for d in vector_docs()
                                 if "_ok_" in d.stem], ids=lambda p: p.stem)
def test_valid_vector_through_python(doc):
    spec = json.loads(doc.read_text(encoding="utf-8"))
    rec = msgpack.unpackb(doc.with_suffix(".msgpack").read_bytes(),
                          raw=False, strict_map_key=False)
    view = sv.VIEWS[spec["kind"]](rec, spec.get("limits"))
    assert view == spec["value"]


# ------------------------------------------------ Python -> C decoding

PIECES = ["a", "Z", " ", "0", "\"", "\\", "é", "\u07ff", "€", "\uffff",
          "\ue000", "😀", "\U0010ffff", "\n", "\t", "\x00", "中"]


def rtext(rng, n, ident=False):
    pool = [p for p in PIECES if not (ident and p in "\n\t\x00")]
    return "".join(rng.choice(pool) for _ in range(rng.randint(
        1 if ident else 0, n)))


def rint(rng, bits=64):
    return rng.getrandbits(rng.randint(1, bits))


def shuffled(rng, d):
    items = list(d.items())
    rng.shuffle(items)
    return dict(items)


def random_turn(rng):
    d = {"v": 1, "conversation_id": rtext(rng, 12, True),
         "turn_id": rtext(rng, 12, True)}
    r = rng.random()
    if r < 0.65:
        def msg():
            m = {"role": rng.choice(["system", "user", "assistant", "tool"]),
                 "content": rtext(rng, 40)}
            if rng.random() < 0.2:
                m["tool_calls"] = rtext(rng, 30)
            if rng.random() < 0.2:
                m["tool_call_id"] = rtext(rng, 8, True)
            return shuffled(rng, m)
        d["messages"] = [msg() for _ in range(rng.randint(1, 20))]
    elif r < 0.75:
        d["prompt"] = rtext(rng, 40) or "x"
    else:
        d["prompt_tokens"] = [rng.choice([rng.randint(0, 1000),
                                          rint(rng, 31)])
                              for _ in range(rng.randint(1, 40))]
    p = {}
    if rng.random() < 0.5:
        p["max_tokens"] = rng.randint(1, 32768)
    if rng.random() < 0.5:
        p["temperature"] = rng.choice([0, 1, rng.uniform(0, 2)])
    if rng.random() < 0.5:
        p["top_p"] = rng.choice([1, rng.uniform(0.01, 1)])
    if rng.random() < 0.5:
        p["top_k"] = rng.randint(0, 2**31 - 1)
    if rng.random() < 0.5:
        p["seed"] = rint(rng)
    if rng.random() < 0.5:
        stops = [rtext(rng, 5, True) for _ in range(rng.randint(0, 4))]
        p["stop"] = stops[0] if len(stops) == 1 and rng.random() < .5 \
            else stops
    if rng.random() < 0.5:
        p["repetition_penalty"] = rng.uniform(0.1, 3)
    # spec 1.2
    if rng.random() < 0.3:
        t = rng.choice(["text", "json_object", "json_schema", "regex", "grammar"])
        p["response_format"] = {"type": t}
        if t in sv.RF_KEYS:
            p["response_format"][sv.RF_KEYS[t]] = rtext(rng, 30) or "x"
    if rng.random() < 0.3:
        p["logprobs"] = rng.randint(0, 20)
    if rng.random() < 0.3:
        p["n"] = rng.randint(1, 16)
    for k in ("tools", "tool_choice"):
        if rng.random() < 0.2:
            p[k] = rtext(rng, 30) or "x"
    if rng.random() < 0.2:
        p["parallel_tool_calls"] = rng.random() < 0.5
    if p or rng.random() < 0.3:
        d["params"] = shuffled(rng, p)
    for key, gen in (("stream", lambda: rng.random() < .5),
                     ("namespace", lambda: "".join(rng.choice(
                         "abcXYZ019._-") for _ in range(rng.randint(1, 9)))),
                     ("deadline_ms", lambda: rint(rng)),
                     ("created_ms", lambda: rint(rng)),
                     ("model", lambda: rtext(rng, 8, True)),
                     ("service_class", lambda: rng.choice(["interactive", "bulk"])),  # 1.3
                     ("x_extension", lambda: {"any": [1, "thing", None]})):
        r = rng.random()
        if r < 0.4:
            d[key] = gen()
        elif r < 0.5 and key != "x_extension":
            d[key] = None  # nil means absent
    return shuffled(rng, d)


def f32(x):
    return struct.unpack(">f", struct.pack(">f", x))[0]


def test_python_turns_decode_in_c(tool):
    rng = random.Random(7)
    for i in range(150):
        d = random_turn(rng)
        single = i % 3 == 0
        data = msgpack.packb(d, use_single_float=single)
        out = c_decode(tool, "turn", data)
        assert out["ok"], (d, out)
        want = sv.turn_view(d)
        if single:
            for k in ("temperature", "top_p", "repetition_penalty"):
                if (d.get("params") or {}).get(k) is not None:
                    want["params"][k] = f32(d["params"][k])
        assert out["value"] == want, d


def random_logprobs(rng, tokens, max_top):
    def entry(tok, top):
        e = {"id": tok, "token": rtext(rng, 4),
             "logprob": rng.choice([0.0, -rng.random() * 30, -9999.0])}
        if rng.random() < 0.25:
            e["bytes"] = list(rng.randbytes(rng.randint(0, 4)))
        if top:
            e["top"] = [entry(rint(rng, 31), 0) for _ in range(top)]
        return shuffled(rng, e)
    k = rng.randint(0, max_top)
    return [entry(t, k) for t in tokens]


def random_tool_calls(rng):
    return [{"id": rtext(rng, 8, True), "name": rtext(rng, 8, True),
             "arguments": rtext(rng, 30)} for _ in range(rng.randint(1, 3))]


def random_chunk(rng):
    d = {"v": 1, "conversation_id": rtext(rng, 10, True),
         "turn_id": rtext(rng, 10, True), "attempt": rint(rng),
         "seq": rint(rng), "text": rtext(rng, 20),
         "tokens": [rint(rng, 31) for _ in range(rng.randint(0, 8))],
         "last": rng.random() < .5}
    if rng.random() < .3:
        d["index"] = rng.randint(0, 15)
    if rng.random() < .3:
        d["logprobs"] = random_logprobs(rng, d["tokens"], 20)
    return d


def random_result(rng):
    prompt = rint(rng)
    d = {"v": 1, "conversation_id": rtext(rng, 10, True),
         "turn_id": rtext(rng, 10, True), "attempt": rint(rng),
         "text": rtext(rng, 80),
         "tokens": [rint(rng, 31) for _ in range(rng.randint(0, 30))],
         "finish_reason": rng.choice(["stop", "length", "expired", "error",
                                         "cancelled"]),
         "usage": {"prompt_tokens": prompt,
                   "cached_tokens": rng.randint(0, prompt),
                   "completion_tokens": rint(rng)},
         "timing": {"queue_ms": rint(rng), "ttft_ms": rint(rng),
                    "total_ms": rint(rng)},
         "worker": rtext(rng, 10, True)}
    if rng.random() < .5:
        d["model"] = rtext(rng, 8, True)
    if d["finish_reason"] == "error" or rng.random() < .3:
        d["error"] = {"code": rng.choice(["E_INTERNAL", "E_EXPIRED",
                                          "E_NEWER_CODE_9"]),
                      "message": rtext(rng, 30)}
    if rng.random() < .3:
        d["logprobs"] = random_logprobs(rng, d["tokens"], 4)
    if rng.random() < .3:
        d["tool_calls"] = random_tool_calls(rng)
    if rng.random() < .3:
        d["choices"] = []
        for i in range(rng.randint(1, 4)):
            c = {"index": i + 1, "text": rtext(rng, 20),
                 "tokens": [rint(rng, 31) for _ in range(rng.randint(0, 6))],
                 "finish_reason": rng.choice(["stop", "length"])}
            if rng.random() < .5:
                c["logprobs"] = random_logprobs(rng, c["tokens"], 2)
            if rng.random() < .3:
                c["tool_calls"] = random_tool_calls(rng)
            d["choices"].append(shuffled(rng, c))
    return shuffled(rng, d)


def random_dead(rng):
    d = {"v": 1, "reason": rtext(rng, 40),
         "error_code": rng.choice(["E_BAD_UTF8", "E_TRUNCATED", "E_X_Y"]),
         "topic": "parley.turns", "partition": rng.randint(0, 2**31 - 1),
         "offset": rint(rng, 63)}
    if rng.random() < .5:
        d["timestamp_ms"] = rint(rng, 62)
    if rng.random() < .7:
        d["key"] = rng.randbytes(rng.randint(0, 20))
    if rng.random() < .7:
        d["value"] = rng.randbytes(rng.randint(0, 60))
        if rng.random() < .5:
            d["value_size"] = len(d["value"]) + rng.randint(0, 100)
    d["headers"] = [[rng.choice(["traceparent", rtext(rng, 6, True),
                                 rng.randbytes(4)]),
                     rng.choice([None, rng.randbytes(rng.randint(0, 9))])]
                    for _ in range(rng.randint(0, 4))]
    for key in ("conversation_id", "turn_id", "worker"):
        if rng.random() < .5:
            d[key] = rtext(rng, 10, True)
    if rng.random() < .5:
        d["dead_ms"] = rint(rng)
    return shuffled(rng, d)


def random_cancel(rng):
    d = {"v": 1, "conversation_id": rtext(rng, 10, True),
         "turn_id": rtext(rng, 10, True)}
    if rng.random() < .5:
        d["cancelled_ms"] = rint(rng)
    if rng.random() < .5:
        d["reason"] = rtext(rng, 30)
    return shuffled(rng, d)


RANDOM = {"turn": random_turn, "chunk": random_chunk,
          "result": random_result, "dead": random_dead,
          "cancel": random_cancel}


@pytest.mark.parametrize("kind", ["chunk", "result", "dead", "cancel"])
def test_python_records_decode_in_c(tool, kind):
    rng = random.Random(11)
    for _ in range(60):
        d = RANDOM[kind](rng)
        out = c_decode(tool, kind, msgpack.packb(d))
        assert out["ok"], (d, out)
        assert out["value"] == sv.VIEWS[kind](d), d


# ------------------------------------------------ C -> Python decoding

def check_canonical(data):
    """C's bytes equal what PyPI msgpack packs from the same data."""
    rec = msgpack.unpackb(data, raw=False)
    assert msgpack.packb(rec) == data
    return rec


@pytest.mark.parametrize("kind", KINDS)
def test_c_samples_decode_in_python(tool, kind):
    for seed in range(80):
        out = subprocess.run([tool, "sample", kind, str(seed)],
                             capture_output=True, check=True)
        doc = json.loads(out.stdout)
        rec = check_canonical(bytes.fromhex(doc["hex"]))
        assert rec["v"] == 1
        assert sv.VIEWS[kind](rec) == doc["value"], (kind, seed)


@pytest.mark.parametrize("kind", KINDS)
def test_c_reencode_decodes_in_python(tool, kind):
    rng = random.Random(5)
    for _ in range(60):
        d = RANDOM[kind](rng)
        data = c_reencode(tool, kind, msgpack.packb(d))
        rec = check_canonical(data)
        assert sv.VIEWS[kind](rec) == sv.VIEWS[kind](d), d
        if kind == "turn":
            # the encoder writes every param explicitly
            assert set(rec["params"]) >= {"max_tokens", "temperature",
                                          "top_p", "top_k",
                                          "repetition_penalty"}
            assert "x_extension" not in rec  # unknown fields are dropped


def test_c_rejects_what_it_must_not_encode(tool):
    # a decode failure makes reencode exit 2 with the error as JSON
    out = subprocess.run([tool, "reencode", "turn", "-"],
                         input=msgpack.packb({"v": 1}), capture_output=True)
    assert out.returncode == 2 and out.stdout == b""
    assert json.loads(out.stderr)["code"] == "E_MISSING_FIELD"


# ------------------------------------------------- tables and the spec

def test_default_limits_match(tool):
    out = subprocess.run([tool, "limits"], capture_output=True, check=True)
    assert json.loads(out.stdout) == sv.DEFAULT_LIMITS


def test_error_codes_documented(tool):
    out = subprocess.run([tool, "codes"], capture_output=True, check=True)
    codes = json.loads(out.stdout)
    readme = (ROOT / "schemas" / "README.md").read_text(encoding="utf-8")
    assert len(codes) >= 40
    for c in codes:
        assert f"`{c['name']}`" in readme, c["name"]
        assert f"| {c['code']} |" in readme, c["name"]
