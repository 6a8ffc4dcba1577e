/*
 * exp_canon.h — the canonical exp of the top-K kernel and of every sum that must carry its bits
 * (topk.c and its SIMD variants, masked_lse.c): its constants, the portable C form, and the AVX2
 * (8 lanes) and AVX-512 (16 lanes) forms, which run the same fused multiply-adds in the same
 * order, so each lane equals the C result. d < PS_EXP_LO gives 0, NaN stays NaN.
 */
#ifndef PS_EXP_CANON_H
#define PS_EXP_CANON_H

#include "base/impl.h"
#include "base/simd.h"

#include <math.h>
#include <string.h>

/* Constants of the canonical exp. exp(d) for d <= 88 (d = x - shift):
 *   d < -87        -> 0 (also -inf); NaN -> NaN (so a bad logit poisons the sum)
 *   n = round(d * log2 e)      via fma(d, LOG2E, MAGIC) - MAGIC (round to nearest even)
 *   r = fma(n, -LN2, d)        |r| <= ln2/2 (+ rounding)
 *   p = 1 + r(c1 + r(c2 + r(c3 + r(c4 + r c5))))   Horner, one fma per step; p(0) == 1
 *   exp = p * 2^n              n in [-126, 127], so 2^n is a normal float (AVX-512: scalef)
 * Degree-5 minimax fit of exp on [-ln2/2, ln2/2]: relative error <= 1.5e-7 in float32. */
#define PS_EXP_LO (-87.0f)
#define PS_EXP_LOG2E 1.44269502162933349609375f /* 0x1.715476p+0 */
#define PS_EXP_MAGIC 12582912.0f                /* 1.5 * 2^23 */
#define PS_EXP_NLN2 (-0.693147182464599609375f) /* -0x1.62e430p-1 */
#define PS_EXP_C1 0x1.fffff6p-1f
#define PS_EXP_C2 0x1.fffdc6p-2f
#define PS_EXP_C3 0x1.555a6ap-3f
#define PS_EXP_C4 0x1.573a54p-5f
#define PS_EXP_C5 0x1.0fa834p-7f

/* The canonical exp in portable C (fmaf is exact on every CPU). d <= 88 or NaN (larger d only
 * occurs in a chunk that is redone; it gives +inf here). */
static inline float ps_exp_canon(float d) {
    if (d != d) return d;
    if (d < PS_EXP_LO) return 0.0f;
    if (d > 88.0f) return INFINITY;
    float t = fmaf(d, PS_EXP_LOG2E, PS_EXP_MAGIC);
    float n = t - PS_EXP_MAGIC;
    float r = fmaf(n, PS_EXP_NLN2, d);
    float p = fmaf(PS_EXP_C5, r, PS_EXP_C4);
    p = fmaf(p, r, PS_EXP_C3);
    p = fmaf(p, r, PS_EXP_C2);
    p = fmaf(p, r, PS_EXP_C1);
    p = fmaf(p, r, 1.0f);
    uint32_t bits = (uint32_t)((int32_t)n + 127) << 23;
    float scale;
    memcpy(&scale, &bits, 4);
    return p * scale;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* exp of 8 values d <= 88 (or NaN). */
static inline __attribute__((always_inline)) PS_TARGET_AVX2 __m256 ps_exp_canon8(__m256 d) {
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

/* exp of 16 values d <= 88 (or NaN). */
static inline __attribute__((always_inline)) PS_TARGET_AVX512 __m512 ps_exp_canon16(__m512 d) {
    __mmask16 keep = _mm512_cmp_ps_mask(d, _mm512_set1_ps(PS_EXP_LO), _CMP_NLT_UQ);
    const __m512 magic = _mm512_set1_ps(PS_EXP_MAGIC);
    __m512 t = _mm512_fmadd_ps(d, _mm512_set1_ps(PS_EXP_LOG2E), magic);
    __m512 n = _mm512_sub_ps(t, magic);
    __m512 r = _mm512_fmadd_ps(n, _mm512_set1_ps(PS_EXP_NLN2), d);
    __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(PS_EXP_C5), r, _mm512_set1_ps(PS_EXP_C4));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(PS_EXP_C3));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(PS_EXP_C2));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(PS_EXP_C1));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_maskz_scalef_ps(keep, p, n);
}
#endif

#endif
