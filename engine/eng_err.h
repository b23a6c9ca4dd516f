/*
 * eng_err.h -- the engine's error-message channel: parley's one error
 * convention (pl_err.h: code ranges per module, pl_errf, PL_ERR_LEN,
 * pl_errwrap / pl_err_recode to keep a cause when wrapping).
 *
 * Engine functions report failure by returning a negative code of their
 * module's range and writing a human-readable message into a caller buffer
 * (char *err, size_t errlen); either may be NULL/0 when the caller does not
 * want the text.  The formatter is pl_errf (there is no engine-specific
 * one).
 *
 * The engine's own codes (range -500) live here rather than in eng_model.h,
 * so the model and the backends beneath it both use them without including
 * each other.  The parts with ranges of their own (gguf, tok, template,
 * config, kv, sampler, scheduler, constraint) define theirs in their
 * headers.
 */
#ifndef ENG_ERR_H
#define ENG_ERR_H
#include <stddef.h>

#include "pl_err.h"

#define ENG_EINVAL \
    PL_ERR_CODE(PL_ERR_ENG, PL_EINVAL) /* bad argument or unsupported model content */
#define ENG_ENOMEM PL_ERR_CODE(PL_ERR_ENG, PL_ENOMEM) /* host memory or KV blocks exhausted */
#define ENG_EIO PL_ERR_CODE(PL_ERR_ENG, PL_EIO)       /* file could not be read / parsed */

#endif
