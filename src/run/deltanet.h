/*
 * deltanet.h — the pieces of a Gated DeltaNet (linear attention) layer of Qwen3.5 / 3.6
 * (`qwen35`, `qwen35moe`), as llama.cpp's CPU ops compute them (ggml_ssm_conv, ggml_l2_norm,
 * ggml_gated_delta_net, softplus, sigmoid). deltanet.c has them; forward.c calls them.
 *
 * Shapes (one sequence; n tokens of a chunk, channels contiguous per token):
 *   conv:  x (n, ch) rows ldx apart, state (d_conv - 1, ch) = the previous d_conv - 1 inputs,
 *          oldest first, w (ch, d_conv) = ssm_conv1d (GGUF ne {d_conv, ch}) ->
 *          y (n, ch) = silu(sum_{i < d_conv} in[t + i] * w[c][i]), in = state ++ x;
 *          the state becomes the last d_conv - 1 rows of in.
 *   delta: one value head: S (dv, dk) the state transposed (row j = value dim j, as ggml keeps
 *          it), q, k (n, dk), v (n, dv), g, beta (n) -> o (n, dv). Per token, in order:
 *          S *= exp(g); for each row j: d_j = (v_j - S_j . k) * beta; S_j += d_j * k;
 *          o_j = (S_j . q) * scale.
 * Every result is a fixed sequence of float operations that depends only on its inputs and the
 * ISA (dot products: ps_dot_f32's fixed order), never on threads or on where a chunk ends: the
 * recurrence runs token by token, so any chunking of a prompt gives the same bits.
 */
#ifndef PS_DELTANET_H
#define PS_DELTANET_H

#include "base/impl.h"

/* y (n, ch) rows ldy apart, channels c0..c1-1 only (a task's slice): causal depthwise conv of
 * width d_conv over state ++ x, then silu; state (d_conv - 1, ch) advanced by the n inputs. */
void ps_dn_conv_silu(ps_isa isa, const float *x, int64_t ldx, int32_t n, float *state,
                     const float *w, int32_t d_conv, int64_t ch, int64_t c0, int64_t c1, float *y,
                     int64_t ldy);

/* x (n) *= 1 / max(sqrt(sum x^2 in double), eps) (ggml_l2_norm). */
void ps_dn_l2norm(float *x, int64_t n, float eps);

/* 1 / (1 + exp(-x)) and log(1 + exp(x)) (x above 20: x), in float with libm. */
float ps_dn_sigmoid(float x);
float ps_dn_softplus(float x);

/* The delta rule for one value head over n tokens (see the header). q, k rows ldqk apart,
 * v rows ldv apart, o rows ldo apart, g and beta ldgb apart; S (dv * dk) updated in place; d = dk = dv. */
void ps_dn_delta_head(ps_isa isa, float *S, int64_t d, int32_t n, const float *q,
                      const float *k, int64_t ldqk, const float *v, int64_t ldv, float *o,
                      int64_t ldo,
                      const float *g, const float *beta, int64_t ldgb, float scale);

/* The plain reference of ps_dn_delta_head: dot products summed in double, each rounded once,
 * exp in double. Used by the tests next to the fast one. */
void ps_dn_delta_head_ref(float *S, int64_t d, int32_t n, const float *q, const float *k,
                          int64_t ldqk, const float *v, int64_t ldv, float *o, int64_t ldo,
                          const float *g,
                          const float *beta, int64_t ldgb, float scale);

#endif
