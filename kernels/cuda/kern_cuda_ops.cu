/*
 * kern_cuda_ops.cu -- the element-wise ops of the forward pass on the
 * device (kern_cuda.h): RMSNorm (rows or heads), RoPE, GLU, residual add,
 * soft-cap, embedding lookup, per-row int8 quantisation and argmax.
 *
 * Shapes.  Per-row reductions (RMSNorm, quantise, argmax) use one warp
 * per row for short rows and one block per row otherwise
 * (kern_cuda_rows_shape); the rest are one thread per output element.
 * Numerics follow the CPU references (kern_ops.h): quantisation and the
 * embedding lookup are bit for bit (IEEE division, round-half-even,
 * the same multiplication order); RMSNorm sums squares in double as the
 * CPU does (in another order, so its float scale almost always matches);
 * the others agree to float rounding (device expf / sincosf / tanhf).
 */
#include <float.h>
#include <math.h>

#include "kern_cuda_int.cuh"

#define KC_THREADS 256

/* Sum (or max, of values >= 0) of v over the block's threads (blockDim a
 * multiple of 32, <= 1024). */
__device__ float kc_block_reduce(float v, int is_max) {
    __shared__ float part[32];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = is_max ? kc_warp_max(v) : kc_warp_sum(v);
    __syncthreads(); /* part may still be read by a previous call */
    if (lane == 0) part[warp] = v;
    __syncthreads();
    float r = lane < nw ? part[lane] : 0.0f;
    r = is_max ? kc_warp_max(r) : kc_warp_sum(r);
    return r;
}

__device__ __forceinline__ double kc_warp_dsum(double v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* Sum of v over the block's threads, in double. */
__device__ double kc_block_dsum(double v) {
    __shared__ double part[32];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = kc_warp_dsum(v);
    __syncthreads();
    if (lane == 0) part[warp] = v;
    __syncthreads();
    return kc_warp_dsum(lane < nw ? part[lane] : 0.0);
}

__global__ void kc_rmsnorm_kernel(int rows, int per, int n, const float *x, int ld, int inner,
                                  const float *w, float eps, float *y, int ldy, int warp_rows) {
    int r, tid, nthr;
    if (warp_rows) {
        r = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
        tid = threadIdx.x & 31;
        nthr = 32;
    } else {
        r = blockIdx.x;
        tid = threadIdx.x;
        nthr = blockDim.x;
    }
    if (r >= rows) return; /* uniform per warp (warp rows) or per block */
    const float *xr = x + (size_t)(r / per) * ld + (size_t)(r % per) * inner;
    float *yr = y + (size_t)(r / per) * ldy + (size_t)(r % per) * inner;
    /* the sum of squares in double, as the CPU's kernels: float rounding
     * differences there become differing int8 codes downstream */
    double ss = 0;
    for (int i = tid; i < n; i += nthr) ss += (double)xr[i] * xr[i];
    ss = warp_rows ? kc_warp_dsum(ss) : kc_block_dsum(ss);
    float inv = 1.0f / sqrtf((float)(ss / n) + eps);
    for (int i = tid; i < n; i += nthr) yr[i] = xr[i] * inv * w[i];
}

extern "C" void kern_cuda_rmsnorm(kern_cuda *c, int rows, int per, int n, const float *x, int ld,
                                  int inner, const float *w, float eps, float *y, int ldy) {
    if (rows <= 0 || n <= 0 || c->status) return;
    kern_cuda_bind(c);
    kern_cuda_rows sh = kern_cuda_rows_shape(n);
    unsigned grid = kc_blocks((size_t)rows, (unsigned)sh.rows_per_block);
    kc_rmsnorm_kernel<<<grid, sh.threads, 0, c->stream>>>(rows, per > 0 ? per : 1, n, x, ld, inner,
                                                          w, eps, y, ldy, sh.warp_rows);
    kc_launched(c, "rmsnorm");
}

__global__ void kc_rope_kernel(int n_tok, int n_head, int hd, float *x, int ldx, const int32_t *pos,
                               const float *inv_freq, int neox) {
    int half = hd / 2;
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)n_tok * half) return;
    int t = (int)(idx / half), i = (int)(idx % half);
    float ang = (float)pos[t] * inv_freq[i], s, co;
    sincosf(ang, &s, &co);
    int a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
    float *row = x + (size_t)t * ldx;
    for (int h = 0; h < n_head; h++) {
        float *v = row + (size_t)h * hd;
        float x0 = v[a], x1 = v[b];
        v[a] = x0 * co - x1 * s;
        v[b] = x0 * s + x1 * co;
    }
}

extern "C" void kern_cuda_rope(kern_cuda *c, int n_tok, int n_head, int head_dim, float *x, int ldx,
                               const int32_t *pos, const float *inv_freq, int neox) {
    if (n_tok <= 0 || n_head <= 0 || head_dim < 2 || c->status) return;
    kern_cuda_bind(c);
    size_t n = (size_t)n_tok * (head_dim / 2);
    kc_rope_kernel<<<kc_blocks(n, KC_THREADS), KC_THREADS, 0, c->stream>>>(
        n_tok, n_head, head_dim, x, ldx, pos, inv_freq, neox);
    kc_launched(c, "rope");
}

