/*
 * refcmp.h — the family tests' comparison of C logits with tests/reference/forward.py's float64
 * logits: one line of figures (max |ref|, max |C - ref| and its row) and one check that the
 * largest difference is at most 1e-4. Include after check.h (it counts through CHECKF).
 */
#ifndef PS_TEST_REFCMP_H
#define PS_TEST_REFCMP_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>

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

#endif
