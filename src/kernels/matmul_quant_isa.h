/*
 * matmul_quant_isa.h — what the files of the integer matmul share (private to them):
 * matmul_quant.c (the type table, the decoders, the scalar kernel and the driver),
 * matmul_quant_avx2.c (the AVX2 packing and kernels), matmul_quant_avx512.c (the AVX-512 VNNI
 * packers and kernels) and matmul_quant_amx.c (the packing of the AMX A tiles).
 *
 * Here: a type's table row (qdesc), the layout of a packed 16-row weight tile (qpack) and of a
 * thread's slot of quantised activation rows (qslot), the byte readers the decoders and the
 * packers both use, the AVX2 decoding of a block of 32 into its u bytes (u32_of, inlined by
 * the AVX2 and the AVX-512 packers alike), and the entry points each ISA file gives the driver.
 * The arithmetic every path performs is matmul_quant.h's; matmul_quant.c says how the kernels
 * reach it.
 */
#ifndef PS_MATMUL_QUANT_ISA_H
#define PS_MATMUL_QUANT_ISA_H

#include "kernels/mat.h"
#include "kernels/matmul_amx.h"
#include "kernels/dequant.h"
#include "kernels/qblocks.h"
#include "base/simd.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#define QT 16             /* weight rows per tile */
#define QROWS PS_CHUNK    /* quantised activation rows per thread slot */

typedef enum { ACT_Q8_0, ACT_Q8_1, ACT_Q8_K } act_kind;
typedef enum { MIN_NONE, MIN_INT, MIN_FLOAT } min_kind;

/* blk -> u[qk] (w + off), sc[ns], mn[ns], dw, dm. */
typedef void (*decode_fn)(const uint8_t *blk, uint8_t *u, int32_t *sc, int16_t *mn, float *dw,
                          float *dm);

typedef struct {
    uint32_t type;
    int qk, sb, off;
    int cl; /* VNNI: partial sums of cl inputs fit int16, so two of them are paired into one
             * vpdpwssd with the scales (0: no pairing, vpmulld per sub-block) */
    act_kind act;
    min_kind min;
    bool scaled;
    int bytes;
    decode_fn decode;
    int amx_bias; /* AMX, 256 inputs: -1, or a bias putting every p = sc x (u - off) in 0..255
                   * (one byte plane, ps_amx_qgeom): Q2_K sc 0..15 x u 0..3 = 0..45; Q3_K
                   * sc -32..31 x w -4..3 = -124..128, + 124 = 0..252 */
    ps_row_to_f32_fn to_f32; /* ggml's dequantisation (dequant.c): ps_mmq_ref's weights */
    bool xact; /* VNNI, 32 inputs, off 128: the roles of vpdpbusd's operands swapped — the
                * activations stored as q + 128 (unsigned), the weights as w = u - 128 (signed)
                * with a start value -128 x (the block's weight sum) per weight row in the tile,
                * loaded once per block for all the rows, instead of one per activation row
                * and block */
} qdesc;

/* Packed bytes per block of a 16-row tile and the offsets inside it. */
typedef struct {
    int pb, sc, mn, dw, dm;
} qpack;

/* One thread slot of quantised activation rows: q (int8, ldq bytes apart), init (int32, -off x
 * sub-block sums), bs (int16, sub-block sums), d and s (floats, per block). */
typedef struct {
    int8_t *q;
    int32_t *init;
    int16_t *bs;
    float *d, *s;
    int64_t ldq, ldi, ldb, ldd;
} qslot;

/* The u bytes of one block (the decoder's u) with AVX2: ps_mmq_ufast of matmul_quant_avx2.c. */
typedef void (*ufast_fn)(const uint8_t *blk, uint8_t *u);

static inline uint16_t rd16(const uint8_t *p) {
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}
static inline uint32_t rd32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}
static inline float f16at(const uint8_t *p) { return ps_f16_to_f32(rd16(p)); }

/* E8M0 x 0.5 (ggml_e8m0_to_fp32_half): 2^(e - 128). */
static inline float e8m0_half(uint8_t e) {
    const uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* Decodes block b of the nw rows (rows past nw: zeros) into tmp (16 rows of qk bytes, the u
 * bytes by uf when given, else by the decoder) and the tile's scale, min and float slots at
 * dst; cl picks the layout of the scales (matmul_quant.c). The packing both SIMD families share. */
void ps_mmq_pack_side(const qdesc *qd, const qpack *pg, const uint8_t *w0, size_t row_bytes,
                      int nw, int64_t b, uint8_t *tmp, uint8_t *dst, ufast_fn uf, int cl);

#if defined(__x86_64__)

/* ---- the u bytes of a block of 32 with AVX2 (the same bytes as the decoders) ---- */

PS_TARGET_AVX2 static inline __m256i ld32(const uint8_t *p) { return _mm256_loadu_si256((const __m256i *)p); }

/* 16 bytes of nibbles -> 32 bytes: low nibbles, then high */
PS_TARGET_AVX2 static inline __m256i nib16(const uint8_t *q) {
    const __m128i v = _mm_loadu_si128((const __m128i *)q), m = _mm_set1_epi8(15);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), m), _mm_and_si128(v, m));
}
/* the 32 bits of qh, one per byte, at bit 4 */
PS_TARGET_AVX2 static inline __m256i bits32(uint32_t qh) {
    const __m256i sh = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2,
                                        2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32((int)qh), sh);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    const __m256i on = _mm256_cmpeq_epi8(_mm256_and_si256(bytes, bit), bit);
    return _mm256_and_si256(on, _mm256_set1_epi8(16));
}
/* nibble codes through a 16-entry table of u values: the decoders' KV_IQ4NL + 128 and
 * KV_FP4 + 12 (the tables plus their types' off, as bytes) */
