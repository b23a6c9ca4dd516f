/*
 * wk_log.c -- the worker's structured log: one line per event on stderr,
 * `ts=<unix ms> level=<info|warn|error> event=<name> key=value ...`, lines
 * below the level set by wk_log_set_level (worker.log_level) dropped.
 * Any thread: a line is one fprintf, which stdio keeps whole.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "pl_time.h"
#include "wk_internal.h"


/* Rank of a level name: info 0, warn 1, error 2 (others: 0). */
static int wk_log_rank(const char *level) {
    return !strcmp(level, "error") ? 2 : !strcmp(level, "warn") ? 1 : 0;
}

static int wk_log_min; /* lines of a lower rank are dropped */

void wk_log_set_level(const char *level) {
    __atomic_store_n(&wk_log_min, wk_log_rank(level), __ATOMIC_RELAXED);
}

void wk_log(const char *level, const char *event, const char *fmt, ...) {
    if (wk_log_rank(level) < __atomic_load_n(&wk_log_min, __ATOMIC_RELAXED)) return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "ts=%lld level=%s event=%s %s\n", (long long)pl_unix_ms(), level, event, msg);
}
