/*
 * gpu_common.h -- helpers shared by the GPU test programs (tests/gpu):
 * a tiny case runner, comparisons, clocks, result lines and the device's
 * peak figures.  Header only.
 *
 * Output.  Every program prints human-readable lines and, for the summary
 * of tests/gpu/run.sh, machine-readable result lines "@ key=value" (one
 * fact each, no spaces in the key).  Programs exit 0 when every check
 * passed, 1 when one failed, 77 when no CUDA device is present.
 *
 * Peaks.  int8_tops is the dense int8 tensor peak: the data-sheet figure
 * for the parts known here (H100 / H200 SXM 1979 TOPS, ...), else SMs x
 * int8 ops per SM per clock (8192 on sm_90, 4096 on sm_80, 2048 on other
 * sm_8x) x the peak clock.  hbm_bps is the memory bandwidth the roofline
 * divides by: the data-sheet figure (H200 4.8 TB/s) when known, else
 * memory clock x 2 (DDR) x bus width; hbm_attr_bps is always the latter,
 * printed beside it.
 */
#ifndef GPU_COMMON_H
#define GPU_COMMON_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kern_cuda.h"

/* ---- runner ------------------------------------------------------------------------------- */

typedef struct gpu_case {
    const char *name; /* printed, and matched by the command-line filter */
    int (*fn)(void);  /* 0 pass, 1 fail */
} gpu_case;

/* Fail the current case with a message. */
#define GPU_CHECK(cond, ...)                                \
    do {                                                    \
        if (!(cond)) {                                      \
            printf("    FAIL %s:%d: ", __FILE__, __LINE__); \
            printf(__VA_ARGS__);                            \
            printf("\n");                                   \
            return 1;                                       \
        }                                                   \
    } while (0)

/* A fact for the summary. */
#define GPU_RESULT(key, fmt, ...) printf("@ %s=" fmt "\n", key, __VA_ARGS__)

static inline double gpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* 1 when name contains one of the comma-separated words of filter (NULL: all). */
static inline int gpu_match(const char *name, const char *filter) {
    if (!filter) return 1;
    for (const char *f = filter; *f;) {
        const char *e = strchr(f, ',');
        size_t n = e ? (size_t)(e - f) : strlen(f);
        for (const char *p = name; n && *p; p++)
            if (!strncmp(p, f, n)) return 1;
        f += n + (e != NULL);
    }
    return 0;
}

/* Run the cases gpu_match picks; returns the exit code. */
static inline int gpu_run(const gpu_case *cases, int n, const char *filter, const char *prog) {
    int pass = 0, fail = 0;
    for (int i = 0; i < n; i++) {
        if (!gpu_match(cases[i].name, filter)) continue;
        double t0 = gpu_now();
        int rc = cases[i].fn();
        printf("%s  %-34s %8.1f ms\n", rc ? "FAIL" : "ok  ", cases[i].name, 1e3 * (gpu_now() - t0));
        fflush(stdout);
        rc ? fail++ : pass++;
    }
    printf("%s: %d passed, %d failed\n", prog, pass, fail);
    GPU_RESULT(prog, "%d/%d", pass, pass + fail);
    return fail ? 1 : 0;
}

/* ---- comparisons ---------------------------------------------------------------------------- */

/* max |a - b| / max |b| (0 when b is all zeros and a equals it). */
static inline double gpu_max_rel(const float *a, const float *b, size_t n) {
    double e = 0, m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (!(d <= e)) e = d; /* NaN sticks */
        if (fabs(b[i]) > m) m = fabs(b[i]);
    }
    return m > 0 ? e / m : e;
}

/* ||a - b|| / ||b|| over n values. */
static inline double gpu_rms_rel(const float *a, const float *b, size_t n) {
    double e = 0, r = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - b[i];
        e += d * d;
        r += (double)b[i] * b[i];
    }
    return r > 0 ? sqrt(e / r) : sqrt(e);
}

/* ---- random data ---------------------------------------------------------------------------- */

static inline uint64_t gpu_rand(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform in [-1, 1). */
static inline float gpu_unif(uint64_t *s) {
    return (float)((double)(gpu_rand(s) >> 11) / 4503599627370496.0 - 1.0);
}

/* Approximately normal (sum of four uniforms, unit variance). */
static inline float gpu_gauss(uint64_t *s) {
    float a = gpu_unif(s) + gpu_unif(s) + gpu_unif(s) + gpu_unif(s);
    return a * 0.8660254f;
}

/* ---- device figures ------------------------------------------------------------------------ */

typedef struct gpu_peaks {
    double int8_ops;     /* dense int8 ops per second */
    const char *int8_of; /* "spec" or "computed" */
    double hbm_bps;      /* bytes per second for the roofline */
    const char *hbm_of;  /* "spec" or "attributes" */
    double attr_bps;     /* memory clock x 2 x bus width */
} gpu_peaks;

static inline void gpu_peaks_of(const kern_cuda_info *i, gpu_peaks *p) {
    p->attr_bps = (double)i->mem_clock_khz * 1e3 * 2 * i->bus_bits / 8;
    int per_clk = i->cc_major >= 9 ? 8192 : i->cc_major == 8 && i->cc_minor == 0 ? 4096 : 2048;
    p->int8_ops = (double)i->n_sm * per_clk * i->clock_khz * 1e3;
    p->int8_of = "computed";
    p->hbm_bps = p->attr_bps;
    p->hbm_of = "attributes";
    static const struct {
        const char *name; /* substring of the device name, most specific first */
        double tops, tbps;
    } known[] = {{"H200 NVL", 1671, 4.8},        {"H200", 1979, 4.8},
                 {"H100 NVL", 1671, 3.9},        {"H100 PCIe", 1513, 2.0},
                 {"H100", 1979, 3.35},           {"A100-SXM4-80GB", 624, 2.039},
                 {"A100-SXM4-40GB", 624, 1.555}, {"A100", 624, 1.935}};
    for (size_t k = 0; k < sizeof known / sizeof known[0]; k++)
        if (strstr(i->name, known[k].name)) {
            p->int8_ops = known[k].tops * 1e12;
            p->int8_of = "spec";
            p->hbm_bps = known[k].tbps * 1e12;
            p->hbm_of = "spec";
            break;
        }
}

/* Print the device and its peaks (and result lines). */
static inline void gpu_print_device(const kern_cuda_info *i, const gpu_peaks *p) {
    printf(
        "device: %s (sm_%d%d, %d SMs, %.0f MHz, %.1f GiB, runtime %d, driver %d, cuBLASLt %zu)\n",
        i->name, i->cc_major, i->cc_minor, i->n_sm, i->clock_khz / 1e3,
        (double)i->mem_total / (1 << 30), i->runtime, i->driver, i->cublaslt);
    printf("peaks: int8 dense %.0f TOPS (%s); memory %.2f TB/s (%s; clock x bus %.2f TB/s)\n",
           p->int8_ops / 1e12, p->int8_of, p->hbm_bps / 1e12, p->hbm_of, p->attr_bps / 1e12);
}

#endif
