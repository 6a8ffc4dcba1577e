/*
 * rope.c — the RoPE angles of one position under every scaling GGUF files use (see rope.h for
 * the formula and where each number comes from). One function per step: the YaRN correction
 * dims and attention factor (once per model), the per-pair ramp, the angles of a position.
 */
#include "model/rope.h"

#include <math.h>

const char *ps_rope_scaling_name(ps_rope_scaling s) {
    switch (s) {
    case PS_ROPE_SCALING_NONE: return "none";
    case PS_ROPE_SCALING_LINEAR: return "linear";
    case PS_ROPE_SCALING_YARN: return "yarn";
    case PS_ROPE_SCALING_LONGROPE: return "longrope";
    }
    return "?";
}

/* ggml's correction dim for beta rotations, in float32 */
static float corr_dim(int32_t n_rot, int32_t n_ctx_orig, float beta, float base) {
    return (float)n_rot * logf((float)n_ctx_orig / (beta * 2 * (float)M_PI)) / (2 * logf(base));
}

/* llama.cpp's get_mscale */
static float yarn_mscale(float scale, float k) {
    return scale <= 1.0f ? 1.0f : 0.1f * k * logf(scale) + 1.0f;
}

void ps_rope_setup(ps_rope *r, const ps_rope_keys *keys) {
    r->ext_factor = keys->ext_factor >= 0.0f ? keys->ext_factor
                    : r->scaling == PS_ROPE_SCALING_YARN ? 1.0f
                                                          : 0.0f;
    r->attn_factor = keys->yarn_attn_factor;
    if (r->ext_factor != 0.0f) {
        const float f = 1.0f / r->freq_scale;
        r->attn_factor = keys->log_mul != 0.0f
                             ? yarn_mscale(f, 1.0f) / yarn_mscale(f, keys->log_mul)
                             : yarn_mscale(f, 1.0f);
        r->attn_factor *= 1.0f / (1.0f + 0.1f * logf(f));
    }
    r->attn_factor *= keys->attn_factor;
    const float start = floorf(corr_dim(r->n_rot, r->n_ctx_orig, r->beta_fast, r->base));
    const float end = ceilf(corr_dim(r->n_rot, r->n_ctx_orig, r->beta_slow, r->base));
    r->corr[0] = start > 0.0f ? start : 0.0f;
    r->corr[1] = end < (float)(r->n_rot - 1) ? end : (float)(r->n_rot - 1);
    r->mscale = r->attn_factor;
    if (r->ext_factor != 0.0f) r->mscale *= 1.0f + 0.1f * logf(1.0f / r->freq_scale);
}

/* Multi-section rope (llama.cpp's imrope, qwen35*) for text: the t, h and w sections all see
 * the token's position and the fourth (e) sees position 0. True when pair t falls in e. */
static bool imrope_pos0(const int32_t sec[4], int32_t t) {
    const int32_t sector = t % (sec[0] + sec[1] + sec[2] + sec[3]);
    if (sector % 3 == 1 && sector < 3 * sec[1]) return false;
    if (sector % 3 == 2 && sector < 3 * sec[2]) return false;
    if (sector % 3 == 0 && sector < 3 * sec[0]) return false;
    return true;
}

/* ggml's rope_yarn_ramp (float32) times ext_factor */
static float yarn_mix(const ps_rope *r, int32_t t) {
    const float den = r->corr[1] - r->corr[0] > 0.001f ? r->corr[1] - r->corr[0] : 0.001f;
    const float y = ((float)t - r->corr[0]) / den;
    const float ramp = 1.0f - (y < 0.0f ? 0.0f : y > 1.0f ? 1.0f : y);
    return ramp * r->ext_factor;
}

void ps_rope_angles(const ps_rope *r, int64_t pos, float *cs, float *sn) {
    const int32_t half = r->n_rot / 2;
    const double p = (double)pos;
    for (int32_t t = 0; t < half; t++) {
        double extrap = p * pow((double)r->base, -2.0 * t / (double)r->n_rot);
        if (r->sections && imrope_pos0(r->sections, t)) extrap = 0.0;
        if (r->factors) extrap /= (double)r->factors[t];
        double theta = (double)r->freq_scale * extrap;
        if (r->ext_factor != 0.0f) {
            const double mix = (double)yarn_mix(r, t);
            theta = theta * (1.0 - mix) + extrap * mix;
        }
        float c = (float)cos(theta), s = (float)sin(theta);
        if (r->mscale != 1.0f) c *= r->mscale, s *= r->mscale;
        cs[t] = c;
        sn[t] = s;
    }
}
