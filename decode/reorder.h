/* Reorder buffer: events arrive grouped per thread, out of global seq order;
 * it hands them out in seq order.  A ring indexed by seq (mod capacity) holds
 * the window [next, next + cap), grown on demand up to a bound.
 *
 * Hot path (inline, no copies):
 *   struct dsmt_event *e = dsmt_reorder_slot(r, seq, &err);  fill *e, type last
 *   while ((e = dsmt_reorder_peek(r))) { use(r->next, e); dsmt_reorder_pop(r); } */
#ifndef DSMT_DEC_REORDER_H
#define DSMT_DEC_REORDER_H

#include <stddef.h>
#include <stdint.h>

#include "event.h"

#define DSMT_REORDER_MAX (1u << 24) /* entries (64 bytes each): 1 GiB */

struct dsmt_reorder {
	struct dsmt_event *ring;
	size_t cap; /* power of two, 0 before the first insert */
	size_t max; /* bound on cap */
	uint64_t next; /* next seq to hand out; everything below was handed out or skipped */
	size_t held;   /* events in the ring */
	uint64_t hi;   /* 1 + highest seq held (valid when held > 0) */
	uint64_t lo;   /* no seq below lo is held (UINT64_MAX when none is held): while
	                * next < lo, dsmt_reorder_peek need not look at the ring */
	uint64_t gaps; /* seqs skipped by dsmt_reorder_flush (never seen) */
	uint64_t dups; /* events whose seq was already seen or handed out */
};

typedef void (*dsmt_emit_fn)(void *ctx, uint64_t seq, const struct dsmt_event *ev);

void dsmt_reorder_init(struct dsmt_reorder *r, size_t max_entries);
void dsmt_reorder_free(struct dsmt_reorder *r);
/* Out of line: make room for seq (grow the ring).  0 or -1 (bound/memory). */
int dsmt_reorder_room(struct dsmt_reorder *r, uint64_t seq);
/* Out of line: next is not held; find the lowest seq held (sets lo). */
void dsmt_reorder_rescan(struct dsmt_reorder *r);

/* The slot to fill for seq, or NULL: *err = 0 for a duplicate (counted and
 * to be dropped), -1 when seq is beyond the bound.  The caller fills the slot
 * and must set a non-zero type. */
static inline struct dsmt_event *dsmt_reorder_slot(struct dsmt_reorder *r, uint64_t seq, int *err)
{
	*err = 0;
	if (__builtin_expect(seq < r->next, 0)) {
		r->dups++;
		return NULL;
	}
	if (__builtin_expect(seq - r->next >= r->cap, 0)) {
		if (dsmt_reorder_room(r, seq)) {
			*err = -1;
			return NULL;
		}
	}
	struct dsmt_event *e = &r->ring[seq & (r->cap - 1)];
	if (__builtin_expect(e->type != 0, 0)) {
		r->dups++;
		return NULL;
	}
	if (r->held++ == 0 || seq >= r->hi)
		r->hi = seq + 1;
	if (seq < r->lo)
		r->lo = seq;
	return e;
}

/* The event with seq r->next if it is there, else NULL. */
static inline struct dsmt_event *dsmt_reorder_peek(struct dsmt_reorder *r)
{
	if (__builtin_expect(r->next < r->lo, 1)) /* also when nothing is held */
		return NULL;
	struct dsmt_event *e = &r->ring[r->next & (r->cap - 1)];
	if (e->type)
		return e;
	dsmt_reorder_rescan(r);
	return NULL;
}

/* Drop the event dsmt_reorder_peek returned. */
static inline void dsmt_reorder_pop(struct dsmt_reorder *r)
{
	r->ring[r->next & (r->cap - 1)].type = 0;
	r->next++;
	r->lo = --r->held ? r->next : UINT64_MAX; /* nothing below next is held */
}

/* Convenience (tests): add one event, hand out what became due.
 * Returns 0, or -1 when the window would exceed the bound. */
int dsmt_reorder_add(struct dsmt_reorder *r, uint64_t seq, const struct dsmt_event *ev,
		     dsmt_emit_fn emit, void *ctx);
/* Hand out everything held in seq order, skipping (and counting) gaps. */
void dsmt_reorder_flush(struct dsmt_reorder *r, dsmt_emit_fn emit, void *ctx);

#endif
