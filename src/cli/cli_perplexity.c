/*
 * cli_perplexity.c — `promptscore perplexity`: the perplexity of a text file, two ways.
 *
 * --ppl-mode sliding (the default): windows of -c tokens advancing by --stride; the first
 * window scores all its tokens, each later one only the tokens no window has scored yet, so
 * every token but the first is scored exactly once, with as much context as its window
 * allows. The logprobs are ps_score_tokens' (float32, bitwise those of a float32 log-softmax).
 *
 * --ppl-mode llama: llama.cpp's llama-perplexity procedure, so the number compares with the
 * ones people quote. The whole file, less one trailing newline (as llama.cpp's -f reads it), is
 * tokenized first (BOS in front when the model adds one, special-token text left as text); it is cut into floor(n / c) non-overlapping chunks of
 * c = -c tokens (default 512, as there; --chunks N keeps the first N), and at least 2c tokens
 * are needed. Each chunk is evaluated from an empty cache with its first token replaced by BOS
 * (when the model adds one); only the second half is scored: the logits at positions
 * c/2 .. c-2 predict tokens c/2+1 .. c-1, so c - c/2 - 1 tokens per chunk. Each token's
 * negative log-likelihood is computed as llama-perplexity computes it: the maximum logit m in
 * float, sum = Σ expf(logit - m) accumulated in double in vocabulary order, and
 * nll = -((float)(logit_tok - m) - log(sum)) in double; nll and nll² are summed in double.
 * After each chunk the running estimate exp(Σnll / count) is printed as "[i]x.xxxx,", and at
 * the end "Final estimate: PPL = X +/- Y" with
 *     mean = Σnll / count,  var = Σnll² / count - mean²,  Y = sqrt(var / (count - 1)) * X.
 * The logits are this engine's; with no --kv-type this mode takes f16-dot, llama-perplexity's
 * own attention arithmetic (its default F16 cache, without flash attention, rounds the queries
 * and the softmax probabilities to half as well), so that the two differ by the order of
 * float32 sums only. --json prints one summary object instead (either mode).
 *
 * --ppl-mode llama --compare OTHER.gguf: llama-perplexity's --kl-divergence, in one pass. The
 * -m model is the base, OTHER the one compared with it ("Q"); both run over the same chunks,
 * batch by batch (one batch of logits each; no file). For every scored token, from the exact
 * float32 logprobs (logit - the canonical lse; llama.cpp rounds its base to 16 bits): nll_Q,
 * nll_base, KLD = KL(base || Q) over the whole vocabulary (ps_kld_compute), Δp = p_Q - p_base
 * of the token and whether the two top-1 tokens agree. They are summed as llama.cpp sums them,
 * and printed with its labels and layout: after each chunk a row of running PPL(Q), ln(PPL(Q)/
 * PPL(base)), KLD, RMS Δp and same top p, each "± error"; then the three statistics blocks.
 * The errors are llama.cpp's: for a mean of values x, sqrt((Σx²/n - mean²) / (n - 1)) (0 when
 * n <= 10 or the variance is not positive); PPL's is PPL times that of the mean nll; the ln
 * ratio's combines both with their covariance (Σab/n - Σa/n Σb/n) / (n - 1); RMS Δp's is
 * 0.5 / RMS times that of the mean of Δp²; same top p's is sqrt(p (1 - p) / (n - 1)).
 * Percentiles interpolate linearly between the sorted values at fraction (n - 1), medians
 * average the two middle values; KLD and Δp values are kept per scored token (8 bytes each)
 * for them. Unlike llama.cpp the statistics are printed for fewer than 100 tokens too.
 */
#include "cli/cli.h"
#include "model/vocab.h"
#include "run/session.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *PPL_ABOUT =
    "Perplexity of a text. --ppl-mode sliding (default): windows of -c tokens advance by\n"
    "--stride; every token is scored once, with as much context as its window gives (the\n"
    "first window scores all its tokens, later ones only the new ones). --ppl-mode llama:\n"
    "llama-perplexity's procedure (non-overlapping chunks of -c tokens, default 512, BOS at\n"
    "the start of each, the second half of each scored; prints its running estimate and\n"
    "\"Final estimate: PPL = X +/- Y\"), so the numbers compare; its --kv-type default is\n"
    "f16-dot, llama-perplexity's F16 cache and attention roundings. docs/api.md has both.\n";

enum { MODE_SLIDING, MODE_LLAMA };

static bool opt_mode(const char *cmd, const char *opt, const char *v, void *dst) {
    if (!strcmp(v, "sliding")) *(int *)dst = MODE_SLIDING;
    else if (!strcmp(v, "llama")) *(int *)dst = MODE_LLAMA;
    else {
        fprintf(stderr, "promptscore %s: %s wants sliding or llama, got '%s'\n", cmd, opt, v);
        return false;
    }
    return true;
}

