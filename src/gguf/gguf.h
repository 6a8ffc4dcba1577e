/*
 * gguf.h — GGUF (v2, v3) reader and writer. No model meaning lives here: keys, arrays and
 * tensors only. The reader memory-maps the file (or wraps a caller's buffer) and checks every
 * offset, size, count and string length against the file before use; all pointers it hands out
 * point into the mapping and live as long as the ps_gguf.
 */
#ifndef PS_GGUF_H
#define PS_GGUF_H

#include "base/impl.h"
#include "base/ggml_type.h" /* the tensor types (PS_GGML_*) and their block geometry */

/* Metadata value types, numbered as in the GGUF specification. */
typedef enum {
    PS_GGUF_UINT8 = 0,
    PS_GGUF_INT8 = 1,
    PS_GGUF_UINT16 = 2,
    PS_GGUF_INT16 = 3,
    PS_GGUF_UINT32 = 4,
    PS_GGUF_INT32 = 5,
    PS_GGUF_FLOAT32 = 6,
    PS_GGUF_BOOL = 7,
    PS_GGUF_STRING = 8,
    PS_GGUF_ARRAY = 9,
    PS_GGUF_UINT64 = 10,
    PS_GGUF_INT64 = 11,
    PS_GGUF_FLOAT64 = 12
} ps_gguf_type;

/* A string inside the file: NOT NUL-terminated. */
typedef struct {
    const char *ptr;
    uint64_t len;
} ps_gguf_str;

typedef struct {
    ps_gguf_str name;
    uint32_t n_dims;       /* 1..4 */
    int64_t ne[4];         /* ne[0] is the contiguous (fastest) dimension; unused dims are 1 */
    uint32_t type;         /* ps_ggml_type */
    uint64_t offset;       /* relative to the start of the data section */
    const void *data;      /* into the mapping */
    uint64_t nbytes;
} ps_gguf_tensor;

typedef struct ps_gguf ps_gguf;

/* Opens and validates a file. Returns PS_OK, PS_ERR_IO, PS_ERR_FORMAT (err names the key or
 * tensor and the byte offset), PS_ERR_UNSUPPORTED (version), PS_ERR_NOMEM.
 * What "valid" means beyond the layout: keys and tensor names are non-empty, contain no NUL
 * byte and are unique; bools are 0 or 1; arrays nest at most 8 deep; general.alignment (any
 * integer type) is a power of two that fits in uint32; tensor offsets are multiples of it,
 * tensor data lies inside the file and no two tensors share a byte. A file without tensors may
 * end right after its metadata (vocabulary files do). Tensor data pointers are aligned to the
 * alignment when the mapping (or the caller's buffer) is; mmap gives page alignment. */
ps_status ps_gguf_open(const char *path, ps_gguf **out, ps_error *err);
/* Same over a caller's buffer, which must outlive the ps_gguf (not copied). */
ps_status ps_gguf_open_memory(const void *data, size_t size, ps_gguf **out, ps_error *err);
void ps_gguf_close(ps_gguf *g);
/* Gives back the memory of the mapped file's pages that lie wholly inside [p, p + n) (a range
 * of its tensor data that a copy has replaced): they leave the process's resident set, and
 * are read again from the file if touched. Returns false, doing nothing, for a caller's buffer
 * or a range outside the file. */
bool ps_gguf_drop_pages(const ps_gguf *g, const void *p, size_t n);
/* The same for a range [p, p + n) that continues one already copied from `floor` on (a slice of
 * a tensor starting at floor): the page holding p is given back too, unless it starts before
 * floor (where another tensor may lie). ps_gguf_drop_pages(g, p, n) is the case floor = p. */
bool ps_gguf_drop_pages_from(const ps_gguf *g, const void *floor, const void *p, size_t n);
/* Maps in, in one call, the mapped file's pages under [p, p + n) that a copy is about to read
 * (one fault per page costs more on some machines than the copy). Nothing for a caller's
 * buffer, or where the kernel cannot. */
void ps_gguf_load_pages(const ps_gguf *g, const void *p, size_t n);

uint32_t ps_gguf_version(const ps_gguf *g);
size_t ps_gguf_file_size(const ps_gguf *g);
const char *ps_gguf_path(const ps_gguf *g); /* "" for memory */
uint64_t ps_gguf_alignment(const ps_gguf *g);

/* Metadata by index or key. */
int64_t ps_gguf_n_kv(const ps_gguf *g);
int64_t ps_gguf_find_key(const ps_gguf *g, const char *key); /* -1 when absent */
ps_gguf_str ps_gguf_key(const ps_gguf *g, int64_t i);       /* {"", 0} out of range */
ps_gguf_type ps_gguf_kv_type(const ps_gguf *g, int64_t i);  /* (ps_gguf_type)-1 out of range */

/* Typed getters by key. Integer getters accept any integer type whose value fits (and bool for
 * the bool getter); float getters accept f32/f64. Return PS_OK, PS_ERR_NOT_FOUND (absent key),
 * PS_ERR_FORMAT (wrong type or value out of range; err names the key). */
