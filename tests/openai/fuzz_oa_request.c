/*
 * fuzz_oa_request.c -- libFuzzer target: request bodies of the gateway
 * and the batch runner (oa_chat_parse for /v1/chat/completions,
 * oa_cmpl_parse for /v1/completions).  A body either parses into a
 * ChatTurn that the wire codec encodes (the gateway would produce it) or
 * is refused with a 400 and a message; it never crashes, leaks or
 * produces a turn the codec refuses.
 */
#include <stdint.h>
#include <stdlib.h>

#include "oa_openai.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    for (int legacy = 0; legacy < 2; legacy++) {
        oa_chat c, moved;
        oa_fault f;
        int rc = (legacy ? oa_cmpl_parse : oa_chat_parse)((const char *)data, size, 4096, &c, &f);
        if (rc != 0) {
            if (f.status != 400 || !f.message[0]) abort();
            continue;
        }
        oa_chat_move(&moved, &c);
        moved.turn.conversation_id = sch_str_c("c");
        moved.turn.turn_id = sch_str_c("t");
        sch_buf b;
        sch_buf_init(&b);
        char err[256];
        if (sch_turn_encode(&moved.turn, &b, err, sizeof err) != 0) abort();
        sch_buf_free(&b);
        oa_chat_free(&moved);
    }
    return 0;
}
