/*
 * test_moe.c — models with experts (qwen3moe; llama with experts, the Mixtral layout): batch
 * invariance and bad files. (Agreement with the float64 reference is test_reference's.)
 *
 * Invariance: for qwen3moe-tiny (8 experts, here 3 used) and mixtral-tiny (4 experts, 2 used) x
 * F32 / F16 / BF16 / Q8_0 x native / f32 activations, the logits of a 3 x 256 + 17 token prompt
 * fed in batches of 256 on one thread must be bitwise equal (memcmp) to batches of 1, 7 and 100
 * and to 2 threads (batches of 256 and of 7). The routing must be real: at least half the
 * experts get rows in the last layer, and no expert gets all of them.
 *
 * Bad files (rewritten from a generated model with one defect), each refused with the status
 * and a message naming the key or tensor: expert_count missing or 0, expert_used_count
 * missing or above expert_count, expert_feed_forward_length missing (no feed_forward_length
 * either), an expert tensor of rank 2, of swapped shape, with one expert too few, of an
 * unsupported type, a missing router, an unsupported expert_gating_func; llama without
 * expert_count must then have the dense tensors (named), llama with experts but no
 * expert_used_count is named. expert_weights_norm = false loads and changes the logits.
 * Every allocation failure over load + session + forward is a clean PS_ERR_NOMEM.
 * No shared material needed.
 */
#include "check.h"
#include "fixture.h"
#include "base/testhooks.h"
#include "gen/genmodel.h"
#include "gguf/gguf.h"
#include "run/session.h"

#include <math.h>

static ps_isa run_isa = PS_ISA_AUTO; /* the sessions' ISA (test_grouped walks them) */

/* Logits of n ids, forwarded in batches of `batch` on `pool` (malloc'd) or NULL; *n_active:
 * experts with rows in the last call's last layer, negative when one took all of them. */
static float *logits_of(const ps_model *m, const int32_t *ids, int32_t n, int32_t batch,
                        ps_pool *pool, ps_act act, int32_t *n_active) {
    fx_run r = fx_run_of(batch, run_isa, act, 1);
    r.pool = pool;
    float *out = fx_logits(m, ids, n, &r);
    if (n_active && out) *n_active = r.max_rows == r.all_rows ? -r.active : r.active;
    return out;
}

