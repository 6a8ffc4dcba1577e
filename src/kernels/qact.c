/*
 * qact.c — the activation quantisers of the native matmuls, every one in this file: Q8_0
 * (Q8_0, Q4_0, Q5_0, IQ4_NL and MXFP4 weights), Q8_K (k-quants, IQ4_XS), Q8_1 (Q4_1, Q5_1) and
 * the bf16 rounding (BF16 weights); see qact.h for the arithmetic. Each has a plain reference
 * and AVX2 / AVX-512 forms picked by the caller's ISA that write the reference's bytes.
 *
 * Q8_K: the reference is llama.cpp's quantize_row_q8_K_ref step by step: the scale comes from
 * the signed value of largest magnitude (first one on ties, `>` scan), the rounding is its
 * 1.5 * 2^23 addition (round to nearest, ties to even, for |v| < 2^22). The SIMD forms find the
 * same element (the magnitude maximum is order-free; the first index holding it is found from
 * the compare masks), compute iscale with the same scalar division, and round with vcvtps2dq
 * under the default MXCSR mode (nearest, ties to even): the same integers for every |v| <= 128.
 * The sums of 16 are exact integer sums, so every variant writes the reference's bytes.
 * Q8_1 reuses ps_quant_act_q8 for q and d and adds s: the block's |x| maximum (order-free)
 * and its exact sum of q found by vector reductions on the SIMD paths, then the same scalar
 * product and f16 rounding on every path.
 */
#include "kernels/qact.h"
#include "base/simd.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif
#include <float.h>
#include <math.h>

/* ---- activations -> Q8_0 for the int8 matmul ----
 *
 * Rounding: the reference uses roundf. The SIMD forms round exactly the same way without it:
 * t = trunc(v) (exact), f = v - t (exact for |v| < 2^23), and t moves one away from zero when
 * |f| >= 0.5 — round half away from zero. The clamp to [-127, 127] comes first (max then min,
 * whose NaN rules match fmaxf/fminf: a NaN product, 0 * inf when 1/dd overflows, becomes -127;
 * its block's d is then 0 or tiny, as in llama.cpp). */

void ps_quant_act_q8_ref(const float *x, int64_t n, uint8_t *q, float *d, bool offset) {
    for (int64_t b = 0; b < n / PS_Q8_0_BLOCK; b++) {
        const float *xb = x + b * PS_Q8_0_BLOCK;
        uint8_t *qb = q + b * PS_Q8_0_BLOCK;
        float amax = 0.0f;
        bool bad = false;
        for (int j = 0; j < PS_Q8_0_BLOCK; j++) {
            const float a = fabsf(xb[j]);
            if (!(a <= FLT_MAX)) bad = true;
            else if (a > amax) amax = a;
        }
        if (bad) {
            memset(qb, offset ? 128 : 0, PS_Q8_0_BLOCK);
            d[b] = NAN;
            continue;
        }
        const float dd = amax / 127.0f;
        const float id = dd != 0.0f ? 1.0f / dd : 0.0f;
        d[b] = ps_f16_to_f32(ps_f32_to_f16(dd));
        for (int j = 0; j < PS_Q8_0_BLOCK; j++) {
            const float v = fminf(fmaxf(xb[j] * id, -127.0f), 127.0f);
            const int qi = (int)roundf(v);
            qb[j] = offset ? (uint8_t)(qi + 128) : (uint8_t)(int8_t)qi;
        }
    }
}

