/*
 * test_wk_config.c -- the worker's configuration: defaults from the table,
 * precedence file < environment < flags, errors that name the key and the
 * source, kafka.* pass-through checked by librdkafka, and the generated
 * reference listing every property.
 */
#define PTEST_MAIN
#include <unistd.h>

#include "ptest.h"
#include "wk_config.h"

static char err[512];

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    PT_ASSERT(f != NULL);
    fputs(text, f);
    fclose(f);
}

PT_TEST(defaults) {
    cm_config *c;
    PT_EQ_INT(wk_config_new(&c), 0);
    PT_EQ_STR(cm_config_str(c, "worker.topic.turns"), "parley.turns");
    PT_EQ_INT(cm_config_int(c, "scheduler.max_running"), 64);
    PT_ASSERT(cm_config_bool(c, "cache.enabled"));
    /* model.path is required */
    PT_EQ_INT(cm_config_validate(c, err, sizeof err), CM_CONFIG_EINVAL);
    PT_ASSERT(strstr(err, "model.path") != NULL);
    /* every default satisfies its own row */
    size_t n;
    const cm_prop *p = wk_config_props(&n);
    PT_ASSERT(n > 20);
    for (size_t i = 0; i < n; i++) {
        PT_ASSERT_MSG(p[i].doc && *p[i].doc, "%s has no doc", p[i].name);
        if (p[i].type == CM_PROP_REQ || p[i].type == CM_PROP_ENUM) continue; /* enums: below */
        PT_ASSERT_MSG(cm_config_set(c, p[i].name, p[i].def, "test", err, sizeof err) == 0, "%s: %s",
                      p[i].name, err);
    }
    cm_config_free(c);
}

/* An enum row: its default is its first value, every listed value is
 * accepted and read back as its position, anything else is refused when
 * set, naming the key, the origin and the values. */
PT_TEST(enum_keys) {
    cm_config *c;
    char err[512];
    PT_EQ_INT(wk_config_new(&c), 0);
    PT_EQ_STR(cm_config_str(c, "model.backend"), "auto");
    PT_EQ_INT(cm_config_enum(c, "model.backend"), 0);
    PT_EQ_STR(cm_config_str(c, "model.chat_template"), "");
    PT_EQ_INT(cm_config_enum(c, "model.max_context"), 0); /* not an enum */
    size_t n, n_enum = 0;
    const cm_prop *p = wk_config_props(&n);
    for (size_t i = 0; i < n; i++) {
        if (p[i].type != CM_PROP_ENUM) continue;
        n_enum++;
        const char *v = p[i].def;
        for (int k = 0;; k++) {
            char one[64];
            size_t len = strcspn(v, "|");
            PT_ASSERT(len < sizeof one);
            memcpy(one, v, len);
            one[len] = 0;
            PT_ASSERT_MSG(cm_config_set(c, p[i].name, one, "test", err, sizeof err) == 0, "%s: %s",
                          p[i].name, err);
            PT_EQ_INT(cm_config_enum(c, p[i].name), k);
            PT_EQ_STR(cm_config_str(c, p[i].name), one);
            if (!v[len]) break;
            v += len + 1;
        }
        PT_EQ_INT(cm_config_set(c, p[i].name, "bogus", "flag --set", err, sizeof err),
                  CM_CONFIG_EINVAL);
        PT_ASSERT_MSG(strstr(err, p[i].name) && strstr(err, "flag --set") &&
                          strstr(err, "'bogus' is not one of "),
                      "%s", err);
    }
    PT_EQ_INT(n_enum, 5);
    cm_config_free(c);
}

