"""End-to-end tests of `parley worker` against the real Kafka broker.

Each test creates its own topics (turns with several partitions, tokens,
responses, dlq) and consumer group, writes a synthetic cai-tiny model with
`parley mkmodel`, starts real `parley worker` processes, produces chat
conversations (msgpack ChatTurns per schemas/README.md) plus poison records,
and reads the outputs back:

  * responses with isolation.level=read_committed: exactly one TurnResult
    per turn, in per-conversation order;
  * tokens (read_uncommitted): the chunks of the attempt a TurnResult names
    concatenate, in seq order, to the result's text;
  * later turns of a conversation report cached prompt tokens;
  * every poison record lands in the DLQ with the expected error code, and
    a refused turn whose ids were read gets its one error TurnResult;
  * after kill -9 of a worker mid-run, every turn still has exactly one
    visible TurnResult (the dead worker's open transaction is aborted and
    its turns are redone by the survivor under new attempts).
"""

import re
import signal
import time
from collections import defaultdict
from pathlib import Path

import pytest

msgpack = pytest.importorskip("msgpack")
ck = pytest.importorskip("confluent_kafka")

from worker_kit import (  # noqa: E402  (helpers only: no test functions)
    Env, check_results, collect, drain, free_port, http_get, metric, model, owned, produce_turn,
    produce_workload, read_to_end, turn_record, uncached_later_turns, wait_assigned)

__all__ = ["model"]  # the module-scoped cai-tiny model fixture, shared


