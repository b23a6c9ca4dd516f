/*
 * wk_turn.c -- the first step of a turn's path through the worker: a
 * consumed record (a wk_record, copied out of librdkafka's message at the
 * Kafka boundary, so none of this needs a broker) becomes a validated,
 * tokenized wk_turn, or a DeadLetter or an `expired` TurnResult
 * (submission to the scheduler and streaming are in wk_gen.c).  Every
 * field of the record is treated as hostile: the schemas codec bounds the
 * structure, this file checks what only the worker can know (key, model,
 * vocabulary, context length, deadline, template roles, namespace, and
 * since spec 1.2: a response_format or forced tool call that compiles
 * against the model's constraint vocabulary, tools of OpenAI's shape, n
 * within the batch, logprobs within the readers' record limits; what it
 * cannot honour is refused, never served as if honoured).
 * A record whose content-type is application/json is a ChatTurn written as
 * JSON: it goes through sch_turn_decode_json (the same field rules and
 * codes; bad JSON is a DeadLetter like bad msgpack).  A turn whose `accept`
 * header is application/json gets its TurnResult (and TokenChunks) as JSON
 * with that content-type; DeadLetters are always msgpack.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "wk_internal.h"
#include "pl_time.h"
#include "pl_hash.h"

void wk_out_free(wk_out *o) {
    if (!o) return;
    free(o->key);
    sch_buf_free(&o->val);
    free(o);
}

void wk_turn_free(wk_turn *t) {
    if (!t) return;
    free(t->conv_id);
    free(t->turn_id);
    free(t->ns);
    free(t->prompt);
    eng_tmpl_turn_free(&t->rt);
    free(t->hist);
    for (int i = 0; i < t->n_stop; i++) free(t->stop[i]);
    free(t->stop);
    for (int k = 0; t->ch && k < t->n_choices; k++) {
        free(t->ch[k].text);
        free(t->ch[k].ctoks);
        free(t->ch[k].lp);
        free(t->ch[k].tops);
        wk_calls_free(&t->ch[k].calls);
    }
    wk_tools_free(&t->tools);
    free(t->ch);
    eng_constraint_free(t->cons);
    free(t->final_toks);
    sch_buf_free(&t->result);
    free(t);
}

static char *wk_dup(const char *p, size_t n) {
    char *s = malloc(n + 1);
    if (s) {
        if (n) memcpy(s, p, n);
        s[n] = 0;
    }
    return s;
}

const wk_header *wk_record_header(const wk_record *r, const char *name) {
    for (size_t i = r->n_headers; i-- > 0;)
        if (r->headers[i].name && !strcmp(r->headers[i].name, name)) return &r->headers[i];
    return NULL;
}

static wk_out *wk_out_new(const wk_record *rec, uint32_t gen, const char *tp) {
    wk_out *o = calloc(1, sizeof *o);
    if (!o) return NULL;
    sch_buf_init(&o->val);
    o->partition = rec->partition;
    o->offset = rec->offset;
    o->gen = gen;
    snprintf(o->tp, sizeof o->tp, "%s", tp);
    if (rec->key) {
        o->key = wk_dup(rec->key, rec->key_len);
        if (!o->key) {
            free(o);
            return NULL;
        }
        o->key_len = rec->key_len;
    }
    return o;
}

/* Encode d into out and check that it decodes under lim: the encoder does
 * not apply the readers' limits (a Kafka header name may be longer than
 * max_id_bytes), and a DeadLetter its readers cannot decode is lost.
 * Returns 0 or the sch_err with err. */
static int wk_dead_encode(const sch_dead *d, const sch_limits *lim, sch_buf *out, char *err,
                          size_t errlen) {
    int rc = sch_dead_encode(d, out, err, errlen);
    if (rc) return rc;
    sch_dead back;
    rc = sch_dead_decode(out->data, out->len, lim, &back, err, errlen);
    if (!rc) sch_dead_free(&back);
    return rc;
}

/* A refusal's reason may quote input (a model name cut at 100 bytes):
 * copy it as printable ASCII, so it is always valid DeadLetter and
 * TurnResult text. */
static void wk_printable(char *out, size_t cap, const char *reason) {
    snprintf(out, cap, "%s", reason);
    for (char *p = out; *p; p++)
        if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f) *p = '?';
}

