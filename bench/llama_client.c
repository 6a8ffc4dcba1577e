/*
 * llama_client.c — the llama.cpp side of bench/vs_llamacpp.sh: a small client of llama.h that
 * times what `promptscore bench` times, on the same prompt.
 *
 *   llama_client MODEL.gguf LENGTH THREADS RUNS
 *
 * The prompt is bench's (cli_bench.c): LENGTH ids drawn by the same xorshift generator from
 * the same seed, modulo the vocabulary size, so both programs score the same ids. The whole
 * prompt goes into one llama_decode (n_batch = n_ubatch = LENGTH) with logits requested at
 * every position, on a context of LENGTH positions. One untimed pass first (the warm-up: it
 * pages the weights in and sizes the compute buffers), then RUNS timed passes, each after
 * clearing the KV cache; the median is printed as one JSON line {"tokens_per_s", "seconds",
 * "clock", "runs"}. As in bench, one thread is timed by the process's CPU time and more by the
 * wall clock. llama.cpp returns logits only: the log-softmax and top-K that promptscore adds
 * are not counted on this side.
 *
 * Not part of the build or of CI: bench/vs_llamacpp.sh compiles it against an existing
 * llama.cpp build (docs/figures.md says how to make one). bench/vs_ikllama.sh compiles the same
 * file with -DPS_IK_LLAMA against an ik_llama.cpp build, whose llama.h predates llama.cpp's
 * memory API (llama_kv_cache_clear, llama_free_model) and has the run-time repack
 * (model parameter repack_tensors, its -rtr): the environment variable IK_RTR=1 turns it on.
 */
#include "llama.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static uint64_t rng_next(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static double now_s(clockid_t c) {
    struct timespec ts;
    clock_gettime(c, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_d(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void quiet_log(enum ggml_log_level level, const char *text, void *user) {
    (void)user;
    if (level == GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: llama_client MODEL.gguf LENGTH THREADS RUNS\n");
        return 2;
    }
    const int len = atoi(argv[2]), threads = atoi(argv[3]), runs = atoi(argv[4]);
    if (len < 1 || threads < 1 || runs < 1 || runs > 1000) {
        fprintf(stderr, "llama_client: LENGTH, THREADS and RUNS must be positive\n");
        return 2;
    }
    llama_log_set(quiet_log, NULL);
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
#ifdef PS_IK_LLAMA
    const char *rtr = getenv("IK_RTR");
    mp.repack_tensors = rtr && rtr[0] == '1';
#endif
    struct llama_model *model = llama_model_load_from_file(argv[1], mp);
    if (!model) {
        fprintf(stderr, "llama_client: cannot load %s\n", argv[1]);
        return 1;
    }
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t)len;
    cp.n_batch = (uint32_t)len;
    cp.n_ubatch = (uint32_t)len;
    cp.n_seq_max = 1;
    cp.n_threads = threads;
    cp.n_threads_batch = threads;
#ifndef PS_IK_LLAMA
    cp.no_perf = true;
#endif
    struct llama_context *ctx = llama_init_from_model(model, cp);
    if (!ctx) {
        fprintf(stderr, "llama_client: cannot create a context of %d positions\n", len);
        return 1;
    }
    const int32_t n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
    struct llama_batch batch = llama_batch_init(len, 0, 1);
    uint64_t r = 0x2545F4914F6CDD1Dull; /* cli_bench.c's seed and generator */
    for (int i = 0; i < len; i++) {
        batch.token[i] = (llama_token)(rng_next(&r) % (uint64_t)n_vocab);
        batch.pos[i] = i;
        batch.n_seq_id[i] = 1;
        batch.seq_id[i][0] = 0;
        batch.logits[i] = 1;
    }
    batch.n_tokens = len;
    const clockid_t clock = threads == 1 ? CLOCK_PROCESS_CPUTIME_ID : CLOCK_MONOTONIC;
    double *secs = malloc(sizeof *secs * (size_t)runs);
    if (!secs) return 1;
    for (int i = -1; i < runs; i++) { /* i = -1: the warm-up */
#ifdef PS_IK_LLAMA
        llama_kv_cache_clear(ctx);
#else
        llama_memory_clear(llama_get_memory(ctx), true);
#endif
        const double t0 = now_s(clock);
        if (llama_decode(ctx, batch) != 0) {
            fprintf(stderr, "llama_client: llama_decode failed\n");
            return 1;
        }
        volatile float sink = llama_get_logits_ith(ctx, len - 1)[0];
        (void)sink;
        const double t = now_s(clock) - t0;
        if (i >= 0) secs[i] = t;
    }
    qsort(secs, (size_t)runs, sizeof *secs, cmp_d);
    const double med = secs[runs / 2];
    printf("{\"tokens\": %d, \"threads\": %d, \"runs\": %d, \"seconds\": %.6f, \"clock\": \"%s\", "
           "\"tokens_per_s\": %.1f}\n",
           len, threads, runs, med, threads == 1 ? "cpu" : "wall", len / med);
    free(secs);
    llama_batch_free(batch);
    llama_free(ctx);
#ifdef PS_IK_LLAMA
    llama_free_model(model);
#else
    llama_model_free(model);
#endif
    llama_backend_free();
    return 0;
}
