/*
 * test_matmul_amx.c — the AMX tile kernels (matmul_amx.c) against ps_matmul_ref and against
 * the AVX-512 paths, where the CPU and the OS allow AMX; elsewhere it says "AMX not available
 * on this CPU" (a CPU feature, not a missing dependency: not a failure, in CI or not) and
 * checks only that AMX is refused cleanly (PS_ISA_AMX sessions fail, nothing else changes).
 *
 * With AMX:
 *   - the BF16 tile copy (ps_amx_bf16_pack) holds, for group g, chunk kc, row kk, column i,
 *     the bf16 pair w[16 g + i][32 kc + 2 kk], [.. + 1], zeros past n_in / n_out (checked
 *     element by element on odd shapes: the in-register transpose);
 *   - BF16 (tdpbf16ps): odd shapes (n off the 16/32-row tiles, k off the 32-input chunk, k
 *     past the 256-input k block, m off the 16-row tile, 300 rows = two activation passes):
 *     within the summation-order bound |y - ref| <= (k + 8) 2^-24 sum |bf16(x) w| of the
 *     reference, within twice that of the AVX-512 vdpbf16ps result (a different order), the
 *     largest measured |amx - avx512| / bound printed; bitwise the same with and without the
 *     tile copy, with 1, 2 and 7 threads, and for a row subset called alone; a NaN activation
 *     poisons its row only;
 *   - Q8_0 (tdpbssd): the same shapes (k multiples of 32): bitwise equal to the AVX-512 VNNI
 *     and the scalar kernel, 1/2/7 threads, row subsets;
 *   - outputs past 32 MiB (streamed around the cache), aligned rows and not: the same values;
 *   - end to end: sessions with PS_ISA_AMX and PS_ISA_AVX512 on generated qwen3 models:
 *     Q8_0, Q4_K_M (Q4_K + Q6_K) and Q4_1 logits bitwise equal, BF16 logits close (printed),
 *     and a BF16 model loaded with no_repack gives bitwise the AMX logits of the repacked one.
 *     (The block types' kernels themselves: test_matmul_quant.)
 */
#include "check.h"
#include "gen/genmodel.h"
#include "base/impl.h"
#include "kernels/matmul.h"
#include "kernels/matmul_amx.h"
#include "kernels/qact.h"
#include "kernels/quant.h"
#include "kernels/quantize.h"

#include <math.h>


