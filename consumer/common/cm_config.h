/*
 * cm_config.h -- a command's configuration: one table of properties, three
 * sources, one reference document.  Shared by `parley worker` (its table:
 * consumer/worker/wk_config.h), `parley gateway` (gw_cmd.c) and the demo;
 * `parley chat`, `load`, `batch` and `topics` hold their kafka.* keys in
 * one without a table (cm_client.h's cm_kafka_cli).
 *
 * Purpose.  Every setting a command reads is a row of one static table
 * (name, type, default, range or accepted values, documentation).  The
 * same table validates input, answers lookups and generates the
 * configuration reference (`--print-config-doc`, Markdown), so the docs
 * cannot drift from the code.  An enum row (CM_PROP_ENUM, like
 * librdkafka's string-to-int properties) lists its values in the table,
 * and a value outside them is refused when set, like a bad integer.
 * Any `kafka.X` key is passed through unchanged to librdkafka as property
 * X (bootstrap.servers, SASL/SSL, tuning); which clients get it, and which
 * keys a command refuses, is the Kafka layer's business (cm_kafka.h).
 *
 * Sources and precedence (later wins): the file given with --config (lines
 * `key = value`, `#` comments), then the environment (PARLEY_<KEY>: the key
 * upper-cased with '.' -> '_', e.g. PARLEY_MODEL_PATH; PARLEY_KAFKA_<X>
 * passes kafka.<x> with '_' -> '.' lower-cased), then command-line flags
 * (`--set key=value` or `--key value`).  cm_config_cli applies them in
 * that order; cm_config_set overwrites.
 *
 * Data layout.  A cm_config holds one string value per table row (NULL =
 * default) and a list of kafka.* pairs in insertion order (a repeated key
 * is replaced in place).  Typed getters parse the validated strings.
 *
 * Failure behaviour.  Every error message names the key and where the value
 * came from ("environment PARLEY_X", "file F line N", "flag --set").  Values
 * are type- and range-checked when set; cm_config_validate checks required
 * keys, the table's cross-key rules and the kafka.* properties against
 * librdkafka.  Nothing prints except cm_config_cli.
 *
 * Threading.  A cm_config is built on one thread, then read-only.
 */
#ifndef CM_CONFIG_H
#define CM_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "pl_err.h"

/* Error codes (pl_err.h range -1100). */
#define CM_CONFIG_EINVAL PL_ERR_CODE(PL_ERR_CM, PL_EINVAL) /* bad key or value (message names it) */
#define CM_CONFIG_ENOMEM PL_ERR_CODE(PL_ERR_CM, PL_ENOMEM) /* allocation failed */
#define CM_CONFIG_EIO PL_ERR_CODE(PL_ERR_CM, PL_EIO)       /* configuration file unreadable */

typedef enum cm_prop_type {
    CM_PROP_STR = 0,  /* any string */
    CM_PROP_INT = 1,  /* integer within [min, max] */
    CM_PROP_BOOL = 2, /* true/false/1/0/yes/no/on/off */
    CM_PROP_REQ = 3,  /* string that must be set (non-empty) */
    CM_PROP_ENUM = 4  /* one of the values listed in def (checked when set) */
} cm_prop_type;

/* One row of the property table. */
typedef struct cm_prop {
    const char *name;  /* dotted key, e.g. "worker.topic.turns" */
    cm_prop_type type; /* value type */
    const char *def;   /* default as text ("" = empty); CM_PROP_ENUM: the accepted
                          values separated by '|', the first the default
                          ("auto|cpu|cuda"; "|a|b": "" is one, the default) */
    long long min;     /* CM_PROP_INT: smallest accepted value */
    long long max;     /* CM_PROP_INT: largest accepted value */
    const char *doc;   /* one-paragraph description (Markdown) */
} cm_prop;

typedef struct cm_config cm_config; /* opaque */

