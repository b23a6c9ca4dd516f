/*
 * kern_cuda_ctx.cu -- the kern_cuda context: opening a device (stream,
 * cuBLAS and cuBLASLt handles, workspace), device facts, the sticky
 * status, memory and copies (kern_cuda.h).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kern_cuda_int.cuh"

int kc_cuda_err(kern_cuda *c, cudaError_t e, const char *what) {
    if (e == cudaSuccess) return 0;
    if (!c->status) {
        c->status = KERN_CUDA_EFAIL;
        snprintf(c->msg, sizeof c->msg, "%s: %s", what, cudaGetErrorString(e));
    }
    return 1;
}

extern "C" void kern_cuda_fail(kern_cuda *c, int code, const char *fmt, ...) {
    if (c->status) return;
    c->status = code < 0 ? code : KERN_CUDA_EFAIL;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->msg, sizeof c->msg, fmt, ap);
    va_end(ap);
}

extern "C" int kern_cuda_status(const kern_cuda *c, char *err, size_t errlen) {
    if (c->status && err && errlen) snprintf(err, errlen, "%s", c->msg);
    return c->status;
}

extern "C" int kern_cuda_device_count(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError(); /* clear it: no driver is not an error of anyone's context */
        return 0;
    }
    return n;
}

extern "C" void kern_cuda_bind(kern_cuda *c) {
    static thread_local int bound = -1;
    if (bound == c->device) return;
    if (!kc_cuda_err(c, cudaSetDevice(c->device), "cudaSetDevice")) bound = c->device;
}

static int open_fail(kern_cuda *c, int code, char *err, size_t errlen, const char *what,
                     const char *why) {
    if (err && errlen) snprintf(err, errlen, "%s: %s", what, why);
    kern_cuda_close(c);
    return code;
}

extern "C" int kern_cuda_open(kern_cuda **out, int device, char *err, size_t errlen) {
    *out = NULL;
    int n = kern_cuda_device_count();
    if (n <= 0) return open_fail(NULL, KERN_CUDA_ENODEV, err, errlen, "CUDA", "no device");
    if (device < 0 || device >= n) {
        if (err && errlen) snprintf(err, errlen, "CUDA device %d: only %d present", device, n);
        return KERN_CUDA_ENODEV;
    }
    kern_cuda *c = (kern_cuda *)calloc(1, sizeof *c);
    if (!c) return open_fail(NULL, KERN_CUDA_ENOMEM, err, errlen, "CUDA", "out of memory");
    c->device = device;
    cudaError_t e = cudaSetDevice(device);
    if (e != cudaSuccess)
        return open_fail(c, KERN_CUDA_EFAIL, err, errlen, "cudaSetDevice", cudaGetErrorString(e));
    cudaDeviceProp prop;
    if ((e = cudaGetDeviceProperties(&prop, device)) != cudaSuccess)
        return open_fail(c, KERN_CUDA_EFAIL, err, errlen, "cudaGetDeviceProperties",
                         cudaGetErrorString(e));
    kern_cuda_info *i = &c->info;
    snprintf(i->name, sizeof i->name, "%s", prop.name);
    i->device = device;
    i->cc_major = prop.major;
    i->cc_minor = prop.minor;
    i->n_sm = prop.multiProcessorCount;
    i->mem_total = prop.totalGlobalMem;
    cudaDeviceGetAttribute(&i->clock_khz, cudaDevAttrClockRate, device);
    cudaDeviceGetAttribute(&i->mem_clock_khz, cudaDevAttrMemoryClockRate, device);
    cudaDeviceGetAttribute(&i->bus_bits, cudaDevAttrGlobalMemoryBusWidth, device);
    cudaRuntimeGetVersion(&i->runtime);
    cudaDriverGetVersion(&i->driver);
    i->cublaslt = cublasLtGetVersion();
    cudaGetLastError(); /* an attribute this driver lacks is not fatal */
    if ((e = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking)) != cudaSuccess)
        return open_fail(c, KERN_CUDA_EFAIL, err, errlen, "cudaStreamCreate",
                         cudaGetErrorString(e));
    if (cublasCreate(&c->blas) != CUBLAS_STATUS_SUCCESS) {
        c->blas = NULL;
        return open_fail(c, KERN_CUDA_EFAIL, err, errlen, "cublasCreate", "failed");
    }
    if (cublasSetStream(c->blas, c->stream) != CUBLAS_STATUS_SUCCESS ||
        cublasSetMathMode(c->blas, CUBLAS_PEDANTIC_MATH) != CUBLAS_STATUS_SUCCESS)
        return open_fail(c, KERN_CUDA_EFAIL, err, errlen, "cublasSetStream", "failed");
    if (cublasLtCreate(&c->lt) != CUBLAS_STATUS_SUCCESS) {
        c->lt = NULL;
        return open_fail(c, KERN_CUDA_EFAIL, err, errlen, "cublasLtCreate", "failed");
    }
    if ((e = cudaMalloc(&c->lt_ws, KC_LT_WS)) != cudaSuccess) {
        c->lt_ws = NULL;
        return open_fail(c, KERN_CUDA_ENOMEM, err, errlen, "cudaMalloc (cuBLASLt workspace)",
                         cudaGetErrorString(e));
    }
    *out = c;
    return 0;
}

