/*
 * sch_err.c -- the wire error codes: names, descriptions, lookup, and the
 * message formatting every decoder uses.
 *
 * The table below is the single source of truth for the code set; the spec
 * (schemas/README.md) lists the same rows and a unit test checks that every
 * code round-trips through its name.  Error messages are kept ASCII: bytes
 * quoted from hostile input go through sch_quote(), so a message can be
 * logged or copied into a DeadLetter `reason` without re-validation.
 */
#include "sch_internal.h"

#include <stdio.h>
#include <string.h>

typedef struct sch_err_row {
    int code;         /* sch_err value */
    const char *name; /* wire name */
    const char *desc; /* one-line description */
} sch_err_row;

static const sch_err_row sch_err_rows[] = {
    {SCH_OK, "OK", "no error"},
    {SCH_E_TRUNCATED, "E_TRUNCATED", "record ends inside a value (or is empty)"},
    {SCH_E_MALFORMED, "E_MALFORMED", "byte that is not valid msgpack (0xc1)"},
    {SCH_E_TRAILING_BYTES, "E_TRAILING_BYTES", "bytes follow the root map"},
    {SCH_E_NOT_MAP, "E_NOT_MAP", "root value is not a map"},
    {SCH_E_TOO_DEEP, "E_TOO_DEEP", "containers nested deeper than max_depth"},
    {SCH_E_RECORD_TOO_LARGE, "E_RECORD_TOO_LARGE", "record longer than max_total_bytes"},
    {SCH_E_TOO_MANY_OBJECTS, "E_TOO_MANY_OBJECTS", "record holds more than max_objects values"},
    {SCH_E_DUPLICATE_KEY, "E_DUPLICATE_KEY", "a key appears twice in one map"},
    {SCH_E_BAD_KEY, "E_BAD_KEY", "map key is not a str of 1..64 bytes"},
    {SCH_E_TOO_MANY_FIELDS, "E_TOO_MANY_FIELDS", "map has more than 64 entries"},
    {SCH_E_UNSUPPORTED_VERSION, "E_UNSUPPORTED_VERSION", "schema major version is not 1"},
    {SCH_E_MISSING_FIELD, "E_MISSING_FIELD", "required field absent or nil"},
    {SCH_E_WRONG_TYPE, "E_WRONG_TYPE", "field has the wrong msgpack type"},
    {SCH_E_OUT_OF_RANGE, "E_OUT_OF_RANGE", "number outside its field's range"},
    {SCH_E_BAD_UTF8, "E_BAD_UTF8", "text is not valid UTF-8"},
    {SCH_E_BAD_VALUE, "E_BAD_VALUE", "value breaks its field's rule"},
    {SCH_E_BAD_ROLE, "E_BAD_ROLE", "role is not system, user or assistant"},
    {SCH_E_MISSING_INPUT, "E_MISSING_INPUT", "neither messages nor prompt_tokens given"},
    {SCH_E_BOTH_INPUTS, "E_BOTH_INPUTS", "both messages and prompt_tokens given"},
    {SCH_E_EMPTY_INPUT, "E_EMPTY_INPUT", "messages or prompt_tokens is empty"},
    {SCH_E_TOO_MANY_MESSAGES, "E_TOO_MANY_MESSAGES", "more than max_messages messages"},
    {SCH_E_CONTENT_TOO_LONG, "E_CONTENT_TOO_LONG", "content or text longer than max_content_bytes"},
    {SCH_E_TOO_MANY_STOP_STRINGS, "E_TOO_MANY_STOP_STRINGS", "more than max_stop stop strings"},
    {SCH_E_STOP_STRING_TOO_LONG, "E_STOP_STRING_TOO_LONG",
     "stop string longer than max_stop_bytes"},
    {SCH_E_MAX_TOKENS_TOO_LARGE, "E_MAX_TOKENS_TOO_LARGE",
     "params.max_tokens above the max_tokens limit"},
    {SCH_E_TOO_MANY_PROMPT_TOKENS, "E_TOO_MANY_PROMPT_TOKENS",
     "more than max_prompt_tokens prompt tokens"},
    {SCH_E_STRING_TOO_LONG, "E_STRING_TOO_LONG", "id, name or message string over its limit"},
    {SCH_E_TOO_MANY_TOKENS, "E_TOO_MANY_TOKENS",
     "chunk or result holds more than max_tokens tokens"},
    {SCH_E_TOO_MANY_HEADERS, "E_TOO_MANY_HEADERS",
     "dead letter holds more than max_headers headers"},
    {SCH_E_UNSUPPORTED_CONTENT_TYPE, "E_UNSUPPORTED_CONTENT_TYPE",
     "content-type header names another format"},
    {SCH_E_NOMEM, "E_NOMEM", "out of memory"},
    {SCH_E_INVALID_ARGUMENT, "E_INVALID_ARGUMENT", "API misuse"},
    {SCH_E_BAD_JSON, "E_BAD_JSON", "application/json value is not well-formed JSON"},
    {SCH_E_UNKNOWN_MODEL, "E_UNKNOWN_MODEL", "model names no loaded model"},
    {SCH_E_EXPIRED, "E_EXPIRED", "deadline_ms passed before the reply"},
    {SCH_E_CONTEXT_OVERFLOW, "E_CONTEXT_OVERFLOW",
     "prompt plus max_tokens exceeds the model's context"},
    {SCH_E_TOKEN_OUT_OF_VOCAB, "E_TOKEN_OUT_OF_VOCAB",
     "prompt token id outside the model's vocabulary"},
    {SCH_E_KEY_MISMATCH, "E_KEY_MISMATCH", "record key differs from conversation_id"},
    {SCH_E_INTERNAL, "E_INTERNAL", "worker fault while serving the turn"},
    {SCH_E_BAD_CONSTRAINT, "E_BAD_CONSTRAINT",
     "response_format or tools that cannot be compiled, or over the worker's budget"},
    {SCH_E_UNSUPPORTED, "E_UNSUPPORTED",
     "a field this worker knows but cannot honour with its model or engine"},
    {SCH_E_UNKNOWN, "E_UNKNOWN", "error code not known to this reader"},
};

