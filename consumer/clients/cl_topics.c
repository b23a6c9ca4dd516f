/*
 * cl_topics.c -- `parley topics`: create the six topics a parley fleet
 * uses, with the partition advice of the README, on a Kafka cluster.
 *
 * Why.  A worker started against a cluster without its topics waits and
 * warns; a client fails with "Unknown topic or partition".  Both messages
 * name this command, so a user never needs Kafka's own scripts:
 *   turns, tokens, responses   --partitions N (default 12): the turns
 *                              topic's partition count bounds how many
 *                              workers share the load; tokens and
 *                              responses get the same count
 *   dlq                        1 partition
 *   status                     1 partition, cleanup.policy compact: the
 *                              workers' status records (docs/fleet.md)
 *   stored                     the gateway's stored Responses (gateway.topic.stored):
 *                              --partitions N, cleanup.policy=compact (keyed by
 *                              response id; a DELETE's tombstone removes one)
 * with replication factor --replication-factor R and min.insync.replicas
 * --min-insync-replicas M.  By default R is min(3, brokers in the cluster)
 * and, where R is 3, M is 2: a broker may fail without losing a committed
 * record or stopping produces (acks=all needs M in-sync replicas); M is 1
 * where R is 1 or 2; -1 leaves either to the broker's default.  Every created topic is printed
 * with its settings.  A topic that exists already is left as it is and
 * reported with its partition count and replication factor; that is not an
 * error, but one replicated fewer times than the default R would be (an
 * RF-1 topic on a three-broker cluster) gets a warning on stderr.
 *
 * Exit status: 0 every topic exists afterwards, 1 a topic could not be
 * created (or Kafka did not answer within --startup-timeout-s), 2 usage.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <librdkafka/rdkafka.h>

#include "cli_opt.h"
#include "cm_startup.h"
#include "pl_err.h"
#include "cl_client.h"

#define TP_N 6      /* topics made: turns, tokens, responses, dlq, status, stored */
#define TP_DLQ 3    /* index of the DLQ */
#define TP_STATUS 4 /* index of the status topic */
#define TP_STORED 5 /* index of the stored Responses topic */

/* Options of `parley topics`. */
typedef struct tp_opts {
    cm_kafka_cli kafka; /* --brokers, --config, --kafka.*: the Kafka layer */
    cm_topics topics;   /* turns / tokens / responses names */
    char dlq[256];      /* DeadLetter topic name */
    char status[256];   /* worker status topic name (compacted; docs/fleet.md) */
    char stored[256];   /* stored Responses topic name (compacted) */
    int partitions;     /* of turns, tokens, responses */
    int replication;    /* replication factor (0: min(3, brokers); -1: broker default) */
    int min_isr;        /* min.insync.replicas (0: 2 where RF is 3; -1: broker default) */
    uint64_t startup_s; /* bound on the waits for Kafka */
} tp_opts;

static int tp_dlq_opt(void *ctx, const cli_opt *o, const char *val, char *err, size_t errlen) {
    tp_opts *t = ctx;
    return cm_topic_set(t->dlq, val, err, errlen);
}

static int tp_stored_opt(void *ctx, const cli_opt *o, const char *val, char *err, size_t errlen) {
    tp_opts *t = ctx;
    return cm_topic_set(t->stored, val, err, errlen);
}

static int tp_status_opt(void *ctx, const cli_opt *o, const char *val, char *err, size_t errlen) {
    tp_opts *t = ctx;
    return cm_topic_set(t->status, val, err, errlen);
}

static int tp_prefix_opt(void *ctx, const cli_opt *o, const char *val, char *err, size_t errlen) {
    tp_opts *t = ctx;
    if (cm_topics_prefix(&t->topics, val, err, errlen) != 0) return -1;
    snprintf(t->dlq, sizeof t->dlq, "%s.dlq", val);
    snprintf(t->status, sizeof t->status, "%s.status", val);
    snprintf(t->stored, sizeof t->stored, "%s.stored", val);
    return 0;
}

/* --kafka.X VALUE (cli_unknown_fn). */
static int tp_kafka_key(void *ctx, const char *arg, const char *val, char *err, size_t errlen) {
    return cm_kafka_cli_key(&((tp_opts *)ctx)->kafka, arg, val, err, errlen);
}

