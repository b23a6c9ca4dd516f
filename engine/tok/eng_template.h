/*
 * eng_template.h -- chat templates: a role/content message list to the text
 * and token ids a model was trained on.
 *
 * Purpose.  Models ship their chat format as a Jinja template in
 * tokenizer.chat_template.  A model's own template is rendered with
 * eng_jinja.h (ENG_TMPL_FILE, "The model file's own template" below);
 * besides, parley has built-in C renderers for the well-known formats
 * (named choices, and the fallback when the subset refuses a template),
 * each reproducing its original Jinja template byte for byte (tests compare against transformers'
 * apply_chat_template on the original template texts):
 *   llama2  Llama 2 chat: "<s>[INST] <<SYS>>\n{system}\n<</SYS>>\n\n{user} [/INST] {assistant} </s>";
 *           roles must alternate user/assistant/... after an optional
 *           system message (the original raises otherwise).
 *   llama3  Llama 3 instruct: <|begin_of_text|><|start_header_id|>{role}<|end_header_id|>\n\n{content|trim}<|eot_id|>...
 *           any roles, any order.
 *   gemma   Gemma 3: <bos><start_of_turn>user\n...<end_of_turn>\n; a system
 *           message is folded into the first user turn ("{system}\n\n{user}",
 *           the system text not trimmed), "assistant" is spelled "model",
 *           roles must alternate starting with user (the original raises
 *           otherwise).
 *   gemma2  Gemma 1 and 2: the same turns, but a system message is refused
 *           ("System role not supported"), as their template does.
 *   chatml  ChatML (Qwen-style without default system): <|im_start|>{role}\n{content}<|im_end|>\n
 *   smollm2 SmolLM2-Instruct's ChatML: as chatml, but a conversation whose
 *           first message is not a system message starts with the default
 *           "<|im_start|>system\nYou are a helpful AI assistant named SmolLM,
 *           trained by Hugging Face<|im_end|>\n".
 *   transcript  no special tokens, for base models that were never taught
 *           turns (Gemma 3 270M): BOS, "{system}\n\n", then "User: {content}\n"
 *           and "Assistant: {content}\n" (contents stripped), and "Assistant:"
 *           to generate; send the stop string "\nUser:" with each turn.
 *
 * Picking the format.  eng_tmpl_detect recognises a model's
 * tokenizer.chat_template by fingerprint: the text is normalised (whitespace
 * outside string literals and Jinja's trim dashes removed) and matched
 * against the normalised known template texts exactly; there is no guessing
 * from marker substrings.  A file with no template gets its architecture's
 * turn format: gemma3 -> gemma, gemma/gemma2 -> gemma2, qwen2/qwen3 ->
 * chatml; llama has none (Llama 2 and 3 share it).  An explicit name
 * overrides detection.  An unrecognised template, or no template on an
 * architecture without a default, and no override is an error whose message
 * names the override option ("chat_template" / --chat-template).
 *
 * Rendering to ids.  The renderer produces segments: template-owned special
 * tokens (encoded by id, looked up in the vocabulary) and text (template
 * text plus message content, encoded WITHOUT special-token parsing, so a
 * message containing "<|eot_id|>" stays text).  Adjacent text segments are
 * joined before encoding, so the ids equal HF's encoding of the rendered
 * text whenever no content contains a special-token string.
 *
 * Prefix stability (for the inter-turn KV cache).  Every message of every
 * built-in format ends with a special token (<|eot_id|>, <|im_end|>,
 * <end_of_turn>, </s>) and no merge crosses a special token, so the ids of
 * earlier turns never change when turns are appended.  With the generation
 * prompt (llama3, chatml, smollm2, gemma, gemma2) render(1..N, gen) is itself a
 * prefix of render(1..N+1): the prompt is exactly the start of the next
 * assistant turn.  Its trailing text ("\n\n" after <|end_header_id|>,
 * "assistant\n", "model\n") shares one text fragment with the reply; that is
 * stable when the pre-tokenizer splits there (byte-level vocabularies do:
 * tested in tests/py/test_tok_template.py), while an SPM vocabulary (no
 * pre-tokenizer) with a token spanning "\n" + reply text would merge across.
 * llama2 has no generation prompt: render(1..N) ends " [/INST]" and the
 * next render continues that same fragment with " {reply} </s>", so only
 * the ids up to the last special token are guaranteed.  After the stable
 * prefix what differs is the reply: the cache holds the ids the model
 * generated, the next render re-encodes the reply (trimmed by llama2,
 * llama3 and gemma), which may tokenise differently.
 * eng_tmpl_stable_prefix gives the always-safe length (up to the last
 * special token); eng_tok_common_prefix of the cached ids and the new render
 * gives the exact reusable length.  Changing the system message (gemma
 * folds it into the first user turn) invalidates everything after it.
 *
 * Splicing a conversation's ids (eng_tmpl_render_turn, template_splice.c).
 * Re-encoding the reply the model generated need not give back the ids it
 * generated (merges across the reply's edges, "\n"+"\n" vs "\n\n", a
 * trimmed trailing space), and every such difference is a prefix-cache
 * miss from that point on.  So a worker remembers, per conversation, the
 * previous turn (eng_tmpl_prior: its prompt's render as flat text with its
 * special tokens, the prompt ids it ran, the ids it generated and the reply
 * text it returned) and renders the next turn with it:
 *  - Rules.  The prior applies when (a) the new message list has more
 *    messages than the prior's and the first new one is an assistant
 *    message byte-identical to the prior's reply (an edited or regenerated
 *    reply does not apply), and (b) the new render's text starts with the
 *    prior's prompt text and has exactly the prior's special tokens, at the
 *    same offsets with the same ids, inside it (an edited earlier turn, a
 *    changed system message, another template, or a template that rewrites
 *    earlier turns, e.g. by stripping reasoning, does not apply).
 *  - Splice.  Then the ids are: the prior's prompt ids; then the longest run
 *    of its generated ids whose bytes continue the new text exactly (a
 *    special id only where the render has that same template-owned special
 *    token, a text id only inside one text run: so an end-of-turn marker is
 *    reused when the model generated it and the template puts it there, and
 *    the stop string's or a trimmed space's ids end the run); then the rest
 *    of the text encoded as eng_tmpl_render_ids would, from that byte on.
 *  - Guarantee.  The spliced ids always spell the new render exactly (same
 *    bytes, same template-owned special tokens, content never becomes a
 *    control token), and wherever full tokenisation is stable they ARE the
 *    full tokenisation; where it is not, they are what the KV was computed
 *    with (out->mismatch says so).  No prior, or one that does not apply,
 *    gives eng_tmpl_render_ids's ids.
 *
 * Threading.  Stateless functions over read-only data: thread-safe.
 *
 * Failure behaviour.  0 or a negative ENG_TMPL_E* code plus a message in
 * err.  Output buffers follow eng_tok.h's snprintf convention (ENG_TOK_ENOSPC
 * with the needed size in *n_out).
 */
