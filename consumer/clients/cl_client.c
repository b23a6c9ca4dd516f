/*
 * cl_client.c -- what the `parley chat`, `parley load` and `parley demo`
 * clients share beyond the Kafka plumbing (consumer/common/cm_client.c):
 * the conversation history and the numeric option parsers (see
 * cl_client.h).
 */
#define _POSIX_C_SOURCE 200809L
#include "cl_client.h"

#include <stdlib.h>
#include <string.h>

int cl_history_push(cl_history *h, sch_role role, const char *content, size_t len) {
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 8;
        sch_message *m = realloc(h->msgs, cap * sizeof *m);
        if (!m) return -1;
        h->msgs = m;
        h->cap = cap;
    }
    char *copy = malloc(len + 1);
    if (!copy) return -1;
    if (len) memcpy(copy, content, len);
    copy[len] = '\0';
    memset(&h->msgs[h->n], 0, sizeof h->msgs[h->n]); /* fields added to sch_message stay absent */
    h->msgs[h->n].role = role;
    h->msgs[h->n].content.ptr = copy;
    h->msgs[h->n].content.len = len;
    h->n++;
    return 0;
}

void cl_history_free(cl_history *h) {
    for (size_t i = 0; i < h->n; i++) free((char *)h->msgs[i].content.ptr);
    free(h->msgs);
    h->msgs = NULL;
    h->n = h->cap = 0;
}

int cl_parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out) {
    return cli_parse_u64(s, lo, hi, out);
}

int cl_parse_range(const char *s, uint64_t lo, uint64_t hi, uint64_t *min, uint64_t *max) {
    char tmp[64];
    size_t n = s ? strlen(s) : 0;
    if (n == 0 || n >= sizeof tmp) return -1;
    memcpy(tmp, s, n + 1);
    char *colon = strchr(tmp, ':');
    if (colon) *colon = '\0';
    if (cl_parse_u64(tmp, lo, hi, min) != 0) return -1;
    if (!colon) {
        *max = *min;
        return 0;
    }
    if (cl_parse_u64(colon + 1, lo, hi, max) != 0 || *max < *min) return -1;
    return 0;
}
