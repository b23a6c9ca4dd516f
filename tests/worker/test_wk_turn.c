/*
 * test_wk_turn.c -- wk_turn_from_record without a broker: a valid ChatTurn
 * record (msgpack or JSON) becomes a turn carrying the record's position,
 * generation, traceparent, ids, prompt and parameters; every malformed or
 * hostile record becomes exactly one DeadLetter (or an `expired`
 * TurnResult) that decodes and names the reason's code, the source
 * position, key, value (a prefix when huge) and headers, and a refused
 * turn whose ids were read also one `error` TurnResult with the
 * DeadLetter's code (the same offset); random bytes and
 * random mutations of a valid record never crash and always give exactly
 * one of the two.  The worker is a bare struct wk_worker with only what
 * the turn path reads (limits, vocabulary, context, model name, id,
 * namespace mode, topic names); turns use prompt_tokens, so no tokenizer
 * is needed (rendering messages is covered by the template tests and
 * tests/py/test_worker_e2e.py).  Also a conversation's remembered turn
 * (wk_history): what it keeps, and that it applies in its namespace only.
 */
#define PTEST_MAIN
#include "pl_hash.h"
#include "ptest.h"
#include "wk_internal.h"

#define TW_VOCAB 1000 /* the fake model's vocabulary */
#define TW_CTX 1024   /* its context */

static void tw_worker(struct wk_worker *w) {
    memset(w, 0, sizeof *w);
    snprintf(w->id, sizeof w->id, "test-worker");
    snprintf(w->eng.model_name, sizeof w->eng.model_name, "cai-tiny");
    w->eng.n_vocab = TW_VOCAB;
    w->eng.n_ctx = TW_CTX;
    w->eng.eog[0] = 2;
    w->eng.eog[1] = 3;
    w->eng.n_eog = 2;
    sch_limits_default(&w->eng.lim);
    w->ns_from = WK_NS_FIELD;
    w->ns_fixed = "";
    w->topics.turns = "parley.turns";
}

/* What a test turn carries beyond its ids and prompt. */
typedef struct tw_opts {
    const char *model;    /* `model` (NULL = absent) */
    const char *ns;       /* `namespace` (NULL = absent) */
    uint64_t deadline_ms; /* 0 = none */
    uint64_t created_ms;  /* 0 = unknown */
    int seed;             /* > 0: params.seed */
    uint32_t max_tokens;  /* 0 = default */
    int stream;           /* stream flag */
    const char *stop;     /* one stop string (NULL = none) */
} tw_opts;

/* Encode a prompt_tokens ChatTurn into b. */
static void tw_encode(sch_buf *b, const char *conv, const char *tid, const uint32_t *toks, size_t n,
                      const tw_opts *o) {
    static const tw_opts none;
    if (!o) o = &none;
    sch_turn t;
    sch_turn_init(&t);
    t.conversation_id = sch_str_c(conv);
    t.turn_id = sch_str_c(tid);
    t.prompt_tokens = toks;
    t.n_prompt_tokens = n;
    t.model = sch_str_c(o->model);
    t.ns = sch_str_c(o->ns);
    t.deadline_ms = o->deadline_ms;
    t.created_ms = o->created_ms;
    if (o->seed > 0) t.params.has_seed = true, t.params.seed = (uint64_t)o->seed;
    if (o->max_tokens) t.params.max_tokens = o->max_tokens;
    t.stream = o->stream != 0;
    sch_str stop = sch_str_c(o->stop);
    if (o->stop) t.params.stop = &stop, t.params.n_stop = 1;
    char err[256];
    sch_buf_init(b);
    PT_ASSERT_MSG(sch_turn_encode(&t, b, err, sizeof err) == 0, "encode: %s", err);
}

/* A record at parley.turns[3]@42 with key and value. */
static wk_record tw_rec(const char *key, const void *val, size_t len, const wk_header *h,
                        size_t nh) {
    wk_record r = {"parley.turns", 3, 42, key, key ? strlen(key) : 0, val, len, h, nh, 1700};
    return r;
}

