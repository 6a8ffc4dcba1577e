/*
 * bench_topk.c — the top-K kernel on one chunk of 256 x 248,320 logits (a Qwen-size
 * vocabulary) per dtype, K in {1, 20, 128}, 1 and 2 threads.
 *
 * For each case it first checks that the fast path equals the reference bit for bit, then
 * prints the median time of: the reference path (full log-softmax + sort; timed twice), the
 * fast path, and a plain streaming read of the same bytes (a vectorised sum over the buffer:
 * the memory floor; timed interleaved with the fast path so both see the same machine), with
 * the ratios, and the minima. --json prints one JSON object per case.
 * --check (what `make test` runs): no timing; on small chunks (1, 7 and 33 rows of 5,003 and
 * 40,000 logits) every dtype, K in {1, 20, 128} and 1 / 2 threads: the fast path equals the
 * reference bit for bit (with K = 20 also the entropy and varentropy of the statistics pass).
 * Prints the test closing line "bench_topk: N passed, N failed, ...".
 * Usage: bench_topk [--json] [--rows N] [--runs N] | --check
 */
#include "base/impl.h"
#include "promptscore.h"

#include "../tests/check.h" /* --check: CHECKF and the closing line */

#include <immintrin.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define N_VOCAB 248320

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}
static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* ---- the streaming read: sum of 64-bit words, split over the pool ---------------------- */

typedef struct {
    const uint8_t *p;
    size_t bytes, per_task;
    uint64_t sums[64];
} stream_job;

__attribute__((target("avx2"))) static uint64_t sum_avx2(const uint8_t *p, size_t n) {
    __m256i a = _mm256_setzero_si256(), b = a, c = a, d = a;
    size_t i = 0;
    for (; i + 128 <= n; i += 128) {
        a = _mm256_add_epi64(a, _mm256_loadu_si256((const __m256i *)(p + i)));
        b = _mm256_add_epi64(b, _mm256_loadu_si256((const __m256i *)(p + i + 32)));
        c = _mm256_add_epi64(c, _mm256_loadu_si256((const __m256i *)(p + i + 64)));
        d = _mm256_add_epi64(d, _mm256_loadu_si256((const __m256i *)(p + i + 96)));
    }
    a = _mm256_add_epi64(_mm256_add_epi64(a, b), _mm256_add_epi64(c, d));
    uint64_t t[4];
    _mm256_storeu_si256((__m256i *)t, a);
    uint64_t s = t[0] + t[1] + t[2] + t[3];
    for (; i < n; i++) s += p[i];
    return s;
}

static void stream_task(void *ctx, int64_t task, int32_t thread_index) {
    stream_job *j = ctx;
    size_t lo = (size_t)task * j->per_task;
    size_t hi = lo + j->per_task < j->bytes ? lo + j->per_task : j->bytes;
    j->sums[task % 64] += sum_avx2(j->p + lo, hi - lo);
}

static uint64_t stream_read(ps_pool *pool, const void *p, size_t bytes) {
    stream_job j = {p, bytes, 0, {0}};
    int64_t tasks = 64;
    j.per_task = (bytes + (size_t)tasks - 1) / (size_t)tasks;
    ps_pool_for(pool, tasks, stream_task, &j);
    uint64_t s = 0;
    for (int i = 0; i < 64; i++) s += j.sums[i];
    return s;
}

/* ---- data ------------------------------------------------------------------------------ */

static uint64_t rng = 88172645463325252ull;
static inline uint64_t xorshift(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* Logit-like values: approximately normal (sigma 3) from 4 uniforms, plus a few peaks. */
static void fill(void *data, ps_dtype dt, int64_t rows, int64_t n) {
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t i = 0; i < n; i++) {
            uint64_t u = xorshift();
            float s = (float)((u & 0xffff) + ((u >> 16) & 0xffff) + ((u >> 32) & 0xffff) +
                              (u >> 48)) / 65536.0f - 2.0f;
            float v = s * 5.2f;
            if (i % 9973 == (r * 7) % 9973) v += 12.0f;
            size_t at = (size_t)(r * n + i);
            if (dt == PS_DTYPE_F32) {
                ((float *)data)[at] = v;
            } else {
                uint32_t x;
                memcpy(&x, &v, 4);
                uint16_t h;
                if (dt == PS_DTYPE_BF16) {
                    h = (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
                } else { /* f16, round to nearest even; |v| < 65504 and no subnormals here */
                    uint32_t ax = x & 0x7fffffffu, hh = (ax - 0x38000000u) >> 13;
                    uint32_t rem = ax & 0x1fffu;
                    if (ax < 0x38800000u) hh = 0;
                    else if (rem > 0x1000u || (rem == 0x1000u && (hh & 1))) hh++;
                    h = (uint16_t)(((x >> 16) & 0x8000u) | hh);
                }
                ((uint16_t *)data)[at] = h;
            }
        }
    }
}

