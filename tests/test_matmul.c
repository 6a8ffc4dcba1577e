/*
 * test_matmul.c — the matrix kernels of matmul.c against their references, for every weight
 * type (F32, F16, BF16, Q8_0) x every ISA path the CPU has (scalar, AVX2, AVX-512) x odd shapes:
 * m (activation rows) in {1, 3, 17, 256}, n (outputs) not a multiple of the 16-row tile, k
 * (inputs) not a multiple of the vector width for the float types, k a multiple of 32 for Q8_0.
 *
 * Tolerances. The float kernels compute in float32 from weights converted exactly (f16/bf16
 * widen exactly), so the only difference from ps_matmul_ref (double sums) is float32 rounding
 * in the accumulation order: |y - ref| <= (k + 8) * 2^-24 * sum_i |x_i w_i|, the worst-case
 * bound of any summation order of k products — a missing, doubled or misplaced term is far
 * above it. The measured error is also held below 1e-5 * sum_i |x_i w_i| (typical: sqrt(k) *
 * 2^-24, ~2e-6 at k = 1056; one lost term of k = 1056 would be ~1e-3). Q8_0 quantises the
 * activations (as llama.cpp); ps_matmul_ref does the same quantisation, so the same bound holds
 * with x replaced by the dequantised activations (the block sums are exact integers; the float
 * part is one product and one fma per block of 32). BF16 with native activations rounds them to
 * bf16 (AVX-512 BF16: vdpbf16ps, weights in place); bf16 x bf16 products are exact in float32,
 * so the same bound holds with x replaced by the rounded activations. BF16 and Q8_0 also run
 * with float32 activations (f32_act) against the plain reference.
 *
 * BF16 native also: the activation rounding writes the reference's bits on every ISA (ties to
 * even, NaN/inf/overflow/subnormals, tails); 300 rows (two passes of the activation slot) with
 * NaN / inf / overflowing activations poison exactly their rows; 2 threads and a row subset are
 * bitwise the same.
 *
 * Q8_0 also: every ISA path is bitwise equal to the scalar kernel (exact int32 block sums, one
 * float order); the activation quantiser writes the reference's bytes on every ISA, rounds ties
 * away from zero and marks NaN/inf blocks NaN; weights of -128 / 127 against activations of
 * +-127 (the AVX2 maddubs saturation case) agree with the reference and the scalar kernel; a
 * NaN activation makes its row NaN and no other.
 *
 * Bitwise properties (results independent of how the work is cut):
 *   - 2 threads == 1 thread; the first 17 / 3 / 1 rows of an m = 256 call == the m = 17 / 3 /
 *     1 call on the same rows; strided x / y (ldx > k, ldy > n) give the same values and never
 *     write outside the n outputs of a row;
 *   - ps_dot_f32 == one output element of ps_matmul on F32 weights, bitwise;
 *   - ps_attn_pv == zeroing the output and one ps_axpy_f32 per key, for ragged n_keys (up to
 *     600 keys: several runs of the kernel's key blocking);
 *   - ps_attn_scores (16-key block K layout) within the bound of the double dot, per query
 *     independent of the others, never reading keys >= n_keys nor writing scores there.
 * Runs in about a second.
 */
#include "check.h"
#include "base/impl.h"
#include "run/attention.h"
#include "kernels/matmul.h"
#include "kernels/matmul_float.h"
#include "kernels/qact.h"
#include "kernels/quant.h"
#include "kernels/quantize.h"

#include <math.h>

static const ps_isa ISAS[] = {PS_ISA_SCALAR, PS_ISA_AVX2, PS_ISA_AVX512};

