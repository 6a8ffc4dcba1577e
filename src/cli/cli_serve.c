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

/* The values of the command line that are not fields of ps_server_config (or are, in other
 * types). */
typedef struct {
    ps_cli_model_opts o;
    const char *alias, *key_file;
    ps_cli_compares cmp; /* --compare: the paths, then the models (freed at the end) */
    bool quiet;
    int32_t port, workers, queue, max_seqs, max_logprobs, max_conns, per_ip, idle, read_timeout,
        drain, max_prompts;
    int64_t max_body, mem_budget, max_response;
} serve_args;

/* The help texts that name a default, printed from the defaults themselves
 * (ps_server_default_config and the CLI's constants), so the numbers are written once. */
typedef struct {
    char host[96], port[96], workers[96], max_seqs[192], max_logprobs[96], max_body[96],
        queue[96], mem_budget[320], max_prompts[96], max_response[128], max_conns[96],
        per_ip[96], read_timeout[192], idle[96], drain[160];
} serve_help;

static void serve_help_init(serve_help *h, const ps_server_config *d) {
    snprintf(h->host, sizeof h->host, "address to bind (default %s)", PS_SERVER_HOST);
    snprintf(h->port, sizeof h->port, "port (default %d; 0 = any free port)", (int)d->port);
    snprintf(h->workers, sizeof h->workers,
             "engine workers, each with its own KV cache\n(default %d)", (int)d->n_workers);
    snprintf(h->max_seqs, sizeof h->max_seqs,
             "prompts of one request packed into each forward pass of up to\n%d positions "
             "(default %d; 1: one prompt at a time); scores are the same bits",
             PS_CHUNK, PS_CLI_MAX_SEQS_DEFAULT);
    snprintf(h->max_logprobs, sizeof h->max_logprobs,
             "largest logprobs a request may ask for (default %d, <= n_vocab)",
             PS_SERVER_MAX_LOGPROBS);
    snprintf(h->max_body, sizeof h->max_body, "largest request body (default %lld); larger gets "
             "413", (long long)d->max_body);
    snprintf(h->queue, sizeof h->queue,
             "requests admitted at once (default %d); more get 503 + Retry-After", (int)d->queue);
    snprintf(h->mem_budget, sizeof h->mem_budget,
             "memory all requests in flight may hold (bodies, parsing,\ntokens, results, "
             "answers; default %lld), counted as it is allocated;\na request is also admitted "
             "against it on its headers, before its body\nis read: over it alone 413, while "
             "others hold it 503", (long long)d->mem_budget);
    snprintf(h->max_prompts, sizeof h->max_prompts,
             "prompts per request (default %d); more get 400", (int)d->max_prompts);
    snprintf(h->max_response, sizeof h->max_response,
             "largest answer, estimated before scoring (default\n%lld); larger gets 413",
             (long long)d->max_response);
    snprintf(h->max_conns, sizeof h->max_conns, "open connections at once (default %d)",
             (int)d->max_connections);
    snprintf(h->per_ip, sizeof h->per_ip,
             "open connections per client address (default %d; 0 = no limit)", (int)d->per_ip);
    snprintf(h->read_timeout, sizeof h->read_timeout,
             "a request (headers and body) must arrive within S seconds of\nits connection "
             "opening or the previous answer (default %g)", d->read_timeout_s);
    snprintf(h->idle, sizeof h->idle, "a connection with no byte for S seconds is closed "
             "(default %d)", (int)d->idle_timeout_s);
    snprintf(h->drain, sizeof h->drain,
             "on SIGINT/SIGTERM, running requests get S seconds to finish\n(default %g); a "
             "second signal exits at once", d->drain_s);
}

/* Parses the command line into *a and the strings of *cfg. Returns -1 to go on, else the
 * exit status (0 after --help). */
