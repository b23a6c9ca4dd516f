/*
 * wk_config.c -- the worker's property table, its three sources (file,
 * environment, flags), validation and the generated reference document.
 * See wk_config.h for the rules; the table below is the single place a
 * setting is declared.
 */
#include "wk_config.h"
#include "cli_opt.h"
#include "pl_err.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <librdkafka/rdkafka.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define WK_I32 2147483647LL

static const wk_prop wk_props[] = {
    {"model.path", WK_PROP_REQ, "", 0, 0, "GGUF model file to serve (required)."},
    {"model.name", WK_PROP_STR, "", 0, 0,
     "Name turns use in their `model` field; empty = the file name without `.gguf`. "
     "A turn naming another model goes to the DLQ with `E_UNKNOWN_MODEL`."},
    {"model.threads", WK_PROP_INT, "0", 0, 1024, "Compute threads; 0 = one per online CPU."},
    {"model.block_tokens", WK_PROP_INT, "16", 1, 256, "KV block size B in tokens."},
    {"model.backend", WK_PROP_STR, "auto", 0, 0,
     "Where the model computes: `cpu`, `cuda`, or `auto` (CUDA when this build has the CUDA "
     "backend and a GPU answers, else the CPU)."},
    {"model.weights", WK_PROP_STR, "native", 0, 0,
     "How 4-bit tensors are held: `native` keeps Q4_0, IQ4_NL and Q4_K weights 4-bit (W4A8 "
     "kernels: about half the bytes a decode step reads), `int8` requantises them to int8 like "
     "every other weight."},
    {"model.chat_template", WK_PROP_STR, "", 0, 0,
     "Chat template name (llama2, llama3, gemma, gemma2, chatml, transcript); empty = detect from "
     "the model's tokenizer.chat_template, or for a file without one its architecture's format "
     "(gemma3: gemma, qwen2/qwen3: chatml)."},
    {"model.max_context", WK_PROP_INT, "0", 0, 1 << 24,
     "Longest prompt + max_tokens accepted; 0 = the model's context length (4096 when the "
     "model states none). Longer turns go to the DLQ with `E_CONTEXT_OVERFLOW`."},
    {"scheduler.max_running", WK_PROP_INT, "64", 1, 4096, "Sequences in one batch at most."},
    {"scheduler.step_tokens", WK_PROP_INT, "512", 1, 1 << 20,
     "Token budget of one forward step (decode tokens + prefill chunks)."},
    {"scheduler.batch_window_us", WK_PROP_INT, "10000", 0, 10000000,
     "When idle, wait this long for more arrivals before a step."},
    {"scheduler.fairness_ms", WK_PROP_INT, "200", 0, 3600000,
     "A request waiting this long is served in arrival order."},
    {"scheduler.prefetch_wait_ms", WK_PROP_INT, "50", 0, 60000,
     "Longest wait for a turn's Redis prefetch before admitting it."},
    {"scheduler.kv_budget_mib", WK_PROP_INT, "256", 1, 1 << 24,
     "KV memory for running sequences when the cache is disabled (MiB)."},
    {"scheduler.speculative", WK_PROP_STR, "ngram", 0, 0,
     "Speculative decoding: `ngram` drafts up to `scheduler.spec_tokens` tokens per decoding "
     "sequence by prompt lookup (the continuation of the longest recent n-gram of the "
     "conversation that occurred before) and verifies them in the same forward step; `off` "
     "decodes one token per step. Lossless: greedy replies are identical token for token, "
     "sampled ones keep their distribution. Drafting runs only while the step is memory-bound "
     "(see `scheduler.spec_max_batch_tokens`)."},
    {"scheduler.spec_tokens", WK_PROP_INT, "6", 1, 64,
     "Drafted tokens per sequence and step at most (k): a verify step yields 1..k+1 tokens."},
    {"scheduler.spec_max_batch_tokens", WK_PROP_INT, "8", 0, 65536,
     "Decode rows of a drafting step at most (each decoding sequence's last token plus its "
     "draft): with n sequences decoding each drafts at most this / n - 1 tokens, so drafting "
     "stops once n > this / 2, where the step is compute-bound and drafts cost their full "
     "compute. 8 is where a step's rows cost about twice a single decode step on 2 cores "
     "(`parley bench --workload spec --cost`); raise it where the step stays memory-bound "
     "longer. Also the rows of logits kept for verification (n_vocab floats each: 8 MiB at 8 "
     "for Gemma 3's 262k vocabulary). 0 = never draft."},
    {"scheduler.spec_ngram_min", WK_PROP_INT, "2", 1, 8,
     "Shortest n-gram prompt lookup matches (a shorter match drafts nothing)."},
    {"scheduler.spec_ngram_max", WK_PROP_INT, "4", 1, 8,
     "Longest n-gram prompt lookup tries first (must be >= `scheduler.spec_ngram_min`)."},
    {"scheduler.constraints", WK_PROP_BOOL, "true", 0, 0,
     "Serve structured outputs (`response_format` json_object / json_schema / regex / "
     "grammar, tools with `tool_choice` required or a named function): build the model's "
     "vocabulary for the constraint engine (llguidance) at start (about a second for a "
     "262k-token vocabulary). Off, or a build without llguidance: such turns are refused "
     "with `E_UNSUPPORTED`, never served unconstrained."},
    {"scheduler.mask_threads", WK_PROP_INT, "1", 1, 64,
     "Threads computing constrained sequences' token masks while the forward step runs."},
    {"scheduler.mask_budget_ms", WK_PROP_INT, "100", 0, 60000,
     "CPU time one token mask may take; a constraint over it ends its turn with "
     "`finish_reason: error` (0 = no limit)."},
    {"cache.enabled", WK_PROP_BOOL, "true", 0, 0,
     "Keep the KV of finished turns in a host-RAM prefix cache so the next turn of a "
     "conversation computes only its new tokens."},
    {"cache.budget_mib", WK_PROP_INT, "256", 1, 1 << 24,
     "Host-RAM KV pool size (MiB); running sequences draw from it too."},
    {"cache.partial_blocks", WK_PROP_BOOL, "true", 0, 0,
     "Also keep the partial last block of every finished turn, so the next turn resumes down "
     "to the token instead of recomputing up to `model.block_tokens` - 1 tokens (host RAM "
     "only: Redis holds whole blocks)."},
    {"redis.addr", WK_PROP_STR, "", 0, 0,
     "Redis tier as host:port; empty = no Redis (host RAM only)."},
    {"redis.timeout_ms", WK_PROP_INT, "200", 1, 60000, "Redis connect and command timeout."},
    {"redis.ttl_s", WK_PROP_INT, "3600", 1, WK_I32, "TTL of KV blocks written to Redis."},
    {"redis.user", WK_PROP_STR, "", 0, 0,
     "Redis ACL user to AUTH as (needs `redis.password`); empty = the default user. The user "
     "needs read and write on keys `~parley:kv:*` (commands AUTH, GET, SET)."},
    {"redis.password", WK_PROP_STR, "", 0, 0,
     "Password sent with AUTH after every connect; empty = no AUTH. Prefer the environment "
     "(`PARLEY_REDIS_PASSWORD`) or a mode-0600 config file to a flag; it is never logged. "
     "Wrong credentials never fail a turn: the worker logs the cause and recomputes."},
    {"redis.tls", WK_PROP_BOOL, "false", 0, 0,
     "Connect to Redis over TLS with the server certificate verified (chain against "
     "`redis.tls.ca`, name against `redis.tls.server_name`). Needs a build with hiredis_ssl "
     "(the pinned hiredis of `deploy/setup.sh`; Debian's hiredis 0.14 has none)."},
    {"redis.tls.ca", WK_PROP_STR, "", 0, 0,
     "CA bundle (PEM) that signs the Redis server certificate; empty = the system trust store."},
    {"redis.tls.cert", WK_PROP_STR, "", 0, 0,
     "Client certificate (PEM) for Redis servers that require one (`tls-auth-clients yes`); "
     "needs `redis.tls.key`."},
    {"redis.tls.key", WK_PROP_STR, "", 0, 0, "Private key (PEM) of `redis.tls.cert`."},
    {"redis.tls.server_name", WK_PROP_STR, "", 0, 0,
     "Name sent as SNI and required in the server certificate (DNS name or IP); empty = the "
     "host of `redis.addr`."},
    {"worker.id", WK_PROP_STR, "", 0, 0,
     "Worker identity: names the transactional producer (`parley-<id>`) and fills "
     "TurnResult `worker`. Keep it stable across restarts so a restarted worker fences "
     "its predecessor's open transaction; empty = host name + process id."},
    {"worker.group", WK_PROP_STR, "parley-workers", 0, 0,
     "Consumer group id (kafka.group.id overrides it)."},
    {"worker.topic.turns", WK_PROP_STR, "parley.turns", 0, 0, "Input topic (ChatTurn)."},
    {"worker.topic.tokens", WK_PROP_STR, "parley.tokens", 0, 0,
     "Token stream topic (TokenChunk; idempotent producer, read_uncommitted)."},
    {"worker.topic.responses", WK_PROP_STR, "parley.responses", 0, 0,
     "Final replies (TurnResult; transactional, read_committed)."},
    {"worker.topic.dlq", WK_PROP_STR, "parley.dlq", 0, 0, "Rejected input (DeadLetter)."},
    {"worker.txn_interval_ms", WK_PROP_INT, "100", 1, 60000,
     "Finished turns are committed in one transaction (results + input offsets) at most "
     "this long after the first of them finished (sooner when `worker.txn_horizon_ms` "
     "finds no other turn due)."},
    {"worker.txn_horizon_ms", WK_PROP_INT, "10", 0, 60000,
     "Commit at once, before `worker.txn_interval_ms`, when finished turns are ready and "
     "the scheduler expects no other turn to finish within this many ms or its recent step "
     "time, whichever is longer (its estimate: the tokens a turn has left times the step "
     "time). While turns finish closer together than that, as under load, they share a "
     "transaction as before. 0 = off: commit only on the interval or "
     "`worker.txn_max_records`."},
    {"worker.txn_max_records", WK_PROP_INT, "500", 1, 1000000,
     "Commit earlier when this many results/DLQ records are waiting."},
    {"worker.history_mib", WK_PROP_INT, "64", 0, 1048576,
     "Memory for conversations' remembered last turns (prompt render, prompt and generated "
     "ids, reply text), which the next turn's prompt splices in instead of re-tokenising the "
     "reply, so the prefix cache sees the ids it computed; least recently used idle "
     "conversations are forgotten first. 0 = off (every prompt is re-tokenised)."},
    {"worker.max_inflight", WK_PROP_INT, "256", 1, 1000000,
     "Backpressure: consumed but unfinished turns at most; above it the worker pauses its "
     "partitions and resumes them at half."},
    {"worker.pause_kv_pct", WK_PROP_INT, "90", 0, 100,
     "Backpressure on memory: pause the partitions while KV blocks held by running "
     "sequences exceed this percentage of the KV pool (`cache.budget_mib`, or "
     "`scheduler.kv_budget_mib` without the cache); 0 = off. Cached blocks no running "
     "sequence uses are evictable and do not count."},
    {"worker.resume_kv_pct", WK_PROP_INT, "70", 0, 100,
     "Resume the partitions paused for KV memory once held blocks are back at or below "
     "this percentage of the pool (must be below `worker.pause_kv_pct`)."},
    {"worker.chunk_tokens", WK_PROP_INT, "4", 1, 4096,
     "Tokens per TokenChunk for streaming turns."},
    {"worker.startup_timeout_ms", WK_PROP_INT, "60000", 1000, 3600000,
     "Longest start-up: every wait for Kafka before the worker serves (metadata, "
     "init_transactions, the group probe, subscribe) must end within it, else the worker "
     "exits with status 1 and one line naming what it waited for."},
    {"worker.grace_ms", WK_PROP_INT, "10000", 0, 3600000,
     "On SIGTERM/SIGINT: time in-flight turns get to finish before they are cancelled."},
    {"worker.namespace_from", WK_PROP_STR, "field", 0, 0,
     "Where a turn's cache namespace comes from: `field` (the record's `namespace`, "
     "for producers you trust), `header` (the `parley-namespace` header, set by a trusted "
     "gateway; a record without it goes to the DLQ), `topic` (the turns topic's name: one "
     "topic per tenant) or `fixed` (`worker.namespace`). In every mode but `field` the "
     "record's own `namespace` is ignored, so a producer cannot claim another tenant's "
     "cached KV."},
    {"worker.namespace", WK_PROP_STR, "", 0, 0,
     "The namespace of every turn when `worker.namespace_from` is `fixed` (required then)."},
    {"worker.http", WK_PROP_STR, "", 0, 0,
     "Address of the HTTP endpoint (/metrics, /healthz, /readyz): host:port, or :port / "
     "port for loopback only (127.0.0.1); expose it with 0.0.0.0:PORT or [::]:PORT. "
     "Empty = off."},
};
#define WK_NPROPS (sizeof wk_props / sizeof wk_props[0])

