/*
 * check.h — the tests' tiny harness. CHECK counts a pass or prints the failure with its
 * location. Two ways not to run a case, kept apart:
 *   SKIP(fmt, ...)               something the test needs is missing (../shared, a tool, a
 *                                built binary, a temp file). Counted as skipped with its reason;
 *                                under CI=true (CI installs everything) it is a FAILURE instead.
 *   PS_TEST_CPU_LACKS(fmt, ...)  the machine's CPU lacks an instruction set the case is about
 *                                (AVX-512 BF16, VNNI, AMX, ...): "not available on this CPU",
 *                                counted on its own and never a failure, in CI or not.
 * ps_test_done() prints the closing line that tests/run.sh adds up and returns the exit code:
 *   "<name>: N passed, N failed, N skipped"   (then ", N not available on this CPU" when N > 0;
 *                                              any further field comes after these three).
 */
#ifndef PS_CHECK_H
#define PS_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* the test-only hooks of the library (fault injection, ...), which tests reach through the
 * static libraries */
#include "base/testhooks.h"

static int ps_t_pass, ps_t_fail, ps_t_skip, ps_t_cpu;

/* True when the environment says this is a CI run (CI set, and not "", "0" or "false"). */
static inline int ps_test_ci(void) {
    const char *c = getenv("CI");
    return c && *c && strcmp(c, "0") != 0 && strcmp(c, "false") != 0;
}

#define CHECK(cond)                                                                   \
    do {                                                                              \
        if (cond) {                                                                   \
            ps_t_pass++;                                                              \
        } else {                                                                      \
            ps_t_fail++;                                                              \
            fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);           \
        }                                                                             \
    } while (0)

#define CHECKF(cond, ...)                                                             \
    do {                                                                              \
        if (cond) {                                                                   \
            ps_t_pass++;                                                              \
        } else {                                                                      \
            ps_t_fail++;                                                              \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);           \
            fprintf(stderr, __VA_ARGS__);                                             \
            fputc('\n', stderr);                                                      \
        }                                                                             \
    } while (0)

#define SKIP(...)                                                                     \
    do {                                                                              \
        if (ps_test_ci()) {                                                           \
            ps_t_fail++;                                                              \
            fprintf(stderr, "FAIL %s:%d: skipped under CI=true (a skip is a failure "   \
                            "there): ", __FILE__, __LINE__);                          \
        } else {                                                                      \
            ps_t_skip++;                                                              \
            fprintf(stderr, "SKIP %s:%d: ", __FILE__, __LINE__);                      \
        }                                                                             \
        fprintf(stderr, __VA_ARGS__);                                                 \
        fputc('\n', stderr);                                                          \
    } while (0)

/* Turns template `path` ("/tmp/ps-test-...-XXXXXX", rewritten in place) into an empty file
 * for a test to write a model into; false, with a skip, when none can be made. */
static inline bool ps_test_temp_file(char *path) {
    const int fd = mkstemp(path);
    if (fd < 0) {
        SKIP("no temp file for %s", path);
        return false;
    }
    close(fd);
    return true;
}

/* Copies the NULL-terminated argument list `in` into `out` (at most n_out pointers, NULL
 * included) and `buf` (cap bytes), for execv and posix_spawn, which take char *const[]. No
 * allocation, so a forked child of a threaded test may call it. false when it does not fit. */
static inline bool ps_test_argv(const char *const *in, char **out, int n_out, char *buf,
                                size_t cap) {
    size_t used = 0;
    int n = 0;
    for (; in[n]; n++) {
        const size_t len = strlen(in[n]) + 1;
        if (n + 1 >= n_out || len > cap - used) return false;
        memcpy(buf + used, in[n], len);
        out[n] = buf + used;
        used += len;
    }
    out[n] = NULL;
    return true;
}

