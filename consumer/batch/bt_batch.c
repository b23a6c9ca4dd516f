/*
 * bt_batch.c -- `parley batch --input requests.jsonl --output results.jsonl`:
 * OpenAI Batch JSONL through the fleet, resumable, one output line per
 * request.
 *
 * Input lines: {"custom_id": "...", "method": "POST", "url":
 * "/v1/chat/completions" or "/v1/completions", "body": {the request, with
 * the gateway's rules: oa_openai.h}} (blank lines are skipped).  Output lines, as OpenAI's batch output:
 *   {"id": "batch_req_<turn id>", "custom_id": "...",
 *    "response": {"status_code": 200, "request_id": "<turn id>",
 *                 "body": {chat.completion}}, "error": null}
 * A request the fleet refused, and a body the gateway would refuse (a
 * field parley does not honour, a value out of range: oa_openai.h), gets
 * its HTTP status and an OpenAI error body in `response` (request_id null
 * when nothing was sent); a line that cannot be parsed, names another method
 * or url, repeats a custom_id or gets no reply in --timeout-s gets
 * `"response": null, "error": {"code", "message"}` (a line without a
 * usable custom_id is reported with "custom_id": null and its "line"
 * number).  Every failure also goes to the error file (--errors, default
 * OUTPUT.errors.jsonl).
 *
 * Exactly once: see bt_io.h (done ids read back from the output, turn ids
 * derived from the batch id and the custom_id, results read from the
 * offsets saved before the first turn was produced).  A rerun first reads
 * the replies that landed while it was not running, then sends only what
 * is still missing.  A turn sent twice (the first run died after
 * producing it, before its reply) is answered twice by the workers; the
 * second reply is ignored.
 *
 * Progress: on a terminal a redrawn line (done/total, failed, tokens/s,
 * ETA), otherwise a plain line every --progress-s seconds, on stderr.
 * Exit status: 0 every request has its line and this run wrote no error
 * line, 3 all lines written but this run wrote error lines (a rerun does
 * not count the errors an earlier run wrote: the error file has them),
 * 1 runtime failure, 2 usage.  A duplicate custom_id is reported to the
 * error file by the first run only.
 *
 * Cancelling (--cancel; bt_io.h's state): the batch stops.  The state is
 * marked cancelling first (so a later run, with --cancel or not, sends no
 * turn again), then every request without an output line that may have
 * been sent (its hash <= the state's sent_max) gets a CancelTurn (spec
 * 1.4, keyed by its conversation: after its turn on the partition) and
 * waits for its one TurnResult: `cancelled` with what was generated, or
 * the real result of a turn that finished first; a request never sent
 * gets a `cancelled` line at once, and one whose result does not come in
 * --timeout-s (it was recorded as sent but the run died before producing
 * it) gets one then.  Killed midway, the same command resumes.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bt_io.h"
#include "pl_hash.h"
#include "cm_startup.h"
#include "oa_openai.h"
#include "pl_err.h"
#include "cm_client.h"
#include "pl_time.h"

/* One request of the input. */
typedef struct bt_item {
    uint64_t h;       /* bt_id_hash(custom_id) */
    char *custom_id;  /* malloc'd */
    oa_chat chat;     /* parsed body (turn inside) */
    char turn_id[64]; /* b-<batch>-<hash> */
    int state;        /* 0 to send, 1 in flight, 2 written */
    double sent_ms;   /* monotonic time it was produced */
} bt_item;

/* Command-line options and run state. */
typedef struct bt_run {
    const char *input, *output, *ns, *dlq; /* options */
    cm_kafka_cli kafka;                    /* --brokers, --config, --kafka.*: the Kafka layer */
    char errors[4096];                     /* error file path */
    char state_path[4096];                 /* OUTPUT.state */
    cm_topics topics;                      /* turns / responses */
    uint64_t window;                       /* turns in flight at most */
    uint64_t timeout_s;                    /* per request */
    uint64_t startup_s;                    /* bound on the start-up waits */
    uint64_t progress_s;                   /* plain progress interval */
    uint64_t max_tokens;                   /* cap of max_tokens */
    sch_class tier;                        /* --service-tier: class of lines naming none */
    bt_item *items;                        /* requests to answer */
    size_t n, cap;                         /* items used / allocated */
    size_t total, done, failed, inflight;  /* counters */
    uint64_t tokens;                       /* completion tokens received */
    bt_out out;                            /* output file */
    bt_out seen;                           /* custom_ids of the input read so far (set only) */
    FILE *err_f;                           /* error file */
    bt_state st;                           /* resume state */
    double t0;                             /* start, monotonic ms */
    double last_sweep;                     /* last timeout sweep, monotonic ms */
    int resumed;                           /* a saved state was found (a rerun) */
    int cancel;                            /* --cancel: cancel what is outstanding */
    size_t cancels;                        /* CancelTurns this run produced */
} bt_run;

