/*
 * test_vocab.c — the tokenizers against llama.cpp's test vectors (the .inp / .out files of ../shared/vocab:
 * no BOS, no special parsing), round trips through detokenize, BOS and special-token
 * handling, token bytes, id range errors, malformed and unsupported vocabularies (built in
 * memory with the GGUF writer), and loading a vocab-only file through ps_model_load.
 */
#include "check.h"
#include "base/testhooks.h"
#include "gguf/gguf.h"
#include "model/vocab.h"

#include <math.h>
#include <pthread.h>
#include <sys/wait.h>
#include <time.h>

static char *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf) buf[n] = 0;
    *len = (size_t)n;
    return buf;
}

/* this thread's CPU time: a guard against a load that grows quadratically with the vocabulary,
 * which other processes on a loaded machine cannot trip (wall time there ran 4x) */
static double cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The yardstick the load times are held to, measured in this run on this machine as it is
 * now: the CPU time of 2^18 string inserts into an open-addressing table of 2^19 slots (the
 * kind of work a vocabulary load does per token and merge), the least of three. A linear load
 * of 150,000 tokens and as many merges takes about 5 of these here; a quadratic one, hundreds. */
static double g_yardstick = -1;
static double yardstick(void) {
    if (g_yardstick > 0) return g_yardstick;
    enum { N = 1 << 18, SLOTS = 1 << 19 };
    uint64_t *table = calloc(SLOTS, sizeof *table);
    double best = 1e9;
    uint64_t sink = 0;
    for (int rep = 0; rep < 3 && table; rep++) {
        memset(table, 0, SLOTS * sizeof *table);
        double t0 = cpu_s();
        for (uint32_t i = 0; i < N; i++) {
            char key[16];
            int n = snprintf(key, sizeof key, "tok%u", i * 2654435761u);
            uint64_t h = 1469598103934665603ull;
            for (int k = 0; k < n; k++) h = (h ^ (uint8_t)key[k]) * 1099511628211ull;
            uint64_t j = h & (SLOTS - 1);
            while (table[j] && table[j] != h) j = (j + 1) & (SLOTS - 1);
            table[j] = h | 1;
        }
        double dt = cpu_s() - t0;
        sink += table[rep];
        if (dt < best) best = dt;
    }
    free(table);
    g_yardstick = best > 1e-4 ? best : 1e-4;
    printf("  yardstick: %.4f s of CPU (%llu)\n", g_yardstick, (unsigned long long)(sink & 1));
    return g_yardstick;
}

static ps_vocab *open_vocab(const char *path, ps_gguf **g_out) {
    ps_gguf *g = NULL;
    ps_error err;
    if (ps_gguf_open(path, &g, &err) != PS_OK) {
        fprintf(stderr, "open %s: %s\n", path, err.message);
        return NULL;
    }
    ps_vocab *v = NULL;
    double t0 = cpu_s();
    ps_status st = ps_vocab_load(g, &v, &err);
    double dt = cpu_s() - t0;
    if (st != PS_OK) {
        fprintf(stderr, "load %s: %s\n", path, err.message);
        ps_gguf_close(g);
        return NULL;
    }
    const double ys = yardstick();
    printf("  loaded %s: %d tokens in %.3f s of CPU (%.1f yardsticks)\n", path,
           ps_vocab_n_tokens(v), dt, dt / ys);
    CHECKF(dt < 25 * ys, "loading %s took %.3f s of CPU, %.1f times this run's yardstick "
           "(%.4f s; at most 25)", path, dt, dt / ys, ys);
    *g_out = g;
    return v;
}

/* Tokenizes, growing the buffer as the API asks. Returns a malloc'd array. */
static int32_t *tokenize(const ps_vocab *v, const char *s, size_t n, bool bos, bool special,
                         int32_t *n_out) {
    int32_t cap = 4, n_ids = 0;
    int32_t *ids = malloc(sizeof *ids * (size_t)cap);
    ps_error err;
    for (;;) {
        ps_status st = ps_vocab_tokenize(v, s, n, bos, special, ids, cap, &n_ids, &err);
        if (st != PS_OK) {
            fprintf(stderr, "tokenize: %s\n", err.message);
            free(ids);
            return NULL;
        }
        if (n_ids <= cap) break;
        cap = n_ids;
        ids = realloc(ids, sizeof *ids * (size_t)cap);
    }
    *n_out = n_ids;
    return ids;
}

static bool is_valid_utf8(const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        size_t len = u[i] < 0x80 ? 1 : u[i] >= 0xF0 ? 4 : u[i] >= 0xE0 ? 3 : u[i] >= 0xC0 ? 2 : 0;
        if (!len || i + len > n) return false;
        for (size_t k = 1; k < len; k++)
            if ((u[i + k] & 0xC0) != 0x80) return false;
        i += len;
    }
    return true;
}

/* Runs every vector of one file; returns the number that matched. */
static void run_vectors(const char *shared, const char *name) {
    char path[4200], inp_path[4300], out_path[4300];
    snprintf(path, sizeof path, "%s/vocab/ggml-vocab-%s.gguf", shared, name);
    snprintf(inp_path, sizeof inp_path, "%s.inp", path);
    snprintf(out_path, sizeof out_path, "%s.out", path);
    size_t inp_len, out_len;
    char *inp = read_all(inp_path, &inp_len);
    char *out = read_all(out_path, &out_len);
    if (!inp || !out) {
        SKIP("%s: no test vectors", name);
        free(inp);
        free(out);
        return;
    }
    ps_gguf *g = NULL;
    ps_vocab *v = open_vocab(path, &g);
    CHECKF(v != NULL, "%s loads", name);
    if (!v) {
        free(inp);
        free(out);
        return;
    }
    static const char SEP[] = "\n__ggml_vocab_test__\n";
    int total = 0, ok = 0, rt_total = 0, rt_ok = 0;
    char *ip = inp, *op = out;
    for (;;) {
        char *sep = strstr(ip, SEP);
        if (!sep) break;
        size_t slen = (size_t)(sep - ip);
        char *eol = strchr(op, '\n');
        if (!eol) break;
        *eol = 0;
        int32_t expect[4096];
        int n_expect = 0;
        for (char *p = op; *p;) {
            char *end;
            long x = strtol(p, &end, 10);
            if (end == p) break;
            if (n_expect < 4096) expect[n_expect++] = (int32_t)x;
            p = end;
        }
        int32_t n_ids = 0;
        int32_t *ids = tokenize(v, ip, slen, false, false, &n_ids);
        bool same = ids && n_ids == n_expect &&
                    (n_ids == 0 || !memcmp(ids, expect, sizeof *ids * (size_t)n_ids));
        total++;
        if (same) {
            ok++;
        } else {
            fprintf(stderr, "  %s vector %d \"%.*s\":\n    want", name, total, (int)PS_MIN(slen, 60),
                    ip);
            for (int i = 0; i < n_expect; i++) fprintf(stderr, " %d", expect[i]);
            fprintf(stderr, "\n    got ");
            for (int i = 0; ids && i < n_ids; i++) fprintf(stderr, " %d", ids[i]);
            fprintf(stderr, "\n");
        }
        /* detokenize gives the text back (lossless for valid UTF-8) */
        if (ids && is_valid_utf8(ip, slen)) {
            char buf[8192];
            size_t len = 0;
            ps_status st = ps_vocab_detokenize(v, ids, n_ids, true, buf, sizeof buf, &len);
            rt_total++;
            if (st == PS_OK && len == slen && !memcmp(buf, ip, slen)) rt_ok++;
            else
                fprintf(stderr, "  %s vector %d: detokenize gives \"%.*s\" (%zu bytes)\n", name,
                        total, (int)PS_MIN(len, 60), buf, len);
        }
        free(ids);
        ip = sep + sizeof SEP - 1;
        op = eol + 1;
    }
    printf("%s: %d/%d vectors, %d/%d round trips\n", name, ok, total, rt_ok, rt_total);
    CHECKF(total == 46 && ok == total, "%s: %d/%d vectors", name, ok, total);
    CHECKF(rt_ok == rt_total, "%s: %d/%d round trips", name, rt_ok, rt_total);
    ps_vocab_free(v);
    ps_gguf_close(g);
    free(inp);
    free(out);
}

