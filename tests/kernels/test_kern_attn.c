/*
 * test_kern_attn.c -- attention over paged int8 / fp32 KV (kern_attn.h and
 * the CPU backend's attention slot): the dispatched kernel against the
 * scalar textbook reference over GQA group sizes, head dims, block sizes,
 * cached prefixes and sliding windows (dead blocks NULL) -- where the
 * kernel rounds queries to int8 (the AVX-512 path, kern_attn_uses_q8) the
 * reference gets the same rounded queries, and the error of the rounding
 * itself against the plain reference is bounded separately; bit-for-bit
 * invariance of every (token, head) output to how tokens and heads are
 * grouped into calls; and the backend on a 3-thread pool with several
 * descriptors against a double-precision reference written in engine terms,
 * identical bits on 1 or 3 threads and for a descriptor alone or in a batch.
 */
#define PTEST_MAIN
#include "ptest.h"

#include "eng_backend.h"
#include "eng_config.h"
#include "eng_kv.h"
#include "kern_attn.h"
#include "kern_isa.h"
#include "kern_pool.h"

static float frand(void) { return (float)((double)(pt_rand() >> 11) / 9007199254740992.0 * 2 - 1); }

static int lo_of(int p, int window) {
    return window > 0 && p - window + 1 > 0 ? p - window + 1 : 0;
}

/* Random K/V element bytes: int8 in [-127, 127] or float in [-2, 2). */
static void fill_rows(void *p, size_t n, int f32) {
    for (size_t i = 0; i < n; i++) {
        if (f32) ((float *)p)[i] = 2 * frand();
        else ((int8_t *)p)[i] = (int8_t)((int)(pt_rand() % 255) - 127);
    }
}

static void fill_scales(float *p, size_t n) {
    for (size_t i = 0; i < n; i++) p[i] = 0.015f + 0.01f * frand();
}

/* ---- kernel level: a cache laid out differently from the engine's ------- */

/* Per block: [K scales | 16 pad bytes | K rows | V rows | V scales] (int8),
 * [K rows | V rows] (f32); rows [B][nkv][hd], K scales [B][nkv][hd / kg],
 * V scales [B][nkv]. */
typedef struct tcache {
    int nkv, hd, kg, B, f32, n_blocks; /* shape; kg: K values per K scale */
    void **blocks;                     /* n_blocks blocks */
    size_t k_off, v_off, vs_off;       /* array offsets (K scales at 0) */
} tcache;

static void tcache_init_kg(tcache *c, int nkv, int hd, int kg, int B, int f32, int n_keys) {
    size_t es = f32 ? sizeof(float) : 1, rows = (size_t)B * nkv * hd, sc = (size_t)B * nkv;
    size_t ksc = sc * (size_t)(hd / kg);
    c->nkv = nkv, c->hd = hd, c->kg = kg, c->B = B, c->f32 = f32;
    c->n_blocks = (n_keys + B - 1) / B;
    c->k_off = f32 ? 0 : ksc * sizeof(float) + 16;
    c->v_off = c->k_off + rows * es;
    c->vs_off = c->v_off + rows * es;
    size_t bytes = c->vs_off + (f32 ? 0 : sc * sizeof(float));
    c->blocks = calloc((size_t)c->n_blocks, sizeof *c->blocks);
    for (int i = 0; i < c->n_blocks; i++) {
        char *b = malloc(bytes);
        fill_rows(b + c->k_off, rows, f32);
        fill_rows(b + c->v_off, rows, f32);
        if (!f32) {
            fill_scales((float *)b, ksc);
            fill_scales((float *)(b + c->vs_off), sc);
        }
        c->blocks[i] = b;
    }
}

/* The engine's K grouping (eng_kv_k_group). */
static void tcache_init(tcache *c, int nkv, int hd, int B, int f32, int n_keys) {
    tcache_init_kg(c, nkv, hd, eng_kv_k_group(hd), B, f32, n_keys);
}

static void tcache_free(tcache *c) {
    for (int i = 0; i < c->n_blocks; i++) free(c->blocks[i]);
    free(c->blocks);
}

