/*
 * fuzz_sch_turn.c -- libFuzzer target for the ChatTurn decoder (and its
 * encoder round trip); see fuzz_sch.h for the checked properties.
 */
#include "fuzz_sch.h"

SCH_FUZZ_TARGET(turn)