PT_TEST(precedence_file_env_flags) {
    char path[] = "/tmp/wk_cfg_XXXXXX";
    int fd = mkstemp(path);
    PT_ASSERT(fd >= 0);
    close(fd);
    write_file(path, "# comment\n\n model.path = /m.gguf \nworker.max_inflight=10\n"
                     "scheduler.step_tokens = 64\nkafka.bootstrap.servers = a:1\n"
                     "kafka.linger.ms=7\n");
    cm_config *c;
    PT_EQ_INT(wk_config_new(&c), 0);
    PT_EQ_INT(cm_config_load_file(c, path, err, sizeof err), 0);
    char *env[] = {"PARLEY_WORKER_MAX_INFLIGHT=20",
                   "PARLEY_SCHEDULER_STEP_TOKENS=128",
                   "PARLEY_KAFKA_BOOTSTRAP_SERVERS=b:2",
                   "PARLEY_TEST_KAFKA=ignored:1",
                   "HOME=/root",
                   NULL};
    PT_EQ_INT(cm_config_load_env(c, env, err, sizeof err), 0);
    PT_EQ_INT(cm_config_set_pair(c, "scheduler.step_tokens=256", "flag", err, sizeof err), 0);
    PT_EQ_STR(cm_config_str(c, "model.path"), "/m.gguf");
    PT_EQ_INT(cm_config_int(c, "worker.max_inflight"), 20);    /* env over file */
    PT_EQ_INT(cm_config_int(c, "scheduler.step_tokens"), 256); /* flag over env */
    PT_EQ_INT((int)cm_config_kafka_count(c), 2);
    const char *k, *v;
    cm_config_kafka_at(c, 0, &k, &v);
    PT_EQ_STR(k, "bootstrap.servers");
    PT_EQ_STR(v, "b:2");
    cm_config_kafka_at(c, 1, &k, &v);
    PT_EQ_STR(k, "linger.ms");
    PT_EQ_STR(v, "7");
    PT_EQ_INT(cm_config_validate(c, err, sizeof err), 0);
    cm_config_free(c);
    unlink(path);
}

PT_TEST(errors_name_key_and_source) {
    cm_config *c;
    PT_EQ_INT(wk_config_new(&c), 0);
    PT_EQ_INT(cm_config_set(c, "worker.max_inflight", "0", "flag", err, sizeof err),
              CM_CONFIG_EINVAL);
    PT_ASSERT(strstr(err, "worker.max_inflight") && strstr(err, "outside"));
    PT_EQ_INT(cm_config_set(c, "worker.max_inflight", "12x", "flag", err, sizeof err),
              CM_CONFIG_EINVAL);
    PT_ASSERT(strstr(err, "not an integer"));
    PT_EQ_INT(
        cm_config_set(c, "worker.max_inflight", "99999999999999999999", "flag", err, sizeof err),
        CM_CONFIG_EINVAL);
    PT_EQ_INT(cm_config_set(c, "cache.enabled", "maybe", "flag", err, sizeof err),
              CM_CONFIG_EINVAL);
    PT_ASSERT(strstr(err, "cache.enabled") && strstr(err, "boolean"));
    PT_EQ_INT(cm_config_set(c, "cache.enabled", "off", "flag", err, sizeof err), 0);
    PT_ASSERT(!cm_config_bool(c, "cache.enabled"));
    PT_EQ_INT(cm_config_set(c, "model.pth", "x", "flag", err, sizeof err), CM_CONFIG_EINVAL);
    PT_ASSERT(strstr(err, "unknown configuration key 'model.pth'"));
    PT_EQ_INT(cm_config_set(c, "model.path", "", "flag", err, sizeof err), CM_CONFIG_EINVAL);
    PT_EQ_INT(cm_config_set_pair(c, "novalue", "flag --set", err, sizeof err), CM_CONFIG_EINVAL);
    char *env[] = {"PARLEY_WORKER_CHUNK_TOKENS=-4", NULL};
    PT_EQ_INT(cm_config_load_env(c, env, err, sizeof err), CM_CONFIG_EINVAL);
    PT_ASSERT(strstr(err, "worker.chunk_tokens") && strstr(err, "PARLEY_WORKER_CHUNK_TOKENS"));
    /* kafka.* values are checked by librdkafka at validation */
    PT_EQ_INT(cm_config_set(c, "model.path", "/m", "flag", err, sizeof err), 0);
    PT_EQ_INT(cm_config_set(c, "kafka.no.such.property", "1", "flag", err, sizeof err), 0);
    PT_EQ_INT(cm_config_validate(c, err, sizeof err), CM_CONFIG_EINVAL);
    PT_ASSERT(strstr(err, "kafka.no.such.property"));
    cm_config_free(c);
    /* file errors carry the line */
    char path[] = "/tmp/wk_cfg_XXXXXX";
    int fd = mkstemp(path);
    PT_ASSERT(fd >= 0);
    close(fd);
    write_file(path, "model.path = /m\nthis line has no equals sign\n");
    PT_EQ_INT(wk_config_new(&c), 0);
    PT_EQ_INT(cm_config_load_file(c, path, err, sizeof err), CM_CONFIG_EINVAL);
    PT_ASSERT(strstr(err, "line 2"));
    unlink(path);
    PT_EQ_INT(cm_config_load_file(c, path, err, sizeof err), CM_CONFIG_EIO);
    cm_config_free(c);
}

