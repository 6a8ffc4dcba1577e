/*
 * cli_perplexity.c — `promptscore perplexity`: the perplexity of a text file, two ways.
 *
 * --ppl-mode sliding (the default): windows of -c tokens advancing by --stride; the first
 * window scores all its tokens, each later one only the tokens no window has scored yet, so
 * every token but the first is scored exactly once, with as much context as its window
 * allows. The logprobs are ps_score_tokens' (float32, bitwise those of a float32 log-softmax).
 *
 * --ppl-mode llama: llama.cpp's llama-perplexity procedure, so the number compares with the
 * ones people quote. The whole file, less one trailing newline (as llama.cpp's -f reads it), is
 * tokenized first (BOS in front when the model adds one, special-token text left as text); it is cut into floor(n / c) non-overlapping chunks of
 * c = -c tokens (default 512, as there; --chunks N keeps the first N), and at least 2c tokens
 * are needed. Each chunk is evaluated from an empty cache with its first token replaced by BOS
 * (when the model adds one); only the second half is scored: the logits at positions
 * c/2 .. c-2 predict tokens c/2+1 .. c-1, so c - c/2 - 1 tokens per chunk. Each token's
 * negative log-likelihood is computed as llama-perplexity computes it: the maximum logit m in
 * float, sum = Σ expf(logit - m) accumulated in double in vocabulary order, and
 * nll = -((float)(logit_tok - m) - log(sum)) in double; nll and nll² are summed in double.
 * After each chunk the running estimate exp(Σnll / count) is printed as "[i]x.xxxx,", and at
 * the end "Final estimate: PPL = X +/- Y" with
 *     mean = Σnll / count,  var = Σnll² / count - mean²,  Y = sqrt(var / (count - 1)) * X.
 * The logits are this engine's; with no --kv-type this mode takes f16-dot, llama-perplexity's
 * own attention arithmetic (its default F16 cache, without flash attention, rounds the queries
 * and the softmax probabilities to half as well), so that the two differ by the order of
 * float32 sums only. --json prints one summary object instead (either mode).
 *
 * --ppl-mode llama --compare OTHER.gguf: llama-perplexity's --kl-divergence, in one pass. The
 * -m model is the base, OTHER the one compared with it ("Q"); the library runs both over the
 * same chunks, batch by batch (ps_perplexity with ps_ppl_params.compares; the statistics and
 * their formulas are src/score/ppl_compare.c's), and this file prints them with llama.cpp's
 * labels and layout: after each chunk a row of running PPL(Q), ln(PPL(Q)/PPL(base)), KLD, RMS
 * Δp and same top p, each "± error"; then the three statistics blocks (--json: one object).
 * Unlike llama.cpp the statistics are printed for fewer than 100 tokens too. --compare given
 * several times (or a comma list) compares every model in the same pass, the base running
 * once: each chunk prints one row per model (its name after it), the end one block per model
 * (headed "====== Compared model: NAME ======"), --json an array of the objects, each with
 * "model". With one --compare the output is as it always was.
 */
#include "cli/cli.h"
#include "model/vocab.h"
#include "run/session.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *PPL_ABOUT =
    "Perplexity of a text. --ppl-mode sliding (default): windows of -c tokens advance by\n"
    "--stride; every token is scored once, with as much context as its window gives (the\n"
    "first window scores all its tokens, later ones only the new ones). --ppl-mode llama:\n"
    "llama-perplexity's procedure (non-overlapping chunks of -c tokens, default 512, BOS at\n"
    "the start of each, the second half of each scored; prints its running estimate and\n"
    "\"Final estimate: PPL = X +/- Y\"), so the numbers compare; its --kv-type default is\n"
    "f16-dot, llama-perplexity's F16 cache and attention roundings. docs/api.md has both.\n";

enum { MODE_SLIDING, MODE_LLAMA };

