/*
 * test_serve_safety.c — serving safely: who may ask, connection limits, clean stops, bounded
 * work. Black box: starts $BUILD/promptscore serve --port 0 on 127.0.0.1 (stories260K; its
 * stderr goes to $BUILD/tests/safety-<pid>-<n>.log, read for the port) and talks raw HTTP/1.1
 * over sockets, so it can send what curl would not: a Host of its choice, a half-close, one
 * byte a second, a stall in the middle of a body. Client sockets may bind a source address of
 * 127.0.0.0/8 other than 127.0.0.1, so "another client address" stays on loopback. Bounded: the
 * whole test runs in well under a minute on an idle machine.
 *
 *   - the guard functions (server_guard.h) on their own: key, Host, media type, loopback;
 *   - --api-key: /health and / open, every other route 401 in OpenAI's shape (with
 *     WWW-Authenticate), a wrong key of the right length 401, the right key 200; a refused POST
 *     is answered before its body is read; --api-key-file the same;
 *   - Host: a DNS name is 403 unless --allowed-hosts names it; IP literals and localhost pass;
 *   - Content-Type: a text/plain POST (what a web page can send cross-site without a
 *     preflight) is 415; application/json with a charset passes;
 *   - CORS: off by default (OPTIONS 405, no Access-Control-Allow-Origin); --cors-origin: the
 *     preflight 204 with its headers, another origin 403, answers carry the header;
 *   - a 40 KB path and 40 KB of headers get OpenAI-shaped 414 and 431 (not libmicrohttpd's
 *     HTML pages);
 *   - half-close: a client that shuts down its sending side after the request gets its 200;
 *   - 1,000 slow sockets (one byte a second, over 40 client addresses, default limits) while a
 *     fresh client gets 200s; 200 more from one address are held to --per-ip; with
 *     --read-timeout 2 every slow socket is cut within the deadline, dripping or not;
 *   - bounded work (--max-prompts 16, --max-response 4 MB, --mem-budget 64 MiB): at and over
 *     each limit, the 413 / 400 naming both numbers, the response estimate refused before any
 *     scoring, a prompt list over --max-prompts and an id list over the context refused while
 *     the body arrives (only its first bytes sent), a body whose parse would need more than the budget refused on its headers, six
 *     1.2 MB bodies at once admitted one at a time (the rest 503 + Retry-After) with the peak
 *     RSS growing by less than the budget; a small request sent behind a 64-prompt one is
 *     answered while that one still runs (round robin);
 *   - SIGTERM with a client stalled in its body: the server exits at once (the request was not
 *     admitted); with a request running and --drain-s 1: it exits within the deadline; a
 *     second SIGTERM exits at once with 143.
 * Skips when ../shared (or $PS_SHARED) is absent.
 */
#include "check.h"
#include "serve_proc.h"
#include "http_raw.h"
#include "serve/server.h"
#include "serve/server_guard.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>

/* Under AddressSanitizer every allocation carries redzones and freed memory sits in a
 * quarantine (turned off for the server below): the RSS bound gets this much slack there. */
#if defined(__SANITIZE_ADDRESS__)
enum { RSS_SLACK_KB = 32768 };
#else
enum { RSS_SLACK_KB = 0 };
#endif

static char g_bin[1024];
static char g_model[4200];
static const char *g_build = "build";

static bool server_start(server *s, const char *const *extra) {
    char dir[1100];
    snprintf(dir, sizeof dir, "%.1000s/tests", g_build);
    serve_opts o = {g_bin, g_model, dir, "safety", NULL, {-1, -1}};
    return serve_start(s, &o, extra);
}

static int server_wait(server *s, double secs) { return serve_wait(s, secs); }

static int server_stop(server *s) { return serve_stop(s); }

static bool log_has(const server *s, const char *needle) {
    FILE *f = fopen(s->log, "r");
    if (!f) return false;
    char line[4096];
    bool hit = false;
    while (!hit && fgets(line, sizeof line, f)) hit = strstr(line, needle) != NULL;
    fclose(f);
    return hit;
}

/* One request on a fresh connection: method, path, extra header lines ("K: V\r\n..."), body. */
static bool req(int port, const char *src, const char *method, const char *path,
                const char *headers, const char *body, answer *a) {
    memset(a, 0, sizeof *a);
    int fd = dial(port, src);
    if (fd < 0) {
        memset(a, 0, sizeof *a);
        a->body = calloc(1, 1);
        return false;
    }
    size_t cap = strlen(path) + (headers ? strlen(headers) : 0) + 512;
    char *h = malloc(cap);
    size_t blen = body ? strlen(body) : 0;
    snprintf(h, cap, "%s %s HTTP/1.1\r\n%s%sConnection: close\r\n", method, path,
             headers && strcasestr(headers, "Host:") ? "" : "Host: 127.0.0.1\r\n",
             headers ? headers : "");
    if (body) snprintf(h + strlen(h), cap - strlen(h), "Content-Length: %zu\r\n", blen);
    snprintf(h + strlen(h), cap - strlen(h), "\r\n");
    bool ok = send_all(fd, h, strlen(h)) && (!body || send_all(fd, body, blen));
    ok = ok && read_answer(fd, 30 * PS_TEST_TIME_SCALE, a);
    if (!a->body) a->body = calloc(1, 1);
    free(h);
    close(fd);
    return ok;
}

static const char *JSON = "Content-Type: application/json\r\n";
static const char *SMALL = "{\"prompt\":\"Once upon a time\",\"max_tokens\":0,\"echo\":true,"
                           "\"logprobs\":1}";

/* An OpenAI-shaped error with this status and code (NULL: any). */
static void check_error(const answer *a, int status, const char *code, const char *what) {
    CHECKF(a->status == status, "%s: status %d, want %d (%.200s)", what, a->status, status,
           a->body ? a->body : "");
    CHECKF(strcasestr(a->head, "Content-Type: application/json") != NULL,
           "%s: not JSON: %.200s", what, a->head);
    CHECKF(a->body && !strncmp(a->body, "{\"error\":{\"message\":", 20) &&
               strstr(a->body, "\"type\":") && strstr(a->body, "\"param\":") &&
               strstr(a->body, "\"code\":"),
           "%s: not OpenAI-shaped: %.200s", what, a->body ? a->body : "");
    if (code) {
        char want[96];
        snprintf(want, sizeof want, "\"code\":\"%s\"", code);
        CHECKF(a->body && strstr(a->body, want), "%s: no %s in %.200s", what, want, a->body);
    }
}