#if defined(__x86_64__)
PS_TARGET_AVX2
static void act_q8_avx2(const float *x, int64_t n, uint8_t *q, float *d, bool offset) {
    const __m256 sign = _mm256_set1_ps(-0.0f), big = _mm256_set1_ps(FLT_MAX);
    const __m256 lo = _mm256_set1_ps(-127.0f), hi = _mm256_set1_ps(127.0f);
    const __m256 half = _mm256_set1_ps(0.5f), one = _mm256_set1_ps(1.0f);
    for (int64_t b = 0; b < n / PS_Q8_0_BLOCK; b++) {
        const float *xb = x + b * PS_Q8_0_BLOCK;
        __m256 v[4], m = _mm256_setzero_ps();
        int bad = 0;
        for (int i = 0; i < 4; i++) {
            v[i] = _mm256_loadu_ps(xb + 8 * i);
            const __m256 a = _mm256_andnot_ps(sign, v[i]);
            bad |= _mm256_movemask_ps(_mm256_cmp_ps(a, big, _CMP_NLE_UQ));
            m = _mm256_max_ps(m, a);
        }
        if (bad) {
            memset(q + b * PS_Q8_0_BLOCK, offset ? 128 : 0, PS_Q8_0_BLOCK);
            d[b] = NAN;
            continue;
        }
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        const float amax = _mm_cvtss_f32(m4);
        const float dd = amax / 127.0f;
        const float id = dd != 0.0f ? 1.0f / dd : 0.0f;
        d[b] = ps_f16_to_f32(ps_f32_to_f16(dd));
        const __m256 iv = _mm256_set1_ps(id);
        __m256i qi[4];
        for (int i = 0; i < 4; i++) {
            const __m256 s = _mm256_min_ps(_mm256_max_ps(_mm256_mul_ps(v[i], iv), lo), hi);
            const __m256 t = _mm256_round_ps(s, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
            const __m256 f = _mm256_andnot_ps(sign, _mm256_sub_ps(s, t));
            const __m256 step = _mm256_and_ps(_mm256_cmp_ps(f, half, _CMP_GE_OQ),
                                              _mm256_or_ps(one, _mm256_and_ps(s, sign)));
            qi[i] = _mm256_cvttps_epi32(_mm256_add_ps(t, step));
        }
        /* 32 int32 -> 32 int8 in order (packs work per 128-bit lane; the permute restores it) */
        const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(qi[0], qi[1]),
                                             _mm256_packs_epi32(qi[2], qi[3]));
        __m256i r = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        if (offset) r = _mm256_xor_si256(r, _mm256_set1_epi8((char)0x80));
        _mm256_storeu_si256((__m256i *)(q + b * PS_Q8_0_BLOCK), r);
    }
}

/* One block's 32 values v0, v1 by its inverse scale id into q (as the reference rounds). */
PS_TARGET_AVX512 static inline void
act_q8_block_avx512(__m512 v0, __m512 v1, float id, uint8_t *q, bool offset) {
    const __m512 lo = _mm512_set1_ps(-127.0f), hi = _mm512_set1_ps(127.0f);
    const __m512 half = _mm512_set1_ps(0.5f), one = _mm512_set1_ps(1.0f);
    const __m512i sign = _mm512_set1_epi32((int)0x80000000u);
    const __m512 iv = _mm512_set1_ps(id);
    for (int i = 0; i < 2; i++) {
        const __m512 s = _mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(i ? v1 : v0, iv), lo), hi);
        const __m512 t = _mm512_roundscale_ps(s, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
        const __mmask16 up = _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_sub_ps(s, t)), half,
                                                _CMP_GE_OQ);
        const __m512 sgn_one = _mm512_castsi512_ps(_mm512_or_si512(
            _mm512_and_si512(_mm512_castps_si512(s), sign), _mm512_castps_si512(one)));
        __m128i r = _mm512_cvtepi32_epi8(_mm512_cvttps_epi32(_mm512_mask_add_ps(t, up, t, sgn_one)));
        if (offset) r = _mm_xor_si128(r, _mm_set1_epi8((char)0x80));
        _mm_storeu_si128((__m128i *)(q + 16 * i), r);
    }
}

/* Blocks go in sixteens: their maxima are gathered into one vector, so the two divisions
 * (dd = amax / 127, id = 1 / dd) and the f16 rounding of dd (vcvtps2ph, round to nearest even,
 * as ps_f32_to_f16) run once per 16 blocks as vector operations; each lane computes exactly
 * the scalar IEEE operations of the reference. The scalar form serialised on those divisions
 * (its share of an AMX matmul: docs/kernels.md, "Measured choices of the integer kernels").
 * Leftover blocks take the scalar form. */
