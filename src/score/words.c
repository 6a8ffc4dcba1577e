/*
 * words.c — word surprisal with the beginning-of-word correction (ps_score_params.words,
 * ps_score_words; docs/api.md, "Words").
 *
 * A tokenizer that marks word starts (SentencePiece "▁the", byte-level BPE "Ġthe") spreads a
 * word boundary over two tokens' probabilities: the mark that ends word t is the first token
 * of word t + 1. Pimentel & Meister ("How to Compute the Probability of a Word", EMNLP 2024,
 * and their reference implementation) correct this with the mass of the word-start tokens:
 *   log p(w | ctx) = log p(tokens of w | ctx) + log S(ctx, w) - log S(ctx),
 * S(c) = sum of p(s | c) over s in BOW and EOS, BOW = the ids whose text begins with a
 * whitespace character. Scoring (score.c) records log S after every prompt prefix
 * (word_start), one masked log-mass per row of the same pass (kernels/masked_lse.h), the row
 * after the last prompt token included; this file makes the mask, computes those rows on the
 * pool, and groups a result's tokens into words.
 *
 * The grouping walks the tokens' texts (ps_vocab_token_bytes, the SentencePiece space prefix
 * dropped where the tokenizer added it) with a cursor in the user's text, which the front
 * ends' offsets re-synchronise (a <unk> spells other bytes than the text's).
 */
#include "score/words.h"
#include "kernels/masked_lse.h"
#include "model/vocab.h"
#include "base/buf.h"

#include <math.h>

/* Bytes of the Unicode whitespace character at s (n bytes left), 0 when there is none:
 * U+0009..U+000D, U+0020, U+0085, U+00A0, U+1680, U+2000..U+200A, U+2028, U+2029, U+202F,
 * U+205F, U+3000 (the White_Space property). */
static int ws_len(const unsigned char *s, size_t n) {
    if (n == 0) return 0;
    if (s[0] == ' ' || (s[0] >= 0x09 && s[0] <= 0x0d)) return 1;
    if (n >= 2 && s[0] == 0xc2 && (s[1] == 0x85 || s[1] == 0xa0)) return 2;
    if (n >= 3 && s[0] == 0xe1 && s[1] == 0x9a && s[2] == 0x80) return 3;
    if (n >= 3 && s[0] == 0xe2 && s[1] == 0x80 &&
        (s[2] <= 0x8a || s[2] == 0xa8 || s[2] == 0xa9 || s[2] == 0xaf))
        return 3;
    if (n >= 3 && s[0] == 0xe2 && s[1] == 0x81 && s[2] == 0x9f) return 3;
    if (n >= 3 && s[0] == 0xe3 && s[1] == 0x80 && s[2] == 0x80) return 3;
    return 0;
}

/* Bytes of the UTF-8 character at s (1 for a byte that starts none or is cut off). */
static int char_len(const unsigned char *s, size_t n) {
    int k = s[0] < 0x80 ? 1 : (s[0] & 0xe0) == 0xc0 ? 2 : (s[0] & 0xf0) == 0xe0 ? 3
                                                     : (s[0] & 0xf8) == 0xf0 ? 4 : 1;
    if ((size_t)k > n) return 1;
    for (int i = 1; i < k; i++)
        if ((s[i] & 0xc0) != 0x80) return 1;
    return k;
}

ps_status ps_words_mask(const ps_vocab *v, uint8_t **out, ps_error *err) {
    *out = NULL;
    const int32_t n = ps_vocab_n_tokens(v);
    uint8_t *m = ps_calloc(2 * (size_t)PS_MAX(n, 1), 1);
    if (!m) return ps_fail(err, PS_ERR_NOMEM, -1, "out of memory for a %d-token word mask", n);
    bool marks = false;
    for (int32_t id = 0; id < n; id++) {
        const char *b;
        size_t len;
        if (ps_vocab_is_control(v, id) || ps_vocab_token_bytes(v, id, &b, &len) != PS_OK) continue;
        const unsigned char *u = (const unsigned char *)b;
        int w = ws_len(u, len);
        if (w == 0) {
            m[n + id] = 1; /* text that continues a word (or begins the text inside one) */
            continue;
        }
        m[id] = 1;
        /* a mark: whitespace, then text (not a byte token or a run of whitespace alone) */
        if ((size_t)w < len && ws_len(u + w, len - (size_t)w) == 0) marks = true;
    }
    if (!marks) {
        ps_free(m);
        return ps_fail(err, PS_ERR_UNSUPPORTED, -1,
                       "word surprisal is not available for this tokenizer: no token marks the "
                       "beginning of a word (a SentencePiece \"\xe2\x96\x81word\" or byte-level "
                       "BPE \"\xc4\xa0word\" piece), so word boundaries cannot be corrected");
    }
    const int32_t eos = ps_vocab_eos(v);
    if (eos >= 0 && eos < n) {
        m[eos] = 1;
        m[n + eos] = 0;
    }
    *out = m;
    return PS_OK;
}

typedef struct {
    const float *logits;
    int32_t n_vocab;
    const uint8_t *mask;
    float *out;
} rows_job;

static void row_task(void *ctx, int64_t j, int32_t thread) {
    (void)thread;
    const rows_job *jb = ctx;
    jb->out[j] = ps_masked_logmass(PS_ISA_AUTO, jb->logits + (size_t)j * (size_t)jb->n_vocab,
                                   jb->mask, jb->n_vocab, jb->out[j]);
}

void ps_words_rows(ps_pool *pool, const float *logits, int32_t n_rows, int32_t n_vocab,
                   const uint8_t *mask, float *out) {
    rows_job jb = {logits, n_vocab, mask, out};
    ps_pool_for(n_rows == 1 ? NULL : pool, n_rows, row_task, &jb);
}

