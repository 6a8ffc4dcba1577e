/*
 * arch.h — the architecture table: every model family promptscore runs, in one place.
 *
 * A family is one row of ps_arch_table (arch.c): its GGUF name (general.architecture), its RoPE
 * pairing, and the features its layers have. A feature is a group of tensors plus the compute
 * that uses them (PS_L_*): the loader (model.c) reads exactly the tensors of a layer's features
 * from ps_layer_tensors (model.h, model_tensors.c: name, shape in symbolic dimensions, optional
 * or required, where the view goes in ps_layer), gen-model writes the same rows (genmodel.c),
 * and the forward pass (forward.c) runs the pieces the features name. The hyperparameter keys
 * a feature needs are read by model.c (the common ones for every family, the expert keys for
 * PS_L_FFN_MOE). So adding a family is a table row; a family with new compute adds a feature
 * bit, its tensor rows, and one function in one file (as moe.c does for the router and
 * experts).
 */
#ifndef PS_ARCH_H
#define PS_ARCH_H

#include "base/impl.h"

typedef enum {
    PS_ARCH_LLAMA = 0,
    PS_ARCH_QWEN2,
    PS_ARCH_QWEN3,
    PS_ARCH_QWEN3MOE,
    PS_ARCH_QWEN35,     /* Qwen3.5 / 3.6 hybrid: Gated DeltaNet + gated full attention */
    PS_ARCH_QWEN35MOE,  /* the same with experts and a gated shared expert */
    PS_ARCH_GPT_OSS,    /* gpt-oss (llama.cpp's openai-moe): experts with biases, sinks */
    PS_ARCH_PHI3,       /* Phi-3 / Phi-4-mini: fused attn_qkv and gate+up, LongRoPE */
    PS_ARCH_OLMO2,      /* OLMo 2: norms on the attention / FFN outputs, none on the inputs,
                         * q/k RMSNorm over the whole projection */
    PS_ARCH_GEMMA,      /* Gemma (1): embeddings x sqrt(n_embd), GeGLU, tied output */
    PS_ARCH_GEMMA2,     /* Gemma 2: GeGLU, post-norms, soft-capping, sliding / global layers */
    PS_ARCH_GEMMA3,     /* Gemma 3 (text): as gemma2 with q/k head norms instead of the
                         * attention soft-cap, 5 sliding : 1 global, a local RoPE base */
    PS_ARCH_N
} ps_arch;

/* How RoPE pairs dimensions (llama.cpp's names): NORMAL rotates (x[2i], x[2i+1]) (llama);
 * NEOX rotates (x[i], x[i + n_rot/2]) (qwen2, qwen3, qwen3moe). */
typedef enum { PS_ROPE_NORMAL = 0, PS_ROPE_NEOX = 1 } ps_rope_mode;

/* Layer features (a bit set per layer). */
enum {
    PS_L_ATTN = 1u << 0,      /* attn_norm, attn_q/k/v/output (+ optional attn_output.bias) */
    PS_L_QKV_BIAS = 1u << 1,  /* attn_q/k/v.bias (qwen2) */
    PS_L_QK_NORM = 1u << 2,   /* attn_q_norm, attn_k_norm: RMSNorm per head (qwen3) */
    PS_L_FFN_DENSE = 1u << 3, /* ffn_norm, ffn_gate/up/down: SwiGLU */
    PS_L_FFN_MOE = 1u << 4,   /* ffn_norm, ffn_gate_inp router, ffn_{gate,up,down}_exps (moe.c) */
    PS_L_DELTANET = 1u << 5,  /* Gated DeltaNet instead of attention: attn_qkv, attn_gate,
                               * ssm_conv1d, ssm_dt.bias, ssm_a, ssm_beta, ssm_alpha, ssm_norm,
                               * ssm_out (deltanet.c; forward.c runs it) */
    PS_L_ATTN_GATED = 1u << 6,/* attn_q gives q and a gate per head: att *= sigmoid(gate) */
    PS_L_POST_NORM = 1u << 7, /* the FFN's input norm is post_attention_norm (not ffn_norm) */
    PS_L_FFN_SHEXP = 1u << 8, /* a shared expert beside the experts (qwen35moe): SwiGLU
                               * ffn_{gate,up,down}_shexp scaled by sigmoid(ffn_gate_inp_shexp . x) */
    PS_L_ATTN_SINKS = 1u << 9,/* attn_sinks (n_head): a learned logit per head in every softmax
                               * denominator (gpt-oss) */
    PS_L_MOE_OAI = 1u << 10,  /* gpt-oss experts (moe.c): router and expert biases
                               * (ffn_gate_inp.bias, ffn_{gate,up,down}_exps.bias), top-k of the
                               * logits then softmax over the chosen k, the clamped SwiGLU
                               * (alpha 1.702, limit 7, up + 1) */
    PS_L_GATE_UP = 1u << 11,  /* set by the loader where the file merges the experts' gate and
                               * up into ffn_gate_up_exps [n_embd, 2 n_ff_exp, n_expert] (rows
                               * 0..F-1 of expert e are its gate, F..2F-1 its up) */
    PS_L_QKV_FUSED = 1u << 12,/* attn_qkv (n_embd -> q | k | v) in place of attn_q/k/v: read as
                               * three row ranges of the one tensor (wq, wk, wv views; phi3) */
    PS_L_FFN_FUSED_UP = 1u << 13, /* ffn_up of width 2 n_ff holds gate then up (no ffn_gate):
                               * read as two row ranges (w_gate, w_up views; phi3) */
    PS_L_SANDWICH = 1u << 14, /* post_attention_norm on the attention's output and
                               * post_ffw_norm on the FFN's, each before its residual add
                               * (olmo2) */
    PS_L_NO_IN_NORM = 1u << 15, /* no attn_norm / ffn_norm: attention and FFN read the residual
                               * x itself (olmo2) */
    PS_L_QK_NORM_FULL = 1u << 16, /* attn_q_norm (n_head * head_dim), attn_k_norm (n_head_kv *
                               * head_dim): RMSNorm over the whole q / k projection before RoPE
                               * (olmo2) */
    PS_L_GEGLU = 1u << 17,    /* the dense FFN is GeGLU: gelu(gate) * up, gelu with the tanh
                               * approximation (gemma2, gemma3) */
    PS_L_MTP = 1u << 18,      /* a multi-token-prediction block (qwen35*'s trailing nextn
                               * blocks): nextn.eh_proj, enorm, hnorm beside a full-attention
                               * block. Never run, so never read: the loader stops before
                               * these blocks; gen-model writes them as real files hold them */
};

