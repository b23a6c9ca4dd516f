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
 */
#include "sch_internal.h"

#include <string.h>

static const char sch_media[] = "application/x-parley+msgpack";

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
static int sch_version_param(const char *b, const char *e, char *err,
                             size_t errlen) {
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
        return sch_fail(err, errlen, SCH_E_UNSUPPORTED_CONTENT_TYPE,
                        "content-type: version %s is not a number", q);
    if (p < e) {
        const char *m = ++p;
        if (p[-1] != '.')
            return sch_fail(err, errlen, SCH_E_UNSUPPORTED_CONTENT_TYPE,
                            "content-type: version %s is not N or N.M", q);
        while (p < e && *p >= '0' && *p <= '9') p++;
        if (p == m || p != e)
            return sch_fail(err, errlen, SCH_E_UNSUPPORTED_CONTENT_TYPE,
                            "content-type: version %s is not N or N.M", q);
    }
    if (major != SCH_VERSION)
        return sch_fail(err, errlen, SCH_E_UNSUPPORTED_VERSION,
                        "content-type: version %s not supported (this "
                        "reader reads major %d)",
                        q, SCH_VERSION);
    return SCH_OK;
}

int sch_content_type_check(const char *val, size_t len, char *err,
                           size_t errlen) {
    char q[200];
    if (!val) return SCH_OK;
    const char *end = val + len, *b = val, *e = memchr(val, ';', len);
    if (!e) e = end;
    sch_trim(&b, &e);
    if (!sch_ieq(b, (size_t)(e - b), sch_media)) {
        sch_quote(q, sizeof q, val, len);
        return sch_fail(err, errlen, SCH_E_UNSUPPORTED_CONTENT_TYPE,
                        "content-type: %s is not %s", q, sch_media);
    }
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
        }
    }
    return SCH_OK;
}

static bool sch_hex_run(const char *s, size_t n, bool *all_zero) {
    *all_zero = true;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f')))
            return false;
        if (ch != '0') *all_zero = false;
    }
    return true;
}

int sch_traceparent_check(const char *v, size_t len) {
    bool zero;
    /* vv-<32>-<16>-ff: 2+1+32+1+16+1+2 = 55 */
    if (!v || len < 55) return SCH_E_BAD_VALUE;
    if (!sch_hex_run(v, 2, &zero) || (v[0] == 'f' && v[1] == 'f'))
        return SCH_E_BAD_VALUE;
    if (v[2] != '-' || v[35] != '-' || v[52] != '-') return SCH_E_BAD_VALUE;
    if (!sch_hex_run(v + 3, 32, &zero) || zero) return SCH_E_BAD_VALUE;
    if (!sch_hex_run(v + 36, 16, &zero) || zero) return SCH_E_BAD_VALUE;
    if (!sch_hex_run(v + 53, 2, &zero)) return SCH_E_BAD_VALUE;
    if (v[0] == '0' && v[1] == '0') return len == 55 ? SCH_OK : SCH_E_BAD_VALUE;
    return (len == 55 || v[55] == '-') ? SCH_OK : SCH_E_BAD_VALUE;
}
