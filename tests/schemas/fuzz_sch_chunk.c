/*
 * fuzz_sch_chunk.c -- libFuzzer target for the TokenChunk decoder (and its
 * encoder round trip); see fuzz_sch.h for the checked properties.
 */
#include "fuzz_sch.h"

SCH_FUZZ_TARGET(chunk)
