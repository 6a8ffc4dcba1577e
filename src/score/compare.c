/*
 * compare.c — several models compared with the base in one score (ps_score_params.compares).
 *
 * score.c forwards the base over a chunk once and writes its logprobs and top-K; then, for
 * each compared session in order, ps_compares_chunk forwards the same positions into that
 * session's own logits buffer (ps_session_logits: one chunk of logits per model) and compares
 * the chunk's rows exactly as score.c's compare_rows does for the single `compare`: the other
 * model's target logprob and top-1 from the top-K kernel with k = 1, KL(base || other) from
 * ps_kld_compute, same_top1 from the two top-1 ids (the base's from the result when k >= 1,
 * else computed once per chunk for every compared model), dp = p_other - p_base from the
 * float32 logprobs in double. Every value is a function of one row of each model's logits,
 * so each model's arrays are bitwise those of a score comparing it alone, and invariant
 * across chunk sizes and threads as the logits are.
 */
#include "score/compare.h"

#include <math.h>

ps_status ps_compares_check(const ps_session *s, int32_t n_tokens, const ps_score_params *p,
                            ps_error *err) {
    if (p->n_compares < 0 || (p->n_compares > 0 && !p->compares))
        return ps_fail(err, PS_ERR_INVALID_ARG, -1, "bad compares list (n_compares %d)",
                       (int)p->n_compares);
    if (p->n_compares == 0) return PS_OK;
    if (p->compare)
        return ps_fail(err, PS_ERR_INVALID_ARG, -1,
                       "compare and compares exclude each other: give every model in compares");
    if (p->cache)
        return ps_fail(err, PS_ERR_INVALID_ARG, -1, "compare does not combine with a prefix cache");
    if (p->max_tokens > 0)
        return ps_fail(err, PS_ERR_INVALID_ARG, -1,
                       "compare scores the prompt only: max_tokens must be 0, got %d",
                       p->max_tokens);
    for (int32_t i = 0; i < p->n_compares; i++) {
        const ps_session *o = p->compares[i];
        if (!o) return ps_fail(err, PS_ERR_INVALID_ARG, -1, "compares[%d] is NULL", (int)i);
        if (o->model->hp.n_vocab != s->model->hp.n_vocab)
            return ps_fail(err, PS_ERR_INVALID_ARG, -1,
                           "compare: the vocabularies differ: %d tokens (base) against %d "
                           "(compared model %d, %s)", s->model->hp.n_vocab,
                           o->model->hp.n_vocab, (int)i, o->model->info.file);
        if (o == s)
            return ps_fail(err, PS_ERR_INVALID_ARG, -1,
                           "compare: compared session %d is the base's session (it may hold "
                           "the same model, in another session)", (int)i);
        for (int32_t j = 0; j < i; j++)
            if (p->compares[j] == o)
                return ps_fail(err, PS_ERR_INVALID_ARG, -1,
                               "compare: compared sessions %d and %d are the same session",
                               (int)j, (int)i);
        if (p->chunk > o->n_batch)
            return ps_fail(err, PS_ERR_INVALID_ARG, -1,
                           "chunk %d exceeds compared session %d's n_batch %d", p->chunk, (int)i,
                           o->n_batch);
        if (n_tokens > o->n_ctx)
            return ps_fail(err, PS_ERR_CONTEXT, -1,
                           "%d prompt tokens exceed compared session %d's context length %d",
                           n_tokens, (int)i, o->n_ctx);
    }
    return PS_OK;
}

bool ps_compares_alloc(ps_score_result *r, const ps_score_params *p, int32_t cap) {
    if (p->n_compares <= 0) return true;
    r->compares = ps_calloc((size_t)p->n_compares, sizeof *r->compares);
    if (!r->compares) return false;
    r->n_compares = p->n_compares;
    for (int32_t i = 0; i < p->n_compares; i++) {
        ps_score_compare *c = &r->compares[i];
        c->model = p->compares[i]->model->info.file;
        c->kld = ps_malloc((size_t)cap * sizeof *c->kld);
        c->same_top1 = ps_malloc((size_t)cap * sizeof *c->same_top1);
        c->dp = ps_malloc((size_t)cap * sizeof *c->dp);
        if (!c->kld || !c->same_top1 || !c->dp) return false;
        c->kld[0] = NAN;
        c->same_top1[0] = -1;
        c->dp[0] = NAN;
    }
    return true;
}

