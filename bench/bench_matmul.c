/*
 * bench_matmul.c — GFLOP/s of ps_matmul per weight type (every row of types.c: F32, F16, BF16,
 * Q8_0, the legacy 4/5-bit types, the k-quants, IQ4_NL / IQ4_XS, MXFP4) on the matrix
 * shapes of a Qwen3-0.6B-shaped model, m = 256 activation rows:
 *     (n, k) = (2048,1024) q, (1024,1024) k/v, (1024,2048) o, (3072,1024) gate/up,
 *              (1024,3072) down, (151936,1024) output
 * next to OpenBLAS cblas_sgemm on f32 weights of the same shape, in the same run (built with
 * PS_HAVE_OPENBLAS, which the Makefile sets when `pkg-config openblas` finds it; without it the
 * rows have no sgemm baseline and the run says so). With the
 * default (native) activations Q8_0 runs the int8 kernel (activations quantised to Q8_0 blocks
 * per call; AVX-512 VNNI vpdpbusd when the CPU has it, else AVX2 maddubs), the other block types
 * their integer kernels (matmul_quant.c: Q8_K / Q8_1 / Q8_0 activations as llama.cpp; their rows
 * also print their speed over the Q8_0 kernel's on the same shape, measured as the median over
 * alternating pairs, one run of each in turn, so a noisy moment cannot tilt it) and BF16 the bf16
 * kernel (activations rounded to bf16 per call; AVX-512 BF16 vdpbf16ps when the CPU has it,
 * else float32 FMA on the rounded values); each is validated against ps_matmul_ref's form with
 * the same activation rounding (sums in double). --act f32 runs every type on float32
 * activations (weights widened exactly), validated against the plain reference.
 *
 * Every kernel is first validated against ps_matmul_ref on the first 48 weight rows (max
 * relative error printed, exit 1 above 1e-5), then timed: the median of several runs (at least
 * 5, or as many as fit in ~0.5 s). FLOPs = 2 m n k. With one thread (the default) times are the
 * process's CPU time, so a busy shared machine disturbs the figures less; with -t N, wall time.
 * With BF16 on AVX-512 BF16 (native activations), the machine's vdpbf16ps peak
 * (ps_bf16_peak_gflops: 24 independent chains on registers, 64 flops per instruction, on the
 * same threads and clock) is measured before the shapes and again after them, and each BF16
 * row prints its share of the first: a shared VM's clock moves, so a share is only meaningful
 * against a peak measured in the same run.
 * Usage: bench_matmul [--json] [-t THREADS] [--types all|q8_0,q4_k,...] [--act native|f32]
 *                     [--no-output] | --check
 * Weights are random, quantised by the type's fixture quantiser (types.c).
 * --check (what `make test` runs): no timing; on small shapes (m 1 / 7 / 33 / 64 / 300 rows,
 * odd n, k 64..1024, each type on the shapes its block divides) every weight type x activations x ISA the CPU has is validated against
 * ps_matmul_ref (max rel error <= 1e-5, printed) and 2 threads against 1 (bitwise); prints the
 * test closing line "bench_matmul: N passed, N failed, N skipped".
 * --json prints one object per line:
 *   {"type": "bf16", "path": "avx512", "m": 256, "n": 2048, "k": 1024, "gflops": ...,
 *    "sgemm_gflops": ..., "q8_0_gflops": ... (0 before the q8_0 row), "q8_0_ratio": ...
 *    (this row's speed over Q8_0's, the median of alternating pairs; 0 for q8_0 and the rows
 *    before it), "threads": 1,
 *    "isa": "avx512", "act": "native", "max_rel_err": ...}
 */
#include "base/impl.h"
#include "kernels/matmul.h"
#include "kernels/matmul_amx.h"
#include "kernels/matmul_quant.h"
#include "kernels/quant.h"
#include "kernels/types.h"

