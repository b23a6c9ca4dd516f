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
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kern_isa.h"
#include "eng_cli.h"
#include "eng_model.h"
#include "eng_sampler.h"
#include "eng_tok.h"
#include "pl_time.h"

#define GEN_MAX_PROMPT (1 << 20)

static void gen_usage(FILE *f) {
    fprintf(f,
            "usage: parley generate MODEL.gguf [options]\n"
            "  --prompt TEXT        prompt text (needs a tokenizer in the GGUF)\n"
            "  --ids 1,2,3          prompt token ids\n"
            "  --random-prompt N    N pseudo-random prompt ids (seeded by --seed)\n"
            "  -n, --max-tokens N   tokens to generate (default 32)\n"
            "  --temp T             temperature (default 0: greedy)\n"
            "  --top-k K            top-k (default 0: off)\n"
            "  --top-p P            top-p (default 1: off)\n"
            "  --repeat-penalty R   repetition penalty (default 1: off)\n"
            "  --repeat-last-n N    penalty window (default 64; 0: whole history)\n"
            "  --seed S             RNG seed (default 0)\n"
            "  --stop 1,2           extra stop token ids\n"
            "  --ignore-eos         do not stop at the tokenizer's end-of-generation tokens\n"
            "  --threads N          compute threads (default: all CPUs)\n"
            "  --fp32               fp32 reference path (default int8)\n"
            "  --isa NAME           highest kernel level: scalar, avx2, avx512vnni, amx\n"
            "                       (default: the best this CPU supports; env PARLEY_ISA)\n"
            "  --block N            KV block tokens (default 16)\n"
            "  --chunk N            prefill chunk tokens (default 512)\n"
            "  --no-bos             do not prepend BOS to a text prompt\n"
            "  --print-ids          print generated ids\n"
            "  --print-prompt-ids   print the prompt's ids (\"prompt ids: ...\" line) before the reply\n"
            "  --quiet              print no reply text\n");
}

static double gen_now(void) { return pl_mono_s(); }

/* Parse "1,2,3" into ids (cap entries); returns count or -1. */
static int gen_parse_ids(const char *s, int32_t *ids, int cap) {
    int n = 0;
    while (*s) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v < 0 || v > 0x7fffffff || n >= cap) return -1;
        ids[n++] = (int32_t)v;
        s = end;
        if (*s == ',') s++;
        else if (*s) return -1;
    }
    return n;
}

