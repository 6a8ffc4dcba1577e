/*
 * test_gemma.c — the Gemma families (gemma, gemma2, gemma3 text) as llama.cpp defines them.
 *
 * Reference: gen-model gemma2-tiny (sliding / global layers, window 40, GeGLU, post-norms,
 * attention and final soft-capping, embeddings x sqrt(n_embd)) and gemma3-tiny (5 sliding : 1
 * global over 7 layers, q/k head norms, rope 1e6 global / 10000 local) fixtures x F32 / BF16 /
 * Q8_0, plus variants (gemma2 with llama.cpp's default soft-caps 50 / 30; gemma3 with a final
 * soft-cap, a linear rope factor on the global layers, a pattern of 3 from the key, no window
 * key = all global), and gemma (1) (the gemma2 shape without post-norms, windows or caps),
 * over 600 tokens (more than two chunks of 256 and 15 windows) with float32
 * activations against tests/reference/forward.py within 1e-4, every ISA.
 * Invariance: chunks of 1, 7, 100 and 256 and 2 threads give bitwise identical logits.
 * Layers: which layers slide, their window and the hyperparameters read from the keys.
 * Memory: a gemma3-tiny session of 600 positions holds the sliding layers' K/V in rings of
 * 40 + 255 positions.
 * Tokenizer: Gemma's files are SentencePiece with add_space_prefix = false; on ../shared's
 * llama-spm vocabulary with that flag, " text" tokenises as "text" does with the prefix.
 * Bad input: a per-layer pattern array, a negative soft-cap, and gemma3n / gemma4 /
 * gemma-embedding files (refused, naming what they would need) — each a clear error.
 * Faults: every allocation failure over load + session + forward of a gemma3 model with rings
 * is a clean PS_ERR_NOMEM.
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
#include "model/vocab.h"

#include <math.h>

#define N_TOK 600

static const ps_isa ISAS[] = {PS_ISA_SCALAR, PS_ISA_AVX2, PS_ISA_AVX512};

typedef struct {
    const char *preset, *what;
    uint32_t type;
    float attn_softcap, final_softcap, rope_scale; /* < 0: the preset's */
    int32_t n_swa, swa_period;                     /* < 0: the preset's */
    bool invariance;
    const char *arch;                              /* NULL: the preset's */
} fx;

static ps_genmodel_params fixture(const fx *f, uint64_t seed) {
    ps_genmodel_params p = ps_genmodel_default_params();
    ps_genmodel_preset(f->preset, &p, NULL);
    p.type = f->type;
    p.seed = seed;
    if (f->attn_softcap >= 0) p.attn_softcap = f->attn_softcap;
    if (f->final_softcap >= 0) p.final_softcap = f->final_softcap;
    if (f->rope_scale >= 0) p.rope_scale_linear = f->rope_scale;
    if (f->n_swa >= 0) p.n_swa = f->n_swa;
    if (f->swa_period >= 0) p.swa_period = f->swa_period;
    if (f->arch) snprintf(p.arch, sizeof p.arch, "%s", f->arch);
    return p;
}