static bool opt_mode(const char *cmd, const char *opt, const char *v, void *dst) {
    if (!strcmp(v, "sliding")) *(int *)dst = MODE_SLIDING;
    else if (!strcmp(v, "llama")) *(int *)dst = MODE_LLAMA;
    else {
        fprintf(stderr, "promptscore %s: %s wants sliding or llama, got '%s'\n", cmd, opt, v);
        return false;
    }
    return true;
}

/* ---- --compare: llama-perplexity's --kl-divergence statistics (ps_ppl_compare) ---------- */

/* The row printed after each chunk, as llama-perplexity prints it; with several compared
 * models one row each, the model's name after it. */
static void kld_chunk_row(const ps_ppl_compare *k, int32_t chunk, const char *name) {
    printf("%4d", chunk);
    printf("    %9.4f ± %9.4f", k->ppl_q, k->ppl_q_stderr);
    printf("    %10.5f ± %10.5f", k->ln_ppl_ratio, k->ln_ppl_ratio_stderr);
    printf("    %10.5f ± %10.5f", k->kld_mean, k->kld_mean_stderr);
    printf("    %6.3f ± %6.3f %%", 100.0 * k->rms_dp, 100.0 * k->rms_dp_stderr);
    printf("    %6.3f ± %6.3f %%", 100.0 * k->same_top, 100.0 * k->same_top_stderr);
    if (name) printf("    %s", name);
    printf("\n");
}

/* The closing statistics of one compared model: llama-perplexity's three blocks, or one JSON
 * object (with "model" when named: several compared models). */
