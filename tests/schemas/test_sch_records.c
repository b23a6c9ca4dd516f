/*
 * test_sch_records.c -- TokenChunk, TurnResult and DeadLetter codecs: round
 * trips through encoder and decoder, byte-stable re-encoding, and each
 * record's own error paths (the shared scan/type paths are covered by the
 * ChatTurn tests).
 */
#include "sch_test.h"

#include <string.h>

#define C_BASE "su ss ss "
#define C_BASE_ARGS "v", 1, "conversation_id", "c1", "turn_id", "t1"

PT_TEST(chunk_round_trip) {
    uint32_t toks[3] = {17, 0, 99};
    sch_chunk in, out;
    sch_buf b, b2;
    char err[256];
    sch_chunk_init(&in);
    in.conversation_id = sch_str_c("c1");
    in.turn_id = sch_str_c("t1");
    in.attempt = 0xfedcba9876543210ull;
    in.seq = 41;
    in.text = sch_str_c(" w\xc3\xb6rld");
    in.tokens = toks;
    in.n_tokens = 3;
    in.last = true;
    sch_buf_init(&b);
    sch_buf_init(&b2);
    PT_EQ_INT(sch_chunk_encode(&in, &b, err, sizeof err), 0);
    PT_EQ_INT(sch_chunk_decode(b.data, b.len, NULL, &out, err, sizeof err), 0);
    PT_EQ_STR(out.conversation_id.ptr, "c1");
    PT_EQ_STR(out.turn_id.ptr, "t1");
    PT_ASSERT(out.attempt == 0xfedcba9876543210ull);
    PT_EQ_INT(out.seq, 41);
    PT_EQ_STR(out.text.ptr, " w\xc3\xb6rld");
    PT_EQ_INT(out.n_tokens, 3);
    PT_EQ_MEM(out.tokens, toks, sizeof toks);
    PT_ASSERT(out.last);
    PT_EQ_INT(sch_chunk_encode(&out, &b2, err, sizeof err), 0);
    PT_ASSERT(b2.len == b.len && !memcmp(b.data, b2.data, b.len));
    sch_chunk_free(&out);
    /* empty text and no tokens; `last` defaults to false */
    sch_chunk k;
    SCH_DECODE_OK(chunk, NULL, &k, "M7 " C_BASE "su su ss sA0", 7, C_BASE_ARGS, "attempt", 1, "seq",
                  0, "text", "", "tokens", 0);
    PT_ASSERT(!k.last && k.tokens == NULL && k.n_tokens == 0);
    PT_EQ_INT(k.text.len, 0);
    sch_chunk_free(&k);
    sch_buf_free(&b);
    sch_buf_free(&b2);
}

PT_TEST(chunk_errors) {
    sch_limits lim;
    sch_limits_default(&lim);
    lim.max_tokens = 2;
    lim.max_content_bytes = 3;
    SCH_EXPECT_ERR(chunk, NULL, SCH_E_MISSING_FIELD, "M6 " C_BASE "su su ss", 6, C_BASE_ARGS,
                   "attempt", 1, "seq", 0, "text", "x");
    SCH_EXPECT_ERR(chunk, NULL, SCH_E_MISSING_FIELD, "M6 " C_BASE "su ss sA0", 6, C_BASE_ARGS,
                   "attempt", 1, "text", "x", "tokens", 0);
    SCH_EXPECT_ERR(chunk, &lim, SCH_E_TOO_MANY_TOKENS, "M7 " C_BASE "su su ss sA3 uuu", 7,
                   C_BASE_ARGS, "attempt", 1, "seq", 0, "text", "x", "tokens", 3, 1, 2, 3);
    SCH_EXPECT_ERR(chunk, &lim, SCH_E_CONTENT_TOO_LONG, "M7 " C_BASE "su su ss sA0", 7, C_BASE_ARGS,
                   "attempt", 1, "seq", 0, "text", "abcd", "tokens", 0);
    SCH_EXPECT_ERR(chunk, NULL, SCH_E_BAD_UTF8, "M7 " C_BASE "su su ss sA0", 7, C_BASE_ARGS,
                   "attempt", 1, "seq", 0, "text", "\xc3", "tokens", 0);
    SCH_EXPECT_ERR(chunk, NULL, SCH_E_OUT_OF_RANGE, "M7 " C_BASE "si su ss sA0", 7, C_BASE_ARGS,
                   "attempt", (int64_t)-3, "seq", 0, "text", "", "tokens", 0);
    SCH_EXPECT_ERR(chunk, NULL, SCH_E_WRONG_TYPE, "M8 " C_BASE "su su ss sA0 su", 8, C_BASE_ARGS,
                   "attempt", 1, "seq", 0, "text", "", "tokens", 0, "last", 1);
    SCH_EXPECT_ERR(chunk, NULL, SCH_E_UNSUPPORTED_VERSION, "M7 su ss ss su su ss sA0", 7, "v", 3,
                   "conversation_id", "c", "turn_id", "t", "attempt", 1, "seq", 0, "text", "",
                   "tokens", 0);
}

