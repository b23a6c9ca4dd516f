/*
 * gw_fleet.c -- the fleet view's Kafka side (see gw_fleet.h): a thread
 * that reads the status topic and refreshes the group, offsets and lag
 * with the admin API, and the JSON answer built from what it keeps.
 */
#define _POSIX_C_SOURCE 200809L
#include "gw_fleet.h"

#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cm_status.h"
#include "gw_cmd.h"
#include "oa_openai.h"
#include "pl_err.h"
#include "pl_time.h"

/* One history sample. */
typedef struct gw_fleet_sample {
    int64_t ts_ms; /* when (unix ms) */
    int64_t lag;   /* total lag of the turns topic */
    double tps;    /* turns/s of the fleet since the previous sample */
} gw_fleet_sample;

struct gw_fleet {
    gw_fleet_conf c;                     /* configuration (strings borrowed) */
    rd_kafka_t *rk;                      /* reader: status topic and admin queries (thread) */
    rd_kafka_queue_t *q;                 /* admin results (thread) */
    int assigned;                        /* status topic assigned (thread) */
    pthread_t th;                        /* the fleet's thread */
    pthread_mutex_t mu;                  /* guards everything below */
    int stop;                            /* gw_fleet_free asked the thread to end */
    json_t *snap;                        /* latest admin result: group, members, partitions */
    int64_t snap_ms;                     /* when it was taken (unix ms; 0 none) */
    char err[512];                       /* why the latest refresh failed ("" it did not) */
    cm_status *st;                       /* latest status record per worker */
    size_t n_st;                         /* entries in st */
    unsigned long long bad;              /* status records refused */
    gw_fleet_sample hist[GW_FLEET_HIST]; /* history ring */
    size_t n_hist;                       /* samples taken (ring index = n_hist % GW_FLEET_HIST) */
    int last_cb_err;                     /* the error callback's latest code (logged once each) */
    uint64_t *seen_turns;                /* per st entry: its `turns` at the previous sample */
};

/* ---- status topic ------------------------------------------------------- */

/* Assign every partition of the status topic from the beginning (once it
 * exists). */
static void gw_fleet_assign(gw_fleet *f) {
    if (f->assigned || !*f->c.status) return;
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(f->rk, f->c.status, NULL);
    const struct rd_kafka_metadata *md = NULL;
    if (rkt && !rd_kafka_metadata(f->rk, 0, rkt, &md, GW_FLEET_TIMEOUT_MS) && md->topic_cnt == 1 &&
        !md->topics[0].err && md->topics[0].partition_cnt > 0) {
        rd_kafka_topic_partition_list_t *l =
            rd_kafka_topic_partition_list_new(md->topics[0].partition_cnt);
        for (int i = 0; i < md->topics[0].partition_cnt; i++)
            rd_kafka_topic_partition_list_add(l, f->c.status, md->topics[0].partitions[i].id)
                ->offset = RD_KAFKA_OFFSET_BEGINNING;
        f->assigned = !rd_kafka_assign(f->rk, l);
        rd_kafka_topic_partition_list_destroy(l);
    }
    if (md) rd_kafka_metadata_destroy(md);
    if (rkt) rd_kafka_topic_destroy(rkt);
}

/* Keep one status record (a tombstone removes its worker). */
static void gw_fleet_status(gw_fleet *f, const rd_kafka_message_t *m) {
    cm_status s;
    char err[256];
    pthread_mutex_lock(&f->mu);
    if (!m->payload) { /* tombstone: key = worker id */
        for (size_t i = 0; i < f->n_st; i++)
            if (m->key && strlen(f->st[i].worker) == m->key_len &&
                !memcmp(f->st[i].worker, m->key, m->key_len)) {
                f->st[i] = f->st[--f->n_st];
                f->seen_turns[i] = f->seen_turns[f->n_st];
            }
    } else if (cm_status_parse(m->payload, m->len, &s, err, sizeof err) != 0) {
        f->bad++;
    } else {
        size_t i = 0;
        while (i < f->n_st && strcmp(f->st[i].worker, s.worker)) i++;
        if (i < f->n_st) f->st[i] = s;
        else if (f->n_st < GW_FLEET_MAX_WORKERS) {
            f->seen_turns[f->n_st] = s.turns; /* counted from its next record on */
            f->st[f->n_st++] = s;
        } else f->bad++;
    }
    pthread_mutex_unlock(&f->mu);
}

