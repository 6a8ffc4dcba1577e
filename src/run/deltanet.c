/*
 * deltanet.c — Gated DeltaNet kernels (see deltanet.h for shapes and formulas).
 *
 * The conv is llama.cpp's ssm_conv (float sum over the d_conv taps, oldest input first) then
 * silu; the l2 norm is ggml_l2_norm (sum of squares in double, scale 1 / max(sqrt, eps)); the
 * delta rule is ggml_gated_delta_net's recurrent form, one token after another on a state kept
 * transposed (row j of S holds value dimension j against every key dimension), so a row is
 * read twice per token: the decay with the S_j . k product, then the rank-1 update with the
 * S_j . q product. Scalar: ps_dot_f32 / ps_axpy_f32; AVX2 / AVX-512: fused multiply-adds into
 * one 8- / 16-lane accumulator reduced by a fixed tree (rows_avx2 / rows_avx512, run rows
 * outer and tokens inner by delta_head_rows). Per ISA the result never depends on the thread that
 * runs a head or on the chunking.
 */
#include "run/deltanet.h"
#include "base/simd.h"
#include "kernels/expf_libc.h"
#include "kernels/matmul.h"

#include <math.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#if defined(__x86_64__)
/* The AVX-512 form of the conv + silu, 16 channels at a time (the lanes): per channel the same
 * products and sums in the same order as the scalar loop below (a multiply and an add each, no
 * fused multiply-add, as the baseline x86-64 build of that loop computes them), the C
 * library's expf lane by lane (expf_libc.h), then the same add and division; the same bits.
 * Reading 16 channels of a token is one load where the scalar loop strides over the tokens.
 * Returns the first channel it did not do (the scalar loop does the last c1 - c0 mod 16). The
 * 16 weights of a tap are gathered (w is channel-major). */
PS_TARGET_AVX512_DQ static int64_t conv_silu_avx512(const float *x, int64_t ldx, int32_t n,
                                                    float *state, const float *w, int32_t d_conv,
                                                    int64_t ch, int64_t c0, int64_t c1, float *y,
                                                    int64_t ldy) {
    const int32_t ns = d_conv - 1;
    const __m512i lane = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10,
                                                              11, 12, 13, 14, 15),
                                            _mm512_set1_epi32(d_conv));
    const __m512 one = _mm512_set1_ps(1.0f), neg = _mm512_set1_ps(-0.0f);
    int64_t c = c0;
    for (; c + 16 <= c1; c += 16) {
        __m512 wv[16], win[16]; /* d_conv <= 16 (checked at load) */
        for (int32_t i = 0; i < d_conv; i++)
            wv[i] = _mm512_i32gather_ps(_mm512_add_epi32(lane, _mm512_set1_epi32(i)),
                                        w + c * d_conv, 4);
        for (int32_t i = 0; i < ns; i++) win[i] = _mm512_loadu_ps(state + (int64_t)i * ch + c);
        for (int32_t t = 0; t < n; t++) {
            win[ns] = _mm512_loadu_ps(x + (int64_t)t * ldx + c);
            __m512 sum = _mm512_setzero_ps();
            for (int32_t i = 0; i < d_conv; i++)
                sum = _mm512_add_ps(sum, _mm512_mul_ps(win[i], wv[i]));
            const __m512 e = ps_expf16(_mm512_xor_ps(sum, neg));
            _mm512_storeu_ps(y + (int64_t)t * ldy + c, _mm512_div_ps(sum, _mm512_add_ps(one, e)));
            for (int32_t i = 0; i < ns; i++) win[i] = win[i + 1];
        }
        for (int32_t i = 0; i < ns; i++) _mm512_storeu_ps(state + (int64_t)i * ch + c, win[i]);
    }
    return c;
}

