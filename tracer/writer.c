/* The writer thread: drains the per-thread rings, encodes records
 * (format.h), compresses one zstd frame per flush and writes it.  All file
 * I/O and compression happen here, never on a hooked thread. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

#include "encode.h"
#include "format.h"
#include "ring.h"
#include "tracer.h"

#define FRAME_RAW_MAX (4u << 20) /* end a frame after this many raw bytes */

static pthread_t writer_tid;
static _Atomic int writer_running;
static _Atomic int writer_started_flag;
static int ack_pipe[2] = {-1, -1};
static _Atomic uint64_t flush_req, flush_done;
static uint64_t cycle_start_ns, cycle_seq;
static int wake_fd = -1;
static _Atomic int stop_flag;
static int out_fd = -1;
static ZSTD_CCtx *cctx;
static uint8_t *raw, *zbuf;
static size_t raw_len, raw_cap, zbuf_cap;

/* ---- output buffer ---- */

static int raw_reserve(size_t n)
{
	if (raw_len + n <= raw_cap)
		return 0;
	size_t cap = raw_cap ? raw_cap : (1u << 20);
	while (cap < raw_len + n)
		cap *= 2;
	uint8_t *p = realloc(raw, cap);
	if (!p)
		return -1;
	raw = p;
	raw_cap = cap;
	return 0;
}

static void emit(uint8_t type, const struct dsmt_recbuf *rb)
{
	if (raw_reserve(dsmt_rec_size(rb)) == 0)
		raw_len += dsmt_rec_finish(raw + raw_len, type, rb);
}

static uint64_t out_bytes; /* written to the trace so far */

/* Writing past RLIMIT_FSIZE would send SIGXFSZ to the process — a signal
 * aimed at the whole process, whose default action kills the program (our
 * thread blocks it; another thread takes it).  So the limit is checked
 * first, every write (the program may lower it), and the trace stops short
 * of it. */
static int beyond_fsize_limit(size_t n)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_FSIZE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
		return 0;
	return out_bytes + n > (uint64_t)rl.rlim_cur;
}

