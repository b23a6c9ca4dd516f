/*
 * inspect.c -- `parley inspect FILE [--json] [--tensors]`: print a GGUF
 * file's metadata, its tensor table, the model configuration the engine
 * derives from it (rope scaling and biases included), the per-layer window /
 * KV-source plan, the parameter count and the KV-cache bytes per token next
 * to an MHA fp16 baseline.
 *
 * A file that fails to parse prints the reader's message (which names the
 * key or tensor, the field and the limit) and exits 1; a file that parses
 * but that the engine cannot run prints what it could and then the config
 * or tensor-check error, also with exit 1.  A file the engine can run is
 * then loaded for int8 serving (unless --no-load) to report what it costs
 * in RAM after repacking, next to the file's tensor bytes; a load failure
 * is printed and exits 1.  --json prints one JSON object
 * (strings escaped, invalid UTF-8 replaced by U+FFFD, non-finite floats as
 * null) for scripts and tests.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli_opt.h"
#include "eng_cli.h"
#include "eng_config.h"
#include "eng_gguf.h"
#include "eng_model.h"
#include "pl_err.h"

#define IN_ARR_HEAD 8  /* array elements shown */
#define IN_STR_TEXT 64 /* string bytes shown in text mode */

/* Length of a valid UTF-8 sequence at s (<= n bytes), 0 if invalid. */
static size_t in_utf8_len(const unsigned char *s, size_t n) {
    size_t len = s[0] >= 0xF0 && s[0] <= 0xF4  ? 4
                 : s[0] >= 0xE0                ? 3
                 : s[0] >= 0xC2 && s[0] < 0xE0 ? 2
                                               : 0;
    if (!len || len > n) return 0;
    for (size_t i = 1; i < len; i++)
        if ((s[i] & 0xC0) != 0x80) return 0;
    return len;
}

/* Print a string quoted, escaped for JSON (both modes use the same rules);
 * max limits bytes shown (0 = all). */
static void in_str(FILE *f, const char *s, size_t n, size_t max) {
    const unsigned char *p = (const unsigned char *)s;
    size_t shown = max && n > max ? max : n;
    fputc('"', f);
    for (size_t i = 0; i < shown;) {
        unsigned char ch = p[i];
        if (ch == '"' || ch == '\\') fprintf(f, "\\%c", ch);
        else if (ch == '\n') fputs("\\n", f);
        else if (ch == '\t') fputs("\\t", f);
        else if (ch < 0x20 || ch == 0x7f) fprintf(f, "\\u%04x", ch);
        else if (ch < 0x80) fputc(ch, f);
        else {
            size_t l = in_utf8_len(p + i, n - i);
            if (l) {
                fwrite(p + i, 1, l, f);
                i += l;
                continue;
            }
            fputs("\\ufffd", f);
        }
        i++;
    }
    fputc('"', f);
    if (shown < n) fprintf(f, "...(%zu bytes)", n);
}

static void in_float(FILE *f, double v) {
    if (isfinite(v)) fprintf(f, "%.9g", v);
    else fputs("null", f);
}

static size_t in_esize(int t);

/* Print one scalar of type t at p (reads only the scalar's bytes). */
static void in_scalar(FILE *f, int t, const unsigned char *p) {
    uint64_t u = 0;
    for (int i = (int)in_esize(t) - 1; i >= 0; i--) u = u << 8 | p[i];
    switch (t) {
    case ENG_GGUF_TYPE_U8: fprintf(f, "%u", p[0]); break;
    case ENG_GGUF_TYPE_I8: fprintf(f, "%d", (int8_t)p[0]); break;
    case ENG_GGUF_TYPE_U16: fprintf(f, "%u", (unsigned)(p[0] | p[1] << 8)); break;
    case ENG_GGUF_TYPE_I16: fprintf(f, "%d", (int16_t)(p[0] | p[1] << 8)); break;
    case ENG_GGUF_TYPE_U32: fprintf(f, "%u", (uint32_t)u); break;
    case ENG_GGUF_TYPE_I32: fprintf(f, "%d", (int32_t)(uint32_t)u); break;
    case ENG_GGUF_TYPE_U64: fprintf(f, "%llu", (unsigned long long)u); break;
    case ENG_GGUF_TYPE_I64: fprintf(f, "%lld", (long long)(int64_t)u); break;
    case ENG_GGUF_TYPE_BOOL: fputs(p[0] ? "true" : "false", f); break;
    case ENG_GGUF_TYPE_F32: {
        float x;
        uint32_t b = (uint32_t)u;
        memcpy(&x, &b, 4);
        in_float(f, x);
        break;
    }
    case ENG_GGUF_TYPE_F64: {
        double x;
        memcpy(&x, &u, 8);
        in_float(f, x);
        break;
    }
    default: fputs("null", f);
    }
}

