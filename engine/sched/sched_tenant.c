/*
 * sched_tenant.c -- weighted round-robin between namespaces within a
 * service class (eng_sched.h "Tenants").  Loop thread only.
 */
#include <stdlib.h>
#include <string.h>

#include "sched_int.h"

static int tenant_find(const eng_sched *s, const char *ns, size_t len) {
    for (int i = 0; i < s->n_tenants; i++)
        if (s->tenants[i].ns_len == len && !memcmp(s->tenants[i].ns, ns, len)) return i;
    return -1;
}

static double tenant_weight(const eng_sched *s, const char *ns, size_t len) {
    for (int i = 0; i < s->cfg.n_tenant_weights; i++) {
        const eng_sched_tenant_weight *w = &s->cfg.tenant_weights[i];
        if (strlen(w->ns) == len && !memcmp(w->ns, ns, len)) return w->weight;
    }
    return 1.0;
}

int sched_tenant_refresh(eng_sched *s) {
    sched_req *lists[3] = {s->waiting, s->running, s->parked};
    for (int i = 0; i < s->n_tenants; i++) s->tenants[i].seen = 0;
    for (int l = 0; l < 3; l++)
        for (sched_req *r = lists[l]; r; r = r->next) {
            int t = tenant_find(s, r->ns, r->ns_len);
            if (t >= 0) s->tenants[t].seen = 1;
        }
    /* drop namespaces without work; the others' lowest virtual time is
     * where a new (or returning) namespace starts */
    int n = 0;
    double vmin = 0;
    for (int i = 0; i < s->n_tenants; i++)
        if (s->tenants[i].seen) {
            if (!n || s->tenants[i].vt < vmin) vmin = s->tenants[i].vt;
            s->tenants[n++] = s->tenants[i];
        }
    s->n_tenants = n;
    int rc = 0;
    for (int l = 0; l < 3; l++)
        for (sched_req *r = lists[l]; r; r = r->next) {
            int t = tenant_find(s, r->ns, r->ns_len);
            if (t < 0 && rc == 0) {
                if (s->n_tenants == s->cap_tenants) {
                    int cap = s->cap_tenants ? 2 * s->cap_tenants : 8;
                    sched_tenant *nt = realloc(s->tenants, (size_t)cap * sizeof *nt);
                    if (!nt) {
                        rc = -1;
                        r->tenant = -1;
                        continue;
                    }
                    s->tenants = nt;
                    s->cap_tenants = cap;
                }
                t = s->n_tenants++;
                sched_tenant *e = &s->tenants[t];
                memcpy(e->ns, r->ns, r->ns_len);
                e->ns_len = r->ns_len;
                e->vt = vmin;
                e->weight = tenant_weight(s, r->ns, r->ns_len);
                e->seen = 1;
            }
            r->tenant = rc ? -1 : t;
        }
    if (rc) {
        for (int l = 0; l < 3; l++)
            for (sched_req *r = lists[l]; r; r = r->next) r->tenant = -1;
        return -1;
    }
    return s->n_tenants;
}

double sched_tenant_vt(const eng_sched *s, const sched_req *r) {
    return r->tenant >= 0 && r->tenant < s->n_tenants ? s->tenants[r->tenant].vt : 0.0;
}

void sched_tenant_charge(eng_sched *s, const sched_req *r, int n) {
    if (r->tenant < 0 || r->tenant >= s->n_tenants) return;
    sched_tenant *t = &s->tenants[r->tenant];
    t->vt += (double)n / t->weight;
}
