/*
 * qmix.c — the tensor types of llama.cpp's quantisation mixes (see qmix.h).
 *
 * The rules, per tensor, in llama.cpp's order (families without special cases here: llama,
 * qwen2, qwen3, qwen3moe):
 *  - tensors of one dimension (norms, biases) stay F32;
 *  - output.weight, and token_embd.weight when the output is tied to it: Q8_0 for MXFP4_MOE or
 *    when the row is not a multiple of the base type's block, else Q6_K (unless the base is
 *    Q8_0);
 *  - MXFP4_MOE: stacked expert tensors MXFP4, every other matrix Q8_0;
 *  - an untied token_embd.weight keeps the base type;
 *  - attn_v: Q2_K -> Q4_K with GQA >= 4, else Q3_K; Q3_K_M -> Q5_K on the first two layers,
 *    else Q4_K; Q3_K_L -> Q5_K; IQ4_NL / IQ4_XS with GQA >= 4 -> Q5_K; Q4_K_M / Q5_K_M -> Q6_K
 *    on the "more bits" layers; Q4_K_S -> Q5_K on the first four; 8 experts -> Q8_0;
 *  - attn_k: 8 experts -> Q8_0;
 *  - ffn_down: Q2_K -> Q3_K; Q3_K_M -> Q5_K on the first n/16 layers, else Q4_K; Q3_K_L ->
 *    Q5_K; Q4_K_M -> Q6_K and Q5_K_M -> Q6_K on the "more bits" layers; IQ4_NL / IQ4_XS ->
 *    Q5_K on the first n/8 (no importance matrix); Q4_K_S -> Q5_K on the first n/8;
 *  - attn_output: Q2_K -> Q3_K, Q3_K_M -> Q4_K, Q3_K_L -> Q5_K; with 8 experts the
 *    Q2_K..Q4_K_M and IQ4 mixes -> Q5_K;
 *  - then, when the row is not a multiple of the chosen type's block: Q2_K / Q3_K -> Q4_0,
 *    Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, IQ4_XS -> IQ4_NL, and F16 if even that does not
 *    fit.
 * "More bits" layers (use_more_bits): the first and last eighth, and every third between.
 * llama.cpp counts attn_v tensors in file order; promptscore's models have one per layer, so
 * the count is the layer index.
 */
#include "gen/qmix.h"
#include "gguf/gguf.h"

#include <stdio.h>

enum {
    F_Q2_K = 10, F_Q3_K_S = 11, F_Q3_K_M = 12, F_Q3_K_L = 13, F_Q4_K_S = 14, F_Q4_K_M = 15,
    F_Q5_K_S = 16, F_Q5_K_M = 17, F_Q6_K = 18, F_IQ4_NL = 25, F_IQ4_XS = 30, F_MXFP4_MOE = 38
};

static const ps_qmix MIXES[] = {
    {"q2_k", F_Q2_K, PS_GGML_Q2_K},       {"q3_k_s", F_Q3_K_S, PS_GGML_Q3_K},
    {"q3_k_m", F_Q3_K_M, PS_GGML_Q3_K},   {"q3_k_l", F_Q3_K_L, PS_GGML_Q3_K},
    {"q4_k_s", F_Q4_K_S, PS_GGML_Q4_K},   {"q4_k_m", F_Q4_K_M, PS_GGML_Q4_K},
    {"q5_k_s", F_Q5_K_S, PS_GGML_Q5_K},   {"q5_k_m", F_Q5_K_M, PS_GGML_Q5_K},
    {"q6_k", F_Q6_K, PS_GGML_Q6_K},       {"iq4_nl", F_IQ4_NL, PS_GGML_IQ4_NL},
    {"iq4_xs", F_IQ4_XS, PS_GGML_IQ4_XS}, {"mxfp4_moe", F_MXFP4_MOE, PS_GGML_MXFP4},
};

const ps_qmix *ps_qmix_find(const char *name) {
    for (size_t i = 0; name && i < PS_ARRAY_LEN(MIXES); i++)
        if (!strcmp(MIXES[i].name, name)) return &MIXES[i];
    return NULL;
}

const char *ps_qmix_names(void) {
    return "q2_k, q3_k_s, q3_k_m, q3_k_l, q4_k_s, q4_k_m, q5_k_s, q5_k_m, q6_k, iq4_nl, "
           "iq4_xs, mxfp4_moe";
}

static bool more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

