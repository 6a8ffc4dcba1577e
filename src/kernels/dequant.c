/*
 * dequant.c — one row of each weight type -> float32, as ggml's dequantize_row_* computes it.
 *
 * Each function walks the blocks of its type (layouts in qblocks.h) and performs the float
 * operations ggml performs, in the same order, with the same operand types: an f16 scale is
 * widened exactly (ps_f16_to_f32), an integer code is converted to float exactly, and then
 * e.g. Q4_1 is `q * d + m`, Q4_K `(d * sc) * q - dmin * m`, Q6_K `(d * sc) * q` — one
 * rounding per operation (the build is ISO C11: no contraction into fused multiply-adds).
 * So every non-NaN block gives ggml's bits; a NaN scale gives NaNs (ggml's payload may differ).
 * F16, BF16, Q8_0 and the legacy, Q2_K, Q3_K, IQ4_NL, IQ4_XS and MXFP4 blocks also have AVX2
 * and AVX-512 forms, and Q4_K, Q5_K, Q6_K AVX-512 forms: integer decoding, exact conversion,
 * the same float operations in the same order, so the same bits (tests/test_types.c compares
 * every form with the numpy decoder).
 */
#include "kernels/dequant.h"
#include "base/simd.h"
#include "base/impl.h"
#include "kernels/qblocks.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }

void ps_dequant_f32(const void *row, float *out, int64_t n) { memcpy(out, row, (size_t)n * 4); }

void ps_dequant_f16(const void *row, float *out, int64_t n) {
    const uint8_t *p = row;
    for (int64_t i = 0; i < n; i++) out[i] = ps_f16_to_f32(rd16(p + 2 * i));
}

void ps_dequant_bf16(const void *row, float *out, int64_t n) {
    const uint8_t *p = row;
    for (int64_t i = 0; i < n; i++) out[i] = ps_bf16_to_f32(rd16(p + 2 * i));
}

/* ---- legacy blocks of 32: element j in the low nibble of qs[j], j + 16 in the high ---- */

void ps_dequant_q4_0(const void *row, float *out, int64_t n) {
    const ps_block_q4_0 *x = row;
    for (int64_t i = 0; i < n / PS_Q4_0_BLOCK; i++, out += PS_Q4_0_BLOCK) {
        const float d = ps_f16_to_f32(x[i].d);
        for (int j = 0; j < PS_Q4_0_BLOCK / 2; j++) {
            out[j] = (float)((x[i].qs[j] & 0x0f) - 8) * d;
            out[j + 16] = (float)((x[i].qs[j] >> 4) - 8) * d;
        }
    }
}

void ps_dequant_q4_1(const void *row, float *out, int64_t n) {
    const ps_block_q4_1 *x = row;
    for (int64_t i = 0; i < n / PS_Q4_1_BLOCK; i++, out += PS_Q4_1_BLOCK) {
        const float d = ps_f16_to_f32(x[i].d), m = ps_f16_to_f32(x[i].m);
        for (int j = 0; j < PS_Q4_1_BLOCK / 2; j++) {
            out[j] = (float)(x[i].qs[j] & 0x0f) * d + m;
            out[j + 16] = (float)(x[i].qs[j] >> 4) * d + m;
        }
    }
}

static uint32_t rd32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

void ps_dequant_q5_0(const void *row, float *out, int64_t n) {
    const ps_block_q5_0 *x = row;
    for (int64_t i = 0; i < n / PS_Q5_0_BLOCK; i++, out += PS_Q5_0_BLOCK) {
        const float d = ps_f16_to_f32(x[i].d);
        const uint32_t qh = rd32(x[i].qh);
        for (int j = 0; j < PS_Q5_0_BLOCK / 2; j++) {
            const int h0 = (int)((qh >> j) & 1) << 4, h1 = (int)((qh >> (j + 16)) & 1) << 4;
            out[j] = (float)(((x[i].qs[j] & 0x0f) | h0) - 16) * d;
            out[j + 16] = (float)(((x[i].qs[j] >> 4) | h1) - 16) * d;
        }
    }
}

void ps_dequant_q5_1(const void *row, float *out, int64_t n) {
    const ps_block_q5_1 *x = row;
    for (int64_t i = 0; i < n / PS_Q5_1_BLOCK; i++, out += PS_Q5_1_BLOCK) {
        const float d = ps_f16_to_f32(x[i].d), m = ps_f16_to_f32(x[i].m);
        const uint32_t qh = rd32(x[i].qh);
        for (int j = 0; j < PS_Q5_1_BLOCK / 2; j++) {
            const int h0 = (int)((qh >> j) & 1) << 4, h1 = (int)((qh >> (j + 16)) & 1) << 4;
            out[j] = (float)((x[i].qs[j] & 0x0f) | h0) * d + m;
            out[j + 16] = (float)((x[i].qs[j] >> 4) | h1) * d + m;
        }
    }
}

void ps_dequant_q8_0(const void *row, float *out, int64_t n) {
    const ps_block_q8_0 *x = row;
    for (int64_t i = 0; i < n / PS_Q8_0_BLOCK; i++, out += PS_Q8_0_BLOCK) {
        const float d = ps_f16_to_f32(x[i].d);
        for (int j = 0; j < PS_Q8_0_BLOCK; j++) out[j] = (float)x[i].qs[j] * d;
    }
}

void ps_dequant_iq4_nl(const void *row, float *out, int64_t n) {
    const ps_block_iq4_nl *x = row;
    for (int64_t i = 0; i < n / PS_IQ4_NL_BLOCK; i++, out += PS_IQ4_NL_BLOCK) {
        const float d = ps_f16_to_f32(x[i].d);
        for (int j = 0; j < PS_IQ4_NL_BLOCK / 2; j++) {
            out[j] = d * (float)ps_kvalues_iq4nl[x[i].qs[j] & 0x0f];
            out[j + 16] = d * (float)ps_kvalues_iq4nl[x[i].qs[j] >> 4];
        }
    }
}

