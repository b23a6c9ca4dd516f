/*
 * bt_io.c -- output, state and error files of `parley batch` (see bt_io.h).
 */
#define _POSIX_C_SOURCE 200809L
#include "bt_io.h"
#include "pl_hash.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "oa_openai.h"
#include "pl_err.h"

uint64_t bt_id_hash(const char *id, size_t len) {
    uint64_t h = pl_fnv1a64(PL_FNV64_SEED, id, len);
    return h ? h : 1;
}

uint64_t bt_line_hash(long line_no) {
    char k[64];
    int n = snprintf(k, sizeof k, "#line:%ld", line_no);
    return bt_id_hash(k, (size_t)n);
}

int bt_out_mark(bt_out *o, uint64_t h) {
    if ((o->n_done + 1) * 2 > o->cap) {
        size_t cap = o->cap ? o->cap * 2 : 1024;
        uint64_t *t = calloc(cap, sizeof *t);
        if (!t) return -1;
        for (size_t i = 0; i < o->cap; i++)
            if (o->done[i]) {
                size_t j = (size_t)o->done[i] & (cap - 1);
                while (t[j]) j = (j + 1) & (cap - 1);
                t[j] = o->done[i];
            }
        free(o->done);
        o->done = t;
        o->cap = cap;
    }
    size_t j = (size_t)h & (o->cap - 1);
    while (o->done[j] && o->done[j] != h) j = (j + 1) & (o->cap - 1);
    if (!o->done[j]) {
        o->done[j] = h;
        o->n_done++;
    }
    return 0;
}

int bt_out_has(const bt_out *o, uint64_t h) {
    if (!o->cap) return 0;
    size_t j = (size_t)h & (o->cap - 1);
    while (o->done[j]) {
        if (o->done[j] == h) return 1;
        j = (j + 1) & (o->cap - 1);
    }
    return 0;
}

int bt_out_open(bt_out *o, const char *path, char *err, size_t errlen) {
    memset(o, 0, sizeof *o);
    o->fd = -1;
    FILE *f = fopen(path, "r");
    char *line = NULL;
    size_t cap = 0;
    off_t good = 0;
    if (f) {
        ssize_t n;
        while ((n = getline(&line, &cap, f)) > 0) {
            if (line[n - 1] != '\n') break; /* torn by a crash: cut below */
            good += n;
            /* JSON_ALLOW_NUL: a reply's text may hold \u0000, and a line not read back
             * would have its request sent and written again */
            json_t *j = json_loadb(line, (size_t)n, JSON_ALLOW_NUL, NULL);
            json_t *id = json_object_get(j, "custom_id"), *ln = json_object_get(j, "line");
            uint64_t h = 0;
            if (json_is_string(id)) h = bt_id_hash(json_string_value(id), json_string_length(id));
            else if (json_is_null(id) && json_is_integer(ln))
                h = bt_line_hash((long)json_integer_value(ln));
            if (h) {
                if (bt_out_mark(o, h)) n = -2;
                o->n_lines++;
            }
            json_decref(j);
            if (n == -2) {
                pl_errf(err, errlen, BT_ENOMEM, "out of memory");
                goto err;
            }
        }
        fclose(f);
        f = NULL;
    }
    free(line);
    line = NULL;
    if ((o->fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644)) < 0 ||
        ftruncate(o->fd, good) != 0 || fsync(o->fd) != 0) {
        pl_errf(err, errlen, BT_EIO, "%s: %s", path, strerror(errno));
        goto err;
    }
    return 0;
err:
    if (f) fclose(f);
    free(line);
    bt_out_close(o);
    return -1;
}

int bt_out_write(bt_out *o, uint64_t h, const char *line, char *err, size_t errlen) {
    size_t n = strlen(line);
    char *buf = malloc(n + 1);
    if (!buf) {
        return pl_errf(err, errlen, BT_ENOMEM, "out of memory");
    }
    memcpy(buf, line, n);
    buf[n] = '\n';
    ssize_t w = write(o->fd, buf, n + 1);
    free(buf);
    if (w != (ssize_t)(n + 1) || fsync(o->fd) != 0) {
        return pl_errf(err, errlen, BT_EIO, "writing the output: %s",
                       w < 0 ? strerror(errno) : "short write");
    }
    return bt_out_mark(o, h) ? pl_errf(err, errlen, BT_ENOMEM, "out of memory") : 0;
}

