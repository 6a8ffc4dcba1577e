/*
 * moe.c — the mixture-of-experts FFN (layers with PS_L_FFN_MOE: qwen3moe, qwen35moe, llama with
 * experts, gpt-oss).
 *
 * For the n rows of xb (n, n_embd) — the FFN-normed residual — with E = n_expert experts, k =
 * n_expert_used of them per row and F = n_ff_exp:
 *
 *   logits (n, E) = xb @ Wgate_inp^T                       the router (a ps_matmul)
 *   p = softmax(logits) per row                            float32: expf(l - max), the sum in
 *                                                          double, times (float)(1 / sum)
 *   sel[i][0..k) = the k largest p[i], in that order       (equal p: the lower expert id first)
 *   w[i][j] = p[i][sel[i][j]]; when expert_norm:           sum in double, rounded to float,
 *             w[i][j] /= max(sum_j w[i][j], 2^-14)         clamped as llama.cpp does
 *   out[i] = sum over j = 0..k-1, in that order, of w[i][j] * down_e(silu(gate_e(xb[i])) * up_e(xb[i]))
 *            with e = sel[i][j]: out = w0 * y0, then out += wj * yj (product rounded, then added)
 *
 * This is llama.cpp's build_moe_ffn for these families (softmax gating, norm_w, no scale; the
 * views of the k experts added in selection order). The expert matrices are the 3-D tensors
 * ffn_{gate,up}_exps (ne [n_embd, F, E]) and ffn_down_exps (ne [F, n_embd, E]); expert e is the
 * ps_mat at e * stride (ps_mat3_at), so every weight type ps_matmul supports works. A file may
 * merge gate and up into ffn_gate_up_exps (ne [n_embd, 2F, E], PS_L_GATE_UP): expert e's rows
 * 0..F-1 are its gate and F..2F-1 its up (llama.cpp's views of the merged product), read here as
 * two ps_mat views of the same bytes, so the merged and split files give the same bits.
 *
 * gpt-oss (PS_L_MOE_OAI; llama.cpp's LLM_FFN_SWIGLU_OAI_MOE with SOFTMAX_WEIGHT gating):
 *   logits += ffn_gate_inp.bias; sel = the k largest logits (equal: lower id first);
 *   w[i][j] = softmax over the k chosen logits (expf(l - l_max), sum in double, * (float)(1/sum));
 *   g += gate_bias[e], u += up_bias[e]; x = min(g, 7), y = clamp(u, -7, 7);
 *   h = x / (1 + expf(-1.702 x)) * (y + 1); y_e = down_e(h) + down_bias[e]; out as above (no
 *   renormalisation).
 *
 * Compute: the (row, j) pairs are grouped by expert — experts in ascending id, an expert's rows
 * in ascending order — and the rows of each active expert are gathered into a contiguous block;
 * the active experts' products then run as grouped matmuls (ps_matmul_group): one call for the
 * gate and up of up to 128 experts, whose rows are quantised once for both, and one for their
 * down products, the pool's tasks spanning (expert, weight tile) pairs across the experts
 * instead of one ps_matmul per expert and matrix (~16 rows each at 256 positions, 128 experts,
 * 8 used: hundreds of small dispatches per layer). experts_plain, that per-expert loop, stays
 * beside it as the reference in test builds (PS_TESTING: ps_test_moe_plain; test_moe compares
 * them bitwise). Experts without rows are never touched (so their pages need not be resident).
 * Routing, gathering, SwiGLU and the weighted sum run one pool task per row. Every output value
 * comes from the same operations whatever the thread count or chunking: ps_matmul's result for
 * a row does not depend on the other rows of the call (grouped or not), and the sum over a
 * row's experts is in selection order.
 *
 * Scratch (session, sized at creation when a layer has experts): moe_logits (n_batch, E),
 * moe_sel / moe_w / moe_pos (n_batch, k), moe_row (n_batch * k), moe_start (E + 1),
 * moe_x (n_batch * k, n_embd) gathered inputs and, after the down product, expert outputs,
 * moe_g / moe_u (n_batch * k, F).
 */
#include "run/moe.h"
#include "base/prof.h"
#include "base/testhooks.h"
#include "kernels/matmul_quant.h"
#include "kernels/vecmath.h"

#include <math.h>
#include <stdatomic.h>

#ifdef PS_TESTING
/* ps_test_moe_plain (testhooks.h): the per-expert reference path instead of the grouped one */
static atomic_bool moe_plain;
#endif

