/*
 * test_constraint.c -- the constraint module alone (eng_constraint.h), on
 * small in-memory vocabularies (vocab_util.h).
 *
 *   availability          llguidance is in the build (fails under CI=true
 *                         when not; without it every constructor refuses
 *                         with ENG_CONSTRAINT_EUNAVAIL)
 *   vocab_special_tokens  control / unknown tokens are never allowed inside
 *                         text; end tokens exactly in accepting states; ids
 *                         past the tokenizer (a padded output) never
 *   vocab_spm_pieces      SentencePiece pieces: "▁" is a space
 *   json_formatting       compact JSON by default (no whitespace after
 *                         "{"), a schema's own "x-guidance" kept, "{}" and
 *                         a boolean schema compile
 *   compile_errors        codes and one-line messages
 *   validate_commit_clone validate counts the accepted prefix without
 *                         consuming; a forbidden commit kills the
 *                         constraint; a clone continues on its own
 *   pool_masks_equal_sync pool masks (current + look-ahead states) equal
 *                         the synchronous ones, the state is rolled back
 *   pool_budget_and_free  a 1 us budget fails with EBUDGET (counted); free
 *                         with a job queued or running; many constraints on
 *                         two threads
 */
#define PTEST_MAIN
#include "ptest.h"

#include "eng_constraint.h"
#include "vocab_util.h"

static int have(void) {
    if (eng_constraint_available()) return 1;
    const char *ci = getenv("CI");
    if (ci && !strcmp(ci, "true")) PT_FAIL("llguidance missing under CI=true");
    return 0;
}

static eng_constraint_vocab *vocab(eng_tok *t, int n_vocab) {
    eng_constraint_vocab *v = NULL;
    char err[256];
    if (eng_constraint_vocab_new(t, n_vocab, &v, err, sizeof err) != 0)
        fprintf(stderr, "  vocab: %s\n", err);
    return v;
}

static eng_constraint *mk(eng_constraint_vocab *v, eng_constraint_kind k, const char *text) {
    eng_constraint_spec sp = {k, text, text ? strlen(text) : 0};
    eng_constraint *c = NULL;
    char err[256];
    if (eng_constraint_new(v, &sp, &c, err, sizeof err) != 0)
        fprintf(stderr, "  compile: %s\n", err);
    return c;
}

static const uint32_t *mask(eng_constraint *c) {
    const uint32_t *m = NULL;
    char err[256];
    if (eng_constraint_mask(c, &m, err, sizeof err) != 0) fprintf(stderr, "  mask: %s\n", err);
    return m;
}

/* Token id of text t in tok (-1 when absent). */
static int32_t id_of(eng_tok *tok, const char *t) { return eng_tok_find(tok, t, strlen(t)); }

/* Commit the tokens of text (encoded without specials). */
static int commit_text(eng_constraint *c, eng_tok *tok, const char *text) {
    int32_t ids[256];
    int n = 0;
    if (eng_tok_encode(tok, text, strlen(text), 0, ids, 256, &n, NULL, 0) != 0) return -1;
    return eng_constraint_commit(c, ids, n, NULL, 0);
}

PT_TEST(availability) {
    PT_EQ_STR(eng_constraint_kind_name(ENG_CONSTRAINT_JSON_SCHEMA), "json_schema");
    PT_EQ_STR(eng_constraint_kind_name(ENG_CONSTRAINT_LARK), "lark");
    if (have()) {
        PT_ASSERT(strstr(eng_constraint_version(), "llguidance") != NULL);
        return;
    }
    /* without llguidance: refusals, never a constraint */
    eng_constraint_vocab *v = (eng_constraint_vocab *)1;
    char err[256];
    PT_EQ_INT(eng_constraint_vocab_new(vu_bpe(), 300, &v, err, sizeof err),
              ENG_CONSTRAINT_EUNAVAIL);
    PT_ASSERT(v == NULL && strstr(err, "llguidance"));
    eng_constraint_pool *p = (eng_constraint_pool *)1;
    PT_EQ_INT(eng_constraint_pool_new(1, &p, err, sizeof err), ENG_CONSTRAINT_EUNAVAIL);
    PT_ASSERT(p == NULL);
}