/* DeadLetter for rec: the original value (a prefix when huge), key and
 * headers (the first 64), reason and code.  Encoding is retried without
 * the headers and the key when they break the DLQ schema's own rules or
 * the readers' limits. */
wk_out *wk_dead(wk_worker *w, const wk_record *rec, uint32_t gen, const char *tp, int code,
                const char *reason, const sch_turn *t) {
    wk_out *o = wk_out_new(rec, gen, tp);
    if (!o) return NULL;
    o->dlq = 1;
    char why[512];
    wk_printable(why, sizeof why, reason);
    sch_dead d;
    sch_dead_init(&d);
    d.reason = sch_str_c(why);
    d.error_code = code;
    d.topic = sch_str_c(rec->topic);
    d.partition = rec->partition;
    d.offset = rec->offset;
    d.timestamp_ms = rec->timestamp_ms;
    if (rec->key) d.key = (sch_str){rec->key, rec->key_len};
    size_t vmax = w->eng.lim.max_content_bytes;
    d.value =
        (sch_str){rec->value ? (const char *)rec->value : "", rec->len < vmax ? rec->len : vmax};
    if (!rec->value) d.value.ptr = NULL, d.value.len = 0;
    d.value_size = rec->len;
    if (t) {
        d.conversation_id = t->conversation_id;
        d.turn_id = t->turn_id;
    }
    d.worker = sch_str_c(w->id);
    d.dead_ms = (uint64_t)pl_unix_ms();
    sch_header hv[64];
    size_t nh = 0;
    for (size_t i = 0; nh < 64 && i < rec->n_headers; i++) {
        const wk_header *h = &rec->headers[i];
        hv[nh++] = (sch_header){sch_str_c(h->name), {h->value, h->value ? h->size : 0}};
    }
    d.headers = nh ? hv : NULL;
    d.n_headers = nh;
    char err[PL_ERR_LEN];
    if (wk_dead_encode(&d, &w->eng.lim, &o->val, err, sizeof err) != 0) {
        d.headers = NULL;
        d.n_headers = 0;
        d.key = (sch_str){NULL, 0};
        d.conversation_id = d.turn_id = (sch_str){NULL, 0};
        if (wk_dead_encode(&d, &w->eng.lim, &o->val, err, sizeof err) != 0) {
            wk_log("error", "dlq_encode", "partition=%d offset=%lld err=\"%s\"",
                   (int)rec->partition, (long long)rec->offset, err);
            d.value = (sch_str){NULL, 0};
            d.reason = sch_str_c("record could not be represented in a DeadLetter");
            if (wk_dead_encode(&d, &w->eng.lim, &o->val, err, sizeof err) != 0) {
                wk_out_free(o);
                return NULL;
            }
        }
    }
    wk_log("warn", "dlq", "partition=%d offset=%lld code=%s reason=\"%.200s\"", (int)rec->partition,
           (long long)rec->offset, sch_err_name(code), why);
    return o;
}

/* The error TurnResult of a turn that ends before work: `expired` for a
 * deadline that passed (SCH_E_EXPIRED), else `error` with the code and
 * message of the turn's DeadLetter, so a client waiting on the responses
 * topic is told (schemas/README.md 7).  A message the schema refuses is
 * replaced by a fixed one. */
static wk_out *wk_error_result(wk_worker *w, const wk_record *rec, uint32_t gen, const char *tp,
                               const sch_turn *t, int n_prompt, bool json, int code,
                               const char *msg) {
    wk_out *o = wk_out_new(rec, gen, tp);
    if (!o) return NULL;
    o->json = json;
    sch_result r;
    sch_result_init(&r);
    r.conversation_id = t->conversation_id;
    r.turn_id = t->turn_id;
    r.text = sch_str_c("");
    r.prompt_tokens = (uint64_t)n_prompt;
    r.worker = sch_str_c(w->id);
    r.model = sch_str_c(w->eng.model_name);
    char why[512];
    wk_printable(why, sizeof why, msg);
    sch_result_fail(&r, code, sch_str_c(why));
    char err[PL_ERR_LEN];
    int (*enc)(const sch_result *, sch_buf *, char *, size_t) =
        json ? sch_result_encode_json : sch_result_encode;
    if (enc(&r, &o->val, err, sizeof err) != 0) {
        r.error_message = sch_str_c("turn refused (the DeadLetter says why)");
        if (enc(&r, &o->val, err, sizeof err) != 0) {
            wk_out_free(o);
            return NULL;
        }
    }
    return o;
}

