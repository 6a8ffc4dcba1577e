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
 * exactly): the closest to the float64 reference, and slower (docs/figures.md).
 */
#ifndef PS_MATMUL_H
#define PS_MATMUL_H

#include "kernels/mat.h"
#include "kernels/matmul_float.h"

/* Floats of per-thread scratch ps_matmul needs for weights with up to max_n_in inputs (a
 * multiple of 16, so that strides keep 64-byte alignment): the larger of the float kernels'
 * (ps_mmf_scratch_floats) and the block types' (ps_mmq_scratch_floats) — a weight tile, a slot
 * for PS_CHUNK (256) rows of quantised activations (a block-type call quantises up to 256 x
 * threads rows per pass into the slots of all threads, so the scratch must be one block of
 * n_threads strides; a forward chunk only touches the first slot) and accumulators. */
size_t ps_matmul_scratch_floats(int64_t max_n_in);

/* y (n_rows, n_out) = x (n_rows, n_in) @ W^T. x rows are ldx floats apart, y rows ldy apart.
 * Weight rows are spread over the pool in fixed tiles. */
void ps_matmul(const ps_matmul_env *env, const ps_mat *w, const float *x, int64_t ldx,
               int64_t n_rows, float *y, int64_t ldy);

/* Row j of w (n_in floats, exactly its weights widened): from the vdpbf16ps tile copy where w
 * has one (a tied token_embd whose file pages the copy gave back), else from w's row in its
 * type. What the forward pass reads an embedding with. */
void ps_mat_row_to_f32(ps_isa isa, const ps_mat *w, int64_t j, float *out);

/* Every item's products, each bitwise what ps_matmul(env, &w[m], x, ldx, n_rows, y[m], ldy)
 * gives on its own (the plain form: that loop). When all matrices share one type, n_in, n_out
 * and n_w and the type's native kernel has a grouped form (Q8_0 and the integer block types,
 * not with f32_act), the pool runs them together: the rows of all items are quantised as one
 * set in passes that fill the threads' activation slots (a row once for both of an item's
 * matrices), then one task per (run of an item's rows, matrix, weight tile) — instead of two
 * pool dispatches per matrix. Other calls take the plain loop. No y may overlap any x. */
void ps_matmul_group(const ps_matmul_env *env, const ps_mm_item *items, int32_t n_items);

/* The plain reference: each row converted by the type's scalar to_f32, dot products summed in
 * double, rounded once to float. Unless f32_act, a type with a native kernel takes that
 * kernel's reference (types.h: matmul_ref): the block types' activations quantised by the
 * reference quantisers of qact.h (ps_mmq_ref), BF16's rounded by ps_quant_act_bf16_ref, as
 * ps_matmul does. Single-threaded. PS_OK or PS_ERR_NOMEM (row buffers). */
ps_status ps_matmul_ref(const ps_mat *w, bool f32_act, const float *x, int64_t ldx,
                        int64_t n_rows, float *y, int64_t ldy);

#endif
