/*
 * topk.c — the top-K logprob kernel: for each row of logits, one canonical float32 logsumexp,
 * the scored token's logprob and the exact top-K (ids by logit descending, ties by ascending
 * id), without materialising the log-softmax.
 *
 * Fast path, per row (rows spread over the pool, one task per row):
 *   1. the canonical row pass (topk.h): per chunk of 64 blocks, one pass computes the block
 *      maxima and the exp-sum into 64 lane sums (ISA kernels from topk_avx2.c /
 *      topk_avx512.c or the scalar ones below); the block maxima of the prefilter come out
 *      of the same pass;
 *   2. prefilter: the K blocks with the largest maxima (equal maxima by ascending block index).
 *      Every top-K logit lies in them: a logit outside has K blocks ranked above its own
 *      block, and the first maximum of each of those ranks above it under the tie rule;
 *   3. exact top-K over the logits of those blocks that reach the K-th block maximum (a
 *      buffer cut back to K by quickselect, visited in ascending id so an equal logit never
 *      displaces a kept one; 64-bit rank keys), sorted; lse is subtracted only at the
 *      survivors. When K >= the number of blocks the selection runs over the whole row.
 * Reference path: the full float32 log-softmax row (logit - lse, same lse) and a stable radix
 * sort of every logit (descending, ties by ascending id).
 * Errors: a target >= n_vocab is checked for every row first (PS_ERR_TOKEN_RANGE); a NaN or
 * +inf turns the lane sum into NaN, and the lowest such row is rescanned to name the column.
 */
#include "kernels/topk.h"

#include <float.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

/* ------------------------------------------------------------------------------------------ */
/* Scalar kernels and the canonical lse                                                       */
/* ------------------------------------------------------------------------------------------ */

static inline float logit_at(const void *row, ps_dtype dt, int64_t i) {
    switch (dt) {
    case PS_DTYPE_F32: return ((const float *)row)[i];
    case PS_DTYPE_F16: return ps_f16_to_f32(((const uint16_t *)row)[i]);
    default: return ps_bf16_to_f32(((const uint16_t *)row)[i]);
    }
}

/* Logits [i, i + len) as float32 into dst. */
static void logits_f32(const void *row, ps_dtype dt, int64_t i, int64_t len, float *dst) {
    if (dt == PS_DTYPE_F32) {
        memcpy(dst, (const float *)row + i, (size_t)len * sizeof(float));
        return;
    }
    const uint16_t *h = (const uint16_t *)row + i;
    if (dt == PS_DTYPE_F16)
        for (int64_t j = 0; j < len; j++) dst[j] = ps_f16_to_f32(h[j]);
    else
        for (int64_t j = 0; j < len; j++) dst[j] = ps_bf16_to_f32(h[j]);
}

static void expsum_scalar(const void *row, ps_dtype dt, int64_t b0, int64_t nb, float shift,
                          float *C) {
    for (int64_t b = 0; b < nb; b++) {
        float x[PS_TOPK_BLOCK];
        logits_f32(row, dt, (b0 + b) * PS_TOPK_BLOCK, PS_TOPK_BLOCK, x);
        for (int j = 0; j < PS_TOPK_BLOCK; j++) C[j] += ps_exp_canon(x[j] - shift);
    }
}

static float fused_scalar(const void *row, ps_dtype dt, int64_t b0, int64_t nb, float shift,
                          float *bm, float *C) {
    float cm = -INFINITY;
    for (int64_t b = 0; b < nb; b++) {
        float x[PS_TOPK_BLOCK];
        logits_f32(row, dt, (b0 + b) * PS_TOPK_BLOCK, PS_TOPK_BLOCK, x);
        float m = -INFINITY;
        for (int j = 0; j < PS_TOPK_BLOCK; j++) {
            m = x[j] > m ? x[j] : m;
            C[j] += ps_exp_canon(x[j] - shift);
        }
        if (bm) bm[b] = m;
        cm = m > cm ? m : cm;
    }
    return cm;
}

static uint64_t gemask_scalar(const void *row, ps_dtype dt, int64_t blk, float T) {
    float x[PS_TOPK_BLOCK];
    logits_f32(row, dt, blk * PS_TOPK_BLOCK, PS_TOPK_BLOCK, x);
    uint64_t m = 0;
    for (int j = 0; j < PS_TOPK_BLOCK; j++) m |= (uint64_t)(x[j] >= T) << j;
    return m;
}

static void plogp_scalar(const void *a, const void *b, ps_dtype dt, int64_t b0, int64_t nb,
                         float lse_a, float lse_b, float *E) {
    for (int64_t blk = 0; blk < nb; blk++) {
        float x[PS_TOPK_BLOCK], y[PS_TOPK_BLOCK];
        logits_f32(a, dt, (b0 + blk) * PS_TOPK_BLOCK, PS_TOPK_BLOCK, x);
        if (b) logits_f32(b, dt, (b0 + blk) * PS_TOPK_BLOCK, PS_TOPK_BLOCK, y);
        for (int j = 0; j < PS_TOPK_BLOCK; j++)
            E[j] += ps_plogp_term(x[j] - lse_a, b ? y[j] - lse_b : 0.0f);
    }
}

static void plogpv_scalar(const void *a, ps_dtype dt, int64_t b0, int64_t nb, float lse_a,
                          float *E, double *V) {
    for (int64_t blk = 0; blk < nb; blk++) {
        float x[PS_TOPK_BLOCK];
        logits_f32(a, dt, (b0 + blk) * PS_TOPK_BLOCK, PS_TOPK_BLOCK, x);
        for (int j = 0; j < PS_TOPK_BLOCK; j++) {
            float l = x[j] - lse_a;
            E[j] += ps_plogp_term(l, 0.0f);
            ps_plogpv_term(l, V, j);
        }
    }
}

