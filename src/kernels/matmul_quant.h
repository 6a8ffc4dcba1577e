/*
 * matmul_quant.h — the integer matmul of the block-quantised weight types (Q4_0, Q4_1, Q5_0,
 * Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, MXFP4):
 *
 *     y (n_rows, n_out) = x (n_rows, n_in) @ W^T
 *
 * with the activation rows quantised once per call the way llama.cpp does for the weight type
 * (qact.h: Q8_K for the k-quants and IQ4_XS, Q8_1 for Q4_1 / Q5_1, Q8_0 for the rest), exact
 * integer block and sub-block sums, then per block b, in order, starting from acc = 0,
 *     acc = fmaf((float)isum_b, dw_b * dx_b, acc)
 *     acc = fmaf(-(float)msum_b, dmin_b * dx_b, acc)     (k-quants with mins: Q2_K, Q4_K, Q5_K)
 *     acc = fmaf(m_b, s_b, acc)                          (Q4_1 / Q5_1: min x Q8_1's s)
 * and y = acc. isum_b = sum over sub-blocks of scale_s * (sum of the sub-block's int weights x
 * int8 activations); msum_b = sum over sub-blocks of min_s * (sum of the sub-block's int8
 * activations). These are the products of ggml's vec_dot for each type: the same integers
 * (exact), d = dw * dx and dmin * dx formed in float as it does, the d and dmin terms both
 * per block; ggml's own SIMD forms then differ among themselves only in how they group the
 * float sums (generic: 8 float lanes + a dmin sum; AVX2: 8 lanes and a 4-lane dmin vector), and
 * this order is one more such grouping, within float rounding of them. It is the same on every
 * ISA here, so scalar / AVX2 / AVX-512 VNNI agree bit for bit, and every output depends only on
 * its activation row and weight row (not on threads, tiles or batch split). Called through the
 * type table's native slot (types.c) by ps_matmul unless env->f32_act.
 */
#ifndef PS_MATMUL_QUANT_H
#define PS_MATMUL_QUANT_H

#include "kernels/mat.h"

/* True for the weight types this file has an integer kernel for. */
bool ps_mmq_supported(uint32_t type);

/* Floats of per-thread scratch ps_mmq needs for n_in = max_n_in (a packed weight tile and a
 * slot of PS_CHUNK quantised activation rows; rows beyond PS_CHUNK x threads run in passes). */
size_t ps_mmq_scratch_floats(int64_t max_n_in);

/* y = x @ W^T as above. w->type must satisfy ps_mmq_supported and n_in be a multiple of its
 * block; env->scratch_stride >= ps_mmq_scratch_floats(n_in). */
void ps_mmq(const ps_matmul_env *env, const ps_mat *w, const float *x, int64_t ldx,
            int64_t n_rows, float *y, int64_t ldy);

/* The grouped form (ps_matmul_group's contract, matmul.h): every matrix of every item of one
 * type satisfying ps_mmq_supported, with one n_in, n_out and n_w; each product bitwise ps_mmq's. */
void ps_mmq_group(const ps_matmul_env *env, const ps_mm_item *items, int32_t n_items);

/* The experts' tile copies (ps_mat.qtiles), Q4_K's and Q6_K's, made once at load for the experts
 * of a mixture-of-experts layer, which a chunk gives ~8 rows each: the VNNI kernel then reads the
 * 16-row tiles as they are instead of packing each one per call (the packing was a third of
 * those products). Tile t holds rows 16 t .. 16 t + 15 (rows past n_out zero).
 *
 * Q4_K's nibble copy keeps about its bits per weight (2368 bytes per 16 x 256 weights against
 * the file's 2304). Tile t, block b is the record of PS_Q4X_REC bytes at (t * nb + b) *
 * PS_Q4X_REC:
 *   [0, 2048)     the qs bytes as 32 vectors of 64: vector 8 j + g, lane i = row i's qs dword
 *                 32 j + 4 g .. + 3, whose low nibbles are group g (4 inputs) of sub-block 2 j
 *                 and whose high nibbles are group g of sub-block 2 j + 1
 *   [2048, 2176)  byte 16 s + i: row i's 6-bit scale of sub-block s
 *   [2176, 2304)  byte 32 p + 2 i + h: row i's 6-bit min of sub-block 2 p + h
 *   [2304, 2368)  d of rows 0..15 (f16), then dmin of rows 0..15 (f16)
 * The kernel forms from them the integers and floats of the packed tile, so the products
 * are bitwise ps_mmq's. */
