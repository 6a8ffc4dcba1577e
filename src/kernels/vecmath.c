/*
 * vecmath.c — the element-wise pieces of a layer with SIMD variants: softmax of one attention
 * row, SwiGLU's silu(g) * u and RMSNorm, each with a scalar reference and AVX2 / AVX-512 forms
 * chosen by the caller's ISA.
 *
 * exp: n = round(x * log2 e), r = x - n ln2 (two-part ln2), e^r by Cephes' degree-7 expf
 * polynomial (|rel err| < 2 ulp on float32), times 2^n (AVX-512: vscalefps, which also gives 0
 * below -104 and inf above 89; AVX2: two exponent-bit factors, x clamped to [-104, 88.72], so
 * +large gives ~3.4e38 instead of inf — harmless in a softmax or a silu). NaN inputs stay NaN. Every lane is computed on its own, so a value never depends on its
 * neighbours, the row length or alignment; the scalar path is libm expf (what forward.c used).
 *
 * Reduction orders are fixed per ISA and depend only on n: the softmax max is exact in any
 * order; the softmax sum runs in 8 partial sums (scalar: element j -> part j % 8), 8 lanes
 * (AVX2) or 16 lanes (AVX-512), masked tails adding +0, then a fixed pairwise tree. An
 * attention sink (gpt-oss: a learned logit per head that takes part in the normalisation but
 * has no value) enters the max and, as libm expf(sink - max), the sum after the tree; without
 * one (-inf) that term is +0 and the result is bitwise the plain softmax.
 */
#include "kernels/vecmath.h"
#include "base/simd.h"

#include <math.h>

void ps_gelu_mul_f32(float *g, const float *u, int64_t n) {
    const float sqrt_2_over_pi = 0.79788456080286535587989211986876f, coef_a = 0.044715f;
    for (int64_t i = 0; i < n; i++) {
        const float x = g[i];
        g[i] = 0.5f * x * (1.0f + tanhf(sqrt_2_over_pi * x * (1.0f + coef_a * x * x))) * u[i];
    }
}

void ps_softcap_f32(float *x, int64_t n, float c) {
    const float inv = 1.0f / c;
    for (int64_t i = 0; i < n; i++) x[i] = tanhf(x[i] * inv) * c;
}

#if defined(__x86_64__)
#include <immintrin.h>
#endif

/* Cephes expf polynomial: e^r ~ 1 + r + r^2 * P(r), |r| <= ln2 / 2 */
#define EXP_P0 1.9875691500E-4f
#define EXP_P1 1.3981999507E-3f
#define EXP_P2 8.3334519073E-3f
#define EXP_P3 4.1665795894E-2f
#define EXP_P4 1.6666665459E-1f
#define EXP_P5 5.0000001201E-1f
#define LN2_HI 0.693359375f
#define LN2_LO -2.12194440e-4f
#define LOG2E 1.44269504088896341f

/* ---- scalar (the reference) ---- */

static void softmax_scalar(float *row, int32_t n, float scale, float sink) {
    float mx = -INFINITY;
    for (int32_t j = 0; j < n; j++) {
        row[j] *= scale;
        mx = row[j] > mx ? row[j] : mx;
    }
    mx = sink > mx ? sink : mx;
    float part[8] = {0};
    int32_t j = 0;
    for (; j + 8 <= n; j += 8)
        for (int t = 0; t < 8; t++) {
            row[j + t] = expf(row[j + t] - mx);
            part[t] += row[j + t];
        }
    for (; j < n; j++) {
        row[j] = expf(row[j] - mx);
        part[j % 8] += row[j];
    }
    const float sum = (((part[0] + part[1]) + (part[2] + part[3])) +
                       ((part[4] + part[5]) + (part[6] + part[7]))) +
                      expf(sink - mx);
    const float inv = 1.0f / sum;
    for (j = 0; j < n; j++) row[j] *= inv;
}

static void silu_mul_scalar(float *g, const float *u, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        const float x = g[i];
        g[i] = (x / (1.0f + expf(-x))) * u[i];
    }
}

