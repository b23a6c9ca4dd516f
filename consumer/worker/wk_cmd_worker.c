/*
 * wk_cmd_worker.c -- `parley worker`: read the configuration (file <
 * environment < flags), start the worker and run it until SIGTERM/SIGINT.
 *
 * Exit status: 0 clean shutdown; 1 runtime failure (model cannot be
 * loaded, a start-up wait for Kafka past worker.startup_timeout_ms -- one
 * line names what it waited for --, fatal Kafka error such as a fenced
 * transactional producer); 2 usage or configuration error (the message
 * names the key); 3 the Kafka cluster refuses the worker (SASL
 * authentication, TLS certificate verification or a missing ACL; the one
 * "worker: Kafka refused the worker: ..." line says which).  A first SIGTERM/SIGINT stops fetching and lets in-flight
 * turns finish within worker.grace_ms; a second one cancels them at once.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cli_opt.h"
#include "cm_startup.h"
#include "pl_err.h"
#include "wk_config.h"
#include "wk_worker.h"

extern char **environ;

static wk_worker *volatile wk_g_worker;    /* for the signal handler */
static volatile sig_atomic_t wk_g_signals; /* signals received */

static void wk_on_signal(int sig) {
    (void)sig;
    wk_g_signals++;
    if (wk_g_worker) wk_worker_stop(wk_g_worker, wk_g_signals > 1);
}

int wk_cmd_worker(int argc, char **argv) {
    cm_config *cfg = NULL;
    wk_worker *w = NULL;
    char err[PL_ERR_LEN * 4]; /* config values, paths and their causes */
    int rc = 2;
    if (wk_config_new(&cfg) != 0) {
        fprintf(stderr, "worker: out of memory\n");
        return 1;
    }
    int pr = cm_config_cli(
        cfg,
        "worker [--config FILE] [--set key=value]... [--KEY value]...\n"
        "worker --print-config-doc",
        "\nServe chat turns from Kafka.  Configuration precedence: FILE < environment\n"
        "(PARLEY_<KEY>) < flags.  `--KEY value` works for every key, e.g.\n"
        "  parley worker --model.path m.gguf --kafka.bootstrap.servers host:9092\n"
        "--print-config-doc writes the configuration reference (Markdown).\n"
        "Exit status: 0 clean shutdown, 1 runtime failure, 2 configuration error,\n"
        "3 Kafka refused the worker (authentication, TLS verification or ACLs).\n\n",
        argc, argv, environ);
    if (pr != CLI_OK) {
        cm_config_free(cfg);
        if (pr == CM_CONFIG_CLI_DOC) return wk_config_doc(stdout) ? 1 : 0;
        return pr == CLI_HELP ? 0 : 2;
    }
    /* Before the cache's I/O threads start: a peer that closes a socket
     * (Redis over TLS writes with SSL_write) must be an error return, never
     * a process kill. */
    signal(SIGPIPE, SIG_IGN);
    /* every wait for Kafka before the worker serves is bounded */
    cm_startup_begin("worker", "worker.startup_timeout_ms",
                     cm_config_int(cfg, "worker.startup_timeout_ms"));
    int cr = wk_worker_create(cfg, &w, err, sizeof err);
    cm_startup_end();
    if (cr) {
        fprintf(stderr, "worker: %s\n", err);
        rc = cr == WK_EINVAL ? 2 : cr == WK_EREFUSED ? 3 : 1;
        goto done;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = wk_on_signal;
    sigemptyset(&sa.sa_mask);
    wk_g_worker = w;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    rc = 0;
    int rr = wk_worker_run(w, err, sizeof err);
    if (rr != 0) {
        fprintf(stderr, "worker: %s\n", err);
        rc = rr == WK_EREFUSED ? 3 : 1;
    }
    wk_g_worker = NULL;
done:
    wk_worker_free(w);
    cm_config_free(cfg);
    return rc;
}
