/*
 * kv_budget.h -- a test allocator: the malloc allocator with a budget of
 * blocks, so a test can run the KV storage out of blocks at a chosen point.
 *
 *     kv_budget b = {.left = 5};
 *     eng_kv_allocator_malloc(&b.inner, &layout);
 *     eng_kv_allocator a = kv_budget_allocator(&b);
 *     ...
 *     eng_kv_allocator_malloc_free(&b.inner);
 */
#ifndef KV_BUDGET_H
#define KV_BUDGET_H

#include "eng_kv.h"

typedef struct kv_budget {
    eng_kv_allocator inner; /* malloc allocator */
    int left;               /* blocks still allowed */
} kv_budget;

/* The allocator that takes blocks from b->inner while b->left allows. */
eng_kv_allocator kv_budget_allocator(kv_budget *b);

#endif
