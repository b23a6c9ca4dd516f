/*
 * gpu_ops_kv.c -- gpu_ops' KV cases (see gpu_ops.c): kv_store (host block
 * bytes bit for bit after the write-back), attention (int8 and fp32 KV,
 * MHA / GQA / MQA, decode with key splits, prefill, sliding windows, dead
 * blocks NULL) and the device KV tier (hits, uploads, invalidation, a
 * stale copy used until invalidated, bytes re-uploaded equal bytes
 * written on the device, a tier too small for one sequence reported by
 * the next download).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eng_backend.h"
#include "eng_config.h"
#include "eng_kv.h"
#include "gpu_common.h"
#include "gpu_ops.h"
#include "kern_ops.h"

/* ---- KV store, attention, the device tier ------------------------------------------------ */

/* A layout of n_layer layers (every third global, pairs of local ones sharing KV). */
static void mk_layout(eng_kv_layout *l, int n_layer, int nkv, int hd, int B, int f32) {
    eng_config c;
    memset(&c, 0, sizeof c);
    c.n_layer = n_layer, c.n_head_kv = nkv, c.head_dim = hd;
    for (int i = 0; i < n_layer; i++) {
        c.window[i] = i % 3 == 2 ? 0 : 64;
        c.kv_src[i] = i % 3 == 1 ? i - 1 : i;
    }
    char err[256];
    if (eng_kv_layout_init_ex(l, &c, B, f32, err, sizeof err) != 0) printf("layout: %s\n", err);
}

/* n host blocks of kind k, filled with the same random bytes in both sets. */
static void **blocks(const eng_kv_layout *l, int k, int n, uint64_t seed) {
    void **b = calloc((size_t)n, sizeof *b);
    for (int i = 0; i < n; i++) {
        b[i] = malloc(l->block_bytes[k]);
        uint64_t s = seed + (uint64_t)i;
        for (size_t j = 0; j < l->block_bytes[k]; j++) ((uint8_t *)b[i])[j] = (uint8_t)gpu_rand(&s);
    }
    return b;
}

static void free_blocks(void **b, int n) {
    for (int i = 0; i < n; i++) free(b[i]);
    free(b);
}

/* Store random K/V for positions [0, P) of every owning layer with the CPU backend. */
static void fill_kv(const eng_kv_layout *l, int n_layer, int n_head, void **bk[2], int P) {
    int hd = l->head_dim, nkv = l->n_head_kv, ld = (n_head + 2 * nkv) * hd;
    for (int layer = 0; layer < n_layer; layer++) {
        if (layer % 3 == 1) continue; /* shares its predecessor's KV */
        for (int p0 = 0; p0 < P; p0 += 256) {
            int n = P - p0 < 256 ? P - p0 : 256;
            float *qkv = rnd((size_t)n * ld, 1);
            eng_kv_span sp = {.blocks = bk[l->layer_kind[layer]], .pos0 = p0, .t0 = 0, .n_tok = n};
            g_cpu.kv_store(g_cpu.ctx, l, n_head, layer, qkv, ld, &sp, 1);
            free(qkv);
        }
    }
}