float ps_e8m0_half_to_f32(uint8_t e) {
    /* 2^(e - 128): subnormal for e < 2 (0x00200000 = 2^-128, 0x00400000 = 2^-127) */
    const uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

void ps_dequant_mxfp4(const void *row, float *out, int64_t n) {
    const ps_block_mxfp4 *x = row;
    for (int64_t i = 0; i < n / PS_MXFP4_BLOCK; i++, out += PS_MXFP4_BLOCK) {
        const float d = ps_e8m0_half_to_f32(x[i].e);
        for (int j = 0; j < PS_MXFP4_BLOCK / 2; j++) {
            out[j] = (float)ps_kvalues_mxfp4[x[i].qs[j] & 0x0f] * d;
            out[j + 16] = (float)ps_kvalues_mxfp4[x[i].qs[j] >> 4] * d;
        }
    }
}

/* ---- k-quants: super-blocks of 256 ---- */

/* Q2_K: sub-block s (16 weights, s = e / 16) has scales[s] = scale (low nibble) | min << 4.
 * Weight e sits in qs[(e / 128) * 32 + (e % 32)] at bit shift 2 * ((e % 128) / 32). */
void ps_dequant_q2_k(const void *row, float *out, int64_t n) {
    const ps_block_q2_k *x = row;
    for (int64_t i = 0; i < n / PS_QK_K; i++) {
        const float d = ps_f16_to_f32(x[i].d), dmin = ps_f16_to_f32(x[i].dmin);
        const uint8_t *q = x[i].qs;
        int is = 0;
        for (int h = 0; h < PS_QK_K; h += 128, q += 32)
            for (int shift = 0; shift < 8; shift += 2)
                for (int half = 0; half < 2; half++) {
                    const uint8_t sc = x[i].scales[is++];
                    const float dl = d * (float)(sc & 0x0f), ml = dmin * (float)(sc >> 4);
                    for (int l = 0; l < 16; l++)
                        *out++ = dl * (float)((q[l + 16 * half] >> shift) & 3) - ml;
                }
    }
}

/* Q3_K: 16 six-bit scales: low 4 bits in the nibbles of scales[0..7] (s < 8: low nibble of
 * byte s, else high nibble of byte s - 8), high 2 bits in scales[8 + s % 4] at shift
 * 2 * (s / 4); value - 32. The low two bits of weight e as Q2_K; its high bit in
 * hmask[e % 32] bit (e / 32); a clear high bit subtracts 4. */
static void q3_k_scales(const uint8_t *s, int8_t out[16]) {
    for (int k = 0; k < 16; k++) {
        const int lo = k < 8 ? s[k] & 0x0f : s[k - 8] >> 4;
        const int hi = (s[8 + k % 4] >> (2 * (k / 4))) & 3;
        out[k] = (int8_t)((lo | hi << 4) - 32);
    }
}

void ps_dequant_q3_k(const void *row, float *out, int64_t n) {
    const ps_block_q3_k *x = row;
    for (int64_t i = 0; i < n / PS_QK_K; i++) {
        const float d = ps_f16_to_f32(x[i].d);
        int8_t sc[16];
        q3_k_scales(x[i].scales, sc);
        const uint8_t *q = x[i].qs, *hm = x[i].hmask;
        uint8_t m = 1;
        int is = 0;
        for (int h = 0; h < PS_QK_K; h += 128, q += 32)
            for (int shift = 0; shift < 8; shift += 2, m = (uint8_t)(m << 1))
                for (int half = 0; half < 2; half++) {
                    const float dl = d * (float)sc[is++];
                    for (int l = 0; l < 16; l++) {
                        const int k = l + 16 * half;
                        *out++ = dl * (float)(((q[k] >> shift) & 3) - ((hm[k] & m) ? 0 : 4));
                    }
                }
    }
}

/* Q4_K / Q5_K six-bit scale and min of sub-block j (0..7), packed in 12 bytes. */
static void scale_min_k4(int j, const uint8_t *q, uint8_t *sc, uint8_t *m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (uint8_t)((q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

/* Q4_K: weight e in qs[(e / 64) * 32 + e % 32], low nibble when (e % 64) < 32. */
void ps_dequant_q4_k(const void *row, float *out, int64_t n) {
    const ps_block_q4_k *x = row;
    for (int64_t i = 0; i < n / PS_QK_K; i++) {
        const float d = ps_f16_to_f32(x[i].d), dmin = ps_f16_to_f32(x[i].dmin);
        const uint8_t *q = x[i].qs;
        for (int is = 0; is < 8; is += 2, q += 32) {
            uint8_t sc, m;
            scale_min_k4(is, x[i].scales, &sc, &m);
            const float d1 = d * (float)sc, m1 = dmin * (float)m;
            scale_min_k4(is + 1, x[i].scales, &sc, &m);
            const float d2 = d * (float)sc, m2 = dmin * (float)m;
            for (int l = 0; l < 32; l++) *out++ = d1 * (float)(q[l] & 0x0f) - m1;
            for (int l = 0; l < 32; l++) *out++ = d2 * (float)(q[l] >> 4) - m2;
        }
    }
}

/* Q5_K: as Q4_K, fifth bit of weight e in qh[e % 32] bit (e / 32). */
void ps_dequant_q5_k(const void *row, float *out, int64_t n) {
    const ps_block_q5_k *x = row;
    for (int64_t i = 0; i < n / PS_QK_K; i++) {
        const float d = ps_f16_to_f32(x[i].d), dmin = ps_f16_to_f32(x[i].dmin);
        const uint8_t *ql = x[i].qs, *qh = x[i].qh;
        unsigned u1 = 1, u2 = 2;
        for (int is = 0; is < 8; is += 2, ql += 32, u1 <<= 2, u2 <<= 2) {
            uint8_t sc, m;
            scale_min_k4(is, x[i].scales, &sc, &m);
            const float d1 = d * (float)sc, m1 = dmin * (float)m;
            scale_min_k4(is + 1, x[i].scales, &sc, &m);
            const float d2 = d * (float)sc, m2 = dmin * (float)m;
            for (int l = 0; l < 32; l++)
                *out++ = d1 * (float)((ql[l] & 0x0f) + (qh[l] & u1 ? 16 : 0)) - m1;
            for (int l = 0; l < 32; l++)
                *out++ = d2 * (float)((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
        }
    }
}

/* Q6_K: per 128 weights (64 ql bytes, 32 qh bytes, 8 scales), weight l + 32 g (g = 0..3) has
 * its low nibble in ql[l + 32 (g & 1)] (high nibble when g >= 2), its top two bits in qh[l]
 * at shift 2 g, and scale sc[l / 16 + 2 g]; value - 32. */
void ps_dequant_q6_k(const void *row, float *out, int64_t n) {
    const ps_block_q6_k *x = row;
    for (int64_t i = 0; i < n / PS_QK_K; i++) {
        const float d = ps_f16_to_f32(x[i].d);
        const uint8_t *ql = x[i].ql, *qh = x[i].qh;
        const int8_t *sc = x[i].scales;
        for (int h = 0; h < PS_QK_K; h += 128, out += 128, ql += 64, qh += 32, sc += 8)
            for (int l = 0; l < 32; l++) {
                const int is = l / 16;
                const int q1 = ((ql[l] & 0x0f) | ((qh[l] >> 0) & 3) << 4) - 32;
                const int q2 = ((ql[l + 32] & 0x0f) | ((qh[l] >> 2) & 3) << 4) - 32;
                const int q3 = ((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32;
                const int q4 = ((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4) - 32;
                out[l] = d * (float)sc[is] * (float)q1;
                out[l + 32] = d * (float)sc[is + 2] * (float)q2;
                out[l + 64] = d * (float)sc[is + 4] * (float)q3;
                out[l + 96] = d * (float)sc[is + 6] * (float)q4;
            }
    }
}

/* IQ4_XS: sub-block ib (32 weights) has the 6-bit scale (scales_l[ib / 2] nibble ib % 2) |
 * (scales_h bits 2 ib, 2 ib + 1) << 4, value - 32; weights as IQ4_NL within it. */
void ps_dequant_iq4_xs(const void *row, float *out, int64_t n) {
    const ps_block_iq4_xs *x = row;
    for (int64_t i = 0; i < n / PS_QK_K; i++) {
        const float d = ps_f16_to_f32(x[i].d);
        const uint8_t *qs = x[i].qs;
        for (int ib = 0; ib < PS_QK_K / 32; ib++, out += 32, qs += 16) {
            const int ls = ((x[i].scales_l[ib / 2] >> 4 * (ib % 2)) & 0x0f) |
                           (((x[i].scales_h >> 2 * ib) & 3) << 4);
            const float dl = d * (float)(ls - 32);
            for (int j = 0; j < 16; j++) {
                out[j] = dl * (float)ps_kvalues_iq4nl[qs[j] & 0x0f];
                out[j + 16] = dl * (float)ps_kvalues_iq4nl[qs[j] >> 4];
            }
        }
    }
}

/* ---- SIMD widening (x86-64): F16 and BF16 are exact conversions, Q8_0 one multiply ---- */
#if defined(__x86_64__)

PS_TARGET_AVX2 void ps_dequant_f16_avx2(const void *row, float *out,
                                                                  int64_t n) {
    const uint8_t *p = row;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + 2 * i))));
    ps_dequant_f16(p + 2 * i, out + i, n - i);
}

PS_TARGET_AVX2 void ps_dequant_bf16_avx2(const void *row, float *out,
                                                                   int64_t n) {
    const uint8_t *p = row;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(p + 2 * i)));
        _mm256_storeu_ps(out + i, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
    }
    ps_dequant_bf16(p + 2 * i, out + i, n - i);
}

PS_TARGET_AVX2 void ps_dequant_q8_0_avx2(const void *row, float *out,
                                                                   int64_t n) {
    const uint8_t *p = row;
    for (int64_t b = 0; b < n / PS_Q8_0_BLOCK; b++) {
        const uint8_t *blk = p + (size_t)b * sizeof(ps_block_q8_0);
        const __m256 d = _mm256_set1_ps(ps_f16_to_f32(rd16(blk)));
        for (int j = 0; j < PS_Q8_0_BLOCK; j += 8) {
            __m256i q = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(blk + 2 + j)));
            _mm256_storeu_ps(out + b * PS_Q8_0_BLOCK + j, _mm256_mul_ps(_mm256_cvtepi32_ps(q), d));
        }
    }
}


PS_TARGET_AVX512 void ps_dequant_f16_avx512(const void *row, float *out, int64_t n) {
    const uint8_t *p = row;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(out + i,
                         _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p + 2 * i))));
    ps_dequant_f16(p + 2 * i, out + i, n - i);
}

