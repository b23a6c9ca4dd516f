/*
 * wk_tools.h -- tool calls: OpenAI's `tools` / `tool_choice` of a ChatTurn
 * (spec 1.2, JSON text), shown to the model in its chat template's tool
 * format, and the calls read back from what it generated.
 *
 * Purpose.  A turn with tools lets the model answer with calls of the
 * given functions instead of (or besides) text.  How the model is told
 * about the tools and how it writes a call depends on the format its chat
 * template was trained on (WK_TOOLS_TAGS / WK_TOOLS_LLAMA3 below); parley
 * renders the tools, the assistant messages' earlier calls and the `tool`
 * messages' results into ordinary messages of that format before the
 * template runs, and parses the calls out of the reply after it.
 *
 * tool_choice:
 *   none      the tools are not shown and no call is made (plain text).
 *   auto      the tools are shown; the model chooses between text and calls
 *             in its format; calls found in the reply are returned, the text
 *             outside them is the reply's content.  A streamed reply holds
 *             back its text from where a call may begin.
 *   required  the tools are shown and the reply is constrained (a JSON
 *   {name}    schema compiled by the constraint engine) to calls of the
 *             given functions -- of the one named: {"name": ..., "arguments":
 *             {...}} with the function's own parameters schema (llama3:
 *             "parameters", as Llama 3.1 writes it), or with
 *             parallel_tool_calls an array of 1..64 of them.  Nothing is
 *             streamed; the calls arrive with the TurnResult.
 *
 * Formats (by chat template):
 *   WK_TOOLS_TAGS (chatml = Qwen 2.5's, and parley's convention for gemma,
 *     gemma2, transcript and llama2, whose templates define none): the
 *     tools in the system message as Qwen 2.5's template writes them
 *     ("# Tools ... <tools>{json per line}</tools> ... <tool_call>..."; on
 *     gemma the template folds the system text into the first user turn,
 *     on gemma2 it goes to the first user message), a call as
 *     "<tool_call>\n{"name": ..., "arguments": ...}\n</tool_call>", results
 *     as a user message "<tool_response>\n...\n</tool_response>"
 *     (consecutive results in one message, as Qwen's template does).
 *   WK_TOOLS_LLAMA3 (Llama 3.1's default, tools in the first user message):
 *     "Given the following functions, please respond with a JSON for a
 *     function call ..." and the tools as indented JSON before the user's
 *     text; a call as {"name": ..., "parameters": ...}; results as role
 *     "ipython".  A reply that is such a JSON object (or several separated
 *     by ';') is a call.
 *
 * The file's template (ENG_TMPL_FILE, wk_tools_file.c).  A model whose own
 * tokenizer.chat_template is rendered gets no parley text: its template
 * receives the tools as its `tools` variable (the turn's array as sent,
 * when tool_choice is not none), the assistant messages' calls as their
 * `tool_calls` (each call's arguments string decoded to its JSON object, as
 * vLLM and llama.cpp pass them; content "" when the message has only
 * calls: the wire cannot tell null from "", and vLLM passes "" too) and the results as role "tool" messages with tool_call_id and the
 * called function's name (found by that id among the earlier calls), as
 * transformers' apply_chat_template documents them.  That is for a
 * template that writes tool use (eng_tmpl_file_renders_tools: Qwen 2.5/3,
 * Llama 3.1/3.2, Hermes, Mistral...); one that does not (Llama 3, Gemma,
 * SmolLM2) would drop the tools silently, so it gets them written in the
 * family's format by wk_tools_render, as a built-in template does, and
 * renders those messages.  Reading calls back
 * stays per family (the format of the built-in template the file's is
 * recognised as, else of its architecture).
 *
 * Ownership.  wk_tools owns its parsed JSON; rendered messages and parsed
 * calls are malloc'd and freed with their own free functions.
 *
 * Failure behaviour.  Parsing a turn's tools returns 0 or an sch_err
 * (SCH_E_BAD_CONSTRAINT for tools / tool_choice that are not OpenAI's
 * shape, with a message naming params.tools or params.tool_choice;
 * SCH_E_NOMEM).  Reading calls from a reply never fails: text that is not
 * a well-formed call of a known function stays text.
 */
#ifndef WK_TOOLS_H
#define WK_TOOLS_H

#include <jansson.h>
#include <stddef.h>

