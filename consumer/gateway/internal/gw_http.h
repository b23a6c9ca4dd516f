/*
 * gw_http.h -- the HTTP side of `parley gateway` (libmicrohttpd).
 *
 * Purpose.  Serve the OpenAI-compatible endpoints on top of a gw_hub:
 *   POST /v1/chat/completions  (JSON reply, or server-sent events with
 *                               stream: true, ending `data: [DONE]`;
 *                               every choice of n > 1, logprobs, tool calls)
 *   POST /v1/completions       (legacy text_completion, the same way)
 *   GET  /v1/models            (the configured model names)
 *   GET  /healthz              (200 {"status":"ok"})
 *   POST /v1/responses,        (the Responses API, gw_responses.h)
 *   GET|DELETE /v1/responses/ID
 *   GET  /metrics              (Prometheus text: requests by code,
 *                               in flight, latency histogram)
 *   GET  /v1/fleet             (the fleet as Kafka sees it, gw_fleet.h;
 *                               503 while Kafka cannot be read)
 *   GET  /fleet, /fleet.js     (the fleet page, when gateway.playground is on)
 *   GET  /, /playground.js,    (the chat playground, gw_web.h, when
 *        /playground.css,       gateway.playground is on; no key needed to
 *        /favicon.svg           load it, every API call it makes sends one)
 * Every error is OpenAI's JSON error object with the matching status:
 * 400 bad JSON / wrong field / body over the size limit, 401 missing or
 * wrong API key, 404 unknown path or model, 405 wrong method, 429 too
 * many requests in flight (Retry-After: 1), 504 no committed reply before
 * gateway.timeout_ms, 500 a worker fault.
 *
 * Streaming and redone turns.  Chunks of one attempt are forwarded as they
 * arrive (gw_hub.h), each as its choice's delta (text, logprobs).  When the
 * committed TurnResult arrives, the text streamed so far of every choice
 * must be a prefix of that choice's text: the rest of each choice (text,
 * logprobs, tool calls as OpenAI streams them: a delta with id, type and
 * name, then one with the arguments) is sent, then its finish chunk, the
 * usage chunk when asked, and `[DONE]`; the client therefore never sees a token twice and the stream
 * always spells the committed reply.  When a worker redid the turn and the
 * committed reply differs from what was already streamed, the stream ends
 * with an error event ({"error": {"code": "stream_restarted", ...}}) and
 * `[DONE]` instead; nothing that contradicts the committed reply is sent
 * after what was streamed.  Idle streams get an SSE comment every second,
 * which also detects a client that went away: its request is then released
 * at once (the turn itself still runs on the worker).
 *
 * Threading.  libmicrohttpd runs one thread per connection (plus its
 * listening thread); handlers block in gw_wait_poll.  Counters are atomics.
 *
 * Ownership.  gw_http_start borrows the hub and the options, which must
 * outlive gw_http_stop.
 *
 * Failure behaviour.  gw_http_start returns NULL with a message (address
 * in use, bad address).  A request can never crash the server: bodies are
 * bounded, JSON is parsed by jansson, every field is validated
 * (oa_openai.h).
 */
#ifndef GW_HTTP_H
#define GW_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include "gw_fleet.h"
#include "gw_hub.h"

struct gw_store;
struct MHD_Connection;
struct MHD_Response;

#define GW_MAX_KEYS 64   /* API keys at most */
#define GW_MAX_MODELS 32 /* model names at most */

/* One API key and the tenant (cache namespace) it maps to. */
typedef struct gw_key {
    char key[128];    /* bearer token */
    char tenant[128]; /* namespace the key's turns get */
} gw_key;

/* Options of the HTTP side. */
typedef struct gw_http_opts {
    char host[64];                   /* bind address (IPv4 literal) */
    int port;                        /* bind port; 0 = any free one */
    size_t max_body;                 /* request body bytes at most */
    int max_inflight;                /* requests in flight at most (429) */
    int max_connections;             /* open connections at most */
    int timeout_ms;                  /* wait for the reply at most (504) */
    uint32_t max_tokens;             /* cap of max_tokens */
    gw_key keys[GW_MAX_KEYS];        /* API keys; none = no auth */
    size_t n_keys;                   /* entries in keys */
    char ns[128];                    /* namespace without auth */
    char models[GW_MAX_MODELS][257]; /* served models; none = any name */
    size_t n_models;                 /* entries in models */
    char id_prefix[64];              /* turn id prefix, unique per gateway */
    int playground;                  /* serve the playground page (GET /) */
    struct gw_store *store;          /* stored Responses (gw_store.h), or NULL: off */
    gw_fleet *fleet;                 /* the fleet view (borrowed; NULL = 404) */
} gw_http_opts;

typedef struct gw_http gw_http; /* opaque */

/* Start listening.  *port_out gets the bound port.  NULL (err) on failure. */
gw_http *gw_http_start(const gw_http_opts *o, gw_hub *hub, int *port_out, char *err, size_t errlen);

/* Stop the server (waits for connection threads) and free it. */
void gw_http_stop(gw_http *s);

/* Requests in flight now. */
int gw_http_inflight(gw_http *s);

/* What other handlers (gw_responses.c) share with gw_http.c: the tenant
 * of the request's key (0, or -1: answer 401); a JSON reply (j stolen;
 * an enum MHD_Result); the status counted in /metrics; the hub, the
 * options and a new turn number; the in-flight limit (gw_http_admit: 0
 * counted, -1 full and not counted; gw_http_leave uncounts). */
int gw_http_auth(gw_http *s, struct MHD_Connection *c, const char **ns);
int gw_http_reply(gw_http *s, struct MHD_Connection *c, int status, json_t *j);
void gw_http_count(gw_http *s, int status);
gw_hub *gw_http_hub(gw_http *s);
const gw_http_opts *gw_http_opts_of(gw_http *s);
unsigned long long gw_http_next_seq(gw_http *s);
int gw_http_admit(gw_http *s);
void gw_http_leave(gw_http *s);

/* The client of w's turn left before its reply: count the disconnect,
 * cancel the turn (gw_cancel_turn) and count the cancel when one was sent. */
void gw_http_client_left(gw_http *s, gw_wait *w);

/* Queue streamed response r (its reader made) as a 200 event stream, the
 * status counted; r is released.  An enum MHD_Result. */
int gw_http_queue_sse(gw_http *s, struct MHD_Connection *c, struct MHD_Response *r);

/* Wait for w's TurnResult until the gateway's timeout (from t0, monotonic
 * ms), looking at connection c between waits of GW_GONE_CHECK_MS: 1 with
 * *res set, 0 on the timeout, -1 when the client closed the connection
 * (its turn is then cancelled and counted in /metrics; answer nothing). */
int gw_http_await(gw_http *s, struct MHD_Connection *c, gw_wait *w, double t0,
                  const sch_result **res);

#endif
