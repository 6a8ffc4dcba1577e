/*
 * check.h — the tests' tiny harness. CHECK counts a pass or prints the failure with its
 * location; SKIP counts a skipped case with its reason; ps_test_done() prints the closing line
 * "<name>: N passed, N failed, N skipped" that tests/run.sh adds up, and returns the exit code.
 */
#ifndef PS_CHECK_H
#define PS_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int ps_t_pass, ps_t_fail, ps_t_skip;

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
        ps_t_skip++;                                                                  \
        fprintf(stderr, "SKIP %s:%d: ", __FILE__, __LINE__);                          \
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
    printf("%s: %d passed, %d failed, %d skipped\n", name, ps_t_pass, ps_t_fail, ps_t_skip);
    return ps_t_fail ? 1 : 0;
}

#endif