/* A table's cross-key checks, run by cm_config_validate after the
 * required keys: 0, or CM_CONFIG_EINVAL with a message naming the keys. */
typedef int (*cm_config_check_fn)(const cm_config *c, char *err, size_t errlen);

/* New configuration over a command's table with every property at its
 * default: props must outlive the configuration; cmd names the command in
 * messages; check (NULL: none) holds the table's cross-key rules.  Returns
 * 0 or CM_CONFIG_ENOMEM. */
int cm_config_new(const cm_prop *props, size_t n, const char *cmd, cm_config_check_fn check,
                  cm_config **out);
void cm_config_free(cm_config *c);

/* Set key to val; origin names the source in messages.  A table key is
 * type/range-checked; kafka.X is stored for librdkafka; anything else is
 * CM_CONFIG_EINVAL ("unknown configuration key"; a configuration without a
 * table takes kafka.* keys only).  Returns 0 or < 0. */
int cm_config_set(cm_config *c, const char *key, const char *val, const char *origin, char *err,
                  size_t errlen);

/* Apply `key=value` (a --set argument). */
int cm_config_set_pair(cm_config *c, const char *pair, const char *origin, char *err,
                       size_t errlen);

/* Read a file of `key = value` lines.  CM_CONFIG_EIO if it cannot be read,
 * CM_CONFIG_EINVAL for a malformed line (file and line in the message). */
int cm_config_load_file(cm_config *c, const char *path, char *err, size_t errlen);

/* Apply PARLEY_* variables of envp (NULL-terminated "NAME=value" array,
 * e.g. environ).  Variables that name no property are ignored. */
int cm_config_load_env(cm_config *c, char *const *envp, char *err, size_t errlen);

/* Final checks: required keys set, the table's cross-key checks, kafka.*
 * accepted by librdkafka.  Returns 0 or CM_CONFIG_EINVAL naming the key. */
int cm_config_validate(const cm_config *c, char *err, size_t errlen);

/* Typed values of table keys (the default when unset).  Asking for a key
 * that is not in the table, or with the wrong type, is a programming error:
 * str returns "" and int/bool return 0. */
const char *cm_config_str(const cm_config *c, const char *key);
long long cm_config_int(const cm_config *c, const char *key);
bool cm_config_bool(const cm_config *c, const char *key);
/* A CM_PROP_ENUM key's value as its position in the row's values (0 for
 * the first); 0 as well for a key that is not an enum (programming error). */
int cm_config_enum(const cm_config *c, const char *key);

/* kafka.* pass-through properties, i < cm_config_kafka_count(c); *name is
 * without the "kafka." prefix. */
size_t cm_config_kafka_count(const cm_config *c);
void cm_config_kafka_at(const cm_config *c, size_t i, const char **name, const char **val);

/* The command line of a command configured by c's table (`parley worker`,
 * `parley gateway`), through the cli_opt parser: `--config FILE` (each
 * file in argv order), then the environment envp, then `--set key=value`
 * and `--KEY value` in argv order, then cm_config_validate.  `--help`
 * prints synopsis and about (cli_cmd texts) and the flags; an error
 * prints "CMD: message" (the message names key and origin).  Unlike the
 * rest of this module it prints (to stdout for --help, else stderr).
 * Returns CLI_OK (c is complete and valid), CLI_HELP (exit 0), CLI_USAGE
 * (exit 2) or CM_CONFIG_CLI_DOC (--print-config-doc: the caller writes the
 * reference; nothing else was applied). */
#define CM_CONFIG_CLI_DOC 3
int cm_config_cli(cm_config *c, const char *synopsis, const char *about, int argc, char **argv,
                  char *const *envp);

/* Write the rows of a table (Markdown: key, type, default, environment,
 * description), the body of a command's configuration reference.  Returns
 * 0 or -1 on a write error. */
int cm_config_doc_table(FILE *f, const cm_prop *props, size_t n);

#endif
