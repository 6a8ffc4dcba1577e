/*
 * test_server.c — black-box tests of `promptscore serve` on 127.0.0.1 with stories260K.
 *
 * Starts $BUILD/promptscore serve --port 0 (the server picks a free port and prints it; its
 * stderr goes to $BUILD/tests/server-<pid>.log, which is read for that line), then talks HTTP
 * to it with libcurl and reads answers with jansson:
 *   - lm-eval's request ([[ids]...], echo, max_tokens 1, logprobs 1): one choice per prompt in
 *     order, n + 1 entries, entry 0 null, token_logprobs[i] == max(top_logprobs[i]) where the
 *     token is the argmax, the values equal `promptscore score`'s bit for bit (when that CLI
 *     is built); the legacy form (max_tokens 0, logprobs 10, 20 lists) agrees with it;
 *   - /health, /v1/models, /tokenizer_info, /tokenize, /detokenize, /;
 *   - /metrics parsed as Prometheus exposition text (m_parse: every line a HELP/TYPE comment
 *     or a sample with a TYPE'd family, labels and a number; histogram buckets increasing in
 *     le and cumulative, +Inf = _count, a _sum), the series the requests made (the hung-up
 *     request counted under status 499), and every counter / histogram series never lower in
 *     a later scrape (back to back, and after the load; 200s grew by exactly the requests);
 *   - every bad input of docs/api.md gets its status and an OpenAI-shaped error, and the next
 *     good request still gets exactly the baseline answer;
 *   - load: 8 threads x 200 requests, zero errors, every answer equal to the single-client one,
 *     server RSS flat from request 100 to the end;
 *   - a client that hangs up (resets) mid-request does not disturb the next one (its work
 *     stopped: fewer than all of its prompt tokens scored, counted on /metrics); SIGTERM while idle
 *     exits 0; a second serve on the busy port exits 1 naming the address, the first answers;
 *   - a request held by the test (the PS_TEST_HOLD_FDS hook of base/testhooks.h, which only a
 *     test build has: these servers are $BUILD/tests/promptscore-t; the engine worker announces each prompt on a pipe and waits for the test's byte on another), so
 *     nothing races: --queue 1 answers a second request 503 with Retry-After; SIGTERM, and
 *     then SIGINT on a second server, while it runs: it gets exactly the baseline answer and
 *     the server exits 0;
 *   - --act on a generated BF16 model: serve --act f32 = score --act f32 bit for bit and differs
 *     from native (within 0.05 per logprob), serve without --act = score --act native; --act
 *     bogus and --act without a value exit 2 naming --act.
 * Skips when ../shared (or $PS_SHARED) is absent.
 */
#include "check.h"
#include "gen/genmodel.h"
#include "serve_proc.h"
#include "serve/server.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>

/* Sanitizer builds run the same checks slower and with ASan's quarantine holding freed memory:
 * heavier work is made lighter there, and the RSS slack larger. */
#if defined(__SANITIZE_ADDRESS__)
#define PS_T_SAN 1
#else
#define PS_T_SAN 0
#endif
enum { HEAVY_LEN = PS_T_SAN ? 1000 : 2000, RSS_SLACK_KB = PS_T_SAN ? 16384 : 2048 };

static char g_bin[1024];
static char g_tbin[1024]; /* the test build of the binary (PS_TESTING): the hold hook */
static char g_model[4200];
/* For the next server started: PS_TEST_HOLD_FDS (base/testhooks.h) and the two descriptors the
 * child keeps (every pipe end is opened close-on-exec; the child clears it on these). A server
 * started with it is the test build, g_tbin: the release binary has no hold hook. */
static char g_hold_env[32];
static int g_hold_keep[2] = {-1, -1};

typedef struct {
    long status;
    char *body;
    size_t len;
    char retry_after[32];
    char ctype[128];
} resp;

static void resp_free(resp *r) {
    free(r->body);
    memset(r, 0, sizeof *r);
}

/* Starts the server with extra options; waits for its "listening on" line. */
static bool server_start_model(server *s, const char *model, const char *const *extra) {
    const char *build = getenv("BUILD") && *getenv("BUILD") ? getenv("BUILD") : "build";
    char dir[1100];
    snprintf(dir, sizeof dir, "%.1000s/tests", build);
    serve_opts o = {g_hold_env[0] ? g_tbin : g_bin, model, dir, "server", g_hold_env,
                    {g_hold_keep[0], g_hold_keep[1]}};
    return serve_start(s, &o, extra);
}

static bool server_start(server *s, const char *const *extra) {
    return server_start_model(s, g_model, extra);
}

static int server_stop(server *s) { return serve_stop(s); }

static long rss_kb(pid_t pid) { return proc_status_kb(pid, "VmRSS:"); }

static size_t on_body(char *p, size_t sz, size_t n, void *ud) {
    resp *r = ud;
    char *nb = realloc(r->body, r->len + sz * n + 1);
    if (!nb) return 0;
    r->body = nb;
    memcpy(r->body + r->len, p, sz * n);
    r->len += sz * n;
    r->body[r->len] = 0;
    return sz * n;
}

static size_t on_header(char *p, size_t sz, size_t n, void *ud) {
    resp *r = ud;
    size_t len = sz * n;
    if (len > 13 && !strncasecmp(p, "Retry-After:", 12))
        snprintf(r->retry_after, sizeof r->retry_after, "%.*s", (int)(len - 12), p + 12);
    if (len > 14 && !strncasecmp(p, "Content-Type:", 13))
        snprintf(r->ctype, sizeof r->ctype, "%.*s", (int)(len - 13), p + 13);
    return len;
}

/* When set, the next exchanges close their socket with a reset (SO_LINGER 0), as a client
 * that is killed or aborts does: the server cancels on a reset, not on an end of file (a
 * half-closed client still reads its answer; test_serve_safety checks that). */
static bool g_reset_on_close;
static int set_linger(void *ud, curl_socket_t fd, curlsocktype purpose) {
    struct linger l = {1, 0};
    if (g_reset_on_close) setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    return CURL_SOCKOPT_OK;
}

/* One HTTP exchange. h may be NULL (a fresh handle) or a handle to reuse (keep-alive). */
static bool http_h(CURL *h, int port, const char *method, const char *path, const char *body,
                   long len, long timeout_ms, resp *r) {
    memset(r, 0, sizeof *r);
    bool own = !h;
    if (own) h = curl_easy_init();
    if (!h) return false;
    curl_easy_reset(h);
    char url[512];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, path);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, r);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms > 0 ? timeout_ms : 30000L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_SOCKOPTFUNCTION, set_linger);
    struct curl_slist *hd = NULL;
    if (body) {
        hd = curl_slist_append(hd, "Content-Type: application/json");
        hd = curl_slist_append(hd, "Expect:");
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, len >= 0 ? len : (long)strlen(body));
    }
    CURLcode rc = curl_easy_perform(h);
    if (rc == CURLE_OK) curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r->status);
    curl_slist_free_all(hd);
    if (own) curl_easy_cleanup(h);
    if (!r->body) r->body = calloc(1, 1);
    return rc == CURLE_OK;
}

static bool http(int port, const char *method, const char *path, const char *body, resp *r) {
    return http_h(NULL, port, method, path, body, -1, 0, r);
}

/* The value of an unlabelled /metrics sample, or -1. */
static long long metric_ll(int port, const char *name) {
    resp r;
    long long v = -1;
    if (http_h(NULL, port, "GET", "/metrics", NULL, -1, 0, &r) && r.status == 200 && r.body) {
        char key[160];
        snprintf(key, sizeof key, "\n%s ", name);
        const char *m = strstr(r.body, key);
        if (m) v = atoll(m + strlen(key));
    }
    resp_free(&r);
    return v;
}

static json_t *parse(const resp *r) {
    return r->body ? json_loadb(r->body, r->len, JSON_ALLOW_NUL, NULL) : NULL;
}

/* The answer without its per-request fields (id, created), as canonical text. */
static char *canonical(const resp *r) {
    json_t *j = parse(r);
    if (!j) return NULL;
    json_object_del(j, "id");
    json_object_del(j, "created");
    char *s = json_dumps(j, JSON_SORT_KEYS | JSON_COMPACT | JSON_REAL_PRECISION(17));
    json_decref(j);
    return s;
}

/* Checks an error answer: status, OpenAI shape, and (when given) its param / code / a
 * substring of its message. */
static void check_error(const resp *r, long status, const char *param, const char *code,
                        const char *needle, const char *what) {
    CHECKF(r->status == status, "%s: status %ld, want %ld (%s)", what, r->status, status,
           r->body ? r->body : "");
    json_t *j = parse(r);
    json_t *e = j ? json_object_get(j, "error") : NULL;
    CHECKF(e && json_is_string(json_object_get(e, "message")) &&
               json_is_string(json_object_get(e, "type")) && json_object_get(e, "param") &&
               json_object_get(e, "code"),
           "%s: not an OpenAI error: %s", what, r->body ? r->body : "");
    if (e && param) {
        json_t *p = json_object_get(e, "param");
        CHECKF(json_is_string(p) && !strcmp(json_string_value(p), param), "%s: param %s, want %s",
               what, json_is_string(p) ? json_string_value(p) : "(not a string)", param);
    }
    if (e && code) {
        json_t *c = json_object_get(e, "code");
        CHECKF(json_is_string(c) && !strcmp(json_string_value(c), code), "%s: code, want %s: %s",
               what, code, r->body);
    }
    if (e && needle) {
        const char *m = json_string_value(json_object_get(e, "message"));
        CHECKF(m && strstr(m, needle), "%s: message lacks '%s': %s", what, needle, m ? m : "");
    }
    json_decref(j);
}

/* Token ids of text through POST /tokenize. */
static int tokenize(int port, const char *text, bool special, int32_t *ids, int cap) {
    char body[4096];
    json_t *req = json_pack("{s:s, s:b}", "prompt", text, "add_special_tokens", special);
    char *s = json_dumps(req, JSON_COMPACT);
    snprintf(body, sizeof body, "%s", s);
    free(s);
    json_decref(req);
    resp r;
    int n = -1;
    if (http(port, "POST", "/tokenize", body, &r) && r.status == 200) {
        json_t *j = parse(&r);
        json_t *t = json_object_get(j, "tokens");
        n = 0;
        for (size_t i = 0; i < json_array_size(t) && n < cap; i++)
            ids[n++] = (int32_t)json_integer_value(json_array_get(t, i));
        json_decref(j);
    }
    resp_free(&r);
    return n;
}

