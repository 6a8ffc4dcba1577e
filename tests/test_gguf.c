/*
 * test_gguf.c — the GGUF reader and writer.
 *
 * 1. Round trip through the writer: every value type, nested and string arrays, tensors of
 *    f32/f16/bf16/q8_0 compared byte for byte, alignment; file and memory outputs identical.
 * 2. Getter conversions and their errors.
 * 3. Corruption: files built byte by byte (a tiny builder below, with knobs for each field)
 *    with one field broken at a time; truncation at every prefix; every byte flipped. Each must
 *    give the expected error code with a message, never a crash.
 * 4. Allocation failures at every allocation of open and write: a clean PS_ERR_NOMEM.
 * 5. The shared vocabularies and models (skipped when ../shared is absent).
 */
#include "gguf/gguf.h"
#include "kernels/qblocks.h"

#include "check.h"
#include "base/testhooks.h"

#include <stdint.h>
#include <sys/stat.h>
#include <time.h>

/* ---- a byte builder for hand-made files ---- */
typedef struct {
    uint8_t *p;
    size_t n, cap;
} buf;

static void b_put(buf *b, const void *src, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        if (!b->p) abort();
    }
    memcpy(b->p + b->n, src, n);
    b->n += n;
}
static void b_u8(buf *b, uint8_t v) { b_put(b, &v, 1); }
static void b_u32(buf *b, uint32_t v) { b_put(b, &v, 4); }
static void b_u64(buf *b, uint64_t v) { b_put(b, &v, 8); }
static void b_str(buf *b, const char *s) {
    b_u64(b, strlen(s));
    b_put(b, s, strlen(s));
}
static void b_pad(buf *b, size_t align) {
    while (b->n % align) b_u8(b, 0);
}

/* Knobs of the hand-made file; zero-initialised = the valid file. */
typedef struct {
    int version;            /* 0 = 3 */
    uint64_t n_kv_delta;    /* added to the true count (wraps) */
    uint64_t n_kv_set;      /* when non-zero, the key count written */
    uint64_t n_t_set;       /* when non-zero, the tensor count written */
    uint64_t arr_count;     /* when non-zero, the count of the u32 array */
    uint64_t sarr_count;    /* when non-zero, the count of the string array */
    uint64_t str_len;       /* when non-zero, the length of general.name's value */
    uint64_t key_len;       /* when non-zero, the length of the first key */
    uint32_t val_type;      /* when non-zero, the type of general.name */
    uint32_t elem_type;     /* when non-zero, the element type of the u32 array */
    int align_type;         /* 0: no general.alignment key; else a GGUF type for it */
    uint64_t align;         /* its value */
    uint32_t t_type;        /* when non-zero, the ggml type of tensor b */
    int n_dims;             /* when non-zero, n_dims of tensor b (100: zero dims) */
    uint64_t ne0;           /* when non-zero, ne[0] of tensor b */
    uint64_t ne1;           /* when non-zero, ne[1] of tensor b */
    uint64_t off_b;         /* when non-zero, the offset of tensor b */
    int dup_key;            /* 1: the third key repeats the first */
    int dup_tensor;         /* 1: tensor b is named like tensor a */
    int empty_key;          /* 1: the second key is "" */
    int nul_key;            /* 1: the second key contains a NUL byte */
    int depth;              /* when non-zero, a key with arrays nested this deep */
    uint8_t bool_val;       /* the bool value (valid: 0/1) */
    int no_tensors;         /* 1: a vocab-like file: no tensors, no padding */
    int pad_vocab;          /* with no_tensors: pad the end anyway */
} knobs;

/* Tensor a: f32 [4, 2] (32 bytes) at offset 0; tensor b: q8_0 [32, 1] (34 bytes) at 32 (or 64
 * with alignment 64). Returns the file; *need = the bytes a reader must see (end of b's data). */
static buf make_file(const knobs *k, size_t *need) {
    buf b = {0};
    uint64_t align = k->align_type ? k->align : 32;
    b_put(&b, "GGUF", 4);
    b_u32(&b, k->version ? (uint32_t)k->version : 3);
    uint64_t n_t = k->no_tensors ? 0 : 2;
    uint64_t n_kv = 5 + (k->align_type ? 1 : 0) + (k->dup_key ? 1 : 0) + (k->depth ? 1 : 0);
    b_u64(&b, k->n_t_set ? k->n_t_set : n_t);
    b_u64(&b, k->n_kv_set ? k->n_kv_set : n_kv + k->n_kv_delta);
    /* key 1: general.architecture = "llama" */
    if (k->key_len) {
        b_u64(&b, k->key_len);
        b_put(&b, "general.architecture", 20);
    } else {
        b_str(&b, "general.architecture");
    }
    b_u32(&b, PS_GGUF_STRING);
    b_str(&b, "llama");
    /* key 2: general.name = "tiny" */
    if (k->empty_key) {
        b_str(&b, "");
    } else if (k->nul_key) {
        b_u64(&b, 12);
        b_put(&b, "general\0name", 12);
    } else {
        b_str(&b, "general.name");
    }
    b_u32(&b, k->val_type ? k->val_type : PS_GGUF_STRING);
    b_u64(&b, k->str_len ? k->str_len : 4);
    b_put(&b, "tiny", 4);
    if (k->dup_key) {
        b_str(&b, "general.architecture");
        b_u32(&b, PS_GGUF_STRING);
        b_str(&b, "llama");
    }
    /* key 3: test.arr = u32[3] {1, 2, 3} */
    b_str(&b, "test.arr");
    b_u32(&b, PS_GGUF_ARRAY);
    b_u32(&b, k->elem_type ? k->elem_type : PS_GGUF_UINT32);
    b_u64(&b, k->arr_count ? k->arr_count : 3);
    for (uint32_t i = 1; i <= 3; i++) b_u32(&b, i);
    /* key 4: tokenizer.ggml.tokens = {"a", "bc", ""} */
    b_str(&b, "tokenizer.ggml.tokens");
    b_u32(&b, PS_GGUF_ARRAY);
    b_u32(&b, PS_GGUF_STRING);
    b_u64(&b, k->sarr_count ? k->sarr_count : 3);
    b_str(&b, "a");
    b_str(&b, "bc");
    b_str(&b, "");
    /* key 5: test.flag = bool */
    b_str(&b, "test.flag");
    b_u32(&b, PS_GGUF_BOOL);
    b_u8(&b, k->bool_val);
    if (k->align_type) {
        b_str(&b, "general.alignment");
        b_u32(&b, (uint32_t)k->align_type);
        if (k->align_type == PS_GGUF_UINT64) b_u64(&b, k->align);
        else if (k->align_type == PS_GGUF_STRING) b_str(&b, "32");
        else b_u32(&b, (uint32_t)k->align);
    }
    if (k->depth) { /* array of array of ... of u8[1] */
        b_str(&b, "test.nested");
        b_u32(&b, PS_GGUF_ARRAY);
        for (int d = 1; d < k->depth; d++) {
            b_u32(&b, PS_GGUF_ARRAY);
            b_u64(&b, 1);
        }
        b_u32(&b, PS_GGUF_UINT8);
        b_u64(&b, 1);
        b_u8(&b, 7);
    }
    if (k->no_tensors) {
        if (k->pad_vocab) b_pad(&b, 32);
        *need = b.n;
        return b;
    }
    /* tensor a: f32 [4, 2] */
    b_str(&b, "a");
    b_u32(&b, 2);
    b_u64(&b, 4);
    b_u64(&b, 2);
    b_u32(&b, PS_GGML_F32);
    b_u64(&b, 0);
    /* tensor b: q8_0 [32] */
    b_str(&b, k->dup_tensor ? "a" : "b");
    uint32_t nd = k->n_dims == 0 ? 1 : k->n_dims == 100 ? 0 : (uint32_t)k->n_dims;
    b_u32(&b, nd);
    for (uint32_t d = 0; d < nd && d < 8; d++)
        b_u64(&b, d == 0 ? (k->ne0 ? k->ne0 : 32) : d == 1 && k->ne1 ? k->ne1 : 1);
    b_u32(&b, k->t_type ? k->t_type : PS_GGML_Q8_0);
    uint64_t off_b = k->off_b ? k->off_b : (align > 32 ? align : 32);
    b_u64(&b, off_b);
    size_t a_align = align && align <= 4096 ? (size_t)align : 32;
    b_pad(&b, a_align);
    size_t data0 = b.n;
    for (int i = 0; i < 8; i++) {
        float f = (float)i * 0.5f - 1.0f;
        b_put(&b, &f, 4);
    }
    while (b.n < data0 + 32 || b.n < data0 + (a_align > 32 ? a_align : 32)) b_u8(&b, 0);
    uint16_t d = ps_f32_to_f16(0.25f);
    b_put(&b, &d, 2);
    for (int i = 0; i < 32; i++) b_u8(&b, (uint8_t)(i - 16));
    *need = b.n;
    b_pad(&b, a_align);
    return b;
}

