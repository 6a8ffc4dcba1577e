/*
 * server.c — the OpenAI-compatible HTTP server: POST /v1/completions (echo + logprobs, the
 * scoring request of lm-evaluation-harness), /v1/models, /health, /tokenizer_info, /tokenize,
 * /detokenize, /metrics and the page at /.
 *
 * A completion goes one way: the body is validated by the request module (request.c: body
 * bytes -> a validated job, or an OpenAI-shaped error with its status); the job goes to the
 * engine (engine.c: a round-robin line of admitted requests, workers with a ps_session each);
 * the results are written here with json.h. A request is admitted on its headers, before its
 * body is read: against the engine's slots (--queue) and a memory budget (--mem-budget), a
 * body of undeclared length (chunked) charged for what has arrived as it comes; more get 503.
 * While it is handled, every allocation made for it is charged to its meter (base/impl.h) and
 * the one that passes the budget is refused (413 / 503); the charge is let go as the answer is
 * handed over, so a client never waits on its own previous request. Headers that two readers
 * could take two ways are a 400. libmicrohttpd runs one thread per connection; the connection
 * thread validates, submits, then waits for its job while watching its socket: a client that
 * hangs up cancels the job, which ps_score_tokens polls between chunks and workers check
 * before starting a prompt. Counters and latencies go to metrics.c.
 * A request owns all of its memory, so a bad or cancelled one cannot change the next.
 */
#include "serve/server.h"
#include "front/engine.h"
#include "front/request.h"
#include "front/jscan.h"
#include "serve/metrics.h"
#include "front/json.h"
#include "front/detect.h"
#include "serve/server_conns.h"
#include "serve/server_guard.h"
#include "base/testhooks.h"
#include "base/util.h"
#include "model/vocab.h"

/* With --max-seqs > 1 each worker maps, at start, the memory of a batch of prompts of up to
 * this many positions (engine.h warm_pos): the first batched request then pays no page faults
 * for it (on the 2-core VM of docs/figures.md, ~2 s of CPU on the Qwen3-0.6B BF16 shape, as
 * much as the batch itself); longer prompts grow the kept sequences as before. */
#define PS_SERVER_WARM_POS 64

#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <malloc.h>
#include <math.h>
#include <microhttpd.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#if defined(__has_include)
#if __has_include("page.h")
#include "serve/page.h"
#define PS_HAVE_PAGE 1
#endif
#endif

/* Routes, for dispatch and metrics. */
enum {
    R_COMPLETIONS, R_MODELS, R_HEALTH, R_TOKENIZER_INFO, R_TOKENIZE, R_DETOKENIZE, R_METRICS,
    R_PAGE, R_OTHER, R_COUNT
};
static const struct {
    const char *path;
    const char *method;
} ROUTES[R_COUNT] = {
    [R_COMPLETIONS] = {"/v1/completions", "POST"}, [R_MODELS] = {"/v1/models", "GET"},
    [R_HEALTH] = {"/health", "GET"},               [R_TOKENIZER_INFO] = {"/tokenizer_info", "GET"},
    [R_TOKENIZE] = {"/tokenize", "POST"},          [R_DETOKENIZE] = {"/detokenize", "POST"},
    [R_METRICS] = {"/metrics", "GET"},             [R_PAGE] = {"/", "GET"},
    [R_OTHER] = {"other", ""},
};

/* The request line and header limits answered in JSON, and libmicrohttpd's per-connection
 * buffer, which must hold them with room to spare (past it, libmicrohttpd answers by itself). */
enum { PS_MAX_URI = 8192, PS_MAX_HEADERS = 16384, PS_HTTP_POOL = 65536 };

/* A request whose meter peaked at this many bytes or more has the allocator trim its free
 * memory once it has let go (let_go). */
#define PS_TRIM_BYTES ((int64_t)8 << 20)

struct ps_server {
    /* configuration */
    ps_server_config cfg;
    char name[160];
    char alias[160];         /* the GGUF file's base name without .gguf: a second model name */
    const ps_model *model;
    const ps_vocab *vocab;
    ps_model_info info;
    char compare_file[128]; /* the compared model's file name, "" when none */
    const ps_model *const *compares; /* ps_server_config.compares (n_compares of them) */
    int32_t n_compares;
    ps_req_limits limits;
    ps_engine *engine;          /* admission slots (--queue), the line, the workers */
    ps_mem_pool pool;           /* the memory budget (--mem-budget): each request's meter
                                 * draws on it (impl.h) */
    pthread_mutex_t mu;         /* guards the two below */
    int32_t connections;        /* requests begun and not completed (for shutdown) */
    bool draining;              /* shutting down: new requests with a body get 503 */
    /* who may ask (copies of the configuration's strings) */
    char *api_key, *allowed_hosts, *cors_origin;
    ps_conns *conns;
    /* HTTP */
    struct MHD_Daemon *daemon;
    int32_t port;
    atomic_uint_fast64_t next_id;
    ps_metrics metrics;
};

/* ========================================================================================== */
/* 2. HTTP                                                                                    */
/* ========================================================================================== */

typedef struct {
    int route;
    bool method_ok;
    ps_buf body;
    bool too_large;
    bool responded;
    bool cors;          /* the request's Origin is --cors-origin: answers carry its headers */
    bool queued;        /* holds one of the --queue slots (a completion) */
    bool scanning;      /* the body goes through scan as it arrives (a completion) */
    ps_jscan scan;      /* refuses a prompt list or an id list over the limits before the
                         * body is whole, so jansson never builds it */
    bool refused;       /* the scan refused the body: the rest is dropped unread into memory,
                         * and `refusal` is the answer once it has arrived */
    ps_req_error refusal;
    bool started;       /* its headers have been through guard and admission */
    bool close;         /* close the connection after the answer (ambiguous framing) */
    ps_mem_meter meter; /* its share of the memory budget: attached to the connection's thread
                         * while it handles the request, so every allocation of the body, the
                         * parse, the tokens and the answer is charged as it is made */
    int64_t covered;    /* a body of undeclared length (chunked): the bytes of it whose parse
                         * the meter has been granted room for; -1 when the length was declared */
    double t0;          /* ps_now_s() when the request arrived */
    int64_t prompt_tokens;
} conn;

static void record(ps_server *s, conn *c, const char *method, const char *url, int status) {
    double secs = ps_now_s() - c->t0;
    ps_metrics_record(&s->metrics, c->route, status, secs);
    if (s->cfg.log) {
        char line[512];
        snprintf(line, sizeof line, "%s %.200s %d %lld %.1f", method, url, status,
                 (long long)c->prompt_tokens, secs * 1e3);
        s->cfg.log(s->cfg.log_ctx, line);
    }
}

/* A static 500 "out of memory" answer: needs no allocation of ours. */
static enum MHD_Result respond_oom(struct MHD_Connection *mc) {
    static char oom[] = "{\"error\":{\"message\":\"out of memory serving the request\","
                        "\"type\":\"server_error\",\"param\":null,\"code\":null}}";
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(sizeof oom - 1, oom, MHD_RESPMEM_PERSISTENT);
    if (!resp) return MHD_NO;
    MHD_add_response_header(resp, "Content-Type", "application/json");
    enum MHD_Result ret = MHD_queue_response(mc, 500, resp);
    MHD_destroy_response(resp);
    return ret;
}

/* An answer on its way out: its bytes and the share of the memory budget they hold. The
 * reader copies them into libmicrohttpd's send buffer a piece at a time; as it copies the
 * last piece it frees them and gives their share back, before that piece is written to the
 * socket, so a client that has read the whole answer finds the budget free of it. */
typedef struct {
    ps_mem_pool *pool;
    int64_t held;
    char *data;
    size_t len;
} answer_out;

static void answer_done(answer_out *a) {
    ps_free(a->data);
    a->data = NULL;
    ps_mem_pool_give(a->pool, a->held);
    a->held = 0;
}

static ssize_t answer_read(void *cls, uint64_t pos, char *buf, size_t max) {
    answer_out *a = cls;
    if (!a->data || pos >= a->len) return MHD_CONTENT_READER_END_OF_STREAM;
    size_t n = PS_MIN(max, a->len - (size_t)pos);
    memcpy(buf, a->data + pos, n);
    if (pos + n == a->len) answer_done(a);
    return (ssize_t)n;
}

static void answer_free(void *cls) {
    answer_done(cls);
    ps_free(cls);
}

/* What a request holds, let go once its answer is written and before it is queued: the body,
 * its --queue slot and its share of the memory budget but the answer's own bytes (`data`,
 * charged to the answer until its last byte is copied out). A client that sends its next
 * request as soon as it has read an answer is never refused for the one before. After a
 * request that held much, the allocator gives its free pages back to the system (glibc keeps
 * them per thread arena otherwise, and the next request may be served from another arena). */
static int64_t let_go(ps_server *s, conn *c, char *data) {
    ps_buf_free(&c->body);
    if (c->queued) ps_engine_leave(s->engine);
    c->queued = false;
    bool big = c->meter.peak >= PS_TRIM_BYTES;
    int64_t held = ps_mem_meter_release(&c->meter, ps_mem_block_bytes(data));
    c->meter.peak = 0;
#if defined(__GLIBC__)
    if (big) malloc_trim(0);
#else
    (void)big;
#endif
    return held;
}

