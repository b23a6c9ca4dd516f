/*
 * wk_status.h -- the worker's status publisher (wk_status.c): one small
 * record (consumer/common/cm_status.h) every worker.status_ms, and on
 * start and stop, to the compacted topic worker.topic.status, keyed by
 * worker.id, for the gateway's fleet view (docs/fleet.md).
 *
 * Outside the turn path.  It runs on its own thread with its own plain
 * idempotent producer (no transaction), reads the worker's counters with
 * atomic loads, and drops a record rather than wait: a full queue, a
 * missing topic or an unreachable cluster costs a status record (logged
 * once), never a turn.  Its error callback logs; a refusal of this
 * producer does not stop the worker.
 *
 * Ownership.  The publisher borrows the worker, which must outlive
 * wk_status_stop.
 */
#ifndef WK_STATUS_H
#define WK_STATUS_H

#include <stddef.h>

struct wk_worker;
typedef struct wk_status wk_status; /* opaque */

/* Start publishing to worker.topic.status (empty: *out = NULL, nothing
 * runs).  Returns 0, or WK_EKAFKA / WK_ENOMEM with a message. */
int wk_status_start(struct wk_worker *w, wk_status **out, char *err, size_t errlen);

/* Publish the last record ("stopped"), wait for it at most 1 s, stop the
 * thread and free it.  NULL is a no-op. */
void wk_status_stop(wk_status *s);

#endif
