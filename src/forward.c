/*
 * forward.c — the transformer over one batch of positions (llama / qwen2 / qwen3).
 *
 * For n new tokens at positions p0 = n_past .. n_past + n - 1, with x (n, n_embd) the residual:
 *
 *   x = token_embd[tokens]                                  one row converted per token
 *   per layer:
 *     xb = rmsnorm(x) * attn_norm
 *     q = xb @ Wq^T (+bq)  (n, n_head*hd);  k, v = xb @ Wk^T, Wv^T (+bk, bv)  (n, n_head_kv*hd)
 *     qwen3: q, k per head = rmsnorm(head) * q_norm / k_norm
 *     RoPE on q and k (llama: adjacent pairs; qwen: halves), then k, v -> cache[layer][kv head]
 *     att = softmax(q k^T / sqrt(hd), causal over the cache) v   (GQA: head h reads kv head
 *           h / (n_head / n_head_kv))
 *     x += att @ Wo^T (+bo)
 *     xb = rmsnorm(x) * ffn_norm
 *     x += (silu(xb @ Wgate^T) * (xb @ Wup^T)) @ Wdown^T
 *   logits (n, n_vocab) = (rmsnorm(x) * output_norm) @ Woutput^T
 *
 * The arithmetic follows llama.cpp's CPU graph where it matters for the last bits (rmsnorm sum of
 * squares in double, then (x * scale) * w; silu(x) = x / (1 + e^-x); RoPE angle
 * p * base^(-2i/n_rot) * freq_scale / freq_factor[i], computed here in double). Matmuls and
 * attention heads run on the pool; every value is computed by a fixed sequence of operations
 * whatever the thread count or batch split, so logits are identical for 1 or N threads and for
 * any chunking of a prompt.
 */
#include "model.h"
#include "prof.h"
#include "quant.h"

#include <math.h>

/* out (d) = (x * 1/sqrt(mean(x^2) + eps)) * w */
static void rmsnorm(float *out, const float *x, const float *w, int64_t d, float eps) {
    double ss = 0.0;
    for (int64_t i = 0; i < d; i++) ss += (double)(x[i] * x[i]);
    float mean = (float)(ss / (double)d);
    float scale = 1.0f / sqrtf(mean + eps);
    for (int64_t i = 0; i < d; i++) out[i] = (x[i] * scale) * w[i];
}

/* Rotates n_heads heads of hd floats each (v (n_heads, hd)) by the angles of one position:
 * cs, sn (n_rot/2). Dimensions n_rot..hd-1 pass through. */
static void rope_heads(float *v, int32_t n_heads, int32_t hd, int32_t n_rot, ps_rope_mode mode,
                       const float *cs, const float *sn) {
    const int32_t half = n_rot / 2;
    for (int32_t h = 0; h < n_heads; h++) {
        float *x = v + (int64_t)h * hd;
        for (int32_t i = 0; i < half; i++) {
            int32_t a = mode == PS_ROPE_NORMAL ? 2 * i : i;
            int32_t b = mode == PS_ROPE_NORMAL ? 2 * i + 1 : i + half;
            float x0 = x[a], x1 = x[b];
            x[a] = x0 * cs[i] - x1 * sn[i];
            x[b] = x0 * sn[i] + x1 * cs[i];
        }
    }
}

/* ---- attention ---- */

/* row (n) = softmax(row * scale). The sum runs in 8 interleaved partial sums (element j goes to
 * sum j % 8), added pairwise at the end: a fixed order that depends only on n, and 8 independent
 * add chains instead of one. */
static void softmax_row(float *row, int32_t n, float scale) {
    float mx = -INFINITY;
    for (int32_t j = 0; j < n; j++) {
        row[j] *= scale;
        mx = row[j] > mx ? row[j] : mx;
    }
    float part[8] = {0};
    int32_t j = 0;
    for (; j + 8 <= n; j += 8)
        for (int t = 0; t < 8; t++) {
            row[j + t] = expf(row[j + t] - mx);
            part[t] += row[j + t];
        }
    for (; j < n; j++) {
        row[j] = expf(row[j] - mx);
        part[j % 8] += row[j];
    }
    const float sum = ((part[0] + part[1]) + (part[2] + part[3])) +
                      ((part[4] + part[5]) + (part[6] + part[7]));
    const float inv = 1.0f / sum;
    for (j = 0; j < n; j++) row[j] *= inv;
}

