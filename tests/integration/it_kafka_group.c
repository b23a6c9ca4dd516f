/*
 * it_kafka_group.c -- integration test of librdkafka against the real
 * Kafka 4.x broker that tests/run.sh starts (bootstrap in
 * PARLEY_TEST_KAFKA; missing is a failure, not a skip).
 *
 * What parley's delivery rests on: keyed records land on one partition in
 * order, and a consumer group with the cooperative-sticky assignor hands a
 * partition from one member to another without losing or repeating records
 * when offsets are committed on revocation.  The test creates a topic with
 * several partitions (Admin API), produces 10,000 msgpack records keyed by
 * 100 conversation ids with a per-key sequence number (idempotent
 * producer), in two halves:
 *   1. the first half is consumed by consumer A alone;
 *   2. consumer B joins the group (incremental rebalance: A gives up some
 *      partitions, committing first), then the second half is produced and
 *      both consume it.
 * Every record must arrive exactly once, per-key order must hold, and B
 * must have received records.  The counts are printed.
 */
#define PTEST_MAIN
#include "ptest.h"

#include <librdkafka/rdkafka.h>
#include <msgpack.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>
#include "pl_time.h"

#define IT_PARTITIONS 6
#define IT_KEYS 100
#define IT_RECORDS 10000
#define IT_PER_KEY (IT_RECORDS / IT_KEYS)
#define IT_TIMEOUT_S 90

/* One consumer thread's state. */
typedef struct it_consumer {
    const char *name;      /* "A" or "B", for messages */
    rd_kafka_t *rk;        /* the consumer handle (owned) */
    pthread_t thread;      /* its poll loop */
    atomic_int assigned;   /* partitions currently assigned */
    atomic_int consumed;   /* records received */
    atomic_int rebalances; /* assign + revoke callbacks seen */
    atomic_int errors;     /* consumer errors and failed commits */
} it_consumer;

/* What all consumers record, under the mutex. */
static struct {
    pthread_mutex_t mu;             /* guards everything below */
    unsigned char seen[IT_RECORDS]; /* times record i arrived */
    int last_seq[IT_KEYS];          /* last sequence number seen per key */
    int unique;                     /* distinct records received */
    int duplicates;                 /* records received more than once */
    int order_violations;           /* per-key sequence not last + 1 */
    int bad_records;                /* undecodable or inconsistent values */
} it_rx = {.mu = PTHREAD_MUTEX_INITIALIZER};

static atomic_int it_stop;          /* tells consumer threads to finish */
static atomic_int it_delivered;     /* producer delivery reports, success */
static atomic_int it_delivery_errs; /* ... failures */

static double it_now(void) { return pl_mono_s(); }

static const char *it_bootstrap(void) {
    const char *b = getenv("PARLEY_TEST_KAFKA");
    PT_ASSERT_MSG(b && *b, "PARLEY_TEST_KAFKA is not set: run tests/run.sh, or start "
                           "deploy/kafka.sh and export PARLEY_TEST_KAFKA=host:port");
    return b;
}

static rd_kafka_conf_t *it_conf(const char *bootstrap) {
    char err[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    if (rd_kafka_conf_set(conf, "bootstrap.servers", bootstrap, err, sizeof err))
        PT_FAIL("bootstrap.servers: %s", err);
    return conf;
}

static void it_set(rd_kafka_conf_t *conf, const char *k, const char *v) {
    char err[512];
    if (rd_kafka_conf_set(conf, k, v, err, sizeof err) != RD_KAFKA_CONF_OK)
        PT_FAIL("config %s=%s: %s", k, v, err);
}

static void it_dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
    if (m->err) {
        atomic_fetch_add(&it_delivery_errs, 1);
        fprintf(stderr, "delivery failed: %s\n", rd_kafka_err2str(m->err));
    } else {
        atomic_fetch_add(&it_delivered, 1);
    }
}

