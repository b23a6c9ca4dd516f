/*
 * eng_jinja.h -- a sandboxed interpreter for the subset of Jinja that
 * HuggingFace chat templates use.
 *
 * Purpose.  eng_template.h renders the well-known chat formats with C code
 * written for each.  Models keep shipping new templates; this module runs a
 * template's own text instead, with the semantics transformers'
 * apply_chat_template gives it (jinja2's ImmutableSandboxedEnvironment with
 * trim_blocks=True, lstrip_blocks=True, loopcontrols and the
 * {% generation %} tag; `tojson` is json.dumps(ensure_ascii=False);
 * globals raise_exception(msg) and strftime_now(fmt)).  The reference is
 * jinja2 itself: tests/py/test_jinja_templates.py renders 42 real templates
 * over 10 conversations and compares byte for byte with jinja2's output.
 *
 * The subset.  Statements: if/elif/else, for (tuple targets, `if` filter,
 * else, loop.index/index0/revindex/revindex0/first/last/length/previtem/
 * nextitem/cycle(), break/continue), set (names, tuples, namespace attributes,
 * block set), macro (positional/keyword/default params, `caller` via
 * call blocks), filter blocks, generation, raw, comments, whitespace control
 * ({%- -%} {{- -}} {#- -#}).  Expressions: literals (str, int, float, list,
 * tuple, dict, true/false/none in both spellings), attribute and item
 * access, slices, calls with keyword arguments, filters with arguments,
 * `is [not]` tests, `in`/`not in`, `~`, + - * / // % **, printf-style
 * `str % args`, chained comparisons, and/or/not, inline if/else.  The filters, tests and str/list/dict
 * methods are those listed in docs/chat-templates.md.  Anything else is
 * refused when the template is compiled (ENG_JINJA_EUNSUPPORTED naming the
 * construct) or when it is reached (a filter or method name unknown at run
 * time), never guessed at.
 *
 * jinja2 behaviours copied: one trailing newline of the source is dropped;
 * "\r\n" and "\r" in the source become "\n" (data is never touched); None
 * prints as "None"; an undefined value prints empty but fails on attribute
 * access or call; `+` of a str and a non-str fails as Python does; values
 * print as Python's str() (lists and dicts with repr'd items, floats as
 * repr); a |safe string is a Markup (`+` HTML-escapes the other operand);
 * trim/strip/split use str.isspace and upper/lower Python's Unicode case
 * tables.  Known differences are listed in docs/chat-templates.md.
 *
 * Sandbox.  A template is untrusted input.  Rendering is bounded by the
 * limits below: evaluation steps (every expression node and loop iteration
 * counts one), output bytes, render memory and recursion depth (macro calls
 * and nested expressions).  Exceeding one is ENG_JINJA_ELIMIT, never a hang
 * or a crash; nothing reaches the host (no attribute of a host object, no
 * file, no clock but strftime_now).  The library never exits or aborts.
 *
 * Threading.  A compiled template is read-only while rendering (each
 * render has its own arena, scopes and output), so one eng_jinja may be
 * rendered by several threads at once; compile and free are not
 * concurrent with renders of the same template.
 *
 * Errors.  0 or a negative ENG_JINJA_E* code (PL_ERR_TMPL's range, after
 * eng_template.h's codes) and a message in err (pl_errf convention).  When
 * the template calls raise_exception(msg), the code is ENG_JINJA_ERAISED and
 * err is exactly msg (cut to errlen).
 */
#ifndef ENG_JINJA_H
#define ENG_JINJA_H
#include <stddef.h>
#include <stdint.h>

#define ENG_JINJA_EINVAL (-1)        /* bad argument (== ENG_TMPL_EINVAL) */
#define ENG_JINJA_ENOMEM (-2)        /* allocation failed (== ENG_TMPL_ENOMEM) */
#define ENG_JINJA_ESYNTAX (-10)      /* the template does not parse */
#define ENG_JINJA_EUNSUPPORTED (-11) /* a construct outside the subset */
#define ENG_JINJA_ERENDER (-12)      /* a run-time error jinja2 also raises (types, undefined) */
#define ENG_JINJA_ERAISED (-13)      /* the template called raise_exception(msg) */
#define ENG_JINJA_ELIMIT (-14)       /* a sandbox limit was reached */

typedef struct {
    uint64_t max_steps; /* evaluation steps; 0 = 10,000,000 */
    size_t max_output;  /* bytes of output; 0 = 4 MiB */
    size_t max_memory;  /* bytes of render memory; 0 = 64 MiB */
    int max_depth;      /* recursion depth; 0 = 64 */
    int64_t now;        /* strftime_now's clock, seconds since the epoch (UTC);
                           * 0 = the real clock (tests pin it) */
} eng_jinja_limits;

typedef struct eng_jinja eng_jinja;

/* Compile template text (UTF-8, len bytes).  *out is freed with
 * eng_jinja_free.  ENG_JINJA_ESYNTAX / ENG_JINJA_EUNSUPPORTED name the line
 * and the construct. */
int eng_jinja_compile(const char *src, size_t len, eng_jinja **out, char *err, size_t errlen);
void eng_jinja_free(eng_jinja *t);

/* Render with the variables of ctx_json, a JSON object (e.g. {"messages":
 * [...], "tools": null, "add_generation_prompt": true, "bos_token": "<s>"}).
 * On success *out is a malloc'd NUL-terminated string of *outlen bytes (the
 * caller frees it).  lim may be NULL for the defaults. */
int eng_jinja_render(const eng_jinja *t, const char *ctx_json, size_t ctx_len,
                     const eng_jinja_limits *lim, char **out, size_t *outlen, char *err,
                     size_t errlen);

#endif
