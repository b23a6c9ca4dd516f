/*
 * gw_cancel.h -- the gateway's side of cancellation (spec 1.4): a client
 * that leaves before its reply cancels its turn, so the fleet stops
 * spending compute on it.
 *
 * Purpose.  gw_http calls gw_cancel_turn when a client goes away before
 * its reply: a streaming client before [DONE] (the response's free
 * callback, once a write failed or gw_client_gone ended the stream), a
 * non-streaming one whose connection closes while it waits for the
 * TurnResult (gw_client_gone, checked between the GW_GONE_CHECK_MS waits
 * of gw_chat_wait and of the chat and Responses streams' readers).  The cancel goes through the hub's producer, keyed by the
 * conversation, so it follows its turn on the same partition.
 *
 * Detecting a closed connection.  While a non-streaming request waits,
 * nothing is written to its socket, so a write error cannot tell (and a
 * stream's write fails only at the second write after the close).  Instead
 * the socket is polled (no wait) and, when readable, peeked: end of file
 * (the client closed, or shut down its sending side: an HTTP/1.1 client
 * that half-closes while it waits is taken as gone) or an error (a reset)
 * means the client left; bytes waiting (a pipelined next request) or
 * nothing mean it is still there.
 *
 * Threading.  Any HTTP connection thread.
 *
 * Failure behaviour.  A cancel that cannot be produced is logged to stderr
 * and dropped: the turn then runs to its end (the pre-1.4 behaviour).
 */
#ifndef GW_CANCEL_H
#define GW_CANCEL_H

#include "gw_hub.h"

struct MHD_Connection;

/* How often (ms) a waiting request or a stream looks at its connection. */
#define GW_GONE_CHECK_MS 100

/* Cancel w's turn unless its result came (gw_hub_cancel); why goes in the
 * cancel's reason.  1 when a cancel was sent, else 0. */
int gw_cancel_turn(gw_hub *h, gw_wait *w, const char *why);

/* 1 when the client of connection c closed it (end of file or an error
 * on its socket), else 0 (also when the socket cannot be looked at). */
int gw_client_gone(struct MHD_Connection *c);

#endif
