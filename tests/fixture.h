/*
 * tests/fixture.h — the model-comparison set-up the family tests share (include after check.h):
 *   outp(name)          a path under out_dir (eight rotating buffers), which main() sets
 *   make_ids(n, V, s)   n pseudo-random ids below V from seed s, BOS (1) first (make_ids_bos:
 *                       another BOS id)
 *   c_logits(...)       the C library's logits (n, n_vocab) in chunks, on an ISA and activation
 *                       mode, 1 or more threads, the model loaded with model_ctx (0: the file's)
 *   c_logits_run(...)   the same with an fx_run: a given pool, the session's n_ctx, repeated
 *                       passes after a reset, hooks on the loaded model and on the finished
 *                       session, and what the session saw (KV floats, active experts);
 *                       fx_logits runs it on a model already loaded
 *   ref_logits(...)     tests/reference/forward.py's float64 logits for the same ids
 *                       (ref_logits_args: other forward.py options, files removed after)
 * Static (inline) functions: each test file gets its own copy, as with check.h.
 */
#ifndef PS_TEST_FIXTURE_H
#define PS_TEST_FIXTURE_H

#include "base/impl.h"
#include "model/model.h"
#include "promptscore.h"
#include "run/session.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#define FORWARD_PY "tests/reference/forward.py"
#define PYTHON "/usr/bin/python3"

static char out_dir[512];

/* Sets out_dir to this test's own folder for the fixtures it generates: tests/out/reference/NAME
 * (from the repository root; kept after the run to be looked at, rewritten by the next run),
 * else a fresh $TMPDIR/ps-NAME-XXXXXX, else ".". One folder per test, so that tests running at
 * once never write the same file. */
static inline void ps_test_out_dir(const char *name) {
    mkdir("tests/out", 0755);
    mkdir("tests/out/reference", 0755);
    snprintf(out_dir, sizeof out_dir, "tests/out/reference/%s", name);
    mkdir(out_dir, 0755);
    struct stat st;
    if (stat(out_dir, &st) == 0 && S_ISDIR(st.st_mode)) return;
    const char *tmp = getenv("TMPDIR");
    snprintf(out_dir, sizeof out_dir, "%s/ps-%s-XXXXXX", tmp && *tmp ? tmp : "/tmp", name);
    if (!mkdtemp(out_dir)) snprintf(out_dir, sizeof out_dir, ".");
}

static inline const char *outp(const char *name) {
    static char buf[8][640];
    static int k;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", out_dir, name);
    return buf[k];
}

static inline int32_t *make_ids_bos(int32_t n, int32_t n_vocab, uint64_t seed, int32_t bos) {
    int32_t *ids = malloc((size_t)n * sizeof *ids);
    uint64_t s = seed;
    for (int32_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        ids[i] = i == 0 ? bos : (int32_t)((s >> 33) % (uint64_t)n_vocab);
    }
    return ids;
}

static inline int32_t *make_ids(int32_t n, int32_t n_vocab, uint64_t seed) {
    return make_ids_bos(n, n_vocab, seed, 1);
}

/* How a prompt is run (fx_run_of gives the plain settings). */
typedef struct {
    int32_t chunk;     /* positions per ps_session_forward */
    ps_isa isa;
    ps_act act;
    ps_kv_type kv_type; /* the session's K/V cache type (default PS_KV_F32) */
    int32_t threads;   /* > 1: a pool of that many for the run */
    ps_pool *pool;     /* or this one (kept) */
    int32_t model_ctx; /* c_logits_run loads with this n_ctx (0: the file's) */
    int32_t n_ctx;     /* the session's (0: n) */
    int passes;        /* > 1: the prompt again after ps_session_reset, bitwise the same */
    void (*on_model)(ps_model *m, void *ud);  /* c_logits_run: after loading */
    void (*on_done)(ps_session *s, const int32_t *ids, int32_t n, const float *out, void *ud);
    void *ud;          /* for the two hooks */
    /* what the run saw */
    int64_t kv_floats; /* the session's KV cache */
    int32_t active;    /* experts with rows in the last chunk's last layer */
    int32_t max_rows;  /* the most rows one of them got, of all_rows */
    int32_t all_rows;
} fx_run;

static inline fx_run fx_run_of(int32_t chunk, ps_isa isa, ps_act act, int32_t threads) {
    fx_run r;
    memset(&r, 0, sizeof r);
    r.chunk = chunk;
    r.isa = isa;
    r.act = act;
    r.threads = threads;
    r.passes = 1;
    return r;
}

