/*
 * test_sched_class.c -- service classes in the scheduler (eng_sched.h
 * "Service classes"), without a cache, on the synthetic cai-tiny model of
 * test_sched.c.  One running slot (max_running 1) makes "the batch is full"
 * exact and keeps every step a one-sequence step, so a run is compared
 * token for token with the same request run alone.
 *
 *   park_within_one_step   a bulk request runs; an interactive one arrives;
 *                          the bulk sequence leaves the batch before the
 *                          next step (at most one bulk token is generated
 *                          between the arrival and the interactive one's
 *                          first token), is counted as parked and resumed
 *   resume_same_tokens     the parked bulk request ends with exactly the
 *                          tokens of the same request never preempted,
 *                          greedy and sampled with a seed (its KV, sampler
 *                          and position are kept, nothing is recomputed)
 *   no_preempt_waits       class_preempt = 0: the bulk request keeps its
 *                          slot to the end and the interactive one waits
 *                          (the check of park_within_one_step fails there)
 *   tenants_round_robin    namespaces share admissions round-robin (weighted)
 *                          within a class, whatever one namespace queued first
 *   choices_keep_class     the choices of a bulk request with n > 1 are bulk
 *   parked_gives_way_to_memory  short of KV memory the parked sequence's KV
 *                          is given up (recomputed on resume) for the
 *                          interactive request; same tokens in the end
 *   bulk_min_share         a long interactive request does not starve bulk:
 *                          with bulk_min_share 0.1 the bulk request makes
 *                          progress before the interactive one ends; with 0
 *                          it makes none
 *   bulk_prefill_capped    a bulk prompt of 4000 tokens takes ceil(4000 /
 *                          bulk_step_tokens) steps to prefill (8 steps of
 *                          step_tokens 512 with the cap off)
 *   interactive_prefill_first  an interactive request arriving while a
 *                          long bulk prompt is being prefilled gets its
 *                          whole prompt into the next step, ahead of the
 *                          bulk chunk: its first token comes before the
 *                          bulk one's (in admission order the bulk chunks
 *                          would take every step's 512 tokens first)
 *   bulk_decode_capped     8 bulk requests decode; an interactive one
 *                          arrives: with bulk_decode_seqs 2, the steps it
 *                          runs in decode at most 2 bulk sequences, every
 *                          bulk one taking its turn; with 0, all 8; the
 *                          bulk requests' tokens are the same either way
 *                          (they cannot end on their own however late the
 *                          arrival: they are cancelled once it is done)
 */
#define PTEST_MAIN
#include "ptest.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "eng_sampler.h"
#include "sched_util.h"

#define NV 768        /* cai-tiny vocabulary */
#define LOG_MAX 65536 /* token events logged (every one of bulk_decode_capped's fits) */

static eng_model *g_model;

static eng_model *model(void) {
    if (!g_model) g_model = su_model("cai-tiny", 32, 2);
    return g_model;
}

/* The order tokens were delivered in, across requests (request index). */
static struct {
    pthread_mutex_t mu;
    int who[LOG_MAX]; /* request index of each token event */
    int n;            /* events */
} g_log = {PTHREAD_MUTEX_INITIALIZER, {0}, 0};

static void (*g_inner)(void *, uint64_t, const eng_sched_token *); /* su's on_token */

static void log_on_token(void *user, uint64_t id, const eng_sched_token *t) {
    su_req *q = user;
    pthread_mutex_lock(&g_log.mu);
    if (g_log.n < LOG_MAX) g_log.who[g_log.n++] = (int)(q - q->coll->reqs);
    pthread_mutex_unlock(&g_log.mu);
    g_inner(user, id, t);
}

static void log_reset(void) {
    pthread_mutex_lock(&g_log.mu);
    g_log.n = 0;
    pthread_mutex_unlock(&g_log.mu);
}

static eng_sched *mk_sched(int preempt, double min_share) {
    eng_sched_config cfg;
    eng_sched_config_default(&cfg);
    cfg.max_running = 1;
    cfg.batch_window_us = 0;
    cfg.speculative = ENG_SCHED_SPEC_OFF; /* one token per step: steps are countable */
    cfg.class_preempt = preempt;
    cfg.bulk_min_share = min_share;
    eng_sched *s = NULL;
    char err[256];
    if (eng_sched_create(model(), &cfg, NULL, &s, err, sizeof err) != 0)
        fprintf(stderr, "  create: %s\n", err);
    return s;
}

