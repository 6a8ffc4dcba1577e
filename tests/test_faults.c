/*
 * test_faults.c — fault injection over whole user-facing paths. For each path, n walks from 0:
 * ps_alloc_fail_after(n) makes the n-th allocation (and every later one) fail, the path runs
 * once, cleans up after itself, and must report a clean error (PS_ERR_NOMEM with a message,
 * or HTTP 500 for the server): a run that reaches the injected failure and still succeeds has
 * swallowed it, and fails the test. The walk ends at the first n whose run attempted fewer
 * than n + 1 allocations, i.e. completed without an injected failure. jansson allocates
 * through the same hook (ps_json_alloc_init), so request and JSONL parsing are walked too. The
 * number of allocation points of each path is printed. Leaks are caught by LeakSanitizer in
 * the `make check` build and by tests/test_valgrind.sh; crashes and hangs by the run itself.
 *
 * Paths: model load (stories260K from ../shared, or a generated tiny model when it is
 * absent), vocab-only load, a scoring call (pool + session + ps_score_tokens with generation,
 * sampling and stop strings), a JSONL line (parse + tokenise + score + result line), the
 * /v1/completions validator (text and id prompts, stop list), and a whole HTTP request through
 * the server on 127.0.0.1 (parse, queue, score, response).
 */
#include "check.h"
#include "base/testhooks.h"
#include "gen/genmodel.h"
#include "front/jsonl.h"
#include "run/session.h"
#include "serve/server.h"

#include <arpa/inet.h>
#include <math.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>

#define MAX_WALK 100000

static char g_path[4300];
static char g_tmp[256];

/* One run of a path: returns its status, with err filled on failure; frees all it made. */
typedef ps_status (*path_fn)(void *ctx, ps_error *err);

/* Walks n over the path; returns the number of allocation points (or -1 when the walk never
 * completed). ok_codes: statuses other than PS_ERR_NOMEM a failed allocation may become. */
static int64_t walk(const char *name, path_fn fn, void *ctx) {
    int64_t n, bad = 0, swallowed = 0, nomem = 0;
    bool done = false;
    for (n = 0; n < MAX_WALK; n++) {
        ps_error err;
        memset(&err, 0, sizeof err);
        ps_alloc_fail_after(n);
        ps_status st = fn(ctx, &err);
        int64_t attempted = ps_alloc_count();
        ps_alloc_fail_after(-1);
        if (st == PS_OK && attempted <= n) {
            done = true;
            break;
        }
        if (st != PS_OK && attempted <= n) { /* failed with no failure injected */
            fprintf(stderr, "FAIL %s: fails without an injected failure: status %d (%s) '%s'\n",
                    name, (int)st, ps_status_str(st), err.message);
            bad++;
            break;
        }
        if (st == PS_OK) {
            /* an injected failure the path reported as success: a failed allocation must
             * become an error, never a silently different (or partial) result */
            if (swallowed++ < 5)
                fprintf(stderr, "FAIL %s: allocation %lld failed and the path still returned "
                                "PS_OK (%lld allocations attempted)\n",
                        name, (long long)n, (long long)attempted);
        } else if (st == PS_ERR_NOMEM && err.code == st && err.message[0]) {
            nomem++;
        } else if (bad++ < 5) {
            fprintf(stderr, "FAIL %s: allocation %lld failed -> status %d (%s), err.code %d, "
                            "message '%s'\n",
                    name, (long long)n, (int)st, ps_status_str(st), (int)err.code,
                    err.message);
        }
    }
    CHECKF(done, "%s: no run completed within %d allocation points", name, MAX_WALK);
    CHECKF(bad == 0, "%s: %lld injected failures did not become a clean PS_ERR_NOMEM", name,
           (long long)bad);
    CHECKF(swallowed == 0, "%s: %lld injected failures swallowed (the run still succeeded)",
           name, (long long)swallowed);
    CHECK(nomem > 0); /* every path here allocates something that can fail */
    printf("NOTE: %s: %lld allocation points (%lld -> PS_ERR_NOMEM, %lld swallowed)\n", name,
           (long long)n, (long long)nomem, (long long)swallowed);
    return done ? n : -1;
}

/* ---- paths ------------------------------------------------------------------------------- */

static ps_status path_load(void *ctx, ps_error *err) {
    ps_model_params p = ps_model_default_params();
    p.vocab_only = ctx != NULL;
    ps_model *m = NULL;
    ps_status st = ps_model_load(g_path, &p, &m, err);
    if (st != PS_OK && m) return ps_fail(err, PS_ERR_INTERNAL, -1, "model set on failure");
    ps_model_free(m);
    return st;
}

static const ps_model *g_model;
static int32_t g_tokens[40];

