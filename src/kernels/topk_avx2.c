/*
 * topk_avx2.c — the AVX2 + FMA + F16C variants of the chunk kernels of the top-K row pass
 * (see topk.h for the canonical procedure they must reproduce bit for bit).
 *
 * One 64-logit block is eight ymm vectors; vector q holds lanes 8q..8q+7, so the 64 lane sums
 * live in eight accumulators. The exp is exp_canon.h's ps_exp_canon8: p * 2^n is a multiply by
 * 2^n built from its exponent bits (n in [-126, 127]: a normal float), and lanes with d < -87
 * are cleared with a compare mask (NaN lanes stay NaN).
 */
#include "kernels/topk.h"
#include "base/simd.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define PS_T2_INLINE static inline __attribute__((always_inline)) PS_TARGET_AVX2

/* 8 logits at element i of row, as float32 (exact conversion). */
PS_T2_INLINE __m256 load8(const void *row, ps_dtype dt, int64_t i) {
    if (dt == PS_DTYPE_F32) return _mm256_loadu_ps((const float *)row + i);
    __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)row + i));
    if (dt == PS_DTYPE_F16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

PS_T2_INLINE float hmax8(__m256 v) {
    __m128 b = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    b = _mm_max_ps(b, _mm_movehl_ps(b, b));
    b = _mm_max_ss(b, _mm_movehdup_ps(b));
    return _mm_cvtss_f32(b);
}

/* One pass over blocks b0..b0+nb-1 (row: (n_blocks, 64) of dt): bm[b] = block maximum (when
 * with_max and bm), C[8q + j] += exp(x[64b + 8q + j] - shift) in block order; returns the
 * maximum. Two sweeps of four accumulators each (lanes 0..31, then 32..63) keep the state in
 * registers; each lane still sees its elements in order, so the sums are the canonical ones,
 * and the second sweep reads L1. */
PS_T2_INLINE float fused_dt(const void *row, ps_dtype dt, int64_t b0, int64_t nb, float shift,
                            float *bm, float *C, bool with_max) {
    const __m256 sh = _mm256_set1_ps(shift);
    const size_t es = dt == PS_DTYPE_F32 ? 4 : 2;
    __m256 cm = _mm256_set1_ps(-INFINITY);
    for (int half = 0; half < 2; half++) {
        int64_t o = 32 * half;
        __m256 s0 = _mm256_loadu_ps(C + o), s1 = _mm256_loadu_ps(C + o + 8);
        __m256 s2 = _mm256_loadu_ps(C + o + 16), s3 = _mm256_loadu_ps(C + o + 24);
        for (int64_t b = 0; b < nb; b++) {
            int64_t i = (b0 + b) * PS_TOPK_BLOCK + o;
            if (half == 0) { /* compute-bound loop: pull the block 32 ahead in */
                const char *next = /* an address that may lie past the row */
                    (const char *)((uintptr_t)row + (size_t)(i + 32 * PS_TOPK_BLOCK) * es);
                for (size_t off = 0; off < PS_TOPK_BLOCK * es; off += 64)
                    _mm_prefetch(next + off, _MM_HINT_T0);
            }
            __m256 x0 = load8(row, dt, i), x1 = load8(row, dt, i + 8);
            __m256 x2 = load8(row, dt, i + 16), x3 = load8(row, dt, i + 24);
            if (with_max) {
                __m256 v = _mm256_max_ps(_mm256_max_ps(x0, x1), _mm256_max_ps(x2, x3));
                cm = _mm256_max_ps(cm, v);
                if (bm) {
                    float m = hmax8(v);
                    bm[b] = half == 0 || m > bm[b] ? m : bm[b];
                }
            }
            s0 = _mm256_add_ps(s0, ps_exp_canon8(_mm256_sub_ps(x0, sh)));
            s1 = _mm256_add_ps(s1, ps_exp_canon8(_mm256_sub_ps(x1, sh)));
            s2 = _mm256_add_ps(s2, ps_exp_canon8(_mm256_sub_ps(x2, sh)));
            s3 = _mm256_add_ps(s3, ps_exp_canon8(_mm256_sub_ps(x3, sh)));
        }
        _mm256_storeu_ps(C + o, s0);
        _mm256_storeu_ps(C + o + 8, s1);
        _mm256_storeu_ps(C + o + 16, s2);
        _mm256_storeu_ps(C + o + 24, s3);
    }
    return hmax8(cm);
}

PS_TARGET_AVX2 float ps_topk_fused_avx2(const void *row, ps_dtype dt, int64_t b0, int64_t nb, float shift,
                               float *bm, float *C) {
    switch (dt) {
    case PS_DTYPE_F32: return fused_dt(row, PS_DTYPE_F32, b0, nb, shift, bm, C, true);
    case PS_DTYPE_F16: return fused_dt(row, PS_DTYPE_F16, b0, nb, shift, bm, C, true);
    default: return fused_dt(row, PS_DTYPE_BF16, b0, nb, shift, bm, C, true);
    }
}

PS_TARGET_AVX2 void ps_topk_expsum_avx2(const void *row, ps_dtype dt, int64_t b0, int64_t nb, float shift,
                               float *C) {
    switch (dt) {
    case PS_DTYPE_F32: fused_dt(row, PS_DTYPE_F32, b0, nb, shift, NULL, C, false); break;
    case PS_DTYPE_F16: fused_dt(row, PS_DTYPE_F16, b0, nb, shift, NULL, C, false); break;
    default: fused_dt(row, PS_DTYPE_BF16, b0, nb, shift, NULL, C, false); break;
    }
}

PS_T2_INLINE uint64_t gemask_dt(const void *row, ps_dtype dt, int64_t blk, float T) {
    const __m256 t = _mm256_set1_ps(T);
    int64_t i = blk * PS_TOPK_BLOCK;
    uint64_t m = 0;
    for (int q = 0; q < 8; q++) {
        __m256 ge = _mm256_cmp_ps(load8(row, dt, i + 8 * q), t, _CMP_GE_OQ);
        m |= (uint64_t)(uint32_t)_mm256_movemask_ps(ge) << (8 * q);
    }
    return m;
}

PS_TARGET_AVX2 uint64_t ps_topk_gemask_avx2(const void *row, ps_dtype dt, int64_t blk, float T) {
    switch (dt) {
    case PS_DTYPE_F32: return gemask_dt(row, PS_DTYPE_F32, blk, T);
    case PS_DTYPE_F16: return gemask_dt(row, PS_DTYPE_F16, blk, T);
    default: return gemask_dt(row, PS_DTYPE_BF16, blk, T);
    }
}

/* The statistics pass (topk.h ps_plogp_fn): lane 8q + j of E in accumulator q. */
PS_T2_INLINE void plogp_dt(const void *a, const void *b, ps_dtype dt, int64_t b0, int64_t nb,
                           float lse_a, float lse_b, float *E) {
    const __m256 la = _mm256_set1_ps(lse_a), lb = _mm256_set1_ps(lse_b);
    const __m256 lo = _mm256_set1_ps(PS_EXP_LO);
    __m256 s[8];
    for (int q = 0; q < 8; q++) s[q] = _mm256_loadu_ps(E + 8 * q);
    for (int64_t blk = 0; blk < nb; blk++) {
        int64_t i = (b0 + blk) * PS_TOPK_BLOCK;
        for (int q = 0; q < 8; q++) {
            __m256 l = _mm256_sub_ps(load8(a, dt, i + 8 * q), la);
            __m256 d = b ? _mm256_sub_ps(l, _mm256_sub_ps(load8(b, dt, i + 8 * q), lb)) : l;
            __m256 t = _mm256_mul_ps(ps_exp_canon8(l), d);
            t = _mm256_andnot_ps(_mm256_cmp_ps(l, lo, _CMP_LT_OQ), t);
            s[q] = _mm256_add_ps(s[q], t);
        }
    }
    for (int q = 0; q < 8; q++) _mm256_storeu_ps(E + 8 * q, s[q]);
}

PS_TARGET_AVX2 void ps_topk_plogp_avx2(const void *a, const void *b, ps_dtype dt, int64_t b0, int64_t nb,
                              float lse_a, float lse_b, float *E) {
    switch (dt) {
    case PS_DTYPE_F32: plogp_dt(a, b, PS_DTYPE_F32, b0, nb, lse_a, lse_b, E); break;
    case PS_DTYPE_F16: plogp_dt(a, b, PS_DTYPE_F16, b0, nb, lse_a, lse_b, E); break;
    default: plogp_dt(a, b, PS_DTYPE_BF16, b0, nb, lse_a, lse_b, E); break;
    }
}

/* The statistics pass with varentropy (topk.h ps_plogpv_fn): E as plogp_dt's with b == NULL;
 * the float vector of lanes 8q..8q+7 is widened in two halves, lanes 8q..8q+3 and 8q+4..8q+7
 * in the double accumulators at V + 8q and + 8q + 4 of each of the three sums (kept in
 * memory). Dropped elements have p and l cleared to 0 first, so they add +0 like the scalar
 * term. */
PS_T2_INLINE void plogpv_dt(const void *a, ps_dtype dt, int64_t b0, int64_t nb, float lse_a,
                            float *E, double *V) {
    const __m256 la = _mm256_set1_ps(lse_a);
    const __m256 lo = _mm256_set1_ps(PS_EXP_LO);
    __m256 s[8];
    for (int q = 0; q < 8; q++) s[q] = _mm256_loadu_ps(E + 8 * q);
    for (int64_t blk = 0; blk < nb; blk++) {
        int64_t i = (b0 + blk) * PS_TOPK_BLOCK;
        for (int q = 0; q < 8; q++) {
            __m256 l = _mm256_sub_ps(load8(a, dt, i + 8 * q), la);
            __m256 drop = _mm256_cmp_ps(l, lo, _CMP_LT_OQ);
            __m256 p = ps_exp_canon8(l);
            __m256 t = _mm256_andnot_ps(drop, _mm256_mul_ps(p, l));
            s[q] = _mm256_add_ps(s[q], t);
            __m256 pk = _mm256_andnot_ps(drop, p), lk = _mm256_andnot_ps(drop, l);
            for (int h = 0; h < 2; h++) {
                __m128 ph = h ? _mm256_extractf128_ps(pk, 1) : _mm256_castps256_ps128(pk);
                __m128 lh = h ? _mm256_extractf128_ps(lk, 1) : _mm256_castps256_ps128(lk);
                __m256d ld = _mm256_cvtps_pd(lh), pd = _mm256_cvtps_pd(ph);
                __m256d ad = _mm256_mul_pd(pd, ld);
                double *v0 = V + 8 * q + 4 * h, *v1 = v0 + PS_TOPK_BLOCK, *v2 = v1 + PS_TOPK_BLOCK;
                _mm256_storeu_pd(v0, _mm256_add_pd(_mm256_loadu_pd(v0), pd));
                _mm256_storeu_pd(v1, _mm256_add_pd(_mm256_loadu_pd(v1), ad));
                _mm256_storeu_pd(v2, _mm256_add_pd(_mm256_loadu_pd(v2), _mm256_mul_pd(ad, ld)));
            }
        }
    }
    for (int q = 0; q < 8; q++) _mm256_storeu_ps(E + 8 * q, s[q]);
}

PS_TARGET_AVX2 void ps_topk_plogpv_avx2(const void *a, ps_dtype dt, int64_t b0, int64_t nb,
                                        float lse_a, float *E, double *V) {
    switch (dt) {
    case PS_DTYPE_F32: plogpv_dt(a, PS_DTYPE_F32, b0, nb, lse_a, E, V); break;
    case PS_DTYPE_F16: plogpv_dt(a, PS_DTYPE_F16, b0, nb, lse_a, E, V); break;
    default: plogpv_dt(a, PS_DTYPE_BF16, b0, nb, lse_a, E, V); break;
    }
}

PS_T2_INLINE void count_dt(const void *row, ps_dtype dt, int64_t b0, int64_t nb, float v,
                           int64_t *gt, int64_t *eq) {
    const __m256 vv = _mm256_set1_ps(v);
    __m256i cg = _mm256_setzero_si256(), ce = _mm256_setzero_si256();
    for (int64_t blk = 0; blk < nb; blk++) { /* at most 64 blocks: 512 per 32-bit lane */
        int64_t i = (b0 + blk) * PS_TOPK_BLOCK;
        for (int q = 0; q < 8; q++) {
            __m256 x = load8(row, dt, i + 8 * q);
            cg = _mm256_sub_epi32(cg, _mm256_castps_si256(_mm256_cmp_ps(x, vv, _CMP_GT_OQ)));
            ce = _mm256_sub_epi32(ce, _mm256_castps_si256(_mm256_cmp_ps(x, vv, _CMP_EQ_OQ)));
        }
    }
    int32_t g[8], e[8];
    _mm256_storeu_si256((__m256i *)g, cg);
    _mm256_storeu_si256((__m256i *)e, ce);
    for (int j = 0; j < 8; j++) {
        *gt += g[j];
        *eq += e[j];
    }
}

PS_TARGET_AVX2 void ps_topk_count_avx2(const void *row, ps_dtype dt, int64_t b0, int64_t nb, float v,
                              int64_t *gt, int64_t *eq) {
    switch (dt) {
    case PS_DTYPE_F32: count_dt(row, PS_DTYPE_F32, b0, nb, v, gt, eq); break;
    case PS_DTYPE_F16: count_dt(row, PS_DTYPE_F16, b0, nb, v, gt, eq); break;
    default: count_dt(row, PS_DTYPE_BF16, b0, nb, v, gt, eq); break;
    }
}

#else /* not x86-64: never dispatched (ps_isa_supported says no) */
void ps_topk_plogp_avx2(const void *a, const void *b, ps_dtype dt, int64_t b0, int64_t nb,
                        float lse_a, float lse_b, float *E) {
    (void)a; (void)b; (void)dt; (void)b0; (void)nb; (void)lse_a; (void)lse_b; (void)E;
}
void ps_topk_plogpv_avx2(const void *a, ps_dtype dt, int64_t b0, int64_t nb, float lse_a,
                         float *E, double *V) {
    (void)a; (void)dt; (void)b0; (void)nb; (void)lse_a; (void)E; (void)V;
}
void ps_topk_count_avx2(const void *row, ps_dtype dt, int64_t b0, int64_t nb, float v,
                        int64_t *gt, int64_t *eq) {
    (void)row; (void)dt; (void)b0; (void)nb; (void)v; (void)gt; (void)eq;
}
float ps_topk_fused_avx2(const void *row, ps_dtype dt, int64_t b0, int64_t nb, float shift,
                         float *bm, float *C) {
    (void)row; (void)dt; (void)b0; (void)nb; (void)shift; (void)bm; (void)C;
    return NAN;
}
void ps_topk_expsum_avx2(const void *row, ps_dtype dt, int64_t b0, int64_t nb, float shift,
                         float *C) {
    (void)row; (void)dt; (void)b0; (void)nb; (void)shift; (void)C;
}
uint64_t ps_topk_gemask_avx2(const void *row, ps_dtype dt, int64_t blk, float T) {
    (void)row; (void)dt; (void)blk; (void)T;
    return 0;
}
#endif
