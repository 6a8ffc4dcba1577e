/*
 * perplexity.c — the perplexity of a token sequence, by the two procedures of the
 * `perplexity` command (ps_perplexity in promptscore.h), for callers of the library (the
 * Python package) that want its numbers without its file handling and printing.
 *
 * PS_PPL_SLIDING: windows of ctx tokens advancing by stride; the first window scores all its
 * tokens, each later one only those no window has scored yet, so every token but the first is
 * scored exactly once. Each logprob is ps_score_tokens' (k = 0) and the NLL is their negated
 * sum in double, in token order.
 *
 * PS_PPL_LLAMA: llama.cpp's llama-perplexity: floor(n / ctx) non-overlapping chunks (the first
 * max_chunks when set), each evaluated from an empty cache with its first token replaced by
 * BOS (when the vocab adds one); the logits at positions ctx/2 .. ctx-2 predict the next token,
 * whose NLL is llama-perplexity's: the maximum logit m in float, sum = Σ expf(logit - m) in
 * double in vocabulary order, nll = -((float)(logit_tok - m) - log(sum)). nll and nll² are
 * summed in double; stderr = sqrt((Σnll²/count - mean²) / (count - 1)) * ppl.
 *
 * With params.compares (llama mode), each batch of a chunk runs through the base once and
 * then through every compared session, and ppl_compare.c keeps llama-perplexity's
 * --kl-divergence statistics per compared model; the base's own figures are unchanged.
 *
 * The `perplexity` command runs both through here (src/cli/cli_perplexity.c prints from the
 * on_window callback and the result), so the doubles are the ones `perplexity --json` prints.
 */
#include "base/impl.h"
#include "run/session.h"
#include "score/compare.h"

#include <math.h>

ps_ppl_params ps_ppl_default_params(void) {
    ps_ppl_params p;
    memset(&p, 0, sizeof p);
    p.mode = PS_PPL_SLIDING;
    p.chunk = PS_CHUNK;
    return p;
}

void ps_ppl_result_free(ps_ppl_result *r) {
    if (!r) return;
    ps_free(r->running);
    ps_pplc_result_free(r);
    ps_free(r);
}

/* llama-perplexity's negative log-likelihood of token tok under one row of logits. */
static double llama_nll(const float *logits, int32_t n_vocab, int32_t tok) {
    float mx = logits[0];
    for (int32_t i = 1; i < n_vocab; i++) mx = logits[i] > mx ? logits[i] : mx;
    double sum = 0.0;
    for (int32_t i = 0; i < n_vocab; i++) sum += expf(logits[i] - mx);
    float d = logits[tok] - mx;
    return -((double)d - log(sum));
}

