/*
 * qact.h — activation rows quantised for the native matmul kernels, the way llama.cpp
 * quantises the right-hand side for each weight type (its vec_dot_type):
 *   - Q8_0 (Q4_0, Q5_0, IQ4_NL, MXFP4, Q8_0): blocks of 32, f16-rounded d, int8 q;
 *   - Q8_K (k-quants and IQ4_XS): blocks of 256, float d, int8 q, int16 sums of 16;
 *   - Q8_1 (Q4_1, Q5_1): blocks of 32, Q8_0's d and q plus s = f16(d * sum q);
 *   - bf16 (BF16): each value rounded to bfloat16;
 *   - f16 (F16): each value rounded to IEEE half (x86 llama.cpp's F16 products take f16 on
 *     both sides: ggml's vec_dot_type, and tinyBLAS's only x86 F16 form).
 * Each has a plain reference and SIMD variants picked by the caller's ISA; every variant writes
 * the reference's bytes (the test checks it on random rows, ties, tails and non-finite input).
 */
#ifndef PS_QACT_H
#define PS_QACT_H

#include "base/impl.h"
#include "kernels/qblocks.h"

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

/* Activations for the F16 matmul: x (n floats) rounded to half, to nearest even, exactly as
 * ps_f32_to_f16 (subnormal halves kept; past 65504 rounds to inf; a NaN becomes the quiet NaN
 * of its sign), widened back to float32 into out (which may be x). isa picks the variant
 * (vcvtps2ph / vcvtph2ps with NaN lanes fixed up); every variant writes the same bits. */
void ps_quant_act_f16(ps_isa isa, const float *x, int64_t n, float *out);
/* The plain reference (ps_f32_to_f16, ps_f16_to_f32 per element). */
void ps_quant_act_f16_ref(const float *x, int64_t n, float *out);

/* x (n floats, n a multiple of 256) -> Q8_K: q (n int8), bsums (n/16 int16), d (n/256 floats),
 * exactly llama.cpp's quantize_row_q8_K_ref per block of 256:
 *     max = the first x[j] of largest |x[j]| (sign kept), iscale = -127 / max,
 *     q[j] = min(127, nearest_int(iscale * x[j])) (float product, then round to nearest with
 *     ties to even, as its 1.5 * 2^23 trick), bsums = exact sums of 16 q, d = 1 / iscale;
 *     an all-zero block: q = 0, bsums = 0, d = 0.
 * (d is negative when max is: q then has the opposite signs of x.) A block holding NaN or
 * +-inf gets d = NaN and q = 0, bsums = 0, so every product it feeds is NaN (llama.cpp would
 * compute a finite, meaningless value there). isa picks the variant (AUTO = best). */
void ps_qact_q8_K(ps_isa isa, const float *x, int64_t n, int8_t *q, int16_t *bsums, float *d);
void ps_qact_q8_K_ref(const float *x, int64_t n, int8_t *q, int16_t *bsums, float *d);

/* x (n floats, n a multiple of 32) -> Q8_1 as llama.cpp's quantize_row_q8_1_ref: q (int8) and
 * d (n/32 floats, the f16-rounded scale) exactly as ps_quant_act_q8 (offset = false), and
 * s (n/32 floats) = f16(sum_j q[j] * (amax / 127)) widened back (amax / 127 before its f16
 * rounding); a non-finite block gets s = NaN with its d = NaN. Same bytes on every isa. */
void ps_qact_q8_1(ps_isa isa, const float *x, int64_t n, int8_t *q, float *d, float *s);
void ps_qact_q8_1_ref(const float *x, int64_t n, int8_t *q, float *d, float *s);

#endif
