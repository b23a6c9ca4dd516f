/*
 * test_forward.c -- the forward pass on tiny synthetic GGUFs: chunked
 * prefill (1, 7, 64 tokens at a time) and decode reproduce one-shot
 * prefill exactly (int8 and fp32), batching several sequences in one step
 * changes nothing, running out of KV blocks fails cleanly and leaves the
 * sequence unchanged, local blocks are released, bad input is refused, and
 * the digest tells files and precisions apart; a step asking only for its
 * argmax (ENG_LOGITS_ARGMAX) gets the argmax of the logits a full step
 * writes, mixed in one batch with full rows, with and without a soft-cap.
 */
#define PTEST_MAIN
#include "ptest.h"

#include <unistd.h>

#include "eng_model.h"
#include "kern_ops.h"
#include "backend_cpu_int.h"
#include "eng_model_int.h" /* white-box: which weight format was chosen */
#include "tiny_model.h"
#include "../kv/kv_budget.h"

#define NTOK 64

static const tiny_spec llama_spec = {.arch = "llama",
                                     .n_layer = 3,
                                     .n_embd = 64,
                                     .n_head = 4,
                                     .n_head_kv = 2,
                                     .head_dim = 16,
                                     .n_ff = 96,
                                     .n_vocab = 256,
                                     .seed = 1};

/* the same llama with Q8_0 weights: the int8 path keeps block scales */
static const tiny_spec llama_q8_spec = {.arch = "llama",
                                        .n_layer = 3,
                                        .n_embd = 64,
                                        .n_head = 4,
                                        .n_head_kv = 2,
                                        .head_dim = 16,
                                        .n_ff = 96,
                                        .n_vocab = 256,
                                        .seed = 1,
                                        .q8_0 = 1};

/* gemma3, MQA, windows 8/8/0/8, layer 1 shares layer 0's KV */
static const tiny_spec gemma_spec = {.arch = "gemma3",
                                     .n_layer = 4,
                                     .n_embd = 64,
                                     .n_head = 2,
                                     .n_head_kv = 1,
                                     .head_dim = 32,
                                     .n_ff = 96,
                                     .n_vocab = 256,
                                     .sliding_window = 8,
                                     .ext = 1,
                                     .window = {8, 8, 0, 8},
                                     .kv_src = {0, 0, 2, 3},
                                     .seed = 2};

static eng_model *load_w(const tiny_spec *s, eng_precision prec, eng_weights wf, char *path,
                         size_t cap) {
    char err[256] = "";
    snprintf(path, cap, "%s/parley_fwd_%d_%s_%llu_%d_%d.gguf",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid(), s->arch,
             (unsigned long long)s->seed, s->q8_0, s->q4);
    if (tiny_model_write(path, s, err, sizeof err) != 0) {
        fprintf(stderr, "write: %s\n", err);
        return NULL;
    }
    eng_load_opts o = {.prec = prec, .n_threads = 2, .block_tokens = 4, .weights = wf};
    eng_model *m = NULL;
    if (eng_model_load(path, &o, &m, err, sizeof err) != 0) fprintf(stderr, "load: %s\n", err);
    return m;
}

static eng_model *load(const tiny_spec *s, eng_precision prec, char *path, size_t cap) {
    return load_w(s, prec, ENG_WEIGHTS_NATIVE, path, cap);
}

static int32_t prompt[NTOK + 16];

static void init_prompt(void) {
    for (int i = 0; i < NTOK + 16; i++) prompt[i] = (int32_t)((i * 97 + 13) % 256);
}

/* Run n tokens through a fresh sequence in chunks, collecting all logits. */
static int run_chunks(eng_model *m, int n, int chunk, float *out) {
    const eng_kv_layout *l = eng_model_kv_layout(m);
    int V = eng_model_config(m)->n_vocab;
    eng_kv_allocator a;
    eng_kvseq s;
    char err[256];
    if (eng_kv_allocator_malloc(&a, l) || eng_kvseq_init(&s, l, &a, err, sizeof err)) return -1;
    int rc = 0;
    for (int d = 0; d < n && !rc; d += chunk) {
        int k = n - d < chunk ? n - d : chunk;
        eng_seq_step st = {.kv = &s,
                           .tokens = prompt + d,
                           .n_tokens = k,
                           .logits = ENG_LOGITS_ALL,
                           .out = out + (size_t)d * V};
        rc = eng_forward(m, &st, 1, err, sizeof err);
        if (rc) fprintf(stderr, "forward: %s\n", err);
    }
    eng_kvseq_free(&s);
    eng_kv_allocator_malloc_free(&a);
    return rc;
}

