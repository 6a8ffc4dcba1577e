/*
 * ggml_type.h — the tensor types of GGUF files, numbered as ggml numbers them (PS_GGML_*), and
 * the facts every layer asks about them: elements and bytes per block, and the name ggml gives
 * the type. A table indexed by the type number (ggml_type.c) answers all three; it knows every
 * ggml type that still exists, so the GGUF reader can check the size of any tensor, while the
 * weight-type table (kernels/types.h) says which ones promptscore computes with. The byte
 * layouts of the quantised blocks are in kernels/qblocks.h.
 */
#ifndef PS_GGML_TYPE_H
#define PS_GGML_TYPE_H

#include <stdint.h>

/* Tensor types (ggml numbering). The reader knows the block size of every ggml type so that it
 * can check sizes; the model loader decides which ones it can compute with. */
typedef enum {
    PS_GGML_F32 = 0,
    PS_GGML_F16 = 1,
    PS_GGML_Q4_0 = 2,
    PS_GGML_Q4_1 = 3,
    PS_GGML_Q5_0 = 6,
    PS_GGML_Q5_1 = 7,
    PS_GGML_Q8_0 = 8,
    PS_GGML_Q8_1 = 9,
    PS_GGML_Q2_K = 10,
    PS_GGML_Q3_K = 11,
    PS_GGML_Q4_K = 12,
    PS_GGML_Q5_K = 13,
    PS_GGML_Q6_K = 14,
    PS_GGML_Q8_K = 15,
    PS_GGML_IQ4_NL = 20,
    PS_GGML_IQ4_XS = 23,
    PS_GGML_I8 = 24,
    PS_GGML_I16 = 25,
    PS_GGML_I32 = 26,
    PS_GGML_I64 = 27,
    PS_GGML_F64 = 28,
    PS_GGML_BF16 = 30,
    PS_GGML_MXFP4 = 39
    /* also known to the reader (sizes only): iq2_xxs 16 .. iq2_s 22, iq1_m 29, tq1_0 34,
     * tq2_0 35; 4, 5, 31-33, 36-38 were removed from ggml and are unknown. */
} ps_ggml_type;

/* ggml type facts: block size in elements and bytes; name ("f32", "q8_0", ...). Unknown -> 0
 * / "unknown". */
int64_t ps_ggml_block_elems(uint32_t type);
int64_t ps_ggml_block_bytes(uint32_t type);
const char *ps_ggml_type_name(uint32_t type);

#endif /* PS_GGML_TYPE_H */
