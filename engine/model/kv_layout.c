/*
 * kv_layout.c -- the paged KV layout of a model (eng_kv.h's
 * eng_kv_layout_init), built here because it reads the model's
 * configuration: which layers own KV, their windows, the KV head shape.
 * Every KV-owning layer gets a fixed byte range inside the blocks of its
 * kind; sharing layers point at their source's range.
 */
#include <string.h>

#include "eng_config.h"
#include "eng_kv.h"
#include "pl_err.h"

_Static_assert(ENG_MAX_LAYERS <= ENG_KV_MAX_LAYERS, "a layout holds every layer of a model");

int eng_kv_layout_init(eng_kv_layout *l, const struct eng_config *c, int block_tokens, char *err,
                       size_t errlen) {
    return eng_kv_layout_init_ex(l, c, block_tokens, 0, err, errlen);
}

int eng_kv_layout_init_ex(eng_kv_layout *l, const struct eng_config *c, int block_tokens,
                          int kv_fp32, char *err, size_t errlen) {
    if (!l || !c) return pl_errf(err, errlen, ENG_KV_EINVAL, "kv layout: NULL argument");
    if (block_tokens < 1 || block_tokens > 4096)
        return pl_errf(err, errlen, ENG_KV_EINVAL, "kv layout: block_tokens %d outside 1..4096",
                       block_tokens);
    if (c->n_layer < 1 || c->n_layer > ENG_MAX_LAYERS || c->n_head_kv < 1 || c->head_dim < 1)
        return pl_errf(err, errlen, ENG_KV_EINVAL,
                       "kv layout: bad model shape (layers %d, kv heads %d, head_dim %d)",
                       c->n_layer, c->n_head_kv, c->head_dim);
    memset(l, 0, sizeof *l);
    l->block_tokens = block_tokens;
    l->n_head_kv = c->n_head_kv;
    l->head_dim = c->head_dim;
    l->kv_fp32 = kv_fp32 ? 1 : 0;
    l->k_group = eng_kv_k_group(c->head_dim);
    l->k_scales = c->head_dim / l->k_group;
    size_t B = (size_t)block_tokens, row = (size_t)c->n_head_kv * c->head_dim;
    l->layer_bytes =
        kv_fp32 ? 2 * B * row * sizeof(float) : B * eng_kv_token_bytes(c->n_head_kv, c->head_dim);
    for (int i = 0; i < c->n_layer; i++) {
        int src = c->kv_src[i];
        if (src < 0 || src > i || c->kv_src[src] != src)
            return pl_errf(err, errlen, ENG_KV_EINVAL,
                           "kv layout: layer %d reads KV of layer %d, which does not own KV", i,
                           src);
        if (src != i) {
            if (c->window[i] != c->window[src])
                return pl_errf(err, errlen, ENG_KV_EINVAL,
                               "kv layout: layer %d window %d differs from its KV source %d (%d)",
                               i, c->window[i], src, c->window[src]);
            l->layer_kind[i] = l->layer_kind[src];
            l->layer_offset[i] = l->layer_offset[src];
            continue;
        }
        int kind = c->window[i] > 0 ? ENG_KV_LOCAL : ENG_KV_GLOBAL;
        if (c->window[i] > l->max_window) l->max_window = c->window[i];
        l->layer_kind[i] = kind;
        l->layer_offset[i] = (size_t)l->n_layers[kind] * l->layer_bytes;
        l->n_layers[kind]++;
    }
    for (int k = 0; k < 2; k++) l->block_bytes[k] = (size_t)l->n_layers[k] * l->layer_bytes;
    return 0;
}
