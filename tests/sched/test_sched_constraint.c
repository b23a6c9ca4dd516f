/*
 * test_sched_constraint.c -- constrained decoding in the scheduler (issue
 * 33), on sched_cons.h's fixture (a synthetic cai-tiny model written at
 * test time).  Log-probabilities and n > 1 choices: test_sched_choices.c.
 *
 *   llguidance_present        the build has llguidance (fails under CI=true
 *                             when it does not; the constraint tests below
 *                             then only check refusals)
 *   refusals                  bad schemas, regexes and grammars, one over
 *                             the size limit, no vocabulary, bad n /
 *                             logprobs: refused at submit with their codes,
 *                             no callback
 *   json_greedy_valid         greedy JSON-schema, JSON-object, regex and
 *                             Lark outputs: finish stop, without an end
 *                             token, and the text parses and validates
 *   compiled_by_the_caller    a constraint compiled before submit (as the
 *                             worker does, once) is applied, and freed with
 *                             a refusal
 *   mask_bits_match           each generated token is the argmax of the
 *                             delivered logits under llguidance's own mask
 *                             (a matcher driven directly through its C API
 *                             over a tokenizer built here), the module's
 *                             masks equal that one word for word, and
 *                             eng_sampler_mask_apply leaves exactly the
 *                             allowed logits finite
 *   spec_equals_plain         drafting (prompt lookup, an oracle drafter with
 *                             wrong tails, one proposing forbidden tokens)
 *                             gives the tokens of constrained decoding
 *                             without drafts; the oracle's drafts verified,
 *                             none of the forbidden ones
 *   budget_fires              a mask over mask_budget_us ends the request
 *                             with finish error and a message
 *   length_is_length          max_tokens cuts a constrained output short:
 *                             length
 */
#define PTEST_MAIN
#include "ptest.h"

#include <jansson.h>
#include <regex.h>

#include "sched_cons.h"

/* A constraint the caller compiled (the worker compiles each once, at
 * admission) is used as compiled, and submit takes it over: on success,
 * and on a refusal (freed there: ASan's leak check would see it). */
PT_TEST(compiled_by_the_caller) {
    if (!have_llg()) return;
    eng_sched *s = mk(ENG_SCHED_SPEC_OFF, NULL, NULL, 0, 0);
    PT_ASSERT(s);
    int32_t eog[64], p[64];
    int n_eog = eng_tok_eog_ids(g_tok, eog, 64), np = mk_prompt(p, 3);
    static const eng_constraint_spec spec = {ENG_CONSTRAINT_REGEX, "(yes|no|maybe)", 14};
    char err[512];
    eng_sched_request q;
    req_init(&q, p, np, 20);
    q.sampling.n_stop = n_eog;
    memcpy(q.sampling.stop, eog, (size_t)n_eog * sizeof *eog);
    PT_EQ_INT(eng_constraint_new(g_vocab, &spec, &q.compiled, err, sizeof err), 0);
    sr_req *r = sr_new(0);
    run1(s, &q, r);
    const char *txt = text_of(r, 0);
    PT_ASSERT_MSG(!strcmp(txt, "yes") || !strcmp(txt, "no") || !strcmp(txt, "maybe"),
                  "finish %s \"%s\"", eng_sched_finish_name(r->fin[0]), txt);
    sr_del(r);
    req_init(&q, p, np, 20);
    q.n = ENG_SCHED_N_MAX + 1; /* refused: the compiled constraint goes with it */
    PT_EQ_INT(eng_constraint_new(g_vocab, &spec, &q.compiled, err, sizeof err), 0);
    PT_EQ_INT(eng_sched_submit(s, &q, NULL, err, sizeof err), ENG_SCHED_EINVAL);
    eng_sched_stats st;
    eng_sched_stats_get(s, &st);
    PT_EQ_INT(st.constrained, 1);
    eng_sched_free(s);
}

#ifdef PARLEY_HAVE_LLGUIDANCE
#include <llguidance.h>
#endif

/* ---- the tests ---- */

