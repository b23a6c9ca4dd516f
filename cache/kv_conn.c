/*
 * kv_conn.c -- connections of the Redis tier: TCP, then TLS (hiredis_ssl)
 * when configured, then AUTH; reconnect backoff; classification of the
 * ways Redis can refuse us; the rate-limited reports through config.log.
 *
 * Each I/O thread owns one kv_conn and calls these without c->mu held.
 * A refusal (TLS handshake or certificate verification failed, AUTH
 * rejected, NOAUTH, NOPERM) is treated like a Redis that is down: the
 * connection is closed and backed off, requests are misses until a later
 * attempt works.  Reports: one line when the cause changes, then at most
 * one every KV_REPORT_MS while it lasts (with how many were held back),
 * and one line when a data command (GET/SET) works again.  The password is
 * never part of a report.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kv_internal.h"

#ifdef PARLEY_REDIS_TLS
#include <hiredis/hiredis_ssl.h>
#endif

#define KV_REPORT_MS 30000 /* repeat a standing cause at most this often */

static const char *const cause_name[KV_CAUSE_N] = {
    "ok", "connect", "tls", "auth", "noauth", "noperm",
};

/* Duplicate s, or NULL for NULL/"" (returns -1 only when malloc fails). */
static int dup_opt(const char *s, const char **out) {
    *out = NULL;
    if (!s || !*s) return 0;
    char *d = strdup(s);
    if (!d) return -1;
    *out = d;
    return 0;
}

static void free_secret(const char *s) {
    if (!s) return;
    explicit_bzero((char *)s, strlen(s));
    free((char *)s);
}

int kv_conn_setup(kv_cache *c, const kv_cache_config *cfg, char *err, size_t errlen) {
    if (dup_opt(cfg->redis_user, &c->cfg.redis_user) ||
        dup_opt(cfg->redis_password, &c->cfg.redis_password) ||
        dup_opt(cfg->redis_tls_ca, &c->cfg.redis_tls_ca) ||
        dup_opt(cfg->redis_tls_cert, &c->cfg.redis_tls_cert) ||
        dup_opt(cfg->redis_tls_key, &c->cfg.redis_tls_key) ||
        dup_opt(cfg->redis_tls_server_name, &c->cfg.redis_tls_server_name)) {
        return pl_errf(err, errlen, KV_ENOMEM,
                       "kv_cache: out of memory copying the Redis settings");
    }
    if (c->cfg.redis_user && !c->cfg.redis_password) {
        return pl_errf(err, errlen, KV_EINVAL, "kv_cache: a Redis user needs a password");
    }
    if (!c->cfg.redis_tls_cert != !c->cfg.redis_tls_key) {
        return pl_errf(err, errlen, KV_EINVAL,
                       "kv_cache: the Redis TLS client certificate and key go together");
    }
    if (!cfg->redis_tls) return 0;
#ifdef PARLEY_REDIS_TLS
    const char *name = c->cfg.redis_tls_server_name ? c->cfg.redis_tls_server_name : c->redis_host;
    redisSSLOptions o = {
        .cacert_filename = c->cfg.redis_tls_ca,
        .cert_filename = c->cfg.redis_tls_cert,
        .private_key_filename = c->cfg.redis_tls_key,
        .server_name = name,
        .verify_mode = REDIS_SSL_VERIFY_PEER,
#ifdef PARLEY_REDIS_VERIFY_NAME
        .verify_name = name,
#endif
    };
    redisSSLContextError e = REDIS_SSL_CTX_NONE;
    redisInitOpenSSL();
    c->ssl = redisCreateSSLContextWithOptions(&o, &e);
    if (!c->ssl) {
        return pl_errf(err, errlen, KV_EINVAL,
                       "kv_cache: Redis TLS setup (CA %s, certificate %s): %s",
                       o.cacert_filename ? o.cacert_filename : "system store",
                       o.cert_filename ? o.cert_filename : "none", redisSSLContextGetError(e));
    }
    return 0;
#else
    return pl_errf(err, errlen, KV_EINVAL,
                   "kv_cache: Redis TLS requested but this build has no hiredis_ssl "
                   "(build against the pinned hiredis of deploy/setup.sh)");
#endif
}

