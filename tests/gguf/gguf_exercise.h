/*
 * gguf_exercise.h -- touch everything an opened GGUF handle exposes, for
 * the reader's robustness tests and its fuzz target.
 *
 * After a (possibly hostile) buffer opens successfully, every pointer the
 * reader hands out must be inside the buffer: this walks every key and
 * value (each string of each string array, each element of each numeric
 * array), looks every key and tensor up by name, reads the first and last
 * byte of every tensor, converts a tensor's first row when the type allows,
 * and runs the model config and tensor checks.  Under ASan any
 * out-of-bounds pointer becomes a crash.  Returns a checksum so nothing is
 * optimised away.
 */
#ifndef GGUF_EXERCISE_H
#define GGUF_EXERCISE_H

#include <stdlib.h>
#include <string.h>

#include "eng_config.h"
#include "eng_gguf.h"

static inline uint64_t gguf_exercise(const eng_gguf *g) {
    uint64_t sum = 0;
    for (int i = 0; i < eng_gguf_n_kv(g); i++) {
        eng_gguf_value v;
        const char *key = eng_gguf_kv_key(g, i);
        sum += strlen(key) + (uint64_t)eng_gguf_kv_type(g, i);
        if (eng_gguf_find(g, key) != i) abort(); /* keys are unique */
        if (eng_gguf_kv_value(g, i, &v)) abort();
        if (v.type == ENG_GGUF_TYPE_STR) {
            for (uint64_t j = 0; j < v.n; j++) sum += ((const uint8_t *)v.data)[j];
        } else if (v.type == ENG_GGUF_TYPE_ARR && v.arr_type == ENG_GGUF_TYPE_STR) {
            for (uint64_t j = 0; j < v.n; j++) {
                const char *s;
                size_t len;
                if (eng_gguf_kv_arr_str(g, i, j, &s, &len)) abort();
                if (len) sum += (uint8_t)s[0] + (uint8_t)s[len - 1];
            }
        } else if (v.type == ENG_GGUF_TYPE_ARR) {
            int et;
            uint64_t n;
            const void *d;
            if (eng_gguf_get_arr(g, key, &et, &n, &d)) abort();
            for (uint64_t j = 0; j < n; j++) {
                int64_t x;
                if (!eng_gguf_arr_get_i64(et, d, n, j, &x)) sum += (uint64_t)x;
            }
            if (n) sum += ((const uint8_t *)d)[0];
        } else {
            int64_t x;
            float f;
            uint32_t u;
            bool b;
            if (!eng_gguf_get_i64(g, key, &x)) sum += (uint64_t)x;
            if (!eng_gguf_get_f32(g, key, &f)) sum += f == f;
            if (!eng_gguf_get_u32(g, key, &u)) sum += u;
            if (!eng_gguf_get_bool(g, key, &b)) sum += b;
        }
    }
    for (int i = 0; i < eng_gguf_n_tensors(g); i++) {
        const eng_gguf_tensor *t = eng_gguf_tensor_at(g, i);
        if (eng_gguf_find_tensor(g, t->name) != t) abort();
        if (t->nbytes) {
            sum += ((const uint8_t *)t->data)[0] + ((const uint8_t *)t->data)[t->nbytes - 1];
            uint64_t rowb;
            if (t->ne[0] <= 4096 && !eng_gguf_row_bytes(t->type, t->ne[0], &rowb) &&
                rowb <= t->nbytes) {
                float row[4096];
                if (!eng_gguf_row_to_f32(t->type, t->data, t->ne[0], row)) sum += row[0] == row[0];
            }
        }
    }
    eng_config c;
    char err[256];
    if (!eng_config_from_gguf(g, &c, err, sizeof err)) {
        sum += (uint64_t)c.n_layer + eng_config_kv_bytes_per_token(&c) + eng_config_n_params(&c);
        if (!eng_config_check_tensors(&c, g, err, sizeof err)) sum++;
    }
    return sum;
}

#endif /* GGUF_EXERCISE_H */
