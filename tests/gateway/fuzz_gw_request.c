/*
 * fuzz_gw_request.c -- libFuzzer target: request bodies of the gateway
 * and the batch runner (gw_chat_parse for /v1/chat/completions,
 * gw_cmpl_parse for /v1/completions).  A body either parses into a
 * ChatTurn that the wire codec encodes (the gateway would produce it) or
 * is refused with a 400 and a message; it never crashes, leaks or
 * produces a turn the codec refuses.
 */
#include <stdint.h>
#include <stdlib.h>

#include "gw_openai.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    for (int legacy = 0; legacy < 2; legacy++) {
        gw_chat c, moved;
        gw_fault f;
        int rc = (legacy ? gw_cmpl_parse : gw_chat_parse)((const char *)data, size, 4096, &c, &f);
        if (rc != 0) {
            if (f.status != 400 || !f.message[0]) abort();
            continue;
        }
        gw_chat_move(&moved, &c);
        moved.turn.conversation_id = sch_str_c("c");
        moved.turn.turn_id = sch_str_c("t");
        sch_buf b;
        sch_buf_init(&b);
        char err[256];
        if (sch_turn_encode(&moved.turn, &b, err, sizeof err) != 0) abort();
        sch_buf_free(&b);
        gw_chat_free(&moved);
    }
    return 0;
}
