/*
 * test_kv_redis.c -- the Redis tier against real redis-server processes
 * (integration).  The shared server comes from PARLEY_TEST_REDIS=host:port
 * (the test FAILS when it is missing); the kill / SIGSTOP and the ACL tests
 * start their own private redis-server on a free port and never touch the
 * shared one.  The ACL test checks that a Redis refusing us (WRONGPASS,
 * NOAUTH, NOPERM) means misses, counted and reported once, never an error.
 * Blocks are filled with prefix-determined bytes (kvt_util.h), so blocks
 * coming back from Redis are checked byte for byte.
 */
#define PTEST_MAIN
#include "ptest.h"

#include <hiredis/hiredis.h>
#include <pthread.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kvt_util.h"
#include "pl_time.h"

static char host[128];
static int port;
static char ns[48];

static int shared_redis(void) {
    const char *e = getenv("PARLEY_TEST_REDIS");
    if (!e || !*e) return 0;
    const char *colon = strrchr(e, ':');
    if (!colon || (size_t)(colon - e) >= sizeof host) return 0;
    memcpy(host, e, (size_t)(colon - e));
    host[colon - e] = 0;
    port = atoi(colon + 1);
    snprintf(ns, sizeof ns, "t%ld-%ld", (long)getpid(), (long)time(NULL));
    return port > 0;
}

static double now_ms(void) { return pl_mono_msf(); }

static int mask_bits; /* test hook for the weakened-hash test */

static kv_cache *mk(const eng_kv_layout *l, const char *h, int p, int timeout_ms, uint64_t fp) {
    kv_cache_config cfg;
    kv_cache_config_default(&cfg);
    cfg.hash_mask_bits = mask_bits;
    cfg.budget_bytes = 4u << 20;
    cfg.max_tokens = 4096;
    cfg.redis_host = h;
    cfg.redis_port = p;
    cfg.cmd_timeout_ms = timeout_ms;
    cfg.backoff_min_ms = 20;
    cfg.backoff_max_ms = 200;
    cfg.ttl_s = 120;
    kv_cache *c = NULL;
    char err[256];
    if (kv_cache_create(&cfg, l, fp, &c, err, sizeof err)) return NULL;
    return c;
}

/* Prefill n tokens (resuming from the cache) and insert them. */
static void turn(kv_cache *c, const eng_kv_layout *l, const int32_t *t, int n) {
    eng_kv_allocator a = kv_cache_allocator(c);
    eng_kvseq s;
    char err[128];
    PT_EQ_INT(eng_kvseq_init(&s, l, &a, err, sizeof err), 0);
    PT_EQ_INT(kvt_prefill(&s, t, n), 0);
    PT_EQ_INT(kv_cache_insert(c, ns, strlen(ns), &s, 1), 0);
    eng_kvseq_free(&s);
}

/* Lookup through Redis; checks every returned block; returns tokens matched. */
static int lookup(kv_cache *c, const eng_kv_layout *l, const int32_t *t, int n, int wait,
                  int *from_redis) {
    void *g[256], *lb[256];
    kv_match m = {g, lb, 256, 0, 0, 0, 0, 0};
    PT_EQ_INT(kv_cache_lookup(c, ns, strlen(ns), t, n, wait, &m), 0);
    for (int i = 0; i < m.n_blocks; i++) {
        PT_ASSERT(kvt_check(l, 0, g[i], t, i));
        if (lb[i]) PT_ASSERT(kvt_check(l, 1, lb[i], t, i));
    }
    /* The match must be adoptable by the engine (local window present). */
    eng_kv_allocator a = kv_cache_allocator(c);
    eng_kvseq s;
    char err[128];
    PT_EQ_INT(eng_kvseq_init(&s, l, &a, err, sizeof err), 0);
    int got = m.n_tokens;
    if (from_redis) *from_redis = m.n_from_redis;
    if (got) PT_EQ_INT(eng_kvseq_adopt_prefix(&s, got, g, lb, t), 0);
    else kv_match_release(c, &m);
    eng_kvseq_free(&s);
    return got;
}

static void layout(eng_kv_layout *l) { PT_EQ_INT(kvt_layout(l, 16, 6, 32), 0); }

