/*
 * cm_client.c -- the clients' Kafka plumbing (see cm_client.h): topic
 * names and their options, the Kafka options of the command-line clients,
 * an idempotent producer that sends encoded ChatTurns with the
 * content-type header, and readers assigned to the end of every partition
 * of a topic.
 */
#define _POSIX_C_SOURCE 200809L
#include "cm_client.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "cm_startup.h"
#include "pl_err.h"
#include "pl_time.h"

int cm_topic_set(char *dst, const char *name, char *err, size_t errlen) {
    size_t n = name ? strlen(name) : 0;
    if (n == 0 || n >= 256) {
        return pl_errf(err, errlen, CM_KAFKA_EINVAL, "topic name must be 1..255 bytes");
    }
    memcpy(dst, name, n + 1);
    return 0;
}

int cm_topics_prefix(cm_topics *t, const char *prefix, char *err, size_t errlen) {
    size_t n = prefix ? strlen(prefix) : 0;
    if (n == 0 || n > 200) {
        return pl_errf(err, errlen, CM_KAFKA_EINVAL, "topic prefix must be 1..200 bytes");
    }
    snprintf(t->turns, sizeof t->turns, "%s.turns", prefix);
    snprintf(t->tokens, sizeof t->tokens, "%s.tokens", prefix);
    snprintf(t->responses, sizeof t->responses, "%s.responses", prefix);
    return 0;
}

rd_kafka_t *cm_producer_new(cm_kafka *k, const char *topic, int timeout_ms, char *err,
                            size_t errlen) {
    static const char *const defs[] = {"linger.ms", "1", "log_level", "3", NULL};
    cm_kafka_spec s = {.role = CM_KAFKA_PRODUCER, .defs = defs};
    rd_kafka_t *rk = NULL;
    if (cm_kafka_client_new(k, &s, "producer", &rk, err, errlen) != 0) return NULL;
    /* Learn the topic's leaders now: the first turn's latency must not
     * include the producer's lazy metadata lookup. */
    char what[600];
    snprintf(what, sizeof what, "the metadata of topic %.200s from %.300s", topic,
             cm_kafka_brokers(k));
    cm_startup_wait(what);
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_resp_err_t e =
        rkt ? cm_kafka_metadata_get(k, rk, rkt, timeout_ms, &md) : RD_KAFKA_RESP_ERR__INVALID_ARG;
    if (e == RD_KAFKA_RESP_ERR_NO_ERROR && (md->topic_cnt != 1 || md->topics[0].err))
        e = md->topic_cnt == 1 ? md->topics[0].err : RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC;
    if (md) rd_kafka_metadata_destroy(md);
    if (rkt) rd_kafka_topic_destroy(rkt);
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
        cm_kafka_errf(err, errlen, k, topic, e);
        rd_kafka_destroy(rk);
        return NULL;
    }
    return rk;
}

void cm_kafka_errf(char *err, size_t errlen, cm_kafka *k, const char *topic,
                   rd_kafka_resp_err_t e) {
    char why[PL_ERR_LEN];
    snprintf(why, sizeof why, "topic %.200s: %s", topic, rd_kafka_err2str(e));
    cm_kafka_refusal_note(k, e, why); /* an authorization error is a refusal */
    if (cm_kafka_refusal_msg(k))
        pl_errf(err, errlen, CM_KAFKA_EREFUSED, "%s", cm_kafka_refusal_msg(k));
    else if (e == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART || e == RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC)
        pl_errf(err, errlen, CM_KAFKA_ENOTOPIC,
                "topic %s: %s: create the topics with `parley topics --brokers %.200s` "
                "(see parley topics --help)",
                topic, rd_kafka_err2str(e), cm_kafka_brokers(k));
    else if (cm_startup_expired() || e == RD_KAFKA_RESP_ERR__TIMED_OUT ||
             e == RD_KAFKA_RESP_ERR__TRANSPORT)
        cm_startup_errf(err, errlen, CM_KAFKA_ETIMEDOUT);
    else pl_errf(err, errlen, CM_KAFKA_EKAFKA, "topic %s: %s", topic, rd_kafka_err2str(e));
}

