/*
 * cmd_bench_chat.c -- `parley bench --workload chat`: real-text multi-turn
 * conversations through the model's tokenizer and chat template, the
 * scheduler and the prefix cache, as a chat worker serves them.
 *
 * Workload.  C conversations of T turns each, closed loops started
 * together.  Every user message is 1..3 consecutive English sentences drawn
 * (by seed, conversation and turn) from text files on the machine (--text;
 * by default the licence texts Debian installs under
 * /usr/share/common-licenses), so lengths vary and no figure rests on one
 * prompt.  Each next turn carries the full history, including the reply the
 * model actually produced (sampled at temperature 0.8, top-k 40, seeded per
 * conversation and turn; ended by an end-of-generation token, the stop
 * string, or --reply tokens).  The prompt is rendered by the model's chat
 * format (or --chat-template) with eng_tmpl_render_turn: with --splice on,
 * the previous turn's prompt and generated ids are spliced in as the worker
 * does (eng_template.h, "Splicing"); with --splice off every turn is
 * re-tokenised from text, as before splicing existed.
 *
 * Runs.  --runs lists them (default "splice,retok,before,nocache"): cache
 * on with splicing and partial-block reuse (what the worker does); cache on
 * re-tokenising every prompt; cache on re-tokenising and reusing whole
 * blocks only (kv_cache_config.partial_blocks = 0: parley before both);
 * and no cache (every prompt computed).
 * Each run replays the same user messages from the same seeds; replies may
 * differ between runs once any figure differs (they are sampled from the
 * model's output on that run's ids).
 *
 * Output per run: prompt tokens served from the cache overall and over
 * turns 2..T, and by turn index: share, TTFT p50/p90, tokens computed per
 * turn, turns spliced / re-tokenised / whose re-tokenised prompt differs
 * from the splice, and the tokens lost: of the ids the previous turn ran
 * (prompt + generated, eng_tok_common_prefix with the new prompt, at most
 * n - 1) those this prompt shares but the cache did not serve -- the
 * partial last block without partial-block reuse (a re-tokenised reply
 * that changed shares fewer ids: compare the runs' shares).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "cli_opt.h"
#include "eng_model.h"
#include "eng_sched.h"
#include "eng_template.h"
#include "eng_tok.h"
#include "kv_cache.h"
#include "pl_err.h"
#include "pl_time.h"
#include "cmd_bench.h"

#define CB_MAX_TEXT 8   /* --text files at most */
#define CB_SENT_MIN 24  /* shortest sentence used (bytes) */
#define CB_SENT_MAX 400 /* longest sentence used (bytes) */
#define CB_STOP_MAX 64  /* longest stop string */

/* Options. */
typedef struct cb_opts {
    const char *model;             /* GGUF path */
    const char *tmpl;              /* chat format override (NULL: the model's) */
    const char *tmpl_file;         /* a Jinja template file rendered instead (NULL: none) */
    const char *text[CB_MAX_TEXT]; /* sentence sources */
    int n_text;                    /* entries of text */
    const char *runs;              /* comma list of splice|retok|before|nocache */
    const char *system;            /* system message ("" = none) */
    const char *stop;              /* stop string (NULL: "\nUser:" for transcript, else none) */
    int convs, turns, reply;       /* conversations, turns each, reply max_tokens */
    int threads, block;            /* engine threads, KV block tokens */
    long kv_mib;                   /* KV budget */
    int max_running, step_tokens;  /* scheduler */
    uint64_t seed;                 /* workload seed */
} cb_opts;

/* Sentences of the text sources. */
typedef struct cb_corpus {
    char **s; /* sentences (NUL-terminated, whitespace collapsed) */
    int n;    /* entries */
} cb_corpus;

/* One turn's figures. */
typedef struct cb_turn {
    int prompt, cached; /* prompt tokens, of which served by the cache */
    int shared;         /* tokens of the previous prompt + reply this prompt shares (<= n - 1) */
    int spliced;        /* 1: the previous turn's ids were spliced in */
    int mismatch;       /* 1: re-tokenising would give (splice) / gave (retok) other ids */
    double ttft_ms;     /* -1: failed */
} cb_turn;