#if defined(__x86_64__)

/* ---- AVX2: 8 lanes ---- */

PS_TARGET_AVX2 static inline __m256 exp_avx2(__m256 x) {
    const __m256 x0 = x, nan_mask = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-104.0f)), _mm256_set1_ps(88.72f));
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(LOG2E)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(LN2_HI), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(LN2_LO), r);
    __m256 p = _mm256_set1_ps(EXP_P0);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EXP_P1));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EXP_P2));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EXP_P3));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EXP_P4));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EXP_P5));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    /* 2^n for n in [-150, 128] as 2^a * 2^b, a = n >> 1, b = n - a: both factors normal, the
     * product rounds like a single scaling (gradual underflow) */
    const __m256i ni = _mm256_cvtps_epi32(n);
    const __m256i a = _mm256_srai_epi32(ni, 1), b = _mm256_sub_epi32(ni, a);
    const __m256i bias = _mm256_set1_epi32(127);
    p = _mm256_mul_ps(p, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(a, bias), 23)));
    p = _mm256_mul_ps(p, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(b, bias), 23)));
    return _mm256_blendv_ps(p, x0, nan_mask); /* the clamp dropped NaNs: put them back */
}

PS_TARGET_AVX2 static float hmax256(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}

PS_TARGET_AVX2 static float hsum256(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

PS_TARGET_AVX2 static __m256i tail_mask256(int32_t rem) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(rem), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

PS_TARGET_AVX2 static void softmax_avx2(float *row, int32_t n, float scale, float sink) {
    const __m256 sc = _mm256_set1_ps(scale);
    __m256 mx = _mm256_set1_ps(-INFINITY);
    int32_t j = 0;
    for (; j + 8 <= n; j += 8) {
        __m256 v = _mm256_mul_ps(_mm256_loadu_ps(row + j), sc);
        _mm256_storeu_ps(row + j, v);
        mx = _mm256_max_ps(mx, v);
    }
    float m = hmax256(mx);
    for (int32_t t = j; t < n; t++) {
        row[t] *= scale;
        m = row[t] > m ? row[t] : m;
    }
    m = sink > m ? sink : m;
    const __m256 mv = _mm256_set1_ps(m);
    __m256 sum = _mm256_setzero_ps();
    for (j = 0; j + 8 <= n; j += 8) {
        __m256 e = exp_avx2(_mm256_sub_ps(_mm256_loadu_ps(row + j), mv));
        _mm256_storeu_ps(row + j, e);
        sum = _mm256_add_ps(sum, e);
    }
    if (j < n) {
        const __m256i mask = tail_mask256(n - j);
        __m256 e = exp_avx2(_mm256_sub_ps(_mm256_maskload_ps(row + j, mask), mv));
        e = _mm256_and_ps(e, _mm256_castsi256_ps(mask));
        _mm256_maskstore_ps(row + j, mask, e);
        sum = _mm256_add_ps(sum, e);
    }
    const __m256 inv = _mm256_set1_ps(1.0f / (hsum256(sum) + expf(sink - m)));
    for (j = 0; j + 8 <= n; j += 8)
        _mm256_storeu_ps(row + j, _mm256_mul_ps(_mm256_loadu_ps(row + j), inv));
    for (; j < n; j++) row[j] *= _mm256_cvtss_f32(inv);
}

PS_TARGET_AVX2 static void silu_mul_avx2(float *g, const float *u, int64_t n) {
    const __m256 one = _mm256_set1_ps(1.0f), zero = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 x = _mm256_loadu_ps(g + i);
        const __m256 s = _mm256_div_ps(x, _mm256_add_ps(one, exp_avx2(_mm256_sub_ps(zero, x))));
        _mm256_storeu_ps(g + i, _mm256_mul_ps(s, _mm256_loadu_ps(u + i)));
    }
    if (i < n) {
        const __m256i mask = tail_mask256((int32_t)(n - i));
        const __m256 x = _mm256_maskload_ps(g + i, mask);
        const __m256 s = _mm256_div_ps(x, _mm256_add_ps(one, exp_avx2(_mm256_sub_ps(zero, x))));
        _mm256_maskstore_ps(g + i, mask, _mm256_mul_ps(s, _mm256_maskload_ps(u + i, mask)));
    }
}

