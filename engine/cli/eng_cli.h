/*
 * eng_cli.h -- the engine's subcommands of the `parley` binary (library
 * parley_cli, linked only by the binary; not part of parley_engine).  Code
 * that wants a model file calls eng_mkmodel (eng_mkmodel.h), not the
 * command.
 *
 * Each takes argv with argv[0] = the subcommand name and returns the exit
 * status: 0 success, 1 runtime failure, 2 usage error.  `--help` prints
 * usage to stdout and returns 0.
 */
#ifndef ENG_CLI_H
#define ENG_CLI_H

int eng_cmd_generate(int argc, char **argv); /* parley generate */
int eng_cmd_mkmodel(int argc, char **argv);  /* parley mkmodel */
int eng_cmd_inspect(int argc, char **argv);  /* parley inspect */
/* parley bench --workload engine (bench_engine.c) and --workload spec
 * (bench_spec.c): engine-only benchmarks, reached through consumer/cli's
 * `parley bench`, which owns the --workload switch. */
int eng_cmd_bench_engine(int argc, char **argv);
int eng_cmd_bench_spec(int argc, char **argv);

#endif