/* Scalar element sizes for array walking. */
static size_t in_esize(int t) {
    static const size_t sz[ENG_GGUF_TYPE_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    return t >= 0 && t < ENG_GGUF_TYPE_COUNT ? sz[t] : 0;
}

/* The value of entry i (arrays: first IN_ARR_HEAD elements). */
static void in_value(FILE *f, const eng_gguf *g, int i, int json) {
    eng_gguf_value v;
    eng_gguf_kv_value(g, i, &v);
    if (v.type == ENG_GGUF_TYPE_STR) {
        in_str(f, v.data, (size_t)v.n, json ? 0 : IN_STR_TEXT);
        return;
    }
    if (v.type != ENG_GGUF_TYPE_ARR) {
        in_scalar(f, v.type, v.data);
        return;
    }
    uint64_t show = v.n < IN_ARR_HEAD ? v.n : IN_ARR_HEAD;
    fputc('[', f);
    for (uint64_t j = 0; j < show; j++) {
        if (j) fputs(", ", f);
        if (v.arr_type == ENG_GGUF_TYPE_STR) {
            const char *s;
            size_t len;
            eng_gguf_kv_arr_str(g, i, j, &s, &len);
            in_str(f, s, len, json ? 0 : IN_STR_TEXT);
        } else {
            in_scalar(f, v.arr_type, (const unsigned char *)v.data + j * in_esize(v.arr_type));
        }
    }
    if (!json && show < v.n) fputs(", ...", f);
    fputc(']', f);
}

static void in_metadata(FILE *f, const eng_gguf *g, int json) {
    int n = eng_gguf_n_kv(g);
    if (!json) printf("metadata: %d keys\n", n);
    for (int i = 0; i < n; i++) {
        eng_gguf_value v;
        eng_gguf_kv_value(g, i, &v);
        char type[32];
        if (v.type == ENG_GGUF_TYPE_ARR)
            snprintf(type, sizeof type, "arr[%s]", eng_gguf_kv_type_name(v.arr_type));
        else snprintf(type, sizeof type, "%s", eng_gguf_kv_type_name(v.type));
        const char *key = eng_gguf_kv_key(g, i);
        if (json) {
            fputs(i ? ",\n    " : "\n    ", f);
            in_str(f, key, strlen(key), 0);
            fprintf(f, ": {\"type\": \"%s\"", type);
            if (v.type == ENG_GGUF_TYPE_ARR) fprintf(f, ", \"n\": %llu", (unsigned long long)v.n);
            fputs(", \"value\": ", f);
            in_value(f, g, i, 1);
            fputc('}', f);
        } else {
            fprintf(f, "  %-44s %-9s ", key, type);
            if (v.type == ENG_GGUF_TYPE_ARR) fprintf(f, "n=%llu ", (unsigned long long)v.n);
            in_value(f, g, i, 0);
            fputc('\n', f);
        }
    }
}

/* Tensor totals per type. */
static void in_tensors(FILE *f, const eng_gguf *g, int json, int list) {
    uint64_t bytes[64] = {0}, total = 0, nel_total = 0;
    int count[64] = {0}, other = 0, n = eng_gguf_n_tensors(g);
    for (int i = 0; i < n; i++) {
        const eng_gguf_tensor *t = eng_gguf_tensor_at(g, i);
        total += t->nbytes;
        nel_total += (uint64_t)(t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]);
        if (t->type >= 0 && t->type < 64) {
            count[t->type]++;
            bytes[t->type] += t->nbytes;
        } else other++;
    }
    if (json) {
        fprintf(f,
                ",\n  \"tensors\": {\"count\": %d, \"bytes\": %llu, \"elements\": %llu, "
                "\"by_type\": {",
                n, (unsigned long long)total, (unsigned long long)nel_total);
        for (int t = 0, first = 1; t < 64; t++)
            if (count[t]) {
                fprintf(f, "%s\"%s\": {\"count\": %d, \"bytes\": %llu}", first ? "" : ", ",
                        eng_gguf_type_name(t), count[t], (unsigned long long)bytes[t]);
                first = 0;
            }
        fputs("}}", f);
        return;
    }
    fprintf(f, "tensors: %d, %llu elements, %.2f MiB\n", n, (unsigned long long)nel_total,
            (double)total / 1048576.0);
    for (int t = 0; t < 64; t++)
        if (count[t])
            fprintf(f, "  %-6s %5d tensors %12.2f MiB\n", eng_gguf_type_name(t), count[t],
                    (double)bytes[t] / 1048576.0);
    for (int i = 0; list && i < n; i++) {
        const eng_gguf_tensor *t = eng_gguf_tensor_at(g, i);
        fprintf(f, "  %-36s %-5s [%lld", t->name, eng_gguf_type_name(t->type), (long long)t->ne[0]);
        for (int d = 1; d < t->n_dims; d++) fprintf(f, ", %lld", (long long)t->ne[d]);
        fprintf(f, "] %llu bytes at %llu\n", (unsigned long long)t->nbytes,
                (unsigned long long)t->offset);
    }
}