PS_TARGET_AVX512 void ps_dequant_bf16_avx512(const void *row, float *out, int64_t n) {
    const uint8_t *p = row;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(p + 2 * i)));
        _mm512_storeu_ps(out + i, _mm512_castsi512_ps(_mm512_slli_epi32(w, 16)));
    }
    ps_dequant_bf16(p + 2 * i, out + i, n - i);
}

PS_TARGET_AVX512 void ps_dequant_q8_0_avx512(const void *row, float *out, int64_t n) {
    const uint8_t *p = row;
    for (int64_t b = 0; b < n / PS_Q8_0_BLOCK; b++) {
        const uint8_t *blk = p + (size_t)b * sizeof(ps_block_q8_0);
        const __m512 d = _mm512_set1_ps(ps_f16_to_f32(rd16(blk)));
        for (int j = 0; j < PS_Q8_0_BLOCK; j += 16) {
            __m512i q = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(blk + 2 + j)));
            _mm512_storeu_ps(out + b * PS_Q8_0_BLOCK + j, _mm512_mul_ps(_mm512_cvtepi32_ps(q), d));
        }
    }
}

/* k-quants, 16 weights per vector: the integer codes widened to int32 then float (exact), then
 * the same float operations as the scalar forms (mul, then sub; no fused multiply-add) with
 * the per-sub-block factors computed as scalars in the same order. */

