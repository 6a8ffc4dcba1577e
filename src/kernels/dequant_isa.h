/*
 * dequant_isa.h — what the files of the dequantisation share (private to them): dequant.c
 * (the scalar forms, bitwise ggml's), dequant_avx2.c and dequant_avx512.c (the SIMD forms with
 * the same bits). Here: the little-endian byte readers and the k-quants' scale unpacking, which
 * the SIMD forms run as scalars in the scalar forms' order.
 */
#ifndef PS_DEQUANT_ISA_H
#define PS_DEQUANT_ISA_H

#include "base/impl.h"
#include "kernels/qblocks.h"

static inline uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }

static inline uint32_t rd32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Q3_K: 16 six-bit scales: low 4 bits in the nibbles of scales[0..7] (s < 8: low nibble of
 * byte s, else high nibble of byte s - 8), high 2 bits in scales[8 + s % 4] at shift
 * 2 * (s / 4); value - 32. */
static inline void q3_k_scales(const uint8_t *s, int8_t out[16]) {
    for (int k = 0; k < 16; k++) {
        const int lo = k < 8 ? s[k] & 0x0f : s[k - 8] >> 4;
        const int hi = (s[8 + k % 4] >> (2 * (k / 4))) & 3;
        out[k] = (int8_t)((lo | hi << 4) - 32);
    }
}

/* Q4_K / Q5_K six-bit scale and min of sub-block j (0..7), packed in 12 bytes. */
static inline void scale_min_k4(int j, const uint8_t *q, uint8_t *sc, uint8_t *m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (uint8_t)((q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

#endif /* PS_DEQUANT_ISA_H */
