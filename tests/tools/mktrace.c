/* mktrace: build a dsmemtrace trace file from a line-based script, for tests
 * and benchmarks.  Usage: mktrace SCRIPT|- OUT
 *
 * Script lines (numbers: decimal or 0x hex; '#' starts a comment line):
 *   option noheader|nochecksum|noautothread   (before anything else)
 *   header [major=N] [minor=N] [zstd_prefix_bytes=P] [announce=0|1]
 *                                  header version (default: format.h's);
 *                                  P: history each data frame is compressed
 *                                  against (default DSMT_PREFIX_BYTES; 0 =
 *                                  independent frames), announced by META
 *                                  zstd_prefix_bytes in the header unless
 *                                  P is 0 or announce=0 (a broken trace)
 *   meta KEY VALUE...              META record; goes into the header frame
 *                                  until the first data record, then into
 *                                  the data stream.  \0 \n \\ \xHH escapes.
 *   thread TID [NAME]              THREAD record (switches the thread)
 *   string ID TEXT...              STRING record
 *   module BASE LO HI PATH [BUILDID_HEX]
 *   stack ID IP...                 STACK record
 *   pycode ID FILE QUALNAME FIRSTLINE LINETABLE_HEX PYVER
 *                                  PYCODE record (LINETABLE_HEX "-": empty;
 *                                  FILE and QUALNAME take \xHH escapes)
 *   pystack ID CODE:INSTR...       PYSTACK record, innermost frame first
 *   alloc|free key=value...        seq ts api dev ptr size stream stack site tot=A,R
 *                                  api: torch malloc async managed hostalloc
 *                                  hostreg free freehost or a number;
 *                                  dev: index or "host"; tot (torch only):
 *                                  the allocator's totals after the event;
 *                                  omitted: tot_alloc as mktrace's own replay
 *                                  of the device's torch blocks says, and
 *                                  tot_reserved the thread's previous one
 *   oom   seq ts dev size tot=A,R stack site
 *   push  seq ts domain name       name=ID or name=TEXT (TEXT is interned)
 *   pop   seq ts domain
 *   rstart seq ts id domain name
 *   rend  seq ts id
 *   mark  seq ts domain name
 *   lost  seq ts count
 *   pause|resume seq ts dev tot=A,R   PAUSE/RESUME (dev "host": none)
 *   drv   seq ts op via dev ptr size aux stack site
 *                                  DRV record.  op: alloc free alloc_managed
 *                                  alloc_host free_host host_register
 *                                  host_unregister alloc_async free_async
 *                                  create release retain map unmap set_access
 *                                  reserve addr_free import ipc_open ipc_close
 *                                  pool_create pool_destroy pool_trim
 *                                  ctx_create ctx_destroy static static_free
 *                                  or a number; via: cupti dlsym activity or a
 *                                  number, "+rt" appended for DSMT_VIA_UNDER_RT
 *                                  (default cupti); dev: index or "host"
 *                                  (default 0); ptr and site update the
 *                                  thread's delta state like alloc/free
 *   source seq ts via reason name  SOURCE record.  via: none cupti dlsym
 *                                  activity or a number; reason: start yield
 *                                  refused no_cupti disabled foreign or a
 *                                  number; name=ID or name=TEXT (interned)
 *   sample next ts dev flags proc dev_used dev_total
 *                                  SAMPLE record (no thread, no delta state):
 *                                  next: the seq it is replayed before
 *                                  (default: the next seq), ts absolute
 *                                  (default next), dev index or "host",
 *                                  flags default 1 (proc valid) when proc=
 *                                  is given, else 0
 *   host next ts rss vsz           HOST record (format 1.3; no thread, no delta
 *                                  state): next and ts as for sample; rss and
 *                                  vsz in bytes (default 0)
 *   flush ts next
 *   raw TYPE HEX                   a record with a raw payload
 *   bytes HEX                      raw bytes into the current frame's data
 *   frame                          end the current zstd frame
 *   skippable MAGIC HEX            a skippable frame with another magic
 *   garbage HEX                    raw bytes into the file, between frames
 *   zstdframe TEXT                 a zstd frame holding TEXT (foreign data)
 *   synth events=N [threads=T] [batch=B] [frame=BYTES] [seed=S] [level=L]
 *                                  a training-like trace (benchmarks)
 *   truncate N                     after writing, cut the file to N bytes
 *                                  (N < 0: drop -N bytes from the end)
 *   corrupt OFF XOR                after writing, xor the byte at OFF (OFF < 0:
 *                                  from the end; fN+K: K bytes into data
 *                                  frame N, which must be written already)
 * Every event line (alloc free oom push mark rstart drv ... ) takes
 * pystack=ID: the trailing pystack field (format 1.2) after dts.
 * Values in scripts are absolute; mktrace writes the record layout and the
 * deltas of format.h.  seq defaults to one more than the highest seq so far,
 * ts to seq.  Delta state is per frame per thread, as the reader expects;
 * when an event comes before any thread line in a frame, the last thread is
 * re-announced (unless option noautothread).  Every zstd frame after the
 * header (zstdframe ones too) is compressed against the history of the ones
 * before it, as the tracer does. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "encode.h"
#include "format.h"

static const char *script_name;
static int lineno;

static void die(const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "mktrace: %s:%d: ", script_name, lineno);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

/* ---- byte buffers ---- */
struct buf {
	uint8_t *p;
	size_t n, cap;
};

static void buf_put(struct buf *b, const void *d, size_t n)
{
	if (b->n + n > b->cap) {
		size_t nc = b->cap ? b->cap * 2 : 4096;
		while (nc < b->n + n)
			nc *= 2;
		b->p = realloc(b->p, nc);
		if (!b->p)
			die("out of memory");
		b->cap = nc;
	}
	memcpy(b->p + b->n, d, n);
	b->n += n;
}

static void put_le32(struct buf *b, uint32_t v)
{
	uint8_t x[4] = {v & 0xff, (v >> 8) & 0xff, (v >> 16) & 0xff, v >> 24};
	buf_put(b, x, 4);
}