/* Queues `len` bytes of `data` (taken over: freed with ps_free) as the response. */
static enum MHD_Result respond(ps_server *s, struct MHD_Connection *mc, conn *c,
                               const char *method, const char *url, int status,
                               const char *ctype, char *data, size_t len, const char *allow) {
    struct MHD_Response *resp = NULL;
    int64_t held = let_go(s, c, data);
    if (data) {
        answer_out *a = ps_malloc(sizeof *a);
        if (a) {
            *a = (answer_out){&s->pool, held, data, len};
            resp = MHD_create_response_from_callback(len, 32768, answer_read, a, answer_free);
            if (!resp) answer_free(a);
        } else { /* out of memory: the static 500 instead */
            ps_free(data);
            ps_mem_pool_give(&s->pool, held);
            c->responded = true;
            record(s, c, method, url, 500);
            return respond_oom(mc);
        }
    } else {
        resp = MHD_create_response_from_buffer(len, NULL, MHD_RESPMEM_PERSISTENT);
    }
    c->responded = true;
    record(s, c, method, url, status);
    if (!resp) return MHD_NO;
    MHD_add_response_header(resp, "Content-Type", ctype);
    if (c->close) MHD_add_response_header(resp, "Connection", "close");
    if (status == 503) MHD_add_response_header(resp, "Retry-After", "1");
    if (allow) MHD_add_response_header(resp, "Allow", allow);
    if (status == 401) MHD_add_response_header(resp, "WWW-Authenticate", "Bearer");
    if (s->cors_origin) {
        MHD_add_response_header(resp, "Vary", "Origin");
        if (c->cors) MHD_add_response_header(resp, "Access-Control-Allow-Origin", s->cors_origin);
    }
    enum MHD_Result ret = MHD_queue_response(mc, (unsigned)status, resp);
    MHD_destroy_response(resp);
    return ret;
}

static enum MHD_Result respond_error(ps_server *s, struct MHD_Connection *mc, conn *c,
                                     const char *method, const char *url, const ps_req_error *e,
                                     const char *allow);
static bool budget_refusal(ps_server *s, conn *c, const char *what, ps_req_error *e);

static enum MHD_Result respond_buf(ps_server *s, struct MHD_Connection *mc, conn *c,
                                   const char *method, const char *url, int status, ps_buf *b,
                                   const char *ctype) {
    ps_req_error e;
    if (b->oom && budget_refusal(s, c, "writing the answer", &e)) {
        ps_buf_free(b);
        return respond_error(s, mc, c, method, url, &e, NULL);
    }
    if (b->oom) {
        ps_buf_free(b);
        let_go(s, c, NULL);
        c->responded = true;
        record(s, c, method, url, 500);
        return respond_oom(mc);
    }
    char *data = b->data;
    size_t len = b->len;
    b->data = NULL;
    b->len = b->cap = 0;
    return respond(s, mc, c, method, url, status, ctype, data, len, NULL);
}

/* A request whose meter was refused room while `what`: the answer is a 413 when the request
 * alone would pass the budget, else a 503 (requests in flight hold the rest). False when its
 * meter was never refused (a real allocation failure, answered 500). */
static bool budget_refusal(ps_server *s, conn *c, const char *what, ps_req_error *e) {
    if (!c->meter.refused) return false;
    c->meter.refused = false; /* told once: a failure while answering it is a plain 500 */
    memset(e, 0, sizeof *e);
    int64_t budget = s->cfg.mem_budget;
    if (c->meter.wanted > budget)
        ps_req_fail(e, 413, NULL, "request_too_large",
                     "%s needed at least %lld bytes of memory, over this server's memory budget "
                     "of %lld (--mem-budget); the request was refused as the memory was counted",
                     what, (long long)c->meter.wanted, (long long)budget);
    else
        ps_req_fail(e, 503, NULL, NULL,
                     "the server is busy: %s needed %lld bytes of memory and requests in flight "
                     "hold the rest of its %lld bytes of memory budget; retry later",
                     what, (long long)c->meter.wanted, (long long)budget);
    return true;
}

/* A job's results were allocated by the workers: they are freed with no meter attached, so
 * they are not credited to a meter they were never charged to (impl.h). */
static void job_free(ps_engine_job *j) {
    ps_mem_meter *m = ps_mem_meter_attach(NULL);
    ps_engine_job_free(j);
    ps_mem_meter_attach(m);
}

static void write_error(ps_buf *b, const ps_req_error *e) {
    ps_buf_puts(b, "{\"error\":");
    ps_req_error_write(b, e);
    ps_buf_puts(b, "}");
}

static enum MHD_Result respond_error(ps_server *s, struct MHD_Connection *mc, conn *c,
                                     const char *method, const char *url, const ps_req_error *e,
                                     const char *allow) {
    ps_buf b;
    ps_buf_init(&b);
    /* small and bounded: written outside the request's meter, so a request refused for want
     * of budget still gets its answer */
    ps_mem_meter *m = ps_mem_meter_attach(NULL);
    write_error(&b, e);
    ps_mem_meter_attach(m);
    if (b.oom) return respond_buf(s, mc, c, method, url, e->status, &b, "application/json");
    char *data = b.data;
    return respond(s, mc, c, method, url, e->status, "application/json", data, b.len, allow);
}

/* Appends bytes with every run of invalid UTF-8 replaced by U+FFFD (plain text, not JSON).
 * A run here is one invalid byte and the continuation bytes after it, not json.c's maximal
 * run of invalid bytes: "\xC3\xE6\x97" gives two U+FFFD here and one in a token's text. Kept
 * apart so that the completion text stays byte for byte what it was. */
static void append_sanitized(ps_buf *b, const char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        size_t bad = i + ps_utf8_bad_offset((const unsigned char *)s + i, n - i);
        ps_buf_append(b, s + i, bad - i);
        if (bad >= n) break;
        ps_buf_append(b, "\xef\xbf\xbd", 3);
        i = bad + 1;
        while (i < n && ((unsigned char)s[i] & 0xc0) == 0x80) i++; /* the rest of the run */
    }
}

/* The choice's text. Without echo: the generated text (the tokens' bytes decoded together,
 * so a character split over byte tokens comes out whole; cut at the stop string or before
 * EOS when generation stopped). With echo: the display text of every token, prompt and
 * generated (docs/api.md: text is the concatenation of tokens, so text_offset
 * holds); when a stop string begins inside the last generated token, only that token's
 * bytes before it (a token that is cut keeps its whole text in tokens[]). */
static void choice_text(ps_server *s, const ps_completion_req *r, const ps_score_result *res,
                        ps_buf *text) {
    if (r->echo) {
        bool cut = res->finish == PS_FINISH_STOP && res->stop_text_len >= 0 && res->n_gen > 0;
        int32_t whole = cut ? res->n_total - 1 : res->n_total;
        for (int32_t i = 0; i < whole; i++) ps_token_text(text, s->vocab, res->tokens[i]);
        const char *bytes;
        size_t n;
        if (cut && ps_vocab_token_bytes(s->vocab, res->tokens[whole], &bytes, &n) == PS_OK)
            append_sanitized(text, bytes, PS_MIN(n, (size_t)res->stop_text_len));
        return;
    }
    if (res->n_gen == 0) return;
    /* the cut is score.c's (stop_text_len), the same as with echo: a stop string that spans
     * tokens is cut before its first byte, whichever token that byte is in */
    ps_buf gen;
    ps_buf_init(&gen);
    int32_t end = res->n_total;
    int32_t eos = ps_vocab_eos(s->vocab);
    bool cut = res->finish == PS_FINISH_STOP && res->stop_text_len >= 0;
    if (!cut && res->finish == PS_FINISH_STOP && eos >= 0 && res->tokens[end - 1] == eos) end--;
    for (int32_t i = res->n_prompt; i < end; i++) {
        const char *bytes;
        size_t n;
        if (ps_vocab_token_bytes(s->vocab, res->tokens[i], &bytes, &n) == PS_OK)
            ps_buf_append(&gen, bytes, cut && i == end - 1 ? PS_MIN(n, (size_t)res->stop_text_len) : n);
    }
    if (gen.data) append_sanitized(text, gen.data, gen.len);
    if (gen.oom) text->oom = true;
    ps_buf_free(&gen);
}

/* The "detect" object of choice i (front/detect.h): its prompt's text as sent, or its ids. */
static void write_detect(ps_server *s, const ps_completion_req *r, int32_t i,
                         const ps_score_result *x, ps_buf *b) {
    ps_detect_opts o;
    memset(&o, 0, sizeof o);
    o.n_k = r->n_min_k;
    memcpy(o.k, r->min_k, sizeof o.k);
    ps_buf_puts(b, ",\"detect\":");
    ps_error err;
    if (ps_detect_write(b, &o, x, s->vocab, r->prompts[i].text, r->prompts[i].text_len, &err) !=
        PS_OK)
        ps_buf_puts(b, "null"); /* the request was checked (2 tokens or more): out of memory */
}

