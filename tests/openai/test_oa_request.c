/*
 * test_oa_request.c -- oa_chat_parse without a server: what the gateway
 * and the batch runner accept and refuse.  Every OpenAI request field
 * parley does not implement is accepted at its default value (null,
 * false, 0, {"type": "text"}, ...) and refused otherwise with 400, the
 * field as `param` and code unsupported_parameter; a field that is not
 * OpenAI's is refused with unknown_parameter; the fields parley honours
 * are parsed into the ChatTurn; hostile bodies never crash.
 */
#define PTEST_MAIN
#include "oa_openai.h"
#include "ptest.h"

#define TG_CAP 4096 /* max_tokens cap */

/* Parse {"model": "m", "messages": [{"role": "user", "content": "hi"}], <extra>}. */
static int tg_parse(const char *extra, oa_chat *c, oa_fault *f) {
    char body[4096];
    snprintf(body, sizeof body,
             "{\"model\": \"m\", \"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]%s%s}",
             extra && *extra ? ", " : "", extra ? extra : "");
    return oa_chat_parse(body, strlen(body), TG_CAP, c, f);
}

/* extra is accepted. */
static void tg_ok(const char *extra) {
    oa_chat c;
    oa_fault f;
    int rc = tg_parse(extra, &c, &f);
    PT_ASSERT_MSG(rc == 0, "refused %s: %s (param %s)", extra, f.message, f.param);
    oa_chat_free(&c);
}

/* extra is refused with 400, param and code. */
static void tg_refused(const char *extra, const char *param, const char *code) {
    oa_chat c;
    oa_fault f;
    int rc = tg_parse(extra, &c, &f);
    PT_ASSERT_MSG(rc == -1, "accepted %s", extra);
    PT_EQ_INT(f.status, 400);
    PT_EQ_STR(f.param, param);
    if (code) PT_EQ_STR(f.code, code);
    else PT_ASSERT_MSG(!f.code, "code %s for %s", f.code, extra);
    PT_ASSERT(strstr(f.message, param) != NULL || !*param);
}

PT_TEST(unsupported_fields_refused_unless_default) {
    /* field: a default value, a value asking for something */
    static const char *const cases[][3] = {
        {"audio", "null", "{\"voice\": \"alloy\", \"format\": \"wav\"}"},
        {"frequency_penalty", "0", "0.5"},
        {"presence_penalty", "0.0", "-1"},
        {"function_call", "\"none\"", "\"auto\""},
        {"functions", "null", "[{\"name\": \"f\"}]"},
        {"logit_bias", "{}", "{\"42\": 100}"},
        {"metadata", "{}", "{\"k\": \"v\"}"},
        {"modalities", "[\"text\"]", "[\"text\", \"audio\"]"},
        {"prediction", "null", "{\"type\": \"content\", \"content\": \"x\"}"},
        {"prompt_cache_key", "null", "\"k\""},
        {"reasoning_effort", "null", "\"low\""},
        {"store", "false", "true"},
        {"verbosity", "\"medium\"", "\"low\""},
        {"web_search_options", "null", "{}"},
    };
    char buf[512];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(buf, sizeof buf, "\"%s\": %s", cases[i][0], cases[i][1]);
        tg_ok(buf);
        snprintf(buf, sizeof buf, "\"%s\": %s", cases[i][0], cases[i][2]);
        tg_refused(buf, cases[i][0], "unsupported_parameter");
        snprintf(buf, sizeof buf, "\"%s\": null", cases[i][0]); /* null is absence */
        tg_ok(buf);
    }
    /* a wrong type is not the default either */
    tg_refused("\"store\": 0", "store", "unsupported_parameter");
}

PT_TEST(unknown_fields_refused) {
    tg_refused("\"temprature\": 0.5", "temprature", "unknown_parameter");
    tg_refused("\"best_of\": 2", "best_of", "unknown_parameter");
    tg_refused("\"stream_options\": {\"include_usage\": true, \"x\": true}", "stream_options.x",
               "unknown_parameter");
    tg_refused("\"stream_options\": {\"include_obfuscation\": true}",
               "stream_options.include_obfuscation", "unsupported_value");
    tg_ok("\"stream_options\": {\"include_obfuscation\": false, \"include_usage\": true}");
}

/* service_tier: auto / default interactive, flex bulk, absent or null
 * interactive and not "set"; other tiers refused naming the field. */