/* Request i of c of class cls; seed != 0: sampled at temperature 0.9. */
static void mk_req(su_coll *c, int i, eng_sched_request *r, const int32_t *prompt, int n,
                   int max_tokens, int cls, uint64_t seed) {
    su_request(c, i, r, prompt, n, max_tokens);
    if (!g_inner) g_inner = r->on_token;
    r->on_token = log_on_token;
    r->service_class = cls;
    if (seed) {
        r->sampling.temperature = 0.9f;
        r->sampling.seed = seed;
    }
}

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Tokens request `req` got while it waited for its first one: the events of
 * request 0 (bulk) after position `from` of the log and before the first
 * event of request `req`. */
static int bulk_tokens_before(int from, int req) {
    int n = 0;
    pthread_mutex_lock(&g_log.mu);
    for (int i = from; i < g_log.n && g_log.who[i] != req; i++) n += g_log.who[i] == 0;
    pthread_mutex_unlock(&g_log.mu);
    return n;
}

enum { P = 24, BULK_GEN = 60, INT_GEN = 12 };

/* Run a bulk request; once it generated a few tokens, an interactive one
 * arrives (the scheduler held meanwhile, so the arrival is at a step
 * boundary).  c gets both; *between the bulk tokens generated after the
 * arrival and before the interactive request's first token. */
static int run_pair_n(eng_sched *s, su_coll *c, const int32_t *pb, const int32_t *pi, int n_pi,
                      uint64_t seed, int int_gen, int *between) {
    char err[256];
    eng_sched_request r;
    log_reset();
    mk_req(c, 0, &r, pb, P, BULK_GEN, ENG_SCHED_BULK, seed);
    if (eng_sched_submit(s, &r, &c->reqs[0].id, err, sizeof err)) return -1;
    for (int w = 0; w < 3000; w++) {
        pthread_mutex_lock(&c->mu);
        int got = c->reqs[0].n_tokens;
        pthread_mutex_unlock(&c->mu);
        if (got >= 5) break;
        sleep_ms(1);
    }
    eng_sched_hold(s, 1);
    sleep_ms(30); /* the step under way ends and its tokens are delivered */
    pthread_mutex_lock(&g_log.mu);
    int mark = g_log.n;
    pthread_mutex_unlock(&g_log.mu);
    mk_req(c, 1, &r, pi, n_pi, int_gen, ENG_SCHED_INTERACTIVE, seed);
    if (eng_sched_submit(s, &r, &c->reqs[1].id, err, sizeof err)) return -1;
    eng_sched_hold(s, 0);
    if (su_wait(c, 2, 60000)) return -1;
    *between = bulk_tokens_before(mark, 1);
    return 0;
}

static int run_pair(eng_sched *s, su_coll *c, const int32_t *pb, const int32_t *pi, uint64_t seed,
                    int int_gen, int *between) {
    return run_pair_n(s, c, pb, pi, P, seed, int_gen, between);
}

/* The bulk request alone (never preempted). */
static int run_alone(su_coll *c, const int32_t *pb, uint64_t seed) {
    eng_sched *s = mk_sched(1, 0.1);
    char err[256];
    eng_sched_request r;
    if (!s) return -1;
    mk_req(c, 0, &r, pb, P, BULK_GEN, ENG_SCHED_BULK, seed);
    int rc = eng_sched_submit(s, &r, &c->reqs[0].id, err, sizeof err) || su_wait(c, 1, 60000);
    eng_sched_free(s);
    return rc ? -1 : 0;
}

