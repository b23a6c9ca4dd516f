/*
 * test_constraint_gemma.c -- constrained decoding on the real model,
 * Gemma 3 270M Q4_K_M (deploy/setup.sh model; $PARLEY_GEMMA_MODEL
 * overrides the path), label slow.  Without the model (or llguidance) the
 * program exits 77, which ctest reports as skipped -- except under
 * CI=true, where that is a failure.
 *
 *   schemas_greedy_and_sampled  six JSON schemas (nested objects, arrays
 *                               with bounds, enums, anyOf, string patterns,
 *                               numbers with bounds, additionalProperties
 *                               false), greedy and at temperature 1: every
 *                               reply that finished with stop parses and
 *                               validates; how many hit length is printed
 *   spec_equals_plain           greedy with drafting == without, token for
 *                               token, with a constraint
 *   choices_share_prompt        n = 3 constrained choices: the prompt
 *                               prefilled once, every choice valid
 *   logprobs_constrained        logprobs of a constrained reply: allowed
 *                               tokens only, sorted, exp sums to <= 1
 */
#define PTEST_MAIN
#include "ptest.h"

#include <jansson.h>

#include "eng_constraint.h"
#include "eng_tok.h"
#include "sched_rec.h"

static eng_model *g_model;
static eng_tok *g_tok;
static eng_constraint_vocab *g_vocab;
static int32_t g_eog[64];
static int g_n_eog;

static eng_model *model(void) {
    if (g_model) return g_model;
    const char *path = getenv("PARLEY_GEMMA_MODEL");
    char def[512], err[256];
    if (!path) {
        snprintf(def, sizeof def, "%s/.cache/parley/models/gemma-3-270m-q4_k_m.gguf",
                 getenv("HOME") ? getenv("HOME") : ".");
        path = def;
    }
    eng_load_opts o = {.prec = ENG_PREC_INT8, .n_threads = 2, .block_tokens = 16};
    if (eng_model_load(path, &o, &g_model, err, sizeof err) != 0) {
        fprintf(stderr, "  model %s: %s\n", path, err);
        return NULL;
    }
    if (eng_tok_load(eng_model_gguf(g_model), &g_tok, err, sizeof err) != 0 ||
        eng_constraint_vocab_new(g_tok, eng_model_config(g_model)->n_vocab, &g_vocab, err,
                                 sizeof err) != 0) {
        fprintf(stderr, "  %s\n", err);
        return NULL;
    }
    g_n_eog = eng_tok_eog_ids(g_tok, g_eog, 64);
    return g_model;
}

static eng_sched *mk(int spec) {
    eng_sched_config cfg;
    eng_sched_config_default(&cfg);
    cfg.speculative = spec;
    cfg.constraint_vocab = g_vocab;
    cfg.batch_window_us = 20000;
    eng_sched *s = NULL;
    char err[256];
    if (eng_sched_create(model(), &cfg, NULL, &s, err, sizeof err) != 0)
        fprintf(stderr, "  create: %s\n", err);
    return s;
}

static int encode(const char *text, int32_t *ids, int cap) {
    int n = 0;
    int flags = eng_tok_add_bos(g_tok) ? ENG_TOK_ADD_BOS : 0;
    if (eng_tok_encode(g_tok, text, strlen(text), flags, ids, cap, &n, NULL, 0) != 0) return 0;
    return n;
}

static const char *text_of(const sr_req *r, int c) {
    static char buf[16384];
    size_t n = 0;
    if (eng_tok_decode(g_tok, r->rt[c], r->rn[c], 0, buf, sizeof buf - 1, &n, NULL, 0) != 0)
        return "";
    buf[n] = 0;
    return buf;
}

