/*
 * score.c — tokens in, per-position logprobs and top-K out; generation on the same loop.
 *
 * The prompt runs through the session in chunks of `chunk` positions (default 256, part of
 * the definition of a score) into ONE reused logits buffer of (chunk, n_vocab) floats; the
 * top-K kernel reads each chunk's rows and writes straight into the result arrays. Row j of a
 * chunk starting at position p0 is the distribution after tokens [0, p0 + j], so it scores
 * token p0 + j + 1 and fills entry p0 + j + 1. Entry 0 has no distribution. The last prompt
 * row scores the first generated token, if any: generation picks a token from that row
 * (greedy argmax with ties to the lowest id, or temperature + top-p sampling with a seeded
 * splitmix64), then runs the kernel on the row with the chosen token as target, so generated
 * tokens get logprobs and top-K from the unmodified distribution exactly like prompt tokens,
 * then forwards the token alone (1 position) to get the next row.
 *
 * Memory: the logits buffer and a few per-row arrays are fixed by chunk and n_vocab; what
 * grows with the prompt is the KV cache (the session's) and the result arrays. The logits
 * buffer (600 KB per row for a 151,936-token vocabulary) is the session's output buffer
 * (ps_session_logits), kept between calls: allocating it per call made the kernel zero every
 * touched page again, on every call (a server scores many short prompts on one session).
 *
 * Chunk geometry (asserted by tests/test_score.c and the CLI test): on stories260K (F32) and
 * on gen-model llama F16 / qwen3 Q8_0 / qwen3 and qwen2 BF16 models, chunk 1, 7, 100 and 256
 * on 1 or 2 threads give bitwise identical scores for a 2*256+17-token prompt, because the
 * forward kernels compute each row alone.
 * The chunk stays part of a score's definition so that a future batched kernel may differ.
 *
 * params.stats adds each row's entropy, rank and varentropy (the kernel's ps_topk_out.entropy /
 * .rank / .varentropy); a
 * score with a prefix cache computes them always, so that every cached block holds them.
 * params.compare forwards a second session over the same chunk into its own logits buffer
 * right after the base's; compare_rows then takes the other model's logprobs and top-1 (the
 * kernel with k = 1) and ps_kld_compute over the chunk's rows. params.compares (several
 * models) does the same for each of them after the base's one forward (compare.c).
 */
#include "score/score.h"
#include "base/impl.h"
#include "base/buf.h"
#include "base/util.h"
#include "score/prefix_cache.h"
#include "score/compare.h"
#include "score/extras.h"
#include "score/words.h"
#include "kernels/masked_lse.h"
#include "run/session.h"

#include <math.h>
#include <stdio.h>

bool ps_score_block_in_flight(ps_prefix_cache *c, const ps_session *s, const int32_t *ids,
                              int32_t n, int32_t k) {
    if (!c || !s) return false;
    return ps_pcache_claimed(c, ps_pcache_session_cfg(s), ids, n, k);
}

ps_status ps_score_warm(ps_session *s, int32_t max_seqs, int32_t n_pos, ps_error *err) {
    if (!s || max_seqs < 1 || n_pos < 1)
        return ps_fail(err, PS_ERR_INVALID_ARG, -1, "session, max_seqs >= 1 and n_pos >= 1 needed");
    const size_t rows = (size_t)s->n_batch + 1;
    float *logits = ps_session_logits(s, rows);
    if (!logits)
        return ps_fail(err, PS_ERR_NOMEM, -1, "out of memory for a %zu x %d logits buffer", rows,
                       (int)s->model->hp.n_vocab);
    memset(logits, 0, rows * (size_t)s->model->hp.n_vocab * sizeof *logits);
    const int32_t need = (int32_t)PS_MIN((int64_t)s->n_ctx, ((int64_t)n_pos + 15) & ~(int64_t)15);
    for (int32_t i = 0; i < max_seqs; i++) {
        ps_seq *q = ps_session_pool_seq(s, i, need, err);
        if (!q) return PS_ERR_NOMEM;
        ps_seq_touch(q);
    }
    return PS_OK;
}

ps_score_params ps_score_default_params(void) {
    ps_score_params p;
    memset(&p, 0, sizeof p);
    p.k = 5;
    p.chunk = PS_CHUNK;
    p.max_tokens = 0;
    p.temperature = 0.0f;
    p.top_p = 1.0f;
    p.seed = 0;
    p.stop_at_eos = true;
    return p;
}

void ps_score_result_free(ps_score_result *r) {
    if (!r) return;
    ps_free(r->tokens);
    ps_free(r->logprobs);
    ps_free(r->top_ids);
    ps_free(r->top_logprobs);
    ps_free(r->entropy);
    ps_free(r->rank);
    ps_free(r->kld);
    ps_free(r->same_top1);
    ps_free(r->dp);
    ps_compares_free(r);
    ps_free(r->varentropy);
    ps_free(r->compare_logprob);
    ps_free(r->token_id_logprobs);
    ps_free(r->word_start);
    ps_free(r);
}

/* ---- picking the next token -------------------------------------------------------------- */

/* The largest logit, ties to the lowest id; -inf never beats a finite logit (a row of only
 * -inf gives 0). NaN entries are skipped here and reported by the kernel. Equal to the top-K
 * kernel's top-1. row: (n_vocab) */
static int32_t argmax_row(const float *row, int32_t n_vocab) {
    int32_t best = 0;
    float bv = row[0];
    for (int32_t i = 1; i < n_vocab; i++)
        if (row[i] > bv || (isnan(bv) && !isnan(row[i]))) {
            bv = row[i];
            best = i;
        }
    return best;
}

/* Uniform in [0, 1) with 53 bits. */
static double rand_unit(uint64_t *s) { return (double)(ps_splitmix64(s) >> 11) * 0x1.0p-53; }

/* True when token a comes before token b in the nucleus order: logit descending, ties by
 * ascending id. */
static inline bool before(const float *row, int32_t a, int32_t b) {
    return row[a] > row[b] || (row[a] == row[b] && a < b);
}

/* Restores the max-heap property (by `before`) below position i of heap[0..n). */
static void sift_down(const float *row, int32_t *heap, int32_t n, int32_t i) {
    for (;;) {
        int32_t l = 2 * i + 1, r = l + 1, top = i;
        if (l < n && before(row, heap[l], heap[top])) top = l;
        if (r < n && before(row, heap[r], heap[top])) top = r;
        if (top == i) return;
        int32_t t = heap[i];
        heap[i] = heap[top];
        heap[top] = t;
        i = top;
    }
}

/* Temperature + nucleus sampling. w: (n_vocab) doubles, idx: (n_vocab) ids (scratch). The
 * weights are exp((logit - max) / T) in double; with top_p < 1 the smallest prefix of tokens
 * in logit order (ties by id) whose mass reaches top_p is kept. Deterministic given *rng. */
