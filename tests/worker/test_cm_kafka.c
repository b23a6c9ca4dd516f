/*
 * test_cm_kafka.c -- the Kafka layer every command builds its clients
 * through (consumer/common/cm_kafka.c): librdkafka's scopes, which client
 * takes which kafka.* key, keys refused naming them (no client of the
 * command takes it, or the layer sets it itself), the conf builders'
 * defaults / user keys / forced settings, and the record of refusals.
 */
#define PTEST_MAIN
#include <string.h>

#include "cm_kafka.h"
#include "ptest.h"

static char err[512];

/* A configuration with only kafka.* keys (name, value pairs). */
static cm_config *kcfg(const char *const *kv) {
    cm_config *c;
    PT_ASSERT(cm_config_new(NULL, 0, "test", NULL, &c) == 0);
    for (int i = 0; kv && kv[i]; i += 2)
        PT_ASSERT_MSG(cm_config_set(c, kv[i], kv[i + 1], "test", err, sizeof err) == 0, "%s", err);
    return c;
}

/* The value of property name in conf (a static buffer). */
static const char *conf_get(const rd_kafka_conf_t *conf, const char *name) {
    static char v[256];
    size_t n = sizeof v;
    if (rd_kafka_conf_get(conf, name, v, &n) != RD_KAFKA_CONF_OK) return NULL;
    return v;
}

PT_TEST(scopes_from_librdkafka) {
    PT_EQ_INT(cm_kafka_prop_scope("fetch.wait.max.ms"), 'C');
    PT_EQ_INT(cm_kafka_prop_scope("linger.ms"), 'P');
    PT_EQ_INT(cm_kafka_prop_scope("bootstrap.servers"), '*');
    PT_EQ_INT(cm_kafka_prop_scope("security.protocol"), '*');
    PT_EQ_INT(cm_kafka_prop_scope("no.such.property"), '*');
    PT_EQ_STR(cm_kafka_prop_for("fetch.wait.max.ms", CM_KAFKA_READER), "fetch.wait.max.ms");
    PT_ASSERT(cm_kafka_prop_for("fetch.wait.max.ms", CM_KAFKA_PRODUCER) == NULL);
    PT_ASSERT(cm_kafka_prop_for("fetch.wait.max.ms", CM_KAFKA_ADMIN) == NULL);
    PT_EQ_STR(cm_kafka_prop_for("linger.ms", CM_KAFKA_PRODUCER), "linger.ms");
    PT_ASSERT(cm_kafka_prop_for("linger.ms", CM_KAFKA_GROUP) == NULL);
    PT_EQ_STR(cm_kafka_prop_for("producer.client.id", CM_KAFKA_PRODUCER), "client.id");
    PT_ASSERT(cm_kafka_prop_for("producer.client.id", CM_KAFKA_READER) == NULL);
    PT_EQ_STR(cm_kafka_prop_for("consumer.client.id", CM_KAFKA_GROUP), "client.id");
    PT_ASSERT(cm_kafka_prop_for("consumer.client.id", CM_KAFKA_ADMIN) == NULL);
    PT_EQ_STR(cm_kafka_prop_for("sasl.username", CM_KAFKA_ADMIN), "sasl.username");
}

/* cm_kafka_config_check over one key for a set of roles: 0 or the code
 * (err names the key). */
static int check1(const char *key, const char *val, unsigned roles) {
    const char *kv[] = {"kafka.bootstrap.servers", "h:1", key, val, NULL};
    cm_config *c = kcfg(kv);
    int rc = cm_kafka_config_check(c, roles, "test", err, sizeof err);
    cm_config_free(c);
    return rc;
}

