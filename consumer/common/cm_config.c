/*
 * cm_config.c -- a command's configuration from its property table: the
 * three sources (file, environment, flags), validation, typed lookups, the
 * command line and the generated reference rows.  See cm_config.h for the
 * rules; each command's table lives with the command (the worker's in
 * consumer/worker/wk_config.c, the gateway's in gw_cmd.c).
 */
#include "cm_config.h"
#include "cli_opt.h"
#include "pl_err.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <librdkafka/rdkafka.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* A kafka.* pass-through property. */
typedef struct cm_kv {
    char *name; /* librdkafka property (without "kafka.") */
    char *val;  /* its value */
} cm_kv;

struct cm_config {
    const cm_prop *props;     /* the property table (static) */
    size_t n_props;           /* its rows */
    const char *cmd;          /* command named in messages ("worker", "gateway") */
    cm_config_check_fn check; /* the table's cross-key checks (NULL: none) */
    char **val;               /* value per table row; NULL = default */
    cm_kv *kafka;             /* pass-through properties */
    size_t n_kafka;           /* entries used */
    size_t cap_kafka;         /* entries allocated */
};

static int cm_prop_find(const cm_config *c, const char *key) {
    for (size_t i = 0; i < c->n_props; i++)
        if (!strcmp(c->props[i].name, key)) return (int)i;
    return -1;
}

int cm_config_new(const cm_prop *props, size_t n, const char *cmd, cm_config_check_fn check,
                  cm_config **out) {
    cm_config *c = calloc(1, sizeof *c);
    if (!c) return *out = NULL, CM_CONFIG_ENOMEM;
    c->props = props;
    c->n_props = n;
    c->cmd = cmd;
    c->check = check;
    if (!(c->val = calloc(n ? n : 1, sizeof *c->val))) {
        free(c);
        return *out = NULL, CM_CONFIG_ENOMEM;
    }
    for (size_t i = 0; i < n; i++) /* an enum's default is the first of its values */
        if (props[i].type == CM_PROP_ENUM &&
            !(c->val[i] = strndup(props[i].def, strcspn(props[i].def, "|")))) {
            cm_config_free(c);
            return *out = NULL, CM_CONFIG_ENOMEM;
        }
    *out = c;
    return 0;
}

void cm_config_free(cm_config *c) {
    if (!c) return;
    for (size_t i = 0; i < c->n_props; i++) free(c->val[i]);
    free(c->val);
    for (size_t i = 0; i < c->n_kafka; i++) {
        free(c->kafka[i].name);
        free(c->kafka[i].val);
    }
    free(c->kafka);
    free(c);
}

static int cm_parse_int(const char *s, long long *out) {
    return cli_parse_i64(s, LLONG_MIN, LLONG_MAX, out);
}

static int cm_parse_bool(const char *s, bool *out) {
    static const char *const yes[] = {"true", "1", "yes", "on"};
    static const char *const no[] = {"false", "0", "no", "off"};
    for (int i = 0; i < 4; i++) {
        if (!strcasecmp(s, yes[i])) return *out = true, 0;
        if (!strcasecmp(s, no[i])) return *out = false, 0;
    }
    return -1;
}

/* Position of val among the '|'-separated values vs, or -1. */
static int cm_enum_find(const char *vs, const char *val) {
    size_t n = strlen(val);
    for (int i = 0;; i++) {
        const char *end = strchr(vs, '|');
        size_t len = end ? (size_t)(end - vs) : strlen(vs);
        if (len == n && !strncmp(vs, val, n)) return i;
        if (!end) return -1;
        vs = end + 1;
    }
}

/* The '|'-separated values vs as text: each between q and q, separated by
 * ", ", the empty value as "" (for messages, and `...` for the reference);
 * returns the length of the first value (the default). */