/* KV figures at a context length n: amortised bytes per token and ratio. */
static void in_kv_at(FILE *f, const eng_config *c, uint64_t n, int json, const char *label) {
    double per = (double)eng_config_kv_bytes_at(c, n) / (double)n;
    double base = (double)eng_config_kv_bytes_mha_fp16(c);
    if (json)
        fprintf(f, ", \"%s\": {\"n_ctx\": %llu, \"bytes_per_token\": %.2f, \"ratio\": %.2f}", label,
                (unsigned long long)n, per, base / per);
    else
        fprintf(f, "  amortised at n_ctx %-7llu %10.1f B/token   %7.1fx below the baseline (%s)\n",
                (unsigned long long)n, per, base / per, label);
}

/* The engine's view of the model as JSON fields (kvt, base: KV bytes per
 * token, parley's and the MHA fp16 baseline's). */
static void in_config_json(FILE *f, const eng_config *c, size_t kvt, size_t base, double ratio) {
    fprintf(f,
            ",\n  \"config\": {\"arch\": \"%s\", \"n_vocab\": %d, \"n_embd\": %d, "
            "\"n_layer\": %d, \"n_head\": %d, \"n_head_kv\": %d, \"head_dim\": %d, "
            "\"n_ff\": %d, \"n_ctx_train\": %d, \"norm_eps\": ",
            c->arch_name, c->n_vocab, c->n_embd, c->n_layer, c->n_head, c->n_head_kv, c->head_dim,
            c->n_ff, c->n_ctx_train);
    in_float(f, c->norm_eps);
    fputs(", \"rope_base\": ", f);
    in_float(f, c->rope_base);
    fputs(", \"rope_base_local\": ", f);
    in_float(f, c->rope_base_local);
    fprintf(f, ", \"rope_type\": \"%s\", \"attn_scale\": ",
            c->rope_type == ENG_ROPE_NEOX ? "neox" : "norm");
    in_float(f, c->attn_scale);
    fputs(", \"embd_scale\": ", f);
    in_float(f, c->embd_scale);
    fprintf(f, ", \"rope_scaling\": \"%s\", \"rope_freq_scale\": ",
            c->rope_yarn                 ? "yarn"
            : c->rope_freq_factors       ? "llama3"
            : c->rope_freq_scale != 1.0f ? "linear"
                                         : "none");
    in_float(f, c->rope_freq_scale);
    fprintf(f, ", \"has_qkv_bias\": %d", c->has_qkv_bias);
    fprintf(f,
            ", \"norm_add_one\": %d, \"has_qk_norm\": %d, \"has_post_norms\": %d, "
            "\"ffn_gelu\": %d, \"tied_output\": %d, \"sliding_window\": %d, "
            "\"has_ext_keys\": %d, \"final_logit_softcap\": ",
            c->norm_add_one, c->has_qk_norm, c->has_post_norms, c->ffn_gelu, c->tied_output,
            c->sliding_window, c->has_ext_keys);
    in_float(f, c->final_logit_softcap);
    fputs("},\n  \"layers\": [", f);
    for (int l = 0; l < c->n_layer; l++)
        fprintf(f, "%s{\"window\": %d, \"kv_src\": %d}", l ? ", " : "", c->window[l], c->kv_src[l]);
    fprintf(f,
            "],\n  \"n_params\": %llu,\n  \"kv\": {\"kv_owners\": %d, \"global_kv_owners\": %d, "
            "\"bytes_per_token\": %zu, \"mha_fp16_bytes_per_token\": %zu, \"ratio\": ",
            (unsigned long long)eng_config_n_params(c), eng_config_n_kv_owners(c, 0),
            eng_config_n_kv_owners(c, 1), kvt, base);
    in_float(f, ratio);
    in_kv_at(f, c, ENG_CONFIG_REF_CTX, 1, "at_ref_ctx");
    if (c->n_ctx_train > 0) in_kv_at(f, c, (uint64_t)c->n_ctx_train, 1, "at_ctx_train");
    /* (JSON always carries both; the text form prints the second only
     * when it differs) */
    fputc('}', f);
}

