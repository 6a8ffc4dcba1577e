/*
 * cli_score.c — `promptscore score`: JSON Lines in, one scored line out per input line.
 *
 * score streams: one line is read (getline, any length), parsed and tokenised by the request
 * module (jsonl.c, request.c: text prompts get BOS as the model says unless --no-bos; id lists
 * are verbatim), scored by the engine (engine.c, one worker — the server's request path) and
 * written as {"id", "logprobs" (the server's object, prompt entries only), "sum_logprob",
 * "n_tokens"} in input order. By default one line is in flight: it is written before the next
 * is read, so memory stays bounded by the longest line (on long prompts --max-seqs 16 cost
 * time and peak memory, each of the 16 kept sequences holding its own K/V; docs/figures.md,
 * "Batching on by default"). --max-seqs N reads rounds of up to N lines, queues their jobs at
 * once (the worker takes them as one group, their positions packed into shared forward
 * passes, bitwise the same scores), then writes them in order: memory is
 * then bounded by N lines. A bad line becomes {"id", "error": {...}} and the run goes on (--strict makes
 * the exit status 1 at the end). Progress goes to stderr when it is a terminal (or with
 * --progress); one summary line always ends the run on stderr. --format table | summary
 * writes a view for people instead of the JSON (cli_format.c).
 *
 * --shard I/N scores only the input lines whose number L (from 1) has (L - 1) mod N == I and
 * writes them tagged with L and the line's hash (cli_shard.h); --resume appends to such an
 * output after checking it against the input, skipping the lines it holds. Shards are taken
 * modulo N, not as contiguous ranges: a task streams its input without counting it first
 * (stdin works), and a corpus sorted by length or source spreads evenly over the tasks.
 * `promptscore merge` (cli_merge.c) puts the shards back in input order as plain lines.
 *
 * --stats asks every line's job for entropy, rank and varentropy; --detect adds each line's
 * "detect" object (front/detect.h: its job computes the statistics, shown only with --stats;
 * a text line keeps its text for the zlib ratio; a one-token line is an error line);
 * --compare FILE loads a second model
 * (ps_cli_load_compare: same n_ctx, vocabulary checked token for token) that the engine's
 * worker runs over the same tokens (kld, same_top1, dp; lines one at a time, no prefix cache).
 * --compare given several times (or a comma list; cli_compare.c) compares every model in the
 * same pass (ps_score_params.compares: the base forwards each chunk once): each line then gets
 * a "compare" array instead (ps_json_compares); one --compare writes what it always wrote.
 * --token-ids 1,2,3 (read_token_ids, checked against the vocabulary) names tokens for every
 * line that names none; a line's continuation_start goes to its job with its ids.
 * ps_cli_score runs in phases: score_parse (the command line), score_setup (input, models,
 * engine), score_open_output (a shard file or -o), score_lines (rounds of lines, score_emit
 * writing each) and score_end (end record, footer, summary); score_close frees the rest.
 */
#include "cli/cli.h"
#include "model/model.h"
#include "cli/cli_shard.h"
#include "front/detect.h"
#include "front/engine.h"
#include "front/jsonl.h"
#include "model/vocab.h"
#include "base/util.h"
#include "score/words.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- stopping on SIGINT / SIGTERM -------------------------------------------------------- */

/* The signal that asked the run to stop (0: none). The handler only sets it; the loop looks at
 * it between lines, the scorer's cancel callback between chunks, and a read interrupted by it
 * (the handler has no SA_RESTART, so a blocked read returns EINTR) ends the input. Output is
 * written with write(2) retried on EINTR, whole lines only. */
static volatile sig_atomic_t g_stop;

static void on_stop(int sig) { g_stop = sig; }

static bool stop_requested(void *ctx) {
    (void)ctx;
    return g_stop != 0;
}

static void install_stop_handlers(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0; /* no SA_RESTART: a read blocked on a pipe must see the signal */
    const int sigs[2] = {SIGINT, SIGTERM};
    for (int i = 0; i < 2; i++) {
        struct sigaction old;
        /* a signal the parent set to be ignored (a background job's SIGINT) stays ignored */
        if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN) continue;
        sigaction(sigs[i], &sa, NULL);
    }
}

/* All n bytes to fd, retrying interrupted and short writes (a line is never cut by a signal):
 * base/util.h's ps_write_all under the name ps_cli_score uses. */
static bool write_all(int fd, const char *p, size_t n) { return ps_write_all(fd, p, n); }

/* ---- reading a line under the pre-scanner ------------------------------------------------ */

/* One input line as read: the bytes kept (newline included; a leading BOM of the input's
 * first line dropped) and the pre-scan of them. A line the scan refuses at a limit is kept
 * only up to there: the rest is read and dropped, so memory stays bounded by the limits, not
 * by the line. */
typedef struct {
    char *buf;
    size_t len, cap;
    bool refused;  /* the scan refused it (see scan); buf holds what was read up to there */
    ps_jscan scan;
    uint64_t hash; /* sharded: FNV-1a of the raw line without its newline */
} line_in;

enum { LINE_OK = 1, LINE_EOF = 0, LINE_ERROR = -1, LINE_STOPPED = -2, LINE_NOMEM = -3 };

