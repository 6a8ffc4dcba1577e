/*
 * qblocks.h — the byte layouts of the ggml quantised blocks that promptscore reads (weights)
 * or builds (activations), exactly as GGUF files store them: little-endian, no padding, f16
 * scales kept as their 16 bits (uint16_t, widened with ps_f16_to_f32). The sizes are asserted
 * against the ones ggml uses, so a block pointer can walk a row in the mapped file.
 *
 * Legacy blocks hold 32 weights; the k-quants, IQ4_XS and Q8_K hold a super-block of
 * PS_QK_K = 256 weights split into sub-blocks with their own small integer scales.
 * What each field means (the dequantisation formulas) is in types.c, per type.
 */
#ifndef PS_QBLOCKS_H
#define PS_QBLOCKS_H

#include <stdint.h>

#define PS_QK_K 256      /* super-block of the k-quants, IQ4_XS and Q8_K */
#define PS_K_SCALE_SIZE 12

#define PS_Q4_0_BLOCK 32
typedef struct {
    uint16_t d;                      /* f16 scale */
    uint8_t qs[PS_Q4_0_BLOCK / 2];   /* element j in the low nibble of qs[j], j+16 in the high */
} ps_block_q4_0;

#define PS_Q4_1_BLOCK 32
typedef struct {
    uint16_t d;                      /* f16 scale */
    uint16_t m;                      /* f16 minimum */
    uint8_t qs[PS_Q4_1_BLOCK / 2];
} ps_block_q4_1;

#define PS_Q5_0_BLOCK 32
typedef struct {
    uint16_t d;                      /* f16 scale */
    uint8_t qh[4];                   /* fifth bits: bit j of the little-endian u32 = element j */
    uint8_t qs[PS_Q5_0_BLOCK / 2];
} ps_block_q5_0;

#define PS_Q5_1_BLOCK 32
typedef struct {
    uint16_t d;                      /* f16 scale */
    uint16_t m;                      /* f16 minimum */
    uint8_t qh[4];
    uint8_t qs[PS_Q5_1_BLOCK / 2];
} ps_block_q5_1;

#define PS_Q8_0_BLOCK 32
typedef struct {
    uint16_t d;                      /* f16 scale */
    int8_t qs[PS_Q8_0_BLOCK];
} ps_block_q8_0;

#define PS_Q8_1_BLOCK 32
typedef struct {
    uint16_t d;                      /* f16 scale */
    uint16_t s;                      /* f16 of d * sum(qs) */
    int8_t qs[PS_Q8_1_BLOCK];
} ps_block_q8_1;

/* Q2_K: 16 sub-blocks of 16; scales[i] = 4-bit scale (low) | 4-bit min (high);
 * x = d * sc * q - dmin * m, q in 0..3. */
typedef struct {
    uint8_t scales[PS_QK_K / 16];
    uint8_t qs[PS_QK_K / 4];         /* 2 bits per weight */
    uint16_t d;                      /* f16 super-scale of the scales */
    uint16_t dmin;                   /* f16 super-scale of the mins */
} ps_block_q2_k;

/* Q3_K: 16 sub-blocks of 16, 6-bit signed scales (packed in 12 bytes), x = d * (sc - 32) * q,
 * q = low 2 bits - (high bit clear ? 4 : 0), in -4..3. */
typedef struct {
    uint8_t hmask[PS_QK_K / 8];      /* high bits */
    uint8_t qs[PS_QK_K / 4];         /* low 2 bits */
    uint8_t scales[12];
    uint16_t d;                      /* f16 super-scale */
} ps_block_q3_k;

/* Q4_K: 8 sub-blocks of 32, 6-bit scales and mins packed in 12 bytes;
 * x = d * sc * q - dmin * m, q in 0..15. */
typedef struct {
    uint16_t d;                      /* f16 super-scale of the scales */
    uint16_t dmin;                   /* f16 super-scale of the mins */
    uint8_t scales[PS_K_SCALE_SIZE];
    uint8_t qs[PS_QK_K / 2];
} ps_block_q4_k;

/* Q5_K: as Q4_K with a fifth bit per weight, q in 0..31. */
typedef struct {
    uint16_t d;
    uint16_t dmin;
    uint8_t scales[PS_K_SCALE_SIZE];
    uint8_t qh[PS_QK_K / 8];
    uint8_t qs[PS_QK_K / 2];
} ps_block_q5_k;

