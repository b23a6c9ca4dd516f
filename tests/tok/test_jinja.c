/*
 * test_jinja.c -- unit tests of eng_jinja.h: the sandbox (hostile
 * templates end in ENG_JINJA_ELIMIT, never a hang or crash), the error
 * codes, and semantics the chat-template corpus
 * (tests/py/test_jinja_templates.py) does not pin down on its own.
 */
#define PTEST_MAIN
#include "eng_jinja.h"
#include "pl_err.h"
#include "ptest.h"

/* Render src over ctx (a JSON object); returns the code, *out the text or the message. */
static int render(const char *src, const char *ctx, const eng_jinja_limits *lim, char *buf,
                  size_t cap) {
    eng_jinja *t = NULL;
    char err[PL_ERR_LEN], *out = NULL;
    size_t n = 0;
    int rc = eng_jinja_compile(src, strlen(src), &t, err, sizeof err);
    if (!rc) rc = eng_jinja_render(t, ctx, strlen(ctx), lim, &out, &n, err, sizeof err);
    snprintf(buf, cap, "%s", rc ? err : out);
    free(out);
    eng_jinja_free(t);
    return rc;
}

#define R(src, want)                                              \
    do {                                                          \
        char got_[4096];                                          \
        PT_EQ_INT(render(src, "{}", NULL, got_, sizeof got_), 0); \
        PT_EQ_STR(got_, want);                                    \
    } while (0)

PT_TEST(jinja_expressions) {
    R("{{ 1 + 2 * 3 }}|{{ 7 // 2 }}|{{ -7 // 2 }}|{{ 7 % 3 }}|{{ 2 ** 10 }}|{{ 1 / 2 }}",
      "7|3|-4|1|1024|0.5");
    R("{{ 'a' ~ 1 ~ none }}|{{ [1, 'x', none, true] }}|{{ {'k': 1.5} }}",
      "a1None|[1, 'x', None, True]|{'k': 1.5}");
    R("{{ 'abc'[1:] }}{{ 'abc'[::-1] }}{{ [1,2,3][-1] }}", "bccba3");
    R("{{ 'x' if false }}|{{ 'y' if 0 else 'z' }}|{{ 2 in [1,2] }}|{{ 'b' not in 'abc' }}",
      "|z|True|False");
    R("{{ '  a b  '.strip().split(' ') }}|{{ 'a,b'.split(',', 1) }}", "['a', 'b']|['a', 'b']");
    R("{{ {'a': 1} | tojson }}|{{ [1, 'é\"'] | tojson(indent=2) }}",
      "{\"a\": 1}|[\n  1,\n  \"é\\\"\"\n]");
    R("{{ 1e20 }} {{ 0.1 + 0.2 }} {{ 1.0 }} {{ 1e-5 }}", "1e+20 0.30000000000000004 1.0 1e-05");
}

PT_TEST(jinja_statements) {
    R("{% for x in [1,2,3] if x != 2 %}{{ loop.index }}/{{ loop.length }}{{ ',' if not loop.last }}{% endfor %}",
      "1/2,2/2");
    R("{% set ns = namespace(n=0) %}{% for i in range(3) %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}",
      "3");
    R("{% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{% endfor %}{{ x }}", "1");
    R("{% macro m(a, b='d') %}[{{ a }}{{ b }}]{% endmacro %}{{ m(1) }}{{ m(2, b=3) }}", "[1d][23]");
    R("{% set b %}in{{ 1 }}{% endset %}{{ b }}|{% filter upper %}up{% endfilter %}", "in1|UP");
    R("{% for i in range(5) %}{% if i == 3 %}{% break %}{% endif %}{% if i == 1 %}{% continue %}{% endif %}{{ i }}{% endfor %}",
      "02");
    R("a\n  {% if true %}\n  b\n  {% endif %}\nc\n", "a\n  b\nc");
    R("{{- ' x ' -}}  {# c #} {{ 'y' }}", " x  y");
}