PS_TARGET_AVX512_F16C
static void act_q8_avx512(const float *x, int64_t n, uint8_t *q, float *d, bool offset) {
    const __m512 big = _mm512_set1_ps(FLT_MAX);
    const int64_t nb = n / PS_Q8_0_BLOCK;
    int64_t b = 0;
    for (; b + 16 <= nb; b += 16) {
        float am[16] __attribute__((aligned(64)));
        __mmask16 bad = 0;
        for (int i = 0; i < 16; i++) {
            const float *xb = x + (b + i) * PS_Q8_0_BLOCK;
            const __m512 a0 = _mm512_abs_ps(_mm512_loadu_ps(xb));
            const __m512 a1 = _mm512_abs_ps(_mm512_loadu_ps(xb + 16));
            if (_mm512_cmp_ps_mask(a0, big, _CMP_NLE_UQ) | _mm512_cmp_ps_mask(a1, big, _CMP_NLE_UQ))
                bad |= (__mmask16)(1u << i);
            am[i] = _mm512_reduce_max_ps(_mm512_max_ps(a0, a1)); /* order-free */
        }
        const __m512 dd = _mm512_div_ps(_mm512_load_ps(am), _mm512_set1_ps(127.0f));
        const __mmask16 nz = _mm512_cmp_ps_mask(dd, _mm512_setzero_ps(), _CMP_NEQ_OQ);
        float idv[16] __attribute__((aligned(64)));
        _mm512_store_ps(idv, _mm512_maskz_div_ps(nz, _mm512_set1_ps(1.0f), dd));
        const __m512 dh = _mm512_cvtph_ps(_mm512_cvtps_ph(dd, _MM_FROUND_TO_NEAREST_INT));
        _mm512_storeu_ps(d + b, _mm512_mask_blend_ps(bad, dh, _mm512_set1_ps(NAN)));
        for (int i = 0; i < 16; i++) {
            const float *xb = x + (b + i) * PS_Q8_0_BLOCK;
            uint8_t *qb = q + (b + i) * PS_Q8_0_BLOCK;
            if (bad & (1u << i)) memset(qb, offset ? 128 : 0, PS_Q8_0_BLOCK);
            else act_q8_block_avx512(_mm512_loadu_ps(xb), _mm512_loadu_ps(xb + 16), idv[i], qb, offset);
        }
    }
    for (; b < nb; b++) {
        const float *xb = x + b * PS_Q8_0_BLOCK;
        const __m512 v0 = _mm512_loadu_ps(xb), v1 = _mm512_loadu_ps(xb + 16);
        const __m512 a0 = _mm512_abs_ps(v0), a1 = _mm512_abs_ps(v1);
        if (_mm512_cmp_ps_mask(a0, big, _CMP_NLE_UQ) | _mm512_cmp_ps_mask(a1, big, _CMP_NLE_UQ)) {
            memset(q + b * PS_Q8_0_BLOCK, offset ? 128 : 0, PS_Q8_0_BLOCK);
            d[b] = NAN;
            continue;
        }
        const float amax = _mm512_reduce_max_ps(_mm512_max_ps(a0, a1)); /* order-free */
        const float dd = amax / 127.0f;
        const float id = dd != 0.0f ? 1.0f / dd : 0.0f;
        d[b] = ps_f16_to_f32(ps_f32_to_f16(dd));
        act_q8_block_avx512(v0, v1, id, q + b * PS_Q8_0_BLOCK, offset);
    }
}
#endif

void ps_quant_act_q8(ps_isa isa, const float *x, int64_t n, uint8_t *q, float *d, bool offset) {
    if (isa == PS_ISA_AUTO) isa = ps_isa_best();
#if defined(__x86_64__)
    if (isa == PS_ISA_AVX512) {
        act_q8_avx512(x, n, q, d, offset);
        return;
    }
    if (isa == PS_ISA_AVX2) {
        act_q8_avx2(x, n, q, d, offset);
        return;
    }
#endif
    ps_quant_act_q8_ref(x, n, q, d, offset);
}

