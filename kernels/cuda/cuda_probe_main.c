/*
 * cuda_probe_main.c -- `parley-cuda-probe`: runs the CUDA toolchain probe
 * (kern_cuda_probe_run) on deterministic int8 vectors and prints what it
 * found.  Exit 0: the kernel matched its reference and cuBLAS/cuBLASLt
 * opened; 77: no CUDA device (expected on build machines); 1: failure.
 * On a build machine its value is that it links: parley_cuda + cudart +
 * cuBLAS + cuBLASLt resolve into one executable.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "kern_cuda_probe.h"
#include "pl_err.h"

int main(void) {
    enum { N = 1 << 20 | 3 }; /* odd length: the kernel's tail path runs too */
    int8_t *a = malloc(N), *b = malloc(N);
    kern_cuda_probe_info info;
    char err[PL_ERR_LEN];
    uint32_t s = 12345u;
    int rc;

    if (!a || !b) {
        fprintf(stderr, "parley-cuda-probe: out of memory\n");
        free(a);
        free(b);
        return 1;
    }
    for (int i = 0; i < N; i++) {
        s = s * 1664525u + 1013904223u;
        a[i] = (int8_t)(s >> 24);
        s = s * 1664525u + 1013904223u;
        b[i] = (int8_t)(s >> 24);
    }
    rc = kern_cuda_probe_run(a, b, N, &info, err, sizeof err);
    free(a);
    free(b);
    if (rc == KERN_CUDA_ENODEV) {
        printf("parley-cuda-probe: %s (runtime %d): nothing to run here\n", err,
               info.runtime_version);
        return 77;
    }
    if (rc) {
        fprintf(stderr, "parley-cuda-probe: %s\n", err);
        return 1;
    }
    printf("parley-cuda-probe: runtime %d, device sm_%d%d, cuBLAS %zu, cuBLASLt %zu, "
           "int8 dot %lld == reference %lld\n",
           info.runtime_version, info.device_cc_major, info.device_cc_minor, info.cublas_version,
           info.cublaslt_version, (long long)info.dot_device, (long long)info.dot_reference);
    return 0;
}