/* Run the turn path on r and require a DeadLetter; decode it into *d. */
static void tw_expect_dead(struct wk_worker *w, const wk_record *r, int code, sch_dead *d) {
    wk_turn *t = (wk_turn *)1;
    wk_out *o = (wk_out *)1;
    PT_EQ_INT(wk_turn_from_record(w, r, 7, NULL, &t, &o), 0);
    PT_ASSERT(t == NULL);
    PT_ASSERT(o != NULL);
    PT_EQ_INT(o->dlq, 1);
    PT_EQ_INT(o->json, 0); /* DeadLetters are always msgpack */
    PT_EQ_INT(o->partition, r->partition);
    PT_EQ_INT(o->offset, r->offset);
    PT_EQ_INT(o->gen, 7);
    PT_EQ_INT(o->key_len, r->key ? r->key_len : 0);
    if (r->key) PT_ASSERT(!memcmp(o->key, r->key, r->key_len));
    else PT_ASSERT(o->key == NULL);
    char err[256];
    PT_ASSERT_MSG(sch_dead_decode(o->val.data, o->val.len, NULL, d, err, sizeof err) == 0,
                  "DeadLetter does not decode: %s", err);
    if (code) PT_EQ_INT(d->error_code, code);
    PT_ASSERT(d->error_code != 0);
    PT_ASSERT(d->reason.len > 0);
    PT_EQ_STR(d->topic.ptr, r->topic);
    PT_EQ_INT(d->partition, r->partition);
    PT_EQ_INT(d->offset, r->offset);
    PT_EQ_INT(d->timestamp_ms, r->timestamp_ms);
    PT_EQ_INT(d->value_size, r->value ? r->len : 0);
    PT_EQ_STR(d->worker.ptr, "test-worker");
    /* a turn whose ids could be read also gets an error TurnResult, the
     * same code, on the responses topic for the same offset */
    wk_out *x = o->next;
    if (d->error_code == SCH_E_KEY_MISMATCH) {
        PT_ASSERT(!x); /* its ids are not its key's */
    } else {
        PT_ASSERT_MSG(x || !d->turn_id.ptr, "a refused turn with ids has no error result");
    }
    if (x) {
        sch_result res;
        PT_EQ_INT(x->dlq, 0);
        PT_ASSERT(x->next == NULL);
        PT_EQ_INT(x->partition, r->partition);
        PT_EQ_INT(x->offset, r->offset);
        PT_EQ_INT(x->gen, 7);
        PT_ASSERT_MSG(sch_result_decode(x->val.data, x->val.len, NULL, &res, err, sizeof err) == 0,
                      "error result does not decode: %s", err);
        PT_ASSERT(res.has_error);
        PT_EQ_INT(res.error_code, d->error_code);
        PT_EQ_INT(res.finish_reason, SCH_FINISH_ERROR);
        if (d->turn_id.ptr) { /* (a DeadLetter too large for them drops them) */
            PT_EQ_STR(res.turn_id.ptr, d->turn_id.ptr);
            PT_EQ_STR(res.conversation_id.ptr, d->conversation_id.ptr);
        }
        sch_result_free(&res);
        wk_out_free(x);
    }
    wk_out_free(o);
}

static const uint32_t tw_toks[] = {10, 11, 12, 13, 14};

PT_TEST(valid_turn_carries_record_and_params) {
    struct wk_worker w;
    tw_worker(&w);
    sch_buf b;
    tw_opts op = {.created_ms = 123456, .max_tokens = 20, .stream = 1, .stop = "\nUser:"};
    tw_encode(&b, "conv-1", "turn-1", tw_toks, 5, &op);
    const char *tpv = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    wk_header h[] = {{SCH_HEADER_CONTENT_TYPE, SCH_CONTENT_TYPE, strlen(SCH_CONTENT_TYPE)},
                     {SCH_HEADER_TRACEPARENT, tpv, strlen(tpv)}};
    wk_record r = tw_rec("conv-1", b.data, b.len, h, 2);
    wk_turn *t = NULL;
    wk_out *o = NULL;
    PT_EQ_INT(wk_turn_from_record(&w, &r, 5, NULL, &t, &o), 0);
    PT_ASSERT(o == NULL);
    PT_ASSERT(t != NULL);
    PT_ASSERT(t->w == &w);
    PT_EQ_INT(t->partition, 3);
    PT_EQ_INT(t->offset, 42);
    PT_EQ_INT(t->gen, 5);
    PT_EQ_STR(t->tp, tpv);
    PT_EQ_STR(t->conv_id, "conv-1");
    PT_EQ_STR(t->turn_id, "turn-1");
    PT_EQ_STR(t->ns, SCH_DEFAULT_NAMESPACE);
    PT_EQ_INT(t->n_prompt, 5);
    for (int i = 0; i < 5; i++) PT_EQ_INT(t->prompt[i], tw_toks[i]);
    PT_EQ_INT(t->max_tokens, 20);
    PT_ASSERT(t->stream);
    PT_ASSERT(!t->json_out);
    PT_EQ_INT(t->n_stop, 1);
    PT_EQ_STR(t->stop[0], "\nUser:");
    PT_EQ_INT(t->sampling.n_stop, 2); /* the model's end-of-generation ids */
    PT_EQ_INT(t->sampling.stop[0], 2);
    PT_EQ_INT(t->sampling.stop[1], 3);
    uint64_t fnv = pl_fnv1a64_str(PL_FNV64_SEED, "turn-1"); /* no seed: FNV-1a of the turn id */
    PT_ASSERT(t->sampling.seed == fnv);
    PT_EQ_INT(t->deadline_us, 0);
    PT_EQ_INT(t->queued_unix_ms, 123456); /* created_ms wins over the timestamp */
    PT_EQ_INT(t->sched_id, 0);
    wk_turn_free(t);
    sch_buf_free(&b);
}

