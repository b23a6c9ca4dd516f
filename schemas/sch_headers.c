/*
 * sch_headers.c -- checks of the Kafka headers that travel with records:
 * content-type (which format and major version the value is) and the W3C
 * trace context `traceparent` (carried from input to every output).
 *
 * content-type: "application/x-parley+msgpack; v=1".  The media type is
 * matched case-insensitively; parameters are `name=value` separated by ';'
 * with optional spaces; `v` may carry a minor ("1.3"), which readers ignore
 * because minors only add optional fields; unknown parameters are ignored.
 * A record without the header is read as version 1 (producers in other
 * languages often cannot set headers).
 *
 * sch_content_type_format() also accepts "application/json" (a ChatTurn
 * written as JSON, sch_json.c), optionally with "; charset=utf-8" (any
 * other charset is refused: JSON on Kafka is UTF-8, RFC 8259 section 8.1)
 * and the same optional `v`.  sch_content_type_check() keeps accepting
 * parley's msgpack type only: it is what readers of worker output use.
 * sch_accept_json() reads a turn's `accept` header: the first media range
 * being application/json asks for JSON results (no q-value negotiation:
 * there are only two formats and msgpack is the default).
 */
#include "sch_internal.h"

#include <string.h>

static const char sch_media[] = "application/x-parley+msgpack";
static const char sch_media_json[] = SCH_CONTENT_TYPE_JSON;
static const char sch_media_cancel[] = "application/x-parley-cancel+msgpack";

static bool sch_space(char ch) { return ch == ' ' || ch == '\t'; }

/* Trim [*b, *e) of blanks. */
static void sch_trim(const char **b, const char **e) {
    while (*b < *e && sch_space(**b)) (*b)++;
    while (*e > *b && sch_space((*e)[-1])) (*e)--;
}

static bool sch_ieq(const char *a, size_t n, const char *lit) {
    if (strlen(lit) != n) return false;
    for (size_t i = 0; i < n; i++) {
        char x = a[i];
        if (x >= 'A' && x <= 'Z') x = (char)(x - 'A' + 'a');
        if (x != lit[i]) return false;
    }
    return true;
}

/* Parameter v's value: digits [ "." digits ], optionally quoted. */
static int sch_version_param(const char *b, const char *e, char *err, size_t errlen) {
    char q[200];
    unsigned long major = 0;
    const char *p;
    if (e - b >= 2 && *b == '"' && e[-1] == '"') {
        b++;
        e--;
    }
    sch_quote(q, sizeof q, b, (size_t)(e - b));
    for (p = b; p < e && *p >= '0' && *p <= '9'; p++) {
        if (major > 100000) break; /* too long: reported below */
        major = major * 10 + (unsigned long)(*p - '0');
    }
    if (p == b || major > 100000)
        return pl_errf(err, errlen, SCH_E_UNSUPPORTED_CONTENT_TYPE,
                       "content-type: version %s is not a number", q);
    if (p < e) {
        const char *m = ++p;
        if (p[-1] != '.')
            return pl_errf(err, errlen, SCH_E_UNSUPPORTED_CONTENT_TYPE,
                           "content-type: version %s is not N or N.M", q);
        while (p < e && *p >= '0' && *p <= '9') p++;
        if (p == m || p != e)
            return pl_errf(err, errlen, SCH_E_UNSUPPORTED_CONTENT_TYPE,
                           "content-type: version %s is not N or N.M", q);
    }
    if (major != SCH_VERSION)
        return pl_errf(err, errlen, SCH_E_UNSUPPORTED_VERSION,
                       "content-type: version %s not supported (this "
                       "reader reads major %d)",
                       q, SCH_VERSION);
    return SCH_OK;
}

/* Parameters after the media type ([e, end) starts at ';' or is empty):
 * `v` checked as above; `charset` (JSON only) must be utf-8. */
