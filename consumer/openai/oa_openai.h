/*
 * oa_openai.h -- consumer/openai, the OpenAI mapping: chat-completions
 * (and legacy completions) JSON <-> parley wire records, shared by
 * `parley gateway` (HTTP) and `parley batch` (JSONL files), which depend
 * on it as siblings (neither reaches into the other).
 *
 * Purpose.  Parse and validate an OpenAI `POST /v1/chat/completions` or
 * `POST /v1/completions` request body into a ChatTurn (sch_turn, spec
 * 1.2), and write the OpenAI response shapes from a TurnResult:
 * `chat.completion`, `chat.completion.chunk`, `text_completion` (and its
 * chunks), with every choice, logprobs and tool calls, and the error
 * object {"error": {message, type, param, code}}.  Every
 * field the gateway reads is type- and range-checked here; a request that
 * fails gets one message naming the field (OpenAI's `param`).
 *
 * Fields.  Every field of OpenAI's request is known to oa_request.c's
 * table, with what the gateway does with it: parsed and honoured, or
 * accepted only at its default value (null, false, 0, n = 1, {"type":
 * "text"}, ...: a request that asks for nothing is honoured trivially),
 * else refused with 400, `param` naming the field and code
 * `unsupported_parameter` (or `unsupported_value` for a field parley
 * supports with other values).  A field that is not in OpenAI's spec is
 * refused too (code `unknown_parameter`): parley never answers a request
 * as if it had honoured something it ignored.  docs/openai.md's table
 * lists every field.  Honoured: model (required), messages (required; role
 * system, developer (= system), user, assistant, tool; content a string
 * or an array of {"type": "text", "text": ...} parts; assistant
 * tool_calls and tool_call_id as the wire's JSON text / id; `name` as the
 * model's chat template shows it: not at all), max_tokens /
 * max_completion_tokens (the latter wins), temperature (0..2), top_p
 * (0 < p <= 1), seed (>= 0), stop (string or array of at most 16), n
 * (1..16), response_format (text, json_object, json_schema; extensions
 * regex and grammar), logprobs / top_logprobs (0..20), tools,
 * tool_choice, parallel_tool_calls, stream, stream_options.include_usage,
 * user and safety_identifier (identifiers, kept nowhere), and the common
 * extensions top_k and repetition_penalty; for /v1/completions prompt
 * (one string or token array), echo, logprobs (0..20); suffix and
 * best_of > 1 refused.  A JSON null is the field's absence.
 *
 * Conversation affinity: oa_conv_hash() is FNV-1a 64 over the opening
 * messages (every message up to and including the first user message:
 * role name, a 0 byte, content, a 0 byte), printed as "oa-" + 16 hex
 * digits; the turns of one chat then hash to the same key and so to the
 * same worker.
 *
 * Threading.  No shared state: every function works on its arguments.
 *
 * Ownership.  A oa_chat owns its parsed JSON document; the sch_turn inside
 * points into it and is valid until oa_chat_free.  The json_t results of
 * the builders are new references owned by the caller (json_decref).
 *
 * Failure behaviour.  oa_chat_parse returns 0 or -1 with a oa_fault: the
 * HTTP status, a message naming the field, OpenAI's `param` (the field;
 * "" for the body as a whole) and `code`; it never aborts on any input.  Builders return NULL only when
 * out of memory.
 */
#ifndef OA_OPENAI_H
#define OA_OPENAI_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "sch.h"

#define OA_MAX_STOP 16       /* stop strings per request */
#define OA_MAX_ID 256        /* model / conversation id bytes */
#define OA_MAX_MESSAGES 4096 /* messages per request (the wire limit) */

/* Why a request was refused: OpenAI's error object and its status. */
typedef struct oa_fault {
    int status;         /* HTTP status (400) */
    char message[1024]; /* what is wrong, naming the field */
    char param[160];    /* OpenAI `param`: the field ("" = the body) */
    const char *code;   /* OpenAI `code` (static string) or NULL */
} oa_fault;

/* A parsed, validated chat-completions request. */
typedef struct oa_chat {
    json_t *root;              /* the request document (owns every string) */
    sch_message *msgs;         /* messages, content pointing into root/parts */
    size_t n_msgs;             /* entries in msgs */
    char **parts;              /* malloc'd joined content-part texts */
    size_t n_parts;            /* entries in parts */
    sch_str stop[OA_MAX_STOP]; /* stop strings (point into root) */
    sch_turn turn;             /* messages, params, stream, model filled in */
    char model[OA_MAX_ID + 1]; /* requested model name */
    int stream;                /* stream = true */
    int include_usage;         /* stream_options.include_usage = true */
    int legacy;                /* POST /v1/completions (a text_completion) */
    int logprobs;              /* log-probabilities asked for (turn.params.top_logprobs) */
    int echo;                  /* completions: the prompt is echoed before each choice */
    int tier_set;              /* service_tier was given (turn.service_class follows it) */
} oa_chat;

