/*
 * load.c — a small load client for `promptscore serve`: C clients (threads) each send R copies
 * of one request body over a kept-alive connection and compare every answer with the first
 * one (minus "id" and "created"); prints requests/s, latency percentiles and errors.
 * The same check runs bounded inside tests/test_server.c (8 x 200 on stories260K); this
 * standalone client is for bigger models and longer runs:
 *   make test   (builds build/load/load; tests/test_load.sh runs it against a real server)
 *   build/load/load http://127.0.0.1:8080/v1/completions 8 200 body.json
 * Exit status 0 only when every request got 200 and the same answer.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <curl/curl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    const char *url, *body;
    int n;
    char *expect;          /* shared, set before the threads start */
    double *lat;           /* n latencies, seconds */
    int errors, mismatches;
} client;

typedef struct {
    char *p;
    size_t n;
} buf;

static size_t on_body(char *p, size_t sz, size_t n, void *ud) {
    buf *b = ud;
    char *q = realloc(b->p, b->n + sz * n + 1);
    if (!q) return 0;
    memcpy(q + b->n, p, sz * n);
    b->p = q;
    b->n += sz * n;
    b->p[b->n] = 0;
    return sz * n;
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* One POST; returns the canonical answer (malloc'd) or NULL on a non-200 / transport error. */
static char *post(CURL *h, const char *url, const char *body) {
    buf b = {0};
    struct curl_slist *hd = curl_slist_append(NULL, "Content-Type: application/json");
    hd = curl_slist_append(hd, "Expect:");
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    long status = 0;
    CURLcode rc = curl_easy_perform(h);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(hd);
    char *out = NULL;
    if (rc == CURLE_OK && status == 200 && b.p) {
        json_t *j = json_loads(b.p, 0, NULL);
        if (j) {
            json_object_del(j, "id");
            json_object_del(j, "created");
            out = json_dumps(j, JSON_SORT_KEYS | JSON_COMPACT | JSON_REAL_PRECISION(17));
            json_decref(j);
        }
    } else {
        fprintf(stderr, "request failed: curl %d, HTTP %ld: %.300s\n", (int)rc, status,
                b.p ? b.p : "");
    }
    free(b.p);
    return out;
}

static void *run(void *arg) {
    client *c = arg;
    CURL *h = curl_easy_init();
    for (int i = 0; i < c->n; i++) {
        double t0 = now_s();
        char *a = post(h, c->url, c->body);
        c->lat[i] = now_s() - t0;
        if (!a) c->errors++;
        else if (strcmp(a, c->expect)) c->mismatches++;
        free(a);
    }
    curl_easy_cleanup(h);
    return NULL;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: %s URL CLIENTS REQUESTS_PER_CLIENT BODY.json\n", argv[0]);
        return 2;
    }
    const char *url = argv[1];
    int nc = atoi(argv[2]), nr = atoi(argv[3]);
    FILE *f = fopen(argv[4], "rb");
    if (!f || nc < 1 || nr < 1) {
        fprintf(stderr, "bad arguments\n");
        return 2;
    }
    buf body = {0};
    char chunk[65536];
    size_t k;
    while ((k = fread(chunk, 1, sizeof chunk, f)) > 0) on_body(chunk, 1, k, &body);
    fclose(f);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    CURL *h = curl_easy_init();
    char *expect = post(h, url, body.p ? body.p : "");
    curl_easy_cleanup(h);
    if (!expect) return 1;
    client *cs = calloc((size_t)nc, sizeof *cs);
    pthread_t *th = calloc((size_t)nc, sizeof *th);
    double *lat = calloc((size_t)nc * (size_t)nr, sizeof *lat);
    double t0 = now_s();
    for (int i = 0; i < nc; i++) {
        cs[i] = (client){.url = url, .body = body.p, .n = nr, .expect = expect,
                         .lat = lat + (size_t)i * (size_t)nr};
        pthread_create(&th[i], NULL, run, &cs[i]);
    }
    int errors = 0, mism = 0;
    for (int i = 0; i < nc; i++) {
        pthread_join(th[i], NULL);
        errors += cs[i].errors;
        mism += cs[i].mismatches;
    }
    double secs = now_s() - t0;
    size_t n = (size_t)nc * (size_t)nr;
    qsort(lat, n, sizeof *lat, cmp);
    printf("%zu requests by %d clients in %.2f s: %.1f req/s; latency p50 %.1f ms, p99 %.1f ms, "
           "max %.1f ms; %d errors, %d answers differ\n",
           n, nc, secs, (double)n / secs, 1e3 * lat[n / 2], 1e3 * lat[(n * 99) / 100],
           1e3 * lat[n - 1], errors, mism);
    free(expect);
    free(body.p);
    free(cs);
    free(th);
    free(lat);
    curl_global_cleanup();
    return errors || mism ? 1 : 0;
}
