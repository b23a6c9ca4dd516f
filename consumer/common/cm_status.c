/*
 * cm_status.c -- encode and parse the worker status record (cm_status.h).
 */
#include "cm_status.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

static const char *const cm_status_states[] = {"running", "paused", "draining", "stopped", NULL};

char *cm_status_encode(const cm_status *s, size_t *len) {
    json_t *j = json_pack("{si ss ss ss ss sI sI sI sI sI sf sf}", "v", CM_STATUS_VERSION, "worker",
                          s->worker, "host", s->host, "model", s->model, "state", s->state, "ts_ms",
                          (json_int_t)s->ts_ms, "interval_ms", (json_int_t)s->interval_ms, "turns",
                          (json_int_t)s->turns, "prompt_tokens", (json_int_t)s->prompt_tokens,
                          "cached_tokens", (json_int_t)s->cached_tokens, "turns_per_s",
                          s->turns_per_s, "cache_share", s->cache_share);
    char *txt = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (txt) *len = strlen(txt);
    return txt;
}

/* Copy string member `name` of o into dst (cap bytes with NUL): 0, or -1
 * with a message. */
static int cm_status_str(json_t *o, const char *name, char *dst, size_t cap, char *err,
                         size_t errlen) {
    json_t *v = json_object_get(o, name);
    if (!json_is_string(v)) {
        snprintf(err, errlen, "status record: '%s' must be a string", name);
        return -1;
    }
    size_t n = json_string_length(v);
    const char *p = json_string_value(v);
    if (n >= cap || memchr(p, 0, n)) {
        snprintf(err, errlen, "status record: '%s' must be at most %zu bytes without NUL", name,
                 cap - 1);
        return -1;
    }
    memcpy(dst, p, n);
    dst[n] = 0;
    return 0;
}

/* Integer member `name` of o, >= 0: 0, or -1 with a message. */
static int cm_status_int(json_t *o, const char *name, int64_t *dst, char *err, size_t errlen) {
    json_t *v = json_object_get(o, name);
    if (!json_is_integer(v) || json_integer_value(v) < 0) {
        snprintf(err, errlen, "status record: '%s' must be an integer >= 0", name);
        return -1;
    }
    *dst = (int64_t)json_integer_value(v);
    return 0;
}

/* Number member `name` of o in [lo, hi]: 0, or -1 with a message. */
static int cm_status_num(json_t *o, const char *name, double lo, double hi, double *dst, char *err,
                         size_t errlen) {
    json_t *v = json_object_get(o, name);
    double d = json_is_number(v) ? json_number_value(v) : NAN;
    if (!(d >= lo && d <= hi)) { /* also refuses NaN */
        snprintf(err, errlen, "status record: '%s' must be a number in [%g, %g]", name, lo, hi);
        return -1;
    }
    *dst = d;
    return 0;
}

int cm_status_parse(const void *buf, size_t len, cm_status *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    if (!buf || len == 0) {
        snprintf(err, errlen, "status record: empty value");
        return -1;
    }
    if (len > CM_STATUS_MAX) {
        snprintf(err, errlen, "status record: %zu bytes, more than %d", len, CM_STATUS_MAX);
        return -1;
    }
    json_error_t je;
    json_t *o = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
    int rc = -1;
    if (!json_is_object(o)) {
        snprintf(err, errlen, "status record: not a JSON object (%.100s)",
                 o ? "another JSON value" : je.text);
        goto out;
    }
    json_t *v = json_object_get(o, "v");
    if (!json_is_integer(v) || json_integer_value(v) < 1) {
        snprintf(err, errlen, "status record: 'v' must be an integer >= 1");
        goto out;
    }
    if (json_integer_value(v) > CM_STATUS_VERSION) {
        snprintf(err, errlen, "status record: version %lld is newer than this reader's %d",
                 (long long)json_integer_value(v), CM_STATUS_VERSION);
        goto out;
    }
    out->v = (int)json_integer_value(v);
    int64_t turns, pt, ct;
    if (cm_status_str(o, "worker", out->worker, sizeof out->worker, err, errlen) ||
        cm_status_str(o, "host", out->host, sizeof out->host, err, errlen) ||
        cm_status_str(o, "model", out->model, sizeof out->model, err, errlen) ||
        cm_status_str(o, "state", out->state, sizeof out->state, err, errlen) ||
        cm_status_int(o, "ts_ms", &out->ts_ms, err, errlen) ||
        cm_status_int(o, "interval_ms", &out->interval_ms, err, errlen) ||
        cm_status_int(o, "turns", &turns, err, errlen) ||
        cm_status_int(o, "prompt_tokens", &pt, err, errlen) ||
        cm_status_int(o, "cached_tokens", &ct, err, errlen) ||
        cm_status_num(o, "turns_per_s", 0, 1e9, &out->turns_per_s, err, errlen) ||
        cm_status_num(o, "cache_share", -1, 1, &out->cache_share, err, errlen))
        goto out;
    if (!out->worker[0]) {
        snprintf(err, errlen, "status record: 'worker' is empty");
        goto out;
    }
    int known = 0;
    for (int i = 0; cm_status_states[i]; i++) known |= !strcmp(out->state, cm_status_states[i]);
    if (!known) {
        snprintf(err, errlen,
                 "status record: 'state' must be running, paused, draining or stopped");
        goto out;
    }
    out->turns = (uint64_t)turns;
    out->prompt_tokens = (uint64_t)pt;
    out->cached_tokens = (uint64_t)ct;
    rc = 0;
out:
    json_decref(o);
    if (rc) memset(out, 0, sizeof *out);
    return rc;
}
