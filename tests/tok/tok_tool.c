/*
 * tok_tool.c -- a small CLI over the tokenizer and chat templates, driven
 * by tests/py/test_tok_*.py and tests/bench/bench_tok.py.
 *
 * Text travels hex-encoded (one item per line), so arbitrary bytes --
 * invalid UTF-8, CR, NUL -- survive the pipe unchanged.
 *   tok_tool encode MODEL [special] [bos]  stdin: hex text; stdout: ids
 *   tok_tool decode MODEL [special]        stdin: ids; stdout: hex text
 *                                          (also checks the streaming
 *                                          decoder: every chunk valid UTF-8,
 *                                          chunks concatenate to the decode)
 *   tok_tool render MODEL FORMAT|auto GEN  stdin: one conversation per line,
 *                                          "hexrole:hexcontent,..." ;
 *                                          stdout: "T hex" + "I ids" or "E msg"
 *   tok_tool detect MODEL [OVERRIDE]       prints the chosen format or the error
 *   tok_tool recognise FILE                format of a Jinja template file
 *   tok_tool bench MODEL FILE [REPS]       encode FILE, print tokens and MB/s
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "eng_gguf.h"
#include "eng_template.h"
#include "eng_tok.h"

static int hexval(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Decodes hex s[0..n) into out (n/2 bytes); returns bytes or -1. */
static long unhex(const char *s, size_t n, char *out) {
    if (n % 2) return -1;
    for (size_t i = 0; i < n; i += 2) {
        int a = hexval(s[i]), b = hexval(s[i + 1]);
        if (a < 0 || b < 0) return -1;
        out[i / 2] = (char)(a * 16 + b);
    }
    return (long)(n / 2);
}

static void puthex(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) printf("%02x", (unsigned char)s[i]);
}

static int valid_utf8(const unsigned char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        unsigned c = s[i];
        int k = c < 0x80                   ? 1
                : (c >= 0xC2 && c <= 0xDF) ? 2
                : (c >= 0xE0 && c <= 0xEF) ? 3
                : (c >= 0xF0 && c <= 0xF4) ? 4
                                           : 0;
        if (!k || i + (size_t)k > n) return 0;
        for (int j = 1; j < k; j++)
            if ((s[i + j] & 0xC0) != 0x80) return 0;
        if (k == 3 && ((c == 0xE0 && s[i + 1] < 0xA0) || (c == 0xED && s[i + 1] > 0x9F))) return 0;
        if (k == 4 && ((c == 0xF0 && s[i + 1] < 0x90) || (c == 0xF4 && s[i + 1] > 0x8F))) return 0;
        i += (size_t)k;
    }
    return 1;
}

static char *line_buf;
static size_t line_cap;

static ssize_t next_line(void) {
    ssize_t n = getline(&line_buf, &line_cap, stdin);
    if (n > 0 && line_buf[n - 1] == '\n') line_buf[--n] = 0;
    return n;
}

static int cmd_encode(eng_tok *t, int flags) {
    char err[256];
    ssize_t n;
    char *text = NULL;
    int32_t *ids = NULL;
    while ((n = next_line()) >= 0) {
        text = realloc(text, (size_t)n / 2 + 1);
        long tl = unhex(line_buf, (size_t)n, text);
        if (tl < 0) return fprintf(stderr, "bad hex\n"), 1;
        int cnt = eng_tok_count(t, text, (size_t)tl, flags, err, sizeof err);
        if (cnt < 0) return fprintf(stderr, "encode: %s\n", err), 1;
        ids = realloc(ids, ((size_t)cnt + 1) * sizeof *ids);
        int got;
        if (eng_tok_encode(t, text, (size_t)tl, flags, ids, cnt, &got, err, sizeof err) != 0 ||
            got != cnt)
            return fprintf(stderr, "encode: %s\n", err), 1;
        for (int i = 0; i < got; i++) printf(i ? " %d" : "%d", ids[i]);
        putchar('\n');
    }
    free(text);
    free(ids);
    return 0;
}

