/*
 * prefix_cache.c — the exact prefix cache's index: blocks of B positions keyed by their whole
 * token-id prefix, reference counts, LRU eviction under a memory budget, counters.
 *
 * A lookup walks the prompt a block at a time: the chain hash h_b = fnv1a(h_{b-1}, ids of
 * block b) (h_{-1} = a seed from the session configuration) picks a bucket, and a block
 * matches only when its parent is the block matched before it (pointer identity), its cfg is
 * the session's and its B ids equal the prompt's, id by id: by induction the whole prefix is
 * equal, whatever the hash does. A parent with linked children is never evicted (only leaves
 * are), so a child's parent pointer stays valid and every cached block stays reachable.
 * Blocks with no reference (no score is using them) sit on one LRU list; eviction takes the
 * least recently used leaf. A lookup's blocks are referenced until the score releases them,
 * and released leaf first, so a chain's first block is the most recently used of it.
 * Memory: the bytes of linked blocks, those reserved by blocks being filled and the idle
 * payloads stay within the budget; a block that finds no room is simply not cached (never an
 * error). A block's payload (ids + K/V + state: all but a few KiB of it) that leaves the index
 * or is dropped unfilled goes to an idle list instead of back to the system, and the next new
 * block of that size takes it: a server whose cache is full evicts and captures without ever
 * touching fresh memory (first-touch page faults were most of a capture's cost). Idle payloads
 * are the first thing given back when room is needed. One mutex
 * guards everything but a block's kv / state, which are written before the block is linked
 * and never after, so readers holding a reference copy them without the lock.
 */
#include "base/impl.h"
#include "model/model.h"
#include "score/prefix_cache.h"
#include "base/util.h"
#include "base/testhooks.h"

#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

/* A claim on the next block after `parent` (ps_pcache_claim): its key and top-K. */
struct ps_pc_claim {
    struct ps_pc_claim *next;
    uint64_t cfg;
    const ps_pc_block *parent;
    int32_t k;
    int32_t ids[]; /* B */
};

/* An idle payload: its first bytes (a payload is >= 64) hold the list link and its size. */
typedef struct idle_payload {
    struct idle_payload *next;
    size_t size;
} idle_payload;

struct ps_prefix_cache {
    const ps_model *model;
    int32_t B;
    int64_t budget;
    size_t kv_elems, state_floats;
    pthread_mutex_t mu;
    ps_fork_lock fork_entry;  /* mu, taken around fork() (base/impl.h) */
    ps_pc_claim *claims;      /* in flight */
    ps_pc_block **buckets;
    size_t n_buckets;  /* a power of two */
    ps_pc_block lru;   /* sentinel: lru.next the most recent, lru.prev the least */
    int64_t bytes;     /* linked blocks */
    int64_t reserved;  /* blocks being filled */
    idle_payload *idle; /* payloads kept for new blocks, most recent first */
    int64_t idle_bytes;
    uintptr_t page;     /* the system's page size */
    int64_t n_blocks;
    int64_t hits, misses, inserts, evictions;
};

ps_prefix_cache_params ps_prefix_cache_default_params(void) {
    ps_prefix_cache_params p;
    memset(&p, 0, sizeof p);
    p.budget_bytes = (int64_t)256 << 20;
    p.block = 0;
    return p;
}

int32_t ps_pcache_block_len(const ps_prefix_cache *c) { return c->B; }
size_t ps_pcache_kv_elems(const ps_prefix_cache *c) { return c->kv_elems; }
size_t ps_pcache_state_floats(const ps_prefix_cache *c) { return c->state_floats; }
const ps_model *ps_pcache_model(const ps_prefix_cache *c) { return c->model; }