/* ---- admin queries ------------------------------------------------------ */

/* Wait for the result of one admin query: the event (caller destroys) or
 * NULL with err. */
static rd_kafka_event_t *gw_fleet_wait(gw_fleet *f, const char *what, char *err, size_t errlen) {
    rd_kafka_event_t *ev = NULL;
    int stop = 0; /* polled in slices, so gw_fleet_free never waits for a slow cluster */
    for (int t = 0; !ev && !stop && t < GW_FLEET_TIMEOUT_MS + 1000; t += 100) {
        ev = rd_kafka_queue_poll(f->q, 100);
        pthread_mutex_lock(&f->mu);
        stop = f->stop;
        pthread_mutex_unlock(&f->mu);
    }
    if (!ev) {
        snprintf(err, errlen, "%s: no answer from Kafka within %d ms", what, GW_FLEET_TIMEOUT_MS);
        return NULL;
    }
    if (rd_kafka_event_error(ev)) {
        snprintf(err, errlen, "%s: %s", what, rd_kafka_event_error_string(ev));
        rd_kafka_event_destroy(ev);
        return NULL;
    }
    return ev;
}

static rd_kafka_AdminOptions_t *gw_fleet_opts(gw_fleet *f, rd_kafka_admin_op_t op) {
    rd_kafka_AdminOptions_t *ao = rd_kafka_AdminOptions_new(f->rk, op);
    if (ao) rd_kafka_AdminOptions_set_request_timeout(ao, GW_FLEET_TIMEOUT_MS, NULL, 0);
    return ao;
}

/* The group's members: a JSON array, *state its state's name; NULL with
 * err. */
static json_t *gw_fleet_members(gw_fleet *f, const char **state, char *err, size_t errlen) {
    const char *groups[1] = {f->c.group};
    rd_kafka_AdminOptions_t *ao = gw_fleet_opts(f, RD_KAFKA_ADMIN_OP_DESCRIBECONSUMERGROUPS);
    rd_kafka_DescribeConsumerGroups(f->rk, groups, 1, ao, f->q);
    rd_kafka_AdminOptions_destroy(ao);
    rd_kafka_event_t *ev = gw_fleet_wait(f, "DescribeConsumerGroups", err, errlen);
    if (!ev) return NULL;
    size_t n = 0;
    const rd_kafka_ConsumerGroupDescription_t **g = rd_kafka_DescribeConsumerGroups_result_groups(
        rd_kafka_event_DescribeConsumerGroups_result(ev), &n);
    json_t *out = NULL;
    if (n != 1) {
        snprintf(err, errlen, "DescribeConsumerGroups: %zu groups in the answer", n);
    } else if (rd_kafka_ConsumerGroupDescription_error(g[0])) {
        snprintf(err, errlen, "DescribeConsumerGroups: %s",
                 rd_kafka_error_string(rd_kafka_ConsumerGroupDescription_error(g[0])));
    } else {
        *state = rd_kafka_consumer_group_state_name(rd_kafka_ConsumerGroupDescription_state(g[0]));
        out = json_array();
        for (size_t i = 0; out && i < rd_kafka_ConsumerGroupDescription_member_count(g[0]); i++) {
            const rd_kafka_MemberDescription_t *m =
                rd_kafka_ConsumerGroupDescription_member(g[0], i);
            const rd_kafka_topic_partition_list_t *a =
                rd_kafka_MemberAssignment_partitions(rd_kafka_MemberDescription_assignment(m));
            json_t *parts = json_array();
            for (int k = 0; a && k < a->cnt; k++)
                if (!strcmp(a->elems[k].topic, f->c.turns))
                    json_array_append_new(parts, json_integer(a->elems[k].partition));
            const char *host = rd_kafka_MemberDescription_host(m); /* Kafka's "/1.2.3.4" */
            host += host && host[0] == '/';
            json_array_append_new(out,
                                  json_pack("{ss ss ss so}", "client_id",
                                            rd_kafka_MemberDescription_client_id(m), "member_id",
                                            rd_kafka_MemberDescription_consumer_id(m), "host",
                                            host ? host : "", "partitions", parts));
        }
    }
    rd_kafka_event_destroy(ev);
    return out;
}

