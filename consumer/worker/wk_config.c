/*
 * wk_config.c -- the worker's property table, the single place a setting of
 * `parley worker` is declared, its cross-key checks and its reference
 * document.  The machinery (sources, validation, lookups, command line) is
 * consumer/common/cm_config.c.
 */
#include "wk_config.h"
#include "cm_kafka.h"
#include "pl_err.h"

#include <stdbool.h>

#define WK_I32 2147483647LL

static const cm_prop wk_props[] = {
    {"model.path", CM_PROP_REQ, "", 0, 0, "GGUF model file to serve (required)."},
    {"model.name", CM_PROP_STR, "", 0, 0,
     "Name turns use in their `model` field; empty = the file name without `.gguf`. "
     "A turn naming another model goes to the DLQ with `E_UNKNOWN_MODEL`."},
    {"model.threads", CM_PROP_INT, "0", 0, 1024, "Compute threads; 0 = one per online CPU."},
    {"model.block_tokens", CM_PROP_INT, "16", 1, 256, "KV block size B in tokens."},
    {"model.backend", CM_PROP_ENUM, "auto|cpu|cuda", 0, 0,
     "Where the model computes: `cpu`, `cuda`, or `auto` (CUDA when this build has the CUDA "
     "backend and a GPU answers, else the CPU)."},
    {"model.weights", CM_PROP_ENUM, "native|int8", 0, 0,
     "How 4-bit tensors are held: `native` keeps Q4_0, IQ4_NL and Q4_K weights 4-bit (W4A8 "
     "kernels: about half the bytes a decode step reads), `int8` requantises them to int8 like "
     "every other weight."},
    {"model.chat_template", CM_PROP_ENUM, "|llama2|llama3|gemma|gemma2|chatml|smollm2|transcript",
     0, 0,
     "Chat template name; empty = detect from "
     "the model's tokenizer.chat_template, or for a file without one its architecture's format "
     "(gemma3: gemma, qwen2/qwen3: chatml)."},
    {"model.max_context", CM_PROP_INT, "0", 0, 1 << 24,
     "Longest prompt + max_tokens accepted; 0 = the model's context length (4096 when the "
     "model states none). Longer turns go to the DLQ with `E_CONTEXT_OVERFLOW`."},
    {"scheduler.max_running", CM_PROP_INT, "64", 1, 4096, "Sequences in one batch at most."},
    {"scheduler.step_tokens", CM_PROP_INT, "512", 1, 1 << 20,
     "Token budget of one forward step (decode tokens + prefill chunks)."},
    {"scheduler.batch_window_us", CM_PROP_INT, "10000", 0, 10000000,
     "When idle, wait this long for more arrivals before a step."},
    {"scheduler.fairness_ms", CM_PROP_INT, "200", 0, 3600000,
     "A request waiting this long is served in arrival order."},
    {"scheduler.prefetch_wait_ms", CM_PROP_INT, "50", 0, 60000,
     "Longest wait for a turn's Redis prefetch before admitting it."},
    {"scheduler.kv_budget_mib", CM_PROP_INT, "256", 1, 1 << 24,
     "KV memory for running sequences when the cache is disabled (MiB)."},
    {"scheduler.speculative", CM_PROP_ENUM, "ngram|off", 0, 0,
     "Speculative decoding: `ngram` drafts up to `scheduler.spec_tokens` tokens per decoding "
     "sequence by prompt lookup (the continuation of the longest recent n-gram of the "
     "conversation that occurred before) and verifies them in the same forward step; `off` "
     "decodes one token per step. Lossless: greedy replies are identical token for token, "
     "sampled ones keep their distribution. Drafting runs only while the step is memory-bound "
     "(see `scheduler.spec_max_batch_tokens`)."},
    {"scheduler.spec_tokens", CM_PROP_INT, "6", 1, 64,
     "Drafted tokens per sequence and step at most (k): a verify step yields 1..k+1 tokens."},
    {"scheduler.spec_max_batch_tokens", CM_PROP_INT, "8", 0, 65536,
     "Decode rows of a drafting step at most (each decoding sequence's last token plus its "
     "draft): with n sequences decoding each drafts at most this / n - 1 tokens, so drafting "
     "stops once n > this / 2, where the step is compute-bound and drafts cost their full "
     "compute. 8 is where a step's rows cost about twice a single decode step on 2 cores "
     "(`parley bench --workload spec --cost`); raise it where the step stays memory-bound "
     "longer. Also the rows of logits kept for verification (n_vocab floats each: 8 MiB at 8 "
     "for Gemma 3's 262k vocabulary). 0 = never draft."},
    {"scheduler.spec_ngram_min", CM_PROP_INT, "2", 1, 8,
     "Shortest n-gram prompt lookup matches (a shorter match drafts nothing)."},
    {"scheduler.spec_ngram_max", CM_PROP_INT, "4", 1, 8,
     "Longest n-gram prompt lookup tries first (must be >= `scheduler.spec_ngram_min`)."},
    {"scheduler.constraints", CM_PROP_BOOL, "true", 0, 0,
     "Serve structured outputs (`response_format` json_object / json_schema / regex / "
     "grammar, tools with `tool_choice` required or a named function): build the model's "
     "vocabulary for the constraint engine (llguidance) at start (about a second for a "
     "262k-token vocabulary). Off, or a build without llguidance: such turns are refused "
     "with `E_UNSUPPORTED`, never served unconstrained."},
    {"scheduler.mask_threads", CM_PROP_INT, "1", 1, 64,
     "Threads computing constrained sequences' token masks while the forward step runs."},
    {"scheduler.mask_budget_ms", CM_PROP_INT, "100", 0, 60000,
     "CPU time one token mask may take; a constraint over it ends its turn with "
     "`finish_reason: error` (0 = no limit)."},
    {"scheduler.class_preempt", CM_PROP_BOOL, "true", 0, 0,
     "Service classes (docs/service-classes.md): when an interactive turn waits for a running "
     "slot, take the youngest running bulk sequences out of the batch before the next step, "
     "their KV kept, and resume them where they stopped (same tokens) once slots free up. "
     "Off: interactive turns still go first at admission but wait for a slot."},
    {"scheduler.bulk_min_share_pct", CM_PROP_INT, "10", 0, 100,
     "Percent of forward steps bulk turns get at least while they have work (an average over "
     "about the last 16 steps with bulk work), so interactive traffic never starves them; 0 = "
     "bulk runs only on capacity interactive turns leave."},
    {"scheduler.bulk_step_tokens", CM_PROP_INT, "128", 0, 1 << 20,
     "Prefill tokens bulk turns take of one forward step at most (interactive turns' prefill "
     "goes first), so the step an arriving interactive turn waits on stays short; 0 = "
     "`scheduler.step_tokens`."},
    {"scheduler.bulk_decode_seqs", CM_PROP_INT, "8", 0, 1 << 20,
     "Bulk turns one forward step decodes at most while an interactive turn runs or waits (the "
     "bulk ones take turns, keeping their KV), so the interactive turn's tokens come at the pace "
     "of a smaller batch, at some cost to bulk throughput meanwhile; 0 = no cap."},
    {"scheduler.tenant_weights", CM_PROP_STR, "", 0, 0,
     "Within a service class, namespaces (tenants) share admissions round-robin; this "
     "weights them: `NS=W,NS=W` (W > 0; unlisted namespaces weigh 1), e.g. `gold=3,free=1` "
     "admits about three of gold's turns per one of free's while both wait."},
    {"cache.enabled", CM_PROP_BOOL, "true", 0, 0,
     "Keep the KV of finished turns in a host-RAM prefix cache so the next turn of a "
     "conversation computes only its new tokens."},
    {"cache.budget_mib", CM_PROP_INT, "256", 1, 1 << 24,
     "Host-RAM KV pool size (MiB); running sequences draw from it too."},
    {"cache.partial_blocks", CM_PROP_BOOL, "true", 0, 0,
     "Also keep the partial last block of every finished turn, so the next turn resumes down "
     "to the token instead of recomputing up to `model.block_tokens` - 1 tokens (host RAM "
     "only: Redis holds whole blocks)."},
    {"redis.addr", CM_PROP_STR, "", 0, 0,
     "Redis tier as host:port; empty = no Redis (host RAM only)."},
    {"redis.timeout_ms", CM_PROP_INT, "200", 1, 60000, "Redis connect and command timeout."},
    {"redis.ttl_s", CM_PROP_INT, "3600", 1, WK_I32, "TTL of KV blocks written to Redis."},
    {"redis.user", CM_PROP_STR, "", 0, 0,
     "Redis ACL user to AUTH as (needs `redis.password`); empty = the default user. The user "
     "needs read and write on keys `~parley:kv:*` (commands AUTH, GET, SET)."},
    {"redis.password", CM_PROP_STR, "", 0, 0,
     "Password sent with AUTH after every connect; empty = no AUTH. Prefer the environment "
     "(`PARLEY_REDIS_PASSWORD`) or a mode-0600 config file to a flag; it is never logged. "
     "Wrong credentials never fail a turn: the worker logs the cause and recomputes."},
    {"redis.tls", CM_PROP_BOOL, "false", 0, 0,
     "Connect to Redis over TLS with the server certificate verified (chain against "
     "`redis.tls.ca`, name against `redis.tls.server_name`). Needs a build with hiredis_ssl "
     "(the pinned hiredis of `deploy/setup.sh`; Debian's hiredis 0.14 has none)."},
    {"redis.tls.ca", CM_PROP_STR, "", 0, 0,
     "CA bundle (PEM) that signs the Redis server certificate; empty = the system trust store."},
    {"redis.tls.cert", CM_PROP_STR, "", 0, 0,
     "Client certificate (PEM) for Redis servers that require one (`tls-auth-clients yes`); "
     "needs `redis.tls.key`."},
    {"redis.tls.key", CM_PROP_STR, "", 0, 0, "Private key (PEM) of `redis.tls.cert`."},
    {"redis.tls.server_name", CM_PROP_STR, "", 0, 0,
     "Name sent as SNI and required in the server certificate (DNS name or IP); empty = the "
     "host of `redis.addr`."},
    {"worker.id", CM_PROP_STR, "", 0, 0,
     "Worker identity: names the transactional producer (`parley-<id>`) and fills "
     "TurnResult `worker`. Keep it stable across restarts so a restarted worker fences "
     "its predecessor's open transaction; empty = host name + process id."},
    {"worker.group", CM_PROP_STR, "parley-workers", 0, 0,
     "Consumer group id (kafka.group.id overrides it)."},
    {"worker.topic.turns", CM_PROP_STR, "parley.turns", 0, 0, "Input topic (ChatTurn)."},
    {"worker.topic.tokens", CM_PROP_STR, "parley.tokens", 0, 0,
     "Token stream topic (TokenChunk; idempotent producer, read_uncommitted)."},
    {"worker.topic.responses", CM_PROP_STR, "parley.responses", 0, 0,
     "Final replies (TurnResult; transactional, read_committed)."},
    {"worker.topic.dlq", CM_PROP_STR, "parley.dlq", 0, 0, "Rejected input (DeadLetter)."},
    {"worker.topic.status", CM_PROP_STR, "parley.status", 0, 0,
     "Compacted topic of the worker's status record (model, state, turns/s, cache share; "
     "docs/fleet.md), written every `worker.status_ms` by a plain idempotent producer outside "
     "the turns' transactions; empty = off."},
    {"worker.status_ms", CM_PROP_INT, "2000", 100, 600000,
     "Period of the status record on `worker.topic.status`."},
    {"worker.txn_interval_ms", CM_PROP_INT, "100", 1, 60000,
     "Finished turns are committed in one transaction (results + input offsets) at most "
     "this long after the first of them finished (sooner when `worker.txn_horizon_ms` "
     "finds no other turn due)."},
    {"worker.txn_horizon_ms", CM_PROP_INT, "10", 0, 60000,
     "Commit at once, before `worker.txn_interval_ms`, when finished turns are ready and "
     "the scheduler expects no other turn to finish within this many ms or its recent step "
     "time, whichever is longer (its estimate: the tokens a turn has left times the step "
     "time). While turns finish closer together than that, as under load, they share a "
     "transaction as before. 0 = off: commit only on the interval or "
     "`worker.txn_max_records`."},
    {"worker.txn_max_records", CM_PROP_INT, "500", 1, 1000000,
     "Commit earlier when this many results/DLQ records are waiting."},
    {"worker.history_mib", CM_PROP_INT, "64", 0, 1048576,
     "Memory for conversations' remembered last turns (prompt render, prompt and generated "
     "ids, reply text), which the next turn's prompt splices in instead of re-tokenising the "
     "reply, so the prefix cache sees the ids it computed; least recently used idle "
     "conversations are forgotten first. 0 = off (every prompt is re-tokenised)."},
    {"worker.max_inflight", CM_PROP_INT, "256", 1, 1000000,
     "Backpressure: consumed but unfinished turns at most; above it the worker pauses its "
     "partitions and resumes them at half."},
    {"worker.pause_kv_pct", CM_PROP_INT, "90", 0, 100,
     "Backpressure on memory: pause the partitions while KV blocks held by running "
     "sequences exceed this percentage of the KV pool (`cache.budget_mib`, or "
     "`scheduler.kv_budget_mib` without the cache); 0 = off. Cached blocks no running "
     "sequence uses are evictable and do not count."},
    {"worker.resume_kv_pct", CM_PROP_INT, "70", 0, 100,
     "Resume the partitions paused for KV memory once held blocks are back at or below "
     "this percentage of the pool (must be below `worker.pause_kv_pct`)."},
    {"worker.chunk_tokens", CM_PROP_INT, "4", 1, 4096,
     "Tokens per TokenChunk for streaming turns."},
    {"worker.stall_ms", CM_PROP_INT, "300000", 1000, 86400000,
     "Liveness: `/healthz` answers 503 (and the worker logs `event=loop_stalled`) once its "
     "poll loop has not run for this long, so that an orchestrator restarts a worker stuck "
     "in a Kafka call that never returns (librdkafka #5511). Keep it above the longest "
     "legitimate wait: a commit's retried transactional calls (3 x 30 s each for the "
     "offsets and the commit)."},
    {"worker.startup_timeout_ms", CM_PROP_INT, "60000", 1000, 3600000,
     "Longest start-up: every wait for Kafka before the worker serves (metadata, "
     "init_transactions, the group probe, subscribe) must end within it, else the worker "
     "exits with status 1 and one line naming what it waited for."},
    {"worker.grace_ms", CM_PROP_INT, "10000", 0, 3600000,
     "On SIGTERM/SIGINT: time in-flight turns get to finish before they are cancelled."},
    {"worker.namespace_from", CM_PROP_ENUM, "field|header|topic|fixed", 0, 0,
     "Where a turn's cache namespace comes from: `field` (the record's `namespace`, "
     "for producers you trust), `header` (the `parley-namespace` header, set by a trusted "
     "gateway; a record without it goes to the DLQ), `topic` (the turns topic's name: one "
     "topic per tenant) or `fixed` (`worker.namespace`). In every mode but `field` the "
     "record's own `namespace` is ignored, so a producer cannot claim another tenant's "
     "cached KV."},
    {"worker.namespace", CM_PROP_STR, "", 0, 0,
     "The namespace of every turn when `worker.namespace_from` is `fixed` (required then)."},
    {"worker.http", CM_PROP_STR, "", 0, 0,
     "Address of the HTTP endpoint (/metrics, /healthz, /readyz): host:port, or :port / "
     "port for loopback only (127.0.0.1); expose it with 0.0.0.0:PORT or [::]:PORT. "
     "Empty = off."},
};
#define WK_NPROPS (sizeof wk_props / sizeof wk_props[0])

