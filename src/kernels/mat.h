/*
 * mat.h — what every matrix kernel shares: the weight matrix (ps_mat), where a product runs
 * (ps_matmul_env: pool, ISA, per-thread scratch), the items of a grouped call (ps_mm_item), and
 * the grouped driver that the block-type kernels plug into (ps_mm_group_run, mat.c). The
 * kernels themselves are in matmul_float.c (F32 / F16 / BF16) and matmul_quant.c (the block
 * types); matmul.h picks one per weight type.
 */
#ifndef PS_MAT_H
#define PS_MAT_H

#include "base/impl.h"
#include "base/ggml_type.h"

/* A weight matrix: n_out rows of n_in elements of `type`, rows row_bytes apart. */
typedef struct {
    const void *data;
    uint32_t type;       /* a weight type (ps_ggml_type) with a row in types.h */
    int64_t n_in;        /* ne[0] */
    int64_t n_out;       /* ne[1] */
    size_t row_bytes;
    const void *tiles;   /* BF16 only: the AMX tile copy (ps_amx_bf16_pack), or NULL */
    const void *dp_tiles; /* BF16 only: the vdpbf16ps tile copy (ps_bf16_dp_pack_to), or NULL */
    const void *qtiles;  /* Q4_K / Q6_K only: the experts' tile copy (ps_mmq_copy_pack), or NULL */
} ps_mat;

/* Where a matmul runs: the pool, the resolved ISA (never AUTO) and per-thread scratch
 * (thread t owns scratch + t * scratch_stride floats, 64-byte aligned). */
typedef struct {
    ps_pool *pool;
    ps_isa isa;
    float *scratch;
    size_t scratch_stride;
    bool f32_act;        /* float32 activations for every weight type (PS_ACT_F32) */
    bool amx;            /* BF16 and the block types (Q8_0, Q4_K, ...) through AMX tiles
                          * (isa must be AVX512, and ps_cpu_has_amx() true); unused with
                          * f32_act */
} ps_matmul_env;

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

#endif /* PS_MAT_H */
