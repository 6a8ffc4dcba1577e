/*
 * rope.h — rotary position embeddings: the cos/sin of every rotated pair at one position, with
 * the scalings GGUF files ask for (rope.scaling.type none / linear / yarn / longrope), as
 * llama.cpp defines them (its context setup in llama-context.cpp and ggml's rope_yarn).
 *
 * A ps_rope is made once per model (model.c reads the keys; ps_rope_setup derives the rest)
 * and never depends on a prompt, a chunk or a session, so the angles of a position are the
 * same bits whichever call computes them. For pair t (0 <= t < n_rot/2) at position p:
 *
 *   theta_extrap = p * base^(-2t/n_rot) / factor[t]      factor: rope_freqs (Llama 3) or the
 *                                                        LongRoPE long/short table, else 1
 *   theta_interp = freq_scale * theta_extrap              freq_scale = 1/rope.scaling.factor
 *   theta = theta_interp                                  (none: freq_scale = 1)
 *   YaRN (ext_factor != 0): ramp = 1 - clamp((t - corr0) / max(0.001, corr1 - corr0), 0, 1),
 *         mix = ramp * ext_factor, theta = theta_interp (1 - mix) + theta_extrap mix
 *   cos, sin = cos(theta) * mscale, sin(theta) * mscale
 *
 * corr0/1 are ggml's correction dims: floor / ceil of n_rot ln(n_ctx_orig / (beta 2 pi)) /
 * (2 ln base) for beta_fast / beta_slow, clamped to [0, n_rot - 1], in float32 as ggml. mscale
 * is attn_factor, times 1 + 0.1 ln(1/freq_scale) when ext_factor != 0 (float32, as ggml);
 * attn_factor is llama.cpp's yarn_attn_factor after its YaRN correction (see ps_rope_setup).
 * The angle itself is computed in double (ggml accumulates base^(-2/n_rot) products in
 * float32; the double angle is the exact value that product approximates), then cos / sin are
 * rounded to float32 and multiplied by mscale in float32.
 */
#ifndef PS_ROPE_H
#define PS_ROPE_H

#include "base/impl.h"

typedef enum {
    PS_ROPE_SCALING_NONE = 0,
    PS_ROPE_SCALING_LINEAR,
    PS_ROPE_SCALING_YARN,
    PS_ROPE_SCALING_LONGROPE,
} ps_rope_scaling;

typedef struct {
    ps_rope_scaling scaling;
    int32_t n_rot;          /* rotated dimensions (even) */
    float base;             /* rope.freq_base */
    float freq_scale;       /* 1 / rope.scaling.factor (1: none) */
    float ext_factor;       /* YaRN extrapolation mix (0: off) */
    float attn_factor;      /* llama.cpp's yarn_attn_factor, corrected (see ps_rope_setup) */
    float beta_fast, beta_slow;
    int32_t n_ctx_orig;     /* rope.scaling.original_context_length (default context_length) */
    float corr[2];          /* YaRN correction dims */
    float mscale;           /* what cos and sin are multiplied by */
    const float *factors;   /* n_rot/2 divisors of theta, or NULL */
    const int32_t *sections;/* qwen35 multi-section rope: 4 counts, or NULL (see forward.c) */
} ps_rope;

/* The YaRN key values as a file gives them (negative ext_factor: not set). */
typedef struct {
    float ext_factor;       /* rope.scaling.yarn_ext_factor, default -1 */
    float yarn_attn_factor; /* rope.scaling.yarn_attn_factor, default 1 */
    float attn_factor;      /* rope.scaling.attn_factor, default 1 */
    float log_mul;          /* rope.scaling.yarn_log_multiplier, default 0 */
} ps_rope_keys;

/* Fills the derived fields of r from scaling, n_rot, base, freq_scale, beta_fast/slow,
 * n_ctx_orig and the keys, as llama.cpp's context does: ext_factor = the key, else 1 for yarn
 * and 0 otherwise; with ext_factor != 0, attn_factor = m(f, 1) / m(f, log_mul) (or m(f, 1)
 * when log_mul is 0) times 1 / (1 + 0.1 ln f), f = 1/freq_scale, m(s, k) = s <= 1 ? 1 :
 * 0.1 k ln s + 1 (the yarn_attn_factor key is then not used), else attn_factor = the
 * yarn_attn_factor key; either way times the attn_factor key. Then corr and mscale. */
void ps_rope_setup(ps_rope *r, const ps_rope_keys *keys);

/* cs[t], sn[t] for t < n_rot/2 at position pos (the formula above). */
void ps_rope_angles(const ps_rope *r, int64_t pos, float *cs, float *sn);

/* "none", "linear", "yarn", "longrope". */
const char *ps_rope_scaling_name(ps_rope_scaling s);

#endif /* PS_ROPE_H */