PT_TEST(park_within_one_step) {
    PT_ASSERT(model());
    int32_t pb[P], pi[P];
    su_tokens(pb, P, NV, 7);
    su_tokens(pi, P, NV, 8);
    eng_sched *s = mk_sched(1, 0.1);
    PT_ASSERT(s);
    su_coll c;
    su_coll_init(&c, 2, 0);
    int between = -1;
    PT_EQ_INT(run_pair(s, &c, pb, pi, 0, INT_GEN, &between), 0);
    eng_sched_stats st;
    eng_sched_stats_get(s, &st);
    eng_sched_free(s);
    PT_ASSERT_MSG(between <= 1, "bulk generated %d tokens while interactive waited", between);
    PT_ASSERT(st.class_preemptions >= 1 && st.resumes >= 1);
    PT_EQ_INT((int)st.submitted_class[ENG_SCHED_BULK], 1);
    PT_EQ_INT((int)st.submitted_class[ENG_SCHED_INTERACTIVE], 1);
    PT_ASSERT(st.bulk_steps >= BULK_GEN && st.bulk_steps < st.steps);
    PT_EQ_INT(st.parked, 0);
    PT_EQ_INT(c.reqs[0].res.finish, ENG_SCHED_LENGTH);
    PT_EQ_INT(c.reqs[1].res.finish, ENG_SCHED_LENGTH);
    PT_ASSERT(c.reqs[0].res.preemptions >= 1);
    PT_EQ_INT(c.reqs[1].res.preemptions, 0);
    /* the interactive request finished before the bulk one */
    PT_ASSERT(c.reqs[1].res.submit_us + (int64_t)(c.reqs[1].res.total_ms * 1000) <
              c.reqs[0].res.submit_us + (int64_t)(c.reqs[0].res.total_ms * 1000));
    su_coll_free(&c);
}

PT_TEST(resume_same_tokens) {
    PT_ASSERT(model());
    int32_t pb[P], pi[P];
    su_tokens(pb, P, NV, 17);
    su_tokens(pi, P, NV, 18);
    const uint64_t seeds[2] = {0, 12345}; /* greedy, then sampled */
    for (int k = 0; k < 2; k++) {
        su_coll alone, pair;
        su_coll_init(&alone, 1, 0);
        su_coll_init(&pair, 2, 0);
        PT_EQ_INT(run_alone(&alone, pb, seeds[k]), 0);
        eng_sched *s = mk_sched(1, 0.1);
        PT_ASSERT(s);
        int between = -1;
        PT_EQ_INT(run_pair(s, &pair, pb, pi, seeds[k], INT_GEN, &between), 0);
        eng_sched_stats st;
        eng_sched_stats_get(s, &st);
        eng_sched_free(s);
        PT_ASSERT_MSG(st.class_preemptions >= 1, "seed %llu: never parked",
                      (unsigned long long)seeds[k]);
        PT_EQ_INT(alone.reqs[0].n_tokens, BULK_GEN);
        PT_EQ_INT(pair.reqs[0].n_tokens, BULK_GEN);
        PT_EQ_MEM(alone.reqs[0].tokens, pair.reqs[0].tokens, BULK_GEN * sizeof(int32_t));
        PT_EQ_MEM(alone.reqs[0].res_tokens, pair.reqs[0].res_tokens, BULK_GEN * sizeof(int32_t));
        su_coll_free(&alone);
        su_coll_free(&pair);
    }
}

PT_TEST(no_preempt_waits) {
    PT_ASSERT(model());
    int32_t pb[P], pi[P];
    su_tokens(pb, P, NV, 7);
    su_tokens(pi, P, NV, 8);
    eng_sched *s = mk_sched(0, 0.1);
    PT_ASSERT(s);
    su_coll c;
    su_coll_init(&c, 2, 0);
    int between = -1;
    PT_EQ_INT(run_pair(s, &c, pb, pi, 0, INT_GEN, &between), 0);
    eng_sched_stats st;
    eng_sched_stats_get(s, &st);
    eng_sched_free(s);
    /* the bulk request ran to its end before the interactive one started */
    PT_EQ_INT((int)st.class_preemptions, 0);
    PT_ASSERT_MSG(between > 1, "between = %d", between);
    su_coll_free(&c);
}