/* ---- state ---- */
static struct buf file;    /* the whole output */
static struct buf hdr;     /* header records */
static struct buf frm;     /* current frame's records */
static int header_done, opt_noheader, opt_nochecksum, opt_noautothread, level = 3;
static unsigned hmajor = DSMT_FORMAT_MAJOR, hminor = DSMT_FORMAT_MINOR;
static uint64_t prefix_bytes = DSMT_PREFIX_BYTES; /* history (format.h) */
static int prefix_announce = 1;
static struct buf hist; /* the last prefix_bytes of the data frames' content */
static uint64_t next_seq;
static int64_t trunc_n;
static int have_trunc;
static struct {
	int64_t off;
	unsigned x;
} corrupts[64];
static int ncorrupt;

struct tstate {
	uint64_t tid, seq, ts, ptr, site, tot_alloc, tot_reserved; /* delta state */
	int in_frame; /* announced in the current frame */
};
static struct tstate threads[4096];
static int nthreads;
static struct tstate *cur; /* current thread (this frame) */
static struct tstate *last; /* last thread named */

static struct {
	char *text;
	uint64_t id;
} interned[4096];
static int ninterned;
static uint64_t next_auto_id = 1000;

static void rec(struct buf *b, uint8_t type, const struct dsmt_recbuf *r)
{
	uint8_t out[sizeof(r->p) + 16];
	size_t n = dsmt_rec_finish(out, type, r);
	buf_put(b, out, n);
}

static void write_header(void)
{
	if (header_done)
		return;
	header_done = 1;
	if (opt_noheader)
		return;
	struct buf h = {0};
	buf_put(&h, DSMT_MAGIC, DSMT_MAGIC_LEN);
	uint8_t v[4] = {hmajor & 0xff, hmajor >> 8, hminor & 0xff, hminor >> 8};
	buf_put(&h, v, 4);
	if (prefix_bytes && prefix_announce) {
		char val[32];
		snprintf(val, sizeof(val), "%" PRIu64, prefix_bytes);
		struct dsmt_recbuf r;
		dsmt_rb_reset(&r);
		dsmt_rb_str(&r, "zstd_prefix_bytes", 17);
		dsmt_rb_str(&r, val, strlen(val));
		uint8_t out[sizeof(r.p) + 16];
		buf_put(&h, out, dsmt_rec_finish(out, DSMT_REC_META, &r));
	}
	if (hdr.n)
		buf_put(&h, hdr.p, hdr.n);
	put_le32(&file, DSMT_SKIPPABLE_MAGIC);
	put_le32(&file, (uint32_t)h.n);
	buf_put(&file, h.p, h.n);
	free(h.p);
}

static size_t frame_starts[4096]; /* file offsets of data frames 1.. */
static int nframes;
static uint64_t raw_total; /* decompressed bytes of all data frames */

static void zframe(const void *src, size_t n)
{
	if (nframes < 4095)
		frame_starts[++nframes] = file.n;
	static ZSTD_CCtx *cc;
	if (!cc && !(cc = ZSTD_createCCtx()))
		die("out of memory");
	ZSTD_CCtx_reset(cc, ZSTD_reset_session_and_parameters);
	ZSTD_CCtx_setParameter(cc, ZSTD_c_compressionLevel, level);
	ZSTD_CCtx_setParameter(cc, ZSTD_c_checksumFlag, !opt_nochecksum);
	size_t bound = ZSTD_compressBound(n);
	uint8_t *out = malloc(bound);
	if (!out)
		die("out of memory");
	/* the last prefix_bytes of the earlier data frames (empty for the first) */
	size_t r = prefix_bytes ? ZSTD_CCtx_refPrefix(cc, hist.p, hist.n) : 0;
	if (!ZSTD_isError(r))
		r = ZSTD_compress2(cc, out, bound, src, n);
	if (ZSTD_isError(r))
		die("zstd: %s", ZSTD_getErrorName(r));
	buf_put(&file, out, r);
	free(out);
	raw_total += n;
	if (!prefix_bytes)
		return;
	if (n >= prefix_bytes) {
		hist.n = 0;
		buf_put(&hist, (const uint8_t *)src + n - prefix_bytes, prefix_bytes);
	} else {
		if (hist.n + n > prefix_bytes) {
			size_t drop = hist.n + n - prefix_bytes;
			memmove(hist.p, hist.p + drop, hist.n - drop);
			hist.n -= drop;
		}
		buf_put(&hist, src, n);
	}
}

static void end_frame(void)
{
	write_header();
	if (frm.n)
		zframe(frm.p, frm.n);
	frm.n = 0;
	for (int i = 0; i < nthreads; i++) {
		uint64_t tid = threads[i].tid;
		threads[i] = (struct tstate){.tid = tid}; /* delta state restarts */
	}
	cur = NULL;
}

static struct tstate *thread_get(uint64_t tid)
{
	for (int i = 0; i < nthreads; i++)
		if (threads[i].tid == tid)
			return &threads[i];
	if (nthreads == 4096)
		die("too many threads");
	threads[nthreads].tid = tid;
	return &threads[nthreads++];
}

static void thread_rec(uint64_t tid, const char *name)
{
	write_header();
	struct dsmt_recbuf r;
	dsmt_rb_reset(&r);
	dsmt_rb_u(&r, tid);
	dsmt_rb_str(&r, name, strlen(name));
	rec(&frm, DSMT_REC_THREAD, &r);
	struct tstate *t = thread_get(tid);
	if (!t->in_frame)
		*t = (struct tstate){.tid = tid, .in_frame = 1};
	cur = last = t;
}

/* ---- parsing ---- */
static uint64_t num(const char *s)
{
	char *e;
	errno = 0;
	uint64_t v;
	if (*s == '-')
		v = (uint64_t)strtoll(s, &e, 0);
	else
		v = strtoull(s, &e, 0);
	if (errno || e == s || *e)
		die("bad number '%s'", s);
	return v;
}

static int isnum(const char *s)
{
	char *e;
	if (!*s)
		return 0;
	strtoull(s, &e, 0);
	return *e == 0 && isdigit((unsigned char)*s);
}

