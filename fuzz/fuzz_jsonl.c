/*
 * fuzz_jsonl.c — libFuzzer target for one line of `promptscore score` input (jsonl.h):
 * ps_jsonl_parse on arbitrary bytes must give either a valid request (1..n_ctx ids in range,
 * 0 <= K <= n_vocab) or an error whose message names the line; the error line, or the result
 * line written for a synthetic score of the request's tokens (every token as its own top-1 and
 * K alternatives spread over the vocabulary, through ps_json_logprobs), must parse back with
 * jansson as one JSON object with arrays of the right length. Never a crash, leak or overread.
 * When ../shared (or $PS_SHARED) has stories260K its tokenizer is used for text prompts.
 * Corpus: fuzz/corpus/fuzz_jsonl/.
 */
#include "front/jsonl.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

static ps_model *g_model;
static ps_jsonl_limits g_lim;

static void setup(void) {
    static int done;
    if (done) return;
    done = 1;
    const char *shared = getenv("PS_SHARED");
    char path[4200];
    snprintf(path, sizeof path, "%s/models/stories260K.gguf", shared && *shared ? shared : "../shared");
    ps_model_params mp = ps_model_default_params();
    mp.vocab_only = true;
    g_lim.n_vocab = 512;
    g_lim.n_ctx = 64; /* small, so that the context check is reached */
    g_lim.default_k = 3;
    g_lim.add_bos = true;
    if (ps_model_load(path, &mp, &g_model, NULL) == PS_OK) {
        g_lim.vocab = ps_model_vocab(g_model);
        g_lim.n_vocab = ps_vocab_n_tokens(g_lim.vocab);
    }
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);
int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    setup();
    ps_jsonl_req req;
    ps_status st = ps_jsonl_parse((const char *)data, size, 7, &g_lim, &req);
    ps_buf b;
    ps_buf_init(&b);
    int32_t n_entries = -1;
    if (st == PS_OK) {
        if (!req.ok || req.n < 1 || req.n > g_lim.n_ctx || req.k < 0 || req.k > g_lim.n_vocab) abort();
        for (int32_t i = 0; i < req.n; i++)
            if (req.ids[i] < 0 || req.ids[i] >= g_lim.n_vocab) abort();
        if (g_lim.vocab) {
            int32_t k = req.k < 40 ? req.k : 40;
            ps_score_result r = {.n_prompt = req.n, .n_total = req.n, .k = k, .tokens = req.ids};
            r.logprobs = malloc((size_t)req.n * sizeof(float));
            r.top_ids = malloc((size_t)req.n * (size_t)k * sizeof(int32_t) + 1);
            r.top_logprobs = malloc((size_t)req.n * (size_t)k * sizeof(float) + 1);
            for (int32_t i = 0; i < req.n; i++) {
                r.logprobs[i] = i ? -0.5f * (float)i : 0.0f / 0.0f;
                for (int32_t j = 0; j < k; j++) {
                    r.top_ids[i * k + j] = j == 0 ? req.ids[i] : (req.ids[i] * 31 + j * 97) % g_lim.n_vocab;
                    r.top_logprobs[i * k + j] = r.logprobs[i] - (float)j;
                }
            }
            ps_jsonl_write_result(&b, g_lim.vocab, &req, &r);
            n_entries = req.n;
            free(r.logprobs);
            free(r.top_ids);
            free(r.top_logprobs);
        }
    } else {
        if (req.ok || !strstr(req.err.message, "line 7")) abort();
        ps_jsonl_write_error(&b, &req);
    }
    if (b.oom) abort();
    if (b.len) {
        if (b.data[b.len - 1] != '\n' || memchr(b.data, '\n', b.len - 1)) abort();
        json_error_t je;
        /* "\u0000" is valid JSON but jansson refuses it in object keys: check the structure
         * with it read as "\u0001" (in place: b is not used afterwards) */
        for (char *q = b.data; (q = strstr(q, "\\u0000")) != NULL; q += 6) q[5] = '1';
        /* the id is echoed verbatim: integers past 2^63 are valid JSON that jansson reads
         * only as reals */
        json_t *j = json_loadb(b.data, b.len, JSON_DECODE_INT_AS_REAL, &je);
        if (!json_is_object(j)) abort();
        if (n_entries >= 0) {
            json_t *lp = json_object_get(j, "logprobs");
            const char *keys[] = {"tokens", "token_logprobs", "top_logprobs", "text_offset", "token_ids", "top_ids"};
            for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
                if (json_array_size(json_object_get(lp, keys[i])) != (size_t)n_entries) abort();
        } else if (!json_is_object(json_object_get(j, "error"))) {
            abort();
        }
        json_decref(j);
    }
    ps_buf_free(&b);
    ps_jsonl_req_free(&req);
    return 0;
}