PT_TEST(store_fetch_round_trip_pipelined) {
    PT_ASSERT_MSG(shared_redis(), "PARLEY_TEST_REDIS=host:port is required");
    eng_kv_layout l;
    layout(&l);
    kv_cache *c = mk(&l, host, port, 1000, 0xabc1);
    PT_ASSERT(c);
    int32_t t[400];
    for (int i = 0; i < 400; i++) t[i] = (int32_t)(pt_rand() % 30000);
    turn(c, &l, t, 161); /* 10 blocks and a tail of 1 token */
    /* the tail is dropped (Redis holds whole blocks); each block is written first */
    PT_EQ_INT(kv_cache_evict(c, 1000), 11);
    PT_EQ_INT(kv_cache_redis_drain(c, 2000), 0);
    kv_stats st;
    kv_cache_stats(c, &st);
    PT_EQ_INT(st.redis_writes, 10);
    PT_EQ_INT(st.redis_write_dropped, 0);
    PT_EQ_INT(lookup(c, &l, t, 170, -1, NULL), 0); /* host RAM only: nothing */
    int fr = 0;
    PT_EQ_INT(lookup(c, &l, t, 170, 1000, &fr), 160);
    PT_EQ_INT(fr, 10);
    kv_cache_stats(c, &st);
    PT_EQ_INT(st.redis.lookups, 1); /* all 10 boundaries in one pipelined request */
    PT_EQ_INT(st.redis.hits, 1);
    PT_EQ_INT(st.redis.hit_tokens, 160);
    /* Flush API: write the path now, then a fresh cache (another worker)
     * resumes from Redis alone. */
    int q = 0;
    PT_EQ_INT(kv_cache_flush_to_redis(c, ns, strlen(ns), t, 161, &q), 0);
    PT_EQ_INT(q, 10);
    PT_EQ_INT(kv_cache_redis_drain(c, 2000), 0);
    kv_cache_destroy(c);
    c = mk(&l, host, port, 1000, 0xabc1);
    int ticket;
    PT_EQ_INT(kv_cache_prefetch(c, ns, strlen(ns), t, 170, &ticket), 0);
    PT_EQ_INT(kv_cache_prefetch_wait(c, ticket, 2000), 0);
    kv_cache_prefetch_release(c, ticket);
    PT_EQ_INT(lookup(c, &l, t, 170, -1, NULL), 160); /* prefetched into host RAM */
    kv_cache_destroy(c);
    /* Another model fingerprint never sees these blocks. */
    c = mk(&l, host, port, 1000, 0xabc2);
    PT_EQ_INT(lookup(c, &l, t, 170, 1000, NULL), 0);
    kv_cache_destroy(c);
}

static void key_of(char *out, size_t cap, uint64_t fp, const int32_t *t, int k) {
    uint64_t h = kv_hash_seed(fp, ns, strlen(ns));
    for (int i = 0; i <= k; i++) h = kv_hash_block(h, t + 16 * i, 16);
    snprintf(out, cap, "parley:kv:%016llx:%s:%016llx", (unsigned long long)fp, ns,
             (unsigned long long)h);
}