static int serve_parse(int argc, char **argv, ps_server_config *cfg, serve_args *a) {
    serve_help h;
    serve_help_init(&h, cfg);
    ps_cli_model_opts *o = &a->o;
    const ps_cli_opt model_opts[] = {
        PS_CLI_OPTS_MODEL(o),
        PS_CLI_OPT_CTX(o, "context length (default: the model's)"),
        {"-t, --threads", "N", "threads for the forward passes, all workers together\n"
         "(default: all CPUs)", PS_CLI_I32, &o->threads, 0, 1024},
        PS_CLI_OPT_ACT(o),
        PS_CLI_OPT_KV_TYPE(o),
        PS_CLI_OPT_REPACK(o),
        PS_CLI_OPT_CACHE(o),
        {0}};
    const ps_cli_opt serve_opts[] = {
        {"--host", "ADDR", h.host, PS_CLI_STR, &cfg->host},
        {"--port", "N", h.port, PS_CLI_I32, &a->port, 0, 65535},
        {"-a, --alias, --served-model-name, --name", "NAME", "the model name clients send and\n"
         "/v1/models shows (default: the GGUF's general.name)", PS_CLI_STR, &a->alias},
        {"-np, --parallel, --workers", "N", h.workers, PS_CLI_I32, &a->workers, 1, 256},
        {"--max-seqs", "N", h.max_seqs, PS_CLI_I32, &a->max_seqs, 1, PS_CHUNK},
        {"--max-logprobs", "K", h.max_logprobs, PS_CLI_I32, &a->max_logprobs, 0, INT32_MAX},
        {"--max-body", "BYTES", h.max_body, PS_CLI_I64, &a->max_body, 1, (int64_t)1 << 40},
        {"--queue", "N", h.queue, PS_CLI_I32, &a->queue, 1, 1000000},
        {"-q, --quiet", NULL, "no access log", PS_CLI_FLAG, &a->quiet},
        {"--compare", "FILE", "a second GGUF with the same vocabulary: every prompt also runs\n"
         "through it and the logprobs object gets kld, same_top1 and dp (requests\n"
         "need max_tokens 0; no prefix cache); the page can colour by KLD.\n"
         "Repeat it (or give a comma list) to compare several models in one pass:\n"
         "the logprobs object then gets \"compare\", an array of {model, kld,\n"
         "same_top1, dp, kld_mean, same_top1_pct} in the order given",
         PS_CLI_FN, &a->cmp, 0, 0, ps_cli_opt_compare},
        {0}};
    const ps_cli_opt safety_opts[] = {
        {"--api-key", "KEY", "every route but /health and / needs \"Authorization: Bearer KEY\"\n"
         "(else 401)", PS_CLI_STR, &cfg->api_key},
        {"--api-key-file", "FILE", "the same, the key being the file's first line (keeps it out of\n"
         "the process list)", PS_CLI_STR, &a->key_file},
        {"--allowed-hosts", "NAMES", "Host names accepted besides IP addresses and localhost,\n"
         "comma separated; \"*\" = any (default none: DNS rebinding gets 403)", PS_CLI_STR,
         &cfg->allowed_hosts},
        {"--cors-origin", "ORIGIN", "the one origin (\"https://app.example\") that may call the\n"
         "server from a browser (default: none, CORS off)", PS_CLI_STR, &cfg->cors_origin},
        {"--mem-budget", "BYTES", h.mem_budget, PS_CLI_I64, &a->mem_budget, 1 << 20,
         (int64_t)1 << 50},
        {"--max-prompts", "N", h.max_prompts, PS_CLI_I32, &a->max_prompts, 1, INT32_MAX},
        {"--max-response", "BYTES", h.max_response, PS_CLI_I64, &a->max_response, 1024,
         (int64_t)1 << 50},
        {"--max-connections", "N", h.max_conns, PS_CLI_I32, &a->max_conns, 1, 100000},
        {"--per-ip", "N", h.per_ip, PS_CLI_I32, &a->per_ip, 0, 100000},
        {"--read-timeout", "S", h.read_timeout, PS_CLI_I32, &a->read_timeout, 1, 86400},
        {"--idle-timeout", "S", h.idle, PS_CLI_I32, &a->idle, 1, 86400},
        {"--drain-s", "S", h.drain, PS_CLI_I32, &a->drain, 0, 86400},
        {0}};
    const ps_cli_opt *const tables[] = {model_opts, serve_opts, safety_opts, NULL};
    const ps_cli_cmd c = {"serve", "-m MODEL.gguf [options]", ABOUT, tables};
    return ps_cli_parse(&c, argc, argv);
}

