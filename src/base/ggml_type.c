/*
 * ggml_type.c — the ggml tensor types' block geometry and names: one table indexed by the type
 * number (the numbers of ggml.h; removed types stay zero, which reads as unknown), and three
 * look-ups that answer 0 / "unknown" outside it.
 */
#include "base/ggml_type.h"
#include "base/impl.h"

typedef struct {
    const char *name;
    int32_t blck; /* elements per block; 0 = unknown / removed type */
    int32_t size; /* bytes per block */
} ggml_type_info;

/* Indexed by ggml type number. Removed types (4, 5, 31-33, 36-38) stay unknown. */
static const ggml_type_info GGML_TYPES[] = {
    [0] = {"f32", 1, 4},
    [1] = {"f16", 1, 2},
    [2] = {"q4_0", 32, 18},
    [3] = {"q4_1", 32, 20},
    [6] = {"q5_0", 32, 22},
    [7] = {"q5_1", 32, 24},
    [8] = {"q8_0", 32, 34},
    [9] = {"q8_1", 32, 36},
    [10] = {"q2_k", 256, 84},
    [11] = {"q3_k", 256, 110},
    [12] = {"q4_k", 256, 144},
    [13] = {"q5_k", 256, 176},
    [14] = {"q6_k", 256, 210},
    [15] = {"q8_k", 256, 292},
    [16] = {"iq2_xxs", 256, 66},
    [17] = {"iq2_xs", 256, 74},
    [18] = {"iq3_xxs", 256, 98},
    [19] = {"iq1_s", 256, 50},
    [20] = {"iq4_nl", 32, 18},
    [21] = {"iq3_s", 256, 110},
    [22] = {"iq2_s", 256, 82},
    [23] = {"iq4_xs", 256, 136},
    [24] = {"i8", 1, 1},
    [25] = {"i16", 1, 2},
    [26] = {"i32", 1, 4},
    [27] = {"i64", 1, 8},
    [28] = {"f64", 1, 8},
    [29] = {"iq1_m", 256, 56},
    [30] = {"bf16", 1, 2},
    [34] = {"tq1_0", 256, 54},
    [35] = {"tq2_0", 256, 66},
    [39] = {"mxfp4", 32, 17},
};

int64_t ps_ggml_block_elems(uint32_t type) {
    return type < PS_ARRAY_LEN(GGML_TYPES) ? GGML_TYPES[type].blck : 0;
}

int64_t ps_ggml_block_bytes(uint32_t type) {
    return type < PS_ARRAY_LEN(GGML_TYPES) && GGML_TYPES[type].blck ? GGML_TYPES[type].size : 0;
}

const char *ps_ggml_type_name(uint32_t type) {
    return type < PS_ARRAY_LEN(GGML_TYPES) && GGML_TYPES[type].blck ? GGML_TYPES[type].name
                                                                     : "unknown";
}
