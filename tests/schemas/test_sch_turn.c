/*
 * test_sch_turn.c -- ChatTurn codec: decoding with defaults, round trips,
 * and every error path of the decoder and encoder.
 *
 * Records are built byte by byte with mp_build() so the tests can produce
 * what a hostile or sloppy producer would send.  Each error test checks the
 * exact code, that a message was written and that the output was left
 * zeroed; ASan (unit label) checks that failed decodes free everything.
 */
#define PTEST_MAIN
#include "sch_test.h"

#include <math.h>
#include <string.h>

PT_TEST(turn_minimal_defaults) {
    sch_turn t;
    SCH_DECODE_OK(turn, NULL, &t, "M4 " T_BASE T_MSG1, 4, T_BASE_ARGS, T_MSG1_ARGS);
    PT_EQ_INT(t.v, 1);
    PT_EQ_STR(t.conversation_id.ptr, "c1");
    PT_EQ_INT(t.conversation_id.len, 2);
    PT_EQ_STR(t.turn_id.ptr, "t1");
    PT_EQ_INT(t.n_messages, 1);
    PT_EQ_INT(t.messages[0].role, SCH_ROLE_USER);
    PT_EQ_STR(t.messages[0].content.ptr, "hi");
    PT_ASSERT(t.prompt_tokens == NULL && t.n_prompt_tokens == 0);
    PT_EQ_INT(t.params.max_tokens, 256);
    PT_NEAR(t.params.temperature, 1.0, 0);
    PT_NEAR(t.params.top_p, 1.0, 0);
    PT_EQ_INT(t.params.top_k, 0);
    PT_ASSERT(!t.params.has_seed);
    PT_EQ_INT(t.params.n_stop, 0);
    PT_NEAR(t.params.repetition_penalty, 1.0, 0);
    PT_ASSERT(!t.stream);
    PT_EQ_STR(t.ns.ptr, SCH_DEFAULT_NAMESPACE);
    PT_EQ_INT(t.deadline_ms, 0);
    PT_EQ_INT(t.created_ms, 0);
    PT_ASSERT(t.model.ptr == NULL);
    sch_turn_free(&t);
    PT_ASSERT(sch_test_zero(&t, sizeof t));
    sch_turn_free(&t); /* second free is a no-op */
}

PT_TEST(turn_full_fields) {
    sch_turn t;
    SCH_DECODE_OK(turn, NULL, &t,
                  "M10 " T_BASE "s A3 M2 ss ss M2 ss ss M2 ss ss "
                  "s M7 su sd sf su sU s A2 ss sd "
                  "st ss sU sU ss",
                  10, T_BASE_ARGS, "messages", 3, 2, "role", "system", "content", "Be brief.", 2,
                  "role", "user", "content", "Hello", 2, "content", "Hi!", "role", "assistant",
                  "params", 7, "max_tokens", 64, "temperature", 0.7, "top_p", 0.5, "top_k", 40,
                  "seed", (uint64_t)UINT64_MAX, "stop", 2, "\n\n", "User:", "repetition_penalty",
                  1.1, "stream", "namespace", "acme-prod_1.x", "deadline_ms",
                  (uint64_t)1700000060000ull, "created_ms", (uint64_t)1700000000000ull, "model",
                  "tiny");
    PT_EQ_INT(t.n_messages, 3);
    PT_EQ_INT(t.messages[0].role, SCH_ROLE_SYSTEM);
    PT_EQ_STR(t.messages[0].content.ptr, "Be brief.");
    PT_EQ_INT(t.messages[2].role, SCH_ROLE_ASSISTANT);
    PT_EQ_STR(t.messages[2].content.ptr, "Hi!");
    PT_EQ_INT(t.params.max_tokens, 64);
    PT_NEAR(t.params.temperature, 0.7, 0);
    PT_NEAR(t.params.top_p, 0.5, 0); /* float32 0.5 is exact */
    PT_EQ_INT(t.params.top_k, 40);
    PT_ASSERT(t.params.has_seed && t.params.seed == UINT64_MAX);
    PT_EQ_INT(t.params.n_stop, 2);
    PT_EQ_STR(t.params.stop[0].ptr, "\n\n");
    PT_EQ_STR(t.params.stop[1].ptr, "User:");
    PT_NEAR(t.params.repetition_penalty, 1.1, 0);
    PT_ASSERT(t.stream);
    PT_EQ_STR(t.ns.ptr, "acme-prod_1.x");
    PT_ASSERT(t.deadline_ms == 1700000060000ull);
    PT_ASSERT(t.created_ms == 1700000000000ull);
    PT_EQ_STR(t.model.ptr, "tiny");
    sch_turn_free(&t);
}

