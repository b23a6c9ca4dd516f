/*
 * wk_render_tool.c -- a turn's messages and tools rendered by a Jinja chat
 * template the way the worker renders a model file's own template: the
 * worker's conversion (wk_tools_parse, wk_tools_file_msgs), the engine's
 * variables (eng_tmpl_file_context, no tokenizer) and eng_jinja.  Driven by
 * tests/py/test_jinja_templates.py, which checks it against jinja2.
 *   wk_render_tool TEMPLATE REQUEST.json [NOW]
 * REQUEST.json: {"messages": [OpenAI's chat messages: content a string or
 * null, assistant tool_calls with arguments as JSON text, tool messages
 * with tool_call_id], "tools": [...] or null, "tool_choice": ... (optional),
 * "add_generation_prompt": bool, "vars": {"bos_token": ..., "eos_token":
 * ..., any other template variable}, "args_string": true to keep calls'
 * arguments the JSON string (as for eng_tmpl_file_tool_args_string)}.
 * NOW pins strftime_now's clock.
 * The render goes to stdout, exit 0; a conversion, compile or render
 * error prints "E<code> <message>" and exits 1; usage or I/O errors exit 2.
 *   wk_render_tool probe TEMPLATE
 * prints 1 when the template writes tool use itself
 * (eng_tmpl_file_renders_tools, over a bytes-only vocabulary), else 0;
 * exit 1 when it does not compile.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eng_jinja.h"
#include "eng_template.h"
#include "pl_err.h"
#include "wk_tools.h"

static sch_str dump_or_absent(json_t *j) {
    if (!j || json_is_null(j)) return (sch_str){NULL, 0};
    char *s = json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY); /* leaked: a one-shot tool */
    return s ? sch_str_c(s) : (sch_str){NULL, 0};
}

static int role_of(const char *s, sch_role *r) {
    static const char *const names[] = {"system", "user", "assistant", "tool"};
    for (int i = 0; i < 4; i++)
        if (s && !strcmp(s, names[i])) return *r = (sch_role)i, 0;
    return -1;
}

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = NULL;
    size_t n = 0, cap = 0, r;
    do {
        if (n + 65536 > cap) {
            char *p = realloc(buf, cap = n + 65537);
            if (!p) break;
            buf = p;
        }
        r = fread(buf + n, 1, 65536, f);
        n += r;
    } while (r);
    fclose(f);
    if (buf) buf[n] = 0;
    return buf;
}

/* eng_tmpl_file_renders_tools over a vocabulary of bytes, <s> and </s>. */
static int probe(const char *path) {
    static char bytes[256][8];
    const char *toks[260];
    float scores[260] = {0};
    int32_t types[260];
    int n = 0;
    toks[n] = "<unk>", types[n++] = ENG_TOK_TYPE_UNKNOWN;
    toks[n] = "<s>", types[n++] = ENG_TOK_TYPE_CONTROL;
    toks[n] = "</s>", types[n++] = ENG_TOK_TYPE_CONTROL;
    for (int b = 0; b < 256; b++) {
        snprintf(bytes[b], sizeof bytes[b], "<0x%02X>", b);
        toks[n] = bytes[b], types[n++] = ENG_TOK_TYPE_BYTE;
    }
    eng_tok_spec sp = {.model = ENG_TOK_MODEL_SPM,
                       .n_tokens = n,
                       .tokens = toks,
                       .scores = scores,
                       .types = types,
                       .bos = 1,
                       .eos = 2,
                       .eot = -1,
                       .unk = 0,
                       .pad = -1,
                       .add_bos = false};
    eng_tok *t = NULL;
    eng_tmpl_file *f = NULL;
    char err[PL_ERR_LEN], *src = slurp(path);
    if (!src || eng_tok_load_spec(&sp, &t, err, sizeof err) != 0) return 2;
    int rc = eng_tmpl_file_compile(src, strlen(src), t, &f, err, sizeof err);
    if (rc) printf("E%d %s", rc, err);
    else
        printf("%d %d\n", eng_tmpl_file_renders_tools(f) ? 1 : 0,
               eng_tmpl_file_tool_args_string(f) ? 1 : 0);
    eng_tmpl_file_free(f);
    eng_tok_free(t);
    free(src);
    return rc ? 1 : 0;
}

