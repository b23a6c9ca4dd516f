/*
 * cm_kafka.h -- the one Kafka layer of every parley command: which
 * `kafka.*` configuration key reaches which librdkafka client, and the
 * factories of every client parley makes (the worker's group consumer,
 * its transactional and idempotent producers; the gateway's and the
 * command-line clients' producers and readers; the admin client of
 * `parley topics`).
 *
 * Purpose.  A deployment that secures its cluster (SASL_SSL, a CA, ACLs)
 * sets kafka.security.protocol, kafka.sasl.*, kafka.ssl.* once, and every
 * parley program (worker, gateway, batch, chat, load, topics, demo) must
 * speak to it with them.  Before this layer only the worker applied
 * kafka.* keys; the others built their clients from a broker list alone
 * and connected in plaintext, silently.  Now every client of every
 * command is built here from the command's cm_config, so a key is either
 * applied or refused at start, naming it: never dropped.
 *
 * Scoping.  librdkafka knows every property as consumer-only (C),
 * producer-only (P) or common (*); setting a consumer property on a
 * producer works but logs a CONFWARN on every start.  The scope comes from
 * librdkafka's own property table (rd_kafka_conf_properties_show), read
 * once.  `kafka.consumer.X` / `kafka.producer.X` force X onto a command's
 * consumers (group consumer, readers) or onto its producers only; plain
 * `kafka.X` goes where librdkafka says X belongs (a property the table does
 * not list goes everywhere).  An admin client takes common properties
 * only.
 *
 * Refusing keys.  A command declares the roles of the clients it builds
 * (CM_KAFKA_GROUP | CM_KAFKA_PRODUCER for the worker, CM_KAFKA_READER |
 * CM_KAFKA_PRODUCER for the gateway and the clients, CM_KAFKA_ADMIN for
 * `parley topics`).  cm_kafka_config_check refuses, with CM_KAFKA_EINVAL
 * and a message naming the key: a key none of those clients takes (a
 * consumer property given to `parley topics`), and a key the layer sets
 * itself on a client that would take it (the readers' isolation.level and
 * group.id, a producer's transactional.id, the group consumer's offset
 * commits).  librdkafka's own refusal of a name or value is
 * cm_config_validate's (the same message form).  Commands run the check
 * with their configuration checks, so a refused key is a configuration
 * error (exit status 2), before any connection.
 *
 * Order of settings of one client: the layer's defaults for its role, the
 * caller's defaults (spec->defs), the user's kafka.* keys for that role,
 * the layer's forced settings for the role, the caller's forced settings
 * (spec->forced).  A user key that a forced setting would overwrite with
 * another value is refused (CM_KAFKA_EINVAL), not overwritten.
 *
 * Refusals by the cluster.  A client whose credentials, certificate or
 * ACLs the cluster refuses is told so by librdkafka through its error
 * callback (and by authorization error codes), while most calls just
 * retry until they time out.  The layer's error callback records the
 * first refusal in the cm_kafka (cm_kafka_refusal_msg), and the layer's
 * waits (cm_kafka_metadata_get, cm_kafka_event_wait) poll in short slices
 * and end as soon as one is recorded: a wrong password or a missing ACL
 * ends start-up at once with one line naming it, not at the deadline.
 * A reader's group is the exception: a reader carries a group id (the
 * consumer API wants one) that it never joins or commits to, and a refused
 * coordinator lookup for it (no group ACL) does no harm, so it is not a
 * refusal.  The worker keeps its own error callback (spec->error_cb) and
 * refusal state and uses cm_kafka_refusal_class to classify.
 *
 * Threading.  cm_kafka_new / cm_kafka_config_check / the factories run on
 * the command's start-up thread; the refusal record is written from
 * librdkafka's threads (atomics) and read from any thread.
 *
 * Ownership.  A cm_kafka borrows its cm_config (which must outlive it);
 * clients it builds belong to the caller and may outlive it only when they
 * were built with their own error callback (spec->error_cb).
 *
 * Failure behaviour.  Functions return 0 or a negative CM_KAFKA_E* code
 * with a message in err; nothing exits.  Only the layer's error callback
 * prints: librdkafka's errors that are not refusals, one line each to
 * stderr, as librdkafka itself does for a client without an error
 * callback.
 */