static size_t unescape(const char *s, char *out)
{
	size_t n = 0;
	for (; *s; s++) {
		if (*s != '\\' || !s[1]) {
			out[n++] = *s;
			continue;
		}
		s++;
		switch (*s) {
		case '0': out[n++] = 0; break;
		case 'n': out[n++] = '\n'; break;
		case 't': out[n++] = '\t'; break;
		case 'x': {
			char h[3] = {s[1], s[1] ? s[2] : 0, 0};
			out[n++] = (char)strtoul(h, NULL, 16);
			s += 2;
			break;
		}
		default: out[n++] = *s; break;
		}
	}
	return n;
}

static size_t hexbytes(const char *s, uint8_t *out, size_t max)
{
	size_t n = 0;
	while (*s) {
		if (isspace((unsigned char)*s)) {
			s++;
			continue;
		}
		if (!isxdigit((unsigned char)s[0]) || !isxdigit((unsigned char)s[1]))
			die("bad hex '%s'", s);
		if (n == max)
			die("hex too long");
		char h[3] = {s[0], s[1], 0};
		out[n++] = (uint8_t)strtoul(h, NULL, 16);
		s += 2;
	}
	return n;
}

/* key=value arguments */
struct kv {
	char *k, *v;
};
static int nkv;
static struct kv kvs[32];

static void parse_kv(char **tok, int ntok)
{
	nkv = 0;
	for (int i = 0; i < ntok; i++) {
		char *eq = strchr(tok[i], '=');
		if (!eq)
			die("expected key=value, got '%s'", tok[i]);
		*eq = 0;
		kvs[nkv].k = tok[i];
		kvs[nkv].v = eq + 1;
		nkv++;
	}
}

static const char *kv_get(const char *k)
{
	for (int i = 0; i < nkv; i++)
		if (!strcmp(kvs[i].k, k)) {
			kvs[i].k = ""; /* consumed */
			return kvs[i].v;
		}
	return NULL;
}

static uint64_t kv_num(const char *k, uint64_t dflt)
{
	const char *v = kv_get(k);
	return v ? num(v) : dflt;
}

static void kv_done(void)
{
	for (int i = 0; i < nkv; i++)
		if (*kvs[i].k)
			die("unknown argument '%s'", kvs[i].k);
}

static uint64_t intern(const char *text)
{
	for (int i = 0; i < ninterned; i++)
		if (!strcmp(interned[i].text, text))
			return interned[i].id;
	if (ninterned == 4096)
		die("too many strings");
	uint64_t id = next_auto_id++;
	interned[ninterned].text = strdup(text);
	interned[ninterned++].id = id;
	write_header();
	struct dsmt_recbuf r;
	dsmt_rb_reset(&r);
	dsmt_rb_u(&r, id);
	dsmt_rb_str(&r, text, strlen(text));
	rec(&frm, DSMT_REC_STRING, &r);
	return id;
}

static uint64_t name_arg(const char *k)
{
	const char *v = kv_get(k);
	if (!v)
		return 0;
	if (isnum(v))
		return num(v);
	return intern(v);
}

static unsigned api_arg(void)
{
	const char *v = kv_get("api");
	if (!v)
		return DSMT_API_TORCH;
	static const struct {
		const char *n;
		unsigned a;
	} t[] = {{"torch", DSMT_API_TORCH},
		 {"malloc", DSMT_API_CUDA_MALLOC},
		 {"async", DSMT_API_CUDA_MALLOC_ASYNC},
		 {"managed", DSMT_API_CUDA_MALLOC_MANAGED},
		 {"hostalloc", DSMT_API_CUDA_HOST_ALLOC},
		 {"hostreg", DSMT_API_CUDA_HOST_REGISTER},
		 {"free", DSMT_API_CUDA_FREE},
		 {"freehost", DSMT_API_CUDA_FREE_HOST}};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		if (!strcmp(v, t[i].n))
			return t[i].a;
	return (unsigned)num(v);
}

/* name=value tables: the value of a name, or a number */
struct named {
	const char *n;
	unsigned v;
};

static uint64_t named_arg(const char *v, const struct named *t, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(v, t[i].n))
			return t[i].v;
	return num(v);
}

static const struct named drv_ops[] = {
	{"alloc", DSMT_DRV_ALLOC}, {"free", DSMT_DRV_FREE}, {"alloc_managed", DSMT_DRV_ALLOC_MANAGED},
	{"alloc_host", DSMT_DRV_ALLOC_HOST}, {"free_host", DSMT_DRV_FREE_HOST},
	{"host_register", DSMT_DRV_HOST_REGISTER}, {"host_unregister", DSMT_DRV_HOST_UNREGISTER},
	{"alloc_async", DSMT_DRV_ALLOC_ASYNC}, {"free_async", DSMT_DRV_FREE_ASYNC}, {"create", DSMT_DRV_CREATE},
	{"release", DSMT_DRV_RELEASE}, {"retain", DSMT_DRV_RETAIN}, {"map", DSMT_DRV_MAP},
	{"unmap", DSMT_DRV_UNMAP}, {"set_access", DSMT_DRV_SET_ACCESS}, {"reserve", DSMT_DRV_RESERVE},
	{"addr_free", DSMT_DRV_ADDR_FREE}, {"import", DSMT_DRV_IMPORT}, {"ipc_open", DSMT_DRV_IPC_OPEN},
	{"ipc_close", DSMT_DRV_IPC_CLOSE}, {"pool_create", DSMT_DRV_POOL_CREATE},
	{"pool_destroy", DSMT_DRV_POOL_DESTROY}, {"pool_trim", DSMT_DRV_POOL_TRIM},
	{"ctx_create", DSMT_DRV_CTX_CREATE}, {"ctx_destroy", DSMT_DRV_CTX_DESTROY}, {"static", DSMT_DRV_STATIC},
	{"static_free", DSMT_DRV_STATIC_FREE},
};
static const struct named vias[] = {
	{"none", DSMT_VIA_NONE}, {"cupti", DSMT_VIA_CUPTI}, {"dlsym", DSMT_VIA_DLSYM}, {"activity", DSMT_VIA_ACTIVITY},
};
static const struct named reasons[] = {
	{"start", DSMT_SRC_START}, {"yield", DSMT_SRC_YIELD}, {"refused", DSMT_SRC_REFUSED},
	{"no_cupti", DSMT_SRC_NO_CUPTI}, {"disabled", DSMT_SRC_DISABLED}, {"foreign", DSMT_SRC_FOREIGN},
};
#define NAMED(t) t, sizeof(t) / sizeof(t[0])