#include "../tests/check.h" /* --check: CHECKF, PS_TEST_CPU_LACKS and the closing line */

#ifdef PS_HAVE_OPENBLAS
#include <cblas.h>
#endif
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef PS_HAVE_OPENBLAS
extern void openblas_set_num_threads(int);
#endif

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static float frand(void) { /* uniform in [-1, 1) */
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((double)(rng >> 11) * (1.0 / 9007199254740992.0) * 2.0 - 1.0);
}

/* n rows of k weights of `type`, random; *row_bytes set. */
static void *make_weights(uint32_t type, int64_t n, int64_t k, size_t *row_bytes) {
    size_t rb = ps_quant_row_bytes(type, k);
    uint8_t *w = malloc(rb * (size_t)n);
    float *tmp = malloc(sizeof(float) * (size_t)k);
    if (!w || !tmp) { fprintf(stderr, "out of memory\n"); exit(1); }
    for (int64_t j = 0; j < n; j++) {
        uint8_t *row = w + (size_t)j * rb;
        for (int64_t i = 0; i < k; i++) tmp[i] = frand() * 0.05f;
        ps_wtype_get(type)->from_f32(tmp, row, k); /* types.c's fixture quantiser */
    }
    free(tmp);
    *row_bytes = rb;
    return w;
}

typedef struct {
    const ps_matmul_env *env;
    const ps_mat *w;
    const float *x;
    float *y;
    int64_t m;
} mm_args;

/* The machine may be shared: with one thread the figure uses the process's CPU time (time it
 * was descheduled does not count), with more threads the wall time. */
static bool use_cpu_time = true;

static double clock_s(void) {
    struct timespec ts;
    clock_gettime(use_cpu_time ? CLOCK_PROCESS_CPUTIME_ID : CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double time_median(void (*fn)(void *), void *arg, double flops) {
    double t[64];
    int n = 0;
    double start = now_s();
    do {
        double a = clock_s();
        fn(arg);
        t[n++] = clock_s() - a;
    } while (n < 64 && (n < 5 || now_s() - start < 0.5));
    qsort(t, (size_t)n, sizeof t[0], cmp_d);
    return flops / t[n / 2] * 1e-9;
}

static void run_ps(void *p) {
    mm_args *a = p;
    ps_matmul(a->env, a->w, a->x, a->w->n_in, a->m, a->y, a->w->n_out);
}

/* The ratio of a's speed to b's, as the median over alternating pairs (a then b, each timed
 * once; at least 5 pairs, or as many as fit in ~0.5 s, at most 64): a slow moment of a shared
 * machine lands on one pair, not on the whole of one side, so the ratio is steadier than two
 * medians taken one after the other. */
static double ratio_paired(void (*fn)(void *), void *a, void *b) {
    double r[64];
    int n = 0;
    const double start = now_s();
    do {
        const double t0 = clock_s();
        fn(a);
        const double t1 = clock_s();
        fn(b);
        const double t2 = clock_s();
        r[n++] = (t2 - t1) / (t1 - t0);
    } while (n < 64 && (n < 5 || now_s() - start < 0.5));
    qsort(r, (size_t)n, sizeof r[0], cmp_d);
    return r[n / 2];
}

typedef struct {
    const float *x, *w;
    float *y;
    int64_t m, n, k;
} sgemm_args;

#ifdef PS_HAVE_OPENBLAS
static void run_sgemm(void *p) {
    sgemm_args *a = p;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)a->m, (int)a->n, (int)a->k, 1.0f,
                a->x, (int)a->k, a->w, (int)a->k, 0.0f, a->y, (int)a->n);
}
#endif

/* One result row: a text line or (--json) one object. path: the kernel ("avx512", "amx-bf16",
 * "amx-bf16-norepack", "amx-int8", "scalar"). */
/* The Q8_0 kernel's figure of the current shape (its non-AMX row), once it ran: the other
 * block types print their ratio to it. */