static void write_completion(ps_server *s, const ps_completion_req *r, const ps_engine_job *j,
                             ps_buf *b) {
    uint64_t id = atomic_fetch_add(&s->next_id, 1);
    int64_t completion_tokens = 0;
    ps_buf_printf(b, "{\"id\":\"cmpl-%016llx\",\"object\":\"text_completion\",\"created\":%lld,"
                     "\"model\":",
                  (unsigned long long)id, (long long)time(NULL));
    ps_json_str(b, s->name, strlen(s->name));
    ps_buf_puts(b, ",\"choices\":[");
    ps_buf text;
    ps_buf_init(&text);
    for (int32_t i = 0; i < r->n_prompts; i++) {
        const ps_score_result *x = ps_engine_job_result(j, i);
        completion_tokens += x->n_gen;
        ps_buf_reset(&text);
        choice_text(s, r, x, &text);
        if (text.oom) b->oom = true;
        ps_buf_printf(b, "%s{\"index\":%d,\"text\":", i ? "," : "", (int)i);
        ps_json_str(b, text.data ? text.data : "", text.len);
        ps_buf_puts(b, ",\"logprobs\":");
        ps_score_result shown = *x; /* "detect" alone computes the statistics: not shown */
        if (!r->stats) shown.entropy = shown.varentropy = NULL, shown.rank = NULL;
        if (r->logprobs < 0) ps_buf_puts(b, "null");
        else ps_json_logprobs_from(b, s->vocab, &shown, r->echo ? 0 : x->n_prompt,
                                   r->logprobs_from, 0, r->prompts[i].prompt_offset, NULL);
        if (r->detect) write_detect(s, r, i, x, b);
        ps_json_continuation(b, x);
        ps_json_words(b, s->vocab, x, r->prompts[i].prompt_offset);
        ps_buf_printf(b, ",\"finish_reason\":\"%s\"}",
                      x->finish == PS_FINISH_STOP ? "stop" : "length");
    }
    ps_buf_free(&text);
    ps_buf_printf(b, "],\"usage\":{\"prompt_tokens\":%lld,\"completion_tokens\":%lld,"
                     "\"total_tokens\":%lld}}",
                  (long long)r->prompt_tokens, (long long)completion_tokens,
                  (long long)(r->prompt_tokens + completion_tokens));
}

/* True when the connection is gone: reset by the peer, an error on the socket, or closed in
 * both directions. An end of file alone is not: a client may half-close its socket
 * (shutdown(SHUT_WR)) once it has sent its request and still read the answer, and TCP cannot
 * tell that from a close until something is written; such a request runs to its end (bounded
 * by the limits) and an answer nobody reads is dropped. */
static bool peer_gone(void *ctx) {
    struct MHD_Connection *mc = ctx;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return false;
    struct pollfd p = {.fd = ci->connect_fd, .events = POLLIN};
    if (poll(&p, 1, 0) <= 0) return false;
    if (p.revents & (POLLHUP | POLLERR | POLLNVAL)) return true;
    if (p.revents & POLLIN) {
        char ch;
        ssize_t n = recv(ci->connect_fd, &ch, 1, MSG_PEEK | MSG_DONTWAIT);
        return n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
    }
    return false;
}

/* The answer and result share of a parsed completion, taken before any scoring: over
 * --max-response is a 413; then the results (written by the workers, charged as their
 * estimate) and room for the answer (written here, charged as it is written) join the
 * request's share of the memory budget. False with *e the answer when refused. */
static bool reserve_answer(ps_server *s, conn *c, const ps_completion_req *req,
                           ps_req_error *e) {
    int64_t est = ps_completion_estimate(req);
    if (req->logprobs >= 0) /* several compared models: each entry's kld, same_top1, dp per model */
        est += (int64_t)s->n_compares * 48 * req->prompt_tokens;
    if (est > s->cfg.max_response)
        return ps_req_fail(e, 413, NULL, "response_too_large",
                            "the answer to this request would be about %lld bytes, over this "
                            "server's limit of %lld (--max-response); ask for fewer prompts, "
                            "tokens or logprobs",
                            (long long)est, (long long)s->cfg.max_response);
    ps_mem_meter_trim(&c->meter); /* the parse's spare room goes back */
    int64_t held = c->meter.granted, budget = s->cfg.mem_budget;
    if (ps_mem_meter_charge(&c->meter, est / 2) && ps_mem_meter_grant(&c->meter, est))
        return true;
    if (held + est + est / 2 > budget)
        return ps_req_fail(e, 413, NULL, "request_too_large",
                            "this request needs about %lld bytes (its answer and results), over "
                            "this server's memory budget of %lld (--mem-budget)",
                            (long long)(held + est + est / 2), (long long)budget);
    return ps_req_fail(e, 503, NULL, NULL,
                        "the server is busy: requests in flight hold %lld of its %lld bytes of "
                        "memory budget and this one needs %lld more; retry later",
                        (long long)ps_mem_pool_used(&s->pool), (long long)budget,
                        (long long)(est + est / 2));
}

/* Scores a validated completion on the engine and writes its answer into *b, or its error
 * into *e (e->status 0: the answer is in b). *gone: the client hung up (nobody reads). */
static void run_completion(ps_server *s, struct MHD_Connection *mc, const ps_completion_req *req,
                           ps_buf *b, ps_req_error *e, bool *gone) {
    uint64_t seed = req->seed;
    if (!req->has_seed) {
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        seed = ((uint64_t)t.tv_nsec << 20) ^ (uint64_t)t.tv_sec ^
               (atomic_fetch_add(&s->next_id, 1) * 0x9e3779b97f4a7c15ull);
    }
    const ps_score_params sp = ps_completion_score_params(req, seed);
    ps_engine_job *j = ps_engine_job_new(req->n_prompts, &sp);
    for (int32_t i = 0; j && i < req->n_prompts; i++) {
        ps_engine_job_set_prompt(j, i, req->prompts[i].ids, req->prompts[i].n);
        ps_engine_job_set_continuation(j, i, req->prompts[i].continuation_start);
    }
    if (!j) {
        ps_req_fail(e, 500, NULL, NULL, "out of memory admitting the request");
        return;
    }
    /* the slot was taken on the headers (admit); a drain that began since refuses the job */
    bool full = ps_engine_submit(s->engine, j) != PS_ENGINE_OK;
    ps_status jst = PS_OK;
    ps_error jerr;
    bool aborted = false;
    if (!full) {
        ps_engine_wait(s->engine, j, peer_gone, mc);
        jst = ps_engine_job_status(j, &jerr, &aborted);
    }
    if (full) {
        ps_req_fail(e, 503, NULL, NULL, "the server is shutting down");
    } else if (jst == PS_ERR_CANCELLED && aborted) {
        ps_req_fail(e, 503, NULL, NULL,
                     "the server is shutting down: the request did not finish within the drain "
                     "deadline (--drain-s)");
    } else if (jst == PS_ERR_CANCELLED) {
        *gone = true; /* the client is gone: nobody reads an answer */
    } else if (jst != PS_OK) {
        int status = jst == PS_ERR_CONTEXT || jst == PS_ERR_TOKEN_RANGE ||
                             jst == PS_ERR_INVALID_ARG
                         ? 400
                         : 500;
        ps_req_fail(e, status, NULL, jst == PS_ERR_CONTEXT ? "context_length_exceeded" : NULL,
                     "scoring failed (%s): %s", ps_status_str(jst), jerr.message);
    } else {
        write_completion(s, req, j, b);
    }
    job_free(j);
}

static enum MHD_Result handle_completions(ps_server *s, struct MHD_Connection *mc, conn *c,
                                         const char *method, const char *url) {
    ps_req_error e;
    memset(&e, 0, sizeof e);
    ps_completion_req req;
    bool parsed = ps_completion_req_parse(c->body.data, c->body.len, &s->limits, &req, &e);
    ps_buf_free(&c->body); /* parsed: its bytes are no longer needed */
    if (!parsed) {
        budget_refusal(s, c, "parsing the request", &e);
        return respond_error(s, mc, c, method, url, &e, NULL);
    }
    c->prompt_tokens = req.prompt_tokens;
    if (!reserve_answer(s, c, &req, &e)) {
        ps_completion_req_free(&req);
        return respond_error(s, mc, c, method, url, &e, NULL);
    }
    ps_buf b;
    ps_buf_init(&b);
    bool gone = false;
    memset(&e, 0, sizeof e);
    run_completion(s, mc, &req, &b, &e, &gone);
    ps_completion_req_free(&req); /* before the answer is queued: let_go counts it gone */
    if (gone) {
        ps_buf_free(&b);
        let_go(s, c, NULL);
        c->responded = true;
        record(s, c, method, url, 499);
        return MHD_NO;
    }
    if (e.status) {
        ps_buf_free(&b);
        return respond_error(s, mc, c, method, url, &e, NULL);
    }
    return respond_buf(s, mc, c, method, url, 200, &b, "application/json");
}

static enum MHD_Result handle_tokenize(ps_server *s, struct MHD_Connection *mc, conn *c,
                                       const char *method, const char *url, bool detok) {
    ps_req_error e;
    memset(&e, 0, sizeof e);
    int32_t *ids = NULL, n = 0;
    bool ok = detok ? ps_detokenize_req_parse(c->body.data, c->body.len, &s->limits, &ids, &n, &e)
                    : ps_tokenize_req_parse(c->body.data, c->body.len, &s->limits, &ids, &n, &e);
    ps_buf_free(&c->body);
    if (!ok) {
        budget_refusal(s, c, "parsing the request", &e);
        return respond_error(s, mc, c, method, url, &e, NULL);
    }
    ps_buf b;
    ps_buf_init(&b);
    if (!detok) {
        ps_buf_puts(&b, "{\"tokens\":[");
        for (int32_t i = 0; i < n; i++) ps_buf_printf(&b, i ? ",%d" : "%d", (int)ids[i]);
        ps_buf_printf(&b, "],\"count\":%d,\"max_model_len\":%d}", (int)n, (int)s->info.n_ctx);
    } else {
        size_t need = 0;
        ps_status st = ps_vocab_detokenize(s->vocab, ids, n, true, NULL, 0, &need);
        char *text = st == PS_OK ? ps_malloc(need + 1) : NULL;
        if (text) st = ps_vocab_detokenize(s->vocab, ids, n, true, text, need + 1, &need);
        if (st != PS_OK || !text) {
            ps_free(text);
            ps_free(ids);
            ps_buf_free(&b);
            ps_req_fail(&e, st == PS_OK ? 500 : 400, "tokens", NULL, "detokenize failed: %s",
                         st == PS_OK ? "out of memory" : ps_status_str(st));
            return respond_error(s, mc, c, method, url, &e, NULL);
        }
        ps_buf_puts(&b, "{\"prompt\":");
        ps_json_str(&b, text, need);
        ps_buf_puts(&b, "}");
        ps_free(text);
    }
    ps_free(ids);
    return respond_buf(s, mc, c, method, url, 200, &b, "application/json");
}

