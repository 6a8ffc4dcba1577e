/*
 * test_model.c — model loading, sessions and their errors.
 *
 * stories260K: info fields; llama-2-tiny-random (F16 matrices, 32000-token vocab) loads and runs;
 * every vocabulary file of ../shared/vocab loads vocab_only. Errors: missing file, truncated
 * copy, and small GGUFs rewritten from stories260K with one thing wrong (unknown architecture,
 * missing key, missing tensor, bad shape, unsupported tensor type) — each must name what is
 * wrong. Sessions: token out of range and context exceeded leave the cache unchanged; bad
 * parameters; allocation failures during load and session creation are clean PS_ERR_NOMEM.
 * act (--act): default params carry PS_ACT_NATIVE, PS_ACT_F32 is accepted, any other value
 * (7, -1, 2) is PS_ERR_INVALID_ARG with a message naming act and no session; ps_act_name gives
 * "native", "f32" and "?" for the rest.
 * Degraded models (one key of stories260K rewritten): an RMS eps outside (0, 1e-2], special
 * ids outside the vocabulary or "none" where the file adds them, a RoPE base that is not a
 * positive finite number, head counts that do not divide, zero sizes: each refused naming
 * the key (docs/models.md, "What a model must satisfy").
 * Skips (never passes) when ../shared is absent.
 */
#include "check.h"
#include "base/testhooks.h"
#include "gguf/gguf.h"

#include <math.h>

static char tmp_path[256];

static const char *tmp_file(void) {
    const char *dir = getenv("TMPDIR");
    snprintf(tmp_path, sizeof tmp_path, "%s/ps_test_model_XXXXXX", dir && *dir ? dir : "/tmp");
    int fd = mkstemp(tmp_path);
    if (fd < 0) return NULL;
    close(fd);
    return tmp_path;
}

static ps_status load(const char *path, bool vocab_only, ps_model **m, ps_error *err) {
    ps_model_params p = ps_model_default_params();
    p.vocab_only = vocab_only;
    *m = NULL;
    return ps_model_load(path, &p, m, err);
}

