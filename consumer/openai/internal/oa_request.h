/*
 * oa_request.h -- private to consumer/openai's request parsing: what
 * oa_request.c (the request's fields, messages, sampling parameters) and
 * oa_request_tools.c (tools and response_format, the two fields with a
 * structure of their own) share.  The public side is oa_openai.h.
 */
#ifndef OA_REQUEST_H
#define OA_REQUEST_H

#include <jansson.h>

#include "oa_openai.h"

/* Fill *f (400, param p, code) and return -1.  fmt is printf-style. */
int oa_fail(oa_fault *f, const char *p, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Keep a malloc'd string with the request (freed by oa_chat_free); NULL
 * when out of memory (s is freed then). */
char *oa_keep(oa_chat *c, char *s);

/* response_format -> c->turn.params.response_format; 0, or -1 with *f. */
int oa_response_format(oa_chat *c, json_t *rf, oa_fault *f);

/* tools, tool_choice and parallel_tool_calls of request o -> c->turn.params;
 * 0, or -1 with *f. */
int oa_tools(oa_chat *c, json_t *o, oa_fault *f);

#endif
