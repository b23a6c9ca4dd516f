/*
 * test_membw_prof.c -- the benchmark's instruments: the profiling backend
 * wrapper (eng_prof.h) on tiny synthetic models and the memory-bandwidth
 * measurement (kern_membw.h) on a small buffer, and the int8 MAC
 * throughput probe (kern_macs.h) at each ISA level.
 *
 * The wrapper must be invisible to the numbers (same logits bit for bit as
 * an unprofiled run), count every GEMM against the right weight (one call
 * per linear layer per step, the output projection once), add the weights'
 * packed bytes and the activation rows, refuse a second start, and put back
 * exactly the table it replaced.
 */
#define PTEST_MAIN
#include "ptest.h"

#include <string.h>
#include <unistd.h>

#include "eng_model.h"
#include "backend_cpu_int.h"
#include "eng_model_int.h" /* white-box: the backend table and the weight packs */
#include "eng_prof.h"
#include "kern_macs.h"
#include "kern_membw.h"
#include "kern_pool.h"
#include "tiny_model.h"

#define NTOK 20

static const tiny_spec llama_spec = {.arch = "llama",
                                     .n_layer = 3,
                                     .n_embd = 64,
                                     .n_head = 4,
                                     .n_head_kv = 2,
                                     .head_dim = 16,
                                     .n_ff = 96,
                                     .n_vocab = 256,
                                     .seed = 7,
                                     .q8_0 = 1};

static eng_model *load(eng_precision prec, char *path, size_t cap) {
    char err[256] = "";
    snprintf(path, cap, "%s/parley_prof_%d_%d.gguf", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
             (int)getpid(), (int)prec);
    if (tiny_model_write(path, &llama_spec, err, sizeof err) != 0) {
        fprintf(stderr, "write: %s\n", err);
        return NULL;
    }
    eng_load_opts o = {.prec = prec, .n_threads = 2, .block_tokens = 4};
    eng_model *m = NULL;
    if (eng_model_load(path, &o, &m, err, sizeof err) != 0) fprintf(stderr, "load: %s\n", err);
    return m;
}

/* Prefill NTOK tokens into `nseq` fresh sequences (one step each, one
 * eng_forward call) and then one decode token each; last logits in out. */
static int run(eng_model *m, int nseq, float *out) {
    const eng_kv_layout *l = eng_model_kv_layout(m);
    int V = eng_model_config(m)->n_vocab, rc = -1;
    eng_kv_allocator a;
    eng_kvseq s[2];
    eng_seq_step st[2];
    int32_t prompt[NTOK + 1];
    char err[256];
    for (int i = 0; i <= NTOK; i++) prompt[i] = (int32_t)((i * 37 + 5) % 256);
    if (eng_kv_allocator_malloc(&a, l) != 0) return -1;
    int n = 0;
    for (; n < nseq; n++)
        if (eng_kvseq_init(&s[n], l, &a, err, sizeof err) != 0) goto out;
    for (int i = 0; i < nseq; i++) {
        eng_seq_step x = {.kv = &s[i],
                          .tokens = prompt,
                          .n_tokens = NTOK,
                          .logits = ENG_LOGITS_LAST,
                          .out = out + (size_t)i * V};
        st[i] = x;
    }
    if (eng_forward(m, st, nseq, err, sizeof err) != 0) goto out;
    for (int i = 0; i < nseq; i++) {
        eng_seq_step x = {.kv = &s[i],
                          .tokens = prompt + NTOK,
                          .n_tokens = 1,
                          .logits = ENG_LOGITS_LAST,
                          .out = out + (size_t)i * V};
        st[i] = x;
    }
    if (eng_forward(m, st, nseq, err, sizeof err) != 0) goto out;
    rc = 0;
out:
    if (rc) fprintf(stderr, "forward: %s\n", err);
    for (int i = 0; i < n; i++) eng_kvseq_free(&s[i]);
    eng_kv_allocator_malloc_free(&a);
    return rc;
}

