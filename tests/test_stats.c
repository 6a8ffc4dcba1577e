/*
 * test_stats.c — the statistics of the top-K kernel (entropy and rank in ps_topk_out) and the
 * KL divergence of two batches (ps_kld_compute):
 *   - entropy and rank from the fast path equal the reference path's bit for bit, on every
 *     ISA the CPU has and on 1 or 3 threads; asking for them changes no other output bit;
 *   - entropy is within 1e-5 (relative to max(1, H)) of a float64 -sum p log p of the same
 *     logits, varentropy (sum p (log p)^2 - H^2) within 1e-5 relative to max(1, V) of a
 *     float64 two-pass sum p (log p + H)^2 (also on near-uniform rows, where the one-pass
 *     form cancels most), and asking for varentropy leaves every entropy bit as it was, and rank equals a plain count (ties by ascending id), with -inf logits, ties,
 *     ragged tails and f16 / bf16 rows;
 *   - KLD: a batch against itself is exactly 0; against another within 1e-5 of float64;
 *     invariant across ISAs and threads; shapes that differ are refused;
 *   - the scorer (stories260K from ../shared): stats off leaves the new arrays NULL and the
 *     rest bitwise as with them; entropy/rank equal the kernel's on the session's own logits;
 *     compare with a second session of the same model gives kld 0, same_top1 1, dp 0 and
 *     leaves the base's answers unchanged; compare is refused with a cache, with generation
 *     and by ps_score_batch; ps_vocab_same names what differs;
 *   - the compared session running in the base's workspace (ps_session_share_workspace, as
 *     score / serve / perplexity --compare do) gives every array bitwise as with its own, on a
 *     compared session that computes other numbers (an f16 K/V cache); sharing is refused
 *     with a smaller lender, with itself and twice.
 */
#include "promptscore.h"
#include "check.h"
#include "run/session.h"

#include <math.h>
#include <stdint.h>

static uint64_t rng = 12345;
static double urand(void) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng >> 11) * 0x1.0p-53;
}

static uint16_t f32_to_f16(float f) { /* round to nearest even via the compiler's _Float16 */
    _Float16 h = (_Float16)f;
    uint16_t u;
    memcpy(&u, &h, 2);
    return u;
}
static uint16_t f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}
static float bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static float f16_to_f32(uint16_t h) {
    _Float16 x;
    memcpy(&x, &h, 2);
    return (float)x;
}

/* A batch of rows x n logits as float (x) and in dtype dt (data). Some logits -inf, some
 * rows with many ties (values on a coarse grid), the scale varying per row. */
typedef struct {
    int64_t rows, n;
    ps_dtype dt;
    float *x;
    void *data;
    int32_t *targets;
} batch;

static batch make_batch(int64_t rows, int64_t n, ps_dtype dt, double scale) {
    batch b = {rows, n, dt, malloc((size_t)(rows * n) * 4), NULL, malloc((size_t)rows * 4)};
    b.data = malloc((size_t)(rows * n) * 4);
    for (int64_t r = 0; r < rows; r++) {
        bool grid = r % 3 == 1;
        for (int64_t i = 0; i < n; i++) {
            double v = (urand() * 2 - 1) * scale * (1 + r % 4);
            if (grid) v = floor(v * 2) / 2;
            float f = urand() < 0.01 ? -INFINITY : (float)v;
            if (dt == PS_DTYPE_F16) f = f16_to_f32(f32_to_f16(f));
            if (dt == PS_DTYPE_BF16) f = bf16_to_f32(f32_to_bf16(f));
            b.x[r * n + i] = f;
            if (dt == PS_DTYPE_F32) ((float *)b.data)[r * n + i] = f;
            else if (dt == PS_DTYPE_F16) ((uint16_t *)b.data)[r * n + i] = f32_to_f16(f);
            else ((uint16_t *)b.data)[r * n + i] = f32_to_bf16(f);
        }
        int32_t t = (int32_t)(urand() * (double)n);
        if (b.x[r * n + t] == -INFINITY) b.x[r * n + t] = b.x[r * n + t]; /* a -inf target too */
        b.targets[r] = r == rows - 1 ? -1 : t;
    }
    return b;
}
static void batch_free(batch *b) {
    free(b->x);
    free(b->data);
    free(b->targets);
}

