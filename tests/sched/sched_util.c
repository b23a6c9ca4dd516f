/*
 * sched_util.c -- see sched_util.h.
 */
#include "sched_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "eng_mkmodel.h"
#include "pl_time.h"

eng_model *su_model(const char *preset, int window, int threads) {
    char dir[] = "/tmp/parley-sched-XXXXXX";
    if (!mkdtemp(dir)) return NULL;
    char path[256], err[256];
    snprintf(path, sizeof path, "%s/model.gguf", dir);
    eng_mkmodel_opts mo;
    eng_mkmodel_opts_default(&mo);
    mo.preset = preset;
    mo.out = path;
    mo.window = window > 0 ? window : 0;
    eng_model *m = NULL;
    if (eng_mkmodel(&mo, err, sizeof err) != 0) {
        fprintf(stderr, "su_model: %s\n", err);
    } else {
        eng_load_opts o = {.prec = ENG_PREC_INT8, .n_threads = threads, .block_tokens = 16};
        if (eng_model_load(path, &o, &m, err, sizeof err) != 0) {
            fprintf(stderr, "su_model: %s\n", err);
            m = NULL;
        }
    }
    unlink(path);
    rmdir(dir);
    return m;
}

static void su_on_token(void *user, uint64_t id, const eng_sched_token *ev) {
    su_req *q = user;
    int32_t tok = ev->token;
    int index = ev->index;
    const float *logits = ev->logits;
    su_coll *c = q->coll;
    pthread_mutex_lock(&c->mu);
    if (q->done) q->tokens_after_done++;
    if (index != q->n_tokens || id != q->id) q->order_ok = 0;
    if (q->n_tokens < SU_MAX_TOK) {
        if (c->n_vocab && logits && q->logits)
            memcpy(q->logits + (size_t)q->n_tokens * c->n_vocab, logits,
                   (size_t)c->n_vocab * sizeof(float));
        q->tokens[q->n_tokens++] = tok;
    }
    pthread_mutex_unlock(&c->mu);
}

static void su_on_done(void *user, uint64_t id, const eng_sched_result *r) {
    su_req *q = user;
    su_coll *c = q->coll;
    pthread_mutex_lock(&c->mu);
    q->res = *r;
    q->res.tokens = NULL;
    q->res.error = NULL;
    int n = r->n_tokens < SU_MAX_TOK ? r->n_tokens : SU_MAX_TOK;
    if (n) memcpy(q->res_tokens, r->tokens, (size_t)n * sizeof(int32_t));
    if (r->finish == ENG_SCHED_ERROR)
        fprintf(stderr, "  request %llu error: %s\n", (unsigned long long)id, r->error);
    q->done++;
    c->n_done++;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

void su_coll_init(su_coll *c, int n, int n_vocab) {
    memset(c, 0, sizeof *c);
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    c->reqs = calloc((size_t)n, sizeof *c->reqs);
    c->n = n;
    c->n_vocab = n_vocab;
    for (int i = 0; i < n; i++) {
        c->reqs[i].coll = c;
        c->reqs[i].order_ok = 1;
        if (n_vocab) c->reqs[i].logits = calloc((size_t)n_vocab * SU_MAX_TOK, sizeof(float));
    }
}

void su_coll_free(su_coll *c) {
    for (int i = 0; i < c->n; i++) free(c->reqs[i].logits);
    free(c->reqs);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
}

void su_request(su_coll *c, int i, eng_sched_request *r, const int32_t *prompt, int n_prompt,
                int max_tokens) {
    memset(r, 0, sizeof *r);
    r->prompt = prompt;
    r->n_prompt = n_prompt;
    eng_sampler_params_default(&r->sampling);
    r->max_tokens = max_tokens;
    r->want_logits = c->n_vocab > 0;
    r->on_token = su_on_token;
    r->on_done = su_on_done;
    r->user = &c->reqs[i];
}

int su_wait(su_coll *c, int n, int timeout_ms) {
    struct timespec ts = pl_deadline_ts(timeout_ms);
    int rc = 0;
    pthread_mutex_lock(&c->mu);
    while (c->n_done < n && rc == 0) rc = pthread_cond_timedwait(&c->cv, &c->mu, &ts);
    int ok = c->n_done >= n;
    pthread_mutex_unlock(&c->mu);
    return ok ? 0 : -1;
}

void su_tokens(int32_t *t, int n, int n_vocab, uint64_t seed) {
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    for (int i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        t[i] = (int32_t)(1 + x % (uint64_t)(n_vocab - 1));
    }
}

int su_run_one(eng_sched *s, const int32_t *prompt, int n, int max_tokens, const char *ns,
               su_req *out) {
    su_coll c;
    su_coll_init(&c, 1, 0);
    eng_sched_request r;
    su_request(&c, 0, &r, prompt, n, max_tokens);
    r.ns = ns;
    r.ns_len = strlen(ns);
    char err[256];
    int rc = eng_sched_submit(s, &r, &c.reqs[0].id, err, sizeof err);
    if (rc == 0) rc = su_wait(&c, 1, 30000);
    *out = c.reqs[0];
    out->logits = NULL;
    su_coll_free(&c);
    return rc;
}