static int cm_enum_list(const char *vs, const char *q, char *out, size_t cap) {
    int first = -1;
    size_t at = 0;
    out[0] = 0;
    for (const char *v = vs; v;) {
        const char *end = strchr(v, '|');
        int len = end ? (int)(end - v) : (int)strlen(v);
        if (first < 0) first = len;
        snprintf(out + at, cap - at, "%s%s%.*s%s", v == vs ? "" : ", ", q, len ? len : 2,
                 len ? v : "\"\"", q);
        at += strlen(out + at);
        v = end ? end + 1 : NULL;
    }
    return first;
}

/* Check val against row p; message names key and origin. */
static int cm_prop_check(const cm_prop *p, const char *val, const char *origin, char *err,
                         size_t errlen) {
    long long v;
    bool b;
    switch (p->type) {
    case CM_PROP_INT:
        if (cm_parse_int(val, &v) != 0)
            return pl_errf(err, errlen, CM_CONFIG_EINVAL,
                           "configuration key '%s' (%s): '%s' is not an integer", p->name, origin,
                           val);
        if (v < p->min || v > p->max)
            return pl_errf(err, errlen, CM_CONFIG_EINVAL,
                           "configuration key '%s' (%s): %lld is outside %lld..%lld", p->name,
                           origin, v, p->min, p->max);
        return 0;
    case CM_PROP_BOOL:
        if (cm_parse_bool(val, &b) != 0)
            return pl_errf(err, errlen, CM_CONFIG_EINVAL,
                           "configuration key '%s' (%s): '%s' is not a boolean "
                           "(true/false)",
                           p->name, origin, val);
        return 0;
    case CM_PROP_ENUM:
        if (cm_enum_find(p->def, val) < 0) {
            char vs[256];
            cm_enum_list(p->def, "", vs, sizeof vs);
            return pl_errf(err, errlen, CM_CONFIG_EINVAL,
                           "configuration key '%s' (%s): '%s' is not one of %s", p->name, origin,
                           val, vs);
        }
        return 0;
    case CM_PROP_REQ:
        if (!*val)
            return pl_errf(err, errlen, CM_CONFIG_EINVAL,
                           "configuration key '%s' (%s): must not be empty", p->name, origin);
        return 0;
    default: return 0;
    }
}

static int cm_kafka_set(cm_config *c, const char *name, const char *val) {
    for (size_t i = 0; i < c->n_kafka; i++)
        if (!strcmp(c->kafka[i].name, name)) {
            char *v = strdup(val);
            if (!v) return CM_CONFIG_ENOMEM;
            free(c->kafka[i].val);
            c->kafka[i].val = v;
            return 0;
        }
    if (c->n_kafka == c->cap_kafka) {
        size_t cap = c->cap_kafka ? 2 * c->cap_kafka : 8;
        cm_kv *k = realloc(c->kafka, cap * sizeof *k);
        if (!k) return CM_CONFIG_ENOMEM;
        c->kafka = k;
        c->cap_kafka = cap;
    }
    char *n = strdup(name), *v = strdup(val);
    if (!n || !v) {
        free(n);
        free(v);
        return CM_CONFIG_ENOMEM;
    }
    c->kafka[c->n_kafka++] = (cm_kv){n, v};
    return 0;
}

int cm_config_set(cm_config *c, const char *key, const char *val, const char *origin, char *err,
                  size_t errlen) {
    if (!c || !key || !val) return pl_errf(err, errlen, CM_CONFIG_EINVAL, "NULL argument");
    if (!strncmp(key, "kafka.", 6)) {
        if (!key[6] || !strcmp(key + 6, "consumer.") || !strcmp(key + 6, "producer."))
            return pl_errf(err, errlen, CM_CONFIG_EINVAL,
                           "configuration key '%s' (%s): names no librdkafka property", key,
                           origin);
        int rc = cm_kafka_set(c, key + 6, val);
        return rc ? pl_errf(err, errlen, rc, "out of memory") : 0;
    }
    int i = cm_prop_find(c, key);
    if (i < 0 && !c->n_props)
        return pl_errf(err, errlen, CM_CONFIG_EINVAL,
                       "unknown configuration key '%s' (%s); parley %s takes kafka.* keys only",
                       key, origin, c->cmd);
    if (i < 0)
        return pl_errf(err, errlen, CM_CONFIG_EINVAL,
                       "unknown configuration key '%s' (%s); see parley %s "
                       "--print-config-doc",
                       key, origin, c->cmd);
    int rc = cm_prop_check(&c->props[i], val, origin, err, errlen);
    if (rc) return rc;
    char *v = strdup(val);
    if (!v) return pl_errf(err, errlen, CM_CONFIG_ENOMEM, "out of memory");
    free(c->val[i]);
    c->val[i] = v;
    return 0;
}

