/*
 * cl_load.c -- `parley load`: a load generator and exactly-once checker.
 *
 * C conversations x T turns are sent to the turns topic with Poisson
 * arrivals at a target rate: arrivals are drawn from an exponential
 * inter-arrival clock and each one sends the next turn of a conversation
 * that is ready, so turn N+1 of a conversation leaves only after turn N's
 * TurnResult arrived and its reply was appended to the history (a
 * conversation's turns are never in flight together; when no conversation
 * is ready the arrival waits for one).  User messages are random words
 * from a built-in list (--user MIN:MAX words) and params.max_tokens is
 * drawn from --max-tokens MIN:MAX.
 *
 * Results are read read_committed; every (conversation, turn) is counted:
 * a turn without a result at the end is lost, a second result for a turn
 * is a duplicate (after the last turn the reader keeps listening for
 * --grace-ms to catch late duplicates).  With --stream the turns ask for
 * TokenChunks and TTFT is measured at the first chunk of the turn (client
 * clock).  The report gives throughput, TTFT and total latency
 * percentiles, the cache share (sum cached_tokens / sum prompt_tokens),
 * and ends with one machine-readable line:
 *
 *   load: turns=N done=N lost=0 duplicated=0 errors=0 ... timeout=0
 *
 * Exit status: 0 when lost = 0, duplicated = 0 and everything finished
 * within --timeout-s; 1 otherwise (or Kafka failure); 2 usage error.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cm_startup.h"
#include "pl_err.h"
#include "cl_client.h"
#include "pl_time.h"

/* Vocabulary of the generated user messages. */
static const char *const load_words[] = {
    "the",     "cache",    "model",    "token",   "reply",   "kafka",   "stream",  "worker",
    "quick",   "brown",    "fox",      "jumps",   "over",    "lazy",    "dog",     "please",
    "explain", "why",      "how",      "what",    "when",    "where",   "river",   "mountain",
    "coffee",  "morning",  "evening",  "train",   "station", "music",   "garden",  "window",
    "summer",  "winter",   "number",   "letter",  "story",   "history", "science", "simple",
    "answer",  "question", "friendly", "careful", "bright",  "silent",  "ocean",   "forest",
    "city",    "market",   "bridge",   "light",   "shadow",  "paper",   "pencil",  "engine",
    "planet",  "orbit",    "signal",   "memory",  "battery", "journey", "harbor",  "island",
};
#define LOAD_N_WORDS (sizeof load_words / sizeof load_words[0])

/* Command-line options. */
typedef struct load_opts {
    cm_kafka_cli kafka; /* --brokers, --config, --kafka.*: the Kafka layer */
    cm_topics topics;   /* topic names */
    const char *ns;     /* KV-cache namespace or NULL */
    const char *model;  /* model name or NULL */
    uint64_t convs;     /* conversations */
    uint64_t turns;     /* turns per conversation */
    double rate;        /* target arrivals, turns/s */
    uint64_t user_min;  /* words per user message, min */
    uint64_t user_max;  /* ... max */
    uint64_t tok_min;   /* params.max_tokens, min */
    uint64_t tok_max;   /* ... max */
    double temperature; /* params.temperature */
    uint64_t timeout_s; /* whole run */
    uint64_t startup_s; /* bound on the start-up waits (metadata, end offsets) */
    uint64_t grace_ms;  /* listening for duplicates after the end */
    uint64_t seed;      /* random seed */
    int stream;         /* ask for TokenChunks, measure TTFT */
} load_opts;

/* One conversation of the run. */
typedef struct load_conv {
    char id[96];     /* conversation id (record key) */
    cl_history h;    /* messages so far */
    uint64_t sent;   /* turns sent */
    int in_flight;   /* turn sent-1 awaits its result */
    double sent_ms;  /* monotonic ms the in-flight turn left */
    double first_ms; /* monotonic ms of its first chunk; 0 none */
} load_conv;

