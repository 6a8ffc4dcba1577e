/*
 * util.c — the out-of-line part of util.h: the first invalid UTF-8 byte of a buffer, writing a
 * whole buffer to a file descriptor and the monotonic clock (the sequence check, the FNV-1a
 * hash and splitmix64 are inline in util.h).
 *
 * One validator serves every caller: the JSON writer replaces invalid runs by U+FFFD, the
 * server rejects a request body at the first invalid byte, both with the same rules (RFC 3629:
 * a lead byte C2..F4, continuation bytes 80..BF, E0 and F0 not overlong, ED not a surrogate,
 * F4 not above U+10FFFF).
 */
#include "base/util.h"

#include <errno.h>
#include <time.h>
#include <unistd.h>

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

bool ps_write_all(int fd, const void *p, size_t n) {
    const unsigned char *b = p;
    while (n > 0) {
        ssize_t k = write(fd, b, n < ((size_t)1 << 30) ? n : ((size_t)1 << 30));
        if (k < 0) {
            if (errno == EINTR) continue;
            return false;
        }
        b += k;
        n -= (size_t)k;
    }
    return true;
}

double ps_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double ps_cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
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
