/*
 * test_request.c — the request module (request.c): every field of a prompt spec, its
 * default and its error {status, param, code, message}, in both envelopes (an HTTP body and a
 * JSON Lines line, which reads a subset); the byte offsets of the load errors; the one error
 * writer; and that the two envelopes give the same token ids for the same prompt under both
 * settings of parse_special (the same ids then score to the same bits: tests/test_special.sh
 * compares the answers of a running server and of `score`). Id prompts need no tokenizer;
 * text prompts use ../shared/models/stories260K.gguf (vocab only) and are skipped without it.
 */
#include "check.h"
#include "front/jsonl.h"
#include "front/request.h"

#include <stdio.h>
#include <string.h>

static ps_req_limits g_lim;

/* Parses body as an HTTP body with lim; returns ok and fills r / e. */
static bool parse(const ps_req_limits *lim, const char *body, ps_completion_req *r,
                  ps_req_error *e) {
    memset(e, 0, sizeof *e);
    return ps_completion_req_parse(body, strlen(body), lim, r, e);
}

/* body must fail with status, param (NULL: none) and code (NULL: none), its message holding
 * needle (NULL: any non-empty message). */
static void expect_error(const ps_req_limits *lim, const char *body, int status,
                         const char *param, const char *code, const char *needle) {
    ps_completion_req r;
    ps_req_error e;
    bool ok = parse(lim, body, &r, &e);
    CHECKF(!ok, "accepted: %s", body);
    if (ok) {
        ps_completion_req_free(&r);
        return;
    }
    CHECKF(e.status == status, "%s: status %d, want %d (%s)", body, e.status, status, e.message);
    CHECKF(!strcmp(e.param, param ? param : ""), "%s: param '%s', want '%s'", body, e.param,
           param ? param : "");
    CHECKF(!strcmp(e.code, code ? code : ""), "%s: code '%s', want '%s'", body, e.code,
           code ? code : "");
    CHECKF(e.message[0] && (!needle || strstr(e.message, needle)), "%s: message '%s' lacks '%s'",
           body, e.message, needle ? needle : "");
}

