/*
 * test_sch_wire.c -- the pieces under the record codecs: the UTF-8
 * validator against a plain reference decoder, the error-code table, the
 * header checks (content-type, traceparent), the pre-scan on every msgpack
 * type, and a seeded mutation run over valid records of all four kinds
 * (decode must return a code, never crash or leak; a decoded record must
 * re-encode to bytes that decode again).
 */
#include "sch_test.h"

#include <stdlib.h>
#include <string.h>

/* Reference validator: decode each code point and check its range, the
 * shortest form and surrogates (written for clarity, not speed). */
static bool ref_utf8(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i], need, cp;
        if (c < 0x80) {
            i++;
            continue;
        }
        if ((c & 0xE0) == 0xC0) {
            need = 1;
            cp = c & 0x1F;
        } else if ((c & 0xF0) == 0xE0) {
            need = 2;
            cp = c & 0x0F;
        } else if ((c & 0xF8) == 0xF0) {
            need = 3;
            cp = c & 0x07;
        } else return false;
        if (i + need >= n) return false;
        for (unsigned k = 1; k <= need; k++) {
            if ((s[i + k] & 0xC0) != 0x80) return false;
            cp = (cp << 6) | (s[i + k] & 0x3F);
        }
        static const unsigned min[4] = {0, 0x80, 0x800, 0x10000};
        if (cp < min[need] || cp > 0x10FFFF) return false;
        if (cp >= 0xD800 && cp <= 0xDFFF) return false;
        i += need + 1;
    }
    return true;
}

PT_TEST(utf8_matches_reference) {
    unsigned char buf[24];
    int valid = 0;
    for (int iter = 0; iter < 200000; iter++) {
        size_t n = pt_rand() % sizeof buf;
        for (size_t i = 0; i < n; i++) {
            uint64_t r = pt_rand();
            /* bias towards lead/continuation bytes and their edges */
            static const unsigned char pick[] = {0x41, 0x7f, 0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xbf,
                                                 0xc0, 0xc1, 0xc2, 0xdf, 0xe0, 0xe1, 0xec, 0xed,
                                                 0xee, 0xef, 0xf0, 0xf1, 0xf3, 0xf4, 0xf5, 0xff};
            buf[i] = (r & 1) ? (unsigned char)(r >> 8) : pick[(r >> 8) % sizeof pick];
        }
        bool a = sch_utf8_valid((const char *)buf, n);
        bool b = ref_utf8(buf, n);
        valid += a;
        PT_ASSERT_MSG(a == b, "disagree on iteration %d (len %zu)", iter, n);
    }
    PT_ASSERT(valid > 1000); /* the generator reaches valid strings too */
    /* long ASCII runs go through the 8-byte path, with a fault at the end */
    char s[100];
    memset(s, 'a', sizeof s);
    PT_ASSERT(sch_utf8_valid(s, sizeof s));
    s[99] = (char)0xc3;
    PT_ASSERT(!sch_utf8_valid(s, sizeof s));
    s[98] = (char)0xc3;
    s[99] = (char)0xa9;
    PT_ASSERT(sch_utf8_valid(s, sizeof s));
}

PT_TEST(error_table) {
    size_t n = sch_err_count();
    PT_ASSERT(n >= 40);
    for (size_t i = 0; i < n; i++) {
        int code = sch_err_code_at(i);
        const char *name = sch_err_name(code);
        PT_ASSERT(code <= 0);
        PT_EQ_INT(sch_err_from_name(name, strlen(name)), code);
        PT_ASSERT(strlen(sch_err_describe(code)) > 5);
        for (size_t j = 0; j < i; j++) {
            PT_ASSERT(sch_err_code_at(j) != code);
            PT_ASSERT(strcmp(sch_err_name(sch_err_code_at(j)), name) != 0);
        }
    }
    PT_EQ_STR(sch_err_name(SCH_E_TOO_MANY_MESSAGES), "E_TOO_MANY_MESSAGES");
    PT_EQ_STR(sch_err_name(-1000), "E_UNKNOWN");
    PT_EQ_INT(sch_err_from_name("E_NOPE", 6), SCH_E_UNKNOWN);
    PT_EQ_INT(sch_err_from_name("E_TRUNCATEDX", 11), SCH_E_TRUNCATED);
    PT_EQ_INT(sch_err_from_name(NULL, 0), SCH_E_UNKNOWN);
    PT_EQ_STR(sch_role_name(SCH_ROLE_ASSISTANT), "assistant");
    PT_EQ_STR(sch_finish_name(SCH_FINISH_EXPIRED), "expired");
}