static int32_t sample_row(const float *row, int32_t n_vocab, float temperature, float top_p,
                          uint64_t *rng, double *w, int32_t *idx) {
    float mx = -INFINITY;
    for (int32_t i = 0; i < n_vocab; i++)
        if (row[i] > mx) mx = row[i];
    if (!(mx > -INFINITY)) return argmax_row(row, n_vocab);
    double total = 0.0;
    for (int32_t i = 0; i < n_vocab; i++) {
        double x = isnan(row[i]) ? 0.0 : exp(((double)row[i] - (double)mx) / temperature);
        w[i] = x;
        total += x;
    }
    double u = rand_unit(rng);
    if (top_p >= 1.0f) {
        double target = u * total, acc = 0.0;
        int32_t last = 0;
        for (int32_t i = 0; i < n_vocab; i++) {
            if (w[i] <= 0.0) continue;
            acc += w[i];
            last = i;
            if (acc > target) return i;
        }
        return last;
    }
    /* the nucleus: pop tokens in order from a heap (O(n_vocab + m log n_vocab) for a nucleus
     * of m tokens) until their mass reaches top_p; popped tokens collect at idx[n - 1], ... */
    int32_t n = 0;
    for (int32_t i = 0; i < n_vocab; i++)
        if (w[i] > 0.0) idx[n++] = i;
    for (int32_t i = n / 2 - 1; i >= 0; i--) sift_down(row, idx, n, i);
    double keep = 0.0, limit = (double)top_p * total;
    int32_t heap_n = n;
    while (heap_n > 0) {
        int32_t t = idx[0];
        idx[0] = idx[--heap_n];
        idx[heap_n] = t;
        sift_down(row, idx, heap_n, 0);
        keep += w[t];
        if (keep >= limit) break;
    }
    double target = u * keep, acc = 0.0;
    for (int32_t j = n - 1; j >= heap_n; j--) {
        acc += w[idx[j]];
        if (acc > target) return idx[j];
    }
    return idx[heap_n];
}

/* ---- the scoring loop -------------------------------------------------------------------- */

static ps_status check_params(const ps_session *s, const int32_t *tokens, int32_t n_tokens,
                              const ps_score_params *p, ps_error *err) {
    if (!s || !tokens) return ps_fail(err, PS_ERR_INVALID_ARG, -1, "session and tokens are required");
    if (n_tokens < 1)
        return ps_fail(err, PS_ERR_INVALID_ARG, -1, "nothing to score: %d tokens", n_tokens);
    if (p->k < 0) return ps_fail(err, PS_ERR_INVALID_ARG, -1, "k must be >= 0, got %d", p->k);
    if (p->cache && ps_pcache_model(p->cache) != s->model)
        return ps_fail(err, PS_ERR_INVALID_ARG, -1,
                       "the prefix cache belongs to another model than the session's");
    if (p->compare) {
        const ps_session *o = p->compare;
        if (o->model->hp.n_vocab != s->model->hp.n_vocab)
            return ps_fail(err, PS_ERR_INVALID_ARG, -1,
                           "compare: the vocabularies differ: %d tokens (base) against %d "
                           "(compared model)", s->model->hp.n_vocab, o->model->hp.n_vocab);
        if (o == s)
            return ps_fail(err, PS_ERR_INVALID_ARG, -1,
                           "compare: the compared session must be another session than the "
                           "base's (it may hold the same model)");
        if (p->cache)
            return ps_fail(err, PS_ERR_INVALID_ARG, -1,
                           "compare does not combine with a prefix cache");
        if (p->max_tokens > 0)
            return ps_fail(err, PS_ERR_INVALID_ARG, -1,
                           "compare scores the prompt only: max_tokens must be 0, got %d",
                           p->max_tokens);
        if (p->chunk > o->n_batch)
            return ps_fail(err, PS_ERR_INVALID_ARG, -1,
                           "chunk %d exceeds the compared session's n_batch %d", p->chunk,
                           o->n_batch);
        if (n_tokens > o->n_ctx)
            return ps_fail(err, PS_ERR_CONTEXT, -1,
                           "%d prompt tokens exceed the compared session's context length %d",
                           n_tokens, o->n_ctx);
    }
    if (p->chunk < 1 || p->chunk > s->n_batch)
        return ps_fail(err, PS_ERR_INVALID_ARG, -1,
                       "chunk must be in 1..%d (the session's n_batch), got %d", s->n_batch,
                       p->chunk);
    ps_status cst = ps_compares_check(s, n_tokens, p, err);
    if (cst != PS_OK) return cst;
    if (p->max_tokens < 0)
        return ps_fail(err, PS_ERR_INVALID_ARG, -1, "max_tokens must be >= 0, got %d",
                       p->max_tokens);
    if (p->words && p->max_tokens > 0)
        return ps_fail(err, PS_ERR_INVALID_ARG, -1,
                       "words scores the prompt only: max_tokens must be 0, got %d",
                       p->max_tokens);
    if (!(p->temperature >= 0.0f) || isinf(p->temperature))
        return ps_fail(err, PS_ERR_INVALID_ARG, -1, "temperature must be finite and >= 0, got %g",
                       (double)p->temperature);
    if (!(p->top_p > 0.0f && p->top_p <= 1.0f))
        return ps_fail(err, PS_ERR_INVALID_ARG, -1, "top_p must be in (0, 1], got %g",
                       (double)p->top_p);
    if (p->n_stop < 0 || (p->n_stop > 0 && !p->stop))
        return ps_fail(err, PS_ERR_INVALID_ARG, -1, "bad stop list (n_stop %d)", p->n_stop);
    for (int32_t i = 0; i < p->n_stop; i++)
        if (!p->stop[i])
            return ps_fail(err, PS_ERR_INVALID_ARG, -1, "stop string %d is NULL", i);
    int32_t n_vocab = s->model->hp.n_vocab;
    for (int32_t i = 0; i < n_tokens; i++)
        if (tokens[i] < 0 || tokens[i] >= n_vocab)
            return ps_fail(err, PS_ERR_TOKEN_RANGE, -1,
                           "token id %d at index %d is outside the vocabulary [0, %d)", tokens[i],
                           i, n_vocab);
    if ((int64_t)n_tokens + p->max_tokens > s->n_ctx) {
        if (p->max_tokens)
            return ps_fail(err, PS_ERR_CONTEXT, -1,
                           "%d prompt tokens + max_tokens %d = %lld exceeds the context length %d",
                           n_tokens, p->max_tokens, (long long)n_tokens + p->max_tokens, s->n_ctx);
        return ps_fail(err, PS_ERR_CONTEXT, -1,
                       "%d prompt tokens exceed the context length %d", n_tokens, s->n_ctx);
    }
    return ps_extras_check(p, n_tokens, n_vocab, err);
}

/* Allocates a result for up to cap entries of k alternatives, with the entropy and rank
 * arrays when stats, the comparison's when compare. NULL on allocation failure. */
