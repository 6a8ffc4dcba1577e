/*
 * request.c — a prompt spec (a JSON object already unwrapped from its envelope) to token ids
 * and a validated job, or to one error (request.h). Fields are read in a fixed order and the
 * first bad one is the error, naming the field (param), the value as written (ps_req_describe)
 * and both numbers of a limit. Text prompts are tokenised here, with the one tokenization
 * policy (docs/api.md, "Text prompts": special-token text is its token unless parse_special is
 * false; BOS as the GGUF says unless add_special_tokens is false); id lists are taken verbatim
 * and range-checked. Every prompt must fit the context together with max_tokens. The job owns
 * all of its memory. Pure: no server or CLI state, so the fuzzers drive it directly.
 */
#include "front/request.h"
#include "front/json.h"
#include "base/util.h"
#include "model/vocab.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

bool ps_req_fail(ps_req_error *e, int status, const char *param, const char *code,
                  const char *fmt, ...) {
    if (!e) return false;
    e->status = status;
    e->st = status >= 500 ? PS_ERR_NOMEM : PS_ERR_FORMAT; /* the 500s here are out of memory */
    e->offset = -1;
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    snprintf(e->code, sizeof e->code, "%s", code ? code : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    return false;
}

/* "true", "a string", "an array", "1.5", ... for error messages. */
void ps_req_describe(const json_t *v, char *out, size_t cap) {
    switch (json_typeof(v)) {
    case JSON_TRUE: snprintf(out, cap, "true"); break;
    case JSON_FALSE: snprintf(out, cap, "false"); break;
    case JSON_NULL: snprintf(out, cap, "null"); break;
    case JSON_STRING: snprintf(out, cap, "a string"); break;
    case JSON_ARRAY: snprintf(out, cap, "an array"); break;
    case JSON_OBJECT: snprintf(out, cap, "an object"); break;
    case JSON_INTEGER: snprintf(out, cap, "%" JSON_INTEGER_FORMAT, json_integer_value(v)); break;
    case JSON_REAL: /* 2.0 reads "2.0", not "2": the message must show why it is no integer */
        snprintf(out, cap, "%.17g", json_real_value(v));
        if (!strpbrk(out, ".eEin")) snprintf(out + strlen(out), cap - strlen(out), ".0");
        break;
    default: snprintf(out, cap, "an unknown value"); break;
    }
}

/* Loads the body as a JSON object, or fails with a 400 that says why. */
json_t *ps_request_load_object(const char *body, size_t len, ps_req_error *e) {
    if (!body || len == 0) {
        ps_req_fail(e, 400, NULL, NULL, "the request body is empty; send a JSON object");
        return NULL;
    }
    size_t bad = ps_utf8_bad_offset((const unsigned char *)body, len);
    if (bad < len) {
        ps_req_fail(e, 400, NULL, NULL,
                     "the request body is not valid UTF-8: bad byte 0x%02x at offset %zu",
                     (unsigned)(unsigned char)body[bad], bad);
        e->offset = (int64_t)bad;
        return NULL;
    }
    /* A raw NUL byte is never valid JSON (jansson lets one pass right after a number) */
    const char *nul = memchr(body, '\0', len);
    if (nul) {
        ps_req_fail(e, 400, NULL, NULL,
                     "malformed JSON: a raw NUL byte at offset %zu (inside a string write it "
                     "as \\u0000)", (size_t)(nul - body));
        e->offset = (int64_t)(nul - body);
        return NULL;
    }
    json_error_t jerr;
    ps_json_alloc_init();
    ps_alloc_failed_clear();
    /* U+0000 is valid JSON text (a prompt may hold the byte 0); strings are used with their
     * lengths, and the few kept as C strings (model, stop) are checked for it */
    json_t *root = json_loadb(body, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &jerr);
    if (!root) {
        if (ps_alloc_failed()) /* our fault, not the body's (jansson may call it a parse error) */
            ps_req_fail(e, 500, NULL, NULL, "out of memory parsing the request");
        else if (json_error_code(&jerr) == json_error_numeric_overflow) /* valid JSON, too large */
            ps_req_fail(e, 400, NULL, NULL,
                         "the number at line %d, column %d does not fit (integers must fit in "
                         "64 bits, reals in a double): %s",
                         jerr.line, jerr.column, jerr.text);
        else
            ps_req_fail(e, 400, NULL, NULL, "malformed JSON at line %d, column %d: %s",
                         jerr.line, jerr.column, jerr.text);
        if (e && e->status == 400) e->offset = jerr.position;
        return NULL;
    }
    if (!json_is_object(root)) {
        char d[64];
        ps_req_describe(root, d, sizeof d);
        json_decref(root);
        ps_req_fail(e, 400, NULL, NULL, "the request body must be a JSON object, got %s", d);
        return NULL;
    }
    return root;
}

/* A field that is absent or null. */
static json_t *field(json_t *root, const char *key) {
    json_t *v = json_object_get(root, key);
    return v && !json_is_null(v) ? v : NULL;
}

static bool get_bool(json_t *root, const char *key, bool def, bool *out, ps_req_error *e) {
    json_t *v = field(root, key);
    if (!v) { *out = def; return true; }
    if (!json_is_boolean(v)) {
        char d[64];
        ps_req_describe(v, d, sizeof d);
        return ps_req_fail(e, 400, key, NULL, "%s must be true or false, got %s", key, d);
    }
    *out = json_is_true(v);
    return true;
}

static bool get_number(json_t *root, const char *key, double def, double *out,
                       ps_req_error *e) {
    json_t *v = field(root, key);
    if (!v) { *out = def; return true; }
    if (!json_is_number(v)) {
        char d[64];
        ps_req_describe(v, d, sizeof d);
        return ps_req_fail(e, 400, key, NULL, "%s must be a number, got %s", key, d);
    }
    *out = json_number_value(v);
    return true;
}

/* An "unsupported except this value" field: absent, null, or `ok(v)`. */
static bool check_unsupported(json_t *root, ps_req_error *e) {
    json_t *v;
    char d[64];
    if ((v = field(root, "n")) && !(json_is_integer(v) && json_integer_value(v) == 1)) {
        ps_req_describe(v, d, sizeof d);
        return ps_req_fail(e, 400, "n", NULL,
                            "n must be 1 (one choice per prompt is supported), got %s", d);
    }
    if ((v = field(root, "best_of")) && !(json_is_integer(v) && json_integer_value(v) == 1)) {
        ps_req_describe(v, d, sizeof d);
        return ps_req_fail(e, 400, "best_of", NULL, "best_of must be 1 (not supported), got %s",
                            d);
    }
    if ((v = field(root, "stream")) && !json_is_false(v)) {
        ps_req_describe(v, d, sizeof d);
        return ps_req_fail(e, 400, "stream", NULL,
                            "stream is not supported: it must be false or absent, got %s", d);
    }
    if ((v = field(root, "suffix")) && !(json_is_string(v) && json_string_length(v) == 0)) {
        ps_req_describe(v, d, sizeof d);
        return ps_req_fail(e, 400, "suffix", NULL,
                            "suffix is not supported: it must be absent, null or \"\", got %s", d);
    }
    return true;
}

static bool check_model(json_t *root, const ps_req_limits *lim, ps_req_error *e) {
    json_t *v = field(root, "model");
    if (!v) return true;
    if (!json_is_string(v)) {
        char d[64];
        ps_req_describe(v, d, sizeof d);
        return ps_req_fail(e, 400, "model", NULL, "model must be a string, got %s", d);
    }
    const char *name = lim->model_name ? lim->model_name : "";
    const char *alias = lim->model_alias && *lim->model_alias ? lim->model_alias : name;
    if ((json_string_length(v) != strlen(name) || strcmp(json_string_value(v), name) != 0) &&
        (json_string_length(v) != strlen(alias) || strcmp(json_string_value(v), alias) != 0))
        return ps_req_fail(e, 404, "model", "model_not_found",
                            "The model '%.120s' does not exist: this server serves '%.120s'",
                            json_string_value(v), name);
    return true;
}

/* Text -> ids through the vocab (retrying with the size it asks for). The tokenization policy
 * (docs/api.md, "Text prompts"): special-token text (`<|endoftext|>`, `</s>`) is recognised as
 * that token unless "parse_special" is false, as HF tokenizers and vLLM do; one policy for the
 * server and `score`, since both come through here. */
static bool tokenize_text(const ps_req_limits *lim, const char *text, size_t len, bool add_bos,
                          bool parse_special, int64_t max_tokens, const char *what,
                          int32_t **ids, int32_t *n_ids, ps_req_error *e) {
    *ids = NULL;
    *n_ids = 0;
    if (!lim->vocab)
        return ps_req_fail(e, 400, "prompt", NULL,
                            "%s: text prompts need a tokenizer, which this build lacks", what);
    ps_error err;
    ps_error_clear(&err);
    ps_status st = ps_vocab_tokenize_alloc_max(lim->vocab, text, len, add_bos, parse_special,
                                               max_tokens,
                                               lim->max_piece ? lim->max_piece : PS_REQ_MAX_PIECE,
                                               ids, n_ids, &err);
    if (st == PS_ERR_CONTEXT) {
        ps_req_fail(e, 400, "prompt", "context_length_exceeded",
                    "This model's maximum context length is %d tokens, which leaves %lld for "
                    "%s, and %s", (int)lim->n_ctx, (long long)max_tokens, what, err.message);
        if (e) e->st = PS_ERR_CONTEXT;
        return false;
    }
    if (st == PS_ERR_NOMEM)
        return ps_req_fail(e, 500, NULL, NULL, "out of memory tokenizing %s", what);
    if (st == PS_ERR_LIMIT) {
        ps_req_fail(e, 413, "prompt", "word_too_long", "%s: %s", what, err.message);
        if (e) e->st = st;
        return false;
    }
    if (st == PS_ERR_INVALID_ARG)
        return ps_req_fail(e, 400, "prompt", NULL, "%s is too long (%zu bytes)", what, len);
    if (st != PS_OK) {
        ps_req_fail(e, st == PS_ERR_INTERNAL ? 500 : 400, "prompt", NULL,
                    "%s could not be tokenized: %s", what,
                    err.message[0] ? err.message : ps_status_str(st));
        if (e) e->st = st;
        return false;
    }
    return true;
}

/* One list of token ids, verbatim; every id in [0, n_vocab). `where` names it ("prompt[2]"). */
static bool parse_id_list(const json_t *arr, const ps_req_limits *lim, const char *param,
                          const char *where, int32_t **ids, int32_t *n_ids, ps_req_error *e) {
    *ids = NULL;
    *n_ids = 0;
    size_t n = json_array_size(arr);
    if (n > (size_t)INT32_MAX)
        return ps_req_fail(e, 400, param, NULL, "%s has too many tokens (%zu)", where, n);
    int32_t *buf = ps_malloc((n ? n : 1) * sizeof *buf);
    if (!buf) return ps_req_fail(e, 500, NULL, NULL, "out of memory reading %s", where);
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_array_get(arr, i);
        if (!json_is_integer(v)) {
            char d[64];
            ps_req_describe(v, d, sizeof d);
            ps_free(buf);
            return ps_req_fail(e, 400, param, NULL, "%s[%zu] must be a token id (an integer), got %s",
                                where, i, d);
        }
        json_int_t id = json_integer_value(v);
        if (id < 0 || id >= lim->n_vocab) {
            ps_free(buf);
            ps_req_fail(e, 400, param, NULL,
                        "%s[%zu] = %" JSON_INTEGER_FORMAT
                        " is not a token id (index %zu): the vocabulary has %d tokens (ids 0..%d)",
                        where, i, id, i, (int)lim->n_vocab, (int)lim->n_vocab - 1);
            if (e) e->st = PS_ERR_TOKEN_RANGE;
            return false;
        }
        buf[i] = (int32_t)id;
    }
    *ids = buf;
    *n_ids = (int32_t)n;
    return true;
}