PT_TEST(corrupt_and_foreign_values_rejected) {
    PT_ASSERT_MSG(shared_redis(), "PARLEY_TEST_REDIS=host:port is required");
    eng_kv_layout l; /* global layers only: a resume may stop at any block */
    PT_EQ_INT(kvt_layout(&l, 16, 2, 0), 0);
    kv_cache *c = mk(&l, host, port, 1000, 0xc0de);
    PT_ASSERT(c);
    redisContext *r = redisConnect(host, port);
    PT_ASSERT(r && !r->err);
    int32_t t[200];
    for (int i = 0; i < 200; i++) t[i] = (int32_t)(pt_rand() % 30000);
    turn(c, &l, t, 81); /* 5 blocks and a tail */
    PT_EQ_INT(kv_cache_evict(c, 100), 6);
    PT_EQ_INT(kv_cache_redis_drain(c, 2000), 0);
    char key[5][200];
    for (int k = 0; k < 5; k++) key_of(key[k], sizeof key[k], 0xc0de, t, k);
    redisReply *v = redisCommand(r, "GET %s", key[4]);
    PT_ASSERT(v && v->type == REDIS_REPLY_STRING);
    char *orig = malloc((size_t)v->len);
    size_t len = (size_t)v->len;
    memcpy(orig, v->str, len);
    freeReplyObject(v);
    /* Damage block 4 in four ways; each time the resume stops at 4 blocks... */
    kv_stats st;
    const char *what[4] = {"flipped", "truncated", "foreign", "other fingerprint"};
    int reason[4] = {KV_MISS_CORRUPT, KV_MISS_CORRUPT, KV_MISS_CORRUPT, KV_MISS_FOREIGN};
    for (int w = 0; w < 4; w++) {
        char *bad = malloc(len);
        memcpy(bad, orig, len);
        size_t bl = len;
        if (w == 0) bad[len / 2] ^= 0x10;
        if (w == 1) bl = len - 100;
        if (w == 2) bl = (size_t)snprintf(bad, len, "not a kv block");
        if (w == 3) {
            /* an intact value of another model under this key */
            kv_le64_put((uint8_t *)bad + 8, 0xc0df);
            kv_le64_put((uint8_t *)bad + len - 8, kv_hash64(bad, len - 8, 0));
        }
        redisReply *s = redisCommand(r, "SET %s %b", key[4], bad, bl);
        freeReplyObject(s);
        free(bad);
        kv_cache_evict(c, 100);
        kv_stats before;
        kv_cache_stats(c, &before);
        int got = lookup(c, &l, t, 90, 1000, NULL);
        PT_ASSERT_MSG(got == 64, "%s value: resumed %d tokens", what[w], got);
        kv_cache_stats(c, &st);
        PT_EQ_INT(st.redis.misses[reason[w]] - before.redis.misses[reason[w]], 1);
    }
    /* A value copied under another namespace's key is foreign. */
    char other_ns[48], okey[200];
    snprintf(other_ns, sizeof other_ns, "%s", ns);
    snprintf(ns, sizeof ns, "%.40s-x", other_ns);
    key_of(okey, sizeof okey, 0xc0de, t, 0);
    redisReply *s = redisCommand(r, "SET %s %b", okey, orig, len);
    freeReplyObject(s);
    kv_cache_stats(c, &st);
    uint64_t foreign = st.redis.misses[KV_MISS_FOREIGN];
    PT_EQ_INT(lookup(c, &l, t, 90, 1000, NULL), 0);
    kv_cache_stats(c, &st);
    PT_EQ_INT(st.redis.misses[KV_MISS_FOREIGN], foreign + 1);
    memcpy(ns, other_ns, sizeof ns);
    s = redisCommand(r, "SET %s %b", key[4], orig, len);
    freeReplyObject(s);
    kv_cache_evict(c, 100);
    PT_EQ_INT(lookup(c, &l, t, 90, 1000, NULL), 80); /* restored: full hit */
    free(orig);
    redisFree(r);
    kv_cache_destroy(c);
}

PT_TEST(weakened_hash_redis_collisions_are_misses) {
    PT_ASSERT_MSG(shared_redis(), "PARLEY_TEST_REDIS=host:port is required");
    eng_kv_layout l;
    PT_EQ_INT(kvt_layout(&l, 16, 2, 0), 0);
    mask_bits = 4; /* 16 keys per namespace: values overwrite each other */
    kv_cache *c = mk(&l, host, port, 1000, 0x4b17);
    mask_bits = 0;
    PT_ASSERT(c);
    int32_t t[8][64];
    for (int s = 0; s < 8; s++)
        for (int i = 0; i < 64; i++) t[s][i] = (int32_t)(pt_rand() % 30000);
    for (int s = 0; s < 8; s++) {
        turn(c, &l, t[s], 49); /* 3 blocks each: 24 blocks, 16 keys */
        kv_cache_evict(c, 100);
    }
    PT_EQ_INT(kv_cache_redis_drain(c, 2000), 0);
    int hits = 0;
    for (int s = 0; s < 8; s++) {
        kv_cache_evict(c, 100);
        hits += lookup(c, &l, t[s], 60, 1000, NULL) > 0; /* bytes checked inside */
    }
    kv_stats st;
    kv_cache_stats(c, &st);
    PT_ASSERT_MSG(st.redis.misses[KV_MISS_COLLISION] + st.redis.misses[KV_MISS_FOREIGN] > 0,
                  "no colliding value was seen");
    PT_ASSERT(hits >= 1); /* the last writers of some keys still hit */
    kv_cache_destroy(c);
}

