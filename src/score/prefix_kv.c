/*
 * prefix_kv.c — copies between a prefix-cache block and a session: the K/V of a block's
 * positions in every KV layer, and the recurrent state at a block's end.
 *
 * The session keeps K per KV layer and kv head in tiles of 16 positions x hd (ps_attn_scores'
 * layout) and V as rows of hd; a block keeps the same layout for its own B positions (B a
 * multiple of 16), so for a global layer (kv_len = n_ctx, position j in slot j) a block's K of
 * one head is one run of B * hd floats and its V another: two memcpy per layer and head. A
 * sliding layer's ring (kv_len < n_ctx, position j in slot j % kv_len) is copied position by
 * position, and only the positions the ring still holds (capture) or needs (restore: the last
 * kv_len before the resume point). The recurrent state (conv + delta rule, every recurrent
 * layer) is copied whole. This is a copy into the session, not a shared reference: sharing
 * blocks inside the attention kernel would need a paged KV layout there; the copy costs
 * 2 * B * hd elements per layer and head, which is memory bandwidth, a small share of what
 * recomputing the block costs.
 * Elements are copied as they are stored, in the sequence's kv_type (4 or 2 bytes: a block of
 * a half-precision cache holds half the bytes; the session configuration in the key keeps
 * types apart), so a restored position has the bits it had when it was computed.
 */
#include "base/impl.h"
#include "run/attention.h"
#include "score/prefix_cache.h"
#include "run/session.h"

uint64_t ps_pcache_session_cfg(const ps_session *s) {
    return (uint64_t)s->isa | (uint64_t)s->f32_act << 8 | (uint64_t)s->amx << 9 |
           (uint64_t)s->kv_type << 10;
}

/* One position j of a ring (len slots) <-> position i of a block, elements of e bytes. */
static void ring_pos(uint8_t *kt_ring, uint8_t *v_ring, int64_t len, int32_t hd, size_t e,
                     int64_t j, uint8_t *kt_blk, uint8_t *v_blk, int32_t i, bool to_block) {
    const int64_t slot = j % len;
    uint8_t *kr = kt_ring + (size_t)((slot / 16) * hd * 16 + slot % 16) * e;
    uint8_t *kb = kt_blk + (size_t)((int64_t)(i / 16) * hd * 16 + i % 16) * e;
    uint8_t *vr = v_ring + (size_t)(slot * hd) * e, *vb = v_blk + (size_t)i * (size_t)hd * e;
    uint8_t *kd = to_block ? kb : kr, *ks = to_block ? kr : kb;
    for (int32_t d = 0; d < hd; d++) memcpy(kd + (size_t)d * 16 * e, ks + (size_t)d * 16 * e, e);
    memcpy(to_block ? vb : vr, to_block ? vr : vb, (size_t)hd * e);
}

/* The block's K and V of KV slot l, head g (elements of e bytes). */
static uint8_t *blk_k(const ps_prefix_cache *c, ps_pc_block *b, int32_t l, int32_t g, size_t e) {
    const ps_hparams *hp = &ps_pcache_model(c)->hp;
    const size_t per = (size_t)ps_pcache_block_len(c) * (size_t)hp->head_dim;
    return b->kv + ((size_t)l * (size_t)hp->n_head_kv + (size_t)g) * 2 * per * e;
}

/* Copies positions [j0, j1) (all within block b, which starts at position p0) between the
 * session's slot l and the block. */
