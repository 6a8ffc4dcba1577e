/*
 * arch.c — the architecture table (see arch.h): families, their RoPE pairing and features.
 *
 *   family     RoPE    layers                                     keys beyond the common ones
 *   llama      normal  attention, dense SwiGLU, or experts        expert_count, expert_used_count
 *                      when expert_count > 0 (Mixtral)            (when there are experts)
 *   qwen2      neox    attention with q/k/v biases, dense SwiGLU  -
 *   qwen3      neox    attention with q/k head norms, dense       -
 *   qwen3moe   neox    attention with q/k head norms, experts     expert_count, expert_used_count,
 *                                                                 expert_feed_forward_length
 *   qwen35     neox,   3 of 4 layers Gated DeltaNet, every 4th    ssm.conv_kernel, state_size,
 *              multi-  gated attention with q/k head norms;       group_count, time_step_rank,
 *              section post_attention_norm, dense SwiGLU          inner_size, full_attention_
 *                                                                 interval, rope.dimension_
 *                                                                 sections, nextn_predict_layers
 *   gemma      neox    embeddings x sqrt(n_embd), GeGLU, output   -
 *                      = token_embd
 *   gemma2     neox    sliding / global (period 2, window 4096),  attention.sliding_window,
 *                      post-norms around attention and FFN,       sliding_window_pattern,
 *                      GeGLU, attention-logit and final-logit     attn_logit_softcapping (50),
 *                      soft-capping, embeddings x sqrt(n_embd)    final_logit_softcapping (30),
 *                                                                 rope.freq_base_swa
 *   gemma3     neox    as gemma2 with q/k head norms and no       the same (no window key: every
 *                      attention soft-cap; 5 sliding : 1 global;  layer global), final soft-cap
 *                      sliding layers' RoPE base 10000, unscaled  only when the key is there
 *   qwen35moe  as      as qwen35, experts + a shared expert       qwen35's and the expert keys,
 *              qwen35  scaled by sigmoid(ffn_gate_inp_shexp . x)  expert_shared_feed_forward_
 *                                                                 length (default feed_forward_
 *                                                                 length)
 *   gpt-oss    neox    attention with q/k/v/o biases and a sink   the expert keys (norm off,
 *                      logit per head, post_attention_norm,       softmax over the chosen k),
 *                      experts with router and expert biases      attention.sliding_window
 *                      and the clamped SwiGLU (moe.c); even       (+ _pattern, default 2),
 *                      layers slide over the last n_swa positions rope.scaling.* (YaRN)
 *   phi3       neox    attention from a fused attn_qkv (or        rope.scaling.* with LongRoPE's
 *                      attn_q/k/v), q scaled before q k^T, a      rope_factors_long/short.weight
 *                      fused gate + up SwiGLU (ffn_up 2 n_ff,     (attention.sliding_window is
 *                      gate first), optional output.bias         ignored, as llama.cpp does)
 *   olmo2      neox    no input norms; q/k RMSNorm over the whole (a file with attention.sliding_
 *                      projection; post_attention_norm and        window, OLMo 3, is refused: no
 *                      post_ffw_norm on the outputs before the    sliding layers yet)
 *                      residual adds; dense SwiGLU
 *
 * Any expert layer may hold its gate and up merged in ffn_gate_up_exps (PS_L_GATE_UP; llama.cpp
 * reads that layout for qwen35moe among these families): the same rows, so the same scores.
 *
 * The common keys (model.c read_hparams): embedding_length, block_count, attention.head_count,
 * attention.head_count_kv, attention.key_length / value_length, context_length,
 * rope.dimension_count, rope.freq_base, rope.scaling.*, attention.layer_norm_rms_epsilon, and
 * feed_forward_length for dense FFNs. The compute of each feature: forward.c (attention, dense
 * FFN), moe.c (the router and the experts).
 */
#include "model/arch.h"

#include <stddef.h>
#include <stdio.h>