PT_TEST(prefetch_tickets_and_errors) {
    PT_ASSERT_MSG(shared_redis(), "PARLEY_TEST_REDIS=host:port is required");
    eng_kv_layout l;
    layout(&l);
    kv_cache_config cfg;
    kv_cache_config_default(&cfg);
    cfg.budget_bytes = 1u << 20;
    cfg.max_tokens = 1024;
    cfg.max_tickets = 2;
    cfg.redis_host = host;
    cfg.redis_port = port;
    kv_cache *c = NULL;
    char err[256];
    PT_EQ_INT(kv_cache_create(&cfg, &l, 0x7e57, &c, err, sizeof err), 0);
    int32_t t[64] = {0};
    int a = -1, b = -1, x = -1;
    PT_EQ_INT(kv_cache_prefetch(c, ns, strlen(ns), t, 64, &a), 0);
    PT_EQ_INT(kv_cache_prefetch(c, ns, strlen(ns), t, 64, &b), 0);
    PT_EQ_INT(kv_cache_prefetch(c, ns, strlen(ns), t, 64, &x), KV_EFULL);
    kv_cache_prefetch_release(c, b); /* abandoned: freed when its fetch ends */
    PT_EQ_INT(kv_cache_prefetch_wait(c, a, 2000), 0);
    kv_cache_prefetch_release(c, a);
    PT_EQ_INT(kv_cache_prefetch_wait(c, a, 0), KV_EINVAL); /* given back */
    PT_EQ_INT(kv_cache_prefetch_wait(c, 99, 0), KV_EINVAL);
    int got = 0;
    for (int i = 0; i < 100 && !got; i++) { /* both tickets come back */
        int ra = kv_cache_prefetch(c, ns, strlen(ns), t, 64, &a);
        int rb = kv_cache_prefetch(c, ns, strlen(ns), t, 64, &b);
        got = ra == 0 && rb == 0;
        if (!got) {
            if (ra == 0) kv_cache_prefetch_release(c, a);
            if (rb == 0) kv_cache_prefetch_release(c, b);
            usleep(10000);
        }
    }
    PT_ASSERT(got);
    kv_cache_prefetch_release(c, a);
    kv_cache_prefetch_release(c, b);
    PT_EQ_INT(kv_cache_prefetch(c, "bad ns", 6, t, 64, &x), KV_EINVAL);
    kv_cache_destroy(c);
    /* no Redis tier: prefetch and flush say so; lookups just miss */
    cfg.redis_host = NULL;
    PT_EQ_INT(kv_cache_create(&cfg, &l, 0x7e57, &c, err, sizeof err), 0);
    PT_EQ_INT(kv_cache_prefetch(c, ns, strlen(ns), t, 64, &x), KV_EREDIS);
    PT_EQ_INT(kv_cache_flush_to_redis(c, ns, strlen(ns), t, 64, NULL), KV_EREDIS);
    PT_EQ_INT(lookup(c, &l, t, 64, 1000, NULL), 0);
    kv_cache_destroy(c);
}

/* ---- a private redis-server ---- */

static int free_port(void) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t al = sizeof a;
    if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof a) ||
        getsockname(s, (struct sockaddr *)&a, &al))
        return -1;
    close(s);
    return ntohs(a.sin_port);
}

/* Start redis-server on port p with extra arguments (NULL-ended, or NULL). */
static pid_t start_redis_args(int p, const char *const *extra) {
    pid_t pid = fork();
    if (pid == 0) {
        char ps[16];
        snprintf(ps, sizeof ps, "%d", p);
        const char *argv[40] = {"redis-server", "--port",     ps,       "--bind",
                                "127.0.0.1",    "--save",     "",       "--appendonly",
                                "no",           "--loglevel", "warning"};
        int n = 11;
        for (; extra && *extra && n < 39; extra++) argv[n++] = *extra;
        argv[n] = NULL;
        if (!freopen("/dev/null", "w", stdout)) _exit(126);
        execvp("redis-server", (char *const *)argv);
        _exit(127);
    }
    for (int i = 0; i < 100; i++) { /* up to 5 s */
        redisContext *r = redisConnect("127.0.0.1", p);
        if (r && !r->err) {
            redisReply *x = redisCommand(r, "PING");
            int ok = x != NULL;
            if (x) freeReplyObject(x);
            redisFree(r);
            if (ok) return pid;
        } else if (r) {
            redisFree(r);
        }
        usleep(50000);
    }
    return -1;
}

static pid_t start_redis(int p) { return start_redis_args(p, NULL); }