static void count_scalar(const void *row, ps_dtype dt, int64_t b0, int64_t nb, float v,
                         int64_t *gt, int64_t *eq) {
    for (int64_t blk = 0; blk < nb; blk++) {
        float x[PS_TOPK_BLOCK];
        logits_f32(row, dt, (b0 + blk) * PS_TOPK_BLOCK, PS_TOPK_BLOCK, x);
        for (int j = 0; j < PS_TOPK_BLOCK; j++) {
            *gt += x[j] > v;
            *eq += x[j] == v;
        }
    }
}

typedef struct {
    ps_fused_fn fused;
    ps_expsum_fn expsum;
    ps_gemask_fn gemask;
    ps_plogp_fn plogp;
    ps_count_fn count;
    ps_plogpv_fn plogpv;
} kernels;

static kernels kernels_for(ps_isa isa) {
    kernels k = {fused_scalar, expsum_scalar, gemask_scalar, plogp_scalar, count_scalar,
                 plogpv_scalar};
    if (isa == PS_ISA_AVX2)
        k = (kernels){ps_topk_fused_avx2, ps_topk_expsum_avx2, ps_topk_gemask_avx2,
                      ps_topk_plogp_avx2, ps_topk_count_avx2, ps_topk_plogpv_avx2};
    if (isa == PS_ISA_AVX512)
        k = (kernels){ps_topk_fused_avx512, ps_topk_expsum_avx512, ps_topk_gemask_avx512,
                      ps_topk_plogp_avx512, ps_topk_count_avx512, ps_topk_plogpv_avx512};
    return k;
}

/* log(s) for s >= 1 in double, plain arithmetic only (same bits on every x86-64):
 * s = 2^e * m, m in [sqrt(1/2), sqrt(2)), log m = 2 atanh(u), u = (m - 1) / (m + 1),
 * |u| <= 0.172: the series to u^25 is below 1e-19 relative. */
static double log_canon(double s) {
    int e;
    double m = frexp(s, &e);
    if (m < 0.70710678118654752440) {
        m *= 2.0;
        e--;
    }
    double u = (m - 1.0) / (m + 1.0), u2 = u * u;
    double sum = 0.0;
    for (int k = 25; k >= 3; k -= 2) sum = (sum + 1.0 / k) * u2;
    return (double)e * 0.69314718055994530942 + 2.0 * u * (1.0 + sum);
}

/* Chunks of the row pass: full chunks of 64 blocks, then the ragged tail block. */
static int64_t n_chunks(int64_t n) {
    int64_t nfull = n / PS_TOPK_BLOCK;
    return (nfull + PS_TOPK_CHUNK_BLOCKS - 1) / PS_TOPK_CHUNK_BLOCKS + (n % PS_TOPK_BLOCK != 0);
}

/* The result of the canonical pass over one row. */
typedef struct {
    float lse;  /* -inf for a row of -inf; NaN when the row holds a NaN or +inf */
    bool bad;   /* NaN or +inf somewhere */
} row_sum;

/* Raises the shift R to mc: the running sums are rescaled by exp(R - mc). */
static void raise_shift(float *S, float *R, float mc) {
    float f = ps_exp_canon(*R - mc);
    for (int j = 0; j < PS_TOPK_BLOCK; j++) S[j] *= f;
    *R = mc;
}

/* The canonical pass (topk.h): block maxima into bm (n_blocks floats, or NULL), chunk maxima
 * into cm (n_chunks(n) floats, or NULL) and the lse. */
static row_sum row_pass(kernels k, const void *row, ps_dtype dt, int64_t n, float *bm,
                        float *cm) {
    float S[PS_TOPK_BLOCK] = {0};
    float x[PS_TOPK_BLOCK];
    float local[PS_TOPK_CHUNK_BLOCKS + 1];
    int64_t nfull = n / PS_TOPK_BLOCK, tail = n % PS_TOPK_BLOCK;
    /* the first shift: the first block's maximum, at least -FLT_MAX (so x - R is never
     * -inf - -inf) */
    float R = -FLT_MAX, M = -INFINITY;
    logits_f32(row, dt, 0, PS_MIN(n, (int64_t)PS_TOPK_BLOCK), x);
    for (int64_t j = 0; j < PS_MIN(n, (int64_t)PS_TOPK_BLOCK); j++) R = x[j] > R ? x[j] : R;
    for (int64_t b0 = 0; b0 < nfull; b0 += PS_TOPK_CHUNK_BLOCKS) {
        int64_t nb = PS_MIN(PS_TOPK_CHUNK_BLOCKS, nfull - b0);
        float C[PS_TOPK_BLOCK] = {0};
        float mc = k.fused(row, dt, b0, nb, R, bm ? bm + b0 : local, C);
        if (cm) *cm++ = mc;
        M = mc > M ? mc : M;
        if (mc > R + PS_TOPK_SHIFT_SLACK) { /* redo the chunk with its own maximum */
            raise_shift(S, &R, mc);
            memset(C, 0, sizeof C);
            k.expsum(row, dt, b0, nb, R, C);
        }
        for (int j = 0; j < PS_TOPK_BLOCK; j++) S[j] += C[j];
    }
    if (tail) { /* the ragged tail block: a chunk of its own, lanes 0..tail-1 */
        logits_f32(row, dt, nfull * PS_TOPK_BLOCK, tail, x);
        float mc = -INFINITY;
        for (int64_t j = 0; j < tail; j++) mc = x[j] > mc ? x[j] : mc;
        if (bm) bm[nfull] = mc;
        if (cm) *cm = mc;
        M = mc > M ? mc : M;
        if (mc > R + PS_TOPK_SHIFT_SLACK) raise_shift(S, &R, mc);
        for (int64_t j = 0; j < tail; j++) S[j] += ps_exp_canon(x[j] - R);
    }
    /* fixed pairwise tree over the 64 lanes */
    for (int h = PS_TOPK_BLOCK / 2; h >= 1; h /= 2)
        for (int j = 0; j < h; j++) S[j] += S[j + h];
    row_sum rs;
    rs.bad = S[0] != S[0] || M == INFINITY;
    if (rs.bad) rs.lse = NAN;
    else if (M == -INFINITY) rs.lse = -INFINITY;
    else rs.lse = (float)((double)R + log_canon((double)S[0]));
    /* The exact logsumexp is at least the row maximum. When the maximum lies far above the
     * first shift, the rounding of x - R and of the exp can leave the lse one ulp below it,
     * which would give the top token a positive logprob: raise it to the maximum (a pure
     * function of the row, so every path still gives the same bits). */
    if (rs.lse < M) rs.lse = M;
    return rs;
}