/* The group's committed offset of each of the n partitions (-1: none). */
static int gw_fleet_committed(gw_fleet *f, int n, int64_t *off, char *err, size_t errlen) {
    for (int i = 0; i < n; i++) off[i] = -1;
    rd_kafka_ListConsumerGroupOffsets_t *req =
        rd_kafka_ListConsumerGroupOffsets_new(f->c.group, NULL);
    rd_kafka_AdminOptions_t *ao = gw_fleet_opts(f, RD_KAFKA_ADMIN_OP_LISTCONSUMERGROUPOFFSETS);
    rd_kafka_ListConsumerGroupOffsets(f->rk, &req, 1, ao, f->q);
    rd_kafka_AdminOptions_destroy(ao);
    rd_kafka_ListConsumerGroupOffsets_destroy(req);
    rd_kafka_event_t *ev = gw_fleet_wait(f, "ListConsumerGroupOffsets", err, errlen);
    if (!ev) return -1;
    size_t ng = 0;
    const rd_kafka_group_result_t **g = rd_kafka_ListConsumerGroupOffsets_result_groups(
        rd_kafka_event_ListConsumerGroupOffsets_result(ev), &ng);
    int rc = 0;
    if (ng == 1 && rd_kafka_group_result_error(g[0])) {
        snprintf(err, errlen, "ListConsumerGroupOffsets: %s",
                 rd_kafka_error_string(rd_kafka_group_result_error(g[0])));
        rc = -1;
    }
    const rd_kafka_topic_partition_list_t *l =
        ng == 1 ? rd_kafka_group_result_partitions(g[0]) : NULL;
    for (int k = 0; !rc && l && k < l->cnt; k++)
        if (!strcmp(l->elems[k].topic, f->c.turns) && l->elems[k].partition >= 0 &&
            l->elems[k].partition < n && !l->elems[k].err)
            off[l->elems[k].partition] = l->elems[k].offset;
    rd_kafka_event_destroy(ev);
    return rc;
}

/* The latest (spec RD_KAFKA_OFFSET_SPEC_LATEST) or earliest offset of
 * each of the n partitions. */
static int gw_fleet_offsets(gw_fleet *f, int n, int64_t spec, int64_t *off, char *err,
                            size_t errlen) {
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(n);
    for (int i = 0; i < n; i++) {
        rd_kafka_topic_partition_list_add(l, f->c.turns, i)->offset = spec;
        off[i] = -1;
    }
    rd_kafka_AdminOptions_t *ao = gw_fleet_opts(f, RD_KAFKA_ADMIN_OP_LISTOFFSETS);
    rd_kafka_ListOffsets(f->rk, l, ao, f->q);
    rd_kafka_AdminOptions_destroy(ao);
    rd_kafka_topic_partition_list_destroy(l);
    rd_kafka_event_t *ev = gw_fleet_wait(f, "ListOffsets", err, errlen);
    if (!ev) return -1;
    size_t ni = 0;
    const rd_kafka_ListOffsetsResultInfo_t **inf =
        rd_kafka_ListOffsets_result_infos(rd_kafka_event_ListOffsets_result(ev), &ni);
    int rc = 0;
    for (size_t i = 0; i < ni; i++) {
        const rd_kafka_topic_partition_t *tp =
            rd_kafka_ListOffsetsResultInfo_topic_partition(inf[i]);
        if (tp->err) {
            snprintf(err, errlen, "ListOffsets %s [%d]: %s", tp->topic, (int)tp->partition,
                     rd_kafka_err2str(tp->err));
            rc = -1;
        } else if (tp->partition >= 0 && tp->partition < n) {
            off[tp->partition] = tp->offset;
        }
    }
    rd_kafka_event_destroy(ev);
    return rc;
}

