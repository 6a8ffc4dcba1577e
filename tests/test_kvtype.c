/*
 * test_kvtype.c — the half-precision K/V cache (ps_session_params.kv_type = PS_KV_F16 /
 * PS_KV_BF16).
 *
 * Kernels, on every ISA the CPU has:
 *   - ps_kv_round's SIMD forms give the scalar form's bits (ps_f32_to_f16 / ps_f32_to_bf16:
 *     round to nearest even, NaN -> sign | quiet NaN), on edge values (ties, subnormals,
 *     overflow, infinities, NaN) and 300,000 random bit patterns, at lengths with every tail;
 *     ps_kv_widen's SIMD forms are the scalar widening on every half / bfloat16 a round makes;
 *   - ps_attn_scores over a half / bfloat16 K, ps_attn_pv and ps_attn_pv_acc over a half /
 *     bfloat16 V give, bit for bit, what the same ISA's kernel gives on a float32 cache holding
 *     the widened values (head sizes 40 / 64 / 128, 1 .. 100 keys, ragged key counts, the tile
 *     padding filled with NaN so a read past n_keys would show), and ps_attn_k_store puts each
 *     rounded key where the float32 layout puts it.
 * Sessions (gen-model llama, the qwen35 hybrid, gemma2 with sliding rings):
 *   - f16 / bf16 logits are bitwise the same for chunk 256 / 1 thread, chunk 7 / 3 threads and
 *     chunk 1; they differ from f32 (the option does something) by a bounded amount;
 *   - the cache holds the same elements in 2 bytes each (kv_elt), the hybrid's recurrent state
 *     is unchanged;
 *   - against tests/reference/forward.py --kv-type f16 / bf16 (the same rounding of K and V in
 *     float64 arithmetic): within 2e-4 on the llama and hybrid fixtures, closer than to the
 *     unrounded reference;
 *   - an unknown kv_type is PS_ERR_INVALID_ARG naming the accepted values; every allocation
 *     failure over a session of kv f16 scoring with a prefix cache is a clean PS_ERR_NOMEM.
 */
#include "check.h"
#include "fixture.h"
#include "attention.h"
#include "genmodel.h"
#include "impl.h"
#include "promptscore.h"
#include "session.h"

#include <math.h>

static const ps_isa ISAS[] = {PS_ISA_SCALAR, PS_ISA_AVX2, PS_ISA_AVX512};
static const ps_kv_type HALF[] = {PS_KV_F16, PS_KV_BF16};

static uint64_t g_rng = 0x243f6a8885a308d3ull;
static uint32_t rnd32(void) {
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(g_rng >> 32);
}
static float frand(void) { return ((float)(rnd32() >> 8) / 16777216.0f) * 2.0f - 1.0f; }
static float from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* ---------------------------------------------------------------- rounding */

