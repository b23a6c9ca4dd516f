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

/* ,"key":"text" when s is present (1.2 fields are shown only when set). */
static void sch_json_opt_str(FILE *f, const char *key, const sch_str *s) {
    if (!s->ptr) return;
    fprintf(f, ",\"%s\":", key);
    sch_json_str(f, s);
}

static void sch_json_lp(FILE *f, const sch_logprob *e, int with_top) {
    fprintf(f, "{\"id\":%u,\"token\":", e->id);
    sch_json_str(f, &e->token);
    fprintf(f, ",\"logprob\":%.17g", e->logprob);
    if (e->bytes.ptr) {
        fputs(",\"bytes\":[", f);
        for (size_t i = 0; i < e->bytes.len; i++)
            fprintf(f, "%s%u", i ? "," : "", (unsigned char)e->bytes.ptr[i]);
        fputc(']', f);
    }
    if (with_top && e->n_top) {
        fputs(",\"top\":[", f);
        for (size_t i = 0; i < e->n_top; i++) {
            if (i) fputc(',', f);
            sch_json_lp(f, &e->top[i], 0);
        }
        fputc(']', f);
    }
    fputc('}', f);
}

/* ,"logprobs":[...] when there are any. */
static void sch_json_logprobs(FILE *f, const sch_logprob *lp, size_t n) {
    if (!n) return;
    fputs(",\"logprobs\":[", f);
    for (size_t i = 0; i < n; i++) {
        if (i) fputc(',', f);
        sch_json_lp(f, &lp[i], 1);
    }
    fputc(']', f);
}

/* ,"tool_calls":[...] when there are any. */
static void sch_json_tool_calls(FILE *f, const sch_tool_call *t, size_t n) {
    if (!n) return;
    fputs(",\"tool_calls\":[", f);
    for (size_t i = 0; i < n; i++) {
        fputs(i ? ",{\"id\":" : "{\"id\":", f);
        sch_json_str(f, &t[i].id);
        fputs(",\"name\":", f);
        sch_json_str(f, &t[i].name);
        fputs(",\"arguments\":", f);
        sch_json_str(f, &t[i].arguments);
        fputc('}', f);
    }
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
            sch_json_opt_str(f, "tool_calls", &t->messages[i].tool_calls);
            sch_json_opt_str(f, "tool_call_id", &t->messages[i].tool_call_id);
            fputc('}', f);
        }
        fputc(']', f);
    }
    fputc(',', f);
    if (t->prompt_tokens) sch_json_tokens(f, "prompt_tokens", t->prompt_tokens, t->n_prompt_tokens);
    else fputs("\"prompt_tokens\":null", f);
    sch_json_opt_str(f, "prompt", &t->prompt);
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
    fprintf(f, "],\"repetition_penalty\":%.17g", p->repetition_penalty);
    if (p->response_format.type != SCH_RF_TEXT) {
        fprintf(f, ",\"response_format\":{\"type\":\"%s\"", sch_rf_name(p->response_format.type));
        sch_json_opt_str(f, "spec", &p->response_format.spec);
        fputc('}', f);
    }
    if (p->has_logprobs) fprintf(f, ",\"logprobs\":%u", p->top_logprobs);
    if (p->n != 1) fprintf(f, ",\"n\":%u", p->n);
    sch_json_opt_str(f, "tools", &p->tools);
    sch_json_opt_str(f, "tool_choice", &p->tool_choice);
    if (!p->parallel_tool_calls) fputs(",\"parallel_tool_calls\":false", f);
    fprintf(f, "},\"stream\":%s,", t->stream ? "true" : "false");
    sch_json_key_str(f, "namespace", &t->ns);
    fprintf(f, "\"deadline_ms\":%" PRIu64 ",\"created_ms\":%" PRIu64 ",", t->deadline_ms,
            t->created_ms);
    fputs("\"model\":", f);
    sch_json_str(f, &t->model);
    if (t->service_class != SCH_CLASS_INTERACTIVE) /* 1.3, shown when not the default */
        fprintf(f, ",\"service_class\":\"%s\"", sch_class_name(t->service_class));
    fputc('}', f);
}

void sch_json_chunk(FILE *f, const sch_chunk *c) {
    fprintf(f, "{\"v\":%u,", c->v);
    sch_json_key_str(f, "conversation_id", &c->conversation_id);
    sch_json_key_str(f, "turn_id", &c->turn_id);
    fprintf(f, "\"attempt\":%" PRIu64 ",\"seq\":%" PRIu64 ",", c->attempt, c->seq);
    sch_json_key_str(f, "text", &c->text);
    sch_json_tokens(f, "tokens", c->tokens, c->n_tokens);
    fprintf(f, ",\"last\":%s", c->last ? "true" : "false");
    if (c->index) fprintf(f, ",\"index\":%u", c->index);
    sch_json_logprobs(f, c->logprobs, c->n_logprobs);
    fputc('}', f);
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
        fputs("null", f);
    } else {
        sch_str code = r->error_name.ptr ? r->error_name : sch_str_c(sch_err_name(r->error_code));
        fputs("{\"code\":", f);
        sch_json_str(f, &code);
        fputs(",\"message\":", f);
        sch_json_str(f, &r->error_message);
        fputs("}", f);
    }
    sch_json_logprobs(f, r->logprobs, r->n_logprobs);
    sch_json_tool_calls(f, r->tool_calls, r->n_tool_calls);
    if (r->n_choices) {
        fputs(",\"choices\":[", f);
        for (size_t i = 0; i < r->n_choices; i++) {
            const sch_choice *ch = &r->choices[i];
            fprintf(f, "%s{\"index\":%u,", i ? "," : "", ch->index);
            sch_json_key_str(f, "text", &ch->text);
            sch_json_tokens(f, "tokens", ch->tokens, ch->n_tokens);
            fprintf(f, ",\"finish_reason\":\"%s\"", sch_finish_name(ch->finish_reason));
            sch_json_logprobs(f, ch->logprobs, ch->n_logprobs);
            sch_json_tool_calls(f, ch->tool_calls, ch->n_tool_calls);
            fputc('}', f);
        }
        fputc(']', f);
    }
    fputc('}', f);
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

void sch_json_cancel(FILE *f, const sch_cancel *k) {
    fprintf(f, "{\"v\":%u,", k->v);
    sch_json_key_str(f, "conversation_id", &k->conversation_id);
    sch_json_key_str(f, "turn_id", &k->turn_id);
    fprintf(f, "\"cancelled_ms\":%" PRIu64 ",\"reason\":", k->cancelled_ms);
    sch_json_str(f, &k->reason);
    fputc('}', f);
}
