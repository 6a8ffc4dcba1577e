/*
 * matmul_quant_avx512.c — the AVX-512 VNNI path of the integer matmul (matmul_quant.c drives
 * it; matmul_quant_isa.h declares what it gives): the activation sub-block sums by vpsadbw,
 * the packers of a 16-row tile into the group layout, and the kernels, 16 lanes = the 16
 * weight rows of the packed tile, in passes of 8 activation rows, then of 4, 2 and 1.
 *
 * A broadcast of 4 activation bytes against a group vector (vpdpbusd: u8 weights x s8
 * activations) gives every lane a 4-product partial sum of its own row. The rows' sub-block
 * scales give isum_b with no vpmulld: each sub-block sum t is split into the int16 pair
 * (t & 255, t >> 8) (one vpshufb) against the packed pair (sc, 256 sc) in one vpdpwssd
 * (mk_vnni); Q3_K and Q2_K pair two sub-block sums into one vpdpwssd instead (mkp_vnni). The
 * mins are int16 pairs against the activations' int16 sub-block sums (vpdpwssd). Q8_0 swaps
 * vpdpbusd's operands (qdesc.xact: unsigned activations, signed weights with start values per
 * weight row). Packing: the blocks of 32, Q8_0's signed form, Q4_K and Q6_K go straight from
 * the rows into the layout in registers (ps_i8_groups16, i8pack.h) and prefetch the next tile
 * as they go (pf_block); every other type through the decoders (ps_mmq_pack_side) and
 * transpose_vnni. Q4_K and Q6_K matrices with a tile copy (the experts, matmul_quant.h) are not
 * packed at all: ps_mmq_vnni_q4x / ps_mmq_vnni_q6x read the copy. Every integer sum is exact
 * and the float part keeps the scalar kernel's order, so the bits are the scalar kernel's.
 */
#include "kernels/matmul_quant_isa.h"
#include "kernels/matmul_quant.h"
#include "kernels/i8pack.h"
#include "base/testhooks.h"
#include "base/util.h"

#include <stdatomic.h>

#ifdef PS_TESTING
/* ps_test_mmq_pack_plain (testhooks.h): the k-quant tiles packed by ps_mmq_pack_tile_vnni */
static atomic_bool mmq_pack_plain;
void ps_test_mmq_pack_plain(bool on) { atomic_store(&mmq_pack_plain, on); }
#endif

#if defined(__x86_64__)

/* ---- the activations' sums of 32 ---- */

PS_TARGET_AVX512_BW void ps_mmq_sums32_avx512(const int8_t *q, int64_t n, int16_t *bs) {
    for (int64_t j = 0; j + 2 <= n / 32; j += 2) {
        const __m512i u = _mm512_xor_si512(_mm512_loadu_si512((const void *)(q + 32 * j)),
                                           _mm512_set1_epi8((char)0x80));
        uint64_t s8[8];
        _mm512_storeu_si512((void *)s8, _mm512_sad_epu8(u, _mm512_setzero_si512()));
        bs[j] = (int16_t)((int)(s8[0] + s8[1] + s8[2] + s8[3]) - 32 * 128);
        bs[j + 1] = (int16_t)((int)(s8[4] + s8[5] + s8[6] + s8[7]) - 32 * 128);
    }
}

/* ---- packing a tile ---- */

/* The group layout by an in-register transpose (ps_i8_groups16, i8pack.h, as
 * the 32-input packers below): per 32-byte chunk, zmm k holds rows k and k + 8; group g = dword g
 * of the 16 rows. */
PS_TARGET_AVX512_VNNI static inline __attribute__((always_inline)) void transpose8_store(const __m512i *z,
                                                                          uint8_t *d) {
    __m512i g[8];
    ps_i8_groups16(z, g);
    for (int j = 0; j < 8; j++) _mm512_store_si512((void *)(d + 64 * j), g[j]);
}

PS_TARGET_AVX512_VNNI static void transpose_vnni(int qk, const uint8_t *tmp, uint8_t *dst) {
    for (int c = 0; c < qk / 32; c++) {
        __m512i z[8];
        for (int k = 0; k < 8; k++) {
            const __m256i r0 = _mm256_loadu_si256((const __m256i *)(tmp + k * qk + 32 * c));
            const __m256i r1 = _mm256_loadu_si256((const __m256i *)(tmp + (k + 8) * qk + 32 * c));
            z[k] = _mm512_inserti64x4(_mm512_castsi256_si512(r0), r1, 1);
        }
        transpose8_store(z, dst + c * 8 * 64);
    }
}

/* The blocks of 32 straight into the group layout: each row's 32 u bytes decoded in a register
 * (u32_of), rows k and k + 8 side by side, the same in-register transpose; the 16 f16 scales
 * (and Q4_1 / Q5_1's m) widened by one vcvtph2ps, MXFP4's E8M0 by e8m0_half. Rows past nw: u =
 * off (w = 0) and zero scales, as ps_mmq_pack_side. The same bytes as ps_mmq_pack_side +
 * transpose_vnni, without the temporary and the decoder's scalar loop (docs/kernels.md,
 * "Measured choices of the integer kernels"). */
PS_TARGET_AVX512_VNNI static inline __attribute__((always_inline)) void pack_b32_vnni(
    uint32_t type, int off, bool has_m, const qpack *pg, const uint8_t *w0, size_t row_bytes,
    int nw, int64_t nb, size_t bytes, uint8_t *wp) {
    const __m256i pad = _mm256_set1_epi8((char)off);
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *src = w0 + (size_t)b * bytes;
        uint8_t *dst = wp + b * pg->pb;
        uint16_t dh[16] = {0}, mh[16] = {0};
        __m512i z[8];
        for (int k = 0; k < 8; k++) {
            __m256i r0 = pad, r1 = pad;
            if (k < nw) {
                const uint8_t *blk = src + (size_t)k * row_bytes;
                r0 = u32_of(type, blk);
                dh[k] = rd16(blk);
                if (has_m) mh[k] = rd16(blk + 2);
            }
            if (k + 8 < nw) {
                const uint8_t *blk = src + (size_t)(k + 8) * row_bytes;
                r1 = u32_of(type, blk);
                dh[k + 8] = rd16(blk);
                if (has_m) mh[k + 8] = rd16(blk + 2);
            }
            z[k] = _mm512_inserti64x4(_mm512_castsi256_si512(r0), r1, 1);
        }
        transpose8_store(z, dst);
        if (type == PS_GGML_MXFP4) {
            float *dwv = (float *)(dst + pg->dw);
            for (int i = 0; i < QT; i++) dwv[i] = i < nw ? e8m0_half((uint8_t)dh[i]) : 0.0f;
        } else {
            _mm512_store_ps((void *)(dst + pg->dw),
                            _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)dh)));
        }
        if (has_m)
            _mm512_store_ps((void *)(dst + pg->dm),
                            _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)mh)));
    }
}

