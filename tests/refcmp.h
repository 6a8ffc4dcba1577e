/*
 * refcmp.h — what the family tests check of a generated model's logits, written once:
 * ref_check compares C logits with tests/reference/forward.py's float64 logits (one line of
 * figures: max |ref|, max |C - ref| and its row; one check that the largest difference is at
 * most 1e-4); invariance_check runs the model again on 2 threads and in other chunkings and
 * checks the bits do not move. Include after check.h (both count through CHECKF).
 */
#ifndef PS_TEST_REFCMP_H
#define PS_TEST_REFCMP_H

#include "fixture.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* c: the C logits, r: the reference, both (n_tok, nv) row-major. tag_width: the column the
 * test prints its tag in; isa: the ISA's name. One CHECKF. Returns max |ref|. */
static inline double ref_check(const char *tag, int tag_width, const char *isa, int32_t n_tok,
                               const float *c, const double *r, int64_t nv) {
    double md = 0, mr = 0;
    int64_t at = 0;
    for (int64_t j = 0; j < (int64_t)n_tok * nv; j++) {
        double dd = fabs((double)c[j] - r[j]);
        if (!(dd <= md)) md = dd, at = j;
        mr = fmax(mr, fabs(r[j]));
    }
    printf("  %-*s %-6s f32  T=%d max|ref| %.3f max|C-ref| %.3g (row %lld)\n", tag_width, tag,
           isa, n_tok, mr, md, (long long)(at / nv));
    CHECKF(md <= 1e-4, "%s %s: max |C - ref| = %g at row %lld", tag, isa, md,
           (long long)(at / nv));
    return mr;
}

/* best: the logits of ids[0..n_tok) in chunks of 256 on 1 thread, float32 activations. Checks
 * that 2 threads, then chunks of 1 (only when chunk1: slow), 7 (on 2 threads) and 100 give the
 * same bits, and that native activations give the same bits in chunks of 7 on 2 threads as in
 * chunks of 256 on 1 (first 300 rows). run: the settings of every run besides chunk, threads
 * and activations (model context, hooks); the ISA is the best. 4 or 5 CHECKFs, and whatever
 * run's hooks check. */
static inline void invariance_check(const char *tag, const char *path, const int32_t *ids,
                                    int32_t n_tok, fx_run run, const float *best, int64_t *nv,
                                    bool chunk1) {
    const size_t nf = (size_t)n_tok * (size_t)*nv;
    run.isa = ps_isa_best();
    run.act = PS_ACT_F32;
    run.chunk = 256;
    run.threads = 2;
    fx_run r = run;
    float *c2 = c_logits_run(path, ids, n_tok, &r, nv);
    CHECKF(c2 && !memcmp(c2, best, nf * 4), "%s: 2 threads differ from 1", tag);
    free(c2);
    const int32_t chunks[3] = {1, 7, 100};
    for (int j = 0; j < 3; j++) {
        if (chunks[j] == 1 && !chunk1) continue;
        r = run;
        r.chunk = chunks[j];
        r.threads = j == 1 ? 2 : 1;
        float *cc = c_logits_run(path, ids, n_tok, &r, nv);
        CHECKF(cc && !memcmp(cc, best, nf * 4), "%s: chunk %d differs from 256", tag, chunks[j]);
        free(cc);
    }
    r = run;
    r.act = PS_ACT_NATIVE;
    r.threads = 1;
    float *n1 = c_logits_run(path, ids, 300, &r, nv);
    r = run;
    r.act = PS_ACT_NATIVE;
    r.chunk = 7;
    float *n2 = c_logits_run(path, ids, 300, &r, nv);
    CHECKF(n1 && n2 && !memcmp(n1, n2, (size_t)300 * *nv * 4),
           "%s native: chunk 7 on 2 threads differs from chunk 256 on 1", tag);
    free(n1);
    free(n2);
}

#endif
