/*
 * jsonl.h — one line of `promptscore score` input (docs/api.md, "JSON Lines"): the envelope
 * (the pre-scan, the raw id, the line number) unwrapped here, the prompt spec validated by the
 * request module (request.h, the server's checks), and the output lines written back: a
 * scored line or an error line.
 * Kept in the library, apart from the CLI, so that fuzz/fuzz_jsonl.c can drive it.
 *
 *   in:   {"prompt": "text" | [ids], "id": any, "logprobs": K, "logprobs_from": P,
 *          "add_special_tokens": bool, "parse_special": bool, "logprob_token_ids": [ids]}
 *         or "context" and "continuation" (strings) in place of "prompt"
 *         (other keys are ignored)
 *   out:  {"id": <id>, "logprobs": {...}, "sum_logprob": x, "mean_logprob": x,
 *          "perplexity": x, "n_tokens": n}; a pair adds continuation_logprob, is_greedy
 *          and continuation_start before n_tokens
 *   err:  {"id": <id>, "error": {"message", "type": "invalid_request_error", "param", "code"}}
 */
#ifndef PS_JSONL_H
#define PS_JSONL_H

#include "front/jscan.h"
#include "front/json.h"
#include "front/request.h"

/* The longest input line kept (ps_jsonl_limits.max_line_bytes when 0). */
#define PS_JSONL_MAX_LINE_BYTES ((int64_t)16 << 20)
/* The deepest nesting of arrays and objects a line may have. */
#define PS_JSONL_MAX_DEPTH 64

/* What a line is checked against. */
typedef struct {
    const ps_vocab *vocab;  /* tokenises text prompts (NULL: text prompts are an error) */
    int32_t n_vocab;        /* ids in [0, n_vocab); K <= n_vocab */
    int32_t n_ctx;          /* at most n_ctx tokens */
    int32_t default_k;      /* K when the line gives none (or null) */
    bool add_bos;           /* text prompts: prepend BOS when the vocab asks for it */
    int64_t max_line_bytes; /* a longer line is refused (0: PS_JSONL_MAX_LINE_BYTES) */
    bool no_parse_special;  /* text prompts: special-token text stays plain text (the default,
                             * false, recognises it, as the server does: docs/api.md) */
    bool keep_text;         /* text prompts: keep a copy of the text (req->text; --detect) */
    const int32_t *token_ids; /* added: the named tokens of every line that names none (score
                               * --token-ids); NULL: none */
    int32_t n_token_ids;
} ps_jsonl_limits;

typedef struct {
    char *id_json;          /* the line's "id" value as written (raw bytes), or NULL (null) */
    int32_t *ids;           /* n tokens, in range, 1 <= n <= n_ctx (when ok) */
    int32_t n;
    int32_t k;              /* 0 <= k <= n_vocab */
    int32_t logprobs_from;  /* "logprobs_from": entries before it have null values (0) */
    int32_t *prompt_offset; /* n byte offsets into a text prompt (-1 = null), or NULL (ids) */
    bool ok;
    /* when !ok: the error line's fields (request.h); message names the line number and what
     * is wrong; code is also "line_too_long" or "too_deep" (the pre-scan's limits) */
    ps_req_error err;
    /* appended: */
    char *text;             /* with ps_jsonl_limits.keep_text, a text prompt's bytes (owned,
                             * text_len of them), else NULL */
    size_t text_len;
    const char *detect_json;/* set by the caller before ps_jsonl_write_result: the "detect"
                             * object (detect_len bytes, front/detect.h), or NULL; not owned */
    size_t detect_len;
    /* added: */
    int32_t continuation_start; /* a (context, continuation) line: its first continuation
                                   token; 0: a prompt */
    int32_t *token_ids;         /* the line's named tokens (owned), or NULL */
    int32_t n_token_ids;
    bool words;             /* "words": true (the line asks for its words' surprisal) */
} ps_jsonl_req;

/* What the pre-scanner (jscan.h) checks a line against before jansson reads it: the line's
 * bytes (max_line_bytes), nesting (PS_JSONL_MAX_DEPTH), an id list of at most n_ctx ids. A
 * reader feeds each line to a scanner with these as it reads it, and stops keeping a line
 * that is refused (ps_jsonl_refused then writes its error); ps_jsonl_parse checks them too. */
void ps_jsonl_scan_limits(const ps_jsonl_limits *lim, ps_jscan_limits *out);
/* Fills *req (free it with ps_jsonl_req_free) with the error of a line that scan (fed the
 * line's first kept_len bytes, `kept`) refused at a limit; the id is echoed when its value was
 * complete within them. Returns the error's status (PS_ERR_CONTEXT, PS_ERR_LIMIT) or
 * PS_ERR_NOMEM. */
ps_status ps_jsonl_refused(const char *kept, size_t kept_len, int64_t lineno,
                           const ps_jsonl_limits *lim, const ps_jscan *scan, ps_jsonl_req *req);

/* Parses and validates one line (len bytes; a trailing newline is fine). Fills *req, which
 * the caller frees with ps_jsonl_req_free in every case. Returns PS_OK when the line is a
 * valid request (req->ok), PS_ERR_FORMAT / PS_ERR_TOKEN_RANGE / PS_ERR_CONTEXT /
 * PS_ERR_LIMIT for a bad line (req->message says why), PS_ERR_NOMEM. The pre-scan runs first
 * (a line over a limit never reaches jansson); a line that is not JSON still echoes its id
 * when the id's value was complete before the first error. */
ps_status ps_jsonl_parse(const char *line, size_t len, int64_t lineno,
                         const ps_jsonl_limits *lim, ps_jsonl_req *req);
void ps_jsonl_req_free(ps_jsonl_req *req);

/* Appends the error line of req (or of `message` when req has none), newline included. */
void ps_jsonl_write_error(ps_buf *b, const ps_jsonl_req *req);
/* Appends the result line for req scored as r (prompt entries only), newline included:
 * mean_logprob = sum_logprob / (n_tokens - 1) and perplexity = exp(-mean_logprob) (both null
 * for a one-token prompt, which has nothing scored). A compared score (ps_score_params.compare)
 * adds kld_mean (the mean of kld over the scored positions) and same_top1_pct (the share of
 * them with the same top-1, in percent) before n_tokens. Several compared models
 * (ps_score_params.compares) add the "compare" array there instead (ps_json_compares).
 * req->detect_json, when set, is written as "detect" after them. */
void ps_jsonl_write_result(ps_buf *b, const ps_vocab *vocab, const ps_jsonl_req *req,
                           const ps_score_result *r);

#endif /* PS_JSONL_H */