/* ---- AVX-512: 16 lanes ---- */

PS_TARGET_AVX512 static inline __m512 exp_avx512(__m512 x) {
    /* max(c, x) returns x when x is NaN, so NaN survives; -inf -> -104 -> 0 */
    x = _mm512_min_ps(_mm512_set1_ps(89.0f), _mm512_max_ps(_mm512_set1_ps(-104.0f), x));
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(LOG2E)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(LN2_HI), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(LN2_LO), r);
    __m512 p = _mm512_set1_ps(EXP_P0);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(EXP_P1));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(EXP_P2));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(EXP_P3));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(EXP_P4));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(EXP_P5));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    return _mm512_scalef_ps(p, n);
}

PS_TARGET_AVX512 static void softmax_avx512(float *row, int32_t n, float scale, float sink) {
    const __m512 sc = _mm512_set1_ps(scale);
    __m512 mx = _mm512_set1_ps(-INFINITY);
    int32_t j = 0;
    for (; j + 16 <= n; j += 16) {
        __m512 v = _mm512_mul_ps(_mm512_loadu_ps(row + j), sc);
        _mm512_storeu_ps(row + j, v);
        mx = _mm512_max_ps(mx, v);
    }
    const __mmask16 tm = (__mmask16)((1u << (n - j)) - 1u);
    if (j < n) {
        __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(tm, row + j), sc);
        _mm512_mask_storeu_ps(row + j, tm, v);
        mx = _mm512_mask_max_ps(mx, tm, mx, v);
    }
    float m = _mm512_reduce_max_ps(mx);
    m = sink > m ? sink : m;
    const __m512 mv = _mm512_set1_ps(m);
    __m512 sum = _mm512_setzero_ps();
    for (j = 0; j + 16 <= n; j += 16) {
        __m512 e = exp_avx512(_mm512_sub_ps(_mm512_loadu_ps(row + j), mv));
        _mm512_storeu_ps(row + j, e);
        sum = _mm512_add_ps(sum, e);
    }
    if (j < n) {
        __m512 e = exp_avx512(_mm512_sub_ps(_mm512_maskz_loadu_ps(tm, row + j), mv));
        e = _mm512_maskz_mov_ps(tm, e);
        _mm512_mask_storeu_ps(row + j, tm, e);
        sum = _mm512_add_ps(sum, e);
    }
    const __m512 inv = _mm512_set1_ps(1.0f / (_mm512_reduce_add_ps(sum) + expf(sink - m)));
    for (j = 0; j + 16 <= n; j += 16)
        _mm512_storeu_ps(row + j, _mm512_mul_ps(_mm512_loadu_ps(row + j), inv));
    if (j < n)
        _mm512_mask_storeu_ps(row + j, tm, _mm512_mul_ps(_mm512_maskz_loadu_ps(tm, row + j), inv));
}

PS_TARGET_AVX512 static void silu_mul_avx512(float *g, const float *u, int64_t n) {
    const __m512 one = _mm512_set1_ps(1.0f), zero = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 x = _mm512_loadu_ps(g + i);
        const __m512 s = _mm512_div_ps(x, _mm512_add_ps(one, exp_avx512(_mm512_sub_ps(zero, x))));
        _mm512_storeu_ps(g + i, _mm512_mul_ps(s, _mm512_loadu_ps(u + i)));
    }
    if (i < n) {
        const __mmask16 m = (__mmask16)((1u << (n - i)) - 1u);
        const __m512 x = _mm512_maskz_loadu_ps(m, g + i);
        const __m512 s = _mm512_div_ps(x, _mm512_add_ps(one, exp_avx512(_mm512_sub_ps(zero, x))));
        _mm512_mask_storeu_ps(g + i, m, _mm512_mul_ps(s, _mm512_maskz_loadu_ps(m, u + i)));
    }
}