/* ---- --compare: llama-perplexity's --kl-divergence statistics ---------------------------- */

/* The running sums (llama.cpp's kl_divergence_result) and the per-token values. */
typedef struct {
    double sum_nll, sum_nll2, sum_nll_base, sum_nll_base2, sum_nll_nll_base;
    double sum_kld, sum_kld2, sum_p_diff, sum_p_diff2, sum_p_diff4;
    double max_p_diff;
    int64_t n_same_top, count;
    float *kld_values, *p_diff_values; /* count each (capacity: every scored token) */
} kld_sums;

typedef struct {
    double val, unc;
} mean_unc;

static mean_unc mean_and_uncertainty(double sum, double sum2, int64_t count) {
    mean_unc m = {0, 0};
    if (count < 1) return m;
    m.val = sum / (double)count;
    double df = sum2 / (double)count - m.val * m.val;
    m.unc = df > 0 && count > 10 ? sqrt(df / (double)(count - 1)) : 0.0;
    return m;
}

static double covariance(double suma, double sumb, double sumab, int64_t count) {
    if (count < 10) return 0.0;
    double var = sumab / (double)count - (suma / (double)count) * (sumb / (double)count);
    return var / (double)(count - 1);
}

/* values sorted ascending; fraction in float as llama.cpp writes it */
static float percentile(const float *v, int64_t n, float fraction) {
    if (fraction <= 0) return v[0];
    if (fraction >= 1) return v[n - 1];
    float p = fraction * (float)(n - 1);
    int64_t ip = (int64_t)p;
    p -= (float)ip;
    return (1 - p) * v[ip] + p * v[PS_MIN(ip + 1, n - 1)];
}

static float median(const float *v, int64_t n) {
    return n % 2 == 0 ? 0.5f * (v[n / 2] + v[n / 2 - 1]) : v[n / 2];
}

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* Rows [0, m) of both batches of logits, row j predicting targets[j]: the sums. */
static ps_status kld_rows(ps_pool *pool, const float *base, const float *other, int32_t m,
                          int32_t n_vocab, const int32_t *targets, kld_sums *ks, ps_error *err) {
    float lp_b[PS_CHUNK], lp_o[PS_CHUNK], tl[PS_CHUNK], kl[PS_CHUNK];
    int32_t top_b[PS_CHUNK], top_o[PS_CHUNK];
    ps_topk_params tp = ps_topk_default_params();
    tp.k = 1;
    tp.pool = pool;
    ps_logits lb = {base, PS_DTYPE_F32, m, n_vocab, n_vocab, targets};
    ps_logits lo = {other, PS_DTYPE_F32, m, n_vocab, n_vocab, targets};
    ps_topk_out ob = {.target_logprob = lp_b, .top_ids = top_b, .top_logprobs = tl};
    ps_topk_out oo = {.target_logprob = lp_o, .top_ids = top_o, .top_logprobs = tl};
    ps_status st = ps_topk_compute(&tp, &lb, &ob, err);
    if (st == PS_OK) st = ps_topk_compute(&tp, &lo, &oo, err);
    if (st == PS_OK) st = ps_kld_compute(&tp, &lb, &lo, kl, err);
    if (st != PS_OK) return st;
    for (int32_t j = 0; j < m; j++) {
        const double nll = -(double)lp_o[j], nll_base = -(double)lp_b[j];
        ks->sum_nll += nll;
        ks->sum_nll2 += nll * nll;
        ks->sum_nll_base += nll_base;
        ks->sum_nll_base2 += nll_base * nll_base;
        ks->sum_nll_nll_base += nll * nll_base;
        ks->sum_kld += (double)kl[j];
        ks->sum_kld2 += (double)kl[j] * (double)kl[j];
        ks->n_same_top += top_b[j] == top_o[j];
        const double p_diff = exp(-nll) - exp(-nll_base), p_diff2 = p_diff * p_diff;
        ks->sum_p_diff += p_diff;
        ks->sum_p_diff2 += p_diff2;
        ks->sum_p_diff4 += p_diff2 * p_diff2;
        ks->max_p_diff = PS_MAX(ks->max_p_diff, fabs(p_diff));
        ks->kld_values[ks->count] = kl[j];
        ks->p_diff_values[ks->count] = (float)p_diff;
        ks->count++;
    }
    return PS_OK;
}

