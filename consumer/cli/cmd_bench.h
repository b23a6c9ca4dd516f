/*
 * cmd_bench.h -- `parley bench` (cmd_bench.c: the multiturn workload and
 * the --workload switch) and its chat workload (cmd_bench_chat.c); the
 * engine and spec workloads are engine/cli's (eng_cli.h).  Same
 * conventions as eng_cli.h: argv[0] = the subcommand name; returns 0
 * success, 1 runtime failure, 2 usage error; --help prints usage.
 */
#ifndef CMD_BENCH_H
#define CMD_BENCH_H

int bench_cmd(int argc, char **argv);      /* parley bench (cmd_bench.c) */
int bench_cmd_chat(int argc, char **argv); /* parley bench --workload chat (cmd_bench_chat.c) */

#endif
