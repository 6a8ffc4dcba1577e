/*
 * cli.h — the subcommands of the `promptscore` binary. Each lives in its own src/cli/cli_*.c file
 * and takes the arguments after the subcommand name (argv[0] is the subcommand). Each returns
 * the process exit status, one rule for all: 0 ok, 1 a failure while working (a model that
 * does not load, a download or write that fails), 2 bad usage (unknown option, bad or missing
 * value, no model given). Options are parsed by ps_cli_parse (cli_opts.c) from tables, so
 * -h/--help, --version and errors behave the same in every subcommand.
 */
#ifndef PS_CLI_H
#define PS_CLI_H

int ps_cli_score(int argc, char **argv);      /* cli_score.c */
int ps_cli_perplexity(int argc, char **argv); /* cli_perplexity.c */
int ps_cli_tokenize(int argc, char **argv);   /* cli_tokenize.c */
int ps_cli_serve(int argc, char **argv);      /* cli_serve.c */
int ps_cli_bench(int argc, char **argv);      /* cli_bench.c */
int ps_cli_gen_model(int argc, char **argv);  /* cli_gen.c */
int ps_cli_merge(int argc, char **argv);      /* cli_merge.c */

#include <stdio.h>

#include "base/impl.h"
#include "front/jsonl.h"
#include "promptscore.h"
#include "base/util.h"

#define PS_CLI_MAX_CTX (1 << 26)

/* ---- options (cli_opts.c) ---------------------------------------------------------------- */

typedef enum {
    PS_CLI_FLAG, /* bool *dst = true; takes no value */
    PS_CLI_STR,  /* const char **dst = the value */
    PS_CLI_I32,  /* int32_t *dst, lo <= value <= hi */
    PS_CLI_I64,  /* int64_t *dst, lo <= value <= hi */
    PS_CLI_FN,   /* fn(cmd, option, value, dst); false = bad value (fn printed why) */
} ps_cli_kind;

/* Option tables name only the fields an entry uses ({names, arg, help, kind, dst} for most);
 * the rest are zero. */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
typedef struct {
    const char *names; /* the spellings, comma separated, as --help shows them: "-c, --ctx-size" */
    const char *arg;   /* value placeholder ("N", "FILE"); NULL for a flag */
    const char *help;  /* '\n' continues on the next line */
    ps_cli_kind kind;
    void *dst;
    int64_t lo, hi;
    bool (*fn)(const char *cmd, const char *opt, const char *value, void *dst);
} ps_cli_opt;

/* A subcommand: name, synopsis (after "promptscore NAME "), an about paragraph (ends with a
 * newline, may be ""), and a NULL-terminated list of option tables, each ending with {0}.
 * Arguments that are not options are an error unless args is set: then they are collected
 * there in order (args has room for argc entries), *n_args counting them. */
typedef struct {
    const char *name;
    const char *synopsis;
    const char *about;
    const ps_cli_opt *const *tables;
    const char **args;
    int *n_args;
} ps_cli_cmd;

/* Parses argv[1..argc) against c's tables. Returns -1 when parsing went through (go on), 0
 * when --help or --version was printed (exit 0), 2 after printing a usage error (exit 2). */
int ps_cli_parse(const ps_cli_cmd *c, int argc, char **argv);
/* The --help text of c, generated from its tables. */
void ps_cli_usage(const ps_cli_cmd *c, FILE *f);

/* The command line's integers, parsed in one place. ps_cli_parse_i64: s as a base-10 integer
 * in [lo, hi] (the whole string) -> *out. ps_cli_parse_i64_prefix: the same for the integer
 * at the start of s; *end is set after it (lists such as "1,2,4"). ps_cli_parse_u64: s as a
 * base-10 integer >= 0 up to 2^64 - 1 (a minus sign is refused). False on any error. */
bool ps_cli_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out);
bool ps_cli_parse_i64_prefix(const char *s, int64_t lo, int64_t hi, int64_t *out,
                             const char **end);
bool ps_cli_parse_u64(const char *s, uint64_t *out);

/* PS_CLI_FN handlers: --act native|f32 (dst ps_act *); --kv-type f32|f16|bf16|bf16-dot|f16-dot (dst
 * ps_kv_type *); -ngl N (dst int32_t *; prints the note that this build runs on the CPU when
 * N != 0). */
