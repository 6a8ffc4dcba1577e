/*
 * prefix_cache.h — the exact prefix cache's index (prefix_cache.c) and the copies between a
 * block and a session (prefix_kv.c), as score.c uses them. Internal.
 *
 * A block is B consecutive positions bB .. bB + B - 1 of some prompt, keyed by the ids of the
 * whole prefix 0 .. bB + B - 1: by its parent (the block before it, NULL for b = 0), its own B
 * ids and the session configuration that computed it (cfg: ISA, activations, AMX, K/V type).
 * It holds
 *   kv:    per KV slot l, per kv head h: K [B / 16][hd][16] (the session's 16-key tiles), then
 *          V [B][hd]: the K/V of its B positions, in the session's K/V element type
 *   state: for models with recurrent layers, the conv and delta-rule state after bB + B - 1
 *          positions (the point a restore resumes from: the block's last position is always
 *          recomputed), else NULL
 *   the answers of its positions: logprob (B), entropy and rank (B; a score that uses the
 *          cache always computes them) and top-K ids / logprobs (B x k); position 0's are
 *          NaN / -1 / 0 as in a result
 * kv, state and ids never change once a block is in the index; the answers may be replaced by
 * a larger K, so they are read under the cache's lock (ps_pcache_read_entries).
 */
#ifndef PS_PREFIX_CACHE_H
#define PS_PREFIX_CACHE_H

#include "base/impl.h"

typedef struct ps_pc_block ps_pc_block;
struct ps_pc_block {
    uint64_t hash;            /* chain hash: fnv1a(parent's hash or cfg seed, ids) */
    uint64_t cfg;
    ps_pc_block *parent;      /* kept alive by n_children > 0 (only leaves are evicted) */
    ps_pc_block *hnext;       /* hash bucket chain */
    ps_pc_block *prev, *next; /* the LRU list, while refs == 0 and linked */
    int32_t refs;             /* running scores using it */
    int32_t n_children;       /* linked blocks whose parent it is */
    bool linked;              /* in the index */
    int32_t *ids;             /* B */
    uint8_t *kv;              /* kv_elems elements of the K/V type (kv_elt bytes each) */
    float *state;             /* state_floats | NULL */
    int32_t k;                /* top-K stored */
    float *lp;                /* B */
    float *ent;               /* B: entropy of each position's distribution */
    int32_t *rank;            /* B: rank of each position's token */
    float *var;               /* B: varentropy of each position's distribution (with lp, ent
                                 and rank: one allocation) */
    int32_t *top_ids;         /* B * k */
    float *top_lp;            /* B * k */
    size_t bytes;             /* what this block holds, counted against the budget */
    size_t payload;           /* bytes of the one allocation at ids (ids, kv, state); the
                               * unit the cache recycles */
};

struct ps_prefix_cache; /* prefix_cache.c */

/* Positions per block, elements of one block's kv, floats of its state. */
int32_t ps_pcache_block_len(const ps_prefix_cache *c);
size_t ps_pcache_kv_elems(const ps_prefix_cache *c);
size_t ps_pcache_state_floats(const ps_prefix_cache *c);
const ps_model *ps_pcache_model(const ps_prefix_cache *c);

/* The longest chain of cached blocks with configuration cfg that prefixes ids[0, n) in whole
 * blocks, at most max blocks, each holding top-K >= k: writes them to out[0..m) and takes a
 * reference on each (they are not evicted until ps_pcache_release). Counts m hits and the
 * remaining whole blocks of ids (n / B - m) as misses. Returns m. */
int32_t ps_pcache_acquire(ps_prefix_cache *c, uint64_t cfg, const int32_t *ids, int32_t n,
                          int32_t k, ps_pc_block **out, int32_t max);
/* Drops the references taken by ps_pcache_acquire (blocks[0..m)); they become the most
 * recently used, the first block most of all. */
void ps_pcache_release(ps_prefix_cache *c, ps_pc_block **blocks, int32_t m);

/* Copies positions [from, from + count) of block b (0 <= from, from + count <= B) answers at
 * top-K k (<= b->k): logprob, then k ids and logprobs per position, into lp, top_ids, top_lp,
 * and entropy, rank and varentropy into ent, rank and var (each may be NULL: not copied). */
void ps_pcache_read_entries(ps_prefix_cache *c, const ps_pc_block *b, int32_t from,
                            int32_t count, int32_t k, float *lp, int32_t *top_ids, float *top_lp,
                            float *ent, int32_t *rank, float *var);