def test_worker_exactly_once_two_workers(kafka_bootstrap, parley_bin, model, tmp_path):
    """2 workers; w1 also serves /metrics and runs with a tiny in-flight
    budget, so it must pause its partitions (backpressure) to keep up."""
    env = Env(kafka_bootstrap, parley_bin, model, tmp_path)
    convs, turns = 50, 6  # the end-to-end size
    port = free_port()
    try:
        env.start("w1", "--worker.http", f"127.0.0.1:{port}", "--worker.max_inflight", "4")
        # Consumer-only and producer-only pass-through properties: each goes
        # to the clients it belongs to (no CONFWARN in the log).
        env.start("w2", "--kafka.fetch.wait.max.ms", "100", "--kafka.linger.ms", "2")
        expected_dlq = produce_workload(env, convs, turns, max_tokens=6)
        rc = env.consumer("responses", "read_committed")
        # + the expired turn's result, + the error results of the two
        # refused turns whose ids were read (the key mismatch gets none)
        results = collect(rc, convs * turns + 3, 150)
        results += read_to_end(rc)  # a duplicate would show up here
        rc.close()
        expired = [msgpack.unpackb(m.value(), raw=False) for m in results
                   if m.key() == b"conv-z"]
        assert len(expired) == 1 and expired[0]["finish_reason"] == "expired"
        assert expired[0]["error"]["code"] == "E_EXPIRED"
        refused = [msgpack.unpackb(m.value(), raw=False) for m in results
                   if m.key() in (b"conv-x", b"conv-y")]
        assert sorted(r["turn_id"] for r in refused) == ["conv-x-t0", "conv-y-t0"], refused
        assert all(r["finish_reason"] == "error" and r["error"]["code"] == "E_UNKNOWN_MODEL"
                   for r in refused), refused
        all_results = results
        results = [m for m in results if m.key() not in (b"conv-x", b"conv-y", b"conv-z")]
        tc = env.consumer("tokens", "read_uncommitted")
        chunks = drain(tc, 4)
        tc.close()
        dc = env.consumer("dlq", "read_committed")
        dead = collect(dc, len(expected_dlq), 30) + read_to_end(dc)
        dc.close()
        for wid in env.procs:
            assert env.procs[wid].poll() is None, env.log(wid)
        assert len(results) == convs * turns, (len(results), env.log("w1")[-3000:])
        cached_later, _ = check_results(env, results, chunks, convs, turns)
        missed = uncached_later_turns(results)
        print(f"\nresults={len(results)} chunks={len(chunks)} "
              f"later turns with cached tokens={cached_later}/{convs * (turns - 1)}, "
              f"misses on the worker that served the turn before: {len(missed)}")
        # every later turn that stayed on its worker reuses the conversation's
        # KV (a partition moving between the two workers is the only excuse)
        assert not missed, missed[:10]
        assert cached_later >= convs * (turns - 1) // 2
        codes = sorted(msgpack.unpackb(m.value(), raw=False)["error_code"] for m in dead)
        assert codes == expected_dlq
        for m in dead:
            d = msgpack.unpackb(m.value(), raw=False)
            assert d["topic"] == env.topics["turns"] and d["offset"] >= 0 and d["reason"]
        assert http_get(port, "/healthz")[0] == 200
        assert http_get(port, "/readyz")[0] == 200
        assert http_get(port, "/nope")[0] == 404
        status, text = http_get(port, "/metrics")
        assert status == 200
        w1_all = [msgpack.unpackb(m.value(), raw=False) for m in all_results]
        w1_all = [r for r in w1_all if r["worker"] == "w1"]
        w1_results = len(w1_all)
        # expired before start or refused: never ran (no TTFT, no overhead)
        w1_unrun = sum(r["finish_reason"] in ("expired", "error") for r in w1_all)
        w1_dlq = sum(msgpack.unpackb(m.value(), raw=False)["worker"] == "w1" for m in dead)
        assert metric(text, "parley_turns_total") == w1_results
        assert metric(text, "parley_dlq_total") == w1_dlq
        assert metric(text, "parley_inflight_turns") == 0
        assert metric(text, "parley_txn_commits_total") >= 1
        assert metric(text, "parley_ttft_seconds_count") >= w1_results - w1_unrun
        ovh = metric(text, "parley_turn_overhead_seconds_count")
        assert ovh == w1_results - w1_unrun, (ovh, w1_results, w1_unrun)
        assert metric(text, "parley_turn_overhead_seconds_sum") > 0
        # speculative decoding's counters are consistent (whether 50 busy
        # conversations drafted at all depends on the batch: drafting stops
        # beyond a few decoding sequences; test_speculative_through_the_worker
        # makes it draft)
        drafted = metric(text, "parley_sched_spec_drafted_tokens_total")
        accepted = metric(text, "parley_sched_spec_accepted_tokens_total")
        assert 0 <= accepted <= drafted
        assert metric(text, "parley_sched_spec_verify_steps_total") <= drafted
        ratio = metric(text, "parley_sched_spec_acceptance_ratio")
        assert (drafted == 0 and ratio == 0) or abs(ratio - accepted / drafted) < 1e-6
        lag = [l for l in text.splitlines() if l.startswith("parley_consumer_lag{")]
        assert lag and all(l.endswith(" 0") for l in lag), lag  # everything committed
        if w1_results > 4:
            assert metric(text, "parley_backpressure_pauses_total") >= 1
        print(f"w1 served {w1_results} turns, paused "
              f"{metric(text, 'parley_backpressure_pauses_total'):.0f} times")
    finally:
        env.stop_all()
    for wid, p in env.procs.items():
        assert p.returncode == 0, env.log(wid)[-2000:]
        log = env.log(wid)
        assert "event=stopped" in log
        assert re.search(r"event=stopped .*overhead_p50_ms=[0-9.]+", log), log[-2000:]
        assert "CONFWARN" not in log, [l for l in log.splitlines() if "CONFWARN" in l]


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_worker_kill9_redoes_turns_exactly_once(kafka_bootstrap, parley_bin, model, tmp_path, protocol):
    kill9_redoes_turns_exactly_once(Env(kafka_bootstrap, parley_bin, model, tmp_path,
                                        protocol=protocol))


