/*
 * forward.c — the layer graph over one batch of rows: the layer loop and its pieces (which
 * pieces a layer runs is its feature set, arch.h); attention over the cache is attention.c's,
 * the experts moe.c's, the delta rule deltanet.c's.
 *
 * A call runs segments {sequence, tokens, n} (state.h): n rows in all, each row at its own
 * sequence's next position p. With x (n, n_embd) the residual:
 *
 *   x = token_embd[tokens]                                  one row converted per token
 *   per layer:
 *     xb = rmsnorm(x) * attn_norm
 *     q = xb @ Wq^T (+bq)  (n, n_head*hd);  k, v = xb @ Wk^T, Wv^T (+bk, bv)  (n, n_head_kv*hd)
 *     qwen3: q, k per head = rmsnorm(head) * q_norm / k_norm
 *     phi3: q, k, v are row ranges of one attn_qkv; q *= 1/sqrt(hd) after RoPE, scale 1
 *     RoPE on q and k at the row's position (llama: adjacent pairs; qwen: halves), then
 *     k, v -> the row's sequence's cache (attention.h)
 *     att = softmax(q k^T / sqrt(hd), causal over that cache) v   (GQA: head h reads kv head
 *           h / (n_head / n_head_kv); gpt-oss: head h's sink logit joins each softmax's
 *           max and denominator, ps_softmax_sink_f32)
 *     x += att @ Wo^T (+bo)
 *     xb = rmsnorm(x) * ffn_norm
 *     x += (silu(xb @ Wgate^T) * (xb @ Wup^T)) @ Wdown^T
 *     olmo2: no attn_norm / ffn_norm (attention and FFN read x); q, k = rmsnorm over the whole
 *     row * q_norm / k_norm; each output is rmsnorm(out) * post_attention_norm /
 *     post_ffw_norm before it is added to x
 *     (phi3: Wgate, Wup are the two halves of one ffn_up)
 *   logits (n, n_vocab) = (rmsnorm(x) * output_norm) @ Woutput^T (+ output.bias)
 *
 * The arithmetic follows llama.cpp's CPU graph where it matters for the last bits (rmsnorm sum of
 * squares in double, then (x * scale) * w; silu(x) = x / (1 + e^-x); RoPE angles as rope.c
 * computes them: p * base^(-2i/n_rot) / freq_factor[i] in double, scaled linearly or by
 * YaRN). Everything runs on the pool: matmuls by weight tiles over all rows at once, attention
 * by (segment, head, PS_ATT_QBLOCK = 32 queries), the recurrent layers by (segment, channel
 * block) and (segment, value head), and the row-wise steps between them (norms, biases, RoPE,
 * cache writes, residual adds, SwiGLU) by row. Every value is computed by a fixed sequence of
 * operations whatever the thread count, batch split or the other segments of the call, so
 * logits are identical for 1 or N threads, for any chunking of a prompt, and for a prompt
 * alone or packed with others.
 */
#include "run/forward.h"
#include "run/attention.h"
#include "run/deltanet.h"
#include "run/moe.h"
#include "base/prof.h"
#include "kernels/matmul.h"
#include "kernels/vecmath.h"

#include <math.h>

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

/* ---- Gated DeltaNet ---- */

typedef struct {
    const ps_session *s;
    const ps_layer *L;
    const ps_seg *segs;
    int32_t row0[PS_CHUNK + 1]; /* segment i's first row */
    int64_t per_seg;            /* tasks per segment */
} dn_job;

#define DN_CONV_CHANNELS 64 /* channels per conv task */

/* One segment's rows of dn_conv (n, ch) = silu(causal conv of its sequence's state ++ dn_qkv),
 * DN_CONV_CHANNELS channels per task; the state advances */
static void dn_conv_task(void *ctx, int64_t task, int32_t thread) {
    (void)thread;
    const dn_job *job = ctx;
    const ps_session *s = job->s;
    const ps_hparams *hp = &s->model->hp;
    const int64_t si = task / job->per_seg, cb = task % job->per_seg;
    const int64_t r0 = job->row0[si], n = job->row0[si + 1] - r0;
    const int64_t dk = hp->ssm_d_state, ch = 2 * (int64_t)hp->ssm_n_k * dk + hp->ssm_n_v * dk;
    const int64_t c0 = cb * DN_CONV_CHANNELS, c1 = PS_MIN(ch, c0 + DN_CONV_CHANNELS);
    float *state = job->segs[si].seq->conv_state +
                   (size_t)job->L->rs_slot * (size_t)(hp->ssm_d_conv - 1) * ch;
    ps_dn_conv_silu(s->isa, s->dn_qkv + r0 * ch, ch, (int32_t)n, state, job->L->conv1d,
                    hp->ssm_d_conv, ch, c0, c1, s->dn_conv + r0 * ch, ch);
}

