/*
 * constraint.c -- the vocabulary as llguidance sees it, compiling specs
 * into matchers, and the synchronous matcher operations (eng_constraint.h).
 * constraint_pool.c runs the same mask computation on pool threads.
 *
 * Compilation goes through llg_new_matcher with the vocab's tokenizer,
 * stderr logging off (library code never prints) and the grammar-size
 * limit of eng_constraint.h; JSON kinds get the compact-format options
 * injected into the schema's top-level object as llguidance's
 * "x-guidance" key (unless the schema has one).  Errors come back as the
 * matcher's error string; only its first line is kept (llguidance may
 * append a backtrace after a caught panic).
 *
 * Built without llguidance, every constructor returns
 * ENG_CONSTRAINT_EUNAVAIL and the rest are inert stubs.
 */
#include "eng_constraint.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pl_err.h"

const char *eng_constraint_kind_name(eng_constraint_kind k) {
    switch (k) {
    case ENG_CONSTRAINT_NONE: return "none";
    case ENG_CONSTRAINT_JSON_OBJECT: return "json_object";
    case ENG_CONSTRAINT_JSON_SCHEMA: return "json_schema";
    case ENG_CONSTRAINT_REGEX: return "regex";
    case ENG_CONSTRAINT_LARK: return "lark";
    }
    return "unknown";
}

#ifdef PARLEY_HAVE_LLGUIDANCE

#include <errno.h>

#include "constraint_int.h"
#include "pl_time.h"

int eng_constraint_available(void) { return 1; }

const char *eng_constraint_version(void) { return llg_get_version(); }

/* An llguidance message on one line (newlines and runs of spaces as one
 * space, a caught panic's backtrace dropped), prefixed. */
static int cons_err(char *err, size_t errlen, int code, const char *what, const char *msg) {
    char line[PL_ERR_LEN];
    size_t o = 0;
    if (!msg) msg = "unknown error";
    const char *end = strstr(msg, "<backtrace>");
    for (const char *p = msg; *p && (!end || p < end) && o + 1 < sizeof line; p++) {
        char ch = *p == '\n' || *p == '\r' || *p == '\t' ? ' ' : *p;
        if (ch == ' ' && (o == 0 || line[o - 1] == ' ')) continue;
        line[o++] = ch;
    }
    while (o && line[o - 1] == ' ') o--;
    line[o] = 0;
    return pl_errf(err, errlen, code, "constraint: %s: %s", what, line);
}

/* ---- vocabulary ---- */

/* Bytes of token id as llguidance's trie should hold them (see eng_constraint.h). */
static int vocab_token_bytes(const eng_tok *t, int32_t id, char *out, size_t cap, size_t *n) {
    int ty = eng_tok_type(t, id);
    if (ty == ENG_TOK_TYPE_CONTROL || ty == ENG_TOK_TYPE_UNKNOWN || ty == ENG_TOK_TYPE_UNUSED) {
        const char *txt = eng_tok_text(t, id);
        size_t l = txt ? strlen(txt) : 0;
        *n = l + 1;
        if (*n > cap) return -1;
        out[0] = (char)0xFF; /* toktrie's special-token marker */
        memcpy(out + 1, txt, l);
        return 0;
    }
    return eng_tok_piece(t, id, out, cap, n) == 0 ? 0 : -1;
}

/* 1 when id is one of the n end-of-generation ids. */
static int vocab_is_eog(const int32_t *eog, int n, int32_t id) {
    for (int i = 0; i < n; i++)
        if (eog[i] == id) return 1;
    return 0;
}

