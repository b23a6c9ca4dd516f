/*
 * cl_topics.c -- `parley topics`: create the four topics a parley fleet
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
 * with replication factor --replication-factor R (default -1: the broker's
 * default.replication.factor).  A topic that exists already is left as it
 * is and reported with its partition count; that is not an error.
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

/* Options of `parley topics`. */
typedef struct tp_opts {
    cl_kafka_cli kafka; /* --brokers, --config, --kafka.*: the Kafka layer */
    cl_topics topics;   /* turns / tokens / responses names */
    char dlq[256];      /* DeadLetter topic name */
    int partitions;     /* of turns, tokens, responses */
    int replication;    /* replication factor (-1: broker default) */
    uint64_t startup_s; /* bound on the waits for Kafka */
} tp_opts;

static int tp_dlq_opt(void *ctx, const cli_opt *o, const char *val, char *err, size_t errlen) {
    tp_opts *t = ctx;
    return cl_topic_set(t->dlq, val, err, errlen);
}

static int tp_prefix_opt(void *ctx, const cli_opt *o, const char *val, char *err, size_t errlen) {
    tp_opts *t = ctx;
    if (cl_topics_prefix(&t->topics, val, err, errlen) != 0) return -1;
    snprintf(t->dlq, sizeof t->dlq, "%s.dlq", val);
    return 0;
}

/* --kafka.X VALUE (cli_unknown_fn). */
static int tp_kafka_key(void *ctx, const char *arg, const char *val, char *err, size_t errlen) {
    return cl_kafka_cli_key(&((tp_opts *)ctx)->kafka, arg, val, err, errlen);
}

/* Parse argv; 0 ok, 1 --help, 2 usage error (printed). */
static int tp_parse(int argc, char **argv, tp_opts *o) {
    char err[PL_ERR_LEN];
    memset(o, 0, sizeof *o);
    o->partitions = 12;
    o->replication = -1;
    o->startup_s = 30;
    cl_topics_prefix(&o->topics, "parley", err, sizeof err);
    snprintf(o->dlq, sizeof o->dlq, "parley.dlq");
    const cli_opt opts[] = {
        CL_KAFKA_OPTS(&o->kafka),
        {"--partitions", NULL, CLI_INT, &o->partitions, 1, 100000, "N",
         "partitions of turns, tokens and responses (default 12; the DLQ gets 1)", NULL},
        {"--replication-factor", NULL, CLI_INT, &o->replication, -1, 32767, "R",
         "replicas per partition (default -1: the broker's default)", NULL},
        {"--topic-prefix", NULL, CLI_FN, NULL, 0, 0, "P",
         "topics P.turns, P.tokens, P.responses, P.dlq (default parley)", tp_prefix_opt},
        {"--turns-topic", NULL, CLI_FN, o->topics.turns, 0, 0, "T", "ChatTurn topic",
         cl_topic_name_cli},
        {"--tokens-topic", NULL, CLI_FN, o->topics.tokens, 0, 0, "T", "TokenChunk topic",
         cl_topic_name_cli},
        {"--responses-topic", NULL, CLI_FN, o->topics.responses, 0, 0, "T", "TurnResult topic",
         cl_topic_name_cli},
        {"--dlq-topic", NULL, CLI_FN, NULL, 0, 0, "T", "DeadLetter topic", tp_dlq_opt},
        {"--startup-timeout-s", NULL, CLI_U64, &o->startup_s, 1, 3600, "N",
         "give up (exit 1) when Kafka does not answer within N s (default 30)", NULL},
    };
    const cli_cmd cmd = {
        .name = "topics",
        .synopsis = "topics --brokers HOST:PORT [--config FILE] [--kafka.X VALUE]...\n"
                    "         [--partitions N] [--replication-factor R]\n"
                    "         [--topic-prefix P | --turns-topic T --tokens-topic T\n"
                    "         --responses-topic T --dlq-topic T] [--startup-timeout-s N]",
        .about = "\nCreate the topics of a parley fleet: turns, tokens and responses with N\n"
                 "partitions (the turns topic's partition count bounds how many workers\n"
                 "share the load), the DLQ with 1.  Existing topics are left as they are.\n"
                 "Exit status: 0 all four exist afterwards, 1 failure, 2 usage.\n\n",
        .opts = opts,
        .n_opts = CLI_NOPTS(opts),
        .unknown = tp_kafka_key,
    };
    o->kafka.cmd = "topics";
    o->kafka.roles = CM_KAFKA_ADMIN;
    return cl_kafka_cli_parse(&cmd, &o->kafka, argc, argv, o);
}

