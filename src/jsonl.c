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
#include "jsonl.h"
#include "vocab.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

void ps_jsonl_req_free(ps_jsonl_req *req) {
    if (!req) return;
    ps_free(req->id_json);
    ps_free(req->ids);
    ps_free(req->prompt_offset);
    req->id_json = NULL;
    req->ids = NULL;
    req->prompt_offset = NULL;
    req->n = 0;
}

static ps_status bad(ps_jsonl_req *req, ps_status code, const char *param, const char *fmt, ...)
    PS_PRINTF(4, 5);
static ps_status bad(ps_jsonl_req *req, ps_status code, const char *param, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(req->message, sizeof req->message, fmt, ap);
    va_end(ap);
    req->ok = false;
    req->param = param;
    return code;
}

static const char *type_name(const json_t *j) {
    switch (json_typeof(j)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a number";
    case JSON_TRUE: return "true";
    case JSON_FALSE: return "false";
    default: return "null";
    }
}

static ps_status parse_root(json_t *root, int64_t ln, const ps_jsonl_limits *lim,
                            ps_jsonl_req *req) {
    if (!json_is_object(root))
        return bad(req, PS_ERR_FORMAT, NULL, "line %lld: expected a JSON object, got %s",
                   (long long)ln, type_name(root));
    json_t *id = json_object_get(root, "id");
    if (id && !req->id_json) { /* only when no raw span was found (e.g. an escaped key) */
        char *s = json_dumps(id, JSON_ENCODE_ANY | JSON_COMPACT);
        if (!s) return bad(req, PS_ERR_NOMEM, NULL, "line %lld: out of memory", (long long)ln);
        req->id_json = ps_strdup(s);
        free(s);
        if (!req->id_json) return bad(req, PS_ERR_NOMEM, NULL, "line %lld: out of memory", (long long)ln);
    }

    req->k = lim->default_k;
    json_t *jk = json_object_get(root, "logprobs");
    if (jk && !json_is_null(jk)) {
        if (!json_is_integer(jk) || json_integer_value(jk) < 0) {
            char d[48]; /* the value as written: -2, 2.0 (a real is no integer), a string */
            if (json_is_integer(jk)) {
                snprintf(d, sizeof d, "%lld", (long long)json_integer_value(jk));
            } else if (json_is_real(jk)) {
                snprintf(d, sizeof d, "%.17g", json_real_value(jk));
                if (!strpbrk(d, ".eEin")) snprintf(d + strlen(d), sizeof d - strlen(d), ".0");
            } else {
                snprintf(d, sizeof d, "%s", type_name(jk));
            }
            return bad(req, PS_ERR_FORMAT, "logprobs",
                       "line %lld: logprobs must be an integer >= 0, got %s", (long long)ln, d);
        }
        if (json_integer_value(jk) > lim->n_vocab)
            return bad(req, PS_ERR_FORMAT, "logprobs",
                       "line %lld: logprobs %lld exceeds the vocabulary size %d", (long long)ln,
                       (long long)json_integer_value(jk), lim->n_vocab);
        req->k = (int32_t)json_integer_value(jk);
    }

    json_t *jf = json_object_get(root, "logprobs_from");
    if (jf && !json_is_null(jf)) {
        if (!json_is_integer(jf) || json_integer_value(jf) < 0)
            return bad(req, PS_ERR_FORMAT, "logprobs_from",
                       "line %lld: logprobs_from must be an integer >= 0 (the first prompt "
                       "position whose logprobs are written), got %s", (long long)ln,
                       json_is_integer(jf) ? "a negative integer" : type_name(jf));
        req->logprobs_from = (int32_t)PS_MIN(json_integer_value(jf), (json_int_t)INT32_MAX);
    }

    json_t *jp = json_object_get(root, "prompt");
    if (json_is_string(jp)) {
        size_t tl = json_string_length(jp);
        if (tl == 0) return bad(req, PS_ERR_FORMAT, "prompt", "line %lld: the prompt is empty", (long long)ln);
        if (!lim->vocab)
            return bad(req, PS_ERR_FORMAT, "prompt",
                       "line %lld: text prompts need a tokenizer; give token ids", (long long)ln);
        ps_error err;
        ps_error_clear(&err);
        bool bos = lim->add_bos && ps_vocab_add_bos(lim->vocab);
        ps_status st = ps_vocab_tokenize_alloc(lim->vocab, json_string_value(jp), tl, bos,
                                               !lim->no_parse_special, &req->ids, &req->n, &err);
        if (st != PS_OK)
            return bad(req, st, "prompt", "line %lld: cannot tokenise the prompt: %s",
                       (long long)ln, err.message);
        req->prompt_offset = ps_malloc((size_t)PS_MAX(req->n, 1) * sizeof *req->prompt_offset);
        if (!req->prompt_offset)
            return bad(req, PS_ERR_NOMEM, NULL, "line %lld: out of memory", (long long)ln);
        ps_vocab_prompt_offsets(lim->vocab, json_string_value(jp), tl, req->ids, req->n, bos,
                                req->prompt_offset);
    } else if (json_is_array(jp)) {
        size_t na = json_array_size(jp);
        if (na == 0) return bad(req, PS_ERR_FORMAT, "prompt", "line %lld: the prompt is empty", (long long)ln);
        if (na > (size_t)lim->n_ctx) {
            req->code = "context_length_exceeded";
            return bad(req, PS_ERR_CONTEXT, "prompt",
                       "line %lld: the prompt has %zu tokens, more than the context length %d",
                       (long long)ln, na, lim->n_ctx);
        }
        req->ids = ps_malloc(na * sizeof *req->ids);
        if (!req->ids)
            return bad(req, PS_ERR_NOMEM, NULL, "line %lld: out of memory for %zu token ids",
                       (long long)ln, na);
        for (size_t i = 0; i < na; i++) {
            json_t *x = json_array_get(jp, i);
            if (!json_is_integer(x))
                return bad(req, PS_ERR_FORMAT, "prompt",
                           "line %lld: prompt[%zu] must be an integer token id, got %s",
                           (long long)ln, i, type_name(x));
            json_int_t v = json_integer_value(x);
            if (v < 0 || v >= lim->n_vocab)
                return bad(req, PS_ERR_TOKEN_RANGE, "prompt",
                           "line %lld: token id %lld at index %zu is outside the vocabulary "
                           "[0, %d)", (long long)ln, (long long)v, i, lim->n_vocab);
            req->ids[i] = (int32_t)v;
        }
        req->n = (int32_t)na;
    } else {
        return bad(req, PS_ERR_FORMAT, "prompt",
                   "line %lld: \"prompt\" must be a string or a list of token ids, got %s",
                   (long long)ln, jp ? type_name(jp) : "nothing (missing)");
    }
    if (req->n > lim->n_ctx) {
        req->code = "context_length_exceeded";
        return bad(req, PS_ERR_CONTEXT, "prompt",
                   "line %lld: the prompt has %d tokens, more than the context length %d",
                   (long long)ln, req->n, lim->n_ctx);
    }
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
        return bad(req, PS_ERR_NOMEM, NULL, "line %lld: out of memory", (long long)lineno);
    if (!idv) return PS_OK;
    json_decref(idv);
    req->id_json = ps_malloc(n + 1);
    if (!req->id_json) return bad(req, PS_ERR_NOMEM, NULL, "line %lld: out of memory", (long long)lineno);
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
        req->code = "context_length_exceeded";
        return bad(req, PS_ERR_CONTEXT, "prompt",
                   "line %lld: the prompt has more than %d tokens, more than the context length "
                   "%d (refused at byte %lld, before reading the rest)", ln, lim->n_ctx,
                   lim->n_ctx, at);
    case PS_JSCAN_DEPTH:
        req->code = "too_deep";
        return bad(req, PS_ERR_LIMIT, NULL, "line %lld: JSON nested deeper than %d levels, at byte %lld",
                   ln, PS_JSONL_MAX_DEPTH, at);
    case PS_JSCAN_BYTES:
        req->code = "line_too_long";
        return bad(req, PS_ERR_LIMIT, NULL,
                   "line %lld: the line is longer than %lld bytes (--max-line-bytes)", ln, at);
    default:
        return bad(req, scan->err.code ? scan->err.code : PS_ERR_INTERNAL, NULL, "line %lld: %s",
                   ln, scan->err.message);
    }
}

