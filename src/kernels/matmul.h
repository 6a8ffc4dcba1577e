/*
 * matmul.h — the one matrix kernel of the forward pass:
 *
 *     y (n_rows, n_out) = x (n_rows, n_in) @ W^T,   W = n_out rows of n_in weights in W's type
 *
 * (a GGUF 2-D tensor with ne[0] = n_in, ne[1] = n_out, used in place from the mapping). Also the
 * dot product the attention uses. Every output element is reduced in a fixed order that depends
 * only on the ISA and n_in — never on the thread count, the tile a row lands in or how many rows
 * the call has — so logits do not change with threads or batch geometry.
 * Q8_0 weights are multiplied as llama.cpp does: each activation row is quantised to Q8_0 blocks
 * (ps_quant_act_q8), y = sum over blocks b, in order, of fmaf(isum_b, dw_b * dx_b, acc) with
 * isum_b the exact int32 dot product of the block's int8 values; that order is the same on
 * every ISA, so Q8_0 results are bitwise equal across scalar / AVX2 / AVX-512 too.
 * BF16 weights, also as llama.cpp: each activation row is rounded to bf16 (ps_quant_act_bf16)
 * and the exact bf16 x bf16 products are summed in float32 (AVX-512 BF16 vdpbf16ps where the CPU
 * has it). With env->f32_act both take float32 activations like F32/F16 (weights widened
 * exactly): the closest to the float64 reference, at half (BF16) to a third (Q8_0) the speed.
 */
#ifndef PS_MATMUL_H
#define PS_MATMUL_H

#include "gguf/gguf.h"

/* A weight matrix: n_out rows of n_in elements of `type`, rows row_bytes apart. */
typedef struct {
    const void *data;
    uint32_t type;       /* PS_GGML_F32 / F16 / BF16 / Q8_0 */
    int64_t n_in;        /* ne[0] */
    int64_t n_out;       /* ne[1] */
    size_t row_bytes;
    const void *tiles;   /* BF16 only: the AMX tile copy (ps_amx_bf16_pack), or NULL */
} ps_mat;

/* Where a matmul runs: the pool, the resolved ISA (never AUTO) and per-thread scratch
 * (thread t owns scratch + t * scratch_stride floats, 64-byte aligned). */
typedef struct {
    ps_pool *pool;
    ps_isa isa;
    float *scratch;
    size_t scratch_stride;
    bool f32_act;        /* float32 activations for every weight type (PS_ACT_F32) */
    bool amx;            /* BF16 and Q8_0 through AMX tiles (isa must be AVX512, and
                          * ps_cpu_has_amx() true); unused with f32_act */
} ps_matmul_env;

/* Floats of per-thread scratch ps_matmul needs for weights with up to max_n_in inputs (a
 * multiple of 16, so that strides keep 64-byte alignment): a weight tile, a slot for PS_CHUNK
 * (256) rows of quantised activations (~1.13 bytes per input; a Q8_0 call quantises up to
 * 256 x threads rows per pass into the slots of all threads, so the scratch must be one block
 * of n_threads strides; a forward chunk only touches the first slot) and accumulators. */
size_t ps_matmul_scratch_floats(int64_t max_n_in);

/* y (n_rows, n_out) = x (n_rows, n_in) @ W^T. x rows are ldx floats apart, y rows ldy apart.
 * Weight rows are spread over the pool in fixed tiles. */
void ps_matmul(const ps_matmul_env *env, const ps_mat *w, const float *x, int64_t ldx,
               int64_t n_rows, float *y, int64_t ldy);

/* One product of a grouped call: for m < n_w (1 or 2: matrices that share the input rows, as
 * an expert's gate and up), y[m] (n_rows, w[m].n_out) rows ldy apart = x (n_rows, n_in) rows
 * ldx apart @ w[m]^T. */
typedef struct {
    const float *x;
    int64_t ldx, n_rows;
    int32_t n_w;
    ps_mat w[2];
    float *y[2];
    int64_t ldy;
} ps_mm_item;