PT_TEST(bulk_min_share) {
    PT_ASSERT(model());
    int32_t pb[P], pi[P];
    su_tokens(pb, P, NV, 27);
    su_tokens(pi, P, NV, 28);
    const double shares[2] = {0.1, 0.0};
    for (int k = 0; k < 2; k++) {
        eng_sched *s = mk_sched(1, shares[k]);
        PT_ASSERT(s);
        su_coll c;
        su_coll_init(&c, 2, 0);
        int between = -1;
        /* a long interactive request: 200 steps */
        PT_EQ_INT(run_pair(s, &c, pb, pi, 0, 200, &between), 0);
        eng_sched_free(s);
        /* bulk tokens delivered while the interactive request ran */
        int during = 0, first_int = -1, last_int = -1;
        pthread_mutex_lock(&g_log.mu);
        for (int i = 0; i < g_log.n; i++)
            if (g_log.who[i] == 1) {
                if (first_int < 0) first_int = i;
                last_int = i;
            }
        for (int i = first_int; i >= 0 && i < last_int; i++) during += g_log.who[i] == 0;
        pthread_mutex_unlock(&g_log.mu);
        if (shares[k] > 0) {
            /* about one step in ten carried bulk */
            PT_ASSERT_MSG(during >= 5, "share %.1f: %d bulk tokens during 200 interactive steps",
                          shares[k], during);
            PT_ASSERT_MSG(during <= 60, "share %.1f: %d bulk tokens", shares[k], during);
        } else {
            PT_EQ_INT(during, 0);
        }
        PT_EQ_INT(c.reqs[0].n_tokens, BULK_GEN);
        PT_EQ_INT(c.reqs[1].n_tokens, 200);
        su_coll_free(&c);
    }
}

/* Tenants: namespace A queues 6 requests, then B queues 2 (held, one
 * running slot): B's are admitted after at most one more of A's each
 * (round-robin), not after A's whole backlog; with B weighted 3 the same.
 * admit_seq gives the admission order. */
PT_TEST(tenants_round_robin) {
    PT_ASSERT(model());
    int32_t p[8];
    su_tokens(p, 8, NV, 41);
    const eng_sched_tenant_weight wB[1] = {{"B", 3.0}};
    for (int k = 0; k < 2; k++) {
        eng_sched_config cfg;
        eng_sched_config_default(&cfg);
        cfg.max_running = 1;
        cfg.batch_window_us = 0;
        cfg.fairness_ms = 100000; /* nobody overdue: the tenant order alone */
        if (k) cfg.tenant_weights = wB, cfg.n_tenant_weights = 1;
        eng_sched *s = NULL;
        char err[256];
        PT_EQ_INT(eng_sched_create(model(), &cfg, NULL, &s, err, sizeof err), 0);
        su_coll c;
        su_coll_init(&c, 8, 0);
        eng_sched_hold(s, 1);
        for (int i = 0; i < 8; i++) {
            eng_sched_request r;
            su_request(&c, i, &r, p, 8, 2);
            r.ns = i < 6 ? "A" : "B";
            r.ns_len = 1;
            PT_EQ_INT(eng_sched_submit(s, &r, &c.reqs[i].id, err, sizeof err), 0);
        }
        eng_sched_hold(s, 0);
        PT_EQ_INT(su_wait(&c, 8, 60000), 0);
        eng_sched_free(s);
        /* admission ranks (1 = first) of B's two requests */
        int rank[8];
        for (int i = 0; i < 8; i++) {
            rank[i] = 1;
            for (int j = 0; j < 8; j++)
                rank[i] += c.reqs[j].res.admit_seq < c.reqs[i].res.admit_seq;
        }
        /* A B A B ... (equal weights); B's first two at once when weighted 3 */
        PT_ASSERT_MSG(rank[6] <= 2 && rank[7] <= 4, "weights %d: B ranked %d and %d", k, rank[6],
                      rank[7]);
        if (k) PT_ASSERT_MSG(rank[7] <= 3, "weighted: B's second ranked %d", rank[7]);
        su_coll_free(&c);
    }
}

/* The choices of a bulk request with n > 1 are bulk sequences too. */
PT_TEST(choices_keep_class) {
    PT_ASSERT(model());
    int32_t pb[P];
    su_tokens(pb, P, NV, 51);
    eng_sched_config cfg;
    eng_sched_config_default(&cfg);
    cfg.max_running = 3;
    cfg.batch_window_us = 0;
    eng_sched *s = NULL;
    char err[256];
    PT_EQ_INT(eng_sched_create(model(), &cfg, NULL, &s, err, sizeof err), 0);
    su_coll c;
    su_coll_init(&c, 1, 0);
    eng_sched_request r;
    mk_req(&c, 0, &r, pb, P, 200, ENG_SCHED_BULK, 99);
    r.n = 3;
    PT_EQ_INT(eng_sched_submit(s, &r, &c.reqs[0].id, err, sizeof err), 0);
    for (int w = 0; w < 3000; w++) {
        pthread_mutex_lock(&c.mu);
        int got = c.reqs[0].n_tokens;
        pthread_mutex_unlock(&c.mu);
        if (got >= 9) break;
        sleep_ms(1);
    }
    eng_sched_hold(s, 1);
    sleep_ms(30);
    eng_sched_stats st;
    eng_sched_stats_get(s, &st);
    PT_EQ_INT(st.running_class[ENG_SCHED_BULK], 3);
    PT_EQ_INT(st.running_class[ENG_SCHED_INTERACTIVE], 0);
    eng_sched_hold(s, 0);
    PT_EQ_INT(su_wait(&c, 1, 60000), 0);
    eng_sched_free(s);
    su_coll_free(&c);
}