/* Partitions of an existing topic (from metadata), or -1. */
static int tp_partitions(rd_kafka_t *rk, const char *topic) {
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);
    const struct rd_kafka_metadata *md = NULL;
    int n = -1;
    if (rkt && rd_kafka_metadata(rk, 0, rkt, &md, cm_startup_left_ms()) == 0 &&
        md->topic_cnt == 1 && !md->topics[0].err)
        n = md->topics[0].partition_cnt;
    if (md) rd_kafka_metadata_destroy(md);
    if (rkt) rd_kafka_topic_destroy(rkt);
    return n;
}

int cl_cmd_topics(int argc, char **argv) {
    tp_opts o;
    int pr = tp_parse(argc, argv, &o);
    if (pr) {
        cl_kafka_cli_free(&o.kafka);
        return pr == 1 ? 0 : 2;
    }
    char e[512];
    cm_kafka *k = o.kafka.k;
    cm_kafka_spec spec = {.role = CM_KAFKA_ADMIN};
    rd_kafka_t *rk = NULL;
    if (cm_kafka_client_new(k, &spec, "admin client", &rk, e, sizeof e) != 0) {
        fprintf(stderr, "topics: %s\n", e);
        cl_kafka_cli_free(&o.kafka);
        return 1;
    }
    cm_startup_begin("topics", "--startup-timeout-s", (int64_t)o.startup_s * 1000);
    const char *names[4] = {o.topics.turns, o.topics.tokens, o.topics.responses, o.dlq};
    rd_kafka_NewTopic_t *nt[4];
    for (int i = 0; i < 4; i++)
        if (!(nt[i] = rd_kafka_NewTopic_new(names[i], i < 3 ? o.partitions : 1, o.replication, e,
                                            sizeof e))) {
            fprintf(stderr, "topics: %s: %s\n", names[i], e);
            for (int k = 0; k < i; k++) rd_kafka_NewTopic_destroy(nt[k]);
            rd_kafka_destroy(rk);
            cl_kafka_cli_free(&o.kafka);
            return 2;
        }
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    rd_kafka_AdminOptions_t *ao = rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_CREATETOPICS);
    int left = cm_startup_left_ms();
    rd_kafka_AdminOptions_set_request_timeout(ao, left, NULL, 0);
    rd_kafka_AdminOptions_set_operation_timeout(ao, left, NULL, 0);
    snprintf(e, sizeof e, "CreateTopics from %.300s", cm_kafka_brokers(k));
    cm_startup_wait(e);
    rd_kafka_CreateTopics(rk, nt, 4, ao, q);
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
                printf("created  %s (%d partition%s)\n", t, strcmp(t, o.dlq) ? o.partitions : 1,
                       strcmp(t, o.dlq) && o.partitions != 1 ? "s" : "");
            } else if (te == RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS) {
                int p = tp_partitions(rk, t);
                printf("exists   %s (%d partition%s)\n", t, p, p == 1 ? "" : "s");
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
    for (int i = 0; i < 4; i++)
        if (nt[i]) rd_kafka_NewTopic_destroy(nt[i]);
    rd_kafka_destroy(rk);
    cl_kafka_cli_free(&o.kafka);
    return rc;
}
