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
 * The logits are this engine's (float32 KV cache; llama.cpp's default cache is F16), which is
 * where the two can differ. --json prints one summary object instead (either mode).
 */
#include "cli/cli.h"
#include "model/vocab.h"

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
    "\"Final estimate: PPL = X +/- Y\"), so the numbers compare. docs/api.md has both.\n";

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

/* llama-perplexity's negative log-likelihood of token tok under one row of logits. */
static double llama_nll(const float *logits, int32_t n_vocab, int32_t tok) {
    float mx = logits[0];
    for (int32_t i = 1; i < n_vocab; i++) mx = logits[i] > mx ? logits[i] : mx;
    double sum = 0.0;
    for (int32_t i = 0; i < n_vocab; i++) sum += expf(logits[i] - mx);
    float d = logits[tok] - mx;
    return -((double)d - log(sum));
}

static int ppl_llama(const char *cmd, ps_cli_loaded *l, const int32_t *ids, int32_t n,
                     int32_t n_ctx, int32_t max_chunks, int32_t batch, bool json) {
    if (n < 2 * n_ctx) {
        fprintf(stderr, "promptscore %s: --ppl-mode llama needs at least %d tokens (2 x -c %d); "
                        "the text has %d\n", cmd, 2 * n_ctx, n_ctx, n);
        return 1;
    }
    const int32_t n_vocab = l->info.n_vocab;
    int32_t n_chunk = n / n_ctx;
    if (max_chunks > 0 && max_chunks < n_chunk) n_chunk = max_chunks;
    const int32_t first = n_ctx / 2;
    const bool add_bos = ps_vocab_add_bos(l->vocab);
    int32_t *chunk = ps_malloc(sizeof(int32_t) * (size_t)n_ctx);
    float *logits = ps_malloc(sizeof(float) * (size_t)batch * (size_t)n_vocab);
    double *running = ps_malloc(sizeof(double) * (size_t)n_chunk);
    int rc = 1;
    if (!chunk || !logits || !running) {
        fprintf(stderr, "promptscore %s: out of memory\n", cmd);
        goto out;
    }
    ps_cli_progress pr;
    ps_cli_progress_start(&pr, false);
    pr.on = pr.on && json; /* the running estimate is the progress otherwise */
    double nll = 0.0, nll2 = 0.0;
    int64_t count = 0;
    for (int32_t c = 0; c < n_chunk; c++) {
        const int32_t start = c * n_ctx;
        memcpy(chunk, ids + start, sizeof(int32_t) * (size_t)n_ctx);
        if (add_bos) chunk[0] = ps_vocab_bos(l->vocab);
        ps_session_reset(l->session);
        for (int32_t p0 = 0; p0 < n_ctx; p0 += batch) {
            const int32_t nb = PS_MIN(batch, n_ctx - p0);
            ps_error err;
            ps_error_clear(&err);
            if (ps_session_forward(l->session, chunk + p0, nb, logits, &err) != PS_OK) {
                fprintf(stderr, "promptscore %s: chunk %d: %s\n", cmd, c + 1, err.message);
                goto out;
            }
            /* logits at positions first .. n_ctx - 2 predict the token after them */
            for (int32_t p = PS_MAX(p0, first); p < p0 + nb && p < n_ctx - 1; p++) {
                double v = llama_nll(logits + (size_t)(p - p0) * (size_t)n_vocab, n_vocab,
                                     ids[start + p + 1]);
                nll += v;
                nll2 += v * v;
            }
        }
        count += n_ctx - first - 1;
        running[c] = exp(nll / (double)count);
        if (!json) {
            printf("[%d]%.4f,", c + 1, running[c]);
            fflush(stdout);
        }
        ps_cli_progress_show(&pr, "chunks", c + 1, n_chunk, (int64_t)(c + 1) * n_ctx, false);
    }
    ps_cli_progress_end(&pr);
    const double mean = nll / (double)count;
    const double ppl = exp(mean);
    double var = nll2 / (double)count - mean * mean;
    if (!(var > 0)) {
        fprintf(stderr, "promptscore %s: unexpected negative variance of the log-likelihoods\n",
                cmd);
        goto out;
    }
    const double err_ppl = sqrt(var / (double)(count - 1)) * ppl;
    if (json) {
        printf("{\"mode\":\"llama\",\"perplexity\":%.17g,\"perplexity_stderr\":%.17g,"
               "\"mean_nll\":%.17g,\"tokens_scored\":%lld,\"tokens\":%d,\"chunks\":%d,\"ctx\":%d,"
               "\"running\":[",
               ppl, err_ppl, mean, (long long)count, (int)n, (int)n_chunk, (int)n_ctx);
        for (int32_t c = 0; c < n_chunk; c++) printf("%s%.17g", c ? "," : "", running[c]);
        printf("]}\n");
    } else {
        printf("\nFinal estimate: PPL = %.4f +/- %.5f\n", ppl, err_ppl);
    }
    rc = fflush(stdout) == 0 ? 0 : 1;
out:
    ps_free(chunk);
    ps_free(logits);
    ps_free(running);
    return rc;
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
    ps_cli_progress pr;
    ps_cli_progress_start(&pr, false);
    double nll = 0.0;
    int64_t scored = 0, windows = 0;
    int32_t next = 1; /* first token not scored yet (token 0 has no distribution) */
    ps_score_params sp = ps_score_default_params();
    sp.k = 0;
    sp.chunk = chunk;
    ps_error err;
    ps_error_clear(&err);
    ps_buf b;
    ps_buf_init(&b);
    int rc = 1;
    for (int32_t start = 0; next < n; start += stride) {
        int32_t end = start + ctx < n ? start + ctx : n;
        if (end <= next) continue;
        ps_score_result *r = NULL;
        if (ps_score_tokens(l->session, ids + start, end - start, &sp, &r, &err) != PS_OK) {
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
                ps_token_text(&tt, l->vocab, ids[i]);
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
        ps_cli_progress_show(&pr, "tokens scored", scored, n - 1, (int64_t)windows * ctx, false);
    }
    ps_cli_progress_end(&pr);
    double mean = nll / (double)scored;
    if (json) {
        printf("{\"mode\":\"sliding\",\"perplexity\":%.17g,\"mean_nll\":%.17g,"
               "\"tokens_scored\":%lld,\"tokens\":%d,\"windows\":%lld,\"ctx\":%d,\"stride\":%d}\n",
               exp(mean), mean, (long long)scored, (int)n, (long long)windows, ctx, stride);
    } else {
        FILE *sum = per_token ? stderr : stdout;
        fprintf(sum, "perplexity %.6f  mean NLL %.6f  tokens %lld  (windows %lld, ctx %d, "
                     "stride %d)\n",
                exp(mean), mean, (long long)scored, (long long)windows, ctx, stride);
    }
    /* the result line holds no wall-clock figure (runs are compared byte for byte) */
    double el = ps_now_s() - pr.t0;
    fprintf(stderr, "promptscore %s: %lld tokens in %.2fs, %.0f tokens/s\n", cmd,
            (long long)scored, el, el > 0 ? (double)scored / el : 0.0);
    rc = fflush(stdout) == 0 ? 0 : 1;
out:
    ps_buf_free(&b);
    return rc;
}

int ps_cli_perplexity(int argc, char **argv) {
    const char *cmd = argv[0];
    ps_cli_model_opts o = {.chunk = PS_CHUNK};
    const char *text_path = NULL;
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
        {0}};
    const ps_cli_opt *const tables[] = {model_opts, ppl_opts, NULL};
    const ps_cli_cmd c = {"perplexity", "-m MODEL.gguf -f text.txt [options]", PPL_ABOUT, tables};
    int prc = ps_cli_parse(&c, argc, argv);
    if (prc >= 0) return prc;
    if (!text_path) {
        fprintf(stderr, "promptscore %s: no text: give -f FILE (promptscore %s --help)\n", cmd, cmd);
        return 2;
    }
    if (mode == MODE_LLAMA && (per_token || stride)) {
        fprintf(stderr, "promptscore %s: %s is for --ppl-mode sliding\n", cmd,
                per_token ? "--per-token" : "--stride");
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
        rc = ppl_llama(cmd, &l, ids, n, o.n_ctx, max_chunks, o.chunk, json);
    } else {
        rc = ppl_sliding(cmd, &l, ids, n, stride, o.chunk, per_token, json, text_path);
    }
    ps_free(ids);
    free(text);
    ps_cli_unload(&l);
    return rc;
}
