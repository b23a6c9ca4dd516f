/*
 * sch.h -- parley's wire format: msgpack codec for the four record kinds.
 *
 * Purpose.  Every record parley reads or writes on Kafka is one msgpack map
 * with an integer field `v` (the schema's major version).  This header is the
 * C view of those records: ChatTurn (sch_turn, clients -> worker),
 * TokenChunk (sch_chunk, worker -> streaming readers), TurnResult
 * (sch_result, worker -> clients) and DeadLetter (sch_dead, worker -> DLQ).
 * The normative spec is schemas/README.md; this codec implements it.
 *
 * Data layout.  Strings are sch_str (pointer + byte length).  A decoded
 * string is also NUL-terminated (ptr[len] == 0) for convenience, but text may
 * legally contain U+0000, so always use len.  An optional field that is
 * absent has ptr == NULL.  Arrays are pointer + count (NULL/0 when empty).
 *
 * Ownership.  A decoder copies everything it keeps into one arena owned by
 * the output struct (the field zone_), so a decoded record outlives the
 * input buffer (e.g. the Kafka message); sch_X_free() releases it in one
 * call.  msgpack-c's parse itself is zero-copy (its objects point into the
 * input) and is discarded before the decoder returns.  Structs built by the
 * caller for encoding have zone_ == NULL and point at caller memory, which
 * the encoder only reads.
 *
 * Failure behaviour.  Every function returns 0 (SCH_OK) or a negative
 * sch_err code and writes a one-line ASCII message (input bytes quoted with
 * \xNN escapes, so it is safe to log and to put in a DeadLetter `reason`)
 * into err[errlen] when err != NULL.  A failed decode leaves the output
 * struct zeroed with nothing allocated; a failed encode leaves out->len == 0.
 * Decoders treat their input as hostile: a structural pre-scan bounds depth,
 * object count and element counts before msgpack-c allocates anything, and
 * every limit in sch_limits has its own error code.
 *
 * Threading.  No global state; functions are reentrant.  A struct or buffer
 * must not be used from two threads at once.
 */
#ifndef PARLEY_SCH_H
#define PARLEY_SCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct msgpack_zone;

/* Schema major version written in `v` and accepted by the decoders. */
#define SCH_VERSION 1
/* Spec revision (major.minor) implemented; minors only add optional fields. */
#define SCH_VERSION_STRING "1.4"
/* Kafka header names and the content type every parley record carries. */
#define SCH_HEADER_CONTENT_TYPE "content-type"
#define SCH_HEADER_TRACEPARENT "traceparent"
#define SCH_CONTENT_TYPE "application/x-parley+msgpack; v=1"
/* Content type of a ChatTurn written as JSON (sch_turn_decode_json), and of
 * the TurnResults / TokenChunks a worker writes for a turn whose `accept`
 * header asks for JSON (SCH_HEADER_ACCEPT). */
#define SCH_CONTENT_TYPE_JSON "application/json"
#define SCH_HEADER_ACCEPT "accept"
/* Content type of a CancelTurn (1.4): the header is what tells it from a
 * ChatTurn on the turns topic, so a cancel must carry it. */
#define SCH_CONTENT_TYPE_CANCEL "application/x-parley-cancel+msgpack; v=1"
/* Namespace used when a ChatTurn has none. */
#define SCH_DEFAULT_NAMESPACE "default"
/* Hard ceiling for sch_limits.max_depth (msgpack-c's parser stack). */
#define SCH_MAX_DEPTH_CEILING 32
/* Schema maps may hold at most this many entries (known + unknown). */
#define SCH_MAX_MAP_FIELDS 64
/* Map keys (field names) are str of 1..SCH_MAX_KEY_BYTES bytes. */
#define SCH_MAX_KEY_BYTES 64
/* params.n: choices per turn at most (1.2). */
#define SCH_MAX_N 16
/* params.logprobs: alternatives per token at most (1.2). */
#define SCH_MAX_TOP_LOGPROBS 20
/* Tool calls in one reply (TurnResult / choice) at most (1.2). */
#define SCH_MAX_TOOL_CALLS 64
/* params.tools: functions per turn at most (1.2). */
#define SCH_MAX_TOOLS 128

