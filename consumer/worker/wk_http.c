/*
 * wk_http.c -- the worker's observability endpoint on plain sockets: one
 * thread, one connection at a time (scrapes are small and rare), serving
 *   GET /metrics  Prometheus text format 0.0.4: worker counters, latency
 *                 histograms, scheduler and KV-cache statistics, memory
 *                 (resident set, model weights, KV pool) for dashboards
 *                 and alerts (deploy/grafana, deploy/prometheus);
 *   GET /healthz  200 while the poll loop runs; 503 once it has not run for
 *                 worker.stall_ms (a Kafka call that never returns);
 *   GET /readyz   200 when partitions are assigned, else 503.
 * Requests are read with a deadline and a size cap; anything else is 404.
 * The thread polls the listening socket with a short timeout so
 * wk_http_stop returns promptly.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "pl_err.h"
#include "wk_internal.h"

const double wk_lat_bounds_ms[WK_LAT_N - 1] = {5,   10,   25,   50,   100,  250,
                                               500, 1000, 2500, 5000, 10000};

/* The endpoint. */
typedef struct wk_http {
    wk_worker *w;     /* worker whose numbers are served */
    int fd;           /* listening socket */
    int stop;         /* set by wk_http_stop (atomic) */
    pthread_t thread; /* serving thread */
} wk_http;

#define WK_LD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)

/* One series of a histogram of n buckets over bounds_ms (n - 1 bounds; the
 * last is +Inf); labels ("" or `k="v",`) go before le. */
static void wk_hist_series(FILE *f, const char *name, const char *labels, const uint64_t *h,
                           const double *bounds_ms, int n, uint64_t sum_us) {
    uint64_t cum = 0;
    for (int i = 0; i < n; i++) {
        cum += __atomic_load_n(&h[i], __ATOMIC_RELAXED);
        if (i < n - 1)
            fprintf(f, "%s_bucket{%sle=\"%g\"} %llu\n", name, labels, bounds_ms[i] / 1000.0,
                    (unsigned long long)cum);
        else fprintf(f, "%s_bucket{%sle=\"+Inf\"} %llu\n", name, labels, (unsigned long long)cum);
    }
    size_t ln = strlen(labels);
    if (ln) /* the sum and count take the labels without the trailing comma */
        fprintf(f, "%s_sum{%.*s} %.6f\n%s_count{%.*s} %llu\n", name, (int)ln - 1, labels,
                (double)sum_us / 1e6, name, (int)ln - 1, labels, (unsigned long long)cum);
    else
        fprintf(f, "%s_sum %.6f\n%s_count %llu\n", name, (double)sum_us / 1e6, name,
                (unsigned long long)cum);
}

/* A histogram with one series. */
static void wk_hist(FILE *f, const char *name, const char *help, const uint64_t *h,
                    const double *bounds_ms, int n, uint64_t sum_us) {
    fprintf(f, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    wk_hist_series(f, name, "", h, bounds_ms, n, sum_us);
}

static void wk_metric(FILE *f, const char *name, const char *type, const char *help, double v) {
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n%s %.17g\n", name, help, name, type, name, v);
}

/* The process's resident set in bytes (/proc/self/statm, the figure the
 * kernel charges against a cgroup's memory limit apart from page cache),
 * or -1 when it cannot be read. */
static double wk_rss_bytes(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f) return -1;
    unsigned long long size = 0, res = 0;
    int n = fscanf(f, "%llu %llu", &size, &res);
    fclose(f);
    long page = sysconf(_SC_PAGESIZE);
    return n == 2 && page > 0 ? (double)res * (double)page : -1;
}

/* The metrics that are one counter or gauge of wk_counters, read
 * atomically and multiplied by scale. */
typedef struct wk_ctr_metric {
    const char *name; /* Prometheus name */
    const char *type; /* "counter" or "gauge" */
    const char *help; /* HELP text */
    size_t off;       /* offsetof(wk_counters, field) */
    bool is_signed;   /* the field is int64_t (else uint64_t) */
    double scale;     /* exported value = field * scale */
} wk_ctr_metric;

#define WK_CTR(name, type, help, field) \
    { name, type, help, offsetof(wk_counters, field), false, 1.0 }
#define WK_GAUGE_I64(name, help, field, scale) \
    { name, "gauge", help, offsetof(wk_counters, field), true, scale }

