/*
 * fuzz_wk_tools.c -- libFuzzer target: reading tool calls from a model's
 * reply (wk_tools_read, wk_tools_stream_safe).  The first byte picks the
 * tool format (bit 0), tool_choice (bits 1-2: auto, required, named) and
 * parallel calls (bit 3); the rest is the reply.  Every call read names a
 * known function and has JSON-object arguments; the content is never
 * longer than the reply; the streamable prefix is within the reply;
 * nothing crashes or leaks.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wk_tools.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const char *const choice[] = {
        "\"auto\"", "\"required\"", "{\"type\": \"function\", \"function\": {\"name\": \"add\"}}",
        "\"auto\""};
    if (!size) return 0;
    sch_params p;
    sch_params_default(&p);
    p.tools = sch_str_c("[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\"}}, "
                        "{\"type\": \"function\", \"function\": {\"name\": \"add\"}}]");
    p.tool_choice = sch_str_c(choice[(data[0] >> 1) & 3]);
    p.parallel_tool_calls = (data[0] >> 3) & 1;
    wk_tools t;
    char msg[256];
    if (wk_tools_parse(&p, (data[0] & 1) ? WK_TOOLS_LLAMA3 : WK_TOOLS_TAGS, &t, msg, sizeof msg))
        abort();
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    if (wk_tools_stream_safe(&t, text, len) > len) abort();
    wk_calls c;
    if (wk_tools_read(&t, text, len, "turn", 0, &c) == 0) {
        if (c.content_len > len || (!t.parallel && c.n > 1)) abort();
        for (size_t i = 0; i < c.n; i++) {
            json_error_t je;
            json_t *a = json_loadb(c.calls[i].arguments.ptr, c.calls[i].arguments.len, 0, &je);
            if (!json_is_object(a) ||
                (strcmp(c.calls[i].name.ptr, "add") && strcmp(c.calls[i].name.ptr, "get_weather")))
                abort();
            json_decref(a);
        }
        wk_calls_free(&c);
    }
    wk_tools_free(&t);
    return 0;
}