PT_TEST(content_type) {
    static const char *const ok[] = {
        SCH_CONTENT_TYPE,
        "application/x-parley+msgpack",
        "Application/X-Parley+MsgPack;v=1",
        "application/x-parley+msgpack ; charset=binary ; v = 1.7",
        "application/x-parley+msgpack; v=\"1\"",
    };
    static const struct {
        const char *v;
        int code;
    } bad[] = {
        {"application/json", SCH_E_UNSUPPORTED_CONTENT_TYPE},
        {"application/msgpack; v=1", SCH_E_UNSUPPORTED_CONTENT_TYPE},
        {"", SCH_E_UNSUPPORTED_CONTENT_TYPE},
        {"application/x-parley+msgpack; v=2", SCH_E_UNSUPPORTED_VERSION},
        {"application/x-parley+msgpack; v=0.9", SCH_E_UNSUPPORTED_VERSION},
        {"application/x-parley+msgpack; v=", SCH_E_UNSUPPORTED_CONTENT_TYPE},
        {"application/x-parley+msgpack; v=1.", SCH_E_UNSUPPORTED_CONTENT_TYPE},
        {"application/x-parley+msgpack; v=1x", SCH_E_UNSUPPORTED_CONTENT_TYPE},
        {"application/x-parley+msgpack; v=99999999999999999999", SCH_E_UNSUPPORTED_CONTENT_TYPE},
    };
    char err[256];
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        PT_ASSERT_MSG(sch_content_type_check(ok[i], strlen(ok[i]), err, sizeof err) == 0, "%s: %s",
                      ok[i], err);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        PT_ASSERT_MSG(sch_content_type_check(bad[i].v, strlen(bad[i].v), err, sizeof err) ==
                          bad[i].code,
                      "%s", bad[i].v);
    PT_EQ_INT(sch_content_type_check(NULL, 0, err, sizeof err), 0);
}

PT_TEST(traceparent) {
    const char *good = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    PT_EQ_INT(sch_traceparent_check(good, strlen(good)), 0);
    const char *future = "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-xyz";
    PT_EQ_INT(sch_traceparent_check(future, strlen(future)), 0);
    static const char *const bad[] = {
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
        "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        PT_ASSERT_MSG(sch_traceparent_check(bad[i], strlen(bad[i])) == SCH_E_BAD_VALUE, "%s",
                      bad[i]);
    PT_EQ_INT(sch_traceparent_check(NULL, 0), SCH_E_BAD_VALUE);
}

PT_TEST(scan_every_type_in_unknown_fields) {
    /* one unknown field holding every msgpack type with every width */
    static const unsigned char vals[] = {
        0xdc, 0x00, 0x1c,                                     /* array16 of 28 */
        0x00, 0x7f, 0xe0, 0xc0, 0xc2, 0xc3,                   /* fixint, nil, bools */
        0xcc, 1,    0xcd, 0,    1,    0xce, 0,    0,    0, 1, /* uint8/16/32 */
        0xcf, 0,    0,    0,    0,    0,    0,    0,    1,    /* uint64 */
        0xd0, 0x80, 0xd1, 0,    1,    0xd2, 0,    0,    0, 1, /* int8/16/32 */
        0xd3, 0,    0,    0,    0,    0,    0,    0,    1,    /* int64 */
        0xca, 0,    0,    0,    0,    0xcb, 0,    0,    0, 0, 0, 0,    0,   0, /* floats */
        0xd9, 1,    'a',  0xda, 0,    1,    'b',  0xdb, 0, 0, 0, 1,    'c',    /* str8/16/32 */
        0xc4, 1,    0,    0xc5, 0,    1,    0,    0xc6, 0, 0, 0, 1,    0,      /* bin8/16/32 */
        0xd4, 1,    0,    0xd8, 1,    0,    0,    0,    0, 0, 0, 0,    0,   0, 0, 0, 0, 0, 0,
        0,    0,    0xc7, 1,    5,    0,    0xc8, 0,    1, 5, 0, 0xc9, 0,   0, 0, 1, 5, 0, /* ext */
        0xde, 0,    0, /* map16 empty */
    };
    sch_turn t;
    SCH_DECODE_OK(turn, NULL, &t, "M5 " T_BASE T_MSG1 "s r", 5, T_BASE_ARGS, T_MSG1_ARGS, "all",
                  vals, sizeof vals);
    sch_turn_free(&t);
    /* each cut inside that field is reported as truncation */
    size_t n;
    unsigned char *b = mp_build(&n, "M5 " T_BASE T_MSG1 "s r", 5, T_BASE_ARGS, T_MSG1_ARGS, "all",
                                vals, sizeof vals);
    char err[256];
    for (size_t k = n - sizeof vals; k < n; k++)
        PT_EQ_INT(sch_turn_decode(b, k, NULL, &t, err, sizeof err), SCH_E_TRUNCATED);
    free(b);
}

