/*
 * gw_cancel.c -- a client that left cancels its turn (gw_cancel.h).
 */
#include "gw_cancel.h"

#include <stdio.h>

#include "pl_err.h"

int gw_cancel_turn(gw_hub *h, gw_wait *w, const char *why) {
    char err[PL_ERR_LEN];
    int rc = gw_hub_cancel(h, w, why, err, sizeof err);
    if (rc < 0) fprintf(stderr, "parley gateway: cancel not sent: %s\n", err);
    return rc > 0;
}
