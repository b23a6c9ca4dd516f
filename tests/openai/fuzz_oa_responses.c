/*
 * fuzz_oa_responses.c -- libFuzzer target: `POST /v1/responses` bodies
 * (oa_resp_parse, then oa_resp_chat with and without a stored history,
 * as the gateway does).  A body either becomes a ChatTurn that the wire
 * codec encodes, and an in_progress `response` object, or is refused with
 * a 400 and a message naming the field; it never crashes or leaks.
 */
#include <stdint.h>
#include <stdlib.h>

#include "oa_responses.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    oa_resp q;
    oa_fault f;
    if (oa_resp_parse((const char *)data, size, &q, &f) != 0) {
        if (f.status != 400 || !f.message[0]) abort();
        return 0;
    }
    json_t *hist = json_pack("[{ss ss} {ss ss}]", "role", "user", "content", "a", "role",
                             "assistant", "content", "b");
    for (int k = 0; k < 2; k++) {
        oa_chat c;
        if (oa_resp_chat(&q, k ? hist : NULL, 4096, &c, &f) != 0) {
            if (f.status != 400 || !f.message[0]) abort();
            continue;
        }
        c.turn.conversation_id = sch_str_c("c");
        c.turn.turn_id = sch_str_c("t");
        sch_buf b;
        sch_buf_init(&b);
        char err[256];
        if (sch_turn_encode(&c.turn, &b, err, sizeof err) != 0) abort();
        sch_buf_free(&b);
        oa_chat_free(&c);
    }
    json_decref(hist);
    json_decref(oa_resp_json(NULL, &q, "resp_x", 0, q.store));
    oa_resp_free(&q);
    return 0;
}
