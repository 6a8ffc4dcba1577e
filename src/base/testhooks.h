/*
 * testhooks.h — test-only hooks, inert unless a test turns them on. Internal: not part of the
 * public API (include/promptscore.h; the shared library does not export them), and nothing but
 * the tests sets them.
 *
 * They exist in test builds only (as SQLite's SQLITE_TEST): everything below is compiled when
 * PS_TESTING is defined, which the Makefile sets for the objects of $(BUILD)/tobj alone. Those
 * make libpromptscore-test.a and $(BUILD)/tests/promptscore-t, which the test binaries, the
 * benchmarks and the fuzz replays link and run; build/promptscore, libpromptscore.a and the
 * shared library are compiled without PS_TESTING and hold none of these hooks (no counter in
 * the allocation path, no PS_TEST_HOLD_FDS, no moe switch). Code that calls a hook guards the
 * call with #ifdef PS_TESTING.
 *
 * Fault injection (status.c): every allocation the library makes goes through one hook
 * (ps_malloc and friends, src/base/impl.h). ps_alloc_fail_after(n) makes the allocation numbered n
 * (0-based, counted from this call) and every later one fail, so that a test can walk n over a
 * code path and check that each failure is a clean PS_ERR_NOMEM. n < 0 disables injection (the
 * default). ps_alloc_count() returns how many allocations were attempted since the last
 * ps_alloc_fail_after() call. Process-wide.
 *
 * PS_TEST_HOLD_FDS="R,W" (two inherited file descriptors; the server of a test build,
 * $(BUILD)/tests/promptscore-t, reads it into its engine's ps_engine_params.hold, which tests/test_engine.c sets directly): each engine worker
 * (engine.c), before it scores a prompt, writes one byte to W ("holding a prompt") and then waits
 * for one byte on R (or its end of file). A test that owns the other ends of the two pipes
 * thus knows when a request is running and keeps it running for exactly as long as it needs:
 * the 503 + Retry-After of a full queue, SIGTERM / SIGINT during a request. Without the
 * variable (or with a malformed one) the hook does nothing.
 *
 * ps_test_moe_plain(true) (moe.c) switches the expert products to their plain reference path.
 * ps_test_mmq_pack_plain(true) (matmul_quant_avx512.c) packs the k-quant tiles by the plain packer.
 *
 * ps_test_pcache_hash_bits(n) (prefix_cache.c; test builds only, PS_TESTING) forces collisions
 * of the prefix cache's chain hash. ps_test_pool_poll(mode) (pool.c) sets how new pools wait.
 * ps_test_forward_rows(model) (session.c) counts the rows each model forwarded.
 */
#ifndef PS_TESTHOOKS_H
#define PS_TESTHOOKS_H

#ifdef PS_TESTING

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <stdbool.h>
#include <stdint.h>

void ps_alloc_fail_after(int64_t n);
int64_t ps_alloc_count(void);

/* on: every expert layer (moe.c) computes its experts by the plain per-expert path (one
 * ps_matmul per active expert and matrix) instead of the grouped one, so that a test can
 * compare the two bit for bit. Process-wide; off by default. */
void ps_test_moe_plain(bool on);

/* on: the VNNI kernels of matmul_quant_avx512.c pack Q4_K / Q6_K weight tiles by the plain
 * row-by-row packer (ps_mmq_pack_tile_vnni) instead of their in-register packers, so that a test can
 * compare the two bit for bit. Process-wide; off by default. */
void ps_test_mmq_pack_plain(bool on);

#ifdef PS_TESTING
/* Test builds only (PS_TESTING). bits >= 0: the prefix cache's chain hash (prefix_cache.c)
 * keeps only its lowest `bits` bits (0: every block of a configuration hashes alike), so blocks
 * collide in one bucket and only the comparison of parent, configuration and ids tells them
 * apart: a test then proves that a hit is decided by the ids, never by the hash. bits < 0 (the
 * default) or >= 64: the full hash. Process-wide; set it while no score runs. */
void ps_test_pcache_hash_bits(int bits);

/* Forward-pass counting (session.c): every successful ps_session_forward(_segs) adds its rows
 * to its model's count; ps_test_forward_rows(model) reads it (0 for a model not run), so that
 * a test proves the base model of a comparison runs each position once, however many models
 * are compared. Process-wide (up to 32 models); ps_test_forward_count_reset() zeroes it. */
void ps_test_forward_count_reset(void);
int64_t ps_test_forward_rows(const void *model);

/* How the pools created after this call wait (pool.c): 1 poll before sleeping, 0 sleep at
 * once, -1 (the default) poll when the pool has no more threads than online CPUs. So that a
 * test runs both waits on any machine. Process-wide. */
void ps_test_pool_poll(int mode);
#endif

typedef struct {
    int r, w; /* -1: off */
} ps_test_hold;

/* Reads PS_TEST_HOLD_FDS; {-1, -1} when unset or malformed. */
static inline ps_test_hold ps_test_hold_from_env(void) {
    ps_test_hold h = {-1, -1};
    const char *e = getenv("PS_TEST_HOLD_FDS");
    int r, w;
    char end;
    if (e && sscanf(e, "%d,%d%c", &r, &w, &end) == 2 && r >= 0 && w >= 0) {
        h.r = r;
        h.w = w;
    }
    return h;
}

/* The hold point: announce, then wait for the test's byte (or EOF / an error). */
static inline void ps_test_hold_wait(const ps_test_hold *h) {
    if (h->r < 0) return;
    char c = 'h';
    while (write(h->w, &c, 1) < 0 && errno == EINTR) {
    }
    while (read(h->r, &c, 1) < 0 && errno == EINTR) {
    }
}

/* PS_TEST_LINGER_MS=N (the server of a test build): each request's end (on_completed, on its
 * connection's own thread) waits N ms first, as a connection whose last bytes are slow to
 * leave would. A share of the memory budget still held until then refuses the next request of
 * a client that sends it as soon as it has read the answer (tests/test_serve_limits.c). */
static inline void ps_test_linger(void) {
    const char *e = getenv("PS_TEST_LINGER_MS");
    const long ms = e ? strtol(e, NULL, 10) : 0;
    if (ms <= 0 || ms > 10000) return;
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

#endif /* PS_TESTING */

#endif /* PS_TESTHOOKS_H */