PT_TEST(service_tier_classes) {
    static const char *const tiers[][2] = {
        {"\"auto\"", "0"}, {"\"default\"", "0"}, {"\"flex\"", "1"}, {"null", "0"}};
    char buf[128];
    for (size_t i = 0; i < sizeof tiers / sizeof tiers[0]; i++) {
        oa_chat c;
        oa_fault f;
        snprintf(buf, sizeof buf, "\"service_tier\": %s", tiers[i][0]);
        PT_EQ_INT(tg_parse(buf, &c, &f), 0);
        PT_EQ_INT((int)c.turn.service_class,
                  tiers[i][1][0] == '1' ? SCH_CLASS_BULK : SCH_CLASS_INTERACTIVE);
        PT_EQ_INT(c.tier_set, strcmp(tiers[i][0], "null") != 0);
        oa_chat_free(&c);
    }
    oa_chat c;
    oa_fault f;
    PT_EQ_INT(tg_parse(NULL, &c, &f), 0);
    PT_EQ_INT((int)c.turn.service_class, SCH_CLASS_INTERACTIVE);
    PT_EQ_INT(c.tier_set, 0);
    oa_chat_free(&c);
    tg_refused("\"service_tier\": \"priority\"", "service_tier", "unsupported_value");
    tg_refused("\"service_tier\": \"scale\"", "service_tier", "unsupported_value");
    tg_refused("\"service_tier\": \"Flex\"", "service_tier", "unsupported_value");
    tg_refused("\"service_tier\": 1", "service_tier", "unsupported_value");
}

PT_TEST(n_choices) {
    oa_chat c;
    oa_fault f;
    tg_ok("\"n\": 1");
    PT_EQ_INT(tg_parse("\"n\": 16", &c, &f), 0);
    PT_EQ_INT(c.turn.params.n, 16);
    oa_chat_free(&c);
    tg_refused("\"n\": 17", "n", "unsupported_value");
    tg_refused("\"n\": 0", "n", NULL);
    tg_refused("\"n\": \"2\"", "n", NULL);
}

PT_TEST(logprobs_fields) {
    oa_chat c;
    oa_fault f;
    PT_EQ_INT(tg_parse("\"logprobs\": true, \"top_logprobs\": 20", &c, &f), 0);
    PT_ASSERT(c.logprobs && c.turn.params.has_logprobs && c.turn.params.top_logprobs == 20);
    oa_chat_free(&c);
    PT_EQ_INT(tg_parse("\"logprobs\": true", &c, &f), 0);
    PT_ASSERT(c.turn.params.has_logprobs && c.turn.params.top_logprobs == 0);
    oa_chat_free(&c);
    PT_EQ_INT(tg_parse("\"logprobs\": false, \"top_logprobs\": null", &c, &f), 0);
    PT_ASSERT(!c.logprobs && !c.turn.params.has_logprobs);
    oa_chat_free(&c);
    tg_refused("\"top_logprobs\": 2", "top_logprobs", NULL); /* needs logprobs true */
    tg_refused("\"logprobs\": true, \"top_logprobs\": 21", "top_logprobs", NULL);
    tg_refused("\"logprobs\": 1", "logprobs", NULL);
}

