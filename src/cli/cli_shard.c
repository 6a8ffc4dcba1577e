/*
 * cli_shard.c — the shard output of `score --shard I/N [--resume]` (format in cli_shard.h):
 * writing its lines, parsing them back, and the --resume check.
 *
 * --resume reads the existing output and the input in step: the header must name this shard
 * and config; each record must be the next line of the shard (no line skipped, none twice)
 * and carry the hash of that input line; an end record must match the whole input. Nothing is
 * changed until all of that holds; then a half-written last line (no newline: the kernel may
 * cut a multi-page write(2) short when SIGKILL arrives) is cut off and the run goes on
 * appending from the next line of its shard. Each line is one write(2) on an O_APPEND fd, so
 * a line is either whole, or the last one and unterminated.
 */
#include "cli/cli_shard.h"
#include "base/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

uint64_t ps_shard_hash(uint64_t h, const void *p, size_t n) { return ps_fnv1a64(h, p, n); }

static bool parse_i64(const char *s, size_t n, int64_t max, int64_t *out) {
    if (n == 0 || n > 18) return false;
    int64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return false;
        v = v * 10 + (s[i] - '0');
    }
    if (v > max) return false;
    *out = v;
    return true;
}

bool ps_shard_parse_spec(const char *s, int64_t *index, int64_t *count, char *why, size_t n) {
    const char *slash = s ? strchr(s, '/') : NULL;
    int64_t i = 0, c = 0;
    if (!s || !slash || !parse_i64(s, (size_t)(slash - s), 1000000000, &i) ||
        !parse_i64(slash + 1, strlen(slash + 1), 1000000000, &c)) {
        snprintf(why, n, "--shard wants I/N with whole numbers 0 <= I < N (shard I of N, "
                         "counted from 0), got '%s'", s ? s : "nothing");
        return false;
    }
    if (c < 1 || i >= c) {
        snprintf(why, n, "--shard %s: the shard index must be in 0..N-1 (%s)", s,
                 c < 1 ? "N must be at least 1" : "shards are counted from 0");
        return false;
    }
    *index = i;
    *count = c;
    return true;
}

/* ---- parsing ------------------------------------------------------------------------------ */

/* Matches the literal lit at *p (advancing) */
static bool lit(const char *s, size_t len, size_t *p, const char *l) {
    size_t n = strlen(l);
    if (len - *p < n || memcmp(s + *p, l, n)) return false;
    *p += n;
    return true;
}

static bool num(const char *s, size_t len, size_t *p, int64_t *out) {
    size_t q = *p;
    while (q < len && s[q] >= '0' && s[q] <= '9') q++;
    if (!parse_i64(s + *p, q - *p, INT64_MAX / 16, out)) return false;
    *p = q;
    return true;
}

static bool hex16(const char *s, size_t len, size_t *p, uint64_t *out) {
    if (len - *p < 18 || s[*p] != '"' || s[*p + 17] != '"') return false;
    uint64_t v = 0;
    for (size_t i = 1; i <= 16; i++) {
        char c = s[*p + i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0) return false;
        v = v << 4 | (uint64_t)d;
    }
    *p += 18;
    *out = v;
    return true;
}

/* The line ends at p (with or without its newline). */
static bool at_end(size_t len, size_t p, const char *s) {
    return p == len || (p + 1 == len && s[p] == '\n');
}