static int gen_int(const char *s, long lo, long hi, long *out) {
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || *end || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

void eng_random_prompt(int32_t *ids, int n, int n_vocab, uint64_t seed) {
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    for (int i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        ids[i] = (int32_t)(x % (uint64_t)n_vocab);
    }
}

int eng_cmd_generate(int argc, char **argv) {
    const char *path = NULL, *prompt = NULL, *ids_arg = NULL, *stop_arg = NULL;
    long n_gen = 32, n_random = 0, threads = 0, block = 16, chunk = 512, seed = 0, last_n = 64;
    int fp32 = 0, ignore_eos = 0, print_ids = 0, print_prompt_ids = 0, quiet = 0, no_bos = 0, rc = 1;
    eng_sampler_params sp;
    eng_sampler_params_default(&sp);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = 0;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            gen_usage(stdout);
            return 0;
        }
#define NEEDV() do { if (!v) { fprintf(stderr, "generate: %s needs a value\n", a); return 2; } i++; } while (0)
        if (!strcmp(a, "--prompt")) { NEEDV(); prompt = v; }
        else if (!strcmp(a, "--ids")) { NEEDV(); ids_arg = v; }
        else if (!strcmp(a, "--stop")) { NEEDV(); stop_arg = v; }
        else if (!strcmp(a, "--random-prompt")) { NEEDV(); bad = gen_int(v, 1, GEN_MAX_PROMPT, &n_random); }
        else if (!strcmp(a, "-n") || !strcmp(a, "--max-tokens")) { NEEDV(); bad = gen_int(v, 0, 1 << 24, &n_gen); }
        else if (!strcmp(a, "--threads")) { NEEDV(); bad = gen_int(v, 1, 256, &threads); }
        else if (!strcmp(a, "--block")) { NEEDV(); bad = gen_int(v, 1, 4096, &block); }
        else if (!strcmp(a, "--chunk")) { NEEDV(); bad = gen_int(v, 1, 1 << 20, &chunk); }
        else if (!strcmp(a, "--seed")) { NEEDV(); bad = gen_int(v, 0, 0x7fffffffL, &seed); }
        else if (!strcmp(a, "--repeat-last-n")) { NEEDV(); bad = gen_int(v, 0, 1 << 24, &last_n); }
        else if (!strcmp(a, "--temp")) { NEEDV(); sp.temperature = strtof(v, NULL); }
        else if (!strcmp(a, "--top-p")) { NEEDV(); sp.top_p = strtof(v, NULL); }
        else if (!strcmp(a, "--repeat-penalty")) { NEEDV(); sp.repetition_penalty = strtof(v, NULL); }
        else if (!strcmp(a, "--top-k")) { long k = 0; NEEDV(); bad = gen_int(v, 0, 1 << 24, &k); sp.top_k = (int)k; }
        else if (!strcmp(a, "--isa")) {
            kern_isa isa;
            NEEDV();
            if (kern_isa_parse(v, &isa) != 0) {
                fprintf(stderr, "generate: unknown --isa %s (scalar, avx2, avx512vnni, amx)\n", v);
                return 2;
            }
            kern_isa_set_max(isa);
        }
        else if (!strcmp(a, "--fp32")) fp32 = 1;
        else if (!strcmp(a, "--ignore-eos")) ignore_eos = 1;
        else if (!strcmp(a, "--print-ids")) print_ids = 1;
        else if (!strcmp(a, "--print-prompt-ids")) print_prompt_ids = 1;
        else if (!strcmp(a, "--quiet")) quiet = 1;
        else if (!strcmp(a, "--no-bos")) no_bos = 1;
        else if (a[0] == '-') { fprintf(stderr, "generate: unknown option %s\n", a); return 2; }
        else if (!path) path = a;
        else { fprintf(stderr, "generate: unexpected argument %s\n", a); return 2; }
#undef NEEDV
        if (bad) {
            fprintf(stderr, "generate: bad value for %s: %s\n", a, v);
            return 2;
        }
    }
    if (!path || (!!prompt + !!ids_arg + !!n_random) != 1) {
        fprintf(stderr, "generate: need a model and exactly one of --prompt, --ids, --random-prompt\n");
        gen_usage(stderr);
        return 2;
    }
    sp.seed = (uint64_t)seed;
    sp.repeat_last_n = (int)last_n;
    if (stop_arg && (sp.n_stop = gen_parse_ids(stop_arg, sp.stop, ENG_SAMPLER_MAX_STOP)) < 0) {
        fprintf(stderr, "generate: bad --stop list\n");
        return 2;
    }

    char err[512];
    eng_model *m = NULL;
    eng_tok *tok = NULL;
    eng_sampler *smp = NULL;
    eng_kv_allocator alloc = {0};
    eng_kvseq kv;
    int kv_init = 0;
    int32_t *ids = NULL;
    float *logits = NULL;
    char *piece = NULL;
    eng_load_opts lo = {fp32 ? ENG_PREC_FP32 : ENG_PREC_INT8, (int)threads, (int)block};
    double t0 = gen_now();
    if (eng_model_load(path, &lo, &m, err, sizeof err) != 0) {
        fprintf(stderr, "generate: %s\n", err);
        goto out;
    }
    double t_load = gen_now() - t0;
    const eng_config *c = eng_model_config(m);
    char terr[256];
    if (eng_tok_load(eng_model_gguf(m), &tok, terr, sizeof terr) != 0) tok = NULL;
    if (prompt && !tok) {
        fprintf(stderr, "generate: --prompt needs a tokenizer, and this file has none usable (%s); use --ids\n", terr);
        rc = 2;
        goto out;
    }
    int cap = GEN_MAX_PROMPT, n_prompt = 0;
    ids = malloc((size_t)(cap + n_gen + 1) * sizeof *ids);
    logits = malloc((size_t)c->n_vocab * sizeof *logits);
    if (!ids || !logits) {
        fprintf(stderr, "generate: out of memory\n");
        goto out;
    }
    if (prompt) {
        int flags = ENG_TOK_PARSE_SPECIAL | (!no_bos && eng_tok_add_bos(tok) ? ENG_TOK_ADD_BOS : 0);
        if (eng_tok_encode(tok, prompt, strlen(prompt), flags, ids, cap, &n_prompt, err, sizeof err) != 0) {
            fprintf(stderr, "generate: cannot encode the prompt: %s\n", err);
            goto out;
        }
    } else if (ids_arg) {
        if ((n_prompt = gen_parse_ids(ids_arg, ids, cap)) < 0) {
            fprintf(stderr, "generate: bad --ids list\n");
            rc = 2;
            goto out;
        }
    } else {
        eng_random_prompt(ids, (int)n_random, c->n_vocab, (uint64_t)seed);
        n_prompt = (int)n_random;
    }
    if (n_prompt < 1) {
        fprintf(stderr, "generate: empty prompt\n");
        rc = 2;
        goto out;
    }
    if (eng_sampler_new(&sp, c->n_vocab, &smp, err, sizeof err) != 0) {
        fprintf(stderr, "generate: %s\n", err);
        rc = 2;
        goto out;
    }
    if (eng_kv_allocator_malloc(&alloc, eng_model_kv_layout(m)) != 0 ||
        eng_kvseq_init(&kv, eng_model_kv_layout(m), &alloc, err, sizeof err) != 0) {
        fprintf(stderr, "generate: cannot set up the KV cache\n");
        goto out;
    }
    kv_init = 1;

    if (print_prompt_ids) {
        printf("prompt ids:");
        for (int i = 0; i < n_prompt; i++) printf("%s%d", i ? "," : " ", (int)ids[i]);
        printf("\n");
    }

    /* prefill */
    double tp = gen_now();
    for (int done = 0; done < n_prompt;) {
        int n = n_prompt - done < chunk ? n_prompt - done : (int)chunk;
        eng_seq_step st = {&kv, ids + done, n, done + n == n_prompt ? ENG_LOGITS_LAST : ENG_LOGITS_NONE, logits};
        if (eng_forward(m, &st, 1, err, sizeof err) != 0) {
            fprintf(stderr, "generate: %s\n", err);
            goto out;
        }
        done += n;
    }
    double t_prefill = gen_now() - tp;

    /* decode */
    eng_tok_stream ts;
    size_t pcap = tok ? eng_tok_stream_cap(tok) : 0;
    if (tok) {
        eng_tok_stream_init(&ts, tok, 0);
        if (!(piece = malloc(pcap + 1))) goto out;
    }
    int n_out = 0;
    double td = gen_now();
    for (; n_out < n_gen; n_out++) {
        int32_t next = eng_sampler_sample(smp, logits, ids, n_prompt + n_out);
        ids[n_prompt + n_out] = next;
        if (tok && !quiet) {
            size_t np = 0;
            if (eng_tok_stream_push(&ts, next, piece, pcap, &np) == 0) {
                fwrite(piece, 1, np, stdout);
                fflush(stdout);
            }
        }
        if (eng_sampler_is_stop(smp, next) || (!ignore_eos && tok && eng_tok_is_eog(tok, next))) {
            n_out++;
            break;
        }
        if (n_out + 1 == n_gen) {
            n_out++;
            break;
        }
        eng_seq_step st = {&kv, &ids[n_prompt + n_out], 1, ENG_LOGITS_LAST, logits};
        if (eng_forward(m, &st, 1, err, sizeof err) != 0) {
            fprintf(stderr, "generate: %s\n", err);
            goto out;
        }
    }
    double t_decode = gen_now() - td;
    if (tok && !quiet) {
        size_t np = 0;
        if (eng_tok_stream_flush(&ts, piece, pcap, &np) == 0) fwrite(piece, 1, np, stdout);
        printf("\n");
    }
    if (print_ids || (!tok && !quiet)) {
        printf("ids:");
        for (int i = 0; i < n_out; i++) printf("%s%d", i ? "," : " ", (int)ids[n_prompt + i]);
        printf("\n");
    }
    fflush(stdout); /* the reply before the figures on stderr */
    /* decode steps = tokens generated after the first (which came from prefill) */
    int n_dec = n_out > 1 ? n_out - 1 : 0;
    fprintf(stderr, "model: %s, %s, %d threads, kernels %s, load %.2f s\n", path,
            fp32 ? "fp32" : "int8", eng_model_n_threads(m), kern_isa_name(kern_isa_best()), t_load);
    fprintf(stderr, "prefill: %d tokens in %.3f s (%.2f tok/s)\n", n_prompt, t_prefill,
            n_prompt / (t_prefill > 0 ? t_prefill : 1e-9));
    fprintf(stderr, "decode: %d tokens in %.3f s (%.2f tok/s)\n", n_dec, t_decode,
            n_dec / (t_decode > 0 ? t_decode : 1e-9));
    rc = 0;
out:
    if (kv_init) eng_kvseq_free(&kv);
    eng_kv_allocator_malloc_free(&alloc);
    eng_sampler_free(smp);
    eng_tok_free(tok);
    eng_model_free(m);
    free(ids);
    free(logits);
    free(piece);
    return rc;
}