static void kld_report(const ps_ppl_compare *k, bool json, int32_t n, int32_t n_chunk,
                       int32_t n_ctx, const char *name) {
    static const char *kl_lab[] = {"99.9%", "99.0%", "95.0%", "90.0%", "10.0%", " 5.0%",
                                   " 1.0%", " 0.1%"};
    static const char *p_lab[] = {"99.9%", "99.0%", "95.0%", "90.0%", "75.0%",
                                  "25.0%", "10.0%", " 5.0%", " 1.0%", " 0.1%"};
    static const char *kl_key[] = {"kld_p99_9", "kld_p99", "kld_p95", "kld_p90",
                                   "kld_p10", "kld_p5", "kld_p1", "kld_p0_1"};
    static const char *p_key[] = {"dp_p99_9_pct", "dp_p99_pct", "dp_p95_pct", "dp_p90_pct",
                                  "dp_p75_pct", "dp_p25_pct", "dp_p10_pct", "dp_p5_pct",
                                  "dp_p1_pct", "dp_p0_1_pct"};
    if (json) {
        printf("{\"mode\":\"llama\",\"compare\":true,");
        if (name) {
            ps_buf nb;
            ps_buf_init(&nb);
            ps_buf_puts(&nb, "\"model\":");
            ps_json_str(&nb, name, strlen(name));
            printf("%.*s,", nb.data ? (int)nb.len : 0, nb.data ? nb.data : "");
            ps_buf_free(&nb);
        }
        printf("\"tokens_scored\":%lld,\"tokens\":%d,"
               "\"chunks\":%d,\"ctx\":%d,\"ppl_q\":%.17g,\"ppl_q_stderr\":%.17g,"
               "\"ppl_base\":%.17g,\"ppl_base_stderr\":%.17g,\"cor_ln_ppl\":%.17g,"
               "\"ln_ppl_ratio\":%.17g,\"ln_ppl_ratio_stderr\":%.17g,\"ppl_ratio\":%.17g,"
               "\"ppl_ratio_stderr\":%.17g,\"ppl_diff\":%.17g,\"ppl_diff_stderr\":%.17g,"
               "\"kld_mean\":%.17g,\"kld_mean_stderr\":%.17g,\"kld_max\":%.9g",
               (long long)k->count, (int)n, (int)n_chunk, (int)n_ctx, k->ppl_q, k->ppl_q_stderr,
               k->ppl_base, k->ppl_base_stderr, k->cor_ln_ppl, k->ln_ppl_ratio,
               k->ln_ppl_ratio_stderr, k->ppl_ratio, k->ppl_ratio_stderr, k->ppl_diff,
               k->ppl_diff_stderr, k->kld_mean, k->kld_mean_stderr, (double)k->kld_max);
        for (int i = 0; i < 8; i++) {
            printf(",\"%s\":%.9g", kl_key[i], (double)k->kld_pct[i]);
            if (i == 3) printf(",\"kld_median\":%.9g", (double)k->kld_median);
        }
        printf(",\"kld_min\":%.9g,\"dp_mean_pct\":%.17g,\"dp_mean_pct_stderr\":%.17g,"
               "\"dp_max_pct\":%.9g", (double)k->kld_min, 100.0 * k->dp_mean,
               100.0 * k->dp_mean_stderr, 100.0 * k->dp_max);
        for (int i = 0; i < 10; i++) {
            printf(",\"%s\":%.9g", p_key[i], 100.0 * k->dp_pct[i]);
            if (i == 4) printf(",\"dp_median_pct\":%.9g", 100.0 * k->dp_median);
        }
        printf(",\"dp_min_pct\":%.9g,\"rms_dp_pct\":%.17g,\"rms_dp_pct_stderr\":%.17g,"
               "\"same_top_p_pct\":%.17g,\"same_top_p_pct_stderr\":%.17g}",
               100.0 * k->dp_min, 100.0 * k->rms_dp, 100.0 * k->rms_dp_stderr,
               100.0 * k->same_top, 100.0 * k->same_top_stderr);
        return;
    }
    printf("\n");
    if (name) printf("====== Compared model: %s ======\n\n", name);
    printf("====== Perplexity statistics ======\n");
    printf("Mean PPL(Q)                   : %10.6f ± %10.6f\n", k->ppl_q, k->ppl_q_stderr);
    printf("Mean PPL(base)                : %10.6f ± %10.6f\n", k->ppl_base, k->ppl_base_stderr);
    printf("Cor(ln(PPL(Q)), ln(PPL(base))): %6.2f%%\n", 100.0 * k->cor_ln_ppl);
    printf("Mean ln(PPL(Q)/PPL(base))     : %10.6f ± %10.6f\n", k->ln_ppl_ratio,
           k->ln_ppl_ratio_stderr);
    printf("Mean PPL(Q)/PPL(base)         : %10.6f ± %10.6f\n", k->ppl_ratio,
           k->ppl_ratio_stderr);
    printf("Mean PPL(Q)-PPL(base)         : %10.6f ± %10.6f\n", k->ppl_diff, k->ppl_diff_stderr);
    printf("\n");
    printf("====== KL divergence statistics ======\n");
    printf("Mean    KLD: %10.6f ± %10.6f\n", k->kld_mean, k->kld_mean_stderr);
    printf("Maximum KLD: %10.6f\n", (double)k->kld_max);
    for (int i = 0; i < 8; i++) {
        printf("%s   KLD: %10.6f\n", kl_lab[i], (double)k->kld_pct[i]);
        if (i == 3) printf("Median  KLD: %10.6f\n", (double)k->kld_median);
    }
    printf("Minimum KLD: %10.6f\n", (double)k->kld_min);
    printf("\n");
    printf("====== Token probability statistics ======\n");
    printf("Mean    Δp: %6.3f ± %5.3f %%\n", 100.0 * k->dp_mean, 100.0 * k->dp_mean_stderr);
    printf("Maximum Δp: %6.3f%%\n", 100.0 * k->dp_max);
    for (int i = 0; i < 10; i++) {
        printf("%s   Δp: %6.3f%%\n", p_lab[i], 100.0 * k->dp_pct[i]);
        if (i == 4) printf("Median  Δp: %6.3f%%\n", 100.0 * k->dp_median);
    }
    printf("Minimum Δp: %6.3f%%\n", 100.0 * k->dp_min);
    printf("RMS Δp    : %6.3f ± %5.3f %%\n", 100.0 * k->rms_dp, 100.0 * k->rms_dp_stderr);
    printf("Same top p: %6.3f ± %5.3f %%\n", 100.0 * k->same_top, 100.0 * k->same_top_stderr);
}

