/*
 * wk_tools_file.c -- a turn's tools, calls and results as the variables of
 * the model file's own chat template (wk_tools.h, "The file's template"):
 * the template writes them itself, as transformers' apply_chat_template
 * (and vLLM, llama.cpp) would have it, instead of parley's own text.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wk_tools.h"

/* Keep s (malloc'd) with out; NULL when s is NULL or out of memory. */
static char *wk_own(wk_tool_msgs *out, char *s) {
    char **o = s ? realloc(out->owned, (size_t)(out->n_owned + 1) * sizeof *o) : NULL;
    if (!o) {
        free(s);
        return NULL;
    }
    out->owned = o;
    out->owned[out->n_owned++] = s;
    return s;
}

/* An assistant message's OpenAI tool_calls (JSON text) as the template's
 * tool_calls: each call's function.arguments, a JSON string, becomes the
 * object it encodes (templates write arguments with tojson or iterate
 * them, as vLLM and llama.cpp give them) unless !decode; arguments that
 * are not a JSON object stay the string.  NULL when calls is not OpenAI's array of
 * {function: {name, ...}} (or out of memory: *oom). */
static json_t *wk_calls_for_template(const sch_str *calls, int decode, int *oom) {
    json_error_t je;
    json_t *a = json_loadb(calls->ptr, calls->len, 0, &je), *c;
    size_t i;
    *oom = 0;
    if (!json_is_array(a)) goto bad;
    json_array_foreach(a, i, c) {
        json_t *fn = json_object_get(c, "function");
        if (!json_is_object(fn) || !json_is_string(json_object_get(fn, "name"))) goto bad;
        const char *args = json_string_value(json_object_get(fn, "arguments"));
        json_t *obj = args && decode ? json_loads(args, 0, &je) : NULL;
        if (json_is_object(obj) && json_object_set_new(fn, "arguments", obj) != 0) {
            *oom = 1;
            goto bad;
        }
        if (!json_is_object(obj)) json_decref(obj);
    }
    return a;
bad:
    json_decref(a);
    return NULL;
}

/* The name of the call with id among the assistant calls before msgs[i]
 * (the latest first), or NULL. */
static const char *wk_call_name(json_t *const *calls, size_t i, const sch_str *id) {
    while (id->ptr && i-- > 0) {
        size_t k;
        json_t *c;
        json_array_foreach(calls[i], k, c) {
            const char *cid = json_string_value(json_object_get(c, "id"));
            if (cid && strlen(cid) == id->len && !memcmp(cid, id->ptr, id->len))
                return json_string_value(json_object_get(json_object_get(c, "function"), "name"));
        }
    }
    return NULL;
}

int wk_tools_file_msgs(const wk_tools *t, const sch_message *msgs, size_t n, int decode_args,
                       wk_tool_msgs *out, char **tools_json, char *msg, size_t msglen) {
    int rc = SCH_E_NOMEM, oom;
    memset(out, 0, sizeof *out);
    *tools_json = NULL;
    json_t **calls = calloc(n + 1, sizeof *calls);
    out->m = calloc(n + 1, sizeof *out->m);
    if (!calls || !out->m) goto done;
    for (size_t i = 0; i < n; i++) {
        const sch_message *m = &msgs[i];
        const char *role = sch_role_name(m->role);
        eng_tmpl_msg *e = &out->m[out->n++];
        *e = (eng_tmpl_msg){.role = role,
                            .role_len = strlen(role),
                            .content = m->content.ptr ? m->content.ptr : "",
                            .content_len = m->content.len};
        if (m->role == SCH_ROLE_ASSISTANT && m->tool_calls.ptr) {
            if (!(calls[i] = wk_calls_for_template(&m->tool_calls, decode_args, &oom))) {
                if (oom) goto done;
                snprintf(msg, msglen,
                         "messages[%zu].tool_calls: not OpenAI's array of {id, type, function: "
                         "{name, arguments}}",
                         i);
                rc = SCH_E_BAD_VALUE;
                goto done;
            }
            char *txt = wk_own(out, json_dumps(calls[i], JSON_COMPACT));
            if (!txt) goto done;
            e->tool_calls = txt;
            e->tool_calls_len = strlen(txt);
        }
        if (m->role == SCH_ROLE_TOOL && m->tool_call_id.ptr) {
            e->tool_call_id = m->tool_call_id.ptr;
            e->tool_call_id_len = m->tool_call_id.len;
            const char *name = wk_call_name(calls, i, &m->tool_call_id);
            if (name && !(e->name = wk_own(out, strdup(name)))) goto done;
            e->name_len = name ? strlen(name) : 0;
        }
    }
    if (t->mode != WK_TOOLS_OFF && !(*tools_json = json_dumps(t->tools, JSON_COMPACT))) goto done;
    rc = 0;
done:
    for (size_t i = 0; calls && i < n; i++) json_decref(calls[i]);
    free(calls);
    if (rc) wk_tool_msgs_free(out);
    return rc;
}