#ifndef ENG_TEMPLATE_H
#define ENG_TEMPLATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "eng_tok.h"

struct eng_gguf;

#define ENG_TMPL_EINVAL (-1)   /* bad argument */
#define ENG_TMPL_ENOMEM (-2)   /* allocation failed */
#define ENG_TMPL_ENOSPC (-3)   /* output did not fit (== ENG_TOK_ENOSPC) */
#define ENG_TMPL_EUNKNOWN (-5) /* template not recognised / unknown name */
#define ENG_TMPL_EROLE (-6)    /* message roles not accepted by the format */
#define ENG_TMPL_EVOCAB (-7)   /* a special token the format needs is not in the vocabulary */

typedef enum eng_tmpl_format {
    ENG_TMPL_NONE = 0, /* not chosen */
    ENG_TMPL_LLAMA2 = 1,
    ENG_TMPL_LLAMA3 = 2,
    ENG_TMPL_GEMMA = 3,
    ENG_TMPL_CHATML = 4,
    ENG_TMPL_GEMMA2 = 5,     /* Gemma 1/2: as gemma, but a system message is an error */
    ENG_TMPL_TRANSCRIPT = 6, /* plain "User: / Assistant:" text for base (pretrained) models */
    ENG_TMPL_SMOLLM2 = 7,    /* ChatML with SmolLM2's default system message */
    ENG_TMPL_FILE = 8        /* the model file's own template, rendered (eng_tmpl_file) */
} eng_tmpl_format;