/* The row printed after each chunk, as llama-perplexity prints it. */
static void kld_chunk_row(const kld_sums *ks, int32_t chunk) {
    if (chunk == 1) /* the header once, before the first row */
        printf("\nchunk             PPL               ln(PPL(Q)/PPL(base))          KL Divergence"
               "              Δp RMS            Same top p\n");
    printf("%4d", chunk);
    mean_unc lp = mean_and_uncertainty(ks->sum_nll, ks->sum_nll2, ks->count);
    const double ppl = exp(lp.val);
    printf("    %9.4f ± %9.4f", ppl, ppl * lp.unc);
    mean_unc lb = mean_and_uncertainty(ks->sum_nll_base, ks->sum_nll_base2, ks->count);
    const double cov = covariance(ks->sum_nll, ks->sum_nll_base, ks->sum_nll_nll_base, ks->count);
    printf("    %10.5f ± %10.5f", lp.val - lb.val,
           sqrt(lp.unc * lp.unc + lb.unc * lb.unc - 2.0 * cov));
    mean_unc kl = mean_and_uncertainty(ks->sum_kld, ks->sum_kld2, ks->count);
    printf("    %10.5f ± %10.5f", kl.val, kl.unc);
    mean_unc mse = mean_and_uncertainty(ks->sum_p_diff2, ks->sum_p_diff4, ks->count);
    const double rms = sqrt(mse.val);
    printf("    %6.3f ± %6.3f %%", 100.0 * rms, 100.0 * (rms > 0 ? 0.5 / rms * mse.unc : 0.0));
    const double top = (double)ks->n_same_top / (double)ks->count;
    printf("    %6.3f ± %6.3f %%", 100.0 * top,
           100.0 * (ks->count > 1 ? sqrt(top * (1 - top) / (double)(ks->count - 1)) : 0.0));
    printf("\n");
}

