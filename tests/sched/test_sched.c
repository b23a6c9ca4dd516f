/*
 * test_sched.c -- the continuous-batching scheduler without a cache, on a
 * synthetic cai-tiny model (MQA, local window shortened to 32 tokens so
 * sliding-window blocks are released during the tests) written at test time.
 *
 *   alone_matches_engine     a request run by the scheduler gives the same
 *                            greedy tokens and logits as eng_forward driven
 *                            by hand (one-shot prefill, then decode)
 *   batched_equals_alone     the same requests run alone, all together with
 *                            small steps (chunked prefill), and staggered
 *                            give identical tokens, logits within int8
 *                            tolerance
 *   greedy_argmax_path       greedy requests that want no logits (their
 *                            steps ask eng_forward for the argmax only)
 *                            give the tokens of the same requests with
 *                            logits, alone and batched with them
 *   memory_pressure          more requests than the KV budget holds all
 *                            complete with the alone tokens; the budget is
 *                            never exceeded; blocks all come back
 *   deadline_and_cancel      deadlines end requests as expired, cancel as
 *                            cancelled, eng_sched_stop as stop (tokens kept);
 *                            all free their blocks
 *   close_cancels_or_drains  close(0) cancels, close(1) finishes; exactly
 *                            one completion per request
 *   refuses_bad_requests     bad tokens, empty prompt, too large for the
 *                            budget
 */
#define PTEST_MAIN
#include "ptest.h"

#include "eng_sampler.h"
#include "sched_util.h"

#define NV 768 /* cai-tiny vocabulary */

static eng_model *g_model;

static eng_model *model(void) {
    if (!g_model) g_model = su_model("cai-tiny", 32, 2);
    return g_model;
}

/* Greedy generation with eng_forward alone (the reference). */
static int ref_generate(eng_model *m, const int32_t *prompt, int n, int max_tokens, int32_t *out,
                        float *logits) {
    eng_kv_allocator a;
    eng_kvseq kv;
    char err[256];
    if (eng_kv_allocator_malloc(&a, eng_model_kv_layout(m)) != 0) return -1;
    if (eng_kvseq_init(&kv, eng_model_kv_layout(m), &a, err, sizeof err) != 0) return -1;
    eng_sampler_params p;
    eng_sampler_params_default(&p);
    eng_sampler *smp;
    if (eng_sampler_new(&p, NV, &smp, err, sizeof err) != 0) return -1;
    int32_t hist[1024];
    memcpy(hist, prompt, (size_t)n * sizeof *hist);
    int nh = n, rc = 0;
    eng_seq_step st = {
        .kv = &kv, .tokens = prompt, .n_tokens = n, .logits = ENG_LOGITS_LAST, .out = NULL};
    for (int i = 0; i < max_tokens; i++) {
        st.out = logits + (size_t)i * NV;
        if ((rc = eng_forward(m, &st, 1, err, sizeof err)) != 0) break;
        out[i] = eng_sampler_sample(smp, st.out, hist, nh);
        hist[nh++] = out[i];
        st.tokens = &hist[nh - 1];
        st.n_tokens = 1;
    }
    eng_sampler_free(smp);
    eng_kvseq_free(&kv);
    eng_kv_allocator_malloc_free(&a);
    return rc;
}

static eng_sched *mk_sched(int max_running, int step_tokens, size_t budget) {
    eng_sched_config cfg;
    eng_sched_config_default(&cfg);
    cfg.max_running = max_running;
    cfg.step_tokens = step_tokens;
    if (budget) cfg.kv_budget_bytes = budget;
    eng_sched *s = NULL;
    char err[256];
    if (eng_sched_create(model(), &cfg, NULL, &s, err, sizeof err) != 0)
        fprintf(stderr, "  create: %s\n", err);
    return s;
}

static double max_abs(const float *x, int n) {
    double m = 0;
    for (int i = 0; i < n; i++) m = fabs(x[i]) > m ? fabs(x[i]) : m;
    return m;
}

