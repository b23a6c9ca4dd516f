"""A turn the worker refuses is answered on the responses topic too.

schemas/README.md section 7: when the refused record decoded as a ChatTurn
(its conversation_id and turn_id could be read), the worker publishes, in
the transaction that writes its DeadLetter, one TurnResult with
`finish_reason: error`, the DeadLetter's code and its reason as message
(JSON when the turn's `accept` header asks for it), so a client waiting on
the responses topic is told.  A record that did not decode, and one whose
key names another conversation (E_KEY_MISMATCH), get the DeadLetter only.
Against the real broker: one worker, a good turn beside the refused ones,
both topics read back read_committed to their ends.
"""

import json
from collections import defaultdict

import pytest

msgpack = pytest.importorskip("msgpack")
ck = pytest.importorskip("confluent_kafka")

from worker_kit import Env, collect, model, read_to_end, turn_record  # noqa: E402

__all__ = ["model"]  # the module-scoped cai-tiny model fixture, shared

JSON_CT = "application/json"


def unknown_model_turn(conv):
    return {"v": 1, "conversation_id": conv, "turn_id": f"{conv}-t0",
            "messages": [{"role": "user", "content": "hi"}], "model": "no-such-model"}


def test_refused_turn_gets_an_error_result(kafka_bootstrap, parley_bin, model, tmp_path):
    env = Env(kafka_bootstrap, parley_bin, model, tmp_path)
    try:
        env.start("w1")
        p = ck.Producer({"bootstrap.servers": env.bootstrap, "enable.idempotence": True})
        topic = env.topics["turns"]
        p.produce(topic, key="conv-0", value=turn_record(0, 0, 4))  # served
        p.produce(topic, key="bad-model", value=msgpack.packb(unknown_model_turn("bad-model")))
        p.produce(topic, key="bad-json", value=json.dumps(unknown_model_turn("bad-json")),
                  headers=[("content-type", JSON_CT), ("accept", JSON_CT)])
        # the ids of another conversation than the key's: DeadLetter only
        p.produce(topic, key="someone-else", value=msgpack.packb(unknown_model_turn("mine")))
        p.produce(topic, key="poison", value=b"\xc1")  # undecodable: DeadLetter only
        assert p.flush(30) == 0

        dc = env.consumer("dlq", "read_committed")
        dead = collect(dc, 4, 120) + read_to_end(dc)
        dc.close()
        rc = env.consumer("responses", "read_committed")
        results = collect(rc, 3, 120) + read_to_end(rc)  # anything more would show up
        rc.close()
        assert env.procs["w1"].poll() is None, env.log("w1")

        reasons = {}
        for m in dead:
            d = msgpack.unpackb(m.value(), raw=False)
            reasons[m.key().decode()] = (d["error_code"], d["reason"])
        assert {k: c for k, (c, _) in reasons.items()} == {
            "bad-model": "E_UNKNOWN_MODEL", "bad-json": "E_UNKNOWN_MODEL",
            "someone-else": "E_KEY_MISMATCH", "poison": "E_NOT_MAP"}, reasons

        by_turn = defaultdict(list)
        for m in results:
            ct = dict(m.headers() or []).get("content-type", b"").decode()
            r = json.loads(m.value()) if ct == JSON_CT else msgpack.unpackb(m.value(), raw=False)
            by_turn[r["turn_id"]].append((m.key().decode(), ct, r))
        assert {t: len(v) for t, v in by_turn.items()} == \
            {"conv-0-t0": 1, "bad-model-t0": 1, "bad-json-t0": 1}, dict(by_turn)
        assert by_turn["conv-0-t0"][0][2]["finish_reason"] in ("stop", "length")
        for conv in ("bad-model", "bad-json"):
            [(key, ct, r)] = by_turn[f"{conv}-t0"]
            assert key == conv and r["conversation_id"] == conv
            assert (ct == JSON_CT) == (conv == "bad-json"), ct
            assert r["finish_reason"] == "error" and r["text"] == "", r
            assert r["error"]["code"] == "E_UNKNOWN_MODEL"
            assert r["error"]["message"] == reasons[conv][1]
            assert r["worker"] == "w1" and not r.get("tokens")
    finally:
        env.stop_all()
    for wid, proc in env.procs.items():
        assert proc.returncode == 0, env.log(wid)[-2000:]
