/*
 * detect.c — the front end's part of the contamination scores: parsing --min-k, the zlib
 * ratio (mimir's zlib attack: the mean NLL over the size of zlib.compress(text), with Debian's
 * zlib at its default level, so a Python zlib.compress of the same bytes gives the same size),
 * and the "detect" object of a line or a choice (the other scores: ps_detect_compute).
 */
#include "front/detect.h"
#include "front/json.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

ps_detect_opts ps_detect_default_opts(void) {
    ps_detect_opts o;
    memset(&o, 0, sizeof o);
    o.n_k = 1;
    o.k[0] = PS_DETECT_DEFAULT_K;
    return o;
}

bool ps_detect_parse_k(const char *list, ps_detect_opts *o, char *why, size_t why_len) {
    ps_detect_opts r;
    memset(&r, 0, sizeof r);
    const char *p = list;
    for (;;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char item[32];
        if (len == 0 || len >= sizeof item) {
            snprintf(why, why_len, "--min-k wants percentages like 10,20,30 (integers 1 to 100), "
                     "got '%s'", list);
            return false;
        }
        memcpy(item, p, len);
        item[len] = 0;
        char *e = NULL;
        errno = 0;
        long v = strtol(item, &e, 10);
        if (errno || !e || *e || item[0] == '+' || item[0] == ' ' || v < 1 || v > 100) {
            snprintf(why, why_len, "--min-k: '%s' is not a percentage from 1 to 100", item);
            return false;
        }
        if (r.n_k == PS_DETECT_MAX_K) {
            snprintf(why, why_len, "--min-k: at most %d percentages", PS_DETECT_MAX_K);
            return false;
        }
        r.k[r.n_k++] = (int32_t)v;
        if (!end) break;
        p = end + 1;
    }
    *o = r;
    return true;
}

int64_t ps_detect_zlib_len(const void *bytes, size_t len) {
    uLongf cap = compressBound((uLong)len);
    Bytef *buf = ps_malloc(cap ? cap : 1);
    if (!buf) return -1;
    int zr = compress(buf, &cap, (const Bytef *)bytes, (uLong)len);
    ps_free(buf);
    return zr == Z_OK ? (int64_t)cap : -1;
}

/* A double, or null when it is not finite (an empty selection, a zero sigma). */
static void f64_or_null(ps_buf *b, double v) {
    if (isfinite(v)) ps_json_f64(b, v);
    else ps_buf_append(b, "null", 4);
}

static void k_object(ps_buf *b, const ps_detect_scores *s, const double *v) {
    ps_buf_putc(b, '{');
    for (int32_t j = 0; j < s->n_k; j++) {
        ps_buf_printf(b, "%s\"%d\":", j ? "," : "", (int)s->k[j]);
        f64_or_null(b, v[j]);
    }
    ps_buf_putc(b, '}');
}

ps_status ps_detect_write(ps_buf *b, const ps_detect_opts *o, const ps_score_result *r,
                          const ps_vocab *vocab, const char *text, size_t text_len,
                          ps_error *err) {
    ps_detect_scores s;
    ps_status st = ps_detect_compute(r, o->k, o->n_k, &s, err);
    if (st != PS_OK) return st;
    int64_t zlen;
    if (text) {
        zlen = ps_detect_zlib_len(text, text_len);
    } else { /* an id prompt: the text of its tokens, control tokens left out */
        ps_buf t;
        ps_buf_init(&t);
        for (int32_t i = 0; i < r->n_prompt; i++) {
            const char *tb;
            size_t tl;
            if (ps_vocab_is_control(vocab, r->tokens[i])) continue;
            if (ps_vocab_token_bytes(vocab, r->tokens[i], &tb, &tl) == PS_OK)
                ps_buf_append(&t, tb, tl);
        }
        zlen = t.oom ? -1 : ps_detect_zlib_len(t.data ? t.data : "", t.len);
        ps_buf_free(&t);
    }
    if (zlen < 0) return ps_fail(err, PS_ERR_NOMEM, -1, "detect: out of memory (zlib)");
    ps_buf_puts(b, "{\"min_k\":");
    k_object(b, &s, s.min_k);
    ps_buf_puts(b, ",\"min_k_pp\":");
    k_object(b, &s, s.min_k_pp);
    ps_buf_puts(b, ",\"zlib_ratio\":");
    f64_or_null(b, s.mean_nll / (double)zlen);
    if (r->compare_logprob) {
        ps_buf_puts(b, ",\"ref_ratio\":");
        f64_or_null(b, s.ref_ratio);
    }
    ps_buf_putc(b, '}');
    return PS_OK;
}