/* ---- activations -> bf16 for the BF16 matmul ----
 *
 * Round to nearest even on the bits, as ps_f32_to_bf16: u + 0x7fff + ((u >> 16) & 1), then the
 * high half; a NaN keeps its sign and payload top and is made quiet (| 0x40). Integer
 * arithmetic, so the SIMD forms give the same bits as the scalar one for every input,
 * subnormals included (vcvtneps2bf16 would flush those to zero). */

void ps_quant_act_bf16_ref(const float *x, int64_t n, uint16_t *out, float *out_f32) {
    for (int64_t i = 0; i < n; i++) {
        const uint16_t h = ps_f32_to_bf16(x[i]);
        if (out) out[i] = h;
        if (out_f32) out_f32[i] = ps_bf16_to_f32(h);
    }
}

#if defined(__x86_64__)
PS_TARGET_AVX2_INT
static void act_bf16_avx2(const float *x, int64_t n, uint16_t *out, float *out_f32) {
    const __m256i abs = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
    const __m256i bias = _mm256_set1_epi32(0x7fff), one = _mm256_set1_epi32(1);
    const __m256i quiet = _mm256_set1_epi32(0x400000), hi = _mm256_set1_epi32((int)0xffff0000u);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256i u = _mm256_loadu_si256((const __m256i *)(x + i));
        const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, abs), inf);
        const __m256i r = _mm256_add_epi32(
            u, _mm256_add_epi32(bias, _mm256_and_si256(_mm256_srli_epi32(u, 16), one)));
        /* high halves: rounded, or the NaN made quiet */
        const __m256i h =
            _mm256_and_si256(_mm256_blendv_epi8(r, _mm256_or_si256(u, quiet), nan), hi);
        if (out_f32) _mm256_storeu_si256((__m256i *)(out_f32 + i), h);
        if (out) {
            const __m256i p = _mm256_packus_epi32(_mm256_srli_epi32(h, 16), _mm256_setzero_si256());
            const __m256i o = _mm256_permute4x64_epi64(p, _MM_SHUFFLE(3, 1, 2, 0));
            _mm_storeu_si128((__m128i *)(out + i), _mm256_castsi256_si128(o));
        }
    }
    ps_quant_act_bf16_ref(x + i, n - i, out ? out + i : NULL, out_f32 ? out_f32 + i : NULL);
}

PS_TARGET_AVX512
static void act_bf16_avx512(const float *x, int64_t n, uint16_t *out, float *out_f32) {
    const __m512i abs = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
    const __m512i bias = _mm512_set1_epi32(0x7fff), one = _mm512_set1_epi32(1);
    const __m512i quiet = _mm512_set1_epi32(0x400000), hi = _mm512_set1_epi32((int)0xffff0000u);
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1u);
        const __m512i u = _mm512_maskz_loadu_epi32(m, x + i);
        const __mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(u, abs), inf);
        __m512i r = _mm512_add_epi32(
            u, _mm512_add_epi32(bias, _mm512_and_si512(_mm512_srli_epi32(u, 16), one)));
        r = _mm512_mask_or_epi32(r, nan, u, quiet);
        const __m512i h = _mm512_and_si512(r, hi);
        if (out_f32) _mm512_mask_storeu_epi32(out_f32 + i, m, h);
        if (out)
            _mm256_mask_storeu_epi16(out + i, m, _mm512_cvtepi32_epi16(_mm512_srli_epi32(h, 16)));
    }
}
#endif

void ps_quant_act_bf16(ps_isa isa, const float *x, int64_t n, uint16_t *out, float *out_f32) {
    if (isa == PS_ISA_AUTO) isa = ps_isa_best();
#if defined(__x86_64__)
    if (isa == PS_ISA_AVX512) {
        act_bf16_avx512(x, n, out, out_f32);
        return;
    }
    if (isa == PS_ISA_AVX2) {
        act_bf16_avx2(x, n, out, out_f32);
        return;
    }
#endif
    ps_quant_act_bf16_ref(x, n, out, out_f32);
}

