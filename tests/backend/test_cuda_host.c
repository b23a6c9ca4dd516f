/*
 * test_cuda_host.c -- the CUDA backend's pure host-side logic, on the CPU
 * (no GPU, no toolkit: parley_cuda_host):
 *   tier_*   the device KV tier's slot table (kern_cuda_tier.h): hits,
 *            misses, LRU eviction order, pins per call, dirty copies,
 *            invalidation, capacity, and a random run against a plain
 *            list model of LRU
 *   plan_*   launch shapes and block-table math (kern_cuda_plan.h): key
 *            ranges and their splits, the blocks a step attends, the
 *            attention split choice and shared-memory budget, the KV
 *            geometry against eng_kv.h's helpers, GEMM path and padding
 *   fold_*   per-channel scale folding (kern_cuda_fold.h) against the
 *            dequantised floats, and the error of the device's W8A8 form
 *            (per-token activations, folded weights) next to the CPU's
 *            (32-value blocks both sides), measured on the same data
 */
#define PTEST_MAIN
#include "ptest.h"

#include "eng_config.h"
#include "eng_kv.h"
#include "kern_cuda_fold.h"
#include "kern_cuda_plan.h"
#include "kern_cuda_tier.h"
#include "kern_gemm.h"
#include "kern_ops.h"

/* ---- tier ---------------------------------------------------------------------------------- */

static void *key(long i) { return (void *)(uintptr_t)(0x100000 + i * 4096); }

PT_TEST(tier_hits_misses_fresh_slots) {
    kern_cuda_tier *t;
    PT_EQ_INT(kern_cuda_tier_create(&t, 4), 0);
    kern_cuda_tier_ref r;
    for (int i = 0; i < 4; i++) {
        PT_EQ_INT(kern_cuda_tier_get(t, key(i), 1, &r), 0);
        PT_EQ_INT(r.hit, 0);
        PT_EQ_INT(r.slot, i); /* fresh slots in order */
        PT_ASSERT(r.evicted == NULL);
    }
    for (int i = 0; i < 4; i++) {
        PT_EQ_INT(kern_cuda_tier_get(t, key(i), 1, &r), 0);
        PT_EQ_INT(r.hit, 1);
        PT_EQ_INT(r.slot, i);
    }
    PT_EQ_INT(kern_cuda_tier_get(t, key(2), 0, &r), 0); /* uncounted */
    kern_cuda_tier_stats st;
    kern_cuda_tier_stats_get(t, &st);
    PT_EQ_INT(st.lookups, 8);
    PT_EQ_INT(st.hits, 4);
    PT_EQ_INT(st.misses, 4);
    PT_EQ_INT(st.resident, 4);
    PT_EQ_INT(st.capacity, 4);
    PT_EQ_INT(st.slots_touched, 4);
    PT_EQ_INT(kern_cuda_tier_find(t, key(3)), 3);
    PT_EQ_INT(kern_cuda_tier_find(t, key(9)), -1);
    kern_cuda_tier_destroy(t);
    PT_EQ_INT(kern_cuda_tier_create(&t, 0), KERN_CUDA_EINVAL);
}

PT_TEST(tier_lru_eviction_order) {
    kern_cuda_tier *t;
    kern_cuda_tier_ref r;
    PT_EQ_INT(kern_cuda_tier_create(&t, 3), 0);
    for (int i = 0; i < 3; i++) kern_cuda_tier_get(t, key(i), 1, &r); /* LRU: 0 1 2 */
    kern_cuda_tier_end_call(t);
    kern_cuda_tier_get(t, key(0), 1, &r); /* 1 2 0 */
    kern_cuda_tier_end_call(t);
    PT_EQ_INT(kern_cuda_tier_get(t, key(3), 1, &r), 0);
    PT_ASSERT(r.evicted == key(1));
    PT_EQ_INT(r.slot, 1); /* the victim's slot */
    PT_EQ_INT(r.hit, 0);
    kern_cuda_tier_end_call(t);
    PT_EQ_INT(kern_cuda_tier_get(t, key(4), 1, &r), 0); /* 2 0 3 -> evicts 2 */
    PT_ASSERT(r.evicted == key(2));
    PT_EQ_INT(kern_cuda_tier_find(t, key(1)), -1);
    PT_EQ_INT(kern_cuda_tier_find(t, key(2)), -1);
    kern_cuda_tier_stats st;
    kern_cuda_tier_stats_get(t, &st);
    PT_EQ_INT(st.evictions, 2);
    PT_EQ_INT(st.resident, 3);
    PT_EQ_INT(kern_cuda_tier_generation(t), 2);
    kern_cuda_tier_destroy(t);
}