/* A kafka.* pass-through property. */
typedef struct wk_kv {
    char *name; /* librdkafka property (without "kafka.") */
    char *val;  /* its value */
} wk_kv;

struct wk_config {
    const wk_prop *props; /* the property table (static) */
    size_t n_props;       /* its rows */
    const char *cmd;      /* command named in messages ("worker", "gateway") */
    char **val;           /* value per table row; NULL = default */
    wk_kv *kafka;         /* pass-through properties */
    size_t n_kafka;       /* entries used */
    size_t cap_kafka;     /* entries allocated */
};

const wk_prop *wk_config_props(size_t *n) {
    if (n) *n = WK_NPROPS;
    return wk_props;
}

static int wk_prop_find(const wk_config *c, const char *key) {
    for (size_t i = 0; i < c->n_props; i++)
        if (!strcmp(c->props[i].name, key)) return (int)i;
    return -1;
}

int wk_config_new_props(const wk_prop *props, size_t n, const char *cmd, wk_config **out) {
    wk_config *c = calloc(1, sizeof *c);
    if (!c) return *out = NULL, WK_CONFIG_ENOMEM;
    c->props = props;
    c->n_props = n;
    c->cmd = cmd;
    if (!(c->val = calloc(n ? n : 1, sizeof *c->val))) {
        free(c);
        return *out = NULL, WK_CONFIG_ENOMEM;
    }
    *out = c;
    return 0;
}