/* The parsed values into the server's configuration; the API key from --api-key-file
 * (*file_key, ps_malloc'ed). Returns 0, or 2 after printing the error. */
static int serve_configure(const serve_args *a, ps_server_config *cfg, char **file_key) {
    cfg->port = a->port;
    cfg->n_workers = a->workers;
    cfg->max_seqs = a->max_seqs;
    cfg->queue = a->queue;
    cfg->max_logprobs = a->max_logprobs;
    cfg->max_body = a->max_body;
    cfg->n_threads = a->o.threads;
    cfg->act = a->o.act;
    cfg->kv_type = a->o.kv_type;
    if (a->alias) cfg->name = a->alias;
    cfg->mem_budget = a->mem_budget;
    cfg->max_prompts = a->max_prompts;
    cfg->max_response = a->max_response;
    cfg->max_connections = a->max_conns;
    cfg->per_ip = a->per_ip;
    cfg->read_timeout_s = a->read_timeout;
    cfg->idle_timeout_s = a->idle;
    cfg->drain_s = a->drain;
    if (!a->quiet) cfg->log = log_line;
    *file_key = NULL;
    if (a->key_file) {
        if (cfg->api_key) {
            fprintf(stderr, "promptscore serve: give --api-key or --api-key-file, not both\n");
            return 2;
        }
        ps_error kerr;
        ps_error_clear(&kerr);
        if (ps_guard_read_key_file(a->key_file, file_key, &kerr) != PS_OK) {
            fprintf(stderr, "promptscore serve: %s\n", kerr.message);
            return 2;
        }
        cfg->api_key = *file_key;
    } else if (cfg->api_key && !*cfg->api_key) {
        fprintf(stderr, "promptscore serve: --api-key is empty\n");
        return 2;
    }
    return 0;
}

/* The lines printed once the server listens (tests read the second). */
static void serve_announce(const ps_server_config *cfg, const ps_model *model,
                           const ps_server *server) {
    ps_model_info info;
    ps_model_get_info(model, &info);
    if (!cfg->api_key && !ps_guard_host_is_loopback(cfg->host))
        fprintf(stderr,
                "promptscore serve: warning: listening on %s without --api-key: anyone who can "
                "reach this address can use the server\n", cfg->host);
    int32_t k = cfg->max_logprobs >= 0 ? cfg->max_logprobs
                                       : (info.n_vocab < PS_SERVER_MAX_LOGPROBS
                                              ? info.n_vocab
                                              : PS_SERVER_MAX_LOGPROBS);
    fprintf(stderr,
            "promptscore serve: model '%s' (%s, n_vocab %d, n_ctx %d), %d worker(s), "
            "max logprobs %d, queue %d\n",
            cfg->name && *cfg->name ? cfg->name : info.name, info.arch, (int)info.n_vocab,
            (int)info.n_ctx, (int)cfg->n_workers, (int)k, (int)cfg->queue);
    fprintf(stderr, "promptscore serve: listening on http://%s:%d\n",
            cfg->host && *cfg->host ? cfg->host : PS_SERVER_HOST, (int)ps_server_port(server));
    fflush(stderr);
}