static ps_status open_knobs(const knobs *k, ps_error *err, ps_gguf **out) {
    size_t need;
    buf b = make_file(k, &need);
    ps_gguf *g = NULL;
    ps_status st = ps_gguf_open_memory(b.p, b.n, &g, err);
    if (out && st == PS_OK) {
        *out = g; /* caller closes; leaks b.p deliberately small? no: keep it alive */
        return st;
    }
    ps_gguf_close(g);
    free(b.p);
    return st;
}

/* Expects `want` from the file with knobs k, a non-empty message and (optionally) `needle` in
 * it. */
static void expect_err(const knobs *k, ps_status want, const char *needle, int line) {
    ps_error e;
    ps_status st = open_knobs(k, &e, NULL);
    CHECKF(st == want, "line %d: got %d (%s), want %d", line, st, st ? e.message : "ok", want);
    if (st) {
        CHECKF(e.message[0] != '\0' && e.code == st, "line %d: empty message", line);
        if (needle)
            CHECKF(strstr(e.message, needle), "line %d: '%s' lacks '%s'", line, e.message, needle);
    }
}
#define EXPECT_ERR(kn, want, needle) expect_err(&(kn), want, needle, __LINE__)

static void test_handmade(void) {
    knobs ok = {0};
    size_t need;
    buf b = make_file(&ok, &need);
    ps_gguf *g = NULL;
    ps_error e;
    ps_status st = ps_gguf_open_memory(b.p, b.n, &g, &e);
    CHECKF(st == PS_OK, "valid hand-made file: %s", e.message);
    if (st == PS_OK) {
        CHECK(ps_gguf_n_kv(g) == 5);
        CHECK(ps_gguf_n_tensors(g) == 2);
        CHECK(ps_gguf_alignment(g) == 32);
        CHECK(ps_gguf_version(g) == 3);
        CHECK(ps_gguf_file_size(g) == b.n);
        CHECK(strcmp(ps_gguf_path(g), "") == 0);
        const ps_gguf_tensor *tb = ps_gguf_find_tensor(g, "b");
        CHECK(tb && tb->nbytes == 34 && tb->ne[0] == 32 && tb->ne[1] == 1 && tb->offset == 32);
        CHECK(tb && ((const uint8_t *)tb->data)[2] == (uint8_t)-16);
        ps_gguf_str s;
        CHECK(ps_gguf_arr_str(g, "tokenizer.ggml.tokens", 1, &s, &e) == PS_OK && s.len == 2 &&
              memcmp(s.ptr, "bc", 2) == 0);
        CHECK(ps_gguf_arr_str(g, "tokenizer.ggml.tokens", 2, &s, &e) == PS_OK && s.len == 0);
        CHECK(ps_gguf_arr_str(g, "tokenizer.ggml.tokens", 3, &s, &e) == PS_ERR_INVALID_ARG);
        CHECK(ps_gguf_arr_str(g, "test.arr", 0, &s, &e) == PS_ERR_FORMAT);
        CHECK(ps_gguf_arr_str(g, "nope", 0, &s, &e) == PS_ERR_NOT_FOUND);
        ps_gguf_close(g);
    }
    /* Every prefix shorter than the end of the last tensor fails; longer ones (into the final
     * padding) load. */
    int bad_prefix = 0, bad_msg = 0;
    for (size_t n = 0; n < b.n; n++) {
        uint8_t *copy = malloc(n ? n : 1); /* exact size, so ASan sees any overread */
        memcpy(copy, b.p, n);
        ps_gguf *h = NULL;
        st = ps_gguf_open_memory(copy, n, &h, &e);
        if ((n < need) != (st != PS_OK)) bad_prefix++;
        if (st && (e.message[0] == '\0' || st != PS_ERR_FORMAT)) bad_msg++;
        ps_gguf_close(h);
        free(copy);
    }
    CHECKF(bad_prefix == 0, "%d prefixes of %zu (need %zu) misjudged", bad_prefix, b.n, need);
    CHECKF(bad_msg == 0, "%d truncations without a FORMAT message", bad_msg);
    /* Every byte set to 0x00, 0xff and +1: never a crash; any error has a message. */
    int empty_msgs = 0, fails = 0;
    for (size_t i = 0; i < b.n; i++) {
        static const int vals[3] = {0x00, 0xff, -1};
        for (int v = 0; v < 3; v++) {
            uint8_t *copy = malloc(b.n);
            memcpy(copy, b.p, b.n);
            copy[i] = vals[v] < 0 ? (uint8_t)(copy[i] + 1) : (uint8_t)vals[v];
            ps_gguf *h = NULL;
            st = ps_gguf_open_memory(copy, b.n, &h, &e);
            if (st) {
                fails++;
                if (!e.message[0]) empty_msgs++;
            } else { /* walk what loaded */
                for (int64_t t = 0; t < ps_gguf_n_tensors(h); t++) {
                    const ps_gguf_tensor *tt = ps_gguf_tensor_at(h, t);
                    volatile uint8_t sink = 0;
                    for (uint64_t x = 0; x < tt->nbytes; x++) sink ^= ((const uint8_t *)tt->data)[x];
                    (void)sink;
                }
            }
            ps_gguf_close(h);
            free(copy);
        }
    }
    CHECKF(empty_msgs == 0, "%d errors without message", empty_msgs);
    CHECKF(fails > (int)b.n, "only %d of %zu byte flips were rejected", fails, 3 * b.n);
    free(b.p);

    /* One field at a time. */
    const uint64_t HUGE = (uint64_t)1 << 62;
    { knobs k = {0}; k.version = 1; EXPECT_ERR(k, PS_ERR_UNSUPPORTED, "version 1"); }
    { knobs k = {0}; k.version = 4; EXPECT_ERR(k, PS_ERR_UNSUPPORTED, "version 4"); }
    { knobs k = {0}; k.version = 0x03000000; EXPECT_ERR(k, PS_ERR_UNSUPPORTED, "big-endian"); }
    { knobs k = {0}; k.version = 2; EXPECT_ERR(k, PS_OK, NULL); }
    { knobs k = {0}; k.n_kv_set = HUGE; EXPECT_ERR(k, PS_ERR_FORMAT, "keys"); }
    { knobs k = {0}; k.n_kv_set = UINT64_MAX; EXPECT_ERR(k, PS_ERR_FORMAT, "keys"); }
    { knobs k = {0}; k.n_kv_delta = 1; EXPECT_ERR(k, PS_ERR_FORMAT, NULL); }
    { knobs k = {0}; k.n_t_set = HUGE; EXPECT_ERR(k, PS_ERR_FORMAT, "tensors"); }
    { knobs k = {0}; k.n_t_set = 3; EXPECT_ERR(k, PS_ERR_FORMAT, NULL); }
    { knobs k = {0}; k.arr_count = HUGE; EXPECT_ERR(k, PS_ERR_FORMAT, "test.arr"); }
    { knobs k = {0}; k.arr_count = 4; EXPECT_ERR(k, PS_ERR_FORMAT, NULL); }
    { knobs k = {0}; k.sarr_count = HUGE; EXPECT_ERR(k, PS_ERR_FORMAT, "tokenizer.ggml.tokens"); }
    { knobs k = {0}; k.sarr_count = UINT64_MAX; EXPECT_ERR(k, PS_ERR_FORMAT, "tokenizer.ggml.tokens"); }
    { knobs k = {0}; k.str_len = HUGE; EXPECT_ERR(k, PS_ERR_FORMAT, "general.name"); }
    { knobs k = {0}; k.str_len = UINT64_MAX; EXPECT_ERR(k, PS_ERR_FORMAT, "general.name"); }
    { knobs k = {0}; k.key_len = HUGE; EXPECT_ERR(k, PS_ERR_FORMAT, "key #0"); }
    { knobs k = {0}; k.val_type = 13; EXPECT_ERR(k, PS_ERR_FORMAT, "general.name"); }
    { knobs k = {0}; k.val_type = 0xffffffffu; EXPECT_ERR(k, PS_ERR_FORMAT, "general.name"); }
    { knobs k = {0}; k.elem_type = 13; EXPECT_ERR(k, PS_ERR_FORMAT, "test.arr"); }
    { knobs k = {0}; k.bool_val = 2; EXPECT_ERR(k, PS_ERR_FORMAT, "test.flag"); }
    { knobs k = {0}; k.bool_val = 1; EXPECT_ERR(k, PS_OK, NULL); }
    { knobs k = {0}; k.t_type = 4; EXPECT_ERR(k, PS_ERR_FORMAT, "tensor 'b'"); }
    { knobs k = {0}; k.t_type = 31; EXPECT_ERR(k, PS_ERR_FORMAT, "tensor 'b'"); }
    { knobs k = {0}; k.t_type = 1000; EXPECT_ERR(k, PS_ERR_FORMAT, "unknown ggml type"); }
    { knobs k = {0}; k.n_dims = 5; EXPECT_ERR(k, PS_ERR_FORMAT, "n_dims"); }
    { knobs k = {0}; k.n_dims = 4; EXPECT_ERR(k, PS_OK, NULL); }
    { knobs k = {0}; k.n_dims = 100; EXPECT_ERR(k, PS_ERR_FORMAT, "n_dims"); }
    { knobs k = {0}; k.n_dims = -1; EXPECT_ERR(k, PS_ERR_FORMAT, "n_dims"); }
    { knobs k = {0}; k.align_type = PS_GGUF_UINT32; k.align = 0; EXPECT_ERR(k, PS_ERR_FORMAT, "alignment"); }
    { knobs k = {0}; k.align_type = PS_GGUF_UINT32; k.align = 3; EXPECT_ERR(k, PS_ERR_FORMAT, "alignment"); }
    { knobs k = {0}; k.align_type = PS_GGUF_UINT64; k.align = (uint64_t)1 << 40; EXPECT_ERR(k, PS_ERR_FORMAT, "alignment"); }
    { knobs k = {0}; k.align_type = PS_GGUF_STRING; EXPECT_ERR(k, PS_ERR_FORMAT, "alignment"); }
    { knobs k = {0}; k.align_type = PS_GGUF_UINT32; k.align = 64; EXPECT_ERR(k, PS_OK, NULL); }
    { knobs k = {0}; k.align_type = PS_GGUF_UINT32; k.align = 16; EXPECT_ERR(k, PS_OK, NULL); }
    { knobs k = {0}; k.off_b = 16; EXPECT_ERR(k, PS_ERR_FORMAT, "multiple of the alignment"); }
    { knobs k = {0}; k.off_b = 4096; EXPECT_ERR(k, PS_ERR_FORMAT, "past the end"); }
    { knobs k = {0}; k.off_b = UINT64_MAX - 31; EXPECT_ERR(k, PS_ERR_FORMAT, "tensor 'b'"); }
    { knobs k = {0}; k.off_b = HUGE; EXPECT_ERR(k, PS_ERR_FORMAT, "tensor 'b'"); }
    { knobs k = {0}; k.align_type = PS_GGUF_UINT32; k.align = 16; k.off_b = 16; EXPECT_ERR(k, PS_ERR_FORMAT, "overlaps"); }
    { knobs k = {0}; k.ne0 = 33; EXPECT_ERR(k, PS_ERR_FORMAT, "block size"); }
    { knobs k = {0}; k.ne0 = (uint64_t)1 << 63; EXPECT_ERR(k, PS_ERR_FORMAT, "out of range"); }
    { knobs k = {0}; k.n_dims = 2; k.ne0 = (uint64_t)1 << 35; k.ne1 = (uint64_t)1 << 35; EXPECT_ERR(k, PS_ERR_FORMAT, "overflow"); }
    { knobs k = {0}; k.n_dims = 2; k.t_type = 28 /* f64 */; k.ne0 = (uint64_t)1 << 31; k.ne1 = (uint64_t)1 << 31; EXPECT_ERR(k, PS_ERR_FORMAT, "overflow"); }
    { knobs k = {0}; k.n_dims = 2; k.ne0 = (uint64_t)1 << 20; k.ne1 = (uint64_t)1 << 20; EXPECT_ERR(k, PS_ERR_FORMAT, "past the end"); }
    { knobs k = {0}; k.dup_key = 1; EXPECT_ERR(k, PS_ERR_FORMAT, "duplicate key 'general.architecture'"); }
    { knobs k = {0}; k.dup_tensor = 1; EXPECT_ERR(k, PS_ERR_FORMAT, "duplicate tensor 'a'"); }
    { knobs k = {0}; k.empty_key = 1; EXPECT_ERR(k, PS_ERR_FORMAT, "empty"); }
    { knobs k = {0}; k.nul_key = 1; EXPECT_ERR(k, PS_ERR_FORMAT, "NUL"); }
    { knobs k = {0}; k.depth = 3; EXPECT_ERR(k, PS_OK, NULL); }
    { knobs k = {0}; k.depth = 8; EXPECT_ERR(k, PS_OK, NULL); }
    { knobs k = {0}; k.depth = 9; EXPECT_ERR(k, PS_ERR_FORMAT, "nested"); }
    { knobs k = {0}; k.no_tensors = 1; EXPECT_ERR(k, PS_OK, NULL); }
    { knobs k = {0}; k.no_tensors = 1; k.pad_vocab = 1; EXPECT_ERR(k, PS_OK, NULL); }

    /* Nested arrays: validated, reported as arrays of arrays with NULL data. */
    {
        knobs k = {0};
        k.depth = 3;
        ps_gguf *h = NULL;
        size_t n2;
        buf b2 = make_file(&k, &n2);
        CHECK(ps_gguf_open_memory(b2.p, b2.n, &h, &e) == PS_OK);
        if (h) {
            ps_gguf_type et;
            uint64_t n = 0;
            const void *data = (const void *)1;
            CHECK(ps_gguf_get_arr(h, "test.nested", &et, &n, &data, &e) == PS_OK);
            CHECK(et == PS_GGUF_ARRAY && n == 1 && data == NULL);
        }
        ps_gguf_close(h);
        free(b2.p);
    }
    /* Tiny inputs and wrong magic. */
    {
        ps_gguf *h = NULL;
        CHECK(ps_gguf_open_memory(NULL, 0, &h, &e) == PS_ERR_FORMAT && e.message[0]);
        CHECK(ps_gguf_open_memory("GGU", 3, &h, &e) == PS_ERR_FORMAT && e.message[0]);
        CHECK(ps_gguf_open_memory("GGML\3\0\0\0", 8, &h, &e) == PS_ERR_FORMAT &&
              strstr(e.message, "magic"));
        CHECK(ps_gguf_open_memory("GGUF\3\0\0\0", 8, &h, &e) == PS_ERR_FORMAT &&
              e.offset == 8);
        CHECK(h == NULL);
        CHECK(ps_gguf_open_memory("GGUF", 4, NULL, &e) == PS_ERR_INVALID_ARG);
    }
}

