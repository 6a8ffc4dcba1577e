/*
 * extras_named.c — named tokens: the log-probabilities of the ids a request names
 * (ps_score_params.token_ids), at every scored position, whatever their rank. The top-K
 * kernel already computes each row's canonical lse; a named id's value is then one float32
 * subtraction, logit - lse, the same operation (and so the same bits) as the kernel's target
 * and top-K values. Each row's values are written as the scoring loop reaches it, so they
 * are invariant across chunk sizes, threads and batching like the rest; the prefix cache
 * keeps no named values, so a score with them reads no cached block (score.c).
 */
#include "score/extras.h"

#include <math.h>

ps_status ps_extras_check(const ps_score_params *p, int32_t n_tokens, int32_t n_vocab,
                          ps_error *err) {
    if (p->n_token_ids < 0 || (p->n_token_ids > 0 && !p->token_ids))
        return ps_fail(err, PS_ERR_INVALID_ARG, -1, "bad token_ids list (n_token_ids %d)",
                       p->n_token_ids);
    if (p->n_token_ids > n_vocab)
        return ps_fail(err, PS_ERR_INVALID_ARG, -1,
                       "%d named token ids: at most the vocabulary size %d", p->n_token_ids,
                       n_vocab);
    for (int32_t i = 0; i < p->n_token_ids; i++)
        if (p->token_ids[i] < 0 || p->token_ids[i] >= n_vocab)
            return ps_fail(err, PS_ERR_TOKEN_RANGE, -1,
                           "token_ids[%d] = %d is outside the vocabulary [0, %d)", i,
                           p->token_ids[i], n_vocab);
    if (p->continuation_start < 0 || (p->continuation_start > 0 && p->continuation_start >= n_tokens))
        return ps_fail(err, PS_ERR_INVALID_ARG, -1,
                       "continuation_start %d must be 0 (none) or in 1..%d (the prompt has %d "
                       "tokens)", p->continuation_start, n_tokens - 1, n_tokens);
    return PS_OK;
}

bool ps_extras_alloc(ps_score_result *r, const ps_score_params *p, int32_t cap) {
    if (p->n_token_ids > 0) {
        const size_t n = (size_t)cap * (size_t)p->n_token_ids;
        r->token_id_logprobs = ps_malloc(n * sizeof *r->token_id_logprobs);
        if (!r->token_id_logprobs) return false;
        r->n_token_ids = p->n_token_ids;
        for (int32_t t = 0; t < p->n_token_ids; t++) r->token_id_logprobs[t] = NAN;
    }
    if (p->continuation_start > 0 && !r->rank) {
        r->rank = ps_malloc((size_t)cap * sizeof *r->rank);
        if (!r->rank) return false;
        r->rank[0] = 0;
    }
    return true;
}

void ps_named_rows(const float *logits, int32_t n_rows, int32_t n_vocab, const float *lse,
                   const int32_t *ids, int32_t n, float *out) {
    for (int32_t j = 0; j < n_rows; j++) {
        const float *row = logits + (size_t)j * (size_t)n_vocab;
        const float l = lse[j];
        for (int32_t t = 0; t < n; t++)
            out[(size_t)j * (size_t)n + (size_t)t] = l == -INFINITY ? -INFINITY : row[ids[t]] - l;
    }
}