PT_TEST(llguidance_present) {
    PT_ASSERT(model());
    if (!eng_constraint_available()) {
        printf("  (built without llguidance: %s)\n", eng_constraint_version());
        have_llg();
        return;
    }
    PT_ASSERT(g_vocab);
    PT_ASSERT(eng_constraint_vocab_size(g_vocab) >= NV);
    PT_ASSERT(strstr(eng_constraint_version(), "llguidance") != NULL);
}

static int g_callbacks;
static void cb_count_tok(void *u, uint64_t id, const eng_sched_token *t) {
    (void)u, (void)id, (void)t;
    __atomic_add_fetch(&g_callbacks, 1, __ATOMIC_SEQ_CST);
}
static void cb_count_done(void *u, uint64_t id, const eng_sched_result *r) {
    (void)u, (void)id, (void)r;
    __atomic_add_fetch(&g_callbacks, 1, __ATOMIC_SEQ_CST);
}

PT_TEST(refusals) {
    PT_ASSERT(model());
    int32_t p[64];
    int np = mk_prompt(p, 0);
    char err[256];
    eng_sched_request q;
    /* no vocabulary: a constraint cannot be applied */
    eng_sched_config cfg;
    eng_sched_config_default(&cfg);
    eng_sched *s0 = NULL;
    PT_EQ_INT(eng_sched_create(model(), &cfg, NULL, &s0, err, sizeof err), 0);
    req_init(&q, p, np, 8);
    q.on_token = cb_count_tok;
    q.on_done = cb_count_done;
    set_cons(&q, ENG_CONSTRAINT_JSON_OBJECT, NULL);
    PT_EQ_INT(eng_sched_submit(s0, &q, NULL, err, sizeof err), ENG_SCHED_ENOTSUP);
    PT_ASSERT(strstr(err, "constraint") != NULL);
    eng_sched_free(s0);
    if (!have_llg()) return;
    eng_sched *s = mk(ENG_SCHED_SPEC_OFF, NULL, NULL, 100000, 0);
    PT_ASSERT(s);
    static const struct {
        eng_constraint_kind k;
        const char *text;
        const char *want; /* a piece of the message */
    } bad[] = {
        {ENG_CONSTRAINT_JSON_SCHEMA, "{\"type\": \"object\", \"properties\": {", "EOF"},
        {ENG_CONSTRAINT_JSON_SCHEMA, "{\"type\": \"string\", \"pattern\": \"[\"}", "regex"},
        {ENG_CONSTRAINT_JSON_SCHEMA, "{\"$ref\": \"#/definitions/none\"}", "none"},
        {ENG_CONSTRAINT_JSON_SCHEMA, "{\"type\": \"integer\", \"minimum\": 5, \"maximum\": 1}",
         "nsatisfiable"},
        {ENG_CONSTRAINT_JSON_SCHEMA, "{\"type\": \"no-such-type\"}", "json_schema"},
        {ENG_CONSTRAINT_JSON_SCHEMA, "", "empty"},
        {ENG_CONSTRAINT_REGEX, "(unclosed", "regex"},
        {ENG_CONSTRAINT_REGEX, "[z-a]", "regex"},
        {ENG_CONSTRAINT_LARK, "start: undefined_rule", "lark"},
        {ENG_CONSTRAINT_LARK, "this is not a grammar", "lark"},
        {(eng_constraint_kind)9, "x", "kind"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        req_init(&q, p, np, 8);
        q.on_token = cb_count_tok;
        q.on_done = cb_count_done;
        set_cons(&q, bad[i].k, bad[i].text);
        err[0] = 0;
        int rc = eng_sched_submit(s, &q, NULL, err, sizeof err);
        if (rc != ENG_SCHED_ECONSTRAINT || !strstr(err, bad[i].want))
            PT_FAIL("case %zu: rc %d, message \"%s\"", i, rc, err);
        PT_ASSERT(strchr(err, '\n') == NULL);
    }
    /* a NUL byte inside the text */
    req_init(&q, p, np, 8);
    q.constraint.kind = ENG_CONSTRAINT_REGEX;
    q.constraint.text = "ab\0cd";
    q.constraint.len = 5;
    PT_EQ_INT(eng_sched_submit(s, &q, NULL, err, sizeof err), ENG_SCHED_ECONSTRAINT);
    /* over the size limit: refused before llguidance sees it */
    size_t big = ENG_CONSTRAINT_MAX_BYTES + 1;
    char *huge = malloc(big + 1);
    memset(huge, 'a', big);
    huge[big] = 0;
    req_init(&q, p, np, 8);
    set_cons(&q, ENG_CONSTRAINT_REGEX, huge);
    PT_EQ_INT(eng_sched_submit(s, &q, NULL, err, sizeof err), ENG_SCHED_ECONSTRAINT);
    PT_ASSERT(strstr(err, "limit") != NULL);
    free(huge);
    /* logprobs and n out of range */
    req_init(&q, p, np, 8);
    q.logprobs = 1;
    q.top_logprobs = ENG_SCHED_TOP_MAX + 1;
    PT_EQ_INT(eng_sched_submit(s, &q, NULL, err, sizeof err), ENG_SCHED_EINVAL);
    req_init(&q, p, np, 8);
    q.top_logprobs = 2; /* without logprobs */
    PT_EQ_INT(eng_sched_submit(s, &q, NULL, err, sizeof err), ENG_SCHED_EINVAL);
    req_init(&q, p, np, 8);
    q.n = ENG_SCHED_N_MAX + 1;
    PT_EQ_INT(eng_sched_submit(s, &q, NULL, err, sizeof err), ENG_SCHED_EINVAL);
    eng_sched_stats st;
    eng_sched_stats_get(s, &st);
    PT_EQ_INT(st.submitted, 0);
    eng_sched_free(s);
    PT_EQ_INT(__atomic_load_n(&g_callbacks, __ATOMIC_SEQ_CST), 0);
}

PT_TEST(json_greedy_valid) {
    if (!have_llg()) return;
    eng_sched *s = mk(ENG_SCHED_SPEC_NGRAM, NULL, NULL, 0, 0);
    PT_ASSERT(s);
    int32_t eog[64];
    int n_eog = eng_tok_eog_ids(g_tok, eog, 64);
    for (int i = 0; i < 4; i++)
        for (int pi = 0; pi < 2; pi++) {
            int32_t p[64];
            int np = mk_prompt(p, pi + i);
            eng_sched_request q;
            req_init(&q, p, np, 120);
            q.sampling.n_stop = n_eog;
            memcpy(q.sampling.stop, eog, (size_t)n_eog * sizeof *eog);
            set_cons(&q, ENG_CONSTRAINT_JSON_SCHEMA, k_schemas[i]);
            sr_req *r = sr_new(0);
            run1(s, &q, r);
            char why[256] = "";
            const char *txt = text_of(r, 0);
            if (r->fin[0] != ENG_SCHED_STOP || !schema_ok(i, txt, why, sizeof why))
                PT_FAIL("schema %d prompt %d: finish %s, \"%s\": %s (%s)", i, pi,
                        eng_sched_finish_name(r->fin[0]), txt, why, r->err[0]);
            /* complete without an end token */
            PT_ASSERT(r->rn[0] > 0 && !eng_tok_is_eog(g_tok, r->rt[0][r->rn[0] - 1]));
            sr_del(r);
        }
    /* JSON object, regex, Lark */
    static const struct {
        eng_constraint_kind k;
        const char *text, *posix; /* the language as a POSIX ERE (NULL: JSON object) */
    } other[] = {
        {ENG_CONSTRAINT_JSON_OBJECT, NULL, NULL},
        {ENG_CONSTRAINT_REGEX, "[a-z]{3,6}@example\\.(com|org)",
         "^[a-z]{3,6}@example\\.(com|org)$"},
        {ENG_CONSTRAINT_REGEX, "(yes|no|maybe)", "^(yes|no|maybe)$"},
        {ENG_CONSTRAINT_LARK,
         "start: item (\",\" item)*\nitem: \"cat\" | \"dog\" | NUM\nNUM: /[0-9]{1,2}/",
         "^(cat|dog|[0-9]{1,2})(,(cat|dog|[0-9]{1,2}))*$"},
    };
    for (size_t i = 0; i < sizeof other / sizeof other[0]; i++) {
        int32_t p[64];
        int np = mk_prompt(p, 7 + (int)i);
        eng_sched_request q;
        req_init(&q, p, np, 60);
        q.sampling.n_stop = n_eog;
        memcpy(q.sampling.stop, eog, (size_t)n_eog * sizeof *eog);
        set_cons(&q, other[i].k, other[i].text);
        sr_req *r = sr_new(0);
        run1(s, &q, r);
        const char *txt = text_of(r, 0);
        char body[8192];
        snprintf(body, sizeof body, "%s", txt);
        /* an end token (when the model chose one) is not text */
        if (other[i].posix) {
            regex_t re;
            PT_EQ_INT(regcomp(&re, other[i].posix, REG_EXTENDED | REG_NOSUB), 0);
            int m = regexec(&re, body, 0, NULL, 0);
            regfree(&re);
            if (m != 0 || r->fin[0] == ENG_SCHED_ERROR)
                PT_FAIL("case %zu: finish %s \"%s\"", i, eng_sched_finish_name(r->fin[0]), body);
        } else if (r->fin[0] == ENG_SCHED_STOP) {
            json_error_t je;
            json_t *j = json_loads(body, 0, &je);
            PT_ASSERT_MSG(j && json_is_object(j), "json_object: \"%s\"", body);
            json_decref(j);
        } else {
            PT_EQ_INT(r->fin[0], ENG_SCHED_LENGTH); /* an open object may run long */
        }
        sr_del(r);
    }
    eng_sched_stats st;
    eng_sched_stats_get(s, &st);
    PT_ASSERT(st.constrained == 8 + sizeof other / sizeof other[0]);
    PT_ASSERT(st.masks > 0 && st.mask_cpu_ms > 0);
    eng_sched_free(s);
}

#ifdef PARLEY_HAVE_LLGUIDANCE
/* llguidance's tokenizer for g_tok, built here from the vocabulary's
 * public API (the same rule as eng_constraint_vocab_new: control, unknown
 * and unused tokens as 0xFF + text, others as their decoded bytes). */
static LlgTokenizer *test_llg_tokenizer(void) {
    int n = eng_tok_n_vocab(g_tok);
    uint32_t *lens = calloc((size_t)n, sizeof *lens);
    size_t cap = (size_t)n * 64, used = 0;
    uint8_t *bytes = malloc(cap);
    for (int i = 0; i < n; i++) {
        int ty = eng_tok_type(g_tok, i);
        size_t len = 0;
        if (ty == ENG_TOK_TYPE_CONTROL || ty == ENG_TOK_TYPE_UNKNOWN || ty == ENG_TOK_TYPE_UNUSED) {
            const char *t = eng_tok_text(g_tok, i);
            bytes[used] = 0xFF;
            memcpy(bytes + used + 1, t, strlen(t));
            len = strlen(t) + 1;
        } else {
            eng_tok_piece(g_tok, i, (char *)bytes + used, cap - used, &len);
        }
        lens[i] = (uint32_t)len;
        used += len;
    }
    int32_t eog[64];
    int n_eog = eng_tok_eog_ids(g_tok, eog, 64);
    LlgTokenizerInitV2 init;
    memset(&init, 0, sizeof init);
    init.struct_size = sizeof init;
    init.vocab_size = (uint32_t)n;
    init.tok_eos = (uint32_t)eog[0];
    init.token_lens = lens;
    init.token_bytes = bytes;
    init.use_approximate_greedy_tokenize_fn = true;
    init.tok_eos_extra = (const uint32_t *)(eog + 1);
    init.tok_eos_extra_count = (uint32_t)(n_eog - 1);
    char err[256];
    LlgTokenizer *t = llg_new_tokenizer_v2(&init, err, sizeof err);
    if (!t) fprintf(stderr, "  llg tokenizer: %s\n", err);
    free(lens);
    free(bytes);
    return t;
}
#endif

/* A schema with its own llguidance options, so the module passes it
 * through unchanged and a matcher made here compiles the very same text. */
static const char k_raw_schema[] =
    "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":12},"
    "\"age\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":150},\"tags\":{\"type\":\"array\","
    "\"items\":{\"enum\":[\"a\",\"b\"]},\"maxItems\":3}},\"required\":[\"name\",\"age\",\"tags\"],"
    "\"additionalProperties\":false,\"x-guidance\":{\"whitespace_flexible\":false}}";