PT_TEST(valid_turn_details) {
    struct wk_worker w;
    tw_worker(&w);
    sch_buf b;
    /* an explicit seed, the served model named, a future deadline, no
     * created_ms (the record timestamp counts), a bad traceparent
     * (ignored, never copied) and no headers otherwise */
    tw_opts op = {.model = "cai-tiny", .seed = 99, .deadline_ms = 4102444800000ull};
    tw_encode(&b, "c", "t", tw_toks, 1, &op);
    wk_header h[] = {{SCH_HEADER_TRACEPARENT, "zz-bogus", 8}};
    wk_record r = tw_rec("c", b.data, b.len, h, 1);
    wk_turn *t = NULL;
    wk_out *o = NULL;
    PT_EQ_INT(wk_turn_from_record(&w, &r, 1, NULL, &t, &o), 0);
    PT_ASSERT(t && !o);
    PT_EQ_STR(t->tp, "");
    PT_ASSERT(t->sampling.seed == 99);
    PT_ASSERT(t->deadline_us > 0);
    PT_EQ_INT(t->queued_unix_ms, 1700);
    wk_turn_free(t);
    sch_buf_free(&b);
}

/* The template's end-of-turn text (transcript: "\nUser:") is a stop string
 * of every turn, whatever the record asks: added after the record's own,
 * never twice; a template that ends turns with a token adds none. */
PT_TEST(template_end_of_turn_is_a_stop_of_every_turn) {
    struct wk_worker w;
    tw_worker(&w);
    const char *cases[][2] = {{NULL, NULL}, {"END", NULL}, {"\nUser:", NULL}};
    for (int tmpl = 0; tmpl <= 1; tmpl++) {
        w.eng.turn_stop = tmpl ? "\nUser:" : NULL;
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            sch_buf b;
            tw_opts op = {.stop = cases[i][0]};
            tw_encode(&b, "c", "t", tw_toks, 1, &op);
            wk_record r = tw_rec("c", b.data, b.len, NULL, 0);
            wk_turn *t = NULL;
            wk_out *o = NULL;
            PT_EQ_INT(wk_turn_from_record(&w, &r, 1, NULL, &t, &o), 0);
            PT_ASSERT(t && !o);
            int own = cases[i][0] != NULL, dup = own && !strcmp(cases[i][0], "\nUser:");
            PT_EQ_INT(t->n_stop, own + (tmpl && !dup));
            if (own) PT_EQ_STR(t->stop[0], cases[i][0]);
            if (tmpl) PT_EQ_STR(t->stop[t->n_stop - 1], "\nUser:");
            wk_turn_free(t);
            sch_buf_free(&b);
        }
    }
}