static void test_fields(void) {
    ps_req_limits *L = &g_lim;
    /* the envelope */
    expect_error(L, "", 400, NULL, NULL, "empty");
    expect_error(L, "[1]", 400, NULL, NULL, "JSON object");
    expect_error(L, "{\"prompt\": [1,", 400, NULL, NULL, "malformed JSON");
    expect_error(L, "{\"prompt\": [1, 99999999999999999999]}", 400, NULL, NULL, "does not fit");
    /* prompt */
    expect_error(L, "{}", 400, "prompt", NULL, "required");
    expect_error(L, "{\"prompt\": null}", 400, "prompt", NULL, "required");
    expect_error(L, "{\"prompt\": 5}", 400, "prompt", NULL, "got 5");
    expect_error(L, "{\"prompt\": []}", 400, "prompt", NULL, "empty");
    expect_error(L, "{\"prompt\": [[]]}", 400, "prompt", NULL, "empty");
    expect_error(L, "{\"prompt\": [true]}", 400, "prompt", NULL, "true");
    expect_error(L, "{\"prompt\": [1, \"a\"]}", 400, "prompt", NULL, "prompt[1]");
    expect_error(L, "{\"prompt\": [1, 2.5]}", 400, "prompt", NULL, "2.5");
    expect_error(L, "{\"prompt\": [[1], 2]}", 400, "prompt", NULL, "prompt[1]");
    expect_error(L, "{\"prompt\": [1, 512]}", 400, "prompt", NULL, "index 1");
    expect_error(L, "{\"prompt\": [[1], [1, -3]]}", 400, "prompt", NULL, "-3");
    expect_error(L, "{\"prompt\": [1, 2, 3, 4, 5, 6, 7, 8, 9]}", 400, "prompt",
                 "context_length_exceeded", "9 tokens and max_tokens is 16 (25 in total)");
    expect_error(L, "{\"prompt\": [[1], [1], [1], [1], [1]]}", 400, "prompt", "too_many_prompts",
                 "4 per request");
    /* echo, add_special_tokens, parse_special: booleans */
    expect_error(L, "{\"prompt\": [1], \"echo\": 1}", 400, "echo", NULL, "got 1");
    expect_error(L, "{\"prompt\": [1], \"add_special_tokens\": \"yes\"}", 400,
                 "add_special_tokens", NULL, "a string");
    expect_error(L, "{\"prompt\": [1], \"parse_special\": 0}", 400, "parse_special", NULL,
                 "got 0");
    /* logprobs */
    expect_error(L, "{\"prompt\": [1], \"logprobs\": true}", 400, "logprobs", NULL, "got true");
    expect_error(L, "{\"prompt\": [1], \"logprobs\": -1}", 400, "logprobs", NULL, "-1");
    expect_error(L, "{\"prompt\": [1], \"logprobs\": 2.0}", 400, "logprobs", NULL, "got 2.0");
    expect_error(L, "{\"prompt\": [1], \"logprobs\": 6}", 400, "logprobs", NULL, "limit of 5");
    /* logprobs_from */
    expect_error(L, "{\"prompt\": [1], \"logprobs_from\": -2}", 400, "logprobs_from", NULL, "-2");
    expect_error(L, "{\"prompt\": [1], \"logprobs_from\": \"a\"}", 400, "logprobs_from", NULL,
                 "a string");
    /* max_tokens */
    expect_error(L, "{\"prompt\": [1], \"max_tokens\": \"3\"}", 400, "max_tokens", NULL, NULL);
    expect_error(L, "{\"prompt\": [1], \"max_tokens\": 1.0}", 400, "max_tokens", NULL, "got 1.0");
    expect_error(L, "{\"prompt\": [1], \"max_tokens\": 21}", 400, "max_tokens",
                 "context_length_exceeded", "21");
    expect_error(L, "{\"prompt\": [1, 2], \"max_tokens\": 19}", 400, "prompt",
                 "context_length_exceeded", "21 in total");
    /* sampling */
    expect_error(L, "{\"prompt\": [1], \"temperature\": \"hot\"}", 400, "temperature", NULL,
                 "a string");
    expect_error(L, "{\"prompt\": [1], \"temperature\": 101}", 400, "temperature", NULL, "101");
    expect_error(L, "{\"prompt\": [1], \"top_p\": 0}", 400, "top_p", NULL, "(0, 1]");
    expect_error(L, "{\"prompt\": [1], \"seed\": 1.5}", 400, "seed", NULL, "1.5");
    /* stop */
    expect_error(L, "{\"prompt\": [1], \"stop\": 3}", 400, "stop", NULL, "got 3");
    expect_error(L, "{\"prompt\": [1], \"stop\": [\"a\", 3]}", 400, "stop", NULL, "stop[1]");
    expect_error(L, "{\"prompt\": [1], \"stop\": [\"a\", \"b\\u0000c\"]}", 400, "stop", NULL,
                 "U+0000");
    expect_error(L,
                 "{\"prompt\": [1], \"stop\": [\"1\",\"2\",\"3\",\"4\",\"5\",\"6\",\"7\",\"8\","
                 "\"9\",\"10\",\"11\",\"12\",\"13\",\"14\",\"15\",\"16\",\"17\"]}",
                 400, "stop", NULL, "at most 16");
    /* model, and the fields with only a neutral value */
    expect_error(L, "{\"prompt\": [1], \"model\": \"gpt-4\"}", 404, "model", "model_not_found",
                 "gpt-4");
    expect_error(L, "{\"prompt\": [1], \"model\": 7}", 400, "model", NULL, "got 7");
    expect_error(L, "{\"prompt\": [1], \"n\": 2}", 400, "n", NULL, "got 2");
    expect_error(L, "{\"prompt\": [1], \"best_of\": 3}", 400, "best_of", NULL, "got 3");
    expect_error(L, "{\"prompt\": [1], \"stream\": true}", 400, "stream", NULL, "got true");
    expect_error(L, "{\"prompt\": [1], \"suffix\": \"x\"}", 400, "suffix", NULL, "a string");
    /* text prompts without a tokenizer */
    expect_error(L, "{\"prompt\": \"Once\"}", 400, "prompt", NULL, "tokenizer");

    /* defaults and a good request */
    ps_completion_req r;
    ps_req_error e;
    CHECK(parse(L, "{\"prompt\": [[1, 2], [3]], \"stop\": [\"\", \"x\"], \"model\": \"m\", "
                   "\"n\": 1, \"stream\": false, \"seed\": 7}", &r, &e));
    CHECK(r.n_prompts == 2 && r.prompts[0].n == 2 && r.prompts[1].ids[0] == 3 &&
          r.prompts[0].prompt_offset == NULL && r.prompt_tokens == 3);
    CHECK(r.logprobs == -1 && r.max_tokens == 16 && !r.echo && r.temperature == 1 &&
          r.top_p == 1 && r.has_seed && r.seed == 7 && r.n_stop == 1 && !strcmp(r.stop[0], "x"));
    ps_completion_req_free(&r);
}