/* ---- round trip ---- */

static void test_roundtrip(void) {
    ps_gguf_writer *w = ps_gguf_writer_new();
    CHECK(w != NULL);
    if (!w) return;
    CHECK(ps_gguf_set_u32(w, "t.u32", 4000000000u) == PS_OK);
    CHECK(ps_gguf_set_i32(w, "t.i32", -7) == PS_OK);
    CHECK(ps_gguf_set_u64(w, "t.u64", (uint64_t)1 << 40) == PS_OK);
    CHECK(ps_gguf_set_f32(w, "t.f32", 1e-5f) == PS_OK);
    CHECK(ps_gguf_set_bool(w, "t.bool", true) == PS_OK);
    CHECK(ps_gguf_set_str(w, "t.str", "héllo") == PS_OK);
    CHECK(ps_gguf_set_str(w, "t.empty", "") == PS_OK);
    CHECK(ps_gguf_set_u32(w, "t.twice", 1) == PS_OK);
    CHECK(ps_gguf_set_u32(w, "t.twice", 2) == PS_OK); /* last value wins, position kept */
    uint8_t u8 = 200;
    int8_t i8 = -100;
    uint16_t u16 = 60000;
    int16_t i16 = -30000;
    int64_t i64 = INT64_MIN;
    double f64 = 3.25;
    CHECK(ps_gguf_set_raw(w, "t.u8", PS_GGUF_UINT8, &u8, 1) == PS_OK);
    CHECK(ps_gguf_set_raw(w, "t.i8", PS_GGUF_INT8, &i8, 1) == PS_OK);
    CHECK(ps_gguf_set_raw(w, "t.u16", PS_GGUF_UINT16, &u16, 2) == PS_OK);
    CHECK(ps_gguf_set_raw(w, "t.i16", PS_GGUF_INT16, &i16, 2) == PS_OK);
    CHECK(ps_gguf_set_raw(w, "t.i64", PS_GGUF_INT64, &i64, 8) == PS_OK);
    CHECK(ps_gguf_set_raw(w, "t.f64", PS_GGUF_FLOAT64, &f64, 8) == PS_OK);
    /* numeric arrays of every element type */
    static const uint32_t numeric[] = {0, 1, 2, 3, 4, 5, 6, 7, 10, 11, 12};
    uint8_t raw[64];
    for (int i = 0; i < 64; i++) raw[i] = (uint8_t)(i * 37 + 1) & 0x7f;
    for (size_t i = 0; i < PS_ARRAY_LEN(numeric); i++) {
        char key[32];
        snprintf(key, sizeof key, "t.arr%u", numeric[i]);
        uint8_t vals[64];
        memcpy(vals, raw, 64);
        if (numeric[i] == PS_GGUF_BOOL)
            for (int j = 0; j < 64; j++) vals[j] &= 1;
        CHECK(ps_gguf_set_arr(w, key, (ps_gguf_type)numeric[i], vals, 5) == PS_OK);
    }
    CHECK(ps_gguf_set_arr(w, "t.arr_empty", PS_GGUF_FLOAT32, NULL, 0) == PS_OK);
    /* string arrays: NUL-terminated and with lengths (embedded NUL, empty) */
    const char *strs[] = {"<unk>", "<s>", "", "▁the"};
    CHECK(ps_gguf_set_arr_str(w, "t.sarr", strs, NULL, 4) == PS_OK);
    const char *bin[] = {"a\0b", "xyz"};
    uint64_t lens[] = {3, 0};
    CHECK(ps_gguf_set_arr_str(w, "t.sarr_len", bin, lens, 2) == PS_OK);
    /* nested: array of 2 arrays: u16[2] {1, 2} and string[1] {"q"} */
    buf nb = {0};
    b_u32(&nb, PS_GGUF_ARRAY);
    b_u64(&nb, 2);
    b_u32(&nb, PS_GGUF_UINT16);
    b_u64(&nb, 2);
    uint16_t v1 = 1, v2 = 2;
    b_put(&nb, &v1, 2);
    b_put(&nb, &v2, 2);
    b_u32(&nb, PS_GGUF_STRING);
    b_u64(&nb, 1);
    b_str(&nb, "q");
    CHECK(ps_gguf_set_raw(w, "t.nested", PS_GGUF_ARRAY, nb.p, nb.n) == PS_OK);
    /* setter misuse */
    CHECK(ps_gguf_set_raw(NULL, "x", PS_GGUF_UINT8, &u8, 1) == PS_ERR_INVALID_ARG);

    /* tensors: f32 [3, 2], f16 [5], bf16 [7, 1, 1], q8_0 [64, 2], odd sizes to exercise padding */
    float f32d[6] = {1, -2, 3.5f, 0, 1e-3f, -1e30f};
    uint16_t f16d[5], bf16d[7];
    for (int i = 0; i < 5; i++) f16d[i] = ps_f32_to_f16((float)i - 2.5f);
    for (int i = 0; i < 7; i++) bf16d[i] = ps_f32_to_bf16((float)i * 1.5f);
    ps_block_q8_0 q8[4];
    for (int bI = 0; bI < 4; bI++) {
        q8[bI].d = ps_f32_to_f16(0.01f * (float)(bI + 1));
        for (int j = 0; j < 32; j++) q8[bI].qs[j] = (int8_t)(j * 7 - 100 + bI);
    }
    CHECK(sizeof(ps_block_q8_0) == 34);
    int64_t ne_a[2] = {3, 2}, ne_b[1] = {5}, ne_c[3] = {7, 1, 1}, ne_d[2] = {64, 2};
    CHECK(ps_gguf_add_tensor(w, "w.f32", PS_GGML_F32, 2, ne_a, f32d, sizeof f32d) == PS_OK);
    CHECK(ps_gguf_add_tensor(w, "w.f16", PS_GGML_F16, 1, ne_b, f16d, sizeof f16d) == PS_OK);
    CHECK(ps_gguf_add_tensor(w, "w.bf16", PS_GGML_BF16, 3, ne_c, bf16d, sizeof bf16d) == PS_OK);
    CHECK(ps_gguf_add_tensor(w, "w.q8_0", PS_GGML_Q8_0, 2, ne_d, q8, sizeof q8) == PS_OK);
    int64_t ne_z[1] = {0};
    CHECK(ps_gguf_add_tensor(w, "w.empty", PS_GGML_F32, 1, ne_z, NULL, 0) == PS_OK);

    void *mem = NULL;
    size_t size = 0;
    ps_error e;
    CHECKF(ps_gguf_write_memory(w, &mem, &size, &e) == PS_OK, "%s", e.message);
    char path[] = "/tmp/ps_test_gguf_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd >= 0) close(fd);
    CHECKF(ps_gguf_write_file(w, path, &e) == PS_OK, "%s", e.message);
    ps_gguf_writer_free(w);

    /* the file equals the memory image */
    FILE *f = fopen(path, "rb");
    uint8_t *fbytes = malloc(size + 16);
    size_t got = f ? fread(fbytes, 1, size + 16, f) : 0;
    if (f) fclose(f);
    CHECKF(got == size && mem && memcmp(fbytes, mem, size) == 0, "file %zu vs memory %zu", got,
           size);
    free(fbytes);
    CHECK(size % 32 == 0);

    ps_gguf *g = NULL;
    CHECKF(ps_gguf_open(path, &g, &e) == PS_OK, "%s", e.message);
    unlink(path);
    if (!g) {
        ps_free(mem);
        free(nb.p);
        return;
    }
    CHECK(strcmp(ps_gguf_path(g), path) == 0);
    CHECK(ps_gguf_version(g) == 3);
    CHECK(ps_gguf_n_kv(g) == 8 + 6 + 11 + 1 + 2 + 1);
    CHECK(ps_gguf_find_key(g, "t.twice") == 7); /* first position */
    uint32_t u;
    int64_t i;
    float fl;
    bool bo;
    ps_gguf_str s;
    CHECK(ps_gguf_get_u32(g, "t.u32", &u, &e) == PS_OK && u == 4000000000u);
    CHECK(ps_gguf_get_u32(g, "t.twice", &u, &e) == PS_OK && u == 2);
    CHECK(ps_gguf_get_i64(g, "t.i32", &i, &e) == PS_OK && i == -7);
    CHECK(ps_gguf_get_i64(g, "t.u64", &i, &e) == PS_OK && i == (int64_t)1 << 40);
    CHECK(ps_gguf_get_i64(g, "t.i64", &i, &e) == PS_OK && i == INT64_MIN);
    CHECK(ps_gguf_get_u32(g, "t.u8", &u, &e) == PS_OK && u == 200);
    CHECK(ps_gguf_get_i64(g, "t.i8", &i, &e) == PS_OK && i == -100);
    CHECK(ps_gguf_get_u32(g, "t.u16", &u, &e) == PS_OK && u == 60000);
    CHECK(ps_gguf_get_i64(g, "t.i16", &i, &e) == PS_OK && i == -30000);
    CHECK(ps_gguf_get_f32(g, "t.f32", &fl, &e) == PS_OK && fl == 1e-5f);
    CHECK(ps_gguf_get_f32(g, "t.f64", &fl, &e) == PS_OK && fl == 3.25f);
    CHECK(ps_gguf_get_bool(g, "t.bool", &bo, &e) == PS_OK && bo);
    CHECK(ps_gguf_get_str(g, "t.str", &s, &e) == PS_OK && s.len == strlen("héllo") &&
          memcmp(s.ptr, "héllo", s.len) == 0);
    CHECK(ps_gguf_get_str(g, "t.empty", &s, &e) == PS_OK && s.len == 0);
    /* conversions that do not fit, wrong types, absent keys */
    CHECK(ps_gguf_get_u32(g, "t.i32", &u, &e) == PS_ERR_FORMAT && strstr(e.message, "t.i32"));
    CHECK(ps_gguf_get_u32(g, "t.u64", &u, &e) == PS_ERR_FORMAT && strstr(e.message, "uint32"));
    CHECK(ps_gguf_get_u32(g, "t.str", &u, &e) == PS_ERR_FORMAT && strstr(e.message, "string"));
    CHECK(ps_gguf_get_u32(g, "t.bool", &u, &e) == PS_ERR_FORMAT);
    CHECK(ps_gguf_get_f32(g, "t.u32", &fl, &e) == PS_ERR_FORMAT);
    CHECK(ps_gguf_get_bool(g, "t.u8", &bo, &e) == PS_ERR_FORMAT);
    CHECK(ps_gguf_get_str(g, "t.sarr", &s, &e) == PS_ERR_FORMAT && strstr(e.message, "array"));
    CHECK(ps_gguf_get_u32(g, "no.such", &u, &e) == PS_ERR_NOT_FOUND &&
          strstr(e.message, "no.such"));
    CHECK(ps_gguf_find_key(g, "no.such") == -1);
    CHECK(ps_gguf_find_key(g, "t.u3") == -1);
    /* arrays */
    for (size_t k = 0; k < PS_ARRAY_LEN(numeric); k++) {
        char key[32];
        snprintf(key, sizeof key, "t.arr%u", numeric[k]);
        ps_gguf_type et;
        uint64_t n;
        const void *data;
        CHECK(ps_gguf_get_arr(g, key, &et, &n, &data, &e) == PS_OK);
        size_t es = numeric[k] <= 1 || numeric[k] == 7 ? 1 : numeric[k] <= 3 ? 2
                  : numeric[k] <= 6 ? 4 : 8;
        uint8_t vals[64];
        memcpy(vals, raw, 64);
        if (numeric[k] == PS_GGUF_BOOL)
            for (int j = 0; j < 64; j++) vals[j] &= 1;
        CHECKF(et == (ps_gguf_type)numeric[k] && n == 5 && memcmp(data, vals, 5 * es) == 0,
               "array %s", key);
    }
    {
        ps_gguf_type et;
        uint64_t n = 9;
        CHECK(ps_gguf_get_arr(g, "t.arr_empty", &et, &n, NULL, &e) == PS_OK && n == 0);
        CHECK(ps_gguf_get_arr(g, "t.u8", &et, &n, NULL, &e) == PS_ERR_FORMAT);
        const void *data = NULL;
        CHECK(ps_gguf_get_arr(g, "t.sarr", &et, &n, &data, &e) == PS_OK &&
              et == PS_GGUF_STRING && n == 4 && data == NULL);
        for (uint64_t k = 0; k < 4; k++)
            CHECK(ps_gguf_arr_str(g, "t.sarr", k, &s, &e) == PS_OK && s.len == strlen(strs[k]) &&
                  memcmp(s.ptr, strs[k], s.len) == 0);
        CHECK(ps_gguf_arr_str(g, "t.sarr_len", 0, &s, &e) == PS_OK && s.len == 3 &&
              memcmp(s.ptr, "a\0b", 3) == 0);
        CHECK(ps_gguf_arr_str(g, "t.sarr_len", 1, &s, &e) == PS_OK && s.len == 0);
        CHECK(ps_gguf_get_arr(g, "t.nested", &et, &n, &data, &e) == PS_OK &&
              et == PS_GGUF_ARRAY && n == 2 && data == NULL);
        /* raw bytes of the nested value survive */
        int64_t ki = ps_gguf_find_key(g, "t.nested");
        CHECK(ki >= 0 && ps_gguf_kv_type(g, ki) == PS_GGUF_ARRAY);
        CHECK(ps_gguf_kv_type(g, 9999) == (ps_gguf_type)-1);
        CHECK(ps_gguf_key(g, -1).len == 0);
    }
    /* tensors */
    CHECK(ps_gguf_n_tensors(g) == 5);
    CHECK(ps_gguf_alignment(g) == 32);
    struct { const char *name; uint32_t type; uint32_t nd; int64_t ne0, ne1; const void *d; size_t nb; } want[] = {
        {"w.f32", PS_GGML_F32, 2, 3, 2, f32d, sizeof f32d},
        {"w.f16", PS_GGML_F16, 1, 5, 1, f16d, sizeof f16d},
        {"w.bf16", PS_GGML_BF16, 3, 7, 1, bf16d, sizeof bf16d},
        {"w.q8_0", PS_GGML_Q8_0, 2, 64, 2, q8, sizeof q8},
        {"w.empty", PS_GGML_F32, 1, 0, 1, NULL, 0},
    };
    const uint8_t *base = NULL;
    for (size_t k = 0; k < PS_ARRAY_LEN(want); k++) {
        const ps_gguf_tensor *t = ps_gguf_find_tensor(g, want[k].name);
        CHECKF(t && t == ps_gguf_tensor_at(g, (int64_t)k), "tensor %s", want[k].name);
        if (!t) continue;
        if (k == 0) base = (const uint8_t *)t->data - t->offset;
        CHECK(t->type == want[k].type && t->n_dims == want[k].nd && t->ne[0] == want[k].ne0 &&
              t->ne[1] == want[k].ne1 && t->ne[2] == 1 && t->ne[3] == 1);
        CHECK(t->nbytes == want[k].nb && (want[k].nb == 0 || memcmp(t->data, want[k].d, want[k].nb) == 0));
        CHECK(t->offset % 32 == 0 && ((uintptr_t)t->data) % 32 == 0); /* mmap is page-aligned */
        CHECK((size_t)((const uint8_t *)t->data - base) == t->offset);
    }
    CHECK(ps_gguf_find_tensor(g, "w.f3") == NULL && ps_gguf_tensor_at(g, 5) == NULL);

    /* copy_kv with and without a prefix; a second round trip gives the same keys */
    ps_gguf_writer *w2 = ps_gguf_writer_new();
    CHECK(ps_gguf_copy_kv(w2, g, "t.s") == PS_OK);
    void *mem2 = NULL;
    size_t size2 = 0;
    CHECK(ps_gguf_write_memory(w2, &mem2, &size2, &e) == PS_OK);
    ps_gguf *g2 = NULL;
    CHECK(ps_gguf_open_memory(mem2, size2, &g2, &e) == PS_OK);
    if (g2) {
        CHECK(ps_gguf_n_kv(g2) == 3 && ps_gguf_n_tensors(g2) == 0); /* t.str t.sarr t.sarr_len */
        CHECK(ps_gguf_arr_str(g2, "t.sarr", 3, &s, &e) == PS_OK && s.len == strlen(strs[3]));
        CHECK(size2 == ps_gguf_file_size(g2));
    }
    ps_gguf_close(g2);
    ps_free(mem2);
    ps_gguf_writer_free(w2);
    w2 = ps_gguf_writer_new();
    CHECK(ps_gguf_copy_kv(w2, g, NULL) == PS_OK);
    mem2 = NULL;
    CHECK(ps_gguf_write_memory(w2, &mem2, &size2, &e) == PS_OK);
    g2 = NULL;
    CHECK(ps_gguf_open_memory(mem2, size2, &g2, &e) == PS_OK);
    if (g2) {
        CHECK(ps_gguf_n_kv(g2) == ps_gguf_n_kv(g));
        bool same = true;
        for (int64_t k = 0; k < ps_gguf_n_kv(g); k++) {
            ps_gguf_str a = ps_gguf_key(g, k), b2 = ps_gguf_key(g2, k);
            if (a.len != b2.len || memcmp(a.ptr, b2.ptr, a.len) != 0) same = false;
        }
        CHECK(same);
        /* the metadata bytes are identical to the original (same order, same encoding) */
        size_t meta = size2; /* no tensors: the whole file is header + keys */
        CHECK(memcmp((const uint8_t *)mem2 + 24, (const uint8_t *)mem + 24, meta - 24) == 0);
    }
    ps_gguf_close(g2);
    ps_free(mem2);
    ps_gguf_writer_free(w2);
    ps_gguf_close(g);
    ps_free(mem);
    free(nb.p);

    /* alignment set by key */
    w = ps_gguf_writer_new();
    CHECK(ps_gguf_set_u32(w, "general.alignment", 64) == PS_OK);
    CHECK(ps_gguf_add_tensor(w, "x", PS_GGML_F16, 1, ne_b, f16d, sizeof f16d) == PS_OK);
    CHECK(ps_gguf_add_tensor(w, "y", PS_GGML_F16, 1, ne_b, f16d, sizeof f16d) == PS_OK);
    CHECK(ps_gguf_write_memory(w, &mem, &size, &e) == PS_OK);
    CHECK(ps_gguf_open_memory(mem, size, &g, &e) == PS_OK);
    if (g) {
        CHECK(ps_gguf_alignment(g) == 64 && ps_gguf_find_tensor(g, "y")->offset == 64);
        CHECK(((const uint8_t *)ps_gguf_find_tensor(g, "x")->data - (const uint8_t *)mem) % 64 == 0);
        ps_gguf_close(g);
    }
    ps_free(mem);
    ps_gguf_set_u32(w, "general.alignment", 48);
    CHECK(ps_gguf_write_memory(w, &mem, &size, &e) == PS_ERR_INVALID_ARG && e.message[0]);
    ps_gguf_writer_free(w);

    /* writer errors are remembered */
    w = ps_gguf_writer_new();
    CHECK(ps_gguf_add_tensor(w, "x", PS_GGML_Q8_0, 1, ne_b, f16d, 10) == PS_ERR_INVALID_ARG);
    CHECK(ps_gguf_set_u32(w, "ok", 1) == PS_OK);
    CHECK(ps_gguf_write_memory(w, &mem, &size, &e) == PS_ERR_INVALID_ARG &&
          strstr(e.message, "'x'") && mem == NULL);
    ps_gguf_writer_free(w);
    w = ps_gguf_writer_new();
    CHECK(ps_gguf_add_tensor(w, "x", PS_GGML_F16, 1, ne_b, f16d, sizeof f16d) == PS_OK);
    CHECK(ps_gguf_add_tensor(w, "x", PS_GGML_F16, 1, ne_b, f16d, sizeof f16d) == PS_ERR_INVALID_ARG);
    CHECK(ps_gguf_write_memory(w, &mem, &size, &e) == PS_ERR_INVALID_ARG &&
          strstr(e.message, "duplicate"));
    ps_gguf_writer_free(w);
    w = ps_gguf_writer_new();
    CHECK(ps_gguf_add_tensor(w, "x", 4, 1, ne_b, f16d, 10) == PS_ERR_INVALID_ARG);
    ps_gguf_writer_free(w);
    w = ps_gguf_writer_new();
    CHECK(ps_gguf_set_raw(w, "bad", PS_GGUF_STRING, "\5\0\0\0\0\0\0\0ab", 10) == PS_ERR_INVALID_ARG);
    CHECK(ps_gguf_write_file(w, "/nonexistent-dir/x.gguf", &e) == PS_ERR_INVALID_ARG);
    ps_gguf_writer_free(w);
    w = ps_gguf_writer_new();
    CHECK(ps_gguf_write_file(w, "/nonexistent-dir/x.gguf", &e) == PS_ERR_IO &&
          strstr(e.message, "nonexistent"));
    ps_gguf_writer_free(w);
    /* the reader's I/O errors */
    CHECK(ps_gguf_open("/nonexistent-dir/x.gguf", &g, &e) == PS_ERR_IO && g == NULL &&
          strstr(e.message, "No such file"));
    CHECK(ps_gguf_open("/tmp", &g, &e) == PS_ERR_IO && g == NULL);
    char epath[] = "/tmp/ps_test_gguf_empty_XXXXXX";
    int efd = mkstemp(epath);
    if (efd >= 0) close(efd);
    CHECK(efd >= 0 && ps_gguf_open(epath, &g, &e) == PS_ERR_FORMAT && g == NULL &&
          strstr(e.message, "0 bytes"));
    unlink(epath);
    /* nested arrays with a huge inner count are rejected before any work */
    buf hb = {0};
    b_u32(&hb, PS_GGUF_ARRAY);
    b_u64(&hb, 1);
    b_u32(&hb, PS_GGUF_STRING);
    b_u64(&hb, (uint64_t)1 << 62);
    w = ps_gguf_writer_new();
    CHECK(ps_gguf_set_raw(w, "huge", PS_GGUF_ARRAY, hb.p, hb.n) == PS_ERR_INVALID_ARG);
    ps_gguf_writer_free(w);
    free(hb.p);
}