PT_TEST(json_turn_and_json_reply) {
    struct wk_worker w;
    tw_worker(&w);
    const char *js = "{\"v\":1,\"conversation_id\":\"cj\",\"turn_id\":\"tj\","
                     "\"prompt_tokens\":[1,2,3],\"params\":{\"max_tokens\":4}}";
    wk_header h[] = {
        {SCH_HEADER_CONTENT_TYPE, SCH_CONTENT_TYPE_JSON, strlen(SCH_CONTENT_TYPE_JSON)},
        {SCH_HEADER_ACCEPT, "application/json", 16}};
    wk_record r = tw_rec("cj", js, strlen(js), h, 2);
    wk_turn *t = NULL;
    wk_out *o = NULL;
    PT_EQ_INT(wk_turn_from_record(&w, &r, 1, NULL, &t, &o), 0);
    PT_ASSERT(t && !o);
    PT_ASSERT(t->json_out);
    PT_EQ_INT(t->n_prompt, 3);
    PT_EQ_INT(t->max_tokens, 4);
    wk_turn_free(t);
    /* not JSON under the JSON content type: a DeadLetter, like bad msgpack */
    r = tw_rec("cj", "{nope", 5, h, 2);
    sch_dead d;
    tw_expect_dead(&w, &r, SCH_E_BAD_JSON, &d);
    sch_dead_free(&d);
}

PT_TEST(header_lookup_takes_the_last_exact_name) {
    wk_header h[] = {
        {"accept", "a", 1}, {"Accept", "b", 1}, {"accept", "c", 1}, {"content-type", NULL, 0}};
    wk_record r = tw_rec("k", NULL, 0, h, 4);
    const wk_header *x = wk_record_header(&r, "accept");
    PT_ASSERT(x && !memcmp(x->value, "c", 1));
    x = wk_record_header(&r, "Accept");
    PT_ASSERT(x && !memcmp(x->value, "b", 1));
    x = wk_record_header(&r, "content-type");
    PT_ASSERT(x && x->value == NULL);
    PT_ASSERT(wk_record_header(&r, "traceparent") == NULL);
    r.n_headers = 0;
    PT_ASSERT(wk_record_header(&r, "accept") == NULL);
}

PT_TEST(bad_records_become_dead_letters) {
    struct wk_worker w;
    tw_worker(&w);
    sch_buf b;
    sch_dead d;
    tw_encode(&b, "conv-1", "turn-1", tw_toks, 5, NULL);

    /* undecodable value: a byte that is not msgpack (so not a map) */
    wk_record r = tw_rec("conv-1", "\xc1", 1, NULL, 0);
    tw_expect_dead(&w, &r, SCH_E_NOT_MAP, &d);
    PT_ASSERT(d.value.len == 1 && d.value.ptr[0] == '\xc1');
    PT_ASSERT(d.conversation_id.ptr == NULL); /* not decodable: no ids */
    sch_dead_free(&d);

    /* null value, no key */
    r = tw_rec(NULL, NULL, 0, NULL, 0);
    tw_expect_dead(&w, &r, 0, &d);
    PT_ASSERT(d.value.ptr == NULL && d.key.ptr == NULL);
    sch_dead_free(&d);

    /* valid turn without a key, and with another conversation's key */
    r = tw_rec(NULL, b.data, b.len, NULL, 0);
    tw_expect_dead(&w, &r, SCH_E_KEY_MISMATCH, &d);
    PT_EQ_STR(d.conversation_id.ptr, "conv-1");
    PT_EQ_STR(d.turn_id.ptr, "turn-1");
    sch_dead_free(&d);
    r = tw_rec("conv-2", b.data, b.len, NULL, 0);
    tw_expect_dead(&w, &r, SCH_E_KEY_MISMATCH, &d);
    PT_ASSERT(d.key.len == 6 && !memcmp(d.key.ptr, "conv-2", 6));
    PT_ASSERT(d.value.len == b.len && !memcmp(d.value.ptr, b.data, b.len));
    sch_dead_free(&d);

    /* a content type the worker does not read */
    wk_header ct[] = {{SCH_HEADER_CONTENT_TYPE, "text/plain", 10}};
    r = tw_rec("conv-1", b.data, b.len, ct, 1);
    tw_expect_dead(&w, &r, SCH_E_UNSUPPORTED_CONTENT_TYPE, &d);
    PT_EQ_INT(d.n_headers, 1); /* the original headers are kept */
    PT_ASSERT(d.headers[0].name.len == 12 && !memcmp(d.headers[0].name.ptr, "content-type", 12));
    sch_dead_free(&d);
    sch_buf_free(&b);

    /* a model this worker does not serve (quoted, cut, in the reason) */
    tw_opts om = {.model = "gpt-\xc3\xa9-4"};
    tw_encode(&b, "c", "t", tw_toks, 5, &om);
    r = tw_rec("c", b.data, b.len, NULL, 0);
    tw_expect_dead(&w, &r, SCH_E_UNKNOWN_MODEL, &d);
    for (size_t i = 0; i < d.reason.len; i++) /* printable ASCII only */
        PT_ASSERT(d.reason.ptr[i] >= 0x20 && d.reason.ptr[i] < 0x7f);
    sch_dead_free(&d);
    sch_buf_free(&b);

    /* a prompt token outside the vocabulary */
    uint32_t oov[] = {1, TW_VOCAB};
    tw_encode(&b, "c", "t", oov, 2, NULL);
    r = tw_rec("c", b.data, b.len, NULL, 0);
    tw_expect_dead(&w, &r, SCH_E_TOKEN_OUT_OF_VOCAB, &d);
    sch_dead_free(&d);
    sch_buf_free(&b);

    /* prompt + max_tokens over the context */
    static uint32_t many[TW_CTX];
    for (int i = 0; i < TW_CTX; i++) many[i] = (uint32_t)i % TW_VOCAB;
    tw_opts om2 = {.max_tokens = 1};
    tw_encode(&b, "c", "t", many, TW_CTX, &om2);
    r = tw_rec("c", b.data, b.len, NULL, 0);
    tw_expect_dead(&w, &r, SCH_E_CONTEXT_OVERFLOW, &d);
    sch_dead_free(&d);
    sch_buf_free(&b);
}

