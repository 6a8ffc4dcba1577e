/*
 * test_hybrid.c — the Qwen3.5 / 3.6 hybrid (`qwen35`): Gated DeltaNet layers and gated
 * full-attention layers, with recurrent state in the session.
 *
 * Kernels: ps_dn_delta_head (ps_dot_f32 / ps_axpy_f32 order) against its double-precision
 * reference on random heads, every ISA the CPU has; split into token runs of 1, 7 and the rest
 * it gives the same bits as one call (the state carries exactly).
 * Reference: gen-model qwen35 and qwen35moe (8 experts, 2 used, a gated shared expert) fixtures
 * x F32 / F16 / BF16 / Q8_0 (GQA 4/2 and 4/1, MHA 4/4, tied and untied, key heads tiled over
 * value heads, rope on part of the head with 4 sections and an MTP block in the file) over
 * 600 tokens (three chunks of 256, so state and KV carry across
 * chunk boundaries twice) with float32 activations against tests/reference/forward.py within
 * 1e-4, on every ISA; 2 threads bitwise equal to 1.
 * Invariance: chunks of 1, 7, 100 and 256 give bitwise identical logits; a reset session gives
 * the same bits again; truncating into a recurrent state is refused.
 * Bad input: a missing ssm tensor, rope sections unknown (missing key, wrong length, all zero),
 * a conv kernel of the wrong shape, value heads not a multiple of key heads, expert_used_count
 * above expert_count, a missing or mis-shaped shared-expert tensor — each an error naming the
 * key or tensor.
 * Faults: every allocation failure over load + session + forward of a qwen35moe model is a
 * clean PS_ERR_NOMEM.
 * The numpy part is skipped (never passed) without /usr/bin/python3 and numpy.
 */
#include "check.h"
#include "fixture.h"
#include "refcmp.h"
#include "base/testhooks.h"
#include "run/deltanet.h"
#include "kernels/expf_libc.h"
#include "gen/genmodel.h"
#include "gguf/gguf.h"
#include "base/impl.h"
#include "promptscore.h"
#include "model/vocab.h"

#include <math.h>
#include <sys/stat.h>

#define N_TOK 600

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static float frand(void) {
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(rng_state >> 11) * 0x1.0p-53 * 2.0 - 1.0);
}

/* ---------------------------------------------------------------- kernels */

/* The lane order of the AVX2 (w = 8) and AVX-512 (w = 16) delta rule in plain C: lane l sums
 * the elements i = l mod w in index order with fused multiply-adds, then the fixed tree of
 * hsum_avx2 / hsum_avx512 (l + l+8 for 16 lanes, then l + l+4, l + l+2, l + l+1); the decay
 * a product rounded on its own. The vector kernels must give these bits exactly. */
static float lanes_sum(const float *acc, int w) {
    float h[16];
    for (int l = 0; l < w; l++) h[l] = acc[l];
    for (int half = w / 2; half >= 1; half /= 2)
        for (int l = 0; l < half; l++) h[l] = h[l] + h[l + half];
    return h[0];
}

static void delta_lanes(float *S, int64_t d, int32_t n, const float *q, const float *k,
                        const float *v, float *o, const float *g, const float *beta,
                        float scale, int w) {
    for (int32_t t = 0; t < n; t++) {
        const float *qt = q + t * d, *kt = k + t * d, *vt = v + t * d;
        const float decay = expf(g[t]), b = beta[t];
        for (int64_t j = 0; j < d; j++) {
            float *row = S + j * d, acc[16] = {0};
            for (int64_t i = 0; i < d; i++) {
                row[i] = row[i] * decay;
                acc[i % w] = fmaf(row[i], kt[i], acc[i % w]);
            }
            const float dl = (vt[j] - lanes_sum(acc, w)) * b;
            memset(acc, 0, sizeof acc);
            for (int64_t i = 0; i < d; i++) {
                row[i] = fmaf(kt[i], dl, row[i]);
                acc[i % w] = fmaf(row[i], qt[i], acc[i % w]);
            }
            o[t * d + j] = lanes_sum(acc, w) * scale;
        }
    }
}