/* Every allocation of open and of write, failed in turn: PS_ERR_NOMEM, nothing leaks (ASan). */
static void test_nomem(void) {
    knobs k = {0};
    k.depth = 2;
    size_t need;
    buf b = make_file(&k, &need);
    int bad = 0;
    int64_t n;
    for (n = 0; n < 100; n++) {
        ps_gguf *g = NULL;
        ps_error e;
        ps_alloc_fail_after(n);
        ps_status st = ps_gguf_open_memory(b.p, b.n, &g, &e);
        ps_alloc_fail_after(-1);
        ps_gguf_close(g);
        if (st == PS_OK) break;
        if (st != PS_ERR_NOMEM || !e.message[0] || g) bad++;
    }
    CHECKF(bad == 0 && n > 2 && n < 100, "open: %d bad, %lld allocations", bad, (long long)n);
    ps_gguf *src = NULL;
    ps_error se;
    CHECK(ps_gguf_open_memory(b.p, b.n, &src, &se) == PS_OK);
    char path[] = "/tmp/ps_test_gguf_nomem_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd >= 0) close(fd);
    bad = 0;
    for (n = 0; n < 200; n++) {
        ps_alloc_fail_after(n);
        ps_gguf_writer *w = ps_gguf_writer_new();
        ps_status st = PS_ERR_NOMEM;
        if (w) {
            ps_gguf_copy_kv(w, src, "test.");
            int64_t ne[1] = {32};
            ps_block_q8_0 q = {0};
            const char *strs[] = {"x", "yy"};
            for (int i = 0; i < 20; i++) { /* enough keys to grow the array */
                char key[16];
                snprintf(key, sizeof key, "k%d", i);
                ps_gguf_set_u32(w, key, (uint32_t)i);
            }
            ps_gguf_set_str(w, "s", "v");
            ps_gguf_set_arr_str(w, "sa", strs, NULL, 2);
            ps_gguf_add_tensor(w, "q", PS_GGML_Q8_0, 1, ne, &q, sizeof q);
            ps_error fe;
            ps_status fst = ps_gguf_write_file(w, path, &fe);
            if (fst != PS_OK && (fst != PS_ERR_NOMEM || !fe.message[0])) bad++;
            void *mem = NULL;
            size_t size;
            ps_error e;
            st = ps_gguf_write_memory(w, &mem, &size, &e);
            if (st == PS_OK) {
                ps_gguf *g = NULL;
                ps_alloc_fail_after(-1);
                CHECK(ps_gguf_open_memory(mem, size, &g, &e) == PS_OK &&
                      ps_gguf_n_kv(g) == 25 && ps_gguf_n_tensors(g) == 1 &&
                      ps_gguf_find_key(g, "test.nested") == 2);
                ps_gguf_close(g);
                g = NULL;
                CHECK(fst == PS_OK && ps_gguf_open(path, &g, &e) == PS_OK &&
                      ps_gguf_file_size(g) == size);
                ps_gguf_close(g);
            } else if (st != PS_ERR_NOMEM || !e.message[0] || mem) {
                bad++;
            }
            ps_free(mem);
            ps_gguf_writer_free(w);
        }
        ps_alloc_fail_after(-1);
        if (st == PS_OK) break;
    }
    CHECKF(bad == 0 && n > 5 && n < 200, "writer: %d bad, %lld allocations", bad, (long long)n);
    unlink(path);
    ps_gguf_close(src);
    free(b.p);
}

