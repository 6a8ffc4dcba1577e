/*
 * test_phi3.c — the phi3 family (Phi-3, Phi-4-mini): fused attn_qkv, fused gate + up, q scaled
 * before q k^T, LongRoPE, partial rotary, optional output bias.
 *
 * Reference: gen-model phi3-tiny fixtures (rope on 12 of 16 dims, LongRoPE from 256 to 1024)
 * x F32 / BF16 / Q8_0 / F16 (GQA 4/2 and MHA 4/4, tied and untied, with and without
 * output.bias; one with attn_q/k/v as separate tensors, which llama.cpp also loads; one loaded
 * with n_ctx 256 so that the short LongRoPE table is used) over 600 tokens (three chunks of
 * 256) with float32 activations against tests/reference/forward.py within 1e-4, on every ISA.
 * Invariance: chunks of 1, 7, 100, 256 and 1 vs 2 threads give bitwise identical logits, with
 * both activation modes.
 * Loading: the fused views equal separate tensors bit for bit (the same weights split into
 * attn_q/k/v give the same logits); the long table and the short one give different logits;
 * an attention.sliding_window key changes nothing (llama.cpp ignores it for phi3).
 * Bad input: attn_qkv or ffn_up of the wrong width, a missing ffn_up, an output.bias of the
 * wrong length — each an error naming the tensor.
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

typedef enum { E_NONE, E_SPLIT_QKV, E_QKV_WIDTH, E_UP_WIDTH, E_NO_UP, E_BIAS_LEN, E_SWA_KEY } edit;

/* Rewrites src into dst with one edit. E_SPLIT_QKV turns each attn_qkv into attn_q, attn_k,
 * attn_v (the same rows: q then k then v). */