/* Tokens equal, logits within int8 tolerance (1% of the row's largest). */
static void check_same(const su_req *a, const su_req *b, int n_tok) {
    PT_EQ_INT(a->n_tokens, n_tok);
    PT_EQ_INT(b->n_tokens, n_tok);
    PT_EQ_MEM(a->tokens, b->tokens, (size_t)n_tok * sizeof(int32_t));
    for (int t = 0; t < n_tok; t++) {
        const float *x = a->logits + (size_t)t * NV, *y = b->logits + (size_t)t * NV;
        double tol = 0.01 * max_abs(x, NV) + 1e-4;
        for (int v = 0; v < NV; v++) PT_NEAR(x[v], y[v], tol);
    }
}

PT_TEST(alone_matches_engine) {
    PT_ASSERT(model());
    enum { N = 40, G = 10 };
    int32_t prompt[N], ref[G];
    float *ref_logits = calloc((size_t)NV * G, sizeof(float));
    su_tokens(prompt, N, NV, 7);
    PT_EQ_INT(ref_generate(model(), prompt, N, G, ref, ref_logits), 0);
    eng_sched *s = mk_sched(8, 512, 0);
    PT_ASSERT(s);
    su_coll c;
    su_coll_init(&c, 1, NV);
    eng_sched_request r;
    su_request(&c, 0, &r, prompt, N, G);
    char err[256];
    PT_EQ_INT(eng_sched_submit(s, &r, &c.reqs[0].id, err, sizeof err), 0);
    PT_EQ_INT(su_wait(&c, 1, 20000), 0);
    eng_sched_free(s);
    su_req *q = &c.reqs[0];
    PT_EQ_INT(q->res.finish, ENG_SCHED_LENGTH);
    PT_EQ_INT(q->res.n_tokens, G);
    PT_EQ_INT(q->res.prompt_tokens, N);
    PT_ASSERT(q->order_ok);
    PT_EQ_MEM(q->tokens, ref, sizeof ref);
    PT_EQ_MEM(q->res_tokens, ref, sizeof ref);
    for (int t = 0; t < G; t++)
        for (int v = 0; v < NV; v++)
            PT_NEAR(q->logits[(size_t)t * NV + v], ref_logits[(size_t)t * NV + v],
                    0.01 * max_abs(ref_logits + (size_t)t * NV, NV) + 1e-4);
    PT_ASSERT(q->res.ttft_ms > 0 && q->res.total_ms >= q->res.ttft_ms);
    free(ref_logits);
    su_coll_free(&c);
}

PT_TEST(greedy_argmax_path) {
    PT_ASSERT(model());
    enum { N = 5, G = 12 };
    static int32_t prompts[N][128];
    static const int len[N] = {3, 17, 40, 70, 9};
    for (int i = 0; i < N; i++) su_tokens(prompts[i], len[i], NV, 300 + (uint64_t)i);
    char err[256];
    su_coll full, bare;
    su_coll_init(&full, N, NV); /* want_logits: the sampler over the full rows */
    su_coll_init(&bare, N, 0);  /* no logits: argmax-only steps */
    eng_sched *s = mk_sched(8, 24, 0);
    PT_ASSERT(s);
    for (int i = 0; i < N; i++) { /* interleaved: both kinds in the same steps */
        eng_sched_request r;
        su_request(&full, i, &r, prompts[i], len[i], G);
        PT_EQ_INT(eng_sched_submit(s, &r, &full.reqs[i].id, err, sizeof err), 0);
        su_request(&bare, i, &r, prompts[i], len[i], G);
        PT_EQ_INT(eng_sched_submit(s, &r, &bare.reqs[i].id, err, sizeof err), 0);
    }
    PT_EQ_INT(su_wait(&full, N, 20000), 0);
    PT_EQ_INT(su_wait(&bare, N, 20000), 0);
    eng_sched_free(s);
    for (int i = 0; i < N; i++) {
        PT_EQ_INT(bare.reqs[i].res.finish, ENG_SCHED_LENGTH);
        PT_EQ_INT(bare.reqs[i].n_tokens, G);
        PT_EQ_MEM(bare.reqs[i].tokens, full.reqs[i].tokens, sizeof(int32_t) * G);
    }
    su_coll_free(&full);
    su_coll_free(&bare);
}

/* Prompt lengths of the batching tests: below, at and across block and
 * window boundaries (B = 16, window 32). */