/* Run-wide state and tallies. */
typedef struct load_run {
    const load_opts *o;                      /* options */
    char prefix[48];                         /* conversation id prefix of this run */
    load_conv *convs;                        /* o->convs conversations */
    uint8_t *count;                          /* results seen per turn (convs x turns, saturating) */
    size_t *ready;                           /* ring of conversations ready to send */
    size_t r_head, r_len;                    /* ring start and length */
    double *ttft, *total;                    /* client latencies of finished turns, ms */
    size_t n_ttft, n_total;                  /* entries in ttft / total */
    double *w_queue, *w_ttft, *w_total;      /* result timing per turn, ms (n_total) */
    uint64_t rng;                            /* xorshift64* state */
    uint64_t done, dups, errors, unexpected; /* tallies */
    uint64_t prompt, cached, completion;     /* usage sums */
    double last_ms;                          /* monotonic ms of the last first result */
} load_run;

static uint64_t load_rand(load_run *r) {
    r->rng ^= r->rng >> 12;
    r->rng ^= r->rng << 25;
    r->rng ^= r->rng >> 27;
    return r->rng * 2685821657736338717ull;
}

/* Uniform in [lo, hi]. */
static uint64_t load_uniform(load_run *r, uint64_t lo, uint64_t hi) {
    return lo + load_rand(r) % (hi - lo + 1);
}

/* Exponential inter-arrival time for rate per second, in ms. */
static double load_exp_ms(load_run *r) {
    double u = (double)(load_rand(r) >> 11) / 9007199254740992.0; /* [0, 1) */
    return -log(1.0 - u) / r->o->rate * 1000.0;
}

/* Send the next turn of conversation c.  Returns 0 or -1 (printed). */
static int load_send(load_run *r, rd_kafka_t *prod, size_t c) {
    const load_opts *o = r->o;
    load_conv *cv = &r->convs[c];
    char text[4096], turn_id[128], err[PL_ERR_LEN * 2]; /* err: topic names run to 255 bytes */
    size_t len = 0;
    uint64_t words = load_uniform(r, o->user_min, o->user_max);
    for (uint64_t i = 0; i < words && len + 16 < sizeof text; i++)
        len += (size_t)snprintf(text + len, sizeof text - len, "%s%s", i ? " " : "",
                                load_words[load_rand(r) % LOAD_N_WORDS]);
    if (cl_history_push(&cv->h, SCH_ROLE_USER, text, len) != 0) {
        fprintf(stderr, "load: out of memory\n");
        return -1;
    }
    snprintf(turn_id, sizeof turn_id, "%s-t%llu", cv->id, (unsigned long long)cv->sent);
    sch_turn t;
    sch_turn_init(&t);
    t.conversation_id = sch_str_c(cv->id);
    t.turn_id = sch_str_c(turn_id);
    t.messages = cv->h.msgs;
    t.n_messages = cv->h.n;
    t.params.max_tokens = (uint32_t)load_uniform(r, o->tok_min, o->tok_max);
    t.params.temperature = o->temperature;
    t.stream = o->stream != 0;
    if (o->ns) t.ns = sch_str_c(o->ns);
    if (o->model) t.model = sch_str_c(o->model);
    t.created_ms = pl_unix_ms();
    if (cm_turn_send(prod, o->topics.turns, &t, err, sizeof err) != 0) {
        fprintf(stderr, "load: %s\n", err);
        return -1;
    }
    cv->sent++;
    cv->in_flight = 1;
    cv->sent_ms = pl_mono_msf();
    cv->first_ms = 0;
    return 0;
}

/* Map a conversation id and turn id of this run to (c, t); -1 when the
 * record is not ours. */