static kern_attn_kv tcache_kv(const tcache *c, void *const *table, int g) {
    size_t es = c->f32 ? sizeof(float) : 1;
    kern_attn_kv kv = {.blocks = table,
                       .block_tokens = c->B,
                       .f32 = c->f32,
                       .k_off = c->k_off + (size_t)g * c->hd * es,
                       .v_off = c->v_off + (size_t)g * c->hd * es,
                       .row_stride = (size_t)c->nkv * c->hd * es};
    if (!c->f32) {
        int ks = c->hd / c->kg;
        kv.ks_off = (size_t)g * ks * sizeof(float);
        kv.vs_off = c->vs_off + (size_t)g * sizeof(float);
        kv.ks_stride = (size_t)c->nkv * ks * sizeof(float);
        kv.vs_stride = (size_t)c->nkv * sizeof(float);
        kv.k_group = c->kg;
    }
    return kv;
}

/* Queries / outputs [n_q][nkv*G*hd]: tokens t0.., heads h0.. of KV head g. */
static kern_attn_q qview(const float *Q, float *O, int W, int hd, int G, int g, int t0, int nt,
                         int h0, int nh, int pos0, int window) {
    size_t off = (size_t)t0 * W + (size_t)(g * G + h0) * hd;
    return (kern_attn_q){.q = Q + off,
                         .q_tok = (size_t)W,
                         .q_head = (size_t)hd,
                         .out = O + off,
                         .o_tok = (size_t)W,
                         .o_head = (size_t)hd,
                         .n_tok = nt,
                         .n_head = nh,
                         .pos0 = pos0 + t0,
                         .window = window};
}

/* Block table with every block wholly before the first attended key NULL. */
static void **live_table(const tcache *c, int pos0, int window) {
    void **t = malloc((size_t)c->n_blocks * sizeof *t);
    int lo = lo_of(pos0, window);
    for (int i = 0; i < c->n_blocks; i++) t[i] = (i + 1) * c->B <= lo ? NULL : c->blocks[i];
    return t;
}

/* Q's rows (n_q x W floats) with each head's query rounded as the int8
 * path rounds it (a fresh copy). */
static float *round_queries(const float *Q, int n_q, int W, int hd) {
    float *R = malloc(sizeof(float) * (size_t)n_q * W);
    for (int i = 0; i < n_q * W; i += hd) kern_attn_round_q(Q + i, hd, R + i);
    return R;
}

/* kern_attn vs kern_attn_ref on one shape, kg K values per K scale;
 * returns the largest error.  plain: against the reference over the exact
 * queries even where the kernel rounds them to int8. */
static double check_case_kgp(int nkv, int G, int hd, int kg, int B, int f32, int n_q, int pos0,
                             int window, int plain) {
    tcache c;
    tcache_init_kg(&c, nkv, hd, kg, B, f32, pos0 + n_q);
    void **tab = live_table(&c, pos0, window);
    int W = nkv * G * hd;
    float *Q = malloc(sizeof(float) * n_q * W), *O = malloc(sizeof(float) * n_q * W),
          *R = malloc(sizeof(float) * n_q * W);
    for (int i = 0; i < n_q * W; i++) Q[i] = frand();
    float scale = 1.0f / sqrtf((float)hd);
    kern_attn_kv kv0 = tcache_kv(&c, tab, 0);
    float *Qr = !plain && kern_attn_uses_q8(&kv0, hd) ? round_queries(Q, n_q, W, hd) : NULL;
    for (int g = 0; g < nkv; g++) {
        kern_attn_kv kv = tcache_kv(&c, tab, g);
        kern_attn_q qa = qview(Q, O, W, hd, G, g, 0, n_q, 0, G, pos0, window);
        kern_attn_q qr = qview(Qr ? Qr : Q, R, W, hd, G, g, 0, n_q, 0, G, pos0, window);
        kern_attn(&kv, &qa, hd, scale);
        kern_attn_ref(&kv, &qr, hd, scale);
    }
    free(Qr);
    double worst = 0;
    for (int i = 0; i < n_q * W; i++) {
        double e = fabs((double)O[i] - R[i]) / (1 + fabs(R[i]));
        if (!(e <= worst)) worst = e; /* NaN propagates */
    }
    free(Q), free(O), free(R), free(tab);
    tcache_free(&c);
    return worst;
}