static void expect_ids(const ps_vocab *v, const char *s, bool bos, bool special,
                       const int32_t *want, int n_want, const char *what) {
    int32_t n = 0;
    int32_t *ids = tokenize(v, s, strlen(s), bos, special, &n);
    bool same = ids && n == n_want && (n == 0 || !memcmp(ids, want, sizeof *want * (size_t)n));
    CHECKF(same, "%s: \"%s\" -> %d ids (first %d)", what, s, n, ids && n ? ids[0] : -1);
    free(ids);
}

static void test_spm(const char *shared) {
    char path[4200];
    snprintf(path, sizeof path, "%s/vocab/ggml-vocab-llama-spm.gguf", shared);
    ps_gguf *g = NULL;
    ps_vocab *v = open_vocab(path, &g);
    CHECK(v != NULL);
    if (!v) return;
    CHECK(ps_vocab_n_tokens(v) == 32000);
    CHECK(ps_vocab_bos(v) == 1 && ps_vocab_eos(v) == 2);
    CHECK(ps_vocab_add_bos(v));
    CHECK(ps_vocab_is_control(v, 1) && ps_vocab_is_control(v, 2) && !ps_vocab_is_control(v, 100));
    CHECK(!ps_vocab_is_control(v, -1) && !ps_vocab_is_control(v, 32000));

    /* BOS */
    int32_t hello[] = {15043, 3186}; /* "▁Hello", "▁world" */
    int32_t hello_bos[] = {1, 15043, 3186};
    expect_ids(v, "Hello world", false, false, hello, 2, "spm no bos");
    expect_ids(v, "Hello world", true, false, hello_bos, 3, "spm bos");
    expect_ids(v, "", true, false, hello_bos, 1, "spm empty + bos");
    expect_ids(v, "", false, false, NULL, 0, "spm empty");

    /* "<s>": a control token only with parse_special; the text after it gets the space prefix */
    int32_t n1 = 0, n2 = 0;
    int32_t *a = tokenize(v, "<s>Hello", 8, false, true, &n1);
    int32_t *b = tokenize(v, "<s>Hello", 8, false, false, &n2);
    CHECKF(a && n1 == 2 && a[0] == 1 && a[1] == 15043, "<s>Hello parsed: %d ids", n1);
    CHECKF(b && n2 > 2 && b[0] != 1, "<s>Hello as text: %d ids", n2);
    free(a);
    free(b);

    /* byte offsets (the CLI's prompt_offset): null for the BOS added; the word after "<s>"
     * carries the space prefix again, so it starts at its first letter */
    a = tokenize(v, "<s>Hello world", 14, true, true, &n1);
    int32_t off[4] = {7, 7, 7, 7};
    CHECKF(a && n1 == 4 && a[0] == 1 && a[1] == 1 && a[2] == 15043 && a[3] == 3186,
           "<s>Hello world with BOS: %d ids", n1);
    if (a && n1 == 4) {
        CHECK(ps_vocab_byte_offsets(v, "<s>Hello world", 14, a, 4, true, off) == PS_OK);
        CHECKF(off[0] == -1 && off[1] == 0 && off[2] == 3 && off[3] == 8,
               "offsets %d %d %d %d", off[0], off[1], off[2], off[3]);
        CHECK(ps_vocab_byte_offsets(v, "<s>Hello world", 14, a, 4, false, off) == PS_OK &&
              off[0] == 0 && off[1] == -1);
        CHECK(ps_vocab_byte_offsets(NULL, "x", 1, a, 4, true, off) == PS_ERR_INVALID_ARG);
        CHECK(ps_vocab_byte_offsets(v, NULL, 1, a, 4, true, off) == PS_ERR_INVALID_ARG);
        CHECK(ps_vocab_byte_offsets(v, "x", 1, a, -1, true, off) == PS_ERR_INVALID_ARG);
        CHECK(ps_vocab_byte_offsets(v, "x", 1, a, 4, true, NULL) == PS_ERR_INVALID_ARG);
        CHECK(ps_vocab_byte_offsets(v, NULL, 0, NULL, 0, false, NULL) == PS_OK);
    }
    free(a);

    /* bytes of byte tokens, pieces, control text */
    const char *bytes;
    size_t len;
    CHECK(ps_vocab_token_bytes(v, 13, &bytes, &len) == PS_OK && len == 1 && bytes[0] == '\n');
    CHECK(ps_vocab_token_piece(v, 13, &bytes, &len) == PS_OK && len == 6 &&
          !memcmp(bytes, "<0x0A>", 6));
    CHECK(ps_vocab_token_bytes(v, 3 + 0xFF, &bytes, &len) == PS_OK && len == 1 &&
          (unsigned char)bytes[0] == 0xFF);
    CHECK(ps_vocab_token_bytes(v, 15043, &bytes, &len) == PS_OK && len == 6 &&
          !memcmp(bytes, " Hello", 6));
    CHECK(ps_vocab_token_bytes(v, 1, &bytes, &len) == PS_OK && len == 3 &&
          !memcmp(bytes, "<s>", 3));
    CHECK(ps_vocab_token_bytes(v, -1, &bytes, &len) == PS_ERR_TOKEN_RANGE);
    CHECK(ps_vocab_token_bytes(v, 32000, &bytes, &len) == PS_ERR_TOKEN_RANGE);
    CHECK(ps_vocab_token_piece(v, 32000, &bytes, &len) == PS_ERR_TOKEN_RANGE);
    int32_t bad[] = {15043, 32000};
    char buf[64];
    CHECK(ps_vocab_detokenize(v, bad, 2, true, buf, sizeof buf, &len) == PS_ERR_TOKEN_RANGE);
    /* detokenize: small buffer still reports the size */
    CHECK(ps_vocab_detokenize(v, hello, 2, true, buf, 3, &len) == PS_OK && len == 11);
    CHECK(ps_vocab_detokenize(v, hello, 2, false, buf, sizeof buf, &len) == PS_OK && len == 12 &&
          !strcmp(buf, " Hello world"));

    /* capacity smaller than needed: count reported, prefix written */
    int32_t small[1] = {-5}, n_ids = 0;
    CHECK(ps_vocab_tokenize(v, "Hello world", 11, false, false, small, 1, &n_ids, NULL) ==
              PS_OK &&
          n_ids == 2 && small[0] == 15043);
    CHECK(ps_vocab_tokenize(v, "x", 1, false, false, NULL, 0, &n_ids, NULL) == PS_OK &&
          n_ids >= 1);
    CHECK(ps_vocab_tokenize(v, NULL, 3, false, false, NULL, 0, &n_ids, NULL) ==
          PS_ERR_INVALID_ARG);
    CHECK(ps_vocab_tokenize(v, "x", 1, false, false, NULL, -1, &n_ids, NULL) ==
          PS_ERR_INVALID_ARG);

    /* invalid UTF-8 and NULs: byte fallback, lossless */
    const char junk[] = {'a', '\xff', '\0', '\xc3', 'b', '\x80', '\xe2', '\x96'};
    int32_t n = 0;
    int32_t *ids = tokenize(v, junk, sizeof junk, false, false, &n);
    CHECK(ids && n > 0);
    if (ids) {
        char out[64];
        CHECK(ps_vocab_detokenize(v, ids, n, true, out, sizeof out, &len) == PS_OK &&
              len == sizeof junk && !memcmp(out, junk, sizeof junk));
    }
    free(ids);
    ps_vocab_free(v);
    ps_gguf_close(g);
}

