/*
 * deltanet.c — Gated DeltaNet kernels (see deltanet.h for shapes and formulas).
 *
 * The conv is llama.cpp's ssm_conv (float sum over the d_conv taps, oldest input first) then
 * silu; the l2 norm is ggml_l2_norm (sum of squares in double, scale 1 / max(sqrt, eps)); the
 * delta rule is ggml_gated_delta_net's recurrent form, one token after another on a state kept
 * transposed (row j of S holds value dimension j against every key dimension), so one pass over
 * a row does the decay, the S_j . k product, the rank-1 update and the S_j . q product. The
 * dot products are ps_dot_f32 (the ISA's fixed reduction order) and the update ps_axpy_f32, so
 * per ISA the result never depends on the thread that runs a head or on the chunking.
 */
#include "deltanet.h"
#include "matmul.h"

#include <math.h>

void ps_dn_conv_silu(const float *x, int64_t ldx, int32_t n, float *state, const float *w,
                     int32_t d_conv, int64_t ch, int64_t c0, int64_t c1, float *y, int64_t ldy) {
    const int32_t ns = d_conv - 1;
    for (int64_t c = c0; c < c1; c++) {
        const float *wc = w + c * d_conv;
        float win[16]; /* d_conv <= 16 (checked at load) */
        for (int32_t i = 0; i < ns; i++) win[i] = state[(int64_t)i * ch + c];
        for (int32_t t = 0; t < n; t++) {
            win[ns] = x[(int64_t)t * ldx + c];
            float sum = 0.0f;
            for (int32_t i = 0; i < d_conv; i++) sum += win[i] * wc[i];
            y[(int64_t)t * ldy + c] = sum / (1.0f + expf(-sum));
            for (int32_t i = 0; i < ns; i++) win[i] = win[i + 1];
        }
        for (int32_t i = 0; i < ns; i++) state[(int64_t)i * ch + c] = win[i];
    }
}

void ps_dn_l2norm(float *x, int64_t n, float eps) {
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) sum += (double)(x[i] * x[i]);
    const float scale = 1.0f / fmaxf(sqrtf((float)sum), eps);
    for (int64_t i = 0; i < n; i++) x[i] *= scale;
}

float ps_dn_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

float ps_dn_softplus(float x) { return x > 20.0f ? x : logf(1.0f + expf(x)); }

void ps_dn_delta_head(ps_isa isa, float *S, int64_t d, int32_t n, const float *q,
                      const float *k, int64_t ldqk, const float *v, int64_t ldv, float *o,
                      int64_t ldo,
                      const float *g, const float *beta, int64_t ldgb, float scale) {
    for (int32_t t = 0; t < n; t++) {
        const float *qt = q + (int64_t)t * ldqk, *kt = k + (int64_t)t * ldqk;
        const float *vt = v + (int64_t)t * ldv;
        float *ot = o + (int64_t)t * ldo;
        const float decay = expf(g[(int64_t)t * ldgb]), b = beta[(int64_t)t * ldgb];
        for (int64_t j = 0; j < d; j++) {
            float *row = S + j * d;
            for (int64_t i = 0; i < d; i++) row[i] *= decay;
            const float delta = (vt[j] - ps_dot_f32(isa, row, kt, d)) * b;
            ps_axpy_f32(isa, delta, kt, row, d);
            ot[j] = ps_dot_f32(isa, row, qt, d) * scale;
        }
    }
}

void ps_dn_delta_head_ref(float *S, int64_t d, int32_t n, const float *q, const float *k,
                          int64_t ldqk, const float *v, int64_t ldv, float *o, int64_t ldo,
                          const float *g,
                          const float *beta, int64_t ldgb, float scale) {
    for (int32_t t = 0; t < n; t++) {
        const float *qt = q + (int64_t)t * ldqk, *kt = k + (int64_t)t * ldqk;
        const float *vt = v + (int64_t)t * ldv;
        float *ot = o + (int64_t)t * ldo;
        const double decay = exp((double)g[(int64_t)t * ldgb]), b = beta[(int64_t)t * ldgb];
        for (int64_t j = 0; j < d; j++) {
            float *row = S + j * d;
            double sk = 0.0;
            for (int64_t i = 0; i < d; i++) {
                row[i] = (float)((double)row[i] * decay);
                sk += (double)row[i] * (double)kt[i];
            }
            const double delta = ((double)vt[j] - sk) * b;
            double sq = 0.0;
            for (int64_t i = 0; i < d; i++) {
                row[i] = (float)((double)row[i] + delta * (double)kt[i]);
                sq += (double)row[i] * (double)qt[i];
            }
            ot[j] = (float)(sq * (double)scale);
        }
    }
}
