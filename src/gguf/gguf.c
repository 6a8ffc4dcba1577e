/*
 * gguf.c — GGUF (v2, v3) reader and writer: keys, arrays and tensors, no model meaning.
 *
 * Reader: the file is memory-mapped read-only (or a caller's buffer is wrapped) and parsed once
 * by a bounds-checked cursor. Every count, length and offset is compared with the bytes that
 * are left BEFORE it is used, so a count of 2^60 fails at once instead of allocating. Parsing
 * records, for each key, where its value lies in the file; getters read values from there.
 * String arrays get an offset index at open (ps_gguf_arr_str is O(1)); keys and tensor names
 * are hashed (open addressing) so lookups and the duplicate checks are O(1).
 *
 * Writer: setters serialise each value at once (u32 type + value bytes, exactly as in the
 * file) and copy tensor data; ps_gguf_write_* lays out header, keys, tensor infos, padding to
 * the alignment, and the tensor data (each padded to the alignment). The first failure of a
 * setter is remembered, and the write then fails with it.
 */
#include "gguf/gguf.h"
#include "base/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_MAX_DEPTH 8           /* nesting of arrays of arrays */
#define GGUF_MIN_KV_BYTES 14       /* u64 key length + 1 key byte + u32 type + 1 value byte */
#define GGUF_MIN_TENSOR_BYTES 33   /* u64 len + 1 name byte + u32 n_dims + u64 ne + u32 + u64 */

/* Bytes of a tensor of `type` and shape ne[0..n_dims), or a reason it has none. Returns NULL
 * and sets *nbytes, or returns a static description of the problem. */
