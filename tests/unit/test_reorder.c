/* Reorder buffer: out-of-order input comes out in seq order; gaps, duplicates
 * and the window bound. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "reorder.h"

static uint64_t got[200000];
static size_t ngot;

static void emit(void *ctx, uint64_t seq, const struct dsmt_event *e)
{
	(void)ctx;
	CHECK(e->ts == seq * 10); /* payload travels with its seq */
	if (ngot < sizeof(got) / sizeof(got[0]))
		got[ngot++] = seq;
}

static int add(struct dsmt_reorder *r, uint64_t seq)
{
	struct dsmt_event e;
	memset(&e, 0, sizeof(e));
	e.type = 0x10;
	e.ts = seq * 10;
	return dsmt_reorder_add(r, seq, &e, emit, NULL);
}

int main(void)
{
	struct dsmt_reorder r;
	/* in order: straight through */
	dsmt_reorder_init(&r, 0);
	ngot = 0;
	for (uint64_t s = 0; s < 1000; s++)
		CHECK(add(&r, s) == 0);
	CHECK(ngot == 1000 && r.held == 0);
	dsmt_reorder_flush(&r, emit, NULL);
	CHECK(ngot == 1000 && r.gaps == 0);
	dsmt_reorder_free(&r);

	/* two threads' batches of 256, interleaved seqs, plus growth past 1024 */
	dsmt_reorder_init(&r, 0);
	ngot = 0;
	const uint64_t N = 100000;
	uint64_t *a = malloc(N * sizeof(*a)), *b = malloc(N * sizeof(*b));
	size_t na = 0, nb = 0;
	for (uint64_t s = 0; s < N; s++) {
		if ((s * 2654435761u) % 3)
			a[na++] = s;
		else
			b[nb++] = s;
	}
	size_t ia = 0, ib = 0;
	while (ia < na || ib < nb) {
		/* thread b's batches are 5000 events, a's 256: big skew */
		for (size_t k = 0; k < 5000 && ib < nb; k++)
			CHECK(add(&r, b[ib++]) == 0);
		for (size_t k = 0; k < 256 && ia < na; k++)
			CHECK(add(&r, a[ia++]) == 0);
	}
	dsmt_reorder_flush(&r, emit, NULL);
	CHECK(ngot == N);
	for (size_t i = 0; i < ngot; i++)
		CHECK(got[i] == i);
	CHECK(r.gaps == 0 && r.dups == 0);
	dsmt_reorder_free(&r);
	free(a);
	free(b);

	/* gaps and duplicates */
	dsmt_reorder_init(&r, 0);
	ngot = 0;
	uint64_t seqs[] = {3, 1, 0, 7, 1, 9, 0};
	for (size_t i = 0; i < sizeof(seqs) / sizeof(seqs[0]); i++)
		CHECK(add(&r, seqs[i]) == 0);
	CHECK(ngot == 2 && got[0] == 0 && got[1] == 1);
	dsmt_reorder_flush(&r, emit, NULL);
	CHECK(ngot == 5 && got[2] == 3 && got[3] == 7 && got[4] == 9);
	CHECK(r.gaps == 5);  /* 2, 4, 5, 6, 8 */
	CHECK(r.dups == 2);  /* 1 and 0 again */
	/* after a flush it keeps going */
	CHECK(add(&r, 10) == 0 && ngot == 6 && got[5] == 10);
	dsmt_reorder_free(&r);

	/* the bound: a seq too far ahead is refused, nothing crashes */
	dsmt_reorder_init(&r, 4096);
	ngot = 0;
	CHECK(add(&r, 4095) == 0);
	CHECK(add(&r, 4096) == -1);
	CHECK(add(&r, UINT64_MAX - 1) == -1);
	CHECK(add(&r, 0) == 0);
	CHECK(ngot == 1);
	dsmt_reorder_flush(&r, emit, NULL);
	CHECK(ngot == 2 && got[1] == 4095 && r.gaps == 4094);
	dsmt_reorder_free(&r);
	return CHECK_DONE();
}
