/*
 * test_util.c — src/base/util.h: the UTF-8 validator against an independent decoder (every 1-, 2-
 * and 3-byte sequence, every 4-byte lead with every second byte and sampled tails, truncated
 * sequences), ps_utf8_bad_offset on assembled buffers, FNV-1a 64 against the published test
 * vectors (and piecewise = whole), splitmix64 against the published first outputs of seed 0,
 * ps_write_all (a buffer of several MiB to a file and back; a bad descriptor), and the
 * monotonic clock.
 */
#include "check.h"
#include "base/util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The reference: decode by the bit patterns, then reject what RFC 3629 excludes (overlong
 * forms, surrogates, > U+10FFFF). Returns the sequence's length or 0. */
static size_t ref_len(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    size_t len;
    uint32_t cp, min;
    if (c < 0x80) return 1;
    if ((c & 0xE0) == 0xC0) { len = 2; cp = c & 0x1F; min = 0x80; }
    else if ((c & 0xF0) == 0xE0) { len = 3; cp = c & 0x0F; min = 0x800; }
    else if ((c & 0xF8) == 0xF0) { len = 4; cp = c & 0x07; min = 0x10000; }
    else return 0;
    if (n < len) return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        cp = cp << 6 | (s[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return len;
}

int main(void) {
    unsigned char b[4];
    long bad = 0, n_seq = 0, n_valid = 0;
    /* every 1-, 2- and 3-byte buffer (a valid sequence may be shorter than the buffer) */
    for (uint32_t x = 0; x < 256; x++) {
        b[0] = (unsigned char)x;
        bad += ps_utf8_valid_len(b, 1) != ref_len(b, 1);
        n_seq++;
    }
    for (uint32_t x = 0; x < 1u << 16; x++) {
        b[0] = (unsigned char)(x >> 8), b[1] = (unsigned char)x;
        bad += ps_utf8_valid_len(b, 2) != ref_len(b, 2);
        n_seq++;
    }
    for (uint32_t x = 0; x < 1u << 24; x++) {
        b[0] = (unsigned char)(x >> 16), b[1] = (unsigned char)(x >> 8), b[2] = (unsigned char)x;
        size_t l = ps_utf8_valid_len(b, 3);
        bad += l != ref_len(b, 3);
        n_valid += l == 3;
        n_seq++;
    }
    /* 4 bytes: every lead from F0 (and the invalid F5..FF) with every second byte and a grid
     * of third / fourth bytes covering both sides of 80 and BF */
    static const unsigned char tail[] = {0x00, 0x7F, 0x80, 0x81, 0x9F, 0xA0, 0xBF, 0xC0, 0xFF};
    for (uint32_t lead = 0xF0; lead < 0x100; lead++)
        for (uint32_t s1 = 0; s1 < 256; s1++)
            for (size_t i = 0; i < sizeof tail; i++)
                for (size_t j = 0; j < sizeof tail; j++) {
                    b[0] = (unsigned char)lead, b[1] = (unsigned char)s1, b[2] = tail[i];
                    b[3] = tail[j];
                    bad += ps_utf8_valid_len(b, 4) != ref_len(b, 4);
                    n_seq++;
                }
    CHECKF(bad == 0, "%ld of %ld sequences differ from the reference decoder", bad, n_seq);
    /* 3-byte sequences: U+0800..U+FFFF minus the 2048 surrogates */
    CHECKF(n_valid == 0x10000 - 0x800 - 0x800, "%ld valid 3-byte sequences", n_valid);
    /* boundaries, spelled out */
    CHECK(ps_utf8_valid_len((const unsigned char *)"\xC2\x80", 2) == 2);        /* U+0080 */
    CHECK(ps_utf8_valid_len((const unsigned char *)"\xC1\xBF", 2) == 0);        /* overlong */
    CHECK(ps_utf8_valid_len((const unsigned char *)"\xE0\x9F\xBF", 3) == 0);    /* overlong */
    CHECK(ps_utf8_valid_len((const unsigned char *)"\xED\xA0\x80", 3) == 0);    /* U+D800 */
    CHECK(ps_utf8_valid_len((const unsigned char *)"\xEF\xBF\xBD", 3) == 3);    /* U+FFFD */
    CHECK(ps_utf8_valid_len((const unsigned char *)"\xF4\x8F\xBF\xBF", 4) == 4); /* U+10FFFF */
    CHECK(ps_utf8_valid_len((const unsigned char *)"\xF4\x90\x80\x80", 4) == 0); /* > U+10FFFF */
    CHECK(ps_utf8_valid_len((const unsigned char *)"\xF0\x9F\x98", 3) == 0);    /* truncated */

    /* the first bad byte of a buffer */
    const char *ok = "plain \xC3\xA9t\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80";
    CHECK(ps_utf8_bad_offset((const unsigned char *)ok, strlen(ok)) == strlen(ok));
    CHECK(ps_utf8_bad_offset((const unsigned char *)"", 0) == 0);
    CHECK(ps_utf8_bad_offset((const unsigned char *)"ab\xFF" "cd", 5) == 2);
    CHECK(ps_utf8_bad_offset((const unsigned char *)"ab\xE2\x82", 4) == 2);  /* cut at the end */
    CHECK(ps_utf8_bad_offset((const unsigned char *)"\xC3\xA9\xC3", 3) == 2);
    CHECK(ps_utf8_bad_offset((const unsigned char *)"x\xED\xBF\xBFy", 5) == 1); /* U+DFFF */

    /* FNV-1a 64: the published vectors (offset basis for "", then "a", "foobar") */
    CHECK(ps_fnv1a64(PS_FNV1A64_INIT, "", 0) == 0xcbf29ce484222325ull);
    CHECK(ps_fnv1a64(PS_FNV1A64_INIT, "a", 1) == 0xaf63dc4c8601ec8cull);
    CHECK(ps_fnv1a64(PS_FNV1A64_INIT, "foobar", 6) == 0x85944171f73967e8ull);
    CHECK(ps_fnv1a64(ps_fnv1a64(PS_FNV1A64_INIT, "foo", 3), "bar", 3) ==
          ps_fnv1a64(PS_FNV1A64_INIT, "foobar", 6));

    /* splitmix64 from state 0: the first three outputs of the reference implementation */
    uint64_t sm = 0;
    CHECK(ps_splitmix64(&sm) == 0xe220a8397b1dcdafull);
    CHECK(ps_splitmix64(&sm) == 0x6e789e6aa1b965f4ull);
    CHECK(ps_splitmix64(&sm) == 0x06c45d188009454full);
    CHECK(sm == 3 * 0x9e3779b97f4a7c15ull);

    /* ps_write_all: every byte, in order; nothing to write is success; a bad fd is not */
    const size_t wn = (3u << 20) + 7;
    unsigned char *wbuf = malloc(wn), *rbuf = malloc(wn);
    char wpath[] = "/tmp/ps_test_util_XXXXXX";
    int fd = wbuf && rbuf ? mkstemp(wpath) : -1;
    CHECKF(fd >= 0, "temp file: %s", strerror(errno));
    if (fd >= 0) {
        unlink(wpath);
        for (size_t i = 0; i < wn; i++) wbuf[i] = (unsigned char)ps_splitmix64(&sm);
        CHECK(ps_write_all(fd, wbuf, wn));
        CHECK(ps_write_all(fd, wbuf, 0));
        size_t got = 0;
        ssize_t k;
        while (got < wn && (k = pread(fd, rbuf + got, wn - got, (off_t)got)) > 0) got += (size_t)k;
        CHECKF(got == wn && lseek(fd, 0, SEEK_END) == (off_t)wn && !memcmp(wbuf, rbuf, wn),
               "read back %zu of %zu bytes", got, wn);
        close(fd);
    }
    free(wbuf);
    free(rbuf);
    errno = 0;
    CHECK(!ps_write_all(-1, "x", 1) && errno == EBADF);

    /* the clock: monotonic, in seconds */
    double t0 = ps_now_s();
    struct timespec d = {0, 20 * 1000 * 1000};
    nanosleep(&d, NULL);
    double t1 = ps_now_s();
    CHECKF(t1 - t0 >= 0.019 && t1 - t0 < 10.0, "slept 20 ms, clock moved %g s", t1 - t0);
    CHECK(ps_now_s() >= t1);
    return ps_test_done("util");
}