static int cmd_decode(eng_tok *t, int flags) {
    char err[256];
    ssize_t n;
    int32_t *ids = malloc(sizeof *ids);
    size_t cap = eng_tok_stream_cap(t);
    char *chunk = malloc(cap);
    while ((n = next_line()) >= 0) {
        int k = 0;
        char *p = line_buf;
        while (*p) {
            char *end;
            long v = strtol(p, &end, 10);
            if (end == p) break;
            ids = realloc(ids, (size_t)(k + 1) * sizeof *ids);
            ids[k++] = (int32_t)v;
            p = end;
        }
        size_t need;
        int rc = eng_tok_decode(t, ids, k, flags, NULL, 0, &need, err, sizeof err);
        if (rc != 0 && rc != ENG_TOK_ENOSPC) return fprintf(stderr, "decode: %s\n", err), 1;
        char *out = malloc(need + 1);
        if (eng_tok_decode(t, ids, k, flags, out, need + 1, &need, err, sizeof err) != 0)
            return fprintf(stderr, "decode: %s\n", err), 1;
        /* streaming: chunks valid on their own and equal to the whole */
        eng_tok_stream s;
        eng_tok_stream_init(&s, t, flags);
        char *cat = malloc(need + 4);
        size_t cl = 0, got;
        for (int i = 0; i <= k; i++) {
            rc = i < k ? eng_tok_stream_push(&s, ids[i], chunk, cap, &got)
                       : eng_tok_stream_flush(&s, chunk, cap, &got);
            if (rc || !valid_utf8((unsigned char *)chunk, got) || cl + got > need)
                return fprintf(stderr, "stream: bad chunk at %d (rc %d)\n", i, rc), 1;
            memcpy(cat + cl, chunk, got);
            cl += got;
        }
        if (cl != need || memcmp(cat, out, need) != 0)
            return fprintf(stderr, "stream: differs from decode\n"), 1;
        puthex(out, need);
        putchar('\n');
        free(cat);
        free(out);
    }
    free(ids);
    free(chunk);
    return 0;
}

/* Render and print one conversation with the file template tf (T, I, S
 * lines as below; E on a template error). */
static void render_file(const eng_tmpl_file *tf, const eng_tok *t, const eng_tmpl_msg *msgs, int nm,
                        int gen) {
    char err[256], *text;
    size_t need;
    eng_tmpl_turn rt;
    if (eng_tmpl_file_render_text(tf, msgs, nm, gen, NULL, &text, &need, err, sizeof err) != 0) {
        printf("E %s\n", err);
        return;
    }
    printf("T ");
    puthex(text, need);
    putchar('\n');
    free(text);
    if (eng_tmpl_file_render_turn(tf, msgs, nm, gen, NULL, NULL, &rt, err, sizeof err) != 0) {
        printf("E %s\n", err);
        return;
    }
    printf("I");
    for (int i = 0; i < rt.n_ids; i++) printf(" %d", rt.ids[i]);
    printf("\nS %d\n", eng_tmpl_stable_prefix(ENG_TMPL_FILE, t, rt.ids, rt.n_ids));
    eng_tmpl_turn_free(&rt);
}

