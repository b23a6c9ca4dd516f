/*
 * bench_spec.c -- `parley bench --workload spec`: what speculative
 * decoding by prompt lookup costs and gains on one model, in one process.
 *
 * Step costs (--cost): the basis of the scheduler's drafting rule
 * (eng_sched.h, "Speculative decoding").  After a --context-token prompt,
 * for n = 1..--max-chunk, the wall time of three eng_forward calls made in
 * turn --repeat times (so they see the same load on a shared machine):
 *   decode    one sequence feeding one token (the unit);
 *   chunk n   one sequence feeding n tokens with ENG_LOGITS_ALL (a verify
 *             chunk of an n - 1 token draft);
 *   batch n   n sequences feeding one token each (batched decode).
 * Every call is cut back with eng_kvseq_truncate.  Printed: medians, and
 * chunk and batch as multiples of the decode step of the same row (median;
 * the fastest calls' ratio beside it): where a multiple stays near 1 the
 * extra tokens ride on the same weight pass.
 *
 * Prompts (--prompts FILE): single-stream generation through the
 * scheduler, as a worker runs it.  FILE holds prompts separated by lines
 * reading "%%"; each is encoded with the model's tokenizer (BOS as the
 * model wants, no chat template) and generated greedy to --gen tokens or
 * an end-of-generation token, with drafting off and on (two schedulers on
 * the same model, alternating per repeat, one request in flight; an
 * untimed warm-up run of each first when --repeat > 1).  Decode
 * tok/s of a run = (tokens - 1) / (end - first token): the first token
 * comes from the prefill.  Per prompt the medians over --repeat runs, the
 * acceptance rate (accepted / drafted tokens) and the tokens per verify
 * step; for the set, tokens over summed median times.  The two runs must
 * give the same tokens (greedy): a difference is reported as a failure.
 *
 * Output: a readable report; with --json one JSON object on the last line
 * (the prompts' ids included, so tests/bench/bench_spec.py can run
 * llama.cpp on exactly the same tokens).
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_opt.h"
#include "eng_model.h"
#include "eng_sched.h"
#include "eng_tok.h"
#include "eng_cli.h"
#include "pl_err.h"
#include "pl_time.h"

#define BS_MAX_PROMPTS 64
#define BS_MAX_IDS 8192

/* Options. */
typedef struct bs_opts {
    const char *model;   /* GGUF path */
    const char *prompts; /* prompt file or NULL */
    int threads;         /* compute threads (0: all CPUs) */
    int cost;            /* 1: the step-cost table */
    int context;         /* cost table: prompt tokens before the timed calls */
    int max_chunk;       /* cost table: longest chunk / largest batch */
    int gen;             /* prompts: max tokens */
    int repeat;          /* medians over this many */
    int k, max_batch;    /* spec_tokens, spec_max_batch_tokens */
    int ng_min, ng_max;  /* n-gram sizes */
    int json;            /* 1: JSON object on the last line */
} bs_opts;

/* One prompt's figures. */
typedef struct bs_prompt {
    int32_t *ids;          /* prompt ids */
    int n_ids;             /* their count */
    int n_gen;             /* tokens generated (same on and off) */
    double tps[2];         /* median decode tok/s, [0] off, [1] on */
    double sec[2];         /* median decode seconds */
    uint64_t drafted;      /* drafted tokens, summed over the "on" runs */
    uint64_t accepted;     /* of which accepted */
    uint64_t verify_steps; /* verify chunks */
    int mismatch;          /* 1: on and off generated different tokens */
} bs_prompt;

/* A request's completion, filled by the delivery thread. */
typedef struct bs_wait {
    pthread_mutex_t mu;       /* guards the fields below */
    pthread_cond_t cv;        /* signalled at on_done */
    int done;                 /* on_done seen */
    eng_sched_finish finish;  /* why it ended */
    int n_tokens;             /* generated */
    int32_t toks[BS_MAX_IDS]; /* generated ids (first BS_MAX_IDS) */
    double ttft_ms, total_ms; /* timings */
    char error[PL_ERR_LEN];   /* message on error */
} bs_wait;

