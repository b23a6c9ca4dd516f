/*
 * bench_constraint.c -- what a JSON-schema constraint costs decoding
 * (issue 33): single-stream and batch-32 decode tok/s with the constraint
 * and without it, in the same run, alternating, plus the step time the
 * scheduler spent blocked waiting for masks and the mask threads' CPU
 * time.  A benchmark, not a test.
 *
 *   build/tests/sched/bench_constraint [model.gguf] [--reps N] [--tokens N]
 *       [--batch N] [--threads N] [--mask-threads N] [--spec] [--greedy]
 *
 * Model: $PARLEY_GEMMA_MODEL or ~/.cache/parley/models/gemma-3-270m-q4_k_m.gguf.
 * Every request decodes exactly --tokens tokens (default 128): the
 * schema's array must hold at least 100 names, so a constrained output
 * cannot end early, and stop tokens are off for both.  Two schemas: names
 * as plain strings, and bounded to 16 characters (the costly case).
 * Temperature sampling over 262,144 logits costs the loop about 1.5 ms a
 * token either way; --greedy takes most of the sampler's cost out of the
 * comparison (each request then gets a prompt of its own, so the batch
 * does not decode 32 copies of one text).  Sampling at
 * temperature 1 with a seed per request (so the batch's constraint states
 * differ, as real traffic's do).  The prompt is 16 tokens, prefilled in the
 * first step: tok/s = generated tokens / wall time from submit to the last
 * completion.  Drafting is off unless --spec (a constrained draft is cut
 * differently, which would mix two effects).  Each configuration runs
 * --reps times (default 3), constrained and unconstrained alternating;
 * medians are reported with the ratio, the CPU model and /proc/loadavg.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eng_constraint.h"
#include "eng_model.h"
#include "eng_sched.h"
#include "eng_tok.h"
#include "pl_time.h"

/* The two schemas: names as plain strings, and as strings of at most 16
 * characters (a length bound makes llguidance's masks inside a string far
 * costlier: its fast path for unbounded JSON strings no longer applies). */
static const char *const k_schema[2] = {
    "{\"type\":\"object\",\"properties\":{\"names\":{\"type\":\"array\",\"items\":"
    "{\"type\":\"string\"},\"minItems\":100}},\"required\":[\"names\"],"
    "\"additionalProperties\":false}",
    "{\"type\":\"object\",\"properties\":{\"names\":{\"type\":\"array\",\"items\":"
    "{\"type\":\"string\",\"maxLength\":16},\"minItems\":100}},\"required\":[\"names\"],"
    "\"additionalProperties\":false}"};
static const char *const k_name[3] = {"unconstrained", "schema, plain strings",
                                      "schema, strings <= 16 chars"};

typedef struct run_state {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done, errors;
    long tokens;
} run_state;

static void on_done(void *user, uint64_t id, const eng_sched_result *r) {
    run_state *st = user;
    (void)id;
    pthread_mutex_lock(&st->mu);
    st->done++;
    if (r->finish != ENG_SCHED_LENGTH) {
        st->errors++;
        if (st->errors < 3)
            fprintf(stderr, "request ended %s (%d tokens): %s\n", eng_sched_finish_name(r->finish),
                    r->n_tokens, r->error);
    }
    st->tokens += r->n_tokens;
    pthread_cond_signal(&st->cv);
    pthread_mutex_unlock(&st->mu);
}

typedef struct result {
    double tok_s;    /* generated tokens per second */
    double wait_ms;  /* step time blocked on masks */
    double step_ms;  /* step time in all */
    double mask_cpu; /* mask threads' CPU ms */
    uint64_t masks;  /* masks computed */
    int errors;      /* requests that did not end with length */
} result;

/* Greedy requests get prompts of their own (the base text and the
 * request's number), so the batch's outputs differ. */
static int g_greedy;
static const eng_tok *g_tok;