PT_TEST(expired_turn_gets_an_expired_result) {
    struct wk_worker w;
    tw_worker(&w);
    sch_buf b;
    tw_opts op = {.deadline_ms = 1000}; /* long past */
    tw_encode(&b, "c", "t", tw_toks, 3, &op);
    wk_header h[] = {{SCH_HEADER_ACCEPT, "application/json", 16}};
    for (int json = 0; json < 2; json++) {
        wk_record r = tw_rec("c", b.data, b.len, h, (size_t)json);
        wk_turn *t = NULL;
        wk_out *o = NULL;
        PT_EQ_INT(wk_turn_from_record(&w, &r, 2, NULL, &t, &o), 0);
        PT_ASSERT(!t && o);
        PT_EQ_INT(o->dlq, 0); /* a TurnResult, on the responses topic */
        PT_EQ_INT(o->json, json);
        PT_EQ_INT(o->offset, 42);
        if (!json) {
            sch_result res;
            char err[256];
            PT_EQ_INT(sch_result_decode(o->val.data, o->val.len, NULL, &res, err, sizeof err), 0);
            PT_EQ_INT(res.finish_reason, SCH_FINISH_EXPIRED);
            PT_ASSERT(res.has_error);
            PT_EQ_INT(res.error_code, SCH_E_EXPIRED);
            PT_EQ_INT(res.prompt_tokens, 3);
            PT_EQ_STR(res.worker.ptr, "test-worker");
            sch_result_free(&res);
        } else {
            PT_ASSERT(o->val.len > 0 && o->val.data[0] == '{');
        }
        wk_out_free(o);
    }
    sch_buf_free(&b);
}