/* Short of KV memory, a parked sequence gives its KV up (memory
 * preemption: dropped without a cache, recomputed on resume) so that the
 * interactive request fits; the bulk request still ends with its tokens. */
PT_TEST(parked_gives_way_to_memory) {
    PT_ASSERT(model());
    enum { PI = 100 };
    int32_t pb[P], pi[PI];
    su_tokens(pb, P, NV, 61);
    su_tokens(pi, PI, NV, 62);
    su_coll alone, c;
    su_coll_init(&alone, 1, 0);
    su_coll_init(&c, 2, 0);
    PT_EQ_INT(run_alone(&alone, pb, 0), 0);
    /* 8 blocks of each kind: the bulk request (24 + 60 tokens) or the
     * interactive one (100 + 12) fits alone, not both */
    const eng_kv_layout *l = eng_model_kv_layout(model());
    eng_sched_config cfg;
    eng_sched_config_default(&cfg);
    cfg.max_running = 1;
    cfg.batch_window_us = 0;
    cfg.speculative = ENG_SCHED_SPEC_OFF;
    cfg.local_share = 1.0;
    cfg.kv_budget_bytes = (l->block_bytes[0] + l->block_bytes[1]) * 8;
    eng_sched *s = NULL;
    char err[256];
    PT_EQ_INT(eng_sched_create(model(), &cfg, NULL, &s, err, sizeof err), 0);
    int between = -1;
    PT_EQ_INT(run_pair_n(s, &c, pb, pi, PI, 0, INT_GEN, &between), 0);
    eng_sched_stats st;
    eng_sched_stats_get(s, &st);
    eng_sched_free(s);
    PT_ASSERT_MSG(between <= 1, "bulk generated %d tokens while interactive waited", between);
    PT_ASSERT(st.class_preemptions >= 1);
    PT_ASSERT_MSG(st.preemptions >= 1, "the parked KV was never given up");
    PT_EQ_INT(st.parked, 0);
    PT_EQ_INT(c.reqs[0].res.finish, ENG_SCHED_LENGTH);
    PT_EQ_INT(c.reqs[1].res.finish, ENG_SCHED_LENGTH);
    PT_EQ_INT(c.reqs[0].n_tokens, BULK_GEN);
    PT_EQ_MEM(alone.reqs[0].tokens, c.reqs[0].tokens, BULK_GEN * sizeof(int32_t));
    su_coll_free(&alone);
    su_coll_free(&c);
}

enum { LONG_P = 4000 };

/* A scheduler of two running slots, step_tokens 512, bulk_step_tokens cap. */
static eng_sched *mk_sched_cap(int cap) {
    eng_sched_config cfg;
    eng_sched_config_default(&cfg);
    cfg.max_running = 2;
    cfg.batch_window_us = 0;
    cfg.speculative = ENG_SCHED_SPEC_OFF;
    cfg.step_tokens = 512;
    cfg.bulk_step_tokens = cap;
    eng_sched *s = NULL;
    char err[256];
    if (eng_sched_create(model(), &cfg, NULL, &s, err, sizeof err) != 0)
        fprintf(stderr, "  create: %s\n", err);
    return s;
}