/* A TurnResult with every field set. */
static void sch_result_sample(sch_result *r, const uint32_t *toks, size_t n) {
    sch_result_init(r);
    r->conversation_id = sch_str_c("conv");
    r->turn_id = sch_str_c("turn");
    r->attempt = 3;
    r->text = sch_str_c("Bonjour \xe2\x80\x94 salut");
    r->tokens = toks;
    r->n_tokens = n;
    r->finish_reason = SCH_FINISH_LENGTH;
    r->prompt_tokens = 1000;
    r->cached_tokens = 960;
    r->completion_tokens = n;
    r->queue_ms = 5;
    r->ttft_ms = 40;
    r->total_ms = 900;
    r->worker = sch_str_c("worker-1");
    r->model = sch_str_c("cai-tiny");
}

PT_TEST(result_round_trip) {
    uint32_t toks[2] = {5, 6};
    sch_result in, out;
    sch_buf b, b2;
    char err[256];
    sch_buf_init(&b);
    sch_buf_init(&b2);
    sch_result_sample(&in, toks, 2);
    PT_EQ_INT(sch_result_encode(&in, &b, err, sizeof err), 0);
    PT_EQ_INT(sch_result_decode(b.data, b.len, NULL, &out, err, sizeof err), 0);
    PT_EQ_STR(out.text.ptr, in.text.ptr);
    PT_EQ_INT(out.n_tokens, 2);
    PT_EQ_INT(out.tokens[1], 6);
    PT_EQ_INT(out.finish_reason, SCH_FINISH_LENGTH);
    PT_EQ_INT(out.prompt_tokens, 1000);
    PT_EQ_INT(out.cached_tokens, 960);
    PT_EQ_INT(out.completion_tokens, 2);
    PT_EQ_INT(out.queue_ms, 5);
    PT_EQ_INT(out.ttft_ms, 40);
    PT_EQ_INT(out.total_ms, 900);
    PT_EQ_STR(out.worker.ptr, "worker-1");
    PT_EQ_STR(out.model.ptr, "cai-tiny");
    PT_ASSERT(!out.has_error);
    PT_EQ_INT(sch_result_encode(&out, &b2, err, sizeof err), 0);
    PT_ASSERT(b2.len == b.len && !memcmp(b.data, b2.data, b.len));
    sch_result_free(&out);
    /* an error result: the code name comes from error_code */
    sch_result_sample(&in, NULL, 0);
    in.finish_reason = SCH_FINISH_ERROR;
    in.model.ptr = NULL;
    in.has_error = true;
    in.error_code = SCH_E_CONTEXT_OVERFLOW;
    in.error_message = sch_str_c("prompt of 9000 tokens exceeds 8192");
    PT_EQ_INT(sch_result_encode(&in, &b, err, sizeof err), 0);
    PT_EQ_INT(sch_result_decode(b.data, b.len, NULL, &out, err, sizeof err), 0);
    PT_ASSERT(out.has_error);
    PT_EQ_INT(out.error_code, SCH_E_CONTEXT_OVERFLOW);
    PT_EQ_STR(out.error_name.ptr, "E_CONTEXT_OVERFLOW");
    PT_EQ_STR(out.error_message.ptr, in.error_message.ptr);
    PT_ASSERT(out.model.ptr == NULL && out.tokens == NULL);
    sch_result_free(&out);
    /* a code name from a newer writer is kept as text */
    in.error_name = sch_str_c("E_FROM_THE_FUTURE");
    PT_EQ_INT(sch_result_encode(&in, &b, err, sizeof err), 0);
    PT_EQ_INT(sch_result_decode(b.data, b.len, NULL, &out, err, sizeof err), 0);
    PT_EQ_INT(out.error_code, SCH_E_UNKNOWN);
    PT_EQ_STR(out.error_name.ptr, "E_FROM_THE_FUTURE");
    sch_result_free(&out);
    /* encoder refusals */
    in.has_error = false;
    PT_EQ_INT(sch_result_encode(&in, &b, err, sizeof err), SCH_E_MISSING_FIELD);
    in.has_error = true;
    in.error_name = sch_str_c("lower_case");
    PT_EQ_INT(sch_result_encode(&in, &b, err, sizeof err), SCH_E_BAD_VALUE);
    in.error_name.ptr = NULL;
    in.cached_tokens = 1001;
    PT_EQ_INT(sch_result_encode(&in, &b, err, sizeof err), SCH_E_OUT_OF_RANGE);
    in.cached_tokens = 0;
    in.finish_reason = (sch_finish)9;
    PT_EQ_INT(sch_result_encode(&in, &b, err, sizeof err), SCH_E_BAD_VALUE);
    PT_EQ_INT(b.len, 0);
    sch_buf_free(&b);
    sch_buf_free(&b2);
}

