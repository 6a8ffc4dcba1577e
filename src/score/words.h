/*
 * words.h — what scoring (score.c) asks of the word scores (words.c): the vocabulary's
 * word-start mask and the per-row masses a score with ps_score_params.words records.
 */
#ifndef PS_WORDS_H
#define PS_WORDS_H

#include "base/impl.h"

/* Two masks of n_vocab bytes each, ps_malloc'd -> *out: the first has 1 for the ids whose
 * text begins a word (a Unicode whitespace character first; control tokens never) and for
 * EOS; the second for the ids that are neither control tokens, nor EOS, nor begin with
 * whitespace (text that continues a word). Returns
 * PS_OK, PS_ERR_UNSUPPORTED (the vocabulary marks no word start: no token but byte tokens
 * begins with whitespace followed by more text; the message says word scores are not
 * available for this tokenizer), PS_ERR_NOMEM. */
ps_status ps_words_mask(const ps_vocab *v, uint8_t **out, ps_error *err);

/* For rows [0, n_rows) of logits (stride n_vocab) whose canonical lse is in out[j] on entry:
 * out[j] = log of the mass the row gives the masked ids (kernels/masked_lse.h), rows spread
 * over pool. */
void ps_words_rows(ps_pool *pool, const float *logits, int32_t n_rows, int32_t n_vocab,
                   const uint8_t *mask, float *out);

#endif /* PS_WORDS_H */