/* A new block for answers of top-K k and K/V elements of kv_elt (4 or 2) bytes, outside the
 * index, its bytes reserved against the budget (giving back idle payloads of other sizes, then
 * evicting unreferenced blocks, least recently used first). Its payload (ids, kv, state) is an
 * idle one of its size, or an evicted block's, when there is one, else fresh memory populated
 * at once; its contents are undefined either way (the caller writes all of them). *out = NULL
 * with PS_OK when the budget has no room (every block is referenced or reserved): the caller
 * just does not cache. PS_ERR_NOMEM when an allocation fails. */
ps_status ps_pcache_block_new(ps_prefix_cache *c, int32_t k, int32_t kv_elt, ps_pc_block **out,
                              ps_error *err);
/* Gives back a block that ps_pcache_block_new gave and that was not inserted (its payload
 * waits idle for a new block while the budget has room); NULL is a no-op. */
void ps_pcache_block_drop(ps_prefix_cache *c, ps_pc_block *b);
/* Adds chain[0..n) (filled: ids, kv, state, answers) as the blocks after `parent` (NULL: from
 * position 0; a block the caller holds a reference on), each the parent of the next. A block
 * already cached keeps its place (and takes the new answers when they hold a larger K); the
 * new copy is given back as by ps_pcache_block_drop. The chain's blocks are consumed either
 * way. */
void ps_pcache_insert(ps_prefix_cache *c, uint64_t cfg, ps_pc_block *parent, ps_pc_block **chain,
                      int32_t n);

/* In-flight claims. Scores on different sessions (the server's workers) that miss on the same
 * blocks at the same time would each compute them. So a score about to compute the blocks
 * after `parent` (NULL: from position 0) claims the first of them, keyed by (cfg, parent, its
 * B ids), for top-K k, until it has inserted them (or will not); a scheduler asks
 * ps_pcache_claimed whether a prompt's next block is being computed right now and, when it
 * has other work, runs that first: the prompt then finds the blocks cached. Nothing ever waits
 * on a claim. */
typedef struct ps_pc_claim ps_pc_claim;
/* Claims the block after parent with ids for top-K k, or NULL when another score holds that
 * claim or the allocation fails (the caller then computes without a claim). parent must be a
 * block the caller holds a reference on (or NULL). */
ps_pc_claim *ps_pcache_claim(ps_prefix_cache *c, uint64_t cfg, const ps_pc_block *parent,
                             const int32_t *ids, int32_t k);
/* Gives a claim back; NULL is a no-op. */
void ps_pcache_unclaim(ps_prefix_cache *c, ps_pc_claim *cl);
/* Whether the first block of ids[0, n) that the cache lacks (with top-K >= k, configuration
 * cfg) is claimed by a score computing it for a top-K >= k: then scoring this prompt after
 * that score inserts would find the block (and those after it that they share) cached. False
 * when every whole block is cached or the prompt has none. Takes no reference, counts nothing. */
bool ps_pcache_claimed(ps_prefix_cache *c, uint64_t cfg, const int32_t *ids, int32_t n,
                       int32_t k);

/* prefix_kv.c: between blocks and a sequence (session.h) */
struct ps_session;
struct ps_seq;
/* The session's configuration as a cache key (ISA, activations, AMX, K/V type). */
uint64_t ps_pcache_session_cfg(const struct ps_session *s);
/* Copies the K/V of positions [p0, p0 + B) from the sequence into b->kv. False when a sliding
 * layer's ring no longer holds all of them (nothing to cache then). Needs p0 + B <= n_past. */
bool ps_pcache_capture_kv(const ps_prefix_cache *c, ps_pc_block *b, const struct ps_seq *q,
                          int32_t p0);
/* Copies the sequence's recurrent state (after n_past positions) into b->state (no-op when the
 * model has none). */
void ps_pcache_capture_state(const ps_prefix_cache *c, ps_pc_block *b, const struct ps_seq *q);
/* Restores blocks[0..m) (m >= 1, a chain from position 0) into the sequence: the K/V of
 * positions 0 .. mB - 2 (a sliding layer: those its ring holds), the state of blocks[m - 1],
 * and n_past = mB - 1, so the next forward computes position mB - 1 again. Needs mB <= n_ctx. */
void ps_pcache_restore(const ps_prefix_cache *c, ps_pc_block *const *blocks, int32_t m,
                       struct ps_seq *q);

#endif /* PS_PREFIX_CACHE_H */