def kill9_redoes_turns_exactly_once(env):
    """k2 is killed (-9) part-way through a second turn: k1 takes its
    conversations over and redoes that turn under a new attempt; exactly
    one committed result per turn.  k2 runs with
    PARLEY_TEST_ENGINE_HOLD=chunk:FILE, and FILE is made once every first
    turn is answered: k2's engine stops at its first chunk of a later turn,
    so that turn is still unfinished when the kill lands, however fast the
    machine generates (it was 320 tokens of head start before).  Also run
    against the oldest broker parley supports (test_kafka_versions.py)."""
    convs, turns = 12, 3
    hold = env.tmp / "k2-hold"
    try:
        env.start("k1")
        victim = env.start("k2", env={"PARLEY_TEST_ENGINE_HOLD": f"chunk:{hold}"})
        # both own partitions (all 4 split between them) before any turn
        # exists, so k2 serves whole conversations from their first turn
        end = time.time() + 60
        while time.time() < end and not (owned(env, "k1") > 0 and owned(env, "k2") > 0
                                          and owned(env, "k1") + owned(env, "k2") == 4):
            time.sleep(0.3)
        assert owned(env, "k1") > 0 and owned(env, "k2") > 0, env.log("k2")[-2000:]
        # Both readers own their partitions before any turn exists: a
        # reader's group join takes seconds, long enough for k2 to finish
        # every turn it has before the test could see it start one.
        rc = env.consumer("responses", "read_committed")
        tc = env.consumer("tokens", "read_uncommitted")
        wait_assigned(rc, tc)
        # First turns only: learn which conversations k2 serves.
        produce_workload(env, convs, 1, max_tokens=24, poison=False)
        chunks = []
        first = collect(rc, convs, 120)
        assert len(first) == convs, env.log("k2")[-2000:]
        k2_convs = {r["conversation_id"] for r in
                    (msgpack.unpackb(m.value(), raw=False) for m in first) if r["worker"] == "k2"}
        assert k2_convs, env.log("k2")[-2000:]
        # k2 is idle now; its engine stops at the first chunk it streams of
        # a second turn, and the test kills it when that chunk arrives.
        hold.touch()
        produce_workload(env, convs, turns, max_tokens=320, poison=False, first_turn=1)
        end, mid = time.time() + 120, False
        while time.time() < end and not mid:
            m = tc.poll(0.2)
            if m is None or m.error():
                continue
            chunks.append(m)
            ch = msgpack.unpackb(m.value(), raw=False)
            mid = ch["turn_id"].endswith("-t1") and ch["turn_id"].rsplit("-t", 1)[0] in k2_convs \
                and not ch.get("last")
        assert mid, env.log("k2")[-2000:]
        assert "event=test_engine_hold held=1" in env.log("k2"), env.log("k2")[-2000:]
        victim.send_signal(signal.SIGKILL)
        victim.wait()
        results = first + collect(rc, convs * turns - len(first), 150)
        results += read_to_end(rc)
        rc.close()
        chunks += drain(tc, 4)
        tc.close()
        assert env.procs["k1"].poll() is None, env.log("k1")
        assert len(results) == convs * turns, (len(results), env.log("k1")[-3000:])
        _, redone = check_results(env, results, chunks, convs, turns)
        served = defaultdict(list)
        for m in results:
            r = msgpack.unpackb(m.value(), raw=False)
            served[r["conversation_id"]].append(r["worker"])
        # conversations k2 served before it died and k1 served afterwards
        moved = [c for c, ws in served.items() if "k2" in ws and ws[-1] == "k1"]
        print(f"\nafter kill -9: results={len(results)}, conversations taken over by the "
              f"survivor={len(moved)}, turns streamed by more than one attempt={redone}")
        assert moved, served
        assert redone, "k2 died mid-turn: that turn must stream again under a new attempt"
    finally:
        env.stop_all()


