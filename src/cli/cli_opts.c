/*
 * cli_opts.c — the one option parser of every subcommand, the options they share, and model
 * loading (-m or -hf) for every subcommand that takes a model.
 *
 * A subcommand describes its options as tables of ps_cli_opt (cli.h): the spellings, the value
 * placeholder, one help text, and where the value goes. ps_cli_parse walks argv once against
 * them and writes --help from the same tables, so an option that parses is an option that is
 * listed. It gives every subcommand the same behaviour: -h/--help prints the help on stdout and
 * exits 0, --version prints "promptscore VERSION" and exits 0, an unknown option, a missing or
 * bad value, or a stray argument prints one line naming it on stderr and exits 2 (usage). A
 * failure while working is exit 1 (see cli.h). "--opt=value" is the same as "--opt value".
 *
 * The model options (PS_CLI_MODEL_OPTS) are the spellings llama.cpp and vLLM users type:
 * -m/--model, -hf/--hf/--hf-repo REPO[:FILE|:QUANT], -c/--ctx-size, -t/--threads, and
 * -ngl/--n-gpu-layers, which is accepted and answered with a one-line note that this build runs
 * on the CPU. ps_cli_model_path turns -m/-hf into a local file (downloading through
 * download.c); ps_cli_load adds the pool and the session that score and perplexity use.
 */
#include "cli/cli.h"
#include "front/download.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

bool ps_cli_parse_i64_prefix(const char *s, int64_t lo, int64_t hi, int64_t *out,
                             const char **end) {
    if (!s || !*s) return false;
    char *e;
    errno = 0;
    long long v = strtoll(s, &e, 10);
    if (errno || e == s || v < lo || v > hi) return false;
    *out = (int64_t)v;
    *end = e;
    return true;
}

bool ps_cli_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out) {
    const char *end;
    int64_t v;
    if (!ps_cli_parse_i64_prefix(s, lo, hi, &v, &end) || *end) return false;
    *out = v;
    return true;
}

bool ps_cli_parse_u64(const char *s, uint64_t *out) {
    if (!s) return false;
    const char *p = s + strspn(s, " \t\n\v\f\r");
    if (!*p || *p == '-') return false; /* strtoull would negate "-5" into 2^64 - 5 */
    char *end;
    errno = 0;
    unsigned long long v = strtoull(p, &end, 10);
    if (errno || end == p || *end) return false;
    *out = (uint64_t)v;
    return true;
}

/* ---- the parser ------------------------------------------------------------------------- */

/* True when `arg` is one of the comma-separated spellings in `names` ("-m, --model"). */
static bool has_name(const char *names, const char *arg, size_t arg_len) {
    const char *p = names;
    while (*p) {
        while (*p == ' ' || *p == ',') p++;
        const char *q = p;
        while (*q && *q != ',' && *q != ' ') q++;
        if ((size_t)(q - p) == arg_len && !memcmp(p, arg, arg_len)) return true;
        p = q;
    }
    return false;
}

static const ps_cli_opt *find_opt(const ps_cli_cmd *c, const char *arg, size_t len) {
    for (size_t t = 0; c->tables[t]; t++)
        for (const ps_cli_opt *o = c->tables[t]; o->names; o++)
            if (has_name(o->names, arg, len)) return o;
    return NULL;
}

void ps_cli_usage(const ps_cli_cmd *c, FILE *f) {
    fprintf(f, "usage: promptscore %s %s\n", c->name, c->synopsis);
    if (c->about && *c->about) fprintf(f, "\n%s", c->about);
    fputc('\n', f);
    for (size_t t = 0; c->tables[t]; t++)
        for (const ps_cli_opt *o = c->tables[t]; o->names; o++) {
            char left[96];
            snprintf(left, sizeof left, "%s%s%s", o->names, o->arg ? " " : "", o->arg ? o->arg : "");
            const char *h = o->help ? o->help : "";
            int w = fprintf(f, "  %s", left);
            /* the first help line beside the names (or below them when they are long) */
            if (w > 27) fprintf(f, "\n%29s", "");
            else fprintf(f, "%*s", 29 - w, "");
            for (; *h; h++) {
                fputc(*h, f);
                if (*h == '\n' && h[1]) fprintf(f, "%29s", "");
            }
            fputc('\n', f);
        }
    fprintf(f, "  -h, --help                 this help\n"
               "  --version                  print the version\n");
}

