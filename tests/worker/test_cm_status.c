/*
 * test_cm_status.c -- the worker status record (consumer/common/cm_status.c):
 * encode then parse gives the record back; every field that is missing,
 * mistyped, out of range or too long refuses the record naming it; newer
 * versions, bad JSON, NUL bytes and oversized values are refused; unknown
 * members are ignored.
 */
#define PTEST_MAIN
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cm_status.h"
#include "ptest.h"

static cm_status sample(void) {
    cm_status s;
    memset(&s, 0, sizeof s);
    snprintf(s.worker, sizeof s.worker, "w-1");
    snprintf(s.host, sizeof s.host, "node-3");
    snprintf(s.model, sizeof s.model, "smollm");
    snprintf(s.state, sizeof s.state, "paused");
    s.ts_ms = 1765100000000;
    s.interval_ms = 2000;
    s.turns = 1234;
    s.prompt_tokens = 99000;
    s.cached_tokens = 70000;
    s.turns_per_s = 3.5;
    s.cache_share = 0.75;
    return s;
}

/* Parse text; return 0/-1 and leave the message in err. */
static int parse(const char *text, cm_status *out, char *err, size_t errlen) {
    return cm_status_parse(text, strlen(text), out, err, errlen);
}

PT_TEST(round_trip) {
    cm_status s = sample(), r;
    size_t len;
    char *txt = cm_status_encode(&s, &len), err[256];
    PT_ASSERT(txt && len == strlen(txt));
    PT_EQ_INT(cm_status_parse(txt, len, &r, err, sizeof err), 0);
    PT_EQ_INT(r.v, CM_STATUS_VERSION);
    PT_EQ_STR(r.worker, "w-1");
    PT_EQ_STR(r.host, "node-3");
    PT_EQ_STR(r.model, "smollm");
    PT_EQ_STR(r.state, "paused");
    PT_ASSERT(r.ts_ms == s.ts_ms && r.interval_ms == 2000 && r.turns == 1234);
    PT_ASSERT(r.prompt_tokens == 99000 && r.cached_tokens == 70000);
    PT_NEAR(r.turns_per_s, 3.5, 1e-9);
    PT_NEAR(r.cache_share, 0.75, 1e-9);
    free(txt);
    s.cache_share = -1; /* no prompt tokens in the period */
    txt = cm_status_encode(&s, &len);
    PT_EQ_INT(cm_status_parse(txt, len, &r, err, sizeof err), 0);
    PT_NEAR(r.cache_share, -1, 1e-9);
    free(txt);
}

PT_TEST(unknown_members_are_ignored) {
    cm_status r;
    char err[256];
    PT_EQ_INT(parse("{\"v\":1,\"worker\":\"a\",\"host\":\"\",\"model\":\"m\",\"state\":\"running\","
                    "\"ts_ms\":1,\"interval_ms\":500,\"turns\":0,\"prompt_tokens\":0,"
                    "\"cached_tokens\":0,\"turns_per_s\":0,\"cache_share\":-1,\"gpu\":\"h100\"}",
                    &r, err, sizeof err),
              0);
    PT_EQ_STR(r.worker, "a");
}

/* Each bad value of one member, with the member the message must name. */
static const struct {
    const char *member, *value;
} bad[] = {
    {"v", "0"},
    {"v", "2"},
    {"v", "\"1\""},
    {"worker", "\"\""},
    {"worker", "7"},
    {"host", "null"},
    {"model", "[]"},
    {"state", "\"asleep\""},
    {"ts_ms", "-1"},
    {"ts_ms", "1.5"},
    {"interval_ms", "{}"},
    {"turns", "-3"},
    {"prompt_tokens", "true"},
    {"cached_tokens", "\"9\""},
    {"turns_per_s", "-0.5"},
    {"turns_per_s", "1e300"},
    {"cache_share", "1.01"},
    {"cache_share", "-2"},

};

PT_TEST(each_bad_member_is_named) {
    const char *members[] = {
        "v",           "worker", "host",          "model",         "state",       "ts_ms",
        "interval_ms", "turns",  "prompt_tokens", "cached_tokens", "turns_per_s", "cache_share"};
    const char *good[] = {"1",   "\"w\"", "\"h\"", "\"m\"", "\"running\"", "5",
                          "500", "1",     "2",     "1",     "0.5",         "0.5"};
    for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
        char text[1024] = "{", err[256];
        for (size_t i = 0; i < 12; i++) {
            int use_bad = !strcmp(members[i], bad[b].member);
            size_t n = strlen(text);
            snprintf(text + n, sizeof text - n, "%s\"%s\":%s", i ? "," : "", members[i],
                     use_bad ? bad[b].value : good[i]);
        }
        strcat(text, "}");
        cm_status r;
        PT_ASSERT_MSG(parse(text, &r, err, sizeof err) == -1, "accepted: %s", text);
        PT_ASSERT_MSG(strstr(err, bad[b].member) ||
                          (!strcmp(bad[b].member, "v") && strstr(err, "version")),
                      "%s: message '%s' does not name %s", text, err, bad[b].member);
        PT_EQ_STR(r.worker, ""); /* nothing half-filled */
    }
}

PT_TEST(hostile_values) {
    cm_status r;
    char err[256];
    PT_EQ_INT(cm_status_parse(NULL, 0, &r, err, sizeof err), -1);
    PT_EQ_INT(cm_status_parse("", 0, &r, err, sizeof err), -1);
    PT_EQ_INT(parse("not json", &r, err, sizeof err), -1);
    PT_EQ_INT(parse("[1,2]", &r, err, sizeof err), -1);
    PT_EQ_INT(parse("{\"v\":1,\"v\":1}", &r, err, sizeof err), -1);                  /* duplicate */
    PT_EQ_INT(parse("{\"v\":1,\"worker\":\"a\\u0000b\"}", &r, err, sizeof err), -1); /* NUL */
    PT_EQ_INT(cm_status_parse("{\"v\":1}\0junk", 12, &r, err, sizeof err), -1);
    /* a model name over 256 bytes */
    char big[2048];
    int n = snprintf(big, sizeof big, "{\"v\":1,\"worker\":\"w\",\"host\":\"h\",\"model\":\"");
    memset(big + n, 'm', 300);
    snprintf(big + n + 300, sizeof big - (size_t)n - 300,
             "\",\"state\":\"running\",\"ts_ms\":1,\"interval_ms\":1,\"turns\":0,"
             "\"prompt_tokens\":0,\"cached_tokens\":0,\"turns_per_s\":0,\"cache_share\":0}");
    PT_EQ_INT(parse(big, &r, err, sizeof err), -1);
    PT_ASSERT(strstr(err, "model"));
    /* a value over CM_STATUS_MAX bytes is refused before parsing */
    char *huge = malloc(CM_STATUS_MAX + 2);
    memset(huge, ' ', CM_STATUS_MAX + 1);
    huge[0] = '{';
    huge[CM_STATUS_MAX] = '}';
    PT_EQ_INT(cm_status_parse(huge, CM_STATUS_MAX + 1, &r, err, sizeof err), -1);
    free(huge);
}
