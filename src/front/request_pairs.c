/*
 * request_pairs.c — the request fields of what scorers compute beyond a prompt's logprobs
 * (request.h): (context, continuation) pairs, tokenized by lm-evaluation-harness's rule
 * (ps_tokenize_pair_alloc, the library's ps_vocab_tokenize_pair with the request path's
 * bounds on the tokenizer's memory), each pair one prompt whose continuation_start the
 * scorer turns into continuation_logprob and is_greedy; and the named tokens
 * ("logprob_token_ids", or SGLang's "token_ids_logprob"), range-checked here so that a bad id
 * is a 400 naming its index. Kept beside request.c so that the shared parser changes only
 * where it hands over to these.
 */
#include "front/request.h"
#include "score/extras.h"

#include <stdio.h>

static json_t *field(json_t *root, const char *key) {
    json_t *v = json_object_get(root, key);
    return v && !json_is_null(v) ? v : NULL;
}

bool ps_req_has_pairs(json_t *root) {
    return field(root, "context") || field(root, "continuation");
}

/* A string or a list of strings; *n its count (1 for a string). */
static bool text_or_list(json_t *v, const char *key, bool line, size_t *n, ps_req_error *e) {
    char d[64];
    if (json_is_string(v)) {
        *n = 1;
        return true;
    }
    if (!line && json_is_array(v) && json_array_size(v) > 0) {
        for (size_t i = 0; i < json_array_size(v); i++)
            if (!json_is_string(json_array_get(v, i))) {
                ps_req_describe(json_array_get(v, i), d, sizeof d);
                return ps_req_fail(e, 400, key, NULL, "%s[%zu] must be a string, got %s", key, i,
                                   d);
            }
        *n = json_array_size(v);
        return true;
    }
    ps_req_describe(v, d, sizeof d);
    if (line)
        return ps_req_fail(e, 400, key, NULL, "%s must be a string (a line holds one pair), got %s",
                           key, d);
    return ps_req_fail(e, 400, key, NULL, "%s must be a string or a non-empty list of strings, got %s",
                       key, d);
}

bool ps_req_parse_pairs(json_t *root, const ps_req_limits *lim, bool add_special,
                        bool parse_special, ps_completion_req *r, ps_req_error *e) {
    json_t *ctx = field(root, "context"), *cont = field(root, "continuation");
    if (field(root, "prompt"))
        return ps_req_fail(e, 400, "prompt", NULL,
                           "give either prompt or context and continuation, not both");
    if (!cont)
        return ps_req_fail(e, 400, "continuation", NULL,
                           "context needs a continuation (the text whose log-probability is "
                           "asked; \"context\": \"\" scores it from BOS)");
    if (!ctx)
        return ps_req_fail(e, 400, "context", NULL,
                           "continuation needs a context (\"\" to score it from BOS)");
    size_t nc = 0, nt = 0;
    if (!text_or_list(ctx, "context", lim->line, &nc, e) ||
        !text_or_list(cont, "continuation", lim->line, &nt, e))
        return false;
    if (nc > 1 && nt > 1 && nc != nt)
        return ps_req_fail(e, 400, "continuation", NULL,
                           "context has %zu entries and continuation %zu: two lists must have "
                           "the same length (or give one string for all)", nc, nt);
    const size_t n = PS_MAX(nc, nt);
    if (lim->max_prompts > 0 && n > (size_t)lim->max_prompts)
        return ps_req_fail(e, 400, "continuation", "too_many_prompts",
                           "the request has %zu pairs, over this server's limit of %d per "
                           "request (--max-prompts); send them in several requests",
                           n, (int)lim->max_prompts);
    if (!lim->vocab)
        return ps_req_fail(e, 400, "context", NULL, "pairs need a tokenizer, which this build lacks");
    r->prompts = ps_calloc(n, sizeof *r->prompts);
    if (!r->prompts) return ps_req_fail(e, 500, NULL, NULL, "out of memory reading pairs");
    r->pairs = true;
    /* a continuation answer reads the whole sequence: echo unless the request says otherwise */
    if (!lim->line && !field(root, "echo")) r->echo = true;
    const int64_t room = PS_MAX((int64_t)lim->n_ctx - r->max_tokens, 0);
    for (size_t i = 0; i < n; i++) {
        json_t *c = json_is_string(ctx) ? ctx : json_array_get(ctx, i);
        json_t *t = json_is_string(cont) ? cont : json_array_get(cont, i);
        char where[48];
        snprintf(where, sizeof where, n == 1 ? "the pair" : "pair %zu", i);
        ps_req_prompt *pr = &r->prompts[i];
        r->n_prompts = (int32_t)i + 1; /* owns what was allocated so far */
        ps_error err;
        ps_error_clear(&err);
        ps_status st = ps_tokenize_pair_alloc(
            lim->vocab, json_string_value(c), json_string_length(c), json_string_value(t),
            json_string_length(t), add_special, parse_special, room,
            lim->max_piece ? lim->max_piece : PS_REQ_MAX_PIECE, &pr->ids, &pr->n,
            &pr->continuation_start, &err);
        if (st == PS_ERR_NOMEM) return ps_req_fail(e, 500, NULL, NULL, "out of memory tokenizing %s", where);
        if (st == PS_ERR_CONTEXT || (st == PS_OK && (int64_t)pr->n + r->max_tokens > lim->n_ctx)) {
            if (st == PS_OK)
                ps_req_fail(e, 400, "context", "context_length_exceeded",
                            "This model's maximum context length is %d tokens, but %s has %d "
                            "tokens and max_tokens is %d", (int)lim->n_ctx, where, (int)pr->n,
                            (int)r->max_tokens);
            else
                ps_req_fail(e, 400, "context", "context_length_exceeded",
                            "This model's maximum context length is %d tokens: %s: %s",
                            (int)lim->n_ctx, where, err.message);
            if (e) e->st = PS_ERR_CONTEXT;
            return false;
        }
        if (st == PS_ERR_LIMIT) {
            ps_req_fail(e, 413, "context", "word_too_long", "%s: %s", where, err.message);
            if (e) e->st = st;
            return false;
        }
        if (st != PS_OK) {
            ps_req_fail(e, 400, "continuation", NULL, "%s: %s", where, err.message);
            if (e) e->st = st;
            return false;
        }
        r->prompt_tokens += pr->n;
    }
    return true;
}

