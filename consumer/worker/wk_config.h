/*
 * wk_config.h -- the configuration of `parley worker`: its property table
 * (grouped by prefix: `worker.*` topics, transactions, flow control;
 * `model.*`; `scheduler.*`; `cache.*` the host-RAM KV pool; `redis.*` the
 * Redis tier; any `kafka.X` passed to librdkafka, consumer-only properties
 * to the consumer, producer-only ones to the producers, `kafka.consumer.X`
 * / `kafka.producer.X` forcing one side), its cross-key rules and its
 * reference document (consumer/CONFIG.md).  The sources, validation and
 * lookups are cm_config.h's.
 */
#ifndef WK_CONFIG_H
#define WK_CONFIG_H

#include <stddef.h>
#include <stdio.h>

#include "cm_config.h"

/* The table: *n gets its row count. */
const cm_prop *wk_config_props(size_t *n);

/* New worker configuration with every property at its default, checked
 * with the worker's cross-key rules (KV pause/resume marks, speculative
 * mode and n-gram bounds, redis.* keys that go together).  Returns 0 or
 * CM_CONFIG_ENOMEM. */
int wk_config_new(cm_config **out);

/* Write the worker's configuration reference (Markdown) to f.  Returns 0
 * or -1 on a write error. */
int wk_config_doc(FILE *f);

#endif
