"""ChatTurns written as JSON, produced with `kcat`, served by a real worker.

A record whose Kafka header `content-type` is `application/json` is a
ChatTurn in JSON (schemas/README.md section 4a): the worker converts it to
msgpack and runs the one ChatTurn decoder, so every rule and error code is
shared.  This test uses the real `kcat` binary as the producer (the point of
the feature: no msgpack encoder needed), a real broker and `parley worker`
on the synthetic cai-tiny model, and reads the outputs with confluent_kafka:

  * JSON turns are answered: one committed TurnResult per turn
    (read_committed), msgpack by default, with the right turn_id and
    conversation_id;
  * a turn with `accept: application/json` gets its TurnResult and its
    TokenChunks as JSON (content-type application/json), chunks
    concatenating to the result text; so does the `expired` result of a
    turn already past its deadline;
  * malformed JSON, wrong types, a JSON array, a duplicate key and a
    non-UTF-8 charset go to the DLQ with their codes, as DeadLetters
    carrying the original bytes; the worker stays up and answers a JSON
    turn produced after them.

Skips only when kcat is not installed (deploy/setup.sh installs it).
"""

import json
import shutil
import subprocess
import time
from collections import defaultdict

import pytest

msgpack = pytest.importorskip("msgpack")
ck = pytest.importorskip("confluent_kafka")

from worker_kit import Env, collect, model, wait_assigned  # noqa: E402,F401

__all__ = ["model"]  # the module-scoped cai-tiny model fixture, shared

KCAT = shutil.which("kcat") or shutil.which("kafkacat")
pytestmark = pytest.mark.skipif(KCAT is None, reason="kcat is not installed")

JSON_CT = "application/json"


def kcat_produce(env, records, *headers):
    """Produce (key, value) pairs with kcat, one message per line
    (key and value split at a TAB), every message with the headers."""
    lines = []
    for key, value in records:
        assert "\t" not in key and "\n" not in value and "\t" not in value
        lines.append(f"{key}\t{value}")
    args = [KCAT, "-P", "-b", env.bootstrap, "-t", env.topics["turns"], "-K", "\t"]
    for h in headers:
        args += ["-H", h]
    subprocess.run(args, input=("\n".join(lines) + "\n").encode("utf-8"), check=True,
                   timeout=60, capture_output=True)


def json_turn(conv, tid, text, **extra):
    rec = {"v": 1, "conversation_id": conv, "turn_id": tid,
           "messages": [{"role": "system", "content": "Be brief."},
                        {"role": "user", "content": text}],
           "params": {"max_tokens": 4, "temperature": 0.0}}
    rec.update(extra)
    return json.dumps(rec, ensure_ascii=False)


def headers(m):
    return {k: (v.decode() if v is not None else None) for k, v in (m.headers() or [])}


