/*
 * cl_chat.c -- `parley chat`: a terminal chat client over the wire topics.
 *
 * The client keeps the conversation (system prompt, user and assistant
 * messages) and sends the whole history as one ChatTurn per user line
 * (stream = true, key = conversation id).  It prints the reply as the
 * TokenChunks arrive (tokens topic, read_uncommitted): chunks are keyed by
 * (turn_id, attempt, seq), duplicates are dropped, and only the newest
 * attempt is shown -- when a worker redoes the turn the client says so and
 * restarts the reply.  The TurnResult (responses topic, read_committed) is
 * the authoritative reply: it is appended to the history, printed again if
 * it differs from what was streamed, and followed by one statistics line:
 *
 *   [turn N] finish=stop prompt=P cached=C completion=K client_ttft_ms=..
 *   client_total_ms=.. worker_queue_ms=.. worker_ttft_ms=.. worker_total_ms=..
 *
 * Input: interactive lines from a terminal, else one user message per line
 * of --file (or stdin).  Exit status: 0 every turn got a result, 1 a turn
 * timed out (--timeout-ms) or Kafka failed, 2 usage error.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cm_startup.h"
#include "pl_err.h"
#include "cl_client.h"
#include "pl_time.h"

#define CHAT_MAX_ATTEMPTS 64 /* attempts of one turn remembered */

/* Command-line options. */
typedef struct chat_opts {
    cm_kafka_cli kafka;  /* --brokers, --config, --kafka.*: the Kafka layer */
    char conv[128];      /* conversation id */
    const char *system;  /* system prompt or NULL */
    const char *file;    /* input file or NULL (stdin) */
    const char *ns;      /* KV-cache namespace or NULL (default) */
    const char *model;   /* model name or NULL (worker default) */
    cm_topics topics;    /* topic names */
    uint64_t max_tokens; /* params.max_tokens */
    double temperature;  /* params.temperature */
    uint64_t timeout_ms; /* per-turn wait for the result */
    uint64_t startup_s;  /* bound on the start-up waits (metadata, end offsets) */
} chat_opts;

/* Streaming state of the turn in flight. */
typedef struct chat_stream {
    uint64_t seen[CHAT_MAX_ATTEMPTS]; /* attempts met so far */
    size_t n_seen;                    /* entries in seen */
    int has_cur;                      /* an attempt is being shown */
    uint64_t cur;                     /* the attempt being shown */
    uint64_t next_seq;                /* next expected seq of cur */
    char *text;                       /* text shown for cur (malloc'd) */
    size_t len, cap;                  /* bytes in text / allocated */
    double first_ms;                  /* monotonic ms of the first chunk; 0 none */
} chat_stream;

/* Append bytes to the shown text; -1 out of memory. */
static int chat_stream_add(chat_stream *s, const char *p, size_t n) {
    if (s->len + n + 1 > s->cap) {
        size_t cap = (s->len + n + 1) * 2;
        char *t = realloc(s->text, cap);
        if (!t) return -1;
        s->text = t;
        s->cap = cap;
    }
    memcpy(s->text + s->len, p, n);
    s->len += n;
    s->text[s->len] = '\0';
    return 0;
}

/* Handle one tokens-topic record: print it when it belongs to the newest
 * attempt of the turn in flight. */
static void chat_on_chunk(const chat_opts *o, const char *turn_id, chat_stream *s,
                          const rd_kafka_message_t *m) {
    sch_chunk c;
    char err[PL_ERR_LEN];
    if (sch_chunk_decode(m->payload, m->len, NULL, &c, err, sizeof err) != 0)
        return; /* not ours to judge: a reader skips undecodable records */
    if (strcmp(c.conversation_id.ptr, o->conv) != 0 || strcmp(c.turn_id.ptr, turn_id) != 0)
        goto out;
    int known = 0;
    for (size_t i = 0; i < s->n_seen; i++) known |= s->seen[i] == c.attempt;
    if (!known) {
        if (s->n_seen < CHAT_MAX_ATTEMPTS) s->seen[s->n_seen++] = c.attempt;
        if (s->has_cur)
            printf("\n[new attempt: the turn is being redone, reply restarts]\nassistant> ");
        s->has_cur = 1;
        s->cur = c.attempt;
        s->next_seq = 0;
        s->len = 0;
    } else if (!s->has_cur || c.attempt != s->cur) {
        goto out; /* an older attempt */
    }
    if (c.seq < s->next_seq) goto out; /* duplicate */
    s->next_seq = c.seq + 1;
    if (s->first_ms == 0) s->first_ms = pl_mono_msf();
    if (chat_stream_add(s, c.text.ptr, c.text.len) == 0) {
        fwrite(c.text.ptr, 1, c.text.len, stdout);
        fflush(stdout);
    }
out:
    sch_chunk_free(&c);
}