static int write_all(const void *p, size_t n)
{
	if (beyond_fsize_limit(n)) {
		errno = EFBIG;
		return -1;
	}
	const uint8_t *b = p;
	while (n) {
		ssize_t w = write(out_fd, b, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		b += w;
		n -= (size_t)w;
		out_bytes += (uint64_t)w;
	}
	return 0;
}

static void fail(const char *what)
{
	if (errno == EFBIG)
		dsmt_warn("%s: the file size limit (ulimit -f, RLIMIT_FSIZE) is reached; tracing stops here "
			  "(the program continues)",
			  what);
	else
		dsmt_warn("%s: %s; tracing stops here (the program continues)", what, strerror(errno));
	dsmt_cfg.disabled = 1;
	if (out_fd >= 0)
		close(out_fd);
	out_fd = -1;
}

/* ---- per-frame thread delta state (tid -> prev seq/ts/ptr) ---- */

struct tstate {
	uint32_t tid, gen;
	uint64_t seq, ts, ptr, site, tot_alloc, tot_reserved;
};
#define TSTATES 4096
static struct tstate tstates[TSTATES];
static uint32_t frame_gen = 1;
static struct tstate *cur_thread;

static void end_frame(int final);

/* Switches the decoder's current thread (a THREAD record every time), and
 * names the thread the first time it appears in a frame. */
static void select_thread(uint32_t tid)
{
	unsigned mask = TSTATES - 1, i = (tid * 2654435761u) & mask;
	struct tstate *t = NULL;
	int first = 0;
	for (unsigned k = 0; k < TSTATES; k++, i = (i + 1) & mask) {
		if (tstates[i].gen != frame_gen) {
			t = &tstates[i];
			*t = (struct tstate){.tid = tid, .gen = frame_gen};
			first = 1;
			break;
		}
		if (tstates[i].tid == tid) {
			t = &tstates[i];
			break;
		}
	}
	if (!t) { /* more threads than slots in one frame: start a new frame */
		end_frame(0);
		frame_gen++;
		t = &tstates[(tid * 2654435761u) & mask];
		*t = (struct tstate){.tid = tid, .gen = frame_gen};
		first = 1;
	}
	cur_thread = t;
	struct dsmt_recbuf rb;
	dsmt_rb_reset(&rb);
	dsmt_rb_u(&rb, tid);
	if (first) {
		char path[64], name[32];
		snprintf(path, sizeof path, "/proc/self/task/%u/comm", tid);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		ssize_t n = fd >= 0 ? read(fd, name, sizeof name - 1) : -1;
		if (fd >= 0)
			close(fd);
		if (n > 0 && name[n - 1] == '\n')
			n--;
		if (n > 0)
			dsmt_rb_str(&rb, name, (size_t)n);
	}
	emit(DSMT_REC_THREAD, &rb);
}

static uint64_t to_units(uint64_t mono_ns)
{
	return mono_ns > dsmt_cfg.start_mono_ns ? (mono_ns - dsmt_cfg.start_mono_ns) / DSMT_TS_UNIT_NS : 0;
}

/* ---- encoding of ring records ---- */

static void put_site(struct dsmt_recbuf *rb, struct tstate *t, uint64_t site)
{
	dsmt_rb_s(rb, (int64_t)(site - t->site));
	t->site = site;
}

/* Field order and deltas: format.h.  The repeated part first, dseq and dts
 * (which differ every step) last. */
static void encode_event(const struct dsmt_ev *e)
{
	struct tstate *t = cur_thread;
	struct dsmt_recbuf rb;
	dsmt_rb_reset(&rb);
	uint64_t dev1 = e->dev >= 0 ? (uint64_t)e->dev + 1 : 0;
	switch (e->rec) {
	case DSMT_REC_ALLOC:
	case DSMT_REC_FREE:
		dsmt_rb_u(&rb, e->api);
		dsmt_rb_u(&rb, dev1);
		dsmt_rb_s(&rb, (int64_t)(e->ptr - t->ptr));
		t->ptr = e->ptr;
		dsmt_rb_u(&rb, e->size);
		dsmt_rb_u(&rb, e->stream);
		dsmt_rb_u(&rb, e->stack);
		put_site(&rb, t, e->site);
		if (e->api == DSMT_API_TORCH && e->has_tot) {
			uint64_t pred = t->tot_alloc + (e->rec == DSMT_REC_ALLOC ? e->size : -e->size);
			dsmt_rb_s(&rb, (int64_t)(e->a - pred));
			dsmt_rb_s(&rb, (int64_t)(e->b - t->tot_reserved));
			t->tot_alloc = e->a;
			t->tot_reserved = e->b;
		} else {
			dsmt_rb_u(&rb, 0);
			dsmt_rb_u(&rb, 0);
		}
		break;
	case DSMT_REC_DRV:
		dsmt_rb_u(&rb, e->api); /* op */
		dsmt_rb_u(&rb, e->a);   /* via */
		dsmt_rb_u(&rb, dev1);
		dsmt_rb_s(&rb, (int64_t)(e->ptr - t->ptr));
		t->ptr = e->ptr;
		dsmt_rb_u(&rb, e->size);
		dsmt_rb_u(&rb, e->stream); /* aux */
		dsmt_rb_u(&rb, e->stack);
		put_site(&rb, t, e->site);
		break;
	case DSMT_REC_SOURCE:
		dsmt_rb_u(&rb, e->a);
		dsmt_rb_u(&rb, e->b);
		dsmt_rb_u(&rb, e->c);
		break;
	case DSMT_REC_OOM:
		dsmt_rb_u(&rb, dev1);
		dsmt_rb_u(&rb, e->size);
		dsmt_rb_u(&rb, e->a);
		dsmt_rb_u(&rb, e->b);
		dsmt_rb_u(&rb, e->stack);
		put_site(&rb, t, e->site);
		break;
	case DSMT_REC_NVTX_PUSH:
	case DSMT_REC_NVTX_MARK:
		dsmt_rb_u(&rb, e->a);
		dsmt_rb_u(&rb, e->b);
		break;
	case DSMT_REC_NVTX_POP:
		dsmt_rb_u(&rb, e->a);
		break;
	case DSMT_REC_NVTX_START:
		dsmt_rb_u(&rb, e->c);
		dsmt_rb_u(&rb, e->a);
		dsmt_rb_u(&rb, e->b);
		break;
	case DSMT_REC_NVTX_END:
	case DSMT_REC_LOST:
		dsmt_rb_u(&rb, e->c);
		break;
	case DSMT_REC_PAUSE:
	case DSMT_REC_RESUME:
		dsmt_rb_u(&rb, dev1);
		dsmt_rb_u(&rb, e->a);
		dsmt_rb_u(&rb, e->b);
		break;
	default:
		return;
	}
	uint64_t ts = to_units(e->ts);
	dsmt_rb_u(&rb, e->seq - t->seq);
	dsmt_rb_u(&rb, ts >= t->ts ? ts - t->ts : 0);
	t->seq = e->seq;
	t->ts = ts > t->ts ? ts : t->ts;
	/* format 1.2: pystack after dts, only when there is one (ALLOC FREE OOM
	 * DRV NVTX_PUSH NVTX_START NVTX_MARK; no other event gets one) */
	if (e->pystack)
		dsmt_rb_u(&rb, e->pystack);
	emit(e->rec, &rb);
}

/* PYSTACK: id n (code_id instr)*n.  Up to DSMT_PY_MAX_DEPTH (128) frames:
 * 2 x 5 bytes each fit the record buffer. */
static void encode_pystack(const uint8_t *p)
{
	uint32_t id, n, v;
	memcpy(&id, p, 4);
	memcpy(&n, p + 4, 4);
	struct dsmt_recbuf rb;
	dsmt_rb_reset(&rb);
	dsmt_rb_u(&rb, id);
	if (n > 128)
		n = 128;
	dsmt_rb_u(&rb, n);
	for (uint32_t i = 0; i < 2 * n; i++) {
		memcpy(&v, p + 8 + 4 * (size_t)i, 4);
		dsmt_rb_u(&rb, v);
	}
	emit(DSMT_REC_PYSTACK, &rb);
}

/* PYCODE: id str(file) str(qualname) firstlineno str(linetable) pyver.
 * The line table does not fit a struct dsmt_recbuf: framed by hand. */
static void encode_pycode(const uint8_t *p, uint32_t len)
{
	uint32_t h[6];
	memcpy(h, p, sizeof h);
	const uint8_t *file = p + 24, *qual = file + h[3], *lt = qual + h[4];
	if (24ull + h[3] + h[4] + h[5] > len)
		return;
	uint8_t pre[3 * DSMT_VARINT_MAX], mid[3 * DSMT_VARINT_MAX], post[2 * DSMT_VARINT_MAX];
	size_t np = dsmt_put_uvar(pre, h[0]);
	np += dsmt_put_uvar(pre + np, h[3]);
	size_t nm = dsmt_put_uvar(mid, h[4]);
	size_t nq = dsmt_put_uvar(post, h[1]);
	nq += dsmt_put_uvar(post + nq, h[5]);
	uint8_t tail[DSMT_VARINT_MAX];
	size_t nt = dsmt_put_uvar(tail, h[2]);
	size_t payload = np + h[3] + nm + h[4] + nq + h[5] + nt;
	if (raw_reserve(1 + DSMT_VARINT_MAX + payload) != 0)
		return;
	uint8_t *o = raw + raw_len;
	*o++ = DSMT_REC_PYCODE;
	o += dsmt_put_uvar(o, payload);
	memcpy(o, pre, np), o += np;
	memcpy(o, file, h[3]), o += h[3];
	memcpy(o, mid, nm), o += nm;
	memcpy(o, qual, h[4]), o += h[4];
	memcpy(o, post, nq), o += nq;
	memcpy(o, lt, h[5]), o += h[5];
	memcpy(o, tail, nt), o += nt;
	raw_len = (size_t)(o - raw);
}

static void encode_string(const uint8_t *p, uint32_t len)
{
	uint32_t id;
	memcpy(&id, p, 4);
	struct dsmt_recbuf rb;
	dsmt_rb_reset(&rb);
	dsmt_rb_u(&rb, id);
	dsmt_rb_str(&rb, p + 4, len - 4);
	emit(DSMT_REC_STRING, &rb);
}

static void encode_stack(const uint8_t *p)
{
	uint32_t id, n;
	memcpy(&id, p, 4);
	memcpy(&n, p + 4, 4);
	struct dsmt_recbuf rb;
	dsmt_rb_reset(&rb);
	dsmt_rb_u(&rb, id);
	dsmt_rb_u(&rb, n);
	uint64_t prev = 0;
	for (uint32_t i = 0; i < n; i++) {
		uint64_t ip;
		memcpy(&ip, p + 8 + 8 * (size_t)i, 8);
		if (i == 0)
			dsmt_rb_u(&rb, ip);
		else
			dsmt_rb_s(&rb, (int64_t)(ip - prev));
		prev = ip;
	}
	emit(DSMT_REC_STACK, &rb);
}

/* Drains one segment; returns 1 when it stopped because the frame is full. */
static int drain_seg(struct dsmt_ring *r, struct dsmt_seg *g, int *announced)
{
	uint64_t head = atomic_load_explicit(&g->head, memory_order_acquire);
	uint64_t tail = atomic_load_explicit(&g->tail, memory_order_relaxed);
	int full = 0;
	while (tail < head) {
		const struct dsmt_rhdr *h = (const void *)(g->buf + (tail & (g->cap - 1)));
		const uint8_t *p = (const uint8_t *)(h + 1);
		switch (h->kind) {
		case DSMT_R_TID:
			memcpy(&r->tid, p, 4);
			*announced = 0;
			break;
		case DSMT_R_EVENT:
			if (!*announced) {
				select_thread(r->tid);
				*announced = 1;
			}
			encode_event((const struct dsmt_ev *)p);
			break;
		case DSMT_R_STRING:
			encode_string(p, h->len);
			break;
		case DSMT_R_STACK:
			encode_stack(p);
			break;
		case DSMT_R_PYSTACK:
			encode_pystack(p);
			break;
		case DSMT_R_PYCODE:
			encode_pycode(p, h->len);
			break;
		default:
			break;
		}
		tail += sizeof *h + ((h->len + 7u) & ~7u);
		if (raw_len >= FRAME_RAW_MAX) {
			full = 1; /* finish the frame; the rest comes next round */
			break;
		}
	}
	atomic_store_explicit(&g->tail, tail, memory_order_release);
	return full;
}

static void drain_ring(struct dsmt_ring *r)
{
	int announced = 0;
	for (;;) {
		struct dsmt_seg *g = atomic_load_explicit(&r->cons, memory_order_relaxed);
		if (drain_seg(r, g, &announced))
			return;
		struct dsmt_seg *next = atomic_load_explicit(&g->next, memory_order_acquire);
		if (!next)
			break;
		/* the producer moved on after its last commit here: finish, then free */
		if (drain_seg(r, g, &announced))
			return;
		atomic_store_explicit(&r->cons, next, memory_order_relaxed);
		dsmt_seg_free(g);
	}
	struct dsmt_seg *g = atomic_load_explicit(&r->cons, memory_order_relaxed);
	uint64_t tail = atomic_load_explicit(&g->tail, memory_order_relaxed);
	if (tail == atomic_load_explicit(&g->head, memory_order_acquire))
		atomic_store_explicit(&r->wake_sent, 0, memory_order_relaxed);
	int st = atomic_load_explicit(&r->state, memory_order_acquire);
	if (st == DSMT_RING_RETIRED && tail == atomic_load_explicit(&g->head, memory_order_acquire))
		atomic_store_explicit(&r->state, DSMT_RING_FREE, memory_order_release);
}

/* ---- module map ---- */

struct modseen {
	uint64_t base;
	uint64_t hash;
};
static struct modseen *mods;
static size_t nmods, capmods;
static unsigned long long last_adds = ~0ull, last_subs = ~0ull;

static uint64_t str_hash(const char *s)
{
	uint64_t h = 1469598103934665603ull;
	while (*s)
		h = (h ^ (uint8_t)*s++) * 1099511628211ull;
	return h;
}

static int module_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	if (arg) { /* first call: just read the counters */
		unsigned long long *c = arg;
		c[0] = info->dlpi_adds;
		c[1] = info->dlpi_subs;
		return 1;
	}
	const char *path = info->dlpi_name && *info->dlpi_name ? info->dlpi_name : NULL;
	char exe[4096];
	if (!path) {
		ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
		if (n <= 0)
			return 0;
		exe[n] = 0;
		path = exe;
	}
	uint64_t h = str_hash(path);
	for (size_t i = 0; i < nmods; i++)
		if (mods[i].base == info->dlpi_addr && mods[i].hash == h)
			return 0;
	uint64_t lo = ~0ull, hi = 0;
	const uint8_t *bid = NULL;
	size_t bidlen = 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type == PT_LOAD) {
			uint64_t a = info->dlpi_addr + ph->p_vaddr;
			lo = a < lo ? a : lo;
			hi = a + ph->p_memsz > hi ? a + ph->p_memsz : hi;
		} else if (ph->p_type == PT_NOTE && !bid) {
			const uint8_t *n = (const uint8_t *)(info->dlpi_addr + ph->p_vaddr);
			const uint8_t *end = n + ph->p_memsz;
			while (n + 12 <= end) {
				uint32_t namesz, descsz, type;
				memcpy(&namesz, n, 4);
				memcpy(&descsz, n + 4, 4);
				memcpy(&type, n + 8, 4);
				const uint8_t *name = n + 12;
				const uint8_t *desc = name + ((namesz + 3) & ~3u);
				if (desc + descsz > end)
					break;
				if (type == 3 /* NT_GNU_BUILD_ID */ && namesz == 4 && !memcmp(name, "GNU", 4)) {
					bid = desc;
					bidlen = descsz;
					break;
				}
				n = desc + ((descsz + 3) & ~3u);
			}
		}
	}
	if (hi == 0)
		return 0;
	if (nmods == capmods) {
		size_t c = capmods ? capmods * 2 : 64;
		struct modseen *m = realloc(mods, c * sizeof *m);
		if (!m)
			return 1;
		mods = m;
		capmods = c;
	}
	mods[nmods++] = (struct modseen){info->dlpi_addr, h};
	struct dsmt_recbuf rb;
	dsmt_rb_reset(&rb);
	dsmt_rb_u(&rb, info->dlpi_addr);
	dsmt_rb_u(&rb, lo);
	dsmt_rb_u(&rb, hi);
	dsmt_rb_str(&rb, path, strlen(path));
	dsmt_rb_str(&rb, bid, bidlen);
	emit(DSMT_REC_MODULE, &rb);
	return 0;
}

