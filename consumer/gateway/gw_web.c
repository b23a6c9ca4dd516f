/*
 * gw_web.c -- lookup of the embedded playground files (see gw_web.h).
 */
#include "gw_web.h"

#include <string.h>

const char gw_web_csp[] = "default-src 'none'; script-src 'self'; style-src 'self'; "
                          "connect-src 'self'; img-src 'self'; base-uri 'none'; "
                          "form-action 'none'; frame-ancestors 'none'";

const gw_web_asset *gw_web_find(const char *url) {
    for (const gw_web_asset *a = gw_web_assets; a->path; a++)
        if (!strcmp(a->path, url)) return a;
    return NULL;
}
