/*
 * request.h — the one request path's first step (request.c): a prompt spec, already unwrapped
 * from its envelope (an HTTP body or one JSON Lines line) into a JSON object, to token ids and
 * a validated job, or to one error {status, param, code, message, byte offset}.
 *
 * The spec (docs/api.md, "POST /v1/completions" and "JSON Lines"): prompt (text | [text] | ids
 * | [ids]), logprobs (K), logprobs_from, echo, max_tokens, temperature, top_p, seed, stop,
 * model, n / best_of / stream / suffix (neutral values only), add_special_tokens and
 * parse_special (the tokenization policy: special-token text is its token unless
 * parse_special is false). A JSON Lines line reads a subset (ps_req_limits.line). The server
 * (server.c) and the JSONL reader (jsonl.c) only unwrap their envelope and write the error
 * into their own output with ps_req_error_write, the one writer of OpenAI's error object.
 */
#ifndef PS_REQUEST_H
#define PS_REQUEST_H

#include "base/buf.h"
#include "base/impl.h"

#include <jansson.h>

/* An error as the client sees it: the HTTP status the server answers with (400, 404, 413, 500,
 * 503; a JSON Lines error line carries no status but the same fields), the library's kind
 * (PS_ERR_FORMAT, PS_ERR_TOKEN_RANGE, PS_ERR_CONTEXT, PS_ERR_LIMIT, PS_ERR_NOMEM, ...), the
 * request field it concerns and OpenAI's code (empty: null), the message, and the byte offset
 * in the envelope where a parser found it (-1: none). OpenAI's "type" follows from status:
 * "server_error" from 500 on, else "invalid_request_error". */
typedef struct {
    int status;
    ps_status st;
    char param[32];
    char code[40];
    char message[400];
    int64_t offset;
} ps_req_error;

/* Fills e (status, its default kind: PS_ERR_INTERNAL from 500 on, PS_ERR_FORMAT below; no
 * offset); returns false so that `return ps_req_fail(...)` reads well. */
bool ps_req_fail(ps_req_error *e, int status, const char *param, const char *code,
                 const char *fmt, ...) PS_PRINTF(5, 6);
/* OpenAI's error object {"message", "type", "param", "code"} of e (empty param / code: null),
 * without the {"error": ...} around it, which the envelope writes. */
void ps_req_error_write(ps_buf *b, const ps_req_error *e);
/* A JSON value for a message: "true", "a string", "an array", "1.5", "2.0" (a real keeps its
 * point, so the message shows why it is no integer), ... */
void ps_req_describe(const json_t *v, char *out, size_t cap);

/* The default bound on one piece the tokenizer merges whole (a pre-tokenized word; a
 * SentencePiece segment): its merge state is tens of bytes per byte, so this caps a request's
 * tokenizer memory near 128 MiB while no text of words passes near it. */
#define PS_REQ_MAX_PIECE ((size_t)4 << 20)

/* What a request is checked against. Zero-initialised fields are the server's defaults. */
typedef struct {
    const char *model_name;  /* the served name; a request's "model" must equal it */
    const ps_vocab *vocab;   /* tokenises string prompts; NULL: string prompts are a 400 */
    int32_t n_vocab;         /* token ids must be in [0, n_vocab) */
    int32_t n_ctx;           /* prompt tokens + max_tokens <= n_ctx */
    int32_t max_logprobs;    /* K <= max_logprobs */
    int32_t max_prompts;     /* prompts per request; 0 = no limit */
    size_t max_piece;        /* the longest piece the tokenizer merges whole (a word); 0:
                              * PS_REQ_MAX_PIECE. Longer: 413 (the tokenizer's memory bound) */
    bool no_add_special;     /* add_special_tokens' default false (BOS is not added) */
    bool no_parse_special;   /* parse_special's default false (special-token text is plain) */
    /* A JSON Lines line (docs/api.md, "JSON Lines"): one prompt (text or ids, or one
     * context + continuation pair), and only the fields prompt, context, continuation,
     * logprobs (default_logprobs when absent or null), logprobs_from, add_special_tokens,
     * parse_special and logprob_token_ids (token_ids_logprob) are read; every other key is ignored, max_tokens
     * is 0 and logprobs is never null. */
    bool line;
    int32_t default_logprobs;
    bool keep_text;          /* appended: keep a copy of each text prompt (ps_req_prompt.text) */
    /* Added after default_logprobs: */
    const char *model_alias;  /* a second name a request's "model" may give (the GGUF file's
                               * base name without .gguf, as llama.cpp's server accepts);
                               * NULL: none */
    const int32_t *token_ids; /* the named tokens of a request that names none (score
                               * --token-ids); NULL: none */
    int32_t n_token_ids;
} ps_req_limits;

typedef struct {
    int32_t *ids;  /* owned */
    int32_t n;
    int32_t *prompt_offset; /* owned: n byte offsets into a text prompt (-1 = null); NULL for ids */
    /* appended: with ps_req_limits.keep_text or "detect": true, a copy of a text prompt's
     * bytes (owned, text_len of them); NULL for ids */
    char *text;
    size_t text_len;
    int32_t continuation_start; /* added: a (context, continuation) pair's first continuation
                                   token (ps_score_params.continuation_start); 0: a prompt */
} ps_req_prompt;