/* AVX2: the same, 8 channels at a time. */
PS_TARGET_AVX2 static int64_t conv_silu_avx2(const float *x, int64_t ldx, int32_t n, float *state,
                                             const float *w, int32_t d_conv, int64_t ch,
                                             int64_t c0, int64_t c1, float *y, int64_t ldy) {
    const int32_t ns = d_conv - 1;
    const __m256i lane = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                                            _mm256_set1_epi32(d_conv));
    const __m256 one = _mm256_set1_ps(1.0f), neg = _mm256_set1_ps(-0.0f);
    int64_t c = c0;
    for (; c + 8 <= c1; c += 8) {
        __m256 wv[16], win[16]; /* d_conv <= 16 (checked at load) */
        for (int32_t i = 0; i < d_conv; i++)
            wv[i] = _mm256_i32gather_ps(w + c * d_conv + i, lane, 4);
        for (int32_t i = 0; i < ns; i++) win[i] = _mm256_loadu_ps(state + (int64_t)i * ch + c);
        for (int32_t t = 0; t < n; t++) {
            win[ns] = _mm256_loadu_ps(x + (int64_t)t * ldx + c);
            __m256 sum = _mm256_setzero_ps();
            for (int32_t i = 0; i < d_conv; i++)
                sum = _mm256_add_ps(sum, _mm256_mul_ps(win[i], wv[i]));
            const __m256 e = ps_expf8(_mm256_xor_ps(sum, neg));
            _mm256_storeu_ps(y + (int64_t)t * ldy + c, _mm256_div_ps(sum, _mm256_add_ps(one, e)));
            for (int32_t i = 0; i < ns; i++) win[i] = win[i + 1];
        }
        for (int32_t i = 0; i < ns; i++) _mm256_storeu_ps(state + (int64_t)i * ch + c, win[i]);
    }
    return c;
}
#endif

void ps_dn_conv_silu(ps_isa isa, const float *x, int64_t ldx, int32_t n, float *state,
                     const float *w, int32_t d_conv, int64_t ch, int64_t c0, int64_t c1, float *y,
                     int64_t ldy) {
    const int32_t ns = d_conv - 1;
#if defined(__x86_64__)
    if (isa == PS_ISA_AVX512 || isa == PS_ISA_AMX)
        c0 = conv_silu_avx512(x, ldx, n, state, w, d_conv, ch, c0, c1, y, ldy);
    else if (isa == PS_ISA_AVX2)
        c0 = conv_silu_avx2(x, ldx, n, state, w, d_conv, ch, c0, c1, y, ldy);
#else
    (void)isa;
#endif
    for (int64_t c = c0; c < c1; c++) {
        const float *wc = w + c * d_conv;
        float win[16]; /* d_conv <= 16 (checked at load) */
        for (int32_t i = 0; i < ns; i++) win[i] = state[(int64_t)i * ch + c];
        for (int32_t t = 0; t < n; t++) {
            win[ns] = x[(int64_t)t * ldx + c];
            float sum = 0.0f;
            for (int32_t i = 0; i < d_conv; i++) sum += win[i] * wc[i];
            y[(int64_t)t * ldy + c] = sum / (1.0f + expf(-sum));
            for (int32_t i = 0; i < ns; i++) win[i] = win[i + 1];
        }
        for (int32_t i = 0; i < ns; i++) state[(int64_t)i * ch + c] = win[i];
    }
}

void ps_dn_l2norm(float *x, int64_t n, float eps) {
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) sum += (double)(x[i] * x[i]);
    const float scale = 1.0f / fmaxf(sqrtf((float)sum), eps);
    for (int64_t i = 0; i < n; i++) x[i] *= scale;
}

float ps_dn_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

float ps_dn_softplus(float x) { return x > 20.0f ? x : logf(1.0f + expf(x)); }


/* ---- the delta rule: one pass per state row for the decay and S_j . k, one for the update and
 * S_j . q. Scalar: ps_dot_f32 / ps_axpy_f32 (the fixed scalar order). AVX2 / AVX-512 (d a
 * multiple of 8 / 16, else the scalar form): one vector accumulator of 8 / 16 lanes summed in
 * index order (lane l holds the elements i = l mod width), fused multiply-adds, then the lanes
 * reduced by a fixed tree; the same bits whatever the thread or the chunk. ---- */

static void delta_rows_scalar(float *S, int64_t d, const float *q, const float *k,
                              const float *v, float *o, float decay, float b, float scale) {
    for (int64_t j = 0; j < d; j++) {
        float *row = S + j * d;
        for (int64_t i = 0; i < d; i++) row[i] *= decay;
        const float delta = (v[j] - ps_dot_f32(PS_ISA_SCALAR, row, k, d)) * b;
        ps_axpy_f32(PS_ISA_SCALAR, delta, k, row, d);
        o[j] = ps_dot_f32(PS_ISA_SCALAR, row, q, d) * scale;
    }
}

#if defined(__x86_64__)
PS_TARGET_AVX2_FMA static inline float hsum_avx2(__m256 v) {
    __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
    lo = _mm_add_ps(lo, hi);                                 /* lanes l + l+4 */
    lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));              /* + l+2 */
    lo = _mm_add_ss(lo, _mm_shuffle_ps(lo, lo, 0x55));       /* + l+1 */
    return _mm_cvtss_f32(lo);
}

