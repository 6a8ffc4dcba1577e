/*
 * topk.h — internals of the top-K logprob kernel shared by topk.c and its SIMD variants
 * (topk_avx2.c, topk_avx512.c): the per-chunk kernels that every ISA implements with the same
 * operations in the same order, on the canonical exp of exp_canon.h.
 *
 * The canonical row pass (driven by topk.c, identical for every ISA):
 *   - the row is viewed as 64-logit blocks; lane j (0..63) owns the elements whose index is
 *     j mod 64; full blocks are grouped into chunks of PS_TOPK_CHUNK_BLOCKS blocks and the
 *     ragged tail block (n % 64 logits) is a chunk of its own, done in scalar code;
 *   - the shift R starts at the first block's maximum (at least -FLT_MAX);
 *   - per chunk, ONE pass over the logits (kernel `fused`): block maxima, and chunk lane sums
 *     C[j] = sum of exp(x - R) over the lane's logits in element order (C starts at 0);
 *     if the chunk maximum mc exceeds R + PS_TOPK_SHIFT_SLACK, the chunk is redone instead:
 *     the running sums S are multiplied by exp(R - mc), R = mc, and C is recomputed (kernel
 *     `expsum`) with the new shift; then S[j] += C[j]. So every kept exp has an argument
 *     <= 64 (no overflow: 2^31 * e^64 < FLT_MAX) and the data is read once, except in the
 *     rare chunk whose maximum jumps 64 above everything before it;
 *   - at the end a fixed pairwise tree over the 64 lane sums, and lse = R + log(sum) in
 *     double, rounded once to float (sum >= 1: the maximum's own term is >= exp(0) = 1),
 *     then raised to the row maximum M if rounding left it below (the exact lse is >= M, and
 *     so every logprob is <= 0).
 * Because each lane sees its elements in the same order and every exp is the same sequence of
 * fused multiply-adds, the scalar, AVX2 and AVX-512 paths give the same bits.
 */
#ifndef PS_TOPK_H
#define PS_TOPK_H

#include "base/impl.h"
#include "kernels/exp_canon.h"

#include <math.h>

#define PS_TOPK_BLOCK 64        /* logits per block = lanes of the canonical sum */
#define PS_TOPK_CHUNK_BLOCKS 64 /* full blocks per chunk (4096 logits; a redo reads L1) */

/* A chunk whose maximum exceeds the shift by more than this is redone with its own maximum. */
#define PS_TOPK_SHIFT_SLACK 64.0f

/* One pass over the nb full blocks starting at block b0 of `row` (dtype dt):
 * bm[i] = max of block b0 + i (bm may be NULL), C[j] += exp_canon(x - shift) for every element
 * x in lane j, blocks in ascending order (C has 64 floats). Returns the maximum over those
 * blocks (-inf if all are -inf). NaN handling of the maxima is unspecified (a NaN reaches C). */
typedef float (*ps_fused_fn)(const void *row, ps_dtype dt, int64_t b0, int64_t nb, float shift,
                             float *bm, float *C);
/* The exp-sum part alone: C[j] += exp_canon(x - shift), as above. */
typedef void (*ps_expsum_fn)(const void *row, ps_dtype dt, int64_t b0, int64_t nb, float shift,
                             float *C);

/* The statistics pass (entropy, KL divergence), after the lse is known. For every element x
 * of `a` over the nb full blocks from b0, with l = x - lse_a (float32, the logprob), p =
 * exp_canon(l) and lb = (b ? y - lse_b : 0) for the element y of `b` at the same index:
 *   E[j] += (l < PS_EXP_LO ? 0 : p * (l - lb))      lane j, blocks in ascending order
 * (so a -inf logit adds exactly 0). Entropy is -sum with b == NULL; KL(a || b) is the sum. The
 * driver (topk.c) starts E at 0 per chunk of 64 blocks and adds it into double lane totals. */
typedef void (*ps_plogp_fn)(const void *a, const void *b, ps_dtype dt, int64_t b0, int64_t nb,
                            float lse_a, float lse_b, float *E);
