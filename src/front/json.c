/*
 * json.c — the response writer: JSON strings with invalid UTF-8 replaced, float32 values that parse back to the same float32, and the OpenAI
 * `logprobs` object of docs/api.md written straight from a ps_score_result.
 *
 * The one idea: everything is appended to a ps_buf (src/base/buf.c) that remembers an allocation failure
 * (`oom`) instead of reporting it at every call, so writers stay straight-line code and check
 * once at the end. Floats use the shortest of "%.6g".."%.9g" that strtof() reads back to the
 * same bits ("%.9g" always does); -inf becomes -9999.0 and NaN null. Token texts are the
 * token's bytes with every maximal run of invalid UTF-8 replaced by U+FFFD, so that every
 * string written is valid UTF-8 and text offsets can be counted in code points.
 */
#include "front/json.h"
#include "base/util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* ---------------------------------------------------------------------------------------- */
/* UTF-8                                                                                    */
/* ---------------------------------------------------------------------------------------- */

static const char REPLACEMENT[3] = {(char)0xEF, (char)0xBF, (char)0xBD}; /* U+FFFD */

/* u[i] >= 0x80: returns the index after the valid sequence at i, or after the maximal run of
 * invalid bytes there (it ends at ASCII or at a valid sequence); for a run, s[*start..i) and
 * one U+FFFD are appended and *start moves past the run. */
static size_t step_non_ascii(ps_buf *b, const char *s, size_t *start, size_t i, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    size_t l = ps_utf8_valid_len(u + i, n - i);
    if (l) return i + l;
    ps_buf_append(b, s + *start, i - *start);
    ps_buf_append(b, REPLACEMENT, 3);
    while (i < n && u[i] >= 0x80 && ps_utf8_valid_len(u + i, n - i) == 0) i++;
    return *start = i;
}

/* Appends s[0..n) with every maximal run of invalid bytes replaced by one U+FFFD. */
static void append_utf8_clean(ps_buf *b, const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0, start = 0;
    while (i < n) i = u[i] < 0x80 ? i + 1 : step_non_ascii(b, s, &start, i, n);
    ps_buf_append(b, s + start, n - start);
}

/* Code points in valid UTF-8. */
static int64_t utf8_count(const char *s, size_t n) {
    int64_t c = 0;
    for (size_t i = 0; i < n; i++) c += ((unsigned char)s[i] & 0xC0) != 0x80;
    return c;
}

/* ---------------------------------------------------------------------------------------- */
/* Strings and numbers                                                                      */
/* ---------------------------------------------------------------------------------------- */

void ps_json_str(ps_buf *b, const char *s, size_t n) {
    static const char hex[] = "0123456789abcdef";
    const unsigned char *u = (const unsigned char *)s;
    ps_buf_putc(b, '"');
    size_t i = 0, start = 0;
    while (i < n) {
        unsigned char c = u[i];
        if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
            i++;
            continue;
        }
        if (c >= 0x80) {
            i = step_non_ascii(b, s, &start, i, n);
            continue;
        }
        ps_buf_append(b, s + start, i - start);
        char esc[6] = {'\\', 0, 0, 0, 0, 0};
        size_t el = 2;
        switch (c) {
        case '"': esc[1] = '"'; break;
        case '\\': esc[1] = '\\'; break;
        case '\n': esc[1] = 'n'; break;
        case '\r': esc[1] = 'r'; break;
        case '\t': esc[1] = 't'; break;
        case '\b': esc[1] = 'b'; break;
        case '\f': esc[1] = 'f'; break;
        default:
            esc[1] = 'u';
            esc[2] = '0';
            esc[3] = '0';
            esc[4] = hex[c >> 4];
            esc[5] = hex[c & 15];
            el = 6;
        }
        ps_buf_append(b, esc, el);
        i++;
        start = i;
    }
    ps_buf_append(b, s + start, n - start);
    ps_buf_putc(b, '"');
}

/* The slow, obviously right way: the shortest "%.{6..9}g" that strtof() reads back bitwise
 * equal ("%.9g" always does). About 650 ns a value. out: >= 32 bytes; returns the length. */