int kv_cache_redis_tls(void) {
#ifdef PARLEY_REDIS_TLS
    return 1;
#else
    return 0;
#endif
}

void kv_conn_teardown(kv_cache *c) {
#ifdef PARLEY_REDIS_TLS
    if (c->ssl) redisFreeSSLContext(c->ssl);
#endif
    c->ssl = NULL;
    free((char *)c->cfg.redis_user);
    free_secret(c->cfg.redis_password);
    free((char *)c->cfg.redis_tls_ca);
    free((char *)c->cfg.redis_tls_cert);
    free((char *)c->cfg.redis_tls_key);
    free((char *)c->cfg.redis_tls_server_name);
    c->cfg.redis_user = c->cfg.redis_password = NULL;
    c->cfg.redis_tls_ca = c->cfg.redis_tls_cert = c->cfg.redis_tls_key = NULL;
    c->cfg.redis_tls_server_name = NULL;
}

int kv_reply_refusal(const redisReply *r) {
    if (!r || r->type != REDIS_REPLY_ERROR || !r->str) return KV_CAUSE_NONE;
    if (!strncmp(r->str, "NOAUTH", 6)) return KV_CAUSE_NOAUTH;
    if (!strncmp(r->str, "NOPERM", 6)) return KV_CAUSE_NOPERM;
    if (!strncmp(r->str, "WRONGPASS", 9) || strstr(r->str, "invalid password") ||
        strstr(r->str, "invalid username-password"))
        return KV_CAUSE_AUTH;
    return KV_CAUSE_NONE;
}

/* What an operator should look at for each cause. */
static const char *cause_hint(int cause) {
    switch (cause) {
    case KV_CAUSE_TLS:
        return "check redis.tls.ca, redis.tls.server_name and the server certificate";
    case KV_CAUSE_AUTH: return "check redis.user / redis.password";
    case KV_CAUSE_NOAUTH: return "the server requires AUTH: set redis.password (and redis.user)";
    case KV_CAUSE_NOPERM: return "the ACL user needs read/write on keys ~parley:kv:*";
    default: return "is the server up and reachable?";
    }
}

void kv_conn_report(kv_cache *c, int cause, const char *detail) {
    char msg[640];
    int emit = 0;
    int64_t now = pl_mono_ms();
    pthread_mutex_lock(&c->mu);
    if (cause != KV_CAUSE_CONNECT) c->st.redis_refused++;
    if (cause != c->rep_cause || now - c->rep_ms >= KV_REPORT_MS) {
        char more[64] = "";
        if (c->rep_held)
            snprintf(more, sizeof more, " (%llu more since the last report)",
                     (unsigned long long)c->rep_held);
        snprintf(msg, sizeof msg,
                 "redis %s:%d unavailable (%s%s%s): %s; %s; KV is recomputed, retrying with "
                 "backoff%s",
                 c->redis_host, c->cfg.redis_port, cause_name[cause],
                 c->cfg.redis_user ? ", user " : "", c->cfg.redis_user ? c->cfg.redis_user : "",
                 detail && *detail ? detail : "no detail", cause_hint(cause), more);
        c->rep_cause = cause;
        c->rep_ms = now;
        c->rep_held = 0;
        emit = 1;
    } else {
        c->rep_held++;
    }
    pthread_mutex_unlock(&c->mu);
    if (emit && c->cfg.log) c->cfg.log(c->cfg.log_ctx, msg);
}

/* Fail a connection attempt: free ctx, count, back off, report. */
static redisContext *connect_fail(kv_cache *c, kv_conn *k, redisContext *ctx, int cause,
                                  const char *detail) {
    pthread_mutex_lock(&c->mu);
    c->st.redis_connect_fail++;
    c->redis_down = 1;
    pthread_mutex_unlock(&c->mu);
    kv_conn_report(c, cause, detail);
    if (ctx) redisFree(ctx);
    k->next_try_ms = pl_mono_ms() + k->backoff_ms;
    k->backoff_ms =
        k->backoff_ms * 2 > c->cfg.backoff_max_ms ? c->cfg.backoff_max_ms : k->backoff_ms * 2;
    return NULL;
}

