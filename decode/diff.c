/* dsmemdecode diff A B: two runs compared rank by rank (README, "diff").
 * Processes pair up by rank (one process on each side: those two); each
 * pair's intervals pair up by kind, number and device.  Sites are matched
 * across runs by their category and rendered frames (addresses move between
 * runs), or by address when they have no frames. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "decode.h"

enum { L_PEAK_ALLOC, L_END_ALLOC, L_PEAK_RES, L_END_RES, L_PEAK_DEV, L_END_DEV, NL };
static const char *const lv_key[NL] = {"peak_allocated", "end_allocated", "peak_reserved",
				       "end_reserved",   "peak_device",   "end_device"};

static void levels(const struct dsmt_process *p, const struct dsmt_row *r, uint64_t *v, int *known)
{
	const uint64_t x[NL] = {r->peak_alloc, r->end_alloc, r->peak_res, r->end_res, r->peak_dev, r->end_dev};
	for (int k = 0; k < NL; k++) {
		v[k] = x[k];
		known[k] = k < L_PEAK_DEV || p->has_drv;
	}
}

static const struct dsmt_row *find_row(const struct dsmt_process *p, const struct dsmt_row *w)
{
	for (size_t i = 0; i < p->nrows; i++)
		if (p->rows[i].kind == w->kind && p->rows[i].step == w->step && p->rows[i].device == w->device)
			return &p->rows[i];
	return NULL;
}

/* The MaxMemAllocated row: the step with the largest peak (the first such),
 * else (no steps) the interval with the largest peak */
static const struct dsmt_row *max_row(const struct dsmt_process *p)
{
	const struct dsmt_row *best = NULL;
	for (int steps = 1; steps >= 0 && !best; steps--)
		for (size_t i = 0; i < p->nrows; i++) {
			const struct dsmt_row *r = &p->rows[i];
			if ((steps && r->kind != DSMT_STEP) || (best && r->peak_alloc <= best->peak_alloc))
				continue;
			best = r;
		}
	return best;
}

/* ---- sites at the two peaks ---- */

struct sitechg {
	const struct dsmt_site *s; /* B's, else A's */
	unsigned cat;
	uint64_t a, b;
};

static int same_site(const struct dsmt_site *x, unsigned cx, const struct dsmt_site *y, unsigned cy)
{
	if (cx != cy || x->nframes != y->nframes)
		return 0;
	if (!x->nframes)
		return x->site == y->site;
	for (size_t k = 0; k < x->nframes; k++)
		if (strcmp(x->frames[k], y->frames[k]))
			return 0;
	return 1;
}

static const struct dsmt_site *site_of(const struct dsmt_process *p, const struct dsmt_top *t)
{
	static const struct dsmt_site none = {0};
	return t->site < p->nsites ? &p->sites[t->site] : &none;
}

static int64_t delta(const struct sitechg *c) { return (int64_t)(c->b - c->a); }

static int cmp_chg(const void *x, const void *y)
{
	int64_t a = delta(x), b = delta(y);
	a = a < 0 ? -a : a;
	b = b < 0 ? -b : b;
	return a > b ? -1 : a < b;
}

/* The sites of the two peaks whose bytes differ, largest change first */
static struct sitechg *site_changes(const struct dsmt_process *pa, const struct dsmt_row *ra,
				    const struct dsmt_process *pb, const struct dsmt_row *rb, size_t *n)
{
	size_t na = ra ? ra->ntop : 0, nb = rb ? rb->ntop : 0, k = 0;
	struct sitechg *v = calloc(na + nb + 1, sizeof(*v));
	if (!v) {
		*n = 0;
		return NULL;
	}
	for (size_t i = 0; i < nb; i++)
		v[k++] = (struct sitechg){site_of(pb, &rb->top[i]), rb->top[i].cat, 0, rb->top[i].bytes};
	size_t nbk = k;
	for (size_t i = 0; i < na; i++) {
		const struct dsmt_site *s = site_of(pa, &ra->top[i]);
		size_t j = 0;
		while (j < nbk && !same_site(v[j].s, v[j].cat, s, ra->top[i].cat))
			j++;
		if (j < nbk)
			v[j].a += ra->top[i].bytes;
		else
			v[k++] = (struct sitechg){s, ra->top[i].cat, ra->top[i].bytes, 0};
	}
	size_t m = 0;
	for (size_t i = 0; i < k; i++)
		if (v[i].a != v[i].b)
			v[m++] = v[i];
	qsort(v, m, sizeof(*v), cmp_chg);
	*n = m;
	return v;
}