bool ps_cli_opt_act(const char *cmd, const char *opt, const char *value, void *dst);
bool ps_cli_opt_kv_type(const char *cmd, const char *opt, const char *value, void *dst);
bool ps_cli_opt_ngl(const char *cmd, const char *opt, const char *value, void *dst);

/* The options every subcommand that loads a model shares (not all use every field). */
typedef struct {
    const char *model;  /* -m */
    const char *hf;     /* -hf REPO[:FILE|:QUANT] */
    int32_t threads;    /* -t; 0 = all CPUs */
    int32_t n_ctx;      /* -c; 0 = the model's */
    int32_t chunk;      /* --chunk; 0 = PS_CHUNK */
    int32_t ngl;        /* -ngl: accepted, unused */
    ps_act act;         /* --act */
    ps_kv_type kv_type; /* --kv-type */
    bool progress;      /* --progress */
    bool no_repack;     /* --no-repack */
    bool no_session;    /* ps_cli_load: model only */
    int64_t cache_mb;   /* --cache-mb (score, serve): the prefix cache's budget in MiB; 0 = off,
                         * -1 (what the subcommand sets before parsing) = the default */
    bool want_cache;    /* ps_cli_load: create the prefix cache (score, serve) */
} ps_cli_model_opts;

/* The default --max-seqs of serve: prompts of one request packed into shared forward passes
 * (the same bits as one at a time). Chosen by measurement (bench/bench_workload.c,
 * lm-eval-shaped requests; docs/figures.md, "Batching on by default"): on requests of many
 * short prompts the requests per second grew up to 16. score keeps 1: on a file of long
 * prompts 16 cost time and peak memory (16 kept sequences with their own K/V). */
#define PS_CLI_MAX_SEQS_DEFAULT 16

#define PS_CLI_HF_HELP                                                                         \
    "download a GGUF from Hugging Face and use it: REPO:FILE.gguf,\n"                           \
    "or REPO:QUANT as llama.cpp spells it (REPO:Q8_0), or REPO (picks\n"                        \
    "Q8_0, BF16, F16); cached in $PS_CACHE or ~/.cache/promptscore;\n"                          \
    "$HF_TOKEN for gated repos, $HF_ENDPOINT for a mirror"

/* -m, -hf and -ngl: every subcommand that takes a model. */
#define PS_CLI_OPTS_MODEL(o)                                                                   \
    {"-m, --model", "FILE", "GGUF model file", PS_CLI_STR, &(o)->model, 0, 0, NULL},           \
    {"-hf, --hf, --hf-repo", "REPO[:FILE]", PS_CLI_HF_HELP, PS_CLI_STR, &(o)->hf, 0, 0, NULL},   \
    {"-ngl, --n-gpu-layers, --gpu-layers", "N", "accepted for llama.cpp command lines; ignored:\n" \
     "this build runs on the CPU", PS_CLI_FN, &(o)->ngl, 0, 0, ps_cli_opt_ngl}
#define PS_CLI_OPT_CTX(o, help)                                                                \
    {"-c, --ctx-size, --ctx", "N", help, PS_CLI_I32, &(o)->n_ctx, 1, PS_CLI_MAX_CTX, NULL}
#define PS_CLI_OPT_THREADS(o)                                                                  \
    {"-t, --threads", "N", "threads (default: all CPUs); results do not depend on it",          \
     PS_CLI_I32, &(o)->threads, 0, 1024, NULL}
#define PS_CLI_OPT_CHUNK(o)                                                                    \
    {"--chunk", "N", "positions per forward pass, 1..256 (default 256; part of the score)",     \
     PS_CLI_I32, &(o)->chunk, 1, PS_CHUNK, NULL}
#define PS_CLI_OPT_ACT(o)                                                                      \
    {"--act", "native|f32", "activations of the matrix products: native (default, as\n"        \
     "llama.cpp: bf16 for BF16 weights, Q8_0 blocks for Q8_0 weights)\n"                       \
     "or f32 (float32 for every weight type: closest to float64,\n"                            \
     "slower; part of the score)", PS_CLI_FN, &(o)->act, 0, 0, ps_cli_opt_act}
