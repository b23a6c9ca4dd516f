/*
 * gw_cmd.h -- `parley gateway`, the gateway's one public entry point
 * (gw_cmd.c).  Everything else of the gateway is private to consumer/gateway
 * (internal/: the HTTP side gw_http.h, the Kafka side gw_hub.h, the
 * Responses API gw_responses.h and its Kafka store gw_store.h).  The
 * OpenAI mapping it serves is its sibling part consumer/openai
 * (oa_openai.h), which the batch runner shares.
 */
#ifndef GW_CMD_H
#define GW_CMD_H

#include "pl_err.h"

/* The gateway's error codes (pl_err.h range -1600). */
#define GW_EINVAL PL_ERR_CODE(PL_ERR_GW, PL_EINVAL) /* bad configuration or request */
#define GW_ENOMEM PL_ERR_CODE(PL_ERR_GW, PL_ENOMEM) /* out of memory */
#define GW_EKAFKA (PL_ERR_GW - 10)                  /* the hub's Kafka clients failed */
#define GW_EHTTP (PL_ERR_GW - 11)                   /* the HTTP server could not start */

/* parley gateway (gw_cmd.c) (argv[0] = the subcommand name; returns 0 success, 1 runtime failure, 2
 * usage error; --help prints usage, as eng_cli.h's commands) */
int gw_cmd_gateway(int argc, char **argv);

#endif