static int sch_ct_params(const char *e, const char *end, bool json, char *err, size_t errlen) {
    char q[200];
    while (e < end) {
        const char *pb = e + 1, *pe = memchr(pb, ';', (size_t)(end - pb));
        if (!pe) pe = end;
        e = pe;
        sch_trim(&pb, &pe);
        const char *eq = memchr(pb, '=', (size_t)(pe - pb));
        if (!eq) continue;
        const char *nb = pb, *ne = eq, *vb = eq + 1, *ve = pe;
        sch_trim(&nb, &ne);
        sch_trim(&vb, &ve);
        if (sch_ieq(nb, (size_t)(ne - nb), "v")) {
            int rc = sch_version_param(vb, ve, err, errlen);
            if (rc) return rc;
        } else if (json && sch_ieq(nb, (size_t)(ne - nb), "charset")) {
            if (ve - vb >= 2 && *vb == '"' && ve[-1] == '"') {
                vb++;
                ve--;
            }
            if (!sch_ieq(vb, (size_t)(ve - vb), "utf-8") &&
                !sch_ieq(vb, (size_t)(ve - vb), "utf8")) {
                sch_quote(q, sizeof q, vb, (size_t)(ve - vb));
                return pl_errf(err, errlen, SCH_E_UNSUPPORTED_CONTENT_TYPE,
                               "content-type: charset %s is not utf-8", q);
            }
        }
    }
    return SCH_OK;
}

int sch_content_type_format(const char *val, size_t len, sch_format *fmt, char *err,
                            size_t errlen) {
    char q[200];
    sch_format f = SCH_FORMAT_MSGPACK;
    if (fmt) *fmt = f;
    if (!val) return SCH_OK;
    const char *end = val + len, *b = val, *e = memchr(val, ';', len);
    if (!e) e = end;
    sch_trim(&b, &e);
    if (sch_ieq(b, (size_t)(e - b), sch_media_json)) {
        f = SCH_FORMAT_JSON;
    } else if (!sch_ieq(b, (size_t)(e - b), sch_media)) {
        sch_quote(q, sizeof q, val, len);
        return pl_errf(err, errlen, SCH_E_UNSUPPORTED_CONTENT_TYPE,
                       "content-type: %s is not %s or %s", q, sch_media, sch_media_json);
    }
    int rc = sch_ct_params(e, end, f == SCH_FORMAT_JSON, err, errlen);
    if (rc) return rc;
    if (fmt) *fmt = f;
    return SCH_OK;
}

int sch_content_type_check(const char *val, size_t len, char *err, size_t errlen) {
    char q[200];
    if (!val) return SCH_OK;
    const char *end = val + len, *b = val, *e = memchr(val, ';', len);
    if (!e) e = end;
    sch_trim(&b, &e);
    if (!sch_ieq(b, (size_t)(e - b), sch_media)) {
        sch_quote(q, sizeof q, val, len);
        return pl_errf(err, errlen, SCH_E_UNSUPPORTED_CONTENT_TYPE, "content-type: %s is not %s", q,
                       sch_media);
    }
    return sch_ct_params(e, end, false, err, errlen);
}

bool sch_content_type_cancel(const char *val, size_t len) {
    if (!val) return false;
    const char *end = val + len, *b = val, *e = memchr(val, ';', len);
    if (!e) e = end;
    sch_trim(&b, &e);
    if (!sch_ieq(b, (size_t)(e - b), sch_media_cancel)) return false;
    return sch_ct_params(e, end, false, NULL, 0) == SCH_OK;
}

bool sch_accept_json(const char *val, size_t len) {
    if (!val) return false;
    const char *end = val + len, *b = val, *e = val;
    while (e < end && *e != ';' && *e != ',') e++;
    sch_trim(&b, &e);
    return sch_ieq(b, (size_t)(e - b), sch_media_json);
}

static bool sch_hex_run(const char *s, size_t n, bool *all_zero) {
    *all_zero = true;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f'))) return false;
        if (ch != '0') *all_zero = false;
    }
    return true;
}

int sch_traceparent_check(const char *v, size_t len) {
    bool zero;
    /* vv-<32>-<16>-ff: 2+1+32+1+16+1+2 = 55 */
    if (!v || len < 55) return SCH_E_BAD_VALUE;
    if (!sch_hex_run(v, 2, &zero) || (v[0] == 'f' && v[1] == 'f')) return SCH_E_BAD_VALUE;
    if (v[2] != '-' || v[35] != '-' || v[52] != '-') return SCH_E_BAD_VALUE;
    if (!sch_hex_run(v + 3, 32, &zero) || zero) return SCH_E_BAD_VALUE;
    if (!sch_hex_run(v + 36, 16, &zero) || zero) return SCH_E_BAD_VALUE;
    if (!sch_hex_run(v + 53, 2, &zero)) return SCH_E_BAD_VALUE;
    if (v[0] == '0' && v[1] == '0') return len == 55 ? SCH_OK : SCH_E_BAD_VALUE;
    return (len == 55 || v[55] == '-') ? SCH_OK : SCH_E_BAD_VALUE;
}