static void test_reference(bool numpy) {
    static const fx fxs[] = {
        /* small soft-caps, so that tanh bends the logits (the preset has llama.cpp's 50 / 30) */
        {"gemma2-tiny", "caps-1.5-2", PS_GGML_F32, 1.5f, 2.0f, -1, -1, -1, true, NULL},
        {"gemma2-tiny", "caps-1.5-2", PS_GGML_BF16, 1.5f, 2.0f, -1, -1, -1, true, NULL},
        {"gemma2-tiny", "caps-1.5-2", PS_GGML_Q8_0, 1.5f, 2.0f, -1, -1, -1, true, NULL},
        {"gemma2-tiny", "caps-50-30", PS_GGML_F32, -1, -1, -1, -1, -1, false, NULL},
        {"gemma3-tiny", "", PS_GGML_F32, -1, -1, -1, -1, -1, true, NULL},
        {"gemma3-tiny", "", PS_GGML_BF16, -1, -1, -1, -1, -1, true, NULL},
        {"gemma3-tiny", "", PS_GGML_Q8_0, -1, -1, -1, -1, -1, true, NULL},
        {"gemma3-tiny", "final-cap-2-rope-x8", PS_GGML_F32, -1, 2.0f, 8.0f, -1, -1, false, NULL},
        {"gemma3-tiny", "period-3", PS_GGML_BF16, -1, -1, -1, -1, 3, false, NULL},
        {"gemma3-tiny", "no-window", PS_GGML_F32, -1, -1, -1, 0, -1, false, NULL},
        /* gemma (1): the gemma2 shape without post-norms, windows or caps */
        {"gemma2-tiny", "gemma1", PS_GGML_F32, 0, 0, -1, 0, -1, true, "gemma"},
        {"gemma2-tiny", "gemma1", PS_GGML_Q8_0, 0, 0, -1, 0, -1, false, "gemma"},
        /* a gemma (1) file carrying final_logit_softcapping: llama.cpp's gemma graph has no
         * soft-cap, so the key changes nothing */
        {"gemma2-tiny", "gemma1-cap-key", PS_GGML_F32, 0, 2.0f, -1, 0, -1, false, "gemma"},
    };
    for (size_t i = 0; i < PS_ARRAY_LEN(fxs); i++) {
        ps_genmodel_params p = fixture(&fxs[i], 700 + i);
        char tag[96];
        snprintf(tag, sizeof tag, "%s-%s%s%s", fxs[i].preset, ps_ggml_type_name(fxs[i].type),
                 fxs[i].what[0] ? "-" : "", fxs[i].what);
        char path[700];
        snprintf(path, sizeof path, "%s.gguf", outp(tag));
        ps_error e;
        ps_status st = ps_genmodel_write(&p, path, &e);
        CHECKF(st == PS_OK, "%s: %s", tag, e.message);
        if (st != PS_OK) continue;
        int32_t *ids = make_ids_bos(N_TOK, p.n_vocab, 0x1234567ull, 2);
        int64_t nv = 0;
        double *r = numpy ? ref_logits_args(path, ids, N_TOK, p.n_vocab, tag, "", false) : NULL;
        if (numpy) CHECKF(r != NULL, "%s: no reference logits", tag);
        float *best = NULL;
        for (size_t k = 0; k < PS_ARRAY_LEN(ISAS); k++) {
            if (!ps_isa_supported(ISAS[k])) continue;
            float *c = c_logits(path, ids, N_TOK, 256, ISAS[k], PS_ACT_F32, 1, 0, &nv);
            if (!c) continue;
            if (r) {
                double mr = ref_check(tag, 36, ps_isa_name(ISAS[k]), N_TOK, c, r, nv);
                if (p.final_softcap > 0.0f && strcmp(p.arch, "gemma") != 0)
                    CHECKF(mr <= p.final_softcap, "%s: |logit| %g above the cap %g", tag, mr,
                           (double)p.final_softcap);
            }
            free(best);
            best = c;
        }
        if (best && fxs[i].invariance) {
            const size_t nf = (size_t)N_TOK * (size_t)nv;
            float *c2 = c_logits(path, ids, N_TOK, 256, ps_isa_best(), PS_ACT_F32, 2, 0, &nv);
            CHECKF(c2 && !memcmp(c2, best, nf * 4), "%s: 2 threads differ from 1", tag);
            free(c2);
            const int32_t chunks[3] = {1, 7, 100};
            for (int j = 0; j < 3; j++) {
                if (chunks[j] == 1 && fxs[i].type != PS_GGML_F32) continue; /* slow */
                float *cc = c_logits(path, ids, N_TOK, chunks[j], ps_isa_best(), PS_ACT_F32,
                                     j == 1 ? 2 : 1, 0, &nv);
                CHECKF(cc && !memcmp(cc, best, nf * 4), "%s: chunk %d differs from 256", tag,
                       chunks[j]);
                free(cc);
            }
        }
        free(best);
        free(r);
        free(ids);
    }
}

/* ---------------------------------------------------------------- layers and keys */

