/*
 * test_compare.c — many models compared with the base in one pass, in the library
 * (ps_score_params.compares, ps_ppl_params.compares), on generated models with the same
 * 600-token vocabulary: the base (llama F32), a qwen3, the base in Q8_0 and a llama F16 of
 * another seed.
 *   - score: each compared model's kld / same_top1 / dp are bitwise those of `compare` with it
 *     alone, and the base's own answers bitwise those of a score without compare; the same
 *     across chunk 256 / 7 / 1, 1 or 2 threads and k 5 / 0;
 *   - the base forwards each position once (the test hook ps_test_forward_rows), each
 *     compared model once too, however many are compared;
 *   - perplexity (llama mode): each compared model's ps_ppl_compare is bitwise that of
 *     comparing it alone, the base's figures those without compares; invariant across the
 *     batch (32 / 7) and threads; the base forwards chunks x ctx rows once; on_window gets
 *     each model's running statistics, whose last equal the result's means;
 *   - bad input: the same session twice, the base's own session, compare with compares, a
 *     compared model with another vocabulary size (named), generation, a prefix cache,
 *     ps_score_batch, compares in sliding perplexity: each a clear PS_ERR_INVALID_ARG;
 *   - every allocation of a compared score and perplexity failing in turn (fault injection):
 *     PS_ERR_NOMEM and no result, never a crash or a leak (valgrind / ASan builds).
 */
#include "check.h"
#include "gen/genmodel.h"
#include "base/impl.h"
#include "base/testhooks.h"
#include "run/session.h"
#include "promptscore.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NCMP 3
static char dir[512];

