/*
 * ptest.h -- parley's tiny unit-test helper (header only).
 *
 * A test file defines tests with PT_TEST(name) { ... } and checks with the
 * PT_* macros; exactly one translation unit per test program defines
 * PTEST_MAIN before including this header to get main().  Tests register
 * themselves at load time (constructor attribute), run in file order, and a
 * failed check ends only the current test (longjmp), so one run reports
 * every failure.  The program prints one line per test and a summary line
 * "N passed, N failed, N skipped" and exits non-zero on any failure.
 *
 * Skips.  A test that cannot run here ends with a skip, never a pass:
 *   PT_SKIP_HW(fmt, ...)       what the hardware lacks (an ISA, a GPU): a
 *                              skip everywhere;
 *   PT_SKIP_MISSING(fmt, ...)  a component the build or machine should have
 *                              (SIMDe, a tool): a skip by hand, a FAILURE
 *                              under CI=true, where set-up installs it.
 * A skipped test prints "skip  NAME: reason" and, when PARLEY_SKIP_LOG names
 * a file, appends "PROGRAM NAME: reason" to it (tests/run.sh lists them all
 * at the end).  A program whose tests all skipped exits 77, which ctest
 * reports as Skipped (parley_add_test sets SKIP_RETURN_CODE 77).
 *
 * Usage of a test program:   prog [substring]   runs tests whose name
 * contains the substring (all when omitted).  PT_SEED (env) seeds pt_rand().
 */
#ifndef PTEST_H
#define PTEST_H

#include <inttypes.h>
#include <math.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef void (*pt_fn)(void);

typedef struct pt_case {
    const char *name; /* test name (the function's) */
    pt_fn fn;         /* body */
} pt_case;

#define PT_MAX_CASES 1024

extern pt_case pt_cases[PT_MAX_CASES];
extern int pt_ncases;
extern jmp_buf pt_jmp;
extern int pt_failed_checks;
extern int pt_skipped;         /* the current test skipped */
extern const char *pt_current; /* name of the running test */
extern const char *pt_prog;    /* argv[0] */

void pt_register(const char *name, pt_fn fn);
uint64_t pt_rand(void);

#define PT_TEST(name)                                                                          \
    static void name(void);                                                                    \
    __attribute__((constructor)) static void pt_reg_##name(void) { pt_register(#name, name); } \
    static void name(void)

#define PT_FAIL(...)                                      \
    do {                                                  \
        fprintf(stderr, "  %s:%d: ", __FILE__, __LINE__); \
        fprintf(stderr, __VA_ARGS__);                     \
        fputc('\n', stderr);                              \
        pt_failed_checks++;                               \
        longjmp(pt_jmp, 1);                               \
    } while (0)

