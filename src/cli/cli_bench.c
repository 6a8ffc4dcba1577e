/*
 * cli_bench.c — `promptscore bench`: scoring throughput of one model and where the time goes.
 *
 * For every thread count (default 1 and 2) and prompt length (default 256, 1024, 4096 tokens)
 * it scores a deterministic pseudo-random prompt with ps_score_tokens (top-K = 20 by default,
 * chunks of 256) and prints tokens/s and the share of the wall time spent in the matmuls, the
 * attention, the top-K kernel (+ result bookkeeping: the score time outside the forward pass)
 * and the rest of the forward pass (norms, RoPE, SwiGLU, residuals, embedding rows), taken from
 * the prof.h timers, plus the GFLOP/s the matmuls reached (2 x weights x tokens / matmul time;
 * with experts the weights of the router and of n_expert_used experts per layer). Models with
 * experts also get the share of the routing (router matmul, softmax, top-k, grouping, gather,
 * weighted sum) and of the expert matmuls with their SwiGLU (also counted in matmul).
 * With one thread the seconds, tokens/s and shares come from the process's CPU time (so a
 * shared, busy machine disturbs them less; the wall time is printed too), with more threads
 * from the wall clock. At the end: the process's peak RSS next to the budget
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
 * The kernels' agreement with their references on a model's own matrices is a test
 * (tests/test_model_kernels.c), not part of this command, which only measures.
 * --json prints one JSON object per line instead of the table.
 */
#include "run/attention.h"
#include "cli/cli.h"
#include "base/impl.h"
#include "run/session.h"
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

/* Weights that go through ps_matmul per token (every layer matrix and the output; with
 * experts the router and n_expert_used experts' three matrices). */
