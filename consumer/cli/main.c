/*
 * main.c -- the `parley` binary: one program, many subcommands.
 *
 * Each subcommand lives in the module it belongs to and is reached through
 * the table below; a subcommand receives argv with argv[0] = its own name
 * and returns the process exit status.  Conventions every subcommand keeps:
 *   `parley CMD --help` prints usage to stdout and exits 0;
 *   a usage error prints a message to stderr and returns 2;
 *   a runtime failure prints a message to stderr and returns 1.
 * Unknown commands are a usage error (exit 2).
 */
#include <stdio.h>
#include <string.h>

#include <librdkafka/rdkafka.h>

#include "eng_cli.h"
#include "kv_cache.h"
#include "sch.h"
#include "bt_io.h"
#include "cl_client.h"
#include "cmd_bench.h"
#include "cmd_demo.h"
#include "gw_cmd.h"
#include "wk_worker.h"

typedef struct parley_cmd {
    const char *name;    /* as typed after `parley` */
    const char *summary; /* one line for `parley --help` */
    int (*run)(int argc, char **argv);
} parley_cmd;

static const parley_cmd parley_cmds[] = {
    {"generate", "run a model on a prompt and print the reply and speed", eng_cmd_generate},
    {"mkmodel", "write a synthetic GGUF model (deterministic random weights)", eng_cmd_mkmodel},
    {"inspect", "print a GGUF file's metadata and the engine's view of it", eng_cmd_inspect},
    {"worker", "serve chat turns from Kafka (exactly-once replies, streamed tokens)",
     wk_cmd_worker},
    {"chat", "interactive chat client over the turns/tokens/responses topics", cl_cmd_chat},
    {"load", "load generator: conversations x turns, latency and exactly-once check", cl_cmd_load},
    {"gateway", "OpenAI-compatible HTTP gateway: /v1/chat/completions over Kafka", gw_cmd_gateway},
    {"batch", "OpenAI Batch JSONL in, batch output JSONL out, through the fleet", bt_cmd_batch},
    {"topics", "create the turns, tokens, responses and DLQ topics on a Kafka cluster",
     cl_cmd_topics},
    {"demo",
     "embedded demo: in-process Kafka, the real worker, SmolLM2-135M-Instruct (else synthetic)",
     demo_cmd},
    {"bench", "benchmarks: multiturn (scheduler + cache), chat, engine (kernels), spec", bench_cmd},
};
#define PARLEY_NCMDS (sizeof(parley_cmds) / sizeof(parley_cmds[0]))

static void parley_usage(FILE *f) {
    fprintf(f,
            "parley %s -- serve LLM chat turns from Kafka with an int8 MQA engine\n\n"
            "usage: parley <command> [options]\n"
            "       parley <command> --help\n"
            "       parley --version\n\ncommands:\n",
            PARLEY_VERSION);
    for (size_t i = 0; i < PARLEY_NCMDS; i++)
        fprintf(f, "  %-10s %s\n", parley_cmds[i].name, parley_cmds[i].summary);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        parley_usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
        parley_usage(stdout);
        return 0;
    }
    if (!strcmp(cmd, "--version") || !strcmp(cmd, "-V")) {
        /* "+tls": built with hiredis_ssl, so redis.tls is available */
        printf("parley %s\nlibrdkafka %s\nhiredis %s%s\nmsgpack-c %s\n", PARLEY_VERSION,
               rd_kafka_version_str(), kv_cache_redis_client_version(),
               kv_cache_redis_tls() ? "+tls" : "", sch_msgpack_version());
        return 0;
    }
    for (size_t i = 0; i < PARLEY_NCMDS; i++)
        if (!strcmp(cmd, parley_cmds[i].name)) return parley_cmds[i].run(argc - 1, argv + 1);
    fprintf(stderr, "parley: unknown command '%s' (see 'parley --help')\n", cmd);
    return 2;
}