float ps_lse_f32(const float *x, int64_t n) {
    if (!x || n <= 0) return -INFINITY;
    return row_pass(kernels_for(ps_isa_best()), x, PS_DTYPE_F32, n, NULL, NULL).lse;
}

/* logit - lse, with a row of -inf giving -inf (not NaN). */
static inline float logprob(float x, float lse) { return lse == -INFINITY ? -INFINITY : x - lse; }

/* ------------------------------------------------------------------------------------------ */
/* Statistics: entropy, rank, KL divergence                                                   */
/* ------------------------------------------------------------------------------------------ */

/* The canonical sum of p_a * (l_a - l_b) over a row (topk.h ps_plogp_fn), l_b = 0 when b is
 * NULL: per chunk of 64 full blocks the 64 float lane sums start at 0 and are added into 64
 * double lane totals, the ragged tail block is a chunk of its own (scalar), and a fixed
 * pairwise tree sums the lanes. The order depends only on n: the same bits on every ISA,
 * thread count and batch geometry. */
static double plogp_row(kernels k, const void *a, const void *b, ps_dtype dt, int64_t n,
                        float lse_a, float lse_b) {
    double D[PS_TOPK_BLOCK] = {0};
    int64_t nfull = n / PS_TOPK_BLOCK, tail = n % PS_TOPK_BLOCK;
    for (int64_t b0 = 0; b0 < nfull; b0 += PS_TOPK_CHUNK_BLOCKS) {
        float E[PS_TOPK_BLOCK] = {0};
        k.plogp(a, b, dt, b0, PS_MIN(PS_TOPK_CHUNK_BLOCKS, nfull - b0), lse_a, lse_b, E);
        for (int j = 0; j < PS_TOPK_BLOCK; j++) D[j] += (double)E[j];
    }
    if (tail) {
        float x[PS_TOPK_BLOCK], y[PS_TOPK_BLOCK];
        logits_f32(a, dt, nfull * PS_TOPK_BLOCK, tail, x);
        if (b) logits_f32(b, dt, nfull * PS_TOPK_BLOCK, tail, y);
        for (int64_t j = 0; j < tail; j++)
            D[j] += (double)ps_plogp_term(x[j] - lse_a, b ? y[j] - lse_b : 0.0f);
    }
    for (int h = PS_TOPK_BLOCK / 2; h >= 1; h /= 2)
        for (int j = 0; j < h; j++) D[j] += D[j + h];
    return D[0];
}

/* The entropy of a row in nats: -sum p log p (plogp_row); NaN for a row of only -inf. */
static float row_entropy(kernels k, const void *row, ps_dtype dt, int64_t n, float lse) {
    if (lse == -INFINITY) return NAN;
    return (float)-plogp_row(k, row, NULL, dt, n, lse, 0.0f);
}

/* Varentropy from the three lane sums of topk.h ps_plogpv_fn (each lane summed over the row):
 * the fixed pairwise tree over each, then with m = S1 / S0 the variance S2 / S0 - m^2 in
 * double (p normalised by its own sum S0 >= 1 - 1e-6: the float32 lse's rounding shifts every
 * l alike, which a variance does not see), raised to 0 when rounding leaves it below, rounded
 * once to float. */
static float varentropy_of(double *V) {
    for (int s = 0; s < 3; s++) {
        double *D = V + s * PS_TOPK_BLOCK;
        for (int h = PS_TOPK_BLOCK / 2; h >= 1; h /= 2)
            for (int j = 0; j < h; j++) D[j] += D[j + h];
    }
    double m = V[PS_TOPK_BLOCK] / V[0];
    double v = V[2 * PS_TOPK_BLOCK] / V[0] - m * m;
    return (float)(v < 0.0 ? 0.0 : v);
}

/* Entropy (as row_entropy, the same bits) and varentropy of a row in one read of its logits:
 * plogp_row's order for the entropy, and the double lane sums of ps_plogpv_fn, the ragged
 * tail in scalar code into lanes 0 .. tail - 1 after the full blocks. NaN for a row of only
 * -inf. */
static void row_entropy_var(kernels k, const void *row, ps_dtype dt, int64_t n, float lse,
                            float *ent, float *var) {
    if (lse == -INFINITY) {
        *ent = *var = NAN;
        return;
    }
    double D[PS_TOPK_BLOCK] = {0}, V[3 * PS_TOPK_BLOCK] = {0};
    int64_t nfull = n / PS_TOPK_BLOCK, tail = n % PS_TOPK_BLOCK;
    for (int64_t b0 = 0; b0 < nfull; b0 += PS_TOPK_CHUNK_BLOCKS) {
        float E[PS_TOPK_BLOCK] = {0};
        k.plogpv(row, dt, b0, PS_MIN(PS_TOPK_CHUNK_BLOCKS, nfull - b0), lse, E, V);
        for (int j = 0; j < PS_TOPK_BLOCK; j++) D[j] += (double)E[j];
    }
    if (tail) {
        float x[PS_TOPK_BLOCK];
        logits_f32(row, dt, nfull * PS_TOPK_BLOCK, tail, x);
        for (int64_t j = 0; j < tail; j++) {
            D[j] += (double)ps_plogp_term(x[j] - lse, 0.0f);
            ps_plogpv_term(x[j] - lse, V, j);
        }
    }
    for (int h = PS_TOPK_BLOCK / 2; h >= 1; h /= 2)
        for (int j = 0; j < h; j++) D[j] += D[j + h];
    *ent = (float)-D[0];
    *var = varentropy_of(V);
}