static const wk_ctr_metric wk_ctr_metrics[] = {
    WK_CTR("parley_records_consumed_total", "counter", "Input records consumed.", consumed),
    WK_CTR("parley_turns_total", "counter", "TurnResults committed.", turns_done),
    WK_CTR("parley_dlq_total", "counter", "DeadLetters committed.", dlq),
    WK_CTR("parley_token_chunks_total", "counter", "TokenChunks produced.", chunks),
    WK_CTR("parley_completion_tokens_total", "counter", "Tokens generated.", tokens),
    WK_CTR("parley_prompt_tokens_total", "counter", "Prompt tokens of finished turns.",
           prompt_tokens),
    WK_CTR("parley_cached_tokens_total", "counter", "Prompt tokens served from the KV cache.",
           cached_tokens),
    WK_CTR("parley_turns_spliced_total", "counter",
           "Turns whose prompt spliced in the ids of the conversation's last turn "
           "(worker.history_mib).",
           turns_spliced),
    WK_CTR("parley_retokenize_mismatch_total", "counter",
           "Spliced turns whose re-tokenised prompt would differ from the ids the KV was "
           "computed with (cache misses the splice avoided).",
           retok_mismatch),
    WK_CTR("parley_txn_commits_total", "counter", "Kafka transactions committed.", txn_commits),
    WK_CTR("parley_txn_aborts_total", "counter", "Kafka transactions aborted.", txn_aborts),
    WK_CTR("parley_turns_dropped_total", "counter",
           "Turns dropped because their partition was revoked.", dropped),
    WK_CTR("parley_turns_cancelled_total", "counter",
           "TurnResults written with finish_reason cancelled (a CancelTurn stopped the turn).",
           cancelled),
    WK_CTR("parley_cancels_total", "counter", "CancelTurn records consumed.", cancels),
    WK_CTR("parley_cancels_ignored_total", "counter",
           "CancelTurns that found no queued or running turn (already answered, or "
           "remembered for a turn still to come).",
           cancels_ignored),
    WK_CTR("parley_backpressure_pauses_total", "counter", "Partition pauses.", pauses),
    WK_CTR("parley_backpressure_kv_pauses_total", "counter",
           "Partition pauses because KV memory passed worker.pause_kv_pct.", pauses_kv),
    WK_GAUGE_I64("parley_kv_held_ratio",
                 "KV blocks held by running sequences / KV pool blocks (larger kind).", kv_permille,
                 1e-3),
    WK_CTR("parley_producer_rebuilds_total", "counter",
           "Transactional producers rebuilt after a fatal, non-fencing error.", producer_rebuilds),
    WK_CTR("parley_chunk_producer_rebuilds_total", "counter",
           "Idempotent chunk producers rebuilt after a fatal error.", chunk_rebuilds),
    WK_CTR("parley_kv_handoff_blocks_total", "counter",
           "KV blocks written to Redis for revoked conversations.", handoff_blocks),
    WK_GAUGE_I64("parley_inflight_turns", "Consumed turns not yet committed.", inflight, 1.0),
    WK_GAUGE_I64("parley_assigned_partitions", "Input partitions assigned.", assigned, 1.0),
};

/* A service class's label value. */
static const char *wk_class_name(int k) { return k == ENG_SCHED_BULK ? "bulk" : "interactive"; }

static void wk_metrics_counters(FILE *f, wk_counters *c) {
    for (size_t i = 0; i < sizeof wk_ctr_metrics / sizeof wk_ctr_metrics[0]; i++) {
        const wk_ctr_metric *m = &wk_ctr_metrics[i];
        char *field = (char *)c + m->off;
        double v =
            m->is_signed ? (double)WK_LD(*(int64_t *)field) : (double)WK_LD(*(uint64_t *)field);
        wk_metric(f, m->name, m->type, m->help, v * m->scale);
    }
    int64_t why = WK_LD(c->pause_why);
    fprintf(f,
            "# HELP parley_backpressure_paused 1 while partitions are paused for this "
            "reason.\n# TYPE parley_backpressure_paused gauge\n"
            "parley_backpressure_paused{reason=\"inflight\"} %d\n"
            "parley_backpressure_paused{reason=\"kv_memory\"} %d\n",
            (why & WK_PAUSE_INFLIGHT) != 0, (why & WK_PAUSE_KV) != 0);
}