static int format_f32_slow(char *out, float v) {
    int n = 0;
    for (int prec = 6; prec <= 9; prec++) {
        n = snprintf(out, 32, "%.*g", prec, (double)v);
        if (prec == 9) break;
        float back = strtof(out, NULL);
        if (memcmp(&back, &v, sizeof v) == 0) break;
    }
    return n;
}

/* The same string, exactly, by integer arithmetic (about 30x faster). For precision p and
 * decimal exponent E0 (10^E0 <= |v| < 10^(E0+1)), the scaled value |v| * 10^k with
 * k = p - 1 - E0 is X = m * 5^k * 2^s (v = m * 2^e, s = e + k), exact in 128 bits when
 * 0 <= k <= 27 and s < 0. N = X rounded half-to-even is what printf's "%.{p}g" prints; it
 * reads back as v when |N - X| is below half an ulp of v scaled the same way (5^k * 2^(s-1);
 * a quarter ulp below a power of two; at exactly half, when m is even, as strtof rounds ties
 * to even). Outside that range (|v| < 1e-19 or >= 1e7, zero, subnormals) it returns -1 and
 * the caller takes the slow path. tests/test_json.c compares both on 200k values. */
typedef unsigned __int128 ps_u128;

static const double P10[27] = {1e-19, 1e-18, 1e-17, 1e-16, 1e-15, 1e-14, 1e-13, 1e-12, 1e-11,
                               1e-10, 1e-9,  1e-8,  1e-7,  1e-6,  1e-5,  1e-4,  1e-3,  1e-2,
                               1e-1,  1e0,   1e1,   1e2,   1e3,   1e4,   1e5,   1e6,   1e7};

static int write_g(char *out, bool neg, uint64_t n, int p, int e10) {
    char dig[12];
    for (int i = p - 1; i >= 0; i--) {
        dig[i] = (char)('0' + n % 10);
        n /= 10;
    }
    int nd = p;
    while (nd > 1 && dig[nd - 1] == '0') nd--;
    char *o = out;
    if (neg) *o++ = '-';
    if (e10 < -4 || e10 >= p) { /* %e style: d[.ddd]e±XX */
        *o++ = dig[0];
        if (nd > 1) {
            *o++ = '.';
            memcpy(o, dig + 1, (size_t)nd - 1);
            o += nd - 1;
        }
        *o++ = 'e';
        *o++ = e10 < 0 ? '-' : '+';
        int ae = e10 < 0 ? -e10 : e10;
        *o++ = (char)('0' + ae / 10);
        *o++ = (char)('0' + ae % 10);
    } else if (e10 >= 0) { /* %f style, integer part of e10 + 1 digits */
        for (int i = 0; i <= e10; i++) *o++ = i < nd ? dig[i] : '0';
        if (nd > e10 + 1) {
            *o++ = '.';
            memcpy(o, dig + e10 + 1, (size_t)(nd - e10 - 1));
            o += nd - e10 - 1;
        }
    } else { /* 0.000ddd */
        *o++ = '0';
        *o++ = '.';
        for (int i = 0; i < -e10 - 1; i++) *o++ = '0';
        memcpy(o, dig, (size_t)nd);
        o += nd;
    }
    *o = '\0';
    return (int)(o - out);
}

