/*
 * eng_backend.h -- the table of operations a compute backend implements:
 * its memory, its weights, and the ops the forward pass calls.
 *
 * Purpose.  forward.c is written once against this table (ggml-style):
 * every op names the same computation on every backend, and each backend
 * owns its buffers.  The CPU backend (backend_cpu*.c, always built) fills it
 * with kernels/cpu code on a kern_pool and is the reference; the CUDA
 * backend (backend_cuda.c over kernels/cuda, built when the toolkit is
 * found) fills the same slots with device kernels.  Every op works on whole
 * batches (all new tokens of all sequences of a step), so a device backend
 * launches one kernel per op.
 *
 * Memory.  Every buffer an op reads or writes lives in backend memory from
 * alloc (CPU: 64-byte aligned host memory; CUDA: device memory): the
 * activations, positions and token ids of a step (the forward pass uploads
 * them) and the model's small vectors (norm weights, biases, rope
 * frequency tables: uploaded once at load); upload / download / copy move
 * bytes between host and backend memory and inside it.  Descriptors (eng_attn_desc,
 * eng_kv_span) are host structs whose q / out pointers are backend memory.
 * Rows are row-major with the stride given per call.
 *
 * Weights.  The loader hands every linear weight over once, as the file
 * gives it (eng_wdesc: one part per fused source tensor, each in an
 * eng_wfmt), and gets back an opaque eng_bweight the backend owns: the CPU
 * backend repacks it for its GEMM (kern_gemm.h; 4-bit parts kept 4-bit when
 * the load asks for native weights, kern_w4.h), a device backend uploads
 * it.  The source arrays belong to the caller and may be freed after
 * weight_upload returns.
 *
 * KV.  Blocks are host memory from the cache's pool (eng_kv.h): their
 * pointers are the blocks' identities and the host bytes are always
 * complete (the cache writes them to Redis, copies partial blocks, hands
 * them over on rebalance).  kv_store writes this step's K/V rows into them;
 * attention reads them.  A device backend keeps copies of hot blocks in
 * device memory (its KV tier, write-through: kv_store updates both) and
 * must drop a copy when kv_invalidate says the host bytes changed under it.
 *
 * Numerics.  linear() is W8A8 on int8 models: the CPU backend quantises the
 * input rows with one scale per 32 values (kern_quantize_blocks) and runs
 * the packed int8 GEMM (the exact order is kern_gemm.h's); on fp32 models
 * it is the fp32 GEMM.  A device backend may quantise differently (e.g. one
 * scale per token for an IMMA GEMM) and is checked against the CPU backend
 * by tolerance, not bit for bit.  kv_store quantises K with one scale per
 * k_group values of a head and V with one per token per head (eng_kv.h),
 * or copies floats for fp32 layouts.  Attention computes softmax(scale *
 * q.k) . v in fp32, dequantising int8 K/V on the fly; query token t of a
 * descriptor sits at position pos0 + t and attends keys
 * [max(0, p - window + 1), p] (window 0: [0, p]); head h reads KV head
 * h / (n_head / n_head_kv).
 *
 * Threading.  Ops may run on the backend's own threads or stream; a call
 * that hands results to the host (download) returns when they are complete.
 * eng_forward may run on several threads at once (distinct sequences): the
 * ops must tolerate that (the CPU pool serialises jobs; a device backend
 * serialises on its stream).
 *
 * Ownership.  The backend owns its context (pool, stream, handles), every
 * eng_bweight and every alloc'd buffer until freed through the table; the
 * caller owns host buffers and descriptors.  eng_backend_free ends it.
 *
 * Failure behaviour.  alloc and weight_upload can fail (NULL / negative
 * ENG_E* code with a message); compute ops cannot fail for valid arguments
 * (the forward pass validates them).  A device backend that loses its
 * device reports it on the next download (negative return).
 */
#ifndef ENG_BACKEND_H
#define ENG_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "eng_kv.h"

enum { ENG_GLU_SILU = 0, ENG_GLU_GELU_TANH = 1 };

/* How the rope op pairs a head's dimensions; the model's config picks one
 * per architecture (eng_config.h). */
typedef enum {
    ENG_ROPE_NORM = 0, /* llama.cpp "normal": adjacent pairs (x0,x1) */
    ENG_ROPE_NEOX = 2  /* halves (x_i, x_{i+d/2}) */
} eng_rope_type;

/* Which backend a load asks for (model.backend). */
typedef enum eng_backend_kind {
    ENG_BACKEND_AUTO = 0, /* CUDA when built and a device is present, else CPU */
    ENG_BACKEND_CPU = 1,
    ENG_BACKEND_CUDA = 2
} eng_backend_kind;