ps_status ps_prefix_cache_create(const ps_model *model, const ps_prefix_cache_params *params,
                                 ps_prefix_cache **out, ps_error *err) {
    if (!out) return ps_fail(err, PS_ERR_INVALID_ARG, -1, "out is required");
    *out = NULL;
    if (!model) return ps_fail(err, PS_ERR_INVALID_ARG, -1, "model is required");
    if (model->info.vocab_only)
        return ps_fail(err, PS_ERR_INVALID_ARG, -1, "a vocab-only model has nothing to cache");
    ps_prefix_cache_params d = ps_prefix_cache_default_params();
    const ps_prefix_cache_params *p = params ? params : &d;
    const ps_hparams *hp = &model->hp;
    int32_t B = p->block ? p->block : (hp->n_layer_rs > 0 ? 64 : 16);
    if (B < 16 || B > 1024 || B % 16)
        return ps_fail(err, PS_ERR_INVALID_ARG, -1,
                       "block must be a multiple of 16 in 16..1024, got %d", p->block);
    if (p->budget_bytes < 0)
        return ps_fail(err, PS_ERR_INVALID_ARG, -1, "budget_bytes must be >= 0, got %lld",
                       (long long)p->budget_bytes);
    ps_prefix_cache *c = ps_calloc(1, sizeof *c);
    if (!c) return ps_fail(err, PS_ERR_NOMEM, -1, "out of memory (prefix cache)");
    c->model = model;
    c->B = B;
    c->budget = p->budget_bytes;
    /* K and V of B positions per KV layer and kv head */
    c->kv_elems = (size_t)hp->n_layer_kv * (size_t)hp->n_head_kv * (size_t)hp->head_dim *
                   (size_t)B * 2;
    if (hp->n_layer_rs > 0) {
        const size_t dk = (size_t)hp->ssm_d_state, nv = (size_t)hp->ssm_n_v,
                     ch = 2 * (size_t)hp->ssm_n_k * dk + nv * dk;
        c->state_floats = (size_t)hp->n_layer_rs * ((size_t)(hp->ssm_d_conv - 1) * ch + nv * dk * dk);
    }
    c->n_buckets = 1024;
    c->buckets = ps_calloc(c->n_buckets, sizeof *c->buckets);
    if (!c->buckets) {
        ps_free(c);
        return ps_fail(err, PS_ERR_NOMEM, -1, "out of memory (prefix cache index)");
    }
    c->lru.next = c->lru.prev = &c->lru;
    const long pg = sysconf(_SC_PAGESIZE);
    c->page = pg > 0 ? (uintptr_t)pg : 4096;
    if (pthread_mutex_init(&c->mu, NULL) != 0) {
        ps_free(c->buckets);
        ps_free(c);
        return ps_fail(err, PS_ERR_NOMEM, -1, "prefix cache: pthread_mutex_init failed");
    }
    ps_fork_lock_add(&c->fork_entry, &c->mu);
    *out = c;
    return PS_OK;
}

static void block_free(ps_pc_block *b) {
    if (!b) return;
    ps_free(b->lp); /* lp, ent, rank and var are one allocation */
    ps_free(b->top_ids);
    ps_free(b->top_lp);
    ps_free(b->ids); /* ids, kv and state are one allocation */
    ps_free(b);
}

/* Maps the whole pages of fresh memory [p, p + n) in one call (MADV_POPULATE_WRITE, Linux
 * 5.14+), before the capture writes them: the kernel fills them in a loop instead of taking a
 * fault per page, which is dear on a VM (docs/figures.md, "The prefix cache's capture cost").
 * Best effort: an older kernel says EINVAL and the pages fault in as they are written. */
static void populate(const ps_prefix_cache *c, void *p, size_t n) {
#ifdef MADV_POPULATE_WRITE
    const uintptr_t a = ((uintptr_t)p + c->page - 1) & ~(c->page - 1),
                    e = ((uintptr_t)p + n) & ~(c->page - 1);
    if (e > a) (void)madvise((void *)a, e - a, MADV_POPULATE_WRITE);
#else
    (void)c;
    (void)p;
    (void)n;
#endif
}

/* ---- idle payloads (under the lock) ---- */

/* Keeps payload mem (size bytes) for a later block when the budget has room for it, else
 * frees it. */
static void idle_put(ps_prefix_cache *c, void *mem, size_t size) {
    if (!mem) return;
    if (c->bytes + c->reserved + c->idle_bytes + (int64_t)size > c->budget) {
        ps_free(mem);
        return;
    }
    idle_payload *e = mem;
    e->next = c->idle;
    e->size = size;
    c->idle = e;
    c->idle_bytes += (int64_t)size;
}

