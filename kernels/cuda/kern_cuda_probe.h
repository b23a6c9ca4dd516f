/*
 * kern_cuda_probe.h -- proof that parley's CUDA toolchain works end to end.
 *
 * Purpose: the CUDA backend's build is only trustworthy if nvcc compiles for
 * the target GPU (sm_90a, Hopper) and the result links against the CUDA
 * runtime and cuBLAS/cuBLASLt.  This small library (parley_cuda) carries one
 * real kernel -- an int8 dot product with int32 accumulation, the core
 * operation of the engine's int8 GEMMs -- and a host entry point that runs
 * it against a scalar reference and opens cuBLAS and cuBLASLt handles.
 *
 * Data layout: plain host int8 vectors; the device copies are private.
 * Threading: callable from any thread; uses the current device and the
 * default stream, and synchronises before returning.
 * Ownership: the caller owns every buffer it passes; nothing is retained.
 * Failure behaviour: every CUDA/cuBLAS error becomes a negative return and a
 * message in the caller's buffer; no device at all is KERN_CUDA_ENODEV, so a
 * GPU-less build machine can tell "no GPU" from "broken".
 */
#ifndef KERN_CUDA_PROBE_H
#define KERN_CUDA_PROBE_H

#include <stddef.h>
#include <stdint.h>

#include "kern_cuda_err.h"

#ifdef __cplusplus
extern "C" {
#endif


/* Facts the probe gathered; all zero when the call failed early. */
typedef struct kern_cuda_probe_info {
    int runtime_version;     /* cudaRuntimeGetVersion(), e.g. 13000 */
    int device_cc_major;     /* compute capability of device 0 */
    int device_cc_minor;     /* ... its minor part */
    size_t cublas_version;   /* cublasGetProperty-derived, e.g. 130100 */
    size_t cublaslt_version; /* cublasLtGetVersion() */
    int64_t dot_device;      /* dot product computed by the kernel */
    int64_t dot_reference;   /* same dot product computed on the host */
} kern_cuda_probe_info;

/* kern_cuda_dot_i8_ref: scalar reference, sum of a[i]*b[i] for i < n. */
int64_t kern_cuda_dot_i8_ref(const int8_t *a, const int8_t *b, size_t n);

/*
 * kern_cuda_probe_run: copies a and b (n int8 each, 0 < n <= 1<<24) to the
 * device, computes their dot product with the kernel, compares it with
 * kern_cuda_dot_i8_ref, and creates/destroys a cuBLAS and a cuBLASLt
 * handle.  Returns 0 when everything worked and the results match;
 * KERN_CUDA_ENODEV without a device; KERN_CUDA_EINVAL for bad arguments;
 * KERN_CUDA_EFAIL otherwise.  A message goes into err (errlen bytes,
 * always NUL-terminated when errlen > 0) on failure; info (may be NULL) is
 * filled as far as the probe got.
 */
int kern_cuda_probe_run(const int8_t *a, const int8_t *b, size_t n, kern_cuda_probe_info *info,
                        char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif /* KERN_CUDA_PROBE_H */