PT_TEST(vocab_special_tokens) {
    if (!have()) return;
    eng_tok *t = vu_bpe();
    PT_ASSERT(t);
    int nt = eng_tok_n_vocab(t);
    eng_constraint_vocab *v = vocab(t, nt + 40); /* a padded output layer */
    PT_ASSERT(v);
    PT_EQ_INT(eng_constraint_vocab_size(v), nt + 40);
    PT_EQ_INT(eng_constraint_mask_words(v), (size_t)(nt + 40 + 31) / 32);
    int32_t bos = eng_tok_bos(t), eot = eng_tok_eos(t), ims = id_of(t, "<|im_start|>");
    eng_constraint *c = mk(v, ENG_CONSTRAINT_REGEX, "a[a-z]*");
    PT_ASSERT(c);
    const uint32_t *m = mask(c);
    PT_ASSERT(m);
    PT_ASSERT(eng_constraint_allows(m, id_of(t, "a")));
    PT_ASSERT(!eng_constraint_allows(m, id_of(t, "b")));
    PT_ASSERT(!eng_constraint_allows(m, eot)); /* not accepting yet */
    PT_ASSERT(!eng_constraint_allows(m, bos) && !eng_constraint_allows(m, ims));
    for (int i = nt; i < nt + 40; i++) PT_ASSERT(!eng_constraint_allows(m, i));
    PT_EQ_INT(eng_constraint_is_accepting(c), 0);
    PT_EQ_INT(commit_text(c, t, "a"), 0);
    m = mask(c);
    PT_ASSERT(eng_constraint_allows(m, eot)); /* accepting: the end is allowed */
    PT_ASSERT(eng_constraint_allows(m, id_of(t, "true")));
    PT_ASSERT(!eng_constraint_allows(m, id_of(t, "A")));
    PT_ASSERT(!eng_constraint_allows(m, bos) && !eng_constraint_allows(m, ims));
    PT_EQ_INT(eng_constraint_is_accepting(c), 1);
    PT_EQ_INT(eng_constraint_is_stopped(c), 0);
    /* a literal: complete after it, only the end allowed */
    eng_constraint *d = mk(v, ENG_CONSTRAINT_REGEX, "null");
    PT_EQ_INT(commit_text(d, t, "null"), 0);
    PT_EQ_INT(eng_constraint_is_stopped(d), 1);
    m = mask(d);
    int allowed = 0;
    for (int i = 0; i < nt + 40; i++) allowed += eng_constraint_allows(m, i);
    PT_EQ_INT(allowed, 1);
    PT_ASSERT(eng_constraint_allows(m, eot));
    eng_constraint_free(d);
    eng_constraint_free(c);
    eng_constraint_vocab_free(v);
}

PT_TEST(vocab_spm_pieces) {
    if (!have()) return;
    eng_tok *t = vu_spm();
    PT_ASSERT(t);
    eng_constraint_vocab *v = vocab(t, eng_tok_n_vocab(t));
    eng_constraint *c = mk(v, ENG_CONSTRAINT_REGEX, "a a");
    const uint32_t *m = mask(c);
    PT_ASSERT(eng_constraint_allows(m, id_of(t, "a")));
    PT_ASSERT(!eng_constraint_allows(m, id_of(t, "\xe2\x96\x81"
                                                 "a"))); /* " a" */
    int32_t a = id_of(t, "a");
    PT_EQ_INT(eng_constraint_commit(c, &a, 1, NULL, 0), 0);
    m = mask(c);
    PT_ASSERT(eng_constraint_allows(m, id_of(t, "\xe2\x96\x81"
                                                "a")));
    PT_ASSERT(eng_constraint_allows(m, id_of(t, "\xe2\x96\x81")));
    PT_ASSERT(eng_constraint_allows(m, id_of(t, "<0x20>")));
    PT_ASSERT(!eng_constraint_allows(m, id_of(t, "a")));
    PT_ASSERT(!eng_constraint_allows(m, id_of(t, "<unk>")));
    eng_constraint_free(c);
    eng_constraint_vocab_free(v);
}

/* Every token a mask allows validates: a negated Lark lexeme once let
 * llguidance's mask allow <unk> and <s> (0xFF-marked specials) that its
 * own validate refused (fuzz_constraint, corpus/lark-negated-special); parley
 * clears the specials that do not end generation from every mask. */
PT_TEST(mask_allows_only_what_validates) {
    if (!have()) return;
    eng_tok *t = vu_spm();
    PT_ASSERT(t);
    eng_constraint_vocab *v = vocab(t, eng_tok_n_vocab(t));
    PT_ASSERT(v);
    eng_constraint *c =
        mk(v, ENG_CONSTRAINT_LARK, "start: item (\",\" item)*\nitem: \"cat\" |~/[:0-9]+/");
    if (!c) { /* a grammar llguidance refuses cannot show it */
        eng_constraint_vocab_free(v);
        return;
    }
    const uint32_t *m = mask(c);
    PT_ASSERT(m);
    PT_ASSERT(!eng_constraint_allows(m, id_of(t, "<unk>")));
    PT_ASSERT(!eng_constraint_allows(m, id_of(t, "<s>")));
    for (int32_t i = 0; i < eng_constraint_vocab_size(v); i++)
        if (eng_constraint_allows(m, i))
            PT_ASSERT_MSG(eng_constraint_validate(c, &i, 1) == 1, "token %d allowed, refused",
                          (int)i);
    eng_constraint_free(c);
    eng_constraint_vocab_free(v);
}

