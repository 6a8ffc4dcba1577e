/*
 * cli_serve.c — `promptscore serve`: loads the model, starts the OpenAI-compatible server
 * (server.c) and waits for SIGINT/SIGTERM, then stops accepting, lets running requests finish
 * and exits 0. The signals are blocked in every thread (the mask is set before any thread
 * starts) and taken synchronously with sigwait(), so no handler runs inside library code.
 * Prints one line when listening ("listening on http://HOST:PORT", which tests parse) and one
 * access-log line per request on stderr.
 */
#include "cli.h"
#include "promptscore.h"
#include "server.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *USAGE =
    "usage: promptscore serve -m MODEL.gguf [options]\n"
    "\n"
    "OpenAI-compatible HTTP server: POST /v1/completions (echo + logprobs for scoring, as\n"
    "lm-evaluation-harness's local-completions sends), GET /v1/models, /health,\n"
    "/tokenizer_info, /metrics, POST /tokenize, /detokenize, and a page at /.\n"
    "\n"
    "  -m, --model FILE     GGUF model (required)\n"
    "  --host ADDR          address to bind (default 127.0.0.1)\n"
    "  --port N             port (default 8080; 0 = any free port)\n"
    "  -t, --threads N      threads for the forward passes, all workers together (default: CPUs)\n"
    "  --workers N          engine workers, each with its own KV cache (default 1)\n"
    "  --max-logprobs K     largest logprobs a request may ask for (default 128, <= n_vocab)\n"
    "  --max-body BYTES     largest request body (default 16777216); larger gets 413\n"
    "  --queue N            requests admitted at once (default 64); more get 503 + Retry-After\n"
    "  --name NAME          model name clients must send (default: the GGUF's general.name)\n"
    "  --ctx N              context length (default: the model's)\n"
    PS_CLI_ACT_HELP
    PS_CLI_REPACK_HELP
    "  -q, --quiet          no access log\n";

static void log_line(void *ctx, const char *line) {
    (void)ctx;
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    struct tm tm;
    gmtime_r(&t.tv_sec, &tm);
    char ts[32];
    strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S", &tm);
    fprintf(stderr, "%s.%03ldZ %s ms\n", ts, t.tv_nsec / 1000000L, line);
}

static bool parse_int(const char *s, long long lo, long long hi, long long *out) {
    if (!s || !*s) return false;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || v < lo || v > hi) return false;
    *out = v;
    return true;
}

int ps_cli_serve(int argc, char **argv) {
    const char *model_path = NULL;
    ps_server_config cfg = ps_server_default_config();
    long long ctx = 0;
    bool quiet = false, no_repack = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        long long n;
#define NEED_INT(lo, hi)                                                                   \
    do {                                                                                   \
        if (!parse_int(v, lo, hi, &n)) {                                                   \
            fprintf(stderr, "promptscore serve: %s needs an integer in %lld..%lld, got '%s'\n", \
                    a, (long long)(lo), (long long)(hi), v ? v : "");                      \
            return 2;                                                                      \
        }                                                                                  \
        i++;                                                                               \
    } while (0)
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(USAGE, stdout);
            return 0;
        } else if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            if (!v) goto missing;
            model_path = v;
            i++;
        } else if (!strcmp(a, "--host")) {
            if (!v) goto missing;
            cfg.host = v;
            i++;
        } else if (!strcmp(a, "--name")) {
            if (!v) goto missing;
            cfg.name = v;
            i++;
        } else if (!strcmp(a, "--port")) {
            NEED_INT(0, 65535);
            cfg.port = (int32_t)n;
        } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
            NEED_INT(0, 1024);
            cfg.n_threads = (int32_t)n;
        } else if (!strcmp(a, "--workers")) {
            NEED_INT(1, 256);
            cfg.n_workers = (int32_t)n;
        } else if (!strcmp(a, "--max-logprobs")) {
            NEED_INT(0, INT32_MAX);
            cfg.max_logprobs = (int32_t)n;
        } else if (!strcmp(a, "--max-body")) {
            NEED_INT(1, (long long)1 << 40);
            cfg.max_body = n;
        } else if (!strcmp(a, "--queue")) {
            NEED_INT(1, 1000000);
            cfg.queue = (int32_t)n;
        } else if (!strcmp(a, "--ctx")) {
            NEED_INT(0, INT32_MAX);
            ctx = n;
        } else if (!strcmp(a, "--act")) {
            if (!ps_cli_parse_act("serve", v, &cfg.act)) return 2;
            i++;
        } else if (!strcmp(a, "--no-repack")) {
            no_repack = true;
        } else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
            quiet = true;
        } else {
            fprintf(stderr, "promptscore serve: unknown option '%s'\n%s", a, USAGE);
            return 2;
        }
        continue;
    missing:
        fprintf(stderr, "promptscore serve: %s needs a value\n", a);
        return 2;
#undef NEED_INT
    }
    if (!model_path) {
        fprintf(stderr, "promptscore serve: -m MODEL.gguf is required\n%s", USAGE);
        return 2;
    }

    /* Block the stop signals before any thread exists, so every thread inherits the mask. */
    sigset_t stop_sigs;
    sigemptyset(&stop_sigs);
    sigaddset(&stop_sigs, SIGINT);
    sigaddset(&stop_sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop_sigs, NULL);
    signal(SIGPIPE, SIG_IGN);

    ps_error err;
    ps_error_clear(&err);
    ps_model_params mp = ps_model_default_params();
    mp.n_ctx = (int32_t)ctx;
    mp.no_repack = no_repack;
    ps_model *model = NULL;
    ps_status st = ps_model_load(model_path, &mp, &model, &err);
    if (st != PS_OK) {
        fprintf(stderr, "promptscore serve: cannot load %s: %s\n", model_path,
                err.message[0] ? err.message : ps_status_str(st));
        return 1;
    }
    ps_model_info info;
    ps_model_get_info(model, &info);
    if (!quiet) cfg.log = log_line;
    ps_server *server = NULL;
    st = ps_server_start(model, &cfg, &server, &err);
    if (st != PS_OK) {
        fprintf(stderr, "promptscore serve: %s\n", err.message[0] ? err.message : ps_status_str(st));
        ps_model_free(model);
        return 1;
    }
    fprintf(stderr,
            "promptscore serve: model '%s' (%s, n_vocab %d, n_ctx %d), %d worker(s), "
            "max logprobs %d, queue %d\n",
            cfg.name && *cfg.name ? cfg.name : info.name, info.arch, (int)info.n_vocab,
            (int)info.n_ctx, (int)cfg.n_workers,
            (int)(cfg.max_logprobs >= 0 ? cfg.max_logprobs : (info.n_vocab < 128 ? info.n_vocab : 128)),
            (int)cfg.queue);
    fprintf(stderr, "promptscore serve: listening on http://%s:%d\n",
            cfg.host && *cfg.host ? cfg.host : "127.0.0.1", (int)ps_server_port(server));
    fflush(stderr);

    int sig = 0;
    while (sigwait(&stop_sigs, &sig) != 0) {
    }
    fprintf(stderr, "promptscore serve: %s: finishing running requests, then exiting\n",
            sig == SIGINT ? "SIGINT" : "SIGTERM");
    ps_server_stop(server);
    ps_model_free(model);
    fprintf(stderr, "promptscore serve: stopped\n");
    return 0;
}