static void test_round(void) {
    /* the scalar reference on known values */
    CHECK(ps_f32_to_f16(1.0f) == 0x3c00 && ps_f32_to_f16(-2.0f) == 0xc000);
    CHECK(ps_f32_to_f16(1.0f + 0x1p-11f) == 0x3c00);        /* tie -> even */
    CHECK(ps_f32_to_f16(1.0f + 3 * 0x1p-11f) == 0x3c02);    /* tie -> even (up) */
    CHECK(ps_f32_to_f16(65520.0f) == 0x7c00 && ps_f32_to_f16(65519.0f) == 0x7bff);
    CHECK(ps_f32_to_f16(0x1p-24f) == 0x0001 && ps_f32_to_f16(0x1p-25f) == 0x0000);
    CHECK(ps_f32_to_bf16(1.0f + 0x1p-8f) == 0x3f80);         /* tie -> even */
    CHECK(ps_f32_to_bf16(1.0f + 3 * 0x1p-8f) == 0x3f82);
    CHECK(ps_f32_to_bf16(from_bits(0x00000001u)) == 0x0000); /* subnormals are rounded, kept */
    CHECK(ps_f32_to_bf16(from_bits(0x00018000u)) == 0x0002);

    enum { N = 100000 };
    float *x = malloc(N * sizeof *x);
    uint16_t *ref = malloc(N * sizeof *ref), *got = malloc((N + 8) * sizeof *got);
    const uint32_t edge[] = {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u,
                             0xffc00001u, 0x7f800001u, 0x7fbfffffu, 0x00000001u, 0x807fffffu,
                             0x33000000u, 0x33000001u, 0x387fe000u, 0x387ff000u, 0x38800000u,
                             0x477fe000u, 0x477ff000u, 0x477fefffu, 0x3f808000u, 0x3f818000u,
                             0x3f807fffu, 0x7f7fffffu, 0xff7f8000u, 0x3c001000u, 0x3c003000u};
    for (int rep = 0; rep < 3; rep++) {
        for (int i = 0; i < N; i++) {
            if (i < (int)PS_ARRAY_LEN(edge)) x[i] = from_bits(edge[i]);
            else if (rep == 0) x[i] = from_bits(rnd32());                /* any bits */
            else if (rep == 1) x[i] = frand() * ldexpf(1.0f, (int)(rnd32() % 40) - 28);
            else x[i] = from_bits((rnd32() & 0xffff0000u) | 0x8000u | (rnd32() & 0x1000u)); /* ties */
        }
        for (size_t t = 0; t < PS_ARRAY_LEN(HALF); t++) {
            ps_kv_round(PS_ISA_SCALAR, HALF[t], x, ref, N);
            for (size_t i = 0; i < PS_ARRAY_LEN(ISAS); i++) {
                if (!ps_isa_supported(ISAS[i])) continue;
                int bad = 0;
                ps_kv_round(ISAS[i], HALF[t], x, got, N);
                bad += memcmp(got, ref, N * sizeof *ref) != 0;
                for (int n = 0; n <= 40; n++) { /* every tail, and nothing written past n */
                    got[n] = 0xabcd;
                    ps_kv_round(ISAS[i], HALF[t], x + 3, got, n);
                    bad += memcmp(got, ref + 3, (size_t)n * sizeof *ref) != 0 || got[n] != 0xabcd;
                }
                CHECKF(bad == 0, "ps_kv_round %s on %s differs from the scalar form (set %d)",
                       ps_kv_type_name(HALF[t]), ps_isa_name(ISAS[i]), rep);
            }
        }
    }
    /* widening: every half / bfloat16 the rounding can produce (no signalling NaN: a NaN is
     * rounded to the quiet sign | 0x7e00 / (x >> 16) | 0x40) */
    uint16_t *h = malloc(65536 * sizeof *h);
    float *wr = malloc(65536 * sizeof *wr), *wg = malloc(65536 * sizeof *wg);
    for (size_t t = 0; t < PS_ARRAY_LEN(HALF); t++) {
        int n = 0;
        for (uint32_t u = 0; u < 65536; u++) {
            const bool snan = HALF[t] == PS_KV_F16 ? (u & 0x7e00u) == 0x7c00u && (u & 0x3ffu)
                                                   : (u & 0x7fc0u) == 0x7f80u && (u & 0x7fu);
            if (!snan) h[n++] = (uint16_t)u;
        }
        ps_kv_widen(PS_ISA_SCALAR, HALF[t], h, wr, n);
        for (size_t i = 0; i < PS_ARRAY_LEN(ISAS); i++) {
            if (!ps_isa_supported(ISAS[i])) continue;
            ps_kv_widen(ISAS[i], HALF[t], h, wg, n);
            CHECKF(!memcmp(wr, wg, (size_t)n * sizeof *wr), "ps_kv_widen %s on %s",
                   ps_kv_type_name(HALF[t]), ps_isa_name(ISAS[i]));
        }
        /* round(widen(h)) == h: the widening is exact */
        ps_kv_round(PS_ISA_SCALAR, HALF[t], wr, got, n);
        int bad = 0;
        for (int i = 0; i < n; i++) bad += got[i] != h[i] && wr[i] == wr[i];
        CHECKF(bad == 0, "%s: %d values do not survive widen + round", ps_kv_type_name(HALF[t]), bad);
    }
    free(h);
    free(wr);
    free(wg);
    free(x);
    free(ref);
    free(got);
}

/* ---------------------------------------------------------------- kernels */