PT_TEST(tier_pins_per_call) {
    kern_cuda_tier *t;
    kern_cuda_tier_ref r;
    PT_EQ_INT(kern_cuda_tier_create(&t, 2), 0);
    kern_cuda_tier_get(t, key(0), 1, &r);
    kern_cuda_tier_get(t, key(1), 1, &r);
    PT_EQ_INT(kern_cuda_tier_get(t, key(2), 1, &r), KERN_CUDA_TIER_FULL); /* both pinned */
    kern_cuda_tier_stats st;
    kern_cuda_tier_stats_get(t, &st);
    PT_EQ_INT(st.lookups, 2); /* the refused get changed nothing */
    PT_EQ_INT(st.resident, 2);
    PT_EQ_INT(kern_cuda_tier_get(t, key(1), 1, &r), 0); /* a hit needs no room */
    kern_cuda_tier_end_call(t);
    kern_cuda_tier_get(t, key(0), 1, &r); /* pins 0 in the new call; 1 is the LRU */
    PT_EQ_INT(kern_cuda_tier_get(t, key(2), 1, &r), 0);
    PT_ASSERT(r.evicted == key(1));
    PT_EQ_INT(kern_cuda_tier_get(t, key(3), 1, &r), KERN_CUDA_TIER_FULL);
    kern_cuda_tier_destroy(t);
}

PT_TEST(tier_dirty_is_not_evicted) {
    kern_cuda_tier *t;
    kern_cuda_tier_ref r;
    PT_EQ_INT(kern_cuda_tier_create(&t, 2), 0);
    kern_cuda_tier_get(t, key(0), 0, &r);
    kern_cuda_tier_mark_dirty(t, r.slot);
    kern_cuda_tier_mark_dirty(t, r.slot); /* twice is once */
    PT_ASSERT(kern_cuda_tier_is_dirty(t, r.slot));
    kern_cuda_tier_get(t, key(1), 0, &r);
    kern_cuda_tier_end_call(t);
    PT_EQ_INT(kern_cuda_tier_get(t, key(2), 1, &r), KERN_CUDA_TIER_DIRTY);
    PT_EQ_INT(kern_cuda_tier_find(t, key(0)), 0);
    kern_cuda_tier_clean_all(t);
    PT_ASSERT(!kern_cuda_tier_is_dirty(t, 0));
    PT_EQ_INT(kern_cuda_tier_get(t, key(2), 1, &r), 0);
    PT_ASSERT(r.evicted == key(0));
    kern_cuda_tier_destroy(t);
}