int eng_constraint_vocab_new(const eng_tok *tok, int n_vocab, eng_constraint_vocab **out, char *err,
                             size_t errlen) {
    if (out) *out = NULL;
    if (!tok || !out || n_vocab < 1)
        return pl_errf(err, errlen, ENG_CONSTRAINT_EINVAL,
                       "constraint: no tokenizer or vocabulary");
    int nt = eng_tok_n_vocab(tok);
    int V = nt > n_vocab ? nt : n_vocab;
    uint32_t *lens = calloc((size_t)V, sizeof *lens);
    size_t cap = (size_t)V * 8 + 1024, used = 0, piece_cap = eng_tok_max_piece(tok) + 256;
    char *bytes = malloc(cap);
    int32_t eog[64];
    int n_eog = eng_tok_eog_ids(tok, eog, 64);
    eng_constraint_vocab *v = calloc(1, sizeof *v);
    if (!lens || !bytes || !v) goto nomem;
    if (!(v->special = malloc((size_t)nt * sizeof *v->special))) goto nomem;
    for (int id = 0; id < nt; id++) {
        if (cap - used < piece_cap) {
            char *b = realloc(bytes, cap * 2);
            if (!b) goto nomem;
            bytes = b;
            cap *= 2;
        }
        size_t n = 0;
        if (vocab_token_bytes(tok, id, bytes + used, cap - used, &n) != 0) n = 0;
        if (n && (unsigned char)bytes[used] == 0xFF && !vocab_is_eog(eog, n_eog, id))
            v->special[v->n_special++] = id;
        lens[id] = (uint32_t)n;
        used += n;
    }
    /* ids past the tokenizer (padded output rows): no bytes, never allowed */
    LlgTokenizerInitV2 init;
    memset(&init, 0, sizeof init);
    init.struct_size = sizeof init;
    init.vocab_size = (uint32_t)V;
    init.tok_eos = n_eog > 0 ? (LlgToken)eog[0] : 0xFFFFFFFFu;
    init.token_lens = lens;
    init.token_bytes = (const uint8_t *)bytes;
    init.use_approximate_greedy_tokenize_fn = true;
    if (n_eog > 1) {
        init.tok_eos_extra = (const LlgToken *)(eog + 1);
        init.tok_eos_extra_count = (uint32_t)(n_eog - 1);
    }
    char msg[PL_ERR_LEN] = "";
    v->tok = llg_new_tokenizer_v2(&init, msg, sizeof msg);
    free(lens);
    free(bytes);
    if (!v->tok) {
        free(v->special);
        free(v);
        return cons_err(err, errlen, ENG_CONSTRAINT_EINVAL, "cannot build the tokenizer", msg);
    }
    v->n_vocab = V;
    v->words = ((size_t)V + 31) / 32;
    v->n_eog = n_eog < 0 ? 0 : n_eog > 64 ? 64 : n_eog;
    memcpy(v->eog, eog, (size_t)v->n_eog * sizeof *eog);
    *out = v;
    return 0;
nomem:
    free(lens);
    free(bytes);
    if (v) free(v->special);
    free(v);
    return pl_errf(err, errlen, ENG_CONSTRAINT_ENOMEM,
                   "constraint: out of memory for the vocabulary");
}

void eng_constraint_vocab_free(eng_constraint_vocab *v) {
    if (!v) return;
    llg_free_tokenizer(v->tok);
    free(v->special);
    free(v);
}

int eng_constraint_vocab_size(const eng_constraint_vocab *v) { return v ? v->n_vocab : 0; }

size_t eng_constraint_mask_words(const eng_constraint_vocab *v) { return v ? v->words : 0; }

/* ---- compiling ---- */

/* llguidance's options for JSON output (eng_constraint.h "Kinds"). */
#define CONS_JSON_OPTS                                                         \
    "\"x-guidance\":{\"whitespace_flexible\":false,\"item_separator\":\", \"," \
    "\"key_separator\":\": \"}"