static void test_bpe_special(const char *shared) {
    char path[4200];
    snprintf(path, sizeof path, "%s/vocab/ggml-vocab-gpt-2.gguf", shared);
    ps_gguf *g = NULL;
    ps_vocab *v = open_vocab(path, &g);
    CHECK(v != NULL);
    if (!v) return;
    CHECK(!ps_vocab_add_bos(v));
    CHECK(ps_vocab_bos(v) == 50256 && ps_vocab_is_control(v, 50256));
    int32_t eot[] = {50256};
    expect_ids(v, "<|endoftext|>", false, true, eot, 1, "gpt2 parse_special");
    int32_t n = 0;
    int32_t *ids = tokenize(v, "<|endoftext|>", 13, false, false, &n);
    CHECKF(ids && n > 1, "gpt2 <|endoftext|> as text: %d ids", n);
    free(ids);
    /* add_bos is false for gpt-2: no BOS even when asked */
    ids = tokenize(v, "Hello", 5, true, false, &n);
    CHECK(ids && n == 1 && ids[0] == 15496);
    free(ids);
    /* byte-level: every byte round-trips, invalid UTF-8 and NUL included */
    char all[256];
    for (int i = 0; i < 256; i++) all[i] = (char)i;
    ids = tokenize(v, all, sizeof all, false, false, &n);
    CHECK(ids && n > 0);
    if (ids) {
        char out[1024];
        size_t len = 0;
        CHECK(ps_vocab_detokenize(v, ids, n, true, out, sizeof out, &len) == PS_OK &&
              len == 256 && !memcmp(out, all, 256));
    }
    free(ids);
    const char *bytes;
    size_t len;
    CHECK(ps_vocab_token_bytes(v, 220, &bytes, &len) == PS_OK && len == 1 && bytes[0] == ' ');
    CHECK(ps_vocab_token_piece(v, 220, &bytes, &len) == PS_OK && len == 2 &&
          !memcmp(bytes, "\xc4\xa0", 2));
    CHECK(ps_vocab_token_bytes(v, 50256, &bytes, &len) == PS_OK && len == 13 &&
          !memcmp(bytes, "<|endoftext|>", 13));
    ps_vocab_free(v);
    ps_gguf_close(g);
}

/* One vocab shared by threads: every thread gets the same ids. */
typedef struct {
    const ps_vocab *v;
    const char *text;
    int32_t want[64];
    int n_want;
    int bad;
} thread_arg;

static void *thread_main(void *p) {
    thread_arg *a = p;
    for (int it = 0; it < 50; it++) {
        int32_t ids[64], n = 0;
        if (ps_vocab_tokenize(a->v, a->text, strlen(a->text), false, false, ids, 64, &n, NULL) ||
            n != a->n_want || memcmp(ids, a->want, sizeof *ids * (size_t)n))
            a->bad++;
    }
    return NULL;
}

static void test_threads(const char *shared) {
    char path[4200];
    snprintf(path, sizeof path, "%s/vocab/ggml-vocab-llama-bpe.gguf", shared);
    ps_gguf *g = NULL;
    ps_vocab *v = open_vocab(path, &g);
    CHECK(v != NULL);
    if (!v) return;
    thread_arg args[4];
    pthread_t th[4];
    const char *text = "Hello, y'all! How are you 😁 ?我想在apple工作1314151天～ 3333 \n\n\t x";
    int32_t want[64], n = 0;
    CHECK(ps_vocab_tokenize(v, text, strlen(text), false, false, want, 64, &n, NULL) == PS_OK);
    for (int i = 0; i < 4; i++) {
        args[i] = (thread_arg){v, text, {0}, n, 0};
        memcpy(args[i].want, want, sizeof want);
        pthread_create(&th[i], NULL, thread_main, &args[i]);
    }
    int bad = 0;
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        bad += args[i].bad;
    }
    CHECKF(bad == 0, "%d thread mismatches", bad);
    ps_vocab_free(v);
    ps_gguf_close(g);
}

/* ---- small vocabularies built with the writer ---- */

static ps_status load_built(ps_gguf_writer *w, ps_vocab **v, ps_error *err) {
    void *data = NULL;
    size_t size = 0;
    ps_status st = ps_gguf_write_memory(w, &data, &size, err);
    if (st != PS_OK) return st;
    ps_gguf *g = NULL;
    st = ps_gguf_open_memory(data, size, &g, err);
    if (st == PS_OK) {
        st = ps_vocab_load(g, v, err);
        ps_gguf_close(g);
    }
    ps_free(data);
    return st;
}

static ps_gguf_writer *tiny_bpe(const char *pre) {
    ps_gguf_writer *w = ps_gguf_writer_new();
    const char *toks[] = {"a", "b", "ab", "<|endoftext|>", "\xc4\xa0", "!"};
    int32_t types[] = {1, 1, 1, 3, 1, 4}; /* "!": user-defined, cut out even as plain text */
    const char *merges[] = {"a b"};
    ps_gguf_set_str(w, "tokenizer.ggml.model", "gpt2");
    if (pre) ps_gguf_set_str(w, "tokenizer.ggml.pre", pre);
    ps_gguf_set_arr_str(w, "tokenizer.ggml.tokens", toks, NULL, 6);
    ps_gguf_set_arr(w, "tokenizer.ggml.token_type", PS_GGUF_INT32, types, 6);
    ps_gguf_set_arr_str(w, "tokenizer.ggml.merges", merges, NULL, 1);
    ps_gguf_set_u32(w, "tokenizer.ggml.eos_token_id", 3);
    return w;
}

/* ---- ps_vocab_same: every token's text and type, the special ids and flags ---- */

typedef enum { D_NONE, D_TEXT, D_TYPE, D_EOS, D_BOS, D_PAD, D_EOT, D_ADD_BOS, D_SIZE } vocab_diff;

/* tiny_bpe("gpt-2") with BOS 0 and BOS added, changed in one thing. */
static ps_vocab *tiny_variant(vocab_diff d) {
    ps_gguf_writer *w = ps_gguf_writer_new();
    const char *toks[] = {"a", "b", "ab", "<|endoftext|>", "\xc4\xa0", "!", "?"};
    int32_t types[] = {1, 1, 1, 3, 1, 4, 1};
    const char *merges[] = {"a b"};
    if (d == D_TEXT) toks[5] = "#";
    if (d == D_TYPE) types[1] = 3; /* "b" a control token */
    ps_gguf_set_str(w, "tokenizer.ggml.model", "gpt2");
    ps_gguf_set_str(w, "tokenizer.ggml.pre", "gpt-2");
    ps_gguf_set_arr_str(w, "tokenizer.ggml.tokens", toks, NULL, d == D_SIZE ? 6 : 7);
    ps_gguf_set_arr(w, "tokenizer.ggml.token_type", PS_GGUF_INT32, types, d == D_SIZE ? 6 : 7);
    ps_gguf_set_arr_str(w, "tokenizer.ggml.merges", merges, NULL, 1);
    ps_gguf_set_u32(w, "tokenizer.ggml.eos_token_id", d == D_EOS ? 6 : 3);
    ps_gguf_set_u32(w, "tokenizer.ggml.bos_token_id", d == D_BOS ? 6 : 0);
    if (d == D_PAD) ps_gguf_set_u32(w, "tokenizer.ggml.padding_token_id", 6);
    ps_gguf_set_u32(w, "tokenizer.ggml.eot_token_id", d == D_EOT ? 5 : 3);
    ps_gguf_set_bool(w, "tokenizer.ggml.add_bos_token", d != D_ADD_BOS);
    ps_vocab *v = NULL;
    ps_error err;
    ps_status st = load_built(w, &v, &err);
    CHECKF(st == PS_OK, "variant %d loads: %s", (int)d, err.message);
    ps_gguf_writer_free(w);
    return v;
}