enum { DN_ROWS = 4 }; /* rows at a time: d is a multiple of 8 or 16 here, so of 4 */
enum { DN_TOKENS = 256 }; /* tokens per block (their decays computed once per block) */

/* One token through DN_ROWS consecutive rows r of S (row u at r + u d): for each row the
 * operations of the scalar form in the lane order above. k, q, v, o: the token's k and q, and
 * its v and o at the first row's index. */
typedef void (*dn_rows_fn)(float *r, int64_t d, const float *k, const float *q, const float *v,
                           float *o, float decay, float b, float scale);

PS_TARGET_AVX2_FMA static void rows_avx2(float *r, int64_t d, const float *k, const float *q,
                                         const float *v, float *o, float decay, float b,
                                         float scale) {
    const __m256 dec = _mm256_set1_ps(decay);
    __m256 a[DN_ROWS], dl[DN_ROWS];
    _Pragma("GCC unroll 16")
    for (int u = 0; u < DN_ROWS; u++) a[u] = _mm256_setzero_ps();
    for (int64_t i = 0; i < d; i += 8) {
        const __m256 kk = _mm256_loadu_ps(k + i);
        _Pragma("GCC unroll 16")
        for (int u = 0; u < DN_ROWS; u++) {
            const __m256 x = _mm256_mul_ps(_mm256_loadu_ps(r + u * d + i), dec);
            _mm256_storeu_ps(r + u * d + i, x);
            a[u] = _mm256_fmadd_ps(x, kk, a[u]);
        }
    }
    _Pragma("GCC unroll 16")
    for (int u = 0; u < DN_ROWS; u++) {
        dl[u] = _mm256_set1_ps((v[u] - hsum_avx2(a[u])) * b);
        a[u] = _mm256_setzero_ps();
    }
    for (int64_t i = 0; i < d; i += 8) {
        const __m256 kk = _mm256_loadu_ps(k + i), qq = _mm256_loadu_ps(q + i);
        _Pragma("GCC unroll 16")
        for (int u = 0; u < DN_ROWS; u++) {
            const __m256 x = _mm256_fmadd_ps(kk, dl[u], _mm256_loadu_ps(r + u * d + i));
            _mm256_storeu_ps(r + u * d + i, x);
            a[u] = _mm256_fmadd_ps(x, qq, a[u]);
        }
    }
    _Pragma("GCC unroll 16")
    for (int u = 0; u < DN_ROWS; u++) o[u] = hsum_avx2(a[u]) * scale;
}

PS_TARGET_AVX512_DQ static inline float hsum_avx512(__m512 v) {
    const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(v),
                                   _mm512_extractf32x8_ps(v, 1)); /* lanes l + l+8 */
    __m128 lo = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
    lo = _mm_add_ss(lo, _mm_shuffle_ps(lo, lo, 0x55));
    return _mm_cvtss_f32(lo);
}

PS_TARGET_AVX512_DQ static void rows_avx512(float *r, int64_t d, const float *k, const float *q,
                                            const float *v, float *o, float decay, float b,
                                            float scale) {
    const __m512 dec = _mm512_set1_ps(decay);
    __m512 a[DN_ROWS], dl[DN_ROWS];
    _Pragma("GCC unroll 16")
    for (int u = 0; u < DN_ROWS; u++) a[u] = _mm512_setzero_ps();
    for (int64_t i = 0; i < d; i += 16) {
        const __m512 kk = _mm512_loadu_ps(k + i);
        _Pragma("GCC unroll 16")
        for (int u = 0; u < DN_ROWS; u++) {
            const __m512 x = _mm512_mul_ps(_mm512_loadu_ps(r + u * d + i), dec);
            _mm512_storeu_ps(r + u * d + i, x);
            a[u] = _mm512_fmadd_ps(x, kk, a[u]);
        }
    }
    _Pragma("GCC unroll 16")
    for (int u = 0; u < DN_ROWS; u++) {
        dl[u] = _mm512_set1_ps((v[u] - hsum_avx512(a[u])) * b);
        a[u] = _mm512_setzero_ps();
    }
    for (int64_t i = 0; i < d; i += 16) {
        const __m512 kk = _mm512_loadu_ps(k + i), qq = _mm512_loadu_ps(q + i);
        _Pragma("GCC unroll 16")
        for (int u = 0; u < DN_ROWS; u++) {
            const __m512 x = _mm512_fmadd_ps(kk, dl[u], _mm512_loadu_ps(r + u * d + i));
            _mm512_storeu_ps(r + u * d + i, x);
            a[u] = _mm512_fmadd_ps(x, qq, a[u]);
        }
    }
    _Pragma("GCC unroll 16")
    for (int u = 0; u < DN_ROWS; u++) o[u] = hsum_avx512(a[u]) * scale;
}

