/*
 * matmul_quant.c — integer matmul kernels for the block-quantised weight types (arithmetic and
 * contract in matmul_quant.h).
 *
 * One table row per type (QTYPES below): block and sub-block sizes, the activation type, the
 * kind of mins, and a decoder that turns one GGUF block into u[k] = weight + off (unsigned
 * bytes), int32 sub-block scales, int16 mins and the float block scales. Every kernel works on
 * those integers, so a type is a row plus its decoder.
 *
 * Work split: activation rows are quantised once per call into
 * the threads' slots (PS_CHUNK rows per slot; more rows run in passes), then one pool task per
 * tile of 16 weight rows. A task decodes its tile and packs it so that one vector lane holds one
 * weight row: per block, [group g of 4 inputs][row 0..15][4 bytes u], then the int32 scales of
 * the 16 rows per sub-block, the int16 min pairs, and the float scales (dw, dmin or m).
 * A broadcast of 4 activation bytes against a group vector gives every lane a 4-product partial
 * sum of its own row (AVX-512 VNNI vpdpbusd: u8 weights x s8 activations; AVX2: vpmaddubsw +
 * vpmaddwd), so after a sub-block each lane holds that row's exact sub-block sum with no
 * horizontal reduction. The weights sit shifted by off >= 0 (Q4_0: q, not q - 8; Q6_K: q, not
 * q - 32; IQ4: value + 128): each sub-block's sum starts at -off * (sum of its activations), an
 * exact int32 the activation quantiser stores per sub-block, so the lane ends at
 * sum (u - off) x = sum w x exactly. Then the rows' sub-block scales give isum_b: VNNI splits
 * each sum into the int16 pair (t & 255, t >> 8) (one vpshufb) against (sc, 256 sc) in one
 * vpdpwssd (Q3_K / Q2_K: two sub-block sums paired into one vpdpwssd, see mkp_vnni); AVX2 folds
 * sc into the vpmaddwd that widens the vpmaddubsw pairs (as llama.cpp's AVX2 k-quant dots) and
 * takes the offset as - off x sum_s sc_s x (sub-block activation sum), one vpmaddwd per two
 * sub-blocks; no vpmulld either way. One convert, scale and fma per block the float part. The mins (msum) are int16 pairs against the
 * activations' int16 sub-block sums (vpdpwssd / vpmaddwd), one more fma per block. (A second
 * pass for the mins with its own accumulator, added at the end, cost ~10% more: dropped.)
 * AVX2 with off = 128 (IQ4_NL, IQ4_XS): u - 128 fits int8 but u x 127 x 2 would saturate
 * vpmaddubsw, so that path takes |w| and sign(w) x x instead (the Q8_0 trick) and no start value.
 * Integer bounds: every lane fits int32 (worst: Q6_K, 16 x 128 x (32 x 127 x 16) < 2^28), and
 * no vpmaddubsw pair exceeds 2 x 63 x 127.
 *
 * AMX (env->amx, K_AMX): the same activation slots, each 16-row group then transposed in place
 * into B tiles (ps_amx_q_act_group), and each task's 16 weight rows decoded by the same
 * decoders and packed for the tiles (pack_tile_amx -> ps_amx_q_pack_block); matmul_amx.c's
 * ps_amx_q_rows forms the same exact int32 isum / msum with tdpbssd / tdpbusd and runs this
 * file's float part, so it gives these bits too (test_matmul_quant checks).
 */
#include "kernels/matmul_quant.h"
#include "base/simd.h"
#include "kernels/i8pack.h"
#include "kernels/matmul_amx.h"
#include "base/prof.h"
#include "kernels/dequant.h"
#include "kernels/qact.h"
#include "base/testhooks.h"

#include <math.h>
#include <stddef.h>
#include <stdatomic.h>

#ifdef PS_TESTING
/* ps_test_mmq_pack_plain (testhooks.h): the k-quant tiles packed by pack_tile_vnni */
static atomic_bool mmq_pack_plain;
void ps_test_mmq_pack_plain(bool on) { atomic_store(&mmq_pack_plain, on); }
#endif

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
                * and block (Q8_0: measured ~10% faster) */
} qdesc;

/* ---- decoders (ggml's block layouts, ggml-common.h) ---- */