static double q8_gflops;
/* The row's speed over the Q8_0 kernel's, from alternating pairs (ratio_paired); 0 for q8_0
 * itself and the types before it. */
static double q8_ratio;
/* The vdpbf16ps peak (ps_bf16_peak_gflops), measured before the shapes; 0: not measured. The
 * BF16 rows print their share of it; the closing line measures it again. */
static double bf16_peak;

static void report(bool json, const char *type, const char *path, int64_t m, int64_t n,
                   int64_t k, double g, double sgemm, int threads, bool f32_act, double worst) {
    char vs[32] = "no sgemm"; /* built without OpenBLAS: no baseline */
    if (sgemm > 0) snprintf(vs, sizeof vs, "%.2fx sgemm", g / sgemm);
    if (json)
        printf("{\"type\": \"%s\", \"path\": \"%s\", \"m\": %lld, \"n\": %lld, \"k\": %lld, "
               "\"gflops\": %.1f, \"sgemm_gflops\": %.1f, \"q8_0_gflops\": %.1f, "
               "\"q8_0_ratio\": %.4f, \"threads\": %d, \"isa\": \"%s\", \"act\": \"%s\", "
               "\"max_rel_err\": %.3g}\n",
               type, path, (long long)m, (long long)n, (long long)k, g, sgemm, q8_gflops, q8_ratio,
               threads,
               ps_isa_name(ps_isa_best()), f32_act ? "f32" : "native", worst);
    else if (bf16_peak > 0 && !strcmp(type, "bf16") && !strcmp(path, "avx512"))
        printf("         %-6s %-17s %7.1f  (%s, %.0f%% of the vdpbf16ps peak, max rel "
               "err %.2g)\n", type, path, g, vs, 100 * g / bf16_peak, worst);
    else if (q8_ratio > 0)
        printf("         %-6s %-17s %7.1f  (%s, %.2fx q8_0 paired, max rel err %.2g)\n",
               type, path, g, vs, q8_ratio, worst);
    else
        printf("         %-6s %-17s %7.1f  (%s, max rel err %.2g)\n", type, path, g, vs,
               worst);
}

/* True when the comma-separated list holds name as a whole item ("bf16" does not hold "f16"). */
static bool list_has(const char *list, const char *name) {
    const size_t n = strlen(name);
    for (const char *p = list; *p;) {
        const char *end = strchr(p, ',');
        const size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == n && !strncmp(p, name, n)) return true;
        if (!end) break;
        p = end + 1;
    }
    return false;
}

