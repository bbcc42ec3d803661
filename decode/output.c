/* Reports: JSON (dsmemdecode-steps/3), aligned table (+ the attribution
 * sections with --breakdown), CSV. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "decode.h"

void dsmt_json_str(FILE *f, const char *s)
{
	if (!s) {
		fputs("null", f);
		return;
	}
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(f, "\\%c", *p);
		else if (*p < 0x20)
			fprintf(f, "\\u%04x", *p);
		else
			fputc(*p, f);
	}
	fputc('"', f);
}

/* A META value that is a decimal integer, as JSON (else null). */
static void json_int_meta(FILE *f, const struct dsmt_process *p, const char *key)
{
	const char *v = dsmt_meta_get(p, key);
	char *e;
	if (v && *v) {
		long long x = strtoll(v, &e, 10);
		if (!*e) {
			fprintf(f, "%lld", x);
			return;
		}
	}
	fputs("null", f);
}

static void json_opt(FILE *f, const char *key, int known, uint64_t v)
{
	if (known)
		fprintf(f, ", \"%s\": %" PRIu64, key, v);
	else
		fprintf(f, ", \"%s\": null", key);
}

/* decimal digits of v into the end of buf; returns the first */
static char *u64_dec(char *end, uint64_t v)
{
	do
		*--end = (char)('0' + v % 10);
	while (v /= 10);
	return end;
}

/* {"parameters": N, ..., "cached": N, "temporaries_by_phase": {...}} (one
 * per row and interval: built in a buffer, it is most of a large report) */
static void json_bk(FILE *f, const struct dsmt_bk *b)
{
	char buf[1024], num[24], *o = buf;
	*o++ = '{';
	for (unsigned k = 0; k < DSMT_BK_NCAT; k++) {
		const char *n = dsmt_cat_name(k);
		if (k) {
			*o++ = ',';
			*o++ = ' ';
		}
		*o++ = '"';
		size_t l = strlen(n);
		memcpy(o, n, l);
		o += l;
		memcpy(o, "\": ", 3);
		o += 3;
		char *d = u64_dec(num + sizeof(num), b->cat[k]);
		memcpy(o, d, (size_t)(num + sizeof(num) - d));
		o += num + sizeof(num) - d;
	}
	fwrite(buf, 1, (size_t)(o - buf), f);
	fputs(", \"temporaries_by_phase\": {", f);
	int first = 1;
	for (unsigned k = 1; k < DSMT_BK_NPHASE; k++) {
		if (!b->tmp_phase[k])
			continue;
		fprintf(f, "%s\"%s\": %" PRIu64, first ? "" : ", ", dsmt_phase_name(k), b->tmp_phase[k]);
		first = 0;
	}
	fputs("}}", f);
}

static void json_strs(FILE *f, char *const *v, size_t n)
{
	fputc('[', f);
	for (size_t i = 0; i < n; i++) {
		if (i)
			fputs(", ", f);
		dsmt_json_str(f, v[i]);
	}
	fputc(']', f);
}

/* "site": "0x..", "pystack": N, "stack": N, "frames": [...], "python_frames": N */
static void json_site(FILE *f, const struct dsmt_process *p, size_t si)
{
	if (si >= p->nsites) {
		fputs("\"site\": null", f);
		return;
	}
	const struct dsmt_site *s = &p->sites[si];
	fprintf(f, "\"site\": \"0x%" PRIx64 "\", \"pystack\": %" PRIu64 ", \"stack\": %" PRIu64 ", \"frames\": ",
		s->site, s->pystack, s->stack);
	json_strs(f, s->frames, s->nframes);
	fprintf(f, ", \"python_frames\": %zu", s->npy);
}