static void it_create_topic(rd_kafka_t *rk, const char *topic) {
    char err[512];
    rd_kafka_NewTopic_t *nt = rd_kafka_NewTopic_new(topic, IT_PARTITIONS, 1, err, sizeof err);
    PT_ASSERT_MSG(nt, "NewTopic: %s", err);
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    rd_kafka_CreateTopics(rk, &nt, 1, NULL, q);
    rd_kafka_event_t *ev = rd_kafka_queue_poll(q, 30000);
    rd_kafka_NewTopic_destroy(nt);
    rd_kafka_queue_destroy(q);
    PT_ASSERT_MSG(ev, "CreateTopics: no result within 30 s");
    const rd_kafka_CreateTopics_result_t *res = rd_kafka_event_CreateTopics_result(ev);
    size_t n = 0;
    const rd_kafka_topic_result_t **tr = res ? rd_kafka_CreateTopics_result_topics(res, &n) : NULL;
    rd_kafka_resp_err_t e = rd_kafka_event_error(ev);
    if (!e && n == 1) e = rd_kafka_topic_result_error(tr[0]);
    char msg[512];
    snprintf(msg, sizeof msg, "%s", e ? rd_kafka_err2str(e) : "");
    rd_kafka_event_destroy(ev);
    PT_ASSERT_MSG(!e && n == 1, "CreateTopics %s: %s", topic, msg);
}

/* Produces records [from, to): record i has key conv-(i % 100) and
 * sequence i / 100 within its key. */
static void it_produce(rd_kafka_t *rk, const char *topic, int from, int to) {
    msgpack_sbuffer sb;
    msgpack_packer pk;
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    for (int i = from; i < to; i++) {
        char key[16];
        int klen = snprintf(key, sizeof key, "conv-%03d", i % IT_KEYS);
        msgpack_sbuffer_clear(&sb);
        msgpack_pack_map(&pk, 3);
        msgpack_pack_str_with_body(&pk, "conversation_id", 15);
        msgpack_pack_str_with_body(&pk, key, (size_t)klen);
        msgpack_pack_str_with_body(&pk, "seq", 3);
        msgpack_pack_int(&pk, i / IT_KEYS);
        msgpack_pack_str_with_body(&pk, "i", 1);
        msgpack_pack_int(&pk, i);
        rd_kafka_resp_err_t e;
        while ((e = rd_kafka_producev(
                    rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_KEY(key, (size_t)klen),
                    RD_KAFKA_V_VALUE(sb.data, sb.size), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                    RD_KAFKA_V_END)) == RD_KAFKA_RESP_ERR__QUEUE_FULL)
            rd_kafka_poll(rk, 10);
        if (e) {
            msgpack_sbuffer_destroy(&sb);
            PT_FAIL("produce record %d: %s", i, rd_kafka_err2str(e));
        }
        rd_kafka_poll(rk, 0);
    }
    msgpack_sbuffer_destroy(&sb);
    rd_kafka_resp_err_t e = rd_kafka_flush(rk, 30000);
    PT_ASSERT_MSG(!e, "flush: %s", rd_kafka_err2str(e));
}

/* Looks up a small non-negative integer field of a msgpack map. */
static int it_map_int(const msgpack_object *o, const char *name, long long *out) {
    size_t nl = strlen(name);
    for (uint32_t i = 0; i < o->via.map.size; i++) {
        const msgpack_object_kv *kv = &o->via.map.ptr[i];
        if (kv->key.type == MSGPACK_OBJECT_STR && kv->key.via.str.size == nl &&
            !memcmp(kv->key.via.str.ptr, name, nl) &&
            kv->val.type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
            *out = (long long)kv->val.via.u64;
            return 0;
        }
    }
    return -1;
}

static void it_record(const rd_kafka_message_t *m) {
    msgpack_unpacked up;
    long long seq = -1, idx = -1;
    int ok = 0;
    msgpack_unpacked_init(&up);
    if (msgpack_unpack_next(&up, m->payload, m->len, NULL) == MSGPACK_UNPACK_SUCCESS &&
        up.data.type == MSGPACK_OBJECT_MAP && !it_map_int(&up.data, "seq", &seq) &&
        !it_map_int(&up.data, "i", &idx) && idx >= 0 && idx < IT_RECORDS && seq == idx / IT_KEYS &&
        m->key_len == 8 && !memcmp(m->key, "conv-", 5) &&
        atoi((const char *)m->key + 5) == idx % IT_KEYS)
        ok = 1;
    msgpack_unpacked_destroy(&up);
    pthread_mutex_lock(&it_rx.mu);
    if (!ok) {
        it_rx.bad_records++;
    } else if (it_rx.seen[idx]++) {
        it_rx.duplicates++;
    } else {
        int k = (int)(idx % IT_KEYS);
        if (seq != it_rx.last_seq[k] + 1) it_rx.order_violations++;
        it_rx.last_seq[k] = (int)seq;
        it_rx.unique++;
    }
    pthread_mutex_unlock(&it_rx.mu);
}