static void test_kernels(void) {
    static const int32_t HDS[] = {40, 64, 128}, NKS[] = {1, 15, 16, 17, 64, 65, 100},
                         NQS[] = {1, 5, 13};
    enum { MAXK = 112, MAXD = 128, MAXQ = 13 };
    float *q = malloc(MAXQ * MAXD * sizeof *q), *k = malloc(MAXK * MAXD * sizeof *k),
          *v = malloc(MAXK * MAXD * sizeof *v), *p = malloc(MAXQ * MAXK * sizeof *p);
    float *kt_f = malloc(MAXK * MAXD * sizeof *kt_f), *v_f = malloc(MAXK * MAXD * sizeof *v_f);
    uint16_t *kt_h = malloc(MAXK * MAXD * 2), *kt_s = malloc(MAXK * MAXD * 2),
             *v_h = malloc(MAXK * MAXD * 2);
    float *s1 = malloc(MAXQ * MAXK * sizeof *s1), *s2 = malloc(MAXQ * MAXK * sizeof *s2);
    float *o1 = malloc(MAXQ * MAXD * sizeof *o1), *o2 = malloc(MAXQ * MAXD * sizeof *o2);
    for (int i = 0; i < MAXQ * MAXD; i++) q[i] = frand();
    for (int i = 0; i < MAXK * MAXD; i++) k[i] = frand() * 3.0f, v[i] = frand();
    for (int i = 0; i < MAXQ * MAXK; i++) p[i] = fabsf(frand());
    int cases = 0;
    for (size_t t = 0; t < PS_ARRAY_LEN(HALF); t++)
        for (size_t a = 0; a < PS_ARRAY_LEN(HDS); a++)
            for (size_t b = 0; b < PS_ARRAY_LEN(NKS); b++) {
                const int32_t hd = HDS[a], nk = NKS[b], cap = (int32_t)PS_KCACHE_POS(nk);
                const ps_kv_type T = HALF[t];
                /* the padding past nk: NaN in both caches, so reading it would show */
                for (int i = 0; i < cap * hd; i++) kt_f[i] = NAN, kt_h[i] = kt_s[i] = 0x7e00;
                float w[MAXD];
                uint16_t r[MAXD];
                for (int32_t j = 0; j < nk; j++) {
                    ps_kv_round(PS_ISA_SCALAR, T, k + j * hd, r, hd);
                    ps_kv_widen(PS_ISA_SCALAR, T, r, w, hd);
                    ps_attn_k_store(PS_ISA_SCALAR, kt_f, PS_KV_F32, hd, j, w);
                    ps_attn_k_store(PS_ISA_SCALAR, kt_s, T, hd, j, k + j * hd);
                    ps_kv_round(PS_ISA_SCALAR, T, v + j * hd, v_h + j * hd, hd);
                    ps_kv_widen(PS_ISA_SCALAR, T, v_h + j * hd, v_f + j * hd, hd);
                }
                /* the stored key j, dimension d is round(k_j[d]) where the f32 layout has it */
                int misplaced = 0;
                for (int32_t j = 0; j < nk; j++)
                    for (int32_t d = 0; d < hd; d++) {
                        const int64_t at = (j / 16) * hd * 16 + d * 16 + j % 16;
                        float back;
                        ps_kv_widen(PS_ISA_SCALAR, T, kt_s + at, &back, 1);
                        misplaced += memcmp(&back, kt_f + at, 4) != 0;
                    }
                CHECKF(misplaced == 0, "ps_attn_k_store %s hd %d: %d misplaced", ps_kv_type_name(T),
                       hd, misplaced);
                for (size_t i = 0; i < PS_ARRAY_LEN(ISAS); i++) {
                    const ps_isa isa = ISAS[i];
                    if (!ps_isa_supported(isa)) continue;
                    for (int x = 0; x < cap * hd; x++) kt_h[x] = 0x7e00;
                    for (int32_t j = 0; j < nk; j++) ps_attn_k_store(isa, kt_h, T, hd, j, k + j * hd);
                    CHECKF(!memcmp(kt_h, kt_s, (size_t)cap * hd * 2), "k store %s on %s",
                           ps_kv_type_name(T), ps_isa_name(isa));
                    for (size_t c = 0; c < PS_ARRAY_LEN(NQS); c++) {
                        const int32_t nq = NQS[c];
                        const int64_t lds = MAXK;
                        ps_attn_scores(isa, q, hd, nq, kt_h, T, nk, hd, s1, lds);
                        ps_attn_scores(isa, q, hd, nq, kt_f, PS_KV_F32, nk, hd, s2, lds);
                        int bad = 0;
                        for (int32_t rr = 0; rr < nq; rr++)
                            bad += memcmp(s1 + rr * lds, s2 + rr * lds, (size_t)nk * 4) != 0;
                        CHECKF(bad == 0, "scores %s %s hd %d keys %d queries %d: %d rows differ",
                               ps_kv_type_name(T), ps_isa_name(isa), hd, nk, nq, bad);
                        int32_t nkq[MAXQ];
                        for (int32_t rr = 0; rr < nq; rr++) nkq[rr] = PS_MAX(1, nk - 7 * rr);
                        ps_attn_pv(isa, p, MAXK, nkq, nq, v_h, T, hd, o1, hd);
                        ps_attn_pv(isa, p, MAXK, nkq, nq, v_f, PS_KV_F32, hd, o2, hd);
                        CHECKF(!memcmp(o1, o2, (size_t)nq * hd * 4), "pv %s %s hd %d keys %d q %d",
                               ps_kv_type_name(T), ps_isa_name(isa), hd, nk, nq);
                        ps_attn_pv_acc(isa, p, MAXK, nkq, nq, v_h, T, hd, o1, hd);
                        ps_attn_pv_acc(isa, p, MAXK, nkq, nq, v_f, PS_KV_F32, hd, o2, hd);
                        CHECKF(!memcmp(o1, o2, (size_t)nq * hd * 4), "pv_acc %s %s hd %d keys %d",
                               ps_kv_type_name(T), ps_isa_name(isa), hd, nk);
                        cases++;
                    }
                }
            }
    printf("NOTE: %d kernel cases (half / bfloat16 K and V against float32 caches of the "
           "widened values)\n", cases);
    free(q), free(k), free(v), free(p), free(kt_f), free(v_f), free(kt_h), free(kt_s), free(v_h);
    free(s1), free(s2), free(o1), free(o2);
}

