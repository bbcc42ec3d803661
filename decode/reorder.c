#include "reorder.h"

#include <stdlib.h>
#include <string.h>

void dsmt_reorder_init(struct dsmt_reorder *r, size_t max_entries)
{
	memset(r, 0, sizeof(*r));
	r->max = max_entries ? max_entries : DSMT_REORDER_MAX;
}

void dsmt_reorder_free(struct dsmt_reorder *r)
{
	free(r->ring);
	r->ring = NULL;
	r->cap = 0;
}

/* Grow so that offsets < need fit; keeps slot (seq & (cap-1)) addressing. */
static int grow(struct dsmt_reorder *r, uint64_t need)
{
	size_t ncap = r->cap ? r->cap : 1024;
	while (ncap < need) {
		if (ncap >= r->max)
			return -1;
		ncap *= 2;
	}
	if (ncap > r->max)
		return -1;
	struct dsmt_event *nr = calloc(ncap, sizeof(*nr));
	if (!nr)
		return -1;
	if (r->held) {
		for (uint64_t s = r->next; s < r->hi; s++) {
			struct dsmt_event *e = &r->ring[s & (r->cap - 1)];
			if (e->type)
				nr[s & (ncap - 1)] = *e;
		}
	}
	free(r->ring);
	r->ring = nr;
	r->cap = ncap;
	return 0;
}

static void drain(struct dsmt_reorder *r, dsmt_emit_fn emit, void *ctx)
{
	size_t mask = r->cap - 1;
	while (r->held) {
		struct dsmt_event *e = &r->ring[r->next & mask];
		if (!e->type)
			break;
		struct dsmt_event ev = *e;
		e->type = 0;
		r->held--;
		emit(ctx, r->next++, &ev);
	}
}

int dsmt_reorder_add(struct dsmt_reorder *r, uint64_t seq, const struct dsmt_event *ev,
		     dsmt_emit_fn emit, void *ctx)
{
	if (seq < r->next) {
		r->dups++;
		return 0;
	}
	if (seq == r->next && !r->held) { /* fast path: in order, nothing waiting */
		r->next++;
		emit(ctx, seq, ev);
		return 0;
	}
	uint64_t off = seq - r->next;
	if (off >= r->cap) {
		if (off >= r->max || grow(r, off + 1))
			return -1;
	}
	struct dsmt_event *e = &r->ring[seq & (r->cap - 1)];
	if (e->type) {
		r->dups++;
		return 0;
	}
	*e = *ev;
	if (!e->type)
		e->type = 0xff; /* callers never add type 0, but keep the slot marked */
	if (r->held++ == 0 || seq + 1 > r->hi)
		r->hi = seq + 1;
	if (seq == r->next)
		drain(r, emit, ctx);
	return 0;
}

void dsmt_reorder_flush(struct dsmt_reorder *r, dsmt_emit_fn emit, void *ctx)
{
	while (r->held) {
		size_t mask = r->cap - 1;
		struct dsmt_event *e = &r->ring[r->next & mask];
		if (!e->type) {
			r->gaps++;
			r->next++;
			continue;
		}
		drain(r, emit, ctx);
	}
}