static void json_row_attrib(FILE *f, const struct dsmt_process *p, const struct dsmt_row *r)
{
	if (!p->attrib) {
		fputs(", \"peak_breakdown\": null, \"end_breakdown\": null, \"peak_phase\": null", f);
		return;
	}
	fputs(",\n       \"peak_breakdown\": ", f);
	json_bk(f, &r->peak_bk);
	fputs(",\n       \"end_breakdown\": ", f);
	json_bk(f, &r->end_bk);
	fputs(",\n       \"peak_phase\": {\"phase\": ", f);
	dsmt_json_str(f, dsmt_phase_name(r->peak_phase));
	fprintf(f, ", \"ts_ns\": %" PRIu64 ", \"nvtx\": ", r->peak_ts_ns);
	json_strs(f, r->peak_nvtx, r->npeak_nvtx);
	fputc('}', f);
	if (p->peak_blocks) {
		fputs(",\n       \"peak_blocks\": [", f);
		for (size_t i = 0; i < r->nblocks; i++)
			fprintf(f, "%s{\"ptr\": %" PRIu64 ", \"size\": %" PRIu64 ", \"seq\": %" PRIu64 ", \"category\": \"%s\"}",
				i ? ", " : "", r->blocks[i].ptr, r->blocks[i].size, r->blocks[i].seq,
				dsmt_cat_name(r->blocks[i].cat));
		fputc(']', f);
	}
	if (!p->top)
		return;
	fputs(",\n       \"top_sites\": [", f);
	for (size_t i = 0; i < r->ntop; i++) {
		const struct dsmt_top *t = &r->top[i];
		fprintf(f, "%s\n        {\"bytes\": %" PRIu64 ", \"count\": %" PRIu64 ", \"category\": \"%s\", ",
			i ? "," : "", t->bytes, t->count, dsmt_cat_name(t->cat));
		json_site(f, p, t->site);
		fputc('}', f);
	}
	fputc(']', f);
}

static void json_row(FILE *f, const struct dsmt_process *p, const struct dsmt_row *r, int drv)
{
	fprintf(f, "{\"device\": %d, ", r->device);
	if (r->kind == DSMT_STEP)
		fprintf(f, "\"step\": %d, ", r->step);
	else if (r->kind == DSMT_EVAL)
		fprintf(f, "\"eval\": %d, ", r->step);
	fprintf(f,
		"\"start_ns\": %" PRIu64 ", \"end_ns\": %" PRIu64 ", \"peak_allocated\": %" PRIu64
		", \"end_allocated\": %" PRIu64 ", \"peak_reserved\": %" PRIu64 ", \"end_reserved\": %" PRIu64,
		r->start_ns, r->end_ns, r->peak_alloc, r->end_alloc, r->peak_res, r->end_res);
	json_opt(f, "peak_device", drv, r->peak_dev);
	json_opt(f, "end_device", drv, r->end_dev);
	json_opt(f, "peak_host_pinned", drv, r->peak_hp);
	json_opt(f, "end_host_pinned", drv, r->end_hp);
	json_opt(f, "peak_host_rss", r->has_peak_rss, r->peak_rss);
	json_opt(f, "end_host_rss", r->has_end_rss, r->end_rss);
	fprintf(f, ", \"allocs\": %" PRIu64 ", \"frees\": %" PRIu64 "%s", r->allocs, r->frees,
		r->paused ? ", \"paused\": true" : "");
	json_row_attrib(f, p, r);
	fputc('}', f);
}

static void json_rows(FILE *f, const struct dsmt_process *p, const char *name, int kind)
{
	fprintf(f, "     \"%s\": [", name);
	int first = 1;
	for (size_t i = 0; i < p->nrows; i++) {
		const struct dsmt_row *r = &p->rows[i];
		if (r->kind != kind)
			continue;
		fputs(first ? "\n      " : ",\n      ", f);
		first = 0;
		json_row(f, p, r, p->has_drv);
	}
	fputs("]", f);
}

static const char *rule_name(int rule)
{
	switch (rule) {
	case DSMT_RULE_MARKERS: return "markers";
	case DSMT_RULE_DEEPSPEED: return "deepspeed";
	default: return "whole-run";
	}
}

/* ---- order: run, rank, pid ---- */

/* A META value that is a decimal integer: 1 and *x, else 0. */
static int meta_int(const struct dsmt_process *p, const char *key, long long *x)
{
	const char *v = dsmt_meta_get(p, key);
	char *e;
	if (!v || !*v)
		return 0;
	*x = strtoll(v, &e, 10);
	return !*e;
}

struct order {
	const struct dsmt_process *p;
	size_t idx;
};

