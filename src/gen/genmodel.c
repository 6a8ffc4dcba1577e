/*
 * genmodel.c — a GGUF model with deterministic random weights, written as a stream.
 *
 * The metadata (hyperparameters and vocabulary) goes through the gguf writer, serialised to
 * memory with no tensors; this file then writes the file itself: the header with the tensor
 * count, those metadata bytes, the tensor infos, and the tensor data generated row block by row
 * block straight into the file, so that a 0.6B model never sits in memory (peak: one block of
 * rows as float32 plus its converted copy).
 *
 * The tensors are the loader's (model.h: ps_model_tensors, then for each block the rows of
 * ps_layer_tensors its features read and require, or name in `gen`), with the shapes the
 * loader checks (ps_dim_value); nothing here lists a family's tensors. This file decides only
 * each block's features (as the loader's layer_features will find them in the file), the
 * optional model-wide tensors the parameters ask for, and each tensor's type.
 *
 * Randomness: every row of every tensor has its own splitmix64 stream, seeded from the model
 * seed, an FNV-1a hash of the tensor name and the row index; weights are Box-Muller normals
 * N(mean, sigma) rounded to float32, then converted (f16/bf16 round to nearest even, Q8_0 as
 * llama.cpp's reference quantiser). So the bytes depend only on the parameters, not on the order
 * or the block size. Scales keep activations sane: matrices sigma = 1/sqrt(fan_in) (token_embd
 * too, so a tied output gives logits of about unit spread), norms 1 + N(0, 0.1), biases N(0, 0.1);
 * a table row's ps_draw says which.
 */
#include "gen/genmodel.h"
#include "model/arch.h"
#include "model/model.h"
#include "kernels/quant.h"
#include "gen/qmix.h"
#include "kernels/types.h"
#include "base/util.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>

#define GEN_BLOCK_ELEMS (1 << 20) /* floats generated per block (rows are never split) */

ps_genmodel_params ps_genmodel_default_params(void) {
    ps_genmodel_params p;
    memset(&p, 0, sizeof p);
    snprintf(p.arch, sizeof p.arch, "llama");
    p.n_vocab = 512;
    p.n_embd = 64;
    p.n_layer = 2;
    p.n_head = 4;
    p.n_head_kv = 2;
    p.head_dim = 16;
    p.n_ff = 128;
    p.n_ctx = 512;
    p.rope_base = 10000.0f;
    p.rms_eps = 1e-5f;
    p.type = PS_GGML_F32;
    p.seed = 1;
    return p;
}

/* The presets, one row each. A row with a base applies that preset first and then sets only
 * arch, n_ff, the expert fields and (where it gives one) n_layer; a row without sets the
 * whole shape (arch NULL: the shape of ps_genmodel_default_params) and, by its flags, the
 * family's fields below. Fields a row does not set keep the caller's values. */
enum {
    PR_ROT = 1,     /* sets n_rot */
    PR_HYBRID = 2,  /* qwen35: full_attn_interval 4, the DeltaNet widths, n_nextn, sections 0 */
    PR_SWA = 4,     /* sets n_swa (swa_period 0: the family's pattern) */
    PR_YARN = 8,    /* gpt-oss's YaRN: 32 over 4096 positions, betas 32 / 1 */
    PR_GEMMA = 16,  /* sets rope_base_swa, the softcaps; no linear rope scale, no output bias */
};

typedef struct {
    const char *name, *base, *arch;
    int32_t n_vocab, n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, n_ctx;
    float rope_base, rms_eps;
    bool tied;
    int32_t n_expert, n_expert_used, n_ff_exp;
    int flags;
    int32_t n_rot, n_ctx_orig;                  /* PR_ROT: n_rot; n_ctx_orig always */
    int32_t ssm_d_state, ssm_n_k, ssm_n_v, n_nextn; /* PR_HYBRID */
    int32_t n_swa;                              /* PR_SWA */
    float rope_base_swa, attn_softcap, final_softcap; /* PR_GEMMA */
} preset_row;

static const preset_row PRESETS[] = {
    {"tiny", NULL, NULL, .flags = PR_ROT, .n_rot = 0},
    {"qwen3-0.6b", NULL, "qwen3", 151936, 1024, 28, 16, 8, 128, 3072, 40960, 1000000.0f, 1e-6f,
     true, 0, 0, 0, .flags = 0},
    {"qwen3moe-tiny", "tiny", "qwen3moe", .n_ff = 0, .n_expert = 8, .n_expert_used = 2,
     .n_ff_exp = 32},
    {"mixtral-tiny", "tiny", "llama", .n_ff = 64, .n_expert = 4, .n_expert_used = 2,
     .n_ff_exp = 0},
    {"qwen3-30b-a3b-2l", NULL, "qwen3moe", 151936, 2048, 2, 32, 4, 128, 6144, 40960, 1000000.0f,
     1e-6f, false, 128, 8, 768, .flags = 0},
    {"qwen35-tiny", NULL, "qwen35", 1000, 64, 4, 4, 2, 32, 96, 1024, 1000000.0f, 1e-6f, false, 0,
     0, 0, .flags = PR_ROT | PR_HYBRID, .n_rot = 16, .ssm_d_state = 16, .ssm_n_k = 2,
     .ssm_n_v = 4, .n_nextn = 1},
    {"qwen35-4l", NULL, "qwen35", 248320, 2048, 4, 16, 2, 256, 4608, 262144, 10000000.0f, 1e-6f,
     false, 0, 0, 0, .flags = PR_ROT | PR_HYBRID, .n_rot = 64, .ssm_d_state = 128,
     .ssm_n_k = 16, .ssm_n_v = 32, .n_nextn = 0},
    {"qwen35moe-tiny", "qwen35-tiny", "qwen35moe", .n_ff = 64, .n_expert = 8, .n_expert_used = 2,
     .n_ff_exp = 32},
    {"qwen35moe-4l", "qwen35-4l", "qwen35moe", .n_ff = 512, .n_expert = 256, .n_expert_used = 8,
     .n_ff_exp = 512},
    /* Qwen3.6-35B-A3B at full depth: 40 layers = 30 DeltaNet + 10 attention (about 20 GB at
     * Q4_K_M) */
    {"qwen3.6-35b-a3b", "qwen35moe-4l", "qwen35moe", .n_layer = 40, .n_ff = 512, .n_expert = 256,
     .n_expert_used = 8, .n_ff_exp = 512},
    {"gpt-oss-tiny", NULL, "gpt-oss", 512, 64, 4, 4, 2, 32, 32, 1024, 150000.0f, 1e-5f, false, 8,
     4, 32, .flags = PR_SWA | PR_YARN, .n_swa = 40},
    {"gpt-oss-20b-2l", NULL, "gpt-oss", 201088, 2880, 2, 64, 8, 64, 2880, 131072, 150000.0f,
     1e-5f, false, 32, 4, 2880, .flags = PR_SWA | PR_YARN, .n_swa = 128},
    /* Phi-3-mini-128k-instruct's widths with 2 layers (LongRoPE, original context 4096);
     * phi3-tiny: 64 wide, rope on 12 of 16 dims (partial, as Phi-4-mini), LongRoPE with
     * original context 256 of 1024 */
    {"phi3-tiny", NULL, "phi3", 512, 64, 2, 4, 2, 16, 128, 1024, 10000.0f, 1e-5f, false, 0, 0, 0,
     .flags = PR_ROT, .n_rot = 12, .n_ctx_orig = 256},
    {"phi3-mini-2l", NULL, "phi3", 32064, 3072, 2, 32, 32, 96, 8192, 131072, 10000.0f, 1e-5f,
     false, 0, 0, 0, .flags = PR_ROT, .n_rot = 96, .n_ctx_orig = 4096},
    /* OLMo-2-0425-1B's widths with 2 of its 16 layers */
    {"olmo2-tiny", NULL, "olmo2", 512, 64, 2, 4, 2, 16, 128, 4096, 500000.0f, 1e-6f, false, 0, 0,
     0, .flags = PR_ROT, .n_rot = 0},
    {"olmo2-1b-2l", NULL, "olmo2", 100352, 2048, 2, 16, 16, 128, 8192, 4096, 500000.0f, 1e-6f,
     false, 0, 0, 0, .flags = PR_ROT, .n_rot = 0},
    {"gemma2-tiny", NULL, "gemma2", 512, 64, 4, 4, 2, 16, 128, 1024, 10000.0f, 1e-6f, true, 0, 0,
     0, .flags = PR_SWA | PR_GEMMA, .n_swa = 40, .attn_softcap = 50.0f, .final_softcap = 30.0f},
    {"gemma2-2b-4l", NULL, "gemma2", 256000, 2304, 4, 8, 4, 256, 9216, 8192, 10000.0f, 1e-6f,
     true, 0, 0, 0, .flags = PR_SWA | PR_GEMMA, .n_swa = 4096, .attn_softcap = 50.0f,
     .final_softcap = 30.0f},
    {"gemma3-tiny", NULL, "gemma3", 512, 64, 7, 4, 1, 16, 128, 1024, 1000000.0f, 1e-6f, true, 0,
     0, 0, .flags = PR_SWA | PR_GEMMA, .n_swa = 40, .rope_base_swa = 10000.0f},
    {"gemma3-1b-6l", NULL, "gemma3", 262144, 1152, 6, 4, 1, 256, 6912, 32768, 1000000.0f, 1e-6f,
     true, 0, 0, 0, .flags = PR_SWA | PR_GEMMA, .n_swa = 512, .rope_base_swa = 10000.0f},
};

