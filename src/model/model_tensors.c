/*
 * model_tensors.c — the per-layer tensors of every feature (arch.h's PS_L_*): for each, its
 * name in the file ("blk.<l>.<name>"), the features that read it and those that require it, its
 * kind and shape in symbolic dimensions (model.h: ps_dim), and the field of ps_layer its view
 * goes to. The loader (model.c) walks this table for each layer, in this order. It belongs to
 * the model (it names ps_layer's fields), not to the architecture table, which knows families
 * and features only (arch.h), so arch.c needs nothing above it.
 */
#include "model/model.h"

#include <stddef.h>

#define F(x) offsetof(ps_layer, x)
const ps_layer_tensor ps_layer_tensors[] = {
    /* name                  read in         required in     kind       ne                     field   unless */
    {"attn_norm.weight",     PS_L_ATTN | PS_L_DELTANET, PS_L_ATTN | PS_L_DELTANET, PS_T_VEC, {PS_D_EMBD}, F(attn_norm), PS_L_NO_IN_NORM},
    {"attn_q.weight",        PS_L_ATTN,      PS_L_ATTN,      PS_T_MAT,  {PS_D_EMBD, PS_D_Q},   F(wq), PS_L_ATTN_GATED | PS_L_QKV_FUSED},
    {"attn_q.weight",        PS_L_ATTN_GATED, PS_L_ATTN_GATED, PS_T_MAT, {PS_D_EMBD, PS_D_Q2}, F(wq), 0},
    {"attn_k.weight",        PS_L_ATTN,      PS_L_ATTN,      PS_T_MAT,  {PS_D_EMBD, PS_D_KV},  F(wk), PS_L_QKV_FUSED},
    {"attn_v.weight",        PS_L_ATTN,      PS_L_ATTN,      PS_T_MAT,  {PS_D_EMBD, PS_D_KV},  F(wv), PS_L_QKV_FUSED},
    {"attn_qkv.weight",      PS_L_QKV_FUSED, PS_L_QKV_FUSED, PS_T_QKV_SPLIT, {PS_D_EMBD, PS_D_QKV}, F(wq), 0},
    {"attn_output.weight",   PS_L_ATTN,      PS_L_ATTN,      PS_T_MAT,  {PS_D_Q, PS_D_EMBD},   F(wo), 0},
    {"attn_q.bias",          PS_L_ATTN,      PS_L_QKV_BIAS,  PS_T_VEC,  {PS_D_Q},              F(bq), 0},
    {"attn_k.bias",          PS_L_ATTN,      PS_L_QKV_BIAS,  PS_T_VEC,  {PS_D_KV},             F(bk), 0},
    {"attn_v.bias",          PS_L_ATTN,      PS_L_QKV_BIAS,  PS_T_VEC,  {PS_D_KV},             F(bv), 0},
    {"attn_output.bias",     PS_L_ATTN,      0,              PS_T_VEC,  {PS_D_EMBD},           F(bo), 0},
    {"attn_q_norm.weight",   PS_L_ATTN,      PS_L_QK_NORM,   PS_T_VEC,  {PS_D_HEAD},           F(q_norm), PS_L_QK_NORM_FULL},
    {"attn_k_norm.weight",   PS_L_ATTN,      PS_L_QK_NORM,   PS_T_VEC,  {PS_D_HEAD},           F(k_norm), PS_L_QK_NORM_FULL},
    {"attn_q_norm.weight",   PS_L_QK_NORM_FULL, PS_L_QK_NORM_FULL, PS_T_VEC, {PS_D_Q},         F(q_norm), 0},
    {"attn_k_norm.weight",   PS_L_QK_NORM_FULL, PS_L_QK_NORM_FULL, PS_T_VEC, {PS_D_KV},        F(k_norm), 0},
    {"post_attention_norm.weight", PS_L_SANDWICH, PS_L_SANDWICH, PS_T_VEC, {PS_D_EMBD},        F(attn_post_norm), 0},
    {"post_ffw_norm.weight", PS_L_SANDWICH,  PS_L_SANDWICH,  PS_T_VEC,  {PS_D_EMBD},           F(ffn_post_norm), 0},
    {"ffn_norm.weight",      PS_L_FFN_DENSE, PS_L_FFN_DENSE, PS_T_VEC,  {PS_D_EMBD},           F(ffn_norm), PS_L_POST_NORM | PS_L_NO_IN_NORM},
    {"post_attention_norm.weight", PS_L_POST_NORM, PS_L_POST_NORM, PS_T_VEC, {PS_D_EMBD},      F(ffn_norm), 0},
    /* Gated DeltaNet (qwen35*) */
    {"attn_qkv.weight",      PS_L_DELTANET,  PS_L_DELTANET,  PS_T_MAT,  {PS_D_EMBD, PS_D_SSM_CH}, F(wqkv), 0},
    {"attn_gate.weight",     PS_L_DELTANET,  PS_L_DELTANET,  PS_T_MAT,  {PS_D_EMBD, PS_D_SSM_V},  F(wz), 0},
    {"ssm_conv1d.weight",    PS_L_DELTANET,  PS_L_DELTANET,  PS_T_F32MAT, {PS_D_SSM_CONV, PS_D_SSM_CH}, F(conv1d), 0},
    {"ssm_dt.bias",          PS_L_DELTANET,  PS_L_DELTANET,  PS_T_VEC,  {PS_D_SSM_NV},         F(dt_bias), 0},
    {"ssm_a",                PS_L_DELTANET,  PS_L_DELTANET,  PS_T_VEC,  {PS_D_SSM_NV},         F(ssm_a), 0},
    {"ssm_beta.weight",      PS_L_DELTANET,  PS_L_DELTANET,  PS_T_MAT,  {PS_D_EMBD, PS_D_SSM_NV}, F(w_beta), 0},
    {"ssm_alpha.weight",     PS_L_DELTANET,  PS_L_DELTANET,  PS_T_MAT,  {PS_D_EMBD, PS_D_SSM_NV}, F(w_alpha), 0},
    {"ssm_norm.weight",      PS_L_DELTANET,  PS_L_DELTANET,  PS_T_VEC,  {PS_D_SSM_DK},         F(ssm_norm), 0},
    {"ssm_out.weight",       PS_L_DELTANET,  PS_L_DELTANET,  PS_T_MAT,  {PS_D_SSM_V, PS_D_EMBD}, F(ssm_out), 0},
    {"ffn_gate.weight",      PS_L_FFN_DENSE, PS_L_FFN_DENSE, PS_T_MAT,  {PS_D_EMBD, PS_D_FF},  F(w_gate), PS_L_FFN_FUSED_UP},
    {"ffn_up.weight",        PS_L_FFN_DENSE, PS_L_FFN_DENSE, PS_T_MAT,  {PS_D_EMBD, PS_D_FF},  F(w_up), PS_L_FFN_FUSED_UP},
    {"ffn_up.weight",        PS_L_FFN_FUSED_UP, PS_L_FFN_FUSED_UP, PS_T_GATE_UP_SPLIT, {PS_D_EMBD, PS_D_FF2}, F(w_gate), 0},
    {"ffn_down.weight",      PS_L_FFN_DENSE, PS_L_FFN_DENSE, PS_T_MAT,  {PS_D_FF, PS_D_EMBD},  F(w_down), 0},
    {"ffn_norm.weight",      PS_L_FFN_MOE,   PS_L_FFN_MOE,   PS_T_VEC,  {PS_D_EMBD},           F(ffn_norm), PS_L_POST_NORM},
    {"ffn_gate_inp.weight",  PS_L_FFN_MOE,   PS_L_FFN_MOE,   PS_T_MAT,  {PS_D_EMBD, PS_D_EXPERT}, F(gate_inp), 0},
    {"ffn_gate_exps.weight", PS_L_FFN_MOE,   PS_L_FFN_MOE,   PS_T_MAT3, {PS_D_EMBD, PS_D_FF_EXP, PS_D_EXPERT}, F(gate_exps), PS_L_GATE_UP},
    {"ffn_up_exps.weight",   PS_L_FFN_MOE,   PS_L_FFN_MOE,   PS_T_MAT3, {PS_D_EMBD, PS_D_FF_EXP, PS_D_EXPERT}, F(up_exps), PS_L_GATE_UP},
    {"ffn_gate_up_exps.weight", PS_L_GATE_UP, PS_L_GATE_UP,  PS_T_MAT3, {PS_D_EMBD, PS_D_FF_EXP2, PS_D_EXPERT}, F(gate_up_exps), 0},
    /* gpt-oss: attention sinks, router and expert biases */
    {"attn_sinks.weight",    PS_L_ATTN_SINKS, PS_L_ATTN_SINKS, PS_T_VEC, {PS_D_NHEAD},          F(sinks), 0},
    {"ffn_gate_inp.bias",    PS_L_MOE_OAI,   PS_L_MOE_OAI,   PS_T_VEC,  {PS_D_EXPERT},         F(gate_inp_b), 0},
    {"ffn_gate_exps.bias",   PS_L_MOE_OAI,   PS_L_MOE_OAI,   PS_T_F32MAT, {PS_D_FF_EXP, PS_D_EXPERT}, F(gate_exps_b), 0},
    {"ffn_up_exps.bias",     PS_L_MOE_OAI,   PS_L_MOE_OAI,   PS_T_F32MAT, {PS_D_FF_EXP, PS_D_EXPERT}, F(up_exps_b), 0},
    {"ffn_down_exps.bias",   PS_L_MOE_OAI,   PS_L_MOE_OAI,   PS_T_F32MAT, {PS_D_EMBD, PS_D_EXPERT}, F(down_exps_b), 0},
    {"ffn_down_exps.weight", PS_L_FFN_MOE,   PS_L_FFN_MOE,   PS_T_MAT3, {PS_D_FF_EXP, PS_D_EMBD, PS_D_EXPERT}, F(down_exps), 0},
    {"ffn_gate_inp_shexp.weight", PS_L_FFN_SHEXP, PS_L_FFN_SHEXP, PS_T_VEC, {PS_D_EMBD},        F(gate_inp_shexp), 0},
    {"ffn_gate_shexp.weight", PS_L_FFN_SHEXP, PS_L_FFN_SHEXP, PS_T_MAT, {PS_D_EMBD, PS_D_FF_SHEXP}, F(gate_shexp), 0},
    {"ffn_up_shexp.weight",  PS_L_FFN_SHEXP, PS_L_FFN_SHEXP, PS_T_MAT,  {PS_D_EMBD, PS_D_FF_SHEXP}, F(up_shexp), 0},
    {"ffn_down_shexp.weight", PS_L_FFN_SHEXP, PS_L_FFN_SHEXP, PS_T_MAT, {PS_D_FF_SHEXP, PS_D_EMBD}, F(down_shexp), 0},
};
#undef F
const size_t ps_n_layer_tensors = PS_ARRAY_LEN(ps_layer_tensors);