static void test_stories_info(const char *shared) {
    char path[4200];
    snprintf(path, sizeof path, "%s/models/stories260K.gguf", shared);
    ps_model *m;
    ps_error err;
    ps_status st = load(path, false, &m, &err);
    CHECKF(st == PS_OK, "%s", err.message);
    if (st) return;
    ps_model_info info;
    ps_model_get_info(m, &info);
    CHECK(!strcmp(info.arch, "llama"));
    CHECK(info.n_vocab == 512 && info.n_embd == 64 && info.n_layer == 5);
    CHECK(info.n_head == 8 && info.n_head_kv == 4 && info.head_dim == 8 && info.n_ff == 172);
    CHECK(info.n_ctx == 2048 && info.n_ctx_train == 2048);
    CHECK(info.file_bytes == 1185376 && !info.vocab_only);
    /* 48 f32 tensors: 512*64*2 (embd, output) + 64 + 5 * (2*64 + 64*64*2 + 64*32*2 + 3*64*172) */
    CHECKF(info.n_params == 512 * 64 * 2 + 64 + 5 * (2 * 64 + 64 * 64 * 2 + 64 * 32 * 2 + 3 * 64 * 172),
           "n_params %lld", (long long)info.n_params);
    CHECK(info.name[0] != '\0');
    CHECK(ps_vocab_n_tokens(ps_model_vocab(m)) == 512);
    CHECK(ps_vocab_bos(ps_model_vocab(m)) == 1);

    /* sessions */
    ps_session *s = NULL;
    ps_session_params sp = ps_session_default_params();
    CHECK(sp.n_batch == 256 && sp.n_ctx == 0 && sp.isa == PS_ISA_AUTO);
    /* act: the default is native; a value that is neither native nor f32 is refused, named */
    CHECK(sp.act == PS_ACT_NATIVE);
    CHECK(!strcmp(ps_act_name(PS_ACT_NATIVE), "native") && !strcmp(ps_act_name(PS_ACT_F32), "f32"));
    CHECK(!strcmp(ps_act_name((ps_act)7), "?") && !strcmp(ps_act_name((ps_act)-1), "?"));
    const ps_act bad_acts[] = {(ps_act)7, (ps_act)-1, (ps_act)2};
    for (size_t i = 0; i < sizeof bad_acts / sizeof bad_acts[0]; i++) {
        sp.act = bad_acts[i];
        memset(&err, 0, sizeof err);
        st = ps_session_create(m, &sp, &s, &err);
        CHECKF(st == PS_ERR_INVALID_ARG && !s && err.code == PS_ERR_INVALID_ARG &&
                   strstr(err.message, "act"),
               "act %d: status %d, message '%s'", (int)bad_acts[i], (int)st, err.message);
    }
    sp.act = PS_ACT_F32;
    CHECK(ps_session_create(m, &sp, &s, &err) == PS_OK && s);
    ps_session_free(s);
    s = NULL;
    sp.act = PS_ACT_NATIVE;
    sp.n_batch = 0;
    CHECK(ps_session_create(m, &sp, &s, &err) == PS_ERR_INVALID_ARG && !s);
    sp.n_batch = 257;
    CHECK(ps_session_create(m, &sp, &s, &err) == PS_ERR_INVALID_ARG && !s);
    sp.n_batch = 8;
    sp.n_ctx = 16;
    CHECK(ps_session_create(m, &sp, &s, &err) == PS_OK && s);
    if (s) {
        int32_t toks[9] = {1, 403, 407, 261, 378, 432, 383, 286, 261};
        float logits[9 * 512];
        CHECK(ps_session_forward(s, toks, 9, logits, &err) == PS_ERR_INVALID_ARG); /* > n_batch */
        CHECK(ps_session_forward(s, toks, 0, logits, &err) == PS_ERR_INVALID_ARG);
        CHECK(ps_session_forward(s, toks, 5, logits, &err) == PS_OK && ps_session_n_past(s) == 5);
        int32_t bad[3] = {5, 512, 7};
        st = ps_session_forward(s, bad, 3, logits, &err);
        CHECKF(st == PS_ERR_TOKEN_RANGE && strstr(err.message, "index 1") &&
                   strstr(err.message, "512"),
               "%s", err.message);
        bad[1] = -1;
        CHECK(ps_session_forward(s, bad, 3, logits, &err) == PS_ERR_TOKEN_RANGE);
        CHECK(ps_session_n_past(s) == 5);
        CHECK(ps_session_forward(s, toks, 8, NULL, &err) == PS_OK && ps_session_n_past(s) == 13);
        st = ps_session_forward(s, toks, 4, logits, &err);
        CHECKF(st == PS_ERR_CONTEXT && strstr(err.message, "13") && strstr(err.message, "16"),
               "%s", err.message);
        CHECK(ps_session_n_past(s) == 13);
        CHECK(ps_session_forward(s, toks, 3, logits, &err) == PS_OK && ps_session_n_past(s) == 16);
        CHECK(ps_session_truncate(s, 17) == PS_ERR_INVALID_ARG);
        CHECK(ps_session_truncate(s, 2) == PS_OK && ps_session_n_past(s) == 2);
        ps_session_reset(s);
        CHECK(ps_session_n_past(s) == 0);
        /* logits after reset equal a fresh start */
        float a[512], b[512];
        CHECK(ps_session_forward(s, toks, 1, a, &err) == PS_OK);
        ps_session_reset(s);
        CHECK(ps_session_forward(s, toks, 1, b, &err) == PS_OK);
        CHECK(!memcmp(a, b, sizeof a));
        ps_session_free(s);
    }

    /* allocation failures in session creation: each one a clean PS_ERR_NOMEM */
    ps_alloc_fail_after(-1);
    s = NULL;
    CHECK(ps_session_create(m, NULL, &s, &err) == PS_OK);
    int64_t n_alloc = ps_alloc_count();
    ps_session_free(s);
    int bad_nomem = 0;
    for (int64_t i = 0; i < n_alloc; i++) {
        ps_alloc_fail_after(i);
        s = NULL;
        st = ps_session_create(m, NULL, &s, &err);
        ps_alloc_fail_after(-1);
        if (st != PS_ERR_NOMEM || s) bad_nomem++;
        ps_session_free(s);
    }
    CHECKF(bad_nomem == 0 && n_alloc > 0, "%d of %lld injected failures were not PS_ERR_NOMEM",
           bad_nomem, (long long)n_alloc);
    ps_model_free(m);

    /* allocation failures during load */
    ps_alloc_fail_after(-1);
    CHECK(load(path, false, &m, &err) == PS_OK);
    n_alloc = ps_alloc_count();
    ps_model_free(m);
    bad_nomem = 0;
    int64_t step = n_alloc > 400 ? n_alloc / 200 : 1;
    for (int64_t i = 0; i < n_alloc; i += step) {
        ps_alloc_fail_after(i);
        m = NULL;
        st = load(path, false, &m, &err);
        ps_alloc_fail_after(-1);
        if (st != PS_ERR_NOMEM || m) bad_nomem++;
        ps_model_free(m);
    }
    CHECKF(bad_nomem == 0, "%d injected failures during load were not PS_ERR_NOMEM", bad_nomem);

    /* vocab_only load of a full model */
    st = load(path, true, &m, &err);
    CHECKF(st == PS_OK, "%s", err.message);
    if (!st) {
        ps_model_get_info(m, &info);
        CHECK(info.vocab_only && info.n_vocab == 512 && info.n_params == 0 && info.n_ctx == 2048);
        CHECK(ps_session_create(m, NULL, &s, &err) == PS_ERR_INVALID_ARG);
        ps_model_free(m);
    }
}