static int cmp_order(const void *va, const void *vb)
{
	const struct order *a = va, *b = vb;
	const char *ra = dsmt_meta_get(a->p, "run_id"), *rb = dsmt_meta_get(b->p, "run_id");
	if (!ra != !rb)
		return ra ? 1 : -1; /* no run id first */
	int c = ra ? strcmp(ra, rb) : 0;
	if (c)
		return c;
	long long xa = 0, xb = 0;
	int ha = meta_int(a->p, "rank", &xa), hb = meta_int(b->p, "rank", &xb);
	if (ha != hb)
		return ha - hb; /* no rank first */
	if (xa != xb)
		return xa < xb ? -1 : 1;
	ha = meta_int(a->p, "pid", &xa);
	hb = meta_int(b->p, "pid", &xb);
	if (ha != hb)
		return ha - hb;
	if (xa != xb)
		return xa < xb ? -1 : 1;
	return a->idx < b->idx ? -1 : a->idx > b->idx;
}

void dsmt_sort_processes(struct dsmt_process *ps, size_t n)
{
	struct order *o = malloc((n ? n : 1) * sizeof(*o));
	struct dsmt_process *tmp = malloc((n ? n : 1) * sizeof(*tmp));
	if (!o || !tmp) { /* keep the order given */
		free(o);
		free(tmp);
		return;
	}
	for (size_t i = 0; i < n; i++)
		o[i] = (struct order){&ps[i], i};
	qsort(o, n, sizeof(*o), cmp_order);
	for (size_t i = 0; i < n; i++)
		tmp[i] = *o[i].p;
	memcpy(ps, tmp, n * sizeof(*ps));
	free(o);
	free(tmp);
}

static int same_run(const struct dsmt_process *a, const struct dsmt_process *b)
{
	const char *ra = dsmt_meta_get(a, "run_id"), *rb = dsmt_meta_get(b, "run_id");
	return !ra == !rb && (!ra || !strcmp(ra, rb));
}

static const char *via_json(uint64_t via)
{
	switch (via) {
	case 0: return "none";
	case 1: return "cupti";
	case 2: return "dlsym";
	case 3: return "activity";
	default: return NULL;
	}
}

static const char *reason_json(uint64_t r)
{
	static const char *const n[] = {NULL, "start", "yield", "refused", "no_cupti", "disabled", "foreign"};
	return r < sizeof(n) / sizeof(n[0]) ? n[r] : NULL;
}

/* a known name as a string, else the number */
static void json_name_or_num(FILE *f, const char *name, uint64_t v)
{
	if (name)
		fprintf(f, "\"%s\"", name);
	else
		fprintf(f, "%" PRIu64, v);
}

/* "driver": null without driver data, else sources, op counts, breakdown */
static void json_driver(FILE *f, const struct dsmt_process *p)
{
	fputs(",\n     \"driver\": ", f);
	if (!p->has_drv) {
		fputs("null", f);
		return;
	}
	fputs("{\"sources\": [", f);
	for (size_t i = 0; i < p->nsources; i++) {
		const struct dsmt_source *s = &p->sources[i];
		fprintf(f, "%s{\"seq\": %" PRIu64 ", \"ts_ns\": %" PRIu64 ", \"via\": ", i ? ", " : "", s->seq,
			s->ts_ns);
		json_name_or_num(f, via_json(s->via), s->via);
		fputs(", \"reason\": ", f);
		json_name_or_num(f, reason_json(s->reason), s->reason);
		fputs(", \"name\": ", f);
		dsmt_json_str(f, s->name);
		fputc('}', f);
	}
	fputs("],\n      \"events\": {", f);
	int first = 1;
	for (unsigned op = 0; op < DSMT_DRV_OPS; op++) {
		if (!p->drv_ops[op])
			continue;
		const char *n = dsmt_drv_op_name(op);
		if (n)
			fprintf(f, "%s\"%s\": %" PRIu64, first ? "" : ", ", n, p->drv_ops[op]);
		else if (op == DSMT_DRV_OPS - 1)
			fprintf(f, "%s\"op_%u_or_more\": %" PRIu64, first ? "" : ", ", op, p->drv_ops[op]);
		else
			fprintf(f, "%s\"op_%u\": %" PRIu64, first ? "" : ", ", op, p->drv_ops[op]);
		first = 0;
	}
	fputs("},\n      \"device_breakdown\": [", f);
	for (size_t i = 0; i < p->nbk; i++) {
		const struct dsmt_breakdown *b = &p->bk[i];
		fprintf(f, "%s\n       {\"device\": %d, \"peak_device\": %" PRIu64, i ? "," : "", b->device,
			b->peak_device);
		json_opt(f, "at_ns", b->at_known, b->at_ns);
		fprintf(f, ", \"allocated\": %" PRIu64 ", \"cached\": %" PRId64 ", \"reserved\": %" PRIu64
			   ", \"nccl\": %" PRIu64 ", \"workspace\": %" PRIu64 ", \"statics\": %" PRIu64
			   ", \"managed\": %" PRIu64 ", \"other\": %" PRIu64 ", \"imported\": %" PRIu64,
			b->allocated, (int64_t)(b->reserved - b->allocated), b->reserved, b->nccl, b->workspace,
			b->statics, b->managed, b->other, b->imported);
		if (b->has_sample)
			fprintf(f, ", \"context\": %" PRId64 ", \"nvml_used\": %" PRIu64, b->context, b->nvml_used);
		else
			fputs(", \"context\": null, \"nvml_used\": null", f);
		fputs(",\n        \"reserved_breakdown\": ", f);
		if (b->has_rbk)
			json_bk(f, &b->rbk);
		else
			fputs("null", f);
		fputc('}', f);
	}
	fputs("]}", f);
}

