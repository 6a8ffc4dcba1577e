/*
 * tests/fixture.h — the model-comparison set-up the family tests share (include after check.h):
 *   outp(name)          a path under out_dir (eight rotating buffers), which main() sets
 *   make_ids(n, V, s)   n pseudo-random ids below V from seed s, BOS (1) first
 *   c_logits(...)       the C library's logits (n, n_vocab) in chunks, on an ISA and activation
 *                       mode, 1 or more threads, the model loaded with model_ctx (0: the file's)
 *   ref_logits(...)     tests/reference/forward.py's float64 logits for the same ids
 * Static functions: each test file gets its own copy, as with check.h.
 */
#ifndef PS_TEST_FIXTURE_H
#define PS_TEST_FIXTURE_H

#include "impl.h"
#include "promptscore.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define FORWARD_PY "tests/reference/forward.py"
#define PYTHON "/usr/bin/python3"

static char out_dir[512];

static const char *outp(const char *name) {
    static char buf[8][640];
    static int k;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", out_dir, name);
    return buf[k];
}

static int32_t *make_ids(int32_t n, int32_t n_vocab, uint64_t seed) {
    int32_t *ids = malloc((size_t)n * sizeof *ids);
    uint64_t s = seed;
    for (int32_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        ids[i] = i == 0 ? 1 : (int32_t)((s >> 33) % (uint64_t)n_vocab);
    }
    return ids;
}

/* Logits (n, n_vocab) in chunks of `chunk` on a model loaded with model_ctx (0: the file's). */
static float *c_logits(const char *path, const int32_t *ids, int32_t n, int32_t chunk,
                       ps_isa isa, ps_act act, int32_t threads, int32_t model_ctx,
                       int64_t *n_vocab) {
    ps_error e;
    ps_model *m = NULL;
    ps_model_params mp = ps_model_default_params();
    mp.n_ctx = model_ctx;
    if (ps_model_load(path, &mp, &m, &e) != PS_OK) {
        CHECKF(0, "load %s: %s", path, e.message);
        return NULL;
    }
    ps_model_info info;
    ps_model_get_info(m, &info);
    *n_vocab = info.n_vocab;
    ps_pool *pool = NULL;
    if (threads > 1) ps_pool_create(threads, &pool);
    ps_session_params sp = ps_session_default_params();
    sp.n_ctx = n;
    sp.n_batch = chunk;
    sp.isa = isa;
    sp.act = act;
    sp.pool = pool;
    ps_session *s = NULL;
    ps_status st = ps_session_create(m, &sp, &s, &e);
    CHECKF(st == PS_OK, "session: %s", e.message);
    const size_t nf = (size_t)n * (size_t)info.n_vocab;
    float *out = st == PS_OK ? malloc(nf * sizeof(float)) : NULL;
    for (int32_t i = 0; out && i < n; i += chunk) {
        st = ps_session_forward(s, ids + i, PS_MIN(chunk, n - i),
                                out + (size_t)i * (size_t)info.n_vocab, &e);
        if (st != PS_OK) {
            CHECKF(0, "forward at %d: %s", i, e.message);
            free(out);
            out = NULL;
        }
    }
    ps_session_free(s);
    ps_pool_free(pool);
    ps_model_free(m);
    return out;
}

static double *ref_logits(const char *path, const int32_t *ids, int32_t n, int64_t n_vocab,
                          const char *tag, int32_t model_ctx) {
    char ids_path[700], out_path[700], cmd[2400];
    snprintf(ids_path, sizeof ids_path, "%s.ids", outp(tag));
    snprintf(out_path, sizeof out_path, "%s.ref.f64", outp(tag));
    FILE *f = fopen(ids_path, "w");
    if (!f) return NULL;
    for (int32_t i = 0; i < n; i++) fprintf(f, "%d\n", ids[i]);
    fclose(f);
    remove(out_path);
    snprintf(cmd, sizeof cmd,
             PYTHON " " FORWARD_PY " '%s' --tokens-file '%s' --out '%s' --n-ctx %d", path,
             ids_path, out_path, (int)model_ctx);
    if (system(cmd) != 0) {
        fprintf(stderr, "  command failed: %s\n", cmd);
        return NULL;
    }
    FILE *g = fopen(out_path, "rb");
    if (!g) return NULL;
    const size_t nf = (size_t)n * (size_t)n_vocab;
    double *r = malloc(nf * sizeof(double));
    size_t got = fread(r, sizeof(double), nf, g);
    fclose(g);
    if (got != nf) {
        free(r);
        return NULL;
    }
    return r;
}

#endif
