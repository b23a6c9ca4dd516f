/*
 * test_sch_v14.c -- what spec 1.4 added: the CancelTurn record, its
 * content-type, and TurnResult finish_reason "cancelled".  Round trips,
 * the golden vectors of the record (schemas/testdata/cancel_*), the
 * content-type test that tells a cancel from a ChatTurn, and that a 1.3
 * record is unaffected (a cancel is not a turn, a turn is not a cancel).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memmem */
#endif
#include "sch_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Read testdata/NAME.msgpack into a malloc'd buffer (NULL on failure). */
static char *v14_vector(const char *name, size_t *len) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s.msgpack", SCH_TESTDATA, name);
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    long n;
    if (!f) return NULL;
    if (fseek(f, 0, SEEK_END) || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET)) goto err;
    if (!(buf = malloc((size_t)n + 1))) goto err;
    if (fread(buf, 1, (size_t)n, f) != (size_t)n) goto err;
    fclose(f);
    *len = (size_t)n;
    return buf;
err:
    free(buf);
    fclose(f);
    return NULL;
}

PT_TEST(v14_cancel_round_trip) {
    sch_cancel k, d;
    sch_buf b, b2;
    char err[256];
    sch_cancel_init(&k);
    k.conversation_id = sch_str_c("c-42");
    k.turn_id = sch_str_c("t-7");
    k.cancelled_ms = 1796601600123ull;
    k.reason = sch_str_c("client disconnected");
    sch_buf_init(&b);
    sch_buf_init(&b2);
    PT_EQ_INT(sch_cancel_encode(&k, &b, err, sizeof err), 0);
    PT_EQ_INT(sch_cancel_decode(b.data, b.len, NULL, &d, err, sizeof err), 0);
    PT_EQ_STR(d.conversation_id.ptr, "c-42");
    PT_EQ_STR(d.turn_id.ptr, "t-7");
    PT_ASSERT(d.cancelled_ms == 1796601600123ull);
    PT_EQ_STR(d.reason.ptr, "client disconnected");
    PT_EQ_INT(sch_cancel_encode(&d, &b2, err, sizeof err), 0);
    PT_ASSERT(b.len == b2.len && !memcmp(b.data, b2.data, b.len));
    sch_cancel_free(&d);
    sch_buf_free(&b);
    sch_buf_free(&b2);
}

PT_TEST(v14_cancel_golden) {
    size_t len = 0;
    char err[256];
    sch_cancel d;
    sch_buf b;
    char *v = v14_vector("cancel_ok_minimal", &len);
    PT_ASSERT_MSG(v != NULL, "cancel_ok_minimal.msgpack missing");
    PT_EQ_INT(sch_cancel_decode(v, len, NULL, &d, err, sizeof err), 0);
    PT_EQ_STR(d.conversation_id.ptr, "conv-1");
    PT_EQ_STR(d.turn_id.ptr, "turn-1");
    PT_ASSERT(d.cancelled_ms == 0 && d.reason.ptr == NULL);
    /* the encoder writes the vector's bytes (no optional field) */
    sch_buf_init(&b);
    PT_EQ_INT(sch_cancel_encode(&d, &b, err, sizeof err), 0);
    PT_ASSERT(b.len == len && !memcmp(b.data, v, len));
    sch_buf_free(&b);
    sch_cancel_free(&d);
    /* a cancel is not a ChatTurn: it has no input */
    sch_turn t;
    PT_EQ_INT(sch_turn_decode(v, len, NULL, &t, err, sizeof err), SCH_E_MISSING_INPUT);
    free(v);
    v = v14_vector("cancel_err_missing_turn_id", &len);
    PT_ASSERT(v != NULL);
    PT_EQ_INT(sch_cancel_decode(v, len, NULL, &d, err, sizeof err), SCH_E_MISSING_FIELD);
    free(v);
}

PT_TEST(v14_cancel_refused) {
    sch_cancel k;
    sch_buf b;
    char err[256];
    sch_cancel_init(&k);
    k.conversation_id = sch_str_c("c");
    sch_buf_init(&b);
    PT_EQ_INT(sch_cancel_encode(&k, &b, err, sizeof err), SCH_E_MISSING_FIELD);
    PT_ASSERT(strstr(err, "turn_id") != NULL);
    PT_EQ_INT((int)b.len, 0);
    k.turn_id = sch_str_c("t\n");
    PT_EQ_INT(sch_cancel_encode(&k, &b, err, sizeof err), SCH_E_BAD_VALUE);
    sch_buf_free(&b);
}

PT_TEST(v14_content_type) {
    static const char ct[] = SCH_CONTENT_TYPE_CANCEL;
    sch_format f;
    char err[256];
    PT_ASSERT(sch_content_type_cancel(ct, strlen(ct)));
    PT_ASSERT(sch_content_type_cancel("Application/X-Parley-Cancel+msgpack", 35));
    PT_ASSERT(sch_content_type_cancel("application/x-parley-cancel+msgpack; v=1.4", 42));
    PT_ASSERT(!sch_content_type_cancel("application/x-parley-cancel+msgpack; v=2", 40));
    PT_ASSERT(!sch_content_type_cancel(NULL, 0));
    PT_ASSERT(!sch_content_type_cancel(SCH_CONTENT_TYPE, strlen(SCH_CONTENT_TYPE)));
    PT_ASSERT(!sch_content_type_cancel(SCH_CONTENT_TYPE_JSON, strlen(SCH_CONTENT_TYPE_JSON)));
    /* a reader of ChatTurns (1.3 and before) refuses it before any field */
    PT_EQ_INT(sch_content_type_format(ct, strlen(ct), &f, err, sizeof err),
              SCH_E_UNSUPPORTED_CONTENT_TYPE);
}

PT_TEST(v14_result_cancelled) {
    sch_result r, d;
    sch_buf b;
    char err[256];
    static const uint32_t toks[] = {15043};
    sch_result_init(&r);
    r.conversation_id = sch_str_c("c");
    r.turn_id = sch_str_c("t");
    r.text = sch_str_c("Hel");
    r.tokens = toks;
    r.n_tokens = 1;
    r.completion_tokens = 1;
    r.worker = sch_str_c("w-0");
    r.finish_reason = SCH_FINISH_CANCELLED;
    sch_buf_init(&b);
    PT_EQ_INT(sch_result_encode(&r, &b, err, sizeof err), 0);
    PT_ASSERT(memmem(b.data, b.len,
                     "\xa9"
                     "cancelled",
                     10) != NULL);
    PT_EQ_INT(sch_result_decode(b.data, b.len, NULL, &d, err, sizeof err), 0);
    PT_EQ_INT(d.finish_reason, SCH_FINISH_CANCELLED);
    PT_ASSERT(!d.has_error);
    PT_EQ_STR(sch_finish_name(SCH_FINISH_CANCELLED), "cancelled");
    PT_ASSERT(sch_finish_name((sch_finish)5) == NULL);
    sch_result_free(&d);
    sch_buf_free(&b);
}