static void ids_json(char *out, size_t cap, const int32_t *ids, int n) {
    size_t o = 0;
    o += (size_t)snprintf(out + o, cap - o, "[");
    for (int i = 0; i < n && o < cap; i++)
        o += (size_t)snprintf(out + o, cap - o, i ? ",%d" : "%d", (int)ids[i]);
    if (o < cap) snprintf(out + o, cap - o, "]");
}

static const char *TEXTS[] = {
    "Once upon a time, there was a little girl named Lily.",
    "She loved to play outside in the park with her friends.",
    "One day, a big dog came and took her ball away.",
    "Tom was sad. He wanted to go home and eat some cake.",
};
enum { N_TEXTS = 4 };
static int32_t g_ids[N_TEXTS][256];
static int g_n[N_TEXTS];

/* Checks one lm-eval choice: n + 1 entries, entry 0 null, argmax equality. */
static void check_lmeval_choice(json_t *choice, int idx, int n, int k) {
    json_t *lp = json_object_get(choice, "logprobs");
    json_t *tl = json_object_get(lp, "token_logprobs");
    json_t *tp = json_object_get(lp, "top_logprobs");
    json_t *tid = json_object_get(lp, "token_ids");
    json_t *topid = json_object_get(lp, "top_ids");
    json_t *toks = json_object_get(lp, "tokens");
    json_t *off = json_object_get(lp, "text_offset");
    CHECKF(json_integer_value(json_object_get(choice, "index")) == idx, "choice index %d", idx);
    CHECKF((int)json_array_size(tl) == n + 1 && (int)json_array_size(tp) == n + 1 &&
               (int)json_array_size(toks) == n + 1 && (int)json_array_size(tid) == n + 1 &&
               (int)json_array_size(off) == n + 1,
           "choice %d: %zu entries, want n + 1 = %d", idx, json_array_size(tl), n + 1);
    CHECK(json_is_null(json_array_get(tl, 0)) && json_is_null(json_array_get(tp, 0)));
    int argmax_hits = 0, bad = 0;
    for (int i = 1; i <= n && i < (int)json_array_size(tl); i++) {
        json_t *v = json_array_get(tl, i);
        json_t *m = json_array_get(tp, i);
        if (!json_is_number(v) || !json_is_object(m) || json_object_size(m) < 1 ||
            (int)json_object_size(m) > k + 1) {
            bad++;
            continue;
        }
        double mx = -INFINITY;
        const char *key;
        json_t *val;
        json_object_foreach(m, key, val) if (json_number_value(val) > mx) mx = json_number_value(val);
        json_t *top0 = json_array_get(json_array_get(topid, i), 0);
        bool is_argmax = json_integer_value(json_array_get(top0, 0)) ==
                         json_integer_value(json_array_get(tid, i));
        if (is_argmax) {
            argmax_hits++;
            if (json_number_value(v) != mx) bad++;
        } else if (!(json_number_value(v) <= mx)) {
            bad++;
        }
    }
    CHECKF(bad == 0, "choice %d: %d entries break the argmax/top rules", idx, bad);
    (void)argmax_hits;
}

/* The CLI's per-token logprobs and sum for ids on model, with `--act act` when act is not NULL;
 * false when the CLI is not built. */
static bool cli_score_model(const char *model, const char *act, const int32_t *ids, int n,
                            double *vals, double *sum) {
    char in[64], out[64];
    const char *build = getenv("BUILD") && *getenv("BUILD") ? getenv("BUILD") : "build";
    snprintf(in, sizeof in, "%s/tests/cli-in-%d.jsonl", build, (int)getpid());
    snprintf(out, sizeof out, "%s/tests/cli-out-%d.jsonl", build, (int)getpid());
    FILE *f = fopen(in, "w");
    if (!f) return false;
    char ids_s[4096];
    ids_json(ids_s, sizeof ids_s, ids, n);
    fprintf(f, "{\"prompt\": %s, \"id\": 7, \"logprobs\": 1}\n", ids_s);
    fclose(f);
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s' score -m '%s' %s%s < '%s' > '%s' 2>/dev/null", g_bin, model,
             act ? "--act " : "", act ? act : "", in, out);
    int rc = system(cmd);
    bool ok = false;
    if (rc == 0) {
        json_t *j = json_load_file(out, JSON_DISABLE_EOF_CHECK, NULL);
        json_t *tl = json_object_get(json_object_get(j, "logprobs"), "token_logprobs");
        if (tl && (int)json_array_size(tl) == n) {
            for (int i = 0; i < n; i++) vals[i] = json_number_value(json_array_get(tl, i));
            *sum = json_number_value(json_object_get(j, "sum_logprob"));
            ok = true;
        }
        json_decref(j);
    }
    unlink(in);
    unlink(out);
    return ok;
}

static bool cli_score(const int32_t *ids, int n, double *vals, double *sum) {
    return cli_score_model(g_model, NULL, ids, n, vals, sum);
}

/* ---- --act -------------------------------------------------------------------------------- */

/* token_logprobs (entries 1..n-1 into vals) of an echo request for ids; false on any failure. */
static bool server_logprobs(int port, const int32_t *ids, int n, double *vals) {
    char ids_s[4096], body[4300];
    ids_json(ids_s, sizeof ids_s, ids, n);
    snprintf(body, sizeof body, "{\"prompt\": %s, \"echo\": true, \"max_tokens\": 0, "
             "\"logprobs\": 1}", ids_s);
    resp r;
    bool ok = http(port, "POST", "/v1/completions", body, &r) && r.status == 200;
    json_t *j = ok ? parse(&r) : NULL;
    json_t *tl = json_object_get(
        json_object_get(json_array_get(json_object_get(j, "choices"), 0), "logprobs"),
        "token_logprobs");
    ok = ok && (int)json_array_size(tl) == n;
    for (int i = 1; ok && i < n; i++) {
        ok = json_is_number(json_array_get(tl, i));
        vals[i] = json_number_value(json_array_get(tl, i));
    }
    if (!ok) fprintf(stderr, "act request: %ld %.300s\n", r.status, r.body ? r.body : "");
    json_decref(j);
    resp_free(&r);
    return ok;
}

/* `serve --act`: on a generated BF16 model (qwen3, tiny; native rounds the activations to bf16,
 * f32 does not) a server started with --act f32 answers exactly what `score --act f32` gives
 * and differs from `score --act native`; a server started without --act answers the native
 * scores. Both are the CLI's numbers bit for bit, so the option reaches the server's sessions.
 * --act bogus / --act without a value: exit 2 naming --act, nothing served. */
static void test_act(const char *build) {
    char path[1100];
    snprintf(path, sizeof path, "%.1000s/tests/act-%d.gguf", build, (int)getpid());
    ps_genmodel_params gp = ps_genmodel_default_params();
    snprintf(gp.arch, sizeof gp.arch, "qwen3");
    gp.type = PS_GGML_BF16;
    gp.seed = 3;
    ps_error e;
    if (ps_genmodel_write(&gp, path, &e) != PS_OK) {
        CHECKF(0, "gen-model BF16: %s", e.message);
        return;
    }
    enum { N = 40 };
    int32_t ids[N];
    for (int i = 0; i < N; i++) ids[i] = i ? (int32_t)(3 + (i * 37) % 500) : 1;
    double cli_f32[N] = {0}, cli_nat[N] = {0}, srv_f32[N] = {0}, srv_def[N] = {0}, sum;
    bool have_cli = cli_score_model(path, "f32", ids, N, cli_f32, &sum) &&
                    cli_score_model(path, "native", ids, N, cli_nat, &sum);
    CHECKF(have_cli, "`promptscore score --act` on %s failed", path);
    const char *f32_opts[] = {"--act", "f32", "-q", NULL}, *def_opts[] = {"-q", NULL};
    server a, b;
    bool got_a = false, got_b = false;
    if (server_start_model(&a, path, f32_opts)) {
        got_a = server_logprobs(a.port, ids, N, srv_f32);
        CHECKF(got_a, "scoring request to the --act f32 server (log %s)", a.log);
        CHECKF(server_stop(&a) == 0, "--act f32 server did not exit 0 (log %s)", a.log);
    } else {
        CHECKF(0, "serve --act f32 did not start (log %s)", a.log);
    }
    if (server_start_model(&b, path, def_opts)) {
        got_b = server_logprobs(b.port, ids, N, srv_def);
        CHECKF(got_b, "scoring request to the default server (log %s)", b.log);
        CHECKF(server_stop(&b) == 0, "default server did not exit 0 (log %s)", b.log);
    } else {
        CHECKF(0, "serve on the BF16 model did not start (log %s)", b.log);
    }
    if (have_cli && got_a && got_b) {
        int same_f32 = 1, same_def = 1, n_diff = 0;
        double worst = 0;
        for (int i = 1; i < N; i++) {
            same_f32 &= srv_f32[i] == cli_f32[i];
            same_def &= srv_def[i] == cli_nat[i];
            n_diff += srv_f32[i] != srv_def[i];
            worst = fmax(worst, fabs(srv_f32[i] - srv_def[i]));
        }
        CHECKF(same_f32, "serve --act f32 differs from score --act f32");
        CHECKF(same_def, "serve (default act) differs from score --act native");
        /* bound as in test_cli_score.sh: logits move by <= ~0.02 here, a logprob by twice that */
        CHECKF(n_diff > 0 && worst < 0.05,
               "serve --act f32 vs native: %d of %d logprobs differ, max |diff| %g", n_diff,
               N - 1, worst);
        fprintf(stderr, "NOTE: serve --act f32 vs native on a BF16 model: %d of %d logprobs "
                "differ, max |diff| %.3g\n", n_diff, N - 1, worst);
    }
    /* bad values: exit 2 before anything is served */
    static const char *const bad[][2] = {{"--act", "bogus"}, {"--act", NULL}};
    for (int k = 0; k < 2; k++) {
        char log[1100];
        snprintf(log, sizeof log, "%.1000s/tests/act-bad-%d.log", build, (int)getpid());
        pid_t pid = fork();
        if (pid == 0) {
            FILE *f = freopen(log, "w", stderr);
            (void)f;
            const char *argv[] = {g_bin, "serve", "-m", path, "--port", "0", bad[k][0], bad[k][1],
                                  NULL};
            ps_test_execv(g_bin, argv);
            _exit(127);
        }
        int st = -1;
        double t0 = ps_now_s();
        while (pid > 0 && ps_now_s() - t0 < 20 && waitpid(pid, &st, WNOHANG) != pid) usleep(10000);
        if (pid > 0 && ps_now_s() - t0 >= 20) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
        }
        char msg[512] = "";
        FILE *f = fopen(log, "r");
        if (f) {
            size_t got = fread(msg, 1, sizeof msg - 1, f);
            msg[got] = 0;
            fclose(f);
        }
        CHECKF(pid > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 2 && strstr(msg, "--act"),
               "serve --act %s: status %d, stderr '%s'", bad[k][1] ? bad[k][1] : "(no value)",
               st, msg);
        unlink(log);
    }
    unlink(path);
}