/* The turn's prompt ids: its prompt_tokens (checked against the
 * vocabulary), or its messages rendered by the model's chat template with
 * the conversation's history spliced in where the rules allow (prior may
 * be NULL; rt gets the render, its ids moved to *ids).  Errors are an
 * sch_err code with msg. */
static int wk_prompt(wk_worker *w, const sch_turn *t, const wk_tools *tools,
                     const eng_tmpl_prior *prior, int32_t **ids, int *n, eng_tmpl_turn *rt,
                     char *msg, size_t msglen) {
    *ids = NULL;
    memset(rt, 0, sizeof *rt);
    if (t->prompt_tokens) {
        int32_t *p = malloc(t->n_prompt_tokens * sizeof *p);
        if (!p) return SCH_E_NOMEM;
        for (size_t i = 0; i < t->n_prompt_tokens; i++) {
            if (t->prompt_tokens[i] >= (uint32_t)w->eng.n_vocab) {
                snprintf(msg, msglen, "prompt_tokens[%zu] = %u is outside the vocabulary (%d)", i,
                         t->prompt_tokens[i], w->eng.n_vocab);
                free(p);
                return SCH_E_TOKEN_OUT_OF_VOCAB;
            }
            p[i] = (int32_t)t->prompt_tokens[i];
        }
        *ids = p;
        *n = (int)t->n_prompt_tokens;
        return 0;
    }
    if (t->prompt.ptr) { /* a raw prompt: the model's own encoding, no template */
        int flags =
            eng_tok_add_bos(w->eng.tok) && eng_tok_bos(w->eng.tok) >= 0 ? ENG_TOK_ADD_BOS : 0;
        char terr[PL_ERR_LEN];
        int cnt = eng_tok_count(w->eng.tok, t->prompt.ptr, t->prompt.len, flags, terr, sizeof terr);
        int32_t *p = cnt > 0 ? malloc((size_t)cnt * sizeof *p) : NULL;
        if (cnt == ENG_TOK_ENOMEM || (cnt > 0 && !p)) return SCH_E_NOMEM;
        if (cnt <= 0 || eng_tok_encode(w->eng.tok, t->prompt.ptr, t->prompt.len, flags, p, cnt, n,
                                       terr, sizeof terr) != 0) {
            free(p);
            snprintf(msg, msglen, "prompt: %s", cnt == 0 ? "encodes to no tokens" : terr);
            return SCH_E_BAD_VALUE;
        }
        *ids = p;
        return 0;
    }
    /* tools shown, or earlier calls and results: written in the
     * template's tool format (wk_tools.h) */
    int tooled = tools->mode != WK_TOOLS_OFF;
    for (size_t i = 0; i < t->n_messages; i++)
        tooled |= t->messages[i].role == SCH_ROLE_TOOL || !!t->messages[i].tool_calls.ptr;
    wk_tool_msgs tm;
    memset(&tm, 0, sizeof tm);
    eng_tmpl_msg *m = NULL;
    int nm = (int)t->n_messages, rc = 0;
    char *tools_json = NULL; /* the file's template: its `tools` variable */
    if (tooled && w->eng.tfile && eng_tmpl_file_renders_tools(w->eng.tfile)) {
        /* the file's own template writes tools, calls and results itself;
         * reading calls back needs the family's format */
        if (tools->mode != WK_TOOLS_OFF && w->eng.family == ENG_TMPL_NONE) {
            snprintf(msg, msglen,
                     "params.tools: model %s has a chat template of no known family, so parley "
                     "cannot read tool calls back from its replies; set model.chat_template to a "
                     "built-in format",
                     w->eng.model_name);
            return SCH_E_UNSUPPORTED;
        }
        int decode = !eng_tmpl_file_tool_args_string(w->eng.tfile);
        if ((rc = wk_tools_file_msgs(tools, t->messages, t->n_messages, decode, &tm, &tools_json,
                                     msg, msglen)))
            return rc;
        m = tm.m;
        nm = tm.n;
    } else if (tooled) {
        if (w->eng.family == ENG_TMPL_NONE) {
            snprintf(msg, msglen,
                     "params.tools: model %s has a chat template of no known family, so parley "
                     "has no tool-call format for it; set model.chat_template to a built-in format",
                     w->eng.model_name);
            return SCH_E_UNSUPPORTED;
        }
        if ((rc = wk_tools_render(tools, w->eng.family, t->messages, t->n_messages, &tm, msg,
                                  msglen)))
            return rc;
        m = tm.m;
        nm = tm.n;
    } else {
        if (!(m = malloc(t->n_messages * sizeof *m))) return SCH_E_NOMEM;
        for (size_t i = 0; i < t->n_messages; i++) {
            const char *role = sch_role_name(t->messages[i].role);
            m[i] = (eng_tmpl_msg){.role = role,
                                  .role_len = strlen(role),
                                  .content = t->messages[i].content.ptr,
                                  .content_len = t->messages[i].content.len};
        }
    }
    char terr[PL_ERR_LEN];
    int r = w->eng.tfile ? eng_tmpl_file_render_turn(w->eng.tfile, m, nm, true, tools_json, prior,
                                                     rt, terr, sizeof terr)
                         : eng_tmpl_render_turn(w->eng.fmt, w->eng.tok, m, nm, true, prior, rt,
                                                terr, sizeof terr);
    if (tooled) wk_tool_msgs_free(&tm);
    else free(m);
    free(tools_json);
    if (r == ENG_TMPL_EROLE) {
        snprintf(msg, msglen, "chat template %s: %s", eng_tmpl_name(w->eng.fmt), terr);
        rc = SCH_E_BAD_ROLE;
    } else if (r == ENG_TMPL_ENOMEM) {
        rc = SCH_E_NOMEM;
    } else if (r != 0) {
        snprintf(msg, msglen, "chat template %s: %s", eng_tmpl_name(w->eng.fmt), terr);
        rc = SCH_E_BAD_VALUE;
    }
    if (rc) return rc;
    *ids = rt->ids;
    *n = rt->n_ids;
    rt->ids = NULL;
    rt->n_ids = 0;
    return 0;
}

