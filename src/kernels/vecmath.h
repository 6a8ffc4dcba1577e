/*
 * vecmath.h — element-wise layer pieces with scalar / AVX2 / AVX-512 variants (vecmath.c):
 * an attention row's softmax, SwiGLU's silu(g) * u, RMSNorm, and exp over an array. The scalar variant
 * uses libm expf; the SIMD ones a polynomial exp within 2 ulp. For a given ISA every result
 * depends only on its inputs and n (never on threads or batch geometry).
 */
#ifndef PS_VECMATH_H
#define PS_VECMATH_H

#include "base/impl.h"

/* row (n) = softmax(row * scale): row[j] *= scale; then exp(row[j] - max) / sum. */
void ps_softmax_f32(ps_isa isa, float *row, int32_t n, float scale);
/* The same with an attention sink: the max is max(max_j row[j] * scale, sink) and the sum adds
 * exp(sink - max), so the row sums to 1 - exp(sink - max) / sum. sink = -INFINITY is bitwise
 * ps_softmax_f32. */
void ps_softmax_sink_f32(ps_isa isa, float *row, int32_t n, float scale, float sink);

/* g (n) = (g / (1 + exp(-g))) * u, element by element. */
void ps_silu_mul_f32(ps_isa isa, float *g, const float *u, int64_t n);

/* g (n) = gelu(g) * u, element by element, gelu with the tanh approximation in float as
 * ggml's formula: 0.5f * x * (1 + tanhf(0.7978845608f * x * (1 + 0.044715f * x * x))) (ggml's
 * CPU GeGLU instead looks the gelu up in a half-precision table for |x| < 10; see forward.c).
 * Scalar on every ISA (tanhf), so the same bits everywhere. */
void ps_gelu_mul_f32(float *g, const float *u, int64_t n);

/* y (n) = c * tanhf(x * (1 / c)) for every element (soft-capping, c > 0), in place allowed. */
void ps_softcap_f32(float *x, int64_t n, float c);

/* y (n) = exp(x (n)); y may equal x. */
void ps_exp_f32(ps_isa isa, const float *x, float *y, int64_t n);

/* out (d) = (x * scale) * w, scale = 1 / sqrtf((float)(sum of x[i]^2 in double / d) + eps)
 * (llama.cpp's rms_norm). The sum's order is fixed per ISA (see vecmath.c); out may equal x. */
void ps_rmsnorm_f32(ps_isa isa, float *out, const float *x, const float *w, int64_t d,
                    float eps);

#endif