/* ---- activations -> f16 for the F16 matmul ----
 *
 * vcvtps2ph rounds to nearest even like ps_f32_to_f16 for every finite input and infinity
 * (subnormal halves included); a NaN it turns into its own quiet form, so NaN lanes are set to
 * the scalar form's sign | quiet NaN after the widening. */

void ps_quant_act_f16_ref(const float *x, int64_t n, float *out) {
    for (int64_t i = 0; i < n; i++) out[i] = ps_f16_to_f32(ps_f32_to_f16(x[i]));
}

#if defined(__x86_64__)
PS_TARGET_AVX2
static void act_f16_avx2(const float *x, int64_t n, float *out) {
    const __m256 sign = _mm256_set1_ps(-0.0f), qnan = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fc00000));
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_loadu_ps(x + i);
        const __m256 r = _mm256_cvtph_ps(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
        const __m256 nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
        const __m256 q = _mm256_or_ps(_mm256_and_ps(v, sign), qnan);
        _mm256_storeu_ps(out + i, _mm256_blendv_ps(r, q, nan));
    }
    ps_quant_act_f16_ref(x + i, n - i, out + i);
}

PS_TARGET_AVX512
static void act_f16_avx512(const float *x, int64_t n, float *out) {
    const __m512i sign = _mm512_set1_epi32((int)0x80000000u), qnan = _mm512_set1_epi32(0x7fc00000);
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1u);
        const __m512 v = _mm512_maskz_loadu_ps(m, x + i);
        __m512 r = _mm512_cvtph_ps(_mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
        r = _mm512_mask_mov_ps(r, nan, _mm512_castsi512_ps(_mm512_or_si512(
                                          _mm512_and_si512(_mm512_castps_si512(v), sign), qnan)));
        _mm512_mask_storeu_ps(out + i, m, r);
    }
}
#endif

void ps_quant_act_f16(ps_isa isa, const float *x, int64_t n, float *out) {
    if (isa == PS_ISA_AUTO) isa = ps_isa_best();
#if defined(__x86_64__)
    if (isa == PS_ISA_AVX512) {
        act_f16_avx512(x, n, out);
        return;
    }
    if (isa == PS_ISA_AVX2) {
        act_f16_avx2(x, n, out);
        return;
    }
#endif
    ps_quant_act_f16_ref(x, n, out);
}

/* ---- activations -> Q8_K (k-quants, IQ4_XS) and Q8_1 (Q4_1, Q5_1) ---- */

static inline int nearest_int(float v) {
    const float t = v + 12582912.0f; /* 1.5 * 2^23: the integer lands in the low mantissa */
    int32_t i;
    memcpy(&i, &t, 4);
    return (i & 0x007fffff) - 0x00400000;
}

/* A block that cannot be quantised (NaN / inf), or is all zero. */
static void q8k_fill(int8_t *q, int16_t *bsums, float *d, float dv) {
    memset(q, 0, PS_QK_K);
    memset(bsums, 0, 16 * sizeof(int16_t));
    *d = dv;
}

void ps_qact_q8_K_ref(const float *x, int64_t n, int8_t *q, int16_t *bsums, float *d) {
    for (int64_t b = 0; b < n / PS_QK_K; b++) {
        const float *xb = x + b * PS_QK_K;
        int8_t *qb = q + b * PS_QK_K;
        float amax = 0.0f, max = 0.0f;
        bool bad = false;
        for (int j = 0; j < PS_QK_K; j++) {
            const float a = fabsf(xb[j]);
            if (!(a <= FLT_MAX)) bad = true;
            else if (a > amax) {
                amax = a;
                max = xb[j];
            }
        }
        if (bad || amax == 0.0f) {
            q8k_fill(qb, bsums + b * 16, d + b, bad ? NAN : 0.0f);
            continue;
        }
        const float iscale = -127.0f / max;
        for (int j = 0; j < PS_QK_K; j++) {
            const int v = nearest_int(iscale * xb[j]);
            qb[j] = (int8_t)(v < 127 ? v : 127);
        }
        for (int j = 0; j < 16; j++) {
            int sum = 0;
            for (int i = 0; i < 16; i++) sum += qb[16 * j + i];
            bsums[b * 16 + j] = (int16_t)sum;
        }
        d[b] = 1.0f / iscale;
    }
}

