/*
 * server.h — the OpenAI-compatible HTTP server (server.c): HTTP on libmicrohttpd, routes,
 * admission on the headers, response writing (json.h) and the access log. A completion goes
 * one way: the body is validated by request.h into a job, which the engine schedules and
 * scores, and its results are written back here.
 *
 * The routes, fields, defaults, limits and errors are those of docs/api.md.
 */
#ifndef PS_SERVER_H
#define PS_SERVER_H

#include "base/impl.h"
#include "front/request.h"

/* What a request's body is expected to cost to parse and tokenize, per byte: the room a
 * request is granted from the memory budget on its declared length, before the body is read
 * (jansson's tree of a list of small integers and SentencePiece on a long one-word text stay
 * within it). An estimate for admission only: what the parse really allocates is counted as
 * it is allocated (impl.h's meters), so a body that costs more is refused as it goes. */
#define PS_PARSE_BYTES_PER_BYTE 48

/* The address bound when none is given, and the logprobs cap when none is given (at most
 * n_vocab): the defaults ps_server_default_config() and `serve --help` both show. */
#define PS_SERVER_HOST "127.0.0.1"
#define PS_SERVER_MAX_LOGPROBS 128

typedef struct ps_server ps_server;

typedef struct {
    const char *host;        /* address to bind; default PS_SERVER_HOST */
    int32_t port;            /* 0 = any free port (see ps_server_port) */
    int32_t n_threads;       /* threads for the forward passes, all workers together; 0 = CPUs */
    int32_t n_workers;       /* engine workers (one session + pool each); default 1 */
    int32_t max_seqs;        /* prompts of one request a worker runs per forward pass
                              * (ps_score_batch); default 1 = one prompt at a time */
    int32_t max_logprobs;    /* K cap, at most n_vocab; -1 (default) =
                              * min(PS_SERVER_MAX_LOGPROBS, n_vocab) */
    int64_t max_body;        /* request body cap in bytes; default 16 MiB */
    int32_t queue;           /* requests admitted and not finished; more get 503; default 64 */
    /* bounded work (docs/api.md "Bounded work"): a request is admitted on its headers,
     * against queue and the memory budget, before a byte of its body is read */
    int64_t mem_budget;      /* bytes all requests in flight may hold, counted per
                              * allocation (docs/api.md "Bounded work"); default 1 GiB */
    int32_t max_prompts;     /* prompts per request; default 2048 */
    int64_t max_response;    /* largest estimated answer in bytes; default 256 MiB */
    const char *name;        /* served model name; NULL = the model's name */
    ps_act act;              /* activations of the matrix products; default PS_ACT_NATIVE */
    ps_kv_type kv_type;      /* the workers' K/V cache type; default PS_KV_F32 */
    ps_prefix_cache *cache;  /* the prefix cache the workers share (it outlives the server);
                              * NULL = none (the default) */
    const ps_model *compare; /* a second model with the same vocabulary (it outlives the
                              * server): every prompt is also run through it and the logprobs
                              * object gets kld, same_top1 and dp (ps_score_params.compare;
                              * requests must then have max_tokens 0, and there is no prefix
                              * cache); /v1/models names it in meta.compare. NULL = none */
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
    /* (added with many compared models) several compared models (they and the array outlive
     * the server): every prompt runs through each, the base once (ps_score_params.compares),
     * and the logprobs object gets "compare", one object per model (ps_json_compares);
     * /v1/models names them in meta.compares. Excludes compare. NULL / 0 = none */
    const ps_model *const *compares;
    int32_t n_compares;
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