ps_status ps_gguf_get_u32(const ps_gguf *g, const char *key, uint32_t *out, ps_error *err);
ps_status ps_gguf_get_i64(const ps_gguf *g, const char *key, int64_t *out, ps_error *err);
ps_status ps_gguf_get_f32(const ps_gguf *g, const char *key, float *out, ps_error *err);
ps_status ps_gguf_get_bool(const ps_gguf *g, const char *key, bool *out, ps_error *err);
ps_status ps_gguf_get_str(const ps_gguf *g, const char *key, ps_gguf_str *out, ps_error *err);

/* Arrays. ps_gguf_get_arr returns the element type and count of an array key; for numeric
 * element types *data points at the packed little-endian elements in the file. For string
 * arrays use ps_gguf_arr_str (O(1): the reader indexes string arrays when it opens the file).
 * Nested arrays (arrays of arrays) are validated and skipped; their data is NULL. */
ps_status ps_gguf_get_arr(const ps_gguf *g, const char *key, ps_gguf_type *elem_type,
                          uint64_t *n, const void **data, ps_error *err);
ps_status ps_gguf_arr_str(const ps_gguf *g, const char *key, uint64_t index, ps_gguf_str *out,
                          ps_error *err); /* index >= n: PS_ERR_INVALID_ARG */

/* Tensors. */
int64_t ps_gguf_n_tensors(const ps_gguf *g);
const ps_gguf_tensor *ps_gguf_tensor_at(const ps_gguf *g, int64_t i);
const ps_gguf_tensor *ps_gguf_find_tensor(const ps_gguf *g, const char *name); /* NULL if absent */

/* ---- writer ---- */
typedef struct ps_gguf_writer ps_gguf_writer;

ps_gguf_writer *ps_gguf_writer_new(void); /* NULL on no memory */
void ps_gguf_writer_free(ps_gguf_writer *w);
/* Setters copy their inputs. A key set twice keeps the last value. Return PS_OK or
 * PS_ERR_NOMEM (the writer remembers a failure and write then fails too). */
ps_status ps_gguf_set_u32(ps_gguf_writer *w, const char *key, uint32_t v);
ps_status ps_gguf_set_i32(ps_gguf_writer *w, const char *key, int32_t v);
ps_status ps_gguf_set_u64(ps_gguf_writer *w, const char *key, uint64_t v);
ps_status ps_gguf_set_f32(ps_gguf_writer *w, const char *key, float v);
ps_status ps_gguf_set_bool(ps_gguf_writer *w, const char *key, bool v);
ps_status ps_gguf_set_str(ps_gguf_writer *w, const char *key, const char *v);
/* Numeric array of n elements of elem_type (packed little-endian). */
ps_status ps_gguf_set_arr(ps_gguf_writer *w, const char *key, ps_gguf_type elem_type,
                          const void *data, uint64_t n);
/* String array; lens may be NULL (then strings are NUL-terminated). */
ps_status ps_gguf_set_arr_str(ps_gguf_writer *w, const char *key, const char *const *strs,
                              const uint64_t *lens, uint64_t n);
/* Any value given as its file bytes (what follows the u32 type in a GGUF: e.g. for an array,
 * u32 element type + u64 count + elements; nested arrays allowed). The bytes are validated
 * like the reader does; PS_ERR_INVALID_ARG when they are not exactly one value of `type`. */
ps_status ps_gguf_set_raw(ps_gguf_writer *w, const char *key, ps_gguf_type type,
                          const void *bytes, size_t len);
/* Copies every key of g (e.g. a vocabulary) into the writer; prefix_filter (e.g.
 * "tokenizer.") keeps only keys that start with it, NULL keeps all. */
ps_status ps_gguf_copy_kv(ps_gguf_writer *w, const ps_gguf *g, const char *prefix_filter);
/* A tensor; data (nbytes, which must match type and shape) is copied. PS_ERR_INVALID_ARG
 * (remembered too) for an unknown type, a bad shape, a size mismatch or a duplicate name. */
ps_status ps_gguf_add_tensor(ps_gguf_writer *w, const char *name, uint32_t type,
                             uint32_t n_dims, const int64_t *ne, const void *data,
                             uint64_t nbytes);
/* Serialises as GGUF v3: header, keys in the order first set, tensor infos, zero padding to
 * the alignment, then each tensor's data padded to the alignment (the last one too). The
 * alignment is the writer's general.alignment key when set (a power of two), else 32 (the
 * GGUF default; no key is added). Memory output is ps_malloc'ed: free with ps_free. A file
 * that cannot be written completely is removed. */
ps_status ps_gguf_write_file(ps_gguf_writer *w, const char *path, ps_error *err);
ps_status ps_gguf_write_memory(ps_gguf_writer *w, void **data, size_t *size, ps_error *err);

#endif /* PS_GGUF_H */
