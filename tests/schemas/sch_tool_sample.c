/*
 * sch_tool_sample.c -- `sch_tool sample`: deterministic pseudo-random valid
 * records built in C, for the C -> Python half of the interop test.
 *
 * Text mixes ASCII, control characters, U+0000 and 2-, 3- and 4-byte UTF-8
 * including the edges (U+07FF, U+FFFF, U+10FFFF); numbers cover their full
 * ranges so integer width selection is exercised.  The printed view is
 * what a reader must see: the struct with the spec's reader-side defaults
 * applied (namespace "default", value_size = value length when 0).
 */
#include "sch_json.h"
#include "sch_tool.h"

#include <stdlib.h>
#include <string.h>

static uint64_t rng;
static char pool[1 << 20]; /* storage for generated strings */
static size_t pool_used;

static uint64_t rnd(void) {
    uint64_t z = (rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t below(uint64_t n) { return n ? rnd() % n : 0; }

static char *take(size_t n) {
    if (pool_used + n > sizeof pool) { /* samples are far smaller */
        fputs("sch_tool: sample pool exhausted\n", stderr);
        exit(1);
    }
    char *p = pool + pool_used;
    pool_used += n;
    return p;
}

/* Random text of up to max_chars characters; ids = no control chars. */
static sch_str text(size_t max_chars, int id) {
    static const char *const pieces[] = {"a",
                                         "Z",
                                         "0",
                                         " ",
                                         "~",
                                         "\"",
                                         "\\",
                                         "/",
                                         "\xc3\xa9",
                                         "\xdf\xbf",
                                         "\xe2\x82\xac",
                                         "\xef\xbf\xbf",
                                         "\xee\x80\x80",
                                         "\xf0\x9f\x98\x80",
                                         "\xf4\x8f\xbf\xbf",
                                         "\n",
                                         "\t",
                                         "\x01",
                                         "\x7f"};
    size_t npieces = sizeof pieces / sizeof pieces[0] - (id ? 4 : 0);
    size_t n = below(max_chars + 1) + (id ? 1 : 0);
    char *p = take(n * 4 + 2), *o = p;
    for (size_t i = 0; i < n; i++) {
        const char *s = pieces[below(npieces)];
        size_t l = strlen(s);
        memcpy(o, s, l);
        o += l;
    }
    if (!id && below(8) == 0) *o++ = 0; /* an embedded U+0000 */
    sch_str r = {p, (size_t)(o - p)};
    return r;
}

static sch_str bytes(size_t max) {
    size_t n = below(max + 1);
    char *p = take(n + 1);
    for (size_t i = 0; i < n; i++) p[i] = (char)rnd();
    sch_str r = {p, n};
    return r;
}

static sch_str from_set(const char *set, size_t max) {
    size_t n = 1 + below(max), k = strlen(set);
    char *p = take(n);
    for (size_t i = 0; i < n; i++) p[i] = set[below(k)];
    sch_str r = {p, n};
    return r;
}

static uint32_t *tokens(size_t n) {
    uint32_t *t = (uint32_t *)(void *)take((n + 1) * 4 + 4);
    t = (uint32_t *)(((uintptr_t)t + 3) & ~(uintptr_t)3);
    for (size_t i = 0; i < n; i++) t[i] = (uint32_t)(below(3) ? below(1000) : below(0x80000000u));
    return t;
}

/* A number spread over all msgpack int widths. */
static uint64_t wide(void) { return rnd() >> (below(64)); }

static int emit(const sch_buf *b, int rc) {
    if (rc) return 1;
    printf(",\"hex\":");
    sch_json_hex(stdout, b->data, b->len);
    puts("}");
    return 0;
}

/* Random logprobs for n tokens (ids), with up to max_top alternatives. */
static sch_logprob *logprobs(const uint32_t *ids, size_t n, size_t max_top) {
    sch_logprob *lp = (sch_logprob *)(void *)take((n + 1) * sizeof *lp + 16);
    lp = (sch_logprob *)(((uintptr_t)lp + 15) & ~(uintptr_t)15);
    size_t k = below(max_top + 1);
    for (size_t i = 0; i < n; i++) {
        memset(&lp[i], 0, sizeof lp[i]);
        lp[i].id = ids[i];
        lp[i].token = text(4, 0);
        lp[i].logprob = -(double)below(1u << 20) / (1u << 16);
        if (!below(4)) lp[i].bytes = bytes(4);
        if (!k) continue;
        sch_logprob *top = (sch_logprob *)(void *)take((k + 1) * sizeof *top + 16);
        top = (sch_logprob *)(((uintptr_t)top + 15) & ~(uintptr_t)15);
        for (size_t j = 0; j < k; j++) {
            memset(&top[j], 0, sizeof top[j]);
            top[j].id = (uint32_t)below(0x80000000u);
            top[j].token = text(4, 0);
            top[j].logprob = -(double)below(1u << 20) / (1u << 16);
            if (!below(4)) top[j].bytes = bytes(4);
        }
        lp[i].top = top;
        lp[i].n_top = k;
    }
    return lp;
}

static sch_tool_call *tool_calls(size_t n) {
    sch_tool_call *t = (sch_tool_call *)(void *)take((n + 1) * sizeof *t + 16);
    t = (sch_tool_call *)(((uintptr_t)t + 15) & ~(uintptr_t)15);
    for (size_t i = 0; i < n; i++) {
        t[i].id = text(10, 1);
        t[i].name = text(10, 1);
        t[i].arguments = text(30, 0);
    }
    return t;
}

static int sample_turn(sch_buf *b, char *err) {
    sch_turn t;
    sch_turn_init(&t);
    t.conversation_id = text(20, 1);
    t.turn_id = text(20, 1);
    if (below(4)) {
        size_t n = 1 + below(20);
        sch_message *m = (sch_message *)(void *)take((n + 1) * sizeof *m);
        m = (sch_message *)(((uintptr_t)m + 15) & ~(uintptr_t)15);
        for (size_t i = 0; i < n; i++) {
            memset(&m[i], 0, sizeof m[i]);
            m[i].role = (sch_role)below(4);
            m[i].content = text(60, 0);
            if (!below(4)) m[i].tool_calls = text(30, 0);
            if (!below(4)) m[i].tool_call_id = text(10, 1);
        }
        t.messages = m;
        t.n_messages = n;
    } else if (below(3) == 0) {
        t.prompt = text(60, 0);
        if (!t.prompt.len) t.prompt = sch_str_c("x");
    } else {
        t.n_prompt_tokens = 1 + below(50);
        t.prompt_tokens = tokens(t.n_prompt_tokens);
    }
    t.params.max_tokens = (uint32_t)(1 + below(32768));
    t.params.temperature = (double)below(1u << 20) / (1u << 18);
    t.params.top_p = (double)(1 + below(1000)) / 1000.0;
    t.params.top_k = (uint32_t)below(2) ? (uint32_t)below(0x80000000u) : 0;
    t.params.has_seed = below(2);
    t.params.seed = t.params.has_seed ? wide() : 0;
    t.params.n_stop = below(4);
    sch_str *st = (sch_str *)(void *)take(4 * sizeof *st + 16);
    st = (sch_str *)(((uintptr_t)st + 15) & ~(uintptr_t)15);
    for (size_t i = 0; i < t.params.n_stop; i++) st[i] = text(5, 1);
    t.params.stop = st;
    t.params.repetition_penalty = 0.5 + (double)below(1000) / 500.0;
    if (below(2)) {
        t.params.response_format.type = (sch_rf)below(5);
        if (t.params.response_format.type >= SCH_RF_JSON_SCHEMA)
            t.params.response_format.spec = text(40, 1);
    }
    if ((t.params.has_logprobs = below(2))) t.params.top_logprobs = (uint32_t)below(21);
    t.params.n = below(2) ? 1 + (uint32_t)below(16) : 1;
    if (below(3) == 0) t.params.tools = text(40, 1);
    if (below(3) == 0) t.params.tool_choice = text(10, 1);
    t.params.parallel_tool_calls = below(4) != 0;
    t.stream = below(2);
    if (below(2)) t.ns = from_set("abcXYZ019._-", 16);
    if (below(2)) t.deadline_ms = wide();
    if (below(2)) t.created_ms = wide();
    if (below(2)) t.model = text(12, 1);
    if (below(3) == 0) t.service_class = SCH_CLASS_BULK; /* 1.3 */
    int rc = sch_turn_encode(&t, b, err, 256);
    sch_turn view = t;
    if (!view.ns.ptr) view.ns = sch_str_c(SCH_DEFAULT_NAMESPACE);
    fputs("{\"value\":", stdout);
    sch_json_turn(stdout, &view);
    return emit(b, rc);
}

static int sample_chunk(sch_buf *b, char *err) {
    sch_chunk c;
    sch_chunk_init(&c);
    c.conversation_id = text(20, 1);
    c.turn_id = text(20, 1);
    c.attempt = wide();
    c.seq = wide();
    c.text = text(30, 0);
    c.n_tokens = below(12);
    c.tokens = c.n_tokens ? tokens(c.n_tokens) : NULL;
    c.last = below(2);
    if (below(2)) c.index = (uint32_t)below(16);
    if (c.n_tokens && below(2)) {
        c.logprobs = logprobs(c.tokens, c.n_tokens, 20);
        c.n_logprobs = c.n_tokens;
    }
    int rc = sch_chunk_encode(&c, b, err, 256);
    fputs("{\"value\":", stdout);
    sch_json_chunk(stdout, &c);
    return emit(b, rc);
}

static int sample_result(sch_buf *b, char *err) {
    sch_result r;
    sch_result_init(&r);
    r.conversation_id = text(20, 1);
    r.turn_id = text(20, 1);
    r.attempt = wide();
    r.text = text(200, 0);
    r.n_tokens = below(40);
    r.tokens = r.n_tokens ? tokens(r.n_tokens) : NULL;
    r.finish_reason = (sch_finish)below(5);
    r.prompt_tokens = wide();
    r.cached_tokens = r.prompt_tokens ? below(r.prompt_tokens) : 0;
    r.completion_tokens = wide();
    r.queue_ms = wide();
    r.ttft_ms = wide();
    r.total_ms = wide();
    r.worker = text(16, 1);
    if (below(2)) r.model = text(12, 1);
    if (r.finish_reason == SCH_FINISH_ERROR || below(3) == 0) {
        r.has_error = true;
        r.error_code = sch_err_code_at(1 + below(sch_err_count() - 1));
        r.error_message = text(40, 0);
    }
    if (r.n_tokens && below(3) == 0) {
        r.logprobs = logprobs(r.tokens, r.n_tokens, 5);
        r.n_logprobs = r.n_tokens;
    }
    if (below(3) == 0) r.tool_calls = tool_calls(r.n_tool_calls = 1 + below(3));
    if (below(3) == 0) {
        size_t n = 1 + below(4);
        sch_choice *ch = (sch_choice *)(void *)take((n + 1) * sizeof *ch + 16);
        ch = (sch_choice *)(((uintptr_t)ch + 15) & ~(uintptr_t)15);
        for (size_t i = 0; i < n; i++) {
            memset(&ch[i], 0, sizeof ch[i]);
            ch[i].index = (uint32_t)i + 1;
            ch[i].text = text(30, 0);
            ch[i].n_tokens = below(10);
            ch[i].tokens = ch[i].n_tokens ? tokens(ch[i].n_tokens) : NULL;
            ch[i].finish_reason = (sch_finish)below(5);
            if (ch[i].n_tokens && below(2)) {
                ch[i].logprobs = logprobs(ch[i].tokens, ch[i].n_tokens, 3);
                ch[i].n_logprobs = ch[i].n_tokens;
            }
            if (below(3) == 0) ch[i].tool_calls = tool_calls(ch[i].n_tool_calls = 1 + below(2));
        }
        r.choices = ch;
        r.n_choices = n;
    }
    int rc = sch_result_encode(&r, b, err, 256);
    fputs("{\"value\":", stdout);
    sch_json_result(stdout, &r);
    return emit(b, rc);
}

static int sample_dead(sch_buf *b, char *err) {
    sch_dead d;
    sch_header h[4];
    sch_dead_init(&d);
    d.reason = text(60, 0);
    d.error_code = sch_err_code_at(1 + below(sch_err_count() - 1));
    d.topic = from_set("parley.turnsABC-_0", 30);
    d.partition = (int32_t)below(0x80000000u);
    d.offset = (int64_t)(wide() >> 1);
    d.timestamp_ms = below(3) ? (int64_t)(wide() >> 1) : -1;
    if (below(3)) d.key = bytes(24);
    if (below(3)) d.value = bytes(64);
    d.value_size = d.value.len + below(3) * below(1000);
    d.n_headers = below(5);
    for (size_t i = 0; i < d.n_headers; i++) {
        h[i].name = below(3) ? text(10, 1) : bytes(6);
        h[i].value = below(4) ? bytes(20) : (sch_str){NULL, 0};
    }
    d.headers = h;
    if (below(2)) d.conversation_id = text(20, 1);
    if (below(2)) d.turn_id = text(20, 1);
    if (below(2)) d.worker = text(16, 1);
    if (below(2)) d.dead_ms = wide();
    int rc = sch_dead_encode(&d, b, err, 256);
    sch_dead view = d;
    if (!view.value_size) view.value_size = view.value.len;
    fputs("{\"value\":", stdout);
    sch_json_dead(stdout, &view);
    return emit(b, rc);
}

static int sample_cancel(sch_buf *b, char *err) {
    sch_cancel k;
    sch_cancel_init(&k);
    k.conversation_id = text(20, 1);
    k.turn_id = text(20, 1);
    if (below(2)) k.cancelled_ms = wide();
    if (below(2)) k.reason = text(30, 0);
    int rc = sch_cancel_encode(&k, b, err, 256);
    fputs("{\"value\":", stdout);
    sch_json_cancel(stdout, &k);
    return emit(b, rc);
}

int sch_tool_sample(int kind, uint64_t seed) {
    char err[256] = "";
    sch_buf b;
    int rc;
    rng = seed * 0x2545F4914F6CDD1Dull + 1;
    sch_buf_init(&b);
    switch (kind) {
    case 0: rc = sample_turn(&b, err); break;
    case 1: rc = sample_chunk(&b, err); break;
    case 2: rc = sample_result(&b, err); break;
    case 4: rc = sample_cancel(&b, err); break;
    default: rc = sample_dead(&b, err); break;
    }
    if (rc) fprintf(stderr, "sch_tool: encoding failed: %s\n", err);
    sch_buf_free(&b);
    return rc;
}