static const int8_t KV_IQ4NL[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                    1,    13,   25,  38,  53,  69,  89,  113};
static const int8_t KV_FP4[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

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
static float e8m0_half(uint8_t e) {
    const uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

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

/* Packed bytes per block of a 16-row tile and the offsets inside it. */
typedef struct {
    int pb, sc, mn, dw, dm;
} qpack;

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

/* One thread slot of quantised activation rows: q (int8, ldq bytes apart), init (int32, -off x
 * sub-block sums), bs (int16, sub-block sums), d and s (floats, per block). */
typedef struct {
    int8_t *q;
    int32_t *init;
    int16_t *bs;
    float *d, *s;
    int64_t ldq, ldi, ldb, ldd;
} qslot;

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

/* Quantises one activation row into slot row r (see the table's act). */
/* bs[j] = sum of q[32 j .. 32 j + 31] (exact): AVX-512 vpsadbw on q + 128, or plain adds. */
#if defined(__x86_64__)
PS_TARGET_AVX512_BW static void sums32_avx512(const int8_t *q, int64_t n,
                                                                      int16_t *bs) {
    for (int64_t j = 0; j + 2 <= n / 32; j += 2) {
        const __m512i u = _mm512_xor_si512(_mm512_loadu_si512((const void *)(q + 32 * j)),
                                           _mm512_set1_epi8((char)0x80));
        uint64_t s8[8];
        _mm512_storeu_si512((void *)s8, _mm512_sad_epu8(u, _mm512_setzero_si512()));
        bs[j] = (int16_t)((int)(s8[0] + s8[1] + s8[2] + s8[3]) - 32 * 128);
        bs[j + 1] = (int16_t)((int)(s8[4] + s8[5] + s8[6] + s8[7]) - 32 * 128);
    }
}
#endif

static void sums32(ps_isa isa, const int8_t *q, int64_t n, int16_t *bs) {
    int64_t j0 = 0;
#if defined(__x86_64__)
    if (isa == PS_ISA_AVX512) {
        sums32_avx512(q, n, bs);
        j0 = n / 64 * 2;
    }
#endif
    for (int64_t j = j0; j < n / 32; j++) {
        int sum = 0;
        for (int k = 0; k < 32; k++) sum += q[32 * j + k];
        bs[j] = (int16_t)sum;
    }
}

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

/* Decodes block b of the nw rows (rows past nw: zeros) into tmp (16 rows of qk bytes) and the
 * tile's scale, min and float slots at dst. */
typedef void (*ufast_fn)(const uint8_t *blk, uint8_t *u);

static void pack_side(const qdesc *qd, const qpack *pg, const uint8_t *w0, size_t row_bytes,
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
        } else if (qd->scaled && cl == -1) { /* int16 pairs (sc, 256 sc): see mk_vnni */
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

/* The group layout in plain C: dst[(g * 16 + i) * 4 + c] = tmp[i][4g + c]. */
static void transpose_c(int qk, const uint8_t *tmp, uint8_t *dst) {
    for (int g = 0; g < qk / 4; g++)
        for (int i = 0; i < QT; i++) memcpy(dst + (g * QT + i) * 4, tmp + i * qk + 4 * g, 4);
}

static void pack_tile_c(const qdesc *qd, const qpack *pg, const uint8_t *w0, size_t row_bytes,
                        int nw, int64_t nb, uint8_t *wp, ufast_fn uf) {
    uint8_t tmp[QT * 256];
    for (int64_t b = 0; b < nb; b++) {
        uint8_t *dst = wp + b * pg->pb;
        pack_side(qd, pg, w0, row_bytes, nw, b, tmp, dst, uf, -2);
        transpose_c(qd->qk, tmp, dst);
    }
}

#if defined(__x86_64__)


/* ---- the u bytes of one block with AVX2 (the same bytes as the decoders above) ---- */

PS_TARGET_AVX2 static inline __m256i lo4(__m256i v) { return _mm256_and_si256(v, _mm256_set1_epi8(15)); }
PS_TARGET_AVX2 static inline __m256i hi4(__m256i v) {
    return _mm256_and_si256(_mm256_srli_epi16(v, 4), _mm256_set1_epi8(15));
}
/* bit k of each byte, moved to bit p (per byte; 16-bit shifts never carry across the mask) */
PS_TARGET_AVX2 static inline __m256i bitk(__m256i v, int k, int p) {
    const __m256i b = _mm256_and_si256(_mm256_srli_epi16(v, k), _mm256_set1_epi8(1));
    return _mm256_slli_epi16(b, p);
}
PS_TARGET_AVX2 static inline __m256i ld32(const uint8_t *p) { return _mm256_loadu_si256((const __m256i *)p); }
PS_TARGET_AVX2 static inline void st32(uint8_t *p, __m256i v) { _mm256_storeu_si256((__m256i *)p, v); }

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
PS_TARGET_AVX2 static void uf_q4_0(const uint8_t *b, uint8_t *u) { st32(u, nib16(b + 2)); }
PS_TARGET_AVX2 static void uf_q4_1(const uint8_t *b, uint8_t *u) { st32(u, nib16(b + 4)); }
PS_TARGET_AVX2 static void uf_q5_0(const uint8_t *b, uint8_t *u) {
    st32(u, _mm256_or_si256(nib16(b + 6), bits32(rd32(b + 2))));
}
PS_TARGET_AVX2 static void uf_q5_1(const uint8_t *b, uint8_t *u) {
    st32(u, _mm256_or_si256(nib16(b + 8), bits32(rd32(b + 4))));
}
/* nibble codes through a 16-entry table of u values: KV_IQ4NL + 128 and KV_FP4 + 12 (the
 * tables above plus their types' off, as bytes) */
static const uint8_t U_IQ4NL[16] = {1,   24,  45,  63,  79,  93,  106, 118,
                                    129, 141, 153, 166, 181, 197, 217, 241};
static const uint8_t U_FP4[16] = {12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0};
PS_TARGET_AVX2 static inline __m256i lut16(const uint8_t *t, __m256i idx) {
    return _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)t)), idx);
}
PS_TARGET_AVX2 static void uf_q8_0(const uint8_t *b, uint8_t *u) {
    st32(u, _mm256_xor_si256(ld32(b + 2), _mm256_set1_epi8((char)0x80)));
}
PS_TARGET_AVX2 static void uf_iq4_nl(const uint8_t *b, uint8_t *u) { st32(u, lut16(U_IQ4NL, nib16(b + 2))); }
PS_TARGET_AVX2 static void uf_mxfp4(const uint8_t *b, uint8_t *u) { st32(u, lut16(U_FP4, nib16(b + 1))); }
PS_TARGET_AVX2 static void uf_iq4_xs(const uint8_t *b, uint8_t *u) {
    for (int s = 0; s < 8; s++) st32(u + 32 * s, lut16(U_IQ4NL, nib16(b + 8 + 16 * s)));
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
PS_TARGET_AVX2 static void uf_q2_k(const uint8_t *b, uint8_t *u) {
    const __m256i m3 = _mm256_set1_epi8(3);
    for (int h = 0; h < 2; h++) {
        const __m256i v = ld32(b + 16 + 32 * h);
        for (int j = 0; j < 4; j++)
            st32(u + 128 * h + 32 * j, _mm256_and_si256(_mm256_srli_epi16(v, 2 * j), m3));
    }
}
PS_TARGET_AVX2 static void uf_q3_k(const uint8_t *b, uint8_t *u) {
    const __m256i m3 = _mm256_set1_epi8(3), hm = ld32(b);
    for (int h = 0; h < 2; h++) {
        const __m256i v = ld32(b + 32 + 32 * h);
        for (int j = 0; j < 4; j++)
            st32(u + 128 * h + 32 * j, _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 2 * j), m3),
                                                       bitk(hm, 4 * h + j, 2)));
    }
}
PS_TARGET_AVX2 static void uf_q4_k(const uint8_t *b, uint8_t *u) {
    for (int c = 0; c < 4; c++) {
        const __m256i v = ld32(b + 16 + 32 * c);
        st32(u + 64 * c, lo4(v));
        st32(u + 64 * c + 32, hi4(v));
    }
}
PS_TARGET_AVX2 static void uf_q5_k(const uint8_t *b, uint8_t *u) {
    const __m256i qh = ld32(b + 16);
    for (int c = 0; c < 4; c++) {
        const __m256i v = ld32(b + 48 + 32 * c);
        st32(u + 64 * c, _mm256_or_si256(lo4(v), bitk(qh, 2 * c, 4)));
        st32(u + 64 * c + 32, _mm256_or_si256(hi4(v), bitk(qh, 2 * c + 1, 4)));
    }
}
PS_TARGET_AVX2 static void uf_q6_k(const uint8_t *b, uint8_t *u) {
    const __m256i m3 = _mm256_set1_epi8(3);
    for (int h = 0; h < 2; h++) {
        const __m256i l0 = ld32(b + 64 * h), l1 = ld32(b + 64 * h + 32), qh = ld32(b + 128 + 32 * h);
        uint8_t *o = u + 128 * h;
        st32(o, _mm256_or_si256(lo4(l0), _mm256_slli_epi16(_mm256_and_si256(qh, m3), 4)));
        st32(o + 32, _mm256_or_si256(lo4(l1), _mm256_slli_epi16(
                                                  _mm256_and_si256(_mm256_srli_epi16(qh, 2), m3), 4)));
        st32(o + 64, _mm256_or_si256(hi4(l0), _mm256_slli_epi16(
                                                  _mm256_and_si256(_mm256_srli_epi16(qh, 4), m3), 4)));
        st32(o + 96, _mm256_or_si256(hi4(l1), _mm256_slli_epi16(
                                                  _mm256_and_si256(_mm256_srli_epi16(qh, 6), m3), 4)));
    }
}