PT_TEST(prof_int8_counts_and_restores) {
    char path[512], err[256];
    eng_model *m = load(ENG_PREC_INT8, path, sizeof path);
    PT_ASSERT(m);
    int V = eng_model_config(m)->n_vocab, L = eng_model_config(m)->n_layer;
    float *ref = malloc(sizeof(float) * 2 * V), *got = malloc(sizeof(float) * 2 * V);
    PT_ASSERT(ref && got);
    eng_backend saved = m->be;
    PT_EQ_INT(run(m, 2, ref), 0);

    PT_EQ_INT(eng_prof_active(m), 0);
    PT_EQ_INT(eng_prof_start(m, err, sizeof err), 0);
    PT_EQ_INT(eng_prof_active(m), 1);
    PT_EQ_INT(eng_prof_start(m, err, sizeof err), ENG_EINVAL); /* already profiling */
    PT_EQ_INT(run(m, 2, got), 0);
    eng_prof_report r;
    PT_EQ_INT(eng_prof_stop(m, &r), 0);
    PT_EQ_INT(eng_prof_active(m), 0);
    PT_EQ_MEM(&m->be, &saved, sizeof saved); /* the original table, pointer for pointer */
    PT_EQ_MEM(ref, got, sizeof(float) * 2 * V);

    /* two eng_forward calls (prefill, decode): one GEMM per weight per layer
     * per call, the output projection once per call */
    PT_EQ_INT(r.slot_calls[ENG_PROF_LINEAR], 2 * (4 * L + 1));
    PT_EQ_INT(r.weight_calls[ENG_PROF_W_QKV], 2 * L);
    PT_EQ_INT(r.weight_calls[ENG_PROF_W_O], 2 * L);
    PT_EQ_INT(r.weight_calls[ENG_PROF_W_GATE_UP], 2 * L);
    PT_EQ_INT(r.weight_calls[ENG_PROF_W_DOWN], 2 * L);
    PT_EQ_INT(r.weight_calls[ENG_PROF_W_OUTPUT], 2);
    PT_EQ_INT(r.weight_calls[ENG_PROF_W_OTHER], 0);
    PT_EQ_INT(r.slot_calls[ENG_PROF_ATTENTION], 2 * L);
    PT_ASSERT(r.slot_calls[ENG_PROF_RMSNORM] >= 2 * L);
    PT_EQ_INT(r.slot_calls[ENG_PROF_EMBED], 2);
    PT_EQ_INT(r.slot_calls[ENG_PROF_KV_STORE], 2 * L);
    PT_ASSERT(r.slot_calls[ENG_PROF_TRANSFER] >= 2 * 3); /* ids, positions, logits per call */
    /* rows: prefill 2 x NTOK tokens, decode 2; the output projection reads
     * one row (the last position) per sequence per call */
    PT_NEAR(r.weight_rows[ENG_PROF_W_QKV], (double)L * (2 * NTOK + 2), 0);
    PT_NEAR(r.weight_rows[ENG_PROF_W_OUTPUT], 4, 0);
    double qkv_bytes = 0;
    for (int i = 0; i < L; i++)
        qkv_bytes += (double)kern_wpack_bytes(&m->layers[i].wqkv.bw->runs[0].pk);
    PT_NEAR(r.weight_bytes[ENG_PROF_W_QKV], 2 * qkv_bytes, 0);
    PT_NEAR(r.weight_bytes[ENG_PROF_W_OUTPUT],
            2.0 * (double)kern_wpack_bytes(&m->out.bw->runs[0].pk), 0);
    double sum = 0, wsum = 0;
    for (int s = 0; s < ENG_PROF_N_SLOTS; s++) {
        PT_ASSERT(r.slot_s[s] >= 0);
        sum += r.slot_s[s];
    }
    for (int w = 0; w < ENG_PROF_N_WEIGHTS; w++) wsum += r.weight_s[w];
    PT_ASSERT(r.slot_s[ENG_PROF_LINEAR] > 0);
    PT_NEAR(wsum, r.slot_s[ENG_PROF_LINEAR], 1e-9);
    PT_ASSERT(r.elapsed_s >= sum);

    /* stop without start: refused, report zeroed */
    r.slot_calls[0] = 99;
    PT_EQ_INT(eng_prof_stop(m, &r), ENG_EINVAL);
    PT_EQ_INT(r.slot_calls[0], 0);
    PT_EQ_STR(eng_prof_slot_name(ENG_PROF_ATTENTION), "attention");
    PT_EQ_STR(eng_prof_weight_name(ENG_PROF_W_GATE_UP), "gate_up");
    PT_EQ_STR(eng_prof_slot_name(ENG_PROF_N_SLOTS), "?");
    free(ref);
    free(got);
    eng_model_free(m);
    unlink(path);
}

