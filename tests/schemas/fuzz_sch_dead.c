/*
 * fuzz_sch_dead.c -- libFuzzer target for the DeadLetter decoder (and its
 * encoder round trip); see fuzz_sch.h for the checked properties.
 */
#include "fuzz_sch.h"

SCH_FUZZ_TARGET(dead)
