/*
 * sch_utf8.c -- strict UTF-8 validation and the text rules of string fields.
 *
 * Validation follows RFC 3629 / Unicode table 3-7 exactly: overlong forms
 * (C0, C1, E0 80..9F, F0 80..8F), UTF-16 surrogates (ED A0..BF), code points
 * above U+10FFFF (F4 90.., F5..FF), stray continuation bytes and truncated
 * sequences are all rejected.  Runs of ASCII are skipped eight bytes at a
 * time, since chat text is mostly ASCII and this is the decoder's hot loop.
 */
#include "sch_internal.h"

#include <string.h>

static inline bool sch_cont(unsigned char b) { return (b & 0xC0) == 0x80; }

bool sch_utf8_valid(const char *str, size_t len) {
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0;
    while (i < len) {
        if (i + 8 <= len) {
            uint64_t w;
            memcpy(&w, s + i, 8);
            if (!(w & 0x8080808080808080ull)) {
                i += 8;
                continue;
            }
        }
        unsigned char c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t need;
        unsigned char lo = 0x80, hi = 0xBF; /* range of the 2nd byte */
        if (c >= 0xC2 && c <= 0xDF) {
            need = 1;
        } else if (c >= 0xE0 && c <= 0xEF) {
            need = 2;
            if (c == 0xE0) lo = 0xA0;      /* overlong */
            else if (c == 0xED) hi = 0x9F; /* surrogates */
        } else if (c >= 0xF0 && c <= 0xF4) {
            need = 3;
            if (c == 0xF0) lo = 0x90;      /* overlong */
            else if (c == 0xF4) hi = 0x8F; /* > U+10FFFF */
        } else {
            return false; /* 80..C1 (stray/overlong), F5..FF */
        }
        if (len - i - 1 < need) return false;
        if (s[i + 1] < lo || s[i + 1] > hi) return false;
        for (size_t k = 2; k <= need; k++)
            if (!sch_cont(s[i + k])) return false;
        i += need + 1;
    }
    return true;
}

static bool sch_ns_char(unsigned char ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           ch == '.' || ch == '_' || ch == '-';
}

static bool sch_code_char(unsigned char ch) {
    return (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_';
}

int sch_check_rule(const char *path, const sch_str *str, sch_rule rule, char *err, size_t errlen) {
    const unsigned char *s = (const unsigned char *)str->ptr;
    size_t len = str->len;
    char q[200];
    if (rule == SCH_RULE_BYTES) return SCH_OK;
    if (!s && rule != SCH_RULE_TEXT)
        return pl_errf(err, errlen, SCH_E_MISSING_FIELD, "%s: required field missing", path);
    if (len && !s)
        return pl_errf(err, errlen, SCH_E_INVALID_ARGUMENT, "%s: NULL pointer with length %zu",
                       path, len);
    if (rule != SCH_RULE_TEXT && len == 0)
        return pl_errf(err, errlen, SCH_E_BAD_VALUE, "%s: must not be empty", path);
    if (rule == SCH_RULE_NS || rule == SCH_RULE_CODE) {
        for (size_t i = 0; i < len; i++) {
            bool ok = rule == SCH_RULE_NS ? sch_ns_char(s[i]) : sch_code_char(s[i]);
            if (!ok) {
                sch_quote(q, sizeof q, (const char *)s, len);
                return pl_errf(err, errlen, SCH_E_BAD_VALUE, "%s: %s has a byte outside %s", path,
                               q, rule == SCH_RULE_NS ? "[A-Za-z0-9._-]" : "[A-Z0-9_]");
            }
        }
        if (rule == SCH_RULE_CODE && len > SCH_MAX_KEY_BYTES)
            return pl_errf(err, errlen, SCH_E_BAD_VALUE, "%s: code name of %zu bytes (max %d)",
                           path, len, SCH_MAX_KEY_BYTES);
        return SCH_OK;
    }
    if (!sch_utf8_valid((const char *)s, len)) {
        sch_quote(q, sizeof q, (const char *)s, len);
        return pl_errf(err, errlen, SCH_E_BAD_UTF8, "%s: not valid UTF-8: %s", path, q);
    }
    if (rule == SCH_RULE_ID) {
        for (size_t i = 0; i < len; i++) {
            if (s[i] < 0x20 || s[i] == 0x7f) {
                sch_quote(q, sizeof q, (const char *)s, len);
                return pl_errf(err, errlen, SCH_E_BAD_VALUE, "%s: control character in %s", path,
                               q);
            }
        }
    }
    return SCH_OK;
}