#define PACK_B32(NAME, TYPE, OFF, HM, BYTES)                                                   \
    PS_TARGET_AVX512_VNNI static void NAME(const qpack *pg, const uint8_t *w0, size_t row_bytes, int nw,      \
                            int64_t nb, uint8_t *wp) {                                         \
        pack_b32_vnni(TYPE, OFF, HM, pg, w0, row_bytes, nw, nb, BYTES, wp);                     \
    }
PACK_B32(pack_q4_0_vnni, PS_GGML_Q4_0, 8, false, sizeof(ps_block_q4_0))
PACK_B32(pack_q4_1_vnni, PS_GGML_Q4_1, 0, true, sizeof(ps_block_q4_1))
PACK_B32(pack_q5_0_vnni, PS_GGML_Q5_0, 16, false, sizeof(ps_block_q5_0))
PACK_B32(pack_q5_1_vnni, PS_GGML_Q5_1, 0, true, sizeof(ps_block_q5_1))
PACK_B32(pack_q8_0_vnni, PS_GGML_Q8_0, 128, false, sizeof(ps_block_q8_0))
PACK_B32(pack_iq4_nl_vnni, PS_GGML_IQ4_NL, 128, false, sizeof(ps_block_iq4_nl))
PACK_B32(pack_mxfp4_vnni, PS_GGML_MXFP4, 12, false, sizeof(ps_block_mxfp4))

pack_b32_fn ps_mmq_pack_b32_vnni_of(uint32_t type) {
    switch (type) {
    case PS_GGML_Q4_0: return pack_q4_0_vnni;
    case PS_GGML_Q4_1: return pack_q4_1_vnni;
    case PS_GGML_Q5_0: return pack_q5_0_vnni;
    case PS_GGML_Q5_1: return pack_q5_1_vnni;
    case PS_GGML_Q8_0: return pack_q8_0_vnni;
    case PS_GGML_IQ4_NL: return pack_iq4_nl_vnni;
    case PS_GGML_MXFP4: return pack_mxfp4_vnni;
    default: return NULL;
    }
}

/* The in-register packers' prefetch (pack_b32_x_vnni, pack_q4_k_vnni, pack_q6_k_vnni): the
 * lines of block b of the 16 rows one tile further on (the next tile of the same matrix: its
 * rows follow; past a matrix's end the next expert's, which a grouped call often reads next,
 * and a prefetch never faults), issued a block at a time while this tile is packed, so the
 * weights stream in at an even pace. It replaces the burst of prefetch_rows a tile ahead for
 * these types (mmq_self_prefetch): with few activation rows a tile is short, and the burst of
 * its 300-550 lines came too late (docs/kernels.md, "Prefetch while packing"). Into the L2
 * (locality 2, prefetcht1), not the L1: a tile's 300-550 lines brought into the 32 KiB L1
 * while the kernel streams the activations through it were evicted before the packer read
 * them (docs/kernels.md, "Measured choices of the integer kernels"). */
static inline __attribute__((always_inline)) void pf_block(const uint8_t *w0, size_t row_bytes,
                                                           int64_t b, size_t bytes) {
    const uint8_t *p = w0 + (size_t)QT * row_bytes + (size_t)b * bytes;
    for (int i = 0; i < QT; i++)
        for (size_t o = 0; o < bytes; o += 64)
            __builtin_prefetch(p + (size_t)i * row_bytes + o, 0, 2); /* locality 2: the L2 */
}

/* qdesc.xact (Q8_0, whose 32 bytes are the int8 weights after the f16 scale): the weights
 * as they are (signed; rows past nw zero) into the group layout by the same transpose, the
 * rows' start values -128 x (the block's weight sum) (vpdpbusd of all-ones bytes against the
 * groups) at pg->mn, the f16 scales widened at pg->dw. vpdpbusd then adds (q + 128) x w to
 * them: sum q w exactly. */
PS_TARGET_AVX512_VNNI void ps_mmq_pack_b32_x_vnni(const qpack *pg, const uint8_t *w0,
                                                 size_t row_bytes, int nw, int64_t nb,
                                                 uint8_t *wp) {
    const __m512i ones = _mm512_set1_epi8(1);
    for (int64_t b = 0; b < nb; b++) {
        const size_t off = (size_t)b * sizeof(ps_block_q8_0);
        uint8_t *dst = wp + b * pg->pb;
        pf_block(w0, row_bytes, b, sizeof(ps_block_q8_0));
        uint16_t dh[16] = {0};
        __m512i z[8];
        for (int k = 0; k < 8; k++) {
            __m256i r0 = _mm256_setzero_si256(), r1 = _mm256_setzero_si256();
            if (k < nw) {
                const uint8_t *src = w0 + (size_t)k * row_bytes + off;
                r0 = _mm256_loadu_si256((const __m256i *)(src + 2));
                dh[k] = rd16(src);
            }
            if (k + 8 < nw) {
                const uint8_t *src = w0 + (size_t)(k + 8) * row_bytes + off;
                r1 = _mm256_loadu_si256((const __m256i *)(src + 2));
                dh[k + 8] = rd16(src);
            }
            z[k] = _mm512_inserti64x4(_mm512_castsi256_si512(r0), r1, 1);
        }
        __m512i g[8];
        ps_i8_groups16(z, g);
        __m512i sum = _mm512_setzero_si512();
        for (int j = 0; j < 8; j++) {
            _mm512_store_si512((void *)(dst + 64 * j), g[j]);
            sum = _mm512_dpbusd_epi32(sum, ones, g[j]);
        }
        _mm512_store_si512((void *)(dst + pg->mn),
                           _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(sum, 7)));
        _mm512_store_ps((void *)(dst + pg->dw),
                        _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)dh)));
    }
}

PS_TARGET_AVX512_VNNI void ps_mmq_pack_tile_vnni(const qdesc *qd, const qpack *pg,
                                                const uint8_t *w0, size_t row_bytes, int nw,
                                                int64_t nb, uint8_t *wp, ufast_fn uf) {
    uint8_t tmp[QT * 256] __attribute__((aligned(64)));
    for (int64_t b = 0; b < nb; b++) {
        uint8_t *dst = wp + b * pg->pb;
        ps_mmq_pack_side(qd, pg, w0, row_bytes, nw, b, tmp, dst, uf, qd->cl ? qd->cl : -1);
        transpose_vnni(qd->qk, tmp, dst);
    }
}

