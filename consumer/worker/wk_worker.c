/*
 * wk_worker.c -- building and tearing down a worker: model, tokenizer and
 * chat template, prefix cache, scheduler, and the three Kafka handles
 * (made in wk_kafka.c).  The poll loop and rebalances are in wk_loop.c,
 * transactions and producer recovery in wk_txn.c.
 */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kv_hash.h"
#include "pl_err.h"
#include "kv_sched_ops.h"
#include "wk_internal.h"
#include "wk_status.h"
#include "wk_worker.h"
#include "pl_hash.h"
#include "pl_time.h"

static bool wk_user_sets(const cm_config *cfg, const char *name) {
    for (size_t i = 0; i < cm_config_kafka_count(cfg); i++) {
        const char *k, *v;
        cm_config_kafka_at(cfg, i, &k, &v);
        if (!strcmp(k, name)) return true;
    }
    return false;
}

static void wk_kv_invalidate(void *model, const void *blk) { eng_model_kv_invalidate(model, blk); }

static int wk_setup_model(wk_worker *w, char *err, size_t errlen) {
    const cm_config *cfg = w->cfg;
    char e[512];
    eng_load_opts lo = {.prec = ENG_PREC_INT8,
                        .n_threads = (int)cm_config_int(cfg, "model.threads"),
                        .block_tokens = (int)cm_config_int(cfg, "model.block_tokens")};
    /* in the order of the table's values (wk_config.c), which were checked there */
    static const eng_backend_kind backends[] = {ENG_BACKEND_AUTO, ENG_BACKEND_CPU,
                                                ENG_BACKEND_CUDA};
    static const eng_weights weights[] = {ENG_WEIGHTS_NATIVE, ENG_WEIGHTS_INT8};
    lo.backend = backends[cm_config_enum(cfg, "model.backend")];
    lo.weights = weights[cm_config_enum(cfg, "model.weights")];
    const char *path = cm_config_str(cfg, "model.path");
    if (eng_model_load(path, &lo, &w->eng.model, e, sizeof e) != 0)
        return pl_errf(err, errlen, WK_EMODEL, "model.path %s: %s", path, e);
    if (eng_tok_load(eng_model_gguf(w->eng.model), &w->eng.tok, e, sizeof e) != 0)
        return pl_errf(err, errlen, WK_EMODEL, "model.path %s: tokenizer: %s", path, e);
    const char *tmpl = cm_config_str(cfg, "model.chat_template");
    eng_tmpl_choice tc;
    if (eng_tmpl_choose(eng_model_gguf(w->eng.model), w->eng.tok, *tmpl ? tmpl : NULL, &tc, e,
                        sizeof e))
        return pl_errf(err, errlen, WK_EMODEL, "model.chat_template: %s", e);
    w->eng.fmt = tc.fmt;
    w->eng.family = tc.family;
    w->eng.tfile = tc.file; /* owned by the worker from here */
    if (tc.note[0])
        wk_log("warn", "chat_template_refused",
               "model=%s err=\"%s\" fallback=%s (the file's tokenizer.chat_template is outside "
               "the Jinja subset; its built-in/architecture format renders instead)",
               path, tc.note, eng_tmpl_name(tc.fmt));
    const eng_config *mc = eng_model_config(w->eng.model);
    w->eng.n_vocab = mc->n_vocab;
    long long mx = cm_config_int(cfg, "model.max_context");
    w->eng.n_ctx = mx > 0 ? (int)mx : mc->n_ctx_train > 0 ? mc->n_ctx_train : 4096;
    w->eng.n_eog = eng_tok_eog_ids(w->eng.tok, w->eng.eog, WK_MAX_EOG);
    /* the template's own end of turn ends every turn, whatever the client
     * sends: its closing token as an end of generation, its text as a stop */
    eng_tmpl_turn_end te =
        w->eng.tfile ? eng_tmpl_file_end_of_turn(w->eng.tfile) : eng_tmpl_end_of_turn(w->eng.fmt);
    int32_t te_id = te.token ? eng_tok_find(w->eng.tok, te.token, strlen(te.token)) : -1;
    int have = 0;
    for (int i = 0; i < w->eng.n_eog; i++) have |= w->eng.eog[i] == te_id;
    if (te_id >= 0 && !have && w->eng.n_eog < WK_MAX_EOG) w->eng.eog[w->eng.n_eog++] = te_id;
    w->eng.turn_stop = te.text;
    const char *name = cm_config_str(cfg, "model.name");
    if (!*name) {
        const char *b = strrchr(path, '/');
        b = b ? b + 1 : path;
        size_t n = strlen(b);
        if (n > 5 && !strcmp(b + n - 5, ".gguf")) n -= 5;
        snprintf(w->eng.model_name, sizeof w->eng.model_name, "%.*s", (int)n, b);
    } else {
        snprintf(w->eng.model_name, sizeof w->eng.model_name, "%s", name);
    }
    w->eng.dscratch_cap = eng_tok_stream_cap(w->eng.tok);
    w->eng.dscratch = malloc(w->eng.dscratch_cap);
    return w->eng.dscratch ? 0 : pl_errf(err, errlen, WK_ENOMEM, "out of memory");
}

