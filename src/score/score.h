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
 *
 * A server may also ask, before its first request, that the memory a batch of prompts will
 * use be mapped now (ps_score_warm): on a machine where a page fault is dear (a VM), first
 * touching the pass's logits and the kept sequences' K/V made the first batched request pay
 * for those faults (docs/figures.md, "Batching on by default").
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

/* Maps, before any score, the memory that the first ps_score_batch of up to max_seqs prompts of
 * up to n_pos positions each (generation included) on s would otherwise first touch while it
 * runs: the session's logits buffer for a pass of its n_batch rows plus the generation row,
 * and kept sequences 0 .. max_seqs - 1 of at least n_pos positions (rounded up to 16, at most
 * the session's n_ctx), their K/V written with zeros. Longer prompts later grow the sequences
 * as before. No score depends on it (a pass writes every K/V position before it reads it).
 * PS_ERR_INVALID_ARG for a NULL session or max_seqs / n_pos < 1, PS_ERR_NOMEM. */
ps_status ps_score_warm(ps_session *s, int32_t max_seqs, int32_t n_pos, ps_error *err);

#endif /* PS_SCORE_H */
