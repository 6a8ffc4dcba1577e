/*
 * buf.c — a growable byte buffer that remembers an allocation failure.
 *
 * Appends never report failure one by one: after an allocation fails `oom` is set and every
 * later append is ignored, so writers (the JSON responses, stop-string text, URLs and paths)
 * stay straight-line code and check once at the end. Capacity doubles from 256 bytes; data is
 * NUL-terminated whenever it is not NULL.
 */
#include "base/buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdint.h>

void ps_buf_init(ps_buf *b) {
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
    b->oom = false;
}

void ps_buf_free(ps_buf *b) {
    ps_free(b->data);
    ps_buf_init(b);
}

void ps_buf_reset(ps_buf *b) {
    b->len = 0;
    if (b->data) b->data[0] = '\0';
}

bool ps_buf_reserve(ps_buf *b, size_t n) {
    if (b->oom) return false;
    if (b->len + n + 1 <= b->cap) return true;
    if (n > SIZE_MAX / 2 - b->len - 1) {
        b->oom = true;
        return false;
    }
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + n + 1) cap *= 2;
    char *p = ps_realloc(b->data, cap);
    if (!p) {
        b->oom = true;
        return false;
    }
    b->data = p;
    b->cap = cap;
    return true;
}

void ps_buf_append(ps_buf *b, const void *data, size_t n) {
    if (!ps_buf_reserve(b, n)) return;
    if (n) memcpy(b->data + b->len, data, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void ps_buf_puts(ps_buf *b, const char *s) { ps_buf_append(b, s, strlen(s)); }

void ps_buf_printf(ps_buf *b, const char *fmt, ...) {
    if (b->oom) return;
    va_list ap;
    va_start(ap, fmt);
    char small[256];
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n < sizeof small) {
        ps_buf_append(b, small, (size_t)n);
        return;
    }
    if (!ps_buf_reserve(b, (size_t)n)) return;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}