/* "growth": sites whose allocations of consecutive steps survive to the end */
static void json_growth(FILE *f, const struct dsmt_process *p)
{
	fputs(",\n     \"growth\": ", f);
	if (!p->attrib) {
		fputs("null", f);
		return;
	}
	fputc('[', f);
	for (size_t i = 0; i < p->ngrowth; i++) {
		const struct dsmt_growth *g = &p->growth[i];
		fprintf(f, "%s\n      {\"device\": %d, \"bytes\": %" PRIu64 ", \"category\": \"%s\", \"first_step\": %d"
			   ", \"last_step\": %d, \"per_step\": [",
			i ? "," : "", g->device, g->bytes, dsmt_cat_name(g->cat), g->first_step, g->last_step);
		for (int k = 0; k <= g->last_step - g->first_step; k++)
			fprintf(f, "%s%" PRIu64, k ? ", " : "", g->per_step[k]);
		fputs("], ", f);
		json_site(f, p, g->site);
		fputc('}', f);
	}
	fputc(']', f);
}

/* "host_memory": null without HOST records, else the number of samples,
 * the largest RSS and virtual size, and (attribution) the largest RSS
 * sampled in each phase that has samples */
static void json_host_memory(FILE *f, const struct dsmt_process *p)
{
	fputs(",\n     \"host_memory\": ", f);
	if (!p->host_samples) {
		fputs("null", f);
		return;
	}
	fprintf(f, "{\"samples\": %" PRIu64 ", \"peak_rss\": %" PRIu64 ", \"peak_vsz\": %" PRIu64
		   ", \"phase_peak_rss\": ",
		p->host_samples, p->host_peak_rss, p->host_peak_vsz);
	dsmt_json_phase_rss(f, p);
	fputc('}', f);
}

/* The largest RSS sampled in each phase that has samples, as a JSON object
 * ({"init": ..., "forward": ...}); null without attribution */
void dsmt_json_phase_rss(FILE *f, const struct dsmt_process *p)
{
	if (!p->attrib) {
		fputs("null", f);
		return;
	}
	fputc('{', f);
	int first = 1;
	for (unsigned ph = 1; ph < DSMT_BK_NPHASE; ph++) {
		if (!p->phase_rss_n[ph])
			continue;
		fprintf(f, "%s\"%s\": %" PRIu64, first ? "" : ", ", dsmt_phase_name(ph), p->phase_rss[ph]);
		first = 0;
	}
	fputc('}', f);
}

static const char *kind_name(int kind)
{
	switch (kind) {
	case DSMT_INIT: return "init";
	case DSMT_STEP: return "step";
	case DSMT_EVAL: return "eval";
	default: return "tail";
	}
}

/* "oom_reports" (only when the trace has OOM records): the first
 * DSMT_OOM_MAX of them, what was live at each */