def test_worker_sigterm_finishes_inflight_then_successor_completes(
        kafka_bootstrap, parley_bin, model, tmp_path):
    """SIGTERM mid-run: the worker stops fetching, finishes and commits its
    in-flight turns within the grace period and exits 0; a worker started
    afterwards answers the rest; still exactly one result per turn."""
    env = Env(kafka_bootstrap, parley_bin, model, tmp_path, partitions=2)
    convs, turns = 8, 3
    try:
        first_worker = env.start("s1", "--worker.grace_ms", "60000", "--worker.max_inflight", "4")
        produce_workload(env, convs, turns, max_tokens=16, poison=False)
        rc = env.consumer("responses", "read_committed")
        first = collect(rc, 2, 90)
        assert first, env.log("s1")[-2000:]
        first_worker.send_signal(signal.SIGTERM)
        assert first_worker.wait(60) == 0, env.log("s1")[-2000:]
        log = env.log("s1")
        assert "event=shutdown" in log and "event=stopped" in log
        assert "shutdown_cancel" not in log  # everything in flight finished in time
        env.start("s2")
        results = first + collect(rc, convs * turns - len(first), 150)
        results += read_to_end(rc)
        rc.close()
        tc = env.consumer("tokens", "read_uncommitted")
        chunks = drain(tc, 4)
        tc.close()
        assert len(results) == convs * turns, (len(results), env.log("s2")[-3000:])
        check_results(env, results, chunks, convs, turns)
        by_worker = defaultdict(int)
        for m in results:
            by_worker[msgpack.unpackb(m.value(), raw=False)["worker"]] += 1
        print(f"\nSIGTERM handoff: results by worker {dict(by_worker)}")
        assert by_worker["s1"] >= len(first) and by_worker["s2"] > 0
    finally:
        env.stop_all()


def test_worker_revocation_hands_kv_to_redis(kafka_bootstrap, redis_addr, parley_bin, model,
                                            tmp_path):
    """A second worker joins after turn 0: the first worker's revoked
    conversations are written to Redis, so the new owner's turn 1 of those
    conversations starts from cached KV it never computed."""
    env = Env(kafka_bootstrap, parley_bin, model, tmp_path)
    convs = 8
    redis = f"{redis_addr[0]}:{redis_addr[1]}"
    p2 = free_port()
    try:
        env.start("h1", "--redis.addr", redis)
        produce_turn(env, convs, 0, max_tokens=6)
        rc = env.consumer("responses", "read_committed")
        first = collect(rc, convs, 90)
        assert len(first) == convs, env.log("h1")[-2000:]
        env.start("h2", "--redis.addr", redis, "--worker.http", f"127.0.0.1:{p2}")
        end = time.time() + 60
        while time.time() < end and not ("kv_handoff" in env.log("h1")
                                          and "event=assigned partitions=2" in env.log("h2")):
            time.sleep(0.3)
        assert "kv_handoff" in env.log("h1"), env.log("h1")[-2000:]
        produce_turn(env, convs, 1, max_tokens=6)
        second = collect(rc, convs, 90) + read_to_end(rc)
        rc.close()
        assert len(second) == convs
        moved = [msgpack.unpackb(m.value(), raw=False) for m in second]
        moved = [r for r in moved if r["worker"] == "h2"]
        assert moved, "no conversation moved to h2"
        print(f"\nhandoff: {len(moved)} conversations moved; cached tokens on the new owner: "
              f"{[r['usage']['cached_tokens'] for r in moved]}")
        assert all(r["usage"]["cached_tokens"] > 0 for r in moved)
        status, text = http_get(p2, "/metrics")
        assert status == 200
        assert 'parley_cache_hits_total{tier="redis"}' in text
    finally:
        env.stop_all()


def listening_addrs(port):
    """Local addresses with a TCP socket listening on port (/proc/net/tcp{,6})."""
    out = set()
    for name, width in (("tcp", 8), ("tcp6", 32)):
        try:
            lines = Path(f"/proc/net/{name}").read_text().splitlines()[1:]
        except OSError:
            continue
        for ln in lines:
            f = ln.split()
            addr, p = f[1].split(":")
            if int(p, 16) == port and f[3] == "0A":  # LISTEN
                out.add(addr)
    return out


