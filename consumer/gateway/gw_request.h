/*
 * gw_request.h -- private to the gateway's request parsing: what
 * gw_request.c (the request's fields, messages, sampling parameters) and
 * gw_request_tools.c (tools and response_format, the two fields with a
 * structure of their own) share.  The public side is gw_openai.h.
 */
#ifndef GW_REQUEST_H
#define GW_REQUEST_H

#include <jansson.h>

#include "gw_openai.h"

/* Fill *f (400, param p, code) and return -1.  fmt is printf-style. */
int gw_fail(gw_fault *f, const char *p, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Keep a malloc'd string with the request (freed by gw_chat_free); NULL
 * when out of memory (s is freed then). */
char *gw_keep(gw_chat *c, char *s);

/* response_format -> c->turn.params.response_format; 0, or -1 with *f. */
int gw_response_format(gw_chat *c, json_t *rf, gw_fault *f);

/* tools, tool_choice and parallel_tool_calls of request o -> c->turn.params;
 * 0, or -1 with *f. */
int gw_tools(gw_chat *c, json_t *o, gw_fault *f);

#endif