static void update_modules(void)
{
	unsigned long long c[2];
	dl_iterate_phdr(module_cb, c);
	if (c[0] == last_adds && c[1] == last_subs)
		return;
	last_adds = c[0];
	last_subs = c[1];
	dl_iterate_phdr(module_cb, NULL);
}

/* ---- frames ---- */

static uint8_t hist[DSMT_PREFIX_BYTES];
static size_t hist_len;

static void hist_append(const uint8_t *p, size_t n)
{
	if (n >= sizeof hist) {
		memcpy(hist, p + n - sizeof hist, sizeof hist);
		hist_len = sizeof hist;
		return;
	}
	if (hist_len + n > sizeof hist) {
		size_t drop = hist_len + n - sizeof hist;
		memmove(hist, hist + drop, hist_len - drop);
		hist_len -= drop;
	}
	memcpy(hist + hist_len, p, n);
	hist_len += n;
}

/* Ends the current frame.  The last frame of a drain cycle carries a FLUSH
 * record with the cycle's start: everything committed before it is written. */
static void end_frame(int final)
{
	if (out_fd < 0 || raw_len == 0)
		return;
	if (final) {
		struct dsmt_recbuf rb;
		dsmt_rb_reset(&rb);
		dsmt_rb_u(&rb, to_units(cycle_start_ns));
		dsmt_rb_u(&rb, cycle_seq);
		emit(DSMT_REC_FLUSH, &rb);
	}
	size_t bound = ZSTD_compressBound(raw_len);
	if (bound > zbuf_cap) {
		uint8_t *z = realloc(zbuf, bound);
		if (!z) {
			raw_len = 0;
			return;
		}
		zbuf = z;
		zbuf_cap = bound;
	}
	/* the last DSMT_PREFIX_BYTES of earlier frames as a prefix (format.h) */
	size_t zn = ZSTD_CCtx_refPrefix(cctx, hist, hist_len);
	if (!ZSTD_isError(zn))
		zn = ZSTD_compress2(cctx, zbuf, zbuf_cap, raw, raw_len);
	hist_append(raw, raw_len);
	raw_len = 0;
	frame_gen++;
	cur_thread = NULL;
	if (ZSTD_isError(zn)) {
		errno = EIO;
		fail("zstd compression failed");
		return;
	}
	if (write_all(zbuf, zn) != 0)
		fail("cannot write the trace");
}

