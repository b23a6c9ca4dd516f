/*
 * sched_cons.c -- the fixture of the constraint, logprobs and choices tests
 * (test_sched_constraint.c, test_sched_choices.c); see sched_cons.h.
 */
#include "sched_cons.h"

#include <jansson.h>

#include "ptest.h"

eng_model *g_model;
eng_tok *g_tok;
eng_constraint_vocab *g_vocab;

eng_model *model(void) {
    if (!g_model) {
        g_model = su_model("cai-tiny", 32, 2);
        char err[256];
        if (g_model && eng_tok_load(eng_model_gguf(g_model), &g_tok, err, sizeof err) != 0)
            fprintf(stderr, "  tok: %s\n", err);
        if (g_tok && eng_constraint_available() &&
            eng_constraint_vocab_new(g_tok, NV, &g_vocab, err, sizeof err) != 0)
            fprintf(stderr, "  vocab: %s\n", err);
    }
    return g_model;
}

/* 1 when constraint tests can run; under CI=true a build without
 * llguidance fails instead. */
int have_llg(void) {
    if (eng_constraint_available()) return model() && g_vocab;
    const char *ci = getenv("CI");
    if (ci && !strcmp(ci, "true")) PT_FAIL("llguidance missing under CI=true");
    return 0;
}

/* A scheduler with the constraint vocabulary. */
eng_sched *mk(int spec, eng_sched_draft_fn fn, void *ctx, int64_t budget_us, size_t kv_budget) {
    eng_sched_config cfg;
    eng_sched_config_default(&cfg);
    cfg.max_running = 16;
    cfg.speculative = spec;
    cfg.draft_fn = fn;
    cfg.draft_ctx = ctx;
    cfg.batch_window_us = 20000;
    cfg.constraint_vocab = g_vocab;
    cfg.mask_budget_us = budget_us;
    if (kv_budget) {
        cfg.kv_budget_bytes = kv_budget;
        cfg.local_share = 1.0;
        cfg.step_tokens = 64;
    }
    eng_sched *s = NULL;
    char err[256];
    if (eng_sched_create(model(), &cfg, NULL, &s, err, sizeof err) != 0)
        fprintf(stderr, "  create: %s\n", err);
    return s;
}

int mk_prompt(int32_t *p, int i) {
    int n = 12 + 5 * (i % 8); /* <= 47 */
    su_tokens(p, n, NV, 900 + (uint64_t)i);
    return n;
}

void req_init(eng_sched_request *q, const int32_t *p, int np, int max_tokens) {
    memset(q, 0, sizeof *q);
    q->prompt = p;
    q->n_prompt = np;
    eng_sampler_params_default(&q->sampling);
    q->max_tokens = max_tokens;
}

void set_cons(eng_sched_request *q, eng_constraint_kind k, const char *text) {
    q->constraint.kind = k;
    q->constraint.text = text;
    q->constraint.len = text ? strlen(text) : 0;
}

/* Run one request to completion into r (allocated by the caller). */
void run1(eng_sched *s, eng_sched_request *q, sr_req *r) {
    char err[256];
    sr_bind(r, q);
    q->want_logits = r->n_vocab > 0;
    int rc = eng_sched_submit(s, q, &r->id, err, sizeof err);
    if (rc) fprintf(stderr, "  submit: %s\n", err);
    PT_EQ_INT(rc, 0);
    PT_EQ_INT(sr_wait(r, 60000), 0);
    PT_ASSERT(r->order_ok && !r->bad_choice && !r->tokens_after_done);
}

sr_req *sr_new(int n_vocab) {
    sr_req *r = malloc(sizeof *r);
    sr_init(r, n_vocab);
    return r;
}

void sr_del(sr_req *r) {
    sr_free(r);
    free(r);
}

/* Decoded text of choice c's result. */
char *text_of(const sr_req *r, int c) {
    static char buf[8192];
    size_t n = 0;
    if (eng_tok_decode(g_tok, r->rt[c], r->rn[c], 0, buf, sizeof buf, &n, NULL, 0) != 0) return "";
    buf[n < sizeof buf ? n : sizeof buf - 1] = 0;
    return buf;
}


const char *const k_schemas[K_SCHEMAS] = {
    "{\"type\":\"object\",\"properties\":{\"ok\":{\"type\":\"boolean\"},"
    "\"color\":{\"enum\":[\"red\",\"green\",\"blue\"]},"
    "\"n\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":99}},"
    "\"required\":[\"ok\",\"color\",\"n\"],\"additionalProperties\":false}",
    "{\"type\":\"array\",\"items\":{\"type\":\"boolean\"},\"minItems\":2,\"maxItems\":3}",
    "{\"type\":\"object\",\"properties\":{\"tag\":{\"type\":\"string\",\"pattern\":\"^[a-c]{2}$\"},"
    "\"pair\":{\"type\":\"array\",\"prefixItems\":[{\"const\":1},{\"enum\":[\"x\",\"y\"]}],"
    "\"items\":false}},\"required\":[\"tag\",\"pair\"],\"additionalProperties\":false}",
    "{\"anyOf\":[{\"type\":\"null\"},{\"type\":\"object\",\"properties\":{\"v\":{\"enum\":[1,2]}},"
    "\"required\":[\"v\"],\"additionalProperties\":false}]}",
};

int schema_ok(int i, const char *text, char *why, size_t n) {
    json_error_t je;
    json_t *j = json_loads(text, JSON_DECODE_ANY, &je);
    if (!j) return snprintf(why, n, "not JSON: %s", je.text), 0;
    int ok = 0;
    switch (i) {
    case 0: {
        json_t *okv = json_object_get(j, "ok"), *c = json_object_get(j, "color"),
               *nv = json_object_get(j, "n");
        const char *cs = c ? json_string_value(c) : NULL;
        ok = json_is_object(j) && json_object_size(j) == 3 && json_is_boolean(okv) && cs &&
             (!strcmp(cs, "red") || !strcmp(cs, "green") || !strcmp(cs, "blue")) &&
             json_is_integer(nv) && json_integer_value(nv) >= 0 && json_integer_value(nv) <= 99;
        break;
    }
    case 1:
        ok = json_is_array(j) && json_array_size(j) >= 2 && json_array_size(j) <= 3;
        for (size_t k = 0; ok && k < json_array_size(j); k++)
            ok = json_is_boolean(json_array_get(j, k));
        break;
    case 2: {
        json_t *tag = json_object_get(j, "tag"), *pair = json_object_get(j, "pair");
        const char *ts = tag ? json_string_value(tag) : NULL;
        /* prefixItems does not make its items required: [] and [1] validate */
        size_t np = json_is_array(pair) ? json_array_size(pair) : 99;
        ok = json_is_object(j) && json_object_size(j) == 2 && ts && strlen(ts) == 2 &&
             strspn(ts, "abc") == 2 && np <= 2 &&
             (np < 1 || json_integer_value(json_array_get(pair, 0)) == 1) &&
             (np < 2 || json_is_string(json_array_get(pair, 1)));
        break;
    }
    case 3:
        ok = json_is_null(j) || (json_is_object(j) && json_object_size(j) == 1 &&
                                 (json_integer_value(json_object_get(j, "v")) == 1 ||
                                  json_integer_value(json_object_get(j, "v")) == 2));
        break;
    }
    if (!ok) snprintf(why, n, "does not validate");
    json_decref(j);
    return ok;
}

void sc_cleanup(void) {
    eng_constraint_vocab_free(g_vocab);
    eng_tok_free(g_tok);
    eng_model_free(g_model);
    g_vocab = NULL;
    g_tok = NULL;
    g_model = NULL;
}