static ps_score_result *result_new(int32_t cap, int32_t k, bool stats, bool compare) {
    ps_score_result *r = ps_calloc(1, sizeof *r);
    if (!r) return NULL;
    uint64_t nk;
    if (!ps_mul_ok((uint64_t)cap, (uint64_t)k, &nk) || nk > SIZE_MAX / 8) {
        ps_free(r);
        return NULL;
    }
    r->k = k;
    r->tokens = ps_malloc((size_t)cap * sizeof *r->tokens);
    r->logprobs = ps_malloc((size_t)cap * sizeof *r->logprobs);
    r->top_ids = ps_malloc(nk ? (size_t)nk * sizeof *r->top_ids : 1);
    r->top_logprobs = ps_malloc(nk ? (size_t)nk * sizeof *r->top_logprobs : 1);
    if (stats) {
        r->entropy = ps_malloc((size_t)cap * sizeof *r->entropy);
        r->rank = ps_malloc((size_t)cap * sizeof *r->rank);
        r->varentropy = ps_malloc((size_t)cap * sizeof *r->varentropy);
    }
    if (compare) {
        r->kld = ps_malloc((size_t)cap * sizeof *r->kld);
        r->same_top1 = ps_malloc((size_t)cap * sizeof *r->same_top1);
        r->dp = ps_malloc((size_t)cap * sizeof *r->dp);
        r->compare_logprob = ps_malloc((size_t)cap * sizeof *r->compare_logprob);
    }
    if (!r->tokens || !r->logprobs || !r->top_ids || !r->top_logprobs ||
        (stats && (!r->entropy || !r->rank || !r->varentropy)) ||
        (compare && (!r->kld || !r->same_top1 || !r->dp || !r->compare_logprob))) {
        ps_score_result_free(r);
        return NULL;
    }
    r->stop_text_len = -1;
    r->finish = PS_FINISH_LENGTH;
    return r;
}

/* Runs the kernel over n_rows rows of logits (stride n_vocab) with the given targets and
 * writes entries [entry0, entry0 + n_rows) of r. */
static ps_status topk_rows(const ps_session *s, const ps_score_params *p, const float *logits,
                           int32_t n_rows, const int32_t *targets, ps_score_result *r,
                           int32_t entry0, int32_t pos0, ps_error *err) {
    int32_t n_vocab = s->model->hp.n_vocab;
    ps_topk_params tp = ps_topk_default_params();
    tp.k = p->k;
    tp.isa = PS_ISA_AUTO;
    tp.pool = s->pool;
    ps_logits lg = {.data = logits, .dtype = PS_DTYPE_F32, .n_rows = n_rows, .n_vocab = n_vocab,
                    .row_stride = n_vocab, .targets = targets};
    float lse[PS_CHUNK]; /* the rows' lse, for the named tokens and the words */
    assert(n_rows <= PS_CHUNK);
    ps_topk_out out = {.lse = p->n_token_ids > 0 || r->word_start ? lse : NULL,
                       .target_logprob = r->logprobs + entry0,
                       .top_ids = p->k ? r->top_ids + (size_t)entry0 * (size_t)p->k : NULL,
                       .top_logprobs = p->k ? r->top_logprobs + (size_t)entry0 * (size_t)p->k : NULL,
                       .entropy = r->entropy ? r->entropy + entry0 : NULL,
                       .rank = r->rank ? r->rank + entry0 : NULL,
                       .varentropy = r->varentropy ? r->varentropy + entry0 : NULL};
    ps_error e;
    ps_error_clear(&e);
    ps_status st = ps_topk_compute(&tp, &lg, &out, &e);
    if (st == PS_ERR_NAN) { /* name the position and the token id, not the chunk's row */
        for (int32_t j = 0; j < n_rows; j++) {
            const float *row = logits + (size_t)j * (size_t)n_vocab;
            for (int32_t c = 0; c < n_vocab; c++) {
                if (isnan(row[c]) || (isinf(row[c]) && row[c] > 0))
                    return ps_fail(err, st, -1,
                                   "the logits after position %d (the distribution of token %d) "
                                   "hold %s at token id %d: the model computes non-finite values",
                                   pos0 + j, entry0 + j, isnan(row[c]) ? "NaN" : "+inf", c);
            }
        }
    }
    if (st != PS_OK)
        return ps_fail(err, st, -1, "scoring positions %d..%d: %s", pos0, pos0 + n_rows - 1,
                       e.message);
    if (p->n_token_ids > 0)
        ps_named_rows(logits, n_rows, n_vocab, lse, p->token_ids, p->n_token_ids,
                      r->token_id_logprobs + (size_t)entry0 * (size_t)p->n_token_ids);
    if (r->word_start) /* the rows' lse, which words_rows turns into word-start masses */
        memcpy(r->word_start + entry0, lse, (size_t)n_rows * sizeof *lse);
    return PS_OK;
}

/* The comparison of n_rows rows (entries [entry0, entry0 + n_rows) of r, whose logprobs and
 * top-K are written already): base and other are the two models' logits of the same
 * positions. kld = KL(base || other) over the whole vocabulary (ps_kld_compute), same_top1
 * from the two top-1 ids (ties by ascending id), dp = p_other - p_base of the scored token,
 * from the float32 logprobs in double. */
static ps_status compare_rows(const ps_session *s, const ps_score_params *p, const float *base,
                              const float *other, int32_t n_rows, const int32_t *targets,
                              ps_score_result *r, int32_t entry0, int32_t pos0, ps_error *err) {
    const int32_t n_vocab = s->model->hp.n_vocab;
    int32_t top_o[PS_CHUNK], top_b[PS_CHUNK];
    float lp_o[PS_CHUNK], tl_o[PS_CHUNK], tl_b[PS_CHUNK];
    assert(n_rows <= PS_CHUNK);
    ps_topk_params tp = ps_topk_default_params();
    tp.k = 1;
    tp.pool = s->pool;
    ps_logits lo = {.data = other, .dtype = PS_DTYPE_F32, .n_rows = n_rows, .n_vocab = n_vocab,
                    .row_stride = n_vocab, .targets = targets};
    ps_logits lb = lo;
    lb.data = base;
    ps_topk_out oo = {.target_logprob = lp_o, .top_ids = top_o, .top_logprobs = tl_o};
    ps_error e;
    ps_error_clear(&e);
    ps_status st = ps_topk_compute(&tp, &lo, &oo, &e);
    if (st == PS_OK && p->k == 0) { /* the base's top-1 (with k >= 1 the result has it) */
        lb.targets = NULL;
        ps_topk_out ob = {.top_ids = top_b, .top_logprobs = tl_b};
        st = ps_topk_compute(&tp, &lb, &ob, &e);
    }
    if (st == PS_OK) st = ps_kld_compute(&tp, &lb, &lo, r->kld + entry0, &e);
    if (st != PS_OK)
        return ps_fail(err, st, -1, "comparing positions %d..%d: %s", pos0, pos0 + n_rows - 1,
                       e.message);
    for (int32_t j = 0; j < n_rows; j++) {
        const int32_t i = entry0 + j;
        const int32_t tb = p->k ? r->top_ids[(size_t)i * (size_t)p->k] : top_b[j];
        r->same_top1[i] = tb == top_o[j];
        r->dp[i] = (float)(exp((double)lp_o[j]) - exp((double)r->logprobs[i]));
        r->compare_logprob[i] = lp_o[j];
    }
    return PS_OK;
}

static bool cancelled(const ps_score_params *p) { return p->cancel && p->cancel(p->cancel_ctx); }

/* Stop-string bookkeeping for generation: the generated text (raw token bytes) and where each
 * generated token starts in it. */
