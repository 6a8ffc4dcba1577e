/*
 * test_perplexity.c — ps_perplexity (stories260K from ../shared), the procedures the
 * `perplexity` command prints through:
 *   - sliding: the windows' on_window reports cover every token but the first once, in order,
 *     their logprobs bitwise ps_score_tokens' over the same window, and the result's mean NLL
 *     is their negated sum in double, in token order; the last running figure is the result's;
 *   - llama: one report per chunk, its running estimate the result's running[] entry, bit for
 *     bit, and n_windows the chunks that run (--chunks honoured);
 *   - on_window returning false stops at once with PS_ERR_CANCELLED and no result;
 *   - without on_window the numbers are bitwise those with it;
 *   - bad parameters are refused (stride > ctx, llama ctx < 3, too few tokens, chunk 0).
 */
#include "promptscore.h"
#include "check.h"

#include <math.h>
#include <stdint.h>

enum { N = 700 };

typedef struct {
    int calls, stop_at;
    int32_t next;          /* sliding: the first token the next report must start at */
    bool order_ok, lp_ok;
    double nll;            /* sliding: the negated sum of the reported logprobs */
    double running[64];
    int32_t n_windows[64];
    ps_session *ref;       /* sliding: a second session to score each window on */
    const int32_t *ids;
    int32_t ctx, stride;
} rec;

static bool on_window(void *user, const ps_ppl_window *w) {
    rec *r = user;
    if (r->calls < 64) {
        r->running[r->calls] = w->running;
        r->n_windows[r->calls] = w->n_windows;
    }
    r->calls++;
    if (w->index != r->calls) r->order_ok = false;
    if (w->logprobs) { /* sliding: this window's new tokens, checked against ps_score_tokens */
        if (w->first != r->next || w->n < 1) r->order_ok = false;
        int32_t start = (w->index - 1) * r->stride, end = start + r->ctx;
        if (end > N) end = N;
        ps_score_params sp = ps_score_default_params();
        sp.k = 0;
        ps_score_result *sr = NULL;
        if (ps_score_tokens(r->ref, r->ids + start, end - start, &sp, &sr, NULL) != PS_OK) {
            r->lp_ok = false;
        } else {
            for (int32_t j = 0; j < w->n; j++) {
                float a = w->logprobs[j], b = sr->logprobs[w->first + j - start];
                if (memcmp(&a, &b, sizeof a)) r->lp_ok = false;
                r->nll -= (double)a;
            }
            ps_score_result_free(sr);
        }
        r->next = w->first + w->n;
    }
    return r->calls != r->stop_at;
}

