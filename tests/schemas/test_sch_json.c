/*
 * test_sch_json.c -- ChatTurns written as JSON (schemas/sch_json.c) and the
 * JSON form of worker output.
 *
 * The golden vectors of schemas/testdata/json (MANIFEST, written by
 * tests/schemas/gen_json_vectors.py) each decode to their expected code; a
 * valid one with a msgpack twin must decode to the very same turn (both
 * re-encoded byte for byte).  Inline cases cover the content-type and
 * accept headers, the limits enforced before jansson allocates, and the
 * msgpack -> JSON writer (round trip through jansson for results and
 * chunks).  SCH_TESTDATA is set by CMake.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memmem */
#endif
#include "sch_test.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef SCH_TESTDATA
#error "SCH_TESTDATA (path of schemas/testdata) must be defined"
#endif

static char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, len = 0;
    char *b = malloc(cap);
    size_t got;
    while (b && (got = fread(b + len, 1, cap - len, f)) > 0) {
        len += got;
        if (len == cap) {
            char *x = realloc(b, cap *= 2);
            if (!x) {
                free(b);
                b = NULL;
            }
            b = x;
        }
    }
    fclose(f);
    *n = len;
    return b;
}

static int decode_json(const char *s, sch_turn *t, char *err, size_t errlen) {
    return sch_turn_decode_json(s, strlen(s), NULL, t, err, errlen);
}

PT_TEST(json_golden_vectors) {
    char path[1024], line[512], err[256];
    snprintf(path, sizeof path, "%s/json/MANIFEST", SCH_TESTDATA);
    FILE *m = fopen(path, "r");
    PT_ASSERT_MSG(m != NULL, "cannot open %s", path);
    int n = 0;
    while (fgets(line, sizeof line, m)) {
        char name[200], code[100], twin[200] = "";
        if (sscanf(line, "%199s %99s %199s", name, code, twin) < 2) continue;
        size_t len, mlen;
        snprintf(path, sizeof path, "%s/json/%s.json", SCH_TESTDATA, name);
        char *buf = slurp(path, &len);
        PT_ASSERT_MSG(buf != NULL, "cannot read %s", path);
        sch_turn t;
        int rc = sch_turn_decode_json(buf, len, NULL, &t, err, sizeof err);
        free(buf);
        int want = strcmp(code, "OK") ? sch_err_from_name(code, strlen(code)) : 0;
        if (rc != want) {
            if (!rc) sch_turn_free(&t);
            fclose(m);
            PT_FAIL("%s: expected %s, got %s (%s)", name, code, sch_err_name(rc), err);
        }
        if (rc) {
            PT_ASSERT_MSG(sch_test_zero(&t, sizeof t), "%s: output not zeroed", name);
            PT_ASSERT_MSG(err[0] != 0, "%s: no message", name);
        }
        if (!rc && twin[0]) {
            snprintf(path, sizeof path, "%s/%s.msgpack", SCH_TESTDATA, twin);
            char *mp = slurp(path, &mlen);
            PT_ASSERT_MSG(mp != NULL, "cannot read %s", path);
            sch_turn u;
            int rc2 = sch_turn_decode(mp, mlen, NULL, &u, err, sizeof err);
            free(mp);
            PT_ASSERT_MSG(rc2 == 0, "%s: %s", twin, err);
            sch_buf a, b;
            sch_buf_init(&a);
            sch_buf_init(&b);
            PT_EQ_INT(sch_turn_encode(&t, &a, err, sizeof err), 0);
            PT_EQ_INT(sch_turn_encode(&u, &b, err, sizeof err), 0);
            bool same = a.len == b.len && !memcmp(a.data, b.data, a.len);
            sch_buf_free(&a);
            sch_buf_free(&b);
            sch_turn_free(&u);
            if (!same) {
                sch_turn_free(&t);
                fclose(m);
                PT_FAIL("%s decodes differently from its twin %s", name, twin);
            }
        }
        if (!rc) sch_turn_free(&t);
        n++;
    }
    fclose(m);
    PT_ASSERT(n >= 20);
}