/*
 * Error codes.  Numeric values and names are stable (never renumbered or
 * reused); the name (sch_err_name) is what goes on the wire in DeadLetter
 * `error_code` and TurnResult `error.code`.  The codes from -40 down are
 * never produced by this library: the worker uses them for rejections it
 * decides itself, so one set describes every way a turn can fail.
 */
typedef enum sch_err {
    SCH_OK = 0,                           /* "OK" */
    SCH_E_TRUNCATED = -1,                 /* record ends inside a value */
    SCH_E_MALFORMED = -2,                 /* byte that is not msgpack (0xc1) */
    SCH_E_TRAILING_BYTES = -3,            /* bytes after the root map */
    SCH_E_NOT_MAP = -4,                   /* root value is not a map */
    SCH_E_TOO_DEEP = -5,                  /* nesting deeper than max_depth */
    SCH_E_RECORD_TOO_LARGE = -6,          /* record longer than max_total_bytes */
    SCH_E_TOO_MANY_OBJECTS = -7,          /* more values than max_objects */
    SCH_E_DUPLICATE_KEY = -8,             /* a key twice in one schema map */
    SCH_E_BAD_KEY = -9,                   /* schema map key not a 1..64 byte str */
    SCH_E_TOO_MANY_FIELDS = -10,          /* schema map with > 64 entries */
    SCH_E_UNSUPPORTED_VERSION = -11,      /* v (or content-type v) not 1 */
    SCH_E_MISSING_FIELD = -12,            /* required field absent */
    SCH_E_WRONG_TYPE = -13,               /* field has the wrong msgpack type */
    SCH_E_OUT_OF_RANGE = -14,             /* number outside its field's range */
    SCH_E_BAD_UTF8 = -15,                 /* text field not valid UTF-8 */
    SCH_E_BAD_VALUE = -16,                /* value breaks its field's rule */
    SCH_E_BAD_ROLE = -17,                 /* role not system/user/assistant */
    SCH_E_MISSING_INPUT = -18,            /* neither messages nor prompt_tokens */
    SCH_E_BOTH_INPUTS = -19,              /* both messages and prompt_tokens */
    SCH_E_EMPTY_INPUT = -20,              /* messages or prompt_tokens empty */
    SCH_E_TOO_MANY_MESSAGES = -21,        /* > max_messages */
    SCH_E_CONTENT_TOO_LONG = -22,         /* content/text > max_content_bytes */
    SCH_E_TOO_MANY_STOP_STRINGS = -23,    /* > max_stop */
    SCH_E_STOP_STRING_TOO_LONG = -24,     /* stop string > max_stop_bytes */
    SCH_E_MAX_TOKENS_TOO_LARGE = -25,     /* params.max_tokens > max_tokens */
    SCH_E_TOO_MANY_PROMPT_TOKENS = -26,   /* > max_prompt_tokens */
    SCH_E_STRING_TOO_LONG = -27,          /* id/name/reason string over limit */
    SCH_E_TOO_MANY_TOKENS = -28,          /* chunk/result tokens > max_tokens */
    SCH_E_TOO_MANY_HEADERS = -29,         /* DeadLetter headers > max_headers */
    SCH_E_UNSUPPORTED_CONTENT_TYPE = -30, /* content-type not parley's */
    SCH_E_NOMEM = -31,                    /* allocation failed */
    SCH_E_INVALID_ARGUMENT = -32,         /* API misuse (NULL, bad struct) */
    SCH_E_BAD_JSON = -33,                 /* application/json value not JSON */
    /* Worker-level codes (not produced by the codec). */
    SCH_E_UNKNOWN_MODEL = -40,      /* `model` names no loaded model */
    SCH_E_EXPIRED = -41,            /* deadline_ms passed */
    SCH_E_CONTEXT_OVERFLOW = -42,   /* prompt + max_tokens > context */
    SCH_E_TOKEN_OUT_OF_VOCAB = -43, /* prompt token id >= vocab size */
    SCH_E_KEY_MISMATCH = -44,       /* record key != conversation_id */
    SCH_E_INTERNAL = -45,           /* worker fault while serving */
    SCH_E_BAD_CONSTRAINT = -46,     /* response_format / tools the worker
                                       cannot compile, or over its budget */
    SCH_E_UNSUPPORTED = -47,        /* a field this worker knows but
                                       cannot honour (model, engine) */
    SCH_E_UNKNOWN = -63             /* a code name this reader lacks */
} sch_err;