int t_kv_store_exact(void) {
    for (int f32 = 0; f32 <= 1; f32++) {
        eng_kv_layout l;
        int n_layer = 6, nkv = 2, hd = 128, nh = 8, B = 16, ld = (nh + 2 * nkv) * hd + 7;
        mk_layout(&l, n_layer, nkv, hd, B, f32);
        void **a[2] = {blocks(&l, 0, 8, 77), blocks(&l, 1, 8, 99)};
        void **b[2] = {blocks(&l, 0, 8, 77), blocks(&l, 1, 8, 99)};
        int T = 34;
        float *qkv = rnd((size_t)T * ld, 2);
        float *qc = up(&g_cpu, qkv, (size_t)T * ld * 4), *qg = up(&g_gpu, qkv, (size_t)T * ld * 4);
        for (int layer = 0; layer < n_layer; layer++) {
            if (layer % 3 == 1) continue;
            int k = l.layer_kind[layer];
            eng_kv_span sa[3] = {
                {a[k], 5, 0, 30}, {a[k] + 4, 0, 30, 1}, {a[k] + 5, 47 - 16, 31, 3}};
            eng_kv_span sb[3] = {
                {b[k], 5, 0, 30}, {b[k] + 4, 0, 30, 1}, {b[k] + 5, 47 - 16, 31, 3}};
            g_cpu.kv_store(g_cpu.ctx, &l, nh, layer, qc, ld, sa, 3);
            g_gpu.kv_store(g_gpu.ctx, &l, nh, layer, qg, ld, sb, 3);
        }
        float probe;
        GPU_CHECK(g_gpu.download(g_gpu.ctx, &probe, qg, 4) == 0, "download (flush)");
        for (int k = 0; k < 2; k++)
            for (int i = 0; i < 8; i++) {
                size_t at = 0;
                while (at < l.block_bytes[k] &&
                       ((uint8_t *)a[k][i])[at] == ((uint8_t *)b[k][i])[at])
                    at++;
                if (at < l.block_bytes[k])
                    printf("    first difference at byte %zu of %zu (layer bytes %zu)\n", at,
                           l.block_bytes[k], l.layer_bytes);
                GPU_CHECK(!memcmp(a[k][i], b[k][i], l.block_bytes[k]),
                          "%s kind %d block %d: host bytes differ after the write-back",
                          f32 ? "fp32" : "int8", k, i);
            }
        printf("    kv_store %s: host blocks bit-exact after write-back\n", f32 ? "fp32" : "int8");
        for (int k = 0; k < 2; k++) free_blocks(a[k], 8), free_blocks(b[k], 8);
        free(qkv);
        bfree(&g_cpu, qc), bfree(&g_gpu, qg);
    }
    return 0;
}

/* One attention case: layer 0 (local, window 64) or 2 (global). */
typedef struct acase {
    int nkv, G, hd, f32, layer;
    int n_desc;
    int n_q[3], pos0[3];
    int boff[3]; /* descriptor i's block table starts at block boff[i] of the set */
} acase;

/* Run attention of case c over blocks bk on both backends; *err the max rel error.
 * out_g (if not NULL) receives the device output. */
static int attn_both(const eng_kv_layout *l, const acase *c, void **bk, double *err, float *out_g,
                     eng_backend *gpu, uint64_t qseed) {
    int nh = c->nkv * c->G, hd = c->hd, ldq = (nh + 2 * c->nkv) * hd, ldo = nh * hd, T = 0;
    for (int i = 0; i < c->n_desc; i++) T += c->n_q[i];
    float *q = malloc((size_t)T * ldq * sizeof *q);
    for (size_t i = 0; i < (size_t)T * ldq; i++) q[i] = gpu_gauss(&qseed);
    float *qc = up(&g_cpu, q, (size_t)T * ldq * 4), *qg = up(gpu, q, (size_t)T * ldq * 4);
    float *oc = up(&g_cpu, NULL, (size_t)T * ldo * 4), *og = up(gpu, NULL, (size_t)T * ldo * 4);
    eng_attn_desc dc[3], dg[3];
    int window = l->layer_kind[c->layer] == ENG_KV_LOCAL ? 64 : 0;
    for (int i = 0, t = 0; i < c->n_desc; t += c->n_q[i], i++) {
        dc[i] = (eng_attn_desc){.q = qc + (size_t)t * ldq,
                                .ldq = ldq,
                                .out = oc + (size_t)t * ldo,
                                .ldo = ldo,
                                .n_q = c->n_q[i],
                                .pos0 = c->pos0[i],
                                .window = window,
                                .blocks = bk + c->boff[i],
                                .layer = c->layer};
        dg[i] = dc[i];
        dg[i].q = qg + (size_t)t * ldq, dg[i].out = og + (size_t)t * ldo;
    }
    eng_attn_shape sh = {.kv = l, .n_head = nh, .scale = 1.0f / sqrtf((float)hd)};
    g_cpu.attention(g_cpu.ctx, &sh, dc, c->n_desc);
    gpu->attention(gpu->ctx, &sh, dg, c->n_desc);
    float *a = down(&g_cpu, oc, (size_t)T * ldo * 4), *b = down(gpu, og, (size_t)T * ldo * 4);
    int rc = a && b ? 0 : 1;
    if (!rc) *err = gpu_max_rel(b, a, (size_t)T * ldo);
    if (!rc && out_g) memcpy(out_g, b, (size_t)T * ldo * 4);
    free(q), free(a), free(b);
    bfree(&g_cpu, qc), bfree(gpu, qg), bfree(&g_cpu, oc), bfree(gpu, og);
    return rc;
}