typedef enum { MOE_ROUTE, MOE_GATHER, MOE_SWIGLU, MOE_DOWN_BIAS, MOE_SUM } moe_op;

/* gpt-oss's clamped SwiGLU (llama.cpp's swiglu_oai: alpha 1.702, limit 7) */
#define OAI_ALPHA 1.702f
#define OAI_LIMIT 7.0f

typedef struct {
    ps_session *s;
    const ps_layer *L;
    moe_op op;
    float *out;
} moe_job;

/* sel[0..k) <- the indices of the k largest of p[0..E), largest first; a tie goes to the
 * lower index. */
static void top_k(const float *p, int32_t E, int32_t k, int32_t *sel) {
    for (int32_t j = 0; j < k; j++) {
        int32_t best = -1;
        for (int32_t e = 0; e < E; e++) {
            bool taken = false;
            for (int32_t t = 0; t < j && !taken; t++) taken = sel[t] == e;
            if (!taken && (best < 0 || p[e] > p[best])) best = e;
        }
        sel[j] = best;
    }
}

/* Row i (gpt-oss): biased logits, the top k, softmax over them. */
static void route_row_oai(ps_session *s, const ps_layer *L, int64_t i) {
    const ps_hparams *hp = &s->model->hp;
    const int32_t E = hp->n_expert, k = hp->n_expert_used;
    float *p = s->moe_logits + i * E;
    int32_t *sel = s->moe_sel + i * k;
    float *w = s->moe_w + i * k;
    for (int32_t e = 0; e < E; e++) p[e] += L->gate_inp_b[e];
    top_k(p, E, k, sel);
    const float mx = p[sel[0]];
    double sum = 0.0;
    for (int32_t j = 0; j < k; j++) {
        w[j] = expf(p[sel[j]] - mx);
        sum += (double)w[j];
    }
    const float scale = (float)(1.0 / sum);
    for (int32_t j = 0; j < k; j++) w[j] *= scale;
}