static bool parse_stop(json_t *root, ps_completion_req *r, ps_req_error *e) {
    json_t *v = field(root, "stop");
    if (!v) return true;
    enum { MAX_STOP = 16 };
    size_t n = json_is_string(v) ? 1 : json_is_array(v) ? json_array_size(v) : 0;
    if (!json_is_string(v) && !json_is_array(v)) {
        char d[64];
        ps_req_describe(v, d, sizeof d);
        return ps_req_fail(e, 400, "stop", NULL,
                            "stop must be a string or a list of strings, got %s", d);
    }
    if (n > MAX_STOP)
        return ps_req_fail(e, 400, "stop", NULL, "stop has %zu strings; at most %d are allowed",
                            n, MAX_STOP);
    if (n == 0) return true;
    r->stop = ps_calloc(n, sizeof *r->stop);
    if (!r->stop) return ps_req_fail(e, 500, NULL, NULL, "out of memory reading stop");
    for (size_t i = 0; i < n; i++) {
        json_t *s = json_is_string(v) ? v : json_array_get(v, i);
        if (!json_is_string(s)) {
            char d[64];
            ps_req_describe(s, d, sizeof d);
            return ps_req_fail(e, 400, "stop", NULL, "stop[%zu] must be a string, got %s", i, d);
        }
        if (json_string_length(s) == 0) continue; /* an empty stop string never matches */
        if (memchr(json_string_value(s), 0, json_string_length(s)))
            return ps_req_fail(e, 400, "stop", NULL,
                                "stop[%zu] contains U+0000, which a stop string cannot hold", i);
        char *copy = ps_strndup(json_string_value(s), json_string_length(s));
        if (!copy) return ps_req_fail(e, 500, NULL, NULL, "out of memory reading stop");
        r->stop[r->n_stop++] = copy;
    }
    return true;
}