static void token_text_json(ps_buf *b, const ps_vocab *v, int32_t id) {
    if (id < 0) {
        ps_buf_puts(b, "null");
        return;
    }
    ps_buf t;
    ps_buf_init(&t);
    ps_token_text(&t, v, id);
    ps_json_str(b, t.data ? t.data : "", t.len);
    if (t.oom) b->oom = true;
    ps_buf_free(&t);
}

/* The prefix cache's counters (--cache-mb; nothing when it is off). */
static void write_cache_metrics(ps_prefix_cache *c, ps_buf *b) {
    if (!c) return;
    ps_prefix_cache_stats st;
    ps_prefix_cache_get_stats(c, &st);
    ps_buf_printf(b,
                  "# HELP promptscore_prefix_cache_hits_total Prompt blocks found in the prefix cache.\n"
                  "# TYPE promptscore_prefix_cache_hits_total counter\n"
                  "promptscore_prefix_cache_hits_total %lld\n"
                  "# HELP promptscore_prefix_cache_misses_total Whole prompt blocks not found.\n"
                  "# TYPE promptscore_prefix_cache_misses_total counter\n"
                  "promptscore_prefix_cache_misses_total %lld\n"
                  "# HELP promptscore_prefix_cache_evictions_total Blocks evicted for room.\n"
                  "# TYPE promptscore_prefix_cache_evictions_total counter\n"
                  "promptscore_prefix_cache_evictions_total %lld\n"
                  "# HELP promptscore_prefix_cache_bytes Memory held by cached blocks.\n"
                  "# TYPE promptscore_prefix_cache_bytes gauge\n"
                  "promptscore_prefix_cache_bytes %lld\n"
                  "# HELP promptscore_prefix_cache_budget_bytes The prefix cache's budget (--cache-mb).\n"
                  "# TYPE promptscore_prefix_cache_budget_bytes gauge\n"
                  "promptscore_prefix_cache_budget_bytes %lld\n"
                  "# HELP promptscore_prefix_cache_blocks Blocks cached now.\n"
                  "# TYPE promptscore_prefix_cache_blocks gauge\n"
                  "promptscore_prefix_cache_blocks %lld\n"
                  "# HELP promptscore_prefix_cache_idle_bytes Memory of evicted blocks kept for new ones.\n"
                  "# TYPE promptscore_prefix_cache_idle_bytes gauge\n"
                  "promptscore_prefix_cache_idle_bytes %lld\n",
                  (long long)st.hits, (long long)st.misses, (long long)st.evictions,
                  (long long)st.bytes, (long long)st.budget_bytes, (long long)st.blocks,
                  (long long)st.idle_bytes);
}

static void write_metrics(ps_server *s, ps_buf *b) {
    ps_metrics_gauges g;
    memset(&g, 0, sizeof g);
    ps_engine_get_stats(s->engine, &g.engine);
    g.mem_used = ps_mem_pool_used(&s->pool);
    g.mem_budget = s->cfg.mem_budget;
    g.connections_open = ps_conns_open(s->conns);
    g.connections_timed_out = ps_conns_timed_out(s->conns);
    ps_metrics_write(&s->metrics, &g, b);
    write_cache_metrics(s->cfg.cache, b);
}

static enum MHD_Result dispatch(ps_server *s, struct MHD_Connection *mc, conn *c,
                                const char *method, const char *url) {
    ps_req_error e;
    memset(&e, 0, sizeof e);
    if (c->route == R_OTHER && strstr(url, "/chat/completions")) {
        ps_req_fail(&e, 404, NULL, "unsupported_route",
                     "%.200s is not served here: this server scores prompts and completes text "
                     "with POST /v1/completions (echo + logprobs give every prompt token's "
                     "logprob). A chat route would wrap the messages in the model's chat "
                     "template, adding tokens of its own, so the scores would no longer be those "
                     "of the text sent; format the conversation yourself and send it as "
                     "\"prompt\" to /v1/completions",
                     url);
        return respond_error(s, mc, c, method, url, &e, NULL);
    }
    if (c->route == R_OTHER) {
        ps_req_fail(&e, 404, NULL, NULL, "Unknown route: %.20s %.200s", method, url);
        return respond_error(s, mc, c, method, url, &e, NULL);
    }
    if (!c->method_ok) {
        ps_req_fail(&e, 405, NULL, NULL, "Method %.20s is not allowed on %s; use %s", method,
                     ROUTES[c->route].path, ROUTES[c->route].method);
        return respond_error(s, mc, c, method, url, &e, ROUTES[c->route].method);
    }
    if (c->too_large) {
        ps_req_fail(&e, 413, NULL, NULL,
                     "the request body is over this server's limit of %lld bytes (--max-body)",
                     (long long)s->cfg.max_body);
        return respond_error(s, mc, c, method, url, &e, NULL);
    }
    ps_buf b;
    ps_buf_init(&b);
    switch (c->route) {
    case R_COMPLETIONS: return handle_completions(s, mc, c, method, url);
    case R_TOKENIZE: return handle_tokenize(s, mc, c, method, url, false);
    case R_DETOKENIZE: return handle_tokenize(s, mc, c, method, url, true);
    case R_MODELS:
        ps_buf_puts(&b, "{\"object\":\"list\",\"data\":[{\"id\":");
        ps_json_str(&b, s->name, strlen(s->name));
        ps_buf_printf(&b, ",\"object\":\"model\",\"created\":0,\"owned_by\":\"promptscore\","
                          "\"max_model_len\":%d,\"meta\":{\"file\":",
                      (int)s->info.n_ctx);
        ps_json_str(&b, s->info.file, strlen(s->info.file));
        ps_buf_puts(&b, ",\"arch\":");
        ps_json_str(&b, s->info.arch, strlen(s->info.arch));
        ps_buf_puts(&b, ",\"weight_type\":");
        ps_json_str(&b, s->info.weight_type, strlen(s->info.weight_type));
        ps_buf_printf(&b, ",\"n_params\":%lld,\"n_vocab\":%d,\"n_ctx_train\":%d,\"size\":%lld",
                      (long long)s->info.n_params, (int)s->info.n_vocab, (int)s->info.n_ctx_train,
                      (long long)s->info.file_bytes);
        if (s->compare_file[0]) { /* served with a compared model: the page offers KLD */
            ps_buf_puts(&b, ",\"compare\":");
            ps_json_str(&b, s->compare_file, strlen(s->compare_file));
        }
        for (int32_t i = 0; i < s->n_compares; i++) { /* several: their file names */
            ps_model_info ci;
            ps_model_get_info(s->compares[i], &ci);
            ps_buf_puts(&b, i ? "," : ",\"compares\":[");
            ps_json_str(&b, ci.file, strlen(ci.file));
            if (i == s->n_compares - 1) ps_buf_putc(&b, ']');
        }
        ps_buf_puts(&b, "}}]}");
        return respond_buf(s, mc, c, method, url, 200, &b, "application/json");
    case R_HEALTH:
        ps_buf_puts(&b, "{\"status\":\"ok\"}");
        return respond_buf(s, mc, c, method, url, 200, &b, "application/json");
    case R_TOKENIZER_INFO:
        ps_buf_puts(&b, "{\"eos_token\":");
        token_text_json(&b, s->vocab, ps_vocab_eos(s->vocab));
        ps_buf_puts(&b, ",\"bos_token\":");
        token_text_json(&b, s->vocab, ps_vocab_bos(s->vocab));
        ps_buf_printf(&b, ",\"pad_token\":null,\"eos_token_id\":%d,\"bos_token_id\":%d,\"add_bos_token\":%s,"
                          "\"model_max_length\":%d,\"vocab_size\":%d,\"chat_template\":null,"
                          "\"tokenizer_class\":\"promptscore\"}",
                      (int)ps_vocab_eos(s->vocab), (int)ps_vocab_bos(s->vocab),
                      ps_vocab_add_bos(s->vocab) ? "true" : "false", (int)s->info.n_ctx,
                      (int)s->info.n_vocab);
        return respond_buf(s, mc, c, method, url, 200, &b, "application/json");
    case R_METRICS:
        write_metrics(s, &b);
        return respond_buf(s, mc, c, method, url, 200, &b, "text/plain; version=0.0.4");
    case R_PAGE:
#ifdef PS_HAVE_PAGE
        ps_buf_append(&b, ps_page_html, ps_page_html_len);
        return respond_buf(s, mc, c, method, url, 200, &b, "text/html; charset=utf-8");
#else
        ps_buf_free(&b);
        ps_req_fail(&e, 404, NULL, NULL, "this build has no page at /");
        return respond_error(s, mc, c, method, url, &e, NULL);
#endif
    default:
        ps_buf_free(&b);
        ps_req_fail(&e, 500, NULL, NULL, "route %d has no handler", c->route);
        return respond_error(s, mc, c, method, url, &e, NULL);
    }
}