static int read_line(FILE *in, line_in *li, const ps_jscan_limits *jl, bool first,
                     ps_shard_out *so) {
    static const unsigned char BOM[3] = {0xef, 0xbb, 0xbf};
    li->len = 0;
    li->refused = false;
    ps_jscan_init(&li->scan, jl);
    size_t fed = 0;
    bool any = false, bom_checked = !first;
    uint64_t h = PS_SHARD_HASH0;
    for (;;) {
        int c = getc_unlocked(in);
        if (c == EOF) {
            if (ferror(in)) {
                if (errno == EINTR) {
                    clearerr(in);
                    if (g_stop) return LINE_STOPPED;
                    continue;
                }
                return LINE_ERROR;
            }
            break;
        }
        any = true;
        char ch = (char)c;
        if (so) {
            so->input_hash = ps_shard_hash(so->input_hash, &ch, 1);
            if (c != '\n') h = ps_shard_hash(h, &ch, 1);
        }
        if (!li->refused) {
            if (li->len == li->cap) {
                size_t nc = li->cap ? li->cap * 2 : 4096;
                char *nb = realloc(li->buf, nc);
                if (!nb) return LINE_NOMEM;
                li->buf = nb;
                li->cap = nc;
            }
            li->buf[li->len++] = ch;
            if (!bom_checked && (li->len == 3 || c == '\n')) {
                bom_checked = true;
                if (li->len == 3 && !memcmp(li->buf, BOM, 3)) li->len = 0;
            }
            if (bom_checked && (li->len - fed >= 65536 || c == '\n')) {
                ps_jscan_feed(&li->scan, li->buf + fed, li->len - fed, NULL);
                fed = li->len;
                /* a limit stops the line; a line that is not JSON is kept (for jansson's
                 * message) up to the byte limit */
                if (li->scan.what != PS_JSCAN_OK &&
                    (li->scan.what != PS_JSCAN_SYNTAX || (int64_t)li->len > jl->max_bytes))
                    li->refused = true;
            }
        }
        if (c == '\n') break;
    }
    if (!any) return LINE_EOF;
    if (!li->refused && fed < li->len) ps_jscan_feed(&li->scan, li->buf + fed, li->len - fed, NULL);
    if (so) so->lineno++;
    li->hash = h;
    return LINE_OK;
}

/* ---- score ------------------------------------------------------------------------------- */

static const char *SCORE_ABOUT =
    "Reads JSON Lines {\"prompt\": \"text\" | [ids], \"id\": any, \"logprobs\": K} and writes one\n"
    "line per input, in order: {\"id\", \"logprobs\": {tokens, token_logprobs, top_logprobs,\n"
    "text_offset, prompt_offset, token_ids, top_ids}, \"sum_logprob\", \"mean_logprob\",\n"
    "\"perplexity\", \"n_tokens\"}, or {\"id\", \"error\"} (docs/api.md). Blank lines are skipped.\n"
    "Text prompts get BOS as the model says; id lists are verbatim. A line may give\n"
    "{\"context\", \"continuation\"} instead of a prompt (lm-evaluation-harness's\n"
    "loglikelihood: continuation_logprob, is_greedy, continuation_start) and\n"
    "\"logprob_token_ids\": [ids] (token_id_logprobs).\n";

typedef struct {
    ps_cli_loaded *l;
    ps_engine *engine;  /* one worker: lines in input order, max_seqs at a time */
    ps_jsonl_limits lim;
    int32_t chunk;
    int64_t tokens;
    ps_cli_view *view; /* --format table | summary; NULL for JSON Lines */
    bool stats;        /* --stats: every line's job asks for entropy, rank and varentropy */
    const ps_detect_opts *detect; /* --detect (and --min-k), or NULL */
    bool words;        /* --words: every line's job asks for its words (issue 50) */
} score_ctx;

static bool blank(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r' && s[i] != '\n') return false;
    return true;
}

/* One input line of a round (see the loop in ps_cli_score): parsed when read, its job queued
 * with the round's others, its output written in input order. */
typedef struct {
    int64_t lineno;
    uint64_t hash;          /* sharded: the line's hash */
    bool blank;             /* nothing to score (sharded: still a record) */
    ps_jsonl_req req;       /* parsed (also for a blank line: then unused and empty) */
    ps_engine_job *job;     /* NULL: an error line (req.ok false) or blank */
    bool admitted;          /* holds an engine slot */
    ps_status st;           /* the job's failure before it ran (no memory, refused) */
    ps_error err;
} line_slot;

static bool gone_now(void *ctx) {
    (void)ctx;
    return true;
}

/* Parses the line just read into q and makes its job (not yet queued). */
static void line_start(score_ctx *c, const line_in *li, int64_t lineno, line_slot *q) {
    q->lineno = lineno;
    q->hash = li->hash;
    q->job = NULL;
    q->admitted = false;
    q->st = PS_OK;
    ps_error_clear(&q->err);
    memset(&q->req, 0, sizeof q->req);
    q->blank = !li->refused && blank(li->buf, li->len);
    if (q->blank) return;
    ps_status pst = li->refused
                        ? ps_jsonl_refused(li->buf, li->len, lineno, &c->lim, &li->scan, &q->req)
                        : ps_jsonl_parse(li->buf, li->len, lineno, &c->lim, &q->req);
    if (pst != PS_OK) return; /* an error line */
    if (c->detect && q->req.n < 2) {
        q->req.ok = false;
        ps_req_fail(&q->req.err, 400, "prompt", NULL,
                    "line %lld: --detect needs a prompt of at least 2 tokens (one scored), this "
                    "one has %d", (long long)lineno, (int)q->req.n);
        q->req.err.st = PS_ERR_INVALID_ARG;
        return;
    }
    /* the one request path: the line's job to the engine, which scores it (the ids stay the
     * line's: the job borrows them until it is freed); no generation, seed 0 */
    ps_score_params sp = ps_score_default_params();
    sp.k = q->req.k > 0 ? q->req.k : 0;
    sp.max_tokens = 0;
    sp.temperature = 1;
    sp.top_p = 1;
    sp.seed = 0;
    sp.stats = c->stats || c->detect; /* detect reads the entropy and varentropy */
    sp.token_ids = q->req.token_ids;
    sp.n_token_ids = q->req.n_token_ids;
    sp.words = c->words || q->req.words;
    q->job = ps_engine_job_new(1, &sp);
    if (q->job) {
        ps_engine_job_set_prompt(q->job, 0, q->req.ids, q->req.n);
        ps_engine_job_set_continuation(q->job, 0, q->req.continuation_start);
    }
    if (!q->job) {
        q->st = ps_fail(&q->err, PS_ERR_NOMEM, -1, "out of memory");
    } else if (ps_engine_admit(c->engine) != PS_ENGINE_OK) {
        q->st = ps_fail(&q->err, PS_ERR_INTERNAL, -1, "the engine refused the line");
    } else {
        q->admitted = true;
    }
}