static void check_chunking(const tiny_spec *spec, eng_precision prec) {
    char path[512];
    eng_model *m = load(spec, prec, path, sizeof path);
    PT_ASSERT(m);
    int V = eng_model_config(m)->n_vocab, N = NTOK + 8;
    float *ref = malloc(sizeof(float) * N * V), *got = malloc(sizeof(float) * N * V);
    init_prompt();
    PT_EQ_INT(run_chunks(m, N, N, ref), 0);
    float mx = 0;
    for (int i = 0; i < N * V; i++) mx = fabsf(ref[i]) > mx ? fabsf(ref[i]) : mx;
    PT_ASSERT(mx > 0.1f && mx < 1e4f);
    int chunks[] = {1, 7, NTOK};
    for (int c = 0; c < 3; c++) {
        /* chunk 64 = a 64-token prefill followed by 8 one-token decode steps */
        PT_EQ_INT(run_chunks(m, NTOK, chunks[c], got), 0);
        PT_EQ_INT(run_chunks(m, N, chunks[c] == NTOK ? 1 : chunks[c], got + 0), 0);
        if (chunks[c] == NTOK) {
            float *pre = malloc(sizeof(float) * N * V);
            PT_EQ_INT(run_chunks(m, NTOK, NTOK, pre), 0);
            memcpy(got, pre, sizeof(float) * NTOK * V);
            free(pre);
        }
        PT_ASSERT_MSG(!memcmp(ref, got, sizeof(float) * N * V), "%s prec %d chunk %d differs",
                      spec->arch, prec, chunks[c]);
    }
    free(ref);
    free(got);
    eng_model_free(m);
    unlink(path);
}

PT_TEST(chunked_prefill_matches_one_shot_llama_int8) { check_chunking(&llama_spec, ENG_PREC_INT8); }
PT_TEST(chunked_prefill_matches_one_shot_llama_fp32) { check_chunking(&llama_spec, ENG_PREC_FP32); }
PT_TEST(chunked_prefill_matches_one_shot_llama_q8_0_int8) {
    check_chunking(&llama_q8_spec, ENG_PREC_INT8);
}
PT_TEST(chunked_prefill_matches_one_shot_gemma3_int8) {
    check_chunking(&gemma_spec, ENG_PREC_INT8);
}
PT_TEST(chunked_prefill_matches_one_shot_gemma3_fp32) {
    check_chunking(&gemma_spec, ENG_PREC_FP32);
}

PT_TEST(q8_0_block_scales_close_to_fp32) {
    char p1[512], p2[512];
    eng_model *q = load(&llama_q8_spec, ENG_PREC_INT8, p1, sizeof p1);
    eng_model *f = load(&llama_q8_spec, ENG_PREC_FP32, p2, sizeof p2);
    PT_ASSERT(q && f);
    const eng_bweight *qkv = q->layers[0].wqkv.bw; /* the CPU backend's form */
    PT_ASSERT(qkv->n_runs == 1 && qkv->runs[0].pk.bscale && !qkv->runs[0].pk.scale);
    /* the embedding keeps its Q8_0 block scales: its own arrays, or (tied) the output's pack */
    const eng_bweight *e = q->embd.bw;
    PT_ASSERT(q->out_tied ? e->runs[0].pk.bscale != NULL && !e->q : e->bscale != NULL);
    int V = eng_model_config(q)->n_vocab, N = 32;
    float *a = malloc(sizeof(float) * N * V), *b = malloc(sizeof(float) * N * V);
    init_prompt();
    PT_EQ_INT(run_chunks(q, N, N, a), 0);
    PT_EQ_INT(run_chunks(f, N, N, b), 0);
    double num = 0, den = 0;
    for (int i = 0; i < N * V; i++) num += (a[i] - b[i]) * (a[i] - b[i]), den += b[i] * b[i];
    PT_ASSERT_MSG(sqrt(num / den) < 0.05, "int8 vs fp32 rms rel err %g", sqrt(num / den));
    free(a), free(b);
    eng_model_free(q), eng_model_free(f);
    unlink(p1);
}

