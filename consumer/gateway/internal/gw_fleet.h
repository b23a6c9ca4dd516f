/*
 * gw_fleet.h -- the fleet as Kafka sees it, for GET /v1/fleet and the
 * page at GET /fleet (docs/fleet.md).
 *
 * Purpose.  One gateway shows the whole fleet without asking any worker:
 *   - the workers' consumer group (gateway.fleet.group): its members, the
 *     client id (= worker.id), host and the partitions each holds, from
 *     DescribeConsumerGroups;
 *   - each partition of the turns topic: its end offset (ListOffsets,
 *     latest), the group's committed offset (ListConsumerGroupOffsets)
 *     and lag = end - committed (end - earliest where the group has not
 *     committed one);
 *   - each worker's own figures (model, state, turns/s, cache share) from
 *     the latest record it wrote to the compacted status topic
 *     (cm_status.h), read from the beginning, a record older than
 *     GW_FLEET_STALE periods marked stale (not a "stopped" one: final);
 *   - a history of the total lag and turns/s (from the workers' turn
 *     counters between two samples), one sample per refresh, for the
 *     page's charts (the last GW_FLEET_HIST samples).
 *
 * Threading.  One thread of its own does all Kafka work: it polls the
 * status topic and every refresh_ms runs the three admin queries, each
 * bounded by GW_FLEET_TIMEOUT_MS, and keeps the result under a mutex.
 * An HTTP request (gw_fleet_json) only copies that result: page loads
 * never reach the cluster, many of them cost one query per refresh, and a
 * cluster that does not answer costs the request nothing but the error.
 *
 * Failure behaviour.  While the latest refresh failed (Kafka unreachable,
 * the group or topic unreadable) or none has finished yet, gw_fleet_json
 * answers 503 with an OpenAI-style error naming why.  Bad status records
 * are skipped and counted.
 *
 * Ownership.  The fleet borrows the cm_kafka and the strings of its conf,
 * which must outlive gw_fleet_free.
 */
#ifndef GW_FLEET_H
#define GW_FLEET_H

#include <stddef.h>

#include "cm_kafka.h"

#define GW_FLEET_TIMEOUT_MS 3000 /* bound of one admin query */
#define GW_FLEET_HIST 300        /* history samples kept */
#define GW_FLEET_STALE 3         /* a status record older than this many periods is stale */
#define GW_FLEET_MAX_WORKERS 256 /* status records kept at most */

/* What to watch. */
typedef struct gw_fleet_conf {
    cm_kafka *kafka;    /* the gateway's Kafka layer (borrowed) */
    const char *group;  /* the workers' consumer group */
    const char *turns;  /* the turns topic (partitions, lag) */
    const char *status; /* the status topic ("" = no per-worker figures) */
    int refresh_ms;     /* admin queries every this long */
} gw_fleet_conf;

typedef struct gw_fleet gw_fleet; /* opaque */

/* Start the fleet's thread.  Returns 0, or GW_EKAFKA / GW_ENOMEM with a
 * message (no connection is awaited here). */
int gw_fleet_new(const gw_fleet_conf *conf, gw_fleet **out, char *err, size_t errlen);

/* Stop the thread and free.  NULL is a no-op. */
void gw_fleet_free(gw_fleet *f);

/* The fleet as JSON (malloc'd, NUL-terminated; NULL out of memory) and
 * its HTTP status: 200, or 503 with an error object. */
char *gw_fleet_json(gw_fleet *f, int *status);

#endif