static void test_layers(void) {
    ps_error e;
    ps_genmodel_params p = ps_genmodel_default_params();
    ps_genmodel_preset("gemma3-tiny", &p, NULL);
    const char *path = outp("layers-gemma3.gguf");
    CHECK(ps_genmodel_write(&p, path, &e) == PS_OK);
    ps_model *m = NULL;
    ps_model_params mp = ps_model_default_params();
    if (ps_model_load(path, &mp, &m, &e) != PS_OK) {
        CHECKF(0, "load: %s", e.message);
        return;
    }
    /* 7 layers, period 6: 0..4 slide, 5 is global, 6 slides */
    for (int32_t l = 0; l < 7; l++)
        CHECKF(m->w.layers[l].swa == (l == 5 ? 0 : 40), "gemma3 layer %d: swa %d", l,
               m->w.layers[l].swa);
    CHECK(m->hp.rope_base_swa == 10000.0f && m->hp.rope_base == 1000000.0f);
    CHECK(m->hp.rope_freq_scale_swa == 1.0f && m->hp.attn_softcap == 0.0f &&
          m->hp.final_softcap == 0.0f);
    CHECK(m->hp.embd_scale == sqrtf(64.0f) && m->hp.attn_scale == 1.0f / sqrtf(16.0f));
    /* memory: 6 sliding layers in rings of 40 + 255 positions (K rounded to 16), 1 global */
    ps_session_params sp = ps_session_default_params();
    sp.n_ctx = N_TOK;
    ps_session *s = NULL;
    if (ps_session_create(m, &sp, &s, &e) == PS_OK) {
        const int64_t dkv = 16;
        CHECKF(s->seq->kv_elems == dkv * (608 + 600) + 6 * dkv * (304 + 295),
               "gemma3-tiny KV floats %lld", (long long)s->seq->kv_elems);
        ps_session_free(s);
    } else {
        CHECKF(0, "session: %s", e.message);
    }
    ps_model_free(m);

    ps_genmodel_preset("gemma2-tiny", &p, NULL);
    path = outp("layers-gemma2.gguf");
    CHECK(ps_genmodel_write(&p, path, &e) == PS_OK);
    if (ps_model_load(path, &mp, &m, &e) != PS_OK) {
        CHECKF(0, "load: %s", e.message);
        return;
    }
    for (int32_t l = 0; l < 4; l++)
        CHECKF(m->w.layers[l].swa == (l % 2 ? 0 : 40), "gemma2 layer %d: swa %d", l,
               m->w.layers[l].swa);
    CHECK(m->hp.attn_softcap == 50.0f && m->hp.final_softcap == 30.0f);
    CHECK(m->hp.rope_base_swa == m->hp.rope_base);
    CHECK(m->w.output.data == m->w.token_embd.data);
    ps_model_free(m);
}

/* The gemma2-tiny F32 file with key `key` set to one defect; the load's status. */
static ps_status load_with(const char *key, int how, ps_error *e) {
    ps_genmodel_params p = ps_genmodel_default_params();
    ps_genmodel_preset("gemma2-tiny", &p, NULL);
    const char *src = outp("bad-src.gguf");
    if (ps_genmodel_write(&p, src, e) != PS_OK) return PS_ERR_IO;
    ps_gguf *g = NULL;
    if (ps_gguf_open(src, &g, e) != PS_OK) return PS_ERR_IO;
    ps_gguf_writer *w = ps_gguf_writer_new();
    ps_gguf_copy_kv(w, g, NULL);
    if (how == 0) {
        const int32_t pat[4] = {1, 0, 1, 0};
        ps_gguf_set_arr(w, key, PS_GGUF_INT32, pat, 4);
    } else {
        ps_gguf_set_f32(w, key, -1.0f);
    }
    for (int64_t i = 0; i < ps_gguf_n_tensors(g); i++) {
        const ps_gguf_tensor *t = ps_gguf_tensor_at(g, i);
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.ptr);
        int64_t ne[4] = {t->ne[0], t->ne[1], t->ne[2], t->ne[3]};
        ps_gguf_add_tensor(w, name, t->type, t->n_dims, ne, t->data, t->nbytes);
    }
    const char *dst = outp("bad.gguf");
    ps_status st = ps_gguf_write_file(w, dst, e);
    ps_gguf_writer_free(w);
    ps_gguf_close(g);
    if (st != PS_OK) return PS_ERR_IO;
    ps_model *m = NULL;
    ps_model_params mp = ps_model_default_params();
    st = ps_model_load(dst, &mp, &m, e);
    ps_model_free(m);
    return st;
}

