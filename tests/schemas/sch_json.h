/*
 * sch_json.h -- JSON view of decoded records, for sch_tool and the Python
 * interop tests.
 *
 * The view is the contract between the C decoder and the tests: every field
 * of the struct appears with its decoded value (defaults applied), absent
 * optionals as null, text as JSON strings (UTF-8, control characters
 * escaped), and raw bytes (DeadLetter key/value/header fields) as lower-case
 * hex strings.  the .json files of schemas/testdata store expected decodes in the same
 * form.  Writes to a FILE; output errors are the caller's to check.
 */
#ifndef SCH_JSON_H
#define SCH_JSON_H

#include "sch.h"

#include <stdio.h>

void sch_json_str(FILE *f, const sch_str *s);        /* "..." or null */
void sch_json_hex(FILE *f, const char *p, size_t n); /* "0a1b..." */
void sch_json_turn(FILE *f, const sch_turn *t);
void sch_json_chunk(FILE *f, const sch_chunk *c);
void sch_json_result(FILE *f, const sch_result *r);
void sch_json_dead(FILE *f, const sch_dead *d);
void sch_json_cancel(FILE *f, const sch_cancel *k);

#endif /* SCH_JSON_H */