PT_TEST(prof_fp32_attributes_float_gemms) {
    char path[512], err[256];
    eng_model *m = load(ENG_PREC_FP32, path, sizeof path);
    PT_ASSERT(m);
    int V = eng_model_config(m)->n_vocab, L = eng_model_config(m)->n_layer;
    float *out = malloc(sizeof(float) * V);
    PT_ASSERT(out);
    PT_EQ_INT(eng_prof_start(m, err, sizeof err), 0);
    PT_EQ_INT(run(m, 1, out), 0);
    eng_prof_report r;
    PT_EQ_INT(eng_prof_stop(m, &r), 0);
    PT_EQ_INT(r.slot_calls[ENG_PROF_LINEAR], 2 * (4 * L + 1));
    PT_EQ_INT(r.weight_calls[ENG_PROF_W_DOWN], 2 * L);
    PT_EQ_INT(r.weight_calls[ENG_PROF_W_OUTPUT], 2);
    PT_EQ_INT(r.weight_calls[ENG_PROF_W_OTHER], 0);
    const eng_weight *w = &m->layers[0].wgu;
    PT_NEAR(r.weight_bytes[ENG_PROF_W_GATE_UP], 2.0 * L * w->rows * w->cols * sizeof(float), 0);
    free(out);
    eng_model_free(m);
    unlink(path);
}

PT_TEST(membw_positive_on_small_buffer) {
    char err[256] = "";
    kern_pool *p = NULL;
    PT_EQ_INT(kern_pool_create(2, &p), 0);
    kern_membw_result r;
    memset(&r, 0, sizeof r);
    PT_EQ_INT(kern_membw_measure(p, (size_t)4 << 20, 3, &r, err, sizeof err), 0);
    PT_ASSERT(r.best_gbs > 0 && r.median_gbs > 0 && r.best_gbs >= r.median_gbs);
    PT_ASSERT(r.bytes > 0 && r.bytes <= ((size_t)4 << 20));
    PT_EQ_INT(r.threads, 2);
    PT_EQ_INT(r.repeats, 3);
    /* caller thread only, a size that is not a multiple of the chunking */
    PT_EQ_INT(kern_membw_measure(NULL, ((size_t)1 << 20) + 12345, 1, &r, err, sizeof err), 0);
    PT_ASSERT(r.median_gbs > 0);
    PT_EQ_INT(r.threads, 1);
    /* bad arguments are refused with a message */
    err[0] = 0;
    PT_EQ_INT(kern_membw_measure(p, 1000, 3, &r, err, sizeof err), KERN_EINVAL);
    PT_ASSERT(err[0] != 0);
    PT_EQ_INT(kern_membw_measure(p, (size_t)1 << 20, 0, &r, err, sizeof err), KERN_EINVAL);
    kern_pool_destroy(p);
}

PT_TEST(macs_probe_per_isa_and_refusals) {
    char err[256] = "";
    kern_pool *p = NULL;
    kern_macs_result r = {0};
    PT_EQ_INT(kern_pool_create(2, &p), 0);
    PT_EQ_INT(kern_macs_measure(p, 2000, 3, &r, err, sizeof err), 0);
    PT_EQ_INT(r.threads, 2);
    PT_EQ_INT(r.repeats, 3);
    PT_ASSERT(r.isa != KERN_ISA_AMX); /* the tile path is probed as VNNI */
    if (kern_isa_best() >= KERN_ISA_AVX2)
        PT_ASSERT(r.best_gmacs > 0 && r.median_gmacs > 0 && r.best_gmacs >= r.median_gmacs);
    /* capped at AVX2 the AVX2 mix is measured; at scalar there is no probe */
    kern_isa_set_max(KERN_ISA_AVX2);
    PT_EQ_INT(kern_macs_measure(NULL, 2000, 1, &r, err, sizeof err), 0);
    PT_EQ_INT(r.threads, 1);
    if (kern_isa_detect() >= KERN_ISA_AVX2) PT_ASSERT(r.isa == KERN_ISA_AVX2 && r.best_gmacs > 0);
    kern_isa_set_max(KERN_ISA_SCALAR);
    PT_EQ_INT(kern_macs_measure(p, 2000, 1, &r, err, sizeof err), 0);
    PT_ASSERT(r.best_gmacs == 0 && r.isa == KERN_ISA_SCALAR);
    kern_isa_set_max(KERN_ISA_AMX);
    /* bad arguments are refused with a message */
    err[0] = 0;
    PT_EQ_INT(kern_macs_measure(p, 10, 3, &r, err, sizeof err), KERN_EINVAL);
    PT_ASSERT(err[0] != 0);
    PT_EQ_INT(kern_macs_measure(p, 2000, 0, &r, err, sizeof err), KERN_EINVAL);
    kern_pool_destroy(p);
}
