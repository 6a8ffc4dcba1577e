/*
 * genmodel.h — writes a GGUF model with deterministic random weights (llama, qwen2, qwen3; F32,
 * F16, BF16 or Q8_0 matrices) for tests and benchmarks. The same parameters and seed always give
 * the same bytes. The vocabulary is either copied from a vocabulary GGUF (its tokenizer.* keys)
 * or a synthetic SentencePiece one. Key and tensor names are llama.cpp's.
 */
#ifndef PS_GENMODEL_H
#define PS_GENMODEL_H

#include "gguf.h"

typedef struct {
    char arch[16];            /* "llama", "qwen2" (q/k/v biases), "qwen3" (q/k head norms) */
    char name[64];            /* general.name; "" = "promptscore-random-<arch>" */
    int32_t n_vocab;          /* synthetic vocabulary size (>= 259); ignored with vocab_path */
    int32_t n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, n_ctx;
    float rope_base;          /* <arch>.rope.freq_base */
    float rms_eps;            /* <arch>.attention.layer_norm_rms_epsilon */
    uint32_t type;            /* matrices: PS_GGML_F32, F16, BF16 or Q8_0; norms/biases stay F32 */
    bool tied;                /* no output.weight: the output reuses token_embd.weight */
    bool rope_freqs;          /* add Llama-3-style rope_freqs.weight (factors dividing freqs) */
    const char *vocab_path;   /* copy tokenizer.* from this GGUF; NULL = synthetic vocab */
    uint64_t seed;
} ps_genmodel_params;

/* The "tiny" preset: llama, n_embd 64, 2 layers, 4/2 heads of 16, n_ff 128, ctx 512, synthetic
 * vocab of 512, F32, untied, seed 1. */
ps_genmodel_params ps_genmodel_default_params(void);

/* Overwrites the shape fields of *p with a named preset: "tiny", "qwen3-0.6b" (28 layers, 1024
 * wide, 16/8 heads of 128, FFN 3072, vocab 151,936, tied, qwen3, ctx 40960).
 * Returns PS_OK or PS_ERR_NOT_FOUND (the message lists the presets). */
ps_status ps_genmodel_preset(const char *name, ps_genmodel_params *p, ps_error *err);

/* Number of weights the model will have (0 when params are invalid or a vocab is needed). */
int64_t ps_genmodel_n_params(const ps_genmodel_params *p, int64_t n_vocab);

/* Writes the model to `path`, streaming tensor by tensor (memory stays a few MB whatever the
 * model size). On failure the partial file is removed.
 * Returns PS_OK, PS_ERR_INVALID_ARG (a bad parameter, named, e.g. Q8_0 with a row length that
 * is not a multiple of 32), PS_ERR_IO, PS_ERR_NOMEM, or the reader's errors for vocab_path. */
ps_status ps_genmodel_write(const ps_genmodel_params *p, const char *path, ps_error *err);

#endif /* PS_GENMODEL_H */