/* "X.Y.Z": the msgpack-c library the codec runs with. */
const char *sch_msgpack_version(void);

/* "E_TRUNCATED" etc.; "E_UNKNOWN" for a value that is not a code. */
const char *sch_err_name(int code);
/* One-line English description of a code (the spec's table). */
const char *sch_err_describe(int code);
/* Code for a wire name (len bytes, need not be NUL-terminated);
 * SCH_E_UNKNOWN when the name is not one this reader knows. */
int sch_err_from_name(const char *name, size_t len);
/* The defined codes (OK included) in table order, for docs and tests:
 * sch_err_code_at(i) for i < sch_err_count() (SCH_OK past the end). */
size_t sch_err_count(void);
int sch_err_code_at(size_t i);

/* Decoder limits.  Fill with sch_limits_default() then adjust. */
typedef struct sch_limits {
    size_t max_total_bytes;      /* whole record, bytes (default 4 MiB) */
    uint32_t max_depth;          /* container nesting, root map = 1 (16; <= 32) */
    size_t max_objects;          /* msgpack values in the record (524288) */
    size_t max_messages;         /* ChatTurn.messages entries (4096) */
    size_t max_content_bytes;    /* one message content / chunk or result
                                 text / DLQ key and header value (256 KiB) */
    size_t max_stop;             /* params.stop entries (16) */
    size_t max_stop_bytes;       /* bytes of one stop string (256) */
    uint32_t max_tokens;         /* params.max_tokens ceiling; also tokens per
                                 TokenChunk / TurnResult (32768) */
    size_t max_prompt_tokens;    /* ChatTurn.prompt_tokens entries (131072) */
    size_t max_id_bytes;         /* ids, namespace, model, worker, topic,
                                 header names (256) */
    size_t max_text_bytes;       /* DLQ reason, error.message (4096) */
    size_t max_headers;          /* DeadLetter.headers entries (64) */
    size_t max_constraint_bytes; /* response_format schema / pattern /
                                    grammar, tools, tool_choice, a message's
                                    tool_calls (65536; 1.2) */
} sch_limits;

void sch_limits_default(sch_limits *lim);

/* A byte string; ptr == NULL means absent (optional fields). */
typedef struct sch_str {
    const char *ptr; /* bytes (decoded: NUL-terminated copy in the arena) */
    size_t len;      /* length in bytes, excluding any terminator */
} sch_str;

/* sch_str for a C string (NULL gives an absent string). */
sch_str sch_str_c(const char *s);

/* Growable output buffer for encoders. */
typedef struct sch_buf {
    char *data; /* malloc'd bytes (NULL until first write) */
    size_t len; /* bytes written */
    size_t cap; /* bytes allocated */
} sch_buf;

void sch_buf_init(sch_buf *b);
void sch_buf_free(sch_buf *b);

/* ------------------------------------------------------------ ChatTurn */

typedef enum sch_role {
    SCH_ROLE_SYSTEM = 0,    /* "system" */
    SCH_ROLE_USER = 1,      /* "user" */
    SCH_ROLE_ASSISTANT = 2, /* "assistant" */
    SCH_ROLE_TOOL = 3       /* "tool": a tool's result (1.2) */
} sch_role;

/* "system" / "user" / "assistant" / "tool"; NULL for a value out of the
 * enum. */
const char *sch_role_name(sch_role r);

/* One message of a conversation. */
typedef struct sch_message {
    sch_role role;        /* speaker */
    sch_str content;      /* UTF-8 text, 0..max_content_bytes bytes */
    sch_str tool_calls;   /* assistant: the calls it made, OpenAI's
                             tool_calls array as JSON text (absent = none) */
    sch_str tool_call_id; /* tool: the call this result answers (absent) */
} sch_message;

