/*
 * cm_kafka.c -- the Kafka layer of every command: kafka.* scoping, the
 * client factories and the record of the cluster's refusals (see
 * cm_kafka.h for the rules).
 */
#define _POSIX_C_SOURCE 200809L
#include "cm_kafka.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cm_startup.h"
#include "pl_err.h"
#include "pl_time.h"

struct cm_kafka {
    const cm_config *cfg;     /* the command's configuration (kafka.* keys); borrowed */
    const char *cmd;          /* command named in messages ("gateway"); static */
    unsigned roles;           /* CM_KAFKA_* roles of the clients the command builds */
    unsigned long n_clients;  /* clients built so far (names the readers' group ids) */
    int refused_claim;        /* atomic: a callback is writing refused_msg */
    int refused;              /* atomic (release after refused_msg): a refusal is recorded */
    rd_kafka_resp_err_t code; /* the recorded refusal's error code */
    char refused_msg[PL_ERR_LEN * 2]; /* its line: what was refused and librdkafka's reason */
};

static char *cm_kafka_props_text; /* librdkafka's property table (NULL: unavailable) */
static pthread_once_t cm_kafka_props_once = PTHREAD_ONCE_INIT;

static void cm_kafka_props_load(void) {
    size_t n = 0;
    FILE *f = open_memstream(&cm_kafka_props_text, &n);
    if (!f) return;
    rd_kafka_conf_properties_show(f);
    if (fclose(f) != 0) {
        free(cm_kafka_props_text);
        cm_kafka_props_text = NULL;
    }
}

char cm_kafka_prop_scope(const char *name) {
    pthread_once(&cm_kafka_props_once, cm_kafka_props_load);
    size_t nl = strlen(name);
    for (const char *p = cm_kafka_props_text; p && *p;) {
        const char *eol = strchr(p, '\n');
        size_t ll = eol ? (size_t)(eol - p) : strlen(p);
        if (ll > nl && !strncmp(p, name, nl) && p[nl] == ' ') {
            const char *bar = memchr(p + nl, '|', ll - nl);
            if (bar)
                for (const char *q = bar + 1; q < p + ll && *q != '|'; q++)
                    if (*q == 'C' || *q == 'P' || *q == '*') return *q;
        }
        p = eol ? eol + 1 : p + ll;
    }
    return '*';
}

const char *cm_kafka_prop_for(const char *name, cm_kafka_role role) {
    int cons = role == CM_KAFKA_GROUP || role == CM_KAFKA_READER;
    int prod = role == CM_KAFKA_PRODUCER;
    if (!strncmp(name, "consumer.", 9)) return cons ? name + 9 : NULL;
    if (!strncmp(name, "producer.", 9)) return prod ? name + 9 : NULL;
    char s = cm_kafka_prop_scope(name);
    return s == '*' || (s == 'C' && cons) || (s == 'P' && prod) ? name : NULL;
}

static const char *cm_kafka_role_name(cm_kafka_role r) {
    switch (r) {
    case CM_KAFKA_GROUP: return "group consumer";
    case CM_KAFKA_READER: return "reader";
    case CM_KAFKA_PRODUCER: return "producer";
    case CM_KAFKA_ADMIN: return "admin client";
    default: return "client";
    }
}

/* The layer's forced settings of a role (name, value pairs; a NULL value
 * varies per client, so any user value conflicts), NULL-terminated. */
static const char *const *cm_kafka_role_forced(cm_kafka_role r) {
    static const char *const reader[] = {"group.id",
                                         NULL,
                                         "enable.auto.commit",
                                         "false",
                                         "enable.partition.eof",
                                         "false",
                                         "isolation.level",
                                         NULL,
                                         NULL};
    static const char *const producer[] = {"enable.idempotence", "true", "transactional.id", NULL,
                                           NULL};
    static const char *const group[] = {"enable.auto.commit", "false", "enable.auto.offset.store",
                                        "false", NULL};
    switch (r) {
    case CM_KAFKA_READER: return reader;
    case CM_KAFKA_PRODUCER: return producer;
    case CM_KAFKA_GROUP: return group;
    default: return NULL;
    }
}