/* The closing statistics: llama-perplexity's three blocks, or one JSON object. */
static void kld_report(kld_sums *ks, bool json, int32_t n, int32_t n_chunk, int32_t n_ctx) {
    const int64_t c = ks->count;
    qsort(ks->kld_values, (size_t)c, sizeof(float), cmp_float);
    qsort(ks->p_diff_values, (size_t)c, sizeof(float), cmp_float);
    mean_unc lp = mean_and_uncertainty(ks->sum_nll, ks->sum_nll2, c);
    const double ppl = exp(lp.val), ppl_unc = ppl * lp.unc;
    mean_unc lb = mean_and_uncertainty(ks->sum_nll_base, ks->sum_nll_base2, c);
    const double ppl_base = exp(lb.val), ppl_base_unc = ppl_base * lb.unc;
    const double cov = covariance(ks->sum_nll, ks->sum_nll_base, ks->sum_nll_nll_base, c);
    const double cor = cov / (lp.unc * lb.unc);
    const double ratio_val = lp.val - lb.val;
    const double ratio_unc = sqrt(lp.unc * lp.unc + lb.unc * lb.unc - 2.0 * cov);
    const double pratio = exp(ratio_val), pratio_unc = pratio * ratio_unc;
    const double pcov = ppl * ppl_base * cov;
    const double pdiff = ppl - ppl_base;
    const double pdiff_unc = sqrt(ppl_unc * ppl_unc + ppl_base_unc * ppl_base_unc - 2.0 * pcov);
    mean_unc kl = mean_and_uncertainty(ks->sum_kld, ks->sum_kld2, c);
    mean_unc dp = mean_and_uncertainty(ks->sum_p_diff, ks->sum_p_diff2, c);
    mean_unc mse = mean_and_uncertainty(ks->sum_p_diff2, ks->sum_p_diff4, c);
    const double rms = sqrt(mse.val), rms_unc = rms > 0 ? 0.5 / rms * mse.unc : 0.0;
    const double top = (double)ks->n_same_top / (double)c;
    const double top_unc = c > 1 ? sqrt(top * (1.0 - top) / (double)(c - 1)) : 0.0;
    const float *kv = ks->kld_values, *pv = ks->p_diff_values;
    static const float kf[] = {0.999f, 0.990f, 0.950f, 0.900f, 0.100f, 0.050f, 0.010f, 0.001f};
    static const char *kl_lab[] = {"99.9%", "99.0%", "95.0%", "90.0%", "10.0%", " 5.0%",
                                   " 1.0%", " 0.1%"};
    static const float pf[] = {0.999f, 0.990f, 0.950f, 0.900f, 0.750f,
                               0.250f, 0.100f, 0.050f, 0.010f, 0.001f};
    static const char *p_lab[] = {"99.9%", "99.0%", "95.0%", "90.0%", "75.0%",
                                  "25.0%", "10.0%", " 5.0%", " 1.0%", " 0.1%"};
    static const char *kl_key[] = {"kld_p99_9", "kld_p99", "kld_p95", "kld_p90",
                                   "kld_p10", "kld_p5", "kld_p1", "kld_p0_1"};
    static const char *p_key[] = {"dp_p99_9_pct", "dp_p99_pct", "dp_p95_pct", "dp_p90_pct",
                                  "dp_p75_pct", "dp_p25_pct", "dp_p10_pct", "dp_p5_pct",
                                  "dp_p1_pct", "dp_p0_1_pct"};
    if (json) {
        printf("{\"mode\":\"llama\",\"compare\":true,\"tokens_scored\":%lld,\"tokens\":%d,"
               "\"chunks\":%d,\"ctx\":%d,\"ppl_q\":%.17g,\"ppl_q_stderr\":%.17g,"
               "\"ppl_base\":%.17g,\"ppl_base_stderr\":%.17g,\"cor_ln_ppl\":%.17g,"
               "\"ln_ppl_ratio\":%.17g,\"ln_ppl_ratio_stderr\":%.17g,\"ppl_ratio\":%.17g,"
               "\"ppl_ratio_stderr\":%.17g,\"ppl_diff\":%.17g,\"ppl_diff_stderr\":%.17g,"
               "\"kld_mean\":%.17g,\"kld_mean_stderr\":%.17g,\"kld_max\":%.9g",
               (long long)c, (int)n, (int)n_chunk, (int)n_ctx, ppl, ppl_unc, ppl_base,
               ppl_base_unc, cor, ratio_val, ratio_unc, pratio, pratio_unc, pdiff, pdiff_unc,
               kl.val, kl.unc, (double)kv[c - 1]);
        for (int i = 0; i < 8; i++) {
            printf(",\"%s\":%.9g", kl_key[i], (double)percentile(kv, c, kf[i]));
            if (i == 3) printf(",\"kld_median\":%.9g", (double)median(kv, c));
        }
        printf(",\"kld_min\":%.9g,\"dp_mean_pct\":%.17g,\"dp_mean_pct_stderr\":%.17g,"
               "\"dp_max_pct\":%.9g", (double)kv[0], 100.0 * dp.val, 100.0 * dp.unc,
               100.0 * pv[c - 1]);
        for (int i = 0; i < 10; i++) {
            printf(",\"%s\":%.9g", p_key[i], 100.0 * percentile(pv, c, pf[i]));
            if (i == 4) printf(",\"dp_median_pct\":%.9g", 100.0 * median(pv, c));
        }
        printf(",\"dp_min_pct\":%.9g,\"rms_dp_pct\":%.17g,\"rms_dp_pct_stderr\":%.17g,"
               "\"same_top_p_pct\":%.17g,\"same_top_p_pct_stderr\":%.17g}\n",
               100.0 * pv[0], 100.0 * rms, 100.0 * rms_unc, 100.0 * top, 100.0 * top_unc);
        return;
    }
    printf("\n");
    printf("====== Perplexity statistics ======\n");
    printf("Mean PPL(Q)                   : %10.6f ± %10.6f\n", ppl, ppl_unc);
    printf("Mean PPL(base)                : %10.6f ± %10.6f\n", ppl_base, ppl_base_unc);
    printf("Cor(ln(PPL(Q)), ln(PPL(base))): %6.2f%%\n", 100.0 * cor);
    printf("Mean ln(PPL(Q)/PPL(base))     : %10.6f ± %10.6f\n", ratio_val, ratio_unc);
    printf("Mean PPL(Q)/PPL(base)         : %10.6f ± %10.6f\n", pratio, pratio_unc);
    printf("Mean PPL(Q)-PPL(base)         : %10.6f ± %10.6f\n", pdiff, pdiff_unc);
    printf("\n");
    printf("====== KL divergence statistics ======\n");
    printf("Mean    KLD: %10.6f ± %10.6f\n", kl.val, kl.unc);
    printf("Maximum KLD: %10.6f\n", (double)kv[c - 1]);
    for (int i = 0; i < 8; i++) {
        printf("%s   KLD: %10.6f\n", kl_lab[i], (double)percentile(kv, c, kf[i]));
        if (i == 3) printf("Median  KLD: %10.6f\n", (double)median(kv, c));
    }
    printf("Minimum KLD: %10.6f\n", (double)kv[0]);
    printf("\n");
    printf("====== Token probability statistics ======\n");
    printf("Mean    Δp: %6.3f ± %5.3f %%\n", 100.0 * dp.val, 100.0 * dp.unc);
    printf("Maximum Δp: %6.3f%%\n", 100.0 * pv[c - 1]);
    for (int i = 0; i < 10; i++) {
        printf("%s   Δp: %6.3f%%\n", p_lab[i], 100.0 * percentile(pv, c, pf[i]));
        if (i == 4) printf("Median  Δp: %6.3f%%\n", 100.0 * median(pv, c));
    }
    printf("Minimum Δp: %6.3f%%\n", 100.0 * pv[0]);
    printf("RMS Δp    : %6.3f ± %5.3f %%\n", 100.0 * rms, 100.0 * rms_unc);
    printf("Same top p: %6.3f ± %5.3f %%\n", 100.0 * top, 100.0 * top_unc);
}

