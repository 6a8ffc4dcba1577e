/*
 * test_swa.c — sliding-window attention (ps_layer.swa), the mechanism the Gemma and gpt-oss
 * families use: a sliding layer's query at position p sees keys p - W + 1 .. p (llama.cpp's
 * STANDARD window), and the session keeps that layer's K/V in a ring of
 * min(n_ctx, W + n_batch - 1) positions.
 *
 * Kernel: ps_attn_pv_acc continuing a product over a second key run gives the bits of one
 * ps_attn_pv over both runs, every ISA the CPU has (what a wrapping ring relies on).
 * Reference: gen-model llama fixtures (F32 / BF16 / Q8_0, 3 layers, GQA) whose even layers the
 * test makes slide (W = 40, set on the loaded model: the family row comes with the Gemma and
 * gpt-oss families), 600 tokens (three chunks of 256, the rings wrap several times) with float32
 * activations against tests/reference/forward.py --swa 40 within 1e-4, every ISA.
 * Invariance: chunks of 1, 7, 100 and 256 and 2 threads give bitwise identical logits (rings
 * of 40, 46, 139 and 295 positions); the first 200 positions of a session whose ring holds
 * everything (n_ctx 200) match the ringed 600-token session bit for bit; a window wider than
 * the prompt gives the bits of global attention; the window changes the logits (the test is
 * not vacuous).
 * Memory: the ringed session holds fewer KV floats than the full one, by the ring's arithmetic.
 * Truncation: dropping up to n_batch positions and re-running them gives the same bits;
 * dropping more is PS_ERR_UNSUPPORTED (the ring no longer holds the keys) and changes nothing.
 * The numpy part is skipped (never passed) without /usr/bin/python3 and numpy.
 */
#include "check.h"
#include "fixture.h"
#include "gen/genmodel.h"
#include "base/impl.h"
#include "run/attention.h"
#include "kernels/matmul.h"
#include "run/session.h"
#include "promptscore.h"

#include <math.h>

#define N_TOK 600
#define WIN 40

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static float frand(void) {
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(rng_state >> 11) * 0x1.0p-53 * 2.0 - 1.0);
}

static const ps_isa ISAS[] = {PS_ISA_SCALAR, PS_ISA_AVX2, PS_ISA_AVX512};

/* ---------------------------------------------------------------- kernel */

static void test_pv_acc(void) {
    enum { NQ = 13, NK = 77, HD = 80, SPLIT = 29 };
    static float p[NQ * NK], v[NK * HD], whole[NQ * HD], split[NQ * HD];
    for (int i = 0; i < NQ * NK; i++) p[i] = frand();
    for (int i = 0; i < NK * HD; i++) v[i] = frand();
    int32_t nk[NQ], na[NQ], nb[NQ];
    for (int q = 0; q < NQ; q++) {
        nk[q] = NK - 3 * q;
        na[q] = PS_MIN(nk[q], SPLIT);
        nb[q] = nk[q] - na[q];
    }
    for (size_t t = 0; t < PS_ARRAY_LEN(ISAS); t++) {
        if (!ps_isa_supported(ISAS[t])) continue;
        ps_attn_pv(ISAS[t], p, NK, nk, NQ, v, PS_KV_F32, HD, whole, HD);
        ps_attn_pv(ISAS[t], p, NK, na, NQ, v, PS_KV_F32, HD, split, HD);
        ps_attn_pv_acc(ISAS[t], p + SPLIT, NK, nb, NQ, v + SPLIT * HD, PS_KV_F32, HD, split, HD);
        CHECKF(!memcmp(whole, split, sizeof whole),
               "ps_attn_pv_acc over a second run differs from one ps_attn_pv on %s",
               ps_isa_name(ISAS[t]));
    }
}

/* ---------------------------------------------------------------- the model */

typedef struct {
    int32_t n_ctx, chunk, threads, win;
    ps_isa isa;
    int32_t truncate_to;   /* > 0: after the run, truncate there and run the rest again */
    int64_t kv_floats;     /* out */
} run_opts;

static void swa_windows(ps_model *m, void *ud) {
    const run_opts *o = ud;
    for (int32_t l = 0; l < m->hp.n_layer; l++) m->w.layers[l].swa = l % 2 == 0 ? o->win : 0;
}

