/*
 * test_sch_v12.c -- the fields spec 1.2 added: ChatTurn response_format,
 * logprobs, n, tools, tool_choice, parallel_tool_calls, tool messages and
 * the raw `prompt`; TokenChunk index and logprobs; TurnResult logprobs,
 * tool_calls and choices.  Round trips, the defaults (a turn that uses
 * none of them encodes without them, as under 1.1), the max_constraint_bytes
 * boundary, the encoders' refusals, and the JSON output of the new parts.
 */
#include "sch_test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Does the encoded record contain the str key k (msgpack fixstr)? */
static bool has_key(const sch_buf *b, const char *k) {
    size_t n = strlen(k);
    for (size_t i = 0; i + n < b->len; i++)
        if ((unsigned char)b->data[i] == (0xa0 | n) && !memcmp(b->data + i + 1, k, n)) return true;
    return false;
}

PT_TEST(v12_turn_round_trip) {
    sch_message msgs[3] = {
        {.role = SCH_ROLE_USER, .content = sch_str_c("Weather in Paris?")},
        {.role = SCH_ROLE_ASSISTANT,
         .content = sch_str_c(""),
         .tool_calls = sch_str_c("[{\"id\":\"c1\"}]")},
        {.role = SCH_ROLE_TOOL, .content = sch_str_c("18C"), .tool_call_id = sch_str_c("c1")},
    };
    sch_turn t, d;
    sch_turn_init(&t);
    t.conversation_id = sch_str_c("c");
    t.turn_id = sch_str_c("t");
    t.messages = msgs;
    t.n_messages = 3;
    t.params.response_format.type = SCH_RF_JSON_SCHEMA;
    t.params.response_format.spec = sch_str_c("{\"type\":\"object\"}");
    t.params.has_logprobs = true;
    t.params.top_logprobs = 20;
    t.params.n = 16;
    t.params.tools = sch_str_c("[]x");
    t.params.tool_choice = sch_str_c("\"required\"");
    t.params.parallel_tool_calls = false;
    sch_buf b;
    sch_buf_init(&b);
    char err[256];
    PT_EQ_INT(sch_turn_encode(&t, &b, err, sizeof err), 0);
    PT_EQ_INT(sch_turn_decode(b.data, b.len, NULL, &d, err, sizeof err), 0);
    PT_EQ_INT(d.messages[1].role, SCH_ROLE_ASSISTANT);
    PT_EQ_STR(d.messages[1].tool_calls.ptr, "[{\"id\":\"c1\"}]");
    PT_ASSERT(!d.messages[1].tool_call_id.ptr && !d.messages[0].tool_calls.ptr);
    PT_EQ_INT(d.messages[2].role, SCH_ROLE_TOOL);
    PT_EQ_STR(d.messages[2].tool_call_id.ptr, "c1");
    PT_EQ_INT(d.params.response_format.type, SCH_RF_JSON_SCHEMA);
    PT_EQ_STR(d.params.response_format.spec.ptr, "{\"type\":\"object\"}");
    PT_ASSERT(d.params.has_logprobs && d.params.top_logprobs == 20);
    PT_EQ_INT(d.params.n, 16);
    PT_EQ_STR(d.params.tools.ptr, "[]x");
    PT_EQ_STR(d.params.tool_choice.ptr, "\"required\"");
    PT_ASSERT(!d.params.parallel_tool_calls);
    sch_turn_free(&d);
    /* a raw prompt */
    sch_turn_init(&t);
    t.conversation_id = sch_str_c("c");
    t.turn_id = sch_str_c("t");
    t.prompt = sch_str_c("Once upon");
    t.params.has_logprobs = true; /* logprobs 0: the chosen token only */
    PT_EQ_INT(sch_turn_encode(&t, &b, err, sizeof err), 0);
    PT_EQ_INT(sch_turn_decode(b.data, b.len, NULL, &d, err, sizeof err), 0);
    PT_EQ_STR(d.prompt.ptr, "Once upon");
    PT_ASSERT(!d.messages && !d.prompt_tokens);
    PT_ASSERT(d.params.has_logprobs && d.params.top_logprobs == 0);
    PT_EQ_INT(d.params.n, 1);
    PT_ASSERT(d.params.parallel_tool_calls);
    sch_turn_free(&d);
    sch_buf_free(&b);
}

