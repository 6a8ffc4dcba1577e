/*
 * server.h — the OpenAI-compatible HTTP server (server.c) in three separable parts:
 *
 *   1. request parsing + validation: pure functions from body bytes to a validated request, or
 *      to an OpenAI-shaped error with its HTTP status (what fuzz/fuzz_request.c drives);
 *   2. the engine: a bounded queue of prompts served by worker threads, each with its own
 *      ps_session (KV cache) and ps_pool over the one shared, read-only ps_model;
 *   3. HTTP on libmicrohttpd: routes, response writing (json.h), metrics, access log.
 *
 * The routes, fields, defaults, limits and errors are those of docs/api.md.
 */
#ifndef PS_SERVER_H
#define PS_SERVER_H

#include "impl.h"

/* ---- 1. request parsing ------------------------------------------------------------------ */

/* An error as the client sees it: HTTP status + OpenAI's {"error": {message, type, param,
 * code}}. Empty param/code are written as null. */
typedef struct {
    int status;          /* 400, 404, 405, 413, 500, 503 */
    char type[32];       /* "invalid_request_error", "server_error", ... */
    char param[32];
    char code[40];
    char message[400];
} ps_http_error;

/* What the validator checks a request against. */
typedef struct {
    const char *model_name;  /* the served name; a request's "model" must equal it */
    const ps_vocab *vocab;   /* tokenises string prompts; NULL: string prompts are a 400 */
    int32_t n_vocab;         /* token ids must be in [0, n_vocab) */
    int32_t n_ctx;           /* prompt tokens + max_tokens <= n_ctx */
    int32_t max_logprobs;    /* K <= max_logprobs */
    int32_t max_prompts;     /* prompts per request; 0 = no limit */
} ps_req_limits;

typedef struct {
    int32_t *ids;  /* owned */
    int32_t n;
    int32_t *prompt_offset; /* owned: n byte offsets into a text prompt (-1 = null); NULL for ids */
} ps_req_prompt;

/* A validated POST /v1/completions. */
typedef struct {
    ps_req_prompt *prompts;  /* n_prompts >= 1, each n >= 1, ids in range */
    int32_t n_prompts;
    bool echo;
    int32_t logprobs;        /* -1: null (no logprobs object); else K >= 0 */
    int32_t logprobs_from;   /* entries before this position have null values (default 0) */
    int32_t max_tokens;      /* default 16 */
    float temperature;       /* default 1 (as OpenAI) */
    float top_p;             /* default 1 */
    bool has_seed;
    uint64_t seed;
    char **stop;             /* n_stop non-empty strings, owned */
    int32_t n_stop;
    int64_t prompt_tokens;   /* sum of the prompts' lengths */
} ps_completion_req;

/* What a request's body costs to parse and tokenize, per byte, at most: measured, jansson's
 * tree of a list of small integers ~22 bytes per byte of text, SentencePiece on a 2.5 MB text
 * that is one word ~38; counted against the memory budget from the declared length, before the
 * body is read. */
#define PS_PARSE_BYTES_PER_BYTE 48

/* An upper estimate of the answer's size in bytes, from the validated request (docs/api.md:
 * per prompt 256 + per entry 16, plus 48 + 56 x (K + 1) per entry with logprobs). */
int64_t ps_completion_estimate(const ps_completion_req *req);

/* Parses and validates a /v1/completions body of len bytes (not NUL-terminated). On success
 * returns true and fills *out (free with ps_completion_req_free); otherwise returns false,
 * fills *e, and *out holds nothing to free. Never crashes on any input. */
bool ps_completion_req_parse(const char *body, size_t len, const ps_req_limits *lim,
                             ps_completion_req *out, ps_http_error *e);
void ps_completion_req_free(ps_completion_req *req);

/* POST /tokenize {"prompt": str, "add_special_tokens": bool} -> the ids (owned, *n_ids >= 0).
 * "content" (llama.cpp's name) is accepted in place of "prompt". */
bool ps_tokenize_req_parse(const char *body, size_t len, const ps_req_limits *lim,
                           int32_t **ids, int32_t *n_ids, ps_http_error *e);
/* POST /detokenize {"tokens": [ids]} -> the ids (owned, *n_ids >= 0), each in range. */
bool ps_detokenize_req_parse(const char *body, size_t len, const ps_req_limits *lim,
                             int32_t **ids, int32_t *n_ids, ps_http_error *e);

/* Fills e; returns false so that `return http_fail(...)` reads well. */
bool ps_http_fail(ps_http_error *e, int status, const char *param, const char *code,
                  const char *fmt, ...) PS_PRINTF(5, 6);

/* ---- 2 + 3. the server ------------------------------------------------------------------- */

typedef struct ps_server ps_server;

typedef struct {
    const char *host;        /* IPv4 address to bind; default "127.0.0.1" */
    int32_t port;            /* 0 = any free port (see ps_server_port) */
    int32_t n_threads;       /* threads for the forward passes, all workers together; 0 = CPUs */
    int32_t n_workers;       /* engine workers (one session + pool each); default 1 */
    int32_t max_logprobs;    /* K cap, at most n_vocab; -1 (default) = min(128, n_vocab) */
    int64_t max_body;        /* request body cap in bytes; default 16 MiB */
    int32_t queue;           /* requests admitted and not finished; more get 503; default 64 */
    /* bounded work (docs/api.md "Bounded work"): a request is admitted on its headers,
     * against queue and the memory budget, before a byte of its body is read */
    int64_t mem_budget;      /* bytes all requests in flight may hold; default 1 GiB */
    int32_t max_prompts;     /* prompts per request; default 2048 */
    int64_t max_response;    /* largest estimated answer in bytes; default 256 MiB */
    const char *name;        /* served model name; NULL = the model's name */
    ps_act act;              /* activations of the matrix products; default PS_ACT_NATIVE */
    /* who may ask (server_guard.h); docs/api.md "Access" */
    const char *api_key;       /* NULL = none; else every route but /health and / needs
                                * "Authorization: Bearer KEY" */
    const char *allowed_hosts; /* comma-separated Host names accepted besides IP literals and
                                * localhost; "*" = any; NULL = none */
    const char *cors_origin;   /* the one origin allowed cross-origin; NULL = CORS off */
    /* connections (server_conns.h) */
    int32_t max_connections;   /* open connections at once; default 2048 */
    int32_t per_ip;            /* open connections per client address; default 32 */
    double read_timeout_s;     /* a request's headers + body must arrive within; default 30 */
    int32_t idle_timeout_s;    /* a kept-alive connection with no byte is closed after; 10 */
    double drain_s;            /* at stop, running requests get this long; default 30 */
    /* one line per request (no newline); NULL = no log. Called from connection threads. */
    void (*log)(void *ctx, const char *line);
    void *log_ctx;
} ps_server_config;

ps_server_config ps_server_default_config(void);

/* Starts listening and the engine workers. The model must outlive the server. */
ps_status ps_server_start(const ps_model *model, const ps_server_config *cfg, ps_server **out,
                          ps_error *err);
/* The port actually bound. */
int32_t ps_server_port(const ps_server *s);
/* Stops accepting, cuts connections whose request has not arrived, lets admitted requests
 * finish for up to drain_s seconds, then cancels what still runs, closes every connection,
 * stops the workers and frees everything. */
void ps_server_stop(ps_server *s);

#endif