/* "auto", "cpu", "cuda". */
const char *eng_backend_kind_name(eng_backend_kind k);
/* Parse one of those names; returns 0 or -1. */
int eng_backend_kind_parse(const char *s, eng_backend_kind *out);

/* ---- weights --------------------------------------------------------------------------- */

/* Source format of one part of a linear weight (rows of cols values). */
typedef enum eng_wfmt {
    /* f[rows][cols] floats (fp32 reference models) */
    ENG_WFMT_F32 = 0,
    /* q[rows][cols] int8 in [-127, 127] with one scale per row: value = q * scale[r] */
    ENG_WFMT_I8_ROW = 1,
    /* q[rows][cols] int8 in [-127, 127] with one scale per 32 values:
     * value = q * bscale[r][k / 32] (cols a multiple of 32; every bscale is
     * exactly an fp16 value).  lut, when not NULL, lists 16 int8 values every
     * code of the part is one of (Q4_0: -8..7; IQ4_NL: its table): a
     * backend may then keep 4-bit indices (the same numbers, half the bytes) */
    ENG_WFMT_I8_B32 = 2,
    /* ggml Q4_K kept as the file gives it: u4[rows][cols] codes 0..15 (one per
     * byte), per 32 values 6-bit scale sc and min mn ([rows][cols / 32]), per
     * 256 values d and dmin ([rows][cols / 256], exactly fp16 values):
     * value = d * sc * u - dmin * mn (cols a multiple of 256) */
    ENG_WFMT_Q4_K = 3
} eng_wfmt;

/* One part of a weight: rows [row0, row0 + rows) in one format. */
typedef struct eng_wpart {
    int row0, rows;         /* the part's rows within the weight */
    eng_wfmt fmt;           /* which of the arrays below are used */
    const float *f;         /* F32: [rows][cols] */
    const int8_t *q;        /* I8_*: [rows][cols] */
    const float *scale;     /* I8_ROW: [rows] */
    const float *bscale;    /* I8_B32: [rows][cols / 32] */
    const int8_t *lut;      /* I8_B32: NULL, or the 16 values every code is one of */
    const uint8_t *u4;      /* Q4_K: [rows][cols] codes 0..15 */
    const uint8_t *sc, *mn; /* Q4_K: [rows][cols / 32] 6-bit scales and mins */
    const float *d, *dmin;  /* Q4_K: [rows][cols / 256] super-block scales */
} eng_wpart;

/* What a weight is used for. */
enum {
    ENG_WUSE_LINEAR = 1, /* a right-hand side of linear() */
    ENG_WUSE_EMBED = 2   /* rows looked up by embed() (a tied embedding: both) */
};

/* A whole weight as the loader hands it over. */
typedef struct eng_wdesc {
    const char *name;       /* for messages ("layer 3 wqkv") */
    int rows, cols;         /* output channels x input dim */
    int use;                /* ENG_WUSE_* flags */
    int n_parts;            /* >= 1; parts cover rows in order, without gaps */
    const eng_wpart *parts; /* the parts */
} eng_wdesc;

/* The checks every weight_upload makes first: a shape, parts that cover
 * the rows in order, each part's arrays present for its format (I8_B32:
 * cols a multiple of 32; Q4_K: of 256, and its use including q4k_use, the
 * uses a backend takes Q4_K for -- 0: any), fp32 and integer parts not
 * mixed.  Returns 0 or ENG_EINVAL naming the weight and the part. */
int eng_wdesc_check(const eng_wdesc *d, int q4k_use, char *err, size_t errlen);

typedef struct eng_bweight eng_bweight; /* opaque: a weight in the backend's form */

/* ---- descriptors ------------------------------------------------------------------------- */

/* One sequence's attention for one layer. */
typedef struct eng_attn_desc {
    const float *q;      /* queries [n_q][n_head*head_dim], row stride ldq floats */
    int ldq;             /* row stride of q */
    float *out;          /* output [n_q][n_head*head_dim], row stride ldo */
    int ldo;             /* row stride of out */
    int n_q;             /* query tokens */
    int pos0;            /* position of query 0; keys 0..pos0+n_q-1 are stored */
    int window;          /* 0 = global, else attend the last window tokens */
    void *const *blocks; /* block table of the layer's KV kind (host block pointers) */
    int layer;           /* model layer (its KV source's offsets are used) */
} eng_attn_desc;