int cm_turn_send(rd_kafka_t *producer, const char *topic, const sch_turn *t, char *err,
                 size_t errlen) {
    return cm_turn_send_ns(producer, topic, t, NULL, err, errlen);
}

int cm_turn_send_ns(rd_kafka_t *producer, const char *topic, const sch_turn *t,
                    const char *ns_header, char *err, size_t errlen) {
    sch_buf buf;
    sch_buf_init(&buf);
    int rc = -1;
    if (sch_turn_encode(t, &buf, err, errlen) != 0) goto out;
    for (int tries = 0;; tries++) {
        rd_kafka_headers_t *hdrs = rd_kafka_headers_new(2);
        rd_kafka_header_add(hdrs, SCH_HEADER_CONTENT_TYPE, -1, SCH_CONTENT_TYPE, -1);
        if (ns_header) rd_kafka_header_add(hdrs, "parley-namespace", -1, ns_header, -1);
        rd_kafka_resp_err_t e = rd_kafka_producev(
            producer, RD_KAFKA_V_TOPIC(topic),
            RD_KAFKA_V_KEY(t->conversation_id.ptr, t->conversation_id.len),
            RD_KAFKA_V_VALUE(buf.data, buf.len), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
            RD_KAFKA_V_HEADERS(hdrs), RD_KAFKA_V_END);
        if (e != RD_KAFKA_RESP_ERR_NO_ERROR)
            rd_kafka_headers_destroy(hdrs); /* producev owns them only on success */
        if (e == RD_KAFKA_RESP_ERR_NO_ERROR) break;
        if (e != RD_KAFKA_RESP_ERR__QUEUE_FULL || tries >= 100) {
            pl_errf(err, errlen, CM_KAFKA_EKAFKA, "produce to %s: %s", topic, rd_kafka_err2str(e));
            goto out;
        }
        rd_kafka_poll(producer, 10);
    }
    rd_kafka_poll(producer, 0);
    rc = 0;
out:
    sch_buf_free(&buf);
    return rc;
}

int cm_cancel_send(rd_kafka_t *producer, const char *topic, const char *conv_id,
                   const char *turn_id, const char *reason, char *err, size_t errlen) {
    sch_cancel k;
    sch_buf buf;
    int rc = -1;
    sch_cancel_init(&k);
    sch_buf_init(&buf);
    k.conversation_id = sch_str_c(conv_id);
    k.turn_id = sch_str_c(turn_id);
    k.cancelled_ms = (uint64_t)pl_unix_ms();
    k.reason = sch_str_c(reason);
    if (sch_cancel_encode(&k, &buf, err, errlen) != 0) goto out;
    rd_kafka_headers_t *hdrs = rd_kafka_headers_new(1);
    rd_kafka_header_add(hdrs, SCH_HEADER_CONTENT_TYPE, -1, SCH_CONTENT_TYPE_CANCEL, -1);
    rd_kafka_resp_err_t e = rd_kafka_producev(
        producer, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_KEY(conv_id, strlen(conv_id)),
        RD_KAFKA_V_VALUE(buf.data, buf.len), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
        RD_KAFKA_V_HEADERS(hdrs), RD_KAFKA_V_END);
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
        rd_kafka_headers_destroy(hdrs); /* producev owns them only on success */
        pl_errf(err, errlen, CM_KAFKA_EKAFKA, "produce to %s: %s", topic, rd_kafka_err2str(e));
        goto out;
    }
    rd_kafka_poll(producer, 0);
    rc = 0;
out:
    sch_buf_free(&buf);
    return rc;
}

/* One try at the end offsets of every partition of `topic`: a list to
 * assign, or NULL with a message. */
