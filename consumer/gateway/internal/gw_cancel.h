/*
 * gw_cancel.h -- the gateway's side of cancellation (spec 1.4): a client
 * that leaves before its reply cancels its turn, so the fleet stops
 * spending compute on it.
 *
 * Purpose.  gw_http calls gw_cancel_turn when a streaming client goes away
 * before [DONE] (the response's free callback).  The cancel goes through
 * the hub's producer, keyed by the conversation, so it follows its turn on
 * the same partition.  (A non-streaming client that closes its connection
 * is not noticed while it waits: its turn still runs; docs/known-gaps.md.)
 *
 * Threading.  Any HTTP connection thread.
 *
 * Failure behaviour.  A cancel that cannot be produced is logged to stderr
 * and dropped: the turn then runs to its end (the pre-1.4 behaviour).
 */
#ifndef GW_CANCEL_H
#define GW_CANCEL_H

#include "gw_hub.h"

/* Cancel w's turn unless its result came (gw_hub_cancel); why goes in the
 * cancel's reason.  1 when a cancel was sent, else 0. */
int gw_cancel_turn(gw_hub *h, gw_wait *w, const char *why);

#endif