static ufast_fn ufast(uint32_t type) {
    switch (type) {
    case PS_GGML_Q4_0: return uf_q4_0;
    case PS_GGML_Q4_1: return uf_q4_1;
    case PS_GGML_Q5_0: return uf_q5_0;
    case PS_GGML_Q5_1: return uf_q5_1;
    case PS_GGML_Q8_0: return uf_q8_0;
    case PS_GGML_Q2_K: return uf_q2_k;
    case PS_GGML_Q3_K: return uf_q3_k;
    case PS_GGML_Q4_K: return uf_q4_k;
    case PS_GGML_Q5_K: return uf_q5_k;
    case PS_GGML_Q6_K: return uf_q6_k;
    case PS_GGML_IQ4_NL: return uf_iq4_nl;
    case PS_GGML_IQ4_XS: return uf_iq4_xs;
    case PS_GGML_MXFP4: return uf_mxfp4;
    default: return NULL;
    }
}

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
 * off (w = 0) and zero scales, as pack_side. The same bytes as pack_side + transpose_vnni at a
 * quarter of their cost (measured: packing was 12-16% of these types' matmul time). */
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

typedef void (*pack_b32_fn)(const qpack *, const uint8_t *, size_t, int, int64_t, uint8_t *);

static pack_b32_fn pack_b32_of(uint32_t type) {
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
 * these types (mmq_self_prefetch): with few activation rows a tile takes ~1 us and the burst
 * of its 300-550 lines came too late (measured on 256 experts x 8 rows, weights out of cache:
 * Q8_0 gate+up 102-106 -> 56-62 ms, Q4_K 64-69 -> 50-53 ms). */
static inline __attribute__((always_inline)) void pf_block(const uint8_t *w0, size_t row_bytes,
                                                           int64_t b, size_t bytes) {
    const uint8_t *p = w0 + (size_t)QT * row_bytes + (size_t)b * bytes;
    for (int i = 0; i < QT; i++)
        for (size_t o = 0; o < bytes; o += 64) __builtin_prefetch(p + (size_t)i * row_bytes + o, 0, 3);
}

/* qdesc.xact (Q8_0, whose 32 bytes are the int8 weights after the f16 scale): the weights
 * as they are (signed; rows past nw zero) into the group layout by the same transpose, the
 * rows' start values -128 x (the block's weight sum) (vpdpbusd of all-ones bytes against the
 * groups) at pg->mn, the f16 scales widened at pg->dw. vpdpbusd then adds (q + 128) x w to
 * them: sum q w exactly. */
PS_TARGET_AVX512_VNNI static void pack_b32_x_vnni(const qpack *pg, const uint8_t *w0,
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

/* K_AMX, the 32-input types: the A tile layout of ps_amx_q_pack_block (block b at b x bb:
 * row i's 32 bytes u - off at 32 i, then 16 float dw and, has_m, 16 float m) straight from the
 * rows, as pack_b32_vnni decodes them (u32_of, one vcvtph2ps for the scales). The same bytes
 * as decode + ufast + ps_amx_q_pack_block (test_matmul_quant: AMX bitwise VNNI) at a fraction
 * of their cost (measured: 15% of Q4_0's AMX matmul at m = 256 went to that packing). */
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

typedef void (*pack_amx_fn)(const uint8_t *, size_t, int, int64_t, uint8_t *);

static pack_amx_fn pack_b32_amx_of(uint32_t type) {
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

PS_TARGET_AVX512_VNNI static void pack_tile_vnni(const qdesc *qd, const qpack *pg, const uint8_t *w0,
                                  size_t row_bytes, int nw, int64_t nb, uint8_t *wp,
                                  ufast_fn uf) {
    uint8_t tmp[QT * 256] __attribute__((aligned(64)));
    for (int64_t b = 0; b < nb; b++) {
        uint8_t *dst = wp + b * pg->pb;
        pack_side(qd, pg, w0, row_bytes, nw, b, tmp, dst, uf, qd->cl ? qd->cl : -1);
        transpose_vnni(qd->qk, tmp, dst);
    }
}

/* The 256-input k-quants Q4_K and Q6_K straight into the group layout (as pack_b32_vnni for
 * the blocks of 32): per block, each 32-byte chunk of u decoded in registers for rows k and
 * k + 8 side by side (the bytes of uf_q4_k / uf_q6_k), the same in-register transpose
 * (ps_i8_groups16); the scales, mins and f16 factors of the 16 rows gathered as dwords
 * (vpgatherdd, one lane per row, lanes past nw zero) and laid out by shifts and vpshufb: the
 * (sc, 256 sc) int16 pairs of mk_vnni, Q4_K's (mn 2p, mn 2p + 1) pairs, the f16 factors by
 * vcvtph2ps. The same bytes as pack_side + transpose_vnni (test_matmul_quant checks them, and
 * every kernel against the scalar one), which decoded row by row: with few activation rows
 * per tile (the experts of a mixture-of-experts layer: ~8 rows each) that packing was ~80% of
 * the product (measured: 0.31 ms of packing per expert's gate and up against 0.009 ms per
 * activation row). */
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

/* The k-quant packers above, or NULL (the other 256-input types: pack_tile_vnni). Test
 * builds: ps_test_mmq_pack_plain(true) turns them off, so that a test can compare them with
 * pack_tile_vnni bit for bit. */
static pack_b32_fn pack_k_of(uint32_t type) {
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
 * scales (int16 pairs) and adds them to isum: no vpmulld (two port-0 uops) and no add per
 * sub-block: +5-15% on those types. The same exact int32 isum, so the same bits as every other
 * path. Tried on Q6_K (halves of 8, 8 x 32 x 127) and Q4_K (halves of 16, 16 x 15 x 127) too:
 * 10-20% slower there (twice the start-value broadcasts, register spills), so they keep
 * vpmulld. */
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

#define VNNI_MKP(NAME, SB, CL, IN, MK)                                                         \
    PS_TARGET_AVX512_VNNI static void NAME(const qpack *pg, const qslot *sl, int64_t nr, const uint8_t *wp,   \
                            int64_t nb, float *y, int64_t ldy, __mmask16 m) {                  \
        int64_t r = 0;                                                                         \
        for (; r + 8 <= nr; r += 8) mkp_vnni(8, 256, SB, CL, IN, MK, pg, sl, r, wp, nb, y + r * ldy, ldy, m); \
        for (; r + 4 <= nr; r += 4) mkp_vnni(4, 256, SB, CL, IN, MK, pg, sl, r, wp, nb, y + r * ldy, ldy, m); \
        for (; r < nr; r++) mkp_vnni(1, 256, SB, CL, IN, MK, pg, sl, r, wp, nb, y + r * ldy, ldy, m); \
    }
VNNI_MKP(vnnip_q3_k, 16, 16, true, 0)  /* Q3_K: two sub-blocks */
VNNI_MKP(vnnip_q2_k, 16, 16, false, 1) /* Q2_K: two sub-blocks */

/* One tile x the nr rows of one slot, in row forms of 8 / 4 / 1. */
#define VNNI_MK(NAME, QK, SB, SC, IN, MK)                                                      \
    PS_TARGET_AVX512_VNNI static void NAME(const qpack *pg, const qslot *sl, int64_t nr, const uint8_t *wp,   \
                            int64_t nb, float *y, int64_t ldy, __mmask16 m) {                  \
        int64_t r = 0;                                                                         \
        for (; r + 8 <= nr; r += 8) mk_vnni(8, QK, SB, SC, IN, MK, pg, sl, r, wp, nb, y + r * ldy, ldy, m); \
        for (; r + 4 <= nr; r += 4) mk_vnni(4, QK, SB, SC, IN, MK, pg, sl, r, wp, nb, y + r * ldy, ldy, m); \
        for (; r < nr; r++) mk_vnni(1, QK, SB, SC, IN, MK, pg, sl, r, wp, nb, y + r * ldy, ldy, m); \
    }
VNNI_MK(vnni_k32_min, 256, 32, true, false, 1)  /* Q4_K, Q5_K */
VNNI_MK(vnni_k32_off, 256, 32, true, true, 0)   /* IQ4_XS */
VNNI_MK(vnni_k16_min, 256, 16, true, false, 1)  /* Q2_K */
VNNI_MK(vnni_k16_off, 256, 16, true, true, 0)   /* Q3_K, Q6_K */
VNNI_MK(vnni_b32_off, 32, 32, false, true, 0)   /* Q4_0, Q5_0, Q8_0, IQ4_NL, MXFP4 */
VNNI_MK(vnni_b32_fmin, 32, 32, false, false, 2) /* Q4_1, Q5_1 */
VNNI_MK(vnni_b32_x, 32, 32, false, 2, 0)        /* Q8_0 (qdesc.xact) */

typedef void (*vnni_tile_fn)(const qpack *, const qslot *, int64_t, const uint8_t *, int64_t,
                             float *, int64_t, __mmask16);

static vnni_tile_fn vnni_fn(const qdesc *qd, bool xact) {
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

/* ---- AVX2 kernels: 8 lanes = weight rows 8h .. 8h + 7 of the packed tile ----
 * As mk_vnni; vpmaddubsw + vpmaddwd stand in for vpdpbusd, vpmaddwd for vpdpwssd. SGN (off =
 * 128): the weights taken back to int8 (u ^ 0x80), |w| x sign(x, w), no start value. */
PS_TARGET_AVX2 static inline __attribute__((always_inline)) void mk_avx2(
    int R, int QK, int SB, bool SCALED, bool INIT, int MINK, bool SGN, const qpack *pg,
    const qslot *sl, int64_t r0, const uint8_t *wp, int h, int64_t nb, float *y, int64_t ldy,
    __m256i mask) {
    const int NS = QK / SB;
    const int64_t ldq = sl->ldq, ldi = sl->ldi, ldb = sl->ldb, ldd = sl->ldd;
    const int8_t *q = sl->q + r0 * ldq;
    const int32_t *init = sl->init + r0 * ldi;
    const int16_t *bs = sl->bs + r0 * ldb;
    const float *d = sl->d + r0 * ldd, *sx = sl->s + r0 * ldd;
    const __m256i ones = _mm256_set1_epi16(1), flip = _mm256_set1_epi8((char)0x80);
    __m256 acc[4];
    _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *wb = wp + b * pg->pb + 32 * h;
        __m256i is[4], t[4];
        _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) is[r] = _mm256_setzero_si256();
        for (int s = 0; s < NS && SCALED; s++) {
            /* the sub-block scale folded into the pair widening (as llama.cpp's AVX2 k-quant
             * dots): vpmaddwd against (sc, sc) instead of (1, 1), no vpmulld */
            const __m256i sc = _mm256_load_si256((const __m256i *)(wb + pg->sc + s * 64));
            _Pragma("GCC unroll 8") for (int g = 0; g < SB / 4; g++) {
                __m256i wv = _mm256_load_si256((const __m256i *)(wb + (s * (SB / 4) + g) * 64));
                __m256i ws = wv;
                if (SGN) {
                    ws = _mm256_xor_si256(wv, flip);
                    wv = _mm256_abs_epi8(ws);
                }
                _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) {
                    int32_t xv;
                    memcpy(&xv, q + r * ldq + b * QK + s * SB + 4 * g, 4);
                    __m256i bx = _mm256_set1_epi32(xv);
                    if (SGN) bx = _mm256_sign_epi8(bx, ws);
                    is[r] = _mm256_add_epi32(is[r],
                                             _mm256_madd_epi16(_mm256_maddubs_epi16(wv, bx), sc));
                }
            }
        }
        if (SCALED && INIT && !SGN) { /* - off x sum_s sc_s x (activation sum of s), exact */
            _Pragma("GCC unroll 8") for (int p = 0; p < NS / 2; p++) {
                const __m256i mv = _mm256_load_si256((const __m256i *)(wb + pg->mn + p * 64));
                _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) {
                    int32_t xv;
                    memcpy(&xv, bs + r * ldb + b * NS + 2 * p, 4);
                    is[r] = _mm256_sub_epi32(is[r], _mm256_madd_epi16(mv, _mm256_set1_epi32(xv)));
                }
            }
        }
        for (int s = 0; s < NS && !SCALED; s++) {
            _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)
                t[r] = INIT && !SGN ? _mm256_set1_epi32(init[r * ldi + b * NS + s])
                                    : _mm256_setzero_si256();
            _Pragma("GCC unroll 8") for (int g = 0; g < SB / 4; g++) {
                __m256i wv = _mm256_load_si256((const __m256i *)(wb + (s * (SB / 4) + g) * 64));
                __m256i ws = wv;
                if (SGN) {
                    ws = _mm256_xor_si256(wv, flip); /* u - 128 = w, as int8 */
                    wv = _mm256_abs_epi8(ws);
                }
                _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) {
                    int32_t xv;
                    memcpy(&xv, q + r * ldq + b * QK + s * SB + 4 * g, 4);
                    __m256i bx = _mm256_set1_epi32(xv);
                    if (SGN) bx = _mm256_sign_epi8(bx, ws);
                    t[r] = _mm256_add_epi32(
                        t[r], _mm256_madd_epi16(_mm256_maddubs_epi16(wv, bx), ones));
                }
            }
            _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) is[r] = t[r];
        }
        const __m256 dw = _mm256_load_ps((const float *)(wb + pg->dw));
        _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)
            acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is[r]),
                                     _mm256_mul_ps(dw, _mm256_set1_ps(d[r * ldd + b])), acc[r]);
        if (MINK == 1) {
            _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) t[r] = _mm256_setzero_si256();
            _Pragma("GCC unroll 8") for (int p = 0; p < NS / 2; p++) {
                const __m256i mv = _mm256_load_si256((const __m256i *)(wb + pg->mn + p * 64));
                _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) {
                    int32_t xv;
                    memcpy(&xv, bs + r * ldb + b * NS + 2 * p, 4);
                    t[r] = _mm256_add_epi32(t[r], _mm256_madd_epi16(mv, _mm256_set1_epi32(xv)));
                }
            }
            const __m256 dm = _mm256_load_ps((const float *)(wb + pg->dm));
            _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)
                acc[r] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(t[r]),
                                          _mm256_mul_ps(dm, _mm256_set1_ps(d[r * ldd + b])),
                                          acc[r]);
        } else if (MINK == 2) {
            const __m256 dm = _mm256_load_ps((const float *)(wb + pg->dm));
            _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)
                acc[r] = _mm256_fmadd_ps(dm, _mm256_set1_ps(sx[r * ldd + b]), acc[r]);
        }
    }
    _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) _mm256_maskstore_ps(y + r * ldy, mask, acc[r]);
}

