/*
 * test_wk_offsets.c -- wk_offsets: the commit position is always the lowest
 * unfinished offset (or last + 1), checked against a brute-force model
 * under random out-of-order completion, plus the error contracts.
 */
#define PTEST_MAIN
#include "ptest.h"
#include "wk_offsets.h"

PT_TEST(empty_and_errors) {
    wk_offsets *o;
    PT_EQ_INT(wk_offsets_new(&o), 0);
    PT_EQ_INT(wk_offsets_position(o, 0), -1);
    PT_EQ_INT(wk_offsets_done(o, 0, 5), WK_OFF_EINVAL);
    PT_EQ_INT(wk_offsets_add(o, -1, 0), WK_OFF_EINVAL);
    PT_EQ_INT(wk_offsets_add(o, 0, -3), WK_OFF_EINVAL);
    PT_EQ_INT(wk_offsets_add(o, WK_OFF_MAX_PARTITIONS, 0), WK_OFF_EINVAL);
    PT_EQ_INT(wk_offsets_add(o, 3, 10), 0);
    PT_EQ_INT(wk_offsets_add(o, 3, 10), WK_OFF_EINVAL); /* not increasing */
    PT_EQ_INT(wk_offsets_add(o, 3, 9), WK_OFF_EINVAL);
    PT_EQ_INT(wk_offsets_position(o, 3), 10);
    PT_EQ_INT(wk_offsets_done(o, 3, 11), WK_OFF_EINVAL); /* never added */
    PT_EQ_INT(wk_offsets_done(o, 3, 10), 0);
    PT_EQ_INT(wk_offsets_done(o, 3, 10), WK_OFF_EINVAL); /* twice */
    PT_EQ_INT(wk_offsets_position(o, 3), 11);
    PT_EQ_INT(wk_offsets_position(o, 2), -1);
    wk_offsets_reset(o, 3);
    PT_EQ_INT(wk_offsets_position(o, 3), -1);
    PT_EQ_INT(wk_offsets_add(o, 3, 4), 0); /* after a reset any offset starts anew */
    wk_offsets_free(o);
}

PT_TEST(gaps_and_out_of_order) {
    wk_offsets *o;
    PT_EQ_INT(wk_offsets_new(&o), 0);
    int64_t offs[] = {5, 6, 9, 12, 13};
    for (int i = 0; i < 5; i++) PT_EQ_INT(wk_offsets_add(o, 1, offs[i]), 0);
    PT_EQ_INT(wk_offsets_pending(o, 1), 5);
    PT_EQ_INT(wk_offsets_done(o, 1, 9), 0);
    PT_EQ_INT(wk_offsets_position(o, 1), 5);
    PT_EQ_INT(wk_offsets_done(o, 1, 5), 0);
    PT_EQ_INT(wk_offsets_position(o, 1), 6);
    PT_EQ_INT(wk_offsets_done(o, 1, 6), 0);
    PT_EQ_INT(wk_offsets_position(o, 1), 12); /* 9 already done */
    PT_EQ_INT(wk_offsets_done(o, 1, 13), 0);
    PT_EQ_INT(wk_offsets_done(o, 1, 12), 0);
    PT_EQ_INT(wk_offsets_position(o, 1), 14);
    PT_EQ_INT(wk_offsets_pending(o, 1), 0);
    wk_offsets_free(o);
}

PT_TEST(random_against_model) {
    enum { N = 3000, P = 3 };
    static int64_t off[P][N];
    static int done[P][N];
    wk_offsets *o;
    PT_EQ_INT(wk_offsets_new(&o), 0);
    int added[P] = {0};
    int64_t next[P] = {0, 100, 7};
    for (int step = 0; step < 20000; step++) {
        int p = (int)(pt_rand() % P);
        if (added[p] < N && pt_rand() % 2) {
            next[p] += 1 + (int64_t)(pt_rand() % 3);
            off[p][added[p]] = next[p];
            PT_EQ_INT(wk_offsets_add(o, p, next[p]), 0);
            added[p]++;
        } else if (added[p]) {
            int i = (int)(pt_rand() % (uint64_t)added[p]);
            PT_EQ_INT(wk_offsets_done(o, p, off[p][i]), done[p][i] ? WK_OFF_EINVAL : 0);
            done[p][i] = 1;
        }
        int64_t want = -1, pend = 0;
        for (int i = 0; i < added[p]; i++)
            if (!done[p][i]) {
                if (want < 0) want = off[p][i];
                pend++;
            }
        if (want < 0 && added[p]) want = off[p][added[p] - 1] + 1;
        PT_EQ_INT(wk_offsets_position(o, p), want);
        PT_EQ_INT(wk_offsets_pending(o, p), pend);
    }
    wk_offsets_free(o);
}