static int bs_cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double bs_median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, bs_cmp);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* ---- step costs ---- */

/* Seconds of one eng_forward call of st[0..n), undone by truncating every
 * sequence back to base[i] tokens; -1 on failure (message printed). */
static double bs_once(eng_model *m, eng_seq_step *st, int n, const int *base) {
    char err[PL_ERR_LEN];
    double t0 = pl_mono_s();
    if (eng_forward(m, st, n, err, sizeof err) != 0) {
        fprintf(stderr, "bench: forward: %s\n", err);
        return -1;
    }
    double t = pl_mono_s() - t0;
    for (int i = 0; i < n; i++)
        if (eng_kvseq_truncate(st[i].kv, base[i]) != 0) {
            fprintf(stderr, "bench: cannot truncate (context past the window?)\n");
            return -1;
        }
    return t;
}

/* The cost table, row n = 1..max_chunk: a plain decode step, a chunk of
 * n tokens and a batch of n sequences, called in turn (so the three see
 * the same load); medians into f[0][n] (decode), f[1][n] (chunk), f[2][n]
 * (batch), fastest calls into f[3..5][n] (seconds). */
static int bs_cost(eng_model *m, const bs_opts *o, double (*f)[65]) {
    int V = eng_model_config(m)->n_vocab, M = o->max_chunk, rc = -1;
    char err[PL_ERR_LEN] = "out of memory";
    eng_kv_allocator a;
    if (eng_kv_allocator_malloc(&a, eng_model_kv_layout(m)) != 0) return -1;
    eng_kvseq *kv = calloc((size_t)M, sizeof *kv);
    eng_seq_step *st = calloc((size_t)M, sizeof *st);
    int32_t *ids = malloc((size_t)(o->context + M) * M * sizeof *ids);
    float *out = malloc((size_t)M * V * sizeof *out);
    int *base = malloc((size_t)M * sizeof *base), n_init = 0;
    if (!kv || !st || !ids || !out || !base) goto done;
    for (; n_init < M; n_init++) {
        int32_t *p = ids + (size_t)n_init * (o->context + M);
        eng_random_prompt(p, o->context + M, V, 1 + (uint64_t)n_init);
        if (eng_kvseq_init(&kv[n_init], eng_model_kv_layout(m), &a, err, sizeof err) != 0)
            goto done;
        eng_seq_step s = {.kv = &kv[n_init],
                          .tokens = p,
                          .n_tokens = o->context,
                          .logits = ENG_LOGITS_LAST,
                          .out = out};
        if (eng_forward(m, &s, 1, err, sizeof err) != 0) goto done;
        base[n_init] = o->context;
    }
    int rep = o->repeat < 3 ? 3 : o->repeat;
    double t[3][64];
    if (rep > 64) rep = 64;
    for (int n = 1; n <= M; n++) {
        eng_seq_step dec = {.kv = &kv[0],
                            .tokens = ids + o->context,
                            .n_tokens = 1,
                            .logits = ENG_LOGITS_LAST,
                            .out = out};
        eng_seq_step chunk = {.kv = &kv[0],
                              .tokens = ids + o->context,
                              .n_tokens = n,
                              .logits = n == 1 ? ENG_LOGITS_LAST : ENG_LOGITS_ALL,
                              .out = out};
        for (int i = 0; i < n; i++) {
            eng_seq_step s = {.kv = &kv[i],
                              .tokens = ids + (size_t)i * (o->context + M) + o->context,
                              .n_tokens = 1,
                              .logits = ENG_LOGITS_LAST,
                              .out = out + (size_t)i * V};
            st[i] = s;
        }
        for (int r = -2; r < rep; r++) { /* -2, -1: warm-up */
            double td = bs_once(m, &dec, 1, base), tc = bs_once(m, &chunk, 1, base),
                   tb = bs_once(m, st, n, base);
            if (td < 0 || tc < 0 || tb < 0) goto done;
            if (r < 0) continue;
            t[0][r] = td, t[1][r] = tc, t[2][r] = tb;
        }
        for (int k = 0; k < 3; k++) {
            f[k][n] = bs_median(t[k], rep);
            f[k + 3][n] = t[k][0]; /* sorted */
        }
    }
    rc = 0;
done:
    if (rc) fprintf(stderr, "bench: step costs: %s\n", n_init < M ? err : "failed");
    for (int i = 0; i < n_init; i++) eng_kvseq_free(&kv[i]);
    eng_kv_allocator_malloc_free(&a);
    free(kv), free(st), free(ids), free(out), free(base);
    return rc;
}

