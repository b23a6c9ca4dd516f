/*
 * cmd_bench.c -- `parley bench --workload multiturn`: the continuous-
 * batching scheduler on a synthetic multi-turn chat workload, run twice in
 * one invocation (prefix cache on, then off) on the same model.
 *
 * Workload.  C conversations of T turns each.  A conversation starts with a
 * system prompt; every turn appends a user message of random length and the
 * model's reply (its max_tokens drawn at random; synthetic models have no
 * end-of-generation token, so replies run to that length).  Conversations
 * are closed loops started together: a conversation submits turn N+1 as
 * soon as turn N completes (after an optional think time), so arrivals of
 * the C conversations interleave and turn N+1's prompt is turn N's prompt +
 * reply + the new user message -- what a chat worker sees.  Conversations
 * are token-id level: user messages are pseudo-random token ids drawn from
 * the seed (no tokenizer or chat template is involved, so the figures do not
 * depend on a vocabulary); the output says so.  Both runs see the same user
 * messages and reply lengths.
 *
 * Output per run: share of prompt tokens served from the cache, TTFT
 * p50/p99 by turn index, generated tokens/s, batch size distribution and
 * step times; finally the cache-on / cache-off throughput ratio.
 *
 * `--workload engine` is the engine's own throughput benchmark (prefill,
 * decode, batched decode, bandwidth roofline, kernel profile): it is
 * handed to engine/cli/bench_engine.c with the whole command line, as
 * `--workload chat` (real text through the tokenizer, chat template and
 * splicing) is to cmd_bench_chat.c, and `--workload spec` (speculative
 * decoding: verify-step costs, drafting off vs on per prompt) to
 * engine/cli/bench_spec.c.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"
#include "cli_opt.h"
#include "eng_model.h"
#include "eng_sched.h"
#include "kv_cache.h"
#include "eng_cli.h"
#include "cmd_bench.h"
#include "pl_err.h"
#include "pl_time.h"


/* Workload and engine options. */
typedef struct bench_opts {
    const char *model;        /* GGUF path */
    int convs, turns;         /* conversations, turns each */
    int sys_len;              /* system prompt tokens */
    int user_min, user_max;   /* user message tokens */
    int reply_min, reply_max; /* reply tokens (max_tokens) */
    int think_ms;             /* pause between a reply and the next turn */
    int threads, block;       /* engine threads, KV block tokens */
    long kv_mib;              /* KV budget (cache pool or plain budget) */
    int step_tokens, max_running, window_us, fairness_ms; /* scheduler */
    uint64_t seed;                                        /* workload seed */
    int mode; /* 0 both, 1 cache on only, 2 cache off only */
} bench_opts;

/* One conversation's state (touched by the submitting thread, then by
 * the delivery thread in on_done: never both at once). */
typedef struct bench_conv {
    struct bench_run *run; /* owning run */
    int idx;               /* conversation number */
    int turn;              /* turn in flight (0-based) */
    int32_t *toks;         /* the conversation so far */
    int n, cap;            /* tokens used / allocated */
} bench_conv;

/* One run (cache on or off). */
typedef struct bench_run {
    const bench_opts *o;                              /* options */
    eng_sched *s;                                     /* scheduler */
    int n_vocab;                                      /* for user tokens */
    bench_conv *conv;                                 /* convs entries */
    double *ttft;                                     /* [conv][turn] ms, -1 if the turn failed */
    pthread_mutex_t mu;                               /* guards the fields below */
    pthread_cond_t cv;                                /* signalled when a conversation ends */
    int convs_done;                                   /* conversations finished */
    int errors;                                       /* turns that ended with an error */
    uint64_t prompt_tokens, cached_tokens, generated; /* totals */
} bench_run;

static double bench_now(void) { return pl_mono_s(); }

/* Deterministic value in [lo, hi] for (seed, conv, turn, what). */
static int bench_draw(const bench_opts *o, int conv, int turn, int what, int lo, int hi) {
    uint64_t h =
        bench_mix(o->seed ^ bench_mix((uint64_t)conv << 32 ^ (uint64_t)turn << 8 ^ (uint64_t)what));
    return lo + (int)(h % (uint64_t)(hi - lo + 1));
}

