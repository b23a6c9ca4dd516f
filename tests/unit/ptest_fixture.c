/*
 * ptest_fixture.c -- a deliberately failing ptest program, run by the unit
 * tests in tests/unit/CMakeLists.txt to check what ptest reports: one test
 * passes, two fail (one through PT_EQ_INT, one through PT_ASSERT after an
 * earlier check passed), and the program must exit non-zero.
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