/* The 1-based rank of token t in the row: 1 + #(logits above its own) + #(equal logits with
 * a smaller id), the order of the top-K lists. */
static int32_t row_rank(kernels k, const void *row, ps_dtype dt, int64_t n, int32_t t) {
    float v = logit_at(row, dt, t);
    int64_t nfull = n / PS_TOPK_BLOCK, gt = 0, eq = 0;
    for (int64_t b0 = 0; b0 < nfull; b0 += PS_TOPK_CHUNK_BLOCKS)
        k.count(row, dt, b0, PS_MIN(PS_TOPK_CHUNK_BLOCKS, nfull - b0), v, &gt, &eq);
    for (int64_t i = nfull * PS_TOPK_BLOCK; i < n; i++) {
        float x = logit_at(row, dt, i);
        gt += x > v;
        eq += x == v;
    }
    int64_t before = 0; /* equal logits with a smaller id (ties are rare: counted only then) */
    if (eq > 1)
        for (int64_t i = 0; i < t; i++) before += logit_at(row, dt, i) == v;
    return (int32_t)(1 + gt + before);
}

/* ------------------------------------------------------------------------------------------ */
/* Bounded selection of the best k (value, id) pairs                                          */
/* ------------------------------------------------------------------------------------------ */

/* Order-preserving key of a float, descending: smaller key = larger float; -0 == +0. */
static inline uint32_t desc_key(float x) {
    if (x == 0.0f) x = 0.0f;
    uint32_t u;
    memcpy(&u, &x, 4);
    u = (u & 0x80000000u) ? ~u : (u | 0x80000000u); /* ascending order */
    return ~u;
}

/* The float of a desc_key (zero comes back as +0). */
static inline float key_float(uint32_t k) {
    uint32_t a = ~k, u = (a & 0x80000000u) ? (a & 0x7fffffffu) : ~a;
    float x;
    memcpy(&x, &u, 4);
    return x;
}

/* Rank key of a pair: ascending key = (value descending, id ascending); -inf ties by id. All
 * keys of a row are distinct (ids are). */
static inline uint64_t rank_key(float v, int32_t id) {
    return ((uint64_t)desc_key(v) << 32) | (uint32_t)id;
}

static void insertion_sort_u64(uint64_t *a, int64_t n) {
    for (int64_t i = 1; i < n; i++) {
        uint64_t x = a[i];
        int64_t j = i;
        for (; j > 0 && a[j - 1] > x; j--) a[j] = a[j - 1];
        a[j] = x;
    }
}

/* Hoare partition of distinct keys around the median of three; returns the split: a[lo..j]
 * <= pivot <= a[i..hi] with j < i. */
static inline void partition_u64(uint64_t *a, int64_t lo, int64_t hi, int64_t *pj, int64_t *pi) {
    int64_t mid = lo + (hi - lo) / 2;
    uint64_t x = a[lo], y = a[mid], z = a[hi];
    uint64_t p = x < y ? (y < z ? y : (x < z ? z : x)) : (x < z ? x : (y < z ? z : y));
    int64_t i = lo, j = hi;
    while (i <= j) {
        while (a[i] < p) i++;
        while (a[j] > p) j--;
        if (i <= j) {
            uint64_t t = a[i];
            a[i] = a[j];
            a[j] = t;
            i++;
            j--;
        }
    }
    *pj = j;
    *pi = i;
}

/* Reorders a[0..n) so that a[k] is the (k+1)-th smallest and a[0..k) are smaller. */
static void nth_u64(uint64_t *a, int64_t n, int64_t k) {
    int64_t lo = 0, hi = n - 1;
    while (hi - lo > 16) {
        int64_t i, j;
        partition_u64(a, lo, hi, &j, &i);
        if (k <= j) hi = j;
        else if (k >= i) lo = i;
        else return;
    }
    insertion_sort_u64(a + lo, hi - lo + 1);
}

static void sort_u64(uint64_t *a, int64_t n) {
    int64_t lo = 0, hi = n - 1;
    while (hi - lo > 16) {
        int64_t i, j;
        partition_u64(a, lo, hi, &j, &i);
        if (j - lo < hi - i) { /* recurse on the smaller side */
            sort_u64(a + lo, j - lo + 1);
            lo = i;
        } else {
            sort_u64(a + i, hi - i + 1);
            hi = j;
        }
    }
    if (hi > lo) insertion_sort_u64(a + lo, hi - lo + 1);
}

/* Keeps the best k pairs offered in ascending id order. Pairs go into a buffer of cap >= k + 1
 * keys; when it is full the best k are kept (quickselect) and the k-th value becomes the
 * threshold: from then on only a strictly larger value can enter (an equal one has a larger
 * id, so ranks after). Amortised O(1) per offer. */
typedef struct {
    uint64_t *buf;
    int64_t n, cap, k;
    bool full;  /* a cut has happened: thr is the k-th best value so far */
    float thr;
} selector;

static size_t selector_cap(int64_t k) { return (size_t)(k + PS_MAX(k, 64)); }

static void selector_init(selector *s, uint64_t *buf, int64_t k) {
    s->buf = buf;
    s->n = 0;
    s->k = k;
    s->cap = (int64_t)selector_cap(k);
    s->full = false;
    s->thr = -INFINITY;
}

static void selector_cut(selector *s) {
    nth_u64(s->buf, s->n, s->k - 1);
    s->n = s->k;
    s->full = true;
    s->thr = key_float((uint32_t)(s->buf[s->k - 1] >> 32));
}

static inline void selector_offer(selector *s, float v, int32_t id) {
    if (s->full && !(v > s->thr)) return;
    if (s->n == s->cap) {
        selector_cut(s);
        if (!(v > s->thr)) return;
    }
    s->buf[s->n++] = rank_key(v, id);
}

