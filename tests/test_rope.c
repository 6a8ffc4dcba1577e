/*
 * test_rope.c — RoPE scaling (rope.scaling.type none / linear / yarn / longrope, the older
 * rope.scale_linear, the YaRN keys, LongRoPE's factor tables) against the float64 reference.
 *
 * Fixtures: the tiny llama of gen-model (4/2 heads of 16, 2 layers) rewritten with the keys
 * (and tensors) of each scaling; F32 and Q8_0 over 600 tokens (three chunks of 256) with float32
 * activations against tests/reference/forward.py within 1e-4. The cases: linear (factor 4), the
 * old key, yarn with defaults (factor 4, original context 256) and with every YaRN key set
 * (ext_factor 0.5, attn factors, betas, log multiplier), longrope with long and short tables
 * (long chosen at the trained context 1024 > original 256, short when loaded with n_ctx 256;
 * the reference told the same context).
 * Formulas: ps_rope_setup's derived numbers (correction dims, mscale) against values computed
 * by hand from ggml's formulas; "none" with a factor gives the unscaled model's bits; yarn
 * and longrope really change the logits.
 * Invariance: chunks of 1, 7, 100, 256 and 1 vs 2 threads give bitwise identical logits.
 * Bad metadata: an unknown type, a type that is not a string, a negative factor, beta 0, an
 * ext_factor above 1, an original context of 0, a non-positive attn_factor, a factor so
 * small that 1/factor overflows, one LongRoPE table without the other, a table of the wrong
 * length or with a zero — each a clear error naming the key or tensor, never a crash.
 * The numpy part is skipped (never passed) without /usr/bin/python3 and numpy.
 */
#include "check.h"
#include "fixture.h"
#include "gen/genmodel.h"
#include "gguf/gguf.h"
#include "base/impl.h"
#include "promptscore.h"
#include "model/rope.h"

#include <math.h>
#include <sys/stat.h>

#define N_TOK 600

/* ---------------------------------------------------------------- fixtures */

typedef enum {
    R_PLAIN, R_LINEAR, R_OLD_KEY, R_NONE, R_YARN, R_YARN_KEYS, R_LONGROPE,
    /* bad */
    R_BAD_TYPE, R_TYPE_U32, R_NEG_FACTOR, R_BETA0, R_EXT2, R_ORIG0, R_ATTN0, R_TINY_FACTOR,
    R_LONG_ONLY, R_LONG_LEN, R_LONG_ZERO,
} rcase;