static void test_tiny_random(const char *shared) {
    char path[4200];
    snprintf(path, sizeof path, "%s/models/llama-2-tiny-random.gguf", shared);
    ps_model *m;
    ps_error err;
    ps_status st = load(path, false, &m, &err);
    CHECKF(st == PS_OK, "%s", err.message);
    if (st) return;
    ps_model_info info;
    ps_model_get_info(m, &info);
    CHECK(info.n_vocab == 32000 && info.n_embd == 8 && info.n_layer == 1 && info.n_head == 2 &&
          info.n_head_kv == 2 && info.n_ff == 32 && info.n_ctx_train == 4096);
    ps_session *s = NULL;
    ps_session_params sp = ps_session_default_params();
    sp.n_ctx = 64;
    CHECK(ps_session_create(m, &sp, &s, &err) == PS_OK);
    if (s) {
        int32_t toks[4] = {1, 450, 6635, 31999};
        float *logits = malloc(sizeof(float) * 4 * 32000);
        CHECK(ps_session_forward(s, toks, 4, logits, &err) == PS_OK);
        bool finite = true, varied = false;
        for (int i = 0; i < 4 * 32000; i++) {
            finite = finite && isfinite(logits[i]);
            varied = varied || logits[i] != logits[0];
        }
        CHECK(finite && varied);
        int32_t over = 32000;
        CHECK(ps_session_forward(s, &over, 1, logits, &err) == PS_ERR_TOKEN_RANGE);
        free(logits);
        ps_session_free(s);
    }
    ps_model_free(m);
}