PT_TEST(bulk_prefill_capped) {
    PT_ASSERT(model());
    static int32_t pb[LONG_P];
    su_tokens(pb, LONG_P, NV, 41);
    const int caps[3] = {400, 256, 0}, steps[3] = {10, 16, 8};
    for (int k = 0; k < 3; k++) {
        eng_sched *s = mk_sched_cap(caps[k]);
        PT_ASSERT(s);
        su_coll c;
        su_coll_init(&c, 1, 0);
        eng_sched_request r;
        char err[256];
        log_reset();
        mk_req(&c, 0, &r, pb, LONG_P, 1, ENG_SCHED_BULK, 0);
        PT_EQ_INT(eng_sched_submit(s, &r, &c.reqs[0].id, err, sizeof err), 0);
        PT_EQ_INT(su_wait(&c, 1, 60000), 0);
        eng_sched_close(s, 1); /* the last step is counted after its delivery */
        eng_sched_stats st;
        eng_sched_stats_get(s, &st);
        eng_sched_free(s);
        PT_EQ_INT(c.reqs[0].n_tokens, 1);
        PT_ASSERT_MSG((int)st.steps == steps[k], "cap %d: %d steps, expected %d", caps[k],
                      (int)st.steps, steps[k]);
        su_coll_free(&c);
    }
}

/* The interactive request arrives once the bulk prompt's first chunk is
 * done (LONG_P / 512 = 8 chunks in all without a cap).  Should this thread
 * be so late that the step under way at the hold could finish the bulk
 * prompt, the arrival was not mid-prefill: run again with a fresh scheduler
 * (at most 10 times). */
PT_TEST(interactive_prefill_first) {
    PT_ASSERT(model());
    static int32_t pb[LONG_P];
    int32_t pi[300];
    su_tokens(pb, LONG_P, NV, 43);
    su_tokens(pi, 300, NV, 44);
    int first = -1, mid = 0, preempted = -1;
    for (int attempt = 0; attempt < 10 && !mid; attempt++) {
        eng_sched *s = mk_sched_cap(0); /* no cap: only the order decides */
        PT_ASSERT(s);
        su_coll c;
        su_coll_init(&c, 2, 0);
        eng_sched_request r;
        char err[256];
        log_reset();
        mk_req(&c, 0, &r, pb, LONG_P, 4, ENG_SCHED_BULK, 0);
        PT_EQ_INT(eng_sched_submit(s, &r, &c.reqs[0].id, err, sizeof err), 0);
        eng_sched_stats st = {0};
        for (int w = 0; w < 60000 && st.steps < 1; w++) {
            sleep_ms(1);
            eng_sched_stats_get(s, &st);
        }
        eng_sched_hold(s, 1);
        eng_sched_stats_get(s, &st);
        /* at most the step under way (512 tokens) runs before the arrival
         * is seen: the bulk prompt must need a step after it */
        mid = LONG_P - (int)st.prefill_tokens > 512;
        mk_req(&c, 1, &r, pi, 300, 4, ENG_SCHED_INTERACTIVE, 0);
        PT_EQ_INT(eng_sched_submit(s, &r, &c.reqs[1].id, err, sizeof err), 0);
        eng_sched_hold(s, 0);
        PT_EQ_INT(su_wait(&c, 2, 60000), 0);
        eng_sched_free(s);
        pthread_mutex_lock(&g_log.mu);
        first = g_log.n ? g_log.who[0] : -1;
        pthread_mutex_unlock(&g_log.mu);
        preempted = c.reqs[0].res.preemptions;
        su_coll_free(&c);
    }
    PT_ASSERT_MSG(mid, "the bulk prompt was prefilled before the arrival in 10 runs");
    PT_EQ_INT(first, 1);
    PT_EQ_INT(preempted, 0); /* two slots: nothing was parked */
}

enum { NB = 8, CAP_BULK_GEN = 3000, CAP_INT_GEN = 30 };

/* NB bulk requests decode, each has a few tokens; then an interactive one
 * arrives (at a step boundary: the scheduler held).  during[i] gets bulk
 * request i's tokens delivered between the interactive request's first
 * and last token.  The bulk requests are cancelled once the interactive
 * one ended (CAP_BULK_GEN is out of reach of any wait here). */
