/*
 * util.h — the small helpers every layer shares, written once: UTF-8 validation (RFC 3629:
 * no overlong forms, no surrogates, nothing above U+10FFFF), the 64-bit FNV-1a hash, the
 * splitmix64 generator, writing a whole buffer to a file descriptor, and a monotonic clock in
 * seconds (src/base/util.c).
 */
#ifndef PS_UTIL_H
#define PS_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* Length (1..4) of the valid UTF-8 sequence at s[0..n) (n >= 1), or 0 when s[0] does not
 * start one (inline: the JSON writer's inner loop). */
static inline size_t ps_utf8_valid_len(const unsigned char *s, size_t n) {
    unsigned char c = s[0];
    if (c < 0x80) return 1;
    if (c < 0xC2) return 0;
    if (c < 0xE0) return (n >= 2 && (s[1] & 0xC0) == 0x80) ? 2 : 0;
    if (c < 0xF0) {
        if (n < 3 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80) return 0;
        if (c == 0xE0 && s[1] < 0xA0) return 0; /* overlong */
        if (c == 0xED && s[1] >= 0xA0) return 0; /* surrogate */
        return 3;
    }
    if (c < 0xF5) {
        if (n < 4 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80 || (s[3] & 0xC0) != 0x80)
            return 0;
        if (c == 0xF0 && s[1] < 0x90) return 0; /* overlong */
        if (c == 0xF4 && s[1] >= 0x90) return 0; /* above U+10FFFF */
        return 4;
    }
    return 0;
}
/* Offset of the first byte of s[0..n) that does not start a valid UTF-8 sequence, or n when
 * all of it is valid. */
size_t ps_utf8_bad_offset(const unsigned char *s, size_t n);

/* 64-bit FNV-1a: the offset basis, and n bytes hashed on from h (start with PS_FNV1A64_INIT;
 * feeding a buffer in pieces gives the same hash as in one go). */
#define PS_FNV1A64_INIT 0xcbf29ce484222325ull
static inline uint64_t ps_fnv1a64(uint64_t h, const void *data, size_t n) {
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

/* splitmix64 (Steele, Lea, Flood 2014): advances the state *s and returns its next 64 random
 * bits. Generated models and sampled scoring depend on these exact bits. */
static inline uint64_t ps_splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* All n bytes of p to fd, retrying interrupted (EINTR) and short writes, at most 1 GiB per
 * write(2). false: write failed (errno says why). */
bool ps_write_all(int fd, const void *p, size_t n);

/* Seconds on CLOCK_MONOTONIC (for durations: progress lines, deadlines, load times). */
double ps_now_s(void);
/* The process's CPU seconds so far, every thread's (CLOCK_PROCESS_CPUTIME_ID): what a
 * one-thread benchmark on a shared machine times. */
double ps_cpu_s(void);

/* CLOCK_REALTIME now + ms milliseconds, normalised: the deadline pthread_cond_timedwait takes. */
struct timespec ps_deadline_in_ms(long ms);

#endif