typedef struct {
    const ps_session *s;
    int32_t layer, n;
    float scale;
} att_job;

/* One task = one head x up to PS_ATT_QBLOCK query positions i0..i1-1. Query i (absolute
 * position p = n_past + i) attends to cache positions 0..p:
 *   S (nq, keys) = Q (nq, hd) @ K^T * scale      (scores of a later query are ignored by
 *                                                 earlier ones: each row uses its own prefix)
 *   P = softmax of each row's prefix;  out (nq, hd) = P @ V   */
static void att_task(void *ctx, int64_t task, int32_t thread) {
    const att_job *job = ctx;
    const ps_session *s = job->s;
    const ps_hparams *hp = &s->model->hp;
    const int32_t n_qb = (job->n + PS_ATT_QBLOCK - 1) / PS_ATT_QBLOCK;
    const int32_t h = (int32_t)(task / n_qb), qb = (int32_t)(task % n_qb);
    const int32_t hd = hp->head_dim, g = h / (hp->n_head / hp->n_head_kv);
    const int64_t dq = (int64_t)hp->n_head * hd;
    const size_t head_off = ((size_t)job->layer * hp->n_head_kv + (size_t)g) * (size_t)s->n_ctx *
                            (size_t)hd;
    const float *K = s->k_cache + head_off, *V = s->v_cache + head_off;
    float *sc = s->att_scratch + (size_t)thread * s->att_stride;
    float *acc = sc + (size_t)PS_ATT_QBLOCK * (size_t)s->n_ctx;
    const int32_t i0 = qb * PS_ATT_QBLOCK, i1 = PS_MIN(job->n, i0 + PS_ATT_QBLOCK);
    const int32_t nq = i1 - i0;
    const int64_t lds = s->n_ctx;
    const float *q = s->q + (int64_t)i0 * dq + (int64_t)h * hd;
    int32_t n_keys[PS_ATT_QBLOCK] = {0};
    for (int32_t r = 0; r < nq; r++) n_keys[r] = s->n_past + i0 + r + 1;

    ps_matmul_f32_serial(s->isa, K, hd, n_keys[nq - 1], q, dq, nq, hd, sc, lds, acc);
    for (int32_t r = 0; r < nq; r++)
        softmax_row(sc + r * lds, n_keys[r], job->scale);
    ps_attn_pv(s->isa, sc, lds, n_keys, nq, V, hd, s->att + (int64_t)i0 * dq + (int64_t)h * hd,
               dq);
}

/* ---- the batch ---- */

static void add_bias(float *y, const float *b, int32_t n, int64_t d) {
    if (!b) return;
    for (int32_t i = 0; i < n; i++)
        for (int64_t j = 0; j < d; j++) y[i * d + j] += b[j];
}

