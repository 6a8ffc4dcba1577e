/*
 * qmix.h — llama.cpp's quantisation mixes ("file types": Q4_K_M, Q3_K_S, IQ4_XS, ...): which
 * weight type each tensor of a model gets. A mix names a base type and rules that give some
 * tensors more bits (the output and a tied token embedding Q6_K; attn_v and ffn_down on some
 * layers Q5_K / Q6_K for the *_M mixes; ...) and fall back to a 32-block type when a row is
 * not a multiple of 256. The rules are those of llama.cpp's quantiser (src/llama-quant.cpp,
 * llama_tensor_get_type) for the tensors promptscore's architectures have; gen-model uses
 * them to lay out its fixtures as a downloaded file is laid out.
 */
#ifndef PS_QMIX_H
#define PS_QMIX_H

#include "base/impl.h"

typedef struct {
    const char *name;  /* "q4_k_m" */
    int32_t ftype;     /* llama_ftype number, written as general.file_type */
    uint32_t base;     /* the default weight type (ggml number) */
} ps_qmix;

/* The mix called `name` (lower case, as llama-quantize prints it), or NULL. */
const ps_qmix *ps_qmix_find(const char *name);
/* "q2_k, q3_k_s, ..." */
const char *ps_qmix_names(void);

/* What the rules look at besides the tensor itself. */
typedef struct {
    int32_t n_layer;
    int32_t n_head, n_head_kv; /* GQA factor n_head / n_head_kv */
    int32_t n_expert;          /* 0 or 1: dense */
    bool tied;                 /* no output.weight: token_embd is also the output */
} ps_qmix_model;

/* The type of tensor `name` (llama.cpp's names: "output.weight", "blk.3.attn_v.weight", ...)
 * with rows of ne0 elements; n_dims 3 for stacked experts. Tensors of one dimension are F32.
 * Returns PS_OK, or PS_ERR_INVALID_ARG when no type of the mix fits the row (ne0 not a
 * multiple of 32 where llama.cpp has no fallback), err saying which. */
ps_status ps_qmix_tensor_type(const ps_qmix *mix, const ps_qmix_model *m, const char *name,
                              int64_t ne0, int32_t n_dims, uint32_t *type, ps_error *err);

#endif /* PS_QMIX_H */
