/*
 * cm_startup.h -- a deadline on a program's start-up: no command waits
 * without limit before it serves.
 *
 * Purpose.  Every Kafka program of the binary (worker, gateway, batch,
 * chat, load, demo, topics) blocks at start on calls that depend on a
 * cluster it cannot control: metadata, init_transactions, the group probe,
 * rd_kafka_subscribe, the mock cluster.  A user who points one at the wrong
 * address, or runs it against a library with a bug (librdkafka 2.0.2's
 * subscribe on the mock cluster never returned), must get an exit status 1
 * and one line that names what was awaited and the setting that bounds the
 * wait, never a silent hang.  Calls that take a timeout get the time left
 * (cm_startup_left_ms) and fail through their caller's error path with the
 * same line (cm_startup_errf); calls that take none (rd_kafka_subscribe)
 * are covered by a watchdog thread that prints the line and ends the
 * process with _exit(1) when the deadline passes.
 *
 * Use.  cm_startup_begin(prog, setting, ms) once, cm_startup_wait(what)
 * before each blocking call, cm_startup_end() when start-up is over (the
 * watchdog stands down; later waits are the program's own business).
 *
 * Data layout.  One process-wide state (a program starts up once): the
 * program name, the setting's name, the deadline and a copy of the current
 * waiting item, under one mutex; the watchdog thread sleeps on a condition variable
 * until the deadline or cm_startup_end.
 *
 * Threading.  Every function may be called from any thread.  Only the
 * watchdog ends the process, and only while start-up is unfinished.
 *
 * Failure behaviour.  cm_startup_begin returns -1 when the watchdog thread
 * cannot start (the deadline then still bounds the calls that take a
 * timeout).  Nothing else fails.  This is program code (consumer/), not
 * library code: ending the process is its job here.
 */
#ifndef CM_STARTUP_H
#define CM_STARTUP_H

#include <stddef.h>
#include <stdint.h>

/* Arm the deadline: start-up of program prog (e.g. "worker") must be over
 * within timeout_ms, a bound set by setting (e.g. "worker.startup_timeout_ms"
 * or "--startup-timeout-s").  Both strings must outlive start-up.  Returns 0,
 * or -1 when the watchdog thread could not be started. */
int cm_startup_begin(const char *prog, const char *setting, int64_t timeout_ms);

/* Name what start-up waits for next (copied, at most 511 bytes, e.g.
 * "init_transactions of transactional id parley-w1"). */
void cm_startup_wait(const char *what);

/* Milliseconds left before the deadline (0 when passed; INT32_MAX-capped;
 * 60000 when cm_startup_begin was not called). */
int cm_startup_left_ms(void);

/* 1 when the deadline has passed (and start-up is not over). */
int cm_startup_expired(void);

/* Write the one-line give-up message ("gave up after N s waiting for WHAT
 * (bounded by SETTING)") into err and return code.  Start-up is then over
 * (failed): the watchdog stands down so the caller can report and clean
 * up. */
int cm_startup_errf(char *err, size_t errlen, int code);

/* Start-up is over: the watchdog stands down.  Idempotent. */
void cm_startup_end(void);

#endif