PS_TARGET_AVX512 void ps_dequant_q4_k_avx512(const void *row, float *out, int64_t n) {
    const ps_block_q4_k *x = row;
    const __m512i lo4 = _mm512_set1_epi32(15);
    for (int64_t i = 0; i < n / PS_QK_K; i++) {
        const float d = ps_f16_to_f32(x[i].d), dmin = ps_f16_to_f32(x[i].dmin);
        const uint8_t *q = x[i].qs;
        for (int is = 0; is < 8; is += 2, q += 32, out += 64) {
            uint8_t sc, m;
            scale_min_k4(is, x[i].scales, &sc, &m);
            const __m512 d1 = _mm512_set1_ps(d * (float)sc), m1 = _mm512_set1_ps(dmin * (float)m);
            scale_min_k4(is + 1, x[i].scales, &sc, &m);
            const __m512 d2 = _mm512_set1_ps(d * (float)sc), m2 = _mm512_set1_ps(dmin * (float)m);
            for (int h = 0; h < 32; h += 16) {
                const __m512i b = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(q + h)));
                const __m512 a = _mm512_cvtepi32_ps(_mm512_and_si512(b, lo4));
                const __m512 c = _mm512_cvtepi32_ps(_mm512_srli_epi32(b, 4));
                _mm512_storeu_ps(out + h, _mm512_sub_ps(_mm512_mul_ps(d1, a), m1));
                _mm512_storeu_ps(out + 32 + h, _mm512_sub_ps(_mm512_mul_ps(d2, c), m2));
            }
        }
    }
}

PS_TARGET_AVX512 void ps_dequant_q5_k_avx512(const void *row, float *out, int64_t n) {
    const ps_block_q5_k *x = row;
    const __m512i lo4 = _mm512_set1_epi32(15), one = _mm512_set1_epi32(1);
    for (int64_t i = 0; i < n / PS_QK_K; i++) {
        const float d = ps_f16_to_f32(x[i].d), dmin = ps_f16_to_f32(x[i].dmin);
        const uint8_t *ql = x[i].qs;
        const __m512i qh0 = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)x[i].qh)),
                      qh1 = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(x[i].qh + 16)));
        for (int is = 0; is < 8; is += 2, ql += 32, out += 64) {
            uint8_t sc, m;
            scale_min_k4(is, x[i].scales, &sc, &m);
            const __m512 d1 = _mm512_set1_ps(d * (float)sc), m1 = _mm512_set1_ps(dmin * (float)m);
            scale_min_k4(is + 1, x[i].scales, &sc, &m);
            const __m512 d2 = _mm512_set1_ps(d * (float)sc), m2 = _mm512_set1_ps(dmin * (float)m);
            const __m128i s1 = _mm_cvtsi32_si128(is), s2 = _mm_cvtsi32_si128(is + 1);
            for (int h = 0; h < 32; h += 16) {
                const __m512i qh = h ? qh1 : qh0;
                const __m512i b = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(ql + h)));
                const __m512i a = _mm512_add_epi32(
                    _mm512_and_si512(b, lo4),
                    _mm512_slli_epi32(_mm512_and_si512(_mm512_srl_epi32(qh, s1), one), 4));
                const __m512i c = _mm512_add_epi32(
                    _mm512_srli_epi32(b, 4),
                    _mm512_slli_epi32(_mm512_and_si512(_mm512_srl_epi32(qh, s2), one), 4));
                _mm512_storeu_ps(out + h,
                                 _mm512_sub_ps(_mm512_mul_ps(d1, _mm512_cvtepi32_ps(a)), m1));
                _mm512_storeu_ps(out + 32 + h,
                                 _mm512_sub_ps(_mm512_mul_ps(d2, _mm512_cvtepi32_ps(c)), m2));
            }
        }
    }
}

PS_TARGET_AVX512 void ps_dequant_q6_k_avx512(const void *row, float *out, int64_t n) {
    const ps_block_q6_k *x = row;
    const __m512i lo4 = _mm512_set1_epi32(15), three = _mm512_set1_epi32(3),
                  k32 = _mm512_set1_epi32(32);
    for (int64_t i = 0; i < n / PS_QK_K; i++) {
        const float d = ps_f16_to_f32(x[i].d);
        const uint8_t *ql = x[i].ql, *qh = x[i].qh;
        const int8_t *sc = x[i].scales;
        for (int hh = 0; hh < PS_QK_K; hh += 128, out += 128, ql += 64, qh += 32, sc += 8)
            for (int l = 0; l < 32; l += 16) {
                const int is = l / 16;
                const __m512i a = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(ql + l)));
                const __m512i b =
                    _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(ql + l + 32)));
                const __m512i h = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(qh + l)));
                const __m512i q1 = _mm512_sub_epi32(
                    _mm512_or_si512(_mm512_and_si512(a, lo4),
                                    _mm512_slli_epi32(_mm512_and_si512(h, three), 4)), k32);
                const __m512i q2 = _mm512_sub_epi32(
                    _mm512_or_si512(_mm512_and_si512(b, lo4),
                                    _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(h, 2), three), 4)),
                    k32);
                const __m512i q3 = _mm512_sub_epi32(
                    _mm512_or_si512(_mm512_srli_epi32(a, 4),
                                    _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(h, 4), three), 4)),
                    k32);
                const __m512i q4 = _mm512_sub_epi32(
                    _mm512_or_si512(_mm512_srli_epi32(b, 4),
                                    _mm512_slli_epi32(_mm512_srli_epi32(h, 6), 4)), k32);
                _mm512_storeu_ps(out + l, _mm512_mul_ps(_mm512_set1_ps(d * (float)sc[is]),
                                                        _mm512_cvtepi32_ps(q1)));
                _mm512_storeu_ps(out + l + 32, _mm512_mul_ps(_mm512_set1_ps(d * (float)sc[is + 2]),
                                                             _mm512_cvtepi32_ps(q2)));
                _mm512_storeu_ps(out + l + 64, _mm512_mul_ps(_mm512_set1_ps(d * (float)sc[is + 4]),
                                                             _mm512_cvtepi32_ps(q3)));
                _mm512_storeu_ps(out + l + 96, _mm512_mul_ps(_mm512_set1_ps(d * (float)sc[is + 6]),
                                                             _mm512_cvtepi32_ps(q4)));
            }
    }
}

/* ---- the other block types: integer codes decoded in registers, widened exactly, then the
 * scalar form's float operations in its order (the per-block and per-sub-block factors as the
 * same scalar products); table types look the float value of each code up with one permute
 * (the table's values are small integers: exact as floats). 16 weights per vector. ---- */