PT_TEST(tier_invalidate) {
    kern_cuda_tier *t;
    kern_cuda_tier_ref r;
    int dirty = -1;
    PT_EQ_INT(kern_cuda_tier_create(&t, 3), 0);
    for (int i = 0; i < 3; i++) kern_cuda_tier_get(t, key(i), 1, &r);
    kern_cuda_tier_mark_dirty(t, 1);
    uint64_t gen = kern_cuda_tier_generation(t);
    PT_EQ_INT(kern_cuda_tier_invalidate(t, key(1), &dirty), 1);
    PT_EQ_INT(dirty, 1);
    PT_EQ_INT(kern_cuda_tier_invalidate(t, key(1), &dirty), 0);
    PT_EQ_INT(dirty, 0);
    PT_ASSERT(kern_cuda_tier_generation(t) == gen + 1);
    PT_EQ_INT(kern_cuda_tier_find(t, key(1)), -1);
    kern_cuda_tier_end_call(t);
    PT_EQ_INT(kern_cuda_tier_get(t, key(7), 1, &r), 0); /* the freed slot, no eviction */
    PT_EQ_INT(r.slot, 1);
    PT_ASSERT(r.evicted == NULL);
    PT_ASSERT(!kern_cuda_tier_is_dirty(t, 1)); /* a new copy is clean */
    kern_cuda_tier_mark_dirty(t, 1);
    kern_cuda_tier_clean_all(t); /* the list holds slot 1 once */
    PT_ASSERT(!kern_cuda_tier_is_dirty(t, 1));
    kern_cuda_tier_stats st;
    kern_cuda_tier_stats_get(t, &st);
    PT_EQ_INT(st.invalidations, 1);
    PT_EQ_INT(st.evictions, 0);
    PT_EQ_INT(st.resident, 3);
    kern_cuda_tier_destroy(t);
}

/* Random gets / invalidations against a list model: most recent first. */
PT_TEST(tier_random_vs_list_model) {
    enum { CAP = 37, KEYS = 200, OPS = 20000 };
    kern_cuda_tier *t;
    PT_EQ_INT(kern_cuda_tier_create(&t, CAP), 0);
    long lru[CAP], n = 0, slot_of[KEYS];
    for (int i = 0; i < KEYS; i++) slot_of[i] = -1;
    uint64_t evictions = 0;
    for (int op = 0; op < OPS; op++) {
        long k = (long)(pt_rand() % KEYS);
        /* keys 1 MiB apart collide in the low bits the hash must mix */
        void *kp = (void *)(uintptr_t)(0x10000000 + (uintptr_t)k * (1u << 20));
        if (pt_rand() % 8 == 0) {
            int in = slot_of[k] >= 0, was = kern_cuda_tier_invalidate(t, kp, NULL);
            PT_EQ_INT(was, in);
            if (in) {
                long j = 0;
                while (lru[j] != k) j++;
                memmove(lru + j, lru + j + 1, (size_t)(n - j - 1) * sizeof *lru);
                n--;
                slot_of[k] = -1;
            }
            continue;
        }
        kern_cuda_tier_ref r;
        PT_EQ_INT(kern_cuda_tier_get(t, kp, 1, &r), 0);
        kern_cuda_tier_end_call(t); /* one block per call: nothing stays pinned */
        if (slot_of[k] >= 0) {
            PT_EQ_INT(r.hit, 1);
            PT_EQ_INT(r.slot, slot_of[k]);
            long j = 0;
            while (lru[j] != k) j++;
            memmove(lru + 1, lru, (size_t)j * sizeof *lru);
        } else {
            PT_EQ_INT(r.hit, 0);
            if (n == CAP) { /* the model's LRU entry must be the one evicted */
                long v = lru[--n];
                PT_ASSERT(r.evicted == (void *)(uintptr_t)(0x10000000 + (uintptr_t)v * (1u << 20)));
                PT_EQ_INT(r.slot, slot_of[v]);
                slot_of[v] = -1;
                evictions++;
            } else {
                PT_ASSERT(r.evicted == NULL);
            }
            memmove(lru + 1, lru, (size_t)n * sizeof *lru);
            n++;
            for (int i = 0; i < KEYS; i++) PT_ASSERT(slot_of[i] != r.slot);
            slot_of[k] = r.slot;
        }
        lru[0] = k;
    }
    for (int i = 0; i < KEYS; i++) {
        void *kp = (void *)(uintptr_t)(0x10000000 + (uintptr_t)i * (1u << 20));
        PT_EQ_INT(kern_cuda_tier_find(t, kp), slot_of[i]);
    }
    kern_cuda_tier_stats st;
    kern_cuda_tier_stats_get(t, &st);
    PT_EQ_INT(st.resident, n);
    PT_EQ_INT(st.evictions, evictions);
    PT_ASSERT(st.slots_touched <= CAP);
    kern_cuda_tier_destroy(t);
}