/* --check: fast against reference on small shapes, 1 thread against 2; no timing. */
static int run_check(void) {
    static const ps_isa isas[] = {PS_ISA_SCALAR, PS_ISA_AVX2, PS_ISA_AVX512};
    /* every weight type of the table (types.c); a shape whose k is not a multiple of the
     * type's block is left out for that type */
    struct { const char *name; uint32_t type; int32_t blck; } types[64];
    size_t n_types = 0;
    for (int32_t i = 0; i < ps_wtype_count() && n_types < 64; i++, n_types++) {
        types[n_types].name = ps_wtype_at(i)->name;
        types[n_types].type = ps_wtype_at(i)->id;
        types[n_types].blck = ps_wtype_at(i)->blck;
    }
    static const struct { int64_t m, n, k; } shapes[] = {
        {1, 40, 64}, {7, 67, 96}, {33, 130, 256}, {64, 48, 1024}, {300, 21, 512},
    };
    ps_pool *pool2 = NULL;
    CHECK(ps_pool_create(2, &pool2) == PS_OK);
    if (!pool2) return ps_test_done("bench_matmul");
    if (!ps_cpu_has_avx512bf16())
        PS_TEST_CPU_LACKS("AVX-512 BF16 (vdpbf16ps): native bf16 checked on the fallback only");
    if (!ps_cpu_has_avx512vnni())
        PS_TEST_CPU_LACKS("AVX-512 VNNI (vpdpbusd): q8_0 checked on the AVX2/scalar int8 path only");
    double worst_all[64] = {0};
    for (size_t ii = 0; ii < sizeof isas / sizeof isas[0]; ii++) {
        if (!ps_isa_supported(isas[ii])) {
            PS_TEST_CPU_LACKS("isa %s: its matmul kernels", ps_isa_name(isas[ii]));
            continue;
        }
        for (size_t t = 0; t < n_types; t++) {
            for (int act = 0; act < 2; act++) {
                for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
                    const int64_t m = shapes[si].m, n = shapes[si].n, k = shapes[si].k;
                    if (k % types[t].blck) continue;
                    ps_mat w = {0};
                    void *wdata = make_weights(types[t].type, n, k, &w.row_bytes);
                    w.data = wdata;
                    w.type = types[t].type;
                    w.n_in = k;
                    w.n_out = n;
                    float *x = ps_aligned_alloc(64, sizeof(float) * (size_t)(m * k));
                    float *y1 = malloc(sizeof(float) * (size_t)(m * n));
                    float *y2 = malloc(sizeof(float) * (size_t)(m * n));
                    float *yr = malloc(sizeof(float) * (size_t)(m * n));
                    size_t stride = ps_matmul_scratch_floats(k);
                    float *scratch = ps_aligned_alloc(64, sizeof(float) * stride * 2);
                    if (!x || !y1 || !y2 || !yr || !scratch) {
                        fprintf(stderr, "out of memory\n");
                        return 1;
                    }
                    for (int64_t i = 0; i < m * k; i++) x[i] = frand();
                    ps_matmul_env e1 = {NULL, isas[ii], scratch, stride, act == 1, false};
                    ps_matmul_env e2 = {pool2, isas[ii], scratch, stride, act == 1, false};
                    ps_matmul(&e1, &w, x, k, m, y1, n);
                    ps_matmul(&e2, &w, x, k, m, y2, n);
                    CHECK(ps_matmul_ref(&w, act == 1, x, k, m, yr, n) == PS_OK);
                    double worst = 0;
                    for (int64_t i = 0; i < m * n; i++)
                        worst = fmax(worst, fabs((double)y1[i] - yr[i]) / (fabs((double)yr[i]) + 1.0));
                    worst_all[t] = fmax(worst_all[t], worst);
                    CHECKF(worst <= 1e-5, "%s %s act %s m %lld n %lld k %lld: max rel error %g "
                           "vs ps_matmul_ref", ps_isa_name(isas[ii]), types[t].name,
                           act ? "f32" : "native", (long long)m, (long long)n, (long long)k, worst);
                    CHECKF(!memcmp(y1, y2, sizeof(float) * (size_t)(m * n)),
                           "%s %s act %s m %lld n %lld k %lld: 2 threads differ from 1",
                           ps_isa_name(isas[ii]), types[t].name, act ? "f32" : "native",
                           (long long)m, (long long)n, (long long)k);
                    free(wdata);
                    ps_free(x);
                    ps_free(scratch);
                    free(y1);
                    free(y2);
                    free(yr);
                }
            }
        }
    }
    printf("NOTE: max rel error vs ps_matmul_ref:");
    for (size_t t = 0; t < n_types; t++)
        printf("%s %s %.2g", t ? "," : "", types[t].name, worst_all[t]);
    printf("\n");
    ps_pool_free(pool2);
    return ps_test_done("bench_matmul");
}

