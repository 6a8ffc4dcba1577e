/*
 * cli_format.c — the views of `promptscore score --format table | summary`: the same scores
 * as the JSON Lines, written for a person reading a terminal.
 *
 *   table    per prompt a header (id, tokens, sum logprob, mean NLL, perplexity), then one row
 *            per token: index, its text (JSON-escaped, so spaces and newlines show), logprob,
 *            rank among the top-K (">K" when outside), and the top 3 with their logprobs.
 *            On a terminal (and NO_COLOR unset) the logprob is coloured: green >= -1,
 *            yellow >= -4, red below.
 *   summary  one line per prompt: tokens, sum and mean NLL, perplexity and the three most
 *            surprising tokens; a total line at the end.
 * Mean NLL and perplexity are over the scored tokens (entries 1..n-1; entry 0 has no
 * distribution), as in the JSON Lines fields mean_logprob and perplexity.
 *
 * With --stats the table's rank column is the exact rank in the whole vocabulary (the result's
 * rank, not ">K") and an "entropy" column follows it; with --compare three columns follow:
 * "kld", "same" (1 / 0: same top-1) and "dp". The summary line then adds "mean entropy" and
 * "top-1" (the share of scored tokens that were their position's top-1, in percent), and
 * "kld_mean" and "same_top1" (percent) as the JSON Lines' kld_mean and same_top1_pct; the
 * total line adds the same over every scored token of every prompt. Without either flag every
 * byte is as before.
 */
#include "cli/cli.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

void ps_cli_view_init(ps_cli_view *v, int format, bool color) {
    memset(v, 0, sizeof *v);
    v->format = format;
    v->color = color;
}

/* Appends the token's display text JSON-escaped; returns the code points written. */
static int64_t put_token(ps_buf *b, const ps_vocab *vocab, int32_t id) {
    ps_buf t, j;
    ps_buf_init(&t);
    ps_buf_init(&j);
    ps_token_text(&t, vocab, id);
    ps_json_str(&j, t.data ? t.data : "", t.len);
    int64_t cps = 0;
    for (size_t i = 0; i < j.len; i++) cps += ((unsigned char)j.data[i] & 0xC0) != 0x80;
    ps_buf_append(b, j.data ? j.data : "", j.len);
    if (t.oom || j.oom) b->oom = true;
    ps_buf_free(&t);
    ps_buf_free(&j);
    return cps;
}

static void pad(ps_buf *b, int64_t have, int64_t want) {
    for (int64_t i = have; i < want; i++) ps_buf_append(b, " ", 1);
}

static const char *colour(const ps_cli_view *v, float lp) {
    if (!v->color) return "";
    return lp >= -1.0f ? "\033[32m" : lp >= -4.0f ? "\033[33m" : "\033[31m";
}

/* Writes a value no number format prints as a figure ("-" for NaN, "inf" / "-inf") and says
 * whether it did; callers print a finite x with a literal format, so the compiler checks it. */
static bool put_special(ps_buf *b, double x) {
    if (isnan(x)) ps_buf_puts(b, "-");
    else if (isinf(x)) ps_buf_puts(b, x < 0 ? "-inf" : "inf");
    else return false;
    return true;
}

/* x with `prec` decimals, or as put_special */
static void put_fixed(ps_buf *b, double x, int prec) {
    if (!put_special(b, x)) ps_buf_printf(b, "%.*f", prec, x);
}

/* a share in percent, two decimals and "%", or as put_special */
static void put_percent(ps_buf *b, double x) {
    if (!put_special(b, x)) ps_buf_printf(b, "%.2f%%", x);
}

/* One prompt's mean of x and share (percent) of entries whose flag is 1, over the scored
 * entries 1..n-1, printed after their labels and added to the view's totals. */
