/*
 * cm_startup.c -- the start-up deadline and its watchdog (cm_startup.h).
 */
#define _POSIX_C_SOURCE 200809L
#include "cm_startup.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "pl_err.h"
#include "pl_time.h"

/* The process's one start-up (see the header's "Data layout"). */
static struct {
    pthread_mutex_t mu;  /* guards every field below */
    pthread_cond_t cv;   /* signalled by cm_startup_end */
    int armed;           /* cm_startup_begin ran */
    int watching;        /* the watchdog thread runs */
    int over;            /* cm_startup_end ran */
    const char *prog;    /* program name, e.g. "worker" */
    const char *setting; /* the setting that bounds start-up */
    char what[512];      /* what start-up waits for now (a copy) */
    int64_t start_ms;    /* pl_mono_ms at cm_startup_begin */
    int64_t deadline_ms; /* pl_mono_ms when start-up gives up */
} cm_su = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0, "", "", "", 0, 0};
/* (fields in order: mu, cv, armed, watching, over, prog, setting, what,
 * start_ms, deadline_ms) */

/* Format the give-up line for the current state (mutex held). */
static void cm_line(char *out, size_t n) {
    snprintf(out, n, "gave up after %.0f s waiting for %s (bounded by %s)",
             (double)(cm_su.deadline_ms - cm_su.start_ms) / 1000.0,
             *cm_su.what ? cm_su.what : "start-up", cm_su.setting);
}

static void *cm_watchdog(void *arg) {
    (void)arg;
    pthread_mutex_lock(&cm_su.mu);
    while (!cm_su.over) {
        int64_t left = cm_su.deadline_ms - pl_mono_ms();
        if (left <= 0) break;
        struct timespec ts = pl_deadline_ts(left);
        int rc = pthread_cond_timedwait(&cm_su.cv, &cm_su.mu, &ts);
        if (rc != 0 && rc != ETIMEDOUT && rc != EINTR) break;
    }
    if (!cm_su.over) {
        char line[800];
        cm_line(line, sizeof line);
        fflush(stdout);
        fprintf(stderr, "%s: %s\n", cm_su.prog, line);
        fflush(stderr);
        _exit(1);
    }
    cm_su.watching = 0;
    pthread_mutex_unlock(&cm_su.mu);
    return NULL;
}

int cm_startup_begin(const char *prog, const char *setting, int64_t timeout_ms) {
    pthread_mutex_lock(&cm_su.mu);
    cm_su.prog = prog;
    cm_su.setting = setting;
    cm_su.what[0] = 0;
    cm_su.start_ms = pl_mono_ms();
    cm_su.deadline_ms = cm_su.start_ms + timeout_ms;
    cm_su.over = 0;
    cm_su.armed = 1;
    int start = !cm_su.watching;
    cm_su.watching = 1;
    pthread_cond_broadcast(&cm_su.cv); /* a running watchdog reads the new deadline */
    pthread_mutex_unlock(&cm_su.mu);
    if (!start) return 0;
    pthread_t th;
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&th, &a, cm_watchdog, NULL);
    pthread_attr_destroy(&a);
    if (rc == 0) return 0;
    pthread_mutex_lock(&cm_su.mu);
    cm_su.watching = 0;
    pthread_mutex_unlock(&cm_su.mu);
    return -1;
}

void cm_startup_wait(const char *what) {
    pthread_mutex_lock(&cm_su.mu);
    snprintf(cm_su.what, sizeof cm_su.what, "%s", what ? what : "");
    pthread_mutex_unlock(&cm_su.mu);
}

int cm_startup_left_ms(void) {
    pthread_mutex_lock(&cm_su.mu);
    int64_t left = cm_su.armed ? cm_su.deadline_ms - pl_mono_ms() : 60000;
    pthread_mutex_unlock(&cm_su.mu);
    return left <= 0 ? 0 : left > 0x7fffffff ? 0x7fffffff : (int)left;
}

int cm_startup_expired(void) {
    pthread_mutex_lock(&cm_su.mu);
    int e = cm_su.armed && !cm_su.over && pl_mono_ms() >= cm_su.deadline_ms;
    pthread_mutex_unlock(&cm_su.mu);
    return e;
}

int cm_startup_errf(char *err, size_t errlen, int code) {
    char line[800];
    pthread_mutex_lock(&cm_su.mu);
    cm_line(line, sizeof line);
    /* start-up has failed: the caller reports it and cleans up (which may
     * itself wait), the watchdog must not cut that short */
    cm_su.over = 1;
    pthread_cond_broadcast(&cm_su.cv);
    pthread_mutex_unlock(&cm_su.mu);
    return pl_errf(err, errlen, code, "%s", line);
}

void cm_startup_end(void) {
    pthread_mutex_lock(&cm_su.mu);
    cm_su.over = 1;
    pthread_cond_broadcast(&cm_su.cv);
    pthread_mutex_unlock(&cm_su.mu);
}
