/*
 * gpu_model.c -- one model on the CPU backend and on the CUDA backend:
 * correctness of the int8 path, then the CUDA backend's speed.
 *
 *   gpu_model MODEL.gguf NAME [--make PRESET] [--skip-bench]
 *
 * --make PRESET writes the synthetic model first (eng_mkmodel, Q8_0).
 * Both loads are int8 with 4-bit tensors made int8 (the CUDA backend
 * folds every part to per-channel int8; the CPU keeps 32-value blocks).
 *
 * Correctness (the same token ids on both backends):
 *   logits  a 128-token prefill (every position's logits) and 32 decode
 *           steps fed the CPU's greedy tokens: relative error
 *           ||cuda - cpu|| / ||cpu|| per position (mean, max) and the share
 *           of positions whose argmax agrees.  Checked: mean < 0.25 and
 *           agreement >= 80% (a broken op gives ~1 and ~0).
 *   greedy  5 prompts of 16 ids, 24 greedy tokens generated on each
 *           backend independently: how many prompts give the same tokens
 *           (the criterion: all 5), and where the others diverge.
 * Speed (CUDA; wall clock around eng_forward, which returns after the
 * logits are on the host):
 *   decode b1   64 steps of one sequence after a 128-token prefill: tok/s,
 *               and against the roofline tok/s = bandwidth / weight bytes
 *               read per step (eng_model_weight_bytes on the CUDA backend)
 *   decode b64  32 steps of 64 sequences (64 tokens per forward) after a
 *               32-token prefill each
 *   prefill     512 tokens in one forward (last position's logits): tok/s
 * Result lines "@ <NAME>_<what>=..." feed tests/gpu/run.sh's summary.
 */
#include <stdint.h>

#include "eng_mkmodel.h"
#include "eng_model.h"
#include "gpu_common.h"

static int g_V; /* vocabulary of the model under test */

static int load(const char *path, eng_backend_kind k, eng_model **m) {
    char err[512];
    eng_load_opts o = {.prec = ENG_PREC_INT8,
                       .n_threads = 0,
                       .block_tokens = 16,
                       .backend = k,
                       .weights = ENG_WEIGHTS_INT8};
    double t0 = gpu_now();
    if (eng_model_load(path, &o, m, err, sizeof err) != 0) {
        printf("  load (%s): %s\n", eng_backend_kind_name(k), err);
        return -1;
    }
    printf("  loaded on %s in %.1f s (%.0f MiB of weights read per decode step)\n",
           eng_model_backend_name(*m), gpu_now() - t0, eng_model_weight_bytes(*m) / 1048576.0);
    return 0;
}

/* One sequence's KV state with a malloc allocator. */
typedef struct seq {
    eng_kv_allocator a;
    eng_kvseq kv;
} seq;

static int seq_init(seq *s, eng_model *m) {
    char err[256];
    if (eng_kv_allocator_malloc(&s->a, eng_model_kv_layout(m)) != 0) return -1;
    return eng_kvseq_init(&s->kv, eng_model_kv_layout(m), &s->a, err, sizeof err);
}

static void seq_free(seq *s) {
    eng_kvseq_free(&s->kv);
    eng_kv_allocator_malloc_free(&s->a);
}

static int step(eng_model *m, seq *s, const int32_t *tok, int n, int logits, float *out) {
    char err[512];
    eng_seq_step st = {.kv = &s->kv, .tokens = tok, .n_tokens = n, .logits = logits, .out = out};
    int rc = eng_forward(m, &st, 1, err, sizeof err);
    if (rc) printf("  forward: %s\n", err);
    return rc;
}

static int argmax(const float *l) {
    int b = 0;
    for (int i = 1; i < g_V; i++)
        if (l[i] > l[b]) b = i;
    return b;
}

static void ids(int32_t *t, int n, uint64_t seed) {
    for (int i = 0; i < n; i++)
        t[i] = (int32_t)(gpu_rand(&seed) % (uint64_t)(g_V < 32000 ? g_V : 32000));
}