struct cb_run;

/* One conversation (the submitting thread, then the delivery thread). */
typedef struct cb_conv {
    struct cb_run *run;        /* owning run */
    int idx, turn;             /* conversation, turn in flight (0-based) */
    eng_tmpl_msg *msgs;        /* history */
    char **owned;              /* reply texts (owned), one per assistant message */
    int n_msgs;                /* messages */
    eng_tmpl_turn rt;          /* the render of the turn in flight */
    int32_t *gen;              /* its generated ids (copied in on_done) */
    int n_gen, cap_gen;        /* entries / allocated */
    eng_tmpl_prior prior;      /* the previous turn (views of prev_rt / prev_gen / prev reply) */
    eng_tmpl_turn prev_rt;     /* the previous turn's render */
    int32_t *prev_gen;         /* its generated ids */
    int have_prior;            /* prior is set */
    char *reply;               /* text of the reply in flight */
    size_t n_reply, cap_reply; /* bytes / allocated */
    eng_tok_stream ts;         /* detokeniser of the reply */
    uint64_t req;              /* request id in flight */
    int stopped;               /* the stop string was seen */
} cb_conv;

/* One run. */
typedef struct cb_run {
    const cb_opts *o;           /* options */
    const cb_corpus *corpus;    /* user message source */
    const eng_tok *tok;         /* tokenizer */
    eng_tmpl_format fmt;        /* chat format */
    const eng_tmpl_file *tfile; /* the file's own template when fmt == ENG_TMPL_FILE */
    const char *stop;           /* stop string ("" = none) */
    int splice;                 /* splice previous turns in */
    int partial;                /* the cache reuses partial last blocks */
    eng_sched *s;               /* scheduler */
    int32_t eog[16];            /* end-of-generation ids */
    int n_eog;                  /* entries */
    char *scratch;              /* detokeniser output (delivery thread) */
    size_t scratch_cap;         /* bytes */
    cb_conv *conv;              /* convs entries */
    cb_turn *tt;                /* [conv][turn] */
    pthread_mutex_t mu;         /* guards convs_done, errors */
    pthread_cond_t cv;          /* a conversation ended */
    int convs_done, errors;     /* conversations finished, turns failed */
} cb_run;

/* ---------------------------------------------------------------- corpus */

/* Split text into sentences: ends at ". ", "? ", "! " or a blank line;
 * whitespace runs become one space; keeps those of CB_SENT_MIN..MAX bytes
 * that start with a letter. */
static int corpus_add(cb_corpus *c, const char *p, size_t n) {
    char buf[CB_SENT_MAX + 2];
    size_t w = 0;
    int lines = 0, drop = 0;
    for (size_t i = 0; i <= n; i++) {
        char ch = i < n ? p[i] : '\n';
        int end = i == n;
        if (ch == '\n' && ++lines >= 2) end = 1;
        if (ch != '\n') lines = 0;
        if (ch == '\n' || ch == '\t' || ch == '\r' || ch == '\f') ch = ' ';
        if (!end) {
            if (ch == ' ' && (w == 0 || buf[w - 1] == ' ')) continue;
            if (w < CB_SENT_MAX) buf[w++] = ch;
            else drop = 1;
            if ((ch == '.' || ch == '?' || ch == '!') && i + 1 < n &&
                (p[i + 1] == ' ' || p[i + 1] == '\n'))
                end = 1;
        }
        if (!end) continue;
        while (w && buf[w - 1] == ' ') w--;
        if (!drop && w >= CB_SENT_MIN &&
            ((buf[0] >= 'A' && buf[0] <= 'Z') || (buf[0] >= 'a' && buf[0] <= 'z'))) {
            char **v = realloc(c->s, (size_t)(c->n + 1) * sizeof *v);
            if (!v) return -1;
            c->s = v;
            if (!(c->s[c->n] = malloc(w + 1))) return -1;
            memcpy(c->s[c->n], buf, w);
            c->s[c->n++][w] = 0;
        }
        w = 0;
        drop = 0;
    }
    return 0;
}

