/*
 * it_redis.c -- integration test of hiredis against real Redis servers, as
 * parley's Redis KV tier uses it.
 *
 *  - redis_pipelined_binary_values: against the shared server tests/run.sh
 *    starts (PARLEY_TEST_REDIS=host:port; missing is a failure), pipelined
 *    SETs then GETs of binary values (zero bytes included) from 0 bytes to
 *    1 MiB, with a command timeout set, must round-trip byte for byte.
 *  - redis_stopped_server_errors_within_timeout: against a private
 *    redis-server this test starts on a free port (so it can freeze and kill
 *    it without disturbing the shared one): a GET to a SIGSTOPped server must
 *    fail with an error once the command timeout passes, not hang; after
 *    SIGKILL, the open connection and a new connection must fail at once.
 */
#define PTEST_MAIN
#include "ptest.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "pl_time.h"

#define IT_TIMEOUT_MS 500 /* command timeout for the stopped-server test */

static double it_now(void) { return pl_mono_s(); }

static struct timeval it_tv(int ms) {
    struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
    return tv;
}

/* Parses "host:port" from PARLEY_TEST_REDIS. */
static void it_redis_addr(char *host, size_t hostlen, int *port) {
    const char *a = getenv("PARLEY_TEST_REDIS");
    PT_ASSERT_MSG(a && *a, "PARLEY_TEST_REDIS is not set: run tests/run.sh, or start "
                           "deploy/redis.sh and export PARLEY_TEST_REDIS=host:port");
    const char *colon = strrchr(a, ':');
    PT_ASSERT_MSG(colon && colon != a && (size_t)(colon - a) < hostlen,
                  "PARLEY_TEST_REDIS='%s' is not host:port", a);
    memcpy(host, a, (size_t)(colon - a));
    host[colon - a] = '\0';
    *port = atoi(colon + 1);
    PT_ASSERT_MSG(*port > 0 && *port < 65536, "PARLEY_TEST_REDIS='%s': bad port", a);
}

PT_TEST(redis_pipelined_binary_values) {
    static const size_t sizes[] = {0, 1, 2, 3, 15, 16, 255, 4096, 65535, 65536, 100003, 1 << 20};
    enum { N = sizeof sizes / sizeof sizes[0] };
    unsigned char *vals[N];
    char keys[N][64];
    char host[256];
    int port;
    it_redis_addr(host, sizeof host, &port);
    redisContext *c = redisConnectWithTimeout(host, port, it_tv(2000));
    PT_ASSERT_MSG(c && !c->err, "connect %s:%d: %s", host, port, c ? c->errstr : "out of memory");
    PT_EQ_INT(redisSetTimeout(c, it_tv(5000)), REDIS_OK);

    size_t total = 0;
    for (int i = 0; i < N; i++) {
        snprintf(keys[i], sizeof keys[i], "parley:it:%d:bin:%d", (int)getpid(), i);
        vals[i] = malloc(sizes[i] ? sizes[i] : 1);
        PT_ASSERT(vals[i]);
        for (size_t j = 0; j < sizes[i]; j++)
            vals[i][j] = (j % 7 == 0) ? 0 : (unsigned char)pt_rand(); /* zeros throughout */
        total += sizes[i];
    }
    double t0 = it_now();
    for (int i = 0; i < N; i++)
        PT_EQ_INT(redisAppendCommand(c, "SET %s %b", keys[i], vals[i], sizes[i]), REDIS_OK);
    for (int i = 0; i < N; i++) PT_EQ_INT(redisAppendCommand(c, "GET %s", keys[i]), REDIS_OK);
    for (int i = 0; i < N; i++) {
        redisReply *r = NULL;
        PT_ASSERT_MSG(redisGetReply(c, (void **)&r) == REDIS_OK && r, "SET reply: %s", c->errstr);
        int ok = r->type == REDIS_REPLY_STATUS && !strcmp(r->str, "OK");
        freeReplyObject(r);
        PT_ASSERT_MSG(ok, "SET %s did not answer OK", keys[i]);
    }
    for (int i = 0; i < N; i++) {
        redisReply *r = NULL;
        PT_ASSERT_MSG(redisGetReply(c, (void **)&r) == REDIS_OK && r, "GET reply: %s", c->errstr);
        int ok = r->type == REDIS_REPLY_STRING && (size_t)r->len == sizes[i] &&
                 !memcmp(r->str, vals[i], sizes[i]);
        freeReplyObject(r);
        PT_ASSERT_MSG(ok, "GET %s: value of %zu bytes did not round-trip", keys[i], sizes[i]);
    }
    double dt = it_now() - t0;
    redisReply *r = redisCommand(c, "DEL %s %s %s %s %s %s %s %s %s %s %s %s", keys[0], keys[1],
                                 keys[2], keys[3], keys[4], keys[5], keys[6], keys[7], keys[8],
                                 keys[9], keys[10], keys[11]);
    PT_ASSERT_MSG(r && r->type == REDIS_REPLY_INTEGER && r->integer == N, "DEL failed");
    freeReplyObject(r);
    r = redisCommand(c, "INFO server");
    PT_ASSERT(r && r->type == REDIS_REPLY_STRING);
    const char *v = strstr(r->str, "redis_version:");
    printf("redis %s:%d (%.*s): %d values, %zu bytes, pipelined SET+GET round-trip in %.1f ms\n",
           host, port, v ? (int)strcspn(v + 14, "\r\n") : 1, v ? v + 14 : "?", N, total, dt * 1e3);
    freeReplyObject(r);
    redisFree(c);
    for (int i = 0; i < N; i++) free(vals[i]);
}