static ps_status ppl_llama(ps_session *s, const int32_t *ids, int32_t n, const ps_ppl_params *p,
                           ps_ppl_result *r, ps_error *err) {
    const int32_t ctx = p->ctx > 0 ? p->ctx : 512;
    if (ctx < 3)
        return ps_fail(err, PS_ERR_INVALID_ARG, -1,
                       "llama mode needs ctx >= 3 (got %d): a chunk scores c - c/2 - 1 tokens",
                       (int)ctx);
    if (n / 2 < ctx)
        return ps_fail(err, PS_ERR_INVALID_ARG, -1,
                       "llama mode needs at least %lld tokens (2 x ctx %d); the text has %d",
                       2 * (long long)ctx, (int)ctx, (int)n);
    if (ctx > s->n_ctx)
        return ps_fail(err, PS_ERR_CONTEXT, -1, "ctx %d is longer than the session's %d positions",
                       (int)ctx, (int)s->n_ctx);
    ps_status cst = ps_pplc_check(s, p, ctx, err);
    if (cst != PS_OK) return cst;
    ps_model_info info;
    ps_model_get_info(s->model, &info);
    const int32_t n_vocab = info.n_vocab;
    const ps_vocab *vocab = ps_model_vocab(s->model);
    int32_t n_chunk = n / ctx;
    if (p->max_chunks > 0 && p->max_chunks < n_chunk) n_chunk = p->max_chunks;
    const int32_t first = ctx / 2, batch = p->chunk;
    const bool add_bos = ps_vocab_add_bos(vocab);
    int32_t *chunk = ps_malloc(sizeof(int32_t) * (size_t)ctx);
    float *logits = ps_malloc(sizeof(float) * (size_t)batch * (size_t)n_vocab);
    r->running = ps_malloc(sizeof(double) * (size_t)n_chunk);
    ps_pplc *cmp = p->n_compares > 0
                       ? ps_pplc_new(s, p, (int64_t)n_chunk * (int64_t)(ctx - first - 1))
                       : NULL;
    int32_t targets[PS_CHUNK];
    ps_status st = PS_OK;
    if (!chunk || !logits || !r->running || (p->n_compares > 0 && !cmp)) {
        st = ps_fail(err, PS_ERR_NOMEM, -1, "out of memory");
        goto out;
    }
    double nll = 0.0, nll2 = 0.0;
    int64_t count = 0;
    for (int32_t c = 0; c < n_chunk; c++) {
        const int32_t start = c * ctx;
        memcpy(chunk, ids + start, sizeof(int32_t) * (size_t)ctx);
        if (add_bos) chunk[0] = ps_vocab_bos(vocab);
        ps_session_reset(s);
        if (cmp) ps_pplc_chunk_begin(cmp);
        for (int32_t p0 = 0; p0 < ctx; p0 += batch) {
            const int32_t nb = PS_MIN(batch, ctx - p0);
            if ((st = ps_session_forward(s, chunk + p0, nb, logits, err)) != PS_OK) goto out;
            for (int32_t q = PS_MAX(p0, first); q < p0 + nb && q < ctx - 1; q++) {
                const int32_t tok = ids[start + q + 1];
                if (tok < 0 || tok >= n_vocab) { /* the chunk's ids were checked; not this one */
                    st = ps_fail(err, PS_ERR_TOKEN_RANGE, -1, "token %d (index %d) is outside "
                                 "the vocabulary (%d)", (int)tok, (int)(start + q + 1),
                                 (int)n_vocab);
                    goto out;
                }
                double v = llama_nll(logits + (size_t)(q - p0) * (size_t)n_vocab, n_vocab, tok);
                nll += v;
                nll2 += v * v;
            }
            if (cmp) { /* the compared models over the same batch: rows first .. ctx - 2 */
                const int32_t r0 = PS_MAX(p0, first), r1 = PS_MIN(p0 + nb, ctx - 1);
                for (int32_t q = r0; q < r1; q++) targets[q - r0] = ids[start + q + 1];
                st = ps_pplc_batch(cmp, chunk + p0, nb, logits, r0 - p0, r1 - p0, targets, err);
                if (st != PS_OK) goto out;
            }
        }
        count += ctx - first - 1;
        r->running[c] = exp(nll / (double)count);
        if (p->on_window) {
            const ps_ppl_window w = {c + 1, n_chunk, count, r->running[c], 0, 0, NULL,
                                     cmp ? p->n_compares : 0, cmp ? ps_pplc_running(cmp) : NULL};
            if (!p->on_window(p->user, &w)) {
                st = ps_fail(err, PS_ERR_CANCELLED, -1, "stopped by on_window after chunk %d",
                             (int)(c + 1));
                goto out;
            }
        }
    }
    const double mean = nll / (double)count;
    const double ppl = exp(mean);
    const double var = nll2 / (double)count - mean * mean;
    if (!(var > 0)) {
        st = ps_fail(err, PS_ERR_INVALID_ARG, -1,
                     "unexpected negative variance of the log-likelihoods");
        goto out;
    }
    r->perplexity = ppl;
    r->perplexity_stderr = sqrt(var / (double)(count - 1)) * ppl;
    r->mean_nll = mean;
    r->tokens_scored = count;
    r->n_windows = n_chunk;
    r->ctx = ctx;
    r->stride = 0;
    if (cmp) st = ps_pplc_finish(cmp, r, err);
out:
    ps_pplc_free(cmp);
    ps_free(chunk);
    ps_free(logits);
    return st;
}