/* Queues the jobs of slots[0..n) that are ready, in input order, all at once (so that
 * max_seqs of them form one group of the engine's worker). */
static void lines_submit(score_ctx *c, line_slot *slots, int n) {
    ps_engine_job *jobs[PS_CHUNK];
    int m = 0;
    for (int i = 0; i < n; i++)
        if (slots[i].admitted) jobs[m++] = slots[i].job;
    if (m > 0 && ps_engine_submit_all(c->engine, jobs, m) != PS_ENGINE_OK)
        for (int i = 0; i < n; i++)
            if (slots[i].admitted) {
                slots[i].st = ps_fail(&slots[i].err, PS_ERR_INTERNAL, -1,
                                      "the engine refused the line");
                ps_engine_leave(c->engine);
                slots[i].admitted = false;
            }
}

/* Frees what q holds; with `cancel`, first cancels its job and waits for it. */
static void line_free(score_ctx *c, line_slot *q, bool cancel) {
    if (q->admitted) {
        ps_engine_wait(c->engine, q->job, cancel ? gone_now : stop_requested, NULL);
        ps_engine_leave(c->engine);
        q->admitted = false;
    }
    ps_engine_job_free(q->job); /* and its result */
    q->job = NULL;
    if (!q->blank) ps_jsonl_req_free(&q->req);
}

/* Waits for q's job and writes its output into b (a result or an error line), then frees q.
 * Returns 1 when it was scored, 0 when it was an error line, -1 when a stop signal cancelled
 * it (b is left empty). */
static int line_finish(score_ctx *c, line_slot *q, ps_buf *b) {
    ps_jsonl_req *req = &q->req;
    const ps_score_result *r = NULL;
    if (req->ok) {
        ps_status st = q->st;
        ps_error err = q->err;
        if (q->admitted) {
            ps_engine_wait(c->engine, q->job, stop_requested, NULL);
            ps_engine_leave(c->engine);
            q->admitted = false;
            st = ps_engine_job_status(q->job, &err, NULL);
        }
        if (st == PS_ERR_CANCELLED) {
            line_free(c, q, false);
            return -1;
        }
        if (st != PS_OK) {
            req->ok = false;
            ps_req_fail(&req->err, st == PS_ERR_NOMEM || st == PS_ERR_INTERNAL ? 500 : 400,
                        st == PS_ERR_TOKEN_RANGE || st == PS_ERR_CONTEXT ? "prompt" : NULL,
                        st == PS_ERR_CONTEXT ? "context_length_exceeded" : NULL,
                        "line %lld: %s", (long long)q->lineno, err.message);
            req->err.st = st;
        } else {
            r = ps_engine_job_result(q->job, 0);
        }
    }
    ps_buf det;
    ps_buf_init(&det);
    ps_score_result shown;
    if (req->ok) {
        shown = *r; /* statistics that only --detect asked for are not shown */
        if (!c->stats) shown.entropy = shown.varentropy = NULL, shown.rank = NULL;
        ps_error err;
        if (c->detect && ps_detect_write(&det, c->detect, r, c->l->vocab, req->text,
                                         req->text_len, &err) != PS_OK) {
            req->ok = false;
            ps_req_fail(&req->err, err.code == PS_ERR_NOMEM ? 500 : 400, NULL, NULL,
                        "line %lld: %s", (long long)q->lineno, err.message);
            req->err.st = err.code;
        } else if (c->detect) {
            req->detect_json = det.data;
            req->detect_len = det.len;
        }
    }
    bool ok = req->ok;
    if (ok) {
        if (c->view) ps_cli_view_result(c->view, b, c->l->vocab, req, &shown);
        else ps_jsonl_write_result(b, c->l->vocab, req, &shown);
        c->tokens += req->n;
    } else {
        if (c->view) ps_cli_view_error(c->view, b, req);
        else ps_jsonl_write_error(b, req);
    }
    line_free(c, q, false);
    if (det.oom) b->oom = true;
    ps_buf_free(&det);
    return ok ? 1 : 0;
}

/* Lines of a regular file (for the progress total), or -1. Rewinds. */
static int64_t count_lines(FILE *f) {
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) return -1;
    char buf[1 << 16];
    int64_t n = 0;
    size_t r;
    int last = '\n';
    while ((r = fread(buf, 1, sizeof buf, f)) > 0) {
        for (size_t i = 0; i < r; i++) n += buf[i] == '\n';
        last = buf[r - 1];
    }
    if (last != '\n') n++;
    rewind(f);
    return n;
}

static bool opt_format(const char *cmd, const char *opt, const char *v, void *dst) {
    int *f = dst;
    if (!strcmp(v, "jsonl") || !strcmp(v, "json")) *f = PS_CLI_FORMAT_JSONL;
    else if (!strcmp(v, "table")) *f = PS_CLI_FORMAT_TABLE;
    else if (!strcmp(v, "summary")) *f = PS_CLI_FORMAT_SUMMARY;
    else {
        fprintf(stderr, "promptscore %s: %s wants jsonl, table or summary, got '%s'\n", cmd, opt, v);
        return false;
    }
    return true;
}

typedef struct {
    ps_detect_opts o;
    bool given;
} min_k_spec;

/* --min-k LIST (dst min_k_spec *). */
static bool opt_min_k(const char *cmd, const char *opt, const char *v, void *dst) {
    min_k_spec *m = dst;
    char why[200];
    if (!ps_detect_parse_k(v, &m->o, why, sizeof why)) {
        fprintf(stderr, "promptscore %s: %s\n", cmd, why);
        return false;
    }
    m->given = true;
    return true;
}