/* The engine's view of the model as text. */
static void in_config_text(FILE *f, const eng_config *c, size_t kvt, size_t base, double ratio) {
    fprintf(f, "architecture (engine view): %s\n", c->arch_name);
    fprintf(f,
            "  n_vocab %d, n_embd %d, n_layer %d, n_head %d, n_head_kv %d, head_dim %d, n_ff %d, "
            "n_ctx_train %d\n",
            c->n_vocab, c->n_embd, c->n_layer, c->n_head, c->n_head_kv, c->head_dim, c->n_ff,
            c->n_ctx_train);
    fprintf(f, "  norm_eps %g, rope %s base %g (local %g), attn_scale %g, embd_scale %g\n",
            (double)c->norm_eps, c->rope_type == ENG_ROPE_NEOX ? "neox" : "norm",
            (double)c->rope_base, (double)c->rope_base_local, (double)c->attn_scale,
            (double)c->embd_scale);
    if (c->rope_yarn)
        fprintf(f, "  rope scaling yarn: factor %g, original context %d, betas %g/%g\n",
                (double)(1.0f / c->rope_freq_scale), c->rope_yarn_orig_ctx,
                (double)c->rope_yarn_beta_fast, (double)c->rope_yarn_beta_slow);
    else if (c->rope_freq_scale != 1.0f || c->rope_freq_factors)
        fprintf(f, "  rope scaling %s: linear factor %g (global layers)%s\n",
                c->rope_freq_factors ? "llama3" : "linear", (double)(1.0f / c->rope_freq_scale),
                c->rope_freq_factors ? ", per-dimension factors from rope_freqs.weight" : "");
    else fprintf(f, "  rope scaling none\n");
    fprintf(f, "  qkv_bias %d\n", c->has_qkv_bias);
    fprintf(f,
            "  ffn %s, qk_norm %d, post_norms %d, norm_add_one %d, tied_output %d, "
            "sliding_window %d, final_logit_softcap %g, parley extension keys %s\n",
            c->ffn_gelu ? "gelu-tanh gated" : "silu gated", c->has_qk_norm, c->has_post_norms,
            c->norm_add_one, c->tied_output, c->sliding_window, (double)c->final_logit_softcap,
            c->has_ext_keys ? "yes" : "no");
    fprintf(f, "layers (window 0 = global; kv_src = layer whose KV it uses):\n");
    for (int l = 0; l < c->n_layer; l++)
        fprintf(f, "  layer %3d  window %6d  kv_src %3d%s\n", l, c->window[l], c->kv_src[l],
                c->kv_src[l] == l ? "  (owns KV)" : "");
    fprintf(f, "parameters: %llu (%.3f B)\n", (unsigned long long)eng_config_n_params(c),
            (double)eng_config_n_params(c) / 1e9);
    fprintf(f,
            "KV cache (int8 K and V, f32 scales: K per %d values, V per token per KV head; %d of "
            "%d layers own "
            "KV, %d of them global):\n",
            eng_kv_k_group(c->head_dim), eng_config_n_kv_owners(c, 0), c->n_layer,
            eng_config_n_kv_owners(c, 1));
    fprintf(f, "  MHA fp16 baseline (2*n_layer*n_head*head_dim*2) %zu B/token\n", base);
    fprintf(f,
            "  per token, long context (global owners) %10zu B/token   %7.1fx below the baseline\n",
            kvt, ratio);
    in_kv_at(f, c, ENG_CONFIG_REF_CTX, 0, "reference context");
    if (c->n_ctx_train > 0 && c->n_ctx_train != ENG_CONFIG_REF_CTX)
        in_kv_at(f, c, (uint64_t)c->n_ctx_train, 0, "training context");
}


static void in_config(FILE *f, const eng_config *c, int json) {
    size_t kvt = eng_config_kv_bytes_per_token(c), base = eng_config_kv_bytes_mha_fp16(c);
    double ratio = kvt ? (double)base / (double)kvt : INFINITY;
    if (json) in_config_json(f, c, kvt, base, ratio);
    else in_config_text(f, c, kvt, base, ratio);
}

/* Load the model for int8 serving and print its resident bytes; 0 or -1
 * (message in err). */