static void json_ooms(FILE *f, const struct dsmt_process *p)
{
	if (!p->noom)
		return;
	fputs(",\n     \"oom_reports\": [", f);
	for (size_t i = 0; i < p->noom; i++) {
		const struct dsmt_oom *o = &p->oom[i];
		fprintf(f,
			"%s{\"device\": %d, \"interval\": \"%s\", \"step\": %d, \"ts_ns\": %" PRIu64
			", \"requested\": %" PRIu64 ", \"torch_allocated\": %" PRIu64 ", \"torch_reserved\": %" PRIu64
			", \"allocated\": %" PRIu64 ", \"reserved\": %" PRIu64 ", \"breakdown\": ",
			i ? ",\n       " : "\n       ", o->device, kind_name(o->kind), o->step, o->ts_ns, o->requested,
			o->torch_alloc, o->torch_res, o->alloc, o->res);
		if (o->has_bk)
			json_bk(f, &o->bk);
		else
			fputs("null", f);
		fputc('}', f);
	}
	fputc(']', f);
}

/* One line per reported OOM under a process's table: where, what was asked
 * for, the allocator's totals against ours, and the largest live categories */
static void table_ooms(FILE *f, const struct dsmt_process *p)
{
	for (size_t i = 0; i < p->noom; i++) {
		const struct dsmt_oom *o = &p->oom[i];
		char where[32];
		if (o->kind == DSMT_STEP || o->kind == DSMT_EVAL)
			snprintf(where, sizeof where, "%s %d", kind_name(o->kind), o->step);
		else
			snprintf(where, sizeof where, "%s", kind_name(o->kind));
		fprintf(f,
			"OOM %zu: device %d in %s: requested %" PRIu64 " B (%.2f GiB) with %" PRIu64
			" allocated (allocator: %" PRIu64 "), %" PRIu64 " reserved (allocator: %" PRIu64 ")",
			i + 1, o->device, where, o->requested, (double)o->requested / 1073741824.0, o->alloc,
			o->torch_alloc, o->res, o->torch_res);
		if (o->has_bk) {
			fputs("; live, GiB:", f);
			unsigned used[DSMT_BK_NCAT] = {0};
			for (int n = 0; n < 6; n++) {
				int best = -1;
				for (unsigned c = 0; c < DSMT_BK_NCAT; c++)
					if (!used[c] && o->bk.cat[c] && (best < 0 || o->bk.cat[c] > o->bk.cat[best]))
						best = (int)c;
				if (best < 0)
					break;
				used[best] = 1;
				fprintf(f, "%s %s %.2f", n ? "," : "", dsmt_cat_name((unsigned)best),
					(double)o->bk.cat[best] / 1073741824.0);
			}
		}
		fputc('\n', f);
	}
	if (p->ooms > p->noom)
		fprintf(f, "(%" PRIu64 " OOM events in all; the first %zu shown)\n", p->ooms, p->noom);
}

void dsmt_write_json(FILE *f, const struct dsmt_process *ps, size_t n)
{
	fputs("{\"format\": \"dsmemdecode-steps/3\",\n \"processes\": [", f);
	for (size_t i = 0; i < n; i++) {
		const struct dsmt_process *p = &ps[i];
		fputs(i ? ",\n    {" : "\n    {", f);
		fputs("\"file\": ", f);
		dsmt_json_str(f, p->file);
		fputs(", \"host\": ", f);
		dsmt_json_str(f, dsmt_meta_get(p, "host"));
		fputs(", \"pid\": ", f);
		json_int_meta(f, p, "pid");
		fputs(", \"rank\": ", f);
		json_int_meta(f, p, "rank");
		fputs(", \"world_size\": ", f);
		json_int_meta(f, p, "world_size");
		fputs(", \"run_id\": ", f);
		dsmt_json_str(f, dsmt_meta_get(p, "run_id"));
		fprintf(f, ",\n     \"truncated\": %s, \"damaged\": %s, \"events\": %" PRIu64 ", \"ooms\": %" PRIu64
			   ", \"lost_events\": %" PRIu64 ", \"missing_events\": %" PRIu64 ",\n",
			p->truncated ? "true" : "false", p->damaged ? "true" : "false", p->events, p->ooms,
			p->lost, p->missing);
		fprintf(f, "     \"step_rule\": \"%s\", \"grad_accum\": ", rule_name(p->rule));
		if (p->rule == DSMT_RULE_DEEPSPEED)
			fprintf(f, "%d,\n", p->grad_accum);
		else
			fputs("null,\n", f);
		json_rows(f, p, "steps", DSMT_STEP);
		fputs(",\n", f);
		json_rows(f, p, "init", DSMT_INIT);
		fputs(",\n", f);
		json_rows(f, p, "tail", DSMT_TAIL);
		fputs(",\n", f);
		json_rows(f, p, "eval", DSMT_EVAL);
		json_driver(f, p);
		json_growth(f, p);
		json_host_memory(f, p);
		json_ooms(f, p);
		fputs("}", f);
	}
	fputs("]}\n", f);
}

