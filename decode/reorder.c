#include "reorder.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* The ring is a private anonymous mapping: zero pages until an event is held
 * there, so its bound (DSMT_REORDER_MAX, 1 GiB) is address space, not memory.
 * A hostile trace whose seqs jump 16 Mi ahead costs nothing but the pages of
 * the events it holds.  calloc gave the same only while glibc skipped the
 * memset of a fresh mmap chunk: under MALLOC_PERTURB_ (meson test sets it)
 * it wrote all 1 GiB (found by the fuzzer: tests/decode/fuzz-regressions). */
static struct dsmt_event *ring_alloc(size_t n)
{
	void *p = mmap(NULL, n * sizeof(struct dsmt_event), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

static void ring_release(struct dsmt_event *ring, size_t n)
{
	if (ring)
		munmap(ring, n * sizeof(*ring));
}

void dsmt_reorder_init(struct dsmt_reorder *r, size_t max_entries)
{
	memset(r, 0, sizeof(*r));
	r->max = max_entries ? max_entries : DSMT_REORDER_MAX;
	r->lo = UINT64_MAX;
}

void dsmt_reorder_free(struct dsmt_reorder *r)
{
	ring_release(r->ring, r->cap);
	r->ring = NULL;
	r->cap = 0;
	r->held = 0;
	r->lo = UINT64_MAX;
}

void dsmt_reorder_rescan(struct dsmt_reorder *r)
{
	if (!r->held) {
		r->lo = UINT64_MAX;
		return;
	}
	uint64_t s = r->next > r->lo ? r->next : r->lo;
	while (s < r->hi && !r->ring[s & (r->cap - 1)].type)
		s++; /* each seq is passed over once: later ones start above it */
	r->lo = s;
}

int dsmt_reorder_room(struct dsmt_reorder *r, uint64_t seq)
{
	uint64_t need = seq - r->next + 1;
	size_t ncap = r->cap ? r->cap : 1024;
	while (ncap < need) {
		if (ncap >= r->max)
			return -1;
		ncap *= 2;
	}
	if (ncap > r->max || need > r->max)
		return -1;
	if (ncap == r->cap)
		return 0;
	struct dsmt_event *nr = ring_alloc(ncap);
	if (!nr)
		return -1;
	if (r->held) {
		for (uint64_t s = r->next; s < r->hi; s++) {
			struct dsmt_event *e = &r->ring[s & (r->cap - 1)];
			if (e->type)
				nr[s & (ncap - 1)] = *e;
		}
	}
	ring_release(r->ring, r->cap);
	r->ring = nr;
	r->cap = ncap;
	return 0;
}

static void drain(struct dsmt_reorder *r, dsmt_emit_fn emit, void *ctx)
{
	struct dsmt_event *e;
	while ((e = dsmt_reorder_peek(r))) {
		emit(ctx, r->next, e); /* emit never adds to the buffer */
		dsmt_reorder_pop(r);
	}
}

int dsmt_reorder_add(struct dsmt_reorder *r, uint64_t seq, const struct dsmt_event *ev,
		     dsmt_emit_fn emit, void *ctx)
{
	int err;
	struct dsmt_event *e = dsmt_reorder_slot(r, seq, &err);
	if (!e)
		return err;
	*e = *ev;
	if (!e->type)
		e->type = 0xff; /* a held slot must be marked */
	drain(r, emit, ctx);
	return 0;
}

void dsmt_reorder_flush(struct dsmt_reorder *r, dsmt_emit_fn emit, void *ctx)
{
	while (r->held) {
		if (!dsmt_reorder_peek(r)) {
			if (r->next >= r->lo) /* lo was stale: found again */
				dsmt_reorder_rescan(r);
			r->gaps += r->lo - r->next; /* never seen */
			r->next = r->lo;
			continue;
		}
		drain(r, emit, ctx);
	}
}
