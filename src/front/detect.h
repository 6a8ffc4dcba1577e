/*
 * detect.h — `--detect` / "detect": true in the front ends: the percentages asked (--min-k),
 * the zlib size of a prompt's text, and the per-line "detect" object written from a score
 * result (ps_detect_compute in the core library, plus the zlib ratio, which needs zlib).
 */
#ifndef PS_FRONT_DETECT_H
#define PS_FRONT_DETECT_H

#include "base/buf.h"
#include "promptscore.h"

#define PS_DETECT_DEFAULT_K 20

/* The percentages of min_k and min_k_pp (k[0..n_k), each in [1, 100]). */
typedef struct {
    int32_t n_k;
    int32_t k[PS_DETECT_MAX_K];
} ps_detect_opts;

/* {20}. */
ps_detect_opts ps_detect_default_opts(void);

/* Parses "10,20,30" (integers in [1, 100], at most PS_DETECT_MAX_K, no empty item) into *o.
 * Returns false with why (a sentence naming the bad item) when it is not that. */
bool ps_detect_parse_k(const char *list, ps_detect_opts *o, char *why, size_t why_len);

/* The size in bytes of zlib's compress() of len bytes (Z_DEFAULT_COMPRESSION, the level
 * Python's zlib.compress uses by default), or -1 when out of memory. */
int64_t ps_detect_zlib_len(const void *bytes, size_t len);

/* Appends the "detect" object of a result (scored with stats; compare for ref_ratio) to b:
 * {"min_k": {"K": x, ...}, "min_k_pp": {"K": y, ...}, "zlib_ratio": z[, "ref_ratio": r]}, each
 * non-finite value as null. text / text_len: the bytes the zlib ratio is over (a text
 * prompt as sent); NULL: the bytes of the result's prompt tokens that are not control tokens
 * (ps_vocab_token_bytes; an id prompt). Returns PS_OK, or ps_detect_compute's error (nothing
 * appended), or PS_ERR_NOMEM. */
ps_status ps_detect_write(ps_buf *b, const ps_detect_opts *o, const ps_score_result *r,
                          const ps_vocab *vocab, const char *text, size_t text_len,
                          ps_error *err);

#endif /* PS_FRONT_DETECT_H */