/* Print the result of a turn and append the reply to the history.
 * Returns 0, or -1 out of memory. */
static int chat_on_result(int turn_no, const sch_result *r, const chat_stream *s, double sent_ms,
                          cl_history *h) {
    double now = pl_mono_msf();
    if (r->finish_reason == SCH_FINISH_ERROR) {
        printf("\n[turn %d] error %s: %s\n", turn_no, r->error_name.ptr ? r->error_name.ptr : "?",
               r->error_message.ptr ? r->error_message.ptr : "");
        /* the failed user message leaves the history */
        if (h->n) {
            free((char *)h->msgs[h->n - 1].content.ptr);
            h->n--;
        }
        return 0;
    }
    int same = s->has_cur && s->cur == r->attempt && s->len == r->text.len &&
               (s->len == 0 || memcmp(s->text, r->text.ptr, s->len) == 0);
    if (!same) {
        printf("\n[final reply]\nassistant> ");
        fwrite(r->text.ptr, 1, r->text.len, stdout);
    }
    printf("\n[turn %d] finish=%s prompt=%llu cached=%llu completion=%llu "
           "client_ttft_ms=%.1f client_total_ms=%.1f worker_queue_ms=%llu "
           "worker_ttft_ms=%llu worker_total_ms=%llu worker=%s\n",
           turn_no, sch_finish_name(r->finish_reason), (unsigned long long)r->prompt_tokens,
           (unsigned long long)r->cached_tokens, (unsigned long long)r->completion_tokens,
           s->first_ms > 0 ? s->first_ms - sent_ms : now - sent_ms, now - sent_ms,
           (unsigned long long)r->queue_ms, (unsigned long long)r->ttft_ms,
           (unsigned long long)r->total_ms, r->worker.ptr);
    fflush(stdout);
    return cl_history_push(h, SCH_ROLE_ASSISTANT, r->text.ptr, r->text.len);
}

/* One turn: send the history plus `line`, stream, wait for the result.
 * Returns 0 answered, 1 timeout, -1 failure (message printed). */