static int load_locate(const load_run *r, const sch_str *conv, const sch_str *turn, size_t *c,
                       uint64_t *t) {
    size_t pl = strlen(r->prefix);
    if (conv->len <= pl || memcmp(conv->ptr, r->prefix, pl) != 0) return -1;
    uint64_t ci;
    if (cl_parse_u64(conv->ptr + pl, 0, r->o->convs - 1, &ci) != 0) return -1;
    if (turn->len < conv->len + 3 || memcmp(turn->ptr, conv->ptr, conv->len) != 0 ||
        memcmp(turn->ptr + conv->len, "-t", 2) != 0)
        return -1;
    if (cl_parse_u64(turn->ptr + conv->len + 2, 0, r->o->turns - 1, t) != 0) return -1;
    *c = (size_t)ci;
    return 0;
}

static void load_on_chunk(load_run *r, const rd_kafka_message_t *m) {
    sch_chunk ch;
    char err[PL_ERR_LEN];
    size_t c;
    uint64_t t;
    if (sch_chunk_decode(m->payload, m->len, NULL, &ch, err, sizeof err) != 0) return;
    if (load_locate(r, &ch.conversation_id, &ch.turn_id, &c, &t) == 0) {
        load_conv *cv = &r->convs[c];
        if (cv->in_flight && t + 1 == cv->sent && cv->first_ms == 0) cv->first_ms = pl_mono_msf();
    }
    sch_chunk_free(&ch);
}

/* Count a result; finish the in-flight turn it answers.  -1 out of memory. */
static int load_on_result(load_run *r, const rd_kafka_message_t *m) {
    sch_result res;
    char err[PL_ERR_LEN];
    size_t c;
    uint64_t t;
    int rc = 0;
    if (sch_result_decode(m->payload, m->len, NULL, &res, err, sizeof err) != 0) return 0;
    if (load_locate(r, &res.conversation_id, &res.turn_id, &c, &t) != 0) goto out;
    uint8_t *n = &r->count[c * r->o->turns + t];
    if (*n < 255) (*n)++;
    if (*n > 1) {
        r->dups++;
        goto out;
    }
    load_conv *cv = &r->convs[c];
    if (!cv->in_flight || t + 1 != cv->sent) {
        r->unexpected++;
        goto out;
    }
    double now = pl_mono_msf();
    cv->in_flight = 0;
    r->done++;
    r->last_ms = now;
    r->w_queue[r->n_total] = (double)res.queue_ms;
    r->w_ttft[r->n_total] = (double)res.ttft_ms;
    r->w_total[r->n_total] = (double)res.total_ms;
    r->total[r->n_total++] = now - cv->sent_ms;
    /* a result committed before any of its chunks was read (the chunk
     * producer lingers, commits do not) brought the reply first: its time
     * is the turn's first token, else the ttft figures would leave out
     * exactly the fastest turns */
    if (r->o->stream) r->ttft[r->n_ttft++] = (cv->first_ms > 0 ? cv->first_ms : now) - cv->sent_ms;
    r->prompt += res.prompt_tokens;
    r->cached += res.cached_tokens;
    r->completion += res.completion_tokens;
    if (res.finish_reason == SCH_FINISH_ERROR) {
        r->errors++;
        cv->h.n--; /* the failed user message leaves the history */
        free((char *)cv->h.msgs[cv->h.n].content.ptr);
    } else if (cl_history_push(&cv->h, SCH_ROLE_ASSISTANT, res.text.ptr, res.text.len) != 0) {
        rc = -1;
        goto out;
    }
    if (cv->sent < r->o->turns) {
        r->ready[(r->r_head + r->r_len) % r->o->convs] = c;
        r->r_len++;
    }
out:
    sch_result_free(&res);
    return rc;
}

static int load_cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Nearest-rank percentile of sorted v[n] (n > 0). */
static double load_pct(const double *v, size_t n, double p) {
    size_t k = (size_t)ceil(p * (double)n);
    return v[k ? k - 1 : 0];
}

