/*
 * model.h — the loaded model, as the forward pass sees it.
 *
 * struct ps_model splits llama2.c-style into hyperparameters (ps_hparams, read once from the
 * GGUF keys), read-only weights (ps_weights: ps_mat views into the memory-mapped file, never
 * copied) and the tokenizer. model.c fills it; the run state (KV cache, recurrent state,
 * scratch) is session.h's, and forward.c runs the layers.
 */
#ifndef PS_MODEL_H
#define PS_MODEL_H

#include "model/arch.h"
#include "gguf/gguf.h"
#include "kernels/matmul.h"
#include "model/rope.h"

/* Hyperparameters. */
typedef struct {
    ps_arch arch;
    const ps_arch_info *info; /* the family's row of the architecture table (arch.c) */
    int32_t n_vocab;
    int32_t n_embd;
    int32_t n_layer;
    int32_t n_head;
    int32_t n_head_kv;
    int32_t head_dim;      /* <arch>.attention.key_length, default n_embd / n_head */
    int32_t n_ff;          /* <arch>.feed_forward_length (dense FFN layers; 0 when none) */
    int32_t n_ctx_train;   /* <arch>.context_length */
    int32_t n_rot;         /* <arch>.rope.dimension_count, default head_dim; even, <= head_dim */
    float rope_base;       /* <arch>.rope.freq_base, default 10000 */
    float rope_freq_scale; /* 1 / <arch>.rope.scaling.factor (linear scaling), default 1 */
    ps_rope rope;          /* the RoPE of every attention layer (rope.h): scaling type, YaRN,
                            * the frequency factors chosen at load (rope_freqs, else LongRoPE's
                            * long or short table by the model's context length) */
    float rms_eps;         /* <arch>.attention.layer_norm_rms_epsilon */
    ps_rope_mode rope_mode;
    /* experts (layers with PS_L_FFN_MOE; all 0 without) */
    int32_t n_expert;      /* <arch>.expert_count */
    int32_t n_expert_used; /* <arch>.expert_used_count: experts per token, 1..n_expert */
    int32_t n_ff_exp;      /* one expert's FFN width */
    bool expert_norm;      /* renormalise the selected experts' weights to sum 1 */
    int32_t n_ff_shexp;    /* the shared expert's FFN width (PS_L_FFN_SHEXP; 0 without):
                            * <arch>.expert_shared_feed_forward_length, default n_ff */
    int32_t n_layer_kv;    /* layers with a KV cache (all but the recurrent ones) */
    /* qwen35 / qwen35moe (hybrid; 0 otherwise), llama.cpp's names:
     *   ssm.conv_kernel d_conv, ssm.state_size d_state (= head size of q, k and v),
     *   ssm.group_count n_k (q/k heads), ssm.time_step_rank n_v (value heads),
     *   ssm.inner_size d_inner = n_v * d_state; rope.dimension_sections (4 counts of rope pairs:
     *   text positions use the first three, the fourth sees position 0);
     *   nextn_predict_layers trailing MTP blocks inside block_count (loaded past: n_layer
     *   excludes them). Layer l is recurrent unless (l + 1) % full_attention_interval == 0. */
    int32_t ssm_d_conv, ssm_d_state, ssm_n_k, ssm_n_v, ssm_d_inner;
    int32_t rope_sections[4];
    int32_t full_attn_interval, n_layer_nextn, n_layer_rs;
    /* sliding-window attention (0 when no layer slides): n_swa = <arch>.attention.sliding_window
     * (llama.cpp's STANDARD window: the query at p sees keys p - n_swa + 1 .. p, itself
     * included); layer l slides when swa_period == 0 or l % swa_period < swa_period - 1
     * (<arch>.attention.sliding_window_pattern, llama.cpp's set_swa_pattern); a sliding layer's
     * RoPE uses rope_base_swa / rope_freq_scale_swa (ps_layer.swa says which layers) */
    int32_t n_swa, swa_period;
    float rope_base_swa, rope_freq_scale_swa;
    /* gemma (PS_A_GEMMA): embd_scale = sqrtf(n_embd) (0: none); attn_scale: the query scale
     * (1/sqrt(head_dim), llama.cpp's gemma rule in model.c); attn_softcap / final_softcap: c
     * of tanh(x / c) * c on the attention logits / the output logits (0: none) */
    float embd_scale, attn_scale, attn_softcap, final_softcap;
} ps_hparams;