PT_TEST(turn_prompt_tokens_and_int_numbers) {
    sch_turn t;
    /* temperature as an int and stop as a single string are accepted */
    SCH_DECODE_OK(turn, NULL, &t, "M5 " T_BASE "s A4 u u u U s M2 su ss", 5, T_BASE_ARGS,
                  "prompt_tokens", 4, 1, 0, 127, (uint64_t)INT32_MAX, "params", 2, "temperature", 0,
                  "stop", "###");
    PT_ASSERT(t.messages == NULL && t.n_messages == 0);
    PT_EQ_INT(t.n_prompt_tokens, 4);
    PT_EQ_INT(t.prompt_tokens[0], 1);
    PT_EQ_INT(t.prompt_tokens[1], 0);
    PT_EQ_INT(t.prompt_tokens[3], INT32_MAX);
    PT_NEAR(t.params.temperature, 0, 0);
    PT_EQ_INT(t.params.n_stop, 1);
    PT_EQ_STR(t.params.stop[0].ptr, "###");
    sch_turn_free(&t);
}

PT_TEST(turn_unknown_fields_and_nil_ignored) {
    sch_turn t;
    static const unsigned char ext[] = {0xd6, 0xff, 0, 0, 0, 1};
    SCH_DECODE_OK(turn, NULL, &t,
                  "M9 " T_BASE "s A1 M3 ss ss s M1 sA2 uu "
                  "s M2 sn ss "
                  "sn sn s r s A3 A1 A1 M0 n B",
                  9, T_BASE_ARGS, "messages", 1, 3, "role", "user", "content", "x", "name", 1, "a",
                  2, 1, 2, "params", 2, "seed", "future_param", "ok", "model", "prompt_tokens",
                  "ext", ext, sizeof ext, "meta", 3, 1, 1, 0, "\x01", (size_t)1);
    PT_EQ_INT(t.n_messages, 1);
    PT_ASSERT(!t.params.has_seed); /* nil = absent */
    PT_ASSERT(t.model.ptr == NULL);
    sch_turn_free(&t);
}