/* The prompts: string | [string] | [int] | [[int]]. Long on purpose: one case per shape, each
 * with the limits and messages of that shape. */
static bool parse_prompts(json_t *root, const ps_req_limits *lim, bool add_special,
                          bool parse_special, ps_completion_req *r, ps_req_error *e) {
    json_t *p = json_object_get(root, "prompt");
    char d[64];
    if (!p || json_is_null(p))
        return ps_req_fail(e, 400, "prompt", NULL, "prompt is required");
    size_t n;
    int kind; /* 0 one string, 1 one id list, 2 strings, 3 id lists */
    if (json_is_string(p)) {
        n = 1;
        kind = 0;
    } else if (json_is_array(p)) {
        n = json_array_size(p);
        if (n == 0) return ps_req_fail(e, 400, "prompt", NULL, "prompt is an empty list");
        json_t *first = json_array_get(p, 0);
        if (json_is_integer(first)) {
            kind = 1;
            n = 1;
        } else if (lim->line && (json_is_string(first) || json_is_array(first))) {
            return ps_req_fail(e, 400, "prompt", NULL,
                               "a line holds one prompt: prompt must be a string or a list of "
                               "token ids, got a list of %s",
                               json_is_string(first) ? "strings" : "lists");
        } else if (json_is_string(first)) {
            kind = 2;
        } else if (json_is_array(first)) {
            kind = 3;
        } else if (lim->line) {
            ps_req_describe(first, d, sizeof d);
            return ps_req_fail(e, 400, "prompt", NULL,
                               "prompt must be a string or a list of token ids; prompt[0] is %s",
                               d);
        } else {
            ps_req_describe(first, d, sizeof d);
            return ps_req_fail(e, 400, "prompt", NULL,
                                "prompt must be a string, a list of strings, a list of token ids "
                                "or a list of token-id lists; prompt[0] is %s",
                                d);
        }
    } else {
        ps_req_describe(p, d, sizeof d);
        if (lim->line)
            return ps_req_fail(e, 400, "prompt", NULL,
                               "prompt must be a string or a list of token ids, got %s", d);
        return ps_req_fail(e, 400, "prompt", NULL,
                            "prompt must be a string, a list of strings, a list of token ids or "
                            "a list of token-id lists, got %s",
                            d);
    }
    if (n > (size_t)INT32_MAX / 2)
        return ps_req_fail(e, 400, "prompt", NULL, "too many prompts (%zu)", n);
    if (lim->max_prompts > 0 && n > (size_t)lim->max_prompts)
        return ps_req_fail(e, 400, "prompt", "too_many_prompts",
                            "the request has %zu prompts, over this server's limit of %d per "
                            "request (--max-prompts); send them in several requests",
                            n, (int)lim->max_prompts);
    r->prompts = ps_calloc(n, sizeof *r->prompts);
    if (!r->prompts) return ps_req_fail(e, 500, NULL, NULL, "out of memory reading prompts");
    for (size_t i = 0; i < n; i++) {
        char where[48];
        snprintf(where, sizeof where, kind <= 1 ? "prompt" : "prompt[%zu]", i);
        ps_req_prompt *pr = &r->prompts[i];
        json_t *item = kind == 0 || kind == 1 ? p : json_array_get(p, i);
        bool ok;
        if (kind == 0 || kind == 2) {
            if (!json_is_string(item)) {
                ps_req_describe(item, d, sizeof d);
                return ps_req_fail(e, 400, "prompt", NULL,
                                    "%s must be a string like prompt[0], got %s", where, d);
            }
            if (json_string_length(item) == 0)
                return ps_req_fail(e, 400, "prompt", NULL, "%s is empty", where);
            /* a text too long for the context is refused before the tokenizer's work on it */
            int64_t room = (int64_t)lim->n_ctx - r->max_tokens;
            ok = tokenize_text(lim, json_string_value(item), json_string_length(item),
                               add_special, parse_special, room > 0 ? room : 0, where, &pr->ids,
                               &pr->n, e);
            if (ok) {
                pr->prompt_offset = ps_malloc((size_t)PS_MAX(pr->n, 1) * sizeof *pr->prompt_offset);
                if (!pr->prompt_offset) {
                    r->n_prompts = (int32_t)i + 1;
                    return ps_req_fail(e, 500, NULL, NULL, "out of memory reading prompts");
                }
                ps_vocab_prompt_offsets(lim->vocab, json_string_value(item),
                                        json_string_length(item), pr->ids, pr->n,
                                        add_special && ps_vocab_add_bos(lim->vocab),
                                        pr->prompt_offset);
            }
            if (ok && (lim->keep_text || r->detect)) { /* the zlib ratio's bytes */
                pr->text_len = json_string_length(item);
                pr->text = ps_malloc(pr->text_len ? pr->text_len : 1);
                if (!pr->text) {
                    r->n_prompts = (int32_t)i + 1;
                    return ps_req_fail(e, 500, NULL, NULL, "out of memory reading prompts");
                }
                memcpy(pr->text, json_string_value(item), pr->text_len);
            }
        } else {
            if (!json_is_array(item)) {
                ps_req_describe(item, d, sizeof d);
                return ps_req_fail(e, 400, "prompt", NULL,
                                    "%s must be a list of token ids like prompt[0], got %s", where,
                                    d);
            }
            ok = parse_id_list(item, lim, "prompt", where, &pr->ids, &pr->n, e);
        }
        r->n_prompts = (int32_t)i + 1; /* owns what was allocated so far */
        if (!ok) return false;
        if (pr->n == 0) return ps_req_fail(e, 400, "prompt", NULL, "%s is empty", where);
        int64_t total = (int64_t)pr->n + r->max_tokens;
        if (total > lim->n_ctx) {
            ps_req_fail(e, 400, "prompt", "context_length_exceeded",
                        "This model's maximum context length is %d tokens, but %s has %d "
                        "tokens and max_tokens is %d (%lld in total)",
                        (int)lim->n_ctx, where, (int)pr->n, (int)r->max_tokens,
                        (long long)total);
            if (e) e->st = PS_ERR_CONTEXT;
            return false;
        }
        r->prompt_tokens += pr->n;
    }
    return true;
}

