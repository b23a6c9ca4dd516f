/*
 * cl_client.h -- Kafka client plumbing shared by `parley chat`, `parley
 * load`, `parley batch`, `parley topics`, `parley demo` and the gateway
 * (the client side of schemas/README.md).  Every client is built through
 * the common Kafka layer (consumer/common/cm_kafka.h), so the kafka.* keys
 * (SASL/SSL, tuning) reach it.
 *
 * Purpose.  The clients produce ChatTurns keyed by conversation id with
 * the parley content-type header, read TokenChunks (read_uncommitted) and
 * TurnResults (read_committed), and keep each conversation's message
 * history to send in full every turn.  This header gathers that code.
 *
 * Data layout.  A cl_history is a growable array of sch_message whose
 * contents are malloc'd copies owned by the history.  Readers are plain
 * librdkafka consumer handles assigned (no group membership, no commits)
 * to every partition of one topic at that partition's end offset as of
 * creation, so a client sees exactly the records produced after it
 * started, with no rebalance delay and no race against its first turn.
 *
 * Threading.  Single-threaded: each handle belongs to the thread that made
 * it.
 *
 * Ownership.  Handles returned by the *_new functions are owned by the
 * caller (rd_kafka_destroy; close readers with cl_reader_free).
 *
 * Failure behaviour.  Functions return 0 or -1 and write a message into
 * err; nothing here exits, and only cl_kafka_cli_parse prints (usage
 * errors, --help, as cli_parse does).
 */
#ifndef CL_CLIENT_H
#define CL_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include <librdkafka/rdkafka.h>

#include "cli_opt.h"
#include "cm_config.h"
#include "cm_kafka.h"
#include "pl_err.h"
#include "sch.h"

/* The clients' error codes (pl_err.h range -1500). */
#define CL_EINVAL PL_ERR_CODE(PL_ERR_CL, PL_EINVAL)       /* a bad name or option */
#define CL_ENOMEM PL_ERR_CODE(PL_ERR_CL, PL_ENOMEM)       /* out of memory */
#define CL_ETIMEDOUT PL_ERR_CODE(PL_ERR_CL, PL_ETIMEDOUT) /* start-up deadline passed */
#define CL_EKAFKA (PL_ERR_CL - 10)                        /* Kafka refused or failed */
#define CL_ENOTOPIC (PL_ERR_CL - 11) /* a topic does not exist (parley topics creates them) */
#define CL_EREFUSED (PL_ERR_CL - 12) /* the cluster refused a client (credentials, TLS, ACLs) */

/* Topic names the clients use. */
typedef struct cl_topics {
    char turns[256];     /* ChatTurn input topic of the workers */
    char tokens[256];    /* TokenChunk stream topic */
    char responses[256]; /* TurnResult topic */
} cl_topics;

/* Conversation history sent with every turn. */
typedef struct cl_history {
    sch_message *msgs; /* messages oldest first; content malloc'd here */
    size_t n;          /* messages in use */
    size_t cap;        /* messages allocated */
} cl_history;

/* Set the topics to PREFIX.turns / .tokens / .responses.  Returns 0, or
 * -1 when the prefix is empty or too long. */
int cl_topics_prefix(cl_topics *t, const char *prefix, char *err, size_t errlen);

/* Copy a topic name into dst[256]; -1 when empty or too long. */
int cl_topic_set(char *dst, const char *name, char *err, size_t errlen);

/* The topic options the clients take: CL_TOPIC_OPTS(t) gives the
 * four rows of an option table over a cl_topics *t
 * (--topic-prefix, --turns-topic, --tokens-topic, --responses-topic).
 * Applied in argv order, so a later option overrides an earlier one.  The
 * callbacks: cl_topic_cli sets all three from a prefix (row dst =
 * the cl_topics), cl_topic_name_cli one name (dst = its
 * char[256]). */
