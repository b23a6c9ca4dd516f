/*
 * gw_store.c -- stored Responses in a compacted Kafka topic, read back
 * into a bounded in-memory table by every gateway (see gw_store.h).
 */
#define _POSIX_C_SOURCE 200809L
#include "gw_cmd.h" /* GW_E* */
#include "gw_store.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cm_client.h"
#include "pl_err.h"
#include "pl_time.h"

#define GW_STORE_BUCKETS 4096   /* hash buckets of the table */
#define GW_STORE_MAX_PARTS 1024 /* partitions of the topic followed at most */

/* One id in the table: a record, or a tombstone (text NULL). */
typedef struct gw_entry {
    struct gw_entry *hnext;         /* next in its hash bucket */
    struct gw_entry *older, *newer; /* age list (eviction from the oldest) */
    char *id;                       /* response id (malloc'd) */
    char *text;                     /* record JSON, or NULL: deleted */
    size_t len;                     /* bytes of text */
    size_t cost;                    /* what it counts against max_bytes */
    char tenant[128];               /* tenant that stored it */
    int64_t created_ms;             /* when it was stored */
} gw_entry;

struct gw_store {
    rd_kafka_t *prod;                   /* producer of records and tombstones */
    rd_kafka_t *rd;                     /* reader of the topic from its start */
    char topic[256];                    /* the topic */
    int64_t ttl_ms;                     /* record lifetime */
    size_t max_bytes;                   /* text held at most */
    pthread_t thr;                      /* the reader thread */
    atomic_int stop;                    /* tells the thread to end */
    pthread_mutex_t mu;                 /* guards everything below */
    pthread_cond_t cv;                  /* signalled when the reader advanced */
    gw_entry *bucket[GW_STORE_BUCKETS]; /* the table */
    gw_entry *oldest, *newest;          /* age list */
    size_t bytes;                       /* text bytes in the table */
    int64_t pos[GW_STORE_MAX_PARTS];    /* per partition: next offset the reader gives */
    int n_parts;                        /* partitions of the topic */
};

static uint64_t st_hash(const char *s) {
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

static gw_entry **st_slot(gw_store *s, const char *id) {
    gw_entry **e = &s->bucket[st_hash(id) % GW_STORE_BUCKETS];
    while (*e && strcmp((*e)->id, id)) e = &(*e)->hnext;
    return e;
}

static void st_unlink_age(gw_store *s, gw_entry *e) {
    if (e->older) e->older->newer = e->newer;
    else s->oldest = e->newer;
    if (e->newer) e->newer->older = e->older;
    else s->newest = e->older;
    e->older = e->newer = NULL;
}

static void st_drop(gw_store *s, gw_entry **slot) {
    gw_entry *e = *slot;
    *slot = e->hnext;
    st_unlink_age(s, e);
    s->bytes -= e->cost;
    free(e->id);
    free(e->text);
    free(e);
}

/* Set id to text (NULL: tombstone).  A tombstone is sticky: a record for
 * a deleted id (a late copy from the reader) is ignored.  Locked. */
static void st_set(gw_store *s, const char *id, const char *text, size_t len, int from_reader) {
    gw_entry **slot = st_slot(s, id), *e = *slot;
    if (e && !e->text && text) return; /* deleted: stays deleted */
    if (e && from_reader && !text && !e->text) return;
    if (!e) {
        if (!(e = calloc(1, sizeof *e)) || !(e->id = strdup(id))) {
            free(e);
            return;
        }
        e->hnext = NULL;
        *slot = e;
    } else {
        st_unlink_age(s, e);
        s->bytes -= e->cost;
        free(e->text);
        e->text = NULL;
        e->len = 0;
        e->tenant[0] = 0;
    }
    if (text) {
        json_t *j = json_loadb(text, len, 0, NULL);
        const char *t = json_string_value(json_object_get(j, "tenant"));
        json_t *cm = json_object_get(j, "created_ms");
        if (t && json_is_integer(cm) && (e->text = malloc(len + 1))) {
            memcpy(e->text, text, len);
            e->text[len] = 0;
            e->len = len;
            snprintf(e->tenant, sizeof e->tenant, "%s", t);
            e->created_ms = json_integer_value(cm);
        }
        json_decref(j);
        if (!e->text) { /* not a record: forget the id */
            gw_entry **sl = st_slot(s, id);
            *sl = e->hnext;
            free(e->id);
            free(e);
            return;
        }
    }
    e->older = s->newest;
    if (s->newest) s->newest->newer = e;
    else s->oldest = e;
    s->newest = e;
    e->cost = e->len + strlen(e->id) + sizeof *e; /* a tombstone costs its id */
    s->bytes += e->cost;
    while (s->bytes > s->max_bytes && s->oldest && s->oldest != e)
        st_drop(s, st_slot(s, s->oldest->id));
}

static void *st_reader(void *arg) {
    gw_store *s = arg;
    while (!atomic_load(&s->stop)) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(s->rd, 200);
        if (!m) continue;
        if (!m->err && m->key && m->key_len > 0 && m->key_len <= 256) {
            char id[257];
            memcpy(id, m->key, m->key_len);
            id[m->key_len] = 0;
            pthread_mutex_lock(&s->mu);
            st_set(s, id, m->payload, m->payload ? m->len : 0, 1);
            if (m->partition >= 0 && m->partition < GW_STORE_MAX_PARTS)
                s->pos[m->partition] = m->offset + 1;
            pthread_cond_broadcast(&s->cv);
            pthread_mutex_unlock(&s->mu);
        }
        rd_kafka_message_destroy(m);
    }
    return NULL;
}

