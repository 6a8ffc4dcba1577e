/*
 * topk_avx2.c — the AVX2 + FMA + F16C variants of the two chunk kernels of the top-K row pass
 * (see topk.h for the canonical procedure they must reproduce bit for bit).
 *
 * One 64-logit block is eight ymm vectors; vector q holds lanes 8q..8q+7, so the 64 lane sums
 * live in eight accumulators. The exp is topk.h's canonical sequence of FMAs; p * 2^n is a
 * multiply by 2^n built from its exponent bits (n in [-126, 0]: a normal float), and lanes
 * with d < -87 are cleared with a compare mask (NaN lanes stay NaN).
 */
#include "topk.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define PS_T2 __attribute__((target("avx2,fma,f16c")))
#define PS_T2_INLINE static inline __attribute__((always_inline)) PS_T2

/* 8 logits at element i of row, as float32 (exact conversion). */
PS_T2_INLINE __m256 load8(const void *row, ps_dtype dt, int64_t i) {
    if (dt == PS_DTYPE_F32) return _mm256_loadu_ps((const float *)row + i);
    __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)row + i));
    if (dt == PS_DTYPE_F16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

/* The canonical exp of 8 values d <= 0 (or NaN). */
PS_T2_INLINE __m256 exp8(__m256 d) {
    __m256 zero_it = _mm256_cmp_ps(d, _mm256_set1_ps(PS_EXP_LO), _CMP_LT_OQ);
    const __m256 magic = _mm256_set1_ps(PS_EXP_MAGIC);
    __m256 t = _mm256_fmadd_ps(d, _mm256_set1_ps(PS_EXP_LOG2E), magic);
    __m256 n = _mm256_sub_ps(t, magic);
    __m256 r = _mm256_fmadd_ps(n, _mm256_set1_ps(PS_EXP_NLN2), d);
    __m256 p = _mm256_fmadd_ps(_mm256_set1_ps(PS_EXP_C5), r, _mm256_set1_ps(PS_EXP_C4));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(PS_EXP_C3));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(PS_EXP_C2));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(PS_EXP_C1));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    /* 2^n from its exponent bits; garbage in lanes that are cleared below */
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)),
                                  23);
    return _mm256_andnot_ps(zero_it, _mm256_mul_ps(p, _mm256_castsi256_ps(e)));
}

PS_T2_INLINE float hmax8(__m256 v) {
    __m128 b = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    b = _mm_max_ps(b, _mm_movehl_ps(b, b));
    b = _mm_max_ss(b, _mm_movehdup_ps(b));
    return _mm_cvtss_f32(b);
}

/* bm[i] = max(block b0 + i), i < nb; returns their max.  row: (n_blocks, 64) of dt. */
PS_T2_INLINE float blockmax_dt(const void *row, ps_dtype dt, int64_t b0, int64_t nb, float *bm) {
    __m256 cm = _mm256_set1_ps(-INFINITY);
    for (int64_t b = 0; b < nb; b++) {
        int64_t i = (b0 + b) * PS_TOPK_BLOCK;
        __m256 v0 = _mm256_max_ps(load8(row, dt, i), load8(row, dt, i + 8));
        __m256 v1 = _mm256_max_ps(load8(row, dt, i + 16), load8(row, dt, i + 24));
        __m256 v2 = _mm256_max_ps(load8(row, dt, i + 32), load8(row, dt, i + 40));
        __m256 v3 = _mm256_max_ps(load8(row, dt, i + 48), load8(row, dt, i + 56));
        __m256 v = _mm256_max_ps(_mm256_max_ps(v0, v1), _mm256_max_ps(v2, v3));
        cm = _mm256_max_ps(cm, v);
        if (bm) bm[b] = hmax8(v);
    }
    return hmax8(cm);
}

/* S[8q + j] += exp(x[64b + 8q + j] - shift) for blocks b0..b0+nb-1 in order. Two passes of
 * four accumulators each (lanes 0..31, then 32..63) keep the state in registers; each lane
 * still sees its elements in order, so the sums are the canonical ones. */
PS_T2_INLINE void expsum_dt(const void *row, ps_dtype dt, int64_t b0, int64_t nb, float shift,
                            float *S) {
    const __m256 sh = _mm256_set1_ps(shift);
    const size_t es = dt == PS_DTYPE_F32 ? 4 : 2;
    for (int half = 0; half < 2; half++) {
        int64_t o = 32 * half;
        __m256 s0 = _mm256_loadu_ps(S + o), s1 = _mm256_loadu_ps(S + o + 8);
        __m256 s2 = _mm256_loadu_ps(S + o + 16), s3 = _mm256_loadu_ps(S + o + 24);
        for (int64_t b = 0; b < nb; b++) {
            int64_t i = (b0 + b) * PS_TOPK_BLOCK + o;
            if (half == 0) { /* pull the same block of the next chunk in (see topk_avx512.c) */
                const char *next =
                    (const char *)row + (size_t)(i + PS_TOPK_BLOCK * PS_TOPK_CHUNK_BLOCKS) * es;
                for (size_t off = 0; off < PS_TOPK_BLOCK * es; off += 64)
                    _mm_prefetch(next + off, _MM_HINT_T0);
            }
            s0 = _mm256_add_ps(s0, exp8(_mm256_sub_ps(load8(row, dt, i), sh)));
            s1 = _mm256_add_ps(s1, exp8(_mm256_sub_ps(load8(row, dt, i + 8), sh)));
            s2 = _mm256_add_ps(s2, exp8(_mm256_sub_ps(load8(row, dt, i + 16), sh)));
            s3 = _mm256_add_ps(s3, exp8(_mm256_sub_ps(load8(row, dt, i + 24), sh)));
        }
        _mm256_storeu_ps(S + o, s0);
        _mm256_storeu_ps(S + o + 8, s1);
        _mm256_storeu_ps(S + o + 16, s2);
        _mm256_storeu_ps(S + o + 24, s3);
    }
}

PS_T2 float ps_topk_blockmax_avx2(const void *row, ps_dtype dt, int64_t b0, int64_t nb,
                                  float *bm) {
    switch (dt) {
    case PS_DTYPE_F32: return blockmax_dt(row, PS_DTYPE_F32, b0, nb, bm);
    case PS_DTYPE_F16: return blockmax_dt(row, PS_DTYPE_F16, b0, nb, bm);
    default: return blockmax_dt(row, PS_DTYPE_BF16, b0, nb, bm);
    }
}

PS_T2 void ps_topk_expsum_avx2(const void *row, ps_dtype dt, int64_t b0, int64_t nb, float shift,
                               float *S) {
    switch (dt) {
    case PS_DTYPE_F32: expsum_dt(row, PS_DTYPE_F32, b0, nb, shift, S); break;
    case PS_DTYPE_F16: expsum_dt(row, PS_DTYPE_F16, b0, nb, shift, S); break;
    default: expsum_dt(row, PS_DTYPE_BF16, b0, nb, shift, S); break;
    }
}

#else /* not x86-64: never dispatched (ps_isa_supported says no) */
float ps_topk_blockmax_avx2(const void *row, ps_dtype dt, int64_t b0, int64_t nb, float *bm) {
    (void)row; (void)dt; (void)b0; (void)nb; (void)bm;
    return NAN;
}
void ps_topk_expsum_avx2(const void *row, ps_dtype dt, int64_t b0, int64_t nb, float shift,
                         float *S) {
    (void)row; (void)dt; (void)b0; (void)nb; (void)shift; (void)S;
}
#endif
