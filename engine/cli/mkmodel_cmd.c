/*
 * mkmodel_cmd.c -- `parley mkmodel`: the command over eng_mkmodel
 * (eng_mkmodel.h).  Prints "wrote FILE: preset P, TYPE, S s" on success;
 * exit 2 for options eng_mkmodel refuses (unknown preset, --window on a
 * preset without local layers...), 1 when the file cannot be written.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cli_opt.h"
#include "eng_cli.h"
#include "eng_mkmodel.h"
#include "eng_model.h"
#include "pl_err.h"
#include "pl_time.h"

/* The parsed command line. */
typedef struct mk_args {
    eng_mkmodel_opts o; /* what eng_mkmodel gets */
    const char *type;   /* --type as typed */
} mk_args;

static void mk_presets_help(FILE *f) {
    char line[160];
    fprintf(f, "presets:\n");
    for (int i = 0; eng_mkmodel_preset_name(i); i++)
        fprintf(f, "  %-12s %s\n", eng_mkmodel_preset_name(i),
                eng_mkmodel_preset_describe(i, line, sizeof line));
}

int eng_cmd_mkmodel(int argc, char **argv) {
    mk_args a;
    eng_mkmodel_opts_default(&a.o);
    a.type = "q8_0";
    const cli_opt opts[] = {
        {"--preset", NULL, CLI_STR, &a.o.preset, 0, 0, "NAME", "preset (see below; required)",
         NULL},
        {"--out", NULL, CLI_STR, &a.o.out, 0, 0, "FILE", "GGUF file to write (required)", NULL},
        {"--seed", NULL, CLI_U64, &a.o.seed, 0, 0, "N", "weight seed (default 1)", NULL},
        {"--type", NULL, CLI_STR, &a.type, 0, 0, "q8_0|f16", "weight storage (default q8_0)", NULL},
        {"--window", NULL, CLI_INT, &a.o.window, 1, ENG_MKMODEL_MAX_WINDOW, "N",
         "override the local attention window (gemma3, cai-*)", NULL},
    };
    const cli_cmd cmd = {
        .name = "mkmodel",
        .synopsis = "mkmodel --preset NAME --out FILE [--seed N] [--type q8_0|f16]\n"
                    "                      [--window N]",
        .about = "Write a synthetic GGUF model with deterministic random weights.\n",
        .opts = opts,
        .n_opts = CLI_NOPTS(opts),
        .usage_on_error = 1,
    };
    int pr = cli_parse(&cmd, argc, argv, &a, NULL, NULL);
    if (pr == CLI_HELP) mk_presets_help(stdout);
    if (pr == CLI_USAGE) mk_presets_help(stderr);
    if (pr != CLI_OK) return pr == CLI_HELP ? 0 : 2;
    if (!a.o.preset || !a.o.out) {
        cli_fail(&cmd, "--preset and --out are required");
        mk_presets_help(stderr);
        return 2;
    }
    if (!strcmp(a.type, "q8_0")) a.o.type = ENG_MKMODEL_Q8_0;
    else if (!strcmp(a.type, "f16")) a.o.type = ENG_MKMODEL_F16;
    else {
        fprintf(stderr, "mkmodel: --type must be q8_0 or f16\n");
        return 2;
    }
    char err[PL_ERR_LEN * 2]; /* a path and its cause */
    double t0 = pl_mono_s();
    int rc = eng_mkmodel(&a.o, err, sizeof err);
    if (rc != 0) {
        fprintf(stderr, "mkmodel: %s\n", err);
        if (rc == ENG_EINVAL && strstr(err, "unknown preset")) {
            cli_usage(&cmd, stderr);
            mk_presets_help(stderr);
        }
        return rc == ENG_EINVAL ? 2 : 1;
    }
    printf("wrote %s: preset %s, %s, %.2f s\n", a.o.out, a.o.preset, a.type, pl_mono_s() - t0);
    return 0;
}