static int cmd_render(eng_tok *t, eng_tmpl_format f, const eng_tmpl_file *tf, int gen) {
    char err[256];
    ssize_t n;
    while ((n = next_line()) >= 0) {
        eng_tmpl_msg msgs[256];
        char *store = malloc((size_t)n + 1);
        int nm = 0;
        size_t w = 0;
        char *p = line_buf;
        while (*p && nm < 256) {
            char *colon = strchr(p, ':');
            if (!colon) return fprintf(stderr, "bad conversation line\n"), 1;
            char *comma = strchr(colon, ',');
            size_t rl = (size_t)(colon - p),
                   cl = comma ? (size_t)(comma - colon - 1) : strlen(colon + 1);
            msgs[nm] = (eng_tmpl_msg){0};
            msgs[nm].role = store + w;
            msgs[nm].role_len = (size_t)unhex(p, rl, store + w);
            w += msgs[nm].role_len;
            msgs[nm].content = store + w;
            msgs[nm].content_len = (size_t)unhex(colon + 1, cl, store + w);
            w += msgs[nm].content_len;
            nm++;
            p = comma ? comma + 1 : colon + 1 + cl;
        }
        if (tf) {
            render_file(tf, t, msgs, nm, gen);
            free(store);
            continue;
        }
        size_t need;
        int rc = eng_tmpl_render_text(f, t, msgs, nm, gen, NULL, 0, &need, err, sizeof err);
        if (rc != 0 && rc != ENG_TMPL_ENOSPC) {
            printf("E %s\n", err);
            free(store);
            continue;
        }
        char *text = malloc(need + 1);
        eng_tmpl_render_text(f, t, msgs, nm, gen, text, need + 1, &need, err, sizeof err);
        int nid;
        rc = eng_tmpl_render_ids(f, t, msgs, nm, gen, NULL, 0, &nid, err, sizeof err);
        printf("T ");
        puthex(text, need);
        putchar('\n');
        if (rc != 0 && rc != ENG_TMPL_ENOSPC) {
            printf("E %s\n", err);
        } else {
            int32_t *ids = malloc(((size_t)nid + 1) * sizeof *ids);
            eng_tmpl_render_ids(f, t, msgs, nm, gen, ids, nid, &nid, err, sizeof err);
            printf("I");
            for (int i = 0; i < nid; i++) printf(" %d", ids[i]);
            printf("\nS %d\n", eng_tmpl_stable_prefix(f, t, ids, nid));
            free(ids);
        }
        free(text);
        free(store);
    }
    return 0;
}

static int cmd_bench(eng_tok *t, const char *path, int reps, double load_s) {
    FILE *f = fopen(path, "rb");
    if (!f) return fprintf(stderr, "cannot open %s\n", path), 1;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)sz + 1);
    if (fread(buf, 1, (size_t)sz, f) != (size_t)sz) return fprintf(stderr, "short read\n"), 1;
    fclose(f);
    char err[256];
    struct timespec a, b;
    int n = 0;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int r = 0; r < reps; r++) n = eng_tok_count(t, buf, (size_t)sz, 0, err, sizeof err);
    clock_gettime(CLOCK_MONOTONIC, &b);
    double s = (double)(b.tv_sec - a.tv_sec) + 1e-9 * (double)(b.tv_nsec - a.tv_nsec);
    printf("bytes %ld tokens %d seconds %.4f tokens_per_s %.0f load_seconds %.4f\n", sz, n,
           s / reps, n / (s / reps), load_s);
    free(buf);
    return n < 0;
}

