/*
 * cl_client.h -- consumer/clients: `parley chat`, `load` and `topics`,
 * and what they share (with the demo, consumer/cli/cmd_demo.c) beyond the Kafka plumbing of
 * consumer/common/cm_client.h (which this header includes).
 *
 * Purpose.  The clients keep each conversation's message history to send
 * in full every turn, and parse numeric options.
 *
 * Data layout.  A cl_history is a growable array of sch_message whose
 * contents are malloc'd copies owned by the history.
 *
 * Threading.  Single-threaded.
 *
 * Failure behaviour.  Functions return 0 or -1; nothing here exits.
 */
#ifndef CL_CLIENT_H
#define CL_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include <librdkafka/rdkafka.h>

#include "cm_client.h"
#include "pl_err.h"
#include "sch.h"

/* The clients' error codes (pl_err.h range -1500); their Kafka plumbing
 * reports cm_kafka.h's CM_KAFKA_E*. */
#define CL_ETIMEDOUT PL_ERR_CODE(PL_ERR_CL, PL_ETIMEDOUT) /* start-up deadline passed */

/* Conversation history sent with every turn. */
typedef struct cl_history {
    sch_message *msgs; /* messages oldest first; content malloc'd here */
    size_t n;          /* messages in use */
    size_t cap;        /* messages allocated */
} cl_history;

/* Append a message (content copied).  Returns 0 or -1 out of memory. */
int cl_history_push(cl_history *h, sch_role role, const char *content, size_t len);

/* Free every message and the array; the history is empty afterwards. */
void cl_history_free(cl_history *h);

/* Parse a whole unsigned integer in [lo, hi] (cli_parse_u64); -1 otherwise. */
int cl_parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out);

/* Parse "MIN:MAX" (or "N" for N:N) with lo <= MIN <= MAX <= hi; -1
 * otherwise. */
int cl_parse_range(const char *s, uint64_t lo, uint64_t hi, uint64_t *min, uint64_t *max);

/* The clients' subcommands of `parley` (argv[0] = the subcommand name; returns 0 success, 1 runtime failure, 2
 * usage error; --help prints usage, as eng_cli.h's commands) */
int cl_cmd_chat(int argc, char **argv);   /* parley chat (cl_chat.c) */
int cl_cmd_load(int argc, char **argv);   /* parley load (cl_load.c) */
int cl_cmd_topics(int argc, char **argv); /* parley topics (cm_topics.c) */

#endif
