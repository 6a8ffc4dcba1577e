/*
 * test_gptoss.c — gpt-oss (llama.cpp's openai-moe): attention with q/k/v/o biases and a learned
 * sink logit per head, sliding layers, experts with router and expert biases gated by a softmax
 * over the top k logits and the clamped SwiGLU; and the merged ffn_gate_up_exps layout that any
 * expert layer may use.
 *
 * Reference: gen-model gpt-oss-tiny fixtures (4 layers: the even ones slide over the last 40
 * positions, 4/2 heads of 32 over a 64-wide model, 8 experts of FFN 32, 4 used, gate / up
 * biases wide enough that the +-7 clamps act) x F32 / BF16 / Q8_0 and the mxfp4_moe mix (MXFP4
 * experts, Q8_0 elsewhere, as gpt-oss files ship), one with merged gate + up, over 600 tokens
 * (three chunks of 256 and 15 windows) with float32 activations against
 * tests/reference/forward.py within 1e-4, on every ISA the CPU has.
 * Invariance: chunks of 1, 7, 100 and 256 and 1 vs 2 threads give bitwise identical logits,
 * with float32 and native activations.
 * Merged experts: a gpt-oss and a qwen3moe file written with ffn_gate_up_exps give bitwise the
 * logits of the same weights written as ffn_gate_exps + ffn_up_exps.
 * Routing is real: most experts get rows; the sinks matter (zeroing them moves the logits).
 * The window: layers 0 and 2 slide over 40 positions, 1 and 3 are global; the first 40
 * positions are bitwise those of a 1000-wide window and later ones differ; the window key is
 * required.
 * Bad input: a missing sink, router bias or expert bias, an expert bias of the wrong shape, a
 * merged tensor of the wrong width — each an error naming the tensor.
 * The numpy part is skipped (never passed) without /usr/bin/python3 and numpy.
 */
#include "check.h"
#include "fixture.h"
#include "refcmp.h"
#include "gen/genmodel.h"
#include "gguf/gguf.h"
#include "base/impl.h"
#include "run/session.h"
#include "promptscore.h"

#include <math.h>
#include <sys/stat.h>

#define N_TOK 600

static ps_genmodel_params fixture(const char *preset, uint32_t type, const char *mix,
                                  bool merged, uint64_t seed) {
    ps_genmodel_params p = ps_genmodel_default_params();
    ps_genmodel_preset(preset, &p, NULL);
    p.type = type;
    if (mix) snprintf(p.mix, sizeof p.mix, "%s", mix);
    p.merged_gate_up = merged;
    p.seed = seed;
    p.n_ctx = 1024;
    return p;
}

static size_t n_differ(const float *a, const float *b, size_t n) {
    size_t d = 0;
    for (size_t i = 0; i < n; i++) d += memcmp(a + i, b + i, 4) != 0;
    return d;
}

typedef struct {
    uint32_t type;
    const char *mix;
    bool merged;
} fx;

static void test_reference(bool numpy) {
    static const fx fxs[] = {
        {PS_GGML_F32, NULL, false},  {PS_GGML_BF16, NULL, false},
        {PS_GGML_Q8_0, NULL, false}, {PS_GGML_Q8_0, "mxfp4_moe", false},
        {PS_GGML_F32, NULL, true},
    };
    static const ps_isa isas[] = {PS_ISA_SCALAR, PS_ISA_AVX2, PS_ISA_AVX512};
    for (size_t i = 0; i < PS_ARRAY_LEN(fxs); i++) {
        ps_genmodel_params p = fixture("gpt-oss-tiny", fxs[i].type, fxs[i].mix, fxs[i].merged,
                                       500 + i);
        char tag[64];
        snprintf(tag, sizeof tag, "gpt-oss-%s%s", fxs[i].mix ? fxs[i].mix
                                                           : ps_ggml_type_name(fxs[i].type),
                 fxs[i].merged ? "-merged" : "");
        char path[700];
        snprintf(path, sizeof path, "%s.gguf", outp(tag));
        ps_error e;
        ps_status st = ps_genmodel_write(&p, path, &e);
        CHECKF(st == PS_OK, "%s: %s", tag, e.message);
        if (st != PS_OK) continue;
        int32_t *ids = make_ids(N_TOK, p.n_vocab, 0x7654321ull);
        int64_t nv = 0;
        double *r = numpy ? ref_logits_args(path, ids, N_TOK, p.n_vocab, tag, "", true) : NULL;
        if (numpy) CHECKF(r != NULL, "%s: no reference logits", tag);
        float *best = NULL;
        int32_t active = 0;
        for (size_t k = 0; k < PS_ARRAY_LEN(isas); k++) {
            if (!ps_isa_supported(isas[k])) {
                PS_TEST_CPU_LACKS("%s", ps_isa_name(isas[k]));
                continue;
            }
            fx_run run = fx_run_of(256, isas[k], PS_ACT_F32, 1);
            float *c = c_logits_run(path, ids, N_TOK, &run, &nv);
            active = run.active;
            if (!c) continue;
            if (r) ref_check(tag, 24, ps_isa_name(isas[k]), N_TOK, c, r, nv);
            free(best);
            best = c;
        }
        CHECKF(active >= p.n_expert / 2, "%s: only %d of %d experts active", tag, active,
               p.n_expert);
        if (best) /* chunk 1 once: slow */
            invariance_check(tag, path, ids, N_TOK, fx_run_of(256, ps_isa_best(), PS_ACT_F32, 1),
                             best, &nv, i == 0);
        free(best);
        free(r);
        free(ids);
        remove(path);
    }
}

