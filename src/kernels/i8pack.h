/*
 * i8pack.h — the in-register transpose of the int8 weight packers (matmul_quant_avx512.c's 32-input
 * block types, Q8_0 among them, and its 256-input tiles): 16 weight rows of 32 bytes (8 dwords each)
 * become the 8 "groups" of the VNNI / AMX B layout, group g = dword g of the 16 rows (lane i
 * from row i). Input zmm k holds rows k (low 256 bits) and k + 8 (high 256 bits); a 4 x 4
 * dword transpose inside each 128-bit lane (unpack 32, unpack 64) and one two-source qword
 * permute per group put each group's 16 dwords in row order. x86-64 with AVX-512F only.
 */
#ifndef PS_I8PACK_H
#define PS_I8PACK_H

#include "base/simd.h"

#if defined(__x86_64__)
#include <immintrin.h>

/* g[j] = group j (dword j of rows 0..15, lane i = row i) of the rows in z (see above). */
PS_TARGET_AVX512F static inline __attribute__((always_inline)) void
ps_i8_groups16(const __m512i z[8], __m512i g[8]) {
    const __m512i lo = _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13);
    const __m512i hi = _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15);
    __m512i u[4], w[4];
    for (int h = 0; h < 2; h++) {
        /* rows 0-3 (+8), then 4-7 (+8): lane L of o[j] = dword j (of that lane) of 4 rows */
        const __m512i *zz = z + 4 * h;
        const __m512i t0 = _mm512_unpacklo_epi32(zz[0], zz[1]);
        const __m512i t1 = _mm512_unpackhi_epi32(zz[0], zz[1]);
        const __m512i t2 = _mm512_unpacklo_epi32(zz[2], zz[3]);
        const __m512i t3 = _mm512_unpackhi_epi32(zz[2], zz[3]);
        __m512i *o = h ? w : u;
        o[0] = _mm512_unpacklo_epi64(t0, t2);
        o[1] = _mm512_unpackhi_epi64(t0, t2);
        o[2] = _mm512_unpacklo_epi64(t1, t3);
        o[3] = _mm512_unpackhi_epi64(t1, t3);
    }
    /* group j: lanes 0, 2 of u (rows 0-3, 8-11) and of w (rows 4-7, 12-15); j + 4: lanes 1, 3 */
    for (int j = 0; j < 4; j++) {
        g[j] = _mm512_permutex2var_epi64(u[j], lo, w[j]);
        g[j + 4] = _mm512_permutex2var_epi64(u[j], hi, w[j]);
    }
}
#endif

#endif