/* NUL-terminated data for llg_new_matcher (malloc'd) and its type. */
static char *cons_source(const eng_constraint_spec *spec, const char **type) {
    const char *t = spec->text ? spec->text : "";
    size_t n = spec->text ? spec->len : 0, extra = sizeof CONS_JSON_OPTS + 64;
    char *s = malloc(n + extra);
    if (!s) return NULL;
    switch (spec->kind) {
    case ENG_CONSTRAINT_JSON_OBJECT:
        *type = "json";
        snprintf(s, n + extra, "{" CONS_JSON_OPTS ",\"type\":\"object\"}");
        return s;
    case ENG_CONSTRAINT_JSON_SCHEMA: {
        *type = "json";
        size_t i = 0;
        while (i < n && (t[i] == ' ' || t[i] == '\t' || t[i] == '\n' || t[i] == '\r')) i++;
        size_t e = n; /* the options go before the closing brace, so positions
                       * in llguidance's messages stay the user's */
        while (e > i &&
               (t[e - 1] == ' ' || t[e - 1] == '\t' || t[e - 1] == '\n' || t[e - 1] == '\r'))
            e--;
        int has_opts = 0;
        for (size_t j = 0; j + 12 <= n && !has_opts; j++)
            has_opts = !memcmp(t + j, "\"x-guidance\"", 12);
        if (i < n && t[i] == '{' && e > i + 1 && t[e - 1] == '}' && !has_opts) {
            size_t k = e - 1;
            while (k > i + 1 &&
                   (t[k - 1] == ' ' || t[k - 1] == '\t' || t[k - 1] == '\n' || t[k - 1] == '\r'))
                k--;
            int empty = k == i + 1; /* "{ }" */
            memcpy(s, t, e - 1);
            size_t o = e - 1;
            if (!empty) s[o++] = ',';
            memcpy(s + o, CONS_JSON_OPTS, sizeof CONS_JSON_OPTS - 1);
            o += sizeof CONS_JSON_OPTS - 1;
            memcpy(s + o, t + e - 1, n - (e - 1));
            o += n - (e - 1);
            s[o] = 0;
            return s;
        }
        memcpy(s, t, n);
        s[n] = 0;
        return s;
    }
    case ENG_CONSTRAINT_REGEX: *type = "regex"; break;
    case ENG_CONSTRAINT_LARK: *type = "lark"; break;
    default: free(s); return NULL;
    }
    memcpy(s, t, n);
    s[n] = 0;
    return s;
}

static eng_constraint *cons_alloc(const eng_constraint_vocab *v, eng_constraint_kind kind) {
    eng_constraint *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->v = v;
    c->kind = kind;
    c->cap_masks = 1;
    c->masks = malloc(v->words * sizeof(uint32_t));
    if (!c->masks) {
        free(c);
        return NULL;
    }
    return c;
}

