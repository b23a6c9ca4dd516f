/*
 * cm_status.h -- the worker status record: what a worker publishes about
 * itself on the status topic, and what the gateway's fleet view reads.
 *
 * Purpose.  The fleet view (docs/fleet.md) shows per-worker figures that
 * Kafka's own group and offset APIs do not know: the model a worker
 * serves, whether it is running, paused (backpressure) or draining, its
 * turns per second and the recent share of prompt tokens served from
 * cache.  Each worker writes one small record every worker.status_ms
 * (and on start and stop) to a compacted topic, keyed by its worker.id,
 * so the topic keeps the latest record of every worker and a reader
 * that starts from the beginning sees the whole fleet.
 *
 * Format (version 1).  The value is one JSON object:
 *   {"v": 1, "worker": "w-1", "host": "node-3", "model": "smollm",
 *    "state": "running", "ts_ms": 1765100000000, "interval_ms": 2000,
 *    "turns": 1234, "prompt_tokens": 99000, "cached_tokens": 70000,
 *    "turns_per_s": 3.5, "cache_share": 0.71}
 * v           format version; a reader refuses versions above its own
 * worker      worker.id (also the record key)
 * host        the worker's host name ("" when unknown)
 * model       model.name the worker serves
 * state       "running", "paused" (backpressure), "draining" (stopping,
 *             finishing its turns) or "stopped" (its last record)
 * ts_ms       when it was written (unix ms, the worker's clock)
 * interval_ms the period of its records: a reader calls a record stale
 *             when it is older than a few periods
 * turns, prompt_tokens, cached_tokens
 *             the worker's counters since it started
 * turns_per_s TurnResults committed per second over the last period
 * cache_share cached / prompt tokens over the last period, or -1 when
 *             the period saw no prompt tokens
 * Unknown members are ignored (a newer writer may add some); a missing or
 * mistyped known member refuses the record.  A null value (the topic's
 * tombstone) removes the worker.
 *
 * Threading.  Pure functions; any thread.
 *
 * Failure behaviour.  cm_status_parse reads Kafka input and is therefore
 * hostile-input code: it returns -1 with a message for anything but a
 * valid record, never crashes, and bounds every string it copies.
 */
#ifndef CM_STATUS_H
#define CM_STATUS_H

#include <stddef.h>
#include <stdint.h>

#define CM_STATUS_VERSION 1 /* format version written and the newest read */
#define CM_STATUS_MAX 4096  /* largest record value accepted, bytes */
#define CM_STATUS_STR 128   /* worker / host / state: bytes at most, with NUL */
#define CM_STATUS_MODEL 257 /* model name: bytes at most, with NUL */

/* One worker status record (format version 1). */
typedef struct cm_status {
    int v;                       /* format version */
    char worker[CM_STATUS_STR];  /* worker.id */
    char host[CM_STATUS_STR];    /* host name ("" unknown) */
    char model[CM_STATUS_MODEL]; /* model.name */
    char state[CM_STATUS_STR];   /* running / paused / draining / stopped */
    int64_t ts_ms;               /* written at (unix ms) */
    int64_t interval_ms;         /* period of the worker's records */
    uint64_t turns;              /* TurnResults committed since start */
    uint64_t prompt_tokens;      /* prompt tokens since start */
    uint64_t cached_tokens;      /* of which served from cache */
    double turns_per_s;          /* over the last period */
    double cache_share;          /* cached / prompt over the last period, -1 none */
} cm_status;

/* The record's JSON value (malloc'd, NUL-terminated, *len bytes).  NULL
 * when out of memory. */
char *cm_status_encode(const cm_status *s, size_t *len);

/* Parse one record value (len bytes, not NUL-terminated).  0 with *out
 * filled, or -1 with a message in err naming what is wrong. */
int cm_status_parse(const void *buf, size_t len, cm_status *out, char *err, size_t errlen);

#endif
