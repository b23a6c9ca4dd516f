/*
 * backend_cuda.c -- the CUDA backend: fills eng_backend's table with the
 * kernels/cuda launchers (kern_cuda.h) on one device and one stream.
 * Backend memory is device memory; this file holds the table, memory and
 * copies, the staging arenas and their flush (backend_cuda_int.h), the
 * element-wise ops and argmax.  Weights, linear and embed are in
 * backend_cuda_weight.c; the device KV tier, kv_store and attention in
 * backend_cuda_kv.c.
 *
 * Built only when the CUDA library target exists (engine/CMakeLists.txt
 * defines PARLEY_HAVE_CUDA); otherwise backend.c's stubs answer.
 *
 * Environment (read at create): PARLEY_CUDA_KV_MIB, the device KV tier's
 * budget in MiB; PARLEY_CUDA_WEIGHTS=channel|block, how int8 weights are
 * held (backend_cuda_weight.c; default channel); PARLEY_CUDA_GEMM=gemv|lt
 * forces one path of the per-channel GEMM (tests and benchmarks; default:
 * by M, kern_cuda_gemm_pick).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend_cuda_int.h"
#include "eng_err.h"

void cuda_lock(cuda_be *be) {
    pthread_mutex_lock(&be->mu);
    kern_cuda_bind(be->kc);
}

void cuda_unlock(cuda_be *be) { pthread_mutex_unlock(&be->mu); }

int cuda_flush(cuda_be *be) {
    int rc = kern_cuda_sync(be->kc);
    if (rc == 0) cuda_wb_scatter(be);
    be->n_wbr = 0;
    for (int k = 0; k < 2; k++)
        if (be->tier[k].t) kern_cuda_tier_clean_all(be->tier[k].t);
    be->up.used = be->wb.used = 0;
    be->epoch++;
    return rc;
}

uint8_t *cuda_stage(cuda_be *be, size_t n, uint8_t **dev) {
    n = (n + 255) / 256 * 256;
    if (n > be->up.cap) return NULL;
    if (be->up.used + n > be->up.cap) cuda_flush(be);
    uint8_t *h = be->up.host + be->up.used;
    *dev = be->up.dev + be->up.used;
    be->up.used += n;
    return h;
}

void cuda_put(cuda_be *be, void *dst, const void *src, size_t n) {
    if (!n) return;
    uint8_t *dev, *h = n <= be->up.cap / 4 ? cuda_stage(be, n, &dev) : NULL;
    if (!h) { /* large (weights, vectors at load): straight from the caller's memory */
        kern_cuda_copy_sync(be->kc, dst, src, n);
        return;
    }
    memcpy(h, src, n);
    kern_cuda_copy_async(be->kc, dst, h, n); /* pinned: truly asynchronous */
}

/* ---- memory ------------------------------------------------------------------------------ */

static void *cuda_alloc(void *ctx, size_t bytes) {
    cuda_be *be = ctx;
    cuda_lock(be);
    void *p = kern_cuda_malloc(be->kc, bytes);
    cuda_unlock(be);
    return p;
}

static void cuda_free(void *ctx, void *p) {
    cuda_be *be = ctx;
    if (!p) return;
    cuda_lock(be);
    kern_cuda_free(be->kc, p);
    cuda_unlock(be);
}

static void cuda_upload(void *ctx, void *dst, const void *src, size_t bytes) {
    cuda_be *be = ctx;
    cuda_lock(be);
    cuda_put(be, dst, src, bytes);
    cuda_unlock(be);
}

static int cuda_download(void *ctx, void *dst, const void *src, size_t bytes) {
    cuda_be *be = ctx;
    cuda_lock(be);
    int rc = kern_cuda_copy_sync(be->kc, dst, src, bytes);
    int frc = cuda_flush(be);
    cuda_unlock(be);
    return rc ? rc : frc;
}

static void cuda_copy(void *ctx, void *dst, const void *src, size_t bytes) {
    cuda_be *be = ctx;
    cuda_lock(be);
    kern_cuda_copy_async(be->kc, dst, src, bytes);
    cuda_unlock(be);
}