/* Parse argv; 0 ok, 1 --help, 2 usage error (printed). */
static int tp_parse(int argc, char **argv, tp_opts *o) {
    char err[PL_ERR_LEN];
    memset(o, 0, sizeof *o);
    o->partitions = 12;
    o->replication = 0;
    o->min_isr = 0;
    o->startup_s = 30;
    cm_topics_prefix(&o->topics, "parley", err, sizeof err);
    snprintf(o->dlq, sizeof o->dlq, "parley.dlq");
    snprintf(o->status, sizeof o->status, "parley.status");
    snprintf(o->stored, sizeof o->stored, "parley.stored");
    const cli_opt opts[] = {
        CM_KAFKA_OPTS(&o->kafka),
        {"--partitions", NULL, CLI_INT, &o->partitions, 1, 100000, "N",
         "partitions of turns, tokens and responses (default 12; the DLQ and status get 1)", NULL},
        {"--replication-factor", NULL, CLI_INT, &o->replication, -1, 32767, "R",
         "replicas per partition (default: min(3, brokers); -1: the broker's default)", NULL},
        {"--min-insync-replicas", NULL, CLI_INT, &o->min_isr, -1, 32767, "M",
         "min.insync.replicas of the topics (default: 2 where R is 3, 1 where R is 1 or 2; "
         "-1: the broker's)",
         NULL},
        {"--topic-prefix", NULL, CLI_FN, NULL, 0, 0, "P",
         "topics P.turns, P.tokens, P.responses, P.dlq, P.status, P.stored (default parley)",
         tp_prefix_opt},
        {"--turns-topic", NULL, CLI_FN, o->topics.turns, 0, 0, "T", "ChatTurn topic",
         cm_topic_name_cli},
        {"--tokens-topic", NULL, CLI_FN, o->topics.tokens, 0, 0, "T", "TokenChunk topic",
         cm_topic_name_cli},
        {"--responses-topic", NULL, CLI_FN, o->topics.responses, 0, 0, "T", "TurnResult topic",
         cm_topic_name_cli},
        {"--dlq-topic", NULL, CLI_FN, NULL, 0, 0, "T", "DeadLetter topic", tp_dlq_opt},
        {"--status-topic", NULL, CLI_FN, NULL, 0, 0, "T", "worker status topic (compacted)",
         tp_status_opt},
        {"--stored-topic", NULL, CLI_FN, NULL, 0, 0, "T",
         "stored Responses topic (the gateway's gateway.topic.stored; compacted)", tp_stored_opt},
        {"--startup-timeout-s", NULL, CLI_U64, &o->startup_s, 1, 3600, "N",
         "give up (exit 1) when Kafka does not answer within N s (default 30)", NULL},
    };
    const cli_cmd cmd = {
        .name = "topics",
        .synopsis = "topics --brokers HOST:PORT [--config FILE] [--kafka.X VALUE]...\n"
                    "         [--partitions N] [--replication-factor R] [--min-insync-replicas M]\n"
                    "         [--topic-prefix P | --turns-topic T --tokens-topic T\n"
                    "         --responses-topic T --dlq-topic T --status-topic T\n"
                    "         --stored-topic T]\n"
                    "         [--startup-timeout-s N]",
        .about = "\nCreate the topics of a parley fleet: turns, tokens and responses with N\n"
                 "partitions (the turns topic's partition count bounds how many workers\n"
                 "share the load), the DLQ and the workers' status topic (compacted) with\n"
                 "1, and the gateway's stored Responses (N partitions, compacted).\n"
                 "Replication factor min(3, brokers) and, where it is 3,\n"
                 "min.insync.replicas 2 unless told otherwise.  Existing\n"
                 "topics are left as they are (a warning when replicated fewer times).\n"
                 "Exit status: 0 all six exist afterwards, 1 failure, 2 usage.\n\n",
        .opts = opts,
        .n_opts = CLI_NOPTS(opts),
        .unknown = tp_kafka_key,
    };
    o->kafka.cmd = "topics";
    o->kafka.roles = CM_KAFKA_ADMIN;
    return cm_kafka_cli_parse(&cmd, &o->kafka, argc, argv, o);
}

/* Partitions and replication factor (replicas of its first partition) of
 * an existing topic, from metadata; -1 each when unknown. */
static void tp_describe(rd_kafka_t *rk, const char *topic, int *parts, int *rf) {
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);
    const struct rd_kafka_metadata *md = NULL;
    *parts = *rf = -1;
    if (rkt && rd_kafka_metadata(rk, 0, rkt, &md, cm_startup_left_ms()) == 0 &&
        md->topic_cnt == 1 && !md->topics[0].err) {
        *parts = md->topics[0].partition_cnt;
        if (md->topics[0].partition_cnt > 0) *rf = md->topics[0].partitions[0].replica_cnt;
    }
    if (md) rd_kafka_metadata_destroy(md);
    if (rkt) rd_kafka_topic_destroy(rkt);
}

