/*
 * model_tensors.c — the tensors of a model file, in two tables. The model-wide ones (token_embd,
 * output_norm, the output and its bias, the RoPE factor tables): name, shape, required or not,
 * the field of ps_weights. Then the per-layer tensors of every feature (arch.h's PS_L_*): name
 * in the file ("blk.<l>.<name>"), the features that read it and those that require it, its kind
 * and shape in symbolic dimensions (model.h: ps_dim), the field of ps_layer its view goes to.
 * Each row also says what gen-model draws for the tensor. The loader (model.c) walks the tables,
 * the second once per layer; gen-model (genmodel.c) writes its files from them, in the same
 * order (model.h says which rows it writes). They belong to the model (they name ps_layer's
 * fields), not to the architecture table, which knows families and features only (arch.h), so
 * arch.c needs nothing above it.
 *
 * The per-layer order is that of generated files, one family after another. Two tensors sit in
 * different places in different families' files, so each has a second row that the loader reads
 * again (the same view): gpt-oss's q/k/v biases (after attn_output; qwen2's before it) and
 * olmo2's post_ffw_norm (after ffn_down; gemma2's and gemma3's before ffn_gate).
 */
#include "model/model.h"

#include <stddef.h>

#define WF(x) offsetof(ps_weights, x)
const ps_model_tensor ps_model_tensors[] = {
    /* name                        kind      ne                          required field       draw                option */
    {"token_embd.weight",          PS_T_MAT, {PS_D_EMBD, PS_D_VOCAB},    true,  WF(token_embd),  PS_DRAW_WEIGHT,     0},
    {"output_norm.weight",         PS_T_VEC, {PS_D_EMBD},                true,  WF(output_norm), PS_DRAW_NORM,       0},
    {"output.weight",              PS_T_MAT, {PS_D_EMBD, PS_D_VOCAB},    false, WF(output),      PS_DRAW_WEIGHT,     PS_M_OUTPUT},
    {"output.bias",                PS_T_VEC, {PS_D_VOCAB},               false, WF(output_b),    PS_DRAW_BIAS,       PS_M_OUTPUT_BIAS},
    {"rope_freqs.weight",          PS_T_VEC, {PS_D_ROT_HALF},            false, WF(rope_freqs),  PS_DRAW_ROPE_FREQS, PS_M_ROPE_FREQS},
    {"rope_factors_long.weight",   PS_T_VEC, {PS_D_ROT_HALF},            false, WF(rope_long),   PS_DRAW_ROPE_LONG,  PS_M_LONGROPE},
    {"rope_factors_short.weight",  PS_T_VEC, {PS_D_ROT_HALF},            false, WF(rope_short),  PS_DRAW_ROPE_SHORT, PS_M_LONGROPE},
};
#undef WF
const size_t ps_n_model_tensors = PS_ARRAY_LEN(ps_model_tensors);

