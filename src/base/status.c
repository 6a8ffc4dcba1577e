/*
 * status.c — status names, error filling, the version string, and the allocation hook.
 *
 * The hook is a process-wide counter: every library allocation increments it, and once it
 * reaches the threshold set by ps_alloc_fail_after() every allocation fails. Tests walk the
 * threshold over a code path (SQLite's approach) to prove each failure is handled. The
 * threshold is set through base/testhooks.h (not the public header), and the counter exists in
 * test builds only (PS_TESTING): a release build's allocations go straight to the C library. The front ends route
 * jansson's allocations through the same hook (src/front/jansson_alloc.c), so the walks cover
 * request and JSONL parsing too.
 *
 * The same hook keeps the accounting of impl.h's memory meters: a thread with a meter attached
 * has each allocation checked against its pool before it is made and charged at its real size
 * after (malloc_usable_size), and each ps_free credited. The server attaches a request's meter
 * while it handles the request, so its budget holds per allocation, whatever a body's shape.
 */
#include "base/impl.h"
#include "base/testhooks.h"

#include <malloc.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

const char *ps_status_str(ps_status status) {
    switch (status) {
    case PS_OK: return "ok";
    case PS_ERR_INVALID_ARG: return "invalid argument";
    case PS_ERR_NOMEM: return "out of memory";
    case PS_ERR_IO: return "i/o error";
    case PS_ERR_FORMAT: return "malformed input";
    case PS_ERR_UNSUPPORTED: return "unsupported";
    case PS_ERR_NAN: return "NaN or infinite logit";
    case PS_ERR_TOKEN_RANGE: return "token id out of range";
    case PS_ERR_CONTEXT: return "context length exceeded";
    case PS_ERR_NOT_FOUND: return "not found";
    case PS_ERR_CANCELLED: return "cancelled";
    case PS_ERR_NETWORK: return "network error";
    case PS_ERR_INTERNAL: return "internal error";
    case PS_ERR_LIMIT: return "over a limit";
    default: return "unknown status";
    }
}

const char *ps_version(void) { return PS_VERSION_STRING; }

void ps_error_clear(ps_error *err) {
    if (!err) return;
    err->code = PS_OK;
    err->offset = -1;
    err->message[0] = '\0';
}

ps_status ps_fail(ps_error *err, ps_status code, int64_t offset, const char *fmt, ...) {
    if (err) {
        err->code = code;
        err->offset = offset;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        va_end(ap);
    }
    return code;
}

#ifdef PS_TESTING
static _Atomic int64_t g_alloc_count = 0;
static _Atomic int64_t g_alloc_fail_at = -1;

void ps_alloc_fail_after(int64_t n) {
    atomic_store(&g_alloc_count, 0);
    atomic_store(&g_alloc_fail_at, n);
}

int64_t ps_alloc_count(void) { return atomic_load(&g_alloc_count); }

static bool alloc_should_fail(void) {
    int64_t i = atomic_fetch_add(&g_alloc_count, 1);
    int64_t at = atomic_load(&g_alloc_fail_at);
    return at >= 0 && i >= at;
}
#else
static inline bool alloc_should_fail(void) { return false; }
#endif

/* Set on this thread by any failed allocation (injected or real): lets a caller tell a
 * library's failure (jansson reports an allocation failure as some parse error) from bad input. */
static _Thread_local bool t_alloc_failed;

void ps_alloc_failed_clear(void) { t_alloc_failed = false; }
bool ps_alloc_failed(void) { return t_alloc_failed; }

static void *noted(void *p) {
    if (!p) t_alloc_failed = true;
    return p;
}

/* ---- memory accounting (impl.h: pools and meters) ---------------------------------------- */

/* The thread's meter, NULL when none: the hook's only cost without one is this load. */
static _Thread_local ps_mem_meter *t_meter;

/* What glibc's allocator takes beyond a block's usable size (its chunk header, with room for
 * alignment); elsewhere the requested size is all that is known. */
enum { PS_BLOCK_HEADER = 16, PS_METER_STEP = 1 << 20 };

int64_t ps_mem_block_bytes(void *p) {
    if (!p) return 0;
#if defined(__GLIBC__)
    return (int64_t)malloc_usable_size(p) + PS_BLOCK_HEADER;
#else
    return PS_BLOCK_HEADER;
#endif
}

void ps_mem_pool_init(ps_mem_pool *p, int64_t budget) {
    atomic_init(&p->used, 0);
    p->budget = budget;
}

int64_t ps_mem_pool_used(ps_mem_pool *p) { return atomic_load(&p->used); }

bool ps_mem_pool_take(ps_mem_pool *p, int64_t n) {
    int64_t u = atomic_load(&p->used);
    do {
        if (n > p->budget - u) return false;
    } while (!atomic_compare_exchange_weak(&p->used, &u, u + n));
    return true;
}

void ps_mem_pool_give(ps_mem_pool *p, int64_t n) {
    if (p && n) atomic_fetch_sub(&p->used, n);
}

void ps_mem_meter_init(ps_mem_meter *m, ps_mem_pool *pool) {
    memset(m, 0, sizeof *m);
    m->pool = pool;
}

static bool meter_refuse(ps_mem_meter *m, int64_t total) {
    m->refused = true;
    m->wanted = total;
    return false;
}

/* Makes the meter's room cover live + fixed + n: draws the shortfall from the pool, rounded
 * up to a step so that a parse of many small blocks takes the pool's atomic rarely (never past
 * the budget: the exact shortfall when the step does not fit). */