/* --user / --max-tokens MIN:MAX (or N for N:N). */
static int load_range_opt(void *ctx, const cli_opt *opt, const char *v, char *err, size_t errlen) {
    load_opts *o = ctx;
    if (!strcmp(opt->name, "--user")) return cl_parse_range(v, 1, 500, &o->user_min, &o->user_max);
    return cl_parse_range(v, 1, 32768, &o->tok_min, &o->tok_max);
}

/* --kafka.X VALUE (cli_unknown_fn). */
static int load_kafka_key(void *ctx, const char *arg, const char *val, char *err, size_t errlen) {
    return cm_kafka_cli_key(&((load_opts *)ctx)->kafka, arg, val, err, errlen);
}

/* Parse argv; 0 ok, 1 --help, 2 usage error (printed). */
static int load_parse(int argc, char **argv, load_opts *o) {
    char err[PL_ERR_LEN];
    memset(o, 0, sizeof *o);
    o->convs = 10;
    o->turns = 3;
    o->rate = 5.0;
    o->user_min = 5;
    o->user_max = 30;
    o->tok_min = 8;
    o->tok_max = 32;
    o->temperature = 0.7;
    o->timeout_s = 120;
    o->startup_s = 30;
    o->grace_ms = 1000;
    o->seed = pl_unix_ms();
    cm_topics_prefix(&o->topics, "parley", err, sizeof err);
    const cli_opt opts[] = {
        CM_KAFKA_OPTS(&o->kafka),
        {"--conversations", NULL, CLI_U64, &o->convs, 1, 1000000, "C", "conversations (default 10)",
         NULL},
        {"--turns", NULL, CLI_U64, &o->turns, 1, 4096, "T", "turns per conversation (default 3)",
         NULL},
        {"--rate", NULL, CLI_F64, &o->rate, 1e-3, 1e6, "R", "turns per second, Poisson (default 5)",
         NULL},
        {"--user", NULL, CLI_FN, NULL, 0, 0, "MIN:MAX", "words per user message (default 5:30)",
         load_range_opt},
        {"--max-tokens", NULL, CLI_FN, NULL, 0, 0, "MIN:MAX", "params.max_tokens (default 8:32)",
         load_range_opt},
        {"--timeout-s", NULL, CLI_U64, &o->timeout_s, 1, 86400, "N",
         "whole-run deadline (default 120)", NULL},
        {"--startup-timeout-s", NULL, CLI_U64, &o->startup_s, 1, 3600, "N",
         "give up (exit 1) when start-up waits for Kafka longer (default 30)", NULL},
        {"--stream", NULL, CLI_FLAG, &o->stream, 0, 0, NULL, "ask for TokenChunks and measure TTFT",
         NULL},
        {"--grace-ms", NULL, CLI_U64, &o->grace_ms, 0, 600000, "N",
         "wait for duplicates after the last result (default 1000)", NULL},
        {"--temperature", NULL, CLI_F64, &o->temperature, 0, 100, "T",
         "params.temperature (default 0.7)", NULL},
        {"--seed", NULL, CLI_U64, &o->seed, 0, 0, "N", "random seed (default: the time)", NULL},
        {"--namespace", NULL, CLI_STR, &o->ns, 0, 0, "NS", "cache namespace of the turns", NULL},
        {"--model", NULL, CLI_STR, &o->model, 0, 0, "M", "model the turns name", NULL},
        CM_TOPIC_OPTS(&o->topics),
    };
    const cli_cmd cmd = {
        .name = "load",
        .synopsis = "load --brokers HOST:PORT --conversations C --turns T --rate R\n"
                    "         [--config FILE] [--kafka.X VALUE]...\n"
                    "         [--user MIN:MAX] [--max-tokens MIN:MAX] [--timeout-s N] [--stream]\n"
                    "         [--startup-timeout-s N]\n"
                    "         [--grace-ms N] [--temperature T] [--seed N] [--namespace NS]\n"
                    "         [--model M] [--topic-prefix P | --turns-topic T --tokens-topic T\n"
                    "         --responses-topic T]",
        .about = "\nSend C conversations x T turns with Poisson arrivals at R turns/s (a\n"
                 "conversation's next turn only after its previous result), read results\n"
                 "read_committed, print throughput, TTFT (--stream) and latency percentiles,\n"
                 "cache share, and check every turn got exactly one result.  The last line\n"
                 "is machine-readable (load: turns=... lost=... duplicated=...).\n"
                 "Exit status: 0 no loss, no duplicate, in time; 1 otherwise; 2 usage.\n\n",
        .opts = opts,
        .n_opts = CLI_NOPTS(opts),
        .unknown = load_kafka_key,
    };
    o->kafka.cmd = "load";
    o->kafka.roles = CM_KAFKA_PRODUCER | CM_KAFKA_READER;
    int pr = cm_kafka_cli_parse(&cmd, &o->kafka, argc, argv, o);
    if (pr != CLI_OK) return pr;
    if (o->convs * o->turns > 100000000ull) {
        fprintf(stderr, "load: conversations x turns is too large\n");
        return 2;
    }
    return 0;
}