static int bt_write(bt_run *r, uint64_t h, json_t *line, int failed) {
    char err[PL_ERR_LEN];
    char *txt = line ? json_dumps(line, JSON_COMPACT) : NULL;
    json_decref(line);
    if (!txt || bt_out_write(&r->out, h, txt, err, sizeof err) != 0) {
        fprintf(stderr, "batch: %s\n", txt ? err : "out of memory");
        free(txt);
        return -1;
    }
    if (failed) {
        r->failed++;
        if (r->err_f) {
            fprintf(r->err_f, "%s\n", txt);
            fflush(r->err_f);
        }
    }
    r->done++;
    free(txt);
    return 0;
}

/* An error line: response null, error {code, message}. */
static int bt_fail(bt_run *r, uint64_t h, const char *custom_id, long line_no, const char *code,
                   const char *msg) {
    json_t *j = json_pack("{ss so so s{ss ss}}", "id", "batch_req_error", "custom_id",
                          custom_id ? json_string(custom_id) : json_null(), "response", json_null(),
                          "error", "code", code, "message", msg);
    if (j && !custom_id) json_object_set_new(j, "line", json_integer(line_no));
    return bt_write(r, h, j, 1);
}

/* A body the gateway would refuse: the line carries the same HTTP status
 * and OpenAI error object a gateway client gets (nothing was sent). */
static int bt_refuse(bt_run *r, uint64_t h, const char *custom_id, const oa_fault *f) {
    char rid[96];
    snprintf(rid, sizeof rid, "batch_req_refused_%016llx", (unsigned long long)h);
    json_t *body =
        oa_error_json(f->message, "invalid_request_error", f->param[0] ? f->param : NULL, f->code);
    return bt_write(r, h,
                    json_pack("{ss ss s{sI sn so} sn}", "id", rid, "custom_id", custom_id,
                              "response", "status_code", (json_int_t)f->status, "request_id",
                              "body", body, "error"),
                    1);
}