/* The vector forms of a whole head, rows outer and tokens inner. A row of S depends on no other
 * row (its S_j . k, its delta from v[j], its update, its S_j . q), so a row can go through all
 * the tokens before the next row starts, with the same operations per row and token as token
 * after token, so the same bits. DN_ROWS rows at a time (rows, the ISA's step): their 4 d
 * floats stay in the L1 across the tokens (token after token streamed the whole d x d state,
 * 64 KiB at d = 128, through the L2 twice per token), four independent chains of fused
 * multiply-adds are in flight (one row alone waits for its S_j . k sum before its update), and
 * k and q are loaded once for the four. */
static void delta_head_rows(dn_rows_fn rows, float *S, int64_t d, int32_t n, const float *q,
                            const float *k, int64_t ldqk, const float *v, int64_t ldv, float *o,
                            int64_t ldo, const float *g, const float *beta, int64_t ldgb,
                            float scale) {
    float decay[DN_TOKENS], bt[DN_TOKENS];
    for (int32_t t0 = 0; t0 < n; t0 += DN_TOKENS) {
        const int32_t nb = PS_MIN((int32_t)DN_TOKENS, n - t0);
        for (int32_t t = 0; t < nb; t++) {
            decay[t] = expf(g[(int64_t)(t0 + t) * ldgb]);
            bt[t] = beta[(int64_t)(t0 + t) * ldgb];
        }
        for (int64_t j = 0; j < d; j += DN_ROWS)
            for (int32_t t = 0; t < nb; t++) {
                const int64_t tt = t0 + t;
                rows(S + j * d, d, k + tt * ldqk, q + tt * ldqk, v + tt * ldv + j,
                     o + tt * ldo + j, decay[t], bt[t], scale);
            }
    }
}
#endif

void ps_dn_delta_head(ps_isa isa, float *S, int64_t d, int32_t n, const float *q,
                      const float *k, int64_t ldqk, const float *v, int64_t ldv, float *o,
                      int64_t ldo, const float *g, const float *beta, int64_t ldgb, float scale) {
#if defined(__x86_64__)
    if ((isa == PS_ISA_AVX512 || isa == PS_ISA_AMX) && d % 16 == 0) {
        delta_head_rows(rows_avx512, S, d, n, q, k, ldqk, v, ldv, o, ldo, g, beta, ldgb, scale);
        return;
    }
    if (isa != PS_ISA_SCALAR && d % 8 == 0) {
        delta_head_rows(rows_avx2, S, d, n, q, k, ldqk, v, ldv, o, ldo, g, beta, ldgb, scale);
        return;
    }
#endif
    for (int32_t t = 0; t < n; t++) {
        const float *qt = q + (int64_t)t * ldqk, *kt = k + (int64_t)t * ldqk;
        const float *vt = v + (int64_t)t * ldv;
        float *ot = o + (int64_t)t * ldo;
        const float decay = expf(g[(int64_t)t * ldgb]), b = beta[(int64_t)t * ldgb];
        delta_rows_scalar(S, d, qt, kt, vt, ot, decay, b, scale);
    }
}

void ps_dn_delta_head_ref(float *S, int64_t d, int32_t n, const float *q, const float *k,
                          int64_t ldqk, const float *v, int64_t ldv, float *o, int64_t ldo,
                          const float *g,
                          const float *beta, int64_t ldgb, float scale) {
    for (int32_t t = 0; t < n; t++) {
        const float *qt = q + (int64_t)t * ldqk, *kt = k + (int64_t)t * ldqk;
        const float *vt = v + (int64_t)t * ldv;
        float *ot = o + (int64_t)t * ldo;
        const double decay = exp((double)g[(int64_t)t * ldgb]), b = beta[(int64_t)t * ldgb];
        for (int64_t j = 0; j < d; j++) {
            float *row = S + j * d;
            double sk = 0.0;
            for (int64_t i = 0; i < d; i++) {
                row[i] = (float)((double)row[i] * decay);
                sk += (double)row[i] * (double)kt[i];
            }
            const double delta = ((double)vt[j] - sk) * b;
            double sq = 0.0;
            for (int64_t i = 0; i < d; i++) {
                row[i] = (float)((double)row[i] + delta * (double)kt[i]);
                sq += (double)row[i] * (double)qt[i];
            }
            ot[j] = (float)(sq * (double)scale);
        }
    }
}
