/*
 * wk_offsets.h -- per-partition tracking of consumed but unfinished input
 * records, giving the offset a transaction may commit.
 *
 * Purpose.  The worker finishes turns out of order (conversations run
 * concurrently), but Kafka commits one offset per partition meaning "every
 * record below this one is done".  wk_offsets records each consumed offset,
 * marks it done when its output (TurnResult or DLQ record) is in the
 * transaction being built, and reports the commit position: the lowest
 * unfinished offset, or one past the last consumed offset when none is
 * unfinished.
 *
 * Data layout.  One window per partition number (array indexed by
 * partition): a ring of (offset, done) in consumption order; finished
 * entries are popped from the front, so the memory is the span between the
 * oldest unfinished record and the newest consumed one.  Offsets of one
 * partition must increase (gaps are fine: compacted topics, transaction
 * markers).
 *
 * Threading.  Not thread-safe: the worker's poll thread owns it.
 * Failure behaviour.  Functions return 0 or a negative WK_OFF_E* code.
 */
#ifndef WK_OFFSETS_H
#define WK_OFFSETS_H

#include <stdint.h>

#define WK_OFF_EINVAL (-1201)        /* bad partition, offset not increasing, unknown offset */
#define WK_OFF_ENOMEM (-1202)        /* allocation failed */
#define WK_OFF_MAX_PARTITIONS 100000 /* highest partition number + 1 accepted */

typedef struct wk_offsets wk_offsets; /* opaque */

int wk_offsets_new(wk_offsets **out);
void wk_offsets_free(wk_offsets *o);

/* Record a consumed record (unfinished).  WK_OFF_EINVAL when offset is not
 * above the last one recorded for the partition. */
int wk_offsets_add(wk_offsets *o, int32_t partition, int64_t offset);

/* Mark a recorded offset finished.  WK_OFF_EINVAL if it is not tracked
 * (never added, or the partition was reset since). */
int wk_offsets_done(wk_offsets *o, int32_t partition, int64_t offset);

/* Offset to commit for the partition: lowest unfinished, else last + 1;
 * -1 when nothing was consumed since the last reset. */
int64_t wk_offsets_position(const wk_offsets *o, int32_t partition);

/* Unfinished records of the partition. */
int64_t wk_offsets_pending(const wk_offsets *o, int32_t partition);

/* Forget a partition (revoked or lost). */
void wk_offsets_reset(wk_offsets *o, int32_t partition);

#endif