/* ---- plan ---------------------------------------------------------------------------------- */

PT_TEST(plan_key_range_and_blocks) {
    int lo, hi, f, l;
    kern_cuda_key_range(10, 0, &lo, &hi);
    PT_EQ_INT(lo, 0);
    PT_EQ_INT(hi, 10);
    kern_cuda_key_range(10, 4, &lo, &hi);
    PT_EQ_INT(lo, 7); /* the last 4 keys, itself included */
    kern_cuda_key_range(2, 4, &lo, &hi);
    PT_EQ_INT(lo, 0);
    /* the blocks a step attends, against every key of every query */
    for (int it = 0; it < 2000; it++) {
        int B = 1 + (int)(pt_rand() % 33), pos0 = (int)(pt_rand() % 300);
        int nq = 1 + (int)(pt_rand() % 40), win = pt_rand() % 3 ? 0 : 1 + (int)(pt_rand() % 64);
        kern_cuda_blocks_for(pos0, nq, win, B, &f, &l);
        int bf = 1 << 30, bl = -1;
        for (int t = 0; t < nq; t++) {
            kern_cuda_key_range(pos0 + t, win, &lo, &hi);
            for (int k = lo; k <= hi; k++) {
                if (k / B < bf) bf = k / B;
                if (k / B > bl) bl = k / B;
            }
        }
        PT_EQ_INT(f, bf);
        PT_EQ_INT(l, bl);
    }
}

PT_TEST(plan_split_ranges_cover_keys) {
    for (int it = 0; it < 3000; it++) {
        int chunk = pt_rand() % 2 ? 32 : 16;
        int lo = (int)(pt_rand() % 500), hi = lo + (int)(pt_rand() % 3000);
        int n = 1 + (int)(pt_rand() % 32);
        int next = lo;
        for (int s = 0; s < n; s++) {
            int a, b;
            kern_cuda_split_range(lo, hi, n, s, chunk, &a, &b);
            if (a > b) continue; /* empty split */
            PT_EQ_INT(a, next);  /* contiguous, in order */
            PT_ASSERT(b <= hi);
            if (a != lo) PT_EQ_INT(a % chunk, 0); /* chunk-aligned starts */
            next = b + 1;
        }
        PT_EQ_INT(next, hi + 1);
    }
}