const cm_prop *wk_config_props(size_t *n) {
    if (n) *n = WK_NPROPS;
    return wk_props;
}

/* The redis.* keys that only make sense together. */
static int wk_config_check_redis(const cm_config *c, char *err, size_t errlen) {
    static const char *const tls_keys[] = {"redis.tls.ca", "redis.tls.cert", "redis.tls.key",
                                           "redis.tls.server_name"};
    bool tls = cm_config_bool(c, "redis.tls");
    if (*cm_config_str(c, "redis.user") && !*cm_config_str(c, "redis.password"))
        return pl_errf(err, errlen, CM_CONFIG_EINVAL,
                       "configuration key 'redis.user' needs 'redis.password' (AUTH user "
                       "password; environment PARLEY_REDIS_PASSWORD)");
    for (size_t i = 0; i < sizeof tls_keys / sizeof tls_keys[0]; i++)
        if (!tls && *cm_config_str(c, tls_keys[i]))
            return pl_errf(err, errlen, CM_CONFIG_EINVAL,
                           "configuration key '%s' is set but 'redis.tls' is false: set "
                           "redis.tls=true to use TLS",
                           tls_keys[i]);
    bool cert = *cm_config_str(c, "redis.tls.cert"), key = *cm_config_str(c, "redis.tls.key");
    if (cert != key)
        return pl_errf(err, errlen, CM_CONFIG_EINVAL,
                       "configuration key '%s' needs '%s' (a client certificate goes with "
                       "its private key)",
                       cert ? "redis.tls.cert" : "redis.tls.key",
                       cert ? "redis.tls.key" : "redis.tls.cert");
    if ((tls || *cm_config_str(c, "redis.password")) && !*cm_config_str(c, "redis.addr"))
        return pl_errf(err, errlen, CM_CONFIG_EINVAL,
                       "configuration keys 'redis.tls' / 'redis.password' need 'redis.addr'");
    return 0;
}