static void test_vocab_files(const char *shared) {
    static const struct {
        const char *file;
        int32_t n_vocab;
    } files[] = {
        {"ggml-vocab-llama-spm.gguf", 32000},  {"ggml-vocab-gpt-2.gguf", 50257},
        {"ggml-vocab-mpt.gguf", 50432},        {"ggml-vocab-refact.gguf", 49216},
        {"ggml-vocab-deepseek-llm.gguf", 102400}, {"ggml-vocab-llama-bpe.gguf", 128256},
        {"ggml-vocab-qwen2.gguf", 151936},     {"ggml-vocab-baichuan.gguf", 64000},
        {"ggml-vocab-gpt-neox.gguf", 50432},
    };
    for (size_t i = 0; i < PS_ARRAY_LEN(files); i++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/vocab/%s", shared, files[i].file);
        ps_model *m;
        ps_error err;
        ps_status st = load(path, true, &m, &err);
        CHECKF(st == PS_OK, "%s: %s", files[i].file, err.message);
        if (st) continue;
        ps_model_info info;
        ps_model_get_info(m, &info);
        CHECKF(info.vocab_only && info.n_vocab == files[i].n_vocab && info.n_params == 0,
               "%s: n_vocab %d", files[i].file, info.n_vocab);
        CHECK(ps_vocab_n_tokens(ps_model_vocab(m)) == files[i].n_vocab);
        ps_model_free(m);
    }
    /* a vocabulary file has no weights: a full load fails and says what is missing */
    char path[4200];
    snprintf(path, sizeof path, "%s/vocab/ggml-vocab-llama-spm.gguf", shared);
    ps_model *m;
    ps_error err;
    ps_status st = load(path, false, &m, &err);
    CHECKF(st == PS_ERR_NOT_FOUND && !m, "full load of a vocab file: %s", err.message);
}

/* ---- broken files ---- */

typedef enum {
    V_ARCH, V_NO_KEY, V_NO_TENSOR, V_SHAPE, V_TYPE, V_NORM_TYPE, V_FREQS_BAD, V_FREQS_ONE
} variant;

/* Rewrites stories260K with one defect; returns the path of the new file or NULL. */
static const char *write_variant(const ps_gguf *g, variant v) {
    ps_gguf_writer *w = ps_gguf_writer_new();
    if (!w) return NULL;
    ps_gguf_copy_kv(w, g, NULL);
    if (v == V_ARCH) ps_gguf_set_str(w, "general.architecture", "gpt9");
    if (v == V_NO_KEY) {
        /* rebuild without llama.block_count */
        ps_gguf_writer_free(w);
        w = ps_gguf_writer_new();
        for (int64_t i = 0; i < ps_gguf_n_kv(g); i++) {
            ps_gguf_str k = ps_gguf_key(g, i);
            if (k.len == 17 && !memcmp(k.ptr, "llama.block_count", 17)) continue;
            char prefix[256];
            snprintf(prefix, sizeof prefix, "%.*s", (int)k.len, k.ptr);
            ps_gguf_copy_kv(w, g, prefix); /* copies keys with this prefix (this one) */
        }
    }
    if (v == V_FREQS_BAD || v == V_FREQS_ONE) { /* n_rot / 2 = 4 frequency divisors */
        const float f[4] = {1.0f, v == V_FREQS_BAD ? 0.0f : 1.0f, 1.0f, 1.0f};
        const int64_t ne[1] = {4};
        ps_gguf_add_tensor(w, "rope_freqs.weight", PS_GGML_F32, 1, ne, f, sizeof f);
    }
    uint8_t *q4 = NULL;
    for (int64_t i = 0; i < ps_gguf_n_tensors(g); i++) {
        const ps_gguf_tensor *t = ps_gguf_tensor_at(g, i);
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.ptr);
        int64_t ne[4] = {t->ne[0], t->ne[1], t->ne[2], t->ne[3]};
        if (v == V_NO_TENSOR && !strcmp(name, "blk.2.ffn_up.weight")) continue;
        if (v == V_SHAPE && !strcmp(name, "blk.1.ffn_gate.weight")) {
            ne[0] = t->ne[1];
            ne[1] = t->ne[0];
        }
        if (v == V_TYPE && !strcmp(name, "blk.0.attn_q.weight")) {
            /* q8_1: a ggml type (the activations of the legacy dot products), no weight type */
            size_t nb = (size_t)(t->ne[0] * t->ne[1] / 32) * 36;
            q4 = calloc(1, nb);
            ps_gguf_add_tensor(w, name, PS_GGML_Q8_1, t->n_dims, ne, q4, nb);
            continue;
        }
        if (v == V_NORM_TYPE && !strcmp(name, "blk.3.ffn_norm.weight")) {
            uint16_t h[64] = {0};
            ps_gguf_add_tensor(w, name, PS_GGML_F16, t->n_dims, ne, h, sizeof h);
            continue;
        }
        ps_gguf_add_tensor(w, name, t->type, t->n_dims, ne, t->data, t->nbytes);
    }
    const char *path = tmp_file();
    ps_error err;
    ps_status st = path ? ps_gguf_write_file(w, path, &err) : PS_ERR_IO;
    ps_gguf_writer_free(w);
    free(q4);
    if (st != PS_OK) {
        fprintf(stderr, "writing variant %d failed: %s\n", (int)v, err.message);
        if (path) unlink(path);
        return NULL;
    }
    return path;
}