ps_shard_line ps_shard_parse_line(const char *s, size_t len) {
    ps_shard_line r = {.kind = PS_SHARD_BAD};
    size_t p = 0;
    if (lit(s, len, &p, "{\"ps_line\":")) {
        if (!num(s, len, &p, &r.a) || r.a < 1 || !lit(s, len, &p, ",\"ps_hash\":") ||
            !hex16(s, len, &p, &r.hash))
            return r;
        size_t q = p;
        if (lit(s, len, &q, ",\"ps_blank\":true}") && at_end(len, q, s)) {
            r.kind = PS_SHARD_BLANK;
        } else if (lit(s, len, &p, ",\"") && len > 0 && s[len - 1] == '\n') {
            r.kind = PS_SHARD_RECORD;
            r.rest = p - 1;
        }
    } else if (lit(s, len, &p, "{\"ps_shard\":")) {
        if (!num(s, len, &p, &r.a) || !lit(s, len, &p, ",\"ps_of\":") || !num(s, len, &p, &r.b) ||
            !lit(s, len, &p, ",\"ps_config\":\""))
            return r;
        size_t q = p;
        while (q < len && s[q] != '"' && s[q] != '\\' && s[q] != '\n') q++;
        r.config = s + p;
        r.config_len = q - p;
        if (lit(s, len, &q, "\"}") && at_end(len, q, s) && r.b >= 1 && r.a < r.b)
            r.kind = PS_SHARD_HEADER;
    } else if (lit(s, len, &p, "{\"ps_end\":")) {
        if (num(s, len, &p, &r.a) && lit(s, len, &p, ",\"ps_input\":") &&
            hex16(s, len, &p, &r.hash) && lit(s, len, &p, "}") && at_end(len, p, s))
            r.kind = PS_SHARD_END;
    }
    return r;
}

/* ---- writing ------------------------------------------------------------------------------ */

static int header(char *dst, size_t n, int64_t index, int64_t count, const char *config) {
    return snprintf(dst, n, "{\"ps_shard\":%lld,\"ps_of\":%lld,\"ps_config\":\"%s\"}\n",
                    (long long)index, (long long)count, config);
}

bool ps_shard_write(ps_shard_out *so, int64_t lineno, uint64_t h, const char *plain, size_t len) {
    char pre[96];
    int np = snprintf(pre, sizeof pre, "{\"ps_line\":%lld,\"ps_hash\":\"%016llx\"",
                      (long long)lineno, (unsigned long long)h);
    const char *body = plain ? plain + 1 : "\"ps_blank\":true}\n"; /* after the plain '{' */
    size_t nb = plain ? len - 1 : strlen(body);
    char *buf = malloc((size_t)np + 1 + nb);
    if (!buf) {
        errno = ENOMEM;
        return false;
    }
    memcpy(buf, pre, (size_t)np);
    buf[np] = ',';
    memcpy(buf + np + 1, body, nb);
    bool ok = ps_write_all(so->fd, buf, (size_t)np + 1 + nb); /* one write(2) unless cut short */
    free(buf);
    return ok;
}

bool ps_shard_write_end(ps_shard_out *so) {
    char b[96];
    int n = snprintf(b, sizeof b, "{\"ps_end\":%lld,\"ps_input\":\"%016llx\"}\n",
                     (long long)so->lineno, (unsigned long long)so->input_hash);
    return ps_write_all(so->fd, b, (size_t)n);
}

bool ps_shard_close(ps_shard_out *so) {
    bool ok = true;
    if (so->own_fd && so->fd >= 0) ok = close(so->fd) == 0;
    so->fd = -1;
    return ok;
}

/* ---- --resume ----------------------------------------------------------------------------- */

typedef struct {
    FILE *in;
    ps_shard_out *so;
    char *line;
    size_t cap;
} input_reader;

/* Reads the next input line into r->line; updates lineno and the input hash. -1 at EOF. */
static ssize_t next_input(input_reader *r, uint64_t *h) {
    ssize_t got = getline(&r->line, &r->cap, r->in);
    if (got < 0) return -1;
    r->so->lineno++;
    r->so->input_hash = ps_shard_hash(r->so->input_hash, r->line, (size_t)got);
    size_t n = (size_t)got;
    if (n > 0 && r->line[n - 1] == '\n') n--;
    *h = ps_shard_hash(PS_SHARD_HASH0, r->line, n);
    return got;
}

static bool mine(const ps_shard_out *so, int64_t lineno) {
    return (lineno - 1) % so->count == so->index;
}

static int fail(char *why, size_t n, int rc, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, n, fmt, ap);
    va_end(ap);
    return rc;
}

/* Checks the existing output (file f, open for reading) against the input; on success
 * *good_end is the length of its whole lines and *cut whether a half line follows. */
/* Long on purpose: one walk over the existing output's lines beside the input's, each case a
 * refusal with its own message (the resume check's contract, docs/scale-out.md). */
