/*
 * sch_tools.c -- the one check of OpenAI's `tools` array (params.tools,
 * spec 1.2), shared by the gateway and the worker (sch.h).
 */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "pl_err.h"
#include "sch.h"

/* OpenAI's function name rule: 1..64 of [A-Za-z0-9_-]. */
static int sch_fn_name_ok(const char *s) {
    size_t n = s ? strlen(s) : 0;
    return n >= 1 && n <= 64 &&
           strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-") == n;
}

/* The name of tool j (NULL when it has none). */
static const char *sch_fn_name(const json_t *tools, size_t j) {
    return json_string_value(
        json_object_get(json_object_get(json_array_get(tools, j), "function"), "name"));
}

/* One member of a function object: 1 when its value is allowed. */
static int sch_fn_member_ok(const char *key, const json_t *v) {
    if (!strcmp(key, "name")) return 1; /* checked by sch_fn_name_ok */
    if (json_is_null(v))
        return !strcmp(key, "description") || !strcmp(key, "parameters") || !strcmp(key, "strict");
    return (!strcmp(key, "description") && json_is_string(v)) ||
           (!strcmp(key, "parameters") && json_is_object(v)) ||
           (!strcmp(key, "strict") && json_is_boolean(v));
}

static int sch_tools_walk(const json_t *tools, int *at, char *err, size_t errlen) {
    size_t i, n = json_array_size(tools);
    const json_t *tool;
    if (!json_is_array(tools) || n == 0 || n > SCH_MAX_TOOLS)
        return pl_errf(err, errlen, SCH_E_BAD_CONSTRAINT, "tools: an array of 1..%d tools",
                       SCH_MAX_TOOLS);
    json_array_foreach(tools, i, tool) {
        const json_t *fn = json_object_get(tool, "function");
        const char *type = json_string_value(json_object_get(tool, "type"));
        const char *name = json_string_value(json_object_get(fn, "name")), *key;
        const json_t *v;
        *at = (int)i;
        if (!json_is_object(tool) || !type || strcmp(type, "function") || !json_is_object(fn))
            return pl_errf(err, errlen, SCH_E_BAD_CONSTRAINT,
                           "tools[%zu]: not {\"type\": \"function\", \"function\": {...}}", i);
        json_object_foreach((json_t *)fn, key, v) {
            if (!sch_fn_member_ok(key, v))
                return pl_errf(err, errlen, SCH_E_BAD_CONSTRAINT,
                               "tools[%zu].function.%.40s: not a string description, an object "
                               "parameters or a boolean strict",
                               i, key);
        }
        if (!sch_fn_name_ok(name))
            return pl_errf(err, errlen, SCH_E_BAD_CONSTRAINT,
                           "tools[%zu].function.name: 1..64 characters of a-z, A-Z, 0-9, _ and -",
                           i);
        for (size_t j = 0; j < i; j++)
            if (!strcmp(sch_fn_name(tools, j), name)) {
                *at = -1;
                return pl_errf(err, errlen, SCH_E_BAD_CONSTRAINT, "tools: the function '%s' twice",
                               name);
            }
    }
    *at = -1;
    return SCH_OK;
}

int sch_tools_check(const char *json, size_t len, int *at, char *err, size_t errlen) {
    json_error_t je;
    *at = -1;
    json_t *tools = json ? json_loadb(json, len, JSON_REJECT_DUPLICATES, &je) : NULL;
    if (!tools)
        return pl_errf(err, errlen, SCH_E_BAD_CONSTRAINT, "tools: not JSON (%s)",
                       json ? je.text : "absent");
    int rc = sch_tools_walk(tools, at, err, errlen);
    json_decref(tools);
    return rc;
}
