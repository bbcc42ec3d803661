/* --perfetto: the decoded timelines (dsmt_opts.timeline) as Chrome
 * trace-event JSON, the format Perfetto's UI and chrome://tracing open.
 *
 * One trace process per traced process (pid: its own, unless two share
 * one); times in microseconds (three decimals: ns) since the earliest
 * process start, so ranks line up.
 *   counters ("C"), one track per name: "cuda:D allocated", "cuda:D reserved",
 *     "cuda:D device", "cuda:D imported", "cuda:D nvml used", "host pinned",
 *     "host rss", and "cuda:D CATEGORY" for each attribution category; each
 *     track starts at 0 at the process start, and its timestamps strictly
 *     increase (events the decoder replays in order within one microsecond
 *     get successive nanoseconds, so no change hides behind another)
 *   NVTX push/pop ranges: slices ("B"/"E") on their thread (a pop that
 *     closes a range of one domain under ranges of another closes and
 *     reopens those); start/end ranges: async slices ("b"/"e", id = range id);
 *     marks: thread instants
 *   OOMs and interval starts (step N, eval N, tail): process instants. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "decode.h"

#define NTRACK (DSMT_TL_CAT0 + DSMT_BK_NCAT)
#define NDEV1 256

static const char *const level_name[DSMT_TL_NLEVEL] = {"allocated", "reserved", "device",   "imported",
							"nvml used", "host pinned", "host rss"};

struct out {
	FILE *f;
	int first;  /* no event written yet */
	uint64_t t0; /* ns: time 0 of the trace */
	uint64_t pid;
	uint64_t window; /* ns: a counter's changes within a window merge (0: every change) */
};

/* A counter track's open window (struct out.window): its first change's
 * time, and its largest and its last value with their times */
struct win {
	uint64_t start, max_t, last_t;
	int64_t max, last;
	int open;
};

struct tstack { /* NVTX push/pop ranges open on a thread */
	uint64_t *dom, *name;
	size_t n, cap;
	uint64_t last; /* the thread track's last time (clamp) */
};

struct async { /* an open start/end range */
	uint64_t id, name, tid, last;
};

struct inst { /* a process instant: an OOM or an interval's start */
	uint64_t ns, bytes;
	int kind, num, dev;
};

static int cmp_inst(const void *a, const void *b)
{
	const struct inst *x = a, *y = b;
	return x->ns < y->ns ? -1 : x->ns > y->ns;
}

/* time since t0 in microseconds, to the nanosecond */
static void put_ts(struct out *o, uint64_t ns)
{
	uint64_t r = ns > o->t0 ? ns - o->t0 : 0;
	fprintf(o->f, "%" PRIu64 ".%03u", r / 1000, (unsigned)(r % 1000));
}

/* the next strictly later time on a track (*last: 1 + its last time, 0
 * before any) */
static uint64_t clamp(uint64_t *last, uint64_t ns)
{
	if (*last && ns < *last)
		ns = *last;
	*last = ns + 1;
	return ns;
}

static void begin(struct out *o, const char *ph, const char *name, const char *name2)
{
	fputs(o->first ? "\n" : ",\n", o->f);
	o->first = 0;
	fprintf(o->f, "{\"ph\": \"%s\", \"pid\": %" PRIu64 ", \"name\": ", ph, o->pid);
	if (name2) { /* "NAME NAME2" */
		size_t n = strlen(name) + strlen(name2) + 2;
		char *b = malloc(n);
		if (b) {
			snprintf(b, n, "%s %s", name, name2);
			dsmt_json_str(o->f, b);
			free(b);
			return;
		}
	}
	dsmt_json_str(o->f, name);
}

static void counter(struct out *o, int dev1, unsigned track, uint64_t ns, int64_t v)
{
	char dn[32];
	const char *n = track >= DSMT_TL_CAT0 ? dsmt_cat_name(track - DSMT_TL_CAT0) : level_name[track];
	if (dev1)
		snprintf(dn, sizeof dn, "cuda:%d", dev1 - 1);
	begin(o, "C", dev1 ? dn : n, dev1 ? n : NULL);
	fputs(", \"ts\": ", o->f);
	put_ts(o, ns);
	fprintf(o->f, ", \"args\": {\"bytes\": %" PRId64 "}}", v);
}

/* A counter's value v from time ns on: written, or (windows) merged into
 * the track's window, which writes its maximum and then its last value
 * when the next window begins (w NULL or ns 0 with flush: write what is
 * pending) */