/* NVML samples (nvml.c), every DSMEMTRACE_SAMPLE_MS (default 1000, 0 = off) */
static uint64_t sample_every_ns = ~0ull, next_sample_ns;

static void emit_sample(int dev, unsigned flags, uint64_t proc, uint64_t used, uint64_t total)
{
	struct dsmt_recbuf rb;
	dsmt_rb_reset(&rb);
	dsmt_rb_u(&rb, atomic_load(&dsmt_seq));
	dsmt_rb_u(&rb, to_units(dsmt_now_ns()));
	dsmt_rb_u(&rb, (uint64_t)dev + 1);
	dsmt_rb_u(&rb, flags);
	dsmt_rb_u(&rb, proc);
	dsmt_rb_u(&rb, used);
	dsmt_rb_u(&rb, total);
	emit(DSMT_REC_SAMPLE, &rb);
}

static void maybe_sample(uint64_t now)
{
	if (sample_every_ns == ~0ull) {
		const char *e = secure_getenv("DSMEMTRACE_SAMPLE_MS");
		long ms = e && *e ? strtol(e, NULL, 10) : 1000;
		sample_every_ns = ms > 0 ? (uint64_t)ms * 1000000ull : 0;
	}
	if (!sample_every_ns || now < next_sample_ns)
		return;
	next_sample_ns = now + sample_every_ns;
	dsmt_nvml_sample(emit_sample);
}