static const int k_len[] = {3, 16, 17, 45, 70, 100, 33};
#define K_N (int)(sizeof k_len / sizeof k_len[0])
#define K_GEN 12

static void run_set(eng_sched *s, su_coll *c, int32_t (*prompts)[128], int staggered) {
    char err[256];
    for (int i = 0; i < K_N; i++) {
        eng_sched_request r;
        su_request(c, i, &r, prompts[i], k_len[i], K_GEN);
        PT_EQ_INT(eng_sched_submit(s, &r, &c->reqs[i].id, err, sizeof err), 0);
        if (staggered && i % 2 == 0) {
            /* let the earlier ones reach decode before the next arrives */
            struct timespec ts = {0, 3000000};
            nanosleep(&ts, NULL);
        }
    }
    PT_EQ_INT(su_wait(c, K_N, 60000), 0);
}

PT_TEST(batched_equals_alone) {
    PT_ASSERT(model());
    static int32_t prompts[K_N][128];
    for (int i = 0; i < K_N; i++) su_tokens(prompts[i], k_len[i], NV, 100 + (uint64_t)i);
    char err[256];
    /* alone: one request at a time */
    su_coll alone;
    su_coll_init(&alone, K_N, NV);
    eng_sched *s = mk_sched(8, 512, 0);
    PT_ASSERT(s);
    for (int i = 0; i < K_N; i++) {
        eng_sched_request r;
        su_request(&alone, i, &r, prompts[i], k_len[i], K_GEN);
        PT_EQ_INT(eng_sched_submit(s, &r, &alone.reqs[i].id, err, sizeof err), 0);
        PT_EQ_INT(su_wait(&alone, i + 1, 20000), 0);
    }
    eng_sched_stats st;
    eng_sched_stats_get(s, &st);
    PT_EQ_INT(st.batch_hist[0], st.steps); /* every step had one sequence */
    eng_sched_free(s);
    /* compositions: (max_running, step_tokens, staggered) */
    const int comp[][3] = {{8, 512, 0}, {8, 20, 0}, {3, 7, 0}, {8, 24, 1}};
    for (int k = 0; k < 4; k++) {
        su_coll b;
        su_coll_init(&b, K_N, NV);
        s = mk_sched(comp[k][0], comp[k][1], 0);
        PT_ASSERT(s);
        run_set(s, &b, prompts, comp[k][2]);
        eng_sched_stats_get(s, &st);
        eng_sched_free(s);
        PT_ASSERT_MSG(st.steps > st.batch_hist[0], "composition %d never batched", k);
        for (int i = 0; i < K_N; i++) {
            PT_EQ_INT(b.reqs[i].res.finish, ENG_SCHED_LENGTH);
            PT_ASSERT(b.reqs[i].order_ok && !b.reqs[i].tokens_after_done);
            check_same(&alone.reqs[i], &b.reqs[i], K_GEN);
        }
        su_coll_free(&b);
    }
    su_coll_free(&alone);
}