static bool rewrite(const char *src, const char *dst, edit ed, int64_t q_rows, int64_t kv_rows) {
    ps_gguf *g = NULL;
    ps_error e;
    if (ps_gguf_open(src, &g, &e) != PS_OK) return false;
    ps_gguf_writer *w = ps_gguf_writer_new();
    ps_gguf_copy_kv(w, g, NULL);
    if (ed == E_SWA_KEY) ps_gguf_set_u32(w, "phi3.attention.sliding_window", 64);
    for (int64_t i = 0; i < ps_gguf_n_tensors(g); i++) {
        const ps_gguf_tensor *t = ps_gguf_tensor_at(g, i);
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.ptr);
        int64_t ne[4] = {t->ne[0], t->ne[1], t->ne[2], t->ne[3]};
        uint64_t nbytes = t->nbytes;
        const bool qkv = strstr(name, "attn_qkv.weight") != NULL,
                   up = strstr(name, "ffn_up.weight") != NULL;
        if (ed == E_SPLIT_QKV && qkv) {
            const size_t rb = (size_t)(t->nbytes / (uint64_t)t->ne[1]);
            const char *parts[3] = {"attn_q", "attn_k", "attn_v"};
            const int64_t rows[3] = {q_rows, kv_rows, kv_rows};
            int64_t r0 = 0;
            for (int k = 0; k < 3; k++) {
                char pn[128];
                snprintf(pn, sizeof pn, "%.*s%s.weight", (int)(strstr(name, "attn_qkv") - name),
                         name, parts[k]);
                int64_t pne[2] = {t->ne[0], rows[k]};
                ps_gguf_add_tensor(w, pn, t->type, 2, pne, (const uint8_t *)t->data + r0 * rb,
                                   (uint64_t)rows[k] * rb);
                r0 += rows[k];
            }
            continue;
        }
        if (ed == E_NO_UP && up && !strncmp(name, "blk.1.", 6)) continue;
        if ((ed == E_QKV_WIDTH && qkv && !strncmp(name, "blk.0.", 6)) ||
            (ed == E_UP_WIDTH && up && !strncmp(name, "blk.1.", 6))) {
            ne[1] = t->ne[1] / 2; /* half the rows */
            nbytes /= 2;
        }
        if (ed == E_BIAS_LEN && !strcmp(name, "output.bias")) {
            ne[0] = t->ne[0] - 1;
            nbytes -= 4;
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
    bool tied, bias, split;
    int32_t model_ctx;
} fx;

static void test_reference(bool numpy) {
    static const fx fxs[] = {
        {PS_GGML_F32, 2, false, true, false, 0},  {PS_GGML_BF16, 4, true, false, false, 0},
        {PS_GGML_Q8_0, 2, false, false, false, 0}, {PS_GGML_F16, 2, true, true, false, 256},
        {PS_GGML_F32, 4, false, false, true, 0},
    };
    static const ps_isa isas[] = {PS_ISA_SCALAR, PS_ISA_AVX2, PS_ISA_AVX512};
    for (size_t i = 0; i < PS_ARRAY_LEN(fxs); i++) {
        ps_genmodel_params p = ps_genmodel_default_params();
        ps_genmodel_preset("phi3-tiny", &p, NULL);
        p.type = fxs[i].type;
        p.n_head_kv = fxs[i].n_head_kv;
        p.tied = fxs[i].tied;
        p.output_bias = fxs[i].bias;
        p.seed = 500 + i;
        char tag[96];
        snprintf(tag, sizeof tag, "phi3-%s-kv%d%s%s%s%s", ps_ggml_type_name(fxs[i].type),
                 fxs[i].n_head_kv, fxs[i].tied ? "-tied" : "", fxs[i].bias ? "-bias" : "",
                 fxs[i].split ? "-split" : "", fxs[i].model_ctx ? "-short" : "");
        char path[700], fused[700];
        snprintf(path, sizeof path, "%s.gguf", outp(tag));
        snprintf(fused, sizeof fused, "%s.fused.gguf", outp(tag));
        ps_error e;
        ps_status st = ps_genmodel_write(&p, fxs[i].split ? fused : path, &e);
        CHECKF(st == PS_OK, "%s: %s", tag, e.message);
        if (st != PS_OK) continue;
        if (fxs[i].split)
            CHECK(rewrite(fused, path, E_SPLIT_QKV, (int64_t)p.n_head * p.head_dim,
                          (int64_t)p.n_head_kv * p.head_dim));
        int32_t *ids = make_ids(N_TOK, p.n_vocab, 0x3141592ull);
        int64_t nv = 0;
        const int32_t mctx = fxs[i].model_ctx;
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
        const size_t nf = (size_t)N_TOK * (size_t)nv;
        if (best && fxs[i].split) {
            /* the fused file's views give the same bits as separate tensors */
            float *cf = c_logits(fused, ids, N_TOK, 256, ps_isa_best(), PS_ACT_F32, 1, 0, &nv);
            CHECKF(cf && !memcmp(cf, best, nf * 4), "%s: fused attn_qkv differs from split",
                   tag);
            free(cf);
        }
        if (best && i == 0) {
            /* attention.sliding_window (Phi-3-mini's files say 2047) is ignored, as llama.cpp
             * ignores it for phi3: the same bits */
            char swa[700];
            snprintf(swa, sizeof swa, "%s.swa.gguf", outp(tag));
            CHECK(rewrite(path, swa, E_SWA_KEY, 0, 0));
            float *cs = c_logits(swa, ids, N_TOK, 256, ps_isa_best(), PS_ACT_F32, 1, 0, &nv);
            CHECKF(cs && !memcmp(cs, best, nf * 4), "%s: a sliding_window key changed the bits",
                   tag);
            free(cs);
        }
        if (best && mctx) {
            /* the long table (the file's context, 1024 > 256) gives other numbers */
            float *cl = c_logits(path, ids, N_TOK, 256, ps_isa_best(), PS_ACT_F32, 1, 0, &nv);
            double d = 0;
            for (size_t j = 0; cl && j < nf; j++) d = fmax(d, fabs((double)cl[j] - best[j]));
            CHECKF(d > 1e-3, "%s: long and short LongRoPE tables give the same logits", tag);
            free(cl);
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
    ps_genmodel_preset("phi3-tiny", &p, NULL);
    p.output_bias = true;
    char src[700];
    snprintf(src, sizeof src, "%s", outp("phi3-bad-src.gguf"));
    ps_error e;
    CHECKF(ps_genmodel_write(&p, src, &e) == PS_OK, "%s", e.message);
    struct {
        edit ed;
        ps_status code;
        const char *names;
    } cases[] = {
        {E_QKV_WIDTH, PS_ERR_FORMAT, "blk.0.attn_qkv.weight"},
        {E_UP_WIDTH, PS_ERR_FORMAT, "blk.1.ffn_up.weight"},
        {E_NO_UP, PS_ERR_NOT_FOUND, "blk.1.ffn_up.weight"},
        {E_BIAS_LEN, PS_ERR_FORMAT, "output.bias"},
    };
    for (size_t i = 0; i < PS_ARRAY_LEN(cases); i++) {
        const char *path = outp("phi3-bad.gguf");
        CHECK(rewrite(src, path, cases[i].ed, 0, 0));
        ps_model *m = NULL;
        ps_model_params mp = ps_model_default_params();
        ps_status st = ps_model_load(path, &mp, &m, &e);
        CHECKF(st == cases[i].code && strstr(e.message, cases[i].names),
               "bad case %d: status %d (want %d), message '%s' should name %s",
               (int)cases[i].ed, (int)st, (int)cases[i].code, e.message, cases[i].names);
        ps_model_free(m);
    }
    /* the source loads, and reports the family */
    ps_model *m = NULL;
    ps_model_params mp = ps_model_default_params();
    CHECKF(ps_model_load(src, &mp, &m, &e) == PS_OK, "%s", e.message);
    ps_model_info info;
    ps_model_get_info(m, &info);
    CHECKF(!strcmp(info.arch, "phi3") && info.n_ff == 128, "arch %s n_ff %d", info.arch,
           (int)info.n_ff);
    ps_model_free(m);
}

int main(void) {
    ps_test_out_dir("phi3");
    test_bad_input();
    bool numpy = access(FORWARD_PY, R_OK) == 0 &&
                 system(PYTHON " -c 'import numpy' 2>/dev/null") == 0;
    if (!numpy) SKIP("C vs numpy: " PYTHON " with numpy or " FORWARD_PY " is not available");
    test_reference(numpy);
    return ps_test_done("phi3");
}