redisContext *kv_conn_get(kv_cache *c, kv_conn *k) {
    if (k->ctx) return k->ctx;
    if (pl_mono_ms() < k->next_try_ms) return NULL;
    struct timeval tv = {c->cfg.cmd_timeout_ms / 1000, (c->cfg.cmd_timeout_ms % 1000) * 1000};
    redisContext *ctx = redisConnectWithTimeout(c->redis_host, c->cfg.redis_port, tv);
    if (!ctx) return connect_fail(c, k, NULL, KV_CAUSE_CONNECT, "out of memory");
    if (ctx->err || redisSetTimeout(ctx, tv) != REDIS_OK)
        return connect_fail(c, k, ctx, KV_CAUSE_CONNECT, ctx->errstr);
#ifdef PARLEY_REDIS_TLS
    if (c->ssl && redisInitiateSSLWithContext(ctx, c->ssl) != REDIS_OK) {
        char d[300];
        snprintf(d, sizeof d, "%s%s",
                 strstr(ctx->errstr, "certificate verify failed")
                     ? "TLS certificate verification failed: "
                     : "TLS handshake failed: ",
                 ctx->errstr);
        return connect_fail(c, k, ctx, KV_CAUSE_TLS, d);
    }
#endif
    if (c->cfg.redis_password) {
        redisReply *r = c->cfg.redis_user ? redisCommand(ctx, "AUTH %s %s", c->cfg.redis_user,
                                                         c->cfg.redis_password)
                                          : redisCommand(ctx, "AUTH %s", c->cfg.redis_password);
        if (!r) return connect_fail(c, k, ctx, KV_CAUSE_CONNECT, ctx->errstr);
        if (r->type == REDIS_REPLY_ERROR) {
            char d[300];
            snprintf(d, sizeof d, "AUTH refused: %.240s", r->str ? r->str : "");
            freeReplyObject(r);
            return connect_fail(c, k, ctx, KV_CAUSE_AUTH, d);
        }
        freeReplyObject(r);
    }
    pthread_mutex_lock(&c->mu);
    c->st.redis_reconnects++;
    pthread_mutex_unlock(&c->mu);
    k->ctx = ctx;
    return ctx;
}

/* Close after a failed command; returns the miss reason it amounts to. */
int kv_conn_fail(kv_cache *c, kv_conn *k) {
    int why = KV_MISS_DOWN;
    if (k->ctx && k->ctx->err == REDIS_ERR_IO &&
        (errno == EAGAIN || errno == EWOULDBLOCK || strstr(k->ctx->errstr, "temporarily")))
        why = KV_MISS_TIMEOUT;
    if (k->ctx) redisFree(k->ctx);
    k->ctx = NULL;
    k->next_try_ms = pl_mono_ms() + k->backoff_ms;
    k->backoff_ms =
        k->backoff_ms * 2 > c->cfg.backoff_max_ms ? c->cfg.backoff_max_ms : k->backoff_ms * 2;
    pthread_mutex_lock(&c->mu);
    c->redis_down = 1;
    pthread_mutex_unlock(&c->mu);
    return why;
}

int kv_conn_refused(kv_cache *c, kv_conn *k, int cause, const redisReply *r) {
    char d[300];
    snprintf(d, sizeof d, "%.240s", r && r->str ? r->str : "error reply");
    kv_conn_report(c, cause, d);
    kv_conn_fail(c, k);
    return KV_MISS_DOWN;
}

void kv_conn_ok(kv_cache *c, kv_conn *k, int data) {
    char msg[400];
    int emit = 0;
    if (data) k->backoff_ms = c->cfg.backoff_min_ms;
    pthread_mutex_lock(&c->mu);
    c->redis_down = 0;
    if (data && c->rep_cause != KV_CAUSE_NONE) {
        snprintf(msg, sizeof msg, "redis %s:%d available again (after %s)", c->redis_host,
                 c->cfg.redis_port, cause_name[c->rep_cause]);
        c->rep_cause = KV_CAUSE_NONE;
        c->rep_held = 0;
        emit = 1;
    }
    pthread_mutex_unlock(&c->mu);
    if (emit && c->cfg.log) c->cfg.log(c->cfg.log_ctx, msg);
}
