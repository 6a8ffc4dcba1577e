/*
 * quantize.h — float32 rows -> rows of every weight type (quantize.c): the plain
 * round-to-nearest quantisers gen-model writes its fixtures with, laid out exactly as ggml
 * lays the blocks out. Weights only; the activation quantisers of the matmuls are in qact.h.
 */
#ifndef PS_QUANTIZE_H
#define PS_QUANTIZE_H

#include "kernels/qblocks.h"

/* x (n floats, n a multiple of the block) -> one row of the type. */
typedef void (*ps_row_from_f32_fn)(const float *x, void *row, int64_t n);

/* The fixture quantisers (quantize.c): round to nearest with scales from each block's range
 * (not llama.cpp's error-minimising search); the layouts are exactly ggml's. */
void ps_quantize_f32(const float *x, void *row, int64_t n);
void ps_quantize_f16(const float *x, void *row, int64_t n);
void ps_quantize_bf16(const float *x, void *row, int64_t n);
void ps_quantize_q4_0(const float *x, void *row, int64_t n);
void ps_quantize_q4_1(const float *x, void *row, int64_t n);
void ps_quantize_q5_0(const float *x, void *row, int64_t n);
void ps_quantize_q5_1(const float *x, void *row, int64_t n);
void ps_quantize_q8_0(const float *x, void *row, int64_t n);
void ps_quantize_q2_k(const float *x, void *row, int64_t n);
void ps_quantize_q3_k(const float *x, void *row, int64_t n);
void ps_quantize_q4_k(const float *x, void *row, int64_t n);
void ps_quantize_q5_k(const float *x, void *row, int64_t n);
void ps_quantize_q6_k(const float *x, void *row, int64_t n);
void ps_quantize_iq4_nl(const float *x, void *row, int64_t n);
void ps_quantize_iq4_xs(const float *x, void *row, int64_t n);
void ps_quantize_mxfp4(const float *x, void *row, int64_t n);

/* x (n floats, n a multiple of 32) -> n/32 Q8_0 blocks, as llama.cpp's reference quantiser:
 * d = max|x| / 127 stored as f16, q = round(x / d) (round half away from zero). */
void ps_quant_f32_to_q8_0(const float *x, ps_block_q8_0 *out, int64_t n);

#endif /* PS_QUANTIZE_H */
