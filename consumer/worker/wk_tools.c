/*
 * wk_tools.c -- tool calls: parsing a turn's tools, the schema of a
 * forced call, rendering tools / calls / results into a chat template's
 * messages, and reading calls back from a reply (see wk_tools.h).
 */
#include "wk_tools.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pl_err.h"
#include "pl_hash.h"


wk_tool_format wk_tools_format_of(eng_tmpl_format f) {
    return f == ENG_TMPL_LLAMA3 ? WK_TOOLS_LLAMA3 : WK_TOOLS_TAGS;
}

/* The function object of tool i. */
static json_t *wk_fn(const wk_tools *t, size_t i) {
    return json_object_get(json_array_get(t->tools, i), "function");
}

static const char *wk_fn_name(const wk_tools *t, size_t i) {
    return json_string_value(json_object_get(wk_fn(t, i), "name"));
}

/* The tool named name, or -1. */
static int wk_tool_index(const wk_tools *t, const char *name) {
    for (size_t i = 0; name && i < json_array_size(t->tools); i++)
        if (!strcmp(wk_fn_name(t, i), name)) return (int)i;
    return -1;
}

int wk_tools_parse(const sch_params *p, wk_tool_format fmt, wk_tools *t, char *msg, size_t msglen) {
    json_error_t je;
    memset(t, 0, sizeof *t);
    t->fmt = fmt;
    t->parallel = p->parallel_tool_calls;
    if (!p->tools.ptr && !p->tool_choice.ptr) return 0;
    json_t *choice = NULL;
    if (p->tool_choice.ptr) {
        choice = json_loadb(p->tool_choice.ptr, p->tool_choice.len,
                            JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &je);
        if (!choice) {
            snprintf(msg, msglen, "params.tool_choice: not JSON (%s)", je.text);
            return SCH_E_BAD_CONSTRAINT;
        }
    }
    const char *cs = json_string_value(choice);
    const char *named =
        json_string_value(json_object_get(json_object_get(choice, "function"), "name"));
    const char *ctype = json_string_value(json_object_get(choice, "type"));
    if (!choice) t->mode = p->tools.ptr ? WK_TOOLS_AUTO : WK_TOOLS_OFF;
    else if (cs && !strcmp(cs, "none")) t->mode = WK_TOOLS_OFF;
    else if (cs && !strcmp(cs, "auto")) t->mode = WK_TOOLS_AUTO;
    else if (cs && !strcmp(cs, "required")) t->mode = WK_TOOLS_REQUIRED;
    else if (json_is_object(choice) && ctype && !strcmp(ctype, "function") && named)
        t->mode = WK_TOOLS_NAMED;
    else {
        json_decref(choice);
        snprintf(msg, msglen,
                 "params.tool_choice: not \"none\", \"auto\", \"required\" or "
                 "{\"type\": \"function\", \"function\": {\"name\": ...}}");
        return SCH_E_BAD_CONSTRAINT;
    }
    if (t->mode == WK_TOOLS_OFF) {
        json_decref(choice);
        return 0;
    }
    if (!p->tools.ptr) {
        json_decref(choice);
        snprintf(msg, msglen, "params.tool_choice: asks for a call but there are no tools");
        return SCH_E_BAD_CONSTRAINT;
    }
    t->tools = json_loadb(p->tools.ptr, p->tools.len, JSON_REJECT_DUPLICATES, &je);
    if (!t->tools) {
        json_decref(choice);
        snprintf(msg, msglen, "params.tools: not JSON (%s)", je.text);
        return SCH_E_BAD_CONSTRAINT;
    }
    char why[PL_ERR_LEN];
    int at;
    if (sch_tools_check(p->tools.ptr, p->tools.len, &at, why, sizeof why) != 0) {
        snprintf(msg, msglen, "params.%s", why);
        json_decref(choice);
        wk_tools_free(t);
        return SCH_E_BAD_CONSTRAINT;
    }
    if (t->mode == WK_TOOLS_NAMED) {
        int i = wk_tool_index(t, named);
        json_decref(choice);
        if (i < 0) {
            snprintf(msg, msglen, "params.tool_choice: names a function that is not in tools");
            wk_tools_free(t);
            return SCH_E_BAD_CONSTRAINT;
        }
        t->named = wk_fn_name(t, (size_t)i); /* points into t->tools */
        return 0;
    }
    json_decref(choice);
    return 0;
}