static double check_case_kg(int nkv, int G, int hd, int kg, int B, int f32, int n_q, int pos0,
                            int window) {
    return check_case_kgp(nkv, G, hd, kg, B, f32, n_q, pos0, window, 0);
}

/* The same with the engine's K grouping. */
static double check_case(int nkv, int G, int hd, int B, int f32, int n_q, int pos0, int window) {
    return check_case_kg(nkv, G, hd, eng_kv_k_group(hd), B, f32, n_q, pos0, window);
}

PT_TEST(attn_matches_reference_over_shapes) {
    static const int Gs[] = {1, 4, 16}, hds[] = {32, 64, 128}, Bs[] = {1, 16},
                     wins[] = {0, 1, 5, 1000};
    static const int qp[][2] = {{1, 0}, {7, 37}, {33, 5}, {1, 70}, {3, 64}}; /* (n_q, pos0) */
    int n = 0;
    for (int f32 = 0; f32 < 2; f32++)
        for (int a = 0; a < 3; a++)
            for (int b = 0; b < 3; b++)
                for (int bs = 0; bs < 2; bs++)
                    for (int w = 0; w < 4; w++) {
                        const int *p = qp[n++ % 5];
                        double e = check_case(2, Gs[a], hds[b], Bs[bs], f32, p[0], p[1], wins[w]);
                        PT_ASSERT_MSG(e < 2e-5,
                                      "G %d hd %d B %d f32 %d n_q %d pos0 %d window %d: error %g",
                                      Gs[a], hds[b], Bs[bs], f32, p[0], p[1], wins[w], e);
                    }
}

PT_TEST(attn_odd_and_large_head_dims_match_reference) {
    /* 36: not a multiple of 8 (reference path); 512, 1024: smaller chunks */
    PT_ASSERT(check_case(1, 2, 36, 16, 0, 5, 9, 0) < 2e-5);
    PT_ASSERT(check_case(1, 2, 512, 16, 0, 3, 40, 0) < 2e-5);
    PT_ASSERT(check_case(1, 2, 1024, 4, 1, 2, 20, 7) < 2e-5);
}

PT_TEST(attn_k_scale_groups_match_reference) {
    /* one K scale per 8 values, per 32 (the engine's), per head (random
     * scales per group, so a wrong group index shows); 12 of 36 takes the
     * reference path (not a multiple of 8) */
    static const int kgs[] = {8, 32, 64};
    for (int i = 0; i < 3; i++) {
        PT_ASSERT_MSG(check_case_kg(2, 4, 64, kgs[i], 16, 0, 7, 37, 0) < 2e-5, "kg %d", kgs[i]);
        PT_ASSERT_MSG(check_case_kg(1, 2, 64, kgs[i], 1, 0, 1, 70, 5) < 2e-5, "kg %d", kgs[i]);
    }
    PT_ASSERT(check_case_kg(1, 2, 36, 12, 16, 0, 5, 9, 0) < 2e-5);
    PT_EQ_INT(eng_kv_k_group(256), 32);
    PT_EQ_INT(eng_kv_k_group(64), 32);
    PT_EQ_INT(eng_kv_k_group(36), 36);
}

/* The query rounding of the AVX-512 path (two int8 parts, about 16 bits)
 * against the plain reference: each query element moves by at most half a
 * step of max |q_block| / (127 * 254), so outputs stay within about the
 * AVX2 path's rounding. */
