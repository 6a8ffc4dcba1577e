/*
 * dequant_avx2.c — the AVX2 forms of the dequantisation (dequant.c holds the scalar forms and
 * says what each computes): F16, BF16, Q8_0, the legacy blocks, Q2_K, Q3_K, IQ4_NL, IQ4_XS and
 * MXFP4, 8 weights per vector. F16 and BF16 are exact conversions; the block types decode
 * their integer codes in registers, widen them exactly, then perform the scalar form's float
 * operations in its order (the per-block and per-sub-block factors as the same scalar
 * products; mul, then add or sub, no fused multiply-add); table types look the value of each
 * code up by pshufb on the int8 codes. So every form gives the scalar form's bits.
 */
#include "kernels/dequant.h"
#include "kernels/dequant_isa.h"
#include "base/simd.h"

#if defined(__x86_64__)
#include <immintrin.h>

/* ---- F16 and BF16 are exact conversions, Q8_0 one multiply ---- */

PS_TARGET_AVX2 void ps_dequant_f16_avx2(const void *row, float *out, int64_t n) {
    const uint8_t *p = row;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + 2 * i))));
    ps_dequant_f16(p + 2 * i, out + i, n - i);
}

PS_TARGET_AVX2 void ps_dequant_bf16_avx2(const void *row, float *out, int64_t n) {
    const uint8_t *p = row;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(p + 2 * i)));
        _mm256_storeu_ps(out + i, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
    }
    ps_dequant_bf16(p + 2 * i, out + i, n - i);
}

PS_TARGET_AVX2 void ps_dequant_q8_0_avx2(const void *row, float *out, int64_t n) {
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

/* ---- the other block types ---- */

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

#else /* not x86-64: never dispatched (ps_isa_supported says no); the scalar forms */
void ps_dequant_f16_avx2(const void *row, float *out, int64_t n) { ps_dequant_f16(row, out, n); }
void ps_dequant_bf16_avx2(const void *row, float *out, int64_t n) { ps_dequant_bf16(row, out, n); }
void ps_dequant_q8_0_avx2(const void *row, float *out, int64_t n) { ps_dequant_q8_0(row, out, n); }
void ps_dequant_q4_0_avx2(const void *row, float *out, int64_t n) { ps_dequant_q4_0(row, out, n); }
void ps_dequant_q4_1_avx2(const void *row, float *out, int64_t n) { ps_dequant_q4_1(row, out, n); }
void ps_dequant_q5_0_avx2(const void *row, float *out, int64_t n) { ps_dequant_q5_0(row, out, n); }
void ps_dequant_q5_1_avx2(const void *row, float *out, int64_t n) { ps_dequant_q5_1(row, out, n); }
void ps_dequant_iq4_nl_avx2(const void *row, float *out, int64_t n) { ps_dequant_iq4_nl(row, out, n); }
void ps_dequant_mxfp4_avx2(const void *row, float *out, int64_t n) { ps_dequant_mxfp4(row, out, n); }
void ps_dequant_iq4_xs_avx2(const void *row, float *out, int64_t n) { ps_dequant_iq4_xs(row, out, n); }
void ps_dequant_q2_k_avx2(const void *row, float *out, int64_t n) { ps_dequant_q2_k(row, out, n); }
void ps_dequant_q3_k_avx2(const void *row, float *out, int64_t n) { ps_dequant_q3_k(row, out, n); }
#endif
