/*
 * test_olmo2.c — the olmo2 family (OLMo 2): no input norms, q/k RMSNorm over the whole
 * projection, the attention and FFN outputs RMS-normed before their residual adds.
 *
 * Reference: gen-model olmo2-tiny fixtures x F32 / BF16 / Q8_0 / F16 (GQA 4/2, 4/1 and MHA
 * 4/4, tied and untied) over 600 tokens (three chunks of 256) with float32 activations against
 * tests/reference/forward.py within 1e-4, on every ISA.
 * Invariance: chunks of 1, 7, 100, 256 and 1 vs 2 threads give bitwise identical logits, with
 * both activation modes.
 * Bad input: a missing post_ffw_norm or post_attention_norm, a per-head-sized q norm
 * (qwen3's shape), an attention.sliding_window key (OLMo 3's sliding layers are not run yet)
 * — each an error naming the tensor or key. Without the whole-row q/k norm (per head instead)
 * or without the output norms the reference comparison fails (checked by hand).
 * The numpy part is skipped (never passed) without /usr/bin/python3 and numpy.
 */
#include "check.h"
#include "fixture.h"
#include "refcmp.h"
#include "gen/genmodel.h"
#include "gguf/gguf.h"
#include "base/impl.h"
#include "promptscore.h"

#include <math.h>
#include <sys/stat.h>

#define N_TOK 600

typedef enum { E_NO_POST_FFW, E_QNORM_HEAD, E_NO_POST_ATTN, E_SWA_KEY } edit;

/* Rewrites src into dst with one edit. */
static bool rewrite(const char *src, const char *dst, edit ed, int64_t head_dim) {
    ps_gguf *g = NULL;
    ps_error e;
    if (ps_gguf_open(src, &g, &e) != PS_OK) return false;
    ps_gguf_writer *w = ps_gguf_writer_new();
    ps_gguf_copy_kv(w, g, NULL);
    if (ed == E_SWA_KEY) ps_gguf_set_u32(w, "olmo2.attention.sliding_window", 64);
    for (int64_t i = 0; i < ps_gguf_n_tensors(g); i++) {
        const ps_gguf_tensor *t = ps_gguf_tensor_at(g, i);
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.ptr);
        int64_t ne[4] = {t->ne[0], t->ne[1], t->ne[2], t->ne[3]};
        uint64_t nbytes = t->nbytes;
        if (ed == E_NO_POST_FFW && !strcmp(name, "blk.1.post_ffw_norm.weight")) continue;
        if (ed == E_NO_POST_ATTN && !strcmp(name, "blk.0.post_attention_norm.weight")) continue;
        if (ed == E_QNORM_HEAD && !strcmp(name, "blk.0.attn_q_norm.weight")) {
            ne[0] = head_dim;
            nbytes = (uint64_t)head_dim * 4;
        }
        ps_gguf_add_tensor(w, name, t->type, t->n_dims, ne, t->data, nbytes);
    }
    ps_status st = ps_gguf_write_file(w, dst, &e);
    ps_gguf_writer_free(w);
    ps_gguf_close(g);
    return st == PS_OK;
}

typedef struct {
    uint32_t type;
    int32_t n_head_kv;
    bool tied;
} fx;

