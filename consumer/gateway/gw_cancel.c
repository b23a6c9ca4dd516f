/*
 * gw_cancel.c -- a client that left cancels its turn (gw_cancel.h).
 */
#define _POSIX_C_SOURCE 200809L
#include "gw_cancel.h"

#include <errno.h>
#include <microhttpd.h>
#include <poll.h>
#include <stdio.h>
#include <sys/socket.h>

#include "pl_err.h"

int gw_cancel_turn(gw_hub *h, gw_wait *w, const char *why) {
    char err[PL_ERR_LEN];
    int rc = gw_hub_cancel(h, w, why, err, sizeof err);
    if (rc < 0) fprintf(stderr, "parley gateway: cancel not sent: %s\n", err);
    return rc > 0;
}

int gw_client_gone(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci || ci->connect_fd == MHD_INVALID_SOCKET) return 0;
    struct pollfd p = {.fd = ci->connect_fd, .events = POLLIN};
    if (poll(&p, 1, 0) <= 0) return 0;
    if (p.revents & (POLLERR | POLLHUP | POLLNVAL)) return 1;
    if (!(p.revents & POLLIN)) return 0;
    char b;
    ssize_t n = recv(ci->connect_fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0) return 1;
    return n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
}
