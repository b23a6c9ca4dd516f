/*
 * bench_engine.c -- `parley bench --workload engine`: the CPU engine's
 * throughput figures for one model in one process, next to this machine's
 * memory-bandwidth roofline, plus a per-kernel profile.
 *
 * Figures (each a median over --repeat runs; a short warm-up run first is
 * not counted):
 *   membw     memory read bandwidth on the model's thread count
 *             (kern_membw.h; buffer --membw-mib, default 1 GiB);
 *   prefill   --prompt tokens of one sequence in one eng_forward call
 *             (chunk = prompt): tokens / call seconds;
 *   decode    --gen single-token steps after that prompt, greedy: gen /
 *             seconds inside eng_forward; roofline = membw /
 *             eng_model_weight_bytes (tokens/s if every step only streamed
 *             the weights once at the best measured pass: the roofline is
 *             a ceiling, and the median pass drops when other processes
 *             share the memory bus) and decode as a percentage of it.
 *             The bandwidth a host gives moves between two levels over
 *             seconds to minutes on some virtual machines (measured on an
 *             AMD EPYC Zen 5 VM: 40-48 or 67-77 GB/s, huge pages granted
 *             either way; docs/kernels.md), so one probe at the start can
 *             be at the other level from the decode it is the ceiling of.
 *             Hence a paired probe: right after each timed decode repeat,
 *             BE_PAIRED_PASSES more passes over a buffer of the same size,
 *             and that repeat's share is its decode against the roofline
 *             of its own best paired pass; decode / roofline is the median
 *             of these shares, and the paired passes' range is printed;
 *   macs      int8 multiply-accumulate throughput of the GEMM's instruction
 *             mix at the ISA in use, on the model's thread count
 *             (kern_macs.h; none for scalar, AMX probed as VNNI); the
 *             compute roofline: prefill and batched decode tokens/s times
 *             the GEMMs' MACs per token (eng_model_weight_macs; a prefill
 *             token pays the output projection 1/prompt times; attention
 *             not counted) as a percentage of the best probe pass, paired
 *             like the bandwidth: BE_PAIRED_PASSES compute passes after
 *             each single-stream and each batch repeat, the share the
 *             median over repeats of each against its own; and the decode
 *             compute roofline: the paired probe over the GEMM MACs of one
 *             decoded token (layers and output projection), the tokens/s
 *             decode would reach if its GEMMs ran at the probe's rate (a
 *             ceiling: a 4-bit GEMV also unpacks, and an M = 1 GEMV waits
 *             on its loads), so a decode under it and far under the
 *             bandwidth roofline is bound by neither pipe nor bus;
 *   batch     --batch sequences, each with its own --batch-prompt-token
 *             prompt (prefilled once, untimed), decoding --gen steps
 *             together (one eng_forward with --batch steps per step):
 *             batch * gen / seconds inside eng_forward.  Each repeat cuts
 *             the sequences back to their prompts (eng_kvseq_truncate) and
 *             decodes the same tokens again.
 * Next tokens are the argmax of the logits (sampling is not part of the
 * engine's cost and is not timed): with --logits argmax (the default) each
 * step asks eng_forward for the argmax only (ENG_LOGITS_ARGMAX, what the
 * scheduler does for greedy requests: the output projection reduces its
 * rows as it computes them), with --logits full for every logits row
 * (ENG_LOGITS_LAST, written into the bench's buffers) and the argmax
 * taken outside the timed call.  Prompts are `parley generate
 * --random-prompt`'s ids: seed 0 for the single stream, seed 1 + i for
 * batch sequence i, so tests/bench/bench_cpu.py gives llama.cpp the same
 * ids.
 *
 * Profile: the backend table is wrapped (eng_prof.h) for one prefill chunk
 * of --prompt tokens, for up to 8 single-stream decode steps after it
 * (averaged per step) and for one batched decode step, each run after the
 * timed repeats; the table gives each slot's and each GEMM
 * weight kind's time as a share of the step, and the GEMMs' effective
 * weight-read bandwidth.
 *
 * Output: a readable report; with --json also one JSON object on the last
 * line holding every figure.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli_opt.h"
#include "eng_model.h"
#include "eng_prof.h"
#include "eng_sampler.h"
#include "kern_isa.h"
#include "kern_macs.h"
#include "kern_membw.h"
#include "kern_pool.h"
#include "eng_cli.h"
#include "pl_err.h"
#include "pl_time.h"

/* Options. */
typedef struct be_opts {
    const char *model;   /* GGUF path */
    int threads;         /* compute threads (0: all CPUs) */
    const char *isa;     /* ISA cap name or NULL */
    int prompt, gen;     /* single-stream prompt tokens, decode steps (also batched) */
    int batch;           /* batched decode sequences (0: skip) */
    int batch_prompt;    /* prompt tokens of each batched sequence */
    int repeat;          /* timed repeats (medians) */
    int block;           /* KV block tokens */
    int membw_mib;       /* bandwidth buffer MiB */
    int json;            /* 1: JSON object on the last line */
    const char *logits;  /* --logits argmax|full, or NULL (argmax) */
    int full;            /* 1: steps ask for full logits rows (--logits full) */
    const char *backend; /* --backend auto|cpu|cuda, or NULL */
    const char *weights; /* --weights native|int8, or NULL */
} be_opts;