int wk_config_new(wk_config **out) {
    return wk_config_new_props(wk_props, WK_NPROPS, "worker", out);
}

void wk_config_free(wk_config *c) {
    if (!c) return;
    for (size_t i = 0; i < c->n_props; i++) free(c->val[i]);
    free(c->val);
    for (size_t i = 0; i < c->n_kafka; i++) {
        free(c->kafka[i].name);
        free(c->kafka[i].val);
    }
    free(c->kafka);
    free(c);
}

static int wk_parse_int(const char *s, long long *out) {
    return cli_parse_i64(s, LLONG_MIN, LLONG_MAX, out);
}

static int wk_parse_bool(const char *s, bool *out) {
    static const char *const yes[] = {"true", "1", "yes", "on"};
    static const char *const no[] = {"false", "0", "no", "off"};
    for (int i = 0; i < 4; i++) {
        if (!strcasecmp(s, yes[i])) return *out = true, 0;
        if (!strcasecmp(s, no[i])) return *out = false, 0;
    }
    return -1;
}

/* Check val against row p; message names key and origin. */
static int wk_prop_check(const wk_prop *p, const char *val, const char *origin, char *err,
                         size_t errlen) {
    long long v;
    bool b;
    switch (p->type) {
    case WK_PROP_INT:
        if (wk_parse_int(val, &v) != 0)
            return pl_errf(err, errlen, WK_CONFIG_EINVAL,
                           "configuration key '%s' (%s): '%s' is not an integer", p->name, origin,
                           val);
        if (v < p->min || v > p->max)
            return pl_errf(err, errlen, WK_CONFIG_EINVAL,
                           "configuration key '%s' (%s): %lld is outside %lld..%lld", p->name,
                           origin, v, p->min, p->max);
        return 0;
    case WK_PROP_BOOL:
        if (wk_parse_bool(val, &b) != 0)
            return pl_errf(err, errlen, WK_CONFIG_EINVAL,
                           "configuration key '%s' (%s): '%s' is not a boolean "
                           "(true/false)",
                           p->name, origin, val);
        return 0;
    case WK_PROP_REQ:
        if (!*val)
            return pl_errf(err, errlen, WK_CONFIG_EINVAL,
                           "configuration key '%s' (%s): must not be empty", p->name, origin);
        return 0;
    default: return 0;
    }
}