/* A body of n_prompts token-id prompts of len ids each (valid ids of stories260K). */
static char *heavy_body(int n_prompts, int len) {
    size_t cap = (size_t)n_prompts * (size_t)len * 5 + 256;
    char *b = malloc(cap);
    size_t o = (size_t)snprintf(b, cap, "{\"prompt\":[");
    for (int p = 0; p < n_prompts; p++) {
        o += (size_t)snprintf(b + o, cap - o, p ? ",[" : "[");
        for (int i = 0; i < len; i++)
            o += (size_t)snprintf(b + o, cap - o, i ? ",%d" : "%d", 3 + (i * 7 + p) % 400);
        o += (size_t)snprintf(b + o, cap - o, "]");
    }
    snprintf(b + o, cap - o, "],\"echo\":true,\"max_tokens\":0,\"logprobs\":5}");
    return b;
}

/* Sends a POST of body and returns the socket without reading the answer. */
static int post_async(int port, const char *body) {
    int fd = dial(port, NULL);
    if (fd < 0) return -1;
    char h[512];
    snprintf(h, sizeof h,
             "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
             "application/json\r\nContent-Length: %zu\r\n\r\n",
             strlen(body));
    if (!send_all(fd, h, strlen(h)) || !send_all(fd, body, strlen(body))) {
        close(fd);
        return -1;
    }
    return fd;
}

static void test_guard_functions(void) {
    CHECK(ps_guard_key_ok("k3y", 3, "Bearer k3y", strlen("Bearer k3y")));
    CHECK(ps_guard_key_ok("k3y", 3, "bearer  k3y ", strlen("bearer  k3y ")));
    CHECK(!ps_guard_key_ok("k3y", 3, "Bearer k3z", strlen("Bearer k3z")));
    CHECK(!ps_guard_key_ok("k3y", 3, "Bearer k3", strlen("Bearer k3")));
    CHECK(!ps_guard_key_ok("k3y", 3, "Bearer k3yy", strlen("Bearer k3yy")));
    CHECK(!ps_guard_key_ok("k3y", 3, "Basic k3y", strlen("Basic k3y")));
    CHECK(!ps_guard_key_ok("k3y", 3, "k3y", strlen("k3y")));
    CHECK(!ps_guard_key_ok("k3y", 3, NULL, 0));
    CHECK(ps_guard_host_ok("127.0.0.1:8080", NULL));
    CHECK(ps_guard_host_ok("[::1]:8080", NULL));
    CHECK(ps_guard_host_ok("10.1.2.3", NULL));
    CHECK(ps_guard_host_ok("LocalHost:1", NULL));
    CHECK(ps_guard_host_ok(NULL, NULL)); /* no Host: no browser sends that */
    CHECK(!ps_guard_host_ok("", NULL));
    CHECK(!ps_guard_host_ok("evil.example:8080", NULL));
    CHECK(!ps_guard_host_ok("127.0.0.1.evil.example", NULL));
    CHECK(!ps_guard_host_ok("localhost.evil.example", NULL));
    CHECK(ps_guard_host_ok("Scorer.Internal:8080", "a.b, scorer.internal"));
    CHECK(!ps_guard_host_ok("scorer.internal.evil", "a.b,scorer.internal"));
    CHECK(ps_guard_host_ok("anything.example", "*"));
    CHECK(ps_guard_json_type("application/json"));
    CHECK(ps_guard_json_type("Application/JSON; charset=utf-8"));
    CHECK(!ps_guard_json_type("application/jsonp"));
    CHECK(!ps_guard_json_type("text/plain"));
    CHECK(!ps_guard_json_type(NULL));
    CHECK(ps_guard_host_is_loopback("127.0.0.1"));
    CHECK(ps_guard_host_is_loopback("127.3.2.1"));
    CHECK(ps_guard_host_is_loopback("::1"));
    CHECK(ps_guard_host_is_loopback("localhost"));
    CHECK(!ps_guard_host_is_loopback("0.0.0.0"));
    CHECK(!ps_guard_host_is_loopback("::"));
    CHECK(!ps_guard_host_is_loopback("192.168.1.5"));
}

static void test_api_key(const char *key_file) {
    server s;
    const char *opts[] = {"--api-key-file", key_file, NULL};
    if (!server_start(&s, opts)) {
        CHECKF(0, "the server did not start (log %s)", s.log);
        return;
    }
    answer a = {0};
    req(s.port, NULL, "GET", "/health", NULL, NULL, &a);
    CHECKF(a.status == 200, "/health with a key set and none sent: %d", a.status);
    answer_free(&a);
    req(s.port, NULL, "GET", "/", NULL, NULL, &a);
    CHECKF(a.status == 200 && strstr(a.body, "Authorization"),
           "the page: %d, and it must send the key it is given", a.status);
    answer_free(&a);
    const char *routes[][2] = {{"GET", "/v1/models"}, {"GET", "/metrics"},
                               {"GET", "/tokenizer_info"}, {"POST", "/tokenize"},
                               {"POST", "/detokenize"}, {"POST", "/v1/completions"}};
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++) {
        const char *body = !strcmp(routes[i][0], "POST") ? "{\"prompt\":\"a\"}" : NULL;
        req(s.port, NULL, routes[i][0], routes[i][1], JSON, body, &a);
        check_error(&a, 401, "invalid_api_key", routes[i][1]);
        CHECKF(strcasestr(a.head, "WWW-Authenticate: Bearer") != NULL, "%s: %s", routes[i][1],
               a.head);
        answer_free(&a);
    }
    req(s.port, NULL, "POST", "/v1/completions",
        "Content-Type: application/json\r\nAuthorization: Bearer s3cret-keY\r\n", SMALL, &a);
    check_error(&a, 401, "invalid_api_key", "a wrong key of the right length");
    answer_free(&a);
    req(s.port, NULL, "POST", "/v1/completions",
        "Content-Type: application/json\r\nAuthorization: Bearer s3cret-key\r\n", SMALL, &a);
    CHECKF(a.status == 200 && strstr(a.body, "\"choices\""), "the right key: %d %.200s",
           a.status, a.body);
    answer_free(&a);
    req(s.port, NULL, "GET", "/metrics", "Authorization: Bearer s3cret-key\r\n", NULL, &a);
    CHECKF(a.status == 200 && strstr(a.body, "promptscore_requests_total{route=\"/v1/models\","
                                             "status=\"401\"} 1"),
           "/metrics with the key: %d, and it counts the 401s", a.status);
    answer_free(&a);
    /* refused on its headers: a declared 100 KB body that never comes is answered. No clock:
     * a server that waited for the body would answer nothing (its read deadline cuts the socket
     * unanswered), so a 401 here can only have come from the headers */
    {
        int fd = dial(s.port, NULL);
        const char *h = "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                        "application/json\r\nContent-Length: 100000\r\n\r\n{\"prompt\":";
        CHECK(fd >= 0 && send_all(fd, h, strlen(h)) &&
              read_answer(fd, 60 * PS_TEST_TIME_SCALE, &a));
        CHECKF(a.status == 401, "no key, body not sent: %d (%.200s)", a.status, a.body);
        answer_free(&a);
        if (fd >= 0) close(fd);
    }
    CHECK(server_stop(&s) == 0);
}