/* Host memory (format 1.3 HOST records): the process's RSS and virtual size
 * from /proc/self/statm, every DSMEMTRACE_HOST_SAMPLE_MS (default 100, 0 =
 * off), on the writer thread's cycle, and at step boundaries: an NVTX step
 * range's push and pop or a dsmemtrace: mark (interpose/nvtx.c) asks for one
 * through dsmt_host_sample_soon(), which wakes the writer.  One pread of a
 * descriptor kept open: no allocation. */
static uint64_t host_every_ns = ~0ull, next_host_ns;
static atomic_int host_wanted;

void dsmt_host_sample_soon(void)
{
	atomic_store_explicit(&host_wanted, 1, memory_order_relaxed);
	dsmt_writer_wake();
}

static int statm_fd = -2;
static uint64_t page_bytes;

static void maybe_host_sample(uint64_t now)
{
	if (host_every_ns == ~0ull) {
		const char *e = secure_getenv("DSMEMTRACE_HOST_SAMPLE_MS");
		long ms = e && *e ? strtol(e, NULL, 10) : 100;
		host_every_ns = ms > 0 ? (uint64_t)ms * 1000000ull : 0;
		long pg = sysconf(_SC_PAGESIZE);
		page_bytes = pg > 0 ? (uint64_t)pg : 4096;
	}
	int asked = atomic_exchange_explicit(&host_wanted, 0, memory_order_relaxed);
	if (!host_every_ns || (now < next_host_ns && !asked))
		return;
	next_host_ns = now + host_every_ns;
	if (statm_fd == -2)
		statm_fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
	if (statm_fd < 0)
		return;
	char b[128];
	ssize_t n = pread(statm_fd, b, sizeof b - 1, 0);
	if (n <= 0)
		return;
	b[n] = 0;
	/* "size resident shared text lib data dt", in pages */
	char *p = b, *q;
	unsigned long long vsz = strtoull(p, &q, 10);
	if (q == p)
		return;
	p = q;
	unsigned long long rss = strtoull(p, &q, 10);
	if (q == p)
		return;
	struct dsmt_recbuf rb;
	dsmt_rb_reset(&rb);
	dsmt_rb_u(&rb, atomic_load(&dsmt_seq));
	dsmt_rb_u(&rb, to_units(dsmt_now_ns()));
	dsmt_rb_u(&rb, (uint64_t)rss * page_bytes);
	dsmt_rb_u(&rb, (uint64_t)vsz * page_bytes);
	emit(DSMT_REC_HOST, &rb);
}

static void drain_all(void)
{
	cycle_start_ns = dsmt_now_ns();
	cycle_seq = atomic_load(&dsmt_seq);
	update_modules();
	maybe_sample(cycle_start_ns);
	maybe_host_sample(cycle_start_ns);
	int again;
	do {
		again = 0;
		for (struct dsmt_ring *r = atomic_load(&dsmt_rings); r; r = r->next) {
			drain_ring(r);
			if (raw_len >= FRAME_RAW_MAX) {
				end_frame(0);
				again = 1;
			}
		}
	} while (again && out_fd >= 0);
	end_frame(1);
}

/* ---- header ---- */

static void meta(const char *k, const void *v, size_t n)
{
	struct dsmt_recbuf rb;
	dsmt_rb_reset(&rb);
	dsmt_rb_str(&rb, k, strlen(k));
	dsmt_rb_str(&rb, v, n);
	emit(DSMT_REC_META, &rb);
}

static void meta_s(const char *k, const char *v) { meta(k, v, strlen(v)); }

static void meta_u(const char *k, unsigned long long v)
{
	char b[32];
	snprintf(b, sizeof b, "%llu", v);
	meta_s(k, b);
}

static const char *env_first(const char *const *names)
{
	for (; *names; names++) {
		const char *v = secure_getenv(*names);
		if (v && *v)
			return v;
	}
	return NULL;
}

static const char *const RANK_VARS[] = {"RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", NULL};
static const char *const LOCAL_VARS[] = {"LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", NULL};
static const char *const WORLD_VARS[] = {"WORLD_SIZE", "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", NULL};