/* One value head h over one segment's tokens, on its sequence's state: q, k of key head
 * h % n_k (llama.cpp tiles the key heads over the value heads), v of head h, out -> dn_out. */
static void dn_delta_task(void *ctx, int64_t task, int32_t thread) {
    (void)thread;
    const dn_job *job = ctx;
    const ps_session *s = job->s;
    const ps_hparams *hp = &s->model->hp;
    const int64_t si = task / job->per_seg, r0 = job->row0[si], n = job->row0[si + 1] - r0;
    const int64_t dk = hp->ssm_d_state, nk = hp->ssm_n_k, nv = hp->ssm_n_v, dv = nv * dk,
                  ch = 2 * nk * dk + dv, h = task % job->per_seg, hk = h % nk;
    float *S = job->segs[si].seq->ssm_state +
               ((size_t)job->L->rs_slot * (size_t)nv + (size_t)h) * dk * dk;
    const float *c = s->dn_conv + r0 * ch;
    const float *q = c + hk * dk, *k = c + nk * dk + hk * dk, *v = c + 2 * nk * dk + h * dk;
    ps_dn_delta_head(s->isa, S, dk, (int32_t)n, q, k, ch, v, ch, s->dn_out + r0 * dv + h * dk, dv,
                     s->dn_alpha + r0 * nv + h, s->dn_beta + r0 * nv + h, nv,
                     1.0f / sqrtf((float)dk));
}

/* ---- the batch ---- */

/* Row-wise work between the matmuls, one pool task per position (rows are independent, so the
 * result does not depend on the thread that runs a row). */
typedef enum {
    ROW_EMBED_NORM,  /* RoPE angles; x = token_embd[token]; xb = rmsnorm(x) * attn_norm[0] */
    ROW_QKV,         /* biases, qwen3 head norms, RoPE, k/v -> cache */
    ROW_QG_SPLIT,    /* hybrid attention: dn_qkv (q|gate per head) -> q, att_gate; then ROW_QKV */
    ROW_ATT_GATE,    /* hybrid attention: att *= sigmoid(att_gate) */
    ROW_DN_PRE,      /* DeltaNet: l2norm q, k heads; beta = sigmoid; g = softplus(alpha + dt) a */
    ROW_DN_POST,     /* DeltaNet: out head = rmsnorm(head) * ssm_norm * silu(z head) */
    ROW_ATT_OUT,     /* x += ffn_out (+bo); xb = rmsnorm(x) * ffn_norm */
    ROW_SWIGLU,      /* hb = silu(hb) * hb2 */
    ROW_SHEXP_SWIGLU,/* the same over the shared expert's width */
    ROW_SHEXP_ADD,   /* ffn_out += shexp_out * sigmoid(gate_inp_shexp . xb) */
    ROW_FFN_OUT,     /* (gemma: ffn_out = rmsnorm(ffn_out) * ffn_post_norm) x += ffn_out;
                        xb = rmsnorm(x) * next (next layer's attn_norm, or output_norm; NULL:
                        no norm) */
    ROW_LOGIT_BIAS,  /* logits row += output.bias */
    ROW_LOGIT_CAP    /* logits row = tanh(row / c) * c (final soft-capping) */
} row_op;

typedef struct {
    ps_session *s;
    row_op op;
    int32_t layer;
    const int32_t *tokens;
    const float *next_norm;
    float *logits;
} row_job;

/* Long on purpose: one switch over the row steps of a layer (norms, RoPE, SwiGLU, residuals,
 * the logits' bias and soft-cap), each case a few lines on the task's rows; split into one
 * function per step it would only add a call per row in the hot loop. */