/* One chat message; strings need not be NUL-terminated.  The fields after
 * content are for the file's own template only (the built-in formats read
 * role and content): transformers' message fields for tool use; zero when
 * absent. */
typedef struct eng_tmpl_msg {
    const char *role;         /* "system", "user", "assistant" (others as the format allows) */
    size_t role_len;          /* bytes of role */
    const char *content;      /* message text (UTF-8, user-controlled) */
    size_t content_len;       /* bytes of content */
    const char *tool_calls;   /* assistant: its calls as a JSON array of {id, type, function:
                                 {name, arguments}}, or NULL for none */
    size_t tool_calls_len;    /* bytes of tool_calls */
    const char *tool_call_id; /* role tool: the call it answers, or NULL */
    size_t tool_call_id_len;  /* bytes of tool_call_id */
    const char *name;         /* role tool: the function that answered, or NULL */
    size_t name_len;          /* bytes of name */
} eng_tmpl_msg;

/* Format by name ("llama2", "llama3", "gemma", "gemma2", "chatml", "transcript", "smollm2").  ENG_TMPL_EUNKNOWN
 * lists the known names. */
int eng_tmpl_from_name(const char *name, eng_tmpl_format *out, char *err, size_t errlen);

/* Name of a format ("llama2", ...; "none" for ENG_TMPL_NONE). */
const char *eng_tmpl_name(eng_tmpl_format f);

/* Recognise a Jinja template text (see "Picking the format"). */
int eng_tmpl_recognise(const char *tmpl, size_t len, eng_tmpl_format *out, char *err,
                       size_t errlen);

/* Choose the format for a model: override (a name, or NULL/"" for none)
 * wins; otherwise recognise tokenizer.chat_template.  Errors name the
 * override option. */
int eng_tmpl_detect(const struct eng_gguf *g, const char *override, eng_tmpl_format *out, char *err,
                    size_t errlen);

/* How an assistant turn of a format ends, so generation stops there for
 * every client (not only the ones that send a stop string):
 *   token  the special token that closes the turn ("<|eot_id|>",
 *          "<|im_end|>", "<end_of_turn>"; llama2's is EOS, spelled NULL
 *          here: the vocabulary's EOS), or NULL;
 *   text   for formats without one (transcript), the text that starts the
 *          next turn ("\nUser:"), to be applied as a stop string; or NULL.
 * A worker adds token's id to its end-of-generation ids and text to each
 * turn's stop strings (tests/py/test_worker_e2e.py covers every format). */
typedef struct eng_tmpl_turn_end {
    const char *token; /* closing special token, or NULL */
    const char *text;  /* stop string, or NULL */
} eng_tmpl_turn_end;
eng_tmpl_turn_end eng_tmpl_end_of_turn(eng_tmpl_format f);

/* Check roles/order without rendering (ENG_TMPL_EROLE with a message). */
int eng_tmpl_validate(eng_tmpl_format f, const eng_tmpl_msg *msgs, int n, char *err, size_t errlen);

/*
 * Render to text, as the original template with bos_token/eos_token taken
 * from the vocabulary (t may be NULL: then the format's usual spellings).
 * add_gen: append the generation prompt (ignored by llama2, which has none).
 * Writes up to cap bytes plus a NUL when room remains; *n_out = text bytes.
 */
int eng_tmpl_render_text(eng_tmpl_format f, const eng_tok *t, const eng_tmpl_msg *msgs, int n,
                         bool add_gen, char *out, size_t cap, size_t *n_out, char *err,
                         size_t errlen);

/* Render straight to ids (see "Rendering to ids").  Up to cap ids;
 * *n_out = ids needed. */
int eng_tmpl_render_ids(eng_tmpl_format f, const eng_tok *t, const eng_tmpl_msg *msgs, int n,
                        bool add_gen, int32_t *ids, int cap, int *n_out, char *err, size_t errlen);

/*
 * Length of the prefix of ids (a render by eng_tmpl_render_ids) that every
 * continuation of the conversation renders identically: the position right
 * after the last special token (0 when there is none).  Safe for every
 * built-in format (see "Prefix stability"); t is the tokenizer that
 * rendered ids.
 */
int eng_tmpl_stable_prefix(eng_tmpl_format f, const eng_tok *t, const int32_t *ids, int n_ids);