static double naive_entropy(const float *x, int64_t n) {
    double m = -INFINITY, s = 0, t = 0;
    for (int64_t i = 0; i < n; i++) m = x[i] > m ? x[i] : m;
    for (int64_t i = 0; i < n; i++) s += exp((double)x[i] - m);
    double lse = m + log(s);
    for (int64_t i = 0; i < n; i++) {
        if (x[i] == -INFINITY) continue;
        double lp = (double)x[i] - lse;
        t -= exp(lp) * lp;
    }
    return t;
}

/* Two passes in float64: H first, then sum p (log p + H)^2 (no cancellation). */
static double naive_varentropy(const float *x, int64_t n) {
    double m = -INFINITY, s = 0, h = naive_entropy(x, n), v = 0;
    for (int64_t i = 0; i < n; i++) m = x[i] > m ? x[i] : m;
    for (int64_t i = 0; i < n; i++) s += exp((double)x[i] - m);
    double lse = m + log(s);
    for (int64_t i = 0; i < n; i++) {
        if (x[i] == -INFINITY) continue;
        double lp = (double)x[i] - lse;
        v += exp(lp) * (lp + h) * (lp + h);
    }
    return v;
}

static int32_t naive_rank(const float *x, int64_t n, int32_t t) {
    int32_t r = 1;
    for (int64_t i = 0; i < n; i++) r += x[i] > x[t] || (x[i] == x[t] && i < t);
    return r;
}

static double naive_kld(const float *a, const float *b, int64_t n) {
    double ma = -INFINITY, mb = -INFINITY, sa = 0, sb = 0, k = 0;
    for (int64_t i = 0; i < n; i++) {
        ma = a[i] > ma ? a[i] : ma;
        mb = b[i] > mb ? b[i] : mb;
    }
    for (int64_t i = 0; i < n; i++) {
        sa += exp((double)a[i] - ma);
        sb += exp((double)b[i] - mb);
    }
    double la = ma + log(sa), lb = mb + log(sb);
    for (int64_t i = 0; i < n; i++) {
        if (a[i] == -INFINITY) continue;
        k += exp((double)a[i] - la) * (((double)a[i] - la) - ((double)b[i] - lb));
    }
    return k;
}

typedef struct {
    float *lse, *tlp, *lps, *ent;
    int32_t *ids, *rank;
    float *var;
} outs;

static ps_status run(bool ref, ps_isa isa, ps_pool *pool, int32_t k, const batch *b, outs *o,
                     bool stats) {
    ps_topk_params p = ps_topk_default_params();
    p.k = k;
    p.isa = isa;
    p.pool = pool;
    ps_logits lg = {b->data, b->dt, b->rows, b->n, b->n, b->targets};
    ps_topk_out out = {o->lse, o->tlp, o->ids, o->lps, stats ? o->ent : NULL,
                       stats ? o->rank : NULL, stats ? o->var : NULL};
    return ref ? ps_topk_reference(&p, &lg, &out, NULL) : ps_topk_compute(&p, &lg, &out, NULL);
}

static outs outs_new(int64_t rows, int32_t k) {
    outs o = {calloc((size_t)rows, 4), calloc((size_t)rows, 4),
              calloc((size_t)(rows * (k ? k : 1)), 4), calloc((size_t)rows, 4),
              calloc((size_t)(rows * (k ? k : 1)), 4), calloc((size_t)rows, 4),
              calloc((size_t)rows, 4)};
    return o;
}
static void outs_free(outs *o) {
    free(o->lse); free(o->tlp); free(o->lps); free(o->ent); free(o->ids); free(o->rank);
    free(o->var);
}