/* ---- prompts through the scheduler ---- */

static void bs_on_done(void *user, uint64_t id, const eng_sched_result *r) {
    bs_wait *w = user;
    (void)id;
    pthread_mutex_lock(&w->mu);
    w->finish = r->finish;
    w->n_tokens = r->n_tokens;
    memcpy(w->toks, r->tokens,
           (size_t)(r->n_tokens < BS_MAX_IDS ? r->n_tokens : BS_MAX_IDS) * sizeof(int32_t));
    w->ttft_ms = r->ttft_ms;
    w->total_ms = r->total_ms;
    snprintf(w->error, sizeof w->error, "%s", r->error ? r->error : "");
    w->done = 1;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

/* Run one request alone on s and wait for it. */
static int bs_run(eng_sched *s, const bs_opts *o, const eng_tok *tok, const bs_prompt *p,
                  bs_wait *w) {
    eng_sched_request r;
    memset(&r, 0, sizeof r);
    r.prompt = p->ids;
    r.n_prompt = p->n_ids;
    eng_sampler_params_default(&r.sampling);
    r.sampling.n_stop = eng_tok_eog_ids(tok, r.sampling.stop, ENG_SAMPLER_MAX_STOP);
    r.max_tokens = o->gen;
    r.on_done = bs_on_done;
    r.user = w;
    w->done = 0;
    char err[PL_ERR_LEN];
    if (eng_sched_submit(s, &r, NULL, err, sizeof err) != 0) {
        fprintf(stderr, "bench: submit: %s\n", err);
        return -1;
    }
    pthread_mutex_lock(&w->mu);
    while (!w->done) pthread_cond_wait(&w->cv, &w->mu);
    pthread_mutex_unlock(&w->mu);
    if (w->finish == ENG_SCHED_ERROR) {
        fprintf(stderr, "bench: request failed: %s\n", w->error);
        return -1;
    }
    return 0;
}

/* Read FILE's prompts ("%%" lines separate them) and encode them. */
static int bs_load_prompts(const char *path, const eng_tok *tok, bs_prompt *ps, int *n_ps) {
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "bench: cannot open %s\n", path);
        return -1;
    }
    char *text = NULL, line[8192];
    size_t len = 0;
    int n = 0, rc = 0, eof = 0;
    while (!eof && !rc) {
        eof = !fgets(line, sizeof line, f);
        int sep = !eof && (!strcmp(line, "%%\n") || !strcmp(line, "%%"));
        if (!eof && !sep) {
            size_t l = strlen(line);
            char *t = realloc(text, len + l + 1);
            if (!t) rc = -1;
            else memcpy((text = t) + len, line, l + 1), len += l;
            continue;
        }
        while (len && (text[len - 1] == '\n' || text[len - 1] == ' ')) text[--len] = 0;
        if (!len) continue;
        if (n == BS_MAX_PROMPTS) break;
        bs_prompt *p = &ps[n];
        memset(p, 0, sizeof *p);
        char err[PL_ERR_LEN];
        int flags = eng_tok_add_bos(tok) ? ENG_TOK_ADD_BOS : 0;
        if (!(p->ids = malloc(BS_MAX_IDS * sizeof *p->ids)) ||
            eng_tok_encode(tok, text, len, flags, p->ids, BS_MAX_IDS, &p->n_ids, err, sizeof err) !=
                0) {
            fprintf(stderr, "bench: prompt %d: cannot encode\n", n + 1);
            rc = -1;
        }
        n++;
        len = 0;
    }
    fclose(f);
    free(text);
    *n_ps = n;
    return rc;
}