PT_TEST(memory_pressure) {
    PT_ASSERT(model());
    enum { N = 10, P = 20, G = 60 }; /* short prompts, long replies: growth preempts */
    static int32_t prompts[N][P];
    char err[256];
    for (int i = 0; i < N; i++) su_tokens(prompts[i], P, NV, 500 + (uint64_t)i);
    /* reference tokens: each request alone with plenty of memory */
    su_coll ref;
    su_coll_init(&ref, N, 0);
    eng_sched *s = mk_sched(16, 512, 0);
    PT_ASSERT(s);
    for (int i = 0; i < N; i++) {
        eng_sched_request r;
        su_request(&ref, i, &r, prompts[i], P, G);
        PT_EQ_INT(eng_sched_submit(s, &r, &ref.reqs[i].id, err, sizeof err), 0);
    }
    PT_EQ_INT(su_wait(&ref, N, 60000), 0);
    eng_sched_free(s);
    /* Budget for about 3 requests' KV: each needs 5 global blocks. */
    const eng_kv_layout *l = eng_model_kv_layout(model());
    size_t per = l->block_bytes[0] + l->block_bytes[1]; /* local_share 1 below */
    size_t budget = per * 14;
    eng_sched_config cfg;
    eng_sched_config_default(&cfg);
    cfg.max_running = 16;
    cfg.step_tokens = 64;
    cfg.kv_budget_bytes = budget;
    cfg.local_share = 1.0;
    cfg.fairness_ms = 50;
    PT_EQ_INT(eng_sched_create(model(), &cfg, NULL, &s, err, sizeof err), 0);
    su_coll c;
    su_coll_init(&c, N, 0);
    for (int i = 0; i < N; i++) {
        eng_sched_request r;
        su_request(&c, i, &r, prompts[i], P, G);
        PT_EQ_INT(eng_sched_submit(s, &r, &c.reqs[i].id, err, sizeof err), 0);
    }
    PT_EQ_INT(su_wait(&c, N, 60000), 0);
    eng_sched_stats st;
    eng_sched_stats_get(s, &st);
    eng_sched_free(s);
    for (int k = 0; k < 2; k++) {
        PT_ASSERT(st.alloc_live_peak[k] <= st.blocks_total[k]);
        PT_EQ_INT(st.alloc_live[k], 0);
    }
    PT_ASSERT(st.blocks_total[0] < N * 5); /* the budget really was short */
    fprintf(stderr, "  pressure: %llu steps, %llu preemptions, peak %ld/%ld global blocks\n",
            (unsigned long long)st.steps, (unsigned long long)st.preemptions, st.alloc_live_peak[0],
            st.blocks_total[0]);
    for (int i = 0; i < N && getenv("SU_DEBUG"); i++)
        fprintf(stderr, "  req %d admit %llu queue %.1f ms preempt %d n %d\n", i,
                (unsigned long long)c.reqs[i].res.admit_seq, c.reqs[i].res.queue_ms,
                c.reqs[i].res.preemptions, c.reqs[i].res.n_tokens);
    PT_ASSERT(st.preemptions > 0); /* decode growth forced preemption */
    for (int i = 0; i < N; i++) {
        PT_EQ_INT(c.reqs[i].res.finish, ENG_SCHED_LENGTH);
        PT_EQ_MEM(c.reqs[i].tokens, ref.reqs[i].tokens, G * sizeof(int32_t));
    }
    /* Fairness: nobody submitted later was admitted before an earlier
     * request that had already waited the bound (plus one step). */
    int64_t slack = (int64_t)cfg.fairness_ms * 1000 + (int64_t)(st.step_ms_max * 1000) + 5000;
    for (int a = 0; a < N; a++)
        for (int b = 0; b < N; b++) {
            const eng_sched_result *ra = &c.reqs[a].res, *rb = &c.reqs[b].res;
            if (ra->submit_us < rb->submit_us && rb->admit_seq < ra->admit_seq)
                PT_ASSERT(rb->admit_us - ra->submit_us <= slack);
        }
    su_coll_free(&c);
    su_coll_free(&ref);
}

