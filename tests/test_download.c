/*
 * test_download.c — the --hf downloader (download.c) against an in-process libmicrohttpd
 * server on 127.0.0.1 (ephemeral port) that serves a fake Hub: file URLs with HEAD and Range
 * support, one that ignores Range, one whose HEAD announces more bytes than the GET sends, a
 * repo listing, and 404 for the rest. Checks: full download + cache reuse without requests,
 * resume from a partial .part (the Range header sent), restart when Range is ignored, size
 * mismatch error, 404 error, picking a .gguf from a listing, and malformed specs. No real
 * network.
 */
#include "check.h"
#include "front/download.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <sys/stat.h>

#define FILE_SIZE 200000
static unsigned char g_content[FILE_SIZE];
static atomic_int g_requests;
static char g_last_range[64];
static char g_last_method[16];

static const char *LISTING =
    "{\"id\":\"org/model\",\"siblings\":[{\"rfilename\":\"README.md\"},"
    "{\"rfilename\":\"model-F16.gguf\"},{\"rfilename\":\"model-Q8_0.gguf\"},"
    "{\"rfilename\":\"model-Q4_K_M.gguf\"}]}";

static enum MHD_Result reply(struct MHD_Connection *c, unsigned code, const void *data,
                             size_t n, const char *range_hdr) {
    void *copy = malloc(n ? n : 1); /* MHD frees it with the response */
    if (!copy) return MHD_NO;
    if (n) memcpy(copy, data, n);
    struct MHD_Response *r = MHD_create_response_from_buffer(n, copy, MHD_RESPMEM_MUST_FREE);
    if (range_hdr) MHD_add_response_header(r, "Content-Range", range_hdr);
    enum MHD_Result ret = MHD_queue_response(c, code, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url,
                               const char *method, const char *version, const char *upload,
                               size_t *upload_size, void **con_cls) {
    (void)cls; (void)version; (void)upload; (void)upload_size; (void)con_cls;
    atomic_fetch_add(&g_requests, 1);
    snprintf(g_last_method, sizeof g_last_method, "%s", method);
    const char *range = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Range");
    if (strcmp(method, "GET") == 0) snprintf(g_last_range, sizeof g_last_range, "%s", range ? range : "");
    bool honour_range = true;
    size_t size = FILE_SIZE;
    if (!strcmp(url, "/api/models/org/model")) return reply(c, 200, LISTING, strlen(LISTING), NULL);
    if (!strcmp(url, "/api/models/org/empty"))
    {
        static const char *empty = "{\"siblings\":[{\"rfilename\":\"a.txt\"}]}";
        return reply(c, 200, empty, strlen(empty), NULL);
    }
    if (!strcmp(url, "/org/liar/resolve/main/x.gguf")) {
        /* HEAD says FILE_SIZE, GET sends fewer bytes */
        if (!strcmp(method, "HEAD")) return reply(c, 200, g_content, FILE_SIZE, NULL);
        return reply(c, 200, g_content, FILE_SIZE - 100, NULL);
    }
    if (!strcmp(url, "/org/norange/resolve/main/x.gguf")) {
        honour_range = false;
    } else if (strncmp(url, "/org/model/resolve/main/", 24) != 0 || strstr(url, "missing")) {
        return reply(c, 404, "Entry not found", 15, NULL);
    }
    long from = 0;
    if (honour_range && range && sscanf(range, "bytes=%ld-", &from) == 1 && from > 0) {
        if (from >= (long)size) return reply(c, 416, "", 0, NULL);
        char cr[64];
        snprintf(cr, sizeof cr, "bytes %ld-%zu/%zu", from, size - 1, size);
        return reply(c, 206, g_content + from, size - (size_t)from, cr);
    }
    return reply(c, 200, g_content, size, NULL);
}

static bool file_equals(const char *path, const unsigned char *want, size_t n) {
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    unsigned char *got = malloc(n + 1);
    size_t r = fread(got, 1, n + 1, f);
    fclose(f);
    bool ok = r == n && memcmp(got, want, n) == 0;
    free(got);
    return ok;
}

static bool exists(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0;
}

static int64_t g_prog_done = -2, g_prog_total = -2;
static int g_notes;
static void on_progress(void *ctx, int64_t done, int64_t total) {
    (void)ctx;
    g_prog_done = done;
    g_prog_total = total;
}
static void on_note(void *ctx, const char *msg) {
    (void)ctx;
    (void)msg;
    g_notes++;
}

static void test_pick(void) {
    char *f = NULL;
    ps_error e;
    CHECK(ps_hf_pick_gguf(LISTING, strlen(LISTING), &f, &e) == PS_OK && f && !strcmp(f, "model-Q8_0.gguf"));
    ps_free(f);
    const char *l2 = "{\"siblings\":[{\"rfilename\":\"a-q4.gguf\"},{\"rfilename\":\"b-f16.gguf\"},{\"rfilename\":\"c-bf16.gguf\"}]}";
    CHECK(ps_hf_pick_gguf(l2, strlen(l2), &f, &e) == PS_OK && f && !strcmp(f, "c-bf16.gguf"));
    ps_free(f);
    const char *l3 = "{\"siblings\":[{\"rfilename\":\"x.bin\"},{\"rfilename\":\"m-Q4_0.GGUF\"},{\"rfilename\":\"n.gguf\"}]}";
    CHECK(ps_hf_pick_gguf(l3, strlen(l3), &f, &e) == PS_OK && f && !strcmp(f, "m-Q4_0.GGUF"));
    ps_free(f);
    const char *l4 = "{\"siblings\":[{\"rfilename\":\"x.bin\"}]}";
    CHECK(ps_hf_pick_gguf(l4, strlen(l4), &f, &e) == PS_ERR_NOT_FOUND && f == NULL);
    CHECK(ps_hf_pick_gguf("{\"id\":1}", 8, &f, &e) == PS_ERR_FORMAT);
    CHECK(ps_hf_pick_gguf("<html>", 6, &f, &e) == PS_ERR_FORMAT);
}

static void test_cache_dir(void) {
    ps_download_params p = ps_download_default_params();
    ps_error e;
    setenv("PS_CACHE", "/tmp/ps-cache-a", 1);
    char *d = ps_download_cache_dir(&p, &e);
    CHECK(d && !strcmp(d, "/tmp/ps-cache-a"));
    ps_free(d);
    unsetenv("PS_CACHE");
    setenv("XDG_CACHE_HOME", "/tmp/xdg", 1);
    d = ps_download_cache_dir(&p, &e);
    CHECK(d && !strcmp(d, "/tmp/xdg/promptscore"));
    ps_free(d);
    unsetenv("XDG_CACHE_HOME");
    setenv("HOME", "/tmp/home", 1);
    d = ps_download_cache_dir(&p, &e);
    CHECK(d && !strcmp(d, "/tmp/home/.cache/promptscore"));
    ps_free(d);
    p.cache_dir = "/tmp/explicit";
    d = ps_download_cache_dir(&p, &e);
    CHECK(d && !strcmp(d, "/tmp/explicit"));
    ps_free(d);
}

int main(void) {
    for (size_t i = 0; i < FILE_SIZE; i++) g_content[i] = (unsigned char)(i * 2654435761u >> 13);
    test_pick();
    test_cache_dir();

    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = 0; /* ephemeral */
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct MHD_Daemon *d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD, 0, NULL, NULL,
                                            handler, NULL, MHD_OPTION_SOCK_ADDR, &sa,
                                            MHD_OPTION_END);
    if (!d) {
        SKIP("cannot start a libmicrohttpd server on 127.0.0.1");
        return ps_test_done("download");
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    char endpoint[64];
    snprintf(endpoint, sizeof endpoint, "http://127.0.0.1:%u/", (unsigned)info->port);
    char dir[] = "/tmp/ps-test-download-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);

    ps_download_params p = ps_download_default_params();
    p.endpoint = endpoint;
    p.cache_dir = dir;
    p.progress = on_progress;
    p.note = on_note;
    ps_error e;
    char *path = NULL;
    char want[512];

    /* full download */
    CHECKF(ps_hf_resolve("org/model:model.gguf", &p, &path, &e) == PS_OK, "%s", e.message);
    snprintf(want, sizeof want, "%s/org/model/model.gguf", dir);
    CHECK(path && !strcmp(path, want));
    CHECK(file_equals(want, g_content, FILE_SIZE));
    CHECK(g_prog_done == FILE_SIZE && g_prog_total == FILE_SIZE);
    snprintf(want, sizeof want, "%s/org/model/model.gguf.part", dir);
    CHECK(!exists(want));
    ps_free(path);

    /* cached: no request at all */
    int before = atomic_load(&g_requests);
    CHECK(ps_hf_resolve("org/model:model.gguf", &p, &path, &e) == PS_OK);
    CHECK(atomic_load(&g_requests) == before);
    ps_free(path);

    /* resume from a partial .part (in a subfolder of the repo) */
    snprintf(want, sizeof want, "%s/org/model/sub/big.gguf.part", dir);
    ps_error me;
    CHECK(ps_download_file("http://127.0.0.1:1/none", want, &p, &me) == PS_ERR_NETWORK); /* mkdirs, refused */
    FILE *f = fopen(want, "wb");
    CHECK(f && fwrite(g_content, 1, 30000, f) == 30000);
    if (f) fclose(f);
    CHECKF(ps_hf_resolve("org/model:sub/big.gguf", &p, &path, &e) == PS_OK, "%s", e.message);
    CHECKF(!strcmp(g_last_range, "bytes=30000-"), "range sent: '%s'", g_last_range);
    CHECK(path && file_equals(path, g_content, FILE_SIZE));
    CHECK(!exists(want));
    CHECK(g_prog_done == FILE_SIZE);
    ps_free(path);

    /* a server that ignores Range: the .part starts over */
    snprintf(want, sizeof want, "%s/org/norange/x.gguf.part", dir);
    char mk[600];
    snprintf(mk, sizeof mk, "%s/org/norange", dir);
    mkdir(mk, 0755);
    f = fopen(want, "wb");
    CHECK(f && fwrite("garbage-garbage", 1, 15, f) == 15);
    if (f) fclose(f);
    CHECKF(ps_hf_resolve("org/norange:x.gguf", &p, &path, &e) == PS_OK, "%s", e.message);
    CHECK(path && file_equals(path, g_content, FILE_SIZE));
    ps_free(path);

    /* size mismatch: clear error, nothing renamed into place */
    path = NULL;
    ps_status st = ps_hf_resolve("org/liar:x.gguf", &p, &path, &e);
    CHECKF(st == PS_ERR_NETWORK && strstr(e.message, "size mismatch") &&
               strstr(e.message, "199900") && strstr(e.message, "200000"),
           "%d %s", st, e.message);
    CHECK(path == NULL);
    snprintf(want, sizeof want, "%s/org/liar/x.gguf", dir);
    CHECK(!exists(want));

    /* 404 */
    st = ps_hf_resolve("org/model:missing.gguf", &p, &path, &e);
    CHECKF(st == PS_ERR_NETWORK && strstr(e.message, "404"), "%d %s", st, e.message);
    st = ps_hf_resolve("nobody/nothing", &p, &path, &e);
    CHECKF(st == PS_ERR_NETWORK && strstr(e.message, "404"), "%d %s", st, e.message);

    /* no FILE: the listing picks the Q8_0 file */
    g_notes = 0;
    CHECKF(ps_hf_resolve("org/model", &p, &path, &e) == PS_OK, "%s", e.message);
    snprintf(want, sizeof want, "%s/org/model/model-Q8_0.gguf", dir);
    CHECK(path && !strcmp(path, want) && file_equals(path, g_content, FILE_SIZE));
    CHECK(g_notes >= 1);
    ps_free(path);
    st = ps_hf_resolve("org/empty", &p, &path, &e);
    CHECKF(st == PS_ERR_NOT_FOUND, "%d %s", st, e.message);

    /* malformed specs never reach the network */
    before = atomic_load(&g_requests);
    const char *bad[] = {"", ":x.gguf", "../x", "org/model:../../etc/passwd", "org/model:/abs.gguf",
                         "org//model", "org/model:", "org/mo del", "org/model:a?b.gguf"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        st = ps_hf_resolve(bad[i], &p, &path, &e);
        CHECKF(st == PS_ERR_INVALID_ARG, "spec '%s' gave %d", bad[i], st);
    }
    CHECK(atomic_load(&g_requests) == before);

    MHD_stop_daemon(d);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
    return ps_test_done("download");
}