/* kv_cache_config.log: the Redis tier's rate-limited reports. */
static void wk_redis_log(void *ctx, const char *msg) {
    (void)ctx;
    wk_log(strstr(msg, "available again") ? "info" : "warn", "redis", "msg=\"%s\"", msg);
}

/* Empty string -> NULL (kv_cache_config's "not set"). */
static const char *wk_opt(const cm_config *cfg, const char *key) {
    const char *v = cm_config_str(cfg, key);
    return *v ? v : NULL;
}

/* scheduler.tenant_weights: "NS=W,NS=W" (W a number > 0) into w->eng.tw.
 * Returns 0 or -1 with a message. */
static int wk_tenant_weights(wk_worker *w, const char *v, char *err, size_t errlen) {
    if (!v || !*v) return 0;
    size_t n = 1;
    for (const char *p = v; *p; p++) n += *p == ',';
    w->eng.tw_text = strdup(v);
    w->eng.tw = calloc(n, sizeof *w->eng.tw);
    if (!w->eng.tw_text || !w->eng.tw) return pl_errf(err, errlen, WK_ENOMEM, "out of memory");
    char *save = NULL;
    for (char *item = strtok_r(w->eng.tw_text, ",", &save); item;
         item = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(item, '='), *end = NULL;
        double wt = eq ? strtod(eq + 1, &end) : 0;
        size_t len = eq ? (size_t)(eq - item) : strlen(item);
        int ok = eq && len > 0 && len <= ENG_SCHED_NS_MAX && end && end != eq + 1 && !*end &&
                 wt > 0 && wt <= 1e6;
        for (size_t i = 0; ok && i < len; i++)
            ok = isalnum((unsigned char)item[i]) || strchr("._-", item[i]) != NULL;
        if (!ok)
            return pl_errf(err, errlen, WK_EINVAL,
                           "'%.100s': want NAMESPACE=WEIGHT, a weight in (0, 1e6], separated "
                           "by commas",
                           item);
        *eq = 0; /* the name ends there */
        w->eng.tw[w->eng.n_tw].ns = item;
        w->eng.tw[w->eng.n_tw++].weight = wt;
    }
    return 0;
}