ps_status ps_genmodel_preset(const char *name, ps_genmodel_params *p, ps_error *err) {
    if (!name || !p) return ps_fail(err, PS_ERR_INVALID_ARG, -1, "preset: NULL argument");
    p->n_ctx_orig = 0; /* set by the presets that have it (n_rot: by those that set it) */
    const preset_row *r = NULL;
    for (size_t i = 0; i < PS_ARRAY_LEN(PRESETS) && !r; i++)
        if (!strcmp(name, PRESETS[i].name)) r = &PRESETS[i];
    if (!r) {
        char known[512];
        size_t o = 0;
        for (size_t i = 0; i < PS_ARRAY_LEN(PRESETS); i++)
            o += (size_t)snprintf(known + o, sizeof known - o, "%s%s", i ? ", " : "",
                                  PRESETS[i].name);
        return ps_fail(err, PS_ERR_NOT_FOUND, -1, "unknown preset '%s' (known: %s)", name, known);
    }
    if (r->base) {
        ps_genmodel_preset(r->base, p, NULL);
        snprintf(p->arch, sizeof p->arch, "%s", r->arch);
        p->n_ff = r->n_ff;
        p->n_expert = r->n_expert;
        p->n_expert_used = r->n_expert_used;
        p->n_ff_exp = r->n_ff_exp;
        if (r->n_layer) p->n_layer = r->n_layer;
        return PS_OK;
    }
    const ps_genmodel_params d = ps_genmodel_default_params();
    preset_row sh = *r;
    if (!r->arch) /* the default shape */
        sh = (preset_row){r->name, NULL, d.arch, d.n_vocab, d.n_embd, d.n_layer, d.n_head,
                          d.n_head_kv, d.head_dim, d.n_ff, d.n_ctx, d.rope_base, d.rms_eps,
                          d.tied, 0, 0, 0, .flags = r->flags, .n_rot = r->n_rot};
    snprintf(p->arch, sizeof p->arch, "%s", sh.arch);
    p->n_vocab = sh.n_vocab;
    p->n_embd = sh.n_embd;
    p->n_layer = sh.n_layer;
    p->n_head = sh.n_head;
    p->n_head_kv = sh.n_head_kv;
    p->head_dim = sh.head_dim;
    p->n_ff = sh.n_ff;
    p->n_ctx = sh.n_ctx;
    p->rope_base = sh.rope_base;
    p->rms_eps = sh.rms_eps;
    p->tied = sh.tied;
    p->n_expert = sh.n_expert;
    p->n_expert_used = sh.n_expert_used;
    p->n_ff_exp = sh.n_ff_exp;
    p->n_ctx_orig = sh.n_ctx_orig;
    if (sh.flags & PR_ROT) p->n_rot = sh.n_rot;
    if (sh.flags & PR_HYBRID) {
        p->full_attn_interval = 4;
        p->ssm_d_state = sh.ssm_d_state;
        p->ssm_n_k = sh.ssm_n_k;
        p->ssm_n_v = sh.ssm_n_v;
        p->ssm_d_conv = 4;
        p->n_nextn = sh.n_nextn;
        memset(p->rope_sections, 0, sizeof p->rope_sections);
    }
    if (sh.flags & PR_SWA) { /* even layers slide (the family's default pattern) */
        p->n_swa = sh.n_swa;
        p->swa_period = 0;
    }
    if (sh.flags & PR_YARN) { /* gpt-oss's config: YaRN 32 over 4096 positions */
        p->yarn_factor = 32.0f;
        p->yarn_orig_ctx = 4096;
        p->yarn_beta_fast = 32.0f;
        p->yarn_beta_slow = 1.0f;
    }
    if (sh.flags & PR_GEMMA) {
        p->rope_base_swa = sh.rope_base_swa;
        p->attn_softcap = sh.attn_softcap;
        p->final_softcap = sh.final_softcap;
        p->rope_scale_linear = 0.0f;
        p->output_bias = false;
    }
    return PS_OK;
}

/* ---------------------------------------------------------------- the tensor list */

typedef struct {
    char name[64];
    ps_draw draw;      /* what its values are (model.h) */
    uint32_t type;
    int64_t ne[3]; /* ne[0] contiguous; ne[1] = 1 for vectors; ne[2] experts (else 1) */
    uint32_t n_dims;
    uint64_t nbytes;
    uint64_t offset; /* in the data section */
} gen_tensor;

typedef struct {
    gen_tensor *t;
    int64_t n, cap;
} tensor_list;

static bool is_matrix(ps_draw d) { return d == PS_DRAW_WEIGHT || d == PS_DRAW_WEIGHT_F32; }