ps_score_params ps_completion_score_params(const ps_completion_req *req, uint64_t seed) {
    ps_score_params p = ps_score_default_params();
    p.k = req->logprobs > 0 ? req->logprobs : 0;
    p.max_tokens = req->max_tokens;
    p.temperature = req->temperature;
    p.top_p = req->top_p;
    p.seed = seed;
    p.stop = (const char *const *)req->stop;
    p.n_stop = req->n_stop;
    p.stats = req->stats || req->detect; /* detect reads the entropy and varentropy */
    p.token_ids = req->token_ids;
    p.n_token_ids = req->n_token_ids;
    p.words = req->words;
    return p;
}

int64_t ps_completion_estimate(const ps_completion_req *r) {
    int64_t per_lp = r->logprobs >= 0 ? 48 + 56 * ((int64_t)r->logprobs + 1) : 0;
    if (r->logprobs >= 0 && r->n_token_ids > 0) /* token_id_logprobs: a float each, brackets */
        per_lp += 4 + 16 * (int64_t)r->n_token_ids;
    /* "stats": entropy and varentropy (up to 16 bytes each) and rank (up to 11); a compared
     * server adds kld, dp and same_top1 (about 40 more), which the 16 per entry below leaves
     * room for */
    if (r->logprobs >= 0 && r->stats) per_lp += 44;
    int64_t entries = r->prompt_tokens + (int64_t)r->n_prompts * r->max_tokens;
    int64_t with_values = entries; /* entries before logprobs_from carry no values */
    if (r->logprobs_from > 0 && r->prompts) {
        with_values = 0;
        for (int32_t i = 0; i < r->n_prompts; i++)
            with_values += PS_MAX(0, (int64_t)r->prompts[i].n + r->max_tokens - r->logprobs_from);
    }
    /* "detect": per prompt two objects of up to 30 bytes per percentage, two ratios */
    int64_t detect = r->detect ? (int64_t)r->n_prompts * (120 + 60 * (int64_t)r->n_min_k) : 0;
    /* "words": at most one word per prompt token, each object up to 200 bytes */
    const int64_t words = r->words ? r->prompt_tokens * 200 : 0;
    return 1024 + 256 * (int64_t)r->n_prompts + entries * 16 + with_values * per_lp + detect +
           words;
}

