/*
 * cli_bench.c — `promptscore bench`: scoring throughput of one model and where the time goes.
 *
 * For every thread count (default 1 and 2) and prompt length (default 256, 1024, 4096 tokens)
 * it scores a deterministic pseudo-random prompt with ps_score_tokens (top-K = 20 by default,
 * chunks of 256) on a fresh session, first once — the cold pass, printed on its own line: it
 * touches the KV cache, the kept logits buffer and the scratch for the first time, which a
 * server or a `score` run over many prompts pays once — and then --runs more times (default
 * 3). The row gives what a user gets at steady state: the median of those runs (the cold pass
 * is their warm-up), with tokens/s and the share of the time spent in the matmuls, the
 * attention, the top-K kernel (+ result bookkeeping: the score time outside the forward pass)
 * and the rest of the forward pass (norms, RoPE, SwiGLU, residuals, embedding rows), taken from
 * the prof.h timers, plus the GFLOP/s the matmuls reached (2 x weights x tokens / matmul time;
 * with experts the weights of the router and of n_expert_used experts per layer). Models with
 * experts also get the share of the routing (router matmul, softmax, top-k, grouping, gather,
 * weighted sum) and of the expert matmuls with their SwiGLU (also counted in matmul).
 * Every row is on one clock, named in the header: the wall clock by default, so -t 1,2 reads
 * as a user's runs do (two threads, fewer seconds); with --cpu-time the process's CPU time
 * (all its threads), which a shared, busy machine disturbs less, so two threads' seconds
 * over one thread's show how much work the split adds. The shares are those of the median
 * run; --json also gives the median run's wall_seconds and cpu_seconds whatever the clock. At the end: the process's peak
 * RSS next to the budget
 *     mapped weights + KV cache + 2 x one chunk of logits + 64 MiB.
 *
 * --cache-pairs N: after each row, the same prompt is scored N more times without the prefix
 * cache and N times with a fresh (empty) one, alternating off / on, and one line gives the
 * median seconds of each and their ratio: the cost, for a prompt the cache has never seen, of
 * capturing its blocks (the K/V copies into memory never touched before) and inserting them.
 * A second line does the same against a warm, full cache whose budget holds one prompt: each
 * "on" run scores a prompt not seen before and evicts the previous one's blocks, as in a
 * server that has run a while (cache_pairs_row). The budget at the end then counts the
 * largest cache those runs held.
 *
 * --kv-pairs N: after each row, the same prompt is scored N times on the row's session (its
 * --kv-type) and N times on a second session of --kv-base (default f32), alternating base /
 * type, and one line gives the median seconds of each and the median of the pairs' ratios:
 * what a cache type costs or saves, measured in one run (kv_pairs_row). The budget at the end then counts the
 * second session's KV cache too.
 *
 * --thread-pairs N: after the rows, for every length and every thread count T after the first
 * (F) of -t, the same prompt is scored N times on a session of F threads and N times on one of
 * T, alternating F / T, and one line gives the median seconds of each and the median of the
 * pairs' speed-ups (F's seconds over T's, each on the wall clock: a speed-up on CPU time
 * means nothing): the scaling of threads on a machine whose speed drifts, where rows
 * measured minutes apart can differ by more than the scaling (thread_pairs_row). With AVX-512
 * BF16 the line also gives the same median for the vdpbf16ps peak, measured just before each
 * run: the machine's own scaling at those moments, with no memory traffic and no barriers, the
 * ceiling of the scoring's. The budget at the end then counts the second session's KV cache and
 * logits.
 *
 * The kernels' agreement with their references on a model's own matrices is a test
 * (tests/test_model_kernels.c), not part of this command, which only measures.
 * --json prints one JSON object per line instead of the table.
 */
#include "run/attention.h"
#include "cli/cli.h"
#include "base/impl.h"
#include "model/model.h"
#include "run/session.h"
#include "kernels/matmul_float.h"
#include "kernels/matmul_quant.h"
#include "base/prof.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static const char *BENCH_ABOUT =
    "Scores pseudo-random prompts and reports tokens/s, the time split (matmul, attention,\n"
    "top-K, rest), matmul GFLOP/s and peak RSS. One line per (threads, length) as soon as it\n"
    "is measured; on a terminal a progress line on stderr says what runs.\n";

#define MAX_LIST 16

static bool parse_list(const char *s, int32_t *out, int *n) {
    *n = 0;
    while (*s) {
        const char *end;
        int64_t v;
        if (!ps_cli_parse_i64_prefix(s, 1, 1 << 20, &v, &end) || *n == MAX_LIST) return false;
        out[(*n)++] = (int32_t)v;
        if (*end == ',') end++;
        else if (*end) return false;
        s = end;
    }
    return *n > 0;
}

typedef struct {
    int32_t v[MAX_LIST];
    int n;
    bool given;
} int_list;

static bool opt_list(const char *cmd, const char *opt, const char *value, void *dst) {
    int_list *l = dst;
    if (!parse_list(value, l->v, &l->n)) {
        fprintf(stderr, "promptscore %s: %s wants a comma-separated list of up to %d integers in "
                        "1..%d, got '%s'\n", cmd, opt, MAX_LIST, 1 << 20, value);
        return false;
    }
    l->given = true;
    return true;
}