@pytest.mark.parametrize("spec,want", [(":{p}", {"0100007F"}), ("{p}", {"0100007F"}),
                                       ("0.0.0.0:{p}", {"00000000"})])
def test_http_endpoint_binds_loopback_unless_exposed(kafka_bootstrap, parley_bin, model,
                                                     tmp_path, spec, want):
    """worker.http without a host (":PORT" or "PORT") listens on 127.0.0.1
    only; the operator exposes it by naming an address (0.0.0.0:PORT)."""
    env = Env(kafka_bootstrap, parley_bin, model, tmp_path)
    port = free_port()
    try:
        env.start("hl", "--worker.http", spec.format(p=port))
        end = time.time() + 30
        while time.time() < end and not listening_addrs(port):
            time.sleep(0.1)
        assert listening_addrs(port) == want, env.log("hl")[-2000:]
        assert http_get(port, "/healthz")[0] == 200
    finally:
        env.stop_all()


def test_namespace_from_header_isolates_tenants(kafka_bootstrap, parley_bin, model, tmp_path):
    """worker.namespace_from=header: the cache namespace is the
    parley-namespace header a trusted gateway sets, and a record's own
    `namespace` field is ignored, so a producer cannot read another
    tenant's cached KV by writing its name.  All turns share the system
    prompt, so a turn in the same namespace as an earlier one reuses its
    KV (cached_tokens > 0) and a turn in another one cannot (0).  A record
    without the header goes to the DLQ, and gets an error result."""
    env = Env(kafka_bootstrap, parley_bin, model, tmp_path)
    p = ck.Producer({"bootstrap.servers": env.bootstrap})
    rc = env.consumer("responses", "read_committed")

    def ask(conv, header, field):
        rec = msgpack.unpackb(turn_record(conv, 0, 2), raw=False)
        rec["namespace"] = field
        hdrs = [("parley-namespace", header)] if header else []
        p.produce(env.topics["turns"], key=f"conv-{conv}", value=msgpack.packb(rec),
                  headers=hdrs)
        p.flush(10)
        if header is None:
            return None
        (m,) = collect(rc, 1, 60)
        r = msgpack.unpackb(m.value(), raw=False)
        assert r["turn_id"] == f"conv-{conv}-t0"
        return r["usage"]["cached_tokens"]

    try:
        env.start("ns", "--worker.namespace_from", "header")
        first = ask(0, "tenant-a", "tenant-a")
        claim = ask(1, "tenant-b", "tenant-a")   # claims tenant-a in the record
        same = ask(2, "tenant-a", "tenant-b")    # really tenant-a
        ask(3, None, "tenant-a")                 # no header: DLQ
        dc = env.consumer("dlq", "read_committed")
        (d,) = collect(dc, 1, 60)
        dc.close()
        dead = msgpack.unpackb(d.value(), raw=False)
        print(f"\ncached tokens: first={first} other tenant claiming it={claim} same tenant={same}; "
              f"no header: {dead['error_code']}")
        assert first == 0 and claim == 0 and same > 0
        assert dead["error_code"] == "E_MISSING_FIELD" and "parley-namespace" in dead["reason"]
        (m,) = collect(rc, 1, 60)  # and its error result, for a client waiting on it
        r = msgpack.unpackb(m.value(), raw=False)
        assert r["turn_id"] == "conv-3-t0" and r["error"]["code"] == "E_MISSING_FIELD", r
    finally:
        rc.close()
        env.stop_all()


