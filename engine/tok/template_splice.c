/*
 * template_splice.c -- rendering a conversation's next turn with the ids of
 * its previous one spliced in (eng_template.h, "Splicing a conversation's
 * ids"): the rules that say whether the remembered turn still describes the
 * start of the new render, the walk of its generated ids along the new
 * text, and the encoding of the rest.
 */
#include <stdlib.h>
#include <string.h>

#include "eng_template.h"
#include "tok_internal.h"

void eng_tmpl_turn_free(eng_tmpl_turn *o) {
    if (!o) return;
    free(o->ids);
    free(o->text);
    free(o->spec);
    memset(o, 0, sizeof *o);
}

/* Rule (a): the message after the prior's is the reply it returned. */
static int prior_reply_matches(const eng_tmpl_prior *p, const eng_tmpl_msg *msgs, int n) {
    if (p->n_msgs < 0 || p->n_msgs >= n) return 0;
    const eng_tmpl_msg *m = &msgs[p->n_msgs];
    return m->role_len == 9 && memcmp(m->role, "assistant", 9) == 0 &&
           m->content_len == p->n_reply &&
           (!p->n_reply || memcmp(m->content, p->reply, p->n_reply) == 0);
}

/* Rule (b): the new render starts with the prior's text and has exactly
 * its special tokens inside it.  Returns the number of the new render's
 * specials that lie inside (== p->n_spec), or -1. */
static int prior_text_matches(const eng_tmpl_prior *p, const char *text, size_t n_text,
                              const eng_tmpl_special *spec, int n_spec) {
    if (p->n_text > n_text || (p->n_text && memcmp(text, p->text, p->n_text) != 0)) return -1;
    int k = 0;
    while (k < n_spec && spec[k].off < p->n_text) k++;
    if (k != p->n_spec) return -1;
    for (int i = 0; i < k; i++)
        if (spec[i].off != p->spec[i].off || spec[i].len != p->spec[i].len ||
            spec[i].id != p->spec[i].id || spec[i].off + spec[i].len > p->n_text)
            return -1;
    return k;
}

/* Walk the prior's generated ids along text from *pos (the next special
 * token is spec[*si]): each must spell the next bytes, a special id only as
 * the same template-owned special token, a text id only inside one text
 * run.  The run then backs off to a UTF-8 character boundary of the text
 * (a model can stop inside a character, on byte tokens, and the rest must
 * be encoded from whole characters).  Returns the ids that matched; *pos
 * and *si end after them. */
static int walk_generated(const eng_tok *t, const eng_tmpl_prior *p, const char *text,
                          size_t n_text, const eng_tmpl_special *spec, int n_spec, size_t *pos,
                          int *si) {
    char piece[256];
    size_t back_pos[8]; /* *pos and *si before each of the last ids tried */
    int back_si[8], j = 0, si0 = *si;
    size_t pos0 = *pos;
    for (; j < p->n_gen; j++) {
        back_pos[j & 7] = *pos;
        back_si[j & 7] = *si;
        int32_t id = p->gen[j];
        size_t run_end = *si < n_spec ? spec[*si].off : n_text;
        if (eng_tok_is_special(t, id)) {
            if (*si >= n_spec || spec[*si].off != *pos || spec[*si].id != id) break;
            *pos += spec[*si].len;
            (*si)++;
            continue;
        }
        size_t n = 0;
        if (eng_tok_piece(t, id, piece, sizeof piece, &n) != 0 || n == 0 || n > sizeof piece) break;
        if (*pos + n > run_end || memcmp(text + *pos, piece, n) != 0) break;
        *pos += n;
    }
    /* a continuation byte is never the start of a character: back off (at
     * most 3 ids, each at least one byte) */
    int backed = 0;
    while (j > 0 && backed < 4 && *pos < n_text && ((uint8_t)text[*pos] & 0xC0) == 0x80) {
        j--;
        backed++;
        *pos = back_pos[j & 7];
        *si = back_si[j & 7];
    }
    if (j > 0 && *pos < n_text && ((uint8_t)text[*pos] & 0xC0) == 0x80) {
        *pos = pos0; /* text that is not UTF-8: splice none of the generated ids */
        *si = si0;
        j = 0;
    }
    return j;
}

static int ids_equal(const int32_t *a, int na, const int32_t *b, int nb) {
    return na == nb && (na == 0 || memcmp(a, b, (size_t)na * sizeof *a) == 0);
}

int eng_tmpl_render_turn(eng_tmpl_format f, const eng_tok *t, const eng_tmpl_msg *msgs, int n,
                         bool add_gen, const eng_tmpl_prior *prior, eng_tmpl_turn *out, char *err,
                         size_t errlen) {
    memset(out, 0, sizeof *out);
    tok_buf text = {0};
    eng_tmpl_special *spec = NULL;
    int n_spec = 0;
    int rc = tmpl_render_flat(f, t, msgs, n, add_gen, &text, &spec, &n_spec, err, errlen);
    if (rc) {
        free(text.v);
        free(spec);
        return rc;
    }
    return tmpl_turn_from_flat(t, msgs, n, prior, &text, spec, n_spec, out, err, errlen);
}

int tmpl_turn_from_flat(const eng_tok *t, const eng_tmpl_msg *msgs, int n,
                        const eng_tmpl_prior *prior, tok_buf *textp, eng_tmpl_special *spec,
                        int n_spec, eng_tmpl_turn *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    tok_buf text = *textp;
    tok_ids full = {0}, sp = {0};
    *textp = (tok_buf){0};
    int rc = tmpl_encode_flat(t, text.v, text.n, spec, n_spec, 0, &full, err, errlen);
    if (rc) goto fail;
    int k;
    if (prior && prior->n_prompt >= 0 && prior->n_gen >= 0 && (prior->ids || !prior->n_prompt) &&
        (prior->gen || !prior->n_gen) && prior_reply_matches(prior, msgs, n) &&
        (k = prior_text_matches(prior, text.v, text.n, spec, n_spec)) >= 0) {
        size_t pos = prior->n_text;
        int si = k;
        int j = walk_generated(t, prior, text.v, text.n, spec, n_spec, &pos, &si);
        for (int i = 0; i < prior->n_prompt && !rc; i++) rc = tok_ids_push(&sp, prior->ids[i]);
        for (int i = 0; i < j && !rc; i++) rc = tok_ids_push(&sp, prior->gen[i]);
        if (rc) {
            rc = pl_errf(err, errlen, ENG_TMPL_ENOMEM, "chat template: out of memory");
            goto fail;
        }
        rc = tmpl_encode_flat(t, text.v, text.n, spec, n_spec, pos, &sp, err, errlen);
        if (rc) goto fail;
        out->n_spliced = prior->n_prompt + j;
        out->n_gen_spliced = j;
        out->mismatch = !ids_equal(sp.v, sp.n, full.v, full.n);
        free(full.v);
        full = sp;
        sp = (tok_ids){0};
    }
    out->ids = full.v;
    out->n_ids = full.n;
    out->text = text.v;
    out->n_text = text.n;
    out->spec = spec;
    out->n_spec = n_spec;
    return 0;
fail:
    free(text.v);
    free(full.v);
    free(sp.v);
    free(spec);
    memset(out, 0, sizeof *out);
    return rc;
}