static void test_vocab_same(void) {
    static const struct {
        vocab_diff d;
        const char *needle[3]; /* what the message must name */
    } cases[] = {
        {D_TEXT, {"token 5", "\"!\"", "\"#\""}},
        {D_TYPE, {"token 1", "type", "control"}},
        {D_EOS, {"eos_token_id", "3", "6"}},
        {D_BOS, {"bos_token_id", "0", "6"}},
        {D_PAD, {"padding_token_id", "none", "6"}},
        {D_EOT, {"eot_token_id", "3", "5"}},
        {D_ADD_BOS, {"add_bos_token", "true", "false"}},
        {D_SIZE, {"size", "7", "6"}},
    };
    ps_vocab *base = tiny_variant(D_NONE), *again = tiny_variant(D_NONE);
    ps_error err;
    CHECK(base && again && ps_vocab_same(base, again, &err) == PS_OK);
    for (size_t i = 0; i < PS_ARRAY_LEN(cases) && base; i++) {
        ps_vocab *o = tiny_variant(cases[i].d);
        if (!o) continue;
        CHECK(ps_vocab_n_tokens(o) == ps_vocab_n_tokens(base) || cases[i].d == D_SIZE);
        ps_status st = ps_vocab_same(base, o, &err);
        bool named = st == PS_ERR_INVALID_ARG;
        for (int k = 0; k < 3 && named; k++) named = strstr(err.message, cases[i].needle[k]) != NULL;
        CHECKF(named, "vocabularies differing in one thing (case %d): status %d, '%s'",
               (int)cases[i].d, st, st ? err.message : "(the same)");
        CHECK(ps_vocab_same(o, o, NULL) == PS_OK);
        ps_vocab_free(o);
    }
    CHECK(ps_vocab_same(base, NULL, &err) == PS_ERR_INVALID_ARG);
    ps_vocab_free(base);
    ps_vocab_free(again);
}

/* Every special-id key the loader reads, set outside the vocabulary (one past the end, far
 * past it, and 2^31): refused, the message naming the key; inside it: loads. 0xFFFFFFFF and
 * -1 mean "none" (stories260K's padding id is 0xFFFFFFFF): they load, except for a BOS that
 * the vocabulary adds (explicitly or by default, as SentencePiece does) and an EOS it adds. */
static void test_special_id_range(void) {
    static const char *const keys[] = {
        "bos", "eos", "unknown", "padding", "seperator", "cls", "mask", "eot", "eom",
        "fim_pre", "fim_suf", "fim_mid", "fim_pad", "fim_rep", "fim_sep", "prefix", "suffix",
        "middle"};
    const uint32_t bad[] = {6, 1000, 0x80000000u};
    for (size_t i = 0; i < PS_ARRAY_LEN(keys); i++) {
        char key[96];
        snprintf(key, sizeof key, "tokenizer.ggml.%s_token_id", keys[i]);
        for (size_t b = 0; b < PS_ARRAY_LEN(bad); b++) {
            ps_gguf_writer *w = tiny_bpe("gpt-2");
            ps_gguf_set_u32(w, key, bad[b]);
            ps_vocab *v = NULL;
            ps_error err;
            ps_status st = load_built(w, &v, &err);
            CHECKF(st == PS_ERR_FORMAT && !v && strstr(err.message, key) &&
                       strstr(err.message, "outside the vocabulary"),
                   "%s = %u: status %d, '%s'", key, bad[b], st, st ? err.message : "loaded");
            ps_vocab_free(v);
            ps_gguf_set_u32(w, key, 5);
            st = load_built(w, &v, &err);
            CHECKF(st == PS_OK, "%s = 5 loads: %s", key, err.message);
            ps_vocab_free(v);
            ps_gguf_set_u32(w, key, 0xFFFFFFFFu); /* none */
            st = load_built(w, &v, &err);
            CHECKF(st == PS_OK, "%s = 0xFFFFFFFF (none) loads: %s", key, err.message);
            ps_vocab_free(v);
            ps_gguf_writer_free(w);
        }
    }
    /* none where it is needed: a BOS or EOS the vocabulary adds */
    static const struct {
        const char *flag, *key; /* flag NULL: SentencePiece, whose default adds BOS */
        bool none_by_absence;
    } need[] = {
        {"tokenizer.ggml.add_bos_token", "tokenizer.ggml.bos_token_id", false},
        {"tokenizer.ggml.add_bos_token", "tokenizer.ggml.bos_token_id", true},
        {"tokenizer.ggml.add_eos_token", "tokenizer.ggml.eos_token_id", false},
        {NULL, "tokenizer.ggml.bos_token_id", false},
    };
    for (size_t i = 0; i < PS_ARRAY_LEN(need); i++) {
        ps_gguf_writer *w = ps_gguf_writer_new();
        const char *toks[] = {"<unk>", "<s>", "</s>", "a"};
        ps_gguf_set_str(w, "tokenizer.ggml.model", need[i].flag ? "gpt2" : "llama");
        ps_gguf_set_arr_str(w, "tokenizer.ggml.tokens", toks, NULL, 4);
        if (need[i].flag) {
            const char *merges[] = {"a a"};
            ps_gguf_set_arr_str(w, "tokenizer.ggml.merges", merges, NULL, 1);
            ps_gguf_set_u32(w, "tokenizer.ggml.eos_token_id", 2);
            ps_gguf_set_bool(w, need[i].flag, true);
        }
        if (!need[i].none_by_absence) ps_gguf_set_u32(w, need[i].key, 0xFFFFFFFFu);
        ps_vocab *v = NULL;
        ps_error err;
        ps_status st = load_built(w, &v, &err);
        CHECKF(st == PS_ERR_FORMAT && !v && strstr(err.message, need[i].key) &&
                   strstr(err.message, need[i].flag ? need[i].flag : "add_bos_token"),
               "%s none while %s: status %d, '%s'", need[i].key,
               need[i].flag ? need[i].flag : "SentencePiece adds BOS", st,
               st ? err.message : "loaded");
        ps_vocab_free(v);
        if (need[i].flag) { /* the same without the flag loads */
            ps_gguf_set_bool(w, need[i].flag, false);
            st = load_built(w, &v, &err);
            CHECKF(st == PS_OK, "%s none without %s: %s", need[i].key, need[i].flag, err.message);
            ps_vocab_free(v);
        }
        ps_gguf_writer_free(w);
    }
}

/* ---- pre-tokenizer splits, checked by hand against each regex list ---- */

#define MAX_PIECES 32
typedef struct {
    const char *pre, *text;
    const char *want[MAX_PIECES]; /* the pieces in order, NULL-terminated */
} split_case;

/* One text through every pre-tokenizer added for the gpt-4o / tekken / command-r ... families.
 * What each list shows: gpt-4o keeps "'s" on the word, has case only in ASCII (llama.cpp
 * collapses non-ASCII letters to one class, so " É" is a word of "lower" letters and "COLE" a new
 * one), groups digits in threes and keeps "/" with a line break; tekken has no contractions and
 * single digits; command-r / smollm (starcoder's list) split digits first then GPT-2's; olmo /
 * jais are GPT-2's; bloom / poro cut only at spaces and sentence punctuation; viking adds single
 * digits; chatglm-bpe is llama3's without ignore_merges; exaone-moe keeps single spaces between
 * letters inside a word. */