#define AVX2_MK(NAME, QK, SB, SC, IN, MK, SG)                                                  \
    PS_TARGET_AVX2 static void NAME(const qpack *pg, const qslot *sl, int64_t nr, const uint8_t *wp,   \
                            int h, int64_t nb, float *y, int64_t ldy, int nl) {                \
        const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(nl),                         \
                                                _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));    \
        int64_t r = 0;                                                                         \
        for (; r + 4 <= nr; r += 4) mk_avx2(4, QK, SB, SC, IN, MK, SG, pg, sl, r, wp, h, nb, y + r * ldy, ldy, mask); \
        for (; r < nr; r++) mk_avx2(1, QK, SB, SC, IN, MK, SG, pg, sl, r, wp, h, nb, y + r * ldy, ldy, mask); \
    }
AVX2_MK(avx2_k32_min, 256, 32, true, false, 1, false)  /* Q4_K, Q5_K */
AVX2_MK(avx2_k32_sgn, 256, 32, true, false, 0, true)   /* IQ4_XS */
AVX2_MK(avx2_k16_min, 256, 16, true, false, 1, false)  /* Q2_K */
AVX2_MK(avx2_k16_off, 256, 16, true, true, 0, false)   /* Q3_K, Q6_K */
AVX2_MK(avx2_b32_off, 32, 32, false, true, 0, false)   /* Q4_0, Q5_0, MXFP4 */
AVX2_MK(avx2_b32_sgn, 32, 32, false, false, 0, true)   /* Q8_0, IQ4_NL */
AVX2_MK(avx2_b32_fmin, 32, 32, false, false, 2, false) /* Q4_1, Q5_1 */