/* ---------------------------------------------------------------- sessions */

static double max_lp_diff(const float *a, const double *b, int32_t n, int64_t V) {
    /* the largest |log-softmax difference| over all positions and vocabulary entries */
    double worst = 0;
    for (int32_t i = 0; i < n; i++) {
        const float *x = a + (size_t)i * (size_t)V;
        const double *y = b + (size_t)i * (size_t)V;
        double mx = -INFINITY, my = -INFINITY, sx = 0, sy = 0;
        for (int64_t j = 0; j < V; j++) mx = fmax(mx, x[j]), my = fmax(my, y[j]);
        for (int64_t j = 0; j < V; j++) sx += exp(x[j] - mx), sy += exp(y[j] - my);
        const double lx = mx + log(sx), ly = my + log(sy);
        for (int64_t j = 0; j < V; j++) worst = fmax(worst, fabs((x[j] - lx) - (y[j] - ly)));
    }
    return worst;
}

static double *to_f64(const float *a, size_t n) {
    double *d = malloc(n * sizeof *d);
    for (size_t i = 0; i < n; i++) d[i] = a[i];
    return d;
}

static void test_model(const char *preset, uint32_t type, bool reference) {
    ps_genmodel_params gp = ps_genmodel_default_params();
    ps_genmodel_preset(preset, &gp, NULL);
    gp.type = type;
    gp.n_ctx = 512;
    gp.seed = 77;
    char file[96];
    snprintf(file, sizeof file, "%s.gguf", preset);
    const char *path = outp(file);
    ps_error e;
    ps_model *m = NULL;
    if (ps_genmodel_write(&gp, path, &e) != PS_OK || ps_model_load(path, NULL, &m, &e) != PS_OK) {
        CHECKF(0, "%s: %s", preset, e.message);
        return;
    }
    const int32_t n = 150;
    const int64_t V = m->hp.n_vocab;
    int32_t *ids = make_ids(n, (int32_t)V, 5);
    fx_run r32 = fx_run_of(PS_CHUNK, PS_ISA_AUTO, PS_ACT_NATIVE, 1);
    float *l32 = fx_logits(m, ids, n, &r32);
    double *ref32 = reference ? ref_logits_args(path, ids, n, V, preset, "", true) : NULL;
    CHECKF(!reference || ref32, "%s: forward.py failed", preset);
    for (size_t t = 0; t < PS_ARRAY_LEN(HALF) && l32; t++) {
        const ps_kv_type T = HALF[t];
        fx_run ra = fx_run_of(PS_CHUNK, PS_ISA_AUTO, PS_ACT_NATIVE, 1),
               rb = fx_run_of(7, PS_ISA_AUTO, PS_ACT_NATIVE, 3),
               rc = fx_run_of(1, PS_ISA_AUTO, PS_ACT_NATIVE, 2);
        ra.kv_type = rb.kv_type = rc.kv_type = T;
        ra.on_done = NULL;
        float *la = fx_logits(m, ids, n, &ra), *lb = fx_logits(m, ids, n, &rb),
              *lc = fx_logits(m, ids, n, &rc);
        const size_t nf = (size_t)n * (size_t)V;
        if (la && lb && lc) {
            CHECKF(!memcmp(la, lb, nf * 4) && !memcmp(la, lc, nf * 4),
                   "%s kv %s: chunk 256 / 7 / 1 and 1 / 3 / 2 threads differ", preset,
                   ps_kv_type_name(T));
            CHECKF(memcmp(la, l32, nf * 4) != 0, "%s kv %s: the same logits as f32", preset,
                   ps_kv_type_name(T));
            double *d32 = to_f64(l32, nf);
            const double dv = max_lp_diff(la, d32, n, V);
            printf("NOTE: %s kv %s: max |logprob - f32's| %.3g over %d positions x %lld\n", preset,
                   ps_kv_type_name(T), dv, (int)n, (long long)V);
            CHECKF(dv > 0 && dv < 0.05, "%s kv %s: %g from f32", preset, ps_kv_type_name(T), dv);
            free(d32);
            CHECKF(ra.kv_floats == r32.kv_floats, "%s: %lld K/V elements vs %lld", preset,
                   (long long)ra.kv_floats, (long long)r32.kv_floats);
        }
        if (reference && ref32 && la) {
            char args[32];
            snprintf(args, sizeof args, "--kv-type %s", ps_kv_type_name(T));
            double *ref = ref_logits_args(path, ids, n, V, preset, args, true);
            CHECKF(ref, "%s: forward.py %s failed", preset, args);
            if (ref) {
                const double dr = max_lp_diff(la, ref, n, V), d0 = max_lp_diff(la, ref32, n, V);
                double *d32 = to_f64(l32, nf);
                const double base = max_lp_diff(l32, ref32, n, V);
                free(d32);
                printf("NOTE: %s kv %s vs forward.py %s: %.3g (vs the unrounded reference %.3g; "
                       "f32 cache vs unrounded %.3g)\n", preset, ps_kv_type_name(T), args, dr, d0,
                       base);
                /* the C keys are float32 computations, so now and then one lands on the
                 * other side of a rounding boundary from the float64 reference's: a few units
                 * in the last place of one element, far below the rounding's own effect */
                const double tol = T == PS_KV_F16 ? 3e-4 : 1.5e-3;
                CHECKF(dr < tol && dr < d0 / 10,
                       "%s kv %s: %g from forward.py %s (tolerance %g), %g unrounded", preset,
                       ps_kv_type_name(T), dr, args, tol, d0);
                free(ref);
            }
        }
        free(la);
        free(lb);
        free(lc);
    }
    /* the sequence holds the same elements in 2 bytes; the recurrent state is float32 */
    ps_session_params sp = ps_session_default_params();
    sp.n_ctx = 64;
    ps_session *s = NULL, *s32 = NULL;
    CHECK(ps_session_create(m, &sp, &s32, &e) == PS_OK);
    sp.kv_type = PS_KV_BF16;
    CHECK(ps_session_create(m, &sp, &s, &e) == PS_OK);
    if (s && s32) {
        CHECK(s->seq->kv_elt == 2 && s->seq->kv_type == PS_KV_BF16 && s32->seq->kv_elt == 4);
        CHECK(s->seq->kv_elems == s32->seq->kv_elems && s->seq->kv_elems > 0);
        CHECK((s->seq->ssm_state != NULL) == (m->hp.n_layer_rs > 0));
    }
    ps_session_free(s);
    ps_session_free(s32);
    free(ids);
    free(l32);
    free(ref32);
    ps_model_free(m);
    remove(path);
}

