/*
 * fuzz_request.c — libFuzzer target for the request module (request.h):
 * ps_completion_req_parse, ps_tokenize_req_parse and ps_detokenize_req_parse on the same bytes.
 * Any input must give either a validated request whose every invariant holds (ids in range,
 * lengths within the context, K within the cap) or an error with a status in 400..503 and a
 * message; never a crash, a leak or an out-of-bounds read. When the shared stories260K model
 * is found ($PS_SHARED or ../shared) its tokenizer is loaded so string prompts are tokenised
 * too; otherwise string prompts take the "no tokenizer" error path.
 * Corpus: fuzz/corpus/fuzz_request/.
 */
#include "serve/server.h"

#include <stdio.h>
#include <stdlib.h>

static ps_model *g_model;
static ps_req_limits g_lim;

static void setup(void) {
    static int done;
    if (done) return;
    done = 1;
    const char *shared = getenv("PS_SHARED");
    char path[4200];
    snprintf(path, sizeof path, "%s/models/stories260K.gguf", shared && *shared ? shared : "../shared");
    ps_model_params mp = ps_model_default_params();
    mp.vocab_only = true;
    g_lim.model_name = "stories";
    g_lim.n_vocab = 512;
    g_lim.n_ctx = 2048;
    g_lim.max_logprobs = 128;
    if (ps_model_load(path, &mp, &g_model, NULL) == PS_OK) {
        ps_model_info info;
        ps_model_get_info(g_model, &info);
        g_lim.vocab = ps_model_vocab(g_model);
        g_lim.n_vocab = info.n_vocab;
        g_lim.n_ctx = info.n_ctx;
    }
}

static void check_error(const ps_req_error *e) {
    if (e->status < 400 || e->status > 503 || !e->message[0]) abort();
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);
int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    setup();
    ps_req_error e;
    ps_completion_req r;
    if (ps_completion_req_parse((const char *)data, size, &g_lim, &r, &e)) {
        if (r.n_prompts < 1 || r.logprobs < -1 || r.logprobs > g_lim.max_logprobs ||
            r.max_tokens < 0)
            abort();
        for (int32_t i = 0; i < r.n_prompts; i++) {
            if (r.prompts[i].n < 1 || r.prompts[i].n + r.max_tokens > g_lim.n_ctx) abort();
            for (int32_t k = 0; k < r.prompts[i].n; k++)
                if (r.prompts[i].ids[k] < 0 || r.prompts[i].ids[k] >= g_lim.n_vocab) abort();
        }
        ps_completion_req_free(&r);
    } else {
        check_error(&e);
    }
    int32_t *ids = NULL, n = 0;
    if (ps_tokenize_req_parse((const char *)data, size, &g_lim, &ids, &n, &e)) {
        if (n < 0) abort();
        ps_free(ids);
    } else {
        check_error(&e);
    }
    if (ps_detokenize_req_parse((const char *)data, size, &g_lim, &ids, &n, &e)) {
        for (int32_t k = 0; k < n; k++)
            if (ids[k] < 0 || ids[k] >= g_lim.n_vocab) abort();
        ps_free(ids);
    } else {
        check_error(&e);
    }
    return 0;
}