/* Drain the readers once, waiting up to wait_ms for a result.  Returns 0
 * or -1 out of memory. */
static int load_poll(load_run *r, rd_kafka_t *tok, rd_kafka_t *res, int wait_ms) {
    rd_kafka_message_t *m;
    for (int i = 0; tok && i < 10000 && (m = rd_kafka_consumer_poll(tok, 0)); i++) {
        if (!m->err) load_on_chunk(r, m);
        rd_kafka_message_destroy(m);
    }
    for (int i = 0; i < 10000 && (m = rd_kafka_consumer_poll(res, i ? 0 : wait_ms)); i++) {
        int rc = m->err ? 0 : load_on_result(r, m);
        rd_kafka_message_destroy(m);
        if (rc) return -1;
    }
    return 0;
}

/* Print the report; returns the exit status. */
static int load_report(load_run *r, double elapsed_ms, int timed_out) {
    const load_opts *o = r->o;
    uint64_t total = o->convs * o->turns, lost = 0;
    for (uint64_t i = 0; i < total; i++) lost += r->count[i] == 0;
    double secs = elapsed_ms / 1000.0;
    double tps = secs > 0 ? (double)r->done / secs : 0.0;
    double kps = secs > 0 ? (double)r->completion / secs : 0.0;
    double share = r->prompt ? (double)r->cached / (double)r->prompt : 0.0;
    qsort(r->total, r->n_total, sizeof *r->total, load_cmp);
    qsort(r->ttft, r->n_ttft, sizeof *r->ttft, load_cmp);
    double t50 = 0, t90 = 0, t99 = 0, f50 = 0, f90 = 0, f99 = 0;
    if (r->n_total) {
        t50 = load_pct(r->total, r->n_total, 0.50);
        t90 = load_pct(r->total, r->n_total, 0.90);
        t99 = load_pct(r->total, r->n_total, 0.99);
    }
    if (r->n_ttft) {
        f50 = load_pct(r->ttft, r->n_ttft, 0.50);
        f90 = load_pct(r->ttft, r->n_ttft, 0.90);
        f99 = load_pct(r->ttft, r->n_ttft, 0.99);
    }
    printf("conversations %llu x turns %llu at %.2f turns/s target (Poisson), stream=%s\n",
           (unsigned long long)o->convs, (unsigned long long)o->turns, o->rate,
           o->stream ? "yes" : "no");
    printf("done %llu/%llu in %.2f s: %.2f turns/s, %.1f completion tokens/s\n",
           (unsigned long long)r->done, (unsigned long long)total, secs, tps, kps);
    if (r->n_ttft)
        printf("ttft ms (client):  p50 %.1f  p90 %.1f  p99 %.1f  (%zu turns)\n", f50, f90, f99,
               r->n_ttft);
    else printf("ttft ms (client):  n/a%s\n", o->stream ? " (no chunks seen)" : " (use --stream)");
    printf("total ms (client): p50 %.1f  p90 %.1f  p99 %.1f\n", t50, t90, t99);
    double wq[3] = {0}, wf[3] = {0}, wt[3] = {0};
    const double ps[3] = {0.50, 0.90, 0.99};
    qsort(r->w_queue, r->n_total, sizeof *r->w_queue, load_cmp);
    qsort(r->w_ttft, r->n_total, sizeof *r->w_ttft, load_cmp);
    qsort(r->w_total, r->n_total, sizeof *r->w_total, load_cmp);
    for (int i = 0; i < 3 && r->n_total; i++) {
        wq[i] = load_pct(r->w_queue, r->n_total, ps[i]);
        wf[i] = load_pct(r->w_ttft, r->n_total, ps[i]);
        wt[i] = load_pct(r->w_total, r->n_total, ps[i]);
    }
    printf("worker ms (result timing, p50/p90/p99): queue %.0f/%.0f/%.0f  ttft %.0f/%.0f/%.0f  "
           "total %.0f/%.0f/%.0f\n",
           wq[0], wq[1], wq[2], wf[0], wf[1], wf[2], wt[0], wt[1], wt[2]);
    printf("cache share: %llu cached / %llu prompt tokens = %.3f\n", (unsigned long long)r->cached,
           (unsigned long long)r->prompt, share);
    printf("exactly-once: lost %llu, duplicated %llu, error results %llu, unexpected %llu%s\n",
           (unsigned long long)lost, (unsigned long long)r->dups, (unsigned long long)r->errors,
           (unsigned long long)r->unexpected, timed_out ? ", TIMED OUT" : "");
    char ttft[96];
    if (r->n_ttft)
        snprintf(ttft, sizeof ttft, "ttft_p50_ms=%.1f ttft_p90_ms=%.1f ttft_p99_ms=%.1f", f50, f90,
                 f99);
    else snprintf(ttft, sizeof ttft, "ttft_p50_ms=n/a ttft_p90_ms=n/a ttft_p99_ms=n/a");
    printf("load: turns=%llu done=%llu lost=%llu duplicated=%llu errors=%llu "
           "turns_per_s=%.2f tokens_per_s=%.1f %s total_p50_ms=%.1f total_p90_ms=%.1f "
           "total_p99_ms=%.1f worker_queue_p50_ms=%.0f worker_ttft_p50_ms=%.0f "
           "worker_total_p50_ms=%.0f prompt_tokens=%llu cached_tokens=%llu cache_share=%.3f "
           "elapsed_s=%.2f timeout=%d\n",
           (unsigned long long)total, (unsigned long long)r->done, (unsigned long long)lost,
           (unsigned long long)r->dups, (unsigned long long)r->errors, tps, kps, ttft, t50, t90,
           t99, wq[0], wf[0], wt[0], (unsigned long long)r->prompt, (unsigned long long)r->cached,
           share, secs, timed_out);
    fflush(stdout);
    return lost == 0 && r->dups == 0 && !timed_out ? 0 : 1;
}

