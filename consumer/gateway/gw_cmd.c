/*
 * gw_cmd.c -- `parley gateway`: configuration (file < environment <
 * flags, through cm_config over the gateway's own property table), the
 * Kafka hub and the HTTP server, run until SIGTERM/SIGINT.
 *
 * On start it prints one line `gateway: listening on http://HOST:PORT`
 * (stdout, flushed), which tells scripts the port when gateway.listen
 * names port 0.  Exit status: 0 clean shutdown, 1 runtime failure (Kafka
 * unreachable within gateway.startup_timeout_ms, a topic missing, address
 * in use), 2 configuration error.
 */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gw_cmd.h"
#include "gw_fleet.h"
#include "gw_http.h"
#include "gw_store.h"
#include "cli_opt.h"
#include "cm_startup.h"
#include "pl_err.h"
#include "cm_config.h"
#include "cm_kafka.h"
#include "pl_time.h"

extern char **environ;

/* The gateway's clients: one idempotent producer (turns) and one reader
 * (tokens, responses, DLQ), built through the common Kafka layer. */
#define GW_KAFKA_ROLES (CM_KAFKA_PRODUCER | CM_KAFKA_READER)

static const cm_prop gw_props[] = {
    {"gateway.listen", CM_PROP_STR, "127.0.0.1:8080", 0, 0,
     "HTTP address as IPv4:port (port 0 = any free port, printed at start). Loopback by "
     "default; name 0.0.0.0:PORT to serve other hosts."},
    {"gateway.api_keys", CM_PROP_STR, "", 0, 0,
     "Comma-separated `KEY=TENANT` pairs. A request must send `Authorization: Bearer KEY`; "
     "its turns get the key's tenant as cache namespace (field and `parley-namespace` "
     "header), so clients never choose it. Empty = no authentication, namespace "
     "`gateway.namespace`."},
    {"gateway.namespace", CM_PROP_STR, "default", 0, 0,
     "Cache namespace of every turn when `gateway.api_keys` is empty."},
    {"gateway.models", CM_PROP_STR, "", 0, 0,
     "Comma-separated model names the fleet serves (workers' `model.name`): listed by "
     "`GET /v1/models`; a request naming another model gets 404 `model_not_found`. Empty "
     "= pass any name to the workers (which refuse unknown ones)."},
    {"gateway.topic.turns", CM_PROP_STR, "parley.turns", 0, 0, "Topic the ChatTurns go to."},
    {"gateway.topic.tokens", CM_PROP_STR, "parley.tokens", 0, 0,
     "TokenChunk topic streamed replies are read from."},
    {"gateway.topic.responses", CM_PROP_STR, "parley.responses", 0, 0,
     "TurnResult topic (read_committed)."},
    {"gateway.topic.dlq", CM_PROP_STR, "parley.dlq", 0, 0,
     "DeadLetter topic watched for turns the workers refused (unknown model, too long): such a "
     "request is answered with its error by whichever comes first, the DeadLetter or the error "
     "TurnResult the worker writes with it; empty = not watched (the TurnResult answers)."},
    {"gateway.fleet.group", CM_PROP_STR, "parley-workers", 0, 0,
     "The workers' consumer group (their `worker.group`) that `GET /v1/fleet` and the page at "
     "`/fleet` describe (docs/fleet.md); empty = no fleet view (404)."},
    {"gateway.topic.status", CM_PROP_STR, "parley.status", 0, 0,
     "Compacted topic of the workers' status records (their `worker.topic.status`), read from "
     "the beginning for the fleet view's per-worker figures; empty = none."},
    {"gateway.max_body_bytes", CM_PROP_INT, "1048576", 1024, 64LL << 20,
     "Largest request body; a larger one gets 400 `request_too_large`."},
    {"gateway.max_inflight", CM_PROP_INT, "256", 1, 100000,
     "Chat requests waiting for replies at most; more get 429 with `Retry-After: 1`."},
    {"gateway.max_connections", CM_PROP_INT, "512", 1, 100000,
     "Open HTTP connections at most (one thread each)."},
    {"gateway.timeout_ms", CM_PROP_INT, "60000", 100, 3600000,
     "Wait this long for a committed reply, then answer 504; also the turn's `deadline_ms`, "
     "so a worker that has not started it by then drops it."},
    {"gateway.startup_timeout_ms", CM_PROP_INT, "30000", 1000, 3600000,
     "Longest start-up: the waits for Kafka before the gateway listens (the turns topic's "
     "metadata, the end offsets of the topics it reads) must end within it, else it exits "
     "with status 1 and one line naming what it waited for."},
    {"gateway.max_tokens", CM_PROP_INT, "4096", 1, 32768,
     "Largest `max_tokens` / `max_completion_tokens` accepted (default 256 when absent)."},
    {"gateway.topic.stored", CM_PROP_STR, "parley.stored", 0, 0,
     "Compacted topic of stored Responses (`store: true`, `previous_response_id`; "
     "docs/openai.md), read from its start by every gateway. Missing at start (or empty) = "
     "responses are not stored and `previous_response_id` is refused; `parley topics` "
     "creates it."},
    {"gateway.responses_ttl_ms", CM_PROP_INT, "2592000000", 0, 315360000000LL,
     "A stored response expires this long after it was made (checked on read: GET then gets "
     "404, `previous_response_id` 400); 0 = never. Default 30 days, as OpenAI's."},
    {"gateway.responses_max_bytes", CM_PROP_INT, "268435456", 1024, 1LL << 40,
     "Stored responses held in each gateway's memory at most (record bytes); past it the "
     "oldest are dropped from memory (not from Kafka) and answer as expired."},
    {"gateway.playground", CM_PROP_BOOL, "true", 0, 0,
     "Serve the chat playground at `GET /` (docs/playground.md): a page on the same address "
     "as the API whose every call sends the API key typed into it; `false` = 404."},
};
#define GW_NPROPS (sizeof gw_props / sizeof gw_props[0])