PT_TEST(deadline_and_cancel) {
    PT_ASSERT(model());
    enum { P = 50 };
    int32_t prompt[P];
    su_tokens(prompt, P, NV, 900);
    char err[256];
    eng_sched *s = mk_sched(8, 512, 0);
    PT_ASSERT(s);
    su_coll c;
    su_coll_init(&c, 5, 0);
    eng_sched_request r;
    /* 0: deadline already passed */
    su_request(&c, 0, &r, prompt, P, 10);
    r.deadline_us = eng_sched_now_us() - 1;
    PT_EQ_INT(eng_sched_submit(s, &r, &c.reqs[0].id, err, sizeof err), 0);
    /* 1: expires while generating */
    su_request(&c, 1, &r, prompt, P, 400);
    r.deadline_us = eng_sched_now_us() + 30000;
    PT_EQ_INT(eng_sched_submit(s, &r, &c.reqs[1].id, err, sizeof err), 0);
    /* 2: cancelled while generating; 4: stopped from outside */
    su_request(&c, 2, &r, prompt, P, 400);
    PT_EQ_INT(eng_sched_submit(s, &r, &c.reqs[2].id, err, sizeof err), 0);
    su_request(&c, 4, &r, prompt, P, 400);
    PT_EQ_INT(eng_sched_submit(s, &r, &c.reqs[4].id, err, sizeof err), 0);
    for (int i = 0; i < 20000; i++) { /* wait for their first tokens */
        pthread_mutex_lock(&c.mu);
        int n = c.reqs[2].n_tokens < c.reqs[4].n_tokens ? c.reqs[2].n_tokens : c.reqs[4].n_tokens;
        pthread_mutex_unlock(&c.mu);
        if (n >= 3) break;
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    PT_EQ_INT(eng_sched_cancel(s, c.reqs[2].id), 0);
    PT_EQ_INT(eng_sched_stop(s, c.reqs[4].id, -1), 0);
    PT_EQ_INT(eng_sched_stop(s, c.reqs[4].id, -1), ENG_SCHED_ENOENT); /* already finishing */
    /* 3: normal */
    su_request(&c, 3, &r, prompt, P, 5);
    PT_EQ_INT(eng_sched_submit(s, &r, &c.reqs[3].id, err, sizeof err), 0);
    PT_EQ_INT(su_wait(&c, 5, 30000), 0);
    PT_EQ_INT(eng_sched_cancel(s, c.reqs[2].id), ENG_SCHED_ENOENT);
    eng_sched_stats st;
    eng_sched_stats_get(s, &st);
    eng_sched_free(s);
    PT_EQ_INT(c.reqs[0].res.finish, ENG_SCHED_EXPIRED);
    PT_EQ_INT(c.reqs[0].res.n_tokens, 0);
    PT_EQ_INT(c.reqs[1].res.finish, ENG_SCHED_EXPIRED);
    PT_ASSERT(c.reqs[1].res.n_tokens < 400);
    PT_EQ_INT(c.reqs[2].res.finish, ENG_SCHED_CANCELLED);
    PT_ASSERT(c.reqs[2].res.n_tokens >= 3 && c.reqs[2].res.n_tokens < 400);
    PT_EQ_INT(c.reqs[3].res.finish, ENG_SCHED_LENGTH);
    PT_EQ_INT(c.reqs[4].res.finish, ENG_SCHED_STOP);
    PT_ASSERT(c.reqs[4].res.n_tokens >= 3 && c.reqs[4].res.n_tokens < 400);
    PT_EQ_INT(st.finish[ENG_SCHED_EXPIRED], 2);
    PT_EQ_INT(st.finish[ENG_SCHED_STOP], 1);
    PT_EQ_INT(st.finish[ENG_SCHED_CANCELLED], 1);
    PT_EQ_INT(st.alloc_live[0], 0); /* every block came back */
    PT_EQ_INT(st.alloc_live[1], 0);
    for (int i = 0; i < 5; i++) PT_EQ_INT(c.reqs[i].done, 1);
    su_coll_free(&c);
}

PT_TEST(close_cancels_or_drains) {
    PT_ASSERT(model());
    enum { N = 6, P = 30 };
    int32_t prompt[P];
    su_tokens(prompt, P, NV, 77);
    char err[256];
    for (int drain = 0; drain < 2; drain++) {
        eng_sched *s = mk_sched(4, 512, 0);
        PT_ASSERT(s);
        su_coll c;
        su_coll_init(&c, N, 0);
        for (int i = 0; i < N; i++) {
            eng_sched_request r;
            su_request(&c, i, &r, prompt, P, drain ? 20 : 300);
            PT_EQ_INT(eng_sched_submit(s, &r, &c.reqs[i].id, err, sizeof err), 0);
        }
        eng_sched_close(s, drain);
        eng_sched_request r;
        su_request(&c, 0, &r, prompt, P, 1);
        PT_EQ_INT(eng_sched_submit(s, &r, NULL, err, sizeof err), ENG_SCHED_ECLOSED);
        eng_sched_stats st;
        eng_sched_stats_get(s, &st);
        eng_sched_free(s);
        PT_EQ_INT(c.n_done, N); /* delivered before close returned */
        for (int i = 0; i < N; i++) {
            PT_EQ_INT(c.reqs[i].done, 1);
            if (drain) PT_EQ_INT(c.reqs[i].res.finish, ENG_SCHED_LENGTH);
            else PT_ASSERT(c.reqs[i].res.finish == ENG_SCHED_CANCELLED);
        }
        PT_EQ_INT(st.alloc_live[0], 0);
        su_coll_free(&c);
    }
}

/* eng_sched_hold: no step runs while held (requests are accepted and
 * wait), a cancel still ends a request, and the release lets the rest
 * finish as if never held. */
PT_TEST(hold_stops_steps) {
    PT_ASSERT(model());
    enum { P = 40 };
    int32_t prompt[P];
    su_tokens(prompt, P, NV, 31);
    char err[256];
    eng_sched *s = mk_sched(4, 512, 0);
    PT_ASSERT(s);
    su_coll c;
    su_coll_init(&c, 3, 0);
    eng_sched_hold(s, 1);
    eng_sched_request r;
    su_request(&c, 0, &r, prompt, P, 40);
    PT_EQ_INT(eng_sched_submit(s, &r, &c.reqs[0].id, err, sizeof err), 0);
    su_request(&c, 1, &r, prompt, P, 5);
    PT_EQ_INT(eng_sched_submit(s, &r, &c.reqs[1].id, err, sizeof err), 0);
    su_request(&c, 2, &r, prompt, P, 300);
    PT_EQ_INT(eng_sched_submit(s, &r, &c.reqs[2].id, err, sizeof err), 0);
    PT_EQ_INT(eng_sched_cancel(s, c.reqs[2].id), 0);
    PT_EQ_INT(su_wait(&c, 1, 30000), 0); /* the cancel ends it while held */
    struct timespec ts = {0, 50000000};
    nanosleep(&ts, NULL); /* 50 ms held: steps would have run by now */
    eng_sched_stats st;
    eng_sched_stats_get(s, &st);
    PT_EQ_INT((int)st.steps, 0);
    pthread_mutex_lock(&c.mu);
    PT_EQ_INT(c.reqs[0].n_tokens + c.reqs[1].n_tokens, 0);
    PT_EQ_INT(c.reqs[0].done + c.reqs[1].done, 0);
    PT_EQ_INT(c.reqs[2].done, 1);
    pthread_mutex_unlock(&c.mu);
    PT_EQ_INT(c.reqs[2].res.finish, ENG_SCHED_CANCELLED);
    eng_sched_hold(s, 0);
    PT_EQ_INT(su_wait(&c, 3, 30000), 0);
    eng_sched_free(s);
    PT_EQ_INT(c.reqs[0].res.finish, ENG_SCHED_LENGTH);
    PT_EQ_INT(c.reqs[0].res.n_tokens, 40);
    PT_EQ_INT(c.reqs[1].res.finish, ENG_SCHED_LENGTH);
    su_coll_free(&c);
}

PT_TEST(refuses_bad_requests) {
    PT_ASSERT(model());
    const eng_kv_layout *l = eng_model_kv_layout(model());
    eng_sched *s = mk_sched(4, 512, (l->block_bytes[0] + l->block_bytes[1]) * 4);
    PT_ASSERT(s);
    su_coll c;
    su_coll_init(&c, 1, 0);
    int32_t prompt[8] = {1, 2, 3, NV, 5, 6, 7, 8};
    eng_sched_request r;
    char err[256] = "";
    su_request(&c, 0, &r, prompt, 8, 4);
    PT_EQ_INT(eng_sched_submit(s, &r, NULL, err, sizeof err), ENG_SCHED_EINVAL);
    PT_ASSERT(strstr(err, "outside"));
    su_request(&c, 0, &r, prompt, 0, 4);
    PT_EQ_INT(eng_sched_submit(s, &r, NULL, err, sizeof err), ENG_SCHED_EINVAL);
    prompt[3] = 4;
    su_request(&c, 0, &r, prompt, 8, 200); /* 13 blocks > budget */
    PT_EQ_INT(eng_sched_submit(s, &r, NULL, err, sizeof err), ENG_SCHED_EINVAL);
    PT_ASSERT(strstr(err, "budget"));
    su_request(&c, 0, &r, prompt, 8, 4);
    r.sampling.top_p = -1;
    PT_EQ_INT(eng_sched_submit(s, &r, NULL, err, sizeof err), ENG_SCHED_EINVAL);
    eng_sched_free(s);
    PT_EQ_INT(c.n_done, 0);
    su_coll_free(&c);
    eng_model_free(g_model); /* last test */
    g_model = NULL;
}
