/*
 * fuzz_kv_value.c -- libFuzzer target for kv_value_decode, the parser of
 * Redis values (hostile input).  Each input is decoded twice: against a
 * fixed expected block, and against the identity its own header claims
 * (so the fuzzer reaches the token and payload checks); any accepted value
 * must have payload views inside the input.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "kv_hash.h"
#include "kv_value.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    int32_t tok[64] = {0};
    kv_value_meta e = {1, 2, 3, 4, 0, 16, 96, 160};
    kv_value_view v;
    if (kv_value_decode(data, size, &e, tok, &v) == 0 &&
        (v.global < data || v.global + e.global_len > data + size))
        abort();
    if (size >= KV_VALUE_HDR) {
        e.fingerprint = kv_le64_get(data + 8);
        e.ns_hash = kv_le64_get(data + 16);
        e.key_h = kv_le64_get(data + 24);
        e.check_g = kv_le64_get(data + 32);
        e.block_index = kv_le32_get(data + 40);
        e.block_tokens = kv_le32_get(data + 44);
        e.global_len = kv_le32_get(data + 48);
        e.local_len = kv_le32_get(data + 52);
        if (e.block_tokens <= 64) {
            for (uint32_t i = 0; i < e.block_tokens && KV_VALUE_HDR + 4 * (size_t)i + 4 <= size;
                 i++)
                tok[i] = (int32_t)kv_le32_get(data + KV_VALUE_HDR + 4 * i);
            if (kv_value_decode(data, size, &e, tok, &v) == 0) {
                if (e.global_len && (v.global < data || v.global + e.global_len > data + size))
                    abort();
                if (v.local && (v.local < data || v.local + e.local_len > data + size)) abort();
            }
        }
    }
    return 0;
}
