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
 * float32 tiles; otherwise `matmul` runs (the block types, Q8_0 among them: matmul_quant.c's
 * int8 dot products on activations quantised as llama.cpp does; BF16: matmul_float.c's
 * vdpbf16ps on bf16 activations). What a row points at never looks a type up here, so the
 * table is never called back. Any type without a row — IQ1/IQ2/IQ3, TQ, Q8_1, Q8_K, integers,
 * f64 — is refused by the loader with the supported list.
 */
#ifndef PS_TYPES_H
#define PS_TYPES_H

#include "kernels/mat.h"
#include "kernels/qblocks.h"
#include "kernels/dequant.h"
#include "kernels/quantize.h"

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

#endif /* PS_TYPES_H */
