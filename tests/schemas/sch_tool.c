/*
 * sch_tool.c -- command-line window onto the schemas codec, used by the
 * Python interop tests (tests/py/test_schemas_*.py) and by people poking at
 * records by hand.
 *
 *   sch_tool decode KIND [--limit NAME=N]... FILE|-
 *       decode one record; print {"ok":true,"value":VIEW} or
 *       {"ok":false,"code":"E_...","message":"..."} (exit 0 either way)
 *   sch_tool reencode KIND FILE|-
 *       decode, encode again, write the msgpack bytes to stdout (exit 2 and
 *       the error JSON on stderr when the decode fails)
 *   sch_tool sample KIND SEED
 *       build a pseudo-random valid record in C, print
 *       {"value":VIEW,"hex":"<msgpack>"}: VIEW comes from the struct, the
 *       bytes from the encoder, so a reader of the bytes can check both
 *   sch_tool codes | limits
 *       the error-code table / the default limits as JSON
 * KIND is turn, chunk, result or dead; VIEW is sch_json.h's format.
 */
#include "sch_json.h"
#include "sch_tool.h"

#include <stdlib.h>
#include <string.h>

static int usage(void) {
    fputs("usage: sch_tool decode KIND [--limit NAME=N]... FILE|-\n"
          "       sch_tool reencode KIND FILE|-\n"
          "       sch_tool sample KIND SEED\n"
          "       sch_tool codes | limits\n"
          "KIND: turn chunk result dead cancel\n",
          stderr);
    return 1;
}

static int kind_of(const char *s) {
    static const char *const kinds[] = {"turn", "chunk", "result", "dead", "cancel"};
    for (int i = 0; i < 5; i++)
        if (!strcmp(s, kinds[i])) return i;
    return -1;
}

/* Read a whole file ("-" = stdin) into a malloc'd buffer. */
static char *read_all(const char *path, size_t *len) {
    FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
    size_t cap = 1 << 16, n = 0;
    char *b = NULL;
    if (!f) return NULL;
    for (;;) {
        char *nb = realloc(b, cap);
        if (!nb) {
            free(b);
            b = NULL;
            break;
        }
        b = nb;
        n += fread(b + n, 1, cap - n, f);
        if (n < cap) break;
        cap *= 2;
    }
    if (f != stdin) fclose(f);
    *len = n;
    return b;
}

/* Named limit fields, for --limit and `limits`. */
typedef struct lim_field {
    const char *name; /* field name in sch_limits */
    size_t off;       /* offset */
    int is32;         /* uint32_t (else size_t) */
} lim_field;

static const lim_field lim_fields[] = {
    {"max_total_bytes", offsetof(sch_limits, max_total_bytes), 0},
    {"max_depth", offsetof(sch_limits, max_depth), 1},
    {"max_objects", offsetof(sch_limits, max_objects), 0},
    {"max_messages", offsetof(sch_limits, max_messages), 0},
    {"max_content_bytes", offsetof(sch_limits, max_content_bytes), 0},
    {"max_stop", offsetof(sch_limits, max_stop), 0},
    {"max_stop_bytes", offsetof(sch_limits, max_stop_bytes), 0},
    {"max_tokens", offsetof(sch_limits, max_tokens), 1},
    {"max_prompt_tokens", offsetof(sch_limits, max_prompt_tokens), 0},
    {"max_id_bytes", offsetof(sch_limits, max_id_bytes), 0},
    {"max_text_bytes", offsetof(sch_limits, max_text_bytes), 0},
    {"max_headers", offsetof(sch_limits, max_headers), 0},
    {"max_constraint_bytes", offsetof(sch_limits, max_constraint_bytes), 0},
};
#define N_LIM (sizeof lim_fields / sizeof lim_fields[0])

static int set_limit(sch_limits *lim, const char *arg) {
    const char *eq = strchr(arg, '=');
    if (!eq) return -1;
    for (size_t i = 0; i < N_LIM; i++) {
        if (strlen(lim_fields[i].name) != (size_t)(eq - arg) ||
            strncmp(lim_fields[i].name, arg, (size_t)(eq - arg)))
            continue;
        unsigned long long v = strtoull(eq + 1, NULL, 10);
        char *p = (char *)lim + lim_fields[i].off;
        if (lim_fields[i].is32) *(uint32_t *)p = (uint32_t)v;
        else *(size_t *)p = (size_t)v;
        return 0;
    }
    return -1;
}

static void print_limits(void) {
    sch_limits lim;
    sch_limits_default(&lim);
    fputc('{', stdout);
    for (size_t i = 0; i < N_LIM; i++) {
        const char *p = (const char *)&lim + lim_fields[i].off;
        unsigned long long v = lim_fields[i].is32 ? *(const uint32_t *)p : *(const size_t *)p;
        printf("%s\"%s\":%llu", i ? "," : "", lim_fields[i].name, v);
    }
    puts("}");
}

