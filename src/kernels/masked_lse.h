/*
 * masked_lse.h — the log of the probability mass that one logit row gives a set of token ids
 * (a mask over the vocabulary), exactly over the whole row and in a fixed order, so that the
 * value has the same bits on every ISA and thread count. The word scores (src/score/words.c)
 * take log p(a word begins | context) from it.
 *
 * The procedure (the reference, ps_masked_lse_ref, and the AVX2 / AVX-512 forms compute the
 * same operations in the same order): with the row's canonical lse as the shift (the top-K
 * kernel's, so every term exp(x - lse) <= 1 and nothing overflows), lane j (0..63) adds
 * topk.h's canonical exp of x[i] - lse over the masked elements i = j mod 64, in element
 * order, in float, per chunk of 4096 elements (the last, ragged chunk too); each chunk's lane
 * sums are added into double lane totals; a fixed pairwise tree sums the 64 totals; the value
 * is log(total) in double, rounded once to float: a log-probability (<= 0 up to rounding),
 * -inf when no masked element has mass above exp(-87).
 */
#ifndef PS_MASKED_LSE_H
#define PS_MASKED_LSE_H

#include "base/impl.h"

/* log sum_{i < n, mask[i] != 0} exp(x[i] - lse) as above; lse is the row's canonical lse
 * (ps_lse_f32 of the same row). NaN when lse is not finite. isa: PS_ISA_AUTO picks
 * ps_isa_best(); every ISA gives the same bits. */
float ps_masked_logmass(ps_isa isa, const float *x, const uint8_t *mask, int64_t n, float lse);
/* The plain reference: scalar code, the same bits. */
float ps_masked_logmass_ref(const float *x, const uint8_t *mask, int64_t n, float lse);

#endif /* PS_MASKED_LSE_H */