/* init, 1, 2, ..., eval1, ..., tail; a `*` after an interval that overlaps
 * a pause in tracing */
const char *dsmt_row_label(const struct dsmt_row *r, char *buf, size_t n)
{
	const char *star = r->paused ? "*" : "";
	switch (r->kind) {
	case DSMT_INIT: snprintf(buf, n, "init%s", star); break;
	case DSMT_TAIL: snprintf(buf, n, "tail%s", star); break;
	case DSMT_EVAL: snprintf(buf, n, "eval%d%s", r->step, star); break;
	default: snprintf(buf, n, "%d%s", r->step, star); break;
	}
	return buf;
}

/* "0-3,5": the ranks of processes [i, j) (sorted by rank), or "-" */
static void rank_list(FILE *f, const struct dsmt_process *ps, size_t i, size_t j)
{
	int any = 0;
	long long lo = 0, hi = 0, x;
	for (size_t k = i; k < j; k++) {
		if (!meta_int(&ps[k], "rank", &x))
			continue;
		if (any && x <= hi + 1) {
			if (x > hi)
				hi = x;
			continue;
		}
		if (any)
			fprintf(f, lo == hi ? "%lld," : "%lld-%lld,", lo, hi);
		lo = hi = x;
		any = 1;
	}
	if (any)
		fprintf(f, lo == hi ? "%lld" : "%lld-%lld", lo, hi);
	else
		fputc('-', f);
}

/* The heading of the run that starts at ps[i]; returns where it ends.  No
 * heading when no process has a run id (traces from before run ids). */
static size_t run_heading(FILE *f, const struct dsmt_process *ps, size_t n, size_t i)
{
	size_t j = i + 1;
	while (j < n && same_run(&ps[i], &ps[j]))
		j++;
	const char *id = dsmt_meta_get(&ps[i], "run_id");
	if (!id && !(j < n || i > 0))
		return j;
	if (i)
		fputc('\n', f);
	fprintf(f, "run %s: %zu process%s, ranks ", id ? id : "(none)", j - i, j - i == 1 ? "" : "es");
	rank_list(f, ps, i, j);
	fputc('\n', f);
	return j;
}

#define NCOL_BASE 10
#define NCOL 15 /* with the driver level */