PT_TEST(json_turn_fields) {
    char err[256];
    sch_turn t;
    const char *s = "{\"v\":1,\"conversation_id\":\"c\\u00e9\",\"turn_id\":\"t\","
                    "\"messages\":[{\"role\":\"system\",\"content\":\"a\\u0000b\"},"
                    "{\"role\":\"user\",\"content\":\"hi\",\"name\":\"x\"}],"
                    "\"params\":{\"max_tokens\":7,\"temperature\":0,\"top_p\":0.5,"
                    "\"seed\":9223372036854775807,\"stop\":[\"x\",\"yz\"]},"
                    "\"stream\":true,\"namespace\":\"ns-1\",\"deadline_ms\":null,"
                    "\"unknown\":{\"deep\":[1,2.5,null,true]}}";
    PT_EQ_INT(decode_json(s, &t, err, sizeof err), 0);
    PT_EQ_INT(t.conversation_id.len, 3);
    PT_ASSERT(!memcmp(t.conversation_id.ptr, "c\xc3\xa9", 3));
    PT_EQ_INT(t.n_messages, 2);
    PT_EQ_INT(t.messages[0].content.len, 3);
    PT_EQ_INT(t.messages[0].content.ptr[1], 0);
    PT_EQ_INT(t.params.max_tokens, 7);
    PT_ASSERT(t.params.temperature == 0.0 && t.params.top_p == 0.5);
    PT_ASSERT(t.params.has_seed && t.params.seed == 9223372036854775807ull);
    PT_EQ_INT(t.params.n_stop, 2);
    PT_ASSERT(t.stream);
    PT_EQ_STR(t.ns.ptr, "ns-1");
    PT_EQ_INT(t.deadline_ms, 0);
    sch_turn_free(&t);
}

PT_TEST(json_turn_errors_and_limits) {
    char err[256], big[200];
    sch_turn t;
    sch_limits lim;
    /* syntax error: code and position in the message */
    PT_EQ_INT(decode_json("{\"v\":1,\n \"x\": tru}", &t, err, sizeof err), SCH_E_BAD_JSON);
    PT_ASSERT_MSG(strstr(err, "line 2") != NULL, "%s", err);
    PT_ASSERT(sch_test_zero(&t, sizeof t));
    /* nested deeper than max_depth: refused before parsing */
    sch_limits_default(&lim);
    lim.max_depth = 3;
    const char *deep = "{\"a\":[[1]]}", *deeper = "{\"a\":[[[1]]]}";
    PT_ASSERT(sch_turn_decode_json(deep, strlen(deep), &lim, &t, err, sizeof err) ==
              SCH_E_MISSING_FIELD);
    PT_EQ_INT(sch_turn_decode_json(deeper, strlen(deeper), &lim, &t, err, sizeof err),
              SCH_E_TOO_DEEP);
    /* brackets inside strings do not count */
    const char *instr = "{\"a\":\"[[[[[\\\"[[\"}";
    PT_ASSERT(sch_turn_decode_json(instr, strlen(instr), &lim, &t, err, sizeof err) ==
              SCH_E_MISSING_FIELD);
    /* too many values, too many bytes */
    lim.max_objects = 5;
    PT_EQ_INT(sch_turn_decode_json("{\"a\":[1,2,3,4,5,6]}", 19, &lim, &t, err, sizeof err),
              SCH_E_TOO_MANY_OBJECTS);
    sch_limits_default(&lim);
    lim.max_total_bytes = 10;
    PT_EQ_INT(sch_turn_decode_json("{\"v\":1,    \"x\":1}", 17, &lim, &t, err, sizeof err),
              SCH_E_RECORD_TOO_LARGE);
    /* a real where an int is expected; a negative int; a key over 64 bytes */
    PT_EQ_INT(decode_json("{\"v\":1.0}", &t, err, sizeof err), SCH_E_WRONG_TYPE);
    PT_EQ_INT(decode_json("{\"v\":-1}", &t, err, sizeof err), SCH_E_UNSUPPORTED_VERSION);
    memset(big, 'k', sizeof big);
    snprintf(big, sizeof big, "{\"%065d\":1}", 0);
    PT_EQ_INT(decode_json(big, &t, err, sizeof err), SCH_E_BAD_KEY);
    PT_EQ_INT(decode_json("{\"v\":1,\"x\":1e999}", &t, err, sizeof err), SCH_E_OUT_OF_RANGE);
    PT_EQ_INT(decode_json("null", &t, err, sizeof err), SCH_E_NOT_MAP);
    PT_EQ_INT(sch_turn_decode_json(NULL, 3, NULL, &t, err, sizeof err), SCH_E_INVALID_ARGUMENT);
    /* the error message is ASCII even when jansson quotes input bytes */
    PT_EQ_INT(decode_json("{\"v\":1, \xc3\xa9}", &t, err, sizeof err), SCH_E_BAD_JSON);
    for (const char *p = err; *p; p++) PT_ASSERT((unsigned char)*p >= 0x20 && *p < 0x7f);
}

