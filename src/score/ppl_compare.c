/*
 * ppl_compare.c — llama-perplexity's --kl-divergence, for any number of compared models in one
 * pass (ps_ppl_params.compares; the `perplexity --ppl-mode llama --compare` command prints it).
 *
 * perplexity.c runs the llama-mode chunks through the base session, batch by batch; after
 * each batch ps_pplc_batch forwards the same tokens through each compared session (its own
 * logits buffer: one batch of logits per model, no file) and, for the batch rows that are
 * scored, takes from the exact float32 logprobs (logit - the canonical lse; llama.cpp rounds
 * its base to 16 bits) nll_Q, nll_base, KLD = KL(base || Q) over the whole vocabulary
 * (ps_kld_compute), Δp = p_Q - p_base of the token and whether the two top-1 tokens agree.
 * The base's target logprobs and top-1 are computed once per batch for every compared model.
 * They are summed as llama.cpp sums them (its kl_divergence_result: double sums of nll, nll²,
 * nll·nll_base, kld, kld², Δp, Δp², Δp⁴, the count of agreeing top-1), and the KLD and Δp
 * values are kept per scored token (8 bytes per token and model) for the percentiles.
 *
 * The statistics (stats_of) are llama.cpp's: for a mean of values x, sqrt((Σx²/n - mean²) /
 * (n - 1)) (0 when n <= 10 or the variance is not positive); PPL's error is PPL times that of
 * the mean nll; the ln ratio's combines both with their covariance (Σab/n - Σa/n Σb/n) /
 * (n - 1) (0 under 10 tokens); RMS Δp's is 0.5 / RMS times that of the mean of Δp²; same top
 * p's is sqrt(p (1 - p) / (n - 1)). Percentiles interpolate linearly (in float, as llama.cpp
 * writes it) between the sorted values at fraction (n - 1); medians average the two middle
 * values. Each value depends on one row of each model's logits, so the figures are bitwise
 * invariant across batch sizes and threads, and each compared model's are those of comparing
 * it alone.
 */
#include "score/compare.h"

#include <math.h>
#include <stdlib.h>

/* The running sums of one compared model and its per-token values. */
typedef struct {
    double sum_nll, sum_nll2, sum_nll_base, sum_nll_base2, sum_nll_nll_base;
    double sum_kld, sum_kld2, sum_p_diff, sum_p_diff2, sum_p_diff4;
    int64_t n_same_top, count;
    float *kld_values, *p_diff_values; /* count each (capacity: every scored token) */
} kld_sums;

struct ps_pplc {
    const ps_session *base;
    ps_session *const *cmp;
    int32_t n;
    kld_sums *ks;             /* n */
    ps_ppl_compare *running;  /* n */
};

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

/* The means and errors of the sums (the distribution fields left NaN). */
static void stats_of(const kld_sums *ks, ps_ppl_compare *o) {
    const int64_t c = ks->count;
    o->count = c;
    mean_unc lp = mean_and_uncertainty(ks->sum_nll, ks->sum_nll2, c);
    o->ppl_q = exp(lp.val);
    o->ppl_q_stderr = o->ppl_q * lp.unc;
    mean_unc lb = mean_and_uncertainty(ks->sum_nll_base, ks->sum_nll_base2, c);
    o->ppl_base = exp(lb.val);
    o->ppl_base_stderr = o->ppl_base * lb.unc;
    const double cov = covariance(ks->sum_nll, ks->sum_nll_base, ks->sum_nll_nll_base, c);
    o->cor_ln_ppl = cov / (lp.unc * lb.unc);
    o->ln_ppl_ratio = lp.val - lb.val;
    o->ln_ppl_ratio_stderr = sqrt(lp.unc * lp.unc + lb.unc * lb.unc - 2.0 * cov);
    o->ppl_ratio = exp(o->ln_ppl_ratio);
    o->ppl_ratio_stderr = o->ppl_ratio * o->ln_ppl_ratio_stderr;
    const double pcov = o->ppl_q * o->ppl_base * cov;
    o->ppl_diff = o->ppl_q - o->ppl_base;
    o->ppl_diff_stderr = sqrt(o->ppl_q_stderr * o->ppl_q_stderr +
                              o->ppl_base_stderr * o->ppl_base_stderr - 2.0 * pcov);
    mean_unc kl = mean_and_uncertainty(ks->sum_kld, ks->sum_kld2, c);
    o->kld_mean = kl.val;
    o->kld_mean_stderr = kl.unc;
    mean_unc dp = mean_and_uncertainty(ks->sum_p_diff, ks->sum_p_diff2, c);
    o->dp_mean = dp.val;
    o->dp_mean_stderr = dp.unc;
    mean_unc mse = mean_and_uncertainty(ks->sum_p_diff2, ks->sum_p_diff4, c);
    o->rms_dp = sqrt(mse.val);
    o->rms_dp_stderr = o->rms_dp > 0 ? 0.5 / o->rms_dp * mse.unc : 0.0;
    o->same_top = (double)ks->n_same_top / (double)c;
    o->same_top_stderr = c > 1 ? sqrt(o->same_top * (1.0 - o->same_top) / (double)(c - 1)) : 0.0;
    o->kld_max = o->kld_median = o->kld_min = NAN;
    o->dp_max = o->dp_median = o->dp_min = NAN;
    for (int i = 0; i < 8; i++) o->kld_pct[i] = NAN;
    for (int i = 0; i < 10; i++) o->dp_pct[i] = NAN;
}