def test_stop_string_ends_the_reply_before_it(kafka_bootstrap, parley_bin, gemma_model, tmp_path):
    """params.stop on the real model, greedy: a first turn without stop
    strings runs to max_tokens or to the transcript format's own end of turn
    (the worker stops every turn at "\nUser:", which the reply then does
    not contain); a second, identical turn stops at a piece of that reply.  Its text ends where the stop string begins (the stop string
    is not in it), and the streamed chunks -- which hold back text a stop
    string could still claim -- concatenate to exactly that text."""
    env = Env(kafka_bootstrap, parley_bin, gemma_model, tmp_path)
    p = ck.Producer({"bootstrap.servers": env.bootstrap})
    rc = env.consumer("responses", "read_committed")
    tc = env.consumer("tokens", "read_uncommitted")

    def ask(conv, stop):
        rec = {"v": 1, "conversation_id": f"stop-{conv}", "turn_id": f"stop-{conv}-t0",
               "messages": [{"role": "user", "content": "Tell me about the capital of France."}],
               "params": {"max_tokens": 24, "temperature": 0.0, **({"stop": stop} if stop else {})},
               "stream": True}
        p.produce(env.topics["turns"], key=rec["conversation_id"], value=msgpack.packb(rec))
        p.flush(10)
        (m,) = collect(rc, 1, 120)
        return msgpack.unpackb(m.value(), raw=False)

    try:
        env.start("stop", "--model.chat_template", "transcript", "--worker.chunk_tokens", "1")
        full = ask(0, None)
        txt = full["text"]
        assert full["finish_reason"] in ("length", "stop") and len(txt) > 20, full
        assert "\nUser:" not in txt
        k = txt.find(" ", 8)
        stop = txt[k:k + 5] if k > 0 else txt[8:13]
        cut = ask(1, [stop, "\u2603 never appears"])
        assert cut["finish_reason"] == "stop"
        assert cut["text"] == txt[:txt.index(stop)], (cut["text"], txt, stop)
        chunks = [msgpack.unpackb(m.value(), raw=False) for m in drain(tc, 3)]
        cs = sorted((c for c in chunks if c["turn_id"] == "stop-1-t0" and c["attempt"] == cut["attempt"]),
                    key=lambda c: c["seq"])
        assert cs and cs[-1]["last"] is True
        assert "".join(c["text"] for c in cs) == cut["text"]
        assert [t for c in cs for t in c["tokens"]] == cut["tokens"]
    finally:
        rc.close()
        tc.close()
        env.stop_all()