/* Every item's products, each bitwise what ps_matmul(env, &w[m], x, ldx, n_rows, y[m], ldy)
 * gives on its own (the plain form: that loop). When all matrices share one type, n_in, n_out
 * and n_w and the type's native kernel has a grouped form (Q8_0 and the integer block types,
 * not with f32_act), the pool runs them together: the rows of all items are quantised as one
 * set in passes that fill the threads' activation slots (a row once for both of an item's
 * matrices), then one task per (run of an item's rows, matrix, weight tile) — instead of two
 * pool dispatches per matrix. Other calls take the plain loop. No y may overlap any x. */
void ps_matmul_group(const ps_matmul_env *env, const ps_mm_item *items, int32_t n_items);

/* How a grouped call lays out one pass (ps_mm_plan): runs of rows of one item, each inside one
 * thread slot of activation rows. */
typedef struct {
    int32_t item;
    int32_t slot;  /* the thread slot the run is quantised into */
    int64_t off;   /* its first row in the slot */
    int64_t row;   /* its first row in the item */
    int64_t n;     /* rows */
    int64_t q0;    /* its first row in the pass (the sum of the earlier runs' n) */
} ps_mm_seg;

#define PS_MM_SEGS 128 /* runs per pass at most */

/* The next pass from the cursor (*item, *row): runs placed one after another into n_slots slots
 * of slot_rows rows each, every run starting at a multiple of align (AMX reads groups of 16
 * rows), at most PS_MM_SEGS runs; an item that does not fit is split across slots or passes.
 * Returns the number of runs (0 when every row is placed) and advances the cursor. */
int32_t ps_mm_plan(const ps_mm_item *items, int32_t n_items, int32_t *item, int64_t *row,
                   int32_t n_slots, int64_t slot_rows, int64_t align, ps_mm_seg *segs);

/* A type's grouped kernel as ps_mm_group_run drives it. job: its call state. quant: activation
 * row x into row r of thread slot `slot` (slots of slot_rows rows). prep (or NULL): once a
 * pass is quantised, before its tiles (AMX: the transposes of whole groups of 16 rows).
 * prefetch: the rows of weight tile `tile` of w, read a little ahead. tile: weight tile `tile`
 * (n_tiles per matrix) of w against the rows of run sg into y (the run's first row, w's first
 * output), rows ldy apart; thread: the pool thread running it (its scratch). */
typedef struct {
    void *job;
    int64_t slot_rows, align, n_tiles;
    int32_t n_threads;
    void (*quant)(void *job, const float *x, int32_t slot, int64_t r);
    void (*prep)(void *job, const ps_mm_seg *segs, int32_t n_segs);
    void (*prefetch)(const ps_mat *w, int64_t tile);
    void (*tile)(void *job, const ps_mat *w, const ps_mm_seg *sg, int64_t tile, float *y,
                 int64_t ldy, int32_t thread);
} ps_mm_group_kernel;

/* The grouped driver every grouped kernel shares: passes planned by ps_mm_plan (runs aligned
 * to k->align rows), each quantised by one pool dispatch over its rows, then k->prep, then one
 * task per (run, matrix, weight tile) in that order, each prefetching the tile two rounds of
 * k->n_threads tasks ahead. The items must share n_w and their matrices one shape. */
void ps_mm_group_run(ps_pool *pool, const ps_mm_item *items, int32_t n_items,
                     const ps_mm_group_kernel *k);

/* The plain reference: each row converted by ps_quant_row_to_f32_ref, dot products summed in
 * double, rounded once to float. Unless f32_act: Q8_0 activations are quantised by
 * ps_quant_act_q8_ref (exact integer block sums, sum of dw * dx * isum in double) and BF16
 * activations rounded by ps_quant_act_bf16_ref, as ps_matmul does. Single-threaded. PS_OK or
 * PS_ERR_NOMEM (row buffers). */
ps_status ps_matmul_ref(const ps_mat *w, bool f32_act, const float *x, int64_t ldx,
                        int64_t n_rows, float *y, int64_t ldy);

/* sum_i a[i] * b[i] in float with the ISA's fixed reduction order (the same order ps_matmul
 * uses for one output element). */
float ps_dot_f32(ps_isa isa, const float *a, const float *b, int64_t n);

/* y (n) += a * x (n), element by element (fused multiply-add on the SIMD ISAs; every element
 * is one operation, so the result per ISA does not depend on n or alignment). */
void ps_axpy_f32(ps_isa isa, float a, const float *x, float *y, int64_t n);

#endif