int main(int argc, char **argv) {
    char err[512];
    if (argc < 3) {
        fprintf(stderr,
                "usage: tok_tool encode|decode|render|detect|bench MODEL ... | recognise FILE\n");
        return 2;
    }
    if (strcmp(argv[1], "recognise") == 0) {
        FILE *f = fopen(argv[2], "rb");
        if (!f) return 1;
        static char buf[1 << 20];
        size_t n = fread(buf, 1, sizeof buf, f);
        fclose(f);
        eng_tmpl_format fmt;
        if (eng_tmpl_recognise(buf, n, &fmt, err, sizeof err) != 0) return printf("E %s\n", err), 0;
        printf("%s\n", eng_tmpl_name(fmt));
        return 0;
    }
    eng_gguf *g;
    eng_tok *t;
    struct timespec l0, l1;
    clock_gettime(CLOCK_MONOTONIC, &l0);
    if (eng_gguf_open(argv[2], &g, err, sizeof err) != 0)
        return fprintf(stderr, "gguf: %s\n", err), 1;
    if (eng_tok_load(g, &t, err, sizeof err) != 0) {
        printf("E %s\n", err);
        eng_gguf_close(g);
        return 1;
    }
    clock_gettime(CLOCK_MONOTONIC, &l1);
    double load_s = (double)(l1.tv_sec - l0.tv_sec) + 1e-9 * (double)(l1.tv_nsec - l0.tv_nsec);
    int rc = 2;
    const char *a3 = argc > 3 ? argv[3] : "", *a4 = argc > 4 ? argv[4] : "";
    if (strcmp(argv[1], "encode") == 0) {
        int flags = (!strcmp(a3, "special") || !strcmp(a4, "special") ? ENG_TOK_PARSE_SPECIAL : 0) |
                    (!strcmp(a3, "bos") || !strcmp(a4, "bos") ? ENG_TOK_ADD_BOS : 0);
        rc = cmd_encode(t, flags);
    } else if (strcmp(argv[1], "decode") == 0) {
        rc = cmd_decode(t, !strcmp(a3, "special") ? ENG_TOK_DECODE_SPECIAL : 0);
    } else if (strcmp(argv[1], "render") == 0 && strncmp(a3, "file", 4) == 0) {
        /* "file": the GGUF's own template rendered; "file=PATH": PATH's text */
        eng_tmpl_choice tc;
        memset(&tc, 0, sizeof tc);
        if (a3[4] == '=') {
            static char buf[1 << 20];
            FILE *f = fopen(a3 + 5, "rb");
            size_t n = f ? fread(buf, 1, sizeof buf, f) : 0;
            if (f) fclose(f);
            if (eng_tmpl_file_compile(buf, n, t, &tc.file, err, sizeof err) != 0)
                printf("E %s\n", err);
        } else if (eng_tmpl_choose(g, t, NULL, &tc, err, sizeof err) != 0) {
            printf("E %s\n", err);
        } else if (!tc.file) {
            printf("E not rendered: %s (%s)\n", tc.note, eng_tmpl_name(tc.fmt));
        }
        rc = tc.file ? cmd_render(t, ENG_TMPL_FILE, tc.file, atoi(a4)) : 0;
        eng_tmpl_choice_free(&tc);
    } else if (strcmp(argv[1], "choose") == 0) {
        /* the load-time choice: "FORMAT FAMILY EOT" then "N note" if refused */
        eng_tmpl_choice tc;
        if (eng_tmpl_choose(g, t, a3, &tc, err, sizeof err) != 0) {
            printf("E %s\n", err);
        } else {
            eng_tmpl_turn_end te =
                tc.file ? eng_tmpl_file_end_of_turn(tc.file) : eng_tmpl_end_of_turn(tc.fmt);
            printf("%s %s %s\n", eng_tmpl_name(tc.fmt), eng_tmpl_name(tc.family),
                   te.token ? te.token : "-");
            if (tc.note[0]) printf("N %s\n", tc.note);
        }
        eng_tmpl_choice_free(&tc);
        rc = 0;
    } else if (strcmp(argv[1], "render") == 0 || strcmp(argv[1], "detect") == 0) {
        eng_tmpl_format f;
        const char *ov = strcmp(argv[1], "detect") == 0 ? a3 : (strcmp(a3, "auto") == 0 ? "" : a3);
        if (eng_tmpl_detect(g, ov, &f, err, sizeof err) != 0) {
            printf("E %s\n", err);
            rc = 0;
        } else if (strcmp(argv[1], "detect") == 0) {
            printf("%s\n", eng_tmpl_name(f));
            rc = 0;
        } else rc = cmd_render(t, f, NULL, atoi(a4));
    } else if (strcmp(argv[1], "bench") == 0) {
        rc = cmd_bench(t, a3, argc > 4 ? atoi(a4) : 3, load_s);
    }
    fflush(stdout);
    eng_tok_free(t);
    eng_gguf_close(g);
    free(line_buf);
    return rc;
}