def test_history_splice_and_partial_blocks_reuse_every_computed_token(kafka_bootstrap, parley_bin,
                                                                      gemma_model, tmp_path):
    """Real model, transcript format, stop "\\nUser:": each next turn carries
    the reply text the worker returned.  The worker splices the previous
    turn's prompt and generated ids in (no re-tokenising), and the cache
    resumes down to the token (partial last blocks): every turn after the
    first is served at least the previous prompt and one reply id, and more
    than the whole blocks of what the previous turn computed.  An edited
    reply and another namespace are not spliced."""
    env = Env(kafka_bootstrap, parley_bin, gemma_model, tmp_path, partitions=1)
    p = ck.Producer({"bootstrap.servers": env.bootstrap})
    rc = env.consumer("responses", "read_committed")
    port = free_port()
    users = ["Tell me about the capital of France.",
             "What is the river that runs through it called?",
             "And how long is that river, roughly?",
             "Name one bridge over it, please."]

    def ask(conv, k, messages, ns=None):
        rec = {"v": 1, "conversation_id": conv, "turn_id": f"{conv}-t{k}", "messages": messages,
               "params": {"max_tokens": 24, "temperature": 0.0, "stop": ["\nUser:"]}}
        if ns:
            rec["namespace"] = ns
        p.produce(env.topics["turns"], key=conv, value=msgpack.packb(rec))
        p.flush(10)
        (m,) = collect(rc, 1, 120)
        return msgpack.unpackb(m.value(), raw=False)

    try:
        env.start("hist", "--model.chat_template", "transcript", "--worker.http",
                  f"127.0.0.1:{port}")
        msgs, prev = [], None
        for k, u in enumerate(users[:3]):
            msgs.append({"role": "user", "content": u})
            r = ask("hist-a", k, list(msgs))
            u_ = r["usage"]
            print(f"\nturn {k + 1}: prompt {u_['prompt_tokens']}, cached {u_['cached_tokens']}"
                  + (f", previous prompt + reply "
                     f"{prev['prompt_tokens'] + prev['completion_tokens']}"
                     if prev else ""))
            if prev:
                # everything the previous turn computed (prompt + reply but its
                # last sampled id) is served, less what the template changed
                # after the reply ("\nUser: " follows it in both forms)
                assert u_["cached_tokens"] >= prev["prompt_tokens"] + 1, (u_, prev)
                # down to the token: beyond the last whole 16-token block of
                # what the previous turn computed (unless that ends within a
                # token of a block boundary)
                computed = prev["prompt_tokens"] + prev["completion_tokens"] - 1
                if computed % 16 >= 2:
                    assert u_["cached_tokens"] > computed // 16 * 16, (u_, prev)
            prev = u_
            msgs.append({"role": "assistant", "content": r["text"]})
        _, text = http_get(port, "/metrics")
        assert metric(text, "parley_turns_spliced_total") == 2
        assert metric(text, 'parley_cache_prefix_tokens_total{source="splice"}') > 0
        assert metric(text, "parley_cache_partial_tokens_total") > 0
        assert 'parley_ttft_by_turn_seconds_count{turn="3-4"} 1' in text
        # an edited reply: no splice (the cache still serves the unchanged prefix)
        edited = list(msgs[:-1]) + [{"role": "assistant", "content": msgs[-1]["content"] + " Ok."},
                                    {"role": "user", "content": users[3]}]
        ask("hist-a", 3, edited)
        # the same conversation id in another namespace: no splice either
        ask("hist-a", 4, list(msgs) + [{"role": "user", "content": users[3]}], ns="other")
        _, text = http_get(port, "/metrics")
        assert metric(text, "parley_turns_spliced_total") == 2
    finally:
        rc.close()
        env.stop_all()


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_rebalance_stall_and_exactly_once_by_group_protocol(kafka_bootstrap, parley_bin, model, tmp_path,
                                                            protocol):
    """Both group protocols (classic cooperative-sticky, and KIP-848's
    group.protocol=consumer) under a steady stream of turns while a second
    worker joins and then the first one leaves (SIGTERM): every turn is
    answered exactly once.  Printed, not asserted: the stall each rebalance
    causes -- the longest gap between two consecutive results in the 15 s
    after the event -- next to the longest gap before any event."""
    import threading

    env = Env(kafka_bootstrap, parley_bin, model, tmp_path, protocol=protocol)
    p = ck.Producer({"bootstrap.servers": env.bootstrap})
    rc = env.consumer("responses", "read_committed")
    n, rate = 240, 8.0  # single-turn conversations, 8 per second, 30 s
    stamps, got = [], {}
    done = threading.Event()

    def reader():
        while not done.is_set() or len(got) < n:
            m = rc.poll(0.2)
            if m is None or m.error():
                if done.is_set() and time.time() > stop_at:
                    return
                continue
            r = msgpack.unpackb(m.value(), raw=False)
            got.setdefault(r["turn_id"], []).append(r)
            stamps.append(time.time())

    try:
        env.start("a")
        # the first worker owns every partition before the stream starts
        end = time.time() + 60
        while "event=assigned" not in env.log("a") and time.time() < end:
            time.sleep(0.2)
        stop_at = time.time() + 200
        th = threading.Thread(target=reader, daemon=True)
        th.start()
        t0 = time.time()
        events = {}
        for i in range(n):
            p.produce(env.topics["turns"], key=f"conv-{i}", value=turn_record(i, 0, 4))
            p.poll(0)
            if i == int(rate * 8):
                events["join"] = time.time()
                env.start("b")
            if i == int(rate * 19):
                events["leave"] = time.time()
                env.procs["a"].send_signal(signal.SIGTERM)
            time.sleep(max(0.0, t0 + (i + 1) / rate - time.time()))
        p.flush(10)
        done.set()
        stop_at = time.time() + 90
        th.join(100)
        missing = [f"conv-{i}-t0" for i in range(n) if f"conv-{i}-t0" not in got]
        dups = {k: len(v) for k, v in got.items() if len(v) != 1}
        assert not missing, f"{len(missing)} lost, e.g. {missing[:5]}\n" + env.log("b")[-2000:]
        assert not dups, dups
        by = defaultdict(int)
        for (r,) in got.values():
            by[r["worker"]] += 1
        assert by["a"] > 0 and by["b"] > 0, dict(by)  # the join handed b partitions

        def longest_gap(a, b):
            ts = [t for t in stamps if a <= t <= b]
            return max((y - x for x, y in zip(ts, ts[1:])), default=b - a)
        base = longest_gap(t0 + 2, events["join"])
        join = longest_gap(events["join"], events["join"] + 15)
        leave = longest_gap(events["leave"], events["leave"] + 15)
        print(f"\n{protocol}: {n} turns at {rate:.0f}/s, all answered once (a {by['a']}, b {by['b']}); "
              f"longest gap between results: steady {base:.2f} s, after a worker joins {join:.2f} s, "
              f"after one leaves {leave:.2f} s")
    finally:
        done.set()
        rc.close()
        env.stop_all()
    for wid, proc in env.procs.items():
        assert proc.returncode == 0, env.log(wid)[-2000:]