/* Parse one input line into an item, or write its error line. */
static int bt_take_line(bt_run *r, char *line, size_t len, long line_no) {
    char err[PL_ERR_LEN];
    json_error_t je;
    while (len && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = 0;
    if (strspn(line, " \t") == len) return 0;
    r->total++;
    json_t *j = json_loadb(line, len, JSON_REJECT_DUPLICATES, &je);
    json_t *cid = json_object_get(j, "custom_id");
    if (!json_is_string(cid) || json_string_length(cid) == 0 || json_string_length(cid) > 512) {
        uint64_t h = bt_line_hash(line_no);
        int rc = 0;
        if (!bt_out_has(&r->out, h)) {
            pl_errf(err, sizeof err, BT_EINVAL,
                    j ? "line %ld: custom_id must be a string of 1..512 bytes"
                      : "line %ld is not JSON",
                    line_no);
            rc = bt_fail(r, h, NULL, line_no, "invalid_request", err);
        } else {
            r->done++;
        }
        json_decref(j);
        return rc;
    }
    const char *id = json_string_value(cid);
    uint64_t h = bt_id_hash(id, json_string_length(cid));
    if (bt_out_has(&r->seen, h)) { /* the first line with this custom_id counts */
        r->total--;
        if (r->err_f && !r->resumed) { /* a rerun: the first run reported it */
            json_t *e = json_pack("{ss si s{ss ss}}", "custom_id", id, "line", (int)line_no,
                                  "error", "code", "duplicate_custom_id", "message",
                                  "this line repeats an earlier custom_id; skipped");
            char *t = e ? json_dumps(e, JSON_COMPACT) : NULL;
            if (t) fprintf(r->err_f, "%s\n", t);
            free(t);
            json_decref(e);
        }
        json_decref(j);
        return 0;
    }
    if (bt_out_mark(&r->seen, h) != 0) {
        json_decref(j);
        return -1;
    }
    if (bt_out_has(&r->out, h)) {
        r->done++;
        json_decref(j);
        return 0;
    }
    const char *method = json_string_value(json_object_get(j, "method"));
    const char *url = json_string_value(json_object_get(j, "url"));
    int rc;
    int legacy = url && !strcmp(url, "/v1/completions");
    if (!method || strcmp(method, "POST") || !url ||
        (strcmp(url, "/v1/chat/completions") && !legacy)) {
        rc = bt_fail(r, h, id, line_no, "invalid_request",
                     "method must be POST and url /v1/chat/completions or /v1/completions");
        json_decref(j);
        return rc;
    }
    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 256;
        bt_item *t = realloc(r->items, cap * sizeof *t);
        if (!t) {
            json_decref(j);
            return -1;
        }
        r->items = t;
        r->cap = cap;
    }
    bt_item *it = &r->items[r->n];
    memset(it, 0, sizeof *it);
    oa_fault f;
    if ((legacy ? oa_cmpl_from_json : oa_chat_from_json)(
            json_object_get(j, "body"), (uint32_t)r->max_tokens, &it->chat, &f) != 0) {
        /* as the gateway answers the same body: its status and error object */
        rc = bt_refuse(r, h, id, &f);
        json_decref(j);
        return rc;
    }
    it->h = h;
    it->custom_id = strdup(id);
    snprintf(it->turn_id, sizeof it->turn_id, "b-%s-%016llx", r->st.batch_id,
             (unsigned long long)h);
    it->chat.turn.conversation_id = sch_str_c(it->turn_id);
    it->chat.turn.turn_id = sch_str_c(it->turn_id);
    it->chat.turn.stream = false;
    if (r->ns) it->chat.turn.ns = sch_str_c(r->ns);
    /* a line's own body.service_tier wins over --service-tier */
    if (!it->chat.tier_set) it->chat.turn.service_class = r->tier;
    r->n++;
    json_decref(j);
    return it->custom_id ? 0 : -1;
}

static int bt_cmp_h(const void *a, const void *b) {
    uint64_t x = ((const bt_item *)a)->h, y = ((const bt_item *)b)->h;
    return x < y ? -1 : x > y;
}

/* The unanswered item of turn id `b-<batch>-<hash hex>`, or NULL (items
 * are sorted by hash once the input is read). */
static bt_item *bt_find(bt_run *r, const char *turn_id, size_t len) {
    char want[64];
    int pl = snprintf(want, sizeof want, "b-%s-", r->st.batch_id);
    if (len != (size_t)pl + 16 || memcmp(turn_id, want, (size_t)pl) != 0) return NULL;
    char hex[17];
    memcpy(hex, turn_id + pl, 16);
    hex[16] = 0;
    bt_item key;
    key.h = strtoull(hex, NULL, 16);
    bt_item *it = bsearch(&key, r->items, r->n, sizeof *it, bt_cmp_h);
    return it && it->state != 2 && !strncmp(it->turn_id, turn_id, len) ? it : NULL;
}

/* Point the item's turn at its own arrays (the items were sorted: moved). */
static void bt_item_fix(bt_item *it) {
    it->chat.turn.conversation_id = sch_str_c(it->turn_id);
    it->chat.turn.turn_id = sch_str_c(it->turn_id);
    it->chat.turn.model = sch_str_c(it->chat.model);
    it->chat.turn.params.stop = it->chat.stop;
}

