/* --html: a device's allocated memory by category over time, downsampled to
 * one entry per pixel column.  Each column keeps the lowest and the highest
 * allocated level reached in it (with the time and the bytes by category at
 * that moment), so a peak is never lost however many events fall into one
 * column; reserved, device and pinned host memory keep their highest level. */
#include <stdlib.h>
#include <string.h>

#include "decode.h"

#define NC (DSMT_BK_NCAT - 1) /* the allocated categories (cached aside) */
#define OTHER 10               /* dsmt_cat_name(10) == "other" */

/* The categories at a moment, adding up to the allocated level: bytes no
 * block accounts for are `other`; an excess (blocks from before a pause in
 * tracing, freed meanwhile) comes off `other`, then the largest. */
static void bk_at(const uint64_t *cat, uint64_t level, uint64_t *out)
{
	uint64_t sum = 0;
	for (unsigned k = 0; k < NC; k++)
		sum += out[k] = cat[k];
	if (level >= sum) {
		out[OTHER] += level - sum;
		return;
	}
	for (uint64_t excess = sum - level; excess;) {
		unsigned m = OTHER;
		if (!out[m])
			for (unsigned k = 0; k < NC; k++)
				if (out[k] > out[m])
					m = k;
		uint64_t x = out[m] < excess ? out[m] : excess;
		out[m] -= x;
		excess -= x;
	}
}

static size_t col_of(uint64_t ts, uint64_t t0, uint64_t t1, size_t ncol)
{
	if (ts <= t0)
		return 0;
	if (ts >= t1)
		return ncol - 1;
	return (size_t)((unsigned __int128)(ts - t0) * ncol / ((unsigned __int128)(t1 - t0) + 1));
}

static uint64_t col_start(size_t k, uint64_t t0, uint64_t t1, size_t ncol)
{
	return t0 + (uint64_t)((unsigned __int128)(t1 - t0) * k / ncol);
}

struct state {
	uint64_t cat[NC], alloc, res, dev, hp;
};

/* column k starts at the current state */
static void col_open(struct dsmt_scol *c, const struct state *s, uint64_t ts)
{
	for (int j = 0; j < 2; j++) {
		c->ts_ns[j] = ts;
		c->alloc[j] = s->alloc;
		bk_at(s->cat, s->alloc, c->cat[j]);
	}
	c->res = s->res;
	c->dev = s->dev;
	c->hp = s->hp;
}

int dsmt_series_build(const struct dsmt_tlent *e, size_t n, const struct dsmt_tlent *ch, size_t nch, unsigned dev1,
		      uint64_t t0, uint64_t t1, size_t ncol, struct dsmt_series *out)
{
	memset(out, 0, sizeof(*out));
	out->device = (int)dev1 - 1;
	if (t1 < t0)
		t1 = t0;
	out->t0_ns = t0;
	out->t1_ns = t1;
	if (!ncol)
		ncol = 1;
	if (!(out->col = calloc(ncol, sizeof(*out->col))))
		return -1;
	out->ncol = ncol;
	struct state s;
	memset(&s, 0, sizeof(s));
	uint8_t *blkcat = malloc(n ? n : 1); /* an A entry's block: its category now */
	if (!blkcat) {
		free(out->col);
		out->col = NULL;
		return -1;
	}
	size_t cur = 0, ci = 0;
	col_open(&out->col[0], &s, t0);
	out->peak_ns = t0;
	for (size_t i = 0; i < n; i++) {
		const struct dsmt_tlent *x = &e[i];
		for (; ci < nch && ch[ci].lvl <= i; ci++) { /* an interval begins: categories move */
			const struct dsmt_tlent *m = &ch[ci];
			if (m->dev1 != dev1 || m->blk >= n || e[m->blk].op != DSMT_TL_A || m->cat >= NC)
				continue;
			unsigned from = blkcat[m->blk];
			if (from < NC)
				s.cat[from] -= s.cat[from] < m->size ? s.cat[from] : m->size;
			s.cat[m->cat] += m->size;
			blkcat[m->blk] = m->cat;
		}
		if (x->dev1 != dev1 && x->op != DSMT_TL_H)
			continue;
		size_t k = col_of(x->ts_ns, t0, t1, ncol);
		while (cur < k) { /* columns without events hold the level */
			cur++;
			col_open(&out->col[cur], &s, col_start(cur, t0, t1, ncol));
		}
		switch (x->op) {
		case DSMT_TL_A:
			blkcat[i] = x->cat < NC ? x->cat : OTHER;
			s.cat[blkcat[i]] += x->size;
			s.alloc = x->lvl;
			break;
		case DSMT_TL_F: {
			unsigned c = x->blk < i && e[x->blk].op == DSMT_TL_A && e[x->blk].dev1 == dev1 ? blkcat[x->blk] : NC;
			if (c < NC)
				s.cat[c] -= s.cat[c] < x->size ? s.cat[c] : x->size;
			s.alloc = x->lvl;
			break;
		}
		case DSMT_TL_L: s.alloc = x->lvl; break;
		case DSMT_TL_R: s.res = x->lvl; break;
		case DSMT_TL_D: s.dev = x->lvl; break;
		case DSMT_TL_H: s.hp = x->lvl; break;
		default: continue;
		}
		struct dsmt_scol *c = &out->col[cur];
		uint64_t cs = col_start(cur, t0, t1, ncol), ts = x->ts_ns < cs ? cs : x->ts_ns;
		if (s.alloc > c->alloc[1]) {
			c->alloc[1] = s.alloc;
			c->ts_ns[1] = ts;
			bk_at(s.cat, s.alloc, c->cat[1]);
		}
		if (s.alloc < c->alloc[0]) {
			c->alloc[0] = s.alloc;
			c->ts_ns[0] = ts;
			bk_at(s.cat, s.alloc, c->cat[0]);
		}
		if (s.alloc > out->peak) {
			out->peak = s.alloc;
			out->peak_ns = ts;
		}
		if (s.res > c->res)
			c->res = s.res;
		if (s.dev > c->dev)
			c->dev = s.dev;
		if (s.hp > c->hp)
			c->hp = s.hp;
	}
	while (cur + 1 < ncol) {
		cur++;
		col_open(&out->col[cur], &s, col_start(cur, t0, t1, ncol));
	}
	free(blkcat);
	return 0;
}