static bool ends_with(const char *s, const char *suffix) {
    const size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

ps_status ps_qmix_tensor_type(const ps_qmix *mix, const ps_qmix_model *m, const char *name,
                              int64_t ne0, int32_t n_dims, uint32_t *type, ps_error *err) {
    if (n_dims < 2) {
        *type = PS_GGML_F32;
        return PS_OK;
    }
    const int f = mix->ftype;
    const int gqa = m->n_head_kv > 0 ? m->n_head / m->n_head_kv : 1, n = m->n_layer;
    const int n_expert = m->n_expert;
    int layer = -1;
    if (sscanf(name, "blk.%d.", &layer) != 1) layer = -1;
    uint32_t t = mix->base;
    const bool output = !strcmp(name, "output.weight");
    const bool embd = !strcmp(name, "token_embd.weight");
    if (output || (embd && m->tied)) {
        if (f == F_MXFP4_MOE || ne0 % ps_ggml_block_elems(t)) t = PS_GGML_Q8_0;
        else if (t != PS_GGML_Q8_0) t = PS_GGML_Q6_K;
    } else if (f == F_MXFP4_MOE) {
        t = n_dims >= 3 ? PS_GGML_MXFP4 : PS_GGML_Q8_0;
    } else if (embd) {
        /* the base type */
    } else if (ends_with(name, "attn_v.weight")) {
        const int i = layer;
        if (f == F_Q2_K) t = gqa >= 4 ? PS_GGML_Q4_K : PS_GGML_Q3_K;
        else if (f == F_Q3_K_M) t = i < 2 ? PS_GGML_Q5_K : PS_GGML_Q4_K;
        else if (f == F_Q3_K_L) t = PS_GGML_Q5_K;
        else if ((f == F_IQ4_NL || f == F_IQ4_XS) && gqa >= 4) t = PS_GGML_Q5_K;
        else if ((f == F_Q4_K_M || f == F_Q5_K_M) && more_bits(i, n)) t = PS_GGML_Q6_K;
        else if (f == F_Q4_K_S && i < 4) t = PS_GGML_Q5_K;
        if (n_expert == 8) t = PS_GGML_Q8_0;
    } else if (ends_with(name, "attn_k.weight")) {
        if (n_expert == 8) t = PS_GGML_Q8_0;
    } else if (strstr(name, "ffn_down")) {
        const int i = layer;
        if (f == F_Q2_K) t = PS_GGML_Q3_K;
        else if (f == F_Q3_K_M) t = i < n / 16 ? PS_GGML_Q5_K : PS_GGML_Q4_K;
        else if (f == F_Q3_K_L) t = PS_GGML_Q5_K;
        else if (f == F_Q4_K_M) {
            if (more_bits(i, n)) t = PS_GGML_Q6_K;
        } else if (i < n / 8 && (f == F_IQ4_NL || f == F_IQ4_XS)) t = PS_GGML_Q5_K;
        else if (f == F_Q5_K_M && more_bits(i, n)) t = PS_GGML_Q6_K;
        else if (f == F_Q4_K_S && i < n / 8) t = PS_GGML_Q5_K;
    } else if (ends_with(name, "attn_output.weight")) {
        if (n_expert == 8) {
            if (f == F_Q2_K || f == F_Q3_K_S || f == F_Q3_K_M || f == F_IQ4_NL || f == F_Q4_K_S ||
                f == F_Q4_K_M || f == F_IQ4_XS)
                t = PS_GGML_Q5_K;
        } else if (f == F_Q2_K) t = PS_GGML_Q3_K;
        else if (f == F_Q3_K_M) t = PS_GGML_Q4_K;
        else if (f == F_Q3_K_L) t = PS_GGML_Q5_K;
    }
    /* rows that do not fit the type's block */
    if (ne0 % ps_ggml_block_elems(t)) {
        uint32_t fb;
        switch (t) {
        case PS_GGML_Q2_K:
        case PS_GGML_Q3_K: fb = PS_GGML_Q4_0; break;
        case PS_GGML_Q4_K: fb = PS_GGML_Q5_0; break;
        case PS_GGML_Q5_K: fb = PS_GGML_Q5_1; break;
        case PS_GGML_Q6_K: fb = PS_GGML_Q8_0; break;
        case PS_GGML_IQ4_XS: fb = PS_GGML_IQ4_NL; break;
        default:
            return ps_fail(err, PS_ERR_INVALID_ARG, -1,
                           "%s: rows of %lld are not a multiple of the %s block and %s has no "
                           "fallback type",
                           name, (long long)ne0, ps_ggml_type_name(t), mix->name);
        }
        t = ne0 % ps_ggml_block_elems(fb) ? PS_GGML_F16 : fb;
    }
    *type = t;
    return PS_OK;
}
