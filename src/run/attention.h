/*
 * attention.h — the KV cache's layout and attention over it: scores, softmax, P·V.
 *
 * The one place that defines how a sequence's KV cache is laid out (ps_seq's k_cache, v_cache,
 * per KV-cached layer at the slot offsets k_off / v_off), in elements of the sequence's kv_type
 * (float32; IEEE half or bfloat16, 2 bytes):
 *   K of kv head g: [PS_KCACHE_POS(len) / 16][head_dim][16] — blocks of 16 keys, key j,
 *     dimension d at kt[(j / 16) * hd * 16 + d * 16 + j % 16], so the 16 keys of one dimension
 *     are one 64-byte line of floats (32 bytes of halves; ps_attn_scores walks a block front to
 *     back)
 *   V of kv head g: [len][head_dim]
 * with len = the slot's kv_len (n_ctx, or a sliding layer's ring: position j in slot j % len).
 * A half / bfloat16 element is the key or value rounded to nearest even when it is stored
 * (ps_kv_round) and is widened exactly to float32 when it is read; the score and P·V kernels
 * then run the same float operations as on a float32 cache holding the widened values, so a
 * cache type changes what is stored, never how it is summed. The exception is bf16-dot
 * (PS_KV_BF16_DOT): it stores bfloat16 in the same layout, and its two products are attention_dot.c's
 * bf16 pair sums (queries and probabilities rounded to bf16 too).
 * The kernels below are single-threaded (a pool task's); ps_attention runs a layer's attention
 * for every row of a forward call on the pool, one task per (segment, head, block of
 * PS_ATT_QBLOCK queries).
 */
#ifndef PS_ATTENTION_H
#define PS_ATTENTION_H

#include "run/state.h"

/* Positions a K cache of n positions holds per head: n rounded up to whole blocks of 16 keys. */
#define PS_KCACHE_POS(n) (((size_t)(n) + 15) & ~(size_t)15)

/* Query positions per attention task; sizes the attention scratch. */
#define PS_ATT_QBLOCK 32

/* Keys per run of the P·V kernels (even: bf16-dot's key pairs never split): each run goes over
 * every group of queries while its V rows are in cache. */
#define PS_ATT_PV_KEYS 256

/* The lane mask of the first `left` of 16 lanes (0 for left <= 0, all 16 for left >= 16). */
static inline uint16_t ps_lanes16(int64_t left) {
    return left >= 16 ? (uint16_t)0xffff : left <= 0 ? 0 : (uint16_t)((1u << left) - 1u);
}

/* Bytes of one K/V element of type t. */
static inline size_t ps_kv_elt(ps_kv_type t) { return t == PS_KV_F32 ? 4 : 2; }
/* The element type a cache of type t stores: bf16-dot stores bfloat16, f16-dot half (their
 * difference is how attention multiplies, not what the cache holds). */
static inline ps_kv_type ps_kv_elem_type(ps_kv_type t) {
    return t == PS_KV_BF16_DOT ? PS_KV_BF16 : t == PS_KV_F16_DOT ? PS_KV_F16 : t;
}

/* Elements of one slot's K / V cache for len positions of n_head_kv heads of hd. */
static inline uint64_t ps_kv_k_floats(int64_t n_head_kv, int64_t hd, int64_t len) {
    return (uint64_t)n_head_kv * (uint64_t)hd * PS_KCACHE_POS(len);
}
static inline uint64_t ps_kv_v_floats(int64_t n_head_kv, int64_t hd, int64_t len) {
    return (uint64_t)n_head_kv * (uint64_t)hd * (uint64_t)len;
}
/* Kv head g's K blocks / V rows in slot `slot` of q (head_dim hd), elements of q->kv_type. */
static inline void *ps_kv_k(const ps_seq *q, int32_t slot, int32_t g, int32_t hd) {
    return (uint8_t *)q->k_cache +
           ((size_t)q->k_off[slot] + (size_t)g * PS_KCACHE_POS(q->kv_len[slot]) * (size_t)hd) *
               (size_t)q->kv_elt;
}
static inline void *ps_kv_v(const ps_seq *q, int32_t slot, int32_t g, int32_t hd) {
    return (uint8_t *)q->v_cache +
           ((size_t)q->v_off[slot] + (size_t)g * (size_t)q->kv_len[slot] * (size_t)hd) *
               (size_t)q->kv_elt;
}
/* The address of element i of an array of type t: ps_kv_at to read, ps_kv_at_mut to write. */
static inline const void *ps_kv_at(const void *base, ps_kv_type t, int64_t i) {
    return (const uint8_t *)base + (size_t)i * ps_kv_elt(t);
}
static inline void *ps_kv_at_mut(void *base, ps_kv_type t, int64_t i) {
    return (uint8_t *)base + (size_t)i * ps_kv_elt(t);
}

/* x[0 .. n) -> y in type t (a copy for PS_KV_F32; else each rounded to nearest even, NaN to a
 * quiet NaN of the same sign, as ps_f32_to_f16 / ps_f32_to_bf16). SIMD and scalar forms give
 * the same bits (test_kvtype). */
void ps_kv_round(ps_isa isa, ps_kv_type t, const float *x, void *y, int64_t n);
/* y[0 .. n) = x[0 .. n) of type t widened to float32 (exact). */
void ps_kv_widen(ps_isa isa, ps_kv_type t, const void *x, float *y, int64_t n);

/* Stores position pos's k, v (n_head_kv heads of hd each) into slot `slot` of q (a ring slot
 * pos % kv_len for a sliding layer), rounded to q->kv_type. */
void ps_kv_store(ps_isa isa, ps_seq *q, int32_t slot, int32_t n_head_kv, int32_t hd, int64_t pos,
                 const float *k, const float *v);