typedef struct {
    int64_t i, n;
    bool given;
} shard_spec;

static bool opt_shard(const char *cmd, const char *opt, const char *v, void *dst) {
    shard_spec *sh = dst;
    char why[200];
    if (!ps_shard_parse_spec(v, &sh->i, &sh->n, why, sizeof why)) {
        fprintf(stderr, "promptscore %s: %s\n", cmd, why);
        return false;
    }
    sh->given = true;
    return true;
}

/* ---- loading the compared model ---------------------------------------------------------- */

int ps_cli_load_compare(const char *cmd, const char *path, const ps_cli_model_opts *o,
                        const ps_cli_loaded *base, ps_model **out) {
    *out = NULL;
    ps_model_params mp = ps_model_default_params();
    mp.n_ctx = base->info.n_ctx; /* the base's context, so both hold the same prompts */
    mp.no_repack = o->no_repack;
    ps_error err;
    ps_error_clear(&err);
    ps_status st = ps_model_load(path, &mp, out, &err);
    if (st != PS_OK) {
        fprintf(stderr, "promptscore %s: --compare: cannot load %s: %s\n", cmd, path,
                err.message[0] ? err.message : ps_status_str(st));
        return 1;
    }
    ps_model_info info;
    ps_model_get_info(*out, &info);
    if (info.vocab_only) {
        fprintf(stderr, "promptscore %s: --compare: %s has no tensors (a vocabulary only)\n", cmd,
                path);
    } else if ((st = ps_vocab_same(base->vocab, ps_model_vocab(*out), &err)) != PS_OK) {
        fprintf(stderr, "promptscore %s: --compare: %s (%s) and %s (%s) cannot be compared: %s\n",
                cmd, base->info.file, base->info.name, path, info.name, err.message);
    } else {
        /* checked the same as the base's: the compared model needs no tokenizer of its own */
        ps_model_drop_vocab(*out);
        return 0;
    }
    ps_model_free(*out);
    *out = NULL;
    return 2;
}

/* ---- the score subcommand, phase by phase ------------------------------------------------ */

/* The command line. */
typedef struct {
    ps_cli_model_opts o;
    const char *in_path, *out_path;
    const char *token_ids;  /* --token-ids 1,2,3 (read in score_setup, against the vocabulary) */
    int32_t k, max_seqs;
    int format;
    bool no_bos, strict, resume, no_special, stats, detect;
    min_k_spec min_k;
    bool words; /* --words */
    int64_t max_line;
    shard_spec shard;
    bool sharded;
    ps_cli_compares cmp; /* --compare: the paths (handed to score_run by score_setup) */
} score_args;

/* What a run holds; score_close frees whatever is set. */
typedef struct {
    const char *cmd;
    FILE *in, *out;
    ps_cli_loaded l;
    bool loaded;
    ps_cli_compares cmp; /* the --compare paths and, once loaded, their models */
    ps_engine *engine;
    ps_shard_out so;
    int64_t total; /* lines to score (progress), or -1 */
    int32_t *token_ids; /* --token-ids, read */
    int32_t n_token_ids;
} score_run;

static void score_close(score_run *r) {
    ps_engine_free(r->engine);
    ps_cli_compares_free(&r->cmp);
    if (r->loaded) ps_cli_unload(&r->l);
    if (r->in && r->in != stdin) fclose(r->in);
    ps_free(r->token_ids);
    r->token_ids = NULL;
    r->n_token_ids = 0;
    r->engine = NULL;
    r->loaded = false;
    r->in = NULL;
}