__global__ void kc_glu_kernel(int M, int F, const float *gu, int ldgu, float *h, int ldh,
                              int gelu) {
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)M * F) return;
    int m = (int)(idx / F), i = (int)(idx % F);
    float g = gu[(size_t)m * ldgu + i], u = gu[(size_t)m * ldgu + F + i], a;
    if (gelu) { /* 0.5 g (1 + tanh y) written as g * sigmoid(2y), as the CPU's vector path */
        float y = 0.7978845608028654f * (g + 0.044715f * g * g * g);
        a = g / (1.0f + expf(-2.0f * y));
    } else {
        a = g / (1.0f + expf(-g));
    }
    h[(size_t)m * ldh + i] = a * u;
}

extern "C" void kern_cuda_glu(kern_cuda *c, int M, int F, const float *gu, int ldgu, float *h,
                              int ldh, int gelu) {
    if (M <= 0 || F <= 0 || c->status) return;
    kern_cuda_bind(c);
    size_t n = (size_t)M * F;
    kc_glu_kernel<<<kc_blocks(n, KC_THREADS), KC_THREADS, 0, c->stream>>>(M, F, gu, ldgu, h, ldh,
                                                                          gelu);
    kc_launched(c, "glu");
}

__global__ void kc_add_kernel(int M, int n, float *y, int ldy, const float *x, int ldx) {
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)M * n) return;
    int m = (int)(idx / n), i = (int)(idx % n);
    y[(size_t)m * ldy + i] += x[(size_t)m * ldx + i];
}

extern "C" void kern_cuda_add(kern_cuda *c, int M, int n, float *y, int ldy, const float *x,
                              int ldx) {
    if (M <= 0 || n <= 0 || c->status) return;
    kern_cuda_bind(c);
    size_t N = (size_t)M * n;
    kc_add_kernel<<<kc_blocks(N, KC_THREADS), KC_THREADS, 0, c->stream>>>(M, n, y, ldy, x, ldx);
    kc_launched(c, "add");
}

__global__ void kc_softcap_kernel(float *x, size_t n, float cap) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = tanhf(x[i] / cap) * cap;
}

extern "C" void kern_cuda_softcap(kern_cuda *c, float *x, size_t n, float cap) {
    if (!n || c->status) return;
    kern_cuda_bind(c);
    kc_softcap_kernel<<<kc_blocks(n, KC_THREADS), KC_THREADS, 0, c->stream>>>(x, n, cap);
    kc_launched(c, "softcap");
}

__global__ void kc_embed_kernel(kern_cuda_etab e, const int32_t *tok, int T, float mul, float *x,
                                int ldx) {
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)T * e.cols) return;
    int t = (int)(idx / e.cols), k = (int)(idx % e.cols), row = tok[t];
    float v = 0;
    if (row >= 0 && row < e.rows) {
        size_t at = (size_t)row * e.cols + k;
        if (!e.q) v = e.f[at] * mul;
        else if (e.group == e.cols) v = (float)e.q[at] * (e.scale[row] * mul);
        else v = (float)e.q[at] * e.scale[(size_t)row * (e.cols / e.group) + k / e.group] * mul;
    }
    x[(size_t)t * ldx + k] = v;
}

extern "C" void kern_cuda_embed(kern_cuda *c, const kern_cuda_etab *e, const int32_t *tok, int T,
                                float mul, float *x, int ldx) {
    if (T <= 0 || c->status) return;
    kern_cuda_bind(c);
    size_t n = (size_t)T * e->cols;
    kc_embed_kernel<<<kc_blocks(n, KC_THREADS), KC_THREADS, 0, c->stream>>>(*e, tok, T, mul, x,
                                                                            ldx);
    kc_launched(c, "embed");
}

/* One block per row: the row's max |x|, then q = round-half-even(x * 127 / max). */
__global__ void kc_quantize_kernel(int K, const float *x, int ldx, int8_t *q, int ldq,
                                   float *scale) {
    int m = blockIdx.x;
    const float *xr = x + (size_t)m * ldx;
    int8_t *qr = q + (size_t)m * ldq;
    float amax = 0;
    for (int k = threadIdx.x; k < K; k += blockDim.x) amax = fmaxf(amax, fabsf(xr[k]));
    amax = kc_block_reduce(amax, 1); /* fmaxf skips NaN, as the CPU's compare does */
    float inv = __fdiv_rn(127.0f, amax);
    int zero = !(inv <= FLT_MAX);
    if (threadIdx.x == 0) scale[m] = zero ? 0.0f : __fdiv_rn(amax, 127.0f);
    for (int k = threadIdx.x; k < ldq; k += blockDim.x) {
        int8_t v = 0;
        if (k < K && !zero) {
            float r = rintf(__fmul_rn(xr[k], inv));
            r = r > 127.0f ? 127.0f : !(r >= -127.0f) ? -127.0f : r; /* NaN -> -127 */
            v = (int8_t)r;
        }
        qr[k] = v;
    }
}