typedef struct {
    ps_buf text;
    int64_t *start; /* max_tokens + 1 */
    size_t max_stop;
} stop_state;

/* After generated token g was appended: the byte position of the earliest stop string that
 * ends in the new bytes, or -1. */
static int64_t find_stop(const stop_state *ss, const ps_score_params *p, int32_t g) {
    int64_t from = ss->start[g] - (int64_t)ss->max_stop + 1;
    if (from < 0) from = 0;
    int64_t best = -1;
    for (int32_t i = 0; i < p->n_stop; i++) {
        size_t sl = strlen(p->stop[i]);
        if (!sl || !ss->text.data) continue;
        const char *hit = memmem(ss->text.data + from, ss->text.len - (size_t)from, p->stop[i], sl);
        if (hit) {
            int64_t pos = hit - ss->text.data;
            if (best < 0 || pos < best) best = pos;
        }
    }
    return best;
}

/* Sets up a result for prompt tokens[0..n_tokens): the tokens, entry 0 empty. */
static void result_start(ps_score_result *r, const int32_t *tokens, int32_t n_tokens, int32_t k) {
    r->n_prompt = n_tokens;
    memcpy(r->tokens, tokens, (size_t)n_tokens * sizeof *tokens);
    r->logprobs[0] = NAN;
    if (r->entropy) r->entropy[0] = NAN;
    if (r->varentropy) r->varentropy[0] = NAN;
    if (r->rank) r->rank[0] = 0;
    if (r->kld) {
        r->kld[0] = NAN;
        r->same_top1[0] = -1;
        r->dp[0] = NAN;
        r->compare_logprob[0] = NAN;
    }
    for (int32_t j = 0; j < k; j++) {
        r->top_ids[j] = -1;
        r->top_logprobs[j] = NAN;
    }
}

/* Drops the statistics a score computed only for its prefix cache (not asked for). */
static void result_finish(ps_score_result *r, const ps_score_params *p) {
    if (p->stats) return;
    ps_free(r->entropy);
    ps_free(r->rank);
    ps_free(r->varentropy);
    r->entropy = NULL;
    r->rank = NULL;
    r->varentropy = NULL;
}

/* Generation after the prompt (p->max_tokens > 0) on sequence q, whose n_past is the prompt's
 * length: `row` holds the distribution after the last prompt token; each generated token is
 * forwarded alone into gen_logits (one row). Fills r's generated entries, n_gen, n_total and
 * finish; sum_logprob must be set already. */
static ps_status generate(ps_session *s, ps_seq *q, const ps_score_params *p, int32_t n_tokens,
                          const float *row, float *gen_logits, ps_score_result *r,
                          ps_error *err) {
    const int32_t n_vocab = s->model->hp.n_vocab;
    const bool sampling = p->temperature > 0.0f;
    double *w = sampling ? ps_malloc((size_t)n_vocab * sizeof *w) : NULL;
    int32_t *idx = sampling && p->top_p < 1.0f ? ps_malloc((size_t)n_vocab * sizeof *idx) : NULL;
    stop_state ss;
    ps_buf_init(&ss.text);
    ss.start = NULL;
    ss.max_stop = 0;
    if (p->n_stop > 0) {
        ss.start = ps_malloc(((size_t)p->max_tokens + 1) * sizeof *ss.start);
        for (int32_t i = 0; i < p->n_stop; i++) ss.max_stop = PS_MAX(ss.max_stop, strlen(p->stop[i]));
    }
    ps_status st = PS_OK;
    if ((sampling && !w) || (sampling && p->top_p < 1.0f && !idx) || (p->n_stop > 0 && !ss.start)) {
        st = ps_fail(err, PS_ERR_NOMEM, -1,
                     "out of memory for generating %d tokens over a vocabulary of %d",
                     p->max_tokens, n_vocab);
        goto done;
    }
    uint64_t rng = p->seed;
    int32_t eos = ps_vocab_eos(s->model->vocab);
    int32_t n_gen = 0;
    for (int32_t g = 0; g < p->max_tokens; g++) {
        if (g > 0 && cancelled(p)) {
            st = ps_fail(err, PS_ERR_CANCELLED, -1, "cancelled after %d generated tokens", g);
            goto done;
        }
        int32_t t = sampling ? sample_row(row, n_vocab, p->temperature, p->top_p, &rng, w, idx)
                             : argmax_row(row, n_vocab);
        int32_t e = n_tokens + g;
        st = topk_rows(s, p, row, 1, &t, r, e, e - 1, err);
        if (st != PS_OK) goto done;
        r->tokens[e] = t;
        n_gen = g + 1;
        if (p->stop_at_eos && t == eos) {
            n_gen = g; /* EOS ends the text and is not part of it */
            r->finish = PS_FINISH_STOP;
            break;
        }
        if (ss.start) {
            ss.start[g] = (int64_t)ss.text.len;
            const char *bytes;
            size_t len;
            if (ps_vocab_token_bytes(s->model->vocab, t, &bytes, &len) == PS_OK)
                ps_buf_append(&ss.text, bytes, len);
            ss.start[g + 1] = (int64_t)ss.text.len;
            if (ss.text.oom) {
                st = ps_fail(err, PS_ERR_NOMEM, -1, "out of memory for the generated text");
                goto done;
            }
            int64_t pos = find_stop(&ss, p, g);
            if (pos >= 0) {
                int32_t j = g;
                while (j > 0 && ss.start[j] > pos) j--;
                /* the stop string begins inside token j (or exactly at its start) */
                if (ss.start[j] == pos) {
                    n_gen = j;
                    r->stop_text_len = -1;
                } else {
                    n_gen = j + 1;
                    r->stop_text_len = (int32_t)(pos - ss.start[j]);
                }
                r->finish = PS_FINISH_STOP;
                break;
            }
        }
        if (g + 1 == p->max_tokens) break;
        const ps_seg seg = {q, &t, 1};
        st = ps_session_forward_segs(s, &seg, 1, gen_logits, err);
        if (st != PS_OK) goto done;
        row = gen_logits;
    }
    r->n_gen = n_gen;
    r->n_total = n_tokens + n_gen;
done:
    ps_free(w);
    ps_free(idx);
    ps_free(ss.start);
    ps_buf_free(&ss.text);
    return st;
}

/* ---- the prefix cache (prefix_cache.c, prefix_kv.c) --------------------------------------- */

/* One score's use of the cache: the blocks found (positions [0, m B), referenced until the
 * end) and the new blocks being filled (block indices m .. m + n_pend - 1; the first n_kv have
 * their K/V, and with recurrent layers every one of them has its state). */
typedef struct {
    ps_prefix_cache *c;
    uint64_t cfg;
    int32_t B, m, whole; /* whole: the prompt's whole blocks */
    ps_pc_block **held, **pend;
    ps_pc_claim *claim;  /* the claim on block m (the first computed), or NULL */
    int32_t n_pend, n_kv;
    bool stop;           /* a block found no room or its K/V had left a ring: no more blocks */
    bool state;          /* the model has recurrent layers: snapshots at n_past = (b + 1) B - 1 */
    int32_t ring;        /* the shortest sliding-layer ring (positions), 0 when none is shorter
                          * than the context: a call must end while the ring still holds the
                          * first block not yet captured */
} cache_run;

