/*
 * replay.c — a plain main() for every fuzz target, so that `make test` replays the corpora
 * without libFuzzer: build/fuzz/<name>_replay feeds every file of fuzz/corpus/<name>/ (or of
 * argv[1], a directory or a file) to LLVMFuzzerTestOneInput, each in a buffer of its exact
 * size so that AddressSanitizer builds catch any overread. A crash kills the process (the
 * runner reports it); otherwise it prints "<name>_replay: N passed, 0 failed, 0 skipped".
 * An absent or empty corpus counts as one failure: seeds are part of the target.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
/* Optional in a target. */
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

static int replay_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "FAIL cannot open %s\n", path);
        return -1;
    }
    size_t cap = 4096, n = 0;
    uint8_t *buf = malloc(cap);
    size_t k;
    while (buf && (k = fread(buf + n, 1, cap - n, f)) > 0) {
        n += k;
        if (n == cap) {
            uint8_t *nb = realloc(buf, cap *= 2);
            if (!nb) { free(buf); buf = NULL; }
            else buf = nb;
        }
    }
    fclose(f);
    if (!buf) {
        fprintf(stderr, "FAIL out of memory reading %s\n", path);
        return -1;
    }
    uint8_t *exact = malloc(n ? n : 1); /* exact size: an overread is past the allocation */
    if (!exact) {
        free(buf);
        return -1;
    }
    memcpy(exact, buf, n);
    free(buf);
    LLVMFuzzerTestOneInput(exact, n);
    free(exact);
    return 0;
}

static int by_name(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv) {
    /* the target name: basename of argv[0] minus "_replay" */
    const char *base = strrchr(argv[0], '/');
    base = base ? base + 1 : argv[0];
    char name[256];
    snprintf(name, sizeof name, "%s", base);
    size_t nl = strlen(name);
    if (nl > 7 && strcmp(name + nl - 7, "_replay") == 0) name[nl - 7] = '\0';

    char dflt[512];
    snprintf(dflt, sizeof dflt, "fuzz/corpus/%s", name);
    const char *path = argc > 1 ? argv[1] : dflt;
    if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);

    int passed = 0, failed = 0;
    struct stat sb;
    if (stat(path, &sb) != 0) {
        fprintf(stderr, "FAIL %s: no corpus at %s (run from the repository root)\n", name, path);
        failed++;
    } else if (S_ISDIR(sb.st_mode)) {
        DIR *d = opendir(path);
        char **files = NULL;
        size_t n = 0, cap = 0;
        struct dirent *de;
        while (d && (de = readdir(d)) != NULL) {
            if (de->d_name[0] == '.') continue;
            if (n == cap) {
                cap = cap ? cap * 2 : 64;
                char **nf = realloc(files, cap * sizeof *nf);
                if (!nf) break;
                files = nf;
            }
            size_t len = strlen(path) + strlen(de->d_name) + 2;
            files[n] = malloc(len);
            if (!files[n]) break;
            snprintf(files[n], len, "%s/%s", path, de->d_name);
            n++;
        }
        if (d) closedir(d);
        qsort(files, n, sizeof *files, by_name); /* a fixed order: reproducible runs */
        for (size_t i = 0; i < n; i++) {
            struct stat fs;
            if (stat(files[i], &fs) == 0 && S_ISREG(fs.st_mode)) {
                if (replay_file(files[i]) == 0) passed++;
                else failed++;
            }
            free(files[i]);
        }
        free(files);
        if (passed + failed == 0) {
            fprintf(stderr, "FAIL %s: corpus %s is empty\n", name, path);
            failed++;
        }
    } else {
        if (replay_file(path) == 0) passed++;
        else failed++;
    }
    printf("%s_replay: %d passed, %d failed, 0 skipped\n", name, passed, failed);
    return failed ? 1 : 0;
}