static int corpus_load(cb_corpus *c, const cb_opts *o) {
    static const char *dflt[] = {
        "/usr/share/common-licenses/GPL-3", "/usr/share/common-licenses/Apache-2.0",
        "/usr/share/common-licenses/MPL-2.0", "/usr/share/common-licenses/GFDL-1.3",
        "/usr/share/common-licenses/Artistic"};
    int n = o->n_text ? o->n_text : (int)(sizeof dflt / sizeof *dflt);
    for (int i = 0; i < n; i++) {
        const char *path = o->n_text ? o->text[i] : dflt[i];
        FILE *f = fopen(path, "rb");
        if (!f) {
            if (o->n_text) {
                fprintf(stderr, "bench: --text %s: cannot open\n", path);
                return -1;
            }
            continue;
        }
        char *buf = malloc(1 << 22);
        size_t got = buf ? fread(buf, 1, 1 << 22, f) : 0;
        fclose(f);
        int rc = buf ? corpus_add(c, buf, got) : -1;
        free(buf);
        if (rc) return -1;
    }
    if (c->n < 16) {
        fprintf(stderr, "bench: %d sentences found in the text files (need 16; pass --text)\n",
                c->n);
        return -1;
    }
    return 0;
}

/* The user message of (conv, turn): 1..3 consecutive sentences. */
static char *user_message(const cb_run *run, int conv, int turn) {
    uint64_t h = bench_mix(run->o->seed ^ bench_mix((uint64_t)conv << 32 | (uint64_t)turn));
    int k = 1 + (int)(h % 3), at = (int)((h >> 8) % (uint64_t)run->corpus->n);
    size_t len = 0;
    for (int i = 0; i < k; i++) len += strlen(run->corpus->s[(at + i) % run->corpus->n]) + 1;
    char *m = malloc(len + 1);
    if (!m) return NULL;
    m[0] = 0;
    for (int i = 0; i < k; i++) {
        if (i) strcat(m, " ");
        strcat(m, run->corpus->s[(at + i) % run->corpus->n]);
    }
    return m;
}

/* ---------------------------------------------------------------- turns */

static int conv_push(cb_conv *c, const char *role, char *content) {
    eng_tmpl_msg *v = realloc(c->msgs, (size_t)(c->n_msgs + 1) * sizeof *v);
    char **w = realloc(c->owned, (size_t)(c->n_msgs + 1) * sizeof *w);
    if (v) c->msgs = v;
    if (w) c->owned = w;
    if (!v || !w || !content) {
        free(content);
        return -1;
    }
    c->owned[c->n_msgs] = content;
    c->msgs[c->n_msgs++] = (eng_tmpl_msg){
        .role = role, .role_len = strlen(role), .content = content, .content_len = strlen(content)};
    return 0;
}

static void cb_on_token(void *user, uint64_t id, const eng_sched_token *ev);
static void cb_on_done(void *user, uint64_t id, const eng_sched_result *r);

/* A turn's render with the run's template (built-in or the file's own). */
static int cb_render(const cb_run *run, cb_conv *c, const eng_tmpl_prior *pr, char *err,
                     size_t errlen) {
    if (run->tfile)
        return eng_tmpl_file_render_turn(run->tfile, c->msgs, c->n_msgs, true, NULL, pr, &c->rt,
                                         err, errlen);
    return eng_tmpl_render_turn(run->fmt, run->tok, c->msgs, c->n_msgs, true, pr, &c->rt, err,
                                errlen);
}