PT_TEST(batched_sequences_match_separate_runs) {
    char path[512];
    eng_model *m = load(&gemma_spec, ENG_PREC_INT8, path, sizeof path);
    PT_ASSERT(m);
    init_prompt();
    const eng_kv_layout *l = eng_model_kv_layout(m);
    int V = eng_model_config(m)->n_vocab;
    float *ref = malloc(sizeof(float) * 40 * V);
    PT_EQ_INT(run_chunks(m, 40, 40, ref), 0);
    eng_kv_allocator a;
    PT_EQ_INT(eng_kv_allocator_malloc(&a, l), 0);
    eng_kvseq s1, s2;
    char err[256];
    PT_EQ_INT(eng_kvseq_init(&s1, l, &a, err, sizeof err), 0);
    PT_EQ_INT(eng_kvseq_init(&s2, l, &a, err, sizeof err), 0);
    float *o1 = malloc(sizeof(float) * 40 * V), *o2 = malloc(sizeof(float) * V);
    /* s2 first gets 30 tokens alone; then one step: s1 prefill 40, s2 decode 1 */
    eng_seq_step pre = {
        .kv = &s2, .tokens = prompt, .n_tokens = 30, .logits = ENG_LOGITS_NONE, .out = NULL};
    PT_EQ_INT(eng_forward(m, &pre, 1, err, sizeof err), 0);
    eng_seq_step st[2] = {
        {.kv = &s1, .tokens = prompt, .n_tokens = 40, .logits = ENG_LOGITS_ALL, .out = o1},
        {.kv = &s2, .tokens = prompt + 30, .n_tokens = 1, .logits = ENG_LOGITS_LAST, .out = o2}};
    PT_EQ_INT(eng_forward(m, st, 2, err, sizeof err), 0);
    PT_EQ_MEM(o1, ref, sizeof(float) * 40 * V);
    PT_EQ_MEM(o2, ref + (size_t)30 * V, sizeof(float) * V);
    PT_EQ_INT(s1.n_tokens, 40);
    PT_EQ_INT(s2.n_tokens, 31);
    /* the same sequence twice in one step is refused */
    eng_seq_step dup[2] = {
        {.kv = &s1, .tokens = prompt, .n_tokens = 1, .logits = ENG_LOGITS_NONE, .out = NULL},
        {.kv = &s1, .tokens = prompt, .n_tokens = 1, .logits = ENG_LOGITS_NONE, .out = NULL}};
    PT_EQ_INT(eng_forward(m, dup, 2, err, sizeof err), ENG_EINVAL);
    /* local blocks: window 8, B 4 -> at most 4 live local blocks per sequence */
    int live = 0;
    for (int i = 0; i < s1.n_blocks; i++) live += s1.blk[ENG_KV_LOCAL][i] != NULL;
    PT_ASSERT(live <= 4 && live >= 2);
    eng_kvseq_free(&s1);
    eng_kvseq_free(&s2);
    PT_EQ_INT(eng_kv_allocator_malloc_live(&a, ENG_KV_LOCAL), 0);
    eng_kv_allocator_malloc_free(&a);
    free(ref), free(o1), free(o2);
    eng_model_free(m);
    unlink(path);
}

PT_TEST(out_of_blocks_leaves_sequences_unchanged) {
    char path[512];
    eng_model *m = load(&llama_spec, ENG_PREC_INT8, path, sizeof path);
    PT_ASSERT(m);
    init_prompt();
    const eng_kv_layout *l = eng_model_kv_layout(m);
    kv_budget b = {.left = 3};
    PT_EQ_INT(eng_kv_allocator_malloc(&b.inner, l), 0);
    eng_kv_allocator a = kv_budget_allocator(&b);
    eng_kvseq s1, s2;
    char err[256];
    PT_EQ_INT(eng_kvseq_init(&s1, l, &a, err, sizeof err), 0);
    PT_EQ_INT(eng_kvseq_init(&s2, l, &a, err, sizeof err), 0);
    eng_seq_step st[2] = {
        {.kv = &s1, .tokens = prompt, .n_tokens = 8, .logits = ENG_LOGITS_NONE, .out = NULL},
        {.kv = &s2, .tokens = prompt, .n_tokens = 8, .logits = ENG_LOGITS_NONE, .out = NULL}};
    PT_EQ_INT(eng_forward(m, st, 2, err, sizeof err), ENG_ENOMEM); /* needs 4 blocks */
    PT_ASSERT(strstr(err, "KV"));
    PT_EQ_INT(s1.n_tokens + s2.n_tokens + s1.n_blocks + s2.n_blocks, 0);
    PT_EQ_INT(b.left, 3);
    PT_EQ_INT(eng_forward(m, st, 1, err, sizeof err), 0);
    PT_EQ_INT(s1.n_tokens, 8);
    eng_kvseq_free(&s1);
    eng_kvseq_free(&s2);
    PT_EQ_INT(b.left, 3);
    eng_kv_allocator_malloc_free(&b.inner);
    eng_model_free(m);
    unlink(path);
}