/* Family flags. */
enum {
    PS_A_EXPERTS_BY_KEY = 1u << 0, /* PS_L_FFN_DENSE becomes PS_L_FFN_MOE when <arch>.expert_count
                                    * > 0 (llama with experts: Mixtral) */
    PS_A_HYBRID = 1u << 1,         /* qwen35*: layer l is PS_L_ATTN | PS_L_QK_NORM |
                                    * PS_L_ATTN_GATED when (l + 1) % full_attention_interval
                                    * == 0, else PS_L_DELTANET; the ssm.* keys (model.c) */
    PS_A_SWA_OWN_ROPE = 1u << 2,   /* sliding layers' RoPE: <arch>.rope.freq_base_swa, default
                                    * 10000, and no scaling (gemma3); without the flag they
                                    * default to the global base and scaling (gemma2) */
    PS_A_GEMMA = 1u << 3,          /* embeddings x sqrtf(n_embd); the query scale rule of
                                    * llama.cpp's gemma2 / gemma3 (model.c); final-logit
                                    * soft-capping <arch>.final_logit_softcapping */
    PS_A_ATTN_SOFTCAP = 1u << 4,   /* attention-logit soft-capping tanh(s / c) * c,
                                    * c = <arch>.attn_logit_softcapping, default 50 (gemma2) */
    PS_A_QKV_BY_TENSOR = 1u << 8,  /* layer l is PS_L_QKV_FUSED when the file has
                                    * blk.l.attn_qkv.weight, else it has attn_q/k/v (phi3) */
    PS_A_Q_PRESCALE = 1u << 9,     /* q is multiplied by 1/sqrt(head_dim) after RoPE and the
                                    * attention scale is 1 (llama.cpp's phi3 graph) */
};

/* Sliding-window attention of a family (ps_arch_info.swa_period / swa_window; model.c reads
 * the keys): layer l slides when l % period < period - 1 (period from
 * <arch>.attention.sliding_window_pattern when the file has it, llama.cpp's set_swa_pattern);
 * the window is <arch>.attention.sliding_window, or swa_window when the file has none
 * (PS_SWA_REQUIRED: the key must be there; 0: no layer slides). A sliding layer gets
 * ps_layer.swa = the window, the others 0 (global). */
#define PS_SWA_REQUIRED (-1)

typedef struct {
    ps_arch id;
    const char *name;        /* general.architecture */
    ps_rope_mode rope_mode;
    uint32_t layer;          /* PS_L_* of every layer */
    uint32_t flags;          /* PS_A_* */
    int32_t swa_period;      /* default sliding_window_pattern; 0: the family never slides */
    int32_t swa_window;      /* default window, PS_SWA_REQUIRED, or 0 (see above) */
} ps_arch_info;

/* The row for general.architecture = name, or NULL. */
const ps_arch_info *ps_arch_find(const char *name);
/* "llama, qwen2, ..." (for error messages). */
const char *ps_arch_names(void);
/* For a family promptscore knows but does not run (gemma3n, gemma4, ...): what it lacks, for
 * the load error; NULL for any other name. */
const char *ps_arch_missing(const char *name);

#endif /* PS_ARCH_H */