extern "C" void kern_cuda_close(kern_cuda *c) {
    if (!c) return;
    cudaSetDevice(c->device);
    if (c->stream) cudaStreamSynchronize(c->stream);
    for (int i = 0; i < KC_LT_PLANS; i++) {
        kc_lt_plan *p = &c->plans[i];
        if (!p->used) continue;
        if (p->desc) cublasLtMatmulDescDestroy(p->desc);
        if (p->a) cublasLtMatrixLayoutDestroy(p->a);
        if (p->b) cublasLtMatrixLayoutDestroy(p->b);
        if (p->d) cublasLtMatrixLayoutDestroy(p->d);
    }
    if (c->lt) cublasLtDestroy(c->lt);
    if (c->blas) cublasDestroy(c->blas);
    cudaFree(c->lt_ws);
    cudaFree(c->i32);
    if (c->stream) cudaStreamDestroy(c->stream);
    cudaGetLastError();
    free(c);
}

extern "C" void kern_cuda_get_info(kern_cuda *c, kern_cuda_info *out) {
    size_t fr = 0, tot = 0;
    kern_cuda_bind(c);
    if (cudaMemGetInfo(&fr, &tot) == cudaSuccess) c->info.mem_free = fr;
    else cudaGetLastError();
    *out = c->info;
}

extern "C" void kern_cuda_get_stats(const kern_cuda *c, kern_cuda_stats *out) { *out = c->st; }

extern "C" void *kern_cuda_malloc(kern_cuda *c, size_t bytes) {
    void *p = NULL;
    kern_cuda_bind(c);
    if (cudaMalloc(&p, bytes ? bytes : 256) != cudaSuccess) {
        cudaGetLastError(); /* out of memory is the caller's to report */
        return NULL;
    }
    return p;
}

extern "C" void kern_cuda_free(kern_cuda *c, void *p) {
    if (!p) return;
    kern_cuda_bind(c);
    kc_cuda_err(c, cudaFree(p), "cudaFree");
}

extern "C" void *kern_cuda_host_alloc(kern_cuda *c, size_t bytes, int mapped) {
    void *p = NULL;
    kern_cuda_bind(c);
    unsigned flags = cudaHostAllocPortable | (mapped ? cudaHostAllocMapped : 0);
    if (cudaHostAlloc(&p, bytes ? bytes : 64, flags) != cudaSuccess) {
        cudaGetLastError();
        return NULL;
    }
    return p;
}

extern "C" void kern_cuda_host_free(kern_cuda *c, void *p) {
    if (!p) return;
    kern_cuda_bind(c);
    kc_cuda_err(c, cudaFreeHost(p), "cudaFreeHost");
}

extern "C" void *kern_cuda_host_dev(kern_cuda *c, void *host) {
    void *d = NULL;
    kern_cuda_bind(c);
    if (cudaHostGetDevicePointer(&d, host, 0) != cudaSuccess) {
        cudaGetLastError();
        return NULL;
    }
    return d;
}

extern "C" void kern_cuda_copy_async(kern_cuda *c, void *dst, const void *src, size_t n) {
    if (!n || c->status) return;
    kern_cuda_bind(c);
    kc_cuda_err(c, cudaMemcpyAsync(dst, src, n, cudaMemcpyDefault, c->stream), "cudaMemcpyAsync");
}

extern "C" int kern_cuda_copy_sync(kern_cuda *c, void *dst, const void *src, size_t n) {
    if (n && !c->status) {
        kern_cuda_bind(c);
        kc_cuda_err(c, cudaMemcpyAsync(dst, src, n, cudaMemcpyDefault, c->stream),
                    "cudaMemcpyAsync");
    }
    return kern_cuda_sync(c);
}

extern "C" void kern_cuda_memset_async(kern_cuda *c, void *dst, int value, size_t n) {
    if (!n || c->status) return;
    kern_cuda_bind(c);
    kc_cuda_err(c, cudaMemsetAsync(dst, value, n, c->stream), "cudaMemsetAsync");
}

extern "C" int kern_cuda_sync(kern_cuda *c) {
    kern_cuda_bind(c);
    kc_cuda_err(c, cudaStreamSynchronize(c->stream), "cudaStreamSynchronize");
    return c->status;
}