int eng_constraint_new(const eng_constraint_vocab *v, const eng_constraint_spec *spec,
                       eng_constraint **out, char *err, size_t errlen) {
    if (out) *out = NULL;
    if (!v || !spec || !out)
        return pl_errf(err, errlen, ENG_CONSTRAINT_EINVAL, "constraint: no vocabulary or spec");
    if (spec->kind < ENG_CONSTRAINT_JSON_OBJECT || spec->kind > ENG_CONSTRAINT_LARK)
        return pl_errf(err, errlen, ENG_CONSTRAINT_EINVAL, "constraint: unknown kind %d",
                       (int)spec->kind);
    if (spec->len > ENG_CONSTRAINT_MAX_BYTES)
        return pl_errf(err, errlen, ENG_CONSTRAINT_ETOOBIG,
                       "constraint: %s of %zu bytes is over the limit of %d bytes",
                       eng_constraint_kind_name(spec->kind), spec->len, ENG_CONSTRAINT_MAX_BYTES);
    if (spec->len && !spec->text)
        return pl_errf(err, errlen, ENG_CONSTRAINT_EINVAL, "constraint: no text");
    if (spec->kind != ENG_CONSTRAINT_JSON_OBJECT && spec->len && memchr(spec->text, 0, spec->len))
        return pl_errf(err, errlen, ENG_CONSTRAINT_EINVAL, "constraint: %s contains a NUL byte",
                       eng_constraint_kind_name(spec->kind));
    if (spec->kind != ENG_CONSTRAINT_JSON_OBJECT && spec->len == 0)
        return pl_errf(err, errlen, ENG_CONSTRAINT_ECOMPILE, "constraint: empty %s",
                       eng_constraint_kind_name(spec->kind));
    const char *type = NULL;
    char *src = cons_source(spec, &type);
    eng_constraint *c = cons_alloc(v, spec->kind);
    if (!src || !c) {
        free(src);
        eng_constraint_free(c);
        return pl_errf(err, errlen, ENG_CONSTRAINT_ENOMEM, "constraint: out of memory");
    }
    LlgConstraintInit init;
    memset(&init, 0, sizeof init);
    llg_constraint_init_set_defaults(&init, v->tok);
    init.log_buffer_level = 0;
    init.log_stderr_level = 0;
    init.limits.max_grammar_size = ENG_CONSTRAINT_MAX_GRAMMAR;
    init.limits.verbose_errors = false;
    c->m = llg_new_matcher(&init, type, src);
    free(src);
    if (!c->m || llg_matcher_is_error(c->m)) {
        int rc = c->m ? cons_err(err, errlen, ENG_CONSTRAINT_ECOMPILE,
                                 eng_constraint_kind_name(spec->kind), llg_matcher_get_error(c->m))
                      : pl_errf(err, errlen, ENG_CONSTRAINT_ENOMEM, "constraint: out of memory");
        eng_constraint_free(c);
        return rc;
    }
    if (llg_matcher_get_mask_byte_size(c->m) != v->words * sizeof(uint32_t)) {
        eng_constraint_free(c);
        return pl_errf(err, errlen, ENG_CONSTRAINT_EINVAL,
                       "constraint: llguidance's mask has another size than the vocabulary's");
    }
    c->cancel = llg_matcher_get_cancellation_handle(c->m);
    *out = c;
    return 0;
}

int eng_constraint_clone(const eng_constraint *c, eng_constraint **out, char *err, size_t errlen) {
    if (out) *out = NULL;
    if (!c || !out || c->busy)
        return pl_errf(err, errlen, ENG_CONSTRAINT_EINVAL,
                       "constraint: clone of a busy constraint");
    if (c->dead) return pl_errf(err, errlen, ENG_CONSTRAINT_EINVAL, "%s", c->dead_msg);
    eng_constraint *d = cons_alloc(c->v, c->kind);
    if (!d) return pl_errf(err, errlen, ENG_CONSTRAINT_ENOMEM, "constraint: out of memory");
    d->m = llg_clone_matcher(c->m);
    if (!d->m || llg_matcher_is_error(d->m)) {
        int rc = cons_err(err, errlen, ENG_CONSTRAINT_EMATCH, "clone",
                          d->m ? llg_matcher_get_error(d->m) : "out of memory");
        eng_constraint_free(d);
        return rc;
    }
    d->cancel = llg_matcher_get_cancellation_handle(d->m);
    d->budget_us = c->budget_us;
    /* the current state's mask, when known, carries over */
    if (c->n_masks >= 1) {
        memcpy(d->masks, c->mptr[0], c->v->words * sizeof(uint32_t));
        d->mptr[0] = d->masks;
        d->n_masks = 1;
    }
    *out = d;
    return 0;
}

void eng_constraint_cancel_job(eng_constraint *c); /* constraint_pool.c */

void eng_constraint_free(eng_constraint *c) {
    if (!c) return;
    if (c->busy) eng_constraint_cancel_job(c);
    llg_free_cancellation_handle(c->cancel);
    llg_free_matcher(c->m);
    free(c->masks);
    free(c);
}

eng_constraint_kind eng_constraint_kind_of(const eng_constraint *c) {
    return c ? c->kind : ENG_CONSTRAINT_NONE;
}

void cons_kill(eng_constraint *c, int code, const char *msg) {
    if (c->dead) return;
    c->dead = 1;
    c->dead_code = code;
    snprintf(c->dead_msg, sizeof c->dead_msg, "%s", msg);
}

