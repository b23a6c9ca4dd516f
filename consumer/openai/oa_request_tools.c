/*
 * oa_request_tools.c -- the two request fields with a structure of their
 * own: response_format (text, json_object, json_schema, and parley's regex
 * and grammar) and tools with tool_choice and parallel_tool_calls.  Both
 * become the wire's JSON text; the worker compiles them.
 */
#define _POSIX_C_SOURCE 200809L
#include "oa_request.h"
#include "pl_err.h"

#include <stdio.h>
#include <string.h>

/* response_format: text, json_object, json_schema {name, schema, strict,
 * description}, and parley's extensions regex {regex} and grammar
 * {grammar} (a Lark grammar).  The schema goes on the wire as compact
 * JSON text.  strict: parley always enforces the schema (true or false). */
int oa_response_format(oa_chat *c, json_t *rf, oa_fault *f) {
    static const char *P = "response_format";
    sch_response_format *out = &c->turn.params.response_format;
    if (!rf || json_is_null(rf)) return 0;
    json_t *type = json_object_get(rf, "type");
    if (!json_is_object(rf) || !json_is_string(type))
        return oa_fail(f, P, NULL, "response_format must be an object with a string \"type\"");
    const char *t = json_string_value(type), *k;
    json_t *v;
    const char *member = NULL; /* the one member beside type */
    if (!strcmp(t, "text")) out->type = SCH_RF_TEXT;
    else if (!strcmp(t, "json_object")) out->type = SCH_RF_JSON_OBJECT;
    else if (!strcmp(t, "json_schema")) out->type = SCH_RF_JSON_SCHEMA, member = "json_schema";
    else if (!strcmp(t, "regex")) out->type = SCH_RF_REGEX, member = "regex";
    else if (!strcmp(t, "grammar")) out->type = SCH_RF_GRAMMAR, member = "grammar";
    else
        return oa_fail(f, "response_format.type", "unsupported_value",
                       "response_format.type must be text, json_object, json_schema, regex or "
                       "grammar, not \"%.40s\"",
                       t);
    json_object_foreach(rf, k, v) {
        if (!strcmp(k, "type") || (member && !strcmp(k, member))) continue;
        char p[96];
        snprintf(p, sizeof p, "response_format.%.60s", k);
        return oa_fail(f, p, "unknown_parameter", "%s is not a member of a %s response_format", p,
                       t);
    }
    if (!member) return 0;
    json_t *m = json_object_get(rf, member);
    char p[64];
    snprintf(p, sizeof p, "response_format.%s", member);
    if (out->type != SCH_RF_JSON_SCHEMA) {
        if (!json_is_string(m) || json_string_length(m) == 0)
            return oa_fail(f, p, NULL, "%s must be a non-empty string", p);
        out->spec = (sch_str){json_string_value(m), json_string_length(m)};
        return 0;
    }
    if (!json_is_object(m)) return oa_fail(f, p, NULL, "%s must be an object", p);
    json_object_foreach(m, k, v) {
        char q[96];
        snprintf(q, sizeof q, "response_format.json_schema.%.40s", k);
        if (!strcmp(k, "name")) {
            size_t n = json_string_length(v);
            if (!json_is_string(v) || n == 0 || n > 64 ||
                strspn(json_string_value(v), "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                             "0123456789_-") != n)
                return oa_fail(f, q, NULL, "%s must be 1..64 characters of a-z, A-Z, 0-9, _ and -",
                               q);
        } else if (!strcmp(k, "strict")) {
            if (!json_is_null(v) && !json_is_boolean(v))
                return oa_fail(f, q, NULL, "%s must be a boolean", q);
        } else if (!strcmp(k, "description")) {
            if (!json_is_null(v) && !json_is_string(v))
                return oa_fail(f, q, NULL, "%s must be a string", q);
        } else if (!strcmp(k, "schema")) {
            if (!json_is_object(v)) return oa_fail(f, q, NULL, "%s must be an object", q);
        } else {
            return oa_fail(f, q, "unknown_parameter", "%s is not a member of json_schema", q);
        }
    }
    if (!json_is_string(json_object_get(m, "name")))
        return oa_fail(f, "response_format.json_schema.name", NULL,
                       "response_format.json_schema.name is required");
    json_t *schema = json_object_get(m, "schema");
    if (!schema) { /* OpenAI: no schema is any JSON (parley: any JSON object) */
        out->type = SCH_RF_JSON_OBJECT;
        return 0;
    }
    char *txt = oa_keep(c, json_dumps(schema, JSON_COMPACT | JSON_ENSURE_ASCII));
    if (!txt) return oa_fail(f, NULL, NULL, "out of memory");
    out->spec = sch_str_c(txt);
    return 0;
}

/* tools (OpenAI's array of {type "function", function: {name,
 * description, parameters, strict}}), tool_choice and parallel_tool_calls,
 * as the wire's JSON text.  A tool_choice that calls for a function needs
 * tools (the named one among them). */
int oa_tools(oa_chat *c, json_t *o, oa_fault *f) {
    json_t *tools = json_object_get(o, "tools"), *choice = json_object_get(o, "tool_choice");
    json_t *par = json_object_get(o, "parallel_tool_calls");
    size_t i;
    json_t *t;
    int have = tools && !json_is_null(tools);
    if (have && !json_is_array(tools))
        return oa_fail(f, "tools", NULL, "tools must be an array of 1..%d tools", SCH_MAX_TOOLS);
    if (have) { /* the wire's JSON text, checked by the rule the worker applies too */
        char *txt = oa_keep(c, json_dumps(tools, JSON_COMPACT));
        if (!txt) return oa_fail(f, NULL, NULL, "out of memory");
        char msg[PL_ERR_LEN], p[32];
        int at;
        if (sch_tools_check(txt, strlen(txt), &at, msg, sizeof msg) != 0) {
            if (at >= 0) snprintf(p, sizeof p, "tools[%d]", at);
            return oa_fail(f, at >= 0 ? p : "tools", NULL, "%s", msg);
        }
        c->turn.params.tools = sch_str_c(txt);
    }
    if (choice && !json_is_null(choice)) {
        const char *s = json_string_value(choice);
        const char *name =
            json_string_value(json_object_get(json_object_get(choice, "function"), "name"));
        const char *type = json_string_value(json_object_get(choice, "type"));
        int found = 0;
        json_array_foreach(tools, i, t) found |=
            name && !strcmp(name, json_string_value(
                                      json_object_get(json_object_get(t, "function"), "name")));
        if (s ? strcmp(s, "none") && strcmp(s, "auto") && strcmp(s, "required")
              : !json_is_object(choice) || !type || strcmp(type, "function") || !name)
            return oa_fail(f, "tool_choice", NULL,
                           "tool_choice must be \"none\", \"auto\", \"required\" or "
                           "{\"type\": \"function\", \"function\": {\"name\": ...}}");
        if ((!s || strcmp(s, "none")) && !have)
            return oa_fail(f, "tool_choice", NULL, "tool_choice needs tools");
        if (name && !found)
            return oa_fail(f, "tool_choice", NULL,
                           "tool_choice names '%.64s', which is not "
                           "among tools",
                           name);
        char *txt = oa_keep(c, json_dumps(choice, JSON_COMPACT | JSON_ENCODE_ANY));
        if (!txt) return oa_fail(f, NULL, NULL, "out of memory");
        c->turn.params.tool_choice = sch_str_c(txt);
    }
    if (par && !json_is_null(par)) {
        if (!json_is_boolean(par))
            return oa_fail(f, "parallel_tool_calls", NULL, "parallel_tool_calls must be a boolean");
        if (!have)
            return oa_fail(f, "parallel_tool_calls", NULL,
                           "parallel_tool_calls is only allowed with tools");
        c->turn.params.parallel_tool_calls = json_is_true(par);
    }
    return 0;
}