/* After the run: truncate too far (refused), then to o->truncate_to, and run the rest again. */
static void swa_truncate(ps_session *s, const int32_t *ids, int32_t n, const float *out,
                         void *ud) {
    const run_opts *o = ud;
    ps_error e;
    ps_status st = PS_OK;
    const size_t nv = (size_t)s->model->hp.n_vocab, nf = (size_t)n * nv;
    /* more than n_batch dropped: refused, nothing changes */
    const int32_t too_far = n - o->chunk - 1;
    CHECKF(ps_session_truncate(s, too_far) == PS_ERR_UNSUPPORTED,
           "truncating %d positions into a ring of %lld is accepted", n - too_far,
           (long long)s->seq->kv_len[0]);
    CHECK(ps_session_n_past(s) == n);
    CHECK(ps_session_truncate(s, o->truncate_to) == PS_OK);
    float *again = malloc(nf * sizeof(float));
    for (int32_t i = o->truncate_to; i < n; i += o->chunk) {
        int32_t k = PS_MIN(o->chunk, n - i);
        st = ps_session_forward(s, ids + i, k, again + (size_t)i * nv, &e);
        CHECKF(st == PS_OK, "forward after truncate at %d: %s", i, e.message);
        if (st != PS_OK) break;
    }
    const size_t off = (size_t)o->truncate_to * nv;
    CHECKF(st == PS_OK && !memcmp(out + off, again + off, (nf - off) * 4),
           "re-running %d positions after a truncate gives other bits", n - o->truncate_to);
    free(again);
}

/* Loads path, makes the even layers slide with window o->win (0: none), runs ids (n) in chunks
 * and returns the logits (malloc) or NULL. */
static float *swa_logits(const char *path, const int32_t *ids, int32_t n, run_opts *o,
                         int64_t *n_vocab) {
    fx_run r = fx_run_of(o->chunk, o->isa, PS_ACT_F32, o->threads);
    r.n_ctx = o->n_ctx;
    r.on_model = swa_windows;
    r.on_done = o->truncate_to > 0 ? swa_truncate : NULL;
    r.ud = o;
    float *out = c_logits_run(path, ids, n, &r, n_vocab);
    o->kv_floats = r.kv_floats;
    return out;
}