static void test_invariance(void) {
    static const char *presets[] = {"qwen3moe-tiny", "mixtral-tiny"};
    static const uint32_t types[] = {PS_GGML_F32, PS_GGML_F16, PS_GGML_BF16, PS_GGML_Q8_0};
    enum { N = 3 * 256 + 17 };
    static int32_t ids[N];
    for (int32_t i = 0; i < N; i++) ids[i] = i == 0 ? 1 : (int32_t)((i * 7919u + 13) % 509) + 3;
    ps_pool *p2 = NULL;
    CHECK(ps_pool_create(2, &p2) == PS_OK);
    for (size_t pi = 0; pi < PS_ARRAY_LEN(presets); pi++)
        for (size_t ti = 0; ti < PS_ARRAY_LEN(types); ti++) {
            ps_genmodel_params gp = ps_genmodel_default_params();
            ps_error e;
            CHECK(ps_genmodel_preset(presets[pi], &gp, &e) == PS_OK);
            gp.type = types[ti];
            gp.n_ctx = N;
            /* 3 of 8 experts for qwen3moe: with 2 the sum's order would not show (a + b = b + a) */
            if (gp.n_expert == 8) gp.n_expert_used = 3;
            gp.seed = 31 + ti;
            const char *path = outp("inv.gguf");
            ps_model *m = NULL;
            ps_model_params mp = ps_model_default_params();
            if (ps_genmodel_write(&gp, path, &e) != PS_OK ||
                ps_model_load(path, &mp, &m, &e) != PS_OK) {
                CHECKF(0, "%s %s: %s", presets[pi], ps_ggml_type_name(types[ti]), e.message);
                continue;
            }
            CHECK(m->hp.n_expert == gp.n_expert && m->hp.n_expert_used == gp.n_expert_used &&
                  (m->w.layers[0].feat & PS_L_FFN_MOE) && !(m->w.layers[1].feat & PS_L_FFN_DENSE));
            for (int a = 0; a < 2; a++) {
                const ps_act act = a ? PS_ACT_F32 : PS_ACT_NATIVE;
                const size_t bytes = (size_t)N * (size_t)gp.n_vocab * sizeof(float);
                int32_t active = 0;
                float *base = logits_of(m, ids, N, 256, NULL, act, &active);
                if (!base) continue;
                CHECKF(active >= gp.n_expert / 2, "%s %s: %d experts active (negative: one "
                       "took every row)", presets[pi], ps_ggml_type_name(types[ti]), active);
                struct { int32_t batch; ps_pool *pool; } runs[] = {
                    {1, NULL}, {7, NULL}, {100, NULL}, {256, p2}, {7, p2}};
                for (size_t r = 0; r < PS_ARRAY_LEN(runs); r++) {
                    float *c = logits_of(m, ids, N, runs[r].batch, runs[r].pool, act, NULL);
                    size_t differ = 0;
                    for (size_t i = 0; c && i < bytes / 4; i++) differ += memcmp(c + i, base + i, 4) != 0;
                    CHECKF(c && differ == 0, "%s %s %s: batch %d, %d threads: %zu of %zu logits "
                           "differ from batch 256 on 1 thread", presets[pi],
                           ps_ggml_type_name(types[ti]), ps_act_name(act), runs[r].batch,
                           runs[r].pool ? 2 : 1, differ, bytes / 4);
                    free(c);
                }
                printf("%s %s %s: batches 1/7/100/256 and 2 threads bitwise equal, %d of %d "
                       "experts active\n", presets[pi], ps_ggml_type_name(types[ti]),
                       ps_act_name(act), active, gp.n_expert);
                free(base);
            }
            ps_model_free(m);
        }
    ps_pool_free(p2);
}

/* The grouped expert products (ps_matmul_group) against the plain per-expert path
 * (ps_test_moe_plain) in a model: qwen3moe-tiny at widths of 256 (the k-quants' blocks) with
 * 160 experts, 3 used, so a 256-row chunk gives ~100 active experts of a few rows each (passes
 * cut at the threads' slots, runs split across slots) and chunks of 1 / 7 / 100 give few; Q8_0
 * and Q4_K experts (gen-model quantises them with the type asked for) and BF16 (the plain loop
 * inside ps_matmul_group), on AVX2 and the best ISA (AMX where the CPU has it). The logits must
 * be bitwise the plain path's on 1 thread with chunks of 256, for chunks 1 / 7 / 100 / 256 on
 * 1, 2 and 7 threads. (ps_matmul_group itself, over every ISA, the integer types and the limits
 * of a pass, is test_matmul_quant's.) */