static void test_delta_lanes(void) {
    /* d = 128 (the Qwen3.5 / 3.6 heads) and 48, 300 tokens (past one 256-token block) */
    static const int64_t dims[2] = {128, 48};
    const int32_t n = 300;
    float *q = malloc(sizeof(float) * n * 128), *k = malloc(sizeof(float) * n * 128),
          *v = malloc(sizeof(float) * n * 128), *g = malloc(sizeof(float) * n),
          *b = malloc(sizeof(float) * n), *S0 = malloc(sizeof(float) * 128 * 128),
          *S1 = malloc(sizeof(float) * 128 * 128), *S2 = malloc(sizeof(float) * 128 * 128),
          *o1 = malloc(sizeof(float) * n * 128), *o2 = malloc(sizeof(float) * n * 128);
    for (int64_t i = 0; i < n * 128; i++)
        q[i] = 0.1f * frand(), k[i] = 0.1f * frand(), v[i] = frand();
    for (int32_t t = 0; t < n; t++) g[t] = -0.1f * (frand() + 1.0f), b[t] = 0.5f + 0.5f * frand();
    static const ps_isa isas[] = {PS_ISA_AVX2, PS_ISA_AVX512};
    for (int di = 0; di < 2; di++) {
        const int64_t d = dims[di];
        for (int64_t i = 0; i < d * d; i++) S0[i] = 0.1f * frand();
        for (size_t ii = 0; ii < PS_ARRAY_LEN(isas); ii++) {
            if (!ps_isa_supported(isas[ii])) {
                PS_TEST_CPU_LACKS("%s: the delta rule's lane order", ps_isa_name(isas[ii]));
                continue;
            }
            const int w = isas[ii] == PS_ISA_AVX2 ? 8 : 16;
            memcpy(S1, S0, sizeof(float) * d * d);
            memcpy(S2, S0, sizeof(float) * d * d);
            delta_lanes(S1, d, n, q, k, v, o1, g, b, 0.25f, w);
            ps_dn_delta_head(isas[ii], S2, d, n, q, k, d, v, d, o2, d, g, b, 1, 0.25f);
            CHECKF(!memcmp(S1, S2, sizeof(float) * d * d) && !memcmp(o1, o2, sizeof(float) * n * d),
                   "delta rule d %d %s: not the bits of its %d-lane order in C", (int)d,
                   ps_isa_name(isas[ii]), w);
        }
    }
    free(q), free(k), free(v), free(g), free(b), free(S0), free(S1), free(S2), free(o1), free(o2);
}

/* 16 expf by the vector form of isa (AVX2: two of 8 lanes). */
static void expf16_of(ps_isa isa, const float *x, float *y);
#if defined(__x86_64__)
PS_TARGET_AVX512_DQ static void expf16_avx512(const float *x, float *y) {
    _mm512_storeu_ps(y, ps_expf16(_mm512_loadu_ps(x)));
}
PS_TARGET_AVX2 static void expf16_avx2(const float *x, float *y) {
    _mm256_storeu_ps(y, ps_expf8(_mm256_loadu_ps(x)));
    _mm256_storeu_ps(y + 8, ps_expf8(_mm256_loadu_ps(x + 8)));
}
static void expf16_of(ps_isa isa, const float *x, float *y) {
    if (isa == PS_ISA_AVX512) expf16_avx512(x, y);
    else expf16_avx2(x, y);
}
#else
static void expf16_of(ps_isa isa, const float *x, float *y) {
    (void)isa;
    for (int l = 0; l < 16; l++) y[l] = expf(x[l]);
}
#endif

/* ps_expf8 / ps_expf16 (expf_libc.h) against the C library's expf: two hard cases, every 4099th
 * float of the 2^32 bit patterns (both signs, zeros, subnormals, the normal range, inf and NaN)
 * and every float of [-1, 1] that is a multiple of 2^-20, and of [-104, 89] that is a multiple
 * of 2^-12 (the rounding of k and the special path at |x| >= 88 and below -103.97), bit for
 * bit. */