/* via=NAME|N[+rt] (default dflt) */
static uint64_t via_arg(uint64_t dflt)
{
	const char *v = kv_get("via");
	if (!v)
		return dflt;
	char tmp[64];
	snprintf(tmp, sizeof(tmp), "%s", v);
	uint64_t rt = 0;
	char *plus = strstr(tmp, "+rt");
	if (plus && !plus[3]) {
		*plus = 0;
		rt = DSMT_VIA_UNDER_RT;
	}
	return named_arg(tmp, NAMED(vias)) | rt;
}

static uint64_t dev1_arg(void)
{
	const char *v = kv_get("dev");
	if (!v)
		return 1;
	if (!strcmp(v, "host"))
		return 0;
	return num(v) + 1;
}

/* Event records (format.h): the type-specific fields, then dseq and dts.
 * ev_begin: thread check, seq/ts arguments, empty payload; ev_end appends
 * dseq and dts and writes the record. */
static uint64_t ev_seq, ev_ts;
static const char *ev_pystack; /* pystack=ID of the event, or NULL */

static struct tstate *ev_begin(struct dsmt_recbuf *r)
{
	ev_pystack = kv_get("pystack");
	write_header();
	if (!cur) {
		if (!last)
			die("event before any thread line");
		if (!opt_noautothread)
			thread_rec(last->tid, "");
	}
	struct tstate *t = cur ? cur : last;
	ev_seq = kv_num("seq", next_seq);
	ev_ts = kv_num("ts", ev_seq);
	if (ev_seq + 1 > next_seq)
		next_seq = ev_seq + 1;
	dsmt_rb_reset(r);
	return t;
}

static void ev_end(struct dsmt_recbuf *r, struct tstate *t, uint8_t type)
{
	dsmt_rb_u(r, ev_seq - t->seq);
	dsmt_rb_u(r, ev_ts - t->ts);
	if (ev_pystack) { /* format 1.2: after dts */
		dsmt_rb_u(r, num(ev_pystack));
		ev_pystack = NULL;
	}
	t->seq = ev_seq;
	t->ts = ev_ts;
	rec(&frm, type, r);
}

static void put_site(struct dsmt_recbuf *r, struct tstate *t, uint64_t site)
{
	dsmt_rb_s(r, (int64_t)(site - t->site));
	t->site = site;
}

/* ALLOC/FREE fields after sdptr, size: stream stack sdsite stot_alloc
 * stot_reserved (totals only for torch; they update the thread's state). */
static void put_mem_tail(struct dsmt_recbuf *r, struct tstate *t, int is_alloc, unsigned api, uint64_t size,
			 uint64_t stream, uint64_t stack, uint64_t site, uint64_t tot_alloc, uint64_t tot_reserved)
{
	dsmt_rb_u(r, stream);
	dsmt_rb_u(r, stack);
	put_site(r, t, site);
	if (api != DSMT_API_TORCH) {
		dsmt_rb_u(r, 0);
		dsmt_rb_u(r, 0);
		return;
	}
	uint64_t pred = t->tot_alloc + (is_alloc ? size : -size);
	dsmt_rb_s(r, (int64_t)(tot_alloc - pred));
	dsmt_rb_s(r, (int64_t)(tot_reserved - t->tot_reserved));
	t->tot_alloc = tot_alloc;
	t->tot_reserved = tot_reserved;
}

/* mktrace's own replay of torch blocks per device: the allocator's
 * tot_alloc for events whose script gives no tot= */
static struct {
	uint64_t dev1, ptr, size;
} blocks[65536];
static size_t nblocks;
static uint64_t dev_alloc[256];

static uint64_t replay_torch(int is_alloc, uint64_t dev1, uint64_t ptr, uint64_t size)
{
	uint8_t d = (uint8_t)dev1;
	size_t i = 0;
	while (i < nblocks && !(blocks[i].dev1 == dev1 && blocks[i].ptr == ptr))
		i++;
	if (i < nblocks) { /* a free, or an alloc replacing a live block */
		dev_alloc[d] -= blocks[i].size;
		blocks[i] = blocks[--nblocks];
	}
	if (is_alloc) {
		if (nblocks == sizeof(blocks) / sizeof(blocks[0]))
			die("too many live blocks");
		blocks[nblocks++] = (typeof(blocks[0])){dev1, ptr, size};
		dev_alloc[d] += size;
	}
	return dev_alloc[d];
}

/* tot=A,R: 1 and the two values, or 0 when absent */
static int tot_arg(uint64_t *a, uint64_t *res)
{
	const char *v = kv_get("tot");
	if (!v)
		return 0;
	char tmp[128];
	snprintf(tmp, sizeof(tmp), "%s", v);
	char *comma = strchr(tmp, ',');
	if (!comma)
		die("tot=ALLOC,RESERVED expected");
	*comma = 0;
	*a = num(tmp);
	*res = num(comma + 1);
	return 1;
}

static void synth(void);