static void test_reference(bool numpy) {
    static const uint32_t types[] = {PS_GGML_F32, PS_GGML_BF16, PS_GGML_Q8_0};
    for (size_t i = 0; i < PS_ARRAY_LEN(types); i++) {
        ps_genmodel_params p = ps_genmodel_default_params();
        p.type = types[i];
        p.n_layer = 3;
        p.n_embd = 64;
        p.n_head = 4;
        p.n_head_kv = i == 1 ? 1 : 2;
        p.head_dim = 16;
        p.n_ctx = 1024;
        p.seed = 500 + i;
        char tag[64];
        snprintf(tag, sizeof tag, "swa-llama-%s", ps_ggml_type_name(types[i]));
        char path[700];
        snprintf(path, sizeof path, "%s.gguf", outp(tag));
        ps_error e;
        ps_status st = ps_genmodel_write(&p, path, &e);
        CHECKF(st == PS_OK, "%s: %s", tag, e.message);
        if (st != PS_OK) continue;
        int32_t *ids = make_ids(N_TOK, p.n_vocab, 0x1234567ull);
        int64_t nv = 0;
        char swa_arg[32];
        snprintf(swa_arg, sizeof swa_arg, "--swa %d", WIN);
        double *r = numpy ? ref_logits_args(path, ids, N_TOK, p.n_vocab, tag, swa_arg, false)
                          : NULL;
        if (numpy) CHECKF(r != NULL, "%s: no reference logits", tag);
        float *best = NULL;
        int64_t ring_kv = 0;
        for (size_t k = 0; k < PS_ARRAY_LEN(ISAS); k++) {
            if (!ps_isa_supported(ISAS[k])) continue;
            run_opts o = {N_TOK, 256, 1, WIN, ISAS[k], 0, 0};
            float *c = swa_logits(path, ids, N_TOK, &o, &nv);
            if (!c) continue;
            ring_kv = o.kv_floats;
            if (r) {
                double md = 0, mr = 0;
                int64_t at = 0;
                for (int64_t j = 0; j < (int64_t)N_TOK * nv; j++) {
                    double dd = fabs((double)c[j] - r[j]);
                    if (!(dd <= md)) md = dd, at = j;
                    mr = fmax(mr, fabs(r[j]));
                }
                printf("  %-20s %-6s f32  T=%d W=%d max|ref| %.3f max|C-ref| %.3g (row %lld)\n",
                       tag, ps_isa_name(ISAS[k]), N_TOK, WIN, mr, md, (long long)(at / nv));
                CHECKF(md <= 1e-4, "%s %s: max |C - ref| = %g at row %lld", tag,
                       ps_isa_name(ISAS[k]), md, (long long)(at / nv));
            }
            free(best);
            best = c;
        }
        if (!best) {
            free(r);
            free(ids);
            continue;
        }
        const size_t nf = (size_t)N_TOK * (size_t)nv;
        const ps_isa isa = ps_isa_best();
        /* memory: 3 layers x (n_head_kv x 16) floats per position for K and V; the sliding
         * layers (0 and 2) hold a ring of 40 + 255 = 295 positions (K rounded to 16 keys) */
        {
            const int64_t dkv = (int64_t)p.n_head_kv * p.head_dim;
            const int64_t want = dkv * (608 + 600) + 2 * dkv * (304 + 295);
            CHECKF(ring_kv == want, "%s: KV floats %lld, expected %lld", tag,
                   (long long)ring_kv, (long long)want);
            run_opts o = {N_TOK, 256, 1, 0, isa, 0, 0};
            float *g = swa_logits(path, ids, N_TOK, &o, &nv);
            CHECKF(o.kv_floats == 3 * dkv * (608 + 600), "%s: global KV floats %lld", tag,
                   (long long)o.kv_floats);
            /* the window matters: global attention gives other logits */
            double md = 0;
            for (size_t j = 0; g && j < nf; j++) md = fmax(md, fabs((double)g[j] - best[j]));
            CHECKF(md > 1e-3, "%s: the window changes the logits by only %g", tag, md);
            free(g);
            /* a window wider than the prompt: the bits of global attention */
            run_opts wide = {N_TOK, 256, 1, 5000, isa, 0, 0};
            float *w1 = swa_logits(path, ids, N_TOK, &wide, &nv);
            o.win = 0;
            float *g2 = swa_logits(path, ids, N_TOK, &o, &nv);
            CHECKF(w1 && g2 && !memcmp(w1, g2, nf * 4),
                   "%s: a window of 5000 differs from global attention", tag);
            free(w1);
            free(g2);
        }
        /* 2 threads and other chunkings (other ring sizes): the same bits */
        {
            run_opts o = {N_TOK, 256, 2, WIN, isa, 0, 0};
            float *c2 = swa_logits(path, ids, N_TOK, &o, &nv);
            CHECKF(c2 && !memcmp(c2, best, nf * 4), "%s: 2 threads differ from 1", tag);
            free(c2);
            const int32_t chunks[3] = {1, 7, 100};
            for (int j = 0; j < 3; j++) {
                if (chunks[j] == 1 && i != 0) continue; /* chunk 1 once: slow */
                run_opts oc = {N_TOK, chunks[j], j == 1 ? 2 : 1, WIN, isa, 0, 0};
                float *cc = swa_logits(path, ids, N_TOK, &oc, &nv);
                CHECKF(cc && !memcmp(cc, best, nf * 4), "%s: chunk %d differs from 256", tag,
                       chunks[j]);
                free(cc);
            }
            /* a session whose ring holds every position (n_ctx 200 < 295) */
            run_opts os = {200, 256, 1, WIN, isa, 0, 0};
            float *cs = swa_logits(path, ids, 200, &os, &nv);
            CHECKF(cs && !memcmp(cs, best, (size_t)200 * (size_t)nv * 4),
                   "%s: an unringed session differs from the ringed one", tag);
            free(cs);
            /* truncation: drop the last 256 (allowed: the ring keeps them) and re-run */
            run_opts ot = {N_TOK, 256, 1, WIN, isa, N_TOK - 256, 0};
            float *ct = swa_logits(path, ids, N_TOK, &ot, &nv);
            CHECKF(ct && !memcmp(ct, best, nf * 4), "%s: a truncating run differs", tag);
            free(ct);
        }
        free(best);
        free(r);
        free(ids);
    }
}

int main(void) {
    const char *tmp = getenv("TMPDIR");
    snprintf(out_dir, sizeof out_dir, "%s/ps_swa_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(out_dir)) snprintf(out_dir, sizeof out_dir, ".");
    test_pv_acc();
    bool numpy = access(FORWARD_PY, R_OK) == 0 &&
                 system(PYTHON " -c 'import numpy' 2>/dev/null") == 0;
    if (!numpy) SKIP("C vs numpy: " PYTHON " with numpy or " FORWARD_PY " is not available");
    test_reference(numpy);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", out_dir);
    if (strcmp(out_dir, ".")) (void)!system(cmd);
    return ps_test_done("swa");
}