static const char *tensor_nbytes(uint32_t type, uint32_t n_dims, const int64_t *ne,
                                 uint64_t *nbytes) {
    int64_t blck = ps_ggml_block_elems(type);
    if (blck == 0) return "unknown ggml type";
    if (n_dims < 1 || n_dims > 4) return "n_dims outside 1..4";
    uint64_t n = 1;
    for (uint32_t d = 0; d < n_dims; d++) {
        if (ne[d] < 0) return "negative dimension";
        if (!ps_mul_ok(n, (uint64_t)ne[d], &n) || n > (uint64_t)INT64_MAX)
            return "element count overflows int64";
    }
    if (ne[0] % blck != 0) return "ne[0] is not a multiple of the type's block size";
    if (!ps_mul_ok(n / (uint64_t)blck, (uint64_t)ps_ggml_block_bytes(type), nbytes) ||
        *nbytes > (uint64_t)INT64_MAX)
        return "byte size overflows int64";
    return NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* Metadata value types                                                                       */
/* ------------------------------------------------------------------------------------------ */

/* Bytes of one scalar value of a fixed-size type; 0 for string/array/unknown. */
static uint64_t value_size(uint32_t type) {
    switch (type) {
    case PS_GGUF_UINT8: case PS_GGUF_INT8: case PS_GGUF_BOOL: return 1;
    case PS_GGUF_UINT16: case PS_GGUF_INT16: return 2;
    case PS_GGUF_UINT32: case PS_GGUF_INT32: case PS_GGUF_FLOAT32: return 4;
    case PS_GGUF_UINT64: case PS_GGUF_INT64: case PS_GGUF_FLOAT64: return 8;
    default: return 0;
    }
}

static const char *type_name(uint32_t type) {
    static const char *names[] = {"uint8", "int8",  "uint16", "int16",  "uint32",
                                  "int32", "float32", "bool", "string", "array",
                                  "uint64", "int64", "float64"};
    return type < PS_ARRAY_LEN(names) ? names[type] : "unknown";
}

static bool is_int_type(uint32_t type) {
    return type <= PS_GGUF_INT32 || type == PS_GGUF_UINT64 || type == PS_GGUF_INT64;
}

static uint32_t rd_u32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

static uint64_t rd_u64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* A key or tensor name printable in a message: at most 80 bytes, non-printables as '?'. */
typedef struct {
    char s[96];
} safe_name;

static safe_name safe(const char *p, uint64_t len) {
    safe_name n;
    size_t k = (size_t)PS_MIN(len, (uint64_t)80);
    for (size_t i = 0; i < k; i++) {
        unsigned char c = (unsigned char)p[i];
        n.s[i] = (c >= 32 && c < 127) ? (char)c : '?';
    }
    if (len > 80) {
        memcpy(n.s + k, "...", 4);
    } else {
        n.s[k] = '\0';
    }
    return n;
}

/* ------------------------------------------------------------------------------------------ */
/* Reader                                                                                     */
/* ------------------------------------------------------------------------------------------ */

typedef struct {
    ps_gguf_str key;
    uint32_t type;
    uint64_t kv_off;   /* first byte of the key (for messages) */
    uint64_t val_off;  /* first byte of the value (after the u32 type) */
    uint64_t val_len;  /* bytes of the value */
    /* arrays only */
    uint32_t elem_type;
    uint64_t n;
    uint64_t elems_off; /* first element */
    uint64_t *str_off;  /* string arrays: offset of each element's u64 length; else NULL */
} gguf_kv;

/* Open-addressing hash table of indices into kv[] or tensors[] (-1 = empty slot). */
typedef struct {
    int64_t *slot;
    uint64_t mask;
} name_hash;

struct ps_gguf {
    /* the bytes */
    const uint8_t *base;
    size_t size;
    bool mapped;
    void *map; /* when mapped: the mapping (base), as munmap takes it */
    char *path;
    /* header facts */
    uint32_t version;
    uint64_t alignment;
    uint64_t data_off; /* start of the data section */
    /* metadata */
    int64_t n_kv;
    gguf_kv *kv;
    name_hash kv_hash;
    /* tensors */
    int64_t n_tensors;
    ps_gguf_tensor *tensors;
    name_hash t_hash;
};

static uint64_t hash_bytes(const char *p, uint64_t n) {
    const uint64_t h = ps_fnv1a64(PS_FNV1A64_INIT, p, (size_t)n);
    return h ^ (h >> 29);
}

static bool hash_init(name_hash *h, int64_t n) {
    uint64_t cap = 16;
    while (cap < (uint64_t)n * 2) cap <<= 1;
    h->slot = ps_malloc(cap * sizeof *h->slot);
    if (!h->slot) return false;
    for (uint64_t i = 0; i < cap; i++) h->slot[i] = -1;
    h->mask = cap - 1;
    return true;
}

/* name_at(i) gives the name of entry i of the table's owner. */
typedef ps_gguf_str (*name_at_fn)(const ps_gguf *g, int64_t i);

static ps_gguf_str kv_name_at(const ps_gguf *g, int64_t i) { return g->kv[i].key; }
static ps_gguf_str t_name_at(const ps_gguf *g, int64_t i) { return g->tensors[i].name; }

/* Index of the entry named (p, n), or -1. With insert >= 0, inserts it when absent and returns
 * -1, or returns the existing index (a duplicate). */
static int64_t hash_find(const ps_gguf *g, const name_hash *h, name_at_fn name_at, const char *p,
                         uint64_t n, int64_t insert) {
    if (!h->slot) return -1;
    uint64_t i = hash_bytes(p, n) & h->mask;
    for (;;) {
        int64_t e = h->slot[i];
        if (e < 0) {
            if (insert >= 0) h->slot[i] = insert;
            return -1;
        }
        ps_gguf_str s = name_at(g, e);
        if (s.len == n && memcmp(s.ptr, p, n) == 0) return e;
        i = (i + 1) & h->mask;
    }
}

typedef struct {
    const uint8_t *p;
    uint64_t size;
    uint64_t pos;
    ps_error *err;
} cursor;

static uint64_t left(const cursor *c) { return c->size - c->pos; }

/* Reads a u32/u64; `what` names the field for the message. */
static ps_status cur_u32(cursor *c, uint32_t *v, const char *what, const char *who) {
    if (left(c) < 4)
        return ps_fail(c->err, PS_ERR_FORMAT, (int64_t)c->pos,
                       "file truncated: %s of %s needs 4 bytes at byte %llu, only %llu left",
                       what, who, (unsigned long long)c->pos, (unsigned long long)left(c));
    *v = rd_u32(c->p + c->pos);
    c->pos += 4;
    return PS_OK;
}

static ps_status cur_u64(cursor *c, uint64_t *v, const char *what, const char *who) {
    if (left(c) < 8)
        return ps_fail(c->err, PS_ERR_FORMAT, (int64_t)c->pos,
                       "file truncated: %s of %s needs 8 bytes at byte %llu, only %llu left",
                       what, who, (unsigned long long)c->pos, (unsigned long long)left(c));
    *v = rd_u64(c->p + c->pos);
    c->pos += 8;
    return PS_OK;
}

/* Reads a string (u64 length + bytes). */
static ps_status cur_str(cursor *c, ps_gguf_str *s, const char *what, const char *who) {
    uint64_t at = c->pos, len = 0;
    ps_status st = cur_u64(c, &len, what, who);
    if (st) return st;
    if (len > left(c))
        return ps_fail(c->err, PS_ERR_FORMAT, (int64_t)at,
                       "%s of %s: string length %llu at byte %llu exceeds the %llu bytes left",
                       what, who, (unsigned long long)len, (unsigned long long)at,
                       (unsigned long long)left(c));
    s->ptr = (const char *)c->p + c->pos;
    s->len = len;
    c->pos += len;
    return PS_OK;
}

/* A key or tensor name: non-empty and without NUL bytes (lookups take C strings). */
static ps_status check_name(cursor *c, ps_gguf_str s, uint64_t at, const char *what) {
    if (s.len == 0)
        return ps_fail(c->err, PS_ERR_FORMAT, (int64_t)at, "%s at byte %llu is empty", what,
                       (unsigned long long)at);
    if (memchr(s.ptr, 0, s.len))
        return ps_fail(c->err, PS_ERR_FORMAT, (int64_t)at,
                       "%s '%s' at byte %llu contains a NUL byte", what, safe(s.ptr, s.len).s,
                       (unsigned long long)at);
    return PS_OK;
}

/* Validates and skips one value of `type`. who names the key. When kv is not NULL and the
 * value is an array, fills the array facts of kv (and the string index: allocation). */
static ps_status skip_value(cursor *c, uint32_t type, int depth, const char *who, gguf_kv *kv) {
    uint64_t at = c->pos;
    uint64_t sz = value_size(type);
    if (sz) {
        if (left(c) < sz)
            return ps_fail(c->err, PS_ERR_FORMAT, (int64_t)at,
                           "file truncated: %s value of %s needs %llu bytes at byte %llu, "
                           "only %llu left",
                           type_name(type), who, (unsigned long long)sz,
                           (unsigned long long)at, (unsigned long long)left(c));
        if (type == PS_GGUF_BOOL && c->p[at] > 1)
            return ps_fail(c->err, PS_ERR_FORMAT, (int64_t)at,
                           "bool value of %s at byte %llu is %u, not 0 or 1", who,
                           (unsigned long long)at, c->p[at]);
        c->pos += sz;
        return PS_OK;
    }
    if (type == PS_GGUF_STRING) {
        ps_gguf_str s;
        return cur_str(c, &s, "string value", who);
    }
    if (type != PS_GGUF_ARRAY)
        return ps_fail(c->err, PS_ERR_FORMAT, (int64_t)at,
                       "%s: value type %u at byte %llu is not a GGUF type (0..12)", who, type,
                       (unsigned long long)at);
    if (depth >= GGUF_MAX_DEPTH)
        return ps_fail(c->err, PS_ERR_FORMAT, (int64_t)at,
                       "%s: arrays nested deeper than %d at byte %llu", who, GGUF_MAX_DEPTH,
                       (unsigned long long)at);
    uint32_t et = 0;
    uint64_t n = 0;
    ps_status st = cur_u32(c, &et, "array element type", who);
    if (st) return st;
    if (et > PS_GGUF_FLOAT64)
        return ps_fail(c->err, PS_ERR_FORMAT, (int64_t)at,
                       "%s: array element type %u at byte %llu is not a GGUF type (0..12)", who,
                       et, (unsigned long long)at);
    if ((st = cur_u64(c, &n, "array count", who))) return st;
    uint64_t min_elem = value_size(et);
    if (et == PS_GGUF_STRING) min_elem = 8;
    if (et == PS_GGUF_ARRAY) min_elem = 12;
    if (n > left(c) / min_elem)
        return ps_fail(c->err, PS_ERR_FORMAT, (int64_t)at + 4,
                       "%s: array of %llu %s elements at byte %llu cannot fit in the %llu "
                       "bytes left",
                       who, (unsigned long long)n, type_name(et), (unsigned long long)at,
                       (unsigned long long)left(c));
    if (kv) {
        kv->elem_type = et;
        kv->n = n;
        kv->elems_off = c->pos;
    }
    if (value_size(et)) {
        if (et == PS_GGUF_BOOL) {
            for (uint64_t i = 0; i < n; i++)
                if (c->p[c->pos + i] > 1)
                    return ps_fail(c->err, PS_ERR_FORMAT, (int64_t)(c->pos + i),
                                   "%s: bool element %llu at byte %llu is %u, not 0 or 1", who,
                                   (unsigned long long)i, (unsigned long long)(c->pos + i),
                                   c->p[c->pos + i]);
        }
        c->pos += n * min_elem;
        return PS_OK;
    }
    if (et == PS_GGUF_STRING && kv) {
        kv->str_off = ps_malloc((size_t)PS_MAX(n, (uint64_t)1) * sizeof(uint64_t));
        if (!kv->str_off)
            return ps_fail(c->err, PS_ERR_NOMEM, -1,
                           "no memory for the index of %s (%llu strings)", who,
                           (unsigned long long)n);
    }
    for (uint64_t i = 0; i < n; i++) {
        if (kv && kv->str_off) kv->str_off[i] = c->pos;
        if ((st = skip_value(c, et, depth + 1, who, NULL))) return st;
    }
    return PS_OK;
}

/* ---- parse(): the file's sections in order, one function per phase ----------------------
 * Each phase fills g and returns a status; what it allocates into g is freed by
 * ps_gguf_close() (open_common calls it on any failure). parse() owns the one other
 * allocation, the byte offset of every tensor info (for messages), and frees it on its single
 * way out. */

/* Magic, version, tensor and key counts (each count checked against the bytes left). */
static ps_status parse_header(ps_gguf *g, cursor *c, uint64_t *n_tensors, uint64_t *n_kv) {
    ps_error *err = c->err;
    ps_status st;
    if (g->size < 4)
        return ps_fail(err, PS_ERR_FORMAT, 0, "file is %zu bytes, too small for a GGUF header",
                       g->size);
    if (memcmp(g->base, "GGUF", 4) != 0)
        return ps_fail(err, PS_ERR_FORMAT, 0,
                       "not a GGUF file: magic is %02x %02x %02x %02x, expected \"GGUF\"",
                       g->base[0], g->base[1], g->base[2], g->base[3]);
    c->pos = 4;
    if ((st = cur_u32(c, &g->version, "version", "the header"))) return st;
    if (g->version != 2 && g->version != 3) {
        uint32_t v = g->version, sw = __builtin_bswap32(v);
        if (sw == 2 || sw == 3)
            return ps_fail(err, PS_ERR_UNSUPPORTED, 4,
                           "big-endian GGUF (version %u byte-swapped) is not supported", sw);
        return ps_fail(err, PS_ERR_UNSUPPORTED, 4,
                       "GGUF version %u is not supported (only versions 2 and 3)", v);
    }
    if ((st = cur_u64(c, n_tensors, "tensor count", "the header"))) return st;
    if ((st = cur_u64(c, n_kv, "key count", "the header"))) return st;
    if (*n_kv > left(c) / GGUF_MIN_KV_BYTES)
        return ps_fail(err, PS_ERR_FORMAT, 16,
                       "header: %llu keys cannot fit in the %llu bytes after the header",
                       (unsigned long long)*n_kv, (unsigned long long)left(c));
    if (*n_tensors > left(c) / GGUF_MIN_TENSOR_BYTES)
        return ps_fail(err, PS_ERR_FORMAT, 8,
                       "header: %llu tensors cannot fit in the %llu bytes after the header",
                       (unsigned long long)*n_tensors, (unsigned long long)left(c));
    return PS_OK;
}

/* Key/value pair i: name (non-empty, no NUL, not a duplicate), type, value (validated and
 * skipped; arrays indexed). */
static ps_status parse_kv(ps_gguf *g, cursor *c, uint64_t i) {
    ps_error *err = c->err;
    ps_status st;
    gguf_kv *kv = &g->kv[i];
    char who[128];
    kv->kv_off = c->pos;
    snprintf(who, sizeof who, "key #%llu", (unsigned long long)i);
    if ((st = cur_str(c, &kv->key, "name", who))) return st;
    if ((st = check_name(c, kv->key, kv->kv_off, "key"))) return st;
    g->n_kv = (int64_t)i + 1; /* from here on close() frees this entry */
    snprintf(who, sizeof who, "key '%s'", safe(kv->key.ptr, kv->key.len).s);
    int64_t dup = hash_find(g, &g->kv_hash, kv_name_at, kv->key.ptr, kv->key.len, (int64_t)i);
    if (dup >= 0)
        return ps_fail(err, PS_ERR_FORMAT, (int64_t)kv->kv_off,
                       "duplicate %s at byte %llu (first at byte %llu)", who,
                       (unsigned long long)kv->kv_off, (unsigned long long)g->kv[dup].kv_off);
    uint64_t tat = c->pos;
    if ((st = cur_u32(c, &kv->type, "value type", who))) return st;
    if (kv->type > PS_GGUF_FLOAT64)
        return ps_fail(err, PS_ERR_FORMAT, (int64_t)tat,
                       "%s: value type %u at byte %llu is not a GGUF type (0..12)", who,
                       kv->type, (unsigned long long)tat);
    kv->val_off = c->pos;
    if ((st = skip_value(c, kv->type, 0, who, kv))) return st;
    kv->val_len = c->pos - kv->val_off;
    return PS_OK;
}

static ps_status parse_kvs(ps_gguf *g, cursor *c, uint64_t n_kv) {
    g->kv = ps_calloc((size_t)PS_MAX(n_kv, (uint64_t)1), sizeof *g->kv);
    if (!g->kv || !hash_init(&g->kv_hash, (int64_t)n_kv))
        return ps_fail(c->err, PS_ERR_NOMEM, -1, "no memory for %llu keys",
                       (unsigned long long)n_kv);
    ps_status st = PS_OK;
    for (uint64_t i = 0; i < n_kv && !st; i++) st = parse_kv(g, c, i);
    return st;
}

/* general.alignment when present (a power of two), else the default. */
static ps_status parse_alignment(ps_gguf *g, ps_error *err) {
    g->alignment = GGUF_DEFAULT_ALIGNMENT;
    if (ps_gguf_find_key(g, "general.alignment") < 0) return PS_OK;
    uint32_t a;
    ps_status st = ps_gguf_get_u32(g, "general.alignment", &a, err);
    if (st) return st;
    if (a == 0 || (a & (a - 1)) != 0)
        return ps_fail(err, PS_ERR_FORMAT,
                       (int64_t)g->kv[ps_gguf_find_key(g, "general.alignment")].val_off,
                       "general.alignment = %u is not a power of two", a);
    g->alignment = a;
    return PS_OK;
}

/* Tensor info i: name (non-empty, no NUL, not a duplicate), dimensions, type and byte size,
 * data offset (aligned). info_off[i] gets the info's byte offset. */
static ps_status parse_tensor_info(ps_gguf *g, cursor *c, uint64_t i, uint64_t *info_off) {
    ps_error *err = c->err;
    ps_status st;
    ps_gguf_tensor *t = &g->tensors[i];
    char who[128];
    uint64_t at = info_off[i] = c->pos;
    snprintf(who, sizeof who, "tensor #%llu", (unsigned long long)i);
    if ((st = cur_str(c, &t->name, "name", who))) return st;
    if ((st = check_name(c, t->name, at, "tensor name"))) return st;
    snprintf(who, sizeof who, "tensor '%s'", safe(t->name.ptr, t->name.len).s);
    int64_t dup = hash_find(g, &g->t_hash, t_name_at, t->name.ptr, t->name.len, (int64_t)i);
    if (dup >= 0)
        return ps_fail(err, PS_ERR_FORMAT, (int64_t)at,
                       "duplicate %s at byte %llu (first at byte %llu)", who,
                       (unsigned long long)at, (unsigned long long)info_off[dup]);
    uint64_t dat = c->pos;
    if ((st = cur_u32(c, &t->n_dims, "n_dims", who))) return st;
    if (t->n_dims < 1 || t->n_dims > 4)
        return ps_fail(err, PS_ERR_FORMAT, (int64_t)dat,
                       "%s has n_dims = %u at byte %llu (must be 1..4)", who, t->n_dims,
                       (unsigned long long)dat);
    for (int d = 0; d < 4; d++) t->ne[d] = 1;
    for (uint32_t d = 0; d < t->n_dims; d++) {
        uint64_t ne = 0, nat = c->pos;
        if ((st = cur_u64(c, &ne, "dimension", who))) return st;
        if (ne > (uint64_t)INT64_MAX)
            return ps_fail(err, PS_ERR_FORMAT, (int64_t)nat,
                           "%s: ne[%u] = %llu at byte %llu is out of range", who, d,
                           (unsigned long long)ne, (unsigned long long)nat);
        t->ne[d] = (int64_t)ne;
    }
    uint64_t tat = c->pos;
    if ((st = cur_u32(c, &t->type, "ggml type", who))) return st;
    const char *why = tensor_nbytes(t->type, t->n_dims, t->ne, &t->nbytes);
    if (why)
        return ps_fail(err, PS_ERR_FORMAT, (int64_t)tat,
                       "%s (ggml type %u %s, shape %lld x %lld x %lld x %lld): %s", who,
                       t->type, ps_ggml_type_name(t->type), (long long)t->ne[0],
                       (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3], why);
    uint64_t oat = c->pos;
    if ((st = cur_u64(c, &t->offset, "data offset", who))) return st;
    if (t->offset % g->alignment != 0)
        st = ps_fail(err, PS_ERR_FORMAT, (int64_t)oat,
                     "%s: data offset %llu is not a multiple of the alignment %llu", who,
                     (unsigned long long)t->offset, (unsigned long long)g->alignment);
    g->n_tensors = (int64_t)i + 1;
    return st;
}

/* The tensor table and its name index, then *info_off (parse() frees it), then every info. */
static ps_status parse_tensor_infos(ps_gguf *g, cursor *c, uint64_t n_tensors,
                                    uint64_t **info_off) {
    g->tensors = ps_calloc((size_t)PS_MAX(n_tensors, (uint64_t)1), sizeof *g->tensors);
    if (!g->tensors || !hash_init(&g->t_hash, (int64_t)n_tensors))
        return ps_fail(c->err, PS_ERR_NOMEM, -1, "no memory for %llu tensors",
                       (unsigned long long)n_tensors);
    *info_off = ps_malloc((size_t)PS_MAX(n_tensors, (uint64_t)1) * sizeof(uint64_t));
    if (!*info_off)
        return ps_fail(c->err, PS_ERR_NOMEM, -1, "no memory for %llu tensors",
                       (unsigned long long)n_tensors);
    ps_status st = PS_OK;
    for (uint64_t i = 0; i < n_tensors && !st; i++) st = parse_tensor_info(g, c, i, *info_off);
    return st;
}

/* The data section starts at the next multiple of the alignment after the infos; every
 * tensor's bytes must lie inside the file. Sets g->data_off and each tensor's data. */
static ps_status place_data(ps_gguf *g, const cursor *c, uint64_t n_tensors,
                            const uint64_t *info_off) {
    ps_error *err = c->err;
    uint64_t a = g->alignment;
    uint64_t data_off = (c->pos + a - 1) / a * a; /* no overflow: pos <= size, a <= 2^31 */
    if (n_tensors == 0) {
        g->data_off = PS_MIN(data_off, (uint64_t)g->size); /* vocab files end without padding */
    } else if (data_off > g->size) {
        return ps_fail(err, PS_ERR_FORMAT, (int64_t)g->size,
                       "file truncated: it ends at byte %zu, before the data section that "
                       "starts at byte %llu",
                       g->size, (unsigned long long)data_off);
    } else {
        g->data_off = data_off;
    }
    uint64_t room = g->size - g->data_off;
    for (int64_t i = 0; i < g->n_tensors; i++) {
        ps_gguf_tensor *t = &g->tensors[i];
        if (t->offset > room || t->nbytes > room - t->offset)
            return ps_fail(
                err, PS_ERR_FORMAT, (int64_t)info_off[i],
                "tensor '%s' (%s): data [%llu, +%llu) lies past the end of the file (%llu data "
                "bytes from byte %llu; truncated?)",
                safe(t->name.ptr, t->name.len).s, ps_ggml_type_name(t->type),
                (unsigned long long)t->offset,
                (unsigned long long)t->nbytes, (unsigned long long)room,
                (unsigned long long)g->data_off);
        t->data = g->base + g->data_off + t->offset;
    }
    return PS_OK;
}

/* order[0..n) = tensor indices by ascending data offset (a stable merge sort, O(n log n)),
 * using tmp[0..n) as scratch. */
static void sort_by_offset(const ps_gguf *g, int64_t *order, int64_t *tmp) {
    const int64_t n = g->n_tensors;
    for (int64_t i = 0; i < n; i++) order[i] = i;
    for (int64_t w = 1; w < n; w *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * w) {
            int64_t mid = PS_MIN(lo + w, n), hi = PS_MIN(lo + 2 * w, n);
            int64_t x = lo, y = mid, k = lo;
            while (x < mid || y < hi) {
                if (y >= hi ||
                    (x < mid && g->tensors[order[x]].offset <= g->tensors[order[y]].offset))
                    tmp[k++] = order[x++];
                else
                    tmp[k++] = order[y++];
            }
        }
        memcpy(order, tmp, (size_t)n * sizeof *order);
    }
}