/* llama mode with --compare: both models over the same chunks, batch by batch, and the
 * comparison's sums (kld_rows); the one loop of its own, as ps_perplexity runs one model. */
static int ppl_compare(const char *cmd, ps_cli_loaded *l, ps_session *cmp, const int32_t *ids,
                       int32_t n_ctx, int32_t n_chunk, int32_t batch, bool json, int32_t n) {
    const int32_t n_vocab = l->info.n_vocab;
    const int32_t first = n_ctx / 2;
    const bool add_bos = ps_vocab_add_bos(l->vocab);
    const size_t scored = (size_t)n_chunk * (size_t)(n_ctx - first - 1);
    int32_t *chunk = ps_malloc(sizeof(int32_t) * (size_t)n_ctx);
    float *logits = ps_malloc(sizeof(float) * (size_t)batch * (size_t)n_vocab);
    float *cmp_logits = ps_malloc(sizeof(float) * (size_t)batch * (size_t)n_vocab);
    kld_sums ks;
    memset(&ks, 0, sizeof ks);
    ks.kld_values = ps_malloc(sizeof(float) * scored);
    ks.p_diff_values = ps_malloc(sizeof(float) * scored);
    int32_t targets[PS_CHUNK];
    int rc = 1;
    if (!chunk || !logits || !cmp_logits || !ks.kld_values || !ks.p_diff_values) {
        fprintf(stderr, "promptscore %s: out of memory\n", cmd);
        goto out;
    }
    ps_cli_progress pr;
    ps_cli_progress_start(&pr, false);
    pr.on = pr.on && json; /* the running rows are the progress otherwise */
    for (int32_t c = 0; c < n_chunk; c++) {
        const int32_t start = c * n_ctx;
        memcpy(chunk, ids + start, sizeof(int32_t) * (size_t)n_ctx);
        if (add_bos) chunk[0] = ps_vocab_bos(l->vocab);
        ps_session_reset(l->session);
        ps_session_reset(cmp);
        for (int32_t p0 = 0; p0 < n_ctx; p0 += batch) {
            const int32_t nb = PS_MIN(batch, n_ctx - p0);
            ps_error err;
            ps_error_clear(&err);
            if (ps_session_forward(l->session, chunk + p0, nb, logits, &err) != PS_OK) {
                fprintf(stderr, "promptscore %s: chunk %d: %s\n", cmd, c + 1, err.message);
                goto out;
            }
            if (ps_session_forward(cmp, chunk + p0, nb, cmp_logits, &err) != PS_OK) {
                fprintf(stderr, "promptscore %s: chunk %d, the compared model: %s\n", cmd, c + 1,
                        err.message);
                goto out;
            }
            /* logits at positions first .. n_ctx - 2 predict the token after them */
            const int32_t r0 = PS_MAX(p0, first), r1 = PS_MIN(p0 + nb, n_ctx - 1);
            for (int32_t p = r0; p < r1; p++) targets[p - r0] = ids[start + p + 1];
            if (r1 > r0 &&
                kld_rows(l->pool, logits + (size_t)(r0 - p0) * (size_t)n_vocab,
                         cmp_logits + (size_t)(r0 - p0) * (size_t)n_vocab, r1 - r0, n_vocab,
                         targets, &ks, &err) != PS_OK) {
                fprintf(stderr, "promptscore %s: chunk %d: %s\n", cmd, c + 1, err.message);
                goto out;
            }
        }
        if (!json) kld_chunk_row(&ks, c + 1);
        fflush(stdout);
        ps_cli_progress_show(&pr, "chunks", c + 1, n_chunk, (int64_t)(c + 1) * n_ctx, false);
    }
    ps_cli_progress_end(&pr);
    kld_report(&ks, json, n, n_chunk, n_ctx);
    rc = fflush(stdout) == 0 ? 0 : 1;
out:
    ps_free(chunk);
    ps_free(logits);
    ps_free(cmp_logits);
    ps_free(ks.kld_values);
    ps_free(ks.p_diff_values);
    return rc;
}

/* What the on_window callbacks print with: the command's state between ps_perplexity's
 * windows or chunks. */
typedef struct {
    ps_cli_progress pr;
    bool json, per_token, write_failed;
    int32_t n, ctx;
    const int32_t *ids;
    const ps_vocab *vocab;
    ps_buf b;
} ppl_print;

