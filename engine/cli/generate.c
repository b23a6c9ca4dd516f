/*
 * generate.c -- `parley generate`: load a model, prefill a prompt, sample a
 * reply token by token, print it and the prefill / decode speed.
 *
 * The prompt is text (encoded with the GGUF's tokenizer when it has one),
 * explicit ids (--ids 1,2,3) or N deterministic pseudo-random ids
 * (--random-prompt N, for benchmarks on synthetic models).  The reply is
 * streamed to stdout as text when a tokenizer exists; the generated ids are
 * printed ("ids: ..." line) with --print-ids or when there is no tokenizer, the
 * prompt's ids ("prompt ids: ..." line, before the reply) with
 * --print-prompt-ids.  Timings go to stderr:
 *   prefill: N tokens in S s (R tok/s)
 *   decode:  N tokens in S s (R tok/s)
 * With --speculative ngram each decode step drafts by prompt lookup and
 * verifies the draft in one chunk (eng_spec.h: the scheduler's drafter and
 * verification rule); greedy output is the same token for token, and a
 * line reports the drafts:
 *   speculative: ngram k K, D drafted, A accepted (P%), S verify steps
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli_opt.h"
#include "kern_isa.h"
#include "eng_cli.h"
#include "eng_model.h"
#include "eng_sampler.h"
#include "eng_spec.h"
#include "eng_tok.h"
#include "pl_err.h"
#include "pl_time.h"

#define GEN_MAX_PROMPT (1 << 20)

/* The command line. */
typedef struct gen_args {
    const char *path;      /* MODEL.gguf */
    const char *prompt;    /* --prompt TEXT */
    const char *ids;       /* --ids 1,2,3 */
    const char *stop;      /* --stop 1,2 */
    long n_gen;            /* -n / --max-tokens */
    long n_random;         /* --random-prompt N (0 = not given) */
    long threads;          /* --threads (0 = all CPUs) */
    long block;            /* --block */
    long chunk;            /* --chunk */
    long seed;             /* --seed */
    long last_n;           /* --repeat-last-n */
    int fp32;              /* --fp32 */
    const char *backend;   /* --backend auto|cpu|cuda */
    const char *weights;   /* --weights native|int8 */
    int ignore_eos;        /* --ignore-eos */
    int print_ids;         /* --print-ids */
    int print_prompt_ids;  /* --print-prompt-ids */
    int quiet;             /* --quiet */
    int no_bos;            /* --no-bos */
    int spec;              /* --speculative ngram (1) or off (0) */
    long spec_tokens;      /* --spec-tokens: drafted tokens per step at most */
    long ngram_min;        /* --ngram-min */
    long ngram_max;        /* --ngram-max */
    eng_sampler_params sp; /* --temp, --top-k, --top-p, --repeat-penalty (the rest after parsing) */
} gen_args;

/* What a run holds; gen_free releases it. */
typedef struct gen_run {
    eng_model *m;                       /* the model */
    eng_tok *tok;                       /* its tokenizer, NULL when it has none usable */
    eng_sampler *smp;                   /* the sampler */
    eng_kv_allocator alloc;             /* KV blocks */
    eng_kvseq kv;                       /* the one sequence */
    int kv_init;                        /* kv is initialised */
    int32_t *ids;                       /* prompt then generated ids */
    float *logits;                      /* n_vocab logits of the last position */
    float *spec_logits;                 /* --speculative: logits of a verify chunk's rows */
    eng_ngram *ngram;                   /* --speculative: the prompt-lookup index */
    long drafted, accepted, verify;     /* --speculative: drafted / accepted tokens, steps */
    int spec_k;                         /* --speculative: the next draft's length limit */
    int n_prompt;                       /* prompt ids in ids */
    int n_out;                          /* generated ids after them */
    double t_load, t_prefill, t_decode; /* seconds */
    char err[PL_ERR_LEN * 2];           /* message of the last failure: a path and its cause */
} gen_run;

static double gen_now(void) { return pl_mono_s(); }

/* Parse "1,2,3" into ids (cap entries); returns count or -1. */
static int gen_parse_ids(const char *s, int32_t *ids, int cap) {
    int n = 0;
    while (*s) {
        char num[24];
        size_t len = strcspn(s, ",");
        long long v;
        if (len >= sizeof num || n >= cap) return -1;
        memcpy(num, s, len);
        num[len] = 0;
        if (cli_parse_i64(num, 0, 0x7fffffff, &v) != 0) return -1;
        ids[n++] = (int32_t)v;
        s += len;
        if (*s == ',') s++; /* "1,2," is "1,2", as before */
    }
    return n;
}