static void row_task(void *ctx, int64_t task, int32_t thread) {
    (void)thread;
    const row_job *job = ctx;
    ps_session *s = job->s;
    const ps_hparams *hp = &s->model->hp;
    const ps_weights *w = &s->model->w;
    const ps_layer *L = &w->layers[job->layer];
    const int64_t i = task, d = hp->n_embd, hd = hp->head_dim, dq = (int64_t)hp->n_head * hd,
                  dkv = (int64_t)hp->n_head_kv * hd, ff = hp->n_ff;
    float *x = s->x + i * d, *xb = s->xb + i * d, *fo = s->ffn_out + i * d;
    switch (job->op) {
    case ROW_EMBED_NORM: {
        /* RoPE angles of the row's position: rope_cos/rope_sin row i (n_rot/2), rope.c */
        const int32_t half = hp->n_rot / 2;
        ps_rope_angles(&hp->rope, s->row_pos[i], s->rope_cos + i * half,
                       s->rope_sin + i * half);
        if (s->rope_cos_swa) { /* the sliding layers' own base and scaling (no YaRN: model.c) */
            ps_rope r = hp->rope;
            r.base = hp->rope_base_swa;
            r.freq_scale = hp->rope_freq_scale_swa;
            ps_rope_angles(&r, s->row_pos[i], s->rope_cos_swa + i * half,
                           s->rope_sin_swa + i * half);
        }
        ps_mat_row_to_f32(s->isa, &w->token_embd, job->tokens[i], x);
        /* gemma: x * sqrtf(n_embd), one float multiply per element (ggml_scale) */
        for (int64_t j = 0; hp->embd_scale != 0.0f && j < d; j++) x[j] *= hp->embd_scale;
        if (L->attn_norm) ps_rmsnorm_f32(s->isa, xb, x, L->attn_norm, d, hp->rms_eps);
        break;
    }
    case ROW_QG_SPLIT:
    case ROW_QKV: {
        float *q = s->q + i * dq, *k = s->k + i * dkv, *v = s->v + i * dkv;
        if (job->op == ROW_QG_SPLIT) {
            const float *qg = s->dn_qkv + i * 2 * dq;
            for (int32_t h = 0; h < hp->n_head; h++) {
                memcpy(q + h * hd, qg + 2 * h * hd, (size_t)hd * sizeof(float));
                memcpy(s->att_gate + i * dq + h * hd, qg + (2 * h + 1) * hd,
                       (size_t)hd * sizeof(float));
            }
        }
        for (int64_t j = 0; L->bq && j < dq; j++) q[j] += L->bq[j];
        for (int64_t j = 0; L->bk && j < dkv; j++) k[j] += L->bk[j];
        for (int64_t j = 0; L->bv && j < dkv; j++) v[j] += L->bv[j];
        if (L->q_norm && (L->feat & PS_L_QK_NORM_FULL)) { /* olmo2: over the whole row */
            ps_rmsnorm_f32(s->isa, q, q, L->q_norm, dq, hp->rms_eps);
            ps_rmsnorm_f32(s->isa, k, k, L->k_norm, dkv, hp->rms_eps);
        } else if (L->q_norm) {
            for (int32_t h = 0; h < hp->n_head; h++)
                ps_rmsnorm_f32(s->isa, q + h * hd, q + h * hd, L->q_norm, hd, hp->rms_eps);
            for (int32_t h = 0; h < hp->n_head_kv; h++)
                ps_rmsnorm_f32(s->isa, k + h * hd, k + h * hd, L->k_norm, hd, hp->rms_eps);
        }
        const int32_t half = hp->n_rot / 2;
        const bool own = L->swa > 0 && s->rope_cos_swa;
        const float *cs = (own ? s->rope_cos_swa : s->rope_cos) + i * half,
                    *sn = (own ? s->rope_sin_swa : s->rope_sin) + i * half;
        rope_heads(q, hp->n_head, (int32_t)hd, hp->n_rot, hp->rope_mode, cs, sn);
        rope_heads(k, hp->n_head_kv, (int32_t)hd, hp->n_rot, hp->rope_mode, cs, sn);
        if (hp->info->flags & PS_A_Q_PRESCALE) { /* phi3: q * 1/sqrt(hd), then scale 1 */
            const float qs = 1.0f / sqrtf((float)hd);
            for (int64_t j = 0; j < dq; j++) q[j] *= qs;
        }
        /* k, v -> the row's sequence's cache (attention.h's layout) */
        ps_kv_store(s->isa, s->row_seq[i], L->kv_slot, hp->n_head_kv, (int32_t)hd, s->row_pos[i], k, v);
        break;
    }
    case ROW_ATT_GATE: {
        float *a = s->att + i * dq;
        const float *gt = s->att_gate + i * dq;
        for (int64_t j = 0; j < dq; j++) a[j] *= ps_dn_sigmoid(gt[j]);
        break;
    }
    case ROW_DN_PRE: {
        const int64_t dk = hp->ssm_d_state, nk = hp->ssm_n_k, nv = hp->ssm_n_v,
                      ch = 2 * nk * dk + nv * dk;
        float *c = s->dn_conv + i * ch;
        for (int64_t h = 0; h < 2 * nk; h++) ps_dn_l2norm(c + h * dk, dk, hp->rms_eps);
        float *b = s->dn_beta + i * nv, *a = s->dn_alpha + i * nv;
        for (int64_t h = 0; h < nv; h++) {
            b[h] = ps_dn_sigmoid(b[h]);
            a[h] = ps_dn_softplus(a[h] + L->dt_bias[h]) * L->ssm_a[h];
        }
        break;
    }
    case ROW_DN_POST: {
        const int64_t dk = hp->ssm_d_state, dv = hp->ssm_n_v * dk;
        float *o = s->dn_out + i * dv;
        const float *z = s->dn_z + i * dv;
        for (int64_t h = 0; h < hp->ssm_n_v; h++)
            ps_rmsnorm_f32(s->isa, o + h * dk, o + h * dk, L->ssm_norm, dk, hp->rms_eps);
        for (int64_t j = 0; j < dv; j++) o[j] *= z[j] / (1.0f + expf(-z[j]));
        break;
    }
    case ROW_ATT_OUT:
        for (int64_t j = 0; L->bo && j < d; j++) fo[j] += L->bo[j];
        if (L->attn_post_norm) ps_rmsnorm_f32(s->isa, fo, fo, L->attn_post_norm, d, hp->rms_eps);
        for (int64_t j = 0; j < d; j++) x[j] += fo[j];
        if (L->ffn_norm) ps_rmsnorm_f32(s->isa, xb, x, L->ffn_norm, d, hp->rms_eps);
        break;
    case ROW_SWIGLU: {
        float *g = s->hb + i * ff, *u = s->hb2 + i * ff;
        if (L->feat & PS_L_GEGLU) ps_gelu_mul_f32(g, u, ff);
        else ps_silu_mul_f32(s->isa, g, u, ff);
        break;
    }
    case ROW_SHEXP_SWIGLU: {
        const int64_t fs = hp->n_ff_shexp;
        ps_silu_mul_f32(s->isa, s->hb + i * fs, s->hb2 + i * fs, fs);
        break;
    }
    case ROW_SHEXP_ADD: {
        const float gate = ps_dn_sigmoid(ps_dot_f32(s->isa, xb, L->gate_inp_shexp, d));
        const float *sh = s->shexp_out + i * d;
        for (int64_t j = 0; j < d; j++) fo[j] += sh[j] * gate;
        break;
    }
    case ROW_FFN_OUT:
        if (L->ffn_post_norm) ps_rmsnorm_f32(s->isa, fo, fo, L->ffn_post_norm, d, hp->rms_eps);
        for (int64_t j = 0; j < d; j++) x[j] += fo[j];
        if (job->next_norm) ps_rmsnorm_f32(s->isa, xb, x, job->next_norm, d, hp->rms_eps);
        break;
    case ROW_LOGIT_BIAS: {
        float *lg = job->logits + i * hp->n_vocab;
        for (int64_t j = 0; j < hp->n_vocab; j++) lg[j] += w->output_b[j];
        break;
    }
    case ROW_LOGIT_CAP:
        ps_softcap_f32(job->logits + i * hp->n_vocab, hp->n_vocab, hp->final_softcap);
        break;
    }
}