/* ---------------------------------------------------------------- merged gate + up */

/* The same weights as separate gate / up tensors and merged: bitwise the same logits. */
static void test_merged(void) {
    static const struct {
        const char *preset;
        uint32_t type;
    } cases[] = {{"gpt-oss-tiny", PS_GGML_F32}, {"gpt-oss-tiny", PS_GGML_Q8_0},
                 {"qwen3moe-tiny", PS_GGML_BF16}, {"qwen3moe-tiny", PS_GGML_Q8_0},
                 {"qwen35moe-tiny", PS_GGML_F32}};
    for (size_t c = 0; c < PS_ARRAY_LEN(cases); c++) {
        char split[700], merged[700];
        snprintf(split, sizeof split, "%s", outp("split.gguf"));
        snprintf(merged, sizeof merged, "%s", outp("merged.gguf"));
        ps_genmodel_params p = fixture(cases[c].preset, cases[c].type, NULL, false, 77 + c);
        ps_error e;
        CHECKF(ps_genmodel_write(&p, split, &e) == PS_OK, "%s", e.message);
        /* the merged file: the split one's tensors, gate and up of each expert stacked */
        ps_gguf *g = NULL;
        if (ps_gguf_open(split, &g, &e) != PS_OK) {
            CHECKF(0, "%s", e.message);
            continue;
        }
        ps_gguf_writer *w = ps_gguf_writer_new();
        ps_gguf_copy_kv(w, g, NULL);
        void *bufs[64] = {0};
        int nb = 0;
        for (int64_t i = 0; i < ps_gguf_n_tensors(g); i++) {
            const ps_gguf_tensor *t = ps_gguf_tensor_at(g, i);
            char tn[128];
            snprintf(tn, sizeof tn, "%.*s", (int)t->name.len, t->name.ptr);
            char *at = strstr(tn, "ffn_up_exps.weight");
            if (at) continue;
            at = strstr(tn, "ffn_gate_exps.weight");
            if (!at) {
                ps_gguf_add_tensor(w, tn, t->type, t->n_dims, t->ne, t->data, t->nbytes);
                continue;
            }
            char un[128];
            snprintf(un, sizeof un, "%.*sffn_up_exps.weight", (int)(at - tn), tn);
            const ps_gguf_tensor *u = ps_gguf_find_tensor(g, un);
            CHECK(u && u->nbytes == t->nbytes);
            if (!u || nb == 64) continue;
            const size_t per = (size_t)t->nbytes / (size_t)t->ne[2];
            uint8_t *b = malloc(2 * (size_t)t->nbytes);
            for (int64_t x = 0; x < t->ne[2]; x++) {
                memcpy(b + 2 * per * (size_t)x, (const uint8_t *)t->data + per * (size_t)x, per);
                memcpy(b + 2 * per * (size_t)x + per, (const uint8_t *)u->data + per * (size_t)x,
                       per);
            }
            bufs[nb++] = b;
            char mn[128];
            snprintf(mn, sizeof mn, "%.*sffn_gate_up_exps.weight", (int)(at - tn), tn);
            int64_t ne[4] = {t->ne[0], 2 * t->ne[1], t->ne[2], 1};
            ps_gguf_add_tensor(w, mn, t->type, 3, ne, b, 2 * t->nbytes);
        }
        CHECK(ps_gguf_write_file(w, merged, &e) == PS_OK);
        ps_gguf_writer_free(w);
        for (int i = 0; i < nb; i++) free(bufs[i]);
        ps_gguf_close(g);
        /* gen-model's own merged layout is the same bytes */
        if (c == 0) {
            char gm[700];
            snprintf(gm, sizeof gm, "%s", outp("genmerged.gguf"));
            ps_genmodel_params pm = p;
            pm.merged_gate_up = true;
            CHECK(ps_genmodel_write(&pm, gm, &e) == PS_OK);
            ps_gguf *a = NULL, *b = NULL;
            if (ps_gguf_open(gm, &a, &e) == PS_OK && ps_gguf_open(merged, &b, &e) == PS_OK) {
                const ps_gguf_tensor *ta = ps_gguf_find_tensor(a, "blk.1.ffn_gate_up_exps.weight"),
                                     *tb = ps_gguf_find_tensor(b, "blk.1.ffn_gate_up_exps.weight");
                CHECK(ta && tb && ta->nbytes == tb->nbytes && ta->ne[1] == 2 * p.n_ff_exp &&
                      !memcmp(ta->data, tb->data, (size_t)ta->nbytes));
                CHECK(!ps_gguf_find_tensor(a, "blk.1.ffn_gate_exps.weight"));
            }
            ps_gguf_close(a);
            ps_gguf_close(b);
            remove(gm);
        }
        int32_t *ids = make_ids(300, p.n_vocab, 0x7654321ull);
        int64_t nv = 0;
        for (int a = 0; a < 2; a++) {
            const ps_act act = a ? PS_ACT_F32 : PS_ACT_NATIVE;
            float *ls = c_logits(split, ids, 300, 256, ps_isa_best(), act, 1, 0, &nv);
            float *lm = c_logits(merged, ids, 300, 100, ps_isa_best(), act, 2, 0, &nv);
            CHECKF(ls && lm && !n_differ(ls, lm, (size_t)300 * nv),
                   "%s %s %s: merged gate_up differs from split", cases[c].preset,
                   ps_ggml_type_name(cases[c].type), ps_act_name(act));
            free(ls);
            free(lm);
        }
        printf("  %s %s: merged ffn_gate_up_exps == split gate / up, bitwise (native, f32)\n",
               cases[c].preset, ps_ggml_type_name(cases[c].type));
        free(ids);
        remove(split);
        remove(merged);
    }
}

