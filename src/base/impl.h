/*
 * impl.h — what every source file of the library shares and the public header does not show:
 * error reporting into ps_error, the allocation hook that all allocations go through (so that
 * fault injection can fail any of them), half-precision conversions and small limits.
 */
#ifndef PS_IMPL_H
#define PS_IMPL_H

#include "promptscore.h"

#include <assert.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define PS_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define PS_MIN(a, b) ((a) < (b) ? (a) : (b))
#define PS_MAX(a, b) ((a) > (b) ? (a) : (b))

#if defined(__GNUC__)
#define PS_PRINTF(f, a) __attribute__((format(printf, f, a)))
#define PS_UNUSED __attribute__((unused))
#else
#define PS_PRINTF(f, a)
#define PS_UNUSED
#endif

/* CPU features beyond the ISA levels (isa.c): AVX-512 BF16 (vdpbf16ps) and VNNI (vpdpbusd).
 * False unless the AVX-512 level is usable. Reported by `promptscore bench`; the kernels keep
 * exact float32 arithmetic and do not use them (see kernels/matmul_float.c). */
bool ps_cpu_has_avx512bf16(void);
bool ps_cpu_has_avx512vnni(void);
/* AMX-TILE + AMX-BF16 + AMX-INT8 usable: cpuid, XCR0 and the OS's tile-data permission (asked
 * once per process, thread-safe). ps_amx_status(): why not, or the features in use. */
bool ps_cpu_has_amx(void);
const char *ps_amx_status(void);
/* What PS_ISA says about AMX: 0 = off (scalar, avx2, avx512), 2 = required (amx), 1 = use it
 * where usable (unset or anything else, which ps_isa_best ignores too). */
int ps_isa_env_amx(void);

/* The thread pool's parallel-for (pool.c; internal: the kernels and the tests use it). fn(ctx,
 * i, thread_index) is called once for every i in [0, n_tasks), on any thread; thread_index is in
 * [0, ps_pool_size(pool)) and unique among concurrently running calls, so it may index
 * per-thread scratch. Returns when all tasks are done. pool may be NULL (runs inline).
 * Concurrent calls on one pool are serialised by an internal lock. */
typedef void (*ps_pool_fn)(void *ctx, int64_t task, int32_t thread_index);
void ps_pool_for(ps_pool *pool, int64_t n_tasks, ps_pool_fn fn, void *ctx);

/* ps_pool_for with the tasks in contiguous runs per thread: thread t starts at t x n_tasks / T
 * and goes up; a thread that runs out takes the back half of the fullest remaining range. For
 * tasks whose neighbours share memory (the tiles of one weight matrix). The same contract. */
void ps_pool_for_runs(ps_pool *pool, int64_t n_tasks, ps_pool_fn fn, void *ctx);

/* A library mutex that fork() must not leave locked in the child (pool.c): between
 * ps_fork_lock_add and ps_fork_lock_remove the fork handlers take it before fork(), give it
 * back after it in the parent and initialise it afresh in the child, so a child never
 * inherits it held by a thread that does not exist there. The entry (in the owner's struct)
 * and mu stay valid until removed. */
typedef struct ps_fork_lock {
    pthread_mutex_t *mu;
    struct ps_fork_lock *prev, *next;
} ps_fork_lock;
void ps_fork_lock_add(ps_fork_lock *l, pthread_mutex_t *mu);
void ps_fork_lock_remove(ps_fork_lock *l);

/* Positions per forward pass and per top-K call: part of the definition of a score. */
#define PS_CHUNK 256

/* Fills err (when not NULL) and returns code, so that `return ps_fail(err, ...)` reads well.
 * offset: byte offset in the input, or -1. */
ps_status ps_fail(ps_error *err, ps_status code, int64_t offset, const char *fmt, ...)
    PS_PRINTF(4, 5);
/* Clears err to {PS_OK, -1, ""}. */
void ps_error_clear(ps_error *err);

/* Allocation hook: every allocation of the library goes through these (see ps_alloc_fail_after).
 * ps_malloc(0) returns a unique non-NULL pointer or NULL like malloc. */
void *ps_malloc(size_t size);
void *ps_calloc(size_t n, size_t size);
void *ps_realloc(void *ptr, size_t size);
/* Aligned to `align` (a power of two >= sizeof(void*)); free with ps_free. */
void *ps_aligned_alloc(size_t align, size_t size);
void ps_free(void *ptr);
char *ps_strdup(const char *s);
char *ps_strndup(const char *s, size_t n);
/* ps_alloc_failed(): whether an allocation through the hook failed on this thread since the
 * last ps_alloc_failed_clear() (so a jansson parse that failed for want of memory is told
 * from one that failed on bad JSON). */
void ps_alloc_failed_clear(void);
bool ps_alloc_failed(void);