static int wk_setup_sched(wk_worker *w, char *err, size_t errlen) {
    const cm_config *cfg = w->cfg;
    char e[512];
    if (cm_config_bool(cfg, "cache.enabled")) {
        kv_cache_config kc;
        kv_cache_config_default(&kc);
        kc.budget_bytes = (size_t)cm_config_int(cfg, "cache.budget_mib") << 20;
        kc.max_tokens = w->eng.n_ctx;
        kc.partial_blocks = cm_config_bool(cfg, "cache.partial_blocks");
        kc.cmd_timeout_ms = (int)cm_config_int(cfg, "redis.timeout_ms");
        kc.ttl_s = (int)cm_config_int(cfg, "redis.ttl_s");
        char host[256] = "";
        const char *addr = cm_config_str(cfg, "redis.addr");
        if (*addr) {
            const char *colon = strrchr(addr, ':');
            long port = colon ? strtol(colon + 1, NULL, 10) : 0;
            if (!colon || colon == addr || port <= 0 || port > 65535 ||
                (size_t)(colon - addr) >= sizeof host)
                return pl_errf(err, errlen, WK_EINVAL,
                               "configuration key 'redis.addr': '%s' is not host:port", addr);
            memcpy(host, addr, (size_t)(colon - addr));
            kc.redis_host = host;
            kc.redis_port = (int)port;
            kc.redis_user = wk_opt(cfg, "redis.user");
            kc.redis_password = wk_opt(cfg, "redis.password");
            kc.redis_tls = cm_config_bool(cfg, "redis.tls");
            kc.redis_tls_ca = wk_opt(cfg, "redis.tls.ca");
            kc.redis_tls_cert = wk_opt(cfg, "redis.tls.cert");
            kc.redis_tls_key = wk_opt(cfg, "redis.tls.key");
            kc.redis_tls_server_name = wk_opt(cfg, "redis.tls.server_name");
            kc.log = wk_redis_log;
            w->convs.handoff = 1;
        }
        /* Tokenizer identity: FNV-1a over the vocabulary texts. */
        uint64_t th = PL_FNV64_SEED;
        for (int32_t i = 0; i < w->eng.n_vocab; i++) {
            const char *p = eng_tok_text(w->eng.tok, i);
            if (p) th = pl_fnv1a64_str(th, p);
        }
        char tid[32];
        snprintf(tid, sizeof tid, "%016llx", (unsigned long long)th);
        kv_fp_inputs fi = {eng_model_config(w->eng.model)->arch_name,
                           eng_model_digest(w->eng.model), tid, ENG_KV_QUANT_VERSION,
                           (uint32_t)cm_config_int(cfg, "model.block_tokens")};
        if (kv_cache_create(&kc, eng_model_kv_layout(w->eng.model), kv_fingerprint(&fi),
                            &w->eng.cache, e, sizeof e) != 0)
            return pl_errf(err, errlen, WK_EINVAL, "cache: %s", e);
        kv_sched_ops_init(&w->eng.ops, w->eng.cache);
        /* a device KV tier drops its copy of a block the pool hands out anew */
        kv_cache_set_alloc_hook(w->eng.cache, wk_kv_invalidate, w->eng.model);
    }
    eng_sched_config sc;
    eng_sched_config_default(&sc);
    sc.max_running = (int)cm_config_int(cfg, "scheduler.max_running");
    w->eng.max_running = sc.max_running;
    sc.step_tokens = (int)cm_config_int(cfg, "scheduler.step_tokens");
    sc.batch_window_us = (int)cm_config_int(cfg, "scheduler.batch_window_us");
    sc.fairness_ms = (int)cm_config_int(cfg, "scheduler.fairness_ms");
    sc.prefetch_wait_ms = (int)cm_config_int(cfg, "scheduler.prefetch_wait_ms");
    sc.kv_budget_bytes = (size_t)cm_config_int(cfg, "scheduler.kv_budget_mib") << 20;
    /* the table's values: ngram, off */
    sc.speculative =
        cm_config_enum(cfg, "scheduler.speculative") ? ENG_SCHED_SPEC_OFF : ENG_SCHED_SPEC_NGRAM;
    sc.spec_tokens = (int)cm_config_int(cfg, "scheduler.spec_tokens");
    sc.spec_max_batch_tokens = (int)cm_config_int(cfg, "scheduler.spec_max_batch_tokens");
    sc.spec_ngram_min = (int)cm_config_int(cfg, "scheduler.spec_ngram_min");
    sc.spec_ngram_max = (int)cm_config_int(cfg, "scheduler.spec_ngram_max");
    if (!cm_config_bool(cfg, "scheduler.constraints")) {
        snprintf(w->eng.cvocab_why, sizeof w->eng.cvocab_why,
                 "this worker runs with scheduler.constraints=false");
    } else if (eng_constraint_vocab_new(w->eng.tok, w->eng.n_vocab, &w->eng.cvocab, e, sizeof e)) {
        /* a build without llguidance: constrained turns are refused, the rest served */
        snprintf(w->eng.cvocab_why, sizeof w->eng.cvocab_why, "constraints unavailable: %.200s", e);
        wk_log("warn", "constraints_off", "err=\"%s\"", e);
    }
    sc.constraint_vocab = w->eng.cvocab;
    sc.mask_threads = (int)cm_config_int(cfg, "scheduler.mask_threads");
    sc.mask_budget_us = cm_config_int(cfg, "scheduler.mask_budget_ms") * 1000;
    if (wk_tenant_weights(w, cm_config_str(cfg, "scheduler.tenant_weights"), e, sizeof e))
        return pl_errf(err, errlen, WK_EINVAL, "scheduler.tenant_weights: %s", e);
    sc.tenant_weights = w->eng.tw;
    sc.n_tenant_weights = w->eng.n_tw;
    sc.class_preempt = cm_config_bool(cfg, "scheduler.class_preempt");
    sc.bulk_min_share = (double)cm_config_int(cfg, "scheduler.bulk_min_share_pct") / 100.0;
    sc.bulk_step_tokens = (int)cm_config_int(cfg, "scheduler.bulk_step_tokens");
    sc.bulk_decode_seqs = (int)cm_config_int(cfg, "scheduler.bulk_decode_seqs");
    long long mi = cm_config_int(cfg, "worker.max_inflight");
    sc.max_queue = mi + 16 > 1 << 30 ? 1 << 30 : (int)(mi + 16);
    if (eng_sched_create(w->eng.model, &sc, w->eng.cache ? &w->eng.ops : NULL, &w->eng.sched, e,
                         sizeof e))
        return pl_errf(err, errlen, WK_EINVAL, "scheduler: %s", e);
    return 0;
}