/* Parses the command line into a. Returns -1 to go on, else the exit status. */
static int score_parse(int argc, char **argv, score_args *a) {
    const char *cmd = argv[0];
    memset(a, 0, sizeof *a);
    a->o = (ps_cli_model_opts){.chunk = PS_CHUNK, .cache_mb = -1, .want_cache = true};
    a->k = 5;
    a->max_seqs = 1;
    a->format = PS_CLI_FORMAT_JSONL;
    a->max_line = PS_JSONL_MAX_LINE_BYTES;
    a->shard = (shard_spec){0, 1, false};
    a->min_k.o = ps_detect_default_opts();
    ps_cli_model_opts *o = &a->o;
    const ps_cli_opt model_opts[] = {
        PS_CLI_OPTS_MODEL(o),
        PS_CLI_OPT_CTX(o, "context length (default: the model's)"),
        PS_CLI_OPT_THREADS(o),
        PS_CLI_OPT_CHUNK(o),
        PS_CLI_OPT_CACHE(o),
        PS_CLI_OPT_ACT(o),
        PS_CLI_OPT_KV_TYPE(o),
        PS_CLI_OPT_REPACK(o),
        {0}};
    const ps_cli_opt score_opts[] = {
        {"-i, --input", "FILE", "input JSON Lines (default stdin)", PS_CLI_STR, &a->in_path},
        {"-o, --output", "FILE", "output (default stdout)", PS_CLI_STR, &a->out_path},
        {"-k, --logprobs, --top-k", "K", "alternatives per position when a line gives none\n"
         "(default 5)", PS_CLI_I32, &a->k, 0, INT32_MAX},
        {"--format", "FMT", "jsonl (default): the lines above; table: one row per token\n"
         "(logprob, rank, top 3; coloured on a terminal); summary: one\n"
         "line per prompt (tokens, NLL, perplexity, most surprising)",
         PS_CLI_FN, &a->format, 0, 0, opt_format},
        {"--stats", NULL, "add \"entropy\" (nats, of each position's whole distribution),\n"
         "\"varentropy\" (the variance of log p under p, nats^2) and \"rank\"\n"
         "(1-based rank of the scored token, ties by ascending id) arrays to\n"
         "the logprobs object, aligned with token_logprobs",
         PS_CLI_FLAG, &a->stats},
        {"--detect", NULL, "add a \"detect\" object to each line: contamination scores\n"
         "min_k and min_k_pp (Min-K% Prob, Min-K%++) per --min-k percentage,\n"
         "zlib_ratio, and with --compare ref_ratio (docs/api.md, \"Contamination\n"
         "scores\"); a line of one token is an error line", PS_CLI_FLAG, &a->detect},
        {"--min-k", "LIST", "with --detect: the percentages of min_k / min_k_pp, e.g.\n"
         "10,20,30 (integers 1 to 100; default 20)", PS_CLI_FN, &a->min_k, 0, 0, opt_min_k},
        {"--words", NULL, "add a \"words\" array to every line: each word of the text (split\n"
         "at whitespace) with its offset, n_tokens and surprisal in nats\n"
         "and bits, corrected for word-start tokens (Pimentel & Meister,\n"
         "EMNLP 2024), and the naive sum; a line may ask with \"words\": true.\n"
         "Needs a tokenizer that marks word starts (\u2581 or \u0120); no\n"
         "prefix cache for these lines (docs/api.md, \"Words\")",
         PS_CLI_FLAG, &a->words},
        {"--compare", "FILE", "a second GGUF with the same vocabulary, run over the same tokens\n"
         "chunk by chunk: adds \"kld\" (KL(model || FILE), nats, whole\n"
         "vocabulary), \"same_top1\" (0/1) and \"dp\" (p_FILE - p_model of the\n"
         "scored token) to the logprobs object, and kld_mean and\n"
         "same_top1_pct to each line (one line at a time, no prefix cache).\n"
         "Repeat it (or give a comma list) to compare several models in one\n"
         "pass (the -m model runs once): each line then gets \"compare\", an\n"
         "array in the order given of {model, kld, same_top1, dp, kld_mean,\n"
         "same_top1_pct}; --format jsonl only",
         PS_CLI_FN, &a->cmp, 0, 0, ps_cli_opt_compare},
        {"--token-ids", "IDS", "named tokens for every line that names none (its own\n"
         "\"logprob_token_ids\" wins): comma-separated ids; adds\n"
         "\"token_id_logprobs\" (each position's logprobs of these ids, in\n"
         "this order, whatever their rank) to the logprobs object",
         PS_CLI_STR, &a->token_ids},
        {"--no-bos", NULL, "do not add BOS to text prompts (id prompts are always verbatim)",
         PS_CLI_FLAG, &a->no_bos},
        {"--no-parse-special", NULL, "special-token text in text prompts (</s>, <|endoftext|>)\n"
         "stays plain text; by default it is that token, as the server's\n"
         "\"parse_special\": true", PS_CLI_FLAG, &a->no_special},
        {"--strict", NULL, "exit 1 when any line was an error", PS_CLI_FLAG, &a->strict},
        {"--max-line-bytes", "N", "a longer input line is an error line (line_too_long), read\n"
         "past without keeping it (default 16777216, >= 64)", PS_CLI_I64, &a->max_line, 64,
         (int64_t)1 << 40},
        {"--max-seqs", "N", "read up to N lines ahead and score their prompts together, in\n"
         "shared forward passes (lines sharing a prefix compute it once\n"
         "with the prefix cache); output stays in input order and every\n"
         "score's bits are those of --max-seqs 1 (default 1: one line at a\n"
         "time, each written before the next is read; serve's default is 16)", PS_CLI_I32,
         &a->max_seqs, 1, PS_CHUNK},
        PS_CLI_OPT_PROGRESS(o),
        {"--shard", "I/N", "score only the lines L with (L - 1) mod N == I (0 <= I < N), each\n"
         "tagged with its line number and a hash of the input line, between\n"
         "a header and an end record; `promptscore merge` restores input\n"
         "order. Modulo, not ranges: no counting pass, stdin works, and a\n"
         "sorted corpus spreads evenly over the shards", PS_CLI_FN, &a->shard, 0, 0, opt_shard},
        {"--resume", NULL, "append to the -o file of an earlier (killed) run of this shard,\n"
         "skipping the lines it holds after checking each against the input\n"
         "(a file that does not match: exit 2, left untouched); a half line\n"
         "at its end is cut off; a missing or empty file starts afresh.\n"
         "Alone it means --shard 0/1", PS_CLI_FLAG, &a->resume},
        {0}};
    const ps_cli_opt *const tables[] = {model_opts, score_opts, NULL};
    const ps_cli_cmd c = {"score", "-m MODEL.gguf [-i in.jsonl] [-o out.jsonl] [options]",
                          SCORE_ABOUT, tables};
    int pr_rc = ps_cli_parse(&c, argc, argv);
    if (pr_rc >= 0) return pr_rc;
    a->sharded = a->shard.given || a->resume;
    if (a->min_k.given && !a->detect) {
        fprintf(stderr, "promptscore %s: --min-k needs --detect\n", cmd);
        return 2;
    }
    if (a->resume && (!a->out_path || !strcmp(a->out_path, "-"))) {
        fprintf(stderr, "promptscore %s: --resume needs the output file (-o FILE)\n", cmd);
        return 2;
    }
    if (a->sharded && a->format != PS_CLI_FORMAT_JSONL) {
        fprintf(stderr, "promptscore %s: --shard and --resume write JSON Lines (no --format)\n",
                cmd);
        return 2;
    }
    if (a->cmp.n > 1 && a->format != PS_CLI_FORMAT_JSONL) {
        fprintf(stderr, "promptscore %s: several --compare models write JSON Lines (no "
                        "--format)\n", cmd);
        return 2;
    }
    if (a->cmp.n) {
        a->o.cache_mb = 0; /* compared scores run without a prefix cache, one line at a time */
        a->max_seqs = 1;
    }
    return -1;
}

/* --token-ids "1,2,3" into r->token_ids: each an id in [0, n_vocab), at most n_vocab of them.
 * Returns 0 or 2 (a usage error, said on stderr). */
