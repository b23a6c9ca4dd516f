/*
 * test_kern_isa_attn.c -- part of test_kern_isa: the AVX-512 VNNI
 * attention kernel (kernels/cpu/kern_attn_avx512.inc) compiled against
 * SIMDe (kern_isa_emu.c), so a CI machine without AVX-512 checks it: over
 * head dims 32..256, GQA groups, block sizes, windows and cached prefixes
 * its outputs stay within float rounding of kern_attn_ref over the queries
 * rounded as the kernel rounds them (kern_attn_round_q), every (token,
 * head) output is bit-identical alone or in a batch, and where the CPU has
 * AVX-512 VNNI the native kernel gives the emulated one's bits.
 */
#include "ptest.h"

#include <math.h>

#include "kern_attn.h"
#include "kern_isa.h"
#if KERN_TEST_EMU
#include "kern_isa_emu.h"
#endif

/* A paged int8 cache of one KV head: block = [K rows | V rows | K scales |
 * V scales], B slots, hd dims, k_group 32. */
typedef struct acache {
    int hd, B, n_blocks;
    void **blocks;
    kern_attn_kv kv;
} acache;

static float a_frand(void) {
    return (float)((double)(pt_rand() >> 11) / 9007199254740992.0 * 2 - 1);
}

static void acache_init(acache *c, int hd, int B, int n_keys) {
    c->hd = hd, c->B = B, c->n_blocks = (n_keys + B - 1) / B;
    size_t rows = (size_t)B * hd, ks = (size_t)B * (hd / 32);
    c->blocks = calloc((size_t)c->n_blocks, sizeof *c->blocks);
    for (int i = 0; i < c->n_blocks; i++) {
        char *b = malloc(2 * rows + (ks + (size_t)B) * sizeof(float));
        for (size_t k = 0; k < 2 * rows; k++) b[k] = (char)((int)(pt_rand() % 255) - 127);
        float *s = (float *)(b + 2 * rows);
        for (size_t k = 0; k < ks + (size_t)B; k++) s[k] = 0.015f + 0.01f * a_frand();
        c->blocks[i] = b;
    }
    c->kv = (kern_attn_kv){.blocks = c->blocks,
                           .block_tokens = B,
                           .k_off = 0,
                           .v_off = rows,
                           .row_stride = (size_t)hd,
                           .ks_off = 2 * rows,
                           .vs_off = 2 * rows + ks * sizeof(float),
                           .ks_stride = (size_t)(hd / 32) * sizeof(float),
                           .vs_stride = sizeof(float),
                           .k_group = 32};
}

static void acache_free(acache *c) {
    for (int i = 0; i < c->n_blocks; i++) free(c->blocks[i]);
    free(c->blocks);
}

typedef void (*attn_fn)(const kern_attn_kv *, const kern_attn_q *, int, float);

/* n_q tokens x G heads at pos0 (queries Q [n_q][G][hd]) through fn into O. */
static void run_attn(attn_fn fn, const acache *c, const float *Q, float *O, int G, int t0, int nt,
                     int h0, int nh, int pos0, int window) {
    int hd = c->hd;
    kern_attn_q a = {.q = Q + ((size_t)t0 * G + h0) * hd,
                     .q_tok = (size_t)G * hd,
                     .q_head = (size_t)hd,
                     .out = O + ((size_t)t0 * G + h0) * hd,
                     .o_tok = (size_t)G * hd,
                     .o_head = (size_t)hd,
                     .n_tok = nt,
                     .n_head = nh,
                     .pos0 = pos0 + t0,
                     .window = window};
    fn(&c->kv, &a, hd, 1.0f / sqrtf((float)hd));
}

static void check_attn_fn(attn_fn fn, const char *what) {
    static const int hds[] = {32, 64, 96, 128, 256}, Gs[] = {1, 4, 8}, Bs[] = {1, 16};
    static const int qp[][3] = {{1, 0, 0}, {7, 37, 0}, {33, 5, 5}, {1, 70, 16}, {70, 3, 0}};
    int n = 0;
    for (int a = 0; a < 5; a++)
        for (int b = 0; b < 3; b++)
            for (int bs = 0; bs < 2; bs++) {
                const int *p = qp[n++ % 5];
                int hd = hds[a], G = Gs[b], n_q = p[0], pos0 = p[1], win = p[2];
                acache c;
                acache_init(&c, hd, Bs[bs], pos0 + n_q);
                size_t W = (size_t)G * hd, tot = (size_t)n_q * W;
                float *Q = malloc(sizeof(float) * tot), *Qr = malloc(sizeof(float) * tot);
                float *O = malloc(sizeof(float) * tot), *R = malloc(sizeof(float) * tot);
                float *P = malloc(sizeof(float) * tot);
                for (size_t i = 0; i < tot; i++) Q[i] = a_frand();
                for (size_t i = 0; i < tot; i += (size_t)hd) kern_attn_round_q(Q + i, hd, Qr + i);
                run_attn(fn, &c, Q, O, G, 0, n_q, 0, G, pos0, win);
                run_attn(kern_attn_ref, &c, Qr, R, G, 0, n_q, 0, G, pos0, win);
                double worst = 0;
                for (size_t i = 0; i < tot; i++) {
                    double e = fabs((double)O[i] - R[i]) / (1 + fabs(R[i]));
                    if (!(e <= worst)) worst = e;
                }
                PT_ASSERT_MSG(worst < 2e-5, "%s hd %d G %d B %d n_q %d pos0 %d window %d: error %g",
                              what, hd, G, Bs[bs], n_q, pos0, win, worst);
                /* every third token alone, then the heads split: the same bits */
                for (int t = 0; t < n_q; t += 3) {
                    run_attn(fn, &c, Q, P, G, t, 1, 0, G, pos0, win);
                    PT_ASSERT_MSG(!memcmp(P + (size_t)t * W, O + (size_t)t * W, sizeof(float) * W),
                                  "%s hd %d: token %d alone differs", what, hd, t);
                }
                if (G > 1) {
                    run_attn(fn, &c, Q, P, G, 0, n_q, 0, G / 2, pos0, win);
                    run_attn(fn, &c, Q, P, G, 0, n_q, G / 2, G - G / 2, pos0, win);
                    PT_ASSERT_MSG(!memcmp(P, O, sizeof(float) * tot),
                                  "%s hd %d: head split differs", what, hd);
                }
#if KERN_TEST_EMU
                if (fn != kern_attn_avx512_emu) { /* native: the emulated kernel's bits */
                    run_attn(kern_attn_avx512_emu, &c, Q, P, G, 0, n_q, 0, G, pos0, win);
                    PT_ASSERT_MSG(!memcmp(P, O, sizeof(float) * tot),
                                  "hd %d G %d: native and emulated kernels differ", hd, G);
                }
#endif
                free(Q), free(Qr), free(O), free(R), free(P);
                acache_free(&c);
            }
}

#if KERN_TEST_EMU
PT_TEST(attn_avx512_emulated_matches_rounded_reference) {
    if (kern_isa_detect() < KERN_ISA_AVX2) {
        printf("  skipped: the emulation build needs AVX2+FMA+F16C on the host\n");
        return;
    }
    check_attn_fn(kern_attn_avx512_emu, "attn avx512 (SIMDe)");
}
#endif

PT_TEST(attn_avx512_native_matches_rounded_reference) {
    if (kern_isa_best() < KERN_ISA_AVX512VNNI) {
        printf("  skipped: avx512vnni not available here (best %s)\n",
               kern_isa_name(kern_isa_best()));
        return;
    }
    check_attn_fn(kern_attn_avx512, "attn avx512");
}