int ps_cli_parse(const ps_cli_cmd *c, int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            ps_cli_usage(c, stdout);
            return 0;
        }
        if (!strcmp(a, "--version")) {
            ps_cli_print_version();
            return 0;
        }
        if ((a[0] != '-' || !a[1]) && c->args) {
            c->args[(*c->n_args)++] = a;
            continue;
        }
        if (a[0] != '-' || !a[1]) {
            fprintf(stderr, "promptscore %s: unexpected argument '%s' (promptscore %s --help lists "
                            "the options)\n", c->name, a, c->name);
            return 2;
        }
        const char *eq = a[1] == '-' ? strchr(a, '=') : NULL;
        size_t len = eq ? (size_t)(eq - a) : strlen(a);
        const ps_cli_opt *o = find_opt(c, a, len);
        if (!o) {
            fprintf(stderr, "promptscore %s: unknown option '%.*s' (promptscore %s --help lists "
                            "the options)\n", c->name, (int)len, a, c->name);
            return 2;
        }
        if (o->kind == PS_CLI_FLAG) {
            if (eq) {
                fprintf(stderr, "promptscore %s: %.*s takes no value\n", c->name, (int)len, a);
                return 2;
            }
            *(bool *)o->dst = true;
            continue;
        }
        const char *v = eq ? eq + 1 : i + 1 < argc ? argv[++i] : NULL;
        if (!v) {
            fprintf(stderr, "promptscore %s: %s needs a value (%s)\n", c->name, a,
                    o->arg ? o->arg : "?");
            return 2;
        }
        int64_t n;
        switch (o->kind) {
        case PS_CLI_STR: *(const char **)o->dst = v; break;
        case PS_CLI_I32:
        case PS_CLI_I64:
            if (!ps_cli_parse_i64(v, o->lo, o->hi, &n)) {
                fprintf(stderr, "promptscore %s: %.*s wants an integer in %lld..%lld, got '%s'\n",
                        c->name, (int)len, a, (long long)o->lo, (long long)o->hi, v);
                return 2;
            }
            if (o->kind == PS_CLI_I32) *(int32_t *)o->dst = (int32_t)n;
            else *(int64_t *)o->dst = n;
            break;
        case PS_CLI_FN: {
            char opt[64];
            snprintf(opt, sizeof opt, "%.*s", (int)len, a);
            if (!o->fn(c->name, opt, v, o->dst)) return 2; /* fn printed why */
            break;
        }
        default: return 2;
        }
    }
    return -1;
}

/* ---- shared option handlers -------------------------------------------------------------- */

bool ps_cli_opt_act(const char *cmd, const char *opt, const char *value, void *dst) {
    return ps_cli_parse_act(cmd, value, (ps_act *)dst);
}

bool ps_cli_opt_kv_type(const char *cmd, const char *opt, const char *value, void *dst) {
    if (!ps_cli_parse_kv_type(cmd, opt, value, (ps_kv_type *)dst)) return false;
    /* without vdpbf16ps the bf16-dot products run their scalar form: the same bits, slowly */
    if (*(ps_kv_type *)dst == PS_KV_BF16_DOT &&
        !(ps_isa_best() == PS_ISA_AVX512 && ps_cpu_has_avx512bf16()))
        fprintf(stderr, "promptscore %s: note: %s bf16-dot without AVX-512 BF16 on this CPU (or "
                        "under PS_ISA): attention runs its scalar form, the same scores, many "
                        "times slower than f32\n", cmd, opt);
    return true;
}

bool ps_cli_opt_ngl(const char *cmd, const char *opt, const char *value, void *dst) {
    int64_t n;
    if (!ps_cli_parse_i64(value, -1, 1 << 20, &n)) {
        fprintf(stderr, "promptscore %s: %s wants a number of layers, got '%s'\n", cmd, opt, value);
        return false;
    }
    *(int32_t *)dst = (int32_t)n;
    if (n != 0)
        fprintf(stderr, "promptscore %s: note: %s %s ignored: this build runs on the CPU\n", cmd,
                opt, value);
    return true;
}

/* ---- model loading ---------------------------------------------------------------------- */

static void dl_note(void *ctx, const char *msg) { fprintf(stderr, "%s: %s\n", (const char *)ctx, msg); }

static double g_dl_last;
static void dl_progress(void *ctx, int64_t done, int64_t total) {
    double t = ps_now_s();
    if (t - g_dl_last < 0.25 && done != total) return;
    g_dl_last = t;
    if (total > 0)
        fprintf(stderr, "\r%s: downloading %.1f / %.1f MB (%.0f%%)  ", (const char *)ctx,
                (double)done / 1e6, (double)total / 1e6, 100.0 * (double)done / (double)total);
    else
        fprintf(stderr, "\r%s: downloading %.1f MB  ", (const char *)ctx, (double)done / 1e6);
    if (done == total) fputc('\n', stderr);
}