void ps_completion_req_free(ps_completion_req *r) {
    if (!r) return;
    if (r->prompts)
        for (int32_t i = 0; i < r->n_prompts; i++) {
            ps_free(r->prompts[i].ids);
            ps_free(r->prompts[i].prompt_offset);
            ps_free(r->prompts[i].text);
        }
    ps_free(r->prompts);
    if (r->stop)
        for (int32_t i = 0; i < r->n_stop; i++) ps_free(r->stop[i]);
    ps_free(r->stop);
    ps_free(r->token_ids);
    memset(r, 0, sizeof *r);
}

/* "min_k": a list of 1 to PS_DETECT_MAX_K integers in [1, 100] (default {20}). */
static bool get_min_k(json_t *root, ps_completion_req *r, ps_req_error *e) {
    json_t *v = field(root, "min_k");
    r->n_min_k = 1;
    r->min_k[0] = 20;
    if (!v) return true;
    char d[64];
    ps_req_describe(v, d, sizeof d);
    if (!json_is_array(v) || json_array_size(v) < 1 || json_array_size(v) > PS_DETECT_MAX_K)
        return ps_req_fail(e, 400, "min_k", NULL,
                           "min_k must be a list of 1 to %d percentages like [10, 20], got %s",
                           PS_DETECT_MAX_K, d);
    for (size_t i = 0; i < json_array_size(v); i++) {
        json_t *x = json_array_get(v, i);
        if (!json_is_integer(x) || json_integer_value(x) < 1 || json_integer_value(x) > 100) {
            ps_req_describe(x, d, sizeof d);
            return ps_req_fail(e, 400, "min_k", NULL,
                               "min_k[%zu] must be an integer from 1 to 100, got %s", i, d);
        }
        r->min_k[i] = (int32_t)json_integer_value(x);
    }
    r->n_min_k = (int32_t)json_array_size(v);
    return true;
}

