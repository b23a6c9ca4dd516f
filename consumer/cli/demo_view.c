/*
 * demo_view.c -- the demo's conversation view (demo_view.h).
 */
#define _POSIX_C_SOURCE 200809L
#include "demo_view.h"
#include "pl_time.h"

#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#define DV_MIN_REDRAW_MS 40 /* live lines are redrawn at most this often */

/* One conversation's turn in flight. */
typedef struct dv_slot {
    char conv[32]; /* conversation id */
    int turn;      /* turn index in flight (-1: none) */
    int n_turns;   /* turns of the conversation */
    char *user;    /* the user's message of this turn */
    char *reply;   /* reply streamed so far */
    size_t n, cap; /* bytes of reply / allocated */
} dv_slot;

struct demo_view {
    FILE *out;        /* where everything goes */
    int tty;          /* live lines in place */
    int n;            /* conversations */
    int drawn;        /* live lines on screen now */
    double last_draw; /* monotonic ms of the last redraw */
    dv_slot *s;       /* [n] */
};

static int dv_width(const demo_view *v) {
    struct winsize ws;
    if (ioctl(fileno(v->out), TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 40) return ws.ws_col;
    return 80;
}

/* Bytes of s[0..n) as one line: control characters become spaces. */
static void dv_put_flat(FILE *f, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        fputc(ch < 0x20 || ch == 0x7f ? ' ' : ch, f);
    }
}

/* Start of the UTF-8 character at or after p in s[0..n). */
static size_t dv_utf8_start(const char *s, size_t n, size_t p) {
    while (p < n && ((unsigned char)s[p] & 0xc0) == 0x80) p++;
    return p;
}

/* Code points of s[0..n) (the columns they take, roughly). */
static size_t dv_cols(const char *s, size_t n) {
    size_t c = 0;
    for (size_t i = 0; i < n; i++) c += ((unsigned char)s[i] & 0xc0) != 0x80;
    return c;
}

/* The byte offset from which s[0..n) has at most cols code points. */
static size_t dv_tail(const char *s, size_t n, size_t cols) {
    size_t have = dv_cols(s, n), p = 0;
    while (have > cols && p < n) {
        p = dv_utf8_start(s, n, p + 1);
        have--;
    }
    return p;
}

/* The first bytes of s with at most cols code points. */
static size_t dv_head(const char *s, size_t n, size_t cols) {
    size_t p = 0;
    while (p < n && cols > 0) {
        p = dv_utf8_start(s, n, p + 1);
        cols--;
    }
    return p;
}

/* One live line: "demo-2 2/3  You: <head of user> | Assistant: <tail>". */
static void dv_line(const demo_view *v, const dv_slot *s, int width) {
    if (s->turn < 0) return;
    char lead[64];
    int ll = snprintf(lead, sizeof lead, "%s %d/%d  ", s->conv, s->turn + 1, s->n_turns);
    int room = width - 1 - ll;
    if (room < 20) room = 20;
    size_t ul = s->user ? strlen(s->user) : 0;
    size_t ucols = (size_t)room / 3, uh = dv_head(s->user ? s->user : "", ul, ucols);
    fputs(lead, v->out);
    fputs("You: ", v->out);
    dv_put_flat(v->out, s->user ? s->user : "", uh);
    if (uh < ul) fputs("...", v->out);
    fputs(" | Assistant: ", v->out);
    size_t used = 5 + dv_cols(s->user ? s->user : "", uh) + (uh < ul ? 3 : 0) + 14;
    size_t left = (size_t)room > used ? (size_t)room - used : 0;
    size_t from = dv_tail(s->reply ? s->reply : "", s->n, left > 3 ? left - 3 : 0);
    if (from > 0) fputs("...", v->out);
    dv_put_flat(v->out, s->reply ? s->reply + from : "", s->n - from);
}

/* Erase the live lines (cursor to their first line, clear to the end). */
static void dv_erase(demo_view *v) {
    if (!v->tty || !v->drawn) return;
    fprintf(v->out, "\r\033[%dA\033[J", v->drawn);
    v->drawn = 0;
}