/* The headers, read once with their lengths: their size, how often the ones that must be
 * given once were given, whether any name or value holds a NUL byte (a C string would end at
 * it), whether a name is not an HTTP token, whether Content-Length is one run of digits, and
 * the Authorization value. */
typedef struct {
    size_t bytes;
    int n_length, n_host, n_auth, n_encoding, n;
    bool nul, bad_name, bad_length;
    const char *host, *auth;
    size_t host_len, auth_len;
    const char **keys; /* every header's name and value in order (cut_by_nul) */
} header_scan;

/* A header name as RFC 9112 allows it: one or more token characters. libmicrohttpd keeps the
 * whitespace of "Transfer-Encoding : chunked" in the name, so that header would be no
 * Transfer-Encoding here while a proxy that trims the name frames the body by it. */
static bool header_name_ok(const char *key, size_t n) {
    if (n == 0) return false;
    for (size_t i = 0; i < n; i++) {
        const unsigned char ch = (unsigned char)key[i];
        const bool alnum = (ch >= '0' && ch <= '9') || ((ch | 32) >= 'a' && (ch | 32) <= 'z');
        if (!(alnum || (ch && strchr("!#$%&'*+-.^_`|~", ch)))) return false;
    }
    return true;
}

static enum MHD_Result scan_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                   size_t key_size, const char *value, size_t value_size) {
    header_scan *h = cls;
    h->n++;
    h->bytes += key_size + value_size + 4;
    if (!value) value = "";
    if (strlen(key) != key_size || strlen(value) != value_size) h->nul = true;
    if (!header_name_ok(key, key_size)) h->bad_name = true;
    if (!strcasecmp(key, "Content-Length")) {
        h->n_length++;
        h->bad_length |= value_size == 0 || value_size > 19 ||
                         strspn(value, "0123456789") != value_size;
    } else if (!strcasecmp(key, "Host")) {
        h->n_host++;
        h->host = value;
        h->host_len = value_size;
    } else if (!strcasecmp(key, "Authorization")) {
        h->n_auth++;
        h->auth = value;
        h->auth_len = value_size;
    } else if (!strcasecmp(key, "Transfer-Encoding")) {
        h->n_encoding++;
    }
    return MHD_YES;
}

static enum MHD_Result keep_key(void *cls, enum MHD_ValueKind kind, const char *key,
                                size_t key_size, const char *value, size_t value_size) {
    header_scan *h = cls;
    h->keys[2 * h->n] = key;
    h->keys[2 * h->n + 1] = value ? value : "";
    h->n++;
    return MHD_YES;
}

/* libmicrohttpd up to 0.9.75 gives a header value as a C string whose length is taken with
 * strlen, so a NUL sent inside a value hides what follows it ("Bearer KEY\0junk" reads
 * "Bearer KEY"). Its names and values point into the request as received, in order, each line
 * end written over with NULs: a value's terminator is followed by the next header's name
 * (after a bare \n) or by one more NUL and that name (after \r\n); for the last value, by a
 * NUL (the rest of its line end or the blank line). Anything else between them is what a NUL
 * of the client's cut off. (A NUL that is the very last byte of the last header's value
 * leaves no trace here.) Later versions give the true length, which scan_header compares with
 * strlen. */
static void cut_by_nul(struct MHD_Connection *mc, header_scan *h) {
#if MHD_VERSION <= 0x00097500
    int n = h->n;
    if (h->nul || n == 0 || !(h->keys = ps_malloc((size_t)n * 2 * sizeof *h->keys))) return;
    h->n = 0;
    MHD_get_connection_values_n(mc, MHD_HEADER_KIND, keep_key, h);
    for (int i = 0; i < h->n && i < n; i++) {
        const char *end = h->keys[2 * i + 1] + strlen(h->keys[2 * i + 1]);
        if (i + 1 < h->n && i + 1 < n) {
            const char *next = h->keys[2 * (i + 1)];
            h->nul |= !(next == end + 1 || (next == end + 2 && end[1] == '\0'));
        } else {
            h->nul |= end[1] != '\0';
        }
    }
    ps_free(h->keys);
    h->keys = NULL;
#else
    (void)mc;
    (void)h;
    (void)keep_key;
#endif
}

/* Headers that two readers could take two ways: a request smuggled past a proxy that reads
 * them otherwise, or a check passed on one copy while another is used. True when it is one
 * (*e the 400; the connection is closed after it, its framing being in doubt). */
static bool headers_ambiguous(conn *c, const header_scan *h, ps_req_error *e) {
    if (h->nul)
        ps_req_fail(e, 400, NULL, "invalid_header",
                     "a header holds a NUL byte, or is folded over two lines");
    else if (h->bad_name)
        ps_req_fail(e, 400, NULL, "invalid_header",
                     "a header name is not a token (whitespace before its colon?)");
    else if (h->n_length > 1)
        ps_req_fail(e, 400, NULL, "invalid_header",
                     "Content-Length is given %d times; give it once", h->n_length);
    else if (h->bad_length)
        ps_req_fail(e, 400, NULL, "invalid_header",
                     "Content-Length is not a decimal number of bytes");
    else if (h->n_length && h->n_encoding)
        ps_req_fail(e, 400, NULL, "invalid_header",
                     "both Content-Length and Transfer-Encoding are given; give one");
    else if (h->n_host > 1)
        ps_req_fail(e, 400, NULL, "invalid_header",
                     "Host is given %d times; give it once", h->n_host);
    else if (h->n_auth > 1)
        ps_req_fail(e, 400, NULL, "invalid_header",
                     "Authorization is given %d times; give it once", h->n_auth);
    else if (h->host && !ps_guard_host_syntax(h->host, h->host_len))
        ps_req_fail(e, 400, NULL, "invalid_header",
                     "the Host header '%.100s' is not a host name or IP address with an "
                     "optional port", h->host);
    else
        return false;
    c->close = true;
    return true;
}

/* The CORS preflight (OPTIONS on a route): 204 with the headers for --cors-origin, else an
 * error. Sets *ret. */
static void preflight(ps_server *s, struct MHD_Connection *mc, conn *c, const char *method,
                      const char *url, const char *origin, enum MHD_Result *ret) {
    ps_req_error e;
    memset(&e, 0, sizeof e);
    const char *want =
        MHD_lookup_connection_value(mc, MHD_HEADER_KIND, "Access-Control-Request-Method");
    if (!s->cors_origin) {
        ps_req_fail(&e, 405, NULL, NULL,
                     "OPTIONS is not allowed on %s: cross-origin requests are off (start the "
                     "server with --cors-origin ORIGIN to allow one origin)",
                     ROUTES[c->route].path);
    } else if (!c->cors) {
        ps_req_fail(&e, 403, NULL, "origin_not_allowed",
                     "the origin '%.100s' may not call this server cross-origin "
                     "(--cors-origin allows %.100s)", origin ? origin : "", s->cors_origin);
    } else if (want && strcmp(want, ROUTES[c->route].method) &&
               !(!strcmp(want, "HEAD") && !strcmp(ROUTES[c->route].method, "GET"))) {
        ps_req_fail(&e, 405, NULL, NULL, "Method %.20s is not allowed on %s; use %s", want,
                     ROUTES[c->route].path, ROUTES[c->route].method);
    } else {
        struct MHD_Response *resp =
            MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
        c->responded = true;
        record(s, c, method, url, 204);
        if (!resp) {
            *ret = MHD_NO;
            return;
        }
        char methods[32];
        snprintf(methods, sizeof methods, "%s, OPTIONS", ROUTES[c->route].method);
        MHD_add_response_header(resp, "Access-Control-Allow-Origin", s->cors_origin);
        MHD_add_response_header(resp, "Access-Control-Allow-Methods", methods);
        MHD_add_response_header(resp, "Access-Control-Allow-Headers",
                                "Authorization, Content-Type");
        MHD_add_response_header(resp, "Access-Control-Max-Age", "600");
        MHD_add_response_header(resp, "Vary", "Origin");
        *ret = MHD_queue_response(mc, 204, resp);
        MHD_destroy_response(resp);
        return;
    }
    *ret = respond_error(s, mc, c, method, url, &e, ROUTES[c->route].method);
}

/* The checks of server_guard.h, on the headers alone, before any body byte is read: sizes,
 * ambiguous headers, Host, CORS preflight, API key, media type. Returns true when it answered
 * the request. */

