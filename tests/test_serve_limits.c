/*
 * test_serve_limits.c — the server's memory budget, counted per allocation, and the headers
 * it will not read two ways. Black box, like test_serve_safety: starts $BUILD/promptscore
 * serve --port 0 (stories260K) and talks raw HTTP/1.1 over sockets, so it can send what curl
 * would not (a NUL in a header, two Content-Lengths).
 *
 *   - the meter alone (base/impl.h): blocks charged at their size while it is attached, the
 *     one the pool cannot cover refused, frees credited, trim, release, a closed meter inert;
 *   - the guard functions alone: the Host syntax (name or IP literal, optional numeric port,
 *     nothing else) and the API key compared over the value's every byte;
 *   - headers: two Content-Lengths (equal or not), Content-Length with Transfer-Encoding, two
 *     Hosts, two Authorizations, a malformed Host, a NUL in a value (the key's or another's)
 *     get a 400 in OpenAI's shape; a well-formed request with a port of 65535 passes;
 *   - body shapes (--mem-budget 48 MiB): `{}` repeated (to /v1/completions and /tokenize),
 *     `[]` repeated, a long string, many keys and deep-but-legal nesting, each ~0.9 MB in a
 *     field the server ignores. Each is
 *     answered 200, or refused 413 / 503 with a JSON error; the peak RSS (VmHWM) grows by at
 *     most the budget plus RSS_MARGIN_KB (what the allocator and libmicrohttpd keep beside
 *     what is counted), and `{}` repeated (whose tree costs more than the admission
 *     estimate per byte) is refused; afterwards /metrics shows none of the budget held;
 *   - 200 sequential requests, each holding more than half the budget while it is answered,
 *     each on a fresh connection sent as soon as the answer before it was read: all 200 (none
 *     refused by the share of the one before).
 * Skips when ../shared (or $PS_SHARED) is absent.
 */
#include "check.h"
#include "serve_proc.h"
#include "http_raw.h"
#include "serve/server_guard.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/stat.h>

/* Beside the budget: the allocator's free lists and rounding, libmicrohttpd's connection
 * buffers, thread stacks. Under AddressSanitizer every block carries redzones the accounting
 * does not see (it counts what the program asked for) and freed memory is not given back, so
 * the RSS bound is not checked there (RSS_CHECKED 0); the answers are. */
enum { RSS_MARGIN_KB = 8192 };
#if defined(__SANITIZE_ADDRESS__)
enum { RSS_CHECKED = 0 };
#else
enum { RSS_CHECKED = 1 };
#endif

static char g_bin[1024];
static char g_model[4200];
static const char *g_build = "build";

static bool server_start(server *s, const char *const *extra) {
    char dir[1100];
    snprintf(dir, sizeof dir, "%.1000s/tests", g_build);
    serve_opts o = {g_bin, g_model, dir, "limits", NULL, {-1, -1}};
    return serve_start(s, &o, extra);
}

/* Sends `raw` (n bytes, any bytes: NULs too) on a fresh connection and reads the answer. */
static bool exchange(int port, const char *raw, size_t n, answer *a) {
    memset(a, 0, sizeof *a);
    int fd = dial(port, NULL);
    bool ok = fd >= 0 && send_all(fd, raw, n) && read_answer(fd, 30 * PS_TEST_TIME_SCALE, a);
    if (!a->body) a->body = calloc(1, 1);
    if (fd >= 0) close(fd);
    return ok;
}

/* A POST of body to path with the header lines `headers` (the Host among them). */
static bool post_to(int port, const char *path, const char *headers, const char *body,
                    answer *a) {
    size_t blen = strlen(body), cap = strlen(headers) + blen + 256;
    char *raw = malloc(cap);
    int n = snprintf(raw, cap,
                     "POST %s HTTP/1.1\r\n%sContent-Type: application/json\r\n"
                     "Connection: close\r\nContent-Length: %zu\r\n\r\n%s",
                     path, headers, blen, body);
    bool ok = exchange(port, raw, (size_t)n, a);
    free(raw);
    return ok;
}

static bool post(int port, const char *headers, const char *body, answer *a) {
    return post_to(port, "/v1/completions", headers, body, a);
}

static bool is_json_error(const answer *a) {
    return strcasestr(a->head, "Content-Type: application/json") &&
           !strncmp(a->body, "{\"error\":{\"message\":", 20);
}

static long metric(int port, const char *name) {
    const char *raw = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    answer a;
    exchange(port, raw, strlen(raw), &a);
    char want[160];
    snprintf(want, sizeof want, "\n%s ", name);
    const char *m = strstr(a.body, want);
    long v = m ? atol(m + strlen(want)) : -1;
    answer_free(&a);
    return v;
}

