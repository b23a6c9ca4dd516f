/*
 * test_kern_isa.c -- ISA dispatch (kern_isa.h) and the AVX-512 VNNI / AMX
 * tile kernels of the packed int8 GEMM against the scalar tile kernel.
 *
 * The build machine has neither AVX-512 nor AMX, so the kernels' exact
 * source is also compiled against an emulation (kern_isa_emu.c: SIMDe plus
 * an emulation of the tile instructions) and compared bit for bit with
 * kern_q8_tile_scalar over random tiles: odd row counts, N not a multiple of
 * 16, per-channel packs with K not a multiple of 32, block-scaled packs,
 * float and int32 mode, int8 extremes.  Where the CPU has the real
 * instructions the native kernels run through kern_gemm_q8 with the ISA
 * forced; elsewhere those checks say they were skipped.
 *
 * The first test must stay first: it sets PARLEY_ISA before anything in the
 * process asks kern_isa for its level (the variable is read once).
 */
#define PTEST_MAIN
#include "ptest.h"

#include "kern_gemm.h"
#include "kern_gemm_int.h"
#include "kern_isa.h"
#if KERN_TEST_EMU
#include "kern_isa_emu.h"
#endif

static kern_isa imin(kern_isa a, kern_isa b) { return a < b ? a : b; }

/* ---- dispatch ---------------------------------------------------------- */

PT_TEST(isa_env_cap_read_once) {
    const char *pre = getenv("PARLEY_ISA");
    kern_isa cap;
    if (pre && kern_isa_parse(pre, &cap) == 0) {
        /* The harness forces a level: check it is honoured and keep it. */
        PT_EQ_INT(kern_isa_best(), imin(kern_isa_detect(), cap));
        printf("  PARLEY_ISA=%s set by the caller: best %s\n", pre, kern_isa_name(kern_isa_best()));
        return;
    }
    if (pre) { /* an unknown name is ignored */
        PT_EQ_INT(kern_isa_best(), kern_isa_detect());
        printf("  PARLEY_ISA=%s (unknown) ignored: best %s\n", pre, kern_isa_name(kern_isa_best()));
        return;
    }
    setenv("PARLEY_ISA", "scalar", 1);
    PT_EQ_INT(kern_isa_best(), KERN_ISA_SCALAR);
    setenv("PARLEY_ISA", "amx", 1); /* read once: no effect now */
    PT_EQ_INT(kern_isa_best(), KERN_ISA_SCALAR);
    kern_isa_set_max(KERN_ISA_AMX); /* lifts the cap */
    PT_EQ_INT(kern_isa_best(), kern_isa_detect());
    unsetenv("PARLEY_ISA");
}

PT_TEST(isa_names_round_trip) {
    for (int i = 0; i < KERN_ISA_COUNT; i++) {
        kern_isa got = KERN_ISA_AMX;
        PT_EQ_INT(kern_isa_parse(kern_isa_name((kern_isa)i), &got), 0);
        PT_EQ_INT(got, i);
    }
    PT_EQ_STR(kern_isa_name(KERN_ISA_SCALAR), "scalar");
    PT_EQ_STR(kern_isa_name(KERN_ISA_AVX2), "avx2");
    PT_EQ_STR(kern_isa_name(KERN_ISA_AVX512VNNI), "avx512vnni");
    PT_EQ_STR(kern_isa_name(KERN_ISA_AMX), "amx");
    kern_isa out = KERN_ISA_AVX2;
    PT_EQ_INT(kern_isa_parse("AVX512VNNI", &out), 0);
    PT_EQ_INT(out, KERN_ISA_AVX512VNNI);
    out = KERN_ISA_AVX2;
    PT_EQ_INT(kern_isa_parse("avx512", &out), KERN_EINVAL);
    PT_EQ_INT(kern_isa_parse("", &out), KERN_EINVAL);
    PT_EQ_INT(kern_isa_parse(NULL, &out), KERN_EINVAL);
    PT_EQ_INT(out, KERN_ISA_AVX2); /* untouched on error */
}

