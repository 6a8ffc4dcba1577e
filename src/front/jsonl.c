/*
 * jsonl.c — one input line of `promptscore score` to a validated request (token ids, K, the
 * id to echo), and the result / error lines written back (see jsonl.h for the shapes).
 *
 * A line is first walked by the pre-scanner (jscan.c) against the limits of
 * ps_jsonl_scan_limits (bytes, depth, an id list of at most n_ctx ids), so that a line over
 * them is refused before jansson builds anything. Parsing then uses jansson; every check names
 * the line number and what is wrong (the key, the index of a bad id, both numbers of a length
 * or range). The echoed "id" is the raw text of the value, byte for byte (the scan finds its
 * span, also in a line broken after it; jansson validates it), so 0.1 stays 0.1 and ids jansson alone would refuse (integers over 2^63, \u0000 in a
 * string) pass through; the line is then parsed with that value blanked to null, padded with
 * spaces so that error columns do not move. Text prompts are tokenised with the
 * model's tokenizer, special-token text recognised as its token unless no_parse_special (the
 * server's policy too); id lists are taken verbatim.
 */
#include "front/jsonl.h"
#include "front/request.h"
#include "model/vocab.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

void ps_jsonl_req_free(ps_jsonl_req *req) {
    if (!req) return;
    ps_free(req->id_json);
    ps_free(req->ids);
    ps_free(req->prompt_offset);
    ps_free(req->text);
    req->text = NULL;
    ps_free(req->token_ids);
    req->token_ids = NULL;
    req->n_token_ids = 0;
    req->id_json = NULL;
    req->ids = NULL;
    req->prompt_offset = NULL;
    req->n = 0;
}

/* An error line: the line number, then what is wrong (request.h's error, with the kind the
 * parse returns). */
static ps_status bad(ps_jsonl_req *req, ps_status st, const char *param, const char *code,
                     const char *fmt, ...) PS_PRINTF(5, 6);
static ps_status bad(ps_jsonl_req *req, ps_status st, const char *param, const char *code,
                     const char *fmt, ...) {
    ps_req_error *e = &req->err;
    ps_req_fail(e, st == PS_ERR_NOMEM || st == PS_ERR_INTERNAL ? 500 : 400, param, code, "%s", "");
    e->st = st;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    req->ok = false;
    return st;
}

/* st, with the error's byte offset in the line. */
static ps_status at_byte(ps_jsonl_req *req, int64_t offset, ps_status st) {
    req->err.offset = offset;
    return st;
}

/* The object of one line through the request module, with the line's fields (request.h's
 * ps_req_limits.line) and the CLI's defaults. */
static ps_status parse_root(json_t *root, int64_t ln, const ps_jsonl_limits *lim,
                            ps_jsonl_req *req) {
    if (!json_is_object(root)) {
        char d[64];
        ps_req_describe(root, d, sizeof d);
        return bad(req, PS_ERR_FORMAT, NULL, NULL, "line %lld: expected a JSON object, got %s",
                   (long long)ln, d);
    }
    json_t *id = json_object_get(root, "id");
    if (id && !req->id_json) { /* only when no raw span was found (e.g. an escaped key) */
        char *s = json_dumps(id, JSON_ENCODE_ANY | JSON_COMPACT);
        if (!s) return bad(req, PS_ERR_NOMEM, NULL, NULL, "line %lld: out of memory", (long long)ln);
        req->id_json = ps_strdup(s);
        free(s);
        if (!req->id_json)
            return bad(req, PS_ERR_NOMEM, NULL, NULL, "line %lld: out of memory", (long long)ln);
    }
    ps_req_limits rl = {.vocab = lim->vocab, .n_vocab = lim->n_vocab, .n_ctx = lim->n_ctx,
                        .max_logprobs = lim->n_vocab, .no_add_special = !lim->add_bos,
                        .no_parse_special = lim->no_parse_special, .line = true,
                        .default_logprobs = lim->default_k, .keep_text = lim->keep_text,
                        .token_ids = lim->token_ids, .n_token_ids = lim->n_token_ids};
    ps_completion_req r;
    ps_req_error e;
    if (!ps_request_from_json(root, &rl, &r, &e)) {
        req->err = e;
        snprintf(req->err.message, sizeof req->err.message, "line %lld: %.370s", (long long)ln,
                 e.message);
        req->ok = false;
        return e.st;
    }
    /* one prompt (the line's), taken over */
    req->ids = r.prompts[0].ids;
    req->n = r.prompts[0].n;
    req->prompt_offset = r.prompts[0].prompt_offset;
    req->text = r.prompts[0].text;
    req->text_len = r.prompts[0].text_len;
    r.prompts[0].ids = NULL;
    r.prompts[0].prompt_offset = NULL;
    r.prompts[0].text = NULL;
    req->continuation_start = r.prompts[0].continuation_start;
    req->token_ids = r.token_ids;
    req->n_token_ids = r.n_token_ids;
    r.token_ids = NULL;
    req->k = r.logprobs;
    req->logprobs_from = r.logprobs_from;
    req->words = r.words;
    ps_completion_req_free(&r);
    req->ok = true;
    return PS_OK;
}

