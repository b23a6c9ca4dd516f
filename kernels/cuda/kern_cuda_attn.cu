/*
 * kern_cuda_attn.cu -- the KV store and paged attention on the device
 * (kern_cuda.h; work split and shared-memory layout in kern_cuda_plan.h).
 *
 * kv_store.  One warp per (token, KV head): K quantised per k_group values
 * and V per head exactly as kern_quantize_rows_ref (max |x|, IEEE
 * 127 / max, round half to even, NaN -> -127), written into the block's
 * device copy and, when staging is given, into the token's staging bytes
 * (K row, V row, K scales, V scales) that the backend copies to the host
 * block later.  fp32 layouts copy the floats.
 *
 * Attention.  Grid (item, KV head x head chunk, split); a block's warps are
 * query heads sharing the KV head.  Keys go by chunks of plan.chunk
 * aligned to absolute positions: the block stages the chunk's K and V rows
 * (and scales) in shared memory with 4-byte loads, each warp then gives
 * lane j key j's score (q . k in fp32, K dequantised per group:
 * sum over a group of q * k, times the group's scale; times the call's
 * scale), updates its online softmax (running max m, sum l) and
 * accumulates p * v_scale * v into lane-owned output dims (d = lane +
 * 32 i).  With one split the block writes acc / l; with several it writes
 * (m, l, acc) and kc_attn_combine merges them:
 *   out = sum_s e^(m_s - M) acc_s / sum_s e^(m_s - M) l_s,  M = max_s m_s.
 * Every query attends at least itself, so M is finite and the sum > 0.
 */
#include <float.h>
#include <math.h>

#include "kern_cuda_int.cuh"

/* ---- kv_store ---------------------------------------------------------------------------- */

/* Quantise n values of src (lane-strided) into dq (and sq) with one scale into *ds (and *ss). */
__device__ void kc_quant_group(const float *src, int n, int8_t *dq, float *ds, int8_t *sq,
                               float *ss) {
    int lane = threadIdx.x & 31;
    float amax = 0;
    for (int i = lane; i < n; i += 32) amax = fmaxf(amax, fabsf(src[i]));
    amax = kc_warp_max(amax);
    float inv = __fdiv_rn(127.0f, amax);
    int zero = !(inv <= FLT_MAX);
    for (int i = lane; i < n; i += 32) {
        int8_t v = 0;
        if (!zero) {
            float r = rintf(__fmul_rn(src[i], inv));
            r = r > 127.0f ? 127.0f : !(r >= -127.0f) ? -127.0f : r;
            v = (int8_t)r;
        }
        dq[i] = v;
        if (sq) sq[i] = v;
    }
    if (lane == 0) {
        float s = zero ? 0.0f : __fdiv_rn(amax, 127.0f);
        *ds = s;
        if (ss) *ss = s;
    }
}