PT_TEST(turn_round_trip) {
    sch_message msgs[3] = {
        {.role = SCH_ROLE_SYSTEM, .content = sch_str_c("You are terse.")},
        {.role = SCH_ROLE_USER, .content = {"nul\0inside \xe2\x82\xac \xf0\x9f\x98\x80", 19}},
        {.role = SCH_ROLE_ASSISTANT, .content = sch_str_c("")},
    };
    sch_str stops[2] = {sch_str_c("</s>"), sch_str_c("\xc3\xa9")};
    sch_turn in, out;
    sch_buf b;
    char err[256];
    sch_turn_init(&in);
    in.conversation_id = sch_str_c("conv-\xc3\xa9");
    in.turn_id = sch_str_c("turn 7");
    in.messages = msgs;
    in.n_messages = 3;
    in.params.max_tokens = 32768;
    in.params.temperature = 0.123456789;
    in.params.top_p = 0.95;
    in.params.top_k = INT32_MAX;
    in.params.has_seed = true;
    in.params.seed = 0;
    in.params.stop = stops;
    in.params.n_stop = 2;
    in.params.repetition_penalty = 100;
    in.stream = true;
    in.ns = sch_str_c("tenant.a");
    in.deadline_ms = UINT64_MAX;
    in.created_ms = 1;
    in.model = sch_str_c("m");
    sch_buf_init(&b);
    PT_EQ_INT(sch_turn_encode(&in, &b, err, sizeof err), 0);
    PT_EQ_INT(sch_turn_decode(b.data, b.len, NULL, &out, err, sizeof err), 0);
    PT_EQ_INT(out.n_messages, 3);
    for (int i = 0; i < 3; i++) {
        PT_EQ_INT(out.messages[i].role, msgs[i].role);
        PT_EQ_INT(out.messages[i].content.len, msgs[i].content.len);
        PT_EQ_MEM(out.messages[i].content.ptr, msgs[i].content.ptr, msgs[i].content.len);
        PT_EQ_INT(out.messages[i].content.ptr[out.messages[i].content.len], 0);
    }
    PT_EQ_STR(out.conversation_id.ptr, "conv-\xc3\xa9");
    PT_EQ_STR(out.turn_id.ptr, "turn 7");
    PT_EQ_INT(out.params.max_tokens, 32768);
    PT_ASSERT(out.params.temperature == 0.123456789);
    PT_ASSERT(out.params.top_p == 0.95);
    PT_EQ_INT(out.params.top_k, INT32_MAX);
    PT_ASSERT(out.params.has_seed && out.params.seed == 0);
    PT_EQ_INT(out.params.n_stop, 2);
    PT_EQ_STR(out.params.stop[1].ptr, "\xc3\xa9");
    PT_ASSERT(out.params.repetition_penalty == 100);
    PT_ASSERT(out.stream);
    PT_EQ_STR(out.ns.ptr, "tenant.a");
    PT_ASSERT(out.deadline_ms == UINT64_MAX && out.created_ms == 1);
    PT_EQ_STR(out.model.ptr, "m");
    /* re-encoding the decoded turn gives the same bytes */
    sch_buf b2;
    sch_buf_init(&b2);
    PT_EQ_INT(sch_turn_encode(&out, &b2, err, sizeof err), 0);
    PT_EQ_INT(b2.len, b.len);
    PT_EQ_MEM(b2.data, b.data, b.len);
    sch_turn_free(&out);
    /* the prompt_tokens form */
    uint32_t toks[3] = {5, 0, 2147483647u};
    sch_turn_init(&in);
    in.conversation_id = sch_str_c("c");
    in.turn_id = sch_str_c("t");
    in.prompt_tokens = toks;
    in.n_prompt_tokens = 3;
    PT_EQ_INT(sch_turn_encode(&in, &b, err, sizeof err), 0);
    PT_EQ_INT(sch_turn_decode(b.data, b.len, NULL, &out, err, sizeof err), 0);
    PT_EQ_INT(out.n_prompt_tokens, 3);
    PT_EQ_MEM(out.prompt_tokens, toks, sizeof toks);
    sch_turn_free(&out);
    sch_buf_free(&b);
    sch_buf_free(&b2);
}