PT_TEST(plan_attention_shapes) {
    kern_cuda_attn_plan p;
    /* llama-1b decode, batch 1, 2048 keys, 132 SMs: 8 blocks -> split the keys */
    PT_EQ_INT(kern_cuda_attn_plan_make(&p, 1, 32, 8, 64, 2, 0, 2048, 132), 0);
    PT_EQ_INT(p.chunk, 32);
    PT_EQ_INT(p.head_chunks, 1);
    PT_EQ_INT(p.heads_per_block, 4);
    PT_EQ_INT(p.n_split, 2048 / KERN_CUDA_ATTN_MIN_SPLIT_KEYS);
    PT_EQ_INT(kern_cuda_attn_ws_floats(&p, 1, 32, 64), 1 * 32 * p.n_split * 66);
    /* short contexts are not split */
    PT_EQ_INT(kern_cuda_attn_plan_make(&p, 1, 32, 8, 64, 2, 0, 100, 132), 0);
    PT_EQ_INT(p.n_split, 1);
    PT_EQ_INT(kern_cuda_attn_ws_floats(&p, 1, 32, 64), 0);
    /* prefill: enough blocks without splitting */
    PT_EQ_INT(kern_cuda_attn_plan_make(&p, 512, 32, 8, 64, 2, 0, 512, 132), 0);
    PT_EQ_INT(p.n_split, 1);
    /* batch 64 decode of long contexts fills the GPU by sequences */
    PT_EQ_INT(kern_cuda_attn_plan_make(&p, 64, 32, 8, 64, 2, 0, 8192, 132), 0);
    PT_EQ_INT(p.n_split, 1);
    /* a long single sequence: at most KERN_CUDA_ATTN_MAX_SPLIT */
    PT_EQ_INT(kern_cuda_attn_plan_make(&p, 1, 4, 1, 256, 8, 0, 1 << 20, 132), 0);
    PT_EQ_INT(p.n_split, KERN_CUDA_ATTN_MAX_SPLIT);
    /* cai-1b: 16 heads over one KV head -> two blocks of 8 warps */
    PT_EQ_INT(kern_cuda_attn_plan_make(&p, 7, 16, 1, 128, 4, 0, 64, 132), 0);
    PT_EQ_INT(p.head_chunks, 2);
    PT_EQ_INT(p.heads_per_block, 8);
    PT_EQ_INT(kern_cuda_attn_plan_make(&p, 7, 9, 1, 128, 4, 0, 64, 132), 0);
    PT_EQ_INT(p.head_chunks, 2);
    PT_EQ_INT(p.heads_per_block, 5);
    /* shapes the kernel refuses */
    PT_EQ_INT(kern_cuda_attn_plan_make(&p, 1, 8, 3, 64, 2, 0, 10, 132), KERN_CUDA_EINVAL);
    PT_EQ_INT(kern_cuda_attn_plan_make(&p, 1, 8, 1, 512, 16, 0, 10, 132), KERN_CUDA_EINVAL);
    PT_EQ_INT(kern_cuda_attn_plan_make(&p, 1, 8, 1, 66, 1, 0, 10, 132), KERN_CUDA_EINVAL);
    PT_EQ_INT(kern_cuda_attn_plan_make(&p, 0, 8, 1, 64, 2, 0, 10, 132), KERN_CUDA_EINVAL);
    /* shared memory fits the default 48 KiB everywhere; K rows hit distinct banks */
    for (int hd = 4; hd <= KERN_CUDA_ATTN_MAX_HD; hd += 4)
        for (int f32 = 0; f32 <= 1; f32++) {
            int ks = hd % 32 == 0 ? hd / 32 : 1;
            PT_EQ_INT(kern_cuda_attn_plan_make(&p, 3, 64, 2, hd, ks, f32, 5000, 132), 0);
            PT_ASSERT_MSG(p.smem <= 48 * 1024, "hd %d f32 %d: %zu bytes", hd, f32, p.smem);
            PT_EQ_INT(p.k_stride % 4, 0);
            PT_EQ_INT((p.k_stride / 4) % 2, 1);
            PT_ASSERT(p.k_stride >= hd * (f32 ? 4 : 1));
        }
}

/* kern_cuda_kvgeo_make restates eng_kv.h's layout: compare on real layouts. */
PT_TEST(plan_kv_geometry_matches_eng_kv) {
    static const int shapes[][3] = {{1, 256, 18}, {8, 64, 16}, {1, 128, 24}, {2, 80, 5}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int f32 = 0; f32 <= 1; f32++) {
            eng_config c;
            memset(&c, 0, sizeof c);
            c.n_layer = shapes[s][2];
            c.n_head_kv = shapes[s][0];
            c.head_dim = shapes[s][1];
            for (int i = 0; i < c.n_layer; i++) {
                c.window[i] = i % 3 ? 512 : 0;
                c.kv_src[i] = i % 2 && c.window[i] && c.window[i - 1] ? i - 1 : i;
            }
            eng_kv_layout l;
            char err[256];
            PT_EQ_INT(eng_kv_layout_init_ex(&l, &c, 16, f32, err, sizeof err), 0);
            if (!f32)
                PT_EQ_INT(kern_cuda_kv_token_bytes(l.n_head_kv, l.head_dim, 0, l.k_scales),
                          eng_kv_token_bytes(l.n_head_kv, l.head_dim));
            PT_EQ_INT(kern_cuda_kv_token_bytes(l.n_head_kv, l.head_dim, f32, l.k_scales) * 16,
                      l.layer_bytes);
            char *blk = (char *)0x1000;
            for (int i = 0; i < c.n_layer; i++) {
                kern_cuda_kvgeo g = kern_cuda_kvgeo_make(16, l.n_head_kv, l.head_dim, f32,
                                                         l.k_group, l.layer_offset[i]);
                PT_EQ_INT(g.k_off, (char *)eng_kv_layer_k(&l, blk, i) - blk);
                PT_EQ_INT(g.v_off, (char *)eng_kv_layer_v(&l, blk, i) - blk);
                if (!f32) {
                    PT_EQ_INT(g.ks_off, (char *)eng_kv_layer_kscale(&l, blk, i) - blk);
                    PT_EQ_INT(g.vs_off, (char *)eng_kv_layer_vscale(&l, blk, i) - blk);
                    PT_EQ_INT(g.k_scales, l.k_scales);
                }
            }
        }
}