static void test_expf_lanes(ps_isa isa) {
    if (!ps_isa_supported(isa)) {
        PS_TEST_CPU_LACKS("%s: the vector expf", ps_isa_name(isa));
        return;
    }
    float xs[16], want[16], got[16];
    int64_t n = 0, bad = 0;
    float first_bad = 0.0f;
    int nl = 0;
    const int64_t sweeps[3][3] = {{0, (int64_t)1 << 32, 4099}, {-(1 << 20), 1 << 20, 1},
                                  {-104 * 4096, 89 * 4096, 1}};
    /* the two floats of |x| < 88 whose expf changes when r = x * 32 / ln 2 - k is not fused
     * (an exhaustive search over the 2^32 floats), repeated to fill a first vector */
    static const uint32_t hard[2] = {0x4202422f, 0xc27c65d9};
    for (int sw = -1; sw < 3; sw++)
        for (int64_t u = sw < 0 ? 0 : sweeps[sw][0]; u < (sw < 0 ? 16 : sweeps[sw][1]);
             u += sw < 0 ? 1 : sweeps[sw][2]) {
            float x;
            if (sw < 0) {
                memcpy(&x, &hard[u % 2], 4);
            } else if (sw == 0) {
                const uint32_t bits = (uint32_t)u;
                memcpy(&x, &bits, 4);
            } else {
                x = sw == 1 ? (float)u * 0x1p-20f : (float)u * 0x1p-12f;
            }
            xs[nl++] = x;
            if (nl < 16) continue;
            nl = 0;
            expf16_of(isa, xs, got);
            for (int l = 0; l < 16; l++) {
                want[l] = expf(xs[l]);
                n++;
                if (memcmp(&want[l], &got[l], 4) && !(isnan(want[l]) && isnan(got[l]))) {
                    if (!bad) first_bad = xs[l];
                    bad++;
                }
            }
        }
    CHECKF(bad == 0, "%s expf: %lld of %lld values not the bits of expf (first at %a)",
           ps_isa_name(isa), (long long)bad, (long long)n, (double)first_bad);
    fprintf(stderr, "NOTE: %s expf against expf: %lld values, %lld differ\n", ps_isa_name(isa),
            (long long)n, (long long)bad);
}

/* The vector conv + silu against the scalar loop, bit for bit: 40 channels (AVX-512: two
 * blocks of 16 and a scalar tail of 8; AVX2: five of 8), channel slices of 24 + 16, d_conv 4,
 * values large enough that some sums reach expf's special path (|sum| >= 88). */
static void test_conv_isa(ps_isa isa) {
    if (!ps_isa_supported(isa)) {
        PS_TEST_CPU_LACKS("%s: the vector conv + silu", ps_isa_name(isa));
        return;
    }
    enum { CH = 40, T = 30, DC = 4 };
    float x[T * CH], w[CH * DC], st0[(DC - 1) * CH], st1[(DC - 1) * CH], st2[(DC - 1) * CH],
        y1[T * CH], y2[T * CH];
    for (int i = 0; i < T * CH; i++) x[i] = (i % 97 == 0 ? 400.0f : 3.0f) * frand();
    for (int i = 0; i < CH * DC; i++) w[i] = frand();
    for (int i = 0; i < (DC - 1) * CH; i++) st0[i] = frand();
    memcpy(st1, st0, sizeof st0);
    memcpy(st2, st0, sizeof st0);
    ps_dn_conv_silu(PS_ISA_SCALAR, x, CH, T, st1, w, DC, CH, 0, CH, y1, CH);
    ps_dn_conv_silu(isa, x, CH, T, st2, w, DC, CH, 0, 24, y2, CH);
    ps_dn_conv_silu(isa, x, CH, T, st2, w, DC, CH, 24, CH, y2, CH);
    int big = 0;
    for (int i = 0; i < T * CH; i++) big += fabsf(y1[i]) >= 88.0f;
    CHECKF(!memcmp(y1, y2, sizeof y1) && !memcmp(st1, st2, sizeof st1),
           "conv + silu: %s is not the scalar loop's bits", ps_isa_name(isa));
    CHECKF(big > 0, "conv + silu: no sum reached expf's special path");
}

