/*
 * gw_hub.c -- producer, reader thread and the turn_id -> waiter table of
 * the gateway (see gw_hub.h).
 */
#define _POSIX_C_SOURCE 200809L
#include "gw_cmd.h" /* GW_E* */
#include "gw_hub.h"
#include "pl_hash.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "oa_openai.h"
#include "cm_startup.h"
#include "pl_err.h"
#include "pl_time.h"

#define GW_BUCKETS 4096 /* hash buckets of the waiter table */

struct gw_wait {
    char *turn_id;         /* key (malloc'd) */
    char *conv_id;         /* the turn's conversation id (malloc'd): a cancel's key */
    pthread_cond_t cv;     /* signalled on news */
    int has_attempt;       /* an attempt was chosen */
    uint64_t attempt;      /* the attempt whose chunks are kept */
    uint64_t next_seq;     /* next chunk seq expected of it */
    int produced;          /* it delivered text or logprobs (no switching attempts now) */
    gw_piece *head, *tail; /* its pieces not yet taken by gw_wait_poll, in seq order */
    sch_result *result;    /* the TurnResult once arrived (owned) */
    sch_dead *dead;        /* the DeadLetter a synthetic error result points into */
    gw_wait *next;         /* bucket chain */
};

struct gw_hub {
    rd_kafka_t *producer;        /* idempotent turns producer */
    rd_kafka_t *reader;          /* tokens + responses, read_committed */
    cm_topics topics;            /* topic names */
    char topics_dlq[256];        /* DLQ topic watched for refused turns ("" none) */
    pthread_t thread;            /* reader thread */
    int started;                 /* thread running */
    atomic_int stop;             /* ask the thread to end */
    pthread_mutex_t mu;          /* guards the table and every waiter */
    gw_wait *bucket[GW_BUCKETS]; /* waiters by turn_id hash */
    size_t n_wait;               /* waiters registered */
};

static size_t gw_bucket_of(const char *id, size_t n) {
    return (size_t)(pl_fnv1a64(PL_FNV64_SEED, id, n) % GW_BUCKETS);
}

/* Under mu: the waiter of turn id (n bytes) or NULL. */
static gw_wait *gw_find(gw_hub *h, const char *id, size_t n) {
    for (gw_wait *w = h->bucket[gw_bucket_of(id, n)]; w; w = w->next)
        if (strlen(w->turn_id) == n && !memcmp(w->turn_id, id, n)) return w;
    return NULL;
}

void gw_pieces_free(gw_piece *p) {
    while (p) {
        gw_piece *n = p->next;
        json_decref(p->logprobs);
        free(p);
        p = n;
    }
}

/* Under mu: take one chunk for w. */
static void gw_on_chunk(gw_wait *w, const sch_chunk *c) {
    if (!w->has_attempt || (w->attempt != c->attempt && !w->produced)) {
        w->has_attempt = 1;
        w->attempt = c->attempt;
        w->next_seq = 0;
        gw_pieces_free(w->head); /* all empty: nothing was produced */
        w->head = w->tail = NULL;
    }
    if (c->attempt != w->attempt || c->seq != w->next_seq)
        return; /* another attempt, a gap or a duplicate */
    w->next_seq++;
    if (!c->text.len && !c->n_logprobs) return;
    gw_piece *p = calloc(1, sizeof *p + c->text.len + 1);
    if (!p) return; /* the result still carries the whole reply */
    p->index = (int)c->index;
    p->text = (char *)(p + 1);
    memcpy(p->text, c->text.ptr, c->text.len);
    p->len = c->text.len;
    if (c->n_logprobs) p->logprobs = oa_logprobs_content(c->logprobs, c->n_logprobs);
    if (w->tail) w->tail->next = p;
    else w->head = p;
    w->tail = p;
    w->produced = 1;
    pthread_cond_signal(&w->cv);
}

/* A DeadLetter naming a waiting turn: the worker refused it before work
 * (unknown model, context overflow...); answer the request with an error
 * result made from it, unless the error TurnResult the worker writes in
 * the same transaction came first (the later one finds w->result set). */