static uint64_t rng = 0x243F6A8885A308D3ull;
static float frand(void) { /* uniform in [-1, 1) */
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

/* n rows of k weights of `type` (random, mixed magnitudes); *row_bytes set. */
static void *make_weights(uint32_t type, int64_t n, int64_t k, size_t *row_bytes) {
    size_t rb = ps_quant_row_bytes(type, k);
    uint8_t *w = malloc(rb * (size_t)n);
    float *tmp = malloc(sizeof(float) * (size_t)k);
    for (int64_t j = 0; j < n; j++) {
        uint8_t *row = w + (size_t)j * rb;
        const float scale = (j % 5 == 0) ? 3.0f : 0.1f;
        for (int64_t i = 0; i < k; i++) tmp[i] = frand() * scale;
        switch (type) {
        case PS_GGML_F32: memcpy(row, tmp, sizeof(float) * (size_t)k); break;
        case PS_GGML_F16:
            for (int64_t i = 0; i < k; i++) ((uint16_t *)row)[i] = ps_f32_to_f16(tmp[i]);
            break;
        case PS_GGML_BF16:
            for (int64_t i = 0; i < k; i++) ((uint16_t *)row)[i] = ps_f32_to_bf16(tmp[i]);
            break;
        default: ps_quant_f32_to_q8_0(tmp, (ps_block_q8_0 *)row, k); break;
        }
    }
    free(tmp);
    *row_bytes = rb;
    return w;
}

/* y vs the reference: every element within the order bound, and the worst relative error. */
static void check_close(const char *tag, const ps_mat *w, bool f32_act, const float *x,
                        int64_t ldx, int64_t m, const float *y, int64_t ldy, const float *yref) {
    float *row = malloc(sizeof(float) * (size_t)w->n_in), *xq = malloc(sizeof(float) * (size_t)w->n_in);
    float *qd = malloc(sizeof(float) * (size_t)(w->n_in / 32 + 1));
    uint8_t *qb = malloc((size_t)w->n_in);
    int64_t bad = 0;
    double worst = 0;
    for (int64_t j = 0; j < w->n_out; j++) {
        ps_quant_row_to_f32_ref(w->type, (const uint8_t *)w->data + (size_t)j * w->row_bytes, row,
                                w->n_in);
        for (int64_t r = 0; r < m; r++) {
            const float *xr = x + r * ldx;
            if (w->type == PS_GGML_Q8_0 && !f32_act) { /* the kernel multiplies the quantised row */
                ps_quant_act_q8_ref(xr, w->n_in, qb, qd, false);
                for (int64_t i = 0; i < w->n_in; i++) xq[i] = (float)(int8_t)qb[i] * qd[i / 32];
                xr = xq;
            } else if (w->type == PS_GGML_BF16 && !f32_act) { /* ... or the bf16-rounded one */
                ps_quant_act_bf16_ref(xr, w->n_in, NULL, xq);
                xr = xq;
            } else if (w->type == PS_GGML_F16 && !f32_act) { /* ... or the half-rounded one */
                ps_quant_act_f16_ref(xr, w->n_in, xq);
                xr = xq;
            }
            double mag = 0;
            for (int64_t i = 0; i < w->n_in; i++) mag += fabs((double)xr[i] * row[i]);
            const double bound = (double)(w->n_in + 8) * ldexp(1.0, -24) * mag + 1e-30;
            const double e = fabs((double)y[r * ldy + j] - yref[r * w->n_out + j]);
            if (!(e <= bound)) bad++;
            worst = fmax(worst, e / (mag + 1e-30));
        }
    }
    CHECKF(bad == 0, "%s: %lld outputs outside the summation-order bound", tag, (long long)bad);
    CHECKF(worst < 1e-5, "%s: worst error relative to sum |x w| %g", tag, worst);
    free(row);
    free(xq);
    free(qd);
    free(qb);
}

static void test_matmul_shapes(ps_pool *pool2) {
    const uint32_t types[] = {PS_GGML_F32, PS_GGML_F16, PS_GGML_BF16, PS_GGML_Q8_0};
    /* (n, k): n off the 16-row tile and the 4-row micro-kernel; k off the vector widths (float
     * types; odd k leaves a bf16 pair half empty) or a multiple of 32 (Q8_0); k > 1024 crosses
     * the kernels' k blocks. */
    const int64_t shapes[][2] = {{37, 160}, {70, 1056}, {5, 201}, {16, 64}, {19, 33}};
    const int64_t ms[] = {1, 3, 17, 256};
    const int64_t M = 256, KMAX = 1056 + 24, NMAX = 70 + 9;
    float *x = malloc(sizeof(float) * (size_t)(M * KMAX));
    for (int64_t i = 0; i < M * KMAX; i++) x[i] = frand();
    float *yref = malloc(sizeof(float) * (size_t)(M * NMAX));
    float *y = malloc(sizeof(float) * (size_t)(M * NMAX)), *y2 = malloc(sizeof(float) * (size_t)(M * NMAX));
    float *ym = malloc(sizeof(float) * (size_t)(M * NMAX)), *ys = malloc(sizeof(float) * (size_t)(M * NMAX));
    const size_t stride = ps_matmul_scratch_floats(KMAX);
    float *scratch = ps_aligned_alloc(64, sizeof(float) * stride * 2);
    for (size_t s = 0; s < PS_ARRAY_LEN(shapes); s++) {
        for (size_t t = 0; t < 2 * PS_ARRAY_LEN(types); t++) {
            /* each type with native activations, then BF16 and Q8_0 with float32 ones */
            const bool f32_act = t >= PS_ARRAY_LEN(types);
            const uint32_t type = types[t % PS_ARRAY_LEN(types)];
            if (f32_act && type != PS_GGML_BF16 && type != PS_GGML_Q8_0) continue;
            int64_t n = shapes[s][0], k = shapes[s][1];
            if (type == PS_GGML_Q8_0) k = (k + 31) / 32 * 32;
            ps_mat w = {0};
            void *wdata = make_weights(type, n, k, &w.row_bytes); /* w's weights, owned */
            w.data = wdata;
            w.type = type;
            w.n_in = k;
            w.n_out = n;
            const int64_t ldx = k + 7, ldy = n + 9; /* strided x and y */
            CHECK(ps_matmul_ref(&w, f32_act, x, ldx, M, yref, n) == PS_OK);
            bool have_scalar = false;
            for (size_t i = 0; i < PS_ARRAY_LEN(ISAS); i++) {
                if (!ps_isa_supported(ISAS[i])) continue;
                char tag[96];
                snprintf(tag, sizeof tag, "%s %s%s n %lld k %lld", ps_ggml_type_name(type),
                         ps_isa_name(ISAS[i]), f32_act ? " f32-act" : "", (long long)n,
                         (long long)k);
                ps_matmul_env env = {NULL, ISAS[i], scratch, stride, f32_act, false};
                for (int64_t e = 0; e < M * ldy; e++) y[e] = -7.0f; /* sentinels */
                ps_matmul(&env, &w, x, ldx, M, y, ldy);
                check_close(tag, &w, f32_act, x, ldx, M, y, ldy, yref);
                bool kept = true;
                for (int64_t r = 0; r < M; r++)
                    for (int64_t j = n; j < ldy; j++) kept &= y[r * ldy + j] == -7.0f;
                CHECKF(kept, "%s: wrote outside the outputs of a row", tag);
                /* Q8_0: exact int32 block sums and one float order on every ISA -> bitwise */
                if (type == PS_GGML_Q8_0 && !f32_act) {
                    if (ISAS[i] == PS_ISA_SCALAR) {
                        memcpy(ys, y, sizeof(float) * (size_t)(M * ldy));
                        have_scalar = true;
                    } else {
                        CHECKF(have_scalar && !memcmp(ys, y, sizeof(float) * (size_t)(M * ldy)),
                               "%s: differs from the scalar reference kernel", tag);
                    }
                }
                /* 2 threads: bitwise */
                ps_matmul_env env2 = {pool2, ISAS[i], scratch, stride, f32_act, false};
                for (int64_t e = 0; e < M * ldy; e++) y2[e] = -7.0f;
                ps_matmul(&env2, &w, x, ldx, M, y2, ldy);
                CHECKF(!memcmp(y, y2, sizeof(float) * (size_t)(M * ldy)),
                       "%s: 2 threads differ from 1", tag);
                /* fewer rows: bitwise the same rows */
                for (size_t mi = 0; mi < PS_ARRAY_LEN(ms); mi++) {
                    const int64_t m = ms[mi];
                    ps_matmul(mi % 2 ? &env2 : &env, &w, x, ldx, m, ym, n);
                    bool same = true;
                    for (int64_t r = 0; r < m; r++)
                        same &= !memcmp(ym + r * n, y + r * ldy, sizeof(float) * (size_t)n);
                    CHECKF(same, "%s: m = %lld differs from the rows of m = 256", tag,
                           (long long)m);
                }
            }
            free(wdata);
        }
    }
    ps_free(scratch);
    free(x);
    free(y);
    free(y2);
    free(ym);
    free(ys);
    free(yref);
}

/* Activation quantiser: every ISA writes the reference's bytes and scales, signed and offset;
 * ties (x / d exactly k + 0.5) round away from zero; a block with NaN or inf gets d = NaN.
 * The special blocks sit both in the first 16 (AVX-512 takes blocks in sixteens) and past
 * the last sixteen (its scalar tail). */
static void test_quant_act(void) {
    enum { N = 32 * 40 };
    float *x = malloc(sizeof(float) * N), d0[N / 32], d1[N / 32];
    uint8_t q0[N], q1[N];
    for (int i = 0; i < N; i++) x[i] = frand() * (i < 640 ? 1.0f : 1e-3f);
    for (int i = 0; i < 32; i++) x[i] = (float)(i - 16) + 0.5f; /* amax 15.5: not ties */
    for (int i = 0; i < 32; i++) x[32 + i] = i == 0 ? 127.0f : (float)(i % 9) - 4.5f; /* d = 1: ties */
    for (int i = 0; i < 32; i++) x[64 + i] = 0.0f;   /* zero block: d = 0, q = 0 */
    x[96 + 5] = NAN;                                 /* NaN block */
    x[128 + 31] = -INFINITY;                         /* inf block */
    x[160] = 1e-40f;                                 /* subnormal amax */
    x[32 * 33 + 2] = NAN;                            /* in the tail: NaN block, zero block */
    for (int i = 0; i < 32; i++) x[32 * 34 + i] = 0.0f;
    for (int i = 1; i < 32; i++) x[160 + i] = 0.0f;
    x[192 + 7] = -1e7f;  /* dd = 78740: its f16 is inf */
    x[224 + 3] = 3e-6f;  /* dd ~ 2.4e-8: an f16 subnormal */
    x[256 + 9] = 65520.0f * 127.0f; /* dd = 65520: the f16 tie that rounds to inf */
    for (int off = 0; off < 2; off++) {
        ps_quant_act_q8_ref(x, N, q0, d0, off);
        for (size_t k = 0; k < PS_ARRAY_LEN(ISAS); k++) {
            if (!ps_isa_supported(ISAS[k])) continue;
            memset(q1, 0x55, sizeof q1);
            ps_quant_act_q8(ISAS[k], x, N, q1, d1, off);
            bool same = !memcmp(q0, q1, N);
            for (int b = 0; b < N / 32; b++)
                same &= (isnan(d0[b]) && isnan(d1[b])) || !memcmp(&d0[b], &d1[b], 4);
            CHECKF(same, "act q8 on %s (offset %d) differs from the reference", ps_isa_name(ISAS[k]),
                   off);
        }
        const int o = off ? 128 : 0;
        CHECK(d0[1] == 1.0f && q0[32] == (uint8_t)(127 + o));
        bool ties = true; /* -4.5 -> -5, 4.5 -> 5 (not banker's rounding) */
        for (int i = 1; i < 32; i++) {
            const float v = (float)(i % 9) - 4.5f;
            const int want = v < 0 ? -(int)(-v + 0.5f) : (int)(v + 0.5f);
            ties &= q0[32 + i] == (uint8_t)(int8_t)(want + o);
        }
        CHECKF(ties, "act q8 ties do not round half away from zero (offset %d)", off);
        CHECK(d0[2] == 0.0f && q0[64] == o && isnan(d0[3]) && isnan(d0[4]) && q0[96] == o);
        bool small = true;
        for (int i = 0; i < N; i++) small &= abs(off ? (int)q0[i] - 128 : (int)(int8_t)q0[i]) <= 127;
        CHECK(small);
    }
    free(x);
}

/* Weights with every int8 value including -128 against activations at +-127: the AVX2 maddubs
 * path must not saturate (then it equals the scalar kernel bitwise) and all agree with the
 * reference; a NaN in one activation row makes that row NaN and leaves the others finite. */
static void test_q8_extremes(ps_pool *pool2) {
    const int64_t n = 21, k = 256, m = 13;
    const size_t rb = ps_quant_row_bytes(PS_GGML_Q8_0, k);
    uint8_t *wd = malloc(rb * (size_t)n);
    for (int64_t j = 0; j < n; j++)
        for (int64_t b = 0; b < k / 32; b++) {
            ps_block_q8_0 blk;
            blk.d = ps_f32_to_f16(0.01f * (float)(1 + (j + b) % 7));
            for (int i = 0; i < 32; i++)
                blk.qs[i] = (int8_t)(j % 3 == 0 ? -128 : j % 3 == 1 ? 127 : (int)(rng = rng * 6364136223846793005ull + 1442695040888963407ull) >> 24);
            memcpy(wd + (size_t)j * rb + (size_t)b * sizeof blk, &blk, sizeof blk);
        }
    float *x = malloc(sizeof(float) * (size_t)(m * k));
    for (int64_t i = 0; i < m * k; i++) x[i] = (i / k) % 2 ? ((i % 2) ? 1.0f : -1.0f) : frand();
    x[5 * k + 77] = NAN;
    ps_mat w = {wd, PS_GGML_Q8_0, k, n, rb, NULL, NULL, NULL};
    float *yref = malloc(sizeof(float) * (size_t)(m * n)), *y = malloc(sizeof(float) * (size_t)(m * n));
    float *ys = malloc(sizeof(float) * (size_t)(m * n));
    const size_t stride = ps_matmul_scratch_floats(k);
    float *scratch = ps_aligned_alloc(64, sizeof(float) * stride * 2);
    CHECK(ps_matmul_ref(&w, false, x, k, m, yref, n) == PS_OK);
    for (size_t i = 0; i < PS_ARRAY_LEN(ISAS); i++) {
        if (!ps_isa_supported(ISAS[i])) continue;
        ps_matmul_env env = {i % 2 ? pool2 : NULL, ISAS[i], scratch, stride, false, false};
        ps_matmul(&env, &w, x, k, m, y, n);
        if (ISAS[i] == PS_ISA_SCALAR) memcpy(ys, y, sizeof(float) * (size_t)(m * n));
        int64_t bad = 0, nan_ok = 0;
        for (int64_t r = 0; r < m; r++)
            for (int64_t j = 0; j < n; j++) {
                const float a = y[r * n + j], e = yref[r * n + j];
                if (r == 5) nan_ok += isnan(a);
                else if (!(fabsf(a - e) <= 1e-5f * (fabsf(e) + 1.0f))) bad++;
            }
        CHECKF(bad == 0 && nan_ok == n, "q8 extremes on %s: %lld off the reference, %lld NaN of %lld",
               ps_isa_name(ISAS[i]), (long long)bad, (long long)nan_ok, (long long)n);
        bool same = true;
        for (int64_t e = 0; e < m * n; e++)
            same &= (isnan(y[e]) && isnan(ys[e])) || y[e] == ys[e];
        CHECKF(same, "q8 extremes on %s differ from the scalar kernel", ps_isa_name(ISAS[i]));
    }
    ps_free(scratch);
    free(wd);
    free(x);
    free(yref);
    free(y);
    free(ys);
}

/* bf16 activation rounding: every ISA writes the reference's bits (both outputs), on lengths
 * off the vector widths; ties go to even, NaN stays NaN (quiet, sign kept), inf stays, values
 * past the largest bf16 round to inf, subnormals are kept. */
static void test_quant_act_bf16(void) {
    enum { N = 203 };
    float x[N];
    for (int i = 0; i < N; i++) x[i] = frand() * (i % 3 ? 1.0f : 1e3f);
    const uint32_t specials[] = {
        0x3f808000u, /* 1 + 2^-8: tie, rounds down to even 1.0 */
        0x3f818000u, /* 1 + 3 * 2^-8: tie, rounds up to even */
        0x3f808001u, /* just above the tie: up */
        0x7f7fffffu, /* FLT_MAX: rounds to inf */
        0xff800000u, /* -inf */
        0x7fc00001u, /* quiet NaN */
        0xff800001u, /* signalling NaN, negative: stays a NaN */
        0x00000001u, /* smallest subnormal: rounds to +0 */
        0x00018000u, /* subnormal tie */
        0x007fffffu, /* largest subnormal: rounds up to the smallest normal */
        0x80000000u, /* -0 */
    };
    for (size_t i = 0; i < PS_ARRAY_LEN(specials); i++) memcpy(&x[7 * i + 3], &specials[i], 4);
    uint16_t h0[N], h1[N];
    float f0[N], f1[N];
    ps_quant_act_bf16_ref(x, N, h0, f0);
    for (int i = 0; i < N; i++) {
        uint32_t u;
        memcpy(&u, &f0[i], 4);
        CHECKF(u == (uint32_t)h0[i] << 16, "bf16 ref: float output %d is not its bits", i);
    }
    CHECK(h0[3] == 0x3f80 && h0[10] == 0x3f82 && h0[17] == 0x3f81 && h0[24] == 0x7f80 &&
          h0[31] == 0xff80 && h0[38] == 0x7fc0 && h0[45] == 0xffc0 && h0[52] == 0x0000 &&
          h0[59] == 0x0002 && h0[66] == 0x0080 && h0[73] == 0x8000);
    for (int len = N; len >= N - 17; len -= 17) /* tails of every width */
        for (size_t k = 0; k < PS_ARRAY_LEN(ISAS); k++) {
            if (!ps_isa_supported(ISAS[k])) continue;
            memset(h1, 0x55, sizeof h1);
            memset(f1, 0x55, sizeof f1);
            ps_quant_act_bf16(ISAS[k], x, len, h1, f1);
            CHECKF(!memcmp(h0, h1, 2 * (size_t)len) && !memcmp(f0, f1, 4 * (size_t)len),
                   "act bf16 on %s (n %d) differs from the reference", ps_isa_name(ISAS[k]), len);
            uint32_t past = 0x55555555u;
            CHECKF(len == N || (h1[len] == 0x5555 && !memcmp(&f1[len], &past, 4)),
                   "act bf16 on %s wrote past n = %d", ps_isa_name(ISAS[k]), len);
            memset(h1, 0x55, sizeof h1);
            ps_quant_act_bf16(ISAS[k], x, len, h1, NULL);
            CHECKF(!memcmp(h0, h1, 2 * (size_t)len), "act bf16 on %s, bits only", ps_isa_name(ISAS[k]));
        }
}

/* ps_quant_act_f16: every ISA variant writes the reference's bits, on tails of every width:
 * ties go to even, values past 65504 round to inf, subnormal halves are kept and the smallest
 * rounds to zero, a NaN becomes the quiet NaN of its sign; the reference is ps_f32_to_f16. */
static void test_quant_act_f16(void) {
    enum { N = 203 };
    float x[N];
    for (int i = 0; i < N; i++) x[i] = frand() * (i % 3 ? 1.0f : 1e3f);
    const uint32_t specials[] = {
        0x3f801000u, /* 1 + 2^-11: tie, rounds down to even 1.0 */
        0x3f803000u, /* 1 + 3 * 2^-11: tie, rounds up to even */
        0x3f801001u, /* just above the tie: up */
        0x477ff000u, /* 65520: rounds to inf */
        0xff800000u, /* -inf */
        0x7fc00001u, /* quiet NaN with a payload: the plain quiet NaN */
        0xff800001u, /* signalling NaN, negative: -quiet NaN */
        0x33000000u, /* 2^-25: a tie with zero, rounds to +0 */
        0x33800000u, /* 2^-24: the smallest subnormal half */
        0x387fc000u, /* a subnormal half */
        0x80000000u, /* -0 */
    };
    const uint32_t want[] = {0x3f800000u, 0x3f804000u, 0x3f802000u, 0x7f800000u, 0xff800000u,
                             0x7fc00000u, 0xffc00000u, 0x00000000u, 0x33800000u, 0x387fc000u,
                             0x80000000u};
    for (size_t i = 0; i < PS_ARRAY_LEN(specials); i++) memcpy(&x[7 * i + 3], &specials[i], 4);
    float f0[N], f1[N];
    ps_quant_act_f16_ref(x, N, f0);
    for (size_t i = 0; i < PS_ARRAY_LEN(specials); i++) {
        uint32_t u;
        memcpy(&u, &f0[7 * i + 3], 4);
        CHECKF(u == want[i], "f16 ref: special %zu (0x%08x) -> 0x%08x, want 0x%08x", i,
               specials[i], u, want[i]);
    }
    for (int len = N; len >= N - 17; len -= 17)
        for (size_t k = 0; k < PS_ARRAY_LEN(ISAS); k++) {
            if (!ps_isa_supported(ISAS[k])) continue;
            memset(f1, 0x55, sizeof f1);
            ps_quant_act_f16(ISAS[k], x, len, f1);
            CHECKF(!memcmp(f0, f1, 4 * (size_t)len), "act f16 on %s (n %d) differs from the "
                   "reference", ps_isa_name(ISAS[k]), len);
            uint32_t past = 0x55555555u;
            CHECKF(len == N || !memcmp(&f1[len], &past, 4), "act f16 on %s wrote past n = %d",
                   ps_isa_name(ISAS[k]), len);
        }
}

/* BF16 weights, native activations, beyond the shape test: 300 rows (two passes of the
 * 256-row activation slot), a NaN and an inf activation poisoning their rows only, an
 * activation past the largest bf16 (rounds to inf), and every ISA / thread count within the
 * order bound of the reference, 2 threads bitwise == 1, rows of the 300-row call bitwise ==
 * the same rows alone. */
static void test_bf16_native(ps_pool *pool2) {
    const int64_t n = 45, k = 2100, m = 300;
    size_t rb;
    void *wd = make_weights(PS_GGML_BF16, n, k, &rb);
    ps_mat w = {wd, PS_GGML_BF16, k, n, rb, NULL, NULL, NULL};
    float *x = malloc(sizeof(float) * (size_t)(m * k));
    for (int64_t i = 0; i < m * k; i++) x[i] = frand();
    x[7 * k + 1000] = NAN;
    x[260 * k + 5] = -INFINITY;
    x[290 * k + 2099] = 3.4e38f; /* rounds to +inf in bf16 */
    float *yref = malloc(sizeof(float) * (size_t)(m * n)), *y = malloc(sizeof(float) * (size_t)(m * n));
    float *y2 = malloc(sizeof(float) * (size_t)(m * n)), *ym = malloc(sizeof(float) * (size_t)(m * n));
    const size_t stride = ps_matmul_scratch_floats(k);
    float *scratch = ps_aligned_alloc(64, sizeof(float) * stride * 2);
    CHECK(ps_matmul_ref(&w, false, x, k, m, yref, n) == PS_OK);
    for (size_t i = 0; i < PS_ARRAY_LEN(ISAS); i++) {
        if (!ps_isa_supported(ISAS[i])) continue;
        const char *isa = ps_isa_name(ISAS[i]);
        ps_matmul_env env = {NULL, ISAS[i], scratch, stride, false, false};
        ps_matmul(&env, &w, x, k, m, y, n);
        int64_t poisoned = 0;
        for (int64_t r = 0; r < m; r++)
            for (int64_t j = 0; j < n; j++)
                if (r == 7 || r == 260 || r == 290)
                    poisoned += !isfinite(y[r * n + j]) && !isfinite(yref[r * n + j]);
        CHECKF(poisoned == 3 * n, "bf16 native on %s: %lld of %lld poisoned outputs are not "
               "NaN/inf with the reference", isa, (long long)poisoned, (long long)(3 * n));
        /* the finite rows between the poisoned ones, within the order bound */
        const int64_t seg[][2] = {{0, 7}, {8, 260}, {261, 290}, {291, 300}};
        for (size_t g = 0; g < PS_ARRAY_LEN(seg); g++) {
            char tag[64];
            snprintf(tag, sizeof tag, "bf16 native %s rows %lld..", isa, (long long)seg[g][0]);
            check_close(tag, &w, false, x + seg[g][0] * k, k, seg[g][1] - seg[g][0],
                        y + seg[g][0] * n, n, yref + seg[g][0] * n);
        }
        ps_matmul_env env2 = {pool2, ISAS[i], scratch, stride, false, false};
        ps_matmul(&env2, &w, x, k, m, y2, n);
        bool same = true;
        for (int64_t e = 0; e < m * n; e++) same &= !memcmp(&y[e], &y2[e], 4);
        CHECKF(same, "bf16 native on %s: 2 threads differ from 1", isa);
        ps_matmul(&env, &w, x + 250 * k, k, 50, ym, n);
        CHECKF(!memcmp(ym, y + 250 * n, sizeof(float) * (size_t)(50 * n)),
               "bf16 native on %s: rows 250..299 alone differ from the 300-row call", isa);
    }
    ps_free(scratch);
    free(wd);
    free(x);
    free(yref);
    free(y);
    free(y2);
    free(ym);
}

/* ps_dot_f32 == one output element of ps_matmul on F32 weights (the order matmul.h promises). */
static void test_dot(void) {
    const int64_t n_out = 45, m = 11, hd = 72; /* rows, activations, length (odd tails) */
    float *kx = malloc(sizeof(float) * n_out * hd), *q = malloc(sizeof(float) * m * hd);
    for (int64_t i = 0; i < n_out * hd; i++) kx[i] = frand();
    for (int64_t i = 0; i < m * hd; i++) q[i] = frand();
    float *scratch = ps_aligned_alloc(64, sizeof(float) * ps_matmul_scratch_floats(hd));
    float y[11 * 45];
    for (size_t i = 0; i < PS_ARRAY_LEN(ISAS); i++) {
        if (!ps_isa_supported(ISAS[i])) continue;
        ps_mat w = {kx, PS_GGML_F32, hd, n_out, sizeof(float) * hd, NULL, NULL, NULL};
        ps_matmul_env env = {NULL, ISAS[i], scratch, ps_matmul_scratch_floats(hd), false, false};
        ps_matmul(&env, &w, q, hd, m, y, n_out);
        bool same = true;
        for (int64_t r = 0; r < m; r++)
            for (int64_t j = 0; j < n_out; j++)
                same &= y[r * n_out + j] == ps_dot_f32(ISAS[i], q + r * hd, kx + j * hd, hd);
        CHECKF(same, "ps_dot_f32 != ps_matmul on %s", ps_isa_name(ISAS[i]));
    }
    ps_free(scratch);
    free(kx);
    free(q);
}

/* ps_attn_pv == zero + one ps_axpy_f32 per key, bitwise, for ragged causal n_keys, over more
 * keys than one run of the kernel's key blocking (runs of 256, counts ending on either side of
 * a run's edge). */
static void test_attn_pv(void) {
    const int64_t keys = 600, ldp = 610;
    const int64_t hds[] = {128, 8, 40};
    const int32_t nq = 13;
    float *p = malloc(sizeof(float) * nq * ldp), *v = malloc(sizeof(float) * keys * 128);
    for (int64_t i = 0; i < nq * ldp; i++) p[i] = frand() * 0.5f + 0.5f;
    for (int64_t i = 0; i < keys * 128; i++) v[i] = frand();
    int32_t n_keys[13];
    for (int32_t q = 0; q < nq; q++) n_keys[q] = (int32_t)(keys - nq + 1 + q); /* causal */
    n_keys[5] = 1;                                                           /* and ragged */
    n_keys[3] = 256, n_keys[4] = 257, n_keys[7] = 512;
    float out[13 * 130], ref[13 * 130];
    for (size_t h = 0; h < PS_ARRAY_LEN(hds); h++) {
        const int64_t hd = hds[h], ldo = hd + 2;
        for (size_t i = 0; i < PS_ARRAY_LEN(ISAS); i++) {
            if (!ps_isa_supported(ISAS[i])) continue;
            memset(out, 0, sizeof out);
            memset(ref, 0, sizeof ref);
            ps_attn_pv(ISAS[i], p, ldp, n_keys, nq, v, PS_KV_F32, hd, out, ldo);
            for (int32_t q = 0; q < nq; q++)
                for (int32_t j = 0; j < n_keys[q]; j++)
                    ps_axpy_f32(ISAS[i], p[q * ldp + j], v + j * hd, ref + q * ldo, hd);
            CHECKF(!memcmp(out, ref, sizeof out), "attn_pv on %s, hd %lld differs from axpy steps",
                   ps_isa_name(ISAS[i]), (long long)hd);
        }
    }
    free(p);
    free(v);
}

/* ps_attn_scores over the 16-key block layout: within the order bound of the double dot
 * product; a query's scores do not depend on the other queries of the call (13 at once ==
 * one at a time, bitwise); keys past n_keys are never read (NaN there stays out) and scores
 * past n_keys never written; scalar == the plain sequential sum bitwise. */
static void test_attn_scores(void) {
    const int32_t nq = 13, n_keys = 75, cap = 80; /* cap: n_keys rounded up to 16 */
    const int32_t hds[] = {128, 8, 40};
    for (size_t h = 0; h < PS_ARRAY_LEN(hds); h++) {
        const int32_t hd = hds[h];
        const int64_t ldq = hd + 3, lds = 83;
        float *q = malloc(sizeof(float) * nq * ldq), *kt = malloc(sizeof(float) * cap * hd);
        float *k = malloc(sizeof(float) * cap * hd);
        float *sc = malloc(sizeof(float) * nq * lds), *s1 = malloc(sizeof(float) * nq * lds);
        for (int64_t i = 0; i < nq * ldq; i++) q[i] = frand();
        for (int32_t j = 0; j < cap; j++)
            for (int32_t d = 0; d < hd; d++) k[j * hd + d] = j < n_keys ? frand() : NAN;
        for (int32_t j = 0; j < cap; j++) ps_attn_k_store(PS_ISA_SCALAR, kt, PS_KV_F32, hd, j, k + j * hd);
        for (size_t i = 0; i < PS_ARRAY_LEN(ISAS); i++) {
            if (!ps_isa_supported(ISAS[i])) continue;
            for (int64_t e = 0; e < nq * lds; e++) sc[e] = s1[e] = -7.0f;
            ps_attn_scores(ISAS[i], q, ldq, nq, kt, PS_KV_F32, n_keys, hd, sc, lds);
            for (int32_t r = 0; r < nq; r++)
                ps_attn_scores(ISAS[i], q + r * ldq, ldq, 1, kt, PS_KV_F32, n_keys, hd, s1 + r * lds, lds);
            CHECKF(!memcmp(sc, s1, sizeof(float) * nq * lds),
                   "attn_scores on %s, hd %d: a query's scores depend on the others",
                   ps_isa_name(ISAS[i]), hd);
            int64_t bad = 0, untouched = 0, seq = 0;
            for (int32_t r = 0; r < nq; r++) {
                for (int32_t j = 0; j < n_keys; j++) {
                    double exact = 0, mag = 0;
                    float plain = 0.0f;
                    for (int32_t d = 0; d < hd; d++) {
                        exact += (double)q[r * ldq + d] * k[j * hd + d];
                        mag += fabs((double)q[r * ldq + d] * k[j * hd + d]);
                        plain += q[r * ldq + d] * k[j * hd + d];
                    }
                    const float got = sc[r * lds + j];
                    if (!(fabs(got - exact) <= (hd + 2) * ldexp(1.0, -24) * mag + 1e-30)) bad++;
                    if (got != plain) seq++;
                }
                for (int32_t j = n_keys; j < lds; j++) untouched += sc[r * lds + j] == -7.0f;
            }
            CHECKF(bad == 0, "attn_scores on %s, hd %d: %lld scores outside the bound",
                   ps_isa_name(ISAS[i]), hd, (long long)bad);
            CHECKF(untouched == nq * (lds - n_keys), "attn_scores on %s: wrote past n_keys",
                   ps_isa_name(ISAS[i]));
            if (ISAS[i] == PS_ISA_SCALAR)
                CHECKF(seq == 0, "scalar attn_scores != sequential sum (%lld)", (long long)seq);
        }
        free(q);
        free(kt);
        free(k);
        free(sc);
        free(s1);
    }
}

/* ps_attn_scores' SIMD forms for every length of the last step of keys (1..4 blocks of 16,
 * full and ragged): each score is the fused multiply-add chain over the head's dimensions in
 * order, bitwise, and nothing is written past n_keys. */
static void test_attn_scores_tails(void) {
    const int32_t nq = 7, hd = 40, cap = 144, lds = 150;
    const int32_t lens[] = {1, 15, 16, 17, 31, 32, 33, 48, 49, 63, 64, 65, 75, 97, 113, 128, 144};
    float *q = malloc(sizeof(float) * nq * hd), *k = malloc(sizeof(float) * cap * hd);
    float *kt = malloc(sizeof(float) * cap * hd), *sc = malloc(sizeof(float) * nq * lds);
    for (int32_t i = 0; i < nq * hd; i++) q[i] = frand();
    for (int32_t i = 0; i < cap * hd; i++) k[i] = frand();
    for (int32_t j = 0; j < cap; j++) ps_attn_k_store(PS_ISA_SCALAR, kt, PS_KV_F32, hd, j, k + j * hd);
    for (size_t i = 0; i < PS_ARRAY_LEN(ISAS); i++) {
        if (!ps_isa_supported(ISAS[i]) || ISAS[i] == PS_ISA_SCALAR) continue;
        int64_t bad = 0, wrote = 0;
        for (size_t l = 0; l < PS_ARRAY_LEN(lens); l++) {
            const int32_t n_keys = lens[l];
            for (int32_t e = 0; e < nq * lds; e++) sc[e] = -7.0f;
            ps_attn_scores(ISAS[i], q, hd, nq, kt, PS_KV_F32, n_keys, hd, sc, lds);
            for (int32_t r = 0; r < nq; r++) {
                for (int32_t j = 0; j < n_keys; j++) {
                    float acc = 0.0f;
                    for (int32_t d = 0; d < hd; d++) acc = fmaf(q[r * hd + d], k[j * hd + d], acc);
                    bad += memcmp(&acc, &sc[r * lds + j], sizeof acc) != 0;
                }
                for (int32_t j = n_keys; j < lds; j++) wrote += sc[r * lds + j] != -7.0f;
            }
        }
        CHECKF(bad == 0 && wrote == 0,
               "attn_scores on %s over 1..144 keys: %lld scores differ from the fma chain, %lld "
               "written past n_keys", ps_isa_name(ISAS[i]), (long long)bad, (long long)wrote);
    }
    free(q);
    free(k);
    free(kt);
    free(sc);
}

/* One output of the vdpbf16ps kernel, in its defined order, in plain C: 16 lane accumulators;
 * chunk c of 32 inputs adds to lane i (acc + x[2i+1] w[2i+1]) + x[2i] w[2i] (each product exact
 * in float32, each sum rounded; inputs past n are zeros), then hsum512's tree:
 * ((l0+l8)+(l4+l12)) + ((l2+l10)+(l6+l14)), and the same from lanes 1, 3, 5, ... (finite,
 * normal data: the kernel's DAZ / FTZ do not come in). */
static float bf16_dp_order(const uint16_t *x, const uint16_t *w, int64_t n) {
    float l[16] = {0};
    for (int64_t c = 0; c < n; c += 32)
        for (int i = 0; i < 16; i++) {
            float p[2];
            for (int h = 0; h < 2; h++) {
                const int64_t e = c + 2 * i + h;
                p[h] = e < n ? ps_bf16_to_f32(x[e]) * ps_bf16_to_f32(w[e]) : 0.0f;
            }
            l[i] = l[i] + p[1];
            l[i] = l[i] + p[0];
        }
    float t3[8], t6[4];
    for (int i = 0; i < 8; i++) t3[i] = l[8 + i] + l[i];
    for (int i = 0; i < 4; i++) t6[i] = t3[4 + i] + t3[i];
    return (t6[0] + t6[2]) + (t6[1] + t6[3]);
}

/* BF16 native on AVX-512 BF16, bitwise against bf16_dp_order on the rounded activations:
 * whatever the kernel's register blocking, packing or k blocking, every output keeps that
 * order. Shapes cross every edge of the kernel: rows 1..13 and 300 (the 6 / 4 / 2 / 1-row
 * forms, two 256-row passes), n off the 4-row groups and the 64-row tasks, k off the 32-input
 * chunk and past the 1024-input k block; weights at 64-byte, 32 mod 64 (as a GGUF tensor in
 * its mapping may be) and 2 mod 64 addresses; 1 and 2 threads. */
static void test_bf16_order(ps_pool *pool2) {
    if (!ps_cpu_has_avx512bf16() || !ps_isa_supported(PS_ISA_AVX512)) {
        PS_TEST_CPU_LACKS("AVX-512 BF16 (vdpbf16ps): the kernel's order against plain C");
        return;
    }
    static const struct { int64_t m, n, k; } shapes[] = {
        {1, 5, 32}, {13, 67, 1000}, {7, 130, 2080}, {300, 70, 1056}, {9, 3, 3100}, {12, 64, 64},
    };
    static const size_t offs[] = {0, 32, 2};
    for (size_t si = 0; si < PS_ARRAY_LEN(shapes); si++)
        for (size_t oi = 0; oi < PS_ARRAY_LEN(offs); oi++) {
            const int64_t m = shapes[si].m, n = shapes[si].n, k = shapes[si].k;
            size_t rb;
            void *wd = make_weights(PS_GGML_BF16, n, k, &rb);
            uint8_t *buf = ps_aligned_alloc(64, rb * (size_t)n + 64);
            memcpy(buf + offs[oi], wd, rb * (size_t)n);
            ps_mat w = {buf + offs[oi], PS_GGML_BF16, k, n, rb, NULL, NULL, NULL};
            float *x = malloc(sizeof(float) * (size_t)(m * k));
            uint16_t *xq = malloc(sizeof(uint16_t) * (size_t)(m * k));
            float *y = malloc(sizeof(float) * (size_t)(m * n)),
                  *y2 = malloc(sizeof(float) * (size_t)(m * n));
            for (int64_t i = 0; i < m * k; i++) x[i] = frand();
            for (int64_t r = 0; r < m; r++)
                ps_quant_act_bf16_ref(x + r * k, k, xq + r * k, NULL);
            const size_t stride = ps_matmul_scratch_floats(k);
            float *scratch = ps_aligned_alloc(64, sizeof(float) * stride * 2);
            ps_matmul_env env = {NULL, PS_ISA_AVX512, scratch, stride, false, false};
            ps_matmul(&env, &w, x, k, m, y, n);
            ps_matmul_env env2 = {pool2, PS_ISA_AVX512, scratch, stride, false, false};
            ps_matmul(&env2, &w, x, k, m, y2, n);
            int64_t bad = 0, bad2 = 0;
            for (int64_t r = 0; r < m; r++)
                for (int64_t j = 0; j < n; j++) {
                    const float e = bf16_dp_order(xq + r * k,
                                                  (const uint16_t *)(buf + offs[oi] + (size_t)j * rb), k);
                    bad += memcmp(&e, &y[r * n + j], 4) != 0;
                    bad2 += memcmp(&e, &y2[r * n + j], 4) != 0;
                }
            CHECKF(bad == 0 && bad2 == 0, "bf16 vdpbf16ps m %lld n %lld k %lld (weights at +%zu): "
                   "%lld / %lld outputs (1 / 2 threads) off the defined order", (long long)m,
                   (long long)n, (long long)k, offs[oi], (long long)bad, (long long)bad2);
            /* the tile copy made at load (ps_bf16_dp_pack_to): the kernel reads it in place,
             * bitwise the same outputs; its rows widen to the weights' floats */
            uint8_t *tiles = ps_aligned_alloc(64, ps_bf16_dp_tiles_bytes(&w));
            ps_bf16_dp_pack_to(&w, 0, w.n_out, tiles);
            ps_mat wt = w;
            wt.dp_tiles = tiles;
            float *y3 = malloc(sizeof(float) * (size_t)(m * n)),
                  *y4 = malloc(sizeof(float) * (size_t)(m * n));
            ps_matmul(&env, &wt, x, k, m, y3, n);
            ps_matmul(&env2, &wt, x, k, m, y4, n);
            CHECKF(!memcmp(y, y3, sizeof(float) * (size_t)(m * n)) &&
                       !memcmp(y, y4, sizeof(float) * (size_t)(m * n)),
                   "bf16 tile copy m %lld n %lld k %lld: outputs differ from packing per call",
                   (long long)m, (long long)n, (long long)k);
            float *row = malloc(sizeof(float) * (size_t)k), *want = malloc(sizeof(float) * (size_t)k);
            int64_t bad_rows = 0;
            for (int64_t j = 0; j < n; j++) {
                ps_bf16_dp_row_to_f32(&wt, j, row);
                ps_dequant_bf16(buf + offs[oi] + (size_t)j * rb, want, k);
                bad_rows += memcmp(row, want, sizeof(float) * (size_t)k) != 0;
            }
            CHECKF(bad_rows == 0, "bf16 tile copy n %lld k %lld: %lld rows read back differ",
                   (long long)n, (long long)k, (long long)bad_rows);
            /* copied in slices of one task's rows, last first (as the load does, in order):
             * the same bytes */
            const size_t tb = ps_bf16_dp_tiles_bytes(&w);
            uint8_t *sliced = ps_aligned_alloc(64, tb);
            memset(sliced, 0xA5, tb);
            for (int64_t r0 = (w.n_out - 1) / PS_BF16_DP_ROWS * PS_BF16_DP_ROWS; r0 >= 0;
                 r0 -= PS_BF16_DP_ROWS)
                ps_bf16_dp_pack_to(&w, r0, PS_MIN(w.n_out, r0 + PS_BF16_DP_ROWS), sliced);
            CHECKF(!memcmp(sliced, tiles, tb), "bf16 tile copy n %lld k %lld: copied in slices, "
                   "the bytes differ", (long long)n, (long long)k);
            ps_free(sliced);
            free(row);
            free(want);
            free(y3);
            free(y4);
            ps_free(tiles);
            ps_free(scratch);
            ps_free(buf);
            free(wd);
            free(x);
            free(xq);
            free(y);
            free(y2);
        }
}

int main(void) {
    ps_pool *pool2 = NULL;
    CHECK(ps_pool_create(2, &pool2) == PS_OK);
    test_matmul_shapes(pool2);
    test_quant_act();
    test_q8_extremes(pool2);
    test_quant_act_bf16();
    test_quant_act_f16();
    test_bf16_native(pool2);
    test_bf16_order(pool2);
    test_dot();
    test_attn_pv();
    test_attn_scores();
    test_attn_scores_tails();
    ps_pool_free(pool2);
    return ps_test_done("matmul");
}