/* ---------------------------------------------------------------- the window */

/* Rewrites src with attention.sliding_window = w (0: the key dropped). */
static const char *with_window(const char *src, uint32_t w, const char *name) {
    ps_gguf *g = NULL;
    ps_error e;
    if (ps_gguf_open(src, &g, &e) != PS_OK) return NULL;
    ps_gguf_writer *wr = ps_gguf_writer_new();
    for (int64_t i = 0; i < ps_gguf_n_kv(g); i++) {
        ps_gguf_str k = ps_gguf_key(g, i);
        char key[256];
        snprintf(key, sizeof key, "%.*s", (int)k.len, k.ptr);
        if (strcmp(key, "gpt-oss.attention.sliding_window")) ps_gguf_copy_kv(wr, g, key);
    }
    if (w) ps_gguf_set_u32(wr, "gpt-oss.attention.sliding_window", w);
    for (int64_t i = 0; i < ps_gguf_n_tensors(g); i++) {
        const ps_gguf_tensor *t = ps_gguf_tensor_at(g, i);
        char tn[128];
        snprintf(tn, sizeof tn, "%.*s", (int)t->name.len, t->name.ptr);
        ps_gguf_add_tensor(wr, tn, t->type, t->n_dims, t->ne, t->data, t->nbytes);
    }
    const char *path = outp(name);
    ps_status st = ps_gguf_write_file(wr, path, &e);
    ps_gguf_writer_free(wr);
    ps_gguf_close(g);
    return st == PS_OK ? path : NULL;
}

/* Even layers slide over the file's window (llama.cpp's default pattern 2), odd ones are
 * global; positions before the window's end see the same keys either way (bitwise the logits
 * of a wider window), later ones do not; the key is required, as llama.cpp requires it. */