/* ---- the shared files ---- */

static void test_shared(void) {
    const char *sh = ps_test_shared();
    if (!sh) {
        SKIP("../shared absent: vocab and model files not loaded");
        return;
    }
    static const struct {
        const char *file;
        int64_t n_kv, n_tensors;
        const char *model;
        uint64_t n_tokens;
    } files[] = {
        {"models/stories260K.gguf", 19, 48, "llama", 512},
        {"models/llama-2-tiny-random.gguf", 18, 12, "llama", 32000},
        {"vocab/ggml-vocab-llama-spm.gguf", 22, 0, "llama", 32000},
        {"vocab/ggml-vocab-gpt-2.gguf", 16, 0, "gpt2", 50257},
        {"vocab/ggml-vocab-mpt.gguf", 17, 0, "gpt2", 50432},
        {"vocab/ggml-vocab-refact.gguf", 18, 0, "gpt2", 49216},
        {"vocab/ggml-vocab-deepseek-llm.gguf", 23, 0, "gpt2", 102400},
        {"vocab/ggml-vocab-llama-bpe.gguf", 20, 0, "gpt2", 128256},
        {"vocab/ggml-vocab-qwen2.gguf", 19, 0, "gpt2", 151936},
        {"vocab/ggml-vocab-baichuan.gguf", 18, 0, "llama", 64000},
        {"vocab/ggml-vocab-gpt-neox.gguf", 17, 0, "gpt2", 50432},
    };
    for (size_t i = 0; i < PS_ARRAY_LEN(files); i++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", sh, files[i].file);
        ps_gguf *g = NULL;
        ps_error e;
        ps_status st = ps_gguf_open(path, &g, &e);
        CHECKF(st == PS_OK, "%s: %s", files[i].file, e.message);
        if (st) continue;
        CHECKF(ps_gguf_n_kv(g) == files[i].n_kv, "%s: %lld keys", files[i].file,
               (long long)ps_gguf_n_kv(g));
        CHECK(ps_gguf_n_tensors(g) == files[i].n_tensors);
        ps_gguf_str m = {0};
        CHECK(ps_gguf_get_str(g, "tokenizer.ggml.model", &m, &e) == PS_OK &&
              m.len == strlen(files[i].model) && memcmp(m.ptr, files[i].model, m.len) == 0);
        ps_gguf_type et;
        uint64_t n = 0;
        CHECK(ps_gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &n, NULL, &e) == PS_OK &&
              et == PS_GGUF_STRING && n == files[i].n_tokens);
        /* every token readable, lengths sane */
        uint64_t total = 0;
        bool all = true;
        for (uint64_t t = 0; t < n; t++) {
            ps_gguf_str s;
            if (ps_gguf_arr_str(g, "tokenizer.ggml.tokens", t, &s, &e) != PS_OK) all = false;
            else total += s.len;
        }
        CHECK(all && total > n / 2 && total < ps_gguf_file_size(g));
        /* copy the tokenizer keys into a new file: identical arrays */
        ps_gguf_writer *w = ps_gguf_writer_new();
        CHECK(ps_gguf_copy_kv(w, g, "tokenizer.") == PS_OK);
        void *mem = NULL;
        size_t size = 0;
        CHECK(ps_gguf_write_memory(w, &mem, &size, &e) == PS_OK);
        ps_gguf *c = NULL;
        CHECK(ps_gguf_open_memory(mem, size, &c, &e) == PS_OK);
        if (c) {
            uint64_t n2 = 0;
            CHECK(ps_gguf_get_arr(c, "tokenizer.ggml.tokens", &et, &n2, NULL, &e) == PS_OK &&
                  n2 == n);
            ps_gguf_str a, b;
            CHECK(n == 0 || (ps_gguf_arr_str(g, "tokenizer.ggml.tokens", n - 1, &a, &e) == PS_OK &&
                             ps_gguf_arr_str(c, "tokenizer.ggml.tokens", n - 1, &b, &e) == PS_OK &&
                             a.len == b.len && memcmp(a.ptr, b.ptr, a.len) == 0));
            CHECK(ps_gguf_find_key(c, "general.architecture") < 0);
        }
        ps_gguf_close(c);
        ps_free(mem);
        ps_gguf_writer_free(w);
        /* tensors: inside the file, aligned */
        bool inside = true;
        for (int64_t t = 0; t < ps_gguf_n_tensors(g); t++) {
            const ps_gguf_tensor *tt = ps_gguf_tensor_at(g, t);
            if ((uintptr_t)tt->data % 32 || tt->nbytes == 0) inside = false;
        }
        CHECK(inside);
        ps_gguf_close(g);
    }
    /* shapes */
    char path[4200];
    snprintf(path, sizeof path, "%s/models/stories260K.gguf", sh);
    ps_gguf *g = NULL;
    ps_error e;
    if (ps_gguf_open(path, &g, &e) == PS_OK) {
        const ps_gguf_tensor *t = ps_gguf_find_tensor(g, "token_embd.weight");
        CHECK(t && t->type == PS_GGML_F32 && t->n_dims == 2 && t->ne[0] == 64 && t->ne[1] == 512 &&
              t->nbytes == 64 * 512 * 4);
        t = ps_gguf_find_tensor(g, "blk.0.ffn_down.weight");
        CHECK(t && t->ne[0] == 172 && t->ne[1] == 64);
        uint32_t u = 0;
        CHECK(ps_gguf_get_u32(g, "llama.embedding_length", &u, &e) == PS_OK && u == 64);
        float eps = 0;
        CHECK(ps_gguf_get_f32(g, "llama.attention.layer_norm_rms_epsilon", &eps, &e) == PS_OK &&
              eps == 1e-5f);
        ps_gguf_str s;
        CHECK(ps_gguf_arr_str(g, "tokenizer.ggml.tokens", 1, &s, &e) == PS_OK && s.len == 3 &&
              memcmp(s.ptr, "<s>", 3) == 0);
        /* truncating the real file anywhere before its last tensor's end fails */
        size_t size = ps_gguf_file_size(g);
        FILE *f = fopen(path, "rb");
        uint8_t *bytes = malloc(size);
        CHECK(f && fread(bytes, 1, size, f) == size);
        if (f) fclose(f);
        int wrong = 0;
        for (size_t cut = 0; cut < size; cut += 997) {
            ps_gguf *h = NULL;
            if (ps_gguf_open_memory(bytes, cut, &h, &e) != PS_ERR_FORMAT) wrong++;
            ps_gguf_close(h);
        }
        CHECKF(wrong == 0, "%d truncations of stories260K loaded", wrong);
        free(bytes);
        ps_gguf_close(g);
    }
    snprintf(path, sizeof path, "%s/models/llama-2-tiny-random.gguf", sh);
    if (ps_gguf_open(path, &g, &e) == PS_OK) {
        const ps_gguf_tensor *t = ps_gguf_find_tensor(g, "token_embd.weight");
        CHECK(t && t->type == PS_GGML_F16 && t->ne[0] == 8 && t->ne[1] == 32000 &&
              t->nbytes == 8 * 32000 * 2);
        ps_gguf_close(g);
    }
}

