/*
 * examples/score.c — the public API in one page: load a GGUF model, score a sentence, print
 * every token with its log-probability and the model's top alternative.
 *
 *   cc -o score examples/score.c $(pkg-config --cflags --libs promptscore)
 *   ./score model.gguf "Once upon a time, there was a little girl."
 *
 * Output: one line per token, "index<TAB>id<TAB>logprob<TAB>top id<TAB>top logprob<TAB>text"
 * (entry 0 has no distribution: its logprob and top are "-"), then "sum_logprob <TAB>value".
 * Every function used here is declared in promptscore.h; each one that can fail returns a
 * ps_status (0 = PS_OK) and, where it says so, fills a ps_error with a message.
 */
#include <promptscore.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Prints what went wrong and returns 1 (the program's exit status). */
static int fail(const char *what, ps_status st, const ps_error *err) {
    fprintf(stderr, "score: %s: %s%s%s\n", what, ps_status_str(st),
            err && err->message[0] ? ": " : "", err ? err->message : "");
    return 1;
}

/* One token's text, bytes that are not printable replaced by '?' and tabs/newlines escaped,
 * so a line stays a line. */
static void print_token_text(const ps_vocab *vocab, int32_t id) {
    const char *bytes;
    size_t len;
    if (ps_vocab_token_bytes(vocab, id, &bytes, &len) != PS_OK) return;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)bytes[i];
        if (c == '\n') fputs("\\n", stdout);
        else if (c == '\t') fputs("\\t", stdout);
        else if (c < 0x20 || c == 0x7f) putchar('?');
        else putchar(c); /* UTF-8 bytes pass through as they are */
    }
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s MODEL.gguf TEXT\n", argv[0]);
        return 2;
    }
    const char *path = argv[1], *text = argv[2];
    ps_error err;
    ps_status st;

    /* 1. The model: memory-mapped, read-only after loading (any number of threads may share
     *    it). Default parameters: the file's own context length. */
    ps_model_params mp = ps_model_default_params();
    ps_model *model = NULL;
    if ((st = ps_model_load(path, &mp, &model, &err)) != PS_OK) return fail(path, st, &err);
    const ps_vocab *vocab = ps_model_vocab(model); /* owned by the model */

    /* 2. The text as token ids. Ask for the size first (capacity 0), then tokenize into a
     *    buffer of that size. BOS is prepended when the model asks for it; special-token text
     *    ("<s>") in the sentence stays plain text (parse_special = false). */
    int32_t n_ids = 0;
    st = ps_vocab_tokenize(vocab, text, strlen(text), true, false, NULL, 0, &n_ids, &err);
    if (st != PS_OK) {
        ps_model_free(model);
        return fail("tokenize", st, &err);
    }
    int32_t *ids = malloc(sizeof *ids * (size_t)(n_ids > 0 ? n_ids : 1));
    if (!ids) {
        ps_model_free(model);
        return fail("tokenize", PS_ERR_NOMEM, NULL);
    }
    st = ps_vocab_tokenize(vocab, text, strlen(text), true, false, ids, n_ids, &n_ids, &err);
    if (st != PS_OK || n_ids < 1) {
        free(ids);
        ps_model_free(model);
        return fail("tokenize", st != PS_OK ? st : PS_ERR_INVALID_ARG, &err);
    }

    /* 3. A session: the per-sequence state (KV cache) on the calling thread (pool NULL). */
    ps_session_params sp = ps_session_default_params();
    ps_session *session = NULL;
    if ((st = ps_session_create(model, &sp, &session, &err)) != PS_OK) {
        free(ids);
        ps_model_free(model);
        return fail("session", st, &err);
    }

    /* 4. Score: every token's logprob given the tokens before it, and the top-1 alternative.
     *    The result owns its arrays; entry 0 has no distribution (logprob NaN, top id -1). */
    ps_score_params params = ps_score_default_params();
    params.k = 1;
    ps_score_result *r = NULL;
    st = ps_score_tokens(session, ids, n_ids, &params, &r, &err);
    int rc = 0;
    if (st != PS_OK) {
        rc = fail("score", st, &err);
    } else {
        for (int32_t i = 0; i < r->n_total; i++) {
            if (i == 0)
                printf("%d\t%d\t-\t-\t-\t", i, r->tokens[i]);
            else
                printf("%d\t%d\t%.9g\t%d\t%.9g\t", i, r->tokens[i], r->logprobs[i],
                       r->top_ids[i * r->k], r->top_logprobs[i * r->k]);
            print_token_text(vocab, r->tokens[i]);
            putchar('\n');
        }
        printf("sum_logprob\t%.17g\n", r->sum_logprob);
    }

    /* 5. Free in reverse order: the result, the session, then the model (last). */
    ps_score_result_free(r);
    ps_session_free(session);
    free(ids);
    ps_model_free(model);
    return rc;
}