static int bs_prompts(eng_model *m, const bs_opts *o, const eng_tok *tok, bs_prompt *ps, int n) {
    eng_sched *s[2] = {NULL, NULL};
    char err[PL_ERR_LEN];
    int rc = -1;
    bs_wait *w = calloc(2, sizeof *w);
    double *sec = calloc((size_t)o->repeat * 2, sizeof *sec);
    if (!w || !sec) goto out;
    for (int on = 0; on < 2; on++) {
        pthread_mutex_init(&w[on].mu, NULL);
        pthread_cond_init(&w[on].cv, NULL);
        eng_sched_config c;
        eng_sched_config_default(&c);
        c.batch_window_us = 0;
        c.speculative = on ? ENG_SCHED_SPEC_NGRAM : ENG_SCHED_SPEC_OFF;
        c.spec_tokens = o->k;
        c.spec_max_batch_tokens = o->max_batch;
        c.spec_ngram_min = o->ng_min;
        c.spec_ngram_max = o->ng_max;
        if (eng_sched_create(m, &c, NULL, &s[on], err, sizeof err) != 0) {
            fprintf(stderr, "bench: scheduler: %s\n", err);
            goto out;
        }
    }
    for (int i = 0; i < n; i++) {
        bs_prompt *p = &ps[i];
        for (int r = o->repeat > 1 ? -1 : 0; r < o->repeat; r++) /* -1: warm-up of both */
            for (int on = 0; on < 2; on++) {
                eng_sched_stats a, b;
                eng_sched_stats_get(s[on], &a);
                if (bs_run(s[on], o, tok, p, &w[on]) != 0) goto out;
                eng_sched_stats_get(s[on], &b);
                double t = (w[on].total_ms - w[on].ttft_ms) / 1e3;
                if (r < 0) continue;
                sec[on * o->repeat + r] = t;
                p->n_gen = w[on].n_tokens;
                if (on) {
                    p->drafted += b.spec_drafted - a.spec_drafted;
                    p->accepted += b.spec_accepted - a.spec_accepted;
                    p->verify_steps += b.spec_steps - a.spec_steps;
                }
            }
        p->mismatch = w[0].n_tokens != w[1].n_tokens ||
                      memcmp(w[0].toks, w[1].toks,
                             (size_t)(w[0].n_tokens < BS_MAX_IDS ? w[0].n_tokens : BS_MAX_IDS) *
                                 sizeof(int32_t)) != 0;
        for (int on = 0; on < 2; on++) {
            p->sec[on] = bs_median(sec + on * o->repeat, o->repeat);
            p->tps[on] = p->n_gen > 1 ? (p->n_gen - 1) / (p->sec[on] > 0 ? p->sec[on] : 1e-9) : 0;
        }
        printf("  prompt %2d: %4d ids, %4d generated: off %6.1f tok/s, on %6.1f tok/s (%.2fx), "
               "accepted %llu/%llu drafted (%.0f%%), %.2f tokens per verify step%s\n",
               i + 1, p->n_ids, p->n_gen, p->tps[0], p->tps[1],
               p->tps[0] > 0 ? p->tps[1] / p->tps[0] : 0, (unsigned long long)p->accepted,
               (unsigned long long)p->drafted,
               p->drafted ? 100.0 * (double)p->accepted / (double)p->drafted : 0.0,
               p->verify_steps ? (double)(p->accepted + p->verify_steps) / (double)p->verify_steps
                               : 0.0,
               p->mismatch ? "  MISMATCH: drafting changed the tokens" : "");
        fflush(stdout);
        if (p->mismatch) goto out;
    }
    rc = 0;
out:
    for (int on = 0; on < 2; on++) eng_sched_free(s[on]);
    free(w);
    free(sec);
    return rc;
}

/* ---- report ---- */