static void sample(struct out *o, struct win *w, uint64_t *last, int dev1, unsigned track, uint64_t ns, int64_t v,
		   int flush)
{
	if (!o->window) {
		counter(o, dev1, track, clamp(last, ns), v);
		return;
	}
	if (w->open && !flush && ns < w->start + o->window) {
		if (v > w->max) {
			w->max = v;
			w->max_t = ns;
		}
		w->last = v;
		w->last_t = ns;
		return;
	}
	if (w->open) {
		counter(o, dev1, track, clamp(last, w->max_t), w->max);
		if (w->last_t != w->max_t)
			counter(o, dev1, track, clamp(last, w->last_t), w->last);
		w->open = 0;
	}
	if (!flush)
		*w = (struct win){ns, ns, ns, v, v, 1};
}

static const char *tl_name(const struct dsmt_process *p, uint64_t v)
{
	return v < p->ntl_names ? p->tl_names[v] : "(unnamed)";
}

/* "B" or "E" of a push/pop range on thread tid */
static void slice(struct out *o, const char *ph, const char *name, uint64_t tid, uint64_t ns)
{
	begin(o, ph, name, NULL);
	fprintf(o->f, ", \"cat\": \"nvtx\", \"tid\": %" PRIu64 ", \"ts\": ", tid);
	put_ts(o, ns);
	fputc('}', o->f);
}

static int push(struct tstack *s, uint64_t dom, uint64_t name)
{
	if (s->n == s->cap) {
		size_t nc = s->cap ? 2 * s->cap : 8;
		uint64_t *d = realloc(s->dom, nc * sizeof(*d));
		if (!d)
			return -1;
		s->dom = d;
		uint64_t *m = realloc(s->name, nc * sizeof(*m));
		if (!m)
			return -1;
		s->name = m;
		s->cap = nc;
	}
	s->dom[s->n] = dom;
	s->name[s->n++] = name;
	return 0;
}

static void pop(struct out *o, const struct dsmt_process *p, struct tstack *s, uint64_t tid, uint64_t dom,
		uint64_t ns)
{
	size_t k = s->n;
	while (k && s->dom[k - 1] != dom)
		k--;
	if (!k)
		return; /* (the decoder drops unmatched pops) */
	k--;
	ns = clamp(&s->last, ns);
	for (size_t j = s->n; j > k; j--) /* innermost first */
		slice(o, "E", tl_name(p, s->name[j - 1]), tid, ns);
	for (size_t j = k + 1; j < s->n; j++) { /* other domains' ranges inside it go on */
		s->dom[j - 1] = s->dom[j];
		s->name[j - 1] = s->name[j];
		slice(o, "B", tl_name(p, s->name[j - 1]), tid, clamp(&s->last, ns));
	}
	s->n--;
}

static const char *interval_name(int kind, int num, char *buf, size_t n)
{
	switch (kind) {
	case DSMT_STEP: snprintf(buf, n, "step %d", num); break;
	case DSMT_EVAL: snprintf(buf, n, "eval %d", num); break;
	case DSMT_TAIL: snprintf(buf, n, "tail"); break;
	default: snprintf(buf, n, "init"); break;
	}
	return buf;
}

static uint64_t start_ns(const struct dsmt_process *p)
{
	const char *v = dsmt_meta_get(p, "start_realtime_ns");
	char *e;
	unsigned long long x = v && *v ? strtoull(v, &e, 10) : 0;
	if (x && !*e)
		return x;
	return p->ntl ? p->tl[0].ts_ns : p->nrows ? p->rows[0].start_ns : 0;
}

static void meta_event(struct out *o, const char *what, uint64_t tid, const char *key, const char *sval, long long ival)
{
	begin(o, "M", what, NULL);
	fprintf(o->f, ", \"tid\": %" PRIu64 ", \"args\": {\"%s\": ", tid, key);
	if (sval)
		dsmt_json_str(o->f, sval);
	else
		fprintf(o->f, "%lld", ival);
	fputs("}}", o->f);
}

