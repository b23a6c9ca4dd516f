/*
 * sch_json.c -- writes decoded records as JSON (see sch_json.h).
 *
 * Numbers: integers print exactly; doubles print with 17 significant
 * digits, which round-trips every binary64 value, so the Python side can
 * compare floats for equality.
 */
#include "sch_json.h"

#include <inttypes.h>

void sch_json_str(FILE *f, const sch_str *s) {
    if (!s->ptr) {
        fputs("null", f);
        return;
    }
    fputc('"', f);
    for (size_t i = 0; i < s->len; i++) {
        unsigned char c = (unsigned char)s->ptr[i];
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20 || c == 0x7f) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

void sch_json_hex(FILE *f, const char *p, size_t n) {
    fputc('"', f);
    for (size_t i = 0; i < n; i++) fprintf(f, "%02x", (unsigned char)p[i]);
    fputc('"', f);
}

static void sch_json_bytes(FILE *f, const sch_str *s) {
    if (!s->ptr) fputs("null", f);
    else sch_json_hex(f, s->ptr, s->len);
}

static void sch_json_key_str(FILE *f, const char *key, const sch_str *s) {
    fprintf(f, "\"%s\":", key);
    sch_json_str(f, s);
    fputc(',', f);
}

static void sch_json_tokens(FILE *f, const char *key, const uint32_t *t, size_t n) {
    fprintf(f, "\"%s\":[", key);
    for (size_t i = 0; i < n; i++) fprintf(f, "%s%u", i ? "," : "", t[i]);
    fputc(']', f);
}

void sch_json_turn(FILE *f, const sch_turn *t) {
    const sch_params *p = &t->params;
    fprintf(f, "{\"v\":%u,", t->v);
    sch_json_key_str(f, "conversation_id", &t->conversation_id);
    sch_json_key_str(f, "turn_id", &t->turn_id);
    fputs("\"messages\":", f);
    if (!t->messages) {
        fputs("null", f);
    } else {
        fputc('[', f);
        for (size_t i = 0; i < t->n_messages; i++) {
            fprintf(f, "%s{\"role\":\"%s\",\"content\":", i ? "," : "",
                    sch_role_name(t->messages[i].role));
            sch_json_str(f, &t->messages[i].content);
            fputc('}', f);
        }
        fputc(']', f);
    }
    fputc(',', f);
    if (t->prompt_tokens) sch_json_tokens(f, "prompt_tokens", t->prompt_tokens, t->n_prompt_tokens);
    else fputs("\"prompt_tokens\":null", f);
    fprintf(f,
            ",\"params\":{\"max_tokens\":%u,\"temperature\":%.17g,"
            "\"top_p\":%.17g,\"top_k\":%u,\"seed\":",
            p->max_tokens, p->temperature, p->top_p, p->top_k);
    if (p->has_seed) fprintf(f, "%" PRIu64, p->seed);
    else fputs("null", f);
    fputs(",\"stop\":[", f);
    for (size_t i = 0; i < p->n_stop; i++) {
        if (i) fputc(',', f);
        sch_json_str(f, &p->stop[i]);
    }
    fprintf(f, "],\"repetition_penalty\":%.17g},\"stream\":%s,", p->repetition_penalty,
            t->stream ? "true" : "false");
    sch_json_key_str(f, "namespace", &t->ns);
    fprintf(f, "\"deadline_ms\":%" PRIu64 ",\"created_ms\":%" PRIu64 ",", t->deadline_ms,
            t->created_ms);
    fputs("\"model\":", f);
    sch_json_str(f, &t->model);
    fputc('}', f);
}

void sch_json_chunk(FILE *f, const sch_chunk *c) {
    fprintf(f, "{\"v\":%u,", c->v);
    sch_json_key_str(f, "conversation_id", &c->conversation_id);
    sch_json_key_str(f, "turn_id", &c->turn_id);
    fprintf(f, "\"attempt\":%" PRIu64 ",\"seq\":%" PRIu64 ",", c->attempt, c->seq);
    sch_json_key_str(f, "text", &c->text);
    sch_json_tokens(f, "tokens", c->tokens, c->n_tokens);
    fprintf(f, ",\"last\":%s}", c->last ? "true" : "false");
}

void sch_json_result(FILE *f, const sch_result *r) {
    fprintf(f, "{\"v\":%u,", r->v);
    sch_json_key_str(f, "conversation_id", &r->conversation_id);
    sch_json_key_str(f, "turn_id", &r->turn_id);
    fprintf(f, "\"attempt\":%" PRIu64 ",", r->attempt);
    sch_json_key_str(f, "text", &r->text);
    sch_json_tokens(f, "tokens", r->tokens, r->n_tokens);
    fprintf(f,
            ",\"finish_reason\":\"%s\",\"usage\":{\"prompt_tokens\":%" PRIu64
            ",\"cached_tokens\":%" PRIu64 ",\"completion_tokens\":%" PRIu64
            "},\"timing\":{\"queue_ms\":%" PRIu64 ",\"ttft_ms\":%" PRIu64 ",\"total_ms\":%" PRIu64
            "},",
            sch_finish_name(r->finish_reason), r->prompt_tokens, r->cached_tokens,
            r->completion_tokens, r->queue_ms, r->ttft_ms, r->total_ms);
    sch_json_key_str(f, "worker", &r->worker);
    sch_json_key_str(f, "model", &r->model);
    fputs("\"error\":", f);
    if (!r->has_error) {
        fputs("null}", f);
        return;
    }
    sch_str code = r->error_name.ptr ? r->error_name : sch_str_c(sch_err_name(r->error_code));
    fputs("{\"code\":", f);
    sch_json_str(f, &code);
    fputs(",\"message\":", f);
    sch_json_str(f, &r->error_message);
    fputs("}}", f);
}

void sch_json_dead(FILE *f, const sch_dead *d) {
    sch_str code = d->error_name.ptr ? d->error_name : sch_str_c(sch_err_name(d->error_code));
    fprintf(f, "{\"v\":%u,", d->v);
    sch_json_key_str(f, "reason", &d->reason);
    sch_json_key_str(f, "error_code", &code);
    sch_json_key_str(f, "topic", &d->topic);
    fprintf(
        f, "\"partition\":%" PRId32 ",\"offset\":%" PRId64 ",\"timestamp_ms\":%" PRId64 ",\"key\":",
        d->partition, d->offset, d->timestamp_ms);
    sch_json_bytes(f, &d->key);
    fputs(",\"value\":", f);
    sch_json_bytes(f, &d->value);
    fprintf(f, ",\"value_size\":%" PRIu64 ",\"headers\":[", d->value_size);
    for (size_t i = 0; i < d->n_headers; i++) {
        fputs(i ? ",[" : "[", f);
        sch_json_bytes(f, &d->headers[i].name);
        fputc(',', f);
        sch_json_bytes(f, &d->headers[i].value);
        fputc(']', f);
    }
    fputs("],", f);
    sch_json_key_str(f, "conversation_id", &d->conversation_id);
    sch_json_key_str(f, "turn_id", &d->turn_id);
    sch_json_key_str(f, "worker", &d->worker);
    fprintf(f, "\"dead_ms\":%" PRIu64 "}", d->dead_ms);
}