static int wk_kafka_set(wk_config *c, const char *name, const char *val) {
    for (size_t i = 0; i < c->n_kafka; i++)
        if (!strcmp(c->kafka[i].name, name)) {
            char *v = strdup(val);
            if (!v) return WK_CONFIG_ENOMEM;
            free(c->kafka[i].val);
            c->kafka[i].val = v;
            return 0;
        }
    if (c->n_kafka == c->cap_kafka) {
        size_t cap = c->cap_kafka ? 2 * c->cap_kafka : 8;
        wk_kv *k = realloc(c->kafka, cap * sizeof *k);
        if (!k) return WK_CONFIG_ENOMEM;
        c->kafka = k;
        c->cap_kafka = cap;
    }
    char *n = strdup(name), *v = strdup(val);
    if (!n || !v) {
        free(n);
        free(v);
        return WK_CONFIG_ENOMEM;
    }
    c->kafka[c->n_kafka++] = (wk_kv){n, v};
    return 0;
}

int wk_config_set(wk_config *c, const char *key, const char *val, const char *origin, char *err,
                  size_t errlen) {
    if (!c || !key || !val) return pl_errf(err, errlen, WK_CONFIG_EINVAL, "NULL argument");
    if (!strncmp(key, "kafka.", 6)) {
        if (!key[6] || !strcmp(key + 6, "consumer.") || !strcmp(key + 6, "producer."))
            return pl_errf(err, errlen, WK_CONFIG_EINVAL,
                           "configuration key '%s' (%s): names no librdkafka property", key,
                           origin);
        int rc = wk_kafka_set(c, key + 6, val);
        return rc ? pl_errf(err, errlen, rc, "out of memory") : 0;
    }
    int i = wk_prop_find(c, key);
    if (i < 0)
        return pl_errf(err, errlen, WK_CONFIG_EINVAL,
                       "unknown configuration key '%s' (%s); see parley %s "
                       "--print-config-doc",
                       key, origin, c->cmd);
    int rc = wk_prop_check(&c->props[i], val, origin, err, errlen);
    if (rc) return rc;
    char *v = strdup(val);
    if (!v) return pl_errf(err, errlen, WK_CONFIG_ENOMEM, "out of memory");
    free(c->val[i]);
    c->val[i] = v;
    return 0;
}

