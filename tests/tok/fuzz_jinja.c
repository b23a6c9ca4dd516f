/*
 * fuzz_jinja.c -- libFuzzer target for the Jinja-subset interpreter
 * (eng_jinja.h): the input is a template; it is compiled and, when it
 * compiles, rendered over a small chat context with tight sandbox limits.
 * Any input must end in text or an error code -- never a crash, a hang,
 * or an output or memory use past the limits.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "eng_jinja.h"
#include "pl_err.h"

static const char CTX[] =
    "{\"messages\": [{\"role\": \"system\", \"content\": \"sys\"}, {\"role\": \"user\", \"content\": \"hi\"},"
    " {\"role\": \"assistant\", \"content\": null, \"tool_calls\": [{\"function\": {\"name\": \"f\","
    " \"arguments\": {\"a\": [1, 2.5, true]}}}]}], \"tools\": [{\"type\": \"function\"}],"
    " \"add_generation_prompt\": true, \"bos_token\": \"<s>\", \"eos_token\": \"</s>\"}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    eng_jinja *t = NULL;
    char err[PL_ERR_LEN], *out = NULL;
    size_t n = 0;
    eng_jinja_limits lim = {
        .max_steps = 200000, .max_output = 1 << 16, .max_memory = 1 << 24, .max_depth = 32};
    if (eng_jinja_compile((const char *)data, size, &t, err, sizeof err) == 0) {
        int rc = eng_jinja_render(t, CTX, sizeof CTX - 1, &lim, &out, &n, err, sizeof err);
        if (rc == 0 && (n > lim.max_output || strlen(out) > n))
            abort(); /* a broken limit is the bug this target looks for */
        free(out);
    }
    eng_jinja_free(t);
    return 0;
}
