/*
 * fuzz_gguf.c — libFuzzer target for the GGUF reader (and, through it, the writer).
 *
 * Opens the input with ps_gguf_open_memory and, when it loads, walks everything a caller can
 * reach: every key through every getter, every string of every string array, every byte of
 * every tensor. Then the round-trip property: the keys and tensors copied into a writer must
 * write, reopen, and read back identical. A violation traps (a finding); a rejected input is
 * only checked for a non-empty message.
 */
#include "gguf/gguf.h"

#include <stdlib.h>

#define FUZZ_REQUIRE(c) do { if (!(c)) __builtin_trap(); } while (0)

static volatile uint8_t g_sink;

static void touch(const void *p, uint64_t n) {
    const uint8_t *b = p;
    uint8_t x = 0;
    for (uint64_t i = 0; i < n; i++) x ^= b[i];
    g_sink ^= x;
}

/* NUL-terminated copy of a name (names never contain NUL: the reader rejects them). */
static char *cstr(ps_gguf_str s) {
    char *c = malloc(s.len + 1);
    if (!c) abort();
    memcpy(c, s.ptr, s.len);
    c[s.len] = '\0';
    return c;
}

static void walk(const ps_gguf *g) {
    ps_error e;
    for (int64_t i = 0; i < ps_gguf_n_kv(g); i++) {
        char *key = cstr(ps_gguf_key(g, i));
        FUZZ_REQUIRE(ps_gguf_find_key(g, key) == i);
        uint32_t u;
        int64_t v;
        float f;
        bool b;
        ps_gguf_str s;
        ps_gguf_type et;
        uint64_t n;
        const void *data;
        ps_status st;
        st = ps_gguf_get_u32(g, key, &u, &e);
        FUZZ_REQUIRE(st == PS_OK || (st == PS_ERR_FORMAT && e.message[0]));
        st = ps_gguf_get_i64(g, key, &v, &e);
        FUZZ_REQUIRE(st == PS_OK || (st == PS_ERR_FORMAT && e.message[0]));
        st = ps_gguf_get_f32(g, key, &f, &e);
        FUZZ_REQUIRE(st == PS_OK || (st == PS_ERR_FORMAT && e.message[0]));
        st = ps_gguf_get_bool(g, key, &b, &e);
        FUZZ_REQUIRE((st == PS_OK) == (ps_gguf_kv_type(g, i) == PS_GGUF_BOOL));
        st = ps_gguf_get_str(g, key, &s, &e);
        FUZZ_REQUIRE((st == PS_OK) == (ps_gguf_kv_type(g, i) == PS_GGUF_STRING));
        if (st == PS_OK) touch(s.ptr, s.len);
        st = ps_gguf_get_arr(g, key, &et, &n, &data, &e);
        FUZZ_REQUIRE((st == PS_OK) == (ps_gguf_kv_type(g, i) == PS_GGUF_ARRAY));
        if (st == PS_OK && data) {
            uint64_t es = et <= 1 || et == 7 ? 1 : et <= 3 ? 2 : et <= 6 ? 4 : 8;
            touch(data, n * es);
        }
        if (st == PS_OK && et == PS_GGUF_STRING) {
            for (uint64_t k = 0; k < n; k++) {
                FUZZ_REQUIRE(ps_gguf_arr_str(g, key, k, &s, &e) == PS_OK);
                touch(s.ptr, s.len);
            }
            FUZZ_REQUIRE(ps_gguf_arr_str(g, key, n, &s, &e) == PS_ERR_INVALID_ARG);
        }
        free(key);
    }
    for (int64_t i = 0; i < ps_gguf_n_tensors(g); i++) {
        const ps_gguf_tensor *t = ps_gguf_tensor_at(g, i);
        char *name = cstr(t->name);
        FUZZ_REQUIRE(ps_gguf_find_tensor(g, name) == t);
        FUZZ_REQUIRE(t->n_dims >= 1 && t->n_dims <= 4);
        FUZZ_REQUIRE(t->offset % ps_gguf_alignment(g) == 0);
        touch(t->data, t->nbytes);
        free(name);
    }
}

/* Copies keys and tensors into a writer; the output must reopen with the same content. */
static void roundtrip(const ps_gguf *g) {
    ps_gguf_writer *w = ps_gguf_writer_new();
    FUZZ_REQUIRE(w);
    FUZZ_REQUIRE(ps_gguf_copy_kv(w, g, NULL) == PS_OK);
    for (int64_t i = 0; i < ps_gguf_n_tensors(g); i++) {
        const ps_gguf_tensor *t = ps_gguf_tensor_at(g, i);
        char *name = cstr(t->name);
        FUZZ_REQUIRE(ps_gguf_add_tensor(w, name, t->type, t->n_dims, t->ne, t->data,
                                        t->nbytes) == PS_OK);
        free(name);
    }
    void *mem = NULL;
    size_t size = 0;
    ps_error e;
    FUZZ_REQUIRE(ps_gguf_write_memory(w, &mem, &size, &e) == PS_OK);
    ps_gguf_writer_free(w);
    ps_gguf *h = NULL;
    FUZZ_REQUIRE(ps_gguf_open_memory(mem, size, &h, &e) == PS_OK);
    FUZZ_REQUIRE(ps_gguf_n_kv(h) == ps_gguf_n_kv(g));
    FUZZ_REQUIRE(ps_gguf_n_tensors(h) == ps_gguf_n_tensors(g));
    FUZZ_REQUIRE(ps_gguf_alignment(h) == ps_gguf_alignment(g));
    for (int64_t i = 0; i < ps_gguf_n_kv(g); i++) {
        ps_gguf_str a = ps_gguf_key(g, i), b = ps_gguf_key(h, i);
        FUZZ_REQUIRE(a.len == b.len && memcmp(a.ptr, b.ptr, a.len) == 0);
        FUZZ_REQUIRE(ps_gguf_kv_type(g, i) == ps_gguf_kv_type(h, i));
    }
    for (int64_t i = 0; i < ps_gguf_n_tensors(g); i++) {
        const ps_gguf_tensor *a = ps_gguf_tensor_at(g, i), *b = ps_gguf_tensor_at(h, i);
        FUZZ_REQUIRE(a->type == b->type && a->n_dims == b->n_dims && a->nbytes == b->nbytes);
        FUZZ_REQUIRE(memcmp(a->ne, b->ne, sizeof a->ne) == 0);
        FUZZ_REQUIRE(a->nbytes == 0 || memcmp(a->data, b->data, a->nbytes) == 0);
    }
    ps_gguf_close(h);
    ps_free(mem);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ps_gguf *g = NULL;
    ps_error e;
    ps_status st = ps_gguf_open_memory(data, size, &g, &e);
    if (st != PS_OK) {
        FUZZ_REQUIRE(g == NULL && e.code == st && e.message[0] != '\0');
        FUZZ_REQUIRE(st == PS_ERR_FORMAT || st == PS_ERR_UNSUPPORTED || st == PS_ERR_NOMEM);
        return 0;
    }
    FUZZ_REQUIRE(ps_gguf_file_size(g) == size);
    walk(g);
    roundtrip(g);
    ps_gguf_close(g);
    return 0;
}