/* ---- load ---------------------------------------------------------------------------------- */

typedef struct {
    int port;
    int n_requests;
    const char *body;
    const char *expect;  /* canonical answer */
    int errors, mismatches, done;
    pid_t server_pid;
    long *rss_at_100;
    pthread_mutex_t *mu;
    int *global_done;
} load_arg;

static void *load_main(void *p) {
    load_arg *a = p;
    CURL *h = curl_easy_init();
    for (int i = 0; i < a->n_requests; i++) {
        resp r;
        if (!http_h(h, a->port, "POST", "/v1/completions", a->body, -1, 30000, &r) ||
            r.status != 200) {
            a->errors++;
        } else {
            char *c = canonical(&r);
            if (!c || strcmp(c, a->expect)) a->mismatches++;
            free(c);
        }
        resp_free(&r);
        pthread_mutex_lock(a->mu);
        if (++*a->global_done == 100) *a->rss_at_100 = rss_kb(a->server_pid);
        pthread_mutex_unlock(a->mu);
    }
    curl_easy_cleanup(h);
    return NULL;
}

/* ---- cancellation / 503 ------------------------------------------------------------------- */

typedef struct {
    int port;
    const char *body;
    long timeout_ms;
    resp r;
} bg_arg;

static void *bg_main(void *p) {
    bg_arg *a = p;
    http_h(NULL, a->port, "POST", "/v1/completions", a->body, -1, a->timeout_ms, &a->r);
    return NULL;
}

/* A heavy body: n_prompts prompts of len tokens each (ids from the texts, repeated). */
static char *heavy_body(int n_prompts, int len) {
    size_t cap = (size_t)n_prompts * (size_t)len * 5 + 256;
    char *b = malloc(cap);
    size_t o = (size_t)snprintf(b, cap, "{\"prompt\":[");
    for (int p = 0; p < n_prompts; p++) {
        o += (size_t)snprintf(b + o, cap - o, p ? ",[" : "[");
        for (int i = 0; i < len; i++) {
            int t = g_ids[(p + i / g_n[0]) % N_TEXTS][i % g_n[0]];
            o += (size_t)snprintf(b + o, cap - o, i ? ",%d" : "%d", t);
        }
        o += (size_t)snprintf(b + o, cap - o, "]");
    }
    snprintf(b + o, cap - o, "],\"echo\":true,\"max_tokens\":0,\"logprobs\":5}");
    return b;
}

/* ---- the Prometheus text exposition format, parsed ------------------------------------- */

enum { M_MAX = 1024 };
typedef struct {
    char key[320];  /* name{labels} as written */
    char family[128];
    int type;       /* 0 counter, 1 gauge, 2 histogram, 3 other */
    double v;
} m_sample;
typedef struct {
    m_sample s[M_MAX];
    int n;
    char err[512];
} m_scrape;

static bool m_name_char(char c, bool first) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
           (!first && c >= '0' && c <= '9');
}

static const char *m_ends(const char *name, const char *suffix) {
    size_t n = strlen(name), k = strlen(suffix);
    return n > k && !strcmp(name + n - k, suffix) ? name + n - k : NULL;
}

/* Parses a whole /metrics body: every line is "# HELP name text", "# TYPE name type" (before
 * any sample of name, at most once) or a sample "name{label="value",...} value"; every
 * sample's family has a TYPE; each histogram series has buckets with increasing le, counts
 * that never decrease, a final le="+Inf" bucket equal to its _count, and a _sum. */
static bool m_parse(const char *body, m_scrape *m) {
    memset(m, 0, sizeof *m);
    char types_name[64][128];
    int types[64], n_types = 0;
    const char *p = body;
    int lineno = 0;
#define M_FAIL(...) do { snprintf(m->err, sizeof m->err, __VA_ARGS__); return false; } while (0)
    if (!*p) M_FAIL("empty body");
    while (*p) {
        lineno++;
        const char *eol = strchr(p, '\n');
        if (!eol) M_FAIL("line %d does not end with a newline", lineno);
        char line[1024];
        size_t len = (size_t)(eol - p);
        if (len >= sizeof line) M_FAIL("line %d too long", lineno);
        memcpy(line, p, len);
        line[len] = 0;
        p = eol + 1;
        if (line[0] == '#') {
            char kw[8], name[128], rest[256] = "";
            if (sscanf(line, "# %7s %127s %255[^\n]", kw, name, rest) < 2 ||
                (strcmp(kw, "HELP") && strcmp(kw, "TYPE")))
                M_FAIL("line %d: a comment that is neither HELP nor TYPE: %.200s", lineno, line);
            for (const char *c = name; *c; c++)
                if (!m_name_char(*c, c == name)) M_FAIL("line %d: bad metric name %s", lineno, name);
            if (!strcmp(kw, "TYPE")) {
                int t = !strcmp(rest, "counter") ? 0 : !strcmp(rest, "gauge") ? 1
                        : !strcmp(rest, "histogram") ? 2 : !strcmp(rest, "summary") || !strcmp(rest, "untyped") ? 3 : -1;
                if (t < 0) M_FAIL("line %d: unknown type '%s'", lineno, rest);
                for (int i = 0; i < n_types; i++)
                    if (!strcmp(types_name[i], name)) M_FAIL("line %d: a second TYPE for %s", lineno, name);
                for (int i = 0; i < m->n; i++)
                    if (!strcmp(m->s[i].family, name)) M_FAIL("line %d: TYPE %s after its samples", lineno, name);
                if (n_types == 64) M_FAIL("too many TYPE lines");
                snprintf(types_name[n_types], sizeof types_name[0], "%s", name);
                types[n_types++] = t;
            }
            continue;
        }
        /* a sample */
        const char *c = line;
        char name[128];
        size_t nl = 0;
        while (m_name_char(*c, nl == 0) && nl + 1 < sizeof name) name[nl++] = *c++;
        name[nl] = 0;
        if (!nl) M_FAIL("line %d: not a sample: '%.200s'", lineno, line);
        char le[32] = "", others[256] = "";
        if (*c == '{') {
            c++;
            while (*c != '}') {
                char ln[64];
                size_t k = 0;
                while (m_name_char(*c, k == 0) && *c != ':' && k + 1 < sizeof ln) ln[k++] = *c++;
                ln[k] = 0;
                if (!k || *c++ != '=' || *c++ != '"') M_FAIL("line %d: bad label in '%.200s'", lineno, line);
                char val[128];
                size_t vn = 0;
                while (*c && *c != '"') {
                    if (*c == '\\') {
                        c++;
                        if (*c != '\\' && *c != '"' && *c != 'n') M_FAIL("line %d: bad escape", lineno);
                    }
                    if (vn + 1 < sizeof val) val[vn++] = *c;
                    c++;
                }
                val[vn] = 0;
                if (*c++ != '"') M_FAIL("line %d: unterminated label value", lineno);
                if (!strcmp(ln, "le")) snprintf(le, sizeof le, "%.31s", val);
                else {
                    size_t o = strlen(others);
                    snprintf(others + o, sizeof others - o, "%s%s=\"%s\"", o ? "," : "", ln, val);
                }
                if (*c == ',') c++;
                else if (*c != '}') M_FAIL("line %d: labels not closed", lineno);
            }
            c++;
        }
        if (*c++ != ' ') M_FAIL("line %d: no space before the value: '%.200s'", lineno, line);
        char *end;
        double v = strtod(c, &end);
        if (end == c) M_FAIL("line %d: bad value in '%.200s'", lineno, line);
        if (*end == ' ') { /* an optional timestamp: an integer */
            const char *ts = end + 1;
            strtoll(ts, &end, 10);
            if (end == ts) M_FAIL("line %d: bad timestamp", lineno);
        }
        if (*end) M_FAIL("line %d: trailing text in '%.200s'", lineno, line);
        /* its family and type */
        char family[128];
        snprintf(family, sizeof family, "%s", name);
        int type = -1;
        for (int pass = 0; pass < 2 && type < 0; pass++) {
            for (int i = 0; i < n_types; i++)
                if (!strcmp(types_name[i], family)) type = types[i];
            if (type < 0 && pass == 0) {
                const char *suf = m_ends(name, "_bucket");
                if (!suf) suf = m_ends(name, "_sum");
                if (!suf) suf = m_ends(name, "_count");
                if (!suf) break;
                family[suf - name] = 0;
            }
        }
        if (type < 0) M_FAIL("line %d: sample %s has no TYPE", lineno, name);
        if (type == 2 && m_ends(name, "_bucket") && !le[0])
            M_FAIL("line %d: a bucket without le", lineno);
        if (m->n == M_MAX) M_FAIL("too many samples");
        m_sample *ms = &m->s[m->n++];
        if (le[0])
            snprintf(ms->key, sizeof ms->key, "%.127s{%.150s%sle=\"%.31s\"}", name, others,
                     others[0] ? "," : "", le);
        else
            snprintf(ms->key, sizeof ms->key, "%.127s{%.150s}", name, others);
        snprintf(ms->family, sizeof ms->family, "%s", family);
        ms->type = type;
        ms->v = v;
        for (int i = 0; i < m->n - 1; i++)
            if (!strcmp(m->s[i].key, ms->key)) M_FAIL("line %d: %s twice", lineno, ms->key);
        if ((type == 0 || type == 2) && !(v >= 0)) M_FAIL("line %d: %s = %g < 0", lineno, ms->key, v);
    }
    /* histograms: per series (family + labels other than le), its buckets in order */
    for (int i = 0; i < m->n; i++) {
        const m_sample *a = &m->s[i];
        const char *inf = m_ends(a->key, "le=\"+Inf\"}");
        if (a->type != 2 || !inf) continue;
        char prefix[320], labels[320];
        snprintf(prefix, sizeof prefix, "%.*s", (int)(inf - a->key), a->key); /* ...{x="y",  */
        const char *lb = strchr(prefix, '{') + 1;
        snprintf(labels, sizeof labels, "%s", lb);
        size_t ll = strlen(labels);
        if (ll && labels[ll - 1] == ',') labels[ll - 1] = 0;
        double prev_le = -INFINITY, prev_v = 0;
        int n_b = 0;
        for (int j = 0; j < m->n; j++) {
            const m_sample *b = &m->s[j];
            if (strncmp(b->key, prefix, strlen(prefix)) || strncmp(b->key + strlen(prefix), "le=\"", 4))
                continue;
            double lv = strtod(b->key + strlen(prefix) + 4, NULL);
            if (!(lv > prev_le)) M_FAIL("%s: le %g after %g", b->key, lv, prev_le);
            if (b->v < prev_v)
                M_FAIL("%s: %g below the previous bucket's %g (not cumulative)", b->key, b->v, prev_v);
            prev_le = lv;
            prev_v = b->v;
            n_b++;
        }
        if (!isinf(prev_le) || n_b < 2) M_FAIL("%s: +Inf is not the last of >= 2 buckets", a->key);
        char want[400];
        snprintf(want, sizeof want, "%s_count{%s}", a->family, labels);
        const m_sample *cnt = NULL;
        for (int j = 0; j < m->n; j++)
            if (!strcmp(m->s[j].key, want)) cnt = &m->s[j];
        if (!cnt || cnt->v != a->v) M_FAIL("%s: %s the +Inf bucket (%g)", want,
                                           cnt ? "differs from" : "absent, with", a->v);
        snprintf(want, sizeof want, "%s_sum{%s}", a->family, labels);
        bool found = false;
        for (int j = 0; j < m->n; j++) found |= !strcmp(m->s[j].key, want);
        if (!found) M_FAIL("%s absent", want);
    }
#undef M_FAIL
    return true;
}

