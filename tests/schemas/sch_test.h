/*
 * sch_test.h -- shared macros of the schema unit tests: decode a record
 * built with mp_build() and check the outcome, including that a failed
 * decode leaves its output zeroed (no partial state) and that nothing
 * leaks (ASan in the sanitizer build).
 */
#ifndef SCH_TEST_H
#define SCH_TEST_H

#include "ptest.h"
#include "sch.h"
#include "sch_mp.h"

#include <stdbool.h>

/* True when n bytes at p are all zero. */
static inline bool sch_test_zero(const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        if (b[i]) return false;
    return true;
}

/* Decode bytes built from the format with sch_<kind>_decode under limits
 * lim (NULL = defaults) and require error code `code`. */
#define SCH_EXPECT_ERR(kind, lim, code, ...)                                                \
    do {                                                                                    \
        size_t n_;                                                                          \
        unsigned char *b_ = mp_build(&n_, __VA_ARGS__);                                     \
        sch_##kind o_;                                                                      \
        char e_[256] = "";                                                                  \
        int rc_ = sch_##kind##_decode(b_, n_, (lim), &o_, e_, sizeof e_);                   \
        bool z_ = sch_test_zero(&o_, sizeof o_);                                            \
        free(b_);                                                                           \
        if (rc_ == 0) sch_##kind##_free(&o_);                                               \
        if (rc_ != (code))                                                                  \
            PT_FAIL("expected %s, got %s (%s)", sch_err_name(code), sch_err_name(rc_), e_); \
        PT_ASSERT_MSG(z_, "output not zeroed after error");                                 \
        PT_ASSERT_MSG(e_[0] != 0, "no error message");                                      \
    } while (0)

/* Decode bytes built from the format into *out (must succeed). */
#define SCH_DECODE_OK(kind, lim, out, ...)                                      \
    do {                                                                        \
        size_t n_;                                                              \
        unsigned char *b_ = mp_build(&n_, __VA_ARGS__);                         \
        char e_[256] = "";                                                      \
        int rc_ = sch_##kind##_decode(b_, n_, (lim), (out), e_, sizeof e_);     \
        free(b_);                                                               \
        if (rc_ != 0) PT_FAIL("decode failed: %s (%s)", sch_err_name(rc_), e_); \
    } while (0)

/* Common ChatTurn pieces: v + ids (3 entries) and one user message. */
#define T_BASE "su ss ss "
#define T_BASE_ARGS "v", 1, "conversation_id", "c1", "turn_id", "t1"
#define T_MSG1 "s A1 M2 ss ss "
#define T_MSG1_ARGS "messages", 1, 2, "role", "user", "content", "hi"

#endif /* SCH_TEST_H */
