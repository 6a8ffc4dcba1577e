/*
 * bench_kvtype.c — what a half-precision K/V cache (--kv-type f16 / bf16 / bf16-dot) does to
 * scores, memory and speed, against the f32 cache in the same run.
 *
 * The model scores one prompt of -n tokens (pseudo-random ids after BOS, or the tokens of
 * --text FILE) with each K/V type, in one session per type (-t threads, the default chunk).
 * Per type it prints, against f32: the largest and mean |difference| of the teacher-forced
 * logprobs (each position's logprob of the next token), the largest |difference| over every
 * vocabulary entry's logprob at every position, the perplexity, the K/V cache's MiB, and the
 * forward time with its ratio to f32's (CPU time of the process with -t 1, else wall; the
 * median of --runs after one untimed warm-up pass). Usage:
 *   bench_kvtype -m MODEL.gguf [-n 512] [-t 1] [--runs 3] [--text FILE]
 *   bench_kvtype --check   (no timing: a generated tiny llama, 200 tokens; f16 / bf16 / bf16-dot
 *                           move the logprobs by more than 0 and less than 0.1, in half the K/V
 *                           bytes, and a second session of each type gives the same bits)
 */
#include "gen/genmodel.h"
#include "../tests/check.h"
#include "base/impl.h"
#include "promptscore.h"
#include "run/session.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(int threads) {
    struct timespec ts;
    clock_gettime(threads == 1 ? CLOCK_PROCESS_CPUTIME_ID : CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* log-softmax of each row of x (n, V) in place, in double */
static void log_softmax_rows(float *x, int32_t n, int64_t V) {
    for (int32_t i = 0; i < n; i++) {
        float *r = x + (size_t)i * (size_t)V;
        double mx = -INFINITY, s = 0;
        for (int64_t j = 0; j < V; j++) mx = fmax(mx, r[j]);
        for (int64_t j = 0; j < V; j++) s += exp((double)r[j] - mx);
        const double l = mx + log(s);
        for (int64_t j = 0; j < V; j++) r[j] = (float)((double)r[j] - l);
    }
}

int main(int argc, char **argv) {
    const char *model = NULL, *text = NULL;
    int32_t n = 512, threads = 1, runs = 3;
    int check = 0;
    char gen[512] = "";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--check")) check = 1;
        else if (!strcmp(argv[i], "-m") && i + 1 < argc) model = argv[++i];
        else if (!strcmp(argv[i], "-n") && i + 1 < argc) n = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-t") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--runs") && i + 1 < argc) runs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--text") && i + 1 < argc) text = argv[++i];
        else {
            fprintf(stderr, "usage: bench_kvtype -m MODEL.gguf [-n 512] [-t 1] [--runs 3] "
                            "[--text FILE]\n");
            return 2;
        }
    }
    ps_error e;
    if (check) {
        const char *tmp = getenv("TMPDIR");
        snprintf(gen, sizeof gen, "%s/bench_kvtype_%d.gguf", tmp && *tmp ? tmp : "/tmp",
                 (int)getpid());
        ps_genmodel_params gp = ps_genmodel_default_params();
        ps_genmodel_preset("tiny", &gp, NULL);
        gp.n_ctx = 256;
        if (ps_genmodel_write(&gp, gen, &e) != PS_OK) {
            CHECKF(0, "gen-model: %s", e.message);
            return ps_test_done("bench_kvtype");
        }
        model = gen, n = 200, runs = 1, threads = 1, text = NULL;
    }
    if (!model || n < 2 || threads < 1 || runs < 1 || runs > 50) {
        fprintf(stderr, "bench_kvtype: -m MODEL is required (n >= 2, t >= 1, runs 1..50)\n");
        return 2;
    }
    ps_model *m = NULL;
    if (ps_model_load(model, NULL, &m, &e) != PS_OK) {
        fprintf(stderr, "bench_kvtype: %s: %s\n", model, e.message);
        return 1;
    }
    ps_model_info info;
    ps_model_get_info(m, &info);
    const int64_t V = info.n_vocab;
    int32_t *ids = malloc((size_t)n * sizeof *ids);
    if (text) {
        FILE *f = fopen(text, "rb");
        char *buf = f ? malloc(1 << 22) : NULL;
        size_t len = buf ? fread(buf, 1, (1 << 22) - 1, f) : 0;
        if (f) fclose(f);
        int32_t got = 0; /* the ids the text needs; the first n are written */
        if (buf && ps_vocab_tokenize(ps_model_vocab(m), buf, len, true, false, ids, n, &got, &e) !=
                       PS_OK)
            got = 0;
        free(buf);
        if (got < 2) {
            fprintf(stderr, "bench_kvtype: --text %s gave %d tokens\n", text, (int)got);
            return 1;
        }
        n = PS_MIN(n, got);
    } else {
        uint64_t s = 12345;
        for (int32_t i = 0; i < n; i++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            ids[i] = i == 0 ? 1 : (int32_t)((s >> 33) % (uint64_t)V);
        }
    }
    if (n > info.n_ctx) n = info.n_ctx;
    ps_pool *pool = NULL;
    if (threads > 1 && ps_pool_create(threads, &pool) != PS_OK) return 1;
    const ps_kv_type TYPES[] = {PS_KV_F32, PS_KV_F16, PS_KV_BF16, PS_KV_BF16_DOT};
    enum { NT = 4 };
    const size_t nf = (size_t)n * (size_t)V;
    float *lp[NT] = {0};
    double secs[NT] = {0}, kv_mib[NT] = {0};
    printf("model %s: %s, %d layers, vocab %lld; %d tokens (%s), %d thread%s, %s time, median of "
           "%d\n", info.file, info.arch, info.n_layer, (long long)V, (int)n,
           text ? "text" : "random ids", (int)threads, threads > 1 ? "s" : "",
           threads == 1 ? "CPU" : "wall", (int)runs);
    for (int t = 0; t < NT; t++) {
        ps_session_params sp = ps_session_default_params();
        sp.n_ctx = n;
        sp.pool = pool;
        sp.kv_type = TYPES[t];
        ps_session *s = NULL;
        if (ps_session_create(m, &sp, &s, &e) != PS_OK) {
            fprintf(stderr, "bench_kvtype: session: %s\n", e.message);
            return 1;
        }
        kv_mib[t] = (double)s->seq->kv_elems * s->seq->kv_elt / 1048576.0;
        lp[t] = malloc(nf * sizeof(float));
        double ts[50];
        for (int r = -1; r < runs; r++) { /* r = -1: a warm-up pass (page faults), not timed */
            ps_session_reset(s);
            const double t0 = now_s(threads);
            for (int32_t i = 0; i < n; i += PS_CHUNK)
                if (ps_session_forward(s, ids + i, PS_MIN(PS_CHUNK, n - i),
                                       lp[t] + (size_t)i * (size_t)V, &e) != PS_OK) {
                    fprintf(stderr, "bench_kvtype: forward: %s\n", e.message);
                    return 1;
                }
            if (r >= 0) ts[r] = now_s(threads) - t0;
        }
        qsort(ts, (size_t)runs, sizeof *ts, cmp_d);
        secs[t] = ts[runs / 2];
        ps_session_free(s);
        log_softmax_rows(lp[t], n, V);
    }
    printf("%-8s %10s %12s %12s %12s %9s %10s %9s %6s\n", "kv", "KV MiB", "max|dlp|",
           "mean|dlp|", "max|dlp|all", "ppl", "tok/s", "seconds", "x f32");
    for (int t = 0; t < NT; t++) {
        double mx = 0, sum = 0, mx_all = 0, nll = 0;
        for (int32_t i = 0; i + 1 < n; i++) {
            const size_t at = (size_t)i * (size_t)V + (size_t)ids[i + 1];
            const double d = fabs((double)lp[t][at] - (double)lp[0][at]);
            mx = fmax(mx, d);
            sum += d;
            nll -= lp[t][at];
        }
        for (size_t j = 0; j < nf; j++) mx_all = fmax(mx_all, fabs((double)lp[t][j] - lp[0][j]));
        printf("%-8s %10.2f %12.3g %12.3g %12.3g %9.4f %10.1f %9.3f %6.3f\n",
               ps_kv_type_name(TYPES[t]), kv_mib[t], mx, sum / (n - 1), mx_all,
               exp(nll / (n - 1)), n / secs[t], secs[t], secs[0] / secs[t]);
    }
    if (check) {
        for (int t = 1; t < NT; t++) {
            double mx = 0;
            for (size_t j = 0; j < nf; j++) mx = fmax(mx, fabs((double)lp[t][j] - lp[0][j]));
            CHECKF(mx > 0 && mx < 0.1, "kv %s: max |dlp| %g", ps_kv_type_name(TYPES[t]), mx);
            CHECKF(kv_mib[t] * 2 == kv_mib[0], "kv %s: %g MiB vs %g", ps_kv_type_name(TYPES[t]),
                   kv_mib[t], kv_mib[0]);
            /* again, on a new session: the same bits */
            ps_session_params sp = ps_session_default_params();
            sp.n_ctx = n;
            sp.kv_type = TYPES[t];
            ps_session *s = NULL;
            float *again = malloc(nf * sizeof(float));
            CHECK(ps_session_create(m, &sp, &s, &e) == PS_OK);
            if (s && again) {
                CHECK(ps_session_forward(s, ids, n, again, &e) == PS_OK);
                log_softmax_rows(again, n, V);
                CHECKF(!memcmp(again, lp[t], nf * sizeof(float)), "kv %s: a second session differs",
                       ps_kv_type_name(TYPES[t]));
            }
            free(again);
            ps_session_free(s);
        }
        remove(gen);
    }
    for (int t = 0; t < NT; t++) free(lp[t]);
    free(ids);
    ps_pool_free(pool);
    ps_model_free(m);
    return check ? ps_test_done("bench_kvtype") : 0;
}