static uint64_t rng = 0x13198A2E03707344ull;
static float frand(void) { /* uniform in [-1, 1) */
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static void *make_weights(uint32_t type, int64_t n, int64_t k, size_t *row_bytes) {
    size_t rb = ps_quant_row_bytes(type, k);
    uint8_t *w = malloc(rb * (size_t)n);
    float *tmp = malloc(sizeof(float) * (size_t)k);
    for (int64_t j = 0; j < n; j++) {
        uint8_t *row = w + (size_t)j * rb;
        const float scale = (j % 5 == 0) ? 3.0f : 0.1f;
        for (int64_t i = 0; i < k; i++) tmp[i] = frand() * scale;
        if (type == PS_GGML_BF16)
            for (int64_t i = 0; i < k; i++) ((uint16_t *)row)[i] = ps_f32_to_bf16(tmp[i]);
        else ps_quant_f32_to_q8_0(tmp, (ps_block_q8_0 *)row, k);
    }
    free(tmp);
    *row_bytes = rb;
    return w;
}

static void test_refused(void) {
    CHECK(!strcmp(ps_isa_name(PS_ISA_AMX), "amx"));
    CHECK(ps_isa_supported(PS_ISA_AMX) == ps_cpu_has_amx());
    CHECK(ps_isa_best() != PS_ISA_AMX); /* AMX is never the vector ISA */
    CHECK(ps_amx_status() != NULL && *ps_amx_status());
}

static void test_pack_layout(void) {
    const int64_t shapes[][2] = {{17, 33}, {16, 32}, {40, 100}, {1, 1}};
    for (size_t s = 0; s < PS_ARRAY_LEN(shapes); s++) {
        const int64_t n = shapes[s][0], k = shapes[s][1], nkc = (k + 31) / 32;
        size_t rb, bytes;
        uint16_t *wd = make_weights(PS_GGML_BF16, n, k, &rb);
        ps_mat w = {wd, PS_GGML_BF16, k, n, rb, NULL, NULL, NULL};
        uint16_t *t = ps_amx_bf16_pack(&w, &bytes);
        CHECK(t && bytes == ps_amx_bf16_tiles_bytes(&w) &&
              bytes == (size_t)((n + 15) / 16) * (size_t)nkc * 1024u);
        int64_t bad = 0;
        for (int64_t g = 0; t && g < (n + 15) / 16; g++)
            for (int64_t kc = 0; kc < nkc; kc++)
                for (int kk = 0; kk < 16; kk++)
                    for (int i = 0; i < 16; i++)
                        for (int e = 0; e < 2; e++) {
                            const int64_t row = 16 * g + i, col = 32 * kc + 2 * kk + e;
                            const uint16_t want = row < n && col < k ? wd[row * k + col] : 0;
                            bad += t[((g * nkc + kc) * 16 + kk) * 32 + 2 * i + e] != want;
                        }
        CHECKF(bad == 0, "tile copy %lld x %lld: %lld elements misplaced", (long long)n,
               (long long)k, (long long)bad);
        ps_free(t);
        free(wd);
    }
}

static bool same_bits(const float *a, const float *b, int64_t m, int64_t n, int64_t lda) {
    for (int64_t r = 0; r < m; r++)
        if (memcmp(a + r * lda, b + r * lda, sizeof(float) * (size_t)n)) return false;
    return true;
}

static double worst_share = 0; /* largest |amx - avx512| / order bound seen (BF16) */

/* y (AMX) vs the reference within the order bound and vs the vdpbf16ps result within twice it */
static void check_bf16(const char *tag, const ps_mat *w, const float *x, int64_t m,
                       const float *y, const float *yref, const float *yavx) {
    const int64_t n = w->n_out, k = w->n_in;
    float *xr = malloc(sizeof(float) * (size_t)k);
    int64_t bad_ref = 0, bad_avx = 0;
    for (int64_t r = 0; r < m; r++) {
        ps_quant_act_bf16_ref(x + r * k, k, NULL, xr);
        for (int64_t j = 0; j < n; j++) {
            const uint16_t *wr = (const uint16_t *)w->data + j * k;
            double mag = 0;
            for (int64_t i = 0; i < k; i++) mag += fabs((double)xr[i] * ps_bf16_to_f32(wr[i]));
            const double bound = (double)(k + 8) * ldexp(1.0, -24) * mag + 1e-30;
            const double e_ref = fabs((double)y[r * n + j] - yref[r * n + j]);
            const double e_avx = fabs((double)y[r * n + j] - yavx[r * n + j]);
            bad_ref += !(e_ref <= bound);
            bad_avx += !(e_avx <= 2 * bound);
            worst_share = fmax(worst_share, e_avx / bound);
        }
    }
    CHECKF(bad_ref == 0, "%s: %lld outputs outside the order bound of the reference", tag,
           (long long)bad_ref);
    CHECKF(bad_avx == 0, "%s: %lld outputs further than 2x the bound from vdpbf16ps", tag,
           (long long)bad_avx);
    free(xr);
}

/* Every shape x type: AMX vs reference / AVX-512; repack, threads and row subsets bitwise. */
static void test_kernels(ps_pool *pool2, ps_pool *pool7) {
    const int64_t bf16_shapes[][2] = {{37, 160}, {70, 1056}, {5, 201}, {16, 64}, {19, 33},
                                      {33, 2}, {1, 1}, {64, 300}};
    const int64_t q8_shapes[][2] = {{37, 160}, {70, 1056}, {16, 64}, {19, 32}, {1, 96},
                                    {64, 2080}};
    const int64_t ms[] = {1, 3, 17, 33, 300};
    const int64_t M = 300, KMAX = 2100, NMAX = 80;
    float *x = malloc(sizeof(float) * (size_t)(M * KMAX));
    for (int64_t i = 0; i < M * KMAX; i++) x[i] = frand();
    float *yref = malloc(sizeof(float) * (size_t)(M * NMAX)), *y = malloc(sizeof(float) * (size_t)(M * NMAX));
    float *yavx = malloc(sizeof(float) * (size_t)(M * NMAX)), *y2 = malloc(sizeof(float) * (size_t)(M * NMAX));
    const size_t stride = ps_matmul_scratch_floats(KMAX + 32);
    float *scratch = ps_aligned_alloc(64, sizeof(float) * stride * 7);
    for (int type = 0; type < 2; type++) {
        const uint32_t wt = type == 0 ? PS_GGML_BF16 : PS_GGML_Q8_0;
        const size_t n_shapes = type == 0 ? PS_ARRAY_LEN(bf16_shapes) : PS_ARRAY_LEN(q8_shapes);
        for (size_t s = 0; s < n_shapes; s++) {
            const int64_t n = type == 0 ? bf16_shapes[s][0] : q8_shapes[s][0];
            const int64_t k = type == 0 ? bf16_shapes[s][1] : q8_shapes[s][1];
            size_t rb;
            void *wd = make_weights(wt, n, k, &rb);
            ps_mat w = {wd, wt, k, n, rb, NULL, NULL, NULL};
            void *tiles = wt == PS_GGML_BF16 ? ps_amx_bf16_pack(&w, NULL) : NULL;
            for (size_t mi = 0; mi < PS_ARRAY_LEN(ms); mi++) {
                const int64_t m = ms[mi];
                char tag[96];
                snprintf(tag, sizeof tag, "amx %s m %lld n %lld k %lld", ps_ggml_type_name(wt),
                         (long long)m, (long long)n, (long long)k);
                ps_matmul_env avx = {NULL, PS_ISA_AVX512, scratch, stride, false, false};
                ps_matmul_env amx = avx;
                amx.amx = true;
                ps_matmul(&avx, &w, x, k, m, yavx, n);
                ps_mat wa = w;
                wa.tiles = tiles;
                ps_matmul(&amx, &wa, x, k, m, y, n);
                if (wt == PS_GGML_BF16) {
                    CHECK(ps_matmul_ref(&w, false, x, k, m, yref, n) == PS_OK);
                    check_bf16(tag, &w, x, m, y, yref, yavx);
                    ps_matmul(&amx, &w, x, k, m, y2, n); /* no tile copy: packed per task */
                    CHECKF(same_bits(y, y2, m, n, n), "%s: without the tile copy differs", tag);
                } else {
                    CHECKF(same_bits(y, yavx, m, n, n), "%s: differs from avx512 vnni", tag);
                    ps_matmul_env sc = {NULL, PS_ISA_SCALAR, scratch, stride, false, false};
                    ps_matmul(&sc, &w, x, k, m, y2, n);
                    CHECKF(same_bits(y, y2, m, n, n), "%s: differs from scalar", tag);
                }
                ps_pool *pools[2] = {pool2, pool7};
                for (int p = 0; p < 2; p++) {
                    ps_matmul_env mt = amx;
                    mt.pool = pools[p];
                    ps_matmul(&mt, &wa, x, k, m, y2, n);
                    CHECKF(same_bits(y, y2, m, n, n), "%s: %d threads differ from 1", tag,
                           p ? 7 : 2);
                }
                if (m > 17) { /* rows 17.. alone */
                    ps_matmul(&amx, &wa, x + 17 * k, k, m - 17, y2, n);
                    CHECKF(same_bits(y + 17 * n, y2, m - 17, n, n),
                           "%s: rows 17.. alone differ from the whole call", tag);
                }
            }
            if (wt == PS_GGML_BF16 && k >= 33) { /* a NaN poisons its row only */
                const int64_t m = 33;
                float keep = x[20 * k + 7];
                x[20 * k + 7] = NAN;
                ps_matmul_env amx = {NULL, PS_ISA_AVX512, scratch, stride, false, true};
                ps_mat wa = w;
                wa.tiles = tiles;
                ps_matmul(&amx, &wa, x, k, m, y, n);
                int64_t nan_in = 0, nan_out = 0;
                for (int64_t r = 0; r < m; r++)
                    for (int64_t j = 0; j < n; j++)
                        *(r == 20 ? &nan_in : &nan_out) += isnan(y[r * n + j]) != 0;
                CHECKF(nan_in == n && nan_out == 0, "amx bf16 NaN row: %lld / %lld NaN in it, "
                       "%lld elsewhere", (long long)nan_in, (long long)n, (long long)nan_out);
                x[20 * k + 7] = keep;
            }
            ps_free(tiles);
            free(wd);
        }
    }
    printf("amx bf16 vs avx512 vdpbf16ps: largest |difference| = %.3f of the order bound "
           "(k + 8) 2^-24 sum |x w|\n", worst_share);
    ps_free(scratch);
    free(x);
    free(y);
    free(y2);
    free(yref);
    free(yavx);
}

/* Outputs past 32 MiB (the logits) are stored around the cache (whole aligned lines): the same
 * values as the AVX-512 paths give (Q8_0 bitwise, BF16 within the bound), with y aligned (the
 * streaming stores) and with rows off the 64-byte alignment (ordinary stores), n off 16. */
static void test_streamed_outputs(ps_pool *pool2) {
    const int64_t m = 256, n = 33001, k = 64;
    CHECK(ps_amx_stream_y(m, n) && !ps_amx_stream_y(m, 1000));
    float *x = malloc(sizeof(float) * (size_t)(m * k));
    for (int64_t i = 0; i < m * k; i++) x[i] = frand();
    const size_t stride = ps_matmul_scratch_floats(k);
    float *scratch = ps_aligned_alloc(64, sizeof(float) * stride * 2);
    float *ya = ps_aligned_alloc(64, sizeof(float) * (size_t)(m * (n + 16)));
    float *yb = ps_aligned_alloc(64, sizeof(float) * (size_t)(m * (n + 16)));
    for (int type = 0; type < 2; type++) {
        const uint32_t wt = type == 0 ? PS_GGML_BF16 : PS_GGML_Q8_0;
        size_t rb;
        void *wd = make_weights(wt, n, k, &rb);
        ps_mat w = {wd, wt, k, n, rb, NULL, NULL, NULL};
        void *tiles = wt == PS_GGML_BF16 ? ps_amx_bf16_pack(&w, NULL) : NULL;
        ps_mat wa = w;
        wa.tiles = tiles;
        const int64_t ldys[] = {(n + 15) / 16 * 16, n}; /* the first: every row 64-byte aligned */
        for (int l = 0; l < 2; l++) {
            const int64_t ldy = ldys[l];
            ps_matmul_env avx = {NULL, PS_ISA_AVX512, scratch, stride, false, false};
            ps_matmul_env amx = {pool2, PS_ISA_AVX512, scratch, stride, false, true};
            ps_matmul(&avx, &w, x, k, m, yb, ldy);
            ps_matmul(&amx, &wa, x, k, m, ya, ldy);
            int64_t bad = 0;
            double worst = 0;
            for (int64_t r = 0; r < m; r++)
                for (int64_t j = 0; j < n; j++) {
                    const double e = fabs((double)ya[r * ldy + j] - yb[r * ldy + j]);
                    worst = fmax(worst, e);
                    bad += wt == PS_GGML_Q8_0 ? memcmp(&ya[r * ldy + j], &yb[r * ldy + j], 4) != 0
                                              : !(e <= 1e-5 * (fabs((double)yb[r * ldy + j]) + 1));
                }
            CHECKF(bad == 0, "%s streamed outputs (ldy %lld): %lld differ (max %g)",
                   ps_ggml_type_name(wt), (long long)ldy, (long long)bad, worst);
        }
        ps_free(tiles);
        free(wd);
    }
    ps_free(ya);
    ps_free(yb);
    ps_free(scratch);
    free(x);
}

/* Sessions: PS_ISA_AMX vs PS_ISA_AVX512 logits on generated qwen3 models. */
static void test_sessions(void) {
    /* the last two: a Q4_K_M mix (Q4_K, Q6_K; 256-input blocks, so 256 / 768 wide) and Q4_1
     * (32-input blocks with float mins): the integer road of matmul_quant.c on AMX */
    static const uint32_t types[] = {PS_GGML_BF16, PS_GGML_Q8_0, PS_GGML_Q4_K, PS_GGML_Q4_1};
    enum { N = 40 };
    for (size_t t = 0; t < PS_ARRAY_LEN(types); t++) {
        char path[] = "/tmp/ps-test-amx-XXXXXX";
        if (!ps_test_temp_file(path)) return;
        const bool kmix = types[t] == PS_GGML_Q4_K;
        const char *tn = kmix ? "q4_k_m" : ps_ggml_type_name(types[t]);
        ps_genmodel_params gp = ps_genmodel_default_params();
        snprintf(gp.arch, sizeof gp.arch, "qwen3");
        gp.type = types[t];
        gp.n_embd = kmix ? 256 : 96; /* 96 / 288: off the 32-row tasks and 64-input multiples */
        gp.n_ff = kmix ? 768 : 288;
        if (kmix) snprintf(gp.mix, sizeof gp.mix, "q4_k_m");
        gp.seed = 11 + t;
        ps_error e;
        ps_model *m = NULL, *mn = NULL;
        ps_model_params mp = ps_model_default_params();
        if (ps_genmodel_write(&gp, path, &e) != PS_OK || ps_model_load(path, &mp, &m, &e) != PS_OK) {
            CHECKF(0, "%s model: %s", tn, e.message);
            unlink(path);
            continue;
        }
        mp.no_repack = true;
        CHECKF(ps_model_load(path, &mp, &mn, &e) == PS_OK, "no_repack load: %s", e.message);
        ps_model_info info;
        ps_model_get_info(m, &info);
        CHECKF(types[t] == PS_GGML_BF16 ? info.tile_bytes > 0 : info.tile_bytes == 0,
               "%s: tile copy of %lld bytes", tn, (long long)info.tile_bytes);
        int32_t ids[N];
        for (int i = 0; i < N; i++) ids[i] = (int32_t)(1 + (i * 37) % 500);
        const size_t nl = (size_t)N * (size_t)gp.n_vocab;
        float *a = malloc(nl * sizeof *a), *b = malloc(nl * sizeof *b), *c = malloc(nl * sizeof *c);
        float *f = malloc(nl * sizeof *f);
        ps_session *sa = NULL, *sb = NULL, *sc = NULL, *sf = NULL;
        ps_session_params sp = ps_session_default_params();
        sp.n_ctx = N;
        sp.isa = PS_ISA_AMX;
        bool ok = ps_session_create(m, &sp, &sa, &e) == PS_OK &&
                  ps_session_forward(sa, ids, N, a, &e) == PS_OK &&
                  ps_session_create(mn, &sp, &sc, &e) == PS_OK &&
                  ps_session_forward(sc, ids, N, c, &e) == PS_OK;
        sp.isa = PS_ISA_AVX512;
        ok = ok && ps_session_create(m, &sp, &sb, &e) == PS_OK &&
             ps_session_forward(sb, ids, N, b, &e) == PS_OK;
        sp.act = PS_ACT_F32; /* the rounding noise native activations already accept */
        ok = ok && ps_session_create(m, &sp, &sf, &e) == PS_OK &&
             ps_session_forward(sf, ids, N, f, &e) == PS_OK;
        CHECKF(ok, "%s sessions: %s", tn, e.message);
        if (ok) {
            double worst = 0, act_noise = 0;
            size_t n_diff = 0;
            for (size_t i = 0; i < nl; i++) {
                worst = fmax(worst, fabs((double)a[i] - b[i]));
                act_noise = fmax(act_noise, fabs((double)f[i] - b[i]));
                n_diff += memcmp(&a[i], &b[i], sizeof a[i]) != 0;
            }
            printf("session %s: amx vs avx512: %zu of %zu logits differ, max |diff| %.3g (native "
                   "vs f32 activations on avx512: %.3g)\n", tn, n_diff, nl, worst, act_noise);
            if (types[t] != PS_GGML_BF16) /* int8 tiles: exact sums, the VNNI float part */
                CHECKF(n_diff == 0, "%s amx logits differ from avx512 (%zu, max %g)", tn, n_diff,
                       worst);
            else /* a float32 order change, amplified by the bf16 rounding of each layer's
                  * activations: well inside what the bf16 rounding itself moves */
                CHECKF(worst < 0.5 * act_noise, "BF16 amx logits differ from avx512 by %g "
                       "(native vs f32 activations: %g)", worst, act_noise);
            CHECKF(!memcmp(a, c, nl * sizeof *a), "%s: no_repack changed the amx logits", tn);
        }
        ps_session_free(sa);
        ps_session_free(sb);
        ps_session_free(sc);
        ps_session_free(sf);
        free(f);
        free(a);
        free(b);
        free(c);
        ps_model_free(m);
        ps_model_free(mn);
        unlink(path);
    }
}

/* Without AMX: a session asking for PS_ISA_AMX fails with INVALID_ARG naming the reason, and
 * AUTO sessions work (on the AVX-512 / AVX2 paths). */
static void test_refused_session(void) {
    char path[] = "/tmp/ps-test-amx-none-XXXXXX";
    if (!ps_test_temp_file(path)) return;
    ps_genmodel_params gp = ps_genmodel_default_params();
    gp.type = PS_GGML_BF16;
    ps_error e;
    ps_model *m = NULL;
    if (ps_genmodel_write(&gp, path, &e) != PS_OK || ps_model_load(path, NULL, &m, &e) != PS_OK) {
        CHECKF(0, "model: %s", e.message);
        unlink(path);
        return;
    }
    ps_model_info info;
    ps_model_get_info(m, &info);
    /* no AMX copy; the vdpbf16ps copy where AVX-512 BF16 is usable (test_repack) */
    CHECK(info.tile_bytes == 0 || (ps_cpu_has_avx512bf16() && ps_isa_best() == PS_ISA_AVX512));
    ps_session *s = NULL;
    ps_session_params sp = ps_session_default_params();
    sp.isa = PS_ISA_AMX;
    CHECK(ps_session_create(m, &sp, &s, &e) == PS_ERR_INVALID_ARG && s == NULL &&
          strstr(e.message, "AMX") != NULL);
    sp.isa = PS_ISA_AUTO;
    CHECK(ps_session_create(m, &sp, &s, &e) == PS_OK);
    ps_session_free(s);
    ps_model_free(m);
    unlink(path);
}

int main(void) {
    test_refused();
    if (!ps_cpu_has_amx()) {
        PS_TEST_CPU_LACKS("AMX not available on this CPU: %s", ps_amx_status());
        CHECK(!ps_isa_supported(PS_ISA_AMX));
        test_refused_session();
        return ps_test_done("matmul_amx");
    }
    ps_pool *pool2 = NULL, *pool7 = NULL;
    CHECK(ps_pool_create(2, &pool2) == PS_OK && ps_pool_create(7, &pool7) == PS_OK);
    test_pack_layout();
    test_kernels(pool2, pool7);
    test_streamed_outputs(pool2);
    test_sessions();
    ps_pool_free(pool2);
    ps_pool_free(pool7);
    return ps_test_done("matmul_amx");
}