PT_TEST(json_formatting) {
    if (!have()) return;
    eng_tok *t = vu_bpe();
    eng_constraint_vocab *v = vocab(t, eng_tok_n_vocab(t));
    int32_t sp = id_of(t, "\xc4\xa0"), nl = id_of(t, "\xc4\x8a"), q = id_of(t, "\""),
            rb = id_of(t, "}");
    PT_ASSERT(sp >= 0 && nl >= 0 && q >= 0 && rb >= 0);
    static const char *const compact[] = {"{\"type\":\"object\"}",
                                          " \n{ \"type\" : \"object\" }\n ", "{}", "{ }"};
    for (int i = 0; i < 4; i++) {
        eng_constraint *c = mk(v, ENG_CONSTRAINT_JSON_SCHEMA, compact[i]);
        PT_ASSERT_MSG(c, "schema %d", i);
        PT_EQ_INT(commit_text(c, t, "{"), 0);
        const uint32_t *m = mask(c);
        PT_ASSERT(eng_constraint_allows(m, q) && eng_constraint_allows(m, rb));
        PT_ASSERT(!eng_constraint_allows(m, sp) && !eng_constraint_allows(m, nl));
        PT_EQ_INT(commit_text(c, t, "\"k\": 1, \"j\": [true, null]}"), 0);
        PT_EQ_INT(eng_constraint_is_stopped(c), 1);
        eng_constraint_free(c);
    }
    /* JSON object: same formatting, text ignored */
    eng_constraint *c = mk(v, ENG_CONSTRAINT_JSON_OBJECT, "ignored");
    PT_ASSERT(c);
    PT_EQ_INT(commit_text(c, t, "{\"a\": {\"b\": false}}"), 0);
    PT_EQ_INT(eng_constraint_is_stopped(c), 1);
    eng_constraint_free(c);
    /* the schema's own options win */
    c = mk(v, ENG_CONSTRAINT_JSON_SCHEMA,
           "{\"type\":\"object\",\"x-guidance\":{\"whitespace_flexible\":true}}");
    PT_ASSERT(c);
    PT_EQ_INT(commit_text(c, t, "{"), 0);
    PT_ASSERT(eng_constraint_allows(mask(c), nl));
    eng_constraint_free(c);
    /* a boolean schema: any JSON */
    c = mk(v, ENG_CONSTRAINT_JSON_SCHEMA, "true");
    PT_ASSERT(c);
    PT_EQ_INT(commit_text(c, t, "[1, \"x\"]"), 0);
    PT_EQ_INT(eng_constraint_is_stopped(c), 1);
    eng_constraint_free(c);
    eng_constraint_vocab_free(v);
}

PT_TEST(compile_errors) {
    if (!have()) return;
    eng_tok *t = vu_bpe();
    eng_constraint_vocab *v = vocab(t, eng_tok_n_vocab(t));
    static const struct {
        eng_constraint_kind k;
        const char *text;
        int code;
    } bad[] = {
        {ENG_CONSTRAINT_JSON_SCHEMA, "{\"type\": ", ENG_CONSTRAINT_ECOMPILE},
        {ENG_CONSTRAINT_JSON_SCHEMA,
         "{\"type\":\"object\",\"required\":[\"a\"],"
         "\"properties\":{\"a\":false}}",
         ENG_CONSTRAINT_ECOMPILE},
        {ENG_CONSTRAINT_JSON_SCHEMA, "[1, 2]", ENG_CONSTRAINT_ECOMPILE},
        {ENG_CONSTRAINT_REGEX, "a(", ENG_CONSTRAINT_ECOMPILE},
        {ENG_CONSTRAINT_LARK, "start: (", ENG_CONSTRAINT_ECOMPILE},
        {ENG_CONSTRAINT_LARK, "", ENG_CONSTRAINT_ECOMPILE},
        {ENG_CONSTRAINT_NONE, "x", ENG_CONSTRAINT_EINVAL},
    };
    char err[256];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        eng_constraint_spec sp = {bad[i].k, bad[i].text, strlen(bad[i].text)};
        eng_constraint *c = (eng_constraint *)1;
        err[0] = 0;
        int rc = eng_constraint_new(v, &sp, &c, err, sizeof err);
        PT_ASSERT_MSG(rc == bad[i].code, "case %zu: %d %s", i, rc, err);
        PT_ASSERT(c == NULL);
        PT_ASSERT(!strncmp(err, "constraint: ", 12) && !strchr(err, '\n'));
    }
    /* invalid UTF-8 is refused, not a crash */
    eng_constraint_spec sp = {ENG_CONSTRAINT_REGEX, "\xff\xfe", 2};
    eng_constraint *c = NULL;
    PT_EQ_INT(eng_constraint_new(v, &sp, &c, err, sizeof err), ENG_CONSTRAINT_ECOMPILE);
    eng_constraint_vocab_free(v);
}