/* Where the next forward call must end for the cache, after position p0 (n_tokens: nowhere). */
static int32_t cache_split(const cache_run *cr, int32_t p0, int32_t n_tokens) {
    if (!cr->c || cr->stop) return n_tokens;
    const int32_t B = cr->B;
    int32_t end = n_tokens;
    if (cr->state) { /* the next snapshot point (b + 1) B - 1 > p0 of a block still to cache */
        int32_t b = PS_MAX((p0 + 1) / B, cr->m);
        if (b < cr->whole) end = PS_MIN(end, (b + 1) * B - 1);
    }
    if (cr->ring) { /* after the call the ring holds n_past - ring .. n_past - 1 */
        const int32_t b = cr->m + cr->n_kv;
        if (b < cr->whole) end = PS_MIN(end, b * B + cr->ring);
    }
    return end;
}

/* Gives the claim back: the blocks are in the cache, or will not be. */
static void cache_unclaim(cache_run *cr) {
    if (!cr->claim) return;
    ps_pcache_unclaim(cr->c, cr->claim);
    cr->claim = NULL;
}

/* Snapshot state, capture complete blocks (cache_after_forward's work). */
static ps_status cache_capture(cache_run *cr, const ps_seq *s, int32_t k, ps_error *err) {
    if (!cr->c || cr->stop) return PS_OK;
    const int32_t B = cr->B, e = s->n_past;
    if (cr->state && (e + 1) % B == 0) {
        const int32_t b = (e + 1) / B - 1;
        if (b >= cr->m && b < cr->whole && b == cr->m + cr->n_pend) {
            ps_pc_block *blk;
            ps_status st = ps_pcache_block_new(cr->c, k, s->kv_elt, &blk, err);
            if (st != PS_OK) return st;
            if (!blk) {
                cr->stop = true;
                return PS_OK;
            }
            ps_pcache_capture_state(cr->c, blk, s);
            cr->pend[cr->n_pend++] = blk;
        }
    }
    for (;;) {
        const int32_t b = cr->m + cr->n_kv;
        if (b >= cr->whole || (b + 1) * B > e) break;
        if (cr->n_kv == cr->n_pend) {
            if (cr->state) break; /* its state was not captured */
            ps_pc_block *blk;
            ps_status st = ps_pcache_block_new(cr->c, k, s->kv_elt, &blk, err);
            if (st != PS_OK) return st;
            if (!blk) {
                cr->stop = true;
                break;
            }
            cr->pend[cr->n_pend++] = blk;
        }
        if (!ps_pcache_capture_kv(cr->c, cr->pend[cr->n_kv], s, b * B)) {
            cr->stop = true;
            break;
        }
        cr->n_kv++;
    }
    return PS_OK;
}

/* After a forward call (the session at n_past): cache_capture; once no more blocks will be
 * inserted, the claim ends (other workers need not pass this prefix over any longer). */
static ps_status cache_after_forward(cache_run *cr, const ps_seq *s, int32_t k, ps_error *err) {
    ps_status st = cache_capture(cr, s, k, err);
    if (cr->stop) cache_unclaim(cr);
    return st;
}

/* The new blocks with their K/V take the ids and answers of their positions from the result
 * and join the index after the blocks found. */
static void cache_insert(cache_run *cr, const int32_t *tokens, const ps_score_result *r) {
    const int32_t B = cr->B, k = r->k;
    for (int32_t i = 0; i < cr->n_kv; i++) {
        ps_pc_block *blk = cr->pend[i];
        const size_t p0 = (size_t)(cr->m + i) * (size_t)B;
        memcpy(blk->ids, tokens + p0, (size_t)B * sizeof *blk->ids);
        memcpy(blk->lp, r->logprobs + p0, (size_t)B * sizeof *blk->lp);
        memcpy(blk->ent, r->entropy + p0, (size_t)B * sizeof *blk->ent);
        memcpy(blk->var, r->varentropy + p0, (size_t)B * sizeof *blk->var);
        memcpy(blk->rank, r->rank + p0, (size_t)B * sizeof *blk->rank);
        memcpy(blk->top_ids, r->top_ids + p0 * (size_t)k, (size_t)B * (size_t)k * sizeof(int32_t));
        memcpy(blk->top_lp, r->top_logprobs + p0 * (size_t)k, (size_t)B * (size_t)k * sizeof(float));
    }
    ps_pcache_insert(cr->c, cr->cfg, cr->m ? cr->held[cr->m - 1] : NULL, cr->pend, cr->n_kv);
    for (int32_t i = cr->n_kv; i < cr->n_pend; i++) ps_pcache_block_drop(cr->c, cr->pend[i]);
    cr->n_pend = cr->n_kv = 0;
    cache_unclaim(cr);
}

/* Gives back what the score still holds (also after a failure). */
static void cache_end(cache_run *cr) {
    if (!cr->c) return;
    cache_unclaim(cr);
    for (int32_t i = 0; i < cr->n_pend; i++) ps_pcache_block_drop(cr->c, cr->pend[i]);
    ps_pcache_release(cr->c, cr->held, cr->m);
    ps_free(cr->held);
    ps_free(cr->pend);
    memset(cr, 0, sizeof *cr);
}

/* Looks the prompt up (unless !lookup: then nothing is found); on a hit restores the blocks into sequence q (at n_past 0) and copies their
 * answers (entries 1 .. m B - 1) into r; *start = the first position to compute (m B - 1, the
 * last cached position, whose row scores the first new token, or 0). Claims the first block it
 * will compute (prefix_cache.h: a scheduler can then run other work before a prompt that
 * shares it; the claim ends when the blocks are inserted, or will not be). */
static ps_status cache_begin(cache_run *cr, ps_prefix_cache *c, const ps_session *s, ps_seq *q,
                             const int32_t *tokens, int32_t n_tokens, ps_score_result *r,
                             bool lookup, int32_t *start, ps_error *err) {
    memset(cr, 0, sizeof *cr);
    *start = 0;
    const ps_hparams *hp = &s->model->hp;
    cr->B = ps_pcache_block_len(c);
    cr->whole = n_tokens / cr->B;
    if (cr->whole == 0) return PS_OK;
    cr->held = ps_malloc((size_t)cr->whole * sizeof *cr->held);
    cr->pend = ps_malloc((size_t)cr->whole * sizeof *cr->pend);
    if (!cr->held || !cr->pend) {
        ps_free(cr->held);
        ps_free(cr->pend);
        return ps_fail(err, PS_ERR_NOMEM, -1, "out of memory (prefix cache lookup)");
    }
    cr->c = c;
    cr->cfg = ps_pcache_session_cfg(s);
    cr->state = hp->n_layer_rs > 0;
    for (int32_t l = 0; l < hp->n_layer_kv; l++)
        if (q->kv_len[l] < q->n_ctx)
            cr->ring = cr->ring ? PS_MIN(cr->ring, (int32_t)q->kv_len[l]) : (int32_t)q->kv_len[l];
    cr->stop = cr->ring > 0 && cr->ring < cr->B; /* no ring holds a whole block: no inserts */
    /* without lookup (named tokens, which blocks do not hold) every block is computed */
    cr->m = lookup ? ps_pcache_acquire(c, cr->cfg, tokens, n_tokens, r->k, cr->held, cr->whole)
                   : 0;
    if (cr->m < cr->whole && !cr->stop)
        cr->claim = ps_pcache_claim(c, cr->cfg, cr->m ? cr->held[cr->m - 1] : NULL,
                                    tokens + (size_t)cr->m * (size_t)cr->B, r->k);
    if (cr->m == 0) return PS_OK;
    ps_pcache_restore(c, cr->held, cr->m, q);
    const int32_t k = r->k;
    for (int32_t i = 0; i < cr->m; i++) {
        const int32_t from = i == 0 ? 1 : 0;
        const size_t e = (size_t)i * (size_t)cr->B + (size_t)from;
        ps_pcache_read_entries(c, cr->held[i], from, cr->B - from, k, r->logprobs + e,
                               r->top_ids + e * (size_t)k, r->top_logprobs + e * (size_t)k,
                               r->entropy + e, r->rank + e, r->varentropy + e);
    }
    *start = cr->m * cr->B - 1;
    return PS_OK;
}