/* Parse `body` (len bytes) as a chat-completions request.  max_tokens_cap
 * bounds max_tokens (and is its default when lower than 256).  Returns 0
 * or -1 (*f filled; out is then empty and needs no free). */
int oa_chat_parse(const char *body, size_t len, uint32_t max_tokens_cap, oa_chat *out, oa_fault *f);

/* Parse an already decoded request object (oa_chat takes a reference). */
int oa_chat_from_json(json_t *obj, uint32_t max_tokens_cap, oa_chat *out, oa_fault *f);

/* The same for a legacy `POST /v1/completions` body (out->legacy set;
 * max_tokens defaults to 16 as OpenAI's). */
int oa_cmpl_parse(const char *body, size_t len, uint32_t max_tokens_cap, oa_chat *out, oa_fault *f);
int oa_cmpl_from_json(json_t *obj, uint32_t max_tokens_cap, oa_chat *out, oa_fault *f);

/* Move a parsed request to dst (the turn's pointers into the struct
 * follow it); src is left empty. */
void oa_chat_move(oa_chat *dst, oa_chat *src);

/* Release what oa_chat_parse made (an empty oa_chat is fine). */
void oa_chat_free(oa_chat *c);

/* Conversation key from the opening messages: "oa-%016llx" into out[20]. */
void oa_conv_hash(const sch_message *msgs, size_t n, char out[20]);

/* Conversation key of a completions prompt (its text or token ids):
 * "oc-%016llx" into out[20]. */
void oa_prompt_hash(const sch_turn *t, char out[20]);

/* Choices in a result (1 + its extra choices), and choice k of it
 * (sch_result_choice: k = 0 the result's own fields, k >= 1 its
 * choices[k - 1]), with an absent text as "". */
int oa_result_choices(const sch_result *r);
void oa_result_choice(const sch_result *r, int k, sch_choice *out);

/* OpenAI finish_reason of a choice: tool_calls when it made calls, else
 * length or stop, or parley's cancelled (a CancelTurn stopped it: spec
 * 1.4; what a `parley batch --cancel` line or a stream cancelled by
 * someone else shows). */
const char *oa_finish_name(const sch_choice *c);

/* The complete response to request q: `chat.completion`, or
 * `text_completion` for /v1/completions (echo, legacy logprobs). */
json_t *oa_completion_json(const sch_result *r, const oa_chat *q, const char *id,
                           uint64_t created_s);

/* OpenAI's chat logprobs `content` entries ({token, logprob, bytes,
 * top_logprobs}) of n wire entries. */
json_t *oa_logprobs_content(const sch_logprob *lp, size_t n);
/* The legacy completions logprobs object ({tokens, token_logprobs,
 * top_logprobs, text_offset}) of chat content entries; offsets start at
 * text_from. */
json_t *oa_logprobs_legacy(json_t *content, size_t text_from);
/* OpenAI's message.tool_calls array of n calls. */
json_t *oa_tool_calls_json(const sch_tool_call *t, size_t n);

/* One piece of a streamed reply, as one chunk's choice. */
typedef struct oa_delta {
    int index;          /* choice */
    int role;           /* chat: the delta names role "assistant" */
    const char *text;   /* text delta (NULL: none) */
    size_t len;         /* its bytes */
    size_t text_from;   /* legacy logprobs: offset of text in the choice */
    json_t *logprobs;   /* chat content entries of these tokens, or NULL (borrowed) */
    json_t *tool_calls; /* chat: the tool_calls delta, or NULL (borrowed) */
    const char *finish; /* finish_reason when this ends the choice, else NULL */
} oa_delta;

/* One `chat.completion.chunk` (or legacy `text_completion` chunk) with
 * one choice d (NULL: none) and usage when `usage` is set. */
json_t *oa_chunk_json(const oa_chat *q, const char *id, uint64_t created_s, const oa_delta *d,
                      const sch_result *usage);

/* {"error": {"message", "type", "param", "code"}}; param/code may be NULL. */
json_t *oa_error_json(const char *message, const char *type, const char *param, const char *code);

/* The request field a failed result names (the worker's refusals of
 * n, logprobs, response_format, tools, tool_choice: their messages start
 * "params.<field>"), into buf; NULL when none. */
const char *oa_result_param(const sch_result *r, char *buf, size_t n);

/* The HTTP status and OpenAI error type/code for a result that failed
 * (finish_reason error or expired): e.g. E_UNKNOWN_MODEL -> 404,
 * E_EXPIRED -> 504, E_CONTEXT_OVERFLOW -> 400, others 500. */
int oa_result_status(const sch_result *r, const char **type, const char **code);

#endif