PT_TEST(turn_structure_errors) {
    static const unsigned char c1[] = {0x81, 0xa1, 'v', 0xc1};
    static const unsigned char arr[] = {0x91, 0x01};
    static const unsigned char huge[] = {0x81, 0xa1, 'x', 0xdd, 0xff, 0xff, 0xff, 0xff};
    static const unsigned char hugemap[] = {0x81, 0xa1, 'x', 0xdf, 0x7f, 0xff, 0xff, 0xff};
    static const unsigned char hugestr[] = {0x81, 0xa1, 'x', 0xdb, 0xff, 0xff, 0xff, 0xf0};
    sch_turn t;
    char err[256];
    PT_EQ_INT(sch_turn_decode("", 0, NULL, &t, err, sizeof err), SCH_E_TRUNCATED);
    PT_EQ_INT(sch_turn_decode(c1, sizeof c1, NULL, &t, err, sizeof err), SCH_E_MALFORMED);
    PT_EQ_INT(sch_turn_decode(arr, sizeof arr, NULL, &t, err, sizeof err), SCH_E_NOT_MAP);
    PT_ASSERT(strstr(err, "array") != NULL);
    PT_EQ_INT(sch_turn_decode("\x2a", 1, NULL, &t, err, sizeof err), SCH_E_NOT_MAP);
    /* element counts larger than the bytes left never reach msgpack-c */
    PT_EQ_INT(sch_turn_decode(huge, sizeof huge, NULL, &t, err, sizeof err), SCH_E_TRUNCATED);
    PT_EQ_INT(sch_turn_decode(hugemap, sizeof hugemap, NULL, &t, err, sizeof err), SCH_E_TRUNCATED);
    PT_EQ_INT(sch_turn_decode(hugestr, sizeof hugestr, NULL, &t, err, sizeof err), SCH_E_TRUNCATED);
    PT_EQ_INT(sch_turn_decode(NULL, 5, NULL, &t, err, sizeof err), SCH_E_INVALID_ARGUMENT);
    PT_EQ_INT(sch_turn_decode("\x80", 1, NULL, NULL, err, sizeof err), SCH_E_INVALID_ARGUMENT);
    SCH_EXPECT_ERR(turn, NULL, SCH_E_TRAILING_BYTES, "M4 " T_BASE T_MSG1 "n", 4, T_BASE_ARGS,
                   T_MSG1_ARGS);
    SCH_EXPECT_ERR(turn, NULL, SCH_E_TRAILING_BYTES, "M4 " T_BASE T_MSG1 "M0", 4, T_BASE_ARGS,
                   T_MSG1_ARGS, 0);
}

PT_TEST(turn_every_prefix_is_truncated) {
    size_t n;
    unsigned char *b = mp_build(&n, "M5 " T_BASE T_MSG1 "s M2 sd sA2 ss", 5, T_BASE_ARGS,
                                T_MSG1_ARGS, "params", 2, "temperature", 0.5, "stop", 2, "a", "b");
    sch_turn t;
    char err[256];
    for (size_t k = 0; k < n; k++) {
        int rc = sch_turn_decode(b, k, NULL, &t, err, sizeof err);
        PT_ASSERT_MSG(rc == SCH_E_TRUNCATED, "prefix %zu: %s", k, sch_err_name(rc));
    }
    PT_EQ_INT(sch_turn_decode(b, n, NULL, &t, err, sizeof err), 0);
    sch_turn_free(&t);
    free(b);
}

PT_TEST(turn_deep_nesting) {
    /* 100000 nested arrays in an unknown field: the pre-scan stops at
     * max_depth without recursion or allocation */
    size_t depth = 100000, n;
    unsigned char *head =
        mp_build(&n, "M5 " T_BASE T_MSG1 "s", 5, T_BASE_ARGS, T_MSG1_ARGS, "junk");
    unsigned char *b = malloc(n + depth + 1);
    memcpy(b, head, n);
    memset(b + n, 0x91, depth);
    b[n + depth] = 0xc0;
    sch_turn t;
    char err[256];
    PT_EQ_INT(sch_turn_decode(b, n + depth + 1, NULL, &t, err, sizeof err), SCH_E_TOO_DEEP);
    /* exactly max_depth levels pass: root(1) + 15 arrays = 16 */
    b[n + 15] = 0xc0;
    PT_EQ_INT(sch_turn_decode(b, n + 16, NULL, &t, err, sizeof err), 0);
    sch_turn_free(&t);
    b[n + 15] = 0x91;
    b[n + 16] = 0xc0;
    PT_EQ_INT(sch_turn_decode(b, n + 17, NULL, &t, err, sizeof err), SCH_E_TOO_DEEP);
    /* a limit above msgpack-c's stack is clamped to 32, not trusted */
    sch_limits lim;
    sch_limits_default(&lim);
    lim.max_depth = 1000;
    memset(b + n, 0x91, 40);
    b[n + 40] = 0xc0;
    PT_EQ_INT(sch_turn_decode(b, n + 41, &lim, &t, err, sizeof err), SCH_E_TOO_DEEP);
    /* ... and the ceiling itself (root + 31 arrays) still decodes */
    b[n + 31] = 0xc0;
    PT_EQ_INT(sch_turn_decode(b, n + 32, &lim, &t, err, sizeof err), 0);
    sch_turn_free(&t);
    free(b);
    free(head);
}