int ps_cli_model_path(const char *cmd, const ps_cli_model_opts *o, const char **path,
                      char **owned) {
    *path = NULL;
    *owned = NULL;
    if (o->hf && o->model) {
        fprintf(stderr, "promptscore %s: give -m or -hf, not both\n", cmd);
        return 2;
    }
    if (!o->hf && !o->model) {
        fprintf(stderr, "promptscore %s: no model: give -m MODEL.gguf or -hf REPO[:FILE] "
                        "(promptscore %s --help)\n", cmd, cmd);
        return 2;
    }
    if (o->model) {
        *path = o->model;
        return 0;
    }
    char tag[64];
    snprintf(tag, sizeof tag, "promptscore %s", cmd);
    ps_download_params dp = ps_download_default_params();
    dp.note = dl_note;
    dp.progress = isatty(STDERR_FILENO) || o->progress ? dl_progress : NULL;
    dp.ctx = tag;
    ps_error err;
    ps_error_clear(&err);
    ps_status st = ps_hf_resolve(o->hf, &dp, owned, &err);
    if (st != PS_OK) {
        fprintf(stderr, "promptscore %s: -hf %s: %s\n", cmd, o->hf, err.message);
        return st == PS_ERR_INVALID_ARG ? 2 : 1;
    }
    *path = *owned;
    return 0;
}

int64_t ps_cli_default_cache_bytes(void) {
    int64_t kb = -1;
    FILE *f = fopen("/proc/meminfo", "r");
    if (f) {
        char line[256];
        long long v;
        while (fgets(line, sizeof line, f))
            if (sscanf(line, "MemAvailable: %lld kB", &v) == 1) kb = v;
        fclose(f);
    }
    int64_t b = kb > 0 ? kb * 1024 / 4 : 0;
    return PS_MIN(PS_MAX(b, (int64_t)64 << 20), (int64_t)4 << 30);
}

void ps_cli_unload(ps_cli_loaded *l) {
    ps_prefix_cache_free(l->cache);
    ps_session_free(l->session);
    ps_model_free(l->model);
    ps_pool_free(l->pool);
    ps_free(l->path);
    memset(l, 0, sizeof *l);
}

int ps_cli_load(const char *cmd, const ps_cli_model_opts *o, bool vocab_only, ps_cli_loaded *l) {
    memset(l, 0, sizeof *l);
    const char *path;
    int rc = ps_cli_model_path(cmd, o, &path, &l->path);
    if (rc) return rc;
    ps_error err;
    ps_error_clear(&err);
    ps_model_params mp = ps_model_default_params();
    mp.n_ctx = o->n_ctx;
    mp.vocab_only = vocab_only;
    mp.no_repack = o->no_repack;
    ps_status st = ps_model_load(path, &mp, &l->model, &err);
    if (st != PS_OK) {
        fprintf(stderr, "promptscore %s: cannot load %s: %s\n", cmd, path,
                err.message[0] ? err.message : ps_status_str(st));
        ps_cli_unload(l);
        return 1;
    }
    ps_model_get_info(l->model, &l->info);
    l->vocab = ps_model_vocab(l->model);
    if (!vocab_only && o->want_cache && o->cache_mb != 0) {
        ps_prefix_cache_params cp = ps_prefix_cache_default_params();
        cp.budget_bytes = o->cache_mb < 0 ? ps_cli_default_cache_bytes() : o->cache_mb << 20;
        if ((st = ps_prefix_cache_create(l->model, &cp, &l->cache, &err)) != PS_OK) {
            fprintf(stderr, "promptscore %s: cannot create the prefix cache: %s\n", cmd,
                    err.message);
            ps_cli_unload(l);
            return 1;
        }
    }
    if (vocab_only || o->no_session) return 0;
    if ((st = ps_pool_create(o->threads, &l->pool)) != PS_OK) {
        fprintf(stderr, "promptscore %s: cannot start %d threads: %s\n", cmd, o->threads,
                ps_status_str(st));
        ps_cli_unload(l);
        return 1;
    }
    ps_session_params sp = ps_session_default_params();
    sp.n_ctx = l->info.n_ctx;
    sp.n_batch = o->chunk > 0 ? o->chunk : PS_CHUNK;
    sp.pool = l->pool;
    sp.act = o->act;
    sp.kv_type = o->kv_type;
    if ((st = ps_session_create(l->model, &sp, &l->session, &err)) != PS_OK) {
        fprintf(stderr, "promptscore %s: cannot create a session of %d positions: %s\n", cmd,
                sp.n_ctx, err.message);
        ps_cli_unload(l);
        return 1;
    }
    return 0;
}

/* ---- progress ---------------------------------------------------------------------------- */

void ps_cli_progress_start(ps_cli_progress *p, bool force) {
    p->tty = isatty(STDERR_FILENO) != 0;
    p->on = p->tty || force;
    p->t0 = p->last = ps_now_s();
}

void ps_cli_progress_show(ps_cli_progress *p, const char *what, int64_t done, int64_t total,
                          int64_t tokens, bool force) {
    if (!p->on) return;
    double t = ps_now_s();
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

void ps_cli_progress_end(ps_cli_progress *p) {
    if (p->on && p->tty) fputs("\r\033[K", stderr);
}