/* Result fields after v/ids/attempt/text/tokens: format and args. */
#define R_HEAD "su ss ss su ss sA0 "
#define R_HEAD_ARGS \
    "v", 1, "conversation_id", "c", "turn_id", "t", "attempt", 1, "text", "x", "tokens", 0
#define R_USAGE "s M3 su su su s M3 su su su "
#define R_USAGE_ARGS(p, c)                                                                       \
    "usage", 3, "prompt_tokens", (p), "cached_tokens", (c), "completion_tokens", 1, "timing", 3, \
        "queue_ms", 0, "ttft_ms", 0, "total_ms", 0

PT_TEST(result_errors) {
    sch_result r;
    SCH_DECODE_OK(result, NULL, &r, "M10 " R_HEAD "ss " R_USAGE "ss", 10, R_HEAD_ARGS,
                  "finish_reason", "stop", R_USAGE_ARGS(4, 4), "worker", "w");
    PT_EQ_INT(r.finish_reason, SCH_FINISH_STOP);
    sch_result_free(&r);
    SCH_EXPECT_ERR(result, NULL, SCH_E_BAD_VALUE, "M10 " R_HEAD "ss " R_USAGE "ss", 10, R_HEAD_ARGS,
                   "finish_reason", "done", R_USAGE_ARGS(4, 4), "worker", "w");
    SCH_EXPECT_ERR(result, NULL, SCH_E_MISSING_FIELD, "M10 " R_HEAD "ss " R_USAGE "ss", 10,
                   R_HEAD_ARGS, "finish_reason", "error", R_USAGE_ARGS(4, 4), "worker", "w");
    SCH_EXPECT_ERR(result, NULL, SCH_E_OUT_OF_RANGE, "M10 " R_HEAD "ss " R_USAGE "ss", 10,
                   R_HEAD_ARGS, "finish_reason", "stop", R_USAGE_ARGS(4, 5), "worker", "w");
    SCH_EXPECT_ERR(result, NULL, SCH_E_MISSING_FIELD, "M9 " R_HEAD "ss " R_USAGE, 9, R_HEAD_ARGS,
                   "finish_reason", "stop", R_USAGE_ARGS(4, 4));
    SCH_EXPECT_ERR(result, NULL, SCH_E_MISSING_FIELD, "M9 " R_HEAD "ss s M2 su su ss", 9,
                   R_HEAD_ARGS, "finish_reason", "stop", "usage", 2, "prompt_tokens", 1,
                   "cached_tokens", 0, "worker", "w");
    SCH_EXPECT_ERR(result, NULL, SCH_E_BAD_VALUE, "M11 " R_HEAD "ss " R_USAGE "ss s M2 ss ss", 11,
                   R_HEAD_ARGS, "finish_reason", "error", R_USAGE_ARGS(4, 4), "worker", "w",
                   "error", 2, "code", "e-bad", "message", "m");
    SCH_EXPECT_ERR(result, NULL, SCH_E_WRONG_TYPE, "M11 " R_HEAD "ss " R_USAGE "ss ss", 11,
                   R_HEAD_ARGS, "finish_reason", "error", R_USAGE_ARGS(4, 4), "worker", "w",
                   "error", "E_INTERNAL");
    sch_limits lim;
    sch_limits_default(&lim);
    lim.max_text_bytes = 2;
    SCH_EXPECT_ERR(result, &lim, SCH_E_STRING_TOO_LONG, "M11 " R_HEAD "ss " R_USAGE "ss s M2 ss ss",
                   11, R_HEAD_ARGS, "finish_reason", "error", R_USAGE_ARGS(4, 4), "worker", "w",
                   "error", 2, "code", "E_INTERNAL", "message", "abc");
}

