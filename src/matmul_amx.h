/*
 * matmul_amx.h — the AMX tile kernels behind ps_matmul (matmul_amx.c), called by matmul.c only
 * when ps_cpu_has_amx() and the environment asked for AMX (ps_matmul_env.amx).
 */
#ifndef PS_MATMUL_AMX_H
#define PS_MATMUL_AMX_H

#include "matmul.h"

#define PS_AMX_BF16_TW 32 /* BF16: weight rows per task (two 16-column B tiles) */
#define PS_AMX_Q8_QB 640  /* Q8_0: bytes per block of matmul.c's packed 16-row weight tile */

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

/* Q8_0: y (n_rows, nw <= 16) from matmul.c's packed weight tile wp (nb blocks) and int8
 * activation rows q (ldq bytes apart; round16(n_rows) rows readable) with block scales d per
 * group of 16 rows transposed: the scale of row 16 g + i, block b at d[16 g ldd + 16 b + i].
 * Bitwise equal to the VNNI kernel. */
void ps_amx_q8_tile(const uint8_t *wp, int nw, int64_t nb, const int8_t *q, int64_t ldq,
                    const float *d, int64_t ldd, int64_t n_rows, float *y, int64_t ldy,
                    bool stream);

/* Whether a call writing y (n_rows x n_out floats) should store it around the cache: more than
 * 32 MiB of outputs (the logits of a chunk), which no cache level keeps anyway. */
static inline bool ps_amx_stream_y(int64_t n_rows, int64_t n_out) {
    return (double)n_rows * (double)n_out * 4.0 > 32.0 * 1048576.0;
}

#endif
