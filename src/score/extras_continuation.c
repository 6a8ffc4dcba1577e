/*
 * extras_continuation.c — a (context, continuation) pair scored as lm-evaluation-harness scores it:
 * the pair's tokens by its rule (ps_vocab_tokenize_pair, whose contract in promptscore.h says
 * it in full: trailing whitespace moves to the continuation, the continuation's tokens are
 * those of encode(context + continuation) past encode(context)'s length and follow
 * encode(context) itself, an empty context becomes the BOS or EOS token), and the answer read off a score of those tokens: the sum of
 * the continuation's float32 logprobs in double, in order, and whether every continuation
 * token is its distribution's top-1 (rank 1: largest logit, ties by ascending id, which is
 * torch's argmax on a float32 row). The rank comes from the kernel like every other value
 * (the prefix cache stores it), so is_greedy is invariant like the rest.
 */
#include "score/extras.h"
#include "model/vocab.h"

/* Whether code point c is whitespace to Python's str.isspace (what str.rstrip() strips). */
static bool py_space(uint32_t c) {
    return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 ||
           c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 ||
           c == 0x202f || c == 0x205f || c == 0x3000;
}

/* The length of text[0..len) without its trailing whitespace (whole UTF-8 sequences; a byte
 * that is not part of a valid sequence ends the walk as a non-space). */
static size_t rstrip_len(const char *text, size_t len) {
    const unsigned char *s = (const unsigned char *)text;
    while (len > 0) {
        size_t i = len - 1, back = 0;
        while (i > 0 && back < 3 && (s[i] & 0xc0) == 0x80) {
            i--;
            back++;
        }
        size_t n = len - i;
        uint32_t c;
        if (n == 1 && s[i] < 0x80) c = s[i];
        else if (n == 2 && (s[i] & 0xe0) == 0xc0) c = ((uint32_t)(s[i] & 0x1f) << 6) | (s[i + 1] & 0x3f);
        else if (n == 3 && (s[i] & 0xf0) == 0xe0)
            c = ((uint32_t)(s[i] & 0x0f) << 12) | ((uint32_t)(s[i + 1] & 0x3f) << 6) | (s[i + 2] & 0x3f);
        else return len; /* not a space (4-byte sequences hold none) or not valid */
        if (!py_space(c)) return len;
        len = i;
    }
    return 0;
}