static int conv_submit(cb_conv *c) {
    cb_run *run = c->run;
    char err[PL_ERR_LEN];
    eng_tmpl_turn_free(&c->rt);
    /* with the prior always (its mismatch flag is the figure); a re-tokenising
     * run then renders again without it, and runs those ids */
    const eng_tmpl_prior *pr = c->have_prior ? &c->prior : NULL;
    int rc = cb_render(run, c, pr, err, sizeof err);
    cb_turn *tt = &run->tt[(size_t)c->idx * run->o->turns + c->turn];
    tt->mismatch = c->rt.mismatch;
    if (!rc && !run->splice && pr) {
        eng_tmpl_turn_free(&c->rt);
        rc = cb_render(run, c, NULL, err, sizeof err);
    }
    if (rc) {
        fprintf(stderr, "bench: render: %s\n", err);
        return -1;
    }
    tt->prompt = c->rt.n_ids;
    tt->spliced = c->rt.n_spliced > 0;
    if (c->have_prior) { /* what the previous turn computed that this prompt shares */
        int np = c->prior.n_prompt, ng = c->prior.n_gen;
        int32_t *prev = malloc((size_t)(np + ng + 1) * sizeof *prev);
        if (prev) {
            memcpy(prev, c->prior.ids, (size_t)np * sizeof *prev);
            memcpy(prev + np, c->prior.gen, (size_t)ng * sizeof *prev);
            int cp = eng_tok_common_prefix(prev, np + ng, c->rt.ids, c->rt.n_ids);
            tt->shared = cp < c->rt.n_ids - 1 ? cp : c->rt.n_ids - 1;
            free(prev);
        }
    }
    eng_sched_request q;
    memset(&q, 0, sizeof q);
    q.prompt = c->rt.ids;
    q.n_prompt = c->rt.n_ids;
    eng_sampler_params_default(&q.sampling);
    q.sampling.temperature = 0.8f;
    q.sampling.top_k = 40;
    q.sampling.seed = bench_mix(run->o->seed ^ ((uint64_t)c->idx << 16 | (uint64_t)c->turn));
    q.sampling.n_stop = run->n_eog;
    memcpy(q.sampling.stop, run->eog, (size_t)run->n_eog * sizeof run->eog[0]);
    q.max_tokens = run->o->reply;
    char ns[32];
    snprintf(ns, sizeof ns, "chat%d", c->idx % 4);
    q.ns = ns;
    q.ns_len = strlen(ns);
    q.on_token = cb_on_token;
    q.on_done = cb_on_done;
    q.user = c;
    c->n_gen = 0;
    c->n_reply = 0;
    c->stopped = 0;
    eng_tok_stream_init(&c->ts, run->tok, 0);
    if (eng_sched_submit(run->s, &q, &c->req, err, sizeof err) != 0) {
        fprintf(stderr, "bench: submit: %s\n", err);
        return -1;
    }
    return 0;
}

static void reply_append(cb_conv *c, const char *p, size_t n) {
    if (c->stopped || !n) return;
    if (c->n_reply + n + 1 > c->cap_reply) {
        size_t cap = 2 * (c->n_reply + n + 1);
        char *x = realloc(c->reply, cap);
        if (!x) return;
        c->reply = x;
        c->cap_reply = cap;
    }
    memcpy(c->reply + c->n_reply, p, n);
    c->n_reply += n;
    c->reply[c->n_reply] = 0;
    const char *stop = c->run->stop;
    if (*stop) {
        char *at = strstr(c->reply, stop);
        if (at) {
            c->n_reply = (size_t)(at - c->reply);
            c->reply[c->n_reply] = 0;
            c->stopped = 1;
            eng_sched_stop(c->run->s, c->req, c->n_gen); /* through this token */
        }
    }
}

static void cb_on_token(void *user, uint64_t id, const eng_sched_token *ev) {
    cb_conv *c = user;
    int32_t token = ev->token;
    (void)id;
    if (c->stopped) return; /* generated after the stop string */
    if (c->n_gen == c->cap_gen) {
        int cap = c->cap_gen ? 2 * c->cap_gen : 64;
        int32_t *x = realloc(c->gen, (size_t)cap * sizeof *x);
        if (!x) return;
        c->gen = x;
        c->cap_gen = cap;
    }
    c->gen[c->n_gen++] = token;
    size_t n = 0;
    if (eng_tok_stream_push(&c->ts, token, c->run->scratch, c->run->scratch_cap, &n) == 0)
        reply_append(c, c->run->scratch, n);
}

static void conv_end(cb_run *run) {
    pthread_mutex_lock(&run->mu);
    run->convs_done++;
    pthread_cond_broadcast(&run->cv);
    pthread_mutex_unlock(&run->mu);
}

