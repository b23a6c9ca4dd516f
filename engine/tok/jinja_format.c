/*
 * jinja_format.c -- string formatting: Python's printf-style `str % args`
 * (also the `format` filter) for the conversions %s %r %d %i %f %x %%
 * with flags, width and precision; and str.format with {} / {0} / {name}
 * fields (no format specs).  Anything else is refused, never guessed.
 */
#include <stdio.h>
#include <string.h>

#include "jinja_internal.h"

int jj_percent_format(jj_ctx *c, jj_val fmt, jj_val args, jj_val *out) {
    const jj_str *f = fmt.u.s;
    jj_list one = {.v = &args, .n = 1, .cap = 1};
    const jj_list *a = args.kind == JV_LIST && args.u.l->tuple ? args.u.l : &one;
    jj_buf b = {.c = c};
    size_t next = 0;
    for (size_t i = 0; i < f->n; i++) {
        if (f->s[i] != '%') {
            if (jj_buf_put(&b, f->s + i, 1)) return c->rc;
            continue;
        }
        char spec[32] = "%";
        size_t k = 1;
        i++;
        while (i < f->n && k < 24 && strchr("-+ #0123456789.", f->s[i])) spec[k++] = f->s[i++];
        if (i >= f->n) return jj_fail(c, ENG_JINJA_ERENDER, "ValueError: incomplete format");
        char conv = f->s[i];
        if (conv == '%') {
            if (jj_buf_put(&b, "%", 1)) return c->rc;
            continue;
        }
        if (!strchr("srdifx", conv))
            return jj_fail(c, ENG_JINJA_EUNSUPPORTED,
                           "the format conversion '%%%c' is not supported", conv);
        if (next >= a->n)
            return jj_fail(c, ENG_JINJA_ERENDER,
                           "TypeError: not enough arguments for format string");
        jj_val v = a->v[next++];
        char tmp[512];
        if (conv == 's' || conv == 'r') {
            jj_buf sb = {.c = c};
            if (conv == 's' ? jj_str_of(&sb, v) : jj_repr_of(&sb, v)) return c->rc;
            if (k == 1) {
                if (sb.n && jj_buf_put(&b, sb.p, sb.n)) return c->rc;
                continue;
            }
            spec[k++] = 's';
            spec[k] = 0;
            snprintf(tmp, sizeof tmp, spec, sb.p ? sb.p : "");
        } else {
            bool num = v.kind == JV_INT || v.kind == JV_FLOAT || v.kind == JV_BOOL;
            if (!num)
                return jj_fail(c, ENG_JINJA_ERENDER,
                               "TypeError: %%%c format: a real number is required, not %s", conv,
                               jj_type_name(v));
            double d = v.kind == JV_FLOAT ? v.u.f : v.kind == JV_INT ? (double)v.u.i : v.u.b;
            long long n = v.kind == JV_FLOAT ? (long long)v.u.f : v.kind == JV_INT ? v.u.i : v.u.b;
            if (conv == 'f') {
                spec[k++] = 'f';
                spec[k] = 0;
                snprintf(tmp, sizeof tmp, spec, d);
            } else {
                spec[k++] = 'l';
                spec[k++] = 'l';
                spec[k++] = conv == 'x' ? 'x' : 'd';
                spec[k] = 0;
                snprintf(tmp, sizeof tmp, spec, n);
            }
        }
        if (jj_buf_put(&b, tmp, strlen(tmp))) return c->rc;
    }
    if (next < a->n && args.kind == JV_LIST && a == args.u.l)
        return jj_fail(c, ENG_JINJA_ERENDER,
                       "TypeError: not all arguments converted during string formatting");
    *out = jj_buf_val(&b);
    return 0;
}

int jj_str_format(jj_ctx *c, jj_val fmt, jj_val *args, size_t nargs, const char **kw, jj_val *out) {
    const jj_str *f = fmt.u.s;
    jj_buf b = {.c = c};
    size_t auto_i = 0;
    for (size_t i = 0; i < f->n; i++) {
        char ch = f->s[i];
        if ((ch == '{' || ch == '}') && i + 1 < f->n && f->s[i + 1] == ch) {
            if (jj_buf_put(&b, &ch, 1)) return c->rc;
            i++;
            continue;
        }
        if (ch == '}')
            return jj_fail(c, ENG_JINJA_ERENDER,
                           "ValueError: Single '}' encountered in format string");
        if (ch != '{') {
            if (jj_buf_put(&b, &ch, 1)) return c->rc;
            continue;
        }
        size_t e = i + 1;
        while (e < f->n && f->s[e] != '}') e++;
        if (e >= f->n)
            return jj_fail(c, ENG_JINJA_ERENDER, "ValueError: expected '}' before end of string");
        const char *name = f->s + i + 1;
        size_t nl = e - i - 1;
        if (memchr(name, ':', nl) || memchr(name, '!', nl) || memchr(name, '.', nl) ||
            memchr(name, '[', nl))
            return jj_fail(c, ENG_JINJA_EUNSUPPORTED, "str.format: field specs are not supported");
        jj_val v = jj_undef(NULL);
        bool found = false;
        if (nl == 0 || (name[0] >= '0' && name[0] <= '9')) {
            size_t idx = nl ? 0 : auto_i++;
            for (size_t k = 0; k < nl; k++) idx = idx * 10 + (size_t)(name[k] - '0');
            for (size_t k = 0, p = 0; k < nargs && !found; k++)
                if (!(kw && kw[k]) && p++ == idx) v = args[k], found = true;
        } else {
            for (size_t k = 0; k < nargs && !found; k++)
                if (kw && kw[k] && strlen(kw[k]) == nl && !memcmp(kw[k], name, nl))
                    v = args[k], found = true;
        }
        if (!found)
            return jj_fail(c, ENG_JINJA_ERENDER, "IndexError: format field {%.*s} has no argument",
                           (int)nl, name);
        if (jj_str_of(&b, v)) return c->rc;
        i = e;
    }
    *out = jj_buf_val(&b);
    return 0;
}