static void test_delta_kernel(void) {
    /* d = 32: the AVX-512 (16-lane) and AVX2 (8-lane) forms; d = 24: AVX-512 falls back to the
     * 8-lane form; d = 12: every ISA takes the scalar form */
    static const int64_t dims[3] = {32, 24, 12};
    const int32_t n = 20;
    float *q = malloc(sizeof(float) * n * 32), *k = malloc(sizeof(float) * n * 32),
          *v = malloc(sizeof(float) * n * 32), g[20], b[20];
    for (int64_t i = 0; i < n * 32; i++) q[i] = frand(), k[i] = frand(), v[i] = frand();
    for (int32_t t = 0; t < n; t++) g[t] = -0.5f * (frand() + 1.0f), b[t] = 0.5f + 0.5f * frand();
    for (int di = 0; di < 3; di++) {
        const int64_t d = dims[di];
        float S0[32 * 32];
        for (int64_t i = 0; i < d * d; i++) S0[i] = 0.1f * frand();
        float Sr[32 * 32], orf[20 * 32];
        memcpy(Sr, S0, sizeof S0);
        ps_dn_delta_head_ref(Sr, d, n, q, k, d, v, d, orf, d, g, b, 1, 0.2f);
        static const ps_isa isas[] = {PS_ISA_SCALAR, PS_ISA_AVX2, PS_ISA_AVX512};
        for (size_t ii = 0; ii < PS_ARRAY_LEN(isas); ii++) {
            if (!ps_isa_supported(isas[ii])) continue;
            float S[32 * 32], o[20 * 32], S2[32 * 32], o2[20 * 32];
            memcpy(S, S0, sizeof S0);
            ps_dn_delta_head(isas[ii], S, d, n, q, k, d, v, d, o, d, g, b, 1, 0.2f);
            double md = 0;
            for (int64_t i = 0; i < n * d; i++) md = fmax(md, fabs((double)o[i] - orf[i]));
            for (int64_t i = 0; i < d * d; i++) md = fmax(md, fabs((double)S[i] - Sr[i]));
            CHECKF(md < 1e-5, "delta rule d %d %s vs reference: max diff %g", (int)d,
                   ps_isa_name(isas[ii]), md);
            /* token runs 1, 7, 12: the same bits as one call */
            memcpy(S2, S0, sizeof S0);
            const int32_t runs[3] = {1, 7, 12};
            for (int32_t r = 0, t0 = 0; r < 3; t0 += runs[r], r++)
                ps_dn_delta_head(isas[ii], S2, d, runs[r], q + t0 * d, k + t0 * d, d,
                                 v + t0 * d, d, o2 + t0 * d, d, g + t0, b + t0, 1, 0.2f);
            CHECKF(!memcmp(S, S2, (size_t)(d * d) * 4) && !memcmp(o, o2, (size_t)(n * d) * 4),
                   "delta rule d %d %s: split runs differ from one call", (int)d,
                   ps_isa_name(isas[ii]));
        }
    }
    /* conv: channel slices and token splits give the same bits */
    const int64_t ch = 10;
    float x[12 * 10], w[10 * 4], st0[3 * 10], y1[12 * 10], y2[12 * 10], st1[30], st2[30];
    for (int i = 0; i < 120; i++) x[i] = frand();
    for (int i = 0; i < 40; i++) w[i] = frand();
    for (int i = 0; i < 30; i++) st0[i] = frand();
    memcpy(st1, st0, sizeof st0);
    memcpy(st2, st0, sizeof st0);
    ps_dn_conv_silu(PS_ISA_SCALAR, x, ch, 12, st1, w, 4, ch, 0, ch, y1, ch);
    ps_dn_conv_silu(PS_ISA_SCALAR, x, ch, 5, st2, w, 4, ch, 0, 4, y2, ch);
    ps_dn_conv_silu(PS_ISA_SCALAR, x, ch, 5, st2, w, 4, ch, 4, ch, y2, ch);
    ps_dn_conv_silu(PS_ISA_SCALAR, x + 5 * ch, ch, 7, st2, w, 4, ch, 0, ch, y2 + 5 * ch, ch);
    CHECK(!memcmp(y1, y2, sizeof y1) && !memcmp(st1, st2, sizeof st1));
    /* and the formula at one point: t = 1, channel 3, taps over state[1], state[2], x0, x1 */
    float want = st0[1 * ch + 3] * w[3 * 4 + 0] + st0[2 * ch + 3] * w[3 * 4 + 1] +
                 x[3] * w[3 * 4 + 2] + x[ch + 3] * w[3 * 4 + 3];
    want = want / (1.0f + expf(-want));
    CHECKF(fabsf(y1[ch + 3] - want) < 1e-6f, "conv: %g, want %g", (double)y1[ch + 3],
           (double)want);
    free(q);
    free(k);
    free(v);
}

/* ---------------------------------------------------------------- the model */

static ps_genmodel_params fixture(const char *preset, uint32_t type, int32_t n_head_kv, bool tied,
                                  uint64_t seed) {
    ps_genmodel_params p = ps_genmodel_default_params();
    ps_genmodel_preset(preset, &p, NULL);
    p.type = type;
    p.n_head_kv = n_head_kv;
    p.tied = tied;
    p.seed = seed;
    p.n_ctx = 1024;
    return p;
}

/* After the run: one state for every position, so only 0 or n_past can be kept. */
static void hybrid_truncate(ps_session *s, const int32_t *ids, int32_t n, const float *out,
                            void *ud) {
    (void)ids;
    (void)out;
    (void)ud;
    CHECK(ps_session_truncate(s, n / 2) == PS_ERR_UNSUPPORTED);
    CHECK(ps_session_n_past(s) == n);
    CHECK(ps_session_truncate(s, n) == PS_OK);
}

/* Logits (n, n_vocab) of the ids in chunks of `chunk` (malloc) or NULL. Forwards the whole
 * prompt `passes` times on one session, resetting in between, and checks each pass is the same. */