/* A gemma2-tiny file relabelled as another family. */
static ps_status load_as(const char *arch, ps_error *e) {
    ps_genmodel_params p = ps_genmodel_default_params();
    ps_genmodel_preset("gemma2-tiny", &p, NULL);
    const char *src = outp("as-src.gguf");
    if (ps_genmodel_write(&p, src, e) != PS_OK) return PS_ERR_IO;
    ps_gguf *g = NULL;
    if (ps_gguf_open(src, &g, e) != PS_OK) return PS_ERR_IO;
    ps_gguf_writer *w = ps_gguf_writer_new();
    ps_gguf_copy_kv(w, g, NULL);
    ps_gguf_set_str(w, "general.architecture", arch);
    for (int64_t i = 0; i < ps_gguf_n_tensors(g); i++) {
        const ps_gguf_tensor *t = ps_gguf_tensor_at(g, i);
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.ptr);
        int64_t ne[4] = {t->ne[0], t->ne[1], t->ne[2], t->ne[3]};
        ps_gguf_add_tensor(w, name, t->type, t->n_dims, ne, t->data, t->nbytes);
    }
    const char *dst = outp("as.gguf");
    ps_status st = ps_gguf_write_file(w, dst, e);
    ps_gguf_writer_free(w);
    ps_gguf_close(g);
    if (st != PS_OK) return PS_ERR_IO;
    ps_model *m = NULL;
    ps_model_params mp = ps_model_default_params();
    st = ps_model_load(dst, &mp, &m, e);
    ps_model_free(m);
    return st;
}

static void test_bad_input(void) {
    ps_error e;
    static const char *const fams[][2] = {{"gemma3n", "per_layer_token_embd"},
                                           {"gemma4", "key_length_swa"},
                                           {"gemma-embedding", "embedding model"}};
    for (size_t i = 0; i < PS_ARRAY_LEN(fams); i++) {
        ps_status st = load_as(fams[i][0], &e);
        CHECKF(st == PS_ERR_UNSUPPORTED && strstr(e.message, fams[i][0]) &&
                   strstr(e.message, fams[i][1]),
               "%s: %d %s", fams[i][0], st, e.message);
    }
    ps_status st = load_with("gemma2.attention.sliding_window_pattern", 0, &e);
    CHECKF(st == PS_ERR_UNSUPPORTED && strstr(e.message, "sliding_window_pattern"),
           "a pattern array: %d %s", st, e.message);
    st = load_with("gemma2.attn_logit_softcapping", 1, &e);
    CHECKF(st == PS_ERR_FORMAT && strstr(e.message, "soft-capping"), "a negative cap: %d %s", st,
           e.message);
}

/* ---------------------------------------------------------------- tokenizer */

/* The llama-spm vocabulary of ../shared with tokenizer.ggml.add_space_prefix = prefix (Gemma's
 * files say false, as convert_hf_to_gguf.py writes for gemma, gemma2 and gemma3), or NULL. */
static ps_vocab *spm_vocab(const char *shared, bool prefix) {
    char path[4200];
    snprintf(path, sizeof path, "%s/vocab/ggml-vocab-llama-spm.gguf", shared);
    ps_gguf *g = NULL;
    if (ps_gguf_open(path, &g, NULL) != PS_OK) return NULL;
    ps_gguf_writer *w = ps_gguf_writer_new();
    ps_gguf_copy_kv(w, g, NULL);
    ps_gguf_set_bool(w, "tokenizer.ggml.add_space_prefix", prefix);
    void *mem = NULL;
    size_t size = 0;
    ps_vocab *v = NULL;
    if (ps_gguf_write_memory(w, &mem, &size, NULL) == PS_OK) {
        ps_gguf *g2 = NULL;
        if (ps_gguf_open_memory(mem, size, &g2, NULL) == PS_OK) {
            ps_error e;
            ps_status st = ps_vocab_load(g2, &v, &e);
            CHECKF(st == PS_OK, "spm vocab: %s", e.message);
            ps_gguf_close(g2);
        }
    }
    ps_free(mem);
    ps_gguf_writer_free(w);
    ps_gguf_close(g);
    return v;
}

static int32_t tok(const ps_vocab *v, const char *text, bool bos, int32_t *ids, int32_t cap) {
    int32_t *a = NULL, n = 0;
    if (ps_vocab_tokenize_alloc(v, text, strlen(text), bos, false, &a, &n, NULL) != PS_OK)
        return -1;
    for (int32_t i = 0; i < n && i < cap; i++) ids[i] = a[i];
    ps_free(a);
    return n;
}

/* Gemma's SentencePiece handling, as llama.cpp's SPM session does it: add_space_prefix = false
 * means no U+2581 is put before the text, so " Hello world" without the prefix tokenises as
 * "Hello world" with it (both "\u2581Hello\u2581world"), and " Hello world" with the prefix
 * differs (two U+2581); BOS is still added (SPM default). */