static int check_existing(const char *path, FILE *f, const char *hdr, input_reader *ir,
                          off_t *good_end, char *why, size_t wn) {
    ps_shard_out *so = ir->so;
    char *line = NULL;
    size_t cap = 0;
    int rc = 0;
    ssize_t got = getline(&line, &cap, f);
    off_t off = 0;
    if (got > 0 && line[got - 1] != '\n') {
        /* a half-written header: the first write of an earlier run was cut short */
        if ((size_t)got < strlen(hdr) && !memcmp(line, hdr, (size_t)got)) {
            *good_end = 0;
            so->cut = true;
            goto out;
        }
    }
    ps_shard_line h = got > 0 ? ps_shard_parse_line(line, (size_t)got) : (ps_shard_line){0};
    if (h.kind != PS_SHARD_HEADER) {
        rc = fail(why, wn, 2, "%s is not the output of score --shard/--resume (its first line "
                  "is not a {\"ps_shard\":...} header); it was left untouched", path);
        goto out;
    }
    if (h.a != so->index || h.b != so->count) {
        rc = fail(why, wn, 2, "%s holds shard %lld/%lld, this run is shard %lld/%lld; it was "
                  "left untouched", path, (long long)h.a, (long long)h.b, (long long)so->index,
                  (long long)so->count);
        goto out;
    }
    const char *cfg = strstr(hdr, "\"ps_config\":\"") + 13;
    size_t cfg_len = strlen(cfg) - 3; /* without "}\n */
    if (h.config_len != cfg_len || memcmp(h.config, cfg, cfg_len)) {
        rc = fail(why, wn, 2, "%s was scored with different settings (%.*s), this run has "
                  "(%.*s); it was left untouched", path, (int)h.config_len, h.config,
                  (int)cfg_len, cfg);
        goto out;
    }
    off = (off_t)got;
    int64_t records = 0;
    while ((got = getline(&line, &cap, f)) >= 0) {
        if (got == 0 || line[got - 1] != '\n') {
            /* the last line, half written: ours when it begins like one of our lines */
            size_t n = (size_t)got < 5 ? (size_t)got : 5;
            if (memcmp(line, "{\"ps_", n)) {
                rc = fail(why, wn, 2, "%s ends with a line that score did not write (line %lld "
                          "of the file); it was left untouched", path, (long long)records + 2);
                goto out;
            }
            so->cut = true;
            break;
        }
        ps_shard_line r = ps_shard_parse_line(line, (size_t)got);
        if (r.kind == PS_SHARD_END) {
            if (getline(&line, &cap, f) >= 0) {
                rc = fail(why, wn, 2, "%s has lines after its end record; it was left untouched",
                          path);
                goto out;
            }
            uint64_t lh;
            while (next_input(ir, &lh) >= 0)
                if (mine(so, so->lineno)) {
                    rc = fail(why, wn, 2, "%s has its end record but lacks input line %lld; it "
                              "was left untouched", path, (long long)so->lineno);
                    goto out;
                }
            if (ferror(ir->in)) {
                rc = fail(why, wn, 1, "read failed after input line %lld: %s",
                          (long long)so->lineno, strerror(errno));
                goto out;
            }
            if (r.a != so->lineno || r.hash != so->input_hash) {
                rc = fail(why, wn, 2, "%s ends with a record of %lld input lines (hash %016llx) "
                          "but the input has %lld lines (hash %016llx): a different input; it "
                          "was left untouched", path, (long long)r.a,
                          (unsigned long long)r.hash, (long long)so->lineno,
                          (unsigned long long)so->input_hash);
                goto out;
            }
            so->complete = true;
            off += (off_t)got;
            break;
        }
        if (r.kind != PS_SHARD_RECORD && r.kind != PS_SHARD_BLANK) {
            rc = fail(why, wn, 2, "line %lld of %s is not a score --shard record; it was left "
                      "untouched", (long long)records + 2, path);
            goto out;
        }
        if (r.a <= so->lineno || !mine(so, r.a)) {
            rc = fail(why, wn, 2, "%s holds input line %lld %s; it was left untouched", path,
                      (long long)r.a,
                      !mine(so, r.a) ? "which is not in this shard"
                                     : "out of order or twice (not written by score --resume)");
            goto out;
        }
        uint64_t lh = 0;
        while (so->lineno < r.a) {
            if (next_input(ir, &lh) < 0) {
                rc = ferror(ir->in)
                         ? fail(why, wn, 1, "read failed after input line %lld: %s",
                                (long long)so->lineno, strerror(errno))
                         : fail(why, wn, 2, "%s holds input line %lld but the input has only "
                                "%lld lines: a different input; it was left untouched", path,
                                (long long)r.a, (long long)so->lineno);
                goto out;
            }
            if (so->lineno < r.a && mine(so, so->lineno)) {
                rc = fail(why, wn, 2, "%s lacks input line %lld but holds line %lld (not "
                          "written by score --resume); it was left untouched", path,
                          (long long)so->lineno, (long long)r.a);
                goto out;
            }
        }
        if (lh != r.hash) {
            rc = fail(why, wn, 2, "input line %lld is not the line %s was scored from (hash "
                      "%016llx, the output says %016llx): a different input; it was left "
                      "untouched", (long long)r.a, path, (unsigned long long)lh,
                      (unsigned long long)r.hash);
            goto out;
        }
        records++;
        off += (off_t)got;
    }
    if (ferror(f)) rc = fail(why, wn, 1, "cannot read %s: %s", path, strerror(errno));
    so->kept = records;
    *good_end = off;
out:
    free(line);
    return rc;
}