/* The value the forced list f sets for prop: 1 with *val (NULL: varies),
 * 0 when f does not set it. */
static int cm_kafka_forced_val(const char *const *f, const char *prop, const char **val) {
    for (int i = 0; f && f[i]; i += 2)
        if (!strcmp(f[i], prop)) return *val = f[i + 1], 1;
    return 0;
}

int cm_kafka_config_check(const cm_config *cfg, unsigned roles, const char *cmd, char *err,
                          size_t errlen) {
    static const cm_kafka_role all[] = {CM_KAFKA_GROUP, CM_KAFKA_READER, CM_KAFKA_PRODUCER,
                                        CM_KAFKA_ADMIN};
    for (size_t i = 0; i < cm_config_kafka_count(cfg); i++) {
        const char *k, *v, *prop, *fv;
        cm_config_kafka_at(cfg, i, &k, &v);
        int taken = 0;
        for (size_t r = 0; r < sizeof all / sizeof all[0]; r++) {
            if (!(roles & all[r]) || !(prop = cm_kafka_prop_for(k, all[r]))) continue;
            taken = 1;
            if (cm_kafka_forced_val(cm_kafka_role_forced(all[r]), prop, &fv) &&
                (!fv || strcmp(fv, v)))
                return pl_errf(err, errlen, CM_KAFKA_EINVAL,
                               "configuration key 'kafka.%s': parley %s's %s sets %s itself%s%s", k,
                               cmd, cm_kafka_role_name(all[r]), prop, fv ? " to " : "",
                               fv ? fv : "");
        }
        if (!taken) {
            char s = cm_kafka_prop_scope(
                strncmp(k, "consumer.", 9) && strncmp(k, "producer.", 9) ? k : k + 9);
            const char *kind = !strncmp(k, "consumer.", 9)   ? "forced onto consumers"
                               : !strncmp(k, "producer.", 9) ? "forced onto producers"
                               : s == 'C'                    ? "a consumer property"
                               : s == 'P'                    ? "a producer property"
                                                             : "a property";
            char have[128] = "";
            for (size_t r = 0; r < sizeof all / sizeof all[0]; r++)
                if (roles & all[r])
                    snprintf(have + strlen(have), sizeof have - strlen(have), "%s%s",
                             *have ? ", " : "", cm_kafka_role_name(all[r]));
            return pl_errf(err, errlen, CM_KAFKA_EINVAL,
                           "configuration key 'kafka.%s': no Kafka client of parley %s takes it "
                           "(%s; it builds: %s)",
                           k, cmd, kind, have);
        }
    }
    return 0;
}

int cm_kafka_new(const cm_config *cfg, unsigned roles, const char *cmd, cm_kafka **out, char *err,
                 size_t errlen) {
    *out = NULL;
    int rc = cm_kafka_config_check(cfg, roles, cmd, err, errlen);
    if (rc) return rc;
    cm_kafka *k = calloc(1, sizeof *k);
    if (!k) return pl_errf(err, errlen, CM_KAFKA_ENOMEM, "out of memory");
    k->cfg = cfg;
    k->cmd = cmd;
    k->roles = roles;
    *out = k;
    return 0;
}

void cm_kafka_free(cm_kafka *k) { free(k); }

const char *cm_kafka_brokers_of(const cm_config *cfg) {
    for (size_t i = 0; i < cm_config_kafka_count(cfg); i++) {
        const char *n, *v;
        cm_config_kafka_at(cfg, i, &n, &v);
        if (!strcmp(n, "bootstrap.servers")) return v;
    }
    return "";
}

const char *cm_kafka_brokers(const cm_kafka *k) { return cm_kafka_brokers_of(k->cfg); }

/* Record what client rk was told, unless it is a reader's group: a reader
 * carries a group id (librdkafka's consumer API wants one) that it never
 * joins or commits to, so the coordinator lookup librdkafka still makes
 * for it may be refused (no group ACL) without harm. */