#ifndef CM_KAFKA_H
#define CM_KAFKA_H

#include <stddef.h>

#include <librdkafka/rdkafka.h>

#include "cm_config.h"
#include "pl_err.h"

/* Error codes (pl_err.h range -2000). */
#define CM_KAFKA_EINVAL PL_ERR_CODE(PL_ERR_CM_KAFKA, PL_EINVAL) /* a kafka.* key refused (named) */
#define CM_KAFKA_ENOMEM PL_ERR_CODE(PL_ERR_CM_KAFKA, PL_ENOMEM) /* allocation failed */
#define CM_KAFKA_ETIMEDOUT \
    PL_ERR_CODE(PL_ERR_CM_KAFKA, PL_ETIMEDOUT) /* the start-up deadline passed (cm_startup.h) */
#define CM_KAFKA_EKAFKA \
    (PL_ERR_CM_KAFKA - 10) /* librdkafka could not build the client, or failed */
#define CM_KAFKA_EREFUSED (PL_ERR_CM_KAFKA - 11) /* the cluster refused a client (auth, TLS, ACL) */
#define CM_KAFKA_ENOTOPIC \
    (PL_ERR_CM_KAFKA - 12) /* a topic does not exist (parley topics creates them) */

/* The kinds of client parley builds (bits: a command's set is their OR). */
typedef enum cm_kafka_role {
    CM_KAFKA_GROUP = 1,    /* group consumer (subscribe, its own commits): the worker's */
    CM_KAFKA_READER = 2,   /* plain consumer assigned to partitions, no group, no commits */
    CM_KAFKA_PRODUCER = 4, /* producer: idempotent, or transactional with spec->txn_id */
    CM_KAFKA_ADMIN = 8     /* admin client (CreateTopics): common properties only */
} cm_kafka_role;

/* Why the cluster refused a client (cm_kafka_refusal_class). */
#define CM_KAFKA_REFUSED_SASL 1 /* SASL authentication failed */
#define CM_KAFKA_REFUSED_TLS 2  /* the broker's certificate did not verify */
#define CM_KAFKA_REFUSED_ACL 3  /* not authorized (topic, group, cluster, transactional id) */

typedef struct cm_kafka cm_kafka; /* opaque: a command's Kafka layer */

/* What one client is: its role and the caller's own settings. */
typedef struct cm_kafka_spec {
    cm_kafka_role role;        /* which client (one bit) */
    const char *client_id;     /* client.id default, or NULL (librdkafka's) */
    const char *group_id;      /* CM_KAFKA_GROUP: the group (kafka.group.id overrides) */
    const char *txn_id;        /* CM_KAFKA_PRODUCER: transactional.id, or NULL (idempotent) */
    int committed;             /* CM_KAFKA_READER: read_committed (else read_uncommitted) */
    const char *const *defs;   /* caller's defaults: name, value pairs, NULL-terminated, or NULL */
    const char *const *forced; /* caller's forced settings, the same form, or NULL */
    /* the client's error callback and opaque; NULL: the layer's, which
     * records refusals in the cm_kafka (opaque = the cm_kafka) */
    void (*error_cb)(rd_kafka_t *rk, int err, const char *reason, void *opaque);
    void *opaque; /* opaque of every callback when error_cb is set */
    /* optional callbacks (NULL: none) */
    void (*rebalance_cb)(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                         rd_kafka_topic_partition_list_t *parts, void *opaque);
    void (*dr_msg_cb)(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque);
} cm_kafka_spec;

/* librdkafka's scope of a property: 'C' consumer, 'P' producer, '*' both
 * (also for names it does not list). */
char cm_kafka_prop_scope(const char *name);

/* The librdkafka property a kafka.* key (name without "kafka.") sets on a
 * client of role, or NULL when that client does not take it. */
const char *cm_kafka_prop_for(const char *name, cm_kafka_role role);