/* A template-owned special token in a flat render's text. */
typedef struct eng_tmpl_special {
    uint32_t off; /* byte offset of its spelling in the text */
    uint32_t len; /* bytes of its spelling */
    int32_t id;   /* its id */
} eng_tmpl_special;

/* What a worker remembers of a conversation's previous turn (see
 * "Splicing"); every pointer is the caller's and only read. */
typedef struct eng_tmpl_prior {
    int n_msgs;                   /* messages its prompt rendered */
    const char *text;             /* its prompt's render (eng_tmpl_turn.text) */
    size_t n_text;                /* bytes of text */
    const eng_tmpl_special *spec; /* its special tokens (eng_tmpl_turn.spec) */
    int n_spec;                   /* entries of spec */
    const int32_t *ids;           /* the prompt ids it ran */
    int n_prompt;                 /* entries of ids */
    const int32_t *gen;           /* the ids generated after them (stop token included) */
    int n_gen;                    /* entries of gen */
    const char *reply;            /* the reply text returned for it */
    size_t n_reply;               /* bytes of reply */
} eng_tmpl_prior;

/* A rendered turn (eng_tmpl_render_turn); free with eng_tmpl_turn_free. */
typedef struct eng_tmpl_turn {
    int32_t *ids;           /* the prompt ids to run (malloc'd) */
    int n_ids;              /* entries of ids */
    char *text;             /* the render as flat text, specials spelled (malloc'd) */
    size_t n_text;          /* bytes of text */
    eng_tmpl_special *spec; /* its special tokens in text order (malloc'd, NULL if none) */
    int n_spec;             /* entries of spec */
    int n_spliced;          /* leading ids taken from the prior (0: the prior did not apply) */
    int n_gen_spliced;      /* of which the prior's generated ids */
    int mismatch;           /* 1: the prior applied and full re-tokenisation gives other ids */
} eng_tmpl_turn;

/* Render msgs (add_gen as eng_tmpl_render_ids) for the next turn of a
 * conversation whose previous turn is prior (NULL: none), splicing its ids
 * where the rules allow (see "Splicing").  Also returns the render's flat
 * text and special tokens, which the next turn's prior needs.  Errors as
 * eng_tmpl_render_ids; on error *out holds nothing. */
int eng_tmpl_render_turn(eng_tmpl_format f, const eng_tok *t, const eng_tmpl_msg *msgs, int n,
                         bool add_gen, const eng_tmpl_prior *prior, eng_tmpl_turn *out, char *err,
                         size_t errlen);

/* Free what a render_turn allocated and zero *o (NULL is fine). */
void eng_tmpl_turn_free(eng_tmpl_turn *o);

/*
 * The model file's own template (template_file.c).  tokenizer.chat_template
 * compiled with eng_jinja.h and rendered per turn with messages,
 * add_generation_prompt, bos_token, eos_token and tools (a JSON value or
 * null) as its variables.
 *
 * Variables (as transformers' apply_chat_template passes them): messages
 * as [{role, content}] plus, where the message has them, tool_calls (the
 * JSON array as given), tool_call_id and name; tools the JSON value given (OpenAI's array of {"type":
 * "function", "function": {name, description, parameters}}) or null.
 *
 * Rendering to ids.  Template-owned special tokens are told apart from
 * message content by escaping: before rendering, every CONTROL/UNKNOWN
 * token spelling inside any string of the messages or the tools (role,
 * content, call arguments, tool descriptions...) gets a 0x01 byte after
 * its first byte (a 0x01 in content is doubled), so the render's text
 * contains special spellings only where the template wrote them; the text is
 * split on them (leftmost-longest, as the encoder does) and unescaped.  The
 * result is a flat render as the built-in formats give (text + specials),
 * encoded and spliced with the same code (tmpl_encode_flat, render_turn's
 * rules).  A 0x01 byte that the template itself writes is dropped.  A
 * string the template writes through tojson (tool definitions, call
 * arguments) shows an escaped spelling as "\u0001" text: it stays text,
 * as it must, though not jinja2's text (only strings with special
 * spellings, which no honest tool definition has).
 *
 * End of turn: the first special token after the assistant content in a
 * render of [user, assistant] (whitespace between allowed), else the
 * vocabulary's EOS.
 *
 * Choosing (eng_tmpl_choose): an explicit name (model.chat_template /
 * --chat-template) wins; else a file with tokenizer.chat_template gets it
 * rendered (ENG_TMPL_FILE) when the subset compiles it, and when it does
 * not, out->note says what was refused and the choice falls back to the
 * built-in format the text is recognised as, else the architecture's format
 * (eng_tmpl_detect's rules).  out->family is the built-in format the
 * template corresponds to (recognised text, else the architecture's;
 * ENG_TMPL_NONE when neither): tool-call formats stay per family.
 */
