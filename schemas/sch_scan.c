/*
 * sch_scan.c -- structural pre-scan of a record before msgpack-c sees it.
 *
 * Why: msgpack-c's unpacker allocates the element array of a container as
 * soon as it reads the header, so the 5 bytes `dd ff ff ff ff` make it ask
 * for 2^32 * sizeof(msgpack_object) = 128 GiB (an abort under ASan or
 * libFuzzer, memory pressure elsewhere); it also answers nesting deeper
 * than its fixed 32-entry stack with a misleading "no memory".  This scan
 * walks the bytes once, iteratively, with no allocation, and proves before
 * anything is allocated that:
 *   - the record is not empty and not longer than max_total_bytes;
 *   - the root is a map;
 *   - every value is complete (no truncation) and no byte is 0xc1;
 *   - every container claims no more elements than bytes remain, so
 *     msgpack-c's allocations are bounded by a constant times the input;
 *   - nesting is at most max_depth and the value count at most max_objects;
 *   - nothing follows the root map.
 * After it passes, msgpack_unpack_next() can only fail on a real out-of-
 * memory condition.
 */
#include "sch_internal.h"

static uint64_t sch_be(const unsigned char *p, unsigned n) {
    uint64_t v = 0;
    for (unsigned i = 0; i < n; i++) v = (v << 8) | p[i];
    return v;
}

static const char *sch_byte_type(unsigned char b) {
    if (b <= 0x7f || b >= 0xe0) return "int";
    if (b <= 0x8f) return "map";
    if (b <= 0x9f) return "array";
    if (b <= 0xbf) return "str";
    switch (b) {
    case 0xc0: return "nil";
    case 0xc2:
    case 0xc3: return "bool";
    case 0xc4:
    case 0xc5:
    case 0xc6: return "bin";
    case 0xc7:
    case 0xc8:
    case 0xc9: return "ext";
    case 0xca:
    case 0xcb: return "float";
    case 0xd4:
    case 0xd5:
    case 0xd6:
    case 0xd7:
    case 0xd8: return "ext";
    case 0xd9:
    case 0xda:
    case 0xdb: return "str";
    case 0xdc:
    case 0xdd: return "array";
    case 0xde:
    case 0xdf: return "map";
    case 0xc1: return "invalid byte 0xc1";
    default: return "int";
    }
}

int sch_scan(const unsigned char *p, size_t len, const sch_limits *lim, char *err, size_t errlen) {
    uint64_t rem[SCH_MAX_DEPTH_CEILING + 1]; /* values left per open level */
    uint32_t max_depth = lim->max_depth;
    size_t depth = 0, pos = 0, objects = 0;

    if (max_depth > SCH_MAX_DEPTH_CEILING) max_depth = SCH_MAX_DEPTH_CEILING;
    if (len == 0) return pl_errf(err, errlen, SCH_E_TRUNCATED, "empty record");
    if (len > lim->max_total_bytes)
        return pl_errf(err, errlen, SCH_E_RECORD_TOO_LARGE,
                       "record of %zu bytes exceeds max_total_bytes %zu", len,
                       lim->max_total_bytes);
    if (!((p[0] >= 0x80 && p[0] <= 0x8f) || p[0] == 0xde || p[0] == 0xdf))
        return pl_errf(err, errlen, SCH_E_NOT_MAP, "root value is %s (byte 0x%02x), expected a map",
                       sch_byte_type(p[0]), p[0]);
    rem[0] = 1;
    for (;;) {
        while (rem[depth] == 0) {
            if (depth == 0) goto done;
            depth--;
        }
        rem[depth]--;
        if (pos >= len)
            return pl_errf(err, errlen, SCH_E_TRUNCATED, "record ends at byte %zu inside a value",
                           pos);
        if (++objects > lim->max_objects)
            return pl_errf(err, errlen, SCH_E_TOO_MANY_OBJECTS, "more than max_objects %zu values",
                           lim->max_objects);
        size_t at = pos;
        unsigned char b = p[pos++];
        size_t avail = len - pos;
        uint64_t skip = 0;  /* payload bytes after the header */
        uint64_t items = 0; /* child values of a container */
        unsigned lenbytes = 0;
        bool container = false;

        if (b <= 0x7f || b >= 0xe0 || b == 0xc0 || b == 0xc2 || b == 0xc3) {
            skip = 0;
        } else if (b <= 0x8f) {
            container = true;
            items = 2u * (b & 0x0f);
        } else if (b <= 0x9f) {
            container = true;
            items = b & 0x0f;
        } else if (b <= 0xbf) {
            skip = b & 0x1f;
        } else {
            switch (b) {
            case 0xc1:
                return pl_errf(err, errlen, SCH_E_MALFORMED,
                               "invalid msgpack byte 0xc1 at offset %zu", at);
            case 0xc4:
            case 0xd9: lenbytes = 1; break;
            case 0xc5:
            case 0xda: lenbytes = 2; break;
            case 0xc6:
            case 0xdb: lenbytes = 4; break;
            case 0xc7:
                lenbytes = 1;
                skip = 1;
                break; /* + ext type byte */
            case 0xc8:
                lenbytes = 2;
                skip = 1;
                break;
            case 0xc9:
                lenbytes = 4;
                skip = 1;
                break;
            case 0xca: skip = 4; break;
            case 0xcb: skip = 8; break;
            case 0xcc:
            case 0xd0: skip = 1; break;
            case 0xcd:
            case 0xd1: skip = 2; break;
            case 0xce:
            case 0xd2: skip = 4; break;
            case 0xcf:
            case 0xd3: skip = 8; break;
            case 0xd4: skip = 2; break;
            case 0xd5: skip = 3; break;
            case 0xd6: skip = 5; break;
            case 0xd7: skip = 9; break;
            case 0xd8: skip = 17; break;
            case 0xdc:
            case 0xde:
                lenbytes = 2;
                container = true;
                break;
            case 0xdd:
            case 0xdf:
                lenbytes = 4;
                container = true;
                break;
            default: break;
            }
            if (lenbytes) {
                if (avail < lenbytes)
                    return pl_errf(err, errlen, SCH_E_TRUNCATED,
                                   "record ends inside the header at "
                                   "offset %zu",
                                   at);
                uint64_t n = sch_be(p + pos, lenbytes);
                pos += lenbytes;
                avail -= lenbytes;
                if (container) items = (b == 0xde || b == 0xdf) ? 2 * n : n;
                else skip += n;
            }
        }
        if (container) {
            /* every child needs at least one byte */
            if (items > avail)
                return pl_errf(err, errlen, SCH_E_TRUNCATED,
                               "%s at offset %zu claims %llu values but "
                               "only %zu bytes remain",
                               sch_byte_type(b), at, (unsigned long long)items, avail);
            if (depth + 1 > max_depth)
                return pl_errf(err, errlen, SCH_E_TOO_DEEP,
                               "nesting deeper than max_depth %u at "
                               "offset %zu",
                               max_depth, at);
            rem[++depth] = items;
        } else {
            if (skip > avail)
                return pl_errf(err, errlen, SCH_E_TRUNCATED,
                               "%s at offset %zu needs %llu bytes, %zu "
                               "remain",
                               sch_byte_type(b), at, (unsigned long long)skip, avail);
            pos += (size_t)skip;
        }
    }
done:
    if (pos != len)
        return pl_errf(err, errlen, SCH_E_TRAILING_BYTES,
                       "%zu bytes follow the root map (record is %zu bytes)", len - pos, len);
    return SCH_OK;
}