/* A result (or a DeadLetter made into one) for item it. */
static int bt_answer(bt_run *r, bt_item *it, const sch_result *res) {
    json_t *resp;
    int failed = 0;
    if (res->finish_reason == SCH_FINISH_ERROR || res->finish_reason == SCH_FINISH_EXPIRED) {
        const char *type, *code;
        char pbuf[32];
        int st = oa_result_status(res, &type, &code);
        resp = json_pack(
            "{sI ss so}", "status_code", (json_int_t)st, "request_id", it->turn_id, "body",
            oa_error_json(res->error_message.ptr ? res->error_message.ptr : "the turn failed", type,
                          oa_result_param(res, pbuf, sizeof pbuf), code));
        failed = 1;
    } else {
        char id[96];
        snprintf(id, sizeof id, "%s-%s", it->chat.legacy ? "cmpl" : "chatcmpl", it->turn_id);
        resp = json_pack("{sI ss so}", "status_code", (json_int_t)200, "request_id", it->turn_id,
                         "body", oa_completion_json(res, &it->chat, id, pl_unix_ms() / 1000));
        r->tokens += res->completion_tokens;
    }
    char rid[96];
    snprintf(rid, sizeof rid, "batch_req_%s", it->turn_id);
    if (it->state == 1) r->inflight--;
    it->state = 2;
    int rc = bt_write(r, it->h,
                      json_pack("{ss ss so sn}", "id", rid, "custom_id", it->custom_id, "response",
                                resp, "error"),
                      failed);
    oa_chat_free(&it->chat);
    return rc;
}

/* A `cancelled` line made here for item it: nothing of it ran (never sent,
 * or no answer to its cancel within --timeout-s). */
static int bt_answer_cancelled(bt_run *r, bt_item *it) {
    sch_result res;
    sch_result_init(&res);
    bt_item_fix(it);
    res.conversation_id = sch_str_c(it->turn_id);
    res.turn_id = sch_str_c(it->turn_id);
    res.finish_reason = SCH_FINISH_CANCELLED;
    return bt_answer(r, it, &res);
}

/* --cancel (or a rerun of a batch that began cancelling): mark the state,
 * then cancel what may have been sent and answer the rest at once. */
static int bt_cancel_start(bt_run *r, rd_kafka_t *prod) {
    char err[PL_ERR_LEN * 2];
    if (!r->st.cancel) {
        r->st.cancel = 1;
        if (bt_state_save(r->state_path, &r->st, err, sizeof err) != 0) goto fail;
    }
    double now = pl_mono_msf();
    for (size_t i = 0; i < r->n; i++) {
        bt_item *it = &r->items[i];
        if (it->state != 0) continue;
        if (it->h > r->st.sent_max) {
            if (bt_answer_cancelled(r, it) != 0) return -1;
            continue;
        }
        if (cm_cancel_send(prod, r->topics.turns, it->turn_id, it->turn_id, "parley batch --cancel",
                           err, sizeof err) != 0)
            goto fail;
        it->state = 1;
        it->sent_ms = now;
        r->inflight++;
        r->cancels++;
    }
    fprintf(stderr, "batch: cancelling: %zu CancelTurns sent, waiting for their results\n",
            r->cancels);
    return 0;
fail:
    fprintf(stderr, "batch: %s\n", err);
    return -1;
}

/* Handle one record of the reader. */
static int bt_on_record(bt_run *r, const rd_kafka_message_t *m) {
    char err[PL_ERR_LEN];
    const char *topic = rd_kafka_topic_name(m->rkt);
    int rc = 0;
    if (r->dlq && !strcmp(topic, r->dlq)) {
        sch_dead d;
        if (sch_dead_decode(m->payload, m->len, NULL, &d, err, sizeof err) != 0) return 0;
        bt_item *it = d.turn_id.ptr ? bt_find(r, d.turn_id.ptr, d.turn_id.len) : NULL;
        if (it) {
            sch_result res;
            sch_result_init(&res);
            res.finish_reason = SCH_FINISH_ERROR;
            res.has_error = true;
            res.error_name = d.error_name;
            res.error_message = d.reason;
            rc = bt_answer(r, it, &res);
        }
        sch_dead_free(&d);
        return rc;
    }
    sch_result res;
    if (sch_result_decode(m->payload, m->len, NULL, &res, err, sizeof err) != 0) return 0;
    bt_item *it = bt_find(r, res.turn_id.ptr, res.turn_id.len);
    if (it) rc = bt_answer(r, it, &res);
    sch_result_free(&res);
    return rc;
}