/* The fields a line does not read: checked and read for the server only. */
static bool server_fields(json_t *root, const ps_req_limits *lim, ps_completion_req *r,
                          ps_req_error *e) {
    return check_model(root, lim, e) && check_unsupported(root, e) &&
           get_bool(root, "echo", false, &r->echo, e) &&
           get_bool(root, "stats", false, &r->stats, e) &&
           get_bool(root, "detect", false, &r->detect, e) && get_min_k(root, r, e);
}

bool ps_request_from_json(json_t *root, const ps_req_limits *lim, ps_completion_req *out,
                          ps_req_error *e) {
    memset(out, 0, sizeof *out);
    ps_completion_req r;
    memset(&r, 0, sizeof r);
    r.logprobs = lim->line ? lim->default_logprobs : -1;
    r.max_tokens = lim->line || ps_req_has_pairs(root) ? 0 : 16; /* pairs score, by default */
    r.temperature = 1.0f;
    r.top_p = 1.0f;
    bool ok = false, add_special = true, parse_special = true;
    double temperature, top_p;
    char d[64];
    json_t *v;
    if (!json_is_object(root)) {
        ps_req_describe(root, d, sizeof d);
        return ps_req_fail(e, 400, NULL, NULL, "the request must be a JSON object, got %s", d);
    }
    if (!lim->line && !server_fields(root, lim, &r, e)) goto done;
    if (!get_bool(root, "add_special_tokens", !lim->no_add_special, &add_special, e)) goto done;
    if (!get_bool(root, "parse_special", !lim->no_parse_special, &parse_special, e)) goto done;
    if (!get_bool(root, "words", false, &r.words, e)) goto done;
    if ((v = field(root, "logprobs"))) {
        if (!json_is_integer(v) || json_integer_value(v) < 0) {
            ps_req_describe(v, d, sizeof d);
            ps_req_fail(e, 400, "logprobs", NULL, "logprobs must be an integer >= 0, got %s", d);
            goto done;
        }
        if (json_integer_value(v) > lim->max_logprobs && lim->max_logprobs >= lim->n_vocab) {
            ps_req_fail(e, 400, "logprobs", NULL,
                        "logprobs %" JSON_INTEGER_FORMAT " exceeds the vocabulary size %d",
                        json_integer_value(v), (int)lim->n_vocab);
            goto done;
        }
        if (json_integer_value(v) > lim->max_logprobs) {
            ps_req_fail(e, 400, "logprobs", NULL,
                         "logprobs %" JSON_INTEGER_FORMAT
                         " is over this server's limit of %d (start it with --max-logprobs N to "
                         "raise it, up to the vocabulary size %d)",
                         json_integer_value(v), (int)lim->max_logprobs, (int)lim->n_vocab);
            goto done;
        }
        r.logprobs = (int32_t)json_integer_value(v);
    }
    if ((v = field(root, "logprobs_from"))) {
        if (!json_is_integer(v) || json_integer_value(v) < 0) {
            ps_req_describe(v, d, sizeof d);
            ps_req_fail(e, 400, "logprobs_from", NULL,
                         "logprobs_from must be an integer >= 0 (the first prompt position whose "
                         "logprobs are returned), got %s", d);
            goto done;
        }
        r.logprobs_from = (int32_t)PS_MIN(json_integer_value(v), (json_int_t)INT32_MAX);
    }
    if (!lim->line) { /* generation: the server only */
        if ((v = field(root, "max_tokens"))) {
            if (!json_is_integer(v) || json_integer_value(v) < 0) {
                ps_req_describe(v, d, sizeof d);
                ps_req_fail(e, 400, "max_tokens", NULL, "max_tokens must be an integer >= 0, got %s",
                             d);
                goto done;
            }
            if (json_integer_value(v) > lim->n_ctx) {
                ps_req_fail(e, 400, "max_tokens", "context_length_exceeded",
                             "This model's maximum context length is %d tokens, but max_tokens is %"
                             JSON_INTEGER_FORMAT,
                             (int)lim->n_ctx, json_integer_value(v));
                goto done;
            }
            r.max_tokens = (int32_t)json_integer_value(v);
        }
        if (!get_number(root, "temperature", 1.0, &temperature, e)) goto done;
        if (!(temperature >= 0 && temperature <= 100)) {
            ps_req_fail(e, 400, "temperature", NULL, "temperature must be in [0, 100], got %g",
                         temperature);
            goto done;
        }
        if (!get_number(root, "top_p", 1.0, &top_p, e)) goto done;
        if (!(top_p > 0 && top_p <= 1)) {
            ps_req_fail(e, 400, "top_p", NULL, "top_p must be in (0, 1], got %g", top_p);
            goto done;
        }
        r.temperature = (float)temperature;
        r.top_p = (float)top_p;
        if ((v = field(root, "seed"))) {
            if (!json_is_integer(v)) {
                ps_req_describe(v, d, sizeof d);
                ps_req_fail(e, 400, "seed", NULL, "seed must be an integer, got %s", d);
                goto done;
            }
            r.has_seed = true;
            r.seed = (uint64_t)json_integer_value(v);
        }
        if (!parse_stop(root, &r, e)) goto done;
    }
    if (r.words && r.max_tokens > 0) { /* words score the prompt: max_tokens defaults to 0 */
        if (field(root, "max_tokens")) {
            ps_req_fail(e, 400, "words", NULL,
                        "words scores the prompt only: max_tokens must be 0, got %d",
                        (int)r.max_tokens);
            goto done;
        }
        r.max_tokens = 0;
    }
    if (!ps_req_parse_token_ids(root, lim, &r, e)) goto done;
    if (ps_req_has_pairs(root) ? !ps_req_parse_pairs(root, lim, add_special, parse_special, &r, e)
                               : !parse_prompts(root, lim, add_special, parse_special, &r, e))
        goto done;
    for (int32_t i = 0; r.detect && i < r.n_prompts; i++)
        if (r.prompts[i].n < 2) {
            ps_req_fail(e, 400, "prompt", NULL,
                        "detect needs prompts of at least 2 tokens (one scored); prompt %d has %d",
                        (int)i, (int)r.prompts[i].n);
            goto done;
        }
    ok = true;
done:
    if (ok) *out = r;
    else ps_completion_req_free(&r);
    return ok;
}

