/*
 * err.c -- eng_errf, the engine's one error-message formatter (eng_err.h).
 */
#include "eng_err.h"

#include <stdarg.h>
#include <stdio.h>

int eng_errf(char *err, size_t errlen, int code, const char *fmt, ...) {
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return code;
}