static void test_grouped(void) {
    static const uint32_t types[] = {PS_GGML_Q8_0, PS_GGML_Q4_K, PS_GGML_BF16};
    static const ps_isa isas[] = {PS_ISA_AVX2, PS_ISA_AUTO};
    enum { N = 256 };
    static int32_t ids[N];
    for (int32_t i = 0; i < N; i++) ids[i] = i == 0 ? 1 : (int32_t)((i * 104729u + 7) % 509) + 3;
    ps_pool *pools[3] = {NULL, NULL, NULL};
    CHECK(ps_pool_create(2, &pools[1]) == PS_OK && ps_pool_create(7, &pools[2]) == PS_OK);
    for (size_t ti = 0; ti < PS_ARRAY_LEN(types); ti++) {
        ps_genmodel_params gp = ps_genmodel_default_params();
        ps_error e;
        CHECK(ps_genmodel_preset("qwen3moe-tiny", &gp, &e) == PS_OK);
        gp.type = types[ti];
        gp.n_ctx = N;
        gp.n_embd = gp.n_ff_exp = 256; /* the k-quants' blocks */
        gp.head_dim = 256 / gp.n_head;
        gp.n_expert = 160;
        gp.n_expert_used = 3;
        gp.seed = 57 + ti;
        const char *path = outp("grouped.gguf");
        ps_model *m = NULL;
        ps_model_params mp = ps_model_default_params();
        if (ps_genmodel_write(&gp, path, &e) != PS_OK ||
            ps_model_load(path, &mp, &m, &e) != PS_OK) {
            CHECKF(0, "grouped %s: %s", ps_ggml_type_name(types[ti]), e.message);
            continue;
        }
        CHECKF(m->w.layers[0].gate_exps.m.type == types[ti], "grouped: expert type %s", ps_ggml_type_name(m->w.layers[0].gate_exps.m.type));
        for (size_t k = 0; k < PS_ARRAY_LEN(isas); k++) {
            if (!ps_isa_supported(isas[k])) {
                PS_TEST_CPU_LACKS("%s: grouped expert products", ps_isa_name(isas[k]));
                continue;
            }
            run_isa = isas[k];
            const size_t nl = (size_t)N * (size_t)gp.n_vocab;
            int32_t active = 0;
            ps_test_moe_plain(true);
            float *plain = logits_of(m, ids, N, 256, NULL, PS_ACT_NATIVE, &active);
            ps_test_moe_plain(false);
            if (!plain) continue;
            CHECKF(active > gp.n_expert / 2, "grouped %s: %d experts active, want > 80",
                   ps_ggml_type_name(types[ti]), active);
            static const int32_t batches[] = {1, 7, 100, 256};
            size_t runs = 0, bad = 0;
            for (size_t b = 0; b < PS_ARRAY_LEN(batches); b++)
                for (size_t t = 0; t < PS_ARRAY_LEN(pools); t++) {
                    float *c = logits_of(m, ids, N, batches[b], pools[t], PS_ACT_NATIVE, NULL);
                    size_t differ = 0;
                    for (size_t i = 0; c && i < nl; i++) differ += memcmp(c + i, plain + i, 4) != 0;
                    CHECKF(c && differ == 0, "grouped %s %s: batch %d, %d threads: %zu of %zu "
                           "logits differ from the plain path", ps_ggml_type_name(types[ti]),
                           ps_isa_name(isas[k]), batches[b], t == 0 ? 1 : t == 1 ? 2 : 7,
                           differ, nl);
                    runs++;
                    bad += !c || differ;
                    free(c);
                }
            printf("grouped %s %s: %zu runs (chunks 1/7/100/256 x 1/2/7 threads), %zu differ "
                   "from the plain per-expert path; %d of %d experts active\n",
                   ps_ggml_type_name(types[ti]), ps_isa_name(isas[k]), runs, bad, active,
                   gp.n_expert);
            free(plain);
        }
        run_isa = PS_ISA_AUTO;
        ps_model_free(m);
    }
    ps_pool_free(pools[1]);
    ps_pool_free(pools[2]);
}

/* ---- bad files ---- */

typedef struct {
    const char *drop_key;     /* leave this key out */
    const char *set_key;      /* set this u32 key ... */
    uint32_t set_val;         /* ... to this */
    const char *tensor;       /* this tensor ... */
    int how;                  /* 0 = as is, 1 = dropped, 2 = rank 2, 3 = ne0/ne1 swapped,
                               * 4 = one expert fewer, 5 = type q8_1 */
} defect;

