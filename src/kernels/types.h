/*
 * types.h — the weight types: one row of a table per GGUF tensor type that promptscore computes
 * with (F32, F16, BF16, the legacy Q4_0 / Q4_1 / Q5_0 / Q5_1 / Q8_0, the k-quants Q2_K .. Q6_K,
 * IQ4_NL, IQ4_XS, MXFP4). A row gives the type's name and block geometry, its scalar
 * dequantisation (bitwise what ggml's dequantize_row_* gives: the same float operations in the
 * same order; the f16 scales are widened exactly, so every non-NaN input gives ggml's bits, and
 * a NaN gives a NaN), SIMD forms of it where one exists (same bits), the round-to-nearest
 * quantiser gen-model writes fixtures with, and the matrix kernels for native activations.
 *
 * Dispatch (matmul.c): with float32 activations (PS_ACT_F32), and for native activations
 * whenever a row has no `matmul` kernel, the weights are widened to float32 by to_f32 into the
 * float32 tiles; otherwise `matmul` runs (Q8_0: int8 dot products on Q8_0 activations; BF16:
 * vdpbf16ps on bf16 activations; the others as their kernels land). Any type without a row —
 * IQ1/IQ2/IQ3, TQ, Q8_1, Q8_K, integers, f64 — is refused by the loader with the supported list.
 */
#ifndef PS_TYPES_H
#define PS_TYPES_H

#include "kernels/matmul.h"
#include "kernels/qblocks.h"

/* row (n elements, n a multiple of the block) -> out (n floats). */
typedef void (*ps_row_to_f32_fn)(const void *row, float *out, int64_t n);
/* x (n floats, n a multiple of the block) -> one row of the type. */
typedef void (*ps_row_from_f32_fn)(const float *x, void *row, int64_t n);
/* A native-activation matrix product, the contract of ps_matmul (matmul.h). */
typedef void (*ps_wtype_matmul_fn)(const ps_matmul_env *env, const ps_mat *w, const float *x,
                                   int64_t ldx, int64_t n_rows, float *y, int64_t ldy);
/* Its grouped form, the contract of ps_matmul_group (items sharing one shape of this type). */
typedef void (*ps_wtype_matmul_group_fn)(const ps_matmul_env *env, const ps_mm_item *items,
                                         int32_t n_items);
/* Its plain reference, the contract of ps_matmul_ref with native activations. */
typedef ps_status (*ps_wtype_matmul_ref_fn)(const ps_mat *w, const float *x, int64_t ldx,
                                            int64_t n_rows, float *y, int64_t ldy);

typedef struct {
    uint32_t id;                   /* ggml type number (ps_ggml_type) */
    const char *name;              /* "q4_k", as ggml names it */
    int32_t blck;                  /* elements per block */
    int32_t bytes;                 /* bytes per block */
    ps_row_to_f32_fn to_f32;       /* scalar reference, bitwise ggml's dequantize_row_* */
    ps_row_to_f32_fn to_f32_avx2;  /* the same bits with AVX2 + FMA + F16C; NULL: to_f32 */
    ps_row_to_f32_fn to_f32_avx512;/* the same bits with AVX-512; NULL: to_f32_avx2 */
    ps_row_from_f32_fn from_f32;   /* round-to-nearest quantiser (fixtures) */
    /* native activations: NULL = the weights widened by to_f32 into the float32 tiles */
    ps_wtype_matmul_fn matmul;
    ps_wtype_matmul_ref_fn matmul_ref; /* set exactly when matmul is */
    ps_wtype_matmul_group_fn matmul_group; /* NULL: grouped calls loop over matmul */
    const char *kernel;            /* what native activations run, for bench and README */
} ps_wtype;

/* The row of ggml type `id`, or NULL when promptscore does not compute with that type. */
const ps_wtype *ps_wtype_get(uint32_t id);
/* Rows in table order (i < ps_wtype_count()), for tests and benchmarks. */
int32_t ps_wtype_count(void);
const ps_wtype *ps_wtype_at(int32_t i);
/* "f32, f16, bf16, q4_0, ..." — the supported list that load errors quote. */
const char *ps_wtype_names(void);
/* Bytes of one row of n elements; 0 when n < 0 or not a multiple of the block. */
size_t ps_wtype_row_bytes(const ps_wtype *t, int64_t n);
/* The to_f32 form for isa (AUTO = ps_isa_best()); every form gives the same bits. */
ps_row_to_f32_fn ps_wtype_to_f32(const ps_wtype *t, ps_isa isa);

