/*
 * gw_responses.h -- the gateway's OpenAI Responses API:
 *   POST   /v1/responses       a turn (JSON reply, or server-sent events
 *                              with stream: true)
 *   GET    /v1/responses/ID    a stored response
 *   DELETE /v1/responses/ID    delete it (a tombstone on the store topic)
 *
 * Purpose.  A Responses request becomes the very ChatTurn the chat
 * endpoint makes of the same conversation (oa_responses.h), sent and
 * awaited through the same hub.  With store (default true) and a store
 * topic (gw_store.h) the response is kept together with the conversation
 * it ends; previous_response_id then continues it from any gateway
 * replica: the stored messages come first, the turn is sent under the
 * stored conversation key, so it reaches the worker that holds its KV
 * cache.  An unknown, expired, deleted or other tenant's
 * previous_response_id gets 400 (param previous_response_id, code
 * previous_response_not_found), as OpenAI answers; GET and DELETE of such
 * an id get 404 (code not_found).
 *
 * Streaming (gw_responses_sse.c).  Events, each `event: TYPE` and `data:
 * JSON` with a sequence_number: response.created, response.in_progress;
 * with the first text the message item opens (response.output_item.added,
 * response.content_part.added), then response.output_text.delta per
 * streamed piece; at the committed result the rest of the text,
 * response.output_text.done, response.content_part.done,
 * response.output_item.done; each function call as output_item.added,
 * response.function_call_arguments.delta, .done, output_item.done; then
 * response.completed with the whole response (stored first).  A failed
 * turn, a timeout or a redone turn whose reply differs from what was
 * streamed ends with an `error` event and response.failed.
 *
 * Threading / ownership.  As gw_http.h: one thread per connection.
 */
#ifndef GW_RESPONSES_H
#define GW_RESPONSES_H

#include <stddef.h>

#include <jansson.h>

#include "gw_http.h"
#include "oa_responses.h"

/* Answer a request under /v1/responses (url exactly that or with /ID);
 * body and len are what was read, too_big set when over the limit.
 * Returns an enum MHD_Result. */
int gw_resp_route(gw_http *s, struct MHD_Connection *c, const char *url, const char *method,
                  const char *body, size_t len, int too_big);

/* One Responses turn in flight, shared by the JSON and the SSE answers. */
typedef struct gw_rturn {
    gw_http *s;               /* the server */
    oa_resp q;                /* the request */
    json_t *history;          /* the stored conversation continued, or NULL */
    char ns[128];             /* tenant */
    char conv[OA_MAX_ID + 1]; /* conversation key */
    char id[200];             /* resp_<turn id> */
    uint64_t created_ms;      /* unix ms */
    int store;                /* store the response (store asked and a store is on) */
} gw_rturn;

/* The `response` object of result r (ok), stored when t->store. */
json_t *gw_resp_finish(gw_rturn *t, const sch_result *r);

/* The error of a failed result: status, and the error object in *err. */
int gw_resp_failed(const sch_result *r, json_t **err);

void gw_rturn_free(gw_rturn *t);

/* Answer t (taken: freed by the stream) with sent turn w as SSE.  1 when
 * the stream took t, w and the in-flight count; 0 out of memory (the
 * caller still owns them).  *rc the MHD result. */
int gw_resp_stream(gw_rturn *t, struct MHD_Connection *c, gw_wait *w, double t0, int *rc);

#endif
