/*
 * test_wk_tools.c -- tool calls in the worker (wk_tools.h) without a
 * model: tool_choice modes and the refusal of tools that are not OpenAI's
 * shape (sch_tools_check, the gateway's rule too); the schema a forced call is constrained to (one function, any of
 * several, an array with parallel calls; llama3's "parameters"); the
 * messages rendered for each tool format (tools in the system message or
 * the first user message, earlier calls, results as <tool_response> or
 * role ipython); calls read back from replies (tags, bare JSON, arrays,
 * unknown functions and malformed markup staying text, parallel off
 * keeping the first); what an auto reply may stream.
 */
#define PTEST_MAIN
#include "ptest.h"
#include "wk_tools.h"

#define TT_TOOLS                                                                            \
    "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": " \
    "\"Weather of a city\", \"parameters\": {\"type\": \"object\", \"properties\": "        \
    "{\"city\": {\"type\": \"string\"}}, \"required\": [\"city\"]}}}, {\"type\": "          \
    "\"function\", \"function\": {\"name\": \"add\"}}]"

static int tt_parse(const char *tools, const char *choice, int parallel, wk_tool_format fmt,
                    wk_tools *t, char *msg) {
    sch_params p;
    sch_params_default(&p);
    p.tools = sch_str_c(tools);
    p.tool_choice = sch_str_c(choice);
    p.parallel_tool_calls = parallel;
    return wk_tools_parse(&p, fmt, t, msg, 256);
}

PT_TEST(modes_and_refusals) {
    wk_tools t;
    char msg[256];
    PT_EQ_INT(tt_parse(TT_TOOLS, NULL, 1, WK_TOOLS_TAGS, &t, msg), 0);
    PT_EQ_INT(t.mode, WK_TOOLS_AUTO);
    wk_tools_free(&t);
    PT_EQ_INT(tt_parse(TT_TOOLS, "\"none\"", 1, WK_TOOLS_TAGS, &t, msg), 0);
    PT_EQ_INT(t.mode, WK_TOOLS_OFF);
    PT_ASSERT(t.tools == NULL); /* not shown */
    wk_tools_free(&t);
    PT_EQ_INT(tt_parse(TT_TOOLS, "\"required\"", 1, WK_TOOLS_TAGS, &t, msg), 0);
    PT_EQ_INT(t.mode, WK_TOOLS_REQUIRED);
    wk_tools_free(&t);
    PT_EQ_INT(tt_parse(TT_TOOLS, "{\"type\": \"function\", \"function\": {\"name\": \"add\"}}", 1,
                       WK_TOOLS_TAGS, &t, msg),
              0);
    PT_EQ_INT(t.mode, WK_TOOLS_NAMED);
    PT_EQ_STR(t.named, "add");
    wk_tools_free(&t);
    PT_EQ_INT(tt_parse(NULL, NULL, 1, WK_TOOLS_TAGS, &t, msg), 0);
    PT_EQ_INT(t.mode, WK_TOOLS_OFF);
    static const char *const bad[][2] = {
        {"not json", NULL},
        {"{}", NULL},
        {"[]", NULL},
        {"[{\"type\": \"function\", \"function\": {\"name\": \"a b\"}}]", NULL},
        {"[{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": 3}}]", NULL},
        {"[{\"type\": \"function\", \"function\": {\"name\": \"f\"}}, {\"type\": \"function\", "
         "\"function\": {\"name\": \"f\"}}]",
         NULL},
        /* the gateway refused these two and the worker took them, until
         * both called sch_tools_check */
        {"[{\"type\": \"function\", \"function\": {\"name\": \"f\", \"nope\": 1}}]", NULL},
        {"[{\"type\": \"function\", \"function\": {\"name\": \"f\", \"strict\": \"yes\"}}]", NULL},
        {TT_TOOLS, "\"sometimes\""},
        {TT_TOOLS, "{\"type\": \"function\", \"function\": {\"name\": \"nope\"}}"},
        {NULL, "\"required\""},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = tt_parse(bad[i][0], bad[i][1], 1, WK_TOOLS_TAGS, &t, msg);
        PT_ASSERT_MSG(rc == SCH_E_BAD_CONSTRAINT, "case %zu accepted", i);
        PT_ASSERT(!strncmp(msg, "params.tool", 11));
        PT_ASSERT(t.tools == NULL);
    }
}