PT_TEST(plan_gemm_and_rows) {
    PT_EQ_INT(kern_cuda_gemm_pick(1, 2048, 2048), KERN_CUDA_GEMM_GEMV);
    PT_EQ_INT(kern_cuda_gemm_pick(KERN_CUDA_GEMV_MAX_M, 64, 64), KERN_CUDA_GEMM_GEMV);
    PT_EQ_INT(kern_cuda_gemm_pick(KERN_CUDA_GEMV_MAX_M + 1, 64, 64), KERN_CUDA_GEMM_LT);
    PT_EQ_INT(kern_cuda_pad_k(640), 640);
    PT_EQ_INT(kern_cuda_pad_k(641), 656);
    PT_EQ_INT(kern_cuda_pad_n(262144), 262144);
    PT_EQ_INT(kern_cuda_pad_n(1537), 1540);
    PT_EQ_INT(kern_cuda_gemm_inplace(2048, 2048, 0x1000), 1);
    PT_EQ_INT(kern_cuda_gemm_inplace(2048, 2048, 0x1004), 0); /* 16-byte alignment */
    PT_EQ_INT(kern_cuda_gemm_inplace(2046, 2048, 0x1000), 0); /* N not a multiple of 4 */
    PT_EQ_INT(kern_cuda_gemm_inplace(2048, 2050, 0x1000), 0); /* ldc */
    kern_cuda_rows r = kern_cuda_rows_shape(640);
    PT_EQ_INT(r.warp_rows, 1);
    PT_EQ_INT(r.threads, 32 * r.rows_per_block);
    r = kern_cuda_rows_shape(2048);
    PT_EQ_INT(r.warp_rows, 0);
    PT_EQ_INT(r.rows_per_block, 1);
    PT_EQ_INT(r.threads % 32, 0);
}

/* ---- fold ---------------------------------------------------------------------------------- */

/* A normal deviate (Box-Muller) from pt_rand. */
static double gauss(void) {
    double u = ((double)(pt_rand() >> 11) + 0.5) / 9007199254740992.0;
    double v = ((double)(pt_rand() >> 11) + 0.5) / 9007199254740992.0;
    return sqrt(-2 * log(u)) * cos(6.283185307179586 * v);
}

/* An fp16-representable scale near x (11 significant bits). */
static float f16ish(double x) {
    int e;
    double m = frexp(x, &e);
    return (float)ldexp(nearbyint(m * 2048) / 2048, e);
}

/* A Q8_0-like row: codes from a clipped normal (sigma 32), block scales
 * varying around base by up to 4x (fp16 values). */
static void q8_row(int cols, float base, int8_t *q, float *bs) {
    for (int k = 0; k < cols; k++) {
        double g = gauss() * 32;
        q[k] = (int8_t)(g > 127 ? 127 : g < -127 ? -127 : nearbyint(g));
    }
    for (int b = 0; b < cols / 32; b++)
        bs[b] = f16ish(base * pow(4.0, (double)(pt_rand() % 1000) / 1000 - 0.5));
}