int main(int argc, char **argv) {
    if (argc == 2 && !strcmp(argv[1], "--check")) return run_check();
    bool json = false, with_output = true;
    int threads = 1;
    const char *types_arg = "all";
    bool f32_act = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) json = true;
        else if (!strcmp(argv[i], "--no-output")) with_output = false;
        else if (!strcmp(argv[i], "-t") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--types") && i + 1 < argc) types_arg = argv[++i];
        else if (!strcmp(argv[i], "--act") && i + 1 < argc &&
                 (!strcmp(argv[i + 1], "f32") || !strcmp(argv[i + 1], "native")))
            f32_act = !strcmp(argv[++i], "f32");
        else {
            fprintf(stderr, "usage: bench_matmul [--json] [-t N] [--types all|q8_0,q4_k,...] "
                            "[--act native|f32] [--no-output]\n");
            return 2;
        }
    }
    if (threads < 1) threads = 1;
    use_cpu_time = threads == 1;
#ifdef PS_HAVE_OPENBLAS
    openblas_set_num_threads(threads);
#else
    if (!json)
        printf("sgemm baseline: absent (built without OpenBLAS: apt-get install libopenblas-dev, "
               "or sh tools/setup.sh --test, then make)\n");
#endif
    ps_pool *pool = NULL;
    if (threads > 1 && ps_pool_create(threads, &pool) != PS_OK) return 1;
    const ps_isa isa = ps_isa_best();
    /* AMX rows where the CPU allows them, unless PS_ISA turns AMX off */
    const bool amx = isa == PS_ISA_AVX512 && ps_isa_env_amx() != 0 && ps_cpu_has_amx();

    static const struct { const char *name; int64_t n, k; } shapes[] = {
        {"q", 2048, 1024}, {"k/v", 1024, 1024}, {"o", 1024, 2048}, {"gate/up", 3072, 1024},
        {"down", 1024, 3072}, {"output", 151936, 1024},
    };
    /* every weight type of the table (types.c), in table order except that q8_0 runs before
     * the other block types, so their rows carry the ratio to it */
    struct { const char *name; uint32_t type; int32_t blck; } types[64];
    size_t n_types = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int32_t i = 0; i < ps_wtype_count() && n_types < 64; i++) {
            const ps_wtype *wt = ps_wtype_at(i);
            if ((pass == 0) != (wt->blck == 1 || wt->id == PS_GGML_Q8_0)) continue;
            types[n_types].name = wt->name;
            types[n_types].type = wt->id;
            types[n_types++].blck = wt->blck;
        }
    const int64_t m = 256;
    const size_t n_shapes = sizeof shapes / sizeof shapes[0] - (with_output ? 0 : 1);
    if (!json)
        printf("bench_matmul: m = %lld, %d thread(s), isa %s, activations %s (bf16: %s; q8_0: "
               "%s); GFLOP/s (median, %s time)\n", (long long)m, threads, ps_isa_name(isa),
               f32_act ? "f32" : "native",
               f32_act ? "widened to f32"
               : isa == PS_ISA_AVX512 && ps_cpu_has_avx512bf16() ? "avx512-bf16 vdpbf16ps"
                                                                 : "bf16-rounded, f32 fma",
               f32_act ? "widened to f32"
               : isa == PS_ISA_AVX512 && ps_cpu_has_avx512vnni() ? "avx512-vnni int8"
               : isa == PS_ISA_SCALAR ? "scalar int8" : "avx2 int8",
               use_cpu_time ? "CPU" : "wall");
    if (!json) printf("amx: %s\n", amx ? ps_amx_status() : ps_isa_env_amx() ? ps_amx_status()
                                                                            : "off (PS_ISA)");
    if (!f32_act && isa == PS_ISA_AVX512 && (!strcmp(types_arg, "all") || list_has(types_arg, "bf16")))
        bf16_peak = ps_bf16_peak_gflops(pool, 0.3, use_cpu_time);
    if (!json && bf16_peak > 0)
        printf("vdpbf16ps peak: %.1f GFLOP/s (%d thread(s), 24 independent chains on registers, "
               "64 flops per instruction)\n", bf16_peak, threads);
    int rc = 0;
    for (size_t s = 0; s < n_shapes; s++) {
        const int64_t n = shapes[s].n, k = shapes[s].k;
        const double flops = 2.0 * (double)m * (double)n * (double)k;
        float *x = ps_aligned_alloc(64, sizeof(float) * (size_t)(m * k));
        float *y = ps_aligned_alloc(64, sizeof(float) * (size_t)(m * n)); /* as the logits */
        float *yref = malloc(sizeof(float) * (size_t)(m * 48));
        size_t stride = ps_matmul_scratch_floats(k);
        float *scratch = ps_aligned_alloc(64, sizeof(float) * stride * (size_t)threads);
        if (!x || !y || !yref || !scratch) { fprintf(stderr, "out of memory\n"); return 1; }
        for (int64_t i = 0; i < m * k; i++) x[i] = frand();
        ps_matmul_env env = {pool, isa, scratch, stride, f32_act, false};
        /* OpenBLAS on f32 weights of this shape */
        double sgemm = 0;
#ifdef PS_HAVE_OPENBLAS
        size_t rb;
        float *wf = make_weights(PS_GGML_F32, n, k, &rb);
        sgemm_args sa = {x, wf, y, m, n, k};
        sgemm = time_median(run_sgemm, &sa, flops);
        free(wf);
#endif
        if (!json && sgemm > 0)
            printf("%-8s n %6lld k %4lld   sgemm %7.1f\n", shapes[s].name, (long long)n,
                   (long long)k, sgemm);
        else if (!json)
            printf("%-8s n %6lld k %4lld   sgemm  absent\n", shapes[s].name, (long long)n,
                   (long long)k);
        q8_gflops = 0;
        /* the Q8_0 weights of this shape, kept once its row ran, and their own output */
        ps_mat w8 = {0};
        void *w8data = NULL; /* w8's weights, owned */
        float *y8 = NULL;
        for (size_t t = 0; t < n_types; t++) {
            if (strcmp(types_arg, "all") && !list_has(types_arg, types[t].name)) continue;
            if (k % types[t].blck) continue;
            ps_mat w = {0};
            void *wdata = make_weights(types[t].type, n, k, &w.row_bytes);
            w.data = wdata;
            w.type = types[t].type;
            w.n_in = k;
            w.n_out = n;
            /* validate on the first 48 weight rows */
            ps_mat wv = w;
            wv.n_out = 48;
            ps_matmul(&env, &w, x, k, m, y, n);
            if (ps_matmul_ref(&wv, env.f32_act, x, k, m, yref, 48) != PS_OK) return 1;
            double worst = 0;
            for (int64_t r = 0; r < m; r++)
                for (int64_t j = 0; j < 48; j++)
                    worst = fmax(worst, fabs((double)y[r * n + j] - yref[r * 48 + j]) /
                                            (fabs((double)yref[r * 48 + j]) + 1.0));
            if (worst > 1e-5) {
                fprintf(stderr, "bench_matmul: %s %s: max rel error %g vs reference\n",
                        types[t].name, shapes[s].name, worst);
                rc = 1;
            }
            mm_args a = {&env, &w, x, y, m};
            double g = time_median(run_ps, &a, flops);
            q8_ratio = 0;
            if (w8.data && types[t].type != PS_GGML_Q8_0) {
                mm_args a8 = {&env, &w8, x, y8, m};
                q8_ratio = ratio_paired(run_ps, &a, &a8);
            }
            report(json, types[t].name, isa == PS_ISA_SCALAR ? "scalar" : "avx512", m, n, k, g,
                   sgemm, threads, f32_act, worst);
            if (types[t].type == PS_GGML_Q8_0) q8_gflops = g;
            q8_ratio = 0; /* the AMX rows print their ratio to the row above instead */
            /* AMX rows: BF16 with the tile copy (made here, timed as the load would) and
             * without it, Q8_0; validated as above, Q8_0 also bitwise against the row above */
            if (amx && !f32_act &&
                (types[t].type == PS_GGML_BF16 || types[t].type == PS_GGML_Q8_0 ||
                 ps_mmq_supported(types[t].type))) {
                float *y0 = malloc(sizeof(float) * (size_t)(m * n));
                if (!y0) { fprintf(stderr, "out of memory\n"); return 1; }
                memcpy(y0, y, sizeof(float) * (size_t)(m * n));
                ps_matmul_env ea = env;
                ea.amx = true;
                for (int pass = 0; pass < (types[t].type == PS_GGML_BF16 ? 2 : 1); pass++) {
                    ps_mat wa = w;
                    void *tiles = NULL;
                    double pack_ms = 0;
                    if (pass == 0 && types[t].type == PS_GGML_BF16) {
                        const double t0 = now_s();
                        size_t tb;
                        tiles = ps_amx_bf16_pack(&w, &tb);
                        pack_ms = (now_s() - t0) * 1e3;
                        if (!tiles) { fprintf(stderr, "out of memory\n"); return 1; }
                        wa.tiles = tiles;
                    }
                    ps_matmul(&ea, &wa, x, k, m, y, n);
                    double wa_err = 0, vs_avx = 0;
                    for (int64_t r = 0; r < m; r++)
                        for (int64_t j = 0; j < 48; j++)
                            wa_err = fmax(wa_err, fabs((double)y[r * n + j] - yref[r * 48 + j]) /
                                                      (fabs((double)yref[r * 48 + j]) + 1.0));
                    for (int64_t i = 0; i < m * n; i++)
                        vs_avx = fmax(vs_avx, fabs((double)y[i] - y0[i]));
                    const bool bitwise = !memcmp(y, y0, sizeof(float) * (size_t)(m * n));
                    if (wa_err > 1e-5 || (types[t].type != PS_GGML_BF16 && !bitwise)) {
                        fprintf(stderr, "bench_matmul: amx %s %s: max rel error %g vs reference, "
                                        "max |amx - avx512| %g\n",
                                types[t].name, shapes[s].name, wa_err, vs_avx);
                        rc = 1;
                    }
                    mm_args aa = {&ea, &wa, x, y, m};
                    double ga = time_median(run_ps, &aa, flops);
                    const char *path = types[t].type != PS_GGML_BF16 ? "amx-int8"
                                       : pass == 0                  ? "amx-bf16"
                                                                    : "amx-bf16-norepack";
                    report(json, types[t].name, path, m, n, k, ga, sgemm, threads, f32_act,
                           wa_err);
                    if (!json)
                        printf("               %.2fx the avx512 row; max |amx - avx512| %.3g%s",
                               ga / g, vs_avx,
                               types[t].type == PS_GGML_BF16 ? ""
                               : bitwise ? " (bitwise equal)\n" : " (NOT bitwise equal)\n");
                    if (!json && types[t].type == PS_GGML_BF16)
                        printf(pass == 0 ? "; tile copy %.1f MiB in %.1f ms\n" : "\n",
                               (double)ps_amx_bf16_tiles_bytes(&w) / 1048576.0, pack_ms);
                    ps_free(tiles);
                }
                free(y0);
            }
            fflush(stdout);
            if (types[t].type == PS_GGML_Q8_0 && !w8.data) {
                y8 = ps_aligned_alloc(64, sizeof(float) * (size_t)(m * n));
                if (!y8) { fprintf(stderr, "out of memory\n"); return 1; }
                w8 = w; /* freed after the shape */
                w8data = wdata;
            } else {
                free(wdata);
            }
        }
        free(w8data);
        ps_free(y8);
        ps_free(scratch);
        ps_free(x);
        ps_free(y);
        free(yref);
    }
    if (!json && bf16_peak > 0)
        printf("vdpbf16ps peak again, after the shapes: %.1f GFLOP/s\n",
               ps_bf16_peak_gflops(pool, 0.3, use_cpu_time));
    ps_pool_free(pool);
    return rc;
}
