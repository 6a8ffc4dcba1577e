/*
 * types.c — the weight-type table: one row per GGUF tensor type promptscore computes with.
 *
 * A row names the type as ggml does, gives its block (elements, bytes), its exact
 * dequantisation (dequant.c: the scalar reference and SIMD forms with the same bits), its
 * fixture quantiser (quantize.c) and the kernel native activations use. `matmul` NULL means
 * native activations widen the weights exactly into the float32 tiles, as --act f32 does for
 * every type; a fast kernel for a type is added by filling its row's matmul / matmul_ref /
 * kernel, and matmul_group where the kernel has a grouped form (ps_matmul_group; NULL: a
 * grouped call loops over matmul). Everything that asks "which types", "how big is a row", "how do I read one" looks
 * here — the loader, matmul.c, the embedding lookup, gen-model, tests and benchmarks.
 */
#include "kernels/types.h"
#include "kernels/matmul_float.h"
#include "kernels/matmul_quant.h"

#define WIDEN "f32 widening"

static const ps_wtype TYPES[] = {
    {PS_GGML_F32, "f32", 1, 4, ps_dequant_f32, NULL, NULL, ps_quantize_f32, NULL, NULL, NULL,
     "f32 tiles"},
    {PS_GGML_F16, "f16", 1, 2, ps_dequant_f16, ps_dequant_f16_avx2, ps_dequant_f16_avx512,
     ps_quantize_f16, ps_matmul_f16, ps_matmul_f16_ref, NULL, "f16 activations, f32 tiles"},
    {PS_GGML_BF16, "bf16", 1, 2, ps_dequant_bf16, ps_dequant_bf16_avx2, ps_dequant_bf16_avx512,
     ps_quantize_bf16, ps_matmul_bf16, ps_matmul_bf16_ref, NULL, "bf16 activations, vdpbf16ps"},
    {PS_GGML_Q4_0, "q4_0", 32, sizeof(ps_block_q4_0), ps_dequant_q4_0,
     ps_dequant_q4_0_avx2, ps_dequant_q4_0_avx512,
     ps_quantize_q4_0, ps_mmq, ps_mmq_ref, ps_mmq_group,
     "q8_0 activations, int8 dot products (vpdpbusd / maddubs)"},
    {PS_GGML_Q4_1, "q4_1", 32, sizeof(ps_block_q4_1), ps_dequant_q4_1,
     ps_dequant_q4_1_avx2, ps_dequant_q4_1_avx512,
     ps_quantize_q4_1, ps_mmq, ps_mmq_ref, ps_mmq_group,
     "q8_1 activations, int8 dot products (vpdpbusd / maddubs)"},
    {PS_GGML_Q5_0, "q5_0", 32, sizeof(ps_block_q5_0), ps_dequant_q5_0,
     ps_dequant_q5_0_avx2, ps_dequant_q5_0_avx512,
     ps_quantize_q5_0, ps_mmq, ps_mmq_ref, ps_mmq_group,
     "q8_0 activations, int8 dot products (vpdpbusd / maddubs)"},
    {PS_GGML_Q5_1, "q5_1", 32, sizeof(ps_block_q5_1), ps_dequant_q5_1,
     ps_dequant_q5_1_avx2, ps_dequant_q5_1_avx512,
     ps_quantize_q5_1, ps_mmq, ps_mmq_ref, ps_mmq_group,
     "q8_1 activations, int8 dot products (vpdpbusd / maddubs)"},
    {PS_GGML_Q8_0, "q8_0", 32, sizeof(ps_block_q8_0), ps_dequant_q8_0, ps_dequant_q8_0_avx2,
     ps_dequant_q8_0_avx512, ps_quantize_q8_0, ps_mmq, ps_mmq_ref, ps_mmq_group,
     "q8_0 activations, int8 dot products (vpdpbusd / maddubs)"},
    {PS_GGML_Q2_K, "q2_k", PS_QK_K, sizeof(ps_block_q2_k), ps_dequant_q2_k,
     ps_dequant_q2_k_avx2, ps_dequant_q2_k_avx512,
     ps_quantize_q2_k, ps_mmq, ps_mmq_ref, ps_mmq_group,
     "q8_k activations, int8 dot products (vpdpbusd / maddubs)"},
    {PS_GGML_Q3_K, "q3_k", PS_QK_K, sizeof(ps_block_q3_k), ps_dequant_q3_k,
     ps_dequant_q3_k_avx2, ps_dequant_q3_k_avx512,
     ps_quantize_q3_k, ps_mmq, ps_mmq_ref, ps_mmq_group,
     "q8_k activations, int8 dot products (vpdpbusd / maddubs)"},
    {PS_GGML_Q4_K, "q4_k", PS_QK_K, sizeof(ps_block_q4_k), ps_dequant_q4_k, NULL,
     ps_dequant_q4_k_avx512, ps_quantize_q4_k, ps_mmq, ps_mmq_ref, ps_mmq_group,
     "q8_k activations, int8 dot products (vpdpbusd / maddubs)"},
    {PS_GGML_Q5_K, "q5_k", PS_QK_K, sizeof(ps_block_q5_k), ps_dequant_q5_k, NULL,
     ps_dequant_q5_k_avx512, ps_quantize_q5_k, ps_mmq, ps_mmq_ref, ps_mmq_group,
     "q8_k activations, int8 dot products (vpdpbusd / maddubs)"},
    {PS_GGML_Q6_K, "q6_k", PS_QK_K, sizeof(ps_block_q6_k), ps_dequant_q6_k, NULL,
     ps_dequant_q6_k_avx512, ps_quantize_q6_k, ps_mmq, ps_mmq_ref, ps_mmq_group,
     "q8_k activations, int8 dot products (vpdpbusd / maddubs)"},
    {PS_GGML_IQ4_NL, "iq4_nl", 32, sizeof(ps_block_iq4_nl), ps_dequant_iq4_nl,
     ps_dequant_iq4_nl_avx2, ps_dequant_iq4_nl_avx512,
     ps_quantize_iq4_nl, ps_mmq, ps_mmq_ref, ps_mmq_group,
     "q8_0 activations, int8 dot products (vpdpbusd / maddubs)"},
    {PS_GGML_IQ4_XS, "iq4_xs", PS_QK_K, sizeof(ps_block_iq4_xs), ps_dequant_iq4_xs,
     ps_dequant_iq4_xs_avx2, ps_dequant_iq4_xs_avx512,
     ps_quantize_iq4_xs, ps_mmq, ps_mmq_ref, ps_mmq_group,
     "q8_k activations, int8 dot products (vpdpbusd / maddubs)"},
    {PS_GGML_MXFP4, "mxfp4", 32, sizeof(ps_block_mxfp4), ps_dequant_mxfp4,
     ps_dequant_mxfp4_avx2, ps_dequant_mxfp4_avx512,
     ps_quantize_mxfp4, ps_mmq, ps_mmq_ref, ps_mmq_group,
     "q8_0 activations, int8 dot products (vpdpbusd / maddubs)"},
};