static void test_type_facts(void) {
    CHECK(ps_ggml_block_elems(PS_GGML_Q8_0) == 32 && ps_ggml_block_bytes(PS_GGML_Q8_0) == 34);
    CHECK(ps_ggml_block_elems(PS_GGML_BF16) == 1 && ps_ggml_block_bytes(PS_GGML_BF16) == 2);
    CHECK(ps_ggml_block_elems(14) == 256 && ps_ggml_block_bytes(14) == 210); /* q6_k */
    CHECK(ps_ggml_block_elems(34) == 256 && ps_ggml_block_bytes(34) == 54);  /* tq1_0 */
    CHECK(ps_ggml_block_elems(4) == 0 && ps_ggml_block_bytes(4) == 0);
    CHECK(ps_ggml_block_elems(31) == 0 && ps_ggml_block_elems(1u << 31) == 0);
    CHECK(strcmp(ps_ggml_type_name(PS_GGML_Q8_0), "q8_0") == 0);
    CHECK(strcmp(ps_ggml_type_name(999), "unknown") == 0);
}

/* ---- seed corpus for fuzz/fuzz_gguf.c (PS_GGUF_WRITE_CORPUS=fuzz/corpus/fuzz_gguf) ---- */

static void save(const char *dir, const char *name, const void *p, size_t n) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    CHECKF(f && fwrite(p, 1, n, f) == n, "cannot write %s", path);
    if (f) fclose(f);
    fprintf(stderr, "wrote %s (%zu bytes)\n", path, n);
}