PT_TEST(unusable_keys_are_refused_naming_them) {
    const unsigned admin = CM_KAFKA_ADMIN, clients = CM_KAFKA_PRODUCER | CM_KAFKA_READER,
                   worker = CM_KAFKA_GROUP | CM_KAFKA_PRODUCER;
    /* no client of the command takes it */
    PT_EQ_INT(check1("kafka.fetch.wait.max.ms", "10", admin), CM_KAFKA_EINVAL);
    PT_ASSERT(strstr(err, "'kafka.fetch.wait.max.ms'") && strstr(err, "consumer property"));
    PT_EQ_INT(check1("kafka.linger.ms", "5", admin), CM_KAFKA_EINVAL);
    PT_ASSERT(strstr(err, "'kafka.linger.ms'") != NULL);
    PT_EQ_INT(check1("kafka.producer.client.id", "x", admin), CM_KAFKA_EINVAL);
    PT_ASSERT(strstr(err, "'kafka.producer.client.id'") != NULL);
    PT_EQ_INT(check1("kafka.consumer.client.id", "x", CM_KAFKA_PRODUCER), CM_KAFKA_EINVAL);
    /* the layer sets it itself */
    PT_EQ_INT(check1("kafka.isolation.level", "read_uncommitted", clients), CM_KAFKA_EINVAL);
    PT_ASSERT(strstr(err, "'kafka.isolation.level'") && strstr(err, "reader"));
    PT_EQ_INT(check1("kafka.group.id", "g", clients), CM_KAFKA_EINVAL);
    PT_EQ_INT(check1("kafka.transactional.id", "t", worker), CM_KAFKA_EINVAL);
    PT_ASSERT(strstr(err, "'kafka.transactional.id'") != NULL);
    PT_EQ_INT(check1("kafka.enable.idempotence", "false", clients), CM_KAFKA_EINVAL);
    PT_EQ_INT(check1("kafka.enable.auto.commit", "true", worker), CM_KAFKA_EINVAL);
    /* usable keys pass */
    PT_EQ_INT(check1("kafka.enable.idempotence", "true", clients), 0);
    PT_EQ_INT(check1("kafka.group.id", "g", worker), 0); /* the worker's group */
    PT_EQ_INT(check1("kafka.security.protocol", "SASL_SSL", admin), 0);
    PT_EQ_INT(check1("kafka.fetch.wait.max.ms", "10", clients), 0);
    PT_EQ_INT(check1("kafka.linger.ms", "5", worker), 0);
    PT_EQ_INT(check1("kafka.consumer.client.id", "c", clients), 0);
}

PT_TEST(conf_builders_apply_user_keys_where_they_belong) {
    const char *kv[] = {"kafka.bootstrap.servers",
                        "h:1",
                        "kafka.security.protocol",
                        "SASL_SSL",
                        "kafka.sasl.mechanisms",
                        "SCRAM-SHA-512",
                        "kafka.fetch.wait.max.ms",
                        "77",
                        "kafka.linger.ms",
                        "9",
                        "kafka.producer.client.id",
                        "p-id",
                        NULL};
    cm_config *c = kcfg(kv);
    cm_kafka *k;
    PT_EQ_INT(cm_kafka_new(c, CM_KAFKA_READER | CM_KAFKA_PRODUCER, "test", &k, err, sizeof err), 0);
    PT_EQ_STR(cm_kafka_brokers(k), "h:1");
    rd_kafka_conf_t *r1, *r2, *p, *t;
    cm_kafka_spec rs = {.role = CM_KAFKA_READER, .committed = 1};
    PT_EQ_INT(cm_kafka_conf_new(k, &rs, &r1, err, sizeof err), 0);
    rs.committed = 0;
    PT_EQ_INT(cm_kafka_conf_new(k, &rs, &r2, err, sizeof err), 0);
    PT_EQ_STR(conf_get(r1, "security.protocol"), "sasl_ssl");
    PT_EQ_STR(conf_get(r1, "fetch.wait.max.ms"), "77"); /* the user's over the layer's 10 */
    PT_EQ_STR(conf_get(r1, "isolation.level"), "read_committed");
    PT_EQ_STR(conf_get(r2, "isolation.level"), "read_uncommitted");
    PT_EQ_STR(conf_get(r1, "enable.auto.commit"), "false");
    char g1[256];
    snprintf(g1, sizeof g1, "%s", conf_get(r1, "group.id"));
    PT_ASSERT(strcmp(g1, conf_get(r2, "group.id")) != 0); /* every reader its own */
    PT_ASSERT(strcmp(conf_get(r1, "client.id"), "p-id") != 0);
    const char *pdefs[] = {"linger.ms", "1", "acks", "all", NULL};
    cm_kafka_spec ps = {.role = CM_KAFKA_PRODUCER, .defs = pdefs};
    PT_EQ_INT(cm_kafka_conf_new(k, &ps, &p, err, sizeof err), 0);
    PT_EQ_STR(conf_get(p, "linger.ms"), "9"); /* the user's over the caller's default */
    PT_EQ_STR(conf_get(p, "enable.idempotence"), "true");
    PT_EQ_STR(conf_get(p, "client.id"), "p-id");
    PT_EQ_STR(conf_get(p, "sasl.mechanisms"), "SCRAM-SHA-512");
    ps.txn_id = "parley-w1";
    PT_EQ_INT(cm_kafka_conf_new(k, &ps, &t, err, sizeof err), 0);
    PT_EQ_STR(conf_get(t, "transactional.id"), "parley-w1");
    rd_kafka_conf_destroy(r1);
    rd_kafka_conf_destroy(r2);
    rd_kafka_conf_destroy(p);
    rd_kafka_conf_destroy(t);
    /* a caller's forced setting the user contradicts: refused, not overwritten */
    const char *forced[] = {"linger.ms", "0", NULL};
    cm_kafka_spec fs = {.role = CM_KAFKA_PRODUCER, .forced = forced};
    PT_EQ_INT(cm_kafka_conf_new(k, &fs, &p, err, sizeof err), CM_KAFKA_EINVAL);
    PT_ASSERT(p == NULL && strstr(err, "'kafka.linger.ms'"));
    cm_kafka_free(k);
    cm_config_free(c);
    /* cm_kafka_new refuses what the check refuses */
    const char *bad[] = {"kafka.bootstrap.servers", "h:1", "kafka.fetch.wait.max.ms", "5", NULL};
    c = kcfg(bad);
    PT_EQ_INT(cm_kafka_new(c, CM_KAFKA_ADMIN, "topics", &k, err, sizeof err), CM_KAFKA_EINVAL);
    PT_ASSERT(k == NULL && strstr(err, "parley topics") && strstr(err, "kafka.fetch.wait.max.ms"));
    cm_config_free(c);
}

