/*
 * genmodel.h — writes a GGUF model with deterministic random weights (every family of the
 * architecture table, llama with experts; any weight type of types.h, or the tensor types of a
 * llama.cpp mix such as Q4_K_M) for tests and benchmarks, its tensors those the loader's tables
 * name (model.h). The same parameters and seed always give
 * the same bytes. The vocabulary is either copied from a vocabulary GGUF (its tokenizer.* keys)
 * or a synthetic SentencePiece one. Key and tensor names are llama.cpp's.
 */
#ifndef PS_GENMODEL_H
#define PS_GENMODEL_H

#include "gguf/gguf.h"

typedef struct {
    char arch[16];            /* "llama", "qwen2" (q/k/v biases), "qwen3" (q/k head norms),
                                 "qwen35" (Gated DeltaNet hybrid, see below), "qwen35moe" (the
                                 same with experts and a shared expert of width n_ff), "phi3"
                                 (fused attn_qkv and gate + up), "olmo2" (output norms, no
                                 input norms, whole-row q/k norms) */
    char name[64];            /* general.name; "" = "promptscore-random-<arch>" */
    int32_t n_vocab;          /* synthetic vocabulary size (>= 259); ignored with vocab_path */
    int32_t n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, n_ctx;
    /* experts: qwen3moe needs n_expert >= 1; llama gets experts (Mixtral layout) when
     * n_expert > 0. n_expert_used in 1..n_expert; n_ff_exp = one expert's FFN width (qwen3moe;
     * llama experts use n_ff). The router ffn_gate_inp stays F32, as llama.cpp's quantiser
     * keeps it. */
    int32_t n_expert, n_expert_used, n_ff_exp;
    /* yarn_factor > 0: rope.scaling.type yarn with that factor, original_context_length
     * yarn_orig_ctx, yarn_beta_fast / yarn_beta_slow (gpt-oss: 32, 4096, 32, 1) */
    float yarn_factor, yarn_beta_fast, yarn_beta_slow;
    int32_t yarn_orig_ctx;
    bool merged_gate_up;      /* experts' gate and up in one ffn_gate_up_exps [n_embd, 2 n_ff_exp,
                               * n_expert] (rows 0..n_ff_exp-1 gate), as llama.cpp's qwen35moe
                               * files have them; false: ffn_gate_exps + ffn_up_exps */
    float rope_base;          /* <arch>.rope.freq_base */
    float rms_eps;            /* <arch>.attention.layer_norm_rms_epsilon */
    uint32_t type;            /* matrices: any weight type (types.h); norms/biases stay F32 */
    char mix[16];             /* "" or a llama.cpp mix (qmix.h: "q4_k_m", ...), which then
                               * picks each matrix's type instead of `type` */
    bool tied;                /* no output.weight: the output reuses token_embd.weight */
    bool rope_freqs;          /* add Llama-3-style rope_freqs.weight (factors dividing freqs) */
    const char *vocab_path;   /* copy tokenizer.* from this GGUF; NULL = synthetic vocab */
    uint64_t seed;
    /* qwen35 only: every full_attn_interval-th layer is gated full attention (q/k norms, rope
     * on the first n_rot dims with rope_sections), the others Gated DeltaNet with n_k key
     * heads and n_v value heads of ssm_d_state, a conv of width ssm_d_conv; n_nextn trailing
     * MTP blocks (a few of their tensors) inside block_count. 0 = defaults (4, head_dim / 4,
     * [n_rot/2 - 2 * (n_rot/6), n_rot/6, n_rot/6, 0] as 32 -> [11, 11, 10, 0], d_state 16, n_k 2,
     * n_v 4, width 4). */
    int32_t full_attn_interval, n_rot, ssm_d_state, ssm_n_k, ssm_n_v, ssm_d_conv, n_nextn;
    int32_t rope_sections[4];
    /* the other families: n_rot (above) is rope.dimension_count (0 = head_dim); n_ctx_orig > 0
     * adds LongRoPE as Phi-3's converter writes it: rope.scaling.original_context_length,
     * rope_factors_long / _short.weight (n_rot / 2 each) and, when n_ctx > n_ctx_orig,
     * rope.scaling.attn_factor = sqrt(1 + ln(n_ctx / n_ctx_orig) / ln(n_ctx_orig));
     * output_bias adds output.bias (n_vocab). phi3 writes a fused attn_qkv and a fused
     * ffn_up of 2 n_ff rows (gate first). */
    int32_t n_ctx_orig;
    bool output_bias;
    /* gemma2 / gemma3: n_swa = attention.sliding_window (0: gemma3 without the key, every layer
     * global), swa_period > 0 writes attention.sliding_window_pattern (else the family's
     * default applies: 2 / 6), rope_base_swa > 0 writes rope.freq_base_swa, attn_softcap > 0
     * attn_logit_softcapping (gemma2), final_softcap > 0 final_logit_softcapping,
     * rope_scale_linear > 0 rope.scaling.type linear with that factor (Gemma 3 4B+'s global
     * layers). Gemma files store norm weights with the +1 of Gemma's RMSNorm applied, as
     * convert_hf_to_gguf.py does, so their random norms stay near 1 like the others. */
    int32_t n_swa, swa_period;
    float rope_base_swa, attn_softcap, final_softcap, rope_scale_linear;
} ps_genmodel_params;

