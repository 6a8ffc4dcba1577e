/*
 * jscan.h — a pre-scanner for JSON request text (jscan.c): it walks the raw bytes once, in
 * pieces as they arrive, with a fixed-size state (no allocation at all), and refuses a text
 * whose shape is over a limit before any parser builds a tree of it:
 *
 *   - more bytes than max_bytes,
 *   - nesting of arrays / objects deeper than max_depth,
 *   - under the top-level key "prompt": an id list (an array of numbers, flat or as an element
 *     of a list of prompts) longer than max_ids, more prompts (elements of a list of strings or
 *     of id lists) than max_prompts, more ids in all than max_total_ids.
 *
 * It also checks the JSON grammar (strings, escapes, numbers, literals, commas, colons; not the
 * UTF-8 of strings, which the full parser checks) and remembers the byte span of the last
 * top-level "id" value that was complete, so a caller can echo the id of a text that fails
 * later. Every refusal is {code, message, byte offset} in a ps_error and a `what` saying which
 * check it was, so a server can map a limit to 413 and a syntax error to 400.
 *
 * A key written with escapes ("pr\u006fmpt") may be "prompt" to the full parser: the limits on
 * "prompt" apply to the value of every such key (conservative; never a way around them).
 */
#ifndef PS_JSCAN_H
#define PS_JSCAN_H

#include "base/impl.h"

/* The deepest nesting the scanner can track; max_depth is clamped to it. */
#define PS_JSCAN_DEPTH_MAX 256

/* Limits; 0 means none (max_depth 0 means PS_JSCAN_DEPTH_MAX). */
typedef struct {
    int64_t max_bytes;
    int32_t max_depth;
    int64_t max_ids;       /* elements of one id list under "prompt" */
    int64_t max_prompts;   /* elements of a list of prompts under "prompt" */
    int64_t max_total_ids; /* numbers under "prompt", over all its lists */
} ps_jscan_limits;

/* Which check refused the text (ps_jscan.what). */
typedef enum {
    PS_JSCAN_OK = 0,
    PS_JSCAN_SYNTAX,    /* not JSON (PS_ERR_FORMAT) */
    PS_JSCAN_BYTES,     /* over max_bytes (PS_ERR_LIMIT) */
    PS_JSCAN_DEPTH,     /* over max_depth (PS_ERR_LIMIT) */
    PS_JSCAN_IDS,       /* an id list over max_ids (PS_ERR_CONTEXT: a prompt longer than allowed) */
    PS_JSCAN_PROMPTS,   /* over max_prompts (PS_ERR_LIMIT) */
    PS_JSCAN_TOTAL_IDS, /* over max_total_ids (PS_ERR_LIMIT) */
} ps_jscan_what;

typedef struct {
    /* read these */
    ps_jscan_what what;  /* PS_JSCAN_OK until a check fails; then every feed returns the error */
    int64_t n_bytes;     /* bytes read so far (after a refusal: up to the byte refused) */
    int64_t n_prompts;   /* prompts seen under "prompt" (a string or an id list counts as 1) */
    int64_t n_ids;       /* numbers seen under "prompt" */
    int64_t id_start, id_end; /* [start, end) of the last complete top-level "id" value, or -1 */
    int32_t depth_max;   /* deepest nesting seen */
    /* private */
    ps_jscan_limits lim;
    ps_error err;
    int32_t depth;
    uint8_t expect;      /* what the grammar wants next */
    uint8_t lex;         /* inside a string / number / literal */
    uint8_t sub;         /* the lexer's sub-state */
    uint8_t key_match;   /* a top-level key being read: bit 0 "prompt", bit 1 "id", bit 2 escaped */
    int32_t key_len;
    int32_t prompt_depth; /* depth of the "prompt" value's container (0: not inside one) */
    int32_t value_key;   /* the key of the top-level value being read (key_match bits) */
    int64_t value_start; /* offset where that value began */
    int64_t list_len;    /* numbers directly in the prompt's list */
    int64_t list_start;  /* offset of that list's '[' */
    int64_t inner_len;   /* numbers in the inner id list being read (a list of prompts) */
    bool in_string_key;  /* the string being lexed is an object key */
    uint64_t stack[PS_JSCAN_DEPTH_MAX / 64]; /* bit d: 1 = object, 0 = array at depth d + 1 */
} ps_jscan;

/* Starts a scan with these limits (copied; NULL = none). */
void ps_jscan_init(ps_jscan *s, const ps_jscan_limits *lim);
/* Feeds the next n bytes. Returns PS_OK, or the refusal (PS_ERR_FORMAT, PS_ERR_LIMIT,
 * PS_ERR_CONTEXT) with err (may be NULL) naming it and its byte offset from the first byte
 * fed; once refused, every later call returns the same. Never allocates. */
ps_status ps_jscan_feed(ps_jscan *s, const char *data, size_t n, ps_error *err);
/* The text is complete: PS_OK when it was one whole JSON value, else as ps_jscan_feed. */
ps_status ps_jscan_end(ps_jscan *s, ps_error *err);
/* init + feed + end over one buffer. */
ps_status ps_jscan_text(const char *text, size_t n, const ps_jscan_limits *lim, ps_jscan *s,
                        ps_error *err);

#endif /* PS_JSCAN_H */
