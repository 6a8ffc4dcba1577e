/*
 * detect.c — the contamination (membership) scores of one scored prompt, from the arrays of
 * its result: Min-K% Prob and Min-K%++ over the lowest k% of the scored tokens, the mean
 * NLL, and the reference-model difference with a compared model (ps_detect_compute; the
 * zlib ratio needs zlib and lives in the front end, src/front/detect.c).
 *
 * Each score follows its reference code (docs/api.md, "Contamination scores"): the count is
 * Python's int(len * ratio) with ratio = k / 100 as a double (90 tokens at k = 70 keep 62),
 * the lowest values are taken after an ascending sort (equal values by position, NaN last as
 * numpy sorts it), their mean is summed in that order in double, and an empty selection is
 * NaN (numpy's mean of nothing). Nothing here depends on chunking, threads or the cache: the
 * inputs are the result's float32 arrays, bitwise invariant themselves.
 */
#include "base/impl.h"

#include <math.h>
#include <stdlib.h>

typedef struct {
    double v;
    int32_t pos;
} scored;

/* Ascending, NaN last, equal values by position. */
static int cmp_scored(const void *pa, const void *pb) {
    const scored *a = pa, *b = pb;
    bool na = isnan(a->v), nb = isnan(b->v);
    if (na != nb) return na ? 1 : -1;
    if (!na && a->v != b->v) return a->v < b->v ? -1 : 1;
    return (a->pos > b->pos) - (a->pos < b->pos);
}

/* The mean of the first c of the sorted values (NaN for c == 0). */
static double mean_lowest(const scored *s, int32_t c) {
    if (c <= 0) return NAN;
    double t = 0.0;
    for (int32_t i = 0; i < c; i++) t += s[i].v;
    return t / (double)c;
}

ps_status ps_detect_compute(const ps_score_result *r, const int32_t *k, int32_t n_k,
                            ps_detect_scores *out, ps_error *err) {
    if (!r || !k || !out)
        return ps_fail(err, PS_ERR_INVALID_ARG, -1, "detect: result, k and out are required");
    if (n_k < 1 || n_k > PS_DETECT_MAX_K)
        return ps_fail(err, PS_ERR_INVALID_ARG, -1, "detect: %d percentages (1 to %d)", (int)n_k,
                       PS_DETECT_MAX_K);
    for (int32_t j = 0; j < n_k; j++)
        if (k[j] < 1 || k[j] > 100)
            return ps_fail(err, PS_ERR_INVALID_ARG, -1,
                           "detect: min-k percentage %d is not in [1, 100]", (int)k[j]);
    if (!r->entropy || !r->varentropy)
        return ps_fail(err, PS_ERR_INVALID_ARG, -1,
                       "detect: the result has no entropy and varentropy (score with stats)");
    const int32_t n = r->n_prompt - 1;
    if (n < 1)
        return ps_fail(err, PS_ERR_INVALID_ARG, -1,
                       "detect: a prompt of %d token scores nothing (at least 2 are needed)",
                       (int)r->n_prompt);
    scored *lp = ps_malloc((size_t)n * 2 * sizeof *lp);
    if (!lp) return ps_fail(err, PS_ERR_NOMEM, -1, "detect: out of memory (%d tokens)", (int)n);
    scored *zz = lp + n;
    double ref = 0.0;
    for (int32_t i = 0; i < n; i++) {
        const int32_t t = i + 1;
        const double l = (double)r->logprobs[t];
        const double mu = -(double)r->entropy[t], sigma = sqrt((double)r->varentropy[t]);
        lp[i] = (scored){l, t};
        zz[i] = (scored){(l - mu) / sigma, t};
        if (r->compare_logprob) ref += (double)r->compare_logprob[t];
    }
    qsort(lp, (size_t)n, sizeof *lp, cmp_scored);
    qsort(zz, (size_t)n, sizeof *zz, cmp_scored);
    memset(out, 0, sizeof *out);
    out->n_k = n_k;
    out->n_scored = n;
    for (int32_t j = 0; j < n_k; j++) {
        const int32_t c = (int32_t)((double)n * ((double)k[j] / 100.0));
        out->k[j] = k[j];
        out->count[j] = c;
        out->min_k[j] = mean_lowest(lp, c);
        out->min_k_pp[j] = mean_lowest(zz, c);
    }
    ps_free(lp);
    out->mean_nll = -r->sum_logprob / (double)n;
    out->ref_mean_nll = r->compare_logprob ? -ref / (double)n : NAN;
    out->ref_ratio = out->mean_nll - out->ref_mean_nll;
    return PS_OK;
}