/* Shape shared by every attention descriptor of one call. */
typedef struct eng_attn_shape {
    const eng_kv_layout *kv; /* block layout (element type, offsets) */
    int n_head;              /* query heads */
    float scale;             /* multiplier on q.k */
} eng_attn_shape;

/* One sequence's new tokens for kv_store: rows t0 .. t0+n_tok-1 of the
 * step's qkv matrix go to positions pos0 .. pos0+n_tok-1 of its blocks. */
typedef struct eng_kv_span {
    void *const *blocks; /* block table of the layer's KV kind (host block pointers) */
    int pos0;            /* position of the first new token */
    int t0;              /* its row in qkv */
    int n_tok;           /* new tokens */
} eng_kv_span;

/* Counters of a backend's own KV tier (device backends; zero on the CPU). */
typedef struct eng_backend_kv_tier {
    uint64_t lookups;         /* block reads by attention */
    uint64_t hits;            /* of which found in backend memory */
    uint64_t uploads;         /* blocks copied up (host -> backend) */
    uint64_t upload_bytes;    /* their bytes */
    uint64_t writeback_bytes; /* bytes written through to the host by kv_store */
    uint64_t evictions;       /* blocks dropped from backend memory (LRU) */
    uint64_t invalidations;   /* copies dropped by kv_invalidate */
    long resident;            /* blocks held now */
    long capacity;            /* blocks it can hold */
} eng_backend_kv_tier;

/* Capability flags (eng_backend.caps). */
enum {
    ENG_BE_CAP_W4 = 1,      /* keeps ENG_WFMT_Q4_K / lut parts 4-bit */
    ENG_BE_CAP_HOSTMEM = 2, /* backend memory is host memory */
    ENG_BE_CAP_ARGMAX = 4   /* has argmax (greedy on the device) */
};