/* worker.namespace_from / worker.namespace. */
static int wk_setup_namespace(wk_worker *w, char *err, size_t errlen) {
    /* the table's values field, header, topic, fixed, in wk_ns_from's order */
    int mode = cm_config_enum(w->cfg, "worker.namespace_from");
    w->ns_from = (wk_ns_from)mode;
    w->ns_fixed = cm_config_str(w->cfg, "worker.namespace");
    size_t n = strlen(w->ns_fixed);
    if (mode == WK_NS_FIXED && (!n || n > ENG_SCHED_NS_MAX))
        return pl_errf(err, errlen, WK_EINVAL,
                       "configuration key 'worker.namespace' must be "
                       "1..%d bytes with worker.namespace_from=fixed",
                       ENG_SCHED_NS_MAX);
    if (mode == WK_NS_TOPIC &&
        strlen(cm_config_str(w->cfg, "worker.topic.turns")) > ENG_SCHED_NS_MAX)
        return pl_errf(err, errlen, WK_EINVAL,
                       "worker.namespace_from=topic: the turns topic "
                       "name is longer than a namespace (%d bytes)",
                       ENG_SCHED_NS_MAX);
    return 0;
}

int wk_worker_create(const cm_config *cfg, wk_worker **out, char *err, size_t errlen) {
    *out = NULL;
    if (!wk_user_sets(cfg, "bootstrap.servers"))
        return pl_errf(err, errlen, WK_EINVAL,
                       "configuration key 'kafka.bootstrap.servers' is required");
    wk_worker *w = calloc(1, sizeof *w);
    if (!w) return pl_errf(err, errlen, WK_ENOMEM, "out of memory");
    pthread_mutex_init(&w->convs.mu, NULL);
    pthread_mutex_init(&w->met.lag_mu, NULL);
    pthread_mutex_init(&w->prod.chp_mu, NULL);
    w->cfg = cfg;
    w->convs.hist_max = (size_t)cm_config_int(cfg, "worker.history_mib") << 20;
    const char *inj = getenv("PARLEY_TEST_CHUNK_FATAL_AFTER"); /* fault injection for tests */
    if (inj) w->prod.test_fatal_at = strtol(inj, NULL, 10);
    if ((inj = getenv("PARLEY_TEST_TXN_FATAL_AFTER"))) {
        char *end;
        w->txn.test_fatal_at = strtol(inj, &end, 10);
        w->txn.test_fatal_landed = !strcmp(end, ":landed");
    }
    w->txn.test_rebuild_hold_file = getenv("PARLEY_TEST_REBUILD_HOLD_FILE");
    if ((inj = getenv("PARLEY_TEST_TXN_HOLD"))) { /* AFTER:MS */
        char *end;
        w->txn.test_hold_after = strtol(inj, &end, 10);
        if (*end == ':') w->txn.test_hold_ms = strtoll(end + 1, NULL, 10);
    }
    const char *id = cm_config_str(cfg, "worker.id");
    if (*id) {
        snprintf(w->id, sizeof w->id, "%s", id);
    } else {
        char host[64] = "host";
        gethostname(host, sizeof host - 1);
        host[sizeof host - 1] = 0;
        snprintf(w->id, sizeof w->id, "%s-%d", host, (int)getpid());
    }
    w->topics.turns = cm_config_str(cfg, "worker.topic.turns");
    w->topics.tokens = cm_config_str(cfg, "worker.topic.tokens");
    w->topics.resp = cm_config_str(cfg, "worker.topic.responses");
    w->topics.dlq = cm_config_str(cfg, "worker.topic.dlq");
    w->chunk_tokens = (int)cm_config_int(cfg, "worker.chunk_tokens");
    sch_limits_default(&w->eng.lim);
    /* Attempt ids: a per-process base from the clock, pid and id, plus a
     * counter, so every processing attempt of any turn gets its own id. */
    uint64_t h =
        (uint64_t)eng_sched_now_us() ^ ((uint64_t)getpid() << 40) ^ ((uint64_t)pl_unix_ms() << 20);
    h = pl_fnv1a64_str(h, w->id);
    h ^= h >> 31;
    w->convs.attempt_base = (h & 0x7fffffffffffffffull) & ~0xffffffull;
    int rc = 0;
    if (wk_offsets_new(&w->batch.offs) != 0) rc = pl_errf(err, errlen, WK_ENOMEM, "out of memory");
    const char *hold = getenv("PARLEY_TEST_ENGINE_HOLD");
    if (!rc && hold && wk_test_hold_parse(w, hold) != 0)
        rc = pl_errf(err, errlen, WK_EINVAL,
                     "PARLEY_TEST_ENGINE_HOLD '%.100s': want kv_pause:PATH or chunk:PATH", hold);
    if (!rc) rc = wk_setup_namespace(w, err, errlen);
    if (!rc) rc = wk_setup_model(w, err, errlen);
    if (!rc) rc = wk_setup_sched(w, err, errlen);
    if (!rc) rc = wk_kafka_setup(w, err, errlen);
    const char *http = cm_config_str(cfg, "worker.http");
    if (!rc && *http) rc = wk_http_start(w, http, &w->met.http, err, errlen);
    if (!rc) rc = wk_status_start(w, &w->met.status, err, errlen);
    if (rc) {
        wk_worker_free(w);
        return rc;
    }
    wk_log("info", "worker_ready",
           "worker=%s model=%s template=%s family=%s n_ctx=%d cache=%s redis=\"%s\" redis_tls=%s "
           "redis_auth=%s turns=%s",
           w->id, w->eng.model_name, eng_tmpl_name(w->eng.fmt), eng_tmpl_name(w->eng.family),
           w->eng.n_ctx, w->eng.cache ? "on" : "off", cm_config_str(cfg, "redis.addr"),
           cm_config_bool(cfg, "redis.tls") ? "on" : "off",
           !*cm_config_str(cfg, "redis.password") ? "none"
           : *cm_config_str(cfg, "redis.user")    ? "user"
                                                  : "password",
           w->topics.turns);
    *out = w;
    return 0;
}

