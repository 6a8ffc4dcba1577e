/*
 * bench_deltanet.c — the Gated DeltaNet delta rule (ps_dn_delta_head) on one chunk at
 * Qwen3.6-35B-A3B's widths: 32 value heads with a 128 x 128 state each, 256 tokens, one thread.
 *
 * For each ISA the CPU has it first checks the fast kernel against the double-precision
 * reference (ps_dn_delta_head_ref, max difference <= 1e-4 over the outputs and the state after
 * 256 tokens of decay ~0.95), then prints the median time over --runs of: the fast kernel (one
 * fused pass per state row for decay + S_j.k, one for the update + S_j.q), and, as the
 * baseline measured in the same run, the same recurrence in four passes per row (decay loop,
 * ps_dot_f32, ps_axpy_f32, ps_dot_f32 of the same ISA: the form before the fused pass), with
 * the ratio. --check: the correctness checks only, no timing.
 * Usage: bench_deltanet [--runs N] [--check]
 */
#include "run/deltanet.h"
#include "kernels/matmul.h"

#include "../tests/check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define D 128
#define HEADS 32
#define TOKENS 256

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static uint64_t rs = 0x243f6a8885a308d3ull;
static float frand(void) {
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return (float)((double)(rs >> 11) * 0x1.0p-53 * 2.0 - 1.0);
}

/* The four-pass form (the baseline): per token and row, decay, S_j.k, update, S_j.q. */
static void delta_unfused(ps_isa isa, float *S, const float *q, const float *k, const float *v,
                          float *o, const float *g, const float *b, float scale) {
    for (int t = 0; t < TOKENS; t++) {
        const float *qt = q + t * D, *kt = k + t * D, *vt = v + t * D;
        float *ot = o + t * D;
        const float decay = expf(g[t]);
        for (int j = 0; j < D; j++) {
            float *row = S + j * D;
            for (int i = 0; i < D; i++) row[i] *= decay;
            const float delta = (vt[j] - ps_dot_f32(isa, row, kt, D)) * b[t];
            ps_axpy_f32(isa, delta, kt, row, D);
            ot[j] = ps_dot_f32(isa, row, qt, D) * scale;
        }
    }
}

int main(int argc, char **argv) {
    int runs = 5;
    bool check = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--check")) check = true;
        else if (!strcmp(argv[i], "--runs") && i + 1 < argc) runs = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_deltanet [--runs N] [--check]\n");
            return 2;
        }
    }
    if (runs < 1) runs = 1;
    const size_t nt = (size_t)TOKENS * D;
    float *q = malloc(nt * 4), *k = malloc(nt * 4), *v = malloc(nt * 4), *o = malloc(nt * 4),
          *oref = malloc(nt * 4), g[TOKENS], b[TOKENS];
    float *S0 = malloc((size_t)HEADS * D * D * 4), *S = malloc((size_t)HEADS * D * D * 4),
          *Sref = malloc((size_t)D * D * 4);
    for (size_t i = 0; i < nt; i++) q[i] = frand(), k[i] = frand(), v[i] = frand();
    for (int t = 0; t < TOKENS; t++) {
        /* unit q, k as the model's l2 norm gives them; decay exp(g) ~ 0.95 */
        double nq = 0, nk = 0;
        for (int i = 0; i < D; i++) nq += q[t * D + i] * q[t * D + i], nk += k[t * D + i] * k[t * D + i];
        for (int i = 0; i < D; i++) q[t * D + i] /= (float)sqrt(nq), k[t * D + i] /= (float)sqrt(nk);
        g[t] = -0.05f + 0.01f * frand();
        b[t] = 0.5f + 0.3f * frand();
    }
    for (size_t i = 0; i < (size_t)HEADS * D * D; i++) S0[i] = 0.01f * frand();
    const float scale = 1.0f / sqrtf((float)D);
    static const ps_isa isas[] = {PS_ISA_SCALAR, PS_ISA_AVX2, PS_ISA_AVX512};
    if (!check) printf("%-7s %12s %14s %8s\n", "isa", "fused ms", "4-pass ms", "ratio");
    for (size_t ii = 0; ii < PS_ARRAY_LEN(isas); ii++) {
        const ps_isa isa = isas[ii];
        if (!ps_isa_supported(isa)) continue;
        /* head 0 against the double reference */
        memcpy(S, S0, (size_t)D * D * 4);
        memcpy(Sref, S0, (size_t)D * D * 4);
        ps_dn_delta_head(isa, S, D, TOKENS, q, k, D, v, D, o, D, g, b, 1, scale);
        ps_dn_delta_head_ref(Sref, D, TOKENS, q, k, D, v, D, oref, D, g, b, 1, scale);
        double md = 0;
        for (size_t i = 0; i < nt; i++) md = fmax(md, fabs((double)o[i] - oref[i]));
        for (size_t i = 0; i < (size_t)D * D; i++) md = fmax(md, fabs((double)S[i] - Sref[i]));
        CHECKF(md <= 1e-4, "%s: fast delta rule vs reference: max diff %g", ps_isa_name(isa), md);
        if (check) continue;
        double tf[64], tu[64];
        if (runs > 64) runs = 64;
        for (int r = 0; r < runs; r++) { /* interleaved, so both see the same machine */
            memcpy(S, S0, (size_t)HEADS * D * D * 4);
            double t0 = now_ms();
            for (int h = 0; h < HEADS; h++)
                ps_dn_delta_head(isa, S + (size_t)h * D * D, D, TOKENS, q, k, D, v, D, o, D, g,
                                 b, 1, scale);
            tf[r] = now_ms() - t0;
            memcpy(S, S0, (size_t)HEADS * D * D * 4);
            t0 = now_ms();
            for (int h = 0; h < HEADS; h++)
                delta_unfused(isa, S + (size_t)h * D * D, q, k, v, o, g, b, scale);
            tu[r] = now_ms() - t0;
        }
        qsort(tf, (size_t)runs, sizeof *tf, cmp_d);
        qsort(tu, (size_t)runs, sizeof *tu, cmp_d);
        const double mf = tf[runs / 2], mu = tu[runs / 2];
        printf("%-7s %12.2f %14.2f %7.2fx\n", ps_isa_name(isa), mf, mu, mu / mf);
    }
    free(q);
    free(k);
    free(v);
    free(o);
    free(oref);
    free(S0);
    free(S);
    free(Sref);
    return ps_test_done("bench_deltanet");
}
