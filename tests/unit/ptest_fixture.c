/*
 * ptest_fixture.c -- a deliberately failing ptest program, run by the unit
 * tests in tests/unit/CMakeLists.txt to check what ptest reports: one test
 * passes, two fail (one through PT_EQ_INT, one through PT_ASSERT after an
 * earlier check passed), one skips for the hardware and one for a missing
 * component (a failure under CI=true), and the program must exit non-zero;
 * run with the filter "skips_hw" alone, every test it runs skipped: exit 77.
 */
#define PTEST_MAIN
#include "ptest.h"

PT_TEST(fixture_passes) { PT_EQ_INT(2 + 2, 4); }

PT_TEST(fixture_fails_eq) {
    PT_EQ_INT(6 * 7, 41);
    PT_FAIL("unreachable: the failed check must end the test");
}

PT_TEST(fixture_fails_assert) {
    PT_ASSERT(1);
    PT_ASSERT(strlen("abc") == 4);
}

PT_TEST(fixture_skips_hw) {
    PT_SKIP_HW("no such ISA here");
    PT_FAIL("unreachable: a skip must end the test");
}

PT_TEST(fixture_skips_missing) {
    PT_SKIP_MISSING("no such tool installed");
    PT_FAIL("unreachable: a skip must end the test");
}