PT_TEST(json_content_type_and_accept) {
    char err[256];
    sch_format f;
    static const char *const json[] = {
        "application/json",
        "Application/JSON",
        "application/json; charset=utf-8",
        "application/json;charset=\"UTF-8\"",
        "application/json; v=1",
    };
    for (size_t i = 0; i < sizeof json / sizeof json[0]; i++) {
        f = SCH_FORMAT_MSGPACK;
        PT_ASSERT_MSG(sch_content_type_format(json[i], strlen(json[i]), &f, err, sizeof err) == 0,
                      "%s: %s", json[i], err);
        PT_EQ_INT(f, SCH_FORMAT_JSON);
    }
    PT_EQ_INT(
        sch_content_type_format(SCH_CONTENT_TYPE, strlen(SCH_CONTENT_TYPE), &f, err, sizeof err),
        0);
    PT_EQ_INT(f, SCH_FORMAT_MSGPACK);
    PT_EQ_INT(sch_content_type_format(NULL, 0, &f, err, sizeof err), 0);
    PT_EQ_INT(f, SCH_FORMAT_MSGPACK);
    PT_EQ_INT(sch_content_type_format("application/json; charset=latin-1", 33, &f, err, sizeof err),
              SCH_E_UNSUPPORTED_CONTENT_TYPE);
    PT_EQ_INT(sch_content_type_format("application/json; v=2", 21, &f, err, sizeof err),
              SCH_E_UNSUPPORTED_VERSION);
    PT_EQ_INT(sch_content_type_format("text/json", 9, &f, err, sizeof err),
              SCH_E_UNSUPPORTED_CONTENT_TYPE);
    /* the msgpack-only check is unchanged */
    PT_EQ_INT(sch_content_type_check("application/json", 16, err, sizeof err),
              SCH_E_UNSUPPORTED_CONTENT_TYPE);
    PT_ASSERT(sch_accept_json("application/json", 16));
    PT_ASSERT(sch_accept_json(" APPLICATION/json ; q=1, */*", 28));
    PT_ASSERT(!sch_accept_json(SCH_CONTENT_TYPE, strlen(SCH_CONTENT_TYPE)));
    PT_ASSERT(!sch_accept_json("*/*", 3));
    PT_ASSERT(!sch_accept_json(NULL, 0));
}