static int chat_turn(const chat_opts *o, rd_kafka_t *prod, rd_kafka_t *tok, rd_kafka_t *res,
                     cl_history *h, int turn_no, const char *line, size_t len) {
    char err[PL_ERR_LEN * 2], turn_id[192]; /* err: topic names run to 255 bytes */
    if (!sch_utf8_valid(line, len)) {
        fprintf(stderr, "chat: line %d is not valid UTF-8, skipped\n", turn_no);
        return 0;
    }
    if (cl_history_push(h, SCH_ROLE_USER, line, len) != 0) {
        fprintf(stderr, "chat: out of memory\n");
        return -1;
    }
    snprintf(turn_id, sizeof turn_id, "%s-t%d-%llx", o->conv, turn_no,
             (unsigned long long)pl_unix_ms());
    sch_turn t;
    sch_turn_init(&t);
    t.conversation_id = sch_str_c(o->conv);
    t.turn_id = sch_str_c(turn_id);
    t.messages = h->msgs;
    t.n_messages = h->n;
    t.params.max_tokens = (uint32_t)o->max_tokens;
    t.params.temperature = o->temperature;
    t.stream = true;
    if (o->ns) t.ns = sch_str_c(o->ns);
    if (o->model) t.model = sch_str_c(o->model);
    t.created_ms = pl_unix_ms();
    chat_stream s;
    memset(&s, 0, sizeof s);
    double sent = pl_mono_msf();
    if (cm_turn_send(prod, o->topics.turns, &t, err, sizeof err) != 0) {
        fprintf(stderr, "chat: %s\n", err);
        h->n--;
        free((char *)h->msgs[h->n].content.ptr);
        return -1;
    }
    rd_kafka_flush(prod, 100);
    printf("assistant> ");
    fflush(stdout);
    int rc = 1;
    while (pl_mono_msf() - sent < (double)o->timeout_ms) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(tok, 5);
        if (m) {
            if (!m->err) chat_on_chunk(o, turn_id, &s, m);
            rd_kafka_message_destroy(m);
        }
        m = rd_kafka_consumer_poll(res, 5);
        if (!m) continue;
        sch_result r;
        int got = 0;
        if (!m->err && sch_result_decode(m->payload, m->len, NULL, &r, err, sizeof err) == 0) {
            if (!strcmp(r.conversation_id.ptr, o->conv) && !strcmp(r.turn_id.ptr, turn_id)) {
                got = 1;
                rc = chat_on_result(turn_no, &r, &s, sent, h) == 0 ? 0 : -1;
            }
            sch_result_free(&r);
        }
        rd_kafka_message_destroy(m);
        if (got) break;
        rd_kafka_poll(prod, 0);
    }
    if (rc == 1) {
        printf("\n[turn %d] timeout: no result after %llu ms\n", turn_no,
               (unsigned long long)o->timeout_ms);
        /* the unanswered user message leaves the history */
        h->n--;
        free((char *)h->msgs[h->n].content.ptr);
    }
    fflush(stdout);
    free(s.text);
    return rc;
}

/* --conversation ID: 1 .. sizeof conv - 65 bytes. */
static int chat_conv_opt(void *ctx, const cli_opt *opt, const char *v, char *err, size_t errlen) {
    chat_opts *o = ctx;
    if (!*v || strlen(v) >= sizeof o->conv - 64) return -1;
    snprintf(o->conv, sizeof o->conv, "%s", v);
    return 0;
}

/* --kafka.X VALUE (cli_unknown_fn). */
static int chat_kafka_key(void *ctx, const char *arg, const char *val, char *err, size_t errlen) {
    return cm_kafka_cli_key(&((chat_opts *)ctx)->kafka, arg, val, err, errlen);
}

/* Parse argv into o; returns 0, or 2 after printing a usage message (1
 * for --help, which the caller turns into exit 0). */
static int chat_parse(int argc, char **argv, chat_opts *o) {
    char err[PL_ERR_LEN];
    memset(o, 0, sizeof *o);
    o->max_tokens = 128;
    o->temperature = 0.7;
    o->timeout_ms = 60000;
    o->startup_s = 30;
    cm_topics_prefix(&o->topics, "parley", err, sizeof err);
    snprintf(o->conv, sizeof o->conv, "chat-%llx-%x", (unsigned long long)pl_unix_ms(),
             (unsigned)getpid());
    const cli_opt opts[] = {
        CM_KAFKA_OPTS(&o->kafka),
        {"--conversation", NULL, CLI_FN, NULL, 0, 0, "ID",
         "conversation id (default chat-<time>-<pid>)", chat_conv_opt},
        {"--system", NULL, CLI_STR, &o->system, 0, 0, "TEXT", "system message", NULL},
        {"--file", NULL, CLI_STR, &o->file, 0, 0, "TURNS.txt", "one user message per line", NULL},
        {"--namespace", NULL, CLI_STR, &o->ns, 0, 0, "NS", "cache namespace of the turns", NULL},
        {"--model", NULL, CLI_STR, &o->model, 0, 0, "M", "model the turns name", NULL},
        CM_TOPIC_OPTS(&o->topics),
        {"--max-tokens", NULL, CLI_U64, &o->max_tokens, 1, 32768, "N",
         "params.max_tokens (default 128)", NULL},
        {"--temperature", NULL, CLI_F64, &o->temperature, 0, 100, "T",
         "params.temperature (default 0.7)", NULL},
        {"--timeout-ms", NULL, CLI_U64, &o->timeout_ms, 1, 86400000, "N",
         "per-turn wait for the result (default 60000)", NULL},
        {"--startup-timeout-s", NULL, CLI_U64, &o->startup_s, 1, 3600, "N",
         "give up (exit 1) when start-up waits for Kafka longer (default 30)", NULL},
    };
    const cli_cmd cmd = {
        .name = "chat",
        .synopsis = "chat --brokers HOST:PORT [--config FILE] [--kafka.X VALUE]...\n"
                    "         [--conversation ID] [--system TEXT]\n"
                    "         [--file TURNS.txt] [--topic-prefix P | --turns-topic T\n"
                    "         --tokens-topic T --responses-topic T] [--namespace NS] [--model M]\n"
                    "         [--max-tokens N] [--temperature T] [--timeout-ms N]\n"
                    "         [--startup-timeout-s N]",
        .about = "\nChat with parley workers over Kafka.  Sends the whole history every turn,\n"
                 "streams the reply from the tokens topic, takes the TurnResult from the\n"
                 "responses topic (read_committed) and prints cache and latency figures.\n"
                 "Reads a terminal interactively, else one user message per line of --file\n"
                 "or stdin.  Topics default to parley.turns/.tokens/.responses.\n"
                 "Exit status: 0 every turn answered, 1 timeout or Kafka failure, 2 usage.\n\n",
        .opts = opts,
        .n_opts = CLI_NOPTS(opts),
        .unknown = chat_kafka_key,
    };
    o->kafka.cmd = "chat";
    o->kafka.roles = CM_KAFKA_PRODUCER | CM_KAFKA_READER;
    return cm_kafka_cli_parse(&cmd, &o->kafka, argc, argv, o);
}