PT_TEST(v12_defaults_not_written) {
    sch_message m = {.role = SCH_ROLE_USER, .content = sch_str_c("hi")};
    sch_turn t;
    sch_turn_init(&t);
    t.conversation_id = sch_str_c("c");
    t.turn_id = sch_str_c("t");
    t.messages = &m;
    t.n_messages = 1;
    sch_buf b;
    sch_buf_init(&b);
    char err[256];
    PT_EQ_INT(sch_turn_encode(&t, &b, err, sizeof err), 0);
    static const char *const keys[] = {"response_format", "logprobs",    "n",
                                       "tools",           "tool_choice", "parallel_tool_calls",
                                       "prompt",          "tool_call_id"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        PT_ASSERT_MSG(!has_key(&b, keys[i]), "%s written at its default", keys[i]);
    sch_buf_free(&b);
    /* an absent params map gives the 1.2 defaults */
    sch_turn d;
    SCH_DECODE_OK(turn, NULL, &d, "M4 su ss ss s A1 M2 ss ss", 4, "v", 1, "conversation_id", "c",
                  "turn_id", "t", "messages", 1, 2, "role", "user", "content", "x");
    PT_ASSERT(d.params.n == 1 && d.params.parallel_tool_calls && !d.params.has_logprobs);
    PT_ASSERT(d.params.response_format.type == SCH_RF_TEXT && !d.params.tools.ptr);
    sch_turn_free(&d);
}

PT_TEST(v12_constraint_limit) {
    sch_limits lim;
    sch_limits_default(&lim);
    PT_EQ_INT(lim.max_constraint_bytes, 65536);
    lim.max_constraint_bytes = 4;
    sch_turn d;
    /* at the limit: passes; one over: E_STRING_TOO_LONG, for each field */
    SCH_DECODE_OK(turn, &lim, &d, "M5 su ss ss s A1 M2 ss ss s M1 s M2 ss ss", 5, "v", 1,
                  "conversation_id", "c", "turn_id", "t", "messages", 1, 2, "role", "user",
                  "content", "x", "params", 1, "response_format", 2, "type", "regex", "pattern",
                  "abcd");
    sch_turn_free(&d);
    SCH_EXPECT_ERR(turn, &lim, SCH_E_STRING_TOO_LONG, "M5 su ss ss s A1 M2 ss ss s M1 s M2 ss ss",
                   5, "v", 1, "conversation_id", "c", "turn_id", "t", "messages", 1, 2, "role",
                   "user", "content", "x", "params", 1, "response_format", 2, "type", "grammar",
                   "grammar", "abcde");
    SCH_EXPECT_ERR(turn, &lim, SCH_E_STRING_TOO_LONG, "M5 su ss ss s A1 M2 ss ss s M1 ss", 5, "v",
                   1, "conversation_id", "c", "turn_id", "t", "messages", 1, 2, "role", "user",
                   "content", "x", "params", 1, "tools", "[1,2]");
    SCH_EXPECT_ERR(turn, &lim, SCH_E_STRING_TOO_LONG, "M5 su ss ss s A1 M2 ss ss s M1 ss", 5, "v",
                   1, "conversation_id", "c", "turn_id", "t", "messages", 1, 2, "role", "user",
                   "content", "x", "params", 1, "tool_choice", "\"auto\"");
    SCH_EXPECT_ERR(turn, &lim, SCH_E_STRING_TOO_LONG, "M4 su ss ss s A1 M3 ss ss ss", 4, "v", 1,
                   "conversation_id", "c", "turn_id", "t", "messages", 1, 3, "role", "assistant",
                   "content", "", "tool_calls", "[{},{}]");
}

PT_TEST(v12_turn_encode_refusals) {
    sch_message m = {.role = SCH_ROLE_USER, .content = sch_str_c("hi")};
    sch_turn t;
    sch_buf b;
    char err[256];
    sch_buf_init(&b);
#define V12_REFUSE(code, setup)                                      \
    do {                                                             \
        sch_turn_init(&t);                                           \
        t.conversation_id = sch_str_c("c");                          \
        t.turn_id = sch_str_c("t");                                  \
        t.messages = &m;                                             \
        t.n_messages = 1;                                            \
        setup;                                                       \
        PT_EQ_INT(sch_turn_encode(&t, &b, err, sizeof err), (code)); \
        PT_EQ_INT(b.len, 0);                                         \
    } while (0)
    V12_REFUSE(SCH_E_BAD_VALUE, t.params.response_format.type = (sch_rf)9);
    V12_REFUSE(SCH_E_MISSING_FIELD, t.params.response_format.type = SCH_RF_REGEX);
    V12_REFUSE(SCH_E_OUT_OF_RANGE, (t.params.has_logprobs = true, t.params.top_logprobs = 21));
    V12_REFUSE(SCH_E_OUT_OF_RANGE, t.params.n = 0);
    V12_REFUSE(SCH_E_OUT_OF_RANGE, t.params.n = 17);
    V12_REFUSE(SCH_E_BAD_VALUE, t.params.tools = sch_str_c(""));
    V12_REFUSE(SCH_E_BAD_UTF8, t.params.tool_choice = sch_str_c("\xff"));
    V12_REFUSE(SCH_E_BOTH_INPUTS, t.prompt = sch_str_c("x"));
    V12_REFUSE(SCH_E_EMPTY_INPUT, (t.messages = NULL, t.n_messages = 0, t.prompt = sch_str_c("")));
    V12_REFUSE(SCH_E_BAD_VALUE, (m.role = SCH_ROLE_TOOL, m.tool_call_id = sch_str_c("a\nb")));
#undef V12_REFUSE
    sch_buf_free(&b);
}

/* Two positions of logprobs, the first with two alternatives. */
static sch_logprob tv_top[2] = {
    {.id = 5, .token = {"a", 1}, .logprob = -0.1},
    {.id = 6, .token = {"\xef\xbf\xbd", 3}, .bytes = {"\xe2\x82", 2}, .logprob = -2.5}};
static sch_logprob tv_lp[2] = {
    {.id = 5, .token = {"a", 1}, .logprob = -0.1, .top = tv_top, .n_top = 2},
    {.id = 7, .token = {"", 0}, .logprob = 0.0},
};

PT_TEST(v12_chunk_and_result_round_trip) {
    uint32_t toks[2] = {5, 7};
    sch_chunk c, cd;
    sch_chunk_init(&c);
    c.conversation_id = sch_str_c("c");
    c.turn_id = sch_str_c("t");
    c.text = sch_str_c("a");
    c.tokens = toks;
    c.n_tokens = 2;
    c.index = 3;
    c.logprobs = tv_lp;
    c.n_logprobs = 2;
    sch_buf b;
    sch_buf_init(&b);
    char err[256];
    PT_EQ_INT(sch_chunk_encode(&c, &b, err, sizeof err), 0);
    PT_EQ_INT(sch_chunk_decode(b.data, b.len, NULL, &cd, err, sizeof err), 0);
    PT_EQ_INT(cd.index, 3);
    PT_EQ_INT(cd.n_logprobs, 2);
    PT_EQ_INT(cd.logprobs[0].n_top, 2);
    PT_EQ_INT(cd.logprobs[0].top[1].id, 6);
    PT_ASSERT(cd.logprobs[0].top[1].bytes.len == 2 &&
              !memcmp(cd.logprobs[0].top[1].bytes.ptr, "\xe2\x82", 2));
    PT_ASSERT(cd.logprobs[0].logprob == -0.1 && cd.logprobs[1].logprob == 0.0);
    PT_ASSERT(!cd.logprobs[0].bytes.ptr && !cd.logprobs[1].top);
    sch_chunk_free(&cd);

    sch_tool_call calls[1] = {{sch_str_c("call_1"), sch_str_c("f"), sch_str_c("{\"x\":1}")}};
    sch_choice ch[2] = {
        {.index = 1,
         .text = sch_str_c("b"),
         .tokens = toks,
         .n_tokens = 2,
         .finish_reason = SCH_FINISH_LENGTH,
         .logprobs = tv_lp,
         .n_logprobs = 2},
        {.index = 2,
         .text = sch_str_c(""),
         .finish_reason = SCH_FINISH_STOP,
         .tool_calls = calls,
         .n_tool_calls = 1},
    };
    sch_result r, rd;
    sch_result_init(&r);
    r.conversation_id = sch_str_c("c");
    r.turn_id = sch_str_c("t");
    r.text = sch_str_c("");
    r.worker = sch_str_c("w");
    r.tokens = toks;
    r.n_tokens = 2;
    r.logprobs = tv_lp;
    r.n_logprobs = 2;
    r.tool_calls = calls;
    r.n_tool_calls = 1;
    r.choices = ch;
    r.n_choices = 2;
    PT_EQ_INT(sch_result_encode(&r, &b, err, sizeof err), 0);
    PT_EQ_INT(sch_result_decode(b.data, b.len, NULL, &rd, err, sizeof err), 0);
    PT_EQ_INT(rd.n_logprobs, 2);
    PT_EQ_INT(rd.n_tool_calls, 1);
    PT_EQ_STR(rd.tool_calls[0].arguments.ptr, "{\"x\":1}");
    PT_EQ_INT(rd.n_choices, 2);
    PT_EQ_INT(rd.choices[0].finish_reason, SCH_FINISH_LENGTH);
    PT_EQ_INT(rd.choices[0].n_logprobs, 2);
    PT_EQ_INT(rd.choices[1].n_tool_calls, 1);
    PT_EQ_STR(rd.choices[1].tool_calls[0].name.ptr, "f");
    sch_result_free(&rd);
    /* the JSON output carries them too (no bin, finite numbers) */
    PT_EQ_INT(sch_result_encode_json(&r, &b, err, sizeof err), 0);
    PT_ASSERT(memmem(b.data, b.len, "\"bytes\":[226,130]", 17) != NULL);
    PT_ASSERT(memmem(b.data, b.len, "\"choices\":[{\"index\":1", 21) != NULL);
    PT_EQ_INT(sch_chunk_encode_json(&c, &b, err, sizeof err), 0);
    sch_buf_free(&b);
}

PT_TEST(v12_reply_encode_refusals) {
    uint32_t toks[2] = {5, 7};
    sch_logprob bad[2];
    sch_chunk c;
    sch_buf b;
    char err[256];
    sch_buf_init(&b);
    sch_chunk_init(&c);
    c.conversation_id = sch_str_c("c");
    c.turn_id = sch_str_c("t");
    c.text = sch_str_c("");
    c.tokens = toks;
    c.n_tokens = 2;
    c.logprobs = tv_lp;
    c.n_logprobs = 1; /* not one per token */
    PT_EQ_INT(sch_chunk_encode(&c, &b, err, sizeof err), SCH_E_BAD_VALUE);
    memcpy(bad, tv_lp, sizeof bad);
    c.logprobs = bad;
    c.n_logprobs = 2;
    bad[1].logprob = 0.5;
    PT_EQ_INT(sch_chunk_encode(&c, &b, err, sizeof err), SCH_E_OUT_OF_RANGE);
    bad[1].logprob = NAN;
    PT_EQ_INT(sch_chunk_encode(&c, &b, err, sizeof err), SCH_E_OUT_OF_RANGE);
    bad[1].logprob = -INFINITY;
    PT_EQ_INT(sch_chunk_encode(&c, &b, err, sizeof err), SCH_E_OUT_OF_RANGE);
    bad[1].logprob = -1;
    bad[1].token = (sch_str){"\xc3", 1};
    PT_EQ_INT(sch_chunk_encode(&c, &b, err, sizeof err), SCH_E_BAD_UTF8);
    bad[1].token = sch_str_c("x");
    c.index = SCH_MAX_N;
    PT_EQ_INT(sch_chunk_encode(&c, &b, err, sizeof err), SCH_E_OUT_OF_RANGE);

    sch_result r;
    sch_result_init(&r);
    r.conversation_id = sch_str_c("c");
    r.turn_id = sch_str_c("t");
    r.text = sch_str_c("");
    r.worker = sch_str_c("w");
    sch_choice ch = {.index = 2, .text = sch_str_c("")};
    r.choices = &ch;
    r.n_choices = 1;
    PT_EQ_INT(sch_result_encode(&r, &b, err, sizeof err), SCH_E_BAD_VALUE);
    ch.index = 1;
    PT_EQ_INT(sch_result_encode(&r, &b, err, sizeof err), 0);
    sch_tool_call call = {sch_str_c("c"), sch_str_c(""), sch_str_c("{}")};
    r.tool_calls = &call;
    r.n_tool_calls = 1;
    PT_EQ_INT(sch_result_encode(&r, &b, err, sizeof err), SCH_E_BAD_VALUE);
    sch_buf_free(&b);
}

/* The choice helpers: choice 0 is the result's own fields, the others
 * its choices array; sch_result_fail leaves an error result with no
 * choices, logprobs or tool calls. */
PT_TEST(v12_result_choice_helpers) {
    static const uint32_t toks[2] = {7, 8};
    sch_tool_call call = {sch_str_c("c1"), sch_str_c("f"), sch_str_c("{}")};
    sch_result r;
    sch_choice more[SCH_MAX_N - 1], got;
    sch_result_init(&r);
    for (uint32_t k = 0; k < 3; k++) {
        sch_choice c = {.index = k,
                        .text = sch_str_c(k ? "other" : "first"),
                        .tokens = toks,
                        .n_tokens = 2,
                        .finish_reason = SCH_FINISH_LENGTH,
                        .tool_calls = &call,
                        .n_tool_calls = k == 2 ? 1u : 0u};
        sch_result_set_choice(&r, more, &c);
    }
    PT_EQ_INT(r.n_choices, 2);
    PT_ASSERT(r.choices == more);
    PT_EQ_STR(r.text.ptr, "first");
    PT_EQ_INT(r.n_tokens, 2);
    PT_EQ_INT(r.finish_reason, SCH_FINISH_LENGTH);
    sch_result_choice(&r, 2, &got);
    PT_EQ_INT(got.index, 2);
    PT_EQ_STR(got.text.ptr, "other");
    PT_EQ_INT(got.n_tool_calls, 1);
    sch_result_choice(&r, 0, &got);
    PT_EQ_INT(got.index, 0);
    PT_ASSERT(got.tokens == toks);
    sch_result_choice(&r, 3, &got); /* past the last: zeroed */
    PT_EQ_INT(got.index, 3);
    PT_ASSERT(!got.text.ptr && !got.n_tokens);
    r.tool_calls = &call;
    r.n_tool_calls = 1;
    sch_result_fail(&r, SCH_E_EXPIRED, sch_str_c("late"));
    PT_ASSERT(r.has_error);
    PT_EQ_INT(r.finish_reason, SCH_FINISH_EXPIRED);
    PT_ASSERT(!r.n_choices && !r.n_tool_calls && !r.n_logprobs);
    sch_result_fail(&r, SCH_E_INTERNAL, sch_str_c("bug"));
    PT_EQ_INT(r.finish_reason, SCH_FINISH_ERROR);
}