static int read_token_ids(const char *cmd, const char *arg, int32_t n_vocab, score_run *r) {
    size_t n = 1;
    for (const char *p = arg; *p; p++) n += *p == ',';
    if (n > (size_t)n_vocab) {
        fprintf(stderr, "promptscore %s: --token-ids names %zu ids; at most the vocabulary size "
                "%d\n", cmd, n, n_vocab);
        return 2;
    }
    r->token_ids = ps_malloc(n * sizeof *r->token_ids);
    if (!r->token_ids) {
        fprintf(stderr, "promptscore %s: out of memory\n", cmd);
        return 1;
    }
    const char *p = arg;
    for (size_t i = 0; i < n; i++) {
        char *end;
        errno = 0;
        long long v = strtoll(p, &end, 10);
        if (end == p || errno || (*end && *end != ',')) {
            fprintf(stderr, "promptscore %s: --token-ids: entry %zu of \"%s\" is not an integer "
                    "(give ids like 1,2,3)\n", cmd, i, arg);
            return 2;
        }
        if (v < 0 || v >= n_vocab) {
            fprintf(stderr, "promptscore %s: --token-ids: %lld (entry %zu) is not a token id: the "
                    "vocabulary has %d tokens (ids 0..%d)\n", cmd, v, i, n_vocab, n_vocab - 1);
            return 2;
        }
        r->token_ids[i] = (int32_t)v;
        r->n_token_ids = (int32_t)i + 1;
        p = *end ? end + 1 : end;
    }
    return 0;
}

/* Opens the input, loads the model (and the compared one) and starts the engine. Returns 0
 * or the exit status. */
static int score_setup(const score_args *a, score_run *r) {
    const char *cmd = r->cmd;
    r->cmp = a->cmp; /* score_close frees the paths and the models */
    r->in = stdin;
    if (a->in_path && strcmp(a->in_path, "-") && !(r->in = fopen(a->in_path, "rb"))) {
        fprintf(stderr, "promptscore %s: cannot open %s: %s\n", cmd, a->in_path, strerror(errno));
        r->in = NULL;
        return 1;
    }
    ps_cli_model_opts o = a->o;
    o.no_session = true; /* the engine's worker holds the session */
    int lrc = ps_cli_load(cmd, &o, false, &r->l);
    if (lrc) return lrc;
    r->loaded = true;
    if (r->cmp.n) {
        lrc = ps_cli_load_compares(cmd, &a->o, &r->l, &r->cmp);
        if (lrc) return lrc;
    }
    if (a->words) { /* a tokenizer without word marks: refused before any line */
        uint8_t *mask = NULL;
        ps_error werr;
        if (ps_words_mask(r->l.vocab, &mask, &werr) != PS_OK) {
            fprintf(stderr, "promptscore %s: --words: %s\n", cmd, werr.message);
            return 2;
        }
        ps_free(mask);
    }
    ps_engine_params ep = ps_engine_default_params();
    ep.n_threads = a->o.threads;
    ep.queue = a->max_seqs;
    ep.max_seqs = a->max_seqs;
    ep.chunk = a->o.chunk > 0 ? a->o.chunk : PS_CHUNK;
    ep.act = a->o.act;
    ep.kv_type = a->o.kv_type;
    ep.cache = r->l.cache;
    if (r->cmp.n == 1) { /* one: as it always was */
        ep.compare = r->cmp.models[0];
    } else if (r->cmp.n > 1) {
        ep.compares = (const ps_model *const *)r->cmp.models;
        ep.n_compares = r->cmp.n;
    }
    ps_error err;
    ps_error_clear(&err);
    if (ps_engine_create(r->l.model, &ep, &r->engine, &err) != PS_OK) {
        fprintf(stderr, "promptscore %s: cannot create a session of %d positions: %s\n", cmd,
                r->l.info.n_ctx, err.message);
        r->engine = NULL;
        return 1;
    }
    if (a->k > r->l.info.n_vocab) {
        fprintf(stderr, "promptscore %s: --logprobs %d exceeds the vocabulary size %d\n", cmd,
                a->k, r->l.info.n_vocab);
        return 2;
    }
    if (a->token_ids) return read_token_ids(cmd, a->token_ids, r->l.info.n_vocab, r);
    return 0;
}

/* Opens the output: a shard file (checked and resumed) or -o / stdout. Returns -1 to go on, 0
 * when a resumed shard is complete already, else the exit status. */