/* Skip the current test (kind 0: hardware, 1: missing component). */
void pt_skip(int missing, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define PT_SKIP_HW(...)          \
    do {                         \
        pt_skip(0, __VA_ARGS__); \
        longjmp(pt_jmp, 1);      \
    } while (0)
#define PT_SKIP_MISSING(...)     \
    do {                         \
        pt_skip(1, __VA_ARGS__); \
        longjmp(pt_jmp, 1);      \
    } while (0)

#define PT_ASSERT(cond)                                      \
    do {                                                     \
        if (!(cond)) PT_FAIL("assertion failed: %s", #cond); \
    } while (0)

#define PT_ASSERT_MSG(cond, ...)           \
    do {                                   \
        if (!(cond)) PT_FAIL(__VA_ARGS__); \
    } while (0)

#define PT_EQ_INT(a, b)                                                              \
    do {                                                                             \
        long long pt_a_ = (long long)(a), pt_b_ = (long long)(b);                    \
        if (pt_a_ != pt_b_) PT_FAIL("%s == %s: %lld != %lld", #a, #b, pt_a_, pt_b_); \
    } while (0)

#define PT_EQ_STR(a, b)                                                             \
    do {                                                                            \
        const char *pt_a_ = (a), *pt_b_ = (b);                                      \
        if (!pt_a_ || !pt_b_ || strcmp(pt_a_, pt_b_))                               \
            PT_FAIL("%s == %s: \"%s\" != \"%s\"", #a, #b, pt_a_ ? pt_a_ : "(null)", \
                    pt_b_ ? pt_b_ : "(null)");                                      \
    } while (0)

#define PT_EQ_MEM(a, b, n)                                              \
    do {                                                                \
        if (memcmp((a), (b), (n))) PT_FAIL("%s and %s differ", #a, #b); \
    } while (0)

#define PT_NEAR(a, b, tol)                                                              \
    do {                                                                                \
        double pt_a_ = (double)(a), pt_b_ = (double)(b);                                \
        if (!(fabs(pt_a_ - pt_b_) <= (tol)))                                            \
            PT_FAIL("%s ~ %s: %g vs %g (tol %g)", #a, #b, pt_a_, pt_b_, (double)(tol)); \
    } while (0)

#ifdef PTEST_MAIN
pt_case pt_cases[PT_MAX_CASES];
int pt_ncases;
jmp_buf pt_jmp;
int pt_failed_checks;
int pt_skipped;
const char *pt_current = "";
const char *pt_prog = "";
static uint64_t pt_rng_state = 0x9E3779B97F4A7C15ull;

#include <stdarg.h>

void pt_skip(int missing, const char *fmt, ...) {
    char why[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    const char *ci = getenv("CI");
    if (missing && ci && !strcmp(ci, "true")) {
        fprintf(stderr, "  %s: a skip would hide a missing component under CI=true: %s\n",
                pt_current, why);
        pt_failed_checks++;
        return;
    }
    pt_skipped = 1;
    printf("  skip: %s%s\n", why, missing ? "" : " (hardware)");
    const char *log = getenv("PARLEY_SKIP_LOG");
    FILE *f = log && *log ? fopen(log, "a") : NULL;
    if (f) {
        const char *b = strrchr(pt_prog, '/');
        fprintf(f, "%s %s: %s%s\n", b ? b + 1 : pt_prog, pt_current, why,
                missing ? "" : " (hardware)");
        fclose(f);
    }
}

void pt_register(const char *name, pt_fn fn) {
    if (pt_ncases < PT_MAX_CASES) {
        pt_cases[pt_ncases].name = name;
        pt_cases[pt_ncases].fn = fn;
        pt_ncases++;
    }
}

/* splitmix64: deterministic unless PT_SEED is set. */
uint64_t pt_rand(void) {
    uint64_t z = (pt_rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

int main(int argc, char **argv) {
    const char *filter = argc > 1 ? argv[1] : NULL;
    const char *seed = getenv("PT_SEED");
    if (seed) pt_rng_state = strtoull(seed, NULL, 0);
    pt_prog = argv[0];
    volatile int passed = 0, failed = 0, skipped = 0; /* volatile: live across setjmp */
    for (volatile int i = 0; i < pt_ncases; i++) {
        if (filter && !strstr(pt_cases[i].name, filter)) continue;
        volatile int before = pt_failed_checks;
        pt_current = pt_cases[i].name;
        pt_skipped = 0;
        if (setjmp(pt_jmp) == 0) pt_cases[i].fn();
        if (pt_failed_checks != before) {
            failed++;
            printf("FAIL  %s\n", pt_cases[i].name);
        } else if (pt_skipped) {
            skipped++;
            printf("skip  %s\n", pt_cases[i].name);
        } else {
            passed++;
            printf("ok    %s\n", pt_cases[i].name);
        }
        fflush(stdout);
    }
    if (skipped) printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
    else printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : passed == 0 && skipped > 0 ? 77 : 0;
}
#endif /* PTEST_MAIN */
#endif /* PTEST_H */