PT_TEST(response_format_fields) {
    oa_chat c;
    oa_fault f;
    PT_EQ_INT(tg_parse("\"response_format\": {\"type\": \"json_schema\", \"json_schema\": "
                       "{\"name\": \"person\", \"strict\": true, \"schema\": {\"type\": "
                       "\"object\", \"properties\": {\"n\": {\"type\": \"string\"}}}}}",
                       &c, &f),
              0);
    PT_EQ_INT(c.turn.params.response_format.type, SCH_RF_JSON_SCHEMA);
    PT_EQ_STR(c.turn.params.response_format.spec.ptr,
              "{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"string\"}}}");
    /* the schema text is heap-owned: it survives moving the request */
    oa_chat moved;
    oa_chat_move(&moved, &c);
    PT_EQ_STR(moved.turn.params.response_format.spec.ptr,
              "{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"string\"}}}");
    PT_EQ_STR(moved.turn.model.ptr, "m");
    oa_chat_free(&moved);
    static const struct {
        const char *rf;
        sch_rf type;
        const char *spec;
    } ok[] = {
        {"{\"type\": \"text\"}", SCH_RF_TEXT, NULL},
        {"{\"type\": \"json_object\"}", SCH_RF_JSON_OBJECT, NULL},
        {"{\"type\": \"json_schema\", \"json_schema\": {\"name\": \"x\"}}", SCH_RF_JSON_OBJECT,
         NULL},
        {"{\"type\": \"regex\", \"regex\": \"(yes|no)\"}", SCH_RF_REGEX, "(yes|no)"},
        {"{\"type\": \"grammar\", \"grammar\": \"start: \\\"a\\\"\"}", SCH_RF_GRAMMAR,
         "start: \"a\""},
    };
    char buf[512];
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        snprintf(buf, sizeof buf, "\"response_format\": %s", ok[i].rf);
        PT_ASSERT_MSG(tg_parse(buf, &c, &f) == 0, "%s: %s", ok[i].rf, f.message);
        PT_EQ_INT(c.turn.params.response_format.type, ok[i].type);
        if (ok[i].spec) PT_EQ_STR(c.turn.params.response_format.spec.ptr, ok[i].spec);
        oa_chat_free(&c);
    }
    tg_refused("\"response_format\": {\"type\": \"xml\"}", "response_format.type",
               "unsupported_value");
    tg_refused("\"response_format\": {\"type\": \"json_object\", \"schema\": {}}",
               "response_format.schema", "unknown_parameter");
    tg_refused("\"response_format\": {\"type\": \"json_schema\", \"json_schema\": "
               "{\"schema\": {}}}",
               "response_format.json_schema.name", NULL);
    tg_refused("\"response_format\": {\"type\": \"json_schema\", \"json_schema\": "
               "{\"name\": \"a b\", \"schema\": {}}}",
               "response_format.json_schema.name", NULL);
    tg_refused("\"response_format\": {\"type\": \"json_schema\", \"json_schema\": "
               "{\"name\": \"a\", \"schema\": []}}",
               "response_format.json_schema.schema", NULL);
    tg_refused("\"response_format\": {\"type\": \"regex\", \"regex\": \"\"}",
               "response_format.regex", NULL);
    tg_refused("\"response_format\": \"json\"", "response_format", NULL);
}

/* Parse a /v1/completions body {"model": "m", <extra>}. */
static int tg_cmpl(const char *extra, oa_chat *c, oa_fault *f) {
    char body[2048];
    snprintf(body, sizeof body, "{\"model\": \"m\", %s}", extra);
    return oa_cmpl_parse(body, strlen(body), TG_CAP, c, f);
}

