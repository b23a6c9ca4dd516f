/*
 * test_oa_responses.c -- the Responses API mapping (oa_responses.h)
 * without a server: a Responses body with instructions, message and
 * function-call items, tools and text.format becomes the very ChatTurn
 * (byte for byte on the wire) that the chat endpoint makes of the
 * equivalent chat request, a stored history goes after the instructions,
 * fields parley cannot honour are refused naming the Responses field,
 * and the `response` object carries the output items and usage.
 */
#define PTEST_MAIN
#include "oa_responses.h"
#include "ptest.h"

/* The wire bytes of c's turn (fixed ids), malloc'd into *out. */
static size_t tr_wire(oa_chat *c, char **out) {
    c->turn.conversation_id = sch_str_c("c");
    c->turn.turn_id = sch_str_c("t");
    sch_buf b;
    sch_buf_init(&b);
    char err[256];
    PT_EQ_INT(sch_turn_encode(&c->turn, &b, err, sizeof err), 0);
    *out = malloc(b.len);
    memcpy(*out, b.data, b.len);
    size_t n = b.len;
    sch_buf_free(&b);
    return n;
}

static const char tr_resp_body[] =
    "{\"model\": \"m\", \"instructions\": \"Be brief.\", \"max_output_tokens\": 33, "
    "\"temperature\": 0.5, \"top_p\": 0.9, \"parallel_tool_calls\": false, "
    "\"input\": [{\"role\": \"user\", \"content\": [{\"type\": \"input_text\", \"text\": "
    "\"Weather?\"}]}, {\"type\": \"function_call\", \"call_id\": \"c1\", \"name\": \"w\", "
    "\"arguments\": \"{}\"}, {\"type\": \"function_call_output\", \"call_id\": \"c1\", "
    "\"output\": \"sunny\"}],"
    "\"tools\": [{\"type\": \"function\", \"name\": \"w\", \"parameters\": {\"type\": "
    "\"object\"}}], \"tool_choice\": {\"type\": \"function\", \"name\": \"w\"}, "
    "\"text\": {\"format\": {\"type\": \"json_schema\", \"name\": \"n\", \"schema\": "
    "{\"type\": \"object\"}, \"strict\": true}}}";

static const char tr_chat_body[] =
    "{\"model\": \"m\", \"max_completion_tokens\": 33, \"temperature\": 0.5, \"top_p\": 0.9, "
    "\"parallel_tool_calls\": false, \"messages\": [{\"role\": \"system\", \"content\": \"Be "
    "brief.\"}, {\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": "
    "\"Weather?\"}]}, {\"role\": \"assistant\", \"content\": null, \"tool_calls\": [{\"id\": "
    "\"c1\", \"type\": \"function\", \"function\": {\"name\": \"w\", \"arguments\": \"{}\"}}]}, "
    "{\"role\": \"tool\", \"tool_call_id\": \"c1\", \"content\": \"sunny\"}], "
    "\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"w\", \"parameters\": "
    "{\"type\": \"object\"}}}], \"tool_choice\": {\"type\": \"function\", \"function\": "
    "{\"name\": \"w\"}}, \"response_format\": {\"type\": \"json_schema\", \"json_schema\": "
    "{\"name\": \"n\", \"schema\": {\"type\": \"object\"}, \"strict\": true}}}";

PT_TEST(same_turn_as_the_chat_endpoint) {
    oa_resp q;
    oa_chat a, b;
    oa_fault f;
    PT_EQ_INT(oa_resp_parse(tr_resp_body, strlen(tr_resp_body), &q, &f), 0);
    PT_EQ_INT(q.store, 1);
    PT_EQ_INT(q.stream, 0);
    PT_ASSERT_MSG(oa_resp_chat(&q, NULL, 4096, &a, &f) == 0, "%s (%s)", f.message, f.param);
    PT_ASSERT_MSG(oa_chat_parse(tr_chat_body, strlen(tr_chat_body), 4096, &b, &f) == 0, "%s (%s)",
                  f.message, f.param);
    char *wa, *wb;
    size_t na = tr_wire(&a, &wa), nb = tr_wire(&b, &wb);
    PT_EQ_INT(na, nb);
    PT_ASSERT(!memcmp(wa, wb, na));
    char ha[20], hb[20];
    oa_conv_hash(a.msgs, a.n_msgs, ha);
    oa_conv_hash(b.msgs, b.n_msgs, hb);
    PT_EQ_STR(ha, hb);
    free(wa);
    free(wb);
    oa_chat_free(&a);
    oa_chat_free(&b);
    oa_resp_free(&q);
}