PT_TEST(namespace_modes) {
    struct wk_worker w;
    tw_worker(&w);
    sch_buf b;
    sch_dead d;
    tw_opts op = {.ns = "from-record"};
    tw_encode(&b, "c", "t", tw_toks, 2, &op);
    wk_turn *t;
    wk_out *o;

    wk_record r = tw_rec("c", b.data, b.len, NULL, 0); /* field: the record names it */
    PT_EQ_INT(wk_turn_from_record(&w, &r, 1, NULL, &t, &o), 0);
    PT_ASSERT(t && !o);
    PT_EQ_STR(t->ns, "from-record");
    wk_turn_free(t);

    w.ns_from = WK_NS_HEADER; /* header: only the gateway's header counts */
    tw_expect_dead(&w, &r, SCH_E_MISSING_FIELD, &d);
    sch_dead_free(&d);
    wk_header empty[] = {{WK_HEADER_NAMESPACE, "", 0}};
    r = tw_rec("c", b.data, b.len, empty, 1);
    tw_expect_dead(&w, &r, SCH_E_MISSING_FIELD, &d);
    sch_dead_free(&d);
    wk_header nul[] = {{WK_HEADER_NAMESPACE, "te\0nant", 7}};
    r = tw_rec("c", b.data, b.len, nul, 1);
    tw_expect_dead(&w, &r, SCH_E_MISSING_FIELD, &d);
    sch_dead_free(&d);
    char longns[ENG_SCHED_NS_MAX + 2];
    memset(longns, 'n', sizeof longns);
    wk_header lng[] = {{WK_HEADER_NAMESPACE, longns, sizeof longns}};
    r = tw_rec("c", b.data, b.len, lng, 1);
    tw_expect_dead(&w, &r, SCH_E_STRING_TOO_LONG, &d);
    sch_dead_free(&d);
    wk_header good[] = {{WK_HEADER_NAMESPACE, "tenant-a", 8}};
    r = tw_rec("c", b.data, b.len, good, 1);
    PT_EQ_INT(wk_turn_from_record(&w, &r, 1, NULL, &t, &o), 0);
    PT_ASSERT(t && !o);
    PT_EQ_STR(t->ns, "tenant-a");
    wk_turn_free(t);

    w.ns_from = WK_NS_TOPIC; /* topic: the turns topic's name */
    r = tw_rec("c", b.data, b.len, good, 1);
    PT_EQ_INT(wk_turn_from_record(&w, &r, 1, NULL, &t, &o), 0);
    PT_EQ_STR(t->ns, "parley.turns");
    wk_turn_free(t);

    w.ns_from = WK_NS_FIXED; /* fixed: worker.namespace */
    w.ns_fixed = "fixed-ns";
    PT_EQ_INT(wk_turn_from_record(&w, &r, 1, NULL, &t, &o), 0);
    PT_EQ_STR(t->ns, "fixed-ns");
    wk_turn_free(t);
    sch_buf_free(&b);
}

PT_TEST(hostile_records_still_give_a_dead_letter) {
    struct wk_worker w;
    tw_worker(&w);
    sch_dead d;
    /* a value far above every limit: the DeadLetter keeps a prefix and
     * says how long the original was */
    size_t big = w.eng.lim.max_content_bytes * 3 + 17;
    char *val = malloc(big);
    PT_ASSERT(val);
    memset(val, 0xc1, big);
    wk_record r = tw_rec("k", val, big, NULL, 0);
    tw_expect_dead(&w, &r, 0, &d);
    PT_EQ_INT(d.value.len, w.eng.lim.max_content_bytes);
    PT_EQ_INT(d.value_size, big);
    sch_dead_free(&d);

    /* 100 headers: the DeadLetter keeps the first 64 */
    static wk_header many[100];
    for (int i = 0; i < 100; i++) many[i] = (wk_header){"x-h", "v", 1};
    r = tw_rec("k", "\xc1", 1, many, 100);
    tw_expect_dead(&w, &r, SCH_E_NOT_MAP, &d);
    PT_EQ_INT(d.n_headers, 64);
    sch_dead_free(&d);

    /* a header name over the DeadLetter's own limit and a key that is not
     * text: encoded again without headers and key, never lost */
    char *name = malloc(w.eng.lim.max_id_bytes + 10);
    PT_ASSERT(name);
    memset(name, 'h', w.eng.lim.max_id_bytes + 9);
    name[w.eng.lim.max_id_bytes + 9] = 0;
    wk_header hn[] = {{name, "v", 1}};
    r = tw_rec("k", "\xc1", 1, hn, 1);
    tw_expect_dead(&w, &r, SCH_E_NOT_MAP, &d);
    PT_EQ_INT(d.n_headers, 0);
    sch_dead_free(&d);
    free(name);
    free(val);
}

/* Exactly one outcome, and it decodes. */
static void tw_one_outcome(struct wk_worker *w, const wk_record *r) {
    wk_turn *t = NULL;
    wk_out *o = NULL;
    PT_EQ_INT(wk_turn_from_record(w, r, 1, NULL, &t, &o), 0);
    PT_ASSERT((t != NULL) != (o != NULL));
    if (o) {
        char err[256];
        if (o->dlq) {
            sch_dead d;
            PT_ASSERT_MSG(sch_dead_decode(o->val.data, o->val.len, NULL, &d, err, sizeof err) == 0,
                          "%s", err);
            sch_dead_free(&d);
        }
        wk_out_free(o->next); /* a refused turn's error result */
        wk_out_free(o);
    } else {
        PT_ASSERT(t->n_prompt > 0 && t->n_prompt <= TW_CTX);
        for (int i = 0; i < t->n_prompt; i++)
            PT_ASSERT(t->prompt[i] >= 0 && t->prompt[i] < TW_VOCAB);
        wk_turn_free(t);
    }
}