/* Cooperative rebalance: commit what was consumed before giving partitions
 * up, so the next owner resumes exactly after it. */
static void it_rebalance_cb(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                            rd_kafka_topic_partition_list_t *parts, void *opaque) {
    it_consumer *c = opaque;
    rd_kafka_error_t *e = NULL;
    atomic_fetch_add(&c->rebalances, 1);
    if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
        e = rd_kafka_incremental_assign(rk, parts);
        if (!e) atomic_fetch_add(&c->assigned, parts->cnt);
    } else {
        rd_kafka_resp_err_t ce = rd_kafka_commit(rk, NULL, 0);
        if (ce && ce != RD_KAFKA_RESP_ERR__NO_OFFSET) {
            fprintf(stderr, "consumer %s: commit on revoke: %s\n", c->name, rd_kafka_err2str(ce));
            atomic_fetch_add(&c->errors, 1);
        }
        e = rd_kafka_incremental_unassign(rk, parts);
        if (!e) atomic_fetch_sub(&c->assigned, parts->cnt);
    }
    if (e) {
        fprintf(stderr, "consumer %s: %s\n", c->name, rd_kafka_error_string(e));
        atomic_fetch_add(&c->errors, 1);
        rd_kafka_error_destroy(e);
    }
}

static void *it_consume_loop(void *arg) {
    it_consumer *c = arg;
    while (!atomic_load(&it_stop)) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(c->rk, 100);
        if (!m) continue;
        if (m->err) {
            fprintf(stderr, "consumer %s: %s\n", c->name, rd_kafka_message_errstr(m));
            atomic_fetch_add(&c->errors, 1);
        } else {
            it_record(m);
            atomic_fetch_add(&c->consumed, 1);
        }
        rd_kafka_message_destroy(m);
    }
    return NULL;
}

static void it_consumer_start(it_consumer *c, const char *bootstrap, const char *group,
                              const char *topic) {
    char err[512];
    rd_kafka_conf_t *conf = it_conf(bootstrap);
    it_set(conf, "group.id", group);
    it_set(conf, "partition.assignment.strategy", "cooperative-sticky");
    it_set(conf, "auto.offset.reset", "earliest");
    it_set(conf, "enable.auto.commit", "false");
    it_set(conf, "session.timeout.ms", "10000");
    rd_kafka_conf_set_rebalance_cb(conf, it_rebalance_cb);
    rd_kafka_conf_set_opaque(conf, c);
    c->rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
    PT_ASSERT_MSG(c->rk, "consumer %s: %s", c->name, err);
    rd_kafka_poll_set_consumer(c->rk);
    rd_kafka_topic_partition_list_t *t = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(t, topic, RD_KAFKA_PARTITION_UA);
    rd_kafka_resp_err_t e = rd_kafka_subscribe(c->rk, t);
    rd_kafka_topic_partition_list_destroy(t);
    PT_ASSERT_MSG(!e, "subscribe: %s", rd_kafka_err2str(e));
    PT_ASSERT(pthread_create(&c->thread, NULL, it_consume_loop, c) == 0);
}

/* Waits until cond() holds, failing the test after the deadline. */
static void it_wait(int (*cond)(void), double deadline, const char *what) {
    while (!cond()) {
        PT_ASSERT_MSG(it_now() < deadline, "timed out waiting for %s", what);
        usleep(20000);
    }
}

static it_consumer it_a = {.name = "A"}, it_b = {.name = "B"};
static int it_first_half_in(void) { return atomic_load(&it_a.consumed) >= IT_RECORDS / 2; }
static int it_split(void) {
    return atomic_load(&it_b.assigned) > 0 &&
           atomic_load(&it_a.assigned) + atomic_load(&it_b.assigned) == IT_PARTITIONS;
}
static int it_all_in(void) {
    pthread_mutex_lock(&it_rx.mu);
    int n = it_rx.unique + it_rx.duplicates + it_rx.bad_records;
    pthread_mutex_unlock(&it_rx.mu);
    return n >= IT_RECORDS;
}

