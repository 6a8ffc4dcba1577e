/*
 * dequant_check.c — promptscore's dequantisation against ggml's, tensor by tensor, bit for bit.
 *
 *   dequant_check QUANT.gguf F32.gguf
 *
 * QUANT.gguf is a file llama.cpp's quantiser wrote; F32.gguf is the same file dequantised by
 * that quantiser (`llama-quantize --allow-requantize QUANT.gguf F32.gguf F32`), which widens
 * each tensor with ggml's own to_float. For every tensor of QUANT.gguf this widens each row with
 * promptscore's table (types.c: the scalar reference and every SIMD form this CPU runs) and
 * compares the bits with the F32 file's row; NaN equals NaN. Prints one line per weight type
 * (tensors, elements, mismatches) and exits 0 when every bit agrees, 1 when one differs or a
 * tensor is missing or of another shape, 2 on bad usage or a file that does not open.
 *
 * Build (from the repository root, after `make`):
 *   cc -O2 -std=c11 -D_GNU_SOURCE -Iinclude -Isrc -o contrib/llama-cpp/dequant_check \
 *       contrib/llama-cpp/dequant_check.c build/libpromptscore.a -lm -pthread
 */
#include "gguf.h"
#include "types.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    uint32_t type;
    long tensors;
    long long elems, bad;
} tally;

static int same_bits(float a, float b) {
    if (isnan(a) && isnan(b)) return 1;
    uint32_t x, y;
    memcpy(&x, &a, 4);
    memcpy(&y, &b, 4);
    return x == y;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: dequant_check QUANT.gguf F32.gguf\n");
        return 2;
    }
    ps_gguf *q = NULL, *f = NULL;
    ps_error err;
    if (ps_gguf_open(argv[1], &q, &err) != PS_OK || ps_gguf_open(argv[2], &f, &err) != PS_OK) {
        fprintf(stderr, "dequant_check: %s\n", err.message);
        return 2;
    }
    const ps_isa isas[] = {PS_ISA_SCALAR, PS_ISA_AVX2, PS_ISA_AVX512};
    const char *isa_names[] = {"scalar", "avx2", "avx512"};
    tally t[64];
    int nt = 0, fail = 0;
    float *a = NULL, *b = NULL;
    for (int64_t i = 0; i < ps_gguf_n_tensors(q); i++) {
        const ps_gguf_tensor *tq = ps_gguf_tensor_at(q, i);
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)tq->name.len, tq->name.ptr);
        const ps_gguf_tensor *tf = ps_gguf_find_tensor(f, name);
        if (!tf || tf->type != 0 || memcmp(tf->ne, tq->ne, sizeof tq->ne)) {
            printf("%s: missing from %s, or not F32 of the same shape\n", name, argv[2]);
            fail = 1;
            continue;
        }
        const ps_wtype *w = ps_wtype_get(tq->type);
        if (!w) {
            printf("%s: type %s has no row in promptscore's table\n", name,
                   ps_ggml_type_name(tq->type));
            fail = 1;
            continue;
        }
        int k = 0;
        while (k < nt && t[k].type != tq->type) k++;
        if (k == nt) {
            if (nt == 64) return 2;
            t[nt++] = (tally){tq->type, 0, 0, 0};
        }
        const int64_t n = tq->ne[0], rows = tq->ne[1] * tq->ne[2] * tq->ne[3];
        const size_t rb = ps_wtype_row_bytes(w, n);
        a = realloc(a, (size_t)n * sizeof *a);
        if (!a) return 2;
        t[k].tensors++;
        t[k].elems += (long long)n * rows;
        for (int s = 0; s < 3; s++) {
            if (s && !ps_isa_supported(isas[s])) continue;
            ps_row_to_f32_fn fn = ps_wtype_to_f32(w, isas[s]);
            long long bad = 0;
            for (int64_t r = 0; r < rows; r++) {
                fn((const char *)tq->data + (size_t)r * rb, a, n);
                b = (float *)tf->data + r * n;
                for (int64_t e = 0; e < n; e++) bad += !same_bits(a[e], b[e]);
            }
            if (bad) {
                printf("%s (%s, %s): %lld of %lld values differ from ggml's\n", name, w->name,
                       isa_names[s], bad, (long long)n * rows);
                t[k].bad += bad;
                fail = 1;
            }
        }
    }
    for (int k = 0; k < nt; k++)
        printf("%-7s %3ld tensors %10lld values  %s\n", ps_ggml_type_name(t[k].type), t[k].tensors,
               t[k].elems, t[k].bad ? "DIFFER" : "bitwise ggml's");
    free(a);
    ps_gguf_close(q);
    ps_gguf_close(f);
    return fail;
}
