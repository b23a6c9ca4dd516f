/*
 * wk_kafka.c -- the worker's three Kafka handles (group consumer,
 * transactional producer, idempotent chunk producer), built through the
 * common Kafka layer (consumer/common/cm_kafka.h: the user's kafka.* keys
 * scoped to the clients that understand each property, consumer.* /
 * producer.* prefixes, forced settings) with the worker's own defaults on
 * top: linger, retry backoff, client.id = worker.id, the group, earliest
 * offsets, read_committed, cooperative-sticky assignment.  The
 * transactional producer can be built again in place (wk_kafka_txp_new)
 * when a fatal, non-fencing error leaves the old one unusable (see
 * wk_txn.c); so can the chunk producer (wk_kafka_chp_new, see wk_gen.c).
 * The worker keeps its own error callback (refusals stop the worker with
 * exit status 3, also mid-run).  wk_record_from_kafka is the turn path's
 * boundary: the rest of the turn path sees a plain wk_record.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cm_kafka.h"
#include "cm_startup.h"
#include "pl_err.h"
#include "wk_internal.h"

void wk_rebalance_cb(rd_kafka_t *rk, rd_kafka_resp_err_t e, rd_kafka_topic_partition_list_t *parts,
                     void *opaque);

int wk_record_from_kafka(const rd_kafka_message_t *m, wk_record *r, wk_header *buf, size_t cap,
                         wk_header **heap) {
    *heap = NULL;
    memset(r, 0, sizeof *r);
    r->topic = m->rkt ? rd_kafka_topic_name(m->rkt) : "";
    r->partition = m->partition;
    r->offset = m->offset;
    r->key = m->key;
    r->key_len = m->key ? m->key_len : 0;
    r->value = m->payload;
    r->len = m->payload ? m->len : 0;
    r->timestamp_ms = rd_kafka_message_timestamp(m, NULL);
    rd_kafka_headers_t *hdrs = NULL;
    if (rd_kafka_message_headers(m, &hdrs) != RD_KAFKA_RESP_ERR_NO_ERROR || !hdrs) return 0;
    size_t n = rd_kafka_header_cnt(hdrs);
    wk_header *h = buf;
    if (n > cap && !(h = *heap = malloc(n * sizeof *h))) return -1;
    size_t k = 0;
    const char *name;
    const void *val;
    size_t sz;
    while (k < n &&
           rd_kafka_header_get_all(hdrs, k, &name, &val, &sz) == RD_KAFKA_RESP_ERR_NO_ERROR) {
        h[k] = (wk_header){name, val, val ? sz : 0};
        k++;
    }
    r->headers = h;
    r->n_headers = k;
    return 0;
}

/* What a refusal by the cluster is, for an error code and its reason;
 * NULL when it is not one (cm_kafka_refusal_class). */
static const char *wk_refusal_kind(rd_kafka_resp_err_t e, const char *reason) {
    int cls = cm_kafka_refusal_class(e, reason);
    return cls ? cm_kafka_refusal_text(
                     cls, "not authorized (the worker's principal needs READ on the turns topic "
                          "and its group, WRITE on the tokens, responses and DLQ topics, WRITE on "
                          "transactional id parley-<worker.id>)")
               : NULL;
}