/* ---- word masses (params.words; words.c) ------------------------------------------------ */

/* Gives r its word_start array (n_tokens + 1 entries, entry 0 NaN) when p->words. */
static bool words_alloc(ps_score_result *r, const ps_score_params *p, int32_t n_tokens) {
    r->word_start_nonbow = NAN;
    if (!p->words) return true;
    r->word_start = ps_malloc(((size_t)n_tokens + 1) * sizeof *r->word_start);
    if (!r->word_start) return false;
    r->word_start[0] = NAN;
    return true;
}

/* After topk_rows wrote the lse of rows [0, m) of logits into word_start + entry0 (the rows
 * of positions pos0 .. pos0 + m - 1): their word masses; with last, also the row m (the row
 * after the last prompt token, entry entry0 + m). mask: ps_words_mask's two masks. */
static void words_rows(const ps_session *s, const float *logits, int32_t m, bool last,
                       const int32_t *tokens, int32_t pos0, ps_score_result *r, int32_t entry0,
                       const uint8_t *mask) {
    if (!r->word_start) return;
    const int32_t n_vocab = s->model->hp.n_vocab;
    if (last) {
        const float *row = logits + (size_t)m * (size_t)n_vocab;
        r->word_start[entry0 + m] = ps_lse_f32(row, n_vocab);
        m++;
    }
    if (pos0 == 0 && m > 0 && ps_vocab_is_control(s->model->vocab, tokens[0]))
        r->word_start_nonbow = ps_masked_logmass(PS_ISA_AUTO, logits, mask + n_vocab, n_vocab,
                                                 ps_lse_f32(logits, n_vocab));
    ps_words_rows(s->pool, logits, m, n_vocab, mask, r->word_start + entry0);
}

ps_status ps_score_tokens(ps_session *s, const int32_t *tokens, int32_t n_tokens,
                          const ps_score_params *params, ps_score_result **out, ps_error *err) {
    if (!out) return ps_fail(err, PS_ERR_INVALID_ARG, -1, "out is required");
    *out = NULL;
    ps_score_params defaults = ps_score_default_params();
    const ps_score_params *p = params ? params : &defaults;
    ps_status st = check_params(s, tokens, n_tokens, p, err);
    if (st != PS_OK) return st;

    const int32_t n_vocab = s->model->hp.n_vocab;
    const int32_t chunk = p->chunk, k = p->k;
    cache_run cr;
    memset(&cr, 0, sizeof cr);
    /* a score with a cache computes entropy and rank even unasked: its blocks hold them */
    ps_score_result *r = result_new(n_tokens + p->max_tokens, k, p->stats || p->cache,
                                    p->compare != NULL);
    float *logits = ps_session_logits(s, (size_t)chunk);
    float *cmp_logits = p->compare ? ps_session_logits(p->compare, (size_t)chunk) : NULL;
    int32_t *targets = ps_malloc((size_t)chunk * sizeof *targets);
    uint8_t *wmask = NULL;
    if (p->words) {
        st = ps_words_mask(s->model->vocab, &wmask, err);
        if (st != PS_OK) goto fail;
    }
    if (!r || !ps_extras_alloc(r, p, n_tokens + p->max_tokens) || !logits || !targets ||
        (p->compare && !cmp_logits) || !ps_compares_alloc(r, p, n_tokens + p->max_tokens) ||
        !words_alloc(r, p, n_tokens)) {
        st = ps_fail(err, PS_ERR_NOMEM, -1,
                     "out of memory for the results of %d positions (k %d) and a %d x %d "
                     "logits buffer", n_tokens + p->max_tokens, k, chunk, n_vocab);
        goto fail;
    }
    result_start(r, tokens, n_tokens, k);

    ps_session_reset(s);
    if (p->compare) ps_session_reset(p->compare);
    ps_compares_reset(p);
    /* with a cache: positions [0, start) come from it (restored into the sequence, their
     * entries copied), the rest is computed, calls ending where the cache must capture */
    int32_t start = 0;
    if (p->cache && !p->words) {
        st = cache_begin(&cr, p->cache, s, s->seq, tokens, n_tokens, r, p->n_token_ids == 0,
                         &start, err);
        if (st != PS_OK) goto fail;
    }
    int32_t last_rows = 0; /* rows of the last forward call still in `logits` */
    for (int32_t p0 = start; p0 < n_tokens;) {
        if (cancelled(p)) {
            st = ps_fail(err, PS_ERR_CANCELLED, -1, "cancelled after %d of %d positions", p0,
                         n_tokens);
            goto fail;
        }
        int32_t n = PS_MIN(chunk, n_tokens - p0);
        n = PS_MIN(n, cache_split(&cr, p0, n_tokens) - p0);
        st = ps_session_forward(s, tokens + p0, n, logits, err);
        if (st != PS_OK) goto fail;
        if (p->compare) { /* the compared model on the same positions */
            ps_error e;
            ps_error_clear(&e);
            st = ps_session_forward(p->compare, tokens + p0, n, cmp_logits, &e);
            if (st != PS_OK) {
                st = ps_fail(err, st, -1, "the compared model: %s", e.message);
                goto fail;
            }
        }
        last_rows = n;
        /* rows whose next token is in the prompt: all but the very last prompt row */
        int32_t m = p0 + n < n_tokens ? n : n - 1;
        if (m > 0) {
            for (int32_t j = 0; j < m; j++) targets[j] = tokens[p0 + j + 1];
            st = topk_rows(s, p, logits, m, targets, r, p0 + 1, p0, err);
            if (st != PS_OK) goto fail;
            if (p->compare) {
                st = compare_rows(s, p, logits, cmp_logits, m, targets, r, p0 + 1, p0, err);
                if (st != PS_OK) goto fail;
            }
        }
        if (p->n_compares > 0) { /* each compared model on the same positions, then its rows */
            st = ps_compares_chunk(s, p, tokens, p0, n, PS_MAX(m, 0), logits, targets, r, err);
            if (st != PS_OK) goto fail;
        }
        words_rows(s, logits, m, m < n, tokens, p0, r, p0 + 1, wmask);
        st = cache_after_forward(&cr, s->seq, k, err);
        if (st != PS_OK) goto fail;
        p0 += n;
    }
    if (cr.c) {
        cache_insert(&cr, tokens, r);
        cache_end(&cr);
    }
    double sum = 0.0;
    for (int32_t i = 1; i < n_tokens; i++) sum += (double)r->logprobs[i];
    r->sum_logprob = sum;
    r->n_gen = 0;
    r->n_total = n_tokens;
    /* generation: the row after the last prompt token, then one position at a time */
    if (p->max_tokens > 0) {
        st = generate(s, s->seq, p, n_tokens, logits + (size_t)(last_rows - 1) * (size_t)n_vocab,
                      logits, r, err);
        if (st != PS_OK) goto fail;
    }
    ps_continuation_finish(r, p);
    result_finish(r, p);
    *out = r;
    r = NULL;
    st = PS_OK;

fail: /* also the way out on success, with r handed over */
    cache_end(&cr);
    ps_score_result_free(r);
    ps_free(targets);
    ps_free(wmask);
    return st;
}