/* params.response_format.type: what the reply must be (1.2). */
typedef enum sch_rf {
    SCH_RF_TEXT = 0,        /* "text": free text (the default) */
    SCH_RF_JSON_OBJECT = 1, /* "json_object": a JSON object */
    SCH_RF_JSON_SCHEMA = 2, /* "json_schema": JSON valid under `schema` */
    SCH_RF_REGEX = 3,       /* "regex": a full match of `pattern` */
    SCH_RF_GRAMMAR = 4      /* "grammar": a sentence of the Lark `grammar` */
} sch_rf;

/* "text", "json_object", ...; NULL for a value out of the enum. */
const char *sch_rf_name(sch_rf f);

/* params.response_format (1.2). */
typedef struct sch_response_format {
    sch_rf type;  /* the kind of constraint (SCH_RF_TEXT: none) */
    sch_str spec; /* json_schema: the schema as JSON text; regex: the
                     pattern; grammar: the Lark grammar; else absent */
} sch_response_format;

/* Generation parameters (ChatTurn.params); defaults from sch_params_default. */
typedef struct sch_params {
    uint32_t max_tokens;       /* tokens to generate, 1..limit (256) */
    double temperature;        /* 0 = greedy, 0..100 (1.0) */
    double top_p;              /* nucleus mass, (0, 1] (1.0) */
    uint32_t top_k;            /* 0 = off, else keep k best, <= 2^31-1 (0) */
    bool has_seed;             /* seed was given */
    uint64_t seed;             /* sampling seed when has_seed */
    const sch_str *stop;       /* stop strings (each 1..max_stop_bytes) */
    size_t n_stop;             /* entries in stop (0..max_stop) */
    double repetition_penalty; /* 1.0 = off, (0, 100] (1.0) */
    /* 1.2: */
    sch_response_format response_format; /* constraint on the reply (text) */
    bool has_logprobs;                   /* per-token logprobs asked for */
    uint32_t top_logprobs;               /* alternatives per token, 0..SCH_MAX_TOP_LOGPROBS */
    uint32_t n;                          /* choices, 1..SCH_MAX_N (1) */
    sch_str tools;                       /* OpenAI's tools array as JSON text (absent) */
    sch_str tool_choice;                 /* OpenAI's tool_choice as JSON text (absent =
                                  "auto" with tools, else "none") */
    bool parallel_tool_calls;            /* several calls in one reply allowed (true) */
} sch_params;

void sch_params_default(sch_params *p);

/* ChatTurn.service_class: how the engine schedules the turn (1.3). */
typedef enum sch_class {
    SCH_CLASS_INTERACTIVE = 0, /* "interactive": a person waits (the default) */
    SCH_CLASS_BULK = 1         /* "bulk": throughput only; preemptible */
} sch_class;

/* "interactive" / "bulk"; NULL for a value out of the enum. */
const char *sch_class_name(sch_class c);

/* ChatTurn: one request.  Exactly one of messages / prompt_tokens / prompt
 * is set. */
typedef struct sch_turn {
    uint32_t v;                    /* schema major version (1) */
    sch_str conversation_id;       /* record key; 1..max_id_bytes, no C0/DEL */
    sch_str turn_id;               /* idempotency key; same rule */
    const sch_message *messages;   /* whole conversation, or NULL */
    size_t n_messages;             /* 1..max_messages when messages set */
    const uint32_t *prompt_tokens; /* pre-tokenized prompt, or NULL */
    size_t n_prompt_tokens;        /* 1..max_prompt_tokens when set */
    sch_str prompt;                /* raw prompt text, no chat template (1.2) */
    sch_params params;             /* generation parameters */
    bool stream;                   /* publish TokenChunks (false) */
    sch_str ns;                    /* `namespace`: [A-Za-z0-9._-]+ ("default") */
    uint64_t deadline_ms;          /* unix ms after which to give up; 0 none */
    uint64_t created_ms;           /* unix ms the client made it; 0 unknown */
    sch_str model;                 /* model name; absent = worker default */
    sch_class service_class;       /* scheduling class (1.3; interactive) */
    struct msgpack_zone *zone_;    /* arena of a decoded turn (private) */
} sch_turn;

/* Zero *t, v = 1, params defaults (for building a turn to encode). */
void sch_turn_init(sch_turn *t);

