/*
 * cli_opt.c -- the table-driven option parser and its generated help
 * (cli_opt.h).
 */
#include "cli_opt.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "pl_err.h"

#define CLI_HELP_COL 24 /* column of the help text in the usage */

/* Digits of s as an unsigned value: decimal, or hex after 0x. */
static int cli_digits(const char *s, unsigned long long *out) {
    int base = 10;
    if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) base = 16, s += 2;
    if (!*s || !isxdigit((unsigned char)*s) || (base == 10 && !isdigit((unsigned char)*s)))
        return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, base);
    if (*end || errno) return -1;
    *out = v;
    return 0;
}

int cli_parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out) {
    unsigned long long v;
    if (!s || cli_digits(s, &v) || v < lo || v > hi) return -1;
    *out = (uint64_t)v;
    return 0;
}

int cli_parse_i64(const char *s, long long lo, long long hi, long long *out) {
    unsigned long long m;
    if (!s) return -1;
    int neg = *s == '-';
    if (cli_digits(s + neg, &m)) return -1;
    long long v;
    if (neg) {
        if (m > (unsigned long long)LLONG_MAX + 1) return -1;
        v = m == (unsigned long long)LLONG_MAX + 1 ? LLONG_MIN : -(long long)m;
    } else {
        if (m > (unsigned long long)LLONG_MAX) return -1;
        v = (long long)m;
    }
    if (v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

int cli_parse_f64(const char *s, double lo, double hi, double *out) {
    if (!s || !*s || isspace((unsigned char)*s)) return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (*end || errno == ERANGE || !isfinite(v) || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

void cli_usage(const cli_cmd *c, FILE *f) {
    const char *s = c->synopsis;
    for (int first = 1; s; first = 0) { /* one "usage:" line per synopsis line */
        const char *nl = strchr(s, '\n');
        int n = nl ? (int)(nl - s) : (int)strlen(s);
        if (!first && (*s == ' ' || *s == '\t')) fprintf(f, "%.*s\n", n, s); /* continued */
        else fprintf(f, "%s parley %.*s\n", first ? "usage:" : "      ", n, s);
        s = nl ? nl + 1 : NULL;
    }
    if (c->about) fprintf(f, "%s", c->about);
    for (size_t i = 0; i < c->n_opts; i++) {
        const cli_opt *o = &c->opts[i];
        char head[128];
        int n = snprintf(head, sizeof head, "  %s%s%s%s%s", o->alias ? o->alias : "",
                         o->alias ? ", " : "", o->name, o->arg ? " " : "", o->arg ? o->arg : "");
        if (n >= CLI_HELP_COL - 1) fprintf(f, "%s\n%*s", head, CLI_HELP_COL, "");
        else fprintf(f, "%-*s", CLI_HELP_COL, head);
        for (const char *h = o->help ? o->help : ""; *h;) { /* continuation lines indented */
            const char *nl = strchr(h, '\n');
            int len = nl ? (int)(nl - h) : (int)strlen(h);
            fprintf(f, "%.*s\n", len, h);
            h += len;
            if (*h) fprintf(f, "%*s", CLI_HELP_COL, ""), h++;
        }
        if (!o->help || !*o->help) fprintf(f, "\n");
    }
    if (c->epilog) fprintf(f, "%s", c->epilog);
}

int cli_fail(const cli_cmd *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", c->name);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    if (c->usage_on_error) cli_usage(c, stderr);
    return CLI_USAGE;
}

/* The row named a (long name or alias), NULL if none. */
static const cli_opt *cli_find(const cli_cmd *c, const char *a) {
    for (size_t i = 0; i < c->n_opts; i++)
        if (!strcmp(c->opts[i].name, a) || (c->opts[i].alias && !strcmp(c->opts[i].alias, a)))
            return &c->opts[i];
    return NULL;
}

/* Store value v of row o; -1 if it does not parse or is out of range (err
 * says which range). */
static int cli_store(const cli_opt *o, const char *v, void *ctx, char *err, size_t errlen) {
    long long i;
    uint64_t u;
    double d;
    switch (o->type) {
    case CLI_STR: *(const char **)o->dst = v; return 0;
    case CLI_INT:
    case CLI_LONG: {
        long long lo = o->type == CLI_INT ? INT_MIN : LONG_MIN;
        long long hi = o->type == CLI_INT ? INT_MAX : LONG_MAX;
        if (o->min > lo) lo = (long long)o->min;
        if (o->max < hi) hi = (long long)o->max;
        if (cli_parse_i64(v, lo, hi, &i)) {
            return pl_errf(err, errlen, CLI_EINVAL, "an integer in [%lld, %lld]", lo, hi);
        }
        if (o->type == CLI_INT) *(int *)o->dst = (int)i;
        else *(long *)o->dst = (long)i;
        return 0;
    }
    case CLI_U64: {
        uint64_t lo = o->min > 0 ? (uint64_t)o->min : 0;
        uint64_t hi = o->max > 0 ? (uint64_t)o->max : UINT64_MAX;
        if (cli_parse_u64(v, lo, hi, &u)) {
            return pl_errf(err, errlen, CLI_EINVAL, "an integer in [%llu, %llu]",
                           (unsigned long long)lo, (unsigned long long)hi);
        }
        *(uint64_t *)o->dst = u;
        return 0;
    }
    case CLI_F32:
    case CLI_F64:
        if (cli_parse_f64(v, o->min, o->max, &d)) {
            return pl_errf(err, errlen, CLI_EINVAL, "a number in [%g, %g]", o->min, o->max);
        }
        if (o->type == CLI_F32) *(float *)o->dst = (float)d;
        else *(double *)o->dst = d;
        return 0;
    case CLI_FN:
    case CLI_FN0: return o->fn(ctx, o, v, err, errlen);
    case CLI_FLAG: *(int *)o->dst = 1; return 0;
    }
    return -1;
}

int cli_parse(const cli_cmd *c, int argc, char **argv, void *ctx, const char **pos, int *n_pos) {
    char err[CLI_ERRLEN];
    int np = 0;
    if (n_pos) *n_pos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            cli_usage(c, stdout);
            return CLI_HELP;
        }
        const cli_opt *o = cli_find(c, a);
        err[0] = 0;
        if (!o && a[0] == '-' && a[1] && c->unknown) {
            int r = c->unknown(ctx, a, v, err, sizeof err);
            if (r == -1) return cli_fail(c, "%s", err);
            if (r >= 0) {
                i += r;
                continue;
            }
        }
        if (!o && (a[0] != '-' || !a[1])) {
            if (np >= c->max_pos) return cli_fail(c, "unexpected argument '%s'", a);
            pos[np++] = a;
            if (n_pos) *n_pos = np;
            continue;
        }
        if (!o) return cli_fail(c, "unknown option '%s' (see 'parley %s --help')", a, c->name);
        int takes = o->type != CLI_FLAG && o->type != CLI_FN0;
        if (takes && !v) return cli_fail(c, "%s needs a value", a);
        int sr = cli_store(o, takes ? v : NULL, ctx, err, sizeof err);
        if (sr == -2) return cli_fail(c, "%s", err);
        if (sr != 0) {
            if (!takes) return cli_fail(c, "%s: %s", a, err[0] ? err : "refused");
            if (err[0]) return cli_fail(c, "bad value for %s: '%s' (%s)", a, v, err);
            return cli_fail(c, "bad value for %s: '%s'", a, v);
        }
        i += takes;
    }
    return CLI_OK;
}