PT_TEST(redis_killed_and_stopped) {
    eng_kv_layout l;
    layout(&l);
    snprintf(ns, sizeof ns, "p%ld", (long)getpid());
    int p = free_port();
    PT_ASSERT(p > 0);
    pid_t pid = start_redis(p);
    PT_ASSERT_MSG(pid > 0, "cannot start redis-server on port %d", p);
    const int TO = 100;
    kv_cache *c = mk(&l, "127.0.0.1", p, TO, 0x5eed);
    PT_ASSERT(c);
    int32_t t[3][200];
    for (int s = 0; s < 3; s++)
        for (int i = 0; i < 200; i++) t[s][i] = (int32_t)(pt_rand() % 30000);
    turn(c, &l, t[0], 81);
    kv_cache_evict(c, 100);
    PT_EQ_INT(kv_cache_redis_drain(c, 2000), 0);
    PT_EQ_INT(lookup(c, &l, t[0], 90, TO, NULL), 80);

    /* SIGSTOP: lookups complete within the timeout, as misses. */
    kv_cache_evict(c, 100);
    kv_cache_redis_drain(c, 2000);
    kill(pid, SIGSTOP);
    kv_stats before, st;
    kv_cache_stats(c, &before);
    for (int i = 0; i < 5; i++) {
        double t0 = now_ms();
        PT_EQ_INT(lookup(c, &l, t[0], 90, 10000, NULL), 0);
        double dt = now_ms() - t0;
        PT_ASSERT_MSG(dt < TO + 300, "lookup took %.0f ms with Redis stopped (asked to wait 10 s)",
                      dt);
        turn(c, &l, t[1], 33); /* the run goes on: prefill, insert, evict */
        kv_cache_evict(c, 100);
    }
    kv_cache_stats(c, &st);
    PT_ASSERT(st.redis.misses[KV_MISS_TIMEOUT] + st.redis.misses[KV_MISS_DOWN] >
              before.redis.misses[KV_MISS_TIMEOUT] + before.redis.misses[KV_MISS_DOWN]);
    kill(pid, SIGCONT);
    int hit = 0;
    for (int i = 0; i < 40 && !hit; i++) {
        usleep(50000);
        hit = lookup(c, &l, t[0], 90, TO, NULL) == 80;
        if (!hit) kv_cache_evict(c, 100);
    }
    PT_ASSERT_MSG(hit, "no hits after SIGCONT");

    /* SIGKILL: misses counted as down, turns go on; a restarted (empty)
     * server takes writes again and hits resume. */
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    kv_cache_evict(c, 100);
    kv_cache_stats(c, &before);
    for (int i = 0; i < 5; i++) {
        double t0 = now_ms();
        PT_EQ_INT(lookup(c, &l, t[0], 90, 10000, NULL), 0);
        PT_ASSERT(now_ms() - t0 < TO + 300);
        turn(c, &l, t[1], 33);
        kv_cache_evict(c, 100);
    }
    kv_cache_stats(c, &st);
    PT_ASSERT(st.redis.misses[KV_MISS_DOWN] > before.redis.misses[KV_MISS_DOWN]);
    pid = start_redis(p);
    PT_ASSERT(pid > 0);
    hit = 0;
    for (int i = 0; i < 40 && !hit; i++) {
        usleep(50000);
        turn(c, &l, t[2], 49);
        kv_cache_evict(c, 100);
        kv_cache_redis_drain(c, 1000);
        hit = lookup(c, &l, t[2], 60, TO, NULL) == 48;
    }
    PT_ASSERT_MSG(hit, "no hits after restart");
    kv_cache_stats(c, &st);
    PT_ASSERT(st.redis_reconnects >= 2);
    kv_cache_destroy(c);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

/* ---- AUTH / ACL refusals ---- */

/* What the cache reported through config.log (called on its I/O threads). */
static struct {
    pthread_mutex_t mu;
    int n;          /* reports */
    char all[4096]; /* every report, one per line */
} logs = {PTHREAD_MUTEX_INITIALIZER, 0, ""};

static void on_log(void *ctx, const char *msg) {
    (void)ctx;
    pthread_mutex_lock(&logs.mu);
    logs.n++;
    size_t l = strlen(logs.all);
    snprintf(logs.all + l, sizeof logs.all - l, "%s\n", msg);
    pthread_mutex_unlock(&logs.mu);
}

static void logs_reset(void) {
    pthread_mutex_lock(&logs.mu);
    logs.n = 0;
    logs.all[0] = 0;
    pthread_mutex_unlock(&logs.mu);
}

static kv_cache *mk_auth(const eng_kv_layout *l, int p, const char *user, const char *pass) {
    kv_cache_config cfg;
    kv_cache_config_default(&cfg);
    cfg.budget_bytes = 4u << 20;
    cfg.max_tokens = 4096;
    cfg.redis_host = "127.0.0.1";
    cfg.redis_port = p;
    cfg.redis_user = user;
    cfg.redis_password = pass;
    cfg.cmd_timeout_ms = 300;
    cfg.backoff_min_ms = 10;
    cfg.backoff_max_ms = 40;
    cfg.log = on_log;
    kv_cache *c = NULL;
    char err[256];
    if (kv_cache_create(&cfg, l, 0xac1, &c, err, sizeof err)) return NULL;
    return c;
}

/* Write t[0..81) through eviction, then look it up from Redis: tokens matched. */
static int round_trip(kv_cache *c, const eng_kv_layout *l, const int32_t *t) {
    turn(c, l, t, 81);
    kv_cache_evict(c, 100);
    kv_cache_redis_drain(c, 2000);
    double t0 = now_ms();
    int got = lookup(c, l, t, 90, 1000, NULL);
    PT_ASSERT_MSG(now_ms() - t0 < 1500, "lookup took %.0f ms", now_ms() - t0);
    return got;
}

static pid_t acl_pid; /* the private server of the test below, killed at exit */
static void kill_acl_redis(void) {
    if (acl_pid > 0) kill(acl_pid, SIGKILL);
}

PT_TEST(acl_user_auth_wrongpass_noauth_noperm) {
    eng_kv_layout l;
    layout(&l);
    snprintf(ns, sizeof ns, "a%ld", (long)getpid());
    int p = free_port();
    PT_ASSERT(p > 0);
    const char *acl[] = {"--user",  "default",      "off",   "--user", "parley", "on",
                         ">s3cret", "~parley:kv:*", "+@all", "--user", "other",  "on",
                         ">0ther",  "~other:*",     "+@all", NULL};
    pid_t pid = acl_pid = start_redis_args(p, acl);
    atexit(kill_acl_redis); /* also when an assertion below ends the test */
    PT_ASSERT_MSG(pid > 0, "cannot start redis-server on port %d", p);
    int32_t t[200];
    for (int i = 0; i < 200; i++) t[i] = (int32_t)(pt_rand() % 30000);
    kv_stats st;

    /* The right user and password: the tier works, nothing is reported. */
    logs_reset();
    kv_cache *c = mk_auth(&l, p, "parley", "s3cret");
    PT_ASSERT(c);
    PT_EQ_INT(round_trip(c, &l, t), 80);
    kv_cache_stats(c, &st);
    PT_EQ_INT(st.redis_refused, 0);
    kv_cache_destroy(c);
    PT_EQ_INT(logs.n, 0);

    /* Refusals: every lookup is a miss within the timeout, the cache goes
     * on, the cause is reported once (not per attempt), the password never. */
    struct {
        const char *user, *pass, *want;
    } bad[] = {
        {"parley", "wrong", "WRONGPASS"}, /* AUTH refused */
        {NULL, NULL, "NOAUTH"},           /* no AUTH against a server that wants it */
        {"other", "0ther", "NOPERM"},     /* ACL user without ~parley:kv:* */
    };
    for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
        logs_reset();
        c = mk_auth(&l, p, bad[b].user, bad[b].pass);
        PT_ASSERT(c);
        for (int i = 0; i < 6; i++) {
            PT_EQ_INT(round_trip(c, &l, t + i), 0);
            usleep(50000); /* past the backoff: every round tries Redis again */
        }
        kv_cache_stats(c, &st);
        PT_ASSERT_MSG(st.redis_refused >= 3, "%s: refused %llu", bad[b].want,
                      (unsigned long long)st.redis_refused);
        PT_EQ_INT(st.redis_up, 0);
        kv_cache_destroy(c);
        pthread_mutex_lock(&logs.mu);
        PT_ASSERT_MSG(strstr(logs.all, bad[b].want) != NULL, "%s not in: %s", bad[b].want,
                      logs.all);
        PT_ASSERT_MSG(logs.n == 1, "%d reports for %s (rate limit): %s", logs.n, bad[b].want,
                      logs.all);
        PT_ASSERT(!strstr(logs.all, "0ther") && !strstr(logs.all, "wrong"));
        pthread_mutex_unlock(&logs.mu);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    acl_pid = 0;
}
