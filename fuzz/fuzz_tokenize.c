/*
 * fuzz_tokenize.c — libFuzzer target for the tokenizers (vocab.c).
 *
 * Vocabularies: two tiny ones built in memory with the GGUF writer (always), plus the
 * SentencePiece, Qwen2 and DeepSeek-LLM files of ../shared/vocab (or $PS_SHARED/vocab) when
 * they are there. The first input byte picks the vocabulary and the flags (add_bos,
 * parse_special); the rest is the text, any bytes. Properties, each a trap when violated:
 *   - tokenizing never fails (PS_OK) and every id is inside the vocabulary;
 *   - a call with capacity 0 reports the same count as a call with room for all ids, and a
 *     call with a too-small buffer writes the same prefix;
 *   - detokenize gives the text back for the real byte-level BPE vocabularies (DeepSeek: for
 *     valid UTF-8), and for
 *     the SentencePiece one for valid UTF-8 without special parsing and without U+2581.
 */
#include "gguf/gguf.h"
#include "model/vocab.h"

#include <stdio.h>
#include <stdlib.h>

#define FUZZ_REQUIRE(c) do { if (!(c)) __builtin_trap(); } while (0)

typedef struct {
    ps_vocab *v;
    bool lossless_bpe; /* real byte-level BPE: every text round-trips */
    bool lossless_spm; /* real SentencePiece with byte tokens: round-trips without specials */
    bool utf8_only;    /* lossless only for valid UTF-8 (DeepSeek gives the bytes that never
                          occur in UTF-8, 0xC0 0xC1 0xF5..0xFF, to user-defined tokens that
                          detokenise as their text, as llama.cpp and HF do; SentencePiece cuts
                          characters by their lead byte, so an invalid lead byte swallows the
                          escaped space after it into byte tokens) */
} fuzz_vocab;

static fuzz_vocab g_vocabs[8];
static int g_n_vocabs;

static ps_vocab *load_memory(ps_gguf_writer *w) {
    void *data = NULL;
    size_t size = 0;
    ps_vocab *v = NULL;
    ps_gguf *g = NULL;
    if (ps_gguf_write_memory(w, &data, &size, NULL) == PS_OK &&
        ps_gguf_open_memory(data, size, &g, NULL) == PS_OK) {
        if (ps_vocab_load(g, &v, NULL) != PS_OK) v = NULL;
        ps_gguf_close(g);
    }
    ps_free(data);
    ps_gguf_writer_free(w);
    return v;
}

static bool valid_utf8(const uint8_t *s, size_t n) {
    for (size_t i = 0; i < n;) {
        uint8_t c = s[i];
        size_t len = c < 0x80 ? 1 : c >= 0xC2 && c < 0xE0 ? 2 : c >= 0xE0 && c < 0xF0 ? 3
                   : c >= 0xF0 && c < 0xF5 ? 4 : 0;
        if (!len || i + len > n) return false;
        for (size_t k = 1; k < len; k++)
            if ((s[i + k] & 0xC0) != 0x80) return false;
        i += len;
    }
    return true;
}

static void add_tiny(void) {
    /* SentencePiece: a few pieces, no byte tokens (bytes fall back to <unk>) */
    ps_gguf_writer *w = ps_gguf_writer_new();
    const char *spm[] = {"<unk>", "<s>", "</s>", "\xe2\x96\x81", "\xe2\x96\x81" "a", "a", "b",
                         "ab", "\xe2\x96\x81" "ab", "<user>"};
    float scores[] = {0, 0, 0, -1, -2, -3, -3, -1, -0.5f, 0};
    int32_t types[] = {2, 3, 3, 1, 1, 1, 1, 1, 1, 4};
    ps_gguf_set_str(w, "tokenizer.ggml.model", "llama");
    ps_gguf_set_arr_str(w, "tokenizer.ggml.tokens", spm, NULL, 10);
    ps_gguf_set_arr(w, "tokenizer.ggml.scores", PS_GGUF_FLOAT32, scores, 10);
    ps_gguf_set_arr(w, "tokenizer.ggml.token_type", PS_GGUF_INT32, types, 10);
    ps_vocab *v = load_memory(w);
    if (v) g_vocabs[g_n_vocabs++] = (fuzz_vocab){v, false, false, false};

    /* byte-level BPE with a merge whose result is no token */
    w = ps_gguf_writer_new();
    const char *bpe[] = {"a", "b", "ab", "<|endoftext|>", "\xc4\xa0", "[PAD]"};
    int32_t btypes[] = {1, 1, 1, 3, 1, 4};
    const char *merges[] = {"a b", "\xc4\xa0 a", "ab ab"};
    ps_gguf_set_str(w, "tokenizer.ggml.model", "gpt2");
    ps_gguf_set_str(w, "tokenizer.ggml.pre", "llama-bpe");
    ps_gguf_set_arr_str(w, "tokenizer.ggml.tokens", bpe, NULL, 6);
    ps_gguf_set_arr(w, "tokenizer.ggml.token_type", PS_GGUF_INT32, btypes, 6);
    ps_gguf_set_arr_str(w, "tokenizer.ggml.merges", merges, NULL, 3);
    v = load_memory(w);
    if (v) g_vocabs[g_n_vocabs++] = (fuzz_vocab){v, false, false, false};
}