/* Decode buf as kind; on success re-encode and decode again (must pass). */
static int sch_try(int kind, const unsigned char *buf, size_t len) {
    char err[256];
    sch_buf out;
    int rc;
    sch_buf_init(&out);
    switch (kind) {
    case 0: {
        sch_turn x;
        if (!(rc = sch_turn_decode(buf, len, NULL, &x, err, sizeof err))) {
            rc = sch_turn_encode(&x, &out, err, sizeof err);
            sch_turn_free(&x);
            if (!rc) rc = sch_turn_decode(out.data, out.len, NULL, &x, err, sizeof err);
            if (!rc) sch_turn_free(&x);
            if (rc) rc = 1000;
        }
        break;
    }
    case 1: {
        sch_chunk x;
        if (!(rc = sch_chunk_decode(buf, len, NULL, &x, err, sizeof err))) {
            rc = sch_chunk_encode(&x, &out, err, sizeof err);
            sch_chunk_free(&x);
            if (rc) rc = 1000;
        }
        break;
    }
    case 2: {
        sch_result x;
        if (!(rc = sch_result_decode(buf, len, NULL, &x, err, sizeof err))) {
            rc = sch_result_encode(&x, &out, err, sizeof err);
            sch_result_free(&x);
            if (rc) rc = 1000;
        }
        break;
    }
    default: {
        sch_dead x;
        if (!(rc = sch_dead_decode(buf, len, NULL, &x, err, sizeof err))) {
            rc = sch_dead_encode(&x, &out, err, sizeof err);
            sch_dead_free(&x);
            if (rc) rc = 1000;
        }
        break;
    }
    }
    sch_buf_free(&out);
    return rc;
}

PT_TEST(mutations_never_crash) {
    uint32_t toks[4] = {1, 2, 3, 4};
    sch_message msgs[2] = {{.role = SCH_ROLE_SYSTEM, .content = sch_str_c("sys \xc3\xa9")},
                           {.role = SCH_ROLE_USER, .content = sch_str_c("question?")}};
    sch_str stop = sch_str_c("\n");
    sch_buf seeds[4];
    char err[256];
    for (int i = 0; i < 4; i++) sch_buf_init(&seeds[i]);
    sch_turn t;
    sch_turn_init(&t);
    t.conversation_id = sch_str_c("c");
    t.turn_id = sch_str_c("t");
    t.messages = msgs;
    t.n_messages = 2;
    t.params.stop = &stop;
    t.params.n_stop = 1;
    t.params.has_seed = true;
    t.model = sch_str_c("m");
    PT_EQ_INT(sch_turn_encode(&t, &seeds[0], err, sizeof err), 0);
    sch_chunk k;
    sch_chunk_init(&k);
    k.conversation_id = t.conversation_id;
    k.turn_id = t.turn_id;
    k.text = sch_str_c("abc");
    k.tokens = toks;
    k.n_tokens = 4;
    PT_EQ_INT(sch_chunk_encode(&k, &seeds[1], err, sizeof err), 0);
    sch_result r;
    sch_result_init(&r);
    r.conversation_id = t.conversation_id;
    r.turn_id = t.turn_id;
    r.worker = sch_str_c("w");
    r.finish_reason = SCH_FINISH_ERROR;
    r.has_error = true;
    r.error_code = SCH_E_EXPIRED;
    PT_EQ_INT(sch_result_encode(&r, &seeds[2], err, sizeof err), 0);
    sch_header h = {sch_str_c("traceparent"), sch_str_c("x")};
    sch_dead d;
    sch_dead_init(&d);
    d.reason = sch_str_c("bad");
    d.topic = sch_str_c("parley.turns");
    d.value = sch_str_c("\x01\x02");
    d.headers = &h;
    d.n_headers = 1;
    PT_EQ_INT(sch_dead_encode(&d, &seeds[3], err, sizeof err), 0);
    int decoded = 0, failed = 0;
    unsigned char m[512];
    for (int iter = 0; iter < 40000; iter++) {
        int kind = iter & 3;
        size_t len = seeds[kind].len;
        memcpy(m, seeds[kind].data, len);
        int edits = 1 + (int)(pt_rand() % 4);
        for (int e = 0; e < edits; e++) {
            uint64_t rr = pt_rand();
            size_t at = (size_t)(rr >> 16) % len;
            switch (rr & 3) {
            case 0: m[at] ^= (unsigned char)(1u << ((rr >> 8) & 7)); break;
            case 1: m[at] = (unsigned char)(rr >> 8); break;
            case 2: len = at; break; /* truncate */
            default:
                if (len < sizeof m) m[len++] = (unsigned char)(rr >> 8);
            }
            if (len == 0) break;
        }
        int rc = sch_try(kind, m, len);
        PT_ASSERT_MSG(rc != 1000,
                      "kind %d iter %d: decoded but re-encode "
                      "failed",
                      kind, iter);
        PT_ASSERT(rc <= 0 && rc >= SCH_E_UNKNOWN);
        if (rc == 0) decoded++;
        else failed++;
    }
    PT_ASSERT(decoded > 100 && failed > 1000);
    for (int i = 0; i < 4; i++) sch_buf_free(&seeds[i]);
}