void ps_compares_free(ps_score_result *r) {
    for (int32_t i = 0; r->compares && i < r->n_compares; i++) {
        ps_free(r->compares[i].kld);
        ps_free(r->compares[i].same_top1);
        ps_free(r->compares[i].dp);
    }
    ps_free(r->compares);
    r->compares = NULL;
    r->n_compares = 0;
}

void ps_compares_reset(const ps_score_params *p) {
    for (int32_t i = 0; i < p->n_compares; i++) ps_session_reset(p->compares[i]);
}

ps_status ps_compares_chunk(const ps_session *s, const ps_score_params *p,
                            const int32_t *tokens, int32_t p0, int32_t n, int32_t m,
                            const float *base, const int32_t *targets, ps_score_result *r,
                            ps_error *err) {
    const int32_t n_vocab = s->model->hp.n_vocab;
    int32_t top_o[PS_CHUNK], top_b[PS_CHUNK];
    float lp_o[PS_CHUNK], tl[PS_CHUNK];
    assert(m <= PS_CHUNK);
    ps_topk_params tp = ps_topk_default_params();
    tp.k = 1;
    tp.pool = s->pool;
    ps_logits lb = {.data = base, .dtype = PS_DTYPE_F32, .n_rows = m, .n_vocab = n_vocab,
                    .row_stride = n_vocab, .targets = NULL};
    ps_error e;
    ps_error_clear(&e);
    ps_status st = PS_OK;
    if (m > 0 && p->k == 0) { /* the base's top-1, once for every compared model */
        ps_topk_out ob = {.top_ids = top_b, .top_logprobs = tl};
        st = ps_topk_compute(&tp, &lb, &ob, &e);
        if (st != PS_OK)
            return ps_fail(err, st, -1, "comparing positions %d..%d: %s", p0, p0 + m - 1,
                           e.message);
    }
    for (int32_t c = 0; c < p->n_compares; c++) {
        ps_session *o = p->compares[c];
        ps_score_compare *rc = &r->compares[c];
        float *other = ps_session_logits(o, (size_t)p->chunk);
        if (!other)
            return ps_fail(err, PS_ERR_NOMEM, -1, "out of memory for compared model %d's %d x %d "
                           "logits buffer", (int)c, (int)p->chunk, (int)n_vocab);
        st = ps_session_forward(o, tokens + p0, n, other, &e);
        if (st != PS_OK)
            return ps_fail(err, st, -1, "compared model %d (%s): %s", (int)c,
                           o->model->info.file, e.message);
        if (m == 0) continue;
        ps_logits lo = lb;
        lo.data = other;
        lo.targets = targets;
        ps_topk_out oo = {.target_logprob = lp_o, .top_ids = top_o, .top_logprobs = tl};
        st = ps_topk_compute(&tp, &lo, &oo, &e);
        if (st == PS_OK) st = ps_kld_compute(&tp, &lb, &lo, rc->kld + p0 + 1, &e);
        if (st != PS_OK)
            return ps_fail(err, st, -1, "compared model %d, positions %d..%d: %s", (int)c, p0,
                           p0 + m - 1, e.message);
        for (int32_t j = 0; j < m; j++) {
            const int32_t i = p0 + 1 + j;
            const int32_t tb = p->k ? r->top_ids[(size_t)i * (size_t)p->k] : top_b[j];
            rc->same_top1[i] = tb == top_o[j];
            rc->dp[i] = (float)(exp((double)lp_o[j]) - exp((double)r->logprobs[i]));
        }
    }
    return PS_OK;
}