/* ---- masks ---- */

/* Room for n masks (the pointers of the known ones follow a move). */
static int cons_reserve(eng_constraint *c, int n) {
    if (n <= c->cap_masks) return 0;
    uint32_t *m = realloc(c->masks, (size_t)n * c->v->words * sizeof(uint32_t));
    if (!m) return -1;
    c->masks = m;
    c->cap_masks = n;
    for (int i = 0; i < c->n_masks; i++) c->mptr[i] = c->masks + (size_t)i * c->v->words;
    return 0;
}

int cons_advance(eng_constraint *c, int64_t budget_us, clockid_t ck,
                 void (*mark)(eng_constraint *, int64_t), int64_t *cpu_total_us,
                 int64_t *cpu_max_us, int *n_done, char *msg, size_t msglen) {
    size_t bytes = c->v->words * sizeof(uint32_t);
    for (;;) {
        if (c->n_masks == c->consumed) { /* the current state's mask is unknown */
            int i = c->n_masks;
            if (cons_reserve(c, i + 1) != 0)
                return pl_errf(msg, msglen, ENG_CONSTRAINT_ENOMEM,
                               "constraint: out of memory for masks");
            uint32_t *dst = c->masks + (size_t)i * c->v->words;
            int64_t t0 = pl_clock_us(ck);
            if (mark) mark(c, t0);
            int r = llg_matcher_compute_mask_into(c->m, dst, bytes);
            int64_t dt = pl_clock_us(ck) - t0;
            if (dt > *cpu_max_us) *cpu_max_us = dt;
            *cpu_total_us += dt;
            ++*n_done;
            if ((r != 0 && llg_matcher_is_cancelled(c->m)) || (budget_us > 0 && dt > budget_us))
                return pl_errf(
                    msg, msglen, ENG_CONSTRAINT_EBUDGET,
                    "constraint: computing a token mask took more than the time budget of %.1f "
                    "ms of CPU",
                    (double)budget_us / 1000.0);
            if (r != 0)
                return cons_err(msg, msglen, ENG_CONSTRAINT_EMATCH, "mask",
                                llg_matcher_get_error(c->m));
            /* special tokens: llguidance's mask may allow them by their
             * 0xFF-marked bytes where its matcher then refuses them (a
             * negated Lark lexeme matches any bytes: fuzz_constraint,
             * corpus/lark-negated-special); a constraint never produces the
             * others, and the end only where the matcher accepts */
            for (int k = 0; k < c->v->n_special; k++)
                dst[c->v->special[k] >> 5] &= ~(1u << (c->v->special[k] & 31));
            if (!llg_matcher_is_accepting(c->m))
                for (int k = 0; k < c->v->n_eog; k++)
                    dst[c->v->eog[k] >> 5] &= ~(1u << (c->v->eog[k] & 31));
            c->mptr[i] = dst;
            c->n_masks = i + 1;
        }
        if (c->consumed >= c->n_ahead) return 0;
        int32_t t = c->ahead[c->consumed];
        if (t < 0 || t >= c->v->n_vocab || !eng_constraint_allows(c->mptr[c->consumed], t)) {
            c->n_ahead = c->consumed; /* the look-ahead ends at a refused token */
            return 0;
        }
        if (llg_matcher_consume_token(c->m, (uint32_t)t) != 0)
            return cons_err(msg, msglen, ENG_CONSTRAINT_EMATCH, "look-ahead",
                            llg_matcher_get_error(c->m));
        c->consumed++;
    }
}

int cons_rollback(eng_constraint *c, char *msg, size_t msglen) {
    int n = c->consumed;
    c->consumed = 0;
    c->n_ahead = 0;
    if (n && llg_matcher_rollback(c->m, (size_t)n) != 0)
        return cons_err(msg, msglen, ENG_CONSTRAINT_EMATCH, "rollback",
                        llg_matcher_get_error(c->m));
    return 0;
}

