/* kv_budget.c -- the block-budget test allocator (kv_budget.h). */
#include "kv_budget.h"

static void *kv_budget_alloc(void *ctx, int kind) {
    kv_budget *b = ctx;
    if (b->left <= 0) return NULL;
    b->left--;
    return b->inner.alloc(b->inner.ctx, kind);
}

static void kv_budget_release(void *ctx, int kind, void *blk) {
    kv_budget *b = ctx;
    b->left++;
    b->inner.release(b->inner.ctx, kind, blk);
}

eng_kv_allocator kv_budget_allocator(kv_budget *b) {
    eng_kv_allocator a = {b, kv_budget_alloc, kv_budget_release, NULL};
    return a;
}