/* --check: fast path = reference, bitwise, on small shapes; no timing. */
static int run_check(void) {
    ps_pool *pool2 = NULL;
    CHECK(ps_pool_create(2, &pool2) == PS_OK);
    static const ps_dtype dts[3] = {PS_DTYPE_BF16, PS_DTYPE_F16, PS_DTYPE_F32};
    static const char *dn[3] = {"bf16", "f16", "f32"};
    static const int32_t ks[3] = {1, 20, 128};
    static const int64_t rows_v[3] = {1, 7, 33}, n_v[2] = {5003, 40000};
    for (int d = 0; d < 3; d++)
        for (int ri = 0; ri < 3; ri++)
            for (int ni = 0; ni < 2; ni++) {
                const int64_t rows = rows_v[ri], n = n_v[ni];
                void *data = malloc((size_t)(rows * n) * 4);
                int32_t *targets = malloc((size_t)rows * sizeof *targets);
                float *lse[2], *tlp[2], *lps[2], *ent[2], *var[2];
                int32_t *ids[2];
                for (int i = 0; i < 2; i++) {
                    ent[i] = malloc((size_t)rows * 4);
                    var[i] = malloc((size_t)rows * 4);
                    if (!ent[i] || !var[i]) return 1;
                    lse[i] = malloc((size_t)rows * 4);
                    tlp[i] = malloc((size_t)rows * 4);
                    lps[i] = malloc((size_t)rows * 128 * 4);
                    ids[i] = malloc((size_t)rows * 128 * 4);
                    if (!lse[i] || !tlp[i] || !lps[i] || !ids[i]) return 1;
                }
                if (!data || !targets) return 1;
                fill(data, dts[d], rows, n);
                for (int64_t r = 0; r < rows; r++) targets[r] = (int32_t)(xorshift() % (uint64_t)n);
                ps_logits lg = {data, dts[d], rows, n, n, targets};
                for (int ki = 0; ki < 3; ki++)
                    for (int t = 0; t < 2; t++) {
                        ps_topk_params p = ps_topk_default_params();
                        p.k = ks[ki];
                        p.pool = t ? pool2 : NULL;
                        ps_topk_out out[2];
                        /* with k = 20: entropy and varentropy too (the statistics pass) */
                        for (int i = 0; i < 2; i++)
                            out[i] = (ps_topk_out){lse[i], tlp[i], ids[i], lps[i],
                                                   ki == 1 ? ent[i] : NULL, NULL,
                                                   ki == 1 ? var[i] : NULL};
                        ps_error err;
                        CHECK(ps_topk_reference(&p, &lg, &out[0], &err) == PS_OK);
                        CHECK(ps_topk_compute(&p, &lg, &out[1], &err) == PS_OK);
                        size_t rk = (size_t)(rows * ks[ki]) * 4;
                        CHECKF(!memcmp(lse[0], lse[1], (size_t)rows * 4) &&
                                   !memcmp(tlp[0], tlp[1], (size_t)rows * 4) &&
                                   !memcmp(ids[0], ids[1], rk) && !memcmp(lps[0], lps[1], rk),
                               "%s rows %lld n %lld k %d threads %d: fast path differs from the "
                               "reference", dn[d], (long long)rows, (long long)n, ks[ki], t + 1);
                        if (ki == 1)
                            CHECKF(!memcmp(ent[0], ent[1], (size_t)rows * 4) &&
                                       !memcmp(var[0], var[1], (size_t)rows * 4),
                                   "%s rows %lld n %lld threads %d: entropy / varentropy differ "
                                   "from the reference", dn[d], (long long)rows, (long long)n,
                                   t + 1);
                    }
                for (int i = 0; i < 2; i++) {
                    free(lse[i]); free(tlp[i]); free(lps[i]); free(ids[i]);
                    free(ent[i]); free(var[i]);
                }
                free(data);
                free(targets);
            }
    ps_pool_free(pool2);
    return ps_test_done("bench_topk");
}