int t_attention(void) {
    static const acase cases[] = {
        {8, 4, 64, 0, 2, 1, {1}, {2999}, {0}},                  /* llama-like decode, split keys */
        {1, 16, 128, 0, 2, 2, {1, 1}, {1500, 40}, {0}},         /* cai-like MQA decode */
        {1, 4, 256, 0, 0, 2, {1, 1}, {2999, 700}, {0}},         /* gemma-like local decode */
        {2, 2, 128, 0, 2, 3, {37, 1, 16}, {100, 2999, 0}, {0}}, /* prefill chunks + decode */
        {2, 2, 128, 0, 0, 1, {200}, {50}, {0}},                 /* windowed prefill */
        {4, 1, 64, 0, 2, 1, {33}, {0}, {0}},                    /* MHA prefill from 0 */
        {2, 2, 32, 0, 2, 1, {16}, {0}, {0}},                    /* tiny-llama-like: head_dim 32 */
        {2, 3, 80, 0, 2, 1, {5}, {400}, {0}},                   /* head_dim 80: one K scale */
        {2, 4, 128, 1, 2, 2, {1, 20}, {2999, 500}, {0}},        /* fp32 KV */
        {1, 4, 256, 1, 0, 1, {9}, {1000}, {0}},                 /* fp32 KV, local, hd 256 */
    };
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const acase *c = &cases[ci];
        eng_kv_layout l;
        int B = 16, P = 3000, nb = P / B + 1;
        mk_layout(&l, 3, c->nkv, c->hd, B, c->f32);
        void **bk = blocks(&l, l.layer_kind[c->layer], nb, 1000 + ci);
        void **bks[2] = {NULL, NULL};
        bks[l.layer_kind[c->layer]] = bk;
        /* every kind gets blocks: fill_kv stores both kinds' layers */
        int other = !l.layer_kind[c->layer];
        if (l.block_bytes[other]) bks[other] = blocks(&l, other, nb, 5000 + ci);
        fill_kv(&l, 3, c->nkv * c->G, bks, P);
        if (l.layer_kind[c->layer] == ENG_KV_LOCAL) /* dead blocks: never read */
            for (int i = 0; i < c->pos0[0] - 64 - B && c->n_desc == 1; i += B) {
                free(bk[i / B]);
                bk[i / B] = NULL;
            }
        double e = 0;
        GPU_CHECK(!attn_both(&l, c, bk, &e, NULL, &g_gpu, ci), "case %zu: download", ci);
        printf("    attention %-4s kv %d x G %2d hd %3d %s, %d desc (n_q %d, pos0 %d): max rel "
               "err %.2e\n",
               c->f32 ? "fp32" : "int8", c->nkv, c->G, c->hd,
               l.layer_kind[c->layer] == ENG_KV_LOCAL ? "local " : "global", c->n_desc, c->n_q[0],
               c->pos0[0], e);
        GPU_CHECK(e < 2e-4, "case %zu: error %g", ci, e);
        for (int k = 0; k < 2; k++)
            if (bks[k]) free_blocks(bks[k], nb);
    }
    return 0;
}

/* Store fresh random K/V of layer `layer` at positions [p0, p0 + n) with the CPU backend. */
static void restore_rows(const eng_kv_layout *l, int n_head, int layer, void **bk, int p0, int n) {
    int ld = (n_head + 2 * l->n_head_kv) * l->head_dim;
    float *qkv = rnd((size_t)n * ld, 1);
    eng_kv_span sp = {.blocks = bk, .pos0 = p0, .t0 = 0, .n_tok = n};
    g_cpu.kv_store(g_cpu.ctx, l, n_head, layer, qkv, ld, &sp, 1);
    free(qkv);
}