/* The worker's cross-key checks (cm_config_check_fn). */
static int wk_config_check(const cm_config *c, char *err, size_t errlen) {
    long long hi = cm_config_int(c, "worker.pause_kv_pct");
    long long lo = cm_config_int(c, "worker.resume_kv_pct");
    if (hi > 0 && lo >= hi)
        return pl_errf(err, errlen, CM_CONFIG_EINVAL,
                       "configuration key 'worker.resume_kv_pct': %lld must be below "
                       "worker.pause_kv_pct (%lld)",
                       lo, hi);
    if (cm_config_int(c, "scheduler.spec_ngram_min") > cm_config_int(c, "scheduler.spec_ngram_max"))
        return pl_errf(err, errlen, CM_CONFIG_EINVAL,
                       "configuration key 'scheduler.spec_ngram_min': %lld must not exceed "
                       "scheduler.spec_ngram_max (%lld)",
                       cm_config_int(c, "scheduler.spec_ngram_min"),
                       cm_config_int(c, "scheduler.spec_ngram_max"));
    /* every kafka.* key reaches one of the worker's clients, or is refused */
    int rc = cm_kafka_config_check(c, CM_KAFKA_GROUP | CM_KAFKA_PRODUCER, "worker", err, errlen);
    if (rc) return pl_err_recode(rc, PL_ERR_CM, CM_CONFIG_EINVAL);
    return wk_config_check_redis(c, err, errlen);
}

