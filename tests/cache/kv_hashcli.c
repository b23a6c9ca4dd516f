/*
 * kv_hashcli.c -- prints the cache's hashes of fixed inputs, one per line,
 * so test_kv_hash can check that a separate process (and any machine)
 * computes exactly the same values.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "kv_hash.h"

int main(void) {
    kv_fp_inputs in = {"gemma3", 0x0123456789abcdefull, "tok:v1", 1, 16};
    uint64_t fp = kv_fingerprint(&in);
    printf("%016" PRIx64 "\n", fp);
    uint64_t h = kv_hash_seed(fp, "tenant-a", 8);
    printf("%016" PRIx64 "\n", h);
    int32_t tok[16];
    for (int k = 0; k < 4; k++) {
        for (int i = 0; i < 16; i++) tok[i] = k * 1000 + i * 7 - 3;
        h = kv_hash_block(h, tok, 16);
        printf("%016" PRIx64 "\n", h);
    }
    const char *s = "Nobody inspects the spammish repetition";
    printf("%016" PRIx64 "\n", kv_hash64(s, strlen(s), 0));
    return 0;
}