/* ---- several prompts per forward pass ---------------------------------------------------- */

/* Prompt i's state in ps_score_batch. */
typedef struct {
    const ps_score_params *p;
    ps_seq *seq;
    int32_t fed;     /* positions forwarded so far (or restored from the prefix cache) */
    bool started;    /* its sequence is set up (and the cache looked up) */
    bool done;       /* every prompt row forwarded (and its generation, if any, done) */
    cache_run cr;    /* its use of p->cache */
} batch_item;

/* Whether prompt i, not started yet, should wait for an earlier prompt of the batch that is
 * running (started, not done) and computing blocks that i would then find in the cache: they
 * share at least one whole block past what that prompt found cached, its answers hold top-K
 * >= i's, both use the same cache, and its blocks still go into it (not stopped). Such a
 * "leader" inserts its new blocks when its prompt rows are done, at the end of a pass; i
 * starts at a later pass and restores them, so the shared prefix is computed once. Only a
 * question of speed: a prompt's bits never depend on what the cache holds. */
static bool batch_follows(const batch_item *it, const ps_score_prompt *prompts, int32_t lo,
                          int32_t i) {
    const ps_score_params *pi = it[i].p;
    if (!pi->cache || pi->n_token_ids > 0 || pi->words) return false; /* it would not read the blocks */
    const int32_t B = ps_pcache_block_len(pi->cache);
    const int32_t *ti = prompts[i].tokens, ni = prompts[i].n_tokens;
    for (int32_t j = lo; j < i; j++) {
        const batch_item *l = &it[j];
        if (!l->started || l->done || !l->cr.c || l->cr.stop || l->cr.c != pi->cache ||
            l->p->k < pi->k)
            continue;
        const int32_t *tj = prompts[j].tokens;
        const int32_t n = PS_MIN(ni, prompts[j].n_tokens);
        int32_t same = 0;
        while (same < n && ti[same] == tj[same]) same++;
        /* whole shared blocks the leader computes (it found m cached; it inserts up to its
         * own whole blocks) */
        if (PS_MIN(same / B, l->cr.whole) > l->cr.m) return true;
    }
    return false;
}

/* One ps_score_batch call's state: the prompts, their items and results, the pass's buffers
 * and the segments packed into the current pass. */
typedef struct {
    ps_session *s;
    const ps_score_prompt *prompts;
    int32_t n_prompts, max_seqs, rows, n_vocab;
    ps_score_params defaults; /* the parameters of a prompt that gives none */
    float *logits, *gen_logits;
    int32_t *targets;
    batch_item *it;
    uint8_t *wmask; /* the word-start mask, when a prompt asks for words */
    ps_score_result **results;
    ps_seg segs[PS_CHUNK];
    int32_t seg_item[PS_CHUNK];
    int32_t n_segs;
} batch_run;

/* Phase 1: every prompt's parameters checked; *rows = the smallest chunk any prompt asks for
 * (chunking never changes a score), at most the session's n_batch. */
static ps_status batch_check(batch_run *br, ps_error *err) {
    br->rows = br->s->n_batch;
    for (int32_t i = 0; i < br->n_prompts; i++) {
        const ps_score_params *p = br->prompts[i].params ? br->prompts[i].params : &br->defaults;
        ps_status st = check_params(br->s, br->prompts[i].tokens, br->prompts[i].n_tokens, p, err);
        if (st != PS_OK) {
            char msg[sizeof err->message];
            snprintf(msg, sizeof msg, "%s", err ? err->message : "");
            return ps_fail(err, st, -1, "prompt %d: %s", (int)i, msg);
        }
        if (p->compare || p->n_compares > 0)
            return ps_fail(err, PS_ERR_INVALID_ARG, -1,
                           "prompt %d: compare is done by ps_score_tokens, one prompt at a time",
                           (int)i);
        br->rows = PS_MIN(br->rows, p->chunk);
    }
    return PS_OK;
}

/* Phase 2: the pass's buffers and every prompt's result, started. */
static ps_status batch_alloc(batch_run *br, ps_error *err) {
    ps_session *s = br->s;
    /* the pass's rows, then one row for generation */
    br->logits = ps_session_logits(s, (size_t)br->rows + 1);
    br->gen_logits = br->logits ? br->logits + (size_t)br->rows * (size_t)br->n_vocab : NULL;
    br->targets = ps_malloc((size_t)br->rows * sizeof *br->targets);
    br->it = ps_calloc((size_t)br->n_prompts, sizeof *br->it);
    if (!br->logits || !br->targets || !br->it)
        return ps_fail(err, PS_ERR_NOMEM, -1, "out of memory for a %d x %d logits buffer",
                       br->rows + 1, br->n_vocab);
    for (int32_t i = 0; i < br->n_prompts; i++) {
        batch_item *b = &br->it[i];
        const ps_score_prompt *pr = &br->prompts[i];
        b->p = pr->params ? pr->params : &br->defaults;
        if (b->p->words && !br->wmask) {
            ps_status st = ps_words_mask(s->model->vocab, &br->wmask, err);
            if (st != PS_OK) return st;
        }
        const int32_t cap = pr->n_tokens + b->p->max_tokens;
        br->results[i] = result_new(cap, b->p->k, b->p->stats || b->p->cache, false);
        if (br->results[i] && !words_alloc(br->results[i], b->p, pr->n_tokens)) {
            ps_score_result_free(br->results[i]);
            br->results[i] = NULL;
        }
        if (!br->results[i])
            return ps_fail(err, PS_ERR_NOMEM, -1,
                           "out of memory for the results of prompt %d (%d positions, k %d)", i,
                           cap, b->p->k);
        if (!ps_extras_alloc(br->results[i], b->p, cap))
            return ps_fail(err, PS_ERR_NOMEM, -1,
                           "out of memory for the named tokens of prompt %d (%d positions)", i,
                           cap);
        result_start(br->results[i], pr->tokens, pr->n_tokens, b->p->k);
    }
    return PS_OK;
}