/* The gateway's cross-key checks (cm_config_check_fn): every kafka.* key
 * reaches one of its clients, or is refused naming it. */
static int gw_config_check(const cm_config *c, char *err, size_t errlen) {
    int rc = cm_kafka_config_check(c, GW_KAFKA_ROLES, "gateway", err, errlen);
    return rc ? pl_err_recode(rc, PL_ERR_CM, CM_CONFIG_EINVAL) : 0;
}

static volatile sig_atomic_t gw_g_stop;

static void gw_on_signal(int sig) {
    (void)sig;
    gw_g_stop = 1;
}

/* Split a comma list into the options; -1 with a message. */
static int gw_parse_opts(const cm_config *cfg, gw_http_opts *o, char *err, size_t errlen) {
    memset(o, 0, sizeof *o);
    const char *l = cm_config_str(cfg, "gateway.listen");
    const char *colon = strrchr(l, ':');
    if (!colon || colon == l || (size_t)(colon - l) >= sizeof o->host) {
        return pl_errf(err, errlen, GW_EINVAL, "gateway.listen: '%s' is not IPv4:port", l);
    }
    memcpy(o->host, l, (size_t)(colon - l));
    long long port;
    if (cli_parse_i64(colon + 1, 0, 65535, &port) != 0) {
        return pl_errf(err, errlen, GW_EINVAL, "gateway.listen: bad port in '%s'", l);
    }
    o->port = (int)port;
    o->max_body = (size_t)cm_config_int(cfg, "gateway.max_body_bytes");
    o->max_inflight = (int)cm_config_int(cfg, "gateway.max_inflight");
    o->max_connections = (int)cm_config_int(cfg, "gateway.max_connections");
    o->timeout_ms = (int)cm_config_int(cfg, "gateway.timeout_ms");
    o->max_tokens = (uint32_t)cm_config_int(cfg, "gateway.max_tokens");
    o->playground = cm_config_bool(cfg, "gateway.playground");
    snprintf(o->ns, sizeof o->ns, "%s", cm_config_str(cfg, "gateway.namespace"));
    char buf[8192];
    snprintf(buf, sizeof buf, "%s", cm_config_str(cfg, "gateway.api_keys"));
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        if (!eq || eq == tok || !eq[1] || o->n_keys == GW_MAX_KEYS ||
            strlen(tok) >= sizeof o->keys[0].key || strlen(eq + 1) >= sizeof o->keys[0].tenant) {
            return pl_errf(err, errlen, GW_EINVAL,
                           "gateway.api_keys: '%.40s' is not KEY=TENANT (at most %d "
                           "keys, 127 bytes each)",
                           tok, GW_MAX_KEYS);
        }
        *eq = 0;
        snprintf(o->keys[o->n_keys].key, sizeof o->keys[0].key, "%s", tok);
        snprintf(o->keys[o->n_keys].tenant, sizeof o->keys[0].tenant, "%s", eq + 1);
        o->n_keys++;
    }
    for (size_t i = 0; i <= o->n_keys; i++) {
        const char *ns = i < o->n_keys ? o->keys[i].tenant : o->ns;
        if (!*ns || strspn(ns, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                               "0123456789._-") != strlen(ns)) {
            return pl_errf(err, errlen, GW_EINVAL,
                           "tenant/namespace '%.40s' must be 1..127 bytes of "
                           "[A-Za-z0-9._-]",
                           ns);
        }
    }
    snprintf(buf, sizeof buf, "%s", cm_config_str(cfg, "gateway.models"));
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        if (o->n_models == GW_MAX_MODELS || strlen(tok) > 256) {
            return pl_errf(err, errlen, GW_EINVAL,
                           "gateway.models: at most %d names of 1..256 bytes", GW_MAX_MODELS);
        }
        snprintf(o->models[o->n_models++], sizeof o->models[0], "%s", tok);
    }
    char host[64] = "";
    gethostname(host, sizeof host - 1);
    host[strcspn(host, ".")] = 0;
    snprintf(o->id_prefix, sizeof o->id_prefix, "gw-%.24s-%d-%llx", host, (int)getpid(),
             (unsigned long long)pl_unix_ms());
    return 0;
}