/* The 256-input k-quants Q4_K and Q6_K straight into the group layout (as pack_b32_vnni for
 * the blocks of 32): per block, each 32-byte chunk of u decoded in registers for rows k and
 * k + 8 side by side (the bytes of matmul_quant_avx2.c's uf_q4_k / uf_q6_k), the same
 * in-register transpose (ps_i8_groups16); the scales, mins and f16 factors of the 16 rows
 * gathered as dwords (vpgatherdd, one lane per row, lanes past nw zero) and laid out by shifts
 * and vpshufb: the (sc, 256 sc) int16 pairs of mk_vnni, Q4_K's (mn 2p, mn 2p + 1) pairs, the
 * f16 factors by vcvtph2ps. The same bytes as ps_mmq_pack_side + transpose_vnni (test_matmul_quant checks
 * them, and every kernel against the scalar one), which decoded row by row: with few
 * activation rows per tile (the experts of a mixture-of-experts layer) that packing was most
 * of the product (docs/kernels.md, "The expert products with few rows per expert"). */
PS_TARGET_AVX512_VNNI static inline __attribute__((always_inline)) __m512i
gather_rows32(const uint8_t *base, __m512i vidx, __mmask16 rows) {
    return _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), rows, vidx, (const void *)base, 1);
}

PS_TARGET_AVX512_VNNI static inline __attribute__((always_inline)) __m512i
pair_rows(const uint8_t *lo, const uint8_t *hi, __m256i pad) {
    const __m256i a = lo ? _mm256_loadu_si256((const __m256i *)lo) : pad;
    const __m256i b = hi ? _mm256_loadu_si256((const __m256i *)hi) : pad;
    return _mm512_inserti64x4(_mm512_castsi256_si512(a), b, 1);
}

/* (sc, 256 sc) int16 pairs of the byte at `byte` (0..3) of each dword of v (unsigned 6-bit
 * scales: Q4_K) */
PS_TARGET_AVX512_VNNI static inline __attribute__((always_inline)) __m512i
sc_pairs_u8(__m512i v, int byte) {
    const uint32_t c = (uint32_t)byte;
    const __m512i ctl = _mm512_set4_epi32(
        (int)((12 + c) << 24 | 0x8080u << 8 | (12 + c)), (int)((8 + c) << 24 | 0x8080u << 8 | (8 + c)),
        (int)((4 + c) << 24 | 0x8080u << 8 | (4 + c)), (int)(c << 24 | 0x8080u << 8 | c));
    return _mm512_shuffle_epi8(v, ctl);
}

/* The byte offsets of rows 0..15 of a tile, for gather_rows32. */
PS_TARGET_AVX512_VNNI static inline __m512i row_offsets(size_t row_bytes) {
    return _mm512_mullo_epi32(
        _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
        _mm512_set1_epi32((int)row_bytes));
}

PS_TARGET_AVX512_VNNI static void pack_q4_k_vnni(const qpack *pg, const uint8_t *w0,
                                                 size_t row_bytes, int nw, int64_t nb,
                                                 uint8_t *wp) {
    const __mmask16 rows = (__mmask16)((1u << nw) - 1u);
    const __m512i vidx = row_offsets(row_bytes);
    const __m512i m4 = _mm512_set1_epi8(15), m6 = _mm512_set1_epi8(63),
                  m2 = _mm512_set1_epi8(0x30);
    /* (mn 2p', mn 2p' + 1) of bytes (2p', 2p' + 1) of each dword, p' = p % 2 */
    const __m512i mctl0 = _mm512_set4_epi32((int)0x800d800cu, (int)0x80098008u,
                                            (int)0x80058004u, (int)0x80018000u);
    const __m512i mctl1 = _mm512_set4_epi32((int)0x800f800eu, (int)0x800b800au,
                                            (int)0x80078006u, (int)0x80038002u);
    const __m256i pad = _mm256_setzero_si256(); /* u = off = 0 */
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *src = w0 + (size_t)b * sizeof(ps_block_q4_k);
        uint8_t *dst = wp + b * pg->pb;
        pf_block(w0, row_bytes, b, sizeof(ps_block_q4_k));
        for (int j = 0; j < 4; j++) { /* q bytes 32 j .. 32 j + 31: chunks 2 j (low), 2 j + 1 */
            __m512i lo[8], hi[8];
            for (int k = 0; k < 8; k++) {
                const __m512i v = pair_rows(
                    k < nw ? src + (size_t)k * row_bytes + 16 + 32 * j : NULL,
                    k + 8 < nw ? src + (size_t)(k + 8) * row_bytes + 16 + 32 * j : NULL, pad);
                lo[k] = _mm512_and_si512(v, m4);
                hi[k] = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
            }
            transpose8_store(lo, dst + (2 * j) * 512);
            transpose8_store(hi, dst + (2 * j + 1) * 512);
        }
        const __m512i dd = gather_rows32(src, vidx, rows);
        const __m512i A = gather_rows32(src + 4, vidx, rows), B = gather_rows32(src + 8, vidx, rows),
                      C = gather_rows32(src + 12, vidx, rows);
        /* ggml's get_scale_min_k4 on 4 bytes at a time: sc 0-3, sc 4-7, mn 0-3, mn 4-7 */
        const __m512i sc0 = _mm512_and_si512(A, m6);
        const __m512i sc1 = _mm512_or_si512(_mm512_and_si512(C, m4),
                                            _mm512_and_si512(_mm512_srli_epi32(A, 2), m2));
        const __m512i mn0 = _mm512_and_si512(B, m6);
        const __m512i mn1 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(C, 4), m4),
                                            _mm512_and_si512(_mm512_srli_epi32(B, 2), m2));
        for (int k = 0; k < 4; k++) {
            _mm512_store_si512((void *)(dst + pg->sc + k * 64), sc_pairs_u8(sc0, k));
            _mm512_store_si512((void *)(dst + pg->sc + (k + 4) * 64), sc_pairs_u8(sc1, k));
        }
        _mm512_store_si512((void *)(dst + pg->mn + 0 * 64), _mm512_shuffle_epi8(mn0, mctl0));
        _mm512_store_si512((void *)(dst + pg->mn + 1 * 64), _mm512_shuffle_epi8(mn0, mctl1));
        _mm512_store_si512((void *)(dst + pg->mn + 2 * 64), _mm512_shuffle_epi8(mn1, mctl0));
        _mm512_store_si512((void *)(dst + pg->mn + 3 * 64), _mm512_shuffle_epi8(mn1, mctl1));
        _mm512_store_ps((void *)(dst + pg->dw), _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dd)));
        _mm512_store_ps((void *)(dst + pg->dm),
                        _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(dd, 16))));
    }
}