#define SPLIT_TEXT "Hello World's HTTPRequest \xc3\x89" "COLE na\xc3\xaf" "ve 1234567 a/b/\n x  y"
static const split_case SPLITS[] = {
    {"gpt-4o", SPLIT_TEXT, {"Hello", " World's", " HTTPRequest", " \xc3\x89", "COLE", " na\xc3\xaf""ve", " ", "123", "456", "7", " a", "/b", "/\n", " x", " ", " y"}},
    {"tekken", SPLIT_TEXT, {"Hello", " World", "'s", " HTTPRequest", " \xc3\x89", "COLE", " na\xc3\xaf""ve", " ", "1", "2", "3", "4", "5", "6", "7", " a", "/b", "/\n", " x", " ", " y"}},
    {"command-r", SPLIT_TEXT, {"Hello", " World", "'s", " HTTPRequest", " \xc3\x89""COLE", " na\xc3\xaf""ve", " ", "1", "2", "3", "4", "5", "6", "7", " a", "/", "b", "/", "\n", " x", " ", " y"}},
    {"smollm", SPLIT_TEXT, {"Hello", " World", "'s", " HTTPRequest", " \xc3\x89""COLE", " na\xc3\xaf""ve", " ", "1", "2", "3", "4", "5", "6", "7", " a", "/", "b", "/", "\n", " x", " ", " y"}},
    {"olmo", SPLIT_TEXT, {"Hello", " World", "'s", " HTTPRequest", " \xc3\x89""COLE", " na\xc3\xaf""ve", " 1234567", " a", "/", "b", "/", "\n", " x", " ", " y"}},
    {"bloom", SPLIT_TEXT, {"Hello", " World's", " HTTPRequest", " \xc3\x89""COLE", " na\xc3\xaf""ve", " 1234567", " a/b/", "\n", " x", " ", " y"}},
    {"poro-chat", SPLIT_TEXT, {"Hello", " World's", " HTTPRequest", " \xc3\x89""COLE", " na\xc3\xaf""ve", " 1234567", " a/b/", "\n", " x", " ", " y"}},
    {"chatglm-bpe", SPLIT_TEXT, {"Hello", " World", "'s", " HTTPRequest", " \xc3\x89""COLE", " na\xc3\xaf""ve", " ", "123", "456", "7", " a", "/b", "/\n", " x", " ", " y"}},
    {"viking", SPLIT_TEXT, {"Hello", " World's", " HTTPRequest", " \xc3\x89""COLE", " na\xc3\xaf""ve", " ", "1", "2", "3", "4", "5", "6", "7", " a/b/", "\n", " x", " ", " y"}},
    {"jais", SPLIT_TEXT, {"Hello", " World", "'s", " HTTPRequest", " \xc3\x89""COLE", " na\xc3\xaf""ve", " 1234567", " a", "/", "b", "/", "\n", " x", " ", " y"}},
    {"jais-2", SPLIT_TEXT, {"Hello", " World", "'s", " HTTPRequest", " \xc3\x89""COLE", " na\xc3\xaf""ve", " ", "123", "456", "7", " a", "/b", "/\n", " x", " ", " y"}},
    {"seed-coder", SPLIT_TEXT, {"Hello", " World", "'s", " HTTPRequest", " \xc3\x89""COLE", " na\xc3\xaf""ve", " ", "1", "2", "3", "4", "5", "6", "7", " a", "/b", "/", "\n", " x", " ", " y"}},
    {"bailingmoe", SPLIT_TEXT, {"Hello", " World", "'s", " HTTPRequest", " \xc3\x89""COLE", " na\xc3\xaf""ve", " ", "1", "2", "3", "4", "5", "6", "7", " a", "/b", "/\n", " x", " ", " y"}},
    {"exaone-moe", SPLIT_TEXT, {"Hello World", "'s", " HTTPRequest \xc3\x89""COLE na\xc3\xaf""ve", " ", "1", "2", "3", "4", "5", "6", "7", " a", "/b", "/\n", " x", " ", " y"}},
    {"minicpm5", SPLIT_TEXT, {"Hello", " World", "'s", " HTTPRequest", " \xc3\x89""COLE", " na\xc3\xaf""ve", " ", "123", "456", "7", " a", "/b", "/\n", " x", " ", " y"}},
    {"laguna", SPLIT_TEXT, {"Hello", " World", "'s", " HTTPRequest", " \xc3\x89""COLE", " na\xc3\xaf""ve", " ", "1", "2", "3", "4", "5", "6", "7", " a", "/b", "/", "\n", " x", " ", " y"}},
    {"chameleon", SPLIT_TEXT, {"Hello", " World", "'", "s", " HTTPRequest", " \xc3\x89""COLE", " na\xc3\xaf""ve", " ", "1", "2", "3", "4", "5", "6", "7", " a", "/", "b", "/", "\n", " x", "  ", "y"}},
    {"granite-embed-multi-97m", SPLIT_TEXT, {"Hello", " World's", " HTTPRequest", " \xc3\x89", "COLE", " na\xc3\xaf""ve", " ", "123", "456", "7", " a", "/b", "/\n", " x", " ", " y"}},
    /* upper-case contractions, a combining mark (not a letter in llama.cpp's form), CRLF runs, Han */
    {"gpt-4o", "DON'T cafe\xcc\x81s x\r\n\r\ny \xe4\xbd\xa0\xe5\xa5\xbd",
     {"DON'T", " cafe", "\xcc\x81s", " x", "\r\n\r\n", "y", " \xe4\xbd\xa0\xe5\xa5\xbd"}},
    {"tekken", "DON'T cafe\xcc\x81s x\r\n\r\ny \xe4\xbd\xa0\xe5\xa5\xbd",
     {"DON", "'T", " cafe", "\xcc\x81s", " x", "\r\n\r\n", "y", " \xe4\xbd\xa0\xe5\xa5\xbd"}},
};

static void test_splits(void) {
    for (size_t c = 0; c < sizeof SPLITS / sizeof SPLITS[0]; c++) {
        const split_case *sc = &SPLITS[c];
        ps_error err;
        ps_vocab *v = NULL;
        ps_gguf_writer *w = tiny_bpe(sc->pre);
        ps_status st = load_built(w, &v, &err);
        ps_gguf_writer_free(w);
        CHECKF(st == PS_OK, "pre-tokenizer %s loads: %s", sc->pre, st ? err.message : "");
        if (st) continue;
        size_t len = strlen(sc->text), starts[64], n = 0;
        st = ps_vocab_pre_split(v, sc->text, len, starts, 64, &n, &err);
        CHECKF(st == PS_OK, "%s: split: %s", sc->pre, st ? err.message : "");
        size_t n_want = 0;
        while (n_want < MAX_PIECES && sc->want[n_want]) n_want++;
        bool same = st == PS_OK && n == n_want;
        for (size_t k = 0; same && k < n; k++) {
            size_t end = k + 1 < n ? starts[k + 1] : len;
            same = end - starts[k] == strlen(sc->want[k]) &&
                   !memcmp(sc->text + starts[k], sc->want[k], end - starts[k]);
        }
        if (!same) {
            fprintf(stderr, "  %s split of \"%s\":", sc->pre, sc->text);
            for (size_t k = 0; k < n && k < 64; k++) {
                size_t end = k + 1 < n ? starts[k + 1] : len;
                fprintf(stderr, " [%.*s]", (int)(end - starts[k]), sc->text + starts[k]);
            }
            fprintf(stderr, "\n");
        }
        CHECKF(same, "%s: %zu pieces, want %zu", sc->pre, n, n_want);
        ps_vocab_free(v);
    }
    /* tekken and llama3 take a piece that is a token whole and add BOS by default; gpt-4o not */
    static const struct {
        const char *pre;
        bool bos;
    } defaults[] = {{"tekken", true}, {"gpt-4o", false}, {"chatglm-bpe", false}, {"llama-bpe", true}};
    for (size_t i = 0; i < sizeof defaults / sizeof defaults[0]; i++) {
        ps_error err;
        ps_vocab *v = NULL;
        ps_gguf_writer *w = tiny_bpe(defaults[i].pre);
        ps_gguf_set_u32(w, "tokenizer.ggml.bos_token_id", 3);
        CHECK(load_built(w, &v, &err) == PS_OK);
        CHECKF(v && ps_vocab_add_bos(v) == defaults[i].bos, "%s: add_bos default", defaults[i].pre);
        ps_vocab_free(v);
        ps_gguf_writer_free(w);
    }
    /* names llama.cpp knows but whose split is not a regex list here: refused, saying why */
    static const char *const refused[] = {"kimi-k2", "afmoe", "superbpe", "deepseek-v3", "gemma4",
                                          "tiny_aya"};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        ps_error err;
        ps_vocab *v = NULL;
        ps_gguf_writer *w = tiny_bpe(refused[i]);
        ps_status st = load_built(w, &v, &err);
        CHECKF(st == PS_ERR_UNSUPPORTED && strstr(err.message, refused[i]) &&
                   strstr(err.message, "not supported: "),
               "%s refused: %s", refused[i], st ? err.message : "loaded");
        ps_vocab_free(v);
        ps_gguf_writer_free(w);
    }
    /* a SentencePiece vocab has no pre-split */
    size_t n = 0, starts[1];
    ps_error err;
    CHECK(ps_vocab_pre_split(NULL, "x", 1, starts, 1, &n, &err) == PS_ERR_INVALID_ARG);
}