extern "C" void kern_cuda_quantize(kern_cuda *c, int M, int K, const float *x, int ldx, int8_t *q,
                                   int ldq, float *scale) {
    if (M <= 0 || K < 0 || c->status) return;
    kern_cuda_bind(c);
    kc_quantize_kernel<<<M, KC_THREADS, 0, c->stream>>>(K, x, ldx, q, ldq, scale);
    kc_launched(c, "quantize");
}

/* One warp per (row, 32-value block): kc_quantize_kernel's rule per block. */
__global__ void kc_quantize_blocks_kernel(int M, int K, const float *x, int ldx, int8_t *q, int ldq,
                                          float *scale, int lds) {
    int lane = threadIdx.x & 31, nb = (K + 31) / 32;
    long pair = (long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (pair >= (long)M * nb) return;
    int m = (int)(pair / nb), b = (int)(pair % nb), k = b * 32 + lane;
    const float *xr = x + (size_t)m * ldx;
    int8_t *qr = q + (size_t)m * ldq;
    float v = k < K ? xr[k] : 0.0f;
    float amax = kc_warp_max(k < K ? fabsf(v) : 0.0f); /* fmaxf skips NaN */
    float inv = __fdiv_rn(127.0f, amax);
    int zero = !(inv <= FLT_MAX);
    if (lane == 0) scale[(size_t)m * lds + b] = zero ? 0.0f : __fdiv_rn(amax, 127.0f);
    int8_t o = 0;
    if (k < K && !zero) {
        float r = rintf(__fmul_rn(v, inv));
        r = r > 127.0f ? 127.0f : !(r >= -127.0f) ? -127.0f : r;
        o = (int8_t)r;
    }
    if (k < ldq) qr[k] = o;
    if (b == nb - 1) /* the padding past the last block */
        for (int p = nb * 32 + lane; p < ldq; p += 32) qr[p] = 0;
}

extern "C" void kern_cuda_quantize_blocks(kern_cuda *c, int M, int K, const float *x, int ldx,
                                          int8_t *q, int ldq, float *scale, int lds) {
    if (M <= 0 || K <= 0 || c->status) return;
    kern_cuda_bind(c);
    size_t pairs = (size_t)M * ((K + 31) / 32);
    kc_quantize_blocks_kernel<<<kc_blocks(pairs, KC_THREADS / 32), KC_THREADS, 0, c->stream>>>(
        M, K, x, ldx, q, ldq, scale, lds);
    kc_launched(c, "quantize_blocks");
}

/* (a, ia) ranks above (b, ib): larger value, NaN below everything, then lower index. */
__device__ __forceinline__ int kc_better(float a, int ia, float b, int ib) {
    int na = isnan(a), nb = isnan(b);
    if (na != nb) return nb;
    if (!na && a != b) return a > b;
    return ia < ib;
}

__global__ void kc_argmax_kernel(const float *x, int V, int ld, int32_t *out) {
    __shared__ float pv[32];
    __shared__ int pi[32];
    const float *xr = x + (size_t)blockIdx.x * ld;
    float bv = __int_as_float(0x7fc00000); /* NaN: anything beats it */
    int bi = 0x7fffffff;
    for (int i = threadIdx.x; i < V; i += blockDim.x)
        if (kc_better(xr[i], i, bv, bi)) bv = xr[i], bi = i;
    for (int o = 16; o > 0; o >>= 1) {
        float ov = __shfl_xor_sync(0xffffffffu, bv, o);
        int oi = __shfl_xor_sync(0xffffffffu, bi, o);
        if (kc_better(ov, oi, bv, bi)) bv = ov, bi = oi;
    }
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    if (lane == 0) pv[warp] = bv, pi[warp] = bi;
    __syncthreads();
    if (warp == 0) {
        bv = lane < nw ? pv[lane] : __int_as_float(0x7fc00000);
        bi = lane < nw ? pi[lane] : 0x7fffffff;
        for (int o = 16; o > 0; o >>= 1) {
            float ov = __shfl_xor_sync(0xffffffffu, bv, o);
            int oi = __shfl_xor_sync(0xffffffffu, bi, o);
            if (kc_better(ov, oi, bv, bi)) bv = ov, bi = oi;
        }
        if (lane == 0) out[blockIdx.x] = bi < V ? bi : 0;
    }
}

extern "C" void kern_cuda_argmax(kern_cuda *c, const float *x, int R, int V, int ld, int32_t *out) {
    if (R <= 0 || V <= 0 || c->status) return;
    kern_cuda_bind(c);
    kc_argmax_kernel<<<R, 1024, 0, c->stream>>>(x, V, ld, out);
    kc_launched(c, "argmax");
}