/* Decode one ChatTurn record.  lim NULL = defaults.  On success *out owns
 * its data (free with sch_turn_free); on error *out is zeroed.  Returns 0 or
 * a negative sch_err (any of the codec's codes). */
int sch_turn_decode(const void *buf, size_t len, const sch_limits *lim, sch_turn *out, char *err,
                    size_t errlen);

/* Encode *t into out (replacing its contents).  Validates the same rules as
 * the decoder except the sch_limits (reader policy); returns 0, or a
 * negative sch_err with out->len == 0. */
int sch_turn_encode(const sch_turn *t, sch_buf *out, char *err, size_t errlen);

/* Release a decoded turn and zero it; no-op for zeroed or caller-built. */
void sch_turn_free(sch_turn *t);

/* ------------------------------------------------------------ logprobs */

/* The log probability of one token at one position of a reply (1.2), and
 * the most likely tokens there. */
typedef struct sch_logprob {
    uint32_t id;                   /* token id */
    sch_str token;                 /* its text, valid UTF-8: a piece that is
                                      not whole UTF-8 has U+FFFD for what is
                                      not, and its raw bytes in `bytes` */
    sch_str bytes;                 /* the raw bytes when they differ from
                                      token's (absent otherwise) */
    double logprob;                /* natural log of its probability, finite
                                      and <= 0 */
    const struct sch_logprob *top; /* the most likely tokens, most likely
                                      first (their own top is NULL) */
    size_t n_top;                  /* entries, 0..SCH_MAX_TOP_LOGPROBS */
} sch_logprob;

/* One tool call of a reply (1.2). */
typedef struct sch_tool_call {
    sch_str id;        /* call id (id rule), unique within the turn */
    sch_str name;      /* the function's name (id rule) */
    sch_str arguments; /* its arguments, a JSON object as text */
} sch_tool_call;

/* ---------------------------------------------------------- TokenChunk */

/* TokenChunk: a piece of a streamed reply. */
typedef struct sch_chunk {
    uint32_t v;                  /* schema major version (1) */
    sch_str conversation_id;     /* as in the turn */
    sch_str turn_id;             /* as in the turn */
    uint64_t attempt;            /* processing attempt id (opaque) */
    uint64_t seq;                /* 0,1,2... within one attempt */
    sch_str text;                /* UTF-8 text of these tokens (may be "") */
    const uint32_t *tokens;      /* token ids (NULL when none) */
    size_t n_tokens;             /* entries in tokens */
    bool last;                   /* final chunk of this attempt (false) */
    uint32_t index;              /* choice the tokens belong to (0; 1.2) */
    const sch_logprob *logprobs; /* one per token when asked (1.2), or NULL */
    size_t n_logprobs;           /* 0 or n_tokens */
    struct msgpack_zone *zone_;  /* arena of a decoded chunk (private) */
} sch_chunk;

void sch_chunk_init(sch_chunk *c);
int sch_chunk_decode(const void *buf, size_t len, const sch_limits *lim, sch_chunk *out, char *err,
                     size_t errlen);
int sch_chunk_encode(const sch_chunk *c, sch_buf *out, char *err, size_t errlen);
void sch_chunk_free(sch_chunk *c);

/* ---------------------------------------------------------- TurnResult */

typedef enum sch_finish {
    SCH_FINISH_STOP = 0,     /* "stop": end-of-turn token or stop string */
    SCH_FINISH_LENGTH = 1,   /* "length": max_tokens or context reached */
    SCH_FINISH_EXPIRED = 2,  /* "expired": deadline_ms passed */
    SCH_FINISH_ERROR = 3,    /* "error": see error */
    SCH_FINISH_CANCELLED = 4 /* "cancelled": a CancelTurn stopped it (1.4) */
} sch_finish;

const char *sch_finish_name(sch_finish f);