/* No two tensors share bytes: walk the ranges by offset (sorted first when the file does not
 * list them in order). */
static ps_status check_overlaps(ps_gguf *g, const uint64_t *info_off, ps_error *err) {
    bool sorted = true;
    for (int64_t i = 1; i < g->n_tensors; i++)
        if (g->tensors[i].offset < g->tensors[i - 1].offset) sorted = false;
    int64_t *order = NULL, *tmp = NULL;
    ps_status st = PS_OK;
    if (!sorted) {
        order = ps_malloc((size_t)g->n_tensors * sizeof *order);
        tmp = order ? ps_malloc((size_t)g->n_tensors * sizeof *tmp) : NULL;
        if (!tmp) {
            st = ps_fail(err, PS_ERR_NOMEM, -1, "no memory to check %lld tensor ranges",
                         (long long)g->n_tensors);
            goto done;
        }
        sort_by_offset(g, order, tmp);
    }
    uint64_t end = 0;
    int64_t last = -1;
    for (int64_t k = 0; k < g->n_tensors; k++) {
        int64_t i = order ? order[k] : k;
        const ps_gguf_tensor *t = &g->tensors[i];
        if (t->nbytes == 0) continue;
        if (last >= 0 && t->offset < end) {
            st = ps_fail(err, PS_ERR_FORMAT, (int64_t)info_off[i],
                         "tensor '%s' data [%llu, %llu) overlaps tensor '%s' [%llu, %llu)",
                         safe(t->name.ptr, t->name.len).s, (unsigned long long)t->offset,
                         (unsigned long long)(t->offset + t->nbytes),
                         safe(g->tensors[last].name.ptr, g->tensors[last].name.len).s,
                         (unsigned long long)g->tensors[last].offset,
                         (unsigned long long)end);
            break;
        }
        end = t->offset + t->nbytes;
        last = i;
    }
done:
    ps_free(tmp);
    ps_free(order);
    return st;
}