/* Everything measured (JSON and the table read it). */
typedef struct be_figs {
    double bw_best, bw_median;              /* GB/s */
    double prefill_tps, decode_tps;         /* medians */
    double prefill_min, prefill_max;        /* spread over repeats */
    double decode_min, decode_max;          /* spread over repeats */
    double roofline_tps, roofline_pct;      /* median paired roofline and share (above) */
    double start_roofline_pct;              /* decode against the start probe's best pass */
    double compute_roofline_tps;            /* decode tok/s if bound by the paired MAC probe */
    double pair_bw_median;                  /* GB/s: median over repeats of the best paired pass */
    double pair_bw_min, pair_bw_max;        /* GB/s: that pass's lowest / highest repeat */
    double macs_best, macs_median;          /* int8 GMAC/s of the compute probe (0: not probed) */
    double macs_layers, macs_output;        /* GEMM MACs per token (eng_model_weight_macs) */
    double prefill_pct, batch_pct;          /* prefill / batched decode as a share of the probe */
    double batch_tps, batch_min, batch_max; /* aggregate tok/s */
    int prof_decode_steps;                  /* decode steps the decode profile covers */
    double huge_mib;         /* MiB in transparent huge pages at the end, -1 unknown */
    eng_prof_report prof[3]; /* prefill chunk, decode (summed), batch step */
    int have_prof[3];        /* 1: prof[i] filled */
} be_figs;

enum { BE_PROF_PREFILL = 0, BE_PROF_DECODE = 1, BE_PROF_BATCH = 2 };

/* Timed probe passes, bandwidth and compute, after each repeat (its paired rooflines). */
#define BE_PAIRED_PASSES 3

/* The bandwidth probe beside the model: a pool of the model's size (the
 * model's own is private) and the buffer size. */
typedef struct be_probe {
    kern_pool *pool; /* idle while the model runs */
    size_t bytes;    /* bandwidth buffer bytes (--membw-mib) */
    size_t wbytes;   /* weight bytes one decode step reads */
    double macs_pre; /* GEMM MACs per prefill token (output projection once per chunk) */
    double macs_tok; /* GEMM MACs per decoded token */
} be_probe;

/* The paired compute probe: 100 * tps * macs / (best paired pass), or 0
 * where the ISA has no probe; -1 on failure (printed).  *gmacs (if not
 * NULL) gets the best paired pass. */
static double be_paired_macs(const be_probe *bp, double tps, double macs, double *gmacs) {
    char err[PL_ERR_LEN];
    kern_macs_result mc;
    if (kern_macs_measure(bp->pool, 200000, BE_PAIRED_PASSES, &mc, err, sizeof err) != 0) {
        fprintf(stderr, "bench: %s\n", err);
        return -1;
    }
    if (gmacs) *gmacs = mc.best_gmacs;
    return mc.best_gmacs > 0 ? 100 * tps * macs / (mc.best_gmacs * 1e9) : 0;
}

static double be_now(void) { return pl_mono_s(); }

/* MiB of this process's memory in transparent huge pages (Linux
 * /proc/self/smaps_rollup; -1 where unknown).  Packed weights and the
 * bandwidth buffer ask for them (kern_huge_alloc); whether the kernel
 * grants them varies from run to run and moves both decode and the
 * measured bandwidth, so the figure is printed beside them. */
static double be_huge_mib(void) {
    FILE *fp = fopen("/proc/self/smaps_rollup", "r");
    if (!fp) return -1;
    char line[256];
    double mib = -1;
    long kb;
    while (fgets(line, sizeof line, fp))
        if (sscanf(line, "AnonHugePages: %ld kB", &kb) == 1) mib = (double)kb / 1024.0;
    fclose(fp);
    return mib;
}