typedef void (*avx2_tile_fn)(const qpack *, const qslot *, int64_t, const uint8_t *, int,
                             int64_t, float *, int64_t, int);

static avx2_tile_fn avx2_fn(const qdesc *qd) {
    const bool sg = qd->off == 128;
    if (qd->qk == 32) return qd->min == MIN_FLOAT ? avx2_b32_fmin : sg ? avx2_b32_sgn : avx2_b32_off;
    if (qd->sb == 32) return qd->min == MIN_INT ? avx2_k32_min : avx2_k32_sgn;
    return qd->min == MIN_INT ? avx2_k16_min : avx2_k16_off;
}
#endif

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

/* K_AMX: the 16-row tile decoded block by block and packed (ps_amx_q_pack_block). Rows past
 * nw: u = off, zero scales and floats, set once; the decoders write every scale (and min) the
 * packer reads of the other rows. */
static void pack_tile_amx(const mmq_job *job, const uint8_t *w0, size_t row_bytes, int nw,
                          int64_t nb, uint8_t *wp) {
    const qdesc *qd = job->qd;
    const ufast_fn uf = ufast(qd->type);
    const size_t bb = ps_amx_q_block_bytes(&job->ag);
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
        ps_amx_q_pack_block(&job->ag, &dec, wp + (size_t)b * bb);
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
    y += j0;
    const uint8_t *rows[QT];
    for (int j = 0; j < nw; j++) rows[j] = w0 + (size_t)j * w->row_bytes;
#if defined(__x86_64__)
    float *park = NULL;
    if (job->kind == K_AMX && pack_b32_amx_of(qd->type)) {
        pack_b32_amx_of(qd->type)(w0, w->row_bytes, nw, nb, wp);
        park = (float *)(wp + (size_t)nb * ps_amx_q_block_bytes(&job->ag));
    } else if (job->kind == K_AMX) {
        pack_tile_amx(job, w0, w->row_bytes, nw, nb, wp);
        park = (float *)(wp + (size_t)nb * ps_amx_q_block_bytes(&job->ag));
    } else if (job->xact) {
        pack_b32_x_vnni(&job->pg, w0, w->row_bytes, nw, nb, wp);
    } else if (job->kind == K_VNNI && pack_b32_of(qd->type)) {
        pack_b32_of(qd->type)(&job->pg, w0, w->row_bytes, nw, nb, wp);
    } else if (job->kind == K_VNNI && pack_k_of(qd->type)) {
        pack_k_of(qd->type)(&job->pg, w0, w->row_bytes, nw, nb, wp);
    } else if (job->kind == K_VNNI) {
        pack_tile_vnni(qd, &job->pg, w0, w->row_bytes, nw, nb, wp, ufast(qd->type));
    } else if (job->kind == K_AVX2) {
        pack_tile_c(qd, &job->pg, w0, w->row_bytes, nw, nb, wp, ufast(qd->type));
    }
#else
    (void)stream;
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
            vnni_fn(qd, job->xact)(&job->pg, &sl, nr, wp, nb, yb, ldy, (__mmask16)((1u << nw) - 1u));
            break;
        case K_AVX2:
            for (int h = 0; h * 8 < nw; h++)
                avx2_fn(qd)(&job->pg, &sl, nr, wp, h, nb, yb + 8 * h, ldy,
                            PS_MIN(8, nw - 8 * h));
            break;
#endif
        default: tile_scalar(qd, rows, nw, n, &sl, nr, yb, ldy); break;
        }
    }
}

/* The tile's packer prefetches the next tile itself (pf_block): no prefetch_rows burst. */
static bool mmq_self_prefetch(const mmq_job *job) {
#if defined(__x86_64__)
    return job->kind == K_VNNI && (job->xact || pack_k_of(job->qd->type));
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
