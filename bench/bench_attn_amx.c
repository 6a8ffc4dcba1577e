/*
 * bench_attn_amx.c — would attention's two products pay on AMX bf16 tiles over a bf16 K/V
 * cache? One attention task's shapes (32 queries of one head, head size 128, 1,024 and 4,096
 * keys), one thread: the AVX-512 kernels promptscore runs over a bf16 cache (ps_attn_scores:
 * float32 queries against widened keys; ps_attn_pv: float32 probabilities times widened values)
 * against the same products through the BF16 tile kernel of the matrix products
 * (ps_amx_bf16_task: tdpbf16ps, the k loop in a fixed order), with the operands the tiles need:
 * queries and probabilities rounded to bf16, K and V^T in the tile layout (made once, not
 * timed: a cache would have to store them so), and with K packed per call (timed).
 * Prints the median time of --runs of each, the ratio to AVX-512 in the same run, and how far
 * the tile results are from the AVX-512 ones (max |difference| of the scores; of the outputs,
 * relative to the largest output): the cost of rounding q and p to bf16.
 * Usage: bench_attn_amx [--runs N]    (an AMX CPU; else it says so and exits 0)
 *        bench_attn_amx --check       (no timing: 64 and 1,024 keys, each product within 1e-3
 *                                      of a float64 sum over the same (rounded) operands)
 *        bench_attn_amx --semantics   (how tdpbf16ps sums, on any CPU: see semantics())
 */
#include "../tests/check.h"
#include "run/attention.h"
#include "base/impl.h"
#include "kernels/matmul.h"
#include "kernels/matmul_amx.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}
static uint64_t rs = 0x9e3779b97f4a7c15ull;
static float frand(void) {
    rs = rs * 6364136223846793005ull + 1442695040888963407ull;
    return ((float)(rs >> 40) / 16777216.0f) * 2.0f - 1.0f;
}

#define NQ 32
#define HD 128

/* ---- --semantics: could a tile kernel give bf16-dot's bits? ----
 * bf16-dot (attention_dot.c) is one float32 chain per output over the pairs, in order:
 * acc = (acc + a1 b1) + a0 b0, one vdpbf16ps lane. Intel's SDM defines TDPBF16PS otherwise:
 * per output, the even products of the instruction's (up to 16) pairs go into one float32 sum
 * from +0 and the odd products into another, each step an FMA (RNE, DAZ, FTZ); then the two
 * are added and their sum added to the accumulator. semantics() computes both definitions on
 * the same operands (16 rows x 16 outputs per tile, n_in 32 = one instruction, and 128 = four,
 * a head of 128 in a score) and counts the outputs whose bits differ; on an AMX CPU it also
 * runs the instruction (through ps_amx_bf16_task, the matrix product's tile kernel, which
 * feeds it exactly these pairs in k order) and counts its differences from each definition.
 * Three operand sets: "unit" |x| < 1, "wide" x 2^-10 .. 2^10, "tiny" x 2^-64 (sums near
 * FLT_MIN, where DAZ / FTZ and the order of the flushes show). */

static float sm_in(uint16_t h) { /* DAZ: a bf16 subnormal reads as zero of its sign */
    return (h & 0x7f80u) ? ps_bf16_to_f32(h) : ((h & 0x8000u) ? -0.0f : 0.0f);
}
static float sm_out(float x) { return fabsf(x) < FLT_MIN ? copysignf(0.0f, x) : x; } /* FTZ */

/* The SDM's TDPBF16PS for one output: acc + ((E) + (O)) per 32-input chunk, in chunk order. */
static float sm_tile(const uint16_t *x, const uint16_t *w, int n_in) {
    float acc = 0.0f;
    for (int c = 0; c < n_in; c += 32) {
        float e = 0.0f, o = 0.0f;
        for (int k = c; k < c + 32; k += 2) {
            e = sm_out(fmaf(sm_in(x[k]), sm_in(w[k]), e));
            o = sm_out(fmaf(sm_in(x[k + 1]), sm_in(w[k + 1]), o));
        }
        acc = sm_out(acc + sm_out(e + o));
    }
    return acc;
}

static float sm_dot(const uint16_t *x, const uint16_t *w, int n_in) { /* bf16-dot's chain */
    float acc = 0.0f;
    for (int k = 0; k < n_in; k += 2) acc = ps_dot_bf16_step(acc, x[k], x[k + 1], w[k], w[k + 1]);
    return acc;
}

