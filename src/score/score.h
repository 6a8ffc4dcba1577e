/*
 * score.h — what the scorer (score.c) offers the layers above it beyond the public API
 * (include/promptscore.h: ps_score_tokens, ps_score_batch, the prefix cache). Internal.
 *
 * A scheduler over several sessions that share one prefix cache (the engine's workers) may ask,
 * before it takes a prompt, whether scoring it now would compute a block that another score is
 * computing at this moment; if so, and it has other work, it runs that first, and the prompt
 * then finds the block cached instead of computing it a second time. The question is answered
 * from the cache's in-flight claims (prefix_cache.h) for the session's configuration, which
 * stay the scorer's business.
 */
#ifndef PS_SCORE_H
#define PS_SCORE_H

#include "base/impl.h"

/* Whether scoring ids[0, n) with top-K k on session s, with prefix cache c, would first have
 * to compute a block that another score is computing right now (its claim in c, for a top-K
 * >= k): then scoring it after that one inserts would find the block, and those after it that
 * they share, cached. False when c is NULL, when every whole block is cached or the prompt has
 * none. Takes no reference, counts no hit or miss, never waits. */
bool ps_score_block_in_flight(ps_prefix_cache *c, const ps_session *s, const int32_t *ids,
                              int32_t n, int32_t k);

#endif /* PS_SCORE_H */
