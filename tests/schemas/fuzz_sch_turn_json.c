/*
 * fuzz_sch_turn_json.c -- libFuzzer target for ChatTurns written as JSON
 * (schemas/sch_json.c): the byte pre-scan, jansson's parser, the JSON ->
 * msgpack conversion and the ChatTurn decoder behind it.
 *
 * Each input is decoded as a JSON turn under tight limits (fuzz_sch.h) and
 * under the defaults.  Checked properties (abort = a crash for libFuzzer):
 *   - an accepted turn re-encodes to msgpack, which decodes again;
 *   - any JSON the converter accepts comes back out of sch_msgpack_to_json
 *     (JSON input has no bin, NaN or invalid UTF-8), and converting that
 *     text again gives the same msgpack bytes (the two directions agree).
 * Limits for the second conversion are loose: the writer's floats may be
 * longer than the input's ("1e2" -> "100.0").
 */
#include "fuzz_sch.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static sch_limits tight, loose;
    static int ready;
    sch_turn x, y;
    sch_buf a, j, b;
    char err[256];
    if (!ready) {
        fuzz_sch_limits(&tight, &loose);
        loose.max_total_bytes *= 8;
        ready = 1;
    }
    if (sch_turn_decode_json(data, size, &tight, &x, err, sizeof err) == 0) sch_turn_free(&x);
    sch_buf_init(&a);
    sch_buf_init(&j);
    sch_buf_init(&b);
    if (sch_json_to_msgpack(data, size, NULL, &a, err, sizeof err) == 0) {
        if (sch_msgpack_to_json(a.data, a.len, &j, err, sizeof err)) abort();
        if (sch_json_to_msgpack(j.data, j.len, &loose, &b, err, sizeof err)) abort();
        if (a.len != b.len || memcmp(a.data, b.data, a.len)) abort();
    }
    if (sch_turn_decode_json(data, size, NULL, &x, err, sizeof err) == 0) {
        if (sch_turn_encode(&x, &a, err, sizeof err)) abort();
        if (sch_turn_decode(a.data, a.len, &loose, &y, err, sizeof err)) abort();
        sch_turn_free(&y);
        sch_turn_free(&x);
    }
    sch_buf_free(&a);
    sch_buf_free(&j);
    sch_buf_free(&b);
    return 0;
}