/* The number of brokers in the cluster (metadata), or -1 when Kafka did not
 * answer in time or refused parley (err: the line to print). */
static int tp_brokers(cm_kafka *k, rd_kafka_t *rk, char *err, size_t errlen) {
    const struct rd_kafka_metadata *md = NULL;
    snprintf(err, errlen, "metadata from %.300s", cm_kafka_brokers(k));
    cm_startup_wait(err);
    rd_kafka_resp_err_t me = cm_kafka_metadata_get(k, rk, NULL, cm_startup_left_ms(), &md);
    if (me) {
        if (cm_kafka_refusal_msg(k)) snprintf(err, errlen, "%s", cm_kafka_refusal_msg(k));
        else if (me == RD_KAFKA_RESP_ERR__TIMED_OUT || cm_startup_expired())
            cm_startup_errf(err, errlen, CL_ETIMEDOUT);
        else snprintf(err, errlen, "metadata: %s", rd_kafka_err2str(me));
        return -1;
    }
    int n = md->broker_cnt;
    rd_kafka_metadata_destroy(md);
    return n;
}

/* The replication factor and min.insync.replicas to create with (-1: the
 * broker's default), from the options and the cluster's broker count.
 * min.insync.replicas is set with the replication factor it belongs to: 2
 * for 3 replicas, 1 for 1 or 2 (a broker default of 2, right for the
 * cluster's RF-3 topics, would refuse every write to an RF-1 topic). */
static void tp_plan(const tp_opts *o, int brokers, int *rf, int *min_isr) {
    *rf = o->replication ? o->replication : (brokers < 3 ? brokers : 3);
    *min_isr = o->min_isr ? o->min_isr : *rf == 3 ? 2 : (*rf == 1 || *rf == 2) ? 1 : -1;
}