PT_TEST(jinja_errors) {
    char buf[512];
    PT_EQ_INT(render("{{ raise_exception('no ' ~ 1) }}", "{}", NULL, buf, sizeof buf),
              ENG_JINJA_ERAISED);
    PT_EQ_STR(buf, "no 1");
    PT_EQ_INT(render("{{ 'a' + none }}", "{}", NULL, buf, sizeof buf), ENG_JINJA_ERENDER);
    PT_EQ_INT(render("{% for x in none %}{% endfor %}", "{}", NULL, buf, sizeof buf),
              ENG_JINJA_ERENDER);
    PT_EQ_INT(render("{{ x.y }}", "{}", NULL, buf, sizeof buf), ENG_JINJA_ERENDER);
    PT_EQ_INT(render("{% set l = [] %}{{ l.append(1) }}", "{}", NULL, buf, sizeof buf),
              ENG_JINJA_ERENDER);
    PT_EQ_INT(render("{% if %}", "{}", NULL, buf, sizeof buf), ENG_JINJA_ESYNTAX);
    PT_EQ_INT(render("{% for x in y %}", "{}", NULL, buf, sizeof buf), ENG_JINJA_ESYNTAX);
    /* jinja2 takes `if` as the test's argument here: a syntax error there too */
    PT_EQ_INT(render("{{ x is defined if y else z }}", "{}", NULL, buf, sizeof buf),
              ENG_JINJA_ESYNTAX);
    PT_EQ_INT(render("{% include 'x' %}", "{}", NULL, buf, sizeof buf), ENG_JINJA_EUNSUPPORTED);
    PT_ASSERT(strstr(buf, "include") != NULL);
    PT_EQ_INT(render("{{ x | frobnicate }}", "{}", NULL, buf, sizeof buf), ENG_JINJA_EUNSUPPORTED);
    PT_EQ_INT(render("{{ 1 }}", "[1]", NULL, buf, sizeof buf), ENG_JINJA_EINVAL);
}

PT_TEST(jinja_sandbox_limits) {
    char buf[512];
    eng_jinja_limits lim = {.max_steps = 100000, .max_output = 1 << 16, .max_memory = 1 << 24};
    /* a loop that never ends within the budget */
    PT_EQ_INT(render("{% for i in range(1000000000) %}{% endfor %}", "{}", &lim, buf, sizeof buf),
              ENG_JINJA_ELIMIT);
    /* output growth */
    PT_EQ_INT(render("{% for i in range(100000) %}xxxxxxxxxxxxxxxxxxxx{% endfor %}", "{}", &lim,
                     buf, sizeof buf),
              ENG_JINJA_ELIMIT);
    PT_EQ_INT(render("{{ 'x' * 100000000 }}", "{}", &lim, buf, sizeof buf), ENG_JINJA_ELIMIT);
    /* unbounded recursion */
    PT_EQ_INT(render("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "{}", &lim, buf,
                     sizeof buf),
              ENG_JINJA_ELIMIT);
    /* memory: a doubling string */
    PT_EQ_INT(
        render(
            "{% set ns = namespace(s='xxxxxxxx') %}{% for i in range(40) %}{% set ns.s = ns.s + ns.s %}{% endfor %}",
            "{}", &lim, buf, sizeof buf),
        ENG_JINJA_ELIMIT);
    /* deep nesting is refused when compiled */
    char deep[4096];
    size_t n = 0;
    n += (size_t)snprintf(deep + n, sizeof deep - n, "{{ ");
    for (int i = 0; i < 1000; i++) deep[n++] = '(';
    deep[n++] = '1';
    for (int i = 0; i < 1000; i++) deep[n++] = ')';
    snprintf(deep + n, sizeof deep - n, " }}");
    PT_EQ_INT(render(deep, "{}", &lim, buf, sizeof buf), ENG_JINJA_ELIMIT);

    /* nested tags, a long left-deep chain, a deeply nested value */
    static char big[200000];
    n = 0;
    for (int i = 0; i < 5000; i++)
        n += (size_t)snprintf(big + n, sizeof big - n, "{%% if true %%}");
    PT_EQ_INT(render(big, "{}", &lim, buf, sizeof buf), ENG_JINJA_ELIMIT);
    n = (size_t)snprintf(big, sizeof big, "{{ 1");
    for (int i = 0; i < 20000; i++) n += (size_t)snprintf(big + n, sizeof big - n, "+1");
    snprintf(big + n, sizeof big - n, " }}");
    PT_EQ_INT(render(big, "{}", &lim, buf, sizeof buf), ENG_JINJA_ELIMIT);
    PT_EQ_INT(
        render(
            "{% set ns = namespace(x=1) %}{% for i in range(2000) %}{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x }}",
            "{}", NULL, buf, sizeof buf),
        ENG_JINJA_ELIMIT);
}
