/*
 * demo_view.h -- how `parley demo` shows its conversations: as
 * conversations, each turn the user's message and the reply.
 *
 * Purpose.  The demo runs several conversations at once; their streamed
 * fragments arrive interleaved.  Printed as they come they read as noise
 * ("[demo-1 t2] hat 4. Sunglas").  The view keeps, per conversation, the
 * turn in flight (the user's message and the reply streamed so far) and
 * shows:
 *   - on a terminal: one live line per conversation at the bottom of the
 *     screen, redrawn in place as tokens stream ("demo-2 2/3  You: ... |
 *     Assistant: ...", the reply's tail when it is longer than the line);
 *   - always, when a turn ends: one finished block above them (the user's
 *     message, the whole reply, the turn's figures), so the scrollback (or
 *     a log when the output is not a terminal) reads as a transcript.
 *
 * Data layout.  An array of conversation slots (id, turn index, user
 * message, streamed reply bytes), owned by the view.
 *
 * Threading.  Single-threaded (the demo's client loop).
 *
 * Ownership.  demo_view_new copies nothing it is not given; every string
 * passed in is copied.  demo_view_free releases everything.
 *
 * Failure behaviour.  Out of memory drops streamed text from the live line
 * (the finished block uses the TurnResult's text); nothing fails.
 */
#ifndef DEMO_VIEW_H
#define DEMO_VIEW_H

#include <stddef.h>
#include <stdio.h>

typedef struct demo_view demo_view; /* opaque */

/* A view of n conversations on out; tty != 0 redraws live lines in place
 * (ANSI), 0 prints finished blocks only.  NULL out of memory. */
demo_view *demo_view_new(FILE *out, int n, int tty);

/* Conversation c (id conv) starts turn t (0-based) of n_turns with the
 * user's message. */
void demo_view_turn_start(demo_view *v, int c, const char *conv, int t, int n_turns,
                          const char *user);

/* Streamed text of turn t of conversation c (ignored unless it is the turn
 * in flight). */
void demo_view_delta(demo_view *v, int c, int t, const char *text, size_t n);

/* Turn t of conversation c ended: print its block (reply = the final
 * text, figures = one line of its numbers) and clear its live line. */
void demo_view_turn_done(demo_view *v, int c, int t, const char *reply, size_t n,
                         const char *figures);

/* Remove the live lines (before the summary); the view may not be used
 * afterwards except for demo_view_free. */
void demo_view_close(demo_view *v);

void demo_view_free(demo_view *v);

#endif