PS_TARGET_AVX2 static void exp_many_avx2(const float *x, float *y, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, exp_avx2(_mm256_loadu_ps(x + i)));
    for (; i < n; i++) {
        float t[8] = {x[i]};
        _mm256_storeu_ps(t, exp_avx2(_mm256_loadu_ps(t)));
        y[i] = t[0];
    }
}

PS_TARGET_AVX512 static void exp_many_avx512(const float *x, float *y, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, exp_avx512(_mm512_loadu_ps(x + i)));
    if (i < n) {
        const __mmask16 m = (__mmask16)((1u << (n - i)) - 1u);
        _mm512_mask_storeu_ps(y + i, m, exp_avx512(_mm512_maskz_loadu_ps(m, x + i)));
    }
}
#endif

void ps_softmax_sink_f32(ps_isa isa, float *row, int32_t n, float scale, float sink) {
    if (n <= 0) return;
#if defined(__x86_64__)
    if (isa == PS_ISA_AVX512) { softmax_avx512(row, n, scale, sink); return; }
    if (isa == PS_ISA_AVX2) { softmax_avx2(row, n, scale, sink); return; }
#endif
    softmax_scalar(row, n, scale, sink);
}

void ps_softmax_f32(ps_isa isa, float *row, int32_t n, float scale) {
    ps_softmax_sink_f32(isa, row, n, scale, -INFINITY);
}

void ps_silu_mul_f32(ps_isa isa, float *g, const float *u, int64_t n) {
#if defined(__x86_64__)
    if (isa == PS_ISA_AVX512) { silu_mul_avx512(g, u, n); return; }
    if (isa == PS_ISA_AVX2) { silu_mul_avx2(g, u, n); return; }
#endif
    silu_mul_scalar(g, u, n);
}

void ps_exp_f32(ps_isa isa, const float *x, float *y, int64_t n) {
#if defined(__x86_64__)
    if (isa == PS_ISA_AVX512) { exp_many_avx512(x, y, n); return; }
    if (isa == PS_ISA_AVX2) { exp_many_avx2(x, y, n); return; }
#endif
    for (int64_t i = 0; i < n; i++) y[i] = expf(x[i]);
}

/* ---- RMSNorm ----
 * out[i] = (x[i] * scale) * w[i], scale = 1 / sqrtf((float)(ss / d) + eps), ss = the sum of the
 * float32 squares x[i] * x[i] in double (as llama.cpp). The scalar form adds in index order;
 * AVX2 / AVX-512 keep 8 / 16 double partial sums (element i -> lane i % 8 / i % 16, masked
 * tails adding +0) and add them in a fixed tree. Double sums of float squares differ between
 * orders by ~1e-16 relative, so scale almost always has the same bits on every ISA; the element
 * step is the same two roundings everywhere. out may equal x. */

static void rmsnorm_scale_apply(float *out, const float *x, const float *w, int64_t d,
                                double ss, float eps) {
    const float mean = (float)(ss / (double)d);
    const float scale = 1.0f / sqrtf(mean + eps);
    for (int64_t i = 0; i < d; i++) out[i] = (x[i] * scale) * w[i];
}

static void rmsnorm_scalar(float *out, const float *x, const float *w, int64_t d, float eps) {
    double ss = 0.0;
    for (int64_t i = 0; i < d; i++) ss += (double)(x[i] * x[i]);
    rmsnorm_scale_apply(out, x, w, d, ss, eps);
}