int main(int argc, char **argv) {
    if (argc == 2 && !strcmp(argv[1], "--check")) return run_check();
    bool json = false;
    int64_t rows = 256;
    int runs = 9, ref_runs = 2;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) json = true;
        else if (!strcmp(argv[i], "--rows") && i + 1 < argc) rows = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--runs") && i + 1 < argc) runs = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--json] [--rows N] [--runs N]\n", argv[0]);
            return 2;
        }
    }
    if (runs < 1 || rows < 1) return 2;
    ps_pool *pool2 = NULL;
    if (ps_pool_create(2, &pool2) != PS_OK) return 1;
    ps_dtype dts[3] = {PS_DTYPE_BF16, PS_DTYPE_F16, PS_DTYPE_F32};
    const char *dn[3] = {"bf16", "f16", "f32"};
    int32_t ks[3] = {1, 20, 128};
    size_t nel = (size_t)(rows * N_VOCAB);
    void *data = malloc(nel * 4);
    int32_t *targets = malloc((size_t)rows * sizeof *targets);
    float *lse[2], *tlp[2], *lps[2];
    int32_t *ids[2];
    for (int i = 0; i < 2; i++) {
        lse[i] = malloc((size_t)rows * 4);
        tlp[i] = malloc((size_t)rows * 4);
        lps[i] = malloc((size_t)rows * 128 * 4);
        ids[i] = malloc((size_t)rows * 128 * 4);
    }
    if (!data || !targets) return 1;
    for (int64_t r = 0; r < rows; r++) targets[r] = (int32_t)(xorshift() % N_VOCAB);
    if (!json)
        printf("%-5s %4s %3s %12s %9s %10s %9s %10s   %8s %8s   (medians; isa %s, %lld x %d)\n",
               "dtype", "k", "thr", "reference_ms", "fast_ms", "stream_ms", "ref/fast", "fast/strm",
               "fast_min", "strm_min", ps_isa_name(ps_isa_best()), (long long)rows, N_VOCAB);
    int status = 0;
    for (int d = 0; d < 3; d++) {
        fill(data, dts[d], rows, N_VOCAB);
        size_t bytes = nel * (dts[d] == PS_DTYPE_F32 ? 4 : 2);
        ps_logits lg = {data, dts[d], rows, N_VOCAB, N_VOCAB, targets};
        for (int ki = 0; ki < 3; ki++) {
            for (int t = 0; t < 2; t++) {
                ps_topk_params p = ps_topk_default_params();
                p.k = ks[ki];
                p.pool = t ? pool2 : NULL;
                ps_topk_out out[2];
                for (int i = 0; i < 2; i++) out[i] = (ps_topk_out){lse[i], tlp[i], ids[i], lps[i], NULL, NULL, NULL};
                ps_error err;
                double tr[8], tf[64], ts[64];
                int nr = ref_runs < 8 ? ref_runs : 8, nf = runs < 64 ? runs : 64;
                for (int i = 0; i < nr; i++) {
                    double t0 = now_ms();
                    if (ps_topk_reference(&p, &lg, &out[0], &err) != PS_OK) {
                        fprintf(stderr, "reference failed: %s\n", err.message);
                        return 1;
                    }
                    tr[i] = now_ms() - t0;
                }
                volatile uint64_t sink = 0;
                bool checked = false;
                for (int i = 0; i < nf; i++) { /* fast and stream interleaved: same conditions */
                    double t0 = now_ms();
                    if (ps_topk_compute(&p, &lg, &out[1], &err) != PS_OK) {
                        fprintf(stderr, "fast path failed: %s\n", err.message);
                        return 1;
                    }
                    tf[i] = now_ms() - t0;
                    if (!checked) { /* validate before trusting any time */
                        size_t rk = (size_t)(rows * ks[ki]) * 4;
                        if (memcmp(lse[0], lse[1], (size_t)rows * 4) ||
                            memcmp(tlp[0], tlp[1], (size_t)rows * 4) || memcmp(ids[0], ids[1], rk) ||
                            memcmp(lps[0], lps[1], rk)) {
                            fprintf(stderr, "MISMATCH: fast path differs from reference (%s k=%d)\n",
                                    dn[d], ks[ki]);
                            status = 1;
                        }
                        checked = true;
                    }
                    t0 = now_ms();
                    sink += stream_read(p.pool, data, bytes);
                    ts[i] = now_ms() - t0;
                }
                (void)sink;
                double minf = tf[0], mins = ts[0];
                for (int i = 1; i < nf; i++) {
                    minf = tf[i] < minf ? tf[i] : minf;
                    mins = ts[i] < mins ? ts[i] : mins;
                }
                double mr = median(tr, nr), mf = median(tf, nf), ms = median(ts, nf);
                if (json)
                    printf("{\"dtype\": \"%s\", \"k\": %d, \"threads\": %d, \"reference_ms\": %.3f, "
                           "\"fast_ms\": %.3f, \"stream_ms\": %.3f, \"fast_min_ms\": %.3f, "
                           "\"stream_min_ms\": %.3f}\n",
                           dn[d], ks[ki], t + 1, mr, mf, ms, minf, mins);
                else
                    printf("%-5s %4d %3d %12.1f %9.2f %10.2f %8.1fx %9.2fx   %8.2f %8.2f\n", dn[d],
                           ks[ki], t + 1, mr, mf, ms, mr / mf, mf / ms, minf, mins);
                fflush(stdout);
            }
        }
    }
    for (int i = 0; i < 2; i++) {
        free(lse[i]); free(tlp[i]); free(lps[i]); free(ids[i]);
    }
    free(data);
    free(targets);
    ps_pool_free(pool2);
    return status;
}
