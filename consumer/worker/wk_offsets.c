/*
 * wk_offsets.c -- ring windows of (offset, done) per partition; see
 * wk_offsets.h.
 */
#include "wk_offsets.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* One partition's window. */
typedef struct wk_part_win {
    int64_t *off;   /* ring of consumed offsets */
    bool *done;     /* finished flag per ring slot */
    int64_t head;   /* ring index of the oldest entry */
    int64_t len;    /* entries in the ring */
    int64_t cap;    /* ring capacity */
    int64_t next;   /* last consumed offset + 1; -1 = nothing consumed */
    int64_t undone; /* unfinished entries */
} wk_part_win;

struct wk_offsets {
    wk_part_win *p; /* windows by partition number */
    int32_t n;      /* windows allocated */
};

int wk_offsets_new(wk_offsets **out) {
    *out = calloc(1, sizeof **out);
    return *out ? 0 : WK_OFF_ENOMEM;
}

void wk_offsets_free(wk_offsets *o) {
    if (!o) return;
    for (int32_t i = 0; i < o->n; i++) {
        free(o->p[i].off);
        free(o->p[i].done);
    }
    free(o->p);
    free(o);
}

static wk_part_win *wk_win(const wk_offsets *o, int32_t part) {
    return part >= 0 && part < o->n ? &o->p[part] : NULL;
}

static int wk_grow_parts(wk_offsets *o, int32_t part) {
    if (part < o->n) return 0;
    int32_t n = part + 1 > 2 * o->n ? part + 1 : 2 * o->n;
    wk_part_win *p = realloc(o->p, (size_t)n * sizeof *p);
    if (!p) return WK_OFF_ENOMEM;
    memset(p + o->n, 0, (size_t)(n - o->n) * sizeof *p);
    for (int32_t i = o->n; i < n; i++) p[i].next = -1;
    o->p = p;
    o->n = n;
    return 0;
}

static int wk_grow_ring(wk_part_win *w) {
    int64_t cap = w->cap ? 2 * w->cap : 64;
    int64_t *off = malloc((size_t)cap * sizeof *off);
    bool *done = malloc((size_t)cap * sizeof *done);
    if (!off || !done) {
        free(off);
        free(done);
        return WK_OFF_ENOMEM;
    }
    for (int64_t i = 0; i < w->len; i++) {
        off[i] = w->off[(w->head + i) % w->cap];
        done[i] = w->done[(w->head + i) % w->cap];
    }
    free(w->off);
    free(w->done);
    w->off = off;
    w->done = done;
    w->head = 0;
    w->cap = cap;
    return 0;
}

int wk_offsets_add(wk_offsets *o, int32_t part, int64_t offset) {
    if (part < 0 || part >= WK_OFF_MAX_PARTITIONS || offset < 0) return WK_OFF_EINVAL;
    if (wk_grow_parts(o, part) != 0) return WK_OFF_ENOMEM;
    wk_part_win *w = &o->p[part];
    if (w->next >= 0 && offset < w->next) return WK_OFF_EINVAL;
    if (w->len == w->cap && wk_grow_ring(w) != 0) return WK_OFF_ENOMEM;
    int64_t slot = (w->head + w->len) % w->cap;
    w->off[slot] = offset;
    w->done[slot] = false;
    w->len++;
    w->undone++;
    w->next = offset + 1;
    return 0;
}

int wk_offsets_done(wk_offsets *o, int32_t part, int64_t offset) {
    wk_part_win *w = wk_win(o, part);
    if (!w || !w->len) return WK_OFF_EINVAL;
    /* Offsets increase along the ring: binary search. */
    int64_t lo = 0, hi = w->len - 1;
    while (lo <= hi) {
        int64_t mid = lo + (hi - lo) / 2, v = w->off[(w->head + mid) % w->cap];
        if (v == offset) {
            int64_t slot = (w->head + mid) % w->cap;
            if (w->done[slot]) return WK_OFF_EINVAL;
            w->done[slot] = true;
            w->undone--;
            while (w->len && w->done[w->head]) {
                w->head = (w->head + 1) % w->cap;
                w->len--;
            }
            return 0;
        }
        if (v < offset) lo = mid + 1;
        else hi = mid - 1;
    }
    return WK_OFF_EINVAL;
}

int64_t wk_offsets_position(const wk_offsets *o, int32_t part) {
    const wk_part_win *w = wk_win(o, part);
    if (!w || w->next < 0) return -1;
    return w->len ? w->off[w->head] : w->next;
}

int64_t wk_offsets_pending(const wk_offsets *o, int32_t part) {
    const wk_part_win *w = wk_win(o, part);
    return w ? w->undone : 0;
}

void wk_offsets_reset(wk_offsets *o, int32_t part) {
    wk_part_win *w = wk_win(o, part);
    if (!w) return;
    w->head = w->len = w->undone = 0;
    w->next = -1;
}
