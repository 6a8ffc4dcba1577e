/*
 * model.c — GGUF keys and tensors -> hyperparameters + weight views (the run state is
 * session.c's).
 *
 * Loading maps the file (gguf.c), builds the tokenizer (vocab.c) and, unless vocab_only, finds
 * the family in the architecture table (arch.c), reads the <arch>.* keys and checks every
 * model-wide tensor (ps_model_tensors) and every tensor the features of each layer name
 * (ps_layer_tensors): present, a type of the weight-type table (types.c; each matrix in its
 * own type, so mixed files load; norms and biases F32), shape in GGUF order (ne[0] = input
 * dim), whole blocks per row, bytes. Weights stay in
 * the mapping; ps_mat records a pointer and row stride per matrix. Any problem is an error that
 * names the key or tensor and gives the numbers. Unless no_repack, two kinds of matrices are
 * also copied once into the layout their kernel reads (repack_tiles / repack_dp: BF16;
 * repack_experts: Q4_K and Q6_K experts), the copies set in their ps_mat.
 */
#include "model/model.h"
#include "kernels/matmul_amx.h"
#include "kernels/matmul_float.h"
#include "kernels/matmul_quant.h"
#include "kernels/quant.h"
#include "kernels/types.h"
#include "model/vocab.h"
#include "base/util.h"

#include <math.h>
#include <stdio.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define PS_MAX_DIM (1 << 20) /* sanity bound for every hyperparameter */

ps_model_params ps_model_default_params(void) {
    ps_model_params p;
    memset(&p, 0, sizeof p);
    p.n_ctx = 0;
    p.vocab_only = false;
    return p;
}

const char *ps_act_name(ps_act act) {
    switch (act) {
    case PS_ACT_NATIVE: return "native";
    case PS_ACT_F32: return "f32";
    }
    return "?";
}

/* ---- keys ---- */

static void copy_str(char *dst, size_t cap, ps_gguf_str s) {
    size_t n = s.len < cap - 1 ? (size_t)s.len : cap - 1;
    memcpy(dst, s.ptr, n);
    dst[n] = '\0';
}

/* <arch>.<suffix> as u32 in [1, PS_MAX_DIM] (PS_MAX_CTX for context_length; 0 allowed when
 * allow_zero). Missing: *out = def when !required. */
static ps_status key_dim(const ps_gguf *g, const char *arch, const char *suffix, bool required,
                         int32_t def, bool allow_zero, int32_t *out, ps_error *err) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    uint32_t v = 0;
    ps_status st = ps_gguf_get_u32(g, key, &v, err);
    if (st == PS_ERR_NOT_FOUND) {
        if (required) return ps_fail(err, PS_ERR_NOT_FOUND, -1, "missing key '%s'", key);
        *out = def;
        return PS_OK;
    }
    if (st != PS_OK) return st;
    const uint32_t max = strcmp(suffix, "context_length") ? PS_MAX_DIM : PS_MAX_CTX;
    if ((v == 0 && !allow_zero) || v > max)
        return ps_fail(err, PS_ERR_FORMAT, -1, "key '%s' = %u is out of range (%d..%u)", key, v,
                       allow_zero ? 0 : 1, max);
    *out = (int32_t)v;
    return PS_OK;
}

static ps_status key_f32(const ps_gguf *g, const char *arch, const char *suffix, bool required,
                         float def, float *out, ps_error *err) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    ps_status st = ps_gguf_get_f32(g, key, out, err);
    if (st == PS_ERR_NOT_FOUND) {
        if (required) return ps_fail(err, PS_ERR_NOT_FOUND, -1, "missing key '%s'", key);
        *out = def;
        return PS_OK;
    }
    if (st != PS_OK) return st;
    if (!isfinite(*out))
        return ps_fail(err, PS_ERR_FORMAT, -1, "key '%s' is not a finite number", key);
    return PS_OK;
}

/* qwen35 / qwen35moe: the Gated DeltaNet sizes, the layer pattern, the MTP blocks and the
 * rope sections, as llama.cpp reads them (see model.h). Called after the common keys. */
static ps_status read_hybrid_hparams(ps_model *m, const char *arch, ps_error *err) {
    const ps_gguf *g = m->gguf;
    ps_hparams *hp = &m->hp;
    ps_status st;
    int32_t interval = 4;
    if ((st = key_dim(g, arch, "ssm.conv_kernel", true, 0, false, &hp->ssm_d_conv, err)) ||
        (st = key_dim(g, arch, "ssm.state_size", true, 0, false, &hp->ssm_d_state, err)) ||
        (st = key_dim(g, arch, "ssm.group_count", true, 0, false, &hp->ssm_n_k, err)) ||
        (st = key_dim(g, arch, "ssm.time_step_rank", true, 0, false, &hp->ssm_n_v, err)) ||
        (st = key_dim(g, arch, "ssm.inner_size", true, 0, false, &hp->ssm_d_inner, err)) ||
        (st = key_dim(g, arch, "full_attention_interval", false, 4, false, &interval, err)) ||
        (st = key_dim(g, arch, "nextn_predict_layers", false, 0, true, &hp->n_layer_nextn,
                      err)))
        return st;
    char key[128];
    snprintf(key, sizeof key, "%s.attention.recurrent_layers", arch);
    if (ps_gguf_find_key(g, key) >= 0)
        return ps_fail(err, PS_ERR_UNSUPPORTED, -1,
                       "key '%s' (an explicit layer pattern) is not supported; "
                       "%s.full_attention_interval is",
                       key, arch);
    if (hp->ssm_d_conv < 2 || hp->ssm_d_conv > 16)
        return ps_fail(err, PS_ERR_UNSUPPORTED, -1, "%s.ssm.conv_kernel = %d is not in 2..16",
                       arch, hp->ssm_d_conv);
    if (hp->ssm_n_v % hp->ssm_n_k != 0)
        return ps_fail(err, PS_ERR_FORMAT, -1,
                       "%s.ssm.time_step_rank = %d (value heads) is not a multiple of "
                       "ssm.group_count = %d (key heads)",
                       arch, hp->ssm_n_v, hp->ssm_n_k);
    if ((int64_t)hp->ssm_n_v * hp->ssm_d_state != hp->ssm_d_inner)
        return ps_fail(err, PS_ERR_FORMAT, -1,
                       "%s.ssm.inner_size = %d differs from time_step_rank %d x state_size %d",
                       arch, hp->ssm_d_inner, hp->ssm_n_v, hp->ssm_d_state);
    if (hp->n_layer_nextn >= hp->n_layer)
        return ps_fail(err, PS_ERR_FORMAT, -1,
                       "%s.nextn_predict_layers = %d must be below block_count = %d", arch,
                       hp->n_layer_nextn, hp->n_layer);
    hp->n_layer -= hp->n_layer_nextn; /* the MTP blocks are not run */
    hp->full_attn_interval = interval;
    hp->rope.sections = hp->rope_sections;
    hp->n_layer_kv = 0;
    hp->n_layer_rs = 0;
    for (int32_t l = 0; l < hp->n_layer; l++) {
        if ((l + 1) % interval == 0) hp->n_layer_kv++;
        else hp->n_layer_rs++;
    }
    /* rope.dimension_sections: 4 non-negative counts of rope pairs (ggml_rope_multi) */
    snprintf(key, sizeof key, "%s.rope.dimension_sections", arch);
    ps_gguf_type et;
    uint64_t n = 0;
    const void *data = NULL;
    st = ps_gguf_get_arr(g, key, &et, &n, &data, err);
    if (st == PS_ERR_NOT_FOUND) return ps_fail(err, st, -1, "missing key '%s'", key);
    if (st != PS_OK) return st;
    if ((et != PS_GGUF_INT32 && et != PS_GGUF_UINT32) || n != 4 || !data)
        return ps_fail(err, PS_ERR_FORMAT, -1,
                       "key '%s' must be an array of 4 integers (got %llu elements of type %d)",
                       key, (unsigned long long)n, (int)et);
    int64_t total = 0;
    for (int i = 0; i < 4; i++) {
        int32_t v;
        memcpy(&v, (const uint8_t *)data + 4 * i, 4);
        if (v < 0 || (et == PS_GGUF_UINT32 && v > PS_MAX_DIM))
            return ps_fail(err, PS_ERR_FORMAT, -1, "key '%s' element %d = %d is negative", key,
                           i, v);
        hp->rope_sections[i] = v;
        total += v;
    }
    /* in 64 bits: each section is a non-negative int32, three of them can overflow an int */
    const int64_t first3 = (int64_t)hp->rope_sections[0] + hp->rope_sections[1] +
                           hp->rope_sections[2];
    if (first3 == 0 || total > hp->head_dim)
        return ps_fail(err, PS_ERR_UNSUPPORTED, -1,
                       "key '%s' = [%d, %d, %d, %d]: the first three must not all be 0 and the "
                       "sum must be at most head_dim = %d",
                       key, hp->rope_sections[0], hp->rope_sections[1], hp->rope_sections[2],
                       hp->rope_sections[3], hp->head_dim);
    return PS_OK;
}

