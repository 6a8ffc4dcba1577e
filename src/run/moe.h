/*
 * moe.h — the mixture-of-experts FFN of a layer (moe.c has the definition and the order of
 * operations).
 */
#ifndef PS_MOE_H
#define PS_MOE_H

#include "run/state.h"

/* out (n, n_embd) = the expert FFN of layer `layer` (PS_L_FFN_MOE) applied to s->xb (n, n_embd),
 * n in 1..s->n_batch:
 *   router gate_inp (n_embd -> n_expert), softmax, top n_expert_used, weights (renormalised
 *   when hp.expert_norm), experts gate_exps / up_exps (n_embd -> n_ff_exp), SwiGLU, down_exps
 *   (n_ff_exp -> n_embd), the weighted sum in selection order.
 * Uses the session's moe_* scratch; out must not alias s->xb. Bitwise independent of the
 * thread count and of how positions are split into calls. */
void ps_moe_ffn(ps_session *s, const ps_matmul_env *env, int32_t layer, int32_t n, float *out);

#endif