/* Every row step of the pass: the rows in contiguous runs per thread. The K cache keeps 16
 * positions in each 64-byte line (attention.c), so rows handed out one at a time had two
 * threads writing the same lines (docs/kernels.md, "Threads"). */
static void run_rows(ps_session *s, int32_t n, row_job job) {
    ps_pool_for_runs(s->pool, n, row_task, &job);
}

static void rows(ps_session *s, int32_t n, row_op op, int32_t layer, const int32_t *tokens,
                 const float *next_norm) {
    run_rows(s, n, (row_job){s, op, layer, tokens, next_norm, NULL});
}

/* The attention piece (PS_L_ATTN): q, k, v; biases, head norms, RoPE and the cache (rows);
 * attention over each row's sequence's cache (attention.c); PS_L_ATTN_GATED: att *= sigmoid(gate), the gate being the second
 * half of each head's wq output; ffn_out = att @ Wo^T; then (rows) x += ffn_out (+bo) and
 * xb = rmsnorm(x) * ffn_norm for the FFN that follows. */
static void attention(ps_session *s, const ps_matmul_env *env, int32_t l, int32_t n,
                      const ps_seg *segs, int32_t n_segs) {
    const ps_hparams *hp = &s->model->hp;
    const ps_layer *L = &s->model->w.layers[l];
    const int64_t d = hp->n_embd, hd = hp->head_dim, dq = (int64_t)hp->n_head * hd,
                  dkv = (int64_t)hp->n_head_kv * hd;
    const bool gated = (L->feat & PS_L_ATTN_GATED) != 0;
    const float *in = L->feat & PS_L_NO_IN_NORM ? s->x : s->xb; /* olmo2: x itself */
    ps_matmul(env, &L->wq, in, d, n, gated ? s->dn_qkv : s->q, gated ? 2 * dq : dq);
    ps_matmul(env, &L->wk, in, d, n, s->k, dkv);
    ps_matmul(env, &L->wv, in, d, n, s->v, dkv);
    rows(s, n, gated ? ROW_QG_SPLIT : ROW_QKV, l, NULL, NULL);
    ps_attention(s, L, segs, n_segs);
    if (gated) rows(s, n, ROW_ATT_GATE, l, NULL, NULL);
    ps_matmul(env, &L->wo, s->att, dq, n, s->ffn_out, d);
    rows(s, n, ROW_ATT_OUT, l, NULL, NULL);
}

