/*
 * cli_serve.c — `promptscore serve`: loads the model, starts the OpenAI-compatible server
 * (server.c) and waits for SIGINT/SIGTERM, then stops accepting, lets running requests finish
 * and exits 0. While the model loads the signals keep their default action (a long load or a
 * stalled -hf download is stopped by them); then they are blocked in every thread (the mask
 * is set before any server thread starts) and taken synchronously with sigwait(), so no
 * handler runs inside library code.
 * Prints one line when listening ("listening on http://HOST:PORT", which tests parse) and one
 * access-log line per request on stderr. While it drains (up to --drain-s), a second SIGINT or
 * SIGTERM exits at once (130 / 143): a thread of its own waits for it.
 */
#include "cli/cli.h"
#include "promptscore.h"
#include "serve/server.h"
#include "serve/server_guard.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *ABOUT =
    "OpenAI-compatible HTTP server: POST /v1/completions (echo + logprobs for scoring, as\n"
    "lm-evaluation-harness's local-completions sends), GET /v1/models, /health,\n"
    "/tokenizer_info, /metrics, POST /tokenize, /detokenize, and a page at /. docs/api.md\n"
    "describes every route.\n";

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

/* The second stop signal: exit now, whatever is still draining. */
static void *second_signal(void *arg) {
    const sigset_t *set = arg;
    int sig = 0;
    while (sigwait(set, &sig) != 0) {
    }
    static const char msg[] = "promptscore serve: second signal: exiting now\n";
    ssize_t w = write(2, msg, sizeof msg - 1);
    (void)w;
    _exit(128 + sig);
}