/* A 3-D GGUF tensor read as n stacked matrices (one per expert): matrix e is m with data
 * advanced by e * stride bytes, and its Q4_K nibble tile copy (when m.qtiles) by e *
 * qtiles_stride (ps_mat3_at). */
typedef struct {
    ps_mat m;            /* matrix 0: ne[0] = n_in, ne[1] = n_out */
    size_t stride;       /* bytes between matrices */
    int64_t n;           /* ne[2] */
    size_t qtiles_stride; /* bytes between the matrices' nibble tile copies */
} ps_mat3;

static inline ps_mat ps_mat3_at(const ps_mat3 *t, int64_t e) {
    ps_mat m = t->m;
    m.data = (const uint8_t *)t->m.data + (size_t)e * t->stride;
    if (m.qtiles) m.qtiles = (const uint8_t *)t->m.qtiles + (size_t)e * t->qtiles_stride;
    return m;
}

/* One transformer block's weights; which of them a layer has is its feature set (arch.h; the
 * tensor list is ps_layer_tensors below, model_tensors.c). Shapes are GGUF ne order (ne[0] = input dim):
 *   attn_norm (n_embd)          wq (n_embd -> n_head*head_dim)   bq (n_head*head_dim) | NULL
 *   wk, wv (n_embd -> n_head_kv*head_dim)                        bk, bv | NULL
 *   q_norm, k_norm (head_dim) | NULL (qwen3; olmo2: n_head*head_dim and n_head_kv*head_dim)
 *   wo (n_head*head_dim -> n_embd)
 *   ffn_norm (n_embd)   w_gate, w_up (n_embd -> n_ff)   w_down (n_ff -> n_embd)
 * experts (PS_L_FFN_MOE, moe.c): ffn_norm, gate_inp (n_embd -> n_expert),
 *   gate_exps, up_exps (n_expert x (n_embd -> n_ff_exp)), down_exps (n_expert x (n_ff_exp -> n_embd))
 * Norm and bias vectors are float32 in the file (checked at load). A fused attn_qkv (phi3)
 * gives wq, wk, wv as row ranges of the one tensor, a fused ffn_up of 2 n_ff rows (phi3)
 * w_gate (the first n_ff) and w_up. */
/*
 * Hybrid layers (qwen35*): ffn_norm is blk.N.post_attention_norm. A full-attention layer's wq
 * gives 2 * n_head * head_dim outputs, per head [q (head_dim), gate (head_dim)]; q_norm, k_norm
 * always. A recurrent (Gated DeltaNet) layer has instead, with dk = d_state, ch = 2 n_k dk +
 * n_v dk (conv channels: q of the n_k heads, then k, then v of the n_v heads):
 *   wqkv (n_embd -> ch)   wz = attn_gate (n_embd -> n_v dk)   w_beta, w_alpha (n_embd -> n_v)
 *   conv1d (ch, d_conv) f32   dt_bias, ssm_a (n_v) f32 (ssm_a = -exp(A_log))
 *   ssm_norm (dk) f32   ssm_out (n_v dk -> n_embd)
 * kv_slot / rs_slot: the layer's index among the KV-cached / recurrent layers (-1: none).
 * swa: the layer's attention window in positions (the query at p sees keys p - swa + 1 .. p),
 * 0 = global (causal over every cached position). A sequence keeps a sliding layer's K/V in a
 * ring of min(n_ctx, swa + n_batch - 1) positions (position j in slot j % ring; session.h).
 */