static int32_t be_argmax(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

static int be_cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median of v[0..n) (sorts v); min / max out. */
static double be_median(double *v, int n, double *mn, double *mx) {
    qsort(v, (size_t)n, sizeof *v, be_cmp);
    *mn = v[0];
    *mx = v[n - 1];
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* eng_forward, returning its wall seconds or -1 (message printed). */
static double be_forward(eng_model *m, eng_seq_step *st, int n) {
    char err[PL_ERR_LEN];
    double t0 = be_now();
    if (eng_forward(m, st, n, err, sizeof err) != 0) {
        fprintf(stderr, "bench: forward: %s\n", err);
        return -1;
    }
    return be_now() - t0;
}

/* Prefill ids into an empty kv (one chunk) and decode gen greedy steps;
 * *t_pre / *t_dec get the seconds inside eng_forward.  prof: profile the
 * prefill (into pp) and the decode steps (into pd) instead of timing only. */
/* A step of one token's logits (full: the row into out; else its argmax
 * into *next). */
static eng_seq_step be_step(eng_kvseq *kv, const int32_t *tokens, int n, int full, float *out,
                            int32_t *next) {
    return (eng_seq_step){.kv = kv,
                          .tokens = tokens,
                          .n_tokens = n,
                          .logits = full ? ENG_LOGITS_LAST : ENG_LOGITS_ARGMAX,
                          .out = out,
                          .next = next};
}

static int be_stream(eng_model *m, eng_kvseq *kv, const int32_t *ids, int n, int gen, int full,
                     float *logits, double *t_pre, double *t_dec, eng_prof_report *pp,
                     eng_prof_report *pd) {
    char err[PL_ERR_LEN];
    int V = eng_model_config(m)->n_vocab;
    int32_t tok = 0, next = 0;
    eng_seq_step st = be_step(kv, ids, n, full, logits, &next);
    if (pp && eng_prof_start(m, err, sizeof err) != 0) goto perr;
    *t_pre = be_forward(m, &st, 1);
    if (pp) {
        eng_prof_stop(m, pp);
        pp->elapsed_s = *t_pre; /* the step is eng_forward's time, not the bench's */
    }
    if (*t_pre < 0) return -1;
    tok = full ? be_argmax(logits, V) : next;
    if (pd && eng_prof_start(m, err, sizeof err) != 0) goto perr;
    *t_dec = 0;
    for (int i = 0; i < gen; i++) {
        eng_seq_step d = be_step(kv, &tok, 1, full, logits, &next);
        double t = be_forward(m, &d, 1);
        if (t < 0) {
            if (pd) eng_prof_stop(m, NULL);
            return -1;
        }
        *t_dec += t;
        tok = full ? be_argmax(logits, V) : next;
    }
    if (pd) {
        eng_prof_stop(m, pd);
        pd->elapsed_s = *t_dec; /* without the argmax between the steps */
    }
    return 0;
perr:
    fprintf(stderr, "bench: %s\n", err);
    return -1;
}

/* Single stream: warm-up, timed repeats (each followed by its paired
 * bandwidth passes), then the profiled run. */
static int be_single(eng_model *m, const be_opts *o, eng_kv_allocator *alloc, const be_probe *bp,
                     be_figs *f) {
    char err[PL_ERR_LEN];
    int rc = -1, V = eng_model_config(m)->n_vocab;
    int32_t *ids = malloc((size_t)o->prompt * sizeof *ids);
    float *logits = malloc((size_t)V * sizeof *logits);
    double *pre = calloc((size_t)o->repeat, sizeof *pre);
    double *dec = calloc((size_t)o->repeat, sizeof *dec);
    double *share = calloc((size_t)o->repeat, sizeof *share);
    double *roof = calloc((size_t)o->repeat, sizeof *roof);
    double *cshare = calloc((size_t)o->repeat, sizeof *cshare);
    double *croof = calloc((size_t)o->repeat, sizeof *croof);
    if (!ids || !logits || !pre || !dec || !share || !roof || !cshare || !croof) {
        fprintf(stderr, "bench: out of memory\n");
        goto out;
    }
    eng_random_prompt(ids, o->prompt, V, 0);
    for (int r = -1; r <= o->repeat; r++) { /* -1: warm-up, repeat: profiled */
        eng_kvseq kv;
        if (eng_kvseq_init(&kv, eng_model_kv_layout(m), alloc, err, sizeof err) != 0) {
            fprintf(stderr, "bench: %s\n", err);
            goto out;
        }
        /* warm-up: a short prompt and two steps; profile: up to 8 decode steps */
        int prof = r == o->repeat, n = r < 0 && o->prompt > 32 ? 32 : o->prompt;
        int gen = r < 0 ? (o->gen < 2 ? o->gen : 2) : prof && o->gen > 8 ? 8 : o->gen;
        double tp = 0, td = 0;
        int bad = be_stream(m, &kv, ids, n, gen, o->full, logits, &tp, &td,
                            prof ? &f->prof[BE_PROF_PREFILL] : NULL,
                            prof ? &f->prof[BE_PROF_DECODE] : NULL);
        eng_kvseq_free(&kv);
        if (bad) goto out;
        if (prof) {
            f->have_prof[BE_PROF_PREFILL] = f->have_prof[BE_PROF_DECODE] = 1;
            f->prof_decode_steps = gen;
        } else if (r >= 0) {
            kern_membw_result bw;
            if (kern_membw_measure(bp->pool, bp->bytes, BE_PAIRED_PASSES, &bw, err, sizeof err)) {
                fprintf(stderr, "bench: %s\n", err);
                goto out;
            }
            pre[r] = o->prompt / (tp > 0 ? tp : 1e-9);
            dec[r] = gen / (td > 0 ? td : 1e-9);
            roof[r] = bw.best_gbs * 1e9 / (double)(bp->wbytes ? bp->wbytes : 1);
            share[r] = 100 * dec[r] / roof[r];
            double gm = 0;
            if ((cshare[r] = be_paired_macs(bp, pre[r], bp->macs_pre, &gm)) < 0) goto out;
            /* the decode compute roofline: every GEMM MAC of a token at the
             * probe's rate (0 where the ISA has no probe) */
            croof[r] = bp->macs_tok > 0 ? gm * 1e9 / bp->macs_tok : 0;
            fprintf(stderr,
                    "  repeat %d: prefill %.1f tok/s, decode %.2f tok/s; paired bandwidth %.1f "
                    "GB/s, decode %.1f%% of its roofline\n",
                    r + 1, pre[r], dec[r], bw.best_gbs, share[r]);
        }
    }
    double lo, hi;
    f->prefill_tps = be_median(pre, o->repeat, &f->prefill_min, &f->prefill_max);
    f->decode_tps = be_median(dec, o->repeat, &f->decode_min, &f->decode_max);
    f->roofline_pct = be_median(share, o->repeat, &lo, &hi);
    f->prefill_pct = be_median(cshare, o->repeat, &lo, &hi);
    f->compute_roofline_tps = be_median(croof, o->repeat, &lo, &hi);
    double roof_lo, roof_hi, gb = (double)bp->wbytes / 1e9; /* tok/s -> GB/s */
    f->roofline_tps = be_median(roof, o->repeat, &roof_lo, &roof_hi);
    f->pair_bw_median = f->roofline_tps * gb;
    f->pair_bw_min = roof_lo * gb;
    f->pair_bw_max = roof_hi * gb;
    rc = 0;
out:
    free(ids);
    free(logits);
    free(pre);
    free(dec);
    free(share);
    free(roof);
    free(cshare);
    free(croof);
    return rc;
}

/* One batched decode step over every sequence: tok[i] in, argmax out. */
static double be_batch_step(eng_model *m, eng_seq_step *st, eng_kvseq *kv, int32_t *tok,
                            int32_t *next, int full, float *logits, int B, int V) {
    for (int i = 0; i < B; i++)
        st[i] = be_step(&kv[i], &tok[i], 1, full, logits + (size_t)i * V, &next[i]);
    double t = be_forward(m, st, B);
    for (int i = 0; t >= 0 && i < B; i++)
        tok[i] = full ? be_argmax(logits + (size_t)i * V, V) : next[i];
    return t;
}

/* Batched decode: prefill every sequence once, then repeats of gen steps
 * from the prompts' end; the profile covers one more step. */
static int be_batched(eng_model *m, const be_opts *o, eng_kv_allocator *alloc, const be_probe *bp,
                      be_figs *f) {
    char err[PL_ERR_LEN];
    int rc = -1, B = o->batch, P = o->batch_prompt, V = eng_model_config(m)->n_vocab, n_init = 0;
    eng_kvseq *kv = calloc((size_t)B, sizeof *kv);
    eng_seq_step *st = calloc((size_t)B, sizeof *st);
    int32_t *ids = malloc((size_t)B * P * sizeof *ids);
    int32_t *first = malloc((size_t)B * sizeof *first), *tok = malloc((size_t)B * sizeof *tok);
    int32_t *next = malloc((size_t)B * sizeof *next);
    float *logits = malloc((size_t)B * V * sizeof *logits);
    double *tps = calloc((size_t)o->repeat, sizeof *tps);
    double *cshare = calloc((size_t)o->repeat, sizeof *cshare);
    if (!kv || !st || !ids || !first || !tok || !next || !logits || !tps || !cshare) {
        fprintf(stderr, "bench: out of memory\n");
        goto out;
    }
    for (; n_init < B; n_init++) {
        if (eng_kvseq_init(&kv[n_init], eng_model_kv_layout(m), alloc, err, sizeof err) != 0) {
            fprintf(stderr, "bench: %s\n", err);
            goto out;
        }
        eng_random_prompt(ids + (size_t)n_init * P, P, V, 1 + (uint64_t)n_init);
        eng_seq_step s = {.kv = &kv[n_init],
                          .tokens = ids + (size_t)n_init * P,
                          .n_tokens = P,
                          .logits = ENG_LOGITS_LAST,
                          .out = logits + (size_t)n_init * V};
        st[n_init] = s;
    }
    double tp = be_forward(m, st, B);
    if (tp < 0) goto out;
    fprintf(stderr, "  batch prefill: %d x %d tokens in %.2f s (untimed)\n", B, P, tp);
    for (int i = 0; i < B; i++) first[i] = be_argmax(logits + (size_t)i * V, V);
    for (int r = -1; r <= o->repeat; r++) { /* -1: warm-up (one step), repeat: profiled step */
        for (int i = 0; i < B; i++) {
            if (eng_kvseq_truncate(&kv[i], P) == 0) continue;
            /* decode released sliding-window blocks the prompt's end still
             * attends (P + gen past the window): prefill it again, untimed */
            eng_kvseq_free(&kv[i]);
            eng_seq_step s = {.kv = &kv[i],
                              .tokens = ids + (size_t)i * P,
                              .n_tokens = P,
                              .logits = ENG_LOGITS_LAST,
                              .out = logits};
            if (eng_kvseq_init(&kv[i], eng_model_kv_layout(m), alloc, err, sizeof err) != 0 ||
                be_forward(m, &s, 1) < 0) {
                fprintf(stderr, "bench: cannot restore a batched sequence to its prompt\n");
                goto out;
            }
        }
        memcpy(tok, first, (size_t)B * sizeof *tok);
        int prof = r == o->repeat, steps = r >= 0 && !prof ? o->gen : 1;
        if (prof && eng_prof_start(m, err, sizeof err) != 0) {
            fprintf(stderr, "bench: %s\n", err);
            goto out;
        }
        double t = 0;
        for (int s = 0; s < steps && t >= 0; s++) {
            double ts = be_batch_step(m, st, kv, tok, next, o->full, logits, B, V);
            t = ts < 0 ? -1 : t + ts;
        }
        if (prof) {
            eng_prof_stop(m, &f->prof[BE_PROF_BATCH]);
            f->prof[BE_PROF_BATCH].elapsed_s = t; /* without the 64 argmaxes after it */
            f->have_prof[BE_PROF_BATCH] = 1;
        }
        if (t < 0) goto out;
        if (r >= 0 && !prof) {
            tps[r] = (double)B * steps / (t > 0 ? t : 1e-9);
            if ((cshare[r] = be_paired_macs(bp, tps[r], bp->macs_tok, NULL)) < 0) goto out;
            fprintf(stderr,
                    "  repeat %d: batch-%d decode %.1f tok/s, %.1f%% of its paired compute probe\n",
                    r + 1, B, tps[r], cshare[r]);
        }
    }
    double lo, hi;
    f->batch_tps = be_median(tps, o->repeat, &f->batch_min, &f->batch_max);
    f->batch_pct = be_median(cshare, o->repeat, &lo, &hi);
    rc = 0;
out:
    for (int i = 0; i < n_init; i++) eng_kvseq_free(&kv[i]);
    free(kv);
    free(st);
    free(ids);
    free(first);
    free(next);
    free(tok);
    free(logits);
    free(tps);
    free(cshare);
    return rc;
}

/* The profile table: one column per profiled run, time per step in ms and
 * share of the step; GEMM rows per weight kind with effective GB/s. */
static void be_print_prof(const be_figs *f, const be_opts *o) {
    double div[3] = {1, f->prof_decode_steps > 0 ? f->prof_decode_steps : 1, 1};
    char head[3][48];
    snprintf(head[0], sizeof head[0], "prefill %d tok", o->prompt);
    snprintf(head[1], sizeof head[1], "decode (avg %d)", f->prof_decode_steps);
    snprintf(head[2], sizeof head[2], "batch-%d step", o->batch);
    printf("\nper-kernel breakdown (ms per step, share of the step):\n");
    printf("  %-16s", "slot");
    for (int c = 0; c < 3; c++)
        if (f->have_prof[c]) printf(" %22s", head[c]);
    printf("\n");
    for (int s = 0; s <= ENG_PROF_N_SLOTS + 1; s++) {
        const char *name = s < ENG_PROF_N_SLOTS    ? eng_prof_slot_name(s)
                           : s == ENG_PROF_N_SLOTS ? "other (forward)"
                                                   : "step total";
        int any = s >= ENG_PROF_N_SLOTS;
        for (int c = 0; c < 3; c++)
            if (f->have_prof[c] && s < ENG_PROF_N_SLOTS && f->prof[c].slot_calls[s]) any = 1;
        if (!any) continue;
        printf("  %-16s", name);
        for (int c = 0; c < 3; c++) {
            if (!f->have_prof[c]) continue;
            const eng_prof_report *r = &f->prof[c];
            double sum = 0, v;
            for (int k = 0; k < ENG_PROF_N_SLOTS; k++) sum += r->slot_s[k];
            v = s < ENG_PROF_N_SLOTS    ? r->slot_s[s]
                : s == ENG_PROF_N_SLOTS ? r->elapsed_s - sum
                                        : r->elapsed_s;
            printf(" %11.3f ms %6.1f%%", 1e3 * v / div[c],
                   r->elapsed_s > 0 ? 100 * v / r->elapsed_s : 0);
        }
        printf("\n");
    }
    printf("  GEMM by weight (ms per step, share of the step, effective weight GB/s):\n");
    for (int w = 0; w < ENG_PROF_N_WEIGHTS; w++) {
        int any = 0;
        for (int c = 0; c < 3; c++)
            if (f->have_prof[c] && f->prof[c].weight_calls[w]) any = 1;
        if (!any) continue;
        printf("  %-16s", eng_prof_weight_name(w));
        for (int c = 0; c < 3; c++) {
            if (!f->have_prof[c]) continue;
            const eng_prof_report *r = &f->prof[c];
            double t = r->weight_s[w];
            printf(" %6.1f %5.1f%% %4.1fGB/s", 1e3 * t / div[c],
                   r->elapsed_s > 0 ? 100 * t / r->elapsed_s : 0,
                   t > 0 ? r->weight_bytes[w] / t / 1e9 : 0);
        }
        printf("\n");
    }
}

/* JSON string: printable ASCII, quotes and backslashes replaced. */
static void be_json_str(const char *s, size_t n) {
    putchar('"');
    for (size_t i = 0; i < n && s[i]; i++)
        putchar(s[i] >= 32 && s[i] < 127 && s[i] != '"' && s[i] != '\\' ? s[i] : '_');
    putchar('"');
}

static void be_json_prof(const char *key, const eng_prof_report *r, double div) {
    printf(",\"%s\":{\"step_ms\":%.4f,\"slots\":{", key, 1e3 * r->elapsed_s / div);
    double sum = 0;
    for (int s = 0; s < ENG_PROF_N_SLOTS; s++) {
        sum += r->slot_s[s];
        printf("%s\"%s\":{\"ms\":%.4f,\"share\":%.4f,\"calls\":%ld}", s ? "," : "",
               eng_prof_slot_name(s), 1e3 * r->slot_s[s] / div,
               r->elapsed_s > 0 ? r->slot_s[s] / r->elapsed_s : 0, r->slot_calls[s]);
    }
    printf(",\"other\":{\"ms\":%.4f,\"share\":%.4f}},\"gemm\":{", 1e3 * (r->elapsed_s - sum) / div,
           r->elapsed_s > 0 ? (r->elapsed_s - sum) / r->elapsed_s : 0);
    for (int w = 0; w < ENG_PROF_N_WEIGHTS; w++)
        printf("%s\"%s\":{\"ms\":%.4f,\"share\":%.4f,\"calls\":%ld,\"rows\":%.0f,\"gbs\":%.3f}",
               w ? "," : "", eng_prof_weight_name(w), 1e3 * r->weight_s[w] / div,
               r->elapsed_s > 0 ? r->weight_s[w] / r->elapsed_s : 0, r->weight_calls[w],
               r->weight_rows[w],
               r->weight_s[w] > 0 ? r->weight_bytes[w] / r->weight_s[w] / 1e9 : 0);
    printf("}}");
}

static void be_json(const be_figs *f, const be_opts *o, eng_model *m, const char *name,
                    size_t name_len, const char *isa) {
    const eng_config *c = eng_model_config(m);
    printf("{\"workload\":\"engine\",\"model\":");
    be_json_str(name, name_len);
    printf(",\"path\":");
    be_json_str(o->model, strlen(o->model));
    printf(",\"arch\":");
    be_json_str(c->arch_name, strlen(c->arch_name));
    printf(",\"backend\":\"%s\",\"weights\":\"%s\",\"logits\":\"%s\",\"resident_bytes\":%zu",
           eng_model_backend_name(m), o->weights ? o->weights : "native",
           o->full ? "full" : "argmax", eng_model_resident_bytes(m));
    printf(",\"isa\":\"%s\",\"threads\":%d,\"weight_bytes\":%zu,\"prompt\":%d,\"gen\":%d,"
           "\"batch\":%d,\"batch_prompt\":%d,\"repeat\":%d,"
           "\"membw_gbs\":%.3f,\"membw_best_gbs\":%.3f,\"huge_mib\":%.0f,"
           "\"prefill_tps\":%.3f,\"decode_tps\":%.4f,\"roofline_tps\":%.4f,\"roofline_pct\":%.2f,"
           "\"start_roofline_pct\":%.2f,\"paired_bw_range\":[%.3f,%.3f],"
           "\"decode_compute_roofline_tps\":%.3f,"
           "\"batch_tps\":%.3f,\"prefill_range\":[%.3f,%.3f],\"decode_range\":[%.4f,%.4f],"
           "\"batch_range\":[%.3f,%.3f],\"macs_gmacs\":%.3f,\"macs_best_gmacs\":%.3f,"
           "\"macs_layers\":%.0f,\"macs_output\":%.0f,\"prefill_compute_pct\":%.2f,"
           "\"batch_compute_pct\":%.2f",
           isa, eng_model_n_threads(m), eng_model_weight_bytes(m), o->prompt, o->gen, o->batch,
           o->batch_prompt, o->repeat, f->bw_median, f->bw_best, f->huge_mib, f->prefill_tps,
           f->decode_tps, f->roofline_tps, f->roofline_pct, f->start_roofline_pct, f->pair_bw_min,
           f->pair_bw_max, f->compute_roofline_tps, f->batch_tps, f->prefill_min, f->prefill_max,
           f->decode_min, f->decode_max, f->batch_min, f->batch_max, f->macs_median, f->macs_best,
           f->macs_layers, f->macs_output, f->prefill_pct, f->batch_pct);
    /* the KV cache's shape: bytes per token of the full-context (global) and
     * windowed (local) layers, so a reader can size a context's KV */
    const eng_kv_layout *kl = eng_model_kv_layout(m);
    printf(",\"kv\":{\"n_layer\":%d,\"n_head\":%d,\"n_head_kv\":%d,\"head_dim\":%d,"
           "\"window\":%d,\"bytes_per_token\":[%.2f,%.2f],\"layers\":[%d,%d]",
           c->n_layer, c->n_head, c->n_head_kv, c->head_dim, kl->max_window,
           (double)kl->block_bytes[0] / kl->block_tokens,
           (double)kl->block_bytes[1] / kl->block_tokens, kl->n_layers[0], kl->n_layers[1]);
    printf("},\"profile\":{\"decode_steps\":%d", f->prof_decode_steps);
    if (f->have_prof[BE_PROF_PREFILL]) be_json_prof("prefill", &f->prof[BE_PROF_PREFILL], 1);
    if (f->have_prof[BE_PROF_DECODE])
        be_json_prof("decode", &f->prof[BE_PROF_DECODE],
                     f->prof_decode_steps > 0 ? f->prof_decode_steps : 1);
    if (f->have_prof[BE_PROF_BATCH]) be_json_prof("batch", &f->prof[BE_PROF_BATCH], 1);
    printf("}}\n");
}

/* The figures table (stdout). */
static void be_print_table(const be_figs *f, const be_opts *o) {
    printf("\n  %-34s %12s %22s\n", "figure", "median", "min .. max");
    printf("  %-34s %12.2f %22s\n", "memory read bandwidth (GB/s)", f->bw_median, "");
    printf("  %-34s %12.2f\n", "  best pass (GB/s, the roofline's)", f->bw_best);
    if (f->huge_mib >= 0)
        printf("  %-34s %12.0f\n", "huge pages held (MiB; docs/kernels)", f->huge_mib);
    printf("  %-34s %12.1f %10.1f .. %-10.1f\n", "prefill tok/s", f->prefill_tps, f->prefill_min,
           f->prefill_max);
    printf("  %-34s %12.2f %10.2f .. %-10.2f\n", "decode tok/s (single stream)", f->decode_tps,
           f->decode_min, f->decode_max);
    printf("  %-34s %12.2f %10.2f .. %-10.2f\n", "paired bandwidth (GB/s, best pass)",
           f->pair_bw_median, f->pair_bw_min, f->pair_bw_max);
    printf("  %-34s %12.2f\n", "roofline tok/s (paired bw / weights)", f->roofline_tps);
    printf("  %-34s %11.1f%%\n", "decode / roofline (paired)", f->roofline_pct);
    printf("  %-34s %11.1f%%\n", "  against the start probe", f->start_roofline_pct);
    if (f->compute_roofline_tps > 0)
        printf("  %-34s %12.2f\n", "decode compute roofline tok/s", f->compute_roofline_tps);
    if (o->batch > 0) {
        char lbl[64];
        snprintf(lbl, sizeof lbl, "batch-%d decode tok/s (aggregate)", o->batch);
        printf("  %-34s %12.1f %10.1f .. %-10.1f\n", lbl, f->batch_tps, f->batch_min, f->batch_max);
    }
    if (f->macs_best > 0) {
        printf("  %-34s %12.1f\n", "int8 GMAC/s (probe, median)", f->macs_median);
        printf("  %-34s %12.1f\n", "  best pass (the compute roofline's)", f->macs_best);
        printf("  %-34s %12.1f\n", "GEMM MMACs per token, layers", f->macs_layers / 1e6);
        printf("  %-34s %12.1f\n", "  and output projection", f->macs_output / 1e6);
        printf("  %-34s %11.1f%%\n", "prefill / compute roofline (paired)", f->prefill_pct);
        if (o->batch > 0)
            printf("  %-34s %11.1f%%\n", "batch decode / compute (paired)", f->batch_pct);
    } else {
        printf("  %-34s %12s\n", "int8 compute probe", "none for this ISA");
    }
}

static int be_workload(void *ctx, const cli_opt *opt, const char *v, char *err, size_t errlen) {
    return strcmp(v, "engine") ? -1 : 0;
}

/* Parse argv into o; 0 to run, 1 after --help, 2 usage error (printed). */
static int be_parse(int argc, char **argv, be_opts *o) {
    const cli_opt opts[] = {
        {"--workload", NULL, CLI_FN, NULL, 0, 0, "engine", "this benchmark", be_workload},
        {"--model", NULL, CLI_STR, &o->model, 0, 0, "FILE", "GGUF model (required)", NULL},
        {"--threads", NULL, CLI_INT, &o->threads, 0, 1024, "N",
         "compute threads (default: all CPUs)", NULL},
        {"--isa", NULL, CLI_STR, &o->isa, 0, 0, "NAME",
         "cap the kernels' ISA: scalar, avx2, avx512vnni, amx\n"
         "(default: PARLEY_ISA or the machine's best)",
         NULL},
        {"--prompt", NULL, CLI_INT, &o->prompt, 1, 1 << 16, "N",
         "single-stream prompt tokens, one prefill chunk (default 512)", NULL},
        {"--gen", NULL, CLI_INT, &o->gen, 1, 1 << 16, "N",
         "decode steps, single stream and batched (default 32)", NULL},
        {"--batch", NULL, CLI_INT, &o->batch, 0, 4096, "N",
         "batched decode sequences, 0 to skip (default 64)", NULL},
        {"--batch-prompt", NULL, CLI_INT, &o->batch_prompt, 1, 1 << 16, "N",
         "prompt tokens of each batched sequence (default 32)", NULL},
        {"--repeat", NULL, CLI_INT, &o->repeat, 1, 1000, "N",
         "timed repeats; figures are medians (default 5)", NULL},
        {"--block", NULL, CLI_INT, &o->block, 1, 4096, "N", "KV block tokens (default 16)", NULL},
        {"--membw-mib", NULL, CLI_INT, &o->membw_mib, 1, 1 << 20, "N",
         "bandwidth buffer MiB (default 1024)", NULL},
        {"--logits", NULL, CLI_STR, &o->logits, 0, 0, "MODE",
         "argmax (default: steps ask for the argmax only, as greedy serving does)\n"
         "or full (every logits row written out, argmax taken outside)",
         NULL},
        {"--json", NULL, CLI_FLAG, &o->json, 0, 0, NULL,
         "also print one JSON object on the last line", NULL},
        {"--backend", NULL, CLI_STR, &o->backend, 0, 0, "NAME",
         "auto, cpu or cuda (default auto: cuda when built and a GPU is present)", NULL},
        {"--weights", NULL, CLI_STR, &o->weights, 0, 0, "FORM",
         "native (4-bit tensors stay 4-bit, default) or int8", NULL},
    };
    const cli_cmd cmd = {
        .name = "bench",
        .synopsis = "bench --workload engine --model FILE [options]",
        .opts = opts,
        .n_opts = CLI_NOPTS(opts),
    };
    int pr = cli_parse(&cmd, argc, argv, NULL, NULL, NULL);
    if (pr != CLI_OK) return pr;
    if (!o->model) {
        fprintf(stderr, "bench: --model FILE is required\n");
        cli_usage(&cmd, stderr);
        return 2;
    }
    if (o->logits && strcmp(o->logits, "argmax") && strcmp(o->logits, "full")) {
        fprintf(stderr, "bench: --logits argmax|full\n");
        return 2;
    }
    o->full = o->logits && !strcmp(o->logits, "full");
    return 0;
}

/* The machine's limits on the probe's pool: read bandwidth (kern_membw.h),
 * then int8 MAC throughput (kern_macs.h). */
static int be_probes(const be_opts *o, const be_probe *bp, const char *isa, be_figs *f) {
    char err[PL_ERR_LEN];
    kern_membw_result bw;
    kern_macs_result mc;
    int threads = kern_pool_size(bp->pool);
    fprintf(stderr, "bench: memory bandwidth (%d MiB, %d threads)\n", o->membw_mib, threads);
    int rc = kern_membw_measure(bp->pool, bp->bytes, 4 * o->repeat + 1, &bw, err, sizeof err);
    if (rc == 0) {
        fprintf(stderr, "bench: int8 MAC throughput (%s, %d threads)\n", isa, threads);
        rc = kern_macs_measure(bp->pool, 200000, 4 * o->repeat + 1, &mc, err, sizeof err);
    }
    if (rc != 0) {
        fprintf(stderr, "bench: %s\n", err);
        return -1;
    }
    f->bw_best = bw.best_gbs;
    f->bw_median = bw.median_gbs;
    f->macs_best = mc.best_gmacs;
    f->macs_median = mc.median_gmacs;
    return 0;
}

int eng_cmd_bench_engine(int argc, char **argv) {
    be_opts o = {.prompt = 512,
                 .gen = 32,
                 .batch = 64,
                 .batch_prompt = 32,
                 .repeat = 5,
                 .block = 16,
                 .membw_mib = 1024};
    int rc = be_parse(argc, argv, &o);
    if (rc) return rc == 1 ? 0 : rc;
    if (o.isa) {
        kern_isa cap;
        if (kern_isa_parse(o.isa, &cap) != 0) {
            fprintf(stderr, "bench: unknown ISA '%s' (scalar, avx2, avx512vnni, amx)\n", o.isa);
            return 2;
        }
        kern_isa_set_max(cap); /* before loading: weights are packed for the ISA */
    }
    const char *isa = kern_isa_name(kern_isa_best());
    eng_load_opts lo = {.prec = ENG_PREC_INT8, .n_threads = o.threads, .block_tokens = o.block};
    if ((o.backend && eng_backend_kind_parse(o.backend, &lo.backend) != 0) ||
        (o.weights && eng_weights_parse(o.weights, &lo.weights) != 0)) {
        fprintf(stderr, "bench: bad --backend or --weights (auto|cpu|cuda, native|int8)\n");
        return 2;
    }
    eng_model *m = NULL;
    eng_kv_allocator alloc;
    int have_alloc = 0;
    char err[PL_ERR_LEN];
    be_figs f;
    be_probe bp = {0};
    memset(&f, 0, sizeof f);
    double t0 = be_now();
    if (eng_model_load(o.model, &lo, &m, err, sizeof err) != 0) {
        fprintf(stderr, "bench: %s\n", err);
        return 1;
    }
    rc = 1;
    const eng_config *c = eng_model_config(m);
    const char *name = NULL;
    size_t name_len = 0;
    if (eng_gguf_get_str(eng_model_gguf(m), "general.name", &name, &name_len) != 0 || !name) {
        const char *sl = strrchr(o.model, '/');
        name = sl ? sl + 1 : o.model;
        name_len = strlen(name);
    }
    size_t wbytes = eng_model_weight_bytes(m);
    int threads = eng_model_n_threads(m);
    printf("parley bench engine: model %.*s (%s, %d layers, n_embd %d, vocab %d), int8 (%s "
           "weights), %s backend, weights %.1f MiB per step, load %.2f s\n",
           (int)name_len, name, c->arch_name, c->n_layer, c->n_embd, c->n_vocab,
           o.weights ? o.weights : "native", eng_model_backend_name(m), (double)wbytes / 1048576.0,
           be_now() - t0);
    printf("isa %s (machine best %s), %d threads; prompt %d, gen %d, batch %d x %d-token "
           "prompts; medians of %d repeats; greedy: %s\n",
           isa, kern_isa_name(kern_isa_detect()), threads, o.prompt, o.gen, o.batch, o.batch_prompt,
           o.repeat,
           o.full ? "full logits rows, argmax untimed" : "argmax-only steps (--logits argmax)");
    fflush(stdout);
    if (eng_kv_allocator_malloc(&alloc, eng_model_kv_layout(m)) != 0) {
        fprintf(stderr, "bench: cannot set up the KV allocator\n");
        goto out;
    }
    have_alloc = 1;
    bp.bytes = (size_t)o.membw_mib << 20;
    bp.wbytes = wbytes;
    eng_model_weight_macs(m, &f.macs_layers, &f.macs_output);
    bp.macs_pre = f.macs_layers + f.macs_output / (o.prompt > 0 ? o.prompt : 1);
    bp.macs_tok = f.macs_layers + f.macs_output;
    if (kern_pool_create(threads, &bp.pool) != 0) {
        fprintf(stderr, "bench: cannot create %d threads\n", threads);
        goto out;
    }
    if (be_probes(&o, &bp, isa, &f) != 0) goto out;
    fprintf(stderr, "bench: single stream\n");
    if (be_single(m, &o, &alloc, &bp, &f) != 0) goto out;
    if (o.batch > 0) {
        fprintf(stderr, "bench: batched decode\n");
        if (be_batched(m, &o, &alloc, &bp, &f) != 0) goto out;
    }
    f.start_roofline_pct =
        f.bw_best > 0 ? 100 * f.decode_tps * (double)wbytes / (f.bw_best * 1e9) : 0;
    f.huge_mib = be_huge_mib();
    be_print_table(&f, &o);
    be_print_prof(&f, &o);
    if (o.json) be_json(&f, &o, m, name, name_len, isa);
    fflush(stdout);
    rc = 0;
out:
    if (bp.pool) kern_pool_destroy(bp.pool);
    if (have_alloc) eng_kv_allocator_malloc_free(&alloc);
    eng_model_free(m);
    return rc;
}