static void test_built(void) {
    ps_error err;
    ps_vocab *v = NULL;
    ps_gguf_writer *w = tiny_bpe("gpt-2");
    CHECK(load_built(w, &v, &err) == PS_OK);
    if (v) {
        int32_t ab[] = {2, 4, 0};
        expect_ids(v, "ab a", false, false, ab, 3, "tiny bpe");
        int32_t bang[] = {5}, abang[] = {2, 5, 0};
        expect_ids(v, "!", false, false, bang, 1, "tiny bpe one-byte user-defined");
        expect_ids(v, "ab!a", false, false, abang, 3, "tiny bpe user-defined inside");
        CHECK(ps_vocab_eos(v) == 3 && ps_vocab_bos(v) == -1 && !ps_vocab_add_bos(v));
        ps_vocab_free(v);
        v = NULL;
    }
    ps_gguf_writer_free(w);

    /* every pre-tokenizer name the project promises loads */
    static const char *const promised[] = {"default", "gpt-2", "llama-bpe", "qwen2",
        "deepseek-llm", "deepseek-coder", "falcon", "starcoder", "refact", "mpt", "gpt-neox",
        "smollm", "gpt-4o", "llama4", "tekken", "olmo", "command-r", "bloom", "poro-chat",
        "gpt3-finnish", "chatglm-bpe", "glm4", "viking", "jais", "jais-2", "seed-coder",
        "bailingmoe", "exaone-moe", "minicpm5", "laguna", "chameleon", "grok-2", "mellum2",
        "granite-embed-multi-97m", "falcon-h1", "pixtral", "deepseek-r1-qwen", "exaone4"};
    for (size_t i = 0; i < sizeof promised / sizeof promised[0]; i++) {
        w = tiny_bpe(promised[i]);
        ps_status st = load_built(w, &v, &err);
        CHECKF(st == PS_OK, "pre-tokenizer %s: %s", promised[i], err.message);
        ps_vocab_free(v);
        v = NULL;
        ps_gguf_writer_free(w);
    }

    w = tiny_bpe("klingon-9000");
    CHECK(load_built(w, &v, &err) == PS_ERR_UNSUPPORTED);
    CHECKF(strstr(err.message, "klingon-9000") && strstr(err.message, "qwen2") &&
               strstr(err.message, "llama-bpe"),
           "message: %s", err.message);
    ps_gguf_writer_free(w);

    w = tiny_bpe(NULL); /* absent .pre = default */
    CHECK(load_built(w, &v, &err) == PS_OK);
    ps_vocab_free(v);
    v = NULL;
    ps_gguf_set_str(w, "tokenizer.ggml.model", "rwkv");
    CHECK(load_built(w, &v, &err) == PS_ERR_UNSUPPORTED);
    CHECKF(strstr(err.message, "rwkv") != NULL, "message: %s", err.message);
    ps_gguf_writer_free(w);

    /* gpt2 without merges */
    w = ps_gguf_writer_new();
    const char *toks[] = {"a", "b"};
    ps_gguf_set_str(w, "tokenizer.ggml.model", "gpt2");
    ps_gguf_set_arr_str(w, "tokenizer.ggml.tokens", toks, NULL, 2);
    CHECK(load_built(w, &v, &err) == PS_ERR_NOT_FOUND);
    CHECKF(strstr(err.message, "merges") != NULL, "message: %s", err.message);
    /* a malformed merge */
    const char *bad_merge[] = {"ab"};
    ps_gguf_set_arr_str(w, "tokenizer.ggml.merges", bad_merge, NULL, 1);
    CHECK(load_built(w, &v, &err) == PS_ERR_FORMAT);
    CHECKF(strstr(err.message, "merges[0]") != NULL, "message: %s", err.message);
    ps_gguf_writer_free(w);

    /* SPM: scores of the wrong length, ids out of range, bad token types */
    w = ps_gguf_writer_new();
    const char *stoks[] = {"<unk>", "<s>", "</s>", "\xe2\x96\x81" "a", "a"};
    float scores[] = {0, 0, 0, -1, -2};
    int32_t types[] = {2, 3, 3, 1, 1};
    ps_gguf_set_str(w, "tokenizer.ggml.model", "llama");
    ps_gguf_set_arr_str(w, "tokenizer.ggml.tokens", stoks, NULL, 5);
    ps_gguf_set_arr(w, "tokenizer.ggml.scores", PS_GGUF_FLOAT32, scores, 4);
    CHECK(load_built(w, &v, &err) == PS_ERR_FORMAT);
    CHECKF(strstr(err.message, "tokenizer.ggml.scores") != NULL, "message: %s", err.message);
    scores[3] = NAN;
    ps_gguf_set_arr(w, "tokenizer.ggml.scores", PS_GGUF_FLOAT32, scores, 5);
    CHECK(load_built(w, &v, &err) == PS_ERR_FORMAT);
    CHECKF(strstr(err.message, "tokenizer.ggml.scores[3] is NaN") != NULL, "message: %s",
           err.message);
    scores[3] = -1;
    ps_gguf_set_arr(w, "tokenizer.ggml.scores", PS_GGUF_FLOAT32, scores, 5);
    ps_gguf_set_arr(w, "tokenizer.ggml.token_type", PS_GGUF_INT32, types, 5);
    ps_gguf_set_u32(w, "tokenizer.ggml.bos_token_id", 7);
    CHECK(load_built(w, &v, &err) == PS_ERR_FORMAT);
    CHECKF(strstr(err.message, "bos_token_id") != NULL, "message: %s", err.message);
    ps_gguf_set_u32(w, "tokenizer.ggml.bos_token_id", 1);
    types[4] = 9;
    ps_gguf_set_arr(w, "tokenizer.ggml.token_type", PS_GGUF_INT32, types, 5);
    CHECK(load_built(w, &v, &err) == PS_ERR_FORMAT);
    CHECKF(strstr(err.message, "token_type[4]") != NULL, "message: %s", err.message);
    types[4] = 1;
    ps_gguf_set_arr(w, "tokenizer.ggml.token_type", PS_GGUF_INT32, types, 5);
    CHECK(load_built(w, &v, &err) == PS_OK);
    if (v) {
        int32_t want[] = {1, 3, 3}; /* "a a" -> "▁a▁a" -> ▁a ▁a (no byte tokens: unk for none) */
        expect_ids(v, "a a", true, false, want, 3, "tiny spm");
        int32_t want2[] = {0, 0, 0, 0}; /* no <0xNN> tokens: the bytes of "▁z" become unk */
        expect_ids(v, "z", false, false, want2, 4, "tiny spm unk");
        ps_vocab_free(v);
        v = NULL;
    }
    /* allocation failures: every one is a clean PS_ERR_NOMEM */
    void *data = NULL;
    size_t size = 0;
    CHECK(ps_gguf_write_memory(w, &data, &size, &err) == PS_OK);
    ps_gguf *g = NULL;
    CHECK(ps_gguf_open_memory(data, size, &g, &err) == PS_OK);
    int fails = 0, nomem = 0;
    for (int64_t k = 0; k < 200 && g; k++) {
        ps_alloc_fail_after(k);
        ps_status st = ps_vocab_load(g, &v, &err);
        if (st == PS_OK) {
            int32_t ids[8], n = 0;
            st = ps_vocab_tokenize(v, "a a", 3, true, false, ids, 8, &n, &err);
            ps_alloc_fail_after(-1);
            ps_vocab_free(v);
            v = NULL;
            if (st == PS_OK) break;
        }
        ps_alloc_fail_after(-1);
        fails++;
        if (st == PS_ERR_NOMEM) nomem++;
    }
    ps_alloc_fail_after(-1);
    CHECKF(fails > 0 && nomem == fails, "%d/%d injected failures were PS_ERR_NOMEM", nomem, fails);
    ps_gguf_close(g);
    ps_free(data);
    ps_gguf_writer_free(w);

    /* the same walk over a BPE vocab: merges, PCRE2 compile and match data go through the hook */
    w = tiny_bpe("llama-bpe");
    data = NULL;
    CHECK(ps_gguf_write_memory(w, &data, &size, &err) == PS_OK);
    g = NULL;
    CHECK(ps_gguf_open_memory(data, size, &g, &err) == PS_OK);
    fails = nomem = 0;
    bool done = false;
    for (int64_t k = 0; k < 400 && g && !done; k++) {
        ps_alloc_fail_after(k);
        ps_status st = ps_vocab_load(g, &v, &err);
        if (st == PS_OK) {
            int32_t ids[8], n = 0;
            st = ps_vocab_tokenize(v, "ab a<|endoftext|>", 17, true, true, ids, 8, &n, &err);
            ps_alloc_fail_after(-1);
            ps_vocab_free(v);
            v = NULL;
            done = st == PS_OK;
            if (done) break;
        }
        ps_alloc_fail_after(-1);
        fails++;
        if (st == PS_ERR_NOMEM) nomem++;
        else fprintf(stderr, "  allocation %lld: %s\n", (long long)k, err.message);
    }
    ps_alloc_fail_after(-1);
    CHECKF(done && fails > 0 && nomem == fails, "bpe: %d/%d injected failures were PS_ERR_NOMEM",
           nomem, fails);
    ps_gguf_close(g);
    ps_free(data);
    ps_gguf_writer_free(w);
}