int t_tier(void) {
    eng_backend gb;
    char err[256];
    GPU_CHECK(eng_backend_cuda_create(&gb, 0, 1, err, sizeof err) == 0, "create: %s", err);
    eng_kv_layout l;
    int B = 16, P = 600, nb = P / B + 1, nkv = 2, G = 4, hd = 128, nh = nkv * G;
    mk_layout(&l, 3, nkv, hd, B, 0);
    void **bks[2] = {blocks(&l, 0, nb, 31), blocks(&l, 1, nb, 32)};
    fill_kv(&l, 3, nh, bks, P);
    acase c = {nkv, G, hd, 0, 2, 2, {1, 7}, {P - 1, 300}, {0}};
    eng_backend_kv_tier s1, s2, s3;
    double e;
    GPU_CHECK(!attn_both(&l, &c, bks[0], &e, NULL, &gb, 1) && e < 2e-4, "first call %g", e);
    gb.kv_tier(gb.ctx, &s1);
    uint64_t distinct = (uint64_t)(P - 1) / B + 1; /* both descriptors read blocks 0 .. (P-1)/B */
    printf(
        "    tier: first call %llu lookups, %llu hits, %llu uploads (%llu bytes), capacity %ld\n",
        (unsigned long long)s1.lookups, (unsigned long long)s1.hits, (unsigned long long)s1.uploads,
        (unsigned long long)s1.upload_bytes, s1.capacity);
    GPU_CHECK(s1.uploads == distinct, "uploads %llu, want %llu", (unsigned long long)s1.uploads,
              (unsigned long long)distinct);
    GPU_CHECK(s1.resident == (long)distinct && s1.capacity > s1.resident, "resident %ld",
              s1.resident);
    GPU_CHECK(!attn_both(&l, &c, bks[0], &e, NULL, &gb, 2) && e < 2e-4, "second call %g", e);
    gb.kv_tier(gb.ctx, &s2);
    GPU_CHECK(s2.uploads == s1.uploads, "a repeated call uploaded again");
    GPU_CHECK(s2.hits - s1.hits == s2.lookups - s1.lookups && s2.lookups > s1.lookups,
              "repeated call: %llu lookups, %llu hits",
              (unsigned long long)(s2.lookups - s1.lookups),
              (unsigned long long)(s2.hits - s1.hits));
    /* a copy is used until invalidated: new host rows in block 3 */
    double e_stale = 0, e_fresh = 0;
    restore_rows(&l, nh, 2, bks[0], 3 * B, B);
    GPU_CHECK(!attn_both(&l, &c, bks[0], &e_stale, NULL, &gb, 3), "stale call");
    gb.kv_invalidate(gb.ctx, bks[0][3]);
    GPU_CHECK(!attn_both(&l, &c, bks[0], &e_fresh, NULL, &gb, 3), "fresh call");
    printf("    tier: new host rows: error %.2e before kv_invalidate (the device's copy), "
           "%.2e after\n",
           e_stale, e_fresh);
    GPU_CHECK(e_stale > 1e-3, "the device did not keep its copy (error %g)", e_stale);
    GPU_CHECK(e_fresh < 2e-4, "after invalidation: error %g", e_fresh);
    /* rows the device wrote == the same rows uploaded back from the host after the write-back */
    int ld = (nh + 2 * nkv) * hd;
    float *qkv = rnd((size_t)4 * ld, 1);
    float *qg = up(&gb, qkv, (size_t)4 * ld * 4);
    eng_kv_span sp = {.blocks = bks[0], .pos0 = P, .t0 = 0, .n_tok = 4};
    gb.kv_store(gb.ctx, &l, nh, 2, qg, ld, &sp, 1);
    float probe;
    GPU_CHECK(gb.download(gb.ctx, &probe, qg, 4) == 0, "flush"); /* the rows reach the host */
    acase c2 = {nkv, G, hd, 0, 2, 1, {4}, {P}, {0}};
    size_t no = (size_t)4 * nh * hd;
    float *oa = malloc(no * 4), *ob = malloc(no * 4);
    GPU_CHECK(!attn_both(&l, &c2, bks[0], &e, oa, &gb, 4), "after kv_store");
    for (int i = 0; i < nb; i++) gb.kv_invalidate(gb.ctx, bks[0][i]);
    GPU_CHECK(!attn_both(&l, &c2, bks[0], &e, ob, &gb, 4), "re-uploaded");
    GPU_CHECK(!memcmp(oa, ob, no * 4), "device-written and re-uploaded blocks differ");
    printf("    tier: device-written rows == rows uploaded back (outputs bit-exact); vs cpu %.2e\n",
           e);
    GPU_CHECK(e < 2e-4, "the CPU reading the written-back rows: error %g", e);
    gb.kv_tier(gb.ctx, &s3);
    GPU_CHECK(s3.invalidations >= (uint64_t)nb - 1, "invalidations %llu",
              (unsigned long long)s3.invalidations);
    GPU_CHECK(s3.writeback_bytes > 0, "no write-back counted");
    GPU_RESULT("tier_hits", "%llu/%llu", (unsigned long long)s3.hits,
               (unsigned long long)s3.lookups);
    free(qkv), free(oa), free(ob);
    bfree(&gb, qg);
    eng_backend_free(&gb);
    free_blocks(bks[0], nb), free_blocks(bks[1], nb);
    return 0;
}