/* One more choice of a turn with n > 1 (TurnResult.choices; 1.2). */
typedef struct sch_choice {
    uint32_t index;                  /* 1..n-1 (choice 0 is the result's own) */
    sch_str text;                    /* its reply text */
    const uint32_t *tokens;          /* its token ids (NULL when none) */
    size_t n_tokens;                 /* entries */
    sch_finish finish_reason;        /* why it ended */
    const sch_logprob *logprobs;     /* per token when asked, or NULL */
    size_t n_logprobs;               /* 0 or n_tokens */
    const sch_tool_call *tool_calls; /* calls it made, or NULL */
    size_t n_tool_calls;             /* entries, 0..SCH_MAX_TOOL_CALLS */
} sch_choice;

/* TurnResult: the one committed reply to a turn. */
typedef struct sch_result {
    uint32_t v;                 /* schema major version (1) */
    sch_str conversation_id;    /* as in the turn */
    sch_str turn_id;            /* as in the turn */
    uint64_t attempt;           /* attempt whose chunks are the real ones */
    sch_str text;               /* full reply text (UTF-8) */
    const uint32_t *tokens;     /* reply token ids (NULL when none) */
    size_t n_tokens;            /* entries in tokens */
    sch_finish finish_reason;   /* why generation ended */
    uint64_t prompt_tokens;     /* usage: prompt length in tokens */
    uint64_t cached_tokens;     /* usage: prompt tokens from KV cache */
    uint64_t completion_tokens; /* usage: generated tokens */
    uint64_t queue_ms;          /* timing: produce -> start of work */
    uint64_t ttft_ms;           /* timing: start -> first token */
    uint64_t total_ms;          /* timing: start -> done */
    sch_str worker;             /* id of the worker that served it */
    sch_str model;              /* model that served it (optional) */
    bool has_error;             /* error present (required for "error") */
    int error_code;             /* sch_err of error.code (SCH_E_UNKNOWN if
                                   the name is newer than this reader) */
    sch_str error_name;         /* error.code as on the wire; encode: NULL
                                   = sch_err_name(error_code) */
    sch_str error_message;      /* error.message (ASCII/UTF-8 text) */
    /* 1.2: */
    const sch_logprob *logprobs;     /* per token when asked, or NULL */
    size_t n_logprobs;               /* 0 or n_tokens */
    const sch_tool_call *tool_calls; /* calls the reply made, or NULL */
    size_t n_tool_calls;             /* entries, 0..SCH_MAX_TOOL_CALLS */
    const sch_choice *choices;       /* choices 1..n-1 of an n > 1 turn */
    size_t n_choices;                /* entries, 0..SCH_MAX_N - 1 */
    struct msgpack_zone *zone_;      /* arena of a decoded result (private) */
} sch_result;

void sch_result_init(sch_result *r);
/* Choice k of r as an sch_choice: k == 0 is the result's own text, tokens,
 * finish, logprobs and tool calls; 1..r->n_choices is r->choices[k - 1].
 * Any other k gives a zeroed choice with that index. */
void sch_result_choice(const sch_result *r, size_t k, sch_choice *out);
/* Set choice c->index of r: index 0 writes the result's own fields; index
 * 1..SCH_MAX_N - 1 writes more[index - 1] (caller memory, SCH_MAX_N - 1
 * entries) and makes r->choices = more, r->n_choices at least index. */
void sch_result_set_choice(sch_result *r, sch_choice *more, const sch_choice *c);
/* Make r an error result: error code and message (pointed at, not copied),
 * finish_reason "expired" for SCH_E_EXPIRED and "error" otherwise, and no
 * other choices, logprobs or tool calls (an error result carries none). */
void sch_result_fail(sch_result *r, int code, sch_str message);
int sch_result_decode(const void *buf, size_t len, const sch_limits *lim, sch_result *out,
                      char *err, size_t errlen);
int sch_result_encode(const sch_result *r, sch_buf *out, char *err, size_t errlen);
void sch_result_free(sch_result *r);

/* ---------------------------------------------------------- DeadLetter */

/* One Kafka header of the rejected record. */
typedef struct sch_header {
    sch_str name;  /* header name (bytes; written as str when UTF-8) */
    sch_str value; /* header value bytes; ptr NULL = null value */
} sch_header;