/* 16 nibbles of q (low or high), as int32 */
PS_TARGET_AVX512 static inline __m512i nib_lo16(const uint8_t *q) {
    return _mm512_and_si512(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)q)),
                            _mm512_set1_epi32(15));
}
PS_TARGET_AVX512 static inline __m512i nib_hi16(const uint8_t *q) {
    return _mm512_srli_epi32(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)q)), 4);
}
/* bit (j + base) of qh at bit 4 of lane j */
PS_TARGET_AVX512 static inline __m512i qbit16(uint32_t qh, int base) {
    const __m512i sh = _mm512_add_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11,
                                                          12, 13, 14, 15),
                                        _mm512_set1_epi32(base));
    return _mm512_slli_epi32(
        _mm512_and_si512(_mm512_srlv_epi32(_mm512_set1_epi32((int)qh), sh), _mm512_set1_epi32(1)),
        4);
}
PS_TARGET_AVX512 static inline __m512 cvt16(__m512i v) { return _mm512_cvtepi32_ps(v); }

PS_TARGET_AVX512 void ps_dequant_q4_0_avx512(const void *row, float *out, int64_t n) {
    const ps_block_q4_0 *x = row;
    const __m512i k8 = _mm512_set1_epi32(8);
    for (int64_t i = 0; i < n / PS_Q4_0_BLOCK; i++, out += PS_Q4_0_BLOCK) {
        const __m512 d = _mm512_set1_ps(ps_f16_to_f32(x[i].d));
        _mm512_storeu_ps(out, _mm512_mul_ps(cvt16(_mm512_sub_epi32(nib_lo16(x[i].qs), k8)), d));
        _mm512_storeu_ps(out + 16,
                         _mm512_mul_ps(cvt16(_mm512_sub_epi32(nib_hi16(x[i].qs), k8)), d));
    }
}

PS_TARGET_AVX512 void ps_dequant_q4_1_avx512(const void *row, float *out, int64_t n) {
    const ps_block_q4_1 *x = row;
    for (int64_t i = 0; i < n / PS_Q4_1_BLOCK; i++, out += PS_Q4_1_BLOCK) {
        const __m512 d = _mm512_set1_ps(ps_f16_to_f32(x[i].d));
        const __m512 m = _mm512_set1_ps(ps_f16_to_f32(x[i].m));
        _mm512_storeu_ps(out, _mm512_add_ps(_mm512_mul_ps(cvt16(nib_lo16(x[i].qs)), d), m));
        _mm512_storeu_ps(out + 16, _mm512_add_ps(_mm512_mul_ps(cvt16(nib_hi16(x[i].qs)), d), m));
    }
}

PS_TARGET_AVX512 void ps_dequant_q5_0_avx512(const void *row, float *out, int64_t n) {
    const ps_block_q5_0 *x = row;
    const __m512i k16 = _mm512_set1_epi32(16);
    for (int64_t i = 0; i < n / PS_Q5_0_BLOCK; i++, out += PS_Q5_0_BLOCK) {
        const __m512 d = _mm512_set1_ps(ps_f16_to_f32(x[i].d));
        const uint32_t qh = rd32(x[i].qh);
        const __m512i a = _mm512_or_si512(nib_lo16(x[i].qs), qbit16(qh, 0));
        const __m512i b = _mm512_or_si512(nib_hi16(x[i].qs), qbit16(qh, 16));
        _mm512_storeu_ps(out, _mm512_mul_ps(cvt16(_mm512_sub_epi32(a, k16)), d));
        _mm512_storeu_ps(out + 16, _mm512_mul_ps(cvt16(_mm512_sub_epi32(b, k16)), d));
    }
}

PS_TARGET_AVX512 void ps_dequant_q5_1_avx512(const void *row, float *out, int64_t n) {
    const ps_block_q5_1 *x = row;
    for (int64_t i = 0; i < n / PS_Q5_1_BLOCK; i++, out += PS_Q5_1_BLOCK) {
        const __m512 d = _mm512_set1_ps(ps_f16_to_f32(x[i].d));
        const __m512 m = _mm512_set1_ps(ps_f16_to_f32(x[i].m));
        const uint32_t qh = rd32(x[i].qh);
        const __m512i a = _mm512_or_si512(nib_lo16(x[i].qs), qbit16(qh, 0));
        const __m512i b = _mm512_or_si512(nib_hi16(x[i].qs), qbit16(qh, 16));
        _mm512_storeu_ps(out, _mm512_add_ps(_mm512_mul_ps(cvt16(a), d), m));
        _mm512_storeu_ps(out + 16, _mm512_add_ps(_mm512_mul_ps(cvt16(b), d), m));
    }
}

/* the 16-entry code tables as floats (exact) */
PS_TARGET_AVX512 static inline __m512 table_ps(const int8_t *kv) {
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)kv)));
}

PS_TARGET_AVX512 void ps_dequant_iq4_nl_avx512(const void *row, float *out, int64_t n) {
    const ps_block_iq4_nl *x = row;
    const __m512 kv = table_ps(ps_kvalues_iq4nl);
    for (int64_t i = 0; i < n / PS_IQ4_NL_BLOCK; i++, out += PS_IQ4_NL_BLOCK) {
        const __m512 d = _mm512_set1_ps(ps_f16_to_f32(x[i].d));
        _mm512_storeu_ps(out, _mm512_mul_ps(d, _mm512_permutexvar_ps(nib_lo16(x[i].qs), kv)));
        _mm512_storeu_ps(out + 16, _mm512_mul_ps(d, _mm512_permutexvar_ps(nib_hi16(x[i].qs), kv)));
    }
}

PS_TARGET_AVX512 void ps_dequant_mxfp4_avx512(const void *row, float *out, int64_t n) {
    const ps_block_mxfp4 *x = row;
    const __m512 kv = table_ps(ps_kvalues_mxfp4);
    for (int64_t i = 0; i < n / PS_MXFP4_BLOCK; i++, out += PS_MXFP4_BLOCK) {
        const __m512 d = _mm512_set1_ps(ps_e8m0_half_to_f32(x[i].e));
        _mm512_storeu_ps(out, _mm512_mul_ps(_mm512_permutexvar_ps(nib_lo16(x[i].qs), kv), d));
        _mm512_storeu_ps(out + 16, _mm512_mul_ps(_mm512_permutexvar_ps(nib_hi16(x[i].qs), kv), d));
    }
}