/* The turns topic's partition count, or -1 with err. */
static int gw_fleet_nparts(gw_fleet *f, char *err, size_t errlen) {
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(f->rk, f->c.turns, NULL);
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_resp_err_t e =
        rkt ? rd_kafka_metadata(f->rk, 0, rkt, &md, GW_FLEET_TIMEOUT_MS) : RD_KAFKA_RESP_ERR__FAIL;
    int n = -1;
    if (!e && md->topic_cnt == 1 && md->topics[0].err) e = md->topics[0].err;
    if (e) snprintf(err, errlen, "metadata of %s: %s", f->c.turns, rd_kafka_err2str(e));
    else n = md->topics[0].partition_cnt;
    if (md) rd_kafka_metadata_destroy(md);
    if (rkt) rd_kafka_topic_destroy(rkt);
    return n;
}

/* Owner (client id) of partition p among the members, or NULL. */
static const char *gw_fleet_owner(json_t *members, int p) {
    size_t i, k;
    json_t *m, *x;
    json_array_foreach(members, i, m) {
        json_array_foreach(json_object_get(m, "partitions"), k, x) {
            if (json_integer_value(x) == p)
                return json_string_value(json_object_get(m, "client_id"));
        }
    }
    return NULL;
}

/* One refresh: the admin queries, then the snapshot and a history sample. */
static void gw_fleet_refresh(gw_fleet *f) {
    char err[512] = "";
    const char *state = "";
    int64_t *end = NULL, *com = NULL, *low = NULL;
    json_t *members = NULL, *parts = NULL;
    int n = gw_fleet_nparts(f, err, sizeof err);
    if (n < 0 || !(members = gw_fleet_members(f, &state, err, sizeof err))) goto out;
    size_t nn = n > 0 ? (size_t)n : 1;
    end = calloc(nn, sizeof *end);
    com = calloc(nn, sizeof *com);
    low = calloc(nn, sizeof *low);
    if (!end || !com || !low) {
        snprintf(err, sizeof err, "out of memory");
        goto out;
    }
    if (gw_fleet_committed(f, n, com, err, sizeof err) ||
        gw_fleet_offsets(f, n, RD_KAFKA_OFFSET_SPEC_LATEST, end, err, sizeof err))
        goto out;
    int need_low = 0;
    for (int i = 0; i < n; i++) need_low |= com[i] < 0;
    if (need_low && gw_fleet_offsets(f, n, RD_KAFKA_OFFSET_SPEC_EARLIEST, low, err, sizeof err))
        goto out;
    parts = json_array();
    int64_t total = 0;
    for (int i = 0; i < n; i++) {
        int64_t from = com[i] >= 0 ? com[i] : low[i], lag = end[i] - from;
        if (lag < 0) lag = 0;
        total += lag;
        const char *owner = gw_fleet_owner(members, i);
        json_array_append_new(
            parts, json_pack("{si sI so sI so}", "partition", i, "end", (json_int_t)end[i],
                             "committed", com[i] >= 0 ? json_integer(com[i]) : json_null(), "lag",
                             (json_int_t)lag, "owner", owner ? json_string(owner) : json_null()));
    }
    json_t *snap =
        json_pack("{ss ss so so sI}", "group_state", state, "topic", f->c.turns, "members", members,
                  "partitions", parts, "total_lag", (json_int_t)total);
    members = parts = NULL;
    int64_t now = pl_unix_ms();
    pthread_mutex_lock(&f->mu);
    /* throughput from the workers' turn counters between two samples (not
     * the records' own rates, which a sample could miss between records) */
    uint64_t done = 0;
    for (size_t i = 0; i < f->n_st; i++) {
        uint64_t t = f->st[i].turns, was = f->seen_turns[i];
        done += t >= was ? t - was : t; /* a restarted worker counts anew */
        f->seen_turns[i] = t;
    }
    const gw_fleet_sample *prev = f->n_hist ? &f->hist[(f->n_hist - 1) % GW_FLEET_HIST] : NULL;
    double tps =
        prev && now > prev->ts_ms ? (double)done * 1000.0 / (double)(now - prev->ts_ms) : 0;
    json_decref(f->snap);
    f->snap = snap;
    f->snap_ms = now;
    f->hist[f->n_hist++ % GW_FLEET_HIST] = (gw_fleet_sample){now, total, tps};
    pthread_mutex_unlock(&f->mu);
out:
    pthread_mutex_lock(&f->mu);
    snprintf(f->err, sizeof f->err, "%s", err);
    pthread_mutex_unlock(&f->mu);
    json_decref(members);
    json_decref(parts);
    free(end);
    free(com);
    free(low);
}