static ps_status parse(ps_gguf *g, ps_error *err) {
    cursor c = {g->base, g->size, 0, err};
    uint64_t n_tensors = 0, n_kv = 0, *info_off = NULL;
    ps_status st;
    if (!(st = parse_header(g, &c, &n_tensors, &n_kv)) && !(st = parse_kvs(g, &c, n_kv)) &&
        !(st = parse_alignment(g, err)) &&
        !(st = parse_tensor_infos(g, &c, n_tensors, &info_off)) &&
        !(st = place_data(g, &c, n_tensors, info_off)))
        st = check_overlaps(g, info_off, err);
    ps_free(info_off);
    return st;
}

static ps_status open_common(ps_gguf *g, ps_gguf **out, ps_error *err) {
    ps_status st = parse(g, err);
    if (st) {
        ps_gguf_close(g);
        return st;
    }
    *out = g;
    return PS_OK;
}

ps_status ps_gguf_open_memory(const void *data, size_t size, ps_gguf **out, ps_error *err) {
    ps_error_clear(err);
    if (!out || (!data && size)) return ps_fail(err, PS_ERR_INVALID_ARG, -1, "NULL argument");
    *out = NULL;
    ps_gguf *g = ps_calloc(1, sizeof *g);
    if (!g) return ps_fail(err, PS_ERR_NOMEM, -1, "no memory for a GGUF handle");
    static const uint8_t empty[1];
    g->base = data ? data : empty;
    g->size = size;
    return open_common(g, out, err);
}

