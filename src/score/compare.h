/*
 * compare.h — many models compared with the base in one pass: what score.c and perplexity.c
 * call (compare.c for ps_score_params.compares, ppl_compare.c for ps_ppl_params.compares).
 * Internal to the score layer.
 */
#ifndef PS_SCORE_COMPARE_H
#define PS_SCORE_COMPARE_H

#include "base/impl.h"
#include "run/session.h"

/* ---- score (compare.c) ---- */

/* The conditions on p->compares for a score of n_tokens tokens through s (each as
 * ps_score_params.compare's, plus: not with compare, distinct, none s). */
ps_status ps_compares_check(const ps_session *s, int32_t n_tokens, const ps_score_params *p,
                            ps_error *err);
/* r->compares: p->n_compares entries of cap positions each, entry 0 set. false: out of memory
 * (what was allocated stays in r for ps_compares_free). */
bool ps_compares_alloc(ps_score_result *r, const ps_score_params *p, int32_t cap);
void ps_compares_free(ps_score_result *r);
/* Resets every compared session. */
void ps_compares_reset(const ps_score_params *p);
/* One chunk: each compared session forwards tokens[p0, p0 + n) into its own logits buffer,
 * then its first m rows (targets[j] = tokens[p0 + j + 1]) are compared with the base's rows
 * (base: m rows of n_vocab; r's logprobs and top-K of entries p0 + 1 .. p0 + m written). */
ps_status ps_compares_chunk(const ps_session *s, const ps_score_params *p,
                            const int32_t *tokens, int32_t p0, int32_t n, int32_t m,
                            const float *base, const int32_t *targets, ps_score_result *r,
                            ps_error *err);

/* ---- perplexity, llama mode (ppl_compare.c) ---- */

typedef struct ps_pplc ps_pplc;

/* The conditions on p->compares for a llama-mode run of ctx-token chunks through s. */
ps_status ps_pplc_check(const ps_session *s, const ps_ppl_params *p, int32_t ctx,
                        ps_error *err);
/* The running state of n_compares comparisons over at most `scored` tokens; NULL on NOMEM. */
ps_pplc *ps_pplc_new(const ps_session *s, const ps_ppl_params *p, int64_t scored);
void ps_pplc_free(ps_pplc *c);
/* A chunk begins: every compared session is reset. */
void ps_pplc_chunk_begin(ps_pplc *c);
/* One batch of a chunk: each compared session forwards tokens[0..nb); rows [r0, r1) of the
 * batch (relative to it) predict targets[0 .. r1 - r0) and are compared with the base's
 * logits of the batch. */
ps_status ps_pplc_batch(ps_pplc *c, const int32_t *tokens, int32_t nb, const float *base,
                        int32_t r0, int32_t r1, const int32_t *targets, ps_error *err);
/* The running statistics after a chunk (the distribution NaN): n_compares entries, valid
 * until the next call. */
const ps_ppl_compare *ps_pplc_running(ps_pplc *c);
/* The final statistics into r->compares (allocated here). */
ps_status ps_pplc_finish(ps_pplc *c, ps_ppl_result *r, ps_error *err);
/* Frees r->compares. */
void ps_pplc_result_free(ps_ppl_result *r);

#endif