typedef struct eng_tmpl_file eng_tmpl_file;

typedef struct eng_tmpl_choice {
    eng_tmpl_format fmt;    /* what renders: a built-in format or ENG_TMPL_FILE */
    eng_tmpl_format family; /* the built-in format of its family (tools), or ENG_TMPL_NONE */
    eng_tmpl_file *file;    /* the compiled file template when fmt == ENG_TMPL_FILE (owned) */
    char note[512];         /* why the file's template is not rendered ("" when it is or none) */
} eng_tmpl_choice;

int eng_tmpl_choose(const struct eng_gguf *g, const eng_tok *t, const char *override,
                    eng_tmpl_choice *out, char *err, size_t errlen);
void eng_tmpl_choice_free(eng_tmpl_choice *c);

/* Compile a template text for tokenizer t (which must outlive it). */
int eng_tmpl_file_compile(const char *src, size_t len, const eng_tok *t, eng_tmpl_file **out,
                          char *err, size_t errlen);
void eng_tmpl_file_free(eng_tmpl_file *f);

/* Tools.  Whether the template writes tool use itself, found at compile
 * time by probes (as llama.cpp's minja does): a render of [user] with one
 * tool shows the tool's name, and [user, assistant with a call, tool
 * result, assistant, user] renders and shows the result.  Templates that
 * pass (Qwen 2.5/3, Llama 3.1/3.2, Hermes 3, Mistral, Granite, SmolLM3,
 * functionary...) get the request's tools as `tools` and calls and results
 * as message fields; one that does not (Llama 3, Gemma, SmolLM2...) would
 * drop them silently, so a caller writes them into the messages in
 * parley's own text instead (the worker: wk_tools.h).
 * eng_tmpl_file_tool_args_string: the template shows a call's arguments
 * only when they are the JSON string (functionary), not the decoded
 * object the others want. */
bool eng_tmpl_file_renders_tools(const eng_tmpl_file *f);
bool eng_tmpl_file_tool_args_string(const eng_tmpl_file *f);

/* The template's end of turn (see above); token is a vocabulary spelling. */
eng_tmpl_turn_end eng_tmpl_file_end_of_turn(const eng_tmpl_file *f);

/* As eng_tmpl_render_turn with the file template; tools_json is a JSON
 * value for the template's `tools` (NULL: null).  A template error
 * (raise_exception, a run-time error) is ENG_TMPL_EROLE with its message. */
int eng_tmpl_file_render_turn(const eng_tmpl_file *f, const eng_tmpl_msg *msgs, int n, bool add_gen,
                              const char *tools_json, const eng_tmpl_prior *prior,
                              eng_tmpl_turn *out, char *err, size_t errlen);

/* The JSON object of variables a render of the file template gets (see
 * "Variables"); t NULL: no tokenizer, so no special spellings are escaped
 * and bos / eos are the given strings (NULL: "").  For tests that check
 * the variables against jinja2's render.  *out malloc'd, NUL-terminated;
 * a badly formed string inside tools_json or tool_calls is ENG_TMPL_EINVAL;
 * other malformed JSON is copied and refused by the render, which parses
 * the context (an error, as any template error). */
int eng_tmpl_file_context(const eng_tok *t, const eng_tmpl_msg *msgs, int n, bool add_gen,
                          const char *tools_json, const char *bos, const char *eos, char **out,
                          size_t *n_out, char *err, size_t errlen);

/* Render text (specials spelled), as eng_tmpl_render_text; *out malloc'd. */
int eng_tmpl_file_render_text(const eng_tmpl_file *f, const eng_tmpl_msg *msgs, int n, bool add_gen,
                              const char *tools_json, char **out, size_t *n_out, char *err,
                              size_t errlen);

#endif