static int run(eng_model *m, const eng_constraint_vocab *v, const int32_t *prompt, int np,
               int batch, int tokens, int constrained, int spec, int mask_threads, int rep,
               result *out) {
    static int32_t own[256][80];
    eng_sched_config cfg;
    eng_sched_config_default(&cfg);
    cfg.max_running = batch > 64 ? batch : 64;
    cfg.speculative = spec ? ENG_SCHED_SPEC_NGRAM : ENG_SCHED_SPEC_OFF;
    cfg.batch_window_us = 50000;
    cfg.constraint_vocab = v;
    cfg.mask_threads = mask_threads;
    cfg.kv_budget_bytes = (size_t)1 << 30;
    eng_sched *s;
    char err[256];
    if (eng_sched_create(m, &cfg, NULL, &s, err, sizeof err) != 0) {
        fprintf(stderr, "sched: %s\n", err);
        return -1;
    }
    run_state st = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0};
    int64_t t0 = pl_mono_us();
    for (int i = 0; i < batch; i++) {
        eng_sched_request q;
        memset(&q, 0, sizeof q);
        q.prompt = prompt;
        q.n_prompt = np;
        if (g_greedy && i > 0) {
            char num[32];
            snprintf(num, sizeof num, " (list %d)", i);
            memcpy(own[i], prompt, (size_t)np * sizeof *prompt);
            int add = 0;
            if (eng_tok_encode(g_tok, num, strlen(num), 0, own[i] + np, 80 - np, &add, NULL, 0) ==
                0) {
                q.prompt = own[i];
                q.n_prompt = np + add;
            }
        }
        eng_sampler_params_default(&q.sampling);
        q.sampling.temperature = g_greedy ? 0.0f : 1.0f;
        q.sampling.seed = (uint64_t)rep * 1000 + (uint64_t)i + 1;
        q.max_tokens = tokens;
        q.on_done = on_done;
        q.user = &st;
        if (constrained) {
            q.constraint.kind = ENG_CONSTRAINT_JSON_SCHEMA;
            q.constraint.text = k_schema[constrained - 1];
            q.constraint.len = strlen(k_schema[constrained - 1]);
        }
        if (eng_sched_submit(s, &q, NULL, err, sizeof err) != 0) {
            fprintf(stderr, "submit: %s\n", err);
            eng_sched_free(s);
            return -1;
        }
    }
    pthread_mutex_lock(&st.mu);
    while (st.done < batch) pthread_cond_wait(&st.cv, &st.mu);
    pthread_mutex_unlock(&st.mu);
    int64_t t1 = pl_mono_us();
    eng_sched_close(s, 1);
    eng_sched_stats ss;
    eng_sched_stats_get(s, &ss);
    eng_sched_free(s);
    out->tok_s = (double)st.tokens / ((double)(t1 - t0) / 1e6);
    out->wait_ms = ss.mask_wait_ms;
    out->step_ms = ss.step_ms_total;
    out->mask_cpu = ss.mask_cpu_ms;
    out->masks = ss.masks;
    out->errors = st.errors;
    return 0;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void print_env(void) {
    char line[512];
    FILE *f = fopen("/proc/cpuinfo", "r");
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "model name", 10)) {
            printf("cpu: %s", strchr(line, ':') + 2);
            break;
        }
    if (f) fclose(f);
    f = fopen("/proc/loadavg", "r");
    if (f && fgets(line, sizeof line, f)) printf("loadavg: %s", line);
    if (f) fclose(f);
}

