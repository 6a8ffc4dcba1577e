/*
 * session.h — sessions and sequences (session.c): creating, sizing and freeing them, the
 * checked forward entry, the output buffer and the kept sequences. Their types (ps_seq, ps_seg,
 * struct ps_session) are in state.h, below the forward pass, which session.c calls.
 *
 * A forward call takes a batch of segments {sequence, tokens, n}: rows 0..n_1-1 are the first
 * segment's tokens, then the second's, and so on, at most n_batch rows in all. Each row runs at
 * its own sequence's next position and attends over its own sequence's cache; the matmuls run
 * over every row at once. Rows are computed alone, so a row's bits do not depend on what else
 * is in the batch (ps_session_forward_segs; forward.c runs it).
 */
#ifndef PS_SESSION_H
#define PS_SESSION_H

#include "run/state.h"

/* A sequence of n_ctx (1..PS_MAX_CTX) positions for a workspace of n_batch rows (the sliding
 * layers' rings hold swa + n_batch - 1), its K/V in kv_type. PS_OK, or PS_ERR_NOMEM (err says
 * how much the KV cache needed) / PS_ERR_INVALID_ARG. */
ps_status ps_seq_create(const ps_model *model, int32_t n_ctx, int32_t n_batch, ps_kv_type kv_type,
                        ps_seq **out, ps_error *err);
/* NULL is a no-op. */
void ps_seq_free(ps_seq *q);
/* Writes zeros over q's K/V cache (every slot), so that its pages are mapped before a forward
 * pass needs them. A pass writes every position it reads, so no result depends on it. */
void ps_seq_touch(ps_seq *q);

/* The checked forward entry over a batch of n_segs segments: each segment's tokens (in the
 * vocabulary), n >= 1, rows in all <= n_batch, seq->n_past + n <= seq->n_ctx, seq->n_ctx <=
 * the session's n_ctx, each sequence at most once, all of the session's model. Runs them in
 * one forward pass (logits (rows, n_vocab) in segment order when not NULL) and advances each
 * sequence's n_past. PS_OK, PS_ERR_INVALID_ARG, PS_ERR_TOKEN_RANGE or PS_ERR_CONTEXT (nothing
 * is run then). */
ps_status ps_session_forward_segs(ps_session *s, const ps_seg *segs, int32_t n_segs,
                                  float *logits, ps_error *err);

/* The session's output buffer of at least rows x n_vocab floats, grown when needed and kept
 * between calls (allocating it per call made the kernel zero every touched page again, a
 * visible share of a short prompt's time); NULL on allocation failure. */
float *ps_session_logits(ps_session *s, size_t rows);

/* Makes s run in lender's workspace (the forward pass's scratch: activations, matmul and
 * attention scratch) and frees its own, when lender's is at least as large and has as many
 * thread slots; true then, else false and nothing changes. For two sessions that one thread
 * runs one after the other (score's --compare: the base's chunk, then the compared model's):
 * they must never run at the same time, and lender must outlive s. Scores are unchanged (the
 * workspace carries nothing between calls); memory: one workspace less (about 24 MB for a
 * Qwen3-0.6B shape at 256 rows). */
bool ps_session_share_workspace(ps_session *s, const ps_session *lender);

/* Sequence slot i (0..) of the session's kept sequences, holding at least n_ctx positions
 * (recreated when a kept one is shorter), with n_past 0. NULL on allocation failure (err set). */
ps_seq *ps_session_pool_seq(ps_session *s, int32_t i, int32_t n_ctx, ps_error *err);

#endif /* PS_SESSION_H */
