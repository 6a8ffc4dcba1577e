/*
 * bench_workload.c — the evaluation workload, end to end: lm-evaluation-harness-shaped requests
 * sent to a real `promptscore serve`, under several server settings ("modes") and client
 * concurrencies, in one run.
 *
 * Workloads, built from the model's vocabulary with a fixed seed (token ids, as lm-eval's
 * local-completions sends them: "echo": true, "logprobs": 1, "max_tokens": 1, temperature 0):
 *   mmlu       a 550-token 5-shot context shared by every question, a 50-token question of its
 *              own, then one of 4 one-token choices: one prompt per request (lm-eval batch 1)
 *   hellaswag  an 80-token context per item, then 4 endings of 15-25 tokens: one per request
 *   arc        independent 30-token prompts, 16 per request
 *   mmlu4, hellaswag4  the same items with an item's 4 prompts in one request (lm-eval's
 *              batched requests: with `--max-seqs` >= 4 and the cache, the shared context is
 *              computed once and the other 3 prompts restore it)
 * For each mode (`--mode NAME=SERVER-ARGS`, repeatable; the default is two modes, `nocache`
 * with `--cache-mb 0` and `cache` with the default prefix cache) and each concurrency
 * (`--conc 1,4,8`: that many client threads on kept-alive connections, pulling the next request
 * from a shared counter) a server is started on a free loopback port and every workload runs
 * on it, so each run starts with an empty prefix cache (a run never finds what an earlier
 * concurrency left). Printed per (workload, mode, concurrency): requests/s, scored tokens/s,
 * p50/p99 latency, the prefix-cache hit rate when the server's /metrics has the counters
 * (`promptscore_prefix_cache_hits_total` / `_misses_total`; "-" otherwise), and the server's
 * peak RSS (VmHWM, the largest of the mode's servers); then the requests/s and tokens/s ratios of every mode against
 * the first at the same workload and concurrency, measured in this run, in wall time and in
 * the server's CPU time (user + system from /proc: steadier than wall time when other jobs
 * share the machine).
 * Before anything is timed as valid, every answer (its JSON without "id" and "created") is
 * compared with the first mode's at concurrency 1: any difference, non-200 or transport error
 * makes the exit status 1 — a mode that is faster but not bitwise the same is not a result.
 *
 *   bench_workload [-m MODEL.gguf] [--bin build/promptscore] [--mode NAME=ARGS]... [--conc 1,4,8]
 *                  [--workloads mmlu,mmlu4,hellaswag,hellaswag4,arc]
 *                  [--items N] [-t THREADS]
 * Without -m, a small generated llama (`make bench` runs it so).
 *   bench_workload --check    a tiny generated model, 3 modes (-t 1 without the prefix cache,
 *                             -t 2 with it, -t 2 --max-seqs 5 with it: several prompts per
 *                             forward pass), concurrency 1 and 3, few items: the comparison
 *                             only (make test runs it)
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "promptscore.h"
#include "base/util.h"

#include "../tests/check.h" /* ps_test_argv */

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define MAX_MODES 8
#define MAX_CONC 8
#define MAX_WORKLOADS 5