ps_status ps_pplc_check(const ps_session *s, const ps_ppl_params *p, int32_t ctx,
                        ps_error *err) {
    if (p->n_compares < 0 || (p->n_compares > 0 && !p->compares))
        return ps_fail(err, PS_ERR_INVALID_ARG, -1, "bad compares list (n_compares %d)",
                       (int)p->n_compares);
    if (p->n_compares > 0 && p->mode != PS_PPL_LLAMA)
        return ps_fail(err, PS_ERR_INVALID_ARG, -1, "compares are for llama mode");
    for (int32_t i = 0; i < p->n_compares; i++) {
        const ps_session *o = p->compares[i];
        if (!o) return ps_fail(err, PS_ERR_INVALID_ARG, -1, "compares[%d] is NULL", (int)i);
        if (o == s)
            return ps_fail(err, PS_ERR_INVALID_ARG, -1, "compared session %d is the base's "
                           "session (it may hold the same model, in another session)", (int)i);
        for (int32_t j = 0; j < i; j++)
            if (p->compares[j] == o)
                return ps_fail(err, PS_ERR_INVALID_ARG, -1,
                               "compared sessions %d and %d are the same session", (int)j,
                               (int)i);
        if (o->model->hp.n_vocab != s->model->hp.n_vocab)
            return ps_fail(err, PS_ERR_INVALID_ARG, -1,
                           "the vocabularies differ: %d tokens (base, %s) against %d (compared "
                           "model %d, %s)", s->model->hp.n_vocab, s->model->info.file,
                           o->model->hp.n_vocab, (int)i, o->model->info.file);
        if (ctx > o->n_ctx)
            return ps_fail(err, PS_ERR_CONTEXT, -1, "ctx %d is longer than compared session "
                           "%d's %d positions", (int)ctx, (int)i, (int)o->n_ctx);
        if (p->chunk > o->n_batch)
            return ps_fail(err, PS_ERR_INVALID_ARG, -1, "chunk %d exceeds compared session %d's "
                           "n_batch %d", (int)p->chunk, (int)i, (int)o->n_batch);
    }
    return PS_OK;
}

ps_pplc *ps_pplc_new(const ps_session *s, const ps_ppl_params *p, int64_t scored) {
    ps_pplc *c = ps_calloc(1, sizeof *c);
    if (!c) return NULL;
    c->base = s;
    c->cmp = p->compares;
    c->n = p->n_compares;
    c->ks = ps_calloc((size_t)c->n, sizeof *c->ks);
    c->running = ps_calloc((size_t)c->n, sizeof *c->running);
    if (!c->ks || !c->running) goto fail;
    for (int32_t i = 0; i < c->n; i++) {
        c->ks[i].kld_values = ps_malloc(sizeof(float) * (size_t)PS_MAX(scored, 1));
        c->ks[i].p_diff_values = ps_malloc(sizeof(float) * (size_t)PS_MAX(scored, 1));
        if (!c->ks[i].kld_values || !c->ks[i].p_diff_values) goto fail;
        c->running[i].model = c->cmp[i]->model->info.file;
    }
    return c;
fail:
    ps_pplc_free(c);
    return NULL;
}

void ps_pplc_free(ps_pplc *c) {
    if (!c) return;
    for (int32_t i = 0; c->ks && i < c->n; i++) {
        ps_free(c->ks[i].kld_values);
        ps_free(c->ks[i].p_diff_values);
    }
    ps_free(c->ks);
    ps_free(c->running);
    ps_free(c);
}

void ps_pplc_chunk_begin(ps_pplc *c) {
    for (int32_t i = 0; i < c->n; i++) ps_session_reset(c->cmp[i]);
}

