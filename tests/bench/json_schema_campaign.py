#!/usr/bin/env python3
"""json_schema_campaign.py -- JSON-schema conformance of parley on a real
model, outside the test suite (tests/py/test_structured.py runs a quick
subset of the same check).

Starts its own topics, one worker and one gateway on a running Kafka, then
asks for N schemas drawn by tests/py/schema_gen.py from --seed (so every
seed brings schemas no test was written against), each greedy and at
temperature 1, through the official `openai` client with
response_format json_schema (strict), --concurrency requests at a time.
Every reply that finished with `stop` must parse and validate with
`jsonschema` (formats checked); the script prints how many did, how many
hit `length` (max_tokens cut the JSON short: the client sees an incomplete
reply), any failure with its schema, and the worker's constraint metrics
(masks, mask wait and CPU seconds).  Exit status 1 when any `stop` reply
failed to validate.

    python tests/bench/json_schema_campaign.py --parley build/consumer/parley \\
        --kafka HOST:9092 --model ~/.cache/parley/models/gemma-3-270m-q4_k_m.gguf \\
        --schemas 200 --seed 7 --max-tokens 256 --concurrency 8
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "py"))
import schema_gen  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--parley", required=True)
    ap.add_argument("--kafka", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--schemas", type=int, default=200)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    import openai
    from confluent_kafka.admin import AdminClient, NewTopic

    prefix = f"camp-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": a.kafka})
    for f in admin.create_topics([NewTopic(f"{prefix}.{k}", 2 if k != "dlq" else 1, 1)
                                  for k in ("turns", "tokens", "responses", "dlq")]).values():
        f.result(30)
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        mport = s.getsockname()[1]
    wlog = open(f"/tmp/{prefix}-worker.log", "wb")
    worker = subprocess.Popen(
        [a.parley, "worker", "--model.path", a.model, "--model.name", "gemma",
         "--model.chat_template", "transcript", "--model.threads", str(a.threads),
         "--worker.id", prefix, "--worker.group", f"g-{prefix}",
         "--worker.topic.turns", f"{prefix}.turns", "--worker.topic.tokens", f"{prefix}.tokens",
         "--worker.topic.responses", f"{prefix}.responses", "--worker.topic.dlq", f"{prefix}.dlq",
         "--worker.http", f"127.0.0.1:{mport}", "--kafka.bootstrap.servers", a.kafka],
        stdout=wlog, stderr=subprocess.STDOUT)
    gw = subprocess.Popen(
        [a.parley, "gateway", "--kafka.bootstrap.servers", a.kafka, "--gateway.listen",
         "127.0.0.1:0", "--gateway.topic.turns", f"{prefix}.turns", "--gateway.topic.tokens",
         f"{prefix}.tokens", "--gateway.topic.responses", f"{prefix}.responses",
         "--gateway.topic.dlq", f"{prefix}.dlq", "--gateway.timeout_ms", "600000"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = re.search(r"listening on (http://[0-9.]+:\d+)", gw.stdout.readline()).group(1)
    end = time.time() + 180
    while time.time() < end and "event=assigned" not in open(wlog.name, errors="replace").read():
        time.sleep(0.2)
    c = openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0, timeout=900)
    jobs = [(i, s, t) for i, s in enumerate(schema_gen.schemas(a.seed, a.schemas))
            for t in (0.0, 1.0)]

    def run(job):
        i, schema, temperature = job
        try:
            r = c.chat.completions.create(
                model="gemma", max_tokens=a.max_tokens, temperature=temperature, seed=i,
                messages=[{"role": "user", "content": "Fill in this record with realistic values."}],
                response_format={"type": "json_schema", "json_schema": {
                    "name": "record", "strict": True, "schema": schema}})
        except openai.APIStatusError as e:
            return job, "refused", f"{e.status_code} {e.code}: {e.message}", 0
        ch = r.choices[0]
        if ch.finish_reason != "stop":
            return job, ch.finish_reason, None, r.usage.completion_tokens
        try:
            doc = json.loads(ch.message.content)
        except ValueError as e:
            return job, "invalid", f"does not parse: {e}: {ch.message.content!r}", 0
        errs = list(schema_gen.validator(schema).iter_errors(doc))
        if errs:
            return job, "invalid", f"{errs[0].message}: {ch.message.content!r}", 0
        return job, "valid", None, r.usage.completion_tokens

    t0 = time.time()
    with ThreadPoolExecutor(a.concurrency) as ex:
        results = list(ex.map(run, jobs))
    wall = time.time() - t0
    with urllib.request.urlopen(f"http://127.0.0.1:{mport}/metrics", timeout=10) as h:
        metrics = h.read().decode()
    gw.terminate()
    worker.terminate()
    gw.wait(30)
    worker.wait(60)
    counts = {}
    toks = 0
    for (i, schema, t), kind, why, n in results:
        counts[(kind, t)] = counts.get((kind, t), 0) + 1
        toks += n
        if kind in ("invalid", "refused"):
            print(f"{kind}: schema {i} T={t}: {why}\n  {json.dumps(schema)}")
    print(f"json_schema campaign: seed {a.seed}, {a.schemas} schemas x (greedy, T=1) = "
          f"{len(jobs)} requests, max_tokens {a.max_tokens}, {wall:.0f} s, "
          f"{toks} completion tokens")
    for t in (0.0, 1.0):
        stop = counts.get(("valid", t), 0) + counts.get(("invalid", t), 0)
        print(f"  T={t}: stop {stop} (valid {counts.get(('valid', t), 0)}, invalid "
              f"{counts.get(('invalid', t), 0)}), length {counts.get(('length', t), 0)}, "
              f"refused {counts.get(('refused', t), 0)}")
    for name in ("parley_sched_constrained_total", "parley_sched_masks_total",
                 "parley_sched_mask_wait_seconds_total", "parley_sched_mask_cpu_seconds_total",
                 "parley_sched_mask_over_budget_total"):
        m = re.search(rf"^{name} (\S+)$", metrics, re.M)
        print(f"  {name} {m.group(1) if m else '?'}")
    bad = sum(v for (k, _), v in counts.items() if k == "invalid")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
