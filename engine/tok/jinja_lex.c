/*
 * jinja_lex.c -- template source to tokens, with jinja2's whitespace rules
 * as transformers configures them: trim_blocks (the first newline after a
 * block or comment tag is dropped), lstrip_blocks (spaces and tabs between
 * a line's start and a block or comment tag are dropped), and the manual
 * controls `-` (strip all whitespace on that side) and `+` (keep it).
 */
#include <stdlib.h>
#include <string.h>

#include "jinja_internal.h"
#include "pl_err.h"

typedef struct {
    jj_arena *a;     /* token memory */
    jj_tok *t;       /* tokens */
    size_t n, cap;   /* count, capacity */
    const char *src; /* source */
    size_t len;      /* its length */
    size_t pos;      /* read position */
    int line;        /* current line */
    char *err;       /* message buffer */
    size_t errlen;
} lexer;

static jj_tok *lx_push(lexer *L, int kind, const char *s, size_t n) {
    if (L->n == L->cap) {
        size_t cap = L->cap ? L->cap * 2 : 256;
        jj_tok *t = jj_alloc(L->a, cap * sizeof *t);
        if (!t) return NULL;
        if (L->n) memcpy(t, L->t, L->n * sizeof *t);
        L->t = t;
        L->cap = cap;
    }
    jj_tok *t = &L->t[L->n++];
    memset(t, 0, sizeof *t);
    t->kind = kind;
    t->s = s;
    t->n = n;
    t->line = L->line;
    return t;
}

static int is_ws(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}
static int is_id0(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static int is_digit(char c) { return c >= '0' && c <= '9'; }

static void count_lines(lexer *L, size_t from, size_t to) {
    for (size_t i = from; i < to; i++)
        if (L->src[i] == '\n') L->line++;
}

/* Emit text [b, e) after applying the strip decided by the next tag. */
static int lx_text(lexer *L, size_t b, size_t e) {
    if (e > b && !lx_push(L, JT_TEXT, L->src + b, e - b)) return ENG_JINJA_ENOMEM;
    return 0;
}

static int is_hex(char c) { return (c >= '0' && c <= '9') || ((c | 32) >= 'a' && (c | 32) <= 'f'); }
static uint32_t hexval(char c) {
    return c <= '9' ? (uint32_t)(c - '0') : (uint32_t)((c | 32) - 'a' + 10);
}

static size_t put_utf8(char *o, uint32_t cp) {
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | cp >> 6);
        o[1] = (char)(0x80 | (cp & 63));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | cp >> 12);
        o[1] = (char)(0x80 | (cp >> 6 & 63));
        o[2] = (char)(0x80 | (cp & 63));
        return 3;
    }
    o[0] = (char)(0xF0 | cp >> 18);
    o[1] = (char)(0x80 | (cp >> 12 & 63));
    o[2] = (char)(0x80 | (cp >> 6 & 63));
    o[3] = (char)(0x80 | (cp & 63));
    return 4;
}

/* Decode a string literal starting at L->pos (the quote). */
static int lx_string(lexer *L) {
    char q = L->src[L->pos];
    size_t i = L->pos + 1;
    char *buf = jj_alloc(L->a, L->len - L->pos + 1);
    size_t n = 0;
    if (!buf) return ENG_JINJA_ENOMEM;
    while (i < L->len && L->src[i] != q) {
        char ch = L->src[i];
        if (ch == '\\' && i + 1 < L->len) {
            char e = L->src[++i];
            switch (e) {
            case 'n': buf[n++] = '\n'; break;
            case 't': buf[n++] = '\t'; break;
            case 'r': buf[n++] = '\r'; break;
            case 'a': buf[n++] = '\a'; break;
            case 'b': buf[n++] = '\b'; break;
            case 'f': buf[n++] = '\f'; break;
            case 'v': buf[n++] = '\v'; break;
            case '\\': buf[n++] = '\\'; break;
            case '\'': buf[n++] = '\''; break;
            case '"': buf[n++] = '"'; break;
            case '\n': break;
            case 'x':
            case 'u':
            case 'U': { /* Python's \xXX \uXXXX \UXXXXXXXX */
                int want = e == 'x' ? 2 : e == 'u' ? 4 : 8;
                uint32_t cp = 0;
                int k;
                for (k = 0; k < want && i + 1 < L->len && is_hex(L->src[i + 1]); k++)
                    cp = cp * 16 + hexval(L->src[++i]);
                if (k < want || cp > 0x10FFFF) {
                    pl_errf(L->err, L->errlen, ENG_JINJA_ESYNTAX, "line %d: bad \\%c escape",
                            L->line, e);
                    return ENG_JINJA_ESYNTAX;
                }
                n += put_utf8(buf + n, cp);
                break;
            }
            default: buf[n++] = '\\'; buf[n++] = e;
            }
            i++;
            continue;
        }
        if (ch == '\n') L->line++;
        buf[n++] = ch;
        i++;
    }
    if (i >= L->len) {
        pl_errf(L->err, L->errlen, ENG_JINJA_ESYNTAX, "line %d: unterminated string", L->line);
        return ENG_JINJA_ESYNTAX;
    }
    buf[n] = 0;
    if (!lx_push(L, JT_STR, buf, n)) return ENG_JINJA_ENOMEM;
    L->pos = i + 1;
    return 0;
}