/* DeadLetter: a rejected input record and why. */
typedef struct sch_dead {
    uint32_t v;                 /* schema major version (1) */
    sch_str reason;             /* human-readable cause (text) */
    int error_code;             /* sch_err of error_code (SCH_E_UNKNOWN if
                                   the name is newer than this reader) */
    sch_str error_name;         /* error_code as on the wire; encode: NULL
                                   = sch_err_name(error_code) */
    sch_str topic;              /* source topic */
    int32_t partition;          /* source partition (>= 0) */
    int64_t offset;             /* source offset (>= 0) */
    int64_t timestamp_ms;       /* source record timestamp; -1 unknown */
    sch_str key;                /* original key bytes; ptr NULL = null */
    sch_str value;              /* original value bytes (maybe a prefix);
                                   ptr NULL = null value */
    uint64_t value_size;        /* original value length (>= value.len) */
    const sch_header *headers;  /* original headers in order (or NULL) */
    size_t n_headers;           /* entries in headers */
    sch_str conversation_id;    /* when it could be decoded (optional) */
    sch_str turn_id;            /* when it could be decoded (optional) */
    sch_str worker;             /* worker that rejected it (optional) */
    uint64_t dead_ms;           /* unix ms of the rejection; 0 unknown */
    struct msgpack_zone *zone_; /* arena of a decoded record (private) */
} sch_dead;

void sch_dead_init(sch_dead *d);
int sch_dead_decode(const void *buf, size_t len, const sch_limits *lim, sch_dead *out, char *err,
                    size_t errlen);
int sch_dead_encode(const sch_dead *d, sch_buf *out, char *err, size_t errlen);
void sch_dead_free(sch_dead *d);

/* ---------------------------------------------------------- CancelTurn */

/* CancelTurn (1.4): a request to stop one turn, written on the turns topic
 * with the turn's key and the content-type SCH_CONTENT_TYPE_CANCEL. */
typedef struct sch_cancel {
    uint32_t v;                 /* schema major version (1) */
    sch_str conversation_id;    /* the turn's; also the record key */
    sch_str turn_id;            /* the turn to stop */
    uint64_t cancelled_ms;      /* unix ms the client asked; 0 unknown */
    sch_str reason;             /* why, for logs (optional text) */
    struct msgpack_zone *zone_; /* arena of a decoded record (private) */
} sch_cancel;

void sch_cancel_init(sch_cancel *k);
int sch_cancel_decode(const void *buf, size_t len, const sch_limits *lim, sch_cancel *out,
                      char *err, size_t errlen);
int sch_cancel_encode(const sch_cancel *k, sch_buf *out, char *err, size_t errlen);
void sch_cancel_free(sch_cancel *k);

/* ------------------------------------------------------------- headers */

/* Check a content-type header value (len bytes).  NULL/absent header is
 * accepted (treated as SCH_CONTENT_TYPE).  Returns 0,
 * SCH_E_UNSUPPORTED_CONTENT_TYPE (another media type) or
 * SCH_E_UNSUPPORTED_VERSION (parameter v with a major other than 1). */
int sch_content_type_check(const char *val, size_t len, char *err, size_t errlen);

/* Formats a record value may come in (its content-type header). */
typedef enum sch_format {
    SCH_FORMAT_MSGPACK = 0, /* application/x-parley+msgpack, or no header */
    SCH_FORMAT_JSON = 1     /* application/json (ChatTurn input only) */
} sch_format;

/* Like sch_content_type_check, but application/json is accepted too
 * (parameter charset, when present, must be utf-8; v as for msgpack).
 * *fmt gets the format (SCH_FORMAT_MSGPACK for an absent header).  Returns
 * 0, SCH_E_UNSUPPORTED_CONTENT_TYPE or SCH_E_UNSUPPORTED_VERSION. */
int sch_content_type_format(const char *val, size_t len, sch_format *fmt, char *err, size_t errlen);

/* True when a content-type header value (len bytes) names a CancelTurn:
 * media type application/x-parley-cancel+msgpack (case-insensitive) whose
 * `v`, when present, has major 1.  NULL (no header) is false: a record
 * without the header is a ChatTurn.  A cancel media type with another
 * major is false too (the reader then refuses it as a ChatTurn would:
 * E_UNSUPPORTED_CONTENT_TYPE from sch_content_type_format). */
bool sch_content_type_cancel(const char *val, size_t len);