static const char *SMALL = "{\"prompt\":\"Once upon a time\",\"max_tokens\":0,\"echo\":true,"
                           "\"logprobs\":1}";

/* ---- the guard functions ---------------------------------------------------------------- */

static void test_guard_functions(void) {
    struct {
        const char *host;
        bool ok;
    } hosts[] = {
        {"127.0.0.1", true},        {"127.0.0.1:8080", true},    {"127.0.0.1:65535", true},
        {"[::1]", true},            {"[::1]:80", true},          {"localhost.", true},
        {"scorer.internal:1", true}, {"a_b.example", true},      {"", true},
        {"[::1].evil.example", false}, {"[::1]evil", false},     {"127.0.0.1:evil.example", false},
        {"127.0.0.1:", false},      {"127.0.0.1:65536", false},  {"127.0.0.1:123456", false},
        {"[::1]:", false},          {"[::1", false},             {"[evil.example]", false},
        {"evil..example", false},   {"-evil.example", false},    {"evil.example:80:80", false},
        {"user@evil.example", false}, {"evil.example/x", false}, {":80", false},
    };
    for (size_t i = 0; i < sizeof hosts / sizeof hosts[0]; i++)
        CHECKF(ps_guard_host_syntax(hosts[i].host, strlen(hosts[i].host)) == hosts[i].ok,
               "Host syntax of '%s': want %s", hosts[i].host, hosts[i].ok ? "ok" : "refused");
    CHECK(!ps_guard_host_ok("[::1].evil.example", NULL));
    CHECK(!ps_guard_host_ok("[::1]evil", NULL));
    CHECK(!ps_guard_host_ok("127.0.0.1:evil.example", NULL));
    CHECK(ps_guard_host_ok("127.0.0.1:8080 ", NULL));
    CHECK(ps_guard_key_ok("KEY", 3, "Bearer KEY", 10));
    CHECK(!ps_guard_key_ok("KEY", 3, "Bearer KEY\0junk", 15));
    CHECK(!ps_guard_key_ok("KEY", 3, "Bearer KEY\0", 11));
    CHECK(!ps_guard_key_ok("KEY", 3, "Bearer KE", 9));
    CHECK(!ps_guard_key_ok("KEY", 3, "Bearer", 6));
}

/* ---- the meter on the allocation hook ---------------------------------------------------- */

static void test_meter(void) {
    ps_mem_pool pool;
    ps_mem_pool_init(&pool, 4 << 20);
    ps_mem_meter m;
    ps_mem_meter_init(&m, &pool);
    ps_mem_meter *prev = ps_mem_meter_attach(&m);
    void *a = ps_malloc(1 << 20);
    int64_t after_a = m.live;
    void *b = ps_malloc(2 << 20);
    void *c = ps_malloc(2 << 20); /* 5 MiB in all: over the 4 MiB pool */
    ps_mem_meter_attach(prev);
    CHECKF(a && b && !c && m.refused, "the third block passes the pool: refused (%p %p %p)", a, b,
           c);
    CHECKF(after_a >= (1 << 20) && m.live >= (3 << 20) && m.granted <= (4 << 20) &&
               ps_mem_pool_used(&pool) == m.granted,
           "charged at their size: live %lld, granted %lld, pool %lld", (long long)m.live,
           (long long)m.granted, (long long)ps_mem_pool_used(&pool));
    CHECKF(m.wanted > (4 << 20), "the refusal says what it would have needed: %lld",
           (long long)m.wanted);
    prev = ps_mem_meter_attach(&m);
    ps_free(b);
    void *r = ps_realloc(a, 2 << 20); /* grows into the room b left */
    ps_mem_meter_attach(prev);
    CHECKF(r && m.live >= (2 << 20) && m.live < (3 << 20), "freed and grown: live %lld",
           (long long)m.live);
    ps_mem_meter_trim(&m);
    CHECKF(m.granted == m.live + m.fixed && ps_mem_pool_used(&pool) == m.granted,
           "trimmed to what is live: granted %lld live %lld", (long long)m.granted,
           (long long)m.live);
    CHECK(ps_mem_meter_charge(&m, 1 << 20) && m.fixed == (1 << 20));
    CHECK(!ps_mem_meter_grant(&m, 8 << 20) && m.refused);
    int64_t kept = ps_mem_meter_release(&m, 4096);
    CHECKF(kept == 4096 && ps_mem_pool_used(&pool) == 4096, "released but 4096: kept %lld, pool "
           "%lld", (long long)kept, (long long)ps_mem_pool_used(&pool));
    ps_mem_pool_give(&pool, kept);
    prev = ps_mem_meter_attach(&m); /* closed: charges nothing */
    void *d = ps_malloc(8 << 20);
    ps_free(r);
    ps_mem_meter_attach(prev);
    CHECKF(d && ps_mem_pool_used(&pool) == 0, "a closed meter charges nothing: %p, pool %lld", d,
           (long long)ps_mem_pool_used(&pool));
    ps_free(d);
}