PT_TEST(fold_b32_within_half_step) {
    enum { COLS = 512 };
    int8_t q[COLS], f[COLS];
    float bs[COLS / 32], v[COLS], s;
    for (int it = 0; it < 200; it++) {
        q8_row(COLS, 0.01f, q, bs);
        kern_cuda_dequant_b32(q, bs, COLS, v);
        for (int k = 0; k < COLS; k++) PT_ASSERT(v[k] == (float)q[k] * bs[k / 32]);
        PT_EQ_INT(kern_cuda_fold_row(v, COLS, f, &s), 0);
        float amax = 0;
        for (int k = 0; k < COLS; k++) amax = fabsf(v[k]) > amax ? fabsf(v[k]) : amax;
        PT_ASSERT(s == amax / 127.0f);
        for (int k = 0; k < COLS; k++) {
            PT_ASSERT(f[k] >= -127 && f[k] <= 127);
            PT_ASSERT_MSG(fabs((double)f[k] * s - v[k]) <= 0.5 * s * (1 + 1e-5),
                          "row %d col %d: %d * %g vs %g", it, k, f[k], s, v[k]);
        }
    }
    /* one scale for the whole row and a full-range code: folding changes nothing */
    for (int k = 0; k < COLS; k++) q[k] = (int8_t)(k % 255 - 127);
    for (int b = 0; b < COLS / 32; b++) bs[b] = 0.0078125f;
    kern_cuda_dequant_b32(q, bs, COLS, v);
    PT_EQ_INT(kern_cuda_fold_row(v, COLS, f, &s), 0);
    PT_EQ_MEM(f, q, COLS);
    PT_ASSERT(s == 0.0078125f);
}

PT_TEST(fold_edge_rows) {
    float v[64] = {0}, s = -1;
    int8_t q[64];
    PT_EQ_INT(kern_cuda_fold_row(v, 64, q, &s), 0); /* zeros: scale 0 */
    PT_ASSERT(s == 0);
    for (int k = 0; k < 64; k++) PT_EQ_INT(q[k], 0);
    v[3] = 1e-39f; /* denormal: 127 / max overflows -> a zero row, as the CPU */
    PT_EQ_INT(kern_cuda_fold_row(v, 64, q, &s), 0);
    PT_ASSERT(s == 0);
    v[3] = INFINITY;
    PT_EQ_INT(kern_cuda_fold_row(v, 64, q, &s), -1);
    v[3] = NAN;
    PT_EQ_INT(kern_cuda_fold_row(v, 64, q, &s), -1);
}

PT_TEST(fold_q4k_values) {
    enum { COLS = 512 };
    uint8_t u[COLS], sc[COLS / 32], mn[COLS / 32];
    float d[COLS / 256] = {0.0125f, 0.5f}, dmin[COLS / 256] = {0.003f, 0.25f}, v[COLS], s;
    int8_t f[COLS];
    for (int k = 0; k < COLS; k++) u[k] = (uint8_t)(pt_rand() % 16);
    for (int b = 0; b < COLS / 32; b++)
        sc[b] = (uint8_t)(pt_rand() % 64), mn[b] = (uint8_t)(pt_rand() % 64);
    kern_cuda_dequant_q4k(u, sc, mn, d, dmin, COLS, v);
    for (int k = 0; k < COLS; k++)
        PT_ASSERT(v[k] ==
                  d[k / 256] * (float)sc[k / 32] * (float)u[k] - dmin[k / 256] * (float)mn[k / 32]);
    PT_EQ_INT(kern_cuda_fold_row(v, COLS, f, &s), 0);
    for (int k = 0; k < COLS; k++) PT_ASSERT(fabs((double)f[k] * s - v[k]) <= 0.5 * s * (1 + 1e-5));
}