/* The load errors carry the byte offset where they were found. */
static void test_offsets(void) {
    ps_completion_req r;
    ps_req_error e;
    const char bad_utf8[] = "{\"prompt\": \"a\xff\"}";
    CHECK(!parse(&g_lim, bad_utf8, &r, &e) && e.offset == 13 && strstr(e.message, "UTF-8"));
    const char nul[] = "{\"prompt\": [1]\0}";
    memset(&e, 0, sizeof e);
    CHECK(!ps_completion_req_parse(nul, sizeof nul - 1, &g_lim, &r, &e) && e.offset == 14 &&
          strstr(e.message, "NUL"));
    CHECKF(!parse(&g_lim, "{\"prompt\": [1,, 2]}", &r, &e) && e.offset > 0 && e.offset <= 15,
           "offset %lld", (long long)e.offset);
    CHECK(!parse(&g_lim, "{\"prompt\": [1, 512]}", &r, &e) && e.offset == -1 &&
          e.st == PS_ERR_TOKEN_RANGE);
    CHECK(!parse(&g_lim, "{\"prompt\": [1, 2, 3, 4, 5, 6, 7, 8, 9]}", &r, &e) &&
          e.st == PS_ERR_CONTEXT);
}

/* The one writer of OpenAI's error object. */
static void test_writer(void) {
    ps_req_error e;
    ps_req_fail(&e, 400, "prompt", NULL, "bad \"x\"");
    ps_buf b;
    ps_buf_init(&b);
    ps_req_error_write(&b, &e);
    CHECKF(b.data && !strcmp(b.data, "{\"message\":\"bad \\\"x\\\"\",\"type\":\"invalid_request_"
                                     "error\",\"param\":\"prompt\",\"code\":null}"),
           "%s", b.data ? b.data : "");
    ps_buf_reset(&b);
    ps_req_fail(&e, 500, NULL, "c", "oom");
    ps_req_error_write(&b, &e);
    CHECKF(b.data && strstr(b.data, "\"type\":\"server_error\",\"param\":null,\"code\":\"c\"") &&
               e.st == PS_ERR_NOMEM,
           "%s", b.data ? b.data : "");
    ps_buf_free(&b);
}

