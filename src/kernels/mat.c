/*
 * mat.c — the grouped driver the block-type kernels share (ps_mm_group_run, contract in
 * mat.h): the rows of all items are laid out in passes over the threads' activation slots
 * (ps_mm_plan: runs of one item's rows, aligned for AMX, at most PS_MM_SEGS per pass); each
 * pass is quantised by one pool dispatch over its rows, prepared once (the kernel's prep), then
 * multiplied by one dispatch of a task per (run, matrix, weight tile), each prefetching the
 * tile two rounds of tasks ahead. The kernel comes in as a ps_mm_group_kernel, so this file
 * knows no weight type.
 */
#include "kernels/mat.h"

int32_t ps_mm_plan(const ps_mm_item *items, int32_t n_items, int32_t *item, int64_t *row,
                   int32_t n_slots, int64_t slot_rows, int64_t align, ps_mm_seg *segs) {
    int32_t n = 0, slot = 0;
    int64_t fill = 0, q0 = 0;
    while (*item < n_items && n < PS_MM_SEGS) {
        const ps_mm_item *it = &items[*item];
        if (*row >= it->n_rows) {
            ++*item;
            *row = 0;
            continue;
        }
        fill = (fill + align - 1) / align * align;
        if (fill >= slot_rows) {
            if (++slot == n_slots) break;
            fill = 0;
        }
        const int64_t take = PS_MIN(it->n_rows - *row, slot_rows - fill);
        segs[n++] = (ps_mm_seg){*item, slot, fill, *row, take, q0};
        fill += take;
        q0 += take;
        *row += take;
    }
    return n;
}

/* The run holding row q of a pass of n runs (q < the pass's rows). */
static const ps_mm_seg *mm_seg_of(const ps_mm_seg *segs, int32_t n, int64_t q) {
    int32_t lo = 0, hi = n - 1;
    while (lo < hi) {
        const int32_t mid = lo + (hi - lo + 1) / 2;
        if (segs[mid].q0 <= q) lo = mid;
        else hi = mid - 1;
    }
    return &segs[lo];
}

/* Task t of a pass's tile dispatch (n_w matrices of n_tiles weight tiles per run, runs in
 * order): its run, item, matrix and tile. */
typedef struct {
    const ps_mm_seg *seg;
    const ps_mm_item *item;
    int32_t m;
    int64_t tile;
} mm_group_task;

static mm_group_task mm_group_task_at(const ps_mm_item *items, const ps_mm_seg *segs, int32_t n_w,
                          int64_t n_tiles, int64_t t) {
    const int64_t per = n_w * n_tiles;
    const ps_mm_seg *sg = &segs[t / per];
    return (mm_group_task){sg, &items[sg->item], (int32_t)(t % per / n_tiles), t % n_tiles};
}

/* One pass of ps_mm_group_run. */
typedef struct {
    const ps_mm_group_kernel *k;
    const ps_mm_item *items;
    const ps_mm_seg *segs;
    int32_t n_segs, n_w;
} mm_group_pass;

static void mm_group_quant_task(void *ctx, int64_t q, int32_t thread) {
    const mm_group_pass *p = ctx;
    const ps_mm_seg *sg = mm_seg_of(p->segs, p->n_segs, q);
    const ps_mm_item *it = &p->items[sg->item];
    const int64_t r = q - sg->q0;
    (void)thread;
    p->k->quant(p->k->job, it->x + (sg->row + r) * it->ldx, sg->slot, sg->off + r);
}

static void mm_group_tile_task(void *ctx, int64_t t, int32_t thread) {
    const mm_group_pass *p = ctx;
    const ps_mm_group_kernel *k = p->k;
    const int64_t ahead = t + 2; /* this thread's tile after next (ps_pool_for_runs), prefetched */
    if (ahead < p->n_segs * p->n_w * k->n_tiles) {
        const mm_group_task a = mm_group_task_at(p->items, p->segs, p->n_w, k->n_tiles, ahead);
        k->prefetch(&a.item->w[a.m], a.tile);
    }
    const mm_group_task a = mm_group_task_at(p->items, p->segs, p->n_w, k->n_tiles, t);
    k->tile(k->job, &a.item->w[a.m], a.seg, a.tile, a.item->y[a.m] + a.seg->row * a.item->ldy,
            a.item->ldy, thread);
}

void ps_mm_group_run(ps_pool *pool, const ps_mm_item *items, int32_t n_items,
                     const ps_mm_group_kernel *k) {
    ps_mm_seg segs[PS_MM_SEGS];
    mm_group_pass p = {k, items, segs, 0, items[0].n_w};
    int32_t item = 0;
    int64_t row = 0;
    while ((p.n_segs = ps_mm_plan(items, n_items, &item, &row, k->n_threads, k->slot_rows,
                                  k->align, segs)) > 0) {
        const ps_mm_seg *last = &segs[p.n_segs - 1];
        ps_pool_for_runs(pool, last->q0 + last->n, mm_group_quant_task, &p);
        if (k->prep) k->prep(k->job, segs, p.n_segs);
        ps_pool_for_runs(pool, p.n_segs * p.n_w * k->n_tiles, mm_group_tile_task, &p);
    }
}