void bt_out_close(bt_out *o) {
    if (o->fd >= 0) close(o->fd);
    free(o->done);
    memset(o, 0, sizeof *o);
    o->fd = -1;
}

int bt_state_load(const char *path, bt_state *s, char *err, size_t errlen) {
    memset(s, 0, sizeof *s);
    json_error_t je;
    if (access(path, F_OK) != 0) return 0;
    json_t *j = json_load_file(path, 0, &je), *off = json_object_get(j, "offsets");
    json_t *id = json_object_get(j, "batch_id");
    if (!json_is_string(id) || json_string_length(id) >= sizeof s->batch_id ||
        !json_is_array(off)) {
        pl_errf(err, errlen, BT_EINVAL,
                "%s: not a parley batch state file (delete it to start over)", path);
        json_decref(j);
        return -1;
    }
    snprintf(s->batch_id, sizeof s->batch_id, "%s", json_string_value(id));
    json_t *sm = json_object_get(j, "sent_max"), *cn = json_object_get(j, "cancel");
    const char *smv = json_string_value(sm);
    if ((sm &&
         (!smv || !smv[0] || strlen(smv) > 16 || strspn(smv, "0123456789abcdef") != strlen(smv))) ||
        (cn && !json_is_boolean(cn))) {
        pl_errf(err, errlen, BT_EINVAL, "%s: bad sent_max or cancel (delete it to start over)",
                path);
        json_decref(j);
        return -1;
    }
    /* a state from a runner before sent_max: any request may have been sent */
    s->sent_max = sm ? strtoull(smv, NULL, 16) : UINT64_MAX;
    s->cancel = json_is_true(cn);
    s->from = rd_kafka_topic_partition_list_new((int)json_array_size(off));
    size_t i;
    json_t *e;
    json_array_foreach(off, i, e) {
        json_t *t = json_object_get(e, "topic"), *p = json_object_get(e, "partition"),
               *o = json_object_get(e, "offset");
        if (!json_is_string(t) || !json_is_integer(p) || !json_is_integer(o)) {
            pl_errf(err, errlen, BT_EINVAL, "%s: bad offsets entry %zu", path, i);
            json_decref(j);
            bt_state_free(s);
            return -1;
        }
        rd_kafka_topic_partition_list_add(s->from, json_string_value(t),
                                          (int32_t)json_integer_value(p))
            ->offset = json_integer_value(o);
    }
    json_decref(j);
    return 1;
}

int bt_state_save(const char *path, const bt_state *s, char *err, size_t errlen) {
    json_t *off = json_array();
    for (int i = 0; i < s->from->cnt; i++)
        json_array_append_new(off, json_pack("{ss sI sI}", "topic", s->from->elems[i].topic,
                                             "partition", (json_int_t)s->from->elems[i].partition,
                                             "offset", (json_int_t)s->from->elems[i].offset));
    char sm[24];
    snprintf(sm, sizeof sm, "%016llx", (unsigned long long)s->sent_max);
    json_t *j = json_pack("{ss so ss sb}", "batch_id", s->batch_id, "offsets", off, "sent_max", sm,
                          "cancel", s->cancel);
    char *txt = j ? json_dumps(j, JSON_INDENT(1)) : NULL;
    json_decref(j);
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int fd = txt ? open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644) : -1;
    int rc = -1;
    if (fd < 0 || write(fd, txt, strlen(txt)) != (ssize_t)strlen(txt) || fsync(fd) != 0 ||
        close(fd) != 0 || (fd = -1, rename(tmp, path) != 0)) {
        pl_errf(err, errlen, BT_EIO, "%s: %s", tmp, strerror(errno));
        if (fd >= 0) close(fd);
        goto out;
    }
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    int dfd = open(dirname(dir), O_RDONLY | O_DIRECTORY);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    rc = 0;
out:
    free(txt);
    return rc;
}

void bt_state_free(bt_state *s) {
    if (s->from) rd_kafka_topic_partition_list_destroy(s->from);
    s->from = NULL;
}
