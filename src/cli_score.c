/*
 * cli_score.c — `promptscore score` (JSON Lines in, one scored line out per input line) and
 * `promptscore perplexity` (sliding-window perplexity of a text file).
 *
 * score streams: one line is read (getline, any length), parsed with jansson, tokenised (text
 * prompts get BOS as the model says unless --no-bos; id lists are verbatim), scored with
 * ps_score_tokens and written as {"id", "logprobs" (the server's object, prompt entries only),
 * "sum_logprob", "n_tokens"} before the next line is read, so memory stays bounded by the
 * longest line. A bad line becomes {"id", "error": {...}} and the run goes on (--strict makes
 * the exit status 1 at the end). Progress goes to stderr when it is a terminal (or with
 * --progress); one summary line always ends the run on stderr.
 *
 * --shard I/N scores only the input lines whose number L (from 1) has (L - 1) mod N == I and
 * writes them tagged with L and the line's hash (cli_shard.h); --resume appends to such an
 * output after checking it against the input, skipping the lines it holds. Shards are taken
 * modulo N, not as contiguous ranges: a task streams its input without counting it first
 * (stdin works), and a corpus sorted by length or source spreads evenly over the tasks.
 * `promptscore merge` (cli_merge.c) puts the shards back in input order as plain lines.
 *
 * perplexity scores windows of --ctx tokens advancing by --stride: the first window scores
 * all its tokens, each later one only the tokens no window has scored yet, so every token is
 * scored exactly once with as much context as the window allows.
 */
#include "cli.h"
#include "cli_shard.h"
#include "download.h"
#include "jsonl.h"
#include "vocab.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- shared: options, model loading, progress ------------------------------------------- */

typedef struct {
    const char *model;
    const char *hf;
    int32_t threads;
    int32_t n_ctx;
    int32_t chunk;
    ps_act act;     /* --act */
    bool no_repack; /* --no-repack */
    bool progress;  /* --progress: even when stderr is not a terminal */
} common_opts;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static bool parse_i32(const char *s, int32_t lo, int32_t hi, int32_t *out) {
    if (!s || !*s) return false;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || v < lo || v > hi) return false;
    *out = (int32_t)v;
    return true;
}

/* Parses an option shared by score and perplexity at argv[*i]. 1: consumed, 0: not ours,
 * -1: bad value (message printed). */
static int common_opt(const char *cmd, int argc, char **argv, int *i, common_opts *o) {
    const char *a = argv[*i];
    const char *v = *i + 1 < argc ? argv[*i + 1] : NULL;
    int32_t *dst = NULL;
    int32_t lo = 0, hi = 0;
    if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
        if (!v) goto missing;
        o->model = v;
        (*i)++;
        return 1;
    }
    if (!strcmp(a, "--hf")) {
        if (!v) goto missing;
        o->hf = v;
        (*i)++;
        return 1;
    }
    if (!strcmp(a, "--progress")) {
        o->progress = true;
        return 1;
    }
    if (!strcmp(a, "--no-repack")) {
        o->no_repack = true;
        return 1;
    }
    if (!strcmp(a, "--act")) {
        if (!ps_cli_parse_act(cmd, v, &o->act)) return -1;
        (*i)++;
        return 1;
    }
    if (!strcmp(a, "-t") || !strcmp(a, "--threads")) dst = &o->threads, lo = 0, hi = 1024;
    else if (!strcmp(a, "--ctx") || !strcmp(a, "-c")) dst = &o->n_ctx, lo = 1, hi = INT32_MAX;
    else if (!strcmp(a, "--chunk")) dst = &o->chunk, lo = 1, hi = PS_CHUNK;
    else return 0;
    if (!v) goto missing;
    if (!parse_i32(v, lo, hi, dst)) {
        fprintf(stderr, "promptscore %s: %s wants an integer in %d..%d, got '%s'\n", cmd, a, lo,
                hi, v);
        return -1;
    }
    (*i)++;
    return 1;
missing:
    fprintf(stderr, "promptscore %s: %s needs a value\n", cmd, a);
    return -1;
}

