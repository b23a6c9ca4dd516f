/*
 * eng_err.h -- the engine's error-message channel.
 *
 * Engine functions report failure by returning a negative code and writing
 * a human-readable message into a caller buffer (char *err, size_t errlen);
 * either may be NULL/0 when the caller does not want the text.  This is the
 * one helper every engine file uses to do that.
 */
#ifndef ENG_ERR_H
#define ENG_ERR_H
#include <stddef.h>

/* Format a message into err (when err && errlen) and return code. */
int eng_errf(char *err, size_t errlen, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