/* What the turn path reads from a record's headers. */
typedef struct wk_rec_meta {
    char tp[WK_TRACEPARENT_MAX]; /* a valid traceparent to carry ("" = none) */
    sch_format fmt;              /* the body's format, from content-type */
    bool json_out;               /* accept: application/json (results as JSON) */
} wk_rec_meta;

/* Read the headers; a bad content-type is its sch_err code with msg. */
static int wk_rec_meta_read(const wk_record *rec, wk_rec_meta *m, char *msg, size_t msglen) {
    const wk_header *h;
    m->tp[0] = 0;
    m->fmt = SCH_FORMAT_MSGPACK;
    m->json_out = false;
    if ((h = wk_record_header(rec, SCH_HEADER_TRACEPARENT)) && h->value && h->size < sizeof m->tp &&
        sch_traceparent_check(h->value, h->size) == 0) {
        memcpy(m->tp, h->value, h->size);
        m->tp[h->size] = 0;
    }
    if ((h = wk_record_header(rec, SCH_HEADER_ACCEPT)))
        m->json_out = sch_accept_json(h->value, h->value ? h->size : 0);
    if ((h = wk_record_header(rec, SCH_HEADER_CONTENT_TYPE)))
        return sch_content_type_format(h->value, h->value ? h->size : 0, &m->fmt, msg, msglen);
    return 0;
}

/* The namespace the turn's KV lives in, by worker.namespace_from: the
 * turn's own field, the gateway's header (never the record's word), the
 * topic, or a fixed name.  Points into t, rec or w. */
