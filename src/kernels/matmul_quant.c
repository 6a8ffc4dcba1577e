/*
 * matmul_quant.c — integer matmul of the block-quantised weight types (arithmetic and
 * contract in matmul_quant.h): the type table, the decoders, the activation quantisation, the
 * scalar kernel, the plain reference and the driver that picks a path per call.
 *
 * One table row per type (QTYPES below): block and sub-block sizes, the activation type, the
 * kind of mins, and a decoder that turns one GGUF block into u[k] = weight + off (unsigned
 * bytes), int32 sub-block scales, int16 mins and the float block scales. Every kernel works on
 * those integers, so a type is a row plus its decoder.
 *
 * Work split: activation rows are quantised once per call into the threads' slots (PS_CHUNK
 * rows per slot; more rows run in passes), then one pool task per tile of 16 weight rows. The
 * scalar kernel (tile_scalar) reads the GGUF rows through the decoders; the SIMD kernels first
 * pack the tile so that one vector lane holds one weight row: per block, [group g of 4
 * inputs][row 0..15][4 bytes u], then the int32 scales of the 16 rows per sub-block, the int16
 * min pairs, and the float scales (dw, dmin or m). A broadcast of 4 activation bytes against a
 * group vector gives every lane a 4-product partial sum of its own row, so after a sub-block
 * each lane holds that row's exact sub-block sum with no horizontal reduction. The weights sit
 * shifted by off >= 0 (Q4_0: q, not q - 8; Q6_K: q, not q - 32; IQ4: value + 128): each
 * sub-block's sum starts at -off * (sum of its activations), an exact int32 the activation
 * quantiser stores per sub-block, so the lane ends at sum (u - off) x = sum w x exactly. Then
 * the rows' sub-block scales give isum_b, one convert, scale and fma per block the float part,
 * and the mins (msum) are int16 pairs against the activations' int16 sub-block sums, one more
 * fma per block, inside the same block loop. Integer bounds: every lane fits int32 (worst:
 * Q6_K, 16 x 128 x (32 x 127 x 16) < 2^28).
 *
 * The paths, one file per ISA family (matmul_quant_isa.h is what they share):
 *   - scalar: tile_scalar below, the one every other path equals bit for bit;
 *   - AVX2 (matmul_quant_avx2.c): vpmaddubsw + vpmaddwd;
 *   - AVX-512 VNNI (matmul_quant_avx512.c): vpdpbusd / vpdpwssd, packers from registers, and
 *     for a Q4_K or Q6_K matrix with a tile copy made at load (ps_mat.qtiles, the experts:
 *     matmul_quant.h) no packing, the kernel reading the copy;
 *   - AMX (env->amx, K_AMX): the same activation slots, each 16-row group then transposed in
 *     place into B tiles (ps_amx_q_act_group), and each task's 16 weight rows packed for the
 *     tiles (matmul_quant_amx.c); matmul_amx.c's ps_amx_q_rows forms the same exact int32
 *     isum / msum with tdpbssd / tdpbusd and runs this file's float part, so it gives these
 *     bits too (test_matmul_quant checks).
 */
#include "kernels/matmul_quant.h"
#include "kernels/matmul_quant_isa.h"
#include "kernels/qact.h"

#include <math.h>
#include <stddef.h>

/* ---- decoders (ggml's block layouts, ggml-common.h) ---- */

