/*
 * bench_util.c -- the scheduler benchmarks' shared pieces (bench_util.h).
 */
#include "bench_util.h"

#include <math.h>
#include <stdio.h>

#include "kv_hash.h"
#include "kv_sched_ops.h"
#include "pl_err.h"

uint64_t bench_mix(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

int bench_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double bench_pct(const double *sorted, int n, double p) {
    if (!n) return 0;
    int i = (int)ceil(p * n) - 1;
    return sorted[i < 0 ? 0 : i >= n ? n - 1 : i];
}

int bench_sched_open(eng_model *m, const eng_sched_config *cfg, int cache_on, int block,
                     const char *fp_label, int partial_blocks, kv_cache **kc, eng_sched **s) {
    char err[PL_ERR_LEN];
    eng_sched_cache_ops ops; /* copied by eng_sched_create */
    *kc = NULL;
    *s = NULL;
    if (cache_on) {
        kv_cache_config kcfg;
        kv_cache_config_default(&kcfg);
        kcfg.budget_bytes = cfg->kv_budget_bytes;
        kcfg.max_tokens = 1 << 20;
        kcfg.partial_blocks = partial_blocks;
        kv_fp_inputs fi = {eng_model_config(m)->arch_name, eng_model_digest(m), fp_label,
                           ENG_KV_QUANT_VERSION, (uint32_t)block};
        if (kv_cache_create(&kcfg, eng_model_kv_layout(m), kv_fingerprint(&fi), kc, err,
                            sizeof err) != 0) {
            fprintf(stderr, "bench: cache: %s\n", err);
            return -1;
        }
        kv_sched_ops_init(&ops, *kc);
    }
    if (eng_sched_create(m, cfg, cache_on ? &ops : NULL, s, err, sizeof err) != 0) {
        fprintf(stderr, "bench: scheduler: %s\n", err);
        if (*kc) kv_cache_destroy(*kc);
        *kc = NULL;
        return -1;
    }
    return 0;
}
