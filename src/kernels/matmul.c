/*
 * matmul.c — ps_matmul picks the kernel for a weight type: the type's native kernel from the
 * weight-type table (types.c: the block types' integer kernels of matmul_quant.c, BF16's
 * vdpbf16ps of matmul_float.c), or, with float32 activations (env->f32_act) and for types
 * without one (F32, F16), the float32 tiles of matmul_float.c with the weights widened exactly
 * by the type's to_f32. Grouped calls (ps_matmul_group) go to the type's grouped form when all
 * their matrices share one shape, else loop. The kernels never look a type up themselves, so
 * the table can point at them without being called back.
 */
#include "kernels/matmul.h"
#include "kernels/matmul_quant.h"
#include "base/prof.h"
#include "kernels/quant.h"
#include "kernels/types.h"

size_t ps_matmul_scratch_floats(int64_t max_n_in) {
    return PS_MAX(ps_mmf_scratch_floats(max_n_in), ps_mmq_scratch_floats(max_n_in));
}

void ps_matmul(const ps_matmul_env *env, const ps_mat *w, const float *x, int64_t ldx,
               int64_t n_rows, float *y, int64_t ldy) {
    assert(env->isa != PS_ISA_AUTO);
    assert(w->type == PS_GGML_F32 || env->scratch_stride >= ps_matmul_scratch_floats(w->n_in));
    if (n_rows <= 0 || w->n_out <= 0) return;
    const uint64_t t0 = ps_prof_start();
    /* the type's native kernel, unless float32 activations were asked for or it has none:
     * then the weights are widened exactly into the float32 tiles */
    const ps_wtype *t = ps_wtype_get(w->type);
    assert(t);
    if (t->matmul && !env->f32_act) {
        t->matmul(env, w, x, ldx, n_rows, y, ldy);
        ps_prof_add(PS_PROF_MATMUL, t0);
        return;
    }
    ps_mmf(env, w, ps_wtype_to_f32(t, env->isa), x, ldx, n_rows, y, ldy);
    ps_prof_add(PS_PROF_MATMUL, t0);
}

void ps_mat_row_to_f32(ps_isa isa, const ps_mat *w, int64_t j, float *out) {
    if (w->dp_tiles)
        ps_bf16_dp_row_to_f32(w, j, out);
    else
        ps_quant_row_to_f32(isa, w->type, (const uint8_t *)w->data + (size_t)j * w->row_bytes,
                            out, w->n_in);
}

void ps_matmul_group(const ps_matmul_env *env, const ps_mm_item *items, int32_t n_items) {
    if (n_items <= 0) return;
    const ps_mat *w0 = &items[0].w[0];
    bool uniform = true;
    for (int32_t i = 0; i < n_items && uniform; i++)
        for (int32_t m = 0; m < items[i].n_w; m++) {
            const ps_mat *w = &items[i].w[m];
            uniform = uniform && items[i].n_w == items[0].n_w && w->type == w0->type &&
                      w->n_in == w0->n_in && w->n_out == w0->n_out;
        }
    const ps_wtype *t = ps_wtype_get(w0->type);
    assert(t);
    /* the grouped form of the type's native kernel, where it has one (types.c) */
    if (uniform && t->matmul_group && !env->f32_act && w0->n_out > 0) {
        assert(env->scratch_stride >= ps_matmul_scratch_floats(w0->n_in));
        const uint64_t t0 = ps_prof_start();
        t->matmul_group(env, items, n_items);
        ps_prof_add(PS_PROF_MATMUL, t0);
        return;
    }
    for (int32_t i = 0; i < n_items; i++)
        for (int32_t m = 0; m < items[i].n_w; m++)
            ps_matmul(env, &items[i].w[m], items[i].x, items[i].ldx, items[i].n_rows,
                      items[i].y[m], items[i].ldy);
}

ps_status ps_matmul_ref(const ps_mat *w, bool f32_act, const float *x, int64_t ldx,
                        int64_t n_rows, float *y, int64_t ldy) {
    const ps_wtype *t = ps_wtype_get(w->type);
    assert(t);
    if (t->matmul_ref && !f32_act) return t->matmul_ref(w, x, ldx, n_rows, y, ldy);
    return ps_mmf_ref(w, t->to_f32, x, ldx, n_rows, y, ldy);
}
