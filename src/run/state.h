/*
 * state.h — the run state's types: what one sequence keeps between calls (ps_seq), one segment
 * of a forward call (ps_seg) and the workspace a forward pass runs in (struct ps_session).
 *
 * A sequence (ps_seq) is the state that belongs to one token stream: how many positions it has
 * cached (n_past), its KV cache (per KV-cached layer, in the layout attention.h defines; a
 * sliding layer keeps a ring) and, for the hybrid models, each recurrent layer's conv and
 * delta-rule state. It is sized by its own n_ctx, so a 30-token prompt's sequence holds 32
 * positions of KV, not the session's n_ctx.
 *
 * The workspace (struct ps_session) is everything a forward call only borrows: the pool, the
 * ISA, the scratch rows for up to n_batch positions (activations, q/k/v, FFN hidden rows,
 * attention and matmul scratch, the experts' buffers), the per-row position and sequence of
 * the current call, and an output buffer of logits kept between calls (ps_session_logits). A
 * session also owns one sequence of n_ctx positions (seq), which the public single-sequence
 * API (ps_session_forward / reset / truncate, ps_score_tokens) runs on.
 *
 * Types only: the forward pass and its pieces (forward.h, attention.h, moe.h) compute on them
 * and sit below session.h, which creates and checks them (session.c) and calls the forward
 * pass; so data flows one way, session -> forward -> attention / moe -> these types.
 */
#ifndef PS_STATE_H
#define PS_STATE_H

#include "model/model.h"

/* One sequence's state. Buffers (the K/V cache in elements of kv_type: float32, or IEEE half /
 * bfloat16 as uint16; the rest float32):
 *   k_cache: per KV slot s at element k_off[s]: kv_len[s] positions in attention.h's K layout
 *   v_cache: per KV slot s at element v_off[s]: [n_head_kv][kv_len[s]][head_dim]
 *   kv_len[s] = n_ctx for a global layer, min(n_ctx, swa + n_batch - 1) for a sliding one (a
 *            ring: position j lives in slot j % kv_len[s]; a chunk of n_batch queries needs
 *            its own keys plus the swa - 1 before its first)
 *   conv_state (n_layer_rs, d_conv - 1, ch), ssm_state (n_layer_rs, n_v, dk, dk): the hybrid
 *            models' recurrent layers (NULL otherwise), zeroed when a forward starts the
 *            sequence at position 0, so a reset sequence starts from zero state */
typedef struct ps_seq {
    const ps_model *model;
    int32_t n_ctx;                   /* positions it can hold */
    int32_t n_past;                  /* positions cached */
    ps_kv_type kv_type;              /* the K/V elements' type */
    int32_t kv_elt;                  /* bytes per K/V element: 4 (f32) or 2 (f16, bf16, bf16-dot) */
    void *k_cache, *v_cache;
    int64_t *kv_len, *k_off, *v_off; /* per KV slot (n_layer_kv): positions held, element offsets */
    int64_t kv_elems;                /* elements of k_cache + v_cache (bytes: kv_elems * kv_elt) */
    float *conv_state, *ssm_state;
} ps_seq;

/* One segment of a forward call: n (>= 1) tokens appended to seq at positions seq->n_past.. */
typedef struct {
    ps_seq *seq;
    const int32_t *tokens;
    int32_t n;
} ps_seg;

/* The workspace. Buffers (float32), rows of the current call (n_batch at most):
 *   x, xb, ffn_out: (n_batch, n_embd)   q, att: (n_batch, n_head*head_dim)
 *   k, v: (n_batch, n_head_kv*head_dim)   hb, hb2: (n_batch, n_ff)
 *   mm_scratch: n_threads * mm_stride
 *   att_scratch: n_threads * att_stride (attention.c: ps_attention_scratch_floats(n_ctx, head_dim))
 *   rope_cos, rope_sin: (n_batch, n_rot/2) for the rows' positions
 *   row_pos, row_seq: (n_batch) each row's position and sequence */
/* The forward buffers carved from one workspace allocation (session.c ws_fields). */
#define PS_WS_BUFFERS 11

struct ps_session {
    const ps_model *model;
    int32_t n_ctx, n_batch, n_threads; /* n_ctx: the longest sequence it runs (own seq's) */
    ps_pool *pool;
    ps_isa isa;
    bool f32_act;             /* PS_ACT_F32 */
    bool amx;                 /* BF16 / Q8_0 matmuls through AMX tiles (isa is AVX512) */
    ps_kv_type kv_type;       /* every sequence's K/V element type */
    ps_seq *seq;              /* the session's own sequence (n_ctx positions) */
    int32_t *row_pos;
    ps_seq **row_seq;
    float *x, *xb, *q, *k, *v, *att, *ffn_out, *hb, *hb2;
    float *rope_cos, *rope_sin;
    float *rope_cos_swa, *rope_sin_swa; /* sliding layers' angles when their base / scaling
                                         * differ from the global ones, else NULL */
    float *mm_scratch;
    size_t mm_stride;
    float *att_scratch;
    size_t att_stride;
    /* x .. hb2, mm_scratch and att_scratch are carved from ws (ws_floats floats; ws_len: each
     * buffer's floats, 64-byte rounded); ws_borrowed: ws is another session's
     * (ps_session_share_workspace), not freed with this one */
    float *ws;
    size_t ws_floats;
    uint64_t ws_len[PS_WS_BUFFERS];
    bool ws_borrowed;
    /* hybrid models: scratch qkv (n_batch, max(ch, 2 n_head head_dim): also a full-attention
     * layer's q + gate output), conv (n_batch, ch), z, dn (n_batch, n_v dk),
     * beta, alpha (n_batch, n_v), gate (n_batch, n_head*head_dim) (NULL otherwise) */
    float *dn_qkv, *dn_conv, *dn_z, *dn_out, *dn_beta, *dn_alpha, *att_gate;
    /* experts (moe.c; NULL when no layer has them): router logits / probabilities
     * (n_batch, n_expert); chosen experts, their weights and grouped positions
     * (n_batch, n_expert_used); group starts and fill counters (n_expert + 1); gathered rows and
     * expert outputs (n_batch * n_expert_used, n_embd); gate / up (.., n_ff_exp) */
    float *moe_logits, *moe_w, *moe_x, *moe_g, *moe_u;
    float *shexp_out;            /* the shared expert's output (n_batch, n_embd) | NULL */
    int32_t *moe_sel, *moe_pos, *moe_start, *moe_fill;
    /* the output buffer (ps_session_logits), kept between calls */
    float *logits;
    size_t logits_floats;
    /* sequences kept for ps_score_batch between calls (n_pool of them) */
    ps_seq **seq_pool;
    int32_t n_seq_pool;
};

#endif /* PS_STATE_H */