static void test_host_type_cors(void) {
    server s;
    const char *opts[] = {"--allowed-hosts", "scorer.internal", NULL};
    if (!server_start(&s, opts)) {
        CHECKF(0, "the server did not start (log %s)", s.log);
        return;
    }
    answer a = {0};
    char hp[64];
    snprintf(hp, sizeof hp, "Host: evil.example:%d\r\n", s.port);
    req(s.port, NULL, "GET", "/v1/models", hp, NULL, &a);
    check_error(&a, 403, "host_not_allowed", "Host: a DNS name");
    answer_free(&a);
    snprintf(hp, sizeof hp, "Host: evil.example:%d\r\n%s", s.port, JSON);
    req(s.port, NULL, "POST", "/v1/completions", hp, SMALL, &a);
    check_error(&a, 403, "host_not_allowed", "Host: a DNS name, POST");
    answer_free(&a);
    const char *good[] = {"Host: localhost\r\n", "Host: scorer.internal:80\r\n",
                          "Host: 127.0.0.1\r\n"};
    for (int i = 0; i < 3; i++) {
        char h[128];
        snprintf(h, sizeof h, "%s%s", good[i], JSON);
        req(s.port, NULL, "POST", "/v1/completions", h, SMALL, &a);
        CHECKF(a.status == 200, "%s: %d %.200s", good[i], a.status, a.body);
        answer_free(&a);
    }
    /* media type */
    req(s.port, NULL, "POST", "/v1/completions", "Content-Type: text/plain\r\n", SMALL, &a);
    check_error(&a, 415, "unsupported_media_type", "text/plain POST");
    answer_free(&a);
    req(s.port, NULL, "POST", "/tokenize", NULL, "{\"prompt\":\"a\"}", &a);
    check_error(&a, 415, "unsupported_media_type", "POST without Content-Type");
    answer_free(&a);
    req(s.port, NULL, "POST", "/v1/completions",
        "Content-Type: application/x-www-form-urlencoded\r\n", SMALL, &a);
    check_error(&a, 415, "unsupported_media_type", "form POST");
    answer_free(&a);
    req(s.port, NULL, "POST", "/v1/completions",
        "Content-Type: application/json; charset=utf-8\r\n", SMALL, &a);
    CHECKF(a.status == 200, "application/json; charset=utf-8: %d", a.status);
    answer_free(&a);
    /* CORS off by default */
    req(s.port, NULL, "OPTIONS", "/v1/completions",
        "Origin: http://app.example\r\nAccess-Control-Request-Method: POST\r\n", NULL, &a);
    check_error(&a, 405, NULL, "OPTIONS with CORS off");
    CHECK(!strcasestr(a.head, "Access-Control-Allow-Origin"));
    answer_free(&a);
    req(s.port, NULL, "GET", "/v1/models", "Origin: http://app.example\r\n", NULL, &a);
    CHECKF(a.status == 200 && !strcasestr(a.head, "Access-Control-Allow-Origin"),
           "CORS off: %s", a.head);
    answer_free(&a);
    CHECK(server_stop(&s) == 0);

    const char *opts2[] = {"--cors-origin", "http://app.example", "--api-key", "k", NULL};
    if (!server_start(&s, opts2)) {
        CHECKF(0, "the server did not start (log %s)", s.log);
        return;
    }
    req(s.port, NULL, "OPTIONS", "/v1/completions",
        "Origin: http://app.example\r\nAccess-Control-Request-Method: POST\r\n"
        "Access-Control-Request-Headers: authorization, content-type\r\n",
        NULL, &a);
    CHECKF(a.status == 204 &&
               strcasestr(a.head, "Access-Control-Allow-Origin: http://app.example\r\n") &&
               strcasestr(a.head, "Access-Control-Allow-Methods: POST") &&
               strcasestr(a.head, "Access-Control-Allow-Headers: Authorization, Content-Type") &&
               strcasestr(a.head, "Access-Control-Max-Age:") && strcasestr(a.head, "Vary: Origin"),
           "preflight (no key needed): %d %s", a.status, a.head);
    answer_free(&a);
    req(s.port, NULL, "OPTIONS", "/v1/completions",
        "Origin: http://evil.example\r\nAccess-Control-Request-Method: POST\r\n", NULL, &a);
    check_error(&a, 403, "origin_not_allowed", "preflight from another origin");
    CHECK(!strcasestr(a.head, "Access-Control-Allow-Origin"));
    answer_free(&a);
    req(s.port, NULL, "OPTIONS", "/v1/completions",
        "Origin: http://app.example\r\nAccess-Control-Request-Method: DELETE\r\n", NULL, &a);
    check_error(&a, 405, NULL, "preflight for a method the route does not take");
    answer_free(&a);
    req(s.port, NULL, "POST", "/v1/completions",
        "Origin: http://app.example\r\nAuthorization: Bearer k\r\nContent-Type: "
        "application/json\r\n",
        SMALL, &a);
    CHECKF(a.status == 200 &&
               strcasestr(a.head, "Access-Control-Allow-Origin: http://app.example\r\n"),
           "the allowed origin's POST: %d %s", a.status, a.head);
    answer_free(&a);
    req(s.port, NULL, "GET", "/v1/models", "Origin: http://app.example\r\n", NULL, &a);
    CHECKF(a.status == 401 && strcasestr(a.head, "Access-Control-Allow-Origin: http://app.example"),
           "a 401 to the allowed origin is readable by it: %s", a.head);
    answer_free(&a);
    req(s.port, NULL, "GET", "/health", "Origin: http://evil.example\r\n", NULL, &a);
    CHECKF(a.status == 200 && !strcasestr(a.head, "Access-Control-Allow-Origin"),
           "another origin gets no CORS header: %s", a.head);
    answer_free(&a);
    CHECK(server_stop(&s) == 0);
}

/* A client that half-closes after its request still gets the answer. */
static void test_half_close(int port) {
    char *body = heavy_body(2, 1500); /* long enough to be polled many times */
    int fd = post_async(port, body);
    free(body);
    CHECK(fd >= 0 && shutdown(fd, SHUT_WR) == 0);
    answer a = {0};
    bool ok = fd >= 0 && read_answer(fd, 120 * PS_TEST_TIME_SCALE, &a);
    CHECKF(ok && a.status == 200 && a.len > 1000 && a.body[a.len - 1] == '}',
           "a half-closed client: status %d, %zu bytes", a.status, a.len);
    answer_free(&a);
    if (fd >= 0) close(fd);
}