def test_json_turns_with_kcat(kafka_bootstrap, parley_bin, model, tmp_path):
    env = Env(kafka_bootstrap, parley_bin, model, tmp_path, partitions=2)
    rc = env.consumer("responses", "read_committed")
    dc = env.consumer("dlq", "read_committed")
    tc = env.consumer("tokens", "read_uncommitted")
    try:
        wait_assigned(rc, dc, tc)
        w = env.start("w-json")

        # 1. plain JSON turns: answered in msgpack
        plain = [(f"jc-{i}", f"jc-{i}-t0") for i in range(3)]
        kcat_produce(env, [(c, json_turn(c, t, f"question {c}: ¿qué tal? 😀",
                                         stream=(i == 0)))
                           for i, (c, t) in enumerate(plain)],
                     f"content-type={JSON_CT}")
        # 2. a JSON turn asking for a JSON result (and JSON chunks)
        # (and one already past its deadline: its `expired` result is JSON too)
        kcat_produce(env, [("jj-0", json_turn("jj-0", "jj-0-t0", "stream me", stream=True)),
                           ("jx-0", json_turn("jx-0", "jx-0-t0", "too late", deadline_ms=1))],
                     f"content-type={JSON_CT}; charset=utf-8", f"accept={JSON_CT}")
        # 3. poison: every one must become a DeadLetter with its code
        poison = [
            ("bad-trunc", '{"v": 1, "conversation_id": "bad-trunc", "turn_id": "x"',
             "E_TRUNCATED"),
            ("bad-syntax", '{"v": 1, "conversation_id": "bad-syntax", turn_id: "x"}',
             "E_BAD_JSON"),
            ("bad-array", "[" + json_turn("bad-array", "bad-array-t0", "hi") + "]",
             "E_NOT_MAP"),
            ("bad-type", json_turn("bad-type", "bad-type-t0", "hi",
                                   params={"max_tokens": "4"}), "E_WRONG_TYPE"),
            ("bad-float", json_turn("bad-float", "bad-float-t0", "hi",
                                    params={"max_tokens": 4.0}), "E_WRONG_TYPE"),
            ("bad-dup", '{"v": 1, "conversation_id": "bad-dup", "turn_id": "a", '
                        '"turn_id": "b", "messages": [{"role": "user", "content": "hi"}]}',
             "E_DUPLICATE_KEY"),
            ("bad-role", json_turn("bad-role", "bad-role-t0", "hi",
                                   messages=[{"role": "bot", "content": "hi"}]),
             "E_BAD_ROLE"),
            ("bad-trailing", json_turn("bad-trailing", "bad-trailing-t0", "hi") + " {}",
             "E_TRAILING_BYTES"),
        ]
        kcat_produce(env, [(k, v) for k, v, _ in poison], f"content-type={JSON_CT}")
        kcat_produce(env, [("bad-charset", json_turn("bad-charset", "bad-charset-t0", "hi"))],
                     f"content-type={JSON_CT}; charset=latin-1")
        expected_dlq = {k: code for k, _, code in poison}
        expected_dlq["bad-charset"] = "E_UNSUPPORTED_CONTENT_TYPE"

        dead = collect(dc, len(expected_dlq), 120)
        got = {}
        by_key = {k: v for k, v, _ in poison}
        for m in dead:
            d = msgpack.unpackb(m.value(), raw=False)
            key = m.key().decode()
            got[key] = d["error_code"]
            assert d["key"] == m.key()
            assert headers(m)["content-type"].startswith("application/x-parley+msgpack")
            if key in by_key:
                assert d["value"] == by_key[key].encode("utf-8"), key
                assert d["reason"], key
        assert got == expected_dlq, (got, w.poll())
        assert w.poll() is None, env.log("w-json")

        # 4. after all that, the worker still serves a JSON turn
        kcat_produce(env, [("jc-late", json_turn("jc-late", "jc-late-t0", "still there?"))],
                     f"content-type={JSON_CT}")
        want = {t: c for c, t in plain}
        want["jj-0-t0"] = "jj-0"
        want["jx-0-t0"] = "jx-0"
        want["jc-late-t0"] = "jc-late"
        results = collect(rc, len(want), 180)
        # anything beyond one per turn would show up here
        results += collect(rc, 1, 3)
        by_turn = defaultdict(list)
        for m in results:
            ct = headers(m)["content-type"]
            if ct == JSON_CT:
                r = json.loads(m.value().decode("utf-8"))
            else:
                assert ct.startswith("application/x-parley+msgpack"), ct
                r = msgpack.unpackb(m.value(), raw=False)
            by_turn[r["turn_id"]].append((ct, r))
            assert m.key().decode() == r["conversation_id"]
        assert {t: len(v) for t, v in by_turn.items()} == {t: 1 for t in want}, env.log("w-json")
        for tid, [(ct, r)] in by_turn.items():
            assert r["conversation_id"] == want[tid]
            assert r["worker"] == "w-json"
            assert (ct == JSON_CT) == (tid in ("jj-0-t0", "jx-0-t0")), (tid, ct)
            if tid == "jx-0-t0":
                assert r["finish_reason"] == "expired" and r["error"]["code"] == "E_EXPIRED", r
                continue
            assert r["finish_reason"] in ("stop", "length"), r
            assert r["usage"]["completion_tokens"] == len(r["tokens"]) >= 1

        # the JSON result's attempt streamed JSON chunks that add up to its text
        _, jr = by_turn["jj-0-t0"][0]
        chunks, end = [], time.time() + 60
        while time.time() < end and not any(
                c.get("last") and c["attempt"] == jr["attempt"] for c in chunks
                if c.get("turn_id") == "jj-0-t0"):
            m = tc.poll(0.3)
            if m is None or m.error():
                continue
            if headers(m)["content-type"] == JSON_CT:
                chunks.append(json.loads(m.value().decode("utf-8")))
            else:
                msgpack.unpackb(m.value(), raw=False)  # the msgpack turn's chunks
        mine = sorted((c for c in chunks
                       if c["turn_id"] == "jj-0-t0" and c["attempt"] == jr["attempt"]),
                      key=lambda c: c["seq"])
        assert mine and mine[-1]["last"] is True
        assert [c["seq"] for c in mine] == list(range(len(mine)))
        assert "".join(c["text"] for c in mine) == jr["text"]
        assert [t for c in mine for t in c["tokens"]] == jr["tokens"]
        assert w.poll() is None
    finally:
        for c in (rc, dc, tc):
            c.close()
        env.stop_all()
