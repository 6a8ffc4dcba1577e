// lscore.cpp — prompt logprobs under llama.cpp, for comparing promptscore with another engine.
//
// Links against a llama.cpp build (libllama + ggml) through its public header llama.h only.
// One batch holds the whole prompt, every position asks for logits; the log-softmax is taken
// in double over llama.cpp's float logits. Prints one line per scored position i >= 1:
//     i token_id logprob id:logprob x5        (the 5 most likely, ties by ascending id)
// Settings that matter for a fair comparison with promptscore: the KV cache is float32
// (llama.cpp's default is f16; LS_F16KV=1 keeps that), flash attention off, one thread.
// LS_NOREPACK=1 turns off llama.cpp's repacked CPU weight layouts (its "extra buffer types"):
// the two llama.cpp runs differ from each other, which is the noise floor of the comparison.
//
//   lscore MODEL.gguf N_CTX ID ID ID ...
#include "llama.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

static void quiet(ggml_log_level, const char *, void *) {}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: lscore MODEL.gguf N_CTX ID ID [ID ...]\n");
        return 2;
    }
    if (!getenv("LS_LOG")) llama_log_set(quiet, nullptr);
    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    if (getenv("LS_NOREPACK")) mp.use_extra_bufts = false;
    llama_model *model = llama_model_load_from_file(argv[1], mp);
    if (!model) {
        fprintf(stderr, "lscore: %s does not load (LS_LOG=1 says why)\n", argv[1]);
        return 1;
    }
    std::vector<llama_token> ids;
    for (int i = 3; i < argc; i++) ids.push_back(atoi(argv[i]));
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t)atoi(argv[2]);
    cp.n_batch = cp.n_ubatch = (uint32_t)ids.size();
    cp.n_threads = cp.n_threads_batch = 1;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    if (!getenv("LS_F16KV")) cp.type_k = cp.type_v = GGML_TYPE_F32;
    llama_context *ctx = llama_init_from_model(model, cp);
    if (!ctx) {
        fprintf(stderr, "lscore: no context\n");
        return 1;
    }
    llama_batch b = llama_batch_init((int32_t)ids.size(), 0, 1);
    for (size_t i = 0; i < ids.size(); i++) {
        b.token[i] = ids[i];
        b.pos[i] = (llama_pos)i;
        b.n_seq_id[i] = 1;
        b.seq_id[i][0] = 0;
        b.logits[i] = 1;
    }
    b.n_tokens = (int32_t)ids.size();
    if (llama_decode(ctx, b)) {
        fprintf(stderr, "lscore: decode failed\n");
        return 1;
    }
    const int nv = llama_vocab_n_tokens(llama_model_get_vocab(model));
    std::vector<int> order(nv);
    for (size_t i = 0; i + 1 < ids.size(); i++) {
        const float *l = llama_get_logits_ith(ctx, (int32_t)i);
        double mx = -INFINITY, s = 0.0;
        for (int v = 0; v < nv; v++) mx = std::max(mx, (double)l[v]);
        for (int v = 0; v < nv; v++) s += std::exp((double)l[v] - mx);
        const double lse = mx + std::log(s);
        for (int v = 0; v < nv; v++) order[v] = v;
        std::partial_sort(order.begin(), order.begin() + 5, order.end(),
                          [&](int x, int y) { return l[x] > l[y] || (l[x] == l[y] && x < y); });
        printf("%zu %d %.7f", i + 1, ids[i + 1], l[ids[i + 1]] - lse);
        for (int k = 0; k < 5; k++) printf(" %d:%.7f", order[k], l[order[k]] - lse);
        printf("\n");
    }
    llama_batch_free(b);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
