/*
 * cli_compare.c — `--compare` with several models (score, perplexity, serve): the option that
 * collects them (repeated, or a comma list: `--compare A.gguf --compare B.gguf` or
 * `--compare A.gguf,B.gguf`; a value that names an existing file is taken whole even with a
 * comma in it), and loading them all with the base's context, each checked by
 * ps_cli_load_compare (same vocabulary, token for token; a mismatch names both files). The
 * same file given twice (the same device and inode, however spelled) is refused before any
 * model is loaded: comparing a model twice would only double the work.
 */
#include "cli/cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static bool add_path(const char *cmd, const char *opt, ps_cli_compares *c, const char *s,
                     size_t n) {
    if (n == 0) {
        fprintf(stderr, "promptscore %s: %s: an empty file name in the list\n", cmd, opt);
        return false;
    }
    if (c->n == PS_CLI_MAX_COMPARE) {
        fprintf(stderr, "promptscore %s: %s: at most %d compared models\n", cmd, opt,
                PS_CLI_MAX_COMPARE);
        return false;
    }
    char *p = malloc(n + 1);
    if (!p) {
        fprintf(stderr, "promptscore %s: out of memory\n", cmd);
        return false;
    }
    memcpy(p, s, n);
    p[n] = '\0';
    c->paths[c->n++] = p;
    return true;
}

bool ps_cli_opt_compare(const char *cmd, const char *opt, const char *v, void *dst) {
    ps_cli_compares *c = dst;
    struct stat st;
    if (!strchr(v, ',') || stat(v, &st) == 0) return add_path(cmd, opt, c, v, strlen(v));
    for (const char *s = v;;) {
        const char *e = strchr(s, ',');
        size_t n = e ? (size_t)(e - s) : strlen(s);
        if (!add_path(cmd, opt, c, s, n)) return false;
        if (!e) return true;
        s = e + 1;
    }
}

void ps_cli_compares_free(ps_cli_compares *c) {
    for (int i = 0; i < c->n; i++) {
        ps_model_free(c->models[i]);
        free(c->paths[i]);
    }
    memset(c, 0, sizeof *c);
}

int ps_cli_load_compares(const char *cmd, const ps_cli_model_opts *o, const ps_cli_loaded *base,
                         ps_cli_compares *c) {
    struct stat si, sj;
    for (int i = 0; i < c->n; i++) {
        if (stat(c->paths[i], &si) != 0) continue; /* the load below names the failure */
        for (int j = 0; j < i; j++)
            if (stat(c->paths[j], &sj) == 0 && si.st_dev == sj.st_dev && si.st_ino == sj.st_ino) {
                fprintf(stderr, "promptscore %s: --compare: %s and %s are the same file (given "
                                "twice): compare each model once\n", cmd, c->paths[j],
                        c->paths[i]);
                return 2;
            }
    }
    for (int i = 0; i < c->n; i++) {
        int rc = ps_cli_load_compare(cmd, c->paths[i], o, base, &c->models[i]);
        if (rc) return rc;
    }
    return 0;
}
