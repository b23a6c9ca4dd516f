/*
 * eng_cli.h -- the engine's subcommands of the `parley` binary.
 *
 * Each takes argv with argv[0] = the subcommand name and returns the exit
 * status: 0 success, 1 runtime failure, 2 usage error.  `--help` prints
 * usage to stdout and returns 0.
 */
#ifndef ENG_CLI_H
#define ENG_CLI_H

#include <stdint.h>

int eng_cmd_generate(int argc, char **argv); /* parley generate */
int eng_cmd_mkmodel(int argc, char **argv);  /* parley mkmodel */
int eng_cmd_inspect(int argc, char **argv);  /* parley inspect */

/* The ids of `parley generate --random-prompt n --seed seed` (xorshift64
 * from seed * 0x9E3779B97F4A7C15 + 1, each state mod n_vocab), so that
 * benchmarks can feed other engines the same prompt (tests/bench/). */
void eng_random_prompt(int32_t *ids, int n, int n_vocab, uint64_t seed);

#endif