int cl_cmd_load(int argc, char **argv) {
    load_opts o;
    int prc = load_parse(argc, argv, &o);
    if (prc) {
        cm_kafka_cli_free(&o.kafka);
        return prc == 1 ? 0 : 2;
    }
    char err[PL_ERR_LEN * 2]; /* topic names run to 255 bytes */
    int rc = 1;
    load_run r;
    memset(&r, 0, sizeof r);
    r.o = &o;
    r.rng = o.seed * 0x9e3779b97f4a7c15ull + 1;
    rd_kafka_t *prod = NULL, *tok = NULL, *res = NULL;
    uint64_t total = o.convs * o.turns;
    r.convs = calloc(o.convs, sizeof *r.convs);
    r.count = calloc(total, 1);
    r.ready = calloc(o.convs, sizeof *r.ready);
    r.ttft = calloc(total, sizeof *r.ttft);
    r.total = calloc(total, sizeof *r.total);
    r.w_queue = calloc(total, sizeof *r.w_queue);
    r.w_ttft = calloc(total, sizeof *r.w_ttft);
    r.w_total = calloc(total, sizeof *r.w_total);
    if (!r.convs || !r.count || !r.ready || !r.ttft || !r.total || !r.w_queue || !r.w_ttft ||
        !r.w_total) {
        fprintf(stderr, "load: out of memory\n");
        goto err;
    }
    snprintf(r.prefix, sizeof r.prefix, "load-%llx-%04llx-c", (unsigned long long)pl_unix_ms(),
             (unsigned long long)(load_rand(&r) & 0xffff));
    for (size_t c = 0; c < o.convs; c++) {
        snprintf(r.convs[c].id, sizeof r.convs[c].id, "%s%zu", r.prefix, c);
        const char *sys = "You are a helpful assistant. Answer briefly.";
        if (cl_history_push(&r.convs[c].h, SCH_ROLE_SYSTEM, sys, strlen(sys)) != 0) {
            fprintf(stderr, "load: out of memory\n");
            goto err;
        }
        r.ready[c] = c;
    }
    r.r_len = o.convs;
    cm_startup_begin("load", "--startup-timeout-s", (int64_t)o.startup_s * 1000);
    cm_kafka *k = o.kafka.k;
    if (!(prod = cm_producer_new(k, o.topics.turns, cm_startup_left_ms(), err, sizeof err)) ||
        (o.stream &&
         !(tok = cm_reader_new(k, o.topics.tokens, 0, cm_startup_left_ms(), err, sizeof err))) ||
        !(res = cm_reader_new(k, o.topics.responses, 1, cm_startup_left_ms(), err, sizeof err))) {
        fprintf(stderr, "load: %s\n", err);
        goto err;
    }
    cm_startup_end();
    double t0 = pl_mono_msf(), deadline = t0 + (double)o.timeout_s * 1000.0;
    double next_arrival = t0 + load_exp_ms(&r);
    uint64_t arrivals = 0, pending = 0;
    int timed_out = 0;
    while (r.done < total) {
        double now = pl_mono_msf();
        if (now >= deadline) {
            timed_out = 1;
            break;
        }
        while (arrivals < total && next_arrival <= now) {
            arrivals++;
            pending++;
            next_arrival += load_exp_ms(&r);
        }
        while (pending > 0 && r.r_len > 0) {
            size_t c = r.ready[r.r_head];
            r.r_head = (r.r_head + 1) % o.convs;
            r.r_len--;
            if (load_send(&r, prod, c) != 0) goto err;
            pending--;
        }
        rd_kafka_poll(prod, 0);
        int wait = 5;
        if (arrivals < total && next_arrival - now < wait)
            wait = next_arrival > now ? (int)(next_arrival - now) : 0;
        if (load_poll(&r, tok, res, wait) != 0) {
            fprintf(stderr, "load: out of memory\n");
            goto err;
        }
    }
    double elapsed = (r.done ? r.last_ms : pl_mono_msf()) - t0;
    /* keep listening for late duplicates */
    double grace_end = pl_mono_msf() + (double)o.grace_ms;
    while (pl_mono_msf() < grace_end)
        if (load_poll(&r, NULL, res, 20) != 0) goto err;
    rc = load_report(&r, elapsed, timed_out);
err:
    cm_reader_free(tok);
    cm_reader_free(res);
    if (prod) {
        rd_kafka_flush(prod, 2000);
        rd_kafka_destroy(prod);
    }
    if (r.convs)
        for (size_t c = 0; c < o.convs; c++) cl_history_free(&r.convs[c].h);
    free(r.convs);
    free(r.count);
    free(r.ready);
    free(r.ttft);
    free(r.total);
    free(r.w_queue);
    free(r.w_ttft);
    free(r.w_total);
    cm_kafka_cli_free(&o.kafka);
    return rc;
}