static ps_status list_add(tensor_list *l, const char *name, ps_draw draw, uint32_t type,
                          int64_t ne0, int64_t ne1, int64_t ne2, ps_error *err) {
    if (l->n == l->cap) {
        int64_t cap = l->cap ? l->cap * 2 : 64;
        gen_tensor *t = ps_realloc(l->t, (size_t)cap * sizeof *t);
        if (!t) return ps_fail(err, PS_ERR_NOMEM, -1, "gen-model: no memory for tensor list");
        l->t = t;
        l->cap = cap;
    }
    gen_tensor *t = &l->t[l->n++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->draw = draw;
    t->type = type;
    t->ne[0] = ne0;
    t->ne[1] = ne1;
    t->ne[2] = ne2;
    t->n_dims = ne2 > 1 ? 3 : ne1 > 1 || is_matrix(draw) ? 2 : 1;
    t->nbytes = ps_quant_row_bytes(type, ne0) * (uint64_t)ne1 * (uint64_t)ne2;
    return PS_OK;
}

/* qwen35*: Gated DeltaNet layers among the attention ones (the family's PS_A_HYBRID). */
static bool is_hybrid(const ps_genmodel_params *p) {
    const ps_arch_info *ai = ps_arch_find(p->arch);
    return ai && (ai->flags & PS_A_HYBRID);
}

/* The qwen35 fields with their defaults filled in (see genmodel.h). */
static ps_genmodel_params hybrid_defaults(const ps_genmodel_params *in) {
    ps_genmodel_params p = *in;
    if (!p.full_attn_interval) p.full_attn_interval = 4;
    if (!p.n_rot) p.n_rot = p.head_dim / 4 / 2 * 2;
    if (!p.ssm_d_state) p.ssm_d_state = 16;
    if (!p.ssm_n_k) p.ssm_n_k = 2;
    if (!p.ssm_n_v) p.ssm_n_v = 4;
    if (!p.ssm_d_conv) p.ssm_d_conv = 4;
    if (!p.rope_sections[0] && !p.rope_sections[1] && !p.rope_sections[2] &&
        !p.rope_sections[3]) {
        const int32_t half = p.n_rot / 2, third = half / 3;
        p.rope_sections[0] = half - 2 * third;
        p.rope_sections[1] = third;
        p.rope_sections[2] = third;
    }
    return p;
}

/* The rotated dimensions of a non-hybrid family: n_rot, else head_dim. */
static int32_t plain_n_rot(const ps_genmodel_params *p) {
    return p->n_rot > 0 ? p->n_rot : p->head_dim;
}

static ps_status validate(const ps_genmodel_params *p, ps_error *err) {
    const ps_arch_info *ai = ps_arch_find(p->arch);
    if (!ai)
        return ps_fail(err, PS_ERR_INVALID_ARG, -1, "arch '%s' is not one of %s", p->arch,
                       ps_arch_names());
    const bool moe = ai->layer & PS_L_FFN_MOE;
    /* qwen3moe may omit the dense width (then no feed_forward_length key is written) */
    struct { const char *name; int32_t v; } pos[] = {
        {"n_embd", p->n_embd}, {"n_layer", p->n_layer}, {"n_head", p->n_head},
        {"n_head_kv", p->n_head_kv}, {"head_dim", p->head_dim},
        {"n_ff", moe && p->n_ff == 0 ? 1 : p->n_ff}, {"n_ctx", p->n_ctx},
    };
    for (size_t i = 0; i < PS_ARRAY_LEN(pos); i++)
        if (pos[i].v < 1)
            return ps_fail(err, PS_ERR_INVALID_ARG, -1, "%s must be >= 1 (got %d)", pos[i].name,
                           pos[i].v);
    if (p->n_head % p->n_head_kv)
        return ps_fail(err, PS_ERR_INVALID_ARG, -1,
                       "n_head (%d) must be a multiple of n_head_kv (%d)", p->n_head,
                       p->n_head_kv);
    if (p->head_dim % 2)
        return ps_fail(err, PS_ERR_INVALID_ARG, -1, "head_dim must be even (got %d)",
                       p->head_dim);
    if (p->n_expert < 0 || (p->n_expert > 0 && !moe && !(ai->flags & PS_A_EXPERTS_BY_KEY)))
        return ps_fail(err, PS_ERR_INVALID_ARG, -1, "n_expert = %d: %s has no experts",
                       p->n_expert, p->arch);
    if (moe && p->n_expert < 1)
        return ps_fail(err, PS_ERR_INVALID_ARG, -1, "%s needs n_expert >= 1 (got %d)", p->arch,
                       p->n_expert);
    if (p->n_expert > 0 && (p->n_expert_used < 1 || p->n_expert_used > p->n_expert))
        return ps_fail(err, PS_ERR_INVALID_ARG, -1,
                       "n_expert_used must be in 1..n_expert = %d (got %d)", p->n_expert,
                       p->n_expert_used);
    if (moe && p->n_ff_exp < 1)
        return ps_fail(err, PS_ERR_INVALID_ARG, -1, "n_ff_exp must be >= 1 (got %d)",
                       p->n_ff_exp);
    if (!(p->rope_base > 0.0f) || !isfinite(p->rope_base))
        return ps_fail(err, PS_ERR_INVALID_ARG, -1, "rope base must be > 0 (got %g)",
                       (double)p->rope_base);
    if (!(p->rms_eps > 0.0f && p->rms_eps <= PS_MAX_NORM_EPS)) /* what the loader takes */
        return ps_fail(err, PS_ERR_INVALID_ARG, -1, "rms eps must be in (0, %g] (got %g)",
                       PS_MAX_NORM_EPS, (double)p->rms_eps);
    if (!p->vocab_path && p->n_vocab < 259)
        return ps_fail(err, PS_ERR_INVALID_ARG, -1,
                       "a synthetic vocab needs n_vocab >= 259 (<unk>, <s>, </s> and 256 byte "
                       "tokens); got %d",
                       p->n_vocab);
    const ps_wtype *wt = ps_wtype_get(p->type);
    if (p->mix[0] && !ps_qmix_find(p->mix))
        return ps_fail(err, PS_ERR_INVALID_ARG, -1, "mix '%s' is not one of %s", p->mix,
                       ps_qmix_names());
    if (!p->mix[0] && !wt)
        return ps_fail(err, PS_ERR_INVALID_ARG, -1, "weight type %u is not one of %s", p->type,
                       ps_wtype_names());
    if (!p->mix[0] && wt->blck > 1) {
        struct { const char *what; int64_t v; } rows[] = {
            {"n_embd", p->n_embd},
            {"n_ff", p->n_ff},
            {"n_ff_exp", moe ? p->n_ff_exp : 0},
            {"n_head * head_dim", (int64_t)p->n_head * p->head_dim},
        };
        for (size_t i = 0; i < PS_ARRAY_LEN(rows); i++)
            if (rows[i].v % wt->blck)
                return ps_fail(err, PS_ERR_INVALID_ARG, -1,
                               "%s needs row lengths that are multiples of %d, but %s = %lld "
                               "(a mix such as q4_k_m falls back to other types)",
                               wt->name, (int)wt->blck, rows[i].what, (long long)rows[i].v);
    }
    if (!is_hybrid(p) && (p->n_rot < 0 || plain_n_rot(p) % 2 || plain_n_rot(p) > p->head_dim))
        return ps_fail(err, PS_ERR_INVALID_ARG, -1,
                       "n_rot = %d must be even and at most head_dim = %d (0: head_dim)",
                       p->n_rot, p->head_dim);
    if (p->n_ctx_orig < 0 || p->n_ctx_orig > p->n_ctx)
        return ps_fail(err, PS_ERR_INVALID_ARG, -1,
                       "n_ctx_orig = %d must be in 0..n_ctx = %d", p->n_ctx_orig, p->n_ctx);
    if (is_hybrid(p)) {
        ps_genmodel_params h = hybrid_defaults(p);
        if (h.full_attn_interval < 1 || h.n_rot < 2 || h.n_rot % 2 || h.n_rot > h.head_dim ||
            h.ssm_d_state < 1 || h.ssm_n_k < 1 || h.ssm_n_v < 1 || h.ssm_n_v % h.ssm_n_k ||
            h.ssm_d_conv < 2 || h.ssm_d_conv > 16 || h.n_nextn < 0)
            return ps_fail(err, PS_ERR_INVALID_ARG, -1,
                           "qwen35: bad shape (full_attn_interval %d, n_rot %d, ssm d_state %d, "
                           "n_k %d, n_v %d, d_conv %d, nextn %d)",
                           h.full_attn_interval, h.n_rot, h.ssm_d_state, h.ssm_n_k, h.ssm_n_v,
                           h.ssm_d_conv, h.n_nextn);
        if (!p->mix[0] && ((int64_t)h.ssm_n_v * h.ssm_d_state) % wt->blck)
            return ps_fail(err, PS_ERR_INVALID_ARG, -1,
                           "%s needs row lengths that are multiples of %d, but ssm n_v * "
                           "d_state = %lld",
                           wt->name, (int)wt->blck, (long long)h.ssm_n_v * h.ssm_d_state);
    }
    int64_t q = (int64_t)p->n_head * p->head_dim;
    if (q > INT32_MAX || (int64_t)p->n_embd * p->n_ff > ((int64_t)1 << 40) ||
        (int64_t)p->n_embd * PS_MAX(p->n_ff_exp, p->n_ff) * p->n_expert > ((int64_t)1 << 40))
        return ps_fail(err, PS_ERR_INVALID_ARG, -1, "model dimensions are too large");
    return PS_OK;
}

/* What choosing the tensors of a model needs: its parameters, their hyperparameters for the
 * table's symbolic dimensions, and the quant mix with what its rules look at. */
typedef struct {
    const ps_genmodel_params *p;
    ps_hparams hp;
    const ps_qmix *mix;
    ps_qmix_model mm;
} list_ctx;

/* The hyperparameters ps_dim_value reads, as the loader will find them in the file (the
 * hybrid fields with their defaults; llama's experts are n_ff wide; the shared expert n_ff). */
static list_ctx list_context(const ps_genmodel_params *p, int64_t n_vocab) {
    const ps_arch_info *ai = ps_arch_find(p->arch); /* validate() checked the name */
    const ps_genmodel_params h = is_hybrid(p) ? hybrid_defaults(p) : *p;
    list_ctx c;
    memset(&c, 0, sizeof c);
    c.p = p;
    c.hp.info = ai;
    c.hp.n_vocab = (int32_t)n_vocab;
    c.hp.n_embd = p->n_embd;
    c.hp.n_layer = p->n_layer;
    c.hp.n_head = p->n_head;
    c.hp.n_head_kv = p->n_head_kv;
    c.hp.head_dim = p->head_dim;
    c.hp.n_rot = plain_n_rot(p); /* rope_freqs and LongRoPE's tables: n_rot / 2 */
    c.hp.n_ff = p->n_ff;
    c.hp.n_expert = p->n_expert;
    c.hp.n_ff_exp = ai->layer & PS_L_FFN_MOE ? p->n_ff_exp : p->n_ff;
    c.hp.n_ff_shexp = p->n_ff;
    c.hp.ssm_d_conv = h.ssm_d_conv;
    c.hp.ssm_d_state = h.ssm_d_state;
    c.hp.ssm_n_k = h.ssm_n_k;
    c.hp.ssm_n_v = h.ssm_n_v;
    c.hp.full_attn_interval = h.full_attn_interval;
    c.hp.n_layer_nextn = is_hybrid(p) ? h.n_nextn : 0;
    c.mix = p->mix[0] ? ps_qmix_find(p->mix) : NULL;
    c.mm = (ps_qmix_model){p->n_layer, p->n_head, p->n_head_kv, p->n_expert, p->tied};
    return c;
}

/* Adds a tensor: a matrix in the model's type, or the one its mix's rule gives it (llama.cpp
 * keeps PS_DRAW_WEIGHT_F32 matrices as they are); everything else F32. */
static ps_status add_tensor(tensor_list *l, const list_ctx *c, const char *name, ps_draw draw,
                            int64_t ne0, int64_t ne1, int64_t ne2, ps_error *err) {
    uint32_t type = draw == PS_DRAW_WEIGHT ? c->p->type : PS_GGML_F32;
    if (c->mix && draw == PS_DRAW_WEIGHT) {
        ps_status st = ps_qmix_tensor_type(c->mix, &c->mm, name, ne0, ne2 > 1 ? 3 : 2, &type, err);
        if (st != PS_OK) return st;
    }
    return list_add(l, name, draw, type, ne0, ne1, ne2, err);
}

/* The model-wide tensors (ps_model_tensors): the required ones and those of the options the
 * parameters ask for. */
static ps_status add_globals(tensor_list *l, const list_ctx *c, ps_error *err) {
    const ps_genmodel_params *p = c->p;
    const uint32_t options = (p->tied ? 0u : (uint32_t)PS_M_OUTPUT) |
                             (p->output_bias ? (uint32_t)PS_M_OUTPUT_BIAS : 0u) |
                             (p->rope_freqs ? (uint32_t)PS_M_ROPE_FREQS : 0u) |
                             (p->n_ctx_orig > 0 ? (uint32_t)PS_M_LONGROPE : 0u);
    for (size_t k = 0; k < ps_n_model_tensors; k++) {
        const ps_model_tensor *mt = &ps_model_tensors[k];
        if (!mt->required && !(options & mt->option)) continue;
        ps_status st = add_tensor(l, c, mt->name, mt->draw, ps_dim_value(&c->hp, mt->ne[0]),
                                  ps_dim_value(&c->hp, mt->ne[1]), 1, err);
        if (st != PS_OK) return st;
    }
    return PS_OK;
}

/* The features of generated block i, as the loader's layer_features finds them in the file
 * (gen-model writes phi3's fused attn_qkv; qwen35*'s blocks past n_layer are MTP blocks). */
static uint32_t block_features(const list_ctx *c, int32_t i) {
    const ps_genmodel_params *p = c->p;
    const ps_arch_info *ai = c->hp.info;
    uint32_t f = ai->layer;
    if (ai->flags & PS_A_QKV_BY_TENSOR) f |= PS_L_QKV_FUSED;
    if (ai->flags & PS_A_HYBRID) {
        const bool mtp = i >= p->n_layer;
        f |= mtp || (i + 1) % c->hp.full_attn_interval == 0
                 ? (uint32_t)(PS_L_ATTN | PS_L_QK_NORM | PS_L_ATTN_GATED)
                 : (uint32_t)PS_L_DELTANET;
        if (mtp) f |= PS_L_MTP;
    }
    if ((ai->flags & PS_A_EXPERTS_BY_KEY) && p->n_expert > 0)
        f = (f & ~(uint32_t)PS_L_FFN_DENSE) | PS_L_FFN_MOE;
    if ((f & PS_L_FFN_MOE) && p->merged_gate_up) f |= PS_L_GATE_UP;
    return f;
}

/* Block i's tensors: the rows of the loader's table (model.h, ps_layer_tensor) that a block of
 * features f reads and requires or that name f in gen, each name once, in table order. */
static ps_status add_block(tensor_list *l, const list_ctx *c, int32_t i, ps_error *err) {
    const uint32_t f = block_features(c, i);
    const int64_t first = l->n;
    for (size_t k = 0; k < ps_n_layer_tensors; k++) {
        const ps_layer_tensor *lt = &ps_layer_tensors[k];
        if (!(f & lt->feature) || (f & lt->unless) || !(f & (lt->required | lt->gen))) continue;
        char name[64];
        snprintf(name, sizeof name, "blk.%d.%s", (int)i, lt->name);
        bool dup = false;
        for (int64_t j = first; j < l->n && !dup; j++) dup = !strcmp(l->t[j].name, name);
        if (dup) continue;
        const int64_t ne0 = ps_dim_value(&c->hp, lt->ne[0]), ne1 = ps_dim_value(&c->hp, lt->ne[1]),
                      ne2 = ps_dim_value(&c->hp, lt->ne[2]);
        ps_status st = add_tensor(l, c, name, lt->draw, ne0, ne1, ne2, err);
        if (st != PS_OK) return st;
    }
    return PS_OK;
}

/* Every tensor of the model, each with its offset in the data section (32-byte aligned). */
static ps_status build_list(const ps_genmodel_params *p, int64_t n_vocab, tensor_list *l,
                            ps_error *err) {
    const list_ctx c = list_context(p, n_vocab);
    ps_status st = add_globals(l, &c, err);
    for (int32_t i = 0; st == PS_OK && i < p->n_layer + c.hp.n_layer_nextn; i++)
        st = add_block(l, &c, i, err);
    if (st != PS_OK) return st;
    uint64_t off = 0;
    for (int64_t i = 0; i < l->n; i++) {
        l->t[i].offset = off;
        off += (l->t[i].nbytes + 31) / 32 * 32;
    }
    return PS_OK;
}

int64_t ps_genmodel_n_params(const ps_genmodel_params *p, int64_t n_vocab) {
    if (!p || validate(p, NULL) != PS_OK || n_vocab < 1) return 0;
    tensor_list l = {0};
    int64_t n = 0;
    if (build_list(p, n_vocab, &l, NULL) == PS_OK)
        for (int64_t i = 0; i < l.n; i++) n += l.t[i].ne[0] * l.t[i].ne[1] * l.t[i].ne[2];
    ps_free(l.t);
    return n;
}

/* ---------------------------------------------------------------- deterministic values */

static uint64_t fnv1a(const char *s) { return ps_fnv1a64(PS_FNV1A64_INIT, s, strlen(s)); }

/* row (n floats) <- N(mean, sigma), from the stream of (seed, tensor, row). */
static void gen_row_normal(uint64_t tensor_seed, int64_t row, float mean, float sigma, float *out,
                           int64_t n) {
    uint64_t s = tensor_seed ^ ((uint64_t)row * 0xd1b54a32d192ed03ull);
    ps_splitmix64(&s);
    for (int64_t i = 0; i < n; i += 2) {
        /* u1 in (0, 1], u2 in [0, 1), 53 random bits each */
        double u1 = (double)((ps_splitmix64(&s) >> 11) + 1) * 0x1.0p-53;
        double u2 = (double)(ps_splitmix64(&s) >> 11) * 0x1.0p-53;
        double r = sqrt(-2.0 * log(u1)), a = 6.283185307179586 * u2;
        out[i] = (float)(mean + sigma * r * cos(a));
        if (i + 1 < n) out[i + 1] = (float)(mean + sigma * r * sin(a));
    }
}

/* Llama 3's rope scaling factors (factor 8, low/high frequency factors 1 and 4, original
 * context 8192), as convert_hf_to_gguf.py stores them: 1 for short wavelengths, 8 for long ones,
 * a smooth blend between. theta_i is divided by factor[i]. */
static void gen_rope_freqs(const ps_genmodel_params *p, float *out, int64_t n) {
    const double factor = 8.0, low = 1.0, high = 4.0, orig = 8192.0;
    const double low_wl = orig / low, high_wl = orig / high;
    for (int64_t i = 0; i < n; i++) {
        double freq = pow((double)p->rope_base, -2.0 * (double)i / (double)plain_n_rot(p));
        double wl = 2.0 * 3.141592653589793 / freq;
        double f;
        if (wl < high_wl) f = 1.0;
        else if (wl > low_wl) f = factor;
        else {
            double smooth = (orig / wl - low) / (high - low);
            f = 1.0 / ((1.0 - smooth) / factor + smooth);
        }
        out[i] = (float)f;
    }
}

/* n floats -> the tensor type (the table's round-to-nearest quantiser), at dst. */
static void convert_row(uint32_t type, const float *x, int64_t n, uint8_t *dst) {
    const ps_wtype *t = ps_wtype_get(type);
    assert(t); /* validate() and the type plan only pick table types */
    t->from_f32(x, dst, n);
}

/* ---------------------------------------------------------------- synthetic vocabulary */

/* <unk> <s> </s>, <0x00>..<0xFF>, then "▁" and filler pieces: bijective base-26 letter strings
 * k = 0, 1, ... ("a", "b", ..., "z", "aa", ...), alternately with and without the "▁" prefix,
 * so that every piece is unique. Scores decrease with the index. */
static ps_status set_synthetic_vocab(ps_gguf_writer *w, int32_t n, ps_error *err) {
    ps_status st = PS_ERR_NOMEM;
    char **strs = ps_calloc((size_t)n, sizeof *strs);
    float *scores = ps_malloc((size_t)n * sizeof *scores);
    int32_t *types = ps_malloc((size_t)n * sizeof *types);
    if (!strs || !scores || !types) goto done;
    for (int32_t i = 0; i < n; i++) {
        char buf[64];
        int32_t type = 1; /* normal */
        if (i == 0) snprintf(buf, sizeof buf, "<unk>"), type = 2;
        else if (i == 1) snprintf(buf, sizeof buf, "<s>"), type = 3;
        else if (i == 2) snprintf(buf, sizeof buf, "</s>"), type = 3;
        else if (i < 259) snprintf(buf, sizeof buf, "<0x%02X>", i - 3), type = 6;
        else if (i == 259) snprintf(buf, sizeof buf, "\xe2\x96\x81");
        else {
            int64_t k = i - 260;
            int64_t m = k / 2;
            char letters[16];
            int len = 0;
            do { /* bijective base 26, least significant first */
                letters[len++] = (char)('a' + m % 26);
                m = m / 26 - 1;
            } while (m >= 0 && len < 15);
            int pos = 0;
            if (k % 2 == 0) pos = snprintf(buf, sizeof buf, "\xe2\x96\x81");
            for (int j = len - 1; j >= 0; j--) buf[pos++] = letters[j];
            buf[pos] = 0;
        }
        strs[i] = ps_strdup(buf);
        if (!strs[i]) goto done;
        scores[i] = i < 259 ? 0.0f : -(float)(i - 259);
        types[i] = type;
    }
    if ((st = ps_gguf_set_str(w, "tokenizer.ggml.model", "llama")) != PS_OK ||
        (st = ps_gguf_set_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)strs, NULL,
                                  (uint64_t)n)) != PS_OK ||
        (st = ps_gguf_set_arr(w, "tokenizer.ggml.scores", PS_GGUF_FLOAT32, scores,
                              (uint64_t)n)) != PS_OK ||
        (st = ps_gguf_set_arr(w, "tokenizer.ggml.token_type", PS_GGUF_INT32, types,
                              (uint64_t)n)) != PS_OK ||
        (st = ps_gguf_set_u32(w, "tokenizer.ggml.bos_token_id", 1)) != PS_OK ||
        (st = ps_gguf_set_u32(w, "tokenizer.ggml.eos_token_id", 2)) != PS_OK ||
        (st = ps_gguf_set_u32(w, "tokenizer.ggml.unknown_token_id", 0)) != PS_OK ||
        (st = ps_gguf_set_bool(w, "tokenizer.ggml.add_bos_token", true)) != PS_OK)
        goto done;
    st = PS_OK;