/* A JSON Lines line: one prompt, the line's fields only, K's default from the CLI. */
static void test_line(void) {
    ps_jsonl_limits jl = {.n_vocab = 512, .n_ctx = 8, .default_k = 5, .add_bos = true};
    struct {
        const char *line;
        ps_status st;
        const char *param, *needle;
    } cases[] = {
        {"{\"prompt\": [1, 2], \"max_tokens\": \"x\", \"echo\": 3, \"model\": 1}", PS_OK, NULL,
         NULL}, /* the server's other fields are ignored on a line */
        {"{\"prompt\": [[1, 2]]}", PS_ERR_FORMAT, "prompt", "one prompt"},
        {"{\"prompt\": [\"a\"]}", PS_ERR_FORMAT, "prompt", "one prompt"},
        {"{\"prompt\": 42}", PS_ERR_FORMAT, "prompt", "got 42"},
        {"{\"prompt\": []}", PS_ERR_FORMAT, "prompt", "empty"},
        {"{\"id\": 1}", PS_ERR_FORMAT, "prompt", "required"},
        {"{\"prompt\": [1, 512]}", PS_ERR_TOKEN_RANGE, "prompt", "index 1"},
        {"{\"prompt\": [1], \"logprobs\": 513}", PS_ERR_FORMAT, "logprobs", "vocabulary size 512"},
        {"{\"prompt\": [1], \"logprobs\": true}", PS_ERR_FORMAT, "logprobs", "got true"},
        {"{\"prompt\": [1], \"logprobs_from\": -1}", PS_ERR_FORMAT, "logprobs_from", "-1"},
        {"{\"prompt\": [1], \"parse_special\": 1}", PS_ERR_FORMAT, "parse_special", "got 1"},
        {"[1]", PS_ERR_FORMAT, NULL, "JSON object"},
    };
    /* the envelope's errors carry their byte offset in the line */
    struct {
        const char *line;
        int64_t offset;
    } at[] = {{"{\"prompt\": [1,, 2]}", 14}, {"{\"prompt\": [[[[1]]]]}", -2}};
    for (size_t i = 0; i < PS_ARRAY_LEN(at); i++) {
        ps_jsonl_req req;
        ps_jsonl_parse(at[i].line, strlen(at[i].line), 1, &jl, &req);
        CHECKF(at[i].offset == -2 ? req.err.offset == -1 : req.err.offset == at[i].offset ||
                                                               req.err.offset == at[i].offset + 1,
               "%s: offset %lld", at[i].line, (long long)req.err.offset);
        ps_jsonl_req_free(&req);
    }
    /* a raw NUL byte: the line is refused, and its id echoed when the id's value was read
     * whole before the NUL (a number right before it was not: it could have gone on) */
    {
        static const struct {
            const char *line;
            size_t len;
            const char *id; /* NULL: echoed as null */
        } nul[] = {
            {"{\"id\":1,\"prompt\":\"h\0i\"}", 23, "1"},
            {"{\"prompt\":[1],\"id\":\"a b\" \0}", 27, "\"a b\""},
            {"{\"id\":{\"k\":[1,2]},\"prompt\":\"\0\"}", 31, "{\"k\":[1,2]}"},
            {"{\"id\":\"a\0b\",\"prompt\":[1]}", 25, NULL},
            {"{\"prompt\":[1],\"id\":12\0}", 23, NULL},
            {"{\"p\":{\"id\":3},\"prompt\":\"\0\"}", 27, NULL},
        };
        for (size_t i = 0; i < PS_ARRAY_LEN(nul); i++) {
            ps_jsonl_req req;
            ps_status st = ps_jsonl_parse(nul[i].line, nul[i].len, 1, &jl, &req);
            CHECKF(nul[i].line[nul[i].len - 1] == '}', "NUL case %zu: length", i);
            CHECKF(st == PS_ERR_FORMAT && strstr(req.err.message, "raw NUL"),
                   "NUL case %zu: %d %s", i, st, req.err.message);
            CHECKF(nul[i].id ? req.id_json && !strcmp(req.id_json, nul[i].id) : !req.id_json,
                   "NUL case %zu: id %s, want %s", i, req.id_json ? req.id_json : "(none)",
                   nul[i].id ? nul[i].id : "(none)");
            ps_buf b;
            ps_buf_init(&b);
            ps_jsonl_write_error(&b, &req);
            char want[64];
            snprintf(want, sizeof want, "{\"id\":%s,\"error\":", nul[i].id ? nul[i].id : "null");
            CHECKF(b.data && !strncmp(b.data, want, strlen(want)), "NUL case %zu: %s", i,
                   b.data ? b.data : "");
            ps_buf_free(&b);
            ps_jsonl_req_free(&req);
        }
    }
    {
        ps_jsonl_limits small = jl;
        small.max_line_bytes = 64;
        char line[200];
        snprintf(line, sizeof line, "{\"prompt\": [1], \"pad\": \"%0120d\"}", 0);
        ps_jsonl_req req;
        ps_status st = ps_jsonl_parse(line, strlen(line), 1, &small, &req);
        CHECKF(st == PS_ERR_LIMIT && !strcmp(req.err.code, "line_too_long") &&
                   req.err.offset == 64,
               "line_too_long: %d %s at %lld", st, req.err.code, (long long)req.err.offset);
        ps_jsonl_req_free(&req);
    }
    for (size_t i = 0; i < PS_ARRAY_LEN(cases); i++) {
        ps_jsonl_req req;
        ps_status st = ps_jsonl_parse(cases[i].line, strlen(cases[i].line), 3, &jl, &req);
        CHECKF(st == cases[i].st, "%s: status %d, want %d (%s)", cases[i].line, st, cases[i].st,
               req.err.message);
        if (st != PS_OK) {
            CHECKF(!strncmp(req.err.message, "line 3: ", 8) &&
                       strstr(req.err.message, cases[i].needle) &&
                       !strcmp(req.err.param, cases[i].param ? cases[i].param : ""),
                   "%s: '%s' param '%s'", cases[i].line, req.err.message, req.err.param);
        } else {
            CHECK(req.ok && req.n == 2 && req.k == 5 && req.logprobs_from == 0);
        }
        ps_jsonl_req_free(&req);
    }
}