static void bs_report(const bs_opts *o, double (*f)[65], bs_prompt *ps, int n) {
    double sum[2] = {0, 0}, tok = 0, dr = 0, ac = 0;
    for (int i = 0; i < n; i++) {
        tok += ps[i].n_gen > 1 ? ps[i].n_gen - 1 : 0;
        sum[0] += ps[i].sec[0];
        sum[1] += ps[i].sec[1];
        dr += (double)ps[i].drafted;
        ac += (double)ps[i].accepted;
    }
    if (n)
        printf("set: %d prompts, %.0f decode tokens: off %.1f tok/s, on %.1f tok/s (%.2fx); "
               "acceptance %.1f%%\n",
               n, tok, sum[0] > 0 ? tok / sum[0] : 0, sum[1] > 0 ? tok / sum[1] : 0,
               sum[1] > 0 && sum[0] > 0 ? sum[0] / sum[1] : 0, dr > 0 ? 100 * ac / dr : 0);
    if (!o->json) return;
    printf("{\"workload\":\"spec\",\"k\":%d,\"max_batch_tokens\":%d,\"ngram\":[%d,%d]", o->k,
           o->max_batch, o->ng_min, o->ng_max);
    if (o->cost) {
        static const char *const key[6] = {"decode_s",     "chunk_s",     "batch_s",
                                           "decode_min_s", "chunk_min_s", "batch_min_s"};
        for (int k = 0; k < 6; k++) {
            printf(",\"%s\":[", key[k]);
            for (int c = 1; c <= o->max_chunk; c++) printf("%s%.6f", c > 1 ? "," : "", f[k][c]);
            printf("]");
        }
    }
    printf(",\"prompts\":[");
    for (int i = 0; i < n; i++) {
        const bs_prompt *p = &ps[i];
        printf("%s{\"n_gen\":%d,\"off_tps\":%.3f,\"on_tps\":%.3f,\"off_s\":%.6f,\"on_s\":%.6f,"
               "\"drafted\":%llu,\"accepted\":%llu,\"verify_steps\":%llu,\"ids\":[",
               i ? "," : "", p->n_gen, p->tps[0], p->tps[1], p->sec[0], p->sec[1],
               (unsigned long long)p->drafted, (unsigned long long)p->accepted,
               (unsigned long long)p->verify_steps);
        for (int j = 0; j < p->n_ids; j++) printf("%s%d", j ? "," : "", (int)p->ids[j]);
        printf("]}");
    }
    printf("],\"off_tps\":%.3f,\"on_tps\":%.3f,\"acceptance\":%.4f}\n",
           sum[0] > 0 ? tok / sum[0] : 0, sum[1] > 0 ? tok / sum[1] : 0, dr > 0 ? ac / dr : 0);
}

static int bs_workload(void *ctx, const cli_opt *opt, const char *v, char *err, size_t errlen) {
    return strcmp(v, "spec") ? -1 : 0;
}