/* --isa NAME: applied at once (the kernels are chosen when the model loads). */
static int gen_isa(void *ctx, const cli_opt *opt, const char *val, char *err, size_t errlen) {
    kern_isa isa;
    if (kern_isa_parse(val, &isa) != 0) {
        return pl_errf(err, errlen, CLI_EINVAL, "unknown ISA; scalar, avx2, avx512vnni, amx");
    }
    kern_isa_set_max(isa);
    return 0;
}

/* --speculative off|ngram. */
static int gen_spec(void *ctx, const cli_opt *opt, const char *val, char *err, size_t errlen) {
    gen_args *g = ctx;
    if (!strcmp(val, "off")) g->spec = 0;
    else if (!strcmp(val, "ngram")) g->spec = 1;
    else return pl_errf(err, errlen, CLI_EINVAL, "off or ngram");
    return 0;
}

/* Parse argv into g; returns -1 to run, else the exit status. */
static int gen_parse(int argc, char **argv, gen_args *g) {
    memset(g, 0, sizeof *g);
    g->n_gen = 32, g->block = 16, g->chunk = 512, g->last_n = 64;
    g->spec_tokens = 6, g->ngram_min = 2, g->ngram_max = 4;
    eng_sampler_params_default(&g->sp);
    const cli_opt opts[] = {
        {"--prompt", NULL, CLI_STR, &g->prompt, 0, 0, "TEXT",
         "prompt text (needs a tokenizer in the GGUF)", NULL},
        {"--ids", NULL, CLI_STR, &g->ids, 0, 0, "1,2,3", "prompt token ids", NULL},
        {"--random-prompt", NULL, CLI_LONG, &g->n_random, 1, GEN_MAX_PROMPT, "N",
         "N pseudo-random prompt ids (seeded by --seed)", NULL},
        {"--max-tokens", "-n", CLI_LONG, &g->n_gen, 0, 1 << 24, "N",
         "tokens to generate (default 32)", NULL},
        {"--temp", NULL, CLI_F32, &g->sp.temperature, -1e4, 1e4, "T",
         "temperature (default 0: greedy)", NULL},
        {"--top-k", NULL, CLI_INT, &g->sp.top_k, 0, 1 << 24, "K", "top-k (default 0: off)", NULL},
        {"--top-p", NULL, CLI_F32, &g->sp.top_p, 0, 1e4, "P", "top-p (default 1: off)", NULL},
        {"--repeat-penalty", NULL, CLI_F32, &g->sp.repetition_penalty, 0, 1e4, "R",
         "repetition penalty (default 1: off)", NULL},
        {"--repeat-last-n", NULL, CLI_LONG, &g->last_n, 0, 1 << 24, "N",
         "penalty window (default 64; 0: whole history)", NULL},
        {"--seed", NULL, CLI_LONG, &g->seed, 0, 0x7fffffffL, "S", "RNG seed (default 0)", NULL},
        {"--stop", NULL, CLI_STR, &g->stop, 0, 0, "1,2", "extra stop token ids", NULL},
        {"--ignore-eos", NULL, CLI_FLAG, &g->ignore_eos, 0, 0, NULL,
         "do not stop at the tokenizer's end-of-generation tokens", NULL},
        {"--threads", NULL, CLI_LONG, &g->threads, 1, 256, "N",
         "compute threads (default: all CPUs)", NULL},
        {"--fp32", NULL, CLI_FLAG, &g->fp32, 0, 0, NULL, "fp32 reference path (default int8)",
         NULL},
        {"--backend", NULL, CLI_STR, &g->backend, 0, 0, "NAME",
         "auto, cpu or cuda (default auto: cuda when built and a GPU is present)", NULL},
        {"--weights", NULL, CLI_STR, &g->weights, 0, 0, "FORM",
         "native (4-bit tensors stay 4-bit, default) or int8", NULL},
        {"--isa", NULL, CLI_FN, NULL, 0, 0, "NAME",
         "highest kernel level: scalar, avx2, avx512vnni, amx\n"
         "(default: the best this CPU supports; env PARLEY_ISA)",
         gen_isa},
        {"--block", NULL, CLI_LONG, &g->block, 1, 4096, "N", "KV block tokens (default 16)", NULL},
        {"--chunk", NULL, CLI_LONG, &g->chunk, 1, 1 << 20, "N",
         "prefill chunk tokens (default 512)", NULL},
        {"--no-bos", NULL, CLI_FLAG, &g->no_bos, 0, 0, NULL, "do not prepend BOS to a text prompt",
         NULL},
        {"--print-ids", NULL, CLI_FLAG, &g->print_ids, 0, 0, NULL, "print generated ids", NULL},
        {"--print-prompt-ids", NULL, CLI_FLAG, &g->print_prompt_ids, 0, 0, NULL,
         "print the prompt's ids (\"prompt ids: ...\" line) before the reply", NULL},
        {"--quiet", NULL, CLI_FLAG, &g->quiet, 0, 0, NULL, "print no reply text", NULL},
        {"--speculative", NULL, CLI_FN, NULL, 0, 0, "off|ngram",
         "draft by prompt lookup and verify drafts in one step (default off)", gen_spec},
        {"--spec-tokens", NULL, CLI_LONG, &g->spec_tokens, 1, 64, "K",
         "drafted tokens per step at most (default 6)", NULL},
        {"--ngram-min", NULL, CLI_LONG, &g->ngram_min, 1, ENG_SPEC_NGRAM_MAX, "N",
         "shortest n-gram prompt lookup matches (default 2)", NULL},
        {"--ngram-max", NULL, CLI_LONG, &g->ngram_max, 1, ENG_SPEC_NGRAM_MAX, "N",
         "longest n-gram prompt lookup matches (default 4)", NULL},
    };
    const cli_cmd cmd = {
        "generate", "generate MODEL.gguf [options]", NULL, opts, CLI_NOPTS(opts), NULL, 1, 0, NULL};
    int n_pos = 0, pr = cli_parse(&cmd, argc, argv, g, &g->path, &n_pos);
    if (pr != CLI_OK) return pr == CLI_HELP ? 0 : 2;
    if (!g->path || (!!g->prompt + !!g->ids + !!g->n_random) != 1) {
        fprintf(stderr,
                "generate: need a model and exactly one of --prompt, --ids, --random-prompt\n");
        cli_usage(&cmd, stderr);
        return 2;
    }
    g->sp.seed = (uint64_t)g->seed;
    g->sp.repeat_last_n = (int)g->last_n;
    if (g->stop && (g->sp.n_stop = gen_parse_ids(g->stop, g->sp.stop, ENG_SAMPLER_MAX_STOP)) < 0) {
        fprintf(stderr, "generate: bad --stop list\n");
        return 2;
    }
    return -1;
}