PT_TEST(random_and_mutated_records_never_crash) {
    struct wk_worker w;
    tw_worker(&w);
    sch_buf b;
    tw_opts op = {.ns = "n", .stop = "x", .seed = 3};
    tw_encode(&b, "conv", "turn", tw_toks, 5, &op);
    static const char *const hnames[] = {SCH_HEADER_CONTENT_TYPE, SCH_HEADER_TRACEPARENT,
                                         SCH_HEADER_ACCEPT, WK_HEADER_NAMESPACE, "other"};
    static const char *const hvals[] = {SCH_CONTENT_TYPE, SCH_CONTENT_TYPE_JSON, "", "\xff\xfe",
                                        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"};
    unsigned char buf[512];
    for (int it = 0; it < 3000; it++) {
        w.ns_from = (wk_ns_from)(pt_rand() % 3); /* field, header, topic */
        size_t len;
        if (it % 2) { /* a valid record with a few bytes changed, cut or extended */
            len = b.len;
            memcpy(buf, b.data, len);
            int n = 1 + (int)(pt_rand() % 4);
            for (int k = 0; k < n; k++) buf[pt_rand() % len] = (unsigned char)pt_rand();
            if (pt_rand() % 4 == 0) len = pt_rand() % len;
            else if (pt_rand() % 4 == 0 && len < sizeof buf - 8)
                for (int k = 0; k < 8; k++) buf[len++] = (unsigned char)pt_rand();
        } else { /* random bytes */
            len = pt_rand() % sizeof buf;
            for (size_t k = 0; k < len; k++) buf[k] = (unsigned char)pt_rand();
        }
        wk_header h[4];
        size_t nh = pt_rand() % 5;
        for (size_t k = 0; k < nh; k++) {
            const char *v = hvals[pt_rand() % 5];
            h[k] = (wk_header){hnames[pt_rand() % 5], pt_rand() % 8 ? v : NULL, 0};
            if (h[k].value) h[k].size = strlen(v);
        }
        const char *key = pt_rand() % 5 ? "conv" : pt_rand() % 2 ? NULL : "\xff";
        int null_value = pt_rand() % 20 == 0; /* a null value has no bytes */
        wk_record r = tw_rec(key, null_value ? NULL : buf, null_value ? 0 : len, h, nh);
        tw_one_outcome(&w, &r);
    }
    sch_buf_free(&b);
}

PT_TEST(history_keeps_its_turn_and_applies_in_its_namespace_only) {
    char text[] = "<bos>User: hi\nAssistant:";
    eng_tmpl_special sp = {0, 5, 2};
    eng_tmpl_turn rt = {NULL, 0, text, strlen(text), &sp, 1, 0, 0, 0};
    int32_t prompt[] = {2, 10, 11, 12}, gen[] = {13, 14};
    wk_history *h = wk_history_new(&rt, 1, "tenant-a", prompt, 4, gen, 2, " yo", 3);
    PT_ASSERT(h != NULL);
    const eng_tmpl_prior *p = wk_history_prior(h, "tenant-a", 8);
    PT_ASSERT(p != NULL);
    PT_EQ_INT(p->n_msgs, 1);
    PT_ASSERT(p->n_text == strlen(text) && !memcmp(p->text, text, p->n_text));
    PT_ASSERT(p->n_spec == 1 && p->spec[0].off == 0 && p->spec[0].len == 5 && p->spec[0].id == 2);
    PT_ASSERT(p->n_prompt == 4 && !memcmp(p->ids, prompt, sizeof prompt));
    PT_ASSERT(p->n_gen == 2 && !memcmp(p->gen, gen, sizeof gen));
    PT_ASSERT(p->n_reply == 3 && !memcmp(p->reply, " yo", 3));
    PT_ASSERT(h->bytes >= sizeof *h + strlen(text) + 3 + 6 * sizeof(int32_t));
    /* another tenant with the same conversation id gets nothing */
    PT_ASSERT(wk_history_prior(h, "tenant-b", 8) == NULL);
    PT_ASSERT(wk_history_prior(h, "tenant", 6) == NULL);
    PT_ASSERT(wk_history_prior(NULL, "tenant-a", 8) == NULL);
    free(h);
    /* raw prompt_tokens turns have no history */
    PT_ASSERT(wk_history_new(&rt, 0, "tenant-a", prompt, 4, gen, 2, "", 0) == NULL);
}

/* A JSON prompt_tokens turn with params {p} at conversation c / turn t. */
static wk_record tw_json12(char *js, size_t cap, const char *p, const wk_header *h) {
    snprintf(js, cap,
             "{\"v\":1,\"conversation_id\":\"c\",\"turn_id\":\"t\",\"prompt_tokens\":[1],"
             "\"params\":{%s}}",
             p);
    return tw_rec("c", js, strlen(js), h, 1);
}

PT_TEST(params_12_carried_or_refused) {
    /* spec 1.2 params: logprobs and n are carried to the scheduler; what the
     * worker cannot honour is a DeadLetter naming the field, never a turn
     * served as if honoured: a constraint without the constraint engine
     * (this bare worker has no vocabulary), tools that are not OpenAI's
     * shape (E_BAD_CONSTRAINT), tools on a prompt_tokens turn (no messages
     * to show them in), n over max_running, logprobs that would not fit a
     * record */
    struct wk_worker w;
    tw_worker(&w);
    w.eng.max_running = 8;
    snprintf(w.eng.cvocab_why, sizeof w.eng.cvocab_why, "no constraint engine here");
    wk_header h[] = {
        {SCH_HEADER_CONTENT_TYPE, SCH_CONTENT_TYPE_JSON, strlen(SCH_CONTENT_TYPE_JSON)}};
    char js[512];
    wk_record r = tw_json12(js, sizeof js, "\"logprobs\":5,\"n\":3,\"max_tokens\":16", h);
    wk_turn *t = NULL;
    wk_out *o = NULL;
    PT_EQ_INT(wk_turn_from_record(&w, &r, 1, NULL, &t, &o), 0);
    PT_ASSERT(t && !o);
    PT_ASSERT(t->logprobs && t->top_logprobs == 5);
    PT_EQ_INT(t->n_choices, 3);
    PT_ASSERT(t->ch != NULL);
    PT_ASSERT(t->cons == NULL); /* no constraint asked for */
    wk_turn_free(t);
    static const struct {
        const char *params;
        int code;
        const char *reason;
    } cases[] = {
        {"\"response_format\":{\"type\":\"json_object\"}", SCH_E_UNSUPPORTED,
         "params.response_format: no constraint engine here"},
        {"\"tools\":\"[]\"", SCH_E_BAD_CONSTRAINT, "params.tools"},
        {"\"tool_choice\":\"\\\"required\\\"\"", SCH_E_BAD_CONSTRAINT, "params.tool_choice"},
        {"\"tools\":\"[{\\\"type\\\":\\\"function\\\",\\\"function\\\":{\\\"name\\\":"
         "\\\"f\\\"}}]\"",
         SCH_E_UNSUPPORTED, "params.tools: a turn with tools needs messages"},
        {"\"n\":9", SCH_E_UNSUPPORTED, "params.n"},
        {"\"logprobs\":20,\"n\":8,\"max_tokens\":1000", SCH_E_OUT_OF_RANGE, "params.logprobs"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        r = tw_json12(js, sizeof js, cases[i].params, h);
        sch_dead d;
        tw_expect_dead(&w, &r, cases[i].code, &d);
        PT_ASSERT_MSG(strstr(d.reason.ptr, cases[i].reason) != NULL, "%s: %s", cases[i].params,
                      d.reason.ptr);
        PT_EQ_STR(d.turn_id.ptr, "t");
        sch_dead_free(&d);
    }
    /* the defaults, and tool_choice "none", are honoured trivially */
    r = tw_json12(js, sizeof js,
                  "\"response_format\":{\"type\":\"text\"},\"n\":1,\"tools\":\"[]\","
                  "\"tool_choice\":\"\\\"none\\\"\",\"parallel_tool_calls\":true",
                  h);
    PT_EQ_INT(wk_turn_from_record(&w, &r, 1, NULL, &t, &o), 0);
    PT_ASSERT(t && !o);
    PT_ASSERT(!t->logprobs && t->n_choices == 1);
    wk_turn_free(t);
}