/* Trim ASCII white space in place; returns the start. */
static char *wk_trim(char *s) {
    while (isspace((unsigned char)*s)) s++;
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1])) s[--n] = 0;
    return s;
}

int wk_config_set_pair(wk_config *c, const char *pair, const char *origin, char *err,
                       size_t errlen) {
    const char *eq = strchr(pair, '=');
    if (!eq || eq == pair)
        return pl_errf(err, errlen, WK_CONFIG_EINVAL, "%s: '%s' is not key=value", origin, pair);
    char key[256];
    size_t kl = (size_t)(eq - pair);
    if (kl >= sizeof key) return pl_errf(err, errlen, WK_CONFIG_EINVAL, "%s: key too long", origin);
    memcpy(key, pair, kl);
    key[kl] = 0;
    return wk_config_set(c, wk_trim(key), eq + 1, origin, err, errlen);
}

int wk_config_load_file(wk_config *c, const char *path, char *err, size_t errlen) {
    FILE *f = fopen(path, "r");
    if (!f)
        return pl_errf(err, errlen, WK_CONFIG_EIO, "cannot read configuration file %s: %s", path,
                       strerror(errno));
    char line[4096], origin[512];
    int rc = 0, ln = 0;
    while (fgets(line, sizeof line, f)) {
        ln++;
        snprintf(origin, sizeof origin, "file %s line %d", path, ln);
        size_t n = strlen(line);
        if (n == sizeof line - 1 && line[n - 1] != '\n') {
            rc = pl_errf(err, errlen, WK_CONFIG_EINVAL, "%s: line too long", origin);
            break;
        }
        char *s = wk_trim(line);
        if (!*s || *s == '#') continue;
        char *eq = strchr(s, '=');
        if (!eq) {
            rc = pl_errf(err, errlen, WK_CONFIG_EINVAL, "%s: expected 'key = value'", origin);
            break;
        }
        *eq = 0;
        if ((rc = wk_config_set(c, wk_trim(s), wk_trim(eq + 1), origin, err, errlen)) != 0) break;
    }
    if (!rc && ferror(f)) rc = pl_errf(err, errlen, WK_CONFIG_EIO, "error reading %s", path);
    fclose(f);
    return rc;
}