static void cb_on_done(void *user, uint64_t id, const eng_sched_result *r) {
    cb_conv *c = user;
    cb_run *run = c->run;
    (void)id;
    size_t n = 0;
    if (eng_tok_stream_flush(&c->ts, run->scratch, run->scratch_cap, &n) == 0)
        reply_append(c, run->scratch, n);
    cb_turn *tt = &run->tt[(size_t)c->idx * run->o->turns + c->turn];
    tt->cached = r->cached_tokens;
    tt->ttft_ms = r->finish == ENG_SCHED_ERROR || !r->n_tokens ? -1 : r->ttft_ms;
    if (r->finish == ENG_SCHED_ERROR) {
        pthread_mutex_lock(&run->mu);
        if (run->errors++ < 3) fprintf(stderr, "bench: turn failed: %s\n", r->error);
        pthread_mutex_unlock(&run->mu);
        conv_end(run);
        return;
    }
    /* the previous turn becomes this one: render, ids, generated ids, reply */
    eng_tmpl_turn_free(&c->prev_rt);
    c->prev_rt = c->rt;
    memset(&c->rt, 0, sizeof c->rt);
    free(c->prev_gen);
    c->prev_gen = c->gen;
    c->gen = NULL;
    c->cap_gen = 0;
    char *reply = malloc(c->n_reply + 1);
    if (reply) {
        if (c->n_reply) memcpy(reply, c->reply, c->n_reply);
        reply[c->n_reply] = 0;
    }
    int prior_msgs = c->n_msgs;
    if (conv_push(c, "assistant", reply) != 0 || ++c->turn >= run->o->turns ||
        conv_push(c, "user", user_message(run, c->idx, c->turn)) != 0) {
        conv_end(run);
        return;
    }
    c->prior =
        (eng_tmpl_prior){prior_msgs,        c->prev_rt.text, c->prev_rt.n_text, c->prev_rt.spec,
                         c->prev_rt.n_spec, c->prev_rt.ids,  c->prev_rt.n_ids,  c->prev_gen,
                         c->n_gen,          reply,           strlen(reply)};
    c->have_prior = 1;
    if (conv_submit(c) != 0) conv_end(run);
}

/* ---------------------------------------------------------------- report */

static void cb_report(const cb_run *run, const char *name, double wall) {
    const cb_opts *o = run->o;
    long P = 0, C = 0, P2 = 0, C2 = 0, lost = 0, shared = 0;
    int spl = 0, retok = 0, mism = 0;
    for (int c = 0; c < o->convs; c++)
        for (int t = 0; t < o->turns; t++) {
            const cb_turn *x = &run->tt[(size_t)c * o->turns + t];
            if (x->ttft_ms < 0) continue;
            P += x->prompt, C += x->cached;
            if (t) {
                P2 += x->prompt, C2 += x->cached, shared += x->shared;
                lost += x->shared > x->cached ? x->shared - x->cached : 0;
                spl += x->spliced, retok += !x->spliced, mism += x->mismatch;
            }
        }
    static const char *what[] = {"splice",  "history spliced, partial blocks reused",
                                 "retok",   "re-tokenised, partial blocks reused",
                                 "before",  "re-tokenised, whole blocks only",
                                 "nocache", "no prefix cache"};
    const char *desc = "";
    for (int i = 0; i < 8; i += 2)
        if (!strcmp(name, what[i])) desc = what[i + 1];
    printf("\n== %s (%s): %d conversations x %d turns, %.1f s, failed turns %d\n", name, desc,
           o->convs, o->turns, wall, run->errors);
    printf("  prompt tokens %ld, from cache %ld = %.2f%%; turns 2..%d: %ld of %ld = %.2f%%\n", P, C,
           P ? 100.0 * C / P : 0, o->turns, C2, P2, P2 ? 100.0 * C2 / P2 : 0);
    printf("  turns 2..%d: %d spliced, %d re-tokenised, %d whose re-tokenised ids differ from the "
           "generated ones\n",
           o->turns, spl, retok, mism);
    printf("  shared with the ids the previous turn ran: %ld tokens, of which served %.2f%%, "
           "lost %ld (%.2f per turn)\n",
           shared, shared ? 100.0 * (double)(shared - lost) / (double)shared : 0, lost,
           (spl + retok) ? (double)lost / (spl + retok) : 0);
    printf("  turn   share   ttft_p50  ttft_p90  computed  prompt  lost  spliced  mismatch\n");
    double *v = malloc((size_t)o->convs * sizeof *v);
    if (!v) return;
    for (int t = 0; t < o->turns; t++) {
        long p = 0, cc = 0, ls = 0;
        int n = 0, sp = 0, mm = 0;
        for (int c = 0; c < o->convs; c++) {
            const cb_turn *x = &run->tt[(size_t)c * o->turns + t];
            if (x->ttft_ms < 0) continue;
            v[n++] = x->ttft_ms;
            p += x->prompt, cc += x->cached, sp += x->spliced, mm += x->mismatch;
            ls += x->shared > x->cached ? x->shared - x->cached : 0;
        }
        if (!n) continue;
        qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
        printf("  %4d %6.1f%% %9.1f %9.1f %9.1f %7.1f %5.1f %8d %9d\n", t + 1,
               p ? 100.0 * cc / p : 0, bench_pct(v, n, 0.5), bench_pct(v, n, 0.9),
               (double)(p - cc) / n, (double)p / n, (double)ls / n, sp, mm);
    }
    free(v);
    fflush(stdout);
}