/* A 40 KB path and 40 KB of headers: libmicrohttpd's own HTML pages before; OpenAI-shaped 414
 * and 431 now (its buffer is larger than our limits). */
static void test_http_limits(int port) {
    size_t n = 40000;
    char *big = malloc(n + 64);
    big[0] = '/';
    memset(big + 1, 'a', n);
    big[n + 1] = 0;
    answer a = {0};
    req(port, NULL, "GET", big, NULL, NULL, &a);
    check_error(&a, 414, "uri_too_long", "a 40 KB path");
    answer_free(&a);
    memcpy(big, "X-Big: ", 7);
    memset(big + 7, 'b', n);
    memcpy(big + 7 + n, "\r\n", 3);
    req(port, NULL, "GET", "/health", big, NULL, &a);
    check_error(&a, 431, "headers_too_large", "40 KB of headers");
    answer_free(&a);
    free(big);
}

/* n slow sockets from the addresses 127.0.<base>.1.., per_addr each: a partial request line,
 * then one byte a second. */
typedef struct {
    int *fd;
    int n;
} slow_set;

static slow_set slow_open(int port, int n, int per_addr, int base) {
    slow_set ss = {calloc((size_t)n, sizeof(int)), n};
    for (int i = 0; i < n; i++) {
        char src[32];
        snprintf(src, sizeof src, "127.0.%d.%d", base, 1 + i / per_addr);
        ss.fd[i] = dial(port, src);
        if (ss.fd[i] >= 0) {
            const char *h = "GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ";
            send_all(ss.fd[i], h, strlen(h));
            fcntl(ss.fd[i], F_SETFL, O_NONBLOCK);
        }
    }
    return ss;
}

/* One byte on every socket still open; returns how many the server has closed so far. */
static int slow_drip(slow_set *ss) {
    int closed = 0;
    for (int i = 0; i < ss->n; i++) {
        if (ss->fd[i] < 0) {
            closed++;
            continue;
        }
        char b[256];
        ssize_t r = recv(ss->fd[i], b, sizeof b, 0);
        bool gone = r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
        if (!gone && send(ss->fd[i], "x", 1, MSG_NOSIGNAL) < 0 && errno != EAGAIN) gone = true;
        if (gone) {
            close(ss->fd[i]);
            ss->fd[i] = -1;
            closed++;
        }
    }
    return closed;
}

static void slow_close(slow_set *ss) {
    for (int i = 0; i < ss->n; i++)
        if (ss->fd[i] >= 0) close(ss->fd[i]);
    free(ss->fd);
}

static long hwm_kb(pid_t pid) { return proc_status_kb(pid, "VmHWM:"); }

static void test_slow_sockets(void) {
    /* default limits: 1,000 slow sockets over 40 addresses (25 each) plus 200 from one more
     * address, dripping one byte a second, while a fresh client asks */
    server s;
    if (!server_start(&s, NULL)) {
        CHECKF(0, "the server did not start (log %s)", s.log);
        return;
    }
    slow_set many = slow_open(s.port, 1000, 25, 1);
    slow_set one = slow_open(s.port, 200, 200, 2);
    int opened = 0;
    for (int i = 0; i < 1000; i++) opened += many.fd[i] >= 0;
    CHECKF(opened == 1000, "only %d of 1000 slow sockets connected", opened);
    usleep(300000);
    int ok = 0, tries = 0;
    double t0 = ps_now_s();
    int closed_one = 0;
    while (ps_now_s() - t0 < 4) {
        answer a = {0};
        tries++;
        if (req(s.port, NULL, "POST", "/v1/completions", JSON, SMALL, &a) && a.status == 200)
            ok++;
        answer_free(&a);
        slow_drip(&many);
        closed_one = slow_drip(&one);
        usleep(200000);
    }
    CHECKF(tries >= 5 && ok == tries, "with 1,200 slow sockets open a fresh client got %d of %d",
           ok, tries);
    CHECKF(closed_one >= 200 - 32 && closed_one <= 200 - 32 + 2,
           "one address held %d of 200 connections (--per-ip 32)", 200 - closed_one);
    int closed_many = slow_drip(&many);
    CHECKF(closed_many == 0, "%d of the 1,000 slow sockets under every limit were closed within "
                             "4 s (the read deadline is 30 s)", closed_many);
    long kb = hwm_kb(s.pid);
    fprintf(stderr, "NOTE: 1,200 slow sockets: %d/%d fresh requests answered 200, peak RSS %ld KB\n",
            ok, tries, kb);
    slow_close(&many);
    slow_close(&one);
    CHECK(server_stop(&s) == 0);

    /* --read-timeout 2: every slow socket is cut within the deadline, however it drips */
    const char *opts[] = {"--read-timeout", "2", NULL};
    if (!server_start(&s, opts)) {
        CHECKF(0, "the server did not start (log %s)", s.log);
        return;
    }
    slow_set ss = slow_open(s.port, 300, 10, 3);
    t0 = ps_now_s();
    int closed = 0;
    while (ps_now_s() - t0 < 2 + 3 * PS_TEST_TIME_SCALE && closed < 300) {
        closed = slow_drip(&ss);
        usleep(250000);
    }
    double secs = ps_now_s() - t0;
    CHECKF(closed == 300, "--read-timeout 2: %d of 300 slow sockets cut after %.1f s", closed,
           secs);
    CHECKF(secs >= 1.5, "cut after %.2f s, before the deadline", secs);
    slow_close(&ss);
    answer a = {0};
    req(s.port, NULL, "GET", "/metrics", NULL, NULL, &a);
    const char *m = strstr(a.body, "\npromptscore_connections_timed_out_total ");
    CHECKF(m && atoi(m + 41) >= 300, "the timed-out counter: %.80s", m ? m : "(absent)");
    answer_free(&a);
    CHECK(server_stop(&s) == 0);
}

/* A body of one text prompt that is one long word, as big as asked (the costliest text to
 * tokenize per byte; over the context: a 400 once tokenized). */
static char *text_body(size_t bytes) {
    char *b = malloc(bytes + 64);
    size_t o = (size_t)sprintf(b, "{\"prompt\":\"");
    memset(b + o, 'a', bytes - o - 2);
    strcpy(b + bytes - 2, "\"}");
    return b;
}

/* Bounded work: limits at and over, admission before parsing, peak RSS under the budget, and
 * round robin (a small request is not stuck behind a huge one). */