static bool guard(ps_server *s, struct MHD_Connection *mc, conn *c, const char *method,
                  const char *url, enum MHD_Result *ret) {
    ps_req_error e;
    memset(&e, 0, sizeof e);
    /* our limits on the request line and headers, below libmicrohttpd's (its buffer of
     * PS_HTTP_POOL bytes), so that what goes over them gets a JSON answer, not its own page */
    header_scan h;
    memset(&h, 0, sizeof h);
    MHD_get_connection_values_n(mc, MHD_HEADER_KIND, scan_header, &h);
    cut_by_nul(mc, &h);
    if (strlen(url) > PS_MAX_URI) {
        ps_req_fail(&e, 414, NULL, "uri_too_long",
                     "the request's path is %zu bytes, over this server's limit of %d",
                     strlen(url), PS_MAX_URI);
        *ret = respond_error(s, mc, c, method, url, &e, NULL);
        return true;
    }
    if (h.bytes > PS_MAX_HEADERS) {
        ps_req_fail(&e, 431, NULL, "headers_too_large",
                     "the request's headers are %zu bytes, over this server's limit of %d",
                     h.bytes, PS_MAX_HEADERS);
        *ret = respond_error(s, mc, c, method, url, &e, NULL);
        return true;
    }
    if (headers_ambiguous(c, &h, &e)) {
        *ret = respond_error(s, mc, c, method, url, &e, NULL);
        return true;
    }
    const char *host = h.host;
    const char *origin = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, "Origin");
    c->cors = s->cors_origin && origin && !strcmp(origin, s->cors_origin);
    if (!ps_guard_host_ok(host, s->allowed_hosts)) {
        ps_req_fail(&e, 403, NULL, "host_not_allowed",
                     "the Host header '%.100s' names neither an IP address, localhost nor a name "
                     "of --allowed-hosts (a web page must not reach this server through a DNS "
                     "name of its own)", host ? host : "");
        *ret = respond_error(s, mc, c, method, url, &e, NULL);
        return true;
    }
    if (!strcmp(method, "OPTIONS") && c->route != R_OTHER) {
        preflight(s, mc, c, method, url, origin, ret);
        return true;
    }
    if (s->api_key && c->route != R_HEALTH && c->route != R_PAGE) {
        const char *auth = h.auth;
        if (!ps_guard_key_ok(s->api_key, strlen(s->api_key), auth, h.auth_len)) {
            if (!auth)
                ps_req_fail(&e, 401, NULL, "invalid_api_key",
                             "You didn't provide an API key. Send it in the Authorization header "
                             "as \"Authorization: Bearer KEY\" (this server was started with "
                             "--api-key)");
            else
                ps_req_fail(&e, 401, NULL, "invalid_api_key",
                             "Incorrect API key provided in the Authorization header (expected "
                             "\"Bearer KEY\" with the key this server was started with)");
            *ret = respond_error(s, mc, c, method, url, &e, NULL);
            return true;
        }
    }
    if (c->method_ok && !strcmp(ROUTES[c->route].method, "POST") &&
        !ps_guard_json_type(MHD_lookup_connection_value(mc, MHD_HEADER_KIND, "Content-Type"))) {
        const char *ct = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, "Content-Type");
        ps_req_fail(&e, 415, NULL, "unsupported_media_type",
                     "%s takes a JSON body: send the header Content-Type: application/json "
                     "(got %.100s)", ROUTES[c->route].path, ct ? ct : "none");
        *ret = respond_error(s, mc, c, method, url, &e, NULL);
        return true;
    }
    return false;
}

/* Admission, on the headers of a request with a JSON body, before a byte of it is read: a
 * completion takes one of the --queue slots, and every such request's meter is granted room
 * for parsing its declared length (PS_PARSE_BYTES_PER_BYTE per byte), so that under load a
 * request is turned away before its body is sent rather than after. The grant is room, not
 * the limit: the body, the parse and the tokens are charged block by block as they are
 * allocated, and a body whose parse takes more draws more or is refused (budget_refusal). A
 * body that declares no length (chunked) is granted nothing yet: charge_arrived() grows the
 * grant as its pieces come, so a client that stalls after its headers holds almost none of
 * the budget. Returns true when it answered the request (503 busy, 413 over the budget alone).
 * Let go when the answer is queued (let_go), or in on_completed. */
static bool admit(ps_server *s, struct MHD_Connection *mc, conn *c, const char *method,
                  const char *url, long long declared, enum MHD_Result *ret) {
    ps_req_error e;
    memset(&e, 0, sizeof e);
    int64_t len = declared >= 0 ? (int64_t)declared : 0;
    int64_t need = len * PS_PARSE_BYTES_PER_BYTE + 65536;
    c->covered = declared >= 0 ? -1 : 0;
    bool completion = c->route == R_COMPLETIONS;
    ps_mem_meter_init(&c->meter, &s->pool);
    pthread_mutex_lock(&s->mu);
    int64_t budget = s->cfg.mem_budget;
    bool draining = s->draining, queue_full = false;
    int32_t queued = 0;
    if (!draining && completion) { /* a slot of the engine's --queue (lock order: mu, then the
                                    * engine's) */
        ps_engine_admission a = ps_engine_admit(s->engine);
        draining = a == PS_ENGINE_DRAINING;
        queue_full = a == PS_ENGINE_BUSY;
        if (queue_full) {
            ps_engine_stats st;
            ps_engine_get_stats(s->engine, &st);
            queued = st.admitted;
        }
        c->queued = a == PS_ENGINE_OK;
    }
    bool ok = !draining && !queue_full && need <= budget && ps_mem_meter_grant(&c->meter, need);
    int64_t used = ps_mem_pool_used(&s->pool);
    if (!ok && c->queued) {
        ps_engine_leave(s->engine);
        c->queued = false;
    }
    pthread_mutex_unlock(&s->mu);
    if (ok && completion) {
        ps_jscan_limits lim = {.max_depth = 64, .max_ids = s->limits.n_ctx,
                               .max_prompts = s->cfg.max_prompts};
        ps_jscan_init(&c->scan, &lim);
        c->scanning = true;
    }
    if (ok) return false;
    if (draining)
        ps_req_fail(&e, 503, NULL, NULL, "the server is shutting down");
    else if (queue_full)
        ps_req_fail(&e, 503, NULL, NULL,
                     "the server is busy: %d requests are already queued or running (--queue "
                     "%d); retry later", (int)queued, (int)s->cfg.queue);
    else if (need > budget)
        ps_req_fail(&e, 413, NULL, "request_too_large",
                     "a body of %lld bytes needs up to %lld bytes to parse, over this server's "
                     "memory budget of %lld (--mem-budget)",
                     (long long)len, (long long)need, (long long)budget);
    else
        ps_req_fail(&e, 503, NULL, NULL,
                     "the server is busy: requests in flight hold %lld of its %lld bytes of "
                     "memory budget and this body of %lld bytes needs %lld to parse; retry later",
                     (long long)used, (long long)budget, (long long)len, (long long)need);
    *ret = respond_error(s, mc, c, method, url, &e, NULL);
    return true;
}

/* A body of undeclared length, `total` bytes of it arrived so far: grows the request's share of
 * the memory budget to the parse of what has arrived (in steps of PS_CHARGE_STEP bytes of
 * body, up to --max-body), never more than the budget holds. Returns false when the budget
 * cannot take it: c->refusal is then the answer (413 when this body alone would pass the
 * budget, else 503 busy), given once the rest has arrived unread. */
enum { PS_CHARGE_STEP = 65536 };
static bool charge_arrived(ps_server *s, conn *c, size_t total) {
    if (c->covered < 0 || (int64_t)total <= c->covered) return true;
    int64_t cov = ((int64_t)total + PS_CHARGE_STEP - 1) / PS_CHARGE_STEP * PS_CHARGE_STEP;
    if (cov > s->cfg.max_body) cov = s->cfg.max_body;
    if (cov < (int64_t)total) cov = (int64_t)total;
    int64_t extra = (cov - c->covered) * PS_PARSE_BYTES_PER_BYTE;
    int64_t budget = s->cfg.mem_budget, held = c->meter.granted;
    if (ps_mem_meter_grant(&c->meter, extra)) {
        c->covered = cov;
        return true;
    }
    c->meter.refused = false; /* answered here, in the words of an estimate */
    int64_t used = ps_mem_pool_used(&s->pool);
    ps_req_error *e = &c->refusal;
    memset(e, 0, sizeof *e);
    if (held + extra > budget)
        ps_req_fail(e, 413, NULL, "request_too_large",
                     "a body of at least %lld bytes (chunked) needs at least %lld bytes to "
                     "parse, over this server's memory budget of %lld (--mem-budget)",
                     (long long)total, (long long)(held + extra), (long long)budget);
    else
        ps_req_fail(e, 503, NULL, NULL,
                     "the server is busy: requests in flight hold %lld of its %lld bytes of "
                     "memory budget and this body (chunked, %lld bytes so far) needs %lld more "
                     "to parse; retry later",
                     (long long)used, (long long)budget, (long long)total, (long long)extra);
    return false;
}

/* Feeds a piece of a completion's body to its scan. Returns true when the scan refused it:
 * the buffered body is freed, what follows is dropped as it arrives, and c->refusal is the
 * answer (libmicrohttpd 0.9 queues an answer only before or after the body, not while it
 * arrives). A syntax error is left to the full parser, whose messages name line and column. */
static bool scan_piece(ps_server *s, conn *c, const char *data, size_t n) {
    ps_error err;
    ps_error_clear(&err);
    if (ps_jscan_feed(&c->scan, data, n, &err) == PS_OK) return false;
    ps_req_error *e = &c->refusal;
    memset(e, 0, sizeof *e);
    switch (c->scan.what) {
    case PS_JSCAN_IDS:
        ps_req_fail(e, 400, "prompt", "context_length_exceeded",
                     "This model's maximum context length is %d tokens, but %s (refused while "
                     "the body was arriving, before parsing it)",
                     (int)s->limits.n_ctx, err.message);
        break;
    case PS_JSCAN_PROMPTS:
        ps_req_fail(e, 400, "prompt", "too_many_prompts",
                     "the request has at least %lld prompts, over this server's limit of %d per "
                     "request (--max-prompts); send them in several requests (refused at byte "
                     "%lld, before parsing)",
                     (long long)c->scan.n_prompts, (int)s->cfg.max_prompts,
                     (long long)err.offset);
        break;
    case PS_JSCAN_SYNTAX:
        c->scanning = false;
        return false;
    default:
        ps_req_fail(e, 400, NULL, NULL, "%s", err.message);
        break;
    }
    ps_buf_free(&c->body);
    c->refused = true;
    c->scanning = false;
    return true;
}