static void dl_note(void *ctx, const char *msg) { fprintf(stderr, "%s: %s\n", (const char *)ctx, msg); }

static double g_dl_last;
static void dl_progress(void *ctx, int64_t done, int64_t total) {
    double t = now_s();
    if (t - g_dl_last < 0.25 && done != total) return;
    g_dl_last = t;
    if (total > 0)
        fprintf(stderr, "\r%s: downloading %.1f / %.1f MB (%.0f%%)  ", (const char *)ctx,
                (double)done / 1e6, (double)total / 1e6, 100.0 * (double)done / (double)total);
    else
        fprintf(stderr, "\r%s: downloading %.1f MB  ", (const char *)ctx, (double)done / 1e6);
    if (done == total) fputc('\n', stderr);
}

typedef struct {
    ps_model *model;
    ps_session *session;
    ps_pool *pool;
    const ps_vocab *vocab;
    ps_model_info info;
    char *path; /* from --hf */
} loaded;

static void unload(loaded *l) {
    ps_session_free(l->session);
    ps_model_free(l->model);
    ps_pool_free(l->pool);
    ps_free(l->path);
    memset(l, 0, sizeof *l);
}

/* -m or --hf -> model, pool, session (n_batch = chunk). Prints the error; false on failure. */
static bool load(const char *cmd, const common_opts *o, loaded *l) {
    memset(l, 0, sizeof *l);
    ps_error err;
    ps_error_clear(&err);
    const char *path = o->model;
    if (o->hf) {
        if (o->model) {
            fprintf(stderr, "promptscore %s: give -m or --hf, not both\n", cmd);
            return false;
        }
        char tag[64];
        snprintf(tag, sizeof tag, "promptscore %s", cmd);
        ps_download_params dp = ps_download_default_params();
        dp.note = dl_note;
        dp.progress = isatty(STDERR_FILENO) || o->progress ? dl_progress : NULL;
        dp.ctx = tag;
        if (ps_hf_resolve(o->hf, &dp, &l->path, &err) != PS_OK) {
            fprintf(stderr, "promptscore %s: --hf %s: %s\n", cmd, o->hf, err.message);
            return false;
        }
        path = l->path;
    }
    if (!path) {
        fprintf(stderr, "promptscore %s: no model: give -m MODEL.gguf or --hf REPO[:FILE]\n", cmd);
        return false;
    }
    ps_model_params mp = ps_model_default_params();
    mp.n_ctx = o->n_ctx;
    mp.no_repack = o->no_repack;
    ps_status st = ps_model_load(path, &mp, &l->model, &err);
    if (st != PS_OK) {
        fprintf(stderr, "promptscore %s: cannot load %s: %s\n", cmd, path, err.message);
        unload(l);
        return false;
    }
    ps_model_get_info(l->model, &l->info);
    l->vocab = ps_model_vocab(l->model);
    if ((st = ps_pool_create(o->threads, &l->pool)) != PS_OK) {
        fprintf(stderr, "promptscore %s: cannot start %d threads: %s\n", cmd, o->threads,
                ps_status_str(st));
        unload(l);
        return false;
    }
    ps_session_params sp = ps_session_default_params();
    sp.n_ctx = l->info.n_ctx;
    sp.n_batch = o->chunk;
    sp.pool = l->pool;
    sp.act = o->act;
    if ((st = ps_session_create(l->model, &sp, &l->session, &err)) != PS_OK) {
        fprintf(stderr, "promptscore %s: cannot create a session of %d positions: %s\n", cmd,
                sp.n_ctx, err.message);
        unload(l);
        return false;
    }
    return true;
}

/* Progress: a \r-rewritten line on a terminal, a line every few seconds otherwise. */
typedef struct {
    bool on, tty;
    double t0, last;
} progress;