void wk_worker_stop(wk_worker *w, int fast) {
    if (fast) w->halt.stop_fast = 1;
    w->halt.stop_req = 1;
}

void wk_worker_free(wk_worker *w) {
    if (!w) return;
    w->halt.stop_fast = 1;
    wk_status_stop(w->met.status);
    wk_http_stop(w->met.http);
    if (w->cons) {
        rd_kafka_consumer_close(w->cons);
        rd_kafka_destroy(w->cons);
    }
    eng_sched_free(w->eng.sched); /* cancels and delivers every callback */
    eng_constraint_vocab_free(w->eng.cvocab);
    free(w->eng.tw);
    free(w->eng.tw_text);
    for (wk_turn *t = w->convs.done_head, *n; t; t = n) {
        n = t->dnext;
        if (!t->conv) wk_turn_free(t); /* else owned by its conversation queue */
    }
    wk_conv_free_all(w);
    wk_cancel_free(w);        /* cancels remembered for turns not seen */
    wk_batch_free(&w->batch); /* outputs, offsets, partition arrays */
    if (w->prod.chp) {
        rd_kafka_flush(w->prod.chp, 5000);
        rd_kafka_destroy(w->prod.chp);
    }
    if (w->prod.txp) rd_kafka_destroy(w->prod.txp);
    if (w->eng.cache) kv_cache_destroy(w->eng.cache);
    eng_tmpl_file_free(w->eng.tfile); /* renders through w->eng.tok: freed first */
    eng_tok_free(w->eng.tok);
    eng_model_free(w->eng.model);
    free(w->eng.dscratch);
    free(w->met.lag);
    pthread_mutex_destroy(&w->prod.chp_mu);
    pthread_mutex_destroy(&w->met.lag_mu);
    pthread_mutex_destroy(&w->convs.mu);
    free(w);
}