/* Trim ASCII white space in place; returns the start. */
static char *cm_trim(char *s) {
    while (isspace((unsigned char)*s)) s++;
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1])) s[--n] = 0;
    return s;
}

int cm_config_set_pair(cm_config *c, const char *pair, const char *origin, char *err,
                       size_t errlen) {
    const char *eq = strchr(pair, '=');
    if (!eq || eq == pair)
        return pl_errf(err, errlen, CM_CONFIG_EINVAL, "%s: '%s' is not key=value", origin, pair);
    char key[256];
    size_t kl = (size_t)(eq - pair);
    if (kl >= sizeof key) return pl_errf(err, errlen, CM_CONFIG_EINVAL, "%s: key too long", origin);
    memcpy(key, pair, kl);
    key[kl] = 0;
    return cm_config_set(c, cm_trim(key), eq + 1, origin, err, errlen);
}

int cm_config_load_file(cm_config *c, const char *path, char *err, size_t errlen) {
    FILE *f = fopen(path, "r");
    if (!f)
        return pl_errf(err, errlen, CM_CONFIG_EIO, "cannot read configuration file %s: %s", path,
                       strerror(errno));
    char line[4096], origin[512];
    int rc = 0, ln = 0;
    while (fgets(line, sizeof line, f)) {
        ln++;
        snprintf(origin, sizeof origin, "file %s line %d", path, ln);
        size_t n = strlen(line);
        if (n == sizeof line - 1 && line[n - 1] != '\n') {
            rc = pl_errf(err, errlen, CM_CONFIG_EINVAL, "%s: line too long", origin);
            break;
        }
        char *s = cm_trim(line);
        if (!*s || *s == '#') continue;
        char *eq = strchr(s, '=');
        if (!eq) {
            rc = pl_errf(err, errlen, CM_CONFIG_EINVAL, "%s: expected 'key = value'", origin);
            break;
        }
        *eq = 0;
        if ((rc = cm_config_set(c, cm_trim(s), cm_trim(eq + 1), origin, err, errlen)) != 0) break;
    }
    if (!rc && ferror(f)) rc = pl_errf(err, errlen, CM_CONFIG_EIO, "error reading %s", path);
    fclose(f);
    return rc;
}

/* PARLEY_ + key upper-cased, '.' -> '_'. */
static void cm_env_name(const char *key, char *out, size_t cap) {
    size_t j = (size_t)snprintf(out, cap, "PARLEY_");
    for (const char *p = key; *p && j + 1 < cap; p++)
        out[j++] = *p == '.' ? '_' : (char)toupper((unsigned char)*p);
    out[j] = 0;
}

