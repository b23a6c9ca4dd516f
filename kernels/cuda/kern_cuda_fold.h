/*
 * kern_cuda_fold.h -- scale folding for the CUDA backend's int8 GEMM:
 * turning a weight part's own scales into one scale per output channel
 * at upload.  Plain C, no CUDA: unit-tested on the CPU.
 *
 * Purpose.  The device GEMM (cuBLASLt IMMA or the dp4a GEMV) sums int8
 * products over the whole row in int32 and applies the scales once, in a
 * dequantisation epilogue: C = sum * x_scale[m] * w_scale[n].  That needs
 * one scale per weight row.  Parts with finer scales are folded at upload:
 *   ENG_WFMT_I8_ROW  already per channel: kept bit for bit;
 *   ENG_WFMT_I8_B32  value = q * bscale[k / 32] (Q8_0, Q4_0, Q5_0, IQ4_NL
 *                    codes, lut or not): dequantised to float, requantised;
 *   ENG_WFMT_Q4_K    value = d * sc * u - dmin * mn: the same.
 * Requantisation is the loader's per-channel rule (model_load.c):
 * scale = max|v| / 127, q = round-half-even(v * (127 / max|v|)), a zero row
 * gets scale 0.  Its error is at most scale / 2 per value; the loader's
 * measurements (model_load.c: llama-1b Q8_0 0.73% RMS weight error, GEMM
 * output error 0.83% -> 1.11%) and this backend's (test_cuda_host
 * fold_error, tests/gpu) put numbers on it.
 *
 * Data layout.  Rows of cols values; block scales [cols / 32] per row;
 * Q4_K codes one per byte, sc / mn [cols / 32], d / dmin [cols / 256].
 * Threading: pure functions.  Failure: kern_cuda_fold_row returns -1 for a
 * non-finite value (the row is then unusable).
 */
#ifndef KERN_CUDA_FOLD_H
#define KERN_CUDA_FOLD_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* out[k] = q[k] * bscale[k / 32] for k < cols (cols a multiple of 32). */
void kern_cuda_dequant_b32(const int8_t *q, const float *bscale, int cols, float *out);
/* out[k] = d[k/256] * sc[k/32] * u[k] - dmin[k/256] * mn[k/32] (cols a multiple of 256). */
void kern_cuda_dequant_q4k(const uint8_t *u, const uint8_t *sc, const uint8_t *mn, const float *d,
                           const float *dmin, int cols, float *out);
/* Per-channel int8 of a float row (rule above).  Returns 0 or -1 (non-finite). */
int kern_cuda_fold_row(const float *v, int cols, int8_t *q, float *scale);
/* Add sum_k (q[k] * scale - v[k])^2 to *err2 and sum_k v[k]^2 to *ref2. */
void kern_cuda_fold_err(const float *v, const int8_t *q, float scale, int cols, double *err2,
                        double *ref2);

#ifdef __cplusplus
}
#endif

#endif