/* execv with a const argument list (ps_test_argv); returns only on failure. */
static inline int ps_test_execv(const char *path, const char *const *argv) {
    char *args[64], buf[16384];
    if (!ps_test_argv(argv, args, 64, buf, sizeof buf)) return -1;
    return execv(path, args);
}

/* A case about an instruction set this CPU does not have: not a failure, not a skip. Say
 * which feature, e.g. PS_TEST_CPU_LACKS("AVX-512 BF16 (vdpbf16ps): bf16 tile kernel"). */
#define PS_TEST_CPU_LACKS(...)                                                        \
    do {                                                                              \
        ps_t_cpu++;                                                                   \
        fprintf(stderr, "UNAVAILABLE %s:%d: not available on this CPU: ", __FILE__,   \
                __LINE__);                                                            \
        fprintf(stderr, __VA_ARGS__);                                                 \
        fputc('\n', stderr);                                                          \
    } while (0)

/* The shared test material (../shared from the repository root, or $PS_SHARED), or NULL with a
 * message saying so. Tests that need it SKIP when it is absent — never pass silently. */
static inline const char *ps_test_shared(void) {
    static char path[4096];
    const char *env = getenv("PS_SHARED");
    snprintf(path, sizeof path, "%s", env && *env ? env : "../shared");
    char probe[4200];
    snprintf(probe, sizeof probe, "%s/models/stories260K.gguf", path);
    if (access(probe, R_OK) != 0) {
        fprintf(stderr, "NOTE: shared test material not found at %s (set PS_SHARED)\n", path);
        return NULL;
    }
    return path;
}

/* Wall-clock bounds in tests are multiplied by this: the sanitizer build (`make check`, gcc's
 * __SANITIZE_ADDRESS__) runs several times slower, and a time bound is not what it checks. */
#if defined(__SANITIZE_ADDRESS__)
#define PS_TEST_TIME_SCALE 8.0
#else
#define PS_TEST_TIME_SCALE 1.0
#endif

/* The machine's load, measured in this run: a fixed spin of about 50 ms of CPU, timed on the
 * wall clock and on this process's CPU clock. A test that bounds how long
 * something takes multiplies its bound by this (and by PS_TEST_TIME_SCALE): on a quiet machine
 * it is 1, with two busy loops beside a 2-core run 1.5 to 2, so a deadline stretches with the
 * share of a CPU the test is actually given, not with a constant. The worst of three rounds;
 * never below 1, at most 50. */
static inline double ps_test_load_factor(void) {
    double worst = 1.0;
    for (int round = 0; round < 3; round++) {
        struct timespec w0, w1, c0, c1;
        clock_gettime(CLOCK_MONOTONIC, &w0);
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
        volatile unsigned long long x = 88172645463325252ull;
        double cpu = 0;
        do { /* xorshift steps until 50 ms of this process's CPU are spent */
            for (int i = 0; i < 100000; i++) {
                unsigned long long v = x;
                v ^= v << 13;
                v ^= v >> 7;
                v ^= v << 17;
                x = v;
            }
            clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
            cpu = (double)(c1.tv_sec - c0.tv_sec) + 1e-9 * (double)(c1.tv_nsec - c0.tv_nsec);
        } while (cpu < 0.05);
        clock_gettime(CLOCK_MONOTONIC, &w1);
        double wall = (double)(w1.tv_sec - w0.tv_sec) + 1e-9 * (double)(w1.tv_nsec - w0.tv_nsec);
        double f = wall / cpu;
        if (f > worst) worst = f;
    }
    return worst > 50.0 ? 50.0 : worst;
}

static inline int ps_test_done(const char *name) {
    if (ps_t_cpu)
        printf("%s: %d passed, %d failed, %d skipped, %d not available on this CPU\n", name,
               ps_t_pass, ps_t_fail, ps_t_skip, ps_t_cpu);
    else
        printf("%s: %d passed, %d failed, %d skipped\n", name, ps_t_pass, ps_t_fail, ps_t_skip);
    return ps_t_fail ? 1 : 0;
}

#endif