ps_status ps_tokenize_pair_alloc(const ps_vocab *v, const char *context, size_t context_len,
                                 const char *continuation, size_t continuation_len,
                                 bool add_bos, bool parse_special, int64_t max_tokens,
                                 size_t max_piece, int32_t **ids_out, int32_t *n_out,
                                 int32_t *continuation_start, ps_error *err) {
    *ids_out = NULL;
    *n_out = 0;
    *continuation_start = 0;
    if (context_len > (size_t)INT32_MAX / 4 || continuation_len > (size_t)INT32_MAX / 4)
        return ps_fail(err, PS_ERR_INVALID_ARG, -1, "tokenize_pair: a text over %d bytes",
                       INT32_MAX / 4);
    int32_t *whole = NULL, *ctx = NULL, n_whole = 0, n_ctx = 0;
    ps_status st;
    if (context_len == 0) { /* lm-eval: [prefix_token_id] + encode(continuation) */
        const int32_t prefix = ps_vocab_bos(v) >= 0 ? ps_vocab_bos(v) : ps_vocab_eos(v);
        if (prefix < 0)
            return ps_fail(err, PS_ERR_UNSUPPORTED, -1,
                           "an empty context is scored from the BOS or EOS token, and this "
                           "vocabulary has neither");
        st = ps_vocab_tokenize_alloc_max(v, continuation, continuation_len, false, parse_special,
                                         max_tokens, max_piece, &ctx, &n_ctx, err);
        if (st != PS_OK) return st;
        if (n_ctx == 0) {
            ps_free(ctx);
            return ps_fail(err, PS_ERR_INVALID_ARG, -1,
                           "the continuation has no tokens of its own (it is empty)");
        }
        whole = ps_malloc(((size_t)n_ctx + 1) * sizeof *whole);
        if (!whole) {
            ps_free(ctx);
            return ps_fail(err, PS_ERR_NOMEM, -1, "out of memory (tokenize_pair)");
        }
        whole[0] = prefix;
        memcpy(whole + 1, ctx, (size_t)n_ctx * sizeof *ctx);
        ps_free(ctx);
        *ids_out = whole;
        *n_out = n_ctx + 1;
        *continuation_start = 1;
        return PS_OK;
    }
    const size_t keep = rstrip_len(context, context_len); /* the rest moves */
    char *joined = ps_malloc(context_len + continuation_len + 1);
    if (!joined) return ps_fail(err, PS_ERR_NOMEM, -1, "out of memory (tokenize_pair)");
    memcpy(joined, context, context_len);
    if (continuation_len) memcpy(joined + context_len, continuation, continuation_len);
    st = ps_vocab_tokenize_alloc_max(v, joined, context_len + continuation_len, add_bos,
                                     parse_special, max_tokens, max_piece, &whole, &n_whole, err);
    if (st == PS_OK)
        st = ps_vocab_tokenize_alloc_max(v, context, keep, add_bos, parse_special, max_tokens,
                                         max_piece, &ctx, &n_ctx, err);
    ps_free(joined);
    if (st == PS_OK && n_ctx == 0)
        st = ps_fail(err, PS_ERR_INVALID_ARG, -1,
                     "the context is only whitespace and no BOS is added: nothing conditions "
                     "the first continuation token (give a context, or an empty one to score "
                     "from BOS)");
    else if (st == PS_OK && n_whole <= n_ctx)
        st = ps_fail(err, PS_ERR_INVALID_ARG, -1,
                     "the continuation has no tokens of its own: the pair has %d tokens and "
                     "the context alone %d", n_whole, n_ctx);
    if (st != PS_OK) {
        ps_free(whole);
        ps_free(ctx);
        return st;
    }
    /* the sequence scored is context_enc + continuation_enc, which differs from whole where a
     * token of whole spans the boundary (lm-eval scores this sequence too) */
    memcpy(whole, ctx, (size_t)n_ctx * sizeof *ctx);
    ps_free(ctx);
    *ids_out = whole;
    *n_out = n_whole;
    *continuation_start = n_ctx;
    return PS_OK;
}

ps_status ps_vocab_tokenize_pair(const ps_vocab *v, const char *context, size_t context_len,
                                 const char *continuation, size_t continuation_len,
                                 bool add_bos, bool parse_special, int32_t *ids,
                                 int32_t capacity, int32_t *n_ids, int32_t *continuation_start,
                                 ps_error *err) {
    ps_error_clear(err);
    if (!v || !n_ids || !continuation_start || (context_len && !context) ||
        (continuation_len && !continuation) || capacity < 0 || (capacity > 0 && !ids))
        return ps_fail(err, PS_ERR_INVALID_ARG, -1, "tokenize_pair: NULL or bad arguments");
    int32_t *all = NULL, n = 0, start = 0;
    ps_status st = ps_tokenize_pair_alloc(v, context, context_len, continuation,
                                          continuation_len, add_bos, parse_special, 0, 0, &all,
                                          &n, &start, err);
    *n_ids = n;
    *continuation_start = start;
    if (st == PS_OK && capacity > 0) memcpy(ids, all, (size_t)PS_MIN(n, capacity) * sizeof *ids);
    ps_free(all);
    return st;
}

void ps_continuation_finish(ps_score_result *r, const ps_score_params *p) {
    r->continuation_start = p->continuation_start;
    if (p->continuation_start <= 0) return;
    double sum = 0.0;
    bool greedy = true;
    for (int32_t i = p->continuation_start; i < r->n_prompt; i++) {
        sum += (double)r->logprobs[i];
        greedy = greedy && r->rank[i] == 1;
    }
    r->continuation_logprob = sum;
    r->is_greedy = greedy;
}