PS_TARGET_AVX512 void ps_dequant_iq4_xs_avx512(const void *row, float *out, int64_t n) {
    const ps_block_iq4_xs *x = row;
    const __m512 kv = table_ps(ps_kvalues_iq4nl);
    for (int64_t i = 0; i < n / PS_QK_K; i++) {
        const float d = ps_f16_to_f32(x[i].d);
        const uint8_t *qs = x[i].qs;
        for (int ib = 0; ib < PS_QK_K / 32; ib++, out += 32, qs += 16) {
            const int ls = ((x[i].scales_l[ib / 2] >> 4 * (ib % 2)) & 0x0f) |
                           (((x[i].scales_h >> 2 * ib) & 3) << 4);
            const __m512 dl = _mm512_set1_ps(d * (float)(ls - 32));
            _mm512_storeu_ps(out, _mm512_mul_ps(dl, _mm512_permutexvar_ps(nib_lo16(qs), kv)));
            _mm512_storeu_ps(out + 16, _mm512_mul_ps(dl, _mm512_permutexvar_ps(nib_hi16(qs), kv)));
        }
    }
}

PS_TARGET_AVX512 void ps_dequant_q2_k_avx512(const void *row, float *out, int64_t n) {
    const ps_block_q2_k *x = row;
    const __m512i m3 = _mm512_set1_epi32(3);
    for (int64_t i = 0; i < n / PS_QK_K; i++) {
        const float d = ps_f16_to_f32(x[i].d), dmin = ps_f16_to_f32(x[i].dmin);
        const uint8_t *q = x[i].qs;
        int is = 0;
        for (int h = 0; h < PS_QK_K; h += 128, q += 32) {
            const __m512i b0 = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)q));
            const __m512i b1 = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(q + 16)));
            for (int shift = 0; shift < 8; shift += 2)
                for (int half = 0; half < 2; half++, out += 16) {
                    const uint8_t sc = x[i].scales[is++];
                    const __m512 dl = _mm512_set1_ps(d * (float)(sc & 0x0f));
                    const __m512 ml = _mm512_set1_ps(dmin * (float)(sc >> 4));
                    const __m512i c = _mm512_and_si512(
                        _mm512_srl_epi32(half ? b1 : b0, _mm_cvtsi32_si128(shift)), m3);
                    _mm512_storeu_ps(out, _mm512_sub_ps(_mm512_mul_ps(dl, cvt16(c)), ml));
                }
        }
    }
}

PS_TARGET_AVX512 void ps_dequant_q3_k_avx512(const void *row, float *out, int64_t n) {
    const ps_block_q3_k *x = row;
    const __m512i m3 = _mm512_set1_epi32(3), k4 = _mm512_set1_epi32(4);
    for (int64_t i = 0; i < n / PS_QK_K; i++) {
        const float d = ps_f16_to_f32(x[i].d);
        int8_t sc[16];
        q3_k_scales(x[i].scales, sc);
        const uint8_t *q = x[i].qs;
        const __m512i h0 = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)x[i].hmask));
        const __m512i h1 = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(x[i].hmask + 16)));
        int m = 1, is = 0;
        for (int h = 0; h < PS_QK_K; h += 128, q += 32) {
            const __m512i b0 = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)q));
            const __m512i b1 = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(q + 16)));
            for (int shift = 0; shift < 8; shift += 2, m <<= 1)
                for (int half = 0; half < 2; half++, out += 16) {
                    const __m512 dl = _mm512_set1_ps(d * (float)sc[is++]);
                    const __m512i lo = _mm512_and_si512(
                        _mm512_srl_epi32(half ? b1 : b0, _mm_cvtsi32_si128(shift)), m3);
                    /* a clear high bit subtracts 4 */
                    const __mmask16 clear =
                        _mm512_testn_epi32_mask(half ? h1 : h0, _mm512_set1_epi32(m));
                    const __m512i c = _mm512_mask_sub_epi32(lo, clear, lo, k4);
                    _mm512_storeu_ps(out, _mm512_mul_ps(dl, cvt16(c)));
                }
        }
    }
}

/* AVX2: 8 weights per vector, the same operations; tables by pshufb on the int8 codes. */

PS_TARGET_AVX2 static inline __m256i cvt8u(const uint8_t *q) {
    return _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)q));
}
/* element j of 8 (j = 0..7 from q + o) as int32: low nibble, high nibble */
PS_TARGET_AVX2 static inline __m256i nlo8(const uint8_t *q) {
    return _mm256_and_si256(cvt8u(q), _mm256_set1_epi32(15));
}
PS_TARGET_AVX2 static inline __m256i nhi8(const uint8_t *q) { return _mm256_srli_epi32(cvt8u(q), 4); }
PS_TARGET_AVX2 static inline __m256i qbit8(uint32_t qh, int base) {
    const __m256i sh = _mm256_add_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                                        _mm256_set1_epi32(base));
    return _mm256_slli_epi32(
        _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32((int)qh), sh), _mm256_set1_epi32(1)),
        4);
}
/* the table value of 8 codes (int32 lanes 0..15), as float: pshufb on bytes, then widen */
PS_TARGET_AVX2 static inline __m256 lut8(__m128i tab, __m256i idx) {
    const __m128i b = _mm_packus_epi16(_mm_packus_epi32(_mm256_castsi256_si128(idx),
                                                        _mm256_extracti128_si256(idx, 1)),
                                       _mm_setzero_si128());
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_shuffle_epi8(tab, b)));
}

/* legacy blocks of 32: CODE(q, j) the int32 codes of elements j .. j + 7 (j < 16: low
 * nibbles of qs[j ..], else high nibbles of qs[j - 16 ..]) */
PS_TARGET_AVX2 void ps_dequant_q4_0_avx2(const void *row, float *out, int64_t n) {
    const ps_block_q4_0 *x = row;
    const __m256i k8 = _mm256_set1_epi32(8);
    for (int64_t i = 0; i < n / PS_Q4_0_BLOCK; i++, out += PS_Q4_0_BLOCK) {
        const __m256 d = _mm256_set1_ps(ps_f16_to_f32(x[i].d));
        for (int j = 0; j < 16; j += 8) {
            _mm256_storeu_ps(out + j, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(nlo8(x[i].qs + j), k8)), d));
            _mm256_storeu_ps(out + 16 + j, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(nhi8(x[i].qs + j), k8)), d));
        }
    }
}