static float *hybrid_logits(const char *path, const int32_t *ids, int32_t n, int32_t chunk,
                            ps_isa isa, ps_act act, int32_t threads, int passes,
                            int64_t *n_vocab) {
    fx_run r = fx_run_of(chunk, isa, act, threads);
    r.passes = passes;
    r.on_done = hybrid_truncate;
    return c_logits_run(path, ids, n, &r, n_vocab);
}

typedef struct {
    const char *preset;
    uint32_t type;
    int32_t n_head_kv;
    bool tied;
} fx;

static void test_reference(bool numpy) {
    static const fx fxs[] = {
        {"qwen35-tiny", PS_GGML_F32, 2, false},    {"qwen35-tiny", PS_GGML_F16, 4, true},
        {"qwen35-tiny", PS_GGML_BF16, 1, false},   {"qwen35-tiny", PS_GGML_Q8_0, 2, true},
        {"qwen35moe-tiny", PS_GGML_F32, 2, true},  {"qwen35moe-tiny", PS_GGML_F16, 1, false},
        {"qwen35moe-tiny", PS_GGML_BF16, 4, true}, {"qwen35moe-tiny", PS_GGML_Q8_0, 2, false},
    };
    static const ps_isa isas[] = {PS_ISA_SCALAR, PS_ISA_AVX2, PS_ISA_AVX512};
    for (size_t i = 0; i < PS_ARRAY_LEN(fxs); i++) {
        ps_genmodel_params p =
            fixture(fxs[i].preset, fxs[i].type, fxs[i].n_head_kv, fxs[i].tied, 300 + i);
        char tag[64];
        snprintf(tag, sizeof tag, "%s-%s-kv%d%s", p.arch, ps_ggml_type_name(fxs[i].type),
                 fxs[i].n_head_kv, fxs[i].tied ? "-tied" : "");
        char path[700];
        snprintf(path, sizeof path, "%s.gguf", outp(tag));
        ps_error e;
        ps_status st = ps_genmodel_write(&p, path, &e);
        CHECKF(st == PS_OK, "%s: %s", tag, e.message);
        if (st != PS_OK) continue;
        int32_t *ids = make_ids(N_TOK, p.n_vocab, 0x1234567ull);
        int64_t nv = 0;
        double *r = numpy ? ref_logits_args(path, ids, N_TOK, p.n_vocab, tag, "", false) : NULL;
        if (numpy) CHECKF(r != NULL, "%s: no reference logits", tag);
        float *best = NULL;
        for (size_t k = 0; k < PS_ARRAY_LEN(isas); k++) {
            if (!ps_isa_supported(isas[k])) continue;
            float *c = hybrid_logits(path, ids, N_TOK, 256, isas[k], PS_ACT_F32, 1, k == 0 ? 2 : 1,
                                &nv);
            if (!c) continue;
            if (r) ref_check(tag, 24, ps_isa_name(isas[k]), N_TOK, c, r, nv);
            free(best);
            best = c;
        }
        /* 2 threads and other chunkings: the same bits as 1 thread in chunks of 256; native
         * activations run and are chunk- and thread-invariant too (chunk 1 once per arch) */
        if (best) {
            fx_run run = fx_run_of(256, ps_isa_best(), PS_ACT_F32, 1);
            run.on_done = hybrid_truncate;
            invariance_check(tag, path, ids, N_TOK, run, best, &nv, i % 4 == 0);
        }
        free(best);
        free(r);
        free(ids);
    }
}

/* ---------------------------------------------------------------- bad input */

typedef enum {
    B_NO_SSM, B_NO_SECTIONS, B_SECTIONS_3, B_SECTIONS_ZERO, B_CONV_SHAPE, B_HEADS,
    B_MOE_USED, B_MOE_NO_SHEXP, B_MOE_SHEXP_SHAPE
} bad;