/* ---------------------------------------------------------------- runs */

static void run_free(cb_run *run) {
    if (run->conv)
        for (int c = 0; c < run->o->convs; c++) {
            cb_conv *x = &run->conv[c];
            for (int i = 0; i < x->n_msgs; i++) free(x->owned[i]);
            free(x->owned);
            free(x->msgs);
            eng_tmpl_turn_free(&x->rt);
            eng_tmpl_turn_free(&x->prev_rt);
            free(x->gen);
            free(x->prev_gen);
            free(x->reply);
        }
    free(run->conv);
    free(run->tt);
    free(run->scratch);
}

static int cb_run_one(eng_model *m, const eng_tok *tok, const eng_tmpl_choice *tc, const cb_opts *o,
                      const cb_corpus *corpus, const char *name) {
    eng_tmpl_format fmt = tc->fmt;
    int cache_on = strcmp(name, "nocache") != 0, rc = -1;
    cb_run run;
    memset(&run, 0, sizeof run);
    run.o = o;
    run.corpus = corpus;
    run.tok = tok;
    run.fmt = fmt;
    run.tfile = tc->file;
    run.splice = !strcmp(name, "splice");
    run.partial = strcmp(name, "before") != 0;
    run.stop = o->stop ? o->stop : fmt == ENG_TMPL_TRANSCRIPT ? "\nUser:" : "";
    run.n_eog = eng_tok_eog_ids(tok, run.eog, 16);
    pthread_mutex_init(&run.mu, NULL);
    pthread_cond_init(&run.cv, NULL);
    kv_cache *kc = NULL;
    eng_sched_config cfg;
    eng_sched_config_default(&cfg);
    cfg.max_running = o->max_running;
    cfg.step_tokens = o->step_tokens;
    cfg.kv_budget_bytes = (size_t)o->kv_mib << 20;
    cfg.max_queue = o->convs + 16;
    run.scratch_cap = eng_tok_stream_cap(tok);
    run.scratch = malloc(run.scratch_cap);
    run.conv = calloc((size_t)o->convs, sizeof *run.conv);
    run.tt = calloc((size_t)o->convs * o->turns, sizeof *run.tt);
    if (!run.scratch || !run.conv || !run.tt) goto done;
    for (size_t i = 0; i < (size_t)o->convs * o->turns; i++) run.tt[i].ttft_ms = -1;
    if (bench_sched_open(m, &cfg, cache_on, o->block, "bench-chat", run.partial, &kc, &run.s) != 0)
        goto done;
    double t0 = pl_mono_s();
    for (int c = 0; c < o->convs; c++) {
        cb_conv *x = &run.conv[c];
        x->run = &run;
        x->idx = c;
        char *sys = *o->system ? strdup(o->system) : NULL;
        if ((sys && conv_push(x, "system", sys) != 0) ||
            conv_push(x, "user", user_message(&run, c, 0)) != 0 || conv_submit(x) != 0)
            conv_end(&run);
    }
    pthread_mutex_lock(&run.mu);
    while (run.convs_done < o->convs) pthread_cond_wait(&run.cv, &run.mu);
    pthread_mutex_unlock(&run.mu);
    double wall = pl_mono_s() - t0;
    eng_sched_close(run.s, 1);
    cb_report(&run, name, wall);
    rc = run.errors ? -1 : 0;
done:
    eng_sched_free(run.s);
    if (kc) kv_cache_destroy(kc);
    run_free(&run);
    pthread_mutex_destroy(&run.mu);
    pthread_cond_destroy(&run.cv);
    return rc;
}

