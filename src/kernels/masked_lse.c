/*
 * masked_lse.c — the masked log-mass of a logit row (masked_lse.h): the scalar reference and
 * the AVX2 and AVX-512 forms of its chunk loop, whose terms are exp_canon.h's canonical exp in
 * every form (so the same bits as the top-K kernel's sums), a masked-out term adding nothing.
 * The chunk sums, the double totals, the tree and the log are shared code.
 */
#include "kernels/masked_lse.h"
#include "kernels/topk.h"
#include "base/simd.h"

#include <math.h>

#define LANES PS_TOPK_BLOCK
#define CHUNK (PS_TOPK_BLOCK * PS_TOPK_CHUNK_BLOCKS)

/* C[j] += exp_canon(x[i] - lse) over the masked i in [i0, i1), lane j = i mod 64 (i0 is a
 * multiple of 64). */
typedef void (*chunk_fn)(const float *x, const uint8_t *mask, int64_t i0, int64_t i1, float lse,
                         float *C);

static void chunk_scalar(const float *x, const uint8_t *mask, int64_t i0, int64_t i1, float lse,
                         float *C) {
    for (int64_t i = i0; i < i1; i++)
        if (mask[i]) C[i % LANES] += ps_exp_canon(x[i] - lse);
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

static PS_TARGET_AVX2 void chunk_avx2(const float *x, const uint8_t *mask, int64_t i0,
                                      int64_t i1, float lse, float *C) {
    const __m256 sh = _mm256_set1_ps(lse);
    const int64_t full = i0 + (i1 - i0) / LANES * LANES;
    __m256 s[8];
    for (int q = 0; q < 8; q++) s[q] = _mm256_loadu_ps(C + 8 * q);
    for (int64_t i = i0; i < full; i += LANES)
        for (int q = 0; q < 8; q++) {
            __m128i m8 = _mm_loadl_epi64((const __m128i *)(mask + i + 8 * q));
            __m256i m = _mm256_cmpgt_epi32(_mm256_cvtepu8_epi32(m8), _mm256_setzero_si256());
            __m256 e = ps_exp_canon8(_mm256_sub_ps(_mm256_loadu_ps(x + i + 8 * q), sh));
            s[q] = _mm256_add_ps(s[q], _mm256_and_ps(e, _mm256_castsi256_ps(m)));
        }
    for (int q = 0; q < 8; q++) _mm256_storeu_ps(C + 8 * q, s[q]);
    chunk_scalar(x, mask, full, i1, lse, C);
}

static PS_TARGET_AVX512 void chunk_avx512(const float *x, const uint8_t *mask, int64_t i0,
                                          int64_t i1, float lse, float *C) {
    const __m512 sh = _mm512_set1_ps(lse);
    const int64_t full = i0 + (i1 - i0) / LANES * LANES;
    __m512 s[4];
    for (int q = 0; q < 4; q++) s[q] = _mm512_loadu_ps(C + 16 * q);
    for (int64_t i = i0; i < full; i += LANES)
        for (int q = 0; q < 4; q++) {
            __m128i m8 = _mm_loadu_si128((const __m128i *)(mask + i + 16 * q));
            __mmask16 m = _mm_test_epi8_mask(m8, m8);
            __m512 e = ps_exp_canon16(_mm512_sub_ps(_mm512_loadu_ps(x + i + 16 * q), sh));
            s[q] = _mm512_mask_add_ps(s[q], m, s[q], e);
        }
    for (int q = 0; q < 4; q++) _mm512_storeu_ps(C + 16 * q, s[q]);
    chunk_scalar(x, mask, full, i1, lse, C);
}
#endif

static float logmass(chunk_fn f, const float *x, const uint8_t *mask, int64_t n, float lse) {
    if (!isfinite(lse)) return NAN;
    double T[LANES] = {0};
    for (int64_t i0 = 0; i0 < n; i0 += CHUNK) {
        float C[LANES] = {0};
        f(x, mask, i0, PS_MIN(n, i0 + CHUNK), lse, C);
        for (int j = 0; j < LANES; j++) T[j] += (double)C[j];
    }
    for (int w = LANES / 2; w >= 1; w /= 2)
        for (int j = 0; j < w; j++) T[j] += T[j + w];
    return T[0] > 0.0 ? (float)log(T[0]) : -INFINITY;
}

float ps_masked_logmass_ref(const float *x, const uint8_t *mask, int64_t n, float lse) {
    return logmass(chunk_scalar, x, mask, n, lse);
}

float ps_masked_logmass(ps_isa isa, const float *x, const uint8_t *mask, int64_t n, float lse) {
    if (isa == PS_ISA_AUTO) isa = ps_isa_best();
#if defined(__x86_64__) && defined(__GNUC__)
    if (isa >= PS_ISA_AVX512) return logmass(chunk_avx512, x, mask, n, lse);
    if (isa == PS_ISA_AVX2) return logmass(chunk_avx2, x, mask, n, lse);
#endif
    return logmass(chunk_scalar, x, mask, n, lse);
}
