/*
 * test_sch_turn_fields.c -- ChatTurn field rules: types, numeric ranges,
 * UTF-8 and id rules, roles, every sch_limits boundary (at the limit
 * passes, one over fails with the limit's own code), and the encoder's
 * refusals.
 */
#include "sch_test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A turn with one user message of the given bytes. */
#define MSG_WITH(content, len)                                                                 \
    "M4 " T_BASE "s A1 M2 ss sS", 4, T_BASE_ARGS, "messages", 1, 2, "role", "user", "content", \
        (content), (size_t)(len)

PT_TEST(turn_wrong_types) {
    SCH_EXPECT_ERR(turn, NULL, SCH_E_WRONG_TYPE, "M4 su su ss" T_MSG1, 4, "v", 1, "conversation_id",
                   5, "turn_id", "t", T_MSG1_ARGS);
    SCH_EXPECT_ERR(turn, NULL, SCH_E_WRONG_TYPE, "M4 su sB ss" T_MSG1, 4, "v", 1, "conversation_id",
                   "c", (size_t)1, "turn_id", "t", T_MSG1_ARGS);
    SCH_EXPECT_ERR(turn, NULL, SCH_E_WRONG_TYPE, "M4 " T_BASE "s M0", 4, T_BASE_ARGS, "messages",
                   0);
    SCH_EXPECT_ERR(turn, NULL, SCH_E_WRONG_TYPE, "M4 " T_BASE "s A1 s", 4, T_BASE_ARGS, "messages",
                   1, "hello");
    SCH_EXPECT_ERR(turn, NULL, SCH_E_WRONG_TYPE, "M4 " T_BASE "s A1 M2 su ss", 4, T_BASE_ARGS,
                   "messages", 1, 2, "role", 1, "content", "x");
    SCH_EXPECT_ERR(turn, NULL, SCH_E_WRONG_TYPE, "M4 " T_BASE "s A1 M2 ss sB", 4, T_BASE_ARGS,
                   "messages", 1, 2, "role", "user", "content", "x", (size_t)1);
    SCH_EXPECT_ERR(turn, NULL, SCH_E_WRONG_TYPE, "M4 " T_BASE "s s", 4, T_BASE_ARGS,
                   "prompt_tokens", "1 2 3");
    SCH_EXPECT_ERR(turn, NULL, SCH_E_WRONG_TYPE, "M4 " T_BASE "s A2 u d", 4, T_BASE_ARGS,
                   "prompt_tokens", 2, 1, 2.0);
    SCH_EXPECT_ERR(turn, NULL, SCH_E_WRONG_TYPE, "M5 " T_BASE T_MSG1 "s A0", 5, T_BASE_ARGS,
                   T_MSG1_ARGS, "params", 0);
    SCH_EXPECT_ERR(turn, NULL, SCH_E_WRONG_TYPE, "M5 " T_BASE T_MSG1 "s M1 sd", 5, T_BASE_ARGS,
                   T_MSG1_ARGS, "params", 1, "max_tokens", 16.0);
    SCH_EXPECT_ERR(turn, NULL, SCH_E_WRONG_TYPE, "M5 " T_BASE T_MSG1 "s M1 ss", 5, T_BASE_ARGS,
                   T_MSG1_ARGS, "params", 1, "temperature", "0.5");
    SCH_EXPECT_ERR(turn, NULL, SCH_E_WRONG_TYPE, "M5 " T_BASE T_MSG1 "s M1 su", 5, T_BASE_ARGS,
                   T_MSG1_ARGS, "params", 1, "stop", 3);
    SCH_EXPECT_ERR(turn, NULL, SCH_E_WRONG_TYPE, "M5 " T_BASE T_MSG1 "s M1 s A1 u", 5, T_BASE_ARGS,
                   T_MSG1_ARGS, "params", 1, "stop", 1, 3);
    SCH_EXPECT_ERR(turn, NULL, SCH_E_WRONG_TYPE, "M5 " T_BASE T_MSG1 "su", 5, T_BASE_ARGS,
                   T_MSG1_ARGS, "stream", 1);
    SCH_EXPECT_ERR(turn, NULL, SCH_E_WRONG_TYPE, "M5 " T_BASE T_MSG1 "sd", 5, T_BASE_ARGS,
                   T_MSG1_ARGS, "deadline_ms", 1.0);
    SCH_EXPECT_ERR(turn, NULL, SCH_E_WRONG_TYPE, "M5 " T_BASE T_MSG1 "su", 5, T_BASE_ARGS,
                   T_MSG1_ARGS, "model", 1);
}

