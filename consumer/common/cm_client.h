/*
 * cm_client.h -- the clients' Kafka plumbing, shared by `parley chat`,
 * `load`, `topics`, `demo`, `batch` and the gateway (the client side of
 * schemas/README.md).  Every client is built through the common Kafka
 * layer (cm_kafka.h), so the kafka.* keys (SASL/SSL, tuning) reach it.
 *
 * Purpose.  The clients produce ChatTurns keyed by conversation id with
 * the parley content-type header, read TokenChunks (read_uncommitted) and
 * TurnResults (read_committed), and take the same topic and Kafka options
 * on their command lines.  This header gathers that code, so the gateway
 * and the batch runner reach Kafka through consumer/common, never through
 * another command's part.
 *
 * Data layout.  Readers are plain librdkafka consumer handles assigned
 * (no group membership, no commits) to every partition of one topic at
 * that partition's end offset as of creation, so a client sees exactly
 * the records produced after it started, with no rebalance delay and no
 * race against its first turn.
 *
 * Threading.  Single-threaded: each handle belongs to the thread that made
 * it.
 *
 * Ownership.  Handles returned by the *_new functions are owned by the
 * caller (rd_kafka_destroy; close readers with cm_reader_free).
 *
 * Failure behaviour.  Functions return 0 or -1 and write a message into
 * err (CM_KAFKA_E* codes, cm_kafka.h); nothing here exits, and only
 * cm_kafka_cli_parse prints (usage errors, --help, as cli_parse does).
 */
#ifndef CM_CLIENT_H
#define CM_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include <librdkafka/rdkafka.h>

#include "cli_opt.h"
#include "cm_config.h"
#include "cm_kafka.h"
#include "sch.h"

/* Topic names the clients use. */
typedef struct cm_topics {
    char turns[256];     /* ChatTurn input topic of the workers */
    char tokens[256];    /* TokenChunk stream topic */
    char responses[256]; /* TurnResult topic */
} cm_topics;

/* Set the topics to PREFIX.turns / .tokens / .responses.  Returns 0, or
 * -1 when the prefix is empty or too long. */
int cm_topics_prefix(cm_topics *t, const char *prefix, char *err, size_t errlen);

/* Copy a topic name into dst[256]; -1 when empty or too long. */
int cm_topic_set(char *dst, const char *name, char *err, size_t errlen);

/* The topic options the clients take: CM_TOPIC_OPTS(t) gives the
 * four rows of an option table over a cm_topics *t
 * (--topic-prefix, --turns-topic, --tokens-topic, --responses-topic).
 * Applied in argv order, so a later option overrides an earlier one.  The
 * callbacks: cm_topic_cli sets all three from a prefix (row dst =
 * the cm_topics), cm_topic_name_cli one name (dst = its
 * char[256]). */
int cm_topic_cli(void *ctx, const cli_opt *o, const char *val, char *err, size_t errlen);
int cm_topic_name_cli(void *ctx, const cli_opt *o, const char *val, char *err, size_t errlen);
#define CM_TOPIC_OPTS(t)                                                                             \
    {"--topic-prefix",                                                                               \
     NULL,                                                                                           \
     CLI_FN,                                                                                         \
     (t),                                                                                            \
     0,                                                                                              \
     0,                                                                                              \
     "P",                                                                                            \
     "topics P.turns, P.tokens, P.responses (default parley)",                                       \
     cm_topic_cli},                                                                                  \
        {"--turns-topic", NULL, CLI_FN, (t)->turns, 0, 0, "T", "ChatTurn topic", cm_topic_name_cli}, \
        {"--tokens-topic", NULL, CLI_FN, (t)->tokens, 0, 0, "T", "TokenChunk topic",                 \
         cm_topic_name_cli},                                                                         \
    {                                                                                                \
        "--responses-topic", NULL, CLI_FN, (t)->responses, 0, 0, "T", "TurnResult topic",            \
            cm_topic_name_cli                                                                        \
    }

/* The Kafka options of the command-line clients (chat, load, batch,
 * topics), the same keys the worker and the gateway take: `--brokers
 * HOST:PORT` (kafka.bootstrap.servers), `--kafka.PROPERTY VALUE` (any
 * kafka.* key, cm_kafka.h) and `--config FILE` (`key = value` lines of
 * kafka.* keys, applied before every flag whatever its place).  Not the
 * environment.  After parsing, cfg holds the keys and k the command's
 * Kafka layer. */
typedef struct cm_kafka_cli {
    const char *cmd; /* the command ("chat"), for messages */
    unsigned roles;  /* CM_KAFKA_* roles of the clients the command builds */
    int phase;       /* parse pass: 1 --config files, 2 --brokers and --kafka.* flags */
    cm_config *cfg;  /* the kafka.* keys (a configuration without a table) */
    cm_kafka *k;     /* the Kafka layer over cfg, once parsed */
} cm_kafka_cli;

/* The rows of an option table over a cm_kafka_cli *kc: --brokers and
 * --config.  Their callbacks take kc as the row's dst. */