static void progress_show(progress *p, const char *what, int64_t done, int64_t total,
                          int64_t tokens, bool force) {
    if (!p->on) return;
    double t = now_s();
    if (!force && t - p->last < (p->tty ? 0.2 : 5.0)) return;
    p->last = t;
    double el = t - p->t0;
    double tps = el > 0 ? (double)tokens / el : 0.0;
    char eta[48] = "";
    if (total > 0 && done > 0 && done < total)
        snprintf(eta, sizeof eta, ", ETA %.0fs", el / (double)done * (double)(total - done));
    if (total > 0)
        fprintf(stderr, "%s%lld/%lld %s, %lld tokens, %.0f tok/s, %.1fs%s%s", p->tty ? "\r" : "",
                (long long)done, (long long)total, what, (long long)tokens, tps, el, eta,
                p->tty ? "\033[K" : "\n");
    else
        fprintf(stderr, "%s%lld %s, %lld tokens, %.0f tok/s, %.1fs%s", p->tty ? "\r" : "",
                (long long)done, what, (long long)tokens, tps, el, p->tty ? "\033[K" : "\n");
}

static void progress_end(progress *p) {
    if (p->on && p->tty) fputs("\r\033[K", stderr);
}

/* ---- score ------------------------------------------------------------------------------- */

static const char *SCORE_USAGE =
    "usage: promptscore score -m MODEL.gguf [-i in.jsonl] [-o out.jsonl] [options]\n"
    "\n"
    "Reads JSON Lines {\"prompt\": \"text\" | [ids], \"id\": any, \"logprobs\": K} and writes one\n"
    "line per input, in order: {\"id\", \"logprobs\": {tokens, token_logprobs, top_logprobs,\n"
    "text_offset, token_ids, top_ids}, \"sum_logprob\", \"n_tokens\"}, or {\"id\", \"error\"}.\n"
    "Blank lines are skipped. Text prompts get BOS as the model says; id lists are verbatim.\n"
    "\n"
    "  -m, --model FILE     GGUF model\n"
    "  --hf REPO[:FILE]     download from $HF_ENDPOINT (default huggingface.co) into the cache\n"
    "  -i FILE              input (default stdin)\n"
    "  -o FILE              output (default stdout)\n"
    "  --logprobs K         alternatives per position when a line gives none (default 5)\n"
    "  -t, --threads N      threads (default: all CPUs); results do not depend on it\n"
    "  --no-bos             do not add BOS to text prompts (id prompts are always verbatim)\n"
    "  --chunk N            positions per forward pass, 1..256 (default 256; part of the score)\n"
    PS_CLI_ACT_HELP
    PS_CLI_REPACK_HELP
    "  --ctx N              context length (default: the model's)\n"
    "  --strict             exit 1 when any line was an error\n"
    "  --progress           progress on stderr even when it is not a terminal\n"
    "  --shard I/N          score only the lines L with (L - 1) mod N == I (0 <= I < N), each\n"
    "                       tagged with its line number and a hash of the input line, between\n"
    "                       a header and an end record; `promptscore merge` restores input\n"
    "                       order. Modulo, not ranges: no counting pass, stdin works, and a\n"
    "                       sorted corpus spreads evenly over the shards\n"
    "  --resume             append to the -o file of an earlier (killed) run of this shard,\n"
    "                       skipping the lines it holds after checking each against the input\n"
    "                       (a file that does not match: exit 2, left untouched); a half line\n"
    "                       at its end is cut off; a missing or empty file starts afresh.\n"
    "                       Alone it means --shard 0/1\n";

typedef struct {
    loaded *l;
    ps_jsonl_limits lim;
    int32_t chunk;
    int64_t tokens;
} score_ctx;