bool ps_completion_req_parse(const char *body, size_t len, const ps_req_limits *lim,
                             ps_completion_req *out, ps_req_error *e) {
    memset(out, 0, sizeof *out);
    json_t *root = ps_request_load_object(body, len, e);
    if (!root) return false;
    bool ok = ps_request_from_json(root, lim, out, e);
    json_decref(root);
    return ok;
}

void ps_req_error_write(ps_buf *b, const ps_req_error *e) {
    const char *type = e->status >= 500 ? "server_error" : "invalid_request_error";
    ps_buf_puts(b, "{\"message\":");
    ps_json_str(b, e->message, strlen(e->message));
    ps_buf_puts(b, ",\"type\":");
    ps_json_str(b, type, strlen(type));
    ps_buf_puts(b, ",\"param\":");
    if (e->param[0]) ps_json_str(b, e->param, strlen(e->param));
    else ps_buf_puts(b, "null");
    ps_buf_puts(b, ",\"code\":");
    if (e->code[0]) ps_json_str(b, e->code, strlen(e->code));
    else ps_buf_puts(b, "null");
    ps_buf_puts(b, "}");
}

bool ps_tokenize_req_parse(const char *body, size_t len, const ps_req_limits *lim, int32_t **ids,
                           int32_t *n_ids, ps_req_error *e) {
    *ids = NULL;
    *n_ids = 0;
    json_t *root = ps_request_load_object(body, len, e);
    if (!root) return false;
    bool ok = false, add_special = true, parse_special = true;
    /* "content" is what llama.cpp's /tokenize reads: the same field under its name */
    json_t *p = field(root, "prompt"), *content = field(root, "content");
    const char *key = p || !content ? "prompt" : "content";
    if (!p) p = content;
    if (p && content && p != content) {
        ps_req_fail(e, 400, "prompt", NULL,
                     "give prompt or content (its llama.cpp name), not both");
    } else if (!p || !json_is_string(p)) {
        char d[64] = "nothing";
        if (p) ps_req_describe(p, d, sizeof d);
        ps_req_fail(e, 400, key, NULL, "%s must be a string (the text to tokenize; \"content\" "
                                        "is accepted as llama.cpp names it), got %s", key, d);
    } else if (get_bool(root, "add_special_tokens", true, &add_special, e) &&
               get_bool(root, "parse_special", true, &parse_special, e)) {
        if (json_string_length(p) == 0) {
            /* "" is a valid text: its tokens are [BOS] or [] */
            ok = tokenize_text(lim, "", 0, add_special, parse_special, 0, "prompt", ids, n_ids, e);
        } else {
            ok = tokenize_text(lim, json_string_value(p), json_string_length(p), add_special,
                               parse_special, 0, "prompt", ids, n_ids, e);
        }
    }
    json_decref(root);
    return ok;
}

bool ps_detokenize_req_parse(const char *body, size_t len, const ps_req_limits *lim,
                             int32_t **ids, int32_t *n_ids, ps_req_error *e) {
    *ids = NULL;
    *n_ids = 0;
    json_t *root = ps_request_load_object(body, len, e);
    if (!root) return false;
    bool ok = false;
    json_t *t = field(root, "tokens");
    if (!t || !json_is_array(t)) {
        char d[64] = "nothing";
        if (t) ps_req_describe(t, d, sizeof d);
        ps_req_fail(e, 400, "tokens", NULL, "tokens must be a list of token ids, got %s", d);
    } else {
        ok = parse_id_list(t, lim, "tokens", "tokens", ids, n_ids, e);
    }
    json_decref(root);
    return ok;
}