PS_TARGET_AVX512_VNNI static void pack_q6_k_vnni(const qpack *pg, const uint8_t *w0,
                                                 size_t row_bytes, int nw, int64_t nb,
                                                 uint8_t *wp) {
    const __mmask16 rows = (__mmask16)((1u << nw) - 1u);
    const __m512i vidx = row_offsets(row_bytes);
    const __m512i m4 = _mm512_set1_epi8(15), m3 = _mm512_set1_epi8(3),
                  lo16 = _mm512_set1_epi32(0xffff);
    /* rows past nw: u = off = 32 (w = 0), from ql nibbles 0 and qh fields 2 (0xaa) */
    const __m256i pad = _mm256_set1_epi8((char)0xaa);
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *src = w0 + (size_t)b * sizeof(ps_block_q6_k);
        uint8_t *dst = wp + b * pg->pb;
        pf_block(w0, row_bytes, b, sizeof(ps_block_q6_k));
        for (int h = 0; h < 2; h++) { /* ql 64 h .. 64 h + 63, qh 128 + 32 h: chunks 4 h .. 4 h + 3 */
            __m512i c0[8], c1[8], c2[8], c3[8];
            for (int k = 0; k < 8; k++) {
                const uint8_t *r0 = k < nw ? src + (size_t)k * row_bytes : NULL;
                const uint8_t *r1 = k + 8 < nw ? src + (size_t)(k + 8) * row_bytes : NULL;
                const __m512i l0 = pair_rows(r0 ? r0 + 64 * h : NULL, r1 ? r1 + 64 * h : NULL,
                                             _mm256_setzero_si256());
                const __m512i l1 = pair_rows(r0 ? r0 + 64 * h + 32 : NULL,
                                             r1 ? r1 + 64 * h + 32 : NULL, _mm256_setzero_si256());
                const __m512i qh = pair_rows(r0 ? r0 + 128 + 32 * h : NULL,
                                             r1 ? r1 + 128 + 32 * h : NULL, pad);
                c0[k] = _mm512_or_si512(_mm512_and_si512(l0, m4),
                                        _mm512_slli_epi16(_mm512_and_si512(qh, m3), 4));
                c1[k] = _mm512_or_si512(
                    _mm512_and_si512(l1, m4),
                    _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(qh, 2), m3), 4));
                c2[k] = _mm512_or_si512(
                    _mm512_and_si512(_mm512_srli_epi16(l0, 4), m4),
                    _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(qh, 4), m3), 4));
                c3[k] = _mm512_or_si512(
                    _mm512_and_si512(_mm512_srli_epi16(l1, 4), m4),
                    _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(qh, 6), m3), 4));
            }
            transpose8_store(c0, dst + (4 * h + 0) * 512);
            transpose8_store(c1, dst + (4 * h + 1) * 512);
            transpose8_store(c2, dst + (4 * h + 2) * 512);
            transpose8_store(c3, dst + (4 * h + 3) * 512);
        }
        for (int g = 0; g < 4; g++) { /* scales 4 g .. 4 g + 3 (int8) */
            const __m512i S = gather_rows32(src + 192 + 4 * g, vidx, rows);
            for (int c = 0; c < 4; c++) {
                const __m512i sx = _mm512_srai_epi32(_mm512_slli_epi32(S, 24 - 8 * c), 24);
                _mm512_store_si512((void *)(dst + pg->sc + (4 * g + c) * 64),
                                   _mm512_or_si512(_mm512_and_si512(sx, lo16),
                                                   _mm512_slli_epi32(sx, 24)));
            }
        }
        const __m512i dd = _mm512_srli_epi32(gather_rows32(src + 206, vidx, rows), 16);
        _mm512_store_ps((void *)(dst + pg->dw), _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dd)));
    }
}

/* The k-quant packers above, or NULL (the other 256-input types: ps_mmq_pack_tile_vnni). Test
 * builds: ps_test_mmq_pack_plain(true) turns them off, so that a test can compare them with
 * ps_mmq_pack_tile_vnni bit for bit. */
pack_b32_fn ps_mmq_pack_k_vnni_of(uint32_t type) {
#ifdef PS_TESTING
    if (atomic_load_explicit(&mmq_pack_plain, memory_order_relaxed)) return NULL;
#endif
    switch (type) {
    case PS_GGML_Q4_K: return pack_q4_k_vnni;
    case PS_GGML_Q6_K: return pack_q6_k_vnni;
    default: return NULL;
    }
}

/* ---- AVX-512 VNNI kernels ----
 * R activation rows (slot rows of sl) x the packed 16-row tile wp over nb blocks of QK inputs
 * in sub-blocks of SB; acc[r] lane i = output (r, i). SCALED: int32 sub-block scales; INIT:
 * sub-block sums start at -off x (activation sub-block sum); MINK 1: int16 mins x activation
 * sub-block sums (vpdpwssd), MINK 2: m x s (Q4_1 / Q5_1). */