static void save_writer(const char *dir, const char *name, ps_gguf_writer *w) {
    void *mem = NULL;
    size_t size = 0;
    ps_error e;
    CHECKF(ps_gguf_write_memory(w, &mem, &size, &e) == PS_OK, "%s: %s", name, e.message);
    if (mem) save(dir, name, mem, size);
    ps_free(mem);
    ps_gguf_writer_free(w);
}

static void write_corpus(const char *dir) {
    /* a tiny SentencePiece-style vocabulary: no tensors, no padding */
    ps_gguf_writer *w = ps_gguf_writer_new();
    const char *toks[] = {"<unk>", "<s>", "</s>", "<0x00>", "<0x0A>", "\xe2\x96\x81", "a", "b",
                          "\xe2\x96\x81" "a", "ab", "\xe2\x96\x81" "ab", "."};
    float scores[12];
    int32_t types[12];
    for (int i = 0; i < 12; i++) {
        scores[i] = -(float)i;
        types[i] = i < 3 ? 3 : i < 5 ? 6 : 1;
    }
    types[0] = 2;
    ps_gguf_set_str(w, "general.architecture", "llama");
    ps_gguf_set_str(w, "tokenizer.ggml.model", "llama");
    ps_gguf_set_arr_str(w, "tokenizer.ggml.tokens", toks, NULL, 12);
    ps_gguf_set_arr(w, "tokenizer.ggml.scores", PS_GGUF_FLOAT32, scores, 12);
    ps_gguf_set_arr(w, "tokenizer.ggml.token_type", PS_GGUF_INT32, types, 12);
    ps_gguf_set_u32(w, "tokenizer.ggml.bos_token_id", 1);
    ps_gguf_set_u32(w, "tokenizer.ggml.eos_token_id", 2);
    ps_gguf_set_bool(w, "tokenizer.ggml.add_bos_token", true);
    save_writer(dir, "vocab_spm.gguf", w);

    /* a tiny BPE vocabulary with merges */
    w = ps_gguf_writer_new();
    const char *btoks[] = {"a", "b", "ab", "\xc4\xa0", "\xc4\xa0" "ab", "<|endoftext|>"};
    const char *merges[] = {"a b", "\xc4\xa0 ab"};
    ps_gguf_set_str(w, "tokenizer.ggml.model", "gpt2");
    ps_gguf_set_str(w, "tokenizer.ggml.pre", "gpt-2");
    ps_gguf_set_arr_str(w, "tokenizer.ggml.tokens", btoks, NULL, 6);
    ps_gguf_set_arr_str(w, "tokenizer.ggml.merges", merges, NULL, 2);
    save_writer(dir, "vocab_bpe.gguf", w);

    /* one tensor of every known ggml type, one block each (plus 2-D f32) */
    w = ps_gguf_writer_new();
    ps_gguf_set_str(w, "general.architecture", "llama");
    ps_gguf_set_u32(w, "llama.embedding_length", 4);
    ps_gguf_set_f32(w, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
    uint8_t blob[512];
    for (int i = 0; i < 512; i++) blob[i] = (uint8_t)(i * 131 + 7);
    for (uint32_t t = 0; t < 64; t++) {
        int64_t be = ps_ggml_block_elems(t), bb = ps_ggml_block_bytes(t);
        if (!be) continue;
        char name[32];
        snprintf(name, sizeof name, "t.%s", ps_ggml_type_name(t));
        int64_t ne[2] = {be, be == 1 ? 3 : 1};
        CHECK(ps_gguf_add_tensor(w, name, t, 2, ne, blob, (uint64_t)(bb * ne[1])) == PS_OK);
    }
    save_writer(dir, "tensors_all_types.gguf", w);

    /* model-like: f32/f16/bf16/q8_0 weights, alignment 64 */
    w = ps_gguf_writer_new();
    ps_gguf_set_u32(w, "general.alignment", 64);
    ps_gguf_set_str(w, "general.architecture", "llama");
    ps_gguf_set_u32(w, "llama.block_count", 1);
    ps_gguf_set_u64(w, "llama.context_length", 64);
    int64_t ne_e[2] = {32, 4}, ne_n[1] = {32};
    ps_gguf_add_tensor(w, "token_embd.weight", PS_GGML_F16, 2, ne_e, blob, 32 * 4 * 2);
    ps_gguf_add_tensor(w, "output_norm.weight", PS_GGML_F32, 1, ne_n, blob, 32 * 4);
    ps_gguf_add_tensor(w, "blk.0.attn_q.weight", PS_GGML_BF16, 2, ne_e, blob, 32 * 4 * 2);
    ps_gguf_add_tensor(w, "output.weight", PS_GGML_Q8_0, 2, ne_e, blob, 34 * 4);
    save_writer(dir, "model_align64.gguf", w);

    /* every value type, nested arrays */
    w = ps_gguf_writer_new();
    uint8_t u8 = 1;
    int16_t i16 = -2;
    double f64 = 0.5;
    int64_t i64 = -3;
    ps_gguf_set_raw(w, "v.u8", PS_GGUF_UINT8, &u8, 1);
    ps_gguf_set_raw(w, "v.i8", PS_GGUF_INT8, &u8, 1);
    ps_gguf_set_raw(w, "v.u16", PS_GGUF_UINT16, &i16, 2);
    ps_gguf_set_raw(w, "v.i16", PS_GGUF_INT16, &i16, 2);
    ps_gguf_set_u32(w, "v.u32", 5);
    ps_gguf_set_i32(w, "v.i32", -5);
    ps_gguf_set_f32(w, "v.f32", 0.25f);
    ps_gguf_set_bool(w, "v.bool", false);
    ps_gguf_set_str(w, "v.str", "s");
    ps_gguf_set_u64(w, "v.u64", 6);
    ps_gguf_set_raw(w, "v.i64", PS_GGUF_INT64, &i64, 8);
    ps_gguf_set_raw(w, "v.f64", PS_GGUF_FLOAT64, &f64, 8);
    buf nb = {0};
    b_u32(&nb, PS_GGUF_ARRAY);
    b_u64(&nb, 2);
    b_u32(&nb, PS_GGUF_UINT8);
    b_u64(&nb, 1);
    b_u8(&nb, 9);
    b_u32(&nb, PS_GGUF_ARRAY);
    b_u64(&nb, 1);
    b_u32(&nb, PS_GGUF_STRING);
    b_u64(&nb, 1);
    b_str(&nb, "deep");
    ps_gguf_set_raw(w, "v.nested", PS_GGUF_ARRAY, nb.p, nb.n);
    free(nb.p);
    save_writer(dir, "values_nested.gguf", w);

    /* the hand-made files: v3, v2, vocab-only */
    knobs k = {0};
    size_t need;
    buf b = make_file(&k, &need);
    save(dir, "handmade_v3.gguf", b.p, b.n);
    free(b.p);
    k.version = 2;
    b = make_file(&k, &need);
    save(dir, "handmade_v2.gguf", b.p, b.n);
    free(b.p);
    knobs v = {0};
    v.no_tensors = 1;
    b = make_file(&v, &need);
    save(dir, "handmade_vocab.gguf", b.p, b.n);
    free(b.p);
}

int main(void) {
    clock_t t0 = clock();
    const char *corpus = getenv("PS_GGUF_WRITE_CORPUS");
    if (corpus && *corpus) {
        write_corpus(corpus);
        return ps_test_done("gguf_corpus");
    }
    test_type_facts();
    test_handmade();
    test_roundtrip();
    test_nomem();
    test_shared();
    fprintf(stderr, "gguf: %.2f s CPU\n", (double)(clock() - t0) / CLOCKS_PER_SEC);
    return ps_test_done("gguf");
}