int main(int argc, char **argv) {
    const char *path = getenv("PARLEY_GEMMA_MODEL");
    static char def[512];
    int reps = 3, tokens = 128, batch = 32, threads = 2, mask_threads = 1, spec = 0;
    int only = -1, batch_only = 0; /* profiling: one configuration, the batch only */
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--tokens") && i + 1 < argc) tokens = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--batch") && i + 1 < argc) batch = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--mask-threads") && i + 1 < argc) mask_threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--spec")) spec = 1;
        else if (!strcmp(argv[i], "--greedy")) g_greedy = 1;
        else if (!strcmp(argv[i], "--only") && i + 1 < argc) only = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--batch-only")) batch_only = 1;
        else if (argv[i][0] != '-') path = argv[i];
        else {
            fprintf(stderr,
                    "usage: %s [model.gguf] [--reps N] [--tokens N] [--batch N] "
                    "[--threads N] [--mask-threads N] [--spec] [--greedy] [--only 0|1|2] "
                    "[--batch-only]\n",
                    argv[0]);
            return 2;
        }
    }
    if (!path) {
        snprintf(def, sizeof def, "%s/.cache/parley/models/gemma-3-270m-q4_k_m.gguf",
                 getenv("HOME") ? getenv("HOME") : ".");
        path = def;
    }
    if (reps < 1 || tokens < 2 || batch < 1 || batch > 256) return 2;
    if (!eng_constraint_available()) {
        fprintf(stderr, "built without llguidance: %s\n", eng_constraint_version());
        return 1;
    }
    char err[256];
    eng_model *m;
    eng_load_opts o = {.prec = ENG_PREC_INT8, .n_threads = threads, .block_tokens = 16};
    if (eng_model_load(path, &o, &m, err, sizeof err) != 0) {
        fprintf(stderr, "model: %s\n", err);
        return 1;
    }
    eng_tok *t;
    if (eng_tok_load(eng_model_gguf(m), &t, err, sizeof err) != 0) {
        fprintf(stderr, "tokenizer: %s\n", err);
        return 1;
    }
    g_tok = t;
    int64_t tv = pl_mono_us();
    eng_constraint_vocab *v;
    if (eng_constraint_vocab_new(t, eng_model_config(m)->n_vocab, &v, err, sizeof err) != 0) {
        fprintf(stderr, "vocab: %s\n", err);
        return 1;
    }
    printf("model %s, %d threads; constraint vocabulary of %d tokens built in %.0f ms\n", path,
           threads, eng_constraint_vocab_size(v), (double)(pl_mono_us() - tv) / 1e3);
    const char *text = "Here is a JSON object with a list of one hundred first names:";
    int32_t prompt[64];
    int np = 0;
    if (eng_tok_encode(t, text, strlen(text), eng_tok_add_bos(t) ? ENG_TOK_ADD_BOS : 0, prompt, 64,
                       &np, err, sizeof err) != 0) {
        fprintf(stderr, "encode: %s\n", err);
        return 1;
    }
    print_env();
    printf("%d-token prompt, %d tokens per request, %s, drafting %s, %d mask thread(s), %d reps\n",
           np, tokens, g_greedy ? "greedy (a prompt of its own per request)" : "temperature 1",
           spec ? "on" : "off", mask_threads, reps);
    int sizes[2] = {1, batch};
    int rc = 0;
    for (int b = 0; b < 2; b++) {
        /* per configuration (0 unconstrained, 1 plain, 2 bounded) and rep */
        double tps[3][64] = {{0}}, wait[3][64] = {{0}}, share[3][64] = {{0}}, cpu[3][64] = {{0}};
        int errs = 0;
        for (int r = 0; r < reps && r < 64; r++)
            for (int c = 0; c < 3; c++) {
                result res;
                int cfg = (r + c) % 3; /* rotate which goes first */
                if ((only >= 0 && cfg != only) || (batch_only && b == 0)) continue;
                if (run(m, v, prompt, np, sizes[b], tokens, cfg, spec, mask_threads, r, &res))
                    return 1;
                tps[cfg][r] = res.tok_s;
                errs += res.errors;
                wait[cfg][r] = res.wait_ms;
                share[cfg][r] = res.step_ms > 0 ? 100.0 * res.wait_ms / res.step_ms : 0;
                cpu[cfg][r] = res.masks ? res.mask_cpu / (double)res.masks : 0;
            }
        double u = median(tps[0], reps);
        printf("batch %2d: %-28s %7.1f tok/s\n", sizes[b], k_name[0], u);
        for (int c = 1; c < 3; c++) {
            double k = median(tps[c], reps);
            printf("batch %2d: %-28s %7.1f tok/s (%.1f%% of unconstrained); mask wait %.1f ms "
                   "per run (%.2f%% of step time), %.3f ms CPU per mask\n",
                   sizes[b], k_name[c], k, 100.0 * k / u, median(wait[c], reps),
                   median(share[c], reps), median(cpu[c], reps));
        }
        printf("  (medians of %d)\n", reps);
        fflush(stdout);
        if (errs) {
            printf("  %d requests did not end with length\n", errs);
            rc = 1;
        }
    }
    print_env();
    eng_constraint_vocab_free(v);
    eng_tok_free(t);
    eng_model_free(m);
    return rc;
}