done:
    if (strs)
        for (int32_t i = 0; i < n; i++) ps_free(strs[i]);
    ps_free(strs);
    ps_free(scores);
    ps_free(types);
    if (st == PS_ERR_NOMEM) ps_fail(err, st, -1, "gen-model: no memory for the synthetic vocab");
    return st;
}

/* ---------------------------------------------------------------- metadata */

/* general.*: the family, the name, llama_ftype. */
static ps_status set_general(ps_gguf_writer *w, const ps_genmodel_params *p) {
    ps_status st;
    const char *a = p->arch;
    char name[80];
    if (p->name[0]) snprintf(name, sizeof name, "%s", p->name);
    else snprintf(name, sizeof name, "promptscore-random-%s", a);
    /* llama_ftype: the mix's, or the one of "mostly <type>" */
    static const struct { uint32_t type, ftype; } FT[] = {
        {PS_GGML_F32, 0},     {PS_GGML_F16, 1},     {PS_GGML_Q4_0, 2},    {PS_GGML_Q4_1, 3},
        {PS_GGML_Q8_0, 7},    {PS_GGML_Q5_0, 8},    {PS_GGML_Q5_1, 9},    {PS_GGML_Q2_K, 10},
        {PS_GGML_Q3_K, 11},   {PS_GGML_Q4_K, 14},   {PS_GGML_Q5_K, 16},   {PS_GGML_Q6_K, 18},
        {PS_GGML_IQ4_NL, 25}, {PS_GGML_IQ4_XS, 30}, {PS_GGML_BF16, 32},   {PS_GGML_MXFP4, 38},
    };
    uint32_t ftype = 32;
    for (size_t i = 0; i < PS_ARRAY_LEN(FT); i++)
        if (FT[i].type == p->type) ftype = FT[i].ftype;
    if (p->mix[0]) ftype = (uint32_t)ps_qmix_find(p->mix)->ftype;
    if ((st = ps_gguf_set_str(w, "general.architecture", a)) != PS_OK) return st;
    if ((st = ps_gguf_set_str(w, "general.name", name)) != PS_OK) return st;
    if ((st = ps_gguf_set_u32(w, "general.file_type", ftype)) != PS_OK) return st;
    return PS_OK;
}