/* Phase 3, a pass's packing: prompts are packed in order from the first unfinished one (lo),
 * each taking what is left of it or of the pass, at most max_seqs prompts among lo .. lo +
 * max_seqs - 1, so prompt i can run on kept sequence i % max_seqs (every earlier prompt
 * sharing it is done by the time i starts), of its own length rounded up to 16 positions. A
 * prompt that shares whole blocks with a running one that computes them waits until they are
 * cached (batch_follows); the running one is always packed first, so a pass is never empty. */
static ps_status batch_pack(batch_run *br, int32_t lo, ps_error *err) {
    ps_session *s = br->s;
    int32_t used = 0;
    br->n_segs = 0;
    for (int32_t i = lo; i < br->n_prompts && i < lo + br->max_seqs && used < br->rows &&
                         br->n_segs < br->max_seqs;
         i++) {
        batch_item *b = &br->it[i];
        const int32_t nt = br->prompts[i].n_tokens;
        if (b->done) continue;
        if (cancelled(b->p))
            return ps_fail(err, PS_ERR_CANCELLED, -1,
                           "prompt %d cancelled after %d of %d positions", i, b->fed, nt);
        if (!b->started) {
            if (batch_follows(br->it, br->prompts, lo, i)) continue;
            const int64_t need = PS_MIN((int64_t)s->n_ctx,
                                        ((int64_t)nt + b->p->max_tokens + 15) & ~(int64_t)15);
            b->seq = ps_session_pool_seq(s, i % br->max_seqs, (int32_t)need, err);
            if (!b->seq) return PS_ERR_NOMEM;
            b->started = true;
            if (b->p->cache && !b->p->words) {
                ps_status st = cache_begin(&b->cr, b->p->cache, s, b->seq, br->prompts[i].tokens,
                                           nt, br->results[i], b->p->n_token_ids == 0, &b->fed,
                                           err);
                if (st != PS_OK) return st;
            }
        }
        int32_t n = PS_MIN(nt - b->fed, br->rows - used);
        n = PS_MIN(n, cache_split(&b->cr, b->fed, nt) - b->fed);
        br->segs[br->n_segs] = (ps_seg){b->seq, br->prompts[i].tokens + b->fed, n};
        br->seg_item[br->n_segs++] = i;
        used += n;
    }
    assert(br->n_segs > 0);
    return PS_OK;
}

/* Phase 4, after a pass's forward: each segment's rows through the top-K kernel (and the word
 * masses), its position advanced, its blocks captured for the cache. */
static ps_status batch_rows(batch_run *br, ps_error *err) {
    int32_t row0 = 0;
    for (int32_t g = 0; g < br->n_segs; g++) {
        const int32_t i = br->seg_item[g], n = br->segs[g].n, nt = br->prompts[i].n_tokens;
        batch_item *b = &br->it[i];
        const int32_t p0 = b->fed;
        const float *rows = br->logits + (size_t)row0 * (size_t)br->n_vocab;
        /* rows whose next token is in the prompt: all but the very last prompt row */
        const int32_t m = p0 + n < nt ? n : n - 1;
        if (m > 0) {
            for (int32_t j = 0; j < m; j++) br->targets[j] = br->prompts[i].tokens[p0 + j + 1];
            ps_status st = topk_rows(br->s, b->p, rows, m, br->targets, br->results[i], p0 + 1,
                                     p0, err);
            if (st != PS_OK) return st;
        }
        words_rows(br->s, rows, m, m < n, br->prompts[i].tokens, p0, br->results[i], p0 + 1,
                   br->wmask);
        b->fed += n;
        row0 += n;
        ps_status st = cache_after_forward(&b->cr, b->seq, b->p->k, err);
        if (st != PS_OK) return st;
    }
    return PS_OK;
}

/* Phase 5, the pass's finished prompts: their blocks into the cache (where the prompts
 * waiting for them find them at the next pass), the sum, then generation from their last row
 * (gen_logits is past the pass's rows, so the other prompts' rows stay). */
static ps_status batch_finish(batch_run *br, ps_error *err) {
    int32_t row0 = 0;
    for (int32_t g = 0; g < br->n_segs; g++) {
        const int32_t i = br->seg_item[g], nt = br->prompts[i].n_tokens;
        batch_item *b = &br->it[i];
        ps_score_result *r = br->results[i];
        row0 += br->segs[g].n;
        if (b->fed < nt) continue;
        if (b->cr.c) {
            cache_insert(&b->cr, br->prompts[i].tokens, r);
            cache_end(&b->cr);
        }
        double sum = 0.0;
        for (int32_t j = 1; j < nt; j++) sum += (double)r->logprobs[j];
        r->sum_logprob = sum;
        r->n_gen = 0;
        r->n_total = nt;
        if (b->p->max_tokens > 0) {
            ps_status st = generate(br->s, b->seq, b->p, nt,
                                    br->logits + (size_t)(row0 - 1) * (size_t)br->n_vocab,
                                    br->gen_logits, r, err);
            if (st != PS_OK) return st;
        }
        ps_continuation_finish(r, b->p);
        result_finish(r, b->p);
        b->done = true;
    }
    return PS_OK;
}

ps_status ps_score_batch(ps_session *s, const ps_score_prompt *prompts, int32_t n_prompts,
                         int32_t max_seqs, ps_score_result **results, ps_error *err) {
    ps_error_clear(err);
    if (!results || n_prompts < 0 || (n_prompts > 0 && !prompts) || !s)
        return ps_fail(err, PS_ERR_INVALID_ARG, -1,
                       "session, prompts and results are required (n_prompts %d)", n_prompts);
    for (int32_t i = 0; i < n_prompts; i++) results[i] = NULL;
    if (n_prompts == 0) return PS_OK;
    batch_run *br = ps_calloc(1, sizeof *br);
    if (!br) return ps_fail(err, PS_ERR_NOMEM, -1, "out of memory");
    br->s = s;
    br->prompts = prompts;
    br->n_prompts = n_prompts;
    br->n_vocab = s->model->hp.n_vocab;
    br->defaults = ps_score_default_params();
    br->results = results;
    ps_status st = batch_check(br, err);
    if (st == PS_OK) {
        br->max_seqs = max_seqs < 1 || max_seqs > br->rows ? br->rows : max_seqs;
        st = batch_alloc(br, err);
    }
    for (int32_t lo = 0; st == PS_OK;) {
        while (lo < n_prompts && br->it[lo].done) lo++;
        if (lo == n_prompts) break;
        st = batch_pack(br, lo, err);
        if (st == PS_OK) st = ps_session_forward_segs(s, br->segs, br->n_segs, br->logits, err);
        if (st == PS_OK) st = batch_rows(br, err);
        if (st == PS_OK) st = batch_finish(br, err);
    }
    if (st != PS_OK) {
        for (int32_t i = 0; i < n_prompts; i++) {
            if (br->it) cache_end(&br->it[i].cr);
            ps_score_result_free(results[i]);
            results[i] = NULL;
        }
    }
    ps_free(br->targets);
    ps_free(br->it);
    ps_free(br->wmask);
    ps_free(br);
    return st;
}