PT_TEST(dead_round_trip) {
    static const char raw[] = "\x92\xc1garbage";
    sch_header hdr[3] = {
        {sch_str_c("traceparent"),
         sch_str_c("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")},
        {{"\xff\xfe", 2}, {"\x00\x01", 2}}, /* non-UTF-8 name, binary value */
        {sch_str_c("empty"), {NULL, 0}},    /* null value */
    };
    sch_dead in, out;
    sch_buf b, b2;
    char err[256];
    sch_buf_init(&b);
    sch_buf_init(&b2);
    sch_dead_init(&in);
    in.reason = sch_str_c("record ends inside a value");
    in.error_code = SCH_E_TRUNCATED;
    in.topic = sch_str_c("parley.turns");
    in.partition = 7;
    in.offset = 123456789012ll;
    in.timestamp_ms = 1700000000000ll;
    in.key = sch_str_c("conv-9");
    in.value = (sch_str){raw, sizeof raw - 1};
    in.value_size = 4096;
    in.headers = hdr;
    in.n_headers = 3;
    in.turn_id = sch_str_c("t9");
    in.worker = sch_str_c("w-2");
    in.dead_ms = 1700000000500ull;
    PT_EQ_INT(sch_dead_encode(&in, &b, err, sizeof err), 0);
    PT_EQ_INT(sch_dead_decode(b.data, b.len, NULL, &out, err, sizeof err), 0);
    PT_EQ_STR(out.reason.ptr, in.reason.ptr);
    PT_EQ_INT(out.error_code, SCH_E_TRUNCATED);
    PT_EQ_STR(out.error_name.ptr, "E_TRUNCATED");
    PT_EQ_STR(out.topic.ptr, "parley.turns");
    PT_EQ_INT(out.partition, 7);
    PT_ASSERT(out.offset == 123456789012ll);
    PT_ASSERT(out.timestamp_ms == 1700000000000ll);
    PT_EQ_STR(out.key.ptr, "conv-9");
    PT_EQ_INT(out.value.len, sizeof raw - 1);
    PT_EQ_MEM(out.value.ptr, raw, sizeof raw - 1);
    PT_EQ_INT(out.value_size, 4096);
    PT_EQ_INT(out.n_headers, 3);
    PT_EQ_STR(out.headers[0].name.ptr, "traceparent");
    PT_EQ_INT(out.headers[0].value.len, 55);
    PT_EQ_INT(out.headers[1].name.len, 2);
    PT_EQ_MEM(out.headers[1].name.ptr, "\xff\xfe", 2);
    PT_EQ_MEM(out.headers[1].value.ptr, "\x00\x01", 2);
    PT_ASSERT(out.headers[2].value.ptr == NULL);
    PT_ASSERT(out.conversation_id.ptr == NULL);
    PT_EQ_STR(out.turn_id.ptr, "t9");
    PT_EQ_STR(out.worker.ptr, "w-2");
    PT_ASSERT(out.dead_ms == 1700000000500ull);
    PT_EQ_INT(sch_dead_encode(&out, &b2, err, sizeof err), 0);
    PT_ASSERT(b2.len == b.len && !memcmp(b.data, b2.data, b.len));
    sch_dead_free(&out);
    /* minimal: null key and value, no timestamp */
    sch_dead_init(&in);
    in.reason = sch_str_c("r");
    in.error_code = SCH_E_KEY_MISMATCH;
    in.topic = sch_str_c("t");
    PT_EQ_INT(sch_dead_encode(&in, &b, err, sizeof err), 0);
    PT_EQ_INT(sch_dead_decode(b.data, b.len, NULL, &out, err, sizeof err), 0);
    PT_ASSERT(out.key.ptr == NULL && out.value.ptr == NULL);
    PT_ASSERT(out.timestamp_ms == -1 && out.value_size == 0);
    PT_ASSERT(out.headers == NULL && out.n_headers == 0);
    PT_EQ_INT(out.error_code, SCH_E_KEY_MISMATCH);
    sch_dead_free(&out);
    /* encoder refusals */
    in.partition = -1;
    PT_EQ_INT(sch_dead_encode(&in, &b, err, sizeof err), SCH_E_OUT_OF_RANGE);
    in.partition = 0;
    in.value = sch_str_c("abc");
    in.value_size = 2;
    PT_EQ_INT(sch_dead_encode(&in, &b, err, sizeof err), SCH_E_OUT_OF_RANGE);
    in.value_size = 0;
    in.error_code = 12345; /* not a code: its name is E_UNKNOWN */
    PT_EQ_INT(sch_dead_encode(&in, &b, err, sizeof err), 0);
    sch_buf_free(&b);
    sch_buf_free(&b2);
}

