/*
 * dequant.c — one row of each weight type -> float32, as ggml's dequantize_row_* computes it:
 * the scalar forms (the SIMD forms with the same bits are dequant_avx2.c and dequant_avx512.c;
 * dequant_isa.h is what they share).
 *
 * Each function walks the blocks of its type (layouts in qblocks.h) and performs the float
 * operations ggml performs, in the same order, with the same operand types: an f16 scale is
 * widened exactly (ps_f16_to_f32), an integer code is converted to float exactly, and then
 * e.g. Q4_1 is `q * d + m`, Q4_K `(d * sc) * q - dmin * m`, Q6_K `(d * sc) * q` — one
 * rounding per operation (the build is ISO C11: no contraction into fused multiply-adds).
 * So every non-NaN block gives ggml's bits; a NaN scale gives NaNs (ggml's payload may differ).
 * tests/test_types.c compares every form, scalar and SIMD, with the numpy decoder.
 */
#include "kernels/dequant.h"
#include "kernels/dequant_isa.h"

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

/* Q3_K: the scales by q3_k_scales (dequant_isa.h). The low two bits of weight e as Q2_K; its
 * high bit in hmask[e % 32] bit (e / 32); a clear high bit subtracts 4. */
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
