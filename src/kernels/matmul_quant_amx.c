/*
 * matmul_quant_amx.c — the weight side of the integer matmul's AMX path (K_AMX in
 * matmul_quant.c; matmul_quant_isa.h declares what it gives): each task's 16 weight rows
 * packed block by block into the A tile layout of matmul_amx.c (ps_amx_q_pack_block), whose
 * ps_amx_q_rows then forms the exact int32 sums with tdpbssd / tdpbusd.
 *
 * The blocks of 32 (legacy, IQ4_NL, MXFP4) go straight from the rows into the layout in
 * registers (pack_b32_amx, AVX-512 code: the AMX CPUs have it); the 256-input types are decoded
 * by the table's decoders and the AVX2 u bytes (ps_mmq_ufast) and packed by
 * ps_amx_q_pack_block. Both give the same bytes, so AMX gives the VNNI bits.
 */
#include "kernels/matmul_quant_isa.h"

#if defined(__x86_64__)

/* K_AMX, the 32-input types: the A tile layout of ps_amx_q_pack_block (block b at b x bb:
 * row i's 32 bytes u - off at 32 i, then 16 float dw and, has_m, 16 float m) straight from the
 * rows, as matmul_quant_avx512.c's pack_b32_vnni decodes them (u32_of, one vcvtph2ps for the
 * scales): the same bytes as decode + ps_mmq_ufast + ps_amx_q_pack_block (test_matmul_quant:
 * AMX bitwise VNNI) without the trip through ps_amx_qdec. */
PS_TARGET_AVX512_VNNI static inline __attribute__((always_inline)) void pack_b32_amx(
    uint32_t type, int off, bool has_m, const uint8_t *w0, size_t row_bytes, int nw, int64_t nb,
    size_t bytes, size_t bb, uint8_t *wp) {
    const __m256i o = _mm256_set1_epi8((char)off);
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *src = w0 + (size_t)b * bytes;
        uint8_t *dst = wp + (size_t)b * bb;
        uint16_t dh[16] = {0}, mh[16] = {0};
        for (int i = 0; i < QT; i++) {
            __m256i r = _mm256_setzero_si256(); /* rows past nw: u = off, so u - off = 0 */
            if (i < nw) {
                const uint8_t *blk = src + (size_t)i * row_bytes;
                r = _mm256_sub_epi8(u32_of(type, blk), o);
                dh[i] = rd16(blk);
                if (has_m) mh[i] = rd16(blk + 2);
            }
            _mm256_store_si256((__m256i *)(dst + 32 * i), r);
        }
        if (type == PS_GGML_MXFP4) {
            float *dwv = (float *)(dst + 512);
            for (int i = 0; i < QT; i++) dwv[i] = i < nw ? e8m0_half((uint8_t)dh[i]) : 0.0f;
        } else {
            _mm512_store_ps((void *)(dst + 512),
                            _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)dh)));
        }
        if (has_m)
            _mm512_store_ps((void *)(dst + 576),
                            _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)mh)));
    }
}

#define PACK_B32_AMX(NAME, TYPE, OFF, HM, BYTES)                                               \
    PS_TARGET_AVX512_VNNI static void NAME(const uint8_t *w0, size_t row_bytes, int nw, int64_t nb,           \
                            uint8_t *wp) {                                                     \
        pack_b32_amx(TYPE, OFF, HM, w0, row_bytes, nw, nb, BYTES, 576 + (HM ? 64 : 0), wp);    \
    }
PACK_B32_AMX(pack_q4_0_amx, PS_GGML_Q4_0, 8, false, sizeof(ps_block_q4_0))
PACK_B32_AMX(pack_q4_1_amx, PS_GGML_Q4_1, 0, true, sizeof(ps_block_q4_1))
PACK_B32_AMX(pack_q5_0_amx, PS_GGML_Q5_0, 16, false, sizeof(ps_block_q5_0))
PACK_B32_AMX(pack_q5_1_amx, PS_GGML_Q5_1, 0, true, sizeof(ps_block_q5_1))
PACK_B32_AMX(pack_q8_0_amx, PS_GGML_Q8_0, 128, false, sizeof(ps_block_q8_0))
PACK_B32_AMX(pack_iq4_nl_amx, PS_GGML_IQ4_NL, 128, false, sizeof(ps_block_iq4_nl))
PACK_B32_AMX(pack_mxfp4_amx, PS_GGML_MXFP4, 12, false, sizeof(ps_block_mxfp4))

pack_amx_fn ps_mmq_pack_b32_amx_of(uint32_t type) {
    switch (type) {
    case PS_GGML_Q4_0: return pack_q4_0_amx;
    case PS_GGML_Q4_1: return pack_q4_1_amx;
    case PS_GGML_Q5_0: return pack_q5_0_amx;
    case PS_GGML_Q5_1: return pack_q5_1_amx;
    case PS_GGML_Q8_0: return pack_q8_0_amx;
    case PS_GGML_IQ4_NL: return pack_iq4_nl_amx;
    case PS_GGML_MXFP4: return pack_mxfp4_amx;
    default: return NULL;
    }
}

/* K_AMX: the 16-row tile decoded block by block and packed (ps_amx_q_pack_block). Rows past
 * nw: u = off, zero scales and floats, set once; the decoders write every scale (and min) the
 * packer reads of the other rows. */
void ps_mmq_pack_tile_amx(const qdesc *qd, const ps_amx_qgeom *ag, const uint8_t *w0,
                          size_t row_bytes, int nw, int64_t nb, uint8_t *wp) {
    const ufast_fn uf = ps_mmq_ufast(qd->type);
    const size_t bb = ps_amx_q_block_bytes(ag);
    ps_amx_qdec dec;
    memset(dec.sc, 0, sizeof dec.sc);
    memset(dec.mn, 0, sizeof dec.mn);
    for (int i = nw; i < QT; i++) {
        memset(dec.u[i], qd->off, (size_t)qd->qk);
        dec.dw[i] = dec.dm[i] = 0.0f;
    }
    for (int64_t b = 0; b < nb; b++) {
        for (int i = 0; i < nw; i++) {
            const uint8_t *blk = w0 + (size_t)i * row_bytes + (size_t)b * (size_t)qd->bytes;
            qd->decode(blk, NULL, dec.sc[i], dec.mn[i], &dec.dw[i], &dec.dm[i]);
            uf(blk, dec.u[i]);
        }
        ps_amx_q_pack_block(ag, &dec, wp + (size_t)b * bb);
    }
}

#endif /* __x86_64__ */
