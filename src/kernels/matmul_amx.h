/*
 * matmul_amx.h — the AMX tile kernels behind ps_matmul (matmul_amx.c), called by matmul_float.c
 * (BF16) and matmul_quant.c (the block types) only when ps_cpu_has_amx() and the environment
 * asked for AMX (ps_matmul_env.amx).
 */
#ifndef PS_MATMUL_AMX_H
#define PS_MATMUL_AMX_H

#include "kernels/mat.h"

#define PS_AMX_BF16_TW 32 /* BF16: weight rows per task (two 16-column B tiles) */

/* Bytes of w's BF16 tile copy: ceil(n_out / 16) groups x ceil(n_in / 32) chunks x 1 KiB. */
size_t ps_amx_bf16_tiles_bytes(const ps_mat *w);
/* The tile copy of a BF16 matrix (64-byte aligned, free with ps_free): group g (weight rows
 * 16 g ..), chunk kc (inputs 32 kc ..) at ((g * n_chunks) + kc) KiB, row kk, column i = the bf16
 * pair w[16 g + i][32 kc + 2 kk .. + 1], zeros past n_in / n_out. NULL: not BF16 or no memory. */
void *ps_amx_bf16_pack(const ps_mat *w, size_t *bytes);
/* The same into dst (ps_amx_bf16_tiles_bytes(w) bytes, 64-byte aligned; w BF16). */
void ps_amx_bf16_pack_to(const ps_mat *w, void *dst);
/* Scratch one BF16 task needs (its weight rows packed when w has no tile copy, parked C). */
size_t ps_amx_bf16_scratch_bytes(int64_t n_in);

/* y (n_rows <= PS_CHUNK, nw <= PS_AMX_BF16_TW outputs) rows ldy apart = x . W[j0 .. j0+nw)^T:
 * x bf16 rows ldx elements apart, round16(n_rows) rows readable, each zero from n_in up to a
 * multiple of 32 (j0 a multiple of 16). scratch: ps_amx_bf16_scratch_bytes, 64-byte aligned.
 * stream: non-temporal stores for whole aligned lines of y (ps_amx_stream_y); same values. */
void ps_amx_bf16_task(const ps_mat *w, int64_t j0, int nw, const uint16_t *x, int64_t ldx,
                      int64_t n_rows, float *y, int64_t ldy, void *scratch, bool stream);

/* ---- the block-quantised types (matmul_quant.c's integer road; arithmetic there) ---- */

/* A type as the AMX kernels see it: qk inputs per block (256 or 32), sub-blocks of sb, weights
 * stored as u = w + off; mink 0: no mins, 1: integer mins (k-quants, dm x msum), 2: float mins
 * (Q4_1 / Q5_1, m x Q8_1's s). 256-input types are scaled (per sub-block integer scales).
 * bias (256 inputs): -1: p = sc x (u - off) takes two byte planes; >= 0: every p + bias is in
 * 0 .. 255, one unsigned plane (bias > 0 only where mink == 0). */
typedef struct {
    int qk, sb, off, mink, bias;
} ps_amx_qgeom;

/* Block b of 16 weight rows decoded as matmul_quant.c's decoders give it (rows past the
 * matrix: u = off, sc = 0, dw = dm = 0). */
typedef struct {
    uint8_t u[16][256];
    int32_t sc[16][16];
    int16_t mn[16][16];
    float dw[16], dm[16];
} ps_amx_qdec;

/* Bytes of one packed block of a 16-row tile: 256 inputs: two planes of 16 rows x 256 bytes
 * (hi, lo of p = sc x (u - off) = 256 hi + lo), or with bias >= 0 the one plane p + bias,
 * then (mink == 1) each row's mins as int16 pairs; 32 inputs: one plane of 16 x 32 bytes
 * u - off; then 16 float dw and (mink) 16 dm. */
size_t ps_amx_q_block_bytes(const ps_amx_qgeom *g);
/* Scratch bytes a task needs for n_in inputs: the packed tile (nb blocks) and a park of
 * 16 KiB (the accumulators of PS_CHUNK rows between blocks), worst case over the types. */
size_t ps_amx_q_scratch_bytes(int64_t n_in);
/* Packs one decoded block into dst (ps_amx_q_block_bytes, 64-byte aligned). */
void ps_amx_q_pack_block(const ps_amx_qgeom *g, const ps_amx_qdec *dec, uint8_t *dst);
/* Transposes one group of 16 quantised activation rows in place: q (rows ldq bytes apart,
 * n inputs, n a multiple of 32) becomes 1 KiB B tiles per 64 inputs (row kk, column r = the
 * 4 bytes q[r][64 c + 4 kk ..]), 16 n bytes; d (and s where mink == 2; floats per block, rows
 * ldd apart) become [block][16 rows]; where mink == 1 the int16 sub-block sums bs (rows ldb
 * apart) become their int32 pairs [block][pair][16 rows], where bias > 0 the int32 block sums
 * (the sum of the block's bs) [block][16 rows]. tmp: 16 x max(ldq, 4 ldd) bytes. */
void ps_amx_q_act_group(const ps_amx_qgeom *g, int8_t *q, int64_t ldq, float *d, float *s,
                        int64_t ldd, int16_t *bs, int64_t ldb, int64_t n, void *tmp);
/* y (n_rows <= PS_CHUNK rows ldy apart, nw <= 16 outputs) from the packed tile wp (nb blocks)
 * and the transposed groups: xt (group k at xt + 16 k ldq), dt / st (group k at + 16 k ldd),
 * bst (mink == 1 or bias > 0: group k at + 16 k ldb).
 * round16(n_rows) rows readable. park: 16 KiB, 64-byte aligned. stream: as ps_amx_stream_y.
 * Bitwise equal to the VNNI kernels of matmul_quant_avx512.c. */
void ps_amx_q_rows(const ps_amx_qgeom *g, const uint8_t *wp, int nw, int64_t nb,
                   const int8_t *xt, int64_t ldq, const float *dt, const float *st, int64_t ldd,
                   const int16_t *bst, int64_t ldb, int64_t n_rows, float *y, int64_t ldy,
                   float *park, bool stream);

/* Whether a call writing y (n_rows x n_out floats) should store it around the cache: more than
 * 32 MiB of outputs (the logits of a chunk), which no cache level keeps anyway. */
static inline bool ps_amx_stream_y(int64_t n_rows, int64_t n_out) {
    return (double)n_rows * (double)n_out * 4.0 > 32.0 * 1048576.0;
}

#endif
