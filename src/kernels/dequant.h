/*
 * dequant.h — one row of each weight type widened to float32, bitwise as ggml's
 * dequantize_row_* (dequant.c): a scalar form per type and AVX2 / AVX-512 forms with the same
 * bits. The weight-type table (types.h) points at these; nothing here looks a type up.
 */
#ifndef PS_DEQUANT_H
#define PS_DEQUANT_H

#include <stdint.h>

/* row (n elements, n a multiple of the block) -> out (n floats). */
typedef void (*ps_row_to_f32_fn)(const void *row, float *out, int64_t n);

/* The scalar dequantisations (dequant.c), bitwise ggml's; n a multiple of the block. */
void ps_dequant_f32(const void *row, float *out, int64_t n);
void ps_dequant_f16(const void *row, float *out, int64_t n);
void ps_dequant_bf16(const void *row, float *out, int64_t n);
void ps_dequant_q4_0(const void *row, float *out, int64_t n);
void ps_dequant_q4_1(const void *row, float *out, int64_t n);
void ps_dequant_q5_0(const void *row, float *out, int64_t n);
void ps_dequant_q5_1(const void *row, float *out, int64_t n);
void ps_dequant_q8_0(const void *row, float *out, int64_t n);
void ps_dequant_q2_k(const void *row, float *out, int64_t n);
void ps_dequant_q3_k(const void *row, float *out, int64_t n);
void ps_dequant_q4_k(const void *row, float *out, int64_t n);
void ps_dequant_q5_k(const void *row, float *out, int64_t n);
void ps_dequant_q6_k(const void *row, float *out, int64_t n);
void ps_dequant_iq4_nl(const void *row, float *out, int64_t n);
void ps_dequant_iq4_xs(const void *row, float *out, int64_t n);
void ps_dequant_mxfp4(const void *row, float *out, int64_t n);
/* SIMD widening of F16 / BF16 / Q8_0, and Q4_K / Q5_K / Q6_K (AVX-512), with the same bits as
 * the scalar forms. */
void ps_dequant_f16_avx2(const void *row, float *out, int64_t n);
void ps_dequant_bf16_avx2(const void *row, float *out, int64_t n);
void ps_dequant_q8_0_avx2(const void *row, float *out, int64_t n);
void ps_dequant_f16_avx512(const void *row, float *out, int64_t n);
void ps_dequant_bf16_avx512(const void *row, float *out, int64_t n);
void ps_dequant_q8_0_avx512(const void *row, float *out, int64_t n);
void ps_dequant_q4_k_avx512(const void *row, float *out, int64_t n);
void ps_dequant_q5_k_avx512(const void *row, float *out, int64_t n);
void ps_dequant_q6_k_avx512(const void *row, float *out, int64_t n);
void ps_dequant_q4_0_avx2(const void *row, float *out, int64_t n);
void ps_dequant_q4_0_avx512(const void *row, float *out, int64_t n);
void ps_dequant_q4_1_avx2(const void *row, float *out, int64_t n);
void ps_dequant_q4_1_avx512(const void *row, float *out, int64_t n);
void ps_dequant_q5_0_avx2(const void *row, float *out, int64_t n);
void ps_dequant_q5_0_avx512(const void *row, float *out, int64_t n);
void ps_dequant_q5_1_avx2(const void *row, float *out, int64_t n);
void ps_dequant_q5_1_avx512(const void *row, float *out, int64_t n);
void ps_dequant_iq4_nl_avx2(const void *row, float *out, int64_t n);
void ps_dequant_iq4_nl_avx512(const void *row, float *out, int64_t n);
void ps_dequant_mxfp4_avx2(const void *row, float *out, int64_t n);
void ps_dequant_mxfp4_avx512(const void *row, float *out, int64_t n);
void ps_dequant_iq4_xs_avx2(const void *row, float *out, int64_t n);
void ps_dequant_iq4_xs_avx512(const void *row, float *out, int64_t n);
void ps_dequant_q2_k_avx2(const void *row, float *out, int64_t n);
void ps_dequant_q2_k_avx512(const void *row, float *out, int64_t n);
void ps_dequant_q3_k_avx2(const void *row, float *out, int64_t n);
void ps_dequant_q3_k_avx512(const void *row, float *out, int64_t n);

/* E8M0 exponent byte -> 2^(e - 128) (ggml's half of the E8M0 value, MXFP4's block scale). */
float ps_e8m0_half_to_f32(uint8_t e);

#endif /* PS_DEQUANT_H */
