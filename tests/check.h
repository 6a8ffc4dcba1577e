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

static inline int ps_test_done(const char *name) {
    if (ps_t_cpu)
        printf("%s: %d passed, %d failed, %d skipped, %d not available on this CPU\n", name,
               ps_t_pass, ps_t_fail, ps_t_skip, ps_t_cpu);
    else
        printf("%s: %d passed, %d failed, %d skipped\n", name, ps_t_pass, ps_t_fail, ps_t_skip);
    return ps_t_fail ? 1 : 0;
}

#endif