PT_TEST(turn_record_limits) {
    sch_limits lim;
    sch_limits_default(&lim);
    lim.max_total_bytes = 40;
    SCH_EXPECT_ERR(turn, &lim, SCH_E_RECORD_TOO_LARGE, "M5 " T_BASE T_MSG1 "ss", 5, T_BASE_ARGS,
                   T_MSG1_ARGS, "pad", "0123456789");
    sch_limits_default(&lim);
    lim.max_objects = 18; /* the record holds 19 values */
    SCH_EXPECT_ERR(turn, &lim, SCH_E_TOO_MANY_OBJECTS, "M5 " T_BASE T_MSG1 "sA3 uuu", 5,
                   T_BASE_ARGS, T_MSG1_ARGS, "pad", 3, 1, 2, 3);
    lim.max_objects = 19;
    sch_turn t;
    SCH_DECODE_OK(turn, &lim, &t, "M5 " T_BASE T_MSG1 "sA3 uuu", 5, T_BASE_ARGS, T_MSG1_ARGS, "pad",
                  3, 1, 2, 3);
    sch_turn_free(&t);
}

PT_TEST(turn_key_errors) {
    SCH_EXPECT_ERR(turn, NULL, SCH_E_DUPLICATE_KEY, "M5 " T_BASE T_MSG1 "ss", 5, T_BASE_ARGS,
                   T_MSG1_ARGS, "turn_id", "t2");
    SCH_EXPECT_ERR(turn, NULL, SCH_E_DUPLICATE_KEY, "M4 " T_BASE "s A1 M3 ss ss ss", 4, T_BASE_ARGS,
                   "messages", 1, 3, "role", "user", "content", "a", "role", "system");
    SCH_EXPECT_ERR(turn, NULL, SCH_E_DUPLICATE_KEY, "M5 " T_BASE T_MSG1 "s M2 su su", 5,
                   T_BASE_ARGS, T_MSG1_ARGS, "params", 2, "top_k", 1, "top_k", 2);
    /* duplicates among unknown keys count too */
    SCH_EXPECT_ERR(turn, NULL, SCH_E_DUPLICATE_KEY, "M6 " T_BASE T_MSG1 "su su", 6, T_BASE_ARGS,
                   T_MSG1_ARGS, "x", 1, "x", 2);
    SCH_EXPECT_ERR(turn, NULL, SCH_E_BAD_KEY, "M5 " T_BASE T_MSG1 "uu", 5, T_BASE_ARGS, T_MSG1_ARGS,
                   7, 7);
    SCH_EXPECT_ERR(turn, NULL, SCH_E_BAD_KEY, "M5 " T_BASE T_MSG1 "su", 5, T_BASE_ARGS, T_MSG1_ARGS,
                   "", 7);
    char key[66];
    memset(key, 'k', 65);
    key[65] = 0;
    SCH_EXPECT_ERR(turn, NULL, SCH_E_BAD_KEY, "M5 " T_BASE T_MSG1 "su", 5, T_BASE_ARGS, T_MSG1_ARGS,
                   key, 7);
    key[64] = 0; /* 64 bytes is fine */
    sch_turn t;
    SCH_DECODE_OK(turn, NULL, &t, "M5 " T_BASE T_MSG1 "su", 5, T_BASE_ARGS, T_MSG1_ARGS, key, 7);
    sch_turn_free(&t);
    /* a root map of 65 entries */
    size_t n;
    unsigned char *head = mp_build(&n, "r", "\xde\x00\x41", (size_t)3);
    unsigned char *rest;
    size_t m;
    rest = mp_build(&m, T_BASE T_MSG1, T_BASE_ARGS, T_MSG1_ARGS);
    unsigned char *b = malloc(n + m + 61 * 3);
    memcpy(b, head, n);
    memcpy(b + n, rest, m);
    for (int i = 0; i < 61; i++) {
        unsigned char *p = b + n + m + 3 * i;
        p[0] = 0xa1;
        p[1] = (unsigned char)('A' + i);
        p[2] = 0x00;
    }
    char err[256];
    PT_EQ_INT(sch_turn_decode(b, n + m + 61 * 3, NULL, &t, err, sizeof err), SCH_E_TOO_MANY_FIELDS);
    free(b);
    free(rest);
    free(head);
}