static const int8_t KV_IQ4NL[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                    1,    13,   25,  38,  53,  69,  89,  113};
static const int8_t KV_FP4[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

static inline void nibbles32(const uint8_t *q, uint8_t *u) {
    for (int j = 0; j < 16; j++) {
        u[j] = q[j] & 15;
        u[j + 16] = q[j] >> 4;
    }
}

static void dec_q4_0(const uint8_t *b, uint8_t *u, int32_t *sc, int16_t *mn, float *dw,
                     float *dm) {
    *dw = f16at(b);
    if (u) nibbles32(b + 2, u);
}
static void dec_q4_1(const uint8_t *b, uint8_t *u, int32_t *sc, int16_t *mn, float *dw,
                     float *dm) {
    *dw = f16at(b);
    *dm = f16at(b + 2);
    if (u) nibbles32(b + 4, u);
}
static inline void five32(const uint8_t *q, uint32_t qh, uint8_t *u) {
    for (int j = 0; j < 16; j++) {
        u[j] = (uint8_t)((q[j] & 15) | (((qh >> j) & 1) << 4));
        u[j + 16] = (uint8_t)((q[j] >> 4) | (((qh >> (j + 16)) & 1) << 4));
    }
}
static void dec_q5_0(const uint8_t *b, uint8_t *u, int32_t *sc, int16_t *mn, float *dw,
                     float *dm) {
    *dw = f16at(b);
    if (u) five32(b + 6, rd32(b + 2), u);
}
static void dec_q5_1(const uint8_t *b, uint8_t *u, int32_t *sc, int16_t *mn, float *dw,
                     float *dm) {
    *dw = f16at(b);
    *dm = f16at(b + 2);
    if (u) five32(b + 8, rd32(b + 4), u);
}
/* Q8_0: u = q + 128 (the int8 weights as unsigned bytes, off 128 as IQ4_NL). */
static void dec_q8_0(const uint8_t *b, uint8_t *u, int32_t *sc, int16_t *mn, float *dw,
                     float *dm) {
    *dw = f16at(b);
    for (int j = 0; j < 32 && u; j++) u[j] = (uint8_t)(b[2 + j] ^ 0x80);
}
static void dec_iq4_nl(const uint8_t *b, uint8_t *u, int32_t *sc, int16_t *mn, float *dw,
                       float *dm) {
    *dw = f16at(b);
    for (int j = 0; j < 16 && u; j++) {
        u[j] = (uint8_t)(KV_IQ4NL[b[2 + j] & 15] + 128);
        u[j + 16] = (uint8_t)(KV_IQ4NL[b[2 + j] >> 4] + 128);
    }
}
static void dec_mxfp4(const uint8_t *b, uint8_t *u, int32_t *sc, int16_t *mn, float *dw,
                      float *dm) {
    *dw = e8m0_half(b[0]);
    for (int j = 0; j < 16 && u; j++) {
        u[j] = (uint8_t)(KV_FP4[b[1 + j] & 15] + 12);
        u[j + 16] = (uint8_t)(KV_FP4[b[1 + j] >> 4] + 12);
    }
}

/* Q2_K: scales[16] (low 4: scale, high 4: min), qs[64], d, dmin. */
static void dec_q2_k(const uint8_t *b, uint8_t *u, int32_t *sc, int16_t *mn, float *dw,
                     float *dm) {
    for (int s = 0; s < 16; s++) {
        sc[s] = b[s] & 15;
        mn[s] = (int16_t)(b[s] >> 4);
    }
    const uint8_t *q = b + 16;
    for (int h = 0; h < 2 && u; h++)
        for (int j = 0; j < 4; j++)
            for (int l = 0; l < 32; l++)
                u[128 * h + 32 * j + l] = (q[32 * h + l] >> (2 * j)) & 3;
    *dw = f16at(b + 80);
    *dm = f16at(b + 82);
}

/* Q3_K: hmask[32], qs[64], scales[12] (16 x 6 bits, - 32), d. w = low2 - (hbit ? 0 : 4). */
static void dec_q3_k(const uint8_t *b, uint8_t *u, int32_t *sc, int16_t *mn, float *dw,
                     float *dm) {
    const uint8_t *hm = b, *q = b + 32;
    for (int h = 0; h < 2 && u; h++)
        for (int j = 0; j < 4; j++)
            for (int l = 0; l < 32; l++)
                u[128 * h + 32 * j + l] = (uint8_t)(((q[32 * h + l] >> (2 * j)) & 3) +
                                                    4 * ((hm[l] >> (4 * h + j)) & 1));
    uint32_t a[4];
    memcpy(a, b + 96, 12);
    const uint32_t k1 = 0x03030303u, k2 = 0x0f0f0f0fu, t = a[2];
    a[2] = ((a[0] >> 4) & k2) | (((t >> 4) & k1) << 4);
    a[3] = ((a[1] >> 4) & k2) | (((t >> 6) & k1) << 4);
    a[0] = (a[0] & k2) | (((t >> 0) & k1) << 4);
    a[1] = (a[1] & k2) | (((t >> 2) & k1) << 4);
    const uint8_t *s6 = (const uint8_t *)a;
    for (int s = 0; s < 16; s++) sc[s] = (int32_t)s6[s] - 32;
    *dw = f16at(b + 108);
}

/* Q4_K / Q5_K scales: 8 x (6-bit scale, 6-bit min) in 12 bytes (ggml's get_scale_min_k4). */
static void scale_min_k4(const uint8_t *q, int32_t *sc, int16_t *mn) {
    for (int j = 0; j < 8; j++) {
        if (j < 4) {
            sc[j] = q[j] & 63;
            mn[j] = (int16_t)(q[j + 4] & 63);
        } else {
            sc[j] = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
            mn[j] = (int16_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
        }
    }
}

/* ---- the experts' tile copies (matmul_quant.h) ---- */

/* Bytes of one record (a tile's block) of a copy of this type: 0 for a type without one. */
static size_t copy_rec(uint32_t type) {
    return type == PS_GGML_Q4_K ? PS_Q4X_REC : type == PS_GGML_Q6_K ? PS_Q6X_REC : 0;
}

size_t ps_mmq_copy_bytes(const ps_mat *w) {
    return (size_t)((w->n_out + QT - 1) / QT) * (size_t)(w->n_in / 256) * copy_rec(w->type);
}

/* Row i of a tile, block blk, into the Q4_K record rec. */
static void q4x_row(const uint8_t *blk, int i, uint8_t *rec) {
    for (int v = 0; v < 32; v++) memcpy(rec + 64 * v + 4 * i, blk + 16 + 4 * v, 4);
    int32_t sc[8];
    int16_t mn[8];
    scale_min_k4(blk + 4, sc, mn);
    for (int s = 0; s < 8; s++) {
        rec[PS_Q4X_SC + 16 * s + i] = (uint8_t)sc[s];
        rec[PS_Q4X_MN + 32 * (s / 2) + 2 * i + s % 2] = (uint8_t)mn[s];
    }
    memcpy(rec + PS_Q4X_D + 2 * i, blk, 2);
    memcpy(rec + PS_Q4X_D + 32 + 2 * i, blk + 2, 2);
}

/* Row i of a tile, block blk (ql[128], qh[64], scales[16], d), into the Q6_K record rec. */
static void q6x_row(const uint8_t *blk, int i, uint8_t *rec) {
    for (int v = 0; v < 32; v++) memcpy(rec + 64 * v + 4 * i, blk + 4 * v, 4);
    for (int u = 0; u < 16; u++) memcpy(rec + PS_Q6X_QH + 64 * u + 4 * i, blk + 128 + 4 * u, 4);
    for (int s = 0; s < 16; s++) rec[PS_Q6X_SC + 16 * s + i] = blk[192 + s];
    memcpy(rec + PS_Q6X_D + 2 * i, blk + 208, 2);
}

void ps_mmq_copy_pack(const ps_mat *w, int64_t t0, int64_t t1, uint8_t *dst) {
    const bool q6 = w->type == PS_GGML_Q6_K;
    const size_t rb = copy_rec(w->type);
    const size_t bb = q6 ? sizeof(ps_block_q6_k) : sizeof(ps_block_q4_k);
    const int64_t nb = w->n_in / 256;
    for (int64_t t = t0; t < t1; t++)
        for (int64_t b = 0; b < nb; b++) {
            uint8_t *rec = dst + (size_t)(t * nb + b) * rb;
            memset(rec, 0, rb);
            for (int i = 0; i < QT && t * QT + i < w->n_out; i++) {
                const uint8_t *blk = (const uint8_t *)w->data +
                                     (size_t)(t * QT + i) * w->row_bytes + (size_t)b * bb;
                if (q6) q6x_row(blk, i, rec);
                else q4x_row(blk, i, rec);
            }
        }
}

/* Q4_K: d, dmin, scales[12], qs[128]: 64-chunk c = 32 low nibbles then 32 high. */
static void dec_q4_k(const uint8_t *b, uint8_t *u, int32_t *sc, int16_t *mn, float *dw,
                     float *dm) {
    *dw = f16at(b);
    *dm = f16at(b + 2);
    scale_min_k4(b + 4, sc, mn);
    const uint8_t *q = b + 16;
    for (int c = 0; c < 4 && u; c++)
        for (int l = 0; l < 32; l++) {
            u[64 * c + l] = q[32 * c + l] & 15;
            u[64 * c + 32 + l] = q[32 * c + l] >> 4;
        }
}

/* Q5_K: d, dmin, scales[12], qh[32], qs[128]. */
static void dec_q5_k(const uint8_t *b, uint8_t *u, int32_t *sc, int16_t *mn, float *dw,
                     float *dm) {
    *dw = f16at(b);
    *dm = f16at(b + 2);
    scale_min_k4(b + 4, sc, mn);
    const uint8_t *qh = b + 16, *q = b + 48;
    for (int c = 0; c < 4 && u; c++)
        for (int l = 0; l < 32; l++) {
            u[64 * c + l] = (uint8_t)((q[32 * c + l] & 15) | (((qh[l] >> (2 * c)) & 1) << 4));
            u[64 * c + 32 + l] =
                (uint8_t)((q[32 * c + l] >> 4) | (((qh[l] >> (2 * c + 1)) & 1) << 4));
        }
}

/* Q6_K: ql[128], qh[64], scales[16] (int8), d. w = q6 - 32. */
static void dec_q6_k(const uint8_t *b, uint8_t *u, int32_t *sc, int16_t *mn, float *dw,
                     float *dm) {
    for (int h = 0; h < 2 && u; h++) {
        const uint8_t *ql = b + 64 * h, *qh = b + 128 + 32 * h;
        uint8_t *o = u + 128 * h;
        for (int l = 0; l < 32; l++) {
            o[l] = (uint8_t)((ql[l] & 15) | ((qh[l] & 3) << 4));
            o[l + 32] = (uint8_t)((ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4));
            o[l + 64] = (uint8_t)((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4));
            o[l + 96] = (uint8_t)((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4));
        }
    }
    for (int s = 0; s < 16; s++) sc[s] = (int8_t)b[192 + s];
    *dw = f16at(b + 208);
}

/* IQ4_XS: d, scales_h (u16), scales_l[4], qs[128]; 8 sub-blocks of 32, 6-bit scale - 32. */
static void dec_iq4_xs(const uint8_t *b, uint8_t *u, int32_t *sc, int16_t *mn, float *dw,
                       float *dm) {
    *dw = f16at(b);
    const uint16_t sh = rd16(b + 2);
    for (int s = 0; s < 8; s++) {
        const int ls = ((b[4 + s / 2] >> (4 * (s % 2))) & 15) | (((sh >> (2 * s)) & 3) << 4);
        sc[s] = ls - 32;
        const uint8_t *q = b + 8 + 16 * s;
        for (int j = 0; j < 16 && u; j++) {
            u[32 * s + j] = (uint8_t)(KV_IQ4NL[q[j] & 15] + 128);
            u[32 * s + 16 + j] = (uint8_t)(KV_IQ4NL[q[j] >> 4] + 128);
        }
    }
}

/* Block bytes from the struct layouts of qblocks.h; the decoders read ggml's byte offsets,
 * which the asserts below tie to those structs. */
static const qdesc QTYPES[] = {
    /* type           qk   sb  off  cl  act       min        scaled bytes                   decode  amx_bias to_f32  xact */
    {PS_GGML_Q4_0,    32,  32, 8,   0,  ACT_Q8_0, MIN_NONE,  false, sizeof(ps_block_q4_0),   dec_q4_0, -1, ps_dequant_q4_0, false},
    {PS_GGML_Q4_1,    32,  32, 0,   0,  ACT_Q8_1, MIN_FLOAT, false, sizeof(ps_block_q4_1),   dec_q4_1, -1, ps_dequant_q4_1, false},
    {PS_GGML_Q5_0,    32,  32, 16,  0,  ACT_Q8_0, MIN_NONE,  false, sizeof(ps_block_q5_0),   dec_q5_0, -1, ps_dequant_q5_0, false},
    {PS_GGML_Q5_1,    32,  32, 0,   0,  ACT_Q8_1, MIN_FLOAT, false, sizeof(ps_block_q5_1),   dec_q5_1, -1, ps_dequant_q5_1, false},
    {PS_GGML_Q8_0,    32,  32, 128, 0,  ACT_Q8_0, MIN_NONE,  false, sizeof(ps_block_q8_0),   dec_q8_0, -1, ps_dequant_q8_0, true},
    {PS_GGML_Q2_K,    256, 16, 0,   16, ACT_Q8_K, MIN_INT,   true,  sizeof(ps_block_q2_k),   dec_q2_k, 0, ps_dequant_q2_k, false},
    {PS_GGML_Q3_K,    256, 16, 4,   16, ACT_Q8_K, MIN_NONE,  true,  sizeof(ps_block_q3_k),   dec_q3_k, 124, ps_dequant_q3_k, false},
    {PS_GGML_Q4_K,    256, 32, 0,   0,  ACT_Q8_K, MIN_INT,   true,  sizeof(ps_block_q4_k),   dec_q4_k, -1, ps_dequant_q4_k, false},
    {PS_GGML_Q5_K,    256, 32, 0,   0,  ACT_Q8_K, MIN_INT,   true,  sizeof(ps_block_q5_k),   dec_q5_k, -1, ps_dequant_q5_k, false},
    {PS_GGML_Q6_K,    256, 16, 32,  0,  ACT_Q8_K, MIN_NONE,  true,  sizeof(ps_block_q6_k),   dec_q6_k, -1, ps_dequant_q6_k, false},
    {PS_GGML_IQ4_NL,  32,  32, 128, 0,  ACT_Q8_0, MIN_NONE,  false, sizeof(ps_block_iq4_nl), dec_iq4_nl, -1, ps_dequant_iq4_nl, false},
    {PS_GGML_IQ4_XS,  256, 32, 128, 0,  ACT_Q8_K, MIN_NONE,  true,  sizeof(ps_block_iq4_xs), dec_iq4_xs, -1, ps_dequant_iq4_xs, false},
    {PS_GGML_MXFP4,   32,  32, 12,  0,  ACT_Q8_0, MIN_NONE,  false, sizeof(ps_block_mxfp4),  dec_mxfp4, -1, ps_dequant_mxfp4, false},
};
_Static_assert(offsetof(ps_block_q5_0, qs) == 6 && offsetof(ps_block_q5_1, qs) == 8 &&
                   offsetof(ps_block_q2_k, d) == 80 && offsetof(ps_block_q3_k, scales) == 96 &&
                   offsetof(ps_block_q3_k, d) == 108 && offsetof(ps_block_q4_k, qs) == 16 &&
                   offsetof(ps_block_q5_k, qh) == 16 && offsetof(ps_block_q5_k, qs) == 48 &&
                   offsetof(ps_block_q6_k, scales) == 192 && offsetof(ps_block_q6_k, d) == 208 &&
                   offsetof(ps_block_iq4_xs, qs) == 8 && offsetof(ps_block_mxfp4, qs) == 1,
               "the decoders' byte offsets are qblocks.h's layouts");

static const qdesc *qdesc_of(uint32_t type) {
    for (size_t i = 0; i < PS_ARRAY_LEN(QTYPES); i++)
        if (QTYPES[i].type == type) return &QTYPES[i];
    return NULL;
}

bool ps_mmq_supported(uint32_t type) { return qdesc_of(type) != NULL; }

int ps_mmq_decode(uint32_t type, const void *blk, uint8_t *u, int32_t *sc, int16_t *mn,
                  float *dw, float *dm, int *off, int *sb) {
    const qdesc *qd = qdesc_of(type);
    if (!qd) return 0;
    const int ns = qd->qk / qd->sb;
    for (int s = 0; s < ns; s++) {
        sc[s] = 1;
        mn[s] = 0;
    }
    *dw = 0.0f;
    *dm = 0.0f;
    qd->decode(blk, u, sc, mn, dw, dm);
    *off = qd->off;
    *sb = qd->sb;
    return qd->qk;
}

/* ---- sizes: the packed tile and the activation slot ---- */

static int64_t r16(int64_t n) { return (n + 15) & ~(int64_t)15; }
static int64_t r64(int64_t n) { return (n + 63) & ~(int64_t)63; }

/* off_pairs: the AVX2 kernels' off x sc pairs (scaled types with an offset) share the mins'
 * area; the VNNI kernels start their sums at -off x the activation sums instead, so their
 * tile has no such area (Q3_K, Q6_K: 512 bytes a block, IQ4_XS 256). xact (qdesc): 64 bytes
 * of start values per block (Q8_0: 640 bytes a block). */
static qpack pack_geom(const qdesc *qd, bool off_pairs, bool xact) {
    const int ns = qd->qk / qd->sb;
    qpack p;
    p.sc = qd->qk * QT;
    p.mn = p.sc + (qd->scaled ? ns * 64 : 0);
    p.dw = p.mn + (qd->min == MIN_INT || (off_pairs && qd->scaled && qd->off) ? ns * 32 : 0) +
           (xact ? 64 : 0); /* xact: the rows' int32 start values at mn */
    p.dm = p.dw + 64;
    p.pb = p.dm + (qd->min != MIN_NONE ? 64 : 0);
    return p;
}

/* Worst case over the types, per 256 inputs: 16 x 256 bytes + 16 sub-blocks x 64 (scales) +
 * 16 x 32 (mins) + 128 (floats). */
static size_t tile_bytes(int64_t n) {
    return PS_MAX((size_t)((n + 255) / 256) * (4096 + 1024 + 512 + 128) + 8 * 576,
                  ps_amx_q_scratch_bytes(n)); /* or the AMX tile and its park */
}

static void slot_geom(int64_t n, qslot *sl) {
    sl->ldq = r64(n);
    sl->ldi = r16(n / 8);
    sl->ldb = (n / 16 + 31) & ~(int64_t)31;
    sl->ldd = r16(n / 32);
}

static size_t slot_bytes(int64_t n) {
    qslot g;
    slot_geom(n, &g);
    return (size_t)QROWS * ((size_t)g.ldq + 4 * (size_t)g.ldi + 2 * (size_t)g.ldb +
                            8 * (size_t)g.ldd);
}

static void slot_at(uint8_t *base, int64_t n, qslot *sl) {
    slot_geom(n, sl);
    uint8_t *p = base;
    sl->q = (int8_t *)p;
    p += (size_t)QROWS * (size_t)sl->ldq;
    sl->init = (int32_t *)p;
    p += (size_t)QROWS * 4 * (size_t)sl->ldi;
    sl->bs = (int16_t *)p;
    p += (size_t)QROWS * 2 * (size_t)sl->ldb;
    sl->d = (float *)p;
    p += (size_t)QROWS * 4 * (size_t)sl->ldd;
    sl->s = (float *)p;
}

size_t ps_mmq_scratch_floats(int64_t max_n_in) {
    const size_t bytes = (size_t)r64((int64_t)tile_bytes(max_n_in)) + slot_bytes(max_n_in);
    return (size_t)r16((int64_t)((bytes + 3) / 4));
}

/* bs[j] = sum of q[32 j .. 32 j + 31] (exact): AVX-512 vpsadbw on q + 128, or plain adds. */
static void sums32(ps_isa isa, const int8_t *q, int64_t n, int16_t *bs) {
    int64_t j0 = 0;
#if defined(__x86_64__)
    if (isa == PS_ISA_AVX512) {
        ps_mmq_sums32_avx512(q, n, bs);
        j0 = n / 64 * 2;
    }
#endif
    for (int64_t j = j0; j < n / 32; j++) {
        int sum = 0;
        for (int k = 0; k < 32; k++) sum += q[32 * j + k];
        bs[j] = (int16_t)sum;
    }
}

/* Quantises one activation row into slot row r (see the table's act). */
static void quant_row(ps_isa isa, const qdesc *qd, int ig, bool xact, const float *x, int64_t n,
                      const qslot *sl, int64_t r) {
    int8_t *q = sl->q + r * sl->ldq;
    int16_t *bs = sl->bs + r * sl->ldb;
    int32_t *init = sl->init + r * sl->ldi;
    float *d = sl->d + r * sl->ldd, *s = sl->s + r * sl->ldd;
    if (xact) { /* q + 128 as bytes; the start values are the weights' (qdesc.xact) */
        ps_quant_act_q8(isa, x, n, (uint8_t *)q, d, true);
        return;
    }
    if (qd->act == ACT_Q8_K) {
        ps_qact_q8_K(isa, x, n, q, bs, d);
        if (qd->sb == 32)
            for (int64_t j = 0; j < n / 32; j++) bs[j] = (int16_t)(bs[2 * j] + bs[2 * j + 1]);
    } else if (qd->act == ACT_Q8_1) { /* Q4_1 / Q5_1: no start values, no int mins: no sums */
        ps_qact_q8_1(isa, x, n, q, d, s);
    } else {
        ps_quant_act_q8(isa, x, n, (uint8_t *)q, d, false);
        sums32(isa, q, n, bs);
    }
    /* start values of the kernels' partial sums: -off x the sum of each ig activations */
    if (qd->off && ig == qd->sb) {
        for (int64_t j = 0; j < n / ig; j++) init[j] = -qd->off * (int32_t)bs[j];
    } else if (qd->off) {
        for (int64_t j = 0; j < n / ig; j++) {
            int32_t sum = 0;
            for (int k = 0; k < ig; k++) sum += q[j * ig + k];
            init[j] = -qd->off * sum;
        }
    }
}

/* ---- scalar kernel: straight from the GGUF rows ---- */

/* y[r * ldy + j] for r < nr rows of slot sl, j < nw weight rows w[j]. */
static void tile_scalar(const qdesc *qd, const uint8_t *const *w, int nw, int64_t n,
                        const qslot *sl, int64_t nr, float *y, int64_t ldy) {
    const int64_t nb = n / qd->qk;
    const int ns = qd->qk / qd->sb;
    uint8_t u[256];
    int32_t sc[16];
    int16_t mn[16];
    for (int j = 0; j < nw; j++) {
        for (int64_t r = 0; r < nr; r++) {
            const int8_t *q = sl->q + r * sl->ldq;
            const int16_t *bs = sl->bs + r * sl->ldb;
            const float *d = sl->d + r * sl->ldd, *s = sl->s + r * sl->ldd;
            float acc = 0.0f;
            for (int64_t b = 0; b < nb; b++) {
                float dw = 0.0f, dm = 0.0f;
                for (int k = 0; k < ns; k++) {
                    sc[k] = 1;
                    mn[k] = 0;
                }
                qd->decode(w[j] + (size_t)b * (size_t)qd->bytes, u, sc, mn, &dw, &dm);
                int32_t isum = 0, msum = 0;
                for (int k = 0; k < ns; k++) {
                    int32_t t = 0;
                    for (int e = 0; e < qd->sb; e++) {
                        const int64_t i = b * qd->qk + k * qd->sb + e;
                        t += ((int32_t)u[k * qd->sb + e] - qd->off) * (int32_t)q[i];
                    }
                    isum += sc[k] * t;
                    if (qd->min == MIN_INT) msum += (int32_t)mn[k] * (int32_t)bs[b * ns + k];
                }
                acc = fmaf((float)isum, dw * d[b], acc);
                if (qd->min == MIN_INT) acc = fmaf(-(float)msum, dm * d[b], acc);
                else if (qd->min == MIN_FLOAT) acc = fmaf(dm, s[b], acc);
            }
            y[r * ldy + j] = acc;
        }
    }
}

/* ---- packing a tile (AVX2 / AVX-512 kernels) ---- */

/* cl: > 0, the VNNI paired scales (int16 scales of chains 2p and 2p + 1, qdesc.cl); -1, the
 * VNNI (sc, 256 sc) pairs; -2, the AVX2 (sc, sc) pairs and off x sc pairs; 0, int32 scales. */
void ps_mmq_pack_side(const qdesc *qd, const qpack *pg, const uint8_t *w0, size_t row_bytes,
                      int nw, int64_t b, uint8_t *tmp, uint8_t *dst, ufast_fn uf, int cl) {
    const int ns = qd->qk / qd->sb;
    int32_t *scv = (int32_t *)(dst + pg->sc);
    int16_t *mnv = (int16_t *)(dst + pg->mn);
    float *dwv = (float *)(dst + pg->dw), *dmv = (float *)(dst + pg->dm);
    if (qd->qk == 32 && uf) { /* legacy / IQ4_NL / MXFP4: the bytes, then the block scales */
        for (int i = 0; i < QT; i++) {
            const uint8_t *blk = w0 + (size_t)i * row_bytes + (size_t)b * (size_t)qd->bytes;
            if (i < nw) {
                uf(blk, tmp + i * 32);
                dwv[i] = qd->type == PS_GGML_MXFP4 ? e8m0_half(blk[0]) : f16at(blk);
                if (qd->min != MIN_NONE) dmv[i] = f16at(blk + 2);
            } else {
                memset(tmp + i * 32, qd->off, 32);
                dwv[i] = 0.0f;
                if (qd->min != MIN_NONE) dmv[i] = 0.0f;
            }
        }
        return;
    }
    for (int i = 0; i < QT; i++) {
        int32_t sc[16];
        int16_t mn[16];
        float dw = 0.0f, dm = 0.0f;
        for (int k = 0; k < ns; k++) {
            sc[k] = 1;
            mn[k] = 0;
        }
        if (i < nw) {
            const uint8_t *blk = w0 + (size_t)i * row_bytes + (size_t)b * (size_t)qd->bytes;
            qd->decode(blk, uf ? NULL : tmp + i * qd->qk, sc, mn, &dw, &dm);
            if (uf) uf(blk, tmp + i * qd->qk);
        } else {
            memset(tmp + i * qd->qk, qd->off, (size_t)qd->qk); /* w = 0 */
            for (int k = 0; k < ns; k++) sc[k] = 0;
        }
        if (qd->scaled && cl > 0) { /* int16 pairs: the scales of chains 2p and 2p + 1 */
            int16_t *sp = (int16_t *)scv;
            for (int p = 0; p < qd->qk / (2 * cl); p++) {
                sp[(p * QT + i) * 2] = (int16_t)sc[(2 * p * cl) / qd->sb];
                sp[(p * QT + i) * 2 + 1] = (int16_t)sc[((2 * p + 1) * cl) / qd->sb];
            }
        } else if (qd->scaled && cl == -1) { /* int16 pairs (sc, 256 sc): see mk_vnni (AVX-512) */
            int16_t *sp = (int16_t *)scv;
            for (int k = 0; k < ns; k++) {
                sp[(k * QT + i) * 2] = (int16_t)sc[k];
                sp[(k * QT + i) * 2 + 1] = (int16_t)(256 * sc[k]);
            }
        } else if (qd->scaled && cl == -2) { /* AVX2: int16 pairs (sc, sc), off x sc pairs */
            int16_t *sp = (int16_t *)scv;
            for (int k = 0; k < ns; k++) sp[(k * QT + i) * 2] = sp[(k * QT + i) * 2 + 1] = (int16_t)sc[k];
            if (qd->off)
                for (int k = 0; k < ns; k++)
                    mnv[((k / 2) * QT + i) * 2 + (k & 1)] = (int16_t)(qd->off * sc[k]);
        } else if (qd->scaled) {
            for (int k = 0; k < ns; k++) scv[k * QT + i] = sc[k];
        }
        if (qd->min == MIN_INT)
            for (int k = 0; k < ns; k++) mnv[((k / 2) * QT + i) * 2 + (k & 1)] = mn[k];
        dwv[i] = dw;
        if (qd->min != MIN_NONE) dmv[i] = dm;
    }
}
/* ---- the call: quantise a pass of rows, then one task per weight tile ---- */

typedef enum { K_SCALAR, K_AVX2, K_VNNI, K_AMX } qkind;

typedef struct {
    const ps_matmul_env *env;
    const ps_mat *w;
    const qdesc *qd;
    qpack pg;
    const float *x;
    int64_t ldx, row0, n_pass;
    float *y;
    int64_t ldy;
    int32_t n_threads;
    qkind kind;
    int ig;          /* inputs per start value of the partial sums (the kernel's chain) */
    size_t tile_off; /* bytes from a thread's scratch to its activation slot */
    ps_amx_qgeom ag; /* K_AMX: the type as matmul_amx.c sees it */
    bool xact;       /* K_VNNI and qd->xact: unsigned activations, signed weights */
} mmq_job;

static uint8_t *thread_base(const mmq_job *job, int64_t t) {
    return (uint8_t *)(job->env->scratch + (size_t)t * job->env->scratch_stride);
}

static void mmq_quant_task(void *ctx, int64_t i, int32_t thread) {
    const mmq_job *job = ctx;
    qslot sl;
    slot_at(thread_base(job, i / QROWS) + job->tile_off, job->w->n_in, &sl);
    quant_row(job->env->isa, job->qd, job->ig, job->xact, job->x + (job->row0 + i) * job->ldx,
              job->w->n_in, &sl, i % QROWS);
}

static void prefetch_rows(const ps_mat *w, int64_t tile) {
    const int64_t row0 = tile * QT;
    if (row0 < w->n_out) {
        const uint8_t *p = (const uint8_t *)w->data + (size_t)row0 * w->row_bytes;
        const size_t bytes = (size_t)PS_MIN((int64_t)QT, w->n_out - row0) * w->row_bytes;
        for (size_t o = 0; o < bytes; o += 64) __builtin_prefetch(p + o, 0, 2);
    }
}

#if defined(__x86_64__)
/* K_AMX: one group of 16 quantised rows transposed in place (ps_amx_q_act_group), the
 * thread's tile area as the temporary. */
static void mmq_amx_group_at(const mmq_job *job, int64_t slot, int64_t r, int32_t thread) {
    qslot sl;
    slot_at(thread_base(job, slot) + job->tile_off, job->w->n_in, &sl);
    ps_amx_q_act_group(&job->ag, sl.q + r * sl.ldq, sl.ldq, sl.d + r * sl.ldd, sl.s + r * sl.ldd,
                       sl.ldd, sl.bs + r * sl.ldb, sl.ldb, job->w->n_in, thread_base(job, thread));
}

static void mmq_amx_group_task(void *ctx, int64_t gi, int32_t thread) {
    const mmq_job *job = ctx;
    mmq_amx_group_at(job, gi * 16 / QROWS, gi * 16 % QROWS, thread);
}

/* K_AMX: rows from `from` of slot `slot` up to the next multiple of 16 zeroed (whole groups of
 * 16 rows are read). */
static void mmq_amx_zero_tail(const mmq_job *job, int64_t slot, int64_t from) {
    qslot sl;
    slot_at(thread_base(job, slot) + job->tile_off, job->w->n_in, &sl);
    for (int64_t r = from; r % 16; r++) {
        memset(sl.q + r * sl.ldq, 0, (size_t)sl.ldq);
        memset(sl.d + r * sl.ldd, 0, sizeof(float) * (size_t)sl.ldd);
        memset(sl.s + r * sl.ldd, 0, sizeof(float) * (size_t)sl.ldd);
        memset(sl.bs + r * sl.ldb, 0, sizeof(int16_t) * (size_t)sl.ldb);
    }
}
#endif

/* Weight tile `tile` of w (job->w's type and n_in) against n_rows activation rows from row off
 * of slot `slot` on (off + n_rows <= QROWS, or off = 0 and the rows fill the slots from
 * `slot` on) -> y (their first row, w's first output), rows ldy apart. stream: AMX's
 * non-temporal stores (ps_amx_stream_y; same values). */
static void mmq_tile(const mmq_job *job, const ps_mat *w, int64_t tile, int64_t slot,
                     int64_t off, int64_t n_rows, float *y, int64_t ldy, bool stream,
                     int32_t thread) {
    const qdesc *qd = job->qd;
    const int64_t j0 = tile * QT, n = w->n_in, nb = n / qd->qk;
    const int nw = (int)PS_MIN((int64_t)QT, w->n_out - j0);
    const uint8_t *w0 = (const uint8_t *)w->data + (size_t)j0 * w->row_bytes;
    uint8_t *wp = thread_base(job, thread);
    const uint8_t *wk = wp; /* the tile the kernel reads */
    y += j0;
    const uint8_t *rows[QT];
    for (int j = 0; j < nw; j++) rows[j] = w0 + (size_t)j * w->row_bytes;
#if defined(__x86_64__)
    float *park = NULL;
    if (job->kind == K_AMX && ps_mmq_pack_b32_amx_of(qd->type)) {
        ps_mmq_pack_b32_amx_of(qd->type)(w0, w->row_bytes, nw, nb, wp);
        park = (float *)(wp + (size_t)nb * ps_amx_q_block_bytes(&job->ag));
    } else if (job->kind == K_AMX) {
        ps_mmq_pack_tile_amx(qd, &job->ag, w0, w->row_bytes, nw, nb, wp);
        park = (float *)(wp + (size_t)nb * ps_amx_q_block_bytes(&job->ag));
    } else if (job->kind == K_VNNI && w->qtiles) { /* packed at load (matmul_quant.h) */
        assert(w->type == PS_GGML_Q4_K || w->type == PS_GGML_Q6_K);
        wk = (const uint8_t *)w->qtiles + (size_t)tile * (size_t)nb * copy_rec(w->type);
    } else if (job->xact) {
        ps_mmq_pack_b32_x_vnni(&job->pg, w0, w->row_bytes, nw, nb, wp);
    } else if (job->kind == K_VNNI && ps_mmq_pack_b32_vnni_of(qd->type)) {
        ps_mmq_pack_b32_vnni_of(qd->type)(&job->pg, w0, w->row_bytes, nw, nb, wp);
    } else if (job->kind == K_VNNI && ps_mmq_pack_k_vnni_of(qd->type)) {
        ps_mmq_pack_k_vnni_of(qd->type)(&job->pg, w0, w->row_bytes, nw, nb, wp);
    } else if (job->kind == K_VNNI) {
        ps_mmq_pack_tile_vnni(qd, &job->pg, w0, w->row_bytes, nw, nb, wp, ps_mmq_ufast(qd->type));
    } else if (job->kind == K_AVX2) {
        ps_mmq_pack_tile_avx2(qd, &job->pg, w0, w->row_bytes, nw, nb, wp, ps_mmq_ufast(qd->type));
    }
#else
    (void)stream;
    (void)wk;
#endif
    for (int64_t r0 = 0; r0 < n_rows; r0 += QROWS) {
        const int64_t nr = PS_MIN((int64_t)QROWS - off, n_rows - r0);
        qslot sl;
        slot_at(thread_base(job, slot + r0 / QROWS) + job->tile_off, n, &sl);
        sl.q += off * sl.ldq;
        sl.init += off * sl.ldi;
        sl.bs += off * sl.ldb;
        sl.d += off * sl.ldd;
        sl.s += off * sl.ldd;
        float *yb = y + r0 * ldy;
        switch (job->kind) {
#if defined(__x86_64__)
        case K_AMX:
            ps_amx_q_rows(&job->ag, wp, nw, nb, sl.q, sl.ldq, sl.d, sl.s, sl.ldd, sl.bs, sl.ldb,
                          nr, yb, ldy, park, stream);
            break;
        case K_VNNI:
            (!w->qtiles                    ? ps_mmq_vnni_fn(qd, job->xact)
             : w->type == PS_GGML_Q6_K ? ps_mmq_vnni_q6x
                                       : ps_mmq_vnni_q4x)(
                &job->pg, &sl, nr, wk, nb, yb, ldy, (__mmask16)((1u << nw) - 1u));
            break;
        case K_AVX2:
            for (int h = 0; h * 8 < nw; h++)
                ps_mmq_avx2_fn(qd)(&job->pg, &sl, nr, wp, h, nb, yb + 8 * h, ldy,
                            PS_MIN(8, nw - 8 * h));
            break;
#endif
        default: tile_scalar(qd, rows, nw, n, &sl, nr, yb, ldy); break;
        }
    }
}

/* The tile's packer prefetches the next tile itself (pf_block, matmul_quant_avx512.c): no
 * prefetch_rows burst. */
static bool mmq_self_prefetch(const mmq_job *job) {
#if defined(__x86_64__)
    return job->kind == K_VNNI && (job->xact || ps_mmq_pack_k_vnni_of(job->qd->type));
#else
    return false;
#endif
}

static void no_prefetch(const ps_mat *w, int64_t tile) {
    (void)w;
    (void)tile;
}

static void mmq_tile_task(void *ctx, int64_t task, int32_t thread) {
    const mmq_job *job = ctx;
    if (!mmq_self_prefetch(job)) prefetch_rows(job->w, task + 2); /* runs: this thread's after next */
    mmq_tile(job, job->w, task, 0, 0, job->n_pass, job->y + job->row0 * job->ldy, job->ldy,
             ps_amx_stream_y(job->n_pass, job->w->n_out), thread);
}

/* The call's kernel for w's type and n_in on env (x and y left to the caller). */
static mmq_job mmq_job_for(const ps_matmul_env *env, const ps_mat *w) {
    const qdesc *qd = qdesc_of(w->type);
    assert(qd && w->n_in % qd->qk == 0);
    assert(env->scratch_stride >= ps_mmq_scratch_floats(w->n_in));
    mmq_job job = {env, w, qd, pack_geom(qd, true, false), NULL, 0, 0, 0, NULL, 0,
                   ps_pool_size(env->pool), K_SCALAR, qd->sb,
                   (size_t)r64((int64_t)tile_bytes(w->n_in)), {0, 0, 0, 0, -1}, false};
#if defined(__x86_64__)
    if (env->isa == PS_ISA_AVX512 && ps_cpu_has_avx512vnni()) job.kind = K_VNNI;
    else if (env->isa == PS_ISA_AVX512 || env->isa == PS_ISA_AVX2) job.kind = K_AVX2;
    if (job.kind == K_VNNI && qd->cl) job.ig = qd->cl;
    job.xact = job.kind == K_VNNI && qd->xact;
    if (job.kind == K_VNNI) job.pg = pack_geom(qd, false, job.xact);
    if (env->isa == PS_ISA_AVX512 && env->amx && ps_cpu_has_avx512vnni()) job.kind = K_AMX;
    job.ag = (ps_amx_qgeom){qd->qk, qd->sb, qd->off,
                            qd->min == MIN_INT ? 1 : qd->min == MIN_FLOAT ? 2 : 0, qd->amx_bias};
#endif
    return job;
}

void ps_mmq(const ps_matmul_env *env, const ps_mat *w, const float *x, int64_t ldx,
            int64_t n_rows, float *y, int64_t ldy) {
    if (n_rows <= 0 || w->n_out <= 0) return;
    mmq_job job = mmq_job_for(env, w);
    job.x = x;
    job.ldx = ldx;
    job.y = y;
    job.ldy = ldy;
    const int64_t cap = (int64_t)job.n_threads * QROWS;
    for (int64_t r0 = 0; r0 < n_rows; r0 += cap) {
        job.row0 = r0;
        job.n_pass = PS_MIN(cap, n_rows - r0);
        ps_pool_for_runs(env->pool, job.n_pass, mmq_quant_task, &job);
#if defined(__x86_64__)
        if (job.kind == K_AMX) { /* whole groups of 16 rows: the last one's tail rows zero */
            if (job.n_pass % 16) mmq_amx_zero_tail(&job, job.n_pass / QROWS, job.n_pass % QROWS);
            ps_pool_for(env->pool, (job.n_pass + 15) / 16, mmq_amx_group_task, &job);
        }
#endif
        ps_pool_for_runs(env->pool, (w->n_out + QT - 1) / QT, mmq_tile_task, &job);
    }
}

/* The grouped form (ps_mm_group_run drives it): the same slots, tiles and kernels. */
typedef struct {
    mmq_job job;                /* kernel and slot geometry (job.w: the first matrix) */
    const ps_mm_seg *segs;      /* K_AMX prep: the pass's runs */
    int64_t g0[PS_MM_SEGS + 1]; /* K_AMX: the first 16-row group of each run in the pass */
} mmq_group_job;

static void mmq_group_quant(void *ctx, const float *x, int32_t slot, int64_t r) {
    const mmq_group_job *g = ctx;
    const int64_t n = g->job.w->n_in;
    qslot sl;
    slot_at(thread_base(&g->job, slot) + g->job.tile_off, n, &sl);
    quant_row(g->job.env->isa, g->job.qd, g->job.ig, g->job.xact, x, n, &sl, r);
}

static void mmq_group_tile(void *ctx, const ps_mat *w, const ps_mm_seg *sg, int64_t tile,
                           float *y, int64_t ldy, int32_t thread) {
    const mmq_group_job *g = ctx;
    mmq_tile(&g->job, w, tile, sg->slot, sg->off, sg->n, y, ldy,
             ps_amx_stream_y(sg->n, w->n_out), thread);
}

#if defined(__x86_64__)
/* K_AMX: group gi of the pass (runs start at multiples of 16 rows). */
static void mmq_group_amx_task(void *ctx, int64_t gi, int32_t thread) {
    const mmq_group_job *g = ctx;
    int32_t i = 0;
    while (g->g0[i + 1] <= gi) i++;
    const ps_mm_seg *sg = &g->segs[i];
    mmq_amx_group_at(&g->job, sg->slot, sg->off + 16 * (gi - g->g0[i]), thread);
}

/* K_AMX: each run's tail rows zeroed up to its group's end, then every group transposed. */
static void mmq_group_prep(void *ctx, const ps_mm_seg *segs, int32_t n_segs) {
    mmq_group_job *g = ctx;
    g->segs = segs;
    for (int32_t i = 0; i < n_segs; i++) {
        mmq_amx_zero_tail(&g->job, segs[i].slot, segs[i].off + segs[i].n);
        g->g0[i + 1] = g->g0[i] + (segs[i].n + 15) / 16;
    }
    ps_pool_for(g->job.env->pool, g->g0[n_segs], mmq_group_amx_task, g);
}
#endif

void ps_mmq_group(const ps_matmul_env *env, const ps_mm_item *items, int32_t n_items) {
    mmq_group_job g = {mmq_job_for(env, &items[0].w[0]), NULL, {0}};
    void (*prep)(void *, const ps_mm_seg *, int32_t) = NULL;
#if defined(__x86_64__)
    if (g.job.kind == K_AMX) prep = mmq_group_prep;
#endif
    const ps_mm_group_kernel k = {&g,
                                  QROWS,
                                  g.job.kind == K_AMX ? 16 : 1,
                                  (items[0].w[0].n_out + QT - 1) / QT,
                                  g.job.n_threads,
                                  mmq_group_quant,
                                  prep,
                                  mmq_self_prefetch(&g.job) ? no_prefetch : prefetch_rows,
                                  mmq_group_tile};
    ps_mm_group_run(env->pool, items, n_items, &k);
}

ps_status ps_mmq_scalar(const ps_mat *w, const float *x, int64_t ldx, int64_t n_rows, float *y,
                        int64_t ldy) {
    const qdesc *qd = qdesc_of(w->type);
    assert(qd && w->n_in % qd->qk == 0);
    const int64_t n = w->n_in;
    uint8_t *buf = ps_aligned_alloc(64, slot_bytes(n));
    if (!buf) return PS_ERR_NOMEM;
    qslot sl;
    slot_at(buf, n, &sl);
    for (int64_t r0 = 0; r0 < n_rows; r0 += QROWS) {
        const int64_t nr = PS_MIN((int64_t)QROWS, n_rows - r0);
        for (int64_t r = 0; r < nr; r++)
            quant_row(PS_ISA_SCALAR, qd, qd->sb, false, x + (r0 + r) * ldx, n, &sl, r);
        for (int64_t j0 = 0; j0 < w->n_out; j0 += QT) {
            const int nw = (int)PS_MIN((int64_t)QT, w->n_out - j0);
            const uint8_t *rows[QT];
            for (int j = 0; j < nw; j++)
                rows[j] = (const uint8_t *)w->data + (size_t)(j0 + j) * w->row_bytes;
            tile_scalar(qd, rows, nw, n, &sl, nr, y + r0 * ldy + j0, ldy);
        }
    }
    ps_free(buf);
    return PS_OK;
}

ps_status ps_mmq_ref(const ps_mat *w, const float *x, int64_t ldx, int64_t n_rows, float *y,
                     int64_t ldy) {
    const qdesc *qd = qdesc_of(w->type);
    assert(qd && w->n_in % qd->qk == 0);
    const int64_t n = w->n_in, nb = n / qd->qk;
    float *row = ps_malloc((size_t)PS_MAX(n, 1) * sizeof(float));
    double *xd = ps_malloc((size_t)PS_MAX(n, 1) * sizeof(double));
    int8_t *q = ps_malloc((size_t)PS_MAX(n, 1));
    int16_t *bs = ps_malloc((size_t)PS_MAX(n / 16, 1) * sizeof(int16_t));
    float *d = ps_malloc((size_t)PS_MAX(n / 32, 1) * sizeof(float));
    float *s = ps_malloc((size_t)PS_MAX(n / 32, 1) * sizeof(float));
    ps_status st = PS_OK;
    if (!row || !xd || !q || !bs || !d || !s) {
        st = PS_ERR_NOMEM;
        goto out;
    }
    for (int64_t r = 0; r < n_rows; r++) {
        const float *xr = x + r * ldx;
        if (qd->act == ACT_Q8_K) ps_qact_q8_K_ref(xr, n, q, bs, d);
        else if (qd->act == ACT_Q8_1) ps_qact_q8_1_ref(xr, n, q, d, s);
        else ps_quant_act_q8_ref(xr, n, (uint8_t *)q, d, false);
        for (int64_t k = 0; k < n; k++) xd[k] = (double)q[k] * (double)d[k / qd->qk];
        for (int64_t j = 0; j < w->n_out; j++) {
            const uint8_t *wr = (const uint8_t *)w->data + (size_t)j * w->row_bytes;
            qd->to_f32(wr, row, n);
            double acc = 0.0;
            for (int64_t b = 0; b < nb; b++) {
                /* Q4_1 / Q5_1: w = d q + m; the m part is m x s (Q8_1's s), as llama.cpp */
                const double m = qd->min == MIN_FLOAT
                                     ? (double)f16at(wr + (size_t)b * (size_t)qd->bytes + 2)
                                     : 0.0;
                for (int64_t k = b * qd->qk; k < (b + 1) * qd->qk; k++)
                    acc += ((double)row[k] - m) * xd[k];
                if (qd->min == MIN_FLOAT) acc += m * (double)s[b];
            }
            y[r * ldy + j] = (float)acc;
        }
    }
out:
    ps_free(row);
    ps_free(xd);
    ps_free(q);
    ps_free(bs);
    ps_free(d);
    ps_free(s);
    return st;
}