#if defined(__x86_64__)
PS_TARGET_AVX2 static void rmsnorm_avx2(float *out, const float *x, const float *w, int64_t d,
                                float eps) {
    __m256d a0 = _mm256_setzero_pd(), a1 = _mm256_setzero_pd();
    int64_t i = 0;
    for (; i + 8 <= d; i += 8) {
        const __m256 v = _mm256_loadu_ps(x + i);
        const __m256 p = _mm256_mul_ps(v, v);
        a0 = _mm256_add_pd(a0, _mm256_cvtps_pd(_mm256_castps256_ps128(p)));
        a1 = _mm256_add_pd(a1, _mm256_cvtps_pd(_mm256_extractf128_ps(p, 1)));
    }
    if (i < d) {
        const __m256 v = _mm256_maskload_ps(x + i, tail_mask256((int32_t)(d - i)));
        const __m256 p = _mm256_mul_ps(v, v);
        a0 = _mm256_add_pd(a0, _mm256_cvtps_pd(_mm256_castps256_ps128(p)));
        a1 = _mm256_add_pd(a1, _mm256_cvtps_pd(_mm256_extractf128_ps(p, 1)));
    }
    /* lanes 0..7: (0+4, 1+5, 2+6, 3+7), then (0+2, 1+3), then the two */
    const __m256d s4 = _mm256_add_pd(a0, a1);
    const __m128d s2 = _mm_add_pd(_mm256_castpd256_pd128(s4), _mm256_extractf128_pd(s4, 1));
    const double ss = _mm_cvtsd_f64(_mm_add_sd(s2, _mm_unpackhi_pd(s2, s2)));
    const float mean = (float)(ss / (double)d);
    const __m256 sc = _mm256_set1_ps(1.0f / sqrtf(mean + eps));
    for (i = 0; i + 8 <= d; i += 8)
        _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), sc),
                                                _mm256_loadu_ps(w + i)));
    const float scale = _mm256_cvtss_f32(sc);
    for (; i < d; i++) out[i] = (x[i] * scale) * w[i];
}

PS_TARGET_AVX512 static void rmsnorm_avx512(float *out, const float *x, const float *w, int64_t d,
                                    float eps) {
    __m512d a0 = _mm512_setzero_pd(), a1 = _mm512_setzero_pd();
    for (int64_t i = 0; i < d; i += 16) {
        const __mmask16 m = d - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (d - i)) - 1u);
        const __m512 v = _mm512_maskz_loadu_ps(m, x + i);
        const __m512 p = _mm512_mul_ps(v, v);
        a0 = _mm512_add_pd(a0, _mm512_cvtps_pd(_mm512_castps512_ps256(p)));
        a1 = _mm512_add_pd(a1, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(
                                   _mm512_castps_pd(p), 1))));
    }
    /* 16 lanes -> 8 (i + 8) -> 4 -> 2 -> 1, each step adding the upper half */
    const __m512d s8 = _mm512_add_pd(a0, a1);
    const __m256d s4 = _mm256_add_pd(_mm512_castpd512_pd256(s8), _mm512_extractf64x4_pd(s8, 1));
    const __m128d s2 = _mm_add_pd(_mm256_castpd256_pd128(s4), _mm256_extractf128_pd(s4, 1));
    const double ss = _mm_cvtsd_f64(_mm_add_sd(s2, _mm_unpackhi_pd(s2, s2)));
    const float mean = (float)(ss / (double)d);
    const __m512 sc = _mm512_set1_ps(1.0f / sqrtf(mean + eps));
    for (int64_t i = 0; i < d; i += 16) {
        const __mmask16 m = d - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (d - i)) - 1u);
        _mm512_mask_storeu_ps(out + i, m, _mm512_mul_ps(_mm512_mul_ps(
                                              _mm512_maskz_loadu_ps(m, x + i), sc),
                                              _mm512_maskz_loadu_ps(m, w + i)));
    }
}
#endif

void ps_rmsnorm_f32(ps_isa isa, float *out, const float *x, const float *w, int64_t d,
                    float eps) {
#if defined(__x86_64__)
    if (isa == PS_ISA_AVX512) {
        rmsnorm_avx512(out, x, w, d, eps);
        return;
    }
    if (isa == PS_ISA_AVX2) {
        rmsnorm_avx2(out, x, w, d, eps);
        return;
    }
#endif
    rmsnorm_scalar(out, x, w, d, eps);
}
