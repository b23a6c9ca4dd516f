/*
 * test_oa_response.c -- the OpenAI response shapes the gateway and the
 * batch runner write from a TurnResult: every choice of an n > 1 result,
 * chat logprobs ({token, logprob, bytes, top_logprobs}; bytes of a partial
 * character are its raw bytes), tool calls (message.tool_calls, content
 * null, finish_reason tool_calls), legacy text_completion with echo and
 * its logprobs object, stream chunks, and the request field an error
 * result names.
 */
#define PTEST_MAIN
#include "oa_openai.h"
#include "ptest.h"

static sch_logprob tr_top[2] = {
    {.id = 5, .token = {"Hi", 2}, .logprob = -0.25},
    {.id = 9, .token = {"\xef\xbf\xbd", 3}, .bytes = {"\xe2\x82", 2}, .logprob = -2.0},
};
static sch_logprob tr_lp[1] = {
    {.id = 5, .token = {"Hi", 2}, .logprob = -0.25, .top = tr_top, .n_top = 2}};
static sch_tool_call tr_call[1] = {
    {{"call_1", 6}, {"get_weather", 11}, {"{\"city\": \"Paris\"}", 17}}};

static void tr_result(sch_result *r, sch_choice *more) {
    static const uint32_t toks[1] = {5};
    sch_result_init(r);
    r->conversation_id = sch_str_c("c");
    r->turn_id = sch_str_c("t");
    r->text = sch_str_c("Hi");
    r->tokens = toks;
    r->n_tokens = 1;
    r->logprobs = tr_lp;
    r->n_logprobs = 1;
    r->prompt_tokens = 7;
    r->completion_tokens = 3;
    r->worker = sch_str_c("w");
    memset(more, 0, sizeof *more);
    more->index = 1;
    more->text = sch_str_c("");
    more->finish_reason = SCH_FINISH_STOP;
    more->tool_calls = tr_call;
    more->n_tool_calls = 1;
    r->choices = more;
    r->n_choices = 1;
}

static json_t *tr_path(json_t *j, const char *path) {
    char key[64];
    while (j && *path) {
        size_t n = strcspn(path, ".");
        snprintf(key, sizeof key, "%.*s", (int)n, path);
        j = json_is_array(j) ? json_array_get(j, (size_t)atoi(key)) : json_object_get(j, key);
        path += n + (path[n] == '.');
    }
    return j;
}

PT_TEST(chat_choices_logprobs_tool_calls) {
    sch_result r;
    sch_choice more;
    tr_result(&r, &more);
    oa_chat q;
    oa_fault f;
    const char *body = "{\"model\": \"m\", \"n\": 2, \"logprobs\": true, \"top_logprobs\": 2, "
                       "\"messages\": [{\"role\": \"user\", \"content\": \"x\"}]}";
    PT_EQ_INT(oa_chat_parse(body, strlen(body), 4096, &q, &f), 0);
    json_t *j = oa_completion_json(&r, &q, "chatcmpl-t", 1);
    PT_ASSERT(j != NULL);
    PT_EQ_STR(json_string_value(tr_path(j, "object")), "chat.completion");
    PT_EQ_INT(json_array_size(tr_path(j, "choices")), 2);
    PT_EQ_STR(json_string_value(tr_path(j, "choices.0.message.content")), "Hi");
    PT_EQ_STR(json_string_value(tr_path(j, "choices.0.finish_reason")), "stop");
    PT_EQ_STR(json_string_value(tr_path(j, "choices.0.logprobs.content.0.token")), "Hi");
    PT_ASSERT(json_real_value(tr_path(j, "choices.0.logprobs.content.0.logprob")) == -0.25);
    PT_EQ_INT(json_integer_value(tr_path(j, "choices.0.logprobs.content.0.bytes.1")), 'i');
    PT_EQ_INT(json_array_size(tr_path(j, "choices.0.logprobs.content.0.top_logprobs")), 2);
    /* a partial character: U+FFFD as text, its raw bytes in bytes */
    PT_EQ_INT(json_integer_value(tr_path(j, "choices.0.logprobs.content.0.top_logprobs.1.bytes.0")),
              0xe2);
    PT_EQ_INT(json_array_size(tr_path(j, "choices.0.logprobs.content.0.top_logprobs.1.bytes")), 2);
    PT_EQ_INT(json_integer_value(tr_path(j, "choices.1.index")), 1);
    PT_ASSERT(json_is_null(tr_path(j, "choices.1.message.content")));
    PT_EQ_STR(json_string_value(tr_path(j, "choices.1.finish_reason")), "tool_calls");
    PT_EQ_STR(json_string_value(tr_path(j, "choices.1.message.tool_calls.0.function.name")),
              "get_weather");
    PT_EQ_STR(json_string_value(tr_path(j, "choices.1.message.tool_calls.0.function.arguments")),
              "{\"city\": \"Paris\"}");
    PT_EQ_STR(json_string_value(tr_path(j, "choices.1.message.tool_calls.0.type")), "function");
    PT_ASSERT(json_is_array(tr_path(j, "choices.1.logprobs.content")));
    PT_EQ_INT(json_integer_value(tr_path(j, "usage.completion_tokens")), 3);
    PT_EQ_INT(json_integer_value(tr_path(j, "usage.prompt_tokens")), 7);
    json_decref(j);
    /* a cancelled turn (spec 1.4): parley's own finish_reason, its text so far */
    r.finish_reason = SCH_FINISH_CANCELLED;
    j = oa_completion_json(&r, &q, "chatcmpl-t", 1);
    PT_EQ_STR(json_string_value(tr_path(j, "choices.0.finish_reason")), "cancelled");
    PT_EQ_STR(json_string_value(tr_path(j, "choices.0.message.content")), "Hi");
    json_decref(j);
    r.finish_reason = SCH_FINISH_STOP;
    /* a stream chunk of choice 1 with a tool-call delta */
    oa_delta d = {.index = 1};
    d.tool_calls = json_pack("[{sI s{ss}}]", "index", (json_int_t)0, "function", "arguments", "{}");
    j = oa_chunk_json(&q, "chatcmpl-t", 1, &d, NULL);
    PT_EQ_STR(json_string_value(tr_path(j, "object")), "chat.completion.chunk");
    PT_EQ_INT(json_integer_value(tr_path(j, "choices.0.index")), 1);
    PT_EQ_STR(json_string_value(tr_path(j, "choices.0.delta.tool_calls.0.function.arguments")),
              "{}");
    json_decref(j);
    json_decref(d.tool_calls);
    oa_chat_free(&q);
}