#if defined(__x86_64__)
PS_TARGET_AVX2_FMA
static void q8k_avx2(const float *x, int64_t n, int8_t *q, int16_t *bsums, float *d) {
    const __m256 sign = _mm256_set1_ps(-0.0f), big = _mm256_set1_ps(FLT_MAX);
    const __m256i c127 = _mm256_set1_epi32(127);
    for (int64_t b = 0; b < n / PS_QK_K; b++) {
        const float *xb = x + b * PS_QK_K;
        int8_t *qb = q + b * PS_QK_K;
        __m256 m = _mm256_setzero_ps();
        int bad = 0;
        for (int i = 0; i < 32; i++) {
            const __m256 a = _mm256_andnot_ps(sign, _mm256_loadu_ps(xb + 8 * i));
            bad |= _mm256_movemask_ps(_mm256_cmp_ps(a, big, _CMP_NLE_UQ));
            m = _mm256_max_ps(m, a);
        }
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        const float amax = _mm_cvtss_f32(m4);
        if (bad || amax == 0.0f) {
            q8k_fill(qb, bsums + b * 16, d + b, bad ? NAN : 0.0f);
            continue;
        }
        const __m256 am = _mm256_set1_ps(amax);
        int first = 0;
        for (int i = 0; i < 32; i++) {
            const __m256 a = _mm256_andnot_ps(sign, _mm256_loadu_ps(xb + 8 * i));
            const int hit = _mm256_movemask_ps(_mm256_cmp_ps(a, am, _CMP_EQ_OQ));
            if (hit) {
                first = 8 * i + __builtin_ctz((unsigned)hit);
                break;
            }
        }
        const float iscale = -127.0f / xb[first];
        if (!(fabsf(iscale) <= FLT_MAX)) { /* tiny max: the reference's overflowed path */
            ps_qact_q8_K_ref(xb, PS_QK_K, qb, bsums + b * 16, d + b);
            continue;
        }
        const __m256 is = _mm256_set1_ps(iscale);
        for (int j = 0; j < 16; j++) {
            const __m256i v0 = _mm256_min_epi32(
                _mm256_cvtps_epi32(_mm256_mul_ps(is, _mm256_loadu_ps(xb + 16 * j))), c127);
            const __m256i v1 = _mm256_min_epi32(
                _mm256_cvtps_epi32(_mm256_mul_ps(is, _mm256_loadu_ps(xb + 16 * j + 8))), c127);
            const __m256i s = _mm256_add_epi32(v0, v1);
            __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
            s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, _MM_SHUFFLE(1, 0, 3, 2)));
            s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, _MM_SHUFFLE(2, 3, 0, 1)));
            bsums[b * 16 + j] = (int16_t)_mm_cvtsi128_si32(s4);
            /* 16 int32 -> 16 int8 in order (packs work per 128-bit lane) */
            const __m256i p16 = _mm256_packs_epi32(v0, v1); /* 0-3 8-11 | 4-7 12-15 */
            const __m128i p = _mm_packs_epi16(_mm256_castsi256_si128(p16),
                                              _mm256_extracti128_si256(p16, 1));
            /* p: 0-3 8-11 4-7 12-15 as dwords -> reorder */
            _mm_storeu_si128((__m128i *)(qb + 16 * j),
                             _mm_shuffle_epi32(p, _MM_SHUFFLE(3, 1, 2, 0)));
        }
        d[b] = 1.0f / iscale;
    }
}