PT_TEST(bad_input_refused_and_digest) {
    char path[512], path2[512];
    eng_model *m = load(&llama_spec, ENG_PREC_INT8, path, sizeof path);
    PT_ASSERT(m);
    const eng_kv_layout *l = eng_model_kv_layout(m);
    eng_kv_allocator a;
    PT_EQ_INT(eng_kv_allocator_malloc(&a, l), 0);
    eng_kvseq s;
    char err[256];
    PT_EQ_INT(eng_kvseq_init(&s, l, &a, err, sizeof err), 0);
    int32_t bad[2] = {1, 256};
    eng_seq_step st = {
        .kv = &s, .tokens = bad, .n_tokens = 2, .logits = ENG_LOGITS_NONE, .out = NULL};
    PT_EQ_INT(eng_forward(m, &st, 1, err, sizeof err), ENG_EINVAL);
    PT_ASSERT(strstr(err, "vocab"));
    st.n_tokens = 0;
    PT_EQ_INT(eng_forward(m, &st, 1, err, sizeof err), ENG_EINVAL);
    st.n_tokens = 1;
    st.logits = ENG_LOGITS_LAST; /* no output buffer */
    PT_EQ_INT(eng_forward(m, &st, 1, err, sizeof err), ENG_EINVAL);
    PT_EQ_INT(s.n_tokens, 0);
    eng_kvseq_free(&s);
    eng_kv_allocator_malloc_free(&a);
    tiny_spec other = llama_spec;
    other.seed = 99;
    eng_model *m2 = load(&other, ENG_PREC_INT8, path2, sizeof path2);
    eng_model *m3 = load(&llama_spec, ENG_PREC_INT8, path, sizeof path);
    eng_model *m4 = load(&llama_spec, ENG_PREC_FP32, path, sizeof path);
    PT_ASSERT(m2 && m3 && m4);
    PT_ASSERT(eng_model_digest(m) == eng_model_digest(m3));
    PT_ASSERT(eng_model_digest(m) != eng_model_digest(m2));
    PT_ASSERT(eng_model_digest(m) != eng_model_digest(m4));
    eng_model_free(m), eng_model_free(m2), eng_model_free(m3), eng_model_free(m4);
    eng_model *none = NULL;
    eng_load_opts o = {.prec = ENG_PREC_INT8, .n_threads = 1, .block_tokens = 16};
    PT_ASSERT(eng_model_load("/nonexistent/x.gguf", &o, &none, err, sizeof err) != 0);
    PT_ASSERT(none == NULL && err[0]);
    unlink(path);
    unlink(path2);
}

/* ---- 4-bit weights kept 4-bit (model.weights = native) ---- */

/* llama with Q4_0 weights everywhere */
static const tiny_spec llama_q4_0_spec = {.arch = "llama",
                                          .n_layer = 2,
                                          .n_embd = 64,
                                          .n_head = 4,
                                          .n_head_kv = 2,
                                          .head_dim = 16,
                                          .n_ff = 96,
                                          .n_vocab = 256,
                                          .seed = 5,
                                          .q4 = TINY_Q4_0};

/* llama with Q4_K weights (256-wide rows), attn_v Q8_0: a Q4_K_M-like mix */
static const tiny_spec llama_q4_k_spec = {.arch = "llama",
                                          .n_layer = 2,
                                          .n_embd = 256,
                                          .n_head = 4,
                                          .n_head_kv = 2,
                                          .head_dim = 64,
                                          .n_ff = 512,
                                          .n_vocab = 256,
                                          .seed = 6,
                                          .q4 = TINY_Q4_K};