ps_status ps_jsonl_parse(const char *line, size_t len, int64_t lineno,
                         const ps_jsonl_limits *lim, ps_jsonl_req *req) {
    memset(req, 0, sizeof *req);
    /* A raw NUL byte is never valid JSON; jansson lets one pass right after a number, and the
     * id would then be echoed with it */
    const char *nul = memchr(line, '\0', len);
    if (nul)
        return bad(req, PS_ERR_FORMAT, NULL, "line %lld: invalid JSON: a raw NUL byte at column %zu",
                   (long long)lineno, (size_t)(nul - line) + 1);
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
            if (!blanked) return bad(req, PS_ERR_NOMEM, NULL, "line %lld: out of memory", (long long)lineno);
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
        return bad(req, PS_ERR_NOMEM, NULL, "line %lld: out of memory", (long long)lineno);
    if (!root) /* the id, when it was read whole before the error, is echoed */
        return bad(req, PS_ERR_FORMAT, NULL, "line %lld: invalid JSON at column %d: %s",
                   (long long)lineno, je.column, je.text);
    if (sst != PS_OK) { /* jansson took what the grammar check refused */
        json_decref(root);
        return bad(req, PS_ERR_FORMAT, NULL, "line %lld: %s", (long long)lineno, scan.err.message);
    }
    ps_status st = parse_root(root, lineno, lim, req);
    json_decref(root);
    return st;
}