/* The keys every family has (and the expert and LongRoPE ones where they apply). */
static ps_status set_common(ps_gguf_writer *w, const ps_genmodel_params *p) {
    char key[96];
    ps_status st;
    const char *a = p->arch;
    const bool moe = ps_arch_find(a)->layer & PS_L_FFN_MOE;
    struct { const char *k; uint32_t v; } u[] = {
        {"context_length", (uint32_t)p->n_ctx},
        {"embedding_length", (uint32_t)p->n_embd},
        {"block_count", (uint32_t)p->n_layer},
        {p->n_ff > 0 ? "feed_forward_length" : NULL, (uint32_t)p->n_ff},
        {p->n_expert > 0 ? "expert_count" : NULL, (uint32_t)p->n_expert},
        {p->n_expert > 0 ? "expert_used_count" : NULL, (uint32_t)p->n_expert_used},
        {moe ? "expert_feed_forward_length" : NULL, (uint32_t)p->n_ff_exp},
        {ps_arch_find(a)->layer & PS_L_FFN_SHEXP ? "expert_shared_feed_forward_length" : NULL,
         (uint32_t)p->n_ff},
        {"attention.head_count", (uint32_t)p->n_head},
        {"attention.head_count_kv", (uint32_t)p->n_head_kv},
        {"attention.key_length", (uint32_t)p->head_dim},
        {"attention.value_length", (uint32_t)p->head_dim},
        {"rope.dimension_count", (uint32_t)plain_n_rot(p)},
        {p->n_ctx_orig > 0 ? "rope.scaling.original_context_length" : NULL,
         (uint32_t)p->n_ctx_orig},
    };
    for (size_t i = 0; i < PS_ARRAY_LEN(u); i++) {
        if (!u[i].k) continue;
        snprintf(key, sizeof key, "%s.%s", a, u[i].k);
        if ((st = ps_gguf_set_u32(w, key, u[i].v)) != PS_OK) return st;
    }
    snprintf(key, sizeof key, "%s.rope.freq_base", a);
    if ((st = ps_gguf_set_f32(w, key, p->rope_base)) != PS_OK) return st;
    if (p->n_ctx_orig > 0 && p->n_ctx > p->n_ctx_orig) {
        /* Phi-3's converter: attn_factor = sqrt(1 + ln(scale) / ln(original)) */
        const double scale = (double)p->n_ctx / (double)p->n_ctx_orig;
        snprintf(key, sizeof key, "%s.rope.scaling.attn_factor", a);
        if ((st = ps_gguf_set_f32(w, key, (float)sqrt(1.0 + log(scale) / log((double)p->n_ctx_orig)))) != PS_OK)
            return st;
    }
    return PS_OK;
}

