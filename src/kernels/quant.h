/*
 * quant.h — weight row formats: conversion of one row of weights of any supported type to
 * float32 (the kernels dequantise rows on the fly, never whole tensors), float32 -> Q8_0
 * blocks (weights, and the activations of the int8 Q8_0 matmul), float32 -> bf16 activations
 * (the BF16 matmul), and the byte size of a row. Each conversion has a scalar reference and
 * SIMD variants chosen by the caller's ISA; every variant gives bitwise the same result (the
 * conversions are exact: f16/bf16 -> f32 is exact, and Q8_0 is one f32 multiply per weight;
 * the roundings to Q8_0 and bf16 are defined per element).
 */
#ifndef PS_QUANT_H
#define PS_QUANT_H

#include "gguf/gguf.h"
#include "kernels/qblocks.h"

/* True for the tensor types the kernels compute with: those with a row in the weight-type
 * table (types.h). */
bool ps_quant_supported(uint32_t type);

/* Bytes of one row of n elements of `type`; 0 when n is not a multiple of the type's block or
 * the type is unsupported. */
size_t ps_quant_row_bytes(uint32_t type, int64_t n);

/* row (n elements of `type`, n a multiple of the block size) -> out (n floats), bitwise
 * ggml's dequantisation (the table's to_f32). isa: PS_ISA_SCALAR / AVX2 / AVX512
 * (AUTO = ps_isa_best()). Same result for every isa. */
void ps_quant_row_to_f32(ps_isa isa, uint32_t type, const void *row, float *out, int64_t n);
/* The plain reference. */
void ps_quant_row_to_f32_ref(uint32_t type, const void *row, float *out, int64_t n);

/* x (n floats, n a multiple of 32) -> n/32 Q8_0 blocks, as llama.cpp's reference quantiser:
 * d = max|x| / 127 stored as f16, q = round(x / d) (round half away from zero). */
void ps_quant_f32_to_q8_0(const float *x, ps_block_q8_0 *out, int64_t n);

/* Activations for the int8 Q8_0 matmul (llama.cpp's quantize_row_q8_0, as forward.py --q8-act):
 * x (n floats, n a multiple of 32) -> q (n bytes) and d (n/32 floats), per block of 32:
 *     amax = max|x|, dd = amax / 127, id = dd != 0 ? 1 / dd : 0 (float32),
 *     d = f16(dd) widened back to float, q = round-half-away(clamp(x * id, -127, 127)).
 * A block holding NaN or +-inf gets d = NaN and q = 0, so every product it feeds is NaN.
 * offset: q is stored as q + 128 (uint8, the unsigned operand of AVX-512 VNNI), otherwise as
 * int8. |q| <= 127 always. isa picks the variant; every variant writes the same bytes. */
void ps_quant_act_q8(ps_isa isa, const float *x, int64_t n, uint8_t *q, float *d, bool offset);
/* The plain reference (roundf, fmaxf/fminf). */
void ps_quant_act_q8_ref(const float *x, int64_t n, uint8_t *q, float *d, bool offset);

/* Activations for the BF16 matmul: x (n floats) rounded to bfloat16, to nearest even, exactly
 * as ps_f32_to_bf16 (NaN stays NaN, made quiet; +-inf stays; subnormals are kept, not flushed;
 * a finite value past the largest bf16 rounds to inf). Writes the bf16 bits to out and/or the
 * same values widened back to float32 to out_f32 (either may be NULL). isa picks the variant;
 * every variant writes the same bits. */
void ps_quant_act_bf16(ps_isa isa, const float *x, int64_t n, uint16_t *out, float *out_f32);
/* The plain reference (ps_f32_to_bf16 per element). */
void ps_quant_act_bf16_ref(const float *x, int64_t n, uint16_t *out, float *out_f32);

#endif