/* The prompt's ids into r->ids: encoded text, --ids or random ids.
 * Returns 0 or the exit status. */
static int gen_prompt(const gen_args *g, gen_run *r, int cap) {
    if (g->prompt) {
        int flags =
            ENG_TOK_PARSE_SPECIAL | (!g->no_bos && eng_tok_add_bos(r->tok) ? ENG_TOK_ADD_BOS : 0);
        if (eng_tok_encode(r->tok, g->prompt, strlen(g->prompt), flags, r->ids, cap, &r->n_prompt,
                           r->err, sizeof r->err) != 0) {
            fprintf(stderr, "generate: cannot encode the prompt: %s\n", r->err);
            return 1;
        }
    } else if (g->ids) {
        if ((r->n_prompt = gen_parse_ids(g->ids, r->ids, cap)) < 0) {
            fprintf(stderr, "generate: bad --ids list\n");
            return 2;
        }
    } else {
        eng_random_prompt(r->ids, (int)g->n_random, eng_model_config(r->m)->n_vocab,
                          (uint64_t)g->seed);
        r->n_prompt = (int)g->n_random;
    }
    if (r->n_prompt < 1) {
        fprintf(stderr, "generate: empty prompt\n");
        return 2;
    }
    return 0;
}

/* Load the model and tokenizer, build the prompt, the sampler and the KV
 * sequence.  Returns 0 or the exit status (message printed). */