static const char *rewrite(const ps_gguf *g, const defect *d, const char *name) {
    ps_gguf_writer *w = ps_gguf_writer_new();
    if (!w) return NULL;
    for (int64_t i = 0; i < ps_gguf_n_kv(g); i++) {
        ps_gguf_str k = ps_gguf_key(g, i);
        char key[256];
        snprintf(key, sizeof key, "%.*s", (int)k.len, k.ptr);
        if (d->drop_key && !strcmp(key, d->drop_key)) continue;
        ps_gguf_copy_kv(w, g, key); /* copies the keys with this prefix */
    }
    if (d->set_key) ps_gguf_set_u32(w, d->set_key, d->set_val);
    void *junk = NULL;
    for (int64_t i = 0; i < ps_gguf_n_tensors(g); i++) {
        const ps_gguf_tensor *t = ps_gguf_tensor_at(g, i);
        char tn[128];
        snprintf(tn, sizeof tn, "%.*s", (int)t->name.len, t->name.ptr);
        int64_t ne[4] = {t->ne[0], t->ne[1], t->ne[2], t->ne[3]};
        uint32_t nd = t->n_dims, type = t->type;
        uint64_t nbytes = t->nbytes;
        const void *data = t->data;
        if (d->tensor && !strcmp(tn, d->tensor)) {
            if (d->how == 1) continue;
            if (d->how == 2) ne[1] *= ne[2], ne[2] = 1, nd = 2;
            if (d->how == 3) ne[0] = t->ne[1], ne[1] = t->ne[0];
            if (d->how == 4) ne[2] -= 1, nbytes = nbytes / (uint64_t)t->ne[2] * (uint64_t)ne[2];
            if (d->how == 5) { /* q8_1: a ggml type, but no weight type */
                type = PS_GGML_Q8_1;
                nbytes = (uint64_t)(ne[0] * ne[1] * ne[2] / 32) * 36;
                junk = calloc(1, (size_t)nbytes);
                data = junk;
            }
        }
        ps_gguf_add_tensor(w, tn, type, nd, ne, data, nbytes);
    }
    const char *path = outp(name);
    ps_error e;
    ps_status st = ps_gguf_write_file(w, path, &e);
    ps_gguf_writer_free(w);
    free(junk);
    if (st != PS_OK) {
        fprintf(stderr, "writing %s: %s\n", path, e.message);
        return NULL;
    }
    return path;
}