/* Validate a config of model.path plus the key=value pairs in kv (NULL-ended). */
static int validate_with(const char *const *kv) {
    cm_config *c;
    PT_EQ_INT(wk_config_new(&c), 0);
    PT_EQ_INT(cm_config_set(c, "model.path", "/m", "flag", err, sizeof err), 0);
    for (; *kv; kv++) PT_EQ_INT(cm_config_set_pair(c, *kv, "flag", err, sizeof err), 0);
    int rc = cm_config_validate(c, err, sizeof err);
    cm_config_free(c);
    return rc;
}

PT_TEST(redis_auth_and_tls_keys_validated_together) {
    const char *ok[] = {"redis.addr=r:6380",
                        "redis.user=parley",
                        "redis.password=s3cret",
                        "redis.tls=true",
                        "redis.tls.ca=/ca.pem",
                        "redis.tls.cert=/c.pem",
                        "redis.tls.key=/k.pem",
                        "redis.tls.server_name=redis.internal",
                        NULL};
    PT_EQ_INT(validate_with(ok), 0);
    const char *cert_only[] = {"redis.addr=r:1", "redis.tls=on", "redis.tls.cert=/c.pem", NULL};
    PT_EQ_INT(validate_with(cert_only), CM_CONFIG_EINVAL);
    PT_ASSERT_MSG(strstr(err, "'redis.tls.cert' needs 'redis.tls.key'"), "%s", err);
    const char *key_only[] = {"redis.addr=r:1", "redis.tls=on", "redis.tls.key=/k.pem", NULL};
    PT_EQ_INT(validate_with(key_only), CM_CONFIG_EINVAL);
    PT_ASSERT_MSG(strstr(err, "'redis.tls.key' needs 'redis.tls.cert'"), "%s", err);
    const char *no_tls[] = {"redis.addr=r:1", "redis.tls.ca=/ca.pem", NULL};
    PT_EQ_INT(validate_with(no_tls), CM_CONFIG_EINVAL);
    PT_ASSERT_MSG(strstr(err, "'redis.tls.ca' is set but 'redis.tls' is false"), "%s", err);
    const char *user_only[] = {"redis.addr=r:1", "redis.user=parley", NULL};
    PT_EQ_INT(validate_with(user_only), CM_CONFIG_EINVAL);
    PT_ASSERT_MSG(strstr(err, "'redis.user' needs 'redis.password'"), "%s", err);
    const char *no_addr[] = {"redis.password=s3cret", NULL};
    PT_EQ_INT(validate_with(no_addr), CM_CONFIG_EINVAL);
    PT_ASSERT_MSG(strstr(err, "redis.addr"), "%s", err);
    /* the password comes from the environment too, and no message shows it */
    cm_config *c;
    PT_EQ_INT(wk_config_new(&c), 0);
    char *env[] = {"PARLEY_REDIS_PASSWORD=hunter2", "PARLEY_REDIS_TLS_SERVER_NAME=n", NULL};
    PT_EQ_INT(cm_config_load_env(c, env, err, sizeof err), 0);
    PT_EQ_STR(cm_config_str(c, "redis.password"), "hunter2");
    PT_EQ_STR(cm_config_str(c, "redis.tls.server_name"), "n");
    PT_EQ_INT(cm_config_set(c, "model.path", "/m", "flag", err, sizeof err), 0);
    PT_EQ_INT(cm_config_validate(c, err, sizeof err), CM_CONFIG_EINVAL);
    PT_ASSERT_MSG(!strstr(err, "hunter2"), "%s", err);
    cm_config_free(c);
}

PT_TEST(reference_lists_every_property) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    PT_ASSERT(f != NULL);
    PT_EQ_INT(wk_config_doc(f), 0);
    fclose(f);
    size_t n;
    const cm_prop *p = wk_config_props(&n);
    char want[128];
    for (size_t i = 0; i < n; i++) {
        snprintf(want, sizeof want, "| `%s` |", p[i].name);
        PT_ASSERT_MSG(strstr(buf, want) != NULL, "%s missing from the reference", p[i].name);
    }
    PT_ASSERT(strstr(buf, "`PARLEY_MODEL_PATH`") && strstr(buf, "kafka.bootstrap.servers"));
    free(buf);
}