PT_TEST(mask_bits_match) {
    if (!have_llg()) return;
#ifdef PARLEY_HAVE_LLGUIDANCE
    LlgTokenizer *lt = test_llg_tokenizer();
    PT_ASSERT(lt);
    eng_sched *s = mk(ENG_SCHED_SPEC_OFF, NULL, NULL, 0, 0);
    size_t words = eng_constraint_mask_words(g_vocab);
    PT_EQ_INT(words, (NV + 31) / 32);
    float *lg = malloc(NV * sizeof(float));
    int checked = 0;
    for (int pi = 0; pi < 3; pi++) {
        int32_t p[64];
        int np = mk_prompt(p, 20 + pi);
        eng_sched_request q;
        req_init(&q, p, np, 80);
        if (pi == 2) { /* sampled: the token is allowed, not necessarily the argmax */
            q.sampling.temperature = 1.0f;
            q.sampling.seed = 77;
        }
        set_cons(&q, ENG_CONSTRAINT_JSON_SCHEMA, k_raw_schema);
        sr_req *r = sr_new(NV);
        run1(s, &q, r);
        PT_ASSERT(r->fin[0] == ENG_SCHED_STOP || r->fin[0] == ENG_SCHED_LENGTH);
        /* llguidance directly */
        LlgConstraintInit init;
        llg_constraint_init_set_defaults(&init, lt);
        init.log_stderr_level = 0;
        LlgMatcher *m = llg_new_matcher(&init, "json", k_raw_schema);
        PT_ASSERT(m && !llg_matcher_is_error(m));
        /* the module, synchronously */
        eng_constraint *c = NULL;
        eng_constraint_spec sp = {ENG_CONSTRAINT_JSON_SCHEMA, k_raw_schema, strlen(k_raw_schema)};
        char err[256];
        PT_EQ_INT(eng_constraint_new(g_vocab, &sp, &c, err, sizeof err), 0);
        uint32_t *want = malloc(words * 4);
        for (int i = 0; i < r->n[0]; i++) {
            PT_EQ_INT(llg_matcher_compute_mask_into(m, want, words * 4), 0);
            const uint32_t *got = NULL;
            PT_EQ_INT(eng_constraint_mask(c, &got, err, sizeof err), 0);
            PT_EQ_MEM(got, want, words * 4);
            int32_t t = r->t[0][i].tok;
            PT_ASSERT(eng_constraint_allows(want, t));
            /* the sampler saw these logits under this mask */
            memcpy(lg, r->logits[0] + (size_t)i * NV, NV * sizeof(float));
            eng_sampler_mask_apply(lg, NV, want);
            int best = -1;
            for (int k = 0; k < NV; k++) {
                PT_EQ_INT(isfinite(lg[k]) != 0, eng_constraint_allows(want, k));
                if (eng_constraint_allows(want, k) && (best < 0 || lg[k] > lg[best])) best = k;
            }
            if (pi < 2) PT_EQ_INT(t, best);
            PT_EQ_INT(llg_matcher_consume_token(m, (uint32_t)t), 0);
            PT_EQ_INT(eng_constraint_commit(c, &t, 1, err, sizeof err), 0);
            checked++;
        }
        if (r->fin[0] == ENG_SCHED_STOP) {
            PT_ASSERT(llg_matcher_is_stopped(m));
            PT_ASSERT(eng_constraint_is_stopped(c));
        }
        free(want);
        eng_constraint_free(c);
        llg_free_matcher(m);
        sr_del(r);
    }
    PT_ASSERT(checked > 20);
    free(lg);
    eng_sched_free(s);
    llg_free_tokenizer(lt);
#endif
}