int cl_cmd_chat(int argc, char **argv) {
    chat_opts o;
    int prc = chat_parse(argc, argv, &o);
    if (prc) {
        cm_kafka_cli_free(&o.kafka);
        return prc == 1 ? 0 : 2;
    }
    char err[PL_ERR_LEN * 2]; /* topic names run to 255 bytes */
    int rc = 1, turn_no = 0;
    cl_history h = {0};
    rd_kafka_t *prod = NULL, *tok = NULL, *res = NULL;
    FILE *in = stdin;
    char *line = NULL;
    size_t cap = 0;
    if (o.file && !(in = fopen(o.file, "r"))) {
        fprintf(stderr, "chat: cannot open %s\n", o.file);
        cm_kafka_cli_free(&o.kafka);
        return 2;
    }
    int interactive = !o.file && isatty(STDIN_FILENO);
    if (o.system && cl_history_push(&h, SCH_ROLE_SYSTEM, o.system, strlen(o.system)) != 0) goto err;
    cm_startup_begin("chat", "--startup-timeout-s", (int64_t)o.startup_s * 1000);
    cm_kafka *k = o.kafka.k;
    if (!(prod = cm_producer_new(k, o.topics.turns, cm_startup_left_ms(), err, sizeof err)) ||
        !(tok = cm_reader_new(k, o.topics.tokens, 0, cm_startup_left_ms(), err, sizeof err)) ||
        !(res = cm_reader_new(k, o.topics.responses, 1, cm_startup_left_ms(), err, sizeof err))) {
        fprintf(stderr, "chat: %s\n", err);
        goto err;
    }
    cm_startup_end();
    if (interactive) printf("parley chat: conversation %s (end with Ctrl-D)\n", o.conv);
    for (;;) {
        if (interactive) {
            printf("you> ");
            fflush(stdout);
        }
        ssize_t n = getline(&line, &cap, in);
        if (n < 0) break;
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = '\0';
        if (n == 0) continue;
        int t = chat_turn(&o, prod, tok, res, &h, ++turn_no, line, (size_t)n);
        if (t != 0 && !interactive) goto err;
    }
    rc = 0;
err:
    free(line);
    if (in != stdin) fclose(in);
    cm_reader_free(tok);
    cm_reader_free(res);
    if (prod) {
        rd_kafka_flush(prod, 2000);
        rd_kafka_destroy(prod);
    }
    cl_history_free(&h);
    cm_kafka_cli_free(&o.kafka);
    return rc;
}
