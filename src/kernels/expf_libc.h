/*
 * expf_libc.h — expf as the C library computes it, 8 lanes at a time on AVX2 and 16 on
 * AVX-512, so a kernel that used the C library's expf per element keeps its bits when it is
 * vectorized (DeltaNet's conv + silu, deltanet.c).
 *
 * The C library here is glibc (2.27 and later), whose expf is ARM's optimized-routines
 * algorithm: z = x * 32 / ln 2 rounded to an integer k (by adding 1.5 * 2^52), r = z - k,
 * 2^(k/32) from a 32-entry table of doubles, a degree-3 polynomial in r, all in double, then one
 * rounding to float. On x86-64 CPUs with FMA and AVX2 glibc runs the build of that C compiled
 * for FMA (__expf_fma), in which the compiler fused five multiply-adds: kd = fma(x, InvLn2N,
 * shift), r = fma(x, InvLn2N, -(kd - shift)), z = fma(C0, r, C1), y = fma(C2, r, 1), y = fma(z,
 * r * r, y). ps_expf8 / ps_expf16 run those operations on the same constants (glibc's
 * __exp2f_data: the table and the scaled polynomial), lane by lane, so each lane is bitwise the
 * scalar expf of the CPUs their kernels run on (the AVX2 kernels require FMA too). |x| >= 88 and
 * NaN (the library's special path) are handed to the scalar expf. Checked when written against
 * glibc 2.36's expf on every float of |x| < 88 (2.2 billion): no difference. test_hybrid
 * compares a sweep of all floats and the two inputs whose result changes when r is computed
 * without the fused multiply-add.
 */
#ifndef PS_EXPF_LIBC_H
#define PS_EXPF_LIBC_H

#include "base/impl.h"
#include "base/simd.h"

#include <math.h>
#include <stdint.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* 2^(i/32) as the bits of a double, less i << 47 (glibc's __exp2f_data.tab). */
static const uint64_t PS_EXPF_TAB[32] = {
    0x3ff0000000000000, 0x3fefd9b0d3158574, 0x3fefb5586cf9890f, 0x3fef9301d0125b51,
    0x3fef72b83c7d517b, 0x3fef54873168b9aa, 0x3fef387a6e756238, 0x3fef1e9df51fdee1,
    0x3fef06fe0a31b715, 0x3feef1a7373aa9cb, 0x3feedea64c123422, 0x3feece086061892d,
    0x3feebfdad5362a27, 0x3feeb42b569d4f82, 0x3feeab07dd485429, 0x3feea47eb03a5585,
    0x3feea09e667f3bcd, 0x3fee9f75e8ec5f74, 0x3feea11473eb0187, 0x3feea589994cce13,
    0x3feeace5422aa0db, 0x3feeb737b0cdc5e5, 0x3feec49182a3f090, 0x3feed503b23e255d,
    0x3feee89f995ad3ad, 0x3feeff76f2fb5e47, 0x3fef199bdd85529c, 0x3fef3720dcef9069,
    0x3fef5818dcfba487, 0x3fef7c97337b9b5f, 0x3fefa4afa2a490da, 0x3fefd0765b6e4540,
};
#define PS_EXPF_INVLN2N 0x1.71547652b82fep+5 /* 32 / ln 2 */
#define PS_EXPF_SHIFT 0x1.8p+52
#define PS_EXPF_C0 0x1.c6af84b912394p-20 /* exp2f's polynomial scaled by 1/32^3, 1/32^2, 1/32 */
#define PS_EXPF_C1 0x1.ebfce50fac4f3p-13
#define PS_EXPF_C2 0x1.62e42ff0c52d6p-6

/* The lanes of `special` (bit l: lane l) of n: e[l] = expf(x[l]), the library's own special
 * path (|x| >= 88, inf, NaN). */
static inline void ps_expf_special(const float *x, float *e, unsigned special, int n) {
    for (int l = 0; l < n; l++)
        if (special >> l & 1) e[l] = expf(x[l]);
}

/* 4 lanes in double on AVX2 (x converted exactly): the same operations. */
static inline __attribute__((always_inline)) PS_TARGET_AVX2 __m128 ps_expf4_pd(__m256d x) {
    const __m256d invln2n = _mm256_set1_pd(PS_EXPF_INVLN2N), shift = _mm256_set1_pd(PS_EXPF_SHIFT);
    const __m256d kds = _mm256_fmadd_pd(x, invln2n, shift);
    const __m256i ki = _mm256_castpd_si256(kds);
    const __m256d kd = _mm256_sub_pd(kds, shift);
    const __m256d r = _mm256_fmsub_pd(x, invln2n, kd);
    const __m256i idx = _mm256_and_si256(ki, _mm256_set1_epi64x(31));
    const __m256i t = _mm256_add_epi64(
        _mm256_i64gather_epi64((const long long *)PS_EXPF_TAB, idx, 8), _mm256_slli_epi64(ki, 47));
    const __m256d z = _mm256_fmadd_pd(_mm256_set1_pd(PS_EXPF_C0), r, _mm256_set1_pd(PS_EXPF_C1));
    const __m256d r2 = _mm256_mul_pd(r, r);
    __m256d y = _mm256_fmadd_pd(_mm256_set1_pd(PS_EXPF_C2), r, _mm256_set1_pd(1.0));
    y = _mm256_fmadd_pd(z, r2, y);
    return _mm256_cvtpd_ps(_mm256_mul_pd(y, _mm256_castsi256_pd(t)));
}

