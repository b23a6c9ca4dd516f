/*
 * wk_history.c -- a conversation's remembered last turn (wk_history, see
 * wk_internal.h): one allocation holding the views eng_tmpl_render_turn
 * reads as its prior, and the namespace check before it is used.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wk_internal.h"

wk_history *wk_history_new(const eng_tmpl_turn *rt, int n_msgs, const char *ns,
                           const int32_t *prompt, int n_prompt, const int32_t *gen, int n_gen,
                           const char *reply, size_t n_reply) {
    if (n_msgs < 1 || n_prompt < 0 || n_gen < 0 || strlen(ns) > ENG_SCHED_NS_MAX) return NULL;
    size_t spec = (size_t)rt->n_spec * sizeof(eng_tmpl_special);
    size_t ids = ((size_t)n_prompt + (size_t)n_gen) * sizeof(int32_t);
    /* specials and ids first (aligned after the struct), then the bytes */
    size_t bytes = sizeof(wk_history) + spec + ids + rt->n_text + n_reply + 2;
    wk_history *h = malloc(bytes);
    if (!h) return NULL;
    eng_tmpl_special *sp = (eng_tmpl_special *)(h + 1);
    int32_t *id = (int32_t *)((char *)sp + spec);
    char *text = (char *)(id + n_prompt + n_gen), *rep = text + rt->n_text + 1;
    if (spec) memcpy(sp, rt->spec, spec);
    if (n_prompt) memcpy(id, prompt, (size_t)n_prompt * sizeof *id);
    if (n_gen) memcpy(id + n_prompt, gen, (size_t)n_gen * sizeof *id);
    if (rt->n_text) memcpy(text, rt->text, rt->n_text);
    text[rt->n_text] = 0;
    if (n_reply) memcpy(rep, reply, n_reply);
    rep[n_reply] = 0;
    h->p = (eng_tmpl_prior){n_msgs,   text,          rt->n_text, sp,  rt->n_spec, id,
                            n_prompt, id + n_prompt, n_gen,      rep, n_reply};
    snprintf(h->ns, sizeof h->ns, "%s", ns);
    h->bytes = bytes;
    return h;
}

const eng_tmpl_prior *wk_history_prior(const wk_history *h, const char *ns, size_t ns_len) {
    if (!h || strlen(h->ns) != ns_len || memcmp(h->ns, ns, ns_len) != 0) return NULL;
    return &h->p;
}