int cm_config_load_env(cm_config *c, char *const *envp, char *err, size_t errlen) {
    char name[256], origin[300];
    for (char *const *e = envp; e && *e; e++) {
        const char *eq = strchr(*e, '=');
        if (!eq || strncmp(*e, "PARLEY_", 7)) continue;
        size_t nl = (size_t)(eq - *e);
        int rc = 0;
        snprintf(origin, sizeof origin, "environment %.*s", (int)(nl < 200 ? nl : 200), *e);
        if (nl > 13 && !strncmp(*e, "PARLEY_KAFKA_", 13) && nl - 13 < sizeof name - 8) {
            size_t j = (size_t)snprintf(name, sizeof name, "kafka.");
            for (size_t i = 13; i < nl; i++)
                name[j++] = (*e)[i] == '_' ? '.' : (char)tolower((unsigned char)(*e)[i]);
            name[j] = 0;
            rc = cm_config_set(c, name, eq + 1, origin, err, errlen);
        } else {
            for (size_t i = 0; i < c->n_props; i++) {
                cm_env_name(c->props[i].name, name, sizeof name);
                if (strlen(name) == nl && !strncmp(name, *e, nl)) {
                    rc = cm_config_set(c, c->props[i].name, eq + 1, origin, err, errlen);
                    break;
                }
            }
        }
        if (rc) return rc;
    }
    return 0;
}

int cm_config_validate(const cm_config *c, char *err, size_t errlen) {
    char env[256];
    int rc = 0;
    for (size_t i = 0; i < c->n_props; i++)
        if (c->props[i].type == CM_PROP_REQ && (!c->val[i] || !*c->val[i])) {
            cm_env_name(c->props[i].name, env, sizeof env);
            return pl_errf(err, errlen, CM_CONFIG_EINVAL,
                           "configuration key '%s' is required (config file, environment "
                           "%s, or --%s)",
                           c->props[i].name, env, c->props[i].name);
        }
    if (c->check && (rc = c->check(c, err, errlen)) != 0) return rc;
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    if (!conf) return pl_errf(err, errlen, CM_CONFIG_ENOMEM, "out of memory");
    char kerr[PL_ERR_LEN];
    for (size_t i = 0; i < c->n_kafka; i++) {
        const char *name = c->kafka[i].name;
        if (!strncmp(name, "consumer.", 9) || !strncmp(name, "producer.", 9)) name += 9;
        if (rd_kafka_conf_set(conf, name, c->kafka[i].val, kerr, sizeof kerr) != RD_KAFKA_CONF_OK) {
            rc = pl_errf(err, errlen, CM_CONFIG_EINVAL, "configuration key 'kafka.%s': %s",
                         c->kafka[i].name, kerr);
            break;
        }
    }
    rd_kafka_conf_destroy(conf);
    return rc;
}

static const char *cm_raw(const cm_config *c, const char *key, cm_prop_type *type) {
    int i = cm_prop_find(c, key);
    if (i < 0) return NULL;
    *type = c->props[i].type;
    return c->val[i] ? c->val[i] : c->props[i].def;
}

const char *cm_config_str(const cm_config *c, const char *key) {
    cm_prop_type t;
    const char *v = cm_raw(c, key, &t);
    return v ? v : "";
}

long long cm_config_int(const cm_config *c, const char *key) {
    cm_prop_type t;
    long long v;
    const char *s = cm_raw(c, key, &t);
    return s && t == CM_PROP_INT && cm_parse_int(s, &v) == 0 ? v : 0;
}

bool cm_config_bool(const cm_config *c, const char *key) {
    cm_prop_type t;
    bool b;
    const char *s = cm_raw(c, key, &t);
    return s && t == CM_PROP_BOOL && cm_parse_bool(s, &b) == 0 ? b : false;
}

int cm_config_enum(const cm_config *c, const char *key) {
    int i = cm_prop_find(c, key);
    if (i < 0 || c->props[i].type != CM_PROP_ENUM) return 0;
    int k = cm_enum_find(c->props[i].def, c->val[i]);
    return k < 0 ? 0 : k;
}

size_t cm_config_kafka_count(const cm_config *c) { return c->n_kafka; }

void cm_config_kafka_at(const cm_config *c, size_t i, const char **name, const char **val) {
    *name = i < c->n_kafka ? c->kafka[i].name : NULL;
    *val = i < c->n_kafka ? c->kafka[i].val : NULL;
}