static ps_status ppl_sliding(ps_session *s, const int32_t *ids, int32_t n,
                             const ps_ppl_params *p, ps_ppl_result *r, ps_error *err) {
    const int32_t ctx = p->ctx > 0 ? p->ctx : s->n_ctx;
    int32_t stride = p->stride;
    if (stride == 0) stride = PS_MAX(1, ctx / 2);
    if (stride < 0 || stride > ctx)
        return ps_fail(err, PS_ERR_INVALID_ARG, -1, "stride %d must be in 1..ctx (%d): tokens "
                       "would be skipped", (int)stride, (int)ctx);
    if (n < 2)
        return ps_fail(err, PS_ERR_INVALID_ARG, -1, "the text has %d token(s); need at least 2",
                       (int)n);
    ps_score_params sp = ps_score_default_params();
    sp.k = 0;
    sp.chunk = p->chunk;
    double nll = 0.0;
    int64_t scored = 0, windows = 0;
    int32_t next = 1; /* first token not scored yet (token 0 has no distribution) */
    for (int32_t start = 0; next < n; start += stride) {
        int32_t end = start + ctx < n ? start + ctx : n;
        if (end <= next) continue;
        ps_score_result *sr = NULL;
        ps_status st = ps_score_tokens(s, ids + start, end - start, &sp, &sr, err);
        if (st != PS_OK) return st;
        windows++;
        for (int32_t i = next; i < end; i++) {
            nll -= (double)sr->logprobs[i - start];
            scored++;
        }
        if (p->on_window) {
            const ps_ppl_window w = {(int32_t)windows, 0, scored, exp(nll / (double)scored),
                                     next, end - next, sr->logprobs + (next - start), 0, NULL};
            if (!p->on_window(p->user, &w)) {
                ps_score_result_free(sr);
                return ps_fail(err, PS_ERR_CANCELLED, -1,
                               "stopped by on_window after window %lld", (long long)windows);
            }
        }
        next = end;
        ps_score_result_free(sr);
    }
    r->mean_nll = nll / (double)scored;
    r->perplexity = exp(r->mean_nll);
    r->perplexity_stderr = NAN;
    r->tokens_scored = scored;
    r->n_windows = (int32_t)windows;
    r->ctx = ctx;
    r->stride = stride;
    return PS_OK;
}

ps_status ps_perplexity(ps_session *session, const int32_t *ids, int32_t n,
                        const ps_ppl_params *params, ps_ppl_result **out, ps_error *err) {
    if (!session || !ids || !out) return ps_fail(err, PS_ERR_INVALID_ARG, -1, "NULL argument");
    *out = NULL;
    ps_ppl_params p = params ? *params : ps_ppl_default_params();
    if (p.mode != PS_PPL_SLIDING && p.mode != PS_PPL_LLAMA)
        return ps_fail(err, PS_ERR_INVALID_ARG, -1, "unknown perplexity mode %d", (int)p.mode);
    if (p.n_compares != 0 && p.mode != PS_PPL_LLAMA)
        return ps_fail(err, PS_ERR_INVALID_ARG, -1, "compares are for llama mode");
    if (n < 0 || p.ctx < 0 || p.max_chunks < 0)
        return ps_fail(err, PS_ERR_INVALID_ARG, -1, "negative n, ctx or max_chunks");
    if (p.chunk < 1 || p.chunk > session->n_batch)
        return ps_fail(err, PS_ERR_INVALID_ARG, -1, "chunk %d must be in 1..%d", (int)p.chunk,
                       (int)session->n_batch);
    ps_ppl_result *r = ps_calloc(1, sizeof *r);
    if (!r) return ps_fail(err, PS_ERR_NOMEM, -1, "out of memory");
    r->mode = p.mode;
    r->n_tokens = n;
    ps_status st = p.mode == PS_PPL_LLAMA ? ppl_llama(session, ids, n, &p, r, err)
                                          : ppl_sliding(session, ids, n, &p, r, err);
    if (st != PS_OK) {
        ps_ppl_result_free(r);
        return st;
    }
    *out = r;
    return PS_OK;
}