static void bt_progress(bt_run *r, int final) {
    double s = (pl_mono_msf() - r->t0) / 1000.0;
    double rate = s > 0 ? (double)r->tokens / s : 0;
    size_t left = r->total > r->done ? r->total - r->done : 0;
    double reqs = s > 0 ? (double)r->done / s : 0;
    char eta[32] = "?";
    if (reqs > 0) snprintf(eta, sizeof eta, "%.0fs", (double)left / reqs);
    if (isatty(STDERR_FILENO)) {
        int w = 30, fill = r->total ? (int)(w * r->done / r->total) : w;
        fprintf(stderr, "\r[%.*s%*s] %zu/%zu failed=%zu %.1f tok/s eta %s ", fill,
                "##############################", w - fill, "", r->done, r->total, r->failed, rate,
                eta);
        if (final) fputc('\n', stderr);
    } else {
        fprintf(stderr,
                "batch: done=%zu total=%zu failed=%zu inflight=%zu tokens_per_s=%.1f "
                "eta=%s\n",
                r->done, r->total, r->failed, r->inflight, rate, eta);
    }
}

/* The reader: responses (+ DLQ), read_committed, from the saved offsets;
 * on a fresh batch the offsets are the topics' ends now, saved first. */
static rd_kafka_t *bt_reader(bt_run *r, int fresh, char *err, size_t errlen) {
    const char *topics[2] = {r->topics.responses, r->dlq};
    rd_kafka_t *rk = cm_reader_new_topics(r->kafka.k, topics, r->dlq ? 2 : 1, 1,
                                          cm_startup_left_ms(), err, errlen);
    rd_kafka_topic_partition_list_t *a = NULL;
    if (!rk) return NULL;
    if (fresh) {
        rd_kafka_topic_partition_list_t *cur = NULL;
        if (rd_kafka_assignment(rk, &cur) != RD_KAFKA_RESP_ERR_NO_ERROR) goto err;
        /* a plain copy: the assignment's entries hold partition references
         * that would keep the handle from being destroyed */
        a = rd_kafka_topic_partition_list_new(cur->cnt);
        for (int i = 0; i < cur->cnt; i++)
            rd_kafka_topic_partition_list_add(a, cur->elems[i].topic, cur->elems[i].partition);
        rd_kafka_topic_partition_list_destroy(cur);
        for (int i = 0; i < a->cnt; i++) {
            int64_t lo, hi;
            if (rd_kafka_query_watermark_offsets(rk, a->elems[i].topic, a->elems[i].partition, &lo,
                                                 &hi, cm_startup_left_ms()) !=
                RD_KAFKA_RESP_ERR_NO_ERROR) {
                if (!cm_startup_expired()) goto err;
                cm_startup_errf(err, errlen, BT_ETIMEDOUT);
                goto err_quiet;
            }
            a->elems[i].offset = hi;
        }
        r->st.from = a;
        if (bt_state_save(r->state_path, &r->st, err, errlen) != 0) goto err_quiet;
    }
    if (rd_kafka_assign(rk, r->st.from) != RD_KAFKA_RESP_ERR_NO_ERROR) goto err;
    return rk;
err:
    pl_errf(err, errlen, BT_EKAFKA, "cannot read the end offsets / assign the reader");
err_quiet:
    if (a && a != r->st.from) rd_kafka_topic_partition_list_destroy(a);
    cm_reader_free(rk);
    return NULL;
}

/* Catch up: read until every partition reaches the end it had at start
 * (replies committed while no batch process ran), at most 15 s. */
static int bt_catch_up(bt_run *r, rd_kafka_t *rk) {
    rd_kafka_topic_partition_list_t *end = rd_kafka_topic_partition_list_copy(r->st.from);
    for (int i = 0; i < end->cnt; i++) {
        int64_t lo, hi;
        if (rd_kafka_query_watermark_offsets(rk, end->elems[i].topic, end->elems[i].partition, &lo,
                                             &hi, 10000) == RD_KAFKA_RESP_ERR_NO_ERROR)
            end->elems[i].offset = hi;
    }
    double give_up = pl_mono_msf() + 15000;
    int rc = 0;
    while (rc == 0 && pl_mono_msf() < give_up) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 100);
        if (m) {
            if (!m->err && m->rkt) rc = bt_on_record(r, m);
            rd_kafka_message_destroy(m);
            continue;
        }
        rd_kafka_topic_partition_list_t *pos = rd_kafka_topic_partition_list_copy(end);
        rd_kafka_position(rk, pos);
        int behind = 0;
        for (int i = 0; i < pos->cnt; i++)
            behind |= end->elems[i].offset > 0 && pos->elems[i].offset < end->elems[i].offset;
        rd_kafka_topic_partition_list_destroy(pos);
        if (!behind) break;
    }
    rd_kafka_topic_partition_list_destroy(end);
    return rc;
}