static void test_bad_files(void) {
    ps_error e;
    char q[512], mx[512]; /* own copies: outp's buffers rotate */
    snprintf(q, sizeof q, "%s", outp("q3moe.gguf"));
    snprintf(mx, sizeof mx, "%s", outp("mixtral.gguf"));
    ps_genmodel_params gp = ps_genmodel_default_params();
    ps_genmodel_preset("qwen3moe-tiny", &gp, NULL);
    CHECKF(ps_genmodel_write(&gp, q, &e) == PS_OK, "%s", e.message);
    gp = ps_genmodel_default_params();
    ps_genmodel_preset("mixtral-tiny", &gp, NULL);
    CHECKF(ps_genmodel_write(&gp, mx, &e) == PS_OK, "%s", e.message);
    ps_gguf *gq = NULL, *gm = NULL;
    CHECK(ps_gguf_open(q, &gq, &e) == PS_OK && ps_gguf_open(mx, &gm, &e) == PS_OK);
    if (!gq || !gm) {
        ps_gguf_close(gq);
        ps_gguf_close(gm);
        return;
    }
    /* the generator's layout: llama.cpp's keys, 3-D expert tensors, an f32 router */
    int64_t v = 0;
    CHECK(ps_gguf_get_i64(gq, "qwen3moe.expert_count", &v, NULL) == PS_OK && v == 8);
    CHECK(ps_gguf_get_i64(gq, "qwen3moe.expert_used_count", &v, NULL) == PS_OK && v == 2);
    CHECK(ps_gguf_get_i64(gq, "qwen3moe.expert_feed_forward_length", &v, NULL) == PS_OK && v == 32);
    CHECK(ps_gguf_find_key(gq, "qwen3moe.feed_forward_length") < 0);
    CHECK(ps_gguf_get_i64(gm, "llama.expert_count", &v, NULL) == PS_OK && v == 4);
    CHECK(ps_gguf_get_i64(gm, "llama.feed_forward_length", &v, NULL) == PS_OK && v == 64);
    const ps_gguf_tensor *t = ps_gguf_find_tensor(gq, "blk.1.ffn_down_exps.weight");
    CHECK(t && t->n_dims == 3 && t->ne[0] == 32 && t->ne[1] == 64 && t->ne[2] == 8);
    t = ps_gguf_find_tensor(gm, "blk.0.ffn_gate_exps.weight");
    CHECK(t && t->n_dims == 3 && t->ne[0] == 64 && t->ne[1] == 64 && t->ne[2] == 4);
    t = ps_gguf_find_tensor(gq, "blk.0.ffn_gate_inp.weight");
    CHECK(t && t->type == PS_GGML_F32 && t->ne[0] == 64 && t->ne[1] == 8);
    CHECK(!ps_gguf_find_tensor(gq, "blk.0.ffn_gate.weight") &&
          !ps_gguf_find_tensor(gm, "blk.0.ffn_up.weight"));
    CHECK(ps_gguf_find_tensor(gq, "blk.0.attn_q_norm.weight") != NULL);
    ps_genmodel_params big = ps_genmodel_default_params();
    CHECK(ps_genmodel_preset("qwen3-30b-a3b-2l", &big, NULL) == PS_OK);
    /* 2 x (attention 2048 x (4096 + 512 + 512) + 4096 x 2048, router 2048 x 128, experts
     * 128 x 3 x 2048 x 768) + embeddings and output 2 x 151936 x 2048, + norms */
    const int64_t nw = ps_genmodel_n_params(&big, big.n_vocab);
    CHECKF(nw > 1860000000 && nw < 1870000000, "qwen3-30b-a3b-2l: %lld weights", (long long)nw);

    static const struct {
        bool mixtral;
        defect d;
        ps_status code;
        const char *needle;
    } cases[] = {
        {false, {"qwen3moe.expert_count", NULL, 0, NULL, 0}, PS_ERR_NOT_FOUND, "qwen3moe.expert_count"},
        {false, {NULL, "qwen3moe.expert_count", 0, NULL, 0}, PS_ERR_FORMAT, "qwen3moe.expert_count"},
        {false, {"qwen3moe.expert_used_count", NULL, 0, NULL, 0}, PS_ERR_NOT_FOUND, "qwen3moe.expert_used_count"},
        {false, {NULL, "qwen3moe.expert_used_count", 9, NULL, 0}, PS_ERR_FORMAT, "expert_used_count' = 9 exceeds qwen3moe.expert_count = 8"},
        {false, {"qwen3moe.expert_feed_forward_length", NULL, 0, NULL, 0}, PS_ERR_NOT_FOUND, "qwen3moe.expert_feed_forward_length"},
        {false, {NULL, NULL, 0, "blk.1.ffn_up_exps.weight", 2}, PS_ERR_FORMAT, "blk.1.ffn_up_exps.weight"},
        {false, {NULL, NULL, 0, "blk.0.ffn_down_exps.weight", 3}, PS_ERR_FORMAT, "blk.0.ffn_down_exps.weight"},
        {false, {NULL, NULL, 0, "blk.0.ffn_gate_exps.weight", 4}, PS_ERR_FORMAT, "blk.0.ffn_gate_exps.weight"},
        {false, {NULL, NULL, 0, "blk.1.ffn_gate_exps.weight", 5}, PS_ERR_UNSUPPORTED, "blk.1.ffn_gate_exps.weight"},
        {false, {NULL, NULL, 0, "blk.0.ffn_gate_inp.weight", 1}, PS_ERR_NOT_FOUND, "blk.0.ffn_gate_inp.weight"},
        {false, {NULL, NULL, 0, "blk.1.ffn_down_exps.weight", 1}, PS_ERR_NOT_FOUND, "blk.1.ffn_down_exps.weight"},
        {false, {NULL, "qwen3moe.expert_gating_func", 2, NULL, 0}, PS_ERR_UNSUPPORTED, "qwen3moe.expert_gating_func"},
        {true, {"llama.expert_count", NULL, 0, NULL, 0}, PS_ERR_NOT_FOUND, "blk.0.ffn_gate.weight"},
        {true, {"llama.expert_used_count", NULL, 0, NULL, 0}, PS_ERR_NOT_FOUND, "llama.expert_used_count"},
        {true, {NULL, "llama.expert_used_count", 5, NULL, 0}, PS_ERR_FORMAT, "llama.expert_count = 4"},
        {true, {NULL, NULL, 0, "blk.1.ffn_up_exps.weight", 4}, PS_ERR_FORMAT, "blk.1.ffn_up_exps.weight"},
    };
    for (size_t i = 0; i < PS_ARRAY_LEN(cases); i++) {
        const char *vp = rewrite(cases[i].mixtral ? gm : gq, &cases[i].d, "bad.gguf");
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

    /* expert_weights_norm = false: loads, and the weights are no longer renormalised */
    ps_gguf_writer *w = ps_gguf_writer_new();
    ps_gguf_copy_kv(w, gq, NULL);
    ps_gguf_set_bool(w, "qwen3moe.expert_weights_norm", false);
    for (int64_t i = 0; i < ps_gguf_n_tensors(gq); i++) {
        const ps_gguf_tensor *ti = ps_gguf_tensor_at(gq, i);
        char tn[128];
        snprintf(tn, sizeof tn, "%.*s", (int)ti->name.len, ti->name.ptr);
        ps_gguf_add_tensor(w, tn, ti->type, ti->n_dims, ti->ne, ti->data, ti->nbytes);
    }
    const char *np = outp("nonorm.gguf");
    CHECK(ps_gguf_write_file(w, np, &e) == PS_OK);
    ps_gguf_writer_free(w);
    ps_model *a = NULL, *b = NULL;
    ps_model_params mp = ps_model_default_params();
    CHECKF(ps_model_load(q, &mp, &a, &e) == PS_OK && ps_model_load(np, &mp, &b, &e) == PS_OK,
           "%s", e.message);
    if (a && b) {
        CHECK(a->hp.expert_norm && !b->hp.expert_norm);
        int32_t ids[9] = {1, 5, 77, 300, 12, 9, 44, 100, 200};
        float *la = logits_of(a, ids, 9, 9, NULL, PS_ACT_F32, NULL);
        float *lb = logits_of(b, ids, 9, 9, NULL, PS_ACT_F32, NULL);
        bool finite = la && lb, differ = false;
        for (int i = 0; la && lb && i < 9 * 512; i++) {
            finite = finite && isfinite(la[i]) && isfinite(lb[i]);
            differ = differ || la[i] != lb[i];
        }
        CHECK(finite && differ);
        free(la);
        free(lb);
    }
    ps_model_free(a);
    ps_model_free(b);
    ps_gguf_close(gq);
    ps_gguf_close(gm);
}

/* Every allocation failure over loading a model with experts, creating a session and one
 * forward call is a clean PS_ERR_NOMEM (no half-made model or session). */
static void test_faults(void) {
    ps_genmodel_params gp = ps_genmodel_default_params();
    ps_genmodel_preset("qwen3moe-tiny", &gp, NULL);
    gp.n_layer = 1;
    char path[512];
    snprintf(path, sizeof path, "%s", outp("faults.gguf"));
    ps_error e;
    CHECKF(ps_genmodel_write(&gp, path, &e) == PS_OK, "%s", e.message);
    const int32_t ids[5] = {1, 9, 300, 4, 77};
    float logits[5 * 512];
    int bad = 0;
    int64_t n = 0;
    for (;; n++) {
        ps_alloc_fail_after(n);
        ps_model *m = NULL;
        ps_session *s = NULL;
        ps_model_params mp = ps_model_default_params();
        ps_status st = ps_model_load(path, &mp, &m, &e);
        if (st == PS_OK) st = ps_session_create(m, NULL, &s, &e);
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
    printf("faults: %lld allocation points over load + session + forward, each a clean "
           "PS_ERR_NOMEM\n", (long long)n);
    remove(path);
}

int main(void) {
    const char *tmp = getenv("TMPDIR");
    snprintf(out_dir, sizeof out_dir, "%s/ps-test-moe-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(out_dir)) {
        CHECKF(0, "no temp dir");
        return ps_test_done("moe");
    }
    test_invariance();
    test_grouped();
    test_bad_files();
    test_faults();
    static const char *files[] = {"inv.gguf", "q3moe.gguf", "mixtral.gguf", "bad.gguf",
                                  "nonorm.gguf", "grouped.gguf"};
    for (size_t i = 0; i < PS_ARRAY_LEN(files); i++) remove(outp(files[i]));
    rmdir(out_dir);
    return ps_test_done("moe");
}