typedef struct {
    uint32_t feat;              /* PS_L_* */
    const float *attn_norm;
    ps_mat wq, wk, wv, wo;
    const float *bq, *bk, *bv, *bo;
    const float *q_norm, *k_norm;
    const float *ffn_norm;
    const float *attn_post_norm, *ffn_post_norm; /* PS_L_SANDWICH (n_embd) | NULL */
    ps_mat w_gate, w_up, w_down;
    bool recurrent;
    int32_t kv_slot, rs_slot;
    int32_t swa;
    ps_mat wqkv, wz, w_beta, w_alpha, ssm_out;
    const float *conv1d, *dt_bias, *ssm_a, *ssm_norm;
    ps_mat gate_inp;
    ps_mat3 gate_exps, up_exps, down_exps;
    ps_mat3 gate_up_exps;       /* PS_L_GATE_UP: gate and up of each expert in one matrix of
                                 * 2 n_ff_exp rows (gate_exps / up_exps then unset) */
    /* gpt-oss (PS_L_ATTN_SINKS, PS_L_MOE_OAI): sinks (n_head) f32; router bias (n_expert);
     * expert biases gate / up (n_expert, n_ff_exp), down (n_expert, n_embd), f32 */
    const float *sinks;
    const float *gate_inp_b, *gate_exps_b, *up_exps_b, *down_exps_b;
    /* shared expert (PS_L_FFN_SHEXP): gate_inp_shexp (n_embd) f32, gate_shexp, up_shexp
     * (n_embd -> n_ff_shexp), down_shexp (n_ff_shexp -> n_embd) */
    const float *gate_inp_shexp;
    ps_mat gate_shexp, up_shexp, down_shexp;
} ps_layer;

/* ---- the tensors of a file (model_tensors.c), which the loader reads and gen-model writes ---- */

/* Symbolic tensor dimensions, resolved from the hyperparameters (ps_dim_value). */
typedef enum {
    PS_D_1 = 0,   /* absent dimension */
    PS_D_EMBD,    /* n_embd */
    PS_D_Q,       /* n_head * head_dim */
    PS_D_KV,      /* n_head_kv * head_dim */
    PS_D_HEAD,    /* head_dim */
    PS_D_FF,      /* n_ff (dense FFN) */
    PS_D_FF_EXP,  /* n_ff_exp (one expert's FFN) */
    PS_D_EXPERT,  /* n_expert */
    PS_D_Q2,      /* 2 * n_head * head_dim (gated attention's q + gate) */
    PS_D_SSM_CH,  /* DeltaNet conv channels: 2 * n_k * d_state + n_v * d_state */
    PS_D_SSM_V,   /* n_v * d_state (value width) */
    PS_D_SSM_NV,  /* n_v (value heads) */
    PS_D_SSM_DK,  /* d_state (head size) */
    PS_D_SSM_CONV,/* d_conv (conv width) */
    PS_D_FF_SHEXP,/* n_ff_shexp (the shared expert's FFN width) */
    PS_D_NHEAD,   /* n_head */
    PS_D_FF_EXP2, /* 2 * n_ff_exp (merged gate + up of one expert) */
    PS_D_QKV,     /* (n_head + 2 n_head_kv) * head_dim (a fused attn_qkv) */
    PS_D_FF2,     /* 2 * n_ff (a fused gate + up) */
    PS_D_EMBD2,   /* 2 * n_embd (an MTP block's nextn.eh_proj input) */
    PS_D_VOCAB,   /* n_vocab */
    PS_D_ROT_HALF,/* n_rot / 2 (RoPE frequency factors) */
} ps_dim;

/* A symbolic dimension as a number under hyperparameters hp (the one rule: the loader checks
 * shapes with it, gen-model writes them). */
int64_t ps_dim_value(const ps_hparams *hp, ps_dim d);

typedef enum {
    PS_T_VEC,     /* float32 vector (norm, bias): const float * */
    PS_T_MAT,     /* 2-D weight in a matmul type: ps_mat */
    PS_T_MAT3,    /* 3-D stack of matrices, one per expert: ps_mat3 */
    PS_T_F32MAT,  /* float32 2-D tensor used element-wise (ssm_conv1d): const float * */
    PS_T_QKV_SPLIT,    /* a fused q | k | v matrix: field is wq; wq, wk, wv get its rows
                        * [0, Q), [Q, Q + KV), [Q + KV, Q + 2 KV) */
    PS_T_GATE_UP_SPLIT,/* a fused gate | up matrix: field is w_gate; w_gate, w_up get its
                        * rows [0, n_ff), [n_ff, 2 n_ff) */
} ps_tensor_kind;