static const uint8_t U_IQ4NL[16] = {1,   24,  45,  63,  79,  93,  106, 118,
                                    129, 141, 153, 166, 181, 197, 217, 241};
static const uint8_t U_FP4[16] = {12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0};
PS_TARGET_AVX2 static inline __m256i lut16(const uint8_t *t, __m256i idx) {
    return _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)t)), idx);
}
/* The u bytes of one block of 32 (legacy, IQ4_NL, MXFP4), as the decoders give them. */
PS_TARGET_AVX2 static inline __attribute__((always_inline)) __m256i u32_of(uint32_t type, const uint8_t *b) {
    switch (type) {
    case PS_GGML_Q4_0: return nib16(b + 2);
    case PS_GGML_Q4_1: return nib16(b + 4);
    case PS_GGML_Q5_0: return _mm256_or_si256(nib16(b + 6), bits32(rd32(b + 2)));
    case PS_GGML_Q5_1: return _mm256_or_si256(nib16(b + 8), bits32(rd32(b + 4)));
    case PS_GGML_Q8_0: return _mm256_xor_si256(ld32(b + 2), _mm256_set1_epi8((char)0x80));
    case PS_GGML_IQ4_NL: return lut16(U_IQ4NL, nib16(b + 2));
    default: return lut16(U_FP4, nib16(b + 1)); /* MXFP4 */
    }
}

/* ---- matmul_quant_avx2.c ---- */

/* The AVX2 u bytes of `type`'s blocks, or NULL for a type without them. */
ufast_fn ps_mmq_ufast(uint32_t type);
/* The tile of nw rows from w0 (rows row_bytes apart), nb blocks, packed for the AVX2 kernels
 * (pg: pack_geom with the off x sc pairs) into wp. */
void ps_mmq_pack_tile_avx2(const qdesc *qd, const qpack *pg, const uint8_t *w0, size_t row_bytes,
                           int nw, int64_t nb, uint8_t *wp, ufast_fn uf);
/* nr activation rows of slot sl x lanes 8h .. 8h + nl - 1 of the packed tile wp (nb blocks)
 * -> y (rows ldy apart). */
typedef void (*avx2_tile_fn)(const qpack *, const qslot *, int64_t, const uint8_t *, int,
                             int64_t, float *, int64_t, int);
avx2_tile_fn ps_mmq_avx2_fn(const qdesc *qd);

/* ---- matmul_quant_avx512.c ---- */

/* bs[j] = sum of q[32 j .. 32 j + 31] for the pairs of 32 in n (vpsadbw); the caller adds the
 * odd one out. */
void ps_mmq_sums32_avx512(const int8_t *q, int64_t n, int16_t *bs);
/* A packer straight from the rows into the VNNI group layout: (pg, w0, row_bytes, nw, nb, wp). */
typedef void (*pack_b32_fn)(const qpack *, const uint8_t *, size_t, int, int64_t, uint8_t *);
/* The blocks of 32 (legacy, IQ4_NL, MXFP4), or NULL. */
pack_b32_fn ps_mmq_pack_b32_vnni_of(uint32_t type);
/* qdesc.xact (Q8_0): the signed weights, their start values and scales. */
void ps_mmq_pack_b32_x_vnni(const qpack *pg, const uint8_t *w0, size_t row_bytes, int nw,
                            int64_t nb, uint8_t *wp);
/* The in-register k-quant packers (Q4_K, Q6_K), or NULL (also in test builds while
 * ps_test_mmq_pack_plain is on). */
pack_b32_fn ps_mmq_pack_k_vnni_of(uint32_t type);
/* Any type through the decoders (ps_mmq_pack_side) and the in-register transpose. */
void ps_mmq_pack_tile_vnni(const qdesc *qd, const qpack *pg, const uint8_t *w0, size_t row_bytes,
                           int nw, int64_t nb, uint8_t *wp, ufast_fn uf);
/* nr activation rows of slot sl x the packed tile wp (nb blocks) -> y (rows ldy apart), the
 * lanes of mask m stored. */
typedef void (*vnni_tile_fn)(const qpack *, const qslot *, int64_t, const uint8_t *, int64_t,
                             float *, int64_t, __mmask16);
vnni_tile_fn ps_mmq_vnni_fn(const qdesc *qd, bool xact);
/* The kernel on Q4_K's nibble tile copy (wp: a tile's first record, matmul_quant.h); pg is
 * unused. */
void ps_mmq_vnni_q4x(const qpack *pg, const qslot *sl, int64_t nr, const uint8_t *wp, int64_t nb,
                     float *y, int64_t ldy, __mmask16 m);
/* The same on Q6_K's tile copy. */
void ps_mmq_vnni_q6x(const qpack *pg, const qslot *sl, int64_t nr, const uint8_t *wp, int64_t nb,
                     float *y, int64_t ldy, __mmask16 m);

/* ---- matmul_quant_amx.c ---- */

/* A packer of the blocks of 32 straight into the A tile layout: (w0, row_bytes, nw, nb, wp). */
typedef void (*pack_amx_fn)(const uint8_t *, size_t, int, int64_t, uint8_t *);
/* The blocks of 32 (legacy, IQ4_NL, MXFP4), or NULL. */
pack_amx_fn ps_mmq_pack_b32_amx_of(uint32_t type);
/* Any type: the 16-row tile decoded block by block and packed (ps_amx_q_pack_block). */
void ps_mmq_pack_tile_amx(const qdesc *qd, const ps_amx_qgeom *ag, const uint8_t *w0,
                          size_t row_bytes, int nw, int64_t nb, uint8_t *wp);

#endif /* __x86_64__ */

#endif /* PS_MATMUL_QUANT_ISA_H */