PT_TEST(forced_call_schema) {
    wk_tools t;
    char msg[256];
    PT_EQ_INT(tt_parse(TT_TOOLS,
                       "{\"type\": \"function\", \"function\": {\"name\": "
                       "\"get_weather\"}}",
                       0, WK_TOOLS_TAGS, &t, msg),
              0);
    char *s = wk_tools_schema(&t);
    PT_ASSERT(s != NULL);
    PT_ASSERT(strstr(s, "\"name\":{\"const\":\"get_weather\"}") != NULL);
    PT_ASSERT(strstr(s, "\"arguments\":{\"type\":\"object\",\"properties\":{\"city\"") != NULL);
    PT_ASSERT(strstr(s, "anyOf") == NULL && strstr(s, "\"array\"") == NULL);
    free(s);
    wk_tools_free(&t);
    PT_EQ_INT(tt_parse(TT_TOOLS, "\"required\"", 1, WK_TOOLS_LLAMA3, &t, msg), 0);
    s = wk_tools_schema(&t);
    PT_ASSERT(strstr(s, "\"type\":\"array\"") != NULL && strstr(s, "\"minItems\":1") != NULL);
    PT_ASSERT(strstr(s, "\"anyOf\"") != NULL);
    PT_ASSERT(strstr(s, "\"parameters\":{\"type\":\"object\"}") != NULL); /* add: no parameters */
    free(s);
    wk_tools_free(&t);
}

PT_TEST(render_formats) {
    wk_tools t;
    char msg[256];
    sch_message m[4] = {
        {.role = SCH_ROLE_USER, .content = sch_str_c("Weather in Paris?")},
        {.role = SCH_ROLE_ASSISTANT,
         .content = sch_str_c(""),
         .tool_calls =
             sch_str_c("[{\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":"
                       "\"get_weather\",\"arguments\":\"{\\\"city\\\":\\\"Paris\\\"}\"}}]")},
        {.role = SCH_ROLE_TOOL, .content = sch_str_c("18C"), .tool_call_id = sch_str_c("c1")},
        {.role = SCH_ROLE_TOOL, .content = sch_str_c("clear"), .tool_call_id = sch_str_c("c2")},
    };
    wk_tool_msgs r;
    /* chatml (Qwen 2.5): a system message with the tools, the call in tags,
     * both results in one user message */
    PT_EQ_INT(tt_parse(TT_TOOLS, NULL, 1, WK_TOOLS_TAGS, &t, msg), 0);
    PT_EQ_INT(wk_tools_render(&t, ENG_TMPL_CHATML, m, 4, &r, msg, sizeof msg), 0);
    PT_EQ_INT(r.n, 4);
    PT_ASSERT(!strcmp(r.m[0].role, "system") &&
              strstr(r.m[0].content, "# Tools\n\n") == r.m[0].content);
    PT_ASSERT(strstr(r.m[0].content, "<tools>\n{\"type\": \"function\", \"function\": {\"name\": "
                                     "\"get_weather\"") != NULL);
    PT_ASSERT(!strcmp(r.m[1].role, "user"));
    PT_ASSERT(!strcmp(r.m[2].role, "assistant"));
    PT_EQ_STR(r.m[2].content,
              "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n"
              "</tool_call>");
    PT_ASSERT(!strcmp(r.m[3].role, "user"));
    PT_EQ_STR(r.m[3].content,
              "<tool_response>\n18C\n</tool_response>\n<tool_response>\nclear\n</tool_response>");
    wk_tool_msgs_free(&r);
    /* gemma2 has no system role: the tools open the first user message */
    PT_EQ_INT(wk_tools_render(&t, ENG_TMPL_GEMMA2, m, 1, &r, msg, sizeof msg), 0);
    PT_EQ_INT(r.n, 1);
    PT_ASSERT(!strcmp(r.m[0].role, "user") && !strncmp(r.m[0].content, "# Tools", 7));
    PT_ASSERT(strstr(r.m[0].content, "</tool_call>\n\nWeather in Paris?") != NULL);
    wk_tool_msgs_free(&r);
    wk_tools_free(&t);
    /* llama3 (3.1's default): tools before the first user text, the call as
     * {"name", "parameters"}, results as role ipython */
    PT_EQ_INT(tt_parse(TT_TOOLS, NULL, 1, WK_TOOLS_LLAMA3, &t, msg), 0);
    PT_EQ_INT(wk_tools_render(&t, ENG_TMPL_LLAMA3, m, 3, &r, msg, sizeof msg), 0);
    PT_EQ_INT(r.n, 3);
    PT_ASSERT(!strncmp(r.m[0].content, "Given the following functions", 29));
    PT_ASSERT(strstr(r.m[0].content, "\n\nWeather in Paris?") != NULL);
    PT_EQ_STR(r.m[1].content, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}");
    PT_EQ_STR(r.m[2].role, "ipython");
    wk_tool_msgs_free(&r);
    wk_tools_free(&t);
    /* tool_choice none: nothing shown, earlier calls still written */
    PT_EQ_INT(tt_parse(TT_TOOLS, "\"none\"", 1, WK_TOOLS_TAGS, &t, msg), 0);
    PT_EQ_INT(wk_tools_render(&t, ENG_TMPL_CHATML, m, 3, &r, msg, sizeof msg), 0);
    PT_EQ_INT(r.n, 3);
    PT_EQ_STR(r.m[0].content, "Weather in Paris?");
    wk_tool_msgs_free(&r);
    sch_message badm = {.role = SCH_ROLE_ASSISTANT,
                        .content = sch_str_c(""),
                        .tool_calls = sch_str_c("{\"not\": \"an array\"}")};
    PT_EQ_INT(wk_tools_render(&t, ENG_TMPL_CHATML, &badm, 1, &r, msg, sizeof msg), SCH_E_BAD_VALUE);
    wk_tools_free(&t);
}

