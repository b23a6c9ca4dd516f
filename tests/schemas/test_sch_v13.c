/*
 * test_sch_v13.c -- the field spec 1.3 added: ChatTurn service_class.
 * Round trip of a bulk turn, the default (an interactive turn encodes
 * without the field, byte for byte as under 1.2, and a record without it
 * decodes as interactive), the decoder's and the encoder's refusals.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memmem */
#endif
#include "sch_test.h"

#include <string.h>

/* A minimal turn with one user message. */
static void v13_turn(sch_turn *t, sch_message *m) {
    sch_turn_init(t);
    t->conversation_id = sch_str_c("c");
    t->turn_id = sch_str_c("t");
    m->role = SCH_ROLE_USER;
    m->content = sch_str_c("hi");
    t->messages = m;
    t->n_messages = 1;
}

PT_TEST(v13_class_round_trip) {
    sch_message m = {0};
    sch_turn t, d;
    sch_buf b;
    char err[256];
    v13_turn(&t, &m);
    t.service_class = SCH_CLASS_BULK;
    sch_buf_init(&b);
    PT_EQ_INT(sch_turn_encode(&t, &b, err, sizeof err), 0);
    PT_ASSERT(memmem(b.data, b.len,
                     "\xadservice_class\xa4"
                     "bulk",
                     19) != NULL);
    PT_EQ_INT(sch_turn_decode(b.data, b.len, NULL, &d, err, sizeof err), 0);
    PT_EQ_INT(d.service_class, SCH_CLASS_BULK);
    sch_turn_free(&d);
    sch_buf_free(&b);
}

PT_TEST(v13_default_interactive) {
    sch_message m = {0};
    sch_turn t, d;
    sch_buf b;
    char err[256];
    v13_turn(&t, &m);
    PT_EQ_INT(t.service_class, SCH_CLASS_INTERACTIVE);
    sch_buf_init(&b);
    PT_EQ_INT(sch_turn_encode(&t, &b, err, sizeof err), 0);
    /* not written: the record is the 1.2 one */
    PT_ASSERT(memmem(b.data, b.len, "service_class", 13) == NULL);
    PT_EQ_INT(sch_turn_decode(b.data, b.len, NULL, &d, err, sizeof err), 0);
    PT_EQ_INT(d.service_class, SCH_CLASS_INTERACTIVE);
    sch_turn_free(&d);
    sch_buf_free(&b);
}

PT_TEST(v13_class_refused) {
    sch_message m = {0};
    sch_turn t;
    sch_buf b;
    char err[256];
    v13_turn(&t, &m);
    t.service_class = (sch_class)7;
    sch_buf_init(&b);
    PT_EQ_INT(sch_turn_encode(&t, &b, err, sizeof err), SCH_E_BAD_VALUE);
    PT_ASSERT(strstr(err, "service_class") != NULL);
    PT_EQ_INT((int)b.len, 0);
    PT_EQ_STR(sch_class_name(SCH_CLASS_BULK), "bulk");
    PT_ASSERT(sch_class_name((sch_class)2) == NULL);
    sch_buf_free(&b);
}