/* Logits of a 128-token prefill and 32 decode steps on both backends. */
static int check_logits(eng_model *mc, eng_model *mg, const char *name) {
    enum { P = 128, D = 32 };
    size_t V = (size_t)g_V;
    float *lc = malloc((P + D) * V * 4), *lg = malloc((P + D) * V * 4);
    int32_t tok[P];
    ids(tok, P, 99);
    seq sc, sg;
    if (!lc || !lg || seq_init(&sc, mc) || seq_init(&sg, mg)) return -1;
    int rc = step(mc, &sc, tok, P, ENG_LOGITS_ALL, lc) || step(mg, &sg, tok, P, ENG_LOGITS_ALL, lg);
    for (int d = 0; d < D && !rc; d++) { /* the CPU's greedy choice fed to both */
        int32_t t = argmax(lc + (P + d - 1) * V);
        rc = step(mc, &sc, &t, 1, ENG_LOGITS_LAST, lc + (P + d) * V) ||
             step(mg, &sg, &t, 1, ENG_LOGITS_LAST, lg + (P + d) * V);
    }
    if (rc) return -1;
    double sum = 0, mx = 0, sum_d = 0;
    int agree = 0;
    for (int p = 0; p < P + D; p++) {
        double e = gpu_rms_rel(lg + p * V, lc + p * V, V);
        sum += e;
        if (p >= P) sum_d += e;
        if (!(e <= mx)) mx = e;
        agree += argmax(lg + p * V) == argmax(lc + p * V);
    }
    double mean = sum / (P + D), pct = 100.0 * agree / (P + D);
    printf("  logits (128 prefill + 32 decode): relative error mean %.4f (decode %.4f), max %.4f; "
           "argmax agrees at %d of %d positions\n",
           mean, sum_d / D, mx, agree, P + D);
    char k[96];
    snprintf(k, sizeof k, "%s_logit_rel_err", name);
    GPU_RESULT(k, "mean=%.4f,max=%.4f", mean, mx);
    snprintf(k, sizeof k, "%s_top1_agree", name);
    GPU_RESULT(k, "%.1f%%", pct);
    seq_free(&sc), seq_free(&sg);
    free(lc), free(lg);
    return mean < 0.25 && pct >= 80 ? 0 : 1;
}

/* Greedy continuations of 5 prompts on each backend. */
static int check_greedy(eng_model *mc, eng_model *mg, const char *name) {
    enum { NP = 5, L = 16, G = 24 };
    float *l = malloc((size_t)g_V * 4);
    int equal = 0;
    char where[256] = "";
    for (int p = 0; p < NP; p++) {
        int32_t out[2][G], prompt[L];
        ids(prompt, L, 1000 + (uint64_t)p);
        for (int b = 0; b < 2; b++) {
            eng_model *m = b ? mg : mc;
            seq s;
            if (seq_init(&s, m) || step(m, &s, prompt, L, ENG_LOGITS_LAST, l)) return -1;
            for (int g = 0; g < G; g++) {
                out[b][g] = argmax(l);
                if (g + 1 < G && step(m, &s, &out[b][g], 1, ENG_LOGITS_LAST, l)) return -1;
            }
            seq_free(&s);
        }
        int first = G;
        for (int g = 0; g < G && first == G; g++)
            if (out[0][g] != out[1][g]) first = g;
        equal += first == G;
        if (first < G)
            snprintf(where + strlen(where), sizeof where - strlen(where), " p%d@%d", p, first);
    }
    printf("  greedy: %d of %d prompts give the same %d tokens%s%s\n", equal, NP, G,
           equal < NP ? "; first differing token:" : "", where);
    char k[96];
    snprintf(k, sizeof k, "%s_greedy_equal", name);
    GPU_RESULT(k, "%d/%d", equal, NP);
    free(l);
    return 0;
}