#include "eng_template.h"
#include "sch.h"

/* tool_choice. */
typedef enum wk_tool_mode {
    WK_TOOLS_OFF = 0,  /* no tools, or tool_choice none */
    WK_TOOLS_AUTO,     /* the model chooses */
    WK_TOOLS_REQUIRED, /* a call of any of the tools */
    WK_TOOLS_NAMED     /* a call of the named function */
} wk_tool_mode;

/* How a chat template writes tools and calls. */
typedef enum wk_tool_format {
    WK_TOOLS_TAGS = 0, /* <tools> / <tool_call> / <tool_response> (Qwen 2.5; parley's default) */
    WK_TOOLS_LLAMA3    /* Llama 3.1: JSON {"name", "parameters"}, role ipython */
} wk_tool_format;

/* A turn's tools. */
typedef struct wk_tools {
    wk_tool_mode mode;  /* tool_choice */
    wk_tool_format fmt; /* the chat template's tool format */
    json_t *tools;      /* the tools array (owned; NULL when off) */
    const char *named;  /* WK_TOOLS_NAMED: the function (in tools) */
    int parallel;       /* parallel_tool_calls */
} wk_tools;

/* The tool format of a chat template. */
wk_tool_format wk_tools_format_of(eng_tmpl_format f);

/* Read params.tools / tool_choice / parallel_tool_calls into *t (mode OFF
 * when there are no tools or tool_choice is none).  0 or an sch_err with
 * msg. */
int wk_tools_parse(const sch_params *p, wk_tool_format fmt, wk_tools *t, char *msg, size_t msglen);
void wk_tools_free(wk_tools *t);

/* REQUIRED / NAMED: the JSON schema of the reply (malloc'd text), or NULL
 * out of memory. */
char *wk_tools_schema(const wk_tools *t);

/* Messages rendered for the template: the turn's messages with the tools
 * shown and earlier calls and results written in the format (strings
 * malloc'd in the set).  0 or an sch_err with msg (a tool message
 * without tool_call_id is fine; tool_calls that are not OpenAI's array:
 * SCH_E_BAD_VALUE naming the message). */
typedef struct wk_tool_msgs {
    eng_tmpl_msg *m; /* n messages */
    int n;           /* entries */
    char **owned;    /* strings the messages point into */
    int n_owned;     /* entries */
} wk_tool_msgs;
int wk_tools_render(const wk_tools *t, eng_tmpl_format f, const sch_message *msgs, size_t n,
                    wk_tool_msgs *out, char *msg, size_t msglen);
void wk_tool_msgs_free(wk_tool_msgs *m);

/* The file's template: the turn's messages with their tool fields (see
 * "The file's template"; no parley text), and *tools_json the `tools`
 * variable (malloc'd JSON text, NULL when tool_choice is none or there are
 * no tools).  decode_args: calls' arguments decoded to their object (0:
 * kept the JSON string, for a template that wants it so:
 * eng_tmpl_file_tool_args_string).  Errors as wk_tools_render. */
int wk_tools_file_msgs(const wk_tools *t, const sch_message *msgs, size_t n, int decode_args,
                       wk_tool_msgs *out, char **tools_json, char *msg, size_t msglen);

/* The calls of a reply (text, len bytes) and the text outside them.  For
 * REQUIRED / NAMED the whole reply is the constrained JSON; for AUTO the
 * format's markup is searched.  Call ids are "call_" + 16 hex digits of
 * FNV-1a over id_seed and the call's position.  *n_calls = 0 (and *content
 * the whole text) when there is no well-formed call. */
typedef struct wk_calls {
    sch_tool_call *calls; /* n entries (strings in the same allocation set) */
    size_t n;             /* calls */
    char *content;        /* the reply's text outside the calls (trimmed) */
    size_t content_len;   /* bytes */
    char **owned;         /* strings the calls point into */
    size_t n_owned;       /* entries */
} wk_calls;
int wk_tools_read(const wk_tools *t, const char *text, size_t len, const char *id_seed, int choice,
                  wk_calls *out);
void wk_calls_free(wk_calls *c);

/* AUTO streaming: bytes of text (len) that may be streamed as content now:
 * up to where a call begins or may begin (a partial opening tag at the
 * end, a reply that starts like a JSON call). */
size_t wk_tools_stream_safe(const wk_tools *t, const char *text, size_t len);

#endif
