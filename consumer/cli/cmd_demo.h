/*
 * cmd_demo.h -- `parley demo` (cmd_demo.c): the embedded demo, the real
 * worker behind librdkafka's mock cluster with the chat clients in the
 * same process.  It sits in consumer/cli, above the parts it joins (the
 * worker and the clients), so neither of those depends on the other.
 */
#ifndef CMD_DEMO_H
#define CMD_DEMO_H

/* parley demo (argv[0] = the subcommand name; returns 0 success, 1 runtime
 * failure, 2 usage error; --help prints usage, as eng_cli.h's commands) */
int demo_cmd(int argc, char **argv);

#endif