/* The statistics pass with varentropy (one row, no second model): E exactly as ps_plogp_fn's
 * with b == NULL (entropy), and in the same read, for the same kept elements, three double
 * lane sums, V = 3 x 64 doubles: V[j] += p, V[64 + j] += a and V[128 + j] += a * (double)l
 * with a = (double)p * (double)l (exact: a product of two floats fits a double); an element
 * with l < PS_EXP_LO adds +0 to all three. Varentropy is then the variance of l under p
 * normalised by its own sum (topk.c): S2 / S0 - (S1 / S0)^2, which a rounding of the float32
 * lse (the same shift of every l) does not move. V is never reset by the driver: each lane
 * sees its elements in ascending order over the row. */
typedef void (*ps_plogpv_fn)(const void *a, ps_dtype dt, int64_t b0, int64_t nb, float lse_a,
                             float *E, double *V);
/* Counts over the nb full blocks from b0: *gt += #(x > v), *eq += #(x == v). */
typedef void (*ps_count_fn)(const void *row, ps_dtype dt, int64_t b0, int64_t nb, float v,
                            int64_t *gt, int64_t *eq);

/* One term of the statistics pass, in scalar code (the SIMD kernels compute the same). */
static inline float ps_plogp_term(float l, float lb) {
    float p = ps_exp_canon(l);
    return l < PS_EXP_LO ? 0.0f : p * (l - lb);
}

/* One element of the varentropy sums, in scalar code (the SIMD kernels compute the same). */
static inline void ps_plogpv_term(float l, double *V, int64_t j) {
    double p = 0.0, a = 0.0, b = 0.0;
    if (!(l < PS_EXP_LO)) {
        p = (double)ps_exp_canon(l);
        a = p * (double)l;
        b = a * (double)l;
    }
    V[j] += p;
    V[PS_TOPK_BLOCK + j] += a;
    V[2 * PS_TOPK_BLOCK + j] += b;
}

void ps_topk_plogpv_avx2(const void *a, ps_dtype dt, int64_t b0, int64_t nb, float lse_a,
                         float *E, double *V);
void ps_topk_plogpv_avx512(const void *a, ps_dtype dt, int64_t b0, int64_t nb, float lse_a,
                           float *E, double *V);
void ps_topk_plogp_avx2(const void *a, const void *b, ps_dtype dt, int64_t b0, int64_t nb,
                        float lse_a, float lse_b, float *E);
void ps_topk_count_avx2(const void *row, ps_dtype dt, int64_t b0, int64_t nb, float v,
                        int64_t *gt, int64_t *eq);
void ps_topk_plogp_avx512(const void *a, const void *b, ps_dtype dt, int64_t b0, int64_t nb,
                          float lse_a, float lse_b, float *E);
void ps_topk_count_avx512(const void *row, ps_dtype dt, int64_t b0, int64_t nb, float v,
                          int64_t *gt, int64_t *eq);

/* Bit j set when logit 64 * blk + j of `row` (a full block) is >= T. */
typedef uint64_t (*ps_gemask_fn)(const void *row, ps_dtype dt, int64_t blk, float T);

float ps_topk_fused_avx2(const void *row, ps_dtype dt, int64_t b0, int64_t nb, float shift,
                         float *bm, float *C);
void ps_topk_expsum_avx2(const void *row, ps_dtype dt, int64_t b0, int64_t nb, float shift,
                         float *C);
float ps_topk_fused_avx512(const void *row, ps_dtype dt, int64_t b0, int64_t nb, float shift,
                           float *bm, float *C);
void ps_topk_expsum_avx512(const void *row, ps_dtype dt, int64_t b0, int64_t nb, float shift,
                           float *C);
uint64_t ps_topk_gemask_avx2(const void *row, ps_dtype dt, int64_t blk, float T);
uint64_t ps_topk_gemask_avx512(const void *row, ps_dtype dt, int64_t blk, float T);

#endif /* PS_TOPK_H */