/* llama mode: the running estimate after each chunk, "[i]x.xxxx," as llama-perplexity prints */
static bool llama_window(void *user, const ps_ppl_window *w) {
    ppl_print *pp = user;
    if (!pp->json) {
        printf("[%d]%.4f,", w->index, w->running);
        fflush(stdout);
    }
    ps_cli_progress_show(&pp->pr, "chunks", w->index, w->n_windows,
                         (int64_t)w->index * pp->ctx, false);
    return true;
}

/* sliding mode: --per-token's line for each token the window scored, then the progress */
static bool sliding_window(void *user, const ps_ppl_window *w) {
    ppl_print *pp = user;
    for (int32_t j = 0; pp->per_token && j < w->n; j++) {
        const int32_t i = w->first + j;
        ps_buf *b = &pp->b;
        ps_buf_reset(b);
        ps_buf_printf(b, "{\"i\":%d,\"id\":%d,\"text\":", i, pp->ids[i]);
        ps_buf tt;
        ps_buf_init(&tt);
        ps_token_text(&tt, pp->vocab, pp->ids[i]);
        ps_json_str(b, tt.data ? tt.data : "", tt.len);
        ps_buf_free(&tt);
        ps_buf_puts(b, ",\"logprob\":");
        ps_json_f32(b, w->logprobs[j]);
        ps_buf_puts(b, "}\n");
        if (b->oom || fwrite(b->data, 1, b->len, stdout) != b->len) {
            pp->write_failed = true;
            return false;
        }
    }
    ps_cli_progress_show(&pp->pr, "tokens scored", w->tokens_scored, pp->n - 1,
                         (int64_t)w->index * pp->ctx, false);
    return true;
}

/* Runs ps_perplexity with the printing callbacks; the result or NULL (the error printed). */
static ps_ppl_result *ppl_run(const char *cmd, ps_cli_loaded *l, const ps_ppl_params *p,
                              ppl_print *pp) {
    ps_ppl_params q = *p;
    q.on_window = p->mode == PS_PPL_LLAMA ? llama_window : sliding_window;
    q.user = pp;
    ps_ppl_result *r = NULL;
    ps_error err;
    ps_error_clear(&err);
    ps_status st = ps_perplexity(l->session, pp->ids, pp->n, &q, &r, &err);
    ps_cli_progress_end(&pp->pr);
    if (st == PS_OK) return r;
    if (pp->write_failed) fprintf(stderr, "promptscore %s: write failed\n", cmd);
    else fprintf(stderr, "promptscore %s: %s\n", cmd, err.message);
    return NULL;
}

static int ppl_llama(const char *cmd, ps_cli_loaded *l, ps_session *cmp, const int32_t *ids,
                     int32_t n, int32_t n_ctx, int32_t max_chunks, int32_t batch, bool json) {
    if (n < 2 * n_ctx) {
        fprintf(stderr, "promptscore %s: --ppl-mode llama needs at least %d tokens (2 x -c %d); "
                        "the text has %d\n", cmd, 2 * n_ctx, n_ctx, n);
        return 1;
    }
    int32_t n_chunk = n / n_ctx;
    if (max_chunks > 0 && max_chunks < n_chunk) n_chunk = max_chunks;
    if (cmp) return ppl_compare(cmd, l, cmp, ids, n_ctx, n_chunk, batch, json, n);
    ppl_print pp = {.json = json, .n = n, .ctx = n_ctx, .ids = ids, .vocab = l->vocab};
    ps_cli_progress_start(&pp.pr, false);
    pp.pr.on = pp.pr.on && json; /* the running estimate is the progress otherwise */
    ps_ppl_params p = ps_ppl_default_params();
    p.mode = PS_PPL_LLAMA;
    p.ctx = n_ctx;
    p.max_chunks = max_chunks;
    p.chunk = batch;
    ps_ppl_result *r = ppl_run(cmd, l, &p, &pp);
    if (!r) return 1;
    if (json) {
        printf("{\"mode\":\"llama\",\"perplexity\":%.17g,\"perplexity_stderr\":%.17g,"
               "\"mean_nll\":%.17g,\"tokens_scored\":%lld,\"tokens\":%d,\"chunks\":%d,\"ctx\":%d,"
               "\"running\":[",
               r->perplexity, r->perplexity_stderr, r->mean_nll, (long long)r->tokens_scored,
               (int)n, (int)r->n_windows, (int)n_ctx);
        for (int32_t c = 0; c < r->n_windows; c++) printf("%s%.17g", c ? "," : "", r->running[c]);
        printf("]}\n");
    } else {
        printf("\nFinal estimate: PPL = %.4f +/- %.5f\n", r->perplexity, r->perplexity_stderr);
    }
    ps_ppl_result_free(r);
    return fflush(stdout) == 0 ? 0 : 1;
}