static void test_reference(bool numpy) {
    static const fx fxs[] = {
        {PS_GGML_F32, 2, false}, {PS_GGML_BF16, 4, true}, {PS_GGML_Q8_0, 1, false},
        {PS_GGML_F16, 2, true},
    };
    static const ps_isa isas[] = {PS_ISA_SCALAR, PS_ISA_AVX2, PS_ISA_AVX512};
    for (size_t i = 0; i < PS_ARRAY_LEN(fxs); i++) {
        ps_genmodel_params p = ps_genmodel_default_params();
        ps_genmodel_preset("olmo2-tiny", &p, NULL);
        p.type = fxs[i].type;
        p.n_head_kv = fxs[i].n_head_kv;
        p.tied = fxs[i].tied;
        p.seed = 700 + i;
        char tag[96];
        snprintf(tag, sizeof tag, "olmo2-%s-kv%d%s", ps_ggml_type_name(fxs[i].type),
                 fxs[i].n_head_kv, fxs[i].tied ? "-tied" : "");
        char path[700];
        snprintf(path, sizeof path, "%s.gguf", outp(tag));
        ps_error e;
        ps_status st = ps_genmodel_write(&p, path, &e);
        CHECKF(st == PS_OK, "%s: %s", tag, e.message);
        if (st != PS_OK) continue;
        int32_t *ids = make_ids(N_TOK, p.n_vocab, 0x2718281ull);
        int64_t nv = 0;
        const int32_t mctx = 0;
        double *r = numpy ? ref_logits(path, ids, N_TOK, p.n_vocab, tag, mctx) : NULL;
        if (numpy) CHECKF(r != NULL, "%s: no reference logits", tag);
        float *best = NULL;
        for (size_t k = 0; k < PS_ARRAY_LEN(isas); k++) {
            if (!ps_isa_supported(isas[k])) continue;
            float *c = c_logits(path, ids, N_TOK, 256, isas[k], PS_ACT_F32, 1, mctx, &nv);
            if (!c) continue;
            if (r) ref_check(tag, 32, ps_isa_name(isas[k]), N_TOK, c, r, nv);
            free(best);
            best = c;
        }
        if (best) {
            fx_run run = fx_run_of(256, ps_isa_best(), PS_ACT_F32, 1);
            run.model_ctx = mctx;
            invariance_check(tag, path, ids, N_TOK, run, best, &nv, i == 0); /* chunk 1 once */
        }
        free(best);
        free(r);
        free(ids);
    }
}

static void test_bad_input(void) {
    ps_genmodel_params p = ps_genmodel_default_params();
    ps_genmodel_preset("olmo2-tiny", &p, NULL);
    char src[700];
    snprintf(src, sizeof src, "%s", outp("olmo2-bad-src.gguf"));
    ps_error e;
    CHECKF(ps_genmodel_write(&p, src, &e) == PS_OK, "%s", e.message);
    struct {
        edit ed;
        ps_status code;
        const char *names;
    } cases[] = {
        {E_NO_POST_FFW, PS_ERR_NOT_FOUND, "blk.1.post_ffw_norm.weight"},
        {E_QNORM_HEAD, PS_ERR_FORMAT, "blk.0.attn_q_norm.weight"},
        {E_NO_POST_ATTN, PS_ERR_NOT_FOUND, "blk.0.post_attention_norm.weight"},
        {E_SWA_KEY, PS_ERR_UNSUPPORTED, "olmo2.attention.sliding_window"},
    };
    for (size_t i = 0; i < PS_ARRAY_LEN(cases); i++) {
        const char *path = outp("olmo2-bad.gguf");
        CHECK(rewrite(src, path, cases[i].ed, p.head_dim));
        ps_model *m = NULL;
        ps_model_params mp = ps_model_default_params();
        ps_status st = ps_model_load(path, &mp, &m, &e);
        CHECKF(st == cases[i].code && strstr(e.message, cases[i].names),
               "bad case %d: status %d (want %d), message '%s' should name %s",
               (int)cases[i].ed, (int)st, (int)cases[i].code, e.message, cases[i].names);
        ps_model_free(m);
    }
    ps_model *m = NULL;
    ps_model_params mp = ps_model_default_params();
    CHECKF(ps_model_load(src, &mp, &m, &e) == PS_OK, "%s", e.message);
    ps_model_info info;
    ps_model_get_info(m, &info);
    CHECKF(!strcmp(info.arch, "olmo2") && info.n_layer == 2, "arch %s n_layer %d", info.arch,
           (int)info.n_layer);
    ps_model_free(m);
}

int main(void) {
    ps_test_out_dir("olmo2");
    test_bad_input();
    bool numpy = access(FORWARD_PY, R_OK) == 0 &&
                 system(PYTHON " -c 'import numpy' 2>/dev/null") == 0;
    if (!numpy) SKIP("C vs numpy: " PYTHON " with numpy or " FORWARD_PY " is not available");
    test_reference(numpy);
    return ps_test_done("olmo2");
}