/* The "tiny" preset: llama, n_embd 64, 2 layers, 4/2 heads of 16, n_ff 128, ctx 512, synthetic
 * vocab of 512, F32, untied, seed 1. */
ps_genmodel_params ps_genmodel_default_params(void);

/* Overwrites the shape fields of *p with a named preset: "tiny", "qwen3-0.6b" (28 layers, 1024
 * wide, 16/8 heads of 128, FFN 3072, vocab 151,936, tied, qwen3, ctx 40960), "qwen35-tiny" (qwen35,
 * 64 wide, 4 layers = 3 DeltaNet + 1 attention, 4/2 heads of 32, rope on 16 dims, DeltaNet 2 key /
 * 4 value heads of 16, FFN 96, vocab 1000, one MTP block), "qwen35-4l" (qwen35 at Qwen3.6-35B-A3B's
 * widths: 2048 wide, 4 layers, 16/2 heads of 256, rope on 64 dims [11, 11, 10, 0], DeltaNet 16 key
 * / 32 value heads of 128, vocab 248,320, ctx 262144, theta 1e7, FFN 4608 = the width one token
 * activates in the MoE model: 8 routed + 1 shared expert of 512), "qwen35moe-tiny" / "qwen35moe-4l"
 * (the same as qwen35moe: 8 experts of FFN 32, 2 used, shared expert 64 / Qwen3.6-35B-A3B's 256
 * experts of 512, 8 used, shared expert 512; n_ff is the shared expert's width), "qwen3.6-35b-a3b"
 * (qwen35moe-4l at the model's full depth, 40 layers: 30 DeltaNet + 10 attention), "qwen3moe-tiny"
 * (qwen3moe, 64 wide, 2 layers, 4/2 heads of 16, 8 experts of FFN 32, 2 used, vocab 512),
 * "mixtral-tiny" (llama, the same with 4 experts of FFN 64, 2 used), "qwen3-30b-a3b-2l"
 * (Qwen3-30B-A3B's widths with 2 layers: 2048 wide, 32/4 heads of 128, 128 experts of FFN 768, 8
 * used, vocab 151,936, untied, ctx 40960), "gpt-oss-tiny" (gpt-oss: 64 wide, 4 layers, 4/2 heads of
 * 32, 8 experts of FFN 32, 4 used, vocab 512, ctx 1024), "gpt-oss-20b-2l" (gpt-oss-20b's widths
 * with 2 of its 24 layers: 2880 wide, 64/8 heads of 64, 32 experts of FFN 2880, 4 used, vocab
 * 201,088, untied, ctx 131072, theta 150000), "phi3-tiny" (phi3, 64 wide, 2 layers, 4/2 heads of 16
 * with rope on 12 dims, FFN 128 fused with its gate, LongRoPE from an original context of 256 to
 * 1024), "phi3-mini-2l" (Phi-3-mini-128k's widths with 2 layers: 3072 wide, 32/32 heads of 96, FFN
 * 8192, vocab 32,064, LongRoPE 4096 -> 131072), "olmo2-tiny" (olmo2, 64 wide, 2 layers, 4/2 heads
 * of 16, FFN 128, ctx 4096, theta 5e5), "olmo2-1b-2l" (OLMo-2-1B's widths with 2 layers: 2048 wide,
 * 16/16 heads of 128, FFN 8192, vocab 100,352), "gemma2-tiny" (gemma2, 64 wide, 4 layers
 * alternating sliding (window 40) / global, 4/2 heads of 16, FFN 128, vocab 512, soft-caps 50 /
 * 30), "gemma2-2b-4l" (Gemma-2-2B's widths with 4 layers: 2304 wide, 8/4 heads of 256, FFN 9216,
 * vocab 256,000, window 4096, ctx 8192), "gemma3-tiny" (gemma3, 64 wide, 7 layers = 5 sliding
 * (window 40), 1 global, 1 sliding, 4/1 heads of 16, FFN 128, vocab 512, rope 1e6 global / 10000
 * local), "gemma3-1b-6l" (Gemma-3-1B's widths with 6 layers = 5 sliding + 1 global: 1152 wide, 4/1
 * heads of 256, FFN 6912, vocab 262,144, window 512, ctx 32768). Gemma presets are tied (output =
 * token_embd).
 * Returns PS_OK or PS_ERR_NOT_FOUND (the message lists the presets). */
ps_status ps_genmodel_preset(const char *name, ps_genmodel_params *p, ps_error *err);

/* Number of weights the model will have (0 when params are invalid or a vocab is needed). */
int64_t ps_genmodel_n_params(const ps_genmodel_params *p, int64_t n_vocab);

/* Writes the model to `path`, streaming tensor by tensor (memory stays a few MB whatever the
 * model size). On failure the partial file is removed.
 * Returns PS_OK, PS_ERR_INVALID_ARG (a bad parameter, named, e.g. Q8_0 with a row length that
 * is not a multiple of 32, or Q4_K with one not a multiple of 256), PS_ERR_IO, PS_ERR_NOMEM, or the reader's errors for vocab_path. */
ps_status ps_genmodel_write(const ps_genmodel_params *p, const char *path, ps_error *err);

#endif /* PS_GENMODEL_H */