/* The connection state of a request whose own could not be allocated (it was answered 500). */
static conn g_no_conn;

/* An answer given on the headers (busy: no read deadline): it goes out before the body (if
 * any) is read, so the socket lingers after the close (server_conns.h) and a client still
 * sending reads the answer, not a reset. */
static void answered_on_headers(ps_server *s, struct MHD_Connection *mc, bool body) {
    ps_conns_set_busy(s->conns, mc, true);
    if (body) ps_conns_linger(s->conns, mc);
}

/* The first call of a request, on its headers: the guard's checks, a declared body over
 * --max-body (413 before it is read), admission. */
static enum MHD_Result on_headers(ps_server *s, struct MHD_Connection *mc, conn *c,
                                  const char *method, const char *url) {
    pthread_mutex_lock(&s->mu);
    s->connections++;
    pthread_mutex_unlock(&s->mu);
    const char *cl = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, "Content-Length");
    const unsigned long long declared = cl ? strtoull(cl, NULL, 10) : 0;
    const bool body =
        declared > 0 || MHD_lookup_connection_value(mc, MHD_HEADER_KIND, "Transfer-Encoding");
    enum MHD_Result gret;
    if (guard(s, mc, c, method, url, &gret)) {
        answered_on_headers(s, mc, body);
        return gret;
    }
    /* A declared body over the limit is refused before it is read (guard has checked that
     * Content-Length is one run of digits, given once). */
    if (cl && declared > (unsigned long long)s->cfg.max_body) {
        c->too_large = true;
        answered_on_headers(s, mc, true);
        return dispatch(s, mc, c, method, url);
    }
    if (c->method_ok && !strcmp(ROUTES[c->route].method, "POST") &&
        admit(s, mc, c, method, url, cl ? (long long)declared : -1, &gret)) {
        answered_on_headers(s, mc, body);
        return gret;
    }
    return MHD_YES;
}

/* A piece of the body, or (none left) the whole request. */
static enum MHD_Result on_body(ps_server *s, struct MHD_Connection *mc, conn *c,
                               const char *method, const char *url, const char *upload_data,
                               size_t *upload_data_size) {
    if (c->responded) { /* an early answer was queued: drop the rest of the body */
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (*upload_data_size) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        if (c->too_large || c->body.len + n > (size_t)s->cfg.max_body) {
            c->too_large = true;
            return MHD_YES;
        }
        if (c->refused) return MHD_YES;
        if (!charge_arrived(s, c, c->body.len + n)) { /* refused: the rest is dropped */
            ps_buf_free(&c->body);
            c->refused = true;
            c->scanning = false;
            return MHD_YES;
        }
        if (c->scanning && scan_piece(s, c, upload_data, n)) return MHD_YES;
        ps_buf_append(&c->body, upload_data, n); /* after a failure: ignored, answered below */
        return MHD_YES;
    }
    ps_conns_set_busy(s->conns, mc, true); /* the whole request is here: no read deadline */
    if (c->refused) return respond_error(s, mc, c, method, url, &c->refusal, NULL);
    ps_req_error e;
    if (c->body.oom && budget_refusal(s, c, "reading the body", &e))
        return respond_error(s, mc, c, method, url, &e, NULL);
    if (c->body.oom) return respond_buf(s, mc, c, method, url, 500, &c->body, NULL);
    return dispatch(s, mc, c, method, url);
}