PT_TEST(refusals_are_classified_and_the_first_recorded) {
    PT_EQ_INT(cm_kafka_refusal_class(RD_KAFKA_RESP_ERR__AUTHENTICATION, "x"),
              CM_KAFKA_REFUSED_SASL);
    PT_EQ_INT(cm_kafka_refusal_class(RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED, NULL),
              CM_KAFKA_REFUSED_ACL);
    PT_EQ_INT(cm_kafka_refusal_class(RD_KAFKA_RESP_ERR__SSL, "certificate verify failed"),
              CM_KAFKA_REFUSED_TLS);
    PT_EQ_INT(cm_kafka_refusal_class(RD_KAFKA_RESP_ERR__SSL, "connection reset"), 0);
    PT_EQ_INT(cm_kafka_refusal_class(RD_KAFKA_RESP_ERR__TRANSPORT, "down"), 0);
    PT_EQ_STR(cm_kafka_refusal_text(CM_KAFKA_REFUSED_ACL, "hint"), "hint");
    const char *kv[] = {"kafka.bootstrap.servers", "h:1", NULL};
    cm_config *c = kcfg(kv);
    cm_kafka *k;
    PT_EQ_INT(cm_kafka_new(c, CM_KAFKA_PRODUCER, "chat", &k, err, sizeof err), 0);
    PT_ASSERT(cm_kafka_refusal_msg(k) == NULL);
    cm_kafka_refusal_note(k, RD_KAFKA_RESP_ERR__TRANSPORT, "down"); /* not a refusal */
    PT_ASSERT(cm_kafka_refusal_msg(k) == NULL);
    cm_kafka_refusal_note(k, RD_KAFKA_RESP_ERR__AUTHENTICATION, "bad password");
    cm_kafka_refusal_note(k, RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED, "later");
    PT_ASSERT(cm_kafka_refusal_msg(k) != NULL);
    PT_ASSERT(strstr(cm_kafka_refusal_msg(k), "parley chat: SASL authentication failed"));
    PT_ASSERT(strstr(cm_kafka_refusal_msg(k), "bad password"));
    cm_kafka_free(k);
    cm_config_free(c);
}
