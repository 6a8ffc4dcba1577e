/*
 * dequant_avx512.c — the AVX-512 forms of the dequantisation (dequant.c holds the scalar forms
 * and says what each computes): F16, BF16, Q8_0, the legacy blocks, the k-quants Q2_K .. Q6_K,
 * IQ4_NL, IQ4_XS and MXFP4, 16 weights per vector. F16 and BF16 are exact conversions; the
 * block types decode their integer codes in registers, widen them to int32 and then float
 * (exact), then perform the scalar form's float operations in its order (the per-block and
 * per-sub-block factors as the same scalar products; mul, then add or sub, no fused
 * multiply-add); table types look the value of each code up with one permute (the tables'
 * values are small integers: exact as floats). So every form gives the scalar form's bits.
 */
#include "kernels/dequant.h"
#include "kernels/dequant_isa.h"
#include "base/simd.h"

#if defined(__x86_64__)
#include <immintrin.h>

/* ---- F16 and BF16 are exact conversions, Q8_0 one multiply ---- */

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

#else /* not x86-64: never dispatched (ps_isa_supported says no); the scalar forms */
void ps_dequant_f16_avx512(const void *row, float *out, int64_t n) { ps_dequant_f16(row, out, n); }
void ps_dequant_bf16_avx512(const void *row, float *out, int64_t n) { ps_dequant_bf16(row, out, n); }
void ps_dequant_q8_0_avx512(const void *row, float *out, int64_t n) { ps_dequant_q8_0(row, out, n); }
void ps_dequant_q4_k_avx512(const void *row, float *out, int64_t n) { ps_dequant_q4_k(row, out, n); }
void ps_dequant_q5_k_avx512(const void *row, float *out, int64_t n) { ps_dequant_q5_k(row, out, n); }
void ps_dequant_q6_k_avx512(const void *row, float *out, int64_t n) { ps_dequant_q6_k(row, out, n); }
void ps_dequant_q4_0_avx512(const void *row, float *out, int64_t n) { ps_dequant_q4_0(row, out, n); }
void ps_dequant_q4_1_avx512(const void *row, float *out, int64_t n) { ps_dequant_q4_1(row, out, n); }
void ps_dequant_q5_0_avx512(const void *row, float *out, int64_t n) { ps_dequant_q5_0(row, out, n); }
void ps_dequant_q5_1_avx512(const void *row, float *out, int64_t n) { ps_dequant_q5_1(row, out, n); }
void ps_dequant_iq4_nl_avx512(const void *row, float *out, int64_t n) { ps_dequant_iq4_nl(row, out, n); }
void ps_dequant_mxfp4_avx512(const void *row, float *out, int64_t n) { ps_dequant_mxfp4(row, out, n); }
void ps_dequant_iq4_xs_avx512(const void *row, float *out, int64_t n) { ps_dequant_iq4_xs(row, out, n); }
void ps_dequant_q2_k_avx512(const void *row, float *out, int64_t n) { ps_dequant_q2_k(row, out, n); }
void ps_dequant_q3_k_avx512(const void *row, float *out, int64_t n) { ps_dequant_q3_k(row, out, n); }
#endif