/* Memory against its budget: what an operator sizes MemoryMax / the
 * container limit from (deploy/README.md, "Memory"). */
static void wk_metrics_memory(FILE *f, wk_worker *w) {
    /* the cache's own figure; without it, the scheduler's budget */
    double pool = (double)cm_config_int(w->cfg, "scheduler.kv_budget_mib") * 1048576.0;
    if (w->eng.cache) {
        kv_stats ks;
        kv_cache_stats(w->eng.cache, &ks);
        pool = (double)ks.budget_bytes;
    }
    wk_metric(f, "parley_kv_pool_bytes", "gauge",
              "Configured KV pool (cache.budget_mib, or scheduler.kv_budget_mib without the "
              "cache) in bytes.",
              pool);
    wk_metric(f, "parley_model_resident_bytes", "gauge",
              "Bytes the loaded model's weights hold after repacking.",
              (double)eng_model_resident_bytes(w->eng.model));
    double rss = wk_rss_bytes();
    if (rss >= 0)
        wk_metric(f, "process_resident_memory_bytes", "gauge", "Resident memory size in bytes.",
                  rss);
}

/* Per-partition lag and the latency histograms. */
static void wk_metrics_lag_latency(FILE *f, wk_worker *w) {
    wk_counters *c = &w->met.ctr;
    fprintf(f, "# HELP parley_consumer_lag Records of an assigned partition not yet committed "
               "(high watermark - commit position).\n# TYPE parley_consumer_lag gauge\n");
    pthread_mutex_lock(&w->met.lag_mu);
    for (int32_t p = 0; p < w->met.n_lag; p++)
        if (w->met.lag[p] >= 0)
            fprintf(f, "parley_consumer_lag{partition=\"%d\"} %lld\n", (int)p,
                    (long long)w->met.lag[p]);
    pthread_mutex_unlock(&w->met.lag_mu);
    wk_hist(f, "parley_ttft_seconds", "Time to first token.", c->ttft_hist, wk_lat_bounds_ms,
            WK_LAT_N, WK_LD(c->ttft_sum_us));
    static const char *turn_labels[WK_TURN_N] = {"turn=\"1\",",    "turn=\"2\",",
                                                 "turn=\"3-4\",",  "turn=\"5-8\",",
                                                 "turn=\"9-16\",", "turn=\"17+\","};
    fprintf(f, "# HELP parley_ttft_by_turn_seconds Time to first token by the turn's index in "
               "its conversation (user messages).\n# TYPE parley_ttft_by_turn_seconds histogram\n");
    for (int b = 0; b < WK_TURN_N; b++)
        wk_hist_series(f, "parley_ttft_by_turn_seconds", turn_labels[b], c->ttft_turn_hist[b],
                       wk_lat_bounds_ms, WK_LAT_N, WK_LD(c->ttft_turn_sum_us[b]));
    static const char *class_labels[ENG_SCHED_CLASSES] = {"class=\"interactive\",",
                                                          "class=\"bulk\","};
    fprintf(f, "# HELP parley_ttft_by_class_seconds Time to first token by the turn's service "
               "class.\n# TYPE parley_ttft_by_class_seconds histogram\n");
    for (int k = 0; k < ENG_SCHED_CLASSES; k++)
        wk_hist_series(f, "parley_ttft_by_class_seconds", class_labels[k], c->ttft_class_hist[k],
                       wk_lat_bounds_ms, WK_LAT_N, WK_LD(c->ttft_class_sum_us[k]));
    fprintf(f, "# HELP parley_class_turns_total Turns the engine ended, by service class.\n"
               "# TYPE parley_class_turns_total counter\n");
    for (int k = 0; k < ENG_SCHED_CLASSES; k++)
        fprintf(f, "parley_class_turns_total{class=\"%s\"} %llu\n", wk_class_name(k),
                (unsigned long long)WK_LD(c->class_turns[k]));
    wk_hist(f, "parley_turn_seconds", "Turn latency from submit to end.", c->total_hist,
            wk_lat_bounds_ms, WK_LAT_N, WK_LD(c->total_sum_us));
    wk_hist(f, "parley_turn_overhead_seconds",
            "Time of a committed turn outside the engine: from consumption (or its "
            "predecessor's end) to its transaction's commit, minus the time it ran in a batch.",
            c->ovh_hist, wk_ovh_bounds_ms, WK_OVH_N, WK_LD(c->ovh_sum_us));
}