static void test_entropy_rank(ps_pool *pool3) {
    const int64_t sizes[] = {1, 37, 64, 200, 4096, 4096 + 64 * 3 + 5, 3 * 4096 + 17, 32000};
    const ps_dtype dts[] = {PS_DTYPE_F32, PS_DTYPE_F16, PS_DTYPE_BF16};
    const ps_isa isas[] = {PS_ISA_SCALAR, PS_ISA_AVX2, PS_ISA_AVX512};
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
        for (size_t di = 0; di < 3; di++) {
            const int64_t n = sizes[si], rows = 9;
            batch b = make_batch(rows, n, dts[di], si % 2 ? 3.0 : 20.0);
            const int32_t k = 4;
            outs ref = outs_new(rows, k), plain = outs_new(rows, k);
            CHECK(run(true, PS_ISA_SCALAR, NULL, k, &b, &ref, true) == PS_OK);
            CHECK(run(false, PS_ISA_AUTO, NULL, k, &b, &plain, false) == PS_OK);
            /* the reference against float64 and a plain count */
            int bad_h = 0, bad_r = 0, bad_v = 0;
            for (int64_t r = 0; r < rows; r++) {
                double h = naive_entropy(b.x + r * n, n), v = naive_varentropy(b.x + r * n, n);
                if (!(fabs((double)ref.var[r] - v) <= 1e-5 * fmax(1.0, v)) && !bad_v++)
                    fprintf(stderr, "n %lld dt %d row %lld: varentropy %.9g, float64 %.9g\n",
                            (long long)n, (int)dts[di], (long long)r, (double)ref.var[r], v);
                if (!(fabs((double)ref.ent[r] - h) <= 1e-5 * fmax(1.0, h))) {
                    if (!bad_h++)
                        fprintf(stderr, "n %lld dt %d row %lld: entropy %.9g, float64 %.9g\n",
                                (long long)n, (int)dts[di], (long long)r, (double)ref.ent[r], h);
                }
                int32_t want = b.targets[r] < 0 ? 0 : naive_rank(b.x + r * n, n, b.targets[r]);
                if (ref.rank[r] != want && !bad_r++)
                    fprintf(stderr, "n %lld row %lld: rank %d, want %d\n", (long long)n,
                            (long long)r, ref.rank[r], want);
            }
            CHECKF(bad_h == 0, "n %lld dtype %d: %d rows off", (long long)n, (int)dts[di], bad_h);
            CHECKF(bad_r == 0, "n %lld dtype %d: %d ranks off", (long long)n, (int)dts[di], bad_r);
            CHECKF(bad_v == 0, "n %lld dtype %d: %d varentropies off", (long long)n, (int)dts[di],
                   bad_v);
            { /* entropy alone (no varentropy asked): the same bits */
                outs e1 = outs_new(rows, k);
                ps_topk_params p1 = ps_topk_default_params();
                p1.k = k;
                ps_logits lg1 = {b.data, b.dt, b.rows, b.n, b.n, b.targets};
                ps_topk_out o1 = {e1.lse, e1.tlp, e1.ids, e1.lps, e1.ent, NULL, NULL};
                CHECK(ps_topk_compute(&p1, &lg1, &o1, NULL) == PS_OK);
                CHECKF(!memcmp(e1.ent, ref.ent, (size_t)rows * 4),
                       "n %lld dtype %d: entropy alone differs from entropy with varentropy",
                       (long long)n, (int)dts[di]);
                outs_free(&e1);
            }
            /* fast path on each ISA and thread count: same bits as the reference; the other
             * outputs are those of a call without statistics */
            for (size_t ii = 0; ii < 3; ii++) {
                if (!ps_isa_supported(isas[ii])) continue;
                for (int th = 0; th < 2; th++) {
                    outs o = outs_new(rows, k);
                    CHECK(run(false, isas[ii], th ? pool3 : NULL, k, &b, &o, true) == PS_OK);
                    CHECKF(!memcmp(o.ent, ref.ent, (size_t)rows * 4) &&
                               !memcmp(o.rank, ref.rank, (size_t)rows * 4) &&
                               !memcmp(o.var, ref.var, (size_t)rows * 4),
                           "n %lld dtype %d isa %s threads %d: statistics differ from the "
                           "reference", (long long)n, (int)dts[di], ps_isa_name(isas[ii]),
                           th ? 3 : 1);
                    CHECK(!memcmp(o.lse, plain.lse, (size_t)rows * 4) &&
                          !memcmp(o.tlp, plain.tlp, (size_t)rows * 4) &&
                          !memcmp(o.ids, plain.ids, (size_t)(rows * k) * 4) &&
                          !memcmp(o.lps, plain.lps, (size_t)(rows * k) * 4));
                    outs_free(&o);
                }
            }
            /* rank of the top-1 is 1; k = 0 still gives the statistics */
            outs z = outs_new(rows, 0);
            CHECK(run(false, PS_ISA_AUTO, NULL, 0, &b, &z, true) == PS_OK);
            CHECK(!memcmp(z.ent, ref.ent, (size_t)rows * 4) &&
                  !memcmp(z.rank, ref.rank, (size_t)rows * 4) &&
                  !memcmp(z.var, ref.var, (size_t)rows * 4));
            outs_free(&z);
            for (int64_t r = 0; r < rows; r++)
                if (b.targets[r] == ref.ids[r * k]) CHECK(ref.rank[r] == 1);
            outs_free(&ref);
            outs_free(&plain);
            batch_free(&b);
        }
    }
}