int main(void) {
    const char *sh = ps_test_shared();
    if (!sh) {
        SKIP("../shared missing: ps_perplexity's cases need stories260K");
        return ps_test_done("perplexity");
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/models/stories260K.gguf", sh);
    ps_model *m = NULL;
    ps_model_params mp = ps_model_default_params();
    if (ps_model_load(path, &mp, &m, NULL) != PS_OK) {
        SKIP("cannot load %s", path);
        return ps_test_done("perplexity");
    }
    ps_session_params sp = ps_session_default_params();
    sp.n_ctx = 128;
    ps_session *s = NULL, *ref = NULL;
    CHECK(ps_session_create(m, &sp, &s, NULL) == PS_OK);
    CHECK(ps_session_create(m, &sp, &ref, NULL) == PS_OK);
    static int32_t ids[N];
    ids[0] = 1;
    for (int i = 1; i < N; i++) ids[i] = 3 + (int32_t)((i * 7919u) % 500u);

    /* sliding */
    ps_ppl_params p = ps_ppl_default_params();
    p.ctx = 128;
    p.stride = 48;
    ps_ppl_result *plain = NULL, *r = NULL;
    CHECK(ps_perplexity(s, ids, N, &p, &plain, NULL) == PS_OK);
    rec rc = {.stop_at = -1, .next = 1, .order_ok = true, .lp_ok = true, .ref = ref, .ids = ids,
              .ctx = 128, .stride = 48};
    p.on_window = on_window;
    p.user = &rc;
    CHECK(ps_perplexity(s, ids, N, &p, &r, NULL) == PS_OK);
    if (plain && r) {
        CHECKF(rc.calls == r->n_windows && rc.calls > 3, "sliding: %d reports, %d windows",
               rc.calls, r->n_windows);
        CHECK(rc.order_ok);
        CHECKF(rc.next == N, "sliding: the reports end at token %d of %d", rc.next, N);
        CHECK(rc.lp_ok);
        CHECKF(rc.nll / (double)(N - 1) == r->mean_nll, "sliding: mean nll %.17g vs %.17g",
               rc.nll / (double)(N - 1), r->mean_nll);
        CHECK(rc.running[(rc.calls - 1) % 64] == r->perplexity || rc.calls > 64);
        CHECK(!memcmp(&plain->perplexity, &r->perplexity, sizeof(double)) &&
              !memcmp(&plain->mean_nll, &r->mean_nll, sizeof(double)));
    }
    ps_ppl_result_free(plain);
    ps_ppl_result_free(r);

    /* llama */
    p = ps_ppl_default_params();
    p.mode = PS_PPL_LLAMA;
    p.ctx = 64;
    p.chunk = 7;
    plain = r = NULL;
    CHECK(ps_perplexity(s, ids, N, &p, &plain, NULL) == PS_OK);
    rec rl = {.stop_at = -1, .order_ok = true, .lp_ok = true};
    p.on_window = on_window;
    p.user = &rl;
    CHECK(ps_perplexity(s, ids, N, &p, &r, NULL) == PS_OK);
    if (plain && r) {
        CHECKF(rl.calls == N / 64 && r->n_windows == N / 64, "llama: %d reports, %d chunks",
               rl.calls, r->n_windows);
        CHECK(rl.order_ok);
        bool same = true;
        for (int c = 0; c < rl.calls && c < 64; c++)
            same = same && !memcmp(&rl.running[c], &r->running[c], sizeof(double)) &&
                   !memcmp(&rl.running[c], &plain->running[c], sizeof(double)) &&
                   rl.n_windows[c] == N / 64;
        CHECK(same);
        CHECK(!memcmp(&plain->perplexity_stderr, &r->perplexity_stderr, sizeof(double)));
    }
    ps_ppl_result_free(plain);
    ps_ppl_result_free(r);
    p.max_chunks = 3;
    rl = (rec){.stop_at = -1, .order_ok = true};
    r = NULL;
    CHECK(ps_perplexity(s, ids, N, &p, &r, NULL) == PS_OK);
    CHECKF(rl.calls == 3 && r && r->n_windows == 3 && rl.n_windows[0] == 3,
           "--chunks 3: %d reports", rl.calls);
    ps_ppl_result_free(r);

    /* stopping */
    for (int mode = 0; mode < 2; mode++) {
        p = ps_ppl_default_params();
        p.mode = mode ? PS_PPL_LLAMA : PS_PPL_SLIDING;
        p.ctx = 64;
        rec st = {.stop_at = 2, .next = 1, .order_ok = true, .lp_ok = true, .ref = ref,
                  .ids = ids, .ctx = 64, .stride = 32};
        p.on_window = on_window;
        p.user = &st;
        r = (ps_ppl_result *)&st; /* must come back NULL */
        ps_error err;
        memset(&err, 0, sizeof err);
        ps_status code = ps_perplexity(s, ids, N, &p, &r, &err);
        CHECKF(code == PS_ERR_CANCELLED && r == NULL && st.calls == 2,
               "%s: stop at the second report: %s, %d calls (%s)", mode ? "llama" : "sliding",
               ps_status_str(code), st.calls, err.message);
    }

    /* refusals */
    struct {
        ps_ppl_mode mode;
        int32_t ctx, stride, chunk, n;
    } bad[] = {{PS_PPL_SLIDING, 64, 65, 256, N}, {PS_PPL_LLAMA, 2, 0, 256, N},
               {PS_PPL_LLAMA, 64, 0, 256, 127}, {PS_PPL_SLIDING, 64, 0, 256, 1},
               {PS_PPL_SLIDING, 64, 0, 0, N}, {PS_PPL_LLAMA, 256, 0, 256, N}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        p = ps_ppl_default_params();
        p.mode = bad[i].mode;
        p.ctx = bad[i].ctx;
        p.stride = bad[i].stride;
        p.chunk = bad[i].chunk;
        r = NULL;
        ps_error err;
        memset(&err, 0, sizeof err);
        ps_status code = ps_perplexity(s, ids, bad[i].n, &p, &r, &err);
        CHECKF(code != PS_OK && r == NULL && err.message[0], "bad case %zu: %s", i,
               ps_status_str(code));
    }
    ps_session_free(s);
    ps_session_free(ref);
    ps_model_free(m);
    return ps_test_done("perplexity");
}