PT_TEST(validate_commit_clone) {
    if (!have()) return;
    eng_tok *t = vu_bpe();
    eng_constraint_vocab *v = vocab(t, eng_tok_n_vocab(t));
    eng_constraint *c = mk(v, ENG_CONSTRAINT_LARK, "start: \"ab\" (\"c\" | \"d\")+");
    PT_ASSERT(c);
    int32_t ids[4] = {id_of(t, "a"), id_of(t, "b"), id_of(t, "x"), id_of(t, "c")};
    PT_EQ_INT(eng_constraint_validate(c, ids, 4), 2);
    PT_EQ_INT(eng_constraint_validate(c, ids, 2), 2);
    PT_EQ_INT(eng_constraint_commit(c, ids, 2, NULL, 0), 0); /* nothing was consumed before */
    eng_constraint *d = NULL;
    char err[256];
    PT_EQ_INT(eng_constraint_clone(c, &d, err, sizeof err), 0);
    int32_t cc = id_of(t, "c"), dd = id_of(t, "d");
    PT_EQ_INT(eng_constraint_commit(d, &dd, 1, NULL, 0), 0);
    PT_EQ_INT(eng_constraint_commit(c, &cc, 1, NULL, 0), 0);
    PT_EQ_INT(eng_constraint_is_accepting(c), 1);
    PT_EQ_INT(eng_constraint_is_accepting(d), 1);
    PT_EQ_MEM(mask(c), mask(d), eng_constraint_mask_words(v) * 4); /* same language state */
    /* a forbidden token kills it */
    int32_t x = id_of(t, "x");
    PT_EQ_INT(eng_constraint_commit(c, &x, 1, err, sizeof err), ENG_CONSTRAINT_EMATCH);
    PT_ASSERT(strstr(err, "constraint"));
    const uint32_t *m;
    PT_ASSERT(eng_constraint_mask(c, &m, err, sizeof err) < 0);
    PT_ASSERT(eng_constraint_commit(c, &cc, 1, NULL, 0) < 0);
    eng_constraint *e = (eng_constraint *)1;
    PT_ASSERT(eng_constraint_clone(c, &e, NULL, 0) < 0 && e == NULL); /* of a dead one */
    PT_EQ_INT(eng_constraint_commit(d, &cc, 1, NULL, 0), 0);          /* the clone lives on */
    int32_t bad = 1 << 20;
    PT_EQ_INT(eng_constraint_commit(d, &bad, 1, NULL, 0), ENG_CONSTRAINT_EMATCH);
    eng_constraint_free(c);
    eng_constraint_free(d);
    eng_constraint_vocab_free(v);
}