PT_TEST(attn_int8_query_error_is_bounded) {
    tcache c;
    tcache_init(&c, 1, 64, 16, 0, 8);
    kern_attn_kv kv = tcache_kv(&c, c.blocks, 0);
    int q8 = kern_attn_uses_q8(&kv, 64);
    tcache_free(&c);
    if (!q8) {
        printf("  skipped: kern_attn does not round queries at %s\n",
               kern_isa_name(kern_isa_best()));
        return;
    }
    double worst = 0;
    static const int hds[] = {32, 64, 128, 256};
    for (int i = 0; i < 4; i++) {
        double e = check_case_kgp(2, 4, hds[i], 32, 16, 0, 17, 40, 0, 1);
        worst = e > worst ? e : worst;
    }
    printf("  largest error against the exact-query reference: %.2e\n", worst);
    PT_ASSERT(worst < 1e-4);
}

PT_TEST(attn_scalar_dispatch_is_the_reference) {
    kern_isa before = kern_isa_best();
    kern_isa_set_max(KERN_ISA_SCALAR);
    PT_EQ_INT(check_case(2, 4, 64, 16, 0, 9, 20, 0) == 0, 1);
    PT_EQ_INT(check_case(1, 4, 64, 1, 1, 4, 20, 5) == 0, 1);
    kern_isa_set_max(before == kern_isa_detect() ? KERN_ISA_AMX : before);
}

/* Every (token, head) output bit-identical whether computed alone, inside a
 * chunk of tokens with a subset of heads, or in one call for everything. */
static void check_invariance(int G, int hd, int B, int f32, int window) {
    int nkv = 2, n_q = 33, pos0 = 45, W = nkv * G * hd;
    tcache c;
    tcache_init(&c, nkv, hd, B, f32, pos0 + n_q);
    void **tab = live_table(&c, pos0, window);
    float *Q = malloc(sizeof(float) * n_q * W), *full = malloc(sizeof(float) * n_q * W),
          *part = malloc(sizeof(float) * n_q * W), *one = malloc(sizeof(float) * W);
    for (int i = 0; i < n_q * W; i++) Q[i] = frand();
    float scale = 1.0f / sqrtf((float)hd);
    for (int g = 0; g < nkv; g++) {
        kern_attn_kv kv = tcache_kv(&c, tab, g);
        kern_attn_q a = qview(Q, full, W, hd, G, g, 0, n_q, 0, G, pos0, window);
        kern_attn(&kv, &a, hd, scale);
        /* chunks [0,5) [5,6) [6,33), heads split in two */
        static const int cut[] = {0, 5, 6, 33};
        for (int k = 0; k < 3; k++)
            for (int hh = 0; hh < 2; hh++) {
                int h0 = hh * G / 2, h1 = (hh + 1) * G / 2;
                if (h1 == h0) continue;
                a = qview(Q, part, W, hd, G, g, cut[k], cut[k + 1] - cut[k], h0, h1 - h0, pos0,
                          window);
                kern_attn(&kv, &a, hd, scale);
            }
        for (int t = 0; t < n_q; t += 4)
            for (int h = 0; h < G; h++) {
                /* token t alone, as a 1-token call at position pos0 + t */
                kern_attn_q s =
                    qview(Q + (size_t)t * W, one, W, hd, G, g, 0, 1, h, 1, pos0 + t, window);
                kern_attn(&kv, &s, hd, scale);
                size_t off = (size_t)t * W + (size_t)(g * G + h) * hd;
                PT_ASSERT_MSG(
                    memcmp(one + (size_t)(g * G + h) * hd, full + off, sizeof(float) * hd) == 0,
                    "G %d hd %d B %d f32 %d window %d: token %d head %d alone differs", G, hd, B,
                    f32, window, t, g * G + h);
            }
    }
    PT_ASSERT_MSG(memcmp(part, full, sizeof(float) * n_q * W) == 0,
                  "G %d hd %d B %d f32 %d window %d: chunked call differs", G, hd, B, f32, window);
    free(Q), free(full), free(part), free(one), free(tab);
    tcache_free(&c);
}

PT_TEST(attn_bits_invariant_to_token_and_head_grouping) {
    for (int f32 = 0; f32 < 2; f32++) {
        check_invariance(4, 64, 16, f32, 0);
        check_invariance(16, 128, 1, f32, 0); /* 528 pairs: several tiles */
        check_invariance(1, 32, 16, f32, 5);
        check_invariance(4, 64, 16, f32, 40);
        check_invariance(4, 40, 3, f32, 0); /* head_dim % 8 != 0 */
    }
}