static int bt_errors_opt(void *ctx, const cli_opt *opt, const char *v, char *err, size_t errlen) {
    bt_run *r = ctx;
    return snprintf(r->errors, sizeof r->errors, "%s", v) >= (int)sizeof r->errors ? -1 : 0;
}

/* --service-tier flex|auto|default: the class of the lines whose body names
 * no service_tier (flex = bulk, the default; auto / default = interactive). */
static int bt_tier_opt(void *ctx, const cli_opt *opt, const char *v, char *err, size_t errlen) {
    (void)opt;
    if (!strcmp(v, "flex")) ((bt_run *)ctx)->tier = SCH_CLASS_BULK;
    else if (!strcmp(v, "auto") || !strcmp(v, "default"))
        ((bt_run *)ctx)->tier = SCH_CLASS_INTERACTIVE;
    else
        return pl_errf(err, errlen, BT_EINVAL, "--service-tier: %s is not flex, auto or default",
                       v);
    return 0;
}

static int bt_dlq_opt(void *ctx, const cli_opt *opt, const char *v, char *err, size_t errlen) {
    ((bt_run *)ctx)->dlq = *v ? v : NULL;
    return 0;
}

/* --kafka.X VALUE (cli_unknown_fn). */
static int bt_kafka_key(void *ctx, const char *arg, const char *val, char *err, size_t errlen) {
    return cm_kafka_cli_key(&((bt_run *)ctx)->kafka, arg, val, err, errlen);
}

/* Parse argv into r; 0 to run, 1 after --help, 2 usage error (printed). */
static int bt_parse(int argc, char **argv, bt_run *r) {
    char err[PL_ERR_LEN];
    memset(r, 0, sizeof *r);
    r->out.fd = -1;
    r->seen.fd = -1;
    r->window = 64;
    r->timeout_s = 600;
    r->startup_s = 30;
    r->progress_s = 10;
    r->max_tokens = 4096;
    r->tier = SCH_CLASS_BULK; /* nobody waits on a batch: throughput only */
    r->dlq = "parley.dlq";
    cm_topics_prefix(&r->topics, "parley", err, sizeof err);
    const cli_opt opts[] = {
        {"--input", NULL, CLI_STR, &r->input, 0, 0, "FILE",
         "OpenAI Batch requests, JSONL (required)", NULL},
        {"--output", NULL, CLI_STR, &r->output, 0, 0, "FILE", "batch output, JSONL (required)",
         NULL},
        CM_KAFKA_OPTS(&r->kafka),
        {"--errors", NULL, CLI_FN, NULL, 0, 0, "FILE",
         "failed requests (default OUTPUT.errors.jsonl)", bt_errors_opt},
        {"--namespace", NULL, CLI_STR, &r->ns, 0, 0, "NS", "cache namespace of the turns", NULL},
        {"--service-tier", NULL, CLI_FN, NULL, 0, 0, "TIER",
         "flex (bulk, default) or auto / default (interactive):\n"
         "the class of requests whose body names no service_tier",
         bt_tier_opt},
        {"--dlq-topic", NULL, CLI_FN, NULL, 0, 0, "T",
         "DLQ topic read for rejected turns (default parley.dlq;\n"
         "empty: none)",
         bt_dlq_opt},
        CM_TOPIC_OPTS(&r->topics),
        {"--window", NULL, CLI_U64, &r->window, 1, 100000, "N",
         "turns in flight at most (default 64)", NULL},
        {"--timeout-s", NULL, CLI_U64, &r->timeout_s, 1, 86400 * 7, "N",
         "per request (default 600)", NULL},
        {"--startup-timeout-s", NULL, CLI_U64, &r->startup_s, 1, 3600, "N",
         "give up (exit 1) when start-up waits for Kafka longer (default 30)", NULL},
        {"--progress-s", NULL, CLI_U64, &r->progress_s, 1, 86400, "N",
         "progress line interval (default 10)", NULL},
        {"--max-tokens-cap", NULL, CLI_U64, &r->max_tokens, 1, 32768, "N",
         "cap of max_tokens (default 4096)", NULL},
        {"--cancel", NULL, CLI_FLAG, &r->cancel, 0, 0, NULL,
         "cancel every outstanding request of this batch (resumable;\n"
         "each gets its line, finish_reason cancelled)",
         NULL},
    };
    const cli_cmd cmd = {
        .name = "batch",
        .synopsis =
            "batch --input REQUESTS.jsonl --output RESULTS.jsonl --brokers H:P\n"
            "         [--config FILE] [--kafka.X VALUE]...\n"
            "         [--errors FILE] [--topic-prefix P | --turns-topic T --responses-topic T]\n"
            "         [--dlq-topic T] [--namespace NS] [--service-tier TIER]\n"
            "         [--window N] [--timeout-s N]\n"
            "         [--max-tokens-cap N] [--progress-s N] [--startup-timeout-s N]\n"
            "         [--cancel]",
        .about =
            "\nOpenAI Batch JSONL in, batch output JSONL out, through the workers.  Rerun the\n"
            "same command after a crash: it resumes, and the output ends with exactly one\n"
            "line per request.  Exit: 0 all ok, 3 done but this run wrote failed\n"
            "requests, 1 error, 2 usage.\n\n",
        .opts = opts,
        .n_opts = CLI_NOPTS(opts),
        .unknown = bt_kafka_key,
    };
    r->kafka.cmd = "batch";
    r->kafka.roles = CM_KAFKA_PRODUCER | CM_KAFKA_READER;
    int pr = cm_kafka_cli_parse(&cmd, &r->kafka, argc, argv, r);
    if (pr != CLI_OK) return pr;
    if (!r->input || !r->output) {
        fprintf(stderr, "batch: --input, --output and --brokers are required\n");
        cli_usage(&cmd, stderr);
        return 2;
    }
    if (!r->errors[0]) snprintf(r->errors, sizeof r->errors, "%s.errors.jsonl", r->output);
    snprintf(r->state_path, sizeof r->state_path, "%s.state", r->output);
    return 0;
}

