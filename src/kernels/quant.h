/*
 * quant.h — weight row formats by type number: conversion of one row of weights of any
 * supported type to float32 (the kernels dequantise rows on the fly, never whole tensors) and
 * the byte size of a row, both answered by the weight-type table (types.h). Each conversion
 * has a scalar reference and SIMD variants chosen by the caller's ISA; every variant gives
 * bitwise the same result (f16/bf16 -> f32 is exact, and a block type is one f32 multiply per
 * weight). The activation quantisers are in qact.h, the fixture quantisers in quantize.h.
 */
#ifndef PS_QUANT_H
#define PS_QUANT_H

#include "base/impl.h"
#include "base/ggml_type.h"

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

#endif