PS_TARGET_AVX512_VNNI static inline __attribute__((always_inline)) void mk_vnni(
    int R, int QK, int SB, bool SCALED, int INIT, int MINK, const qpack *pg, const qslot *sl,
    int64_t r0, const uint8_t *wp, int64_t nb, float *y, int64_t ldy, __mmask16 m) {
    const int NS = QK / SB;
    const int64_t ldq = sl->ldq, ldi = sl->ldi, ldb = sl->ldb, ldd = sl->ldd;
    const int8_t *q = sl->q + r0 * ldq;
    const int32_t *init = sl->init + r0 * ldi;
    const int16_t *bs = sl->bs + r0 * ldb;
    const float *d = sl->d + r0 * ldd, *sx = sl->s + r0 * ldd;
    /* SCALED: each lane's sub-block sum t (|t| < 2^23) split into the int16 pair (t & 255,
     * t >> 8) — bytes [b0, 0, b1, b2] of t — against the packed pair (sc, 256 sc), |sc| <= 128:
     * vpdpwssd adds (t & 255) sc + (t >> 8) 256 sc = sc t, the int32 of vpmulld (two port-0
     * uops) + vpaddd, so the same exact isum. */
    const __m512i split = _mm512_set4_epi32((int)0x0e0d800cu, (int)0x0a098008u,
                                            (int)0x06058004u, (int)0x02018000u);
    __m512 acc[8];
    _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) acc[r] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *wb = wp + b * pg->pb;
        __m512i is[8], t[8];
        _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) is[r] = _mm512_setzero_si512();
        for (int s = 0; s < NS; s++) {
            const __m512i cw = INIT == 2 ? _mm512_load_si512((const void *)(wb + pg->mn))
                                         : _mm512_setzero_si512();
            _Pragma("GCC unroll 8") for (int r = 0; r < R; r++)
                t[r] = INIT == 1 ? _mm512_set1_epi32(init[r * ldi + b * NS + s]) : cw;
            _Pragma("GCC unroll 8") for (int g = 0; g < SB / 4; g++) {
                const __m512i wv = _mm512_load_si512((const void *)(wb + (s * (SB / 4) + g) * 64));
                _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) {
                    int32_t xv;
                    memcpy(&xv, q + r * ldq + b * QK + s * SB + 4 * g, 4);
                    t[r] = INIT == 2 ? _mm512_dpbusd_epi32(t[r], _mm512_set1_epi32(xv), wv)
                                     : _mm512_dpbusd_epi32(t[r], wv, _mm512_set1_epi32(xv));
                }
            }
            if (SCALED) { /* is += sc x t, exactly, by one vpshufb (port 5) + one vpdpwssd */
                const __m512i sc = _mm512_load_si512((const void *)(wb + pg->sc + s * 64));
                _Pragma("GCC unroll 8") for (int r = 0; r < R; r++)
                    is[r] = _mm512_dpwssd_epi32(is[r], _mm512_shuffle_epi8(t[r], split), sc);
            } else {
                _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) is[r] = t[r];
            }
        }
        const __m512 dw = _mm512_load_ps((const void *)(wb + pg->dw));
        _Pragma("GCC unroll 8") for (int r = 0; r < R; r++)
            acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is[r]),
                                     _mm512_mul_ps(dw, _mm512_set1_ps(d[r * ldd + b])), acc[r]);
        if (MINK == 1) {
            _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) t[r] = _mm512_setzero_si512();
            _Pragma("GCC unroll 8") for (int p = 0; p < NS / 2; p++) {
                const __m512i mv = _mm512_load_si512((const void *)(wb + pg->mn + p * 64));
                _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) {
                    int32_t xv;
                    memcpy(&xv, bs + r * ldb + b * NS + 2 * p, 4);
                    t[r] = _mm512_dpwssd_epi32(t[r], mv, _mm512_set1_epi32(xv));
                }
            }
            const __m512 dm = _mm512_load_ps((const void *)(wb + pg->dm));
            _Pragma("GCC unroll 8") for (int r = 0; r < R; r++)
                acc[r] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(t[r]),
                                          _mm512_mul_ps(dm, _mm512_set1_ps(d[r * ldd + b])),
                                          acc[r]);
        } else if (MINK == 2) {
            const __m512 dm = _mm512_load_ps((const void *)(wb + pg->dm));
            _Pragma("GCC unroll 8") for (int r = 0; r < R; r++)
                acc[r] = _mm512_fmadd_ps(dm, _mm512_set1_ps(sx[r * ldd + b]), acc[r]);
        }
    }
    _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) _mm512_mask_storeu_ps(y + r * ldy, m, acc[r]);
}

/* The paired form (qd->cl = CL) for Q3_K and Q2_K: every sub-block sum (CL = 16 inputs) fits
 * int16 (16 x 4 x 127), so the sums of sub-blocks 2p and 2p + 1 are put side by side as the
 * int16 halves of each lane (vpermt2w, port 5) and one vpdpwssd multiplies both by their
 * scales (int16 pairs) and adds them to isum: one vpdpwssd per two sub-blocks instead of one
 * per sub-block. The same exact int32 isum, so the same bits as every other path. Tried on
 * Q6_K (halves of 8, 8 x 32 x 127) and Q4_K (halves of 16, 16 x 15 x 127) too: slower there
 * (twice the start-value broadcasts, register spills), so they keep the one-sub-block form
 * (mk_vnni). Timings: docs/kernels.md, "Measured choices of the integer kernels". */
PS_TARGET_AVX512_VNNI static inline __attribute__((always_inline)) void mkp_vnni(
    int R, int QK, int SB, int CL, bool INIT, int MINK, const qpack *pg, const qslot *sl,
    int64_t r0, const uint8_t *wp, int64_t nb, float *y, int64_t ldy, __mmask16 m) {
    const int NS = QK / SB, NC = QK / CL, G = CL / 4;
    const int64_t ldq = sl->ldq, ldi = sl->ldi, ldb = sl->ldb, ldd = sl->ldd;
    const int8_t *q = sl->q + r0 * ldq;
    const int32_t *init = sl->init + r0 * ldi;
    const int16_t *bs = sl->bs + r0 * ldb;
    const float *d = sl->d + r0 * ldd;
    /* word 2i: word 2i of the first chain's lane i, word 2i + 1: the same of the second */
    static const int16_t pick[32] = {0,  32, 2,  34, 4,  36, 6,  38, 8,  40, 10, 42, 12, 44, 14, 46,
                                     16, 48, 18, 50, 20, 52, 22, 54, 24, 56, 26, 58, 28, 60, 30, 62};
    const __m512i idx = _mm512_loadu_si512((const void *)pick);
    __m512 acc[8];
    _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) acc[r] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *wb = wp + b * pg->pb;
        __m512i is[8];
        _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) is[r] = _mm512_setzero_si512();
        for (int p = 0; p < NC / 2; p++) {
            __m512i wv[8];
            _Pragma("GCC unroll 8") for (int g = 0; g < 2 * G; g++)
                wv[g] = _mm512_load_si512((const void *)(wb + (2 * p * G + g) * 64));
            const __m512i sc = _mm512_load_si512((const void *)(wb + pg->sc + p * 64));
            _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) {
                const int8_t *qr = q + r * ldq + b * QK + 2 * p * CL;
                __m512i h[2];
                _Pragma("GCC unroll 2") for (int c = 0; c < 2; c++) {
                    h[c] = INIT ? _mm512_set1_epi32(init[r * ldi + b * NC + 2 * p + c])
                                : _mm512_setzero_si512();
                    _Pragma("GCC unroll 4") for (int g = 0; g < G; g++) {
                        int32_t xv;
                        memcpy(&xv, qr + c * CL + 4 * g, 4);
                        h[c] = _mm512_dpbusd_epi32(h[c], wv[c * G + g], _mm512_set1_epi32(xv));
                    }
                }
                is[r] = _mm512_dpwssd_epi32(is[r], _mm512_permutex2var_epi16(h[0], idx, h[1]), sc);
            }
        }
        const __m512 dw = _mm512_load_ps((const void *)(wb + pg->dw));
        _Pragma("GCC unroll 8") for (int r = 0; r < R; r++)
            acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is[r]),
                                     _mm512_mul_ps(dw, _mm512_set1_ps(d[r * ldd + b])), acc[r]);
        if (MINK == 1) {
            __m512i t[8];
            _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) t[r] = _mm512_setzero_si512();
            _Pragma("GCC unroll 8") for (int p = 0; p < NS / 2; p++) {
                const __m512i mv = _mm512_load_si512((const void *)(wb + pg->mn + p * 64));
                _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) {
                    int32_t xv;
                    memcpy(&xv, bs + r * ldb + b * NS + 2 * p, 4);
                    t[r] = _mm512_dpwssd_epi32(t[r], mv, _mm512_set1_epi32(xv));
                }
            }
            const __m512 dm = _mm512_load_ps((const void *)(wb + pg->dm));
            _Pragma("GCC unroll 8") for (int r = 0; r < R; r++)
                acc[r] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(t[r]),
                                          _mm512_mul_ps(dm, _mm512_set1_ps(d[r * ldd + b])),
                                          acc[r]);
        }
    }
    _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) _mm512_mask_storeu_ps(y + r * ldy, m, acc[r]);
}