/* What the on_window callbacks print with: the command's state between ps_perplexity's
 * windows or chunks. */
typedef struct {
    ps_cli_progress pr;
    bool json, per_token, write_failed;
    int32_t n, ctx;
    const int32_t *ids;
    const ps_vocab *vocab;
    ps_buf b;
} ppl_print;

/* llama mode: the running estimate after each chunk, "[i]x.xxxx," as llama-perplexity prints;
 * with --compare its --kl-divergence row instead (one per compared model) */
static bool llama_window(void *user, const ps_ppl_window *w) {
    ppl_print *pp = user;
    if (!pp->json && w->n_compares > 0) {
        if (w->index == 1) /* the header once, before the first row */
            printf("\nchunk             PPL               ln(PPL(Q)/PPL(base))          KL Divergence"
                   "              Δp RMS            Same top p\n");
        for (int32_t i = 0; i < w->n_compares; i++)
            kld_chunk_row(&w->compares[i], w->index,
                          w->n_compares > 1 ? w->compares[i].model : NULL);
        fflush(stdout);
    } else if (!pp->json) {
        printf("[%d]%.4f,", w->index, w->running);
        fflush(stdout);
    }
    ps_cli_progress_show(&pp->pr, "chunks", w->index, w->n_windows,
                         (int64_t)w->index * pp->ctx, false);
    return true;
}

/* sliding mode: --per-token's line for each token the window scored, then the progress */
static bool sliding_window(void *user, const ps_ppl_window *w) {
    ppl_print *pp = user;
    for (int32_t j = 0; pp->per_token && j < w->n; j++) {
        const int32_t i = w->first + j;
        ps_buf *b = &pp->b;
        ps_buf_reset(b);
        ps_buf_printf(b, "{\"i\":%d,\"id\":%d,\"text\":", i, pp->ids[i]);
        ps_buf tt;
        ps_buf_init(&tt);
        ps_token_text(&tt, pp->vocab, pp->ids[i]);
        ps_json_str(b, tt.data ? tt.data : "", tt.len);
        ps_buf_free(&tt);
        ps_buf_puts(b, ",\"logprob\":");
        ps_json_f32(b, w->logprobs[j]);
        ps_buf_puts(b, "}\n");
        if (b->oom || fwrite(b->data, 1, b->len, stdout) != b->len) {
            pp->write_failed = true;
            return false;
        }
    }
    ps_cli_progress_show(&pp->pr, "tokens scored", w->tokens_scored, pp->n - 1,
                         (int64_t)w->index * pp->ctx, false);
    return true;
}

/* Runs ps_perplexity with the printing callbacks; the result or NULL (the error printed). */
static ps_ppl_result *ppl_run(const char *cmd, ps_cli_loaded *l, const ps_ppl_params *p,
                              ppl_print *pp) {
    ps_ppl_params q = *p;
    q.on_window = p->mode == PS_PPL_LLAMA ? llama_window : sliding_window;
    q.user = pp;
    ps_ppl_result *r = NULL;
    ps_error err;
    ps_error_clear(&err);
    ps_status st = ps_perplexity(l->session, pp->ids, pp->n, &q, &r, &err);
    ps_cli_progress_end(&pp->pr);
    if (st == PS_OK) return r;
    if (pp->write_failed) fprintf(stderr, "promptscore %s: write failed\n", cmd);
    else fprintf(stderr, "promptscore %s: %s\n", cmd, err.message);
    return NULL;
}

