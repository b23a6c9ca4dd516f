/*
 * fuzz_sch.h -- body shared by the four libFuzzer targets of the wire
 * codec (fuzz_sch_turn.c, fuzz_sch_chunk.c, fuzz_sch_result.c,
 * fuzz_sch_dead.c).
 *
 * Each input is decoded twice: under tight limits (to drive every limit
 * path) and under the defaults.  A record the decoder accepts must
 * re-encode, the re-encoding must decode again, and encoding that result
 * must give the same bytes (encode . decode is a fixpoint after one step).
 * Any violation aborts, which libFuzzer reports as a crash.  The re-decode
 * uses doubled size limits because encoding writes defaults explicitly and
 * widens float32 to float64, so it may be slightly larger than its input.
 */
#ifndef FUZZ_SCH_H
#define FUZZ_SCH_H

#include "sch.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void fuzz_sch_limits(sch_limits *tight, sch_limits *loose) {
    sch_limits_default(tight);
    tight->max_depth = 4;
    tight->max_objects = 64;
    tight->max_messages = 3;
    tight->max_content_bytes = 16;
    tight->max_stop = 1;
    tight->max_stop_bytes = 2;
    tight->max_tokens = 4;
    tight->max_prompt_tokens = 4;
    tight->max_id_bytes = 8;
    tight->max_text_bytes = 8;
    tight->max_headers = 1;
    tight->max_constraint_bytes = 8;
    sch_limits_default(loose);
    loose->max_total_bytes *= 2;
    loose->max_objects *= 2;
}

#define SCH_FUZZ_TARGET(kind)                                                         \
    int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);                     \
    int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {                    \
        static sch_limits tight, loose;                                               \
        static int ready;                                                             \
        sch_##kind x, y;                                                              \
        sch_buf a, b;                                                                 \
        char err[256];                                                                \
        if (!ready) {                                                                 \
            fuzz_sch_limits(&tight, &loose);                                          \
            ready = 1;                                                                \
        }                                                                             \
        if (sch_##kind##_decode(data, size, &tight, &x, err, sizeof err) == 0)        \
            sch_##kind##_free(&x);                                                    \
        if (sch_##kind##_decode(data, size, NULL, &x, err, sizeof err)) return 0;     \
        sch_buf_init(&a);                                                             \
        sch_buf_init(&b);                                                             \
        if (sch_##kind##_encode(&x, &a, err, sizeof err)) abort();                    \
        if (sch_##kind##_decode(a.data, a.len, &loose, &y, err, sizeof err)) abort(); \
        if (sch_##kind##_encode(&y, &b, err, sizeof err)) abort();                    \
        if (a.len != b.len || memcmp(a.data, b.data, a.len)) abort();                 \
        sch_##kind##_free(&y);                                                        \
        sch_##kind##_free(&x);                                                        \
        sch_buf_free(&a);                                                             \
        sch_buf_free(&b);                                                             \
        return 0;                                                                     \
    }

#endif /* FUZZ_SCH_H */