static ps_status path_score(void *ctx, ps_error *err) {
    (void)ctx;
    ps_pool *pool = NULL;
    ps_status st = ps_pool_create(2, &pool);
    if (st != PS_OK) return ps_fail(err, st, -1, "pool: %s", ps_status_str(st));
    ps_session_params sp = ps_session_default_params();
    sp.n_ctx = 64;
    sp.n_batch = 16;
    sp.pool = pool;
    ps_session *s = NULL;
    st = ps_session_create(g_model, &sp, &s, err);
    if (st == PS_OK) {
        ps_score_params p = ps_score_default_params();
        static const char *const stop[2] = {"zzzz", "\n\n\n"};
        p.k = 5;
        p.chunk = 16;
        p.max_tokens = 4;
        p.temperature = 0.8f;
        p.top_p = 0.9f;
        p.seed = 7;
        p.stop = stop;
        p.n_stop = 2;
        ps_score_result *r = NULL;
        st = ps_score_tokens(s, g_tokens, 40, &p, &r, err);
        if (st == PS_OK && (r->n_prompt != 40 || !(r->logprobs[1] <= 0.0f)))
            st = ps_fail(err, PS_ERR_INTERNAL, -1, "wrong result");
        ps_score_result_free(r);
    }
    ps_session_free(s);
    ps_pool_free(pool);
    return st;
}

static ps_status path_jsonl(void *ctx, ps_error *err) {
    (void)ctx;
    static const char line[] =
        "{\"id\": {\"n\": [1, \"two\"]}, \"prompt\": \"Once upon a time there was a cat.\", "
        "\"logprobs\": 4}\n";
    ps_jsonl_limits lim = {.vocab = ps_model_vocab(g_model),
                           .n_vocab = ps_vocab_n_tokens(ps_model_vocab(g_model)),
                           .n_ctx = 64, .default_k = 2, .add_bos = true};
    ps_jsonl_req req;
    ps_status st = ps_jsonl_parse(line, sizeof line - 1, 3, &lim, &req);
    if (st != PS_OK) {
        ps_fail(err, st, -1, "%s", req.err.message);
        ps_jsonl_req_free(&req);
        return st;
    }
    ps_session_params sp = ps_session_default_params();
    sp.n_ctx = 64;
    sp.n_batch = 32;
    ps_session *s = NULL;
    st = ps_session_create(g_model, &sp, &s, err);
    ps_score_result *r = NULL;
    if (st == PS_OK) {
        ps_score_params p = ps_score_default_params();
        p.k = req.k;
        p.chunk = 32;
        st = ps_score_tokens(s, req.ids, req.n, &p, &r, err);
    }
    if (st == PS_OK) {
        ps_buf b;
        ps_buf_init(&b);
        ps_jsonl_write_result(&b, lim.vocab, &req, r);
        if (b.oom) st = ps_fail(err, PS_ERR_NOMEM, -1, "out of memory writing the result line");
        else if (!strstr(b.data, "\"sum_logprob\"") || b.data[b.len - 1] != '\n')
            st = ps_fail(err, PS_ERR_INTERNAL, -1, "bad result line");
        ps_buf_free(&b);
    }
    ps_score_result_free(r);
    ps_session_free(s);
    ps_jsonl_req_free(&req);
    return st;
}

static ps_status path_request(void *ctx, ps_error *err) {
    (void)ctx;
    static const char body[] =
        "{\"model\": \"m\", \"prompt\": [\"Once upon a time\", \"Lily \\u00e9 ran\", \"x\"], "
        "\"echo\": true, \"logprobs\": 3, \"max_tokens\": 2, \"stop\": [\"x\", \"yy\"]}";
    ps_req_limits lim = {.model_name = "m", .vocab = ps_model_vocab(g_model),
                         .n_vocab = ps_vocab_n_tokens(ps_model_vocab(g_model)), .n_ctx = 64,
                         .max_logprobs = 5};
    ps_completion_req r;
    ps_req_error e;
    memset(&e, 0, sizeof e);
    if (!ps_completion_req_parse(body, sizeof body - 1, &lim, &r, &e)) {
        /* an allocation failure is the server's fault: 500 */
        ps_status st = e.status == 500 ? PS_ERR_NOMEM : PS_ERR_INTERNAL;
        return ps_fail(err, st, -1, "%d %s", e.status, e.message);
    }
    ps_status st = PS_OK;
    if (r.n_prompts != 3 || r.n_stop != 2 || r.prompts[2].n < 1)
        st = ps_fail(err, PS_ERR_INTERNAL, -1, "wrong request");
    ps_completion_req_free(&r);
    return st;
}

/* ---- HTTP -------------------------------------------------------------------------------- */

/* POSTs body to 127.0.0.1:port/v1/completions (Connection: close) and reads the answer.
 * Returns the HTTP status, or -1 when no well-formed answer came within 20 s. */