static int write_process(struct out *o, const struct dsmt_process *p, size_t idx)
{
	const char *host = dsmt_meta_get(p, "host"), *pid = dsmt_meta_get(p, "pid"), *rank = dsmt_meta_get(p, "rank");
	char pn[512];
	snprintf(pn, sizeof pn, "%s%s%s%s:%s (%s)", rank ? "rank " : "", rank ? rank : "", rank ? " " : "",
		 host ? host : "?", pid ? pid : "?", p->file);
	meta_event(o, "process_name", 0, "name", pn, 0);
	meta_event(o, "process_sort_index", 0, "sort_index", NULL, (long long)idx);
	for (size_t i = 0; i < p->ntl_threads; i++)
		if (p->tl_tnames[i])
			meta_event(o, "thread_name", p->tl_tids[i], "name", p->tl_tnames[i], 0);

	uint64_t (*last)[NTRACK] = calloc(NDEV1, sizeof(*last));
	struct win (*win)[NTRACK] = o->window ? calloc(NDEV1, sizeof(*win)) : NULL;
	int64_t (*cat)[DSMT_BK_NCAT] = calloc(NDEV1, sizeof(*cat));
	struct tstack *ts = calloc(p->ntl_threads ? p->ntl_threads : 1, sizeof(*ts));
	struct async *as = NULL;
	size_t nas = 0, ninst = 0;
	for (size_t i = 0; i < p->ntl; i++)
		ninst += p->tl[i].op == DSMT_TL_OOM;
	struct inst *in = malloc((ninst + p->nrows + 1) * sizeof(*in));
	int rc = 0;
	if (!last || !cat || !ts || !in || (o->window && !win)) {
		rc = -1;
		goto done;
	}
	ninst = 0;
	const uint64_t t_start = start_ns(p);
	for (size_t i = 0; i < p->ntl && !rc; i++) {
		const struct dsmt_tl_ev *e = &p->tl[i];
		uint64_t tid = e->thread < p->ntl_threads ? p->tl_tids[e->thread] : 0;
		struct tstack *s = e->thread < p->ntl_threads ? &ts[e->thread] : NULL;
		switch (e->op) {
		case DSMT_TL_SET:
		case DSMT_TL_ADD:
		case DSMT_TL_SUB: {
			unsigned tr = e->track;
			if (tr >= NTRACK || (tr >= DSMT_TL_NLEVEL && tr < DSMT_TL_CAT0))
				break;
			if (!p->has_drv && (tr == DSMT_TL_DEVICE || tr == DSMT_TL_IMPORTED || tr == DSMT_TL_PINNED))
				break; /* unknown without the driver level (as in the reports) */
			uint64_t *l = &last[e->dev1][tr];
			struct win *w = win ? &win[e->dev1][tr] : NULL;
			if (!*l && !(w && w->open) && t_start < e->ts_ns) /* the track starts at 0 */
				counter(o, e->dev1, tr, clamp(l, t_start), 0);
			int64_t v = (int64_t)e->v;
			if (e->op != DSMT_TL_SET) {
				int64_t *c = &cat[e->dev1][tr - DSMT_TL_CAT0];
				*c += e->op == DSMT_TL_ADD ? v : -v;
				v = *c;
			}
			sample(o, w, l, e->dev1, tr, e->ts_ns, v, 0);
			break;
		}
		case DSMT_TL_PUSH:
			if (!s || push(s, e->id, e->v)) {
				rc = s ? -1 : 0;
				break;
			}
			slice(o, "B", tl_name(p, e->v), tid, clamp(&s->last, e->ts_ns));
			break;
		case DSMT_TL_POP:
			if (s)
				pop(o, p, s, tid, e->id, e->ts_ns);
			break;
		case DSMT_TL_MARK:
			if (!s)
				break;
			begin(o, "i", tl_name(p, e->v), NULL);
			fprintf(o->f, ", \"cat\": \"nvtx\", \"s\": \"t\", \"tid\": %" PRIu64 ", \"ts\": ", tid);
			put_ts(o, clamp(&s->last, e->ts_ns));
			fputc('}', o->f);
			break;
		case DSMT_TL_START: {
			struct async *na = realloc(as, (nas + 1) * sizeof(*as));
			if (!na) {
				rc = -1;
				break;
			}
			as = na;
			as[nas] = (struct async){e->id, e->v, tid, 0};
			begin(o, "b", tl_name(p, e->v), NULL);
			fprintf(o->f, ", \"cat\": \"nvtx\", \"id\": \"0x%" PRIx64 "\", \"tid\": %" PRIu64 ", \"ts\": ", e->id, tid);
			put_ts(o, clamp(&as[nas].last, e->ts_ns));
			fputc('}', o->f);
			nas++;
			break;
		}
		case DSMT_TL_END:
			for (size_t k = 0; k < nas; k++) {
				if (as[k].id != e->id)
					continue;
				begin(o, "e", tl_name(p, as[k].name), NULL);
				fprintf(o->f, ", \"cat\": \"nvtx\", \"id\": \"0x%" PRIx64 "\", \"tid\": %" PRIu64 ", \"ts\": ",
					e->id, as[k].tid);
				put_ts(o, clamp(&as[k].last, e->ts_ns));
				fputc('}', o->f);
				as[k] = as[--nas];
				break;
			}
			break;
		case DSMT_TL_OOM:
			in[ninst++] = (struct inst){e->ts_ns, e->v, -1, 0, e->dev1 - 1};
			break;
		default:
			break;
		}
	}
	for (unsigned d = 0; win && d < NDEV1; d++) /* the windows still open */
		for (unsigned tr = 0; tr < NTRACK; tr++)
			if (win[d][tr].open)
				sample(o, &win[d][tr], &last[d][tr], (int)d, tr, 0, 0, 1);
	/* ranges open at the end close there */
	for (size_t t = 0; t < p->ntl_threads && !rc; t++)
		while (ts[t].n)
			pop(o, p, &ts[t], p->tl_tids[t], ts[t].dom[ts[t].n - 1], p->tl_end_ns);
	for (size_t k = 0; k < nas && !rc; k++) {
		begin(o, "e", tl_name(p, as[k].name), NULL);
		fprintf(o->f, ", \"cat\": \"nvtx\", \"id\": \"0x%" PRIx64 "\", \"tid\": %" PRIu64 ", \"ts\": ", as[k].id,
			as[k].tid);
		put_ts(o, clamp(&as[k].last, p->tl_end_ns));
		fputc('}', o->f);
	}
	/* interval starts (one per interval: rows repeat it per device) */
	for (size_t r = 0; r < p->nrows && !rc; r++) {
		const struct dsmt_row *w = &p->rows[r];
		if (w->kind == DSMT_INIT || (r && w->kind == p->rows[r - 1].kind && w->step == p->rows[r - 1].step))
			continue;
		in[ninst++] = (struct inst){w->start_ns, 0, w->kind, w->step, 0};
	}
	qsort(in, ninst, sizeof(*in), cmp_inst);
	for (size_t k = 0; k < ninst && !rc; k++) {
		char nb[48];
		if (in[k].kind < 0)
			snprintf(nb, sizeof nb, "OOM cuda:%d", in[k].dev);
		begin(o, "i", in[k].kind < 0 ? nb : interval_name(in[k].kind, in[k].num, nb, sizeof nb), NULL);
		fprintf(o->f, ", \"cat\": \"%s\", \"s\": \"p\", \"ts\": ", in[k].kind < 0 ? "oom" : "interval");
		put_ts(o, in[k].ns);
		if (in[k].kind < 0)
			fprintf(o->f, ", \"args\": {\"device\": %d, \"requested_bytes\": %" PRIu64 "}", in[k].dev, in[k].bytes);
		fputc('}', o->f);
	}
done:
	for (size_t t = 0; ts && t < p->ntl_threads; t++) {
		free(ts[t].dom);
		free(ts[t].name);
	}
	free(ts);
	free(as);
	free(in);
	free(last);
	free(win);
	free(cat);
	return rc;
}