#define PS_CLI_OPT_KV_TYPE(o)                                                                  \
    {"--kv-type", "f32|f16|bf16|bf16-dot|f16-dot",                                          \
     "the K/V cache's element type: f32 (default), or f16 / bf16\n"                           \
     "(half the memory; keys and values rounded once when written;\n"                        \
     "part of the score); bf16-dot: a bf16 cache, and queries and\n"                         \
     "probabilities rounded to bf16 too, for bf16 dot products (faster\n"                    \
     "attention on long prompts with AVX-512 BF16; part of the score);\n"                    \
     "f16-dot: an f16 cache, queries and probabilities rounded to f16\n"                     \
     "too, as llama.cpp's attention without flash attention does",                           \
     PS_CLI_FN, &(o)->kv_type, 0, 0, ps_cli_opt_kv_type}
#define PS_CLI_OPT_REPACK(o)                                                                   \
    {"--no-repack", NULL, "no tile copy of BF16 weights or Q4_K / Q6_K experts at load (the\n" \
     "kernel builds its tiles per call: same scores, slower)", PS_CLI_FLAG, &(o)->no_repack,   \
     0, 0, NULL}
#define PS_CLI_OPT_CACHE(o)                                                                    \
    {"--cache-mb", "MB", "the exact prefix cache: prompts sharing a prefix share its work,\n"     \
     "the answers bitwise the same (default: a quarter of the free memory,\n"                   \
     "at most 4096; 0 = off)", PS_CLI_I64, &(o)->cache_mb, 0, (int64_t)1 << 30, NULL}
#define PS_CLI_OPT_PROGRESS(o)                                                                 \
    {"--progress", NULL, "progress on stderr even when it is not a terminal", PS_CLI_FLAG,      \
     &(o)->progress, 0, 0, NULL}

/* -m / -hf -> a local path (*owned: ps_malloc'd when downloaded, else NULL; free it). Prints
 * the error. Returns 0, 1 (download failed) or 2 (no model given, both given, bad spec). */
int ps_cli_model_path(const char *cmd, const ps_cli_model_opts *o, const char **path,
                      char **owned);

/* A loaded model and, unless vocab_only or o->no_session, a pool of o->threads and a session
 * (n_ctx = the model's or -c, n_batch = --chunk, --act, --kv-type). */
typedef struct {
    ps_model *model;
    ps_session *session;
    ps_pool *pool;
    const ps_vocab *vocab;
    ps_model_info info;
    char *path; /* downloaded by -hf */
    ps_prefix_cache *cache; /* with o->want_cache and a budget > 0, else NULL */
} ps_cli_loaded;

/* The prefix cache's default budget: a quarter of MemAvailable (/proc/meminfo), at most
 * 4 GiB, at least 64 MiB (64 MiB when it cannot be read). */
int64_t ps_cli_default_cache_bytes(void);

/* Returns 0, or the exit status (1 or 2) after printing the error; *l is then empty. */
int ps_cli_load(const char *cmd, const ps_cli_model_opts *o, bool vocab_only, ps_cli_loaded *l);
/* --compare FILE (score, perplexity; cli_score.c): loads the second model with the base's
 * n_ctx and checks that its vocabulary is the base's token for token (ps_vocab_same). Returns
 * 0 with *out set, 1 (cannot load: missing file, a FIFO, a bad GGUF) or 2 (vocabularies differ;
 * the message names both sizes or the first differing token) after printing the error. On
 * success the compared model's vocabulary is freed (ps_model_drop_vocab: its tokens are the
 * base's; about 12 MB less for a 151,936-token vocabulary). */
int ps_cli_load_compare(const char *cmd, const char *path, const ps_cli_model_opts *o,
                        const ps_cli_loaded *base, ps_model **out);
void ps_cli_unload(ps_cli_loaded *l);

/* --compare given several times or as a comma list (score, perplexity, serve; cli_compare.c):
 * the paths in order and, once loaded, their models. */