/* A tier of a few blocks: calls are cut into launches; one sequence too long fails loudly. */
int t_tier_small(void) {
    eng_backend small;
    char err[256];
    setenv("PARLEY_CUDA_KV_MIB", "1", 1);
    int rc = eng_backend_cuda_create(&small, 0, 1, err, sizeof err);
    unsetenv("PARLEY_CUDA_KV_MIB");
    GPU_CHECK(rc == 0, "create: %s", err);
    eng_kv_layout l;
    int B = 16, nkv = 1, G = 4, hd = 256, nb = 144;
    mk_layout(&l, 3, nkv, hd, B, 0);
    void **bks[2] = {blocks(&l, 0, nb, 61), blocks(&l, 1, nb, 62)};
    fill_kv(&l, 3, nkv * G, bks, nb * B);
    /* capacity: 1 MiB / (global + local block bytes) = 58 blocks; three
     * sequences of 44 blocks each: one launch each, evicting the previous */
    acase c = {nkv, G, hd, 0, 2, 3, {1, 1, 1}, {700, 690, 680}, {0, 48, 96}};
    double e = 0;
    GPU_CHECK(!attn_both(&l, &c, bks[0], &e, NULL, &small, 9) && e < 2e-4, "split call: %g", e);
    eng_backend_kv_tier st;
    small.kv_tier(small.ctx, &st);
    GPU_CHECK(st.evictions > 0, "no evictions with a tier of %ld blocks", st.capacity);
    printf("    small tier: capacity %ld, %llu evictions, max rel err %.2e\n", st.capacity,
           (unsigned long long)st.evictions, e);
    acase big = {nkv, G, hd, 0, 2, 1, {1}, {nb * B - 1}, {0}}; /* 144 blocks > capacity */
    if (st.capacity < nb) {
        float x;
        int nh = nkv * G, ldo = nh * hd, ldq = (nh + 2 * nkv) * hd;
        float *q = small.alloc(small.ctx, (size_t)ldq * 4),
              *o = small.alloc(small.ctx, (size_t)ldo * 4);
        eng_attn_desc d = {.q = q,
                           .ldq = ldq,
                           .out = o,
                           .ldo = ldo,
                           .n_q = 1,
                           .pos0 = big.pos0[0],
                           .blocks = bks[0],
                           .layer = 2};
        eng_attn_shape sh = {.kv = &l, .n_head = nh, .scale = 0.0625f};
        small.attention(small.ctx, &sh, &d, 1);
        int drc = small.download(small.ctx, &x, o, 4);
        printf("    small tier: a sequence of %d blocks -> download returns %d\n", nb, drc);
        GPU_CHECK(drc < 0, "an attention the tier cannot hold went unreported");
    }
    eng_backend_free(&small);
    free_blocks(bks[0], nb), free_blocks(bks[1], nb);
    return 0;
}