static void cmd(char **tok, int ntok)
{
	const char *c = tok[0];
	struct dsmt_recbuf r;
	if (!strcmp(c, "option")) {
		for (int i = 1; i < ntok; i++) {
			if (!strcmp(tok[i], "noheader"))
				opt_noheader = 1;
			else if (!strcmp(tok[i], "nochecksum"))
				opt_nochecksum = 1;
			else if (!strcmp(tok[i], "noautothread"))
				opt_noautothread = 1;
			else
				die("unknown option %s", tok[i]);
		}
	} else if (!strcmp(c, "header")) {
		if (header_done)
			die("header after the first record");
		parse_kv(tok + 1, ntok - 1);
		hmajor = (unsigned)kv_num("major", hmajor);
		hminor = (unsigned)kv_num("minor", hminor);
		prefix_bytes = kv_num("zstd_prefix_bytes", prefix_bytes);
		prefix_announce = kv_num("announce", 1) != 0;
		kv_done();
	} else if (!strcmp(c, "meta")) {
		if (ntok < 2)
			die("meta KEY VALUE");
		static char val[65536];
		val[0] = 0;
		for (int i = 2; i < ntok; i++) {
			if (i > 2)
				strcat(val, " ");
			strncat(val, tok[i], sizeof(val) - strlen(val) - 2);
		}
		static char uval[65536];
		size_t un = unescape(val, uval);
		dsmt_rb_reset(&r);
		dsmt_rb_str(&r, tok[1], strlen(tok[1]));
		dsmt_rb_str(&r, uval, un);
		rec(header_done ? &frm : &hdr, DSMT_REC_META, &r);
	} else if (!strcmp(c, "thread")) {
		if (ntok < 2)
			die("thread TID [NAME]");
		thread_rec(num(tok[1]), ntok > 2 ? tok[2] : "");
	} else if (!strcmp(c, "string")) {
		if (ntok < 2)
			die("string ID TEXT");
		write_header();
		char text[4096] = "";
		for (int i = 2; i < ntok; i++) {
			if (i > 2)
				strcat(text, " ");
			strncat(text, tok[i], sizeof(text) - strlen(text) - 2);
		}
		dsmt_rb_reset(&r);
		dsmt_rb_u(&r, num(tok[1]));
		dsmt_rb_str(&r, text, strlen(text));
		rec(&frm, DSMT_REC_STRING, &r);
	} else if (!strcmp(c, "module")) {
		if (ntok < 5)
			die("module BASE LO HI PATH [BUILDID]");
		write_header();
		dsmt_rb_reset(&r);
		dsmt_rb_u(&r, num(tok[1]));
		dsmt_rb_u(&r, num(tok[2]));
		dsmt_rb_u(&r, num(tok[3]));
		dsmt_rb_str(&r, tok[4], strlen(tok[4]));
		uint8_t bid[64];
		size_t bn = ntok > 5 ? hexbytes(tok[5], bid, sizeof(bid)) : 0;
		dsmt_rb_str(&r, bid, bn);
		rec(&frm, DSMT_REC_MODULE, &r);
	} else if (!strcmp(c, "stack")) {
		if (ntok < 3)
			die("stack ID IP...");
		write_header();
		dsmt_rb_reset(&r);
		dsmt_rb_u(&r, num(tok[1]));
		dsmt_rb_u(&r, (uint64_t)(ntok - 2));
		uint64_t prev = 0;
		for (int i = 2; i < ntok; i++) {
			uint64_t ip = num(tok[i]);
			if (i == 2)
				dsmt_rb_u(&r, ip);
			else
				dsmt_rb_s(&r, (int64_t)(ip - prev));
			prev = ip;
		}
		rec(&frm, DSMT_REC_STACK, &r);
	} else if (!strcmp(c, "pycode")) {
		if (ntok != 7)
			die("pycode ID FILE QUALNAME FIRSTLINE LINETABLE_HEX PYVER");
		write_header();
		static char ubuf[4096];
		static uint8_t lt[65536];
		dsmt_rb_reset(&r);
		dsmt_rb_u(&r, num(tok[1]));
		size_t n = unescape(tok[2], ubuf);
		dsmt_rb_str(&r, ubuf, n);
		n = unescape(tok[3], ubuf);
		dsmt_rb_str(&r, ubuf, n);
		dsmt_rb_u(&r, num(tok[4]));
		n = strcmp(tok[5], "-") ? hexbytes(tok[5], lt, sizeof(lt)) : 0;
		dsmt_rb_str(&r, lt, n);
		dsmt_rb_u(&r, num(tok[6]));
		rec(&frm, DSMT_REC_PYCODE, &r);
	} else if (!strcmp(c, "pystack")) {
		if (ntok < 2)
			die("pystack ID CODE:INSTR...");
		write_header();
		dsmt_rb_reset(&r);
		dsmt_rb_u(&r, num(tok[1]));
		dsmt_rb_u(&r, (uint64_t)(ntok - 2));
		for (int i = 2; i < ntok; i++) {
			char *colon = strchr(tok[i], ':');
			if (!colon)
				die("pystack frames are CODE:INSTR, not '%s'", tok[i]);
			*colon = 0;
			dsmt_rb_u(&r, num(tok[i]));
			dsmt_rb_u(&r, num(colon + 1));
		}
		rec(&frm, DSMT_REC_PYSTACK, &r);
	} else if (!strcmp(c, "alloc") || !strcmp(c, "free")) {
		parse_kv(tok + 1, ntok - 1);
		struct tstate *t = ev_begin(&r);
		int is_alloc = c[0] == 'a';
		unsigned api = api_arg();
		uint64_t dev1 = dev1_arg();
		uint64_t ptr = kv_num("ptr", 0), size = kv_num("size", 0);
		uint64_t stream = kv_num("stream", 0), stack = kv_num("stack", 0), site = kv_num("site", 0);
		uint64_t ta = 0, tr = t->tot_reserved;
		int have_tot = tot_arg(&ta, &tr);
		if (api == DSMT_API_TORCH) {
			uint64_t replayed = replay_torch(is_alloc, dev1, ptr, size);
			if (!have_tot)
				ta = replayed;
		}
		kv_done();
		dsmt_rb_u(&r, api);
		dsmt_rb_u(&r, dev1);
		dsmt_rb_s(&r, (int64_t)(ptr - t->ptr));
		t->ptr = ptr;
		dsmt_rb_u(&r, size);
		put_mem_tail(&r, t, is_alloc, api, size, stream, stack, site, ta, tr);
		ev_end(&r, t, is_alloc ? DSMT_REC_ALLOC : DSMT_REC_FREE);
	} else if (!strcmp(c, "oom")) {
		parse_kv(tok + 1, ntok - 1);
		struct tstate *t = ev_begin(&r);
		uint64_t ta = 0, tr = 0;
		tot_arg(&ta, &tr);
		dsmt_rb_u(&r, dev1_arg());
		dsmt_rb_u(&r, kv_num("size", 0));
		dsmt_rb_u(&r, ta); /* absolute, state untouched */
		dsmt_rb_u(&r, tr);
		dsmt_rb_u(&r, kv_num("stack", 0));
		put_site(&r, t, kv_num("site", 0));
		kv_done();
		ev_end(&r, t, DSMT_REC_OOM);
	} else if (!strcmp(c, "push") || !strcmp(c, "mark")) {
		parse_kv(tok + 1, ntok - 1);
		uint64_t name = name_arg("name"); /* may emit a STRING first */
		struct tstate *t = ev_begin(&r);
		dsmt_rb_u(&r, kv_num("domain", 0));
		dsmt_rb_u(&r, name);
		kv_done();
		ev_end(&r, t, c[0] == 'p' ? DSMT_REC_NVTX_PUSH : DSMT_REC_NVTX_MARK);
	} else if (!strcmp(c, "pop")) {
		parse_kv(tok + 1, ntok - 1);
		struct tstate *t = ev_begin(&r);
		dsmt_rb_u(&r, kv_num("domain", 0));
		kv_done();
		ev_end(&r, t, DSMT_REC_NVTX_POP);
	} else if (!strcmp(c, "rstart")) {
		parse_kv(tok + 1, ntok - 1);
		uint64_t name = name_arg("name");
		struct tstate *t = ev_begin(&r);
		dsmt_rb_u(&r, kv_num("id", 0));
		dsmt_rb_u(&r, kv_num("domain", 0));
		dsmt_rb_u(&r, name);
		kv_done();
		ev_end(&r, t, DSMT_REC_NVTX_START);
	} else if (!strcmp(c, "rend")) {
		parse_kv(tok + 1, ntok - 1);
		struct tstate *t = ev_begin(&r);
		dsmt_rb_u(&r, kv_num("id", 0));
		kv_done();
		ev_end(&r, t, DSMT_REC_NVTX_END);
	} else if (!strcmp(c, "pause") || !strcmp(c, "resume")) {
		parse_kv(tok + 1, ntok - 1);
		struct tstate *t = ev_begin(&r);
		uint64_t ta = 0, tr = 0;
		tot_arg(&ta, &tr);
		dsmt_rb_u(&r, dev1_arg());
		dsmt_rb_u(&r, ta); /* absolute, state untouched */
		dsmt_rb_u(&r, tr);
		kv_done();
		ev_end(&r, t, c[0] == 'p' ? DSMT_REC_PAUSE : DSMT_REC_RESUME);
	} else if (!strcmp(c, "drv")) {
		parse_kv(tok + 1, ntok - 1);
		struct tstate *t = ev_begin(&r);
		const char *op = kv_get("op");
		if (!op)
			die("drv needs op=");
		dsmt_rb_u(&r, named_arg(op, NAMED(drv_ops)));
		dsmt_rb_u(&r, via_arg(DSMT_VIA_CUPTI));
		dsmt_rb_u(&r, dev1_arg());
		uint64_t ptr = kv_num("ptr", 0);
		dsmt_rb_s(&r, (int64_t)(ptr - t->ptr));
		t->ptr = ptr;
		dsmt_rb_u(&r, kv_num("size", 0));
		dsmt_rb_u(&r, kv_num("aux", 0));
		dsmt_rb_u(&r, kv_num("stack", 0));
		put_site(&r, t, kv_num("site", 0));
		kv_done();
		ev_end(&r, t, DSMT_REC_DRV);
	} else if (!strcmp(c, "source")) {
		parse_kv(tok + 1, ntok - 1);
		uint64_t name = name_arg("name"); /* may emit a STRING first */
		struct tstate *t = ev_begin(&r);
		dsmt_rb_u(&r, via_arg(DSMT_VIA_NONE));
		const char *rs = kv_get("reason");
		dsmt_rb_u(&r, rs ? named_arg(rs, NAMED(reasons)) : DSMT_SRC_START);
		dsmt_rb_u(&r, name);
		kv_done();
		ev_end(&r, t, DSMT_REC_SOURCE);
	} else if (!strcmp(c, "sample")) {
		parse_kv(tok + 1, ntok - 1);
		write_header();
		uint64_t next = kv_num("next", next_seq);
		const char *proc = kv_get("proc");
		dsmt_rb_reset(&r);
		dsmt_rb_u(&r, next);
		dsmt_rb_u(&r, kv_num("ts", next));
		dsmt_rb_u(&r, dev1_arg());
		dsmt_rb_u(&r, kv_num("flags", proc ? DSMT_SAMPLE_PROC : 0));
		dsmt_rb_u(&r, proc ? num(proc) : 0);
		dsmt_rb_u(&r, kv_num("dev_used", 0));
		dsmt_rb_u(&r, kv_num("dev_total", 0));
		kv_done();
		rec(&frm, DSMT_REC_SAMPLE, &r);
	} else if (!strcmp(c, "host")) {
		parse_kv(tok + 1, ntok - 1);
		write_header();
		uint64_t next = kv_num("next", next_seq);
		dsmt_rb_reset(&r);
		dsmt_rb_u(&r, next);
		dsmt_rb_u(&r, kv_num("ts", next));
		dsmt_rb_u(&r, kv_num("rss", 0));
		dsmt_rb_u(&r, kv_num("vsz", 0));
		kv_done();
		rec(&frm, DSMT_REC_HOST, &r);
	} else if (!strcmp(c, "lost")) {
		parse_kv(tok + 1, ntok - 1);
		struct tstate *t = ev_begin(&r);
		dsmt_rb_u(&r, kv_num("count", 0));
		kv_done();
		ev_end(&r, t, DSMT_REC_LOST);
	} else if (!strcmp(c, "flush")) {
		parse_kv(tok + 1, ntok - 1);
		write_header();
		dsmt_rb_reset(&r);
		dsmt_rb_u(&r, kv_num("ts", 0));
		dsmt_rb_u(&r, kv_num("next", next_seq));
		kv_done();
		rec(&frm, DSMT_REC_FLUSH, &r);
	} else if (!strcmp(c, "raw")) {
		if (ntok < 2)
			die("raw TYPE [HEX]");
		write_header();
		static uint8_t b[65536];
		char hex[65536 * 2 + 1] = "";
		for (int i = 2; i < ntok; i++)
			strncat(hex, tok[i], sizeof(hex) - strlen(hex) - 1);
		size_t n = hexbytes(hex, b, sizeof(b));
		uint8_t h[1 + DSMT_VARINT_MAX];
		h[0] = (uint8_t)num(tok[1]);
		size_t hn = 1 + dsmt_put_uvar(h + 1, n);
		buf_put(&frm, h, hn);
		buf_put(&frm, b, n);
	} else if (!strcmp(c, "bytes") || !strcmp(c, "garbage")) {
		write_header();
		static uint8_t b[65536];
		char hex[65536 * 2 + 1] = "";
		for (int i = 1; i < ntok; i++)
			strncat(hex, tok[i], sizeof(hex) - strlen(hex) - 1);
		size_t n = hexbytes(hex, b, sizeof(b));
		if (c[0] == 'b')
			buf_put(&frm, b, n);
		else {
			end_frame();
			buf_put(&file, b, n);
		}
	} else if (!strcmp(c, "frame")) {
		end_frame();
	} else if (!strcmp(c, "skippable")) {
		if (ntok < 2)
			die("skippable MAGIC [HEX]");
		end_frame();
		static uint8_t b[65536];
		size_t n = ntok > 2 ? hexbytes(tok[2], b, sizeof(b)) : 0;
		put_le32(&file, (uint32_t)num(tok[1]));
		put_le32(&file, (uint32_t)n);
		buf_put(&file, b, n);
	} else if (!strcmp(c, "zstdframe")) {
		end_frame();
		char text[4096] = "";
		for (int i = 1; i < ntok; i++) {
			if (i > 1)
				strcat(text, " ");
			strncat(text, tok[i], sizeof(text) - strlen(text) - 2);
		}
		zframe(text, strlen(text));
	} else if (!strcmp(c, "synth")) {
		parse_kv(tok + 1, ntok - 1);
		synth();
		kv_done();
	} else if (!strcmp(c, "truncate")) {
		if (ntok != 2)
			die("truncate N");
		trunc_n = (int64_t)num(tok[1]);
		have_trunc = 1;
	} else if (!strcmp(c, "corrupt")) {
		if (ntok != 3 || ncorrupt == 64)
			die("corrupt OFF XOR");
		if (tok[1][0] == 'f') { /* fN+K: K bytes into data frame N */
			char *plus = strchr(tok[1], '+');
			if (!plus)
				die("corrupt fN+K");
			*plus = 0;
			int fi = (int)num(tok[1] + 1);
			if (fi < 1 || fi > nframes)
				die("no data frame %d yet", fi);
			corrupts[ncorrupt].off = (int64_t)(frame_starts[fi] + num(plus + 1));
		} else
			corrupts[ncorrupt].off = (int64_t)num(tok[1]);
		corrupts[ncorrupt++].x = (unsigned)num(tok[2]);
	} else {
		die("unknown command '%s'", c);
	}
}

