/*
 * wk_worker.h -- the Kafka worker: chat turns in, streamed tokens and
 * exactly-once replies out.
 *
 * Purpose.  One wk_worker joins the consumer group of the turns topic
 * (cooperative-sticky assignment), decodes every ChatTurn, renders and
 * tokenizes it with the model's chat template, and submits it to the
 * continuous-batching scheduler.  Turns of one conversation (one record
 * key) run one after another in consumption order; different
 * conversations run concurrently.  Streaming turns publish TokenChunks
 * through an idempotent producer under a per-attempt id.  Every finished
 * turn's TurnResult -- and a DeadLetter for every rejected record -- is
 * produced by a transactional producer in the same transaction that
 * commits the input offsets (per partition, the lowest unfinished offset),
 * several turns per transaction on a short timer: a read_committed reader
 * sees exactly one TurnResult per turn, across crashes and rebalances.
 * W3C traceparent headers are copied from input to outputs.
 *
 * Threading.  wk_worker_run is the poll loop and owns the Kafka handles;
 * it never waits for inference.  The scheduler's loop thread computes and
 * its delivery thread runs the token/done callbacks, which produce chunks
 * and hand finished turns back to the poll loop through a locked list.
 * wk_worker_stop is async-signal-safe.
 *
 * Ownership.  The worker keeps a pointer to the configuration (must
 * outlive it) and owns the model, tokenizer, cache, scheduler and Kafka
 * handles.
 *
 * Failure behaviour.  Bad input never stops the worker (DLQ).  create
 * fails with a message for bad configuration, an unreadable model or
 * Kafka handles that cannot be made.  Broker outages are ridden out: a
 * fatal transactional-producer error that is not a fence (e.g. the
 * coordinator aborted a transaction during an outage longer than
 * transaction.timeout.ms) makes the worker keep its turns and batch,
 * rebuild the producer with the same transactional.id, drop the batch
 * outputs the committed offsets show as already visible, and carry on
 * (wk_txn.c).  run
 * returns an error for a fenced producer (another instance took the
 * worker.id) or a producer that cannot be rebuilt.  Backpressure pauses
 * the partitions while in-flight turns or KV blocks held by running
 * sequences pass their marks (worker.max_inflight, worker.pause_kv_pct).
 * Nothing here prints
 * except one structured log line per notable event on stderr
 * (`ts=... level=... event=... key=value...`).
 */
#ifndef WK_WORKER_H
#define WK_WORKER_H

#include <stddef.h>

#include "wk_config.h"

#define WK_EINVAL (-1301)    /* bad configuration (message names the key) */
#define WK_ENOMEM (-1302)    /* out of memory */
#define WK_ETIMEDOUT (-1309) /* start-up passed worker.startup_timeout_ms (cm_startup.h) */
#define WK_EMODEL (-1310)    /* model, tokenizer or template could not be loaded */
#define WK_EKAFKA (-1311)    /* Kafka client creation or a fatal Kafka error */
#define WK_EREFUSED \
    (-1312) /* Kafka refused the worker: SASL authentication, TLS
                          * verification or an ACL (the message says which) */

typedef struct wk_worker wk_worker; /* opaque */

/* Load the model, build the cache and scheduler, create the consumer and
 * both producers and initialise transactions (fencing an older instance
 * with the same worker.id).  Returns 0 or a WK_E* code with a message;
 * WK_EREFUSED as soon as a client reports that the cluster refuses it,
 * instead of retrying a wrong password or an untrusted CA forever. */
int wk_worker_create(const cm_config *cfg, wk_worker **out, char *err, size_t errlen);

/* Run the poll loop until wk_worker_stop.  After a stop request: stop
 * fetching, let in-flight turns finish within worker.grace_ms (cancel the
 * rest), commit what finished, leave the group.  Returns 0 after a clean
 * shutdown, WK_EKAFKA when the producer was fenced or could not be
 * rebuilt, WK_EREFUSED when the cluster starts refusing the worker
 * (credentials, certificate, ACLs): it stops at once without committing,
 * so the turns it had consumed are served again by whoever reads the
 * partitions next. */
int wk_worker_run(wk_worker *w, char *err, size_t errlen);

/* Request shutdown (fast != 0: cancel in-flight turns at once).
 * Async-signal-safe. */
void wk_worker_stop(wk_worker *w, int fast);

/* Free everything (after run returned, or instead of run). */
void wk_worker_free(wk_worker *w);

/* Process-wide: log lines below level ("info", "warn" or "error") are not
 * written (default: all).  `parley demo` keeps only warnings and errors so
 * they do not break its conversation view. */
void wk_log_set_level(const char *level);

/* parley worker (wk_cmd_worker.c) (argv[0] = the subcommand name; returns 0 success, 1 runtime failure, 2
 * usage error; --help prints usage, as eng_cli.h's commands) */
int wk_cmd_worker(int argc, char **argv);

#endif