/* The scalar dequantisations (dequant.c), bitwise ggml's; n a multiple of the block. */
void ps_dequant_f32(const void *row, float *out, int64_t n);
void ps_dequant_f16(const void *row, float *out, int64_t n);
void ps_dequant_bf16(const void *row, float *out, int64_t n);
void ps_dequant_q4_0(const void *row, float *out, int64_t n);
void ps_dequant_q4_1(const void *row, float *out, int64_t n);
void ps_dequant_q5_0(const void *row, float *out, int64_t n);
void ps_dequant_q5_1(const void *row, float *out, int64_t n);
void ps_dequant_q8_0(const void *row, float *out, int64_t n);
void ps_dequant_q2_k(const void *row, float *out, int64_t n);
void ps_dequant_q3_k(const void *row, float *out, int64_t n);
void ps_dequant_q4_k(const void *row, float *out, int64_t n);
void ps_dequant_q5_k(const void *row, float *out, int64_t n);
void ps_dequant_q6_k(const void *row, float *out, int64_t n);
void ps_dequant_iq4_nl(const void *row, float *out, int64_t n);
void ps_dequant_iq4_xs(const void *row, float *out, int64_t n);
void ps_dequant_mxfp4(const void *row, float *out, int64_t n);
/* SIMD widening of F16 / BF16 / Q8_0, and Q4_K / Q5_K / Q6_K (AVX-512), with the same bits as
 * the scalar forms. */
void ps_dequant_f16_avx2(const void *row, float *out, int64_t n);
void ps_dequant_bf16_avx2(const void *row, float *out, int64_t n);
void ps_dequant_q8_0_avx2(const void *row, float *out, int64_t n);
void ps_dequant_f16_avx512(const void *row, float *out, int64_t n);
void ps_dequant_bf16_avx512(const void *row, float *out, int64_t n);
void ps_dequant_q8_0_avx512(const void *row, float *out, int64_t n);
void ps_dequant_q4_k_avx512(const void *row, float *out, int64_t n);
void ps_dequant_q5_k_avx512(const void *row, float *out, int64_t n);
void ps_dequant_q6_k_avx512(const void *row, float *out, int64_t n);
void ps_dequant_q4_0_avx2(const void *row, float *out, int64_t n);
void ps_dequant_q4_0_avx512(const void *row, float *out, int64_t n);
void ps_dequant_q4_1_avx2(const void *row, float *out, int64_t n);
void ps_dequant_q4_1_avx512(const void *row, float *out, int64_t n);
void ps_dequant_q5_0_avx2(const void *row, float *out, int64_t n);
void ps_dequant_q5_0_avx512(const void *row, float *out, int64_t n);
void ps_dequant_q5_1_avx2(const void *row, float *out, int64_t n);
void ps_dequant_q5_1_avx512(const void *row, float *out, int64_t n);
void ps_dequant_iq4_nl_avx2(const void *row, float *out, int64_t n);
void ps_dequant_iq4_nl_avx512(const void *row, float *out, int64_t n);
void ps_dequant_mxfp4_avx2(const void *row, float *out, int64_t n);
void ps_dequant_mxfp4_avx512(const void *row, float *out, int64_t n);
void ps_dequant_iq4_xs_avx2(const void *row, float *out, int64_t n);
void ps_dequant_iq4_xs_avx512(const void *row, float *out, int64_t n);
void ps_dequant_q2_k_avx2(const void *row, float *out, int64_t n);
void ps_dequant_q2_k_avx512(const void *row, float *out, int64_t n);
void ps_dequant_q3_k_avx2(const void *row, float *out, int64_t n);
void ps_dequant_q3_k_avx512(const void *row, float *out, int64_t n);

/* E8M0 exponent byte -> 2^(e - 128) (ggml's half of the E8M0 value, MXFP4's block scale). */
float ps_e8m0_half_to_f32(uint8_t e);

/* The fixture quantisers (quantize.c): round to nearest with scales from each block's range
 * (not llama.cpp's error-minimising search); the layouts are exactly ggml's. */
void ps_quantize_f32(const float *x, void *row, int64_t n);
void ps_quantize_f16(const float *x, void *row, int64_t n);
void ps_quantize_bf16(const float *x, void *row, int64_t n);
void ps_quantize_q4_0(const float *x, void *row, int64_t n);
void ps_quantize_q4_1(const float *x, void *row, int64_t n);
void ps_quantize_q5_0(const float *x, void *row, int64_t n);
void ps_quantize_q5_1(const float *x, void *row, int64_t n);
void ps_quantize_q8_0(const float *x, void *row, int64_t n);
void ps_quantize_q2_k(const float *x, void *row, int64_t n);
void ps_quantize_q3_k(const float *x, void *row, int64_t n);
void ps_quantize_q4_k(const float *x, void *row, int64_t n);
void ps_quantize_q5_k(const float *x, void *row, int64_t n);
void ps_quantize_q6_k(const float *x, void *row, int64_t n);
void ps_quantize_iq4_nl(const float *x, void *row, int64_t n);
void ps_quantize_iq4_xs(const float *x, void *row, int64_t n);
void ps_quantize_mxfp4(const float *x, void *row, int64_t n);

/* The BF16 native kernel (vdpbf16ps) and its reference. */
void ps_matmul_bf16(const ps_matmul_env *env, const ps_mat *w, const float *x, int64_t ldx,
                    int64_t n_rows, float *y, int64_t ldy);
ps_status ps_matmul_bf16_ref(const ps_mat *w, const float *x, int64_t ldx, int64_t n_rows,
                             float *y, int64_t ldy);

#endif /* PS_TYPES_H */