int gw_cmd_gateway(int argc, char **argv) {
    char err[PL_ERR_LEN * 4]; /* config messages quote values and topic names whole */
    cm_config *cfg = NULL;
    gw_http_opts *o = calloc(1, sizeof *o);
    gw_hub *hub = NULL;
    gw_store *store = NULL;
    char note[PL_ERR_LEN * 4] = ""; /* why responses are not stored (or the store's error) */
    gw_http *http = NULL;
    int rc = 2, port = 0;
    cm_kafka *kafka = NULL;
    if (!o || cm_config_new(gw_props, GW_NPROPS, "gateway", gw_config_check, &cfg) != 0) {
        fprintf(stderr, "gateway: out of memory\n");
        free(o);
        return 1;
    }
    int pr = cm_config_cli(
        cfg,
        "gateway --kafka.bootstrap.servers HOST:PORT [--config FILE]\n"
        "         [--set key=value]... [--KEY value]...\n"
        "gateway --print-config-doc",
        "\nOpenAI-compatible HTTP front door: POST /v1/chat/completions (stream too),\n"
        "POST /v1/responses (stored in gateway.topic.stored: previous_response_id),\n"
        "GET /v1/models, /healthz, /metrics, the playground page at /, the fleet\n"
        "view at /fleet and /v1/fleet (docs/fleet.md).  Each request becomes a\n"
        "ChatTurn on Kafka; the reply is the committed TurnResult.\n"
        "Keys: see consumer/CONFIG.md (gateway.*).  Exit status: 0 clean shutdown,\n"
        "1 runtime failure, 2 config.\n\n",
        argc, argv, environ);
    if (pr != CLI_OK) {
        if (pr == CM_CONFIG_CLI_DOC) rc = cm_config_doc_table(stdout, gw_props, GW_NPROPS) ? 1 : 0;
        else rc = pr == CLI_HELP ? 0 : 2;
        goto done;
    }
    if (gw_parse_opts(cfg, o, err, sizeof err)) goto bad;
    gw_hub_conf hc;
    memset(&hc, 0, sizeof hc);
    if (!*cm_kafka_brokers_of(cfg)) {
        pl_errf(err, sizeof err, GW_EINVAL, "kafka.bootstrap.servers is required");
        goto bad;
    }
    if (cm_kafka_new(cfg, GW_KAFKA_ROLES, "gateway", &kafka, err, sizeof err) != 0) goto bad;
    hc.kafka = kafka;
    if (cm_topic_set(hc.topics.turns, cm_config_str(cfg, "gateway.topic.turns"), err, sizeof err) ||
        cm_topic_set(hc.topics.tokens, cm_config_str(cfg, "gateway.topic.tokens"), err,
                     sizeof err) ||
        cm_topic_set(hc.topics.responses, cm_config_str(cfg, "gateway.topic.responses"), err,
                     sizeof err))
        goto bad;
    hc.dlq = cm_config_str(cfg, "gateway.topic.dlq");
    rc = 1;
    cm_startup_begin("gateway", "gateway.startup_timeout_ms",
                     cm_config_int(cfg, "gateway.startup_timeout_ms"));
    hc.timeout_ms = cm_startup_left_ms();
    gw_store_conf sc = {kafka, cm_config_str(cfg, "gateway.topic.stored"),
                        cm_config_int(cfg, "gateway.responses_ttl_ms"),
                        (size_t)cm_config_int(cfg, "gateway.responses_max_bytes"), hc.timeout_ms};
    gw_fleet_conf fc = {kafka, cm_config_str(cfg, "gateway.fleet.group"), hc.topics.turns,
                        cm_config_str(cfg, "gateway.topic.status"), 1000};
    if (gw_hub_new(&hc, &hub, err, sizeof err) != 0 ||
        gw_store_new(&sc, &store, err, sizeof err) != 0)
        goto failed;
    snprintf(note, sizeof note, "%s", err); /* when off: why */
    o->store = store;
    if ((*fc.group && gw_fleet_new(&fc, &o->fleet, err, sizeof err) != 0) ||
        !(http = gw_http_start(o, hub, &port, err, sizeof err))) {
    failed:
        fprintf(stderr, "gateway: %s\n", err);
        goto done;
    }
    cm_startup_end();
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = gw_on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    printf("gateway: listening on http://%s:%d (turns %s, replies %s, %zu API keys)\n", o->host,
           port, hc.topics.turns, hc.topics.responses, o->n_keys);
    fflush(stdout);
    if (!store)
        fprintf(stderr, "gateway: warning: %s\n", note); /* after the line scripts wait for */
    while (!gw_g_stop) {
        struct timespec nap = {0, 100 * 1000 * 1000};
        nanosleep(&nap, NULL);
    }
    printf("gateway: stopping (%d requests in flight)\n", gw_http_inflight(http));
    fflush(stdout);
    rc = 0;
    goto done;
bad:
    fprintf(stderr, "gateway: %s\n", err);
done:
    gw_http_stop(http);
    gw_fleet_free(o->fleet);
    gw_store_free(store);
    gw_hub_free(hub);
    cm_kafka_free(kafka);
    cm_config_free(cfg);
    free(o);
    return rc;
}