/* The Gated DeltaNet piece (PS_L_DELTANET), in place of attention: qkv, z, beta, alpha
 * projections; causal conv + silu over the qkv channels (channel tasks); l2-normalised q, k,
 * sigmoid(beta), decay g (rows); the delta rule, one task per (segment, value head), token by
 * token on the segment's sequence's state; gated RMSNorm (rows); ffn_out = out @ ssm_out^T;
 * then x += ffn_out and the FFN norm (rows). */
static void deltanet(ps_session *s, const ps_matmul_env *env, int32_t l, int32_t n,
                     const ps_seg *segs, int32_t n_segs) {
    const ps_hparams *hp = &s->model->hp;
    const ps_layer *L = &s->model->w.layers[l];
    const int64_t d = hp->n_embd, dk = hp->ssm_d_state, nv = hp->ssm_n_v, dv = nv * dk,
                  ch = 2 * (int64_t)hp->ssm_n_k * dk + dv;
    ps_matmul(env, &L->wqkv, s->xb, d, n, s->dn_qkv, ch);
    ps_matmul(env, &L->wz, s->xb, d, n, s->dn_z, dv);
    ps_matmul(env, &L->w_beta, s->xb, d, n, s->dn_beta, nv);
    ps_matmul(env, &L->w_alpha, s->xb, d, n, s->dn_alpha, nv);
    const uint64_t t_dn = ps_prof_start();
    dn_job dj;
    dj.s = s;
    dj.L = L;
    dj.segs = segs;
    dj.row0[0] = 0;
    for (int32_t i = 0; i < n_segs; i++) dj.row0[i + 1] = dj.row0[i] + segs[i].n;
    dj.per_seg = (ch + DN_CONV_CHANNELS - 1) / DN_CONV_CHANNELS;
    ps_pool_for(s->pool, n_segs * dj.per_seg, dn_conv_task, &dj);
    rows(s, n, ROW_DN_PRE, l, NULL, NULL);
    dj.per_seg = nv;
    ps_pool_for(s->pool, n_segs * nv, dn_delta_task, &dj);
    rows(s, n, ROW_DN_POST, l, NULL, NULL);
    ps_prof_add(PS_PROF_DELTANET, t_dn);
    ps_matmul(env, &L->ssm_out, s->dn_out, dv, n, s->ffn_out, d);
    rows(s, n, ROW_ATT_OUT, l, NULL, NULL);
}

/* The dense FFN piece (PS_L_FFN_DENSE): ffn_out = (silu(xb @ Wgate^T) * (xb @ Wup^T)) @ Wdown^T */
static void ffn_dense(ps_session *s, const ps_matmul_env *env, int32_t l, int32_t n) {
    const ps_hparams *hp = &s->model->hp;
    const ps_layer *L = &s->model->w.layers[l];
    const int64_t d = hp->n_embd, ff = hp->n_ff;
    const float *in = L->feat & PS_L_NO_IN_NORM ? s->x : s->xb; /* olmo2: x itself */
    ps_matmul(env, &L->w_gate, in, d, n, s->hb, ff);
    ps_matmul(env, &L->w_up, in, d, n, s->hb2, ff);
    rows(s, n, ROW_SWIGLU, l, NULL, NULL);
    ps_matmul(env, &L->w_down, s->hb, ff, n, s->ffn_out, d);
}