/* ---- synthetic training-like trace ----
 * Step: push train_step; forward allocates activations (main thread);
 * backward (autograd thread) allocates gradients and frees activations in
 * reverse; the optimizer (main thread) frees gradients; pop.  The caching
 * allocator's segments (cudaMalloc from libc10_cuda) grow as needed.  Events
 * are queued per thread and written in batches, so they reach the file out of
 * seq order, as the tracer's per-thread rings do. */
struct sev {
	uint8_t type, api;
	uint64_t seq, ts, ptr, size, site, stack, tot, tres;
};

struct squeue {
	uint64_t tid;
	struct sev *v;
	size_t n;
};

static uint64_t rng = 88172645463325252ULL;
static uint64_t xr(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static size_t s_batch, s_frame;
static int synth_done;

static void squeue_flush(struct squeue *q)
{
	if (!q->n)
		return;
	thread_rec(q->tid, "");
	struct tstate *t = cur;
	struct dsmt_recbuf r;
	for (size_t i = 0; i < q->n; i++) {
		struct sev *e = &q->v[i];
		dsmt_rb_reset(&r);
		if (e->type == DSMT_REC_NVTX_PUSH) {
			dsmt_rb_u(&r, 0);
			dsmt_rb_u(&r, 1);
		} else if (e->type == DSMT_REC_NVTX_POP) {
			dsmt_rb_u(&r, 0);
		} else {
			dsmt_rb_u(&r, e->api);
			dsmt_rb_u(&r, 1);
			dsmt_rb_s(&r, (int64_t)(e->ptr - t->ptr));
			t->ptr = e->ptr;
			dsmt_rb_u(&r, e->size);
			put_mem_tail(&r, t, e->type == DSMT_REC_ALLOC, e->api, e->size, 0, e->stack, e->site, e->tot,
				     e->tres);
		}
		ev_seq = e->seq;
		ev_ts = e->ts;
		ev_end(&r, t, e->type);
	}
	q->n = 0;
	if (frm.n >= s_frame)
		end_frame();
}

static struct squeue sq[8];
static int s_nthreads;
static uint64_t s_seq, s_ts, s_alloc, s_res, s_events;

static void sq_add(int th, struct sev e)
{
	struct squeue *q = &sq[th % s_nthreads];
	e.seq = s_seq++;
	s_ts += 1 + (xr() & 15);
	e.ts = s_ts;
	q->v[q->n++] = e;
	s_events++;
	if (q->n == s_batch)
		squeue_flush(q);
}

#define TORCH_LO 0x7f0000000000ULL
#define SEG_BASE 0x7e0000000000ULL

static uint64_t s_seg_next = SEG_BASE;

static void s_reserve(uint64_t need)
{
	while (s_alloc + need > s_res) {
		uint64_t seg = 20u << 20;
		if (need > seg)
			seg = (need + (2u << 20) - 1) & ~((uint64_t)(2u << 20) - 1);
		s_res += seg;
		sq_add(0, (struct sev){.type = DSMT_REC_ALLOC, .api = DSMT_API_CUDA_MALLOC, .ptr = s_seg_next,
				       .size = seg, .site = TORCH_LO + 0x1234, .stack = 3});
		s_seg_next += seg;
	}
}

static uint64_t s_talloc(int th, uint64_t size, uint64_t slot)
{
	s_reserve(size);
	s_alloc += size;
	uint64_t ptr = SEG_BASE + slot * 0x40000;
	sq_add(th, (struct sev){.type = DSMT_REC_ALLOC, .api = DSMT_API_TORCH, .ptr = ptr, .size = size,
				.site = TORCH_LO + 0x800, .stack = 1 + (slot & 1), .tot = s_alloc, .tres = s_res});
	return ptr;
}

static void s_tfree(int th, uint64_t ptr, uint64_t size)
{
	s_alloc -= size;
	sq_add(th, (struct sev){.type = DSMT_REC_FREE, .api = DSMT_API_TORCH, .ptr = ptr, .size = size,
				.site = TORCH_LO + 0x900, .stack = 2, .tot = s_alloc, .tres = s_res});
}

static void synth(void)
{
	uint64_t events = kv_num("events", 1000000);
	s_nthreads = (int)kv_num("threads", 2);
	s_batch = kv_num("batch", 256);
	s_frame = kv_num("frame", 1 << 20);
	rng ^= kv_num("seed", 1) * 0x9E3779B97F4A7C15ULL;
	level = (int)kv_num("level", 3);
	if (s_nthreads < 1 || s_nthreads > 8 || !s_batch || s_batch > 1 << 20)
		die("synth: threads 1..8, batch 1..1M");
	for (int i = 0; i < s_nthreads; i++) {
		sq[i].tid = 1000 + (uint64_t)i;
		sq[i].v = calloc(s_batch, sizeof(struct sev));
		if (!sq[i].v)
			die("out of memory");
	}
	write_header();
	struct dsmt_recbuf r;
	dsmt_rb_reset(&r);
	dsmt_rb_u(&r, 1);
	dsmt_rb_str(&r, "train_step", 10);
	rec(&frm, DSMT_REC_STRING, &r);
	dsmt_rb_reset(&r);
	dsmt_rb_u(&r, TORCH_LO);
	dsmt_rb_u(&r, TORCH_LO);
	dsmt_rb_u(&r, TORCH_LO + 0x100000);
	const char *path = "/opt/torch/lib/libc10_cuda.so";
	dsmt_rb_str(&r, path, strlen(path));
	dsmt_rb_str(&r, "", 0);
	rec(&frm, DSMT_REC_MODULE, &r);

	/* parameters: 64 blocks, live for the whole run.  Every step repeats
	 * the same tensor sizes at the same addresses (as a training loop under
	 * the caching allocator does); only the timestamps jitter. */
	for (uint64_t i = 0; i < 64; i++)
		s_talloc(0, (1 + (i * 7919 % 8)) << 19, 4096 + i);
	enum { NACT = 200 };
	uint64_t act_ptr[NACT], act_size[NACT], grad_ptr[64], grad_size[64];
	while (s_events + 2 * NACT + 2 * 64 + 2 < events) {
		sq_add(0, (struct sev){.type = DSMT_REC_NVTX_PUSH});
		for (int i = 0; i < NACT; i++) {
			act_size[i] = (1 + ((uint64_t)i * 2654435761u >> 7) % 64) * 512 * (1 + (uint64_t)(i % 7) * 64);
			act_ptr[i] = s_talloc(0, act_size[i], (uint64_t)i);
		}
		for (int i = NACT - 1; i >= 0; i--) {
			if (i % 4 == 0 && i / 4 < 64) {
				int g = i / 4;
				grad_size[g] = (1 + ((uint64_t)g * 40503u >> 3) % 8) << 19;
				grad_ptr[g] = s_talloc(1, grad_size[g], 8192 + (uint64_t)g);
			}
			s_tfree(1, act_ptr[i], act_size[i]);
		}
		for (int g = 0; g < 50; g++)
			s_tfree(0, grad_ptr[g], grad_size[g]);
		sq_add(0, (struct sev){.type = DSMT_REC_NVTX_POP});
	}
	for (int i = 0; i < s_nthreads; i++) {
		squeue_flush(&sq[i]);
		free(sq[i].v);
	}
	end_frame();
	fprintf(stderr, "mktrace: synth: %" PRIu64 " events, final allocated %" PRIu64 ", reserved %" PRIu64 "\n",
		s_events, s_alloc, s_res);
	synth_done = 1;
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: mktrace SCRIPT|- OUT\n");
		return 1;
	}
	script_name = argv[1];
	FILE *in = strcmp(argv[1], "-") ? fopen(argv[1], "r") : stdin;
	if (!in) {
		perror(argv[1]);
		return 1;
	}
	char *line = NULL;
	size_t cap = 0;
	while (getline(&line, &cap, in) > 0) {
		lineno++;
		char *tok[256];
		int ntok = 0;
		for (char *s = strtok(line, " \t\r\n"); s && ntok < 256; s = strtok(NULL, " \t\r\n"))
			tok[ntok++] = s;
		if (!ntok || tok[0][0] == '#')
			continue;
		cmd(tok, ntok);
	}
	free(line);
	if (in != stdin)
		fclose(in);
	end_frame();
	if (have_trunc) {
		int64_t n = trunc_n < 0 ? (int64_t)file.n + trunc_n : trunc_n;
		if (n < 0)
			n = 0;
		if ((size_t)n < file.n)
			file.n = (size_t)n;
	}
	for (int i = 0; i < ncorrupt; i++) {
		int64_t off = corrupts[i].off < 0 ? (int64_t)file.n + corrupts[i].off : corrupts[i].off;
		if (off < 0 || (size_t)off >= file.n)
			die("corrupt offset %" PRId64 " outside the file (%zu bytes)", corrupts[i].off, file.n);
		file.p[off] ^= (uint8_t)corrupts[i].x;
	}
	if (synth_done) /* for benchmarks: raw = decompressed record bytes */
		fprintf(stderr, "mktrace: %zu bytes, %" PRIu64 " bytes raw in %d data frames\n", file.n, raw_total,
			nframes);
	FILE *out = fopen(argv[2], "wb");
	if (!out || (file.n && fwrite(file.p, 1, file.n, out) != file.n) || fclose(out)) {
		perror(argv[2]);
		return 1;
	}
	return 0;
}