static int cb_text(void *ctx, const cli_opt *opt, const char *v, char *err, size_t errlen) {
    cb_opts *o = ctx;
    (void)opt;
    if (o->n_text == CB_MAX_TEXT)
        return pl_errf(err, errlen, CLI_EINVAL, "at most %d files", CB_MAX_TEXT);
    o->text[o->n_text++] = v;
    return 0;
}

static int cb_workload(void *ctx, const cli_opt *opt, const char *v, char *err, size_t errlen) {
    (void)ctx, (void)opt;
    return strcmp(v, "chat") ? pl_errf(err, errlen, CLI_EINVAL, "chat") : 0;
}

int bench_cmd_chat(int argc, char **argv) {
    cb_opts o = {.runs = "splice,retok,before,nocache",
                 .system = "",
                 .convs = 8,
                 .turns = 20,
                 .reply = 48,
                 .threads = 0,
                 .block = 16,
                 .kv_mib = 512,
                 .max_running = 64,
                 .step_tokens = 512,
                 .seed = 1};
    const cli_opt opts[] = {
        {"--workload", NULL, CLI_FN, NULL, 0, 0, "chat", "this benchmark", cb_workload},
        {"--model", NULL, CLI_STR, &o.model, 0, 0, "FILE", "GGUF model (required)", NULL},
        {"--chat-template", NULL, CLI_STR, &o.tmpl, 0, 0, "NAME",
         "chat format (default: the model's)", NULL},
        {"--chat-template-file", NULL, CLI_STR, &o.tmpl_file, 0, 0, "FILE",
         "a Jinja chat template to render instead of the model's", NULL},
        {"--text", NULL, CLI_FN, NULL, 0, 0, "FILE",
         "English text to draw user messages from (repeatable; default: the licence texts "
         "under /usr/share/common-licenses)",
         cb_text},
        {"--system", NULL, CLI_STR, &o.system, 0, 0, "TEXT", "system message (default none)", NULL},
        {"--stop", NULL, CLI_STR, &o.stop, 0, 0, "STR",
         "stop string (default \"\\nUser:\" for the transcript format, else none)", NULL},
        {"--conversations", NULL, CLI_INT, &o.convs, 1, 4096, "C", "conversations (default 8)",
         NULL},
        {"--turns", NULL, CLI_INT, &o.turns, 1, 1000, "T", "turns each (default 20)", NULL},
        {"--reply", NULL, CLI_INT, &o.reply, 1, 4096, "N", "reply max_tokens (default 48)", NULL},
        {"--runs", NULL, CLI_STR, &o.runs, 0, 0, "LIST",
         "comma list of splice, retok, before, nocache (default all four)", NULL},
        {"--kv-mib", NULL, CLI_LONG, &o.kv_mib, 1, 1 << 20, "N", "KV budget (default 512)", NULL},
        {"--max-running", NULL, CLI_INT, &o.max_running, 1, 4096, "N",
         "sequences per batch (default 64)", NULL},
        {"--step-tokens", NULL, CLI_INT, &o.step_tokens, 1, 1 << 20, "N",
         "scheduler token budget per step (default 512)", NULL},
        {"--threads", NULL, CLI_INT, &o.threads, 0, 1024, "N", "compute threads (default all)",
         NULL},
        {"--block", NULL, CLI_INT, &o.block, 1, 4096, "N", "KV block tokens (default 16)", NULL},
        {"--seed", NULL, CLI_U64, &o.seed, 0, 0x7fffffffL, "N", "workload seed (default 1)", NULL},
    };
    const cli_cmd cmd = {.name = "bench",
                         .synopsis = "bench --workload chat --model FILE [options]",
                         .about = "real-text multi-turn chat through the template, scheduler and "
                                  "cache; cache share, TTFT and splicing by turn index\n",
                         .opts = opts,
                         .n_opts = CLI_NOPTS(opts)};
    int pr = cli_parse(&cmd, argc, argv, &o, NULL, NULL);
    if (pr != CLI_OK) return pr == CLI_HELP ? 0 : 2;
    if (!o.model) {
        fprintf(stderr, "bench: --model FILE is required\n");
        return 2;
    }
    if (o.stop && (!*o.stop || strlen(o.stop) > CB_STOP_MAX)) {
        fprintf(stderr, "bench: --stop must be 1..%d bytes\n", CB_STOP_MAX);
        return 2;
    }
    cb_corpus corpus = {0};
    eng_model *m = NULL;
    eng_tok *tok = NULL;
    eng_tmpl_choice tc;
    memset(&tc, 0, sizeof tc);
    char err[PL_ERR_LEN];
    int rc = 1;
    if (corpus_load(&corpus, &o) != 0) goto out;
    eng_load_opts lo = {.prec = ENG_PREC_INT8, .n_threads = o.threads, .block_tokens = o.block};
    if (eng_model_load(o.model, &lo, &m, err, sizeof err) != 0 ||
        eng_tok_load(eng_model_gguf(m), &tok, err, sizeof err) != 0) {
        fprintf(stderr, "bench: %s\n", err);
        goto out;
    }
    if (o.tmpl_file) {
        static char src[1 << 20];
        FILE *tf = fopen(o.tmpl_file, "rb");
        size_t ns = tf ? fread(src, 1, sizeof src, tf) : 0;
        if (tf) fclose(tf);
        if (!tf || eng_tmpl_file_compile(src, ns, tok, &tc.file, err, sizeof err) != 0) {
            fprintf(stderr, "bench: --chat-template-file %s: %s\n", o.tmpl_file,
                    tf ? err : "cannot read");
            goto out;
        }
        tc.fmt = ENG_TMPL_FILE;
    } else if (eng_tmpl_choose(eng_model_gguf(m), tok, o.tmpl, &tc, err, sizeof err) != 0) {
        fprintf(stderr, "bench: %s\n", err);
        goto out;
    }
    if (tc.note[0])
        fprintf(stderr, "bench: the file's chat template is refused (%s); using %s\n", tc.note,
                eng_tmpl_name(tc.fmt));
    const eng_config *c = eng_model_config(m);
    printf("parley bench chat: model %s (%s, %d layers, vocab %d), %d threads, block %d, KV "
           "budget %ld MiB, chat format %s\n",
           o.model, c->arch_name, c->n_layer, c->n_vocab, eng_model_n_threads(m), o.block, o.kv_mib,
           tc.fmt == ENG_TMPL_FILE ? "file (tokenizer.chat_template rendered)"
                                   : eng_tmpl_name(tc.fmt));
    printf("workload: %d conversations x %d turns, user messages of 1..3 sentences from %d "
           "sentences of English text, replies up to %d tokens (temperature 0.8, top-k 40)\n",
           o.convs, o.turns, corpus.n, o.reply);
    fflush(stdout);
    rc = 0;
    char runs[128];
    snprintf(runs, sizeof runs, "%s", o.runs);
    for (char *save = NULL, *r = strtok_r(runs, ",", &save); r; r = strtok_r(NULL, ",", &save)) {
        if (strcmp(r, "splice") && strcmp(r, "retok") && strcmp(r, "before") &&
            strcmp(r, "nocache")) {
            fprintf(stderr,
                    "bench: --runs: unknown run \"%s\" (splice, retok, before, "
                    "nocache)\n",
                    r);
            rc = 2;
            break;
        }
        if (cb_run_one(m, tok, &tc, &o, &corpus, r) != 0) rc = 1;
    }
out:
    for (int i = 0; i < corpus.n; i++) free(corpus.s[i]);
    free(corpus.s);
    eng_tmpl_choice_free(&tc);
    eng_tok_free(tok);
    eng_model_free(m);
    return rc;
}
