/*
 * test_model_kernels.c — the kernels against their references on the matrices of real models
 * (the validation `promptscore bench` ran before timing, moved here so the shipped command
 * only measures).
 *
 * For every model below, every ISA this CPU has (PS_ISA_AUTO too, which adds the AMX tiles
 * where usable) and both activation modes (native, f32):
 *   - ps_matmul on each kind of matrix the model has (taken from the first layer that has it:
 *     attention, fused QKV, DeltaNet, router, expert 0, shared expert, dense FFN) and on the
 *     output matrix, first 32 rows x 8 pseudo-random activation rows, within 1e-5 relative
 *     (|y - ref| / (|ref| + 1)) of ps_matmul_ref with the same activations;
 *   - the top-K kernel (k = 20) on one chunk of the model's own logits (up to 64 positions of
 *     a forward pass), bitwise equal to ps_topk_reference.
 * Models: stories260K from ../shared ($PS_SHARED; skipped when absent, a failure under
 * CI=true), and gen-model files in a temporary folder: llama BF16, Q8_0 and Q4_0, the qwen35
 * hybrid (DeltaNet layers) in Q8_0 and qwen35moe (experts + shared expert) in BF16.
 */
#include "check.h"
#include "gen/genmodel.h"
#include "run/session.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static uint64_t rng_next(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* ps_matmul vs ps_matmul_ref on the first rows of w; worst relative error, or -1 on NOMEM. */
static double check_matmul(const ps_session *s, const ps_mat *w0) {
    ps_mat w = *w0;
    w.n_out = PS_MIN(w.n_out, 32);
    const int64_t m = 8, k = w.n_in;
    float *x = ps_malloc(sizeof(float) * (size_t)(m * k));
    float *y = ps_malloc(sizeof(float) * (size_t)(m * w.n_out));
    float *yr = ps_malloc(sizeof(float) * (size_t)(m * w.n_out));
    double worst = -1;
    if (x && y && yr) {
        uint64_t r = 42;
        for (int64_t i = 0; i < m * k; i++)
            x[i] = (float)((double)(rng_next(&r) >> 11) / 9007199254740992.0 * 2.0 - 1.0);
        const ps_matmul_env env = {s->pool, s->isa, s->mm_scratch, s->mm_stride, s->f32_act,
                                   s->amx};
        ps_matmul(&env, &w, x, k, m, y, w.n_out);
        if (ps_matmul_ref(&w, env.f32_act, x, k, m, yr, w.n_out) == PS_OK) {
            worst = 0;
            for (int64_t i = 0; i < m * w.n_out; i++)
                worst = fmax(worst, fabs((double)y[i] - yr[i]) / (fabs((double)yr[i]) + 1.0));
        }
    }
    ps_free(x);
    ps_free(y);
    ps_free(yr);
    return worst;
}

/* Fast top-K vs the reference on n rows of logits: true when bitwise equal. */
static bool check_topk(ps_pool *pool, const float *logits, int32_t n, int32_t n_vocab,
                       const int32_t *targets, int32_t k) {
    ps_topk_params tp = ps_topk_default_params();
    tp.k = k;
    tp.pool = pool;
    ps_logits lg = {.data = logits, .dtype = PS_DTYPE_F32, .n_rows = n, .n_vocab = n_vocab,
                    .row_stride = n_vocab, .targets = targets};
    size_t nk = (size_t)n * (size_t)PS_MAX(k, 1);
    float *lp[2] = {ps_malloc(sizeof(float) * (size_t)n), ps_malloc(sizeof(float) * (size_t)n)};
    int32_t *ids[2] = {ps_malloc(sizeof(int32_t) * nk), ps_malloc(sizeof(int32_t) * nk)};
    float *tl[2] = {ps_malloc(sizeof(float) * nk), ps_malloc(sizeof(float) * nk)};
    bool ok = lp[0] && lp[1] && ids[0] && ids[1] && tl[0] && tl[1];
    if (ok) {
        ps_topk_out o0 = {NULL, lp[0], ids[0], tl[0], NULL, NULL, NULL}, o1 = {NULL, lp[1], ids[1], tl[1], NULL, NULL, NULL};
        ok = ps_topk_compute(&tp, &lg, &o0, NULL) == PS_OK &&
             ps_topk_reference(&tp, &lg, &o1, NULL) == PS_OK &&
             !memcmp(lp[0], lp[1], sizeof(float) * (size_t)n) &&
             (!k || (!memcmp(ids[0], ids[1], sizeof(int32_t) * nk) &&
                     !memcmp(tl[0], tl[1], sizeof(float) * nk)));
    }
    for (int i = 0; i < 2; i++) {
        ps_free(lp[i]);
        ps_free(ids[i]);
        ps_free(tl[i]);
    }
    return ok;
}