static void mean_share_put(ps_buf *b, const float *x, const int32_t *flag, int32_t n,
                           const char *mean_label, int mean_prec, const char *share_label,
                           double *sum, int64_t *hits) {
    const int32_t m = n > 1 ? n - 1 : 0;
    double s = 0.0;
    int64_t h = 0;
    for (int32_t i = 1; i < n; i++) {
        s += (double)x[i];
        h += flag[i] == 1;
    }
    *sum += s;
    *hits += h;
    ps_buf_puts(b, mean_label);
    put_fixed(b, m ? s / m : NAN, mean_prec);
    ps_buf_puts(b, share_label);
    put_percent(b, m ? 100.0 * (double)h / m : NAN);
}

/* The summary's --stats / --compare figures of one prompt: mean entropy and top-1 share (rank
 * 1), kld_mean and same top-1 share. */
static void stats_put(ps_cli_view *v, ps_buf *b, const ps_score_result *r) {
    if (r->entropy) {
        v->stats = true;
        mean_share_put(b, r->entropy, r->rank, r->n_prompt, "  mean entropy ", 4, "  top-1 ",
                       &v->sum_entropy, &v->n_top1);
    }
    if (r->kld) {
        v->compare = true;
        mean_share_put(b, r->kld, r->same_top1, r->n_prompt, "  kld_mean ", 6,
                       "  same_top1 ", &v->sum_kld, &v->n_same);
    }
}

void ps_cli_view_result(ps_cli_view *v, ps_buf *b, const ps_vocab *vocab,
                        const ps_jsonl_req *req, const ps_score_result *r) {
    const int32_t n = r->n_prompt, k = r->k;
    const double mean = n > 1 ? r->sum_logprob / (double)(n - 1) : NAN;
    v->prompts++;
    v->tokens += n;
    if (n > 1) {
        v->scored += n - 1;
        v->sum += r->sum_logprob;
    }
    const char *id = req->id_json ? req->id_json : "null";
    if (v->format == PS_CLI_FORMAT_TABLE) {
        ps_buf_printf(b, "== id %s: %d tokens, sum logprob ", id, (int)n);
        put_fixed(b, r->sum_logprob, 4);
        ps_buf_puts(b, ", mean NLL ");
        put_fixed(b, -mean, 4);
        ps_buf_puts(b, ", perplexity ");
        put_fixed(b, exp(-mean), 4);
        ps_buf_printf(b, "\n%5s  %-24s %10s %5s", "#", "token", "logprob", "rank");
        if (r->entropy) ps_buf_printf(b, " %8s", "entropy");
        if (r->kld) ps_buf_printf(b, " %10s %4s %8s", "kld", "same", "dp");
        ps_buf_printf(b, "  top %d\n", k < 3 ? k : 3);
        for (int32_t i = 0; i < n; i++) {
            ps_buf_printf(b, "%5d  ", (int)i);
            pad(b, put_token(b, vocab, r->tokens[i]), 24);
            float lp = r->logprobs[i];
            if (isnan(lp)) {
                ps_buf_printf(b, " %10s %5s", "-", "-");
                if (r->entropy) ps_buf_printf(b, " %8s", "-");
                if (r->kld) ps_buf_printf(b, " %10s %4s %8s", "-", "-", "-");
                ps_buf_puts(b, "\n");
                continue;
            }
            const int32_t *ids = r->top_ids + (size_t)i * (size_t)k;
            const float *lps = r->top_logprobs + (size_t)i * (size_t)k;
            int rank = 0;
            for (int32_t j = 0; j < k; j++)
                if (ids[j] == r->tokens[i]) {
                    rank = j + 1;
                    break;
                }
            ps_buf_printf(b, " %s", colour(v, lp));
            char num[32];
            if (isinf(lp)) snprintf(num, sizeof num, "%10s", "-inf");
            else snprintf(num, sizeof num, "%10.4f", (double)lp);
            ps_buf_puts(b, num);
            ps_buf_puts(b, v->color ? "\033[0m" : "");
            if (r->rank) ps_buf_printf(b, " %5d", (int)r->rank[i]);
            else if (rank) ps_buf_printf(b, " %5d", rank);
            else ps_buf_printf(b, " %4s%d", ">", (int)k);
            if (r->entropy) {
                ps_buf_puts(b, " ");
                if (!put_special(b, r->entropy[i]))
                    ps_buf_printf(b, "%8.4f", (double)r->entropy[i]);
            }
            if (r->kld) {
                ps_buf_puts(b, " ");
                if (!put_special(b, r->kld[i]))
                    ps_buf_printf(b, "%10.3e", (double)r->kld[i]);
                ps_buf_printf(b, " %4d ", (int)r->same_top1[i]);
                if (!put_special(b, r->dp[i]))
                    ps_buf_printf(b, "%+8.4f", (double)r->dp[i]);
            }
            ps_buf_puts(b, "  ");
            for (int32_t j = 0; j < k && j < 3 && ids[j] >= 0; j++) {
                if (j) ps_buf_puts(b, "  ");
                put_token(b, vocab, ids[j]);
                ps_buf_puts(b, " ");
                put_fixed(b, lps[j], 2);
            }
            ps_buf_puts(b, "\n");
        }
        return;
    }
    /* summary */
    ps_buf_printf(b, "id %s  tokens %d  sum NLL ", id, (int)n);
    put_fixed(b, 0.0 - r->sum_logprob, 4);
    ps_buf_puts(b, "  mean NLL ");
    put_fixed(b, -mean, 4);
    ps_buf_puts(b, "  perplexity ");
    put_fixed(b, exp(-mean), 4);
    stats_put(v, b, r);
    /* the three lowest logprobs, earliest first among equals */
    int32_t worst[3] = {-1, -1, -1};
    for (int32_t i = 1; i < n; i++) {
        float lp = r->logprobs[i];
        for (int w = 0; w < 3; w++)
            if (worst[w] < 0 || lp < r->logprobs[worst[w]]) {
                for (int m = 2; m > w; m--) worst[m] = worst[m - 1];
                worst[w] = i;
                break;
            }
    }
    if (worst[0] >= 0) ps_buf_puts(b, "  most surprising:");
    for (int w = 0; w < 3 && worst[w] >= 0; w++) {
        ps_buf_printf(b, "%s #%d ", w ? "," : "", (int)worst[w]);
        put_token(b, vocab, r->tokens[worst[w]]);
        ps_buf_puts(b, " ");
        put_fixed(b, r->logprobs[worst[w]], 2);
    }
    ps_buf_puts(b, "\n");
}