/* Produce what the window allows; time out old turns. */
static int bt_pump(bt_run *r, rd_kafka_t *prod, size_t *next) {
    char err[PL_ERR_LEN * 2]; /* topic names run to 255 bytes */
    double now = pl_mono_msf();
    for (size_t i = 0; now - r->last_sweep >= 1000.0 && i < r->n; i++) {
        bt_item *it = &r->items[i];
        if (it->state == 1 && now - it->sent_ms > (double)r->timeout_s * 1000.0) {
            if (r->st.cancel) { /* no answer to its cancel: nothing of it runs */
                if (bt_answer_cancelled(r, it) != 0) return -1;
                continue;
            }
            r->inflight--;
            it->state = 2;
            oa_chat_free(&it->chat);
            if (bt_fail(r, it->h, it->custom_id, 0, "timeout",
                        "no reply from the fleet within --timeout-s") != 0)
                return -1;
        }
    }
    if (now - r->last_sweep >= 1000.0) r->last_sweep = now;
    if (r->st.cancel) return 0; /* cancelling: nothing is sent */
    /* the hash of the last item this call sends is saved before any is
     * produced: what was sent stays within sent_max whatever dies when */
    uint64_t last = 0;
    size_t room = r->inflight < r->window ? (size_t)(r->window - r->inflight) : 0;
    for (size_t i = *next; i < r->n && room; i++)
        if (r->items[i].state == 0) {
            last = r->items[i].h;
            room--;
        }
    if (last > r->st.sent_max) {
        r->st.sent_max = last;
        if (bt_state_save(r->state_path, &r->st, err, sizeof err) != 0) {
            fprintf(stderr, "batch: %s\n", err);
            return -1;
        }
    }
    while (*next < r->n && r->inflight < r->window) {
        bt_item *it = &r->items[(*next)++];
        if (it->state != 0) continue;
        uint64_t ms = pl_unix_ms();
        bt_item_fix(it); /* the items were sorted (moved) */
        it->chat.turn.created_ms = ms;
        it->chat.turn.deadline_ms = ms + r->timeout_s * 1000;
        if (cm_turn_send(prod, r->topics.turns, &it->chat.turn, err, sizeof err) != 0) {
            fprintf(stderr, "batch: %s\n", err);
            return -1;
        }
        it->state = 1;
        it->sent_ms = now;
        r->inflight++;
    }
    return 0;
}