PS_TARGET_AVX512
static void q8k_avx512(const float *x, int64_t n, int8_t *q, int16_t *bsums, float *d) {
    const __m512 big = _mm512_set1_ps(FLT_MAX);
    const __m512i c127 = _mm512_set1_epi32(127);
    for (int64_t b = 0; b < n / PS_QK_K; b++) {
        const float *xb = x + b * PS_QK_K;
        int8_t *qb = q + b * PS_QK_K;
        /* the block two ahead (2 KiB): the rows come from memory in a matmul call (its
         * activations, megabytes), and without it the first load of each block stalled
         * (docs/kernels.md, "Measured choices of the integer kernels") */
        if (b + 2 < n / PS_QK_K)
            for (int i = 0; i < 16; i++)
                _mm_prefetch((const char *)(xb + 2 * PS_QK_K + 16 * i), _MM_HINT_T0);
        __m512 m = _mm512_setzero_ps();
        __mmask16 bad = 0;
        for (int i = 0; i < 16; i++) {
            const __m512 a = _mm512_abs_ps(_mm512_loadu_ps(xb + 16 * i));
            bad |= _mm512_cmp_ps_mask(a, big, _CMP_NLE_UQ);
            m = _mm512_max_ps(m, a);
        }
        const float amax = _mm512_reduce_max_ps(m); /* order-free */
        if (bad || amax == 0.0f) {
            q8k_fill(qb, bsums + b * 16, d + b, bad ? NAN : 0.0f);
            continue;
        }
        const __m512 am = _mm512_set1_ps(amax);
        int first = 0;
        for (int i = 0; i < 16; i++) {
            const __mmask16 hit =
                _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_loadu_ps(xb + 16 * i)), am, _CMP_EQ_OQ);
            if (hit) {
                first = 16 * i + __builtin_ctz((unsigned)hit);
                break;
            }
        }
        const float iscale = -127.0f / xb[first];
        if (!(fabsf(iscale) <= FLT_MAX)) {
            ps_qact_q8_K_ref(xb, PS_QK_K, qb, bsums + b * 16, d + b);
            continue;
        }
        const __m512 is = _mm512_set1_ps(iscale);
        for (int j = 0; j < 16; j++) {
            const __m512i v = _mm512_min_epi32(
                _mm512_cvtps_epi32(_mm512_mul_ps(is, _mm512_loadu_ps(xb + 16 * j))), c127);
            _mm_storeu_si128((__m128i *)(qb + 16 * j), _mm512_cvtsepi32_epi8(v));
        }
        /* sums of 16: q + 128 as u8, vpsadbw sums each 8 bytes (exact), minus 16 x 128 */
        for (int c = 0; c < 4; c++) {
            const __m512i u = _mm512_xor_si512(_mm512_loadu_si512((const void *)(qb + 64 * c)),
                                               _mm512_set1_epi8((char)0x80));
            uint64_t s8[8];
            _mm512_storeu_si512((void *)s8, _mm512_sad_epu8(u, _mm512_setzero_si512()));
            for (int g = 0; g < 4; g++)
                bsums[b * 16 + 4 * c + g] = (int16_t)((int)(s8[2 * g] + s8[2 * g + 1]) - 16 * 128);
        }
        d[b] = 1.0f / iscale;
    }
}
#endif

void ps_qact_q8_K(ps_isa isa, const float *x, int64_t n, int8_t *q, int16_t *bsums, float *d) {
    if (isa == PS_ISA_AUTO) isa = ps_isa_best();
#if defined(__x86_64__)
    if (isa == PS_ISA_AVX512) {
        q8k_avx512(x, n, q, bsums, d);
        return;
    }
    if (isa == PS_ISA_AVX2) {
        q8k_avx2(x, n, q, bsums, d);
        return;
    }
#endif
    ps_qact_q8_K_ref(x, n, q, bsums, d);
}

/* s from q, d (already written) and x: the same scalar code for every variant. */
static void q8_1_sums(const float *x, int64_t n, const int8_t *q, const float *d, float *s) {
    for (int64_t b = 0; b < n / 32; b++) {
        if (isnan(d[b])) {
            s[b] = NAN;
            continue;
        }
        float amax = 0.0f; /* finite here (a non-finite block has d = NaN) */
        int sum = 0;
        for (int j = 0; j < 32; j++) {
            const float a = fabsf(x[b * 32 + j]);
            amax = a > amax ? a : amax;
            sum += q[b * 32 + j];
        }
        s[b] = ps_f16_to_f32(ps_f32_to_f16((float)sum * (amax / 127.0f)));
    }
}