/* whether the comma-separated list holds name */
static int listed(const char *list, const char *name) {
    const size_t n = strlen(name);
    for (const char *p = list; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
        if (!strncmp(p, name, n) && (p[n] == ',' || p[n] == 0)) return 1;
    return 0;
}

/* ---- workloads ---------------------------------------------------------------------------- */

typedef struct {
    char *body;       /* the request's JSON */
    int64_t n_tokens; /* prompt tokens it scores */
} request;

typedef struct {
    const char *name;
    request *req;
    int n_req;
} workload;

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint32_t rng(void) { /* xorshift64*: the same workload on every run */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (uint32_t)((rng_state * 0x2545f4914f6cdd1dull) >> 32);
}

static int32_t lo_id, n_ids; /* ordinary token ids are lo_id .. lo_id + n_ids - 1 */
static void fill(int32_t *dst, int n) {
    for (int i = 0; i < n; i++) dst[i] = lo_id + (int32_t)(rng() % (uint32_t)n_ids);
}

/* appends one prompt's ids as a JSON array to a growing buffer */
typedef struct {
    char *p;
    size_t n, cap;
} sbuf;
static int sb_add(sbuf *b, const char *s, size_t len) {
    if (b->n + len + 1 > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 4096;
        while (cap < b->n + len + 1) cap *= 2;
        char *q = realloc(b->p, cap);
        if (!q) return -1;
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, len);
    b->n += len;
    b->p[b->n] = 0;
    return 0;
}
static int sb_ids(sbuf *b, const int32_t *ids, int n) {
    char tmp[16];
    if (sb_add(b, "[", 1)) return -1;
    for (int i = 0; i < n; i++) {
        int k = snprintf(tmp, sizeof tmp, "%s%d", i ? "," : "", ids[i]);
        if (sb_add(b, tmp, (size_t)k)) return -1;
    }
    return sb_add(b, "]", 1);
}

/* one request of n_prompts prompts, prompt p = ids[p] of len[p] */
static int make_request(request *r, int32_t *const *ids, const int *len, int n_prompts) {
    sbuf b = {0};
    const char *head = "{\"prompt\": [";
    if (sb_add(&b, head, strlen(head))) return -1;
    r->n_tokens = 0;
    for (int p = 0; p < n_prompts; p++) {
        if (p && sb_add(&b, ",", 1)) return -1;
        if (sb_ids(&b, ids[p], len[p])) return -1;
        r->n_tokens += len[p];
    }
    const char *tail = "], \"echo\": true, \"logprobs\": 1, \"max_tokens\": 1, \"temperature\": 0}";
    if (sb_add(&b, tail, strlen(tail))) return -1;
    r->body = b.p;
    return 0;
}

/* mmlu: shot = shared context, q = question length, 4 one-token choices */
/* mmlu: shot = shared context, q = question length, 4 one-token choices; per_req 1: one
 * choice per request ("mmlu"), 4: an item's 4 choices in one request ("mmlu4", as lm-eval
 * sends a batch of 4) */
static int build_mmlu(workload *w, int items, int shot, int q, int per_req) {
    int32_t *ctx[4];
    int len[4];
    int32_t choices[4];
    w->name = per_req == 1 ? "mmlu" : "mmlu4";
    w->n_req = items * 4 / per_req;
    w->req = calloc((size_t)w->n_req, sizeof *w->req);
    for (int c = 0; c < 4; c++) ctx[c] = malloc(sizeof(int32_t) * (size_t)(shot + q + 1));
    if (!ctx[0] || !ctx[1] || !ctx[2] || !ctx[3] || !w->req) return -1;
    fill(ctx[0], shot);
    fill(choices, 4);
    for (int it = 0; it < items; it++) {
        fill(ctx[0] + shot, q);
        for (int c = 0; c < 4; c++) {
            memcpy(ctx[c], ctx[0], sizeof(int32_t) * (size_t)(shot + q));
            ctx[c][shot + q] = choices[c];
            len[c] = shot + q + 1;
        }
        for (int c = 0; c < 4; c += per_req)
            if (make_request(&w->req[(it * 4 + c) / per_req], ctx + c, len + c, per_req))
                return -1;
    }
    for (int c = 0; c < 4; c++) free(ctx[c]);
    return 0;
}

/* hellaswag: a context of ctx_len per item, 4 endings of 15-25 tokens; per_req as mmlu's
 * ("hellaswag", "hellaswag4") */
static int build_hellaswag(workload *w, int items, int ctx_len, int per_req) {
    int32_t *buf[4];
    int len[4];
    w->name = per_req == 1 ? "hellaswag" : "hellaswag4";
    w->n_req = items * 4 / per_req;
    w->req = calloc((size_t)w->n_req, sizeof *w->req);
    for (int e = 0; e < 4; e++) buf[e] = malloc(sizeof(int32_t) * (size_t)(ctx_len + 25));
    if (!buf[0] || !buf[1] || !buf[2] || !buf[3] || !w->req) return -1;
    for (int it = 0; it < items; it++) {
        fill(buf[0], ctx_len);
        for (int e = 0; e < 4; e++) {
            int n_end = 15 + (int)(rng() % 11);
            memcpy(buf[e], buf[0], sizeof(int32_t) * (size_t)ctx_len);
            fill(buf[e] + ctx_len, n_end);
            len[e] = ctx_len + n_end;
        }
        for (int e = 0; e < 4; e += per_req)
            if (make_request(&w->req[(it * 4 + e) / per_req], buf + e, len + e, per_req))
                return -1;
    }
    for (int e = 0; e < 4; e++) free(buf[e]);
    return 0;
}

static int build_arc(workload *w, int n_requests, int per_request, int len) {
    int32_t *buf = malloc(sizeof(int32_t) * (size_t)(per_request * len));
    int32_t **ids = malloc(sizeof(int32_t *) * (size_t)per_request);
    int *lens = malloc(sizeof(int) * (size_t)per_request);
    w->name = "arc";
    w->n_req = n_requests;
    w->req = calloc((size_t)w->n_req, sizeof *w->req);
    if (!buf || !ids || !lens || !w->req) return -1;
    for (int r = 0; r < n_requests; r++) {
        fill(buf, per_request * len);
        for (int p = 0; p < per_request; p++) {
            ids[p] = buf + p * len;
            lens[p] = len;
        }
        if (make_request(&w->req[r], ids, lens, per_request)) return -1;
    }
    free(buf);
    free(ids);
    free(lens);
    return 0;
}

/* ---- HTTP client -------------------------------------------------------------------------- */

static size_t on_body(char *p, size_t sz, size_t n, void *ud) {
    sbuf *b = ud;
    return sb_add(b, p, sz * n) ? 0 : sz * n;
}

/* the answer without the fields that differ between identical answers: the text with the
 * values of "id" and "created" (both before "choices") cut out. Textual, not parsed: a top-K
 * map may have the key "\u0000", which jansson cannot hold. */
static char *canonical(const char *body) {
    char *s = strdup(body);
    if (!s) return NULL;
    char *end = strstr(s, "\"choices\"");
    if (!end) {
        free(s);
        return NULL;
    }
    const char *keys[] = {"\"id\":", "\"created\":"};
    for (int k = 0; k < 2; k++) {
        char *p = strstr(s, keys[k]);
        if (!p || p > end) continue;
        char *v = p + strlen(keys[k]), *q = v;
        if (*q == '"') q = strchr(q + 1, '"') ? strchr(q + 1, '"') + 1 : q;
        else while (*q >= '0' && *q <= '9') q++;
        memmove(v, q, strlen(q) + 1);
        end = strstr(s, "\"choices\"");
    }
    return s;
}

typedef struct {
    const char *url;
    const workload *w;
    atomic_int *next;
    char **answers; /* n_req, written by whoever sends request i */
    double *lat;    /* n_req */
    atomic_int *errors;
    char *first_error; /* the first error's text (set once) */
    pthread_mutex_t *mu;
} client;

static void *client_main(void *arg) {
    client *c = arg;
    CURL *h = curl_easy_init();
    struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: application/json");
    if (!h || !hdr) {
        atomic_fetch_add(c->errors, 1);
        curl_easy_cleanup(h);
        curl_slist_free_all(hdr);
        return NULL;
    }
    curl_easy_setopt(h, CURLOPT_URL, c->url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 600L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    for (;;) {
        int i = atomic_fetch_add(c->next, 1);
        if (i >= c->w->n_req) break;
        sbuf b = {0};
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, c->w->req[i].body);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
        double t0 = ps_now_s();
        CURLcode rc = curl_easy_perform(h);
        c->lat[i] = ps_now_s() - t0;
        long code = 0;
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
        char *canon = rc == CURLE_OK && code == 200 && b.p ? canonical(b.p) : NULL;
        if (!canon) {
            atomic_fetch_add(c->errors, 1);
            pthread_mutex_lock(c->mu);
            if (!c->first_error[0])
                snprintf(c->first_error, 512, "request %d: %s, HTTP %ld: %.300s", i,
                         curl_easy_strerror(rc), code, b.p ? b.p : "");
            pthread_mutex_unlock(c->mu);
        }
        c->answers[i] = canon;
        free(b.p);
    }
    curl_slist_free_all(hdr);
    curl_easy_cleanup(h);
    return NULL;
}

static char *http_get(const char *url) {
    CURL *h = curl_easy_init();
    sbuf b = {0};
    if (!h) return NULL;
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 30L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    CURLcode rc = curl_easy_perform(h);
    curl_easy_cleanup(h);
    if (rc != CURLE_OK) {
        free(b.p);
        return NULL;
    }
    return b.p;
}

/* a Prometheus counter's value in a /metrics text, -1 when absent */
static double metric(const char *text, const char *name) {
    size_t n = strlen(name);
    for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        if (!strncmp(p, name, n) && (p[n] == ' ' || p[n] == '{')) {
            const char *v = strchr(p + n, ' ');
            return v ? strtod(v, NULL) : -1;
        }
    return -1;
}

/* ---- the server --------------------------------------------------------------------------- */

typedef struct {
    pid_t pid;
    int port;
    char log[256];
} server;

/* splits ARGS on spaces (no quoting: modes are flags and numbers) */
static int start_server(server *s, const char *bin, const char *model, const char *threads,
                        const char *args, const char *dir, int index) {
    const char *argv[64];
    int n = 0;
    char *copy = strdup(args ? args : "");
    if (!copy) return -1;
    argv[n++] = bin;
    argv[n++] = "serve";
    argv[n++] = "-m";
    argv[n++] = model;
    argv[n++] = "--port";
    argv[n++] = "0";
    argv[n++] = "-q";
    if (threads) {
        argv[n++] = "-t";
        argv[n++] = threads;
    }
    for (char *tok = strtok(copy, " "); tok && n < 62; tok = strtok(NULL, " ")) argv[n++] = tok;
    argv[n] = NULL;
    snprintf(s->log, sizeof s->log, "%s/server-%d.log", dir, index);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 2, s->log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    char *args_c[64], buf[8192];
    int rc = ps_test_argv(argv, args_c, 64, buf, sizeof buf)
                 ? posix_spawn(&s->pid, bin, &fa, NULL, args_c, environ)
                 : E2BIG;
    posix_spawn_file_actions_destroy(&fa);
    free(copy);
    if (rc) {
        fprintf(stderr, "bench_workload: cannot start %s: %s\n", bin, strerror(rc));
        return -1;
    }
    s->port = 0;
    for (int i = 0; i < 6000 && !s->port; i++) { /* up to 10 minutes: a big model loads */
        FILE *f = fopen(s->log, "r");
        char line[512];
        while (f && fgets(line, sizeof line, f)) {
            const char *p = strstr(line, "listening on http://");
            if (p && (p = strchr(p + 20, ':'))) s->port = atoi(p + 1);
        }
        if (f) fclose(f);
        int st;
        if (!s->port && waitpid(s->pid, &st, WNOHANG) == s->pid) {
            fprintf(stderr, "bench_workload: the server exited (log %s)\n", s->log);
            s->pid = 0;
            return -1;
        }
        if (!s->port) usleep(100000);
    }
    return s->port ? 0 : -1;
}

static long peak_rss_kb(pid_t pid) {
    char path[64], line[256];
    long kb = -1;
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmHWM:", 6)) kb = strtol(line + 6, NULL, 10);
    if (f) fclose(f);
    return kb;
}

static void stop_server(server *s) {
    if (s->pid <= 0) return;
    kill(s->pid, SIGTERM);
    for (int i = 0; i < 300; i++) {
        if (waitpid(s->pid, NULL, WNOHANG) == s->pid) {
            s->pid = 0;
            return;
        }
        usleep(100000);
    }
    kill(s->pid, SIGKILL);
    waitpid(s->pid, NULL, 0);
    s->pid = 0;
}

/* ---- one run ------------------------------------------------------------------------------ */

typedef struct {
    double seconds, p50, p99, hit_rate; /* hit_rate -1: the server has no cache counters */
    double cpu;                         /* the server's CPU seconds (user + system) in the run */
    int errors;
} result;

/* A process's user + system CPU seconds (/proc/PID/stat fields 14 and 15), -1 when unread. */
static double cpu_s(pid_t pid) {
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f) fclose(f);
    buf[n] = 0;
    const char *p = strrchr(buf, ')'); /* the name may hold spaces */
    unsigned long long ut = 0, st = 0;
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
        return -1;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double metric_now(const char *base, const char *name) {
    char url[128];
    snprintf(url, sizeof url, "%s/metrics", base);
    char *m = http_get(url);
    double v = m ? metric(m, name) : -1;
    free(m);
    return v;
}

static int run(const char *base, pid_t pid, const workload *w, int conc, char **answers,
               result *res) {
    char url[128];
    snprintf(url, sizeof url, "%s/v1/completions", base);
    double *lat = calloc((size_t)w->n_req, sizeof *lat);
    if (!lat) return -1;
    atomic_int next = 0, errors = 0;
    char first_error[512] = "";
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    client c[MAX_CONC];
    pthread_t th[MAX_CONC];
    double h0 = metric_now(base, "promptscore_prefix_cache_hits_total");
    double m0 = metric_now(base, "promptscore_prefix_cache_misses_total");
    double c0 = cpu_s(pid);
    double t0 = ps_now_s();
    for (int i = 0; i < conc; i++) {
        c[i] = (client){url, w, &next, answers, lat, &errors, first_error, &mu};
        pthread_create(&th[i], NULL, client_main, &c[i]);
    }
    for (int i = 0; i < conc; i++) pthread_join(th[i], NULL);
    res->seconds = ps_now_s() - t0;
    double c1 = cpu_s(pid);
    res->cpu = c0 >= 0 && c1 >= 0 ? c1 - c0 : -1;
    double h1 = metric_now(base, "promptscore_prefix_cache_hits_total");
    double m1 = metric_now(base, "promptscore_prefix_cache_misses_total");
    res->hit_rate = h0 >= 0 && m0 >= 0 && h1 + m1 - h0 - m0 > 0
                        ? (h1 - h0) / (h1 + m1 - h0 - m0) : -1;
    qsort(lat, (size_t)w->n_req, sizeof *lat, cmp_double);
    res->p50 = lat[(w->n_req + 1) / 2 - 1];          /* nearest rank: ceil(q n) - 1 */
    res->p99 = lat[(99 * w->n_req + 99) / 100 - 1];
    res->errors = atomic_load(&errors);
    if (first_error[0]) fprintf(stderr, "bench_workload: %s: %s\n", w->name, first_error);
    free(lat);
    return 0;
}

/* ---- main --------------------------------------------------------------------------------- */

static void usage(void) {
    fprintf(stderr,
            "usage: bench_workload [-m MODEL.gguf] [--bin PATH] [--mode NAME=SERVER-ARGS]...\n"
            "                      [--conc 1,4,8] [--workloads mmlu,mmlu4,hellaswag,hellaswag4,arc]\n"
            "                      [--items N]\n"
            "                      [-t THREADS]\n"
            "       bench_workload --check\n");
}

int main(int argc, char **argv) {
    /* the CLI of this build: $BUILD/promptscore, as make test sets BUILD (build or build-san) */
    static char bin_default[256];
    snprintf(bin_default, sizeof bin_default, "%s/promptscore",
             getenv("BUILD") && *getenv("BUILD") ? getenv("BUILD") : "build");
    const char *model = NULL, *bin = bin_default, *threads = NULL;
    const char *wl = "mmlu,hellaswag,arc";
    char conc_s[64] = "1,4,8";
    const char *mode_name[MAX_MODES], *mode_args[MAX_MODES];
    char *mode_owned[MAX_MODES] = {0}; /* the names strndup'd from --mode, freed at the end */
    int n_modes = 0, items = 0, check = 0, n_owned = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--check")) check = 1;
        else if (!strcmp(a, "-m") && v) model = argv[++i];
        else if (!strcmp(a, "--bin") && v) bin = argv[++i];
        else if (!strcmp(a, "-t") && v) threads = argv[++i];
        else if (!strcmp(a, "--workloads") && v) wl = argv[++i];
        else if (!strcmp(a, "--conc") && v) snprintf(conc_s, sizeof conc_s, "%s", argv[++i]);
        else if (!strcmp(a, "--items") && v) items = atoi(argv[++i]);
        else if (!strcmp(a, "--mode") && v && n_modes < MAX_MODES) {
            const char *eq = strchr(v, '=');
            if (!eq) { usage(); return 2; }
            mode_name[n_modes] = mode_owned[n_owned++] = strndup(v, (size_t)(eq - v));
            mode_args[n_modes++] = eq + 1;
            i++;
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(); return 0; }
        else { usage(); return 2; }
    }
    char dir[] = "/tmp/ps-bench-workload-XXXXXX";
    if (!mkdtemp(dir)) { perror("bench_workload: mkdtemp"); return 1; }
    char gen[300] = "";
    if (!model) { /* a small generated llama, its context long enough for mmlu's 601 tokens */
        snprintf(gen, sizeof gen, "%s/tiny.gguf", dir);
        const char *gargv[] = {bin, "gen-model", "-o", gen, "-c", "1024", NULL};
        char *gargs[8], gbuf[2048];
        pid_t pid;
        int st = -1;
        if (!ps_test_argv(gargv, gargs, 8, gbuf, sizeof gbuf) ||
            posix_spawn(&pid, bin, NULL, NULL, gargs, environ) || waitpid(pid, &st, 0) != pid ||
            !WIFEXITED(st) || WEXITSTATUS(st)) {
            fprintf(stderr, "bench_workload: %s gen-model failed\n", bin);
            return 1;
        }
        model = gen;
    }
    if (check) { /* the comparison only: two thread counts and batching, concurrency 1 and 3 */
        n_modes = 0;
        mode_name[n_modes] = "t1", mode_args[n_modes++] = "-t 1 --cache-mb 0";
        mode_name[n_modes] = "t2-cache", mode_args[n_modes++] = "-t 2 --cache-mb 64";
        mode_name[n_modes] = "seqs5", mode_args[n_modes++] = "-t 2 --max-seqs 5 --cache-mb 64";
        snprintf(conc_s, sizeof conc_s, "1,3");
        if (!items) items = 3;
    }
    if (!n_modes) { /* the prefix cache off and on */
        mode_name[0] = "nocache", mode_args[0] = "--cache-mb 0";
        mode_name[1] = "cache", mode_args[1] = "";
        n_modes = 2;
    }
    int conc[MAX_CONC], n_conc = 0;
    for (char *p = conc_s; *p && n_conc < MAX_CONC;) {
        conc[n_conc] = (int)strtol(p, &p, 10);
        if (conc[n_conc] < 1 || conc[n_conc] > MAX_CONC) {
            fprintf(stderr, "bench_workload: --conc takes 1..%d\n", MAX_CONC);
            return 2;
        }
        n_conc++;
        if (*p == ',') p++;
    }

    /* the vocabulary: ids above the specials and bytes, below n_vocab */
    ps_model_params mp = ps_model_default_params();
    mp.vocab_only = true;
    ps_model *m = NULL;
    ps_error err = {0};
    if (ps_model_load(model, &mp, &m, &err) != PS_OK) {
        fprintf(stderr, "bench_workload: %s: %s\n", model, err.message);
        return 1;
    }
    int32_t nv = ps_vocab_n_tokens(ps_model_vocab(m));
    ps_model_free(m);
    lo_id = nv > 1024 ? 300 : 3;
    n_ids = nv - lo_id - (nv > 1024 ? 256 : 0);
    if (n_ids < 2) { fprintf(stderr, "bench_workload: vocabulary too small\n"); return 1; }

    workload ws[MAX_WORKLOADS];
    int n_w = 0;
    int it = items ? items : 16;
    if (listed(wl, "mmlu") && build_mmlu(&ws[n_w++], it, 550, 50, 1)) return 1;
    if (listed(wl, "mmlu4") && build_mmlu(&ws[n_w++], it, 550, 50, 4)) return 1;
    if (listed(wl, "hellaswag") && build_hellaswag(&ws[n_w++], it, 80, 1)) return 1;
    if (listed(wl, "hellaswag4") && build_hellaswag(&ws[n_w++], it, 80, 4)) return 1;
    if (listed(wl, "arc") && build_arc(&ws[n_w++], it, 16, 30)) return 1;
    if (!n_w) {
        fprintf(stderr, "bench_workload: --workloads takes mmlu, mmlu4, hellaswag, hellaswag4, "
                        "arc\n");
        return 2;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);

    /* answers[w][mode][conc][req]; results[w][mode][conc] */
    char **ans[MAX_WORKLOADS][MAX_MODES][MAX_CONC];
    result res[MAX_WORKLOADS][MAX_MODES][MAX_CONC];
    long rss[MAX_MODES];
    int failed = 0;
    for (int mo = 0; mo < n_modes; mo++) {
        rss[mo] = -1;
        for (int ci = 0; ci < n_conc; ci++) { /* a fresh server (an empty cache) per run */
            server s = {0};
            if (start_server(&s, bin, model, threads, mode_args[mo], dir, mo)) {
                fprintf(stderr, "bench_workload: mode %s: the server did not start (%s)\n",
                        mode_name[mo], s.log);
                stop_server(&s);
                return 1;
            }
            char base[64];
            snprintf(base, sizeof base, "http://127.0.0.1:%d", s.port);
            for (int w = 0; w < n_w; w++) {
                ans[w][mo][ci] = calloc((size_t)ws[w].n_req, sizeof(char *));
                if (!ans[w][mo][ci] || run(base, s.pid, &ws[w], conc[ci], ans[w][mo][ci],
                                           &res[w][mo][ci])) return 1;
                failed |= res[w][mo][ci].errors > 0;
            }
            long kb = peak_rss_kb(s.pid);
            if (kb > rss[mo]) rss[mo] = kb;
            stop_server(&s);
        }
    }

    /* bitwise: every answer equals mode 0 at concurrency 1 */
    int64_t compared = 0, differ = 0;
    for (int w = 0; w < n_w; w++)
        for (int mo = 0; mo < n_modes; mo++)
            for (int ci = 0; ci < n_conc; ci++)
                for (int r = 0; r < ws[w].n_req; r++) {
                    const char *a = ans[w][0][0][r], *b = ans[w][mo][ci][r];
                    if (mo == 0 && ci == 0) continue;
                    compared++;
                    if (!a || !b || strcmp(a, b)) {
                        if (!differ)
                            fprintf(stderr, "bench_workload: %s request %d differs: mode %s "
                                    "concurrency %d vs mode %s concurrency %d\n", ws[w].name, r,
                                    mode_name[mo], conc[ci], mode_name[0], conc[0]);
                        differ++;
                    }
                }

    printf("%-10s %-10s %5s %9s %11s %9s %9s %6s %9s %8s\n", "workload", "mode", "conc", "req/s",
           "tokens/s", "p50 ms", "p99 ms", "hit", "peak MB", "cpu s");
    for (int w = 0; w < n_w; w++) {
        int64_t tok = 0;
        for (int r = 0; r < ws[w].n_req; r++) tok += ws[w].req[r].n_tokens;
        for (int mo = 0; mo < n_modes; mo++)
            for (int ci = 0; ci < n_conc; ci++) {
                const result *x = &res[w][mo][ci];
                char hit[16] = "-";
                if (x->hit_rate >= 0) snprintf(hit, sizeof hit, "%.0f%%", 100 * x->hit_rate);
                printf("%-10s %-10s %5d %9.2f %11.0f %9.1f %9.1f %6s %9.0f %8.2f\n", ws[w].name,
                       mode_name[mo], conc[ci], ws[w].n_req / x->seconds, tok / x->seconds,
                       1e3 * x->p50, 1e3 * x->p99, hit, rss[mo] / 1024.0, x->cpu);
            }
    }
    if (n_modes > 1 && !check) {
        printf("\nratios against mode %s at the same workload and concurrency (this run):\n",
               mode_name[0]);
        for (int w = 0; w < n_w; w++)
            for (int mo = 1; mo < n_modes; mo++)
                for (int ci = 0; ci < n_conc; ci++)
                    printf("  %-10s %-10s conc %d: %.2fx requests/s, %.2fx requests per server "
                           "CPU second\n", ws[w].name, mode_name[mo], conc[ci],
                           res[w][0][ci].seconds / res[w][mo][ci].seconds,
                           res[w][mo][ci].cpu > 0 ? res[w][0][ci].cpu / res[w][mo][ci].cpu : 0.0);
    }
    printf("answers: %lld compared with mode %s at concurrency %d, %lld differ; %s\n",
           (long long)compared, mode_name[0], conc[0], (long long)differ,
           failed ? "some requests FAILED" : "every request answered 200");
    if (check) { /* the closing line tests/run.sh reads: each answer compared, each request sent */
        int64_t sent = 0, errs = 0;
        for (int w = 0; w < n_w; w++)
            for (int mo = 0; mo < n_modes; mo++)
                for (int ci = 0; ci < n_conc; ci++) {
                    sent += ws[w].n_req;
                    errs += res[w][mo][ci].errors;
                }
        printf("bench_workload: %lld passed, %lld failed, 0 skipped\n",
               (long long)(compared - differ + sent - errs), (long long)(differ + errs));
    }
    curl_global_cleanup();
    for (int w = 0; w < n_w; w++) {
        for (int mo = 0; mo < n_modes; mo++)
            for (int ci = 0; ci < n_conc; ci++) {
                for (int r = 0; r < ws[w].n_req; r++) free(ans[w][mo][ci][r]);
                free(ans[w][mo][ci]);
            }
        for (int r = 0; r < ws[w].n_req; r++) free(ws[w].req[r].body);
        free(ws[w].req);
    }
    for (int i = 0; i < n_owned; i++) free(mode_owned[i]);
    char path[400];
    for (int mo = 0; mo < n_modes; mo++) {
        snprintf(path, sizeof path, "%s/server-%d.log", dir, mo);
        unlink(path);
    }
    if (gen[0]) unlink(gen);
    rmdir(dir);
    return failed || differ ? 1 : 0;
}