/* Rewrites the F32 tiny qwen35 file with one defect; loads it; returns the error. */
static ps_status load_bad(const char *src, bad b, ps_error *e) {
    ps_gguf *g = NULL;
    if (ps_gguf_open(src, &g, e) != PS_OK) return PS_ERR_IO;
    ps_gguf_writer *w = ps_gguf_writer_new();
    for (int64_t i = 0; i < ps_gguf_n_kv(g); i++) {
        ps_gguf_str k = ps_gguf_key(g, i);
        char key[256];
        snprintf(key, sizeof key, "%.*s", (int)k.len, k.ptr);
        if (b == B_NO_SECTIONS && !strcmp(key, "qwen35.rope.dimension_sections")) continue;
        ps_gguf_copy_kv(w, g, key);
    }
    if (b == B_SECTIONS_3) {
        const int32_t sec[3] = {4, 2, 2};
        ps_gguf_set_arr(w, "qwen35.rope.dimension_sections", PS_GGUF_INT32, sec, 3);
    }
    if (b == B_SECTIONS_ZERO) {
        const int32_t sec[4] = {0, 0, 0, 4};
        ps_gguf_set_arr(w, "qwen35.rope.dimension_sections", PS_GGUF_INT32, sec, 4);
    }
    if (b == B_HEADS) ps_gguf_set_u32(w, "qwen35.ssm.time_step_rank", 3);
    if (b == B_MOE_USED) ps_gguf_set_u32(w, "qwen35moe.expert_used_count", 9);
    for (int64_t i = 0; i < ps_gguf_n_tensors(g); i++) {
        const ps_gguf_tensor *t = ps_gguf_tensor_at(g, i);
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.ptr);
        int64_t ne[4] = {t->ne[0], t->ne[1], t->ne[2], t->ne[3]};
        if (b == B_NO_SSM && !strcmp(name, "blk.1.ssm_a")) continue;
        if (b == B_MOE_NO_SHEXP && !strcmp(name, "blk.2.ffn_up_shexp.weight")) continue;
        uint64_t nbytes = t->nbytes;
        if (b == B_MOE_SHEXP_SHAPE && !strcmp(name, "blk.3.ffn_down_shexp.weight")) {
            ne[1] = t->ne[1] / 2; /* half the output rows */
            nbytes /= 2;
        }
        if (b == B_CONV_SHAPE && !strcmp(name, "blk.2.ssm_conv1d.weight")) {
            ne[0] = t->ne[1];
            ne[1] = t->ne[0];
        }
        ps_gguf_add_tensor(w, name, t->type, t->n_dims, ne, t->data, nbytes);
    }
    const char *path = outp("bad.gguf");
    ps_status st = ps_gguf_write_file(w, path, e);
    ps_gguf_writer_free(w);
    ps_gguf_close(g);
    if (st != PS_OK) return PS_ERR_IO;
    ps_model *m = NULL;
    ps_model_params mp = ps_model_default_params();
    st = ps_model_load(path, &mp, &m, e);
    ps_model_free(m);
    return st;
}

static void test_bad_input(void) {
    ps_genmodel_params p = fixture("qwen35-tiny", PS_GGML_F32, 2, false, 7);
    char src[700], src_moe[700]; /* outp's buffers rotate: keep copies */
    snprintf(src, sizeof src, "%s", outp("bad-src.gguf"));
    snprintf(src_moe, sizeof src_moe, "%s", outp("bad-src-moe.gguf"));
    ps_error e;
    CHECK(ps_genmodel_write(&p, src, &e) == PS_OK);
    ps_genmodel_params pm = fixture("qwen35moe-tiny", PS_GGML_F32, 2, false, 8);
    CHECK(ps_genmodel_write(&pm, src_moe, &e) == PS_OK);
    /* the source itself loads */
    ps_model *m = NULL;
    ps_model_params mp = ps_model_default_params();
    CHECKF(ps_model_load(src, &mp, &m, &e) == PS_OK, "%s", e.message);
    ps_model_info info;
    ps_model_get_info(m, &info);
    CHECKF(info.n_layer == 4, "n_layer %d: the MTP block is not counted", info.n_layer);
    ps_model_free(m);
    /* the MTP block (blk.4) is whole, as real files hold it: a full-attention block and its
     * nextn tensors (llama.cpp refuses a file whose MTP block lacks any of them) */
    const char *src_of[2] = {src, src_moe};
    for (int f = 0; f < 2; f++) {
        ps_gguf *g = NULL;
        CHECK(ps_gguf_open(src_of[f], &g, &e) == PS_OK);
        const char *mtp[] = {"attn_norm.weight", "post_attention_norm.weight", "attn_q.weight",
                             "attn_k.weight", "attn_v.weight", "attn_output.weight",
                             "attn_q_norm.weight", "attn_k_norm.weight",
                             "nextn.eh_proj.weight", "nextn.enorm.weight", "nextn.hnorm.weight",
                             f ? "ffn_down_exps.weight" : "ffn_down.weight",
                             f ? "ffn_gate_inp.weight" : "ffn_up.weight",
                             f ? "ffn_up_shexp.weight" : "ffn_gate.weight"};
        for (size_t i = 0; g && i < PS_ARRAY_LEN(mtp); i++) {
            char name[96];
            snprintf(name, sizeof name, "blk.4.%s", mtp[i]);
            CHECKF(ps_gguf_find_tensor(g, name) != NULL, "%s: the MTP block holds %s",
                   f ? "qwen35moe" : "qwen35", name);
        }
        ps_gguf_close(g);
    }
    struct {
        bad b;
        ps_status code;
        const char *names;
    } cases[] = {
        {B_NO_SSM, PS_ERR_NOT_FOUND, "blk.1.ssm_a"},
        {B_NO_SECTIONS, PS_ERR_NOT_FOUND, "qwen35.rope.dimension_sections"},
        {B_SECTIONS_3, PS_ERR_FORMAT, "qwen35.rope.dimension_sections"},
        {B_SECTIONS_ZERO, PS_ERR_UNSUPPORTED, "qwen35.rope.dimension_sections"},
        {B_CONV_SHAPE, PS_ERR_FORMAT, "blk.2.ssm_conv1d.weight"},
        {B_HEADS, PS_ERR_FORMAT, "qwen35.ssm.time_step_rank"},
        {B_MOE_USED, PS_ERR_FORMAT, "qwen35moe.expert_used_count"},
        {B_MOE_NO_SHEXP, PS_ERR_NOT_FOUND, "blk.2.ffn_up_shexp.weight"},
        {B_MOE_SHEXP_SHAPE, PS_ERR_FORMAT, "blk.3.ffn_down_shexp.weight"},
    };
    for (size_t i = 0; i < PS_ARRAY_LEN(cases); i++) {
        ps_status st = load_bad(cases[i].b >= B_MOE_USED ? src_moe : src, cases[i].b, &e);
        CHECKF(st == cases[i].code && strstr(e.message, cases[i].names),
               "bad input %d: status %d (want %d), message '%s' should name %s",
               (int)cases[i].b, (int)st, (int)cases[i].code, e.message, cases[i].names);
    }
}

