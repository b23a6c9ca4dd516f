/*
 * oa_responses.h -- consumer/openai, the OpenAI Responses API mapping:
 * a `POST /v1/responses` body <-> the same chat-completions request (and
 * so the same ChatTurn) the chat endpoint makes, and the `response`
 * object written from a TurnResult.
 *
 * Purpose.  The Responses API is a second spelling of a chat turn.  Rather
 * than a second parser of messages, tools and formats, oa_resp_parse
 * checks the Responses fields and rewrites the request as a
 * chat-completions request object; oa_resp_chat then adds the messages
 * (instructions as a system message, the stored conversation a
 * previous_response_id continues, the input items) and hands it to
 * oa_chat_from_json.  The conversation therefore becomes exactly the
 * ChatTurn /v1/chat/completions makes of the same messages: greedy output
 * is the same, and so is the conversation key (oa_conv_hash), so every
 * turn of it reaches the same worker and its KV cache.
 *
 * Fields.  Honoured: model (required), input (a string = one user
 * message, or a list of items: messages {role user / system / developer /
 * assistant, content a string or a list of input_text / output_text
 * parts}, function_call {call_id, name, arguments} and
 * function_call_output {call_id, output}), instructions (a system message
 * first; as OpenAI's, not carried over by previous_response_id),
 * max_output_tokens, temperature, top_p, text.format (text, json_object,
 * json_schema {name, schema, strict}), tools (type function only),
 * tool_choice (none, auto, required, {type function, name}),
 * parallel_tool_calls, stream, store, previous_response_id (both read by
 * the gateway), service_tier, user, safety_identifier.  Accepted at their
 * default only: background false, truncation "disabled", metadata {},
 * include [], text.verbosity "medium", top_logprobs 0, stream_options
 * null.  Refused with 400 naming the field (code unsupported_parameter /
 * unsupported_value): built-in tools (web_search, file_search, ...),
 * background true, reasoning, conversation, prompt, prompt_cache_key,
 * max_tool_calls, other item types; an unknown field gets
 * unknown_parameter.  A fault the chat parser finds names the Responses
 * field (max_completion_tokens -> max_output_tokens, response_format ->
 * text.format, messages -> input).
 *
 * Ownership.  An oa_resp owns its documents (oa_resp_free).  The json_t
 * builders return new references.
 *
 * Failure behaviour.  Parsers return 0 or -1 with *f; never abort on any
 * input.  Builders return NULL only when out of memory.
 */
#ifndef OA_RESPONSES_H
#define OA_RESPONSES_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "oa_openai.h"

#define OA_RESP_MAX_ID 128 /* previous_response_id bytes at most */

/* A parsed Responses request. */
typedef struct oa_resp {
    json_t *root;         /* the request document */
    json_t *chat;         /* the chat-completions request it becomes, without messages */
    json_t *input;        /* the input items as chat messages (array) */
    json_t *instructions; /* instructions string, or NULL (borrowed from root) */
    char prev_id[OA_RESP_MAX_ID + 1]; /* previous_response_id ("" = none) */
    int store;                        /* store (default true) */
    int stream;                       /* stream = true */
} oa_resp;

/* Parse and check `body` (len bytes).  0, or -1 with *f (out is then empty). */
int oa_resp_parse(const char *body, size_t len, oa_resp *out, oa_fault *f);

/* The chat request of q continuing `history` (chat messages, or NULL),
 * parsed by oa_chat_from_json into *out.  0, or -1 with *f. */
int oa_resp_chat(const oa_resp *q, json_t *history, uint32_t max_tokens_cap, oa_chat *out,
                 oa_fault *f);

/* The conversation after the reply: history + q's input + the reply as an
 * assistant message (content, tool_calls), in chat form. */
json_t *oa_resp_conversation(const oa_resp *q, json_t *history, const sch_result *r);

/* The `response` object of result r (NULL: an in_progress one with no
 * output and no usage) for request q.  store: whether it was stored. */
json_t *oa_resp_json(const sch_result *r, const oa_resp *q, const char *id, uint64_t created_s,
                     int store);

/* Output item ids of response `id`: the message ("msg_" + id tail) and
 * tool call k ("fc_" + id tail + "_" + k), into buf. */
void oa_resp_item_id(const char *id, int k, char *buf, size_t n);

void oa_resp_free(oa_resp *q);

#endif
