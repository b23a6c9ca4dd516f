/*
 * pl_err.c -- the one error formatter and the range helpers (pl_err.h).
 */
#include "pl_err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int pl_errf(char *err, size_t errlen, int code, const char *fmt, ...) {
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return code;
}

int pl_errwrap(char *err, size_t errlen, int code, const char *fmt, ...) {
    if (!err || !errlen) return code;
    char cause[PL_ERR_LEN];
    snprintf(cause, sizeof cause, "%s", err);
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < errlen && cause[0])
        snprintf(err + n, errlen - (size_t)n, ": %s", cause);
    return code;
}

int pl_err_class(int code) {
    if (code >= 0) return 0;
    if (code > -100) {
        /* the wire set: only its allocation and API-misuse members are
         * generic (SCH_E_NOMEM -31, SCH_E_INVALID_ARGUMENT -32) */
        return code == -31 ? PL_ENOMEM : code == -32 ? PL_EINVAL : PL_EOTHER;
    }
    int off = (-code) % 100;
    return off >= 1 && off < PL_EOTHER ? off : PL_EOTHER;
}

int pl_err_recode(int cause, int base, int fallback) {
    if (cause >= 0) return cause;
    int cls = pl_err_class(cause);
    return cls < PL_EOTHER ? PL_ERR_CODE(base, cls) : fallback;
}

const char *pl_err_module(int code) {
    static const char *const names[] = {
        "schemas",    "gguf",      "tok",     "template", "config",      "model",    "kv",
        "sampler",    "scheduler", "cache",   "cuda",     "config file", "offsets",  "worker",
        "constraint", "clients",   "gateway", "batch",    "kernels",     "commands", "kafka"};
    if (code == 0) return "ok";
    if (code > 0) return "unknown";
    int r = (-code) / 100;
    return r < (int)(sizeof names / sizeof names[0]) ? names[r] : "unknown";
}