/* ---- element-wise ops -------------------------------------------------------------------- */

static void cuda_rmsnorm(void *ctx, int M, int n, const float *x, int ldx, const float *w,
                         float eps, float *y, int ldy) {
    cuda_be *be = ctx;
    cuda_lock(be);
    kern_cuda_rmsnorm(be->kc, M, 1, n, x, ldx, 0, w, eps, y, ldy);
    cuda_unlock(be);
}

static void cuda_rmsnorm_heads(void *ctx, int T, int n_head, int hd, float *x, int ld,
                               const float *w, float eps) {
    cuda_be *be = ctx;
    cuda_lock(be);
    kern_cuda_rmsnorm(be->kc, T * n_head, n_head, hd, x, ld, hd, w, eps, x, ld);
    cuda_unlock(be);
}

static void cuda_rope(void *ctx, int n_tok, int n_head, int head_dim, float *x, int ldx,
                      const int32_t *pos, const float *inv_freq, int type) {
    cuda_be *be = ctx;
    cuda_lock(be);
    kern_cuda_rope(be->kc, n_tok, n_head, head_dim, x, ldx, pos, inv_freq, type == ENG_ROPE_NEOX);
    cuda_unlock(be);
}

static void cuda_glu(void *ctx, int M, int F, const float *gu, int ldgu, float *h, int ldh,
                     int act) {
    cuda_be *be = ctx;
    cuda_lock(be);
    kern_cuda_glu(be->kc, M, F, gu, ldgu, h, ldh, act == ENG_GLU_GELU_TANH);
    cuda_unlock(be);
}

static void cuda_add(void *ctx, int M, int n, float *y, int ldy, const float *x, int ldx) {
    cuda_be *be = ctx;
    cuda_lock(be);
    kern_cuda_add(be->kc, M, n, y, ldy, x, ldx);
    cuda_unlock(be);
}

static void cuda_softcap(void *ctx, float *x, size_t n, float cap) {
    cuda_be *be = ctx;
    cuda_lock(be);
    kern_cuda_softcap(be->kc, x, n, cap);
    cuda_unlock(be);
}

static int cuda_argmax(void *ctx, const float *logits, int R, int V, int ld, int32_t *out) {
    cuda_be *be = ctx;
    if (R <= 0) return 0;
    cuda_lock(be);
    if (be->argmax_cap < R) {
        kern_cuda_free(be->kc, be->argmax_out);
        be->argmax_out = kern_cuda_malloc(be->kc, (size_t)R * sizeof(int32_t));
        be->argmax_cap = be->argmax_out ? R : 0;
        if (!be->argmax_out) kern_cuda_fail(be->kc, KERN_CUDA_ENOMEM, "argmax: out of memory");
    }
    if (be->argmax_out) {
        kern_cuda_argmax(be->kc, logits, R, V, ld, be->argmax_out);
        kern_cuda_copy_sync(be->kc, out, be->argmax_out, (size_t)R * sizeof(int32_t));
    }
    int rc = cuda_flush(be);
    cuda_unlock(be);
    return rc;
}

/* ---- the table --------------------------------------------------------------------------- */

static void cuda_destroy(void *ctx) {
    cuda_be *be = ctx;
    if (!be) return;
    if (be->kc) {
        cuda_lock(be);
        /* Rows still pending belong to a step that returned no logits; their
         * blocks may be freed by now (a malloc allocator), so they are
         * dropped, not written (blocks the cache kept were written at the
         * logits step that preceded their insertion). */
        be->n_wbr = 0;
        cuda_flush(be);
        cuda_kv_free(be);
        kern_cuda_free(be->kc, be->attn_ws);
        kern_cuda_free(be->kc, be->argmax_out);
        kern_cuda_free(be->kc, be->up.dev);
        kern_cuda_host_free(be->kc, be->up.host);
        kern_cuda_host_free(be->kc, be->wb.host);
        cuda_unlock(be);
        kern_cuda_close(be->kc);
    }
    free(be->wbr);
    free(be->tabbuf);
    pthread_mutex_destroy(&be->mu);
    free(be);
}