/* stories260K: the token ids an independent Python SentencePiece tokenizer gave (with BOS). */
static void test_stories_golden(const char *shared) {
    char path[4200];
    snprintf(path, sizeof path, "%s/models/goldens/stories260K-python-reference.txt", shared);
    size_t len;
    char *ref = read_all(path, &len);
    if (!ref) {
        SKIP("no %s", path);
        return;
    }
    snprintf(path, sizeof path, "%s/models/stories260K.gguf", shared);
    ps_gguf *g = NULL;
    ps_vocab *v = open_vocab(path, &g);
    CHECK(v != NULL);
    int n_cases = 0;
    for (char *p = ref; v && (p = strstr(p, "tokens('")) != NULL;) {
        p += 8;
        char *q = strstr(p, "') = [");
        if (!q) break;
        int32_t want[512];
        int n_want = 0;
        for (char *r = q + 6; *r && *r != ']' && n_want < 512;) {
            char *end;
            long x = strtol(r, &end, 10);
            if (end == r) break;
            want[n_want++] = (int32_t)x;
            r = end;
            while (*r == ',' || *r == ' ') r++;
        }
        *q = 0;
        expect_ids(v, p, true, false, want, n_want, "stories260K golden");
        n_cases++;
        p = q + 6;
    }
    CHECKF(n_cases == 3, "%d golden texts", n_cases);
    ps_vocab_free(v);
    ps_gguf_close(g);
    free(ref);
}

/* The CLI (when the binary is built next to the tests): ids on one line, --json, exit codes. */
static void test_cli(const char *shared) {
    const char *build = getenv("BUILD");
    char bin[4200], cmd[9000], out[512];
    snprintf(bin, sizeof bin, "%s/promptscore", build && *build ? build : "build");
    if (access(bin, X_OK) != 0) {
        SKIP("no %s binary for the CLI test", bin);
        return;
    }
    struct {
        const char *input, *vocab, *flags, *want; /* vocab: a file of ../shared/vocab, or NULL */
        int rc;
    } cases[] = {
        {"Hello world", "ggml-vocab-llama-spm.gguf", "", "1 15043 3186\n", 0},
        {"Hello world", "ggml-vocab-llama-spm.gguf", "--no-bos --json", "[15043,3186]\n", 0},
        {"<|endoftext|>Hello", "ggml-vocab-gpt-2.gguf", "--parse-special", "50256 15496\n", 0},
        {"Hello\\n", "ggml-vocab-qwen2.gguf", "", "9707 198\n", 0},
        {"", "ggml-vocab-qwen2.gguf", "--json", "[]\n", 0},
        {"x", "no-such-file.gguf", "", "", 1},
        {"x", NULL, "--bogus", "", 2},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char args[4400];
        if (cases[i].vocab)
            snprintf(args, sizeof args, "-m %s/vocab/%s %s", shared, cases[i].vocab,
                     cases[i].flags);
        else snprintf(args, sizeof args, "%s", cases[i].flags);
        snprintf(cmd, sizeof cmd, "printf '%s' | %s tokenize %s 2>/dev/null", cases[i].input, bin,
                 args);
        FILE *f = popen(cmd, "r");
        size_t n = f ? fread(out, 1, sizeof out - 1, f) : 0;
        out[n] = 0;
        int status = f ? pclose(f) : -1;
        int rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        CHECKF(rc == cases[i].rc && !strcmp(out, cases[i].want), "%s -> rc %d, \"%s\"", cmd, rc,
               out);
    }
}

static void test_model_load(const char *shared) {
    char path[4200];
    snprintf(path, sizeof path, "%s/vocab/ggml-vocab-qwen2.gguf", shared);
    ps_model_params mp = ps_model_default_params();
    mp.vocab_only = true;
    ps_model *m = NULL;
    ps_error err;
    ps_status st = ps_model_load(path, &mp, &m, &err);
    if (st == PS_ERR_UNSUPPORTED || st == PS_ERR_INTERNAL) {
        SKIP("ps_model_load vocab_only not available: %s", err.message);
        return;
    }
    CHECKF(st == PS_OK, "ps_model_load vocab_only: %s", err.message);
    if (st != PS_OK) return;
    const ps_vocab *v = ps_model_vocab(m);
    CHECK(v && ps_vocab_n_tokens(v) == 151936);
    int32_t want[] = {9707, 1879}; /* "Hello world" */
    if (v) expect_ids(v, "Hello world", false, false, want, 2, "qwen2 via model");
    ps_model_free(m);
}

static ps_status tokenize_alloc_max_piece(const ps_vocab *v, const char *text, size_t len,
                                          size_t max_piece, int32_t **ids, int32_t *n,
                                          ps_error *err) {
    return ps_vocab_tokenize_alloc_max(v, text, len, true, true, 0, max_piece, ids, n, err);
}