/* Whether the topic exists (metadata of all topics: asking for one
 * could auto-create it). */
static int st_topic_exists(rd_kafka_t *rk, const char *topic, int timeout_ms, int *parts) {
    const struct rd_kafka_metadata *md = NULL;
    if (rd_kafka_metadata(rk, 1, NULL, &md, timeout_ms) != RD_KAFKA_RESP_ERR_NO_ERROR) return -1;
    int found = 0;
    for (int i = 0; i < md->topic_cnt; i++)
        if (!strcmp(md->topics[i].topic, topic) && !md->topics[i].err) {
            found = 1;
            *parts = md->topics[i].partition_cnt;
        }
    rd_kafka_metadata_destroy(md);
    return found;
}

int gw_store_new(const gw_store_conf *c, gw_store **out, char *err, size_t errlen) {
    *out = NULL;
    if (!c->topic || !*c->topic) {
        snprintf(err, errlen, "gateway.topic.stored is empty");
        return 0;
    }
    gw_store *s = calloc(1, sizeof *s);
    if (!s) return pl_errf(err, errlen, GW_ENOMEM, "out of memory");
    snprintf(s->topic, sizeof s->topic, "%s", c->topic);
    s->ttl_ms = c->ttl_ms;
    s->max_bytes = c->max_bytes;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    cm_kafka_spec ps = {.role = CM_KAFKA_PRODUCER};
    if (cm_kafka_client_new(c->kafka, &ps, "response store producer", &s->prod, err, errlen) != 0)
        goto fail;
    int parts = 0, ex = st_topic_exists(s->prod, c->topic, c->timeout_ms, &parts);
    if (ex <= 0) {
        if (ex < 0) {
            pl_errf(err, errlen, GW_EKAFKA, "metadata for %s: no answer within %d ms", c->topic,
                    c->timeout_ms);
            goto fail;
        }
        snprintf(err, errlen,
                 "topic %.200s does not exist (parley topics creates it): responses are not "
                 "stored, previous_response_id is refused",
                 c->topic);
        rd_kafka_destroy(s->prod);
        pthread_mutex_destroy(&s->mu);
        pthread_cond_destroy(&s->cv);
        free(s);
        return 0;
    }
    s->n_parts = parts;
    if (!(s->rd = cm_reader_new(c->kafka, c->topic, 0, c->timeout_ms, err, errlen))) goto fail;
    /* the reader starts at the end: go back to the beginning */
    rd_kafka_topic_partition_list_t *as = NULL;
    if (rd_kafka_assignment(s->rd, &as) == RD_KAFKA_RESP_ERR_NO_ERROR) {
        for (int i = 0; i < as->cnt; i++) as->elems[i].offset = RD_KAFKA_OFFSET_BEGINNING;
        rd_kafka_assign(s->rd, as);
        rd_kafka_topic_partition_list_destroy(as);
    }
    if (pthread_create(&s->thr, NULL, st_reader, s) != 0) {
        pl_errf(err, errlen, GW_ENOMEM, "cannot start the response store reader");
        goto fail;
    }
    *out = s;
    return 0;
fail:
    if (s->rd) cm_reader_free(s->rd);
    if (s->prod) rd_kafka_destroy(s->prod);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s);
    return -1;
}

void gw_store_free(gw_store *s) {
    if (!s) return;
    atomic_store(&s->stop, 1);
    pthread_join(s->thr, NULL);
    rd_kafka_flush(s->prod, 5000);
    cm_reader_free(s->rd);
    rd_kafka_destroy(s->prod);
    while (s->oldest) st_drop(s, st_slot(s, s->oldest->id));
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s);
}