static void test_errors(const char *shared) {
    ps_model *m = NULL;
    ps_error err;
    ps_status st = load("no/such/model.gguf", false, &m, &err);
    CHECKF(st == PS_ERR_IO && !m && strstr(err.message, "no/such/model.gguf"), "%d %s", st,
           err.message);
    CHECK(ps_model_load(NULL, NULL, &m, &err) == PS_ERR_INVALID_ARG);
    ps_model_free(NULL);
    ps_session_free(NULL);

    char path[4200];
    snprintf(path, sizeof path, "%s/models/stories260K.gguf", shared);

    /* a truncated copy */
    FILE *f = fopen(path, "rb");
    const char *tp = tmp_file();
    if (f && tp) {
        static char buf[700000];
        size_t n = fread(buf, 1, sizeof buf, f);
        FILE *o = fopen(tp, "wb");
        if (o) {
            fwrite(buf, 1, n, o);
            fclose(o);
        }
        st = load(tp, false, &m, &err);
        CHECKF((st == PS_ERR_FORMAT || st == PS_ERR_IO) && !m, "truncated: %d %s", st,
               err.message);
        unlink(tp);
    }
    if (f) fclose(f);

    ps_gguf *g = NULL;
    st = ps_gguf_open(path, &g, &err);
    CHECK(st == PS_OK);
    if (st) return;
    static const struct {
        variant v;
        ps_status code;
        const char *needle;
    } cases[] = {
        {V_ARCH, PS_ERR_UNSUPPORTED, "gpt9"},
        {V_NO_KEY, PS_ERR_NOT_FOUND, "llama.block_count"},
        {V_NO_TENSOR, PS_ERR_NOT_FOUND, "blk.2.ffn_up.weight"},
        {V_SHAPE, PS_ERR_FORMAT, "blk.1.ffn_gate.weight"},
        {V_TYPE, PS_ERR_UNSUPPORTED, "blk.0.attn_q.weight"},
        {V_NORM_TYPE, PS_ERR_UNSUPPORTED, "blk.3.ffn_norm.weight"},
        {V_FREQS_BAD, PS_ERR_FORMAT, "rope_freqs.weight"},
    };
    for (size_t i = 0; i < PS_ARRAY_LEN(cases); i++) {
        const char *vp = write_variant(g, cases[i].v);
        CHECKF(vp != NULL, "could not write variant %d", (int)cases[i].v);
        if (!vp) continue;
        m = NULL;
        st = load(vp, false, &m, &err);
        CHECKF(st == cases[i].code && !m && strstr(err.message, cases[i].needle),
               "variant %d: status %d (%s), message '%s'", (int)cases[i].v, st,
               ps_status_str(st), err.message);
        if (cases[i].v == V_TYPE)
            CHECKF(strstr(err.message, "q8_1") && strstr(err.message, "q4_k, q5_k, q6_k"),
                   "type or supported list not named: %s", err.message);
        if (cases[i].v == V_SHAPE)
            CHECKF(strstr(err.message, "172") != NULL, "shape not given: %s", err.message);
        /* the tokenizer alone still loads from every variant but the renamed architecture */
        if (cases[i].v != V_ARCH) {
            st = load(vp, true, &m, &err);
            CHECKF(st == PS_OK, "vocab_only of variant %d: %s", (int)cases[i].v, err.message);
            ps_model_free(m);
        }
        unlink(vp);
    }

    /* rope_freqs.weight of ones: loads, and the logits equal the plain model's bit for bit */
    const char *vp = write_variant(g, V_FREQS_ONE);
    ps_model *plain = NULL;
    m = NULL;
    if (vp && load(vp, false, &m, &err) == PS_OK && load(path, false, &plain, &err) == PS_OK) {
        int32_t toks[6] = {1, 403, 407, 261, 378, 432};
        float a[6 * 512], b[6 * 512];
        ps_session *sa = NULL, *sb = NULL;
        CHECK(ps_session_create(m, NULL, &sa, &err) == PS_OK);
        CHECK(ps_session_create(plain, NULL, &sb, &err) == PS_OK);
        CHECK(ps_session_forward(sa, toks, 6, a, &err) == PS_OK);
        CHECK(ps_session_forward(sb, toks, 6, b, &err) == PS_OK);
        CHECK(!memcmp(a, b, sizeof a));
        ps_session_free(sa);
        ps_session_free(sb);
    } else {
        CHECKF(false, "rope_freqs variant did not load: %s", err.message);
    }
    ps_model_free(m);
    ps_model_free(plain);
    if (vp) unlink(vp);
    ps_gguf_close(g);
}