static const char *const OPS[] = {"**", "//", "==", "!=", "<=", ">=", "+", "-", "*",
                                  "/",  "%",  "~",  "(",  ")",  "[",  "]", "{", "}",
                                  ",",  ".",  ":",  "|",  "=",  "<",  ">"};

/* Lex the inside of a tag until its end ("}}" or "%}"); returns the index
 * just past the end marker in *endp and whether it was "-" (strip after)
 * or "+" (keep) in *ctl. */
static int lx_tag(lexer *L, char close, int *ctl) {
    int depth = 0;
    for (;;) {
        while (L->pos < L->len && is_ws(L->src[L->pos])) {
            if (L->src[L->pos] == '\n') L->line++;
            L->pos++;
        }
        if (L->pos >= L->len) {
            pl_errf(L->err, L->errlen, ENG_JINJA_ESYNTAX,
                    "line %d: unexpected end of template inside a tag", L->line);
            return ENG_JINJA_ESYNTAX;
        }
        const char *p = L->src + L->pos;
        size_t left = L->len - L->pos;
        if (depth == 0) {
            if ((*p == '-' || *p == '+') && left >= 3 && p[1] == close && p[2] == '}') {
                *ctl = *p;
                L->pos += 3;
                return 0;
            }
            if (left >= 2 && p[0] == close && p[1] == '}') {
                *ctl = 0;
                L->pos += 2;
                return 0;
            }
        }
        if (*p == '\'' || *p == '"') {
            int rc = lx_string(L);
            if (rc) return rc;
            continue;
        }
        if (is_id0(*p)) {
            size_t n = 1;
            while (n < left && (is_id0(p[n]) || is_digit(p[n]))) n++;
            if (!lx_push(L, JT_NAME, p, n)) return ENG_JINJA_ENOMEM;
            L->pos += n;
            continue;
        }
        if (is_digit(*p)) {
            size_t n = 0;
            bool fl = false;
            while (n < left && (is_digit(p[n]) || p[n] == '_')) n++;
            if (n + 1 < left && p[n] == '.' && is_digit(p[n + 1])) {
                fl = true;
                n++;
                while (n < left && is_digit(p[n])) n++;
            }
            if (n < left && (p[n] == 'e' || p[n] == 'E')) {
                fl = true;
                n++;
                if (n < left && (p[n] == '+' || p[n] == '-')) n++;
                while (n < left && is_digit(p[n])) n++;
            }
            char tmp[64];
            size_t k = 0;
            for (size_t j = 0; j < n && k < sizeof tmp - 1; j++)
                if (p[j] != '_') tmp[k++] = p[j];
            tmp[k] = 0;
            jj_tok *t = lx_push(L, fl ? JT_FLOAT : JT_INT, p, n);
            if (!t) return ENG_JINJA_ENOMEM;
            if (fl) t->f = strtod(tmp, NULL);
            else t->i = strtoll(tmp, NULL, 10);
            L->pos += n;
            continue;
        }
        size_t k;
        for (k = 0; k < sizeof OPS / sizeof OPS[0]; k++) {
            size_t on = strlen(OPS[k]);
            if (left >= on && memcmp(p, OPS[k], on) == 0) {
                if (!lx_push(L, JT_OP, OPS[k], on)) return ENG_JINJA_ENOMEM;
                if (*p == '(' || *p == '[' || *p == '{') depth++;
                else if ((*p == ')' || *p == ']' || *p == '}') && depth > 0) depth--;
                L->pos += on;
                break;
            }
        }
        if (k == sizeof OPS / sizeof OPS[0]) {
            pl_errf(L->err, L->errlen, ENG_JINJA_ESYNTAX, "line %d: unexpected character '%c'",
                    L->line, *p);
            return ENG_JINJA_ESYNTAX;
        }
    }
}

/* After "{% raw %}" (its end control in ctl): emit the text up to
 * "{% endraw %}" unchanged and leave L->pos after that tag, its own end
 * control in *endctl. */