/* Rows where the one-pass form cancels: near-uniform over a 32000 vocabulary (V ~ 1e-4 against
 * sum p (log p)^2 ~ 108), a one-hot row (V exactly 0), and a row of only -inf (NaN). */
static void test_varentropy_edges(ps_pool *pool3) {
    const int64_t n = 32000, rows = 4;
    batch b = make_batch(rows, n, PS_DTYPE_F32, 1.0);
    for (int64_t i = 0; i < rows * n; i++) {
        float f = (float)(0.01 * (urand() - 0.5));
        if (i / n == 2) f = i % n == 77 ? 0.0f : -INFINITY; /* one-hot */
        if (i / n == 3) f = -INFINITY;
        b.x[i] = f;
        ((float *)b.data)[i] = f;
    }
    outs ref = outs_new(rows, 2);
    CHECK(run(true, PS_ISA_SCALAR, NULL, 2, &b, &ref, true) == PS_OK);
    for (int64_t r = 0; r < 2; r++) {
        double v = naive_varentropy(b.x + r * n, n);
        CHECKF(fabs((double)ref.var[r] - v) <= 1e-6, "near-uniform row %lld: varentropy %.9g, "
               "float64 %.9g", (long long)r, (double)ref.var[r], v);
    }
    CHECKF(ref.var[2] == 0.0f && ref.ent[2] == 0.0f, "one-hot: varentropy %g entropy %g",
           (double)ref.var[2], (double)ref.ent[2]);
    CHECK(isnan(ref.var[3]) && isnan(ref.ent[3]));
    const ps_isa isas[] = {PS_ISA_SCALAR, PS_ISA_AVX2, PS_ISA_AVX512};
    for (size_t ii = 0; ii < 3; ii++) {
        if (!ps_isa_supported(isas[ii])) continue;
        outs o = outs_new(rows, 2);
        CHECK(run(false, isas[ii], pool3, 2, &b, &o, true) == PS_OK);
        CHECKF(!memcmp(o.var, ref.var, (size_t)rows * 4), "isa %s: edge varentropy differs",
               ps_isa_name(isas[ii]));
        outs_free(&o);
    }
    outs_free(&ref);
    batch_free(&b);
}