/* Floats of one thread's attention scratch for sequences of up to n_ctx positions: 16, then
 * PS_ATT_QBLOCK rows of n_ctx + 16 scores (a sliding layer's scores of a ring segment may start
 * up to 15 before a row), then bf16-dot's operands: PS_ATT_QBLOCK rows of n_ctx + 18 bf16
 * probabilities and PS_ATT_QBLOCK rows of head_dim + 2 bf16 query elements (touched only by a
 * bf16-dot cache). */
size_t ps_attention_scratch_floats(int32_t n_ctx, int32_t head_dim);

/* Attention scores against K in the layout above (kt: one head's blocks, elements of type kt_t
 * widened to float32 k_j[d]). s (nq, n_keys) rows lds apart,
 *     s[r][j] = sum over d = 0 .. hd-1, in order, of q[r * ldq + d] * k_j[d]
 * (SIMD: one fused multiply-add per step; scalar: multiply, then add), so each score depends
 * only on its query and key, and a half / bfloat16 K gives the bits of a float32 K holding its
 * widened values. Reads keys j < n_keys only; writes s[r][0 .. n_keys). */
void ps_attn_scores(ps_isa isa, const float *q, int64_t ldq, int32_t nq, const void *kt,
                    ps_kv_type kt_t, int32_t n_keys, int32_t hd, float *s, int64_t lds);
/* Writes key j (hd floats, rounded to type kt_t) into that layout. */
void ps_attn_k_store(ps_isa isa, void *kt, ps_kv_type kt_t, int32_t hd, int32_t j,
                     const float *k);

/* Attention's second product: out (nq, hd) rows ldo apart, out[q] = sum over j < n_keys[q], in
 * order, of p[q * ldp + j] * v[j] (v rows of hd elements of type v_t, widened to float32).
 * Bitwise the same as zeroing out[q] and calling ps_axpy_f32 once per key on the widened rows;
 * V rows are shared by the queries of one call. */
void ps_attn_pv(ps_isa isa, const float *p, int64_t ldp, const int32_t *n_keys, int32_t nq,
                const void *v, ps_kv_type v_t, int64_t hd, float *out, int64_t ldo);
/* The same, adding to out instead of starting from zero: bitwise the same as one more
 * ps_axpy_f32 per key after the ones that made out, so a product split into two key runs
 * (a sliding layer's ring wrapping) equals the product over both runs at once. */
void ps_attn_pv_acc(ps_isa isa, const float *p, int64_t ldp, const int32_t *n_keys, int32_t nq,
                    const void *v, ps_kv_type v_t, int64_t hd, float *out, int64_t ldo);

/* ---- bf16-dot (PS_KV_BF16_DOT): the two products on bf16 pairs (attention_dot.c) ----
 * One step of a bf16-dot sum, the definition (one lane of vdpbf16ps): acc + a1 * b1, then
 * + a0 * b0, each rounded to nearest even; a bf16 subnormal operand reads as zero, a float32
 * subnormal (acc or a sum) as zero of its sign. */
float ps_dot_bf16_step(float acc, uint16_t a0, uint16_t a1, uint16_t b0, uint16_t b1);
/* s (nq, n_keys) rows lds apart: s[r][j] = from +0, for each pair of dimensions (d, d + 1),
 * d = 0, 2, 4, ..: step(acc, q[d], q[d+1], k_j[d], k_j[d+1]), with qb rows ldq elements apart
 * (bf16; an odd hd needs qb[r][hd] = 0, and k_j[hd] is taken as 0, not read) and K (bf16) in
 * the K layout above. Reads keys j < n_keys only (within their 16-key blocks); writes
 * s[r][0 .. n_keys). AVX-512 BF16 (isa PS_ISA_AVX512 on a CPU that has it): vdpbf16ps; else
 * the scalar form; the same bits. */
void ps_attn_scores_dot(ps_isa isa, const uint16_t *qb, int64_t ldq, int32_t nq,
                        const uint16_t *kt, int32_t n_keys, int32_t hd, float *s, int64_t lds);
/* out (nq, hd) rows ldo apart: out[q][d] = from +0 (acc_in: from out[q][d]), for each pair of
 * keys (j, j + 1), j = 0, 2, 4, .. < n_keys: step(acc, p[q][j], p[q][j+1], v_j[d], v_j+1[d]),
 * then acc + 0 (a zero sum is +0),
 * with pb rows ldp elements apart (bf16; an odd n_keys needs pb[q][n_keys] = 0, and v_n_keys
 * is taken as 0, not read) and V (bf16) rows of hd. A query that sees fewer keys has zeros
 * there: a zero pair leaves a sum unchanged, so it gets the bits it would get alone. */
void ps_attn_pv_dot(ps_isa isa, const uint16_t *pb, int64_t ldp, int32_t n_keys, int32_t nq,
                    const uint16_t *v, int64_t hd, float *out, int64_t ldo, bool acc_in);

/* Layer L's attention for the rows of a forward call: s->att (rows, n_head*hd) = per head h
 * softmax(s->q[h] K^T * scale) V over the row's own sequence's cache (kv head h / (n_head /
 * n_head_kv); causal: the row at position p sees keys 0..p, a sliding layer's the last swa;
 * gpt-oss: the head's sink logit in each softmax; gemma2: soft-capped logits). The rows' K/V
 * must be stored first (ps_kv_store); segs are the call's segments, sequences' n_past not yet
 * advanced. */
void ps_attention(ps_session *s, const ps_layer *L, const ps_seg *segs, int32_t n_segs);

#endif /* PS_ATTENTION_H */