/* Sorts the kept pairs best first; returns their number (min(k, offered)). */
static int64_t selector_finish(selector *s) {
    if (s->n > s->k) selector_cut(s);
    sort_u64(s->buf, s->n);
    return s->n;
}

/* ------------------------------------------------------------------------------------------ */
/* Shared driver                                                                              */
/* ------------------------------------------------------------------------------------------ */

typedef struct {
    const ps_logits *lg;
    const ps_topk_out *out;
    int32_t k;
    kernels kern;
    int64_t n_blocks;
    char *scratch;       /* per thread: scratch_bytes each */
    size_t scratch_bytes;
    _Atomic int64_t first_bad;  /* lowest row with NaN / +inf, or INT64_MAX */
} job;

static void note_bad(job *jb, int64_t row) {
    int64_t cur = atomic_load(&jb->first_bad);
    while (row < cur && !atomic_compare_exchange_weak(&jb->first_bad, &cur, row)) {
    }
}

static const void *row_ptr(const ps_logits *lg, int64_t r) {
    size_t es = lg->dtype == PS_DTYPE_F32 ? 4 : 2;
    return (const char *)lg->data + (size_t)r * (size_t)lg->row_stride * es;
}

/* Writes lse, target logprob and the top ids (rank keys sorted best first, padding past
 * n_sel) of row r. */
static void write_row(const job *jb, int64_t r, float lse, const uint64_t *sel, int64_t n_sel) {
    const ps_logits *lg = jb->lg;
    const ps_topk_out *out = jb->out;
    const void *row = row_ptr(lg, r);
    if (out->lse) out->lse[r] = lse;
    if (lg->targets && out->target_logprob) {
        int32_t t = lg->targets[r];
        out->target_logprob[r] = t < 0 ? NAN : logprob(logit_at(row, lg->dtype, t), lse);
    }
    if (out->varentropy) { /* entropy in the same read */
        float ent;
        row_entropy_var(jb->kern, row, lg->dtype, lg->n_vocab, lse, &ent, &out->varentropy[r]);
        if (out->entropy) out->entropy[r] = ent;
    } else if (out->entropy) {
        out->entropy[r] = row_entropy(jb->kern, row, lg->dtype, lg->n_vocab, lse);
    }
    if (out->rank) {
        int32_t t = lg->targets ? lg->targets[r] : -1;
        out->rank[r] = t < 0 ? 0 : row_rank(jb->kern, row, lg->dtype, lg->n_vocab, t);
    }
    if (jb->k > 0) {
        int32_t *ids = out->top_ids + r * jb->k;
        float *lps = out->top_logprobs + r * jb->k;
        for (int64_t i = 0; i < jb->k; i++) {
            int32_t id = i < n_sel ? (int32_t)(uint32_t)sel[i] : -1;
            ids[i] = id;
            lps[i] = id >= 0 ? logprob(logit_at(row, lg->dtype, id), lse) : -INFINITY;
        }
    }
}

/* Fast-path scratch per thread: block maxima (n_blocks floats), chunk maxima (n_chunks), then
 * selectors for chunks and blocks (kb) and for logits (ke), and a bitmap of chosen blocks. */
static size_t fast_scratch_bytes(int64_t n_vocab, int64_t n_blocks, int32_t k) {
    int64_t kb = PS_MIN((int64_t)k, n_blocks), ke = PS_MIN((int64_t)k, n_vocab);
    size_t b = (size_t)(n_blocks + n_chunks(n_vocab) + 1) * sizeof(float) +
               (2 * selector_cap(kb) + selector_cap(ke) + (size_t)(n_blocks + 63) / 64) *
                   sizeof(uint64_t);
    return (b + 63) & ~(size_t)63;
}

/* Offers the logits of block blk that are >= T (ascending id): a SIMD compare picks them in a
 * full block, the ragged tail block is done in C. */
static void offer_block(selector *es, kernels k, const void *row, ps_dtype dt, int64_t n,
                        int64_t blk, float T) {
    int64_t i0 = blk * PS_TOPK_BLOCK;
    if (i0 + PS_TOPK_BLOCK <= n) {
        for (uint64_t m = k.gemask(row, dt, blk, T); m; m &= m - 1) {
            int64_t i = i0 + __builtin_ctzll(m);
            selector_offer(es, logit_at(row, dt, i), (int32_t)i);
        }
        return;
    }
    float x[PS_TOPK_BLOCK];
    int64_t len = n - i0;
    logits_f32(row, dt, i0, len, x);
    for (int64_t j = 0; j < len; j++)
        if (x[j] >= T) selector_offer(es, x[j], (int32_t)(i0 + j));
}

/* The k-th best key kept by a selector that was offered at least k pairs. */
static uint64_t selector_kth(selector *s) {
    if (s->n > s->k) selector_cut(s);
    uint64_t m = 0;
    for (int64_t i = 0; i < s->n; i++) m = s->buf[i] > m ? s->buf[i] : m;
    return m;
}

/* One row of the fast path.  row (n_vocab,) of dtype -> bm (n_blocks,), cmax (n_chunks,) ->
 * lse, target logprob, top (K,) ids and logprobs. */
