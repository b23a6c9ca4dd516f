/*
 * gw_openai.h -- OpenAI chat-completions JSON <-> parley wire records,
 * shared by `parley gateway` (HTTP) and `parley batch` (JSONL files).
 *
 * Purpose.  Parse and validate an OpenAI `POST /v1/chat/completions`
 * request body into a ChatTurn (sch_turn), and write the OpenAI response
 * shapes from a TurnResult: `chat.completion`, `chat.completion.chunk`
 * and the error object {"error": {message, type, param, code}}.  Every
 * field the gateway reads is type- and range-checked here; a request that
 * fails gets one message naming the field (OpenAI's `param`).
 *
 * Fields.  Every field of OpenAI's request is known to gw_request.c's
 * table, with what the gateway does with it: parsed and honoured, or
 * accepted only at its default value (null, false, 0, n = 1, {"type":
 * "text"}, ...: a request that asks for nothing is honoured trivially),
 * else refused with 400, `param` naming the field and code
 * `unsupported_parameter` (or `unsupported_value` for a field parley
 * supports with other values).  A field that is not in OpenAI's spec is
 * refused too (code `unknown_parameter`): parley never answers a request
 * as if it had honoured something it ignored.  The README's table lists
 * every field.  Honoured now: model (required), messages (required; role
 * system, developer (= system), user, assistant; content a string or an
 * array of {"type": "text", "text": ...} parts; `name` as the model's
 * chat template shows it: not at all), max_tokens /
 * max_completion_tokens (the latter wins), temperature (0..2), top_p
 * (0 < p <= 1), seed (>= 0), stop (string or array of at most 16),
 * stream, stream_options.include_usage, user and safety_identifier
 * (identifiers, kept nowhere), and the common extensions top_k and
 * repetition_penalty.  A JSON null is the field's absence.
 *
 * Conversation affinity: gw_conv_hash() is FNV-1a 64 over the opening
 * messages (every message up to and including the first user message:
 * role name, a 0 byte, content, a 0 byte), printed as "oa-" + 16 hex
 * digits; the turns of one chat then hash to the same key and so to the
 * same worker.
 *
 * Threading.  No shared state: every function works on its arguments.
 *
 * Ownership.  A gw_chat owns its parsed JSON document; the sch_turn inside
 * points into it and is valid until gw_chat_free.  The json_t results of
 * the builders are new references owned by the caller (json_decref).
 *
 * Failure behaviour.  gw_chat_parse returns 0 or -1 with a gw_fault: the
 * HTTP status, a message naming the field, OpenAI's `param` (the field;
 * "" for the body as a whole) and `code`; it never aborts on any input.  Builders return NULL only when
 * out of memory.
 */
#ifndef GW_OPENAI_H
#define GW_OPENAI_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "sch.h"
#include "pl_hash.h"

#define GW_MAX_STOP 16       /* stop strings per request */
#define GW_MAX_ID 256        /* model / conversation id bytes */
#define GW_MAX_MESSAGES 4096 /* messages per request (the wire limit) */

/* Why a request was refused: OpenAI's error object and its status. */
typedef struct gw_fault {
    int status;         /* HTTP status (400) */
    char message[1024]; /* what is wrong, naming the field */
    char param[160];    /* OpenAI `param`: the field ("" = the body) */
    const char *code;   /* OpenAI `code` (static string) or NULL */
} gw_fault;

/* A parsed, validated chat-completions request. */
typedef struct gw_chat {
    json_t *root;              /* the request document (owns every string) */
    sch_message *msgs;         /* messages, content pointing into root/parts */
    size_t n_msgs;             /* entries in msgs */
    char **parts;              /* malloc'd joined content-part texts */
    size_t n_parts;            /* entries in parts */
    sch_str stop[GW_MAX_STOP]; /* stop strings (point into root) */
    sch_turn turn;             /* messages, params, stream, model filled in */
    char model[GW_MAX_ID + 1]; /* requested model name */
    int stream;                /* stream = true */
    int include_usage;         /* stream_options.include_usage = true */
} gw_chat;

/* Parse `body` (len bytes) as a chat-completions request.  max_tokens_cap
 * bounds max_tokens (and is its default when lower than 256).  Returns 0
 * or -1 (*f filled; out is then empty and needs no free). */
int gw_chat_parse(const char *body, size_t len, uint32_t max_tokens_cap, gw_chat *out, gw_fault *f);

/* Parse an already decoded request object (gw_chat takes a reference). */
int gw_chat_from_json(json_t *obj, uint32_t max_tokens_cap, gw_chat *out, gw_fault *f);

/* Release what gw_chat_parse made (an empty gw_chat is fine). */
void gw_chat_free(gw_chat *c);

/* Conversation key from the opening messages: "oa-%016llx" into out[20]. */
void gw_conv_hash(const sch_message *msgs, size_t n, char out[20]);

/* FNV-1a 64 of bytes, continuing from h (start with GW_FNV_SEED); pl_hash.h. */
#define GW_FNV_SEED PL_FNV64_SEED
uint64_t gw_fnv64(uint64_t h, const void *p, size_t n);

/* OpenAI finish_reason of a result ("stop" or "length"). */
const char *gw_finish_reason(const sch_result *r);

/* The `chat.completion` object of a successful result. */
json_t *gw_completion_json(const sch_result *r, const char *id, const char *model,
                           uint64_t created_s);

/* One `chat.completion.chunk`: delta role (when role), content (when
 * text), finish_reason (when finish) and usage (when r). */
json_t *gw_chunk_json(const char *id, const char *model, uint64_t created_s, int role,
                      const char *text, size_t len, const char *finish, const sch_result *r);

/* {"error": {"message", "type", "param", "code"}}; param/code may be NULL. */
json_t *gw_error_json(const char *message, const char *type, const char *param, const char *code);

/* The HTTP status and OpenAI error type/code for a result that failed
 * (finish_reason error or expired): e.g. E_UNKNOWN_MODEL -> 404,
 * E_EXPIRED -> 504, E_CONTEXT_OVERFLOW -> 400, others 500. */
int gw_result_status(const sch_result *r, const char **type, const char **code);

#endif
