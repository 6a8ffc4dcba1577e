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

/* Opens each file and reads its header: one N (*of), one config (*config, malloc), each index
 * at most once (*dup when one is given twice: the doubled lines are named by the merge).
 * Returns 0, 1 (I/O, no memory) or 2 (not shards of one run; message printed). */
static int read_headers(const char *cmd, shard_in *s, const char **paths, int n, int64_t *of,
                        char **config, bool *dup) {
    int rc = 0;
    size_t config_len = 0;
    for (int i = 0; i < n; i++) {
        s[i].path = paths[i];
        if (!(s[i].f = fopen(paths[i], "rb"))) {
            fprintf(stderr, "promptscore %s: cannot open %s: %s\n", cmd, paths[i], strerror(errno));
            return 1;
        }
        s[i].len = getline(&s[i].line, &s[i].cap, s[i].f);
        ps_shard_line h = s[i].len > 0 ? ps_shard_parse_line(s[i].line, (size_t)s[i].len)
                                        : (ps_shard_line){0};
        s[i].fileline = 1;
        if (h.kind != PS_SHARD_HEADER) {
            fprintf(stderr, "promptscore %s: %s is not an output of score --shard (no "
                            "{\"ps_shard\":...} header on its first line)\n", cmd, paths[i]);
            return 2;
        }
        s[i].index = h.a;
        if (i == 0) {
            *of = h.b;
            if (!(*config = strndup(h.config, h.config_len))) return 1;
            config_len = h.config_len;
        } else if (h.b != *of) {
            fprintf(stderr, "promptscore %s: %s is shard %lld of %lld but %s is of %lld\n", cmd,
                    paths[i], (long long)h.a, (long long)h.b, paths[0], (long long)*of);
            rc = 2;
        } else if (h.config_len != config_len || memcmp(h.config, *config, config_len)) {
            fprintf(stderr, "promptscore %s: %s was scored with (%.*s) but %s with (%s)\n", cmd,
                    paths[i], (int)h.config_len, h.config, paths[0], *config);
            rc = 2;
        }
        for (int j = 0; j < i; j++)
            if (s[j].index == h.a) {
                fprintf(stderr, "promptscore %s: shard %lld/%lld is given twice (%s and %s)\n",
                        cmd, (long long)h.a, (long long)*of, s[j].path, paths[i]);
                *dup = true;
            }
        s[i].cur.a = 0;
    }
    return rc;
}

/* Names the shard indexes of 0..of-1 that no file holds (the first 16). */
static void report_missing_shards(const char *cmd, const shard_in *s, int n, int64_t of) {
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
}

/* Creates OUT's temporary file beside it: *tmp (malloc, its name) and *out. Returns 0 or 1. */
static int create_temp(const char *cmd, const char *out_path, char **tmp, FILE **out) {
    size_t plen = strlen(out_path);
    if (!(*tmp = malloc(plen + 32))) return 1;
    snprintf(*tmp, plen + 32, "%s.merge-%ld.tmp", out_path, (long)getpid());
    if (!(*out = fopen(*tmp, "wb"))) {
        fprintf(stderr, "promptscore %s: cannot create %s: %s\n", cmd, *tmp, strerror(errno));
        return 1;
    }
    return 0;
}

/* What the merge saw: the lines missing and doubled so far. */
typedef struct {
    line_list missing, doubled;
    char dbl_files[600];  /* the first doubled line and its two files */
    int64_t next, last;   /* next line expected; last line written */
} merge_tally;

/* Merges the records of the n files (each at its first record) by line number, through a
 * min-heap of the files with a record at hand, into out; records are written only while no
 * line is missing or doubled. Returns 0, 1 (no memory) or 2 (a bad file; message printed). */
static int merge_records(const char *cmd, shard_in *s, int n, int64_t of, FILE *out,
                         merge_tally *t) {
    const char *last_path = NULL;
    int *heap = malloc((size_t)n * sizeof *heap);
    if (!heap) return 1;
    int nh = 0;
    for (int i = 0; i < n; i++)
        if (s[i].cur.kind != PS_SHARD_BAD) heap[nh++] = i;
    for (int i = nh / 2 - 1; i >= 0; i--) sift_down(heap, nh, i, s);
    while (nh > 0) {
        int best = heap[0];
        int64_t L = s[best].cur.a;
        if (L == t->last) {
            if (t->doubled.count == 0)
                snprintf(t->dbl_files, sizeof t->dbl_files, " (line %lld: in %s and %s)",
                         (long long)L, last_path, s[best].path);
            list_add(&t->doubled, L, L);
        } else {
            if (L > t->next) list_add(&t->missing, t->next, L - 1);
            if (s[best].cur.kind == PS_SHARD_RECORD && t->missing.count == 0 &&
                t->doubled.count == 0) {
                fputc('{', out);
                fwrite(s[best].line + s[best].cur.rest, 1,
                       (size_t)s[best].len - s[best].cur.rest, out);
            }
            t->last = L;
            last_path = s[best].path;
            t->next = L + 1;
        }
        if (!advance(cmd, &s[best], of)) {
            free(heap);
            return 2;
        }
        if (s[best].cur.kind == PS_SHARD_BAD) heap[0] = heap[--nh];
        sift_down(heap, nh, 0, s);
    }
    free(heap);
    return 0;
}

