/*
 * wk_status.c -- the worker's periodic status record (wk_status.h).
 */
#define _POSIX_C_SOURCE 200809L
#include "wk_status.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cm_kafka.h"
#include "cm_status.h"
#include "pl_time.h"
#include "wk_internal.h"

struct wk_status {
    wk_worker *w;             /* the worker (borrowed) */
    rd_kafka_t *p;            /* idempotent producer of the status records */
    const char *topic;        /* worker.topic.status */
    int64_t interval_ms;      /* worker.status_ms */
    char host[CM_STATUS_STR]; /* host name */
    pthread_t th;             /* the publishing thread */
    pthread_mutex_t mu;       /* guards stop */
    pthread_cond_t cv;        /* signalled by wk_status_stop */
    int stop;                 /* stop asked */
    uint64_t last_turns;      /* counters at the previous record */
    uint64_t last_pt;         /* ... prompt tokens */
    uint64_t last_ct;         /* ... cached tokens */
    double last_ms;           /* monotonic ms of the previous record (0: none) */
    int warned;               /* a failed delivery was logged (atomic) */
};

/* Failed deliveries are logged once: a status record is not worth more. */
static void wk_status_dr(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
    wk_status *s = opaque;
    (void)rk;
    if (m->err == RD_KAFKA_RESP_ERR__PURGE_QUEUE || m->err == RD_KAFKA_RESP_ERR__PURGE_INFLIGHT)
        return; /* dropped at stop */
    if (m->err && !__atomic_exchange_n(&s->warned, 1, __ATOMIC_RELAXED))
        wk_log("warn", "status_undelivered",
               "topic=%s err=%s (the fleet view lacks this worker's "
               "figures; turns are not affected; create it with parley topics)",
               s->topic, rd_kafka_err2name(m->err));
}

static void wk_status_error_cb(rd_kafka_t *rk, int err, const char *reason, void *opaque) {
    wk_status *s = opaque;
    rd_kafka_resp_err_t e = (rd_kafka_resp_err_t)err;
    if (e == RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN || e == RD_KAFKA_RESP_ERR__TRANSPORT) return;
    if (!__atomic_exchange_n(&s->warned, 1, __ATOMIC_RELAXED))
        wk_log("warn", "status_error", "client=%s err=%s reason=\"%.300s\"", rd_kafka_name(rk),
               rd_kafka_err2name(e), reason ? reason : "");
}

/* The worker's state now. */
static const char *wk_status_state(wk_worker *w, int final) {
    if (final) return "stopped";
    if (w->halt.stop_req) return "draining";
    if (__atomic_load_n(&w->met.ctr.pause_why, __ATOMIC_RELAXED)) return "paused";
    return "running";
}

/* Produce one record (dropped when the queue is full). */
static void wk_status_publish(wk_status *s, int final) {
    wk_worker *w = s->w;
    cm_status r;
    memset(&r, 0, sizeof r);
    snprintf(r.worker, sizeof r.worker, "%s", w->id);
    snprintf(r.host, sizeof r.host, "%s", s->host);
    snprintf(r.model, sizeof r.model, "%s", w->eng.model_name);
    snprintf(r.state, sizeof r.state, "%s", wk_status_state(w, final));
    r.ts_ms = (int64_t)pl_unix_ms();
    r.interval_ms = s->interval_ms;
    r.turns = __atomic_load_n(&w->met.ctr.turns_done, __ATOMIC_RELAXED);
    r.prompt_tokens = __atomic_load_n(&w->met.ctr.prompt_tokens, __ATOMIC_RELAXED);
    r.cached_tokens = __atomic_load_n(&w->met.ctr.cached_tokens, __ATOMIC_RELAXED);
    double now = pl_mono_msf();
    r.cache_share = -1;
    if (s->last_ms > 0 && now > s->last_ms) {
        r.turns_per_s = (double)(r.turns - s->last_turns) * 1000.0 / (now - s->last_ms);
        uint64_t pt = r.prompt_tokens - s->last_pt, ct = r.cached_tokens - s->last_ct;
        if (pt) r.cache_share = ct >= pt ? 1.0 : (double)ct / (double)pt;
    }
    s->last_turns = r.turns;
    s->last_pt = r.prompt_tokens;
    s->last_ct = r.cached_tokens;
    s->last_ms = now;
    size_t len;
    char *txt = cm_status_encode(&r, &len);
    if (!txt) return;
    rd_kafka_producev(s->p, RD_KAFKA_V_TOPIC(s->topic), RD_KAFKA_V_KEY(w->id, strlen(w->id)),
                      RD_KAFKA_V_VALUE(txt, len), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                      RD_KAFKA_V_OPAQUE(NULL), RD_KAFKA_V_END);
    free(txt); /* a produce error (queue full, unknown topic) drops this record */
}

static void *wk_status_main(void *arg) {
    wk_status *s = arg;
    pthread_mutex_lock(&s->mu);
    while (!s->stop) {
        pthread_mutex_unlock(&s->mu);
        wk_status_publish(s, 0);
        rd_kafka_poll(s->p, 0);
        pthread_mutex_lock(&s->mu);
        struct timespec until = pl_deadline_ts(s->interval_ms);
        while (!s->stop && pthread_cond_timedwait(&s->cv, &s->mu, &until) != ETIMEDOUT) {
        }
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

int wk_status_start(wk_worker *w, wk_status **out, char *err, size_t errlen) {
    *out = NULL;
    const char *topic = cm_config_str(w->cfg, "worker.topic.status");
    if (!*topic) return 0;
    wk_status *s = calloc(1, sizeof *s);
    if (!s) return pl_errf(err, errlen, WK_ENOMEM, "out of memory");
    s->w = w;
    s->topic = topic;
    s->interval_ms = cm_config_int(w->cfg, "worker.status_ms");
    gethostname(s->host, sizeof s->host - 1);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    /* a small queue and a short delivery timeout: records are dropped, not
     * hoarded, while the cluster is away */
    const char *defs[] = {
        "linger.ms", "50", "queue.buffering.max.messages", "64", "message.timeout.ms",
        "10000",     NULL};
    cm_kafka_spec sp = {.role = CM_KAFKA_PRODUCER,
                        .client_id = w->id,
                        .defs = defs,
                        .error_cb = wk_status_error_cb,
                        .opaque = s,
                        .dr_msg_cb = wk_status_dr};
    cm_kafka *k = NULL;
    int rc = cm_kafka_new(w->cfg, CM_KAFKA_GROUP | CM_KAFKA_PRODUCER, "worker", &k, err, errlen);
    if (!rc) rc = cm_kafka_client_new(k, &sp, "status producer", &s->p, err, errlen);
    cm_kafka_free(k);
    if (rc) {
        rc = pl_err_recode(rc, PL_ERR_WK, WK_EKAFKA);
        goto err;
    }
    if (pthread_create(&s->th, NULL, wk_status_main, s) != 0) {
        rc = pl_errf(err, errlen, WK_ENOMEM, "cannot start the status thread");
        goto err;
    }
    *out = s;
    return 0;
err:
    if (s->p) rd_kafka_destroy(s->p);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    free(s);
    return rc;
}

void wk_status_stop(wk_status *s) {
    if (!s) return;
    pthread_mutex_lock(&s->mu);
    s->stop = 1;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->th, NULL);
    wk_status_publish(s, 1);
    if (rd_kafka_flush(s->p, 1000)) { /* undeliverable: drop it quietly */
        rd_kafka_purge(s->p, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
        rd_kafka_poll(s->p, 0);
    }
    rd_kafka_destroy(s->p);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    free(s);
}