PT_TEST(pool_masks_equal_sync) {
    if (!have()) return;
    eng_tok *t = vu_bpe();
    eng_constraint_vocab *v = vocab(t, eng_tok_n_vocab(t));
    size_t w = eng_constraint_mask_words(v);
    eng_constraint_pool *p = NULL;
    char err[256];
    PT_EQ_INT(eng_constraint_pool_new(2, &p, err, sizeof err), 0);
    const char *schema = "{\"type\":\"object\",\"properties\":{\"k\":{\"enum\":[true,false]}}}";
    eng_constraint *a = mk(v, ENG_CONSTRAINT_JSON_SCHEMA, schema),
                   *b = mk(v, ENG_CONSTRAINT_JSON_SCHEMA, schema);
    int32_t ahead[16];
    int n = 0;
    PT_EQ_INT(eng_tok_encode(t, "{\"k\": true}", 11, 0, ahead, 16, &n, NULL, 0), 0);
    PT_EQ_INT(eng_constraint_validate(a, ahead, n), n);
    PT_EQ_INT(eng_constraint_start(a, p, ahead, n, 0), 0);
    PT_EQ_INT(eng_constraint_busy(a), 1);
    PT_ASSERT(eng_constraint_start(a, p, NULL, 0, 0) < 0); /* busy */
    const uint32_t *const *ms;
    int nm = 0;
    int64_t waited = -1;
    PT_EQ_INT(eng_constraint_wait(a, &ms, &nm, &waited, err, sizeof err), 0);
    PT_EQ_INT(nm, n + 1);
    PT_ASSERT(waited >= 0);
    for (int i = 0; i <= n; i++) {
        PT_EQ_MEM(ms[i], mask(b), w * 4);
        if (i < n) PT_EQ_INT(eng_constraint_commit(b, &ahead[i], 1, NULL, 0), 0);
    }
    /* a was rolled back: still at the start */
    PT_EQ_INT(eng_constraint_is_stopped(a), 0);
    PT_EQ_INT(eng_constraint_commit(a, ahead, n, NULL, 0), 0);
    PT_EQ_INT(eng_constraint_is_stopped(a), 1);
    /* wait without a start computes here */
    eng_constraint *c = mk(v, ENG_CONSTRAINT_JSON_OBJECT, NULL);
    PT_EQ_INT(eng_constraint_wait(c, &ms, &nm, NULL, err, sizeof err), 0);
    PT_EQ_INT(nm, 1);
    PT_ASSERT(eng_constraint_allows(ms[0], id_of(t, "{")));
    PT_ASSERT(!eng_constraint_allows(ms[0], id_of(t, "[")));
    eng_constraint_free(a);
    eng_constraint_free(b);
    eng_constraint_free(c);
    eng_constraint_pool_stats st;
    eng_constraint_pool_stats_get(p, &st);
    PT_EQ_INT(st.masks, (uint64_t)n + 1);
    PT_ASSERT(st.mask_cpu_ms > 0 && st.mask_cpu_max_ms > 0);
    eng_constraint_pool_free(p);
    eng_constraint_vocab_free(v);
}

PT_TEST(pool_budget_and_free) {
    if (!have()) return;
    eng_tok *t = vu_bpe();
    eng_constraint_vocab *v = vocab(t, eng_tok_n_vocab(t));
    eng_constraint_pool *p = NULL;
    char err[256];
    PT_EQ_INT(eng_constraint_pool_new(2, &p, err, sizeof err), 0);
    eng_constraint_pool *p0 = NULL;
    PT_EQ_INT(eng_constraint_pool_new(0, &p0, err, sizeof err), ENG_CONSTRAINT_EINVAL);
    PT_ASSERT(p0 == NULL);
    const char *g = "start: item+\nitem: /[a-z]+/ \" \" | /[0-9]+/ \",\"";
    eng_constraint *c = mk(v, ENG_CONSTRAINT_LARK, g);
    PT_EQ_INT(eng_constraint_start(c, p, NULL, 0, 1 /* us */), 0);
    const uint32_t *const *ms;
    int nm;
    PT_EQ_INT(eng_constraint_wait(c, &ms, &nm, NULL, err, sizeof err), ENG_CONSTRAINT_EBUDGET);
    PT_ASSERT(strstr(err, "time budget"));
    PT_EQ_INT(eng_constraint_start(c, p, NULL, 0, 0), 0); /* dead: wait says so again */
    PT_EQ_INT(eng_constraint_wait(c, &ms, &nm, NULL, err, sizeof err), ENG_CONSTRAINT_EBUDGET);
    eng_constraint_free(c);
    eng_constraint_pool_stats st;
    eng_constraint_pool_stats_get(p, &st);
    PT_EQ_INT(st.over_budget, 1);
    /* many at once; some freed while queued or running */
    enum { N = 24 };
    eng_constraint *cs[N];
    for (int i = 0; i < N; i++) {
        cs[i] = mk(v, i % 2 ? ENG_CONSTRAINT_LARK : ENG_CONSTRAINT_JSON_OBJECT, g);
        PT_ASSERT(cs[i]);
        PT_EQ_INT(eng_constraint_start(cs[i], p, NULL, 0, 0), 0);
    }
    for (int i = 0; i < N; i += 3) {
        eng_constraint_free(cs[i]);
        cs[i] = NULL;
    }
    for (int i = 0; i < N; i++)
        if (cs[i]) {
            PT_EQ_INT(eng_constraint_wait(cs[i], &ms, &nm, NULL, err, sizeof err), 0);
            PT_EQ_INT(nm, 1);
            eng_constraint_free(cs[i]);
        }
    eng_constraint_pool_free(p);
    eng_constraint_vocab_free(v);
}
