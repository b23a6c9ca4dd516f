/*
 * gw_store.h -- the gateway's store of Responses (`store: true`), kept in
 * a compacted Kafka topic so that every gateway replica, and a restarted
 * one, can continue a conversation by previous_response_id.
 *
 * Purpose.  A stored response is one record on gateway.topic.stored
 * (cleanup.policy=compact; `parley topics` creates it), key = response id,
 * value = JSON {"tenant", "created_ms", "conv" (the conversation key its
 * turns were sent under), "messages" (the whole conversation in chat form,
 * the reply included: what a continuation sends before its own input),
 * "response" (the `response` object GET returns)}.  DELETE produces a
 * tombstone (null value) under the id; compaction then drops both.
 *
 * Reading.  A reader thread consumes the topic from the beginning, for
 * the life of the gateway, into an in-memory table of id -> record text.
 * A gateway that stores a response also puts it into its own table at
 * once, so its next request sees it without waiting for the topic.  A
 * lookup of an id the table lacks first asks Kafka for the partitions'
 * end offsets and waits (at most wait_ms) until the reader has read up
 * to them: a response another replica stored before this request was
 * made is then found.  Only then is the id unknown.
 *
 * Bounds.  The table holds at most max_bytes of record text
 * (gateway.responses_max_bytes); past it the oldest records read are
 * dropped from memory (not from Kafka), and continuing one of them gets
 * 404 like an expired one.  Records older than ttl_ms
 * (gateway.responses_ttl_ms) are treated as absent on read and dropped.
 * A locally deleted id stays in the table as a small tombstone so that a
 * late copy from the reader does not bring it back.
 *
 * Tenants.  Each record names the tenant (API key's namespace) that
 * stored it; a lookup or delete by another tenant finds nothing.
 *
 * Threading.  All functions may be called from any thread; one mutex
 * guards the table and the reader's positions, a condition variable
 * wakes lookups waiting for the reader.
 *
 * Failure behaviour.  gw_store_new returns -1 (err) when Kafka fails; a
 * missing topic is not an error: *out is NULL (the store is off) and err
 * says why.  Records that do not parse are skipped.
 */
#ifndef GW_STORE_H
#define GW_STORE_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "cm_kafka.h"

typedef struct gw_store gw_store; /* opaque */

/* What gw_store_new needs. */
typedef struct gw_store_conf {
    cm_kafka *kafka;   /* the gateway's Kafka layer (borrowed) */
    const char *topic; /* the compacted topic ("" = no store) */
    int64_t ttl_ms;    /* records expire this long after created_ms */
    size_t max_bytes;  /* record text held in memory at most */
    int timeout_ms;    /* start-up: metadata and end offsets within it */
} gw_store_conf;

/* Start the reader.  0 with *out (NULL when the store is off: topic ""
 * or missing, err then says which), or -1 with err. */
int gw_store_new(const gw_store_conf *c, gw_store **out, char *err, size_t errlen);
void gw_store_free(gw_store *s);

/* Produce record rec (JSON object with tenant, created_ms, ...) under id
 * and keep it in the table.  0 or -1 (err). */
int gw_store_put(gw_store *s, const char *id, json_t *rec, char *err, size_t errlen);

/* The record of id for tenant (a new reference), waiting up to wait_ms
 * for the reader to catch up when the table lacks it; NULL when absent,
 * expired, deleted or another tenant's. */
json_t *gw_store_get(gw_store *s, const char *id, const char *tenant, int wait_ms);

/* Delete id for tenant: a tombstone on the topic.  1 deleted, 0 not
 * found (as gw_store_get), -1 producing failed (err). */
int gw_store_delete(gw_store *s, const char *id, const char *tenant, int wait_ms, char *err,
                    size_t errlen);

#endif