static void cm_kafka_note_from(cm_kafka *k, rd_kafka_t *rk, rd_kafka_resp_err_t e,
                               const char *reason) {
    if (e == RD_KAFKA_RESP_ERR_GROUP_AUTHORIZATION_FAILED && rd_kafka_type(rk) == RD_KAFKA_CONSUMER)
        return;
    cm_kafka_refusal_note(k, e, reason);
}

/* The layer's error callback (clients built without spec->error_cb: the
 * readers, producers and admin clients of every command but the worker):
 * record refusals; write the other errors to stderr as librdkafka does for
 * a client without an error callback (not the connection failures, which
 * its own log lines report), and leave them to its retries. */
static void cm_kafka_error_cb(rd_kafka_t *rk, int err, const char *reason, void *opaque) {
    char fbuf[512];
    cm_kafka *k = opaque;
    rd_kafka_resp_err_t e = (rd_kafka_resp_err_t)err;
    if (e == RD_KAFKA_RESP_ERR__FATAL && (e = rd_kafka_fatal_error(rk, fbuf, sizeof fbuf)))
        reason = fbuf;
    if (cm_kafka_refusal_class(e, reason)) {
        cm_kafka_note_from(k, rk, e, reason);
        return;
    }
    if (e == RD_KAFKA_RESP_ERR__TRANSPORT || e == RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN) return;
    fprintf(stderr, "%s: kafka error (%s, %s): %.300s\n", k->cmd, rd_kafka_name(rk),
            rd_kafka_err2name(e), reason ? reason : "");
}

/* Apply name, value pairs; -1 with librdkafka's message in kerr. */
static int cm_kafka_set_pairs(rd_kafka_conf_t *c, const char *const *kv, char *kerr, size_t n) {
    for (int i = 0; kv && kv[i]; i += 2)
        if (kv[i + 1] && rd_kafka_conf_set(c, kv[i], kv[i + 1], kerr, n) != RD_KAFKA_CONF_OK)
            return -1;
    return 0;
}