static int wk_turn_ns(const wk_worker *w, const wk_record *rec, const sch_turn *t, const char **ns,
                      size_t *ns_len, char *msg, size_t msglen) {
    *ns = t->ns.ptr ? t->ns.ptr : SCH_DEFAULT_NAMESPACE;
    *ns_len = t->ns.ptr ? t->ns.len : strlen(SCH_DEFAULT_NAMESPACE);
    if (w->ns_from == WK_NS_HEADER) {
        const wk_header *h = wk_record_header(rec, WK_HEADER_NAMESPACE);
        if (!h || !h->value || !h->size || memchr(h->value, 0, h->size)) {
            snprintf(msg, msglen,
                     "header '%s' is missing or empty or holds a NUL byte "
                     "(worker.namespace_from=header)",
                     WK_HEADER_NAMESPACE);
            return SCH_E_MISSING_FIELD;
        }
        *ns = h->value;
        *ns_len = h->size;
    } else if (w->ns_from == WK_NS_TOPIC) {
        *ns = w->topics.turns;
        *ns_len = strlen(*ns);
    } else if (w->ns_from == WK_NS_FIXED) {
        *ns = w->ns_fixed;
        *ns_len = strlen(*ns);
    }
    if (*ns_len > ENG_SCHED_NS_MAX) {
        snprintf(msg, msglen, "namespace is %zu bytes; this worker allows %d", *ns_len,
                 ENG_SCHED_NS_MAX);
        return SCH_E_STRING_TOO_LONG;
    }
    return 0;
}

/* What only this worker can check of a decoded turn: the record key is
 * its conversation, the model is the one served here, the namespace. */
static int wk_turn_check(const wk_worker *w, const wk_record *rec, const sch_turn *t,
                         const char **ns, size_t *ns_len, char *msg, size_t msglen) {
    if (!rec->key || rec->key_len != t->conversation_id.len ||
        memcmp(rec->key, t->conversation_id.ptr, rec->key_len)) {
        snprintf(msg, msglen, "record key differs from conversation_id");
        return SCH_E_KEY_MISMATCH;
    }
    if (t->model.ptr && (t->model.len != strlen(w->eng.model_name) ||
                         memcmp(t->model.ptr, w->eng.model_name, t->model.len))) {
        snprintf(msg, msglen, "model '%.100s' is not served here (this worker: '%.100s')",
                 t->model.ptr, w->eng.model_name);
        return SCH_E_UNKNOWN_MODEL;
    }
    return wk_turn_ns(w, rec, t, ns, ns_len, msg, msglen);
}

/* The turn's sampling: its parameters, a seed from turn_id when it names
 * none, and the model's end-of-generation tokens as stops. */
static void wk_turn_sampling(const wk_worker *w, const sch_turn *t, eng_sampler_params *s) {
    eng_sampler_params_default(s);
    s->temperature = (float)t->params.temperature;
    s->top_p = (float)t->params.top_p;
    s->top_k = (int)t->params.top_k;
    s->repetition_penalty = (float)t->params.repetition_penalty;
    s->seed = t->params.has_seed ? t->params.seed
                                 : pl_fnv1a64(PL_FNV64_SEED, t->turn_id.ptr, t->turn_id.len);
    s->n_stop = w->eng.n_eog;
    memcpy(s->stop, w->eng.eog, (size_t)w->eng.n_eog * sizeof w->eng.eog[0]);
}

/* The engine's kind of a response_format. */
static eng_constraint_kind wk_constraint_kind(sch_rf f) {
    switch (f) {
    case SCH_RF_JSON_OBJECT: return ENG_CONSTRAINT_JSON_OBJECT;
    case SCH_RF_JSON_SCHEMA: return ENG_CONSTRAINT_JSON_SCHEMA;
    case SCH_RF_REGEX: return ENG_CONSTRAINT_REGEX;
    case SCH_RF_GRAMMAR: return ENG_CONSTRAINT_LARK;
    default: return ENG_CONSTRAINT_NONE;
    }
}

/* Compile spec, once: a constraint that does not compile is refused
 * here, with the turn's record at hand for its DeadLetter, and one that
 * does goes to the scheduler compiled (*out, the caller's).  field names
 * where it came from in a refusal ("params.response_format"). */
static int wk_constraint_compile(const wk_worker *w, const eng_constraint_spec *spec,
                                 const char *field, eng_constraint **out, char *msg,
                                 size_t msglen) {
    if (!w->eng.cvocab) {
        snprintf(msg, msglen, "%s: %s", field, w->eng.cvocab_why);
        return SCH_E_UNSUPPORTED;
    }
    char e[PL_ERR_LEN];
    int rc = eng_constraint_new(w->eng.cvocab, spec, out, e, sizeof e);
    if (rc == 0) return 0;
    snprintf(msg, msglen, "%s (%s): %s", field, eng_constraint_kind_name(spec->kind), e);
    return rc == ENG_CONSTRAINT_ENOMEM     ? SCH_E_NOMEM
           : rc == ENG_CONSTRAINT_EUNAVAIL ? SCH_E_UNSUPPORTED
                                           : SCH_E_BAD_CONSTRAINT;
}