ps_status ps_gguf_open(const char *path, ps_gguf **out, ps_error *err) {
    ps_error_clear(err);
    if (!path || !out) return ps_fail(err, PS_ERR_INVALID_ARG, -1, "NULL argument");
    *out = NULL;
    /* O_NONBLOCK: opening a FIFO (or a device) must not wait for a writer; what is not a
     * regular file is refused right after, before any read. A regular file ignores it. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        int e = errno;
        return ps_fail(err, PS_ERR_IO, -1, "cannot open %s: %s", path, strerror(e));
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return ps_fail(err, PS_ERR_IO, -1, "cannot stat %s: %s", path, strerror(e));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        const char *kind = S_ISFIFO(sb.st_mode)  ? "a FIFO (named pipe)"
                           : S_ISDIR(sb.st_mode) ? "a directory"
                           : S_ISCHR(sb.st_mode) ? "a character device"
                           : S_ISBLK(sb.st_mode) ? "a block device"
                           : S_ISSOCK(sb.st_mode) ? "a socket"
                                                  : "not a file";
        return ps_fail(err, PS_ERR_IO, -1, "%s is %s, not a regular file: a model must be a GGUF file",
                       path, kind);
    }
    ps_gguf *g = ps_calloc(1, sizeof *g);
    char *p = ps_strdup(path);
    if (!g || !p) {
        close(fd);
        ps_free(g);
        ps_free(p);
        return ps_fail(err, PS_ERR_NOMEM, -1, "no memory for a GGUF handle");
    }
    g->path = p;
    g->size = (size_t)sb.st_size;
    if (g->size == 0) {
        static const uint8_t empty[1];
        g->base = empty;
    } else {
        void *m = mmap(NULL, g->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) {
            int e = errno;
            close(fd);
            ps_gguf_close(g);
            return ps_fail(err, PS_ERR_IO, -1, "cannot map %s (%llu bytes): %s", path,
                           (unsigned long long)sb.st_size, strerror(e));
        }
        g->base = g->map = m;
        g->mapped = true;
    }
    close(fd);
    return open_common(g, out, err);
}

bool ps_gguf_drop_pages_from(const ps_gguf *g, const void *floor, const void *p, size_t n) {
    if (!g || !g->mapped) return false;
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    const uintptr_t lo = (uintptr_t)p, hi = lo + n, base = (uintptr_t)g->base;
    const uintptr_t f = (uintptr_t)floor;
    if (f > lo || lo < base || hi < lo || hi > base + g->size) return false;
    /* the first page wholly at or after floor, or the one holding p if that is later */
    const uintptr_t a = PS_MAX((f + page - 1) & ~(page - 1), lo & ~(page - 1));
    const uintptr_t e = hi & ~(page - 1);
    /* a private read-only mapping never written: the pages come back from the file as they
     * were */
    if (e > a) (void)madvise((void *)a, e - a, MADV_DONTNEED);
    return true;
}

bool ps_gguf_drop_pages(const ps_gguf *g, const void *p, size_t n) {
    return ps_gguf_drop_pages_from(g, p, p, n);
}

void ps_gguf_load_pages(const ps_gguf *g, const void *p, size_t n) {
#ifdef MADV_POPULATE_READ
    if (!g || !g->mapped) return;
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    const uintptr_t lo = (uintptr_t)p, hi = lo + n, base = (uintptr_t)g->base;
    if (lo < base || hi < lo || hi > base + g->size) return;
    const uintptr_t a = lo & ~(page - 1);
    if (hi > a) (void)madvise((void *)a, hi - a, MADV_POPULATE_READ);
#else
    (void)g;
    (void)p;
    (void)n;
#endif
}

void ps_gguf_close(ps_gguf *g) {
    if (!g) return;
    if (g->kv)
        for (int64_t i = 0; i < g->n_kv; i++) ps_free(g->kv[i].str_off);
    ps_free(g->kv);
    ps_free(g->kv_hash.slot);
    ps_free(g->tensors);
    ps_free(g->t_hash.slot);
    if (g->mapped) munmap(g->map, g->size);
    ps_free(g->path);
    ps_free(g);
}

uint32_t ps_gguf_version(const ps_gguf *g) { return g->version; }
size_t ps_gguf_file_size(const ps_gguf *g) { return g->size; }
const char *ps_gguf_path(const ps_gguf *g) { return g->path ? g->path : ""; }
uint64_t ps_gguf_alignment(const ps_gguf *g) { return g->alignment; }
int64_t ps_gguf_n_kv(const ps_gguf *g) { return g->n_kv; }

int64_t ps_gguf_find_key(const ps_gguf *g, const char *key) {
    if (!g || !key) return -1;
    return hash_find(g, &g->kv_hash, kv_name_at, key, strlen(key), -1);
}

ps_gguf_str ps_gguf_key(const ps_gguf *g, int64_t i) {
    if (i < 0 || i >= g->n_kv) return (ps_gguf_str){"", 0};
    return g->kv[i].key;
}

ps_gguf_type ps_gguf_kv_type(const ps_gguf *g, int64_t i) {
    if (i < 0 || i >= g->n_kv) return (ps_gguf_type)-1;
    return (ps_gguf_type)g->kv[i].type;
}

/* The kv named key, or NULL with PS_ERR_NOT_FOUND in err. */
static const gguf_kv *get_kv(const ps_gguf *g, const char *key, ps_error *err) {
    int64_t i = ps_gguf_find_key(g, key);
    if (i < 0) {
        ps_fail(err, PS_ERR_NOT_FOUND, -1, "key '%s' not found", key ? key : "(null)");
        return NULL;
    }
    return &g->kv[i];
}

static ps_status wrong_type(const ps_gguf *g, const gguf_kv *kv, const char *want, ps_error *err) {
    (void)g;
    return ps_fail(err, PS_ERR_FORMAT, (int64_t)kv->kv_off, "key '%s' has type %s, expected %s",
                   safe(kv->key.ptr, kv->key.len).s, type_name(kv->type), want);
}

/* An integer value of `type` stored at p, as a 128-bit integer (0 for other types). */
static __int128 raw_int(uint32_t type, const uint8_t *p) {
    switch (type) {
    case PS_GGUF_UINT8: return p[0];
    case PS_GGUF_INT8: return (int8_t)p[0];
    case PS_GGUF_UINT16: { uint16_t v; memcpy(&v, p, 2); return v; }
    case PS_GGUF_INT16: { int16_t v; memcpy(&v, p, 2); return v; }
    case PS_GGUF_UINT32: return rd_u32(p);
    case PS_GGUF_INT32: return (int32_t)rd_u32(p);
    case PS_GGUF_UINT64: return rd_u64(p);
    case PS_GGUF_INT64: return (int64_t)rd_u64(p);
    default: return 0;
    }
}

static __int128 kv_int(const ps_gguf *g, const gguf_kv *kv) {
    return raw_int(kv->type, g->base + kv->val_off);
}

static ps_status get_int(const ps_gguf *g, const char *key, __int128 lo, __int128 hi,
                         const char *want, __int128 *out, ps_error *err) {
    if (!g) return ps_fail(err, PS_ERR_INVALID_ARG, -1, "NULL GGUF handle");
    const gguf_kv *kv = get_kv(g, key, err);
    if (!kv) return PS_ERR_NOT_FOUND;
    if (!is_int_type(kv->type)) return wrong_type(g, kv, want, err);
    __int128 v = kv_int(g, kv);
    if (v < lo || v > hi) {
        bool neg = v < 0;
        unsigned long long mag = (unsigned long long)(neg ? -v : v);
        return ps_fail(err, PS_ERR_FORMAT, (int64_t)kv->val_off,
                       "key '%s' = %s%llu does not fit in %s", key, neg ? "-" : "", mag, want);
    }
    *out = v;
    return PS_OK;
}

ps_status ps_gguf_get_u32(const ps_gguf *g, const char *key, uint32_t *out, ps_error *err) {
    __int128 v;
    ps_status st = get_int(g, key, 0, UINT32_MAX, "uint32", &v, err);
    if (!st && out) *out = (uint32_t)v;
    return st;
}

ps_status ps_gguf_get_i64(const ps_gguf *g, const char *key, int64_t *out, ps_error *err) {
    __int128 v;
    ps_status st = get_int(g, key, INT64_MIN, INT64_MAX, "int64", &v, err);
    if (!st && out) *out = (int64_t)v;
    return st;
}

ps_status ps_gguf_get_f32(const ps_gguf *g, const char *key, float *out, ps_error *err) {
    if (!g) return ps_fail(err, PS_ERR_INVALID_ARG, -1, "NULL GGUF handle");
    const gguf_kv *kv = get_kv(g, key, err);
    if (!kv) return PS_ERR_NOT_FOUND;
    const uint8_t *p = g->base + kv->val_off;
    float f;
    if (kv->type == PS_GGUF_FLOAT32) {
        memcpy(&f, p, 4);
    } else if (kv->type == PS_GGUF_FLOAT64) {
        double d;
        memcpy(&d, p, 8);
        f = (float)d;
    } else {
        return wrong_type(g, kv, "float32 or float64", err);
    }
    if (out) *out = f;
    return PS_OK;
}