int cm_config_doc_table(FILE *f, const cm_prop *props, size_t n) {
    static const char *const tname[] = {"string", "integer", "boolean", "string (required)",
                                        "one of"};
    char env[256];
    for (size_t i = 0; i < n; i++) {
        const cm_prop *p = &props[i];
        char range[256] = "";
        if (p->type == CM_PROP_INT) snprintf(range, sizeof range, " %lld..%lld", p->min, p->max);
        int def_len = (int)strlen(p->def);
        if (p->type == CM_PROP_ENUM) { /* " `a`, `b`", and the default is the first */
            range[0] = ' ';
            def_len = cm_enum_list(p->def, "`", range + 1, sizeof range - 1);
        }
        cm_env_name(p->name, env, sizeof env);
        fprintf(f, "| `%s` | %s%s | `%.*s` | `%s` | %s |\n", p->name, tname[p->type], range,
                def_len, p->def, env, p->doc);
    }
    return ferror(f) ? -1 : 0;
}

/* ---- the command line of a table-configured command ---- */

/* State of the three passes of cm_config_cli over argv. */
typedef struct cm_cli_pass {
    cm_config *c;  /* the configuration being built */
    int phase;     /* 0: --help / --print-config-doc, 1: --config files, 2: flags */
    int print_doc; /* --print-config-doc was given */
} cm_cli_pass;

static int cm_cli_config(void *ctx, const cli_opt *o, const char *v, char *err, size_t errlen) {
    cm_cli_pass *p = ctx;
    return p->phase == 1 && cm_config_load_file(p->c, v, err, errlen) ? -2 : 0;
}

static int cm_cli_set(void *ctx, const cli_opt *o, const char *v, char *err, size_t errlen) {
    cm_cli_pass *p = ctx;
    return p->phase == 2 && cm_config_set_pair(p->c, v, "flag --set", err, errlen) ? -2 : 0;
}

/* --KEY value: any table key or kafka.X. */
static int cm_cli_key(void *ctx, const char *a, const char *v, char *err, size_t errlen) {
    cm_cli_pass *p = ctx;
    if (strncmp(a, "--", 2) || !v) {
        return pl_errf(err, errlen, CM_CONFIG_EINVAL, "unexpected argument '%s' (see --help)", a);
    }
    if (p->phase == 2 && cm_config_set(p->c, a + 2, v, "command line", err, errlen)) return -1;
    return 1;
}

int cm_config_cli(cm_config *c, const char *synopsis, const char *about, int argc, char **argv,
                  char *const *envp) {
    cm_cli_pass p = {c, 0, 0};
    const cli_opt opts[] = {
        {"--config", NULL, CLI_FN, NULL, 0, 0, "FILE",
         "read `key = value` lines (before the environment)", cm_cli_config},
        {"--set", NULL, CLI_FN, NULL, 0, 0, "key=value", "set one key", cm_cli_set},
        {"--print-config-doc", NULL, CLI_FLAG, &p.print_doc, 0, 0, NULL,
         "write the configuration reference (Markdown) and exit", NULL},
    };
    const cli_cmd cmd = {c->cmd, synopsis, about, opts, CLI_NOPTS(opts), NULL, 0, 0, cm_cli_key};
    char err[PL_ERR_LEN * 4]; /* as CLI_ERRLEN: messages quote config values */
    for (p.phase = 0; p.phase < 3; p.phase++) {
        if (p.phase == 2 && cm_config_load_env(c, envp, err, sizeof err) != 0)
            return cli_fail(&cmd, "%s", err);
        int pr = cli_parse(&cmd, argc, argv, &p, NULL, NULL);
        if (pr != CLI_OK) return pr;
        if (p.phase == 0 && p.print_doc) return CM_CONFIG_CLI_DOC;
    }
    if (cm_config_validate(c, err, sizeof err) != 0) return cli_fail(&cmd, "%s", err);
    return CLI_OK;
}