int ps_cli_serve(int argc, char **argv) {
    ps_cli_model_opts o = {.cache_mb = -1, .want_cache = true};
    ps_server_config cfg = ps_server_default_config();
    const char *alias = NULL;
    int32_t port = cfg.port, workers = cfg.n_workers, queue = cfg.queue, max_seqs = PS_CLI_MAX_SEQS_DEFAULT;
    int32_t max_logprobs = cfg.max_logprobs;
    int64_t max_body = cfg.max_body;
    bool quiet = false;
    const char *key_file = NULL;
    static ps_cli_compares cmp; /* --compare: the paths, then the models (freed at the end) */
    int32_t max_conns = cfg.max_connections, per_ip = cfg.per_ip, idle = cfg.idle_timeout_s;
    int32_t read_timeout = (int32_t)cfg.read_timeout_s, drain = (int32_t)cfg.drain_s;
    int64_t mem_budget = cfg.mem_budget, max_response = cfg.max_response;
    int32_t max_prompts = cfg.max_prompts;
    const ps_cli_opt model_opts[] = {
        PS_CLI_OPTS_MODEL(&o),
        PS_CLI_OPT_CTX(&o, "context length (default: the model's)"),
        {"-t, --threads", "N", "threads for the forward passes, all workers together\n"
         "(default: all CPUs)", PS_CLI_I32, &o.threads, 0, 1024},
        PS_CLI_OPT_ACT(&o),
        PS_CLI_OPT_KV_TYPE(&o),
        PS_CLI_OPT_REPACK(&o),
        PS_CLI_OPT_CACHE(&o),
        {0}};
    const ps_cli_opt serve_opts[] = {
        {"--host", "ADDR", "address to bind (default 127.0.0.1)", PS_CLI_STR, &cfg.host},
        {"--port", "N", "port (default 8080; 0 = any free port)", PS_CLI_I32, &port, 0, 65535},
        {"-a, --alias, --served-model-name, --name", "NAME", "the model name clients send and\n"
         "/v1/models shows (default: the GGUF's general.name)", PS_CLI_STR, &alias},
        {"-np, --parallel, --workers", "N", "engine workers, each with its own KV cache\n"
         "(default 1)", PS_CLI_I32, &workers, 1, 256},
        {"--max-seqs", "N", "prompts of one request packed into each forward pass of up to\n"
         "256 positions (default 16; 1: one prompt at a time); scores are the same bits",
         PS_CLI_I32, &max_seqs, 1, 256},
        {"--max-logprobs", "K", "largest logprobs a request may ask for (default 128, <= n_vocab)",
         PS_CLI_I32, &max_logprobs, 0, INT32_MAX},
        {"--max-body", "BYTES", "largest request body (default 16777216); larger gets 413",
         PS_CLI_I64, &max_body, 1, (int64_t)1 << 40},
        {"--queue", "N", "requests admitted at once (default 64); more get 503 + Retry-After",
         PS_CLI_I32, &queue, 1, 1000000},
        {"-q, --quiet", NULL, "no access log", PS_CLI_FLAG, &quiet},
        {"--compare", "FILE", "a second GGUF with the same vocabulary: every prompt also runs\n"
         "through it and the logprobs object gets kld, same_top1 and dp (requests\n"
         "need max_tokens 0; no prefix cache); the page can colour by KLD.\n"
         "Repeat it (or give a comma list) to compare several models in one pass:\n"
         "the logprobs object then gets \"compare\", an array of {model, kld,\n"
         "same_top1, dp, kld_mean, same_top1_pct} in the order given",
         PS_CLI_FN, &cmp, 0, 0, ps_cli_opt_compare},
        {0}};
    const ps_cli_opt safety_opts[] = {
        {"--api-key", "KEY", "every route but /health and / needs \"Authorization: Bearer KEY\"\n"
         "(else 401)", PS_CLI_STR, &cfg.api_key},
        {"--api-key-file", "FILE", "the same, the key being the file's first line (keeps it out of\n"
         "the process list)", PS_CLI_STR, &key_file},
        {"--allowed-hosts", "NAMES", "Host names accepted besides IP addresses and localhost,\n"
         "comma separated; \"*\" = any (default none: DNS rebinding gets 403)", PS_CLI_STR,
         &cfg.allowed_hosts},
        {"--cors-origin", "ORIGIN", "the one origin (\"https://app.example\") that may call the\n"
         "server from a browser (default: none, CORS off)", PS_CLI_STR, &cfg.cors_origin},
        {"--mem-budget", "BYTES", "memory all requests in flight may hold (parsing, results,\n"
         "answers; default 1073741824); a request is admitted against it on its headers,\n"
         "before its body is read: over it alone 413, while others hold it 503",
         PS_CLI_I64, &mem_budget, 1 << 20, (int64_t)1 << 50},
        {"--max-prompts", "N", "prompts per request (default 2048); more get 400", PS_CLI_I32,
         &max_prompts, 1, INT32_MAX},
        {"--max-response", "BYTES", "largest answer, estimated before scoring (default\n"
         "268435456); larger gets 413", PS_CLI_I64, &max_response, 1024, (int64_t)1 << 50},
        {"--max-connections", "N", "open connections at once (default 2048)", PS_CLI_I32,
         &max_conns, 1, 100000},
        {"--per-ip", "N", "open connections per client address (default 32; 0 = no limit)",
         PS_CLI_I32, &per_ip, 0, 100000},
        {"--read-timeout", "S", "a request (headers and body) must arrive within S seconds of\n"
         "its connection opening or the previous answer (default 30)", PS_CLI_I32, &read_timeout,
         1, 86400},
        {"--idle-timeout", "S", "a connection with no byte for S seconds is closed (default 10)",
         PS_CLI_I32, &idle, 1, 86400},
        {"--drain-s", "S", "on SIGINT/SIGTERM, running requests get S seconds to finish\n"
         "(default 30); a second signal exits at once", PS_CLI_I32, &drain, 0, 86400},
        {0}};
    const ps_cli_opt *const tables[] = {model_opts, serve_opts, safety_opts, NULL};
    const ps_cli_cmd c = {"serve", "-m MODEL.gguf [options]", ABOUT, tables};
    int prc = ps_cli_parse(&c, argc, argv);
    if (prc >= 0) return prc;
    cfg.port = port;
    cfg.n_workers = workers;
    cfg.max_seqs = max_seqs;
    cfg.queue = queue;
    cfg.max_logprobs = max_logprobs;
    cfg.max_body = max_body;
    cfg.n_threads = o.threads;
    cfg.act = o.act;
    cfg.kv_type = o.kv_type;
    if (alias) cfg.name = alias;
    cfg.mem_budget = mem_budget;
    cfg.max_prompts = max_prompts;
    cfg.max_response = max_response;
    cfg.max_connections = max_conns;
    cfg.per_ip = per_ip;
    cfg.read_timeout_s = read_timeout;
    cfg.idle_timeout_s = idle;
    cfg.drain_s = drain;
    o.no_session = true;
    char *file_key = NULL;
    if (key_file) {
        if (cfg.api_key) {
            fprintf(stderr, "promptscore serve: give --api-key or --api-key-file, not both\n");
            return 2;
        }
        ps_error kerr;
        ps_error_clear(&kerr);
        if (ps_guard_read_key_file(key_file, &file_key, &kerr) != PS_OK) {
            fprintf(stderr, "promptscore serve: %s\n", kerr.message);
            return 2;
        }
        cfg.api_key = file_key;
    } else if (cfg.api_key && !*cfg.api_key) {
        fprintf(stderr, "promptscore serve: --api-key is empty\n");
        return 2;
    }

    signal(SIGPIPE, SIG_IGN);
    ps_error err;
    ps_error_clear(&err);
    ps_cli_loaded l;
    /* Loading (and a -hf download) runs with the stop signals at their default action, so
     * SIGINT / SIGTERM end a load that takes long or waits on the network. No thread of ours
     * outlives the load (o.no_session: no pool). */
    if (cmp.n) o.cache_mb = 0; /* compared scores run without a prefix cache */
    int lrc = ps_cli_load("serve", &o, false, &l);
    if (lrc) {
        ps_free(file_key);
        return lrc;
    }
    if (cmp.n && (lrc = ps_cli_load_compares("serve", &o, &l, &cmp))) {
        ps_cli_compares_free(&cmp);
        ps_cli_unload(&l);
        ps_free(file_key);
        return lrc;
    }
    if (cmp.n == 1) { /* one: as it always was */
        cfg.compare = cmp.models[0];
    } else if (cmp.n > 1) {
        cfg.compares = (const ps_model *const *)cmp.models;
        cfg.n_compares = cmp.n;
    }
    /* Then block them before any server thread exists, so every thread inherits the mask. */
    sigset_t stop_sigs;
    sigemptyset(&stop_sigs);
    sigaddset(&stop_sigs, SIGINT);
    sigaddset(&stop_sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop_sigs, NULL);
    ps_model *model = l.model;
    cfg.cache = l.cache;
    ps_status st;
    ps_model_info info;
    ps_model_get_info(model, &info);
    if (!quiet) cfg.log = log_line;
    ps_server *server = NULL;
    st = ps_server_start(model, &cfg, &server, &err);
    if (st != PS_OK) {
        fprintf(stderr, "promptscore serve: %s\n", err.message[0] ? err.message : ps_status_str(st));
        ps_cli_compares_free(&cmp);
        ps_cli_unload(&l);
        ps_free(file_key);
        return 1;
    }
    if (!cfg.api_key && !ps_guard_host_is_loopback(cfg.host))
        fprintf(stderr,
                "promptscore serve: warning: listening on %s without --api-key: anyone who can "
                "reach this address can use the server\n", cfg.host);
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
    fprintf(stderr,
            "promptscore serve: %s: finishing running requests (at most %d s; a second signal "
            "exits now), then exiting\n",
            sig == SIGINT ? "SIGINT" : "SIGTERM", (int)drain);
    fflush(stderr);
    pthread_t second;
    if (pthread_create(&second, NULL, second_signal, &stop_sigs) == 0) pthread_detach(second);
    ps_server_stop(server);
    ps_cli_compares_free(&cmp);
    ps_cli_unload(&l);
    ps_free(file_key);
    fprintf(stderr, "promptscore serve: stopped\n");
    return 0;
}