static double rel_err(const float *a, const float *b, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) num += (a[i] - b[i]) * (a[i] - b[i]), den += b[i] * b[i];
    return sqrt(num / den);
}

PT_TEST(native_q4_0_is_4bit_and_bit_identical_to_int8) {
    char p1[512], p2[512];
    eng_model *n = load_w(&llama_q4_0_spec, ENG_PREC_INT8, ENG_WEIGHTS_NATIVE, p1, sizeof p1);
    eng_model *q = load_w(&llama_q4_0_spec, ENG_PREC_INT8, ENG_WEIGHTS_INT8, p2, sizeof p2);
    PT_ASSERT(n && q);
    const eng_bweight *wn = n->layers[0].wqkv.bw, *wq = q->layers[0].wqkv.bw;
    PT_ASSERT(wn->n_runs == 1 && wn->runs[0].kind == CPU_RUN_W4);
    PT_ASSERT(wq->n_runs == 1 && wq->runs[0].kind == CPU_RUN_I8);
    PT_ASSERT(n->embd.bw->runs[0].kind == CPU_RUN_W4); /* tied: rows read from the 4-bit pack */
    PT_ASSERT(eng_model_weight_bytes(n) * 10 < eng_model_weight_bytes(q) * 6);
    PT_ASSERT(eng_model_digest(n) == eng_model_digest(q)); /* the same numbers */
    int V = eng_model_config(n)->n_vocab, N = 24;
    float *a = malloc(sizeof(float) * N * V), *b = malloc(sizeof(float) * N * V);
    init_prompt();
    PT_EQ_INT(run_chunks(n, N, 5, a), 0);
    PT_EQ_INT(run_chunks(q, N, N, b), 0);
    PT_EQ_MEM(a, b, sizeof(float) * N * V);
    free(a), free(b);
    eng_model_free(n), eng_model_free(q);
    unlink(p1);
}

PT_TEST(native_q4_k_keeps_the_files_weights) {
    char p1[512], p2[512], p3[512];
    eng_model *n = load_w(&llama_q4_k_spec, ENG_PREC_INT8, ENG_WEIGHTS_NATIVE, p1, sizeof p1);
    eng_model *q = load_w(&llama_q4_k_spec, ENG_PREC_INT8, ENG_WEIGHTS_INT8, p2, sizeof p2);
    eng_model *f = load_w(&llama_q4_k_spec, ENG_PREC_FP32, ENG_WEIGHTS_NATIVE, p3, sizeof p3);
    PT_ASSERT(n && q && f);
    /* fused Q|K|V: Q4_K q and k in one 4-bit run, the Q8_0 v in an int8 run */
    const eng_bweight *w = n->layers[1].wqkv.bw;
    PT_EQ_INT(w->n_runs, 2);
    PT_ASSERT(w->runs[0].kind == CPU_RUN_W4 && w->runs[0].rows == 256 + 128);
    PT_ASSERT(w->runs[1].kind == CPU_RUN_I8 && w->runs[1].row0 == 384);
    PT_ASSERT(n->layers[0].wdown.bw->runs[0].kind == CPU_RUN_W4);
    PT_ASSERT(eng_model_digest(n) != eng_model_digest(q)); /* other numbers than the int8 load */
    int V = eng_model_config(n)->n_vocab, N = 24;
    float *a = malloc(sizeof(float) * N * V), *b = malloc(sizeof(float) * N * V),
          *c = malloc(sizeof(float) * N * V), *d = malloc(sizeof(float) * N * V);
    init_prompt();
    PT_EQ_INT(run_chunks(n, N, N, a), 0);
    PT_EQ_INT(run_chunks(n, N, 3, d), 0); /* chunking changes nothing */
    PT_EQ_MEM(a, d, sizeof(float) * N * V);
    PT_EQ_INT(run_chunks(q, N, N, b), 0);
    PT_EQ_INT(run_chunks(f, N, N, c), 0);
    /* the fp32 reference computes with the file's weights: the native load
     * differs from it by activation quantisation only, the int8 load by
     * that and the weights' requantisation too */
    double en = rel_err(a, c, (size_t)N * V), eq = rel_err(b, c, (size_t)N * V);
    PT_ASSERT_MSG(en < 0.05 && en < eq, "native %g, int8 %g vs fp32", en, eq);
    free(a), free(b), free(c), free(d);
    eng_model_free(n), eng_model_free(q), eng_model_free(f);
    unlink(p1);
}