static void wk_metrics_sched(FILE *f, wk_worker *w) {
    eng_sched_stats st;
    eng_sched_stats_get(w->eng.sched, &st);
    wk_metric(f, "parley_sched_running", "gauge", "Sequences running.", st.running);
    wk_metric(f, "parley_sched_waiting", "gauge", "Requests waiting.", st.waiting);
    wk_metric(f, "parley_sched_steps_total", "counter", "Forward steps.", (double)st.steps);
    wk_metric(f, "parley_sched_preemptions_total", "counter",
              "Preemptions for memory (KV parked in the cache or dropped, recomputed on resume).",
              (double)st.preemptions);
    wk_metric(f, "parley_sched_class_preemptions_total", "counter",
              "Sequences taken out of the batch with their KV kept for the other service class "
              "(bulk for interactive; interactive for bulk's minimum share).",
              (double)st.class_preemptions);
    wk_metric(f, "parley_sched_resumes_total", "counter",
              "Sequences put back into the batch after a class preemption.", (double)st.resumes);
    wk_metric(f, "parley_sched_parked", "gauge", "Sequences out of the batch with their KV kept.",
              st.parked);
    wk_metric(f, "parley_sched_bulk_steps_total", "counter",
              "Forward steps whose batch held a bulk sequence.", (double)st.bulk_steps);
    wk_metric(f, "parley_sched_bulk_step_ratio", "gauge",
              "Bulk share of steps since start: steps with a bulk sequence / steps (0 before a "
              "step).",
              st.steps ? (double)st.bulk_steps / (double)st.steps : 0.0);
    fprintf(f, "# HELP parley_sched_waiting_by_class Requests waiting, by service class.\n"
               "# TYPE parley_sched_waiting_by_class gauge\n");
    for (int k = 0; k < ENG_SCHED_CLASSES; k++)
        fprintf(f, "parley_sched_waiting_by_class{class=\"%s\"} %d\n", wk_class_name(k),
                st.waiting_class[k]);
    fprintf(f, "# HELP parley_sched_running_by_class Sequences running, by service class.\n"
               "# TYPE parley_sched_running_by_class gauge\n");
    for (int k = 0; k < ENG_SCHED_CLASSES; k++)
        fprintf(f, "parley_sched_running_by_class{class=\"%s\"} %d\n", wk_class_name(k),
                st.running_class[k]);
    fprintf(f, "# HELP parley_sched_submitted_by_class_total Requests submitted to the engine, "
               "by service class.\n# TYPE parley_sched_submitted_by_class_total counter\n");
    for (int k = 0; k < ENG_SCHED_CLASSES; k++)
        fprintf(f, "parley_sched_submitted_by_class_total{class=\"%s\"} %llu\n", wk_class_name(k),
                (unsigned long long)st.submitted_class[k]);
    wk_metric(f, "parley_sched_spec_verify_steps_total", "counter",
              "Speculative decoding: decode steps of a sequence that verified a draft.",
              (double)st.spec_steps);
    wk_metric(f, "parley_sched_spec_drafted_tokens_total", "counter",
              "Speculative decoding: drafted tokens fed for verification.",
              (double)st.spec_drafted);
    wk_metric(f, "parley_sched_spec_accepted_tokens_total", "counter",
              "Speculative decoding: drafted tokens accepted (emitted as generated tokens).",
              (double)st.spec_accepted);
    wk_metric(f, "parley_sched_spec_acceptance_ratio", "gauge",
              "Speculative decoding: accepted / drafted tokens since start (0 before any draft).",
              st.spec_drafted ? (double)st.spec_accepted / (double)st.spec_drafted : 0.0);
    wk_metric(f, "parley_sched_prefill_tokens_total", "counter",
              "Prompt tokens computed by prefill (recomputation after preemption included); a "
              "turn with n > 1 choices computes its prompt once.",
              (double)st.prefill_tokens);
    wk_metric(f, "parley_sched_forks_total", "counter",
              "Choices forked from a prefilled prompt (n - 1 per turn with n choices).",
              (double)st.forks);
    wk_metric(f, "parley_sched_fork_tokens_total", "counter",
              "Prompt tokens forked choices got without computing them.", (double)st.fork_tokens);
    wk_metric(f, "parley_sched_constrained_total", "counter",
              "Constrained requests (response_format, forced tool calls) submitted.",
              (double)st.constrained);
    wk_metric(f, "parley_sched_masks_total", "counter", "Constraint token masks computed.",
              (double)st.masks);
    wk_metric(f, "parley_sched_mask_wait_seconds_total", "counter",
              "Step time the scheduler spent blocked waiting for constraint masks.",
              st.mask_wait_ms / 1000.0);
    wk_metric(f, "parley_sched_mask_cpu_seconds_total", "counter",
              "CPU time the mask threads spent computing constraint masks.",
              st.mask_cpu_ms / 1000.0);
    wk_metric(f, "parley_sched_mask_over_budget_total", "counter",
              "Masks abandoned for scheduler.mask_budget_ms (their turns ended with an error).",
              (double)st.mask_over_budget);
    fprintf(f, "# HELP parley_sched_batch_steps_total Steps by batch size bucket [2^i, 2^(i+1)).\n"
               "# TYPE parley_sched_batch_steps_total counter\n");
    for (int i = 0; i < ENG_SCHED_HIST; i++)
        if (st.batch_hist[i])
            fprintf(f, "parley_sched_batch_steps_total{min=\"%d\"} %llu\n", 1 << i,
                    (unsigned long long)st.batch_hist[i]);
}

