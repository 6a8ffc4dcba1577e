/*
 * util.c — the out-of-line part of util.h: the first invalid UTF-8 byte of a buffer and the
 * monotonic clock (the sequence check and the FNV-1a hash are inline in util.h).
 *
 * One validator serves every caller: the JSON writer replaces invalid runs by U+FFFD, the
 * server rejects a request body at the first invalid byte, both with the same rules (RFC 3629:
 * a lead byte C2..F4, continuation bytes 80..BF, E0 and F0 not overlong, ED not a surrogate,
 * F4 not above U+10FFFF).
 */
#include "base/util.h"

#include <time.h>

size_t ps_utf8_bad_offset(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        size_t l = ps_utf8_valid_len(s + i, n - i);
        if (!l) return i;
        i += l;
    }
    return n;
}

double ps_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

struct timespec ps_deadline_in_ms(long ms) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    t.tv_sec += ms / 1000;
    t.tv_nsec += (ms % 1000) * 1000000L;
    if (t.tv_nsec >= 1000000000L) {
        t.tv_sec++;
        t.tv_nsec -= 1000000000L;
    }
    return t;
}