PT_TEST(turn_ranges) {
    static const struct {
        const char *key;
        int kind; /* 0 int, 1 double, 2 uint64 */
        double d;
        int64_t i;
        int ok;
    } cases[] = {
        {"max_tokens", 0, 0, 0, 0},
        {"max_tokens", 0, 0, -5, 0},
        {"max_tokens", 0, 0, 1, 1},
        {"temperature", 1, -0.001, 0, 0},
        {"temperature", 1, 0, 0, 1},
        {"temperature", 1, 100, 0, 1},
        {"temperature", 1, 100.5, 0, 0},
        {"temperature", 1, NAN, 0, 0},
        {"temperature", 1, INFINITY, 0, 0},
        {"temperature", 0, 0, -1, 0},
        {"top_p", 1, 0, 0, 0},
        {"top_p", 1, 1e-9, 0, 1},
        {"top_p", 1, 1, 0, 1},
        {"top_p", 1, 1.0000001, 0, 0},
        {"top_p", 0, 0, 1, 1},
        {"top_k", 0, 0, -1, 0},
        {"top_k", 0, 0, 0, 1},
        {"top_k", 0, 0, INT32_MAX, 1},
        {"top_k", 0, 0, (int64_t)INT32_MAX + 1, 0},
        {"repetition_penalty", 1, 0, 0, 0},
        {"repetition_penalty", 1, -1, 0, 0},
        {"repetition_penalty", 1, 0.5, 0, 1},
        {"repetition_penalty", 1, 100.01, 0, 0},
        {"seed", 0, 0, -1, 0},
        {"seed", 0, 0, 0, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t n;
        unsigned char *b = cases[i].kind == 1
                               ? mp_build(&n, "M5 " T_BASE T_MSG1 "s M1 sd", 5, T_BASE_ARGS,
                                          T_MSG1_ARGS, "params", 1, cases[i].key, cases[i].d)
                               : mp_build(&n, "M5 " T_BASE T_MSG1 "s M1 si", 5, T_BASE_ARGS,
                                          T_MSG1_ARGS, "params", 1, cases[i].key, cases[i].i);
        sch_turn t;
        char err[256] = "";
        int rc = sch_turn_decode(b, n, NULL, &t, err, sizeof err);
        free(b);
        if (rc == 0) sch_turn_free(&t);
        PT_ASSERT_MSG(cases[i].ok ? rc == 0 : rc == SCH_E_OUT_OF_RANGE,
                      "case %zu (%s): got %s (%s)", i, cases[i].key, sch_err_name(rc), err);
    }
    SCH_EXPECT_ERR(turn, NULL, SCH_E_OUT_OF_RANGE, "M4 " T_BASE "s A1 U", 4, T_BASE_ARGS,
                   "prompt_tokens", 1, (uint64_t)1 << 31);
    SCH_EXPECT_ERR(turn, NULL, SCH_E_OUT_OF_RANGE, "M4 " T_BASE "s A1 i", 4, T_BASE_ARGS,
                   "prompt_tokens", 1, (int64_t)-1);
}

PT_TEST(turn_utf8_and_ids) {
    static const char *const bad[] = {
        "\xc0\xaf",         /* overlong '/' */
        "\xe0\x80\xaf",     /* overlong, 3 bytes */
        "\xf0\x80\x80\xaf", /* overlong, 4 bytes */
        "\xed\xa0\x80",     /* U+D800 surrogate */
        "\xed\xbf\xbf",     /* U+DFFF surrogate */
        "\xf4\x90\x80\x80", /* U+110000 */
        "\xf5\x80\x80\x80", /* lead byte F5 */
        "\xff",             /* never valid */
        "\x80",             /* stray continuation */
        "ab\xe2\x82",       /* truncated at the end */
        "\xe2\x28\xa1",     /* bad continuation */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        SCH_EXPECT_ERR(turn, NULL, SCH_E_BAD_UTF8, MSG_WITH(bad[i], strlen(bad[i])));
        SCH_EXPECT_ERR(turn, NULL, SCH_E_BAD_UTF8, "M4 su sS ss" T_MSG1, 4, "v", 1,
                       "conversation_id", bad[i], strlen(bad[i]), "turn_id", "t", T_MSG1_ARGS);
    }
    sch_turn t;
    SCH_DECODE_OK(turn, NULL, &t, MSG_WITH("\xf4\x8f\xbf\xbf \xef\xbf\xbf \xed\x9f\xbf", 12));
    PT_EQ_INT(t.messages[0].content.len, 12);
    sch_turn_free(&t);
    /* empty content is fine, empty ids are not */
    SCH_DECODE_OK(turn, NULL, &t, MSG_WITH("", 0));
    PT_EQ_INT(t.messages[0].content.len, 0);
    PT_EQ_STR(t.messages[0].content.ptr, "");
    sch_turn_free(&t);
    SCH_EXPECT_ERR(turn, NULL, SCH_E_BAD_VALUE, "M4 su ss ss" T_MSG1, 4, "v", 1, "conversation_id",
                   "", "turn_id", "t", T_MSG1_ARGS);
    SCH_EXPECT_ERR(turn, NULL, SCH_E_BAD_VALUE, "M4 su ss ss" T_MSG1, 4, "v", 1, "conversation_id",
                   "c", "turn_id", "a\tb", T_MSG1_ARGS);
    SCH_EXPECT_ERR(turn, NULL, SCH_E_BAD_VALUE, "M4 su sS ss" T_MSG1, 4, "v", 1, "conversation_id",
                   "a\0b", (size_t)3, "turn_id", "t", T_MSG1_ARGS);
    SCH_EXPECT_ERR(turn, NULL, SCH_E_BAD_VALUE, "M5 " T_BASE T_MSG1 "ss", 5, T_BASE_ARGS,
                   T_MSG1_ARGS, "namespace", "a:b");
    SCH_EXPECT_ERR(turn, NULL, SCH_E_BAD_VALUE, "M5 " T_BASE T_MSG1 "ss", 5, T_BASE_ARGS,
                   T_MSG1_ARGS, "namespace", "");
    SCH_EXPECT_ERR(turn, NULL, SCH_E_BAD_VALUE, "M5 " T_BASE T_MSG1 "ss", 5, T_BASE_ARGS,
                   T_MSG1_ARGS, "namespace", "t\xc3\xa9");
    SCH_EXPECT_ERR(turn, NULL, SCH_E_BAD_VALUE, "M5 " T_BASE T_MSG1 "s M1 s A2 ss", 5, T_BASE_ARGS,
                   T_MSG1_ARGS, "params", 1, "stop", 2, "x", "");
    /* messages name the failing element */
    size_t n;
    unsigned char *b =
        mp_build(&n, "M4 " T_BASE "s A2 M2 ss ss M2 ss ss", 4, T_BASE_ARGS, "messages", 2, 2,
                 "role", "user", "content", "ok", 2, "role", "bot", "content", "x");
    char err[256];
    PT_EQ_INT(sch_turn_decode(b, n, NULL, &t, err, sizeof err), SCH_E_BAD_ROLE);
    PT_ASSERT_MSG(strstr(err, "messages[1].role") && strstr(err, "\"bot\""), "message: %s", err);
    free(b);
    SCH_EXPECT_ERR(turn, NULL, SCH_E_BAD_ROLE, "M4 " T_BASE "s A1 M2 ss ss", 4, T_BASE_ARGS,
                   "messages", 1, 2, "role", "User", "content", "x");
    SCH_EXPECT_ERR(turn, NULL, SCH_E_BAD_ROLE, "M4 " T_BASE "s A1 M2 ss ss", 4, T_BASE_ARGS,
                   "messages", 1, 2, "role", "", "content", "x");
}

/* Decode a turn of `count` messages of `each` bytes under lim. */
static int sch_many(size_t count, size_t each, const sch_limits *lim) {
    size_t n;
    unsigned char *head = mp_build(&n, "M4 " T_BASE "s", 4, T_BASE_ARGS, "messages");
    unsigned char *one;
    size_t m;
    char *content = malloc(each + 1);
    memset(content, 'a', each);
    one = mp_build(&m, "M2 ss sS", 2, "role", "user", "content", content, each);
    unsigned char arr[5] = {0xdd, (unsigned char)(count >> 24), (unsigned char)(count >> 16),
                            (unsigned char)(count >> 8), (unsigned char)count};
    unsigned char *b = malloc(n + 5 + count * m);
    memcpy(b, head, n);
    memcpy(b + n, arr, 5);
    for (size_t i = 0; i < count; i++) memcpy(b + n + 5 + i * m, one, m);
    sch_turn t;
    char err[256];
    int rc = sch_turn_decode(b, n + 5 + count * m, lim, &t, err, sizeof err);
    if (rc == 0) {
        if (t.n_messages != count) rc = 99;
        sch_turn_free(&t);
    }
    free(b);
    free(one);
    free(content);
    free(head);
    return rc;
}

PT_TEST(turn_limits_default) {
    sch_limits lim;
    sch_limits_default(&lim);
    PT_EQ_INT(sch_many(lim.max_messages, 1, NULL), 0);
    PT_EQ_INT(sch_many(lim.max_messages + 1, 1, NULL), SCH_E_TOO_MANY_MESSAGES);
    PT_EQ_INT(sch_many(1, lim.max_content_bytes, NULL), 0);
    PT_EQ_INT(sch_many(1, lim.max_content_bytes + 1, NULL), SCH_E_CONTENT_TOO_LONG);
    /* more than max_total_bytes in all, each message within its limit */
    PT_EQ_INT(sch_many(17, lim.max_content_bytes, NULL), SCH_E_RECORD_TOO_LARGE);
}

PT_TEST(turn_limits_configured) {
    sch_limits lim;
    sch_limits_default(&lim);
    lim.max_messages = 3;
    lim.max_content_bytes = 10;
    PT_EQ_INT(sch_many(3, 10, &lim), 0);
    PT_EQ_INT(sch_many(4, 10, &lim), SCH_E_TOO_MANY_MESSAGES);
    PT_EQ_INT(sch_many(3, 11, &lim), SCH_E_CONTENT_TOO_LONG);

    sch_limits_default(&lim);
    lim.max_stop = 2;
    lim.max_stop_bytes = 3;
    sch_turn t;
    SCH_DECODE_OK(turn, &lim, &t, "M5 " T_BASE T_MSG1 "s M1 s A2 ss", 5, T_BASE_ARGS, T_MSG1_ARGS,
                  "params", 1, "stop", 2, "abc", "d");
    sch_turn_free(&t);
    SCH_EXPECT_ERR(turn, &lim, SCH_E_TOO_MANY_STOP_STRINGS, "M5 " T_BASE T_MSG1 "s M1 s A3 sss", 5,
                   T_BASE_ARGS, T_MSG1_ARGS, "params", 1, "stop", 3, "a", "b", "c");
    SCH_EXPECT_ERR(turn, &lim, SCH_E_STOP_STRING_TOO_LONG, "M5 " T_BASE T_MSG1 "s M1 s A1 s", 5,
                   T_BASE_ARGS, T_MSG1_ARGS, "params", 1, "stop", 1, "abcd");
    SCH_EXPECT_ERR(turn, &lim, SCH_E_STOP_STRING_TOO_LONG, "M5 " T_BASE T_MSG1 "s M1 ss", 5,
                   T_BASE_ARGS, T_MSG1_ARGS, "params", 1, "stop", "abcd");
    lim.max_stop = 0;
    SCH_EXPECT_ERR(turn, &lim, SCH_E_TOO_MANY_STOP_STRINGS, "M5 " T_BASE T_MSG1 "s M1 ss", 5,
                   T_BASE_ARGS, T_MSG1_ARGS, "params", 1, "stop", "a");

    sch_limits_default(&lim);
    lim.max_tokens = 100;
    SCH_DECODE_OK(turn, &lim, &t, "M5 " T_BASE T_MSG1 "s M1 su", 5, T_BASE_ARGS, T_MSG1_ARGS,
                  "params", 1, "max_tokens", 100);
    sch_turn_free(&t);
    SCH_EXPECT_ERR(turn, &lim, SCH_E_MAX_TOKENS_TOO_LARGE, "M5 " T_BASE T_MSG1 "s M1 su", 5,
                   T_BASE_ARGS, T_MSG1_ARGS, "params", 1, "max_tokens", 101);
    /* the default max_tokens is clamped to a lower limit */
    SCH_DECODE_OK(turn, &lim, &t, "M4 " T_BASE T_MSG1, 4, T_BASE_ARGS, T_MSG1_ARGS);
    PT_EQ_INT(t.params.max_tokens, 100);
    sch_turn_free(&t);
    SCH_EXPECT_ERR(turn, NULL, SCH_E_MAX_TOKENS_TOO_LARGE, "M5 " T_BASE T_MSG1 "s M1 su", 5,
                   T_BASE_ARGS, T_MSG1_ARGS, "params", 1, "max_tokens", 32769);

    sch_limits_default(&lim);
    lim.max_prompt_tokens = 2;
    SCH_DECODE_OK(turn, &lim, &t, "M4 " T_BASE "s A2 uu", 4, T_BASE_ARGS, "prompt_tokens", 2, 1, 2);
    sch_turn_free(&t);
    SCH_EXPECT_ERR(turn, &lim, SCH_E_TOO_MANY_PROMPT_TOKENS, "M4 " T_BASE "s A3 uuu", 4,
                   T_BASE_ARGS, "prompt_tokens", 3, 1, 2, 3);

    sch_limits_default(&lim);
    lim.max_id_bytes = 4;
    SCH_DECODE_OK(turn, &lim, &t, "M4 su ss ss" T_MSG1, 4, "v", 1, "conversation_id", "abcd",
                  "turn_id", "t", T_MSG1_ARGS);
    sch_turn_free(&t);
    SCH_EXPECT_ERR(turn, &lim, SCH_E_STRING_TOO_LONG, "M4 su ss ss" T_MSG1, 4, "v", 1,
                   "conversation_id", "abcde", "turn_id", "t", T_MSG1_ARGS);
    SCH_EXPECT_ERR(turn, &lim, SCH_E_STRING_TOO_LONG, "M5 " T_BASE T_MSG1 "ss", 5, T_BASE_ARGS,
                   T_MSG1_ARGS, "model", "abcde");
}

PT_TEST(turn_encode_refusals) {
    sch_message m = {.role = SCH_ROLE_USER, .content = sch_str_c("hi")};
    uint32_t tok = 1;
    sch_turn t;
    sch_buf b;
    char err[256];
    sch_buf_init(&b);
#define ENC_FAIL(code)                                                                             \
    do {                                                                                           \
        int rc_ = sch_turn_encode(&t, &b, err, sizeof err);                                        \
        PT_ASSERT_MSG(rc_ == (code), "expected %s got %s", sch_err_name(code), sch_err_name(rc_)); \
        PT_EQ_INT(b.len, 0);                                                                       \
    } while (0)
#define RESET()                             \
    do {                                    \
        sch_turn_init(&t);                  \
        t.conversation_id = sch_str_c("c"); \
        t.turn_id = sch_str_c("t");         \
        t.messages = &m;                    \
        t.n_messages = 1;                   \
    } while (0)
    RESET();
    PT_EQ_INT(sch_turn_encode(&t, &b, err, sizeof err), 0);
    PT_ASSERT(b.len > 0);
    t.conversation_id.ptr = NULL;
    ENC_FAIL(SCH_E_MISSING_FIELD);
    RESET();
    t.turn_id = sch_str_c("");
    ENC_FAIL(SCH_E_BAD_VALUE);
    RESET();
    t.prompt_tokens = &tok;
    t.n_prompt_tokens = 1;
    ENC_FAIL(SCH_E_BOTH_INPUTS);
    RESET();
    t.n_messages = 0;
    ENC_FAIL(SCH_E_MISSING_INPUT);
    RESET();
    m.role = (sch_role)7;
    ENC_FAIL(SCH_E_BAD_ROLE);
    m.role = SCH_ROLE_USER;
    m.content = sch_str_c("\xed\xa0\x80");
    ENC_FAIL(SCH_E_BAD_UTF8);
    m.content = sch_str_c("hi");
    RESET();
    t.params.top_p = 0;
    ENC_FAIL(SCH_E_OUT_OF_RANGE);
    RESET();
    t.params.temperature = NAN;
    ENC_FAIL(SCH_E_OUT_OF_RANGE);
    RESET();
    t.params.max_tokens = 0;
    ENC_FAIL(SCH_E_OUT_OF_RANGE);
    RESET();
    t.ns = sch_str_c("has space");
    ENC_FAIL(SCH_E_BAD_VALUE);
    RESET();
    tok = 0x80000000u;
    t.messages = NULL;
    t.n_messages = 0;
    t.prompt_tokens = &tok;
    t.n_prompt_tokens = 1;
    ENC_FAIL(SCH_E_OUT_OF_RANGE);
    PT_EQ_INT(sch_turn_encode(NULL, &b, err, sizeof err), SCH_E_INVALID_ARGUMENT);
    sch_buf_free(&b);
#undef ENC_FAIL
#undef RESET
}
