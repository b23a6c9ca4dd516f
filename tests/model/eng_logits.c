/*
 * eng_logits.c -- test helper for the Python reference-numerics tests:
 * runs the engine on a token sequence and writes every position's logits.
 *
 *   eng_logits MODEL.gguf IDS.bin OUT.bin [--fp32] [--chunk C] [--prefill P]
 *              [--threads T] [--block B] [--greedy N] [--weights native|int8]
 *
 * IDS.bin holds int32 little-endian token ids.  The first P ids (default:
 * all) are prefilled in chunks of C (default P); the rest are fed one token
 * per step like decoding.  OUT.bin receives float32 logits [n_ids][n_vocab].
 * With --greedy N, after feeding the ids it generates N greedy tokens and
 * prints them comma-separated on stdout (OUT.bin then holds the logits of
 * the fed ids only).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eng_model.h"
#include "kern_isa.h"

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(
            stderr,
            "usage: eng_logits MODEL IDS.bin OUT.bin [--fp32] [--chunk C] [--prefill P] [--threads T] [--block B] [--greedy N] [--weights native|int8]\n");
        return 2;
    }
    int fp32 = 0, chunk = 0, prefill = -1, threads = 2, block = 16, greedy = 0;
    eng_weights weights = ENG_WEIGHTS_NATIVE;
    for (int i = 4; i < argc; i++) {
        if (!strcmp(argv[i], "--fp32")) fp32 = 1;
        else if (i + 1 < argc && !strcmp(argv[i], "--chunk")) chunk = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--prefill")) prefill = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--threads")) threads = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--block")) block = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--greedy")) greedy = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--weights") &&
                 eng_weights_parse(argv[i + 1], &weights) == 0)
            i++;
        else {
            fprintf(stderr, "eng_logits: bad argument %s\n", argv[i]);
            return 2;
        }
    }
    FILE *f = fopen(argv[2], "rb");
    if (!f) {
        perror(argv[2]);
        return 1;
    }
    int32_t *ids = malloc(sizeof(int32_t) * (1 << 20));
    int n = (int)fread(ids, sizeof(int32_t), 1 << 20, f);
    fclose(f);
    if (n < 1) {
        fprintf(stderr, "eng_logits: no ids\n");
        return 1;
    }
    if (prefill < 0 || prefill > n) prefill = n;
    if (chunk <= 0) chunk = prefill > 0 ? prefill : 1;
    char err[512];
    eng_model *m = NULL;
    eng_load_opts o = {.prec = fp32 ? ENG_PREC_FP32 : ENG_PREC_INT8,
                       .n_threads = threads,
                       .block_tokens = block,
                       .weights = weights};
    if (eng_model_load(argv[1], &o, &m, err, sizeof err) != 0) {
        fprintf(stderr, "eng_logits: %s\n", err);
        return 1;
    }
    fprintf(stderr, "eng_logits: isa %s\n",
            kern_isa_name(kern_isa_best())); /* PARLEY_ISA may lower it */
    int V = eng_model_config(m)->n_vocab;
    float *out = malloc(sizeof(float) * (size_t)V * (n + 1));
    eng_kv_allocator a;
    eng_kvseq s;
    if (eng_kv_allocator_malloc(&a, eng_model_kv_layout(m)) ||
        eng_kvseq_init(&s, eng_model_kv_layout(m), &a, err, sizeof err)) {
        fprintf(stderr, "eng_logits: kv setup failed\n");
        return 1;
    }
    for (int d = 0; d < n;) {
        int k = d < prefill ? (prefill - d < chunk ? prefill - d : chunk) : 1;
        eng_seq_step st = {.kv = &s,
                           .tokens = ids + d,
                           .n_tokens = k,
                           .logits = ENG_LOGITS_ALL,
                           .out = out + (size_t)d * V};
        if (eng_forward(m, &st, 1, err, sizeof err) != 0) {
            fprintf(stderr, "eng_logits: %s\n", err);
            return 1;
        }
        d += k;
    }
    f = fopen(argv[3], "wb");
    if (!f || fwrite(out, sizeof(float) * V, (size_t)n, f) != (size_t)n) {
        perror(argv[3]);
        return 1;
    }
    fclose(f);
    float *last = out + (size_t)(n - 1) * V;
    for (int g = 0; g < greedy; g++) {
        int32_t best = 0;
        for (int v = 1; v < V; v++)
            if (last[v] > last[best]) best = v;
        printf("%s%d", g ? "," : "", (int)best);
        eng_seq_step st = {.kv = &s,
                           .tokens = &best,
                           .n_tokens = 1,
                           .logits = ENG_LOGITS_LAST,
                           .out = out + (size_t)n * V};
        last = out + (size_t)n * V;
        if (g + 1 < greedy && eng_forward(m, &st, 1, err, sizeof err) != 0) {
            fprintf(stderr, "eng_logits: %s\n", err);
            return 1;
        }
    }
    if (greedy) printf("\n");
    eng_kvseq_free(&s);
    eng_kv_allocator_malloc_free(&a);
    eng_model_free(m);
    free(ids);
    free(out);
    return 0;
}