#define PS_Q4X_REC 2368
#define PS_Q4X_SC 2048
#define PS_Q4X_MN 2176
#define PS_Q4X_D 2304

/* Q6_K's tile copy: about Q6_K's bits per weight (3392 bytes per 16 x 256 weights against the
 * file's 3360, the record padded to whole 64-byte lines for aligned loads). Tile t, block b is
 * the record of PS_Q6X_REC bytes at (t * nb + b) * PS_Q6X_REC:
 *   [0, 2048)     the ql bytes as 32 vectors of 64: vector v, lane i = row i's ql dword
 *                 4 v .. 4 v + 3 (ql byte 64 h + j holds the low 4 bits of input 128 h + j in
 *                 its low nibble and of input 128 h + 64 + j in its high nibble)
 *   [2048, 3072)  the qh bytes as 16 vectors of 64: vector u, lane i = row i's qh dword
 *                 4 u .. 4 u + 3 (qh byte 32 h + l holds the high 2 bits of inputs 128 h + l,
 *                 + 32, + 64, + 96 at bits 0, 2, 4, 6)
 *   [3072, 3328)  byte 16 s + i: row i's int8 scale of sub-block s (16 inputs)
 *   [3328, 3360)  d of rows 0..15 (f16), then 32 bytes of zeros
 * Its kernel forms each group's bytes (ql nibble | qh pair << 4, 0..63) in registers. */
#define PS_Q6X_REC 3392
#define PS_Q6X_QH 2048
#define PS_Q6X_SC 3072
#define PS_Q6X_D 3328

/* Bytes of w's tile copy: 0 unless w is Q4_K or Q6_K. */
size_t ps_mmq_copy_bytes(const ps_mat *w);

/* Tiles t0 .. t1 - 1 of w's tile copy into dst, the start of the whole copy
 * (ps_mmq_copy_bytes(w) bytes); w->type must be Q4_K or Q6_K. */
void ps_mmq_copy_pack(const ps_mat *w, int64_t t0, int64_t t1, uint8_t *dst);

/* The plain reference: activations quantised by the reference quantisers, weights widened by
 * ps_quant_row_to_f32_ref, sum_k w[k] * dx * q[k] in double (for Q4_1 / Q5_1 the min's part
 * taken as m * s per block, as llama.cpp), rounded once. PS_OK or PS_ERR_NOMEM. */
ps_status ps_mmq_ref(const ps_mat *w, const float *x, int64_t ldx, int64_t n_rows, float *y,
                     int64_t ldy);

/* The scalar kernel on its own (what ps_mmq runs with PS_ISA_SCALAR), single-threaded: every
 * ISA's ps_mmq result equals it bit for bit. PS_OK or PS_ERR_NOMEM (its activation slot). */
ps_status ps_mmq_scalar(const ps_mat *w, const float *x, int64_t ldx, int64_t n_rows, float *y,
                        int64_t ldy);

/* One block of `type` decoded to the kernels' integers (for tests): u[k] = weight + off (0..255;
 * off as returned), sc[s] the sub-block scales (1 for types without), mn[s] the mins (0 without),
 * *dw the block scale, *dm dmin (k-quants) or m (Q4_1 / Q5_1), else 0. Returns the block size
 * (32 or 256) and sets *sb to the sub-block size; 0 for an unsupported type. */
int ps_mmq_decode(uint32_t type, const void *blk, uint8_t *u, int32_t *sc, int16_t *mn,
                  float *dw, float *dm, int *off, int *sb);

/* The machine's int8 vpdpbusd peak in GOP/s (128 ops per 512-bit vpdpbusd: 64 u8 x s8
 * products, each a multiply and an add), measured now on the pool's threads as
 * ps_bf16_peak_gflops measures its own (24 independent accumulator chains on registers, about
 * `seconds`, the process's CPU time when cpu_clock, else wall time). 0 when the CPU lacks
 * AVX-512 VNNI. What `promptscore bench` sets the integer kernels' matmul figure against. */
double ps_i8_peak_gops(ps_pool *pool, double seconds, bool cpu_clock);

#endif