/* Scores one input line into b (a result or an error line). Returns true when it was scored. */
static bool score_line(score_ctx *c, const char *line, size_t len, int64_t lineno, ps_buf *b) {
    ps_jsonl_req req;
    ps_score_result *r = NULL;
    if (ps_jsonl_parse(line, len, lineno, &c->lim, &req) == PS_OK) {
        ps_score_params sp = ps_score_default_params();
        sp.k = req.k;
        sp.chunk = c->chunk;
        ps_error err;
        ps_error_clear(&err);
        ps_status st = ps_score_tokens(c->l->session, req.ids, req.n, &sp, &r, &err);
        if (st != PS_OK) {
            req.ok = false;
            req.param = st == PS_ERR_TOKEN_RANGE || st == PS_ERR_CONTEXT ? "prompt" : NULL;
            req.code = st == PS_ERR_CONTEXT ? "context_length_exceeded" : NULL;
            snprintf(req.message, sizeof req.message, "line %lld: %s", (long long)lineno,
                     err.message);
        }
    }
    bool ok = req.ok;
    if (ok) {
        ps_jsonl_write_result(b, c->l->vocab, &req, r);
        c->tokens += req.n;
    } else {
        ps_jsonl_write_error(b, &req);
    }
    ps_score_result_free(r);
    ps_jsonl_req_free(&req);
    return ok;
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

static bool blank(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r' && s[i] != '\n') return false;
    return true;
}

int ps_cli_score(int argc, char **argv) {
    const char *cmd = argv[0];
    common_opts o = {.chunk = PS_CHUNK};
    const char *in_path = NULL, *out_path = NULL;
    int32_t k = 5;
    bool no_bos = false, strict = false, sharded = false, resume = false;
    int64_t shard_i = 0, shard_n = 1;
    for (int i = 1; i < argc; i++) {
        int c = common_opt(cmd, argc, argv, &i, &o);
        if (c < 0) return 2;
        if (c > 0) continue;
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(SCORE_USAGE, stdout);
            return 0;
        } else if (!strcmp(a, "--shard")) {
            char why[200];
            if (!ps_shard_parse_spec(v, &shard_i, &shard_n, why, sizeof why)) {
                fprintf(stderr, "promptscore %s: %s\n", cmd, why);
                return 2;
            }
            sharded = true;
            i++;
        } else if (!strcmp(a, "--resume")) {
            resume = sharded = true;
        } else if (!strcmp(a, "-i") || !strcmp(a, "-o") || !strcmp(a, "--logprobs")) {
            if (!v) {
                fprintf(stderr, "promptscore %s: %s needs a value\n", cmd, a);
                return 2;
            }
            i++;
            if (a[1] == 'i') in_path = v;
            else if (a[1] == 'o') out_path = v;
            else if (!parse_i32(v, 0, INT32_MAX, &k)) {
                fprintf(stderr, "promptscore %s: --logprobs wants an integer >= 0, got '%s'\n",
                        cmd, v);
                return 2;
            }
        } else if (!strcmp(a, "--no-bos")) {
            no_bos = true;
        } else if (!strcmp(a, "--strict")) {
            strict = true;
        } else {
            fprintf(stderr, "promptscore %s: unknown option '%s'\n%s", cmd, a, SCORE_USAGE);
            return 2;
        }
    }
    if (resume && (!out_path || !strcmp(out_path, "-"))) {
        fprintf(stderr, "promptscore %s: --resume needs the output file (-o FILE)\n", cmd);
        return 2;
    }
    FILE *in = stdin, *out = stdout;
    if (in_path && strcmp(in_path, "-") && !(in = fopen(in_path, "rb"))) {
        fprintf(stderr, "promptscore %s: cannot open %s: %s\n", cmd, in_path, strerror(errno));
        return 1;
    }
    loaded l;
    if (!load(cmd, &o, &l)) {
        if (in != stdin) fclose(in);
        return 1;
    }
    if (k > l.info.n_vocab) {
        fprintf(stderr, "promptscore %s: --logprobs %d exceeds the vocabulary size %d\n", cmd, k,
                l.info.n_vocab);
        unload(&l);
        if (in != stdin) fclose(in);
        return 2;
    }
    progress pr = {.tty = isatty(STDERR_FILENO) != 0};
    pr.on = pr.tty || o.progress;
    int64_t total = pr.on ? count_lines(in) : -1;
    ps_shard_out so = {.fd = -1};
    if (sharded) {
        /* everything the plain lines depend on, so --resume and merge refuse a mix */
        char config[256], arch[32];
        snprintf(arch, sizeof arch, "%s", l.info.arch);
        for (char *p = arch; *p; p++)
            if (*p == '"' || *p == '\\' || (unsigned char)*p < 0x20) *p = '_';
        snprintf(config, sizeof config,
                 "v1 k=%d chunk=%d act=%s bos=%d ctx=%d arch=%s bytes=%lld vocab=%d layers=%d embd=%d",
                 k, o.chunk, o.act == PS_ACT_F32 ? "f32" : "native", !no_bos, l.info.n_ctx,
                 arch, (long long)l.info.file_bytes, l.info.n_vocab, l.info.n_layer,
                 l.info.n_embd);
        char why[1024];
        int src = ps_shard_open(out_path, shard_i, shard_n, config, resume, in, &so, why,
                                sizeof why);
        if (src != 0) {
            fprintf(stderr, "promptscore %s: %s%s\n", cmd, resume ? "--resume: " : "", why);
            unload(&l);
            if (in != stdin) fclose(in);
            return src;
        }
        if (total > shard_i) total = (total - shard_i + shard_n - 1) / shard_n - so.kept;
        else if (total > 0) total = 0;
        if (so.kept > 0 || so.cut)
            fprintf(stderr, "promptscore %s: --resume: %s holds %lld lines of shard %lld/%lld "
                            "(input lines 1..%lld checked)%s%s\n", cmd, out_path,
                    (long long)so.kept, (long long)shard_i, (long long)shard_n,
                    (long long)so.lineno, so.cut ? "; a half-written last line was cut off" : "",
                    so.complete ? "; it is complete" : "");
        if (so.complete) {
            ps_shard_close(&so);
            unload(&l);
            if (in != stdin) fclose(in);
            return 0;
        }
    } else if (out_path && strcmp(out_path, "-") && !(out = fopen(out_path, "wb"))) {
        fprintf(stderr, "promptscore %s: cannot create %s: %s\n", cmd, out_path, strerror(errno));
        unload(&l);
        if (in != stdin) fclose(in);
        return 1;
    }

    pr.t0 = pr.last = now_s();

    /* a pipe or terminal gets each line as soon as it is scored (streaming producers) */
    struct stat osb;
    bool flush_each = fstat(fileno(out), &osb) != 0 || !S_ISREG(osb.st_mode);
    score_ctx sc = {.l = &l, .chunk = o.chunk};
    sc.lim.vocab = l.vocab;
    sc.lim.n_vocab = l.info.n_vocab;
    sc.lim.n_ctx = l.info.n_ctx;
    sc.lim.default_k = k;
    sc.lim.add_bos = !no_bos;
    ps_buf b;
    ps_buf_init(&b);
    char *line = NULL;
    size_t line_cap = 0;
    ssize_t got;
    int64_t lineno = so.lineno, done = 0, errors = 0;
    int rc = 0;
    while ((got = getline(&line, &line_cap, in)) >= 0) {
        lineno++;
        uint64_t lh = 0;
        if (sharded) {
            lh = ps_shard_consume(&so, line, (size_t)got);
            if (!ps_shard_mine(&so, lineno)) continue;
        }
        if (blank(line, (size_t)got)) {
            if (total > 0) total--;
            if (sharded && !ps_shard_write(&so, lineno, lh, NULL, 0)) {
                fprintf(stderr, "promptscore %s: write failed: %s\n", cmd, strerror(errno));
                rc = 1;
                break;
            }
            continue;
        }
        ps_buf_reset(&b);
        if (!score_line(&sc, line, (size_t)got, lineno, &b)) errors++;
        done++;
        if (b.oom) {
            fprintf(stderr, "promptscore %s: out of memory writing line %lld\n", cmd,
                    (long long)lineno);
            rc = 1;
            break;
        }
        if (sharded ? !ps_shard_write(&so, lineno, lh, b.data, b.len)
                    : fwrite(b.data, 1, b.len, out) != b.len || (flush_each && fflush(out) != 0)) {
            fprintf(stderr, "promptscore %s: write failed: %s\n", cmd, strerror(errno));
            rc = 1;
            break;
        }
        progress_show(&pr, "prompts", done, total, sc.tokens, false);
    }
    if (ferror(in)) {
        fprintf(stderr, "promptscore %s: read failed after line %lld: %s\n", cmd,
                (long long)lineno, strerror(errno));
        rc = 1;
    }
    progress_end(&pr);
    if (sharded && rc == 0 && !ps_shard_write_end(&so)) {
        fprintf(stderr, "promptscore %s: write failed: %s\n", cmd, strerror(errno));
        rc = 1;
    }
    if (sharded && !ps_shard_close(&so) && rc == 0) {
        fprintf(stderr, "promptscore %s: closing %s failed: %s\n", cmd, out_path, strerror(errno));
        rc = 1;
    }
    if (fflush(out) != 0) {
        fprintf(stderr, "promptscore %s: write failed: %s\n", cmd, strerror(errno));
        rc = 1;
    }
    double el = now_s() - pr.t0;
    fprintf(stderr, "promptscore %s: %lld prompts, %lld tokens, %.0f tokens/s, %lld errors, %.2fs\n",
            cmd, (long long)done, (long long)sc.tokens, el > 0 ? (double)sc.tokens / el : 0.0,
            (long long)errors, el);
    if (rc == 0 && strict && errors > 0) rc = 1;
    free(line);
    ps_buf_free(&b);
    unload(&l);
    if (in != stdin) fclose(in);
    if (out != stdout && fclose(out) != 0 && rc == 0) {
        fprintf(stderr, "promptscore %s: closing %s failed: %s\n", cmd, out_path, strerror(errno));
        rc = 1;
    }
    return rc;
}