static const struct {
    const char *prompt, *schema;
} k_cases[] = {
    {"A person record in JSON:",
     "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":24},"
     "\"age\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":120}},"
     "\"required\":[\"name\",\"age\"],\"additionalProperties\":false}"},
    {"Three colours as a JSON array:",
     "{\"type\":\"array\",\"items\":{\"enum\":[\"red\",\"green\",\"blue\",\"black\"]},"
     "\"minItems\":1,\"maxItems\":3}"},
    {"An order in JSON:",
     "{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"string\",\"pattern\":"
     "\"^[A-Z]{2}[0-9]{3}$\"},\"items\":{\"type\":\"array\",\"items\":{\"type\":\"object\","
     "\"properties\":{\"sku\":{\"type\":\"string\",\"maxLength\":8},\"qty\":{\"type\":"
     "\"integer\",\"minimum\":1,\"maximum\":9}},\"required\":[\"sku\",\"qty\"],"
     "\"additionalProperties\":false},\"maxItems\":2}},\"required\":[\"id\",\"items\"],"
     "\"additionalProperties\":false}"},
    {"The answer, as JSON:",
     "{\"anyOf\":[{\"type\":\"object\",\"properties\":{\"ok\":{\"const\":true}},\"required\":"
     "[\"ok\"],\"additionalProperties\":false},{\"type\":\"object\",\"properties\":{\"error\":"
     "{\"type\":\"string\",\"maxLength\":30}},\"required\":[\"error\"],"
     "\"additionalProperties\":false}]}"},
    {"A measurement in JSON:",
     "{\"type\":\"object\",\"properties\":{\"value\":{\"type\":\"number\",\"minimum\":-10,"
     "\"maximum\":10},\"unit\":{\"enum\":[\"m\",\"s\",\"kg\"]}},\"required\":[\"value\","
     "\"unit\"],\"additionalProperties\":false}"},
    {"A tagged note in JSON:",
     "{\"type\":\"object\",\"properties\":{\"note\":{\"type\":\"string\",\"minLength\":1,"
     "\"maxLength\":40},\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\","
     "\"maxLength\":10},\"maxItems\":3}},\"required\":[\"note\"],"
     "\"additionalProperties\":false}"},
};

/* Validate text against case i's schema (hand-written checks). */
static int valid(int i, const char *text, char *why, size_t n) {
    json_error_t je;
    json_t *j = json_loads(text, JSON_DECODE_ANY, &je);
    if (!j) return snprintf(why, n, "not JSON: %s", je.text), 0;
    int ok = 0;
    switch (i) {
    case 0: {
        json_t *nm = json_object_get(j, "name"), *age = json_object_get(j, "age");
        ok = json_is_object(j) && json_object_size(j) == 2 && json_is_string(nm) &&
             json_is_integer(age) && json_integer_value(age) >= 0 && json_integer_value(age) <= 120;
        break;
    }
    case 1:
        ok = json_is_array(j) && json_array_size(j) >= 1 && json_array_size(j) <= 3;
        for (size_t k = 0; ok && k < json_array_size(j); k++) {
            const char *s = json_string_value(json_array_get(j, k));
            ok = s && (!strcmp(s, "red") || !strcmp(s, "green") || !strcmp(s, "blue") ||
                       !strcmp(s, "black"));
        }
        break;
    case 2: {
        const char *id = json_string_value(json_object_get(j, "id"));
        json_t *items = json_object_get(j, "items");
        ok = json_is_object(j) && json_object_size(j) == 2 && id && strlen(id) == 5 &&
             id[0] >= 'A' && id[0] <= 'Z' && id[1] >= 'A' && id[1] <= 'Z' &&
             strspn(id + 2, "0123456789") == 3 && json_is_array(items) &&
             json_array_size(items) <= 2;
        for (size_t k = 0; ok && k < json_array_size(items); k++) {
            json_t *it = json_array_get(items, k), *q = json_object_get(it, "qty");
            ok = json_is_object(it) && json_object_size(it) == 2 &&
                 json_is_string(json_object_get(it, "sku")) && json_is_integer(q) &&
                 json_integer_value(q) >= 1 && json_integer_value(q) <= 9;
        }
        break;
    }
    case 3:
        ok =
            json_is_object(j) && json_object_size(j) == 1 &&
            (json_is_true(json_object_get(j, "ok")) || json_is_string(json_object_get(j, "error")));
        break;
    case 4: {
        json_t *v = json_object_get(j, "value");
        const char *u = json_string_value(json_object_get(j, "unit"));
        ok = json_is_object(j) && json_object_size(j) == 2 && json_is_number(v) &&
             json_number_value(v) >= -10 && json_number_value(v) <= 10 && u &&
             (!strcmp(u, "m") || !strcmp(u, "s") || !strcmp(u, "kg"));
        break;
    }
    case 5: {
        const char *note = json_string_value(json_object_get(j, "note"));
        json_t *tags = json_object_get(j, "tags");
        ok = json_is_object(j) && note && strlen(note) >= 1 &&
             (!tags || (json_is_array(tags) && json_array_size(tags) <= 3));
        break;
    }
    }
    if (!ok) snprintf(why, n, "does not validate");
    json_decref(j);
    return ok;
}