static int ppl_llama(const char *cmd, ps_cli_loaded *l, ps_session *const *cmps, int32_t n_cmp,
                     const int32_t *ids, int32_t n, int32_t n_ctx, int32_t max_chunks,
                     int32_t batch, bool json) {
    if (n < 2 * n_ctx) {
        fprintf(stderr, "promptscore %s: --ppl-mode llama needs at least %d tokens (2 x -c %d); "
                        "the text has %d\n", cmd, 2 * n_ctx, n_ctx, n);
        return 1;
    }
    ppl_print pp = {.json = json, .n = n, .ctx = n_ctx, .ids = ids, .vocab = l->vocab};
    ps_cli_progress_start(&pp.pr, false);
    pp.pr.on = pp.pr.on && json; /* the running estimate is the progress otherwise */
    ps_ppl_params p = ps_ppl_default_params();
    p.mode = PS_PPL_LLAMA;
    p.ctx = n_ctx;
    p.max_chunks = max_chunks;
    p.chunk = batch;
    p.compares = cmps;
    p.n_compares = n_cmp;
    ps_ppl_result *r = ppl_run(cmd, l, &p, &pp);
    if (!r) return 1;
    if (n_cmp > 0) { /* llama-perplexity --kl-divergence's blocks, one per compared model */
        if (json && n_cmp > 1) printf("[");
        for (int32_t i = 0; i < r->n_compares; i++) {
            if (json && i) printf(",");
            kld_report(&r->compares[i], json, n, r->n_windows, n_ctx,
                       n_cmp > 1 ? r->compares[i].model : NULL);
        }
        if (json) printf(n_cmp > 1 ? "]\n" : "\n");
    } else if (json) {
        printf("{\"mode\":\"llama\",\"perplexity\":%.17g,\"perplexity_stderr\":%.17g,"
               "\"mean_nll\":%.17g,\"tokens_scored\":%lld,\"tokens\":%d,\"chunks\":%d,\"ctx\":%d,"
               "\"running\":[",
               r->perplexity, r->perplexity_stderr, r->mean_nll, (long long)r->tokens_scored,
               (int)n, (int)r->n_windows, (int)n_ctx);
        for (int32_t c = 0; c < r->n_windows; c++) printf("%s%.17g", c ? "," : "", r->running[c]);
        printf("]}\n");
    } else {
        printf("\nFinal estimate: PPL = %.4f +/- %.5f\n", r->perplexity, r->perplexity_stderr);
    }
    ps_ppl_result_free(r);
    return fflush(stdout) == 0 ? 0 : 1;
}

static int ppl_sliding(const char *cmd, ps_cli_loaded *l, const int32_t *ids, int32_t n,
                       int32_t stride, int32_t chunk, bool per_token, bool json,
                       const char *text_path) {
    int32_t ctx = l->info.n_ctx;
    if (stride == 0) stride = PS_MAX(1, ctx / 2);
    if (stride > ctx) {
        fprintf(stderr, "promptscore %s: --stride %d is longer than the window (-c %d): tokens "
                        "would be skipped\n", cmd, stride, ctx);
        return 2;
    }
    if (n < 2) {
        fprintf(stderr, "promptscore %s: %s has %d token(s); need at least 2\n", cmd, text_path, n);
        return 1;
    }
    ppl_print pp = {.json = json, .per_token = per_token, .n = n, .ctx = ctx, .ids = ids,
                    .vocab = l->vocab};
    ps_buf_init(&pp.b);
    ps_cli_progress_start(&pp.pr, false);
    ps_ppl_params p = ps_ppl_default_params();
    p.ctx = ctx;
    p.stride = stride;
    p.chunk = chunk;
    ps_ppl_result *r = ppl_run(cmd, l, &p, &pp);
    ps_buf_free(&pp.b);
    if (!r) return 1;
    if (json) {
        printf("{\"mode\":\"sliding\",\"perplexity\":%.17g,\"mean_nll\":%.17g,"
               "\"tokens_scored\":%lld,\"tokens\":%d,\"windows\":%lld,\"ctx\":%d,\"stride\":%d}\n",
               r->perplexity, r->mean_nll, (long long)r->tokens_scored, (int)n,
               (long long)r->n_windows, ctx, stride);
    } else {
        FILE *sum = per_token ? stderr : stdout;
        fprintf(sum, "perplexity %.6f  mean NLL %.6f  tokens %lld  (windows %lld, ctx %d, "
                     "stride %d)\n",
                r->perplexity, r->mean_nll, (long long)r->tokens_scored,
                (long long)r->n_windows, ctx, stride);
    }
    /* the result line holds no wall-clock figure (runs are compared byte for byte) */
    double el = ps_now_s() - pp.pr.t0;
    fprintf(stderr, "promptscore %s: %lld tokens in %.2fs, %.0f tokens/s\n", cmd,
            (long long)r->tokens_scored, el, el > 0 ? (double)r->tokens_scored / el : 0.0);
    ps_ppl_result_free(r);
    return fflush(stdout) == 0 ? 0 : 1;
}

