/*
 * status.c — status names, error filling, the version string, and the allocation hook.
 *
 * The hook is a process-wide counter: every library allocation increments it, and once it
 * reaches the threshold set by ps_alloc_fail_after() every allocation fails. Tests walk the
 * threshold over a code path (SQLite's approach) to prove each failure is handled. The
 * threshold is set through base/testhooks.h (not the public header), and the counter exists in
 * test builds only (PS_TESTING): a release build's allocations go straight to the C library. The front ends route
 * jansson's allocations through the same hook (jansson_alloc.c), so the walks cover request
 * and JSONL parsing too.
 */
#include "base/impl.h"
#include "base/testhooks.h"

#include <stdatomic.h>
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

void *ps_malloc(size_t size) {
    if (alloc_should_fail()) return noted(NULL);
    return noted(malloc(size ? size : 1));
}

void *ps_calloc(size_t n, size_t size) {
    if (alloc_should_fail()) return noted(NULL);
    if (n == 0 || size == 0) return noted(calloc(1, 1));
    return noted(calloc(n, size));
}

void *ps_realloc(void *ptr, size_t size) {
    if (alloc_should_fail()) return noted(NULL);
    return noted(realloc(ptr, size ? size : 1));
}

void *ps_aligned_alloc(size_t align, size_t size) {
    if (alloc_should_fail()) return noted(NULL);
    void *p = NULL;
    if (posix_memalign(&p, align, size ? size : align) != 0) return noted(NULL);
    return p;
}

void ps_free(void *ptr) { free(ptr); }

char *ps_strndup(const char *s, size_t n) {
    char *d = ps_malloc(n + 1);
    if (!d) return NULL;
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

char *ps_strdup(const char *s) { return ps_strndup(s, strlen(s)); }