static int conv_append_user(bench_conv *c, int turn) {
    const bench_opts *o = c->run->o;
    int len = bench_draw(o, c->idx, turn, 1, o->user_min, o->user_max);
    if (turn == 0) len += o->sys_len;
    if (c->n + len > c->cap) return -1;
    for (int i = 0; i < len; i++)
        c->toks[c->n++] =
            1 + (int32_t)(bench_mix(o->seed ^ bench_mix(((uint64_t)c->idx << 40) ^
                                                        ((uint64_t)turn << 20) ^ (uint64_t)i)) %
                          (uint64_t)(c->run->n_vocab - 1));
    return 0;
}

static void bench_on_done(void *user, uint64_t id, const eng_sched_result *r);

static int conv_submit(bench_conv *c) {
    bench_run *run = c->run;
    const bench_opts *o = run->o;
    eng_sched_request q;
    memset(&q, 0, sizeof q);
    q.prompt = c->toks;
    q.n_prompt = c->n;
    eng_sampler_params_default(&q.sampling);
    q.sampling.temperature = 0.8f;
    q.sampling.top_k = 40;
    q.sampling.seed = bench_mix(o->seed ^ ((uint64_t)c->idx << 16 | (uint64_t)c->turn));
    q.max_tokens = bench_draw(o, c->idx, c->turn, 2, o->reply_min, o->reply_max);
    char ns[32];
    snprintf(ns, sizeof ns, "conv%d", c->idx % 8); /* a few tenants */
    q.ns = ns;
    q.ns_len = strlen(ns);
    q.on_done = bench_on_done;
    q.user = c;
    char err[PL_ERR_LEN];
    if (eng_sched_submit(run->s, &q, NULL, err, sizeof err) != 0) {
        fprintf(stderr, "bench: submit: %s\n", err);
        return -1;
    }
    return 0;
}

static void conv_end(bench_run *run) {
    pthread_mutex_lock(&run->mu);
    run->convs_done++;
    pthread_cond_broadcast(&run->cv);
    pthread_mutex_unlock(&run->mu);
}