/* Rewrites src with the keys and tensors of case c into dst. */
static bool rewrite(const char *src, const char *dst, rcase c) {
    ps_gguf *g = NULL;
    ps_error e;
    if (ps_gguf_open(src, &g, &e) != PS_OK) return false;
    ps_gguf_writer *w = ps_gguf_writer_new();
    ps_gguf_copy_kv(w, g, NULL);
    switch (c) {
    case R_LINEAR:
        ps_gguf_set_str(w, "llama.rope.scaling.type", "linear");
        ps_gguf_set_f32(w, "llama.rope.scaling.factor", 4.0f);
        break;
    case R_OLD_KEY: ps_gguf_set_f32(w, "llama.rope.scale_linear", 2.0f); break;
    case R_NONE:
        ps_gguf_set_str(w, "llama.rope.scaling.type", "none");
        ps_gguf_set_f32(w, "llama.rope.scaling.factor", 4.0f);
        break;
    case R_YARN:
    case R_TINY_FACTOR:
        ps_gguf_set_str(w, "llama.rope.scaling.type", "yarn");
        ps_gguf_set_f32(w, "llama.rope.scaling.factor", c == R_YARN ? 4.0f : 1e-45f);
        ps_gguf_set_u32(w, "llama.rope.scaling.original_context_length", 256);
        break;
    case R_YARN_KEYS:
        ps_gguf_set_str(w, "llama.rope.scaling.type", "yarn");
        ps_gguf_set_f32(w, "llama.rope.scaling.factor", 8.0f);
        ps_gguf_set_u32(w, "llama.rope.scaling.original_context_length", 128);
        ps_gguf_set_f32(w, "llama.rope.scaling.yarn_ext_factor", 0.5f);
        ps_gguf_set_f32(w, "llama.rope.scaling.yarn_attn_factor", 3.0f); /* unused: ext != 0 */
        ps_gguf_set_f32(w, "llama.rope.scaling.attn_factor", 1.25f);
        ps_gguf_set_f32(w, "llama.rope.scaling.yarn_beta_fast", 16.0f);
        ps_gguf_set_f32(w, "llama.rope.scaling.yarn_beta_slow", 0.5f);
        ps_gguf_set_f32(w, "llama.rope.scaling.yarn_log_multiplier", 0.1f);
        break;
    case R_LONGROPE:
    case R_LONG_ONLY:
    case R_LONG_LEN:
    case R_LONG_ZERO:
        ps_gguf_set_str(w, "llama.rope.scaling.type", "longrope");
        ps_gguf_set_u32(w, "llama.rope.scaling.original_context_length", 256);
        ps_gguf_set_f32(w, "llama.rope.scaling.attn_factor", 1.1902380714238083f);
        break;
    case R_BAD_TYPE: ps_gguf_set_str(w, "llama.rope.scaling.type", "dynamic"); break;
    case R_TYPE_U32: ps_gguf_set_u32(w, "llama.rope.scaling.type", 2); break;
    case R_NEG_FACTOR: ps_gguf_set_f32(w, "llama.rope.scaling.factor", -2.0f); break;
    case R_BETA0:
        ps_gguf_set_str(w, "llama.rope.scaling.type", "yarn");
        ps_gguf_set_f32(w, "llama.rope.scaling.yarn_beta_fast", 0.0f);
        break;
    case R_EXT2: ps_gguf_set_f32(w, "llama.rope.scaling.yarn_ext_factor", 2.0f); break;
    case R_ORIG0: ps_gguf_set_u32(w, "llama.rope.scaling.original_context_length", 0); break;
    case R_ATTN0: ps_gguf_set_f32(w, "llama.rope.scaling.attn_factor", 0.0f); break;
    case R_PLAIN: break;
    }
    for (int64_t i = 0; i < ps_gguf_n_tensors(g); i++) {
        const ps_gguf_tensor *t = ps_gguf_tensor_at(g, i);
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.ptr);
        ps_gguf_add_tensor(w, name, t->type, t->n_dims, t->ne, t->data, t->nbytes);
    }
    if (c == R_LONGROPE || c == R_LONG_ONLY || c == R_LONG_LEN || c == R_LONG_ZERO) {
        /* n_rot / 2 = 8 factors each: long ones grow with the pair index (as Phi-3's do) */
        float lf[9], sf[8];
        for (int i = 0; i < 9; i++) lf[i] = 1.0f + 0.75f * (float)i * (float)i;
        for (int i = 0; i < 8; i++) sf[i] = 1.0f + 0.05f * (float)i;
        if (c == R_LONG_ZERO) sf[3] = 0.0f;
        const int64_t n = c == R_LONG_LEN ? 9 : 8;
        ps_gguf_add_tensor(w, "rope_factors_long.weight", PS_GGML_F32, 1, &n, lf,
                           (uint64_t)n * 4);
        const int64_t ns = 8;
        if (c != R_LONG_ONLY)
            ps_gguf_add_tensor(w, "rope_factors_short.weight", PS_GGML_F32, 1, &ns, sf, 32);
    }
    ps_status st = ps_gguf_write_file(w, dst, &e);
    ps_gguf_writer_free(w);
    ps_gguf_close(g);
    return st == PS_OK;
}


static bool make_src(const char *path, uint32_t type, uint64_t seed) {
    ps_genmodel_params p = ps_genmodel_default_params();
    p.type = type;
    p.seed = seed;
    p.n_ctx = 1024;
    ps_error e;
    ps_status st = ps_genmodel_write(&p, path, &e);
    CHECKF(st == PS_OK, "gen-model: %s", e.message);
    return st == PS_OK;
}

/* ---------------------------------------------------------------- formulas */