PT_TEST(json_result_and_chunk_output) {
    char err[256];
    sch_result r;
    sch_result_init(&r);
    r.conversation_id = sch_str_c("c\"1");
    r.turn_id = sch_str_c("t\\1");
    r.attempt = 9223372036854775807ull;
    r.text = (sch_str){"a\x00\n\x1f\xc3\xa9", 6};
    static const uint32_t toks[] = {1, 2147483647};
    r.tokens = toks;
    r.n_tokens = 2;
    r.finish_reason = SCH_FINISH_ERROR;
    r.has_error = true;
    r.error_code = SCH_E_INTERNAL;
    r.error_message = sch_str_c("boom");
    r.prompt_tokens = 5;
    r.cached_tokens = 4;
    r.worker = sch_str_c("w-0");
    sch_buf b;
    sch_buf_init(&b);
    PT_EQ_INT(sch_result_encode_json(&r, &b, err, sizeof err), 0);
    json_error_t je;
    json_t *j = json_loadb(b.data, b.len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
    PT_ASSERT_MSG(j != NULL, "%s: %.*s", je.text, (int)b.len, b.data);
    PT_EQ_STR(json_string_value(json_object_get(j, "conversation_id")), "c\"1");
    PT_EQ_STR(json_string_value(json_object_get(j, "turn_id")), "t\\1");
    PT_EQ_INT(json_string_length(json_object_get(j, "text")), 6);
    PT_ASSERT(!memcmp(json_string_value(json_object_get(j, "text")), r.text.ptr, 6));
    PT_EQ_STR(json_string_value(json_object_get(j, "finish_reason")), "error");
    PT_EQ_INT(json_integer_value(json_array_get(json_object_get(j, "tokens"), 1)), 2147483647);
    PT_EQ_STR(json_string_value(json_object_get(json_object_get(j, "error"), "code")),
              "E_INTERNAL");
    PT_EQ_INT(json_integer_value(json_object_get(json_object_get(j, "usage"), "cached_tokens")), 4);
    PT_EQ_INT(json_integer_value(json_object_get(j, "v")), 1);
    json_decref(j);
    /* 2^64-1 is written exactly (jansson itself stops at 2^63-1) */
    r.attempt = 18446744073709551615ull;
    PT_EQ_INT(sch_result_encode_json(&r, &b, err, sizeof err), 0);
    PT_ASSERT(memmem(b.data, b.len, "\"attempt\":18446744073709551615,", 31) != NULL);
    sch_chunk c;
    sch_chunk_init(&c);
    c.conversation_id = sch_str_c("c");
    c.turn_id = sch_str_c("t");
    c.text = sch_str_c("");
    c.last = true;
    PT_EQ_INT(sch_chunk_encode_json(&c, &b, err, sizeof err), 0);
    j = json_loadb(b.data, b.len, 0, &je);
    PT_ASSERT_MSG(j != NULL, "%s", je.text);
    PT_ASSERT(json_is_true(json_object_get(j, "last")));
    PT_EQ_INT(json_array_size(json_object_get(j, "tokens")), 0);
    json_decref(j);
    /* floats read back as reals; bin and NaN have no JSON form */
    static const unsigned char f1[] = {0xcb, 0x3f, 0xf0, 0, 0, 0, 0, 0, 0}; /* 1.0 */
    PT_EQ_INT(sch_msgpack_to_json(f1, sizeof f1, &b, err, sizeof err), 0);
    PT_ASSERT(b.len == 3 && !memcmp(b.data, "1.0", 3));
    static const unsigned char bin[] = {0xc4, 0x01, 0x00};
    PT_EQ_INT(sch_msgpack_to_json(bin, sizeof bin, &b, err, sizeof err), SCH_E_WRONG_TYPE);
    static const unsigned char nan[] = {0xcb, 0x7f, 0xf8, 0, 0, 0, 0, 0, 0};
    PT_EQ_INT(sch_msgpack_to_json(nan, sizeof nan, &b, err, sizeof err), SCH_E_OUT_OF_RANGE);
    static const unsigned char badstr[] = {0xa1, 0xff};
    PT_EQ_INT(sch_msgpack_to_json(badstr, sizeof badstr, &b, err, sizeof err), SCH_E_BAD_UTF8);
    sch_buf_free(&b);
}

PT_TEST(json_to_msgpack_types) {
    char err[256];
    sch_buf b;
    sch_buf_init(&b);
    const char *s = "[1, -1, 1.5, \"s\", true, false, null, {}, []]";
    PT_EQ_INT(sch_json_to_msgpack(s, strlen(s), NULL, &b, err, sizeof err), 0);
    static const unsigned char want[] = {0x99, 0x01, 0xff, 0xcb, 0x3f, 0xf8, 0,    0,    0,   0,
                                         0,    0,    0xa1, 's',  0xc3, 0xc2, 0xc0, 0x80, 0x90};
    PT_EQ_INT(b.len, sizeof want);
    PT_ASSERT(!memcmp(b.data, want, sizeof want));
    PT_EQ_INT(sch_json_to_msgpack("[9223372036854775808]", 21, NULL, &b, err, sizeof err),
              SCH_E_OUT_OF_RANGE);
    PT_EQ_INT(b.len, 0);
    sch_buf_free(&b);
}
