/*
 * bt_io.h -- the files of `parley batch`: the output JSONL (append-only,
 * one fsync'd line per request), its resume state and the error file.
 *
 * Purpose.  Exactly one output line per custom_id, whatever is killed
 * when.  The output file is the only record of what is done: on start
 * every complete line's custom_id is read back (a last line without its
 * newline, cut by a crash, is truncated away) and those requests are not
 * sent again.  Each new line is written with one write(2) on an O_APPEND
 * descriptor and fsync'd before the next request's line, so a kill -9
 * leaves whole lines only.
 *
 * The state file (OUTPUT.state, written once with fsync + rename before
 * the first turn is produced) holds the batch id, from which every turn
 * id is derived (`b-<batch id>-<fnv64(custom_id)>`), and the end offsets
 * the responses and DLQ topics had then.  A rerun reads results from those
 * offsets, so replies committed while no batch process was running are
 * still found and not asked for again.  It also holds how far turns were
 * sent (sent_max: each run sends the requests still missing in the order
 * of their custom_id hash, and saves the hash of the last one it is about
 * to send before producing them) and whether `--cancel` ran: then the
 * requests without a line that may have been sent get a CancelTurn and
 * wait for their result, and the others get a `cancelled` line at once.
 *
 * Threading.  Single-threaded.
 *
 * Ownership.  bt_out owns its descriptor and the set of done ids; the
 * caller frees both with bt_out_close.
 *
 * Failure behaviour.  Functions return 0 or -1 with a message in err;
 * nothing exits.
 */
#ifndef BT_IO_H
#define BT_IO_H

#include <stddef.h>
#include <stdint.h>

#include <librdkafka/rdkafka.h>

#include "pl_err.h"

/* The batch runner's error codes (pl_err.h range -1700). */
#define BT_EINVAL PL_ERR_CODE(PL_ERR_BT, PL_EINVAL)       /* a bad line, option or state file */
#define BT_ENOMEM PL_ERR_CODE(PL_ERR_BT, PL_ENOMEM)       /* out of memory */
#define BT_EIO PL_ERR_CODE(PL_ERR_BT, PL_EIO)             /* a file cannot be read or written */
#define BT_ETIMEDOUT PL_ERR_CODE(PL_ERR_BT, PL_ETIMEDOUT) /* start-up deadline passed */
#define BT_EKAFKA (PL_ERR_BT - 10)                        /* Kafka failed */

/* The set of custom_ids already in the output (by their 64-bit hash). */
typedef struct bt_out {
    int fd;         /* output, O_APPEND */
    uint64_t *done; /* open-addressing table of fnv64(custom_id); 0 = empty */
    size_t cap;     /* slots (power of two) */
    size_t n_done;  /* ids in the table */
    size_t n_lines; /* complete lines found at open */
} bt_out;

/* Open (create) the output, drop a torn last line, read the done ids. */
int bt_out_open(bt_out *o, const char *path, char *err, size_t errlen);

/* 1 when custom_id's hash is in the output. */
int bt_out_has(const bt_out *o, uint64_t h);

/* Add h to the set (no file involved; also for a bare set with fd -1). */
int bt_out_mark(bt_out *o, uint64_t h);

/* Append one line (text without the newline) and fsync; marks h done. */
int bt_out_write(bt_out *o, uint64_t h, const char *line, char *err, size_t errlen);

void bt_out_close(bt_out *o);

/* Hash of a custom_id (FNV-1a 64, never 0). */
uint64_t bt_id_hash(const char *custom_id, size_t len);

/* Key of an input line without a usable custom_id (its line number). */
uint64_t bt_line_hash(long line_no);

/* Resume state. */
typedef struct bt_state {
    char batch_id[32];                     /* hex id of this batch */
    rd_kafka_topic_partition_list_t *from; /* offsets to read results from */
    uint64_t sent_max; /* every turn ever produced has its custom_id hash <= this (saved
                          before producing; turns go out in hash order; UINT64_MAX
                          when a state written before sent_max existed is loaded) */
    int cancel;        /* `--cancel` began: no turn is sent again, the rest is cancelled */
} bt_state;

/* Read PATH; 1 = loaded, 0 = no such file, -1 = unreadable/corrupt. */
int bt_state_load(const char *path, bt_state *s, char *err, size_t errlen);

/* Write PATH atomically (tmp + fsync + rename + fsync of the directory). */
int bt_state_save(const char *path, const bt_state *s, char *err, size_t errlen);

void bt_state_free(bt_state *s);

/* parley batch (bt_batch.c) (argv[0] = the subcommand name; returns 0 success, 1 runtime failure, 2
 * usage error; --help prints usage, as eng_cli.h's commands) */
int bt_cmd_batch(int argc, char **argv);

#endif
