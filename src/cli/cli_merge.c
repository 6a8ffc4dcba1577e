/*
 * cli_merge.c — `promptscore merge -o OUT SHARD...`: the outputs of `score --shard I/N` back
 * into one plain output, in input order, byte for byte what one `score` run writes.
 *
 * Every file must be a finished shard output (header, records, end record; cli_shard.h) of the
 * same N and the same settings, and the end records must agree on the input (line count and
 * hash). The records are merged by line number, streaming (one line per file in memory; each
 * file is in increasing order): input lines 1..T must each be present exactly once. Missing
 * lines and lines present twice are named (with the files), and nothing is written: OUT is
 * written to a temporary file beside it and renamed into place only when all is well.
 * Exit 0, 2 when the shards do not make one whole input, 1 on an I/O error.
 */
#include "cli/cli.h"
#include "cli/cli_shard.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *MERGE_ABOUT =
    "Merges the outputs of `promptscore score --shard I/N` (all N of them, finished) into OUT:\n"
    "the plain score lines in input order, byte for byte what one score run writes. Checks that\n"
    "the files are shards of one input with one set of settings and that every input line is\n"
    "present exactly once; otherwise names the missing or doubled lines, writes nothing and\n"
    "exits 2.\n";

typedef struct {
    const char *path;
    FILE *f;
    char *line;
    size_t cap;
    ssize_t len;
    int64_t fileline;   /* line number in the file */
    int64_t index;      /* shard index from the header */
    ps_shard_line cur;  /* the record at hand (kind BAD at EOF) */
    bool eof, ended;    /* no more records; its end record was read */
    int64_t end_lines;
    uint64_t end_hash;
} shard_in;

/* A list of line numbers for the error message: ranges, the first few shown. */
typedef struct {
    int64_t count, shown, lo, hi;
    char text[1200];
    size_t used;
} line_list;

static void list_flush(line_list *l) {
    if (l->lo == 0) return;
    if (l->shown < 12 && l->used < sizeof l->text - 64) {
        int n = l->lo == l->hi
                    ? snprintf(l->text + l->used, sizeof l->text - l->used, "%s%lld",
                               l->shown ? ", " : "", (long long)l->lo)
                    : snprintf(l->text + l->used, sizeof l->text - l->used, "%s%lld-%lld",
                               l->shown ? ", " : "", (long long)l->lo, (long long)l->hi);
        l->used += (size_t)n;
    } else if (l->shown == 12) {
        l->used += (size_t)snprintf(l->text + l->used, sizeof l->text - l->used, ", ...");
    }
    l->shown++;
    l->lo = l->hi = 0;
}

static void list_add(line_list *l, int64_t lo, int64_t hi) {
    l->count += hi - lo + 1;
    if (l->lo && lo == l->hi + 1) {
        l->hi = hi;
        return;
    }
    list_flush(l);
    l->lo = lo;
    l->hi = hi;
}

/* Reads the next line of s into s->cur; checks its order. false: bad file (message printed). */
static bool advance(const char *cmd, shard_in *s, int64_t of) {
    s->cur.kind = PS_SHARD_BAD;
    if (s->eof) return true;
    int64_t prev = s->fileline > 1 ? s->cur.a : 0;
    s->len = getline(&s->line, &s->cap, s->f);
    if (s->len < 0) {
        s->eof = true;
        if (ferror(s->f)) {
            fprintf(stderr, "promptscore %s: cannot read %s: %s\n", cmd, s->path, strerror(errno));
            return false;
        }
        return true;
    }
    s->fileline++;
    ps_shard_line r = ps_shard_parse_line(s->line, (size_t)s->len);
    if (s->ended) {
        fprintf(stderr, "promptscore %s: %s: line %lld follows the end record\n", cmd, s->path,
                (long long)s->fileline);
        return false;
    }
    if (r.kind == PS_SHARD_END) {
        s->ended = s->eof = true;
        s->end_lines = r.a;
        s->end_hash = r.hash;
        return true;
    }
    if (r.kind != PS_SHARD_RECORD && r.kind != PS_SHARD_BLANK) {
        bool half = s->len > 0 && s->line[s->len - 1] != '\n';
        fprintf(stderr, "promptscore %s: %s: line %lld is %s\n", cmd, s->path,
                (long long)s->fileline,
                half ? "half written (the task was killed: rerun it with --resume)"
                     : "not a score --shard record");
        return false;
    }
    if ((r.a - 1) % of != s->index) {
        fprintf(stderr, "promptscore %s: %s: line %lld holds input line %lld, which is not in "
                        "shard %lld/%lld\n", cmd, s->path, (long long)s->fileline,
                (long long)r.a, (long long)s->index, (long long)of);
        return false;
    }
    s->cur = r;
    /* within one file, a repeat is reported as a doubled line by the merge; going back is not */
    if (r.a < prev) {
        fprintf(stderr, "promptscore %s: %s: input line %lld comes after line %lld (not in "
                        "input order: not written by score --shard)\n", cmd, s->path,
                (long long)r.a, (long long)prev);
        return false;
    }
    return true;
}