/* A drafter replaying a reference continuation (oracle), or proposing
 * forbidden tokens first (adversary). */
typedef struct drafter {
    const int32_t *ref; /* reference generated tokens */
    int n_ref, n_prompt;
    int adversary; /* 1: propose "}" "{" tokens that JSON forbids there */
    int calls;
} drafter;

static int draft_cb(void *ctx, const int32_t *toks, int n_toks, int n_prompt, int32_t *out, int k) {
    drafter *d = ctx;
    d->calls++;
    int g = n_toks - n_prompt; /* generated so far */
    int n = 0;
    if (d->adversary) {
        for (; n < k; n++) out[n] = (int32_t)((g * 7 + n * 13) % NV);
        return n;
    }
    for (; n < k && g + n < d->n_ref; n++) out[n] = d->ref[g + n];
    if (n > 1 && (g % 3) == 1) out[n - 1] = (out[n - 1] + 1) % NV; /* a wrong tail */
    return n;
}

PT_TEST(spec_equals_plain) {
    if (!have_llg()) return;
    for (int i = 0; i < 4; i++) {
        int32_t p[64];
        int np = mk_prompt(p, 30 + i);
        eng_sched_request q;
        req_init(&q, p, np, 100);
        set_cons(&q, ENG_CONSTRAINT_JSON_SCHEMA, k_schemas[i]);
        eng_sched *off = mk(ENG_SCHED_SPEC_OFF, NULL, NULL, 0, 0);
        sr_req *ref = sr_new(0);
        run1(off, &q, ref);
        eng_sched_free(off);
        for (int mode = 0; mode < 3; mode++) {
            drafter d = {ref->rt[0], ref->rn[0], np, mode == 2, 0};
            eng_sched *sp = mode == 0 ? mk(ENG_SCHED_SPEC_NGRAM, NULL, NULL, 0, 0)
                                      : mk(ENG_SCHED_SPEC_NGRAM, draft_cb, &d, 0, 0);
            req_init(&q, p, np, 100);
            set_cons(&q, ENG_CONSTRAINT_JSON_SCHEMA, k_schemas[i]);
            sr_req *r = sr_new(0);
            run1(sp, &q, r);
            eng_sched_stats st;
            eng_sched_close(sp, 1);
            eng_sched_stats_get(sp, &st);
            eng_sched_free(sp);
            PT_EQ_INT(r->fin[0], ref->fin[0]);
            PT_EQ_INT(r->rn[0], ref->rn[0]);
            PT_EQ_MEM(r->rt[0], ref->rt[0], (size_t)r->rn[0] * sizeof(int32_t));
            if (mode == 1) PT_ASSERT(st.spec_accepted > 0); /* the oracle's drafts verified */
            if (mode == 2) PT_EQ_INT(st.spec_accepted, 0);  /* every draft refused */
            if (mode) PT_ASSERT(st.spec_drafted > 0);
            sr_del(r);
        }
        sr_del(ref);
    }
}