static const char *change_name(const struct sitechg *c)
{
	return !c->a ? "new" : !c->b ? "gone" : c->b > c->a ? "grew" : "shrank";
}

/* ---- pairs ---- */

struct pair {
	const struct dsmt_process *a, *b; /* one NULL: unmatched */
};

static size_t make_pairs(const struct dsmt_process *a, size_t na, const struct dsmt_process *b, size_t nb,
			 struct pair *out)
{
	size_t n = 0;
	if (na == 1 && nb == 1) {
		out[0] = (struct pair){a, b};
		return 1;
	}
	char *used = calloc(nb ? nb : 1, 1);
	if (!used)
		return 0;
	for (size_t i = 0; i < na; i++) {
		long long ra, rb;
		size_t j = nb;
		if (dsmt_meta_int(&a[i], "rank", &ra))
			for (j = 0; j < nb; j++)
				if (!used[j] && dsmt_meta_int(&b[j], "rank", &rb) && ra == rb)
					break;
		if (j < nb)
			used[j] = 1;
		out[n++] = (struct pair){&a[i], j < nb ? &b[j] : NULL};
	}
	for (size_t j = 0; j < nb; j++)
		if (!used[j])
			out[n++] = (struct pair){NULL, &b[j]};
	free(used);
	return n;
}

/* b - a, signed: "+N", "-N" or "0" (table); "N", "-N" (JSON) */
static const char *fmt_delta(char *buf, size_t n, uint64_t a, uint64_t b)
{
	int64_t d = (int64_t)(b - a);
	snprintf(buf, n, d > 0 ? "+%" PRId64 : "%" PRId64, d);
	return buf;
}
static const char *json_delta(char *buf, size_t n, uint64_t a, uint64_t b)
{
	snprintf(buf, n, "%" PRId64, (int64_t)(b - a));
	return buf;
}

/* ---- table ---- */