void wk_tools_free(wk_tools *t) {
    json_decref(t->tools);
    memset(t, 0, sizeof *t);
}

/* The key a call's arguments go under in the format. */
static const char *wk_args_key(const wk_tools *t) {
    return t->fmt == WK_TOOLS_LLAMA3 ? "parameters" : "arguments";
}

/* {"type": "object", "properties": {"name": {"const": N}, ARGS: params},
 * "required": [...], "additionalProperties": false} of tool i. */
static json_t *wk_call_schema(const wk_tools *t, size_t i) {
    json_t *params = json_object_get(wk_fn(t, i), "parameters");
    json_t *args =
        json_is_object(params) ? json_deep_copy(params) : json_pack("{ss}", "type", "object");
    return json_pack("{ss s{s{ss} so} s[ss] sb}", "type", "object", "properties", "name", "const",
                     wk_fn_name(t, i), wk_args_key(t), args, "required", "name", wk_args_key(t),
                     "additionalProperties", 0);
}

char *wk_tools_schema(const wk_tools *t) {
    json_t *call;
    if (t->mode == WK_TOOLS_NAMED) {
        call = wk_call_schema(t, (size_t)wk_tool_index(t, t->named));
    } else {
        json_t *any = json_array();
        for (size_t i = 0; any && i < json_array_size(t->tools); i++)
            json_array_append_new(any, wk_call_schema(t, i));
        call = json_array_size(any) == 1 ? json_incref(json_array_get(any, 0))
                                         : json_pack("{sO}", "anyOf", any);
        json_decref(any);
    }
    json_t *s = t->parallel ? json_pack("{ss so sI sI}", "type", "array", "items", call, "minItems",
                                        (json_int_t)1, "maxItems", (json_int_t)SCH_MAX_TOOL_CALLS)
                            : call;
    char *txt = s ? json_dumps(s, JSON_COMPACT) : NULL;
    json_decref(s);
    return txt;
}

/* ---- rendering ----------------------------------------------------------- */

/* A growable string. */
typedef struct wk_sb {
    char *p;
    size_t n, cap;
    int oom;
} wk_sb;