static int format_f32_fast(char *out, float v) {
    uint32_t bits;
    memcpy(&bits, &v, 4);
    uint32_t bexp = (bits >> 23) & 0xffu, frac = bits & 0x7fffffu;
    if (bexp == 0 || bexp == 0xff) return -1;
    double x = fabs((double)v);
    if (!(x >= P10[0] && x < P10[26])) return -1;
    int lo = 0, hi = 25; /* find i with P10[i] <= x < P10[i + 1] */
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (x >= P10[mid]) lo = mid;
        else hi = mid - 1;
    }
    int e0 = lo - 19;
    uint64_t m = frac | 0x800000u;
    int e = (int)bexp - 150;
    for (int p = 6; p <= 9; p++) {
        int k = p - 1 - e0;
        int sh = -(e + k);
        if (k < 0 || k > 27 || sh < 1 || sh > 95) return -1;
        uint64_t p5 = 1;
        for (int i = 0; i < k; i++) p5 *= 5;
        ps_u128 a = (ps_u128)m * p5;
        ps_u128 n = a >> sh, rem = a - (n << sh), half = (ps_u128)1 << (sh - 1);
        if (rem > half || (rem == half && (n & 1))) n++;
        /* in units of 2^-(sh + 2): X = 4a, N = n << (sh + 2), half an ulp = 2 * 5^k */
        ps_u128 ns = n << (sh + 2), xs = a << 2, h = (ps_u128)p5 << 1;
        bool ok;
        if (ns >= xs) {
            ok = ns - xs < h || (ns - xs == h && !(m & 1));
        } else {
            ps_u128 hl = (frac == 0 && bexp > 1) ? h >> 1 : h;
            ok = xs - ns < hl || (xs - ns == hl && !(m & 1));
        }
        if (!ok) continue;
        uint64_t pow10p = 1;
        for (int i = 0; i < p; i++) pow10p *= 10;
        int e10 = e0;
        if ((uint64_t)n == pow10p) { /* rounded up to the next decade */
            n /= 10;
            e10++;
        }
        return write_g(out, bits >> 31, (uint64_t)n, p, e10);
    }
    return -1;
}

/* The shortest "%.{6..9}g" form of v that strtof() reads back to the same bits. v finite. */
static int format_f32(char *out, float v) {
    int n = format_f32_fast(out, v);
    return n >= 0 ? n : format_f32_slow(out, v);
}

/* The one writer of the values the contract has no number for: -inf (a token the model gives
 * no probability) is -9999.0, NaN and +inf are null. Returns false for a finite v. */
static bool json_nonfinite(ps_buf *b, double v) {
    if (isnan(v) || (isinf(v) && v > 0)) {
        ps_buf_append(b, "null", 4);
        return true;
    }
    if (isinf(v)) {
        ps_buf_append(b, "-9999.0", 7);
        return true;
    }
    return false;
}

void ps_json_f64(ps_buf *b, double v) {
    if (json_nonfinite(b, v)) return;
    char tmp[40];
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*g", prec, v);
        if (strtod(tmp, NULL) == v) break;
    }
    ps_buf_puts(b, tmp);
}

void ps_json_f32(ps_buf *b, float v) {
    if (json_nonfinite(b, v)) return;
    char tmp[32];
    int n = format_f32(tmp, v);
    ps_buf_append(b, tmp, (size_t)n);
}

static void json_i64(ps_buf *b, int64_t v) {
    char tmp[24];
    int n = snprintf(tmp, sizeof tmp, "%lld", (long long)v);
    ps_buf_append(b, tmp, (size_t)n);
}

/* ---------------------------------------------------------------------------------------- */
/* Token texts                                                                              */
/* ---------------------------------------------------------------------------------------- */

void ps_token_text(ps_buf *b, const ps_vocab *vocab, int32_t id) {
    const char *bytes = NULL;
    size_t len = 0;
    if (ps_vocab_token_bytes(vocab, id, &bytes, &len) != PS_OK) return;
    append_utf8_clean(b, bytes, len);
}

/* ---------------------------------------------------------------------------------------- */
/* The logprobs object                                                                      */
/* ---------------------------------------------------------------------------------------- */

/* Scratch for one top_logprobs map: the entries' texts side by side in `texts`, and an
 * open-addressing set of the keys written so far (used when there are many entries). */
typedef struct {
    ps_buf texts;
    size_t *off;      /* cap_entries + 1 offsets into texts */
    int32_t *slots;   /* hash slots: entry index or -1 */
    size_t n_slots;   /* power of two, >= 2 * cap_entries, or 0 when linear search is used */
    size_t cap_entries;
} topmap_scratch;

static uint64_t hash_bytes(const char *s, size_t n) { return ps_fnv1a64(PS_FNV1A64_INIT, s, n); }