typedef struct eng_backend {
    const char *name; /* "cpu", "cuda" */
    void *ctx;        /* backend state, passed to every slot */
    int n_threads;    /* host threads the backend computes with */
    int caps;         /* ENG_BE_CAP_* */

    /* -- memory -- */
    /* bytes of backend memory (64-byte aligned), or NULL */
    void *(*alloc)(void *ctx, size_t bytes);
    void (*free)(void *ctx, void *p);
    /* host -> backend, backend -> host (complete on return), backend -> backend */
    void (*upload)(void *ctx, void *dst, const void *src, size_t bytes);
    int (*download)(void *ctx, void *dst, const void *src, size_t bytes);
    void (*copy)(void *ctx, void *dst, const void *src, size_t bytes);

    /* -- weights -- */
    /* Take a weight (see eng_wdesc); native: keep 4-bit parts 4-bit where
     * the backend can.  Returns 0, or a negative ENG_E* code with a message. */
    int (*weight_upload)(void *ctx, const eng_wdesc *d, int native, eng_bweight **out, char *err,
                         size_t errlen);
    void (*weight_free)(void *ctx, eng_bweight *w);
    /* Bytes the backend holds for w (values + scales, every form it keeps). */
    size_t (*weight_bytes)(void *ctx, const eng_bweight *w);
    /* Bytes of w that one linear() call over all rows reads (the decode roofline's numerator). */
    size_t (*weight_read_bytes)(void *ctx, const eng_bweight *w);

    /* -- ops -- */
    /* Workspace bytes linear() needs for M rows of K inputs (0: none). */
    size_t (*linear_ws)(void *ctx, int M, int K);
    /* C[m][n] = x[m] . W[n] for m < M, n < rows(w) (x rows of cols(w)
     * floats, stride ldx; C stride ldc; ws: linear_ws(M, cols) bytes of
     * backend memory). */
    void (*linear)(void *ctx, int M, const float *x, int ldx, const eng_bweight *w, float *C,
                   int ldc, void *ws);
    /* Optional (NULL: the forward pass runs linear into backend memory,
     * downloads and reduces): the output projection of R rows written
     * straight into host memory.  Row r's rows(w) logits go to rows[r] (a
     * caller's buffer) unless rows[r] is NULL; amax (host, may be NULL)
     * gets every row's argmax (lowest index of the largest, NaN as -inf),
     * reduced as the GEMM computes, so a row wanted only for its argmax is
     * never written anywhere.  Values are linear()'s; ws as for linear. */
    void (*logits)(void *ctx, int R, const float *x, int ldx, const eng_bweight *w,
                   float *const *rows, int32_t *amax, void *ws);
    /* x[t] = row tok[t] of w (an ENG_WUSE_EMBED weight) times mul, t < T
     * (tok: backend memory; x rows ldx apart). */
    void (*embed)(void *ctx, const eng_bweight *w, const int32_t *tok, int T, float mul, float *x,
                  int ldx);
    /* y[m] = x[m] * rsqrt(mean(x[m]^2) + eps) * w, rows of n (strides ldx, ldy; y may be x). */
    void (*rmsnorm)(void *ctx, int M, int n, const float *x, int ldx, const float *w, float eps,
                    float *y, int ldy);
    /* The same in place on n_head heads of hd floats at the start of each of
     * T rows (row stride ld): the Q / K norms. */
    void (*rmsnorm_heads)(void *ctx, int T, int n_head, int hd, float *x, int ld, const float *w,
                          float eps);
    /* Rotate n_head heads of head_dim in each of n_tok rows (stride ldx) in place;
     * row t at position pos[t] (backend memory), pair i by the angle
     * pos[t] * inv_freq[i] (inv_freq: head_dim / 2 floats of backend memory,
     * base^(-2i/head_dim) with any rope scaling, made once at load); type
     * ENG_ROPE_NORM or ENG_ROPE_NEOX. */
    void (*rope)(void *ctx, int n_tok, int n_head, int head_dim, float *x, int ldx,
                 const int32_t *pos, const float *inv_freq, int type);
    /* h[m][i] = act(gu[m][i]) * gu[m][F + i] for i < F (gate | up rows of
     * stride ldgu, h rows of stride ldh); act ENG_GLU_SILU or ENG_GLU_GELU_TANH. */
    void (*glu)(void *ctx, int M, int F, const float *gu, int ldgu, float *h, int ldh, int act);
    /* y[m][i] += x[m][i] for M rows of n (strides ldy, ldx): the residual add;
     * ldx 0 adds the one row x to every row (the Q/K/V bias). */
    void (*add)(void *ctx, int M, int n, float *y, int ldy, const float *x, int ldx);
    /* x[i] = tanh(x[i] / cap) * cap for i < n (the final logit soft-cap). */
    void (*softcap)(void *ctx, float *x, size_t n, float cap);
    /* Write the K and V rows (K at column n_head*head_dim of each qkv row,
     * V right after it; rows ld floats apart) of every span into its blocks
     * for model layer `layer` (a KV-owning layer). */
    void (*kv_store)(void *ctx, const eng_kv_layout *l, int n_head, int layer, const float *qkv,
                     int ld, const eng_kv_span *spans, int n_spans);
    void (*attention)(void *ctx, const eng_attn_shape *s, const eng_attn_desc *d, int n_desc);
    /* Optional (NULL where caps lacks ENG_BE_CAP_ARGMAX): out[r] = the lowest
     * index of the largest of V logits in row r (rows ld apart), r < R; out
     * is host memory (complete on return); 0 or a negative code. */
    int (*argmax)(void *ctx, const float *logits, int R, int V, int ld, int32_t *out);

    /* -- KV tier (optional: NULL on the CPU) -- */
    /* The host bytes of blk changed outside kv_store (the block was
     * allocated anew or filled by the cache): drop any copy of it. */
    void (*kv_invalidate)(void *ctx, const void *blk);
    void (*kv_tier)(void *ctx, eng_backend_kv_tier *out);

    /* End the backend: frees its context (every weight and buffer must have
     * been freed). */
    void (*destroy)(void *ctx);
} eng_backend;

/* Make the CPU backend computing on pool (borrowed: it must outlive b;
 * NULL: the calling thread only) with the instruction set kern_isa_best()
 * picks.  Returns 0 or ENG_ENOMEM with a message. */
struct kern_pool;
int eng_backend_cpu_create(eng_backend *b, struct kern_pool *pool, char *err, size_t errlen);

/* Make the CUDA backend on device `device` with n_threads host threads for
 * loading.  ENG_EINVAL "not built with CUDA" when the build has no CUDA
 * backend; ENG_EIO when no device is present. */
int eng_backend_cuda_create(eng_backend *b, int device, int n_threads, char *err, size_t errlen);
/* 1 when this build carries the CUDA backend. */
int eng_backend_cuda_built(void);

/* Pick and make a backend of kind k (AUTO: CUDA when built and a device
 * answers, else CPU on pool).  Returns 0 or a negative ENG_E* code with a
 * message. */
int eng_backend_create(eng_backend *b, eng_backend_kind k, struct kern_pool *pool, char *err,
                       size_t errlen);
/* destroy + clear. */
void eng_backend_free(eng_backend *b);

#endif