static double matmul_weights(const ps_model *m) {
    double sum = (double)m->w.output.n_in * (double)m->w.output.n_out;
    for (int32_t l = 0; l < m->hp.n_layer; l++) {
        const ps_layer *L = &m->w.layers[l];
        const ps_mat *mats[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down,
                                &L->gate_inp, &L->wqkv,    &L->wz,     &L->w_beta,
                                &L->w_alpha, &L->ssm_out, &L->gate_shexp, &L->up_shexp,
                                &L->down_shexp};
        for (size_t i = 0; i < PS_ARRAY_LEN(mats); i++)
            sum += (double)mats[i]->n_in * (double)mats[i]->n_out;
        const ps_mat3 *exps[] = {&L->gate_exps, &L->up_exps, &L->down_exps};
        for (size_t i = 0; i < PS_ARRAY_LEN(exps); i++)
            sum += (double)m->hp.n_expert_used * (double)exps[i]->m.n_in *
                   (double)exps[i]->m.n_out;
    }
    return sum;
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
static ps_status cache_pairs_row(ps_session *s, const int32_t *tokens, int32_t len, int32_t k,
                                 int32_t n, bool warm, bool cpu_clock, double *peak,
                                 double *one, double *off_med, double *on_med, ps_error *err) {
    const ps_model *model = s->model;
    const int32_t n_vocab = model->hp.n_vocab;
    double *off = ps_malloc(sizeof(double) * 2 * (size_t)n);
    int32_t *var = ps_malloc(sizeof(int32_t) * (size_t)len);
    /* fresh: every run's cache is kept until the end: freeing ~4 MB blocks between runs
     * gives memory back to the system, and in a VM that reports freed pages to its host the
     * next run was seen to slow down by up to 2x while the host took them */
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
        st = ps_prefix_cache_create(s->model, &cp, &cache, err);
        var[0] = (tokens[0] + 1) % n_vocab;
        if (st == PS_OK && timed_score(s, var, len, k, cache, cpu_clock, &bytes, err) < 0)
            st = err->code;
    }
    for (int32_t i = 0; i < n && st == PS_OK; i++) {
        if (warm) var[0] = (int32_t)(((int64_t)tokens[0] + 2 + i) % n_vocab);
        else st = ps_prefix_cache_create(s->model, &cp, &cache, err);
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

int ps_cli_bench(int argc, char **argv) {
    ps_cli_model_opts o = {0};
    int_list tl = {{1, 2}, 2, false}, ll = {{256, 1024, 4096}, 3, false};
    int32_t k = 20, cache_pairs = 0, kv_pairs = 0;
    ps_kv_type kv_base = PS_KV_F32;
    bool json = false;
    double cache_peak = 0; /* the largest cache the --cache-pairs runs held (bytes) */
    const ps_cli_opt model_opts[] = {
        PS_CLI_OPTS_MODEL(&o),
        PS_CLI_OPT_CTX(&o, "context length (default: the model's); every length must fit"),
        {"-t, --threads", "LIST", "thread counts, comma separated (default 1,2; -t 4 is 4 alone)",
         PS_CLI_FN, &tl, 0, 0, opt_list},
        PS_CLI_OPT_ACT(&o),
        PS_CLI_OPT_KV_TYPE(&o),
        PS_CLI_OPT_REPACK(&o),
        {0}};
    const ps_cli_opt bench_opts[] = {
        {"-l, --lengths", "LIST", "prompt lengths in tokens (default 256,1024,4096)", PS_CLI_FN,
         &ll, 0, 0, opt_list},
        {"-k, --logprobs, --top-k", "N", "top-K alternatives per position (default 20)",
         PS_CLI_I32, &k, 0, 1000},
        {"--json", NULL, "one JSON object per line", PS_CLI_FLAG, &json},
        {"--cache-pairs", "N", "after each row, N alternating pairs of the same prompt without\n"
         "and with a fresh prefix cache, then with a warm full one: median\n"
         "seconds and their ratio (default 0)",
         PS_CLI_I32, &cache_pairs, 0, 1000},
        {"--kv-pairs", "N", "after each row, N alternating pairs of the same prompt on a\n"
         "session of --kv-base and on the row's (--kv-type): median seconds\n"
         "and the median of the pairs' ratios (default 0)",
         PS_CLI_I32, &kv_pairs, 0, 1000},
        {"--kv-base", "TYPE", "the other cache type of --kv-pairs (default f32)", PS_CLI_FN,
         &kv_base, 0, 0, ps_cli_opt_kv_type},
        {0}};
    const ps_cli_opt *const tables[] = {model_opts, bench_opts, NULL};
    const ps_cli_cmd c = {"bench", "-m MODEL.gguf [options]", BENCH_ABOUT, tables};
    int prc = ps_cli_parse(&c, argc, argv);
    if (prc >= 0) return prc;
    /* a pipe gets every line when it is measured, not at exit */
    setvbuf(stdout, NULL, _IOLBF, 0);
    const int32_t *threads = tl.v, *lengths = ll.v;
    const int n_threads = tl.n;
    const ps_act act = o.act;

    const char *path;
    char *owned = NULL;
    int mrc = ps_cli_model_path("bench", &o, &path, &owned);
    if (mrc) return mrc;
    ps_error err;
    ps_model *model = NULL;
    ps_model_params mp = ps_model_default_params();
    mp.n_ctx = o.n_ctx;
    mp.no_repack = o.no_repack;
    if (ps_model_load(path, &mp, &model, &err) != PS_OK) {
        fprintf(stderr, "promptscore bench: %s: %s\n", path, err.message);
        ps_free(owned);
        return 1;
    }
    ps_free(owned);
    path = NULL;
    int32_t max_len = 0;
    {
        ps_model_info mi;
        ps_model_get_info(model, &mi);
        if (!ll.given) { /* the default lengths that fit */
            int m = 0;
            for (int i = 0; i < ll.n; i++)
                if (ll.v[i] <= mi.n_ctx) ll.v[m++] = ll.v[i];
            if (m < ll.n)
                fprintf(stderr, "promptscore bench: note: lengths over the context (%d) left out\n",
                        mi.n_ctx);
            ll.n = m;
            if (m == 0) ll.v[ll.n++] = mi.n_ctx;
        }
        for (int i = 0; i < ll.n; i++) max_len = PS_MAX(max_len, lengths[i]);
        if (max_len > mi.n_ctx) {
            fprintf(stderr, "promptscore bench: --lengths %d is longer than the context, %d "
                            "tokens (%s; -c N to change it)\n", max_len, mi.n_ctx,
                    o.n_ctx ? "-c" : "the model's");
            ps_model_free(model);
            return 2;
        }
    }
    const int n_lengths = ll.n;
    ps_model_info info;
    ps_model_get_info(model, &info);
    const ps_hparams *hp = &model->hp;
    const double mm_w = matmul_weights(model);
    /* a sliding-window layer keeps a ring of swa + 255 positions (session.h) */
    double kv_positions = 0;
    for (int32_t l = 0; l < hp->n_layer; l++) {
        const int32_t swa = model->w.layers[l].swa;
        kv_positions += swa > 0 ? PS_MIN(max_len, swa + PS_CHUNK - 1) : max_len;
    }
    const double kv_elems = 2.0 * hp->n_head_kv * (double)hp->head_dim * kv_positions;
    const double kv_bytes = kv_elems * (double)ps_kv_elt(o.kv_type);
    /* --kv-pairs: the second session's cache */
    const double kv_base_bytes = kv_pairs > 0 ? kv_elems * (double)ps_kv_elt(kv_base) : 0.0;
    const double logit_bytes = 2.0 * PS_CHUNK * (double)hp->n_vocab * 4;
    /* the AMX tile copy of BF16 weights (info.tile_bytes, 0 without one) counts as weights */
    const double budget = (double)info.file_bytes + (double)info.tile_bytes + kv_bytes +
                          kv_base_bytes + logit_bytes + 64.0 * 1048576;

    int32_t *tokens = ps_malloc(sizeof(int32_t) * (size_t)max_len);
    if (!tokens) {
        ps_model_free(model);
        return 1;
    }
    uint64_t r = 0x2545F4914F6CDD1Dull;
    for (int32_t i = 0; i < max_len; i++)
        tokens[i] = (int32_t)(rng_next(&r) % (uint64_t)hp->n_vocab);

    const bool moe = hp->n_expert > 0;
    if (!json && moe)
        printf("experts: %d per layer, %d per token, FFN %d; route = router matmul, softmax, "
               "top-k, gather, weighted sum; experts = the expert matmuls and SwiGLU (their "
               "matmul time is inside matmul too)\n",
               hp->n_expert, hp->n_expert_used, hp->n_ff_exp);
    if (!json)
        printf("model %s: %s, %d layers, %d wide, vocab %d, %s weights, %.0f MB; k = %d, "
               "chunk %d, isa %s, activations %s (avx512bf16 %s, avx512vnni %s: %s), KV cache %s\n",
               info.file, info.arch, hp->n_layer, hp->n_embd, hp->n_vocab,
               ps_ggml_type_name(model->w.layers[0].wq.type), info.file_bytes / 1048576.0, k,
               PS_CHUNK, ps_isa_name(ps_isa_best()), ps_act_name(act),
               ps_cpu_has_avx512bf16() ? "yes" : "no", ps_cpu_has_avx512vnni() ? "yes" : "no",
               act == PS_ACT_F32 ? "not used, every weight type is widened to f32"
                                 : "see matmul paths", ps_kv_type_name(o.kv_type));
    if (!json) {
        char paths[384];
        ps_cli_paths(paths, sizeof paths);
        printf("matmul paths: %s%s\n", act == PS_ACT_F32 ? "(not used: --act f32) " : "", paths);
        if (info.tile_bytes > 0)
            printf("amx tile copy of the BF16 weights: %.1f MiB, made at load in %.2f s "
                   "(--no-repack: none)\n",
                   (double)info.tile_bytes / 1048576.0, info.tile_seconds);
    }
    int rc = 0;
    for (int ti = 0; ti < n_threads && !rc; ti++) {
        ps_pool *pool = NULL;
        ps_session *s = NULL;
        if (threads[ti] > 1 && ps_pool_create(threads[ti], &pool) != PS_OK) {
            rc = 1;
            break;
        }
        ps_session_params sp = ps_session_default_params();
        sp.n_ctx = max_len;
        sp.pool = pool;
        sp.act = act;
        sp.kv_type = o.kv_type;
        ps_session *sb = NULL; /* --kv-pairs: the same session but for its cache type */
        if (ps_session_create(model, &sp, &s, &err) != PS_OK ||
            (kv_pairs > 0 && (sp.kv_type = kv_base,
                              ps_session_create(model, &sp, &sb, &err) != PS_OK))) {
            fprintf(stderr, "promptscore bench: session: %s\n", err.message);
            ps_session_free(s);
            ps_pool_free(pool);
            rc = 1;
            break;
        }
        /* one thread: shares and tokens/s from the process's CPU time (the machine may be
         * shared); several: wall time */
        const bool cpu_clock = threads[ti] == 1;
        /* warm-up: pages the weights in and starts the pool's threads */
        ps_score_result *warm = NULL;
        ps_score_params wp = ps_score_default_params();
        wp.k = k;
        if (!rc && ps_score_tokens(s, tokens, PS_MIN(max_len, 16), &wp, &warm, &err) == PS_OK)
            ps_score_result_free(warm);
        warm = NULL;
        if (sb && ps_score_tokens(sb, tokens, PS_MIN(max_len, 16), &wp, &warm, &err) == PS_OK)
            ps_score_result_free(warm);
        if (!json && !rc)
            printf("%7s %7s %9s %9s %7s %7s %7s %7s %7s %9s%s\n", "threads", "tokens", "seconds",
                   "tok/s", "matmul", "attn", "dnet", "topk", "rest", "mm GF/s",
                   moe ? "   route experts" : "");
        for (int li = 0; li < n_lengths && !rc; li++) {
            if (isatty(STDERR_FILENO)) {
                fprintf(stderr, "\rbench: %d thread(s), %d tokens (%d/%d)...\033[K", threads[ti],
                        lengths[li], ti * n_lengths + li + 1, n_threads * n_lengths);
                fflush(stderr);
            }
            ps_score_params p = ps_score_default_params();
            p.k = k;
            ps_score_result *res = NULL;
            ps_prof_reset();
            ps_prof_use_cpu_clock(cpu_clock);
            ps_prof_enable(true);
            const double t0 = ps_now_s(), c0 = ps_prof_clock_ns() * 1e-9;
            ps_status st = ps_score_tokens(s, tokens, lengths[li], &p, &res, &err);
            const double wall = ps_now_s() - t0, secs = ps_prof_clock_ns() * 1e-9 - c0;
            ps_prof_enable(false);
            if (isatty(STDERR_FILENO)) fputs("\r\033[K", stderr);
            if (st != PS_OK) {
                fprintf(stderr, "promptscore bench: scoring %d tokens: %s\n", lengths[li],
                        err.message);
                rc = 1;
                break;
            }
            ps_score_result_free(res);
            uint64_t ns[PS_PROF_N];
            ps_prof_read(ns);
            const double mm = ns[PS_PROF_MATMUL] * 1e-9, att = ns[PS_PROF_ATTENTION] * 1e-9,
                         fwd = ns[PS_PROF_FORWARD] * 1e-9, dn = ns[PS_PROF_DELTANET] * 1e-9;
            const double topk = PS_MAX(secs - fwd, 0.0),
                         rest = PS_MAX(fwd - mm - att - dn, 0.0);
            const double route = ns[PS_PROF_MOE_ROUTE] * 1e-9,
                         experts = ns[PS_PROF_MOE_EXPERTS] * 1e-9;
            char moe_cols[64] = "";
            if (moe && json)
                snprintf(moe_cols, sizeof moe_cols, ", \"route_share\": %.3f, "
                         "\"experts_share\": %.3f", route / secs, experts / secs);
            else if (moe)
                snprintf(moe_cols, sizeof moe_cols, " %6.1f%% %6.1f%%", 100 * route / secs,
                         100 * experts / secs);
            const double gf = mm > 0 ? 2.0 * mm_w * lengths[li] / mm * 1e-9 : 0;
            if (json)
                printf("{\"threads\": %d, \"tokens\": %d, \"k\": %d, \"seconds\": %.6f, "
                       "\"clock\": \"%s\", \"wall_seconds\": %.6f, \"tokens_per_s\": %.1f, "
                       "\"matmul_share\": %.3f, \"attention_share\": %.3f, \"deltanet_share\": "
                       "%.3f, \"topk_share\": %.3f, \"rest_share\": %.3f, \"matmul_gflops\": "
                       "%.1f, \"isa\": \"%s\", \"act\": \"%s\", \"kv_type\": \"%s\"%s}\n",
                       threads[ti], lengths[li], k, secs, cpu_clock ? "cpu" : "wall", wall,
                       lengths[li] / secs, mm / secs, att / secs, dn / secs, topk / secs,
                       rest / secs, gf, ps_isa_name(s->isa), ps_act_name(act),
                       ps_kv_type_name(o.kv_type), moe_cols);
            else
                printf("%7d %7d %9.3f %9.1f %6.1f%% %6.1f%% %6.1f%% %6.1f%% %6.1f%% %9.1f%s  (%s; "
                       "wall %.3f s)\n",
                       threads[ti], lengths[li], secs, lengths[li] / secs, 100 * mm / secs,
                       100 * att / secs, 100 * dn / secs, 100 * topk / secs, 100 * rest / secs,
                       gf, moe_cols,
                       cpu_clock ? "CPU time" : "wall time", wall);
            fflush(stdout);
            double one_prompt = 0; /* bytes of one prompt's blocks */
            for (int warm = 0; warm < 2 && cache_pairs > 0 && !rc; warm++) {
                double mo = 0, mc = 0;
                if (cache_pairs_row(s, tokens, lengths[li], k, cache_pairs, warm, cpu_clock,
                                    &cache_peak, &one_prompt, &mo, &mc, &err) != PS_OK) {
                    fprintf(stderr, "promptscore bench: --cache-pairs: %s\n", err.message);
                    rc = 1;
                    break;
                }
                const char *kind = warm ? "warm" : "fresh";
                if (json)
                    printf("{\"threads\": %d, \"tokens\": %d, \"cache_pairs\": %d, "
                           "\"cache\": \"%s\", \"off_seconds\": %.9f, \"on_seconds\": %.9f, "
                           "\"on_over_off\": %.4f, \"clock\": \"%s\"}\n", threads[ti],
                           lengths[li], cache_pairs, kind, mo, mc, mc / mo,
                           cpu_clock ? "cpu" : "wall");
                else
                    printf("%7d %7d  prefix cache (%s) on / off: %.6f s / %.6f s = %.4f "
                           "(medians of %d alternating pairs, %s)\n", threads[ti],
                           lengths[li], kind, mc, mo, mc / mo, cache_pairs,
                           cpu_clock ? "CPU time" : "wall time");
                fflush(stdout);
            }
            if (sb && !rc) {
                double mb = 0, mt = 0, ratio = 0;
                if (kv_pairs_row(s, sb, tokens, lengths[li], k, kv_pairs, cpu_clock, &mb, &mt,
                                 &ratio, &err) != PS_OK) {
                    fprintf(stderr, "promptscore bench: --kv-pairs: %s\n", err.message);
                    rc = 1;
                    break;
                }
                if (json)
                    printf("{\"threads\": %d, \"tokens\": %d, \"kv_pairs\": %d, "
                           "\"kv_type\": \"%s\", \"kv_base\": \"%s\", \"type_seconds\": %.9f, "
                           "\"base_seconds\": %.9f, \"type_over_base\": %.4f, \"clock\": "
                           "\"%s\"}\n", threads[ti], lengths[li], kv_pairs,
                           ps_kv_type_name(o.kv_type), ps_kv_type_name(kv_base), mt, mb, ratio,
                           cpu_clock ? "cpu" : "wall");
                else
                    printf("%7d %7d  kv %s / %s: %.6f s / %.6f s; per pair %.4f (%.2fx the "
                           "speed; medians of %d alternating pairs, %s)\n", threads[ti],
                           lengths[li], ps_kv_type_name(o.kv_type), ps_kv_type_name(kv_base), mt,
                           mb, ratio, 1.0 / ratio, kv_pairs, cpu_clock ? "CPU time" : "wall time");
                fflush(stdout);
            }
        }
        ps_session_free(sb);
        ps_session_free(s);
        ps_pool_free(pool);
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    const double rss = (double)ru.ru_maxrss * 1024.0;
    const double budget_all = budget + cache_peak;
    if (!rc) {
        if (json)
            printf("{\"peak_rss_mb\": %.1f, \"budget_mb\": %.1f, \"weights_mb\": %.1f, "
                   "\"tile_copy_mb\": %.1f, \"kv_cache_mb\": %.1f, \"kv_base_cache_mb\": %.1f, "
                   "\"logits_mb\": %.1f, \"cache_mb\": %.1f, \"within_budget\": %s}\n",
                   rss / 1048576, budget_all / 1048576, info.file_bytes / 1048576.0,
                   info.tile_bytes / 1048576.0, kv_bytes / 1048576, kv_base_bytes / 1048576,
                   logit_bytes / 1048576, cache_peak / 1048576,
                   rss <= budget_all ? "true" : "false");
        else {
            char tiles[64] = "";
            if (info.tile_bytes)
                snprintf(tiles, sizeof tiles, " + AMX tile copy %.1f",
                         info.tile_bytes / 1048576.0);
            char pc[64] = "";
            if (cache_pairs > 0)
                snprintf(pc, sizeof pc, " + prefix cache %.1f", cache_peak / 1048576);
            char kb[64] = "";
            if (kv_base_bytes > 0)
                snprintf(kb, sizeof kb, " + --kv-base's KV cache %.1f", kv_base_bytes / 1048576);
            printf("peak RSS %.1f MB; budget %.1f MB = weights %.1f%s + KV cache %.1f%s + 2 "
                   "chunks of logits %.1f%s + 64 (%s)\n",
                   rss / 1048576, budget_all / 1048576, info.file_bytes / 1048576.0, tiles,
                   kv_bytes / 1048576, kb, logit_bytes / 1048576, pc,
                   rss <= budget_all ? "within" : "OVER");
        }
    }
    ps_free(tokens);
    ps_model_free(model);
    return rc;
}
