/*
 * vocab.h — internal interface of the tokenizer (vocab.c). The model loader builds a ps_vocab
 * from the tokenizer.ggml.* keys of an open GGUF file; the public ps_vocab_* functions of
 * promptscore.h then work on it. A loaded vocab copies what it needs out of the file (it does
 * not keep pointers into the ps_gguf), is read-only afterwards and may be shared by threads.
 */
#ifndef PS_VOCAB_H
#define PS_VOCAB_H

#include "gguf/gguf.h"

/* Reads and validates tokenizer.ggml.* from g. Returns PS_OK, PS_ERR_FORMAT (malformed key,
 * named), PS_ERR_NOT_FOUND (a required key is missing, named), PS_ERR_UNSUPPORTED (tokenizer
 * model or pre-tokenizer name), PS_ERR_NOMEM. *out is set only on success; g may be closed
 * afterwards. */
ps_status ps_vocab_load(const ps_gguf *g, ps_vocab **out, ps_error *err);
/* NULL is a no-op. */
void ps_vocab_free(ps_vocab *v);

/* ps_vocab_tokenize into a ps_malloc'd array of exactly the right size: *ids (free with ps_free)
 * and *n. Returns what ps_vocab_tokenize returns, PS_ERR_INVALID_ARG for a text of more than
 * INT32_MAX / 2 bytes, or PS_ERR_NOMEM; *ids is NULL on error. */
ps_status ps_vocab_tokenize_alloc(const ps_vocab *v, const char *text, size_t len, bool add_bos,
                                  bool parse_special, int32_t **ids, int32_t *n, ps_error *err);

/* ps_vocab_tokenize_alloc for a caller that takes at most max_tokens tokens (> 0; 0: no
 * limit): a text that certainly has more (longer than max_tokens times the most bytes one
 * token of this vocabulary stands for) is refused before it is tokenized, PS_ERR_CONTEXT with
 * its length and that bound in err. So the tokenizer's memory (tens of bytes per byte of the
 * longest word) stays within what a text of max_tokens tokens can need, whatever the text.
 * Never refuses a text of at most max_tokens tokens; a text that passes is tokenized exactly
 * as ps_vocab_tokenize_alloc does (its count may still exceed max_tokens: the caller checks).
 * In a vocabulary where some byte can yield no token (no <unk> and no byte tokens, or merges
 * whose result is no token) no length bounds the count, and nothing is refused.
 * max_piece (0: no limit) bounds the merge loop's memory whatever max_tokens is: a piece it
 * must merge whole (a pre-tokenized BPE word, a SentencePiece segment) of more bytes is
 * refused, PS_ERR_LIMIT naming its length, before the state for it (tens of bytes per byte)
 * is made. */
ps_status ps_vocab_tokenize_alloc_max(const ps_vocab *v, const char *text, size_t len,
                                      bool add_bos, bool parse_special, int64_t max_tokens,
                                      size_t max_piece, int32_t **ids, int32_t *n,
                                      ps_error *err);

/* Where each of n ids (what ps_vocab_tokenize made of text, len bytes; bos_added: ids[0] is
 * the BOS it added) starts in text, in bytes -> out[i], or -1 for a token that stands for no
 * byte of the text: the added BOS, the SentencePiece space prefix alone, or a token the text
 * does not spell at that point (<unk>). Byte tokens of one character each get their own
 * offset. */
void ps_vocab_prompt_offsets(const ps_vocab *v, const char *text, size_t len, const int32_t *ids,
                             int32_t n, bool bos_added, int32_t *out);

/* The pieces the pre-tokenizer regexes of a byte-level BPE vocab cut text (len bytes) into,
 * before any merge and without cutting out special tokens: the start offset of each piece ->
 * starts[0, min(*n_pieces, capacity)), its count -> *n_pieces (0 for an empty text). For
 * tests and tools that check a split. Returns PS_OK, PS_ERR_INVALID_ARG (NULL arguments, a
 * SentencePiece vocab), PS_ERR_NOMEM. */
ps_status ps_vocab_pre_split(const ps_vocab *v, const char *text, size_t len, size_t *starts,
                             size_t capacity, size_t *n_pieces, ps_error *err);
/* Whether tokenizing adds a space in front of the text (a SentencePiece vocab with
 * add_space_prefix): the first token's leading space, and the one after each special token,
 * is then not in the text (as ps_vocab_prompt_offsets counts it). */
bool ps_vocab_space_prefix(const ps_vocab *v);
#endif /* PS_VOCAB_H */