/* True when an `accept` header value (len bytes) asks for JSON: its first
 * media range is application/json (case-insensitive, parameters ignored).
 * NULL/anything else: false (parley's msgpack). */
bool sch_accept_json(const char *val, size_t len);

/* ---------------------------------------------------------------- JSON */

/* Convert one JSON document (RFC 8259, UTF-8) into the msgpack bytes of the
 * same value (objects -> maps in document order, arrays -> arrays, strings
 * -> str, integers -> int, numbers with a fraction or exponent -> float64,
 * true/false -> bool, null -> nil) into out (replacing its contents).
 * Enforces lim (NULL = defaults): max_total_bytes on the JSON bytes, and
 * max_depth / max_objects before anything is allocated.  Syntax errors are
 * SCH_E_BAD_JSON (message with line and column), SCH_E_TRUNCATED (ends
 * early / empty), SCH_E_TRAILING_BYTES, SCH_E_BAD_UTF8, SCH_E_DUPLICATE_KEY
 * (a key twice in one object) or SCH_E_OUT_OF_RANGE (an integer outside
 * -2^63..2^63-1).  Any JSON value is converted, not only objects. */
int sch_json_to_msgpack(const void *json, size_t len, const sch_limits *lim, sch_buf *out,
                        char *err, size_t errlen);

/* Decode a ChatTurn written as JSON: sch_json_to_msgpack, then
 * sch_turn_decode on the result, so every field rule and error code is the
 * msgpack decoder's (a non-object root is SCH_E_NOT_MAP, `16.0` for an int
 * field is SCH_E_WRONG_TYPE, ...).  Same contract as sch_turn_decode. */
int sch_turn_decode_json(const void *buf, size_t len, const sch_limits *lim, sch_turn *out,
                         char *err, size_t errlen);

/* Write one msgpack value (len bytes, e.g. an encoded record) as compact
 * JSON text into out (replacing its contents): maps -> objects (keys must
 * be str), str -> strings (must be UTF-8, else SCH_E_BAD_UTF8), ints as
 * exact decimal (64-bit), floats as shortest round-trip decimals (NaN and
 * infinities: SCH_E_OUT_OF_RANGE), nil -> null.  bin and ext have no JSON
 * form (SCH_E_WRONG_TYPE).  Returns 0 or a negative sch_err. */
int sch_msgpack_to_json(const void *buf, size_t len, sch_buf *out, char *err, size_t errlen);

/* The JSON form of a TurnResult / TokenChunk: exactly the fields and values
 * of sch_X_encode, as a JSON object (content type SCH_CONTENT_TYPE_JSON). */
int sch_result_encode_json(const sch_result *r, sch_buf *out, char *err, size_t errlen);
int sch_chunk_encode_json(const sch_chunk *c, sch_buf *out, char *err, size_t errlen);

/* Check OpenAI's `tools` array, given as JSON text (params.tools): 1..
 * SCH_MAX_TOOLS entries {"type": "function", "function": {...}} whose
 * function has a name of 1..64 of [A-Za-z0-9_-], unique in the array, and
 * may have a string description, an object parameters and a boolean strict
 * (null for any of them is its absence); any other member of function is
 * refused.  The one check of the gateway (before a ChatTurn is sent) and
 * the worker (before a turn is rendered).  Returns 0, or SCH_E_BAD_CONSTRAINT
 * with *at the index of the offending tool (-1: the array as a whole) and a
 * message naming the member from "tools" ("tools[2].function.name: ..."). */
int sch_tools_check(const char *json, size_t len, int *at, char *err, size_t errlen);

/* Check a W3C traceparent value ("00-<32 hex>-<16 hex>-<2 hex>", lower-case
 * hex, ids not all zero; future versions may append "-..." fields).
 * Returns 0 or SCH_E_BAD_VALUE; a worker propagates only valid ones. */
int sch_traceparent_check(const char *val, size_t len);

/* Validate UTF-8 strictly (no overlongs, surrogates or > U+10FFFF).
 * Returns true when the len bytes are valid. */
bool sch_utf8_valid(const char *s, size_t len);

#ifdef __cplusplus
}
#endif
#endif /* PARLEY_SCH_H */