static void fast_row(void *ctx, int64_t r, int32_t thread_index) {
    job *jb = ctx;
    const ps_logits *lg = jb->lg;
    const void *row = row_ptr(lg, r);
    int64_t n = lg->n_vocab, nblk = jb->n_blocks, nch = n_chunks(n);
    int64_t kb = PS_MIN((int64_t)jb->k, nblk), ke = PS_MIN((int64_t)jb->k, n);
    char *sp = jb->scratch + (size_t)thread_index * jb->scratch_bytes;
    float *bm = (float *)sp, *cmax = bm + nblk;
    uint64_t *kbuf = (uint64_t *)(((uintptr_t)(cmax + nch) + 7) & ~(uintptr_t)7);
    uint64_t *cbuf = kbuf, *bbuf = kbuf + selector_cap(kb), *ebuf = bbuf + selector_cap(kb);
    uint64_t *chosen = ebuf + selector_cap(ke); /* (n_blocks + 63) / 64 words */

    row_sum rs = row_pass(jb->kern, row, lg->dtype, n, jb->k > 0 ? bm : NULL,
                          jb->k > 0 ? cmax : NULL);
    if (rs.bad) {
        note_bad(jb, r);
        return;
    }
    int64_t n_sel = 0;
    selector es;
    selector_init(&es, ebuf, ke);
    if (jb->k > 0) {
        if (jb->k >= nblk) {
            for (int64_t b = 0; b < nblk; b++)
                offer_block(&es, jb->kern, row, lg->dtype, n, b, -INFINITY);
        } else {
            /* T0: the kb-th largest chunk maximum. The kb best chunks each own a block with
             * that maximum, so the kb-th best block maximum T is >= T0: blocks below T0 can
             * never be chosen and are not offered (most of them). */
            float T0 = -INFINITY;
            if (kb <= nch) {
                selector cs;
                selector_init(&cs, cbuf, kb);
                for (int64_t c = 0; c < nch; c++) selector_offer(&cs, cmax[c], (int32_t)c);
                T0 = key_float((uint32_t)(selector_kth(&cs) >> 32));
            } else if (nblk / (2 * kb) >= 2) {
                /* more blocks wanted than there are chunks: the same bound from groups of g
                 * blocks, about 2 kb groups */
                int64_t g = nblk / (2 * kb);
                selector cs;
                selector_init(&cs, cbuf, kb);
                for (int64_t b = 0, gi = 0; b < nblk; b += g, gi++) {
                    float m = -INFINITY;
                    for (int64_t j = b; j < PS_MIN(b + g, nblk); j++) m = bm[j] > m ? bm[j] : m;
                    selector_offer(&cs, m, (int32_t)gi);
                }
                T0 = key_float((uint32_t)(selector_kth(&cs) >> 32));
            }
            selector bs;
            selector_init(&bs, bbuf, kb);
            for (int64_t b = 0; b < nblk; b++)
                if (bm[b] >= T0) selector_offer(&bs, bm[b], (int32_t)b);
            /* The chosen blocks are the kb best (T = the kb-th maximum). T bounds the K-th
             * largest logit from below (each chosen block holds a logit >= T), so logits < T
             * are skipped unseen. Blocks are visited in ascending order: ascending ids. */
            uint64_t kth = selector_kth(&bs); /* bs now holds exactly the kb chosen blocks */
            float T = key_float((uint32_t)(kth >> 32));
            int64_t nw = (nblk + 63) / 64; /* chosen blocks as a bitmap: ascending order */
            memset(chosen, 0, (size_t)nw * sizeof *chosen);
            for (int64_t i = 0; i < bs.n; i++) {
                uint32_t b = (uint32_t)bs.buf[i];
                chosen[b / 64] |= 1ull << (b % 64);
            }
            for (int64_t w = 0; w < nw; w++)
                for (uint64_t m = chosen[w]; m; m &= m - 1)
                    offer_block(&es, jb->kern, row, lg->dtype, n, w * 64 + __builtin_ctzll(m), T);
        }
        n_sel = selector_finish(&es);
    }
    write_row(jb, r, rs.lse, es.buf, n_sel);
}

/* Reference scratch per thread: x and logprob rows (n floats each), radix keys and ids
 * (2n each). */
static size_t ref_scratch_bytes(int64_t n_vocab) {
    return (((size_t)n_vocab * 6 * 4) + 63) & ~(size_t)63;
}

/* One row of the reference.  row (n_vocab,) of dtype -> x (n_vocab,) f32 -> lp (n_vocab,) the
 * full log-softmax, and every id sorted -> lse, target logprob, top (K,) ids and logprobs. */
