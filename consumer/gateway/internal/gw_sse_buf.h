/*
 * gw_sse_buf.h -- the bytes a server-sent-events stream has produced and
 * not yet handed to libmicrohttpd, shared by the chat stream (gw_http.c)
 * and the Responses stream (gw_responses_sse.c).
 *
 * A stream's reader callback produces events into the buffer until it
 * holds something, then hands out up to `max` bytes per call; once every
 * byte went out the buffer is emptied for the next events.  Growth
 * doubles; a put that cannot grow the buffer drops those bytes (the
 * stream then ends short, as on a failed write), never the ones queued.
 *
 * Threading: one stream's connection thread.  Ownership: the buffer owns
 * its bytes; gw_sse_buf_free releases them.
 */
#ifndef GW_SSE_BUF_H
#define GW_SSE_BUF_H

#include <stddef.h>

typedef struct gw_sse_buf {
    char *p;    /* bytes (NULL before the first put) */
    size_t len; /* bytes produced */
    size_t cap; /* bytes allocated */
    size_t off; /* bytes already handed out */
} gw_sse_buf;

/* Append n bytes of p. */
void gw_sse_buf_put(gw_sse_buf *b, const char *p, size_t n);

/* 1 when every produced byte was handed out (the buffer is then emptied),
 * else 0. */
int gw_sse_buf_drained(gw_sse_buf *b);

/* Copy up to max pending bytes into out; returns how many. */
size_t gw_sse_buf_take(gw_sse_buf *b, char *out, size_t max);

void gw_sse_buf_free(gw_sse_buf *b);

#endif