/* The matrices to check: each kind from the first layer that has it (a hybrid's layer 0 is a
 * DeltaNet layer; expert 0's matrices for a layer with experts), and the output. */
static int layer0_mats(const ps_model *m, ps_mat *mats, const char **names) {
    int n = 0;
#define M(get, nm)                                                                         \
    for (int32_t l = 0; l < m->hp.n_layer; l++) {                                          \
        const ps_layer *L = &m->w.layers[l];                                               \
        const ps_mat x = (get);                                                            \
        if (x.data) {                                                                      \
            mats[n] = x;                                                                   \
            names[n++] = (nm);                                                             \
            break;                                                                         \
        }                                                                                  \
    }
    M(L->wq, "attn_q")
    M(L->wk, "attn_k")
    M(L->wv, "attn_v")
    M(L->wo, "attn_output")
    M(L->wqkv, "attn_qkv")
    M(L->wz, "attn_gate")
    M(L->w_beta, "ssm_beta")
    M(L->w_alpha, "ssm_alpha")
    M(L->ssm_out, "ssm_out")
    M(L->gate_inp, "ffn_gate_inp")
    M(ps_mat3_at(&L->gate_exps, 0), "ffn_gate_exps[0]")
    M(ps_mat3_at(&L->up_exps, 0), "ffn_up_exps[0]")
    M(ps_mat3_at(&L->down_exps, 0), "ffn_down_exps[0]")
    M(L->w_gate, "ffn_gate")
    M(L->w_up, "ffn_up")
    M(L->w_down, "ffn_down")
    M(L->gate_shexp, "ffn_gate_shexp")
    M(L->up_shexp, "ffn_up_shexp")
    M(L->down_shexp, "ffn_down_shexp")
#undef M
    mats[n] = m->w.output;
    names[n++] = "output";
    return n;
}