PT_TEST(history_after_instructions_and_conversation_grows) {
    static const char body[] = "{\"model\": \"m\", \"instructions\": \"I\", \"input\": \"two\", "
                               "\"previous_response_id\": \"resp_1\", \"store\": false}";
    oa_resp q;
    oa_chat c;
    oa_fault f;
    PT_EQ_INT(oa_resp_parse(body, strlen(body), &q, &f), 0);
    PT_EQ_STR(q.prev_id, "resp_1");
    PT_EQ_INT(q.store, 0);
    json_t *hist = json_pack("[{ss ss} {ss ss}]", "role", "user", "content", "one", "role",
                             "assistant", "content", "1");
    PT_EQ_INT(oa_resp_chat(&q, hist, 4096, &c, &f), 0);
    PT_EQ_INT(c.n_msgs, 4);
    PT_EQ_INT(c.msgs[0].role, SCH_ROLE_SYSTEM);
    PT_EQ_INT(c.msgs[3].role, SCH_ROLE_USER);
    PT_ASSERT(c.msgs[3].content.len == 3 && !memcmp(c.msgs[3].content.ptr, "two", 3));
    sch_result r;
    sch_result_init(&r);
    r.text = sch_str_c("2");
    r.prompt_tokens = 9;
    r.cached_tokens = 4;
    r.completion_tokens = 1;
    r.finish_reason = SCH_FINISH_STOP;
    json_t *conv = oa_resp_conversation(&q, hist, &r);
    PT_EQ_INT(json_array_size(conv), 4); /* instructions are not carried over */
    PT_EQ_STR(json_string_value(json_object_get(json_array_get(conv, 3), "content")), "2");
    json_t *o = oa_resp_json(&r, &q, "resp_2", 5, 0);
    PT_EQ_STR(json_string_value(json_object_get(o, "status")), "completed");
    PT_EQ_STR(json_string_value(json_object_get(o, "previous_response_id")), "resp_1");
    json_t *u = json_object_get(o, "usage");
    PT_EQ_INT(json_integer_value(json_object_get(u, "input_tokens")), 9);
    PT_EQ_INT(json_integer_value(
                  json_object_get(json_object_get(u, "input_tokens_details"), "cached_tokens")),
              4);
    PT_EQ_INT(json_integer_value(json_object_get(u, "total_tokens")), 10);
    json_t *item = json_array_get(json_object_get(o, "output"), 0);
    PT_EQ_STR(json_string_value(json_object_get(item, "type")), "message");
    PT_EQ_STR(json_string_value(json_object_get(item, "id")), "msg_2");
    json_decref(o);
    json_decref(conv);
    json_decref(hist);
    oa_chat_free(&c);
    oa_resp_free(&q);
}

PT_TEST(function_call_output_items) {
    static sch_tool_call call[1] = {{{"call_1", 6}, {"w", 1}, {"{}", 2}}};
    static const char body[] = "{\"model\": \"m\", \"input\": \"x\"}";
    oa_resp q;
    oa_fault f;
    PT_EQ_INT(oa_resp_parse(body, strlen(body), &q, &f), 0);
    sch_result r;
    sch_result_init(&r);
    r.text = sch_str_c("");
    r.tool_calls = call;
    r.n_tool_calls = 1;
    r.finish_reason = SCH_FINISH_STOP;
    json_t *o = oa_resp_json(&r, &q, "resp_9", 0, 1);
    json_t *out = json_object_get(o, "output");
    PT_EQ_INT(json_array_size(out), 1);
    json_t *it = json_array_get(out, 0);
    PT_EQ_STR(json_string_value(json_object_get(it, "type")), "function_call");
    PT_EQ_STR(json_string_value(json_object_get(it, "call_id")), "call_1");
    PT_EQ_STR(json_string_value(json_object_get(it, "id")), "fc_9_0");
    PT_EQ_STR(json_string_value(json_object_get(it, "arguments")), "{}");
    json_decref(o);
    oa_resp_free(&q);
}