static const char *path_in(const char *name) {
    static char buf[4][640];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

static ps_model *gen(const char *name, const char *arch, uint32_t type, uint64_t seed,
                     int32_t n_vocab) {
    ps_genmodel_params p = ps_genmodel_default_params();
    ps_genmodel_preset("tiny", &p, NULL);
    if (arch) snprintf(p.arch, sizeof p.arch, "%s", arch);
    p.type = type;
    p.seed = seed;
    p.n_vocab = n_vocab;
    p.n_ctx = 1024;
    ps_error e;
    ps_model *m = NULL;
    if (ps_genmodel_write(&p, path_in(name), &e) != PS_OK ||
        ps_model_load(path_in(name), NULL, &m, &e) != PS_OK) {
        CHECKF(0, "cannot make %s: %s", name, e.message);
        return NULL;
    }
    return m;
}

static ps_session *sess(const ps_model *m, ps_pool *pool) {
    ps_session_params sp = ps_session_default_params();
    sp.n_ctx = 640;
    sp.pool = pool;
    ps_session *s = NULL;
    ps_error e;
    if (ps_session_create(m, &sp, &s, &e) != PS_OK) CHECKF(0, "session: %s", e.message);
    return s;
}

static bool same_f(const float *a, const float *b, int32_t n) {
    return a && b && memcmp(a, b, sizeof(float) * (size_t)n) == 0;
}
static bool same_i(const int32_t *a, const int32_t *b, int32_t n) {
    return a && b && memcmp(a, b, sizeof(int32_t) * (size_t)n) == 0;
}

/* A result's compares equal another's, model for model. */
static bool same_compares(const ps_score_result *a, const ps_score_result *b) {
    if (a->n_compares != b->n_compares) return false;
    for (int32_t c = 0; c < a->n_compares; c++)
        if (!same_f(a->compares[c].kld, b->compares[c].kld, a->n_total) ||
            !same_i(a->compares[c].same_top1, b->compares[c].same_top1, a->n_total) ||
            !same_f(a->compares[c].dp, b->compares[c].dp, a->n_total))
            return false;
    return true;
}

static void test_score(ps_model *base, ps_model *const *cm, ps_model *other_vocab) {
    ps_pool *pool2 = NULL, *pool1 = NULL;
    CHECK(ps_pool_create(2, &pool2) == PS_OK && ps_pool_create(1, &pool1) == PS_OK);
    ps_session *s = sess(base, pool2), *cs[NCMP], *s1 = sess(base, pool1), *cs1[NCMP];
    for (int i = 0; i < NCMP; i++) {
        cs[i] = sess(cm[i], pool2);
        cs1[i] = sess(cm[i], pool1);
    }
    const int32_t n = 2 * 256 + 17;
    int32_t ids[2 * 256 + 17];
    uint64_t r = 7;
    for (int32_t i = 0; i < n; i++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        ids[i] = i == 0 ? 1 : (int32_t)((r >> 33) % 600);
    }
    ps_error e;
    ps_score_params p = ps_score_default_params();
    p.compares = cs;
    p.n_compares = NCMP;
    ps_score_result *all = NULL;
    ps_test_forward_count_reset();
    CHECKF(ps_score_tokens(s, ids, n, &p, &all, &e) == PS_OK, "compares: %s", e.message);
    if (!all) return;
    CHECKF(ps_test_forward_rows(base) == n, "the base forwarded %lld rows for %d positions",
           (long long)ps_test_forward_rows(base), (int)n);
    for (int i = 0; i < NCMP; i++)
        CHECKF(ps_test_forward_rows(cm[i]) == n, "compared model %d forwarded %lld rows", i,
               (long long)ps_test_forward_rows(cm[i]));
    CHECK(all->n_compares == NCMP && all->kld == NULL);
    ps_model_info info;
    ps_model_get_info(cm[1], &info);
    CHECK(all->compares && !strcmp(all->compares[1].model, info.file));
    /* each model alone, through `compare` */
    ps_score_params q = ps_score_default_params();
    ps_score_result *plain = NULL;
    CHECK(ps_score_tokens(s, ids, n, &q, &plain, &e) == PS_OK);
    for (int i = 0; i < NCMP && plain; i++) {
        q.compare = cs[i];
        ps_score_result *one = NULL;
        CHECK(ps_score_tokens(s, ids, n, &q, &one, &e) == PS_OK);
        if (!one) continue;
        CHECKF(same_f(one->kld, all->compares[i].kld, n) &&
                   same_i(one->same_top1, all->compares[i].same_top1, n) &&
                   same_f(one->dp, all->compares[i].dp, n),
               "compared model %d: kld / same_top1 / dp differ from comparing it alone", i);
        ps_score_result_free(one);
    }
    if (plain) {
        CHECKF(same_f(plain->logprobs, all->logprobs, n) &&
                   same_i(plain->top_ids, all->top_ids, n * 5) &&
                   same_f(plain->top_logprobs, all->top_logprobs, n * 5) &&
                   plain->sum_logprob == all->sum_logprob,
               "the base's answers change with compares");
        ps_score_result_free(plain);
    }
    /* chunk, threads, k */
    static const struct {
        int32_t chunk, k;
        bool one_thread;
    } V[] = {{7, 5, false}, {1, 5, true}, {100, 0, true}, {256, 0, false}};
    for (size_t v = 0; v < sizeof V / sizeof V[0]; v++) {
        ps_score_params pv = p;
        pv.chunk = V[v].chunk;
        pv.k = V[v].k;
        if (V[v].one_thread) pv.compares = cs1;
        ps_score_result *o = NULL;
        CHECK(ps_score_tokens(V[v].one_thread ? s1 : s, ids, n, &pv, &o, &e) == PS_OK);
        if (o) {
            CHECKF(same_compares(o, all) && same_f(o->logprobs, all->logprobs, n),
                   "chunk %d, k %d, %d thread(s): compares not bitwise those of chunk 256",
                   V[v].chunk, V[v].k, V[v].one_thread ? 1 : 2);
        }
        ps_score_result_free(o);
    }
    ps_score_result_free(all);

    /* bad input */
    ps_session *twice[2] = {cs[0], cs[0]}, *own[2] = {cs[0], s};
    ps_session *ov = other_vocab ? sess(other_vocab, pool2) : NULL, *vs[2] = {cs[0], ov};
    struct {
        const char *what, *needle;
        ps_session **list;
        int32_t n;
        int extra; /* 1 compare too, 2 max_tokens, 3 a cache */
    } B[] = {{"the same session twice", "same session", twice, 2, 0},
             {"the base's own session", "base's session", own, 2, 0},
             {"compare with compares", "exclude", cs, 2, 1},
             {"another vocabulary size", "vocabularies differ", vs, 2, 0},
             {"generation", "max_tokens", cs, 2, 2},
             {"a prefix cache", "prefix cache", cs, 2, 3}};
    ps_prefix_cache *cache = NULL;
    ps_prefix_cache_params cp = ps_prefix_cache_default_params();
    CHECK(ps_prefix_cache_create(base, &cp, &cache, &e) == PS_OK);
    for (size_t b = 0; b < sizeof B / sizeof B[0]; b++) {
        if (b == 3 && !ov) continue;
        ps_score_params pb = ps_score_default_params();
        pb.compares = B[b].list;
        pb.n_compares = B[b].n;
        if (B[b].extra == 1) pb.compare = cs[1];
        if (B[b].extra == 2) pb.max_tokens = 3;
        if (B[b].extra == 3) pb.cache = cache;
        ps_score_result *o = NULL;
        ps_error_clear(&e);
        ps_status st = ps_score_tokens(s, ids, 20, &pb, &o, &e);
        CHECKF(st == PS_ERR_INVALID_ARG && !o && strstr(e.message, B[b].needle),
               "%s: status %d, '%s'", B[b].what, (int)st, e.message);
        ps_score_result_free(o);
    }
    if (ov) { /* the message names the compared model's file */
        ps_model_info oi;
        ps_model_get_info(other_vocab, &oi);
        ps_score_params pb = ps_score_default_params();
        pb.compares = vs;
        pb.n_compares = 2;
        ps_score_result *o = NULL;
        ps_score_tokens(s, ids, 20, &pb, &o, &e);
        CHECKF(strstr(e.message, oi.file) != NULL, "'%s' does not name %s", e.message, oi.file);
    }
    {
        ps_score_params pb = ps_score_default_params();
        pb.compares = cs;
        pb.n_compares = 2;
        ps_score_prompt pr = {ids, 20, &pb};
        ps_score_result *o = NULL;
        CHECK(ps_score_batch(s, &pr, 1, 1, &o, &e) == PS_ERR_INVALID_ARG && !o);
    }
    ps_prefix_cache_free(cache);
    ps_session_free(ov);
    for (int i = 0; i < NCMP; i++) {
        ps_session_free(cs[i]);
        ps_session_free(cs1[i]);
    }
    ps_session_free(s);
    ps_session_free(s1);
    ps_pool_free(pool1);
    ps_pool_free(pool2);
}

/* on_window: the last running statistics of each compared model */
typedef struct {
    int32_t calls, n;
    ps_ppl_compare last[NCMP];
} win_log;

static bool on_win(void *user, const ps_ppl_window *w) {
    win_log *l = user;
    l->calls++;
    l->n = w->n_compares;
    for (int32_t i = 0; i < w->n_compares && i < NCMP; i++) l->last[i] = w->compares[i];
    return true;
}

static bool same_ppl_cmp(const ps_ppl_compare *a, const ps_ppl_compare *b) {
    return memcmp(a, b, sizeof *a) == 0;
}

static void test_perplexity(ps_model *base, ps_model *const *cm) {
    ps_pool *pool2 = NULL, *pool1 = NULL;
    CHECK(ps_pool_create(2, &pool2) == PS_OK && ps_pool_create(1, &pool1) == PS_OK);
    ps_session *s = sess(base, pool2), *cs[NCMP], *s1 = sess(base, pool1), *cs1[NCMP];
    for (int i = 0; i < NCMP; i++) {
        cs[i] = sess(cm[i], pool2);
        cs1[i] = sess(cm[i], pool1);
    }
    const int32_t n = 200, ctx = 32;
    int32_t ids[200];
    uint64_t r = 11;
    for (int32_t i = 0; i < n; i++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        ids[i] = i == 0 ? 1 : (int32_t)((r >> 33) % 600);
    }
    ps_error e;
    ps_ppl_params p = ps_ppl_default_params();
    p.mode = PS_PPL_LLAMA;
    p.ctx = ctx;
    p.chunk = 32;
    ps_ppl_result *plain = NULL, *all = NULL;
    CHECKF(ps_perplexity(s, ids, n, &p, &plain, &e) == PS_OK, "plain: %s", e.message);
    win_log wl;
    memset(&wl, 0, sizeof wl);
    p.compares = cs;
    p.n_compares = NCMP;
    p.on_window = on_win;
    p.user = &wl;
    ps_test_forward_count_reset();
    CHECKF(ps_perplexity(s, ids, n, &p, &all, &e) == PS_OK, "compares: %s", e.message);
    if (!all || !plain) goto out;
    const int32_t n_chunk = n / ctx;
    CHECKF(ps_test_forward_rows(base) == (int64_t)n_chunk * ctx,
           "the base forwarded %lld rows for %d chunks of %d", (long long)ps_test_forward_rows(base),
           (int)n_chunk, (int)ctx);
    for (int i = 0; i < NCMP; i++)
        CHECK(ps_test_forward_rows(cm[i]) == (int64_t)n_chunk * ctx);
    CHECKF(all->perplexity == plain->perplexity &&
               all->perplexity_stderr == plain->perplexity_stderr &&
               all->n_windows == plain->n_windows &&
               memcmp(all->running, plain->running, sizeof(double) * (size_t)n_chunk) == 0,
           "the base's figures change with compares");
    CHECK(all->n_compares == NCMP && plain->n_compares == 0 && plain->compares == NULL);
    CHECK(wl.calls == n_chunk && wl.n == NCMP);
    for (int i = 0; i < NCMP; i++) {
        const ps_ppl_compare *k = &all->compares[i];
        CHECKF(k->count == (int64_t)n_chunk * (ctx - ctx / 2 - 1) && k->kld_mean > 0 &&
                   !isnan(k->kld_pct[0]) && k->kld_min <= k->kld_median &&
                   k->kld_median <= k->kld_max && k->same_top >= 0 && k->same_top <= 1,
               "compared model %d: implausible statistics", i);
        CHECKF(wl.last[i].kld_mean == k->kld_mean && wl.last[i].ppl_q == k->ppl_q &&
                   wl.last[i].same_top == k->same_top && isnan(wl.last[i].kld_max),
               "compared model %d: the last running figures are not the result's", i);
        /* alone */
        ps_ppl_params q = p;
        q.compares = &cs[i];
        q.n_compares = 1;
        q.on_window = NULL;
        ps_ppl_result *one = NULL;
        CHECK(ps_perplexity(s, ids, n, &q, &one, &e) == PS_OK);
        if (one)
            CHECKF(same_ppl_cmp(&one->compares[0], k),
                   "compared model %d: the statistics differ from comparing it alone", i);
        ps_ppl_result_free(one);
    }
    /* batch and threads */
    for (int v = 0; v < 2; v++) {
        ps_ppl_params q = p;
        q.on_window = NULL;
        q.chunk = v == 0 ? 7 : 32;
        if (v == 1) q.compares = cs1;
        ps_ppl_result *o = NULL;
        CHECK(ps_perplexity(v == 0 ? s : s1, ids, n, &q, &o, &e) == PS_OK);
        bool same = o && o->n_compares == NCMP;
        for (int i = 0; same && i < NCMP; i++)
            same = same_ppl_cmp(&o->compares[i], &all->compares[i]);
        CHECKF(same, "%s: the statistics are not bitwise those of batch 32 on 2 threads",
               v == 0 ? "batch 7" : "1 thread");
        ps_ppl_result_free(o);
    }
    /* bad input */
    {
        ps_session *twice[2] = {cs[0], cs[0]}, *own[2] = {cs[1], s};
        ps_ppl_params q = p;
        q.on_window = NULL;
        ps_ppl_result *o = NULL;
        q.compares = twice;
        q.n_compares = 2;
        CHECK(ps_perplexity(s, ids, n, &q, &o, &e) == PS_ERR_INVALID_ARG && !o &&
              strstr(e.message, "same session"));
        q.compares = own;
        CHECK(ps_perplexity(s, ids, n, &q, &o, &e) == PS_ERR_INVALID_ARG && !o &&
              strstr(e.message, "base's"));
        q.compares = cs;
        q.mode = PS_PPL_SLIDING;
        q.ctx = 0;
        CHECK(ps_perplexity(s, ids, n, &q, &o, &e) == PS_ERR_INVALID_ARG && !o &&
              strstr(e.message, "llama mode"));
    }
out:
    ps_ppl_result_free(plain);
    ps_ppl_result_free(all);
    for (int i = 0; i < NCMP; i++) {
        ps_session_free(cs[i]);
        ps_session_free(cs1[i]);
    }
    ps_session_free(s);
    ps_session_free(s1);
    ps_pool_free(pool1);
    ps_pool_free(pool2);
}

/* Allocation n failing, for n = 0, 1, ... until the call succeeds. */
static void test_faults(ps_model *base, ps_model *const *cm) {
    ps_pool *pool = NULL;
    CHECK(ps_pool_create(1, &pool) == PS_OK);
    ps_session *s = sess(base, pool), *cs[NCMP];
    for (int i = 0; i < NCMP; i++) cs[i] = sess(cm[i], pool);
    int32_t ids[70];
    for (int32_t i = 0; i < 70; i++) ids[i] = i == 0 ? 1 : (i * 37) % 600;
    int bad = 0, walked = 0;
    for (int which = 0; which < 2; which++) {
        bool done = false;
        for (int64_t n = 0; !done && n < 100000; n++) {
            ps_error e;
            ps_status st;
            bool got;
            ps_alloc_fail_after(n);
            if (which == 0) {
                ps_score_params p = ps_score_default_params();
                p.compares = cs;
                p.n_compares = NCMP;
                p.chunk = 16;
                ps_score_result *r = NULL;
                st = ps_score_tokens(s, ids, 40, &p, &r, &e);
                got = r != NULL;
                ps_score_result_free(r);
            } else {
                ps_ppl_params p = ps_ppl_default_params();
                p.mode = PS_PPL_LLAMA;
                p.ctx = 16;
                p.chunk = 8;
                p.compares = cs;
                p.n_compares = NCMP;
                ps_ppl_result *r = NULL;
                st = ps_perplexity(s, ids, 70, &p, &r, &e);
                got = r != NULL;
                ps_ppl_result_free(r);
            }
            ps_alloc_fail_after(-1);
            walked++;
            if (st == PS_OK) done = true;
            else if (st != PS_ERR_NOMEM || got) bad++;
        }
        CHECKF(done, "%s never succeeded under fault injection", which ? "perplexity" : "score");
    }
    CHECKF(bad == 0 && walked > 2, "%d of %d injected failures were not a clean PS_ERR_NOMEM",
           bad, walked);
    for (int i = 0; i < NCMP; i++) ps_session_free(cs[i]);
    ps_session_free(s);
    ps_pool_free(pool);
}

int main(void) {
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/ps-test-compare-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        CHECKF(0, "no temp dir");
        return ps_test_done("compare");
    }
    ps_model *base = gen("base.gguf", NULL, PS_GGML_F32, 3, 600);
    ps_model *cm[NCMP] = {gen("q3.gguf", "qwen3", PS_GGML_F32, 4, 600),
                          gen("q8.gguf", NULL, PS_GGML_Q8_0, 3, 600),
                          gen("f16.gguf", NULL, PS_GGML_F16, 5, 600)};
    ps_model *ov = gen("v700.gguf", NULL, PS_GGML_F32, 6, 700);
    if (base && cm[0] && cm[1] && cm[2]) {
        test_score(base, cm, ov);
        test_perplexity(base, cm);
        test_faults(base, cm);
    }
    ps_model_free(base);
    for (int i = 0; i < NCMP; i++) ps_model_free(cm[i]);
    ps_model_free(ov);
    const char *names[] = {"base.gguf", "q3.gguf", "q8.gguf", "f16.gguf", "v700.gguf"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) remove(path_in(names[i]));
    rmdir(dir);
    return ps_test_done("compare");
}