void ps_cli_view_error(ps_cli_view *v, ps_buf *b, const ps_jsonl_req *req) {
    v->errors++;
    ps_buf_printf(b, "%sid %s  error: %s\n", v->format == PS_CLI_FORMAT_TABLE ? "== " : "",
                  req->id_json ? req->id_json : "null", req->err.message);
}

void ps_cli_view_end(ps_cli_view *v, ps_buf *b) {
    if (v->format != PS_CLI_FORMAT_SUMMARY) return;
    double mean = v->scored > 0 ? v->sum / (double)v->scored : NAN;
    ps_buf_printf(b, "total  prompts %lld  errors %lld  tokens %lld  scored %lld  mean NLL ",
                  (long long)v->prompts, (long long)v->errors, (long long)v->tokens,
                  (long long)v->scored);
    put_fixed(b, -mean, 4);
    ps_buf_puts(b, "  perplexity ");
    put_fixed(b, exp(-mean), 4);
    const double m = v->scored > 0 ? (double)v->scored : NAN;
    if (v->stats) {
        ps_buf_puts(b, "  mean entropy ");
        put_fixed(b, v->sum_entropy / m, 4);
        ps_buf_puts(b, "  top-1 ");
        put_percent(b, 100.0 * (double)v->n_top1 / m);
    }
    if (v->compare) {
        ps_buf_puts(b, "  kld_mean ");
        put_fixed(b, v->sum_kld / m, 6);
        ps_buf_puts(b, "  same_top1 ");
        put_percent(b, 100.0 * (double)v->n_same / m);
    }
    ps_buf_puts(b, "\n");
}
