/*
 * eng_err.h -- the engine's error-message channel: parley's one error
 * convention (pl_err.h: code ranges per module, pl_errf, PL_ERR_LEN,
 * pl_errwrap / pl_err_recode to keep a cause when wrapping).
 *
 * Engine functions report failure by returning a negative code of their
 * module's range and writing a human-readable message into a caller buffer
 * (char *err, size_t errlen); either may be NULL/0 when the caller does not
 * want the text.  The formatter is pl_errf (there is no engine-specific
 * one); this header only brings pl_err.h to the engine's sources.
 */
#ifndef ENG_ERR_H
#define ENG_ERR_H
#include <stddef.h>

#include "pl_err.h"

#endif