static uint64_t rng_next(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* One timed ps_score_tokens of tokens[0, n) (CPU or wall seconds), with cache (NULL: none);
 * *bytes = the cache's bytes after it. Negative on failure (err says why). */
static double timed_score(ps_session *s, const int32_t *tokens, int32_t n, int32_t k,
                          ps_prefix_cache *cache, bool cpu_clock, int64_t *bytes,
                          ps_error *err) {
    ps_score_params p = ps_score_default_params();
    p.k = k;
    p.cache = cache;
    ps_score_result *res = NULL;
    ps_prof_use_cpu_clock(cpu_clock);
    const double c0 = ps_prof_clock_ns() * 1e-9;
    ps_status st = ps_score_tokens(s, tokens, n, &p, &res, err);
    const double secs = ps_prof_clock_ns() * 1e-9 - c0;
    ps_score_result_free(res);
    if (cache) {
        ps_prefix_cache_stats cs;
        ps_prefix_cache_get_stats(cache, &cs);
        *bytes = cs.bytes;
    }
    return st == PS_OK ? secs : -1;
}

static int cmp_d(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The median of x[0 .. n) (n >= 1; sorts x in place). */
static double median(double *x, int32_t n) {
    qsort(x, (size_t)n, sizeof *x, cmp_d);
    return x[n / 2];
}

/* --cache-pairs, one row: n pairs of runs of a prompt of len ids without and with the prefix
 * cache, alternating off / on; *off / *on = their median seconds. fresh (warm = false): a new,
 * empty cache for every "on" run, the same prompt each time, all kept to the end, and *peak =
 * the most bytes they held, *one = the bytes of one. warm: one cache for the row with a budget
 * of one prompt's blocks (*one, from the fresh runs before), filled by a first prompt; every
 * pair then scores a prompt no cache has seen (its first id changed, so every block is new),
 * and the "on" run evicts the blocks of the prompt before it to make room: a long-running
 * server's steady state. */
static ps_status cache_pairs_row(const ps_model *model, ps_session *s, const int32_t *tokens,
                                 int32_t len, int32_t k, int32_t n, bool warm, bool cpu_clock,
                                 double *peak, double *one, double *off_med, double *on_med,
                                 ps_error *err) {
    ps_model_info mi;
    ps_model_get_info(model, &mi);
    const int32_t n_vocab = mi.n_vocab;
    double *off = ps_malloc(sizeof(double) * 2 * (size_t)n);
    int32_t *var = ps_malloc(sizeof(int32_t) * (size_t)len);
    /* fresh: every run's cache is kept until the end: freeing ~4 MB blocks between runs
     * gives memory back to the system, and in a VM that reports freed pages to its host the
     * next run was seen to slow down while the host took them */
    ps_prefix_cache **fresh = warm ? NULL : ps_calloc((size_t)n, sizeof *fresh);
    if (!off || !var || (!warm && !fresh)) {
        ps_free(off);
        ps_free(var);
        ps_free(fresh);
        return ps_fail(err, PS_ERR_NOMEM, -1, "out of memory");
    }
    double *on = off + n;
    double held = 0; /* fresh: the bytes of the caches kept */
    memcpy(var, tokens, sizeof(int32_t) * (size_t)len);
    ps_prefix_cache_params cp = ps_prefix_cache_default_params();
    cp.budget_bytes = warm ? (int64_t)*one : (int64_t)1 << 40; /* fresh: every block fits */
    ps_prefix_cache *cache = NULL;
    ps_status st = PS_OK;
    int64_t bytes = 0;
    if (warm) {
        st = ps_prefix_cache_create(model, &cp, &cache, err);
        var[0] = (tokens[0] + 1) % n_vocab;
        if (st == PS_OK && timed_score(s, var, len, k, cache, cpu_clock, &bytes, err) < 0)
            st = err->code;
    }
    for (int32_t i = 0; i < n && st == PS_OK; i++) {
        if (warm) var[0] = (int32_t)(((int64_t)tokens[0] + 2 + i) % n_vocab);
        else st = ps_prefix_cache_create(model, &cp, &cache, err);
        if (st == PS_OK && ((off[i] = timed_score(s, var, len, k, NULL, cpu_clock, &bytes,
                                                  err)) < 0 ||
                            (on[i] = timed_score(s, var, len, k, cache, cpu_clock, &bytes,
                                                 err)) < 0))
            st = err->code;
        if (!warm) {
            fresh[i] = cache;
            cache = NULL;
            held += (double)bytes;
            *one = (double)bytes;
            *peak = PS_MAX(*peak, held);
        }
    }
    ps_prefix_cache_free(cache);
    for (int32_t i = 0; fresh && i < n; i++) ps_prefix_cache_free(fresh[i]);
    ps_free(fresh);
    if (st == PS_OK) {
        *off_med = median(off, n);
        *on_med = median(on, n);
    }
    ps_free(off);
    ps_free(var);
    return st;
}

/* --kv-pairs, one row: n pairs of runs of a prompt of len ids on the base session and on the
 * row's session s, alternating base / s; *base_med / *type_med = their median seconds, *ratio
 * the median of the pairs' type / base ratios (a pair's two runs are close in time, so a
 * machine whose speed drifts moves both). */
static ps_status kv_pairs_row(ps_session *s, ps_session *base, const int32_t *tokens,
                              int32_t len, int32_t k, int32_t n, bool cpu_clock, double *base_med,
                              double *type_med, double *ratio, ps_error *err) {
    double *t = ps_malloc(sizeof(double) * 3 * (size_t)n);
    if (!t) return ps_fail(err, PS_ERR_NOMEM, -1, "out of memory");
    double *b = t + n, *r = b + n;
    int64_t bytes = 0;
    ps_status st = PS_OK;
    for (int32_t i = 0; i < n && st == PS_OK; i++) {
        if ((b[i] = timed_score(base, tokens, len, k, NULL, cpu_clock, &bytes, err)) < 0 ||
            (t[i] = timed_score(s, tokens, len, k, NULL, cpu_clock, &bytes, err)) < 0)
            st = err->code;
        else r[i] = t[i] / b[i];
    }
    if (st == PS_OK) {
        *base_med = median(b, n);
        *type_med = median(t, n);
        *ratio = median(r, n);
    }
    ps_free(t);
    return st;
}

/* --thread-pairs, one length: n pairs of runs of a prompt of len ids on session a (threads
 * ta, pool pa) and session b (tb, pb), alternating a / b, each on the rows' clock (CPU time for
 * one thread, wall time for more); *a_med / *b_med = their median seconds, *speedup the median
 * of the pairs' a / b ratios (a pair's two runs are close in time, so a drifting machine moves
 * both). *peak_speedup: the same for the vdpbf16ps peak (no memory traffic, no barriers),
 * measured for 0.1 s on each pool just before its run: what the machine itself gave the second
 * count at those moments; 0 without AVX-512 BF16. */
static ps_status thread_pairs_row(ps_session *a, ps_pool *pa, int32_t ta, ps_session *b,
                                  ps_pool *pb, int32_t tb, const int32_t *tokens, int32_t len,
                                  int32_t k, int32_t n, double *a_med, double *b_med,
                                  double *speedup, double *peak_speedup, ps_error *err) {
    double *t = ps_malloc(sizeof(double) * 4 * (size_t)n);
    if (!t) return ps_fail(err, PS_ERR_NOMEM, -1, "out of memory");
    double *u = t + n, *r = u + n, *pr = r + n;
    int64_t bytes = 0;
    ps_status st = PS_OK;
    for (int32_t i = 0; i < n; i++) {
        const double peak_a = ps_bf16_peak_gflops(pa, 0.1, false);
        if ((t[i] = timed_score(a, tokens, len, k, NULL, false, &bytes, err)) < 0) {
            st = err->code;
            break;
        }
        const double peak_b = ps_bf16_peak_gflops(pb, 0.1, false);
        if ((u[i] = timed_score(b, tokens, len, k, NULL, false, &bytes, err)) < 0) {
            st = err->code;
            break;
        }
        r[i] = t[i] / u[i];
        pr[i] = peak_a > 0 ? peak_b / peak_a : 0;
    }
    if (st == PS_OK) {
        *a_med = median(t, n);
        *b_med = median(u, n);
        *speedup = median(r, n);
        *peak_speedup = median(pr, n);
    }
    ps_free(t);
    return st;
}

/* The options of one run. */
typedef struct {
    ps_cli_model_opts o;
    int_list tl, ll;
    int32_t k, runs, cache_pairs, kv_pairs, thread_pairs;
    ps_kv_type kv_base;
    bool json;
    bool cpu_time; /* --cpu-time: every row on the process's CPU time instead of the wall clock */
} bench_opts;

/* The loaded model and what every row shares. */
typedef struct {
    ps_model *model;
    ps_model_info info;
    ps_model_costs costs;
    int32_t max_len;
    int32_t *tokens; /* max_len pseudo-random ids */
    double kv_bytes, kv_base_bytes, logit_bytes, budget;
    double pair_bytes; /* --thread-pairs: the second session's KV cache and logits */
    double cache_peak; /* the largest cache the --cache-pairs runs held (bytes) */
} bench_ctx;

/* One timed pass: seconds (CPU or wall), wall seconds, the process's CPU seconds (every
 * thread's) and the profile's totals. */
typedef struct {
    double secs, wall, cpu;
    uint64_t ns[PS_PROF_N];
} bench_pass;

/* Parses argv into *b; -1 to go on, else the exit status. */
static int bench_parse(int argc, char **argv, bench_opts *b) {
    const ps_cli_opt model_opts[] = {
        PS_CLI_OPTS_MODEL(&b->o),
        PS_CLI_OPT_CTX(&b->o, "context length (default: the model's); every length must fit"),
        {"-t, --threads", "LIST", "thread counts, comma separated (default 1,2; -t 4 is 4 alone)",
         PS_CLI_FN, &b->tl, 0, 0, opt_list},
        PS_CLI_OPT_ACT(&b->o),
        PS_CLI_OPT_KV_TYPE(&b->o),
        PS_CLI_OPT_REPACK(&b->o),
        {0}};
    const ps_cli_opt bench_opts_[] = {
        {"-l, --lengths", "LIST", "prompt lengths in tokens (default 256,1024,4096)", PS_CLI_FN,
         &b->ll, 0, 0, opt_list},
        {"-k, --logprobs, --top-k", "N", "top-K alternatives per position (default 20)",
         PS_CLI_I32, &b->k, 0, 1000},
        {"-r, --runs", "N", "timed runs after the cold pass; a row is their median (default 3)",
         PS_CLI_I32, &b->runs, 1, 1000},
        {"--json", NULL, "one JSON object per line", PS_CLI_FLAG, &b->json},
        {"--cpu-time", NULL, "time every row by the process's CPU time (all threads) instead\n"
         "of the wall clock (the default)", PS_CLI_FLAG, &b->cpu_time},
        {"--cache-pairs", "N", "after each row, N alternating pairs of the same prompt without\n"
         "and with a fresh prefix cache, then with a warm full one: median\n"
         "seconds and their ratio (default 0)",
         PS_CLI_I32, &b->cache_pairs, 0, 1000},
        {"--kv-pairs", "N", "after each row, N alternating pairs of the same prompt on a\n"
         "session of --kv-base and on the row's (--kv-type): median seconds\n"
         "and the median of the pairs' ratios (default 0)",
         PS_CLI_I32, &b->kv_pairs, 0, 1000},
        {"--kv-base", "TYPE", "the other cache type of --kv-pairs (default f32)", PS_CLI_FN,
         &b->kv_base, 0, 0, ps_cli_opt_kv_type},
        {"--thread-pairs", "N", "after the rows, N alternating pairs of the first -t count and\n"
         "each later one on the same prompt, per length: median seconds\n"
         "and the median of the pairs' speed-ups (default 0)",
         PS_CLI_I32, &b->thread_pairs, 0, 1000},
        {0}};
    const ps_cli_opt *const tables[] = {model_opts, bench_opts_, NULL};
    const ps_cli_cmd c = {"bench", "-m MODEL.gguf [options]", BENCH_ABOUT, tables};
    return ps_cli_parse(&c, argc, argv);
}

/* Loads the model, keeps the lengths that fit, sizes the memory budget and draws the prompt.
 * 0 or the exit status. */
static int bench_load(bench_opts *b, bench_ctx *x) {
    const char *path;
    char *owned = NULL;
    int mrc = ps_cli_model_path("bench", &b->o, &path, &owned);
    if (mrc) return mrc;
    ps_error err;
    ps_model_params mp = ps_model_default_params();
    mp.n_ctx = b->o.n_ctx;
    mp.no_repack = b->o.no_repack;
    if (ps_model_load(path, &mp, &x->model, &err) != PS_OK) {
        fprintf(stderr, "promptscore bench: %s: %s\n", path, err.message);
        ps_free(owned);
        return 1;
    }
    ps_free(owned);
    ps_model_get_info(x->model, &x->info);
    ps_model_get_costs(x->model, &x->costs);
    const ps_model_info *mi = &x->info;
    int_list *ll = &b->ll;
    if (!ll->given) { /* the default lengths that fit */
        int m = 0;
        for (int i = 0; i < ll->n; i++)
            if (ll->v[i] <= mi->n_ctx) ll->v[m++] = ll->v[i];
        if (m < ll->n)
            fprintf(stderr, "promptscore bench: note: lengths over the context (%d) left out\n",
                    mi->n_ctx);
        ll->n = m;
        if (m == 0) ll->v[ll->n++] = mi->n_ctx;
    }
    x->max_len = 0;
    for (int i = 0; i < ll->n; i++) x->max_len = PS_MAX(x->max_len, ll->v[i]);
    if (x->max_len > mi->n_ctx) {
        fprintf(stderr, "promptscore bench: --lengths %d is longer than the context, %d "
                        "tokens (%s; -c N to change it)\n", x->max_len, mi->n_ctx,
                b->o.n_ctx ? "-c" : "the model's");
        return 2;
    }
    const double kv_elems = 2.0 * mi->n_head_kv * (double)mi->head_dim *
                            ps_model_kv_positions(x->model, x->max_len);
    x->kv_bytes = kv_elems * (double)ps_kv_elt(b->o.kv_type);
    /* --kv-pairs: the second session's cache */
    x->kv_base_bytes = b->kv_pairs > 0 ? kv_elems * (double)ps_kv_elt(b->kv_base) : 0.0;
    x->logit_bytes = 2.0 * PS_CHUNK * (double)mi->n_vocab * 4;
    /* --thread-pairs: two sessions at once, each with its cache and logits */
    x->pair_bytes = b->thread_pairs > 0 ? x->kv_bytes + x->logit_bytes : 0.0;
    /* what a tile copy of BF16 weights adds to the file's pages counts as weights: all of an
     * AMX copy, the padding of a vdpbf16ps copy (it replaces the matrices' pages) */
    x->budget = (double)mi->file_bytes + (double)x->costs.tile_extra + x->kv_bytes +
                x->kv_base_bytes + x->logit_bytes + x->pair_bytes + 64.0 * 1048576;
    x->tokens = ps_malloc(sizeof(int32_t) * (size_t)x->max_len);
    if (!x->tokens) return 1;
    uint64_t r = 0x2545F4914F6CDD1Dull;
    for (int32_t i = 0; i < x->max_len; i++)
        x->tokens[i] = (int32_t)(rng_next(&r) % (uint64_t)mi->n_vocab);
    return 0;
}

/* The lines above the table: the model, the kernels' paths. */
static void bench_banner(const bench_opts *b, const bench_ctx *x) {
    if (b->json) return;
    const ps_model_info *mi = &x->info;
    const ps_act act = b->o.act;
    if (mi->n_expert > 0)
        printf("experts: %d per layer, %d per token, FFN %d; route = router matmul, softmax, "
               "top-k, gather, weighted sum; experts = the expert matmuls and SwiGLU (their "
               "matmul time is inside matmul too)\n",
               mi->n_expert, mi->n_expert_used, x->costs.n_ff_exp);
    printf("model %s: %s, %d layers, %d wide, vocab %d, %s weights, %.0f MB; k = %d, "
           "chunk %d, isa %s, activations %s (avx512bf16 %s, avx512vnni %s: %s), KV cache %s\n",
           mi->file, mi->arch, mi->n_layer, mi->n_embd, mi->n_vocab,
           ps_ggml_type_name(x->costs.wq_type), mi->file_bytes / 1048576.0, b->k, PS_CHUNK,
           ps_isa_name(ps_isa_best()), ps_act_name(act),
           ps_cpu_has_avx512bf16() ? "yes" : "no", ps_cpu_has_avx512vnni() ? "yes" : "no",
           act == PS_ACT_F32 ? "not used, every weight type is widened to f32"
                             : "see matmul paths", ps_kv_type_name(b->o.kv_type));
    char paths[384];
    ps_cli_paths(paths, sizeof paths);
    printf("matmul paths: %s%s\n", act == PS_ACT_F32 ? "(not used: --act f32) " : "", paths);
    if (mi->tile_bytes > 0)
        printf("tile copy of the weights (%s): %.1f MiB, made at load in %.2f s "
               "(--no-repack: none)\n", x->costs.tile_amx ? "amx"
                                 : "vdpbf16ps, q4_k / q6_k experts",
               (double)mi->tile_bytes / 1048576.0, mi->tile_seconds);
    printf("each row: the median of --runs %d after the cold pass of a fresh session, which is "
           "on the line above it; seconds and tok/s on %s\n", b->runs,
           b->cpu_time ? "the process's CPU time, all threads (--cpu-time)" : "the wall clock");
}

/* One profiled ps_score_tokens of the first len ids. */
static ps_status bench_pass_run(ps_session *s, const bench_ctx *x, int32_t len, int32_t k,
                                bool cpu_clock, bench_pass *out, ps_error *err) {
    ps_score_params p = ps_score_default_params();
    p.k = k;
    ps_score_result *res = NULL;
    ps_prof_reset();
    ps_prof_use_cpu_clock(cpu_clock);
    ps_prof_enable(true);
    const double t0 = ps_now_s(), c0 = ps_prof_clock_ns() * 1e-9, p0 = ps_cpu_s();
    ps_status st = ps_score_tokens(s, x->tokens, len, &p, &res, err);
    out->cpu = ps_cpu_s() - p0;
    out->wall = ps_now_s() - t0;
    out->secs = ps_prof_clock_ns() * 1e-9 - c0;
    ps_prof_enable(false);
    ps_prof_read(out->ns);
    ps_score_result_free(res);
    return st;
}

/* A row's measurement: the cold pass into *cold, then runs passes; *med = the median one. */
static ps_status bench_measure(ps_session *s, const bench_opts *b, const bench_ctx *x,
                               int32_t len, bool cpu_clock, bench_pass *cold, bench_pass *med,
                               ps_error *err) {
    bench_pass *runs = ps_malloc(sizeof *runs * (size_t)b->runs);
    double *secs = ps_malloc(sizeof *secs * (size_t)b->runs);
    ps_status st = runs && secs ? PS_OK : ps_fail(err, PS_ERR_NOMEM, -1, "out of memory");
    if (st == PS_OK) st = bench_pass_run(s, x, len, b->k, cpu_clock, cold, err);
    for (int32_t i = 0; i < b->runs && st == PS_OK; i++) {
        st = bench_pass_run(s, x, len, b->k, cpu_clock, &runs[i], err);
        secs[i] = runs[i].secs;
    }
    if (st == PS_OK) {
        const double m = median(secs, b->runs);
        for (int32_t i = 0; i < b->runs; i++)
            if (runs[i].secs == m) {
                *med = runs[i];
                break;
            }
    }
    ps_free(runs);
    ps_free(secs);
    return st;
}

/* The cold pass's line and the row (the median run) with its time split. */
static void bench_print_row(const bench_opts *b, const bench_ctx *x, const ps_session *s,
                            int32_t threads, int32_t len, bool cpu_clock, const bench_pass *cold,
                            const bench_pass *r, double peak, double i8_peak) {
    const char *clock = cpu_clock ? "cpu" : "wall";
    const char *clock_words = cpu_clock ? "CPU time" : "wall time";
    if (b->json)
        printf("{\"threads\": %d, \"tokens\": %d, \"k\": %d, \"pass\": \"cold\", \"seconds\": "
               "%.6f, \"clock\": \"%s\", \"wall_seconds\": %.6f, \"tokens_per_s\": %.1f}\n",
               threads, len, b->k, cold->secs, clock, cold->wall, len / cold->secs);
    else
        printf("%7d %7d  cold: %.3f s, %.1f tok/s, the first pass of a fresh session (%s; wall "
               "%.3f s)\n", threads, len, cold->secs, len / cold->secs, clock_words, cold->wall);
    const double secs = r->secs;
    const double mm = r->ns[PS_PROF_MATMUL] * 1e-9, att = r->ns[PS_PROF_ATTENTION] * 1e-9,
                 fwd = r->ns[PS_PROF_FORWARD] * 1e-9, dn = r->ns[PS_PROF_DELTANET] * 1e-9;
    const double topk = PS_MAX(secs - fwd, 0.0), rest = PS_MAX(fwd - mm - att - dn, 0.0);
    const double route = r->ns[PS_PROF_MOE_ROUTE] * 1e-9,
                 experts = r->ns[PS_PROF_MOE_EXPERTS] * 1e-9;
    const bool moe = x->info.n_expert > 0;
    char moe_cols[64] = "";
    if (moe && b->json)
        snprintf(moe_cols, sizeof moe_cols, ", \"route_share\": %.3f, \"experts_share\": %.3f",
                 route / secs, experts / secs);
    else if (moe)
        snprintf(moe_cols, sizeof moe_cols, " %6.1f%% %6.1f%%", 100 * route / secs,
                 100 * experts / secs);
    const double gf = mm > 0 ? 2.0 * x->costs.matmul_weights * len / mm * 1e-9 : 0;
    if (b->json)
        printf("{\"threads\": %d, \"tokens\": %d, \"k\": %d, \"pass\": \"steady\", \"runs\": %d, "
               "\"seconds\": %.6f, \"clock\": \"%s\", \"wall_seconds\": %.6f, \"cpu_seconds\": "
               "%.6f, \"tokens_per_s\": %.1f, \"matmul_share\": %.3f, \"attention_share\": %.3f, \"deltanet_share\": "
               "%.3f, \"topk_share\": %.3f, \"rest_share\": %.3f, \"matmul_gflops\": %.1f, "
               "\"isa\": \"%s\", \"act\": \"%s\", \"kv_type\": \"%s\"%s, "
               "\"bf16_peak_gflops\": %.1f, \"bf16_peak_share\": %.3f, \"i8_peak_gops\": %.1f, "
               "\"i8_peak_share\": %.3f}\n",
               threads, len, b->k, b->runs, secs, clock, r->wall, r->cpu, len / secs, mm / secs,
               att / secs, dn / secs, topk / secs, rest / secs, gf, ps_isa_name(s->isa),
               ps_act_name(b->o.act), ps_kv_type_name(b->o.kv_type), moe_cols, peak,
               peak > 0 ? gf / peak : 0.0, i8_peak, i8_peak > 0 ? gf / i8_peak : 0.0);
    else
        printf("%7d %7d %9.3f %9.1f %6.1f%% %6.1f%% %6.1f%% %6.1f%% %6.1f%% %9.1f%s  (median of "
               "%d, %s; wall %.3f s)\n",
               threads, len, secs, len / secs, 100 * mm / secs, 100 * att / secs,
               100 * dn / secs, 100 * topk / secs, 100 * rest / secs, gf, moe_cols, b->runs,
               clock_words, r->wall);
    if (!b->json && peak > 0)
        printf("%7d %7d  BF16 matmuls %.1f GFLOP/s = %.0f%% of the vdpbf16ps peak %.1f GFLOP/s "
               "(%d thread%s, measured after the row, %s)\n", threads, len, gf,
               100 * gf / peak, peak, threads, threads > 1 ? "s" : "", clock_words);
    if (!b->json && i8_peak > 0)
        printf("%7d %7d  %s matmuls %.1f GOP/s = %.0f%% of the vpdpbusd int8 peak %.1f GOP/s "
               "(%d thread%s, measured after the row, %s)\n", threads, len,
               ps_ggml_type_name(x->costs.wq_type), gf, 100 * gf / i8_peak, i8_peak, threads,
               threads > 1 ? "s" : "", clock_words);
    fflush(stdout);
}

/* --cache-pairs and --kv-pairs after a row: 0 or 1 (the message printed). */
static int bench_pairs(ps_session *s, ps_session *sb, const bench_opts *b, bench_ctx *x,
                       int32_t threads, int32_t len, bool cpu_clock) {
    ps_error err;
    const char *clock = cpu_clock ? "cpu" : "wall";
    const char *clock_words = cpu_clock ? "CPU time" : "wall time";
    double one_prompt = 0; /* bytes of one prompt's blocks */
    for (int warm = 0; warm < 2 && b->cache_pairs > 0; warm++) {
        double mo = 0, mc = 0;
        if (cache_pairs_row(x->model, s, x->tokens, len, b->k, b->cache_pairs, warm, cpu_clock,
                            &x->cache_peak, &one_prompt, &mo, &mc, &err) != PS_OK) {
            fprintf(stderr, "promptscore bench: --cache-pairs: %s\n", err.message);
            return 1;
        }
        const char *kind = warm ? "warm" : "fresh";
        if (b->json)
            printf("{\"threads\": %d, \"tokens\": %d, \"cache_pairs\": %d, \"cache\": \"%s\", "
                   "\"off_seconds\": %.9f, \"on_seconds\": %.9f, \"on_over_off\": %.4f, "
                   "\"clock\": \"%s\"}\n", threads, len, b->cache_pairs, kind, mo, mc, mc / mo,
                   clock);
        else
            printf("%7d %7d  prefix cache (%s) on / off: %.6f s / %.6f s = %.4f (medians of %d "
                   "alternating pairs, %s)\n", threads, len, kind, mc, mo, mc / mo,
                   b->cache_pairs, clock_words);
        fflush(stdout);
    }
    if (sb) {
        double mb = 0, mt = 0, ratio = 0;
        if (kv_pairs_row(s, sb, x->tokens, len, b->k, b->kv_pairs, cpu_clock, &mb, &mt, &ratio,
                         &err) != PS_OK) {
            fprintf(stderr, "promptscore bench: --kv-pairs: %s\n", err.message);
            return 1;
        }
        const char *kt = ps_kv_type_name(b->o.kv_type), *kb = ps_kv_type_name(b->kv_base);
        if (b->json)
            printf("{\"threads\": %d, \"tokens\": %d, \"kv_pairs\": %d, \"kv_type\": \"%s\", "
                   "\"kv_base\": \"%s\", \"type_seconds\": %.9f, \"base_seconds\": %.9f, "
                   "\"type_over_base\": %.4f, \"clock\": \"%s\"}\n", threads, len, b->kv_pairs,
                   kt, kb, mt, mb, ratio, clock);
        else
            printf("%7d %7d  kv %s / %s: %.6f s / %.6f s; per pair %.4f (%.2fx the speed; "
                   "medians of %d alternating pairs, %s)\n", threads, len, kt, kb, mt, mb, ratio,
                   1.0 / ratio, b->kv_pairs, clock_words);
        fflush(stdout);
    }
    return 0;
}

/* The parameters of a row's session: len positions on pool, the run's --act and --kv-type. */
static ps_session_params row_session_params(const bench_opts *b, ps_pool *pool, int32_t len) {
    ps_session_params sp = ps_session_default_params();
    sp.n_ctx = len;
    sp.pool = pool;
    sp.act = b->o.act;
    sp.kv_type = b->o.kv_type;
    return sp;
}

/* One (threads, length) row on fresh sessions: 0 or 1. */
static int bench_row(const bench_opts *b, bench_ctx *x, ps_pool *pool, int32_t threads,
                     int32_t len, bool header) {
    ps_error err;
    ps_session_params sp = row_session_params(b, pool, len);
    ps_session *s = NULL, *sb = NULL; /* sb, --kv-pairs: the same but for its cache type */
    if (ps_session_create(x->model, &sp, &s, &err) != PS_OK ||
        (b->kv_pairs > 0 &&
         (sp.kv_type = b->kv_base, ps_session_create(x->model, &sp, &sb, &err) != PS_OK))) {
        fprintf(stderr, "promptscore bench: session: %s\n", err.message);
        ps_session_free(s);
        return 1;
    }
    /* the one clock of every row (the header names it) */
    const bool cpu_clock = b->cpu_time;
    if (header && !b->json)
        printf("%7s %7s %9s %9s %7s %7s %7s %7s %7s %9s%s\n", "threads", "tokens", "seconds",
               "tok/s", "matmul", "attn", "dnet", "topk", "rest", "mm GF/s",
               x->info.n_expert > 0 ? "   route experts" : "");
    bench_pass cold = {0}, med = {0};
    ps_status st = bench_measure(s, b, x, len, cpu_clock, &cold, &med, &err);
    if (isatty(STDERR_FILENO)) fputs("\r\033[K", stderr);
    int rc = 0;
    if (st != PS_OK) {
        fprintf(stderr, "promptscore bench: scoring %d tokens: %s\n", len, err.message);
        rc = 1;
    } else {
        /* BF16 weights on the vdpbf16ps kernel: the machine's peak, measured now on the
         * row's threads (the clock of a shared machine moves), next to the matmul figure */
        const bool amx = ps_cpu_has_amx() && ps_isa_env_amx() != 0;
        const double peak = !strcmp(x->info.weight_type, "BF16") &&
                                    b->o.act == PS_ACT_NATIVE && !amx
                                ? ps_bf16_peak_gflops(pool, 0.3, cpu_clock)
                                : 0;
        /* block types on the integer kernels (vpdpbusd): the int8 peak beside them */
        const uint32_t wt = x->costs.wq_type;
        const bool int_kernel = wt != PS_GGML_F32 && wt != PS_GGML_F16 && wt != PS_GGML_BF16 &&
                                b->o.act == PS_ACT_NATIVE && !amx;
        const double i8_peak = int_kernel ? ps_i8_peak_gops(pool, 0.3, cpu_clock) : 0;
        bench_print_row(b, x, s, threads, len, cpu_clock, &cold, &med, peak, i8_peak);
        /* the base session's first pass is its warm-up */
        ps_score_result *warm = NULL;
        ps_score_params wp = ps_score_default_params();
        wp.k = b->k;
        if (sb && ps_score_tokens(sb, x->tokens, len, &wp, &warm, &err) == PS_OK)
            ps_score_result_free(warm);
        rc = bench_pairs(s, sb, b, x, threads, len, cpu_clock);
    }
    ps_session_free(sb);
    ps_session_free(s);
    return rc;
}

/* A session of len positions for --thread-pairs, warmed by one pass; NULL after a message. */
static ps_session *pair_session(const bench_opts *b, const bench_ctx *x, ps_pool *pool,
                                int32_t len) {
    ps_error err;
    const ps_session_params sp = row_session_params(b, pool, len);
    ps_session *s = NULL;
    int64_t bytes = 0;
    if (ps_session_create(x->model, &sp, &s, &err) != PS_OK ||
        timed_score(s, x->tokens, len, b->k, NULL, false, &bytes, &err) < 0) {
        fprintf(stderr, "promptscore bench: --thread-pairs: %s\n", err.message);
        ps_session_free(s);
        return NULL;
    }
    return s;
}

/* --thread-pairs after the rows: the first thread count against each later one, per length.
 * 0 or 1 (the message printed). */
static int bench_thread_pairs(const bench_opts *b, const bench_ctx *x) {
    const int32_t ta = b->tl.v[0];
    ps_pool *pa = NULL, *pb = NULL;
    int rc = ta > 1 && ps_pool_create(ta, &pa) != PS_OK;
    if (rc) fprintf(stderr, "promptscore bench: --thread-pairs: cannot start %d threads\n", ta);
    for (int ti = 1; ti < b->tl.n && !rc; ti++) {
        const int32_t tb = b->tl.v[ti];
        if (tb > 1 && ps_pool_create(tb, &pb) != PS_OK) {
            fprintf(stderr, "promptscore bench: --thread-pairs: cannot start %d threads\n", tb);
            rc = 1;
            break;
        }
        for (int li = 0; li < b->ll.n && !rc; li++) {
            const int32_t len = b->ll.v[li];
            ps_session *sa = pair_session(b, x, pa, len), *sb = sa ? pair_session(b, x, pb, len)
                                                                    : NULL;
            ps_error err;
            double ma = 0, mb = 0, sp = 0, pk = 0;
            char peak[96] = "";
            if (!sb) rc = 1;
            else if (thread_pairs_row(sa, pa, ta, sb, pb, tb, x->tokens, len, b->k,
                                      b->thread_pairs, &ma, &mb, &sp, &pk, &err) != PS_OK) {
                fprintf(stderr, "promptscore bench: --thread-pairs: %s\n", err.message);
                rc = 1;
            } else if (b->json)
                printf("{\"thread_pairs\": %d, \"tokens\": %d, \"threads_a\": %d, "
                       "\"threads_b\": %d, \"a_seconds\": %.9f, \"b_seconds\": %.9f, "
                       "\"a_over_b\": %.6g, \"peak_a_over_b\": %.6g, \"a_clock\": \"%s\", "
                       "\"b_clock\": \"%s\"}\n",
                       b->thread_pairs, len, ta, tb, ma, mb, sp, pk, "wall", "wall");
            else {
                if (pk > 0)
                    snprintf(peak, sizeof peak, "; the vdpbf16ps peak's own in the same pairs "
                             "%.2fx", pk);
                printf("%7d %7d  %d over %d thread%s: %.2fx (%.6f s / %.6f s, %s / %s; the "
                       "median of %d alternating pairs' ratios%s)\n", tb, len, tb, ta,
                       ta > 1 ? "s" : "", sp, ma, mb, "wall time", "wall time", b->thread_pairs,
                       peak);
            }
            fflush(stdout);
            ps_session_free(sb);
            ps_session_free(sa);
        }
        ps_pool_free(pb);
        pb = NULL;
    }
    ps_pool_free(pa);
    return rc;
}

/* The closing line: peak RSS against the budget. */
static void bench_print_rss(const bench_opts *b, const bench_ctx *x) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    const double rss = (double)ru.ru_maxrss * 1024.0, mib = 1048576.0;
    const double budget = x->budget + x->cache_peak;
    const ps_model_info *mi = &x->info;
    if (b->json) {
        printf("{\"peak_rss_mb\": %.1f, \"budget_mb\": %.1f, \"weights_mb\": %.1f, "
               "\"tile_copy_mb\": %.1f, \"kv_cache_mb\": %.1f, \"kv_base_cache_mb\": %.1f, "
               "\"logits_mb\": %.1f, \"cache_mb\": %.1f, \"thread_pairs_session_mb\": %.1f, "
               "\"within_budget\": %s}\n",
               rss / mib, budget / mib, mi->file_bytes / mib, x->costs.tile_extra / mib,
               x->kv_bytes / mib, x->kv_base_bytes / mib, x->logit_bytes / mib,
               x->cache_peak / mib, x->pair_bytes / mib, rss <= budget ? "true" : "false");
        return;
    }
    char tiles[64] = "", pc[64] = "", kb[64] = "", tp[80] = "";
    if (x->costs.tile_extra)
        snprintf(tiles, sizeof tiles, " + tile copy %.1f", x->costs.tile_extra / mib);
    if (b->cache_pairs > 0)
        snprintf(pc, sizeof pc, " + prefix cache %.1f", x->cache_peak / mib);
    if (x->kv_base_bytes > 0)
        snprintf(kb, sizeof kb, " + --kv-base's KV cache %.1f", x->kv_base_bytes / mib);
    if (x->pair_bytes > 0)
        snprintf(tp, sizeof tp, " + --thread-pairs' second session %.1f", x->pair_bytes / mib);
    printf("peak RSS %.1f MB; budget %.1f MB = weights %.1f%s + KV cache %.1f%s + 2 chunks of "
           "logits %.1f%s%s + 64 (%s)\n",
           rss / mib, budget / mib, mi->file_bytes / mib, tiles, x->kv_bytes / mib, kb,
           x->logit_bytes / mib, pc, tp, rss <= budget ? "within" : "OVER");
}

int ps_cli_bench(int argc, char **argv) {
    bench_opts b = {.tl = {{1, 2}, 2, false},
                    .ll = {{256, 1024, 4096}, 3, false},
                    .k = 20,
                    .runs = 3,
                    .kv_base = PS_KV_F32};
    int prc = bench_parse(argc, argv, &b);
    if (prc >= 0) return prc;
    if (b.thread_pairs > 0 && b.tl.n < 2) {
        fprintf(stderr, "promptscore bench: --thread-pairs needs two or more thread counts in "
                        "-t (-t 1,2)\n");
        return 2;
    }
    /* a pipe gets every line when it is measured, not at exit */
    setvbuf(stdout, NULL, _IOLBF, 0);
    bench_ctx x = {0};
    int rc = bench_load(&b, &x);
    if (!rc) bench_banner(&b, &x);
    for (int ti = 0; ti < b.tl.n && !rc; ti++) {
        const int32_t threads = b.tl.v[ti];
        ps_pool *pool = NULL;
        if (threads > 1 && ps_pool_create(threads, &pool) != PS_OK) {
            rc = 1;
            break;
        }
        for (int li = 0; li < b.ll.n && !rc; li++) {
            if (isatty(STDERR_FILENO)) {
                fprintf(stderr, "\rbench: %d thread(s), %d tokens (%d/%d)...\033[K", threads,
                        b.ll.v[li], ti * b.ll.n + li + 1, b.tl.n * b.ll.n);
                fflush(stderr);
            }
            rc = bench_row(&b, &x, pool, threads, b.ll.v[li], li == 0);
        }
        ps_pool_free(pool);
    }
    if (!rc && b.thread_pairs > 0) rc = bench_thread_pairs(&b, &x); /* -t has two or more */
    if (!rc) bench_print_rss(&b, &x);
    ps_free(x.tokens);
    ps_model_free(x.model);
    return rc;
}