static void test_setup_numbers(void) {
    /* yarn, n_rot 128, base 10000, original 4096, factor 4, betas 32 / 1 (gpt-oss-like):
     * corr = n_rot ln(4096 / (beta 2 pi)) / (2 ln 10000) -> 20.94 and 45.03: floor 20, ceil 46;
     * attn_factor = (0.1 ln 4 + 1) / (1 + 0.1 ln 4) = 1; mscale = 1 + 0.1 ln 4 */
    ps_rope r;
    memset(&r, 0, sizeof r);
    r.scaling = PS_ROPE_SCALING_YARN;
    r.n_rot = 128;
    r.base = 10000.0f;
    r.freq_scale = 0.25f;
    r.beta_fast = 32.0f;
    r.beta_slow = 1.0f;
    r.n_ctx_orig = 4096;
    ps_rope_keys k = {-1.0f, 1.0f, 1.0f, 0.0f};
    ps_rope_setup(&r, &k);
    CHECKF(r.corr[0] == 20.0f && r.corr[1] == 46.0f, "corr dims [%g, %g], want [20, 46]",
           (double)r.corr[0], (double)r.corr[1]);
    CHECKF(r.ext_factor == 1.0f, "yarn ext_factor %g", (double)r.ext_factor);
    CHECKF(fabsf(r.attn_factor - 1.0f) < 1e-6f, "attn_factor %g", (double)r.attn_factor);
    CHECKF(fabs((double)r.mscale - (1.0 + 0.1 * log(4.0))) < 1e-6, "mscale %g",
           (double)r.mscale);
    /* pair 0 at position p: ramp 1 (t < corr0): the extrapolated angle p; pair 63: ramp 0:
     * the interpolated one */
    float cs[64], sn[64];
    ps_rope_angles(&r, 1000, cs, sn);
    const double m = (double)r.mscale;
    CHECKF(fabs(cs[0] - cos(1000.0) * m) < 1e-5 && fabs(sn[0] - sin(1000.0) * m) < 1e-5,
           "pair 0: %g %g", (double)cs[0], (double)sn[0]);
    const double th63 = 0.25 * 1000.0 * pow(10000.0, -126.0 / 128.0);
    CHECKF(fabs(cs[63] - cos(th63) * m) < 1e-6, "pair 63: %g vs %g", (double)cs[63],
           cos(th63) * m);
    /* linear: no ext, mscale 1 */
    r.scaling = PS_ROPE_SCALING_LINEAR;
    ps_rope_setup(&r, &k);
    CHECK(r.ext_factor == 0.0f && r.mscale == 1.0f);
    /* a log multiplier: attn = m(4,1) / m(4, 0.5) / (1 + 0.1 ln 4) then * 1 + 0.1 ln 4 */
    r.scaling = PS_ROPE_SCALING_YARN;
    ps_rope_keys k2 = {-1.0f, 1.0f, 2.0f, 0.5f};
    ps_rope_setup(&r, &k2);
    const double l4 = log(4.0), want = (0.1 * l4 + 1) / (0.05 * l4 + 1) * 2.0;
    CHECKF(fabs((double)r.mscale - want) < 1e-5, "mscale with log_mul %g, want %g",
           (double)r.mscale, want);
}

/* ---------------------------------------------------------------- reference */

typedef struct {
    rcase c;
    const char *tag;
    int32_t model_ctx;
} ref_case;

static void test_reference(bool numpy) {
    static const ref_case cases[] = {
        {R_LINEAR, "linear", 0},    {R_OLD_KEY, "scale-linear", 0}, {R_YARN, "yarn", 0},
        {R_YARN_KEYS, "yarn-keys", 0}, {R_LONGROPE, "longrope-long", 0},
        {R_LONGROPE, "longrope-short", 256},
    };
    static const uint32_t types[] = {PS_GGML_F32, PS_GGML_Q8_0};
    int32_t *ids = make_ids(N_TOK, 512, 0x7654321ull);
    for (size_t ti = 0; ti < PS_ARRAY_LEN(types); ti++) {
        char src[700];
        snprintf(src, sizeof src, "%s", outp(ti ? "rope-src-q8.gguf" : "rope-src.gguf"));
        if (!make_src(src, types[ti], 40 + ti)) continue;
        int64_t nv = 0;
        float *plain = c_logits(src, ids, N_TOK, 256, PS_ISA_AUTO, PS_ACT_F32, 1, 0, &nv);
        const size_t nf = (size_t)N_TOK * (size_t)nv;
        /* "none" ignores the factor: the unscaled model's bits */
        char path[700];
        snprintf(path, sizeof path, "%s", outp("rope-none.gguf"));
        if (rewrite(src, path, R_NONE)) {
            float *c = c_logits(path, ids, N_TOK, 256, PS_ISA_AUTO, PS_ACT_F32, 1, 0, &nv);
            CHECKF(c && plain && !memcmp(c, plain, nf * 4),
                   "type none with a factor differs from no scaling");
            free(c);
        }
        for (size_t i = 0; i < PS_ARRAY_LEN(cases); i++) {
            char tag[64];
            snprintf(tag, sizeof tag, "rope-%s-%s", cases[i].tag, ps_ggml_type_name(types[ti]));
            snprintf(path, sizeof path, "%s.gguf", outp(tag));
            CHECKF(rewrite(src, path, cases[i].c), "%s: rewrite", tag);
            float *c = c_logits(path, ids, N_TOK, 256, PS_ISA_AUTO, PS_ACT_F32, 1, cases[i].model_ctx, &nv);
            if (!c) continue;
            /* the scaling changes the numbers */
            double dplain = 0;
            for (size_t j = 0; plain && j < nf; j++)
                dplain = fmax(dplain, fabs((double)c[j] - plain[j]));
            CHECKF(dplain > 1e-3, "%s: logits within %g of the unscaled model", tag, dplain);
            if (numpy) {
                double *r = ref_logits(path, ids, N_TOK, nv, tag, cases[i].model_ctx);
                CHECKF(r != NULL, "%s: no reference logits", tag);
                if (r) {
                    double md = 0, mr = 0;
                    size_t at = 0;
                    for (size_t j = 0; j < nf; j++) {
                        double dd = fabs((double)c[j] - r[j]);
                        if (!(dd <= md)) md = dd, at = j;
                        mr = fmax(mr, fabs(r[j]));
                    }
                    printf("  %-28s f32 T=%d max|ref| %.3f max|C-ref| %.3g (row %lld)\n", tag,
                           N_TOK, mr, md, (long long)(at / (size_t)nv));
                    CHECKF(md <= 1e-4, "%s: max |C - ref| = %g at row %lld", tag, md,
                           (long long)(at / (size_t)nv));
                }
                free(r);
            }
            /* chunking and threads: the same bits */
            if (ti == 0 && (cases[i].c == R_YARN_KEYS || cases[i].c == R_LONGROPE)) {
                static const int32_t chunks[4] = {1, 7, 100, 256};
                for (int j = 0; j < 4; j++) {
                    float *cc = c_logits(path, ids, N_TOK, chunks[j], PS_ISA_AUTO, PS_ACT_F32, j == 3 ? 2 : 1,
                                         cases[i].model_ctx, &nv);
                    CHECKF(cc && !memcmp(cc, c, nf * 4), "%s: chunk %d on %d threads differs",
                           tag, chunks[j], j == 3 ? 2 : 1);
                    free(cc);
                }
            }
            free(c);
        }
        free(plain);
    }
    free(ids);
}