/* Logits (n, n_vocab) of the ids on model m as r says (malloc), or NULL. */
static inline float *fx_logits(const ps_model *m, const int32_t *ids, int32_t n, fx_run *r) {
    ps_error e;
    ps_model_info info;
    ps_model_get_info(m, &info);
    ps_pool *pool = r->pool;
    if (!pool && r->threads > 1) ps_pool_create(r->threads, &pool);
    ps_session_params sp = ps_session_default_params();
    sp.n_ctx = r->n_ctx > 0 ? r->n_ctx : n;
    sp.n_batch = r->chunk;
    sp.isa = r->isa;
    sp.act = r->act;
    sp.kv_type = r->kv_type;
    sp.pool = pool;
    ps_session *s = NULL;
    ps_status st = ps_session_create(m, &sp, &s, &e);
    CHECKF(st == PS_OK, "session: %s", e.message);
    if (s) r->kv_floats = s->seq->kv_elems;
    const size_t nf = (size_t)n * (size_t)info.n_vocab;
    float *out = st == PS_OK ? malloc(nf * sizeof(float)) : NULL;
    float *again = r->passes > 1 && out ? malloc(nf * sizeof(float)) : NULL;
    for (int pass = 0; out && pass < PS_MAX(r->passes, 1); pass++) {
        float *dst = pass ? again : out;
        if (pass) ps_session_reset(s);
        for (int32_t i = 0; i < n; i += r->chunk) {
            st = ps_session_forward(s, ids + i, PS_MIN(r->chunk, n - i),
                                    dst + (size_t)i * (size_t)info.n_vocab, &e);
            if (st != PS_OK) {
                CHECKF(0, "forward at %d: %s", i, e.message);
                free(out);
                out = NULL;
                break;
            }
        }
        if (out && pass) CHECKF(!memcmp(out, again, nf * 4), "a reset session differs");
    }
    free(again);
    if (out && m->hp.n_expert > 0) {
        r->active = r->max_rows = 0;
        for (int32_t x = 0; x < m->hp.n_expert; x++) {
            const int32_t rows = s->moe_start[x + 1] - s->moe_start[x];
            r->active += rows > 0;
            r->max_rows = PS_MAX(r->max_rows, rows);
        }
        r->all_rows = s->moe_start[m->hp.n_expert];
    }
    if (out && r->on_done) r->on_done(s, ids, n, out, r->ud);
    ps_session_free(s);
    if (pool != r->pool) ps_pool_free(pool);
    return out;
}

/* fx_logits on the model at path, loaded with r->model_ctx; *n_vocab its vocabulary. */
static inline float *c_logits_run(const char *path, const int32_t *ids, int32_t n, fx_run *r,
                                  int64_t *n_vocab) {
    ps_error e;
    ps_model *m = NULL;
    ps_model_params mp = ps_model_default_params();
    mp.n_ctx = r->model_ctx;
    if (ps_model_load(path, &mp, &m, &e) != PS_OK) {
        CHECKF(0, "load %s: %s", path, e.message);
        return NULL;
    }
    ps_model_info info;
    ps_model_get_info(m, &info);
    *n_vocab = info.n_vocab;
    if (r->on_model) r->on_model(m, r->ud);
    float *out = fx_logits(m, ids, n, r);
    ps_model_free(m);
    return out;
}

/* Logits (n, n_vocab) in chunks of `chunk` on a model loaded with model_ctx (0: the file's). */
static inline float *c_logits(const char *path, const int32_t *ids, int32_t n, int32_t chunk,
                              ps_isa isa, ps_act act, int32_t threads, int32_t model_ctx,
                              int64_t *n_vocab) {
    fx_run r = fx_run_of(chunk, isa, act, threads);
    r.model_ctx = model_ctx;
    return c_logits_run(path, ids, n, &r, n_vocab);
}

/* forward.py's logits with the options args (a shell fragment); remove: the ids and output
 * files go once read. */
static inline double *ref_logits_args(const char *path, const int32_t *ids, int32_t n,
                                      int64_t n_vocab, const char *tag, const char *args,
                                      bool remove_after) {
    char ids_path[700], out_path[700], cmd[2400];
    snprintf(ids_path, sizeof ids_path, "%s.ids", outp(tag));
    snprintf(out_path, sizeof out_path, "%s.ref.f64", outp(tag));
    FILE *f = fopen(ids_path, "w");
    if (!f) return NULL;
    for (int32_t i = 0; i < n; i++) fprintf(f, "%d\n", ids[i]);
    fclose(f);
    remove(out_path);
    snprintf(cmd, sizeof cmd, PYTHON " " FORWARD_PY " '%s' --tokens-file '%s' --out '%s'%s%s",
             path, ids_path, out_path, *args ? " " : "", args);
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
    if (remove_after) {
        remove(out_path);
        remove(ids_path);
    }
    if (got != nf) {
        free(r);
        return NULL;
    }
    return r;
}

static inline double *ref_logits(const char *path, const int32_t *ids, int32_t n,
                                 int64_t n_vocab, const char *tag, int32_t model_ctx) {
    char args[32];
    snprintf(args, sizeof args, "--n-ctx %d", (int)model_ctx);
    return ref_logits_args(path, ids, n, n_vocab, tag, args, false);
}

#endif