static void copy_range(const ps_prefix_cache *c, ps_pc_block *b, const ps_seq *s, int32_t l,
                       int32_t p0, int64_t j0, int64_t j1, bool to_block) {
    const ps_hparams *hp = &s->model->hp;
    const int32_t hd = hp->head_dim, B = ps_pcache_block_len(c);
    const int64_t len = s->kv_len[l];
    const size_t e = (size_t)s->kv_elt;
    for (int32_t g = 0; g < hp->n_head_kv; g++) {
        uint8_t *kb = blk_k(c, b, l, g, e), *vb = kb + (size_t)B * (size_t)hd * e;
        uint8_t *ks = ps_kv_k(s, l, g, hd), *vs = ps_kv_v(s, l, g, hd);
        if (len >= s->n_ctx && j0 == p0 && j1 == p0 + B) { /* whole tiles, in place */
            uint8_t *kt = ks + (size_t)p0 * (size_t)hd * e, *vt = vs + (size_t)p0 * (size_t)hd * e;
            const size_t n = (size_t)B * (size_t)hd * e;
            memcpy(to_block ? kb : kt, to_block ? kt : kb, n);
            memcpy(to_block ? vb : vt, to_block ? vt : vb, n);
            continue;
        }
        for (int64_t j = j0; j < j1; j++)
            ring_pos(ks, vs, len, hd, e, j, kb, vb, (int32_t)(j - p0), to_block);
    }
}

bool ps_pcache_capture_kv(const ps_prefix_cache *c, ps_pc_block *b, const ps_seq *s,
                          int32_t p0) {
    const ps_hparams *hp = &s->model->hp;
    const int32_t B = ps_pcache_block_len(c);
    assert(p0 + B <= s->n_past);
    for (int32_t l = 0; l < hp->n_layer_kv; l++) /* the ring holds n_past - len .. n_past - 1 */
        if ((int64_t)s->n_past - s->kv_len[l] > p0) return false;
    for (int32_t l = 0; l < hp->n_layer_kv; l++)
        copy_range(c, b, s, l, p0, p0, (int64_t)p0 + B, true);
    return true;
}

void ps_pcache_capture_state(const ps_prefix_cache *c, ps_pc_block *b, const ps_seq *s) {
    const ps_hparams *hp = &s->model->hp;
    if (hp->n_layer_rs <= 0 || !b->state) return;
    const size_t dk = (size_t)hp->ssm_d_state, nv = (size_t)hp->ssm_n_v,
                 ch = 2 * (size_t)hp->ssm_n_k * dk + nv * dk;
    const size_t conv = (size_t)hp->n_layer_rs * (size_t)(hp->ssm_d_conv - 1) * ch;
    memcpy(b->state, s->conv_state, conv * sizeof(float));
    memcpy(b->state + conv, s->ssm_state, (ps_pcache_state_floats(c) - conv) * sizeof(float));
}

void ps_pcache_restore(const ps_prefix_cache *c, ps_pc_block *const *blocks, int32_t m,
                       ps_seq *s) {
    const ps_hparams *hp = &s->model->hp;
    const int32_t B = ps_pcache_block_len(c);
    const int64_t resume = (int64_t)m * B - 1; /* positions 0 .. resume - 1 are restored */
    assert(m >= 1 && resume + 1 <= s->n_ctx);
    for (int32_t l = 0; l < hp->n_layer_kv; l++) {
        const int64_t first = PS_MAX((int64_t)0, resume - s->kv_len[l]);
        for (int32_t i = (int32_t)(first / B); i < m; i++) {
            const int64_t p0 = (int64_t)i * B;
            /* a global layer takes whole blocks (position `resume` is recomputed over) */
            const bool global = s->kv_len[l] >= s->n_ctx;
            const int64_t j0 = PS_MAX(p0, first), j1 = global ? p0 + B : PS_MIN(p0 + B, resume);
            if (j0 < j1) copy_range(c, blocks[i], s, l, (int32_t)p0, j0, j1, false);
        }
    }
    if (hp->n_layer_rs > 0 && blocks[m - 1]->state) {
        const ps_pc_block *b = blocks[m - 1];
        const size_t dk = (size_t)hp->ssm_d_state, nv = (size_t)hp->ssm_n_v,
                     ch = 2 * (size_t)hp->ssm_n_k * dk + nv * dk;
        const size_t conv = (size_t)hp->n_layer_rs * (size_t)(hp->ssm_d_conv - 1) * ch;
        memcpy(s->conv_state, b->state, conv * sizeof(float));
        memcpy(s->ssm_state, b->state + conv, (ps_pcache_state_floats(c) - conv) * sizeof(float));
    }
    s->n_past = (int32_t)resume;
}