int cm_kafka_conf_new(cm_kafka *k, const cm_kafka_spec *s, rd_kafka_conf_t **out, char *err,
                      size_t errlen) {
    *out = NULL;
    rd_kafka_conf_t *c = rd_kafka_conf_new();
    if (!c) return pl_errf(err, errlen, CM_KAFKA_ENOMEM, "out of memory");
    char kerr[PL_ERR_LEN], gid[96];
    const char *iso = s->committed ? "read_committed" : "read_uncommitted";
    snprintf(gid, sizeof gid, "parley-%s-reader-%lld-%ld-%lu", k->cmd, (long long)pl_unix_ms(),
             (long)getpid(), ++k->n_clients);
    /* the layer's defaults and forced settings of this role */
    const char *defs[8] = {NULL}, *forced[10] = {NULL};
    switch (s->role) {
    case CM_KAFKA_GROUP:
        defs[0] = "group.id", defs[1] = s->group_id;
        forced[0] = "enable.auto.commit", forced[1] = "false";
        forced[2] = "enable.auto.offset.store", forced[3] = "false";
        break;
    case CM_KAFKA_READER:
        defs[0] = "fetch.wait.max.ms", defs[1] = "10", defs[2] = "log_level", defs[3] = "3";
        forced[0] = "group.id", forced[1] = gid, forced[2] = "enable.auto.commit";
        forced[3] = "false", forced[4] = "enable.partition.eof", forced[5] = "false";
        forced[6] = "isolation.level", forced[7] = iso;
        break;
    case CM_KAFKA_PRODUCER:
        forced[0] = "enable.idempotence", forced[1] = "true";
        forced[2] = "transactional.id", forced[3] = s->txn_id;
        break;
    case CM_KAFKA_ADMIN: defs[0] = "log_level", defs[1] = "3"; break;
    default:
        rd_kafka_conf_destroy(c);
        return pl_errf(err, errlen, CM_KAFKA_EINVAL, "unknown Kafka client role %d", (int)s->role);
    }
    if (s->client_id && rd_kafka_conf_set(c, "client.id", s->client_id, kerr, sizeof kerr))
        goto bad;
    if (cm_kafka_set_pairs(c, defs, kerr, sizeof kerr) ||
        cm_kafka_set_pairs(c, s->defs, kerr, sizeof kerr))
        goto bad;
    for (size_t i = 0; i < cm_config_kafka_count(k->cfg); i++) {
        const char *name, *v, *prop, *fv;
        cm_config_kafka_at(k->cfg, i, &name, &v);
        if (!(prop = cm_kafka_prop_for(name, s->role))) continue;
        if ((cm_kafka_forced_val(forced, prop, &fv) && fv && strcmp(fv, v)) ||
            (cm_kafka_forced_val(s->forced, prop, &fv) && fv && strcmp(fv, v))) {
            rd_kafka_conf_destroy(c);
            return pl_errf(err, errlen, CM_KAFKA_EINVAL,
                           "configuration key 'kafka.%s': parley %s's %s sets %s to %s itself",
                           name, k->cmd, cm_kafka_role_name(s->role), prop, fv);
        }
        if (rd_kafka_conf_set(c, prop, v, kerr, sizeof kerr) != RD_KAFKA_CONF_OK) {
            rd_kafka_conf_destroy(c);
            return pl_errf(err, errlen, CM_KAFKA_EINVAL, "configuration key 'kafka.%s': %s", name,
                           kerr);
        }
    }
    if (cm_kafka_set_pairs(c, forced, kerr, sizeof kerr) ||
        cm_kafka_set_pairs(c, s->forced, kerr, sizeof kerr))
        goto bad;
    if (s->error_cb) {
        rd_kafka_conf_set_opaque(c, s->opaque);
        rd_kafka_conf_set_error_cb(c, s->error_cb);
    } else {
        rd_kafka_conf_set_opaque(c, k);
        rd_kafka_conf_set_error_cb(c, cm_kafka_error_cb);
    }
    if (s->rebalance_cb) rd_kafka_conf_set_rebalance_cb(c, s->rebalance_cb);
    if (s->dr_msg_cb) rd_kafka_conf_set_dr_msg_cb(c, s->dr_msg_cb);
    *out = c;
    return 0;
bad:
    rd_kafka_conf_destroy(c);
    return pl_errf(err, errlen, CM_KAFKA_EKAFKA, "kafka configuration of the %s: %s",
                   cm_kafka_role_name(s->role), kerr);
}

int cm_kafka_client_new(cm_kafka *k, const cm_kafka_spec *s, const char *what, rd_kafka_t **out,
                        char *err, size_t errlen) {
    rd_kafka_conf_t *c;
    *out = NULL;
    int rc = cm_kafka_conf_new(k, s, &c, err, errlen);
    if (rc) return rc;
    int cons = s->role == CM_KAFKA_GROUP || s->role == CM_KAFKA_READER;
    char e[512];
    rd_kafka_t *rk = rd_kafka_new(cons ? RD_KAFKA_CONSUMER : RD_KAFKA_PRODUCER, c, e, sizeof e);
    if (!rk) {
        rd_kafka_conf_destroy(c);
        return pl_errf(err, errlen, CM_KAFKA_EKAFKA, "kafka %s: %s", what, e);
    }
    if (cons) rd_kafka_poll_set_consumer(rk);
    *out = rk;
    return 0;
}

int cm_kafka_refusal_class(rd_kafka_resp_err_t e, const char *reason) {
    switch (e) {
    case RD_KAFKA_RESP_ERR__AUTHENTICATION:
    case RD_KAFKA_RESP_ERR_SASL_AUTHENTICATION_FAILED: return CM_KAFKA_REFUSED_SASL;
    case RD_KAFKA_RESP_ERR__SSL: /* only verification: other TLS errors (a reset handshake) pass */
        return reason && strstr(reason, "certificate") ? CM_KAFKA_REFUSED_TLS : 0;
    case RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED:
    case RD_KAFKA_RESP_ERR_GROUP_AUTHORIZATION_FAILED:
    case RD_KAFKA_RESP_ERR_CLUSTER_AUTHORIZATION_FAILED:
    case RD_KAFKA_RESP_ERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED: return CM_KAFKA_REFUSED_ACL;
    default: return 0;
    }
}