static void test_bounded(void) {
    server s;
    const char *opts[] = {"--mem-budget", "67108864", "--max-body", "4194304", "--max-prompts",
                          "16", "--max-response", "4000000", "--queue", "16", NULL};
    if (!server_start(&s, opts)) {
        CHECKF(0, "the server did not start (log %s)", s.log);
        return;
    }
    answer a = {0};
    char *b = heavy_body(16, 20);
    req(s.port, NULL, "POST", "/v1/completions", JSON, b, &a);
    CHECKF(a.status == 200, "16 prompts (--max-prompts 16): %d %.200s", a.status, a.body);
    answer_free(&a);
    free(b);
    b = heavy_body(17, 20);
    req(s.port, NULL, "POST", "/v1/completions", JSON, b, &a);
    check_error(&a, 400, "too_many_prompts", "17 prompts");
    CHECKF(strstr(a.body, "17 prompts") && strstr(a.body, "limit of 16"), "%s", a.body);
    answer_free(&a);
    free(b);
    /* the streaming check: a prompt list over --max-prompts and an id list over the context
     * (2048) are refused as the body arrives; the rest of a 300 KB body (spaces) is dropped
     * unread into memory, and the peak RSS does not move */
    {
        const char *cases[][2] = {
            {"{\"prompt\":[[5],[5],[5],[5],[5],[5],[5],[5],[5],[5],[5],[5],[5],[5],[5],[5],[5],",
             "too_many_prompts"},
            {NULL, "context_length_exceeded"}};
        char ids[16384];
        size_t o = (size_t)sprintf(ids, "{\"max_tokens\":0,\"prompt\":[");
        for (int i = 0; i < 2100; i++) o += (size_t)sprintf(ids + o, "7,");
        cases[1][0] = ids;
        for (int k = 0; k < 2; k++) {
            int fd = dial(s.port, NULL);
            char h[256];
            snprintf(h, sizeof h,
                     "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                     "application/json\r\nContent-Length: 300000\r\n\r\n");
            char *rest = malloc(300000);
            memset(rest, ' ', 300000);
            long kb0 = hwm_kb(s.pid);
            CHECK(fd >= 0 && send_all(fd, h, strlen(h)) &&
                  send_all(fd, cases[k][0], strlen(cases[k][0])) &&
                  send_all(fd, rest, 300000 - strlen(cases[k][0])));
            free(rest);
            bool got = fd >= 0 && read_answer(fd, 5 * PS_TEST_TIME_SCALE, &a);
            CHECKF(got, "%s: no answer", cases[k][1]);
            if (got) check_error(&a, 400, cases[k][1], cases[k][1]);
            CHECKF(strstr(a.body, "before pars") && hwm_kb(s.pid) - kb0 < 2048,
                   "%s: refused before parsing, peak RSS +%ld KB: %.200s", cases[k][1],
                   hwm_kb(s.pid) - kb0, a.body);
            answer_free(&a);
            if (fd >= 0) close(fd);
        }
    }
    /* the answer's estimate: 400 bytes per entry at K = 5 */
    b = heavy_body(8, 1000);
    req(s.port, NULL, "POST", "/v1/completions", JSON, b, &a);
    CHECKF(a.status == 200 && a.len < 4000000, "8 x 1000 tokens, K 5 (estimate 3.2 MB): %d, %zu "
           "bytes", a.status, a.len);
    answer_free(&a);
    free(b);
    req(s.port, NULL, "GET", "/metrics", NULL, NULL, &a);
    const char *m = strstr(a.body, "\npromptscore_prompt_tokens_scored_total ");
    long scored0 = m ? atol(m + 40) : -1;
    answer_free(&a);
    b = heavy_body(8, 1500);
    req(s.port, NULL, "POST", "/v1/completions", JSON, b, &a);
    check_error(&a, 413, "response_too_large", "8 x 1500 tokens, K 5 (estimate 4.8 MB)");
    CHECKF(strstr(a.body, "4000000") && strstr(a.body, "about 48"), "both numbers: %s", a.body);
    answer_free(&a);
    free(b);
    req(s.port, NULL, "GET", "/metrics", NULL, NULL, &a);
    m = strstr(a.body, "\npromptscore_prompt_tokens_scored_total ");
    CHECKF(scored0 >= 0 && m && atol(m + 40) == scored0,
           "the 413 came before any scoring: tokens scored %ld -> %ld", scored0,
           m ? atol(m + 40) : -1);
    answer_free(&a);
    /* the memory budget: a body whose parse alone would need more is refused on its headers */
    {
        int fd = dial(s.port, NULL);
        const char *h = "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                        "application/json\r\nContent-Length: 3000000\r\n\r\n";
        CHECK(fd >= 0 && send_all(fd, h, strlen(h)) && read_answer(fd, 5, &a));
        check_error(&a, 413, "request_too_large", "a 3 MB body (144 MB to parse, budget 64 MiB)");
        CHECKF(strstr(a.body, "3000000") && strstr(a.body, "67108864"), "%s", a.body);
        answer_free(&a);
        if (fd >= 0) close(fd);
    }
    /* six 1.2 MB bodies at once (58 MB each to parse and tokenize): their headers first; one is
     * admitted, the other five get 503 + Retry-After on their headers alone; then the admitted
     * one's body (tokenized: a 400, over the context); the peak RSS stays under the budget */
    /* the requests before have let go of their share (the gauge the budget is read from) */
    long held = -1;
    for (double t1 = ps_now_s(); held != 0 && ps_now_s() - t1 < 10 * PS_TEST_TIME_SCALE;) {
        req(s.port, NULL, "GET", "/metrics", NULL, NULL, &a);
        const char *u = strstr(a.body, "\npromptscore_memory_budget_used_bytes ");
        held = u ? atol(u + 39) : -1;
        answer_free(&a);
        if (held != 0) usleep(20000);
    }
    CHECKF(held == 0, "the memory budget still held %ld bytes with nothing in flight", held);
    long base_kb = hwm_kb(s.pid);
    char *big = text_body(1200000);
    int fds[6];
    char hb[256];
    snprintf(hb, sizeof hb,
             "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
             "application/json\r\nContent-Length: %zu\r\n\r\n", strlen(big));
    for (int i = 0; i < 6; i++) {
        fds[i] = dial(s.port, NULL);
        if (fds[i] >= 0 && !send_all(fds[i], hb, strlen(hb))) {
            close(fds[i]);
            fds[i] = -1;
        }
    }
    int n400 = 0, n503 = 0, waiting = 0, n_answered = 0, last = 0;
    bool answered[6] = {false};
    /* the refusals come at once; wait for five of them (at most 3 s: the one admitted must not
     * sit idle into --idle-timeout) */
    for (double t1 = ps_now_s(); n_answered < 5 && ps_now_s() - t1 < 3;) {
        struct pollfd p[6];
        for (int i = 0; i < 6; i++) p[i] = (struct pollfd){.fd = answered[i] ? -1 : fds[i], .events = POLLIN};
        if (poll(p, 6, 100) <= 0) continue;
        for (int i = 0; i < 6; i++) {
            if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            answered[i] = true;
            n_answered++;
            if (read_answer(fds[i], 5 * PS_TEST_TIME_SCALE, &a))
                n503 += a.status == 503 && strcasestr(a.head, "Retry-After:") &&
                        strstr(a.body, "memory budget");
            answer_free(&a);
        }
    }
    for (int i = 0; i < 6; i++) {
        if (fds[i] < 0 || answered[i]) continue;
        waiting++;
        if (send_all(fds[i], big, strlen(big)) &&
            read_answer(fds[i], 60 * PS_TEST_TIME_SCALE, &a)) {
            n400 += a.status == 400;
            last = a.status;
        }
        answer_free(&a);
    }
    for (int i = 0; i < 6; i++)
        if (fds[i] >= 0) close(fds[i]);
    long peak_kb = hwm_kb(s.pid);
    CHECKF(waiting == 1 && n400 == 1 && n503 == 5,
           "six 1.2 MB bodies at once: %d admitted on their headers (%d parsed, 400 over the "
           "context; the last said %d), %d refused 503 before their bodies", waiting, n400, last,
           n503);
    CHECKF(peak_kb - base_kb < 65536 + RSS_SLACK_KB,
           "peak RSS grew by %ld KB, over the 64 MiB budget", peak_kb - base_kb);
    fprintf(stderr, "NOTE: six 1.2 MB bodies: %d parsed, %d 503; peak RSS %ld KB (+%ld KB)\n",
            n400, n503, peak_kb, peak_kb - base_kb);
    free(big);
    CHECK(server_stop(&s) == 0);
}

/* round robin: a small request sent after a huge one is answered while the huge one runs */
static void test_round_robin(const char *heavy) {
    server s;
    answer a = {0};
    if (!server_start(&s, NULL)) {
        CHECKF(0, "the server did not start (log %s)", s.log);
        return;
    }
    int fd = post_async(s.port, heavy);
    usleep(300000);
    double t0 = ps_now_s();
    req(s.port, NULL, "POST", "/v1/completions", JSON, SMALL, &a);
    double small_s = ps_now_s() - t0;
    /* the tokens scored when the small one is answered: first in, first out would have scored
     * all 512 x 500 of the huge one first */
    answer m = {0};
    req(s.port, NULL, "GET", "/metrics", NULL, NULL, &m);
    const char *t = strstr(m.body, "\npromptscore_prompt_tokens_scored_total ");
    long scored = t ? atol(t + 40) : -1;
    answer_free(&m);
    CHECKF(a.status == 200 && scored >= 0 && scored < 64 * 500,
           "a small request behind a huge one: %d after %.2f s, with %ld of the huge one's %d "
           "tokens scored (first in, first out scores them all first)",
           a.status, small_s, scored, 64 * 500);
    fprintf(stderr, "NOTE: a small request behind a 512 x 500-token one answered in %.3f s\n",
            small_s);
    answer_free(&a);
    if (fd >= 0) {
        struct linger l = {1, 0}; /* reset: the huge request is cancelled */
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
        close(fd);
    }
    CHECK(server_stop(&s) == 0);
}

static void test_stops(void) {
    server s;
    /* a client stalled in its body (9 of 100 bytes) does not hold the stop */
    if (!server_start(&s, NULL)) {
        CHECKF(0, "the server did not start (log %s)", s.log);
        return;
    }
    int fd = dial(s.port, NULL);
    const char *h = "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                    "application/json\r\nContent-Length: 100\r\n\r\n{\"prompt\"";
    CHECK(fd >= 0 && send_all(fd, h, strlen(h)));
    usleep(200000);
    /* the bound, 3 s on a quiet machine (the read timeout it must not wait for is 30 s), is
     * stretched by the load measured now */
    const double load = ps_test_load_factor(), bound = 3 * PS_TEST_TIME_SCALE * load;
    double t0 = ps_now_s();
    kill(s.pid, SIGTERM);
    int rc = server_wait(&s, 10 * PS_TEST_TIME_SCALE * load);
    CHECKF(rc == 0 && ps_now_s() - t0 < bound,
           "SIGTERM with a stalled client: exit %d after %.1f s (bound %.1f s at load %.2f)", rc,
           ps_now_s() - t0, bound, load);
    if (fd >= 0) close(fd);
}

/* Waits (bounded) until the server's engine holds a submitted request whose prompts are not
 * all started (/metrics promptscore_prompts_waiting > 0): the request sent with post_async is
 * then running, whatever the machine's load, where a fixed sleep may fall before its body has
 * even been parsed. */
static bool wait_running(int port) {
    for (double t0 = ps_now_s(); ps_now_s() - t0 < 30 * PS_TEST_TIME_SCALE; usleep(20000)) {
        answer a;
        bool got = req(port, NULL, "GET", "/metrics", NULL, NULL, &a);
        const char *m = got ? strstr(a.body, "\npromptscore_prompts_waiting ") : NULL;
        int waiting = m ? atoi(m + strlen("\npromptscore_prompts_waiting ")) : 0;
        answer_free(&a);
        if (waiting > 0) return true;
    }
    return false;
}

static void test_drain(const char *heavy) {
    /* a running request and --drain-s 1: out within the deadline (and a moment) */
    server s;
    const char *opts[] = {"--drain-s", "1", "--max-seqs", "1", NULL};
    if (!server_start(&s, opts)) {
        CHECKF(0, "the server did not start (log %s)", s.log);
        return;
    }
    int fd = post_async(s.port, heavy);
    CHECKF(wait_running(s.port), "the long request never ran (log %s)", s.log);
    /* out within the 1 s deadline plus 3 s on a quiet machine, stretched by the load now */
    const double load = ps_test_load_factor(), bound = 1 + 3 * PS_TEST_TIME_SCALE * load;
    double t0 = ps_now_s();
    kill(s.pid, SIGTERM);
    answer a = {0};
    bool got = fd >= 0 && read_answer(fd, 20 * PS_TEST_TIME_SCALE * load, &a);
    int rc = server_wait(&s, 20 * PS_TEST_TIME_SCALE * load);
    double secs = ps_now_s() - t0;
    CHECKF(rc == 0 && secs < bound,
           "--drain-s 1 with a long request running: exit %d after %.1f s (bound %.1f s at load "
           "%.2f)", rc, secs, bound, load);
    CHECKF(got && a.status == 503, "the request cut by the drain deadline: %d %.200s", a.status,
           a.body);
    answer_free(&a);
    if (fd >= 0) close(fd);
}

static void test_second_signal(const char *heavy) {
    server s;
    /* one prompt at a time: with the default --max-seqs 16 the heavy request was seen to end
     * before the second signal (exit 0 after the drain) */
    const char *opts[] = {"--max-seqs", "1", NULL};
    if (!server_start(&s, opts)) {
        CHECKF(0, "the server did not start (log %s)", s.log);
        return;
    }
    int fd = post_async(s.port, heavy);
    CHECKF(wait_running(s.port), "the long request never ran (log %s)", s.log);
    kill(s.pid, SIGTERM);
    /* the first signal taken (the server says it is draining), then the second */
    bool draining = false;
    for (double t1 = ps_now_s(); !draining && ps_now_s() - t1 < 10 * PS_TEST_TIME_SCALE;
         usleep(10000))
        draining = log_has(&s, "finishing running requests");
    CHECKF(draining, "the first SIGTERM was not taken (log %s)", s.log);
    /* out at once: 2 s on a quiet machine, stretched by the load now (the drain it cuts short
     * would take the heavy request's whole run) */
    const double load = ps_test_load_factor(), bound = 2 * PS_TEST_TIME_SCALE * load;
    double t0 = ps_now_s();
    kill(s.pid, SIGTERM);
    int rc = server_wait(&s, 10 * PS_TEST_TIME_SCALE * load);
    CHECKF(rc == 143 && ps_now_s() - t0 < bound,
           "a second SIGTERM while draining: exit %d after %.1f s (bound %.1f s at load %.2f)",
           rc, ps_now_s() - t0, bound, load);
    CHECK(log_has(&s, "second signal: exiting now"));
    if (fd >= 0) close(fd);
}

/* Sends a POST /v1/completions with Transfer-Encoding: chunked (no Content-Length) on fd: the
 * headers, then body in chunks of `piece` bytes and the last chunk; `piece` 0 sends the
 * headers only. */
static bool send_chunked(int fd, const char *body, size_t len, size_t piece) {
    const char *h = "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                    "application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n";
    if (!send_all(fd, h, strlen(h))) return false;
    if (!piece) return true;
    for (size_t off = 0; off < len; off += piece) {
        size_t n = len - off < piece ? len - off : piece;
        char sz[32];
        snprintf(sz, sizeof sz, "%zx\r\n", n);
        if (!send_all(fd, sz, strlen(sz)) || !send_all(fd, body + off, n) ||
            !send_all(fd, "\r\n", 2))
            return false;
    }
    return send_all(fd, "0\r\n\r\n", 5);
}

/* A body of undeclared length is charged for what has arrived: a chunked request that stalls
 * after one 4-byte chunk (default limits: --max-body 16 MiB, --mem-budget 1 GiB) holds next to
 * none of the budget, so five other chunked requests beside it are all answered 200 (charged
 * 48 x --max-body up front, the stalled one held 805 MB and every other one got 503 until the
 * read timeout). And the size check of a chunked body: 250 KB against --max-body 200000 is
 * 413, naming the limit. */
static void test_chunked(void) {
    server s;
    if (!server_start(&s, NULL)) {
        CHECKF(0, "the server did not start (log %s)", s.log);
        return;
    }
    int stalled = dial(s.port, NULL);
    CHECK(stalled >= 0 && send_chunked(stalled, NULL, 0, 0) &&
          send_all(stalled, "4\r\n{\"pr\r\n", 9));
    int ok = 0;
    double t0 = ps_now_s();
    for (int i = 0; i < 5; i++) {
        answer a;
        int fd = dial(s.port, NULL);
        bool got = fd >= 0 && send_chunked(fd, SMALL, strlen(SMALL), 7) &&
                   read_answer(fd, 30 * PS_TEST_TIME_SCALE, &a);
        if (got && a.status == 200 && strstr(a.body, "\"choices\"")) ok++;
        else fprintf(stderr, "  chunked request %d beside the stalled one: %d %.200s\n", i,
                     got ? a.status : 0, got ? a.body : "(no answer)");
        if (got) answer_free(&a);
        if (fd >= 0) close(fd);
    }
    CHECKF(ok == 5, "beside a stalled chunked request, %d of 5 chunked requests got 200", ok);
    fprintf(stderr, "NOTE: beside a stalled chunked request, 5 chunked requests: %d x 200 in "
                    "%.3f s\n", ok, ps_now_s() - t0);
    if (stalled >= 0) close(stalled);
    CHECK(server_stop(&s) == 0);

    const char *opts[] = {"--max-body", "200000", NULL};
    if (!server_start(&s, opts)) {
        CHECKF(0, "the server did not start (log %s)", s.log);
        return;
    }
    size_t n = 250000;
    char *big = malloc(n);
    memset(big, ' ', n);
    memcpy(big, "{\"prompt\": \"", 12);
    memcpy(big + n - 2, "\"}", 2);
    answer a;
    int fd = dial(s.port, NULL);
    CHECK(fd >= 0 && send_chunked(fd, big, n, 16384) && read_answer(fd, 30 * PS_TEST_TIME_SCALE, &a));
    check_error(&a, 413, NULL, "250 KB chunked body, --max-body 200000");
    CHECKF(strstr(a.body, "200000") != NULL, "the 413 names the limit: %.200s", a.body);
    fprintf(stderr, "NOTE: 250 KB chunked body, --max-body 200000: %d\n", a.status);
    answer_free(&a);
    if (fd >= 0) close(fd);
    /* A declared 250 KB body is answered on its headers, and the socket lingers: a client
     * that goes on sending after the answer (as curl does when the answer comes while it
     * sends) is not reset; its bytes are read and dropped, and it then reads the end of the
     * stream. Before the lingering close, the server closed the socket at once, and the
     * sends after the first failed (the test server's flaky 413 under TSan). */
    fd = dial(s.port, NULL);
    char hd[256];
    snprintf(hd, sizeof hd, "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                            "application/json\r\nContent-Length: %zu\r\n\r\n", n);
    CHECK(fd >= 0 && send_all(fd, hd, strlen(hd)) && read_answer(fd, 5 * PS_TEST_TIME_SCALE, &a));
    check_error(&a, 413, NULL,
                "a declared 250 KB body, --max-body 200000, answered on its headers");
    answer_free(&a);
    size_t sent = 0;
    for (bool go = fd >= 0; go && sent < n;) {
        const size_t k = PS_MIN((size_t)16384, n - sent);
        go = send_all(fd, big + sent, k);
        if (go && sent == 0) usleep(100000); /* the server's close, or its reset, is back */
        if (go) sent += k;
    }
    char tail[64];
    ssize_t r = fd >= 0 ? recv(fd, tail, sizeof tail, 0) : -1;
    CHECKF(sent >= n && r == 0, "after the 413 the rest of the body went out (%zu of %zu bytes "
           "sent) and the stream ended cleanly (recv %zd, %s)", sent, n, r,
           r < 0 ? strerror(errno) : "");
    if (fd >= 0) close(fd);
    free(big);
    CHECK(server_stop(&s) == 0);
}

/* {"prompt":"aaa...a"}, n bytes in all: one word of n - 13 letters (malloc'd). */
static char *one_word_body(size_t n) {
    char *body = malloc(n + 1);
    if (!body) return NULL;
    memset(body, 'a', n);
    memcpy(body, "{\"prompt\":\"", 11);
    memcpy(body + n - 2, "\"}", 2);
    body[n] = 0;
    return body;
}

/* The tokenizer's memory per request: a 15 MB body holding one word (default limits, so it is
 * admitted: under --max-body and the budget) is refused with context_length_exceeded, and the
 * server's peak RSS grows by less than 4 times the body's size (the tokenizer merging the word
 * whole took 40 times: 593 MB). Under AddressSanitizer (shadow memory, redzones) the peak is
 * only reported. */
static void test_one_word(void) {
#if defined(__SANITIZE_ADDRESS__)
    const bool bound = false; /* the answer is checked; the RSS only reported */
#else
    const bool bound = true;
#endif
    server s;
    if (!server_start(&s, NULL)) {
        CHECKF(0, "the server did not start (log %s)", s.log);
        return;
    }
    const size_t n = 15000000;
    char *body = one_word_body(n);
    if (!body) {
        CHECKF(0, "out of memory for a 15 MB body");
        CHECK(server_stop(&s) == 0);
        return;
    }
    long before = proc_status_kb(s.pid, "VmRSS:");
    answer a;
    CHECK(req(s.port, NULL, "POST", "/v1/completions", JSON, body, &a));
    long peak = hwm_kb(s.pid);
    check_error(&a, 400, "context_length_exceeded", "a 15 MB one-word prompt");
    CHECKF(!bound || peak - before < (long)(4 * n / 1024),
           "a 15 MB one-word body: peak RSS %ld KB, %ld KB over the idle server's %ld KB (at "
           "most 4 x the body: %ld KB)", peak, peak - before, before, (long)(4 * n / 1024));
    fprintf(stderr, "NOTE: a 15 MB one-word body: %d, peak RSS %ld KB (idle %ld KB, +%ld KB = "
                    "%.2f x the body)\n", a.status, peak, before, peak - before,
            (double)(peak - before) * 1024 / (double)n);
    answer_free(&a);
    free(body);
    CHECK(server_stop(&s) == 0);
}

/* /tokenize has no context to refuse a long text by (vLLM and llama.cpp tokenize any length of
 * words); its tokenizer memory is bounded per piece merged whole (PS_REQ_MAX_PIECE, 4 MiB):
 * a 15 MB one-word text gets 413 word_too_long before the ~30 bytes per byte of merge state
 * are made (it took 39 x the body), the peak under 4 x the body, and the server goes on. */
static void test_tokenize_word(void) {
#if defined(__SANITIZE_ADDRESS__)
    const bool bound = false; /* the answer is checked; the RSS only reported */
#else
    const bool bound = true;
#endif
    const size_t n = 15000000;
    char *body = one_word_body(n);
    if (!body) {
        CHECKF(0, "out of memory for a 15 MB body");
        return;
    }
    server s;
    if (!server_start(&s, NULL)) {
        CHECKF(0, "the server did not start (log %s)", s.log);
        free(body);
        return;
    }
    long before = proc_status_kb(s.pid, "VmRSS:");
    answer a;
    CHECK(req(s.port, NULL, "POST", "/tokenize", JSON, body, &a));
    long grew = hwm_kb(s.pid) - before, limit = (long)(4 * n / 1024);
    CHECKF(a.status == 413 && strstr(a.body, "word_too_long") && strstr(a.body, "14999"),
           "/tokenize of a 15 MB word: 413 word_too_long naming its length: %d %.300s", a.status,
           a.body);
    CHECKF(!bound || grew < limit,
           "/tokenize of a 15 MB word: peak RSS grew %ld KB, over 4 x the body (%ld KB)", grew,
           limit);
    fprintf(stderr, "NOTE: /tokenize of a 15 MB word: %d, peak RSS +%ld KB = %.2f x the body\n",
            a.status, grew, (double)grew * 1024 / (double)n);
    answer_free(&a);
    /* the server goes on */
    CHECK(req(s.port, NULL, "POST", "/tokenize", JSON, "{\"prompt\":\"hello world\"}", &a));
    CHECKF(a.status == 200 && strstr(a.body, "\"tokens\":["), "/tokenize after the 413: %d %.200s",
           a.status, a.body);
    answer_free(&a);
    CHECK(server_stop(&s) == 0);
    free(body);
}

int main(void) {
    signal(SIGPIPE, SIG_IGN);
    test_guard_functions();
    const char *shared = ps_test_shared();
    if (!shared) {
        SKIP("no shared test material: the serving-safety tests need models/stories260K.gguf");
        return ps_test_done("serve_safety");
    }
    g_build = getenv("BUILD") && *getenv("BUILD") ? getenv("BUILD") : "build";
    snprintf(g_bin, sizeof g_bin, "%.1000s/promptscore", g_build);
    snprintf(g_model, sizeof g_model, "%s/models/stories260K.gguf", shared);
    if (access(g_bin, X_OK) != 0) {
        SKIP("%s is not built", g_bin);
        return ps_test_done("serve_safety");
    }
    char dir[1100];
    snprintf(dir, sizeof dir, "%.1000s/tests", g_build);
    mkdir(dir, 0755);
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < 4096 && rl.rlim_max >= 4096) {
        rl.rlim_cur = 4096;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    char key_file[1200];
    snprintf(key_file, sizeof key_file, "%s/key-%d.txt", dir, (int)getpid());
    FILE *kf = fopen(key_file, "w");
    if (kf) {
        fputs("s3cret-key\n", kf);
        fclose(kf);
    }

    test_api_key(key_file);
    unlink(key_file);
    test_host_type_cors();
    server s;
    if (server_start(&s, NULL)) {
        test_half_close(s.port);
        test_http_limits(s.port);
        CHECK(server_stop(&s) == 0);
    } else {
        CHECKF(0, "the server did not start (log %s)", s.log);
    }
    test_chunked();
    test_one_word();
    test_tokenize_word();
    test_slow_sockets();
    test_stops();
    /* far more than the drain and signal tests wait on any machine: 256,000 positions (64 x 500
     * took 1.6 s on a busy 2-core machine: the drain test then got a 200 where it waits for 503) */
    char *heavy = heavy_body(512, 500);
    test_bounded();
    test_round_robin(heavy);
    test_drain(heavy);
    test_second_signal(heavy);
    free(heavy);
    return ps_test_done("serve_safety");
}