static void submit(eng_sched *s, sr_req *r, int i, float temp, uint64_t seed, int n, int lp) {
    static int32_t p[16][64];
    int np = encode(k_cases[i].prompt, p[i], 64);
    eng_sched_request q;
    memset(&q, 0, sizeof q);
    q.prompt = p[i];
    q.n_prompt = np;
    eng_sampler_params_default(&q.sampling);
    q.sampling.temperature = temp;
    q.sampling.seed = seed;
    q.sampling.n_stop = g_n_eog;
    memcpy(q.sampling.stop, g_eog, (size_t)g_n_eog * sizeof *g_eog);
    q.max_tokens = 96;
    q.n = n;
    q.logprobs = lp;
    q.top_logprobs = lp ? 5 : 0;
    q.constraint.kind = ENG_CONSTRAINT_JSON_SCHEMA;
    q.constraint.text = k_cases[i].schema;
    q.constraint.len = strlen(k_cases[i].schema);
    sr_bind(r, &q);
    char err[256];
    int rc = eng_sched_submit(s, &q, &r->id, err, sizeof err);
    if (rc) fprintf(stderr, "  submit: %s\n", err);
    PT_EQ_INT(rc, 0);
}

#define NCASE (int)(sizeof k_cases / sizeof k_cases[0])

PT_TEST(schemas_greedy_and_sampled) {
    eng_sched *s = mk(ENG_SCHED_SPEC_NGRAM);
    PT_ASSERT(s);
    sr_req *r = calloc(2 * NCASE, sizeof *r);
    for (int i = 0; i < NCASE; i++) {
        sr_init(&r[2 * i], 0);
        sr_init(&r[2 * i + 1], 0);
        submit(s, &r[2 * i], i, 0, 0, 1, 0);
        submit(s, &r[2 * i + 1], i, 1.0f, 100 + (uint64_t)i, 1, 0);
    }
    int stop = 0, length = 0;
    for (int k = 0; k < 2 * NCASE; k++) {
        PT_EQ_INT(sr_wait(&r[k], 300000), 0);
        const char *txt = text_of(&r[k], 0);
        char why[256] = "";
        if (r[k].fin[0] == ENG_SCHED_STOP) {
            stop++;
            if (!valid(k / 2, txt, why, sizeof why))
                PT_FAIL("case %d %s: \"%s\": %s", k / 2, k % 2 ? "sampled" : "greedy", txt, why);
        } else {
            PT_EQ_INT(r[k].fin[0], ENG_SCHED_LENGTH);
            length++;
        }
        printf("  %d %-7s %-6s %s\n", k / 2, k % 2 ? "sampled" : "greedy",
               eng_sched_finish_name(r[k].fin[0]), txt);
    }
    printf("  %d stop (all valid), %d length\n", stop, length);
    PT_ASSERT(stop >= NCASE); /* most complete within 96 tokens */
    eng_sched_stats st;
    eng_sched_stats_get(s, &st);
    printf("  mask wait %.1f ms of %.0f ms of steps; %llu masks, %.2f ms CPU each\n",
           st.mask_wait_ms, st.step_ms_total, (unsigned long long)st.masks,
           st.masks ? st.mask_cpu_ms / (double)st.masks : 0);
    eng_sched_free(s);
    free(r);
}