int cm_kafka_cli_brokers(void *ctx, const cli_opt *o, const char *val, char *err, size_t errlen);
int cm_kafka_cli_config(void *ctx, const cli_opt *o, const char *val, char *err, size_t errlen);
#define CM_KAFKA_OPTS(kc)                                                      \
    {"--brokers",                                                              \
     NULL,                                                                     \
     CLI_FN,                                                                   \
     (kc),                                                                     \
     0,                                                                        \
     0,                                                                        \
     "HOST:PORT",                                                              \
     "Kafka bootstrap servers (kafka.bootstrap.servers; required)",            \
     cm_kafka_cli_brokers},                                                    \
    {                                                                          \
        "--config", NULL, CLI_FN, (kc), 0, 0, "FILE",                          \
            "`kafka.X = value` lines (SASL/SSL, tuning; before every flag);\n" \
            "--kafka.X VALUE sets one key (consumer/CONFIG.md)",               \
            cm_kafka_cli_config                                                \
    }

/* The unknown-option hook's share: `--kafka.X VALUE` goes to kc (in pass
 * 2); anything else is an unknown option (-2).  Returns as a
 * cli_unknown_fn. */
int cm_kafka_cli_key(cm_kafka_cli *kc, const char *arg, const char *val, char *err, size_t errlen);

/* Parse argv in two passes (--config files first, then every flag in
 * argv order), require kafka.bootstrap.servers, validate the keys
 * (librdkafka's names and values, cm_kafka_config_check for kc->roles)
 * and build kc->k.  kc must be zeroed but for cmd and roles; cmd's table
 * holds CM_KAFKA_OPTS(kc) and its unknown hook calls cm_kafka_cli_key.
 * Returns CLI_OK, CLI_HELP or CLI_USAGE (printed; a refused key is named).
 * cm_kafka_cli_free releases kc whatever the result. */
int cm_kafka_cli_parse(const cli_cmd *cmd, cm_kafka_cli *kc, int argc, char **argv, void *ctx);
void cm_kafka_cli_free(cm_kafka_cli *kc);

/* An idempotent producer built through the Kafka layer k (cm_kafka.h:
 * the command's kafka.* keys, linger 1 ms) that has already fetched the
 * metadata of `topic` (within timeout_ms; the topic must exist).  NULL
 * with a message on failure (cm_kafka_errf's; a refusal by the cluster --
 * credentials, certificate, ACLs -- ends the wait at once and is the
 * message).  The clients pass cm_startup_left_ms(): start-up waits are
 * bounded by their --startup-timeout-s (cm_startup.h), and so are the
 * readers below. */
rd_kafka_t *cm_producer_new(cm_kafka *k, const char *topic, int timeout_ms, char *err,
                            size_t errlen);

/* The message for Kafka error e about topic: a refusal recorded by k (or
 * an authorization error) is k's refusal line; a missing topic names the
 * `parley topics` command that creates it; a timeout (or the start-up
 * deadline passed) is cm_startup_errf's give-up line. */
void cm_kafka_errf(char *err, size_t errlen, cm_kafka *k, const char *topic, rd_kafka_resp_err_t e);

/* Encode `t` and produce it to `topic`, key = conversation id, header
 * content-type.  Serves delivery callbacks without blocking.  Returns 0 or
 * -1 (encoding refused, queue full after retrying for a second). */
int cm_turn_send(rd_kafka_t *producer, const char *topic, const sch_turn *t, char *err,
                 size_t errlen);

/* As cm_turn_send, plus a `parley-namespace` header with ns_header
 * when not NULL (for workers with worker.namespace_from = header). */
int cm_turn_send_ns(rd_kafka_t *producer, const char *topic, const sch_turn *t,
                    const char *ns_header, char *err, size_t errlen);

/* Produce a CancelTurn (spec 1.4) for (conv_id, turn_id) to the turns
 * topic, keyed by conv_id (the turn's partition), with the cancel
 * content-type; reason may be NULL.  0, or -1 with a message. */
int cm_cancel_send(rd_kafka_t *producer, const char *topic, const char *conv_id,
                   const char *turn_id, const char *reason, char *err, size_t errlen);

/* As cm_reader_new, over every partition of several topics (one
 * handle, one isolation level). */
rd_kafka_t *cm_reader_new_topics(cm_kafka *k, const char *const *topics, size_t n_topics,
                                 int committed, int timeout_ms, char *err, size_t errlen);

/* A reader (cm_kafka.h's CM_KAFKA_READER: no group membership, no
 * commits) of every partition of `topic` from its current end, with
 * isolation read_committed when `committed` else read_uncommitted.  The
 * topic must exist; a just-created one whose partitions lack a leader
 * is retried until timeout_ms passes.
 * NULL with a message on failure. */
rd_kafka_t *cm_reader_new(cm_kafka *k, const char *topic, int committed, int timeout_ms, char *err,
                          size_t errlen);

/* Close and destroy a reader (NULL is fine). */
void cm_reader_free(rd_kafka_t *rk);

#endif
