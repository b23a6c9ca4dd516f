/*
 * wk_config.h -- configuration of `parley worker`: one table of properties,
 * three sources, one reference document.
 *
 * Purpose.  Every setting the worker reads is a row of one static table
 * (name, type, default, range, documentation).  The same table validates
 * input, answers lookups and generates the configuration reference
 * (`parley worker --print-config-doc`, Markdown), so the docs cannot drift
 * from the code.  Properties are grouped by prefix: `worker.*` (topics,
 * transactions, flow control), `model.*`, `scheduler.*`, `cache.*` (host RAM
 * KV pool), `redis.*` (the Redis tier).  Any `kafka.X` key is passed through
 * unchanged to librdkafka as property X (bootstrap.servers, SASL/SSL,
 * tuning) to the clients it applies to (consumer-only properties to the
 * consumer, producer-only ones to the producers; `kafka.consumer.X` /
 * `kafka.producer.X` force one side).
 *
 * Sources and precedence (later wins): the file given with --config (lines
 * `key = value`, `#` comments), then the environment (PARLEY_<KEY>: the key
 * upper-cased with '.' -> '_', e.g. PARLEY_MODEL_PATH; PARLEY_KAFKA_<X>
 * passes kafka.<x> with '_' -> '.' lower-cased), then command-line flags
 * (`--set key=value` or `--key value`).  The caller applies them in that
 * order; wk_config_set overwrites.
 *
 * Data layout.  A wk_config holds one string value per table row (NULL =
 * default) and a list of kafka.* pairs in insertion order (a repeated key
 * is replaced in place).  Typed getters parse the validated strings.
 *
 * Failure behaviour.  Every error message names the key and where the value
 * came from ("environment PARLEY_X", "file F line N", "flag --set").  Values
 * are type- and range-checked when set; wk_config_validate checks required
 * keys and the kafka.* properties against librdkafka.  Nothing prints.
 *
 * Threading.  A wk_config is built on one thread, then read-only.
 */
#ifndef WK_CONFIG_H
#define WK_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#define WK_CONFIG_EINVAL (-1101) /* bad key or value (message names it) */
#define WK_CONFIG_ENOMEM (-1102) /* allocation failed */
#define WK_CONFIG_EIO (-1103)    /* configuration file unreadable */

typedef enum wk_prop_type {
    WK_PROP_STR = 0,  /* any string */
    WK_PROP_INT = 1,  /* integer within [min, max] */
    WK_PROP_BOOL = 2, /* true/false/1/0/yes/no/on/off */
    WK_PROP_REQ = 3   /* string that must be set (non-empty) */
} wk_prop_type;

/* One row of the property table. */
typedef struct wk_prop {
    const char *name;  /* dotted key, e.g. "worker.topic.turns" */
    wk_prop_type type; /* value type */
    const char *def;   /* default as text ("" = empty) */
    long long min;     /* WK_PROP_INT: smallest accepted value */
    long long max;     /* WK_PROP_INT: largest accepted value */
    const char *doc;   /* one-paragraph description (Markdown) */
} wk_prop;

typedef struct wk_config wk_config; /* opaque */

/* The table: *n gets its row count. */
const wk_prop *wk_config_props(size_t *n);

/* New configuration with every property at its default.  Returns 0 or
 * WK_CONFIG_ENOMEM. */
int wk_config_new(wk_config **out);

/* New configuration over another command's table (`parley gateway`):
 * props must outlive the configuration; cmd names the command in
 * messages.  The worker-only cross-key checks of wk_config_validate apply
 * only to a table that has those keys.  Returns 0 or WK_CONFIG_ENOMEM. */
int wk_config_new_props(const wk_prop *props, size_t n, const char *cmd, wk_config **out);
void wk_config_free(wk_config *c);

/* Set key to val; origin names the source in messages.  A table key is
 * type/range-checked; kafka.X is stored for librdkafka; anything else is
 * WK_CONFIG_EINVAL ("unknown configuration key").  Returns 0 or < 0. */
int wk_config_set(wk_config *c, const char *key, const char *val, const char *origin, char *err,
                  size_t errlen);

/* Apply `key=value` (a --set argument). */
int wk_config_set_pair(wk_config *c, const char *pair, const char *origin, char *err,
                       size_t errlen);

/* Read a file of `key = value` lines.  WK_CONFIG_EIO if it cannot be read,
 * WK_CONFIG_EINVAL for a malformed line (file and line in the message). */
int wk_config_load_file(wk_config *c, const char *path, char *err, size_t errlen);

/* Apply PARLEY_* variables of envp (NULL-terminated "NAME=value" array,
 * e.g. environ).  Variables that name no property are ignored. */
int wk_config_load_env(wk_config *c, char *const *envp, char *err, size_t errlen);

/* Final checks: required keys set, kafka.* accepted by librdkafka.
 * Returns 0 or WK_CONFIG_EINVAL naming the key. */
int wk_config_validate(const wk_config *c, char *err, size_t errlen);

/* Typed values of table keys (the default when unset).  Asking for a key
 * that is not in the table, or with the wrong type, is a programming error:
 * str returns "" and int/bool return 0. */
const char *wk_config_str(const wk_config *c, const char *key);
long long wk_config_int(const wk_config *c, const char *key);
bool wk_config_bool(const wk_config *c, const char *key);

/* kafka.* pass-through properties, i < wk_config_kafka_count(c); *name is
 * without the "kafka." prefix. */
size_t wk_config_kafka_count(const wk_config *c);
void wk_config_kafka_at(const wk_config *c, size_t i, const char **name, const char **val);

/* The command line of a command configured by c's table (`parley worker`,
 * `parley gateway`), through the cli_opt parser: `--config FILE` (each
 * file in argv order), then the environment envp, then `--set key=value`
 * and `--KEY value` in argv order, then wk_config_validate.  `--help`
 * prints synopsis and about (cli_cmd texts) and the flags; an error
 * prints "CMD: message" (the message names key and origin).  Unlike the
 * rest of this module it prints (to stdout for --help, else stderr).
 * Returns CLI_OK (c is complete and valid), CLI_HELP (exit 0), CLI_USAGE
 * (exit 2) or WK_CONFIG_CLI_DOC (--print-config-doc: the caller writes the
 * reference; nothing else was applied). */
#define WK_CONFIG_CLI_DOC 3
int wk_config_cli(wk_config *c, const char *synopsis, const char *about, int argc, char **argv,
                  char *const *envp);

/* Write the configuration reference (Markdown) to f.  Returns 0 or -1 on a
 * write error. */
int wk_config_doc(FILE *f);

/* Write only the table rows of props (Markdown, as in wk_config_doc). */
int wk_config_doc_table(FILE *f, const wk_prop *props, size_t n);

#endif