/* What a tensor's numbers are, as gen-model draws them for its random models (genmodel.c
 * holds the distributions; the loader does not look). */
typedef enum {
    PS_DRAW_WEIGHT,     /* a matrix in the model's weight type (or its quant mix's) */
    PS_DRAW_WEIGHT_F32, /* a matrix llama.cpp's quantiser keeps float32 (the expert router,
                         * the DeltaNet conv), outside any mix */
    PS_DRAW_NORM,       /* a norm's scale, about 1 */
    PS_DRAW_BIAS,       /* an additive bias or a gate vector, about 0 */
    PS_DRAW_SINK,       /* an attention sink logit */
    PS_DRAW_ACT_BIAS,   /* a bias before gpt-oss's clamped SwiGLU, wide enough to reach the clamps */
    PS_DRAW_DT_BIAS,    /* DeltaNet's time-step bias before softplus */
    PS_DRAW_DECAY,      /* DeltaNet's ssm_a = -exp(A_log) */
    PS_DRAW_ROPE_FREQS, /* computed, not drawn: Llama 3's frequency factors */
    PS_DRAW_ROPE_LONG,  /* computed: a LongRoPE long-context table */
    PS_DRAW_ROPE_SHORT, /* computed: a LongRoPE short-context table */
} ps_draw;

/* ps_layer_tensor.field of a tensor no ps_layer field holds (an MTP block's). */
#define PS_NO_FIELD ((size_t)-1)

/* One per-layer tensor: "blk.<l>.<name>", read in layers with feature `feature` (used when the
 * file has it) and none of `unless`, required in layers with any feature of `required`; shape
 * ne[0..2] in GGUF order; the view goes to byte offset `field` of ps_layer.
 *
 * gen-model (genmodel.c) writes its blocks from the same rows, in table order: in a block with
 * features f, each row read there (feature, unless) that f requires or names in `gen`, but a
 * name once: a tensor listed twice (the loader reads the same view twice) is written at the
 * first of its rows that applies, so that each family's generated files keep their order. */
typedef struct {
    const char *name;
    uint32_t feature;
    uint32_t required;
    ps_tensor_kind kind;
    ps_dim ne[3];
    size_t field;
    uint32_t unless;   /* not read in layers with any of these features (0: none) */
    ps_draw draw;      /* gen-model's values */
    uint32_t gen;      /* gen-model also writes it, optional as it is, in these layers */
} ps_layer_tensor;

extern const ps_layer_tensor ps_layer_tensors[];
extern const size_t ps_n_layer_tensors;

/* Read-only weights, pointing into the mapping (the vectors into the model's copy of them
 * where the vdpbf16ps copy is made: copy_vectors). */
typedef struct {
    ps_mat token_embd;         /* n_embd -> n_vocab rows: row t is token t's embedding */
    ps_layer *layers;          /* n_layer */
    const float *output_norm;  /* n_embd */
    ps_mat output;             /* n_embd -> n_vocab (token_embd when tied) */
    const float *output_b;     /* n_vocab added to the logits (output.bias) | NULL */
    const float *rope_freqs;   /* n_rot/2 frequency divisors (Llama 3) | NULL */
    const float *rope_long, *rope_short; /* LongRoPE's n_rot/2 divisors (rope_factors_long /
                                          * _short.weight; both or neither) | NULL */
} ps_weights;

/* The optional model-wide tensors, by what a file with them has (ps_model_tensor.option). */
enum {
    PS_M_OUTPUT = 1u << 0,      /* its own output matrix (else the output is token_embd) */
    PS_M_OUTPUT_BIAS = 1u << 1, /* output.bias */
    PS_M_ROPE_FREQS = 1u << 2,  /* Llama 3's rope_freqs */
    PS_M_LONGROPE = 1u << 3,    /* LongRoPE's two factor tables */
};