/* Memory accounting through the hook (status.c): a pool is a budget of bytes that many
 * requests share; a meter is one request's share of it. While a meter is attached to a thread
 * (ps_mem_meter_attach), every allocation through the hook on that thread is charged to it at
 * what it really takes (the block's usable size plus the allocator's header) and every
 * ps_free on that thread credits it back; an allocation the pool cannot cover fails as out of
 * memory (the block is not allocated) and sets `refused`. So what a parser builds from a
 * hostile body is counted block by block, whatever the body's shape. A block must be freed
 * on the thread that allocated it with the same meter attached, or with none (then it stays
 * charged until the meter is released): memory allocated elsewhere (another thread's) is
 * freed with no meter attached. */
typedef struct {
    _Atomic int64_t used; /* bytes granted to meters and held by their owners */
    int64_t budget;
} ps_mem_pool;

typedef struct {
    ps_mem_pool *pool; /* NULL: closed (released), charges nothing */
    int64_t granted;   /* bytes taken from the pool */
    int64_t live;      /* bytes of blocks allocated under the meter and not yet freed */
    int64_t fixed;     /* bytes charged for memory allocated elsewhere (ps_mem_meter_charge) */
    int64_t peak;      /* the most live + fixed has been */
    int64_t wanted;    /* on a refusal: what the request would have held in all */
    bool refused;      /* an allocation or a grant was refused for want of budget */
} ps_mem_meter;

void ps_mem_pool_init(ps_mem_pool *p, int64_t budget);
int64_t ps_mem_pool_used(ps_mem_pool *p);
/* Takes n bytes when used + n stays within the budget; false (nothing taken) otherwise. */
bool ps_mem_pool_take(ps_mem_pool *p, int64_t n);
void ps_mem_pool_give(ps_mem_pool *p, int64_t n);

void ps_mem_meter_init(ps_mem_meter *m, ps_mem_pool *pool);
/* Grants n more bytes of room from the pool (an estimate taken before the memory is
 * allocated); false, with `refused` and `wanted` set, when the pool cannot. */
bool ps_mem_meter_grant(ps_mem_meter *m, int64_t n);
/* Charges n bytes allocated outside the meter's sight (by other threads) against its room,
 * drawing more from the pool when needed; false, with `refused` and `wanted` set, when the
 * pool cannot. */
bool ps_mem_meter_charge(ps_mem_meter *m, int64_t n);
/* Gives the pool back the room granted beyond live + fixed. */
void ps_mem_meter_trim(ps_mem_meter *m);
/* Closes the meter: gives the pool back all it was granted but `keep` bytes (at most what it
 * was granted), which the caller now holds and gives back with ps_mem_pool_give. Returns the
 * bytes kept. A closed meter charges and credits nothing. */
int64_t ps_mem_meter_release(ps_mem_meter *m, int64_t keep);
/* Attaches m (NULL: none) to the calling thread; returns the meter attached before. */
ps_mem_meter *ps_mem_meter_attach(ps_mem_meter *m);
/* What the block p takes for the accounting (its usable size plus the allocator's header);
 * 0 for NULL. */
int64_t ps_mem_block_bytes(void *p);

/* a * b with overflow check: returns false on overflow. */
static inline bool ps_mul_ok(uint64_t a, uint64_t b, uint64_t *out) {
    return !__builtin_mul_overflow(a, b, out);
}

/* IEEE half <-> float, exact (scalar; SIMD kernels use F16C). */
static inline float ps_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t mant = h & 0x3ffu;
    uint32_t bits;
    if (exp == 0) {
        if (mant == 0) {
            bits = sign;
        } else { /* subnormal: normalise */
            int e = -1;
            do { e++; mant <<= 1; } while (!(mant & 0x400u));
            bits = sign | ((uint32_t)(127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (mant << 13);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* float -> half, round to nearest even (NaN stays NaN). */
static inline uint16_t ps_f32_to_f16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) return (uint16_t)(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u : 0));
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* overflow -> inf */
    if (ax < 0x38800000u) { /* subnormal half or zero */
        if (ax < 0x33000000u) return (uint16_t)sign;
        uint32_t e = ax >> 23;
        uint32_t m = (ax & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126 - e; /* 14 + (113 - e) - 1 */
        uint32_t half = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1);
        uint32_t mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1))) half++;
        return (uint16_t)(sign | half);
    }
    uint32_t h = ((ax - 0x38000000u) >> 13);
    uint32_t rem = ax & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) h++;
    return (uint16_t)(sign | h);
}

static inline float ps_bf16_to_f32(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* float -> bf16, round to nearest even (NaN stays NaN). */
static inline uint16_t ps_f32_to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u);
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

#endif /* PS_IMPL_H */