#define PS_CLI_MAX_COMPARE 16
typedef struct {
    char *paths[PS_CLI_MAX_COMPARE];
    ps_model *models[PS_CLI_MAX_COMPARE];
    int n;
} ps_cli_compares;
/* The PS_CLI_FN handler of --compare (dst ps_cli_compares *): appends the value's paths. */
bool ps_cli_opt_compare(const char *cmd, const char *opt, const char *value, void *dst);
/* Loads every path with ps_cli_load_compare; 0, or its exit status after the error (2 for a
 * file given twice, before anything is loaded). ps_cli_compares_free frees what was loaded. */
int ps_cli_load_compares(const char *cmd, const ps_cli_model_opts *o, const ps_cli_loaded *base,
                         ps_cli_compares *c);
void ps_cli_compares_free(ps_cli_compares *c);

/* Progress on stderr: a \r-rewritten line on a terminal, a line every 5 s otherwise; off
 * unless `on`. (cli_opts.c) */
typedef struct {
    bool on, tty;
    double t0, last;
} ps_cli_progress;
/* on = stderr is a terminal or `force`; t0 = now. */
void ps_cli_progress_start(ps_cli_progress *p, bool force);
void ps_cli_progress_show(ps_cli_progress *p, const char *what, int64_t done, int64_t total,
                          int64_t tokens, bool force);
void ps_cli_progress_end(ps_cli_progress *p);

/* The value of the --act option of score, perplexity, serve and bench: "native" or "f32" ->
 * *out. Anything else (or no value) prints "promptscore CMD: --act wants native or f32, got
 * ..." to stderr and returns false, *out unchanged. (cli.c) */
bool ps_cli_parse_act(const char *cmd, const char *value, ps_act *out);
/* The value of option opt (--kv-type of score, perplexity, serve, bench; bench's --kv-base):
 * "f32", "f16", "bf16", "bf16-dot" or "f16-dot" -> *out. Anything else prints "promptscore CMD:
 * OPT wants f32, f16, bf16, bf16-dot or f16-dot, got ..." and
 * returns false, *out unchanged. (cli.c) */
bool ps_cli_parse_kv_type(const char *cmd, const char *opt, const char *value, ps_kv_type *out);

/* One line naming the matrix kernels a session created now (PS_ISA as set, the CPU as it is)
 * uses for BF16, Q8_0 and the other block types with native activations, and whether AMX is
 * on, and if not why, e.g. "bf16 amx-bf16 (tdpbf16ps), q8_0 amx-int8 (tdpbssd), other block
 * types amx-int8 (tdpbssd, tdpbusd); amx: amx-bf16, amx-int8".
 * Printed by --version and bench. (cli.c) */
void ps_cli_paths(char *buf, size_t size);
/* What --version prints, for `promptscore --version` and every subcommand's --version:
 * "promptscore VERSION" and the matmul paths line. (cli.c) */
void ps_cli_print_version(void);

/* Reads all of f into a malloc'd buffer (free with free()); *len bytes, any content. NULL on a
 * read error or when memory runs out. (cli.c) */
char *ps_cli_read_all(FILE *f, size_t *len);

/* ---- score's views for people (cli_format.c) --------------------------------------------- */

enum { PS_CLI_FORMAT_JSONL, PS_CLI_FORMAT_TABLE, PS_CLI_FORMAT_SUMMARY };
typedef struct {
    int format;        /* PS_CLI_FORMAT_TABLE or PS_CLI_FORMAT_SUMMARY */
    bool color;        /* ANSI colours (a terminal, NO_COLOR unset) */
    int64_t prompts, errors, tokens, scored;
    double sum;        /* sum of the scored tokens' logprobs over all prompts */
    /* --stats / --compare totals over the scored tokens (set when a result had them) */
    bool stats, compare;
    double sum_entropy, sum_kld;
    int64_t n_top1, n_same;
} ps_cli_view;
void ps_cli_view_init(ps_cli_view *v, int format, bool color);
/* Appends the view of one scored prompt / one error line / the closing lines. */
void ps_cli_view_result(ps_cli_view *v, ps_buf *b, const ps_vocab *vocab,
                        const ps_jsonl_req *req, const ps_score_result *r);
void ps_cli_view_error(ps_cli_view *v, ps_buf *b, const ps_jsonl_req *req);
void ps_cli_view_end(ps_cli_view *v, ps_buf *b);

#endif
