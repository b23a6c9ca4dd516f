/*
 * eng_prof.h -- per-kernel profile of the forward pass: wall time and call
 * count of every backend slot, and of the int8 GEMM per weight kind.
 *
 * Purpose.  The benchmark (`parley bench --workload engine`) reports where
 * one decode step and one prefill chunk spend their time, as a share of the
 * step, so a missed throughput target can be traced to a kernel.  The
 * forward pass calls every compute op through the model's backend table
 * (eng_backend.h); eng_prof_start swaps that table for one whose slots time
 * the call (CLOCK_MONOTONIC around it) and forward to the original, and
 * eng_prof_stop puts the original back and returns the totals.
 *
 * GEMM attribution.  linear() and logits() calls (input quantisation + GEMM on int8
 * models) are attributed to the weight they multiply by identity (the
 * weight handle is compared with the model's layers): fused Q|K|V,
 * attention output, fused gate|up, down, and the output projection; the
 * same calls also add the bytes the backend reads for the weight
 * (weight_read_bytes: packed values + scales), so bytes / seconds is the
 * GEMM's effective read bandwidth.
 *
 * Layout.  eng_prof_report holds plain arrays indexed by eng_prof_slot and
 * eng_prof_weight; the names come from eng_prof_slot_name /
 * eng_prof_weight_name.  "Other" time of a step = elapsed_s - sum of slots
 * (the forward pass's own work: KV bookkeeping, descriptors).
 *
 * Threading.  Profiling changes the model's backend table, which the model
 * otherwise never changes after load: start and stop must not run while
 * another thread is inside eng_forward on the same model, and while
 * profiling, eng_forward must be called by one thread at a time (counters
 * are not atomic).  Timing runs on the calling thread; a slot's time
 * includes its work on the pool's other threads (the call waits for them).
 *
 * Ownership / failure.  The profiler's state is allocated by start and freed
 * by stop; eng_model_free on a model still being profiled is not allowed
 * (call eng_prof_stop first).  Functions return 0 or a negative ENG_E* code
 * (eng_model.h) with a message.
 */
#ifndef ENG_PROF_H
#define ENG_PROF_H

#include <stddef.h>

#include "eng_model.h"

/* Timed backend ops. */
typedef enum {
    ENG_PROF_LINEAR = 0, /* linear (quantise + GEMM) */
    ENG_PROF_EMBED,      /* embed */
    ENG_PROF_RMSNORM,    /* rmsnorm + rmsnorm_heads */
    ENG_PROF_ROPE,       /* rope */
    ENG_PROF_GLU,        /* glu */
    ENG_PROF_ADD,        /* add */
    ENG_PROF_SOFTCAP,    /* softcap */
    ENG_PROF_KV_STORE,   /* kv_store */
    ENG_PROF_ATTENTION,  /* attention */
    ENG_PROF_TRANSFER,   /* upload + download + copy */
    ENG_PROF_N_SLOTS
} eng_prof_slot;

/* Weight kinds a GEMM call is attributed to. */
typedef enum {
    ENG_PROF_W_QKV = 0, /* fused Q|K|V (Q only in KV-sharing layers) */
    ENG_PROF_W_O,       /* attention output */
    ENG_PROF_W_GATE_UP, /* fused gate|up */
    ENG_PROF_W_DOWN,    /* FFN down */
    ENG_PROF_W_OUTPUT,  /* output projection (logits) */
    ENG_PROF_W_OTHER,   /* a weight not found in the model */
    ENG_PROF_N_WEIGHTS
} eng_prof_weight;

typedef struct eng_prof_report {
    double elapsed_s;                        /* wall time from start to stop */
    double slot_s[ENG_PROF_N_SLOTS];         /* seconds inside each slot */
    long slot_calls[ENG_PROF_N_SLOTS];       /* calls of each slot */
    double weight_s[ENG_PROF_N_WEIGHTS];     /* GEMM seconds per weight kind */
    long weight_calls[ENG_PROF_N_WEIGHTS];   /* GEMM calls per weight kind */
    double weight_bytes[ENG_PROF_N_WEIGHTS]; /* weight bytes those calls read (sum over calls) */
    double weight_rows[ENG_PROF_N_WEIGHTS];  /* activation rows (M) summed over those calls */
} eng_prof_report;

/* Start profiling m: swap its backend table for the timing one and zero the
 * counters.  Returns 0, ENG_EINVAL (already profiling) or ENG_ENOMEM. */
int eng_prof_start(eng_model *m, char *err, size_t errlen);
/* Stop profiling m: restore the original backend table (the same pointers
 * as before start) and fill *r (may be NULL to discard).  Returns 0, or
 * ENG_EINVAL when m is not being profiled (r is then zeroed). */
int eng_prof_stop(eng_model *m, eng_prof_report *r);
/* 1 while m is being profiled. */
int eng_prof_active(const eng_model *m);

/* "linear", "embed", "rmsnorm", "rope", "glu", "add", "softcap", "kv_store",
 * "attention", "transfer"; "?" out of range. */
const char *eng_prof_slot_name(int slot);
/* "qkv", "o", "gate_up", "down", "output", "other"; "?" out of range. */
const char *eng_prof_weight_name(int w);

#endif