void ps_qact_q8_1_ref(const float *x, int64_t n, int8_t *q, float *d, float *s) {
    ps_quant_act_q8_ref(x, n, (uint8_t *)q, d, false);
    q8_1_sums(x, n, q, d, s);
}

/* The same s with the block's |x| maximum (order-free) and its exact sum of q by vector
 * reductions; sum x (amax / 127) and its f16 rounding stay the scalar code's. */
#if defined(__x86_64__)
static inline float q8_1_s(int sum, float amax) {
    return ps_f16_to_f32(ps_f32_to_f16((float)sum * (amax / 127.0f)));
}

PS_TARGET_AVX2_FMA
static void q8_1_sums_avx2(const float *x, int64_t n, const int8_t *q, const float *d, float *s) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
    for (int64_t b = 0; b < n / 32; b++) {
        if (isnan(d[b])) {
            s[b] = NAN;
            continue;
        }
        const float *xb = x + b * 32;
        const __m256 m = _mm256_max_ps(
            _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(xb)),
                          _mm256_andnot_ps(sign, _mm256_loadu_ps(xb + 8))),
            _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(xb + 16)),
                          _mm256_andnot_ps(sign, _mm256_loadu_ps(xb + 24))));
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        /* sum of q: 1 x q pairs (maddubs, exact int16), then int32 */
        const __m256i p = _mm256_madd_epi16(
            _mm256_maddubs_epi16(ones8, _mm256_loadu_si256((const __m256i *)(q + b * 32))), ones16);
        __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(p), _mm256_extracti128_si256(p, 1));
        s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, _MM_SHUFFLE(1, 0, 3, 2)));
        s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, _MM_SHUFFLE(2, 3, 0, 1)));
        s[b] = q8_1_s(_mm_cvtsi128_si32(s4), _mm_cvtss_f32(m4));
    }
}

PS_TARGET_AVX512
static void q8_1_sums_avx512(const float *x, int64_t n, const int8_t *q, const float *d,
                             float *s) {
    for (int64_t b = 0; b < n / 32; b++) {
        if (isnan(d[b])) {
            s[b] = NAN;
            continue;
        }
        const float *xb = x + b * 32;
        const float amax = _mm512_reduce_max_ps(
            _mm512_max_ps(_mm512_abs_ps(_mm512_loadu_ps(xb)), _mm512_abs_ps(_mm512_loadu_ps(xb + 16))));
        /* q + 128 as u8, vpsadbw sums each 8 (exact), minus 32 x 128 */
        const __m256i u = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(q + b * 32)),
                                           _mm256_set1_epi8((char)0x80));
        const __m256i sad = _mm256_sad_epu8(u, _mm256_setzero_si256());
        const __m128i h = _mm_add_epi64(_mm256_castsi256_si128(sad), _mm256_extracti128_si256(sad, 1));
        const int sum = (int)(_mm_cvtsi128_si64(h) + _mm_extract_epi64(h, 1)) - 32 * 128;
        s[b] = q8_1_s(sum, amax);
    }
}
#endif

void ps_qact_q8_1(ps_isa isa, const float *x, int64_t n, int8_t *q, float *d, float *s) {
    if (isa == PS_ISA_AUTO) isa = ps_isa_best();
    ps_quant_act_q8(isa, x, n, (uint8_t *)q, d, false);
#if defined(__x86_64__)
    if (isa == PS_ISA_AVX512) {
        q8_1_sums_avx512(x, n, q, d, s);
        return;
    }
    if (isa == PS_ISA_AVX2) {
        q8_1_sums_avx2(x, n, q, d, s);
        return;
    }
#endif
    q8_1_sums(x, n, q, d, s);
}