static bool meter_room(ps_mem_meter *m, int64_t n) {
    int64_t short_by = m->live + m->fixed + n - m->granted;
    if (short_by <= 0) return true;
    int64_t step = PS_MAX(short_by, (int64_t)PS_METER_STEP);
    if (ps_mem_pool_take(m->pool, step)) {
        m->granted += step;
        return true;
    }
    if (step > short_by && ps_mem_pool_take(m->pool, short_by)) {
        m->granted += short_by;
        return true;
    }
    return meter_refuse(m, m->granted + short_by);
}

/* Records a block of b bytes allocated under the meter. A block may take a little more than
 * meter_room allowed for (a page-rounded large block): the difference is taken from the pool
 * unconditionally, the block existing already. */
static void meter_add(ps_mem_meter *m, int64_t b) {
    m->live += b;
    int64_t over = m->live + m->fixed - m->granted;
    if (over > 0) {
        atomic_fetch_add(&m->pool->used, over);
        m->granted += over;
    }
    if (m->live + m->fixed > m->peak) m->peak = m->live + m->fixed;
}

static void meter_sub(ps_mem_meter *m, int64_t b) {
    m->live = m->live > b ? m->live - b : 0;
}

bool ps_mem_meter_grant(ps_mem_meter *m, int64_t n) {
    if (!m->pool || n <= 0) return true;
    if (!ps_mem_pool_take(m->pool, n)) return meter_refuse(m, m->granted + n);
    m->granted += n;
    return true;
}

bool ps_mem_meter_charge(ps_mem_meter *m, int64_t n) {
    if (!m->pool || n <= 0) return true;
    if (!meter_room(m, n)) return false;
    m->fixed += n;
    if (m->live + m->fixed > m->peak) m->peak = m->live + m->fixed;
    return true;
}

void ps_mem_meter_trim(ps_mem_meter *m) {
    if (!m->pool) return;
    int64_t spare = m->granted - m->live - m->fixed;
    if (spare > 0) {
        ps_mem_pool_give(m->pool, spare);
        m->granted -= spare;
    }
}

int64_t ps_mem_meter_release(ps_mem_meter *m, int64_t keep) {
    if (!m->pool) return 0;
    keep = PS_MAX((int64_t)0, PS_MIN(keep, m->granted));
    ps_mem_pool_give(m->pool, m->granted - keep);
    m->pool = NULL;
    m->granted = m->live = m->fixed = 0;
    return keep;
}

ps_mem_meter *ps_mem_meter_attach(ps_mem_meter *m) {
    ps_mem_meter *prev = t_meter;
    t_meter = m;
    return prev;
}

/* The meter of this thread that charges (open), or NULL. */
static inline ps_mem_meter *meter_on(void) {
    ps_mem_meter *m = t_meter;
    return m && m->pool ? m : NULL;
}

/* The most a block of `size` bytes may take beyond its size: the header and the rounding of
 * small blocks, or of a large (mapped) block to whole pages. */
static int64_t block_bound(size_t size) {
    return (int64_t)size + (size >= 65536 ? 4096 : 0) + 2 * PS_BLOCK_HEADER;
}

void *ps_malloc(size_t size) {
    if (alloc_should_fail()) return noted(NULL);
    ps_mem_meter *m = meter_on();
    if (m && !meter_room(m, block_bound(size))) return noted(NULL);
    void *p = malloc(size ? size : 1);
    if (p && m) meter_add(m, ps_mem_block_bytes(p));
    return noted(p);
}

void *ps_calloc(size_t n, size_t size) {
    if (alloc_should_fail()) return noted(NULL);
    if (n == 0 || size == 0) n = size = 1;
    if (n > SIZE_MAX / size) return noted(NULL);
    ps_mem_meter *m = meter_on();
    if (m && !meter_room(m, block_bound(n * size))) return noted(NULL);
    void *p = calloc(n, size);
    if (p && m) meter_add(m, ps_mem_block_bytes(p));
    return noted(p);
}

void *ps_realloc(void *ptr, size_t size) {
    if (alloc_should_fail()) return noted(NULL);
    ps_mem_meter *m = meter_on();
    int64_t old = m ? ps_mem_block_bytes(ptr) : 0;
    if (m && !meter_room(m, block_bound(size) - old)) return noted(NULL);
    void *p = realloc(ptr, size ? size : 1);
    if (p && m) {
        meter_sub(m, old);
        meter_add(m, ps_mem_block_bytes(p));
    }
    return noted(p);
}

void *ps_aligned_alloc(size_t align, size_t size) {
    if (alloc_should_fail()) return noted(NULL);
    ps_mem_meter *m = meter_on();
    if (m && !meter_room(m, block_bound(size) + (int64_t)align)) return noted(NULL);
    void *p = NULL;
    if (posix_memalign(&p, align, size ? size : align) != 0) return noted(NULL);
    if (m) meter_add(m, ps_mem_block_bytes(p));
    return p;
}

void ps_free(void *ptr) {
    ps_mem_meter *m = ptr ? meter_on() : NULL;
    if (m) meter_sub(m, ps_mem_block_bytes(ptr));
    free(ptr);
}

char *ps_strndup(const char *s, size_t n) {
    char *d = ps_malloc(n + 1);
    if (!d) return NULL;
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

char *ps_strdup(const char *s) { return ps_strndup(s, strlen(s)); }