/* ---- headers read two ways ------------------------------------------------------------ */

static void test_headers(void) {
    server s;
    const char *opts[] = {"--api-key", "KEY", NULL};
    if (!server_start(&s, opts)) {
        CHECKF(0, "the server did not start (log %s)", s.log);
        return;
    }
    const char *H = "Host: 127.0.0.1\r\n", *A = "Authorization: Bearer KEY\r\n";
    char hdrs[512];
    answer a;
    snprintf(hdrs, sizeof hdrs, "%s%s", H, A);
    post(s.port, hdrs, SMALL, &a);
    CHECKF(a.status == 200, "a plain request: %d %.200s", a.status, a.body);
    answer_free(&a);
    /* the extra header lines of each case, sent beside Host and the key */
    char cl[64];
    snprintf(cl, sizeof cl, "Content-Length: %zu\r\n", strlen(SMALL));
    struct {
        const char *what, *extra, *host;
    } cases[] = {
        {"two equal Content-Lengths", cl, NULL},
        {"two Content-Lengths that differ", "Content-Length: 5\r\n", NULL},
        {"Content-Length and Transfer-Encoding", "Transfer-Encoding: chunked\r\n", NULL},
        {"Content-Length and 'Transfer-Encoding :'", "Transfer-Encoding : chunked\r\n", NULL},
        {"'Content-Length :' beside Content-Length", "Content-Length : 5\r\n", NULL},
        {"a tab before a header's colon", "X-Note\t: a\r\n", NULL},
        {"two Hosts", "Host: evil.example\r\n", NULL},
        {"two Authorizations", "Authorization: Bearer other\r\n", NULL},
        {"Host [::1].evil.example", "", "[::1].evil.example"},
        {"Host [::1]evil", "", "[::1]evil"},
        {"Host 127.0.0.1:evil.example", "", "127.0.0.1:evil.example"},
        {"Host with an empty port", "", "127.0.0.1:"},
        {"Host with port 65536", "", "127.0.0.1:65536"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (cases[i].host)
            snprintf(hdrs, sizeof hdrs, "Host: %s\r\n%s%s", cases[i].host, A, cases[i].extra);
        else
            snprintf(hdrs, sizeof hdrs, "%s%s%s", H, A, cases[i].extra);
        post(s.port, hdrs, SMALL, &a);
        CHECKF(a.status == 400 && is_json_error(&a) && strstr(a.body, "invalid_header"),
               "%s: want a 400 invalid_header, got %d %.200s", cases[i].what, a.status, a.body);
        answer_free(&a);
    }
    snprintf(hdrs, sizeof hdrs, "Host: 127.0.0.1:65535\r\n%s", A);
    post(s.port, hdrs, SMALL, &a);
    CHECKF(a.status == 200, "Host 127.0.0.1:65535: %d %.200s", a.status, a.body);
    answer_free(&a);
    /* a NUL in a value: the key's (the key then compared over the whole value), another's,
     * the key's as the last header; written raw, the NUL being no C string's */
    static const char nul_key[] = "GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                  "Authorization: Bearer KEY\0junk\r\nConnection: close\r\n\r\n";
    static const char nul_end[] = "GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                  "Authorization: Bearer KEY\0\r\nConnection: close\r\n\r\n";
    static const char nul_last[] = "GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                   "Connection: close\r\nAuthorization: Bearer KEY\0junk\r\n\r\n";
    static const char nul_other[] = "GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                    "Authorization: Bearer KEY\r\nX-Note: a\0b\r\n"
                                    "Connection: close\r\n\r\n";
    struct {
        const char *what, *raw;
        size_t n;
    } raws[] = {{"Bearer KEY\\0junk", nul_key, sizeof nul_key - 1},
                {"Bearer KEY\\0 then the line end", nul_end, sizeof nul_end - 1},
                {"Bearer KEY\\0junk as the last header", nul_last, sizeof nul_last - 1},
                {"a NUL in another header", nul_other, sizeof nul_other - 1}};
    for (size_t i = 0; i < sizeof raws / sizeof raws[0]; i++) {
        exchange(s.port, raws[i].raw, raws[i].n, &a);
        CHECKF((a.status == 400 || a.status == 401) && is_json_error(&a),
               "%s: want it refused (400 or 401), got %d %.200s", raws[i].what, a.status,
               a.body);
        answer_free(&a);
    }
    static const char ok_raw[] = "GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                 "Authorization: Bearer KEY\r\nConnection: close\r\n\r\n";
    exchange(s.port, ok_raw, sizeof ok_raw - 1, &a);
    CHECKF(a.status == 200, "the same without the NUL: %d %.200s", a.status, a.body);
    answer_free(&a);
    static const char bare_lf[] = "GET /v1/models HTTP/1.1\nHost: 127.0.0.1\n"
                                  "Authorization: Bearer KEY\nConnection: close\n\n";
    exchange(s.port, bare_lf, sizeof bare_lf - 1, &a);
    CHECKF(a.status == 200, "lines ended by a bare LF: %d %.200s", a.status, a.body);
    answer_free(&a);
    CHECK(serve_stop(&s) == 0);
}

/* ---- body shapes against the budget ------------------------------------------------------ */

/* {"prompt":"Once upon a time","max_tokens":0,"pad":<what>}, `what` being `unit` repeated
 * (comma separated) to about `bytes` bytes. */
static char *shape_body(const char *open, const char *unit, const char *close, size_t bytes) {
    size_t u = strlen(unit), cap = bytes + u + 256;
    char *b = malloc(cap);
    size_t o = (size_t)snprintf(b, cap, "{\"prompt\":\"Once upon a time\",\"max_tokens\":0,"
                                        "\"pad\":%s", open);
    for (int i = 0; o + u + 8 < bytes; i++) {
        if (i) b[o++] = ',';
        memcpy(b + o, unit, u);
        o += u;
    }
    o += (size_t)snprintf(b + o, cap - o, "%s}", close);
    return b;
}

static char *keys_body(size_t bytes) {
    char *b = malloc(bytes + 256);
    size_t o = (size_t)sprintf(b, "{\"prompt\":\"Once upon a time\",\"max_tokens\":0,\"pad\":{");
    for (int i = 0; o + 24 < bytes; i++) o += (size_t)sprintf(b + o, "%s\"k%d\":0", i ? "," : "", i);
    sprintf(b + o, "}}");
    return b;
}

static void test_shapes(void) {
    server s;
    const char *opts[] = {"--mem-budget", "50331648", "--max-body", "4194304", NULL};
    if (!server_start(&s, opts)) {
        CHECKF(0, "the server did not start (log %s)", s.log);
        return;
    }
    const long budget_kb = 50331648 / 1024;
    const char *H = "Host: 127.0.0.1\r\n";
    answer a;
    post(s.port, H, SMALL, &a); /* the workers' first pass maps their buffers */
    CHECKF(a.status == 200, "warm-up: %d %.200s", a.status, a.body);
    answer_free(&a);
    long base_kb = proc_status_kb(s.pid, "VmHWM:");
    char deep[128] = "";
    for (int i = 0; i < 30; i++) strcat(deep, "[");
    for (int i = 0; i < 30; i++) strcat(deep, "]");
    struct {
        const char *what, *path;
        char *body;
        bool must_refuse;
    } shapes[] = {
        {"{} repeated", "/v1/completions", shape_body("[", "{}", "]", 900000), true},
        {"{} repeated, /tokenize", "/tokenize", shape_body("[", "{}", "]", 900000), true},
        {"[] repeated", "/v1/completions", shape_body("[", "[]", "]", 900000), false},
        {"a long string", "/v1/completions",
         shape_body("\"", "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", "\"", 900000), false},
        {"many keys", "/v1/completions", keys_body(900000), false},
        {"deep nesting (30 levels)", "/v1/completions", shape_body("[", deep, "]", 900000),
         false},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        post_to(s.port, shapes[i].path, H, shapes[i].body, &a);
        bool refused = (a.status == 413 || a.status == 503) && is_json_error(&a) &&
                       strstr(a.body, "memory budget");
        CHECKF(a.status == 200 || refused, "%s: want 200 or a 413 / 503 naming the memory "
               "budget, got %d %.200s", shapes[i].what, a.status, a.body);
        if (shapes[i].must_refuse)
            CHECKF(refused, "%s (%zu bytes) is refused: %d %.200s", shapes[i].what,
                   strlen(shapes[i].body), a.status, a.body);
        long grew = proc_status_kb(s.pid, "VmHWM:") - base_kb;
        CHECKF(!RSS_CHECKED || grew <= budget_kb + RSS_MARGIN_KB,
               "%s: the peak RSS grew by %ld KB, over the budget (%ld KB) + %d KB",
               shapes[i].what, grew, budget_kb, RSS_MARGIN_KB);
        fprintf(stderr, "NOTE: %-26s %zu bytes: %d, peak RSS +%ld KB (budget %ld KB)\n",
                shapes[i].what, strlen(shapes[i].body), a.status, grew, budget_kb);
        answer_free(&a);
        free(shapes[i].body);
    }
    long held = metric(s.port, "promptscore_memory_budget_used_bytes");
    CHECKF(held == 0, "with nothing in flight the budget holds %ld bytes", held);
    CHECK(serve_stop(&s) == 0);
}

/* ---- a sequential client -------------------------------------------------------------------- */

/* n_prompts token-id prompts of len ids each (valid ids of stories260K), echo, logprobs 5. */
static char *ids_body(int n_prompts, int len) {
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

/* Each request's answer and results (4 x 1000 positions at K 5: an estimate of about 1.6 MB,
 * charged 1.5 times) hold more than half of the 4 MiB budget while it is answered, so two
 * cannot hold it at once: a request sent as soon as the answer before it was read is refused
 * 503 if that answer's share is still held. The server is the test build's with
 * PS_TEST_LINGER_MS (base/testhooks.h): each request's end on the server waits 25 ms after
 * the client has its answer, so a share given back only at the end of a request (or when the
 * answer is destroyed) is still held when the next request arrives, every time, not only when
 * the threads happen to race that way. */
static void test_sequential(void) {
    server s;
    const char *opts[] = {"--mem-budget", "4194304", NULL};
    char tbin[1100];
    snprintf(tbin, sizeof tbin, "%.1000s/tests/promptscore-t", g_build);
    char dir[1100];
    snprintf(dir, sizeof dir, "%.1000s/tests", g_build);
    serve_opts o = {tbin, g_model, dir, "limits-seq", NULL, {-1, -1}};
    setenv("PS_TEST_LINGER_MS", "25", 1);
    const bool started = serve_start(&s, &o, opts);
    unsetenv("PS_TEST_LINGER_MS");
    if (!started) {
        CHECKF(0, "the server did not start (log %s)", s.log);
        return;
    }
    char *body = ids_body(4, 1000);
    int n_ok = 0, n_503 = 0, other = 0, last_bad = 0;
    char last_body[256] = "";
    for (int i = 0; i < 200; i++) {
        answer a;
        post(s.port, "Host: 127.0.0.1\r\n", body, &a);
        if (a.status == 200) n_ok++;
        else if (a.status == 503) n_503++;
        else other++;
        if (a.status != 200) {
            last_bad = a.status;
            snprintf(last_body, sizeof last_body, "%.200s", a.body);
        }
        answer_free(&a);
    }
    CHECKF(n_ok == 200, "200 sequential requests (4 MiB budget, 2.4 MB each): %d answered 200, "
           "%d refused 503, %d other (last %d: %s)", n_ok, n_503, other, last_bad, last_body);
    fprintf(stderr, "NOTE: 200 sequential requests: %d 200, %d 503, %d other\n", n_ok, n_503,
            other);
    free(body);
    CHECK(serve_stop(&s) == 0);
}

int main(void) {
    test_meter();
    test_guard_functions();
    const char *shared = getenv("PS_SHARED") && *getenv("PS_SHARED") ? getenv("PS_SHARED")
                                                                       : "../shared";
    char probe[4200];
    snprintf(probe, sizeof probe, "%s/models/stories260K.gguf", shared);
    if (access(probe, R_OK) != 0) {
        SKIP("%s not found", probe);
        return ps_test_done("serve_limits");
    }
    g_build = getenv("BUILD") && *getenv("BUILD") ? getenv("BUILD") : "build";
    snprintf(g_bin, sizeof g_bin, "%.1000s/promptscore", g_build);
    snprintf(g_model, sizeof g_model, "%s", probe);
    if (access(g_bin, X_OK) != 0) {
        SKIP("%s is not built", g_bin);
        return ps_test_done("serve_limits");
    }
    char dir[1100];
    snprintf(dir, sizeof dir, "%.1000s/tests", g_build);
    mkdir(dir, 0755);
    test_headers();
    test_shapes();
    test_sequential();
    return ps_test_done("serve_limits");
}
