/*
 * arch.c — the architecture table (see arch.h) and the per-layer tensors of every feature.
 *
 *   family     RoPE    layers                                     keys beyond the common ones
 *   llama      normal  attention, dense SwiGLU, or experts        expert_count, expert_used_count
 *                      when expert_count > 0 (Mixtral)            (when there are experts)
 *   qwen2      neox    attention with q/k/v biases, dense SwiGLU  -
 *   qwen3      neox    attention with q/k head norms, dense       -
 *   qwen3moe   neox    attention with q/k head norms, experts     expert_count, expert_used_count,
 *                                                                 expert_feed_forward_length
 *
 * The common keys (model.c read_hparams): embedding_length, block_count, attention.head_count,
 * attention.head_count_kv, attention.key_length / value_length, context_length,
 * rope.dimension_count, rope.freq_base, rope.scaling.*, attention.layer_norm_rms_epsilon, and
 * feed_forward_length for dense FFNs. The compute of each feature: forward.c (attention, dense
 * FFN), moe.c (the router and the experts).
 */
#include "arch.h"
#include "model.h"

#include <stddef.h>
#include <stdio.h>

static const ps_arch_info table[] = {
    {PS_ARCH_LLAMA, "llama", PS_ROPE_NORMAL, PS_L_ATTN | PS_L_FFN_DENSE, 0},
    {PS_ARCH_QWEN2, "qwen2", PS_ROPE_NEOX, PS_L_ATTN | PS_L_QKV_BIAS | PS_L_FFN_DENSE, 0},
    {PS_ARCH_QWEN3, "qwen3", PS_ROPE_NEOX, PS_L_ATTN | PS_L_QK_NORM | PS_L_FFN_DENSE, 0},
};

const ps_arch_info *ps_arch_find(const char *name) {
    for (size_t i = 0; i < PS_ARRAY_LEN(table); i++)
        if (!strcmp(table[i].name, name)) return &table[i];
    return NULL;
}

const char *ps_arch_names(void) {
    static char buf[256];
    if (!buf[0]) { /* a constant string built once; the same bytes whichever thread races */
        char tmp[256];
        size_t pos = 0;
        for (size_t i = 0; i < PS_ARRAY_LEN(table); i++)
            pos += (size_t)snprintf(tmp + pos, sizeof tmp - pos, "%s%s", i ? ", " : "",
                                    table[i].name);
        memcpy(buf, tmp, pos + 1);
    }
    return buf;
}

#define F(x) offsetof(ps_layer, x)
const ps_layer_tensor ps_layer_tensors[] = {
    /* name                  read in         required in     kind       ne                     field */
    {"attn_norm.weight",     PS_L_ATTN,      PS_L_ATTN,      PS_T_VEC,  {PS_D_EMBD},           F(attn_norm)},
    {"attn_q.weight",        PS_L_ATTN,      PS_L_ATTN,      PS_T_MAT,  {PS_D_EMBD, PS_D_Q},   F(wq)},
    {"attn_k.weight",        PS_L_ATTN,      PS_L_ATTN,      PS_T_MAT,  {PS_D_EMBD, PS_D_KV},  F(wk)},
    {"attn_v.weight",        PS_L_ATTN,      PS_L_ATTN,      PS_T_MAT,  {PS_D_EMBD, PS_D_KV},  F(wv)},
    {"attn_output.weight",   PS_L_ATTN,      PS_L_ATTN,      PS_T_MAT,  {PS_D_Q, PS_D_EMBD},   F(wo)},
    {"attn_q.bias",          PS_L_ATTN,      PS_L_QKV_BIAS,  PS_T_VEC,  {PS_D_Q},              F(bq)},
    {"attn_k.bias",          PS_L_ATTN,      PS_L_QKV_BIAS,  PS_T_VEC,  {PS_D_KV},             F(bk)},
    {"attn_v.bias",          PS_L_ATTN,      PS_L_QKV_BIAS,  PS_T_VEC,  {PS_D_KV},             F(bv)},
    {"attn_output.bias",     PS_L_ATTN,      0,              PS_T_VEC,  {PS_D_EMBD},           F(bo)},
    {"attn_q_norm.weight",   PS_L_ATTN,      PS_L_QK_NORM,   PS_T_VEC,  {PS_D_HEAD},           F(q_norm)},
    {"attn_k_norm.weight",   PS_L_ATTN,      PS_L_QK_NORM,   PS_T_VEC,  {PS_D_HEAD},           F(k_norm)},
    {"ffn_norm.weight",      PS_L_FFN_DENSE, PS_L_FFN_DENSE, PS_T_VEC,  {PS_D_EMBD},           F(ffn_norm)},
    {"ffn_gate.weight",      PS_L_FFN_DENSE, PS_L_FFN_DENSE, PS_T_MAT,  {PS_D_EMBD, PS_D_FF},  F(w_gate)},
    {"ffn_up.weight",        PS_L_FFN_DENSE, PS_L_FFN_DENSE, PS_T_MAT,  {PS_D_EMBD, PS_D_FF},  F(w_up)},
    {"ffn_down.weight",      PS_L_FFN_DENSE, PS_L_FFN_DENSE, PS_T_MAT,  {PS_D_FF, PS_D_EMBD},  F(w_down)},
};
#undef F
const size_t ps_n_layer_tensors = PS_ARRAY_LEN(ps_layer_tensors);
