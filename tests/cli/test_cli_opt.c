/*
 * test_cli_opt.c -- the table-driven option parser (cli_opt.h): the number
 * parsers accept exactly the whole number within its range, cli_parse
 * applies rows in argv order and returns CLI_OK / CLI_HELP / CLI_USAGE
 * with the conventions every subcommand keeps, and the help lists every
 * row.  Usage errors print to stderr (expected in the test log).
 */
#define PTEST_MAIN
#include "ptest.h"

#include <float.h>
#include <limits.h>

#include "cli_opt.h"

PT_TEST(integers_whole_string_and_range) {
    long long v = 7;
    PT_EQ_INT(cli_parse_i64("42", 0, 100, &v), 0);
    PT_EQ_INT(v, 42);
    PT_EQ_INT(cli_parse_i64("-5", -10, 10, &v), 0);
    PT_EQ_INT(v, -5);
    PT_EQ_INT(cli_parse_i64("0x1f", 0, 100, &v), 0);
    PT_EQ_INT(v, 31);
    PT_EQ_INT(cli_parse_i64("9223372036854775807", LLONG_MIN, LLONG_MAX, &v), 0);
    PT_ASSERT(v == LLONG_MAX);
    PT_EQ_INT(cli_parse_i64("-9223372036854775808", LLONG_MIN, LLONG_MAX, &v), 0);
    PT_ASSERT(v == LLONG_MIN);
    v = 7;
    const char *bad[] = {"",
                         " 1",
                         "1 ",
                         "+1",
                         "1x",
                         "x",
                         "0x",
                         "--1",
                         "1.5",
                         "101",
                         "9223372036854775808",
                         "-9223372036854775809",
                         "99999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        PT_ASSERT_MSG(cli_parse_i64(bad[i], -100, 100, &v) == -1 && v == 7, "'%s'", bad[i]);
    PT_EQ_INT(cli_parse_i64(NULL, 0, 1, &v), -1);
    uint64_t u = 3;
    PT_EQ_INT(cli_parse_u64("18446744073709551615", 0, UINT64_MAX, &u), 0);
    PT_ASSERT(u == UINT64_MAX);
    u = 3;
    PT_EQ_INT(cli_parse_u64("18446744073709551616", 0, UINT64_MAX, &u), -1);
    PT_EQ_INT(cli_parse_u64("-1", 0, UINT64_MAX, &u), -1);
    PT_EQ_INT(cli_parse_u64("5", 6, 9, &u), -1);
    PT_ASSERT(u == 3);
}

PT_TEST(floats_finite_and_range) {
    double d = 9;
    PT_EQ_INT(cli_parse_f64("0.7", 0, 1, &d), 0);
    PT_NEAR(d, 0.7, 1e-12);
    PT_EQ_INT(cli_parse_f64("-1e-3", -1, 1, &d), 0);
    d = 9;
    const char *bad[] = {"", "abc", "0.5x", " 0.5", "nan", "inf", "-inf", "1e999", "2"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        PT_ASSERT_MSG(cli_parse_f64(bad[i], -1.5, 1.5, &d) == -1 && d == 9, "'%s'", bad[i]);
}

/* Destinations of the test table. */
typedef struct t_opts {
    const char *name; /* --name */
    int n;            /* -n / --count */
    long big;         /* --big */
    uint64_t seed;    /* --seed */
    float temp;       /* --temp */
    double rate;      /* --rate */
    int flag;         /* --flag */
    int calls;        /* callback invocations */
    char last[32];    /* last callback value */
} t_opts;

static int t_cb(void *ctx, const cli_opt *o, const char *v, char *err, size_t errlen) {
    t_opts *t = ctx;
    t->calls++;
    if (v && !strcmp(v, "no")) return snprintf(err, errlen, "never 'no'"), -1;
    snprintf(t->last, sizeof t->last, "%s", v ? v : "(none)");
    return 0;
}

static int t_unknown(void *ctx, const char *a, const char *v, char *err, size_t errlen) {
    if (strncmp(a, "--x.", 4)) return -2;
    if (!v) return snprintf(err, errlen, "%s needs a value", a), -1;
    return 1;
}

#define T_TABLE(t)                                                                              \
    const cli_opt opts[] = {                                                                    \
        {"--name", NULL, CLI_STR, &(t).name, 0, 0, "S", "a string", NULL},                      \
        {"--count", "-n", CLI_INT, &(t).n, 1, 10, "N", "an int\nsecond line", NULL},            \
        {"--big", NULL, CLI_LONG, &(t).big, 0, 1e12, "N", "a long", NULL},                      \
        {"--seed", NULL, CLI_U64, &(t).seed, 0, 0, "N", "any u64", NULL},                       \
        {"--temp", NULL, CLI_F32, &(t).temp, 0, 2, "T", "a float", NULL},                       \
        {"--rate", NULL, CLI_F64, &(t).rate, 1e-3, 1e6, "R", "a double", NULL},                 \
        {"--flag", NULL, CLI_FLAG, &(t).flag, 0, 0, NULL, "a flag", NULL},                      \
        {"--cb", NULL, CLI_FN, NULL, 0, 0, "V", "a callback", t_cb},                            \
        {"--cb0", NULL, CLI_FN0, NULL, 0, 0, NULL, "a valueless callback", t_cb},               \
        {"--a-very-long-option-name", NULL, CLI_FLAG, &(t).flag, 0, 0, NULL, "long", NULL},     \
    };                                                                                          \
    const cli_cmd cmd = {"t", "t [options] FILE", "about\n", opts, CLI_NOPTS(opts), "end\n", 2, \
                         0,   t_unknown}

static int t_run(t_opts *t, const char **pos, int *n_pos, int argc, char **argv) {
    T_TABLE(*t);
    return cli_parse(&cmd, argc, argv, t, pos, n_pos);
}

#define T_ARGC(av) ((int)(sizeof(av) / sizeof((av)[0])))

PT_TEST(parse_applies_rows_in_order) {
    t_opts t = {0};
    const char *pos[2] = {0};
    int n_pos = -1;
    char *av[] = {"t",       "in.txt",
                  "--name",  "a",
                  "-n",      "3",
                  "--count", "4",
                  "--big",   "1000000000000",
                  "--seed",  "0xffffffffffffffff",
                  "--temp",  "0.5",
                  "--rate",  "2e3",
                  "--flag",  "--cb",
                  "v1",      "--cb0",
                  "--x.key", "val",
                  "out.txt", "--name",
                  "-b"};
    PT_EQ_INT(t_run(&t, pos, &n_pos, T_ARGC(av), av), CLI_OK);
    PT_EQ_STR(t.name, "-b"); /* a value may start with '-'; the later --name wins */
    PT_EQ_INT(t.n, 4);
    PT_ASSERT(t.big == 1000000000000L);
    PT_ASSERT(t.seed == UINT64_MAX);
    PT_NEAR(t.temp, 0.5, 0);
    PT_NEAR(t.rate, 2000, 0);
    PT_EQ_INT(t.flag, 1);
    PT_EQ_INT(t.calls, 2);
    PT_EQ_STR(t.last, "(none)");
    PT_EQ_INT(n_pos, 2);
    PT_EQ_STR(pos[0], "in.txt");
    PT_EQ_STR(pos[1], "out.txt");
}

PT_TEST(parse_usage_errors) {
    t_opts t = {0};
    const char *pos[2];
    int n_pos;
    char *missing[] = {"t", "--count"};
    char *range[] = {"t", "-n", "11"};
    char *notnum[] = {"t", "--temp", "abc"};
    char *nonfinite[] = {"t", "--rate", "inf"};
    char *unknown[] = {"t", "--bogus"};
    char *hook_err[] = {"t", "--x.key"};
    char *too_many[] = {"t", "a", "b", "c"};
    char *cb_refuses[] = {"t", "--cb", "no"};
    char *neg_u64[] = {"t", "--seed", "-1"};
    PT_EQ_INT(t_run(&t, pos, &n_pos, T_ARGC(missing), missing), CLI_USAGE);
    PT_EQ_INT(t_run(&t, pos, &n_pos, T_ARGC(range), range), CLI_USAGE);
    PT_EQ_INT(t.n, 0); /* a refused value is not stored */
    PT_EQ_INT(t_run(&t, pos, &n_pos, T_ARGC(notnum), notnum), CLI_USAGE);
    PT_EQ_INT(t_run(&t, pos, &n_pos, T_ARGC(nonfinite), nonfinite), CLI_USAGE);
    PT_EQ_INT(t_run(&t, pos, &n_pos, T_ARGC(unknown), unknown), CLI_USAGE);
    PT_EQ_INT(t_run(&t, pos, &n_pos, T_ARGC(hook_err), hook_err), CLI_USAGE);
    PT_EQ_INT(t_run(&t, pos, &n_pos, T_ARGC(too_many), too_many), CLI_USAGE);
    PT_EQ_INT(t_run(&t, pos, &n_pos, T_ARGC(cb_refuses), cb_refuses), CLI_USAGE);
    PT_EQ_INT(t_run(&t, pos, &n_pos, T_ARGC(neg_u64), neg_u64), CLI_USAGE);
}

PT_TEST(help_stops_and_lists_every_row) {
    t_opts t = {0};
    const char *pos[2];
    int n_pos;
    char *help[] = {"t", "-n", "2", "-h", "--bogus"};
    FILE *keep = stdout;
    char *buf = NULL;
    size_t len = 0;
    stdout = open_memstream(&buf, &len);
    PT_ASSERT(stdout != NULL);
    int r = t_run(&t, pos, &n_pos, T_ARGC(help), help);
    fclose(stdout);
    stdout = keep;
    PT_EQ_INT(r, CLI_HELP);
    PT_ASSERT_MSG(!strncmp(buf, "usage: parley t [options] FILE\nabout\n", 37), "%s", buf);
    const char *want[] = {"  --name S              a string\n",
                          "  -n, --count N         an int\n"
                          "                        second line\n",
                          "  --flag                a flag\n",
                          "  --a-very-long-option-name\n                        long\n", "end\n"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        PT_ASSERT_MSG(strstr(buf, want[i]) != NULL, "missing '%s' in:\n%s", want[i], buf);
    free(buf);
}