static void gw_on_dead(gw_hub *h, const rd_kafka_message_t *m) {
    char err[PL_ERR_LEN];
    sch_dead *d = malloc(sizeof *d);
    sch_result *r = malloc(sizeof *r);
    if (!d || !r || sch_dead_decode(m->payload, m->len, NULL, d, err, sizeof err) != 0) {
        free(d);
        free(r);
        return;
    }
    pthread_mutex_lock(&h->mu);
    gw_wait *w = d->turn_id.ptr ? gw_find(h, d->turn_id.ptr, d->turn_id.len) : NULL;
    if (w && !w->result) {
        sch_result_init(r);
        r->conversation_id = d->conversation_id;
        r->turn_id = d->turn_id;
        r->finish_reason = SCH_FINISH_ERROR;
        r->has_error = true;
        r->error_code = d->error_code;
        r->error_name = d->error_name;
        r->error_message = d->reason;
        w->result = r;
        w->dead = d;
        d = NULL;
        r = NULL;
        pthread_cond_signal(&w->cv);
    }
    pthread_mutex_unlock(&h->mu);
    if (d) {
        sch_dead_free(d);
        free(d);
    }
    free(r);
}

static void gw_on_record(gw_hub *h, const rd_kafka_message_t *m) {
    char err[PL_ERR_LEN];
    const char *topic = rd_kafka_topic_name(m->rkt);
    if (!strcmp(topic, h->topics.tokens)) {
        sch_chunk c;
        if (sch_chunk_decode(m->payload, m->len, NULL, &c, err, sizeof err) != 0) return;
        pthread_mutex_lock(&h->mu);
        gw_wait *w = gw_find(h, c.turn_id.ptr, c.turn_id.len);
        if (w && !w->result) gw_on_chunk(w, &c);
        pthread_mutex_unlock(&h->mu);
        sch_chunk_free(&c);
        return;
    }
    if (h->topics_dlq[0] && !strcmp(topic, h->topics_dlq)) {
        gw_on_dead(h, m);
        return;
    }
    sch_result *r = malloc(sizeof *r);
    if (!r) return;
    if (sch_result_decode(m->payload, m->len, NULL, r, err, sizeof err) != 0) {
        free(r);
        return;
    }
    pthread_mutex_lock(&h->mu);
    gw_wait *w = gw_find(h, r->turn_id.ptr, r->turn_id.len);
    if (w && !w->result) {
        w->result = r;
        r = NULL;
        pthread_cond_signal(&w->cv);
    }
    pthread_mutex_unlock(&h->mu);
    if (r) {
        sch_result_free(r);
        free(r);
    }
}

static void *gw_hub_main(void *arg) {
    gw_hub *h = arg;
    while (!atomic_load(&h->stop)) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(h->reader, 50);
        if (m) {
            if (!m->err && m->rkt) gw_on_record(h, m);
            rd_kafka_message_destroy(m);
        }
        rd_kafka_poll(h->producer, 0);
    }
    return NULL;
}

int gw_hub_new(const gw_hub_conf *conf, gw_hub **out, char *err, size_t errlen) {
    *out = NULL;
    gw_hub *h = calloc(1, sizeof *h);
    if (!h) {
        return pl_errf(err, errlen, GW_ENOMEM, "out of memory");
    }
    pthread_mutex_init(&h->mu, NULL);
    h->topics = conf->topics;
    snprintf(h->topics_dlq, sizeof h->topics_dlq, "%s", conf->dlq ? conf->dlq : "");
    const char *read[3] = {conf->topics.tokens, conf->topics.responses, h->topics_dlq};
    if (!(h->producer =
              cm_producer_new(conf->kafka, conf->topics.turns, conf->timeout_ms, err, errlen)) ||
        !(h->reader = cm_reader_new_topics(conf->kafka, read, h->topics_dlq[0] ? 3 : 2, 1,
                                           cm_startup_left_ms(), err, errlen)))
        goto err;
    if (pthread_create(&h->thread, NULL, gw_hub_main, h) != 0) {
        pl_errf(err, errlen, GW_EKAFKA, "cannot start the reader thread");
        goto err;
    }
    h->started = 1;
    *out = h;
    return 0;
err:
    gw_hub_free(h);
    return -1;
}