static void test_refusals_and_faults(void) {
    ps_genmodel_params gp = ps_genmodel_default_params();
    ps_genmodel_preset("gemma3-tiny", &gp, NULL);
    gp.type = PS_GGML_F16;
    const char *path = outp("faults.gguf");
    ps_error e;
    ps_model *m = NULL;
    if (ps_genmodel_write(&gp, path, &e) != PS_OK || ps_model_load(path, NULL, &m, &e) != PS_OK) {
        CHECKF(0, "gemma3-tiny: %s", e.message);
        return;
    }
    ps_session_params sp = ps_session_default_params();
    sp.n_ctx = 256;
    sp.kv_type = (ps_kv_type)3;
    ps_session *s = NULL;
    ps_status st = ps_session_create(m, &sp, &s, &e);
    CHECKF(st == PS_ERR_INVALID_ARG && !s && strstr(e.message, "PS_KV_F16") &&
               strstr(e.message, "PS_KV_BF16"),
           "kv_type 3: status %d, '%s'", (int)st, e.message);
    CHECK(!strcmp(ps_kv_type_name(PS_KV_F16), "f16") && !strcmp(ps_kv_type_name(PS_KV_BF16), "bf16") &&
          !strcmp(ps_kv_type_name(PS_KV_F32), "f32") && !strcmp(ps_kv_type_name((ps_kv_type)9), "?"));
    CHECK(ps_session_default_params().kv_type == PS_KV_F32);
    /* every allocation over session create (kv f16) + a miss + a hit of the prefix cache */
    sp.kv_type = PS_KV_F16;
    int32_t *a = make_ids(100, gp.n_vocab, 41);
    ps_score_params scp = ps_score_default_params();
    ps_score_result *ref = NULL;
    CHECK(ps_session_create(m, &sp, &s, &e) == PS_OK);
    if (s) CHECK(ps_score_tokens(s, a, 100, &scp, &ref, &e) == PS_OK);
    ps_session_free(s);
    int bad = 0, wrong = 0;
    int64_t n = 0;
    for (; ref; n++) {
        ps_alloc_fail_after(n);
        ps_prefix_cache *c = NULL;
        ps_score_result *r1 = NULL, *r2 = NULL;
        s = NULL;
        st = ps_session_create(m, &sp, &s, &e);
        if (st == PS_OK) st = ps_prefix_cache_create(m, NULL, &c, &e);
        scp.cache = c;
        if (st == PS_OK) st = ps_score_tokens(s, a, 100, &scp, &r1, &e);
        if (st == PS_OK) st = ps_score_tokens(s, a, 90, &scp, &r2, &e);
        const int64_t used = ps_alloc_count();
        ps_alloc_fail_after(-1);
        if (st != PS_OK && st != PS_ERR_NOMEM) bad++;
        if (st == PS_OK && (memcmp(r1->logprobs + 1, ref->logprobs + 1, 99 * 4) ||
                            memcmp(r2->logprobs + 1, ref->logprobs + 1, 89 * 4)))
            wrong++;
        ps_score_result_free(r1);
        ps_score_result_free(r2);
        ps_prefix_cache_free(c);
        ps_session_free(s);
        if (st == PS_OK && used <= n) break;
        if (n > 100000) break;
    }
    CHECKF(bad == 0 && wrong == 0 && n > 5, "faults: %d unclean, %d wrong over %lld", bad, wrong,
           (long long)n);
    printf("NOTE: kv f16: %lld allocation points over session create + cache miss + hit, each a "
           "clean PS_ERR_NOMEM\n", (long long)n);
    ps_score_result_free(ref);
    free(a);
    ps_model_free(m);
    remove(path);
}

int main(void) {
    const char *tmp = getenv("TMPDIR");
    snprintf(out_dir, sizeof out_dir, "%s/ps-test-kvtype-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(out_dir)) {
        CHECKF(0, "no temp dir");
        return ps_test_done("kvtype");
    }
    test_round();
    test_kernels();
    test_model("tiny", PS_GGML_F32, true);
    test_model("qwen35-tiny", PS_GGML_F32, true);
    test_model("gemma2-tiny", PS_GGML_F32, false);
    test_refusals_and_faults();
    rmdir(out_dir);
    return ps_test_done("kvtype");
}