static int score_open_output(const score_args *a, score_run *r) {
    const char *cmd = r->cmd;
    const ps_cli_loaded *l = &r->l;
    const int64_t shard_i = a->shard.i, shard_n = a->shard.n;
    r->so = (ps_shard_out){.fd = -1};
    r->out = stdout;
    if (!a->sharded) {
        if (a->out_path && strcmp(a->out_path, "-") && !(r->out = fopen(a->out_path, "wb"))) {
            fprintf(stderr, "promptscore %s: cannot create %s: %s\n", cmd, a->out_path,
                    strerror(errno));
            r->out = NULL;
            return 1;
        }
        return -1;
    }
    /* everything the plain lines depend on, so --resume and merge refuse a mix */
    char config[256], arch[32], tids[40] = ""; /* --token-ids: their hash */
    if (r->n_token_ids > 0)
        snprintf(tids, sizeof tids, " tids=%016llx",
                 (unsigned long long)ps_fnv1a64(PS_FNV1A64_INIT, r->token_ids,
                                                (size_t)r->n_token_ids * sizeof *r->token_ids));
    snprintf(arch, sizeof arch, "%s", l->info.arch);
    for (char *p = arch; *p; p++)
        if (*p == '"' || *p == '\\' || (unsigned char)*p < 0x20) *p = '_';
    snprintf(config, sizeof config,
             "v1 k=%d chunk=%d act=%s bos=%d special=%d ctx=%d arch=%s bytes=%lld vocab=%d "
             "layers=%d embd=%d%s%s%s%s%s",
             a->k, a->o.chunk, a->o.act == PS_ACT_F32 ? "f32" : "native", !a->no_bos,
             !a->no_special, l->info.n_ctx, arch, (long long)l->info.file_bytes, l->info.n_vocab,
             l->info.n_layer, l->info.n_embd, a->o.kv_type != PS_KV_F32 ? " kv=" : "",
             a->o.kv_type != PS_KV_F32 ? ps_kv_type_name(a->o.kv_type) : "",
             a->stats ? " stats=1" : "", tids, a->words ? " words=1" : "");
    char why[1024];
    int src = ps_shard_open(a->out_path, shard_i, shard_n, config, a->resume, r->in, &r->so, why,
                            sizeof why);
    if (src != 0) {
        fprintf(stderr, "promptscore %s: %s%s\n", cmd, a->resume ? "--resume: " : "", why);
        return src;
    }
    const ps_shard_out *so = &r->so;
    if (r->total > shard_i) r->total = (r->total - shard_i + shard_n - 1) / shard_n - so->kept;
    else if (r->total > 0) r->total = 0;
    if (so->kept > 0 || so->cut)
        fprintf(stderr, "promptscore %s: --resume: %s holds %lld lines of shard %lld/%lld "
                        "(input lines 1..%lld checked)%s%s\n", cmd, a->out_path,
                (long long)so->kept, (long long)shard_i, (long long)shard_n,
                (long long)so->lineno, so->cut ? "; a half-written last line was cut off" : "",
                so->complete ? "; it is complete" : "");
    if (so->complete) {
        ps_shard_close(&r->so);
        return 0;
    }
    return -1;
}

/* The loop's state: counts, buffers, where output goes. */
typedef struct {
    score_ctx sc;
    ps_buf b, pending;  /* one line's output; output waiting for write(2) */
    int out_fd;
    bool flush_each;    /* a pipe or terminal: every line goes out at once */
    int64_t lineno, done, errors;
    bool read_failed;
    int rc;
} score_loop;

/* Writes one finished slot (or skips a blank one). Returns false when the run must stop
 * (a stop signal while scoring, a failed write, no memory). */
static bool score_emit(const score_args *a, score_run *r, score_loop *lp, line_slot *q,
                       ps_cli_progress *pr) {
    const char *cmd = r->cmd;
    if (q->blank) {
        if (r->total > 0) r->total--;
        if (a->sharded && !ps_shard_write(&r->so, q->lineno, q->hash, NULL, 0)) {
            fprintf(stderr, "promptscore %s: write failed: %s\n", cmd, strerror(errno));
            lp->rc = 1;
            return false;
        }
        return true;
    }
    ps_buf_reset(&lp->b);
    const int64_t ln = q->lineno;
    const uint64_t lh = q->hash;
    int sr = line_finish(&lp->sc, q, &lp->b);
    if (sr < 0) return false; /* stopped while scoring: the line is not written */
    if (sr == 0) lp->errors++;
    lp->done++;
    if (lp->b.oom) {
        fprintf(stderr, "promptscore %s: out of memory writing line %lld\n", cmd, (long long)ln);
        lp->rc = 1;
        return false;
    }
    bool wok;
    if (a->sharded) {
        wok = ps_shard_write(&r->so, ln, lh, lp->b.data, lp->b.len);
    } else {
        ps_buf_append(&lp->pending, lp->b.data, lp->b.len);
        wok = !lp->pending.oom;
        if (wok && (lp->flush_each || lp->pending.len >= 65536)) {
            wok = write_all(lp->out_fd, lp->pending.data, lp->pending.len);
            ps_buf_reset(&lp->pending);
        }
    }
    if (!wok) {
        fprintf(stderr, "promptscore %s: write failed: %s\n", cmd, strerror(errno));
        lp->rc = 1;
        return false;
    }
    ps_cli_progress_show(pr, "prompts", lp->done, r->total, lp->sc.tokens, false);
    return true;
}

/* Rounds of up to max_seqs lines: each parsed as it is read, their jobs queued at once (the
 * engine's worker scores them in shared forward passes), then waited for and written in
 * input order; --max-seqs 1 is one line at a time. */
static void score_lines(const score_args *a, score_run *r, score_loop *lp, ps_cli_progress *pr) {
    const char *cmd = r->cmd;
    ps_jscan_limits jl;
    ps_jsonl_scan_limits(&lp->sc.lim, &jl);
    line_in li = {0};
    line_slot *slots = ps_calloc((size_t)a->max_seqs, sizeof *slots);
    if (!slots) {
        fprintf(stderr, "promptscore %s: out of memory\n", cmd);
        lp->rc = 1;
    }
    bool eof = false, halt = false;
    while (slots && !eof && !halt && !g_stop) {
        int n = 0;
        while (n < a->max_seqs && !g_stop) {
            int got = read_line(r->in, &li, &jl, lp->lineno == 0, a->sharded ? &r->so : NULL);
            if (got == LINE_EOF) {
                eof = true;
                break;
            }
            if (got == LINE_STOPPED || got == LINE_ERROR) {
                lp->read_failed = got == LINE_ERROR;
                halt = true;
                break;
            }
            if (got == LINE_NOMEM) {
                fprintf(stderr, "promptscore %s: out of memory reading line %lld\n", cmd,
                        (long long)lp->lineno + 1);
                lp->rc = 1;
                halt = true;
                break;
            }
            lp->lineno++;
            if (a->sharded && !ps_shard_mine(&r->so, lp->lineno)) continue;
            line_start(&lp->sc, &li, lp->lineno, &slots[n++]);
        }
        lines_submit(&lp->sc, slots, n);
        bool drop = false; /* after a stop or a failure: the rest is cancelled, not written */
        for (int i = 0; i < n; i++) {
            if (drop) line_free(&lp->sc, &slots[i], true);
            else if (!score_emit(a, r, lp, &slots[i], pr)) drop = halt = true;
        }
    }
    ps_free(slots);
    free(li.buf);
}