PT_TEST(spec_equals_plain) {
    for (int i = 0; i < 3; i++) {
        sr_req *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b);
        sr_init(a, 0);
        sr_init(b, 0);
        eng_sched *off = mk(ENG_SCHED_SPEC_OFF), *on = mk(ENG_SCHED_SPEC_NGRAM);
        submit(off, a, i, 0, 0, 1, 0);
        submit(on, b, i, 0, 0, 1, 0);
        PT_EQ_INT(sr_wait(a, 300000), 0);
        PT_EQ_INT(sr_wait(b, 300000), 0);
        PT_EQ_INT(a->fin[0], b->fin[0]);
        PT_EQ_INT(a->rn[0], b->rn[0]);
        PT_EQ_MEM(a->rt[0], b->rt[0], (size_t)a->rn[0] * sizeof(int32_t));
        eng_sched_free(off);
        eng_sched_free(on);
        free(a);
        free(b);
    }
}

PT_TEST(choices_share_prompt) {
    eng_sched *s = mk(ENG_SCHED_SPEC_NGRAM);
    sr_req *r = calloc(1, sizeof *r);
    sr_init(r, 0);
    submit(s, r, 0, 1.0f, 42, 3, 0);
    PT_EQ_INT(sr_wait(r, 300000), 0);
    eng_sched_stats st;
    eng_sched_close(s, 1);
    eng_sched_stats_get(s, &st);
    PT_EQ_INT(r->res.n_choices, 3);
    PT_EQ_INT(st.prefill_tokens, (uint64_t)r->res.prompt_tokens);
    PT_EQ_INT(st.forks, 2);
    for (int c = 0; c < 3; c++) {
        char why[256] = "";
        const char *txt = text_of(r, c);
        PT_ASSERT_MSG(r->fin[c] == ENG_SCHED_LENGTH || valid(0, txt, why, sizeof why),
                      "choice %d \"%s\" %s", c, txt, why);
    }
    eng_sched_free(s);
    free(r);
}

PT_TEST(logprobs_constrained) {
    eng_sched *s = mk(ENG_SCHED_SPEC_NGRAM);
    sr_req *r = calloc(1, sizeof *r);
    sr_init(r, 0);
    submit(s, r, 1, 0, 0, 1, 1);
    PT_EQ_INT(sr_wait(r, 300000), 0);
    eng_constraint *c = NULL;
    eng_constraint_spec sp = {ENG_CONSTRAINT_JSON_SCHEMA, k_cases[1].schema,
                              strlen(k_cases[1].schema)};
    PT_EQ_INT(eng_constraint_new(g_vocab, &sp, &c, NULL, 0), 0);
    for (int i = 0; i < r->n[0]; i++) {
        const sr_tok *x = &r->t[0][i];
        const uint32_t *m;
        PT_EQ_INT(eng_constraint_mask(c, &m, NULL, 0), 0);
        PT_ASSERT(x->has_lp && x->lp <= 0);
        double mass = 0;
        for (int j = 0; j < x->n_top; j++) {
            PT_ASSERT(eng_constraint_allows(m, x->top[j].token));
            if (j) PT_ASSERT(x->top[j].logprob <= x->top[j - 1].logprob);
            mass += exp(x->top[j].logprob);
        }
        PT_ASSERT(mass <= 1.0 + 1e-5);
        PT_EQ_INT(x->top[0].token, x->tok); /* greedy: the chosen one is the best */
        PT_EQ_INT(eng_constraint_commit(c, &x->tok, 1, NULL, 0), 0);
    }
    eng_constraint_free(c);
    eng_sched_free(s);
    free(r);
}

/* ptest's main runs the tests; this constructor decides first whether
 * there is anything to run. */
__attribute__((constructor(200))) static void check_model(void) {
    const char *ci = getenv("CI");
    int strict = ci && !strcmp(ci, "true");
    if (!eng_constraint_available() || !model()) {
        printf("skip: %s\n", eng_constraint_available()
                                 ? "Gemma 3 270M not loadable (deploy/setup.sh model)"
                                 : "built without llguidance (deploy/setup.sh llguidance)");
        exit(strict ? 1 : 77);
    }
}