PT_TEST(completions_fields) {
    oa_chat c;
    oa_fault f;
    PT_EQ_INT(tg_cmpl("\"prompt\": \"Once upon\", \"echo\": true, \"n\": 2", &c, &f), 0);
    PT_ASSERT(c.legacy && c.echo && !c.turn.messages);
    PT_EQ_STR(c.turn.prompt.ptr, "Once upon");
    PT_EQ_INT(c.turn.params.max_tokens, 16); /* OpenAI's completions default */
    PT_EQ_INT(c.turn.params.n, 2);
    oa_chat_free(&c);
    PT_EQ_INT(tg_cmpl("\"prompt\": [[1, 2, 3]], \"logprobs\": 5, \"suffix\": null, "
                      "\"best_of\": 1",
                      &c, &f),
              0);
    PT_EQ_INT(c.turn.n_prompt_tokens, 3);
    PT_ASSERT(c.logprobs && c.turn.params.top_logprobs == 5 && !c.turn.prompt.ptr);
    oa_chat_free(&c);
    PT_EQ_INT(tg_cmpl("\"prompt\": [\"one\"], \"logprobs\": 0", &c, &f), 0);
    PT_ASSERT(c.logprobs && c.turn.params.has_logprobs && c.turn.params.top_logprobs == 0);
    oa_chat_free(&c);
    static const char *const bad[][3] = {
        {"\"prompt\": \"x\", \"suffix\": \"end\"", "suffix", "unsupported_parameter"},
        {"\"prompt\": \"x\", \"echo\": true, \"logprobs\": 1", "echo", "unsupported_value"},
        {"\"prompt\": [1, 2], \"echo\": true", "echo", "unsupported_value"},
        {"\"prompt\": [\"a\", \"b\"]", "prompt", "unsupported_value"},
        {"\"prompt\": \"\"", "prompt", NULL},
        {"\"prompt\": [-1]", "prompt", NULL},
        {"\"prompt\": \"x\", \"best_of\": 3", "best_of", "unsupported_parameter"},
        {"\"prompt\": \"x\", \"logprobs\": 21", "logprobs", NULL},
        {"\"prompt\": \"x\", \"messages\": []", "messages", "unknown_parameter"},
        {"\"prompt\": \"x\", \"response_format\": {\"type\": \"text\"}", "response_format",
         "unknown_parameter"},
        {"\"messages\": [{\"role\": \"user\", \"content\": \"x\"}]", "messages",
         "unknown_parameter"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        PT_ASSERT_MSG(tg_cmpl(bad[i][0], &c, &f) == -1, "accepted %s", bad[i][0]);
        PT_EQ_STR(f.param, bad[i][1]);
        if (bad[i][2]) PT_EQ_STR(f.code, bad[i][2]);
    }
}

PT_TEST(message_fields) {
    oa_chat c;
    oa_fault f;
    const char *named = "{\"model\": \"m\", \"messages\": [{\"role\": \"user\", \"name\": "
                        "\"ann\", \"content\": \"hi\"}]}";
    PT_EQ_INT(oa_chat_parse(named, strlen(named), TG_CAP, &c, &f), 0);
    oa_chat_free(&c);
    static const char *const bad[][3] = {
        {"{\"role\": \"assistant\", \"content\": \"x\", \"tool_calls\": [{\"id\": \"c\"}]}",
         "messages[0].tool_calls", NULL},
        {"{\"role\": \"assistant\", \"content\": \"x\", \"refusal\": \"no\"}",
         "messages[0].refusal", "unsupported_parameter"},
        {"{\"role\": \"tool\", \"content\": \"x\"}", "messages[0].tool_call_id", NULL},
        {"{\"role\": \"user\", \"content\": \"x\", \"tool_call_id\": \"c\"}",
         "messages[0].tool_call_id", NULL},
        {"{\"role\": \"function\", \"content\": \"x\", \"name\": \"f\"}", "messages[0].role", NULL},
        {"{\"role\": \"user\", \"content\": \"x\", \"weight\": 1}", "messages[0].weight",
         "unknown_parameter"},
        {"{\"role\": \"user\", \"content\": [{\"type\": \"image_url\", \"image_url\": {}}]}",
         "messages[0].content", "unsupported_value"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char body[1024];
        snprintf(body, sizeof body, "{\"model\": \"m\", \"messages\": [%s]}", bad[i][0]);
        PT_EQ_INT(oa_chat_parse(body, strlen(body), TG_CAP, &c, &f), -1);
        PT_EQ_STR(f.param, bad[i][1]);
        if (bad[i][2]) PT_EQ_STR(f.code, bad[i][2]);
    }
}

PT_TEST(tools_fields) {
    oa_chat c;
    oa_fault f;
    const char *tools = "\"tools\": [{\"type\": \"function\", \"function\": {\"name\": "
                        "\"get_weather\", \"description\": \"d\", \"parameters\": {\"type\": "
                        "\"object\"}, \"strict\": true}}]";
    char buf[1024];
    snprintf(buf, sizeof buf,
             "%s, \"tool_choice\": {\"type\": \"function\", \"function\": {\"name\": "
             "\"get_weather\"}}, \"parallel_tool_calls\": false",
             tools);
    PT_EQ_INT(tg_parse(buf, &c, &f), 0);
    PT_ASSERT(strstr(c.turn.params.tools.ptr, "\"name\":\"get_weather\"") != NULL);
    PT_EQ_STR(c.turn.params.tool_choice.ptr,
              "{\"type\":\"function\",\"function\":{\"name\":\"get_weather\"}}");
    PT_ASSERT(!c.turn.params.parallel_tool_calls);
    oa_chat_free(&c);
    snprintf(buf, sizeof buf, "%s, \"tool_choice\": \"required\"", tools);
    PT_EQ_INT(tg_parse(buf, &c, &f), 0);
    PT_EQ_STR(c.turn.params.tool_choice.ptr, "\"required\"");
    PT_ASSERT(c.turn.params.parallel_tool_calls);
    oa_chat_free(&c);
    /* a conversation with a call and its result */
    const char *conv =
        "{\"model\": \"m\", \"messages\": [{\"role\": \"user\", \"content\": \"w?\"}, "
        "{\"role\": \"assistant\", \"content\": null, \"tool_calls\": [{\"id\": \"c1\", "
        "\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"arguments\": "
        "\"{}\"}}]}, {\"role\": \"tool\", \"tool_call_id\": \"c1\", \"content\": \"18C\"}]}";
    PT_EQ_INT(oa_chat_parse(conv, strlen(conv), TG_CAP, &c, &f), 0);
    PT_EQ_INT(c.turn.messages[1].role, SCH_ROLE_ASSISTANT);
    PT_EQ_INT(c.turn.messages[1].content.len, 0);
    PT_ASSERT(strstr(c.turn.messages[1].tool_calls.ptr, "get_weather") != NULL);
    PT_EQ_INT(c.turn.messages[2].role, SCH_ROLE_TOOL);
    PT_EQ_STR(c.turn.messages[2].tool_call_id.ptr, "c1");
    oa_chat_free(&c);
    static const char *const bad[][2] = {
        {"\"tools\": []", "tools"},
        {"\"tools\": [{\"type\": \"code\"}]", "tools[0]"},
        {"\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"a b\"}}]", "tools[0]"},
        {"\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", "
         "\"parameters\": []}}]",
         "tools[0]"},
        {"\"tool_choice\": \"required\"", "tool_choice"},
        {"\"tool_choice\": \"sometimes\"", "tool_choice"},
        {"\"parallel_tool_calls\": true", "parallel_tool_calls"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) tg_refused(bad[i][0], bad[i][1], NULL);
    snprintf(buf, sizeof buf,
             "%s, \"tool_choice\": {\"type\": \"function\", \"function\": {\"name\": "
             "\"other\"}}",
             tools);
    tg_refused(buf, "tool_choice", NULL);
    tg_ok("\"tool_choice\": \"none\"");
}

PT_TEST(honoured_fields_parsed) {
    oa_chat c;
    oa_fault f;
    PT_EQ_INT(tg_parse("\"max_completion_tokens\": 7, \"temperature\": 0.5, \"top_p\": 0.9, "
                       "\"seed\": 3, \"stop\": [\"a\", \"b\"], \"stream\": true, \"top_k\": 4, "
                       "\"repetition_penalty\": 1.1, \"user\": \"u\", \"safety_identifier\": "
                       "\"s\", \"stream_options\": {\"include_usage\": true}",
                       &c, &f),
              0);
    PT_EQ_INT(c.turn.params.max_tokens, 7);
    PT_ASSERT(c.turn.params.temperature == 0.5 && c.turn.params.top_p == 0.9);
    PT_ASSERT(c.turn.params.has_seed && c.turn.params.seed == 3);
    PT_EQ_INT(c.turn.params.n_stop, 2);
    PT_EQ_INT(c.turn.params.top_k, 4);
    PT_ASSERT(c.stream && c.turn.stream && c.include_usage);
    PT_EQ_STR(c.model, "m");
    PT_EQ_INT(c.turn.n_messages, 1);
    oa_chat_free(&c);
    tg_refused("\"temperature\": 3", "temperature", NULL);
    tg_refused("\"max_tokens\": 5000", "max_tokens", NULL);
    tg_refused("\"user\": 5", "user", NULL);
}

PT_TEST(hostile_bodies) {
    oa_chat c;
    oa_fault f;
    const char *const bodies[] = {"",
                                  "{",
                                  "[1]",
                                  "null",
                                  "{\"model\": 1}",
                                  "{\"model\": \"m\", \"model\": \"m\"}",
                                  "{\"model\": \"m\"}"};
    for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) {
        PT_EQ_INT(oa_chat_parse(bodies[i], strlen(bodies[i]), TG_CAP, &c, &f), -1);
        PT_EQ_INT(f.status, 400);
    }
    /* random bytes and mutations of a full request: never a crash */
    const char *full = "{\"model\": \"m\", \"messages\": [{\"role\": \"user\", \"content\": "
                       "[{\"type\": \"text\", \"text\": \"hi\"}]}], \"n\": 1, \"tools\": null, "
                       "\"stop\": [\"x\"], \"stream_options\": {\"include_usage\": true}}";
    char buf[512];
    for (int it = 0; it < 20000; it++) {
        size_t n = strlen(full);
        memcpy(buf, full, n);
        for (int k = 0; k < 1 + (int)(pt_rand() % 4); k++) buf[pt_rand() % n] = (char)pt_rand();
        if (oa_chat_parse(buf, n, TG_CAP, &c, &f) == 0) oa_chat_free(&c);
    }
}