/* PARLEY_ + key upper-cased, '.' -> '_'. */
static void wk_env_name(const char *key, char *out, size_t cap) {
    size_t j = (size_t)snprintf(out, cap, "PARLEY_");
    for (const char *p = key; *p && j + 1 < cap; p++)
        out[j++] = *p == '.' ? '_' : (char)toupper((unsigned char)*p);
    out[j] = 0;
}

int wk_config_load_env(wk_config *c, char *const *envp, char *err, size_t errlen) {
    char name[256], origin[300];
    for (char *const *e = envp; e && *e; e++) {
        const char *eq = strchr(*e, '=');
        if (!eq || strncmp(*e, "PARLEY_", 7)) continue;
        size_t nl = (size_t)(eq - *e);
        int rc = 0;
        snprintf(origin, sizeof origin, "environment %.*s", (int)(nl < 200 ? nl : 200), *e);
        if (nl > 13 && !strncmp(*e, "PARLEY_KAFKA_", 13) && nl - 13 < sizeof name - 8) {
            size_t j = (size_t)snprintf(name, sizeof name, "kafka.");
            for (size_t i = 13; i < nl; i++)
                name[j++] = (*e)[i] == '_' ? '.' : (char)tolower((unsigned char)(*e)[i]);
            name[j] = 0;
            rc = wk_config_set(c, name, eq + 1, origin, err, errlen);
        } else {
            for (size_t i = 0; i < c->n_props; i++) {
                wk_env_name(c->props[i].name, name, sizeof name);
                if (strlen(name) == nl && !strncmp(name, *e, nl)) {
                    rc = wk_config_set(c, c->props[i].name, eq + 1, origin, err, errlen);
                    break;
                }
            }
        }
        if (rc) return rc;
    }
    return 0;
}

/* The redis.* keys that only make sense together. */
static int wk_config_check_redis(const wk_config *c, char *err, size_t errlen) {
    static const char *const tls_keys[] = {"redis.tls.ca", "redis.tls.cert", "redis.tls.key",
                                           "redis.tls.server_name"};
    bool tls = wk_config_bool(c, "redis.tls");
    if (*wk_config_str(c, "redis.user") && !*wk_config_str(c, "redis.password"))
        return pl_errf(err, errlen, WK_CONFIG_EINVAL,
                       "configuration key 'redis.user' needs 'redis.password' (AUTH user "
                       "password; environment PARLEY_REDIS_PASSWORD)");
    for (size_t i = 0; i < sizeof tls_keys / sizeof tls_keys[0]; i++)
        if (!tls && *wk_config_str(c, tls_keys[i]))
            return pl_errf(err, errlen, WK_CONFIG_EINVAL,
                           "configuration key '%s' is set but 'redis.tls' is false: set "
                           "redis.tls=true to use TLS",
                           tls_keys[i]);
    bool cert = *wk_config_str(c, "redis.tls.cert"), key = *wk_config_str(c, "redis.tls.key");
    if (cert != key)
        return pl_errf(err, errlen, WK_CONFIG_EINVAL,
                       "configuration key '%s' needs '%s' (a client certificate goes with "
                       "its private key)",
                       cert ? "redis.tls.cert" : "redis.tls.key",
                       cert ? "redis.tls.key" : "redis.tls.cert");
    if ((tls || *wk_config_str(c, "redis.password")) && !*wk_config_str(c, "redis.addr"))
        return pl_errf(err, errlen, WK_CONFIG_EINVAL,
                       "configuration keys 'redis.tls' / 'redis.password' need 'redis.addr'");
    return 0;
}