static void add_file(const char *dir, const char *name, bool bpe, bool utf8_only) {
    char path[4096];
    snprintf(path, sizeof path, "%s/vocab/ggml-vocab-%s.gguf", dir, name);
    ps_gguf *g = NULL;
    ps_vocab *v = NULL;
    if (ps_gguf_open(path, &g, NULL) != PS_OK) return;
    if (ps_vocab_load(g, &v, NULL) == PS_OK) g_vocabs[g_n_vocabs++] = (fuzz_vocab){v, bpe, !bpe, utf8_only};
    ps_gguf_close(g);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    add_tiny();
    const char *dir = getenv("PS_SHARED");
    if (!dir || !*dir) dir = "../shared";
    add_file(dir, "llama-spm", false, true);
    add_file(dir, "qwen2", true, false);
    add_file(dir, "deepseek-llm", true, true);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!g_n_vocabs) LLVMFuzzerInitialize(NULL, NULL);
    if (size < 1 || !g_n_vocabs) return 0;
    const fuzz_vocab *fv = &g_vocabs[data[0] % g_n_vocabs];
    bool add_bos = data[0] & 0x10, special = data[0] & 0x20;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;

    int32_t n0 = -1;
    ps_error err;
    FUZZ_REQUIRE(ps_vocab_tokenize(fv->v, text, len, add_bos, special, NULL, 0, &n0, &err) ==
                 PS_OK);
    FUZZ_REQUIRE(n0 >= 0);
    int32_t *ids = malloc(sizeof *ids * ((size_t)n0 + 1));
    if (!ids) return 0;
    int32_t n1 = -1;
    FUZZ_REQUIRE(ps_vocab_tokenize(fv->v, text, len, add_bos, special, ids, n0 + 1, &n1, &err) ==
                 PS_OK);
    FUZZ_REQUIRE(n1 == n0);
    int32_t n_tok = ps_vocab_n_tokens(fv->v);
    for (int32_t i = 0; i < n1; i++) FUZZ_REQUIRE(ids[i] >= 0 && ids[i] < n_tok);
    if (n1 > 1) { /* a short buffer gets the same prefix */
        int32_t half = n1 / 2, n2 = -1;
        int32_t *part = malloc(sizeof *part * (size_t)half);
        if (part) {
            FUZZ_REQUIRE(ps_vocab_tokenize(fv->v, text, len, add_bos, special, part, half, &n2,
                                           &err) == PS_OK);
            FUZZ_REQUIRE(n2 == n1 && !memcmp(part, ids, sizeof *part * (size_t)half));
            free(part);
        }
    }
    bool bos_added = add_bos && ps_vocab_add_bos(fv->v);
    if (bos_added) FUZZ_REQUIRE(n1 >= 1 && ids[0] == ps_vocab_bos(fv->v));
    /* SentencePiece maps a literal U+2581 in the text to a space: not lossless then */
    bool has_2581 = len >= 3 && memmem(text, len, "\xe2\x96\x81", 3);
    bool utf8_ok = !fv->utf8_only || valid_utf8(data + 1, len);
    if ((fv->lossless_bpe && utf8_ok) || (fv->lossless_spm && utf8_ok && !special && !has_2581)) {
        size_t out_len = 0;
        const int32_t *body = ids + (bos_added ? 1 : 0);
        int32_t n_body = n1 - (bos_added ? 1 : 0);
        FUZZ_REQUIRE(ps_vocab_detokenize(fv->v, body, n_body, true, NULL, 0, &out_len) == PS_OK);
        char *out = malloc(out_len + 1);
        if (out) {
            FUZZ_REQUIRE(ps_vocab_detokenize(fv->v, body, n_body, true, out, out_len + 1,
                                             &out_len) == PS_OK);
            FUZZ_REQUIRE(out_len == len && !memcmp(out, text, len));
            free(out);
        }
    }
    free(ids);
    return 0;
}
