/*
 * cli_shard.h — the shard output of `promptscore score --shard I/N [--resume]` and what
 * `promptscore merge` reads back (cli_shard.c). One JSON object per line:
 *
 *   header  {"ps_shard":I,"ps_of":N,"ps_config":"k=5 chunk=256 ..."}       first line
 *   record  {"ps_line":L,"ps_hash":"<16 hex>",<the plain output line after its '{'>
 *   blank   {"ps_line":L,"ps_hash":"<16 hex>","ps_blank":true}              a blank input line
 *   end     {"ps_end":T,"ps_input":"<16 hex>"}                              last line, when done
 *
 * L is the 1-based input line number; a shard holds the lines with (L - 1) mod N == I, in
 * increasing order. ps_hash is the FNV-1a 64-bit hash of input line L (its bytes without the
 * newline), so --resume checks that the output was written from this input; the end record
 * holds the number of input lines T and the hash of the whole input, so merge knows every line
 * 1..T must be present exactly once. Each line goes out in one write(2); a line the kernel cut
 * short (SIGKILL in a multi-page write, a full disk) is the last one of the file and lacks its
 * newline: --resume cuts it off before appending.
 */
#ifndef PS_CLI_SHARD_H
#define PS_CLI_SHARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define PS_SHARD_HASH0 0xcbf29ce484222325ULL
/* FNV-1a 64 of n bytes continued from h (start with PS_SHARD_HASH0). */
uint64_t ps_shard_hash(uint64_t h, const void *p, size_t n);

/* "I/N" with 0 <= I < N <= 1e9, digits only -> *index, *count. false: why (a sentence). */
bool ps_shard_parse_spec(const char *s, int64_t *index, int64_t *count, char *why, size_t n);

/* An open shard output. */
typedef struct {
    int fd;
    bool own_fd;            /* opened here (closed by ps_shard_close) */
    int64_t index, count;
    int64_t lineno;         /* input lines read so far (the last one's number) */
    uint64_t input_hash;    /* FNV-1a 64 of the input bytes read so far */
    int64_t kept;           /* records a previous run had written (kept by --resume) */
    bool complete;          /* --resume found the end record: nothing left to do */
    bool cut;               /* --resume cut off a half-written last line */
} ps_shard_out;

/* Opens the shard output path (NULL or "-": stdout, not with resume). Without resume the file
 * is created or truncated and the header written. With resume, an existing non-empty file is
 * read first: its header must say this shard and this config; each record must be the next
 * line of this shard in `in` (read in step, line by line: so->lineno, so->input_hash follow)
 * with the same hash; an end record must match the whole input. Only when all of that holds is
 * a half-written last line cut off; the file is then appended to. Returns 0, 2 when the output
 * does not match (why says which line and how; the file is untouched), 1 on an I/O error. */
int ps_shard_open(const char *path, int64_t index, int64_t count, const char *config,
                  bool resume, FILE *in, ps_shard_out *so, char *why, size_t why_len);

/* Counts the input line just read (got bytes, its newline included when present): lineno
 * and the input hash move on; returns the line's own hash (without the newline). */
uint64_t ps_shard_consume(ps_shard_out *so, const char *line, size_t got);
/* Whether input line lineno (from 1) belongs to this shard. */
bool ps_shard_mine(const ps_shard_out *so, int64_t lineno);

/* Appends the record of input line `lineno` (hash h): plain is the plain output line
 * ("{...}\n", len bytes), or NULL for a blank input line. One write(2). false on a write
 * error (errno). */
bool ps_shard_write(ps_shard_out *so, int64_t lineno, uint64_t h, const char *plain, size_t len);
/* Appends the end record (so->lineno lines, so->input_hash). */
bool ps_shard_write_end(ps_shard_out *so);
/* Closes the output; false when close failed. */
bool ps_shard_close(ps_shard_out *so);

/* One line of a shard file, parsed (line: len bytes, newline included when present). */
typedef enum { PS_SHARD_BAD, PS_SHARD_HEADER, PS_SHARD_RECORD, PS_SHARD_BLANK, PS_SHARD_END } ps_shard_kind;
typedef struct {
    ps_shard_kind kind;
    int64_t a, b;           /* header: I, N; record/blank: L; end: T */
    uint64_t hash;          /* record/blank: line hash; end: input hash */
    const char *config;     /* header: the config (not terminated), config_len bytes */
    size_t config_len;
    size_t rest;            /* record: offset of the plain line's body (after the ps_ keys) */
} ps_shard_line;
ps_shard_line ps_shard_parse_line(const char *line, size_t len);

#endif