#define D_HEAD "su ss ss ss su su "
#define D_HEAD_ARGS \
    "v", 1, "reason", "r", "error_code", "E_INTERNAL", "topic", "t", "partition", 0, "offset", 5

PT_TEST(dead_errors) {
    sch_limits lim;
    sch_limits_default(&lim);
    lim.max_headers = 1;
    sch_dead d;
    SCH_DECODE_OK(dead, &lim, &d, "M7 " D_HEAD "s A1 A2 sn", 7, D_HEAD_ARGS, "headers", 1, 2, "h");
    PT_EQ_INT(d.n_headers, 1);
    PT_ASSERT(d.headers[0].value.ptr == NULL);
    sch_dead_free(&d);
    SCH_EXPECT_ERR(dead, &lim, SCH_E_TOO_MANY_HEADERS, "M7 " D_HEAD "s A2 A2 sn A2 sn", 7,
                   D_HEAD_ARGS, "headers", 2, 2, "a", 2, "b");
    SCH_EXPECT_ERR(dead, NULL, SCH_E_WRONG_TYPE, "M7 " D_HEAD "s A1 A1 s", 7, D_HEAD_ARGS,
                   "headers", 1, 1, "a");
    SCH_EXPECT_ERR(dead, NULL, SCH_E_WRONG_TYPE, "M7 " D_HEAD "s A1 A2 uu", 7, D_HEAD_ARGS,
                   "headers", 1, 2, 1, 2);
    SCH_EXPECT_ERR(dead, NULL, SCH_E_OUT_OF_RANGE, "M8 " D_HEAD "sB su", 8, D_HEAD_ARGS, "value",
                   "abc", (size_t)3, "value_size", 2);
    SCH_EXPECT_ERR(dead, NULL, SCH_E_OUT_OF_RANGE, "M6 su ss ss ss si su", 6, "v", 1, "reason", "r",
                   "error_code", "E_X", "topic", "t", "partition", (int64_t)-1, "offset", 0);
    SCH_EXPECT_ERR(dead, NULL, SCH_E_OUT_OF_RANGE, "M6 su ss ss ss sU su", 6, "v", 1, "reason", "r",
                   "error_code", "E_X", "topic", "t", "partition", (uint64_t)1 << 31, "offset", 0);
    SCH_EXPECT_ERR(dead, NULL, SCH_E_MISSING_FIELD, "M5 su ss ss ss su", 5, "v", 1, "reason", "r",
                   "error_code", "E_X", "topic", "t", "partition", 0);
    SCH_EXPECT_ERR(dead, NULL, SCH_E_BAD_VALUE, "M6 su ss ss ss su su", 6, "v", 1, "reason", "r",
                   "error_code", "", "topic", "t", "partition", 0, "offset", 0);
    lim.max_content_bytes = 2;
    SCH_EXPECT_ERR(dead, &lim, SCH_E_CONTENT_TOO_LONG, "M7 " D_HEAD "sB", 7, D_HEAD_ARGS, "key",
                   "abc", (size_t)3);
}