/* Every check on one model file; returns the number of matrices checked per session. */
static int check_model(const char *path, const char *tag) {
    ps_model_params mp = ps_model_default_params();
    ps_model *model = NULL;
    ps_error e;
    ps_status st = ps_model_load(path, &mp, &model, &e);
    CHECKF(st == PS_OK, "%s: load: %s", tag, e.message);
    if (st != PS_OK) return 0;
    ps_mat mats[24];
    const char *names[24];
    const int n_mats = layer0_mats(model, mats, names);
    const int32_t n_vocab = model->hp.n_vocab, n_tok = 64;
    int32_t *tokens = malloc(sizeof(int32_t) * (size_t)n_tok);
    float *logits = malloc(sizeof(float) * (size_t)n_tok * (size_t)n_vocab);
    uint64_t r = 7;
    for (int32_t i = 0; i < n_tok; i++)
        tokens[i] = i == 0 && ps_vocab_bos(model->vocab) >= 0
                        ? ps_vocab_bos(model->vocab)
                        : (int32_t)(rng_next(&r) % (uint64_t)n_vocab);
    ps_pool *pool = NULL;
    CHECK(ps_pool_create(2, &pool) == PS_OK);
    static const ps_isa isas[] = {PS_ISA_SCALAR, PS_ISA_AVX2, PS_ISA_AVX512, PS_ISA_AUTO};
    for (size_t ii = 0; ii < PS_ARRAY_LEN(isas); ii++) {
        if (isas[ii] != PS_ISA_AUTO && !ps_isa_supported(isas[ii])) {
            PS_TEST_CPU_LACKS("%s: %s", tag, ps_isa_name(isas[ii]));
            continue;
        }
        for (int a = 0; a < 2; a++) {
            ps_session_params sp = ps_session_default_params();
            sp.n_ctx = n_tok;
            sp.pool = pool;
            sp.isa = isas[ii];
            sp.act = a ? PS_ACT_F32 : PS_ACT_NATIVE;
            ps_session *s = NULL;
            st = ps_session_create(model, &sp, &s, &e);
            CHECKF(st == PS_OK, "%s %s: session: %s", tag, ps_isa_name(isas[ii]), e.message);
            if (st != PS_OK) continue;
            for (int i = 0; i < n_mats; i++) {
                double err = check_matmul(s, &mats[i]);
                CHECKF(err >= 0 && err <= 1e-5,
                       "%s: matmul %s (%s) on %s%s, act %s: max relative error %g vs the "
                       "reference (-1: out of memory)",
                       tag, names[i], ps_ggml_type_name(mats[i].type), ps_isa_name(s->isa),
                       s->amx ? "+amx" : "", ps_act_name(sp.act), err);
            }
            st = ps_session_forward(s, tokens, n_tok, logits, &e);
            CHECKF(st == PS_OK, "%s: forward for the top-K check: %s", tag, e.message);
            if (st == PS_OK)
                CHECKF(check_topk(pool, logits, n_tok - 1, n_vocab, tokens + 1, 20),
                       "%s on %s, act %s: top-K differs from its reference (%d rows)", tag,
                       ps_isa_name(s->isa), ps_act_name(sp.act), n_tok - 1);
            ps_session_free(s);
        }
    }
    ps_pool_free(pool);
    free(tokens);
    free(logits);
    ps_model_free(model);
    return n_mats;
}

int main(void) {
    const char *shared = getenv("PS_SHARED") ? getenv("PS_SHARED") : "../shared";
    char path[600];
    snprintf(path, sizeof path, "%s/models/stories260K.gguf", shared);
    FILE *f = fopen(path, "rb");
    if (f) {
        fclose(f);
        CHECK(check_model(path, "stories260K") == 8); /* 7 layer kinds + output */
    } else {
        SKIP("shared test material not found at %s (set PS_SHARED)", shared);
    }

    char dir[] = "/tmp/ps-test-model-kernels-XXXXXX";
    if (!mkdtemp(dir)) {
        SKIP("no temporary folder");
        return ps_test_done("model_kernels");
    }
    static const struct {
        const char *preset;
        uint32_t type;
        int min_mats; /* kinds of matrix the preset has, at least */
    } fx[] = {
        {"tiny", PS_GGML_BF16, 8},          {"tiny", PS_GGML_Q8_0, 8},
        {"tiny", PS_GGML_Q4_0, 8},          {"qwen35-tiny", PS_GGML_Q8_0, 12},
        {"qwen35moe-tiny", PS_GGML_BF16, 14},
    };
    for (size_t i = 0; i < PS_ARRAY_LEN(fx); i++) {
        ps_genmodel_params p = ps_genmodel_default_params();
        ps_error e;
        CHECKF(ps_genmodel_preset(fx[i].preset, &p, &e) == PS_OK, "%s: %s", fx[i].preset,
               e.message);
        p.type = fx[i].type;
        p.seed = 100 + i;
        char tag[64], file[700];
        snprintf(tag, sizeof tag, "%s-%s", fx[i].preset, ps_ggml_type_name(fx[i].type));
        snprintf(file, sizeof file, "%s/%s.gguf", dir, tag);
        ps_status st = ps_genmodel_write(&p, file, &e);
        CHECKF(st == PS_OK, "%s: gen-model: %s", tag, e.message);
        if (st != PS_OK) continue;
        int n = check_model(file, tag);
        CHECKF(n >= fx[i].min_mats, "%s: %d kinds of matrix checked, expected >= %d", tag, n,
               fx[i].min_mats);
        remove(file);
    }
    rmdir(dir);
    return ps_test_done("model_kernels");
}