/* expf of 8 floats on AVX2, each lane the bits of the C library's expf. */
static inline PS_TARGET_AVX2 __m256 ps_expf8(__m256 x) {
    const __m128 a = ps_expf4_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(x)));
    const __m128 b = ps_expf4_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(x, 1)));
    __m256 e = _mm256_insertf128_ps(_mm256_castps128_ps256(a), b, 1);
    const __m256i top = _mm256_and_si256(_mm256_srli_epi32(_mm256_castps_si256(x), 20),
                                         _mm256_set1_epi32(0x7ff));
    const int special = _mm256_movemask_ps(
        _mm256_castsi256_ps(_mm256_cmpgt_epi32(top, _mm256_set1_epi32(0x42a))));
    if (special) {
        float xs[8], es[8];
        _mm256_storeu_ps(xs, x);
        _mm256_storeu_ps(es, e);
        ps_expf_special(xs, es, (unsigned)special, 8);
        e = _mm256_loadu_ps(es);
    }
    return e;
}

/* 8 lanes in double (x converted exactly). */
static inline __attribute__((always_inline)) PS_TARGET_AVX512_DQ __m256 ps_expf8_pd(__m512d x) {
    const __m512d invln2n = _mm512_set1_pd(PS_EXPF_INVLN2N), shift = _mm512_set1_pd(PS_EXPF_SHIFT);
    const __m512d kds = _mm512_fmadd_pd(x, invln2n, shift);
    const __m512i ki = _mm512_castpd_si512(kds);
    const __m512d kd = _mm512_sub_pd(kds, shift);
    const __m512d r = _mm512_fmsub_pd(x, invln2n, kd);
    const __m512i idx = _mm512_and_si512(ki, _mm512_set1_epi64(31));
    const __m512i lo = _mm512_permutex2var_epi64(_mm512_loadu_si512(PS_EXPF_TAB), idx,
                                                 _mm512_loadu_si512(PS_EXPF_TAB + 8));
    const __m512i hi = _mm512_permutex2var_epi64(_mm512_loadu_si512(PS_EXPF_TAB + 16), idx,
                                                 _mm512_loadu_si512(PS_EXPF_TAB + 24));
    const __mmask8 upper = _mm512_test_epi64_mask(idx, _mm512_set1_epi64(16));
    const __m512i t = _mm512_add_epi64(_mm512_mask_blend_epi64(upper, lo, hi),
                                       _mm512_slli_epi64(ki, 47));
    const __m512d z = _mm512_fmadd_pd(_mm512_set1_pd(PS_EXPF_C0), r, _mm512_set1_pd(PS_EXPF_C1));
    const __m512d r2 = _mm512_mul_pd(r, r);
    __m512d y = _mm512_fmadd_pd(_mm512_set1_pd(PS_EXPF_C2), r, _mm512_set1_pd(1.0));
    y = _mm512_fmadd_pd(z, r2, y);
    return _mm512_cvtpd_ps(_mm512_mul_pd(y, _mm512_castsi512_pd(t)));
}

/* expf of 16 floats, each lane the bits of the C library's expf (above). */
static inline PS_TARGET_AVX512_DQ __m512 ps_expf16(__m512 x) {
    const __m256 a = ps_expf8_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(x)));
    const __m256 b = ps_expf8_pd(_mm512_cvtps_pd(_mm512_extractf32x8_ps(x, 1)));
    __m512 e = _mm512_insertf32x8(_mm512_castps256_ps512(a), b, 1);
    /* the library's special path: |x| >= 88 (top 12 bits of |x| >= 0x42b), inf, NaN */
    const __m512i top = _mm512_and_si512(_mm512_srli_epi32(_mm512_castps_si512(x), 20),
                                         _mm512_set1_epi32(0x7ff));
    const __mmask16 special = _mm512_cmpge_epu32_mask(top, _mm512_set1_epi32(0x42b));
    if (special) {
        float xs[16], es[16];
        _mm512_storeu_ps(xs, x);
        _mm512_storeu_ps(es, e);
        ps_expf_special(xs, es, special, 16);
        e = _mm512_loadu_ps(es);
    }
    return e;
}
#endif

#endif /* PS_EXPF_LIBC_H */