static int gen_setup(const gen_args *g, gen_run *r) {
    eng_load_opts lo = {.prec = g->fp32 ? ENG_PREC_FP32 : ENG_PREC_INT8,
                        .n_threads = (int)g->threads,
                        .block_tokens = (int)g->block};
    if ((g->backend && eng_backend_kind_parse(g->backend, &lo.backend) != 0) ||
        (g->weights && eng_weights_parse(g->weights, &lo.weights) != 0)) {
        fprintf(stderr, "generate: bad --backend or --weights (auto|cpu|cuda, native|int8)\n");
        return 2;
    }
    double t0 = gen_now();
    if (eng_model_load(g->path, &lo, &r->m, r->err, sizeof r->err) != 0) {
        fprintf(stderr, "generate: %s\n", r->err);
        return 1;
    }
    r->t_load = gen_now() - t0;
    const eng_config *c = eng_model_config(r->m);
    char terr[PL_ERR_LEN];
    if (eng_tok_load(eng_model_gguf(r->m), &r->tok, terr, sizeof terr) != 0) r->tok = NULL;
    if (g->prompt && !r->tok) {
        fprintf(
            stderr,
            "generate: --prompt needs a tokenizer, and this file has none usable (%s); use --ids\n",
            terr);
        return 2;
    }
    int cap = GEN_MAX_PROMPT;
    r->ids = malloc((size_t)(cap + g->n_gen + 1) * sizeof *r->ids);
    r->logits = malloc((size_t)c->n_vocab * sizeof *r->logits);
    if (!r->ids || !r->logits) {
        fprintf(stderr, "generate: out of memory\n");
        return 1;
    }
    int rc = gen_prompt(g, r, cap);
    if (rc) return rc;
    if (eng_sampler_new(&g->sp, c->n_vocab, &r->smp, r->err, sizeof r->err) != 0) {
        fprintf(stderr, "generate: %s\n", r->err);
        return 2;
    }
    if (g->spec) {
        r->spec_k = (int)g->spec_tokens;
        if (eng_ngram_new((int)g->ngram_min, (int)g->ngram_max, &r->ngram, r->err, sizeof r->err) !=
            0) {
            fprintf(stderr, "generate: %s\n", r->err);
            return 2;
        }
        r->spec_logits = malloc((size_t)(g->spec_tokens + 1) * c->n_vocab * sizeof(float));
        if (!r->spec_logits) {
            fprintf(stderr, "generate: out of memory\n");
            return 1;
        }
    }
    if (eng_kv_allocator_malloc(&r->alloc, eng_model_kv_layout(r->m)) != 0 ||
        eng_kvseq_init(&r->kv, eng_model_kv_layout(r->m), &r->alloc, r->err, sizeof r->err) != 0) {
        fprintf(stderr, "generate: cannot set up the KV cache\n");
        return 1;
    }
    r->kv_init = 1;
    return 0;
}

/* Prefill the prompt in chunks; logits of its last position.  0 or 1. */
static int gen_prefill(const gen_args *g, gen_run *r) {
    double tp = gen_now();
    for (int done = 0; done < r->n_prompt;) {
        int n = r->n_prompt - done < g->chunk ? r->n_prompt - done : (int)g->chunk;
        eng_seq_step st = {.kv = &r->kv,
                           .tokens = r->ids + done,
                           .n_tokens = n,
                           .logits = done + n == r->n_prompt ? ENG_LOGITS_LAST : ENG_LOGITS_NONE,
                           .out = r->logits};
        if (eng_forward(r->m, &st, 1, r->err, sizeof r->err) != 0) {
            fprintf(stderr, "generate: %s\n", r->err);
            return 1;
        }
        done += n;
    }
    r->t_prefill = gen_now() - tp;
    return 0;
}

/* One decode step after tokens r->ids[0..n) (the KV holds n - 1): feed
 * the last token, with a prompt-lookup draft under --speculative, and put
 * the tokens it yields at r->ids[n..]; returns their count (>= 1) or -1. */
static int gen_step(const gen_args *g, gen_run *r, int n) {
    int V = eng_model_config(r->m)->n_vocab, k = 0, acc = 0;
    if (g->spec) {
        k = r->spec_k;
        if (k > g->n_gen - r->n_out - 1) k = (int)g->n_gen - r->n_out - 1;
        k = eng_spec_max_draft(eng_model_kv_layout(r->m), r->kv.n_tokens, k);
        k = k > 0 ? eng_ngram_draft(r->ngram, r->ids, n, k, r->ids + n) : 0;
    }
    eng_seq_step st = {.kv = &r->kv,
                       .tokens = &r->ids[n - 1],
                       .n_tokens = 1 + k,
                       .logits = k ? ENG_LOGITS_ALL : ENG_LOGITS_LAST,
                       .out = k ? r->spec_logits : r->logits};
    if (eng_forward(r->m, &st, 1, r->err, sizeof r->err) != 0) return -1;
    if (!k) {
        r->ids[n] = eng_sampler_sample(r->smp, r->logits, r->ids, n);
        return 1;
    }
    int e = eng_spec_verify(r->smp, r->spec_logits, V, r->ids, n, r->ids + n, k,
                            (int)g->n_gen - r->n_out, &acc);
    r->drafted += k;
    r->accepted += acc;
    r->spec_k = eng_spec_next_k(r->spec_k, k, acc, (int)g->spec_tokens);
    r->verify++;
    if (eng_kvseq_truncate(&r->kv, n + e - 1) != 0) {
        snprintf(r->err, sizeof r->err, "cannot cut the KV back after verification");
        return -1;
    }
    return e;
}

