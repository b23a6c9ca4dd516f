/*
 * test_ptest.c -- unit tests of tests/unit/ptest.h, the helper every parley
 * test program uses.  Passing checks must pass; each failing check must be
 * caught (longjmp out of the test body) and counted; pt_rand must be the
 * documented splitmix64 sequence and honour PT_SEED.  Failing checks are
 * run inside a private setjmp so this program itself still passes; the
 * fixture program (ptest_fixture.c) covers the whole-program report.
 */
#define PTEST_MAIN
#include "ptest.h"

/* Runs fn, which is expected to fail exactly one check.  Returns 1 when the
 * check longjmp'd out and was counted, 0 when fn returned normally.  The
 * framework's jump buffer and failure count are restored afterwards. */
static int expect_failure(void (*fn)(void)) {
    jmp_buf saved;
    int before = pt_failed_checks, caught = 0;
    memcpy(saved, pt_jmp, sizeof(jmp_buf));
    if (setjmp(pt_jmp) == 0) fn();
    else caught = pt_failed_checks == before + 1;
    memcpy(pt_jmp, saved, sizeof(jmp_buf));
    pt_failed_checks = before;
    return caught;
}

static void fail_eq_int(void) { PT_EQ_INT(-1, 4294967295u); }
static void fail_eq_str(void) { PT_EQ_STR("parley", "parlay"); }
static void fail_eq_str_null(void) { PT_EQ_STR(NULL, "x"); }
static void fail_eq_mem(void) {
    const unsigned char a[4] = {1, 2, 3, 4}, b[4] = {1, 2, 3, 5};
    PT_EQ_MEM(a, b, sizeof a);
}
static void fail_near(void) { PT_NEAR(1.0, 1.1, 0.05); }
static void fail_near_nan(void) { PT_NEAR(NAN, 0.0, 1e9); }
static void fail_assert(void) { PT_ASSERT(1 > 2); }
static void fail_assert_msg(void) { PT_ASSERT_MSG(0, "value %d", 7); }

PT_TEST(checks_that_hold_pass) {
    const unsigned char a[3] = {0, 255, 7}, b[3] = {0, 255, 7};
    PT_ASSERT(1 + 1 == 2);
    PT_ASSERT_MSG(3 > 2, "never printed");
    PT_EQ_INT(INT64_C(-9000000000), INT64_C(-9000000000));
    PT_EQ_STR("kv", "kv");
    PT_EQ_MEM(a, b, sizeof a);
    PT_NEAR(0.1 + 0.2, 0.3, 1e-12);
    PT_NEAR(-5.0, -5.5, 0.5);
}

PT_TEST(each_failing_check_is_caught) {
    PT_ASSERT(expect_failure(fail_eq_int));
    PT_ASSERT(expect_failure(fail_eq_str));
    PT_ASSERT(expect_failure(fail_eq_str_null));
    PT_ASSERT(expect_failure(fail_eq_mem));
    PT_ASSERT(expect_failure(fail_near));
    PT_ASSERT(expect_failure(fail_near_nan));
    PT_ASSERT(expect_failure(fail_assert));
    PT_ASSERT(expect_failure(fail_assert_msg));
}

PT_TEST(registry_holds_tests_in_file_order) {
    PT_EQ_INT(pt_ncases, 4);
    PT_EQ_STR(pt_cases[0].name, "checks_that_hold_pass");
    PT_EQ_STR(pt_cases[1].name, "each_failing_check_is_caught");
    PT_EQ_STR(pt_cases[2].name, "registry_holds_tests_in_file_order");
    PT_EQ_STR(pt_cases[3].name, "pt_rand_is_splitmix64");
}

/* Independent splitmix64 (Steele, Lea, Flood 2014) to compare against. */
static uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

PT_TEST(pt_rand_is_splitmix64) {
    /* With state 0 the first output is splitmix64's published first value. */
    uint64_t saved = pt_rng_state, s = 0;
    pt_rng_state = 0;
    PT_EQ_INT(pt_rand(), (long long)UINT64_C(0xE220A8397B1DCDAF));
    pt_rng_state = 0;
    for (int i = 0; i < 1000; i++) PT_ASSERT(pt_rand() == splitmix64(&s));
    pt_rng_state = saved;
}