int eng_cmd_bench_spec(int argc, char **argv) {
    bs_opts o = {NULL, NULL, 0, 0, 256, 16, 128, 5, 6, 8, 2, 4, 0};
    const cli_opt opts[] = {
        {"--workload", NULL, CLI_FN, NULL, 0, 0, "spec", "this benchmark", bs_workload},
        {"--model", NULL, CLI_STR, &o.model, 0, 0, "FILE", "GGUF model (required)", NULL},
        {"--threads", NULL, CLI_INT, &o.threads, 0, 1024, "N",
         "compute threads (default: all CPUs)", NULL},
        {"--cost", NULL, CLI_FLAG, &o.cost, 0, 0, NULL,
         "time verify chunks and batched decode steps", NULL},
        {"--context", NULL, CLI_INT, &o.context, 1, 1 << 16, "N",
         "step costs: context tokens before the timed steps (default 256)", NULL},
        {"--max-chunk", NULL, CLI_INT, &o.max_chunk, 1, 64, "N",
         "step costs: longest chunk and largest batch (default 16)", NULL},
        {"--prompts", NULL, CLI_STR, &o.prompts, 0, 0, "FILE",
         "prompts separated by \"%%\" lines: generate with drafting off and on", NULL},
        {"--gen", NULL, CLI_INT, &o.gen, 2, BS_MAX_IDS, "N", "tokens per prompt at most (128)",
         NULL},
        {"--repeat", NULL, CLI_INT, &o.repeat, 1, 64, "N", "medians over N runs (default 5)", NULL},
        {"--spec-tokens", NULL, CLI_INT, &o.k, 1, 64, "K", "drafted tokens per step (default 6)",
         NULL},
        {"--spec-max-batch-tokens", NULL, CLI_INT, &o.max_batch, 0, 1 << 16, "N",
         "scheduler.spec_max_batch_tokens (default 8)", NULL},
        {"--ngram-min", NULL, CLI_INT, &o.ng_min, 1, ENG_SPEC_NGRAM_MAX, "N",
         "shortest n-gram matched (default 2)", NULL},
        {"--ngram-max", NULL, CLI_INT, &o.ng_max, 1, ENG_SPEC_NGRAM_MAX, "N",
         "longest n-gram matched (default 4)", NULL},
        {"--json", NULL, CLI_FLAG, &o.json, 0, 0, NULL,
         "also print one JSON object on the last line", NULL},
    };
    const cli_cmd cmd = {.name = "bench",
                         .synopsis = "bench --workload spec --model FILE [--cost] [--prompts FILE] "
                                     "[options]",
                         .opts = opts,
                         .n_opts = CLI_NOPTS(opts)};
    int pr = cli_parse(&cmd, argc, argv, NULL, NULL, NULL);
    if (pr != CLI_OK) return pr == CLI_HELP ? 0 : 2;
    if (!o.model || (!o.cost && !o.prompts) || o.ng_min > o.ng_max)
        return cli_fail(&cmd, "need --model and --cost and/or --prompts (and ngram min <= max)");
    eng_load_opts lo = {.prec = ENG_PREC_INT8, .n_threads = o.threads, .block_tokens = 16};
    eng_model *m = NULL;
    eng_tok *tok = NULL;
    char err[PL_ERR_LEN];
    if (eng_model_load(o.model, &lo, &m, err, sizeof err) != 0) {
        fprintf(stderr, "bench: %s\n", err);
        return 1;
    }
    int rc = 1, n = 0;
    static double f[6][65]; /* bs_cost's figures */
    static bs_prompt ps[BS_MAX_PROMPTS];
    printf("parley bench spec: %s, %d threads; k %d, spec_max_batch_tokens %d, n-grams %d..%d; "
           "medians of %d\n",
           o.model, eng_model_n_threads(m), o.k, o.max_batch, o.ng_min, o.ng_max, o.repeat);
    if (o.cost) {
        if (bs_cost(m, &o, f) != 0) goto out;
        printf("step cost after %d context tokens: one decode step, a chunk of n tokens "
               "(ENG_LOGITS_ALL) and a batch of n sequences, called in turn; x = / the decode "
               "step of the same row (median; fastest call in brackets)\n",
               o.context);
        printf("  %6s %10s %10s %16s %10s %16s\n", "n", "decode ms", "chunk ms", "x decode",
               "batch ms", "x decode");
        for (int n = 1; n <= o.max_chunk; n++)
            printf("  %6d %10.2f %10.2f %7.2f (%6.2f) %10.2f %7.2f (%6.2f)\n", n, f[0][n] * 1e3,
                   f[1][n] * 1e3, f[1][n] / f[0][n], f[4][n] / f[3][n], f[2][n] * 1e3,
                   f[2][n] / f[0][n], f[5][n] / f[3][n]);
        fflush(stdout);
    }
    if (o.prompts) {
        if (eng_tok_load(eng_model_gguf(m), &tok, err, sizeof err) != 0) {
            fprintf(stderr, "bench: tokenizer: %s\n", err);
            goto out;
        }
        if (bs_load_prompts(o.prompts, tok, ps, &n) != 0 || !n) goto out;
        if (bs_prompts(m, &o, tok, ps, n) != 0) goto out;
    }
    bs_report(&o, f, ps, n);
    rc = 0;
out:
    for (int i = 0; i < n; i++) free(ps[i].ids);
    eng_tok_free(tok);
    eng_model_free(m);
    return rc;
}