/* Msgpack values and bytes a reply's logprobs take at most per token with
 * k alternatives (schemas/README.md 6b: a map of id, token, logprob,
 * bytes, top; each alternative a map of four). */
#define WK_LP_VALUES(k) (12 + 10 * (size_t)(k))
#define WK_LP_BYTES(k, piece) (((size_t)(k) + 1) * (48 + 4 * (size_t)(piece)))

/* What the turn asks beyond plain text generation (spec 1.2), against
 * what this worker can do: choices within the batch, logprobs within the
 * readers' record limits, a constraint that compiles (a forced tool call's
 * schema, *schema, malloc'd), no response_format beside tools the model
 * may call.  0 or a code with msg; *cons gets the compiled constraint
 * (the caller's; NULL when there is none). */
static int wk_turn_features(const wk_worker *w, const sch_turn *t, const wk_tools *tools,
                            eng_constraint **cons, char **schema, char *msg, size_t msglen) {
    const sch_params *p = &t->params;
    eng_constraint_spec spec;
    memset(&spec, 0, sizeof spec);
    *cons = NULL;
    if (p->n > 1 && w->eng.max_running > 0 && p->n > (uint32_t)w->eng.max_running) {
        snprintf(msg, msglen,
                 "params.n: %u choices exceed this worker's scheduler.max_running (%d)", p->n,
                 w->eng.max_running);
        return SCH_E_UNSUPPORTED;
    }
    if (p->has_logprobs) {
        size_t piece = w->eng.tok ? eng_tok_max_piece(w->eng.tok) : 64;
        if (piece > 64) piece = 64;
        size_t toks = (size_t)p->n * p->max_tokens;
        size_t max_v = w->eng.lim.max_objects / 2 / WK_LP_VALUES(p->top_logprobs);
        size_t max_b = w->eng.lim.max_total_bytes / 2 / WK_LP_BYTES(p->top_logprobs, piece);
        size_t most = max_v < max_b ? max_v : max_b;
        if (toks > most) {
            snprintf(msg, msglen,
                     "params.logprobs: %u alternatives for n (%u) x max_tokens (%u) tokens "
                     "would not fit a record; at most %zu tokens in all",
                     p->top_logprobs, p->n, p->max_tokens, most);
            return SCH_E_OUT_OF_RANGE;
        }
    }
    if (tools->mode == WK_TOOLS_REQUIRED || tools->mode == WK_TOOLS_NAMED) {
        /* the reply is the call: its schema is the constraint (a
         * response_format does not apply to a reply that is a call) */
        if (!(*schema = wk_tools_schema(tools))) return SCH_E_NOMEM;
        spec.kind = ENG_CONSTRAINT_JSON_SCHEMA;
        spec.text = *schema;
        spec.len = strlen(*schema);
        return wk_constraint_compile(w, &spec, "params.tools", cons, msg, msglen);
    }
    if (tools->mode == WK_TOOLS_AUTO && p->response_format.type != SCH_RF_TEXT) {
        snprintf(msg, msglen,
                 "params.response_format: not supported with tools the model may "
                 "call (tool_choice auto); use tool_choice none or required");
        return SCH_E_UNSUPPORTED;
    }
    if (p->response_format.type != SCH_RF_TEXT) {
        spec.kind = wk_constraint_kind(p->response_format.type);
        spec.text = p->response_format.spec.ptr ? p->response_format.spec.ptr : "";
        spec.len = p->response_format.spec.len;
        return wk_constraint_compile(w, &spec, "params.response_format", cons, msg, msglen);
    }
    return 0;
}

/* A wk_turn for a checked turn, its prompt ids and its compiled
 * constraint (which it takes, also on failure).  NULL when out of memory. */