static rd_kafka_topic_partition_list_t *reader_ends(rd_kafka_t *rk, cm_kafka *k, const char *topic,
                                                    int timeout_ms, char *err, size_t errlen,
                                                    rd_kafka_topic_partition_list_t *into) {
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_topic_partition_list_t *parts = NULL;
    char what[400];
    snprintf(what, sizeof what, "the metadata and end offsets of topic %.300s", topic);
    cm_startup_wait(what);
    rd_kafka_resp_err_t e =
        rkt ? cm_kafka_metadata_get(k, rk, rkt, timeout_ms, &md) : RD_KAFKA_RESP_ERR__INVALID_ARG;
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
        cm_kafka_errf(err, errlen, k, topic, e);
        goto err;
    }
    if (md->topic_cnt != 1 || md->topics[0].err || md->topics[0].partition_cnt <= 0) {
        if (md->topic_cnt == 1 && md->topics[0].err)
            cm_kafka_errf(err, errlen, k, topic, md->topics[0].err);
        else pl_errf(err, errlen, CM_KAFKA_EKAFKA, "topic %s: no partitions", topic);
        goto err;
    }
    parts = into ? into : rd_kafka_topic_partition_list_new(md->topics[0].partition_cnt);
    for (int i = 0; i < md->topics[0].partition_cnt; i++) {
        int32_t p = md->topics[0].partitions[i].id;
        int64_t lo = 0, hi = 0;
        e = rd_kafka_query_watermark_offsets(rk, topic, p, &lo, &hi, timeout_ms);
        if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
            if (cm_startup_expired()) cm_startup_errf(err, errlen, CM_KAFKA_ETIMEDOUT);
            else if (cm_kafka_refusal_class(e, NULL)) cm_kafka_errf(err, errlen, k, topic, e);
            else
                pl_errf(err, errlen, CM_KAFKA_EKAFKA, "end offset of %s[%d]: %s", topic, (int)p,
                        rd_kafka_err2str(e));
            goto err;
        }
        rd_kafka_topic_partition_list_add(parts, topic, p)->offset = hi;
    }
    rd_kafka_metadata_destroy(md);
    rd_kafka_topic_destroy(rkt);
    return parts;
err:
    if (parts && parts != into) rd_kafka_topic_partition_list_destroy(parts);
    if (md) rd_kafka_metadata_destroy(md);
    if (rkt) rd_kafka_topic_destroy(rkt);
    return NULL;
}

rd_kafka_t *cm_reader_new(cm_kafka *k, const char *topic, int committed, int timeout_ms, char *err,
                          size_t errlen) {
    return cm_reader_new_topics(k, &topic, 1, committed, timeout_ms, err, errlen);
}

/* One try at the end offsets of every partition of every topic. */
static rd_kafka_topic_partition_list_t *reader_ends_all(rd_kafka_t *rk, cm_kafka *k,
                                                        const char *const *topics, size_t n,
                                                        int timeout_ms, char *err, size_t errlen) {
    rd_kafka_topic_partition_list_t *all = rd_kafka_topic_partition_list_new(16);
    for (size_t i = 0; i < n; i++)
        if (!reader_ends(rk, k, topics[i], timeout_ms, err, errlen, all)) {
            rd_kafka_topic_partition_list_destroy(all);
            return NULL;
        }
    return all;
}