/* Q6_K: 16 sub-blocks of 16, int8 scales; x = d * sc * (q - 32), q in 0..63. */
typedef struct {
    uint8_t ql[PS_QK_K / 2];         /* low 4 bits */
    uint8_t qh[PS_QK_K / 4];         /* high 2 bits */
    int8_t scales[PS_QK_K / 16];
    uint16_t d;                      /* f16 super-scale */
} ps_block_q6_k;

/* Q8_K (activations of the k-quant dot products): a float scale, 256 int8 and the sums of
 * every 16 of them. */
typedef struct {
    float d;
    int8_t qs[PS_QK_K];
    int16_t bsums[PS_QK_K / 16];
} ps_block_q8_k;

/* IQ4_NL: 32 weights, 4-bit indices into the non-linear table ps_kvalues_iq4nl; x = d * kv. */
#define PS_IQ4_NL_BLOCK 32
typedef struct {
    uint16_t d;
    uint8_t qs[PS_IQ4_NL_BLOCK / 2];
} ps_block_iq4_nl;

/* IQ4_XS: 8 sub-blocks of 32 with 6-bit scales (low 4 bits in scales_l, high 2 in scales_h);
 * x = d * (ls - 32) * kv. */
typedef struct {
    uint16_t d;
    uint16_t scales_h;
    uint8_t scales_l[PS_QK_K / 64];
    uint8_t qs[PS_QK_K / 2];
} ps_block_iq4_xs;

/* MXFP4: 32 weights, an E8M0 exponent and 4-bit E2M1 codes (ps_kvalues_mxfp4, doubled);
 * x = 2^(e - 128) * kv. */
#define PS_MXFP4_BLOCK 32
typedef struct {
    uint8_t e;
    uint8_t qs[PS_MXFP4_BLOCK / 2];
} ps_block_mxfp4;

/* the sizes ggml uses (ggml-common.h) */
_Static_assert(sizeof(ps_block_q4_0) == 18, "q4_0 block");
_Static_assert(sizeof(ps_block_q4_1) == 20, "q4_1 block");
_Static_assert(sizeof(ps_block_q5_0) == 22, "q5_0 block");
_Static_assert(sizeof(ps_block_q5_1) == 24, "q5_1 block");
_Static_assert(sizeof(ps_block_q8_0) == 34, "q8_0 block");
_Static_assert(sizeof(ps_block_q8_1) == 36, "q8_1 block");
_Static_assert(sizeof(ps_block_q2_k) == 2 * 2 + PS_QK_K / 16 + PS_QK_K / 4, "q2_k block");
_Static_assert(sizeof(ps_block_q3_k) == 2 + PS_QK_K / 4 + PS_QK_K / 8 + 12, "q3_k block");
_Static_assert(sizeof(ps_block_q4_k) == 2 * 2 + PS_K_SCALE_SIZE + PS_QK_K / 2, "q4_k block");
_Static_assert(sizeof(ps_block_q5_k) == 2 * 2 + PS_K_SCALE_SIZE + PS_QK_K / 2 + PS_QK_K / 8,
               "q5_k block");
_Static_assert(sizeof(ps_block_q6_k) == 2 + PS_QK_K / 16 + 3 * PS_QK_K / 4, "q6_k block");
_Static_assert(sizeof(ps_block_q8_k) == 4 + PS_QK_K + PS_QK_K / 16 * 2, "q8_k block");
_Static_assert(sizeof(ps_block_iq4_nl) == 18, "iq4_nl block");
_Static_assert(sizeof(ps_block_iq4_xs) == 2 + 2 + PS_QK_K / 64 + PS_QK_K / 2, "iq4_xs block");
_Static_assert(sizeof(ps_block_mxfp4) == 17, "mxfp4 block");
_Static_assert(sizeof(ps_block_q2_k) == 84 && sizeof(ps_block_q3_k) == 110 &&
                   sizeof(ps_block_q4_k) == 144 && sizeof(ps_block_q5_k) == 176 &&
                   sizeof(ps_block_q6_k) == 210 && sizeof(ps_block_q8_k) == 292 &&
                   sizeof(ps_block_iq4_xs) == 136,
               "k-quant block sizes");

/* The IQ4_NL / IQ4_XS non-linear levels and the MXFP4 E2M1 values (doubled), by 4-bit code. */
static const int8_t ps_kvalues_iq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};
static const int8_t ps_kvalues_mxfp4[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

#endif /* PS_QBLOCKS_H */