PS_TARGET_AVX2 void ps_dequant_q4_1_avx2(const void *row, float *out, int64_t n) {
    const ps_block_q4_1 *x = row;
    for (int64_t i = 0; i < n / PS_Q4_1_BLOCK; i++, out += PS_Q4_1_BLOCK) {
        const __m256 d = _mm256_set1_ps(ps_f16_to_f32(x[i].d)), m = _mm256_set1_ps(ps_f16_to_f32(x[i].m));
        for (int j = 0; j < 16; j += 8) {
            _mm256_storeu_ps(out + j, _mm256_add_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(nlo8(x[i].qs + j)), d), m));
            _mm256_storeu_ps(out + 16 + j, _mm256_add_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(nhi8(x[i].qs + j)), d), m));
        }
    }
}

PS_TARGET_AVX2 void ps_dequant_q5_0_avx2(const void *row, float *out, int64_t n) {
    const ps_block_q5_0 *x = row;
    const __m256i k16 = _mm256_set1_epi32(16);
    for (int64_t i = 0; i < n / PS_Q5_0_BLOCK; i++, out += PS_Q5_0_BLOCK) {
        const __m256 d = _mm256_set1_ps(ps_f16_to_f32(x[i].d));
        const uint32_t qh = rd32(x[i].qh);
        for (int j = 0; j < 16; j += 8) {
            const __m256i a = _mm256_or_si256(nlo8(x[i].qs + j), qbit8(qh, j));
            const __m256i b = _mm256_or_si256(nhi8(x[i].qs + j), qbit8(qh, j + 16));
            _mm256_storeu_ps(out + j, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(a, k16)), d));
            _mm256_storeu_ps(out + 16 + j, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(b, k16)), d));
        }
    }
}

PS_TARGET_AVX2 void ps_dequant_q5_1_avx2(const void *row, float *out, int64_t n) {
    const ps_block_q5_1 *x = row;
    for (int64_t i = 0; i < n / PS_Q5_1_BLOCK; i++, out += PS_Q5_1_BLOCK) {
        const __m256 d = _mm256_set1_ps(ps_f16_to_f32(x[i].d)), m = _mm256_set1_ps(ps_f16_to_f32(x[i].m));
        const uint32_t qh = rd32(x[i].qh);
        for (int j = 0; j < 16; j += 8) {
            const __m256i a = _mm256_or_si256(nlo8(x[i].qs + j), qbit8(qh, j));
            const __m256i b = _mm256_or_si256(nhi8(x[i].qs + j), qbit8(qh, j + 16));
            _mm256_storeu_ps(out + j, _mm256_add_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(a), d), m));
            _mm256_storeu_ps(out + 16 + j, _mm256_add_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(b), d), m));
        }
    }
}

PS_TARGET_AVX2 void ps_dequant_iq4_nl_avx2(const void *row, float *out, int64_t n) {
    const ps_block_iq4_nl *x = row;
    const __m128i kv = _mm_loadu_si128((const __m128i *)ps_kvalues_iq4nl);
    for (int64_t i = 0; i < n / PS_IQ4_NL_BLOCK; i++, out += PS_IQ4_NL_BLOCK) {
        const __m256 d = _mm256_set1_ps(ps_f16_to_f32(x[i].d));
        for (int j = 0; j < 16; j += 8) {
            _mm256_storeu_ps(out + j, _mm256_mul_ps(d, lut8(kv, nlo8(x[i].qs + j))));
            _mm256_storeu_ps(out + 16 + j, _mm256_mul_ps(d, lut8(kv, nhi8(x[i].qs + j))));
        }
    }
}

PS_TARGET_AVX2 void ps_dequant_mxfp4_avx2(const void *row, float *out, int64_t n) {
    const ps_block_mxfp4 *x = row;
    const __m128i kv = _mm_loadu_si128((const __m128i *)ps_kvalues_mxfp4);
    for (int64_t i = 0; i < n / PS_MXFP4_BLOCK; i++, out += PS_MXFP4_BLOCK) {
        const __m256 d = _mm256_set1_ps(ps_e8m0_half_to_f32(x[i].e));
        for (int j = 0; j < 16; j += 8) {
            _mm256_storeu_ps(out + j, _mm256_mul_ps(lut8(kv, nlo8(x[i].qs + j)), d));
            _mm256_storeu_ps(out + 16 + j, _mm256_mul_ps(lut8(kv, nhi8(x[i].qs + j)), d));
        }
    }
}

PS_TARGET_AVX2 void ps_dequant_iq4_xs_avx2(const void *row, float *out, int64_t n) {
    const ps_block_iq4_xs *x = row;
    const __m128i kv = _mm_loadu_si128((const __m128i *)ps_kvalues_iq4nl);
    for (int64_t i = 0; i < n / PS_QK_K; i++) {
        const float d = ps_f16_to_f32(x[i].d);
        const uint8_t *qs = x[i].qs;
        for (int ib = 0; ib < PS_QK_K / 32; ib++, out += 32, qs += 16) {
            const int ls = ((x[i].scales_l[ib / 2] >> 4 * (ib % 2)) & 0x0f) |
                           (((x[i].scales_h >> 2 * ib) & 3) << 4);
            const __m256 dl = _mm256_set1_ps(d * (float)(ls - 32));
            for (int j = 0; j < 16; j += 8) {
                _mm256_storeu_ps(out + j, _mm256_mul_ps(dl, lut8(kv, nlo8(qs + j))));
                _mm256_storeu_ps(out + 16 + j, _mm256_mul_ps(dl, lut8(kv, nhi8(qs + j))));
            }
        }
    }
}