#define F(x) offsetof(ps_layer, x)
#define ATTN PS_L_ATTN
#define SINKS PS_L_ATTN_SINKS
#define W PS_DRAW_WEIGHT
#define W32 PS_DRAW_WEIGHT_F32
#define NORM PS_DRAW_NORM
#define BIAS PS_DRAW_BIAS
const ps_layer_tensor ps_layer_tensors[] = {
    /* name                  read in         required in     kind       ne                     field   unless  draw  gen */
    {"attn_norm.weight",     ATTN | PS_L_DELTANET, ATTN | PS_L_DELTANET, PS_T_VEC, {PS_D_EMBD}, F(attn_norm), PS_L_NO_IN_NORM, NORM, 0},
    /* an MTP block (qwen35*): never read (PS_L_MTP) */
    {"nextn.eh_proj.weight", PS_L_MTP,       PS_L_MTP,       PS_T_MAT,  {PS_D_EMBD2, PS_D_EMBD}, PS_NO_FIELD, 0, W, 0},
    {"nextn.enorm.weight",   PS_L_MTP,       PS_L_MTP,       PS_T_VEC,  {PS_D_EMBD},           PS_NO_FIELD, 0, NORM, 0},
    {"nextn.hnorm.weight",   PS_L_MTP,       PS_L_MTP,       PS_T_VEC,  {PS_D_EMBD},           PS_NO_FIELD, 0, NORM, 0},
    /* attention */
    {"attn_q.weight",        ATTN,           ATTN,           PS_T_MAT,  {PS_D_EMBD, PS_D_Q},   F(wq), PS_L_ATTN_GATED | PS_L_QKV_FUSED, W, 0},
    {"attn_q.weight",        PS_L_ATTN_GATED, PS_L_ATTN_GATED, PS_T_MAT, {PS_D_EMBD, PS_D_Q2}, F(wq), 0, W, 0},
    {"attn_k.weight",        ATTN,           ATTN,           PS_T_MAT,  {PS_D_EMBD, PS_D_KV},  F(wk), PS_L_QKV_FUSED, W, 0},
    {"attn_v.weight",        ATTN,           ATTN,           PS_T_MAT,  {PS_D_EMBD, PS_D_KV},  F(wv), PS_L_QKV_FUSED, W, 0},
    {"attn_qkv.weight",      PS_L_QKV_FUSED, PS_L_QKV_FUSED, PS_T_QKV_SPLIT, {PS_D_EMBD, PS_D_QKV}, F(wq), 0, W, 0},
    {"attn_q.bias",          ATTN,           PS_L_QKV_BIAS,  PS_T_VEC,  {PS_D_Q},              F(bq), 0, BIAS, 0},
    {"attn_k.bias",          ATTN,           PS_L_QKV_BIAS,  PS_T_VEC,  {PS_D_KV},             F(bk), 0, BIAS, 0},
    {"attn_v.bias",          ATTN,           PS_L_QKV_BIAS,  PS_T_VEC,  {PS_D_KV},             F(bv), 0, BIAS, 0},
    {"attn_q_norm.weight",   ATTN,           PS_L_QK_NORM,   PS_T_VEC,  {PS_D_HEAD},           F(q_norm), PS_L_QK_NORM_FULL, NORM, 0},
    {"attn_k_norm.weight",   ATTN,           PS_L_QK_NORM,   PS_T_VEC,  {PS_D_HEAD},           F(k_norm), PS_L_QK_NORM_FULL, NORM, 0},
    {"attn_output.weight",   ATTN,           ATTN,           PS_T_MAT,  {PS_D_Q, PS_D_EMBD},   F(wo), 0, W, 0},
    /* gpt-oss: the q/k/v biases again (read above), all four biases and the sinks */
    {"attn_q.bias",          SINKS,          0,              PS_T_VEC,  {PS_D_Q},              F(bq), 0, BIAS, SINKS},
    {"attn_k.bias",          SINKS,          0,              PS_T_VEC,  {PS_D_KV},             F(bk), 0, BIAS, SINKS},
    {"attn_v.bias",          SINKS,          0,              PS_T_VEC,  {PS_D_KV},             F(bv), 0, BIAS, SINKS},
    {"attn_output.bias",     ATTN,           0,              PS_T_VEC,  {PS_D_EMBD},           F(bo), 0, BIAS, SINKS},
    {"attn_sinks.weight",    SINKS,          SINKS,          PS_T_VEC,  {PS_D_NHEAD},          F(sinks), 0, PS_DRAW_SINK, 0},
    /* olmo2: q/k norms over the whole projection */
    {"attn_q_norm.weight",   PS_L_QK_NORM_FULL, PS_L_QK_NORM_FULL, PS_T_VEC, {PS_D_Q},         F(q_norm), 0, NORM, 0},
    {"attn_k_norm.weight",   PS_L_QK_NORM_FULL, PS_L_QK_NORM_FULL, PS_T_VEC, {PS_D_KV},        F(k_norm), 0, NORM, 0},
    /* Gated DeltaNet (qwen35*) */
    {"attn_qkv.weight",      PS_L_DELTANET,  PS_L_DELTANET,  PS_T_MAT,  {PS_D_EMBD, PS_D_SSM_CH}, F(wqkv), 0, W, 0},
    {"attn_gate.weight",     PS_L_DELTANET,  PS_L_DELTANET,  PS_T_MAT,  {PS_D_EMBD, PS_D_SSM_V},  F(wz), 0, W, 0},
    {"ssm_conv1d.weight",    PS_L_DELTANET,  PS_L_DELTANET,  PS_T_F32MAT, {PS_D_SSM_CONV, PS_D_SSM_CH}, F(conv1d), 0, W32, 0},
    {"ssm_dt.bias",          PS_L_DELTANET,  PS_L_DELTANET,  PS_T_VEC,  {PS_D_SSM_NV},         F(dt_bias), 0, PS_DRAW_DT_BIAS, 0},
    {"ssm_a",                PS_L_DELTANET,  PS_L_DELTANET,  PS_T_VEC,  {PS_D_SSM_NV},         F(ssm_a), 0, PS_DRAW_DECAY, 0},
    {"ssm_beta.weight",      PS_L_DELTANET,  PS_L_DELTANET,  PS_T_MAT,  {PS_D_EMBD, PS_D_SSM_NV}, F(w_beta), 0, W, 0},
    {"ssm_alpha.weight",     PS_L_DELTANET,  PS_L_DELTANET,  PS_T_MAT,  {PS_D_EMBD, PS_D_SSM_NV}, F(w_alpha), 0, W, 0},
    {"ssm_norm.weight",      PS_L_DELTANET,  PS_L_DELTANET,  PS_T_VEC,  {PS_D_SSM_DK},         F(ssm_norm), 0, NORM, 0},
    {"ssm_out.weight",       PS_L_DELTANET,  PS_L_DELTANET,  PS_T_MAT,  {PS_D_SSM_V, PS_D_EMBD}, F(ssm_out), 0, W, 0},
    /* the norms between attention and FFN */
    {"post_attention_norm.weight", PS_L_SANDWICH, PS_L_SANDWICH, PS_T_VEC, {PS_D_EMBD},        F(attn_post_norm), 0, NORM, 0},
    {"ffn_norm.weight",      PS_L_FFN_DENSE, PS_L_FFN_DENSE, PS_T_VEC,  {PS_D_EMBD},           F(ffn_norm), PS_L_POST_NORM | PS_L_NO_IN_NORM, NORM, 0},
    {"post_attention_norm.weight", PS_L_POST_NORM, PS_L_POST_NORM, PS_T_VEC, {PS_D_EMBD},      F(ffn_norm), 0, NORM, 0},
    {"ffn_norm.weight",      PS_L_FFN_MOE,   PS_L_FFN_MOE,   PS_T_VEC,  {PS_D_EMBD},           F(ffn_norm), PS_L_POST_NORM, NORM, 0},
    {"post_ffw_norm.weight", PS_L_SANDWICH,  PS_L_SANDWICH,  PS_T_VEC,  {PS_D_EMBD},           F(ffn_post_norm), PS_L_NO_IN_NORM, NORM, 0},
    /* the dense FFN */
    {"ffn_gate.weight",      PS_L_FFN_DENSE, PS_L_FFN_DENSE, PS_T_MAT,  {PS_D_EMBD, PS_D_FF},  F(w_gate), PS_L_FFN_FUSED_UP, W, 0},
    {"ffn_up.weight",        PS_L_FFN_DENSE, PS_L_FFN_DENSE, PS_T_MAT,  {PS_D_EMBD, PS_D_FF},  F(w_up), PS_L_FFN_FUSED_UP, W, 0},
    {"ffn_up.weight",        PS_L_FFN_FUSED_UP, PS_L_FFN_FUSED_UP, PS_T_GATE_UP_SPLIT, {PS_D_EMBD, PS_D_FF2}, F(w_gate), 0, W, 0},
    {"ffn_down.weight",      PS_L_FFN_DENSE, PS_L_FFN_DENSE, PS_T_MAT,  {PS_D_FF, PS_D_EMBD},  F(w_down), 0, W, 0},
    /* olmo2: post_ffw_norm again (read above, or here where no input norms skip that row) */
    {"post_ffw_norm.weight", PS_L_SANDWICH,  PS_L_SANDWICH,  PS_T_VEC,  {PS_D_EMBD},           F(ffn_post_norm), 0, NORM, 0},
    /* experts (gpt-oss: with router and expert biases) */
    {"ffn_gate_inp.weight",  PS_L_FFN_MOE,   PS_L_FFN_MOE,   PS_T_MAT,  {PS_D_EMBD, PS_D_EXPERT}, F(gate_inp), 0, W32, 0},
    {"ffn_gate_inp.bias",    PS_L_MOE_OAI,   PS_L_MOE_OAI,   PS_T_VEC,  {PS_D_EXPERT},         F(gate_inp_b), 0, BIAS, 0},
    {"ffn_gate_exps.weight", PS_L_FFN_MOE,   PS_L_FFN_MOE,   PS_T_MAT3, {PS_D_EMBD, PS_D_FF_EXP, PS_D_EXPERT}, F(gate_exps), PS_L_GATE_UP, W, 0},
    {"ffn_up_exps.weight",   PS_L_FFN_MOE,   PS_L_FFN_MOE,   PS_T_MAT3, {PS_D_EMBD, PS_D_FF_EXP, PS_D_EXPERT}, F(up_exps), PS_L_GATE_UP, W, 0},
    {"ffn_gate_up_exps.weight", PS_L_GATE_UP, PS_L_GATE_UP,  PS_T_MAT3, {PS_D_EMBD, PS_D_FF_EXP2, PS_D_EXPERT}, F(gate_up_exps), 0, W, 0},
    {"ffn_down_exps.weight", PS_L_FFN_MOE,   PS_L_FFN_MOE,   PS_T_MAT3, {PS_D_FF_EXP, PS_D_EMBD, PS_D_EXPERT}, F(down_exps), 0, W, 0},
    {"ffn_gate_exps.bias",   PS_L_MOE_OAI,   PS_L_MOE_OAI,   PS_T_F32MAT, {PS_D_FF_EXP, PS_D_EXPERT}, F(gate_exps_b), 0, PS_DRAW_ACT_BIAS, 0},
    {"ffn_up_exps.bias",     PS_L_MOE_OAI,   PS_L_MOE_OAI,   PS_T_F32MAT, {PS_D_FF_EXP, PS_D_EXPERT}, F(up_exps_b), 0, PS_DRAW_ACT_BIAS, 0},
    {"ffn_down_exps.bias",   PS_L_MOE_OAI,   PS_L_MOE_OAI,   PS_T_F32MAT, {PS_D_EMBD, PS_D_EXPERT}, F(down_exps_b), 0, BIAS, 0},
    /* the shared expert (qwen35moe) */
    {"ffn_gate_inp_shexp.weight", PS_L_FFN_SHEXP, PS_L_FFN_SHEXP, PS_T_VEC, {PS_D_EMBD},        F(gate_inp_shexp), 0, BIAS, 0},
    {"ffn_gate_shexp.weight", PS_L_FFN_SHEXP, PS_L_FFN_SHEXP, PS_T_MAT, {PS_D_EMBD, PS_D_FF_SHEXP}, F(gate_shexp), 0, W, 0},
    {"ffn_up_shexp.weight",  PS_L_FFN_SHEXP, PS_L_FFN_SHEXP, PS_T_MAT,  {PS_D_EMBD, PS_D_FF_SHEXP}, F(up_shexp), 0, W, 0},
    {"ffn_down_shexp.weight", PS_L_FFN_SHEXP, PS_L_FFN_SHEXP, PS_T_MAT, {PS_D_FF_SHEXP, PS_D_EMBD}, F(down_shexp), 0, W, 0},
};
#undef F
#undef ATTN
#undef SINKS
#undef W
#undef W32
#undef NORM
#undef BIAS
const size_t ps_n_layer_tensors = PS_ARRAY_LEN(ps_layer_tensors);