PT_TEST(kafka_group_exactly_once_in_order) {
    const char *bootstrap = it_bootstrap();
    char topic[96], group[96], err[512];
    double t0 = it_now(), deadline = t0 + IT_TIMEOUT_S;
    snprintf(topic, sizeof topic, "parley.it.group.%d.%ld", (int)getpid(), (long)time(NULL));
    snprintf(group, sizeof group, "parley-it-%d-%ld", (int)getpid(), (long)time(NULL));
    for (int k = 0; k < IT_KEYS; k++) it_rx.last_seq[k] = -1;
    printf("librdkafka %s, broker %s, topic %s (%d partitions)\n", rd_kafka_version_str(),
           bootstrap, topic, IT_PARTITIONS);

    rd_kafka_conf_t *pconf = it_conf(bootstrap);
    it_set(pconf, "enable.idempotence", "true");
    it_set(pconf, "linger.ms", "5");
    rd_kafka_conf_set_dr_msg_cb(pconf, it_dr_cb);
    rd_kafka_t *prod = rd_kafka_new(RD_KAFKA_PRODUCER, pconf, err, sizeof err);
    PT_ASSERT_MSG(prod, "producer: %s", err);
    it_create_topic(prod, topic);

    it_produce(prod, topic, 0, IT_RECORDS / 2);
    it_consumer_start(&it_a, bootstrap, group, topic);
    it_wait(it_first_half_in, deadline, "consumer A to read the first half");
    double t_split = it_now();
    it_consumer_start(&it_b, bootstrap, group, topic);
    it_wait(it_split, deadline, "the group to split the partitions between A and B");
    printf("rebalance: B joined in %.1f s; A holds %d partitions, B %d\n", it_now() - t_split,
           atomic_load(&it_a.assigned), atomic_load(&it_b.assigned));
    it_produce(prod, topic, IT_RECORDS / 2, IT_RECORDS);
    it_wait(it_all_in, deadline, "all records to be consumed");
    sleep(2); /* anything arriving now is a duplicate */

    atomic_store(&it_stop, 1);
    pthread_join(it_a.thread, NULL);
    pthread_join(it_b.thread, NULL);
    rd_kafka_consumer_close(it_a.rk);
    rd_kafka_consumer_close(it_b.rk);
    rd_kafka_destroy(it_a.rk);
    rd_kafka_destroy(it_b.rk);
    rd_kafka_destroy(prod);

    int missing = IT_RECORDS - it_rx.unique;
    printf("kafka group: produced %d (delivery errors %d), consumed %d (A %d, B %d), "
           "duplicates %d, order violations %d, missing %d, bad %d, rebalances A %d B %d, "
           "%.1f s\n",
           atomic_load(&it_delivered), atomic_load(&it_delivery_errs),
           atomic_load(&it_a.consumed) + atomic_load(&it_b.consumed), atomic_load(&it_a.consumed),
           atomic_load(&it_b.consumed), it_rx.duplicates, it_rx.order_violations, missing,
           it_rx.bad_records, atomic_load(&it_a.rebalances), atomic_load(&it_b.rebalances),
           it_now() - t0);
    PT_EQ_INT(atomic_load(&it_delivered), IT_RECORDS);
    PT_EQ_INT(atomic_load(&it_delivery_errs), 0);
    PT_EQ_INT(it_rx.unique, IT_RECORDS);
    PT_EQ_INT(it_rx.duplicates, 0);
    PT_EQ_INT(it_rx.order_violations, 0);
    PT_EQ_INT(it_rx.bad_records, 0);
    PT_EQ_INT(atomic_load(&it_a.errors) + atomic_load(&it_b.errors), 0);
    PT_ASSERT_MSG(atomic_load(&it_b.consumed) > 0, "consumer B received nothing");
    for (int k = 0; k < IT_KEYS; k++) PT_EQ_INT(it_rx.last_seq[k], IT_PER_KEY - 1);
}