/* The end records: every file finished, all of one input (*total lines; -1 when no file has
 * an end record). Returns 0 or 2 (message printed). */
static int check_ends(const char *cmd, const shard_in *s, int n, int64_t *total) {
    int rc = 0;
    uint64_t ihash = 0;
    *total = -1;
    for (int i = 0; i < n; i++) {
        if (!s[i].ended) {
            fprintf(stderr, "promptscore %s: %s has no end record: its task did not finish "
                            "(rerun it with --resume)\n", cmd, s[i].path);
            rc = 2;
        } else if (*total < 0) {
            *total = s[i].end_lines;
            ihash = s[i].end_hash;
        } else if (s[i].end_lines != *total || s[i].end_hash != ihash) {
            fprintf(stderr, "promptscore %s: %s was scored from an input of %lld lines (hash "
                            "%016llx), %s from one of %lld (hash %016llx)\n", cmd, s[i].path,
                    (long long)s[i].end_lines, (unsigned long long)s[i].end_hash, s[0].path,
                    (long long)*total, (unsigned long long)ihash);
            rc = 2;
        }
    }
    return rc;
}

/* Names the lines missing (up to the input's total), doubled, or beyond the input. Returns 0
 * or 2. */
static int report_lines(const char *cmd, merge_tally *t, int64_t total) {
    int rc = 0;
    if (total >= t->next) list_add(&t->missing, t->next, total);
    if (t->last > total && total >= 0) {
        fprintf(stderr, "promptscore %s: the shards hold line %lld but the input had %lld\n",
                cmd, (long long)t->last, (long long)total);
        rc = 2;
    }
    list_flush(&t->missing);
    list_flush(&t->doubled);
    if (t->missing.count) {
        fprintf(stderr, "promptscore %s: %lld input line(s) missing: %s\n", cmd,
                (long long)t->missing.count, t->missing.text);
        rc = 2;
    }
    if (t->doubled.count) {
        fprintf(stderr, "promptscore %s: %lld input line(s) present twice: %s%s\n", cmd,
                (long long)t->doubled.count, t->doubled.text, t->dbl_files);
        rc = 2;
    }
    return rc;
}

/* Closes out (always); when rc is 0 and all was written, renames tmp to out_path. Returns rc,
 * or 1 on a failed write or rename. */
static int finish_output(const char *cmd, FILE *out, const char *tmp, const char *out_path,
                         int rc) {
    if (rc == 0 && (fflush(out) != 0 || ferror(out))) {
        fprintf(stderr, "promptscore %s: write failed: %s\n", cmd, strerror(errno));
        rc = 1;
    }
    if (fclose(out) != 0 && rc == 0) {
        fprintf(stderr, "promptscore %s: write failed: %s\n", cmd, strerror(errno));
        rc = 1;
    }
    if (rc == 0 && rename(tmp, out_path) != 0) {
        fprintf(stderr, "promptscore %s: cannot rename %s to %s: %s\n", cmd, tmp, out_path,
                strerror(errno));
        rc = 1;
    }
    return rc;
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
    char *tmp = NULL, *config = NULL;
    FILE *out = NULL;
    int64_t of = 0, total = -1;
    bool dup_shard = false;
    merge_tally t = {.next = 1};
    if (!s) {
        rc = 1;
        goto done;
    }
    if ((rc = read_headers(cmd, s, paths, n, &of, &config, &dup_shard))) goto done;
    if (dup_shard) rc = 2; /* the doubled lines are named below */
    if (n < of) {
        report_missing_shards(cmd, s, n, of);
        rc = 2; /* and the lines they would hold are named below */
    }
    for (int i = 0; i < n; i++)
        if (!advance(cmd, &s[i], of)) {
            rc = 2;
            goto done;
        }
    if (create_temp(cmd, out_path, &tmp, &out)) {
        rc = 1;
        goto done;
    }
    int mrc = merge_records(cmd, s, n, of, out, &t);
    if (mrc) {
        rc = mrc;
        goto done;
    }
    if (check_ends(cmd, s, n, &total)) rc = 2;
    if (report_lines(cmd, &t, total)) rc = 2;
    rc = finish_output(cmd, out, tmp, out_path, rc);
    out = NULL;
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
    free(config);
    free(paths);
    if (rc == 2) fprintf(stderr, "promptscore %s: nothing written to %s\n", cmd, out_path);
    return rc;
}