int eng_constraint_mask(eng_constraint *c, const uint32_t **mask, char *err, size_t errlen) {
    if (!c || c->busy)
        return pl_errf(err, errlen, ENG_CONSTRAINT_EINVAL, "constraint: busy or missing");
    if (c->dead) return pl_errf(err, errlen, c->dead_code, "%s", c->dead_msg);
    int64_t cpu = 0, cpu_max = 0;
    int n = 0;
    char msg[PL_ERR_LEN];
    c->n_ahead = 0;
    int rc = cons_advance(c, 0, CLOCK_THREAD_CPUTIME_ID, NULL, &cpu, &cpu_max, &n, msg, sizeof msg);
    if (rc) {
        cons_kill(c, rc, msg);
        return pl_errf(err, errlen, rc, "%s", msg);
    }
    *mask = c->mptr[0];
    return 0;
}

int eng_constraint_validate(eng_constraint *c, const int32_t *toks, int n) {
    if (!c || c->busy || c->dead || n < 0) return ENG_CONSTRAINT_EINVAL;
    if (n == 0) return 0;
    int r = llg_matcher_validate_tokens(c->m, (const uint32_t *)toks, (size_t)n);
    if (r < 0) {
        char msg[PL_ERR_LEN];
        cons_err(msg, sizeof msg, ENG_CONSTRAINT_EMATCH, "validate", llg_matcher_get_error(c->m));
        cons_kill(c, ENG_CONSTRAINT_EMATCH, msg);
        return ENG_CONSTRAINT_EMATCH;
    }
    return r;
}

int eng_constraint_commit(eng_constraint *c, const int32_t *toks, int n, char *err, size_t errlen) {
    if (!c || c->busy || n < 0)
        return pl_errf(err, errlen, ENG_CONSTRAINT_EINVAL, "constraint: busy or missing");
    if (c->dead) return pl_errf(err, errlen, c->dead_code, "%s", c->dead_msg);
    c->n_masks = 0; /* masks of the old state are stale */
    if (n == 0) return 0;
    for (int i = 0; i < n; i++)
        if (toks[i] < 0 || toks[i] >= c->v->n_vocab) {
            cons_kill(c, ENG_CONSTRAINT_EMATCH, "constraint: token outside the vocabulary");
            return pl_errf(err, errlen, ENG_CONSTRAINT_EMATCH, "%s", c->dead_msg);
        }
    if (llg_matcher_consume_tokens(c->m, (const uint32_t *)toks, (size_t)n) != 0) {
        char msg[PL_ERR_LEN];
        cons_err(msg, sizeof msg, ENG_CONSTRAINT_EMATCH, "token refused",
                 llg_matcher_get_error(c->m));
        cons_kill(c, ENG_CONSTRAINT_EMATCH, msg);
        return pl_errf(err, errlen, ENG_CONSTRAINT_EMATCH, "%s", msg);
    }
    return 0;
}

int eng_constraint_is_stopped(const eng_constraint *c) {
    return c && !c->busy && !c->dead && llg_matcher_is_stopped(c->m) && !llg_matcher_is_error(c->m);
}

int eng_constraint_is_accepting(eng_constraint *c) {
    return c && !c->busy && !c->dead && llg_matcher_is_accepting(c->m);
}

int eng_constraint_busy(const eng_constraint *c) { return c ? c->busy : 0; }

#else /* no llguidance: everything refuses */

#define CONS_UNAVAIL                                                                           \
    "constraint: parley was built without llguidance (run deploy/setup.sh llguidance, source " \
    "env.sh and rebuild); constrained requests are refused"

int eng_constraint_available(void) { return 0; }

const char *eng_constraint_version(void) { return "llguidance absent from this build"; }