static bool scratch_init(topmap_scratch *sc, size_t cap_entries) {
    ps_buf_init(&sc->texts);
    sc->cap_entries = cap_entries;
    sc->slots = NULL;
    sc->n_slots = 0;
    sc->off = ps_malloc((cap_entries + 1) * sizeof *sc->off);
    if (!sc->off) return false;
    if (cap_entries > 16) {
        size_t ns = 64;
        while (ns < 2 * cap_entries) ns *= 2;
        sc->slots = ps_malloc(ns * sizeof *sc->slots);
        if (!sc->slots) return false;
        sc->n_slots = ns;
    }
    return true;
}

static void scratch_free(topmap_scratch *sc) {
    ps_buf_free(&sc->texts);
    ps_free(sc->off);
    ps_free(sc->slots);
}

/* True when entry e's text equals an earlier entry's text; otherwise records it. */
static bool scratch_seen(topmap_scratch *sc, size_t e) {
    const char *t = sc->texts.data ? sc->texts.data + sc->off[e] : "";
    size_t tl = sc->off[e + 1] - sc->off[e];
    if (!sc->n_slots) {
        for (size_t j = 0; j < e; j++) {
            size_t jl = sc->off[j + 1] - sc->off[j];
            if (jl == tl && memcmp(sc->texts.data + sc->off[j], t, tl) == 0) return true;
        }
        return false;
    }
    size_t mask = sc->n_slots - 1;
    for (size_t s = hash_bytes(t, tl) & mask;; s = (s + 1) & mask) {
        int32_t j = sc->slots[s];
        if (j < 0) {
            sc->slots[s] = (int32_t)e;
            return false;
        }
        size_t jl = sc->off[j + 1] - sc->off[j];
        if (jl == tl && memcmp(sc->texts.data + sc->off[j], t, tl) == 0) return true;
    }
}

/* Entries of row i for top_logprobs/top_ids: the top K ids (skipping -1 padding), then the
 * scored token when it is not among them. Returns the count; ids/lps point to scratch.
 *
 * Order: the kernel's rank order, i.e. by LOGIT descending, equal logits by ascending id
 * (docs/api.md, "Semantics that stay fixed": ranking by logit, ties by ascending id) and not
 * "sorted by logprob descending, ties by ascending id": two logits one ulp apart can round to the same logprob
 * after subtracting the logsumexp (measured: ~40 such pairs in the 512-wide rows of a
 * 10-token stories260K prompt), and they stay in logit order, larger logit first, whatever
 * their ids. Not re-sorted on purpose: the first key with the largest value is then the
 * model's true argmax, which is what lm-eval <= 0.4.2 compares with tokens[i], and the set
 * is the K largest logits either way. */
static size_t row_entries(const ps_score_result *r, int32_t i, int32_t *ids, float *lps) {
    size_t n = 0;
    bool have = false;
    const int32_t *ti = r->top_ids + (size_t)i * (size_t)r->k;
    const float *tl = r->top_logprobs + (size_t)i * (size_t)r->k;
    for (int32_t j = 0; j < r->k; j++) {
        if (ti[j] < 0) continue;
        ids[n] = ti[j];
        lps[n] = tl[j];
        if (ti[j] == r->tokens[i]) {
            have = true;
            lps[n] = r->logprobs[i]; /* the same float; keeps the bitwise promise obvious */
        }
        n++;
    }
    if (!have) {
        ids[n] = r->tokens[i];
        lps[n] = r->logprobs[i];
        n++;
    }
    return n;
}

void ps_json_logprobs(ps_buf *b, const ps_vocab *vocab, const ps_score_result *r,
                      int32_t first, int64_t text_offset0, const int32_t *prompt_offset,
                      ps_buf *text) {
    ps_json_logprobs_from(b, vocab, r, first, 0, text_offset0, prompt_offset, text);
}