int cl_cmd_topics(int argc, char **argv) {
    tp_opts o;
    int pr = tp_parse(argc, argv, &o);
    if (pr) {
        cm_kafka_cli_free(&o.kafka);
        return pr == 1 ? 0 : 2;
    }
    char e[512];
    cm_kafka *k = o.kafka.k;
    cm_kafka_spec spec = {.role = CM_KAFKA_ADMIN};
    rd_kafka_t *rk = NULL;
    if (cm_kafka_client_new(k, &spec, "admin client", &rk, e, sizeof e) != 0) {
        fprintf(stderr, "topics: %s\n", e);
        cm_kafka_cli_free(&o.kafka);
        return 1;
    }
    cm_startup_begin("topics", "--startup-timeout-s", (int64_t)o.startup_s * 1000);
    const char *names[TP_N] = {o.topics.turns, o.topics.tokens, o.topics.responses,
                               o.dlq,          o.status,        o.stored};
    int brokers = tp_brokers(k, rk, e, sizeof e);
    if (brokers < 0) {
        fprintf(stderr, "topics: %s\n", e);
        cm_startup_end();
        rd_kafka_destroy(rk);
        cm_kafka_cli_free(&o.kafka);
        return 1;
    }
    int rf, min_isr;
    tp_plan(&o, brokers, &rf, &min_isr);
    char isr_s[16];
    snprintf(isr_s, sizeof isr_s, "%d", min_isr);
    rd_kafka_NewTopic_t *nt[TP_N];
    for (int i = 0; i < TP_N; i++)
        if (!(nt[i] = rd_kafka_NewTopic_new(
                  names[i], i == TP_DLQ || i == TP_STATUS ? 1 : o.partitions, rf, e, sizeof e)) ||
            (min_isr > 0 &&
             rd_kafka_NewTopic_set_config(nt[i], "min.insync.replicas", isr_s) != 0) ||
            ((i == TP_STATUS || i == TP_STORED) &&
             rd_kafka_NewTopic_set_config(nt[i], "cleanup.policy", "compact") != 0)) {
            fprintf(stderr, "topics: %s: %s\n", names[i], nt[i] ? "topic configuration" : e);
            for (int k = 0; k <= i; k++)
                if (nt[k]) rd_kafka_NewTopic_destroy(nt[k]);
            cm_startup_end();
            rd_kafka_destroy(rk);
            cm_kafka_cli_free(&o.kafka);
            return 2;
        }
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    rd_kafka_AdminOptions_t *ao = rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_CREATETOPICS);
    int left = cm_startup_left_ms();
    rd_kafka_AdminOptions_set_request_timeout(ao, left, NULL, 0);
    rd_kafka_AdminOptions_set_operation_timeout(ao, left, NULL, 0);
    snprintf(e, sizeof e, "CreateTopics from %.300s", cm_kafka_brokers(k));
    cm_startup_wait(e);
    rd_kafka_CreateTopics(rk, nt, TP_N, ao, q);
    rd_kafka_event_t *ev = cm_kafka_event_wait(k, rk, q, left + 1000);
    int rc = 1;
    size_t n_res = 0;
    const rd_kafka_topic_result_t **res =
        ev && !rd_kafka_event_error(ev)
            ? rd_kafka_CreateTopics_result_topics(rd_kafka_event_CreateTopics_result(ev), &n_res)
            : NULL;
    for (size_t i = 0; i < n_res; i++) /* an authorization error is a refusal: one line */
        if (cm_kafka_refusal_class(rd_kafka_topic_result_error(res[i]), NULL))
            cm_kafka_refusal_note(k, rd_kafka_topic_result_error(res[i]),
                                  rd_kafka_topic_result_error_string(res[i]));
    if (ev && rd_kafka_event_error(ev))
        cm_kafka_refusal_note(k, rd_kafka_event_error(ev), rd_kafka_event_error_string(ev));
    if (cm_kafka_refusal_msg(k)) {
        fprintf(stderr, "topics: %s\n", cm_kafka_refusal_msg(k));
    } else if (!ev) {
        cm_startup_errf(e, sizeof e, CL_ETIMEDOUT);
        fprintf(stderr, "topics: %s\n", e);
    } else if (rd_kafka_event_error(ev)) {
        if (rd_kafka_event_error(ev) == RD_KAFKA_RESP_ERR__TIMED_OUT)
            cm_startup_errf(e, sizeof e, CL_ETIMEDOUT);
        else snprintf(e, sizeof e, "%s", rd_kafka_event_error_string(ev));
        fprintf(stderr, "topics: %s\n", e);
    } else {
        rc = 0;
        for (size_t i = 0; i < n_res; i++) {
            const char *t = rd_kafka_topic_result_name(res[i]);
            rd_kafka_resp_err_t te = rd_kafka_topic_result_error(res[i]);
            if (!te) {
                char rf_s[48] = "the broker's default", isr_p[48] = "the broker's default";
                int np = strcmp(t, o.dlq) && strcmp(t, o.status) ? o.partitions : 1;
                if (rf > 0) snprintf(rf_s, sizeof rf_s, "%d", rf);
                if (min_isr > 0) snprintf(isr_p, sizeof isr_p, "%d", min_isr);
                printf("created  %s (%d partition%s, replication factor %s, "
                       "min.insync.replicas %s%s)\n",
                       t, np, np != 1 ? "s" : "", rf_s, isr_p,
                       strcmp(t, o.status) && strcmp(t, o.stored) ? "" : ", compacted");
            } else if (te == RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS) {
                int p, r;
                tp_describe(rk, t, &p, &r);
                printf("exists   %s (%d partition%s, replication factor %d)\n", t, p,
                       p == 1 ? "" : "s", r);
                int want = brokers < 3 ? brokers : 3;
                if (r > 0 && r < want)
                    fprintf(stderr,
                            "topics: warning: %s has replication factor %d on a cluster of %d "
                            "brokers: losing the broker%s holding it stops or loses its records "
                            "(raise it with Kafka's kafka-reassign-partitions, or recreate the "
                            "topic with --replication-factor %d)\n",
                            t, r, brokers, r == 1 ? "" : "s", want);
            } else {
                fprintf(stderr, "topics: %s: %s\n", t,
                        rd_kafka_topic_result_error_string(res[i])
                            ? rd_kafka_topic_result_error_string(res[i])
                            : rd_kafka_err2str(te));
                rc = 1;
            }
        }
    }
    cm_startup_end();
    if (ev) rd_kafka_event_destroy(ev);
    rd_kafka_AdminOptions_destroy(ao);
    rd_kafka_queue_destroy(q);
    for (int i = 0; i < TP_N; i++)
        if (nt[i]) rd_kafka_NewTopic_destroy(nt[i]);
    rd_kafka_destroy(rk);
    cm_kafka_cli_free(&o.kafka);
    return rc;
}