/* Where a prompt's prefix came from: the cache's tiers (KV not computed)
 * and the conversation's history (ids not re-tokenised). */
static void wk_metrics_prefix(FILE *f, wk_worker *w) {
    kv_stats ks;
    memset(&ks, 0, sizeof ks);
    if (w->eng.cache) kv_cache_stats(w->eng.cache, &ks);
    fprintf(f,
            "# HELP parley_cache_prefix_tokens_total Prompt prefix tokens by source: KV from the "
            "cache's host RAM or Redis tier, ids spliced from the conversation's history.\n"
            "# TYPE parley_cache_prefix_tokens_total counter\n"
            "parley_cache_prefix_tokens_total{source=\"ram\"} %llu\n"
            "parley_cache_prefix_tokens_total{source=\"redis\"} %llu\n"
            "parley_cache_prefix_tokens_total{source=\"splice\"} %llu\n",
            (unsigned long long)ks.host.hit_tokens, (unsigned long long)ks.redis.hit_tokens,
            (unsigned long long)WK_LD(w->met.ctr.prefix_splice));
}

static void wk_metrics_cache(FILE *f, kv_cache *cache) {
    kv_stats ks;
    kv_cache_stats(cache, &ks);
    fprintf(f,
            "# HELP parley_cache_lookups_total KV cache lookups per tier.\n"
            "# TYPE parley_cache_lookups_total counter\n"
            "parley_cache_lookups_total{tier=\"host\"} %llu\n"
            "parley_cache_lookups_total{tier=\"redis\"} %llu\n"
            "# HELP parley_cache_hits_total KV cache hits per tier.\n"
            "# TYPE parley_cache_hits_total counter\n"
            "parley_cache_hits_total{tier=\"host\"} %llu\n"
            "parley_cache_hits_total{tier=\"redis\"} %llu\n"
            "# HELP parley_cache_hit_tokens_total Tokens served per tier.\n"
            "# TYPE parley_cache_hit_tokens_total counter\n"
            "parley_cache_hit_tokens_total{tier=\"host\"} %llu\n"
            "parley_cache_hit_tokens_total{tier=\"redis\"} %llu\n",
            (unsigned long long)ks.host.lookups, (unsigned long long)ks.redis.lookups,
            (unsigned long long)ks.host.hits, (unsigned long long)ks.redis.hits,
            (unsigned long long)ks.host.hit_tokens, (unsigned long long)ks.redis.hit_tokens);
    wk_metric(f, "parley_cache_partial_tokens_total", "counter",
              "Prompt tokens served from cached partial last blocks (in the host figures).",
              (double)ks.partial_tokens);
    wk_metric(f, "parley_cache_blocks_used", "gauge", "Global KV blocks in use.",
              (double)ks.blocks_used[0]);
    wk_metric(f, "parley_cache_redis_up", "gauge", "1 if the last Redis command worked.",
              ks.redis_up);
    wk_metric(f, "parley_cache_redis_refused_total", "counter",
              "Redis refusals: TLS handshake, AUTH, NOAUTH, NOPERM (KV recomputed).",
              (double)ks.redis_refused);
    wk_metric(f, "parley_cache_redis_writes_total", "counter", "KV blocks written to Redis.",
              (double)ks.redis_writes);
}