/* The expert keys, as llama.cpp reads them for these families: expert_count (required where
 * every layer has experts; for llama, experts replace the dense FFN when it is > 0),
 * expert_used_count (1..expert_count), the expert FFN width (qwen3moe:
 * expert_feed_forward_length, else feed_forward_length / expert_used_count; llama:
 * feed_forward_length), expert_weights_norm (default true: llama.cpp renormalises the chosen
 * weights for both families; a file that says false is followed), expert_gating_func (softmax
 * only). gpt-oss: the router's top k of the logits, softmaxed over the k (moe.c), neither key. */
static ps_status read_expert_hparams(ps_model *m, const char *arch, ps_error *err) {
    const ps_gguf *g = m->gguf;
    ps_hparams *hp = &m->hp;
    const bool always = hp->info->layer & PS_L_FFN_MOE;
    if (!always && !(hp->info->flags & PS_A_EXPERTS_BY_KEY)) return PS_OK;
    ps_status st;
    if ((st = key_dim(g, arch, "expert_count", always, 0, !always, &hp->n_expert, err)))
        return st;
    if (hp->n_expert == 0) return PS_OK;
    if ((st = key_dim(g, arch, "expert_used_count", true, 0, false, &hp->n_expert_used, err)))
        return st;
    if (hp->n_expert_used > hp->n_expert)
        return ps_fail(err, PS_ERR_FORMAT, -1,
                       "key '%s.expert_used_count' = %d exceeds %s.expert_count = %d", arch,
                       hp->n_expert_used, arch, hp->n_expert);
    if (always) {
        const int32_t def = hp->n_ff / hp->n_expert_used;
        if ((st = key_dim(g, arch, "expert_feed_forward_length", def == 0, def, false,
                          &hp->n_ff_exp, err)))
            return st;
    } else {
        hp->n_ff_exp = hp->n_ff;
    }
    char key[128];
    snprintf(key, sizeof key, "%s.expert_weights_norm", arch);
    hp->expert_norm = true;
    st = ps_gguf_get_bool(g, key, &hp->expert_norm, err);
    if (st != PS_OK && st != PS_ERR_NOT_FOUND) return st;
    snprintf(key, sizeof key, "%s.expert_gating_func", arch);
    uint32_t gating = 1;
    st = ps_gguf_get_u32(g, key, &gating, err);
    if (st != PS_OK && st != PS_ERR_NOT_FOUND) return st;
    if (hp->info->layer & PS_L_MOE_OAI) {
        /* gpt-oss: llama.cpp's graph fixes the gating (softmax over the chosen k, which sum
         * to 1 already) and reads neither key */
        hp->expert_norm = false;
    } else if (gating != 1 && gating != 0) {
        return ps_fail(err, PS_ERR_UNSUPPORTED, -1,
                       "key '%s' = %u is not supported (1 = softmax)", key, gating);
    }
    if (hp->info->layer & PS_L_FFN_SHEXP) /* llama.cpp: default n_ff */
        if ((st = key_dim(g, arch, "expert_shared_feed_forward_length", hp->n_ff == 0, hp->n_ff,
                          false, &hp->n_ff_shexp, err)))
            return st;
    ps_error_clear(err);
    return PS_OK;
}

/* RoPE scaling, as llama.cpp reads it (rope.h has the formula): rope.scaling.type (default
 * linear; none, linear, yarn, longrope), the factor (rope.scaling.factor, else the older
 * rope.scale_linear; freq_scale = 1/factor, 1 for none), original_context_length (default
 * context_length), the YaRN keys yarn_ext_factor / yarn_attn_factor / yarn_beta_fast /
 * yarn_beta_slow / yarn_log_multiplier and attn_factor. Llama 3 stores its scaling as the
 * rope_freqs.weight tensor and LongRoPE as rope_factors_long/short.weight (load_weights). */
static ps_status read_rope_scaling(ps_model *m, const char *arch, ps_error *err) {
    const ps_gguf *g = m->gguf;
    ps_hparams *hp = &m->hp;
    ps_rope *r = &hp->rope;
    ps_status st;
    char key[128];
    snprintf(key, sizeof key, "%s.rope.scaling.type", arch);
    ps_gguf_str type;
    r->scaling = PS_ROPE_SCALING_LINEAR;
    st = ps_gguf_get_str(g, key, &type, err);
    if (st == PS_OK) {
        char t[32];
        copy_str(t, sizeof t, type);
        if (!strcmp(t, "none")) r->scaling = PS_ROPE_SCALING_NONE;
        else if (!strcmp(t, "linear") || !strcmp(t, "llama3")) r->scaling = PS_ROPE_SCALING_LINEAR;
        else if (!strcmp(t, "yarn")) r->scaling = PS_ROPE_SCALING_YARN;
        else if (!strcmp(t, "longrope")) r->scaling = PS_ROPE_SCALING_LONGROPE;
        else
            return ps_fail(err, PS_ERR_UNSUPPORTED, -1,
                           "%s = '%.*s' is not supported (none, linear, yarn, longrope)", key,
                           (int)PS_MIN(type.len, 64), type.ptr);
    } else if (st != PS_ERR_NOT_FOUND) {
        return st;
    }
    float factor = 0.0f;
    if ((st = key_f32(g, arch, "rope.scaling.factor", false, 0.0f, &factor, err))) return st;
    if (factor == 0.0f &&
        (st = key_f32(g, arch, "rope.scale_linear", false, 0.0f, &factor, err)))
        return st;
    if (factor < 0.0f)
        return ps_fail(err, PS_ERR_FORMAT, -1, "%s.rope.scaling.factor = %g must be > 0", arch,
                       (double)factor);
    hp->rope_freq_scale = factor == 0.0f || r->scaling == PS_ROPE_SCALING_NONE ? 1.0f
                                                                               : 1.0f / factor;
    if (!isfinite(hp->rope_freq_scale) || hp->rope_freq_scale == 0.0f)
        return ps_fail(err, PS_ERR_FORMAT, -1, "%s.rope.scaling.factor = %g is out of range",
                       arch, (double)factor);
    if ((st = key_dim(g, arch, "rope.scaling.original_context_length", false, hp->n_ctx_train,
                      false, &r->n_ctx_orig, err)))
        return st;
    ps_rope_keys k;
    struct {
        const char *suffix;
        float def, *out;
        bool positive; /* must be > 0 (else any finite value) */
    } fk[] = {
        {"rope.scaling.yarn_ext_factor", -1.0f, &k.ext_factor, false},
        {"rope.scaling.yarn_attn_factor", 1.0f, &k.yarn_attn_factor, true},
        {"rope.scaling.attn_factor", 1.0f, &k.attn_factor, true},
        {"rope.scaling.yarn_log_multiplier", 0.0f, &k.log_mul, false},
        {"rope.scaling.yarn_beta_fast", 32.0f, &r->beta_fast, true},
        {"rope.scaling.yarn_beta_slow", 1.0f, &r->beta_slow, true},
    };
    for (size_t i = 0; i < PS_ARRAY_LEN(fk); i++) {
        if ((st = key_f32(g, arch, fk[i].suffix, false, fk[i].def, fk[i].out, err))) return st;
        if (fk[i].positive && !(*fk[i].out > 0.0f))
            return ps_fail(err, PS_ERR_FORMAT, -1, "%s.%s = %g must be > 0", arch, fk[i].suffix,
                           (double)*fk[i].out);
    }
    if (k.ext_factor > 1.0f)
        return ps_fail(err, PS_ERR_FORMAT, -1,
                       "%s.rope.scaling.yarn_ext_factor = %g must be in [0, 1] (or negative: "
                       "not set)",
                       arch, (double)k.ext_factor);
    r->n_rot = hp->n_rot;
    r->base = hp->rope_base;
    r->freq_scale = hp->rope_freq_scale;
    r->factors = NULL;
    r->sections = NULL;
    ps_rope_setup(r, &k);
    if (!isfinite(r->mscale) || !(r->mscale > 0.0f) || !isfinite(r->corr[0]) ||
        !isfinite(r->corr[1]))
        return ps_fail(err, PS_ERR_FORMAT, -1,
                       "%s.rope.scaling.*: the YaRN factors come out as mscale %g, correction "
                       "dims [%g, %g] (factor %g, original_context_length %d, beta_fast %g, "
                       "beta_slow %g)",
                       arch, (double)r->mscale, (double)r->corr[0], (double)r->corr[1],
                       (double)factor, (int)r->n_ctx_orig, (double)r->beta_fast,
                       (double)r->beta_slow);
    return PS_OK;
}

/* Sliding-window attention (arch.h, the family's swa_period / swa_window), as llama.cpp reads
 * it: <arch>.attention.sliding_window (the window), attention.sliding_window_pattern (the
 * period; a per-layer array is refused by name), rope.freq_base_swa. Called after the RoPE
 * keys. */