PT_TEST(budget_fires) {
    if (!have_llg()) return;
    eng_sched *s = mk(ENG_SCHED_SPEC_NGRAM, NULL, NULL, 1 /* us */, 0);
    int32_t p[64];
    int np = mk_prompt(p, 3);
    eng_sched_request q;
    req_init(&q, p, np, 50);
    set_cons(&q, ENG_CONSTRAINT_JSON_SCHEMA, k_schemas[0]);
    sr_req *r = sr_new(0);
    run1(s, &q, r);
    PT_EQ_INT(r->fin[0], ENG_SCHED_ERROR);
    PT_ASSERT_MSG(strstr(r->err[0], "time budget") != NULL, "%s", r->err[0]);
    eng_sched_stats st;
    eng_sched_close(s, 1);
    eng_sched_stats_get(s, &st);
    PT_ASSERT(st.mask_over_budget >= 1);
    PT_EQ_INT(st.finish[ENG_SCHED_ERROR], 1);
    eng_sched_free(s);
    sr_del(r);
}

PT_TEST(length_is_length) {
    if (!have_llg()) return;
    eng_sched *s = mk(ENG_SCHED_SPEC_NGRAM, NULL, NULL, 0, 0);
    int32_t p[64];
    int np = mk_prompt(p, 4);
    eng_sched_request q;
    req_init(&q, p, np, 3);
    set_cons(&q, ENG_CONSTRAINT_JSON_SCHEMA, k_schemas[0]);
    sr_req *r = sr_new(0);
    run1(s, &q, r);
    PT_EQ_INT(r->fin[0], ENG_SCHED_LENGTH);
    PT_EQ_INT(r->rn[0], 3);
    eng_sched_free(s);
    sr_del(r);
}

PT_TEST(zz_cleanup) { sc_cleanup(); }