int eng_constraint_vocab_new(const eng_tok *tok, int n_vocab, eng_constraint_vocab **out, char *err,
                             size_t errlen) {
    (void)tok, (void)n_vocab;
    if (out) *out = NULL;
    return pl_errf(err, errlen, ENG_CONSTRAINT_EUNAVAIL, CONS_UNAVAIL);
}
void eng_constraint_vocab_free(eng_constraint_vocab *v) { (void)v; }
int eng_constraint_vocab_size(const eng_constraint_vocab *v) { return (void)v, 0; }
size_t eng_constraint_mask_words(const eng_constraint_vocab *v) { return (void)v, 0; }
int eng_constraint_new(const eng_constraint_vocab *v, const eng_constraint_spec *spec,
                       eng_constraint **out, char *err, size_t errlen) {
    (void)v, (void)spec;
    if (out) *out = NULL;
    return pl_errf(err, errlen, ENG_CONSTRAINT_EUNAVAIL, CONS_UNAVAIL);
}
int eng_constraint_clone(const eng_constraint *c, eng_constraint **out, char *err, size_t errlen) {
    (void)c;
    if (out) *out = NULL;
    return pl_errf(err, errlen, ENG_CONSTRAINT_EUNAVAIL, CONS_UNAVAIL);
}
void eng_constraint_free(eng_constraint *c) { (void)c; }
eng_constraint_kind eng_constraint_kind_of(const eng_constraint *c) {
    return (void)c, ENG_CONSTRAINT_NONE;
}
int eng_constraint_mask(eng_constraint *c, const uint32_t **mask, char *err, size_t errlen) {
    (void)c, (void)mask;
    return pl_errf(err, errlen, ENG_CONSTRAINT_EUNAVAIL, CONS_UNAVAIL);
}
int eng_constraint_validate(eng_constraint *c, const int32_t *toks, int n) {
    return (void)c, (void)toks, (void)n, ENG_CONSTRAINT_EUNAVAIL;
}
int eng_constraint_commit(eng_constraint *c, const int32_t *toks, int n, char *err, size_t errlen) {
    (void)c, (void)toks, (void)n;
    return pl_errf(err, errlen, ENG_CONSTRAINT_EUNAVAIL, CONS_UNAVAIL);
}
int eng_constraint_is_stopped(const eng_constraint *c) { return (void)c, 0; }
int eng_constraint_is_accepting(eng_constraint *c) { return (void)c, 0; }
int eng_constraint_busy(const eng_constraint *c) { return (void)c, 0; }
int eng_constraint_pool_new(int n_threads, eng_constraint_pool **out, char *err, size_t errlen) {
    (void)n_threads;
    if (out) *out = NULL;
    return pl_errf(err, errlen, ENG_CONSTRAINT_EUNAVAIL, CONS_UNAVAIL);
}
void eng_constraint_pool_free(eng_constraint_pool *p) { (void)p; }
int eng_constraint_start(eng_constraint *c, eng_constraint_pool *p, const int32_t *ahead,
                         int n_ahead, int64_t budget_us) {
    return (void)c, (void)p, (void)ahead, (void)n_ahead, (void)budget_us, ENG_CONSTRAINT_EUNAVAIL;
}
int eng_constraint_ahead(eng_constraint *c, eng_constraint_pool *p, const int32_t *ahead,
                         int n_ahead, int64_t budget_us) {
    return (void)c, (void)p, (void)ahead, (void)n_ahead, (void)budget_us, ENG_CONSTRAINT_EUNAVAIL;
}
int eng_constraint_wait(eng_constraint *c, const uint32_t *const **masks, int *n_masks,
                        int64_t *waited_us, char *err, size_t errlen) {
    (void)c, (void)masks, (void)n_masks, (void)waited_us;
    return pl_errf(err, errlen, ENG_CONSTRAINT_EUNAVAIL, CONS_UNAVAIL);
}
void eng_constraint_pool_stats_get(eng_constraint_pool *p, eng_constraint_pool_stats *out) {
    (void)p;
    memset(out, 0, sizeof *out);
}

#endif