static void *gw_fleet_main(void *arg) {
    gw_fleet *f = arg;
    double next = 0;
    for (;;) {
        pthread_mutex_lock(&f->mu);
        int stop = f->stop;
        pthread_mutex_unlock(&f->mu);
        if (stop) break;
        if (pl_mono_msf() >= next) {
            gw_fleet_assign(f);
            gw_fleet_refresh(f);
            next = pl_mono_msf() + f->c.refresh_ms;
        }
        rd_kafka_message_t *m = rd_kafka_consumer_poll(f->rk, 100);
        if (m) {
            if (!m->err) gw_fleet_status(f, m);
            rd_kafka_message_destroy(m);
        }
    }
    return NULL;
}

/* The reader's own error callback: the fleet view's errors are shown by
 * /v1/fleet and must not count as the gateway's refusals (cm_kafka.h), so
 * they are logged here, once per kind, and left at that. */
static void gw_fleet_error_cb(rd_kafka_t *rk, int err, const char *reason, void *opaque) {
    gw_fleet *f = opaque;
    (void)rk;
    if (err == RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN || err == RD_KAFKA_RESP_ERR__TRANSPORT) return;
    pthread_mutex_lock(&f->mu);
    int first = f->last_cb_err != err;
    f->last_cb_err = err;
    pthread_mutex_unlock(&f->mu);
    if (first)
        fprintf(stderr, "gateway: fleet view: %s: %.300s\n", rd_kafka_err2name(err),
                reason ? reason : "");
}

int gw_fleet_new(const gw_fleet_conf *conf, gw_fleet **out, char *err, size_t errlen) {
    *out = NULL;
    gw_fleet *f = calloc(1, sizeof *f);
    if (!f || !(f->st = calloc(GW_FLEET_MAX_WORKERS, sizeof *f->st)) ||
        !(f->seen_turns = calloc(GW_FLEET_MAX_WORKERS, sizeof *f->seen_turns))) {
        if (f) free(f->st);
        free(f);
        return pl_errf(err, errlen, GW_ENOMEM, "out of memory");
    }
    f->c = *conf;
    pthread_mutex_init(&f->mu, NULL);
    cm_kafka_spec s = {.role = CM_KAFKA_READER, .error_cb = gw_fleet_error_cb, .opaque = f};
    int rc = cm_kafka_client_new(conf->kafka, &s, "fleet reader", &f->rk, err, errlen);
    if (rc) {
        pthread_mutex_destroy(&f->mu);
        free(f->st);
        free(f->seen_turns);
        free(f);
        return pl_err_recode(rc, PL_ERR_GW, GW_EKAFKA);
    }
    f->q = rd_kafka_queue_new(f->rk);
    snprintf(f->err, sizeof f->err, "the fleet has not been read from Kafka yet");
    if (pthread_create(&f->th, NULL, gw_fleet_main, f) != 0) {
        rd_kafka_queue_destroy(f->q);
        rd_kafka_destroy(f->rk);
        pthread_mutex_destroy(&f->mu);
        free(f->st);
        free(f->seen_turns);
        free(f);
        return pl_errf(err, errlen, GW_ENOMEM, "cannot start the fleet thread");
    }
    *out = f;
    return 0;
}

void gw_fleet_free(gw_fleet *f) {
    if (!f) return;
    pthread_mutex_lock(&f->mu);
    f->stop = 1;
    pthread_mutex_unlock(&f->mu);
    pthread_join(f->th, NULL);
    rd_kafka_queue_destroy(f->q);
    rd_kafka_consumer_close(f->rk);
    rd_kafka_destroy(f->rk);
    json_decref(f->snap);
    pthread_mutex_destroy(&f->mu);
    free(f->st);
    free(f->seen_turns);
    free(f);
}