void ps_jsonl_scan_limits(const ps_jsonl_limits *lim, ps_jscan_limits *out) {
    memset(out, 0, sizeof *out);
    out->max_bytes = lim->max_line_bytes > 0 ? lim->max_line_bytes : PS_JSONL_MAX_LINE_BYTES;
    out->max_depth = PS_JSONL_MAX_DEPTH;
    out->max_ids = lim->n_ctx > 0 ? lim->n_ctx : 0;
}

/* The raw id of [v0, v1) into req->id_json when jansson takes it as a value. */
static ps_status take_id(ps_jsonl_req *req, const char *v0, size_t n, int64_t lineno) {
    json_error_t je;
    ps_json_alloc_init();
    /* ints as reals: only validity matters here, and integers past 2^63 are valid JSON */
    ps_alloc_failed_clear();
    json_t *idv = json_loadb(v0, n, JSON_DECODE_ANY | JSON_ALLOW_NUL | JSON_DECODE_INT_AS_REAL, &je);
    if (!idv && ps_alloc_failed()) /* jansson may report it as a parse error */
        return bad(req, PS_ERR_NOMEM, NULL, NULL, "line %lld: out of memory", (long long)lineno);
    if (!idv) return PS_OK;
    json_decref(idv);
    req->id_json = ps_malloc(n + 1);
    if (!req->id_json) return bad(req, PS_ERR_NOMEM, NULL, NULL, "line %lld: out of memory", (long long)lineno);
    memcpy(req->id_json, v0, n);
    req->id_json[n] = '\0';
    /* a line break inside the id can only be whitespace between tokens (JSON strings cannot
     * hold one raw): a space keeps the output one line */
    for (size_t i = 0; i < n; i++)
        if (req->id_json[i] == '\n' || req->id_json[i] == '\r') req->id_json[i] = ' ';
    return PS_OK;
}

ps_status ps_jsonl_refused(const char *kept, size_t kept_len, int64_t lineno,
                           const ps_jsonl_limits *lim, const ps_jscan *scan, ps_jsonl_req *req) {
    memset(req, 0, sizeof *req);
    if (scan->id_start >= 0 && scan->id_end <= (int64_t)kept_len) {
        ps_status st = take_id(req, kept + scan->id_start, (size_t)(scan->id_end - scan->id_start), lineno);
        if (st != PS_OK) return st;
    }
    const long long ln = (long long)lineno, at = (long long)scan->err.offset;
    switch (scan->what) {
    case PS_JSCAN_IDS:
        return at_byte(req, at, bad(req, PS_ERR_CONTEXT, "prompt", "context_length_exceeded",
                   "line %lld: the prompt has more than %d tokens, more than the context length "
                   "%d (refused at byte %lld, before reading the rest)", ln, lim->n_ctx,
                   lim->n_ctx, at));
    case PS_JSCAN_DEPTH:
        return at_byte(req, at, bad(req, PS_ERR_LIMIT, NULL, "too_deep",
                                    "line %lld: JSON nested deeper than %d levels, at byte %lld",
                                    ln, PS_JSONL_MAX_DEPTH, at));
    case PS_JSCAN_BYTES:
        return at_byte(req, at, bad(req, PS_ERR_LIMIT, NULL, "line_too_long",
                                    "line %lld: the line is longer than %lld bytes "
                                    "(--max-line-bytes)", ln, at));
    default:
        return at_byte(req, at, bad(req, scan->err.code ? scan->err.code : PS_ERR_INTERNAL, NULL,
                                    NULL, "line %lld: %s", ln, scan->err.message));
    }
}

