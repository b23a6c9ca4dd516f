/*
 * pl_err.h -- parley's one error convention, for every module.
 *
 * Purpose.  Library functions (schemas, kernels, engine, cache, consumer)
 * report failure the same way, so a caller can tell from a code alone
 * which module failed and what kind of failure it was, and a message
 * that wraps another still says what went wrong underneath.
 *
 * The convention.
 *   1. Return 0 on success, a negative code on failure.  Codes are macros
 *      (or, for the wire set, an enum) named MODULE_E<WHAT>.
 *   2. Each module owns one range of 100 values (table below); no two
 *      families share a value, so pl_err_module() names the module of any
 *      code.  Inside an engine/cache/consumer range, the first nine
 *      offsets are the generic classes (base - PL_EINVAL ... base -
 *      PL_ETIMEDOUT): a module's "bad argument" is always base - 1, its
 *      "out of memory" base - 2, and so on; module-specific codes start at
 *      base - 10.  pl_err_class() maps any code to its class.
 *   3. The schemas range (-1..-99) is the wire error set (sch.h): DeadLetter
 *      error_code and TurnResult error.code carry these names, and their
 *      values are frozen by the spec (schemas/README.md); it keeps its own
 *      order and pl_err_class() knows its two generic members.
 *   4. Messages go into a caller buffer (char *err, size_t errlen), one
 *      line, no trailing newline.  err may be NULL or errlen 0: the code is
 *      still returned.  pl_errf is the only formatter; buffers the caller
 *      declares for it are PL_ERR_LEN bytes (messages longer are cut).
 *   5. Wrapping keeps the cause.  A function that fails because a callee
 *      failed (a) keeps the callee's message as the tail of its own,
 *      "what: cause" (pl_errwrap formats the prefix in front of the text
 *      already in err), and (b) returns a code of its own range whose class
 *      is the cause's (pl_err_recode): an out-of-memory deep in the GGUF
 *      reader is still "out of memory" from eng_model_load, a truncated
 *      file is ENG_EIO.  Codes are never passed up across a module
 *      boundary unchanged, so a caller compares only against its callee's
 *      own header.
 *
 * Ranges (base; codes are base - 1 .. base - 99):
 *       0  schemas  sch_err, the wire set (frozen values)
 *    -100  engine/gguf      ENG_GGUF_E*
 *    -200  engine/tok       ENG_TOK_E*
 *    -300  engine/tok tmpl  ENG_TMPL_E*
 *    -400  engine/model cfg ENG_CFG_E*
 *    -500  engine/model     ENG_E* (eng_model.h)
 *    -600  engine/model kv  ENG_KV_E*
 *    -700  engine/sched smp ENG_SAMPLER_E*
 *    -800  engine/sched     ENG_SCHED_E*
 *    -900  cache            KV_E*
 *   -1000  kernels/cuda     KERN_CUDA_E*
 *   -1100  consumer common  CM_CONFIG_E* (cm_config.h: a command's configuration)
 *   -1200  consumer offsets WK_OFF_E*
 *   -1300  consumer worker  WK_E*
 *   -1400  engine/constraint ENG_CONSTRAINT_E*
 *   -1500  consumer clients CL_E*  (cl_client.h)
 *   -1600  consumer gateway GW_E*  (gw_cmd.h)
 *   -1700  consumer batch   BT_E*  (bt_io.h)
 *   -1800  kernels/cpu      KERN_E* (kern_isa.h)
 *   -1900  commands         CLI_E* (cli_opt.h: the option parser and the
 *                           commands of engine/cli and consumer/cli)
 *   -2000  consumer kafka   CM_KAFKA_E* (cm_kafka.h: the Kafka layer every
 *                           command builds its clients through)
 * The -1100 range is consumer/common: the configuration tables the worker,
 * the gateway and the demo share (cm_config.h); the -2000 range is
 * consumer/common's Kafka layer (cm_kafka.h), through which every command
 * builds its Kafka clients.
 *
 * A literal number is never a code (tests/py/test_format.py checks every
 * pl_errf / pl_errwrap / cm_startup_errf call outside this file).
 *
 * Threading.  Pure functions; the buffers are the caller's.
 */
#ifndef PL_ERR_H
#define PL_ERR_H

#include <stddef.h>

/* Size of an error-message buffer (char err[PL_ERR_LEN]). */
#define PL_ERR_LEN 256

/* Range bases (see the table above). */
#define PL_ERR_SCH 0
#define PL_ERR_GGUF (-100)
#define PL_ERR_TOK (-200)
#define PL_ERR_TMPL (-300)
#define PL_ERR_CFG (-400)
#define PL_ERR_ENG (-500)
#define PL_ERR_ENGKV (-600)
#define PL_ERR_SAMPLER (-700)
#define PL_ERR_SCHED (-800)
#define PL_ERR_KV (-900)
#define PL_ERR_KERN_CUDA (-1000)
#define PL_ERR_CM (-1100)
#define PL_ERR_WK_OFF (-1200)
#define PL_ERR_WK (-1300)
#define PL_ERR_CONSTRAINT (-1400)
#define PL_ERR_CL (-1500)
#define PL_ERR_GW (-1600)
#define PL_ERR_BT (-1700)
#define PL_ERR_KERN (-1800)
#define PL_ERR_CLI (-1900)
#define PL_ERR_CM_KAFKA (-2000)

/* Generic classes: a code's offset below its base (1..9), and what
 * pl_err_class returns (as a positive number; 0 = success). */
#define PL_EINVAL 1    /* bad argument or unusable input */
#define PL_ENOMEM 2    /* allocation failed or a pool is exhausted */
#define PL_EIO 3       /* read/open/connect failed, malformed file */
#define PL_ENOSPC 4    /* output did not fit (the size needed is reported) */
#define PL_ENOTFOUND 5 /* no such key, id, entry */
#define PL_ETYPE 6     /* value of the wrong type or out of its range */
#define PL_ECLOSED 7   /* the object is closing or closed */
#define PL_EFULL 8     /* a fixed table is full */
#define PL_ETIMEDOUT 9 /* a wait ran out of time */
#define PL_EOTHER 10   /* module-specific (offset >= 10) */

/* Code of class cls (PL_E*) in the range at base. */
#define PL_ERR_CODE(base, cls) ((base) - (cls))

/* Format a message into err (when err && errlen) and return code. */
int pl_errf(char *err, size_t errlen, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Put "<fmt...>: <what err holds now>" into err (when err && errlen) and
 * return code: wraps a callee's message, keeping it as the cause.  An
 * empty err gives just the prefix. */
int pl_errwrap(char *err, size_t errlen, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Class of a code (PL_EINVAL..PL_ETIMEDOUT, PL_EOTHER; 0 for code >= 0). */
int pl_err_class(int code);

/* Code in the range at base with the class of cause when that class is
 * generic, else fallback (a code of the caller's own range).  0 for 0. */
int pl_err_recode(int cause, int base, int fallback);

/* Name of the module whose range holds code ("schemas", "gguf", "tok",
 * ..., "unknown"); "ok" for 0. */
const char *pl_err_module(int code);

#endif