ps_status ps_gguf_get_bool(const ps_gguf *g, const char *key, bool *out, ps_error *err) {
    if (!g) return ps_fail(err, PS_ERR_INVALID_ARG, -1, "NULL GGUF handle");
    const gguf_kv *kv = get_kv(g, key, err);
    if (!kv) return PS_ERR_NOT_FOUND;
    if (kv->type != PS_GGUF_BOOL) return wrong_type(g, kv, "bool", err);
    if (out) *out = g->base[kv->val_off] != 0;
    return PS_OK;
}

ps_status ps_gguf_get_str(const ps_gguf *g, const char *key, ps_gguf_str *out, ps_error *err) {
    if (!g) return ps_fail(err, PS_ERR_INVALID_ARG, -1, "NULL GGUF handle");
    const gguf_kv *kv = get_kv(g, key, err);
    if (!kv) return PS_ERR_NOT_FOUND;
    if (kv->type != PS_GGUF_STRING) return wrong_type(g, kv, "string", err);
    if (out) {
        out->len = rd_u64(g->base + kv->val_off);
        out->ptr = (const char *)g->base + kv->val_off + 8;
    }
    return PS_OK;
}

ps_status ps_gguf_get_arr(const ps_gguf *g, const char *key, ps_gguf_type *elem_type,
                          uint64_t *n, const void **data, ps_error *err) {
    if (!g) return ps_fail(err, PS_ERR_INVALID_ARG, -1, "NULL GGUF handle");
    const gguf_kv *kv = get_kv(g, key, err);
    if (!kv) return PS_ERR_NOT_FOUND;
    if (kv->type != PS_GGUF_ARRAY) return wrong_type(g, kv, "array", err);
    if (elem_type) *elem_type = (ps_gguf_type)kv->elem_type;
    if (n) *n = kv->n;
    if (data) *data = value_size(kv->elem_type) ? g->base + kv->elems_off : NULL;
    return PS_OK;
}

ps_status ps_gguf_arr_str(const ps_gguf *g, const char *key, uint64_t index, ps_gguf_str *out,
                          ps_error *err) {
    if (!g) return ps_fail(err, PS_ERR_INVALID_ARG, -1, "NULL GGUF handle");
    const gguf_kv *kv = get_kv(g, key, err);
    if (!kv) return PS_ERR_NOT_FOUND;
    if (kv->type != PS_GGUF_ARRAY || kv->elem_type != PS_GGUF_STRING)
        return ps_fail(err, PS_ERR_FORMAT, (int64_t)kv->kv_off,
                       "key '%s' is %s%s%s, expected an array of strings", key,
                       type_name(kv->type), kv->type == PS_GGUF_ARRAY ? " of " : "",
                       kv->type == PS_GGUF_ARRAY ? type_name(kv->elem_type) : "");
    if (index >= kv->n)
        return ps_fail(err, PS_ERR_INVALID_ARG, -1, "index %llu is past the %llu strings of '%s'",
                       (unsigned long long)index, (unsigned long long)kv->n, key);
    if (out) {
        uint64_t at = kv->str_off[index];
        out->len = rd_u64(g->base + at);
        out->ptr = (const char *)g->base + at + 8;
    }
    return PS_OK;
}

int64_t ps_gguf_n_tensors(const ps_gguf *g) { return g->n_tensors; }

const ps_gguf_tensor *ps_gguf_tensor_at(const ps_gguf *g, int64_t i) {
    if (i < 0 || i >= g->n_tensors) return NULL;
    return &g->tensors[i];
}

const ps_gguf_tensor *ps_gguf_find_tensor(const ps_gguf *g, const char *name) {
    if (!g || !name) return NULL;
    int64_t i = hash_find(g, &g->t_hash, t_name_at, name, strlen(name), -1);
    return i < 0 ? NULL : &g->tensors[i];
}

/* ------------------------------------------------------------------------------------------ */
/* Writer                                                                                     */
/* ------------------------------------------------------------------------------------------ */

typedef struct {
    char *key;
    size_t key_len;
    uint8_t *val; /* u32 type + value bytes, as in the file */
    uint64_t len;
} wkv;

typedef struct {
    char *name;
    uint32_t type, n_dims;
    int64_t ne[4];
    uint8_t *data;
    uint64_t nbytes;
} wtensor;

struct ps_gguf_writer {
    wkv *kv;
    size_t n_kv, cap_kv;
    wtensor *t;
    size_t n_t, cap_t;
    ps_status status; /* first failure of a setter */
    char msg[200];
};

ps_gguf_writer *ps_gguf_writer_new(void) { return ps_calloc(1, sizeof(ps_gguf_writer)); }

void ps_gguf_writer_free(ps_gguf_writer *w) {
    if (!w) return;
    for (size_t i = 0; i < w->n_kv; i++) {
        ps_free(w->kv[i].key);
        ps_free(w->kv[i].val);
    }
    for (size_t i = 0; i < w->n_t; i++) {
        ps_free(w->t[i].name);
        ps_free(w->t[i].data);
    }
    ps_free(w->kv);
    ps_free(w->t);
    ps_free(w);
}

/* Remembers the first failure and returns code. */
static ps_status w_fail(ps_gguf_writer *w, ps_status code, const char *fmt, ...) PS_PRINTF(3, 4);
static ps_status w_fail(ps_gguf_writer *w, ps_status code, const char *fmt, ...) {
    if (w && w->status == PS_OK) {
        w->status = code;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(w->msg, sizeof w->msg, fmt, ap);
        va_end(ap);
    }
    return code;
}

/* Stores the serialised value `val` (type + bytes, owned: freed on failure) under key
 * (key_len bytes). A key set twice keeps its first position and the last value. */
static ps_status w_put(ps_gguf_writer *w, const char *key, size_t key_len, uint8_t *val,
                       uint64_t len) {
    if (!val) return w_fail(w, PS_ERR_NOMEM, "no memory for the value of key '%.*s'",
                            (int)PS_MIN(key_len, (size_t)80), key);
    for (size_t i = 0; i < w->n_kv; i++) {
        if (w->kv[i].key_len == key_len && memcmp(w->kv[i].key, key, key_len) == 0) {
            ps_free(w->kv[i].val);
            w->kv[i].val = val;
            w->kv[i].len = len;
            return PS_OK;
        }
    }
    if (w->n_kv == w->cap_kv) {
        size_t cap = w->cap_kv ? w->cap_kv * 2 : 16;
        wkv *nk = ps_realloc(w->kv, cap * sizeof *nk);
        if (!nk) {
            ps_free(val);
            return w_fail(w, PS_ERR_NOMEM, "no memory for %zu keys", cap);
        }
        w->kv = nk;
        w->cap_kv = cap;
    }
    char *k = ps_strndup(key, key_len);
    if (!k) {
        ps_free(val);
        return w_fail(w, PS_ERR_NOMEM, "no memory for key '%.*s'",
                      (int)PS_MIN(key_len, (size_t)80), key);
    }
    w->kv[w->n_kv++] = (wkv){k, key_len, val, len};
    return PS_OK;
}

/* A new value buffer: u32 type then n bytes copied from data (data may be NULL: zeroed). */
static uint8_t *w_val(uint32_t type, const void *data, uint64_t n) {
    if (n > SIZE_MAX - 4) return NULL;
    uint8_t *v = ps_malloc((size_t)n + 4);
    if (!v) return NULL;
    memcpy(v, &type, 4);
    if (data && n) memcpy(v + 4, data, (size_t)n);
    return v;
}