static int ppl_sliding(const char *cmd, ps_cli_loaded *l, const int32_t *ids, int32_t n,
                       int32_t stride, int32_t chunk, bool per_token, bool json,
                       const char *text_path) {
    int32_t ctx = l->info.n_ctx;
    if (stride == 0) stride = PS_MAX(1, ctx / 2);
    if (stride > ctx) {
        fprintf(stderr, "promptscore %s: --stride %d is longer than the window (-c %d): tokens "
                        "would be skipped\n", cmd, stride, ctx);
        return 2;
    }
    if (n < 2) {
        fprintf(stderr, "promptscore %s: %s has %d token(s); need at least 2\n", cmd, text_path, n);
        return 1;
    }
    ppl_print pp = {.json = json, .per_token = per_token, .n = n, .ctx = ctx, .ids = ids,
                    .vocab = l->vocab};
    ps_buf_init(&pp.b);
    ps_cli_progress_start(&pp.pr, false);
    ps_ppl_params p = ps_ppl_default_params();
    p.ctx = ctx;
    p.stride = stride;
    p.chunk = chunk;
    ps_ppl_result *r = ppl_run(cmd, l, &p, &pp);
    ps_buf_free(&pp.b);
    if (!r) return 1;
    if (json) {
        printf("{\"mode\":\"sliding\",\"perplexity\":%.17g,\"mean_nll\":%.17g,"
               "\"tokens_scored\":%lld,\"tokens\":%d,\"windows\":%lld,\"ctx\":%d,\"stride\":%d}\n",
               r->perplexity, r->mean_nll, (long long)r->tokens_scored, (int)n,
               (long long)r->n_windows, ctx, stride);
    } else {
        FILE *sum = per_token ? stderr : stdout;
        fprintf(sum, "perplexity %.6f  mean NLL %.6f  tokens %lld  (windows %lld, ctx %d, "
                     "stride %d)\n",
                r->perplexity, r->mean_nll, (long long)r->tokens_scored,
                (long long)r->n_windows, ctx, stride);
    }
    /* the result line holds no wall-clock figure (runs are compared byte for byte) */
    double el = ps_now_s() - pp.pr.t0;
    fprintf(stderr, "promptscore %s: %lld tokens in %.2fs, %.0f tokens/s\n", cmd,
            (long long)r->tokens_scored, el, el > 0 ? (double)r->tokens_scored / el : 0.0);
    ps_ppl_result_free(r);
    return fflush(stdout) == 0 ? 0 : 1;
}