/* Steps of four sequences in one batch (LAST, ARGMAX, ALL over 2 tokens,
 * ARGMAX) against twins stepped with full logits. */
static void check_argmax_steps(const tiny_spec *spec, eng_precision prec, float softcap) {
    char path[512], err[256];
    eng_model *m = load(spec, prec, path, sizeof path);
    PT_ASSERT(m);
    m->cfg.final_logit_softcap = softcap; /* white-box: the capped path too */
    init_prompt();
    const eng_kv_layout *l = eng_model_kv_layout(m);
    int V = eng_model_config(m)->n_vocab;
    eng_kv_allocator a;
    PT_EQ_INT(eng_kv_allocator_malloc(&a, l), 0);
    eng_kvseq s[4], t[4];
    for (int i = 0; i < 4; i++) {
        PT_EQ_INT(eng_kvseq_init(&s[i], l, &a, err, sizeof err), 0);
        PT_EQ_INT(eng_kvseq_init(&t[i], l, &a, err, sizeof err), 0);
        eng_seq_step p[2] = {{.kv = &s[i], .tokens = prompt + i, .n_tokens = 5 + i},
                             {.kv = &t[i], .tokens = prompt + i, .n_tokens = 5 + i}};
        PT_EQ_INT(eng_forward(m, p, 2, err, sizeof err), 0);
    }
    float *full = malloc(sizeof(float) * 5 * V), *got = malloc(sizeof(float) * 3 * V);
    int32_t next[4] = {-1, -1, -1, -1};
    for (int round = 0; round < 3; round++) {
        const int32_t *tk = prompt + 20 + round;
        int mode[4] = {ENG_LOGITS_LAST, ENG_LOGITS_ARGMAX, ENG_LOGITS_ALL, ENG_LOGITS_ARGMAX};
        float *out[4] = {got, NULL, got + V, NULL};
        eng_seq_step st[4], tw[4];
        for (int i = 0; i < 4; i++) {
            int n = i == 2 ? 2 : 1;
            st[i] = (eng_seq_step){
                .kv = &s[i], .tokens = tk, .n_tokens = n, .logits = mode[i], .out = out[i]};
            if (mode[i] == ENG_LOGITS_ARGMAX) st[i].next = &next[i];
            tw[i] = (eng_seq_step){.kv = &t[i],
                                   .tokens = tk,
                                   .n_tokens = n,
                                   .logits = n > 1 ? ENG_LOGITS_ALL : ENG_LOGITS_LAST,
                                   .out = full + (i == 3 ? 4 : i) * (size_t)V};
        }
        PT_EQ_INT(eng_forward(m, st, 4, err, sizeof err), 0);
        PT_EQ_INT(eng_forward(m, tw, 4, err, sizeof err), 0);
        PT_EQ_MEM(got, full, sizeof(float) * V);                 /* LAST */
        PT_EQ_MEM(got + V, full + 2 * V, sizeof(float) * 2 * V); /* ALL */
        PT_EQ_INT(next[1], kern_argmax_ref(full + V, V));
        PT_EQ_INT(next[3], kern_argmax_ref(full + 4 * (size_t)V, V));
    }
    /* ARGMAX without a place for the token is refused */
    eng_seq_step bad = {.kv = &s[0], .tokens = prompt, .n_tokens = 1, .logits = ENG_LOGITS_ARGMAX};
    PT_EQ_INT(eng_forward(m, &bad, 1, err, sizeof err), ENG_EINVAL);
    for (int i = 0; i < 4; i++) eng_kvseq_free(&s[i]), eng_kvseq_free(&t[i]);
    eng_kv_allocator_malloc_free(&a);
    free(full), free(got);
    eng_model_free(m);
    unlink(path);
}

PT_TEST(argmax_steps_equal_the_argmax_of_the_logits) {
    check_argmax_steps(&gemma_spec, ENG_PREC_INT8, 0);
    check_argmax_steps(&llama_q8_spec, ENG_PREC_INT8, 0);
    check_argmax_steps(&llama_spec, ENG_PREC_FP32, 0);
    check_argmax_steps(&gemma_spec, ENG_PREC_INT8, 30.0f); /* capped: the logits path */
    check_argmax_steps(&llama_spec, ENG_PREC_FP32, 30.0f);
}