/* The statistics of entries [first, end) that the result holds, each as ,"key":[...] (null
 * where token_logprobs is null): entropy, rank and varentropy (params.stats), kld, same_top1
 * and dp (params.compare). Nothing when the result has none: the object stays as before. With
 * params.compares, the "compare" array follows them (ps_json_compares). */
static void stat_arrays(ps_buf *b, const ps_score_result *r, int32_t first, int32_t end,
                        int32_t values_from) {
    const char *keys[6] = {"entropy", "rank", "kld", "same_top1", "dp", "varentropy"};
    const float *f[6] = {r->entropy, NULL, r->kld, NULL, r->dp, r->varentropy};
    const int32_t *n[6] = {NULL, r->rank, NULL, r->same_top1, NULL, NULL};
    for (int a = 0; a < 6; a++) {
        if (!f[a] && !n[a]) continue;
        ps_buf_printf(b, ",\"%s\":[", keys[a]);
        for (int32_t i = first; i < end; i++) {
            if (i > first) ps_buf_putc(b, ',');
            if (i < values_from || isnan(r->logprobs[i]) || (r->kld && a >= 2 && a <= 4 && i >= r->n_prompt))
                ps_buf_append(b, "null", 4);
            else if (f[a])
                ps_json_f32(b, f[a][i]);
            else
                json_i64(b, n[a][i]);
        }
        ps_buf_putc(b, ']');
    }
}

/* token_id_logprobs of entries [first, end): each a list of the named ids' logprobs in the
 * order asked (ps_score_params.token_ids), null where token_logprobs is null. Nothing when
 * the result has none. */
static void named_arrays(ps_buf *b, const ps_score_result *r, int32_t first, int32_t end,
                         int32_t values_from) {
    if (!r->token_id_logprobs || r->n_token_ids <= 0) return;
    const size_t n = (size_t)r->n_token_ids;
    ps_buf_puts(b, ",\"token_id_logprobs\":[");
    for (int32_t i = first; i < end; i++) {
        if (i > first) ps_buf_putc(b, ',');
        if (i < values_from || isnan(r->logprobs[i])) {
            ps_buf_append(b, "null", 4);
            continue;
        }
        ps_buf_putc(b, '[');
        for (size_t t = 0; t < n; t++) {
            if (t) ps_buf_putc(b, ',');
            ps_json_f32(b, r->token_id_logprobs[(size_t)i * n + t]);
        }
        ps_buf_putc(b, ']');
    }
    ps_buf_putc(b, ']');
}

void ps_json_continuation(ps_buf *b, const ps_score_result *r) {
    if (r->continuation_start <= 0) return;
    ps_buf_puts(b, ",\"continuation_logprob\":");
    ps_json_f64(b, r->continuation_logprob);
    ps_buf_printf(b, ",\"is_greedy\":%s,\"continuation_start\":%d",
                  r->is_greedy ? "true" : "false", (int)r->continuation_start);
}

/* Long on purpose: the object's arrays in the order the OpenAI shape fixes, each a short loop
 * over the same entries. */