def test_speculative_through_the_worker(kafka_bootstrap, parley_bin, model, tmp_path):
    """Speculative decoding (scheduler.speculative = ngram, the default)
    through the worker: one conversation whose prompt repeats a phrase, so
    prompt lookup always has a match to draft from.  The worker must draft
    (drafted and verify steps > 0) and its greedy reply must be the one a
    worker with drafting off gives, token for token."""
    record = lambda conv: msgpack.packb({  # noqa: E731
        "v": 1, "conversation_id": conv, "turn_id": f"{conv}-t0",
        "messages": [{"role": "user", "content": "red green blue yellow " * 24}],
        "params": {"max_tokens": 48, "temperature": 0.0}})
    replies = {}
    for mode in ("ngram", "off"):
        env = Env(kafka_bootstrap, parley_bin, model, tmp_path / mode, partitions=1)
        (tmp_path / mode).mkdir()
        port = free_port()
        try:
            env.start("s1", "--scheduler.speculative", mode, "--worker.http", f"127.0.0.1:{port}")
            rc = env.consumer("responses", "read_committed")
            wait_assigned(rc)
            p = ck.Producer({"bootstrap.servers": env.bootstrap, "enable.idempotence": True})
            p.produce(env.topics["turns"], key="spec", value=record("spec"))
            assert p.flush(30) == 0
            (res,) = collect(rc, 1, 60)
            rc.close()
            replies[mode] = msgpack.unpackb(res.value(), raw=False)["tokens"]
            text = http_get(port, "/metrics")[1]
            drafted = metric(text, "parley_sched_spec_drafted_tokens_total")
            steps = metric(text, "parley_sched_spec_verify_steps_total")
            print(f"\nspeculative={mode}: {len(replies[mode])} tokens, drafted {drafted:.0f} in "
                  f"{steps:.0f} verify steps, accepted "
                  f"{metric(text, 'parley_sched_spec_accepted_tokens_total'):.0f}")
            if mode == "ngram":
                assert drafted > 0 and steps > 0
            else:
                assert drafted == 0 and steps == 0
        finally:
            env.stop_all()
    assert replies["ngram"] == replies["off"] and len(replies["off"]) >= 1