static ps_status read_swa_hparams(ps_model *m, const char *arch, ps_error *err) {
    const ps_gguf *g = m->gguf;
    ps_hparams *hp = &m->hp;
    const ps_arch_info *ai = hp->info;
    hp->n_swa = 0;
    hp->swa_period = 0;
    hp->rope_base_swa = hp->rope_base;
    hp->rope_freq_scale_swa = hp->rope_freq_scale;
    if (ai->swa_period == 0) return PS_OK;
    ps_status st;
    const int32_t def = ai->swa_window > 0 ? ai->swa_window : 0;
    if ((st = key_dim(g, arch, "attention.sliding_window", ai->swa_window == PS_SWA_REQUIRED, def,
                      true, &hp->n_swa, err)))
        return st;
    if (hp->n_swa == 0) return PS_OK; /* every layer global */
    char key[128];
    snprintf(key, sizeof key, "%s.attention.sliding_window_pattern", arch);
    const int64_t ki = ps_gguf_find_key(g, key);
    hp->swa_period = ai->swa_period;
    if (ki >= 0) {
        uint32_t v = 0;
        st = ps_gguf_get_u32(g, key, &v, NULL);
        if (st != PS_OK)
            return ps_fail(err, PS_ERR_UNSUPPORTED, -1,
                           "key '%s' is not a single period (a per-layer pattern array is not "
                           "supported)",
                           key);
        if (v > (uint32_t)PS_MAX_DIM)
            return ps_fail(err, PS_ERR_FORMAT, -1, "key '%s' = %u is out of range", key, v);
        hp->swa_period = (int32_t)v;
    }
    if (ai->flags & PS_A_SWA_OWN_ROPE) {
        hp->rope_base_swa = 10000.0f;
        hp->rope_freq_scale_swa = 1.0f;
    }
    if ((st = key_f32(g, arch, "rope.freq_base_swa", false, hp->rope_base_swa,
                      &hp->rope_base_swa, err)))
        return st;
    if (!(hp->rope_base_swa > 0.0f))
        return ps_fail(err, PS_ERR_FORMAT, -1, "%s.rope.freq_base_swa = %g must be > 0", arch,
                       (double)hp->rope_base_swa);
    /* the sliding layers' angles reuse the model's ps_rope with their base and scale, which
     * is exact while YaRN is off (its correction dims and mscale depend on them) */
    if ((hp->rope_base_swa != hp->rope_base || hp->rope_freq_scale_swa != hp->rope_freq_scale) &&
        hp->rope.ext_factor != 0.0f)
        return ps_fail(err, PS_ERR_UNSUPPORTED, -1,
                       "%s: YaRN rope scaling with a separate rope base or scale for the "
                       "sliding layers is not supported",
                       arch);
    return PS_OK;
}

/* gemma, gemma2, gemma3, as llama.cpp reads them: embeddings x sqrtf(n_embd); the query scale
 * 1/sqrt(head_dim), except for the 27B shapes (gemma2 with 46 layers, gemma3 with 62), where
 * llama.cpp follows gemma_pytorch's query_pre_attn_scalar = n_embd / n_head; attention
 * soft-cap <arch>.attn_logit_softcapping (PS_A_ATTN_SOFTCAP, default 50); final soft-cap
 * <arch>.final_logit_softcapping (gemma2 default 30, gemma3 none unless the key is there;
 * gemma (1) never: llama.cpp's gemma graph has no soft-cap, so the key is ignored there). */
static ps_status read_gemma_hparams(ps_model *m, const char *arch, ps_error *err) {
    ps_hparams *hp = &m->hp;
    const bool g2 = hp->arch == PS_ARCH_GEMMA2;
    ps_status st;
    hp->embd_scale = sqrtf((float)hp->n_embd);
    const bool big = (g2 && hp->n_layer == 46) || (hp->arch == PS_ARCH_GEMMA3 && hp->n_layer == 62);
    hp->attn_scale = big ? 1.0f / sqrtf((float)(hp->n_embd / hp->n_head))
                         : 1.0f / sqrtf((float)hp->head_dim);
    hp->attn_softcap = 0.0f;
    if ((hp->info->flags & PS_A_ATTN_SOFTCAP) &&
        (st = key_f32(m->gguf, arch, "attn_logit_softcapping", false, 50.0f, &hp->attn_softcap,
                      err)))
        return st;
    hp->final_softcap = 0.0f;
    if (hp->arch != PS_ARCH_GEMMA &&
        (st = key_f32(m->gguf, arch, "final_logit_softcapping", false, g2 ? 30.0f : 0.0f,
                      &hp->final_softcap, err)))
        return st;
    if (hp->attn_softcap < 0.0f || hp->final_softcap < 0.0f)
        return ps_fail(err, PS_ERR_FORMAT, -1,
                       "%s: soft-capping values must be >= 0 (attention %g, final %g)", arch,
                       (double)hp->attn_softcap, (double)hp->final_softcap);
    return PS_OK;
}

static ps_status read_hparams(ps_model *m, const char *arch, ps_error *err) {
    const ps_gguf *g = m->gguf;
    ps_hparams *hp = &m->hp;
    ps_status st;
    if ((st = key_dim(g, arch, "embedding_length", true, 0, false, &hp->n_embd, err)) ||
        (st = key_dim(g, arch, "block_count", true, 0, false, &hp->n_layer, err)) ||
        (st = key_dim(g, arch, "attention.head_count", true, 0, false, &hp->n_head, err)) ||
        (st = key_dim(g, arch, "attention.head_count_kv", false, hp->n_head, false,
                      &hp->n_head_kv, err)) ||
        (st = key_dim(g, arch, "context_length", true, 0, false, &hp->n_ctx_train, err)))
        return st;
    const bool dense = hp->info->layer & PS_L_FFN_DENSE;
    if ((st = key_dim(g, arch, "feed_forward_length", dense, 0, !dense, &hp->n_ff, err)))
        return st;
    if (hp->n_head % hp->n_head_kv != 0)
        return ps_fail(err, PS_ERR_FORMAT, -1,
                       "%s.attention.head_count = %d is not a multiple of "
                       "%s.attention.head_count_kv = %d",
                       arch, hp->n_head, arch, hp->n_head_kv);
    int32_t def_hd = hp->n_embd % hp->n_head == 0 ? hp->n_embd / hp->n_head : 0;
    if ((st = key_dim(g, arch, "attention.key_length", def_hd == 0, def_hd, false,
                      &hp->head_dim, err)))
        return st;
    int32_t v_len = hp->head_dim;
    if ((st = key_dim(g, arch, "attention.value_length", false, hp->head_dim, false, &v_len,
                      err)))
        return st;
    if (v_len != hp->head_dim)
        return ps_fail(err, PS_ERR_UNSUPPORTED, -1,
                       "%s.attention.value_length = %d differs from key_length = %d", arch,
                       v_len, hp->head_dim);
    if ((st = key_dim(g, arch, "rope.dimension_count", false, hp->head_dim, false, &hp->n_rot,
                      err)))
        return st;
    if (hp->n_rot % 2 != 0 || hp->n_rot > hp->head_dim)
        return ps_fail(err, PS_ERR_FORMAT, -1,
                       "%s.rope.dimension_count = %d must be even and at most the head size %d",
                       arch, hp->n_rot, hp->head_dim);
    if ((st = key_f32(g, arch, "rope.freq_base", false, 10000.0f, &hp->rope_base, err)) ||
        (st = key_f32(g, arch, "attention.layer_norm_rms_epsilon", true, 0.0f, &hp->rms_eps,
                      err)))
        return st;
    if (!(hp->rope_base > 0.0f))
        return ps_fail(err, PS_ERR_FORMAT, -1, "%s.rope.freq_base = %g must be > 0", arch,
                       (double)hp->rope_base);
    /* an eps of 1e30 makes every normalised row ~0 and every distribution uniform: a model
     * that loads and scores nonsense. Real models use 1e-12 .. 1e-5. */
    if (!(hp->rms_eps > 0.0f && hp->rms_eps <= PS_MAX_NORM_EPS))
        return ps_fail(err, PS_ERR_FORMAT, -1,
                       "%s.attention.layer_norm_rms_epsilon = %g is outside (0, %g]", arch,
                       (double)hp->rms_eps, PS_MAX_NORM_EPS);

    if ((st = read_rope_scaling(m, arch, err))) return st;
    hp->rope_mode = hp->info->rope_mode;
    hp->n_layer_kv = hp->n_layer;
    if ((st = read_swa_hparams(m, arch, err))) return st;
    if ((hp->info->flags & PS_A_GEMMA) && (st = read_gemma_hparams(m, arch, err))) return st;
    if (hp->attn_scale == 0.0f) hp->attn_scale = 1.0f / sqrtf((float)hp->head_dim);
    if ((hp->info->flags & PS_A_HYBRID) && (st = read_hybrid_hparams(m, arch, err))) return st;
    if (hp->arch == PS_ARCH_OLMO2) {
        /* its sliding layers (OLMo 3, stored as olmo2): not run yet, so refused */
        char key[128];
        snprintf(key, sizeof key, "%s.attention.sliding_window", arch);
        if (ps_gguf_find_key(g, key) >= 0)
            return ps_fail(err, PS_ERR_UNSUPPORTED, -1,
                           "%s: sliding-window attention is not supported yet", key);
    }
    return read_expert_hparams(m, arch, err);
}

