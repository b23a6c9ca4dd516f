/*
 * gw_sse_buf.c -- a stream's pending bytes (gw_sse_buf.h).
 */
#include "gw_sse_buf.h"

#include <stdlib.h>
#include <string.h>

void gw_sse_buf_put(gw_sse_buf *b, const char *p, size_t n) {
    if (b->len + n > b->cap) {
        size_t cap = (b->len + n) * 2 + 256;
        char *q = realloc(b->p, cap);
        if (!q) return;
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->len, p, n);
    b->len += n;
}

int gw_sse_buf_drained(gw_sse_buf *b) {
    if (b->off != b->len) return 0;
    b->off = b->len = 0;
    return 1;
}

size_t gw_sse_buf_take(gw_sse_buf *b, char *out, size_t max) {
    size_t n = b->len - b->off < max ? b->len - b->off : max;
    memcpy(out, b->p + b->off, n);
    b->off += n;
    return n;
}

void gw_sse_buf_free(gw_sse_buf *b) {
    free(b->p);
    memset(b, 0, sizeof *b);
}
