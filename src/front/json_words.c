/*
 * json_words.c — the "words" array of a scored line or completion choice (docs/api.md,
 * "Words"): ps_score_words over the result and the prompt's offsets, one object per word
 * {"word", "offset", "n_tokens", "surprisal", "surprisal_bits", "surprisal_naive"}, nats and
 * bits (nats / ln 2) written as round-tripping doubles, null where a value is undefined.
 */
#include "front/json.h"

#include <math.h>

bool ps_json_words(ps_buf *b, const ps_vocab *vocab, const ps_score_result *r,
                   const int32_t *prompt_offset) {
    if (!r->word_start) return true;
    ps_words *w = NULL;
    ps_error e;
    if (ps_score_words(vocab, r, prompt_offset, &w, &e) != PS_OK) {
        b->oom = true;
        return false;
    }
    ps_buf_puts(b, ",\"words\":[");
    for (int32_t k = 0; k < w->n_words; k++) {
        const ps_word *o = &w->words[k];
        ps_buf_puts(b, k ? ",{\"word\":" : "{\"word\":");
        ps_json_str(b, o->text, (size_t)o->len);
        ps_buf_printf(b, ",\"offset\":%lld,\"n_tokens\":%d,\"surprisal\":", (long long)o->offset,
                      (int)o->n_tokens);
        ps_json_f64(b, o->surprisal);
        ps_buf_puts(b, ",\"surprisal_bits\":");
        ps_json_f64(b, o->surprisal / M_LN2);
        ps_buf_puts(b, ",\"surprisal_naive\":");
        ps_json_f64(b, o->surprisal_naive);
        ps_buf_puts(b, "}");
    }
    ps_buf_puts(b, "]");
    ps_words_free(w);
    return true;
}