/* The model backend's own KV tier (device memory: the CUDA backend), when it has one. */
static void wk_metrics_device(FILE *f, wk_worker *w) {
    eng_backend_kv_tier d;
    if (!w->eng.model || eng_model_kv_tier(w->eng.model, &d) != 0) return;
    fprintf(f,
            "# HELP parley_cache_device_lookups_total KV blocks attention read, device tier.\n"
            "# TYPE parley_cache_device_lookups_total counter\n"
            "parley_cache_device_lookups_total %llu\n"
            "# HELP parley_cache_device_hits_total Of which already in device memory.\n"
            "# TYPE parley_cache_device_hits_total counter\n"
            "parley_cache_device_hits_total %llu\n",
            (unsigned long long)d.lookups, (unsigned long long)d.hits);
    wk_metric(f, "parley_cache_device_uploads_total", "counter",
              "KV blocks moved up from host RAM to device memory.", (double)d.uploads);
    wk_metric(f, "parley_cache_device_upload_bytes_total", "counter", "Bytes of those uploads.",
              (double)d.upload_bytes);
    wk_metric(f, "parley_cache_device_writeback_bytes_total", "counter",
              "KV bytes written through from device to host RAM.", (double)d.writeback_bytes);
    wk_metric(f, "parley_cache_device_evictions_total", "counter",
              "KV blocks dropped from device memory (LRU; host RAM keeps them).",
              (double)d.evictions);
    wk_metric(f, "parley_cache_device_blocks", "gauge", "KV blocks held in device memory.",
              (double)d.resident);
    wk_metric(f, "parley_cache_device_capacity_blocks", "gauge",
              "KV blocks device memory can hold.", (double)d.capacity);
}