static void test_kld(ps_pool *pool3) {
    const int64_t sizes[] = {5, 64, 4096 + 100, 3 * 4096 + 64 + 9};
    const ps_isa isas[] = {PS_ISA_SCALAR, PS_ISA_AVX2, PS_ISA_AVX512};
    for (size_t si = 0; si < 4; si++) {
        const int64_t n = sizes[si], rows = 6;
        batch a = make_batch(rows, n, PS_DTYPE_F32, 8.0), b = make_batch(rows, n, PS_DTYPE_F32, 8.0);
        for (int64_t i = 0; i < rows * n; i++) { /* b: a perturbed, finite where a is finite */
            if (a.x[i] == -INFINITY) continue;
            b.x[i] = a.x[i] + (float)(urand() - 0.5);
            ((float *)b.data)[i] = b.x[i];
        }
        ps_logits la = {a.data, PS_DTYPE_F32, rows, n, n, NULL};
        ps_logits lb = {b.data, PS_DTYPE_F32, rows, n, n, NULL};
        ps_topk_params p = ps_topk_default_params();
        float kself[6], kab[6], k2[6];
        p.isa = PS_ISA_SCALAR;
        CHECK(ps_kld_compute(&p, &la, &la, kself, NULL) == PS_OK);
        CHECK(ps_kld_compute(&p, &la, &lb, kab, NULL) == PS_OK);
        for (int64_t r = 0; r < rows; r++) {
            CHECKF(kself[r] == 0.0f, "n %lld row %lld: self kld %g", (long long)n, (long long)r,
                   (double)kself[r]);
            double want = naive_kld(a.x + r * n, b.x + r * n, n);
            CHECKF(fabs((double)kab[r] - want) <= 1e-5 * fmax(1.0, want),
                   "n %lld row %lld: kld %.9g float64 %.9g", (long long)n, (long long)r,
                   (double)kab[r], want);
        }
        for (size_t ii = 0; ii < 3; ii++) {
            if (!ps_isa_supported(isas[ii])) continue;
            p.isa = isas[ii];
            p.pool = pool3;
            CHECK(ps_kld_compute(&p, &la, &lb, k2, NULL) == PS_OK);
            CHECKF(!memcmp(k2, kab, sizeof k2), "isa %s: kld differs", ps_isa_name(isas[ii]));
        }
        /* shapes that differ */
        ps_logits shorter = lb;
        shorter.n_vocab = n - 1 > 0 ? n - 1 : 1;
        shorter.row_stride = n;
        ps_error e;
        if (n > 1) {
            CHECK(ps_kld_compute(&p, &la, &shorter, k2, &e) == PS_ERR_INVALID_ARG);
            CHECK(strstr(e.message, "differ") != NULL);
        }
        batch_free(&a);
        batch_free(&b);
    }
}

