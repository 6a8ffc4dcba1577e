/*
 * extras.h — what the scoring loop (score.c) asks of the per-request additions beside the
 * top-K pass: named tokens (extras_named.c: the log-probabilities of ids a request names, from a
 * chunk's logits and the kernel's lse) and continuations (extras_continuation.c: the sum and
 * is_greedy of a result's continuation tokens). Internal to the score layer.
 */
#ifndef PS_SCORE_EXTRAS_H
#define PS_SCORE_EXTRAS_H
#include "base/impl.h"

/* Checks params' token_ids and continuation_start against a prompt of n_tokens tokens and a
 * vocabulary of n_vocab: PS_OK, PS_ERR_INVALID_ARG or PS_ERR_TOKEN_RANGE with a message. */
ps_status ps_extras_check(const ps_score_params *p, int32_t n_tokens, int32_t n_vocab,
                          ps_error *err);

/* Allocates what params asks of result r of cap entries beyond result_new's arrays: the
 * named tokens' rows (entry 0 NaN), and the rank array a continuation's is_greedy reads (when
 * r has none; dropped with the statistics unless params.stats). false when out of memory. */
bool ps_extras_alloc(ps_score_result *r, const ps_score_params *p, int32_t cap);

/* The named tokens of n_rows rows of logits (stride n_vocab) whose canonical lse the kernel
 * wrote to lse[0..n_rows): out[j * n + t] = logprob of ids[t] in row j, bitwise the value
 * the kernel gives a target or a top-K entry (float32 logit - lse; -inf in a row of -inf). */
void ps_named_rows(const float *logits, int32_t n_rows, int32_t n_vocab, const float *lse,
                   const int32_t *ids, int32_t n, float *out);

/* ps_vocab_tokenize_pair into an allocated array (*ids, free with ps_free; *n of them), with
 * ps_vocab_tokenize_alloc_max's two bounds (max_tokens, max_piece; 0: none) on each text it
 * tokenizes. The front ends' form of it. */
ps_status ps_tokenize_pair_alloc(const ps_vocab *v, const char *context, size_t context_len,
                                 const char *continuation, size_t continuation_len,
                                 bool add_bos, bool parse_special, int64_t max_tokens,
                                 size_t max_piece, int32_t **ids, int32_t *n,
                                 int32_t *continuation_start, ps_error *err);

/* Sets r's continuation fields from its logprobs and rank (p->continuation_start > 0). */
void ps_continuation_finish(ps_score_result *r, const ps_score_params *p);

#endif /* PS_SCORE_EXTRAS_H */