/* ---- perplexity -------------------------------------------------------------------------- */

static const char *PPL_USAGE =
    "usage: promptscore perplexity -m MODEL.gguf -f text.txt [options]\n"
    "\n"
    "Perplexity of a text with a sliding window: windows of --ctx tokens advance by --stride;\n"
    "every token is scored once, with as much context as its window gives (the first window\n"
    "scores all its tokens, later ones only the new ones). BOS is added as the model says.\n"
    "\n"
    "  -m, --model FILE     GGUF model (or --hf REPO[:FILE])\n"
    "  -f FILE              the text ('-' for stdin)\n"
    "  --ctx N              window length in tokens (default: the model's context)\n"
    "  --stride S           window advance, 1..ctx (default ctx / 2)\n"
    "  --per-token          JSON Lines of every scored token on stdout {i, id, text, logprob};\n"
    "                       the summary then goes to stderr\n"
    "  -t, --threads N      threads (default: all CPUs)\n"
    "  --chunk N            positions per forward pass (default 256)\n"
    PS_CLI_ACT_HELP
    PS_CLI_REPACK_HELP
    "  --progress           progress on stderr even when it is not a terminal\n";

int ps_cli_perplexity(int argc, char **argv) {
    const char *cmd = argv[0];
    common_opts o = {.chunk = PS_CHUNK};
    const char *text_path = NULL;
    int32_t stride = 0;
    bool per_token = false;
    for (int i = 1; i < argc; i++) {
        int c = common_opt(cmd, argc, argv, &i, &o);
        if (c < 0) return 2;
        if (c > 0) continue;
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(PPL_USAGE, stdout);
            return 0;
        } else if (!strcmp(a, "-f") || !strcmp(a, "--file")) {
            if (!v) {
                fprintf(stderr, "promptscore %s: %s needs a value\n", cmd, a);
                return 2;
            }
            text_path = v;
            i++;
        } else if (!strcmp(a, "--stride")) {
            if (!v || !parse_i32(v, 1, INT32_MAX, &stride)) {
                fprintf(stderr, "promptscore %s: --stride wants an integer >= 1\n", cmd);
                return 2;
            }
            i++;
        } else if (!strcmp(a, "--per-token")) {
            per_token = true;
        } else {
            fprintf(stderr, "promptscore %s: unknown option '%s'\n%s", cmd, a, PPL_USAGE);
            return 2;
        }
    }
    if (!text_path) {
        fprintf(stderr, "promptscore %s: no text: give -f FILE\n%s", cmd, PPL_USAGE);
        return 2;
    }
    FILE *f = strcmp(text_path, "-") ? fopen(text_path, "rb") : stdin;
    if (!f) {
        fprintf(stderr, "promptscore %s: cannot open %s: %s\n", cmd, text_path, strerror(errno));
        return 1;
    }
    size_t tlen = 0;
    char *text = ps_cli_read_all(f, &tlen);
    if (f != stdin) fclose(f);
    if (!text) {
        fprintf(stderr, "promptscore %s: cannot read %s\n", cmd, text_path);
        return 1;
    }
    loaded l;
    if (!load(cmd, &o, &l)) {
        free(text);
        return 1;
    }
    int rc = 1;
    int32_t *ids = NULL, n = 0;
    ps_error err;
    ps_error_clear(&err);
    ps_buf b;
    ps_buf_init(&b);
    if (ps_vocab_tokenize_alloc(l.vocab, text, tlen, ps_vocab_add_bos(l.vocab), false, &ids, &n, &err) != PS_OK) {
        fprintf(stderr, "promptscore %s: cannot tokenise %s: %s\n", cmd, text_path, err.message);
        goto out;
    }
    int32_t ctx = l.info.n_ctx;
    if (stride == 0) stride = PS_MAX(1, ctx / 2);
    if (stride > ctx) {
        fprintf(stderr, "promptscore %s: --stride %d is longer than the window (--ctx %d): tokens "
                        "would be skipped\n", cmd, stride, ctx);
        rc = 2;
        goto out;
    }
    if (n < 2) {
        fprintf(stderr, "promptscore %s: %s has %d token(s); need at least 2\n", cmd, text_path, n);
        goto out;
    }
    progress pr = {.tty = isatty(STDERR_FILENO) != 0};
    pr.on = pr.tty || o.progress;
    pr.t0 = pr.last = now_s();
    double nll = 0.0;
    int64_t scored = 0, windows = 0;
    int32_t next = 1; /* first token not scored yet (token 0 has no distribution) */
    ps_score_params sp = ps_score_default_params();
    sp.k = 0;
    sp.chunk = o.chunk;
    for (int32_t start = 0; next < n; start += stride) {
        int32_t end = start + ctx < n ? start + ctx : n;
        if (end <= next) continue;
        ps_score_result *r = NULL;
        if (ps_score_tokens(l.session, ids + start, end - start, &sp, &r, &err) != PS_OK) {
            fprintf(stderr, "promptscore %s: window at token %d: %s\n", cmd, start, err.message);
            goto out;
        }
        windows++;
        for (int32_t i = next; i < end; i++) {
            float lp = r->logprobs[i - start];
            nll -= (double)lp;
            scored++;
            if (per_token) {
                ps_buf_reset(&b);
                ps_buf_printf(&b, "{\"i\":%d,\"id\":%d,\"text\":", i, ids[i]);
                ps_buf tt;
                ps_buf_init(&tt);
                ps_token_text(&tt, l.vocab, ids[i]);
                ps_json_str(&b, tt.data ? tt.data : "", tt.len);
                ps_buf_free(&tt);
                ps_buf_puts(&b, ",\"logprob\":");
                ps_json_f32(&b, lp);
                ps_buf_puts(&b, "}\n");
                if (b.oom || fwrite(b.data, 1, b.len, stdout) != b.len) {
                    fprintf(stderr, "promptscore %s: write failed\n", cmd);
                    ps_score_result_free(r);
                    goto out;
                }
            }
        }
        next = end;
        ps_score_result_free(r);
        progress_show(&pr, "tokens scored", scored, n - 1, (int64_t)windows * ctx, false);
    }
    progress_end(&pr);
    double mean = nll / (double)scored;
    FILE *sum = per_token ? stderr : stdout;
    /* the result line holds no wall-clock figure (runs are compared byte for byte); the time
     * goes to stderr on a line of its own */
    fprintf(sum, "perplexity %.6f  mean NLL %.6f  tokens %lld  (windows %lld, ctx %d, stride %d)\n",
            exp(mean), mean, (long long)scored, (long long)windows, ctx, stride);
    double el = now_s() - pr.t0;
    fprintf(stderr, "promptscore %s: %lld tokens in %.2fs, %.0f tokens/s\n", cmd, (long long)scored,
            el, el > 0 ? (double)scored / el : 0.0);
    rc = fflush(stdout) == 0 ? 0 : 1;
out:
    ps_buf_free(&b);
    ps_free(ids);
    free(text);
    unload(&l);
    return rc;
}