void ps_forward_run(ps_session *s, const int32_t *tokens, int32_t n, float *logits) {
    const ps_model *m = s->model;
    const ps_hparams *hp = &m->hp;
    const ps_weights *w = &m->w;
    const int64_t d = hp->n_embd, hd = hp->head_dim, dq = (int64_t)hp->n_head * hd,
                  dkv = (int64_t)hp->n_head_kv * hd, ff = hp->n_ff;
    const int32_t half = hp->n_rot / 2;
    const ps_matmul_env env = {s->pool, s->isa, s->mm_scratch, s->mm_stride};
    const uint64_t t_fwd = ps_prof_start();

    /* x (n, d): embedding rows */
    for (int32_t i = 0; i < n; i++)
        ps_quant_row_to_f32(s->isa, w->token_embd.type,
                            (const uint8_t *)w->token_embd.data +
                                (size_t)tokens[i] * w->token_embd.row_bytes,
                            s->x + i * d, d);

    /* RoPE angles (n, n_rot/2) for this call's positions */
    for (int32_t i = 0; i < n; i++) {
        const double p = (double)(s->n_past + i);
        for (int32_t t = 0; t < half; t++) {
            double theta = p * pow((double)hp->rope_base, -2.0 * t / (double)hp->n_rot) *
                           (double)hp->rope_freq_scale;
            if (w->rope_freqs) theta /= (double)w->rope_freqs[t];
            s->rope_cos[(int64_t)i * half + t] = (float)cos(theta);
            s->rope_sin[(int64_t)i * half + t] = (float)sin(theta);
        }
    }

    for (int32_t l = 0; l < hp->n_layer; l++) {
        const ps_layer *L = &w->layers[l];
        for (int32_t i = 0; i < n; i++)
            rmsnorm(s->xb + i * d, s->x + i * d, L->attn_norm, d, hp->rms_eps);
        ps_matmul(&env, &L->wq, s->xb, d, n, s->q, dq);
        ps_matmul(&env, &L->wk, s->xb, d, n, s->k, dkv);
        ps_matmul(&env, &L->wv, s->xb, d, n, s->v, dkv);
        add_bias(s->q, L->bq, n, dq);
        add_bias(s->k, L->bk, n, dkv);
        add_bias(s->v, L->bv, n, dkv);
        for (int32_t i = 0; i < n; i++) {
            float *q = s->q + i * dq, *k = s->k + i * dkv;
            if (L->q_norm) {
                for (int32_t h = 0; h < hp->n_head; h++)
                    rmsnorm(q + h * hd, q + h * hd, L->q_norm, hd, hp->rms_eps);
                for (int32_t h = 0; h < hp->n_head_kv; h++)
                    rmsnorm(k + h * hd, k + h * hd, L->k_norm, hd, hp->rms_eps);
            }
            const float *cs = s->rope_cos + (int64_t)i * half, *sn = s->rope_sin + (int64_t)i * half;
            rope_heads(q, hp->n_head, (int32_t)hd, hp->n_rot, hp->rope_mode, cs, sn);
            rope_heads(k, hp->n_head_kv, (int32_t)hd, hp->n_rot, hp->rope_mode, cs, sn);
            /* k, v -> cache [layer][kv head][position][hd] */
            const int64_t pos = s->n_past + i;
            for (int32_t g = 0; g < hp->n_head_kv; g++) {
                size_t off = (((size_t)l * hp->n_head_kv + g) * (size_t)s->n_ctx + (size_t)pos) *
                             (size_t)hd;
                memcpy(s->k_cache + off, k + g * hd, (size_t)hd * sizeof(float));
                memcpy(s->v_cache + off, s->v + i * dkv + g * hd, (size_t)hd * sizeof(float));
            }
        }
        att_job aj = {s, l, n, 1.0f / sqrtf((float)hd)};
        const int64_t n_tasks = (int64_t)hp->n_head * ((n + PS_ATT_QBLOCK - 1) / PS_ATT_QBLOCK);
        const uint64_t t_att = ps_prof_start();
        ps_pool_for(s->pool, n_tasks, att_task, &aj);
        ps_prof_add(PS_PROF_ATTENTION, t_att);
        ps_matmul(&env, &L->wo, s->att, dq, n, s->ffn_out, d);
        add_bias(s->ffn_out, L->bo, n, d);
        for (int64_t i = 0; i < n * d; i++) s->x[i] += s->ffn_out[i];

        for (int32_t i = 0; i < n; i++)
            rmsnorm(s->xb + i * d, s->x + i * d, L->ffn_norm, d, hp->rms_eps);
        ps_matmul(&env, &L->w_gate, s->xb, d, n, s->hb, ff);
        ps_matmul(&env, &L->w_up, s->xb, d, n, s->hb2, ff);
        for (int64_t i = 0; i < n * ff; i++) {
            float g = s->hb[i];
            s->hb[i] = (g / (1.0f + expf(-g))) * s->hb2[i];
        }
        ps_matmul(&env, &L->w_down, s->hb, ff, n, s->ffn_out, d);
        for (int64_t i = 0; i < n * d; i++) s->x[i] += s->ffn_out[i];
    }

    if (logits) {
        for (int32_t i = 0; i < n; i++)
            rmsnorm(s->xb + i * d, s->x + i * d, w->output_norm, d, hp->rms_eps);
        ps_matmul(&env, &w->output, s->xb, d, n, logits, hp->n_vocab);
    }
    ps_prof_add(PS_PROF_FORWARD, t_fwd);
}