/* The last 1..7 rows of a slot in passes of 4, 2 and 1 (its binary digits): each row's sums
 * are its own chains in every form, so the forms change no bit, but 7 rows in 3 passes (4 + 2
 * + 1) keep more vpdpbusd chains in flight than the 4 + 1 + 1 + 1 of forms 8 / 4 / 1, where
 * each one-row pass is a single chain waiting on vpdpbusd's latency (an expert's ~8 rows per
 * chunk are rarely a multiple of 4). One form per count 1..7 ran a little faster still, but
 * took clang's sanitized fuzzing build 6 minutes on this file: docs/kernels.md, "Measured
 * choices of the integer kernels". */
#define VNNI_TAIL(MK, ...)                                                                     \
    do {                                                                                       \
        if ((nr - r) & 4) { MK(4, __VA_ARGS__); r += 4; }                                      \
        if ((nr - r) & 2) { MK(2, __VA_ARGS__); r += 2; }                                      \
        if ((nr - r) & 1) MK(1, __VA_ARGS__);                                                  \
    } while (0)

#define VNNI_MKP(NAME, SB, CL, IN, MK)                                                         \
    PS_TARGET_AVX512_VNNI static void NAME(const qpack *pg, const qslot *sl, int64_t nr, const uint8_t *wp,   \
                            int64_t nb, float *y, int64_t ldy, __mmask16 m) {                  \
        int64_t r = 0;                                                                         \
        for (; r + 8 <= nr; r += 8) mkp_vnni(8, 256, SB, CL, IN, MK, pg, sl, r, wp, nb, y + r * ldy, ldy, m); \
        VNNI_TAIL(mkp_vnni, 256, SB, CL, IN, MK, pg, sl, r, wp, nb, y + r * ldy, ldy, m); \
    }
VNNI_MKP(vnnip_q3_k, 16, 16, true, 0)  /* Q3_K: two sub-blocks */
VNNI_MKP(vnnip_q2_k, 16, 16, false, 1) /* Q2_K: two sub-blocks */

/* One tile x the nr rows of one slot: passes of 8 rows, then of 4, 2 and 1 (VNNI_TAIL). */
#define VNNI_MK(NAME, QK, SB, SC, IN, MK)                                                      \
    PS_TARGET_AVX512_VNNI static void NAME(const qpack *pg, const qslot *sl, int64_t nr, const uint8_t *wp,   \
                            int64_t nb, float *y, int64_t ldy, __mmask16 m) {                  \
        int64_t r = 0;                                                                         \
        for (; r + 8 <= nr; r += 8) mk_vnni(8, QK, SB, SC, IN, MK, pg, sl, r, wp, nb, y + r * ldy, ldy, m); \
        VNNI_TAIL(mk_vnni, QK, SB, SC, IN, MK, pg, sl, r, wp, nb, y + r * ldy, ldy, m); \
    }
VNNI_MK(vnni_k32_min, 256, 32, true, false, 1)  /* Q4_K, Q5_K */
VNNI_MK(vnni_k32_off, 256, 32, true, true, 0)   /* IQ4_XS */
VNNI_MK(vnni_k16_min, 256, 16, true, false, 1)  /* Q2_K */
VNNI_MK(vnni_k16_off, 256, 16, true, true, 0)   /* Q3_K, Q6_K */
VNNI_MK(vnni_b32_off, 32, 32, false, true, 0)   /* Q4_0, Q5_0, Q8_0, IQ4_NL, MXFP4 */
VNNI_MK(vnni_b32_fmin, 32, 32, false, false, 2) /* Q4_1, Q5_1 */
VNNI_MK(vnni_b32_x, 32, 32, false, 2, 0)        /* Q8_0 (qdesc.xact) */

/* Q4_K's nibble tile copy (matmul_quant.h, PS_Q4X_REC): vnni_k32_min's arithmetic with the
 * packed tile's pieces formed in registers: group g of sub-block s is the low (s even) or high
 * (s odd) nibbles of vector 8 (s / 2) + g; the (sc, 256 sc) pairs are the scale bytes widened
 * to dwords, sc | sc << 24 (sc_pairs_u8's bytes); the min pairs the min bytes widened to
 * words; dw and dm the f16 factors widened. The same integers and floats in the same order,
 * so the same bits. The kernel streams the copy from memory where a packed tile had just been
 * built in the cache: each sub-block asks for 5 lines of the record Q4X_PF records ahead (37
 * lines a record), into the L2 (distances 1, 2 and 4 and the L1: docs/kernels.md). */
