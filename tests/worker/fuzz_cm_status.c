/*
 * fuzz_cm_status.c -- libFuzzer target: the worker status record parser
 * (cm_status_parse), which reads the status topic: any worker, or anyone
 * who may write to the topic, chooses its bytes.  A record it accepts has
 * bounded, NUL-terminated strings, a known state, numbers in range, and
 * encodes and parses back to the same record; nothing crashes or leaks.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cm_status.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    cm_status s, r;
    char err[256];
    if (cm_status_parse(data, size, &s, err, sizeof err) != 0) {
        if (!memchr(err, 0, sizeof err) || s.worker[0]) abort();
        return 0;
    }
    if (!memchr(s.worker, 0, sizeof s.worker) || !memchr(s.model, 0, sizeof s.model) ||
        !memchr(s.host, 0, sizeof s.host) || !memchr(s.state, 0, sizeof s.state) || !s.worker[0])
        abort();
    if (!(s.cache_share >= -1 && s.cache_share <= 1) || !(s.turns_per_s >= 0) || s.ts_ms < 0)
        abort();
    size_t len;
    char *txt = cm_status_encode(&s, &len);
    if (!txt) return 0;
    if (cm_status_parse(txt, len, &r, err, sizeof err) != 0 || strcmp(r.worker, s.worker) ||
        strcmp(r.model, s.model) || strcmp(r.state, s.state) || r.turns != s.turns)
        abort();
    free(txt);
    return 0;
}