#define SCH_NROWS (sizeof sch_err_rows / sizeof sch_err_rows[0])

static const sch_err_row *sch_err_row_of(int code) {
    for (size_t i = 0; i < SCH_NROWS; i++)
        if (sch_err_rows[i].code == code) return &sch_err_rows[i];
    return NULL;
}

const char *sch_err_name(int code) {
    const sch_err_row *r = sch_err_row_of(code);
    return r ? r->name : "E_UNKNOWN";
}

const char *sch_err_describe(int code) {
    const sch_err_row *r = sch_err_row_of(code);
    return r ? r->desc : "error code not known to this reader";
}

int sch_err_from_name(const char *name, size_t len) {
    if (!name) return SCH_E_UNKNOWN;
    for (size_t i = 0; i < SCH_NROWS; i++) {
        const char *n = sch_err_rows[i].name;
        if (strlen(n) == len && memcmp(n, name, len) == 0) return sch_err_rows[i].code;
    }
    return SCH_E_UNKNOWN;
}

size_t sch_err_count(void) { return SCH_NROWS; }

int sch_err_code_at(size_t i) { return i < SCH_NROWS ? sch_err_rows[i].code : SCH_OK; }

void sch_quote(char *dst, size_t dstlen, const char *s, size_t len) {
    static const char hex[] = "0123456789abcdef";
    size_t o = 0, max = len > 40 ? 40 : len;
    if (!dstlen) return;
    /* worst case per byte is 4 chars; leave room for quotes, "...", NUL */
    if (o + 1 < dstlen) dst[o++] = '"';
    for (size_t i = 0; i < max && o + 9 < dstlen; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch >= 0x20 && ch < 0x7f && ch != '"' && ch != '\\') {
            dst[o++] = (char)ch;
        } else {
            dst[o++] = '\\';
            dst[o++] = 'x';
            dst[o++] = hex[ch >> 4];
            dst[o++] = hex[ch & 15];
        }
    }
    if (o + 1 < dstlen) dst[o++] = '"';
    if (len > max && o + 3 < dstlen) {
        memcpy(dst + o, "...", 3);
        o += 3;
    }
    dst[o < dstlen ? o : dstlen - 1] = 0;
}

const char *sch_role_name(sch_role r) {
    switch (r) {
    case SCH_ROLE_SYSTEM: return "system";
    case SCH_ROLE_USER: return "user";
    case SCH_ROLE_ASSISTANT: return "assistant";
    case SCH_ROLE_TOOL: return "tool";
    }
    return NULL;
}

const char *sch_rf_name(sch_rf f) {
    switch (f) {
    case SCH_RF_TEXT: return "text";
    case SCH_RF_JSON_OBJECT: return "json_object";
    case SCH_RF_JSON_SCHEMA: return "json_schema";
    case SCH_RF_REGEX: return "regex";
    case SCH_RF_GRAMMAR: return "grammar";
    }
    return NULL;
}

const char *sch_class_name(sch_class c) {
    switch (c) {
    case SCH_CLASS_INTERACTIVE: return "interactive";
    case SCH_CLASS_BULK: return "bulk";
    }
    return NULL;
}

const char *sch_finish_name(sch_finish f) {
    switch (f) {
    case SCH_FINISH_STOP: return "stop";
    case SCH_FINISH_LENGTH: return "length";
    case SCH_FINISH_EXPIRED: return "expired";
    case SCH_FINISH_ERROR: return "error";
    case SCH_FINISH_CANCELLED: return "cancelled";
    }
    return NULL;
}

const char *sch_msgpack_version(void) { return msgpack_version(); }