static void bench_on_done(void *user, uint64_t id, const eng_sched_result *r) {
    bench_conv *c = user;
    bench_run *run = c->run;
    const bench_opts *o = run->o;
    (void)id;
    pthread_mutex_lock(&run->mu);
    run->ttft[(size_t)c->idx * o->turns + c->turn] =
        r->finish == ENG_SCHED_ERROR || !r->n_tokens ? -1 : r->ttft_ms;
    if (r->finish == ENG_SCHED_ERROR) {
        if (run->errors++ < 3) fprintf(stderr, "bench: turn failed: %s\n", r->error);
    }
    run->prompt_tokens += (uint64_t)r->prompt_tokens;
    run->cached_tokens += (uint64_t)r->cached_tokens;
    run->generated += (uint64_t)r->n_tokens;
    pthread_mutex_unlock(&run->mu);
    if (r->finish == ENG_SCHED_ERROR || c->n + r->n_tokens > c->cap) {
        conv_end(run);
        return;
    }
    memcpy(c->toks + c->n, r->tokens, (size_t)r->n_tokens * sizeof(int32_t));
    c->n += r->n_tokens;
    if (++c->turn >= o->turns || conv_append_user(c, c->turn) != 0) {
        conv_end(run);
        return;
    }
    if (o->think_ms > 0) { /* short by contract: delivery thread */
        struct timespec ts = {o->think_ms / 1000, (long)(o->think_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    if (conv_submit(c) != 0) conv_end(run);
}

/* TTFT p50/p99 per turn group: single turns up to 8, then doubling groups. */
static void print_ttft(const bench_run *run) {
    const bench_opts *o = run->o;
    double *v = malloc((size_t)o->convs * o->turns * sizeof *v);
    if (!v) return;
    printf("  TTFT by turn index (ms):   turns      p50      p99   n\n");
    for (int lo = 0; lo < o->turns;) {
        int hi = lo < 8 ? lo + 1 : lo * 2;
        if (hi > o->turns) hi = o->turns;
        int n = 0;
        for (int c = 0; c < o->convs; c++)
            for (int t = lo; t < hi; t++) {
                double x = run->ttft[(size_t)c * o->turns + t];
                if (x >= 0) v[n++] = x;
            }
        qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
        char name[32];
        if (hi - lo == 1) snprintf(name, sizeof name, "%d", lo + 1);
        else snprintf(name, sizeof name, "%d-%d", lo + 1, hi);
        printf("  %27s %8.1f %8.1f %4d\n", name, bench_pct(v, n, 0.5), bench_pct(v, n, 0.99), n);
        lo = hi;
    }
    free(v);
}

static void print_stats(const eng_sched_stats *st) {
    printf("  batch size (sequences/step):");
    for (int i = 0; i < ENG_SCHED_HIST; i++)
        if (st->batch_hist[i])
            printf(" [%d-%d]:%.1f%%", 1 << i, (2 << i) - 1,
                   100.0 * (double)st->batch_hist[i] / (double)(st->steps ? st->steps : 1));
    printf("\n  steps %llu, step time mean %.2f ms, max %.1f ms; distribution:",
           (unsigned long long)st->steps, st->steps ? st->step_ms_total / (double)st->steps : 0,
           st->step_ms_max);
    for (int i = 0; i < ENG_SCHED_HIST; i++)
        if (st->step_us_hist[i])
            printf(" <%.2gms:%.1f%%", (double)(128 << i) / 1000.0,
                   100.0 * (double)st->step_us_hist[i] / (double)(st->steps ? st->steps : 1));
    printf("\n  tokens: prefilled %llu, decoded %llu; preemptions %llu\n",
           (unsigned long long)st->prefill_tokens, (unsigned long long)st->decode_tokens,
           (unsigned long long)st->preemptions);
}

/* One run; returns generated tok/s or -1. */
/* The conversations and the TTFT table of a run; -1 out of memory. */
static int bench_run_alloc(bench_run *run) {
    const bench_opts *o = run->o;
    run->conv = calloc((size_t)o->convs, sizeof *run->conv);
    run->ttft = malloc((size_t)o->convs * o->turns * sizeof *run->ttft);
    if (!run->conv || !run->ttft) return -1;
    for (size_t i = 0; i < (size_t)o->convs * o->turns; i++) run->ttft[i] = -1;
    int cap = o->sys_len + o->turns * (o->user_max + o->reply_max) + 1;
    for (int c = 0; c < o->convs; c++) {
        run->conv[c].run = run;
        run->conv[c].idx = c;
        run->conv[c].cap = cap;
        run->conv[c].toks = malloc((size_t)cap * sizeof(int32_t));
        if (!run->conv[c].toks) return -1;
    }
    return 0;
}

/* The figures of one finished run (stdout). */
static void bench_report(const bench_run *r, const eng_sched_stats *st, kv_cache *kc, int cache_on,
                         int started, double wall, double tps) {
    const bench_opts *o = r->o;
    printf("\n== cache %s: %d conversations x %d turns (%d started), %.1f s\n",
           cache_on ? "ON " : "OFF", o->convs, o->turns, started, wall);
    printf("  prompt tokens %llu, served from cache %llu = %.2f%%\n",
           (unsigned long long)r->prompt_tokens, (unsigned long long)r->cached_tokens,
           r->prompt_tokens ? 100.0 * (double)r->cached_tokens / (double)r->prompt_tokens : 0);
    printf("  generated %llu tokens: %.1f tok/s aggregate; failed turns %d\n",
           (unsigned long long)r->generated, tps, r->errors);
    print_ttft(r);
    print_stats(st);
    if (kc) {
        kv_stats ks;
        kv_cache_stats(kc, &ks);
        printf("  cache: %llu/%llu global blocks used, %llu evictions, %llu local blocks dropped\n",
               (unsigned long long)ks.blocks_used[0], (unsigned long long)ks.blocks_total[0],
               (unsigned long long)ks.host.evictions, (unsigned long long)ks.local_blocks_dropped);
    }
}

static double bench_run_one(eng_model *m, const bench_opts *o, int cache_on) {
    double tps = -1;
    bench_run run;
    memset(&run, 0, sizeof run);
    run.o = o;
    run.n_vocab = eng_model_config(m)->n_vocab;
    pthread_mutex_init(&run.mu, NULL);
    pthread_cond_init(&run.cv, NULL);
    kv_cache *kc = NULL;
    eng_sched_config cfg;
    eng_sched_config_default(&cfg);
    cfg.max_running = o->max_running;
    cfg.step_tokens = o->step_tokens;
    cfg.batch_window_us = o->window_us;
    cfg.fairness_ms = o->fairness_ms;
    cfg.kv_budget_bytes = (size_t)o->kv_mib << 20;
    cfg.max_queue = o->convs + 16;
    if (bench_sched_open(m, &cfg, cache_on, o->block, "bench", 1, &kc, &run.s) != 0) goto done;
    if (bench_run_alloc(&run) != 0) goto done;
    double t0 = bench_now();
    int started = 0;
    for (int c = 0; c < o->convs; c++)
        if (conv_append_user(&run.conv[c], 0) == 0 && conv_submit(&run.conv[c]) == 0) started++;
        else conv_end(&run);
    pthread_mutex_lock(&run.mu);
    while (run.convs_done < o->convs) pthread_cond_wait(&run.cv, &run.mu);
    pthread_mutex_unlock(&run.mu);
    double wall = bench_now() - t0;
    eng_sched_stats st;
    eng_sched_stats_get(run.s, &st);
    eng_sched_close(run.s, 1);
    tps = (double)run.generated / wall;
    bench_report(&run, &st, kc, cache_on, started, wall, tps);
    fflush(stdout);
    if (run.errors) tps = -1;
done:
    eng_sched_free(run.s);
    if (kc) kv_cache_destroy(kc);
    if (run.conv)
        for (int c = 0; c < o->convs; c++) free(run.conv[c].toks);
    free(run.conv);
    free(run.ttft);
    pthread_mutex_destroy(&run.mu);
    pthread_cond_destroy(&run.cv);
    return tps;
}

/* --user / --reply MIN:MAX, 1 <= MIN <= MAX <= 100000. */
static int bench_range(void *ctx, const cli_opt *opt, const char *v, char *err, size_t errlen) {
    bench_opts *o = ctx;
    int user = !strcmp(opt->name, "--user");
    const char *colon = strchr(v, ':');
    char lo[32];
    long long a, b;
    pl_errf(err, errlen, CLI_EINVAL, "MIN:MAX with 1 <= MIN <= MAX <= 100000");
    if (!colon || (size_t)(colon - v) >= sizeof lo) return -1;
    memcpy(lo, v, (size_t)(colon - v));
    lo[colon - v] = 0;
    if (cli_parse_i64(lo, 1, 100000, &a) || cli_parse_i64(colon + 1, a, 100000, &b)) return -1;
    *(user ? &o->user_min : &o->reply_min) = (int)a;
    *(user ? &o->user_max : &o->reply_max) = (int)b;
    return 0;
}

static int bench_long(void *ctx, const cli_opt *opt, const char *v, char *err, size_t errlen) {
    ((bench_opts *)ctx)->turns = 90;
    return 0;
}

static int bench_cache(void *ctx, const cli_opt *opt, const char *v, char *err, size_t errlen) {
    bench_opts *o = ctx;
    if (!strcmp(v, "both")) o->mode = 0;
    else if (!strcmp(v, "on")) o->mode = 1;
    else if (!strcmp(v, "off")) o->mode = 2;
    else return pl_errf(err, errlen, CLI_EINVAL, "on, off or both");
    return 0;
}

/* Parse the multiturn workload's argv into o; -1 to run, else the exit status. */
static int bench_parse(int argc, char **argv, bench_opts *o) {
    const char *workload = NULL;
    const cli_opt opts[] = {
        {"--workload", NULL, CLI_STR, &workload, 0, 0, "multiturn|engine|chat|spec",
         "the benchmark (required)", NULL},
        {"--model", NULL, CLI_STR, &o->model, 0, 0, "FILE", "GGUF model (required)", NULL},
        {"--conversations", NULL, CLI_INT, &o->convs, 1, 100000, "C",
         "concurrent conversations (default 64)", NULL},
        {"--turns", NULL, CLI_INT, &o->turns, 1, 100000, "T", "turns per conversation (default 8)",
         NULL},
        {"--long", NULL, CLI_FN0, NULL, 0, 0, NULL,
         "long setting: 90 turns (180 messages per conversation)", bench_long},
        {"--system", NULL, CLI_INT, &o->sys_len, 0, 1000000, "N",
         "system prompt tokens (default 64)", NULL},
        {"--user", NULL, CLI_FN, NULL, 0, 0, "MIN:MAX", "user message tokens (default 8:48)",
         bench_range},
        {"--reply", NULL, CLI_FN, NULL, 0, 0, "MIN:MAX", "reply tokens (default 8:48)",
         bench_range},
        {"--think-ms", NULL, CLI_INT, &o->think_ms, 0, 60000, "N",
         "pause before a conversation's next turn (default 0)", NULL},
        {"--cache", NULL, CLI_FN, NULL, 0, 0, "on|off|both", "which runs (default both)",
         bench_cache},
        {"--kv-mib", NULL, CLI_LONG, &o->kv_mib, 1, 1 << 20, "N",
         "KV budget in MiB, same for both runs (default 256)", NULL},
        {"--step-tokens", NULL, CLI_INT, &o->step_tokens, 1, 1 << 20, "N",
         "scheduler token budget per step (default 512)", NULL},
        {"--max-running", NULL, CLI_INT, &o->max_running, 1, 4096, "N",
         "sequences per batch (default 64)", NULL},
        {"--window-us", NULL, CLI_INT, &o->window_us, 0, 10000000, "N",
         "batching window (default 10000)", NULL},
        {"--fairness-ms", NULL, CLI_INT, &o->fairness_ms, 0, 1000000, "N",
         "fairness bound of cache-aware ordering (default 200)", NULL},
        {"--threads", NULL, CLI_INT, &o->threads, 0, 1024, "N",
         "compute threads (default: all CPUs)", NULL},
        {"--block", NULL, CLI_INT, &o->block, 1, 4096, "N", "KV block tokens (default 16)", NULL},
        {"--seed", NULL, CLI_U64, &o->seed, 0, 0x7fffffffL, "N", "workload seed (default 1)", NULL},
    };
    const cli_cmd cmd = {
        .name = "bench",
        .synopsis =
            "bench --workload multiturn --model FILE [options]\n"
            "bench --workload engine --model FILE [options]  (see --workload engine --help)\n"
            "bench --workload chat --model FILE [options]  (see --workload chat --help)\n"
            "bench --workload spec --model FILE [options]  (see --workload spec --help)",
        .about = "multiturn options:\n",
        .opts = opts,
        .n_opts = CLI_NOPTS(opts),
    };
    int pr = cli_parse(&cmd, argc, argv, o, NULL, NULL);
    if (pr != CLI_OK) return pr == CLI_HELP ? 0 : 2;
    if (!workload || strcmp(workload, "multiturn") || !o->model) {
        fprintf(stderr,
                "bench: --workload multiturn|engine|chat|spec and --model FILE are required\n");
        cli_usage(&cmd, stderr);
        return 2;
    }
    return -1;
}

int bench_cmd(int argc, char **argv) {
    bench_opts o = {NULL, 64, 8, 64, 8, 48, 8, 48, 0, 0, 16, 256, 512, 64, 10000, 200, 1, 0};
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--workload") && !strcmp(argv[i + 1], "engine"))
            return eng_cmd_bench_engine(argc, argv);
        else if (!strcmp(argv[i], "--workload") && !strcmp(argv[i + 1], "chat"))
            return bench_cmd_chat(argc, argv);
        else if (!strcmp(argv[i], "--workload") && !strcmp(argv[i + 1], "spec"))
            return eng_cmd_bench_spec(argc, argv);
    int rc = bench_parse(argc, argv, &o);
    if (rc >= 0) return rc;
    eng_load_opts lo = {.prec = ENG_PREC_INT8, .n_threads = o.threads, .block_tokens = o.block};
    eng_model *m = NULL;
    char err[PL_ERR_LEN];
    if (eng_model_load(o.model, &lo, &m, err, sizeof err) != 0) {
        fprintf(stderr, "bench: %s\n", err);
        return 1;
    }
    const eng_config *c = eng_model_config(m);
    printf("parley bench multiturn: model %s (%s, %d layers, n_embd %d, vocab %d), %d threads, "
           "block %d, KV budget %ld MiB\n",
           o.model, c->arch_name, c->n_layer, c->n_embd, c->n_vocab, eng_model_n_threads(m),
           o.block, o.kv_mib);
    printf("workload: %d conversations x %d turns (%d messages each), system %d tokens, user "
           "%d..%d, reply %d..%d tokens; closed loop, think %d ms\n",
           o.convs, o.turns, 2 * o.turns, o.sys_len, o.user_min, o.user_max, o.reply_min,
           o.reply_max, o.think_ms);
    printf("conversations are token-id level: synthetic ids, no tokenizer or chat template\n");
    printf("scheduler: step budget %d tokens, max batch %d, window %d us, fairness %d ms\n",
           o.step_tokens, o.max_running, o.window_us, o.fairness_ms);
    fflush(stdout);
    double on = -1, off = -1;
    if (o.mode != 2) on = bench_run_one(m, &o, 1);
    if (o.mode != 1) off = bench_run_one(m, &o, 0);
    if (on > 0 && off > 0)
        printf("\ngenerated tok/s: cache on %.1f, off %.1f, ratio on/off %.2fx\n", on, off,
               on / off);
    eng_model_free(m);
    return (o.mode != 2 && on < 0) || (o.mode != 1 && off < 0) ? 1 : 0;
}
