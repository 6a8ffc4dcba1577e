/*
 * matmul_float.h — the float kernels behind ps_matmul (matmul_float.c): float32 tiles for F32
 * weights and for any type widened exactly to float32 (F16, and every type with float32
 * activations), the BF16 kernel (bf16-rounded activations, vdpbf16ps or AMX), and the dot
 * product and axpy the attention uses with the same reduction order.
 */
#ifndef PS_MATMUL_FLOAT_H
#define PS_MATMUL_FLOAT_H

#include "kernels/mat.h"
#include "kernels/dequant.h"

/* Floats of per-thread scratch these kernels need for up to max_n_in inputs: a tile of 16
 * widened rows (or a BF16 AMX task's scratch), one slot of PS_CHUNK rounded activation rows and
 * the parked accumulators. */
size_t ps_mmf_scratch_floats(int64_t max_n_in);

/* y = x @ W^T on float32 activations, weight rows widened into the thread's tile by to_f32
 * (F32 weights are used in place, to_f32 unused). Every output element is one accumulator fed
 * in k order (ps_dot_f32's order), whatever the tile, thread or batch split. */
void ps_mmf(const ps_matmul_env *env, const ps_mat *w, ps_row_to_f32_fn to_f32, const float *x,
            int64_t ldx, int64_t n_rows, float *y, int64_t ldy);

/* Its reference: each weight row widened by to_f32, dot products in double, rounded once. */
ps_status ps_mmf_ref(const ps_mat *w, ps_row_to_f32_fn to_f32, const float *x, int64_t ldx,
                     int64_t n_rows, float *y, int64_t ldy);

/* BF16 weights with native activations (ps_matmul's contract, matmul.h): each activation row
 * rounded to bf16 (ps_quant_act_bf16), products summed in float32 (vdpbf16ps, AMX tiles, or the
 * float32 tiles on the rounded rows). The reference rounds with ps_quant_act_bf16_ref and then
 * runs ps_mmf_ref. */
void ps_matmul_bf16(const ps_matmul_env *env, const ps_mat *w, const float *x, int64_t ldx,
                    int64_t n_rows, float *y, int64_t ldy);
ps_status ps_matmul_bf16_ref(const ps_mat *w, const float *x, int64_t ldx, int64_t n_rows,
                             float *y, int64_t ldy);

/* The vdpbf16ps tile copy of a BF16 matrix, made once at load so that the AVX-512 BF16 kernel
 * reads its tasks' tiles in place instead of packing them per call (the same bytes in the same
 * order, so the same results): groups of 4 weight rows, each as 32-input chunks of 4 x 32 bf16
 * (256 bytes; zeros past n_in and past n_out), one task's PS_BF16_DP_ROWS rows after another.
 * Its size (0 where there is no such kernel), and the copy of rows [row0, row1) into their
 * place in the copy starting at dst (64-byte aligned; row0 a multiple of PS_BF16_DP_ROWS,
 * row1 one too or n_out: a matrix can be copied in slices; x86-64 with AVX-512 BF16 only). */
#define PS_BF16_DP_ROWS 64
size_t ps_bf16_dp_tiles_bytes(const ps_mat *w);
void ps_bf16_dp_pack_to(const ps_mat *w, int64_t row0, int64_t row1, void *dst);
/* Row j of a matrix with a tile copy (w->dp_tiles), widened exactly to float32 from the copy:
 * the same floats as widening row j of w->data. */
void ps_bf16_dp_row_to_f32(const ps_mat *w, int64_t j, float *out);

/* F16 weights with native activations: each activation row rounded to half
 * (ps_quant_act_f16), as llama.cpp's x86 F16 products take it, then the float32 tiles with the
 * weights widened exactly (each product of two halves is exact in float32, so only the order of
 * the sums differs from llama.cpp's). The reference rounds with ps_quant_act_f16_ref and then
 * runs ps_mmf_ref. */
void ps_matmul_f16(const ps_matmul_env *env, const ps_mat *w, const float *x, int64_t ldx,
                   int64_t n_rows, float *y, int64_t ldy);
ps_status ps_matmul_f16_ref(const ps_mat *w, const float *x, int64_t ldx, int64_t n_rows,
                            float *y, int64_t ldy);

/* The machine's vdpbf16ps peak in GFLOP/s (64 flops per 512-bit vdpbf16ps: 16 lanes x 2
 * products x multiply-add), measured now on the pool's threads: chains of 24 independent
 * accumulators on registers, no memory operands, for about `seconds`; timed with the process's
 * CPU time when cpu_clock (one thread on a shared machine), else wall time. 0 when the CPU
 * lacks AVX-512 BF16. What the BF16 matmul figures of bench_matmul and `promptscore bench`
 * are set against: the clock of a shared machine moves, so measure it next to the figure. */
double ps_bf16_peak_gflops(ps_pool *pool, double seconds, bool cpu_clock);

/* sum_i a[i] * b[i] in float with the ISA's fixed reduction order (the same order ps_matmul
 * uses for one output element). */
float ps_dot_f32(ps_isa isa, const float *a, const float *b, int64_t n);

/* y (n) += a * x (n), element by element (fused multiply-add on the SIMD ISAs; every element
 * is one operation, so the result per ISA does not depend on n or alignment). */
void ps_axpy_f32(ps_isa isa, float a, const float *x, float *y, int64_t n);

#endif /* PS_MATMUL_FLOAT_H */