static ps_status w_check(ps_gguf_writer *w, const char *key) {
    if (!w) return PS_ERR_INVALID_ARG;
    if (!key || !*key) return w_fail(w, PS_ERR_INVALID_ARG, "empty or NULL key");
    return PS_OK;
}

static ps_status w_scalar(ps_gguf_writer *w, const char *key, uint32_t type, const void *v) {
    ps_status st = w_check(w, key);
    if (st) return st;
    uint64_t n = value_size(type);
    return w_put(w, key, strlen(key), w_val(type, v, n), n + 4);
}

ps_status ps_gguf_set_u32(ps_gguf_writer *w, const char *key, uint32_t v) {
    return w_scalar(w, key, PS_GGUF_UINT32, &v);
}
ps_status ps_gguf_set_i32(ps_gguf_writer *w, const char *key, int32_t v) {
    return w_scalar(w, key, PS_GGUF_INT32, &v);
}
ps_status ps_gguf_set_u64(ps_gguf_writer *w, const char *key, uint64_t v) {
    return w_scalar(w, key, PS_GGUF_UINT64, &v);
}
ps_status ps_gguf_set_f32(ps_gguf_writer *w, const char *key, float v) {
    return w_scalar(w, key, PS_GGUF_FLOAT32, &v);
}
ps_status ps_gguf_set_bool(ps_gguf_writer *w, const char *key, bool v) {
    uint8_t b = v ? 1 : 0;
    return w_scalar(w, key, PS_GGUF_BOOL, &b);
}

ps_status ps_gguf_set_str(ps_gguf_writer *w, const char *key, const char *v) {
    ps_status st = w_check(w, key);
    if (st) return st;
    if (!v) return w_fail(w, PS_ERR_INVALID_ARG, "NULL string value for key '%s'", key);
    uint64_t n = strlen(v);
    uint8_t *val = w_val(PS_GGUF_STRING, NULL, 8 + n);
    if (val) {
        memcpy(val + 4, &n, 8);
        memcpy(val + 12, v, (size_t)n);
    }
    return w_put(w, key, strlen(key), val, 12 + n);
}

ps_status ps_gguf_set_arr(ps_gguf_writer *w, const char *key, ps_gguf_type elem_type,
                          const void *data, uint64_t n) {
    ps_status st = w_check(w, key);
    if (st) return st;
    uint64_t es = value_size((uint32_t)elem_type), bytes;
    if (!es)
        return w_fail(w, PS_ERR_INVALID_ARG,
                      "key '%s': ps_gguf_set_arr takes numeric elements, not %s", key,
                      type_name((uint32_t)elem_type));
    if (!ps_mul_ok(n, es, &bytes) || bytes > SIZE_MAX / 2 || (!data && n))
        return w_fail(w, PS_ERR_INVALID_ARG, "key '%s': bad array of %llu %s", key,
                      (unsigned long long)n, type_name((uint32_t)elem_type));
    uint8_t *val = w_val(PS_GGUF_ARRAY, NULL, 12 + bytes);
    if (val) {
        uint32_t et = (uint32_t)elem_type;
        memcpy(val + 4, &et, 4);
        memcpy(val + 8, &n, 8);
        if (bytes) memcpy(val + 16, data, (size_t)bytes);
    }
    return w_put(w, key, strlen(key), val, 16 + bytes);
}

ps_status ps_gguf_set_arr_str(ps_gguf_writer *w, const char *key, const char *const *strs,
                              const uint64_t *lens, uint64_t n) {
    ps_status st = w_check(w, key);
    if (st) return st;
    if (!strs && n) return w_fail(w, PS_ERR_INVALID_ARG, "key '%s': NULL string array", key);
    uint64_t total = 16;
    for (uint64_t i = 0; i < n; i++) {
        if (!strs[i])
            return w_fail(w, PS_ERR_INVALID_ARG, "key '%s': string %llu is NULL", key,
                          (unsigned long long)i);
        uint64_t l = lens ? lens[i] : strlen(strs[i]);
        if (l > SIZE_MAX / 4 || total > SIZE_MAX / 4)
            return w_fail(w, PS_ERR_INVALID_ARG, "key '%s': strings too long", key);
        total += 8 + l;
    }
    uint8_t *val = w_val(PS_GGUF_ARRAY, NULL, total - 4);
    if (val) {
        uint32_t et = PS_GGUF_STRING;
        memcpy(val + 4, &et, 4);
        memcpy(val + 8, &n, 8);
        uint8_t *p = val + 16;
        for (uint64_t i = 0; i < n; i++) {
            uint64_t l = lens ? lens[i] : strlen(strs[i]);
            memcpy(p, &l, 8);
            if (l) memcpy(p + 8, strs[i], (size_t)l);
            p += 8 + l;
        }
    }
    return w_put(w, key, strlen(key), val, total);
}

ps_status ps_gguf_set_raw(ps_gguf_writer *w, const char *key, ps_gguf_type type,
                          const void *bytes, size_t len) {
    ps_status st = w_check(w, key);
    if (st) return st;
    if (!bytes && len) return w_fail(w, PS_ERR_INVALID_ARG, "key '%s': NULL value", key);
    ps_error e;
    cursor c = {bytes, len, 0, &e};
    if ((uint32_t)type > PS_GGUF_FLOAT64 ||
        skip_value(&c, (uint32_t)type, 0, "the value", NULL) != PS_OK || c.pos != len)
        return w_fail(w, PS_ERR_INVALID_ARG, "key '%s': %zu bytes are not one %s value", key,
                      len, type_name((uint32_t)type));
    return w_put(w, key, strlen(key), w_val((uint32_t)type, bytes, len), 4 + (uint64_t)len);
}

ps_status ps_gguf_copy_kv(ps_gguf_writer *w, const ps_gguf *g, const char *prefix_filter) {
    if (!w) return PS_ERR_INVALID_ARG;
    if (!g) return w_fail(w, PS_ERR_INVALID_ARG, "ps_gguf_copy_kv: NULL GGUF");
    size_t pl = prefix_filter ? strlen(prefix_filter) : 0;
    for (int64_t i = 0; i < g->n_kv; i++) {
        const gguf_kv *kv = &g->kv[i];
        if (pl && (kv->key.len < pl || memcmp(kv->key.ptr, prefix_filter, pl) != 0)) continue;
        const uint8_t *src = g->base + kv->val_off - 4; /* type + value */
        uint8_t *val = ps_malloc((size_t)kv->val_len + 4);
        if (val) memcpy(val, src, (size_t)kv->val_len + 4);
        ps_status st = w_put(w, kv->key.ptr, (size_t)kv->key.len, val, kv->val_len + 4);
        if (st) return st;
    }
    return PS_OK;
}

