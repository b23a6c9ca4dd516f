/*
 * sch_mp.h -- test helper: build msgpack bytes from a compact format string.
 *
 * Unit tests need records the encoder would never write (wrong types,
 * duplicate keys, bad UTF-8, odd integer widths), so they build bytes with
 * msgpack-c's packer directly through mp_build(), whose format letters are:
 *   M    map header (int n)         A    array header (int n)
 * The count always comes from the argument list; digits written after M or
 * A ("M4") must equal it, which catches format/argument drift.
 *   s    str (const char *)         S    str (const char *, size_t len)
 *   B    bin (const void *, size_t) r    raw bytes (const void *, size_t)
 *   u    int (packed as int)        U    uint64_t
 *   i    int64_t
 *   d    float64 (double)           f    float32 (double argument)
 *   t    true   F false             n    nil
 * Spaces are ignored.  The result is a malloc'd buffer (free with free()).
 */
#ifndef SCH_MP_H
#define SCH_MP_H

#include <stddef.h>

/* Build bytes per fmt; *len receives the length.  Aborts the test program
 * on a bad format letter (a bug in the test itself). */
unsigned char *mp_build(size_t *len, const char *fmt, ...);

#endif /* SCH_MP_H */