bool ps_req_parse_token_ids(json_t *root, const ps_req_limits *lim, ps_completion_req *r,
                            ps_req_error *e) {
    json_t *a = field(root, "logprob_token_ids"), *b = field(root, "token_ids_logprob");
    const char *key = a ? "logprob_token_ids" : "token_ids_logprob";
    char d[64];
    if (a && b)
        return ps_req_fail(e, 400, "token_ids_logprob", NULL,
                           "give logprob_token_ids or token_ids_logprob (its SGLang name), not both");
    if (!a) a = b;
    if (!a) { /* the default (score --token-ids), copied so that the request owns its list */
        if (lim->n_token_ids <= 0) return true;
        r->token_ids = ps_malloc((size_t)lim->n_token_ids * sizeof *r->token_ids);
        if (!r->token_ids) return ps_req_fail(e, 500, NULL, NULL, "out of memory");
        memcpy(r->token_ids, lim->token_ids, (size_t)lim->n_token_ids * sizeof *r->token_ids);
        r->n_token_ids = lim->n_token_ids;
        return true;
    }
    if (!json_is_array(a)) {
        ps_req_describe(a, d, sizeof d);
        return ps_req_fail(e, 400, key, NULL, "%s must be a list of token ids, got %s", key, d);
    }
    const size_t n = json_array_size(a);
    if (n > (size_t)lim->n_vocab)
        return ps_req_fail(e, 400, key, NULL,
                           "%s names %zu tokens; at most the vocabulary size %d", key, n,
                           (int)lim->n_vocab);
    if (n == 0) return true;
    r->token_ids = ps_malloc(n * sizeof *r->token_ids);
    if (!r->token_ids) return ps_req_fail(e, 500, NULL, NULL, "out of memory reading %s", key);
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_array_get(a, i);
        if (!json_is_integer(v)) {
            ps_req_describe(v, d, sizeof d);
            return ps_req_fail(e, 400, key, NULL, "%s[%zu] must be a token id (an integer), got %s",
                               key, i, d);
        }
        json_int_t id = json_integer_value(v);
        if (id < 0 || id >= lim->n_vocab) {
            ps_req_fail(e, 400, key, NULL,
                        "%s[%zu] = %" JSON_INTEGER_FORMAT " is not a token id: the vocabulary "
                        "has %d tokens (ids 0..%d)", key, i, id, (int)lim->n_vocab,
                        (int)lim->n_vocab - 1);
            if (e) e->st = PS_ERR_TOKEN_RANGE;
            return false;
        }
        r->token_ids[i] = (int32_t)id;
        r->n_token_ids = (int32_t)i + 1;
    }
    return true;
}
