/*
 * test_wk_result.c -- wk_result_encode, the TurnResult's encoding with its
 * fallbacks: a reply over the record limit becomes an error result that
 * fits, carrying no other choices, logprobs or tool calls (the tool calls
 * were once left in, so the "error" result still held the oversized
 * calls); a reply within the limit is written as it is.
 */
#define PTEST_MAIN
#include <string.h>

#include "ptest.h"
#include "sch.h"
#include "wk_internal.h"

/* A result whose tool call's arguments are `big` bytes. */
static void big_result(sch_result *r, sch_tool_call *call, char *args, size_t big) {
    memset(args, ' ', big);
    args[0] = '{';
    args[big - 1] = '}';
    *call = (sch_tool_call){sch_str_c("call_1"), sch_str_c("lookup"), {args, big}};
    sch_result_init(r);
    r->conversation_id = sch_str_c("c1");
    r->turn_id = sch_str_c("t1");
    r->text = sch_str_c("");
    r->worker = sch_str_c("w1");
    r->finish_reason = SCH_FINISH_STOP;
    r->tool_calls = call;
    r->n_tool_calls = 1;
}

PT_TEST(result_over_limit_drops_tool_calls) {
    static char args[4096];
    for (int json = 0; json < 2; json++) {
        sch_result r, back;
        sch_tool_call call;
        sch_buf out;
        char err[256];
        big_result(&r, &call, args, sizeof args);
        sch_buf_init(&out);
        PT_EQ_INT(wk_result_encode(&r, json, 1024, &out, err, sizeof err), 0);
        PT_ASSERT_MSG(out.len <= 1024, "error result of %zu bytes (json=%d)", out.len, json);
        if (!json) {
            PT_EQ_INT(sch_result_decode(out.data, out.len, NULL, &back, err, sizeof err), 0);
            PT_ASSERT(back.has_error);
            PT_EQ_INT(back.error_code, SCH_E_INTERNAL);
            PT_EQ_INT(back.finish_reason, SCH_FINISH_ERROR);
            PT_EQ_INT(back.n_tool_calls, 0);
            sch_result_free(&back);
        }
        sch_buf_free(&out);
    }
}

PT_TEST(result_within_limit_kept) {
    static char args[64];
    sch_result r, back;
    sch_tool_call call;
    sch_buf out;
    char err[256];
    big_result(&r, &call, args, sizeof args);
    sch_buf_init(&out);
    PT_EQ_INT(wk_result_encode(&r, false, 4096, &out, err, sizeof err), 0);
    PT_EQ_INT(sch_result_decode(out.data, out.len, NULL, &back, err, sizeof err), 0);
    PT_ASSERT(!back.has_error);
    PT_EQ_INT(back.n_tool_calls, 1);
    PT_EQ_INT(back.tool_calls[0].arguments.len, sizeof args);
    sch_result_free(&back);
    sch_buf_free(&out);
}
