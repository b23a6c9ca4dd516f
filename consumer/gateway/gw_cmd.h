/*
 * gw_cmd.h -- `parley gateway`, the gateway's one public entry point
 * (gw_cmd.c).  Everything else of the gateway is private to consumer/gateway
 * (internal/: the HTTP side gw_http.h, the Kafka side gw_hub.h) except the
 * OpenAI codec gw_openai.h, which the batch runner shares.
 */
#ifndef GW_CMD_H
#define GW_CMD_H

/* parley gateway (gw_cmd.c) (argv[0] = the subcommand name; returns 0 success, 1 runtime failure, 2
 * usage error; --help prints usage, as eng_cli.h's commands) */
int gw_cmd_gateway(int argc, char **argv);

#endif
