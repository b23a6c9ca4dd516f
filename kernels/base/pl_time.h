/*
 * pl_time.h -- the tree's one home for clock reads.
 *
 * Purpose.  Every module needs "now" in some unit: the scheduler in
 * microseconds, the caches and clients in milliseconds, the benchmarks in
 * seconds, the thread pool in nanoseconds; records on the wire carry Unix
 * milliseconds.  These inline helpers are the only place parley's own
 * sources (schemas, kernels, engine, cache, consumer) read the clock, so
 * the unit and the clock behind each name are written once; a few test
 * and benchmark programs under tests/ still time themselves.
 *
 * Clocks.  pl_mono_* read CLOCK_MONOTONIC: for durations and deadlines
 * inside one process (never jumps with the wall clock, meaningless across
 * machines).  pl_unix_ms reads CLOCK_REALTIME: Unix epoch milliseconds for
 * timestamps that leave the process (created_ms, expiry checks against a
 * producer's clock).
 *
 * pl_deadline_ts gives the CLOCK_REALTIME timespec that
 * pthread_cond_timedwait wants for "ms from now"; pl_clock_us reads any
 * other clock (a thread's CPU time) in microseconds.
 *
 * Failure behaviour.  None: clock_gettime cannot fail for these clocks on
 * Linux (pl_clock_us returns 0 for a clock the system lacks).  Header
 * only, no state; safe from any thread.
 */
#ifndef PL_TIME_H
#define PL_TIME_H

#include <stdint.h>
#include <time.h>

/* Monotonic nanoseconds. */
static inline int64_t pl_mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Monotonic microseconds. */
static inline int64_t pl_mono_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Monotonic whole milliseconds. */
static inline int64_t pl_mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Monotonic milliseconds with the fraction (for timings printed to users). */
static inline double pl_mono_msf(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* Monotonic seconds with the fraction (benchmarks, throughput figures). */
static inline double pl_mono_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Unix epoch milliseconds (CLOCK_REALTIME). */
static inline int64_t pl_unix_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The CLOCK_REALTIME time ms milliseconds from now (ms >= 0), as
 * pthread_cond_timedwait's absolute deadline. */
static inline struct timespec pl_deadline_ts(int64_t ms) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += (time_t)(ms / 1000);
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
    return ts;
}

/* Microseconds of clock ck (e.g. CLOCK_THREAD_CPUTIME_ID); 0 when the
 * clock cannot be read. */
static inline int64_t pl_clock_us(clockid_t ck) {
    struct timespec ts;
    if (clock_gettime(ck, &ts) != 0) return 0;
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

#endif
