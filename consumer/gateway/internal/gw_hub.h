/*
 * gw_hub.h -- the gateway's Kafka side: produce ChatTurns, route the
 * TokenChunks and TurnResults that come back to the HTTP request waiting
 * for them.
 *
 * Purpose.  One idempotent producer sends every request's ChatTurn to the
 * turns topic (cm_client.h; both clients are built through the common Kafka
 * layer, cm_kafka.h, so the gateway's kafka.* keys reach them).  One reader, assigned at start to the end of
 * every partition of the tokens and responses topics with
 * isolation.level=read_committed (the tokens topic has no transactions,
 * so its chunks are visible at once; a TurnResult only once its
 * transaction committed), runs on the hub's own thread, decodes each
 * record and hands it to the request registered under its turn_id.
 * A request registers before its turn is produced, so no reply can be
 * missed.  The DLQ topic is read too: a DeadLetter naming a waiting turn
 * (refused before work: unknown model, context overflow, ...) answers it
 * with an error result carrying the DeadLetter's code and reason.
 *
 * Streaming rule.  A waiter keeps the chunks of one attempt: the first
 * attempt whose chunk arrives.  Chunks of another attempt replace it only
 * while it has produced no text (nor logprobs); later they are ignored
 * (the HTTP side then compares what it streamed with the committed
 * result, see gw_http.c).  Chunks are taken in seq order; a gap or a
 * duplicate is dropped (the result fills the rest in).  Each chunk with
 * text or logprobs becomes a gw_piece (its choice index, text, logprobs
 * as OpenAI's content entries) queued for the HTTP side.
 *
 * Threading.  gw_hub_send / gw_wait_poll / gw_hub_release may be called
 * from any number of threads (one per HTTP connection); a mutex guards
 * the table of waiters and each waiter has its own condition variable.
 *
 * Ownership.  A gw_wait belongs to the hub's table from gw_hub_send until
 * gw_hub_release, which the caller must call exactly once.  The result it
 * hands out stays valid until then.
 *
 * Failure behaviour.  Functions return 0 / -1 (or NULL) with a message in
 * err.  A record that does not decode, or names no waiting request (other
 * clients share the topics), is skipped.  The hub never exits the process.
 */
#ifndef GW_HUB_H
#define GW_HUB_H

#include <stddef.h>
#include <stdint.h>

#include "oa_openai.h"
#include "sch.h"
#include "cm_client.h"

typedef struct gw_hub gw_hub;   /* opaque */
typedef struct gw_wait gw_wait; /* one request in flight (opaque) */

/* What gw_hub_new needs. */
typedef struct gw_hub_conf {
    cm_kafka *kafka;  /* the Kafka layer the clients are built through (borrowed) */
    cm_topics topics; /* turns, tokens, responses */
    const char *dlq;  /* DeadLetter topic to watch, or NULL/"" */
    int timeout_ms;   /* start-up metadata timeout (the readers: cm_startup_left_ms) */
} gw_hub_conf;

/* Connect, assign the reader, start its thread.  0 or -1 (err). */
int gw_hub_new(const gw_hub_conf *conf, gw_hub **out, char *err, size_t errlen);

/* Stop the thread and free everything (NULL is fine).  Waiters must have
 * been released. */
void gw_hub_free(gw_hub *h);

/* Register t->turn_id, then produce t (with a parley-namespace header when
 * ns_header is set).  NULL (err) when producing failed. */
gw_wait *gw_hub_send(gw_hub *h, const sch_turn *t, const char *ns_header, char *err, size_t errlen);

/* One streamed chunk's contribution, as gw_wait_poll hands it out. */
typedef struct gw_piece {
    struct gw_piece *next; /* the next one, in seq order */
    int index;             /* choice */
    char *text;            /* its text (in the same allocation) */
    size_t len;            /* bytes */
    json_t *logprobs;      /* OpenAI content entries of its tokens, or NULL (owned) */
} gw_piece;

/* Free a list of pieces (NULL is fine). */
void gw_pieces_free(gw_piece *p);

/* Wait up to timeout_ms for news.  The pieces streamed since the last call
 * go to *pieces (a list the caller frees; NULL when none); *res is set
 * once the TurnResult arrived.  Returns 1 when there is a result, else
 * 0. */
int gw_wait_poll(gw_hub *h, gw_wait *w, int timeout_ms, gw_piece **pieces, const sch_result **res);

/* Unregister and free a waiter (NULL is fine). */
void gw_hub_release(gw_hub *h, gw_wait *w);

/* The client of w went away before its TurnResult: produce a CancelTurn
 * (spec 1.4) for its turn, after the turn on its partition (same producer,
 * same key), so the worker stops it and frees the compute.  1 when sent, 0
 * when the result had already come (nothing to stop), -1 (err) when
 * producing failed.  Call before gw_hub_release. */
int gw_hub_cancel(gw_hub *h, gw_wait *w, const char *reason, char *err, size_t errlen);

/* Waiters registered now. */
size_t gw_hub_inflight(gw_hub *h);

/* Flush the producer up to timeout_ms (shutdown). */
void gw_hub_flush(gw_hub *h, int timeout_ms);

#endif
