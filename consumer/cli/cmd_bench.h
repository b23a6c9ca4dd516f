/*
 * wk_cli.h -- the consumer module's subcommands of the `parley` binary
 * (same conventions as eng_cli.h: argv[0] = the subcommand name; returns
 * 0 success, 1 runtime failure, 2 usage error; --help prints usage).
 */
#ifndef WK_CLI_H
#define WK_CLI_H

int wk_cmd_bench(int argc, char **argv);  /* parley bench (cmd_bench.c) */
int wk_bench_chat(int argc, char **argv); /* parley bench --workload chat (cmd_bench_chat.c) */
int wk_bench_engine(int argc,
                    char **argv);          /* parley bench --workload engine (cmd_bench_engine.c) */
int wk_bench_spec(int argc, char **argv);  /* parley bench --workload spec (cmd_bench_spec.c) */
int wk_cmd_worker(int argc, char **argv);  /* parley worker (wk_cmd_worker.c) */
int cl_cmd_chat(int argc, char **argv);    /* parley chat (cl_chat.c) */
int cl_cmd_load(int argc, char **argv);    /* parley load (cl_load.c) */
int cl_cmd_demo(int argc, char **argv);    /* parley demo (cl_demo.c) */
int gw_cmd_gateway(int argc, char **argv); /* parley gateway (gw_cmd.c) */
int bt_cmd_batch(int argc, char **argv);   /* parley batch (bt_batch.c) */
int cl_cmd_topics(int argc, char **argv);  /* parley topics (cl_topics.c) */

#endif