/* ps_vocab_tokenize_alloc_max: a text too long for max_tokens tokens is refused before any
 * tokenizer work (zero allocations: counted, not timed), and a text of at most max_tokens
 * tokens is never refused and gets exactly ps_vocab_tokenize_alloc's ids, on texts built to
 * sit at the bound (the longest token's bytes repeated), one long word, and mixed text. */
static void test_bounded(const char *shared) {
    static const char *const names[] = {"llama-spm", "gpt-2", "qwen2"};
    for (size_t vi = 0; vi < PS_ARRAY_LEN(names); vi++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/vocab/ggml-vocab-%s.gguf", shared, names[vi]);
        ps_gguf *g = NULL;
        ps_vocab *v = open_vocab(path, &g);
        CHECKF(v != NULL, "%s loads", names[vi]);
        if (!v) continue;
        /* the longest token that is no control token */
        size_t longest = 0;
        const char *lb = NULL;
        for (int32_t id = 0; id < ps_vocab_n_tokens(v); id++) {
            const char *b;
            size_t n;
            if (ps_vocab_is_control(v, id) || ps_vocab_token_bytes(v, id, &b, &n) != PS_OK) continue;
            if (n > longest) longest = n, lb = b;
        }
        /* the most bytes one token stands for, in its piece or its bytes */
        size_t span = 1;
        for (int32_t id = 0; id < ps_vocab_n_tokens(v); id++) {
            const char *b;
            size_t n1 = 0, n2 = 0;
            ps_vocab_token_bytes(v, id, &b, &n1);
            ps_vocab_token_piece(v, id, &b, &n2);
            span = PS_MAX(span, PS_MAX(n1, n2));
        }
        printf("  %s: longest token %zu bytes, span %zu\n", names[vi], longest, span);
        enum { BIG = 1 << 16 };
        char *text[3];
        size_t len[3];
        text[0] = malloc(BIG); /* the longest token, again and again */
        for (len[0] = 0; len[0] + longest <= BIG; len[0] += longest) memcpy(text[0] + len[0], lb, longest);
        text[1] = malloc(BIG); /* one word */
        memset(text[1], 'a', BIG);
        len[1] = BIG;
        text[2] = malloc(BIG); /* words, digits, punctuation, a non-ASCII letter */
        len[2] = 0;
        while (len[2] + 32 < BIG)
            len[2] += (size_t)snprintf(text[2] + len[2], 32, "Once %u upon, \xc3\xa9t\xc3\xa9! ",
                                       (unsigned)len[2]);
        for (int t = 0; t < 3; t++) {
            int32_t *want = NULL, *got = NULL, n = 0, m = 0;
            ps_error err;
            CHECKF(ps_vocab_tokenize_alloc(v, text[t], len[t], true, true, &want, &n, &err) == PS_OK,
                   "%s text %d: %s", names[vi], t, err.message);
            ps_status st = ps_vocab_tokenize_alloc_max(v, text[t], len[t], true, true, n, 0, &got, &m,
                                                       &err);
            CHECKF(st == PS_OK && m == n && want && got &&
                       !memcmp(want, got, (size_t)n * sizeof *got),
                   "%s text %d (%zu bytes, %d tokens): refused or changed at its own count: %s",
                   names[vi], t, len[t], n, st ? err.message : "");
            ps_free(got);
            got = NULL;
            /* well below its count: refused at once, or tokenized (the caller then sees m > max) */
            int64_t small = n / (int64_t)(longest + 1);
            if (small < 1) small = 1;
            ps_alloc_fail_after(-1);
            st = ps_vocab_tokenize_alloc_max(v, text[t], len[t], true, true, small, 0, &got, &m, &err);
            int64_t allocs = ps_alloc_count();
            CHECKF((st == PS_ERR_CONTEXT && allocs == 0 && !got && strstr(err.message, "bytes")) ||
                       (st == PS_OK && m > small),
                   "%s text %d, max %lld: status %d, %lld allocations, %d tokens", names[vi], t,
                   (long long)small, st, (long long)allocs, m);
            ps_free(got);
            got = NULL;
            /* the bound itself: refused at the most tokens that cannot hold the text (each
             * token covering at most `span` bytes), tokenized one above */
            int64_t at = (int64_t)((len[t] - 1) / span);
            ps_alloc_fail_after(-1);
            st = ps_vocab_tokenize_alloc_max(v, text[t], len[t], true, true, at, 0, &got, &m, &err);
            CHECKF(st == PS_ERR_CONTEXT && ps_alloc_count() == 0, "%s text %d: not refused at "
                   "%lld tokens (span %zu): %d", names[vi], t, (long long)at, span, st);
            ps_free(got);
            got = NULL;
            st = ps_vocab_tokenize_alloc_max(v, text[t], len[t], true, true, at + 1, 0, &got, &m, &err);
            CHECKF(st == PS_OK && m == n, "%s text %d: refused at %lld tokens (span %zu): %d",
                   names[vi], t, (long long)at + 1, span, st);
            ps_free(got);
            got = NULL;
            /* max_piece: never reached (3 x the text: SentencePiece escapes a space to 3 bytes),
             * the same ids; the one word over it, PS_ERR_LIMIT naming the limit, and below the
             * word's length by one byte still refused (the piece is the whole word) */
            st = tokenize_alloc_max_piece(v, text[t], len[t], 3 * len[t] + 3, &got, &m, &err);
            CHECKF(st == PS_OK && m == n && !memcmp(want, got, (size_t)n * sizeof *got),
                   "%s text %d: a max_piece it never reaches changed the ids: %d", names[vi], t, st);
            ps_free(got);
            got = NULL;
            if (t == 1) {
                st = tokenize_alloc_max_piece(v, text[t], len[t], len[t] - 1, &got, &m, &err);
                CHECKF(st == PS_ERR_LIMIT && !got && strstr(err.message, "over the limit of 65535"),
                       "%s: a one-word text of %zu bytes under max_piece %zu: %d %s", names[vi],
                       len[t], len[t] - 1, st, err.message);
            }
            if (t == 2 && vi > 0) { /* BPE: words of at most 16 bytes, the same ids */
                st = tokenize_alloc_max_piece(v, text[t], len[t], 16, &got, &m, &err);
                CHECKF(st == PS_OK && m == n && !memcmp(want, got, (size_t)n * sizeof *got),
                       "%s: words under max_piece 16: %d %s", names[vi], st, st ? err.message : "");
                ps_free(got);
            }
            ps_free(want);
            free(text[t]);
        }
        ps_vocab_free(v);
        ps_gguf_close(g);
    }
}

int main(void) {
    const char *shared = ps_test_shared();
    test_built();
    test_splits();
    test_vocab_same();
    test_special_id_range();
    if (!shared) {
        SKIP("../shared absent: no vocabulary files");
        return ps_test_done("vocab");
    }
    static const char *const names[] = {"llama-spm", "gpt-2", "mpt", "refact", "deepseek-llm",
                                        "llama-bpe", "qwen2"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) run_vectors(shared, names[i]);
    /* files without vectors still load */
    static const char *const others[] = {"baichuan", "gpt-neox"};
    for (size_t i = 0; i < 2; i++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/vocab/ggml-vocab-%s.gguf", shared, others[i]);
        ps_gguf *g = NULL;
        ps_vocab *v = open_vocab(path, &g);
        CHECKF(v != NULL, "%s loads", others[i]);
        ps_vocab_free(v);
        ps_gguf_close(g);
    }
    test_spm(shared);
    test_bpe_special(shared);
    test_threads(shared);
    test_bounded(shared);
    test_model_load(shared);
    test_stories_golden(shared);
    test_cli(shared);
    return ps_test_done("vocab");
}