static void test_window(void) {
    char src[700], wide[700];
    snprintf(src, sizeof src, "%s", outp("win.gguf"));
    ps_genmodel_params p = fixture("gpt-oss-tiny", PS_GGML_F32, NULL, false, 21);
    ps_error e;
    CHECKF(ps_genmodel_write(&p, src, &e) == PS_OK, "%s", e.message);
    ps_model *m = NULL;
    ps_model_params mp = ps_model_default_params();
    if (ps_model_load(src, &mp, &m, &e) == PS_OK) {
        CHECKF(m->hp.n_swa == 40 && m->w.layers[0].swa == 40 && m->w.layers[1].swa == 0 &&
                   m->w.layers[2].swa == 40 && m->w.layers[3].swa == 0,
               "layer windows %d %d %d %d", m->w.layers[0].swa, m->w.layers[1].swa,
               m->w.layers[2].swa, m->w.layers[3].swa);
        ps_model_free(m);
    } else {
        CHECKF(0, "%s", e.message);
    }
    const char *wp = with_window(src, 1000, "win-wide.gguf");
    snprintf(wide, sizeof wide, "%s", wp ? wp : "");
    enum { N = 120 };
    int32_t *ids = make_ids(N, p.n_vocab, 0x7654321ull);
    int64_t nv = 0;
    float *a = c_logits(src, ids, N, 256, ps_isa_best(), PS_ACT_F32, 1, 0, &nv);
    float *b = wp ? c_logits(wide, ids, N, 256, ps_isa_best(), PS_ACT_F32, 1, 0, &nv) : NULL;
    CHECKF(a && b && !n_differ(a, b, (size_t)40 * nv),
           "positions 0..39: window 40 differs from window 1000");
    CHECKF(a && b && n_differ(a + (size_t)40 * nv, b + (size_t)40 * nv, (size_t)(N - 40) * nv) > 0,
           "positions 40..: the window changes nothing");
    free(a);
    free(b);
    free(ids);
    const char *np = with_window(src, 0, "win-none.gguf");
    m = NULL;
    ps_status st = np ? ps_model_load(np, &mp, &m, &e) : PS_ERR_IO;
    CHECKF(st == PS_ERR_NOT_FOUND && strstr(e.message, "gpt-oss.attention.sliding_window"),
           "no window key: %d %s", (int)st, e.message);
    ps_model_free(m);
    remove(src);
    remove(wide);
    if (np) remove(np);
}

/* ---------------------------------------------------------------- bad input */

typedef struct {
    const char *tensor; /* the tensor with the defect */
    int how;            /* 1 = dropped, 2 = ne[0] - 1 (shorter), 3 = zeroed (sinks) */
    ps_status code;
    const char *needle;
} defect;

static const char *rewrite(const char *src, const defect *d, const char *name) {
    ps_gguf *g = NULL;
    ps_error e;
    if (ps_gguf_open(src, &g, &e) != PS_OK) return NULL;
    ps_gguf_writer *w = ps_gguf_writer_new();
    ps_gguf_copy_kv(w, g, NULL);
    void *zero = NULL;
    for (int64_t i = 0; i < ps_gguf_n_tensors(g); i++) {
        const ps_gguf_tensor *t = ps_gguf_tensor_at(g, i);
        char tn[128];
        snprintf(tn, sizeof tn, "%.*s", (int)t->name.len, t->name.ptr);
        int64_t ne[4] = {t->ne[0], t->ne[1], t->ne[2], t->ne[3]};
        uint64_t nbytes = t->nbytes;
        const void *data = t->data;
        if (!strcmp(tn, d->tensor)) {
            if (d->how == 1) continue;
            if (d->how == 2) {
                ne[0] -= 1;
                nbytes = nbytes / (uint64_t)t->ne[0] * (uint64_t)ne[0];
            }
            if (d->how == 3) data = zero = calloc(1, (size_t)nbytes);
        }
        ps_gguf_add_tensor(w, tn, t->type, t->n_dims, ne, data, nbytes);
    }
    const char *path = outp(name);
    ps_status st = ps_gguf_write_file(w, path, &e);
    ps_gguf_writer_free(w);
    ps_gguf_close(g);
    free(zero);
    return st == PS_OK ? path : NULL;
}

