/* Reorder buffer: events arrive grouped per thread, out of global seq order;
 * it hands them out in seq order.  A ring indexed by seq - next, grown on
 * demand up to a bound. */
#ifndef DSMT_DEC_REORDER_H
#define DSMT_DEC_REORDER_H

#include <stddef.h>
#include <stdint.h>

#include "event.h"

#define DSMT_REORDER_MAX (1u << 24) /* entries (48 bytes each): 768 MiB */

struct dsmt_reorder {
	struct dsmt_event *ring;
	size_t cap; /* power of two, 0 before the first insert */
	size_t max; /* bound on cap */
	uint64_t next; /* next seq to hand out; everything below was handed out or skipped */
	size_t held;   /* events in the ring */
	uint64_t hi;   /* 1 + highest seq held (valid when held > 0) */
	uint64_t gaps; /* seqs skipped by dsmt_reorder_flush (never seen) */
	uint64_t dups; /* events whose seq was already seen or handed out */
};

typedef void (*dsmt_emit_fn)(void *ctx, uint64_t seq, const struct dsmt_event *ev);

void dsmt_reorder_init(struct dsmt_reorder *r, size_t max_entries);
void dsmt_reorder_free(struct dsmt_reorder *r);
/* Add an event.  Events that become due are passed to emit in seq order.
 * Returns 0, or -1 when the window would exceed the bound (or memory runs out). */
int dsmt_reorder_add(struct dsmt_reorder *r, uint64_t seq, const struct dsmt_event *ev,
		     dsmt_emit_fn emit, void *ctx);
/* Hand out everything held in seq order, skipping (and counting) gaps. */
void dsmt_reorder_flush(struct dsmt_reorder *r, dsmt_emit_fn emit, void *ctx);

#endif