/* The shared expert piece (PS_L_FFN_SHEXP, after the experts wrote ffn_out): a SwiGLU FFN of
 * width n_ff_shexp on xb into shexp_out, then (rows) ffn_out += shexp_out * sigmoid(g), g =
 * gate_inp_shexp . xb (ps_dot_f32) — llama.cpp's qwen35moe: moe_out + ffn_shexp * sigmoid. */
static void shared_expert(ps_session *s, const ps_matmul_env *env, int32_t l, int32_t n) {
    const ps_hparams *hp = &s->model->hp;
    const ps_layer *L = &s->model->w.layers[l];
    const int64_t d = hp->n_embd, fs = hp->n_ff_shexp;
    ps_matmul(env, &L->gate_shexp, s->xb, d, n, s->hb, fs);
    ps_matmul(env, &L->up_shexp, s->xb, d, n, s->hb2, fs);
    rows(s, n, ROW_SHEXP_SWIGLU, l, NULL, NULL);
    ps_matmul(env, &L->down_shexp, s->hb, fs, n, s->shexp_out, d);
    rows(s, n, ROW_SHEXP_ADD, l, NULL, NULL);
}

void ps_forward_run(ps_session *s, const ps_seg *segs, int32_t n_segs, float *logits) {
    const ps_model *m = s->model;
    const ps_hparams *hp = &m->hp;
    const ps_weights *w = &m->w;
    const ps_matmul_env env = {s->pool, s->isa, s->mm_scratch, s->mm_stride, s->f32_act, s->amx};
    const uint64_t t_fwd = ps_prof_start();

    /* the rows: each one's token, position and sequence */
    int32_t tokens[PS_CHUNK];
    int32_t n = 0;
    for (int32_t si = 0; si < n_segs; si++) {
        ps_seq *q = segs[si].seq;
        for (int32_t j = 0; j < segs[si].n; j++, n++) {
            tokens[n] = segs[si].tokens[j];
            s->row_pos[n] = q->n_past + j;
            s->row_seq[n] = q;
        }
        /* a sequence starts from zero recurrent state (hybrid models) */
        if (q->n_past == 0 && hp->n_layer_rs > 0) {
            const size_t dk = (size_t)hp->ssm_d_state, nv = (size_t)hp->ssm_n_v,
                         ch = 2 * (size_t)hp->ssm_n_k * dk + nv * dk, nrs = (size_t)hp->n_layer_rs;
            memset(q->conv_state, 0, nrs * (size_t)(hp->ssm_d_conv - 1) * ch * sizeof(float));
            memset(q->ssm_state, 0, nrs * nv * dk * dk * sizeof(float));
        }
    }
    /* x (n, d) = embedding rows; xb = first attention norm; RoPE angles of the positions */
    rows(s, n, ROW_EMBED_NORM, 0, tokens, NULL);
    for (int32_t l = 0; l < hp->n_layer; l++) {
        const ps_layer *L = &w->layers[l];
        /* the layer's pieces, as its features (arch.h) say */
        if (L->feat & PS_L_ATTN) attention(s, &env, l, n, segs, n_segs);
        if (L->feat & PS_L_DELTANET) deltanet(s, &env, l, n, segs, n_segs);
        if (L->feat & PS_L_FFN_DENSE) ffn_dense(s, &env, l, n);
        if (L->feat & PS_L_FFN_MOE) ps_moe_ffn(s, &env, l, n, s->ffn_out);
        if (L->feat & PS_L_FFN_SHEXP) shared_expert(s, &env, l, n);
        const float *next = l + 1 < hp->n_layer ? w->layers[l + 1].attn_norm
                            : logits            ? w->output_norm
                                                : NULL;
        rows(s, n, ROW_FFN_OUT, l, NULL, next);
    }
    if (logits) ps_matmul(&env, &w->output, s->xb, hp->n_embd, n, logits, hp->n_vocab);
    if (logits && w->output_b) run_rows(s, n, (row_job){s, ROW_LOGIT_BIAS, 0, NULL, NULL, logits});
    if (logits && hp->final_softcap > 0.0f) /* before any score sees them */
        run_rows(s, n, (row_job){s, ROW_LOGIT_CAP, 0, NULL, NULL, logits});
    ps_prof_add(PS_PROF_FORWARD, t_fwd);
}