static const m_sample *m_get(const m_scrape *m, const char *key) {
    for (int i = 0; i < m->n; i++)
        if (!strcmp(m->s[i].key, key)) return &m->s[i];
    return NULL;
}

/* Every counter and histogram series of a is in b with a value at least as large. */
static bool m_monotonic(const m_scrape *a, const m_scrape *b, char *why, size_t cap) {
    for (int i = 0; i < a->n; i++) {
        if (a->s[i].type != 0 && a->s[i].type != 2) continue;
        const m_sample *x = m_get(b, a->s[i].key);
        if (!x || x->v < a->s[i].v) {
            snprintf(why, cap, "%s: %g then %s%g", a->s[i].key, a->s[i].v, x ? "" : "absent ",
                     x ? x->v : 0.0);
            return false;
        }
    }
    return true;
}

/* Waits up to secs for a byte on fd; true when one came. */
static bool wait_byte(int fd, double secs) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    char c;
    return poll(&p, 1, (int)(secs * 1000)) == 1 && read(fd, &c, 1) == 1;
}

/* True once the server's log holds needle (polled up to secs). */
static bool log_has(const char *log, const char *needle, double secs) {
    double t0 = ps_now_s();
    do {
        FILE *f = fopen(log, "r");
        if (f) {
            char line[1024];
            bool found = false;
            while (!found && fgets(line, sizeof line, f)) found = strstr(line, needle) != NULL;
            fclose(f);
            if (found) return true;
        }
        usleep(10000);
    } while (ps_now_s() - t0 < secs);
    return false;
}

/* A --queue 1 server whose engine worker holds each prompt until the test releases it (the
 * PS_TEST_HOLD_FDS hook): while the lm-eval request is held, a second request gets 503 with
 * Retry-After; then the signal sig; once the server says it is finishing, the held request is
 * released and must get exactly the baseline answer, and the server must exit 0. Every step
 * waits on an event, never on a race. */
static void test_held(const char *lmeval, const char *baseline, const char *signame, int sig) {
    int rel[2], ann[2]; /* release: test -> server; announce: server -> test */
    if (pipe2(rel, O_CLOEXEC) || pipe2(ann, O_CLOEXEC)) {
        CHECKF(0, "%s: pipe2 failed", signame);
        return;
    }
    snprintf(g_hold_env, sizeof g_hold_env, "%d,%d", rel[0], ann[1]);
    g_hold_keep[0] = rel[0];
    g_hold_keep[1] = ann[1];
    server q;
    const char *qopts[] = {"--queue", "1", "--name", "stories", "-q", NULL};
    bool started = server_start(&q, qopts);
    g_hold_env[0] = 0;
    close(rel[0]);
    close(ann[1]);
    if (!started) {
        CHECKF(0, "%s: the --queue 1 server did not start (log %s)", signame, q.log);
        close(rel[1]);
        close(ann[0]);
        return;
    }
    const double T = 20 * PS_TEST_TIME_SCALE;
    bg_arg bg = {.port = q.port, .body = lmeval, .timeout_ms = (long)(60000 * PS_TEST_TIME_SCALE)};
    pthread_t t;
    pthread_create(&t, NULL, bg_main, &bg);
    bool held = wait_byte(ann[0], T);
    CHECKF(held, "%s: the engine worker never reached the hold point", signame);
    if (held) {
        resp qr;
        CHECK(http(q.port, "POST", "/v1/completions", "{\"prompt\":[1,2]}", &qr));
        check_error(&qr, 503, NULL, NULL, "queue", "queue full");
        CHECKF(atoi(qr.retry_after) >= 1, "503 without Retry-After: '%s'", qr.retry_after);
        resp_free(&qr);
        kill(q.pid, sig);
        char said[64];
        snprintf(said, sizeof said, "%s: finishing running requests", signame);
        CHECKF(log_has(q.log, said, T), "%s: the server did not say it was finishing (log %s)",
               signame, q.log);
    }
    /* the request has a second prompt: release both (a byte each) */
    CHECK(write(rel[1], "gg", 2) == 2);
    pthread_join(t, NULL);
    char *c = canonical(&bg.r);
    CHECKF(bg.r.status == 200 && c && baseline && !strcmp(c, baseline),
           "the request running at %s got %ld (%zu bytes), %s the baseline", signame, bg.r.status,
           bg.r.len, c && baseline && !strcmp(c, baseline) ? "equal to" : "not");
    free(c);
    resp_free(&bg.r);
    close(rel[1]);
    close(ann[0]);
    if (held) {
        double t0 = ps_now_s();
        int st = -1;
        bool exited = false;
        while (!exited && ps_now_s() - t0 < T) {
            if (waitpid(q.pid, &st, WNOHANG) == q.pid) exited = true;
            else usleep(10000);
        }
        if (exited) q.pid = 0;
        CHECKF(exited && WIFEXITED(st) && WEXITSTATUS(st) == 0,
               "%s during a request: the server did not exit 0 (status %d, log %s)", signame, st,
               q.log);
        CHECKF(exited && log_has(q.log, "promptscore serve: stopped", 0),
               "%s: no 'stopped' line (log %s)", signame, q.log);
    }
    if (q.pid) server_stop(&q);
}

/* The validator alone: a raw NUL byte is malformed JSON even where jansson lets it pass
 * (right after a number). */
static void check_raw_nul(void) {
    static const char body[] = "{\"prompt\": [1, 2], \"logprobs\": 5\0, \"max_tokens\": 0}";
    ps_req_limits lim = {.model_name = "m", .n_vocab = 512, .n_ctx = 64, .max_logprobs = 5};
    ps_completion_req r;
    ps_req_error e;
    memset(&e, 0, sizeof e);
    bool ok = ps_completion_req_parse(body, sizeof body - 1, &lim, &r, &e);
    CHECKF(!ok && e.status == 400 && strstr(e.message, "NUL"), "status %d: %s", e.status,
           e.message);
    if (ok) ps_completion_req_free(&r);
}