void dsmt_write_table(FILE *f, const struct dsmt_process *ps, size_t n)
{
	static const char *hdr[NCOL] = {"step", "device", "peak_allocated", "end_allocated", "peak_reserved",
					"end_reserved", "allocs", "frees", "peak_alloc_MiB", "peak_res_MiB",
					"peak_device", "end_device", "peak_host_pinned", "end_host_pinned",
					"peak_dev_MiB"};
	size_t run_end = 0;
	for (size_t i = 0; i < n; i++) {
		const struct dsmt_process *p = &ps[i];
		const char *host = dsmt_meta_get(p, "host"), *pid = dsmt_meta_get(p, "pid"),
			   *rank = dsmt_meta_get(p, "rank");
		if (i == run_end)
			run_end = run_heading(f, ps, n, i);
		else if (i)
			fputc('\n', f);
		fprintf(f, "%s  host=%s pid=%s rank=%s%s%s\n", p->file, host ? host : "?", pid ? pid : "?",
			rank ? rank : "-", p->truncated ? "  (truncated)" : "", p->damaged ? "  (damaged)" : "");
		const int ncol = p->has_drv ? NCOL : NCOL_BASE; /* driver columns only with driver data */
		size_t w[NCOL];
		for (int k = 0; k < ncol; k++)
			w[k] = strlen(hdr[k]);
		char(*cells)[NCOL][32] = calloc(p->nrows ? p->nrows : 1, sizeof(*cells));
		if (!cells)
			return;
		for (size_t r = 0; r < p->nrows; r++) {
			const struct dsmt_row *x = &p->rows[r];
			char sb[16];
			snprintf(cells[r][0], 32, "%s", dsmt_row_label(x, sb, sizeof(sb)));
			snprintf(cells[r][1], 32, "%d", x->device);
			snprintf(cells[r][2], 32, "%" PRIu64, x->peak_alloc);
			snprintf(cells[r][3], 32, "%" PRIu64, x->end_alloc);
			snprintf(cells[r][4], 32, "%" PRIu64, x->peak_res);
			snprintf(cells[r][5], 32, "%" PRIu64, x->end_res);
			snprintf(cells[r][6], 32, "%" PRIu64, x->allocs);
			snprintf(cells[r][7], 32, "%" PRIu64, x->frees);
			snprintf(cells[r][8], 32, "%.1f", (double)x->peak_alloc / 1048576.0);
			snprintf(cells[r][9], 32, "%.1f", (double)x->peak_res / 1048576.0);
			snprintf(cells[r][10], 32, "%" PRIu64, x->peak_dev);
			snprintf(cells[r][11], 32, "%" PRIu64, x->end_dev);
			snprintf(cells[r][12], 32, "%" PRIu64, x->peak_hp);
			snprintf(cells[r][13], 32, "%" PRIu64, x->end_hp);
			snprintf(cells[r][14], 32, "%.1f", (double)x->peak_dev / 1048576.0);
			for (int k = 0; k < ncol; k++)
				if (strlen(cells[r][k]) > w[k])
					w[k] = strlen(cells[r][k]);
		}
		for (int k = 0; k < ncol; k++)
			fprintf(f, k ? "  %*s" : "%-*s", (int)w[k], hdr[k]);
		fputc('\n', f);
		for (size_t r = 0; r < p->nrows; r++) {
			for (int k = 0; k < ncol; k++)
				fprintf(f, k ? "  %*s" : "%-*s", (int)w[k], cells[r][k]);
			fputc('\n', f);
		}
		if (!p->nrows)
			fputs("(no device allocations)\n", f);
		table_ooms(f, p);
		free(cells);
	}
}

static void csv_field(FILE *f, const char *s)
{
	if (!s)
		return;
	if (!strpbrk(s, ",\"\n\r")) {
		fputs(s, f);
		return;
	}
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"')
			fputc('"', f);
		fputc(*s, f);
	}
	fputc('"', f);
}

void dsmt_write_csv(FILE *f, const struct dsmt_process *ps, size_t n)
{
	int drv = 0; /* driver columns when any process has driver data (empty cells for the others) */
	for (size_t i = 0; i < n; i++)
		drv |= ps[i].has_drv;
	fputs("file,host,pid,rank,step,device,start_ns,end_ns,peak_allocated,end_allocated,peak_reserved,"
	      "end_reserved,allocs,frees",
	      f);
	fputs(drv ? ",peak_device,end_device,peak_host_pinned,end_host_pinned\n" : "\n", f);
	for (size_t i = 0; i < n; i++) {
		const struct dsmt_process *p = &ps[i];
		for (size_t r = 0; r < p->nrows; r++) {
			const struct dsmt_row *x = &p->rows[r];
			char sb[16];
			csv_field(f, p->file);
			fputc(',', f);
			csv_field(f, dsmt_meta_get(p, "host"));
			fputc(',', f);
			csv_field(f, dsmt_meta_get(p, "pid"));
			fputc(',', f);
			csv_field(f, dsmt_meta_get(p, "rank"));
			fprintf(f,
				",%s,%d,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64
				",%" PRIu64 ",%" PRIu64,
				dsmt_row_label(x, sb, sizeof(sb)), x->device, x->start_ns, x->end_ns, x->peak_alloc,
				x->end_alloc, x->peak_res, x->end_res, x->allocs, x->frees);
			if (drv && p->has_drv)
				fprintf(f, ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64, x->peak_dev, x->end_dev,
					x->peak_hp, x->end_hp);
			else if (drv)
				fputs(",,,,", f);
			fputc('\n', f);
		}
	}
}