/* One model-wide tensor (model_tensors.c): its name, kind (PS_T_VEC or PS_T_MAT) and shape;
 * required or optional; the field of ps_weights its view goes to; what gen-model draws for it,
 * and the option (PS_M_*) under which gen-model writes an optional one. The loader reads them
 * in this order before the layers, gen-model writes them so. */
typedef struct {
    const char *name;
    ps_tensor_kind kind;
    ps_dim ne[2];
    bool required;
    size_t field;
    ps_draw draw;
    uint32_t option;
} ps_model_tensor;

extern const ps_model_tensor ps_model_tensors[];
extern const size_t ps_n_model_tensors;

struct ps_model {
    ps_hparams hp;
    ps_weights w;
    ps_vocab *vocab;
    ps_gguf *gguf;            /* the mapping the weights live in */
    void *tiles;              /* the AMX or vdpbf16ps tile copies of the BF16 matrices (one
                               * block), or NULL */
    void *vectors;            /* the weights' float32 vectors, copied out of the mapping with
                               * the vdpbf16ps copy (model.c, copy_vectors), or NULL */
    void *qtiles;             /* the tile copy of the Q4_K / Q6_K experts (one block), or NULL */
    int64_t tile_extra;       /* resident bytes the copies add to the file's (ps_model_costs) */
    bool tiles_amx;           /* the copy is the AMX one */
    ps_model_info info;
};

/* What a benchmark reads of a model beyond ps_model_info (ps_model_get_costs), so that no
 * front end walks struct ps_model itself. */
typedef struct {
    uint32_t wq_type;      /* the first layer's query matrix type (PS_GGML_*; the type `bench`
                            * names as the model's weights), or the output's without one */
    int32_t n_ff_exp;      /* one expert's FFN width (0 without experts) */
    double matmul_weights; /* weights one token passes through ps_matmul: every layer matrix
                            * and the output; with experts the router and n_expert_used
                            * experts' matrices */
    int64_t tile_extra;    /* resident bytes the tile copies add to the file's: all of the
                            * AMX copy, only the padding of the vdpbf16ps copy and the 3% / 1%
                            * of the Q4_K / Q6_K experts' (they replace the matrices' pages) */
    bool tile_amx;         /* the BF16 copy is the AMX one (else vdpbf16ps, or none) */
} ps_model_costs;

void ps_model_get_costs(const ps_model *model, ps_model_costs *costs);

/* The K/V positions a sequence of n_ctx positions keeps, summed over the layers (a sliding
 * layer keeps a ring of min(n_ctx, swa + PS_CHUNK - 1); session.h). */
double ps_model_kv_positions(const ps_model *model, int32_t n_ctx);

/* Frees the model's vocabulary (tokenizer tables: about 12 MB for a 151,936-token one); then
 * ps_model_vocab returns NULL. For a model that only computes logits, its vocabulary checked
 * already: the compared model of score / perplexity --compare (ps_vocab_same). Scores do not
 * depend on it (the forward pass reads the weights and hparams only). NULL is a no-op. */
void ps_model_drop_vocab(ps_model *model);

/* The largest context length a model or a sequence takes. */
#define PS_MAX_CTX (1 << 26)
/* The largest normalisation epsilon a model may have (<arch>.attention.layer_norm_rms_epsilon
 * in (0, PS_MAX_NORM_EPS]); docs/models.md lists every load-time check. */
#define PS_MAX_NORM_EPS 1e-2

/* ps_model_load on an opened GGUF (a file or ps_gguf_open_memory): takes ownership of g
 * (closed on failure too, and by ps_model_free); name is the default info.name (may be NULL).
 * Used by ps_model_load and by the fuzz target fuzz/fuzz_model.c. */
ps_status ps_model_load_gguf(ps_gguf *g, const char *name, const ps_model_params *params,
                             ps_model **out, ps_error *err);

#endif /* PS_MODEL_H */
