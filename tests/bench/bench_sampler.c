/*
 * bench_sampler.c -- the sampler's cost over one row of a large vocabulary
 * (default 262,144: Gemma 3's), per sampling mode: greedy, greedy with a
 * repetition penalty, temperature over the whole vocabulary, top-k 40,
 * top-p 0.9 alone, top-k + top-p.  A benchmark, not a test: best of 20
 * calls per mode, milliseconds.
 *
 *   build/tests/sched/bench_sampler [n_vocab]
 *
 * Logits are pseudo-random in [-10, 10) (a flat distribution: the hard case
 * for top-p, whose kept set then spans many tokens); the history is 64
 * random ids.
 */
#include <stdio.h>
#include <stdlib.h>

#include "eng_sampler.h"
#include "pl_time.h"

int main(int argc, char **argv) {
    int V = argc > 1 ? atoi(argv[1]) : 262144;
    if (V < 2) return 2;
    float *l = malloc((size_t)V * sizeof *l);
    if (!l) return 1;
    uint64_t st = 1;
    for (int i = 0; i < V; i++) {
        st = st * 6364136223846793005ull + 1442695040888963407ull;
        l[i] = (float)((st >> 33) % 20000) / 1000.0f - 10.0f;
    }
    int32_t hist[64];
    for (int i = 0; i < 64; i++) hist[i] = (int32_t)((i * 7919L) % V);
    const struct {
        const char *name;
        float temp, top_p, pen;
        int top_k;
    } modes[] = {{"greedy", 0, 1, 1, 0},
                 {"greedy+penalty", 0, 1, 1.1f, 0},
                 {"temperature 0.8", 0.8f, 1, 1, 0},
                 {"top-k 40", 0.8f, 1, 1, 40},
                 {"top-p 0.9", 0.8f, 0.9f, 1, 0},
                 {"top-k 40 + top-p", 0.8f, 0.95f, 1.1f, 40}};
    printf("sampler over %d logits (best of 20 calls)\n", V);
    for (size_t j = 0; j < sizeof modes / sizeof modes[0]; j++) {
        eng_sampler_params p;
        eng_sampler_params_default(&p);
        p.temperature = modes[j].temp, p.top_k = modes[j].top_k, p.top_p = modes[j].top_p;
        p.repetition_penalty = modes[j].pen;
        eng_sampler *s;
        char e[200];
        if (eng_sampler_new(&p, V, &s, e, sizeof e)) {
            fprintf(stderr, "%s\n", e);
            return 1;
        }
        double best = 1e9;
        for (int r = 0; r < 20; r++) {
            double t0 = pl_mono_s();
            eng_sampler_sample(s, l, hist, 64);
            double dt = pl_mono_s() - t0;
            best = dt < best ? dt : best;
        }
        printf("  %-18s %8.3f ms\n", modes[j].name, best * 1e3);
        eng_sampler_free(s);
    }
    free(l);
    return 0;
}