static void sift_down(int *h, int n, int i, const shard_in *s) {
    for (;;) {
        int m = i, l = 2 * i + 1, r = l + 1;
        if (l < n && s[h[l]].cur.a < s[h[m]].cur.a) m = l;
        if (r < n && s[h[r]].cur.a < s[h[m]].cur.a) m = r;
        if (m == i) return;
        int t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
}

int ps_cli_merge(int argc, char **argv) {
    const char *cmd = argv[0], *out_path = NULL;
    int n = 0;
    const char **paths = calloc((size_t)argc, sizeof *paths);
    if (!paths) return 1;
    const ps_cli_opt opts[] = {
        {"-o, --output", "FILE", "the merged output (written beside it, then renamed into place)",
         PS_CLI_STR, &out_path},
        {0}};
    const ps_cli_opt *const tables[] = {opts, NULL};
    const ps_cli_cmd c = {"merge", "-o OUT SHARD...", MERGE_ABOUT, tables, paths, &n};
    int prc = ps_cli_parse(&c, argc, argv);
    if (prc >= 0) {
        free(paths);
        return prc;
    }
    if (!out_path || n == 0) {
        fprintf(stderr, "promptscore %s: give -o OUT and at least one shard file (promptscore %s "
                        "--help)\n", cmd, cmd);
        free(paths);
        return 2;
    }
    int rc = 0;
    shard_in *s = calloc((size_t)n, sizeof *s);
    char *tmp = NULL;
    int *heap = NULL;
    FILE *out = NULL;
    int64_t of = 0;
    const char *config = NULL;
    size_t config_len = 0;
    bool dup_shard = false;
    char *config_copy = NULL;
    if (!s) {
        rc = 1;
        goto done;
    }
    /* headers: one N, one config; each index at most once */
    for (int i = 0; i < n; i++) {
        s[i].path = paths[i];
        if (!(s[i].f = fopen(paths[i], "rb"))) {
            fprintf(stderr, "promptscore %s: cannot open %s: %s\n", cmd, paths[i], strerror(errno));
            rc = 1;
            goto done;
        }
        s[i].len = getline(&s[i].line, &s[i].cap, s[i].f);
        ps_shard_line h = s[i].len > 0 ? ps_shard_parse_line(s[i].line, (size_t)s[i].len)
                                        : (ps_shard_line){0};
        s[i].fileline = 1;
        if (h.kind != PS_SHARD_HEADER) {
            fprintf(stderr, "promptscore %s: %s is not an output of score --shard (no "
                            "{\"ps_shard\":...} header on its first line)\n", cmd, paths[i]);
            rc = 2;
            goto done;
        }
        s[i].index = h.a;
        if (i == 0) {
            of = h.b;
            config_copy = strndup(h.config, h.config_len);
            if (!config_copy) {
                rc = 1;
                goto done;
            }
            config = config_copy;
            config_len = h.config_len;
        } else if (h.b != of) {
            fprintf(stderr, "promptscore %s: %s is shard %lld of %lld but %s is of %lld\n", cmd,
                    paths[i], (long long)h.a, (long long)h.b, paths[0], (long long)of);
            rc = 2;
        } else if (h.config_len != config_len || memcmp(h.config, config, config_len)) {
            fprintf(stderr, "promptscore %s: %s was scored with (%.*s) but %s with (%s)\n", cmd,
                    paths[i], (int)h.config_len, h.config, paths[0], config);
            rc = 2;
        }
        for (int j = 0; j < i; j++)
            if (s[j].index == h.a) {
                fprintf(stderr, "promptscore %s: shard %lld/%lld is given twice (%s and %s)\n",
                        cmd, (long long)h.a, (long long)of, s[j].path, paths[i]);
                dup_shard = true;
            }
        s[i].cur.a = 0;
    }
    if (rc) goto done;
    if (dup_shard) rc = 2; /* the doubled lines are named below */
    if (n < of) {
        char miss[400] = "";
        size_t used = 0;
        int shown = 0;
        for (int64_t k = 0; k < of && shown < 16; k++) {
            bool have = false;
            for (int i = 0; i < n; i++) have |= s[i].index == k;
            if (!have) {
                used += (size_t)snprintf(miss + used, sizeof miss - used, "%s%lld",
                                         shown++ ? ", " : "", (long long)k);
                if (used >= sizeof miss - 24) break;
            }
        }
        fprintf(stderr, "promptscore %s: %d file(s) for %lld shards: no file for shard(s) %s%s "
                        "of %lld\n", cmd, n, (long long)of, miss, shown >= 16 ? ", ..." : "",
                (long long)of);
        rc = 2; /* and the lines they would hold are named below */
    }
    for (int i = 0; i < n; i++)
        if (!advance(cmd, &s[i], of)) {
            rc = 2;
            goto done;
        }

    size_t plen = strlen(out_path);
    tmp = malloc(plen + 32);
    if (!tmp) {
        rc = 1;
        goto done;
    }
    snprintf(tmp, plen + 32, "%s.merge-%ld.tmp", out_path, (long)getpid());
    if (!(out = fopen(tmp, "wb"))) {
        fprintf(stderr, "promptscore %s: cannot create %s: %s\n", cmd, tmp, strerror(errno));
        rc = 1;
        goto done;
    }

    line_list missing = {0}, doubled = {0};
    char dbl_files[600] = "";
    int64_t next = 1, last = 0; /* next line expected; last line written */
    const char *last_path = NULL;
    /* a min-heap of the files with a record at hand, by that record's line number */
    heap = malloc((size_t)n * sizeof *heap);
    if (!heap) {
        rc = 1;
        goto done;
    }
    int nh = 0;
    for (int i = 0; i < n; i++)
        if (s[i].cur.kind != PS_SHARD_BAD) heap[nh++] = i;
    for (int i = nh / 2 - 1; i >= 0; i--) sift_down(heap, nh, i, s);
    while (nh > 0) {
        int best = heap[0];
        int64_t L = s[best].cur.a;
        if (L == last) {
            if (doubled.count == 0)
                snprintf(dbl_files, sizeof dbl_files, " (line %lld: in %s and %s)", (long long)L,
                         last_path, s[best].path);
            list_add(&doubled, L, L);
        } else {
            if (L > next) list_add(&missing, next, L - 1);
            if (s[best].cur.kind == PS_SHARD_RECORD && missing.count == 0 && doubled.count == 0) {
                fputc('{', out);
                fwrite(s[best].line + s[best].cur.rest, 1,
                       (size_t)s[best].len - s[best].cur.rest, out);
            }
            last = L;
            last_path = s[best].path;
            next = L + 1;
        }
        if (!advance(cmd, &s[best], of)) {
            rc = 2;
            goto done;
        }
        if (s[best].cur.kind == PS_SHARD_BAD) heap[0] = heap[--nh];
        sift_down(heap, nh, 0, s);
    }
    /* the end records: every file finished, all of one input */
    int64_t total = -1;
    uint64_t ihash = 0;
    for (int i = 0; i < n; i++) {
        if (!s[i].ended) {
            fprintf(stderr, "promptscore %s: %s has no end record: its task did not finish "
                            "(rerun it with --resume)\n", cmd, s[i].path);
            rc = 2;
        } else if (total < 0) {
            total = s[i].end_lines;
            ihash = s[i].end_hash;
        } else if (s[i].end_lines != total || s[i].end_hash != ihash) {
            fprintf(stderr, "promptscore %s: %s was scored from an input of %lld lines (hash "
                            "%016llx), %s from one of %lld (hash %016llx)\n", cmd, s[i].path,
                    (long long)s[i].end_lines, (unsigned long long)s[i].end_hash, paths[0],
                    (long long)total, (unsigned long long)ihash);
            rc = 2;
        }
    }
    if (total >= next) list_add(&missing, next, total);
    if (last > total && total >= 0) {
        fprintf(stderr, "promptscore %s: the shards hold line %lld but the input had %lld\n",
                cmd, (long long)last, (long long)total);
        rc = 2;
    }
    list_flush(&missing);
    list_flush(&doubled);
    if (missing.count) {
        fprintf(stderr, "promptscore %s: %lld input line(s) missing: %s\n", cmd,
                (long long)missing.count, missing.text);
        rc = 2;
    }
    if (doubled.count) {
        fprintf(stderr, "promptscore %s: %lld input line(s) present twice: %s%s\n", cmd,
                (long long)doubled.count, doubled.text, dbl_files);
        rc = 2;
    }
    if (rc == 0 && (fflush(out) != 0 || ferror(out))) {
        fprintf(stderr, "promptscore %s: write failed: %s\n", cmd, strerror(errno));
        rc = 1;
    }
    if (fclose(out) != 0 && rc == 0) {
        fprintf(stderr, "promptscore %s: write failed: %s\n", cmd, strerror(errno));
        rc = 1;
    }
    out = NULL;
    if (rc == 0 && rename(tmp, out_path) != 0) {
        fprintf(stderr, "promptscore %s: cannot rename %s to %s: %s\n", cmd, tmp, out_path,
                strerror(errno));
        rc = 1;
    }
    if (rc == 0)
        fprintf(stderr, "promptscore %s: %lld input lines from %d shard(s) -> %s\n", cmd,
                (long long)total, n, out_path);
done:
    if (out) fclose(out);
    if (tmp && rc != 0) unlink(tmp);
    free(tmp);
    if (s)
        for (int i = 0; i < n; i++) {
            if (s[i].f) fclose(s[i].f);
            free(s[i].line);
        }
    free(s);
    free(heap);
    free(config_copy);
    free(paths);
    if (rc == 2) fprintf(stderr, "promptscore %s: nothing written to %s\n", cmd, out_path);
    return rc;
}