static void print_codes(void) {
    fputc('[', stdout);
    for (size_t i = 0; i < sch_err_count(); i++) {
        int c = sch_err_code_at(i);
        printf("%s{\"code\":%d,\"name\":\"%s\",\"description\":\"%s\"}", i ? "," : "", c,
               sch_err_name(c), sch_err_describe(c));
    }
    puts("]");
}

static void print_error(FILE *f, int rc, const char *msg) {
    sch_str m = sch_str_c(msg);
    fprintf(f, "{\"ok\":false,\"code\":\"%s\",\"message\":", sch_err_name(rc));
    sch_json_str(f, &m);
    fputs("}\n", f);
}

/* Decode buf as kind; on success write the view to json or re-encode into
 * out (when out != NULL).  Returns the decode (or encode) status. */
static int run_decode(int kind, const char *buf, size_t len, const sch_limits *lim, sch_buf *out,
                      FILE *json, char *err, size_t errlen) {
    int rc;
    switch (kind) {
    case 0: {
        sch_turn x;
        if ((rc = sch_turn_decode(buf, len, lim, &x, err, errlen))) return rc;
        if (out) rc = sch_turn_encode(&x, out, err, errlen);
        else sch_json_turn(json, &x);
        sch_turn_free(&x);
        return rc;
    }
    case 1: {
        sch_chunk x;
        if ((rc = sch_chunk_decode(buf, len, lim, &x, err, errlen))) return rc;
        if (out) rc = sch_chunk_encode(&x, out, err, errlen);
        else sch_json_chunk(json, &x);
        sch_chunk_free(&x);
        return rc;
    }
    case 2: {
        sch_result x;
        if ((rc = sch_result_decode(buf, len, lim, &x, err, errlen))) return rc;
        if (out) rc = sch_result_encode(&x, out, err, errlen);
        else sch_json_result(json, &x);
        sch_result_free(&x);
        return rc;
    }
    case 4: {
        sch_cancel x;
        if ((rc = sch_cancel_decode(buf, len, lim, &x, err, errlen))) return rc;
        if (out) rc = sch_cancel_encode(&x, out, err, errlen);
        else sch_json_cancel(json, &x);
        sch_cancel_free(&x);
        return rc;
    }
    default: {
        sch_dead x;
        if ((rc = sch_dead_decode(buf, len, lim, &x, err, errlen))) return rc;
        if (out) rc = sch_dead_encode(&x, out, err, errlen);
        else sch_json_dead(json, &x);
        sch_dead_free(&x);
        return rc;
    }
    }
}

static int cmd_decode(int kind, int argc, char **argv, int reencode) {
    sch_limits lim;
    char err[512] = "";
    const char *path = NULL;
    size_t len;
    sch_limits_default(&lim);
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--limit") && i + 1 < argc) {
            if (set_limit(&lim, argv[++i])) {
                fprintf(stderr, "sch_tool: bad limit %s\n", argv[i]);
                return 1;
            }
        } else if (!path) {
            path = argv[i];
        } else {
            return usage();
        }
    }
    if (!path) return usage();
    char *buf = read_all(path, &len);
    if (!buf) {
        fprintf(stderr, "sch_tool: cannot read %s\n", path);
        return 1;
    }
    sch_buf out;
    char *view = NULL;
    size_t view_len = 0;
    FILE *json = reencode ? NULL : open_memstream(&view, &view_len);
    sch_buf_init(&out);
    if (!reencode && !json) {
        free(buf);
        return 1;
    }
    int rc = run_decode(kind, buf, len, &lim, reencode ? &out : NULL, json, err, sizeof err);
    free(buf);
    if (json) fclose(json);
    if (rc) {
        print_error(reencode ? stderr : stdout, rc, err);
    } else if (reencode) {
        fwrite(out.data, 1, out.len, stdout);
    } else {
        printf("{\"ok\":true,\"value\":%s}\n", view);
    }
    free(view);
    sch_buf_free(&out);
    return rc && reencode ? 2 : 0;
}

int main(int argc, char **argv) {
    if (argc < 2) return usage();
    if (!strcmp(argv[1], "codes")) {
        print_codes();
        return 0;
    }
    if (!strcmp(argv[1], "limits")) {
        print_limits();
        return 0;
    }
    if (argc < 3) return usage();
    int kind = kind_of(argv[2]);
    if (kind < 0) return usage();
    if (!strcmp(argv[1], "decode")) return cmd_decode(kind, argc - 3, argv + 3, 0);
    if (!strcmp(argv[1], "reencode")) return cmd_decode(kind, argc - 3, argv + 3, 1);
    if (!strcmp(argv[1], "sample") && argc == 4)
        return sch_tool_sample(kind, strtoull(argv[3], NULL, 0));
    return usage();
}