void ps_json_logprobs_from(ps_buf *b, const ps_vocab *vocab, const ps_score_result *r,
                           int32_t first, int32_t values_from, int64_t text_offset0,
                           const int32_t *prompt_offset, ps_buf *text) {
    if (b->oom) return;
    if (first < 0) first = 0;
    int32_t end = r->n_total;
    size_t cap = (size_t)(r->k > 0 ? r->k : 0) + 1;
    topmap_scratch sc;
    int32_t *ids = ps_malloc(cap * sizeof *ids);
    float *lps = ps_malloc(cap * sizeof *lps);
    bool ok = scratch_init(&sc, cap) && ids && lps;
    ps_buf tok;
    ps_buf_init(&tok);
    if (!ok) {
        b->oom = true;
        goto done;
    }

    /* tokens (and text) */
    ps_buf_puts(b, "{\"tokens\":[");
    for (int32_t i = first; i < end; i++) {
        if (i > first) ps_buf_putc(b, ',');
        ps_buf_reset(&tok);
        ps_token_text(&tok, vocab, r->tokens[i]);
        ps_json_str(b, tok.data ? tok.data : "", tok.len);
        if (text) ps_buf_append(text, tok.data ? tok.data : "", tok.len);
    }

    ps_buf_puts(b, "],\"token_logprobs\":[");
    for (int32_t i = first; i < end; i++) {
        if (i > first) ps_buf_putc(b, ',');
        if (i < values_from) ps_buf_append(b, "null", 4);
        else ps_json_f32(b, r->logprobs[i]); /* NaN (entry 0) -> null */
    }

    ps_buf_puts(b, "],\"top_logprobs\":[");
    for (int32_t i = first; i < end && !b->oom; i++) {
        if (i > first) ps_buf_putc(b, ',');
        if (i < values_from || isnan(r->logprobs[i])) {
            ps_buf_append(b, "null", 4);
            continue;
        }
        size_t n = row_entries(r, i, ids, lps);
        ps_buf_reset(&sc.texts);
        for (size_t e = 0; e < n; e++) {
            sc.off[e] = sc.texts.len;
            ps_token_text(&sc.texts, vocab, ids[e]);
        }
        sc.off[n] = sc.texts.len;
        if (sc.texts.oom) {
            b->oom = true;
            break;
        }
        if (sc.n_slots) memset(sc.slots, 0xff, sc.n_slots * sizeof *sc.slots);
        ps_buf_putc(b, '{');
        bool firstkey = true;
        for (size_t e = 0; e < n; e++) {
            if (scratch_seen(&sc, e)) continue;
            if (!firstkey) ps_buf_putc(b, ',');
            firstkey = false;
            ps_json_str(b, sc.texts.data ? sc.texts.data + sc.off[e] : "",
                        sc.off[e + 1] - sc.off[e]);
            ps_buf_putc(b, ':');
            ps_json_f32(b, lps[e]);
        }
        ps_buf_putc(b, '}');
    }

    ps_buf_puts(b, "],\"text_offset\":[");
    int64_t off = text_offset0;
    for (int32_t i = first; i < end; i++) {
        if (i > first) ps_buf_putc(b, ',');
        json_i64(b, off);
        ps_buf_reset(&tok);
        ps_token_text(&tok, vocab, r->tokens[i]);
        off += utf8_count(tok.data ? tok.data : "", tok.len);
    }

    ps_buf_puts(b, "],\"prompt_offset\":[");
    for (int32_t i = first; i < end; i++) {
        if (i > first) ps_buf_putc(b, ',');
        if (prompt_offset && i < r->n_prompt && prompt_offset[i] >= 0) json_i64(b, prompt_offset[i]);
        else ps_buf_append(b, "null", 4);
    }

    ps_buf_puts(b, "],\"token_ids\":[");
    for (int32_t i = first; i < end; i++) {
        if (i > first) ps_buf_putc(b, ',');
        json_i64(b, r->tokens[i]);
    }

    ps_buf_puts(b, "],\"top_ids\":[");
    for (int32_t i = first; i < end; i++) {
        if (i > first) ps_buf_putc(b, ',');
        if (i < values_from || isnan(r->logprobs[i])) {
            ps_buf_append(b, "null", 4);
            continue;
        }
        size_t n = row_entries(r, i, ids, lps);
        ps_buf_putc(b, '[');
        for (size_t e = 0; e < n; e++) {
            if (e) ps_buf_putc(b, ',');
            ps_buf_putc(b, '[');
            json_i64(b, ids[e]);
            ps_buf_putc(b, ',');
            ps_json_f32(b, lps[e]);
            ps_buf_putc(b, ']');
        }
        ps_buf_putc(b, ']');
    }
    ps_buf_putc(b, ']');
    stat_arrays(b, r, first, end, values_from);
    ps_json_compares(b, r, first, end, values_from);
    named_arrays(b, r, first, end, values_from);
    ps_buf_putc(b, '}');
    if (tok.oom || (text && text->oom)) b->oom = true;

done:
    ps_buf_free(&tok);
    scratch_free(&sc);
    ps_free(ids);
    ps_free(lps);
}