/* The trace file is written under a temporary name and given its real name
 * only once its header is complete (link(2), which refuses an existing name,
 * so nothing is ever clobbered): a process killed at any moment never leaves
 * a file that does not decode.  Returns the fd; `path` receives the final
 * name.  A name taken already (same pid in another container, an exec'd image
 * of the same process) gets a numeric suffix. */
static int open_trace_tmp(char *tmp, size_t cap)
{
	/* an unnamed file where the filesystem can (nothing is left behind by a
	 * SIGKILL before it is named), else a hidden temporary name */
	mode_t mode = dsmt_cfg.file_mode ? (mode_t)dsmt_cfg.file_mode : 0600;
	int fd = open(dsmt_cfg.dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, mode);
	if (fd >= 0) {
		snprintf(tmp, cap, "/proc/self/fd/%d", fd);
		return fd;
	}
	snprintf(tmp, cap, "%s/.dsmemtrace.%d.%llx.tmp", dsmt_cfg.dir, (int)getpid(),
		 (unsigned long long)dsmt_now_ns());
	return open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
}

/* Removes a temporary trace that never got its name (an unnamed O_TMPFILE
 * goes with its descriptor). */
static void drop_tmp(const char *tmp)
{
	if (strncmp(tmp, "/proc/self/fd/", 14))
		unlink(tmp);
}

/* What holds a name the trace could not take: NULL for an earlier trace
 * (an exec'd image of this process, a pid seen in an earlier run: a numeric
 * suffix is expected there), else a description for the one stderr line.
 * Looks without following links or blocking on a FIFO. */
static const char *squatter(const char *path)
{
	struct stat st;
	if (lstat(path, &st) != 0)
		return NULL;
	if (S_ISLNK(st.st_mode))
		return "a symbolic link";
	if (!S_ISREG(st.st_mode))
		return "something other than a regular file";
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	uint8_t b[8 + DSMT_MAGIC_LEN];
	ssize_t n = fd >= 0 ? pread(fd, b, sizeof b, 0) : -1;
	if (fd >= 0)
		close(fd);
	uint32_t magic = DSMT_SKIPPABLE_MAGIC;
	if (n == (ssize_t)sizeof b && !memcmp(b, &magic, 4) && !memcmp(b + 8, DSMT_MAGIC, DSMT_MAGIC_LEN))
		return NULL;
	return "a file that is not a dsmemtrace trace";
}

static int publish_trace(const char *tmp, char *path, size_t cap)
{
	char taken[2048] = "";
	const char *what = NULL;
	char host[256] = "unknown";
	gethostname(host, sizeof host - 1);
	for (char *c = host; *c; c++)
		if (*c == '/')
			*c = '_';
	const char *rank = env_first(RANK_VARS);
	char rk[64] = "";
	if (rank)
		snprintf(rk, sizeof rk, ".rank%.40s", rank);
	for (int i = 0; i < 1000; i++) {
		char sfx[16] = "";
		if (i)
			snprintf(sfx, sizeof sfx, ".%d", i);
		snprintf(path, cap, "%s/dsmemtrace.%s.%d%s%s.zst", dsmt_cfg.dir, host, (int)getpid(), rk, sfx);
		int unnamed = !strncmp(tmp, "/proc/self/fd/", 14);
		int rc = unnamed ? linkat(AT_FDCWD, tmp, AT_FDCWD, path, AT_SYMLINK_FOLLOW) : link(tmp, path);
		if (rc != 0 && errno != EEXIST && !unnamed)
			rc = renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RENAME_NOREPLACE); /* no hard links here */
		if (rc == 0) {
			if (!unnamed)
				unlink(tmp); /* fails harmlessly after a rename */
			if (what)
				dsmt_warn("%s is %s: left alone (never followed or replaced); this trace is %s", taken, what,
					  path);
			return 0;
		}
		if (errno != EEXIST)
			return -1;
		if (i == 0 && (what = squatter(path)))
			snprintf(taken, sizeof taken, "%s", path);
	}
	errno = EEXIST;
	return -1;
}

static void read_file(const char *p, char *buf, size_t cap, size_t *len)
{
	*len = 0;
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	ssize_t n;
	while (*len < cap && (n = read(fd, buf + *len, cap - *len)) > 0)
		*len += (size_t)n;
	close(fd);
}

static int find_lib_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	const char **want = arg; /* want[0] = substring, want[1] = result */
	if (info->dlpi_name && strstr(info->dlpi_name, want[0])) {
		want[1] = info->dlpi_name;
		return 1;
	}
	return 0;
}

static const char *find_lib(const char *sub)
{
	const char *w[2] = {sub, NULL};
	dl_iterate_phdr(find_lib_cb, w);
	return w[1];
}

