/*
 * random_prompt.c -- eng_random_prompt (eng_sampler.h): the deterministic
 * pseudo-random prompts of `parley generate --random-prompt` and the
 * benchmarks.
 */
#include "eng_sampler.h"

void eng_random_prompt(int32_t *ids, int n, int n_vocab, uint64_t seed) {
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    for (int i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        ids[i] = (int32_t)(x % (uint64_t)n_vocab);
    }
}