int cl_topic_cli(void *ctx, const cli_opt *o, const char *val, char *err, size_t errlen);
int cl_topic_name_cli(void *ctx, const cli_opt *o, const char *val, char *err, size_t errlen);
#define CL_TOPIC_OPTS(t)                                                                             \
    {"--topic-prefix",                                                                               \
     NULL,                                                                                           \
     CLI_FN,                                                                                         \
     (t),                                                                                            \
     0,                                                                                              \
     0,                                                                                              \
     "P",                                                                                            \
     "topics P.turns, P.tokens, P.responses (default parley)",                                       \
     cl_topic_cli},                                                                                  \
        {"--turns-topic", NULL, CLI_FN, (t)->turns, 0, 0, "T", "ChatTurn topic", cl_topic_name_cli}, \
        {"--tokens-topic", NULL, CLI_FN, (t)->tokens, 0, 0, "T", "TokenChunk topic",                 \
         cl_topic_name_cli},                                                                         \
    {                                                                                                \
        "--responses-topic", NULL, CLI_FN, (t)->responses, 0, 0, "T", "TurnResult topic",            \
            cl_topic_name_cli                                                                        \
    }

/* The Kafka options of the command-line clients (chat, load, batch,
 * topics), the same keys the worker and the gateway take: `--brokers
 * HOST:PORT` (kafka.bootstrap.servers), `--kafka.PROPERTY VALUE` (any
 * kafka.* key, cm_kafka.h) and `--config FILE` (`key = value` lines of
 * kafka.* keys, applied before every flag whatever its place).  Not the
 * environment.  After parsing, cfg holds the keys and k the command's
 * Kafka layer. */
typedef struct cl_kafka_cli {
    const char *cmd; /* the command ("chat"), for messages */
    unsigned roles;  /* CM_KAFKA_* roles of the clients the command builds */
    int phase;       /* parse pass: 1 --config files, 2 --brokers and --kafka.* flags */
    cm_config *cfg;  /* the kafka.* keys (a configuration without a table) */
    cm_kafka *k;     /* the Kafka layer over cfg, once parsed */
} cl_kafka_cli;

/* The rows of an option table over a cl_kafka_cli *kc: --brokers and
 * --config.  Their callbacks take kc as the row's dst. */
int cl_kafka_cli_brokers(void *ctx, const cli_opt *o, const char *val, char *err, size_t errlen);
int cl_kafka_cli_config(void *ctx, const cli_opt *o, const char *val, char *err, size_t errlen);
#define CL_KAFKA_OPTS(kc)                                                      \
    {"--brokers",                                                              \
     NULL,                                                                     \
     CLI_FN,                                                                   \
     (kc),                                                                     \
     0,                                                                        \
     0,                                                                        \
     "HOST:PORT",                                                              \
     "Kafka bootstrap servers (kafka.bootstrap.servers; required)",            \
     cl_kafka_cli_brokers},                                                    \
    {                                                                          \
        "--config", NULL, CLI_FN, (kc), 0, 0, "FILE",                          \
            "`kafka.X = value` lines (SASL/SSL, tuning; before every flag);\n" \
            "--kafka.X VALUE sets one key (consumer/CONFIG.md)",               \
            cl_kafka_cli_config                                                \
    }

/* The unknown-option hook's share: `--kafka.X VALUE` goes to kc (in pass
 * 2); anything else is an unknown option (-2).  Returns as a
 * cli_unknown_fn. */
int cl_kafka_cli_key(cl_kafka_cli *kc, const char *arg, const char *val, char *err, size_t errlen);

/* Parse argv in two passes (--config files first, then every flag in
 * argv order), require kafka.bootstrap.servers, validate the keys
 * (librdkafka's names and values, cm_kafka_config_check for kc->roles)
 * and build kc->k.  kc must be zeroed but for cmd and roles; cmd's table
 * holds CL_KAFKA_OPTS(kc) and its unknown hook calls cl_kafka_cli_key.
 * Returns CLI_OK, CLI_HELP or CLI_USAGE (printed; a refused key is named).
 * cl_kafka_cli_free releases kc whatever the result. */