void gw_hub_flush(gw_hub *h, int timeout_ms) {
    if (h && h->producer) rd_kafka_flush(h->producer, timeout_ms);
}

void gw_hub_free(gw_hub *h) {
    if (!h) return;
    if (h->started) {
        atomic_store(&h->stop, 1);
        pthread_join(h->thread, NULL);
    }
    cm_reader_free(h->reader);
    if (h->producer) {
        rd_kafka_flush(h->producer, 2000);
        rd_kafka_destroy(h->producer);
    }
    for (size_t b = 0; b < GW_BUCKETS; b++)
        while (h->bucket[b]) {
            gw_wait *w = h->bucket[b];
            h->bucket[b] = w->next;
            w->next = NULL;
            h->n_wait++; /* gw_hub_release decrements */
            gw_hub_release(h, w);
        }
    pthread_mutex_destroy(&h->mu);
    free(h);
}

gw_wait *gw_hub_send(gw_hub *h, const sch_turn *t, const char *ns_header, char *err,
                     size_t errlen) {
    gw_wait *w = calloc(1, sizeof *w);
    if (!w || !(w->turn_id = strndup(t->turn_id.ptr, t->turn_id.len)) ||
        !(w->conv_id = strndup(t->conversation_id.ptr, t->conversation_id.len))) {
        if (w) free(w->turn_id);
        free(w);
        pl_errf(err, errlen, GW_ENOMEM, "out of memory");
        return NULL;
    }
    pthread_cond_init(&w->cv, NULL);
    size_t b = gw_bucket_of(t->turn_id.ptr, t->turn_id.len);
    pthread_mutex_lock(&h->mu);
    w->next = h->bucket[b];
    h->bucket[b] = w;
    h->n_wait++;
    pthread_mutex_unlock(&h->mu);
    if (cm_turn_send_ns(h->producer, h->topics.turns, t, ns_header, err, errlen) != 0) {
        gw_hub_release(h, w);
        return NULL;
    }
    return w;
}

int gw_wait_poll(gw_hub *h, gw_wait *w, int timeout_ms, gw_piece **pieces, const sch_result **res) {
    struct timespec until = pl_deadline_ts(timeout_ms);
    *pieces = NULL;
    *res = NULL;
    pthread_mutex_lock(&h->mu);
    while (!w->result && !w->head)
        if (pthread_cond_timedwait(&w->cv, &h->mu, &until) == ETIMEDOUT) break;
    *pieces = w->head;
    w->head = w->tail = NULL;
    *res = w->result;
    pthread_mutex_unlock(&h->mu);
    return *res != NULL;
}

void gw_hub_release(gw_hub *h, gw_wait *w) {
    if (!w) return;
    pthread_mutex_lock(&h->mu);
    gw_wait **pp = &h->bucket[gw_bucket_of(w->turn_id, strlen(w->turn_id))];
    while (*pp && *pp != w) pp = &(*pp)->next;
    if (*pp) *pp = w->next;
    h->n_wait--;
    pthread_mutex_unlock(&h->mu);
    pthread_cond_destroy(&w->cv);
    if (w->dead) {
        sch_dead_free(w->dead);
        free(w->dead);
        free(w->result); /* points into dead */
    } else if (w->result) {
        sch_result_free(w->result);
        free(w->result);
    }
    gw_pieces_free(w->head);
    free(w->turn_id);
    free(w->conv_id);
    free(w);
}

int gw_hub_cancel(gw_hub *h, gw_wait *w, const char *reason, char *err, size_t errlen) {
    if (!w) return 0;
    pthread_mutex_lock(&h->mu);
    int answered = w->result != NULL;
    pthread_mutex_unlock(&h->mu);
    if (answered) return 0;
    if (cm_cancel_send(h->producer, h->topics.turns, w->conv_id, w->turn_id, reason, err, errlen) !=
        0)
        return -1;
    return 1;
}

size_t gw_hub_inflight(gw_hub *h) {
    pthread_mutex_lock(&h->mu);
    size_t n = h->n_wait;
    pthread_mutex_unlock(&h->mu);
    return n;
}