/* Sample up to n_gen tokens, streaming their text unless --quiet.  0 or 1. */
static int gen_decode(const gen_args *g, gen_run *r) {
    eng_tok_stream ts;
    size_t pcap = r->tok ? eng_tok_stream_cap(r->tok) : 0;
    char *piece = NULL;
    if (r->tok) {
        eng_tok_stream_init(&ts, r->tok, 0);
        if (!(piece = malloc(pcap + 1))) return 1;
    }
    int32_t *out = r->ids + r->n_prompt;
    double td = gen_now();
    r->n_out = 0;
    int e = 0;
    if (g->n_gen > 0) {
        out[0] = eng_sampler_sample(r->smp, r->logits, r->ids, r->n_prompt);
        e = 1;
    }
    while (e > 0) {
        int stop = 0;
        for (int i = 0; i < e && !stop; i++) {
            int32_t next = out[r->n_out++];
            size_t np = 0;
            if (r->tok && !g->quiet && eng_tok_stream_push(&ts, next, piece, pcap, &np) == 0) {
                fwrite(piece, 1, np, stdout);
                fflush(stdout);
            }
            stop = eng_sampler_is_stop(r->smp, next) ||
                   (!g->ignore_eos && r->tok && eng_tok_is_eog(r->tok, next)) ||
                   r->n_out == g->n_gen;
        }
        if (stop) break;
        if ((e = gen_step(g, r, r->n_prompt + r->n_out)) < 0) {
            fprintf(stderr, "generate: %s\n", r->err);
            free(piece);
            return 1;
        }
    }
    r->t_decode = gen_now() - td;
    if (r->tok && !g->quiet) {
        size_t np = 0;
        if (eng_tok_stream_flush(&ts, piece, pcap, &np) == 0) fwrite(piece, 1, np, stdout);
        printf("\n");
    }
    free(piece);
    return 0;
}

/* "label: a,b,c" on stdout. */
static void gen_print_ids(const char *label, const int32_t *ids, int n) {
    printf("%s:", label);
    for (int i = 0; i < n; i++) printf("%s%d", i ? "," : " ", (int)ids[i]);
    printf("\n");
}

/* The ids line and the figures on stderr. */
static void gen_report(const gen_args *g, const gen_run *r) {
    if (g->print_ids || (!r->tok && !g->quiet))
        gen_print_ids("ids", r->ids + r->n_prompt, r->n_out);
    fflush(stdout); /* the reply before the figures on stderr */
    /* decode steps = tokens generated after the first (which came from prefill) */
    int n_dec = r->n_out > 1 ? r->n_out - 1 : 0;
    fprintf(stderr, "model: %s, %s, %s backend, %d threads, kernels %s, load %.2f s\n", g->path,
            g->fp32 ? "fp32" : "int8", eng_model_backend_name(r->m), eng_model_n_threads(r->m),
            kern_isa_name(kern_isa_best()), r->t_load);
    fprintf(stderr, "prefill: %d tokens in %.3f s (%.2f tok/s)\n", r->n_prompt, r->t_prefill,
            r->n_prompt / (r->t_prefill > 0 ? r->t_prefill : 1e-9));
    fprintf(stderr, "decode: %d tokens in %.3f s (%.2f tok/s)\n", n_dec, r->t_decode,
            n_dec / (r->t_decode > 0 ? r->t_decode : 1e-9));
    if (g->spec)
        fprintf(stderr,
                "speculative: ngram k %ld, %ld drafted, %ld accepted (%.1f%%), %ld verify steps\n",
                g->spec_tokens, r->drafted, r->accepted,
                r->drafted ? 100.0 * (double)r->accepted / (double)r->drafted : 0.0, r->verify);
}

static void gen_free(gen_run *r) {
    if (r->kv_init) eng_kvseq_free(&r->kv);
    eng_kv_allocator_malloc_free(&r->alloc);
    eng_sampler_free(r->smp);
    eng_tok_free(r->tok);
    eng_model_free(r->m);
    free(r->ids);
    free(r->logits);
    free(r->spec_logits);
    eng_ngram_free(r->ngram);
}

int eng_cmd_generate(int argc, char **argv) {
    gen_args g;
    int rc = gen_parse(argc, argv, &g);
    if (rc >= 0) return rc;
    gen_run r;
    memset(&r, 0, sizeof r);
    rc = gen_setup(&g, &r);
    if (!rc && g.print_prompt_ids) gen_print_ids("prompt ids", r.ids, r.n_prompt);
    if (!rc) rc = gen_prefill(&g, &r);
    if (!rc) rc = gen_decode(&g, &r);
    if (!rc) gen_report(&g, &r);
    gen_free(&r);
    return rc;
}