/* ---- degraded models: one key set to a value that makes the model meaningless ---- */

typedef enum { K_F32, K_U32, K_BOOL } key_kind;

/* stories260K with one key set (or added); the path of the new file or NULL. */
static const char *write_keyed(const ps_gguf *g, const char *key, key_kind kind, double value) {
    ps_gguf_writer *w = ps_gguf_writer_new();
    if (!w) return NULL;
    ps_gguf_copy_kv(w, g, NULL);
    if (kind == K_F32) ps_gguf_set_f32(w, key, (float)value);
    else if (kind == K_U32) ps_gguf_set_u32(w, key, (uint32_t)value);
    else ps_gguf_set_bool(w, key, value != 0);
    for (int64_t i = 0; i < ps_gguf_n_tensors(g); i++) {
        const ps_gguf_tensor *t = ps_gguf_tensor_at(g, i);
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.ptr);
        const int64_t ne[4] = {t->ne[0], t->ne[1], t->ne[2], t->ne[3]};
        ps_gguf_add_tensor(w, name, t->type, t->n_dims, ne, t->data, t->nbytes);
    }
    const char *path = tmp_file();
    ps_error err;
    ps_status st = path ? ps_gguf_write_file(w, path, &err) : PS_ERR_IO;
    ps_gguf_writer_free(w);
    if (st != PS_OK) {
        if (path) unlink(path);
        return NULL;
    }
    return path;
}

/* Each value is refused with PS_ERR_FORMAT and a message naming the key (and, where given, the
 * value as the message prints it); the "fine" rows load. docs/models.md lists the checks. */