PS_TARGET_AVX2 void ps_dequant_q2_k_avx2(const void *row, float *out, int64_t n) {
    const ps_block_q2_k *x = row;
    const __m256i m3 = _mm256_set1_epi32(3);
    for (int64_t i = 0; i < n / PS_QK_K; i++) {
        const float d = ps_f16_to_f32(x[i].d), dmin = ps_f16_to_f32(x[i].dmin);
        const uint8_t *q = x[i].qs;
        int is = 0;
        for (int h = 0; h < PS_QK_K; h += 128, q += 32)
            for (int shift = 0; shift < 8; shift += 2)
                for (int half = 0; half < 2; half++, out += 16) {
                    const uint8_t sc = x[i].scales[is++];
                    const __m256 dl = _mm256_set1_ps(d * (float)(sc & 0x0f));
                    const __m256 ml = _mm256_set1_ps(dmin * (float)(sc >> 4));
                    for (int l = 0; l < 16; l += 8) {
                        const __m256i c = _mm256_and_si256(
                            _mm256_srl_epi32(cvt8u(q + 16 * half + l), _mm_cvtsi32_si128(shift)), m3);
                        _mm256_storeu_ps(out + l, _mm256_sub_ps(_mm256_mul_ps(dl, _mm256_cvtepi32_ps(c)), ml));
                    }
                }
    }
}

PS_TARGET_AVX2 void ps_dequant_q3_k_avx2(const void *row, float *out, int64_t n) {
    const ps_block_q3_k *x = row;
    const __m256i m3 = _mm256_set1_epi32(3), k4 = _mm256_set1_epi32(4);
    for (int64_t i = 0; i < n / PS_QK_K; i++) {
        const float d = ps_f16_to_f32(x[i].d);
        int8_t sc[16];
        q3_k_scales(x[i].scales, sc);
        const uint8_t *q = x[i].qs, *hm = x[i].hmask;
        int m = 1, is = 0;
        for (int h = 0; h < PS_QK_K; h += 128, q += 32)
            for (int shift = 0; shift < 8; shift += 2, m <<= 1)
                for (int half = 0; half < 2; half++, out += 16) {
                    const __m256 dl = _mm256_set1_ps(d * (float)sc[is++]);
                    for (int l = 0; l < 16; l += 8) {
                        const int k = 16 * half + l;
                        const __m256i lo = _mm256_and_si256(
                            _mm256_srl_epi32(cvt8u(q + k), _mm_cvtsi32_si128(shift)), m3);
                        /* a clear high bit subtracts 4 */
                        const __m256i set = _mm256_cmpeq_epi32(
                            _mm256_and_si256(cvt8u(hm + k), _mm256_set1_epi32(m)), _mm256_set1_epi32(m));
                        const __m256i c = _mm256_sub_epi32(lo, _mm256_andnot_si256(set, k4));
                        _mm256_storeu_ps(out + l, _mm256_mul_ps(dl, _mm256_cvtepi32_ps(c)));
                    }
                }
    }
}

#else
void ps_dequant_f16_avx2(const void *row, float *out, int64_t n) { ps_dequant_f16(row, out, n); }
void ps_dequant_bf16_avx2(const void *row, float *out, int64_t n) { ps_dequant_bf16(row, out, n); }
void ps_dequant_q8_0_avx2(const void *row, float *out, int64_t n) { ps_dequant_q8_0(row, out, n); }
void ps_dequant_f16_avx512(const void *row, float *out, int64_t n) { ps_dequant_f16(row, out, n); }
void ps_dequant_bf16_avx512(const void *row, float *out, int64_t n) { ps_dequant_bf16(row, out, n); }
void ps_dequant_q8_0_avx512(const void *row, float *out, int64_t n) { ps_dequant_q8_0(row, out, n); }
void ps_dequant_q4_k_avx512(const void *row, float *out, int64_t n) { ps_dequant_q4_k(row, out, n); }
void ps_dequant_q5_k_avx512(const void *row, float *out, int64_t n) { ps_dequant_q5_k(row, out, n); }
void ps_dequant_q6_k_avx512(const void *row, float *out, int64_t n) { ps_dequant_q6_k(row, out, n); }
void ps_dequant_q4_0_avx2(const void *row, float *out, int64_t n) { ps_dequant_q4_0(row, out, n); }
void ps_dequant_q4_0_avx512(const void *row, float *out, int64_t n) { ps_dequant_q4_0(row, out, n); }
void ps_dequant_q4_1_avx2(const void *row, float *out, int64_t n) { ps_dequant_q4_1(row, out, n); }
void ps_dequant_q4_1_avx512(const void *row, float *out, int64_t n) { ps_dequant_q4_1(row, out, n); }
void ps_dequant_q5_0_avx2(const void *row, float *out, int64_t n) { ps_dequant_q5_0(row, out, n); }
void ps_dequant_q5_0_avx512(const void *row, float *out, int64_t n) { ps_dequant_q5_0(row, out, n); }
void ps_dequant_q5_1_avx2(const void *row, float *out, int64_t n) { ps_dequant_q5_1(row, out, n); }
void ps_dequant_q5_1_avx512(const void *row, float *out, int64_t n) { ps_dequant_q5_1(row, out, n); }
void ps_dequant_iq4_nl_avx2(const void *row, float *out, int64_t n) { ps_dequant_iq4_nl(row, out, n); }
void ps_dequant_iq4_nl_avx512(const void *row, float *out, int64_t n) { ps_dequant_iq4_nl(row, out, n); }
void ps_dequant_mxfp4_avx2(const void *row, float *out, int64_t n) { ps_dequant_mxfp4(row, out, n); }
void ps_dequant_mxfp4_avx512(const void *row, float *out, int64_t n) { ps_dequant_mxfp4(row, out, n); }
void ps_dequant_iq4_xs_avx2(const void *row, float *out, int64_t n) { ps_dequant_iq4_xs(row, out, n); }
void ps_dequant_iq4_xs_avx512(const void *row, float *out, int64_t n) { ps_dequant_iq4_xs(row, out, n); }
void ps_dequant_q2_k_avx2(const void *row, float *out, int64_t n) { ps_dequant_q2_k(row, out, n); }
void ps_dequant_q2_k_avx512(const void *row, float *out, int64_t n) { ps_dequant_q2_k(row, out, n); }
void ps_dequant_q3_k_avx2(const void *row, float *out, int64_t n) { ps_dequant_q3_k(row, out, n); }
void ps_dequant_q3_k_avx512(const void *row, float *out, int64_t n) { ps_dequant_q3_k(row, out, n); }
#endif
