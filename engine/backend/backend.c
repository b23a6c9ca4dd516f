/*
 * backend.c -- choosing a backend (eng_backend_create: model.backend =
 * auto|cpu|cuda) and ending one.  The CPU backend is always built; the
 * CUDA one only when the toolkit was found (PARLEY_HAVE_CUDA), and
 * otherwise its entry points say so.
 */
#include <string.h>

#include "eng_backend.h"
#include "eng_err.h"

const char *eng_backend_kind_name(eng_backend_kind k) {
    switch (k) {
    case ENG_BACKEND_AUTO: return "auto";
    case ENG_BACKEND_CPU: return "cpu";
    case ENG_BACKEND_CUDA: return "cuda";
    }
    return "?";
}

int eng_backend_kind_parse(const char *s, eng_backend_kind *out) {
    static const eng_backend_kind kinds[] = {ENG_BACKEND_AUTO, ENG_BACKEND_CPU, ENG_BACKEND_CUDA};
    for (size_t i = 0; s && i < sizeof kinds / sizeof kinds[0]; i++)
        if (strcmp(s, eng_backend_kind_name(kinds[i])) == 0) {
            *out = kinds[i];
            return 0;
        }
    return -1;
}

#ifndef PARLEY_HAVE_CUDA
int eng_backend_cuda_built(void) { return 0; }

int eng_backend_cuda_create(eng_backend *b, int device, int n_threads, char *err, size_t errlen) {
    (void)device;
    (void)n_threads;
    memset(b, 0, sizeof *b);
    return pl_errf(err, errlen, ENG_EINVAL,
                   "this build has no CUDA backend (configure with a CUDA toolkit: "
                   "PARLEY_CUDA=ON and CUDAToolkit_ROOT)");
}
#endif

int eng_backend_create(eng_backend *b, eng_backend_kind k, struct kern_pool *pool, char *err,
                       size_t errlen) {
    memset(b, 0, sizeof *b);
    switch (k) {
    case ENG_BACKEND_CPU: return eng_backend_cpu_create(b, pool, err, errlen);
    case ENG_BACKEND_CUDA: return eng_backend_cuda_create(b, 0, 0, err, errlen);
    case ENG_BACKEND_AUTO:
        /* CUDA when it is built and a device answers; anything else is the CPU */
        if (eng_backend_cuda_built() && eng_backend_cuda_create(b, 0, 0, NULL, 0) == 0) return 0;
        return eng_backend_cpu_create(b, pool, err, errlen);
    }
    return pl_errf(err, errlen, ENG_EINVAL, "unknown backend kind %d", (int)k);
}

void eng_backend_free(eng_backend *b) {
    if (b && b->destroy) b->destroy(b->ctx);
    if (b) memset(b, 0, sizeof *b);
}

int eng_wdesc_check(const eng_wdesc *d, int q4k_use, char *err, size_t errlen) {
    const char *name = d->name ? d->name : "weight";
    if (d->rows < 1 || d->cols < 1 || d->n_parts < 1 || !d->parts || !d->use)
        return pl_errf(err, errlen, ENG_EINVAL, "%s: bad shape %d x %d or no parts", name, d->rows,
                       d->cols);
    int next = 0;
    for (int i = 0; i < d->n_parts; i++) {
        const eng_wpart *p = &d->parts[i];
        if (p->row0 != next || p->rows < 1 || p->row0 + p->rows > d->rows)
            return pl_errf(err, errlen, ENG_EINVAL, "%s: part %d does not continue the rows", name,
                           i);
        next += p->rows;
        int ok = p->fmt == ENG_WFMT_F32      ? p->f != NULL
                 : p->fmt == ENG_WFMT_I8_ROW ? p->q && p->scale
                 : p->fmt == ENG_WFMT_I8_B32 ? p->q && p->bscale && d->cols % 32 == 0
                 : p->fmt == ENG_WFMT_Q4_K   ? p->u4 && p->sc && p->mn && p->d && p->dmin &&
                                                 d->cols % 256 == 0 && (d->use & q4k_use) == q4k_use
                                           : 0;
        if (!ok)
            return pl_errf(err, errlen, ENG_EINVAL, "%s: part %d: format %d unsupported here", name,
                           i, (int)p->fmt);
        if ((p->fmt == ENG_WFMT_F32) != (d->parts[0].fmt == ENG_WFMT_F32))
            return pl_errf(err, errlen, ENG_EINVAL, "%s: fp32 and int8 parts mixed", name);
    }
    if (next != d->rows)
        return pl_errf(err, errlen, ENG_EINVAL, "%s: parts cover %d of %d rows", name, next,
                       d->rows);
    return 0;
}
