/*
 * fuzz_gguf.c -- libFuzzer target for the GGUF reader: open the input with
 * eng_gguf_open_mem (no copy, so ASan guards the exact input buffer) and,
 * when it opens, touch everything the handle exposes (gguf_exercise.h),
 * including the model config and tensor checks.
 */
#include <stddef.h>
#include <stdint.h>

#include "gguf_exercise.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    eng_gguf *g = NULL;
    char err[256];
    if (eng_gguf_open_mem(data, size, &g, err, sizeof err) == 0) {
        volatile uint64_t sink = gguf_exercise(g);
        (void)sink;
        eng_gguf_close(g);
    }
    return 0;
}