PT_TEST(refused_fields_named) {
    static const char *const cases[][3] = {
        {"\"background\": true", "background", "unsupported_parameter"},
        {"\"reasoning\": {\"effort\": \"low\"}", "reasoning", "unsupported_parameter"},
        {"\"tools\": [{\"type\": \"web_search\"}]", "tools[0].type", "unsupported_value"},
        {"\"tools\": [{\"type\": \"file_search\"}]", "tools[0].type", "unsupported_value"},
        {"\"truncation\": \"auto\"", "truncation", "unsupported_parameter"},
        {"\"include\": [\"x\"]", "include", "unsupported_parameter"},
        {"\"metadata\": {\"a\": \"b\"}", "metadata", "unsupported_parameter"},
        {"\"conversation\": \"c\"", "conversation", "unsupported_parameter"},
        {"\"made_up\": 1", "made_up", "unknown_parameter"},
        {"\"text\": {\"format\": {\"type\": \"yaml\"}}", "text.format.type", "unsupported_value"},
        {"\"text\": {\"verbosity\": \"low\"}", "text.verbosity", "unsupported_parameter"},
        {"\"previous_response_id\": \"a b\"", "previous_response_id", NULL},
        {"\"store\": 1", "store", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char body[512];
        snprintf(body, sizeof body, "{\"model\": \"m\", \"input\": \"x\", %s}", cases[i][0]);
        oa_resp q;
        oa_fault f;
        PT_ASSERT_MSG(oa_resp_parse(body, strlen(body), &q, &f) == -1, "accepted %s", body);
        PT_EQ_INT(f.status, 400);
        PT_EQ_STR(f.param, cases[i][1]);
        if (cases[i][2]) PT_EQ_STR(f.code, cases[i][2]);
    }
    /* refused by the chat parser, named as the Responses field */
    static const char *const chat_cases[][2] = {
        {"\"input\": \"x\", \"max_output_tokens\": 0", "max_output_tokens"},
        {"\"input\": \"x\", \"temperature\": 3", "temperature"},
        {"\"input\": \"x\", \"text\": {\"format\": {\"type\": \"json_schema\", \"name\": "
         "\"n\", \"schema\": 5}}",
         "text.format"},
        {"\"input\": [{\"role\": \"robot\", \"content\": \"x\"}]", "input"},
    };
    for (size_t i = 0; i < sizeof chat_cases / sizeof chat_cases[0]; i++) {
        char body[512];
        snprintf(body, sizeof body, "{\"model\": \"m\", %s}", chat_cases[i][0]);
        oa_resp q;
        oa_chat c;
        oa_fault f;
        int rc = oa_resp_parse(body, strlen(body), &q, &f);
        if (rc == 0) {
            rc = oa_resp_chat(&q, NULL, 4096, &c, &f);
            oa_resp_free(&q);
        }
        PT_ASSERT_MSG(rc == -1, "accepted %s", body);
        PT_ASSERT_MSG(!strncmp(f.param, chat_cases[i][1], strlen(chat_cases[i][1])),
                      "param %s for %s", f.param, body);
    }
}

PT_TEST(hostile_bodies) {
    static const char *const bodies[] = {"",
                                         "[]",
                                         "{",
                                         "null",
                                         "{\"model\": \"m\"}",
                                         "{\"model\": \"m\", \"input\": []}",
                                         "{\"model\": \"m\", \"input\": [1]}",
                                         "{\"model\": \"m\", \"input\": [{\"type\": 5}]}"};
    for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) {
        oa_resp q;
        oa_fault f;
        PT_EQ_INT(oa_resp_parse(bodies[i], strlen(bodies[i]), &q, &f), -1);
        PT_EQ_INT(f.status, 400);
    }
}