int main(void) {
    signal(SIGPIPE, SIG_IGN); /* a server that died must fail checks, not kill the test */
    check_raw_nul();
    const char *shared = ps_test_shared();
    if (!shared) {
        SKIP("no shared test material: the server tests need models/stories260K.gguf");
        return ps_test_done("server");
    }
    const char *build = getenv("BUILD") && *getenv("BUILD") ? getenv("BUILD") : "build";
    snprintf(g_bin, sizeof g_bin, "%.1000s/promptscore", build);
    snprintf(g_tbin, sizeof g_tbin, "%.1000s/tests/promptscore-t", build);
    snprintf(g_model, sizeof g_model, "%s/models/stories260K.gguf", shared);
    if (access(g_bin, X_OK) != 0 || access(g_tbin, X_OK) != 0) {
        SKIP("%s or %s is not built", g_bin, g_tbin);
        return ps_test_done("server");
    }
    char logdir[1100];
    snprintf(logdir, sizeof logdir, "%.1000s/tests", build);
    mkdir(logdir, 0755);
    curl_global_init(CURL_GLOBAL_DEFAULT);

    server srv;
    const char *opts[] = {"--max-body", "200000", "--name", "stories", NULL};
    if (!server_start(&srv, opts)) {
        CHECKF(0, "the server did not start (log: %s)", srv.log);
        return ps_test_done("server");
    }
    int port = srv.port;
    resp r;
    json_t *j;

    /* ---- simple routes ---- */
    CHECK(http(port, "GET", "/health", NULL, &r) && r.status == 200 &&
          strstr(r.body, "\"status\":\"ok\""));
    resp_free(&r);
    CHECK(http(port, "GET", "/v1/models", NULL, &r) && r.status == 200);
    j = parse(&r);
    json_t *m0 = json_array_get(json_object_get(j, "data"), 0);
    CHECKF(!strcmp(json_string_value(json_object_get(m0, "id")) ?: "", "stories") &&
               json_integer_value(json_object_get(m0, "max_model_len")) == 2048 &&
               !strcmp(json_string_value(json_object_get(j, "object")) ?: "", "list") &&
               !strcmp(json_string_value(json_object_get(m0, "owned_by")) ?: "", "promptscore"),
           "/v1/models: %s", r.body);
    {   /* the page's header reads these: file name, weight type and architecture */
        json_t *meta = json_object_get(m0, "meta");
        CHECKF(!strcmp(json_string_value(json_object_get(meta, "file")) ?: "", "stories260K.gguf") &&
                   !strcmp(json_string_value(json_object_get(meta, "arch")) ?: "", "llama") &&
                   !strcmp(json_string_value(json_object_get(meta, "weight_type")) ?: "", "F32") &&
                   json_integer_value(json_object_get(meta, "n_vocab")) == 512 &&
                   json_integer_value(json_object_get(meta, "size")) == 1185376,
               "/v1/models meta: %s", r.body);
    }
    json_decref(j);
    resp_free(&r);
    CHECK(http(port, "GET", "/tokenizer_info", NULL, &r) && r.status == 200);
    j = parse(&r);
    CHECKF(!strcmp(json_string_value(json_object_get(j, "eos_token")) ?: "", "</s>") &&
               !strcmp(json_string_value(json_object_get(j, "bos_token")) ?: "", "<s>") &&
               json_integer_value(json_object_get(j, "model_max_length")) == 2048,
           "/tokenizer_info: %s", r.body);
    json_decref(j);
    resp_free(&r);
    CHECK(http(port, "GET", "/", NULL, &r) && r.status == 200 && strstr(r.ctype, "text/html"));
    resp_free(&r);

    /* ---- tokenize / detokenize ---- */
    for (int t = 0; t < N_TEXTS; t++) {
        g_ids[t][0] = 1; /* BOS, as lm-eval's client would add for this model */
        int n = tokenize(port, TEXTS[t], false, g_ids[t] + 1, 255);
        CHECKF(n > 5 && g_ids[t][1] != 1, "tokenize '%s' without specials gave %d ids", TEXTS[t],
               n);
        g_n[t] = n + 1;
    }
    {
        int32_t with[256];
        int n = tokenize(port, TEXTS[0], true, with, 256);
        CHECKF(n == g_n[0] && with[0] == 1 && !memcmp(with + 1, g_ids[0] + 1, (size_t)(n - 1) * 4),
               "tokenize with add_special_tokens: %d ids, first %d", n, n > 0 ? with[0] : -1);
        char body[4096], ids_s[2048];
        ids_json(ids_s, sizeof ids_s, g_ids[0] + 1, g_n[0] - 1);
        snprintf(body, sizeof body, "{\"tokens\": %s}", ids_s);
        CHECK(http(port, "POST", "/detokenize", body, &r) && r.status == 200);
        j = parse(&r);
        CHECKF(!strcmp(json_string_value(json_object_get(j, "prompt")) ?: "", TEXTS[0]),
               "detokenize: %s", r.body);
        json_decref(j);
        resp_free(&r);
        CHECK(http(port, "POST", "/tokenize", "{\"prompt\":\"hi\"}", &r) && r.status == 200 &&
              strstr(r.body, "\"count\":") && strstr(r.body, "\"max_model_len\":2048"));
        char *hi = r.body ? strdup(r.body) : NULL;
        resp_free(&r);
        /* llama.cpp's field name: the same answer */
        CHECK(http(port, "POST", "/tokenize", "{\"content\":\"hi\"}", &r) && r.status == 200 &&
              hi && r.body && !strcmp(r.body, hi));
        free(hi);
        resp_free(&r);
        /* prompt_offset: bytes into the prompt as sent; null for BOS */
        CHECK(http(port, "POST", "/v1/completions",
                   "{\"prompt\": \"Once upon a time\", \"echo\": true, \"max_tokens\": 1, "
                   "\"logprobs\": 1, \"temperature\": 0}", &r) && r.status == 200);
        CHECKF(r.body && strstr(r.body, "\"text_offset\":[0,3,8,13,15,") &&
                   strstr(r.body, "\"prompt_offset\":[null,0,4,9,11,null]"),
               "prompt_offset (text prompt, one generated): %s", r.body);
        resp_free(&r);
        CHECK(http(port, "POST", "/v1/completions",
                   "{\"prompt\": [[1, 403, 407]], \"echo\": true, \"max_tokens\": 0, "
                   "\"logprobs\": 1}", &r) && r.status == 200);
        CHECKF(r.body && strstr(r.body, "\"prompt_offset\":[null,null,null]"),
               "prompt_offset (ids): %s", r.body);
        resp_free(&r);
    }

    /* ---- lm-eval's request ---- */
    char lmeval[8192];
    {
        char a[2048], b[2048];
        ids_json(a, sizeof a, g_ids[0], g_n[0]);
        ids_json(b, sizeof b, g_ids[1], g_n[1]);
        snprintf(lmeval, sizeof lmeval,
                 "{\"model\": \"stories\", \"prompt\": [%s, %s], \"temperature\": 0, "
                 "\"max_tokens\": 1, \"logprobs\": 1, \"seed\": 1234, \"echo\": true}",
                 a, b);
    }
    char *baseline = NULL;
    double lm_vals[2][256];
    CHECK(http(port, "POST", "/v1/completions", lmeval, &r) && r.status == 200);
    j = parse(&r);
    baseline = canonical(&r);
    {
        json_t *ch = json_object_get(j, "choices");
        CHECKF(json_array_size(ch) == 2, "lm-eval: %zu choices: %.300s", json_array_size(ch),
               r.body);
        for (int c = 0; c < 2 && c < (int)json_array_size(ch); c++) {
            json_t *choice = json_array_get(ch, c);
            check_lmeval_choice(choice, c, g_n[c], 1);
            json_t *lp = json_object_get(choice, "logprobs");
            json_t *tl = json_object_get(lp, "token_logprobs");
            json_t *tid = json_object_get(lp, "token_ids");
            int same = 1;
            for (int i = 0; i < g_n[c]; i++)
                same &= json_integer_value(json_array_get(tid, i)) == g_ids[c][i];
            CHECKF(same, "choice %d: token_ids are not the prompt verbatim", c);
            for (int i = 0; i <= g_n[c] && i < 256; i++)
                lm_vals[c][i] = json_number_value(json_array_get(tl, i));
            /* the generated token is greedy: the argmax */
            json_t *top_last = json_array_get(json_array_get(json_object_get(lp, "top_ids"), g_n[c]), 0);
            CHECK(json_integer_value(json_array_get(top_last, 0)) ==
                  json_integer_value(json_array_get(tid, g_n[c])));
            /* echo: text is the concatenation of tokens; offsets in code points (ASCII here) */
            const char *text = json_string_value(json_object_get(choice, "text"));
            json_t *toks = json_object_get(lp, "tokens");
            json_t *off = json_object_get(lp, "text_offset");
            int ok = text != NULL;
            for (size_t i = 0; ok && i < json_array_size(toks); i++) {
                const char *t = json_string_value(json_array_get(toks, i));
                size_t o = (size_t)json_integer_value(json_array_get(off, i));
                ok = t && o <= strlen(text) && !strncmp(text + o, t, strlen(t));
            }
            CHECKF(ok, "choice %d: text/tokens/text_offset disagree", c);
            CHECK(!strcmp(json_string_value(json_object_get(choice, "finish_reason")) ?: "",
                          "length"));
        }
        json_t *u = json_object_get(j, "usage");
        CHECK(json_integer_value(json_object_get(u, "prompt_tokens")) == g_n[0] + g_n[1] &&
              json_integer_value(json_object_get(u, "completion_tokens")) == 2 &&
              json_integer_value(json_object_get(u, "total_tokens")) == g_n[0] + g_n[1] + 2);
        CHECK(!strcmp(json_string_value(json_object_get(j, "object")) ?: "", "text_completion"));
    }
    json_decref(j);
    resp_free(&r);

    /* the CLI's scores, bit for bit */
    {
        double vals[256], sum = 0;
        if (cli_score(g_ids[0], g_n[0], vals, &sum)) {
            int same = 1;
            double s = 0;
            for (int i = 1; i < g_n[0]; i++) {
                same &= vals[i] == lm_vals[0][i];
                s += (double)(float)lm_vals[0][i];
            }
            CHECKF(same, "server token_logprobs differ from `promptscore score`");
            CHECKF(s == sum, "sum of server logprobs %.17g != CLI sum_logprob %.17g", s, sum);
        } else {
            SKIP("`promptscore score` is not usable yet: no CLI comparison");
        }
    }

    /* ---- the legacy form: max_tokens 0, logprobs 10, 20 lists ---- */
    {
        size_t cap = 65536;
        char *body = malloc(cap);
        size_t o = (size_t)snprintf(body, cap, "{\"model\":\"stories\",\"prompt\":[");
        for (int p = 0; p < 20; p++) {
            char a[2048];
            ids_json(a, sizeof a, g_ids[p % N_TEXTS], g_n[p % N_TEXTS]);
            o += (size_t)snprintf(body + o, cap - o, "%s%s", p ? "," : "", a);
        }
        snprintf(body + o, cap - o, "],\"echo\":true,\"max_tokens\":0,\"logprobs\":10,"
                                    "\"temperature\":0}");
        CHECK(http(port, "POST", "/v1/completions", body, &r) && r.status == 200);
        j = parse(&r);
        json_t *ch = json_object_get(j, "choices");
        CHECKF(json_array_size(ch) == 20, "legacy: %zu choices", json_array_size(ch));
        int bad = 0;
        for (int c = 0; c < (int)json_array_size(ch); c++) {
            json_t *choice = json_array_get(ch, c);
            json_t *lp = json_object_get(choice, "logprobs");
            json_t *tl = json_object_get(lp, "token_logprobs");
            json_t *tp = json_object_get(lp, "top_logprobs");
            json_t *toks = json_object_get(lp, "tokens");
            int n = g_n[c % N_TEXTS];
            if (json_integer_value(json_object_get(choice, "index")) != c ||
                (int)json_array_size(tl) != n) {
                bad++;
                continue;
            }
            for (int i = 1; i < n; i++) {
                json_t *mp = json_array_get(tp, i);
                /* the argmax key, compared with the token as the old harness does */
                const char *best = NULL, *key;
                double mx = -INFINITY;
                json_t *val;
                json_object_foreach(mp, key, val) if (json_number_value(val) > mx) {
                    mx = json_number_value(val);
                    best = key;
                }
                double v = json_number_value(json_array_get(tl, i));
                if (json_object_size(mp) < 10 || json_object_size(mp) > 11 || !best) bad++;
                if (best && !strcmp(best, json_string_value(json_array_get(toks, i))) && v != mx)
                    bad++;
                /* the same value as in the lm-eval request (K does not change scores) */
                if (c < 2 && v != lm_vals[c][i]) bad++;
            }
        }
        CHECKF(bad == 0, "legacy form: %d bad entries", bad);
        json_decref(j);
        resp_free(&r);
        free(body);
    }

    /* ---- string prompts, no echo, generation ---- */
    CHECK(http(port, "POST", "/v1/completions",
               "{\"prompt\":\"Once upon a time\",\"max_tokens\":5,\"temperature\":0,"
               "\"logprobs\":2}",
               &r) &&
          r.status == 200);
    j = parse(&r);
    {
        json_t *c0 = json_array_get(json_object_get(j, "choices"), 0);
        json_t *lp = json_object_get(c0, "logprobs");
        CHECKF(json_array_size(json_object_get(lp, "tokens")) == 5 &&
                   json_is_number(json_array_get(json_object_get(lp, "token_logprobs"), 0)),
               "generation without echo: %.400s", r.body);
        CHECK(json_integer_value(json_object_get(json_object_get(j, "usage"), "completion_tokens")) == 5);
        CHECK(json_is_string(json_object_get(c0, "text")));
    }
    json_decref(j);
    resp_free(&r);
    CHECK(http(port, "POST", "/v1/completions",
               "{\"prompt\":[\"Once upon\", \"a time\"],\"max_tokens\":0,\"echo\":true}", &r) &&
          r.status == 200);
    j = parse(&r);
    {
        json_t *ch = json_object_get(j, "choices");
        json_t *c1 = json_array_get(ch, 1);
        CHECKF(json_array_size(ch) == 2 && json_is_null(json_object_get(c1, "logprobs")) &&
                   !strcmp(json_string_value(json_object_get(c1, "text")) ?: "", "<s> a time"),
               "string list, logprobs null: %.400s", r.body);
    }
    json_decref(j);
    resp_free(&r);

    /* ---- generation: stop strings cut the text, a seed repeats the sample ---- */
    {
        char *full = NULL, *cut = NULL;
        CHECK(http(port, "POST", "/v1/completions",
                   "{\"prompt\":\"Once upon a time\",\"max_tokens\":30,\"temperature\":0}", &r) &&
              r.status == 200);
        j = parse(&r);
        full = strdup(json_string_value(json_object_get(json_array_get(json_object_get(j, "choices"), 0), "text")) ?: "");
        json_decref(j);
        resp_free(&r);
        CHECK(http(port, "POST", "/v1/completions",
                   "{\"prompt\":\"Once upon a time\",\"max_tokens\":30,\"temperature\":0,"
                   "\"stop\":[\"Lily\", \"zzz\"]}",
                   &r) &&
              r.status == 200);
        j = parse(&r);
        json_t *c0 = json_array_get(json_object_get(j, "choices"), 0);
        cut = strdup(json_string_value(json_object_get(c0, "text")) ?: "");
        const char *fr = json_string_value(json_object_get(c0, "finish_reason"));
        if (strstr(full, "Lily")) {
            size_t at = (size_t)(strstr(full, "Lily") - full);
            CHECKF(fr && !strcmp(fr, "stop") && strlen(cut) == at && !strncmp(cut, full, at),
                   "stop \"Lily\": got '%s' (%s), full text '%s'", cut, fr ? fr : "?", full);
        } else {
            SKIP("the greedy story has no 'Lily' to stop at: '%s'", full);
        }
        json_decref(j);
        resp_free(&r);
        free(full);
        free(cut);
        const char *sampled = "{\"prompt\":\"Once upon a time\",\"max_tokens\":20,\"temperature\":1,"
                              "\"top_p\":0.9,\"seed\":5,\"logprobs\":3}";
        char *a = NULL, *b = NULL;
        CHECK(http(port, "POST", "/v1/completions", sampled, &r) && r.status == 200);
        a = canonical(&r);
        resp_free(&r);
        CHECK(http(port, "POST", "/v1/completions", sampled, &r) && r.status == 200);
        b = canonical(&r);
        resp_free(&r);
        CHECKF(a && b && !strcmp(a, b), "the same seed gave different samples");
        free(a);
        free(b);
    }

    /* ---- stop strings spanning 2 and 3 tokens (starting inside the first, ending inside the
     * last): text is cut before the first occurrence, the same with echo on (after the
     * prompt's text) and off. A stop that began inside a token used to leave that token whole
     * without echo ("stop":["Lily."] gave "... named Lily"). */
    {
        CHECK(http(port, "POST", "/v1/completions",
                   "{\"prompt\":\"Once upon a time\",\"max_tokens\":40,\"temperature\":0,"
                   "\"logprobs\":0}", &r) && r.status == 200);
        j = parse(&r);
        json_t *c0 = json_array_get(json_object_get(j, "choices"), 0);
        char *full = strdup(json_string_value(json_object_get(c0, "text")) ?: "");
        json_t *toks = json_object_get(json_object_get(c0, "logprobs"), "tokens");
        size_t nt = json_array_size(toks);
        for (int span = 2; span <= 3; span++) {
            char stop[160] = "";
            for (size_t a = 0; a + (size_t)span <= nt && !stop[0]; a++) {
                bool plain = true;
                char cand[160] = "";
                for (int m = 0; m < span && plain; m++) {
                    const char *t = json_string_value(json_array_get(toks, a + (size_t)m)) ?: "";
                    size_t tl = strlen(t);
                    if (tl < (m == 0 ? 2u : 1u) || tl > 40) plain = false;
                    for (size_t q = 0; q < tl; q++)
                        if (t[q] == '"' || t[q] == '\\' || (unsigned char)t[q] < 0x20 ||
                            (unsigned char)t[q] >= 0x80)
                            plain = false;
                    if (!plain) break;
                    if (m == 0) strcat(cand, t + 1);              /* from inside token a */
                    else if (m == span - 1) strncat(cand, t, 1);  /* into the last one */
                    else strcat(cand, t);
                }
                if (plain) snprintf(stop, sizeof stop, "%s", cand);
            }
            if (!stop[0] || !strstr(full, stop)) {
                SKIP("no plain %d-token stop string in the greedy story '%s'", span, full);
                continue;
            }
            size_t at = (size_t)(strstr(full, stop) - full);
            char *texts[2] = {NULL, NULL};
            int32_t n_prompt_toks = 0;
            char prompt_text[256] = "";
            for (int echo = 0; echo <= 1; echo++) {
                char body[512];
                snprintf(body, sizeof body,
                         "{\"prompt\":\"Once upon a time\",\"max_tokens\":40,\"temperature\":0,"
                         "\"logprobs\":0,\"echo\":%s,\"stop\":[\"%s\"]}", echo ? "true" : "false", stop);
                resp_free(&r);
                CHECK(http(port, "POST", "/v1/completions", body, &r) && r.status == 200);
                json_t *jj = parse(&r);
                json_t *cc = json_array_get(json_object_get(jj, "choices"), 0);
                const char *fr = json_string_value(json_object_get(cc, "finish_reason"));
                CHECKF(fr && !strcmp(fr, "stop"), "%d-token stop '%s', echo %d: finish %s", span,
                       stop, echo, fr ? fr : "?");
                texts[echo] = strdup(json_string_value(json_object_get(cc, "text")) ?: "");
                if (echo) {
                    n_prompt_toks = (int32_t)json_integer_value(
                        json_object_get(json_object_get(jj, "usage"), "prompt_tokens"));
                    json_t *et = json_object_get(json_object_get(cc, "logprobs"), "tokens");
                    for (int32_t q = 0; q < n_prompt_toks; q++)
                        strncat(prompt_text, json_string_value(json_array_get(et, (size_t)q)) ?: "",
                                sizeof prompt_text - strlen(prompt_text) - 1);
                }
                json_decref(jj);
            }
            CHECKF(strlen(texts[0]) == at && !strncmp(texts[0], full, at),
                   "%d-token stop '%s', echo off: text '%s', want '%.*s'", span, stop, texts[0],
                   (int)at, full);
            size_t pl = strlen(prompt_text);
            CHECKF(n_prompt_toks > 0 && !strncmp(texts[1], prompt_text, pl) &&
                       !strcmp(texts[1] + pl, texts[0]),
                   "%d-token stop '%s': echo on gives '%s' after the prompt's '%s', echo off '%s'",
                   span, stop, texts[1], prompt_text, texts[0]);
            free(texts[0]);
            free(texts[1]);
        }
        free(full);
        json_decref(j);
        resp_free(&r);
    }

    /* ---- echo + generation: text is the concatenation of tokens, generated ones included.
     * Near-uniform sampling (temperature 100) emits lone byte tokens back to back: each is
     * its own U+FFFD in tokens, so text must not merge them (or join bytes into a character
     * that no token shows). With a stop string, text ends before it, inside the last token. */
    {
        int n_cases = 0;
        for (int seed = 1; seed <= 6; seed++) {
            char body[256];
            snprintf(body, sizeof body,
                     "{\"prompt\":[1],\"echo\":true,\"max_tokens\":60,\"temperature\":100,"
                     "\"seed\":%d,\"logprobs\":0%s}",
                     seed, seed == 6 ? ",\"stop\":[\"e\"]" : "");
            CHECK(http(port, "POST", "/v1/completions", body, &r) && r.status == 200);
            j = parse(&r);
            json_t *c0 = json_array_get(json_object_get(j, "choices"), 0);
            json_t *toks = json_object_get(json_object_get(c0, "logprobs"), "tokens");
            const char *text = json_string_value(json_object_get(c0, "text"));
            const char *fr = json_string_value(json_object_get(c0, "finish_reason"));
            char cat[8192] = "";
            size_t nt = json_array_size(toks), len = 0, len_but_last = 0;
            for (size_t i = 0; i < nt; i++) {
                const char *t = json_string_value(json_array_get(toks, i));
                if (i + 1 == nt) len_but_last = len;
                len += (size_t)snprintf(cat + len, sizeof cat - len, "%s", t ? t : "");
                if (len >= sizeof cat) len = sizeof cat - 1;
            }
            if (text && fr && !strcmp(fr, "stop")) { /* cut inside or right after the last token */
                CHECKF(strlen(text) >= len_but_last && strlen(text) <= len &&
                           !strncmp(text, cat, strlen(text)) && !strchr(text + 4, 'e'),
                       "seed %d, stop: text '%s' is not the tokens' text cut before 'e': '%s'",
                       seed, text, cat);
            } else {
                CHECKF(text && !strcmp(text, cat), "seed %d: text '%s' != tokens '%s'", seed,
                       text ? text : "(none)", cat);
            }
            n_cases++;
            json_decref(j);
            resp_free(&r);
        }
        CHECK(n_cases == 6);
    }

    /* ---- a prompt holding U+0000 is valid JSON text: scored (its byte token), not a 400 ---- */
    {
        CHECK(http(port, "POST", "/v1/completions",
                   "{\"prompt\": \"a\\u0000b\", \"echo\": true, \"max_tokens\": 0, \"logprobs\": 0}",
                   &r));
        CHECKF(r.status == 200 && r.body && strstr(r.body, "\"tokens\":[\"<s>\",\" a\",\"\\u0000\",\"b\"]"),
               "NUL in a prompt: %ld %s", r.status, r.body ? r.body : "");
        resp_free(&r);
        /* (jansson refuses U+0000 in object keys, as top_logprobs has here: parse without) */
        CHECK(http(port, "POST", "/v1/completions",
                   "{\"prompt\": \"a\\u0000b\", \"echo\": true, \"max_tokens\": 0}", &r));
        j = parse(&r);
        json_t *c0 = json_array_get(json_object_get(j, "choices"), 0);
        json_t *text = json_object_get(c0, "text");
        CHECKF(json_is_string(text) && json_string_length(text) >= 3 &&
                   memchr(json_string_value(text), 0, json_string_length(text)),
               "the NUL is in the echoed text: %s", r.body ? r.body : "(none)");
        json_decref(j);
        resp_free(&r);
        CHECK(http(port, "POST", "/tokenize", "{\"prompt\": \"a\\u0000b\", \"add_special_tokens\": false}", &r));
        CHECKF(r.status == 200 && r.body && strstr(r.body, "\"count\":3"), "tokenize NUL: %s",
               r.body ? r.body : "");
        resp_free(&r);
    }

    /* ---- bad inputs: status + OpenAI error, and the next good request is unchanged ---- */
    struct {
        const char *method, *path, *body;
        long status;
        const char *param, *code, *needle;
    } bad[] = {
        {"POST", "/v1/completions", "{\"prompt\": [1, 2", 400, NULL, NULL, "malformed JSON"},
        {"POST", "/v1/completions", "[1, 2]", 400, NULL, NULL, "JSON object"},
        {"POST", "/v1/completions", "", 400, NULL, NULL, "empty"},
        {"POST", "/v1/completions", "{\"prompt\": 5}", 400, "prompt", NULL, NULL},
        {"POST", "/v1/completions", "{\"prompt\": [1, \"a\"]}", 400, "prompt", NULL, NULL},
        {"POST", "/v1/completions", "{\"prompt\": [[1, 2], 3]}", 400, "prompt", NULL, NULL},
        {"POST", "/v1/completions", "{\"prompt\": [1, 2.5]}", 400, "prompt", NULL, NULL},
        {"POST", "/v1/completions", "{\"prompt\": [1, 2], \"echo\": 1}", 400, "echo", NULL, NULL},
        {"POST", "/v1/completions", "{\"prompt\": [1, 2], \"max_tokens\": \"3\"}", 400,
         "max_tokens", NULL, NULL},
        {"POST", "/v1/completions", "{\"prompt\": [1, 2], \"max_tokens\": -1}", 400, "max_tokens",
         NULL, NULL},
        {"POST", "/v1/completions", "{\"prompt\": [1, 2], \"temperature\": \"hot\"}", 400,
         "temperature", NULL, NULL},
        {"POST", "/v1/completions", "{\"prompt\": [1, 2], \"stop\": 3}", 400, "stop", NULL, NULL},
        {"POST", "/v1/completions", "{\"prompt\": [1, 2], \"logprobs\": true}", 400, "logprobs",
         NULL, "got true"},
        {"POST", "/v1/completions", "{\"prompt\": [1, 2], \"logprobs\": -1}", 400, "logprobs",
         NULL, NULL},
        {"POST", "/v1/completions", "{\"prompt\": [1, 2], \"logprobs\": 2.0}", 400, "logprobs",
         NULL, "got 2.0"}, /* not "got 2": the message must show why 2.0 is not an integer */
        {"POST", "/v1/completions", "{\"prompt\": [1, 2], \"max_tokens\": 1.0}", 400,
         "max_tokens", NULL, "got 1.0"},
        {"POST", "/v1/completions", "{\"prompt\": [1, 2], \"logprobs\": 129}", 400, "logprobs",
         NULL, "128"},
        {"POST", "/v1/completions", "{\"prompt\": \"\"}", 400, "prompt", NULL, "empty"},
        {"POST", "/v1/completions", "{\"prompt\": []}", 400, "prompt", NULL, "empty"},
        {"POST", "/v1/completions", "{\"prompt\": [[]]}", 400, "prompt", NULL, "empty"},
        {"POST", "/v1/completions", "{\"prompt\": [[1, 2], []]}", 400, "prompt", NULL, "empty"},
        {"POST", "/v1/completions", "{\"max_tokens\": 1}", 400, "prompt", NULL, "required"},
        {"POST", "/v1/completions", "{\"prompt\": [1, 512]}", 400, "prompt", NULL, "512"},
        {"POST", "/v1/completions", "{\"prompt\": [[1], [1, -3]]}", 400, "prompt", NULL, "-3"},
        {"POST", "/v1/completions", "{\"prompt\": [1, 99999999999999999999]}", 400, NULL, NULL,
         "does not fit"}, /* valid JSON: not "malformed JSON" */
        {"POST", "/v1/completions", "{\"prompt\": [1, 2], \"seed\": 1e999}", 400, NULL, NULL,
         "does not fit"},
        {"POST", "/v1/completions", "{\"prompt\": [1, 2], \"max_tokens\": 2047}", 400, "prompt",
         "context_length_exceeded", "2048"},
        {"POST", "/v1/completions", "{\"prompt\": [1, 2], \"model\": \"stories\\u0000x\"}", 404,
         "model", "model_not_found", NULL}, /* not the served name cut at the NUL */
        {"POST", "/v1/completions", "{\"prompt\": [1, 2], \"stop\": [\"a\", \"b\\u0000c\"]}", 400,
         "stop", NULL, "stop[1]"},
        {"POST", "/v1/completions", "{\"prompt\": [1, 2], \"model\": \"gpt-4\"}", 404, "model",
         "model_not_found", "gpt-4"},
        {"POST", "/v1/completions", "{\"prompt\": [1, 2], \"model\": 7}", 400, "model", NULL, NULL},
        {"POST", "/v1/completions", "{\"prompt\": [1, 2], \"n\": 2}", 400, "n", NULL, NULL},
        {"POST", "/v1/completions", "{\"prompt\": [1, 2], \"stream\": true}", 400, "stream", NULL,
         NULL},
        {"POST", "/v1/completions", "{\"prompt\": [1, 2], \"best_of\": 3}", 400, "best_of", NULL,
         NULL},
        {"POST", "/v1/completions", "{\"prompt\": [1, 2], \"suffix\": \"x\"}", 400, "suffix", NULL,
         NULL},
        {"POST", "/v1/completions", "{\"prompt\": \"a\xff\xfe b\"}", 400, NULL, NULL, "UTF-8"},
        {"POST", "/v1/completions", "{\"prompt\": \"\xc0\xaf\"}", 400, NULL, NULL, "UTF-8"},
        {"GET", "/v1/completions", NULL, 405, NULL, NULL, "POST"},
        {"POST", "/health", "{}", 405, NULL, NULL, NULL},
        {"DELETE", "/v1/models", NULL, 405, NULL, NULL, NULL},
        {"GET", "/v2/nothing", NULL, 404, NULL, NULL, "/v2/nothing"},
        {"POST", "/v1/chat/completions", "{}", 404, NULL, "unsupported_route", "/v1/completions"},
        {"POST", "/chat/completions", "{}", 404, NULL, "unsupported_route", "chat template"},
        {"POST", "/tokenize", "{\"prompt\": 3}", 400, "prompt", NULL, NULL},
        {"POST", "/tokenize", "{\"content\": 3}", 400, "content", NULL, "content"},
        {"POST", "/tokenize", "{\"prompt\": \"a\", \"content\": \"a\"}", 400, "prompt", NULL,
         "not both"},
        {"POST", "/tokenize", "{}", 400, "prompt", NULL, "content"},
        {"POST", "/detokenize", "{\"tokens\": [1, 600]}", 400, "tokens", NULL, "600"},
        {"POST", "/detokenize", "{\"tokens\": \"abc\"}", 400, "tokens", NULL, NULL},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char what[128];
        snprintf(what, sizeof what, "bad[%zu] %s %s %.40s", i, bad[i].method, bad[i].path,
                 bad[i].body ? bad[i].body : "");
        bool ok = http(port, bad[i].method, bad[i].path, bad[i].body, &r);
        CHECKF(ok, "%s: no answer", what);
        check_error(&r, bad[i].status, bad[i].param, bad[i].code, bad[i].needle, what);
        resp_free(&r);
        if (i % 8 == 7) { /* the next good request is unchanged */
            CHECK(http(port, "POST", "/v1/completions", lmeval, &r) && r.status == 200);
            char *c = canonical(&r);
            CHECKF(c && baseline && !strcmp(c, baseline), "after %s the answer changed", what);
            free(c);
            resp_free(&r);
        }
    }
    /* a body over --max-body (200000): 413, declared or chunked */
    {
        size_t n = 250000;
        char *big = malloc(n + 1);
        memset(big, ' ', n);
        memcpy(big, "{\"prompt\": \"", 12);
        memcpy(big + n - 2, "\"}", 2);
        big[n] = 0;
        CHECK(http_h(NULL, port, "POST", "/v1/completions", big, (long)n, 0, &r));
        check_error(&r, 413, NULL, NULL, "200000", "body over --max-body");
        resp_free(&r);
        free(big);
    }
    CHECK(http(port, "POST", "/v1/completions", lmeval, &r) && r.status == 200);
    {
        char *c = canonical(&r);
        CHECKF(c && baseline && !strcmp(c, baseline), "after the bad inputs the answer changed");
        free(c);
    }
    resp_free(&r);

    /* ---- a client that hangs up mid-request: its work is cancelled ---- */
    {
        char *heavy = heavy_body(4, HEAVY_LEN); /* several seconds of work on one thread */
        const long long scored0 = metric_ll(port, "promptscore_prompt_tokens_scored_total");
        resp hr;
        g_reset_on_close = true;
        http_h(NULL, port, "POST", "/v1/completions", heavy, -1, 150, &hr);
        g_reset_on_close = false;
        CHECKF(hr.status == 0, "the heavy request answered within 150 ms (%ld)", hr.status);
        resp_free(&hr);
        free(heavy);
        double t0 = ps_now_s();
        CHECK(http(port, "POST", "/v1/completions", lmeval, &r) && r.status == 200);
        double secs = ps_now_s() - t0;
        char *c = canonical(&r);
        CHECKF(c && baseline && !strcmp(c, baseline), "after a hang-up the answer changed");
        free(c);
        const char *pt = r.body ? strstr(r.body, "\"prompt_tokens\":") : NULL;
        const long long next_tokens = pt ? atoll(pt + strlen("\"prompt_tokens\":")) : -1;
        resp_free(&r);
        CHECK(http(port, "GET", "/metrics", NULL, &r) && r.status == 200);
        const char *m = strstr(r.body, "\npromptscore_requests_cancelled_total ");
        CHECKF(m && atoi(m + strlen("\npromptscore_requests_cancelled_total ")) == 1,
               "cancelled counter: %s", m ? m : "(absent)");
        resp_free(&r);
        fprintf(stderr, "NOTE: after a hang-up the next request took %.3f s\n", secs);
        /* requests are served round robin, so the next request can be answered before the
         * hung-up one's connection thread has recorded its 499: wait for that (bounded) */
        for (double t1 = ps_now_s(); ps_now_s() - t1 < 10 * PS_TEST_TIME_SCALE; usleep(20000)) {
            bool seen = http(port, "GET", "/metrics", NULL, &r) && r.body &&
                        strstr(r.body, "promptscore_requests_total{route=\"/v1/completions\","
                                       "status=\"499\"} 1");
            resp_free(&r);
            if (seen) break;
        }
        /* counted, not timed: the hung-up request's 4 prompts were not all scored (its work
         * stopped), once its 499 is recorded (after its worker let go of it) */
        const long long heavy_scored =
            metric_ll(port, "promptscore_prompt_tokens_scored_total") - scored0 - next_tokens;
        CHECKF(scored0 >= 0 && next_tokens > 0 && heavy_scored >= 0 &&
                   heavy_scored < 4LL * HEAVY_LEN,
               "the hung-up request had %lld of its %d prompt tokens scored: its work was not "
               "cancelled", heavy_scored, 4 * HEAVY_LEN);
        fprintf(stderr, "NOTE: the hung-up request had %lld of its %d prompt tokens scored\n",
                heavy_scored, 4 * HEAVY_LEN);
    }

    /* ---- metrics: the exposition format parsed line by line (m_parse), the series the
     *      requests so far must have made (the hung-up request counted as 499), and counters
     *      that only grow between two scrapes (the second after the load below) ---- */
    static m_scrape scrape1, scrape2;
    CHECK(http(port, "GET", "/metrics", NULL, &r) && r.status == 200 &&
          strstr(r.ctype, "text/plain"));
    bool parsed1 = m_parse(r.body ? r.body : "", &scrape1);
    CHECKF(parsed1, "/metrics is not valid exposition text: %s", scrape1.err);
    if (parsed1) {
        static const char *const want[] = {
            "promptscore_requests_total{route=\"/v1/completions\",status=\"200\"}",
            "promptscore_requests_total{route=\"/v1/completions\",status=\"400\"}",
            "promptscore_requests_total{route=\"/v1/completions\",status=\"499\"}",
            "promptscore_prompt_tokens_scored_total{}", "promptscore_queue_depth{}",
            "promptscore_request_duration_seconds_bucket{route=\"/v1/completions\",le=\"+Inf\"}",
            /* the prefix cache is on by default (--cache-mb) */
            "promptscore_prefix_cache_hits_total{}", "promptscore_prefix_cache_misses_total{}",
            "promptscore_prefix_cache_bytes{}", "promptscore_prefix_cache_budget_bytes{}",
            "promptscore_prefix_cache_idle_bytes{}", "promptscore_prompts_deferred_total{}",
        };
        for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
            CHECKF(m_get(&scrape1, want[i]), "/metrics lacks %s", want[i]);
        const m_sample *c499 = m_get(&scrape1, want[2]);
        CHECKF(c499 && c499->v == 1, "the hung-up request: status 499 counted %g times",
               c499 ? c499->v : 0.0);
        CHECKF(!m_get(&scrape1, "promptscore_requests_total{route=\"/v1/completions\",status=\"other\"}"),
               "a completion status fell into \"other\"");
        printf("NOTE: /metrics: %d samples parsed\n", scrape1.n);
    }
    resp_free(&r);
    /* scraped again at once: nothing but the scrape itself in between, nothing may go down */
    CHECK(http(port, "GET", "/metrics", NULL, &r) && r.status == 200);
    if (parsed1 && m_parse(r.body ? r.body : "", &scrape2)) {
        char why[512] = "";
        CHECKF(m_monotonic(&scrape1, &scrape2, why, sizeof why),
               "a counter went down between two back-to-back scrapes: %s", why);
    } else {
        CHECKF(0, "/metrics (back-to-back scrape) is not valid exposition text: %s", scrape2.err);
    }
    resp_free(&r);

    /* ---- load: 8 clients x 200 requests ---- */
    {
        enum { CLIENTS = 8, PER = 200 };
        char small[2048], a[1024];
        ids_json(a, sizeof a, g_ids[2], g_n[2]);
        snprintf(small, sizeof small,
                 "{\"model\":\"stories\",\"prompt\":[%s],\"temperature\":0,\"max_tokens\":1,"
                 "\"logprobs\":1,\"seed\":1234,\"echo\":true}",
                 a);
        CHECK(http(port, "POST", "/v1/completions", small, &r) && r.status == 200);
        char *expect = canonical(&r);
        resp_free(&r);
        pthread_t th[CLIENTS];
        load_arg la[CLIENTS];
        pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
        int global_done = 0;
        long rss100 = -1;
        double t0 = ps_now_s();
        for (int i = 0; i < CLIENTS; i++) {
            la[i] = (load_arg){.port = port, .n_requests = PER, .body = small, .expect = expect,
                               .server_pid = srv.pid, .rss_at_100 = &rss100, .mu = &mu,
                               .global_done = &global_done};
            pthread_create(&th[i], NULL, load_main, &la[i]);
        }
        int errors = 0, mism = 0;
        for (int i = 0; i < CLIENTS; i++) {
            pthread_join(th[i], NULL);
            errors += la[i].errors;
            mism += la[i].mismatches;
        }
        double secs = ps_now_s() - t0;
        long rss_end = rss_kb(srv.pid);
        CHECKF(errors == 0, "load: %d errors", errors);
        CHECKF(mism == 0, "load: %d answers differ from the single-client one", mism);
        CHECKF(rss100 > 0 && rss_end > 0 && rss_end - rss100 <= RSS_SLACK_KB,
               "load: server RSS grew from %ld kB (request 100) to %ld kB (request %d)", rss100,
               rss_end, CLIENTS * PER);
        fprintf(stderr, "NOTE: load %d x %d requests in %.2f s (%.0f req/s); RSS %ld -> %ld kB\n",
                CLIENTS, PER, secs, CLIENTS * PER / secs, rss100, rss_end);
        free(expect);
        /* the second scrape: valid, every counter and histogram series at least as large */
        CHECK(http(port, "GET", "/metrics", NULL, &r) && r.status == 200);
        bool parsed2 = m_parse(r.body ? r.body : "", &scrape2);
        CHECKF(parsed2, "/metrics (second scrape) is not valid exposition text: %s", scrape2.err);
        char why[512] = "";
        if (parsed1 && parsed2)
            CHECKF(m_monotonic(&scrape1, &scrape2, why, sizeof why),
                   "a counter went down between two scrapes: %s", why);
        const char *k200 = "promptscore_requests_total{route=\"/v1/completions\",status=\"200\"}";
        const m_sample *s1 = m_get(&scrape1, k200), *s2 = m_get(&scrape2, k200);
        CHECKF(s1 && s2 && s2->v - s1->v == CLIENTS * PER + 1, "200s counted: %g then %g",
               s1 ? s1->v : -1.0, s2 ? s2->v : -1.0);
        /* every repeat of the load's prompt finds its whole blocks (16 positions) cached */
        const char *kh = "promptscore_prefix_cache_hits_total{}";
        const m_sample *h1 = m_get(&scrape1, kh), *h2 = m_get(&scrape2, kh);
        CHECKF(h1 && h2 && h2->v - h1->v >= (double)(CLIENTS * PER) * (g_n[2] / 16),
               "prefix cache hits: %g then %g for %d requests of %d ids", h1 ? h1->v : -1.0,
               h2 ? h2->v : -1.0, CLIENTS * PER, g_n[2]);
        resp_free(&r);
    }

    /* ---- a second serve on the busy port: exit 1 within 5 s naming the address; the first
     *      server still answers (no second listener sharing the port) ---- */
    {
        char portstr[16], elog[1100];
        snprintf(portstr, sizeof portstr, "%d", port);
        snprintf(elog, sizeof elog, "%.1000s/tests/server-busy-%d.log", build, (int)getpid());
        pid_t pid = fork();
        if (pid == 0) {
            FILE *f = freopen(elog, "w", stderr);
            (void)f;
            execl(g_bin, g_bin, "serve", "-m", g_model, "--port", portstr, "-t", "1", "-q",
                  (char *)NULL);
            _exit(127);
        }
        int st = -1;
        bool exited = false;
        double t0 = ps_now_s(), limit = 5.0 * PS_TEST_TIME_SCALE * ps_test_load_factor();
        while (pid > 0 && ps_now_s() - t0 < limit) {
            if (waitpid(pid, &st, WNOHANG) == pid) {
                exited = true;
                break;
            }
            usleep(10000);
        }
        double secs = ps_now_s() - t0;
        if (pid > 0 && !exited) {
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
        }
        char msg[1024] = "";
        FILE *f = fopen(elog, "r");
        if (f) {
            size_t n = fread(msg, 1, sizeof msg - 1, f);
            msg[n] = 0;
            fclose(f);
        }
        char addr[64];
        snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
        CHECKF(exited && WIFEXITED(st) && WEXITSTATUS(st) == 1,
               "a second serve on busy port %d: %s (status %d after %.2f s): %s", port,
               exited ? "exited" : "still running", st, secs, msg);
        CHECKF(strstr(msg, addr) && strstr(msg, "in use") && !strstr(msg, "listening"),
               "the busy-port error does not name %s as in use: %s", addr, msg);
        fprintf(stderr, "NOTE: a second serve on the busy port exited in %.3f s: %s", secs, msg);
        unlink(elog);
        for (int i = 0; i < 6; i++) {
            CHECK(http(port, "GET", "/v1/models", NULL, &r) && r.status == 200 &&
                  strstr(r.body, "\"id\":\"stories\""));
            resp_free(&r);
        }
    }

    /* ---- SIGTERM while idle -> exit 0 ---- */
    CHECKF(server_stop(&srv) == 0, "SIGTERM while idle did not exit 0 (log %s)", srv.log);

    /* ---- a held request (src/base/testhooks.h): --queue 1 answers a second one 503 with
     *      Retry-After; SIGTERM, then SIGINT, while it runs: it still gets its full answer and
     *      the server exits 0 ---- */
    test_held(lmeval, baseline, "SIGTERM", SIGTERM);
    test_held(lmeval, baseline, "SIGINT", SIGINT);
    test_act(build);
    free(baseline);
    curl_global_cleanup();
    return ps_test_done("server");
}