/* ---------------------------------------------------------------- pre-tokenizer */

/* qwen2's vocabulary with tokenizer.ggml.pre = name (vocab only), or NULL. */
static ps_vocab *vocab_as(const char *shared, const char *name) {
    char path[4200];
    snprintf(path, sizeof path, "%s/vocab/ggml-vocab-qwen2.gguf", shared);
    ps_gguf *g = NULL;
    if (ps_gguf_open(path, &g, NULL) != PS_OK) return NULL;
    ps_gguf_writer *w = ps_gguf_writer_new();
    ps_gguf_copy_kv(w, g, NULL);
    ps_gguf_set_str(w, "tokenizer.ggml.pre", name);
    void *mem = NULL;
    size_t size = 0;
    ps_vocab *v = NULL;
    if (ps_gguf_write_memory(w, &mem, &size, NULL) == PS_OK) {
        ps_gguf *g2 = NULL;
        if (ps_gguf_open_memory(mem, size, &g2, NULL) == PS_OK) {
            ps_error e;
            ps_status st = ps_vocab_load(g2, &v, &e);
            CHECKF(st == PS_OK, "vocab with pre %s: %s", name, e.message);
            ps_gguf_close(g2);
        }
    }
    ps_free(mem);
    ps_gguf_writer_free(w);
    ps_gguf_close(g);
    return v;
}

static int32_t tok(const ps_vocab *v, const char *text, int32_t *ids, int32_t cap) {
    int32_t *a = NULL, n = 0;
    if (ps_vocab_tokenize_alloc(v, text, strlen(text), false, false, &a, &n, NULL) != PS_OK)
        return -1;
    for (int32_t i = 0; i < n && i < cap; i++) ids[i] = a[i];
    ps_free(a);
    return n;
}

/* qwen35 = qwen2's split, except that combining marks (\p{M}) stay inside a word: text with
 * none tokenises the same; Thai "\u0e01\u0e34\u0e19" (a consonant, a vowel mark, a consonant)
 * is one word for qwen35 (one token of this vocabulary, 129454) and "\u0e01" + "\u0e34\u0e19"
 * for qwen2 (25200 85045). */