static void test_bad_input(void) {
    char src[700], msrc[700];
    snprintf(src, sizeof src, "%s", outp("bad-src.gguf"));
    snprintf(msrc, sizeof msrc, "%s", outp("bad-msrc.gguf"));
    ps_genmodel_params p = fixture("gpt-oss-tiny", PS_GGML_F32, NULL, false, 9);
    ps_error e;
    CHECKF(ps_genmodel_write(&p, src, &e) == PS_OK, "%s", e.message);
    p.merged_gate_up = true;
    CHECKF(ps_genmodel_write(&p, msrc, &e) == PS_OK, "%s", e.message);
    static const defect cases[] = {
        {"blk.1.attn_sinks.weight", 1, PS_ERR_NOT_FOUND, "blk.1.attn_sinks.weight"},
        {"blk.0.attn_sinks.weight", 2, PS_ERR_FORMAT, "blk.0.attn_sinks.weight"},
        {"blk.2.ffn_gate_inp.bias", 1, PS_ERR_NOT_FOUND, "blk.2.ffn_gate_inp.bias"},
        {"blk.0.ffn_gate_exps.bias", 1, PS_ERR_NOT_FOUND, "blk.0.ffn_gate_exps.bias"},
        {"blk.3.ffn_up_exps.bias", 2, PS_ERR_FORMAT, "blk.3.ffn_up_exps.bias"},
        {"blk.1.ffn_down_exps.bias", 2, PS_ERR_FORMAT, "blk.1.ffn_down_exps.bias"},
        {"blk.0.ffn_up_exps.weight", 1, PS_ERR_NOT_FOUND, "blk.0.ffn_up_exps.weight"},
        {"blk.0.post_attention_norm.weight", 1, PS_ERR_NOT_FOUND, "post_attention_norm"},
    };
    for (size_t i = 0; i < PS_ARRAY_LEN(cases); i++) {
        const char *vp = rewrite(src, &cases[i], "bad.gguf");
        CHECKF(vp != NULL, "case %zu not written", i);
        if (!vp) continue;
        ps_model *m = NULL;
        ps_model_params mp = ps_model_default_params();
        memset(&e, 0, sizeof e);
        ps_status st = ps_model_load(vp, &mp, &m, &e);
        CHECKF(st == cases[i].code && !m && strstr(e.message, cases[i].needle),
               "case %zu: status %d (%s), message '%s', want %d naming '%s'", i, (int)st,
               ps_status_str(st), e.message, (int)cases[i].code, cases[i].needle);
        ps_model_free(m);
    }
    /* a merged tensor one row short of 2 n_ff_exp (ne[1]) cannot load */
    {
        ps_gguf *g = NULL;
        CHECK(ps_gguf_open(msrc, &g, &e) == PS_OK);
        ps_gguf_writer *w = ps_gguf_writer_new();
        ps_gguf_copy_kv(w, g, NULL);
        for (int64_t i = 0; g && i < ps_gguf_n_tensors(g); i++) {
            const ps_gguf_tensor *t = ps_gguf_tensor_at(g, i);
            char tn[128];
            snprintf(tn, sizeof tn, "%.*s", (int)t->name.len, t->name.ptr);
            int64_t ne[4] = {t->ne[0], t->ne[1], t->ne[2], t->ne[3]};
            if (!strcmp(tn, "blk.2.ffn_gate_up_exps.weight")) ne[1] -= 2;
            ps_gguf_add_tensor(w, tn, t->type, t->n_dims, ne, t->data,
                               t->nbytes / (uint64_t)t->ne[1] * (uint64_t)ne[1]);
        }
        const char *vp = outp("bad-merged.gguf");
        CHECK(ps_gguf_write_file(w, vp, &e) == PS_OK);
        ps_gguf_writer_free(w);
        ps_gguf_close(g);
        ps_model *m = NULL;
        ps_model_params mp = ps_model_default_params();
        ps_status st = ps_model_load(vp, &mp, &m, &e);
        CHECKF(st == PS_ERR_FORMAT && strstr(e.message, "blk.2.ffn_gate_up_exps.weight"),
               "short merged tensor: %d %s", (int)st, e.message);
        ps_model_free(m);
        remove(vp);
    }
    /* the sinks take part: zeroing one layer's moves the logits */
    const defect zs = {"blk.1.attn_sinks.weight", 3, PS_OK, ""};
    char zpath[700];
    const char *zp = rewrite(src, &zs, "zero-sinks.gguf");
    snprintf(zpath, sizeof zpath, "%s", zp ? zp : "");
    int32_t *ids = make_ids(64, p.n_vocab, 0x7654321ull);
    int64_t nv = 0;
    float *a = c_logits(src, ids, 64, 64, ps_isa_best(), PS_ACT_F32, 1, 0, &nv);
    float *b = zp ? c_logits(zpath, ids, 64, 64, ps_isa_best(), PS_ACT_F32, 1, 0, &nv) : NULL;
    CHECKF(a && b && n_differ(a, b, (size_t)64 * nv) > 0, "zeroed sinks change nothing");
    free(a);
    free(b);
    free(ids);
    remove(zpath);
    remove(outp("bad.gguf"));
    remove(src);
    remove(msrc);
}

int main(void) {
    ps_test_out_dir("gptoss");
    test_bad_input();
    test_window();
    test_merged();
    bool numpy = access(FORWARD_PY, R_OK) == 0 &&
                 system(PYTHON " -c 'import numpy' 2>/dev/null") == 0;
    if (!numpy) SKIP("C vs numpy: " PYTHON " with numpy or " FORWARD_PY " is not available");
    test_reference(numpy);
    if (strcmp(out_dir, ".")) rmdir(out_dir); /* its files are removed: an empty folder */
    return ps_test_done("gptoss");
}