/* ---- grouping a result's tokens into words ----------------------------------------------- */

typedef struct {
    int64_t offset;           /* in the user's text */
    size_t rs, re;            /* the word's bytes in the walk's buffer */
    int32_t first, last;      /* tokens */
    bool closed_inside;       /* whitespace follows the word inside its last token */
} word_acc;

void ps_words_free(ps_words *w) {
    if (!w) return;
    ps_free(w->words);
    ps_free(w->text_);
    ps_free(w);
}

ps_status ps_score_words(const ps_vocab *v, const ps_score_result *r, const int32_t *offsets,
                         ps_words **out, ps_error *err) {
    ps_error_clear(err);
    if (!out) return ps_fail(err, PS_ERR_INVALID_ARG, -1, "out is required");
    *out = NULL;
    if (!v || !r) return ps_fail(err, PS_ERR_INVALID_ARG, -1, "vocab and result are required");
    if (!r->word_start)
        return ps_fail(err, PS_ERR_INVALID_ARG, -1,
                       "the result has no word masses: score with params.words");
    const int32_t n = r->n_prompt;
    const bool spm_prefix = ps_vocab_space_prefix(v);
    ps_buf all; /* the in-text bytes of every token, in order */
    ps_buf_init(&all);
    word_acc *acc = ps_malloc((size_t)PS_MAX(n, 1) * sizeof *acc);
    if (!acc) return ps_fail(err, PS_ERR_NOMEM, -1, "out of memory for the words of %d tokens", n);
    int32_t nw = 0, cur = -1, pending = -1;
    bool in_word = false, prefix = spm_prefix;
    int64_t pos = 0; /* the cursor in the user's text */
    for (int32_t i = 0; i < n; i++) {
        const int32_t id = r->tokens[i];
        const char *b = "";
        size_t bl = 0;
        if (ps_vocab_token_bytes(v, id, &b, &bl) != PS_OK) bl = 0;
        if (offsets && offsets[i] >= 0) pos = offsets[i];
        if (ps_vocab_is_control(v, id)) { /* ends a word; belongs to none */
            in_word = false;
            cur = -1;
            pending = -1;
            prefix = spm_prefix;
            if (offsets && offsets[i] >= 0) pos += (int64_t)bl; /* its text was the user's */
            continue;
        }
        if (prefix && bl > 0 && b[0] == ' ') { /* the space the tokenizer added */
            b++;
            bl--;
        }
        prefix = false;
        const unsigned char *u = (const unsigned char *)b;
        const size_t base = all.len;
        bool assigned = false; /* the token holds a byte of a word */
        for (size_t j = 0; j < bl;) {
            int w = ws_len(u + j, bl - j);
            if (w) {
                if (in_word && cur >= 0 && acc[cur].last == i) acc[cur].closed_inside = true;
                in_word = false;
                j += (size_t)w;
                continue;
            }
            int c = char_len(u + j, bl - j);
            if (!in_word && !assigned) { /* a new word */
                acc[nw] = (word_acc){.offset = pos + (int64_t)j, .rs = base + j,
                                     .first = pending >= 0 ? pending : i};
                cur = nw++;
            }
            in_word = assigned = true;
            acc[cur].re = base + j + (size_t)c;
            acc[cur].last = i;
            acc[cur].closed_inside = false;
            j += (size_t)c;
        }
        if (assigned) pending = -1;
        else if (pending < 0) pending = i; /* whitespace only: the next word's */
        ps_buf_append(&all, b, bl);
        pos += (int64_t)bl;
    }
    ps_words *w = ps_calloc(1, sizeof *w);
    if (w) {
        w->words = ps_calloc((size_t)PS_MAX(nw, 1), sizeof *w->words);
        size_t total = 0;
        for (int32_t k = 0; k < nw; k++) total += acc[k].re - acc[k].rs + 1;
        w->text_ = ps_malloc(PS_MAX(total, (size_t)1));
    }
    if (!w || !w->words || !w->text_ || all.oom) {
        ps_words_free(w);
        ps_free(acc);
        ps_buf_free(&all);
        return ps_fail(err, PS_ERR_NOMEM, -1, "out of memory for the words of %d tokens", n);
    }
    size_t t = 0;
    for (int32_t k = 0; k < nw; k++) {
        const word_acc *a = &acc[k];
        ps_word *o = &w->words[k];
        const size_t len = a->re - a->rs;
        memcpy(w->text_ + t, all.data + a->rs, len);
        w->text_[t + len] = '\0';
        o->text = w->text_ + t;
        o->len = (int32_t)len;
        t += len + 1;
        o->offset = a->offset;
        o->first_token = a->first;
        o->n_tokens = a->last - a->first + 1;
        double naive = 0.0;
        for (int32_t i = a->first; i <= a->last; i++) naive -= (double)r->logprobs[i];
        o->surprisal_naive = naive;
        if (a->first == 0) {
            o->surprisal = NAN;
            continue;
        }
        const double N = a->closed_inside ? 0.0 : (double)r->word_start[a->last + 1];
        double D = 0.0;
        const int32_t id = r->tokens[a->first];
        const char *fb;
        size_t fl;
        if (ps_vocab_token_bytes(v, id, &fb, &fl) == PS_OK &&
            ws_len((const unsigned char *)fb, fl) > 0)
            D = (double)r->word_start[a->first];
        else if (a->first == 1 && ps_vocab_is_control(v, r->tokens[0]))
            D = (double)r->word_start_nonbow;
        o->surprisal = naive + D - N;
    }
    w->n_words = nw;
    ps_free(acc);
    ps_buf_free(&all);
    *out = w;
    return PS_OK;
}