static int ppl_main(const char *cmd, ps_cli_model_opts *op, const char *text_path,
                    int32_t stride, int32_t max_chunks, int mode, bool per_token, bool json,
                    ps_cli_compares *cmp);

int ps_cli_perplexity(int argc, char **argv) {
    const char *cmd = argv[0];
    /* kv_type: unset (-1) until an option sets it; each mode then has its default */
    ps_cli_model_opts o = {.chunk = PS_CHUNK, .kv_type = (ps_kv_type)-1};
    const char *text_path = NULL;
    ps_cli_compares cmp;
    memset(&cmp, 0, sizeof cmp);
    int32_t stride = 0, max_chunks = 0;
    int mode = MODE_SLIDING;
    bool per_token = false, json = false;
    const ps_cli_opt model_opts[] = {
        PS_CLI_OPTS_MODEL(&o),
        PS_CLI_OPT_CTX(&o, "window (sliding; default: the model's context) or chunk\n"
                           "(llama; default 512) length in tokens"),
        PS_CLI_OPT_THREADS(&o),
        PS_CLI_OPT_CHUNK(&o),
        PS_CLI_OPT_ACT(&o),
        PS_CLI_OPT_KV_TYPE(&o),
        PS_CLI_OPT_REPACK(&o),
        {0}};
    const ps_cli_opt ppl_opts[] = {
        {"-f, --file", "FILE", "the text ('-' for stdin)", PS_CLI_STR, &text_path},
        {"--ppl-mode", "MODE", "sliding (default) or llama (llama-perplexity's procedure)",
         PS_CLI_FN, &mode, 0, 0, opt_mode},
        {"--stride", "S", "sliding: window advance, 1..ctx (default ctx / 2)", PS_CLI_I32,
         &stride, 1, INT32_MAX},
        {"--chunks", "N", "llama: use at most the first N chunks (default: all)", PS_CLI_I32,
         &max_chunks, 1, INT32_MAX},
        {"--per-token", NULL, "sliding: JSON Lines of every scored token on stdout\n"
         "{i, id, text, logprob}; the summary then goes to stderr", PS_CLI_FLAG, &per_token},
        {"--json", NULL, "print the summary as one JSON object", PS_CLI_FLAG, &json},
        {"--compare", "FILE", "llama: compare with this GGUF (same vocabulary) as\n"
         "llama-perplexity --kl-divergence does, in one pass: KLD, Δp and same\n"
         "top p blocks (its labels and layout; --json: one object); the -m\n"
         "model is the base. Repeat it (or give a comma list) to compare\n"
         "several models in the same pass (the base runs once): a row per model\n"
         "and chunk, one block per model (--json: an array of the objects,\n"
         "each with \"model\")", PS_CLI_FN, &cmp, 0, 0, ps_cli_opt_compare},
        {0}};
    const ps_cli_opt *const tables[] = {model_opts, ppl_opts, NULL};
    const ps_cli_cmd c = {"perplexity", "-m MODEL.gguf -f text.txt [options]", PPL_ABOUT, tables};
    int prc = ps_cli_parse(&c, argc, argv);
    if (prc >= 0) {
        ps_cli_compares_free(&cmp);
        return prc;
    }
    int rc = ppl_main(cmd, &o, text_path, stride, max_chunks, mode, per_token, json, &cmp);
    ps_cli_compares_free(&cmp);
    return rc;
}

