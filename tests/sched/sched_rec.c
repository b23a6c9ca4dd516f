/*
 * sched_rec.c -- see sched_rec.h.
 */
#include "sched_rec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static pthread_mutex_t sr_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t sr_cv = PTHREAD_COND_INITIALIZER;

void sr_init(sr_req *r, int n_vocab) {
    memset(r, 0, sizeof *r);
    r->order_ok = 1;
    r->stop_choice = -1;
    r->n_vocab = n_vocab;
    for (int c = 0; c < SR_MAXC && n_vocab; c++)
        r->logits[c] = calloc((size_t)n_vocab * SR_MAXT, sizeof(float));
}

void sr_free(sr_req *r) {
    for (int c = 0; c < SR_MAXC; c++) free(r->logits[c]);
    memset(r->logits, 0, sizeof r->logits);
}

static void sr_on_token(void *user, uint64_t id, const eng_sched_token *t) {
    sr_req *r = user;
    int stop = 0, keep = 0;
    pthread_mutex_lock(&sr_mu);
    if (r->done) r->tokens_after_done++;
    if (id != r->id && r->id) r->order_ok = 0;
    if (t->choice < 0 || t->choice >= SR_MAXC) {
        r->bad_choice = 1;
    } else {
        int c = t->choice;
        if (t->index != r->n[c]) r->order_ok = 0;
        if (r->n[c] < SR_MAXT) {
            sr_tok *x = &r->t[c][r->n[c]];
            x->tok = t->token;
            x->has_lp = t->has_logprobs;
            x->lp = t->logprob;
            x->n_top = t->n_top;
            if (t->n_top > 0) memcpy(x->top, t->top, (size_t)t->n_top * sizeof *x->top);
            if (r->n_vocab && t->logits && r->logits[c])
                memcpy(r->logits[c] + (size_t)r->n[c] * r->n_vocab, t->logits,
                       (size_t)r->n_vocab * sizeof(float));
            r->n[c]++;
        }
        if (c == r->stop_choice && r->n[c] == r->stop_after) stop = 1, keep = r->n[c];
    }
    pthread_mutex_unlock(&sr_mu);
    if (stop) eng_sched_stop_choice(r->stop_s, id, r->stop_choice, keep);
}

static void sr_on_done(void *user, uint64_t id, const eng_sched_result *res) {
    sr_req *r = user;
    pthread_mutex_lock(&sr_mu);
    (void)id;
    r->res = *res;
    r->res.tokens = NULL;
    r->res.error = NULL;
    r->res.choices = NULL;
    for (int c = 0; c < res->n_choices && c < SR_MAXC; c++) {
        const eng_sched_choice *ch = &res->choices[c];
        r->fin[c] = ch->finish;
        r->rn[c] = ch->n_tokens < SR_MAXT ? ch->n_tokens : SR_MAXT;
        if (r->rn[c]) memcpy(r->rt[c], ch->tokens, (size_t)r->rn[c] * sizeof(int32_t));
        snprintf(r->err[c], sizeof r->err[c], "%s", ch->error ? ch->error : "(null)");
    }
    r->done++;
    pthread_cond_broadcast(&sr_cv);
    pthread_mutex_unlock(&sr_mu);
}

void sr_bind(sr_req *r, eng_sched_request *q) {
    q->on_token = sr_on_token;
    q->on_done = sr_on_done;
    q->user = r;
    q->want_logits = r->n_vocab > 0;
}

int sr_wait(sr_req *r, int timeout_ms) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += timeout_ms / 1000;
    ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
    int rc = 0;
    pthread_mutex_lock(&sr_mu);
    while (!r->done && rc == 0) rc = pthread_cond_timedwait(&sr_cv, &sr_mu, &ts);
    int ok = r->done > 0;
    pthread_mutex_unlock(&sr_mu);
    return ok ? 0 : -1;
}
