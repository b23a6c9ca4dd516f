/*
 * sch_mp.c -- the format-string msgpack builder used by the schema unit
 * tests and benchmarks (see sch_mp.h).
 */
#include "sch_mp.h"

#include <msgpack.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

unsigned char *mp_build(size_t *len, const char *fmt, ...) {
    msgpack_sbuffer sb;
    msgpack_packer pk;
    va_list ap;
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    va_start(ap, fmt);
    for (const char *f = fmt; *f; f++) {
        switch (*f) {
        case ' ': break;
        case 'M':
        case 'A': {
            char letter = *f;
            int n = va_arg(ap, int);
            if (f[1] >= '0' && f[1] <= '9') { /* written count: must agree */
                char *end;
                long want = strtol(f + 1, &end, 10);
                if (want != n) {
                    fprintf(stderr, "mp_build: %c%ld given count %d\n", letter, want, n);
                    abort();
                }
                f = end - 1;
            }
            if (letter == 'M') msgpack_pack_map(&pk, (size_t)n);
            else msgpack_pack_array(&pk, (size_t)n);
            break;
        }
        case 's': {
            const char *s = va_arg(ap, const char *);
            msgpack_pack_str_with_body(&pk, s, strlen(s));
            break;
        }
        case 'S': {
            const char *s = va_arg(ap, const char *);
            size_t n = va_arg(ap, size_t);
            msgpack_pack_str_with_body(&pk, s, n);
            break;
        }
        case 'B': {
            const void *s = va_arg(ap, const void *);
            size_t n = va_arg(ap, size_t);
            msgpack_pack_bin_with_body(&pk, s, n);
            break;
        }
        case 'r': {
            const void *s = va_arg(ap, const void *);
            size_t n = va_arg(ap, size_t);
            msgpack_sbuffer_write(&sb, s, n);
            break;
        }
        case 'u': msgpack_pack_int64(&pk, va_arg(ap, int)); break;
        case 'U': msgpack_pack_uint64(&pk, va_arg(ap, uint64_t)); break;
        case 'i': msgpack_pack_int64(&pk, va_arg(ap, int64_t)); break;
        case 'd': msgpack_pack_double(&pk, va_arg(ap, double)); break;
        case 'f': msgpack_pack_float(&pk, (float)va_arg(ap, double)); break;
        case 't': msgpack_pack_true(&pk); break;
        case 'F': msgpack_pack_false(&pk); break;
        case 'n': msgpack_pack_nil(&pk); break;
        default: fprintf(stderr, "mp_build: bad format letter '%c'\n", *f); abort();
        }
    }
    va_end(ap);
    *len = sb.size;
    /* hand over sbuffer's malloc'd storage */
    return (unsigned char *)msgpack_sbuffer_release(&sb);
}