ps_status ps_gguf_add_tensor(ps_gguf_writer *w, const char *name, uint32_t type,
                             uint32_t n_dims, const int64_t *ne, const void *data,
                             uint64_t nbytes) {
    if (!w) return PS_ERR_INVALID_ARG;
    if (!name || !*name) return w_fail(w, PS_ERR_INVALID_ARG, "empty or NULL tensor name");
    if (!ne || n_dims < 1 || n_dims > 4)
        return w_fail(w, PS_ERR_INVALID_ARG, "tensor '%s': n_dims %u outside 1..4", name,
                      n_dims);
    uint64_t want;
    const char *why = tensor_nbytes(type, n_dims, ne, &want);
    if (why) return w_fail(w, PS_ERR_INVALID_ARG, "tensor '%s' (type %u): %s", name, type, why);
    if (want != nbytes || (!data && nbytes) || nbytes > SIZE_MAX / 2)
        return w_fail(w, PS_ERR_INVALID_ARG,
                      "tensor '%s': %llu bytes given, a %s tensor of that shape has %llu", name,
                      (unsigned long long)nbytes, ps_ggml_type_name(type),
                      (unsigned long long)want);
    for (size_t i = 0; i < w->n_t; i++)
        if (strcmp(w->t[i].name, name) == 0)
            return w_fail(w, PS_ERR_INVALID_ARG, "duplicate tensor '%s'", name);
    if (w->n_t == w->cap_t) {
        size_t cap = w->cap_t ? w->cap_t * 2 : 16;
        wtensor *nt = ps_realloc(w->t, cap * sizeof *nt);
        if (!nt) return w_fail(w, PS_ERR_NOMEM, "no memory for %zu tensors", cap);
        w->t = nt;
        w->cap_t = cap;
    }
    wtensor t = {0};
    t.name = ps_strdup(name);
    t.data = ps_malloc((size_t)nbytes);
    if (!t.name || !t.data) {
        ps_free(t.name);
        ps_free(t.data);
        return w_fail(w, PS_ERR_NOMEM, "no memory for tensor '%s' (%llu bytes)", name,
                      (unsigned long long)nbytes);
    }
    if (nbytes) memcpy(t.data, data, (size_t)nbytes);
    t.type = type;
    t.n_dims = n_dims;
    for (int d = 0; d < 4; d++) t.ne[d] = d < (int)n_dims ? ne[d] : 1;
    t.nbytes = nbytes;
    w->t[w->n_t++] = t;
    return PS_OK;
}

/* The layout of the output: alignment, metadata bytes, data section start, total size. */
typedef struct {
    uint64_t align, meta, data_off, total;
} w_layout;

static ps_status w_plan(ps_gguf_writer *w, w_layout *L, ps_error *err) {
    if (!w) return ps_fail(err, PS_ERR_INVALID_ARG, -1, "NULL writer");
    if (w->status) return ps_fail(err, w->status, -1, "%s", w->msg);
    L->align = GGUF_DEFAULT_ALIGNMENT;
    for (size_t i = 0; i < w->n_kv; i++) {
        if (strcmp(w->kv[i].key, "general.alignment") != 0) continue;
        /* any integer type, as the reader accepts (a copied key keeps its type) */
        uint32_t type = rd_u32(w->kv[i].val);
        __int128 a = is_int_type(type) ? raw_int(type, w->kv[i].val + 4) : 0;
        if (a <= 0 || a > UINT32_MAX || (a & (a - 1)) != 0)
            return ps_fail(err, PS_ERR_INVALID_ARG, -1,
                           "general.alignment must be a power of two that fits in uint32");
        L->align = (uint64_t)a;
    }
    uint64_t m = 4 + 4 + 8 + 8;
    for (size_t i = 0; i < w->n_kv; i++) m += 8 + strlen(w->kv[i].key) + w->kv[i].len;
    for (size_t i = 0; i < w->n_t; i++) m += 8 + strlen(w->t[i].name) + 4 + 8 * w->t[i].n_dims + 4 + 8;
    L->meta = m;
    L->data_off = w->n_t ? (m + L->align - 1) / L->align * L->align : m;
    uint64_t d = 0;
    for (size_t i = 0; i < w->n_t; i++) d += (w->t[i].nbytes + L->align - 1) / L->align * L->align;
    L->total = L->data_off + d;
    if (L->total > SIZE_MAX / 2)
        return ps_fail(err, PS_ERR_INVALID_ARG, -1, "GGUF of %llu bytes is too large",
                       (unsigned long long)L->total);
    return PS_OK;
}

/* Writes the metadata (header, keys, tensor infos, zero padding) into buf[0, L->data_off). */
static void w_meta(const ps_gguf_writer *w, const w_layout *L, uint8_t *buf) {
    uint8_t *p = buf;
#define PUT(src, n) do { memcpy(p, (src), (n)); p += (n); } while (0)
    uint32_t version = 3;
    uint64_t nt = w->n_t, nk = w->n_kv;
    PUT("GGUF", 4);
    PUT(&version, 4);
    PUT(&nt, 8);
    PUT(&nk, 8);
    for (size_t i = 0; i < w->n_kv; i++) {
        uint64_t kl = strlen(w->kv[i].key);
        PUT(&kl, 8);
        PUT(w->kv[i].key, kl);
        PUT(w->kv[i].val, w->kv[i].len);
    }
    uint64_t off = 0;
    for (size_t i = 0; i < w->n_t; i++) {
        const wtensor *t = &w->t[i];
        uint64_t nl = strlen(t->name);
        PUT(&nl, 8);
        PUT(t->name, nl);
        PUT(&t->n_dims, 4);
        for (uint32_t d = 0; d < t->n_dims; d++) PUT(&t->ne[d], 8);
        PUT(&t->type, 4);
        PUT(&off, 8);
        off += (t->nbytes + L->align - 1) / L->align * L->align;
    }
#undef PUT
    assert((uint64_t)(p - buf) == L->meta);
    memset(p, 0, L->data_off - L->meta);
}

ps_status ps_gguf_write_memory(ps_gguf_writer *w, void **data, size_t *size, ps_error *err) {
    ps_error_clear(err);
    if (!data || !size) return ps_fail(err, PS_ERR_INVALID_ARG, -1, "NULL argument");
    *data = NULL;
    *size = 0;
    w_layout L;
    ps_status st = w_plan(w, &L, err);
    if (st) return st;
    uint8_t *buf = ps_malloc((size_t)L.total);
    if (!buf)
        return ps_fail(err, PS_ERR_NOMEM, -1, "no memory for a GGUF of %llu bytes",
                       (unsigned long long)L.total);
    w_meta(w, &L, buf);
    uint64_t off = L.data_off;
    for (size_t i = 0; i < w->n_t; i++) {
        uint64_t padded = (w->t[i].nbytes + L.align - 1) / L.align * L.align;
        if (w->t[i].nbytes) memcpy(buf + off, w->t[i].data, (size_t)w->t[i].nbytes);
        memset(buf + off + w->t[i].nbytes, 0, (size_t)(padded - w->t[i].nbytes));
        off += padded;
    }
    *data = buf;
    *size = (size_t)L.total;
    return PS_OK;
}

ps_status ps_gguf_write_file(ps_gguf_writer *w, const char *path, ps_error *err) {
    ps_error_clear(err);
    if (!path) return ps_fail(err, PS_ERR_INVALID_ARG, -1, "NULL path");
    w_layout L;
    ps_status st = w_plan(w, &L, err);
    if (st) return st;
    uint8_t *meta = ps_malloc((size_t)L.data_off);
    if (!meta)
        return ps_fail(err, PS_ERR_NOMEM, -1, "no memory for %llu bytes of GGUF metadata",
                       (unsigned long long)L.data_off);
    w_meta(w, &L, meta);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        int e = errno;
        ps_free(meta);
        return ps_fail(err, PS_ERR_IO, -1, "cannot create %s: %s", path, strerror(e));
    }
    static const uint8_t zeros[256];
    bool ok = ps_write_all(fd, meta, (size_t)L.data_off);
    for (size_t i = 0; ok && i < w->n_t; i++) {
        uint64_t pad = (L.align - w->t[i].nbytes % L.align) % L.align;
        ok = ps_write_all(fd, w->t[i].data, (size_t)w->t[i].nbytes);
        while (ok && pad) {
            uint64_t k = PS_MIN(pad, (uint64_t)sizeof zeros);
            ok = ps_write_all(fd, zeros, (size_t)k);
            pad -= k;
        }
    }
    int e = errno;
    ps_free(meta);
    if (close(fd) != 0 && ok) {
        ok = false;
        e = errno;
    }
    if (!ok) {
        unlink(path);
        return ps_fail(err, PS_ERR_IO, -1, "cannot write %s: %s", path, strerror(e));
    }
    return PS_OK;
}