PT_TEST(turn_version_and_missing) {
    SCH_EXPECT_ERR(turn, NULL, SCH_E_UNSUPPORTED_VERSION, "M4 su ss ss" T_MSG1, 4, "v", 2,
                   "conversation_id", "c", "turn_id", "t", T_MSG1_ARGS);
    SCH_EXPECT_ERR(turn, NULL, SCH_E_UNSUPPORTED_VERSION, "M4 su ss ss" T_MSG1, 4, "v", 0,
                   "conversation_id", "c", "turn_id", "t", T_MSG1_ARGS);
    SCH_EXPECT_ERR(turn, NULL, SCH_E_UNSUPPORTED_VERSION, "M4 su ss ss" T_MSG1, 4, "v", -1,
                   "conversation_id", "c", "turn_id", "t", T_MSG1_ARGS);
    SCH_EXPECT_ERR(turn, NULL, SCH_E_WRONG_TYPE, "M4 ss ss ss" T_MSG1, 4, "v", "1",
                   "conversation_id", "c", "turn_id", "t", T_MSG1_ARGS);
    SCH_EXPECT_ERR(turn, NULL, SCH_E_MISSING_FIELD, "M3 ss ss" T_MSG1, 3, "conversation_id", "c",
                   "turn_id", "t", T_MSG1_ARGS);
    SCH_EXPECT_ERR(turn, NULL, SCH_E_MISSING_FIELD, "M3 su ss" T_MSG1, 3, "v", 1, "turn_id", "t",
                   T_MSG1_ARGS);
    SCH_EXPECT_ERR(turn, NULL, SCH_E_MISSING_FIELD, "M4 su sn ss" T_MSG1, 4, "v", 1,
                   "conversation_id", "turn_id", "t", T_MSG1_ARGS);
    SCH_EXPECT_ERR(turn, NULL, SCH_E_MISSING_FIELD, "M3 su ss" T_MSG1, 3, "v", 1, "conversation_id",
                   "c", T_MSG1_ARGS);
    SCH_EXPECT_ERR(turn, NULL, SCH_E_MISSING_FIELD, "M4 " T_BASE "s A1 M1 ss", 4, T_BASE_ARGS,
                   "messages", 1, 1, "content", "x");
    SCH_EXPECT_ERR(turn, NULL, SCH_E_MISSING_FIELD, "M4 " T_BASE "s A1 M1 ss", 4, T_BASE_ARGS,
                   "messages", 1, 1, "role", "user");
}

PT_TEST(turn_input_choice) {
    SCH_EXPECT_ERR(turn, NULL, SCH_E_MISSING_INPUT, "M3 " T_BASE, 3, T_BASE_ARGS);
    SCH_EXPECT_ERR(turn, NULL, SCH_E_MISSING_INPUT, "M5 " T_BASE "sn sn", 5, T_BASE_ARGS,
                   "messages", "prompt_tokens");
    SCH_EXPECT_ERR(turn, NULL, SCH_E_BOTH_INPUTS, "M5 " T_BASE T_MSG1 "sA1u", 5, T_BASE_ARGS,
                   T_MSG1_ARGS, "prompt_tokens", 1, 3);
    SCH_EXPECT_ERR(turn, NULL, SCH_E_EMPTY_INPUT, "M4 " T_BASE "sA0", 4, T_BASE_ARGS, "messages",
                   0);
    SCH_EXPECT_ERR(turn, NULL, SCH_E_EMPTY_INPUT, "M4 " T_BASE "sA0", 4, T_BASE_ARGS,
                   "prompt_tokens", 0);
}