int cl_kafka_cli_parse(const cli_cmd *cmd, cl_kafka_cli *kc, int argc, char **argv, void *ctx);
void cl_kafka_cli_free(cl_kafka_cli *kc);

/* Append a message (content copied).  Returns 0 or -1 out of memory. */
int cl_history_push(cl_history *h, sch_role role, const char *content, size_t len);

/* Free every message and the array; the history is empty afterwards. */
void cl_history_free(cl_history *h);

/* An idempotent producer built through the Kafka layer k (cm_kafka.h:
 * the command's kafka.* keys, linger 1 ms) that has already fetched the
 * metadata of `topic` (within timeout_ms; the topic must exist).  NULL
 * with a message on failure (cl_kafka_errf's; a refusal by the cluster --
 * credentials, certificate, ACLs -- ends the wait at once and is the
 * message).  The clients pass cm_startup_left_ms(): start-up waits are
 * bounded by their --startup-timeout-s (cm_startup.h), and so are the
 * readers below. */
rd_kafka_t *cl_producer_new(cm_kafka *k, const char *topic, int timeout_ms, char *err,
                            size_t errlen);

/* The message for Kafka error e about topic: a refusal recorded by k (or
 * an authorization error) is k's refusal line; a missing topic names the
 * `parley topics` command that creates it; a timeout (or the start-up
 * deadline passed) is cm_startup_errf's give-up line. */
void cl_kafka_errf(char *err, size_t errlen, cm_kafka *k, const char *topic, rd_kafka_resp_err_t e);

/* Encode `t` and produce it to `topic`, key = conversation id, header
 * content-type.  Serves delivery callbacks without blocking.  Returns 0 or
 * -1 (encoding refused, queue full after retrying for a second). */
int cl_turn_send(rd_kafka_t *producer, const char *topic, const sch_turn *t, char *err,
                 size_t errlen);

/* As cl_turn_send, plus a `parley-namespace` header with ns_header
 * when not NULL (for workers with worker.namespace_from = header). */
int cl_turn_send_ns(rd_kafka_t *producer, const char *topic, const sch_turn *t,
                    const char *ns_header, char *err, size_t errlen);

/* As cl_reader_new, over every partition of several topics (one
 * handle, one isolation level). */
rd_kafka_t *cl_reader_new_topics(cm_kafka *k, const char *const *topics, size_t n_topics,
                                 int committed, int timeout_ms, char *err, size_t errlen);

/* A reader (cm_kafka.h's CM_KAFKA_READER: no group membership, no
 * commits) of every partition of `topic` from its current end, with
 * isolation read_committed when `committed` else read_uncommitted.  The
 * topic must exist; a just-created one whose partitions lack a leader
 * is retried until timeout_ms passes.
 * NULL with a message on failure. */
rd_kafka_t *cl_reader_new(cm_kafka *k, const char *topic, int committed, int timeout_ms, char *err,
                          size_t errlen);

/* Close and destroy a reader (NULL is fine). */
void cl_reader_free(rd_kafka_t *rk);

/* Parse a whole unsigned integer in [lo, hi] (cli_parse_u64); -1 otherwise. */
int cl_parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out);

/* Parse "MIN:MAX" (or "N" for N:N) with lo <= MIN <= MAX <= hi; -1
 * otherwise. */
int cl_parse_range(const char *s, uint64_t lo, uint64_t hi, uint64_t *min, uint64_t *max);

/* The clients' subcommands of `parley` (argv[0] = the subcommand name; returns 0 success, 1 runtime failure, 2
 * usage error; --help prints usage, as eng_cli.h's commands) */
int cl_cmd_chat(int argc, char **argv);   /* parley chat (cl_chat.c) */
int cl_cmd_load(int argc, char **argv);   /* parley load (cl_load.c) */
int cl_cmd_demo(int argc, char **argv);   /* parley demo (cl_demo.c) */
int cl_cmd_topics(int argc, char **argv); /* parley topics (cl_topics.c) */

#endif