/* ---- table: attribution sections (--breakdown) ---- */

static const char *bk_hdr[DSMT_BK_NCAT] = {"params", "gathered", "master", "optim", "grads", "activ",
					   "temps", "buckets", "comm", "wkspace", "other", "cached"};

void dsmt_write_breakdown(FILE *f, const struct dsmt_process *ps, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const struct dsmt_process *p = &ps[i];
		fprintf(f, "\n%s  allocated bytes by category at each interval's peak (cached = reserved - allocated)\n",
			p->file);
		if (!p->attrib) {
			fputs("(no attribution)\n", f);
			continue;
		}
		enum { NC = 3 + DSMT_BK_NCAT };
		size_t w[NC];
		const char *h0[3] = {"step", "device", "phase"};
		for (int k = 0; k < NC; k++)
			w[k] = strlen(k < 3 ? h0[k] : bk_hdr[k - 3]);
		char(*cells)[NC][24] = calloc(p->nrows ? p->nrows : 1, sizeof(*cells));
		if (!cells)
			return;
		for (size_t r = 0; r < p->nrows; r++) {
			const struct dsmt_row *x = &p->rows[r];
			char sb[16];
			const char *ph = dsmt_phase_name(x->peak_phase);
			snprintf(cells[r][0], 24, "%s", dsmt_row_label(x, sb, sizeof(sb)));
			snprintf(cells[r][1], 24, "%d", x->device);
			snprintf(cells[r][2], 24, "%s", ph ? ph : "-");
			for (int k = 0; k < DSMT_BK_NCAT; k++)
				snprintf(cells[r][3 + k], 24, "%" PRIu64, x->peak_bk.cat[k]);
			for (int k = 0; k < NC; k++)
				if (strlen(cells[r][k]) > w[k])
					w[k] = strlen(cells[r][k]);
		}
		for (int k = 0; k < NC; k++)
			fprintf(f, k ? "  %*s" : "%-*s", (int)w[k], k < 3 ? h0[k] : bk_hdr[k - 3]);
		fputc('\n', f);
		for (size_t r = 0; r < p->nrows; r++) {
			for (int k = 0; k < NC; k++)
				fprintf(f, k ? "  %*s" : "%-*s", (int)w[k], cells[r][k]);
			fputc('\n', f);
		}
		free(cells);
		for (size_t r = 0; p->top && r < p->nrows; r++) {
			const struct dsmt_row *x = &p->rows[r];
			char sb[16];
			if (!x->ntop)
				continue;
			fprintf(f, "top sites at the peak of %s, device %d:\n", dsmt_row_label(x, sb, sizeof(sb)), x->device);
			for (size_t t = 0; t < x->ntop; t++) {
				const struct dsmt_top *e = &x->top[t];
				fprintf(f, "  %12" PRIu64 " bytes %6" PRIu64 " blocks  %-19s", e->bytes, e->count,
					dsmt_cat_name(e->cat));
				if (e->site < p->nsites) {
					const struct dsmt_site *s = &p->sites[e->site];
					for (size_t k = 0; k < s->nframes && k < 3; k++)
						fprintf(f, "%s%s", k ? " < " : "  ", s->frames[k]);
					if (!s->nframes)
						fprintf(f, "  site 0x%" PRIx64, s->site);
				}
				fputc('\n', f);
			}
		}
		fprintf(f, "growth: allocated in a step and alive at the end of the run, %s\n",
			p->ngrowth ? "by site (3 or more consecutive steps)" : "no site over 3 or more consecutive steps");
		for (size_t g = 0; g < p->ngrowth; g++) {
			const struct dsmt_growth *x = &p->growth[g];
			fprintf(f, "  device %d  %12" PRIu64 " bytes  steps %d-%d  %-19s", x->device, x->bytes, x->first_step,
				x->last_step, dsmt_cat_name(x->cat));
			if (x->site < p->nsites) {
				const struct dsmt_site *s = &p->sites[x->site];
				for (size_t k = 0; k < s->nframes && k < 3; k++)
					fprintf(f, "%s%s", k ? " < " : "  ", s->frames[k]);
				if (!s->nframes)
					fprintf(f, "  site 0x%" PRIx64, s->site);
			}
			fputc('\n', f);
		}
	}
}