PT_TEST(file_template_variables) {
    wk_tools t;
    char msg[256], *tj;
    sch_message m[4] = {
        {.role = SCH_ROLE_USER, .content = sch_str_c("Weather in Paris?")},
        {.role = SCH_ROLE_ASSISTANT,
         .content = sch_str_c(""),
         .tool_calls = sch_str_c("[{\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":"
                                 "\"get_weather\",\"arguments\":\"{\\\"city\\\":\\\"Paris\\\"}\"}},"
                                 "{\"id\":\"c2\",\"type\":\"function\",\"function\":{\"name\":"
                                 "\"add\",\"arguments\":\"not json\"}}]")},
        {.role = SCH_ROLE_TOOL, .content = sch_str_c("18C"), .tool_call_id = sch_str_c("c1")},
        {.role = SCH_ROLE_TOOL, .content = sch_str_c("?"), .tool_call_id = sch_str_c("zz")},
    };
    wk_tool_msgs r;
    PT_EQ_INT(tt_parse(TT_TOOLS, NULL, 1, WK_TOOLS_TAGS, &t, msg), 0);
    PT_EQ_INT(wk_tools_file_msgs(&t, m, 4, 1, &r, &tj, msg, sizeof msg), 0);
    PT_EQ_INT(r.n, 4); /* no message of parley's own: the template writes the tools */
    PT_ASSERT(tj && strstr(tj, "\"name\":\"get_weather\"") && tj[0] == '[');
    PT_EQ_INT(r.m[1].content_len, 0);
    /* arguments decoded to their object; not-JSON arguments stay the string */
    PT_ASSERT(strstr(r.m[1].tool_calls, "\"arguments\":{\"city\":\"Paris\"}") != NULL);
    PT_ASSERT(strstr(r.m[1].tool_calls, "\"arguments\":\"not json\"") != NULL);
    PT_ASSERT(r.m[2].name && !strncmp(r.m[2].name, "get_weather", r.m[2].name_len) &&
              r.m[2].name_len == 11);
    PT_ASSERT(!strncmp(r.m[2].tool_call_id, "c1", r.m[2].tool_call_id_len));
    PT_ASSERT(r.m[3].name == NULL); /* no call with that id */
    PT_ASSERT(r.m[0].tool_calls == NULL && r.m[0].name == NULL);
    wk_tool_msgs_free(&r);
    free(tj);
    /* a template that wants the arguments string gets it */
    PT_EQ_INT(wk_tools_file_msgs(&t, m, 4, 0, &r, &tj, msg, sizeof msg), 0);
    PT_ASSERT(strstr(r.m[1].tool_calls, "\"arguments\":\"{\\\"city\\\":\\\"Paris\\\"}\"") != NULL);
    wk_tool_msgs_free(&r);
    free(tj);
    wk_tools_free(&t);
    /* tool_choice none: history kept, tools not shown */
    PT_EQ_INT(tt_parse(TT_TOOLS, "\"none\"", 1, WK_TOOLS_TAGS, &t, msg), 0);
    PT_EQ_INT(wk_tools_file_msgs(&t, m, 4, 1, &r, &tj, msg, sizeof msg), 0);
    PT_ASSERT(tj == NULL && r.m[1].tool_calls != NULL);
    wk_tool_msgs_free(&r);
    /* calls that are not OpenAI's array: 400 naming the message */
    sch_message bad = {.role = SCH_ROLE_ASSISTANT, .tool_calls = sch_str_c("{\"a\":1}")};
    PT_EQ_INT(wk_tools_file_msgs(&t, &bad, 1, 1, &r, &tj, msg, sizeof msg), SCH_E_BAD_VALUE);
    PT_ASSERT(strstr(msg, "messages[0].tool_calls") != NULL);
    wk_tools_free(&t);
}