/* Versions of what is already loaded; never loads anything new. */
static void versions(void)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
	if (h) {
		int (*f)(int *) = (int (*)(int *))dlsym(h, "cuDriverGetVersion");
		int v = 0;
		if (f && f(&v) == 0)
			meta_u("cuda_driver_version", (unsigned)v);
		dlclose(h);
	}
	const char *rt = find_lib("libcudart.so");
	if (rt && (h = dlopen(rt, RTLD_NOW | RTLD_NOLOAD))) {
		int (*f)(int *) = (int (*)(int *))dlsym(h, "cudaRuntimeGetVersion");
		int v = 0;
		if (f && f(&v) == 0)
			meta_u("cuda_runtime_version", (unsigned)v);
		dlclose(h);
	}
	const char *c10 = find_lib("/libc10.so");
	if (c10) {
		char p[4096], buf[4096];
		size_t n;
		snprintf(p, sizeof p, "%s", c10);
		char *slash = strrchr(p, '/');
		if (slash) {
			*slash = 0; /* .../torch/lib */
			slash = strrchr(p, '/');
			if (slash) {
				snprintf(slash, sizeof p - (size_t)(slash - p), "/version.py");
				read_file(p, buf, sizeof buf - 1, &n);
				buf[n] = 0;
				char *v = strstr(buf, "__version__");
				char *q1 = v ? strchr(v, '\'') : NULL;
				if (!q1 && v)
					q1 = strchr(v, '"');
				char *q2 = q1 ? strchr(q1 + 1, *q1) : NULL;
				if (q2)
					meta("torch_version", q1 + 1, (size_t)(q2 - q1 - 1));
			}
		}
	}
}

/* Start time of a process in clock ticks since boot (/proc/PID/stat field 22). */
static unsigned long long proc_start(int pid)
{
	char p[64], buf[1024];
	size_t n;
	snprintf(p, sizeof p, "/proc/%d/stat", pid);
	read_file(p, buf, sizeof buf - 1, &n);
	buf[n] = 0;
	char *c = strrchr(buf, ')'); /* comm may hold spaces and parentheses */
	if (!c)
		return 0;
	int field = 2;
	for (char *q = c + 1; *q; q++)
		if (*q == ' ' && ++field == 22)
			return strtoull(q + 1, NULL, 10);
	return 0;
}

/* Files of one run share a run id: DSMEMTRACE_RUN_ID, else TORCHELASTIC_RUN_ID,
 * else SLURM's job and step, else — for ranks started by a launcher (RANK or
 * WORLD_SIZE set) — host, launcher (parent) pid and its start time, else host,
 * own pid and own start time. */
static void run_id(char *out, size_t cap, const char *host)
{
	const char *v = secure_getenv("DSMEMTRACE_RUN_ID");
	if (!v || !*v)
		v = secure_getenv("TORCHELASTIC_RUN_ID");
	if (v && *v) {
		snprintf(out, cap, "%s", v);
		return;
	}
	const char *job = secure_getenv("SLURM_JOB_ID");
	if (job && *job) {
		const char *step = secure_getenv("SLURM_STEP_ID");
		snprintf(out, cap, "slurm-%s.%s", job, step && *step ? step : "0");
		return;
	}
	int pid = env_first(RANK_VARS) || env_first(WORLD_VARS) ? (int)getppid() : (int)getpid();
	snprintf(out, cap, "%s-%d-%llu", host, pid, proc_start(pid));
}

static int write_header(void)
{
	char host[256] = "unknown", buf[65536];
	size_t n;
	gethostname(host, sizeof host - 1);
	meta_s("host", host);
	meta_u("pid", (unsigned)getpid());
	meta_u("ppid", (unsigned)getppid());
	const char *v;
	if ((v = env_first(RANK_VARS)))
		meta_s("rank", v);
	if ((v = env_first(LOCAL_VARS)))
		meta_s("local_rank", v);
	if ((v = env_first(WORLD_VARS)))
		meta_s("world_size", v);
	read_file("/proc/self/cmdline", buf, sizeof buf, &n);
	if (n && buf[n - 1] == 0)
		n--;
	meta("cmdline", buf, n);
	ssize_t en = readlink("/proc/self/exe", buf, sizeof buf - 1);
	meta("exe", buf, en > 0 ? (size_t)en : 0);
	meta_u("start_realtime_ns", dsmt_cfg.start_real_ns);
	meta_u("start_mono_ns", dsmt_cfg.start_mono_ns);
	meta_u("ts_unit_ns", DSMT_TS_UNIT_NS);
	meta_s("tracer_version", DSMT_VERSION);
	meta_u("native_depth", (unsigned)dsmt_cfg.native_depth);
	meta_u("zstd_prefix_bytes", DSMT_PREFIX_BYTES);
	char rid[512];
	run_id(rid, sizeof rid, host);
	meta_s("run_id", rid);

	uint8_t hdr[8 + DSMT_MAGIC_LEN + 4];
	uint32_t magic = DSMT_SKIPPABLE_MAGIC, size = (uint32_t)(DSMT_MAGIC_LEN + 4 + raw_len);
	memcpy(hdr, &magic, 4); /* little-endian hosts only (x86-64, aarch64) */
	memcpy(hdr + 4, &size, 4);
	memcpy(hdr + 8, DSMT_MAGIC, DSMT_MAGIC_LEN);
	uint16_t major = DSMT_FORMAT_MAJOR, minor = DSMT_FORMAT_MINOR;
	memcpy(hdr + 8 + DSMT_MAGIC_LEN, &major, 2);
	memcpy(hdr + 10 + DSMT_MAGIC_LEN, &minor, 2);
	int rc = write_all(hdr, sizeof hdr) || write_all(raw, raw_len);
	raw_len = 0;
	return rc;
}

/* ---- the thread ---- */

static void ack_flush(uint64_t req)
{
	if (req <= atomic_load(&flush_done))
		return;
	atomic_store(&flush_done, req);
	if (ack_pipe[1] >= 0) {
		ssize_t r = write(ack_pipe[1], "", 1);
		(void)r;
	}
}