int wk_config_validate(const wk_config *c, char *err, size_t errlen) {
    char env[256];
    int rc = 0;
    for (size_t i = 0; i < c->n_props; i++)
        if (c->props[i].type == WK_PROP_REQ && (!c->val[i] || !*c->val[i])) {
            wk_env_name(c->props[i].name, env, sizeof env);
            return pl_errf(err, errlen, WK_CONFIG_EINVAL,
                           "configuration key '%s' is required (config file, environment "
                           "%s, or --%s)",
                           c->props[i].name, env, c->props[i].name);
        }
    if (wk_prop_find(c, "worker.pause_kv_pct") < 0) goto kafka; /* not the worker's table */
    long long hi = wk_config_int(c, "worker.pause_kv_pct");
    long long lo = wk_config_int(c, "worker.resume_kv_pct");
    if (hi > 0 && lo >= hi)
        return pl_errf(err, errlen, WK_CONFIG_EINVAL,
                       "configuration key 'worker.resume_kv_pct': %lld must be below "
                       "worker.pause_kv_pct (%lld)",
                       lo, hi);
    const char *spec = wk_config_str(c, "scheduler.speculative");
    if (strcmp(spec, "off") && strcmp(spec, "ngram"))
        return pl_errf(err, errlen, WK_CONFIG_EINVAL,
                       "configuration key 'scheduler.speculative': '%s' is not one of off, ngram",
                       spec);
    if (wk_config_int(c, "scheduler.spec_ngram_min") > wk_config_int(c, "scheduler.spec_ngram_max"))
        return pl_errf(err, errlen, WK_CONFIG_EINVAL,
                       "configuration key 'scheduler.spec_ngram_min': %lld must not exceed "
                       "scheduler.spec_ngram_max (%lld)",
                       wk_config_int(c, "scheduler.spec_ngram_min"),
                       wk_config_int(c, "scheduler.spec_ngram_max"));
    rc = wk_config_check_redis(c, err, errlen);
    if (rc) return rc;
kafka:;
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    if (!conf) return pl_errf(err, errlen, WK_CONFIG_ENOMEM, "out of memory");
    char kerr[PL_ERR_LEN];
    for (size_t i = 0; i < c->n_kafka; i++) {
        const char *name = c->kafka[i].name;
        if (!strncmp(name, "consumer.", 9) || !strncmp(name, "producer.", 9)) name += 9;
        if (rd_kafka_conf_set(conf, name, c->kafka[i].val, kerr, sizeof kerr) != RD_KAFKA_CONF_OK) {
            rc = pl_errf(err, errlen, WK_CONFIG_EINVAL, "configuration key 'kafka.%s': %s",
                         c->kafka[i].name, kerr);
            break;
        }
    }
    rd_kafka_conf_destroy(conf);
    return rc;
}

static const char *wk_raw(const wk_config *c, const char *key, wk_prop_type *type) {
    int i = wk_prop_find(c, key);
    if (i < 0) return NULL;
    *type = c->props[i].type;
    return c->val[i] ? c->val[i] : c->props[i].def;
}

const char *wk_config_str(const wk_config *c, const char *key) {
    wk_prop_type t;
    const char *v = wk_raw(c, key, &t);
    return v ? v : "";
}

long long wk_config_int(const wk_config *c, const char *key) {
    wk_prop_type t;
    long long v;
    const char *s = wk_raw(c, key, &t);
    return s && t == WK_PROP_INT && wk_parse_int(s, &v) == 0 ? v : 0;
}

bool wk_config_bool(const wk_config *c, const char *key) {
    wk_prop_type t;
    bool b;
    const char *s = wk_raw(c, key, &t);
    return s && t == WK_PROP_BOOL && wk_parse_bool(s, &b) == 0 ? b : false;
}

size_t wk_config_kafka_count(const wk_config *c) { return c->n_kafka; }

void wk_config_kafka_at(const wk_config *c, size_t i, const char **name, const char **val) {
    *name = i < c->n_kafka ? c->kafka[i].name : NULL;
    *val = i < c->n_kafka ? c->kafka[i].val : NULL;
}