static uint64_t meta_pid(const struct dsmt_process *p)
{
	const char *v = dsmt_meta_get(p, "pid");
	char *e;
	unsigned long long x = v && *v ? strtoull(v, &e, 10) : 0;
	return x && !*e && x < (1ull << 30) ? x : 0;
}

int dsmt_write_perfetto(FILE *f, const struct dsmt_process *ps, size_t n, uint64_t window_us)
{
	struct out o = {f, 1, 0, 0, window_us * 1000};
	for (size_t i = 0; i < n; i++) {
		uint64_t t = start_ns(&ps[i]);
		if (t && (!o.t0 || t < o.t0))
			o.t0 = t;
	}
	fprintf(f, "{\"otherData\": {\"format\": \"dsmemdecode-perfetto/1\", \"t0_realtime_ns\": %" PRIu64
		   ", \"ts\": \"microseconds since t0_realtime_ns\"},\n \"traceEvents\": [",
		o.t0);
	int rc = 0;
	for (size_t i = 0; i < n && !rc; i++) {
		/* its own pid, unless an earlier process has it (another host) */
		o.pid = meta_pid(&ps[i]);
		for (size_t j = 0; j < i && o.pid; j++)
			if (meta_pid(&ps[j]) == o.pid)
				o.pid = 0;
		if (!o.pid)
			o.pid = (1ull << 30) + i; /* (above any Linux pid: pid_max <= 2^22) */
		rc = write_process(&o, &ps[i], i);
	}
	fputs("]}\n", f);
	return rc;
}
