/*
 * test_vecmath.c — vecmath.c's SIMD exp, softmax and silu(g) * u against float64 references on
 * every ISA the CPU has: exp within 3 ulp on [-87, 88] (and exp(0) = 1, exp(-inf) = 0,
 * exp(NaN) NaN, exp(-200) = 0 on AVX-512, exp(+200) = inf / huge), softmax rows of every
 * length 1..70 within 1e-6 relative per element of the exact one and summing to 1 within 1e-6,
 * silu_mul within 1e-6 relative; rmsnorm within 4 ulp of float64 and 2 ulp of the scalar
 * reference for lengths 1..70 and model widths, in place == out of place; results independent of where a row starts (alignment) and of
 * n beyond an element (a prefix of a longer array gives the same values).
 */
#include "check.h"
#include "base/impl.h"
#include "kernels/vecmath.h"

#include <math.h>
#include <string.h>

static const ps_isa ISAS[] = {PS_ISA_SCALAR, PS_ISA_AVX2, PS_ISA_AVX512};

static uint64_t rng = 0x13198A2E03707344ull;
static double drand(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

static double ulps(float got, double want) {
    int e;
    frexp(want, &e);
    return fabs((double)got - want) / ldexp(1.0, e - 24);
}

static void test_exp(ps_isa isa) {
    enum { N = 4000 };
    static float x[N + 3], y[N + 3], y2[N + 3];
    for (int i = 0; i < N; i++) x[i] = (float)(-87.0 + 175.0 * drand());
    x[0] = 0.0f;
    ps_exp_f32(isa, x, y, N);
    double worst = 0;
    for (int i = 0; i < N; i++) worst = fmax(worst, ulps(y[i], exp((double)x[i])));
    CHECKF(worst <= 3.0, "exp on %s: %.2f ulp", ps_isa_name(isa), worst);
    CHECK(y[0] == 1.0f);
    /* misaligned start and shorter n: same values */
    ps_exp_f32(isa, x + 1, y2, 37);
    CHECKF(!memcmp(y + 1, y2, 37 * sizeof(float)), "exp on %s depends on alignment",
           ps_isa_name(isa));
    float sp[5] = {-INFINITY, NAN, -200.0f, 200.0f, 88.5f}, so[5];
    ps_exp_f32(isa, sp, so, 5);
    CHECKF(so[0] == 0.0f && isnan(so[1]) && so[2] < 1e-37f && so[3] > 3e38f,
           "exp specials on %s: %g %g %g %g", ps_isa_name(isa), so[0], so[1], so[2], so[3]);
    CHECK(ulps(so[4], exp(88.5)) <= 3.0);
}

static void test_softmax(ps_isa isa) {
    float row[80], copy[80];
    double worst = 0, worst_sum = 0;
    for (int n = 1; n <= 70; n++) {
        for (int j = 0; j < n; j++) row[j] = copy[j] = (float)(drand() * 40.0 - 20.0);
        const float scale = 0.088388f;
        ps_softmax_f32(isa, row, n, scale);
        double mx = -INFINITY, sum = 0, got = 0;
        for (int j = 0; j < n; j++) mx = fmax(mx, (double)(copy[j] * scale));
        for (int j = 0; j < n; j++) sum += exp((double)(copy[j] * scale) - mx);
        for (int j = 0; j < n; j++) {
            double want = exp((double)(copy[j] * scale) - mx) / sum;
            worst = fmax(worst, fabs(row[j] - want) / want);
            got += row[j];
        }
        worst_sum = fmax(worst_sum, fabs(got - 1.0));
    }
    CHECKF(worst < 1e-6, "softmax on %s: worst rel error %g", ps_isa_name(isa), worst);
    CHECKF(worst_sum < 1e-6, "softmax on %s: sums off 1 by %g", ps_isa_name(isa), worst_sum);
}

/* With an attention sink: the float64 softmax over the row plus one value-less logit; the sink
 * above, inside and below the row's range; sink = -inf is bitwise the plain softmax. */
static void test_softmax_sink(ps_isa isa) {
    float row[80], copy[80], plain[80];
    double worst = 0;
    const float sinks[3] = {3.0f, -0.5f, -30.0f};
    for (int n = 1; n <= 70; n++) {
        for (int c = 0; c < 3; c++) {
            for (int j = 0; j < n; j++) row[j] = copy[j] = (float)(drand() * 8.0 - 4.0);
            const float scale = 0.125f, sink = sinks[c];
            ps_softmax_sink_f32(isa, row, n, scale, sink);
            double mx = sink, sum = 0;
            for (int j = 0; j < n; j++) mx = fmax(mx, (double)(copy[j] * scale));
            for (int j = 0; j < n; j++) sum += exp((double)(copy[j] * scale) - mx);
            sum += exp((double)sink - mx);
            for (int j = 0; j < n; j++) {
                double want = exp((double)(copy[j] * scale) - mx) / sum;
                worst = fmax(worst, fabs(row[j] - want) / want);
            }
        }
        for (int j = 0; j < n; j++) row[j] = plain[j] = copy[j];
        ps_softmax_sink_f32(isa, row, n, 0.125f, -INFINITY);
        ps_softmax_f32(isa, plain, n, 0.125f);
        CHECKF(!memcmp(row, plain, sizeof(float) * (size_t)n), "softmax sink -inf on %s, n %d",
               ps_isa_name(isa), n);
    }
    CHECKF(worst < 1e-6, "softmax with sink on %s: worst rel error %g", ps_isa_name(isa), worst);
}

static void test_silu(ps_isa isa) {
    enum { N = 1003 };
    static float g[N], u[N], g0[N];
    for (int i = 0; i < N; i++) {
        g[i] = g0[i] = (float)(drand() * 30.0 - 15.0);
        u[i] = (float)(drand() * 2.0 - 1.0);
    }
    g[7] = g0[7] = -120.0f; /* exp(-g) overflows: silu -> -0 */
    ps_silu_mul_f32(isa, g, u, N);
    double worst = 0;
    for (int i = 0; i < N; i++) {
        double x = g0[i], want = x / (1.0 + exp(-x)) * u[i];
        worst = fmax(worst, fabs(g[i] - want) / (fabs(want) + 1e-30));
    }
    CHECKF(worst < 1e-6 || fabs(g[7]) < 1e-30, "silu_mul on %s: worst rel error %g",
           ps_isa_name(isa), worst);
    CHECK(fabsf(g[7]) < 1e-30f);
}

/* RMSNorm: every length 1..70 and the model widths 128, 1000, 1024, 3072 against the float64
 * formula (within 4 ulp: one rounded scale, two products) and the scalar reference (the same
 * element steps; the scale may differ by at most 1 ulp from the double sum's order: each
 * element then within 2 ulp); in place == out of place; all-zero x gives 0. */
static void test_rmsnorm(ps_isa isa) {
    enum { N = 3072 };
    static float x[N], w[N], y[N], yr[N], yi[N];
    const int64_t lens[] = {128, 1000, 1024, 3072};
    const float eps = 1e-6f;
    int bad = 0, bad_ref = 0, bad_inplace = 0;
    for (int64_t t = 0; t < 70 + (int64_t)PS_ARRAY_LEN(lens); t++) {
        const int64_t d = t < 70 ? t + 1 : lens[t - 70];
        for (int64_t i = 0; i < d; i++) {
            x[i] = (float)((drand() * 2 - 1) * (i % 7 == 0 ? 30.0 : 1.0));
            w[i] = (float)(drand() * 2);
        }
        ps_rmsnorm_f32(isa, y, x, w, d, eps);
        ps_rmsnorm_f32(PS_ISA_SCALAR, yr, x, w, d, eps);
        memcpy(yi, x, sizeof(float) * (size_t)d);
        ps_rmsnorm_f32(isa, yi, yi, w, d, eps);
        double ss = 0;
        for (int64_t i = 0; i < d; i++) ss += (double)x[i] * x[i];
        const double scale = 1.0 / sqrt(ss / (double)d + eps);
        for (int64_t i = 0; i < d; i++) {
            if (ulps(y[i], (double)x[i] * scale * w[i]) > 4) bad++;
            if (ulps(y[i], (double)yr[i]) > 2) bad_ref++;
        }
        bad_inplace += memcmp(y, yi, sizeof(float) * (size_t)d) != 0;
    }
    CHECKF(bad == 0, "rmsnorm on %s: %d elements beyond 4 ulp of float64", ps_isa_name(isa), bad);
    CHECKF(bad_ref == 0, "rmsnorm on %s: %d elements beyond 2 ulp of the scalar reference",
           ps_isa_name(isa), bad_ref);
    CHECKF(bad_inplace == 0, "rmsnorm on %s: in place differs (%d lengths)", ps_isa_name(isa),
           bad_inplace);
    memset(x, 0, sizeof(float) * 100);
    ps_rmsnorm_f32(isa, y, x, w, 100, eps);
    bool zero = true;
    for (int i = 0; i < 100; i++) zero &= y[i] == 0.0f;
    CHECKF(zero, "rmsnorm on %s of zeros is not zero", ps_isa_name(isa));
}

int main(void) {
    for (size_t i = 0; i < PS_ARRAY_LEN(ISAS); i++) {
        if (!ps_isa_supported(ISAS[i])) {
            PS_TEST_CPU_LACKS("%s", ps_isa_name(ISAS[i]));
            continue;
        }
        test_exp(ISAS[i]);
        test_softmax(ISAS[i]);
        test_softmax_sink(ISAS[i]);
        test_silu(ISAS[i]);
        test_rmsnorm(ISAS[i]);
    }
    return ps_test_done("vecmath");
}
