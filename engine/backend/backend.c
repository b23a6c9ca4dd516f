/*
 * backend.c -- choosing a backend (eng_backend_create: model.backend =
 * auto|cpu|cuda) and ending one.  The CPU backend is always built; the
 * CUDA one only when the toolkit was found (PARLEY_HAVE_CUDA), and
 * otherwise its entry points say so.
 */
#include <string.h>

#include "eng_backend.h"
#include "eng_err.h"
#include "eng_model.h"

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