static int lx_raw(lexer *L, int ctl, int *endctl) {
    size_t b = L->pos;
    if (ctl == '-') /* (no trim_blocks after {% raw %}: jinja2 keeps that newline) */
        while (b < L->len && is_ws(L->src[b])) b++;
    for (size_t i = b; i + 1 < L->len; i++) {
        if (L->src[i] != '{' || L->src[i + 1] != '%') continue;
        size_t j = i + 2, e = i;
        char pre = j < L->len ? L->src[j] : 0;
        if (pre == '-' || pre == '+') j++;
        while (j < L->len && is_ws(L->src[j])) j++;
        if (L->len - j < 6 || memcmp(L->src + j, "endraw", 6)) continue;
        j += 6;
        while (j < L->len && is_ws(L->src[j])) j++;
        *endctl = 0;
        if (j < L->len && (L->src[j] == '-' || L->src[j] == '+')) *endctl = L->src[j++];
        if (L->len - j < 2 || L->src[j] != '%' || L->src[j + 1] != '}') continue;
        if (pre == '-')
            while (e > b && is_ws(L->src[e - 1])) e--;
        count_lines(L, L->pos, j + 2);
        if (e > b && !lx_push(L, JT_TEXT, L->src + b, e - b)) return ENG_JINJA_ENOMEM;
        L->pos = j + 2;
        return 0;
    }
    pl_errf(L->err, L->errlen, ENG_JINJA_ESYNTAX, "line %d: missing '{%% endraw %%}'", L->line);
    return ENG_JINJA_ESYNTAX;
}

int jj_lex(jj_arena *a, const char *src, size_t len, jj_tok **toks, size_t *ntok, char *err,
           size_t errlen) {
    lexer L = {.a = a, .src = src, .len = len, .line = 1, .err = err, .errlen = errlen};
    int rc = 0;
    size_t text_start = 0;
    int strip_next = 0; /* the previous tag ended with '-' */
    while (L.pos <= len) {
        const char *hit = NULL;
        for (size_t i = L.pos; i + 1 < len; i++)
            if (src[i] == '{' && (src[i + 1] == '{' || src[i + 1] == '%' || src[i + 1] == '#')) {
                hit = src + i;
                break;
            }
        size_t tag = hit ? (size_t)(hit - src) : len;
        size_t tb = text_start, te = tag;
        if (strip_next)
            while (tb < te && is_ws(src[tb])) tb++;
        if (hit) {
            char kind = hit[1];
            char ctl = tag + 2 < len ? src[tag + 2] : 0;
            if (ctl == '-') {
                while (te > tb && is_ws(src[te - 1])) te--;
            } else if (ctl != '+' && kind != '{') { /* lstrip_blocks */
                size_t ls = te;
                while (ls > tb && (src[ls - 1] == ' ' || src[ls - 1] == '\t')) ls--;
                if (ls == 0 || src[ls - 1] == '\n') te = ls > tb ? ls : tb;
            }
        }
        count_lines(&L, text_start, tag);
        if ((rc = lx_text(&L, tb, te))) goto err;
        if (!hit) break;
        L.pos = tag + 2;
        if (L.pos < len && (src[L.pos] == '-' || src[L.pos] == '+')) L.pos++;
        int endctl = 0;
        if (hit[1] == '#') {
            const char *e = NULL;
            for (size_t i = L.pos; i + 1 < len; i++)
                if (src[i] == '#' && src[i + 1] == '}') {
                    e = src + i;
                    break;
                }
            if (!e) {
                pl_errf(err, errlen, ENG_JINJA_ESYNTAX, "line %d: unterminated comment", L.line);
                rc = ENG_JINJA_ESYNTAX;
                goto err;
            }
            size_t ep = (size_t)(e - src);
            if (ep > L.pos && (src[ep - 1] == '-' || src[ep - 1] == '+')) endctl = src[ep - 1];
            count_lines(&L, L.pos, ep);
            L.pos = ep + 2;
        } else {
            bool var = hit[1] == '{';
            if (!lx_push(&L, var ? JT_VAR_BEG : JT_BLK_BEG, hit, 2)) {
                rc = ENG_JINJA_ENOMEM;
                goto err;
            }
            if ((rc = lx_tag(&L, var ? '}' : '%', &endctl))) goto err;
            if (!lx_push(&L, var ? JT_VAR_END : JT_BLK_END, "", 0)) {
                rc = ENG_JINJA_ENOMEM;
                goto err;
            }
            if (!var && L.n >= 3 && L.t[L.n - 2].kind == JT_NAME && L.t[L.n - 2].n == 3 &&
                !memcmp(L.t[L.n - 2].s, "raw", 3) && L.t[L.n - 3].kind == JT_BLK_BEG) {
                L.n -= 3; /* {% raw %}: the text up to {% endraw %} is data */
                if ((rc = lx_raw(&L, endctl, &endctl))) goto err;
            }
            if (var && endctl == '+') endctl = 0;
            if (var && endctl == 0) {
                strip_next = 0;
                text_start = L.pos;
                continue;
            }
        }
        strip_next = endctl == '-';
        if (endctl == 0 && L.pos < len && src[L.pos] == '\n') { /* trim_blocks */
            L.pos++;
            L.line++;
        }
        text_start = L.pos;
    }
    if (!lx_push(&L, JT_EOF, "", 0)) {
        rc = ENG_JINJA_ENOMEM;
        goto err;
    }
    *toks = L.t;
    *ntok = L.n;
    return 0;
err:
    if (rc == ENG_JINJA_ENOMEM)
        pl_errf(err, errlen, ENG_JINJA_ENOMEM, "out of memory lexing the template");
    return rc;
}