static void put_null_or_str(ps_buf *b, const char *s) {
    if (s) ps_json_str(b, s, strlen(s));
    else ps_buf_puts(b, "null");
}

void ps_jsonl_write_error(ps_buf *b, const ps_jsonl_req *req) {
    ps_buf_printf(b, "{\"id\":%s,\"error\":{\"message\":", req->id_json ? req->id_json : "null");
    ps_json_str(b, req->message, strlen(req->message));
    ps_buf_puts(b, ",\"type\":\"invalid_request_error\",\"param\":");
    put_null_or_str(b, req->param);
    ps_buf_puts(b, ",\"code\":");
    put_null_or_str(b, req->code);
    ps_buf_puts(b, "}}\n");
}

/* A double that parses back to the same double; -inf -> -9999.0, NaN -> null. */
static void json_f64(ps_buf *b, double v) {
    if (isnan(v) || (isinf(v) && v > 0)) {
        ps_buf_puts(b, "null");
        return;
    }
    if (isinf(v)) {
        ps_buf_puts(b, "-9999.0");
        return;
    }
    char tmp[40];
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*g", prec, v);
        if (strtod(tmp, NULL) == v) break;
    }
    ps_buf_puts(b, tmp);
}

void ps_jsonl_write_result(ps_buf *b, const ps_vocab *vocab, const ps_jsonl_req *req,
                           const ps_score_result *r) {
    ps_buf_printf(b, "{\"id\":%s,\"logprobs\":", req->id_json ? req->id_json : "null");
    ps_score_result prompt = *r; /* prompt entries only */
    prompt.n_gen = 0;
    prompt.n_total = r->n_prompt;
    ps_json_logprobs_from(b, vocab, &prompt, 0, req->logprobs_from, 0, req->prompt_offset, NULL);
    ps_buf_puts(b, ",\"sum_logprob\":");
    json_f64(b, r->sum_logprob);
    double mean = r->n_prompt > 1 ? r->sum_logprob / (double)(r->n_prompt - 1) : NAN;
    ps_buf_puts(b, ",\"mean_logprob\":");
    json_f64(b, mean);
    ps_buf_puts(b, ",\"perplexity\":");
    json_f64(b, exp(-mean));
    ps_buf_printf(b, ",\"n_tokens\":%d}\n", (int)r->n_prompt);
}
