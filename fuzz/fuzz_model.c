/*
 * fuzz_model.c — libFuzzer target for the model loader on top of the GGUF reader.
 *
 * The input is a GGUF file. It is copied into a 64-byte aligned buffer of its exact size (so
 * f32 tensors can pass the alignment check and AddressSanitizer sees any overread), opened
 * with ps_gguf_open_memory and handed to ps_model_load_gguf (model.h): the hyperparameter keys,
 * the tokenizer and every tensor's presence, type and shape are checked there. A rejected
 * input must come back with a known status and a message. An accepted one must have sane
 * numbers in its info, and then runs for real: a session of 8 positions, one forward call of
 * 3 tokens and ps_score_tokens with K = 3 (PS_ERR_NAN is allowed: fuzzed weights may hold
 * NaNs), with native activations for inputs of even size and float32 ones for odd sizes. The same bytes are loaded once more vocab-only and a short text is tokenised and
 * detokenised. Seeds: tiny generated models of every architecture (experts too: qwen3moe and
 * llama with experts) and matrix type
 * (fuzz/corpus/fuzz_model/), dictionary fuzz/model.dict.
 */
#include "model/model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_REQUIRE(c) do { if (!(c)) __builtin_trap(); } while (0)

static void check_error(ps_status st, const ps_error *e) {
    FUZZ_REQUIRE(st == PS_ERR_FORMAT || st == PS_ERR_UNSUPPORTED || st == PS_ERR_NOT_FOUND ||
                 st == PS_ERR_NOMEM || st == PS_ERR_INVALID_ARG);
    FUZZ_REQUIRE(e->code == st && e->message[0] != '\0');
}

static void run_model(const ps_model *m, ps_act act) {
    ps_model_info info;
    ps_model_get_info(m, &info);
    FUZZ_REQUIRE(info.n_vocab >= 1 && info.n_embd >= 1 && info.n_layer >= 1);
    FUZZ_REQUIRE(info.n_head >= 1 && info.n_head_kv >= 1 && info.n_head % info.n_head_kv == 0);
    FUZZ_REQUIRE(info.head_dim >= 1 && info.n_ff >= 1 && info.n_ctx == 8 && !info.vocab_only);
    FUZZ_REQUIRE(ps_vocab_n_tokens(ps_model_vocab(m)) == info.n_vocab);

    ps_session_params sp = ps_session_default_params();
    sp.n_ctx = 8;
    sp.n_batch = 4;
    sp.isa = PS_ISA_AUTO;
    sp.act = act;
    ps_session *s = NULL;
    ps_error e;
    ps_status st = ps_session_create(m, &sp, &s, &e);
    if (st != PS_OK) { /* only memory can stop a session this small */
        FUZZ_REQUIRE(st == PS_ERR_NOMEM);
        return;
    }
    const int32_t nv = info.n_vocab;
    const int32_t toks[3] = {0, nv - 1, nv / 2};
    float *logits = malloc((size_t)3 * (size_t)nv * sizeof *logits);
    FUZZ_REQUIRE(logits);
    st = ps_session_forward(s, toks, 3, logits, &e);
    FUZZ_REQUIRE(st == PS_OK && ps_session_n_past(s) == 3);
    /* out of range ids and a full context are refused with the cache unchanged */
    const int32_t bad[2] = {1, nv};
    FUZZ_REQUIRE(ps_session_forward(s, bad, 2, NULL, &e) == PS_ERR_TOKEN_RANGE);
    FUZZ_REQUIRE(ps_session_n_past(s) == 3);
    free(logits);

    ps_score_params p = ps_score_default_params();
    p.k = 3;
    p.chunk = 2;
    ps_score_result *r = NULL;
    st = ps_score_tokens(s, toks, 3, &p, &r, &e);
    FUZZ_REQUIRE(st == PS_OK || st == PS_ERR_NAN || st == PS_ERR_NOMEM);
    if (st == PS_OK) {
        FUZZ_REQUIRE(r->n_total == 3 && r->n_prompt == 3 && r->k == 3);
        for (int32_t i = 3; i < 9; i++) {
            int32_t id = r->top_ids[i];
            FUZZ_REQUIRE(id >= -1 && id < nv);
            FUZZ_REQUIRE(!(r->top_logprobs[i] > 0.0f));
        }
        ps_score_result_free(r);
    } else {
        FUZZ_REQUIRE(e.message[0] != '\0');
    }
    ps_session_free(s);
}

static void run_vocab(const ps_model *m) {
    const ps_vocab *v = ps_model_vocab(m);
    const int32_t nv = ps_vocab_n_tokens(v);
    FUZZ_REQUIRE(nv >= 1);
    static const char text[] = "Hello, world! \xce\xbb 123\n<s>";
    int32_t ids[64], n = 0;
    ps_error e;
    ps_status st = ps_vocab_tokenize(v, text, sizeof text - 1, true, true, ids, 64, &n, &e);
    if (st != PS_OK) {
        FUZZ_REQUIRE(st == PS_ERR_NOMEM);
        return;
    }
    FUZZ_REQUIRE(n >= 0);
    for (int32_t i = 0; i < n && i < 64; i++) FUZZ_REQUIRE(ids[i] >= 0 && ids[i] < nv);
    size_t len = 0;
    char out[1024];
    FUZZ_REQUIRE(ps_vocab_detokenize(v, ids, n < 64 ? n : 64, true, out, sizeof out, &len) ==
                 PS_OK);
}

static void load(const uint8_t *buf, size_t size, bool vocab_only) {
    ps_gguf *g = NULL;
    ps_error e;
    ps_status st = ps_gguf_open_memory(buf, size, &g, &e);
    if (st != PS_OK) {
        check_error(st, &e);
        return;
    }
    ps_model_params mp = ps_model_default_params();
    mp.n_ctx = 8;
    mp.vocab_only = vocab_only;
    ps_model *m = NULL;
    st = ps_model_load_gguf(g, "fuzz", &mp, &m, &e);
    if (st != PS_OK) {
        FUZZ_REQUIRE(m == NULL);
        check_error(st, &e);
        return;
    }
    if (vocab_only) run_vocab(m);
    else run_model(m, size % 2 ? PS_ACT_F32 : PS_ACT_NATIVE); /* both matmul roads */
    ps_model_free(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    void *buf = NULL;
    if (posix_memalign(&buf, 64, size ? size : 1) != 0) return 0;
    memcpy(buf, data, size);
    load(buf, size, false);
    load(buf, size, true);
    free(buf);
    return 0;
}