/* An idle payload of exactly size bytes, or NULL. */
static void *idle_take(ps_prefix_cache *c, size_t size) {
    for (idle_payload **pp = &c->idle; *pp; pp = &(*pp)->next)
        if ((*pp)->size == size) {
            idle_payload *e = *pp;
            *pp = e->next;
            c->idle_bytes -= (int64_t)size;
            return e;
        }
    return NULL;
}

/* Gives one idle payload back to the system; false when there is none. */
static bool idle_drop_one(ps_prefix_cache *c) {
    idle_payload *e = c->idle;
    if (!e) return false;
    c->idle = e->next;
    c->idle_bytes -= (int64_t)e->size;
    ps_free(e);
    return true;
}

void ps_prefix_cache_free(ps_prefix_cache *c) {
    if (!c) return;
    ps_fork_lock_remove(&c->fork_entry);
    for (size_t i = 0; i < c->n_buckets; i++)
        for (ps_pc_block *b = c->buckets[i], *nx; b; b = nx) {
            nx = b->hnext;
            block_free(b);
        }
    while (idle_drop_one(c)) {
    }
    ps_free(c->buckets);
    pthread_mutex_destroy(&c->mu);
    ps_free(c);
}

void ps_prefix_cache_get_stats(ps_prefix_cache *c, ps_prefix_cache_stats *o) {
    if (!o) return;
    memset(o, 0, sizeof *o);
    if (!c) return;
    pthread_mutex_lock(&c->mu);
    o->hits = c->hits;
    o->misses = c->misses;
    o->inserts = c->inserts;
    o->evictions = c->evictions;
    o->bytes = c->bytes;
    o->budget_bytes = c->budget;
    o->blocks = c->n_blocks;
    o->block = c->B;
    o->idle_bytes = c->idle_bytes;
    pthread_mutex_unlock(&c->mu);
}

/* ---- under the lock ------------------------------------------------------------------------ */

#ifdef PS_TESTING
/* ps_test_pcache_hash_bits (base/testhooks.h): -1, the full hash */
static _Atomic int g_test_hash_bits = -1;
void ps_test_pcache_hash_bits(int bits) { g_test_hash_bits = bits; }
#endif

static uint64_t chain_hash(const ps_prefix_cache *c, uint64_t cfg, const ps_pc_block *parent,
                           const int32_t *ids) {
    uint64_t h = parent ? parent->hash : ps_fnv1a64(PS_FNV1A64_INIT, &cfg, sizeof cfg);
    h = ps_fnv1a64(h, ids, (size_t)c->B * sizeof *ids);
#ifdef PS_TESTING
    const int bits = g_test_hash_bits;
    if (bits >= 0 && bits < 64) h &= ((uint64_t)1 << bits) - 1;
#endif
    return h;
}

static ps_pc_block *find(const ps_prefix_cache *c, uint64_t h, uint64_t cfg,
                         const ps_pc_block *parent, const int32_t *ids) {
    for (ps_pc_block *b = c->buckets[h & (c->n_buckets - 1)]; b; b = b->hnext)
        if (b->hash == h && b->cfg == cfg && b->parent == parent &&
            !memcmp(b->ids, ids, (size_t)c->B * sizeof *ids))
            return b;
    return NULL;
}

/* The cached block after parent holding ids (B of them) for configuration cfg, if its answers
 * hold top-K >= k; else NULL. One step of a prompt's walk down its chain. */
static ps_pc_block *lookup(const ps_prefix_cache *c, uint64_t cfg, const ps_pc_block *parent,
                           const int32_t *ids, int32_t k) {
    ps_pc_block *b = find(c, chain_hash(c, cfg, parent, ids), cfg, parent, ids);
    return b && b->k >= k ? b : NULL;
}

static void lru_unlink(ps_pc_block *b) {
    b->prev->next = b->next;
    b->next->prev = b->prev;
    b->prev = b->next = NULL;
}

static void lru_push_front(ps_prefix_cache *c, ps_pc_block *b) {
    b->next = c->lru.next;
    b->prev = &c->lru;
    c->lru.next->prev = b;
    c->lru.next = b;
}

/* Takes the least recently used unreferenced leaf out of the index and returns it (the
 * caller frees or retires it); NULL when there is none. */