void wk_kafka_note_refusal(wk_worker *w, rd_kafka_resp_err_t e, const char *reason) {
    const char *kind = wk_refusal_kind(e, reason);
    int expect = 0;
    if (!kind || !__atomic_compare_exchange_n(&w->halt.refused_claim, &expect, 1, 0,
                                              __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        return;
    snprintf(w->halt.refused_msg, sizeof w->halt.refused_msg,
             "Kafka refused the worker: %s: %.300s", kind, reason ? reason : rd_kafka_err2str(e));
    __atomic_store_n(&w->halt.refused, 1, __ATOMIC_RELEASE);
    wk_log("error", "kafka_refused", "err=%s reason=\"%.300s\"", rd_kafka_err2name(e),
           reason ? reason : "");
}

/* Error callback of every client (librdkafka's thread that serves the
 * client's queue): refusals are noted for the worker to stop on; the rest
 * are logged (librdkafka retries them). */
static void wk_error_cb(rd_kafka_t *rk, int err, const char *reason, void *opaque) {
    wk_worker *w = opaque;
    char fbuf[512];
    rd_kafka_resp_err_t e = (rd_kafka_resp_err_t)err;
    if (e == RD_KAFKA_RESP_ERR__FATAL && (e = rd_kafka_fatal_error(rk, fbuf, sizeof fbuf)))
        reason = fbuf;
    if (wk_refusal_kind(e, reason)) {
        wk_kafka_note_refusal(w, e, reason);
        return;
    }
    if (e == RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN || e == RD_KAFKA_RESP_ERR__TRANSPORT)
        return; /* logged by librdkafka */
    wk_log("warn", "kafka_error", "client=%s err=%s reason=\"%.300s\"", rd_kafka_name(rk),
           rd_kafka_err2name(e), reason ? reason : "");
}

/* Build a client of worker w through the common layer (cm_kafka.h): w is
 * the opaque of every callback, and the error callback notes refusals on
 * it.  A key the layer refuses is the configuration's fault (WK_EINVAL:
 * exit status 2); other failures are WK_EKAFKA. */
static int wk_kafka_client(wk_worker *w, cm_kafka_spec *s, const char *what, rd_kafka_t **out,
                           char *err, size_t errlen) {
    cm_kafka *k = NULL;
    s->error_cb = wk_error_cb;
    s->opaque = w;
    int rc = cm_kafka_new(w->cfg, CM_KAFKA_GROUP | CM_KAFKA_PRODUCER, "worker", &k, err, errlen);
    if (!rc) rc = cm_kafka_client_new(k, s, what, out, err, errlen);
    cm_kafka_free(k);
    return rc ? pl_err_recode(rc, PL_ERR_WK, WK_EKAFKA) : 0;
}

/* The command that creates the worker's topics, for messages about a
 * missing one. */
static void wk_topics_hint(const wk_worker *w, char *out, size_t n) {
    const char *bs = *cm_kafka_brokers_of(w->cfg) ? cm_kafka_brokers_of(w->cfg) : "HOST:PORT";
    snprintf(out, n,
             "parley topics --brokers %.200s --turns-topic %.100s --tokens-topic %.100s "
             "--responses-topic %.100s --dlq-topic %.100s",
             bs, w->topics.turns, w->topics.tokens, w->topics.resp, w->topics.dlq);
}

void wk_kafka_topic_missing(const wk_worker *w, const char *topic, const char *reason) {
    char hint[800];
    wk_topics_hint(w, hint, sizeof hint);
    wk_log("warn", "topic_missing", "topic=%s reason=\"%.200s\" create_with=\"%s\"", topic, reason,
           hint);
}

/* Fetch topic's metadata into rk's cache now, within the start-up deadline
 * (errors other than a missing topic are ignored: the producer looks it up
 * on first use anyway); a topic the cluster does not have is logged with
 * the command that creates it.  Returns -1 when the deadline passed. */
static int wk_warm_metadata(wk_worker *w, rd_kafka_t *rk, const char *topic) {
    char what[400];
    snprintf(what, sizeof what, "the metadata of topic %.300s", topic);
    cm_startup_wait(what);
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);
    const struct rd_kafka_metadata *md = NULL;
    int tmo = cm_startup_left_ms() < 5000 ? cm_startup_left_ms() : 5000;
    rd_kafka_resp_err_t e =
        rkt ? rd_kafka_metadata(rk, 0, rkt, &md, tmo) : RD_KAFKA_RESP_ERR__INVALID_ARG;
    if (e == RD_KAFKA_RESP_ERR_NO_ERROR) {
        if (md->topic_cnt == 1 && (md->topics[0].err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART ||
                                   md->topics[0].err == RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC))
            wk_kafka_topic_missing(w, topic, rd_kafka_err2str(md->topics[0].err));
        rd_kafka_metadata_destroy(md);
    }
    if (rkt) rd_kafka_topic_destroy(rkt);
    return cm_startup_expired() ? -1 : 0;
}

/* The transactional producer's delivery reports.  Nothing to do with them
 * (a failed delivery fails commit_transaction), but without a callback
 * librdkafka frees delivered messages without a report, and the flush in
 * commit_transaction, which waits on the report queue in slices of 10 ms,
 * then notices the delivery only when its slice ends: every commit took
 * about 10 ms longer. */
static void wk_txp_dr(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
    (void)rk, (void)m, (void)opaque;
}

int wk_kafka_txp_new(wk_worker *w, rd_kafka_t **out, char *err, size_t errlen) {
    char txid[200];
    snprintf(txid, sizeof txid, "parley-%s", w->id);
    /* retry.backoff.ms: a transaction begun right after the previous commit
     * finds the coordinator still writing that one's markers (2-10 ms on
     * the 2-core test machine, up to 70 under load) and gets
     * CONCURRENT_TRANSACTIONS on AddOffsetsToTxn, which librdkafka retries
     * after retry.backoff.ms, doubling up to retry.backoff.max.ms (1 s).
     * From its default, 100 ms, such a commit waited 100-300 ms; from 2 ms
     * it waits about as long as the markers take, and a broker that is
     * away still sees the backoff grow to a second within 10 retries. */
    const char *pdefs[] = {"linger.ms", "5", "retry.backoff.ms", "2", NULL};
    cm_kafka_spec s = {.role = CM_KAFKA_PRODUCER,
                       .client_id = w->id,
                       .txn_id = txid,
                       .defs = pdefs,
                       .dr_msg_cb = wk_txp_dr};
    int rc = wk_kafka_client(w, &s, "transactional producer", out, err, errlen);
    if (rc) return rc;
    char tmo[32];
    size_t tl = sizeof tmo;
    if (rd_kafka_conf_get(rd_kafka_conf(*out), "transaction.timeout.ms", tmo, &tl) ==
        RD_KAFKA_CONF_OK)
        w->txn.timeout_us = strtoll(tmo, NULL, 10) * 1000;
    return 0;
}

int wk_kafka_chp_new(wk_worker *w, rd_kafka_t **out, char *err, size_t errlen) {
    const char *pdefs[] = {"linger.ms", "5", NULL};
    cm_kafka_spec s = {.role = CM_KAFKA_PRODUCER, .client_id = w->id, .defs = pdefs};
    return wk_kafka_client(w, &s, "chunk producer", out, err, errlen);
}

/* 1 if the kafka.* pass-through selects KIP-848's consumer group protocol
 * (kafka.group.protocol = consumer): the broker assigns partitions, and
 * librdkafka refuses partition.assignment.strategy (and the classic
 * protocol's session/heartbeat settings) alongside it. */
static int wk_kafka_kip848(const cm_config *cfg) {
    for (size_t i = 0; i < cm_config_kafka_count(cfg); i++) {
        const char *k, *v;
        cm_config_kafka_at(cfg, i, &k, &v);
        if (!strcmp(k, "group.protocol")) return !strcmp(v, "consumer");
    }
    return 0;
}

/* Describe the worker's consumer group once before subscribing: librdkafka
 * retries a group it may not use (FindCoordinator's
 * GROUP_AUTHORIZATION_FAILED) silently and forever, so ask the admin API,
 * which reports it.  Returns 0 (also when the probe itself fails or times
 * out: the group join then proceeds as usual) or WK_EREFUSED. */
static int wk_kafka_probe_group(wk_worker *w, char *err, size_t errlen) {
    const char *group = cm_config_str(w->cfg, "worker.group");
    rd_kafka_queue_t *q = rd_kafka_queue_new(w->cons);
    rd_kafka_AdminOptions_t *o =
        rd_kafka_AdminOptions_new(w->cons, RD_KAFKA_ADMIN_OP_DESCRIBECONSUMERGROUPS);
    if (!q || !o) goto done;
    int left = cm_startup_left_ms();
    cm_startup_wait("the description of the consumer group (DescribeConsumerGroups)");
    rd_kafka_AdminOptions_set_request_timeout(o, left < 10000 ? left : 10000, NULL, 0);
    rd_kafka_DescribeConsumerGroups(w->cons, &group, 1, o, q);
    rd_kafka_event_t *ev = rd_kafka_queue_poll(q, left < 15000 ? left : 15000);
    if (ev) {
        const rd_kafka_DescribeConsumerGroups_result_t *res =
            rd_kafka_event_DescribeConsumerGroups_result(ev);
        size_t n = 0;
        const rd_kafka_ConsumerGroupDescription_t **d =
            res ? rd_kafka_DescribeConsumerGroups_result_groups(res, &n) : NULL;
        const rd_kafka_error_t *ge = n == 1 ? rd_kafka_ConsumerGroupDescription_error(d[0]) : NULL;
        if (ge) wk_kafka_note_refusal(w, rd_kafka_error_code(ge), rd_kafka_error_string(ge));
        else if (rd_kafka_event_error(ev))
            wk_kafka_note_refusal(w, rd_kafka_event_error(ev), rd_kafka_event_error_string(ev));
        rd_kafka_event_destroy(ev);
    }
done:
    if (o) rd_kafka_AdminOptions_destroy(o);
    if (q) rd_kafka_queue_destroy(q);
    if (__atomic_load_n(&w->halt.refused, __ATOMIC_ACQUIRE))
        return pl_errf(err, errlen, WK_EREFUSED, "%s", w->halt.refused_msg);
    if (cm_startup_expired()) return cm_startup_errf(err, errlen, WK_ETIMEDOUT);
    return 0;
}

int wk_kafka_setup(wk_worker *w, char *err, size_t errlen) {
    const cm_config *cfg = w->cfg;
    int kip848 = wk_kafka_kip848(cfg);
    const char *cdefs[] = {"auto.offset.reset", "earliest", "isolation.level", "read_committed",
                           /* classic protocol: incremental (cooperative) rebalances;
                            * KIP-848 rebalances incrementally by design */
                           kip848 ? NULL : "partition.assignment.strategy", "cooperative-sticky",
                           NULL};
    cm_kafka_spec s = {.role = CM_KAFKA_GROUP,
                       .client_id = w->id,
                       .group_id = cm_config_str(cfg, "worker.group"),
                       .defs = cdefs,
                       .rebalance_cb = wk_rebalance_cb};
    int rc = wk_kafka_client(w, &s, "consumer", &w->cons, err, errlen);
    if (rc) return rc;
    rc = wk_kafka_txp_new(w, &w->prod.txp, err, errlen);
    if (rc) return rc;
    if ((rc = wk_kafka_chp_new(w, &w->prod.chp, err, errlen))) return rc;
    /* init_transactions in short slices, serving every client's callbacks
     * in between, so a refusal (wrong password, untrusted CA, ACL) ends the
     * start at once instead of after the full minute of retries */
    rd_kafka_error_t *ke;
    char what[300];
    snprintf(what, sizeof what, "init_transactions of transactional id parley-%.200s", w->id);
    cm_startup_wait(what);
    for (;;) {
        int slice = cm_startup_left_ms() < 500 ? cm_startup_left_ms() : 500;
        ke = rd_kafka_init_transactions(w->prod.txp, slice > 0 ? slice : 1);
        rd_kafka_poll(w->prod.txp, 0);
        rd_kafka_poll(w->prod.chp, 0);
        rd_kafka_message_t *m =
            rd_kafka_consumer_poll(w->cons, 0); /* not subscribed: callbacks only */
        if (m) rd_kafka_message_destroy(m);
        if (ke && wk_refusal_kind(rd_kafka_error_code(ke), rd_kafka_error_string(ke)))
            wk_kafka_note_refusal(w, rd_kafka_error_code(ke), rd_kafka_error_string(ke));
        if (__atomic_load_n(&w->halt.refused, __ATOMIC_ACQUIRE)) {
            if (ke) rd_kafka_error_destroy(ke);
            return pl_errf(err, errlen, WK_EREFUSED, "%s", w->halt.refused_msg);
        }
        if (!ke) break;
        /* a slice that ran out, or an answer worth asking again (the
         * coordinator still loading its log after a broker start) */
        if (rd_kafka_error_code(ke) == RD_KAFKA_RESP_ERR__TIMED_OUT ||
            rd_kafka_error_is_retriable(ke)) {
            rd_kafka_error_destroy(ke);
            if (cm_startup_expired()) return cm_startup_errf(err, errlen, WK_ETIMEDOUT);
            continue;
        }
        pl_errf(err, errlen, WK_EKAFKA, "init_transactions (parley-%s): %s", w->id,
                rd_kafka_error_string(ke));
        rd_kafka_error_destroy(ke);
        return WK_EKAFKA;
    }
    /* Learn where the output topics live now rather than at the producers'
     * first periodic metadata refresh, which would hold a fresh worker's
     * first chunks and results for up to a second (after the refusal
     * checks: each blocks up to 5 s when the cluster turns us away). */
    if (wk_warm_metadata(w, w->cons, w->topics.turns) ||
        wk_warm_metadata(w, w->prod.chp, w->topics.tokens) ||
        wk_warm_metadata(w, w->prod.txp, w->topics.resp) ||
        wk_warm_metadata(w, w->prod.txp, w->topics.dlq))
        return cm_startup_errf(err, errlen, WK_ETIMEDOUT);
    if ((rc = wk_kafka_probe_group(w, err, errlen))) return rc;
    rd_kafka_topic_partition_list_t *sub = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(sub, w->topics.turns, RD_KAFKA_PARTITION_UA);
    /* rd_kafka_subscribe takes no timeout: the start-up watchdog bounds it */
    snprintf(what, sizeof what, "rd_kafka_subscribe to %.200s", w->topics.turns);
    cm_startup_wait(what);
    rd_kafka_resp_err_t re = rd_kafka_subscribe(w->cons, sub);
    rd_kafka_topic_partition_list_destroy(sub);
    if (re)
        return pl_errf(err, errlen, WK_EKAFKA, "subscribe %s: %s", w->topics.turns,
                       rd_kafka_err2str(re));
    return 0;
}