ps_status ps_jsonl_parse(const char *line, size_t len, int64_t lineno,
                         const ps_jsonl_limits *lim, ps_jsonl_req *req) {
    memset(req, 0, sizeof *req);
    /* A raw NUL byte is never valid JSON; jansson lets one pass right after a number, and the
     * id would then be echoed with it. The id is still echoed when its value was read whole
     * before the NUL: the scan of the bytes before it saw the value end (a number only ends at
     * a byte after it, so "1" right before the NUL is not taken) */
    const char *nul = memchr(line, '\0', len);
    if (nul) {
        ps_jscan_limits jl;
        ps_jsonl_scan_limits(lim, &jl);
        ps_jscan scan;
        ps_jscan_init(&scan, &jl);
        ps_error ignored;
        ps_error_clear(&ignored);
        (void)ps_jscan_feed(&scan, line, (size_t)(nul - line), &ignored);
        if (scan.id_start >= 0 && scan.id_end > scan.id_start && scan.id_end <= nul - line) {
            ps_status st = take_id(req, line + scan.id_start,
                                   (size_t)(scan.id_end - scan.id_start), lineno);
            if (st != PS_OK) return st;
        }
        return at_byte(req, nul - line,
                       bad(req, PS_ERR_FORMAT, NULL, NULL,
                           "line %lld: invalid JSON: a raw NUL byte at column %zu",
                           (long long)lineno, (size_t)(nul - line) + 1));
    }
    ps_jscan_limits jl;
    ps_jsonl_scan_limits(lim, &jl);
    ps_jscan scan;
    ps_status sst = ps_jscan_text(line, len, &jl, &scan, NULL);
    if (sst != PS_OK && scan.what != PS_JSCAN_SYNTAX)
        return ps_jsonl_refused(line, len, lineno, lim, &scan, req);
    json_error_t je;
    char *blanked = NULL;
    if (scan.id_start >= 0) {
        const char *v0 = line + scan.id_start;
        size_t n = (size_t)(scan.id_end - scan.id_start);
        ps_status st = take_id(req, v0, n, lineno);
        if (st != PS_OK) return st;
        if (req->id_json && n >= 4 && sst == PS_OK) {
            /* "null" and spaces in its place: same length, same error columns */
            blanked = ps_malloc(len);
            if (!blanked) return bad(req, PS_ERR_NOMEM, NULL, NULL, "line %lld: out of memory", (long long)lineno);
            memcpy(blanked, line, len);
            size_t off = (size_t)(v0 - line);
            memset(blanked + off, ' ', n);
            memcpy(blanked + off, "null", 4);
            line = blanked;
        }
    }
    ps_json_alloc_init();
    ps_alloc_failed_clear();
    json_t *root = json_loadb(line, len, JSON_ALLOW_NUL, &je); /* U+0000 is text; lengths used */
    ps_free(blanked);
    if (!root && ps_alloc_failed())
        return bad(req, PS_ERR_NOMEM, NULL, NULL, "line %lld: out of memory", (long long)lineno);
    if (!root) /* the id, when it was read whole before the error, is echoed */
        return at_byte(req, je.position,
                       bad(req, PS_ERR_FORMAT, NULL, NULL, "line %lld: invalid JSON at column %d: %s",
                           (long long)lineno, je.column, je.text));
    if (sst != PS_OK) { /* jansson took what the grammar check refused */
        json_decref(root);
        return at_byte(req, scan.err.offset, bad(req, PS_ERR_FORMAT, NULL, NULL, "line %lld: %s",
                                                 (long long)lineno, scan.err.message));
    }
    ps_status st = parse_root(root, lineno, lim, req);
    json_decref(root);
    return st;
}

void ps_jsonl_write_error(ps_buf *b, const ps_jsonl_req *req) {
    ps_buf_printf(b, "{\"id\":%s,\"error\":", req->id_json ? req->id_json : "null");
    ps_req_error_write(b, &req->err);
    ps_buf_puts(b, "}\n");
}

void ps_jsonl_write_result(ps_buf *b, const ps_vocab *vocab, const ps_jsonl_req *req,
                           const ps_score_result *r) {
    ps_buf_printf(b, "{\"id\":%s,\"logprobs\":", req->id_json ? req->id_json : "null");
    ps_score_result prompt = *r; /* prompt entries only */
    prompt.n_gen = 0;
    prompt.n_total = r->n_prompt;
    prompt.n_compares = 0; /* several compared models: "compare" goes on the line, below */
    ps_json_logprobs_from(b, vocab, &prompt, 0, req->logprobs_from, 0, req->prompt_offset, NULL);
    ps_buf_puts(b, ",\"sum_logprob\":");
    ps_json_f64(b, r->sum_logprob);
    double mean = r->n_prompt > 1 ? r->sum_logprob / (double)(r->n_prompt - 1) : NAN;
    ps_buf_puts(b, ",\"mean_logprob\":");
    ps_json_f64(b, mean);
    ps_buf_puts(b, ",\"perplexity\":");
    ps_json_f64(b, exp(-mean));
    if (r->kld) { /* the comparison's totals over the prompt's scored positions */
        double kl = 0.0;
        int64_t same = 0;
        for (int32_t i = 1; i < r->n_prompt; i++) {
            kl += (double)r->kld[i];
            same += r->same_top1[i] == 1;
        }
        const int32_t m = r->n_prompt - 1;
        ps_buf_puts(b, ",\"kld_mean\":");
        ps_json_f64(b, m > 0 ? kl / m : NAN);
        ps_buf_puts(b, ",\"same_top1_pct\":");
        ps_json_f64(b, m > 0 ? 100.0 * (double)same / m : NAN);
    }
    ps_json_compares(b, r, 0, r->n_prompt, req->logprobs_from);
    if (req->detect_json) { /* --detect: the object the caller rendered (front/detect.h) */
        ps_buf_puts(b, ",\"detect\":");
        ps_buf_append(b, req->detect_json, req->detect_len);
    }
    ps_json_continuation(b, r);
    ps_json_words(b, vocab, r, req->prompt_offset);
    ps_buf_printf(b, ",\"n_tokens\":%d}\n", (int)r->n_prompt);
}