static void wk_sb_add(wk_sb *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = (b->n + n + 1) * 2;
        char *x = realloc(b->p, cap);
        if (!x) {
            b->oom = 1;
            return;
        }
        b->p = x;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

static void wk_sb_str(wk_sb *b, const char *s) { wk_sb_add(b, s, strlen(s)); }

/* Python's json.dumps(x) (", " and ": " separators) or with indent. */
static void wk_sb_json(wk_sb *b, json_t *j, int indent) {
    char *t = json_dumps(j, indent ? JSON_INDENT(indent) : 0);
    if (!t) {
        b->oom = 1;
        return;
    }
    wk_sb_str(b, t);
    free(t);
}

static const char wk_tags_intro[] =
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>";
static const char wk_tags_outro[] =
    "\n</tools>\n\nFor each function call, return a json object with function name and "
    "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": "
    "<function-name>, \"arguments\": <args-json-object>}\n</tool_call>";
static const char wk_llama3_intro[] =
    "Given the following functions, please respond with a JSON for a function call with its "
    "proper arguments that best answers the given prompt.\n\nRespond in the format {\"name\": "
    "function name, \"parameters\": dictionary of argument name and its value}.Do not use "
    "variables.\n\n";

/* The tools as the format shows them (malloc'd in b). */
static void wk_tools_block(const wk_tools *t, wk_sb *b) {
    size_t i;
    json_t *tool;
    if (t->fmt == WK_TOOLS_LLAMA3) {
        wk_sb_str(b, wk_llama3_intro);
        json_array_foreach(t->tools, i, tool) {
            wk_sb_json(b, tool, 4);
            wk_sb_str(b, "\n\n");
        }
        return;
    }
    wk_sb_str(b, wk_tags_intro);
    json_array_foreach(t->tools, i, tool) {
        wk_sb_str(b, "\n");
        wk_sb_json(b, tool, 0);
    }
    wk_sb_str(b, wk_tags_outro);
}

/* An assistant message's calls (OpenAI's tool_calls array, JSON text) in
 * the format, after its content.  -1 when they are not that shape. */
static int wk_calls_block(const wk_tools *t, const sch_message *m, wk_sb *b) {
    json_error_t je;
    json_t *calls = json_loadb(m->tool_calls.ptr, m->tool_calls.len, 0, &je), *c;
    size_t i;
    if (!json_is_array(calls)) {
        json_decref(calls);
        return -1;
    }
    wk_sb_add(b, m->content.ptr, m->content.len);
    json_array_foreach(calls, i, c) {
        json_t *fn = json_object_get(c, "function");
        const char *name = json_string_value(json_object_get(fn, "name"));
        const char *args = json_string_value(json_object_get(fn, "arguments"));
        if (!name) {
            json_decref(calls);
            return -1;
        }
        json_t *a = args ? json_loads(args, JSON_DECODE_ANY, &je) : json_object();
        if (t->fmt == WK_TOOLS_LLAMA3) {
            if (i || m->content.len) wk_sb_str(b, "; ");
            wk_sb_str(b, "{\"name\": \"");
            wk_sb_str(b, name);
            wk_sb_str(b, "\", \"parameters\": ");
        } else {
            if (i || m->content.len) wk_sb_str(b, "\n");
            wk_sb_str(b, "<tool_call>\n{\"name\": \"");
            wk_sb_str(b, name);
            wk_sb_str(b, "\", \"arguments\": ");
        }
        if (a) wk_sb_json(b, a, 0);
        else wk_sb_str(b, args); /* not JSON: as the client sent it */
        json_decref(a);
        wk_sb_str(b, t->fmt == WK_TOOLS_LLAMA3 ? "}" : "}\n</tool_call>");
    }
    json_decref(calls);
    return 0;
}

/* Keep b's string with out; the message points at it. */
static int wk_msgs_push(wk_tool_msgs *out, const char *role, wk_sb *b) {
    if (b->oom) return -1;
    char **o = realloc(out->owned, (size_t)(out->n_owned + 1) * sizeof *o);
    if (!o) return -1;
    out->owned = o;
    if (!b->p) wk_sb_str(b, "");
    if (b->oom) return -1;
    out->owned[out->n_owned++] = b->p;
    out->m[out->n++] = (eng_tmpl_msg){
        .role = role, .role_len = strlen(role), .content = b->p, .content_len = b->n};
    memset(b, 0, sizeof *b);
    return 0;
}

int wk_tools_render(const wk_tools *t, eng_tmpl_format f, const sch_message *msgs, size_t n,
                    wk_tool_msgs *out, char *msg, size_t msglen) {
    memset(out, 0, sizeof *out);
    out->m = calloc(n + 1, sizeof *out->m);
    if (!out->m) return SCH_E_NOMEM;
    int shown = t->mode != WK_TOOLS_OFF; /* the tools are shown */
    /* where the tools go: the system message (made if none), or -- llama3,
     * gemma2 (no system role) -- the first user message */
    int in_user = t->fmt == WK_TOOLS_LLAMA3 || f == ENG_TMPL_GEMMA2;
    int sys = n && msgs[0].role == SCH_ROLE_SYSTEM;
    int done_block = !shown;
    wk_sb b = {0};
    if (shown && !in_user && !sys) {
        wk_tools_block(t, &b);
        if (wk_msgs_push(out, "system", &b)) goto oom;
        done_block = 1;
    }
    for (size_t i = 0; i < n; i++) {
        const sch_message *m = &msgs[i];
        if (m->role == SCH_ROLE_TOOL) {
            if (t->fmt == WK_TOOLS_LLAMA3) {
                wk_sb_add(&b, m->content.ptr, m->content.len);
                if (wk_msgs_push(out, "ipython", &b)) goto oom;
                continue;
            }
            /* consecutive results: one user message */
            for (; i < n && msgs[i].role == SCH_ROLE_TOOL; i++) {
                wk_sb_str(&b, b.n ? "\n<tool_response>\n" : "<tool_response>\n");
                wk_sb_add(&b, msgs[i].content.ptr, msgs[i].content.len);
                wk_sb_str(&b, "\n</tool_response>");
            }
            i--;
            if (wk_msgs_push(out, "user", &b)) goto oom;
            continue;
        }
        const char *role = sch_role_name(m->role);
        if (!done_block &&
            ((in_user && m->role == SCH_ROLE_USER) || (!in_user && m->role == SCH_ROLE_SYSTEM))) {
            if (m->role == SCH_ROLE_SYSTEM) {
                wk_sb_add(&b, m->content.ptr, m->content.len);
                wk_sb_str(&b, "\n\n");
                wk_tools_block(t, &b);
            } else {
                wk_tools_block(t, &b);
                if (t->fmt != WK_TOOLS_LLAMA3) wk_sb_str(&b, "\n\n");
                wk_sb_add(&b, m->content.ptr, m->content.len);
            }
            done_block = 1;
        } else if (m->role == SCH_ROLE_ASSISTANT && m->tool_calls.ptr) {
            if (wk_calls_block(t, m, &b) != 0) {
                free(b.p);
                wk_tool_msgs_free(out);
                snprintf(msg, msglen,
                         "messages[%zu].tool_calls: not OpenAI's array of {id, type, function: "
                         "{name, arguments}}",
                         i);
                return SCH_E_BAD_VALUE;
            }
        } else {
            wk_sb_add(&b, m->content.ptr, m->content.len);
        }
        if (wk_msgs_push(out, role, &b)) goto oom;
    }
    return 0;
oom:
    free(b.p);
    wk_tool_msgs_free(out);
    return SCH_E_NOMEM;
}

void wk_tool_msgs_free(wk_tool_msgs *m) {
    for (int i = 0; i < m->n_owned; i++) free(m->owned[i]);
    free(m->owned);
    free(m->m);
    memset(m, 0, sizeof *m);
}

/* ---- reading calls --------------------------------------------------------- */

static char *wk_keep(wk_calls *c, char *s) {
    char **o = s ? realloc(c->owned, (c->n_owned + 1) * sizeof *o) : NULL;
    if (!o) {
        free(s);
        return NULL;
    }
    c->owned = o;
    c->owned[c->n_owned++] = s;
    return s;
}

/* Add the call in JSON object o (name of a known tool, arguments or
 * parameters an object).  0, or -1 when o is not such a call. */
static int wk_call_add(const wk_tools *t, json_t *o, const char *seed, int choice, wk_calls *c) {
    const char *name = json_string_value(json_object_get(o, "name"));
    json_t *args = json_object_get(o, "arguments");
    if (!args) args = json_object_get(o, "parameters");
    if (!json_is_object(o) || wk_tool_index(t, name) < 0 || !json_is_object(args)) return -1;
    if (c->n == SCH_MAX_TOOL_CALLS || (!t->parallel && c->n == 1)) return 0; /* the first only */
    sch_tool_call *x = realloc(c->calls, (c->n + 1) * sizeof *x);
    if (!x) return -1;
    c->calls = x;
    char id[40];
    uint64_t h = pl_fnv1a64(PL_FNV64_SEED, seed, strlen(seed));
    int pos[2] = {choice, (int)c->n};
    h = pl_fnv1a64(h, pos, sizeof pos);
    snprintf(id, sizeof id, "call_%016llx", (unsigned long long)h);
    char *sid = wk_keep(c, strdup(id)), *sname = wk_keep(c, strdup(name));
    char *sargs = wk_keep(c, json_dumps(args, JSON_COMPACT));
    if (!sid || !sname || !sargs) return -1;
    c->calls[c->n++] = (sch_tool_call){sch_str_c(sid), sch_str_c(sname), sch_str_c(sargs)};
    return 0;
}

static int wk_space(char ch) { return ch == ' ' || ch == '\n' || ch == '\t' || ch == '\r'; }

/* Append text[a, b) to the content. */
static void wk_content_add(wk_sb *b, const char *text, size_t a, size_t e) {
    if (e > a) wk_sb_add(b, text + a, e - a);
}

static const char wk_open[] = "<tool_call>", wk_close[] = "</tool_call>";

int wk_tools_read(const wk_tools *t, const char *text, size_t len, const char *id_seed, int choice,
                  wk_calls *out) {
    json_error_t je;
    memset(out, 0, sizeof *out);
    wk_sb content = {0};
    if (t->mode == WK_TOOLS_OFF) goto plain;
    size_t a = 0;
    while (a < len && wk_space(text[a])) a++;
    if (t->mode == WK_TOOLS_REQUIRED || t->mode == WK_TOOLS_NAMED ||
        (t->fmt == WK_TOOLS_LLAMA3 && a < len && text[a] == '{')) {
        /* the whole reply: one call, an array of them, or (llama3) calls
         * separated by ';' */
        json_t *j = json_loadb(text + a, len - a, JSON_DECODE_ANY, &je), *x;
        size_t i;
        if (json_is_array(j)) {
            json_array_foreach(j, i, x) if (wk_call_add(t, x, id_seed, choice, out)) break;
        } else if (j) {
            wk_call_add(t, j, id_seed, choice, out);
        } else if (t->fmt == WK_TOOLS_LLAMA3) {
            for (size_t s = a; s < len;) {
                const char *semi = memchr(text + s, ';', len - s);
                size_t e = semi ? (size_t)(semi - text) : len;
                json_t *o = json_loadb(text + s, e - s, 0, &je);
                int bad = !o || wk_call_add(t, o, id_seed, choice, out);
                json_decref(o);
                if (bad) break;
                s = e + 1;
            }
        }
        json_decref(j);
        if (!out->n) goto plain;
        goto done;
    }
    if (t->fmt == WK_TOOLS_LLAMA3) goto plain;
    /* tags: each <tool_call>...</tool_call> (the last may be unclosed) */
    size_t at = 0;
    for (;;) {
        const char *o = memmem(text + at, len - at, wk_open, sizeof wk_open - 1);
        if (!o) break;
        size_t s = (size_t)(o - text) + sizeof wk_open - 1;
        const char *cl = memmem(text + s, len - s, wk_close, sizeof wk_close - 1);
        size_t e = cl ? (size_t)(cl - text) : len;
        json_t *j = json_loadb(text + s, e - s, 0, &je);
        int ok = j && wk_call_add(t, j, id_seed, choice, out) == 0;
        json_decref(j);
        size_t seg_end = (size_t)(o - text);
        if (!ok) { /* not a call: it stays text */
            wk_content_add(&content, text, at, cl ? e + sizeof wk_close - 1 : len);
        } else {
            while (seg_end > at && wk_space(text[seg_end - 1])) seg_end--;
            wk_content_add(&content, text, at, seg_end);
        }
        at = cl ? e + sizeof wk_close - 1 : len;
        if (ok)
            while (at < len && wk_space(text[at])) at++;
    }
    if (!out->n) goto plain;
    wk_content_add(&content, text, at, len);
    goto done;
plain:
    for (size_t i = 0; i < out->n_owned; i++) free(out->owned[i]);
    free(out->owned);
    free(out->calls);
    memset(out, 0, sizeof *out);
    free(content.p);
    memset(&content, 0, sizeof content);
    wk_content_add(&content, text, 0, len); /* no call: all of it is text */
done:
    if (content.oom || !wk_keep(out, content.p ? content.p : strdup(""))) {
        wk_calls_free(out);
        return SCH_E_NOMEM;
    }
    out->content = out->owned[out->n_owned - 1];
    out->content_len = content.n;
    return 0;
}

void wk_calls_free(wk_calls *c) {
    for (size_t i = 0; i < c->n_owned; i++) free(c->owned[i]);
    free(c->owned);
    free(c->calls);
    memset(c, 0, sizeof *c);
}

size_t wk_tools_stream_safe(const wk_tools *t, const char *text, size_t len) {
    if (t->mode == WK_TOOLS_OFF) return len;
    if (t->mode != WK_TOOLS_AUTO) return 0; /* the reply is the call */
    if (t->fmt == WK_TOOLS_LLAMA3) {
        size_t a = 0;
        while (a < len && wk_space(text[a])) a++;
        return a == len || text[a] == '{' ? 0 : len;
    }
    size_t end = len;
    const char *o = memmem(text, len, wk_open, sizeof wk_open - 1);
    if (o) {
        end = (size_t)(o - text);
    } else { /* a partial opening tag at the end */
        for (size_t k = sizeof wk_open - 2; k >= 1; k--)
            if (len >= k && !memcmp(text + len - k, wk_open, k)) {
                end = len - k;
                break;
            }
    }
    while (end > 0 && wk_space(text[end - 1])) end--; /* whitespace before a call is dropped */
    return end;
}
