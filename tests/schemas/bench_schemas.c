/*
 * bench_schemas.c -- throughput of the wire codec, to show it costs nothing
 * next to inference.
 *
 *   bench_schemas [seconds-per-case]      (default 0.5)
 *
 * Cases: a typical 20-message ChatTurn (system prompt plus alternating
 * user/assistant messages of 150-400 bytes, params with stop strings), a
 * one-token TokenChunk (what the worker emits per generated token) and a
 * 256-token TurnResult.  For each: encode and decode rate in records/s and
 * MB/s of encoded bytes.  Decode includes the pre-scan, msgpack-c's parse,
 * all validation and the copy into the record's own arena, and the free.
 * Rates are per CPU second of this thread (CLOCK_THREAD_CPUTIME_ID), so
 * they stay meaningful on a loaded shared machine; one thread, one core.
 */
#include "sch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef int (*bench_fn)(void *ctx);

/* Run fn repeatedly for about `secs` of CPU time; returns calls per CPU
 * second. */
static double bench(bench_fn fn, void *ctx, double secs) {
    long n = 0, batch = 16;
    double t0 = now(), t;
    do {
        for (long i = 0; i < batch; i++)
            if (fn(ctx)) {
                fputs("bench_schemas: codec call failed\n", stderr);
                exit(1);
            }
        n += batch;
        t = now() - t0;
        if (t < secs / 10) batch *= 2;
    } while (t < secs);
    return (double)n / t;
}

typedef struct bench_case {
    const char *name; /* printed label */
    int kind;         /* 0 turn, 1 chunk, 2 result */
    const void *rec;  /* record to encode */
    sch_buf buf;      /* encode output / decode input */
} bench_case;

static int do_encode(void *p) {
    bench_case *c = p;
    char err[128];
    switch (c->kind) {
    case 0: return sch_turn_encode(c->rec, &c->buf, err, sizeof err);
    case 1: return sch_chunk_encode(c->rec, &c->buf, err, sizeof err);
    default: return sch_result_encode(c->rec, &c->buf, err, sizeof err);
    }
}

static int do_decode(void *p) {
    bench_case *c = p;
    char err[128];
    int rc;
    switch (c->kind) {
    case 0: {
        sch_turn t;
        if (!(rc = sch_turn_decode(c->buf.data, c->buf.len, NULL, &t, err, sizeof err)))
            sch_turn_free(&t);
        return rc;
    }
    case 1: {
        sch_chunk k;
        if (!(rc = sch_chunk_decode(c->buf.data, c->buf.len, NULL, &k, err, sizeof err)))
            sch_chunk_free(&k);
        return rc;
    }
    default: {
        sch_result r;
        if (!(rc = sch_result_decode(c->buf.data, c->buf.len, NULL, &r, err, sizeof err)))
            sch_result_free(&r);
        return rc;
    }
    }
}

static void run_case(bench_case *c, double secs) {
    sch_buf_init(&c->buf);
    if (do_encode(c)) {
        fprintf(stderr, "bench_schemas: cannot encode %s\n", c->name);
        exit(1);
    }
    size_t bytes = c->buf.len;
    double enc = bench(do_encode, c, secs);
    double dec = bench(do_decode, c, secs);
    printf("%-24s %7zu B  encode %10.0f rec/s %8.1f MB/s   "
           "decode %10.0f rec/s %8.1f MB/s\n",
           c->name, bytes, enc, enc * (double)bytes / 1e6, dec, dec * (double)bytes / 1e6);
    sch_buf_free(&c->buf);
}

int main(int argc, char **argv) {
    double secs = argc > 1 ? atof(argv[1]) : 0.5;
    static char text[20][512];
    sch_message msgs[20];
    static const char *const words[] = {"the ",         "cache ",        "turn ",
                                        "worker ",      "token ",        "partition ",
                                        "caf\xc3\xa9 ", "\xe2\x80\x94 ", "reply. "};
    unsigned seed = 12345;
    if (secs <= 0) secs = 0.5;
    for (int i = 0; i < 20; i++) {
        size_t len = 150 + (size_t)(i * 37 % 250), o = 0;
        while (o < len) {
            seed = seed * 1103515245u + 12345u;
            const char *w = words[(seed >> 16) % 9];
            size_t l = strlen(w);
            if (o + l >= sizeof text[i]) break;
            memcpy(text[i] + o, w, l);
            o += l;
        }
        msgs[i].role = i == 0 ? SCH_ROLE_SYSTEM : (i % 2 ? SCH_ROLE_USER : SCH_ROLE_ASSISTANT);
        msgs[i].content = (sch_str){text[i], o};
    }
    sch_str stops[2] = {sch_str_c("\nUser:"), sch_str_c("</s>")};
    sch_turn turn;
    sch_turn_init(&turn);
    turn.conversation_id = sch_str_c("conv-5f1c2a9e-7d3b-4c1e-9a0f-1b2c3d4e5f60");
    turn.turn_id = sch_str_c("turn-000042");
    turn.messages = msgs;
    turn.n_messages = 20;
    turn.params.max_tokens = 512;
    turn.params.temperature = 0.8;
    turn.params.top_p = 0.95;
    turn.params.top_k = 40;
    turn.params.stop = stops;
    turn.params.n_stop = 2;
    turn.stream = true;
    turn.ns = sch_str_c("tenant-a");
    turn.created_ms = 1764700000000ull;
    turn.deadline_ms = 1764700030000ull;

    uint32_t tok = 31337, toks[256];
    sch_chunk chunk;
    sch_chunk_init(&chunk);
    chunk.conversation_id = turn.conversation_id;
    chunk.turn_id = turn.turn_id;
    chunk.attempt = 0x1234567890abcdefull;
    chunk.seq = 117;
    chunk.text = sch_str_c(" cache");
    chunk.tokens = &tok;
    chunk.n_tokens = 1;

    static char reply[1200];
    for (int i = 0; i < 256; i++) toks[i] = (uint32_t)(i * 7919 % 32000);
    memset(reply, 'w', sizeof reply);
    sch_result res;
    sch_result_init(&res);
    res.conversation_id = turn.conversation_id;
    res.turn_id = turn.turn_id;
    res.attempt = chunk.attempt;
    res.text = (sch_str){reply, sizeof reply};
    res.tokens = toks;
    res.n_tokens = 256;
    res.prompt_tokens = 1800;
    res.cached_tokens = 1700;
    res.completion_tokens = 256;
    res.worker = sch_str_c("worker-3");

    bench_case cases[] = {
        {"ChatTurn (20 messages)", 0, &turn, {0}},
        {"TokenChunk (1 token)", 1, &chunk, {0}},
        {"TurnResult (256 tokens)", 2, &res, {0}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(&cases[i], secs);
    return 0;
}