/* ---- tensors ---- */

static const char *type_name(uint32_t t) { return ps_ggml_type_name(t); }

/* The weight type of matrix tensor t (rows of n_in): a row of the type table, whole blocks per
 * row; *rb = bytes per row. */
static ps_status mat_type(const ps_gguf_tensor *t, const char *name, int64_t n_in,
                          const ps_wtype **wt, size_t *rb, ps_error *err) {
    *wt = ps_wtype_get(t->type);
    if (!*wt)
        return ps_fail(err, PS_ERR_UNSUPPORTED, -1, "tensor '%s' has type %s (%u); supported: %s",
                       name, type_name(t->type), t->type, ps_wtype_names());
    *rb = ps_wtype_row_bytes(*wt, n_in);
    if (*rb == 0)
        return ps_fail(err, PS_ERR_FORMAT, -1,
                       "tensor '%s' (%s): row length %lld is not a multiple of the %s block of "
                       "%d",
                       name, (*wt)->name, (long long)n_in, (*wt)->name, (int)(*wt)->blck);
    return PS_OK;
}

/* Matrix `name` with ne = [n_in, n_out] in a supported type; absent and !required -> data NULL */
static ps_status get_mat(ps_model *m, const char *name, int64_t n_in, int64_t n_out,
                         bool required, ps_mat *out, ps_error *err) {
    memset(out, 0, sizeof *out);
    const ps_gguf_tensor *t = ps_gguf_find_tensor(m->gguf, name);
    if (!t) {
        if (!required) return PS_OK;
        return ps_fail(err, PS_ERR_NOT_FOUND, -1, "missing tensor '%s'", name);
    }
    if (t->ne[0] != n_in || t->ne[1] != n_out || t->ne[2] != 1 || t->ne[3] != 1)
        return ps_fail(err, PS_ERR_FORMAT, -1,
                       "tensor '%s' has shape [%lld, %lld, %lld, %lld], expected [%lld, %lld]",
                       name, (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
                       (long long)t->ne[3], (long long)n_in, (long long)n_out);
    const ps_wtype *wt;
    size_t rb;
    ps_status st = mat_type(t, name, n_in, &wt, &rb, err);
    if (st) return st;
    uint64_t need;
    if (!ps_mul_ok(rb, (uint64_t)n_out, &need) || t->nbytes < need)
        return ps_fail(err, PS_ERR_FORMAT, -1, "tensor '%s' (%s) holds %llu bytes, expected %llu",
                       name, wt->name, (unsigned long long)t->nbytes, (unsigned long long)need);
    if (t->type == PS_GGML_F32 && ((uintptr_t)t->data & 3u))
        return ps_fail(err, PS_ERR_FORMAT, -1, "tensor '%s' (f32) is not 4-byte aligned", name);
    out->data = t->data;
    out->type = t->type;
    out->n_in = n_in;
    out->n_out = n_out;
    out->row_bytes = rb;
    return PS_OK;
}

/* A float32 vector `name` of n elements; absent and !required -> *out = NULL. */
static ps_status get_vec(ps_model *m, const char *name, int64_t n, bool required,
                         const float **out, ps_error *err) {
    *out = NULL;
    const ps_gguf_tensor *t = ps_gguf_find_tensor(m->gguf, name);
    if (!t) {
        if (!required) return PS_OK;
        return ps_fail(err, PS_ERR_NOT_FOUND, -1, "missing tensor '%s'", name);
    }
    if (t->ne[0] != n || t->ne[1] != 1 || t->ne[2] != 1 || t->ne[3] != 1)
        return ps_fail(err, PS_ERR_FORMAT, -1,
                       "tensor '%s' has shape [%lld, %lld, %lld, %lld], expected [%lld]", name,
                       (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
                       (long long)t->ne[3], (long long)n);
    if (t->type != PS_GGML_F32)
        return ps_fail(err, PS_ERR_UNSUPPORTED, -1,
                       "tensor '%s' has type %s (%u); norm, bias and rope vectors must be f32",
                       name, type_name(t->type), t->type);
    if (t->nbytes < (uint64_t)n * 4)
        return ps_fail(err, PS_ERR_FORMAT, -1, "tensor '%s' holds %llu bytes, expected %llu",
                       name, (unsigned long long)t->nbytes, (unsigned long long)n * 4);
    if ((uintptr_t)t->data & 3u)
        return ps_fail(err, PS_ERR_FORMAT, -1, "tensor '%s' (f32) is not 4-byte aligned", name);
    *out = t->data;
    return PS_OK;
}

/* A 3-D tensor `name` with ne = [n_in, n_out, n] in a matmul type: n matrices, each checked
 * as get_mat checks one; absent and !required -> data NULL. */
static ps_status get_mat3(ps_model *m, const char *name, int64_t n_in, int64_t n_out, int64_t n,
                          bool required, ps_mat3 *out, ps_error *err) {
    memset(out, 0, sizeof *out);
    const ps_gguf_tensor *t = ps_gguf_find_tensor(m->gguf, name);
    if (!t) {
        if (!required) return PS_OK;
        return ps_fail(err, PS_ERR_NOT_FOUND, -1, "missing tensor '%s'", name);
    }
    if (t->n_dims != 3 || t->ne[0] != n_in || t->ne[1] != n_out || t->ne[2] != n ||
        t->ne[3] != 1)
        return ps_fail(err, PS_ERR_FORMAT, -1,
                       "tensor '%s' has %u dimensions [%lld, %lld, %lld, %lld], expected 3: "
                       "[%lld, %lld, %lld]",
                       name, t->n_dims, (long long)t->ne[0], (long long)t->ne[1],
                       (long long)t->ne[2], (long long)t->ne[3], (long long)n_in,
                       (long long)n_out, (long long)n);
    const ps_wtype *wt;
    size_t rb;
    ps_status st = mat_type(t, name, n_in, &wt, &rb, err);
    if (st) return st;
    uint64_t per = 0, need = 0;
    if (!ps_mul_ok(rb, (uint64_t)n_out, &per) || !ps_mul_ok(per, (uint64_t)n, &need) ||
        t->nbytes < need)
        return ps_fail(err, PS_ERR_FORMAT, -1, "tensor '%s' (%s) holds %llu bytes, expected %llu",
                       name, wt->name, (unsigned long long)t->nbytes, (unsigned long long)need);
    if (t->type == PS_GGML_F32 && ((uintptr_t)t->data & 3u))
        return ps_fail(err, PS_ERR_FORMAT, -1, "tensor '%s' (f32) is not 4-byte aligned", name);
    out->m.data = t->data;
    out->m.type = t->type;
    out->m.n_in = n_in;
    out->m.n_out = n_out;
    out->m.row_bytes = rb;
    out->stride = (size_t)per;
    out->n = n;
    return PS_OK;
}

/* Rows [r0, r0 + n) of matrix w as a matrix of its own (a row is one output: the products
 * are those of the whole matrix, row for row). */
static ps_mat mat_rows(const ps_mat *w, int64_t r0, int64_t n) {
    ps_mat v = *w;
    v.data = (const uint8_t *)w->data + (size_t)r0 * w->row_bytes;
    v.n_out = n;
    return v;
}

int64_t ps_dim_value(const ps_hparams *hp, ps_dim d) {
    switch (d) {
    case PS_D_1: return 1;
    case PS_D_EMBD: return hp->n_embd;
    case PS_D_Q: return (int64_t)hp->n_head * hp->head_dim;
    case PS_D_KV: return (int64_t)hp->n_head_kv * hp->head_dim;
    case PS_D_HEAD: return hp->head_dim;
    case PS_D_FF: return hp->n_ff;
    case PS_D_FF_EXP: return hp->n_ff_exp;
    case PS_D_EXPERT: return hp->n_expert;
    case PS_D_Q2: return 2 * (int64_t)hp->n_head * hp->head_dim;
    case PS_D_SSM_CH: return (2 * (int64_t)hp->ssm_n_k + hp->ssm_n_v) * hp->ssm_d_state;
    case PS_D_SSM_V: return (int64_t)hp->ssm_n_v * hp->ssm_d_state;
    case PS_D_SSM_NV: return hp->ssm_n_v;
    case PS_D_SSM_DK: return hp->ssm_d_state;
    case PS_D_SSM_CONV: return hp->ssm_d_conv;
    case PS_D_FF_SHEXP: return hp->n_ff_shexp;
    case PS_D_NHEAD: return hp->n_head;
    case PS_D_FF_EXP2: return 2 * (int64_t)hp->n_ff_exp;
    case PS_D_QKV: return ((int64_t)hp->n_head + 2 * (int64_t)hp->n_head_kv) * hp->head_dim;
    case PS_D_FF2: return 2 * (int64_t)hp->n_ff;
    case PS_D_EMBD2: return 2 * (int64_t)hp->n_embd;
    case PS_D_VOCAB: return hp->n_vocab;
    case PS_D_ROT_HALF: return hp->n_rot / 2;
    }
    return 0;
}

/* Features of layer l: the family's, with the dense FFN swapped for experts where the family
 * says so (llama with <arch>.expert_count > 0), and a fused attn_qkv where the family takes
 * either form and the file has it (phi3). */
static uint32_t layer_features(const ps_model *m, int32_t l) {
    const ps_hparams *hp = &m->hp;
    uint32_t f = hp->info->layer;
    if (hp->info->flags & PS_A_QKV_BY_TENSOR) {
        char name[64];
        snprintf(name, sizeof name, "blk.%d.attn_qkv.weight", (int)l);
        if (ps_gguf_find_tensor(m->gguf, name)) f |= PS_L_QKV_FUSED;
    }
    if (hp->info->flags & PS_A_HYBRID)
        f |= (l + 1) % hp->full_attn_interval == 0
                 ? (uint32_t)(PS_L_ATTN | PS_L_QK_NORM | PS_L_ATTN_GATED)
                 : (uint32_t)PS_L_DELTANET;
    if ((hp->info->flags & PS_A_EXPERTS_BY_KEY) && hp->n_expert > 0)
        f = (f & ~(uint32_t)PS_L_FFN_DENSE) | PS_L_FFN_MOE;
    return f;
}

/* A float32 2-D tensor `name` with ne = {ne0, ne1} (ssm_conv1d); absent -> error. */
static ps_status get_f32_2d(ps_model *m, const char *name, int64_t ne0, int64_t ne1,
                            const float **out, ps_error *err) {
    *out = NULL;
    const ps_gguf_tensor *t = ps_gguf_find_tensor(m->gguf, name);
    if (!t) return ps_fail(err, PS_ERR_NOT_FOUND, -1, "missing tensor '%s'", name);
    if (t->ne[0] != ne0 || t->ne[1] != ne1 || t->ne[2] != 1 || t->ne[3] != 1)
        return ps_fail(err, PS_ERR_FORMAT, -1,
                       "tensor '%s' has shape [%lld, %lld, %lld, %lld], expected [%lld, %lld]",
                       name, (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
                       (long long)t->ne[3], (long long)ne0, (long long)ne1);
    if (t->type != PS_GGML_F32)
        return ps_fail(err, PS_ERR_UNSUPPORTED, -1, "tensor '%s' has type %s, expected f32",
                       name, type_name(t->type));
    if (t->nbytes < (uint64_t)ne0 * (uint64_t)ne1 * 4 || ((uintptr_t)t->data & 3u))
        return ps_fail(err, PS_ERR_FORMAT, -1, "tensor '%s' is short or not 4-byte aligned",
                       name);
    *out = t->data;
    return PS_OK;
}

static ps_status load_weights(ps_model *m, ps_error *err) {
    const ps_hparams *hp = &m->hp;
    ps_weights *w = &m->w;
    ps_status st;
    for (size_t i = 0; i < ps_n_model_tensors; i++) { /* token_embd, output, RoPE factors */
        const ps_model_tensor *mt = &ps_model_tensors[i];
        void *field = (uint8_t *)w + mt->field;
        const int64_t n0 = ps_dim_value(hp, mt->ne[0]), n1 = ps_dim_value(hp, mt->ne[1]);
        st = mt->kind == PS_T_MAT ? get_mat(m, mt->name, n0, n1, mt->required, field, err)
                                  : get_vec(m, mt->name, n0, mt->required, field, err);
        if (st) return st;
    }
    /* tied; gemma and gemma2 always read their output from token_embd, as llama.cpp does */
    if (!w->output.data || hp->arch == PS_ARCH_GEMMA || hp->arch == PS_ARCH_GEMMA2)
        w->output = w->token_embd;
    if (!w->rope_long != !w->rope_short)
        return ps_fail(err, PS_ERR_FORMAT, -1,
                       "tensor '%s' is there without '%s' (LongRoPE needs both tables)",
                       w->rope_long ? "rope_factors_long.weight" : "rope_factors_short.weight",
                       w->rope_long ? "rope_factors_short.weight" : "rope_factors_long.weight");
    const struct { const char *name; const float *v; } fv[] = {
        {"rope_freqs.weight", w->rope_freqs},
        {"rope_factors_long.weight", w->rope_long},
        {"rope_factors_short.weight", w->rope_short},
    };
    for (size_t k = 0; k < PS_ARRAY_LEN(fv); k++)
        for (int32_t i = 0; fv[k].v && i < hp->n_rot / 2; i++)
            if (!(fv[k].v[i] > 0.0f) || !isfinite(fv[k].v[i]))
                return ps_fail(err, PS_ERR_FORMAT, -1,
                               "tensor '%s' element %d = %g must be a positive number",
                               fv[k].name, (int)i, (double)fv[k].v[i]);
    w->layers = ps_calloc((size_t)hp->n_layer, sizeof *w->layers);
    if (!w->layers) return ps_fail(err, PS_ERR_NOMEM, -1, "out of memory (layer table)");
    /* every layer: the tensors of its features, in the order of ps_layer_tensors */
    for (int32_t l = 0, kv = 0, rs = 0; l < hp->n_layer; l++) {
        ps_layer *L = &w->layers[l];
        L->feat = layer_features(m, l);
        if (L->feat & PS_L_FFN_MOE) { /* the experts' gate and up merged in one tensor */
            char gu[96];
            snprintf(gu, sizeof gu, "blk.%d.ffn_gate_up_exps.weight", (int)l);
            if (ps_gguf_find_tensor(m->gguf, gu)) L->feat |= PS_L_GATE_UP;
        }
        L->recurrent = (L->feat & PS_L_DELTANET) != 0;
        L->kv_slot = L->recurrent ? -1 : kv++;
        L->rs_slot = L->recurrent ? rs++ : -1;
        /* llama.cpp's set_swa_pattern: period 0 = every layer slides */
        if (hp->n_swa > 0 && !L->recurrent &&
            (hp->swa_period == 0 || l % hp->swa_period < hp->swa_period - 1))
            L->swa = hp->n_swa;
        for (size_t i = 0; i < ps_n_layer_tensors; i++) {
            const ps_layer_tensor *lt = &ps_layer_tensors[i];
            if (!(L->feat & lt->feature) || (L->feat & lt->unless) || lt->field == PS_NO_FIELD)
                continue;
            char name[96];
            snprintf(name, sizeof name, "blk.%d.%s", (int)l, lt->name);
            void *field = (uint8_t *)L + lt->field;
            const int64_t n0 = ps_dim_value(hp, lt->ne[0]), n1 = ps_dim_value(hp, lt->ne[1]),
                          n2 = ps_dim_value(hp, lt->ne[2]);
            const bool req = (L->feat & lt->required) != 0;
            switch (lt->kind) {
            case PS_T_VEC: st = get_vec(m, name, n0, req, field, err); break;
            case PS_T_MAT: st = get_mat(m, name, n0, n1, req, field, err); break;
            case PS_T_MAT3: st = get_mat3(m, name, n0, n1, n2, req, field, err); break;
            case PS_T_F32MAT: st = get_f32_2d(m, name, n0, n1, field, err); break;
            case PS_T_QKV_SPLIT:
            case PS_T_GATE_UP_SPLIT: {
                ps_mat whole;
                st = get_mat(m, name, n0, n1, req, &whole, err);
                if (st || !whole.data) break;
                if (lt->kind == PS_T_QKV_SPLIT) {
                    const int64_t q = ps_dim_value(hp, PS_D_Q), nkv = ps_dim_value(hp, PS_D_KV);
                    L->wq = mat_rows(&whole, 0, q);
                    L->wk = mat_rows(&whole, q, nkv);
                    L->wv = mat_rows(&whole, q + nkv, nkv);
                } else {
                    L->w_gate = mat_rows(&whole, 0, hp->n_ff);
                    L->w_up = mat_rows(&whole, hp->n_ff, hp->n_ff);
                }
                break;
            }
            }
            if (st) return st;
        }
    }
    return PS_OK;
}

/* ---- load / free ---- */

static const char *base_name(const char *path) {
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

/* The AMX tile copy of every BF16 matrix the matmuls read (the layers' 2-D matrices, of which
 * a layer has those of its features, and the output; token_embd is only read row by row): one
 * block, each matrix's tiles set in its ps_mat. Made where AMX is usable and PS_ISA does not
 * turn it off, unless params->no_repack. */
#define LAYER_MATRICES 15
static ps_mat *matmul_weight(ps_model *m, size_t i) {
    if (i == LAYER_MATRICES * (size_t)m->hp.n_layer) return &m->w.output;
    ps_layer *L = &m->w.layers[i / LAYER_MATRICES];
    ps_mat *ls[LAYER_MATRICES] = {&L->wq,       &L->wk,        &L->wv,      &L->wo,
                                  &L->w_gate,   &L->w_up,      &L->w_down,  &L->wqkv,
                                  &L->wz,       &L->w_beta,    &L->w_alpha, &L->ssm_out,
                                  &L->gate_shexp, &L->up_shexp, &L->down_shexp};
    return ls[i % LAYER_MATRICES];
}

/* The bytes of a tile copy (`bytes` per matrix) of every BF16 matrix the matmuls read. */
static size_t copy_bytes(ps_model *m, size_t (*bytes)(const ps_mat *)) {
    size_t total = 0;
    for (size_t i = 0; i < LAYER_MATRICES * (size_t)m->hp.n_layer + 1; i++)
        if (matmul_weight(m, i)->type == PS_GGML_BF16) total += bytes(matmul_weight(m, i));
    return total;
}

/* A tile copy's block of `total` bytes, `align`-aligned, or NULL with err set. */
static uint8_t *copy_alloc(size_t total, size_t align, const char *kind, ps_error *err) {
    uint8_t *t = ps_aligned_alloc(align, total);
    if (!t)
        ps_fail(err, PS_ERR_NOMEM, -1,
                "out of memory for the %s tile copy of the BF16 weights (%.1f MiB; no_repack / "
                "--no-repack does without it)", kind, (double)total / 1048576.0);
    return t;
}

static ps_status repack_tiles(ps_model *m, ps_error *err) {
    const size_t n = LAYER_MATRICES * (size_t)m->hp.n_layer + 1;
    const size_t total = copy_bytes(m, ps_amx_bf16_tiles_bytes);
    if (total == 0) return PS_OK;
    const double t0 = ps_now_s();
    uint8_t *t = copy_alloc(total, 64, "AMX", err);
    if (!t) return PS_ERR_NOMEM; /* err set by copy_alloc */
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
        ps_mat *w = matmul_weight(m, i);
        if (w->type != PS_GGML_BF16) continue;
        ps_amx_bf16_pack_to(w, t + off);
        w->tiles = t + off;
        off += ps_amx_bf16_tiles_bytes(w);
    }
    m->tiles = t;
    m->tile_extra = (int64_t)total;
    m->tiles_amx = true;
    m->info.tile_bytes = (int64_t)total;
    m->info.tile_seconds = ps_now_s() - t0;
    return PS_OK;
}

/* Elsewhere, where AVX-512 BF16 is usable: the vdpbf16ps tile copy (ps_bf16_dp_pack_to) of the
 * same matrices, so that the kernel reads its tiles in place instead of packing them from the
 * mapping per call. Unlike the AMX copy it replaces the file's pages: each matrix's pages are
 * given back once it is copied (ps_gguf_drop_pages), so the resident weights stay about the
 * file's size, and a tied token_embd reads its rows from the output's copy. A session on
 * another road (--act f32, PS_ISA=avx2) reads the file's pages again. */
/* A matrix's vdpbf16ps copy, or 0 where the copy would pad it: inputs not a multiple of 32 (a
 * file of 1-input rows would grow 32-fold; every real model's widths are multiples of 32). */
static size_t dp_bytes(const ps_mat *w) { return w->n_in % 32 ? 0 : ps_bf16_dp_tiles_bytes(w); }

/* The float32 vectors and small tensors a forward pass reads from the file (norms, biases,
 * rope factors, conv weights, sinks): each slot of ps_weights / ps_layer that holds one, table
 * entry by table entry (a field two entries fill, the per-head or full q_norm, once). */
static size_t vector_slots(ps_model *m, const float ***slots) {
    size_t n = 0;
    const float **g[] = {&m->w.output_norm, &m->w.output_b, &m->w.rope_freqs, &m->w.rope_long,
                         &m->w.rope_short};
    for (size_t i = 0; i < sizeof g / sizeof g[0]; i++)
        if (*g[i]) {
            if (slots) slots[n] = g[i];
            n++;
        }
    for (size_t i = 0; i < ps_n_layer_tensors; i++) {
        const ps_layer_tensor *e = &ps_layer_tensors[i];
        if ((e->kind != PS_T_VEC && e->kind != PS_T_F32MAT) || e->field == PS_NO_FIELD) continue;
        bool dup = false;
        for (size_t j = 0; j < i && !dup; j++)
            dup = ps_layer_tensors[j].field == e->field &&
                  (ps_layer_tensors[j].kind == PS_T_VEC || ps_layer_tensors[j].kind == PS_T_F32MAT);
        for (int32_t l = 0; l < m->hp.n_layer && !dup; l++) {
            const float **slot = (const float **)((char *)&m->w.layers[l] + e->field);
            if (!*slot) continue;
            if (slots) slots[n] = slot;
            n++;
        }
    }
    return n;
}

/* The bytes from vector `p` to the end of the tensor holding it (0: not a tensor's start). */
static size_t vector_bytes(const ps_model *m, const float *p) {
    for (int64_t i = 0; i < ps_gguf_n_tensors(m->gguf); i++) {
        const ps_gguf_tensor *t = ps_gguf_tensor_at(m->gguf, i);
        if (t->data == (const void *)p) return (size_t)t->nbytes;
    }
    return 0;
}

/* Moves the vectors out of the file's mapping, into one block of the model's (m->vectors): the
 * same floats, so the same bits. With the vdpbf16ps copy, whose matrices' file pages are given
 * back, a forward pass on the native road then reads of the file only what the copy leaves out
 * (an untied token_embd's rows, matrices it does not take). Read in place, a norm between two
 * copied matrices brings the page cache's folio around it back into the process: up to 2 MiB
 * a norm where the file was read into large folios (ext4 on Linux 6.16+), about 160 MB for
 * the Qwen3-0.6B shape. */
static ps_status copy_vectors(ps_model *m, ps_error *err) {
    const size_t n = vector_slots(m, NULL);
    if (n == 0) return PS_OK;
    const float ***slots = ps_malloc(n * sizeof *slots);
    size_t *bytes = ps_malloc(n * sizeof *bytes);
    if (!slots || !bytes) {
        ps_free(slots);
        ps_free(bytes);
        return ps_fail(err, PS_ERR_NOMEM, -1, "out of memory (vector slots)");
    }
    vector_slots(m, slots);
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        bytes[i] = vector_bytes(m, *slots[i]);
        total += (bytes[i] + 63) & ~(size_t)63;
    }
    uint8_t *v = total ? ps_aligned_alloc(64, total) : NULL;
    if (total && !v) {
        ps_free(slots);
        ps_free(bytes);
        return ps_fail(err, PS_ERR_NOMEM, -1, "out of memory for the weights' vectors (%.1f MiB)",
                       (double)total / 1048576.0);
    }
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
        if (!bytes[i]) continue;
        memcpy(v + off, *slots[i], bytes[i]);
        (void)ps_gguf_drop_pages(m->gguf, *slots[i], bytes[i]);
        *slots[i] = (const float *)(v + off);
        off += (bytes[i] + 63) & ~(size_t)63;
    }
    ps_free(slots);
    ps_free(bytes);
    m->vectors = v;
    return PS_OK;
}

static ps_status repack_dp(ps_model *m, ps_error *err) {
    const size_t n = LAYER_MATRICES * (size_t)m->hp.n_layer + 1;
    const size_t total = copy_bytes(m, dp_bytes);
    if (total == 0) return PS_OK;
    const double t0 = ps_now_s();
    /* first: reading a vector maps the folio around it, matrix pages included, which the
     * matrices' copy below then gives back */
    ps_status st = copy_vectors(m, err);
    if (st) return st;
    const size_t huge = (size_t)2 << 20;
    uint8_t *t = copy_alloc(total, huge, "vdpbf16ps", err);
    if (!t) return PS_ERR_NOMEM; /* err set by copy_alloc */
    /* 2 MiB pages where the kernel has them: a 4 KiB fault per page of a GB-sized copy costs
     * seconds on some VMs, and the kernel's reads stride over 64-row tiles */
    if (total >= huge) (void)madvise(t, total & ~(huge - 1), MADV_HUGEPAGE);
    const bool tied = m->w.output.data == m->w.token_embd.data &&
                      m->w.output.type == m->w.token_embd.type &&
                      m->w.output.n_in == m->w.token_embd.n_in &&
                      m->w.output.n_out == m->w.token_embd.n_out;
    size_t off = 0, dropped = 0;
    for (size_t i = 0; i < n; i++) {
        ps_mat *w = matmul_weight(m, i);
        if (w->type != PS_GGML_BF16 || !w->data || !dp_bytes(w)) continue;
        /* in slices of about 8 MiB of the file: mapped in one call, copied, given back, so
         * that the load holds the copy and one slice (not the copy and the 311 MB output of
         * the Qwen3-0.6B shape) */
        const uint8_t *d = w->data;
        const int64_t rows = PS_MAX((int64_t)1, ((int64_t)8 << 20) / (int64_t)w->row_bytes /
                                                    PS_BF16_DP_ROWS) * PS_BF16_DP_ROWS;
        for (int64_t r0 = 0; r0 < w->n_out; r0 += rows) {
            const int64_t r1 = PS_MIN(w->n_out, r0 + rows);
            ps_gguf_load_pages(m->gguf, d + (size_t)r0 * w->row_bytes,
                               (size_t)(r1 - r0) * w->row_bytes);
            ps_bf16_dp_pack_to(w, r0, r1, t + off);
            /* from the page holding row r0 (its start was copied with the slice before),
             * but not before the matrix: the page it starts in may hold another tensor */
            if (ps_gguf_drop_pages_from(m->gguf, d, d + (size_t)r0 * w->row_bytes,
                                        (size_t)(r1 - r0) * w->row_bytes))
                dropped += (size_t)(r1 - r0) * w->row_bytes;
        }
        w->dp_tiles = t + off;
        off += dp_bytes(w);
    }
    if (tied) m->w.token_embd.dp_tiles = m->w.output.dp_tiles;
    m->tiles = t;
    m->tile_extra = (int64_t)(total - dropped);
    m->info.tile_bytes = (int64_t)total;
    m->info.tile_seconds = ps_now_s() - t0;
    return PS_OK;
}

/* Where the integer kernel is AVX-512 VNNI (no AMX): the tile copy of every Q4_K and Q6_K expert
 * matrix (ps_mmq_copy_pack, matmul_quant.h; Q4_K_M files keep some layers' ffn_down in Q6_K).
 * A chunk routes ~8 rows to each expert, so packing an expert's tiles per call cost as much as
 * a third of its product; the copy is made once and keeps the type's bits per weight (Q4_K
 * 1.03x the bytes, Q6_K 1.01x), and like the vdpbf16ps copy it replaces the
 * file's pages: each expert's are given back once it is copied. A merged gate_up needs F % 16
 * == 0 (its up half starts on a whole tile); a tensor that does not qualify stays as it is.
 * The experts are copied on a pool of the machine's CPUs, created for the copy: most of a
 * large copy's time is the kernel zeroing its fresh pages, which runs in parallel. */
static ps_mat3 *copied_experts(ps_layer *L, int i) {
    ps_mat3 *t[4] = {&L->gate_exps, &L->up_exps, &L->down_exps, &L->gate_up_exps};
    ps_mat3 *x = t[i];
    const int64_t rows = i == 3 ? 32 : 16; /* merged: both halves whole tiles */
    const bool typed = x->m.type == PS_GGML_Q4_K || x->m.type == PS_GGML_Q6_K;
    return x->m.data && typed && x->m.n_out % rows == 0 && x->n > 0 ? x : NULL;
}

/* The copy's tasks: one expert of one tensor each. */
typedef struct {
    ps_gguf *gguf;
    const ps_mat3 **x; /* the copied tensors in copy order */
    uint8_t **dst;     /* tensor k's copy */
    int64_t *first;    /* tensor k's first task (n + 1 entries) */
    int32_t n;
} xcopy_job;

static void xcopy_task(void *ctx, int64_t task, int32_t thread) {
    (void)thread;
    const xcopy_job *job = ctx;
    int32_t k = 0;
    while (job->first[k + 1] <= task) k++;
    const ps_mat3 *x = job->x[k];
    const int64_t e = task - job->first[k];
    const ps_mat w = ps_mat3_at(x, e);
    const size_t bytes = (size_t)w.n_out * w.row_bytes;
    ps_gguf_load_pages(job->gguf, w.data, bytes);
    ps_mmq_copy_pack(&w, 0, (w.n_out + 15) / 16, job->dst[k] + (size_t)e * x->qtiles_stride);
    (void)ps_gguf_drop_pages_from(job->gguf, x->m.data, w.data, bytes);
}

static ps_status repack_experts(ps_model *m, ps_error *err) {
    size_t total = 0;
    for (int32_t l = 0; l < m->hp.n_layer; l++)
        for (int i = 0; i < 4; i++) {
            const ps_mat3 *x = copied_experts(&m->w.layers[l], i);
            if (x) total += ps_mmq_copy_bytes(&x->m) * (size_t)x->n;
        }
    if (total == 0) return PS_OK;
    const double t0 = ps_now_s();
    const size_t nt = 4 * (size_t)m->hp.n_layer;
    xcopy_job job = {m->gguf, ps_calloc(nt, sizeof *job.x), ps_calloc(nt, sizeof *job.dst),
                   ps_calloc(nt + 1, sizeof *job.first), 0};
    uint8_t *t = ps_aligned_alloc(64, total);
    ps_pool *pool = NULL;
    if (!job.x || !job.dst || !job.first || !t || ps_pool_create(0, &pool) != PS_OK) {
        ps_free(job.x);
        ps_free(job.dst);
        ps_free(job.first);
        ps_free(t);
        return ps_fail(err, PS_ERR_NOMEM, -1,
                       "out of memory for the tile copy of the Q4_K / Q6_K experts (%.1f MiB; "
                       "no_repack / --no-repack does without it)", (double)total / 1048576.0);
    }
    size_t off = 0;
    for (int32_t l = 0; l < m->hp.n_layer; l++)
        for (int i = 0; i < 4; i++) {
            ps_mat3 *x = copied_experts(&m->w.layers[l], i);
            if (!x) continue;
            job.x[job.n] = x;
            job.dst[job.n] = t + off;
            x->m.qtiles = t + off;
            x->qtiles_stride = ps_mmq_copy_bytes(&x->m);
            off += x->qtiles_stride * (size_t)x->n;
            job.first[job.n + 1] = job.first[job.n] + x->n;
            job.n++;
        }
    ps_pool_for_runs(pool, job.first[job.n], xcopy_task, &job);
    ps_pool_free(pool);
    /* once more over each whole tensor: mapping in the next tensor's first expert maps the
     * 2 MiB file folio around it, and with it the last pages of this one */
    size_t dropped = 0;
    for (int32_t k = 0; k < job.n; k++) {
        const size_t bytes = job.x[k]->stride * (size_t)job.x[k]->n;
        if (ps_gguf_drop_pages(m->gguf, job.x[k]->m.data, bytes)) dropped += bytes;
    }
    ps_free(job.x);
    ps_free(job.dst);
    ps_free(job.first);
    m->qtiles = t;
    m->tile_extra += (int64_t)total - (int64_t)dropped;
    m->info.tile_bytes += (int64_t)total;
    m->info.tile_seconds += ps_now_s() - t0;
    return PS_OK;
}

void ps_model_free(ps_model *m) {
    if (!m) return;
    ps_free(m->tiles);
    ps_free(m->qtiles);
    ps_free(m->vectors);
    ps_vocab_free(m->vocab);
    ps_free(m->w.layers);
    ps_gguf_close(m->gguf);
    ps_free(m);
}

ps_status ps_model_load(const char *path, const ps_model_params *params, ps_model **out,
                        ps_error *err) {
    ps_error_clear(err);
    if (!path || !out) return ps_fail(err, PS_ERR_INVALID_ARG, -1, "path and out must be set");
    *out = NULL;
    if (params && (params->n_ctx < 0 || params->n_ctx > PS_MAX_CTX))
        return ps_fail(err, PS_ERR_INVALID_ARG, -1, "n_ctx = %d is out of range (0..%d)",
                       (int)params->n_ctx, PS_MAX_CTX);
    ps_gguf *g = NULL;
    ps_status st = ps_gguf_open(path, &g, err);
    if (st != PS_OK) return st;
    st = ps_model_load_gguf(g, base_name(path), params, out, err);
    if (st == PS_OK) snprintf((*out)->info.file, sizeof (*out)->info.file, "%s", base_name(path));
    return st;
}

/* general.name (else `name`) and general.architecture into m->info; the architecture's table
 * row into m->hp unless vocab_only (which may lack the key). */
static ps_status read_identity(ps_model *m, const char *name, bool vocab_only, ps_error *err) {
    ps_model_info *info = &m->info;
    snprintf(info->name, sizeof info->name, "%s", name ? name : "");
    ps_gguf_str s;
    if (ps_gguf_get_str(m->gguf, "general.name", &s, NULL) == PS_OK && s.len > 0)
        copy_str(info->name, sizeof info->name, s);
    ps_status st = ps_gguf_get_str(m->gguf, "general.architecture", &s, err);
    if (st == PS_OK) {
        copy_str(info->arch, sizeof info->arch, s);
    } else if (st == PS_ERR_NOT_FOUND && vocab_only) {
        info->arch[0] = '\0';
    } else {
        return st == PS_ERR_NOT_FOUND
                   ? ps_fail(err, st, -1, "missing key 'general.architecture'")
                   : st;
    }
    if (vocab_only) return PS_OK;
    m->hp.info = ps_arch_find(info->arch);
    if (!m->hp.info && ps_arch_missing(info->arch))
        return ps_fail(err, PS_ERR_UNSUPPORTED, -1,
                       "general.architecture = '%s' is not supported: %s (supported: %s)",
                       info->arch, ps_arch_missing(info->arch), ps_arch_names());
    if (!m->hp.info)
        return ps_fail(err, PS_ERR_UNSUPPORTED, -1,
                       "general.architecture = '%s' is not supported (%s)", info->arch,
                       ps_arch_names());
    m->hp.arch = m->hp.info->id;
    return PS_OK;
}

/* A vocab-only model's context lengths: the file's context_length is informative only. */
static void finish_vocab_only(ps_model *m, const ps_model_params *params) {
    ps_model_info *info = &m->info;
    int32_t n_ctx_train = 0;
    if (info->arch[0]) {
        char key[96];
        snprintf(key, sizeof key, "%s.context_length", info->arch);
        uint32_t v;
        if (ps_gguf_get_u32(m->gguf, key, &v, NULL) == PS_OK && v <= PS_MAX_CTX)
            n_ctx_train = (int32_t)v;
    }
    info->n_ctx_train = n_ctx_train;
    info->n_ctx = params->n_ctx > 0 ? params->n_ctx : n_ctx_train;
}

/* The weight type named in info: the one holding most elements of the 2-D (matrix) tensors,
 * upper-cased. */
static void find_weight_type(ps_model *m) {
    uint32_t types[64];
    int64_t count[64];
    int n_types = 0;
    for (int64_t i = 0; i < ps_gguf_n_tensors(m->gguf); i++) {
        const ps_gguf_tensor *t = ps_gguf_tensor_at(m->gguf, i);
        if (t->n_dims < 2) continue;
        int k = 0;
        while (k < n_types && types[k] != t->type) k++;
        if (k == n_types) {
            if (n_types == 64) continue;
            types[n_types] = t->type;
            count[n_types++] = 0;
        }
        count[k] += t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
    }
    int best = -1;
    for (int k = 0; k < n_types; k++)
        if (best < 0 || count[k] > count[best]) best = k;
    if (best >= 0) {
        ps_model_info *info = &m->info;
        snprintf(info->weight_type, sizeof info->weight_type, "%s",
                 ps_ggml_type_name(types[best]));
        for (char *c = info->weight_type; *c; c++)
            if (*c >= 'a' && *c <= 'z') *c = (char)(*c - 'a' + 'A');
    }
}

/* A full model's info fields (sizes, context, parameter count, weight type) and its RoPE
 * frequency factors, after the weights loaded. */
static void finish_info(ps_model *m, const ps_model_params *params) {
    ps_model_info *info = &m->info;
    const ps_hparams *hp = &m->hp;
    info->n_ctx_train = hp->n_ctx_train;
    info->n_ctx = params->n_ctx > 0 ? params->n_ctx : hp->n_ctx_train;
    /* the frequency factors, as llama.cpp's get_rope_factors picks them: rope_freqs when the
     * file has it, else LongRoPE's long table when the context is longer than the original
     * one, else the short table. "The context" is the model's (the n_ctx it was loaded with,
     * else context_length): fixed at load, so no prompt, chunk or session changes it. */
    m->hp.rope.factors = m->w.rope_freqs      ? m->w.rope_freqs
                         : info->n_ctx > m->hp.rope.n_ctx_orig ? m->w.rope_long
                                                                : m->w.rope_short;
    info->n_embd = hp->n_embd;
    info->n_layer = hp->n_layer;
    info->n_head = hp->n_head;
    info->n_head_kv = hp->n_head_kv;
    info->head_dim = hp->head_dim;
    info->n_ff = hp->n_ff > 0 ? hp->n_ff : hp->n_ff_exp;
    info->n_expert = hp->n_expert;
    info->n_expert_used = hp->n_expert_used;
    int64_t n_params = 0;
    for (int64_t i = 0; i < ps_gguf_n_tensors(m->gguf); i++) {
        const ps_gguf_tensor *t = ps_gguf_tensor_at(m->gguf, i);
        n_params += t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
    }
    info->n_params = n_params;
    find_weight_type(m);
}

/* The hyperparameters, the weights and the repacked copies the CPU's kernels want. */
static ps_status load_full(ps_model *m, const ps_model_params *params, ps_error *err) {
    ps_status st;
    m->hp.n_vocab = m->info.n_vocab;
    if ((st = read_hparams(m, m->info.arch, err)) || (st = load_weights(m, err))) return st;
    if (!params->no_repack && ps_isa_env_amx() != 0 && ps_cpu_has_amx() &&
        (st = repack_tiles(m, err)))
        return st;
    if (!params->no_repack && !m->tiles && ps_isa_best() == PS_ISA_AVX512 &&
        ps_cpu_has_avx512bf16() && (st = repack_dp(m, err)))
        return st;
    if (!params->no_repack && !(ps_isa_env_amx() != 0 && ps_cpu_has_amx()) &&
        ps_isa_best() == PS_ISA_AVX512 && ps_cpu_has_avx512vnni() && (st = repack_experts(m, err)))
        return st;
    return PS_OK;
}

/* Phase by phase: the arguments, the identity (name, architecture), the vocabulary (all a
 * vocab-only load reads), then the hyperparameters and weights, then the info fields. */
ps_status ps_model_load_gguf(ps_gguf *g, const char *name, const ps_model_params *params,
                             ps_model **out, ps_error *err) {
    ps_error_clear(err);
    if (!g || !out) {
        ps_gguf_close(g);
        return ps_fail(err, PS_ERR_INVALID_ARG, -1, "gguf and out must be set");
    }
    *out = NULL;
    ps_model_params defaults = ps_model_default_params();
    if (!params) params = &defaults;
    if (params->n_ctx < 0 || params->n_ctx > PS_MAX_CTX) {
        ps_gguf_close(g);
        return ps_fail(err, PS_ERR_INVALID_ARG, -1, "n_ctx = %d is out of range (0..%d)",
                       (int)params->n_ctx, PS_MAX_CTX);
    }
    ps_model *m = ps_calloc(1, sizeof *m);
    if (!m) {
        ps_gguf_close(g);
        return ps_fail(err, PS_ERR_NOMEM, -1, "out of memory (model)");
    }
    m->gguf = g;
    m->info.vocab_only = params->vocab_only;
    m->info.file_bytes = (int64_t)ps_gguf_file_size(m->gguf);
    ps_status st;
    if ((st = read_identity(m, name, params->vocab_only, err)) ||
        (st = ps_vocab_load(m->gguf, &m->vocab, err)))
        goto fail;
    m->info.n_vocab = ps_vocab_n_tokens(m->vocab);
    if (params->vocab_only) finish_vocab_only(m, params);
    else if ((st = load_full(m, params, err))) goto fail;
    else finish_info(m, params);
    *out = m;
    ps_error_clear(err);
    return PS_OK;

fail:
    ps_model_free(m);
    return st;
}

void ps_model_get_info(const ps_model *model, ps_model_info *info) {
    if (!info) return;
    if (!model) {
        memset(info, 0, sizeof *info);
        return;
    }
    *info = model->info;
}

const ps_vocab *ps_model_vocab(const ps_model *model) { return model ? model->vocab : NULL; }

void ps_model_drop_vocab(ps_model *model) {
    if (!model) return;
    ps_vocab_free(model->vocab);
    model->vocab = NULL;
}

void ps_model_get_costs(const ps_model *model, ps_model_costs *costs) {
    memset(costs, 0, sizeof *costs);
    const ps_weights *w = &model->w;
    const ps_hparams *hp = &model->hp;
    costs->wq_type = hp->n_layer > 0 && w->layers[0].wq.data ? w->layers[0].wq.type
                                                              : w->output.type;
    costs->n_ff_exp = hp->n_ff_exp;
    double sum = (double)w->output.n_in * (double)w->output.n_out;
    for (int32_t l = 0; l < hp->n_layer; l++) {
        const ps_layer *L = &w->layers[l];
        const ps_mat *mats[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down,
                                &L->gate_inp, &L->wqkv,    &L->wz,     &L->w_beta,
                                &L->w_alpha, &L->ssm_out, &L->gate_shexp, &L->up_shexp,
                                &L->down_shexp};
        for (size_t i = 0; i < sizeof mats / sizeof mats[0]; i++)
            sum += (double)mats[i]->n_in * (double)mats[i]->n_out;
        const ps_mat3 *exps[] = {&L->gate_exps, &L->up_exps, &L->down_exps, &L->gate_up_exps};
        for (size_t i = 0; i < sizeof exps / sizeof exps[0]; i++)
            sum += (double)hp->n_expert_used * (double)exps[i]->m.n_in * (double)exps[i]->m.n_out;
    }
    costs->matmul_weights = sum;
    costs->tile_extra = model->tile_extra;
    costs->tile_amx = model->tiles_amx;
}

double ps_model_kv_positions(const ps_model *model, int32_t n_ctx) {
    double sum = 0;
    for (int32_t l = 0; l < model->hp.n_layer; l++) {
        const int32_t swa = model->w.layers[l].swa;
        sum += swa > 0 ? PS_MIN(n_ctx, swa + PS_CHUNK - 1) : n_ctx;
    }
    return sum;
}