/* qwen35*: the DeltaNet sizes, the layer pattern, the MTP blocks (block_count and
 * rope.dimension_count overwritten in place). */
static ps_status set_hybrid(ps_gguf_writer *w, const ps_genmodel_params *p) {
    char key[96];
    ps_status st;
    const char *a = p->arch;
    const ps_genmodel_params h = hybrid_defaults(p);
    struct { const char *k; uint32_t v; } hu[] = {
        {"block_count", (uint32_t)(p->n_layer + h.n_nextn)},
        {"rope.dimension_count", (uint32_t)h.n_rot},
        {"full_attention_interval", (uint32_t)h.full_attn_interval},
        {"ssm.conv_kernel", (uint32_t)h.ssm_d_conv},
        {"ssm.state_size", (uint32_t)h.ssm_d_state},
        {"ssm.group_count", (uint32_t)h.ssm_n_k},
        {"ssm.time_step_rank", (uint32_t)h.ssm_n_v},
        {"ssm.inner_size", (uint32_t)(h.ssm_n_v * h.ssm_d_state)},
        {"nextn_predict_layers", (uint32_t)h.n_nextn},
    };
    for (size_t i = 0; i < PS_ARRAY_LEN(hu); i++) {
        if (!strcmp(hu[i].k, "nextn_predict_layers") && !hu[i].v) continue;
        snprintf(key, sizeof key, "%s.%s", a, hu[i].k);
        if ((st = ps_gguf_set_u32(w, key, hu[i].v)) != PS_OK) return st;
    }
    snprintf(key, sizeof key, "%s.rope.dimension_sections", a);
    if ((st = ps_gguf_set_arr(w, key, PS_GGUF_INT32, h.rope_sections, 4)) != PS_OK)
        return st;
    return PS_OK;
}

/* gpt-oss's YaRN: rope.scaling.* (only with yarn_factor > 0). */
static ps_status set_yarn(ps_gguf_writer *w, const ps_genmodel_params *p) {
    char key[96];
    ps_status st;
    const char *a = p->arch;
    if (!(p->yarn_factor > 0.0f)) return PS_OK;
    snprintf(key, sizeof key, "%s.rope.scaling.type", a);
    if ((st = ps_gguf_set_str(w, key, "yarn")) != PS_OK) return st;
    struct { const char *k; float v; } yf[] = {
        {"rope.scaling.factor", p->yarn_factor},
        {"rope.scaling.yarn_beta_fast", p->yarn_beta_fast},
        {"rope.scaling.yarn_beta_slow", p->yarn_beta_slow},
    };
    for (size_t i = 0; i < PS_ARRAY_LEN(yf); i++) {
        if (!(yf[i].v > 0.0f)) continue;
        snprintf(key, sizeof key, "%s.%s", a, yf[i].k);
        if ((st = ps_gguf_set_f32(w, key, yf[i].v)) != PS_OK) return st;
    }
    if (p->yarn_orig_ctx > 0) {
        snprintf(key, sizeof key, "%s.rope.scaling.original_context_length", a);
        if ((st = ps_gguf_set_u32(w, key, (uint32_t)p->yarn_orig_ctx)) != PS_OK) return st;
    }
    return PS_OK;
}

/* Sliding windows (gpt-oss) and Gemma's keys: soft-caps, the local RoPE base, linear scale. */
static ps_status set_swa_gemma(ps_gguf_writer *w, const ps_genmodel_params *p) {
    char key[96];
    ps_status st;
    const char *a = p->arch;
    if (!(ps_arch_find(a)->flags & PS_A_GEMMA) && p->n_swa > 0) { /* gpt-oss */
        snprintf(key, sizeof key, "%s.attention.sliding_window", a);
        if ((st = ps_gguf_set_u32(w, key, (uint32_t)p->n_swa)) != PS_OK) return st;
        if (p->swa_period > 0) {
            snprintf(key, sizeof key, "%s.attention.sliding_window_pattern", a);
            if ((st = ps_gguf_set_u32(w, key, (uint32_t)p->swa_period)) != PS_OK) return st;
        }
    }
    if (ps_arch_find(a)->flags & PS_A_GEMMA) {
        struct { const char *k; float v; } gf[] = {
            {"rope.freq_base_swa", p->rope_base_swa},
            {"attn_logit_softcapping", p->attn_softcap},
            {"final_logit_softcapping", p->final_softcap},
            {"rope.scaling.factor", p->rope_scale_linear},
        };
        for (size_t i = 0; i < PS_ARRAY_LEN(gf); i++) {
            if (!(gf[i].v > 0.0f)) continue;
            snprintf(key, sizeof key, "%s.%s", a, gf[i].k);
            if ((st = ps_gguf_set_f32(w, key, gf[i].v)) != PS_OK) return st;
        }
        if (p->rope_scale_linear > 0.0f) {
            snprintf(key, sizeof key, "%s.rope.scaling.type", a);
            if ((st = ps_gguf_set_str(w, key, "linear")) != PS_OK) return st;
        }
        if (p->n_swa > 0) {
            snprintf(key, sizeof key, "%s.attention.sliding_window", a);
            if ((st = ps_gguf_set_u32(w, key, (uint32_t)p->n_swa)) != PS_OK) return st;
        }
        if (p->swa_period > 0) {
            snprintf(key, sizeof key, "%s.attention.sliding_window_pattern", a);
            if ((st = ps_gguf_set_u32(w, key, (uint32_t)p->swa_period)) != PS_OK) return st;
        }
    }
    return PS_OK;
}