/* A validated job: the prompts' token ids and how to score them. */
typedef struct {
    ps_req_prompt *prompts;  /* n_prompts >= 1, each n >= 1, ids in range */
    int32_t n_prompts;
    bool echo;
    int32_t logprobs;        /* -1: null (no logprobs object); else K >= 0 */
    int32_t logprobs_from;   /* entries before this position have null values (default 0) */
    int32_t max_tokens;      /* default 16 (a line: 0) */
    float temperature;       /* default 1 (as OpenAI) */
    float top_p;             /* default 1 */
    bool has_seed;
    uint64_t seed;
    char **stop;             /* n_stop non-empty strings, owned */
    int32_t n_stop;
    int64_t prompt_tokens;   /* sum of the prompts' lengths */
    bool stats;              /* "stats": true adds entropy, rank and varentropy to the
                                logprobs object (default false) */
    /* appended: */
    bool detect;             /* "detect": true adds each choice's "detect" object (default
                                false; the server's requests) */
    int32_t n_min_k;         /* "min_k": the percentages of min_k / min_k_pp (default {20}) */
    int32_t min_k[PS_DETECT_MAX_K];
    int32_t *token_ids;      /* "logprob_token_ids" (or SGLang's "token_ids_logprob"): the named
                                tokens, owned (or the limits' default, copied); NULL: none */
    int32_t n_token_ids;
    bool pairs;              /* the prompts are (context, continuation) pairs */
    bool words;              /* "words": true adds each prompt's words and their surprisal
                                (default false; server and JSON Lines) */
} ps_completion_req;

/* request_pairs.c: the fields of what scorers compute. Whether root gives "context" or
 * "continuation" (then ps_req_parse_pairs reads the prompts, not "prompt"). */
bool ps_req_has_pairs(json_t *root);
/* The (context, continuation) pairs of root into r->prompts (docs/api.md, "Continuations"):
 * "context" a string or a list of strings, "continuation" a string or a list of strings; a
 * string against a list is that string for every entry of the list, two lists must have the
 * same length. Each pair is tokenized by lm-eval's rule (ps_vocab_tokenize_pair) and must fit
 * the context with r->max_tokens. Errors: a context without a continuation (or the reverse),
 * "prompt" too, a list on a line, and the tokenizer's. */
bool ps_req_parse_pairs(json_t *root, const ps_req_limits *lim, bool add_special,
                        bool parse_special, ps_completion_req *r, ps_req_error *e);
/* "logprob_token_ids" or "token_ids_logprob" (not both): a list of token ids in range, at
 * most n_vocab of them, into r->token_ids; absent or null: lim's default. */
bool ps_req_parse_token_ids(json_t *root, const ps_req_limits *lim, ps_completion_req *r,
                            ps_req_error *e);

/* Validates the object root against lim into *out (free with ps_completion_req_free). Returns
 * true, or false with *e filled and nothing in *out to free. Never crashes on any value. */
bool ps_request_from_json(json_t *root, const ps_req_limits *lim, ps_completion_req *out,
                          ps_req_error *e);
void ps_completion_req_free(ps_completion_req *req);

/* Loads len bytes (not NUL-terminated) as a JSON object: valid UTF-8, no raw NUL byte, numbers
 * that fit; U+0000 inside strings is allowed (strings are used with their lengths). Returns
 * the object (json_decref it) or NULL with a 400 (500: out of memory) in *e, with the byte
 * offset where one is known. */
json_t *ps_request_load_object(const char *body, size_t len, ps_req_error *e);

/* An HTTP body: ps_request_load_object + ps_request_from_json. */
bool ps_completion_req_parse(const char *body, size_t len, const ps_req_limits *lim,
                             ps_completion_req *out, ps_req_error *e);

/* The scorer's parameters the validated request asks for (ps_score_default_params with its
 * top-K: logprobs, 0 when null; max_tokens, temperature, top_p, its stop strings, borrowed
 * from req) and the sampling seed: what a job of the engine (engine.h) scores it with. */
ps_score_params ps_completion_score_params(const ps_completion_req *req, uint64_t seed);

/* An upper estimate of the answer's size in bytes, from the validated request (docs/api.md:
 * per prompt 256 + per entry 16, plus 48 + 56 x (K + 1) per entry with logprobs, and
 * 4 + 16 per named token id with logprob_token_ids). */
int64_t ps_completion_estimate(const ps_completion_req *req);

/* POST /tokenize {"prompt": str, "add_special_tokens": bool, "parse_special": bool} -> the ids
 * (owned, *n_ids >= 0). "content" (llama.cpp's name) is accepted in place of "prompt". */
bool ps_tokenize_req_parse(const char *body, size_t len, const ps_req_limits *lim,
                           int32_t **ids, int32_t *n_ids, ps_req_error *e);
/* POST /detokenize {"tokens": [ids]} -> the ids (owned, *n_ids >= 0), each in range. */
bool ps_detokenize_req_parse(const char *body, size_t len, const ps_req_limits *lim,
                             int32_t **ids, int32_t *n_ids, ps_req_error *e);

#endif /* PS_REQUEST_H */