static wk_turn *wk_turn_new(wk_worker *w, const wk_record *rec, uint32_t gen, const wk_rec_meta *m,
                            const sch_turn *t, eng_constraint *cons, const char *ns, size_t ns_len,
                            int32_t *ids, int n_ids, int64_t now_ms) {
    wk_turn *x = calloc(1, sizeof *x);
    if (!x) {
        free(ids);
        eng_constraint_free(cons);
        return NULL;
    }
    x->cons = cons;
    x->w = w;
    x->partition = rec->partition;
    x->offset = rec->offset;
    x->gen = gen;
    memcpy(x->tp, m->tp, sizeof x->tp);
    x->prompt = ids;
    x->n_prompt = n_ids;
    x->conv_id = wk_dup(t->conversation_id.ptr, t->conversation_id.len);
    x->turn_id = wk_dup(t->turn_id.ptr, t->turn_id.len);
    x->ns = wk_dup(ns, ns_len);
    sch_buf_init(&x->result);
    wk_turn_sampling(w, t, &x->sampling);
    x->max_tokens = (int)t->params.max_tokens;
    x->logprobs = t->params.has_logprobs;
    x->top_logprobs = (int)t->params.top_logprobs;
    x->n_choices = (int)t->params.n;
    x->ch = calloc((size_t)x->n_choices, sizeof *x->ch);
    x->stream = t->stream;
    x->json_out = m->json_out;
    x->service_class = t->service_class == SCH_CLASS_BULK ? ENG_SCHED_BULK : ENG_SCHED_INTERACTIVE;
    if (t->deadline_ms)
        x->deadline_us = eng_sched_now_us() + ((int64_t)t->deadline_ms - now_ms) * 1000;
    int64_t ts = rec->timestamp_ms;
    x->queued_unix_ms = t->created_ms ? (int64_t)t->created_ms : ts > 0 ? ts : now_ms;
    bool ok = x->conv_id && x->turn_id && x->ns && x->ch;
    /* the request's stop strings, and the template's end of turn unless the
     * request names it already */
    const char *eot = w->eng.turn_stop;
    for (size_t i = 0; eot && i < t->params.n_stop; i++)
        if (t->params.stop[i].len == strlen(eot) &&
            !memcmp(t->params.stop[i].ptr, eot, strlen(eot)))
            eot = NULL;
    int want = (int)t->params.n_stop + (eot != NULL);
    if (want) {
        x->stop = calloc((size_t)want, sizeof *x->stop);
        for (size_t i = 0; x->stop && i < t->params.n_stop; i++) {
            x->stop[i] = wk_dup(t->params.stop[i].ptr, t->params.stop[i].len);
            if (x->stop[i]) x->n_stop++;
        }
        if (x->stop && eot && x->n_stop == (int)t->params.n_stop)
            if ((x->stop[x->n_stop] = wk_dup(eot, strlen(eot)))) x->n_stop++;
        ok = ok && x->n_stop == want;
    }
    if (!ok) {
        wk_turn_free(x);
        return NULL;
    }
    return x;
}

/* User messages of a turn: its index in the conversation (1 = first). */
static int wk_turn_index(const sch_turn *t) {
    int k = 0;
    for (size_t i = 0; i < t->n_messages; i++) k += t->messages[i].role == SCH_ROLE_USER;
    return k ? k : 1;
}