rd_kafka_t *cm_reader_new_topics(cm_kafka *k, const char *const *topics, size_t n_topics,
                                 int committed, int timeout_ms, char *err, size_t errlen) {
    cm_kafka_spec s = {.role = CM_KAFKA_READER, .committed = committed};
    rd_kafka_t *rk = NULL;
    if (cm_kafka_client_new(k, &s, "reader", &rk, err, errlen) != 0) return NULL;
    /* A topic created a moment ago may still lack leaders: retry until
     * timeout_ms, then report the last error. */
    double give_up = pl_mono_msf() + timeout_ms;
    rd_kafka_topic_partition_list_t *parts;
    for (;;) {
        int left = (int)(give_up - pl_mono_msf());
        if ((parts = reader_ends_all(rk, k, topics, n_topics, left > 1 ? left : 1, err, errlen)))
            break;
        if (pl_mono_msf() >= give_up || cm_kafka_refusal_msg(k)) {
            rd_kafka_destroy(rk);
            return NULL;
        }
        struct timespec nap = {0, 100 * 1000 * 1000};
        nanosleep(&nap, NULL);
    }
    rd_kafka_resp_err_t e = rd_kafka_assign(rk, parts);
    rd_kafka_topic_partition_list_destroy(parts);
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
        pl_errf(err, errlen, CM_KAFKA_EKAFKA, "assign %s: %s", topics[0], rd_kafka_err2str(e));
        rd_kafka_destroy(rk);
        return NULL;
    }
    return rk;
}

void cm_reader_free(rd_kafka_t *rk) {
    if (!rk) return;
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
}

int cm_topic_cli(void *ctx, const cli_opt *o, const char *val, char *err, size_t errlen) {
    return cm_topics_prefix(o->dst, val, err, errlen);
}

int cm_topic_name_cli(void *ctx, const cli_opt *o, const char *val, char *err, size_t errlen) {
    return cm_topic_set(o->dst, val, err, errlen);
}

/* ---- the Kafka options of the command-line clients ---- */

int cm_kafka_cli_brokers(void *ctx, const cli_opt *o, const char *val, char *err, size_t errlen) {
    cm_kafka_cli *kc = o->dst;
    if (kc->phase != 2) return 0;
    return cm_config_set(kc->cfg, "kafka.bootstrap.servers", val, "flag --brokers", err, errlen)
               ? -2
               : 0;
}

int cm_kafka_cli_config(void *ctx, const cli_opt *o, const char *val, char *err, size_t errlen) {
    cm_kafka_cli *kc = o->dst;
    if (kc->phase != 1) return 0;
    return cm_config_load_file(kc->cfg, val, err, errlen) ? -2 : 0;
}

int cm_kafka_cli_key(cm_kafka_cli *kc, const char *arg, const char *val, char *err, size_t errlen) {
    if (strncmp(arg, "--kafka.", 8)) return -2;
    if (!val) {
        pl_errf(err, errlen, CM_KAFKA_EINVAL, "%s needs a value", arg);
        return -1;
    }
    if (kc->phase == 2 && cm_config_set(kc->cfg, arg + 2, val, "command line", err, errlen))
        return -1;
    return 1;
}

int cm_kafka_cli_parse(const cli_cmd *cmd, cm_kafka_cli *kc, int argc, char **argv, void *ctx) {
    char err[CLI_ERRLEN];
    if (cm_config_new(NULL, 0, kc->cmd, NULL, &kc->cfg) != 0) return cli_fail(cmd, "out of memory");
    for (kc->phase = 1; kc->phase <= 2; kc->phase++) {
        int pr = cli_parse(cmd, argc, argv, ctx, NULL, NULL);
        if (pr != CLI_OK) return pr;
    }
    if (!*cm_kafka_brokers_of(kc->cfg)) {
        fprintf(stderr, "%s: --brokers (or kafka.bootstrap.servers) is required\n", kc->cmd);
        cli_usage(cmd, stderr);
        return CLI_USAGE;
    }
    if (cm_config_validate(kc->cfg, err, sizeof err) != 0 ||
        cm_kafka_new(kc->cfg, kc->roles, kc->cmd, &kc->k, err, sizeof err) != 0)
        return cli_fail(cmd, "%s", err);
    return CLI_OK;
}

void cm_kafka_cli_free(cm_kafka_cli *kc) {
    cm_kafka_free(kc->k);
    cm_config_free(kc->cfg);
    kc->k = NULL;
    kc->cfg = NULL;
}