#define NCOL 11
static void table_pair(FILE *f, const struct pair *pr, int top)
{
	static const char *hdr[NCOL] = {"step",	 "device", "peak_alloc_A", "peak_alloc_B", "delta", "end_alloc_A",
					"end_alloc_B", "delta",  "peak_res_A",   "peak_res_B",   "delta"};
	const struct dsmt_process *pa = pr->a, *pb = pr->b;
	size_t nr = pa->nrows + pb->nrows, n = 0;
	char(*cells)[NCOL][32] = calloc(nr ? nr : 1, sizeof(*cells));
	if (!cells)
		return;
	size_t w[NCOL];
	for (int k = 0; k < NCOL; k++)
		w[k] = strlen(hdr[k]);
	for (int side = 0; side < 2; side++) { /* A's intervals (with B's), then B's alone */
		const struct dsmt_process *p = side ? pb : pa;
		for (size_t i = 0; i < p->nrows; i++) {
			const struct dsmt_row *r = &p->rows[i];
			const struct dsmt_row *ra = side ? find_row(pa, r) : r, *rb = side ? r : find_row(pb, r);
			if (side && ra)
				continue;
			char sb[24];
			snprintf(cells[n][0], 32, "%s", dsmt_row_label(r, sb, sizeof sb));
			snprintf(cells[n][1], 32, "%d", r->device);
			const uint64_t va[3] = {ra ? ra->peak_alloc : 0, ra ? ra->end_alloc : 0, ra ? ra->peak_res : 0};
			const uint64_t vb[3] = {rb ? rb->peak_alloc : 0, rb ? rb->end_alloc : 0, rb ? rb->peak_res : 0};
			for (int k = 0; k < 3; k++) { /* A, B, B - A ("-" where a side lacks the interval) */
				char *ca = cells[n][2 + 3 * k], *cb = cells[n][3 + 3 * k], *cd = cells[n][4 + 3 * k];
				if (ra)
					snprintf(ca, 32, "%" PRIu64, va[k]);
				else
					strcpy(ca, "-");
				if (rb)
					snprintf(cb, 32, "%" PRIu64, vb[k]);
				else
					strcpy(cb, "-");
				if (ra && rb)
					fmt_delta(cd, 32, va[k], vb[k]);
				else
					strcpy(cd, "-");
			}
			for (int k = 0; k < NCOL; k++)
				if (strlen(cells[n][k]) > w[k])
					w[k] = strlen(cells[n][k]);
			n++;
		}
	}
	for (int k = 0; k < NCOL; k++)
		fprintf(f, k ? "  %*s" : "%-*s", (int)w[k], hdr[k]);
	fputc('\n', f);
	for (size_t r = 0; r < n; r++) {
		for (int k = 0; k < NCOL; k++)
			fprintf(f, k ? "  %*s" : "%-*s", (int)w[k], cells[r][k]);
		fputc('\n', f);
	}
	free(cells);

	const struct dsmt_row *ma = max_row(pa), *mb = max_row(pb);
	char la[24], lb[24];
	fprintf(f, "allocated bytes by category at the MaxMemAllocated peak (A: %s, B: %s)\n",
		ma ? dsmt_row_label(ma, la, sizeof la) : "-", mb ? dsmt_row_label(mb, lb, sizeof lb) : "-");
	fprintf(f, "  %-19s  %14s  %14s  %14s\n", "category", "A", "B", "delta");
	for (unsigned c = 0; c <= DSMT_BK_NCAT; c++) {
		uint64_t x = 0, y = 0;
		if (c < DSMT_BK_NCAT) {
			x = ma ? ma->peak_bk.cat[c] : 0;
			y = mb ? mb->peak_bk.cat[c] : 0;
		} else {
			x = ma ? ma->peak_alloc : 0;
			y = mb ? mb->peak_alloc : 0;
		}
		if (c < DSMT_BK_NCAT && !x && !y)
			continue;
		char db[32];
		fprintf(f, "  %-19s  %14" PRIu64 "  %14" PRIu64 "  %14s\n", c < DSMT_BK_NCAT ? dsmt_cat_name(c) : "allocated",
			x, y, fmt_delta(db, sizeof db, x, y));
	}
	size_t nc;
	struct sitechg *ch = site_changes(pa, ma, pb, mb, &nc);
	fprintf(f, "sites at those peaks that changed (matched by category and frames), largest change first%s\n",
		nc ? "" : ": none");
	for (size_t i = 0; i < nc && i < (size_t)top; i++) {
		const struct sitechg *c = &ch[i];
		char db[32];
		fprintf(f, "  %-6s  %14" PRIu64 "  %14" PRIu64 "  %14s  %-19s", change_name(c), c->a, c->b,
			fmt_delta(db, sizeof db, c->a, c->b), dsmt_cat_name(c->cat));
		for (size_t k = 0; k < c->s->nframes && k < 3; k++)
			fprintf(f, "%s%s", k ? " < " : "  ", c->s->frames[k]);
		if (!c->s->nframes)
			fprintf(f, "  site 0x%" PRIx64, c->s->site);
		fputc('\n', f);
	}
	free(ch);
}

/* ---- JSON ---- */

static void json_levels(FILE *f, const struct dsmt_process *p, const struct dsmt_row *r)
{
	if (!r) {
		fputs("null", f);
		return;
	}
	uint64_t v[NL];
	int known[NL];
	levels(p, r, v, known);
	fputc('{', f);
	for (int k = 0; k < NL; k++) {
		if (known[k])
			fprintf(f, "%s\"%s\": %" PRIu64, k ? ", " : "", lv_key[k], v[k]);
		else
			fprintf(f, "%s\"%s\": null", k ? ", " : "", lv_key[k]);
	}
	fputc('}', f);
}

static void json_level_delta(FILE *f, const struct dsmt_process *pa, const struct dsmt_row *ra,
			     const struct dsmt_process *pb, const struct dsmt_row *rb)
{
	if (!ra || !rb) {
		fputs("null", f);
		return;
	}
	uint64_t va[NL], vb[NL];
	int ka[NL], kb[NL];
	levels(pa, ra, va, ka);
	levels(pb, rb, vb, kb);
	fputc('{', f);
	for (int k = 0; k < NL; k++) {
		char db[32];
		fprintf(f, "%s\"%s\": %s", k ? ", " : "", lv_key[k], ka[k] && kb[k] ? json_delta(db, sizeof db, va[k], vb[k]) : "null");
	}
	fputc('}', f);
}