const ps_wtype *ps_wtype_get(uint32_t id) {
    for (size_t i = 0; i < PS_ARRAY_LEN(TYPES); i++)
        if (TYPES[i].id == id) return &TYPES[i];
    return NULL;
}

int32_t ps_wtype_count(void) { return (int32_t)PS_ARRAY_LEN(TYPES); }

const ps_wtype *ps_wtype_at(int32_t i) {
    return i >= 0 && i < (int32_t)PS_ARRAY_LEN(TYPES) ? &TYPES[i] : NULL;
}

const char *ps_wtype_names(void) {
    return "f32, f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0, q2_k, q3_k, q4_k, q5_k, q6_k, "
           "iq4_nl, iq4_xs, mxfp4";
}

size_t ps_wtype_row_bytes(const ps_wtype *t, int64_t n) {
    if (!t || n < 0 || n % t->blck) return 0;
    return (size_t)(n / t->blck) * (size_t)t->bytes;
}

ps_row_to_f32_fn ps_wtype_to_f32(const ps_wtype *t, ps_isa isa) {
    if (isa == PS_ISA_AUTO) isa = ps_isa_best();
    if (isa == PS_ISA_AVX512 && t->to_f32_avx512) return t->to_f32_avx512;
    if ((isa == PS_ISA_AVX512 || isa == PS_ISA_AVX2) && t->to_f32_avx2) return t->to_f32_avx2;
    return t->to_f32;
}
