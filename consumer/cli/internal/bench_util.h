/*
 * bench_util.h -- what the scheduler benchmarks share (cmd_bench.c's
 * multiturn workload, cmd_bench_chat.c's chat workload): a seeded bit
 * mixer for deterministic workloads, percentiles of sorted samples, and
 * the scheduler with or without a prefix cache in front of it.
 */
#ifndef BENCH_UTIL_H
#define BENCH_UTIL_H

#include <stdint.h>

#include "eng_model.h"
#include "eng_sched.h"
#include "kv_cache.h"

/* SplitMix64 finaliser: a deterministic draw from x. */
uint64_t bench_mix(uint64_t x);

/* qsort comparator of doubles, ascending. */
int bench_cmp_double(const void *a, const void *b);

/* The p-quantile (0..1, nearest rank) of n ascending samples; 0 if none. */
double bench_pct(const double *sorted, int n, double p);

/* Create the scheduler over m with cfg.  cache_on: in front of a prefix
 * cache of cfg->kv_budget_bytes (*kc, destroyed by the caller after the
 * scheduler; partial_blocks as kv_cache_config) fingerprinted with
 * fp_label and block tokens; else *kc = NULL.  Returns 0, or -1 with a
 * message on stderr. */
int bench_sched_open(eng_model *m, const eng_sched_config *cfg, int cache_on, int block,
                     const char *fp_label, int partial_blocks, kv_cache **kc, eng_sched **s);

#endif
