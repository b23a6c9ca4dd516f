/*
 * test_sched_eta.c -- eng_sched_next_finish_us, the scheduler's estimate of
 * its next completion (the worker commits a transaction at once when no
 * turn is due soon), on a synthetic cai-tiny model written at test time.
 *
 *   nothing_in_flight        INT64_MAX before any request and once every
 *                            completion was delivered
 *   long_then_short          a long request running is due far ahead; a
 *                            short one submitted beside it brings the
 *                            estimate forward (it counts from submit on,
 *                            before the loop has seen it)
 *   completion_is_due_now    inside on_done (its completion not yet
 *                            delivered) the estimate is 0: due now
 */
#define PTEST_MAIN
#include "ptest.h"

#include <time.h>

#include "sched_util.h"

#define NV 768 /* cai-tiny vocabulary */

static eng_model *g_model;

static eng_model *model(void) {
    if (!g_model) g_model = su_model("cai-tiny", 0, 2);
    return g_model;
}

static eng_sched *mk_sched(void) {
    eng_sched *s = NULL;
    char err[256];
    if (eng_sched_create(model(), NULL, NULL, &s, err, sizeof err) != 0)
        fprintf(stderr, "  create: %s\n", err);
    return s;
}

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

/* Wait (up to 5 s) until the scheduler reports nothing in flight. */
static int64_t wait_idle(eng_sched *s) {
    int64_t t = 0;
    for (int i = 0; i < 5000 && (t = eng_sched_next_finish_us(s, NULL)) != INT64_MAX; i++)
        sleep_ms(1);
    return t;
}

PT_TEST(nothing_in_flight) {
    PT_ASSERT(model());
    eng_sched *s = mk_sched();
    PT_ASSERT(s);
    PT_ASSERT(eng_sched_next_finish_us(s, NULL) == INT64_MAX);
    su_coll c;
    su_coll_init(&c, 1, 0);
    int32_t prompt[20];
    su_tokens(prompt, 20, NV, 5);
    eng_sched_request r;
    /* 50 tokens: still in flight when asked (the batching window alone is 10 ms) */
    su_request(&c, 0, &r, prompt, 20, 50);
    char err[256];
    PT_EQ_INT(eng_sched_submit(s, &r, &c.reqs[0].id, err, sizeof err), 0);
    PT_ASSERT(eng_sched_next_finish_us(s, NULL) != INT64_MAX);
    PT_EQ_INT(su_wait(&c, 1, 30000), 0);
    PT_ASSERT(wait_idle(s) == INT64_MAX);
    eng_sched_free(s);
    su_coll_free(&c);
}

PT_TEST(long_then_short) {
    PT_ASSERT(model());
    eng_sched *s = mk_sched();
    PT_ASSERT(s);
    su_coll c;
    su_coll_init(&c, 2, 0);
    int32_t prompt[40];
    su_tokens(prompt, 40, NV, 9);
    eng_sched_request r;
    char err[256];
    su_request(&c, 0, &r, prompt, 40, 500);
    PT_EQ_INT(eng_sched_submit(s, &r, &c.reqs[0].id, err, sizeof err), 0);
    for (int i = 0; i < 20000; i++) { /* a few tokens: the step time is known */
        pthread_mutex_lock(&c.mu);
        int n = c.reqs[0].n_tokens;
        pthread_mutex_unlock(&c.mu);
        if (n >= 8) break;
        sleep_ms(1);
    }
    int64_t step = -1, now = eng_sched_now_us(), t_long = eng_sched_next_finish_us(s, &step);
    PT_ASSERT(step > 0); /* steps ran: their duration is known */
    /* hundreds of steps left: due well after now (a step takes > 1 us) */
    PT_ASSERT_MSG(t_long > now + 200 && t_long != INT64_MAX, "t_long %lld now %lld",
                  (long long)t_long, (long long)now);
    su_request(&c, 1, &r, prompt, 40, 2);
    PT_EQ_INT(eng_sched_submit(s, &r, &c.reqs[1].id, err, sizeof err), 0);
    int64_t t_short = eng_sched_next_finish_us(s, NULL);
    PT_ASSERT_MSG(t_short < t_long, "t_short %lld t_long %lld", (long long)t_short,
                  (long long)t_long);
    PT_EQ_INT(eng_sched_cancel(s, c.reqs[0].id), 0);
    PT_EQ_INT(su_wait(&c, 2, 30000), 0);
    PT_ASSERT(wait_idle(s) == INT64_MAX);
    eng_sched_free(s);
    su_coll_free(&c);
}

/* on_done that records the estimate seen from inside the callback. */
static eng_sched *g_s;
static int64_t g_seen = -1;
static void (*g_inner)(void *, uint64_t, const eng_sched_result *);

static void done_probe(void *user, uint64_t id, const eng_sched_result *res) {
    g_seen = eng_sched_next_finish_us(g_s, NULL);
    g_inner(user, id, res);
}

PT_TEST(completion_is_due_now) {
    PT_ASSERT(model());
    eng_sched *s = g_s = mk_sched();
    PT_ASSERT(s);
    su_coll c;
    su_coll_init(&c, 1, 0);
    int32_t prompt[12];
    su_tokens(prompt, 12, NV, 3);
    eng_sched_request r;
    su_request(&c, 0, &r, prompt, 12, 3);
    g_inner = r.on_done;
    r.on_done = done_probe;
    char err[256];
    PT_EQ_INT(eng_sched_submit(s, &r, &c.reqs[0].id, err, sizeof err), 0);
    PT_EQ_INT(su_wait(&c, 1, 30000), 0);
    PT_ASSERT(g_seen == 0);
    PT_ASSERT(wait_idle(s) == INT64_MAX);
    eng_sched_free(s);
    su_coll_free(&c);
    eng_model_free(g_model); /* last test */
    g_model = NULL;
}