PT_TEST(legacy_completion_echo_and_logprobs) {
    sch_result r;
    sch_choice more;
    tr_result(&r, &more);
    r.n_choices = 0;
    oa_chat q;
    oa_fault f;
    const char *body = "{\"model\": \"m\", \"prompt\": \"Say: \", \"echo\": true}";
    PT_EQ_INT(oa_cmpl_parse(body, strlen(body), 4096, &q, &f), 0);
    json_t *j = oa_completion_json(&r, &q, "cmpl-t", 1);
    PT_EQ_STR(json_string_value(tr_path(j, "object")), "text_completion");
    PT_EQ_STR(json_string_value(tr_path(j, "choices.0.text")), "Say: Hi");
    PT_ASSERT(json_is_null(tr_path(j, "choices.0.logprobs")));
    json_decref(j);
    oa_chat_free(&q);
    body = "{\"model\": \"m\", \"prompt\": \"Say: \", \"logprobs\": 2}";
    PT_EQ_INT(oa_cmpl_parse(body, strlen(body), 4096, &q, &f), 0);
    j = oa_completion_json(&r, &q, "cmpl-t", 1);
    PT_EQ_STR(json_string_value(tr_path(j, "choices.0.text")), "Hi");
    PT_EQ_STR(json_string_value(tr_path(j, "choices.0.logprobs.tokens.0")), "Hi");
    PT_ASSERT(json_real_value(tr_path(j, "choices.0.logprobs.token_logprobs.0")) == -0.25);
    PT_ASSERT(json_real_value(tr_path(j, "choices.0.logprobs.top_logprobs.0.Hi")) == -0.25);
    PT_EQ_INT(json_integer_value(tr_path(j, "choices.0.logprobs.text_offset.0")), 0);
    json_decref(j);
    /* a legacy stream chunk: text, index, finish_reason, offsets from text_from */
    json_t *content = oa_logprobs_content(tr_lp, 1);
    oa_delta d = {.index = 0, .text = "Hi", .len = 2, .text_from = 4, .logprobs = content};
    j = oa_chunk_json(&q, "cmpl-t", 1, &d, NULL);
    PT_EQ_STR(json_string_value(tr_path(j, "choices.0.text")), "Hi");
    PT_EQ_INT(json_integer_value(tr_path(j, "choices.0.logprobs.text_offset.0")), 4);
    PT_ASSERT(json_is_null(tr_path(j, "choices.0.finish_reason")));
    json_decref(j);
    json_decref(content);
    oa_chat_free(&q);
}

PT_TEST(error_result_param) {
    sch_result r;
    char buf[32];
    sch_result_init(&r);
    r.error_message = sch_str_c("params.response_format (json_schema): bad schema");
    PT_EQ_STR(oa_result_param(&r, buf, sizeof buf), "response_format");
    r.error_message = sch_str_c("params.n: 9 choices exceed scheduler.max_running (4)");
    PT_EQ_STR(oa_result_param(&r, buf, sizeof buf), "n");
    r.error_message = sch_str_c("params.tools: not supported");
    PT_EQ_STR(oa_result_param(&r, buf, sizeof buf), "tools");
    r.error_message = sch_str_c("prompt (9 tokens) exceeds");
    PT_ASSERT(oa_result_param(&r, buf, sizeof buf) == NULL);
    r.error_message = sch_str_c("params.bogus: x");
    PT_ASSERT(oa_result_param(&r, buf, sizeof buf) == NULL);
}
