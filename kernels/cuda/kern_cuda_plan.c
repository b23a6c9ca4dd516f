/*
 * kern_cuda_plan.c -- the CUDA backend's launch-shape choices and KV
 * geometry (kern_cuda_plan.h); plain C, no CUDA.
 */
#include "kern_cuda_plan.h"

int kern_cuda_attn_plan_make(kern_cuda_attn_plan *p, int n_items, int n_head, int n_head_kv,
                             int head_dim, int k_scales, int kv_f32, int max_keys, int n_sm) {
    if (n_items < 1 || n_head < 1 || n_head_kv < 1 || n_head % n_head_kv != 0 || head_dim < 4 ||
        head_dim % 4 != 0 || head_dim > KERN_CUDA_ATTN_MAX_HD)
        return KERN_CUDA_EINVAL;
    if (!kv_f32 && (k_scales < 1 || head_dim % k_scales != 0)) return KERN_CUDA_EINVAL;
    int G = n_head / n_head_kv;
    p->chunk = kv_f32 ? 16 : 32;
    p->head_chunks = (G + KERN_CUDA_ATTN_MAX_WARPS - 1) / KERN_CUDA_ATTN_MAX_WARPS;
    p->heads_per_block = (G + p->head_chunks - 1) / p->head_chunks;
    if (kv_f32) {
        p->k_stride = (head_dim + 1) * 4; /* odd word stride: lanes (keys) hit distinct banks */
    } else {
        int words = head_dim / 4;
        p->k_stride = (words % 2 ? words : words + 1) * 4;
    }
    long base = (long)n_items * n_head_kv * p->head_chunks;
    long want = (long)KERN_CUDA_ATTN_WAVES * (n_sm > 0 ? n_sm : 1);
    p->n_split = 1;
    if (base < want) {
        long n = (want + base - 1) / base;
        long by_keys = max_keys / KERN_CUDA_ATTN_MIN_SPLIT_KEYS;
        if (n > by_keys) n = by_keys;
        if (n > KERN_CUDA_ATTN_MAX_SPLIT) n = KERN_CUDA_ATTN_MAX_SPLIT;
        p->n_split = n > 1 ? (int)n : 1;
    }
    kern_cuda_attn_smem s = kern_cuda_attn_smem_layout(p->chunk, p->k_stride, head_dim, kv_f32,
                                                       k_scales, p->heads_per_block);
    p->smem = (size_t)s.total;
    return 0;
}

size_t kern_cuda_attn_ws_floats(const kern_cuda_attn_plan *p, int n_items, int n_head,
                                int head_dim) {
    if (p->n_split <= 1) return 0;
    return (size_t)n_items * n_head * p->n_split * (size_t)(head_dim + 2);
}

kern_cuda_kvgeo kern_cuda_kvgeo_make(int B, int nkv, int hd, int f32, int k_group,
                                     size_t layer_offset) {
    kern_cuda_kvgeo g = {0};
    size_t es = f32 ? 4 : 1;
    g.B = B;
    g.nkv = nkv;
    g.hd = hd;
    g.f32 = f32 ? 1 : 0;
    g.k_group = f32 ? hd : k_group;
    g.k_scales = f32 ? 1 : hd / k_group;
    g.row_bytes = (size_t)nkv * hd * es;
    g.k_off = layer_offset;
    g.v_off = layer_offset + (size_t)B * g.row_bytes;
    if (!f32) {
        g.ks_off = layer_offset + 2 * (size_t)B * g.row_bytes;
        g.vs_off = g.ks_off + (size_t)B * nkv * g.k_scales * sizeof(float);
    }
    return g;
}

int kern_cuda_gemm_pick(int M, int N, int K) {
    (void)N;
    (void)K;
    return M <= KERN_CUDA_GEMV_MAX_M ? KERN_CUDA_GEMM_GEMV : KERN_CUDA_GEMM_LT;
}

int kern_cuda_gemm_inplace(int N, int ldc, uintptr_t c_addr) {
    return N % 4 == 0 && ldc >= N && ldc % 4 == 0 && c_addr % 16 == 0;
}

kern_cuda_rows kern_cuda_rows_shape(int n) {
    kern_cuda_rows r;
    if (n <= 1024) {
        r.warp_rows = 1;
        r.rows_per_block = 4;
        r.threads = 128;
    } else {
        r.warp_rows = 0;
        r.rows_per_block = 1;
        r.threads = 256;
    }
    return r;
}
