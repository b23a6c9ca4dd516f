/*
 * test_kv_hash.c -- known-answer vectors of the cache's XXH64, the fixed
 * recipes of kv_hash.h, and equality of the values across two processes
 * (the kv_hashcli program, path in $KV_HASHCLI, run twice).
 */
#define PTEST_MAIN
#include "ptest.h"

#include <stdio.h>

#include "kv_hash.h"

PT_TEST(xxh64_known_answers) {
    /* Vectors from the xxHash reference implementation / python-xxhash. */
    PT_EQ_INT(kv_hash64("", 0, 0), 0xEF46DB3751D8E999ull);
    PT_EQ_INT(kv_hash64("a", 1, 0), 0xD24EC4F1A98C6E5Bull);
    PT_EQ_INT(kv_hash64("abc", 3, 0), 0x44BC2CF5AD770999ull);
    PT_EQ_INT(kv_hash64("xxhash", 6, 0), 0x32DD38952C4BC720ull);
    PT_EQ_INT(kv_hash64("xxhash", 6, 20141025), 0xB559B98D844E0635ull);
    const char *s = "Nobody inspects the spammish repetition"; /* >= 32 bytes: stripe path */
    PT_EQ_INT(kv_hash64(s, strlen(s), 0), 0xFBCEA83C8A378BF1ull);
}

PT_TEST(block_hash_is_le_serialisation) {
    /* h_k is XXH64 of LE64(prev) || LE32(tokens): check against a buffer
     * built byte by byte. */
    int32_t tok[16];
    uint8_t buf[8 + 64];
    for (int i = 0; i < 16; i++) tok[i] = i * 65537 - 40000;
    kv_le64_put(buf, 0x1122334455667788ull);
    for (int i = 0; i < 16; i++) kv_le32_put(buf + 8 + 4 * i, (uint32_t)tok[i]);
    PT_EQ_INT(kv_hash_block(0x1122334455667788ull, tok, 16), kv_hash64(buf, sizeof buf, 0));
    PT_EQ_INT(kv_hash_block_check(0x1122334455667788ull, tok, 16),
              kv_hash64(buf, sizeof buf, KV_CHECK_SEED));
    PT_ASSERT(kv_hash_block(1, tok, 16) != kv_hash_block(2, tok, 16));
}

PT_TEST(fingerprint_depends_on_every_input) {
    kv_fp_inputs a = {"gemma3", 42, "tok", 1, 16};
    uint64_t f = kv_fingerprint(&a);
    kv_fp_inputs b = a;
    b.arch = "llama";
    PT_ASSERT(kv_fingerprint(&b) != f);
    b = a;
    b.weights_digest = 43;
    PT_ASSERT(kv_fingerprint(&b) != f);
    b = a;
    b.tokenizer_id = "tok2";
    PT_ASSERT(kv_fingerprint(&b) != f);
    b = a;
    b.quant_version = 2;
    PT_ASSERT(kv_fingerprint(&b) != f);
    b = a;
    b.block_tokens = 32;
    PT_ASSERT(kv_fingerprint(&b) != f);
    PT_ASSERT(kv_hash_seed(f, "a", 1) != kv_hash_seed(f, "b", 1));
    PT_ASSERT(kv_hash_seed(f, "ab", 2) != kv_hash_seed(f, "a", 1));
}

/* Run the CLI and read its lines. */
static int run_cli(const char *path, char out[][32], int max) {
    FILE *p = popen(path, "r");
    if (!p) return -1;
    int n = 0;
    while (n < max && fgets(out[n], 32, p)) n++;
    return pclose(p) == 0 ? n : -1;
}

PT_TEST(two_processes_agree) {
    const char *cli = getenv("KV_HASHCLI");
    PT_ASSERT_MSG(cli && *cli, "KV_HASHCLI not set (ctest sets it)");
    char a[16][32], b[16][32];
    int na = run_cli(cli, a, 16), nb = run_cli(cli, b, 16);
    PT_EQ_INT(na, 7);
    PT_EQ_INT(nb, 7);
    for (int i = 0; i < 7; i++) PT_EQ_STR(a[i], b[i]);
    /* ... and this process computes the same values. */
    kv_fp_inputs in = {"gemma3", 0x0123456789abcdefull, "tok:v1", 1, 16};
    uint64_t fp = kv_fingerprint(&in);
    char line[32];
    snprintf(line, sizeof line, "%016llx\n", (unsigned long long)fp);
    PT_EQ_STR(a[0], line);
    uint64_t h = kv_hash_seed(fp, "tenant-a", 8);
    int32_t tok[16];
    for (int k = 0; k < 4; k++) {
        for (int i = 0; i < 16; i++) tok[i] = k * 1000 + i * 7 - 3;
        h = kv_hash_block(h, tok, 16);
    }
    snprintf(line, sizeof line, "%016llx\n", (unsigned long long)h);
    PT_EQ_STR(a[5], line);
    PT_EQ_STR(a[6], "fbcea83c8a378bf1\n");
}