#define Q4X_PF 4
#define Q4X_LOC 2
PS_TARGET_AVX512_VNNI static inline __attribute__((always_inline)) void mk_q4x(
    int R, const qslot *sl, int64_t r0, const uint8_t *wp, int64_t nb, float *y, int64_t ldy,
    __mmask16 m) {
    const int64_t ldq = sl->ldq, ldb = sl->ldb, ldd = sl->ldd;
    const int8_t *q = sl->q + r0 * ldq;
    const int16_t *bs = sl->bs + r0 * ldb;
    const float *d = sl->d + r0 * ldd;
    const __m512i split = _mm512_set4_epi32((int)0x0e0d800cu, (int)0x0a098008u,
                                            (int)0x06058004u, (int)0x02018000u);
    const __m512i m4 = _mm512_set1_epi8(15);
    __m512 acc[8];
    _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) acc[r] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *wb = wp + b * PS_Q4X_REC;
        __m512i is[8], t[8];
        _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) is[r] = _mm512_setzero_si512();
        for (int s = 0; s < 8; s++) {
            for (int k = 0; k < 5; k++)
                __builtin_prefetch(wb + Q4X_PF * PS_Q4X_REC + (5 * s + k) * 64, 0, Q4X_LOC);
            _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) t[r] = _mm512_setzero_si512();
            _Pragma("GCC unroll 8") for (int g = 0; g < 8; g++) {
                const __m512i v = _mm512_load_si512((const void *)(wb + ((s / 2) * 8 + g) * 64));
                const __m512i wv = _mm512_and_si512(s & 1 ? _mm512_srli_epi16(v, 4) : v, m4);
                _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) {
                    int32_t xv;
                    memcpy(&xv, q + r * ldq + b * 256 + s * 32 + 4 * g, 4);
                    t[r] = _mm512_dpbusd_epi32(t[r], wv, _mm512_set1_epi32(xv));
                }
            }
            __m512i sc = _mm512_cvtepu8_epi32(
                _mm_loadu_si128((const __m128i *)(wb + PS_Q4X_SC + 16 * s)));
            sc = _mm512_or_si512(sc, _mm512_slli_epi32(sc, 24));
            _Pragma("GCC unroll 8") for (int r = 0; r < R; r++)
                is[r] = _mm512_dpwssd_epi32(is[r], _mm512_shuffle_epi8(t[r], split), sc);
        }
        const __m512 dw =
            _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(wb + PS_Q4X_D)));
        _Pragma("GCC unroll 8") for (int r = 0; r < R; r++)
            acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is[r]),
                                     _mm512_mul_ps(dw, _mm512_set1_ps(d[r * ldd + b])), acc[r]);
        _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) t[r] = _mm512_setzero_si512();
        _Pragma("GCC unroll 4") for (int p = 0; p < 4; p++) {
            const __m512i mv = _mm512_cvtepu8_epi16(
                _mm256_loadu_si256((const __m256i *)(wb + PS_Q4X_MN + 32 * p)));
            _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) {
                int32_t xv;
                memcpy(&xv, bs + r * ldb + b * 8 + 2 * p, 4);
                t[r] = _mm512_dpwssd_epi32(t[r], mv, _mm512_set1_epi32(xv));
            }
        }
        const __m512 dm =
            _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(wb + PS_Q4X_D + 32)));
        _Pragma("GCC unroll 8") for (int r = 0; r < R; r++)
            acc[r] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(t[r]),
                                      _mm512_mul_ps(dm, _mm512_set1_ps(d[r * ldd + b])), acc[r]);
    }
    _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) _mm512_mask_storeu_ps(y + r * ldy, m, acc[r]);
}

/* A copy's kernel over the nr rows of one slot: passes of 8 rows, then of 4, 2 and 1. */
#define VNNI_COPY(NAME, MK)                                                                    \
    PS_TARGET_AVX512_VNNI void NAME(const qpack *pg, const qslot *sl, int64_t nr,              \
                                    const uint8_t *wp, int64_t nb, float *y, int64_t ldy,      \
                                    __mmask16 m) {                                             \
        (void)pg;                                                                              \
        int64_t r = 0;                                                                         \
        for (; r + 8 <= nr; r += 8) MK(8, sl, r, wp, nb, y + r * ldy, ldy, m);                  \
        VNNI_TAIL(MK, sl, r, wp, nb, y + r * ldy, ldy, m);                                     \
    }
VNNI_COPY(ps_mmq_vnni_q4x, mk_q4x)

/* Q6_K's tile copy (matmul_quant.h, PS_Q6X_REC): vnni_k16_off's arithmetic (start values
 * -32 x the activation sub-block sum, (sc, 256 sc) pairs, one vpdpwssd per sub-block) with the
 * packed tile's group vectors formed in registers. Group g of sub-block s (inputs 16 s + 4 g ..
 * + 3; half h = s / 8, 32-input chunk c = (s / 2) % 4 of it): the low nibbles (c < 2) or high
 * nibbles (c >= 2) of ql vector 16 h + 8 (c % 2) + 4 (s % 2) + g, or-ed with bits 2c, 2c + 1 of
 * qh vector 8 h + 4 (s % 2) + g moved to bits 4, 5 (a 16-bit shift: the and keeps the bits of
 * each byte's own). The same integers and floats in the same order, so the same bits. */
#define Q6X_PF 4
PS_TARGET_AVX512_VNNI static inline __attribute__((always_inline)) void mk_q6x(
    int R, const qslot *sl, int64_t r0, const uint8_t *wp, int64_t nb, float *y, int64_t ldy,
    __mmask16 m) {
    const int64_t ldq = sl->ldq, ldi = sl->ldi, ldd = sl->ldd;
    const int8_t *q = sl->q + r0 * ldq;
    const int32_t *init = sl->init + r0 * ldi;
    const float *d = sl->d + r0 * ldd;
    const __m512i split = _mm512_set4_epi32((int)0x0e0d800cu, (int)0x0a098008u,
                                            (int)0x06058004u, (int)0x02018000u);
    const __m512i m4 = _mm512_set1_epi8(15), m30 = _mm512_set1_epi8(0x30),
                  lo16 = _mm512_set1_epi32(0xffff);
    __m512 acc[8];
    _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) acc[r] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *wb = wp + b * PS_Q6X_REC;
        __m512i is[8], t[8];
        _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) is[r] = _mm512_setzero_si512();
        _Pragma("GCC unroll 16") for (int s = 0; s < 16; s++) {
            for (int k = 0; k < 4; k++)
                if (4 * s + k < (PS_Q6X_REC + 63) / 64)
                    __builtin_prefetch(wb + Q6X_PF * PS_Q6X_REC + (4 * s + k) * 64, 0, Q4X_LOC);
            const int h = s / 8, c = (s / 2) % 4;
            _Pragma("GCC unroll 8") for (int r = 0; r < R; r++)
                t[r] = _mm512_set1_epi32(init[r * ldi + b * 16 + s]);
            _Pragma("GCC unroll 4") for (int g = 0; g < 4; g++) {
                const __m512i v = _mm512_load_si512(
                    (const void *)(wb + (16 * h + 8 * (c % 2) + 4 * (s % 2) + g) * 64));
                const __m512i u = _mm512_load_si512(
                    (const void *)(wb + PS_Q6X_QH + (8 * h + 4 * (s % 2) + g) * 64));
                const __m512i lo = _mm512_and_si512(c >= 2 ? _mm512_srli_epi16(v, 4) : v, m4);
                const __m512i hu = c == 0   ? _mm512_slli_epi16(u, 4)
                                   : c == 1 ? _mm512_slli_epi16(u, 2)
                                   : c == 2 ? u
                                            : _mm512_srli_epi16(u, 2);
                const __m512i wv = _mm512_or_si512(lo, _mm512_and_si512(hu, m30));
                _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) {
                    int32_t xv;
                    memcpy(&xv, q + r * ldq + b * 256 + s * 16 + 4 * g, 4);
                    t[r] = _mm512_dpbusd_epi32(t[r], wv, _mm512_set1_epi32(xv));
                }
            }
            const __m512i sx = _mm512_cvtepi8_epi32(
                _mm_loadu_si128((const __m128i *)(wb + PS_Q6X_SC + 16 * s)));
            const __m512i sc = _mm512_or_si512(_mm512_and_si512(sx, lo16),
                                               _mm512_slli_epi32(sx, 24));
            _Pragma("GCC unroll 8") for (int r = 0; r < R; r++)
                is[r] = _mm512_dpwssd_epi32(is[r], _mm512_shuffle_epi8(t[r], split), sc);
        }
        const __m512 dw =
            _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(wb + PS_Q6X_D)));
        _Pragma("GCC unroll 8") for (int r = 0; r < R; r++)
            acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is[r]),
                                     _mm512_mul_ps(dw, _mm512_set1_ps(d[r * ldd + b])), acc[r]);
    }
    _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) _mm512_mask_storeu_ps(y + r * ldy, m, acc[r]);
}

