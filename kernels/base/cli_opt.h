/*
 * cli_opt.h -- the one option parser of every `parley` subcommand.
 *
 * Purpose.  A subcommand declares its options as one static table (name,
 * alias, type, destination, range, value name, help); cli_parse walks argv
 * against it and cli_usage prints the `--help` text from the same table, so
 * the help cannot drift from what is accepted.  The worker's and the
 * gateway's configuration tables (cm_config.h) reach argv through the same
 * parser: their fixed flags are a cli_opt table and `--KEY value` goes to
 * the table's unknown-option hook.
 *
 * Values.  Every number goes through cli_parse_i64 / cli_parse_u64 /
 * cli_parse_f64: the whole string must be the number (no trailing bytes,
 * no empty string), integers are decimal or 0x-hex, floats finite, and the
 * value within the row's [min, max].  A value that fails is a usage error
 * naming the option, the value and the accepted range.  Options are
 * applied in argv order, so a later option overrides an earlier one (and a
 * callback sees the ones before it).
 *
 * Conventions kept for every subcommand: `-h` / `--help` prints the usage
 * to stdout (CLI_HELP, the command exits 0); a usage error prints one line
 * `CMD: ...` to stderr (optionally followed by the usage) and returns
 * CLI_USAGE (the command exits 2).  The parser never exits and never
 * allocates; values of CLI_STR options point into argv.
 *
 * Threading.  Reentrant; tables are read-only.
 */
#ifndef CLI_OPT_H
#define CLI_OPT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "pl_err.h"

#define CLI_OK 0    /* parsed; run the command */
#define CLI_HELP 1  /* --help printed to stdout; exit 0 */
#define CLI_USAGE 2 /* usage error printed to stderr; exit 2 */

/* Size of the message buffer handed to callbacks: larger than PL_ERR_LEN,
 * their messages quote the value they refuse (config values, paths). */
#define CLI_ERRLEN (PL_ERR_LEN * 4)

/* The commands' error code (pl_err.h range -1900): an option value a
 * command's parser or callback refuses (cli_parse turns it into CLI_USAGE). */
#define CLI_EINVAL PL_ERR_CODE(PL_ERR_CLI, PL_EINVAL)

typedef enum cli_type {
    CLI_FLAG = 0, /* no value: *(int *)dst = 1 */
    CLI_STR,      /* *(const char **)dst = the value (points into argv) */
    CLI_INT,      /* *(int *)dst = integer in [min, max] */
    CLI_LONG,     /* *(long *)dst = integer in [min, max] */
    CLI_U64,      /* *(uint64_t *)dst = unsigned integer in [min, max];
                     max <= 0 means the whole uint64_t range */
    CLI_F32,      /* *(float *)dst = finite number in [min, max] */
    CLI_F64,      /* *(double *)dst = finite number in [min, max] */
    CLI_FN,       /* fn(ctx, name, value, ...) with the next argument */
    CLI_FN0       /* fn(ctx, name, NULL, ...): takes no value */
} cli_type;

struct cli_opt;

/* A callback option: apply val (NULL for CLI_FN0) -- o is the row (its
 * name, and dst when the row gives one), ctx the pointer cli_parse got;
 * return 0, or -1 after writing why into err (may stay empty: "bad value"
 * then says enough), or -2 after writing a whole message into err (printed
 * as "CMD: err"). */
typedef int (*cli_fn)(void *ctx, const struct cli_opt *o, const char *val, char *err,
                      size_t errlen);

/* One row of an option table. */
typedef struct cli_opt {
    const char *name;  /* long form, "--max-tokens" */
    const char *alias; /* short form, "-n", or NULL */
    cli_type type;     /* value type, which says what dst points to */
    void *dst;         /* destination (callbacks: anything they use, or NULL) */
    double min, max;   /* accepted range of numeric values (inclusive) */
    const char *arg;   /* value name in the help ("N", "TEXT"); NULL for flags */
    const char *help;  /* help text; '\n' continues it on an indented line */
    cli_fn fn;         /* CLI_FN / CLI_FN0: the callback */
} cli_opt;

/* An argument that names no row: return 1 if val (the next argument, NULL
 * at the end) was consumed as its value, 0 if not, -1 after writing why
 * into err, or -2 for "unknown option". */
typedef int (*cli_unknown_fn)(void *ctx, const char *arg, const char *val, char *err,
                              size_t errlen);

/* A subcommand: its table and the texts around it. */
typedef struct cli_cmd {
    const char *name;       /* subcommand; prefixes every message ("generate: ...") */
    const char *synopsis;   /* after "usage: parley "; '\n' starts another usage
                               line, or continues this one if a space follows */
    const char *about;      /* paragraph after the synopsis, or NULL */
    const cli_opt *opts;    /* the option table */
    size_t n_opts;          /* its rows */
    const char *epilog;     /* text after the options, or NULL */
    int max_pos;            /* positional arguments accepted (0 = none) */
    int usage_on_error;     /* print the usage to stderr after a usage error */
    cli_unknown_fn unknown; /* hook for arguments no row names, or NULL */
} cli_cmd;

#define CLI_NOPTS(t) (sizeof(t) / sizeof((t)[0]))

/* Parse argv (argv[0] = the subcommand name) into the table's
 * destinations; ctx goes to callbacks.  Positional arguments (ones not
 * starting with '-', and "-" itself) go to pos[0 .. max_pos) with their
 * count in *n_pos (pos / n_pos may be NULL when max_pos is 0).  Returns
 * CLI_OK, CLI_HELP or CLI_USAGE (see above). */
int cli_parse(const cli_cmd *c, int argc, char **argv, void *ctx, const char **pos, int *n_pos);

/* Print a usage error "CMD: message" to stderr (and the usage when the
 * command asks for it); returns CLI_USAGE.  For checks after cli_parse. */
int cli_fail(const cli_cmd *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The generated help: synopsis, about, one line per option, epilog. */
void cli_usage(const cli_cmd *c, FILE *f);

/* The one number parser behind every option (and cm_config): the whole of
 * s must be the number, within [lo, hi].  Integers: optional '-' (i64
 * only), then decimal digits or 0x and hex digits.  Floats: strtod syntax,
 * finite.  Return 0, or -1 leaving *out untouched. */
int cli_parse_i64(const char *s, long long lo, long long hi, long long *out);
int cli_parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out);
int cli_parse_f64(const char *s, double lo, double hi, double *out);

#endif