static int run_capped(int cap, su_coll *c, int during[NB]) {
    eng_sched_config cfg;
    eng_sched_config_default(&cfg);
    cfg.max_running = NB + 1;
    cfg.batch_window_us = 0;
    cfg.speculative = ENG_SCHED_SPEC_OFF; /* one token per step and sequence */
    cfg.bulk_decode_seqs = cap;
    eng_sched *s = NULL;
    char err[256];
    if (eng_sched_create(model(), &cfg, NULL, &s, err, sizeof err) != 0) {
        fprintf(stderr, "  create: %s\n", err);
        return -1;
    }
    int32_t p[P];
    eng_sched_request r;
    log_reset();
    int rc = -1;
    for (int i = 0; i < NB; i++) {
        su_tokens(p, P, NV, 50 + (uint64_t)i);
        mk_req(c, i, &r, p, P, CAP_BULK_GEN, ENG_SCHED_BULK, 0);
        if (eng_sched_submit(s, &r, &c->reqs[i].id, err, sizeof err)) goto out;
    }
    for (int w = 0, low = 1; w < 60000 && low; w++) { /* each bulk one decoding */
        low = 0;
        pthread_mutex_lock(&c->mu);
        for (int i = 0; i < NB; i++) low |= c->reqs[i].n_tokens < 2;
        pthread_mutex_unlock(&c->mu);
        if (low) sleep_ms(1);
    }
    eng_sched_hold(s, 1);
    sleep_ms(30); /* the step under way ends and its tokens are delivered */
    su_tokens(p, P, NV, 60);
    mk_req(c, NB, &r, p, P, CAP_INT_GEN, ENG_SCHED_INTERACTIVE, 0);
    if (eng_sched_submit(s, &r, &c->reqs[NB].id, err, sizeof err)) goto out;
    eng_sched_hold(s, 0);
    if (su_wait(c, 1, 120000)) goto out; /* the interactive one */
    for (int i = 0; i < NB; i++) (void)eng_sched_cancel(s, c->reqs[i].id);
    if (su_wait(c, NB + 1, 120000)) goto out;
    int first = -1, last = -1;
    pthread_mutex_lock(&g_log.mu);
    for (int i = 0; i < g_log.n; i++)
        if (g_log.who[i] == NB) {
            if (first < 0) first = i;
            last = i;
        }
    for (int i = 0; i < NB; i++) during[i] = 0;
    for (int i = first; i >= 0 && i < last; i++)
        if (g_log.who[i] < NB) during[g_log.who[i]]++;
    pthread_mutex_unlock(&g_log.mu);
    rc = first >= 0 ? 0 : -1;
out:
    eng_sched_free(s);
    return rc;
}

PT_TEST(bulk_decode_capped) {
    PT_ASSERT(model());
    su_coll capped, free_;
    su_coll_init(&capped, NB + 1, 0);
    su_coll_init(&free_, NB + 1, 0);
    int dc[NB], df[NB], sum_c = 0, sum_f = 0;
    PT_EQ_INT(run_capped(2, &capped, dc), 0);
    PT_EQ_INT(run_capped(0, &free_, df), 0);
    for (int i = 0; i < NB; i++) {
        sum_c += dc[i];
        sum_f += df[i];
        /* every bulk request takes its turn while the interactive one runs */
        PT_ASSERT_MSG(dc[i] >= 1, "bulk request %d got no token in the capped steps", i);
        PT_EQ_INT(capped.reqs[i].res.finish, ENG_SCHED_CANCELLED);
        int n = capped.reqs[i].n_tokens < free_.reqs[i].n_tokens ? capped.reqs[i].n_tokens
                                                                 : free_.reqs[i].n_tokens;
        PT_ASSERT(n >= 2 && n < CAP_BULK_GEN);
        PT_EQ_MEM(capped.reqs[i].tokens, free_.reqs[i].tokens, (size_t)n * sizeof(int32_t));
    }
    PT_EQ_INT(capped.reqs[NB].res.finish, ENG_SCHED_LENGTH);
    PT_EQ_INT(capped.reqs[NB].n_tokens, CAP_INT_GEN);
    /* CAP_INT_GEN - 1 steps lie between its first and last token: at most
     * 2 bulk decodes each with the cap, all NB without */
    PT_ASSERT_MSG(sum_c <= 2 * CAP_INT_GEN, "capped: %d bulk tokens in %d steps", sum_c,
                  CAP_INT_GEN - 1);
    PT_ASSERT_MSG(sum_f >= (NB - 1) * (CAP_INT_GEN - 1), "uncapped: %d bulk tokens in %d steps",
                  sum_f, CAP_INT_GEN - 1);
    su_coll_free(&capped);
    su_coll_free(&free_);
}