static void test_pretokenizer(const char *shared) {
    if (!shared) {
        SKIP("qwen35 pre-tokenizer: no shared material (the qwen2 vocabulary)");
        return;
    }
    ps_vocab *q2 = vocab_as(shared, "qwen2"), *q35 = vocab_as(shared, "qwen35");
    CHECK(q2 && q35);
    if (q2 && q35) {
        static const char *same[] = {"Hello world, it's 2024!\n  tabs\tand  spaces",
                                     "caf\xc3\xa9 \xe4\xbd\xa0\xe5\xa5\xbd 123"};
        for (size_t i = 0; i < PS_ARRAY_LEN(same); i++) {
            int32_t a[64], b[64];
            int32_t na = tok(q2, same[i], a, 64), nb = tok(q35, same[i], b, 64);
            CHECKF(na > 0 && na == nb && !memcmp(a, b, (size_t)na * 4),
                   "qwen35 differs from qwen2 on text without marks (%d vs %d ids)", na, nb);
        }
        const char *marked = "\xe0\xb8\x81\xe0\xb8\xb4\xe0\xb8\x99";
        int32_t a[64], b[64];
        int32_t na = tok(q2, marked, a, 64), nb = tok(q35, marked, b, 64);
        CHECKF(na == 2 && a[0] == 25200 && a[1] == 85045, "qwen2 on a marked word: %d ids", na);
        CHECKF(nb == 1 && b[0] == 129454, "qwen35 on a marked word: %d ids (want 129454)", nb);
        char text[64];
        size_t len = 0;
        CHECKF(ps_vocab_detokenize(q35, b, nb, false, text, sizeof text, &len) == PS_OK &&
                   len == strlen(marked) && !memcmp(text, marked, len),
               "qwen35 ids do not give the text back");
    }
    ps_vocab_free(q2);
    ps_vocab_free(q35);
}

/* Every allocation failure over loading a qwen35moe model, creating a session and one forward
 * call is a clean PS_ERR_NOMEM (no half-made model or session, no crash). */
static void test_faults(void) {
    ps_genmodel_params gp = fixture("qwen35moe-tiny", PS_GGML_F32, 2, false, 9);
    char path[700];
    snprintf(path, sizeof path, "%s", outp("faults.gguf"));
    ps_error e;
    CHECKF(ps_genmodel_write(&gp, path, &e) == PS_OK, "%s", e.message);
    const int32_t ids[5] = {1, 9, 300, 4, 77};
    float *logits = malloc(sizeof(float) * 5 * (size_t)gp.n_vocab);
    int unclean = 0;
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
        if (st != PS_OK && st != PS_ERR_NOMEM) unclean++;
        ps_session_free(s);
        ps_model_free(m);
        if (st == PS_OK && used <= n) break; /* ran to the end without an injected failure */
        if (n > 100000) break;
    }
    CHECKF(unclean == 0 && n > 10, "%d of %lld injected failures were not clean PS_ERR_NOMEM",
           unclean, (long long)n);
    free(logits);
}

/* The Qwen3.6-35B-A3B presets: the 4-layer one and the full depth share every width (the
 * full-depth file is ~20 GB, so only its shape is checked here) */
static void test_presets(void) {
    /* zeroed, padding included, so that the memcmp below compares fields only */
    ps_genmodel_params a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    ps_error e;
    CHECK(ps_genmodel_preset("qwen35moe-4l", &a, &e) == PS_OK);
    CHECKF(ps_genmodel_preset("qwen3.6-35b-a3b", &b, &e) == PS_OK, "%s", e.message);
    CHECKF(a.n_layer == 4 && b.n_layer == 40, "layers %d and %d", (int)a.n_layer, (int)b.n_layer);
    CHECK(!strcmp(b.arch, "qwen35moe") && b.n_embd == 2048 && b.n_vocab == 248320 &&
          b.n_expert == 256 && b.n_expert_used == 8 && b.n_ff_exp == 512 && b.n_ff == 512 &&
          b.full_attn_interval == 4 && b.head_dim == 256 && b.n_head == 16 && b.n_head_kv == 2);
    b.n_layer = 4;
    CHECKF(!memcmp(&a, &b, sizeof a), "qwen3.6-35b-a3b differs from qwen35moe-4l beyond its depth");
}

int main(void) {
    ps_test_out_dir("hybrid");
    test_presets();
    test_delta_kernel();
    test_expf_lanes(PS_ISA_AVX2);
    test_expf_lanes(PS_ISA_AVX512);
    test_conv_isa(PS_ISA_AVX2);
    test_conv_isa(PS_ISA_AVX512);
    test_delta_lanes();
    test_pretokenizer(ps_test_shared());
    test_bad_input();
    test_faults();
    bool numpy = access(FORWARD_PY, R_OK) == 0 &&
                 system(PYTHON " -c 'import numpy' 2>/dev/null") == 0;
    if (!numpy) SKIP("C vs numpy: " PYTHON " with numpy or " FORWARD_PY " is not available");
    test_reference(numpy);
    return ps_test_done("hybrid");
}