static void *writer_main(void *arg)
{
	(void)arg;
	dsmt_in_hook = 1; /* nothing this thread does is traced */
	/* loaded here, not in a hook: a hook may run under the allocator's
	 * mutex, and dlopen takes the loader lock */
	if (dsmt_cfg.native_depth > 0 && dsmt_unwind_init() == 0)
		atomic_store_explicit(&dsmt_unwind_ready, 1, memory_order_release);
	char path[2048], tmp[2048];
	out_fd = open_trace_tmp(tmp, sizeof tmp);
	if (out_fd < 0) {
		char what[1200];
		snprintf(what, sizeof what, "cannot create a trace file in %s%s", dsmt_cfg.dir,
			 secure_getenv("DSMEMTRACE_DIR") ? "" : " (the working directory; DSMEMTRACE_DIR sets another)");
		fail(what);
		ack_flush(~0ull >> 1);
		return NULL;
	}
	cctx = ZSTD_createCCtx();
	if (!cctx || ZSTD_isError(ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, 3)) ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1))) {
		errno = ENOMEM;
		fail("cannot set up zstd");
		drop_tmp(tmp);
		ack_flush(~0ull >> 1);
		return NULL;
	}
	if (write_header() != 0) {
		fail("cannot write the trace header");
		drop_tmp(tmp);
		ack_flush(~0ull >> 1);
		return NULL;
	}
	if (publish_trace(tmp, path, sizeof path) != 0) {
		char what[1200];
		snprintf(what, sizeof what, "cannot name the trace file in %s", dsmt_cfg.dir);
		fail(what);
		drop_tmp(tmp);
		ack_flush(~0ull >> 1);
		return NULL;
	}
	versions();
	struct pollfd pfd = {.fd = wake_fd, .events = POLLIN};
	while (!atomic_load(&stop_flag) && out_fd >= 0) {
		poll(&pfd, 1, (int)dsmt_cfg.flush_ms);
		uint64_t junk;
		if (pfd.revents & POLLIN)
			while (read(wake_fd, &junk, sizeof junk) < 0 && errno == EINTR)
				;
		dsmt_toggle_apply();
		uint64_t req = atomic_load(&flush_req); /* asked before this drain */
		drain_all();
		ack_flush(req);
	}
	if (out_fd >= 0) {
		uint64_t req = atomic_load(&flush_req);
		drain_all();
		ack_flush(req);
		close(out_fd);
		out_fd = -1;
	}
	ack_flush(~0ull >> 1); /* nobody waits for a writer that is gone */
	return NULL;
}

static void atfork_child(void)
{
	/* The writer thread does not exist in a forked child: the child stays
	 * silent rather than write into the parent's file (README). */
	dsmt_cfg.disabled = 1;
	atomic_store(&writer_running, 0);
}

int dsmt_writer_started(void) { return atomic_load_explicit(&writer_started_flag, memory_order_acquire); }

int dsmt_is_writer_thread(void)
{
	return atomic_load(&writer_running) && pthread_equal(pthread_self(), writer_tid);
}

/* Async-signal-safe (atomics, write, poll, read). */
int dsmt_writer_flush_sync(int timeout_ms)
{
	if (!atomic_load(&writer_running) || dsmt_is_writer_thread())
		return -1;
	uint64_t want = atomic_fetch_add(&flush_req, 1) + 1;
	dsmt_writer_wake();
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		if (atomic_load(&flush_done) >= want)
			return 0;
		clock_gettime(CLOCK_MONOTONIC, &t);
		long left = timeout_ms - ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000);
		if (left <= 0)
			return -1;
		struct pollfd p = {.fd = ack_pipe[0], .events = POLLIN};
		if (poll(&p, 1, (int)(left < 20 ? left : 20)) > 0) {
			char b[64];
			ssize_t r = read(ack_pipe[0], b, sizeof b);
			(void)r;
		}
	}
}

void dsmt_writer_wake(void)
{
	if (wake_fd >= 0) {
		uint64_t one = 1;
		ssize_t r = write(wake_fd, &one, sizeof one);
		(void)r;
	}
}

void (*dsmt_before_final_drain)(void);

void dsmt_writer_stop(void)
{
	if (!atomic_load(&writer_running))
		return;
	if (dsmt_before_final_drain)
		dsmt_before_final_drain();
	atomic_store(&writer_running, 0);
	atomic_store(&stop_flag, 1);
	dsmt_writer_wake();
	struct timespec dl;
	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += 10;
	if (pthread_timedjoin_np(writer_tid, NULL, &dl) != 0)
		dsmt_warn("writer thread did not finish within 10 s; the trace may end early");
}

void dsmt_writer_start(void)
{
	wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (pipe2(ack_pipe, O_CLOEXEC | O_NONBLOCK) != 0)
		ack_pipe[0] = ack_pipe[1] = -1;
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int rc = pthread_create(&writer_tid, NULL, writer_main, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0) {
		dsmt_warn("cannot start the writer thread (%s); tracing off", strerror(rc));
		dsmt_cfg.disabled = 1;
		return;
	}
	atomic_store(&writer_running, 1);
	atomic_store_explicit(&writer_started_flag, 1, memory_order_release);
	pthread_atfork(NULL, NULL, atfork_child);
	atexit(dsmt_writer_stop);
	dsmt_signals_install();
}