/* ---------------------------------------------------------------- bad metadata */

static void test_bad(void) {
    char src[700];
    snprintf(src, sizeof src, "%s", outp("rope-bad-src.gguf"));
    if (!make_src(src, PS_GGML_F32, 3)) return;
    struct {
        rcase c;
        ps_status code;
        const char *names;
    } cases[] = {
        {R_BAD_TYPE, PS_ERR_UNSUPPORTED, "llama.rope.scaling.type"},
        {R_TYPE_U32, PS_ERR_FORMAT, "llama.rope.scaling.type"},
        {R_NEG_FACTOR, PS_ERR_FORMAT, "llama.rope.scaling.factor"},
        {R_BETA0, PS_ERR_FORMAT, "llama.rope.scaling.yarn_beta_fast"},
        {R_EXT2, PS_ERR_FORMAT, "llama.rope.scaling.yarn_ext_factor"},
        {R_ORIG0, PS_ERR_FORMAT, "llama.rope.scaling.original_context_length"},
        {R_ATTN0, PS_ERR_FORMAT, "llama.rope.scaling.attn_factor"},
        {R_TINY_FACTOR, PS_ERR_FORMAT, "llama.rope.scaling.factor"},
        {R_LONG_ONLY, PS_ERR_FORMAT, "rope_factors_short.weight"},
        {R_LONG_LEN, PS_ERR_FORMAT, "rope_factors_long.weight"},
        {R_LONG_ZERO, PS_ERR_FORMAT, "rope_factors_short.weight"},
    };
    for (size_t i = 0; i < PS_ARRAY_LEN(cases); i++) {
        const char *path = outp("rope-bad.gguf");
        CHECK(rewrite(src, path, cases[i].c));
        ps_model *m = NULL;
        ps_error e;
        ps_model_params mp = ps_model_default_params();
        ps_status st = ps_model_load(path, &mp, &m, &e);
        CHECKF(st == cases[i].code && strstr(e.message, cases[i].names),
               "bad case %d: status %d (want %d), message '%s' should name %s", (int)cases[i].c,
               (int)st, (int)cases[i].code, e.message, cases[i].names);
        ps_model_free(m);
    }
}

int main(void) {
    ps_test_out_dir("rope");
    test_setup_numbers();
    test_bad();
    bool numpy = access(FORWARD_PY, R_OK) == 0 &&
                 system(PYTHON " -c 'import numpy' 2>/dev/null") == 0;
    if (!numpy) SKIP("C vs numpy: " PYTHON " with numpy or " FORWARD_PY " is not available");
    test_reference(numpy);
    return ps_test_done("rope");
}