int bt_cmd_batch(int argc, char **argv) {
    bt_run r;
    int prc = bt_parse(argc, argv, &r);
    if (prc) {
        cm_kafka_cli_free(&r.kafka);
        return prc == 1 ? 0 : 2;
    }
    char err[PL_ERR_LEN * 4]; /* a path of up to 900 bytes and its cause */
    int rc = 1;
    FILE *in = NULL;
    char *line = NULL;
    size_t cap = 0, next = 0;
    rd_kafka_t *prod = NULL, *rk = NULL;
    r.t0 = pl_mono_msf();
    int have = bt_state_load(r.state_path, &r.st, err, sizeof err);
    if (have < 0) goto fail;
    r.resumed = have;
    if (!have)
        snprintf(r.st.batch_id, sizeof r.st.batch_id, "%016llx",
                 (unsigned long long)(pl_fnv1a64(PL_FNV64_SEED, r.output, strlen(r.output)) ^
                                      (pl_unix_ms() * 0x9e3779b97f4a7c15ull) ^ (uint64_t)getpid()));
    if (bt_out_open(&r.out, r.output, err, sizeof err) != 0) goto fail;
    if (!(r.err_f = fopen(r.errors, "a"))) {
        pl_errf(err, sizeof err, BT_EIO, "%.900s: %s", r.errors, strerror(errno));
        goto fail;
    }
    if (!(in = fopen(r.input, "r"))) {
        pl_errf(err, sizeof err, BT_EIO, "%.900s: %s", r.input, strerror(errno));
        goto fail;
    }
    ssize_t n;
    long line_no = 0;
    while ((n = getline(&line, &cap, in)) >= 0)
        if (bt_take_line(&r, line, (size_t)n, ++line_no) != 0) goto out;
    qsort(r.items, r.n, sizeof *r.items, bt_cmp_h); /* input order is not kept */
    fprintf(stderr,
            "batch: %s: %zu requests, %zu answered or refused already, %zu to send "
            "(batch %s%s)\n",
            r.input, r.total, r.done, r.n, r.st.batch_id, have ? ", resumed" : "");
    if (r.n > 0) {
        cm_startup_begin("batch", "--startup-timeout-s", (int64_t)r.startup_s * 1000);
        if (!(prod = cm_producer_new(r.kafka.k, r.topics.turns, cm_startup_left_ms(), err,
                                     sizeof err)) ||
            !(rk = bt_reader(&r, !have, err, sizeof err)))
            goto fail;
        cm_startup_end();
        if (have && bt_catch_up(&r, rk) != 0) goto out;
        if ((r.cancel || r.st.cancel) && bt_cancel_start(&r, prod) != 0) goto out;
    }
    double last = pl_mono_msf();
    while (r.done < r.total) {
        if (bt_pump(&r, prod, &next) != 0) goto out;
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 100);
        if (m) {
            int e = !m->err && m->rkt ? bt_on_record(&r, m) : 0;
            rd_kafka_message_destroy(m);
            if (e) goto out;
        }
        rd_kafka_poll(prod, 0);
        double now = pl_mono_msf();
        if (now - last >= (isatty(STDERR_FILENO) ? 250.0 : (double)r.progress_s * 1000.0)) {
            bt_progress(&r, 0);
            last = now;
        }
    }
    bt_progress(&r, 1);
    rc = r.failed ? 3 : 0;
    goto out;
fail:
    fprintf(stderr, "batch: %s\n", err);
out:
    free(line);
    if (in) fclose(in);
    if (r.err_f) fclose(r.err_f);
    cm_reader_free(rk);
    if (prod) {
        rd_kafka_flush(prod, 5000);
        rd_kafka_destroy(prod);
    }
    for (size_t i = 0; i < r.n; i++) {
        oa_chat_free(&r.items[i].chat);
        free(r.items[i].custom_id);
    }
    free(r.items);
    bt_out_close(&r.out);
    bt_out_close(&r.seen);
    bt_state_free(&r.st);
    cm_kafka_cli_free(&r.kafka);
    return rc;
}