int wk_config_new(cm_config **out) {
    return cm_config_new(wk_props, WK_NPROPS, "worker", wk_config_check, out);
}

int wk_config_doc(FILE *f) {
    fprintf(f, "# parley worker configuration reference\n\n"
               "Generated by `parley worker --print-config-doc` from the property table in\n"
               "`consumer/worker/wk_config.c`.\n\n"
               "Sources, later wins: the file given with `--config FILE` (lines `key = value`,\n"
               "`#` comments), the environment (`PARLEY_<KEY>`: upper case, `.` -> `_`), then\n"
               "flags (`--set key=value` or `--key value`).  Any `kafka.<property>` is passed\n"
               "to librdkafka unchanged (environment: `PARLEY_KAFKA_<PROPERTY>` with `_` ->\n"
               "`.`), e.g. `kafka.bootstrap.servers`, `kafka.security.protocol`,\n"
               "`kafka.sasl.mechanisms`, to the clients librdkafka documents it for: a\n"
               "consumer-only property (`kafka.fetch.wait.max.ms`, `kafka.session.timeout.ms`)\n"
               "goes to the group consumer only, a producer-only one (`kafka.linger.ms`,\n"
               "`kafka.transaction.timeout.ms`) to the transactional and the chunk producer\n"
               "only, a common one (`kafka.bootstrap.servers`, `kafka.client.id`, SASL/SSL) to\n"
               "all three.  `kafka.consumer.<property>` and `kafka.producer.<property>` force\n"
               "a property onto the consumer or onto the producers only (e.g. a separate\n"
               "`kafka.producer.client.id`).  Keys the worker sets itself are refused, not\n"
               "overwritten: `kafka.transactional.id` (named by `worker.id`),\n"
               "`kafka.enable.auto.commit` / `kafka.enable.auto.offset.store` (offsets go in\n"
               "the transactions), `kafka.enable.idempotence` other than `true`.  Every other\n"
               "command (gateway, batch, chat, load, topics) builds its clients through the\n"
               "same layer (`consumer/common/cm_kafka.h`; see the end of this file).  A bad\n"
               "value or a refused key stops the worker at start with a message naming the\n"
               "key (exit status 2).\n\n"
               "| key | type | default | environment | description |\n"
               "|---|---|---|---|---|\n");
    return cm_config_doc_table(f, wk_props, WK_NPROPS);
}