/* Every key but the vocabulary's, in the order the files have always had them. */
static ps_status set_hparams(ps_gguf_writer *w, const ps_genmodel_params *p) {
    char key[96];
    ps_status st;
    if ((st = set_general(w, p)) != PS_OK || (st = set_common(w, p)) != PS_OK ||
        (is_hybrid(p) && (st = set_hybrid(w, p)) != PS_OK) || (st = set_yarn(w, p)) != PS_OK ||
        (st = set_swa_gemma(w, p)) != PS_OK)
        return st;
    snprintf(key, sizeof key, "%s.attention.layer_norm_rms_epsilon", p->arch);
    return ps_gguf_set_f32(w, key, p->rms_eps);
}

/* Walks one metadata value of the serialised blob; returns the position after it or 0. */
static size_t skip_value(const uint8_t *b, size_t size, size_t pos, uint32_t type, int depth) {
    static const uint8_t scalar[13] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    if (type > 12 || depth > 2) return 0;
    if (type == PS_GGUF_STRING) {
        uint64_t len;
        if (size - pos < 8) return 0;
        memcpy(&len, b + pos, 8);
        if (len > size - pos - 8) return 0;
        return pos + 8 + (size_t)len;
    }
    if (type == PS_GGUF_ARRAY) {
        uint32_t et;
        uint64_t n;
        if (size - pos < 12) return 0;
        memcpy(&et, b + pos, 4);
        memcpy(&n, b + pos + 4, 8);
        pos += 12;
        if (et <= 12 && scalar[et]) {
            if (n > (size - pos) / scalar[et]) return 0;
            return pos + (size_t)n * scalar[et];
        }
        for (uint64_t i = 0; i < n; i++)
            if (!(pos = skip_value(b, size, pos, et, depth + 1))) return 0;
        return pos;
    }
    if (size - pos < scalar[type]) return 0;
    return pos + scalar[type];
}

/* The writer's blob (no tensors) -> [kv_begin, kv_end) and n_kv; the alignment it asks for. */
static ps_status locate_kv(const uint8_t *b, size_t size, size_t *kv_end, uint64_t *n_kv,
                           uint64_t *align, ps_error *err) {
    *align = 32;
    if (size < 24 || memcmp(b, "GGUF", 4))
        return ps_fail(err, PS_ERR_INTERNAL, -1, "gen-model: the gguf writer gave no header");
    memcpy(n_kv, b + 16, 8);
    size_t pos = 24;
    for (uint64_t i = 0; i < *n_kv; i++) {
        uint64_t klen;
        uint32_t type;
        if (size - pos < 8) goto bad;
        memcpy(&klen, b + pos, 8);
        if (klen > size - pos - 8 || size - pos - 8 - klen < 4) goto bad;
        const char *key = (const char *)b + pos + 8;
        memcpy(&type, b + pos + 8 + klen, 4);
        size_t vpos = pos + 12 + (size_t)klen;
        if (klen == 17 && !memcmp(key, "general.alignment", 17) && type == PS_GGUF_UINT32 &&
            size - vpos >= 4) {
            uint32_t a;
            memcpy(&a, b + vpos, 4);
            if (a == 0 || (a & (a - 1))) goto bad;
            *align = a;
        }
        if (!(pos = skip_value(b, size, vpos, type, 0))) goto bad;
    }
    *kv_end = pos;
    return PS_OK;
bad:
    return ps_fail(err, PS_ERR_INTERNAL, -1, "gen-model: cannot walk the writer's metadata");
}

/* ---------------------------------------------------------------- writing */

typedef struct {
    FILE *f;
    const char *path;
    uint64_t written;
} out_file;

static ps_status out_write(out_file *o, const void *data, size_t n, ps_error *err) {
    if (n && fwrite(data, 1, n, o->f) != n)
        return ps_fail(err, PS_ERR_IO, (int64_t)o->written, "write %s: %s", o->path,
                       strerror(errno));
    o->written += n;
    return PS_OK;
}

static ps_status out_pad(out_file *o, uint64_t align, ps_error *err) {
    static const uint8_t zeros[256];
    uint64_t pad = (align - o->written % align) % align;
    while (pad) {
        size_t n = pad > sizeof zeros ? sizeof zeros : (size_t)pad;
        ps_status st = out_write(o, zeros, n, err);
        if (st != PS_OK) return st;
        pad -= n;
    }
    return PS_OK;
}

static ps_status write_tensor_data(out_file *o, const ps_genmodel_params *p, const gen_tensor *t,
                                   float *fbuf, uint8_t *obuf, ps_error *err) {
    const int64_t ne0 = t->ne[0], rows = t->ne[1] * t->ne[2];
    const size_t row_bytes = ps_quant_row_bytes(t->type, ne0);
    const uint64_t tseed = p->seed * 0x9e3779b97f4a7c15ull ^ fnv1a(t->name);
    if (t->draw == PS_DRAW_ROPE_FREQS) {
        gen_rope_freqs(p, fbuf, ne0);
        return out_write(o, fbuf, (size_t)ne0 * 4, err);
    }
    if (t->draw == PS_DRAW_ROPE_LONG || t->draw == PS_DRAW_ROPE_SHORT) {
        /* LongRoPE-like tables: 1 at the fastest pair, growing towards the slowest (long up to
         * about the context ratio, short by at most 10%) */
        const double ratio = (double)p->n_ctx / (double)p->n_ctx_orig;
        for (int64_t i = 0; i < ne0; i++) {
            const double u = ne0 > 1 ? (double)i / (double)(ne0 - 1) : 0.0;
            fbuf[i] = (float)(t->draw == PS_DRAW_ROPE_LONG ? 1.0 + (ratio - 1.0) * u * u
                                                           : 1.0 + 0.1 * u);
        }
        return out_write(o, fbuf, (size_t)ne0 * 4, err);
    }
    float mean = 0.0f, sigma;
    switch (t->draw) {
    case PS_DRAW_NORM: mean = 1.0f; sigma = 0.1f; break;
    case PS_DRAW_BIAS: sigma = 0.1f; break;
    case PS_DRAW_SINK: mean = 0.5f; sigma = 1.0f; break;  /* comparable to a score */
    case PS_DRAW_ACT_BIAS: sigma = 4.0f; break;           /* gpt-oss gate / up biases: wide
                                                           * enough that the clamps at +-7 act */
    case PS_DRAW_DT_BIAS: mean = -3.0f; sigma = 0.5f; break; /* softplus ~ 0.05: slow decay */
    case PS_DRAW_DECAY: /* -exp(A_log), as the converter stores it; A_log ~ N(0, 0.5) */
        gen_row_normal(tseed, 0, 0.0f, 0.5f, fbuf, ne0);
        for (int64_t i = 0; i < ne0; i++) fbuf[i] = -expf(fbuf[i]);
        return out_write(o, fbuf, (size_t)ne0 * 4, err);
    default: sigma = (float)(1.0 / sqrt((double)ne0)); break; /* fan_in = ne[0] */
    }
    /* merged experts: expert x's rows [0, F) are the rows x F .. of the gate tensor the split
     * layout would have, [F, 2F) those of the up tensor, so both layouts hold the same weights */
    const char *gu = strstr(t->name, "ffn_gate_up_exps.weight");
    uint64_t gseed = 0, useed = 0;
    if (gu) {
        char n2[80];
        snprintf(n2, sizeof n2, "%.*sffn_gate_exps.weight", (int)(gu - t->name), t->name);
        gseed = p->seed * 0x9e3779b97f4a7c15ull ^ fnv1a(n2);
        snprintf(n2, sizeof n2, "%.*sffn_up_exps.weight", (int)(gu - t->name), t->name);
        useed = p->seed * 0x9e3779b97f4a7c15ull ^ fnv1a(n2);
    }
    int64_t rows_per_block = GEN_BLOCK_ELEMS / ne0;
    if (rows_per_block < 1) rows_per_block = 1;
    for (int64_t r0 = 0; r0 < rows; r0 += rows_per_block) {
        int64_t nr = PS_MIN(rows_per_block, rows - r0);
        for (int64_t r = 0; r < nr; r++) {
            if (gu) {
                const int64_t F = t->ne[1] / 2, x = (r0 + r) / t->ne[1], j = (r0 + r) % t->ne[1];
                gen_row_normal(j < F ? gseed : useed, x * F + j % F, mean, sigma, fbuf, ne0);
            } else {
                gen_row_normal(tseed, r0 + r, mean, sigma, fbuf, ne0);
            }
            convert_row(t->type, fbuf, ne0, obuf + (size_t)r * row_bytes);
        }
        ps_status st = out_write(o, obuf, (size_t)nr * row_bytes, err);
        if (st != PS_OK) return st;
    }
    return PS_OK;
}