__global__ void kc_kv_store_kernel(kern_cuda_kvst k) {
    int t = blockIdx.x, h = blockIdx.y, lane = threadIdx.x;
    const kern_cuda_kvgeo g = k.g;
    kern_cuda_kvst_tok tk = k.tok[t];
    const float *kr = k.qkv + (size_t)tk.row * k.ld + k.col0 + (size_t)h * g.hd;
    const float *vr = kr + (size_t)g.nkv * g.hd;
    uint8_t *st =
        k.stage ? k.stage + (size_t)t * kern_cuda_kv_token_bytes(g.nkv, g.hd, g.f32, g.k_scales)
                : NULL;
    if (g.f32) {
        float *dk = (float *)(tk.blk + g.k_off + (size_t)tk.slot * g.row_bytes) + (size_t)h * g.hd;
        float *dv = (float *)(tk.blk + g.v_off + (size_t)tk.slot * g.row_bytes) + (size_t)h * g.hd;
        float *sk = st ? (float *)st + (size_t)h * g.hd : NULL;
        float *sv = st ? (float *)(st + g.row_bytes) + (size_t)h * g.hd : NULL;
        for (int i = lane; i < g.hd; i += 32) {
            dk[i] = kr[i];
            dv[i] = vr[i];
            if (st) sk[i] = kr[i], sv[i] = vr[i];
        }
        return;
    }
    int8_t *dk = (int8_t *)(tk.blk + g.k_off + (size_t)tk.slot * g.row_bytes) + (size_t)h * g.hd;
    int8_t *dv = (int8_t *)(tk.blk + g.v_off + (size_t)tk.slot * g.row_bytes) + (size_t)h * g.hd;
    float *dks = (float *)(tk.blk + g.ks_off) + ((size_t)tk.slot * g.nkv + h) * g.k_scales;
    float *dvs = (float *)(tk.blk + g.vs_off) + (size_t)tk.slot * g.nkv + h;
    int8_t *sk = st ? (int8_t *)st + (size_t)h * g.hd : NULL;
    int8_t *sv = st ? (int8_t *)st + g.row_bytes + (size_t)h * g.hd : NULL;
    float *sks = st ? (float *)(st + 2 * g.row_bytes) + (size_t)h * g.k_scales : NULL;
    float *svs = st ? (float *)(st + 2 * g.row_bytes) + (size_t)g.nkv * g.k_scales + h : NULL;
    for (int grp = 0; grp < g.k_scales; grp++) {
        size_t o = (size_t)grp * g.k_group;
        kc_quant_group(kr + o, g.k_group, dk + o, dks + grp, sk ? sk + o : NULL,
                       sks ? sks + grp : NULL);
    }
    kc_quant_group(vr, g.hd, dv, dvs, sv, svs);
}

extern "C" void kern_cuda_kv_store(kern_cuda *c, const kern_cuda_kvst *k) {
    if (k->n_tok <= 0 || c->status) return;
    kern_cuda_bind(c);
    dim3 grid((unsigned)k->n_tok, (unsigned)k->g.nkv);
    kc_kv_store_kernel<<<grid, 32, 0, c->stream>>>(*k);
    kc_launched(c, "kv_store");
}

/* ---- attention --------------------------------------------------------------------------- */

#define KC_ATTN_MAX_DIMS (KERN_CUDA_ATTN_MAX_HD / 32) /* output dims per lane */

