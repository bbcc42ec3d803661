/* dsmt_series_build: downsampling to pixel columns keeps every column's
 * lowest and highest allocated level (so the run's peak survives however
 * many events share its column), with the categories at those moments.
 * Checked against a brute-force replay of random logs with far more events
 * than columns, category changes at interval starts, and a second device
 * whose entries must not leak in. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "decode.h"

#define NCAT (DSMT_BK_NCAT - 1)

static uint64_t rnd_state = 88172645463325252ULL;
static uint64_t rnd(void)
{
	rnd_state ^= rnd_state << 13;
	rnd_state ^= rnd_state >> 7;
	rnd_state ^= rnd_state << 17;
	return rnd_state;
}

static void run(size_t n, size_t ncol, int spike)
{
	struct dsmt_tlent *e = calloc(n, sizeof(*e));
	struct dsmt_tlent *ch = calloc(n, sizeof(*ch));
	uint32_t *live = calloc(n, sizeof(*live));
	uint8_t *cur = calloc(n, 1); /* brute force: a block's category now */
	size_t nlive = 0, nch = 0;
	uint64_t t0 = 5000000000ULL, t1 = t0 + 1000000000ULL, ts = t0, level[3] = {0};
	for (size_t i = 0; i < n; i++) {
		struct dsmt_tlent *x = &e[i];
		ts += rnd() % (2 * (t1 - t0) / n);
		if (ts > t1)
			ts = t1;
		x->ts_ns = ts;
		x->dev1 = rnd() % 8 ? 1 : 2;
		if (spike && i == n / 3) { /* one huge block, freed at once */
			x->dev1 = 1;
			x->op = DSMT_TL_A;
			x->size = 1ULL << 40;
			x->cat = 3;
			level[1] += x->size;
			x->lvl = level[1];
			live[nlive++] = (uint32_t)i;
			continue;
		}
		if (nlive && (rnd() % 2 || nlive > 500 || (spike && i == n / 3 + 1))) {
			size_t k = spike && i == n / 3 + 1 ? nlive - 1 : rnd() % nlive;
			uint32_t a = live[k];
			live[k] = live[--nlive];
			x->op = DSMT_TL_F;
			x->dev1 = e[a].dev1;
			x->size = e[a].size;
			x->blk = a;
			level[x->dev1] -= x->size;
			x->lvl = level[x->dev1];
		} else {
			x->op = DSMT_TL_A;
			x->size = (rnd() % 4096 + 1) * 512;
			x->cat = (uint8_t)(rnd() % NCAT);
			level[x->dev1] += x->size;
			x->lvl = level[x->dev1];
			live[nlive++] = (uint32_t)i;
		}
		if (i % 1000 == 999) /* an interval starts: some live blocks change category */
			for (size_t k = 0; k < nlive; k += 7) {
				uint32_t a = live[k];
				ch[nch++] = (struct dsmt_tlent){ts, e[a].size, i + 1, a, e[a].dev1, DSMT_TL_C,
								(uint8_t)(rnd() % NCAT), 0};
			}
	}
	struct dsmt_series s;
	CHECK(dsmt_series_build(e, n, ch, nch, 1, t0, t1, ncol, &s) == 0);
	CHECK(s.ncol == ncol && s.device == 0);
	/* brute force */
	uint64_t cat[NCAT] = {0}, lvl = 0, peak = 0, peak_ns = t0;
	size_t col = 0, ci = 0;
	uint64_t lo = 0, hi = 0, lo_cat[NCAT] = {0}, hi_cat[NCAT] = {0};
	int bad_cols = 0, bad_cats = 0;
#define CLOSE_COL()                                                                              \
	do {                                                                                     \
		const struct dsmt_scol *c = &s.col[col];                                         \
		if (c->alloc[0] != lo || c->alloc[1] != hi)                                      \
			bad_cols++;                                                              \
		if (memcmp(c->cat[1], hi_cat, sizeof(hi_cat)) || memcmp(c->cat[0], lo_cat, sizeof(lo_cat))) \
			bad_cats++;                                                              \
	} while (0)
	lo = hi = 0;
	for (size_t i = 0; i < n; i++) {
		for (; ci < nch && ch[ci].lvl <= i; ci++)
			if (ch[ci].dev1 == 1) {
				cat[cur[ch[ci].blk]] -= ch[ci].size;
				cat[ch[ci].cat] += ch[ci].size;
				cur[ch[ci].blk] = ch[ci].cat;
			}
		if (e[i].dev1 != 1)
			continue;
		size_t k = (size_t)((unsigned __int128)(e[i].ts_ns - t0) * ncol / ((t1 - t0) + 1));
		if (k >= ncol)
			k = ncol - 1;
		while (col < k) {
			CLOSE_COL();
			col++;
			lo = hi = lvl;
			memcpy(lo_cat, cat, sizeof(cat));
			memcpy(hi_cat, cat, sizeof(cat));
		}
		if (e[i].op == DSMT_TL_A) {
			cur[i] = e[i].cat;
			cat[e[i].cat] += e[i].size;
		} else {
			cat[cur[e[i].blk]] -= e[i].size;
		}
		lvl = e[i].lvl;
		if (lvl > hi) {
			hi = lvl;
			memcpy(hi_cat, cat, sizeof(cat));
		}
		if (lvl < lo) {
			lo = lvl;
			memcpy(lo_cat, cat, sizeof(cat));
		}
		if (lvl > peak) {
			peak = lvl;
			peak_ns = e[i].ts_ns;
		}
	}
	CLOSE_COL();
	CHECK(bad_cols == 0);
	CHECK(bad_cats == 0);
	CHECK(s.peak == peak);
	CHECK(s.peak_ns == peak_ns);
	if (spike)
		CHECK(peak >= (1ULL << 40));
	uint64_t top = 0;
	for (size_t k = 0; k < ncol; k++) {
		uint64_t sum = 0;
		for (int q = 0; q < NCAT; q++)
			sum += s.col[k].cat[1][q];
		CHECK(sum == s.col[k].alloc[1]);
		if (s.col[k].alloc[1] > top)
			top = s.col[k].alloc[1];
		CHECK(s.col[k].alloc[0] <= s.col[k].alloc[1]);
	}
	CHECK(top == peak); /* the peak survives downsampling */
	free(s.col);
	free(e);
	free(ch);
	free(live);
	free(cur);
}

int main(void)
{
	run(400000, 100, 1);  /* 4000 events per column, one spike of one event */
	run(200000, 1000, 0);
	run(50, 1000, 0);     /* fewer events than columns: most columns carry the level */
	/* no entries: every column is 0 */
	struct dsmt_series s;
	CHECK(dsmt_series_build(NULL, 0, NULL, 0, 1, 10, 20, 8, &s) == 0);
	for (size_t k = 0; k < s.ncol; k++)
		CHECK(s.col[k].alloc[1] == 0);
	CHECK(s.peak == 0);
	free(s.col);
	return CHECK_DONE();
}