static uint16_t sm_val(int set) {
    float v = frand();
    if (set == 1) v = ldexpf(v, (int)((rs >> 20) % 21) - 10);
    if (set == 2) v = ldexpf(v, -64);
    uint16_t h;
    ps_kv_round(PS_ISA_SCALAR, PS_KV_BF16, &v, &h, 1);
    return h;
}

static int semantics(void) {
    enum { TILES = 64, NMAX = 128 };
    static const char *SETS[3] = {"unit", "wide", "tiny"};
    const bool amx = ps_cpu_has_amx() && ps_isa_supported(PS_ISA_AVX512);
    printf("tdpbf16ps as Intel's SDM defines it (per output: even and odd products in two "
           "float32 sums, then added) against bf16-dot's one chain (vdpbf16ps), %d tiles of "
           "16 x 16 outputs per row; AMX: %s\n",
           TILES, amx ? "run" : ps_amx_status());
    printf("%-5s %5s %22s %22s %22s\n", "set", "n_in", "SDM model != bf16-dot",
           "tdpbf16ps != model", "tdpbf16ps != bf16-dot");
    uint16_t *x = ps_aligned_alloc(64, 2 * 16 * NMAX), *w = ps_aligned_alloc(64, 2 * 16 * NMAX);
    float *y = ps_aligned_alloc(64, sizeof(float) * 16 * 16);
    void *scr = ps_aligned_alloc(64, ps_amx_bf16_scratch_bytes(NMAX));
    for (int set = 0; set < 3; set++)
        for (int n_in = 32; n_in <= NMAX; n_in += NMAX - 32) {
            long n = 0, d_def = 0, d_model = 0, d_hw_def = 0;
            for (int t = 0; t < TILES; t++) {
                for (int i = 0; i < 16 * n_in; i++) x[i] = sm_val(set), w[i] = sm_val(set);
                ps_mat wm = {w, PS_GGML_BF16, n_in, 16, 2 * (size_t)n_in, NULL, NULL, NULL};
                if (amx) ps_amx_bf16_task(&wm, 0, 16, x, n_in, 16, y, 16, scr, false);
                for (int r = 0; r < 16; r++)
                    for (int j = 0; j < 16; j++) {
                        const float m = sm_tile(x + r * n_in, w + j * n_in, n_in);
                        const float d = sm_dot(x + r * n_in, w + j * n_in, n_in);
                        n++;
                        d_def += memcmp(&m, &d, 4) != 0;
                        if (amx) {
                            d_model += memcmp(&y[r * 16 + j], &m, 4) != 0;
                            d_hw_def += memcmp(&y[r * 16 + j], &d, 4) != 0;
                        }
                    }
            }
            char a[32], b[32] = "-", c[32] = "-";
            snprintf(a, sizeof a, "%ld / %ld", d_def, n);
            if (amx) {
                snprintf(b, sizeof b, "%ld / %ld", d_model, n);
                snprintf(c, sizeof c, "%ld / %ld", d_hw_def, n);
            }
            printf("%-5s %5d %22s %22s %22s\n", SETS[set], n_in, a, b, c);
        }
    ps_free(x), ps_free(w), ps_free(y), ps_free(scr);
    return 0;
}