static conn *conn_new(ps_server *s, const char *url, const char *method) {
    conn *c = ps_calloc(1, sizeof *c);
    if (!c) return NULL;
    c->t0 = ps_now_s();
    ps_buf_init(&c->body);
    ps_mem_meter_init(&c->meter, NULL); /* closed until admit() opens it (a body to read) */
    c->route = R_OTHER;
    for (int r = 0; r < R_OTHER; r++)
        if (!strcmp(url, ROUTES[r].path)) c->route = r;
    c->method_ok = c->route != R_OTHER && (!strcmp(method, ROUTES[c->route].method) ||
                                           (!strcmp(method, "HEAD") &&
                                            !strcmp(ROUTES[c->route].method, "GET")));
    return c;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *mc, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **con_cls) {
    ps_server *s = cls;
    conn *c = *con_cls;
    if (c == &g_no_conn) { /* answered 500 without connection state: drop the body */
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (!c) {
        c = conn_new(s, url, method);
        if (!c) {
            *con_cls = &g_no_conn;
            return respond_oom(mc);
        }
        *con_cls = c;
    }
    /* every allocation made for this request on this thread is charged to its meter (opened
     * by admit() for a request with a body; the bounded GET answers are not counted) */
    ps_mem_meter *prev = ps_mem_meter_attach(&c->meter);
    enum MHD_Result ret;
    if (!c->started) {
        c->started = true;
        ret = on_headers(s, mc, c, method, url);
    } else {
        ret = on_body(s, mc, c, method, url, upload_data, upload_data_size);
    }
    ps_mem_meter_attach(prev);
    return ret;
}

static void on_completed(void *cls, struct MHD_Connection *mc, void **con_cls,
                         enum MHD_RequestTerminationCode code) {
    ps_server *s = cls;
    conn *c = *con_cls;
    if (!c || c == &g_no_conn) {
        *con_cls = NULL;
        return;
    }
#ifdef PS_TESTING
    ps_test_linger();
#endif
    ps_buf_free(&c->body);
    pthread_mutex_lock(&s->mu);
    s->connections--;
    pthread_mutex_unlock(&s->mu);
    ps_mem_meter_release(&c->meter, 0); /* what no answer let go (let_go) */
    if (c->queued) ps_engine_leave(s->engine);
    ps_free(c);
    *con_cls = NULL;
    ps_conns_set_busy(s->conns, mc, false); /* kept alive: the next request's deadline starts */
}

/* ========================================================================================== */
/* Lifecycle                                                                                  */
/* ========================================================================================== */

ps_server_config ps_server_default_config(void) {
    ps_server_config c;
    memset(&c, 0, sizeof c);
    c.host = PS_SERVER_HOST;
    c.port = 8080;
    c.n_threads = 0;
    c.n_workers = 1;
    c.max_seqs = 1;
    c.max_logprobs = -1; /* min(PS_SERVER_MAX_LOGPROBS, n_vocab) */
    c.max_body = 16 << 20;
    c.queue = 64;
    c.mem_budget = (int64_t)1 << 30;
    c.max_prompts = 2048;
    c.max_response = (int64_t)256 << 20;
    c.max_connections = 2048;
    c.per_ip = 32;
    c.read_timeout_s = 30;
    c.idle_timeout_s = 10;
    c.drain_s = 30;
    return c;
}

static void server_free(ps_server *s) {
    ps_engine_free(s->engine);
    ps_conns_free(s->conns);
    ps_free(s->api_key);
    ps_free(s->allowed_hosts);
    ps_free(s->cors_origin);
    ps_metrics_destroy(&s->metrics);
    pthread_mutex_destroy(&s->mu);
    ps_free(s);
}

/* Phase 1 of ps_server_start: the configuration checked and its defaults filled in. */
static ps_status check_config(ps_server_config *cfg, const ps_model_info *info, ps_error *err) {
    if (info->vocab_only)
        return ps_fail(err, PS_ERR_INVALID_ARG, -1, "the model has no weights (vocab-only file)");
    if (!cfg->host || !*cfg->host) cfg->host = PS_SERVER_HOST;
    if (cfg->port < 0 || cfg->port > 65535)
        return ps_fail(err, PS_ERR_INVALID_ARG, -1, "port %d is not in 0..65535", (int)cfg->port);
    if (cfg->max_logprobs < 0) cfg->max_logprobs = PS_MIN(PS_SERVER_MAX_LOGPROBS, info->n_vocab);
    if (cfg->max_logprobs > info->n_vocab)
        return ps_fail(err, PS_ERR_INVALID_ARG, -1,
                       "--max-logprobs %d must be in 0..%d (the vocabulary size)",
                       (int)cfg->max_logprobs, (int)info->n_vocab);
    if (cfg->max_body < 1) return ps_fail(err, PS_ERR_INVALID_ARG, -1, "--max-body must be >= 1");
    if (cfg->queue < 1) return ps_fail(err, PS_ERR_INVALID_ARG, -1, "--queue must be >= 1");
    if (cfg->n_workers < 1 || cfg->n_workers > 256)
        return ps_fail(err, PS_ERR_INVALID_ARG, -1, "--workers %d must be in 1..256",
                       (int)cfg->n_workers);
    if (cfg->max_seqs < 1 || cfg->max_seqs > PS_CHUNK)
        return ps_fail(err, PS_ERR_INVALID_ARG, -1, "--max-seqs %d must be in 1..%d",
                       (int)cfg->max_seqs, PS_CHUNK);
    if (cfg->n_threads < 0) return ps_fail(err, PS_ERR_INVALID_ARG, -1, "threads must be >= 0");
    if (cfg->mem_budget < (1 << 20))
        return ps_fail(err, PS_ERR_INVALID_ARG, -1, "--mem-budget must be >= 1 MiB");
    if (cfg->max_prompts < 1)
        return ps_fail(err, PS_ERR_INVALID_ARG, -1, "--max-prompts must be >= 1");
    if (cfg->max_response < 1024)
        return ps_fail(err, PS_ERR_INVALID_ARG, -1, "--max-response must be >= 1024");
    if (cfg->max_connections < 1 || cfg->max_connections > 100000)
        return ps_fail(err, PS_ERR_INVALID_ARG, -1, "--max-connections %d must be in 1..100000",
                       (int)cfg->max_connections);
    if (cfg->per_ip < 0)
        return ps_fail(err, PS_ERR_INVALID_ARG, -1, "--per-ip must be >= 0 (0 = no limit)");
    if (!(cfg->read_timeout_s > 0) || cfg->read_timeout_s > 86400)
        return ps_fail(err, PS_ERR_INVALID_ARG, -1, "--read-timeout must be in (0, 86400] s");
    if (cfg->idle_timeout_s < 1)
        return ps_fail(err, PS_ERR_INVALID_ARG, -1, "--idle-timeout must be >= 1 s");
    if (!(cfg->drain_s >= 0) || cfg->drain_s > 86400)
        return ps_fail(err, PS_ERR_INVALID_ARG, -1, "--drain-s must be in [0, 86400]");
    if (cfg->api_key && !*cfg->api_key)
        return ps_fail(err, PS_ERR_INVALID_ARG, -1, "the API key is empty");
    if (cfg->n_threads == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        cfg->n_threads = n > 0 ? (int32_t)PS_MIN(n, 1024) : 1;
    }
    return PS_OK;
}

/* Phase 2: the server's state (copies of the configuration's strings, the limits a request is
 * checked against, the metrics, the memory budget), no thread yet. */
static ps_status server_new(const ps_model *model, const ps_server_config *cfg,
                            const ps_model_info *info, ps_server **out, ps_error *err) {
    ps_server *s = ps_calloc(1, sizeof *s);
    if (!s) return ps_fail(err, PS_ERR_NOMEM, -1, "out of memory");
    pthread_mutex_init(&s->mu, NULL);
    ps_mem_pool_init(&s->pool, cfg->mem_budget);
    {
        const char *labels[R_COUNT];
        for (int r = 0; r < R_COUNT; r++) labels[r] = ROUTES[r].path;
        ps_metrics_init(&s->metrics, R_COUNT, labels);
    }
    s->cfg = *cfg;
    s->cfg.host = NULL; /* not kept */
    s->cfg.api_key = s->cfg.allowed_hosts = s->cfg.cors_origin = NULL; /* copies below */
    if ((cfg->api_key && !(s->api_key = ps_strdup(cfg->api_key))) ||
        (cfg->allowed_hosts && !(s->allowed_hosts = ps_strdup(cfg->allowed_hosts))) ||
        (cfg->cors_origin && *cfg->cors_origin &&
         !(s->cors_origin = ps_strdup(cfg->cors_origin))) ||
        ps_conns_create(cfg->read_timeout_s, &s->conns) != PS_OK) {
        server_free(s);
        return ps_fail(err, PS_ERR_NOMEM, -1, "out of memory");
    }
    s->model = model;
    s->vocab = ps_model_vocab(model);
    s->info = *info;
    if (cfg->compare) {
        ps_model_info ci;
        ps_model_get_info(cfg->compare, &ci);
        snprintf(s->compare_file, sizeof s->compare_file, "%s", ci.file);
    }
    snprintf(s->name, sizeof s->name, "%s", cfg->name && *cfg->name ? cfg->name : info->name);
    s->limits.model_name = s->name;
    /* the file's base name without .gguf is a name too (as llama.cpp's server takes it) */
    snprintf(s->alias, sizeof s->alias, "%s", info->file);
    size_t al = strlen(s->alias);
    if (al > 5 && !strcmp(s->alias + al - 5, ".gguf")) s->alias[al - 5] = 0;
    s->limits.model_alias = s->alias;
    s->limits.vocab = s->vocab;
    s->limits.n_vocab = info->n_vocab;
    s->limits.n_ctx = info->n_ctx;
    s->limits.max_logprobs = cfg->max_logprobs;
    s->limits.max_prompts = cfg->max_prompts;
    atomic_init(&s->next_id, ((uint64_t)time(NULL) << 24) ^ (uint64_t)getpid());
    *out = s;
    return PS_OK;
}

/* Phase 3: the engine: --workers sessions, the threads split evenly over them. */
static ps_status start_engine(ps_server *s, const ps_model *model, ps_error *err) {
    const ps_server_config *cfg = &s->cfg;
    ps_engine_params ep = ps_engine_default_params();
    ep.n_workers = cfg->n_workers;
    ep.n_threads = cfg->n_threads;
    ep.queue = cfg->queue;
    ep.max_seqs = cfg->max_seqs;
    ep.warm_pos = PS_SERVER_WARM_POS;
    ep.cache = cfg->cache;
    ep.compare = cfg->compare;
    ep.compares = cfg->compares;
    ep.n_compares = cfg->n_compares;
    s->compares = cfg->compares;
    s->n_compares = cfg->n_compares;
    ep.act = cfg->act;
    ep.kv_type = cfg->kv_type;
#ifdef PS_TESTING
    ep.hold = ps_test_hold_from_env();
#endif
    return ps_engine_create(model, &ep, &s->engine, err);
}

/* Phase 4: listening on host:port, libmicrohttpd with a thread per connection. */
static ps_status start_http(ps_server *s, const char *host, ps_error *err) {
    const ps_server_config *cfg = &s->cfg;
    struct addrinfo hints, *ai = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    char port[16];
    snprintf(port, sizeof port, "%d", (int)cfg->port);
    int gai = getaddrinfo(host, port, &hints, &ai);
    if (gai != 0 || !ai)
        return ps_fail(err, PS_ERR_INVALID_ARG, -1, "cannot resolve host '%s': %s", host,
                       gai_strerror(gai));
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION |
                     MHD_USE_POLL | MHD_USE_ITC;
    if (ai->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
    s->daemon = MHD_start_daemon(
        flags, (uint16_t)cfg->port, NULL, NULL, on_request, s, MHD_OPTION_SOCK_ADDR, ai->ai_addr,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, s, MHD_OPTION_NOTIFY_CONNECTION,
        ps_conns_notify, s->conns, MHD_OPTION_CONNECTION_LIMIT, (unsigned)cfg->max_connections,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)cfg->per_ip,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)PS_HTTP_POOL, MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned)cfg->idle_timeout_s, MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!s->daemon) {
        int e = errno;
        return ps_fail(err, PS_ERR_IO, -1, "cannot listen on %s:%d: %s", host, (int)cfg->port,
                       e ? strerror(e) : "libmicrohttpd refused to start");
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
    s->port = di ? di->port : cfg->port;
    return PS_OK;
}

ps_status ps_server_start(const ps_model *model, const ps_server_config *cfg_in, ps_server **out,
                          ps_error *err) {
    if (!model || !cfg_in || !out) return ps_fail(err, PS_ERR_INVALID_ARG, -1, "NULL argument");
    *out = NULL;
    ps_server_config cfg = *cfg_in;
    ps_model_info info;
    ps_model_get_info(model, &info);
    ps_status st = check_config(&cfg, &info, err);
    ps_server *s = NULL;
    if (st == PS_OK) st = server_new(model, &cfg, &info, &s, err);
    if (st == PS_OK) st = start_engine(s, model, err);
    if (st == PS_OK) st = start_http(s, cfg.host, err);
    if (st != PS_OK) {
        if (s) server_free(s);
        return st;
    }
    *out = s;
    return PS_OK;
}

int32_t ps_server_port(const ps_server *s) { return s ? s->port : -1; }

void ps_server_stop(ps_server *s) {
    if (!s) return;
    /* 1. stop accepting */
    MHD_socket lsock = MHD_quiesce_daemon(s->daemon);
    if (lsock != MHD_INVALID_SOCKET) close(lsock);
    /* 2. cut the connections whose request has not arrived (nothing of theirs was admitted)
     *    and let admitted requests finish and their answers go out, for up to drain_s; new
     *    completions on kept-alive connections get 503 */
    pthread_mutex_lock(&s->mu);
    s->draining = true;
    pthread_mutex_unlock(&s->mu);
    ps_engine_drain_begin(s->engine);
    double deadline = ps_now_s() + s->cfg.drain_s;
    for (;;) {
        ps_conns_cut(s->conns, false);
        bool idle = ps_engine_drain(s->engine, PS_MIN(deadline, ps_now_s() + 0.01));
        pthread_mutex_lock(&s->mu);
        int32_t conns = s->connections;
        pthread_mutex_unlock(&s->mu);
        if ((idle && conns == 0) || ps_now_s() > deadline) break;
        if (idle) usleep(10000);
    }
    /* 3. past the deadline: running requests stop at their next chunk and answer 503 (their
     *    answers get a moment to go out); then every connection is cut and closed, and the
     *    workers stop */
    ps_engine_abort(s->engine);
    double answers_by = ps_now_s() + 2;
    ps_engine_drain(s->engine, answers_by);
    /* a request lets its slot go as its answer is queued (let_go): wait for the answers to go
     * out, their requests completing, within the same moment */
    for (;;) {
        pthread_mutex_lock(&s->mu);
        int32_t conns = s->connections;
        pthread_mutex_unlock(&s->mu);
        if (conns == 0 || ps_now_s() > answers_by) break;
        usleep(5000);
    }
    ps_conns_cut(s->conns, true);
    MHD_stop_daemon(s->daemon);
    s->daemon = NULL;
    server_free(s);
}
