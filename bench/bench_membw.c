/*
 * bench_membw.c — the machine's memory read bandwidth with one thread and with two: what caps
 * the scaling of a forward pass whose weights do not fit in cache.
 *
 * Each thread sums its own half (or, alone, all) of a buffer of --mb MiB (default 256, far
 * past any L3 cache here) with 256-bit loads, 4 independent accumulators; a pass is timed by
 * the wall clock. The runs alternate, one thread then two, --pairs times (default 7), and the
 * medians of each and the median of the pairs' ratios (two over one) are printed: a ratio near
 * 1 says one core already takes what the memory gives, so a weight-bound pass cannot scale.
 * The same buffer is read by a few cache-sized passes too (--l2-kb, default 512 KiB per
 * thread, each thread its own), the figure a core reaches when the data is in its cache.
 *
 *   bench_membw [--mb N] [--pairs N] [--l2-kb N]
 *   bench_membw --check    (make test: the sums of one- and two-thread passes over 1 MiB, no timing)
 *
 * A measurement, not a test: it checks nothing but that the sums are what they must be (the
 * buffer holds ones, so a sum is its length in bytes / 8 as 64-bit lanes of 1).
 */
#include <immintrin.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    const uint64_t *p;
    size_t n;      /* uint64 elements, a multiple of 16 */
    int reps;
    uint64_t sum;
} part;

__attribute__((target("avx2"))) static uint64_t sum_avx2(const uint64_t *p, size_t n) {
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i < n; i += 16) {
        a0 = _mm256_add_epi64(a0, _mm256_loadu_si256((const __m256i *)(p + i)));
        a1 = _mm256_add_epi64(a1, _mm256_loadu_si256((const __m256i *)(p + i + 4)));
        a2 = _mm256_add_epi64(a2, _mm256_loadu_si256((const __m256i *)(p + i + 8)));
        a3 = _mm256_add_epi64(a3, _mm256_loadu_si256((const __m256i *)(p + i + 12)));
    }
    uint64_t lanes[4];
    _mm256_storeu_si256((__m256i *)lanes,
                        _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3)));
    return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}

static void *run_part(void *arg) {
    part *q = arg;
    q->sum = 0;
    for (int r = 0; r < q->reps; r++) q->sum += sum_avx2(q->p, q->n);
    return NULL;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* GB/s of threads (1 or 2) reading n elements each from its own start, reps times; -1 when a
 * sum is wrong. */
static double pass(const uint64_t *buf, size_t n_each, int threads, int reps) {
    part q[2];
    pthread_t th;
    for (int t = 0; t < threads; t++) q[t] = (part){buf + (size_t)t * n_each, n_each, reps, 0};
    const double t0 = now_s();
    if (threads == 2 && pthread_create(&th, NULL, run_part, &q[1])) return -1;
    run_part(&q[0]);
    if (threads == 2) pthread_join(th, NULL);
    const double secs = now_s() - t0;
    for (int t = 0; t < threads; t++)
        if (q[t].sum != (uint64_t)n_each * (uint64_t)reps) return -1;
    return (double)threads * (double)n_each * 8.0 * reps / secs * 1e-9;
}

static int cmp_d(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *x, int n) {
    qsort(x, (size_t)n, sizeof *x, cmp_d);
    return x[n / 2];
}

/* pairs runs alternating one and two threads over n_each elements per thread (one thread
 * reads 2 n_each, as much as both together), reps passes each */
static int measure(const char *what, const uint64_t *buf, size_t n_each, int pairs, int reps) {
    double *one = malloc(sizeof(double) * 3 * (size_t)pairs);
    if (!one) return 1;
    double *two = one + pairs, *ratio = two + pairs;
    for (int i = 0; i < pairs; i++) {
        one[i] = pass(buf, 2 * n_each, 1, reps);
        two[i] = pass(buf, n_each, 2, reps);
        if (one[i] < 0 || two[i] < 0) {
            fprintf(stderr, "bench_membw: a sum is wrong\n");
            free(one);
            return 1;
        }
        ratio[i] = two[i] / one[i];
    }
    printf("%-28s 1 thread %7.1f GB/s   2 threads %7.1f GB/s   2 / 1 %.2fx  (medians of %d "
           "alternating pairs)\n", what, median(one, pairs), median(two, pairs),
           median(ratio, pairs), pairs);
    free(one);
    return 0;
}

/* --check: every pass form sums a small buffer of ones to its length; no timing. */
static int check_sums(void) {
    const size_t n = (size_t)1 << 17; /* 1 MiB of uint64 */
    uint64_t *buf = aligned_alloc(64, n * 8);
    int passed = 0, failed = 0;
    if (!buf) {
        fprintf(stderr, "bench_membw: out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < n; i++) buf[i] = 1;
    const struct { size_t n_each; int threads, reps; } cases[] = {
        {n, 1, 1}, {n / 2, 2, 1}, {n / 8, 1, 3}, {n / 16, 2, 5}, {16, 2, 2}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        if (pass(buf, cases[c].n_each, cases[c].threads, cases[c].reps) >= 0) {
            passed++;
        } else {
            failed++;
            printf("FAIL bench_membw: %zu elements x %d threads x %d passes: a sum is wrong\n",
                   cases[c].n_each, cases[c].threads, cases[c].reps);
        }
    }
    free(buf);
    printf("bench_membw: %d passed, %d failed, 0 skipped\n", passed, failed);
    return failed ? 1 : 0;
}

int main(int argc, char **argv) {
    long mb = 256, l2_kb = 512;
    int pairs = 7;
    if (argc == 2 && !strcmp(argv[1], "--check")) return check_sums();
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--mb") && i + 1 < argc) mb = atol(argv[++i]);
        else if (!strcmp(argv[i], "--pairs") && i + 1 < argc) pairs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--l2-kb") && i + 1 < argc) l2_kb = atol(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_membw [--mb N] [--pairs N] [--l2-kb N] | --check\n");
            return 2;
        }
    }
    if (mb < 1 || mb > 65536 || pairs < 1 || pairs > 1000 || l2_kb < 4 || l2_kb > mb * 512) {
        fprintf(stderr, "bench_membw: --mb 1..65536, --pairs 1..1000, --l2-kb 4..mb*512\n");
        return 2;
    }
    const size_t n = (size_t)mb << 17; /* uint64 elements in mb MiB */
    uint64_t *buf = aligned_alloc(64, n * 8);
    if (!buf) {
        fprintf(stderr, "bench_membw: out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < n; i++) buf[i] = 1;
    char what[64];
    snprintf(what, sizeof what, "read %ld MiB (memory):", mb);
    if (measure(what, buf, n / 2, pairs, 1)) return 1;
    const size_t n_l2 = ((size_t)l2_kb << 7) & ~(size_t)15; /* per thread */
    snprintf(what, sizeof what, "read %ld KiB/thread (cache):", l2_kb);
    /* a thread reads its own n_l2 over and over: about as many bytes as the memory pass */
    const int reps = (int)(n / 2 / n_l2) > 0 ? (int)(n / 2 / n_l2) : 1;
    if (measure(what, buf, n_l2, pairs, reps)) return 1;
    free(buf);
    return 0;
}