int wk_config_doc(FILE *f) {
    fprintf(f, "# parley worker configuration reference\n\n"
               "Generated by `parley worker --print-config-doc` from the property table in\n"
               "`consumer/wk_config.c`.\n\n"
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
               "`kafka.producer.client.id`).  A bad value stops the worker at start with a\n"
               "message naming the key (exit status 2).\n\n"
               "| key | type | default | environment | description |\n"
               "|---|---|---|---|---|\n");
    return wk_config_doc_table(f, wk_props, WK_NPROPS);
}

int wk_config_doc_table(FILE *f, const wk_prop *props, size_t n) {
    static const char *const tname[] = {"string", "integer", "boolean", "string (required)"};
    char env[256];
    for (size_t i = 0; i < n; i++) {
        const wk_prop *p = &props[i];
        char range[96] = "";
        if (p->type == WK_PROP_INT) snprintf(range, sizeof range, " %lld..%lld", p->min, p->max);
        wk_env_name(p->name, env, sizeof env);
        fprintf(f, "| `%s` | %s%s | `%s` | `%s` | %s |\n", p->name, tname[p->type], range, p->def,
                env, p->doc);
    }
    return ferror(f) ? -1 : 0;
}

/* ---- the command line of a table-configured command ---- */

/* State of the three passes of wk_config_cli over argv. */
typedef struct wk_cli_pass {
    wk_config *c;  /* the configuration being built */
    int phase;     /* 0: --help / --print-config-doc, 1: --config files, 2: flags */
    int print_doc; /* --print-config-doc was given */
} wk_cli_pass;

static int wk_cli_config(void *ctx, const cli_opt *o, const char *v, char *err, size_t errlen) {
    wk_cli_pass *p = ctx;
    return p->phase == 1 && wk_config_load_file(p->c, v, err, errlen) ? -2 : 0;
}

static int wk_cli_set(void *ctx, const cli_opt *o, const char *v, char *err, size_t errlen) {
    wk_cli_pass *p = ctx;
    return p->phase == 2 && wk_config_set_pair(p->c, v, "flag --set", err, errlen) ? -2 : 0;
}

/* --KEY value: any table key or kafka.X. */
static int wk_cli_key(void *ctx, const char *a, const char *v, char *err, size_t errlen) {
    wk_cli_pass *p = ctx;
    if (strncmp(a, "--", 2) || !v) {
        return pl_errf(err, errlen, WK_CONFIG_EINVAL, "unexpected argument '%s' (see --help)", a);
    }
    if (p->phase == 2 && wk_config_set(p->c, a + 2, v, "command line", err, errlen)) return -1;
    return 1;
}

int wk_config_cli(wk_config *c, const char *synopsis, const char *about, int argc, char **argv,
                  char *const *envp) {
    wk_cli_pass p = {c, 0, 0};
    const cli_opt opts[] = {
        {"--config", NULL, CLI_FN, NULL, 0, 0, "FILE",
         "read `key = value` lines (before the environment)", wk_cli_config},
        {"--set", NULL, CLI_FN, NULL, 0, 0, "key=value", "set one key", wk_cli_set},
        {"--print-config-doc", NULL, CLI_FLAG, &p.print_doc, 0, 0, NULL,
         "write the configuration reference (Markdown) and exit", NULL},
    };
    const cli_cmd cmd = {c->cmd, synopsis, about, opts, CLI_NOPTS(opts), NULL, 0, 0, wk_cli_key};
    char err[PL_ERR_LEN * 4]; /* as CLI_ERRLEN: messages quote config values */
    for (p.phase = 0; p.phase < 3; p.phase++) {
        if (p.phase == 2 && wk_config_load_env(c, envp, err, sizeof err) != 0)
            return cli_fail(&cmd, "%s", err);
        int pr = cli_parse(&cmd, argc, argv, &p, NULL, NULL);
        if (pr != CLI_OK) return pr;
        if (p.phase == 0 && p.print_doc) return WK_CONFIG_CLI_DOC;
    }
    if (wk_config_validate(c, err, sizeof err) != 0) return cli_fail(&cmd, "%s", err);
    return CLI_OK;
}