static int in_resident(FILE *f, const char *path, const eng_gguf *g, int json, char *err,
                       size_t errlen) {
    eng_load_opts o = {.prec = ENG_PREC_INT8, .n_threads = 0, .block_tokens = 0};
    eng_model *m = NULL;
    if (eng_model_load(path, &o, &m, err, errlen)) return -1;
    uint64_t file = 0;
    for (int i = 0; i < eng_gguf_n_tensors(g); i++) file += eng_gguf_tensor_at(g, i)->nbytes;
    size_t res = eng_model_resident_bytes(m), step = eng_model_weight_bytes(m);
    if (json)
        fprintf(
            f,
            ",\n  \"resident\": {\"precision\": \"int8\", \"bytes\": %zu, \"decode_step_bytes\": %zu, "
            "\"file_tensor_bytes\": %llu}",
            res, step, (unsigned long long)file);
    else
        fprintf(
            f,
            "resident after repacking (int8 serving): %.2f MiB (%.2fx the file's %.2f MiB of tensors); "
            "one decode step reads %.2f MiB of them\n",
            (double)res / 1048576.0, file ? (double)res / (double)file : 0.0,
            (double)file / 1048576.0, (double)step / 1048576.0);
    eng_model_free(m);
    return 0;
}

/* The file header line (or JSON fields) and the metadata. */
static void in_header(FILE *f, const char *path, const eng_gguf *g, int json) {
    if (json) {
        fputs("{\"file\": ", f);
        in_str(f, path, strlen(path), 0);
        fprintf(f,
                ", \"version\": %u, \"size\": %llu, \"alignment\": %u, \"data_offset\": %llu,"
                "\n  \"metadata\": {",
                eng_gguf_version(g), (unsigned long long)eng_gguf_file_size(g),
                eng_gguf_alignment(g), (unsigned long long)eng_gguf_data_offset(g));
        in_metadata(f, g, 1);
        fputs("}", f);
    } else {
        fprintf(f, "file: %s (GGUF v%u, %llu bytes, alignment %u, data at %llu)\n", path,
                eng_gguf_version(g), (unsigned long long)eng_gguf_file_size(g),
                eng_gguf_alignment(g), (unsigned long long)eng_gguf_data_offset(g));
        in_metadata(f, g, 0);
    }
}

int eng_cmd_inspect(int argc, char **argv) {
    const char *path = NULL;
    int json = 0, list = 0, no_load = 0, ret = 1, n_pos = 0;
    const cli_opt opts[] = {
        {"--json", NULL, CLI_FLAG, &json, 0, 0, NULL, "one JSON object", NULL},
        {"--tensors", NULL, CLI_FLAG, &list, 0, 0, NULL, "list every tensor", NULL},
        {"--no-load", NULL, CLI_FLAG, &no_load, 0, 0, NULL,
         "skip loading the model (no resident-bytes figures)", NULL},
    };
    const cli_cmd cmd = {
        .name = "inspect",
        .synopsis = "inspect FILE [--json] [--tensors] [--no-load]",
        .about = "Print a GGUF file's metadata, tensors and the engine's view of the model.\n",
        .opts = opts,
        .n_opts = CLI_NOPTS(opts),
        .max_pos = 1,
        .usage_on_error = 1,
    };
    int pr = cli_parse(&cmd, argc, argv, NULL, &path, &n_pos);
    if (pr != CLI_OK) return pr == CLI_HELP ? 0 : 2;
    if (!path) {
        cli_usage(&cmd, stderr);
        return 2;
    }
    eng_gguf *g = NULL;
    eng_config c;
    char err[PL_ERR_LEN * 2]; /* a tensor or key name and its cause */
    if (eng_gguf_open(path, &g, err, sizeof err)) {
        fprintf(stderr, "inspect: %s: %s\n", path, err);
        return 1;
    }
    int crc = eng_config_from_gguf(g, &c, err, sizeof err);
    if (!crc) crc = eng_config_check_tensors(&c, g, err, sizeof err);
    FILE *f = stdout;
    in_header(f, path, g, json);
    in_tensors(f, g, json, list);
    if (!crc) in_config(f, &c, json);
    if (!crc && !no_load && in_resident(f, path, g, json, err, sizeof err)) crc = 1;
    if (json) {
        fputs(",\n  \"error\": ", f);
        if (crc) in_str(f, err, strlen(err), 0);
        else fputs("null", f);
        fputs("}\n", f);
    }
    if (crc) fprintf(stderr, "inspect: %s: %s\n", path, err);
    else ret = 0;
    eng_gguf_close(g);
    return ret;
}