/* ---- backend level: eng_kv layout, several descriptors, thread pool ----- */

typedef struct bseq {
    int layer, n_q, pos0; /* descriptor */
    void **blocks;        /* block table */
    int n_blocks;         /* entries */
} bseq;

/* Double-precision textbook attention in engine terms (eng_kv_layer_*). */
static void ref_engine(const eng_kv_layout *l, const eng_config *c, const eng_attn_desc *d,
                       float scale, int h, int t, double *out) {
    int hd = l->head_dim, nkv = l->n_head_kv, g = h / (c->n_head / nkv), B = l->block_tokens;
    int p = d->pos0 + t, lo = lo_of(p, d->window), n = p - lo + 1;
    const float *q = d->q + (size_t)t * d->ldq + (size_t)h * hd;
    double *s = malloc(sizeof(double) * n), mx = -INFINITY, sum = 0;
    for (int k = lo; k <= p; k++) {
        void *blk = d->blocks[k / B];
        size_t ro = ((size_t)(k % B) * nkv + g) * hd;
        double dot = 0;
        for (int i = 0; i < hd; i++)
            dot += (double)q[i] *
                   (l->kv_fp32
                        ? ((float *)eng_kv_layer_k(l, blk, d->layer))[ro + i]
                        : ((int8_t *)eng_kv_layer_k(l, blk, d->layer))[ro + i] *
                              (double)eng_kv_layer_kscale(
                                  l, blk,
                                  d->layer)[((k % B) * nkv + g) * l->k_scales + i / l->k_group]);
        s[k - lo] = dot * scale;
        if (s[k - lo] > mx) mx = s[k - lo];
    }
    for (int i = 0; i < hd; i++) out[i] = 0;
    for (int k = lo; k <= p; k++) {
        void *blk = d->blocks[k / B];
        size_t ro = ((size_t)(k % B) * nkv + g) * hd;
        double w = exp(s[k - lo] - mx);
        sum += w;
        for (int i = 0; i < hd; i++)
            out[i] +=
                w * (l->kv_fp32
                         ? ((float *)eng_kv_layer_v(l, blk, d->layer))[ro + i]
                         : ((int8_t *)eng_kv_layer_v(l, blk, d->layer))[ro + i] *
                               (double)eng_kv_layer_vscale(l, blk, d->layer)[(k % B) * nkv + g]);
    }
    for (int i = 0; i < hd; i++) out[i] /= sum;
    free(s);
}