/* A TCP port on 127.0.0.1 that was free a moment ago. */
static int it_free_port(void) {
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof sa;
    int fd = socket(AF_INET, SOCK_STREAM, 0), port = -1;
    if (fd >= 0 && !bind(fd, (struct sockaddr *)&sa, sizeof sa) &&
        !getsockname(fd, (struct sockaddr *)&sa, &len))
        port = ntohs(sa.sin_port);
    if (fd >= 0) close(fd);
    return port;
}

/* Starts a private redis-server in the foreground on port; returns its pid
 * once it answers PING. */
static pid_t it_start_private_redis(int port) {
    char portstr[16];
    snprintf(portstr, sizeof portstr, "%d", port);
    pid_t pid = fork();
    PT_ASSERT(pid >= 0);
    if (pid == 0) {
        int devnull = open("/dev/null", O_WRONLY);
        if (devnull >= 0) dup2(devnull, STDOUT_FILENO); /* its start-up banner */
        execlp("redis-server", "redis-server", "--bind", "127.0.0.1", "--port", portstr, "--save",
               "", "--appendonly", "no", "--loglevel", "warning", (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 100; i++) {
        redisContext *c = redisConnectWithTimeout("127.0.0.1", port, it_tv(200));
        if (c && !c->err) {
            redisReply *r = redisCommand(c, "PING");
            int ok = r && r->type == REDIS_REPLY_STATUS;
            freeReplyObject(r);
            redisFree(c);
            if (ok) return pid;
        } else {
            redisFree(c);
        }
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid)
            PT_FAIL("redis-server exited at start (status %d)", st);
        usleep(50000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    PT_FAIL("private redis-server on port %d never answered PING", port);
    return -1;
}

PT_TEST(redis_stopped_server_errors_within_timeout) {
    int port = it_free_port();
    PT_ASSERT(port > 0);
    pid_t pid = it_start_private_redis(port);
    redisContext *c = redisConnectWithTimeout("127.0.0.1", port, it_tv(IT_TIMEOUT_MS));
    PT_ASSERT_MSG(c && !c->err, "connect: %s", c ? c->errstr : "out of memory");
    PT_EQ_INT(redisSetTimeout(c, it_tv(IT_TIMEOUT_MS)), REDIS_OK);
    redisReply *r = redisCommand(c, "SET parley:it:k %b", "a\0b", (size_t)3);
    PT_ASSERT(r && r->type == REDIS_REPLY_STATUS);
    freeReplyObject(r);

    /* Frozen server: the command must fail after about the timeout. */
    PT_EQ_INT(kill(pid, SIGSTOP), 0);
    double t0 = it_now();
    r = redisCommand(c, "GET parley:it:k");
    double waited = it_now() - t0;
    int err = c->err;
    char errstr[128];
    snprintf(errstr, sizeof errstr, "%s", c->errstr);
    freeReplyObject(r);
    kill(pid, SIGCONT);
    printf("redis frozen (SIGSTOP): GET failed after %.0f ms with \"%s\" (timeout %d ms)\n",
           waited * 1e3, errstr, IT_TIMEOUT_MS);
    PT_ASSERT_MSG(r == NULL && err != 0, "GET against a frozen server returned a reply");
    PT_ASSERT_MSG(waited >= IT_TIMEOUT_MS / 1e3 * 0.9 && waited < IT_TIMEOUT_MS / 1e3 + 1.5,
                  "error after %.3f s, not bounded by the %d ms timeout", waited, IT_TIMEOUT_MS);
    redisFree(c);

    /* Killed server: the open connection errors at once, and so does a new one. */
    c = redisConnectWithTimeout("127.0.0.1", port, it_tv(IT_TIMEOUT_MS));
    PT_ASSERT_MSG(c && !c->err, "reconnect after SIGCONT: %s", c ? c->errstr : "out of memory");
    PT_EQ_INT(redisSetTimeout(c, it_tv(IT_TIMEOUT_MS)), REDIS_OK);
    PT_EQ_INT(kill(pid, SIGKILL), 0);
    PT_EQ_INT(waitpid(pid, NULL, 0), pid);
    t0 = it_now();
    r = redisCommand(c, "GET parley:it:k");
    waited = it_now() - t0;
    printf("redis killed: GET on the open connection failed after %.0f ms with \"%s\"\n",
           waited * 1e3, c->errstr);
    PT_ASSERT_MSG(r == NULL && c->err != 0, "GET against a killed server returned a reply");
    PT_ASSERT_MSG(waited < IT_TIMEOUT_MS / 1e3, "error took %.3f s", waited);
    redisFree(c);
    t0 = it_now();
    c = redisConnectWithTimeout("127.0.0.1", port, it_tv(IT_TIMEOUT_MS));
    waited = it_now() - t0;
    PT_ASSERT(c);
    printf("redis killed: new connection failed after %.0f ms with \"%s\"\n", waited * 1e3,
           c->errstr);
    PT_ASSERT_MSG(c->err != 0, "connected to a killed server");
    PT_ASSERT_MSG(waited < IT_TIMEOUT_MS / 1e3, "connect error took %.3f s", waited);
    redisFree(c);
}