/* Relative RMS error of C against the fp64 reference R. */
static double rel_err(const float *C, const double *R, size_t n) {
    double e = 0, r = 0;
    for (size_t i = 0; i < n; i++) {
        e += (C[i] - R[i]) * (C[i] - R[i]);
        r += R[i] * R[i];
    }
    return sqrt(e / r);
}

/* The device's W8A8 (per-token activations, weights folded per channel)
 * next to the CPU's (32-value blocks both sides), against the float GEMM
 * of the dequantised weights: the measurement behind kern_cuda_fold.h. */
PT_TEST(fold_error_both_ways) {
    enum { N = 256, K = 2048, M = 16 };
    int8_t *q = malloc((size_t)N * K), *wf = malloc((size_t)N * K), *xq = malloc((size_t)M * K);
    float *bs = malloc((size_t)N * (K / 32) * sizeof(float)), *ws = malloc(N * sizeof(float));
    float *w = malloc((size_t)N * K * sizeof(float)), *x = malloc((size_t)M * K * sizeof(float));
    float *xs = malloc((size_t)M * (K / 32) * sizeof(float)), *C = malloc((size_t)M * N * 4);
    double *R = malloc((size_t)M * N * sizeof(double)), werr = 0, wref = 0;
    PT_ASSERT(q && wf && xq && bs && ws && w && x && xs && C && R);
    for (int n = 0; n < N; n++) {
        q8_row(K, 0.0005f, q + (size_t)n * K, bs + (size_t)n * (K / 32));
        kern_cuda_dequant_b32(q + (size_t)n * K, bs + (size_t)n * (K / 32), K, w + (size_t)n * K);
        PT_EQ_INT(kern_cuda_fold_row(w + (size_t)n * K, K, wf + (size_t)n * K, &ws[n]), 0);
        kern_cuda_fold_err(w + (size_t)n * K, wf + (size_t)n * K, ws[n], K, &werr, &wref);
    }
    printf("  weights: per-channel fold %.3f%% RMS error (blocks kept: 0%%)\n",
           100 * sqrt(werr / wref));
    PT_ASSERT(sqrt(werr / wref) < 0.02);
    for (int outliers = 0; outliers <= 1; outliers++) {
        for (int m = 0; m < M; m++)
            for (int k = 0; k < K; k++)
                x[(size_t)m * K + k] = (float)gauss() * (outliers && k % 512 == 7 ? 30.0f : 1.0f);
        for (int m = 0; m < M; m++)
            for (int n = 0; n < N; n++) {
                double a = 0;
                for (int k = 0; k < K; k++)
                    a += (double)x[(size_t)m * K + k] * w[(size_t)n * K + k];
                R[(size_t)m * N + n] = a;
            }
        /* CPU: 32-value activation blocks, block-scaled weights */
        kern_quantize_blocks_ref(M, K, x, K, xq, K, xs, K / 32);
        kern_gemm_i8_bs_ref(M, N, K, xq, xs, q, bs, C);
        double e_cpu = rel_err(C, R, (size_t)M * N);
        /* device: one scale per token row, folded weights, exact int32 sums */
        kern_quantize_rows_ref(M, K, x, K, xq, K, xs);
        for (int m = 0; m < M; m++)
            for (int n = 0; n < N; n++) {
                int32_t s = 0;
                for (int k = 0; k < K; k++) s += xq[(size_t)m * K + k] * wf[(size_t)n * K + k];
                C[(size_t)m * N + n] = (float)s * xs[m] * ws[n];
            }
        double e_dev = rel_err(C, R, (size_t)M * N);
        printf("  GEMM %s activations: CPU form %.3f%%, device form %.3f%% RMS error\n",
               outliers ? "outlier-channel" : "Gaussian", 100 * e_cpu, 100 * e_dev);
        PT_ASSERT(e_cpu < 0.05);
        PT_ASSERT(e_dev < (outliers ? 0.5 : 0.05));
    }
    free(q), free(wf), free(xq), free(bs), free(ws), free(w), free(x), free(xs), free(C), free(R);
}
