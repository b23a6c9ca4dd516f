#!/usr/bin/env python3
"""gen_json_vectors.py -- writes the JSON ChatTurn vectors (schemas/testdata/json/).

Each NAME.json is the raw value of a Kafka record with content-type
application/json.  MANIFEST lists one vector per line: `NAME CODE [TWIN]`,
CODE being OK or the expected error code name, TWIN (valid vectors) the
msgpack vector in schemas/testdata whose decode must be identical: the
JSON twins are the msgpack vectors' records unpacked with PyPI msgpack and
written with json.dumps, so they carry the same fields, ints as ints and
floats as reals.  tests/schemas/test_sch_json.c checks every line; the
fuzz_sch_turn_json target is seeded with this directory.

Usage: gen_json_vectors.py [OUTDIR]   (default: schemas/testdata/json)
"""
import json
import os
import sys

import msgpack

HERE = os.path.dirname(os.path.abspath(__file__))
TESTDATA = os.path.join(HERE, "..", "..", "schemas", "testdata")

# msgpack vectors with a JSON twin (no bin values, no non-finite floats)
TWINS = ["turn_ok_minimal", "turn_ok_full", "turn_ok_unicode",
         "turn_ok_prompt_tokens", "turn_ok_large",
         # spec 1.2
         "turn_ok_structured", "turn_ok_tools", "turn_ok_prompt"]

BASE = '"v": 1, "conversation_id": "c1", "turn_id": "t1"'
MSG = '"messages": [{"role": "user", "content": "hi"}]'

# name -> (raw bytes, expected code)
ERRORS = {
    "json_err_syntax": ("{" + BASE + ", " + MSG + ",}", "E_BAD_JSON"),
    "json_err_bare_word": ("{" + BASE + ", \"stream\": yes, " + MSG + "}",
                           "E_BAD_JSON"),
    "json_err_truncated": ("{" + BASE + ", " + MSG, "E_TRUNCATED"),
    "json_err_empty": ("", "E_TRUNCATED"),
    "json_err_trailing": ("{" + BASE + ", " + MSG + "} {}", "E_TRAILING_BYTES"),
    "json_err_array": ("[{" + BASE + ", " + MSG + "}]", "E_NOT_MAP"),
    "json_err_string": ('"hello"', "E_NOT_MAP"),
    "json_err_duplicate_key": ("{" + BASE + ", \"turn_id\": \"t2\", " + MSG + "}",
                               "E_DUPLICATE_KEY"),
    "json_err_duplicate_key_params": (
        "{" + BASE + ", " + MSG + ", \"params\": {\"top_k\": 1, \"top_k\": 2}}",
        "E_DUPLICATE_KEY"),
    "json_err_max_tokens_float": (
        "{" + BASE + ", " + MSG + ", \"params\": {\"max_tokens\": 16.0}}",
        "E_WRONG_TYPE"),
    "json_err_max_tokens_str": (
        "{" + BASE + ", " + MSG + ", \"params\": {\"max_tokens\": \"16\"}}",
        "E_WRONG_TYPE"),
    "json_err_seed_2_64": (
        "{" + BASE + ", " + MSG + ", \"params\": {\"seed\": 18446744073709551615}}",
        "E_OUT_OF_RANGE"),
    "json_err_conversation_id_int": (
        '{"v": 1, "conversation_id": 7, "turn_id": "t1", ' + MSG + "}",
        "E_WRONG_TYPE"),
    "json_err_missing_turn_id": ('{"v": 1, "conversation_id": "c1", ' + MSG + "}",
                                 "E_MISSING_FIELD"),
    "json_err_version_2": ('{"v": 2, "conversation_id": "c1", "turn_id": "t1", '
                           + MSG + "}", "E_UNSUPPORTED_VERSION"),
    "json_err_role_bot": ("{" + BASE + ', "messages": [{"role": "bot", '
                          '"content": "hi"}]}', "E_BAD_ROLE"),
    "json_err_lone_surrogate": ("{" + BASE + ', "messages": [{"role": "user", '
                                '"content": "\\ud800"}]}', "E_BAD_JSON"),
    "json_err_utf8": (("{" + BASE + ', "messages": [{"role": "user", '
                       '"content": "\xff"}]}'), "E_BAD_UTF8"),
    "json_err_deep": ("{" + BASE + ", " + MSG + ', "x": ' + "[" * 40 + "]" * 40
                      + "}", "E_TOO_DEEP"),
    "json_err_empty_key": ("{" + BASE + ", " + MSG + ', "": 1}', "E_BAD_KEY"),
    "json_err_both_inputs": ("{" + BASE + ", " + MSG + ', "prompt_tokens": [1]}',
                             "E_BOTH_INPUTS"),
    # spec 1.2: the schema is JSON text, not an embedded object
    "json_err_schema_object": ("{" + BASE + ", " + MSG + ', "params": {"response_format": '
                               '{"type": "json_schema", "schema": {"type": "object"}}}}',
                               "E_WRONG_TYPE"),
    "json_err_n_float": ("{" + BASE + ", " + MSG + ', "params": {"n": 2.0}}',
                         "E_WRONG_TYPE"),
}

# valid JSON-only vectors: name -> raw
OKS = {
    "json_ok_nul_and_escapes": "{" + BASE + ', "messages": [{"role": "user", '
        '"content": "a\\u0000b \\"q\\" \\u00e9 \\ud83d\\ude00\\n"}], '
        '"params": {"temperature": 0, "top_p": 1, "stop": "\\nUser:"}, '
        '"stream": false, "namespace": null}',
    "json_ok_whitespace": "\n\t{ " + BASE.replace(", ", " ,\r\n ") + " , "
        + MSG + " }\n",
}


def main(out):
    os.makedirs(out, exist_ok=True)
    lines = []
    for name in TWINS:
        with open(os.path.join(TESTDATA, name + ".msgpack"), "rb") as f:
            rec = msgpack.unpackb(f.read(), raw=False)
        jname = "json_" + name
        with open(os.path.join(out, jname + ".json"), "w", encoding="utf-8") as f:
            json.dump(rec, f, ensure_ascii=False, allow_nan=False)
        lines.append(f"{jname} OK {name}")
    for name, raw in OKS.items():
        with open(os.path.join(out, name + ".json"), "wb") as f:
            f.write(raw.encode("utf-8"))
        lines.append(f"{name} OK")
    for name, (raw, code) in ERRORS.items():
        data = raw.encode("latin-1") if name == "json_err_utf8" else raw.encode()
        with open(os.path.join(out, name + ".json"), "wb") as f:
            f.write(data)
        lines.append(f"{name} {code}")
    with open(os.path.join(out, "MANIFEST"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"{len(lines)} JSON vectors written to {os.path.normpath(out)}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(TESTDATA, "json"))