int main(int argc, char **argv) {
    json_error_t je;
    if (argc == 3 && !strcmp(argv[1], "probe")) return probe(argv[2]);
    if (argc < 3) {
        fprintf(stderr, "usage: wk_render_tool TEMPLATE REQUEST.json [NOW]\n");
        return 2;
    }
    char *src = slurp(argv[1]);
    json_t *req = json_load_file(argv[2], 0, &je);
    json_t *msgs = json_object_get(req, "messages"), *vars = json_object_get(req, "vars"), *x;
    if (!src || !json_is_array(msgs)) {
        fprintf(stderr, "wk_render_tool: cannot read %s\n", src ? argv[2] : argv[1]);
        return 2;
    }
    size_t n = json_array_size(msgs), i;
    sch_message *sm = calloc(n + 1, sizeof *sm);
    json_array_foreach(msgs, i, x) {
        if (role_of(json_string_value(json_object_get(x, "role")), &sm[i].role)) {
            fprintf(stderr, "messages[%zu]: unknown role\n", i);
            return 2;
        }
        json_t *c = json_object_get(x, "content");
        if (json_is_string(c))
            sm[i].content = (sch_str){json_string_value(c), json_string_length(c)};
        sm[i].tool_calls = dump_or_absent(json_object_get(x, "tool_calls"));
        json_t *id = json_object_get(x, "tool_call_id");
        if (json_is_string(id)) sm[i].tool_call_id = sch_str_c(json_string_value(id));
    }
    sch_params p;
    sch_params_default(&p);
    p.tools = dump_or_absent(json_object_get(req, "tools"));
    p.tool_choice = dump_or_absent(json_object_get(req, "tool_choice"));
    wk_tools t;
    wk_tool_msgs tm;
    char msg[PL_ERR_LEN], *tools_json = NULL, *ctx = NULL, *out = NULL;
    size_t ctx_n = 0, out_n = 0;
    eng_jinja *j = NULL;
    int rc = wk_tools_parse(&p, WK_TOOLS_TAGS, &t, msg, sizeof msg);
    int decode = !json_is_true(json_object_get(req, "args_string"));
    if (!rc) rc = wk_tools_file_msgs(&t, sm, n, decode, &tm, &tools_json, msg, sizeof msg);
    if (!rc)
        rc = eng_tmpl_file_context(
            NULL, tm.m, tm.n, json_is_true(json_object_get(req, "add_generation_prompt")),
            tools_json, json_string_value(json_object_get(vars, "bos_token")),
            json_string_value(json_object_get(vars, "eos_token")), &ctx, &ctx_n, msg, sizeof msg);
    if (rc) {
        printf("E%d %s", rc, msg);
        return 1;
    }
    /* the other variables (firefunction-v2's functions, datetime...) */
    const char *k;
    json_t *v;
    size_t cap = ctx_n + 1;
    json_object_foreach(vars, k, v) {
        if (!strcmp(k, "bos_token") || !strcmp(k, "eos_token")) continue;
        char *vs = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
        json_t *key = json_string(k);
        char *ks = json_dumps(key, JSON_ENCODE_ANY);
        char *nc = vs && ks ? realloc(ctx, cap += strlen(ks) + strlen(vs) + 2) : NULL;
        if (!nc) return 2;
        ctx = nc;
        ctx_n = (size_t)sprintf(ctx + ctx_n - 1, ",%s:%s}", ks, vs) + ctx_n - 1;
        free(vs);
        free(ks);
        json_decref(key);
    }
    eng_jinja_limits lim = {.now = argc > 3 ? strtoll(argv[3], NULL, 10) : 0};
    rc = eng_jinja_compile(src, strlen(src), &j, msg, sizeof msg);
    if (!rc) rc = eng_jinja_render(j, ctx, ctx_n, &lim, &out, &out_n, msg, sizeof msg);
    if (rc) printf("E%d %s", rc, msg);
    else fwrite(out, 1, out_n, stdout);
    free(out);
    free(ctx);
    free(tools_json);
    eng_jinja_free(j);
    wk_tool_msgs_free(&tm);
    wk_tools_free(&t);
    free(sm);
    free(src);
    json_decref(req);
    return rc ? 1 : 0;
}