static ps_pc_block *evict_one(ps_prefix_cache *c) {
    for (ps_pc_block *b = c->lru.prev; b != &c->lru; b = b->prev) {
        if (b->n_children > 0) continue;
        lru_unlink(b);
        ps_pc_block **pp = &c->buckets[b->hash & (c->n_buckets - 1)];
        while (*pp != b) pp = &(*pp)->hnext;
        *pp = b->hnext;
        if (b->parent) b->parent->n_children--;
        c->bytes -= (int64_t)b->bytes;
        c->n_blocks--;
        c->evictions++;
        return b;
    }
    return NULL;
}

/* Frees idle payloads, then evicts, until the linked, reserved and idle bytes plus need fit
 * the budget. want: the payload size the caller is about to allocate; the first evicted
 * payload of that size is handed over in *mem (when *mem is NULL) instead of being freed.
 * False when no room could be made. */
static bool make_room(ps_prefix_cache *c, int64_t need, size_t want, void **mem) {
    while (c->bytes + c->reserved + c->idle_bytes + need > c->budget) {
        if (idle_drop_one(c)) continue;
        ps_pc_block *v = evict_one(c);
        if (!v) return false;
        if (mem && !*mem && v->payload == want) {
            *mem = v->ids;
            v->ids = NULL;
        }
        block_free(v);
    }
    return true;
}

/* Doubles the buckets when the chains grow long (an allocation failure keeps the old ones). */
static void maybe_grow(ps_prefix_cache *c) {
    if ((size_t)c->n_blocks <= 2 * c->n_buckets || c->n_buckets > ((size_t)1 << 40)) return;
    size_t n = c->n_buckets * 2;
    ps_pc_block **nb = ps_calloc(n, sizeof *nb);
    if (!nb) return;
    for (size_t i = 0; i < c->n_buckets; i++)
        for (ps_pc_block *b = c->buckets[i], *nx; b; b = nx) {
            nx = b->hnext;
            b->hnext = nb[b->hash & (n - 1)];
            nb[b->hash & (n - 1)] = b;
        }
    ps_free(c->buckets);
    c->buckets = nb;
    c->n_buckets = n;
}

/* ---- the calls ------------------------------------------------------------------------------ */

int32_t ps_pcache_acquire(ps_prefix_cache *c, uint64_t cfg, const int32_t *ids, int32_t n,
                          int32_t k, ps_pc_block **out, int32_t max) {
    const int32_t whole = n / c->B;
    int32_t m = 0;
    pthread_mutex_lock(&c->mu);
    ps_pc_block *parent = NULL;
    while (m < whole && m < max) {
        ps_pc_block *b = lookup(c, cfg, parent, ids + (size_t)m * (size_t)c->B, k);
        if (!b) break;
        if (b->refs++ == 0) lru_unlink(b);
        out[m++] = b;
        parent = b;
    }
    c->hits += m;
    c->misses += whole - m;
    pthread_mutex_unlock(&c->mu);
    return m;
}

void ps_pcache_release(ps_prefix_cache *c, ps_pc_block **blocks, int32_t m) {
    if (m <= 0) return;
    pthread_mutex_lock(&c->mu);
    for (int32_t i = m - 1; i >= 0; i--) {
        ps_pc_block *b = blocks[i];
        assert(b->refs > 0);
        if (--b->refs == 0) lru_push_front(c, b);
    }
    pthread_mutex_unlock(&c->mu);
}

void ps_pcache_read_entries(ps_prefix_cache *c, const ps_pc_block *b, int32_t from,
                            int32_t count, int32_t k, float *lp, int32_t *top_ids,
                            float *top_lp, float *ent, int32_t *rank, float *var) {
    assert(from >= 0 && from + count <= c->B && k <= b->k);
    pthread_mutex_lock(&c->mu);
    memcpy(lp, b->lp + from, (size_t)count * sizeof *lp);
    if (ent) memcpy(ent, b->ent + from, (size_t)count * sizeof *ent);
    if (rank) memcpy(rank, b->rank + from, (size_t)count * sizeof *rank);
    if (var) memcpy(var, b->var + from, (size_t)count * sizeof *var);
    if (k > 0)
        for (int32_t i = 0; i < count; i++) {
            memcpy(top_ids + (size_t)i * (size_t)k, b->top_ids + (size_t)(from + i) * (size_t)b->k,
                   (size_t)k * sizeof *top_ids);
            memcpy(top_lp + (size_t)i * (size_t)k, b->top_lp + (size_t)(from + i) * (size_t)b->k,
                   (size_t)k * sizeof *top_lp);
        }
    pthread_mutex_unlock(&c->mu);
}