static void test_scorer(ps_pool *pool3) {
    const char *sh = ps_test_shared();
    if (!sh) {
        SKIP("../shared missing: the scorer cases need stories260K");
        return;
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/models/stories260K.gguf", sh);
    ps_model *m = NULL;
    ps_model_params mp = ps_model_default_params();
    if (ps_model_load(path, &mp, &m, NULL) != PS_OK) {
        SKIP("cannot load %s", path);
        return;
    }
    ps_session_params sp = ps_session_default_params();
    sp.pool = pool3;
    ps_session *s1 = NULL, *s2 = NULL;
    CHECK(ps_session_create(m, &sp, &s1, NULL) == PS_OK);
    CHECK(ps_session_create(m, &sp, &s2, NULL) == PS_OK);
    int32_t toks[300];
    toks[0] = 1;
    for (int i = 1; i < 300; i++) toks[i] = 3 + (int32_t)((i * 7919u) % 500u);
    ps_score_params p = ps_score_default_params();
    p.chunk = 7;
    ps_score_result *plain = NULL, *st = NULL, *cmp = NULL;
    CHECK(ps_score_tokens(s1, toks, 300, &p, &plain, NULL) == PS_OK);
    CHECK(plain && !plain->entropy && !plain->rank && !plain->kld);
    p.stats = true;
    CHECK(ps_score_tokens(s1, toks, 300, &p, &st, NULL) == PS_OK);
    p.compare = s2;
    CHECK(ps_score_tokens(s1, toks, 300, &p, &cmp, NULL) == PS_OK);
    if (plain && st && cmp) {
        CHECK(!memcmp(plain->logprobs + 1, st->logprobs + 1, 299 * 4) &&
              !memcmp(plain->top_ids, st->top_ids, 300 * 5 * 4) &&
              !memcmp(st->logprobs + 1, cmp->logprobs + 1, 299 * 4) &&
              !memcmp(st->entropy + 1, cmp->entropy + 1, 299 * 4) &&
              !memcmp(st->rank, cmp->rank, 300 * 4));
        CHECK(isnan(st->entropy[0]) && st->rank[0] == 0 && cmp->same_top1[0] == -1);
        int bad = 0;
        for (int i = 1; i < 300; i++)
            bad += cmp->kld[i] != 0.0f || cmp->same_top1[i] != 1 || cmp->dp[i] != 0.0f ||
                   (st->rank[i] == 1) != (st->top_ids[i * 5] == toks[i]);
        CHECKF(bad == 0, "%d positions: self-compare not 0/1/0 or rank 1 not the top-1", bad);
        /* entropy and rank equal the kernel's on the session's logits of one chunk */
        float *lg = malloc(sizeof(float) * 300 * (size_t)ps_vocab_n_tokens(ps_model_vocab(m)));
        ps_session_reset(s1);
        CHECK(ps_session_forward(s1, toks, 7, lg, NULL) == PS_OK);
        ps_topk_params tp = ps_topk_default_params();
        float ent[6];
        int32_t rk[6];
        ps_logits L = {lg, PS_DTYPE_F32, 6, ps_vocab_n_tokens(ps_model_vocab(m)),
                       ps_vocab_n_tokens(ps_model_vocab(m)), toks + 1};
        ps_topk_out o = {.entropy = ent, .rank = rk};
        tp.k = 0;
        CHECK(ps_topk_reference(&tp, &L, &o, NULL) == PS_OK);
        CHECK(!memcmp(ent, st->entropy + 1, sizeof ent) && !memcmp(rk, st->rank + 1, sizeof rk));
        free(lg);
    }
    /* refusals */
    ps_score_result *r = NULL;
    ps_error e;
    ps_prefix_cache *cache = NULL;
    ps_prefix_cache_params cp = ps_prefix_cache_default_params();
    CHECK(ps_prefix_cache_create(m, &cp, &cache, NULL) == PS_OK);
    p.cache = cache;
    CHECK(ps_score_tokens(s1, toks, 300, &p, &r, &e) == PS_ERR_INVALID_ARG && !r);
    CHECK(strstr(e.message, "prefix cache") != NULL);
    p.cache = NULL;
    p.max_tokens = 2;
    CHECK(ps_score_tokens(s1, toks, 300, &p, &r, &e) == PS_ERR_INVALID_ARG && !r);
    p.max_tokens = 0;
    ps_score_prompt pr = {toks, 300, &p};
    CHECK(ps_score_batch(s1, &pr, 1, 1, &r, &e) == PS_ERR_INVALID_ARG && !r);
    p.compare = s1;
    CHECK(ps_score_tokens(s1, toks, 300, &p, &r, &e) == PS_ERR_INVALID_ARG && !r);
    /* with a cache and stats: a second score restores the blocks and their statistics */
    p.compare = NULL;
    p.cache = cache;
    ps_score_result *c1 = NULL, *c2 = NULL;
    CHECK(ps_score_tokens(s1, toks, 300, &p, &c1, NULL) == PS_OK);
    CHECK(ps_score_tokens(s1, toks, 300, &p, &c2, NULL) == PS_OK);
    ps_prefix_cache_stats cs;
    ps_prefix_cache_get_stats(cache, &cs);
    CHECK(cs.hits > 0);
    if (c1 && c2 && st)
        CHECK(!memcmp(c2->entropy + 1, st->entropy + 1, 299 * 4) &&
              !memcmp(c2->rank, st->rank, 300 * 4) && !memcmp(c1->entropy + 1, st->entropy + 1, 299 * 4));
    p.stats = false; /* a cached score not asking for them gets none */
    CHECK(ps_score_tokens(s1, toks, 300, &p, &r, NULL) == PS_OK && r && !r->entropy && !r->rank);
    ps_score_result_free(r);
    /* the compared session in the base's workspace: the same bits as in its own */
    ps_session_params sp16 = sp;
    sp16.kv_type = PS_KV_F16;
    ps_session *s3 = NULL, *s4 = NULL, *small = NULL;
    CHECK(ps_session_create(m, &sp16, &s3, NULL) == PS_OK);
    CHECK(ps_session_create(m, &sp16, &s4, NULL) == PS_OK);
    ps_session_params sps = sp;
    sps.n_batch = 8;
    CHECK(ps_session_create(m, &sps, &small, NULL) == PS_OK);
    if (s3 && s4 && small) {
        CHECK(!ps_session_share_workspace(s4, small)); /* smaller than s4's */
        CHECK(!ps_session_share_workspace(s1, s1));
        CHECK(ps_session_share_workspace(s4, s1));
        CHECK(!ps_session_share_workspace(s4, s1)); /* already borrowed */
        CHECK(s4->ws == s1->ws && s4->x != s3->x);
        ps_score_result *own = NULL, *shared = NULL;
        p.compare = s3;
        p.cache = NULL;
        p.stats = true;
        p.chunk = 100;
        CHECK(ps_score_tokens(s1, toks, 300, &p, &own, NULL) == PS_OK);
        p.compare = s4;
        CHECK(ps_score_tokens(s1, toks, 300, &p, &shared, NULL) == PS_OK);
        p.compare = NULL;
        p.cache = cache;
        p.stats = false;
        p.chunk = 7;
        if (own && shared) {
            int differ = 0;
            for (int i = 1; i < 300; i++) differ += own->kld[i] != 0.0f;
            CHECKF(differ > 0, "the f16 cache changed no kld (%d)", differ);
            CHECK(!memcmp(own->logprobs + 1, shared->logprobs + 1, 299 * 4) &&
                  !memcmp(own->kld + 1, shared->kld + 1, 299 * 4) &&
                  !memcmp(own->dp + 1, shared->dp + 1, 299 * 4) &&
                  !memcmp(own->same_top1, shared->same_top1, 300 * 4) &&
                  !memcmp(own->entropy + 1, shared->entropy + 1, 299 * 4) &&
                  !memcmp(own->top_ids, shared->top_ids, 300 * 5 * 4));
        }
        ps_score_result_free(own);
        ps_score_result_free(shared);
    }
    ps_session_free(s4); /* before its lender s1 */
    ps_session_free(s3);
    ps_session_free(small);
    /* ps_vocab_same */
    CHECK(ps_vocab_same(ps_model_vocab(m), ps_model_vocab(m), NULL) == PS_OK);
    ps_score_result_free(c1);
    ps_score_result_free(c2);
    ps_score_result_free(plain);
    ps_score_result_free(st);
    ps_score_result_free(cmp);
    ps_prefix_cache_free(cache);
    ps_session_free(s1);
    ps_session_free(s2);
    ps_model_free(m);
}

int main(void) {
    ps_pool *pool3 = NULL;
    if (ps_pool_create(3, &pool3) != PS_OK) return 1;
    test_entropy_rank(pool3);
    test_varentropy_edges(pool3);
    test_kld(pool3);
    test_scorer(pool3);
    ps_pool_free(pool3);
    return ps_test_done("test_stats");
}