static int bench(eng_model *mg, const char *name, const gpu_peaks *pk) {
    size_t V = (size_t)g_V;
    char k[96];
    /* decode, batch 1 */
    float *l = malloc(64 * V * 4);
    int32_t tok[512];
    ids(tok, 512, 5);
    seq s;
    if (!l || seq_init(&s, mg) || step(mg, &s, tok, 128, ENG_LOGITS_LAST, l)) return -1;
    for (int i = 0; i < 4; i++) /* warm-up: plans, first blocks */
        if (step(mg, &s, &tok[i], 1, ENG_LOGITS_LAST, l)) return -1;
    double t0 = gpu_now();
    for (int i = 0; i < 64; i++)
        if (step(mg, &s, &tok[i], 1, ENG_LOGITS_LAST, l)) return -1;
    double dt = gpu_now() - t0, tps = 64 / dt;
    double wb = (double)eng_model_weight_bytes(mg), roof = pk->hbm_bps / wb;
    printf("  decode b1: %.1f tok/s (%.2f ms/step); roofline %.0f tok/s (%.0f MiB / %.2f TB/s): "
           "%.1f%%\n",
           tps, 1e3 * dt / 64, roof, wb / 1048576, pk->hbm_bps / 1e12, 100 * tps / roof);
    snprintf(k, sizeof k, "%s_decode_b1", name);
    GPU_RESULT(k, "%.1ftok/s,%.1f%%roofline", tps, 100 * tps / roof);
    seq_free(&s);
    /* decode, batch 64 */
    enum { NB = 64, PRE = 32, STEPS = 32 };
    seq *ss = calloc(NB, sizeof *ss);
    eng_seq_step *st = calloc(NB, sizeof *st);
    int32_t *bt = malloc(NB * PRE * sizeof *bt), nt[NB];
    char err[512];
    for (int b = 0; b < NB; b++) {
        if (seq_init(&ss[b], mg)) return -1;
        ids(bt + b * PRE, PRE, 300 + (uint64_t)b);
        st[b] = (eng_seq_step){.kv = &ss[b].kv,
                               .tokens = bt + b * PRE,
                               .n_tokens = PRE,
                               .logits = ENG_LOGITS_LAST,
                               .out = l + (size_t)b * V};
    }
    if (eng_forward(mg, st, NB, err, sizeof err)) return printf("  forward: %s\n", err), -1;
    double tb = 0;
    for (int i = 0; i < STEPS + 1; i++) {
        for (int b = 0; b < NB; b++) {
            nt[b] = (int32_t)((b * 7 + i) % 1000);
            st[b].tokens = &nt[b];
            st[b].n_tokens = 1;
        }
        double t1 = gpu_now();
        if (eng_forward(mg, st, NB, err, sizeof err)) return printf("  forward: %s\n", err), -1;
        if (i > 0) tb += gpu_now() - t1; /* step 0 warms up */
    }
    printf("  decode b64: %.0f tok/s (%.2f ms/step, %.0f MiB of logits downloaded per step)\n",
           NB * STEPS / tb, 1e3 * tb / STEPS, NB * V * 4 / 1048576.0);
    snprintf(k, sizeof k, "%s_decode_b64", name);
    GPU_RESULT(k, "%.0ftok/s", NB * STEPS / tb);
    for (int b = 0; b < NB; b++) seq_free(&ss[b]);
    free(ss), free(st), free(bt);
    /* prefill 512 */
    double best = 1e30;
    for (int r = 0; r < 4; r++) {
        seq p;
        if (seq_init(&p, mg)) return -1;
        double t1 = gpu_now();
        if (step(mg, &p, tok, 512, ENG_LOGITS_LAST, l)) return -1;
        double d = gpu_now() - t1;
        if (r > 0 && d < best) best = d; /* run 0 warms up */
        seq_free(&p);
    }
    printf("  prefill 512: %.0f tok/s (%.1f ms)\n", 512 / best, 1e3 * best);
    snprintf(k, sizeof k, "%s_prefill512", name);
    GPU_RESULT(k, "%.0ftok/s", 512 / best);
    eng_backend_kv_stats ks;
    if (eng_model_kv_stats(mg, &ks) == 0)
        printf("  device KV tier: %llu lookups, %llu hits, %llu uploads (%.1f MiB), %.1f MiB "
               "written through, %ld of %ld blocks resident\n",
               (unsigned long long)ks.lookups, (unsigned long long)ks.hits,
               (unsigned long long)ks.uploads, ks.upload_bytes / 1048576.0,
               ks.writeback_bytes / 1048576.0, ks.resident, ks.capacity);
    free(l);
    return 0;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 3) {
        fprintf(stderr, "usage: gpu_model MODEL.gguf NAME [--make PRESET] [--skip-bench]\n");
        return 2;
    }
    const char *path = argv[1], *name = argv[2], *preset = NULL;
    int skip_bench = 0;
    for (int i = 3; i < argc; i++) {
        if (!strcmp(argv[i], "--make") && i + 1 < argc) preset = argv[++i];
        else if (!strcmp(argv[i], "--skip-bench")) skip_bench = 1;
    }
    if (kern_cuda_device_count() <= 0) {
        printf("gpu_model: no CUDA device: skipped\n");
        return 77;
    }
    char err[512];
    if (preset) {
        eng_mkmodel_opts o;
        eng_mkmodel_opts_default(&o);
        o.preset = preset;
        o.out = path;
        double t0 = gpu_now();
        if (eng_mkmodel(&o, err, sizeof err) != 0) {
            printf("gpu_model: mkmodel %s: %s\n", preset, err);
            return 1;
        }
        printf("  made %s (%s) in %.1f s\n", path, preset, gpu_now() - t0);
    }
    kern_cuda *kc;
    kern_cuda_info info;
    gpu_peaks pk;
    if (kern_cuda_open(&kc, 0, err, sizeof err) != 0) {
        printf("gpu_model: %s\n", err);
        return 1;
    }
    kern_cuda_get_info(kc, &info);
    kern_cuda_close(kc);
    gpu_peaks_of(&info, &pk);
    printf("model %s: %s\n", name, path);
    eng_model *mc = NULL, *mg = NULL;
    if (load(path, ENG_BACKEND_CPU, &mc) || load(path, ENG_BACKEND_CUDA, &mg)) return 1;
    g_V = eng_model_config(mg)->n_vocab;
    int fail = 0;
    double t0 = gpu_now();
    int rc = check_logits(mc, mg, name);
    if (rc < 0) return 1;
    fail |= rc;
    if (check_greedy(mc, mg, name) < 0) return 1;
    printf("  (correctness checks %.1f s)\n", gpu_now() - t0);
    eng_model_free(mc);
    if (!skip_bench && bench(mg, name, &pk) < 0) return 1;
    eng_model_free(mg);
    printf("gpu_model %s: %s\n", name, fail ? "FAIL" : "ok");
    return fail;
}