static void check_backend(int f32) {
    eng_config c;
    memset(&c, 0, sizeof c);
    c.n_layer = 3, c.n_head = 8, c.n_head_kv = 2, c.head_dim = 64;
    int win[3] = {0, 5, 5}, src[3] = {0, 1, 2};
    memcpy(c.window, win, sizeof win);
    memcpy(c.kv_src, src, sizeof src);
    eng_kv_layout l;
    char err[128];
    PT_EQ_INT(eng_kv_layout_init_ex(&l, &c, 16, f32, err, sizeof err), 0);
    int hd = 64, nq = c.n_head * hd, ldq = nq + 2 * c.n_head_kv * hd;
    bseq seqs[4] = {
        {0, 19, 0, NULL, 0}, {2, 3, 30, NULL, 0}, {0, 1, 50, NULL, 0}, {2, 1, 17, NULL, 0}};
    eng_attn_desc d[4];
    int rows = 0;
    for (int i = 0; i < 4; i++) rows += seqs[i].n_q;
    float *Q = malloc(sizeof(float) * rows * ldq), *O1 = calloc((size_t)rows * nq, sizeof(float)),
          *O3 = calloc((size_t)rows * nq, sizeof(float)),
          *Oa = calloc((size_t)rows * nq, sizeof(float));
    for (int i = 0; i < rows * ldq; i++) Q[i] = frand();
    for (int i = 0, r = 0; i < 4; r += seqs[i].n_q, i++) {
        bseq *s = &seqs[i];
        int keys = s->pos0 + s->n_q, kind = l.layer_kind[s->layer], w = c.window[s->layer];
        s->n_blocks = (keys + 15) / 16;
        s->blocks = calloc((size_t)s->n_blocks, sizeof *s->blocks);
        for (int b = 0; b < s->n_blocks; b++) {
            if ((b + 1) * 16 <= lo_of(s->pos0, w)) continue; /* dead: left NULL */
            void *blk = s->blocks[b] = malloc(l.block_bytes[kind]);
            size_t n = (size_t)16 * c.n_head_kv * hd;
            fill_rows(eng_kv_layer_k(&l, blk, s->layer), n, f32);
            fill_rows(eng_kv_layer_v(&l, blk, s->layer), n, f32);
            if (!f32) {
                fill_scales(eng_kv_layer_kscale(&l, blk, s->layer),
                            (size_t)16 * c.n_head_kv * l.k_scales);
                fill_scales(eng_kv_layer_vscale(&l, blk, s->layer), (size_t)16 * c.n_head_kv);
            }
        }
        d[i] = (eng_attn_desc){.q = Q + (size_t)r * ldq,
                               .ldq = ldq,
                               .out = O3 + (size_t)r * nq,
                               .ldo = nq,
                               .n_q = s->n_q,
                               .pos0 = s->pos0,
                               .window = w,
                               .blocks = s->blocks,
                               .layer = s->layer};
    }
    kern_pool *pool;
    PT_EQ_INT(kern_pool_create(3, &pool), 0);
    eng_backend b3, b1;
    PT_EQ_INT(eng_backend_cpu_create(&b3, pool, NULL, 0), 0);
    PT_EQ_INT(eng_backend_cpu_create(&b1, NULL, NULL, 0), 0);
    eng_attn_shape shape = {.kv = &l, .n_head = c.n_head, .scale = 0.125f};
    b3.attention(b3.ctx, &shape, d, 4);

    /* close to the double-precision reference (over the queries the
     * kernel sees: rounded to int8 on the AVX-512 path) */
    double ref[64];
    kern_attn_kv probe = {.f32 = f32, .k_group = l.k_group};
    float *Qr = kern_attn_uses_q8(&probe, hd) ? round_queries(Q, rows * ldq / hd, hd, hd) : NULL;
    for (int i = 0; i < 4; i++)
        for (int t = 0; t < d[i].n_q; t++)
            for (int h = 0; h < c.n_head; h++) {
                eng_attn_desc dr = d[i];
                if (Qr) dr.q = Qr + (d[i].q - Q);
                ref_engine(&l, &c, &dr, shape.scale, h, t, ref);
                const float *o = d[i].out + (size_t)t * nq + (size_t)h * hd;
                for (int k = 0; k < hd; k++) PT_NEAR(o[k], ref[k], 1e-5 * (1 + fabs(ref[k])));
            }
    free(Qr);
    /* 1 thread: same bits */
    for (int i = 0; i < 4; i++) d[i].out = O1 + (d[i].out - O3);
    b1.attention(b1.ctx, &shape, d, 4);
    PT_EQ_MEM(O1, O3, sizeof(float) * rows * nq);
    /* each descriptor alone on the pool (decode ones get their heads split) */
    for (int i = 0; i < 4; i++) {
        eng_attn_desc one = d[i];
        one.out = Oa + (d[i].out - O1);
        b3.attention(b3.ctx, &shape, &one, 1);
    }
    PT_EQ_MEM(Oa, O3, sizeof(float) * rows * nq);

    eng_backend_free(&b3);
    eng_backend_free(&b1);
    kern_pool_destroy(pool);
    for (int i = 0; i < 4; i++) {
        for (int b = 0; b < seqs[i].n_blocks; b++) free(seqs[i].blocks[b]);
        free(seqs[i].blocks);
    }
    free(Q), free(O1), free(O3), free(Oa);
}

PT_TEST(backend_attention_threads_and_batches) {
    check_backend(0);
    check_backend(1);
}