/* {"parameters": d, ..., "cached": d} */
static void json_bk_delta(FILE *f, const struct dsmt_bk *a, const struct dsmt_bk *b)
{
	fputc('{', f);
	for (unsigned c = 0; c < DSMT_BK_NCAT; c++) {
		char db[32];
		fprintf(f, "%s\"%s\": %s", c ? ", " : "", dsmt_cat_name(c), json_delta(db, sizeof db, a->cat[c], b->cat[c]));
	}
	fputc('}', f);
}

static void json_bk(FILE *f, const struct dsmt_bk *a)
{
	fputc('{', f);
	for (unsigned c = 0; c < DSMT_BK_NCAT; c++)
		fprintf(f, "%s\"%s\": %" PRIu64, c ? ", " : "", dsmt_cat_name(c), a->cat[c]);
	fputc('}', f);
}

static void json_interval(FILE *f, const struct pair *pr, const struct dsmt_row *w, const struct dsmt_row *ra,
			  const struct dsmt_row *rb, int *first)
{
	char lb[24];
	struct dsmt_row tmp = *w;
	tmp.paused = 0;
	fprintf(f, "%s\n      {\"interval\": ", *first ? "" : ",");
	*first = 0;
	dsmt_json_str(f, dsmt_row_label(&tmp, lb, sizeof lb));
	fprintf(f, ", \"device\": %d,\n       \"a\": ", w->device);
	json_levels(f, pr->a, ra);
	fputs(",\n       \"b\": ", f);
	json_levels(f, pr->b, rb);
	fputs(",\n       \"delta\": ", f);
	json_level_delta(f, pr->a, ra, pr->b, rb);
	fputs(",\n       \"peak_breakdown_delta\": ", f);
	if (ra && rb && pr->a->attrib && pr->b->attrib)
		json_bk_delta(f, &ra->peak_bk, &rb->peak_bk);
	else
		fputs("null", f);
	fputs(",\n       \"end_breakdown_delta\": ", f);
	if (ra && rb && pr->a->attrib && pr->b->attrib)
		json_bk_delta(f, &ra->end_bk, &rb->end_bk);
	else
		fputs("null", f);
	fputc('}', f);
}

static void json_max(FILE *f, const struct dsmt_row *m)
{
	if (!m) {
		fputs("null", f);
		return;
	}
	char lb[24];
	struct dsmt_row tmp = *m;
	tmp.paused = 0;
	fputs("{\"interval\": ", f);
	dsmt_json_str(f, dsmt_row_label(&tmp, lb, sizeof lb));
	fprintf(f, ", \"device\": %d, \"peak_allocated\": %" PRIu64 ", \"breakdown\": ", m->device, m->peak_alloc);
	json_bk(f, &m->peak_bk);
	fputc('}', f);
}

static void json_pair(FILE *f, const struct pair *pr, int top)
{
	const struct dsmt_process *pa = pr->a, *pb = pr->b;
	long long r;
	fputs("\n   {\"rank\": ", f);
	if (dsmt_meta_int(pa, "rank", &r))
		fprintf(f, "%lld", r);
	else
		fputs("null", f);
	fputs(", \"a\": ", f);
	dsmt_json_str(f, pa->file);
	fputs(", \"b\": ", f);
	dsmt_json_str(f, pb->file);
	fputs(",\n    \"intervals\": [", f);
	int first = 1;
	for (size_t i = 0; i < pa->nrows; i++)
		json_interval(f, pr, &pa->rows[i], &pa->rows[i], find_row(pb, &pa->rows[i]), &first);
	for (size_t i = 0; i < pb->nrows; i++)
		if (!find_row(pa, &pb->rows[i]))
			json_interval(f, pr, &pb->rows[i], NULL, &pb->rows[i], &first);
	const struct dsmt_row *ma = max_row(pa), *mb = max_row(pb);
	fputs("],\n    \"max_mem_allocated\": {\"a\": ", f);
	json_max(f, ma);
	fputs(", \"b\": ", f);
	json_max(f, mb);
	fputs(", \"delta\": ", f);
	if (ma && mb) {
		char db[32];
		fprintf(f, "{\"peak_allocated\": %s, \"breakdown\": ", json_delta(db, sizeof db, ma->peak_alloc, mb->peak_alloc));
		json_bk_delta(f, &ma->peak_bk, &mb->peak_bk);
		fputc('}', f);
	} else {
		fputs("null", f);
	}
	fputs("},\n    \"sites\": [", f);
	size_t nc;
	struct sitechg *ch = site_changes(pa, ma, pb, mb, &nc);
	for (size_t i = 0; i < nc && i < (size_t)top; i++) {
		const struct sitechg *c = &ch[i];
		char db[32];
		fprintf(f, "%s\n     {\"change\": \"%s\", \"category\": \"%s\", \"a_bytes\": %" PRIu64 ", \"b_bytes\": %" PRIu64
			   ", \"delta\": %s, \"site\": \"0x%" PRIx64 "\", \"frames\": [",
			i ? "," : "", change_name(c), dsmt_cat_name(c->cat), c->a, c->b, json_delta(db, sizeof db, c->a, c->b),
			c->s->site);
		for (size_t k = 0; k < c->s->nframes; k++) {
			if (k)
				fputs(", ", f);
			dsmt_json_str(f, c->s->frames[k]);
		}
		fputs("]}", f);
	}
	free(ch);
	fputs("]}", f);
}