static void ref_row(void *ctx, int64_t r, int32_t thread_index) {
    job *jb = ctx;
    const ps_logits *lg = jb->lg;
    const void *row = row_ptr(lg, r);
    int64_t n = lg->n_vocab;
    float *x = (float *)(jb->scratch + (size_t)thread_index * jb->scratch_bytes);
    float *lp = x + n;
    uint32_t *key = (uint32_t *)(lp + n), *key2 = key + n;
    int32_t *id = (int32_t *)(key2 + n), *id2 = id + n;

    logits_f32(row, lg->dtype, 0, n, x);
    for (int64_t i = 0; i < n; i++) {
        if (!(x[i] < INFINITY)) {
            note_bad(jb, r);
            return;
        }
    }
    float lse = ps_lse_f32(x, n);
    for (int64_t i = 0; i < n; i++) lp[i] = logprob(x[i], lse); /* the full log-softmax */
    const ps_topk_out *out = jb->out;
    if (out->entropy || out->varentropy) {
        /* -sum p log p over the log-softmax row, in the canonical order; varentropy's double
         * lane sums over the same elements, each lane in ascending order */
        double D[PS_TOPK_BLOCK] = {0}, V[3 * PS_TOPK_BLOCK] = {0};
        int64_t full = n / PS_TOPK_BLOCK * PS_TOPK_BLOCK;
        for (int64_t c0 = 0; c0 < full; c0 += PS_TOPK_BLOCK * PS_TOPK_CHUNK_BLOCKS) {
            float E[PS_TOPK_BLOCK] = {0};
            for (int64_t i = c0; i < PS_MIN(full, c0 + PS_TOPK_BLOCK * PS_TOPK_CHUNK_BLOCKS); i++) {
                E[i % PS_TOPK_BLOCK] += ps_plogp_term(lp[i], 0.0f);
                ps_plogpv_term(lp[i], V, i % PS_TOPK_BLOCK);
            }
            for (int j = 0; j < PS_TOPK_BLOCK; j++) D[j] += (double)E[j];
        }
        for (int64_t i = full; i < n; i++) {
            D[i - full] += (double)ps_plogp_term(lp[i], 0.0f);
            ps_plogpv_term(lp[i], V, i - full);
        }
        for (int h = PS_TOPK_BLOCK / 2; h >= 1; h /= 2)
            for (int j = 0; j < h; j++) D[j] += D[j + h];
        if (out->entropy) out->entropy[r] = lse == -INFINITY ? NAN : (float)-D[0];
        if (out->varentropy) out->varentropy[r] = lse == -INFINITY ? NAN : varentropy_of(V);
    }
    if (out->lse) out->lse[r] = lse;
    if (lg->targets && out->target_logprob) {
        int32_t t = lg->targets[r];
        out->target_logprob[r] = t < 0 ? NAN : lp[t];
    }
    if (jb->k == 0 && !out->rank) return;
    /* stable LSD radix sort of (key, id), ids starting ascending: ties stay by ascending id */
    for (int64_t i = 0; i < n; i++) {
        key[i] = desc_key(x[i]);
        id[i] = (int32_t)i;
    }
    for (int shift = 0; shift < 32; shift += 8) {
        int64_t cnt[257] = {0};
        for (int64_t i = 0; i < n; i++) cnt[((key[i] >> shift) & 255u) + 1]++;
        for (int d = 0; d < 256; d++) cnt[d + 1] += cnt[d];
        for (int64_t i = 0; i < n; i++) {
            int64_t at = cnt[(key[i] >> shift) & 255u]++;
            key2[at] = key[i];
            id2[at] = id[i];
        }
        uint32_t *tk = key; key = key2; key2 = tk;
        int32_t *ti = id; id = id2; id2 = ti;
    }
    if (out->rank) { /* the target's place in the sorted row */
        int32_t t = lg->targets ? lg->targets[r] : -1;
        out->rank[r] = 0;
        for (int64_t i = 0; t >= 0 && i < n; i++)
            if (id[i] == t) out->rank[r] = (int32_t)(i + 1);
    }
    if (jb->k == 0) return;
    int32_t *ids = out->top_ids + r * jb->k;
    float *lps = out->top_logprobs + r * jb->k;
    for (int64_t i = 0; i < jb->k; i++) {
        ids[i] = i < n ? id[i] : -1;
        lps[i] = i < n ? lp[id[i]] : -INFINITY;
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Entry points                                                                               */
/* ------------------------------------------------------------------------------------------ */

ps_topk_params ps_topk_default_params(void) {
    ps_topk_params p = {5, PS_ISA_AUTO, NULL};
    return p;
}

static ps_status validate(const ps_topk_params *params, const ps_logits *lg,
                          const ps_topk_out *out, ps_error *err) {
    if (!params || !lg || !out)
        return ps_fail(err, PS_ERR_INVALID_ARG, -1,
                       "top-k: params, logits and out must not be NULL");
    if (params->k < 0)
        return ps_fail(err, PS_ERR_INVALID_ARG, -1, "top-k: k = %d is negative", (int)params->k);
    if (params->isa != PS_ISA_AUTO && !ps_isa_supported(params->isa))
        return ps_fail(err, PS_ERR_INVALID_ARG, -1,
                       "top-k: ISA %s (%d) is not available on this CPU",
                       ps_isa_name(params->isa), (int)params->isa);
    if (lg->dtype != PS_DTYPE_F32 && lg->dtype != PS_DTYPE_F16 && lg->dtype != PS_DTYPE_BF16)
        return ps_fail(err, PS_ERR_INVALID_ARG, -1, "top-k: unknown logits dtype %d",
                       (int)lg->dtype);
    if (lg->n_rows < 0)
        return ps_fail(err, PS_ERR_INVALID_ARG, -1, "top-k: n_rows = %lld is negative",
                       (long long)lg->n_rows);
    if (lg->n_vocab < 1 || lg->n_vocab > INT32_MAX)
        return ps_fail(err, PS_ERR_INVALID_ARG, -1, "top-k: n_vocab = %lld is not in [1, 2^31)",
                       (long long)lg->n_vocab);
    if (lg->row_stride < lg->n_vocab)
        return ps_fail(err, PS_ERR_INVALID_ARG, -1, "top-k: row_stride %lld < n_vocab %lld",
                       (long long)lg->row_stride, (long long)lg->n_vocab);
    uint64_t total, outn;
    if (!ps_mul_ok((uint64_t)lg->n_rows, (uint64_t)lg->row_stride, &total) ||
        !ps_mul_ok(total, 4, &total) || total > (uint64_t)INT64_MAX ||
        !ps_mul_ok((uint64_t)lg->n_rows, (uint64_t)params->k, &outn) ||
        outn > (uint64_t)INT64_MAX / 4)
        return ps_fail(err, PS_ERR_INVALID_ARG, -1,
                       "top-k: %lld rows of stride %lld (k = %d) overflow",
                       (long long)lg->n_rows, (long long)lg->row_stride, (int)params->k);
    if (lg->n_rows > 0 && !lg->data)
        return ps_fail(err, PS_ERR_INVALID_ARG, -1, "top-k: logits data is NULL");
    if (lg->n_rows > 0 && params->k > 0 && (!out->top_ids || !out->top_logprobs))
        return ps_fail(err, PS_ERR_INVALID_ARG, -1, "top-k: k = %d needs top_ids and top_logprobs",
                       (int)params->k);
    if (lg->targets) {
        for (int64_t r = 0; r < lg->n_rows; r++) {
            if (lg->targets[r] >= lg->n_vocab)
                return ps_fail(err, PS_ERR_TOKEN_RANGE, -1,
                               "top-k: row %lld: target token id %d is outside the vocabulary "
                               "of %lld tokens",
                               (long long)r, (int)lg->targets[r], (long long)lg->n_vocab);
        }
    }
    return PS_OK;
}

/* The NaN / +inf error of row r: rescans it for the first bad column. */
static ps_status nan_error(const ps_logits *lg, int64_t r, ps_error *err) {
    const void *row = row_ptr(lg, r);
    for (int64_t i = 0; i < lg->n_vocab; i++) {
        float x = logit_at(row, lg->dtype, i);
        if (!(x < INFINITY))
            return ps_fail(err, PS_ERR_NAN, -1, "top-k: row %lld column %lld: logit is %s",
                           (long long)r, (long long)i, x != x ? "NaN" : "+inf");
    }
    return ps_fail(err, PS_ERR_NAN, -1, "top-k: row %lld: NaN or +inf logit", (long long)r);
}

static ps_status run(const ps_topk_params *params, const ps_logits *lg, const ps_topk_out *out,
                     ps_error *err, bool reference) {
    ps_error_clear(err);
    ps_status st = validate(params, lg, out, err);
    if (st != PS_OK) return st;
    if (lg->n_rows == 0) return PS_OK;
    ps_isa isa = params->isa == PS_ISA_AUTO ? ps_isa_best() : params->isa;
    job jb;
    jb.lg = lg;
    jb.out = out;
    jb.k = params->k;
    jb.kern = kernels_for(isa);
    jb.n_blocks = (lg->n_vocab + PS_TOPK_BLOCK - 1) / PS_TOPK_BLOCK;
    jb.scratch_bytes = reference ? ref_scratch_bytes(lg->n_vocab)
                                 : fast_scratch_bytes(lg->n_vocab, jb.n_blocks, params->k);
    atomic_init(&jb.first_bad, INT64_MAX);
    /* ps_pool_for hands out thread_index < ps_pool_size (0 only when it runs inline) */
    ps_pool *pool = lg->n_rows == 1 ? NULL : params->pool;
    int32_t n_slots = ps_pool_size(pool);
    uint64_t bytes;
    if (!ps_mul_ok((uint64_t)n_slots, jb.scratch_bytes, &bytes) || bytes > SIZE_MAX / 2)
        return ps_fail(err, PS_ERR_NOMEM, -1, "top-k: scratch of %d x %zu bytes is too large",
                       (int)n_slots, jb.scratch_bytes);
    jb.scratch = ps_aligned_alloc(64, (size_t)bytes);
    if (!jb.scratch)
        return ps_fail(err, PS_ERR_NOMEM, -1, "top-k: cannot allocate %llu bytes of scratch",
                       (unsigned long long)bytes);
    ps_pool_for(pool, lg->n_rows, reference ? ref_row : fast_row, &jb);
    ps_free(jb.scratch);
    int64_t bad = atomic_load(&jb.first_bad);
    if (bad != INT64_MAX) return nan_error(lg, bad, err);
    return PS_OK;
}

ps_status ps_topk_compute(const ps_topk_params *params, const ps_logits *logits,
                          const ps_topk_out *out, ps_error *err) {
    return run(params, logits, out, err, false);
}

ps_status ps_topk_reference(const ps_topk_params *params, const ps_logits *logits,
                            const ps_topk_out *out, ps_error *err) {
    return run(params, logits, out, err, true);
}

/* ------------------------------------------------------------------------------------------ */
/* KL divergence between two batches of rows                                                  */
/* ------------------------------------------------------------------------------------------ */

typedef struct {
    const ps_logits *a, *b;
    kernels kern;
    float *kld;
    _Atomic int64_t first_bad;
} kld_job;

static void kld_row(void *ctx, int64_t r, int32_t thread_index) {
    (void)thread_index;
    kld_job *jb = ctx;
    const ps_logits *a = jb->a, *b = jb->b;
    const void *ra = row_ptr(a, r), *rb = row_ptr(b, r);
    row_sum sa = row_pass(jb->kern, ra, a->dtype, a->n_vocab, NULL, NULL);
    row_sum sb = row_pass(jb->kern, rb, b->dtype, b->n_vocab, NULL, NULL);
    if (sa.bad || sb.bad) {
        int64_t cur = atomic_load(&jb->first_bad);
        while (r < cur && !atomic_compare_exchange_weak(&jb->first_bad, &cur, r)) {
        }
        return;
    }
    jb->kld[r] = sa.lse == -INFINITY || sb.lse == -INFINITY
                     ? NAN
                     : (float)plogp_row(jb->kern, ra, rb, a->dtype, a->n_vocab, sa.lse, sb.lse);
}

ps_status ps_kld_compute(const ps_topk_params *params, const ps_logits *base,
                         const ps_logits *other, float *kld, ps_error *err) {
    ps_error_clear(err);
    if (!params || !base || !other || (!kld && base->n_rows > 0))
        return ps_fail(err, PS_ERR_INVALID_ARG, -1, "kld: params, logits and kld are required");
    ps_topk_out none;
    memset(&none, 0, sizeof none);
    ps_topk_params p0 = *params;
    p0.k = 0;
    ps_status st = validate(&p0, base, &none, err);
    if (st == PS_OK) st = validate(&p0, other, &none, err);
    if (st != PS_OK) return st;
    if (base->n_rows != other->n_rows || base->n_vocab != other->n_vocab ||
        base->dtype != other->dtype)
        return ps_fail(err, PS_ERR_INVALID_ARG, -1,
                       "kld: the two batches differ: %lld x %lld (dtype %d) against %lld x %lld "
                       "(dtype %d)",
                       (long long)base->n_rows, (long long)base->n_vocab, (int)base->dtype,
                       (long long)other->n_rows, (long long)other->n_vocab, (int)other->dtype);
    if (base->n_rows == 0) return PS_OK;
    kld_job jb;
    jb.a = base;
    jb.b = other;
    jb.kern = kernels_for(params->isa == PS_ISA_AUTO ? ps_isa_best() : params->isa);
    jb.kld = kld;
    atomic_init(&jb.first_bad, INT64_MAX);
    ps_pool_for(base->n_rows == 1 ? NULL : params->pool, base->n_rows, kld_row, &jb);
    int64_t bad = atomic_load(&jb.first_bad);
    if (bad != INT64_MAX) {
        st = nan_error(base, bad, err);
        if (st == PS_ERR_NAN && err && strstr(err->message, "NaN or +inf logit")) /* not base */
            return nan_error(other, bad, err);
        return st;
    }
    return PS_OK;
}