/* The sequence holding item (item0 ascending). */
__device__ int kc_attn_seq_of(const kern_cuda_attn_seq *seq, int n_seq, int item) {
    int lo = 0, hi = n_seq - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (seq[mid].item0 <= item) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

__global__ void kc_attn_kernel(kern_cuda_attn a) {
    extern __shared__ __align__(16) unsigned char sm[];
    const kern_cuda_attn_plan P = a.plan;
    const int item = blockIdx.x, split = blockIdx.z;
    const int g = blockIdx.y / P.head_chunks, hc = blockIdx.y % P.head_chunks;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, hd = a.hd;
    const int G = a.n_head / a.nkv, hl = hc * P.heads_per_block + warp;
    const int active = hl < G, h = g * G + hl;
    const kern_cuda_attn_seq S = a.seq[kc_attn_seq_of(a.seq, a.n_seq, item)];
    const int t = item - S.item0, p = S.pos0 + t, chunk = P.chunk;
    int klo, khi, ka, kb;
    kern_cuda_key_range(p, S.window, &klo, &khi);
    kern_cuda_split_range(klo, khi, P.n_split, split, chunk, &ka, &kb);

    const kern_cuda_attn_smem L =
        kern_cuda_attn_smem_layout(chunk, P.k_stride, hd, a.f32, a.k_scales, P.heads_per_block);
    float *qs = (float *)(sm + L.q) + warp * hd;
    float *ps = (float *)(sm + L.p) + warp * chunk;
    const float *ks = (const float *)(sm + L.ks), *vs = (const float *)(sm + L.vs);
    const int es = a.f32 ? 4 : 1, words = hd * es / 4;
    const size_t row_bytes = (size_t)a.nkv * hd * es, head_off = (size_t)g * hd * es;
    if (active)
        for (int d = lane; d < hd; d += 32) qs[d] = S.q[(size_t)t * S.ldq + (size_t)h * hd + d];

    float acc[KC_ATTN_MAX_DIMS], m = -INFINITY, l = 0;
#pragma unroll
    for (int i = 0; i < KC_ATTN_MAX_DIMS; i++) acc[i] = 0;
    for (int c0 = ka / chunk * chunk; ka <= kb && c0 <= kb; c0 += chunk) { /* none if empty */
        __syncthreads(); /* the previous chunk is consumed (and qs written) */
        int j0 = ka > c0 ? ka - c0 : 0, j1 = kb < c0 + chunk - 1 ? kb - c0 : chunk - 1;
        for (int idx = threadIdx.x; idx < chunk * words; idx += blockDim.x) {
            int j = idx / words, w = idx % words;
            if (j < j0 || j > j1) continue;
            int key = c0 + j;
            const uint8_t *blk = a.tab[S.tab + key / a.B - S.first_blk];
            size_t slot = (size_t)(key % a.B);
            *(uint32_t *)(sm + L.k + j * P.k_stride + w * 4) =
                *(const uint32_t *)(blk + S.k_off + slot * row_bytes + head_off + w * 4);
            *(uint32_t *)(sm + L.v + (j * words + w) * 4) =
                *(const uint32_t *)(blk + S.v_off + slot * row_bytes + head_off + w * 4);
        }
        if (!a.f32)
            for (int idx = threadIdx.x; idx < chunk * (a.k_scales + 1); idx += blockDim.x) {
                int j = idx / (a.k_scales + 1), r = idx % (a.k_scales + 1);
                if (j < j0 || j > j1) continue;
                int key = c0 + j;
                const uint8_t *blk = a.tab[S.tab + key / a.B - S.first_blk];
                size_t slot = (size_t)(key % a.B);
                if (r < a.k_scales)
                    ((float *)(sm + L.ks))[j * a.k_scales + r] =
                        ((const float *)(blk + S.ks_off))[(slot * a.nkv + g) * a.k_scales + r];
                else
                    ((float *)(sm + L.vs))[j] = ((const float *)(blk + S.vs_off))[slot * a.nkv + g];
            }
        __syncthreads();
        if (!active) continue;
        /* lane j scores key c0 + j */
        float s = -INFINITY;
        if (lane >= j0 && lane <= j1) {
            float dot = 0;
            if (a.f32) {
                const float *kf = (const float *)(sm + L.k + lane * P.k_stride);
                for (int d = 0; d < hd; d++) dot += qs[d] * kf[d];
            } else {
                const unsigned char *kb8 = sm + L.k + lane * P.k_stride;
                for (int grp = 0; grp < a.k_scales; grp++) {
                    float part = 0;
                    for (int d = grp * a.k_group; d < (grp + 1) * a.k_group; d += 4) {
                        char4 k4 = *(const char4 *)(kb8 + d);
                        part += qs[d] * (float)k4.x + qs[d + 1] * (float)k4.y +
                                qs[d + 2] * (float)k4.z + qs[d + 3] * (float)k4.w;
                    }
                    dot += part * ks[lane * a.k_scales + grp];
                }
            }
            s = dot * a.scale;
        }
        float mnew = fmaxf(m, kc_warp_max(s)); /* finite: the chunk holds a key */
        float pj = s == -INFINITY ? 0.0f : expf(s - mnew), alpha = expf(m - mnew);
        l = l * alpha + kc_warp_sum(pj);
        m = mnew;
        if (lane < chunk) ps[lane] = pj;
        __syncwarp();
#pragma unroll
        for (int i = 0; i < KC_ATTN_MAX_DIMS; i++) acc[i] *= alpha;
        for (int j = j0; j <= j1; j++) {
            float w = ps[j] * (a.f32 ? 1.0f : vs[j]);
            if (a.f32) {
                const float *vf = (const float *)(sm + L.v) + j * hd;
#pragma unroll
                for (int i = 0; i < KC_ATTN_MAX_DIMS; i++)
                    if (lane + 32 * i < hd) acc[i] += w * vf[lane + 32 * i];
            } else {
                const signed char *v8 = (const signed char *)(sm + L.v) + j * hd;
#pragma unroll
                for (int i = 0; i < KC_ATTN_MAX_DIMS; i++)
                    if (lane + 32 * i < hd) acc[i] += w * (float)v8[lane + 32 * i];
            }
        }
        __syncwarp();
    }
    if (!active) return;
    if (P.n_split == 1) {
        float inv = 1.0f / l, *o = S.out + (size_t)t * S.ldo + (size_t)h * hd;
#pragma unroll
        for (int i = 0; i < KC_ATTN_MAX_DIMS; i++)
            if (lane + 32 * i < hd) o[lane + 32 * i] = acc[i] * inv;
        return;
    }
    float *w = a.ws + (((size_t)item * a.n_head + h) * P.n_split + split) * (size_t)(hd + 2);
    if (lane == 0) w[0] = m, w[1] = l;
#pragma unroll
    for (int i = 0; i < KC_ATTN_MAX_DIMS; i++)
        if (lane + 32 * i < hd) w[2 + lane + 32 * i] = acc[i];
}

/* One warp per (item, head): merge the splits' partials. */
__global__ void kc_attn_combine(kern_cuda_attn a) {
    const int item = blockIdx.x, h = blockIdx.y, lane = threadIdx.x, hd = a.hd, n = a.plan.n_split;
    const kern_cuda_attn_seq S = a.seq[kc_attn_seq_of(a.seq, a.n_seq, item)];
    const float *w = a.ws + ((size_t)item * a.n_head + h) * n * (size_t)(hd + 2);
    float M = -INFINITY, Lsum = 0;
    for (int s = 0; s < n; s++) M = fmaxf(M, w[(size_t)s * (hd + 2)]);
    for (int s = 0; s < n; s++) {
        float ms = w[(size_t)s * (hd + 2)];
        if (ms != -INFINITY) Lsum += expf(ms - M) * w[(size_t)s * (hd + 2) + 1];
    }
    float *o = S.out + (size_t)(item - S.item0) * S.ldo + (size_t)h * hd;
    for (int d = lane; d < hd; d += 32) {
        float v = 0;
        for (int s = 0; s < n; s++) {
            float ms = w[(size_t)s * (hd + 2)];
            if (ms != -INFINITY) v += expf(ms - M) * w[(size_t)s * (hd + 2) + 2 + d];
        }
        o[d] = v / Lsum;
    }
}

extern "C" void kern_cuda_attention(kern_cuda *c, const kern_cuda_attn *a) {
    if (a->n_items <= 0 || c->status) return;
    kern_cuda_bind(c);
    const kern_cuda_attn_plan *P = &a->plan;
    if (P->n_split > 1 && !a->ws) {
        kern_cuda_fail(c, KERN_CUDA_EINVAL, "attention: %d splits without a workspace", P->n_split);
        return;
    }
    dim3 grid((unsigned)a->n_items, (unsigned)(a->nkv * P->head_chunks), (unsigned)P->n_split);
    kc_attn_kernel<<<grid, 32 * P->heads_per_block, P->smem, c->stream>>>(*a);
    kc_launched(c, "attention");
    if (P->n_split > 1) {
        dim3 g2((unsigned)a->n_items, (unsigned)a->n_head);
        kc_attn_combine<<<g2, 32, 0, c->stream>>>(*a);
        kc_launched(c, "attention combine");
    }
}