/* Text prompts: the same ids from a body and from a line, with and without special-token text,
 * under both settings (the field, and the CLI's default), and BOS as add_special_tokens says. */
static void test_text(const ps_vocab *vocab) {
    ps_req_limits lim = g_lim;
    lim.vocab = vocab;
    lim.n_vocab = ps_vocab_n_tokens(vocab);
    lim.n_ctx = 2048;
    const char *prompts[] = {"Once upon a time", "Once upon</s> a time<s>", "</s>Lily</s>"};
    for (int p = 0; p < 3; p++) {
        for (int special = 0; special < 2; special++) {
            char body[256], line[256];
            snprintf(body, sizeof body, "{\"prompt\": \"%s\"%s}", prompts[p],
                     special ? "" : ", \"parse_special\": false");
            ps_completion_req r;
            ps_req_error e;
            bool ok = parse(&lim, body, &r, &e);
            CHECKF(ok, "%s: %s", body, e.message);
            if (!ok) continue;
            /* a line with the field, and a line without it under the CLI's flag */
            for (int how = 0; how < 2; how++) {
                ps_jsonl_limits jl = {.vocab = vocab, .n_vocab = lim.n_vocab, .n_ctx = 2048,
                                      .default_k = 5, .add_bos = true,
                                      .no_parse_special = how == 1 && !special};
                if (how == 0) snprintf(line, sizeof line, "%s", body);
                else snprintf(line, sizeof line, "{\"prompt\": \"%s\"}", prompts[p]);
                ps_jsonl_req req;
                ps_status st = ps_jsonl_parse(line, strlen(line), 1, &jl, &req);
                bool same = st == PS_OK && req.n == r.prompts[0].n &&
                            !memcmp(req.ids, r.prompts[0].ids, (size_t)req.n * sizeof *req.ids) &&
                            !memcmp(req.prompt_offset, r.prompts[0].prompt_offset,
                                    (size_t)req.n * sizeof *req.prompt_offset);
                CHECKF(same, "prompt %d special %d how %d: the line's ids differ from the body's",
                       p, special, how);
                ps_jsonl_req_free(&req);
            }
            bool has_eos = false;
            for (int32_t i = 0; i < r.prompts[0].n; i++) has_eos |= r.prompts[0].ids[i] == 2;
            CHECKF(has_eos == (special && p > 0), "prompt %d special %d: </s> recognised %d", p,
                   special, has_eos);
            CHECK(r.prompts[0].ids[0] == 1); /* BOS */
            ps_completion_req_free(&r);
        }
    }
    ps_completion_req r;
    ps_req_error e;
    CHECK(parse(&lim, "{\"prompt\": \"Once\", \"add_special_tokens\": false}", &r, &e) &&
          r.prompts[0].ids[0] != 1);
    ps_completion_req_free(&r);
    CHECK(parse(&lim, "{\"prompt\": [\"Once\", \"upon\"], \"echo\": true}", &r, &e) &&
          r.n_prompts == 2 && r.echo && r.prompts[1].prompt_offset);
    ps_completion_req_free(&r);
    expect_error(&lim, "{\"prompt\": [\"Once\", \"\"]}", 400, "prompt", NULL, "prompt[1] is empty");
    expect_error(&lim, "{\"prompt\": [\"Once\", [1]]}", 400, "prompt", NULL, "prompt[1]");
}

int main(void) {
    g_lim = (ps_req_limits){.model_name = "m", .n_vocab = 512, .n_ctx = 20, .max_logprobs = 5,
                            .max_prompts = 4};
    test_fields();
    test_offsets();
    test_writer();
    test_line();
    const char *shared = ps_test_shared();
    if (!shared) {
        SKIP("text prompts: no ../shared/models/stories260K.gguf");
    } else {
        char path[4300];
        snprintf(path, sizeof path, "%s/models/stories260K.gguf", shared);
        ps_model_params mp = ps_model_default_params();
        mp.vocab_only = true;
        ps_model *m = NULL;
        ps_error err;
        if (ps_model_load(path, &mp, &m, &err) != PS_OK) {
            CHECKF(0, "load %s: %s", path, err.message);
        } else {
            test_text(ps_model_vocab(m));
            ps_model_free(m);
        }
    }
    return ps_test_done("request");
}