static int http_post(int port, const char *body, char *resp, size_t cap) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    struct timeval tv = {.tv_sec = 20};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    char head[256];
    int hl = snprintf(head, sizeof head,
                      "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                      "Content-Type: application/json\r\nContent-Length: %zu\r\n"
                      "Connection: close\r\n\r\n",
                      strlen(body));
    if (write(fd, head, (size_t)hl) != hl ||
        write(fd, body, strlen(body)) != (ssize_t)strlen(body)) {
        close(fd);
        return -1;
    }
    size_t n = 0;
    ssize_t k;
    while (n + 1 < cap && (k = read(fd, resp + n, cap - 1 - n)) > 0) n += (size_t)k;
    resp[n] = '\0';
    close(fd);
    int status = -1;
    if (sscanf(resp, "HTTP/1.%*d %d", &status) != 1) return -1;
    return status;
}

typedef struct {
    int port;
    int statuses[600];
} http_ctx;

static const char g_http_body[] =
    "{\"prompt\": \"Once upon a time, Lily\", \"echo\": true, \"logprobs\": 3, "
    "\"max_tokens\": 2, \"temperature\": 0}";

static ps_status path_http(void *ctx, ps_error *err) {
    http_ctx *h = ctx;
    static char resp[1 << 16];
    int status = http_post(h->port, g_http_body, resp, sizeof resp);
    if (status >= 0 && status < 600) h->statuses[status]++;
    if (status == 200) {
        if (!strstr(resp, "\"text_completion\"") || !strstr(resp, "\"top_logprobs\""))
            return ps_fail(err, PS_ERR_INTERNAL, -1, "200 without a completion");
        return PS_OK;
    }
    if (status == 500) return ps_fail(err, PS_ERR_NOMEM, -1, "HTTP 500");
    return ps_fail(err, PS_ERR_INTERNAL, -1, "HTTP status %d", status);
}

static void test_http(void) {
    ps_server_config cfg = ps_server_default_config();
    cfg.port = 0;
    cfg.n_threads = 1;
    cfg.n_workers = 1;
    cfg.name = "m";
    ps_server *srv = NULL;
    ps_error err;
    ps_status st = ps_server_start(g_model, &cfg, &srv, &err);
    CHECKF(st == PS_OK, "server start: %s", err.message);
    if (st != PS_OK) return;
    static http_ctx h;
    h.port = ps_server_port(srv);
    int64_t n = walk("HTTP POST /v1/completions", path_http, &h);
    printf("NOTE: HTTP walk answers: %d x 200, %d x 500\n", h.statuses[200], h.statuses[500]);
    CHECK(n > 0 && h.statuses[500] > 0);
    /* the server still answers normally afterwards */
    static char resp[1 << 16];
    CHECK(http_post(h.port, g_http_body, resp, sizeof resp) == 200);
    ps_server_stop(srv);
}

/* ---- main -------------------------------------------------------------------------------- */

static bool find_model(void) {
    const char *shared = ps_test_shared();
    if (shared) {
        snprintf(g_path, sizeof g_path, "%s/models/stories260K.gguf", shared);
        return true;
    }
    /* no shared material: a generated tiny model (synthetic SentencePiece vocab) */
    const char *dir = getenv("TMPDIR");
    snprintf(g_tmp, sizeof g_tmp, "%s/ps_test_faults_XXXXXX", dir && *dir ? dir : "/tmp");
    int fd = mkstemp(g_tmp);
    if (fd < 0) return false;
    close(fd);
    ps_genmodel_params gp = ps_genmodel_default_params();
    gp.n_embd = 32;
    gp.n_ff = 64;
    gp.n_head = 2;
    gp.n_head_kv = 1;
    gp.head_dim = 16;
    ps_error err;
    if (ps_genmodel_write(&gp, g_tmp, &err) != PS_OK) {
        fprintf(stderr, "FAIL gen-model: %s\n", err.message);
        unlink(g_tmp);
        g_tmp[0] = '\0';
        return false;
    }
    snprintf(g_path, sizeof g_path, "%s", g_tmp);
    printf("NOTE: using a generated model (%s)\n", g_path);
    return true;
}

int main(void) {
    if (!find_model()) {
        CHECK(!"no model to test with");
        return ps_test_done("faults");
    }
    int64_t n_load = walk("model load", path_load, NULL);
    CHECK(n_load > 3);
    walk("vocab-only load", path_load, (void *)1);

    ps_model *m = NULL;
    ps_error err;
    ps_status st = ps_model_load(g_path, NULL, &m, &err);
    CHECKF(st == PS_OK, "load %s: %s", g_path, err.message);
    if (st == PS_OK) {
        g_model = m;
        int32_t nv = ps_vocab_n_tokens(ps_model_vocab(m));
        g_tokens[0] = ps_vocab_bos(ps_model_vocab(m)) >= 0 ? ps_vocab_bos(ps_model_vocab(m)) : 0;
        for (int i = 1; i < 40; i++) g_tokens[i] = (int32_t)((i * 37 + 11) % nv);
        walk("score (pool, session, ps_score_tokens)", path_score, NULL);
        walk("JSONL line (parse, tokenise, score, write)", path_jsonl, NULL);
        walk("/v1/completions validator", path_request, NULL);
        test_http();
        ps_model_free(m);
    }
    if (g_tmp[0]) unlink(g_tmp);
    return ps_test_done("faults");
}