static void test_tokenizer(const char *shared) {
    if (!shared) {
        SKIP("gemma tokenizer flags: ../shared (the llama-spm vocabulary) is not available");
        return;
    }
    ps_vocab *with = spm_vocab(shared, true), *without = spm_vocab(shared, false);
    CHECK(with && without);
    if (with && without) {
        static const char *texts[] = {"Hello world", "Hello, world!\n  tabs\tand  spaces",
                                      "\xc3\x84pfel 4 \xc2\xbd months"};
        for (size_t i = 0; i < PS_ARRAY_LEN(texts); i++) {
            char spaced[256];
            snprintf(spaced, sizeof spaced, " %s", texts[i]);
            int32_t a[256], b[256];
            const int32_t na = tok(without, spaced, true, a, 256),
                          nb = tok(with, texts[i], true, b, 256);
            CHECKF(na > 1 && na == nb && !memcmp(a, b, (size_t)na * sizeof *a),
                   "no space prefix: ' %s' should tokenise as '%s' with one (%d vs %d ids)",
                   texts[i], texts[i], na, nb);
            const int32_t nc = tok(with, spaced, true, b, 256);
            CHECKF(nc > 0 && (nc != na || memcmp(a, b, (size_t)na * sizeof *a)),
                   "the flag changes nothing for '%s'", texts[i]);
            CHECK(a[0] == 1); /* <s> */
        }
    }
    ps_vocab_free(with);
    ps_vocab_free(without);
}

/* Every allocation over load + session (rings, the local rope tables) + forward of a gemma3
 * model with sliding layers, failed in turn: each a clean PS_ERR_NOMEM (ASan: no leak). */
static void test_faults(void) {
    ps_genmodel_params gp = ps_genmodel_default_params();
    ps_genmodel_preset("gemma3-tiny", &gp, NULL);
    gp.final_softcap = 2.0f;
    char path[700];
    snprintf(path, sizeof path, "%s", outp("faults.gguf"));
    ps_error e;
    CHECKF(ps_genmodel_write(&gp, path, &e) == PS_OK, "%s", e.message);
    const int32_t ids[5] = {2, 9, 300, 4, 77};
    float *logits = malloc(sizeof(float) * 5 * (size_t)gp.n_vocab);
    int bad = 0;
    int64_t n = 0;
    for (;; n++) {
        ps_alloc_fail_after(n);
        ps_model *m = NULL;
        ps_session *s = NULL;
        ps_model_params mp = ps_model_default_params();
        ps_status st = ps_model_load(path, &mp, &m, &e);
        ps_session_params sp = ps_session_default_params();
        sp.n_ctx = 600; /* longer than the rings */
        if (st == PS_OK) st = ps_session_create(m, &sp, &s, &e);
        if (st == PS_OK) st = ps_session_forward(s, ids, 5, logits, &e);
        const int64_t used = ps_alloc_count();
        ps_alloc_fail_after(-1);
        if (st != PS_OK && st != PS_ERR_NOMEM) bad++;
        ps_session_free(s);
        ps_model_free(m);
        if (st == PS_OK && used <= n) break; /* ran to the end without an injected failure */
        if (n > 100000) break;
    }
    CHECKF(bad == 0 && n > 10, "%d of %lld injected failures were not clean PS_ERR_NOMEM", bad,
           (long long)n);
    printf("faults: %lld allocation points over load + session + forward of gemma3-tiny\n",
           (long long)n);
    free(logits);
}

int main(void) {
    const char *tmp = getenv("TMPDIR");
    snprintf(out_dir, sizeof out_dir, "%s/ps_gemma_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(out_dir)) snprintf(out_dir, sizeof out_dir, ".");
    test_layers();
    test_bad_input();
    test_tokenizer(ps_test_shared());
    test_faults();
    bool numpy = access(FORWARD_PY, R_OK) == 0 &&
                 system(PYTHON " -c 'import numpy' 2>/dev/null") == 0;
    if (!numpy) SKIP("C vs numpy: " PYTHON " with numpy or " FORWARD_PY " is not available");
    test_reference(numpy);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", out_dir);
    if (strcmp(out_dir, ".")) (void)!system(cmd);
    return ps_test_done("gemma");
}