ps_status ps_pcache_block_new(ps_prefix_cache *c, int32_t k, int32_t kv_elt, ps_pc_block **out,
                              ps_error *err) {
    *out = NULL;
    const size_t B = (size_t)c->B, kk = (size_t)k;
    const size_t head = (B * sizeof(int32_t) + 63) & ~(size_t)63;
    /* kv bytes are a multiple of 64 (B is a multiple of 16, two halves of K and V): the state
     * floats after them stay aligned */
    const size_t kv_bytes = c->kv_elems * (size_t)kv_elt;
    const size_t payload = head + kv_bytes + c->state_floats * sizeof(float);
    const size_t bytes = sizeof(ps_pc_block) + payload + B * (3 * sizeof(float) + sizeof(int32_t)) +
                         B * kk * (sizeof(int32_t) + sizeof(float));
    pthread_mutex_lock(&c->mu);
    uint8_t *mem = idle_take(c, payload); /* memory touched before: no page faults */
    const bool room = make_room(c, (int64_t)bytes, payload, (void **)&mem);
    if (room) {
        c->reserved += (int64_t)bytes;
    } else {
        idle_put(c, mem, payload);
        mem = NULL;
    }
    pthread_mutex_unlock(&c->mu);
    if (!room) return PS_OK;
    ps_pc_block *b = ps_calloc(1, sizeof *b);
    if (!mem && b) {
        mem = ps_aligned_alloc(64, payload);
        if (mem) populate(c, mem, payload);
    }
    if (b) {
        /* one allocation: the ids, then (64-byte aligned) kv, then state */
        b->ids = (int32_t *)(void *)mem;
        /* one allocation: logprobs, entropies, ranks, varentropies */
        b->lp = ps_malloc(B * (3 * sizeof(float) + sizeof(int32_t)));
        if (b->lp) {
            b->ent = b->lp + B;
            b->rank = (int32_t *)(void *)(b->lp + 2 * B);
            b->var = b->lp + 3 * B;
        }
        b->top_ids = ps_malloc(kk ? B * kk * sizeof *b->top_ids : 1);
        b->top_lp = ps_malloc(kk ? B * kk * sizeof *b->top_lp : 1);
    }
    if (!b || !mem || !b->lp || !b->ent || !b->rank || !b->top_ids || !b->top_lp) {
        if (!b) ps_free(mem); /* else b->ids holds it */
        block_free(b);
        pthread_mutex_lock(&c->mu);
        c->reserved -= (int64_t)bytes;
        pthread_mutex_unlock(&c->mu);
        return ps_fail(err, PS_ERR_NOMEM, -1, "out of memory for a prefix-cache block (%zu bytes)",
                       bytes);
    }
    b->kv = mem + head;
    b->payload = payload;
    b->state = c->state_floats ? (float *)(void *)(b->kv + kv_bytes) : NULL;
    b->k = k;
    b->bytes = bytes;
    *out = b;
    return PS_OK;
}

void ps_pcache_block_drop(ps_prefix_cache *c, ps_pc_block *b) {
    if (!b) return;
    pthread_mutex_lock(&c->mu);
    c->reserved -= (int64_t)b->bytes;
    idle_put(c, b->ids, b->payload);
    b->ids = NULL;
    pthread_mutex_unlock(&c->mu);
    block_free(b);
}