/* Write the metrics page into a malloc'd buffer. */
static char *wk_metrics_text(wk_worker *w, size_t *len) {
    char *buf = NULL;
    FILE *f = open_memstream(&buf, len);
    if (!f) return NULL;
    wk_metrics_counters(f, &w->met.ctr);
    wk_metrics_memory(f, w);
    wk_metrics_lag_latency(f, w);
    wk_metrics_sched(f, w);
    wk_metrics_prefix(f, w);
    if (w->eng.cache) wk_metrics_cache(f, w->eng.cache);
    wk_metrics_device(f, w);
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

static void wk_send(int fd, const char *status, const char *ctype, const char *body, size_t len) {
    char head[256];
    int n = snprintf(head, sizeof head,
                     "HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                     "Connection: close\r\n\r\n",
                     status, ctype, len);
    if (send(fd, head, (size_t)n, MSG_NOSIGNAL) < 0) return;
    for (size_t off = 0; off < len;) {
        ssize_t k = send(fd, body + off, len - off, MSG_NOSIGNAL);
        if (k <= 0) return;
        off += (size_t)k;
    }
}

/* GET /healthz: 200 while the poll loop runs; 503 once it has been silent
 * longer than worker.stall_ms (a Kafka call that never returns), logged
 * once per stall. */
static void wk_healthz(wk_worker *w, int fd) {
    int64_t beat = __atomic_load_n(&w->met.loop_beat_us, __ATOMIC_ACQUIRE);
    int64_t silent = beat ? eng_sched_now_us() - beat : 0;
    if (!w->met.stall_us || silent <= w->met.stall_us) {
        w->met.stall_logged = 0;
        wk_send(fd, "200 OK", "text/plain; charset=utf-8", "ok\n", 3);
        return;
    }
    char body[128];
    int n = snprintf(body, sizeof body, "stalled: the poll loop has not run for %lld ms\n",
                     (long long)(silent / 1000));
    if (!w->met.stall_logged) {
        w->met.stall_logged = 1;
        wk_log("error", "loop_stalled", "silent_ms=%lld stall_ms=%lld", (long long)(silent / 1000),
               (long long)(w->met.stall_us / 1000));
    }
    wk_send(fd, "503 Service Unavailable", "text/plain; charset=utf-8", body, (size_t)n);
}

static void wk_serve(wk_http *h, int fd) {
    char req[2048];
    size_t got = 0;
    struct pollfd p = {fd, POLLIN, 0};
    while (got < sizeof req - 1 && !memmem(req, got, "\r\n\r\n", 4)) {
        if (poll(&p, 1, 1000) <= 0) break;
        ssize_t k = recv(fd, req + got, sizeof req - 1 - got, 0);
        if (k <= 0) break;
        got += (size_t)k;
    }
    req[got] = 0;
    const char *text = "text/plain; charset=utf-8";
    if (!strncmp(req, "GET /metrics ", 13) || !strncmp(req, "GET /metrics?", 13)) {
        size_t len = 0;
        char *body = wk_metrics_text(h->w, &len);
        if (body) wk_send(fd, "200 OK", "text/plain; version=0.0.4; charset=utf-8", body, len);
        else wk_send(fd, "500 Internal Server Error", text, "out of memory\n", 14);
        free(body);
    } else if (!strncmp(req, "GET /healthz ", 13)) {
        wk_healthz(h->w, fd);
    } else if (!strncmp(req, "GET /readyz ", 12)) {
        if (WK_LD(h->w->met.ctr.assigned) > 0) wk_send(fd, "200 OK", text, "ready\n", 6);
        else wk_send(fd, "503 Service Unavailable", text, "no partitions assigned\n", 23);
    } else {
        wk_send(fd, "404 Not Found", text, "not found\n", 10);
    }
}

static void *wk_http_main(void *arg) {
    wk_http *h = arg;
    struct pollfd p = {h->fd, POLLIN, 0};
    while (!__atomic_load_n(&h->stop, __ATOMIC_ACQUIRE)) {
        if (poll(&p, 1, 200) <= 0) continue;
        int c = accept(h->fd, NULL, NULL);
        if (c < 0) continue;
        wk_serve(h, c);
        close(c);
    }
    return NULL;
}

int wk_http_start(wk_worker *w, const char *addr, wk_http **out, char *err, size_t errlen) {
    *out = NULL;
    /* "host:port", ":port" or "port"; no host means loopback: the
     * endpoint is exposed only when the operator names an address
     * (0.0.0.0:PORT, [::]:PORT or an interface's). */
    char host[256] = "127.0.0.1";
    const char *colon = strrchr(addr, ':'), *port = colon ? colon + 1 : addr;
    if ((colon && (size_t)(colon - addr) >= sizeof host) || !*port ||
        strspn(port, "0123456789") != strlen(port)) {
        return pl_errf(err, errlen, WK_EINVAL,
                       "configuration key 'worker.http': '%s' is not host:port", addr);
    }
    if (colon && colon > addr) {
        const char *h = addr;
        size_t n = (size_t)(colon - addr);
        if (n >= 2 && h[0] == '[' && h[n - 1] == ']') h++, n -= 2; /* [::]:9090 */
        memcpy(host, h, n);
        host[n] = 0;
    }
    struct addrinfo hints, *ai = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    int gr = getaddrinfo(host, port, &hints, &ai);
    if (gr) {
        return pl_errf(err, errlen, WK_EINVAL, "configuration key 'worker.http': %s: %s", addr,
                       gai_strerror(gr));
    }
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
    if (fd >= 0) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (fd < 0 || bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 16) != 0) {
        pl_errf(err, errlen, WK_EINVAL, "configuration key 'worker.http': cannot listen on %s: %s",
                addr, strerror(errno));
        if (fd >= 0) close(fd);
        freeaddrinfo(ai);
        return WK_EINVAL;
    }
    freeaddrinfo(ai);
    wk_http *h = calloc(1, sizeof *h);
    if (!h) {
        close(fd);
        return pl_errf(err, errlen, WK_ENOMEM, "out of memory");
    }
    h->w = w;
    h->fd = fd;
    if (pthread_create(&h->thread, NULL, wk_http_main, h) != 0) {
        close(fd);
        free(h);
        return pl_errf(err, errlen, WK_ENOMEM, "worker.http: cannot start the HTTP thread");
    }
    *out = h;
    return 0;
}

void wk_http_stop(wk_http *h) {
    if (!h) return;
    __atomic_store_n(&h->stop, 1, __ATOMIC_RELEASE);
    pthread_join(h->thread, NULL);
    close(h->fd);
    free(h);
}