/* The expert of grouped pair a: the e with start[e] <= a < start[e + 1] (non-empty groups). */
static int32_t pair_expert(const int32_t *start, int32_t E, int64_t a) {
    int32_t lo = 0, hi = E - 1;
    while (lo < hi) {
        const int32_t mid = lo + (hi - lo + 1) / 2;
        if (start[mid] <= a) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

/* Row i: softmax over the router logits, the top k, their weights. */
static void route_row(ps_session *s, int64_t i) {
    const ps_hparams *hp = &s->model->hp;
    const int32_t E = hp->n_expert, k = hp->n_expert_used;
    float *p = s->moe_logits + i * E;
    int32_t *sel = s->moe_sel + i * k;
    float *w = s->moe_w + i * k;
    float mx = -INFINITY;
    for (int32_t e = 0; e < E; e++) mx = p[e] > mx ? p[e] : mx;
    double sum = 0.0;
    for (int32_t e = 0; e < E; e++) {
        p[e] = expf(p[e] - mx);
        sum += (double)p[e];
    }
    const float scale = (float)(1.0 / sum);
    for (int32_t e = 0; e < E; e++) p[e] *= scale;
    top_k(p, E, k, sel);
    for (int32_t j = 0; j < k; j++) w[j] = p[sel[j]];
    if (hp->expert_norm) {
        double ws = 0.0;
        for (int32_t j = 0; j < k; j++) ws += (double)w[j];
        float wsum = (float)ws;
        if (!(wsum >= 6.103515625e-5f)) wsum = 6.103515625e-5f;
        for (int32_t j = 0; j < k; j++) w[j] /= wsum;
    }
}

static void moe_task(void *ctx, int64_t i, int32_t thread) {
    (void)thread;
    const moe_job *job = ctx;
    ps_session *s = job->s;
    const ps_hparams *hp = &s->model->hp;
    const int64_t d = hp->n_embd, k = hp->n_expert_used, F = hp->n_ff_exp;
    switch (job->op) {
    case MOE_ROUTE:
        if (job->L->feat & PS_L_MOE_OAI) route_row_oai(s, job->L, i);
        else route_row(s, i);
        break;
    case MOE_GATHER:
        for (int64_t j = 0; j < k; j++)
            memcpy(s->moe_x + (int64_t)s->moe_pos[i * k + j] * d, s->xb + i * d,
                   (size_t)d * sizeof(float));
        break;
    case MOE_SWIGLU: /* i: a grouped (row, expert) pair */
        if (job->L->feat & PS_L_MOE_OAI) {
            const int32_t e = pair_expert(s->moe_start, hp->n_expert, i);
            const float *gb = job->L->gate_exps_b + (int64_t)e * F,
                        *ub = job->L->up_exps_b + (int64_t)e * F;
            float *g = s->moe_g + i * F, *u = s->moe_u + i * F;
            for (int64_t f = 0; f < F; f++) {
                const float x = fminf(g[f] + gb[f], OAI_LIMIT);
                const float y = fminf(fmaxf(u[f] + ub[f], -OAI_LIMIT), OAI_LIMIT);
                const float glu = x / (1.0f + expf(OAI_ALPHA * (-x)));
                g[f] = glu * (y + 1.0f);
            }
        } else {
            ps_silu_mul_f32(s->isa, s->moe_g + i * F, s->moe_u + i * F, F);
        }
        break;
    case MOE_DOWN_BIAS: { /* i: a grouped pair; its expert output += down bias */
        const int32_t e = pair_expert(s->moe_start, hp->n_expert, i);
        const float *db = job->L->down_exps_b + (int64_t)e * d;
        float *y = s->moe_x + i * d;
        for (int64_t c = 0; c < d; c++) y[c] += db[c];
        break;
    }
    case MOE_SUM: {
        float *o = job->out + i * d;
        const float *w = s->moe_w + i * k;
        const float *y = s->moe_x + (int64_t)s->moe_pos[i * k] * d;
        for (int64_t c = 0; c < d; c++) o[c] = w[0] * y[c];
        for (int64_t j = 1; j < k; j++) {
            y = s->moe_x + (int64_t)s->moe_pos[i * k + j] * d;
            const float wj = w[j];
            for (int64_t c = 0; c < d; c++) {
                const float t = wj * y[c];
                o[c] += t;
            }
        }
        break;
    }
    }
}

/* Expert e's gate and up (merged: rows 0..F-1 gate, F..2F-1 up of one matrix). */
static void expert_gate_up(const ps_layer *L, int64_t e, int64_t F, ps_mat *g, ps_mat *u) {
    if (L->feat & PS_L_GATE_UP) {
        *g = *u = ps_mat3_at(&L->gate_up_exps, e);
        g->n_out = u->n_out = F;
        u->data = (const uint8_t *)u->data + (size_t)F * u->row_bytes;
        if (u->qtiles) /* F % 16 == 0 where there is one (model.c): whole tiles */
            u->qtiles = (const uint8_t *)u->qtiles + ps_mmq_copy_bytes(g);
    } else {
        *g = ps_mat3_at(&L->gate_exps, e);
        *u = ps_mat3_at(&L->up_exps, e);
    }
}

#ifdef PS_TESTING
/* The reference: per active expert one ps_matmul per matrix (threads across its weight
 * tiles). Test builds only (PS_TESTING), where ps_test_moe_plain selects it. */
static void experts_plain(ps_session *s, const ps_matmul_env *env, const ps_layer *L,
                          moe_job *job) {
    const ps_hparams *hp = &s->model->hp;
    const int64_t d = hp->n_embd, E = hp->n_expert, k = hp->n_expert_used, F = hp->n_ff_exp;
    const int32_t *start = s->moe_start;
    const int64_t n = start[E] / k;
    for (int64_t e = 0; e < E; e++) {
        const int64_t r0 = start[e], nr = start[e + 1] - r0;
        if (nr == 0) continue;
        ps_mat g, u;
        expert_gate_up(L, e, F, &g, &u);
        ps_matmul(env, &g, s->moe_x + r0 * d, d, nr, s->moe_g + r0 * F, F);
        ps_matmul(env, &u, s->moe_x + r0 * d, d, nr, s->moe_u + r0 * F, F);
    }
    job->op = MOE_SWIGLU;
    ps_pool_for(s->pool, n * k, moe_task, job);
    for (int64_t e = 0; e < E; e++) {
        const int64_t r0 = start[e], nr = start[e + 1] - r0;
        if (nr == 0) continue;
        const ps_mat dn = ps_mat3_at(&L->down_exps, e);
        ps_matmul(env, &dn, s->moe_g + r0 * F, F, nr, s->moe_x + r0 * d, d);
    }
}
#endif /* PS_TESTING */

#define MOE_GROUP 128 /* experts per ps_matmul_group call (the items live on the stack) */

/* The items of the active experts from *e on, up to MOE_GROUP of them: their gate and up
 * (rows of moe_x into moe_g, moe_u) or, with down, their down product (moe_g into moe_x). */
static int32_t expert_items(ps_session *s, const ps_layer *L, bool down, int64_t *e,
                            ps_mm_item *items) {
    const ps_hparams *hp = &s->model->hp;
    const int64_t d = hp->n_embd, E = hp->n_expert, F = hp->n_ff_exp;
    const int32_t *start = s->moe_start;
    int32_t n_items = 0;
    for (; *e < E && n_items < MOE_GROUP; ++*e) {
        const int64_t r0 = start[*e], nr = start[*e + 1] - r0;
        if (nr == 0) continue;
        ps_mm_item *it = &items[n_items++];
        if (down) {
            *it = (ps_mm_item){s->moe_g + r0 * F, F, nr, 1, {ps_mat3_at(&L->down_exps, *e)},
                               {s->moe_x + r0 * d}, d};
        } else {
            *it = (ps_mm_item){s->moe_x + r0 * d, d, nr, 2, {{0}},
                               {s->moe_g + r0 * F, s->moe_u + r0 * F}, F};
            expert_gate_up(L, *e, F, &it->w[0], &it->w[1]);
        }
    }
    return n_items;
}

/* The same products grouped: gate and up of up to MOE_GROUP active experts in one
 * ps_matmul_group (their rows quantised once for both), then their down products in another,
 * so the pool's tasks span (expert, weight tile) pairs across experts; bitwise the same as
 * experts_plain (ps_matmul_group's contract). */
static void experts_grouped(ps_session *s, const ps_matmul_env *env, const ps_layer *L,
                            moe_job *job) {
    const ps_hparams *hp = &s->model->hp;
    const int64_t E = hp->n_expert, k = hp->n_expert_used;
    const int64_t n = s->moe_start[E] / k;
    ps_mm_item items[MOE_GROUP];
    for (int64_t e = 0; e < E;) ps_matmul_group(env, items, expert_items(s, L, false, &e, items));
    job->op = MOE_SWIGLU;
    ps_pool_for(s->pool, n * k, moe_task, job);
    for (int64_t e = 0; e < E;) ps_matmul_group(env, items, expert_items(s, L, true, &e, items));
}

#ifdef PS_TESTING
void ps_test_moe_plain(bool on) { atomic_store(&moe_plain, on); }
#endif

void ps_moe_ffn(ps_session *s, const ps_matmul_env *env, int32_t layer, int32_t n, float *out) {
    const ps_hparams *hp = &s->model->hp;
    const ps_layer *L = &s->model->w.layers[layer];
    const int64_t d = hp->n_embd, E = hp->n_expert, k = hp->n_expert_used;
    uint64_t t0 = ps_prof_start();
    moe_job job = {s, L, MOE_ROUTE, out};

    /* route: logits, softmax, top k, weights */
    ps_matmul(env, &L->gate_inp, s->xb, d, n, s->moe_logits, E);
    ps_pool_for(s->pool, n, moe_task, &job);

    /* group the (row, j) pairs by expert: ascending expert, then ascending row */
    int32_t *start = s->moe_start;
    memset(start, 0, (size_t)(E + 1) * sizeof *start);
    for (int64_t a = 0; a < (int64_t)n * k; a++) start[s->moe_sel[a] + 1]++;
    for (int64_t e = 0; e < E; e++) start[e + 1] += start[e];
    int32_t *fill = s->moe_fill;
    memcpy(fill, start, (size_t)E * sizeof *fill);
    for (int64_t a = 0; a < (int64_t)n * k; a++) {
        const int32_t pos = fill[s->moe_sel[a]]++;
        s->moe_pos[a] = pos;
    }
    job.op = MOE_GATHER;
    ps_pool_for(s->pool, n, moe_task, &job);
    ps_prof_add(PS_PROF_MOE_ROUTE, t0);

    /* the active experts: gate and up over their rows, SwiGLU, down (into moe_x) */
    t0 = ps_prof_start();
#ifdef PS_TESTING
    if (atomic_load_explicit(&moe_plain, memory_order_relaxed)) experts_plain(s, env, L, &job);
    else
#endif
        experts_grouped(s, env, L, &job);
    if (L->feat & PS_L_MOE_OAI) {
        job.op = MOE_DOWN_BIAS;
        ps_pool_for(s->pool, (int64_t)n * k, moe_task, &job);
    }
    ps_prof_add(PS_PROF_MOE_EXPERTS, t0);

    /* the weighted sum over each row's experts, in selection order */
    t0 = ps_prof_start();
    job.op = MOE_SUM;
    ps_pool_for(s->pool, n, moe_task, &job);
    ps_prof_add(PS_PROF_MOE_ROUTE, t0);
}