static void dv_draw(demo_view *v) {
    if (!v->tty) return;
    dv_erase(v);
    int width = dv_width(v);
    for (int c = 0; c < v->n; c++) {
        if (v->s[c].turn < 0) continue;
        dv_line(v, &v->s[c], width);
        fputs("\033[K\n", v->out);
        v->drawn++;
    }
    fflush(v->out);
    v->last_draw = pl_mono_msf();
}

demo_view *demo_view_new(FILE *out, int n, int tty) {
    demo_view *v = calloc(1, sizeof *v);
    if (!v || !(v->s = calloc((size_t)n, sizeof *v->s))) {
        free(v);
        return NULL;
    }
    v->out = out;
    v->tty = tty;
    v->n = n;
    for (int c = 0; c < n; c++) v->s[c].turn = -1;
    return v;
}

void demo_view_turn_start(demo_view *v, int c, const char *conv, int t, int n_turns,
                          const char *user) {
    if (!v || c < 0 || c >= v->n) return;
    dv_slot *s = &v->s[c];
    snprintf(s->conv, sizeof s->conv, "%s", conv);
    s->turn = t;
    s->n_turns = n_turns;
    free(s->user);
    s->user = strdup(user ? user : "");
    s->n = 0;
    dv_draw(v);
}

void demo_view_delta(demo_view *v, int c, int t, const char *text, size_t n) {
    if (!v || c < 0 || c >= v->n || v->s[c].turn != t || n == 0) return;
    dv_slot *s = &v->s[c];
    if (s->n + n + 1 > s->cap) {
        size_t cap = (s->n + n + 1) * 2;
        char *r = realloc(s->reply, cap);
        if (!r) return;
        s->reply = r;
        s->cap = cap;
    }
    memcpy(s->reply + s->n, text, n);
    s->n += n;
    s->reply[s->n] = 0;
    if (pl_mono_msf() - v->last_draw >= DV_MIN_REDRAW_MS) dv_draw(v);
}

/* The reply as an indented block: each line of text after "prefix". */
static void dv_block_text(FILE *f, const char *prefix, const char *s, size_t n) {
    fputs(prefix, f);
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '\n') fputs("\n             ", f);
        else if (ch == '\r' || ch == 0x7f || (ch < 0x20 && ch != '\t')) fputc(' ', f);
        else fputc(ch, f);
    }
    fputc('\n', f);
}

void demo_view_turn_done(demo_view *v, int c, int t, const char *reply, size_t n,
                         const char *figures) {
    if (!v || c < 0 || c >= v->n || v->s[c].turn != t) return;
    dv_slot *s = &v->s[c];
    dv_erase(v);
    fprintf(v->out, "-- %s, turn %d/%d\n", s->conv, t + 1, s->n_turns);
    dv_block_text(v->out, "   You:       ", s->user ? s->user : "", s->user ? strlen(s->user) : 0);
    /* a reply that starts with blanks (transcript models answer " Sure...")
     * reads better without them */
    while (n > 0 && (*reply == ' ' || *reply == '\n')) reply++, n--;
    while (n > 0 && (reply[n - 1] == ' ' || reply[n - 1] == '\n' || reply[n - 1] == '\r')) n--;
    dv_block_text(v->out, "   Assistant: ", reply ? reply : "", n);
    if (figures && *figures) fprintf(v->out, "   (%s)\n", figures);
    s->turn = -1;
    s->n = 0;
    dv_draw(v);
    fflush(v->out);
}

void demo_view_close(demo_view *v) {
    if (!v) return;
    dv_erase(v);
    for (int c = 0; c < v->n; c++) v->s[c].turn = -1;
    fflush(v->out);
}

void demo_view_free(demo_view *v) {
    if (!v) return;
    for (int c = 0; c < v->n; c++) {
        free(v->s[c].user);
        free(v->s[c].reply);
    }
    free(v->s);
    free(v);
}