/* vocab_path's tokenizer: the file (kept open for its tokenizer.* keys) and its token count. */
static ps_status open_vocab(const ps_genmodel_params *p, ps_gguf **vocab, int64_t *n_vocab,
                            ps_error *err) {
    ps_status st = ps_gguf_open(p->vocab_path, vocab, err);
    if (st != PS_OK) return st;
    ps_gguf_type et;
    uint64_t n;
    const void *data;
    st = ps_gguf_get_arr(*vocab, "tokenizer.ggml.tokens", &et, &n, &data, err);
    if (st == PS_OK && (et != PS_GGUF_STRING || n < 1 || n > INT32_MAX))
        st = ps_fail(err, PS_ERR_FORMAT, -1,
                     "%s: tokenizer.ggml.tokens is not a non-empty string array", p->vocab_path);
    if (st == PS_OK) *n_vocab = (int64_t)n;
    return st;
}

/* The metadata, serialised by the gguf writer with no tensors. */
typedef struct {
    void *blob;
    size_t size;
    size_t kv_end;  /* the key-values end here in blob (they start at byte 24) */
    uint64_t n_kv, align;
} metadata;

static ps_status build_metadata(const ps_genmodel_params *p, const ps_gguf *vocab,
                                int64_t n_vocab, metadata *md, ps_error *err) {
    ps_gguf_writer *w = ps_gguf_writer_new();
    ps_status st;
    if (!w) return ps_fail(err, PS_ERR_NOMEM, -1, "gen-model: no memory for the gguf writer");
    if ((st = set_hparams(w, p)) != PS_OK)
        ps_fail(err, st, -1, "gen-model: no memory for the metadata");
    else if (vocab && (st = ps_gguf_copy_kv(w, vocab, "tokenizer.")) != PS_OK)
        ps_fail(err, st, -1, "gen-model: copying tokenizer.* from %s failed", p->vocab_path);
    else if (!vocab)
        st = set_synthetic_vocab(w, (int32_t)n_vocab, err);
    if (st == PS_OK) st = ps_gguf_write_memory(w, &md->blob, &md->size, err);
    if (st == PS_OK)
        st = locate_kv(md->blob, md->size, &md->kv_end, &md->n_kv, &md->align, err);
    ps_gguf_writer_free(w);
    return st;
}

/* The header (magic, version 3, n_tensors, n_kv), the writer's key-values, the tensor infos,
 * and the padding before the data. */
static ps_status write_header(out_file *o, const metadata *md, const tensor_list *l,
                              ps_error *err) {
    const uint32_t version = 3;
    const uint64_t n_tensors = (uint64_t)l->n;
    ps_status st;
    if ((st = out_write(o, "GGUF", 4, err)) != PS_OK ||
        (st = out_write(o, &version, 4, err)) != PS_OK ||
        (st = out_write(o, &n_tensors, 8, err)) != PS_OK ||
        (st = out_write(o, &md->n_kv, 8, err)) != PS_OK ||
        (st = out_write(o, (const uint8_t *)md->blob + 24, md->kv_end - 24, err)) != PS_OK)
        return st;
    for (int64_t i = 0; i < l->n; i++) {
        const gen_tensor *t = &l->t[i];
        uint64_t len = strlen(t->name);
        uint64_t ne[3] = {(uint64_t)t->ne[0], (uint64_t)t->ne[1], (uint64_t)t->ne[2]};
        if ((st = out_write(o, &len, 8, err)) != PS_OK ||
            (st = out_write(o, t->name, (size_t)len, err)) != PS_OK ||
            (st = out_write(o, &t->n_dims, 4, err)) != PS_OK ||
            (st = out_write(o, ne, 8 * t->n_dims, err)) != PS_OK ||
            (st = out_write(o, &t->type, 4, err)) != PS_OK ||
            (st = out_write(o, &t->offset, 8, err)) != PS_OK)
            return st;
    }
    return out_pad(o, md->align, err);
}

/* Every tensor's data, each padded to the alignment, through one block of floats (fbuf) and
 * its converted copy (obuf). */
static ps_status write_data(out_file *o, const ps_genmodel_params *p, const tensor_list *l,
                            uint64_t align, ps_error *err) {
    int64_t max_ne0 = 0;
    for (int64_t i = 0; i < l->n; i++) max_ne0 = PS_MAX(max_ne0, l->t[i].ne[0]);
    const size_t fcount = (size_t)PS_MAX(max_ne0, (int64_t)GEN_BLOCK_ELEMS);
    float *fbuf = ps_malloc(fcount * sizeof(float));
    uint8_t *obuf = ps_malloc(fcount * sizeof(float));
    ps_status st = PS_OK;
    if (!fbuf || !obuf)
        st = ps_fail(err, PS_ERR_NOMEM, -1, "gen-model: no memory for a %zu-float block", fcount);
    const uint64_t data_start = o->written;
    for (int64_t i = 0; st == PS_OK && i < l->n; i++) {
        assert(o->written - data_start == l->t[i].offset);
        if ((st = write_tensor_data(o, p, &l->t[i], fbuf, obuf, err)) == PS_OK)
            st = out_pad(o, align, err);
    }
    ps_free(fbuf);
    ps_free(obuf);
    return st;
}

ps_status ps_genmodel_write(const ps_genmodel_params *p, const char *path, ps_error *err) {
    if (!p || !path) return ps_fail(err, PS_ERR_INVALID_ARG, -1, "gen-model: NULL argument");
    ps_status st = validate(p, err);
    if (st != PS_OK) return st;

    ps_gguf *vocab = NULL;
    tensor_list l = {0};
    metadata md = {0};
    out_file o = {NULL, path, 0};
    bool created = false;
    int64_t n_vocab = p->n_vocab;

    if (p->vocab_path && (st = open_vocab(p, &vocab, &n_vocab, err)) != PS_OK) goto done;
    if ((st = build_metadata(p, vocab, n_vocab, &md, err)) != PS_OK) goto done;
    if ((st = build_list(p, n_vocab, &l, err)) != PS_OK) goto done;
    if (md.align != 32) /* build_list laid the data out at 32 */
        for (int64_t i = 0, off = 0; i < l.n; i++) {
            l.t[i].offset = (uint64_t)off;
            off += (int64_t)((l.t[i].nbytes + md.align - 1) / md.align * md.align);
        }
    o.f = fopen(path, "wb");
    if (!o.f) {
        st = ps_fail(err, PS_ERR_IO, -1, "cannot create %s: %s", path, strerror(errno));
        goto done;
    }
    created = true;
    if ((st = write_header(&o, &md, &l, err)) != PS_OK ||
        (st = write_data(&o, p, &l, md.align, err)) != PS_OK)
        goto done;
    if (fclose(o.f) != 0) {
        o.f = NULL;
        st = ps_fail(err, PS_ERR_IO, -1, "close %s: %s", path, strerror(errno));
        goto done;
    }
    o.f = NULL;
    st = PS_OK;
done:
    if (o.f) fclose(o.f);
    if (st != PS_OK && created) remove(path); /* only a file this call created */
    ps_free(md.blob);
    ps_free(l.t);
    ps_gguf_close(vocab);
    return st;
}
