/*
 * gw_web.h -- the gateway's playground page, embedded in the binary.
 *
 * Purpose.  The files of consumer/gateway/web/ (playground.html, .js,
 * .css: plain files, no build step) become byte arrays at build time
 * (web/embed.cmake); gw_http serves them on GET when gateway.playground
 * is on, with a restrictive Content-Security-Policy (gw_web_csp).
 *
 * Ownership.  Static, read-only data.
 */
#ifndef GW_WEB_H
#define GW_WEB_H

#include <stddef.h>

/* One embedded file. */
typedef struct gw_web_asset {
    const char *path;          /* URL path ("/" for the page itself) */
    const char *ctype;         /* Content-Type */
    const unsigned char *data; /* its bytes */
    size_t len;                /* bytes in data */
} gw_web_asset;

/* The embedded files, ended by an entry whose path is NULL. */
extern const gw_web_asset gw_web_assets[];

/* The file served at url, or NULL. */
const gw_web_asset *gw_web_find(const char *url);

/* The Content-Security-Policy of every playground response: scripts,
 * styles and fetches from the gateway itself only, no inline script or
 * style, no plugins, no framing, no forms posting elsewhere. */
extern const char gw_web_csp[];

#endif