int eng_backend_cuda_built(void) { return 1; }

int eng_backend_cuda_create(eng_backend *b, int device, int n_threads, char *err, size_t errlen) {
    memset(b, 0, sizeof *b);
    cuda_be *be = calloc(1, sizeof *be);
    if (!be) return pl_errf(err, errlen, ENG_ENOMEM, "cuda backend: out of memory");
    pthread_mutex_init(&be->mu, NULL);
    char sub[PL_ERR_LEN] = "";
    int rc = kern_cuda_open(&be->kc, device, sub, sizeof sub);
    if (rc) {
        cuda_destroy(be);
        return pl_errf(err, errlen, rc == KERN_CUDA_ENODEV ? ENG_EIO : ENG_ENOMEM,
                       "cuda backend: %s", sub);
    }
    kern_cuda_get_info(be->kc, &be->info);
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    be->n_threads = n_threads > 0 ? n_threads : ncpu > 32 ? 32 : ncpu > 0 ? (int)ncpu : 1;
    const char *gp = getenv("PARLEY_CUDA_GEMM");
    be->gemm_path = gp && !strcmp(gp, "gemv") ? KERN_CUDA_GEMM_GEMV
                    : gp && !strcmp(gp, "lt") ? KERN_CUDA_GEMM_LT
                                              : KERN_CUDA_GEMM_AUTO;
    const char *wf = getenv("PARLEY_CUDA_WEIGHTS");
    be->wform = wf && !strcmp(wf, "block") ? CUDA_WFORM_BLOCK : CUDA_WFORM_CHANNEL;
    const char *mib = getenv("PARLEY_CUDA_KV_MIB");
    if (mib && atol(mib) > 0) be->kv_budget = (size_t)atol(mib) << 20;
    be->up.cap = CUDA_UP_BYTES;
    be->up.host = kern_cuda_host_alloc(be->kc, be->up.cap, 0);
    be->up.dev = kern_cuda_malloc(be->kc, be->up.cap);
    be->wb.cap = CUDA_WB_BYTES;
    be->wb.host = kern_cuda_host_alloc(be->kc, be->wb.cap, 1);
    be->wb.dev = be->wb.host ? kern_cuda_host_dev(be->kc, be->wb.host) : NULL;
    if (!be->up.host || !be->up.dev || !be->wb.host || !be->wb.dev) {
        cuda_destroy(be);
        return pl_errf(err, errlen, ENG_ENOMEM,
                       "cuda backend: cannot allocate %zu MiB of staging memory",
                       (CUDA_UP_BYTES + CUDA_WB_BYTES) >> 20);
    }
    b->name = "cuda";
    b->ctx = be;
    b->n_threads = be->n_threads;
    b->caps = ENG_BE_CAP_ARGMAX;
    b->alloc = cuda_alloc;
    b->free = cuda_free;
    b->upload = cuda_upload;
    b->download = cuda_download;
    b->copy = cuda_copy;
    b->weight_upload = eng_cuda_weight_upload;
    b->weight_free = eng_cuda_weight_free;
    b->weight_bytes = eng_cuda_weight_bytes;
    b->weight_read_bytes = eng_cuda_weight_read_bytes;
    b->linear_ws = eng_cuda_linear_ws;
    b->linear = eng_cuda_linear;
    b->embed = eng_cuda_embed;
    b->rmsnorm = cuda_rmsnorm;
    b->rmsnorm_heads = cuda_rmsnorm_heads;
    b->rope = cuda_rope;
    b->glu = cuda_glu;
    b->add = cuda_add;
    b->softcap = cuda_softcap;
    b->kv_store = eng_cuda_kv_store;
    b->attention = eng_cuda_attention;
    b->argmax = cuda_argmax;
    b->kv_invalidate = eng_cuda_kv_invalidate;
    b->kv_tier = eng_cuda_kv_tier;
    b->destroy = cuda_destroy;
    return 0;
}
