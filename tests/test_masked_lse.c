/*
 * test_masked_lse.c — the masked log-mass kernel (kernels/masked_lse.c): on every ISA the CPU
 * has, bitwise equal to the scalar reference, for row lengths around the 64-lane blocks and
 * the 4096-element chunks (1, 63, 64, 65, 4095, 4096, 4097, 5000, 151936), random masks, all
 * and none masked, -inf logits and a row with a huge spread; within 1e-5 (absolute, in log
 * space) of a float64 log-sum-exp; the full mask gives ~0 (the whole mass), an empty mask
 * -inf, a non-finite lse NaN; and the value does not depend on where the row starts in memory.
 */
#include "check.h"
#include "base/impl.h"
#include "kernels/masked_lse.h"

#include <math.h>
#include <string.h>

static const ps_isa ISAS[] = {PS_ISA_SCALAR, PS_ISA_AVX2, PS_ISA_AVX512};

static uint64_t rng = 0x243F6A8885A308D3ull;
static double drand(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

static double lse64(const float *x, const uint8_t *m, int64_t n) {
    double mx = -INFINITY, s = 0.0;
    for (int64_t i = 0; i < n; i++)
        if (!m || m[i]) mx = fmax(mx, (double)x[i]);
    if (mx == -INFINITY) return -INFINITY;
    for (int64_t i = 0; i < n; i++)
        if (!m || m[i]) s += exp((double)x[i] - mx);
    return mx + log(s);
}

static void one(int64_t n, int kind, double spread) {
    float *buf = ps_malloc((size_t)(n + 1) * sizeof *buf);
    uint8_t *m = ps_malloc((size_t)n);
    for (int64_t i = 0; i < n; i++) {
        buf[i + 1] = (float)((drand() - 0.5) * spread);
        m[i] = kind == 0 ? (drand() < 0.4) : kind == 1 ? 1 : 0;
        if (i % 97 == 5) buf[i + 1] = -INFINITY;
    }
    float *x = buf + 1;
    const float lse = ps_lse_f32(x, n);
    const float ref = ps_masked_logmass_ref(x, m, n, lse);
    const double want = lse64(x, m, n) - lse64(x, NULL, n);
    if (kind == 2) CHECKF(ref == -INFINITY, "n %lld: empty mask gives %g", (long long)n, (double)ref);
    else CHECKF((double)ref == want || fabs((double)ref - want) <= 1e-5 ||
                (want < -80.0 && ref == -INFINITY), /* mass below exp(-87) is flushed */ "n %lld kind %d: %.9g vs float64 %.9g", (long long)n,
                kind, (double)ref, want);
    if (kind == 1) CHECKF(fabs((double)ref) <= 1e-5, "n %lld: the whole mass gives %g", (long long)n, (double)ref);
    for (size_t k = 0; k < sizeof ISAS / sizeof *ISAS; k++) {
        if (!ps_isa_supported(ISAS[k])) continue;
        float got = ps_masked_logmass(ISAS[k], x, m, n, lse);
        CHECKF(memcmp(&got, &ref, sizeof got) == 0, "%s n %lld kind %d: %.9g vs reference %.9g",
               ps_isa_name(ISAS[k]), (long long)n, kind, (double)got, (double)ref);
        /* the same row elsewhere in memory (another alignment) */
        memmove(buf, x, (size_t)n * sizeof *x);
        float moved = ps_masked_logmass(ISAS[k], buf, m, n, lse);
        memmove(buf + 1, buf, (size_t)n * sizeof *x);
        CHECKF(memcmp(&moved, &ref, sizeof moved) == 0, "%s n %lld: moved row differs",
               ps_isa_name(ISAS[k]), (long long)n);
    }
    ps_free(buf);
    ps_free(m);
}

int main(void) {
    for (size_t k = 0; k < sizeof ISAS / sizeof *ISAS; k++)
        if (!ps_isa_supported(ISAS[k])) PS_TEST_CPU_LACKS("%s", ps_isa_name(ISAS[k]));
    const int64_t ns[] = {1, 63, 64, 65, 4095, 4096, 4097, 5000, 151936};
    for (size_t i = 0; i < sizeof ns / sizeof *ns; i++)
        for (int kind = 0; kind < 3; kind++) {
            one(ns[i], kind, 20.0);
            one(ns[i], kind, 160.0); /* most terms below exp(-87): flushed to 0 */
        }
    float x[3] = {0.0f, 1.0f, 2.0f};
    uint8_t m[3] = {1, 1, 1};
    CHECK(isnan(ps_masked_logmass_ref(x, m, 3, INFINITY)));
    CHECK(isnan(ps_masked_logmass(PS_ISA_AUTO, x, m, 3, NAN)));
    return ps_test_done("masked_lse");
}
