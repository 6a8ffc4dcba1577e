/*
 * buf.h — a growable byte buffer (src/base/buf.c): appends never fail one by one; an allocation
 * failure sets `oom` and later appends are ignored, so a writer checks once at the end.
 */
#ifndef PS_BUF_H
#define PS_BUF_H

#include "base/impl.h"

/* data is always NUL-terminated when not NULL. */
typedef struct {
    char *data;
    size_t len;
    size_t cap;
    bool oom;
} ps_buf;

void ps_buf_init(ps_buf *b);
void ps_buf_free(ps_buf *b);
void ps_buf_reset(ps_buf *b); /* len = 0, keeps capacity */
void ps_buf_append(ps_buf *b, const void *data, size_t n);
void ps_buf_puts(ps_buf *b, const char *s);
void ps_buf_printf(ps_buf *b, const char *fmt, ...) PS_PRINTF(2, 3);
/* Makes room for n more bytes plus the NUL. False (and oom set) when that fails. */
bool ps_buf_reserve(ps_buf *b, size_t n);

/* One byte (the writers' inner loop). */
static inline void ps_buf_putc(ps_buf *b, char c) {
    if (b->len + 2 > b->cap && !ps_buf_reserve(b, 1)) return;
    if (b->oom) return;
    b->data[b->len++] = c;
    b->data[b->len] = '\0';
}

#endif