int main(int argc, char **argv) {
    int runs = 9, check = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--runs") && i + 1 < argc) runs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--check")) check = 1;
        else if (!strcmp(argv[i], "--semantics")) return semantics();
    }
    if (runs < 1 || runs > 101) runs = 9;
    if (check) { /* the --semantics model: even products summed apart from the odd ones */
        uint16_t x[32] = {0}, w[32] = {0};
        x[0] = w[0] = x[2] = w[2] = 0x3980; /* 2^-12: the even products are 2^-24 each */
        x[1] = w[1] = 0x3f80;               /* 1: the odd product of pair 0 */
        const float m = sm_tile(x, w, 32), d = sm_dot(x, w, 32);
        CHECKF(m == 1.0f + 0x1p-23f && d == 1.0f,
               "SDM model %a (want 1 + 2^-23: 2^-24 + 2^-24, then + 1), chain %a (want 1: each "
               "2^-24 added to 1 rounds away)", m, d);
    }
    if (!ps_cpu_has_amx() || !ps_isa_supported(PS_ISA_AVX512)) {
        if (check) {
            PS_TEST_CPU_LACKS("AMX (%s): attention products on bf16 tiles", ps_amx_status());
            return ps_test_done("bench_attn_amx");
        }
        printf("AMX not available on this CPU (%s): nothing to measure\n", ps_amx_status());
        return 0;
    }
    if (check) runs = 1;
    static const int NKS_RUN[] = {1024, 4096}, NKS_CHECK[] = {64, 1024};
    const int *NKS = check ? NKS_CHECK : NKS_RUN;
    if (!check) printf("one attention task: %d queries, head size %d, one thread, CPU time, median of %d\n",
           NQ, HD, runs);
    if (!check) printf("%-6s %-22s %10s %8s %12s\n", "keys", "product", "us", "x avx512", "max |diff|");
    for (size_t t = 0; t < 2; t++) {
        const int nk = NKS[t];
        float *q = ps_aligned_alloc(64, sizeof(float) * NQ * HD);
        uint16_t *qb = ps_aligned_alloc(64, 2 * NQ * HD);
        uint16_t *kt = ps_aligned_alloc(64, 2 * (size_t)nk * HD);  /* cache layout, bf16 */
        uint16_t *krow = ps_aligned_alloc(64, 2 * (size_t)nk * HD); /* keys x hd, bf16 */
        uint16_t *vrow = ps_aligned_alloc(64, 2 * (size_t)nk * HD); /* cache layout: keys x hd */
        uint16_t *vt = ps_aligned_alloc(64, 2 * (size_t)nk * HD);  /* hd x keys */
        float *p = ps_aligned_alloc(64, sizeof(float) * NQ * (size_t)nk);
        uint16_t *pb = ps_aligned_alloc(64, 2 * NQ * (size_t)nk);
        float *s1 = ps_aligned_alloc(64, sizeof(float) * NQ * (size_t)nk),
              *s2 = ps_aligned_alloc(64, sizeof(float) * NQ * (size_t)nk);
        float *o1 = ps_aligned_alloc(64, sizeof(float) * NQ * HD),
              *o2 = ps_aligned_alloc(64, sizeof(float) * NQ * HD);
        for (int i = 0; i < NQ * HD; i++) q[i] = frand();
        ps_kv_round(PS_ISA_AVX512, PS_KV_BF16, q, qb, NQ * HD);
        float kf[HD], vf[HD];
        for (int j = 0; j < nk; j++) {
            for (int d = 0; d < HD; d++) kf[d] = frand(), vf[d] = frand();
            ps_attn_k_store(PS_ISA_AVX512, kt, PS_KV_BF16, HD, j, kf);
            ps_kv_round(PS_ISA_AVX512, PS_KV_BF16, kf, krow + (size_t)j * HD, HD);
            ps_kv_round(PS_ISA_AVX512, PS_KV_BF16, vf, vrow + (size_t)j * HD, HD);
            for (int d = 0; d < HD; d++) vt[(size_t)d * nk + j] = vrow[(size_t)j * HD + d];
        }
        for (int r = 0; r < NQ; r++) { /* a softmax-like row: positive, summing to ~1 */
            double sum = 0;
            for (int j = 0; j < nk; j++) sum += p[(size_t)r * nk + j] = expf(3.0f * frand());
            for (int j = 0; j < nk; j++) p[(size_t)r * nk + j] = (float)(p[(size_t)r * nk + j] / sum);
        }
        ps_kv_round(PS_ISA_AVX512, PS_KV_BF16, p, pb, (int64_t)NQ * nk);
        ps_mat km = {krow, PS_GGML_BF16, HD, nk, 2 * HD, NULL, NULL, NULL};
        ps_mat kp = km;
        size_t kb = 0;
        void *ktiles = ps_amx_bf16_pack(&km, &kb);
        kp.tiles = ktiles;
        ps_mat vm = {vt, PS_GGML_BF16, nk, HD, 2 * (size_t)nk, NULL, NULL, NULL};
        size_t vb = 0;
        void *vtiles = ps_amx_bf16_pack(&vm, &vb);
        vm.tiles = vtiles;
        void *scr = ps_aligned_alloc(64, ps_amx_bf16_scratch_bytes(PS_MAX(HD, nk)));
        int32_t nkeys[NQ];
        for (int r = 0; r < NQ; r++) nkeys[r] = nk;
        double ts[5][101];
        for (int run = 0; run < runs; run++) {
            double t0 = now_s();
            ps_attn_scores(PS_ISA_AVX512, q, HD, NQ, kt, PS_KV_BF16, nk, HD, s1, nk);
            double t1 = now_s();
            for (int j0 = 0; j0 < nk; j0 += PS_AMX_BF16_TW)
                ps_amx_bf16_task(&kp, j0, PS_AMX_BF16_TW, qb, HD, NQ, s2 + j0, nk, scr, false);
            double t2 = now_s();
            for (int j0 = 0; j0 < nk; j0 += PS_AMX_BF16_TW)
                ps_amx_bf16_task(&km, j0, PS_AMX_BF16_TW, qb, HD, NQ, s2 + j0, nk, scr, false);
            double t3 = now_s();
            ps_attn_pv(PS_ISA_AVX512, p, nk, nkeys, NQ, vrow, PS_KV_BF16, HD, o1, HD);
            double t4 = now_s();
            for (int j0 = 0; j0 < HD; j0 += PS_AMX_BF16_TW)
                ps_amx_bf16_task(&vm, j0, PS_AMX_BF16_TW, pb, nk, NQ, o2 + j0, HD, scr, false);
            double t5 = now_s();
            ts[0][run] = t1 - t0, ts[1][run] = t2 - t1, ts[2][run] = t3 - t2;
            ts[3][run] = t4 - t3, ts[4][run] = t5 - t4;
        }
        if (check) { /* each product against float64 over its own operands */
            int bad[4] = {0};
            for (int r = 0; r < NQ; r++)
                for (int j = 0; j < nk; j++) {
                    double a = 0, b = 0;
                    for (int d = 0; d < HD; d++) {
                        const double kd = ps_bf16_to_f32(krow[(size_t)j * HD + d]);
                        a += (double)q[r * HD + d] * kd;
                        b += (double)ps_bf16_to_f32(qb[r * HD + d]) * kd;
                    }
                    bad[0] += fabs(s1[(size_t)r * nk + j] - a) > 1e-3;
                    bad[1] += fabs(s2[(size_t)r * nk + j] - b) > 1e-3;
                }
            for (int r = 0; r < NQ; r++)
                for (int d = 0; d < HD; d++) {
                    double a = 0, b = 0;
                    for (int j = 0; j < nk; j++) {
                        const double vd = ps_bf16_to_f32(vrow[(size_t)j * HD + d]);
                        a += (double)p[(size_t)r * nk + j] * vd;
                        b += (double)ps_bf16_to_f32(pb[(size_t)r * nk + j]) * vd;
                    }
                    bad[2] += fabs(o1[r * HD + d] - a) > 1e-3 * (1 + fabs(a));
                    bad[3] += fabs(o2[r * HD + d] - b) > 1e-3 * (1 + fabs(b));
                }
            CHECKF(!bad[0] && !bad[1] && !bad[2] && !bad[3],
                   "%d keys: %d / %d scores, %d / %d outputs off the float64 sums", nk, bad[0],
                   bad[1], bad[2], bad[3]);
        }
        double med[5];
        for (int i = 0; i < 5; i++) {
            qsort(ts[i], (size_t)runs, sizeof(double), cmp_d);
            med[i] = ts[i][runs / 2];
        }
        double ds = 0, dpv = 0, omax = 0;
        for (size_t i = 0; i < (size_t)NQ * nk; i++) ds = fmax(ds, fabs((double)s1[i] - s2[i]));
        for (int i = 0; i < NQ * HD; i++)
            dpv = fmax(dpv, fabs((double)o1[i] - o2[i])), omax = fmax(omax, fabs(o1[i]));
        if (!check) printf("%-6d %-22s %10.1f %8.2f %12s\n", nk, "Q.K^T avx512 (bf16 K)", med[0] * 1e6, 1.0, "");
        if (!check) printf("%-6d %-22s %10.1f %8.2f %12.3g\n", nk, "Q.K^T amx, K in tiles", med[1] * 1e6,
               med[0] / med[1], ds);
        if (!check) printf("%-6d %-22s %10.1f %8.2f %12.3g\n", nk, "Q.K^T amx, K packed", med[2] * 1e6,
               med[0] / med[2], ds);
        if (!check) printf("%-6d %-22s %10.1f %8.2f %12s\n", nk, "P.V avx512 (bf16 V)", med[3] * 1e6, 1.0, "");
        if (!check) printf("%-6d %-22s %10.1f %8.2f %12.3g\n", nk, "P.V amx, V^T in tiles", med[4] * 1e6,
               med[3] / med[4], dpv / omax);
        ps_free(q), ps_free(qb), ps_free(kt), ps_free(krow), ps_free(vrow), ps_free(vt);
        ps_free(p), ps_free(pb), ps_free(s1), ps_free(s2), ps_free(o1), ps_free(o2);
        ps_free(ktiles), ps_free(vtiles), ps_free(scr);
    }
    return check ? ps_test_done("bench_attn_amx") : 0;
}