/* ---- the answer --------------------------------------------------------- */

/* The JSON of one worker: its group membership (m, or NULL) and status
 * record (s, or NULL). */
static json_t *gw_fleet_worker(json_t *m, const cm_status *s, int64_t now) {
    json_t *w = json_object();
    const char *id = m ? json_string_value(json_object_get(m, "client_id")) : s->worker;
    json_object_set_new(w, "id", json_string(id));
    json_object_set_new(w, "member", json_boolean(m != NULL));
    json_object_set(w, "partitions", m ? json_object_get(m, "partitions") : json_array());
    json_object_set_new(w, "host",
                        json_string(m ? json_string_value(json_object_get(m, "host")) : s->host));
    if (!s) {
        json_object_set_new(w, "status", json_null());
        return w;
    }
    int64_t age = now - s->ts_ms;
    json_object_set_new(
        w, "status",
        json_pack("{ss ss sI sI sf so sI sI sI sb}", "model", s->model, "state", s->state, "ts_ms",
                  (json_int_t)s->ts_ms, "age_ms", (json_int_t)age, "turns_per_s", s->turns_per_s,
                  "cache_share", s->cache_share >= 0 ? json_real(s->cache_share) : json_null(),
                  "turns", (json_int_t)s->turns, "prompt_tokens", (json_int_t)s->prompt_tokens,
                  "cached_tokens", (json_int_t)s->cached_tokens, "stale",
                  age > GW_FLEET_STALE * s->interval_ms && strcmp(s->state, "stopped")));
    return w;
}

char *gw_fleet_json(gw_fleet *f, int *status) {
    json_t *j = NULL;
    int64_t now = pl_unix_ms();
    pthread_mutex_lock(&f->mu);
    if (f->err[0] || !f->snap) {
        char msg[700];
        snprintf(msg, sizeof msg, "cannot read the fleet from Kafka: %s", f->err);
        j = oa_error_json(msg, "server_error", NULL, "fleet_unavailable");
        *status = 503;
        goto out;
    }
    *status = 200;
    j = json_deep_copy(f->snap);
    json_t *members = json_object_get(j, "members"), *workers = json_array(), *hist = json_array();
    char *seen = calloc(f->n_st + 1, 1);
    size_t i, k;
    json_t *m;
    json_array_foreach(members, i, m) {
        const char *id = json_string_value(json_object_get(m, "client_id"));
        const cm_status *s = NULL;
        for (k = 0; id && k < f->n_st; k++)
            if (!strcmp(f->st[k].worker, id)) {
                s = &f->st[k];
                if (seen) seen[k] = 1;
            }
        json_array_append_new(workers, gw_fleet_worker(m, s, now));
    }
    for (k = 0; seen && k < f->n_st; k++) /* records of workers outside the group */
        if (!seen[k]) json_array_append_new(workers, gw_fleet_worker(NULL, &f->st[k], now));
    free(seen);
    size_t nh = f->n_hist < GW_FLEET_HIST ? f->n_hist : GW_FLEET_HIST;
    for (k = f->n_hist - nh; k < f->n_hist; k++) {
        const gw_fleet_sample *h = &f->hist[k % GW_FLEET_HIST];
        json_array_append_new(
            hist, json_pack("[I I f]", (json_int_t)h->ts_ms, (json_int_t)h->lag, h->tps));
    }
    json_object_del(j, "members");
    json_object_set_new(j, "object", json_string("fleet"));
    json_object_set_new(j, "group", json_string(f->c.group));
    json_object_set_new(j, "status_topic", json_string(f->c.status));
    json_object_set_new(j, "updated_ms", json_integer(f->snap_ms));
    json_object_set_new(j, "now_ms", json_integer(now));
    json_object_set_new(j, "bad_status_records", json_integer((json_int_t)f->bad));
    json_object_set_new(j, "workers", workers);
    json_object_set_new(j, "history", hist);
out:
    pthread_mutex_unlock(&f->mu);
    char *txt = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    return txt;
}
