/*
 * fuzz_sch_cancel.c -- libFuzzer target for the CancelTurn decoder (1.4)
 * and its encoder round trip; see fuzz_sch.h for the checked properties.
 */
#include "fuzz_sch.h"

SCH_FUZZ_TARGET(cancel)
