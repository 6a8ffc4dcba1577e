/*
 * quant.c — weight rows by type number: whether a type is computed with, the bytes of a row,
 * and one row converted to float32.
 *
 * A weight row is n elements stored in its tensor's type; the matmul and the embedding lookup
 * convert one row (or a small tile of rows) at a time into a float buffer through the type's
 * row in the weight-type table (types.c, dequant.c), whose scalar and SIMD forms agree bit for
 * bit. The activation quantisers are in qact.c, the fixture quantisers in quantize.c.
 */
#include "kernels/quant.h"
#include "kernels/types.h"

/* ---- weight rows: look-ups in the weight-type table (types.c) ---- */

bool ps_quant_supported(uint32_t type) { return ps_wtype_get(type) != NULL; }

size_t ps_quant_row_bytes(uint32_t type, int64_t n) {
    return ps_wtype_row_bytes(ps_wtype_get(type), n);
}

void ps_quant_row_to_f32_ref(uint32_t type, const void *row, float *out, int64_t n) {
    const ps_wtype *t = ps_wtype_get(type);
    assert(t && "unsupported type reached ps_quant_row_to_f32");
    t->to_f32(row, out, n);
}

void ps_quant_row_to_f32(ps_isa isa, uint32_t type, const void *row, float *out, int64_t n) {
    const ps_wtype *t = ps_wtype_get(type);
    assert(t && "unsupported type reached ps_quant_row_to_f32");
    ps_wtype_to_f32(t, isa)(row, out, n);
}