/* Refuse (CM_KAFKA_EINVAL, naming the key) every kafka.* key of cfg that
 * none of the clients in roles takes, or that the layer sets itself on one
 * of them (see "Refusing keys"); cmd names the command in the message.
 * A command's cm_config_check_fn calls it.  Returns 0 or the code. */
int cm_kafka_config_check(const cm_config *cfg, unsigned roles, const char *cmd, char *err,
                          size_t errlen);

/* A command's Kafka layer over cfg (borrowed) for clients of roles (runs
 * cm_kafka_config_check).  Returns 0, CM_KAFKA_EINVAL or CM_KAFKA_ENOMEM. */
int cm_kafka_new(const cm_config *cfg, unsigned roles, const char *cmd, cm_kafka **out, char *err,
                 size_t errlen);
void cm_kafka_free(cm_kafka *k);

/* kafka.bootstrap.servers of k's configuration, or of cfg ("" when
 * unset). */
const char *cm_kafka_brokers(const cm_kafka *k);
const char *cm_kafka_brokers_of(const cm_config *cfg);

/* The configuration of one client (see "Order of settings"), callbacks
 * set.  Returns 0 with *out (the caller's until rd_kafka_new takes it),
 * CM_KAFKA_EINVAL naming a refused key, or CM_KAFKA_EKAFKA. */
int cm_kafka_conf_new(cm_kafka *k, const cm_kafka_spec *s, rd_kafka_conf_t **out, char *err,
                      size_t errlen);

/* Build the client: cm_kafka_conf_new, then rd_kafka_new of the role's
 * type (consumers get rd_kafka_poll_set_consumer).  Returns 0 with *out,
 * or a CM_KAFKA_E* code (what names the client in librdkafka's message). */
int cm_kafka_client_new(cm_kafka *k, const cm_kafka_spec *s, const char *what, rd_kafka_t **out,
                        char *err, size_t errlen);

/* CM_KAFKA_REFUSED_* when error e (with librdkafka's reason) is the
 * cluster refusing the client, else 0 (transport errors, timeouts, TLS
 * errors other than certificate verification: librdkafka retries those). */
int cm_kafka_refusal_class(rd_kafka_resp_err_t e, const char *reason);

/* What a class of refusal means for the user, naming the keys to look at
 * (acl_hint, when not NULL, replaces the generic text of
 * CM_KAFKA_REFUSED_ACL).  "" for 0. */
const char *cm_kafka_refusal_text(int cls, const char *acl_hint);

/* Record a refusal (the first one wins; others and non-refusals are
 * ignored).  Any thread. */
void cm_kafka_refusal_note(cm_kafka *k, rd_kafka_resp_err_t e, const char *reason);

/* The recorded refusal's line ("Kafka refused parley CMD: WHAT: REASON"),
 * or NULL when none was recorded.  Any thread. */
const char *cm_kafka_refusal_msg(const cm_kafka *k);

/* Serve rk's callbacks without blocking (a consumer's through its
 * consumer queue: only before it is assigned or subscribed) and return 1
 * when a refusal is recorded, else 0. */
int cm_kafka_refused(cm_kafka *k, rd_kafka_t *rk);

/* rd_kafka_metadata of one topic (rkt) within timeout_ms, in slices that
 * serve rk's callbacks (cm_kafka_refused) in between: returns
 * RD_KAFKA_RESP_ERR_NO_ERROR with *md (the caller destroys it), librdkafka's
 * error, or as soon as a refusal is recorded, the refusal's code. */
rd_kafka_resp_err_t cm_kafka_metadata_get(cm_kafka *k, rd_kafka_t *rk, rd_kafka_topic_t *rkt,
                                          int timeout_ms, const struct rd_kafka_metadata **md);

/* Poll queue q (of rk) for an event within timeout_ms, in slices that serve
 * rk's callbacks: the event, or NULL at the timeout or once a refusal is
 * recorded. */
rd_kafka_event_t *cm_kafka_event_wait(cm_kafka *k, rd_kafka_t *rk, rd_kafka_queue_t *q,
                                      int timeout_ms);

#endif