static int st_produce(gw_store *s, const char *id, const char *text, size_t len, char *err,
                      size_t errlen) {
    for (int tries = 0;; tries++) {
        rd_kafka_resp_err_t e =
            rd_kafka_producev(s->prod, RD_KAFKA_V_TOPIC(s->topic), RD_KAFKA_V_KEY(id, strlen(id)),
                              RD_KAFKA_V_VALUE((void *)text, len),
                              RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
        if (e == RD_KAFKA_RESP_ERR_NO_ERROR) break;
        if (e != RD_KAFKA_RESP_ERR__QUEUE_FULL || tries >= 100)
            return pl_errf(err, errlen, GW_EKAFKA, "produce to %s: %s", s->topic,
                           rd_kafka_err2str(e));
        rd_kafka_poll(s->prod, 10);
    }
    rd_kafka_poll(s->prod, 0);
    return 0;
}

int gw_store_put(gw_store *s, const char *id, json_t *rec, char *err, size_t errlen) {
    char *txt = json_dumps(rec, JSON_COMPACT);
    if (!txt) return pl_errf(err, errlen, GW_ENOMEM, "out of memory");
    int rc = st_produce(s, id, txt, strlen(txt), err, errlen);
    if (!rc) {
        pthread_mutex_lock(&s->mu);
        st_set(s, id, txt, strlen(txt), 0);
        pthread_mutex_unlock(&s->mu);
    }
    free(txt);
    return rc;
}

/* The live entry of id for tenant, or NULL; drops it when expired.  Locked. */
static gw_entry *st_find(gw_store *s, const char *id, const char *tenant, int *seen) {
    gw_entry **slot = st_slot(s, id), *e = *slot;
    *seen = e != NULL;
    if (!e || !e->text) return NULL;
    if (s->ttl_ms > 0 && e->created_ms + s->ttl_ms < pl_unix_ms()) {
        st_drop(s, slot);
        return NULL;
    }
    return strcmp(e->tenant, tenant) ? NULL : e;
}

/* Wait (at most wait_ms) until the reader has read to the end offsets
 * the topic has now, or id appeared.  Locked on entry and exit. */
static void st_catch_up(gw_store *s, const char *id, int wait_ms) {
    int64_t hi[GW_STORE_MAX_PARTS];
    int n = s->n_parts < GW_STORE_MAX_PARTS ? s->n_parts : GW_STORE_MAX_PARTS;
    double give_up = pl_mono_msf() + wait_ms;
    pthread_mutex_unlock(&s->mu);
    for (int p = 0; p < n; p++) {
        int64_t lo = 0;
        int left = (int)(give_up - pl_mono_msf());
        if (rd_kafka_query_watermark_offsets(s->prod, s->topic, p, &lo, &hi[p],
                                             left > 1 ? left : 1) != RD_KAFKA_RESP_ERR_NO_ERROR ||
            hi[p] <= lo)
            hi[p] = -1; /* unknown or empty: nothing to wait for */
    }
    pthread_mutex_lock(&s->mu);
    for (;;) {
        int behind = 0, seen;
        for (int p = 0; p < n && !behind; p++) behind = hi[p] > 0 && s->pos[p] < hi[p];
        st_find(s, id, "", &seen);
        if (!behind || seen) return;
        double left = give_up - pl_mono_msf();
        if (left <= 0) return;
        struct timespec ts = pl_deadline_ts(left > 100 ? 100 : (int64_t)left + 1);
        pthread_cond_timedwait(&s->cv, &s->mu, &ts);
    }
}

json_t *gw_store_get(gw_store *s, const char *id, const char *tenant, int wait_ms) {
    json_t *out = NULL;
    int seen;
    pthread_mutex_lock(&s->mu);
    gw_entry *e = st_find(s, id, tenant, &seen);
    if (!e && !seen) {
        st_catch_up(s, id, wait_ms);
        e = st_find(s, id, tenant, &seen);
    }
    if (e) out = json_loadb(e->text, e->len, 0, NULL);
    pthread_mutex_unlock(&s->mu);
    return out;
}

int gw_store_delete(gw_store *s, const char *id, const char *tenant, int wait_ms, char *err,
                    size_t errlen) {
    json_t *rec = gw_store_get(s, id, tenant, wait_ms);
    if (!rec) return 0;
    json_decref(rec);
    if (st_produce(s, id, NULL, 0, err, errlen) != 0) return -1;
    pthread_mutex_lock(&s->mu);
    st_set(s, id, NULL, 0, 0);
    pthread_mutex_unlock(&s->mu);
    return 1;
}