const char *cm_kafka_refusal_text(int cls, const char *acl_hint) {
    switch (cls) {
    case CM_KAFKA_REFUSED_SASL:
        return "SASL authentication failed (kafka.sasl.username / kafka.sasl.password / "
               "kafka.sasl.mechanisms)";
    case CM_KAFKA_REFUSED_TLS:
        return "TLS certificate verification failed (kafka.ssl.ca.location, the broker's "
               "certificate, kafka.ssl.*)";
    case CM_KAFKA_REFUSED_ACL: return acl_hint ? acl_hint : "not authorized (the principal's ACLs)";
    default: return "";
    }
}

void cm_kafka_refusal_note(cm_kafka *k, rd_kafka_resp_err_t e, const char *reason) {
    int cls = cm_kafka_refusal_class(e, reason), expect = 0;
    if (!k || !cls ||
        !__atomic_compare_exchange_n(&k->refused_claim, &expect, 1, 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE))
        return;
    k->code = e;
    snprintf(k->refused_msg, sizeof k->refused_msg, "Kafka refused parley %s: %s: %.300s", k->cmd,
             cm_kafka_refusal_text(cls, NULL), reason ? reason : rd_kafka_err2str(e));
    __atomic_store_n(&k->refused, 1, __ATOMIC_RELEASE);
}

const char *cm_kafka_refusal_msg(const cm_kafka *k) {
    return k && __atomic_load_n(&k->refused, __ATOMIC_ACQUIRE) ? k->refused_msg : NULL;
}

int cm_kafka_refused(cm_kafka *k, rd_kafka_t *rk) {
    if (rk && rd_kafka_type(rk) == RD_KAFKA_CONSUMER) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 0);
        if (m) {
            if (m->err) cm_kafka_note_from(k, rk, m->err, rd_kafka_message_errstr(m));
            rd_kafka_message_destroy(m);
        }
    } else if (rk) {
        rd_kafka_poll(rk, 0);
    }
    return cm_kafka_refusal_msg(k) != NULL;
}

rd_kafka_resp_err_t cm_kafka_metadata_get(cm_kafka *k, rd_kafka_t *rk, rd_kafka_topic_t *rkt,
                                          int timeout_ms, const struct rd_kafka_metadata **md) {
    *md = NULL;
    int64_t until = pl_mono_ms() + timeout_ms;
    for (;;) {
        int64_t left = until - pl_mono_ms();
        int slice = left < 250 ? (int)left : 250;
        rd_kafka_resp_err_t e = rd_kafka_metadata(rk, 0, rkt, md, slice > 0 ? slice : 1);
        if (cm_kafka_refused(k, rk)) {
            if (*md) rd_kafka_metadata_destroy(*md);
            *md = NULL;
            return k->code;
        }
        if (e != RD_KAFKA_RESP_ERR__TIMED_OUT && e != RD_KAFKA_RESP_ERR__TRANSPORT) return e;
        if (pl_mono_ms() >= until || cm_startup_expired()) return e;
        if (e == RD_KAFKA_RESP_ERR__TRANSPORT) { /* answered at once: do not spin */
            struct timespec nap = {0, 20 * 1000 * 1000};
            nanosleep(&nap, NULL);
        }
    }
}

rd_kafka_event_t *cm_kafka_event_wait(cm_kafka *k, rd_kafka_t *rk, rd_kafka_queue_t *q,
                                      int timeout_ms) {
    int64_t until = pl_mono_ms() + timeout_ms;
    for (;;) {
        int64_t left = until - pl_mono_ms();
        int slice = left < 250 ? (int)left : 250;
        rd_kafka_event_t *ev = rd_kafka_queue_poll(q, slice > 0 ? slice : 1);
        if (ev) return ev;
        if (cm_kafka_refused(k, rk) || pl_mono_ms() >= until) return NULL;
    }
}