PT_TEST(read_calls) {
    wk_tools t;
    wk_calls c;
    char msg[256];
    PT_EQ_INT(tt_parse(TT_TOOLS, NULL, 1, WK_TOOLS_TAGS, &t, msg), 0);
    const char *r1 = "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
                     "{\"city\": \"Paris\"}}\n</tool_call>\n<tool_call>{\"name\": \"add\", "
                     "\"arguments\": {}}</tool_call>";
    PT_EQ_INT(wk_tools_read(&t, r1, strlen(r1), "turn-1", 0, &c), 0);
    PT_EQ_INT(c.n, 2);
    PT_EQ_STR(c.calls[0].name.ptr, "get_weather");
    PT_EQ_STR(c.calls[0].arguments.ptr, "{\"city\":\"Paris\"}");
    PT_ASSERT(!strncmp(c.calls[0].id.ptr, "call_", 5) && c.calls[0].id.len == 21);
    PT_ASSERT(strcmp(c.calls[0].id.ptr, c.calls[1].id.ptr) != 0);
    PT_EQ_STR(c.content, "Let me check.");
    wk_calls_free(&c);
    /* an unknown function, malformed JSON: text */
    const char *r2 = "<tool_call>{\"name\": \"launch\", \"arguments\": {}}</tool_call>";
    PT_EQ_INT(wk_tools_read(&t, r2, strlen(r2), "t", 0, &c), 0);
    PT_EQ_INT(c.n, 0);
    PT_EQ_STR(c.content, r2);
    wk_calls_free(&c);
    const char *r3 = "Plain answer, no call.";
    PT_EQ_INT(wk_tools_read(&t, r3, strlen(r3), "t", 0, &c), 0);
    PT_EQ_INT(c.n, 0);
    PT_EQ_STR(c.content, r3);
    wk_calls_free(&c);
    wk_tools_free(&t);
    /* required without parallel calls: the first of an array only */
    PT_EQ_INT(tt_parse(TT_TOOLS, "\"required\"", 0, WK_TOOLS_TAGS, &t, msg), 0);
    const char *r4 = "[{\"name\": \"add\", \"arguments\": {\"a\": 1}}, {\"name\": \"add\", "
                     "\"arguments\": {\"a\": 2}}]";
    PT_EQ_INT(wk_tools_read(&t, r4, strlen(r4), "t", 1, &c), 0);
    PT_EQ_INT(c.n, 1);
    PT_EQ_STR(c.calls[0].arguments.ptr, "{\"a\":1}");
    PT_EQ_INT(c.content_len, 0);
    wk_calls_free(&c);
    const char *r5 = "{\"name\": \"add\", \"arguments\": {\"a\": "; /* cut by max_tokens */
    PT_EQ_INT(wk_tools_read(&t, r5, strlen(r5), "t", 0, &c), 0);
    PT_EQ_INT(c.n, 0);
    PT_EQ_STR(c.content, r5);
    wk_calls_free(&c);
    wk_tools_free(&t);
    /* llama3: a reply that is a JSON call (or several, separated by ';') */
    PT_EQ_INT(tt_parse(TT_TOOLS, NULL, 1, WK_TOOLS_LLAMA3, &t, msg), 0);
    const char *r6 = " {\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}; "
                     "{\"name\": \"add\", \"parameters\": {}}";
    PT_EQ_INT(wk_tools_read(&t, r6, strlen(r6), "t", 0, &c), 0);
    PT_EQ_INT(c.n, 2);
    PT_EQ_STR(c.calls[0].arguments.ptr, "{\"city\":\"Oslo\"}");
    wk_calls_free(&c);
    wk_tools_free(&t);
}

PT_TEST(auto_stream_holds_back_calls) {
    wk_tools t;
    char msg[256];
    PT_EQ_INT(tt_parse(TT_TOOLS, NULL, 1, WK_TOOLS_TAGS, &t, msg), 0);
    PT_EQ_INT(wk_tools_stream_safe(&t, "Hello", 5), 5);
    PT_EQ_INT(wk_tools_stream_safe(&t, "Sure.\n<tool", 11), 5);
    PT_EQ_INT(wk_tools_stream_safe(&t, "Sure. <tool_call>{", 18), 5);
    PT_EQ_INT(wk_tools_stream_safe(&t, "a < b", 5), 5);
    wk_tools_free(&t);
    PT_EQ_INT(tt_parse(TT_TOOLS, NULL, 1, WK_TOOLS_LLAMA3, &t, msg), 0);
    PT_EQ_INT(wk_tools_stream_safe(&t, " {\"na", 5), 0);
    PT_EQ_INT(wk_tools_stream_safe(&t, "  ", 2), 0);
    PT_EQ_INT(wk_tools_stream_safe(&t, "It is", 5), 5);
    wk_tools_free(&t);
    PT_EQ_INT(tt_parse(TT_TOOLS, "\"required\"", 1, WK_TOOLS_TAGS, &t, msg), 0);
    PT_EQ_INT(wk_tools_stream_safe(&t, "{\"name\"", 7), 0); /* the call arrives with the result */
    wk_tools_free(&t);
}