ps_status ps_pplc_batch(ps_pplc *c, const int32_t *tokens, int32_t nb, const float *base,
                        int32_t r0, int32_t r1, const int32_t *targets, ps_error *err) {
    const int32_t n_vocab = c->base->model->hp.n_vocab;
    const int32_t m = r1 - r0;
    float lp_b[PS_CHUNK], lp_o[PS_CHUNK], tl[PS_CHUNK], kl[PS_CHUNK];
    int32_t top_b[PS_CHUNK], top_o[PS_CHUNK];
    assert(nb <= PS_CHUNK);
    ps_topk_params tp = ps_topk_default_params();
    tp.k = 1;
    tp.pool = c->base->pool;
    ps_logits lb = {base + (size_t)PS_MAX(r0, 0) * (size_t)n_vocab, PS_DTYPE_F32, m, n_vocab,
                    n_vocab, targets};
    ps_error e;
    ps_error_clear(&e);
    ps_status st;
    if (m > 0) { /* the base's logprobs and top-1, once for every compared model */
        ps_topk_out ob = {.target_logprob = lp_b, .top_ids = top_b, .top_logprobs = tl};
        if ((st = ps_topk_compute(&tp, &lb, &ob, &e)) != PS_OK)
            return ps_fail(err, st, -1, "%s", e.message);
    }
    for (int32_t i = 0; i < c->n; i++) {
        ps_session *o = c->cmp[i];
        float *other = ps_session_logits(o, (size_t)nb);
        if (!other) return ps_fail(err, PS_ERR_NOMEM, -1, "out of memory");
        if ((st = ps_session_forward(o, tokens, nb, other, &e)) != PS_OK)
            return ps_fail(err, st, -1, "the compared model %s: %s", o->model->info.file,
                           e.message);
        if (m <= 0) continue;
        ps_logits lo = lb;
        lo.data = other + (size_t)r0 * (size_t)n_vocab;
        ps_topk_out oo = {.target_logprob = lp_o, .top_ids = top_o, .top_logprobs = tl};
        st = ps_topk_compute(&tp, &lo, &oo, &e);
        if (st == PS_OK) st = ps_kld_compute(&tp, &lb, &lo, kl, &e);
        if (st != PS_OK) return ps_fail(err, st, -1, "%s", e.message);
        kld_sums *ks = &c->ks[i];
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
            ks->kld_values[ks->count] = kl[j];
            ks->p_diff_values[ks->count] = (float)p_diff;
            ks->count++;
        }
    }
    return PS_OK;
}

const ps_ppl_compare *ps_pplc_running(ps_pplc *c) {
    for (int32_t i = 0; i < c->n; i++) stats_of(&c->ks[i], &c->running[i]);
    return c->running;
}

ps_status ps_pplc_finish(ps_pplc *c, ps_ppl_result *r, ps_error *err) {
    static const float kf[8] = {0.999f, 0.990f, 0.950f, 0.900f, 0.100f, 0.050f, 0.010f, 0.001f};
    static const float pf[10] = {0.999f, 0.990f, 0.950f, 0.900f, 0.750f,
                                 0.250f, 0.100f, 0.050f, 0.010f, 0.001f};
    r->compares = ps_calloc((size_t)c->n, sizeof *r->compares);
    if (!r->compares) return ps_fail(err, PS_ERR_NOMEM, -1, "out of memory");
    r->n_compares = c->n;
    for (int32_t i = 0; i < c->n; i++) {
        kld_sums *ks = &c->ks[i];
        ps_ppl_compare *o = &r->compares[i];
        const int64_t n = ks->count;
        stats_of(ks, o);
        o->model = c->running[i].model;
        if (n < 1) continue;
        float *kv = ks->kld_values, *pv = ks->p_diff_values;
        qsort(kv, (size_t)n, sizeof(float), cmp_float);
        qsort(pv, (size_t)n, sizeof(float), cmp_float);
        o->kld_max = kv[n - 1];
        o->kld_min = kv[0];
        o->kld_median = median(kv, n);
        for (int k = 0; k < 8; k++) o->kld_pct[k] = percentile(kv, n, kf[k]);
        o->dp_max = pv[n - 1];
        o->dp_min = pv[0];
        o->dp_median = median(pv, n);
        for (int k = 0; k < 10; k++) o->dp_pct[k] = percentile(pv, n, pf[k]);
    }
    return PS_OK;
}

void ps_pplc_result_free(ps_ppl_result *r) {
    ps_free(r->compares);
    r->compares = NULL;
    r->n_compares = 0;
}