static void test_degraded(const char *shared) {
    char path[4200];
    snprintf(path, sizeof path, "%s/models/stories260K.gguf", shared);
    ps_gguf *g = NULL;
    ps_error err;
    CHECK(ps_gguf_open(path, &g, &err) == PS_OK);
    if (!g) return;
    static const struct {
        const char *key;
        key_kind kind;
        double value;
        bool fine;           /* loads */
        const char *needle;  /* besides the key, NULL: the key alone */
    } cases[] = {
        /* the two: every logprob -6.2383 (uniform), and BOS silently dropped */
        {"llama.attention.layer_norm_rms_epsilon", K_F32, 1e30, false, "1e+30"},
        {"tokenizer.ggml.bos_token_id", K_U32, 4294967295.0, false, "add_bos_token"},
        {"llama.attention.layer_norm_rms_epsilon", K_F32, 0.0, false, "(0, 0.01]"},
        {"llama.attention.layer_norm_rms_epsilon", K_F32, -1e-5, false, "(0, 0.01]"},
        {"llama.attention.layer_norm_rms_epsilon", K_F32, 0.02, false, "0.02"},
        {"llama.attention.layer_norm_rms_epsilon", K_F32, INFINITY, false, "finite"},
        {"llama.attention.layer_norm_rms_epsilon", K_F32, NAN, false, "finite"},
        {"llama.attention.layer_norm_rms_epsilon", K_F32, 1e-2, true, NULL},
        {"llama.attention.layer_norm_rms_epsilon", K_F32, 1e-12, true, NULL},
        {"tokenizer.ggml.bos_token_id", K_U32, 512, false, "outside the vocabulary"},
        {"tokenizer.ggml.eos_token_id", K_U32, 100000, false, "outside the vocabulary"},
        {"tokenizer.ggml.unknown_token_id", K_U32, 512, false, "outside the vocabulary"},
        {"tokenizer.ggml.padding_token_id", K_U32, 513, false, "outside the vocabulary"},
        {"tokenizer.ggml.eot_token_id", K_U32, 600, false, "outside the vocabulary"},
        {"tokenizer.ggml.seperator_token_id", K_U32, 512, false, "outside the vocabulary"},
        {"tokenizer.ggml.add_eos_token", K_BOOL, 1, true, NULL},
        {"llama.rope.freq_base", K_F32, 0.0, false, "must be > 0"},
        {"llama.rope.freq_base", K_F32, -10000.0, false, "must be > 0"},
        {"llama.rope.freq_base", K_F32, INFINITY, false, "finite"},
        {"llama.attention.head_count_kv", K_U32, 3, false, "multiple"},
        {"llama.attention.head_count", K_U32, 0, false, "out of range"},
        {"llama.context_length", K_U32, 0, false, "out of range"},
        {"llama.rope.dimension_count", K_U32, 7, false, "even"},
        {"llama.rope.scaling.factor", K_F32, -2.0, false, "must be > 0"},
        {"llama.embedding_length", K_U32, 0, false, "out of range"},
    };
    for (size_t i = 0; i < PS_ARRAY_LEN(cases); i++) {
        const char *vp = write_keyed(g, cases[i].key, cases[i].kind, cases[i].value);
        CHECKF(vp != NULL, "could not write %s", cases[i].key);
        if (!vp) continue;
        ps_model *m = NULL;
        ps_status st = load(vp, false, &m, &err);
        if (cases[i].fine) {
            CHECKF(st == PS_OK && m, "%s = %g loads: %s", cases[i].key, cases[i].value,
                   err.message);
        } else {
            CHECKF(st == PS_ERR_FORMAT && !m && strstr(err.message, cases[i].key) &&
                       (!cases[i].needle || strstr(err.message, cases[i].needle)),
                   "%s = %g: status %s, '%s'", cases[i].key, cases[i].value, ps_status_str(st),
                   st ? err.message : "loaded");
        }
        ps_model_free(m);
        unlink(vp);
    }
    ps_gguf_close(g);
}

int main(void) {
    const char *shared = ps_test_shared();
    if (!shared) {
        SKIP("model tests need ../shared");
        return ps_test_done("model");
    }
    test_stories_info(shared);
    test_tiny_random(shared);
    test_vocab_files(shared);
    test_errors(shared);
    test_degraded(shared);
    return ps_test_done("model");
}