/* The end of a run: the shard's end record, the view's footer, the last output, the summary
 * line on stderr. Returns the exit status. */
static int score_end(const score_args *a, score_run *r, score_loop *lp, ps_cli_progress *pr) {
    const char *cmd = r->cmd;
    int rc = lp->rc;
    if (lp->read_failed) {
        fprintf(stderr, "promptscore %s: read failed after line %lld: %s\n", cmd,
                (long long)lp->lineno, strerror(errno));
        rc = 1;
    }
    const int stop_sig = g_stop;
    ps_cli_progress_end(pr);
    if (a->sharded && rc == 0 && !stop_sig && !ps_shard_write_end(&r->so)) {
        fprintf(stderr, "promptscore %s: write failed: %s\n", cmd, strerror(errno));
        rc = 1;
    }
    if (a->sharded && !ps_shard_close(&r->so) && rc == 0) {
        fprintf(stderr, "promptscore %s: closing %s failed: %s\n", cmd, a->out_path,
                strerror(errno));
        rc = 1;
    }
    if (lp->sc.view && rc == 0) {
        ps_buf_reset(&lp->b);
        ps_cli_view_end(lp->sc.view, &lp->b);
        ps_buf_append(&lp->pending, lp->b.data, lp->b.len);
    }
    if (lp->pending.oom ||
        (lp->pending.len && !write_all(lp->out_fd, lp->pending.data, lp->pending.len))) {
        fprintf(stderr, "promptscore %s: write failed: %s\n", cmd, strerror(errno));
        rc = 1;
    }
    double el = ps_now_s() - pr->t0;
    fprintf(stderr, "promptscore %s: %lld prompts, %lld tokens, %.0f tokens/s, %lld errors, %.2fs\n",
            cmd, (long long)lp->done, (long long)lp->sc.tokens,
            el > 0 ? (double)lp->sc.tokens / el : 0.0, (long long)lp->errors, el);
    if (stop_sig) {
        fprintf(stderr, "promptscore %s: stopped by %s after input line %lld; every line written "
                        "is whole%s\n", cmd, stop_sig == SIGINT ? "SIGINT" : "SIGTERM",
                (long long)lp->lineno, a->sharded ? " (--resume continues from there)" : "");
        if (rc == 0) rc = 128 + stop_sig;
    }
    if (rc == 0 && a->strict && lp->errors > 0) rc = 1;
    return rc;
}

int ps_cli_score(int argc, char **argv) {
    score_args a;
    int rc = score_parse(argc, argv, &a);
    if (rc >= 0) {
        ps_cli_compares_free(&a.cmp);
        return rc;
    }
    score_run r;
    memset(&r, 0, sizeof r);
    r.cmd = argv[0];
    r.total = -1;
    if ((rc = score_setup(&a, &r)) != 0) {
        score_close(&r);
        return rc;
    }
    ps_cli_progress pr;
    ps_cli_progress_start(&pr, a.o.progress);
    r.total = pr.on ? count_lines(r.in) : -1;
    if ((rc = score_open_output(&a, &r)) >= 0) {
        score_close(&r);
        return rc;
    }
    pr.t0 = pr.last = ps_now_s();
    /* from here on a stop signal ends the run after the line being written (before: the
     * default action, so loading stays interruptible) */
    g_stop = 0;
    install_stop_handlers();

    /* output goes out with write(2) in whole lines: buffered here up to 64 KiB for a file,
     * line by line for a pipe or terminal (streaming consumers) */
    if (!a.sharded && fflush(r.out) != 0) {
        fprintf(stderr, "promptscore %s: write failed: %s\n", r.cmd, strerror(errno));
        score_close(&r);
        if (r.out != stdout) fclose(r.out);
        return 1;
    }
    score_loop lp;
    memset(&lp, 0, sizeof lp);
    lp.out_fd = fileno(r.out);
    struct stat osb;
    lp.flush_each = fstat(lp.out_fd, &osb) != 0 || !S_ISREG(osb.st_mode);
    ps_cli_view view;
    int32_t k = a.k;
    lp.sc = (score_ctx){.l = &r.l, .engine = r.engine, .chunk = a.o.chunk, .stats = a.stats,
                        .detect = a.detect ? &a.min_k.o : NULL, .words = a.words};
    if (a.format != PS_CLI_FORMAT_JSONL) {
        ps_cli_view_init(&view, a.format, isatty(lp.out_fd) && !getenv("NO_COLOR"));
        lp.sc.view = &view;
        if (k < 3 && a.format == PS_CLI_FORMAT_TABLE) k = 3; /* the table shows the top 3 */
    }
    lp.sc.lim = (ps_jsonl_limits){.vocab = r.l.vocab, .n_vocab = r.l.info.n_vocab,
                                  .n_ctx = r.l.info.n_ctx, .default_k = k, .add_bos = !a.no_bos,
                                  .max_line_bytes = a.max_line, .no_parse_special = a.no_special,
                                  .keep_text = a.detect,
                                  .token_ids = r.token_ids, .n_token_ids = r.n_token_ids};
    lp.lineno = r.so.lineno;
    ps_buf_init(&lp.b);
    ps_buf_init(&lp.pending);
    score_lines(&a, &r, &lp, &pr);
    rc = score_end(&a, &r, &lp, &pr);
    ps_buf_free(&lp.b);
    ps_buf_free(&lp.pending);
    score_close(&r);
    if (r.out != stdout && fclose(r.out) != 0 && rc == 0) {
        fprintf(stderr, "promptscore %s: closing %s failed: %s\n", r.cmd, a.out_path,
                strerror(errno));
        rc = 1;
    }
    return rc;
}