static void json_side(FILE *f, const struct dsmt_process *p, size_t n)
{
	fputs("{\"run_id\": ", f);
	dsmt_json_str(f, n ? dsmt_meta_get(&p[0], "run_id") : NULL);
	fputs(", \"files\": [", f);
	for (size_t i = 0; i < n; i++) {
		if (i)
			fputs(", ", f);
		dsmt_json_str(f, p[i].file);
	}
	fputs("]}", f);
}

void dsmt_write_diff(FILE *f, const struct dsmt_process *a, size_t na, const struct dsmt_process *b, size_t nb,
		     int json, int top)
{
	struct pair *pr = calloc(na + nb + 1, sizeof(*pr));
	if (!pr)
		return;
	size_t np = make_pairs(a, na, b, nb, pr);
	if (json) {
		fputs("{\"format\": \"dsmemdecode-diff/1\",\n \"a\": ", f);
		json_side(f, a, na);
		fputs(",\n \"b\": ", f);
		json_side(f, b, nb);
		fputs(",\n \"pairs\": [", f);
		int first = 1;
		for (size_t i = 0; i < np; i++) {
			if (!pr[i].a || !pr[i].b)
				continue;
			fputs(first ? "" : ",", f);
			first = 0;
			json_pair(f, &pr[i], top);
		}
		for (int side = 0; side < 2; side++) {
			fprintf(f, "],\n \"only_in_%s\": [", side ? "b" : "a");
			first = 1;
			for (size_t i = 0; i < np; i++) {
				const struct dsmt_process *p = side ? pr[i].b : pr[i].a;
				if (!p || (pr[i].a && pr[i].b))
					continue;
				fputs(first ? "" : ", ", f);
				first = 0;
				dsmt_json_str(f, p->file);
			}
		}
		fputs("]}\n", f);
		free(pr);
		return;
	}
	const char *ida = na ? dsmt_meta_get(&a[0], "run_id") : NULL, *idb = nb ? dsmt_meta_get(&b[0], "run_id") : NULL;
	fprintf(f, "A: run %s, %zu process%s   B: run %s, %zu process%s\n", ida ? ida : "(none)", na, na == 1 ? "" : "es",
		idb ? idb : "(none)", nb, nb == 1 ? "" : "es");
	for (size_t i = 0; i < np; i++) {
		long long r;
		if (!pr[i].a || !pr[i].b) {
			const struct dsmt_process *p = pr[i].a ? pr[i].a : pr[i].b;
			fprintf(f, "\nonly in %s: %s", pr[i].a ? "A" : "B", p->file);
			if (dsmt_meta_int(p, "rank", &r))
				fprintf(f, " (rank %lld)", r);
			fputc('\n', f);
			continue;
		}
		fputc('\n', f);
		if (dsmt_meta_int(pr[i].a, "rank", &r))
			fprintf(f, "rank %lld: ", r);
		fprintf(f, "A %s   B %s\n", pr[i].a->file, pr[i].b->file);
		table_pair(f, &pr[i], top);
	}
	free(pr);
}