static const ps_arch_info table[] = {
    {PS_ARCH_LLAMA, "llama", PS_ROPE_NORMAL, PS_L_ATTN | PS_L_FFN_DENSE, PS_A_EXPERTS_BY_KEY, 0, 0},
    {PS_ARCH_QWEN2, "qwen2", PS_ROPE_NEOX, PS_L_ATTN | PS_L_QKV_BIAS | PS_L_FFN_DENSE, 0, 0, 0},
    {PS_ARCH_QWEN3, "qwen3", PS_ROPE_NEOX, PS_L_ATTN | PS_L_QK_NORM | PS_L_FFN_DENSE, 0, 0, 0},
    {PS_ARCH_QWEN35, "qwen35", PS_ROPE_NEOX, PS_L_POST_NORM | PS_L_FFN_DENSE, PS_A_HYBRID, 0, 0},
    {PS_ARCH_QWEN35MOE, "qwen35moe", PS_ROPE_NEOX, PS_L_POST_NORM | PS_L_FFN_MOE | PS_L_FFN_SHEXP,
     PS_A_HYBRID, 0, 0},
    {PS_ARCH_QWEN3MOE, "qwen3moe", PS_ROPE_NEOX, PS_L_ATTN | PS_L_QK_NORM | PS_L_FFN_MOE, 0, 0, 0},
    {PS_ARCH_GPT_OSS, "gpt-oss", PS_ROPE_NEOX,
     PS_L_ATTN | PS_L_ATTN_SINKS | PS_L_POST_NORM | PS_L_FFN_MOE | PS_L_MOE_OAI, 0, 2,
     PS_SWA_REQUIRED},
    {PS_ARCH_PHI3, "phi3", PS_ROPE_NEOX, PS_L_ATTN | PS_L_FFN_DENSE | PS_L_FFN_FUSED_UP,
     PS_A_QKV_BY_TENSOR | PS_A_Q_PRESCALE, 0, 0},
    {PS_ARCH_OLMO2, "olmo2", PS_ROPE_NEOX,
     PS_L_ATTN | PS_L_NO_IN_NORM | PS_L_QK_NORM_FULL | PS_L_SANDWICH | PS_L_FFN_DENSE, 0, 0, 0},
    {PS_ARCH_GEMMA, "gemma", PS_ROPE_NEOX, PS_L_ATTN | PS_L_FFN_DENSE | PS_L_GEGLU, PS_A_GEMMA,
     0, 0},
    {PS_ARCH_GEMMA2, "gemma2", PS_ROPE_NEOX,
     PS_L_ATTN | PS_L_SANDWICH | PS_L_FFN_DENSE | PS_L_GEGLU, PS_A_GEMMA | PS_A_ATTN_SOFTCAP, 2,
     4096},
    {PS_ARCH_GEMMA3, "gemma3", PS_ROPE_NEOX,
     PS_L_ATTN | PS_L_QK_NORM | PS_L_SANDWICH | PS_L_FFN_DENSE | PS_L_GEGLU,
     PS_A_GEMMA | PS_A_SWA_OWN_ROPE, 6, 0},
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

/* Families llama.cpp runs that differ from the rows above in more than a feature or two. */
static const struct { const char *name, *missing; } missing[] = {
    {"gemma3n", "per-layer token embeddings (per_layer_token_embd), AltUp prediction and "
                "correction, Laurel blocks, activation sparsity and KV sharing between layers "
                "are not implemented"},
    {"gemma4", "per-layer token embeddings, separate head sizes for the sliding layers "
               "(attention.key_length_swa), KV sharing between layers, a per-layer "
               "sliding_window_pattern array, the optional expert FFN and the gemma4 BPE "
               "tokenizer are not implemented"},
    {"gemma-embedding", "an embedding model (bidirectional attention, pooling): it gives no "
                        "next-token logits to score"},
};

const char *ps_arch_missing(const char *name) {
    for (size_t i = 0; i < PS_ARRAY_LEN(missing); i++)
        if (!strcmp(missing[i].name, name)) return missing[i].missing;
    return NULL;
}
