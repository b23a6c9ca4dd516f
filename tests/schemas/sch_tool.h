/*
 * sch_tool.h -- pieces of the sch_tool program (tests/schemas/sch_tool.c).
 */
#ifndef SCH_TOOL_H
#define SCH_TOOL_H

#include <stdint.h>

/* Build a pseudo-random valid record of kind (0 turn, 1 chunk, 2 result,
 * 3 dead) from seed, encode it and print {"value":VIEW,"hex":"..."} on
 * stdout.  Returns the process exit status (0, or 1 if encoding failed). */
int sch_tool_sample(int kind, uint64_t seed);

#endif /* SCH_TOOL_H */