/* The command after its options are parsed (cmp: the --compare paths, freed by the caller). */
static int ppl_main(const char *cmd, ps_cli_model_opts *op, const char *text_path,
                    int32_t stride, int32_t max_chunks, int mode, bool per_token, bool json,
                    ps_cli_compares *cmp) {
    ps_cli_model_opts o = *op;
    if (!text_path) {
        fprintf(stderr, "promptscore %s: no text: give -f FILE (promptscore %s --help)\n", cmd, cmd);
        return 2;
    }
    if (mode == MODE_LLAMA && (per_token || stride)) {
        fprintf(stderr, "promptscore %s: %s is for --ppl-mode sliding\n", cmd,
                per_token ? "--per-token" : "--stride");
        return 2;
    }
    if (mode == MODE_SLIDING && cmp->n) {
        fprintf(stderr, "promptscore %s: --compare is for --ppl-mode llama\n", cmd);
        return 2;
    }
    if (mode == MODE_SLIDING && max_chunks) {
        fprintf(stderr, "promptscore %s: --chunks is for --ppl-mode llama\n", cmd);
        return 2;
    }
    if (per_token && json) {
        fprintf(stderr, "promptscore %s: --per-token and --json exclude each other\n", cmd);
        return 2;
    }
    if ((int)o.kv_type == -1) o.kv_type = mode == MODE_LLAMA ? PS_KV_F16_DOT : PS_KV_F32;
    if (mode == MODE_LLAMA) {
        if (o.n_ctx == 0) o.n_ctx = 512;
        if (o.n_ctx < 3) {
            fprintf(stderr, "promptscore %s: --ppl-mode llama needs -c >= 3 (got %d): a chunk "
                            "scores c - c/2 - 1 tokens\n", cmd, o.n_ctx);
            return 2;
        }
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
    ps_cli_loaded l;
    int rc = ps_cli_load(cmd, &o, false, &l);
    if (rc) {
        free(text);
        return rc;
    }
    ps_session *cs[PS_CLI_MAX_COMPARE] = {0};
    if (cmp->n) {
        rc = ps_cli_load_compares(cmd, &o, &l, cmp);
        for (int i = 0; rc == 0 && i < cmp->n; i++) {
            ps_session_params sp = ps_session_default_params();
            sp.n_ctx = l.info.n_ctx;
            sp.n_batch = o.chunk > 0 ? o.chunk : PS_CHUNK;
            sp.pool = l.pool;
            sp.act = o.act;
            sp.kv_type = o.kv_type;
            ps_error cerr;
            ps_error_clear(&cerr);
            if (ps_session_create(cmp->models[i], &sp, &cs[i], &cerr) != PS_OK) {
                fprintf(stderr, "promptscore %s: --compare: cannot create a session of %s: %s\n",
                        cmd, cmp->paths[i], cerr.message);
                rc = 1;
            } else { /* all run one after the other by this thread: one workspace for all */
                (void)ps_session_share_workspace(cs[i], l.session);
            }
        }
        if (rc) {
            for (int i = 0; i < cmp->n; i++) ps_session_free(cs[i]);
            free(text);
            ps_cli_unload(&l);
            return rc;
        }
    }
    /* llama-perplexity reads -f and drops one trailing newline before tokenizing */
    if (mode == MODE_LLAMA && tlen > 0 && text[tlen - 1] == '\n') tlen--;
    int32_t *ids = NULL, n = 0;
    ps_error err;
    ps_error_clear(&err);
    if (ps_vocab_tokenize_alloc(l.vocab, text, tlen, ps_vocab_add_bos(l.vocab), false, &ids, &n,
                                &err) != PS_OK) {
        fprintf(stderr, "promptscore %s: cannot tokenise %s: %s\n", cmd, text_path, err.message);
        rc = 1;
    } else if (mode == MODE_LLAMA) {
        rc = ppl_llama(cmd, &l, cs, cmp->n, ids, n, o.n_ctx, max_chunks, o.chunk, json);
    } else {
        rc = ppl_sliding(cmd, &l, ids, n, stride, o.chunk, per_token, json, text_path);
    }
    ps_free(ids);
    free(text);
    for (int i = 0; i < cmp->n; i++) ps_session_free(cs[i]);
    ps_cli_unload(&l);
    return rc;
}
