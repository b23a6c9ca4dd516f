/*
 * kern_cuda_fold.c -- per-channel requantisation of block-scaled and Q4_K
 * weight parts at upload (kern_cuda_fold.h).
 */
#include "kern_cuda_fold.h"

#include <float.h>
#include <math.h>

void kern_cuda_dequant_b32(const int8_t *q, const float *bscale, int cols, float *out) {
    for (int k = 0; k < cols; k++) out[k] = (float)q[k] * bscale[k / 32];
}

void kern_cuda_dequant_q4k(const uint8_t *u, const uint8_t *sc, const uint8_t *mn, const float *d,
                           const float *dmin, int cols, float *out) {
    for (int k = 0; k < cols; k++)
        out[k] = d[k / 256] * (float)sc[k / 32] * (float)u[k] - dmin[k / 256] * (float)mn[k / 32];
}

int kern_cuda_fold_row(const float *v, int cols, int8_t *q, float *scale) {
    float amax = 0;
    for (int k = 0; k < cols; k++) {
        float a = fabsf(v[k]);
        if (!(a < INFINITY)) return -1; /* inf or NaN */
        if (a > amax) amax = a;
    }
    float inv = 127.0f / amax;
    if (!(inv <= FLT_MAX)) { /* all zeros, or so small that 127 / max overflows */
        *scale = 0;
        for (int k = 0; k < cols; k++) q[k] = 0;
        return 0;
    }
    *scale = amax / 127.0f;
    for (int k = 0; k < cols; k++) {
        float r = nearbyintf(v[k] * inv);
        q[k] = (int8_t)(r > 127 ? 127 : r < -127 ? -127 : r);
    }
    return 0;
}

void kern_cuda_fold_err(const float *v, const int8_t *q, float scale, int cols, double *err2,
                        double *ref2) {
    double e = 0, r = 0;
    for (int k = 0; k < cols; k++) {
        double d = (double)q[k] * scale - v[k];
        e += d * d;
        r += (double)v[k] * v[k];
    }
    *err2 += e;
    *ref2 += r;
}