PT_TEST(isa_detect_matches_cpu) {
    kern_isa d = kern_isa_detect();
    PT_EQ_INT(kern_isa_detect(), d);
    printf("  detected %s\n", kern_isa_name(d));
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    if (d >= KERN_ISA_AVX2) PT_ASSERT(avx2);
    if (d >= KERN_ISA_AVX512VNNI)
        PT_ASSERT(__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                  __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni"));
    if (!avx2) PT_ASSERT(d == KERN_ISA_SCALAR);
#else
    PT_EQ_INT(d, KERN_ISA_SCALAR);
#endif
}

PT_TEST(isa_set_max_caps_never_raises) {
    kern_isa d = kern_isa_detect(), before = kern_isa_best();
    for (int i = 0; i < KERN_ISA_COUNT; i++) {
        kern_isa_set_max((kern_isa)i);
        PT_EQ_INT(kern_isa_best(), imin(d, (kern_isa)i));
        PT_EQ_INT(kern_isa_detect(), d);
    }
    kern_isa_set_max((kern_isa)99); /* out of range: clamped to "no cap" */
    PT_EQ_INT(kern_isa_best(), d);
    kern_isa_set_max((kern_isa)-3); /* clamped to scalar */
    PT_EQ_INT(kern_isa_best(), KERN_ISA_SCALAR);
    kern_isa_set_max(before == d ? KERN_ISA_AMX : before);
    PT_EQ_INT(kern_isa_best(), before);
}

/* ---- random packs and tiles ------------------------------------------- */

static float frand01(void) { return (float)((double)(pt_rand() >> 11) / 9007199254740992.0); }

/* int8 in [-127, 127]; extremes: only -127 and 127. */
static int8_t rand_i8(int extremes) {
    if (extremes) return pt_rand() & 1 ? 127 : -127;
    return (int8_t)((int)(pt_rand() % 255) - 127);
}

/* A problem: weights packed, activations [M][lda] (zero K..Kp-1, junk past Kp). */
typedef struct tcase {
    int M, N, K, lda; /* shape */
    int block_scaled; /* 1: Q8_0-style block scales */
    kern_wpack w;     /* packed weights */
    int8_t *A;        /* activations */
    float *a_scale;   /* [M][lds] activation block scales */
    int32_t *a_sum;   /* [M][lds] activation block sums (kern_gemm_act.a_sum) */
    int lds;          /* row stride of a_scale (n_blocks or more) */
} tcase;

static void tcase_make(tcase *c, int M, int N, int K, int block_scaled, int extremes) {
    char err[128];
    c->M = M, c->N = N, c->K = K, c->block_scaled = block_scaled;
    int8_t *W = malloc((size_t)N * K);
    for (size_t i = 0; i < (size_t)N * K; i++) W[i] = rand_i8(extremes);
    int nbs = block_scaled ? N * (K / 32) : N;
    float *s = malloc(sizeof(float) * (size_t)nbs);
    for (int i = 0; i < nbs; i++) s[i] = (frand01() + 0.01f) * (block_scaled ? 0.05f : 0.01f);
    int rc = kern_wpack_init(&c->w, N, K, W, block_scaled ? NULL : s, block_scaled ? s : NULL, err,
                             sizeof err);
    PT_ASSERT_MSG(rc == 0, "kern_wpack_init(%d, %d): %s", N, K, err);
    free(W);
    free(s);
    static const int slack[] = {0, 4, 36}; /* 0: a row over-read past Kp hits the sanitizer */
    c->lda = c->w.Kp + slack[pt_rand() % 3];
    c->A = malloc((size_t)M * c->lda);
    c->lds = c->w.n_blocks + (int)(pt_rand() % 2);
    c->a_scale = malloc(sizeof(float) * (size_t)M * c->lds);
    for (int m = 0; m < M; m++) {
        int8_t *row = c->A + (size_t)m * c->lda;
        for (int k = 0; k < c->lda; k++)
            row[k] = k < K ? rand_i8(extremes) : k < c->w.Kp ? 0 : (int8_t)(pt_rand() | 1);
        for (int b = 0; b < c->lds; b++) c->a_scale[(size_t)m * c->lds + b] = frand01() + 0.001f;
    }
    c->a_sum = calloc((size_t)M * c->lds, sizeof(int32_t));
    for (int m = 0; m < M; m++)
        for (int k = 0; k < c->w.Kp; k++)
            c->a_sum[(size_t)m * c->lds + k / 32] += c->A[(size_t)m * c->lda + k];
}

static void tcase_free(tcase *c) {
    kern_wpack_free(&c->w);
    free(c->A);
    free(c->a_scale);
    free(c->a_sum);
}

/* Exact int32 sum of row m (of the tile's A) and channel n from the logical
 * weights, read back from the documented pack layout (inputs in [k0, k1)). */
static int32_t dot_pack(const tcase *c, const int8_t *a, int n, int k0, int k1) {
    const kern_wpack *w = &c->w;
    int g = n / 16, ch = n % 16;
    int32_t s = 0;
    for (int k = k0; k < k1; k++) {
        int b = k / 32, q = (k % 32) / 4, j = k % 4;
        s += (int32_t)a[k] * w->q8[(((size_t)g * w->n_blocks + b) * 8 + q) * 64 + ch * 4 + j];
    }
    return s;
}

/* The contract of kern_gemm.h for one output (independent of every kernel);
 * as: the row's activation block scales. */
static float contract_out(const tcase *c, const int8_t *a, const float *as, int n) {
    const kern_wpack *w = &c->w;
    float f = 0;
    for (int b = 0; b < w->n_blocks; b++) {
        int k1 = 32 * b + 32 < c->K ? 32 * b + 32 : c->K;
        float sb = (float)dot_pack(c, a, n, 32 * b, k1);
        if (!c->block_scaled) {
            f = fmaf(sb, as[b], f);
            continue;
        }
        float bs = kern_f16_to_f32(w->bscale[((size_t)(n / 16) * w->n_blocks + b) * 16 + n % 16]);
        f = fmaf(sb, bs * as[b], f);
    }
    return c->block_scaled ? f : f * w->scale[n];
}

#define SENTINEL 0x7fc0dead /* NaN / int pattern no kernel writes */

/* Runs one tile (rows r0.., groups g0..g0+ng-1) through fn and the scalar
 * kernel into sentinel-filled buffers; both must agree bit for bit,
 * including the untouched padding; spot-checks the scalar against the
 * contract.  Returns 1 when they agree. */
static int tile_check(const tcase *c, kern_q8_tile_fn fn, int r0, int mr, int g0, int ng, int i32,
                      const char *what) {
    int ldc = 16 * ng + 3;
    size_t n = (size_t)mr * ldc;
    uint32_t *ref = malloc(4 * n), *got = malloc(4 * n);
    for (size_t i = 0; i < n; i++) ref[i] = got[i] = SENTINEL;
    kern_q8_tile t = {.mr = mr,
                      .g0 = g0,
                      .ng = ng,
                      .A = c->A + (size_t)r0 * c->lda,
                      .lda = c->lda,
                      .a_scale = i32 ? NULL : c->a_scale + (size_t)r0 * c->lds,
                      .lds = c->lds,
                      /* the kernels' own block sums, or the caller's */
                      .a_sum = i32 || pt_rand() % 2 ? NULL : c->a_sum + (size_t)r0 * c->lds,
                      .w = &c->w,
                      .ldc = ldc};
    t.ncol = c->N - 16 * g0 < 16 * ng ? c->N - 16 * g0 : 16 * ng;
    t.C = i32 ? NULL : (float *)ref;
    t.C32 = i32 ? (int32_t *)ref : NULL;
    kern_q8_tile_scalar(&t);
    t.C = i32 ? NULL : (float *)got;
    t.C32 = i32 ? (int32_t *)got : NULL;
    fn(&t);
    int ok = memcmp(ref, got, 4 * n) == 0;
    for (size_t i = 0; ok && i < n; i++) {
        int m = (int)(i / ldc), col = (int)(i % ldc);
        if (col >= t.ncol) {
            ok = got[i] == SENTINEL;
            continue;
        }
        if (i % 7 != 0) continue; /* the contract is slow to evaluate: spot-check */
        const int8_t *a = t.A + (size_t)m * c->lda;
        int ch = 16 * g0 + col;
        if (i32) {
            ok = (int32_t)ref[i] == dot_pack(c, a, ch, 0, c->K);
        } else {
            float want = contract_out(c, a, t.a_scale + (size_t)m * c->lds, ch);
            ok = memcmp(&want, &ref[i], 4) == 0;
        }
    }
    if (!ok) {
        for (size_t i = 0; i < n; i++)
            if (ref[i] != got[i]) {
                fprintf(stderr,
                        "  %s: M %d N %d K %d bs %d i32 %d tile r0 %d mr %d g0 %d ng %d: "
                        "first difference row %zu col %zu: %08x vs %08x\n",
                        what, c->M, c->N, c->K, c->block_scaled, i32, r0, mr, g0, ng, i / ldc,
                        i % ldc, ref[i], got[i]);
                break;
            }
    }
    free(ref);
    free(got);
    return ok;
}

/* Random tiles of random problems through fn; n_cases problems. */
static void random_tiles(kern_q8_tile_fn fn, const char *what, int n_cases, int min_mr) {
    for (int it = 0; it < n_cases; it++) {
        int block_scaled = it % 2;
        int N = 1 + (int)(pt_rand() % 80);
        int K = block_scaled ? 32 * (1 + (int)(pt_rand() % 9)) : 1 + (int)(pt_rand() % 300);
        int mr = min_mr + (int)(pt_rand() % (KERN_TILE_M - min_mr + 1));
        tcase c;
        tcase_make(&c, mr + 3, N, K, block_scaled, it % 5 == 4);
        int g0 = (int)(pt_rand() % c.w.n_groups);
        int ng = 1 + (int)(pt_rand() % (c.w.n_groups - g0));
        for (int i32 = 0; i32 <= 1; i32++) {
            int r0 = (int)(pt_rand() % 4);
            PT_ASSERT_MSG(tile_check(&c, fn, r0, mr, g0, ng, i32, what), "%s differs", what);
        }
        tcase_free(&c);
    }
}

/* Fixed shapes that hit every edge: row counts around the register blocks
 * and AMX's 16, K with odd block counts and ragged tails, all groups. */
static void edge_tiles(kern_q8_tile_fn fn, const char *what) {
    static const int mrs[] = {1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 48, 63, 64};
    static const struct {
        int N, K, bs;
    } shapes[] = {
        {16, 32, 0}, {17, 1, 0}, {33, 63, 0}, {40, 97, 0}, {5, 160, 1}, {48, 64, 1}, {31, 96, 1},
    };
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        for (size_t i = 0; i < sizeof mrs / sizeof *mrs; i++) {
            tcase c;
            tcase_make(&c, mrs[i], shapes[s].N, shapes[s].K, shapes[s].bs, 0);
            for (int i32 = 0; i32 <= 1; i32++)
                PT_ASSERT_MSG(tile_check(&c, fn, 0, mrs[i], 0, c.w.n_groups, i32, what),
                              "%s differs", what);
            tcase_free(&c);
        }
}

/* All-extreme operands over a long K: the largest sums the contract allows. */
static void extreme_tiles(kern_q8_tile_fn fn, const char *what) {
    for (int bs = 0; bs <= 1; bs++) {
        tcase c;
        tcase_make(&c, 32, 24, 2048, bs, 1);
        for (int i32 = 0; i32 <= 1; i32++)
            PT_ASSERT_MSG(tile_check(&c, fn, 0, 32, 0, 2, i32, what), "%s differs", what);
        /* every product +127 * +127: the sum is exactly 127^2 * K */
        for (size_t i = 0; i < (size_t)c.w.n_groups * c.w.n_blocks * 512; i++)
            c.w.q8[i] = c.w.q8[i] ? 127 : 0;
        for (int m = 0; m < 32; m++) memset(c.A + (size_t)m * c.lda, 127, 2048);
        int32_t out[32 * 32];
        kern_q8_tile t = {.mr = 32,
                          .g0 = 0,
                          .ng = 2,
                          .ncol = 24,
                          .A = c.A,
                          .lda = c.lda,
                          .w = &c.w,
                          .C32 = out,
                          .ldc = 32};
        fn(&t);
        for (int m = 0; m < 32; m++)
            for (int n = 0; n < 24; n++) PT_EQ_INT(out[m * 32 + n], 127 * 127 * 2048);
        tcase_free(&c);
    }
}

#if KERN_TEST_EMU
static int emu_usable(void) {
    if (kern_isa_detect() >= KERN_ISA_AVX2) return 1;
    PT_SKIP_HW("the emulation build needs AVX2+FMA+F16C on the host");
}

PT_TEST(avx512vnni_emulated_matches_scalar) {
    if (!emu_usable()) return;
    edge_tiles(kern_q8_tile_avx512vnni_emu, "avx512vnni (SIMDe)");
    random_tiles(kern_q8_tile_avx512vnni_emu, "avx512vnni (SIMDe)", 150, 1);
    extreme_tiles(kern_q8_tile_avx512vnni_emu, "avx512vnni (SIMDe)");
}

PT_TEST(amx_emulated_matches_scalar) {
    if (!emu_usable()) return;
    kern_amx_emu_take_faults();
    kern_amx_emu_take_ops();
    edge_tiles(kern_q8_tile_amx_emu, "amx (emulated)");
    random_tiles(kern_q8_tile_amx_emu, "amx (emulated)", 100, 16);
    extreme_tiles(kern_q8_tile_amx_emu, "amx (emulated)");
    PT_EQ_INT(kern_amx_emu_take_faults(), 0);
    PT_ASSERT(kern_amx_emu_take_ops() > 0); /* the tile path ran, not only the tail kernel */
}

PT_TEST(amx_emulated_small_tiles_never_touch_tiles) {
    if (!emu_usable()) return;
    tcase c;
    tcase_make(&c, 15, 40, 96, 1, 0);
    kern_amx_emu_take_ops();
    PT_ASSERT(tile_check(&c, kern_q8_tile_amx_emu, 0, 15, 0, 3, 0, "amx (emulated)"));
    PT_EQ_INT(kern_amx_emu_take_ops(), 0);
    tcase_free(&c);
}
#else
PT_TEST(emulated_kernels_not_built) {
    PT_SKIP_MISSING("built without SIMDe (AVX-512/AMX kernels not checked in emulation): "
                    "deploy/setup.sh build installs libsimde-dev");
}
#endif

/* ---- native kernels through the driver --------------------------------- */

static void native_check(kern_isa isa) {
    if (kern_isa_best() < isa) {
        PT_SKIP_HW("%s not available here (best %s)", kern_isa_name(isa),
                   kern_isa_name(kern_isa_best()));
    }
    static const int Ms[] = {1, 3, 16, 17, 64, 100};
    for (size_t i = 0; i < sizeof Ms / sizeof *Ms; i++)
        for (int bs = 0; bs <= 1; bs++) {
            tcase c;
            int M = Ms[i], N = 57, K = bs ? 320 : 301;
            tcase_make(&c, M, N, K, bs, 0);
            float *ref = malloc(sizeof(float) * M * N), *got = malloc(sizeof(float) * M * N);
            int32_t *r32 = malloc(sizeof(int32_t) * M * N), *g32 = malloc(sizeof(int32_t) * M * N);
            kern_gemm_q8(NULL, KERN_ISA_SCALAR, M, c.A, c.lda, c.a_scale, c.lds, &c.w, ref, N);
            kern_gemm_q8(NULL, isa, M, c.A, c.lda, c.a_scale, c.lds, &c.w, got, N);
            PT_EQ_MEM(ref, got, sizeof(float) * M * N);
            kern_gemm_q8_i32(NULL, KERN_ISA_SCALAR, M, c.A, c.lda, &c.w, r32, N);
            kern_gemm_q8_i32(NULL, isa, M, c.A, c.lda, &c.w, g32, N);
            PT_EQ_MEM(r32, g32, sizeof(int32_t) * M * N);
            free(ref), free(got), free(r32), free(g32);
            tcase_free(&c);
        }
}

PT_TEST(avx512vnni_native_matches_scalar) { native_check(KERN_ISA_AVX512VNNI); }

PT_TEST(amx_native_matches_scalar) { native_check(KERN_ISA_AMX); }
