/*
 * json.h — the response writer shared by the CLI and the server (a front end): JSON
 * strings and float32 values written so that they parse back to the same float32, the display
 * text of a token, and the OpenAI `logprobs` object of docs/api.md. Parsing of
 * requests and JSONL lines uses jansson; writing the large responses uses this.
 */
#ifndef PS_JSON_H
#define PS_JSON_H

#include "base/buf.h"

/* Routes jansson's allocations through ps_malloc / ps_free (jansson_alloc.c; once per
 * process; kept off when the application set its own jansson allocators). Call before parsing
 * with jansson. */
void ps_json_alloc_init(void);

/* A JSON string literal of n bytes: quoted and escaped; bytes that are not valid UTF-8 become
 * U+FFFD. */
void ps_json_str(ps_buf *b, const char *s, size_t n);
/* A float32 that parses back to the same float32 ("%.9g" shortest form); -inf is written as
 * -9999.0, NaN as null (the contract never asks for NaN or +inf). */
void ps_json_f32(ps_buf *b, float v);
/* A double that parses back to the same double (the shortest of "%.15g".."%.17g"); -inf and
 * NaN as ps_json_f32 writes them. */
void ps_json_f64(ps_buf *b, double v);

/* The display text of token `id` alone, appended to b as UTF-8: the token's bytes
 * (ps_vocab_token_bytes) with every maximal run of bytes that is not valid UTF-8 replaced by
 * U+FFFD; control tokens print as their own text ("<s>"). */
void ps_token_text(ps_buf *b, const ps_vocab *vocab, int32_t id);

/* The OpenAI `logprobs` object for entries [first, r->n_total) of a score result, as
 * docs/api.md says: tokens, token_logprobs (null at entry 0 of the sequence), top_logprobs
 * (top-K plus the scored token, keyed by token text, a duplicate key keeps the first in rank
 * order), text_offset (code points into the concatenated token texts, starting at
 * text_offset0), prompt_offset (prompt_offset[i] = byte offset of entry i in the prompt as
 * sent, -1 or a NULL array = null; generated entries are null), token_ids, top_ids.
 * When the result holds them: entropy, rank and varentropy (ps_score_params.stats), kld,
 * same_top1 and dp (ps_score_params.compare), arrays aligned with token_logprobs (null where
 * it is null); token_id_logprobs (ps_score_params.token_ids): per entry the list of the named
 * ids' logprobs in the order asked, null where token_logprobs is null.
 * When text is not NULL the concatenation of the entries' token texts is appended to it.
 * Writes nothing else (the caller writes the key "logprobs": before it). */
void ps_json_logprobs(ps_buf *b, const ps_vocab *vocab, const ps_score_result *r,
                      int32_t first, int64_t text_offset0, const int32_t *prompt_offset,
                      ps_buf *text);
/* A continuation's answer (ps_score_params.continuation_start), as ,"key":value pairs to
 * put in an object: continuation_logprob (a double), is_greedy, continuation_start (an
 * index into token_ids). Nothing when r has no continuation. */
void ps_json_continuation(ps_buf *b, const ps_score_result *r);
/* The same with the values of entries before values_from (an entry index: the prompt's
 * position) written as null in token_logprobs, top_logprobs and top_ids (the request field
 * "logprobs_from" of docs/api.md); tokens, token_ids and the offsets stay whole, and every
 * value written is the one ps_json_logprobs writes. values_from <= 0: all of them. */
void ps_json_logprobs_from(ps_buf *b, const ps_vocab *vocab, const ps_score_result *r,
                           int32_t first, int32_t values_from, int64_t text_offset0,
                           const int32_t *prompt_offset, ps_buf *text);

/* With several compared models (ps_score_params.compares; json_compare.c): ,"compare":[...],
 * one object per model {model, kld, same_top1, dp, kld_mean, same_top1_pct}, the arrays over
 * entries [first, end) aligned with token_logprobs (null before values_from, where the
 * logprob is NaN and on generated entries). Nothing when the result has none. */
void ps_json_compares(ps_buf *b, const ps_score_result *r, int32_t first, int32_t end,
                      int32_t values_from);
/* json_words.c: appends ,"words":[...] for a result scored with ps_score_params.words (nothing
 * when r has no word masses): ps_score_words over r and prompt_offset (the prompt's byte
 * offsets, or NULL for an id prompt). Returns false (b marked out of memory) when the words
 * cannot be made. */
bool ps_json_words(ps_buf *b, const ps_vocab *vocab, const ps_score_result *r,
                   const int32_t *prompt_offset);

#endif