int wk_turn_from_record(wk_worker *w, const wk_record *rec, uint32_t gen, const wk_history *hist,
                        wk_turn **turn, wk_out **out) {
    *turn = NULL;
    *out = NULL;
    char msg[512];
    wk_rec_meta meta;
    sch_turn t;
    memset(&t, 0, sizeof t);
    /* A JSON turn is converted to msgpack and decoded by the same decoder
     * (sch_json.c): one set of field rules and error codes. */
    int code = wk_rec_meta_read(rec, &meta, msg, sizeof msg);
    if (!code && meta.fmt == SCH_FORMAT_JSON)
        code = sch_turn_decode_json(rec->value, rec->len, &w->eng.lim, &t, msg, sizeof msg);
    else if (!code) code = sch_turn_decode(rec->value, rec->len, &w->eng.lim, &t, msg, sizeof msg);
    if (code) { /* undecodable: the DeadLetter carries no turn fields */
        sch_turn_free(&t);
        *out = wk_dead(w, rec, gen, meta.tp, code, msg, NULL);
        return *out ? 0 : SCH_E_NOMEM;
    }
    const char *ns = NULL;
    size_t ns_len = 0;
    int32_t *ids = NULL;
    int n_ids = 0, rc = 0;
    eng_tmpl_turn rt;
    memset(&rt, 0, sizeof rt);
    wk_tools tools;
    memset(&tools, 0, sizeof tools);
    char *schema = NULL; /* a forced tool call's schema */
    code = wk_turn_check(w, rec, &t, &ns, &ns_len, msg, sizeof msg);
    if (!code)
        code =
            wk_tools_parse(&t.params, wk_tools_format_of(w->eng.family), &tools, msg, sizeof msg);
    if (!code && tools.mode != WK_TOOLS_OFF && !t.messages) {
        snprintf(msg, sizeof msg,
                 "params.tools: a turn with tools needs messages (the model "
                 "is shown the tools in its chat template)");
        code = SCH_E_UNSUPPORTED;
    }
    if (!code)
        code = wk_prompt(w, &t, &tools, wk_history_prior(hist, ns, ns_len), &ids, &n_ids, &rt, msg,
                         sizeof msg);
    if (!code && (int64_t)n_ids + t.params.max_tokens > w->eng.n_ctx) {
        snprintf(msg, sizeof msg, "prompt (%d tokens) + max_tokens (%u) exceeds the context (%d)",
                 n_ids, t.params.max_tokens, w->eng.n_ctx);
        code = SCH_E_CONTEXT_OVERFLOW;
    }
    eng_constraint *cons = NULL; /* compiled once, here; the turn's, or freed below */
    if (!code) code = wk_turn_features(w, &t, &tools, &cons, &schema, msg, sizeof msg);
    int64_t now_ms = pl_unix_ms();
    if (code == SCH_E_NOMEM) {
        rc = SCH_E_NOMEM;
    } else if (code) {
        /* the DeadLetter, and the turn's error TurnResult chained after it
         * (the same input offset: one transaction holds both); a turn whose
         * key names another conversation gets none, lest it answer that one.
         * Without its result (out of memory, or ids the encoder refuses)
         * the DeadLetter still goes: a refused record must not stop the
         * worker. */
        *out = wk_dead(w, rec, gen, meta.tp, code, msg, &t);
        if (*out && code != SCH_E_KEY_MISMATCH &&
            !((*out)->next =
                  wk_error_result(w, rec, gen, meta.tp, &t, n_ids, meta.json_out, code, msg)))
            wk_log("error", "error_result_lost", "partition=%d offset=%lld", (int)rec->partition,
                   (long long)rec->offset);
        rc = *out ? 0 : SCH_E_NOMEM;
    } else if (t.deadline_ms && (int64_t)t.deadline_ms <= now_ms) {
        *out = wk_error_result(w, rec, gen, meta.tp, &t, n_ids, meta.json_out, SCH_E_EXPIRED,
                               "deadline_ms passed before the turn was started");
        rc = *out ? 0 : SCH_E_NOMEM;
    } else {
        *turn = wk_turn_new(w, rec, gen, &meta, &t, cons, ns, ns_len, ids, n_ids, now_ms);
        ids = NULL; /* the turn's now, or freed */
        cons = NULL;
        rc = *turn ? 0 : SCH_E_NOMEM;
        if (*turn) {
            wk_turn *x = *turn;
            x->rt = rt;       /* the render's text and specials, for the next turn's history */
            x->tools = tools; /* the turn's now */
            memset(&tools, 0, sizeof tools);
            memset(&rt, 0, sizeof rt);
            x->n_msgs = t.messages ? (int)t.n_messages : 0;
            x->turn_index = wk_turn_index(&t);
            if (x->rt.n_spliced) {
                WK_ADD(w->met.ctr.turns_spliced, 1);
                WK_ADD(w->met.ctr.prefix_splice, (uint64_t)x->rt.n_spliced);
                if (x->rt.mismatch) WK_ADD(w->met.ctr.retok_mismatch, 1);
            }
        }
    }
    eng_constraint_free(cons);
    eng_tmpl_turn_free(&rt);
    wk_tools_free(&tools);
    free(schema);
    free(ids);
    sch_turn_free(&t);
    return rc;
}