VNNI_COPY(ps_mmq_vnni_q6x, mk_q6x)

vnni_tile_fn ps_mmq_vnni_fn(const qdesc *qd, bool xact) {
    if (xact) return vnni_b32_x;
    switch (qd->type) {
    case PS_GGML_Q3_K: return vnnip_q3_k;
    case PS_GGML_Q2_K: return vnnip_q2_k;
    default: break;
    }
    if (qd->qk == 32) return qd->min == MIN_FLOAT ? vnni_b32_fmin : vnni_b32_off;
    if (qd->sb == 32) return qd->min == MIN_INT ? vnni_k32_min : vnni_k32_off;
    return qd->min == MIN_INT ? vnni_k16_min : vnni_k16_off;
}

/* ---- the vpdpbusd peak (ps_i8_peak_gops) ---- */

#define I8_PEAK_ACC 16 /* independent chains: 2 per cycle x ~5 cycles latency, with room */

/* iters x I8_PEAK_ACC vpdpbusd on registers (sixteen named accumulators); returns a sum so
 * that nothing is optimised away */
PS_TARGET_AVX512_VNNI static int32_t i8_peak_chain(int64_t iters) {
    /* sixteen different start values: equal chains would be folded into one */
#define I8_START(i) _mm512_set1_epi32(i)
    __m512i a0 = I8_START(0), a1 = I8_START(1), a2 = I8_START(2), a3 = I8_START(3),
            a4 = I8_START(4), a5 = I8_START(5), a6 = I8_START(6), a7 = I8_START(7),
            a8 = I8_START(8), a9 = I8_START(9), a10 = I8_START(10), a11 = I8_START(11),
            a12 = I8_START(12), a13 = I8_START(13), a14 = I8_START(14), a15 = I8_START(15);
#undef I8_START
    __m512i x = _mm512_set1_epi8(1), w = _mm512_set1_epi8(1);
    /* asm blocks of eight: written in C, GCC 12 moves the sixteen chains between registers
     * and the stack on every pass (an asm takes at most 30 operands, "+v" counts twice) */
#define I8_DP8(a, b, c, d, e, f, g, h)                                                         \
    __asm__ volatile("vpdpbusd %[w], %[x], %[p0]\n\tvpdpbusd %[w], %[x], %[p1]\n\t"            \
                     "vpdpbusd %[w], %[x], %[p2]\n\tvpdpbusd %[w], %[x], %[p3]\n\t"            \
                     "vpdpbusd %[w], %[x], %[p4]\n\tvpdpbusd %[w], %[x], %[p5]\n\t"            \
                     "vpdpbusd %[w], %[x], %[p6]\n\tvpdpbusd %[w], %[x], %[p7]"                 \
                     : [p0] "+v"(a), [p1] "+v"(b), [p2] "+v"(c), [p3] "+v"(d), [p4] "+v"(e),    \
                       [p5] "+v"(f), [p6] "+v"(g), [p7] "+v"(h)                                 \
                     : [x] "v"(x), [w] "v"(w))
    for (int64_t i = 0; i < iters; i++) {
        I8_DP8(a0, a1, a2, a3, a4, a5, a6, a7);
        I8_DP8(a8, a9, a10, a11, a12, a13, a14, a15);
    }
#undef I8_DP8
    a0 = _mm512_add_epi32(_mm512_add_epi32(_mm512_add_epi32(a0, a1), _mm512_add_epi32(a2, a3)),
                          _mm512_add_epi32(_mm512_add_epi32(a4, a5), _mm512_add_epi32(a6, a7)));
    a8 = _mm512_add_epi32(_mm512_add_epi32(_mm512_add_epi32(a8, a9), _mm512_add_epi32(a10, a11)),
                          _mm512_add_epi32(_mm512_add_epi32(a12, a13), _mm512_add_epi32(a14, a15)));
    return _mm512_reduce_add_epi32(_mm512_add_epi32(a0, a8));
}

typedef struct {
    int64_t iters;
    uint32_t sink[64]; /* keeps the chains live; wraps, as unsigned sums may */
} i8_peak_job;

static void i8_peak_task(void *ctx, int64_t task, int32_t thread) {
    i8_peak_job *job = ctx;
    job->sink[thread & 63] += (uint32_t)i8_peak_chain(job->iters);
    (void)task;
}

static double i8_peak_clock(bool cpu) { return cpu ? ps_cpu_s() : ps_now_s(); }

double ps_i8_peak_gops(ps_pool *pool, double seconds, bool cpu_clock) {
    if (!ps_cpu_has_avx512vnni()) return 0;
    const int32_t threads = ps_pool_size(pool);
    /* as ps_bf16_peak_gflops: many ~1 ms tasks per thread, the first pass sizes them */
    i8_peak_job job = {.iters = 4096};
    double t0 = i8_peak_clock(cpu_clock);
    ps_pool_for(pool, threads, i8_peak_task, &job);
    double dt = PS_MAX(i8_peak_clock(cpu_clock) - t0, 1e-6);
    const double per_s = (double)job.iters * threads / dt;
    job.iters = PS_MAX((int64_t)(per_s / threads * 1e-3), (int64_t)256);
    const int64_t tasks = PS_MAX((int64_t)(seconds * per_s / (double)job.iters), (int64_t)threads);
    t0 = i8_peak_clock(cpu_clock);
    ps_pool_for(pool, tasks, i8_peak_task, &job);
    dt = PS_MAX(i8_peak_clock(cpu_clock) - t0, 1e-9);
    /* 64 u8 x s8 products per instruction, each a multiply and an add */
    return (double)tasks * (double)job.iters * I8_PEAK_ACC * 128.0 / dt * 1e-9;
}

#else
double ps_i8_peak_gops(ps_pool *pool, double seconds, bool cpu_clock) {
    (void)pool, (void)seconds, (void)cpu_clock;
    return 0;
}
#endif /* __x86_64__ */