void ps_pcache_insert(ps_prefix_cache *c, uint64_t cfg, ps_pc_block *parent, ps_pc_block **chain,
                      int32_t n) {
    ps_pc_block *dead[64];
    int32_t n_dead = 0;
    pthread_mutex_lock(&c->mu);
    for (int32_t i = 0; i < n; i++) {
        ps_pc_block *b = chain[i];
        c->reserved -= (int64_t)b->bytes;
        const uint64_t h = chain_hash(c, cfg, parent, b->ids);
        ps_pc_block *old = find(c, h, cfg, parent, b->ids);
        if (old) {
            if (old->k < b->k) { /* the larger K's answers replace the smaller */
                float *lp = old->lp, *tl = old->top_lp, *en = old->ent, *va = old->var;
                int32_t *ti = old->top_ids, *rk = old->rank;
                size_t ob = old->bytes;
                old->lp = b->lp; /* with ent, rank and var: one allocation */
                old->ent = b->ent;
                old->rank = b->rank;
                old->var = b->var;
                old->top_ids = b->top_ids;
                old->top_lp = b->top_lp;
                old->k = b->k;
                old->bytes = b->bytes;
                c->bytes += (int64_t)b->bytes - (int64_t)ob;
                b->lp = lp;
                b->ent = en;
                b->rank = rk;
                b->var = va;
                b->top_ids = ti;
                b->top_lp = tl;
            }
            idle_put(c, b->ids, b->payload); /* the copy's payload serves a later block */
            b->ids = NULL;
            if (n_dead == (int32_t)PS_ARRAY_LEN(dead)) { /* rare: free under the lock */
                block_free(b);
            } else {
                dead[n_dead++] = b;
            }
            parent = old;
            continue;
        }
        b->hash = h;
        b->cfg = cfg;
        b->parent = parent;
        b->refs = 0;
        b->n_children = 0;
        b->linked = true;
        if (parent) parent->n_children++;
        b->hnext = c->buckets[h & (c->n_buckets - 1)];
        c->buckets[h & (c->n_buckets - 1)] = b;
        lru_push_front(c, b);
        c->bytes += (int64_t)b->bytes;
        c->n_blocks++;
        c->inserts++;
        parent = b;
    }
    make_room(c, 0, 0, NULL);
    maybe_grow(c);
    pthread_mutex_unlock(&c->mu);
    for (int32_t i = 0; i < n_dead; i++) block_free(dead[i]);
}

/* ---- in-flight claims ----------------------------------------------------------------------- */

static ps_pc_claim *find_claim(const ps_prefix_cache *c, uint64_t cfg, const ps_pc_block *parent,
                               const int32_t *ids) {
    for (ps_pc_claim *cl = c->claims; cl; cl = cl->next)
        if (cl->cfg == cfg && cl->parent == parent &&
            !memcmp(cl->ids, ids, (size_t)c->B * sizeof *ids))
            return cl;
    return NULL;
}

ps_pc_claim *ps_pcache_claim(ps_prefix_cache *c, uint64_t cfg, const ps_pc_block *parent,
                             const int32_t *ids, int32_t k) {
    ps_pc_claim *cl = ps_malloc(sizeof *cl + (size_t)c->B * sizeof *ids);
    if (!cl) return NULL; /* only a question of speed: compute without one */
    cl->cfg = cfg;
    cl->parent = parent;
    cl->k = k;
    memcpy(cl->ids, ids, (size_t)c->B * sizeof *ids);
    pthread_mutex_lock(&c->mu);
    const bool taken = find_claim(c, cfg, parent, ids) != NULL;
    if (!taken) {
        cl->next = c->claims;
        c->claims = cl;
    }
    pthread_mutex_unlock(&c->mu);
    if (!taken) return cl;
    ps_free(cl);
    return NULL;
}

void ps_pcache_unclaim(ps_prefix_cache *c, ps_pc_claim *cl) {
    if (!cl) return;
    pthread_mutex_lock(&c->mu);
    ps_pc_claim **pp = &c->claims;
    while (*pp != cl) pp = &(*pp)->next;
    *pp = cl->next;
    pthread_mutex_unlock(&c->mu);
    ps_free(cl);
}

bool ps_pcache_claimed(ps_prefix_cache *c, uint64_t cfg, const int32_t *ids, int32_t n,
                       int32_t k) {
    const int32_t whole = n / c->B;
    bool claimed = false;
    pthread_mutex_lock(&c->mu);
    if (c->claims) {
        const ps_pc_block *parent = NULL;
        for (int32_t m = 0; m < whole; m++) {
            const int32_t *blk = ids + (size_t)m * (size_t)c->B;
            const ps_pc_block *b = lookup(c, cfg, parent, blk, k);
            if (b) {
                parent = b;
                continue;
            }
            const ps_pc_claim *cl = find_claim(c, cfg, parent, blk);
            claimed = cl && cl->k >= k;
            break;
        }
    }
    pthread_mutex_unlock(&c->mu);
    return claimed;
}