int ps_shard_open(const char *path, int64_t index, int64_t count, const char *config,
                  bool resume, FILE *in, ps_shard_out *so, char *why, size_t why_len) {
    memset(so, 0, sizeof *so);
    so->fd = -1;
    so->index = index;
    so->count = count;
    so->input_hash = PS_SHARD_HASH0;
    char hdr[512];
    int hn = header(hdr, sizeof hdr, index, count, config);
    if (hn < 0 || (size_t)hn >= sizeof hdr) return fail(why, why_len, 1, "config too long");
    if (!path || !strcmp(path, "-")) {
        if (resume) return fail(why, why_len, 2, "--resume needs the output file (-o FILE)");
        so->fd = STDOUT_FILENO;
    } else if (!resume) {
        so->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
        so->own_fd = true;
    } else {
        /* O_CREAT without O_TRUNC: an existing file is only read until it checks out */
        so->fd = open(path, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        so->own_fd = true;
        struct stat sb;
        if (so->fd >= 0 && fstat(so->fd, &sb) == 0 && !S_ISREG(sb.st_mode)) {
            ps_shard_close(so);
            return fail(why, why_len, 2, "--resume: %s is not a regular file", path);
        }
        if (so->fd >= 0 && sb.st_size > 0) {
            FILE *f = fopen(path, "rb");
            if (!f) {
                int e = errno;
                ps_shard_close(so);
                return fail(why, why_len, 1, "cannot read %s: %s", path, strerror(e));
            }
            input_reader ir = {.in = in, .so = so};
            off_t good_end = 0;
            int rc = check_existing(path, f, hdr, &ir, &good_end, why, why_len);
            fclose(f);
            free(ir.line);
            if (rc != 0) {
                ps_shard_close(so);
                return rc;
            }
            if (so->cut && ftruncate(so->fd, good_end) != 0) {
                int e = errno;
                ps_shard_close(so);
                return fail(why, why_len, 1, "cannot cut the half line off %s: %s", path,
                            strerror(e));
            }
            if (good_end > 0) return 0; /* header present: append after it */
        }
    }
    if (so->fd < 0)
        return fail(why, why_len, 1, "cannot create %s: %s", path, strerror(errno));
    if (!ps_write_all(so->fd, hdr, (size_t)hn)) {
        int e = errno;
        ps_shard_close(so);
        return fail(why, why_len, 1, "write failed: %s", strerror(e));
    }
    return 0;
}

uint64_t ps_shard_consume(ps_shard_out *so, const char *line, size_t got) {
    so->lineno++;
    so->input_hash = ps_shard_hash(so->input_hash, line, got);
    if (got > 0 && line[got - 1] == '\n') got--;
    return ps_shard_hash(PS_SHARD_HASH0, line, got);
}

bool ps_shard_mine(const ps_shard_out *so, int64_t lineno) { return mine(so, lineno); }