int ps_cli_perplexity(int argc, char **argv) {
    const char *cmd = argv[0];
    /* kv_type: unset (-1) until an option sets it; each mode then has its default */
    ps_cli_model_opts o = {.chunk = PS_CHUNK, .kv_type = (ps_kv_type)-1};
    const char *text_path = NULL, *compare_path = NULL;
    int32_t stride = 0, max_chunks = 0;
    int mode = MODE_SLIDING;
    bool per_token = false, json = false;
    const ps_cli_opt model_opts[] = {
        PS_CLI_OPTS_MODEL(&o),
        PS_CLI_OPT_CTX(&o, "window (sliding; default: the model's context) or chunk\n"
                           "(llama; default 512) length in tokens"),
        PS_CLI_OPT_THREADS(&o),
        PS_CLI_OPT_CHUNK(&o),
        PS_CLI_OPT_ACT(&o),
        PS_CLI_OPT_KV_TYPE(&o),
        PS_CLI_OPT_REPACK(&o),
        {0}};
    const ps_cli_opt ppl_opts[] = {
        {"-f, --file", "FILE", "the text ('-' for stdin)", PS_CLI_STR, &text_path},
        {"--ppl-mode", "MODE", "sliding (default) or llama (llama-perplexity's procedure)",
         PS_CLI_FN, &mode, 0, 0, opt_mode},
        {"--stride", "S", "sliding: window advance, 1..ctx (default ctx / 2)", PS_CLI_I32,
         &stride, 1, INT32_MAX},
        {"--chunks", "N", "llama: use at most the first N chunks (default: all)", PS_CLI_I32,
         &max_chunks, 1, INT32_MAX},
        {"--per-token", NULL, "sliding: JSON Lines of every scored token on stdout\n"
         "{i, id, text, logprob}; the summary then goes to stderr", PS_CLI_FLAG, &per_token},
        {"--json", NULL, "print the summary as one JSON object", PS_CLI_FLAG, &json},
        {"--compare", "FILE", "llama: compare with this GGUF (same vocabulary) as\n"
         "llama-perplexity --kl-divergence does, in one pass: KLD, Δp and same\n"
         "top p blocks (its labels and layout; --json: one object); the -m\n"
         "model is the base", PS_CLI_STR, &compare_path},
        {0}};
    const ps_cli_opt *const tables[] = {model_opts, ppl_opts, NULL};
    const ps_cli_cmd c = {"perplexity", "-m MODEL.gguf -f text.txt [options]", PPL_ABOUT, tables};
    int prc = ps_cli_parse(&c, argc, argv);
    if (prc >= 0) return prc;
    if (!text_path) {
        fprintf(stderr, "promptscore %s: no text: give -f FILE (promptscore %s --help)\n", cmd, cmd);
        return 2;
    }
    if (mode == MODE_LLAMA && (per_token || stride)) {
        fprintf(stderr, "promptscore %s: %s is for --ppl-mode sliding\n", cmd,
                per_token ? "--per-token" : "--stride");
        return 2;
    }
    if (mode == MODE_SLIDING && compare_path) {
        fprintf(stderr, "promptscore %s: --compare is for --ppl-mode llama\n", cmd);
        return 2;
    }
    if (mode == MODE_SLIDING && max_chunks) {
        fprintf(stderr, "promptscore %s: --chunks is for --ppl-mode llama\n", cmd);
        return 2;
    }
    if (per_token && json) {
        fprintf(stderr, "promptscore %s: --per-token and --json exclude each other\n", cmd);
        return 2;
    }
    if ((int)o.kv_type == -1) o.kv_type = mode == MODE_LLAMA ? PS_KV_F16_DOT : PS_KV_F32;
    if (mode == MODE_LLAMA) {
        if (o.n_ctx == 0) o.n_ctx = 512;
        if (o.n_ctx < 3) {
            fprintf(stderr, "promptscore %s: --ppl-mode llama needs -c >= 3 (got %d): a chunk "
                            "scores c - c/2 - 1 tokens\n", cmd, o.n_ctx);
            return 2;
        }
    }
    FILE *f = strcmp(text_path, "-") ? fopen(text_path, "rb") : stdin;
    if (!f) {
        fprintf(stderr, "promptscore %s: cannot open %s: %s\n", cmd, text_path, strerror(errno));
        return 1;
    }
    size_t tlen = 0;
    char *text = ps_cli_read_all(f, &tlen);
    if (f != stdin) fclose(f);
    if (!text) {
        fprintf(stderr, "promptscore %s: cannot read %s\n", cmd, text_path);
        return 1;
    }
    ps_cli_loaded l;
    int rc = ps_cli_load(cmd, &o, false, &l);
    if (rc) {
        free(text);
        return rc;
    }
    ps_model *cmp_model = NULL;
    ps_session *cmp = NULL;
    if (compare_path) {
        rc = ps_cli_load_compare(cmd, compare_path, &o, &l, &cmp_model);
        if (rc == 0) {
            ps_session_params sp = ps_session_default_params();
            sp.n_ctx = l.info.n_ctx;
            sp.n_batch = o.chunk > 0 ? o.chunk : PS_CHUNK;
            sp.pool = l.pool;
            sp.act = o.act;
            sp.kv_type = o.kv_type;
            ps_error cerr;
            ps_error_clear(&cerr);
            if (ps_session_create(cmp_model, &sp, &cmp, &cerr) != PS_OK) {
                fprintf(stderr, "promptscore %s: --compare: cannot create a session: %s\n", cmd,
                        cerr.message);
                rc = 1;
            } else { /* run one after the other by this thread: one workspace for both */
                (void)ps_session_share_workspace(cmp, l.session);
            }
        }
        if (rc) {
            ps_model_free(cmp_model);
            free(text);
            ps_cli_unload(&l);
            return rc;
        }
    }
    /* llama-perplexity reads -f and drops one trailing newline before tokenizing */
    if (mode == MODE_LLAMA && tlen > 0 && text[tlen - 1] == '\n') tlen--;
    int32_t *ids = NULL, n = 0;
    ps_error err;
    ps_error_clear(&err);
    if (ps_vocab_tokenize_alloc(l.vocab, text, tlen, ps_vocab_add_bos(l.vocab), false, &ids, &n,
                                &err) != PS_OK) {
        fprintf(stderr, "promptscore %s: cannot tokenise %s: %s\n", cmd, text_path, err.message);
        rc = 1;
    } else if (mode == MODE_LLAMA) {
        rc = ppl_llama(cmd, &l, cmp, ids, n, o.n_ctx, max_chunks, o.chunk, json);
    } else {
        rc = ppl_sliding(cmd, &l, ids, n, stride, o.chunk, per_token, json, text_path);
    }
    ps_free(ids);
    free(text);
    ps_session_free(cmp);
    ps_model_free(cmp_model);
    ps_cli_unload(&l);
    return rc;
}