/* Waits for SIGINT / SIGTERM (blocked in every thread), then stops the server: running
 * requests get --drain-s, a second signal exits at once. */
static void serve_until_signal(ps_server *server, sigset_t *stop_sigs, int32_t drain) {
    int sig = 0;
    while (sigwait(stop_sigs, &sig) != 0) {
    }
    fprintf(stderr,
            "promptscore serve: %s: finishing running requests (at most %d s; a second signal "
            "exits now), then exiting\n",
            sig == SIGINT ? "SIGINT" : "SIGTERM", (int)drain);
    fflush(stderr);
    pthread_t second;
    if (pthread_create(&second, NULL, second_signal, stop_sigs) == 0) pthread_detach(second);
    ps_server_stop(server);
}

int ps_cli_serve(int argc, char **argv) {
    ps_server_config cfg = ps_server_default_config();
    serve_args a = {
        .o = {.cache_mb = -1, .want_cache = true},
        .port = cfg.port, .workers = cfg.n_workers, .queue = cfg.queue,
        .max_seqs = PS_CLI_MAX_SEQS_DEFAULT, .max_logprobs = cfg.max_logprobs,
        .max_conns = cfg.max_connections, .per_ip = cfg.per_ip, .idle = cfg.idle_timeout_s,
        .read_timeout = (int32_t)cfg.read_timeout_s, .drain = (int32_t)cfg.drain_s,
        .max_prompts = cfg.max_prompts, .max_body = cfg.max_body, .mem_budget = cfg.mem_budget,
        .max_response = cfg.max_response};
    int prc = serve_parse(argc, argv, &cfg, &a);
    if (prc >= 0) return prc;
    char *file_key = NULL;
    int crc = serve_configure(&a, &cfg, &file_key);
    if (crc) return crc;
    a.o.no_session = true;

    signal(SIGPIPE, SIG_IGN);
    /* Loading (and a -hf download) runs with the stop signals at their default action, so
     * SIGINT / SIGTERM end a load that takes long or waits on the network. No thread of ours
     * outlives the load (o.no_session: no pool). */
    ps_cli_loaded l;
    if (a.cmp.n) a.o.cache_mb = 0; /* compared scores run without a prefix cache */
    int lrc = ps_cli_load("serve", &a.o, false, &l);
    if (lrc) {
        ps_cli_compares_free(&a.cmp);
        ps_free(file_key);
        return lrc;
    }
    if (a.cmp.n && (lrc = ps_cli_load_compares("serve", &a.o, &l, &a.cmp))) {
        ps_cli_compares_free(&a.cmp);
        ps_cli_unload(&l);
        ps_free(file_key);
        return lrc;
    }
    if (a.cmp.n == 1) { /* one: as it always was */
        cfg.compare = a.cmp.models[0];
    } else if (a.cmp.n > 1) {
        cfg.compares = (const ps_model *const *)a.cmp.models;
        cfg.n_compares = a.cmp.n;
    }
    cfg.cache = l.cache;
    /* Then block them before any server thread exists, so every thread inherits the mask. */
    sigset_t stop_sigs;
    sigemptyset(&stop_sigs);
    sigaddset(&stop_sigs, SIGINT);
    sigaddset(&stop_sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop_sigs, NULL);
    ps_server *server = NULL;
    ps_error err;
    ps_error_clear(&err);
    ps_status st = ps_server_start(l.model, &cfg, &server, &err);
    int rc = 0;
    if (st != PS_OK) {
        fprintf(stderr, "promptscore serve: %s\n", err.message[0] ? err.message : ps_status_str(st));
        rc = 1;
    } else {
        serve_announce(&cfg, l.model, server);
        serve_until_signal(server, &stop_sigs, a.drain);
    }
    ps_cli_compares_free(&a.cmp);
    ps_cli_unload(&l);
    ps_free(file_key);
    if (rc == 0) fprintf(stderr, "promptscore serve: stopped\n");
    return rc;
}
