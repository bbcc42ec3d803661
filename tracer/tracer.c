/* Event recording: per-thread rings, sequence numbers, interning. */
#include "tracer.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/auxv.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "format.h"
#include "ring.h"

struct dsmt_config dsmt_cfg;
__thread int dsmt_in_hook DSMT_TLS;
static __thread struct dsmt_ring *self_ring DSMT_TLS;

struct dsmt_ring *_Atomic dsmt_rings;
_Atomic uint64_t dsmt_seq;
static _Atomic uint32_t next_string_id = 1, next_stack_id = 1, next_pystack_id = 1;
uint32_t (*dsmt_py_hook)(int py);
static pthread_key_t ring_key;
static pthread_once_t ring_key_once = PTHREAD_ONCE_INIT;
static pthread_once_t start_once = PTHREAD_ONCE_INIT;
/* DSMEMTRACE_SELFTIME: the first events pay for starting up (writer thread,
 * first page faults of each buffer); steady state is reported apart */
#define SELF_WARMUP 2000
static _Atomic uint64_t self_ns_total, self_events, self_ns_warm;
/* set by the writer thread once libunwind is loaded: hooks never dlopen */
_Atomic int dsmt_unwind_ready;

uint64_t dsmt_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* One line on stderr, no stdio (may run under foreign locks). */
void dsmt_warn(const char *fmt, ...)
{
	char buf[512];
	int n = snprintf(buf, sizeof buf, "dsmemtrace[%d]: ", (int)getpid());
	va_list ap;
	va_start(ap, fmt);
	int m = vsnprintf(buf + n, sizeof buf - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (m < 0)
		m = 0;
	n += m;
	if (n > (int)sizeof buf - 2)
		n = (int)sizeof buf - 2;
	buf[n++] = '\n';
	for (ssize_t off = 0, w; off < n; off += w)
		if ((w = write(2, buf + off, (size_t)(n - off))) <= 0 && errno != EINTR)
			break;
}

static long env_long(const char *name, long def, long lo, long hi)
{
	const char *s = secure_getenv(name);
	if (!s || !*s)
		return def;
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || *end || v < lo || v > hi) {
		dsmt_warn("ignoring %s=%s (expected an integer in [%ld, %ld])", name, s, lo, hi);
		return def;
	}
	return v;
}

static void stack_report(void);

/* NVTX handler time, [0] while recording, [1] while paused (the handlers
 * keep the range stack then too) */
static _Atomic uint64_t self_nvtx_ns[2], self_nvtx_events[2];

void dsmt_selftime_nvtx(uint64_t t0)
{
	int k = atomic_load_explicit(&dsmt_paused, memory_order_relaxed) != 0;
	atomic_fetch_add_explicit(&self_nvtx_ns[k], dsmt_now_ns() - t0, memory_order_relaxed);
	atomic_fetch_add_explicit(&self_nvtx_events[k], 1, memory_order_relaxed);
}

static void selftime_report(void)
{
	uint64_t nr = atomic_load(&self_nvtx_events[0]), np = atomic_load(&self_nvtx_events[1]);
	if (nr || np)
		dsmt_warn("selftime: %llu NVTX push/pop, %.1f ns each; recording %llu, %.1f ns each; paused %llu, %.1f ns each",
			  (unsigned long long)(nr + np),
			  (double)(atomic_load(&self_nvtx_ns[0]) + atomic_load(&self_nvtx_ns[1])) / (double)(nr + np),
			  (unsigned long long)nr, nr ? (double)atomic_load(&self_nvtx_ns[0]) / (double)nr : 0.0,
			  (unsigned long long)np, np ? (double)atomic_load(&self_nvtx_ns[1]) / (double)np : 0.0);
	uint64_t n = atomic_load(&self_events), t = atomic_load(&self_ns_total);
	uint64_t w = atomic_load(&self_ns_warm), nw = n < SELF_WARMUP ? n : SELF_WARMUP;
	if (n == 0)
		return; /* a process that recorded nothing says nothing */
	dsmt_warn("selftime: %llu events, %llu ns total, %.1f ns/event (native depth %d); "
		  "first %llu events %.1f ns/event, after them %.1f ns/event",
		  (unsigned long long)n, (unsigned long long)t, n ? (double)t / (double)n : 0.0,
		  dsmt_cfg.native_depth, (unsigned long long)nw, nw ? (double)w / (double)nw : 0.0,
		  n > nw ? (double)(t - w) / (double)(n - nw) : 0.0);
}

void dsmt_config_init(void)
{
	struct timespec rt;
	clock_gettime(CLOCK_REALTIME, &rt);
	dsmt_cfg.start_mono_ns = dsmt_now_ns();
	dsmt_cfg.start_real_ns = (uint64_t)rt.tv_sec * 1000000000ull + (uint64_t)rt.tv_nsec;
	/* A set-user-ID or set-group-ID program (or one with file capabilities):
	 * the environment belongs to someone less privileged.  The library does
	 * nothing at all — no file, no environment variable, no message — as if
	 * DSMEMTRACE_DISABLE=1 (hooks only forward).  secure_getenv would return
	 * NULL for every setting, which would still trace into the working
	 * directory with the program's privileges. */
	if (getauxval(AT_SECURE)) {
		dsmt_cfg.secure = 1;
		dsmt_cfg.disabled = 1;
		snprintf(dsmt_cfg.dir, sizeof dsmt_cfg.dir, "/nonexistent");
		return;
	}
	const char *dir = secure_getenv("DSMEMTRACE_DIR");
	snprintf(dsmt_cfg.dir, sizeof dsmt_cfg.dir, "%s", dir && *dir ? dir : ".");
	dsmt_cfg.flush_ms = (unsigned)env_long("DSMEMTRACE_FLUSH_MS", 200, 1, 60000);
	dsmt_cfg.native_depth = (int)env_long("DSMEMTRACE_NATIVE_DEPTH", DSMT_DEFAULT_NATIVE_DEPTH, 0, DSMT_MAX_DEPTH);
	dsmt_cfg.selftime = (int)env_long("DSMEMTRACE_SELFTIME", 0, 0, 1);
	dsmt_cfg.stack_cache = (int)env_long("DSMEMTRACE_STACK_CACHE", 0, 0, 1); /* off: wrong in torch (decisions.md) */
	dsmt_cfg.stack_check = (int)env_long("DSMEMTRACE_STACK_CHECK", 0, 0, 1);
	dsmt_cfg.nvtx_frames = (int)env_long("DSMEMTRACE_NVTX_FRAMES", 0, 0, 1);
	long kb = env_long("DSMEMTRACE_BUFFER_KB", 1024, 64, 1 << 20);
	uint64_t cap = 64 * 1024;
	while (cap < (uint64_t)kb * 1024)
		cap <<= 1;
	dsmt_cfg.ring_bytes = cap;
	dsmt_cfg.max_buffer_bytes = (uint64_t)env_long("DSMEMTRACE_MAX_BUFFER_MB", 1024, 1, 1 << 20) << 20;
	dsmt_cfg.disabled = (int)env_long("DSMEMTRACE_DISABLE", 0, 0, 1);
	dsmt_cfg.file_mode = 0600;
	const char *fm = secure_getenv("DSMEMTRACE_FILE_MODE");
	if (fm && *fm) {
		char *end;
		errno = 0;
		unsigned long m = strtoul(fm, &end, 8);
		if (errno || *end || m > 0777 || !(m & 0200))
			dsmt_warn("ignoring DSMEMTRACE_FILE_MODE=%s (expected octal permissions with the owner's write bit, "
				  "e.g. 0640); the trace is written with mode 0600",
				  fm);
		else
			dsmt_cfg.file_mode = (unsigned)m;
	}
	const char *ts = secure_getenv("DSMEMTRACE_TOGGLE_SIGNAL");
	if (ts && *ts) {
		int sig = 0;
		const char *n = strncmp(ts, "SIG", 3) == 0 ? ts + 3 : ts;
		if (!strcmp(n, "USR1"))
			sig = SIGUSR1;
		else if (!strcmp(n, "USR2"))
			sig = SIGUSR2;
		else if (!strcmp(n, "HUP"))
			sig = SIGHUP;
		else if (!strcmp(n, "WINCH"))
			sig = SIGWINCH;
		else if (!strncmp(n, "RTMIN+", 6))
			sig = SIGRTMIN + atoi(n + 6);
		else {
			char *end;
			long v = strtol(n, &end, 10);
			sig = (*end || v < 1 || v >= NSIG) ? 0 : (int)v;
		}
		if (!sig || sig == SIGKILL || sig == SIGSTOP || sig == SIGSEGV || sig == SIGTERM || sig == SIGINT ||
		    sig == SIGABRT)
			dsmt_warn("ignoring DSMEMTRACE_TOGGLE_SIGNAL=%s (use USR1, USR2, HUP, WINCH, RTMIN+n or a number)", ts);
		else
			dsmt_cfg.toggle_signal = sig;
	}
	if (dsmt_cfg.selftime)
		atexit(selftime_report);
	if (dsmt_cfg.stack_check)
		atexit(stack_report);
}

/* ---- rings ---- */

static void ring_retire(void *p)
{
	struct dsmt_ring *r = p;
	if (self_ring == r)
		self_ring = NULL;
	atomic_store_explicit(&r->state, DSMT_RING_RETIRED, memory_order_release);
}

static void ring_key_init(void) { pthread_key_create(&ring_key, ring_retire); }

static void *ring_reserve(struct dsmt_ring *r, uint32_t kind, uint32_t len, uint64_t *newhead);
static void ring_commit(struct dsmt_ring *r, uint64_t newhead);

_Atomic uint64_t dsmt_buffer_bytes;

static struct dsmt_seg *seg_new(uint64_t cap)
{
	uint64_t limit = dsmt_cfg.max_buffer_bytes;
	if (atomic_fetch_add(&dsmt_buffer_bytes, cap) + cap > limit) {
		atomic_fetch_sub(&dsmt_buffer_bytes, cap);
		return NULL;
	}
	size_t hdr = (sizeof(struct dsmt_seg) + 63) & ~(size_t)63;
	void *mem = mmap(NULL, hdr + cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED) {
		atomic_fetch_sub(&dsmt_buffer_bytes, cap);
		return NULL;
	}
	struct dsmt_seg *s = mem;
	s->buf = (uint8_t *)mem + hdr;
	s->cap = cap;
	return s;
}

void dsmt_seg_free(struct dsmt_seg *s)
{
	size_t hdr = (sizeof(struct dsmt_seg) + 63) & ~(size_t)63;
	atomic_fetch_sub(&dsmt_buffer_bytes, s->cap);
	munmap(s, hdr + s->cap);
}

static struct dsmt_ring *ring_get(void)
{
	struct dsmt_ring *r = self_ring;
	if (__builtin_expect(r != NULL, 1))
		return r;
	pthread_once(&ring_key_once, ring_key_init);
	/* reuse a drained ring of an exited thread */
	for (r = atomic_load(&dsmt_rings); r; r = r->next) {
		int expect = DSMT_RING_FREE;
		if (atomic_load(&r->state) == DSMT_RING_FREE &&
		    atomic_compare_exchange_strong(&r->state, &expect, DSMT_RING_LIVE))
			break;
	}
	if (!r) {
		r = calloc(1, sizeof *r);
		if (!r)
			return NULL;
		r->prod = seg_new(dsmt_cfg.ring_bytes);
		if (!r->prod) {
			free(r);
			return NULL;
		}
		if (dsmt_cfg.stack_check) {
			void *m = mmap(NULL, sizeof *r->chk, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			r->chk = m == MAP_FAILED ? NULL : m;
		}
		atomic_store(&r->cons, r->prod);
		atomic_store(&r->state, DSMT_RING_LIVE);
		struct dsmt_ring *old = atomic_load(&dsmt_rings);
		do
			r->next = old;
		while (!atomic_compare_exchange_weak(&dsmt_rings, &old, r));
	} else {
		memset(r->str_hash, 0, sizeof r->str_hash);
		memset(r->stk_hash, 0, sizeof r->stk_hash);
		memset(r->pys_hash, 0, sizeof r->pys_hash);
		memset(r->nat_key, 0, sizeof r->nat_key);
		r->lost = 0;
	}
	self_ring = r;
	pthread_setspecific(ring_key, r);
	uint64_t nh;
	uint32_t *tid = ring_reserve(r, DSMT_R_TID, 4, &nh);
	if (tid) {
		*tid = (uint32_t)syscall(SYS_gettid);
		ring_commit(r, nh);
	}
	return r;
}

/* Returns a pointer to `len` payload bytes, or NULL when the ring is full
 * and no larger segment can be had (DSMEMTRACE_MAX_BUFFER_MB). */
static void *seg_reserve(struct dsmt_seg *g, uint32_t kind, uint32_t len, uint64_t *newhead)
{
	uint64_t need = sizeof(struct dsmt_rhdr) + ((len + 7u) & ~7u);
	uint64_t head = atomic_load_explicit(&g->head, memory_order_relaxed);
	uint64_t tail = atomic_load_explicit(&g->tail, memory_order_acquire);
	uint64_t pos = head & (g->cap - 1), contig = g->cap - pos;
	uint64_t total = need + (contig < need ? contig : 0);
	if (need > g->cap / 2 || g->cap - (head - tail) < total)
		return NULL;
	if (contig < need) {
		struct dsmt_rhdr *pad = (struct dsmt_rhdr *)(g->buf + pos);
		pad->kind = DSMT_R_PAD;
		pad->len = (uint32_t)(contig - sizeof *pad);
		head += contig;
		pos = 0;
	}
	struct dsmt_rhdr *h = (struct dsmt_rhdr *)(g->buf + pos);
	h->kind = kind;
	h->len = len;
	*newhead = head + need;
	return h + 1;
}

static void *ring_reserve(struct dsmt_ring *r, uint32_t kind, uint32_t len, uint64_t *newhead)
{
	void *p = seg_reserve(r->prod, kind, len, newhead);
	if (__builtin_expect(p != NULL, 1))
		return p;
	/* Before the first allocation event nobody drains: what waits (NVTX
	 * events of a process that may never allocate) stays within the first
	 * segment, and the rest is counted as lost. */
	if (!dsmt_writer_started())
		return NULL;
	struct dsmt_seg *g = seg_new(r->prod->cap * 2);
	if (!g)
		return NULL;
	atomic_store_explicit(&r->prod->next, g, memory_order_release);
	r->prod = g;
	dsmt_writer_wake();
	return seg_reserve(g, kind, len, newhead);
}

static void ring_commit(struct dsmt_ring *r, uint64_t newhead)
{
	struct dsmt_seg *g = r->prod;
	atomic_store_explicit(&g->head, newhead, memory_order_release);
	uint64_t used = newhead - atomic_load_explicit(&g->tail, memory_order_relaxed);
	if (used > g->cap / 2 && !atomic_exchange_explicit(&r->wake_sent, 1, memory_order_relaxed))
		dsmt_writer_wake();
}

static uint64_t hash_bytes(const void *p, size_t n)
{
	/* FNV-1a over 8-byte words with a final mix; inputs are short */
	const uint8_t *b = p;
	uint64_t h = 0xcbf29ce484222325ull ^ n;
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		uint64_t w;
		memcpy(&w, b + i, 8);
		h = (h ^ w) * 0x100000001b3ull;
		h ^= h >> 29;
	}
	for (; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	return h | 1; /* 0 marks an empty cache slot */
}

static uint32_t intern_in(struct dsmt_ring *r, const char *s, size_t n)
{
	if (n > 1000)
		n = 1000;
	uint64_t h = hash_bytes(s, n);
	unsigned slot = (unsigned)(h & 255);
	if (r->str_hash[slot] == h)
		return r->str_id[slot];
	uint64_t nh;
	uint8_t *p = ring_reserve(r, DSMT_R_STRING, (uint32_t)(4 + n), &nh);
	if (!p)
		return 0;
	uint32_t id = atomic_fetch_add_explicit(&next_string_id, 1, memory_order_relaxed);
	memcpy(p, &id, 4);
	memcpy(p + 4, s, n);
	ring_commit(r, nh);
	r->str_hash[slot] = h;
	r->str_id[slot] = id;
	return id;
}

uint32_t dsmt_intern(const char *s, size_t n)
{
	if (dsmt_cfg.disabled)
		return 0;
	struct dsmt_ring *r = ring_get();
	return r ? intern_in(r, s, n) : 0;
}

/* Interns n native frames; returns the stack id (0: no room) and their hash. */
static uint32_t stack_intern(struct dsmt_ring *r, void *const *v, int n, uint64_t *hash)
{
	uint64_t h = hash_bytes(v, (size_t)n * sizeof *v);
	*hash = h;
	unsigned slot = (unsigned)(h & 1023);
	if (r->stk_hash[slot] == h)
		return r->stk_id[slot];
	uint64_t nh;
	uint8_t *p = ring_reserve(r, DSMT_R_STACK, (uint32_t)(8 + 8 * n), &nh);
	if (!p)
		return 0;
	uint32_t id = atomic_fetch_add_explicit(&next_stack_id, 1, memory_order_relaxed);
	uint32_t nn = (uint32_t)n;
	memcpy(p, &id, 4);
	memcpy(p + 4, &nn, 4);
	memcpy(p + 8, v, 8 * (size_t)n);
	ring_commit(r, nh);
	r->stk_hash[slot] = h;
	r->stk_id[slot] = id;
	return id;
}

/* Native stack cache (DSMEMTRACE_STACK_CACHE, default off since the H200 check).  Unwinding costs
 * 20-60 ns per frame, and the frames between an allocation and the Python
 * interpreter are 5-36 (median 20) inside torch, so an unwind per event is
 * ~1 us.  But a thread that reaches the same call site from the same Python
 * stack (code objects and instruction offsets, all frames) with its stack
 * pointer at the same depth almost always came through the same native
 * frames: such a repeat reuses the stack id of the previous event with that
 * key, without unwinding.  One repeat in STACK_RECHECK of each key is
 * unwound anyway; a different stack replaces the cached one (counted:
 * stack_replaced).  DSMEMTRACE_STACK_CHECK=1 measures how often a recorded
 * stack equals a full unwind up to the first interpreter frame, every event
 * (bench/README.md). */
#define STACK_RECHECK 64
static _Atomic uint64_t stack_replaced, stack_unwinds;
static _Atomic uint64_t chk_events, chk_match, chk_noint, chk_cached;

static inline uint64_t stack_key(const void *site, uint32_t pys, uintptr_t sp)
{
	uint64_t k = (uint64_t)(uintptr_t)site * 0x9e3779b97f4a7c15ull;
	k ^= ((uint64_t)pys << 32 | (uint64_t)(unsigned)dsmt_cfg.native_depth) * 0xc2b2ae3d27d4eb4full;
	k ^= (uint64_t)sp * 0x165667b19e3779f9ull;
	k ^= k >> 29;
	return k | 1; /* 0: an empty slot */
}

/* Counts, for DSMEMTRACE_STACK_CHECK, whether the recorded frames rec[0..nrec)
 * equal a full unwind of this event up to (not including) its first frame in
 * the Python interpreter; with no interpreter frame in DSMT_MAX_DEPTH, up to
 * the end of the unwind. */
static __attribute__((noinline)) void stack_check(void *const *rec, int nrec, int cached)
{
	void *full[DSMT_MAX_DEPTH];
	int n = dsmt_backtrace(full, DSMT_MAX_DEPTH), L = 0;
	while (L < n && !((uintptr_t)full[L] >= dsmt_interp_lo && (uintptr_t)full[L] < dsmt_interp_hi))
		L++;
	if (L == n)
		atomic_fetch_add_explicit(&chk_noint, 1, memory_order_relaxed);
	int ok = nrec >= L && memcmp(rec, full, (size_t)L * sizeof *full) == 0;
	atomic_fetch_add_explicit(&chk_events, 1, memory_order_relaxed);
	if (ok)
		atomic_fetch_add_explicit(&chk_match, 1, memory_order_relaxed);
	if (cached)
		atomic_fetch_add_explicit(&chk_cached, 1, memory_order_relaxed);
}

/* The native stack above the hook, interned; sp: the recorder's frame. */
static uint32_t stack_id(struct dsmt_ring *r, const void *site, uint32_t pys, uintptr_t sp)
{
	unsigned slot = 0;
	uint64_t k = 0;
	if (dsmt_cfg.stack_cache) {
		k = stack_key(site, pys, sp);
		slot = (unsigned)(k >> 20) & 1023;
		if (r->nat_key[slot] == k && (++r->nat_hits[slot] % STACK_RECHECK) != 0) {
			if (__builtin_expect(dsmt_cfg.stack_check, 0) && r->chk)
				stack_check(r->chk->ips[slot], r->chk->n[slot], 1);
			return r->nat_id[slot];
		}
	}
	void *v[DSMT_MAX_DEPTH];
	int n = dsmt_backtrace(v, dsmt_cfg.native_depth);
	if (__builtin_expect(dsmt_cfg.stack_check, 0)) {
		atomic_fetch_add_explicit(&stack_unwinds, 1, memory_order_relaxed);
		stack_check(v, n, 0);
	}
	if (n <= 0)
		return 0;
	uint64_t h;
	uint32_t id = stack_intern(r, v, n, &h);
	if (dsmt_cfg.stack_cache && id) {
		if (r->nat_key[slot] == k && r->nat_hash[slot] != h)
			atomic_fetch_add_explicit(&stack_replaced, 1, memory_order_relaxed);
		if (r->nat_key[slot] != k)
			r->nat_hits[slot] = 0;
		r->nat_key[slot] = k;
		r->nat_hash[slot] = h;
		r->nat_id[slot] = id;
		if (r->chk) {
			memcpy(r->chk->ips[slot], v, (size_t)n * sizeof *v);
			r->chk->n[slot] = (uint8_t)n;
		}
	}
	return id;
}

static void stack_report(void)
{
	uint64_t e = atomic_load(&chk_events);
	if (dsmt_cfg.stack_check && e)
		dsmt_warn("stackcheck: %llu events, %llu (%.3f%%) recorded stacks equal a full unwind up to the first "
			  "interpreter frame; %llu events from the stack cache; %llu events without an interpreter "
			  "frame in %d; %llu unwinds, %llu cached stacks replaced (native depth %d, cache %s)",
			  (unsigned long long)e, (unsigned long long)atomic_load(&chk_match),
			  100.0 * (double)atomic_load(&chk_match) / (double)e, (unsigned long long)atomic_load(&chk_cached),
			  (unsigned long long)atomic_load(&chk_noint), DSMT_MAX_DEPTH,
			  (unsigned long long)atomic_load(&stack_unwinds), (unsigned long long)atomic_load(&stack_replaced),
			  dsmt_cfg.native_depth, dsmt_cfg.stack_cache ? "on" : "off");
}

/* ---- Python frames: definitions for interpose/pyframes.c ---- */

uint32_t dsmt_pystack_cached(uint64_t h)
{
	struct dsmt_ring *r = ring_get();
	unsigned slot = (unsigned)(h & 511);
	return r && r->pys_hash[slot] == h ? r->pys_id[slot] : 0;
}

uint32_t dsmt_pystack_define(uint64_t h, const uint32_t *pairs, unsigned n)
{
	struct dsmt_ring *r = ring_get();
	uint64_t nh;
	uint8_t *p = r ? ring_reserve(r, DSMT_R_PYSTACK, 8 + 8 * n, &nh) : NULL;
	if (!p)
		return 0;
	uint32_t id = atomic_fetch_add_explicit(&next_pystack_id, 1, memory_order_relaxed);
	memcpy(p, &id, 4);
	memcpy(p + 4, &n, 4);
	memcpy(p + 8, pairs, 8 * (size_t)n);
	ring_commit(r, nh);
	unsigned slot = (unsigned)(h & 511);
	r->pys_hash[slot] = h;
	r->pys_id[slot] = id;
	return id;
}

int dsmt_pycode_define(uint32_t id, const char *file, uint32_t file_len, const char *qual, uint32_t qual_len,
		       uint32_t firstlineno, const uint8_t *lt, uint32_t lt_len, uint32_t pyver)
{
	struct dsmt_ring *r = ring_get();
	uint64_t nh;
	uint8_t *p = r ? ring_reserve(r, DSMT_R_PYCODE, 24 + file_len + qual_len + lt_len, &nh) : NULL;
	if (!p)
		return -1;
	uint32_t h[6] = {id, firstlineno, pyver, file_len, qual_len, lt_len};
	memcpy(p, h, sizeof h);
	memcpy(p + 24, file, file_len);
	memcpy(p + 24 + file_len, qual, qual_len);
	memcpy(p + 24 + file_len + qual_len, lt, lt_len);
	ring_commit(r, nh);
	return 0;
}

static inline uint32_t py_frames(int py)
{
	uint32_t (*f)(int) = dsmt_py_hook;
	return py && f ? f(py) : 0;
}

static _Atomic int paused_before_start;
static void emit_pause_records(uint8_t rec);

static void start_once_fn(void)
{
	dsmt_writer_start();
	/* allocations made while paused before the first recorded one are not in
	 * the trace: a RESUME tells the decoder to take the allocator's totals */
	if (atomic_load(&paused_before_start))
		emit_pause_records(DSMT_REC_RESUME);
}

/* Reserves an event slot, writing a LOST record first if events were
 * dropped, and stamps it with the sequence number and time.  The stamp comes
 * before the record's fields are written: the locked increment would
 * otherwise wait for those stores to cold ring lines to drain (measured: 62 %
 * of the recorder's cycles with two threads taking turns, as torch's main and
 * autograd threads do).  The hook runs under the allocator's lock and a free
 * is recorded before the real free, so the order holds either way. */
static struct dsmt_ev *ev_begin(struct dsmt_ring *r, uint64_t *nh)
{
	if (__builtin_expect(r->lost != 0, 0)) {
		struct dsmt_ev *l = ring_reserve(r, DSMT_R_EVENT, sizeof *l, nh);
		if (!l) {
			r->lost++;
			return NULL;
		}
		memset(l, 0, sizeof *l);
		l->rec = DSMT_REC_LOST;
		l->c = r->lost;
		l->seq = atomic_fetch_add_explicit(&dsmt_seq, 1, memory_order_relaxed);
		l->ts = dsmt_now_ns();
		ring_commit(r, *nh);
		r->lost = 0;
	}
	struct dsmt_ev *e = ring_reserve(r, DSMT_R_EVENT, sizeof *e, nh);
	if (!e) {
		r->lost++;
		return NULL;
	}
	e->seq = atomic_fetch_add_explicit(&dsmt_seq, 1, memory_order_relaxed);
	e->ts = dsmt_now_ns();
	return e;
}

static void ev_end(struct dsmt_ring *r, uint64_t nh, uint64_t t0)
{
	ring_commit(r, nh);
	if (t0) {
		uint64_t dt = dsmt_now_ns() - t0;
		atomic_fetch_add_explicit(&self_ns_total, dt, memory_order_relaxed);
		if (atomic_fetch_add_explicit(&self_events, 1, memory_order_relaxed) < SELF_WARMUP)
			atomic_fetch_add_explicit(&self_ns_warm, dt, memory_order_relaxed);
	}
}

_Atomic int dsmt_paused;

#define OFF() (dsmt_cfg.disabled || atomic_load_explicit(&dsmt_paused, memory_order_relaxed))

/* One allocation-like event (ALLOC, FREE, OOM, DRV): the native and Python
 * stacks first, then the fixed-size record.  a/b: allocator totals, or a DRV's via. */
static inline __attribute__((always_inline)) void ev_alloc_like(uint8_t rec, uint8_t api, int dev, uint64_t ptr,
								uint64_t size, uint64_t stream, const void *site,
								int has_tot, uint64_t a, uint64_t b, int py)
{
	if (OFF())
		return;
	uint64_t t0 = dsmt_cfg.selftime ? dsmt_now_ns() : 0;
	pthread_once(&start_once, start_once_fn);
	struct dsmt_ring *r = ring_get();
	if (!r)
		return;
	uint32_t pys = py_frames(py);
	uint32_t stk = dsmt_cfg.native_depth > 0 && atomic_load_explicit(&dsmt_unwind_ready, memory_order_acquire)
			       ? stack_id(r, site, pys, (uintptr_t)__builtin_frame_address(0))
			       : 0;
	uint64_t nh;
	struct dsmt_ev *e = ev_begin(r, &nh);
	if (!e)
		return;
	e->rec = rec;
	e->api = api;
	e->dev = (int16_t)dev;
	e->stack = stk;
	e->ptr = ptr;
	e->size = size;
	e->stream = stream;
	e->site = (uint64_t)(uintptr_t)site;
	e->has_tot = (uint8_t)has_tot;
	e->a = a;
	e->b = b;
	e->c = 0;
	e->pystack = pys;
	ev_end(r, nh, t0);
}

void dsmt_ev_mem_py(uint8_t rec, uint8_t api, int dev, uint64_t ptr, uint64_t size, uint64_t stream,
		    const void *site, const uint64_t *tot, int py)
{
	ev_alloc_like(rec, api, dev, ptr, size, stream, site, tot != NULL, tot ? tot[0] : 0, tot ? tot[1] : 0, py);
}

void dsmt_ev_drv_py(uint8_t op, uint8_t via, int dev, uint64_t ptr, uint64_t size, uint64_t aux,
		    const void *site, int py)
{
	/* op in the api slot, aux in stream, via in a (writer.c encode_event) */
	ev_alloc_like(DSMT_REC_DRV, op, dev, ptr, size, aux, site, 0, via, 0, py);
}

void dsmt_ev_source(uint8_t via, uint8_t reason, uint32_t name)
{
	if (dsmt_cfg.disabled)
		return;
	/* like NVTX: does not start the writer; waits for the first allocation */
	struct dsmt_ring *r = ring_get();
	if (!r)
		return;
	uint64_t nh;
	struct dsmt_ev *e = ev_begin(r, &nh);
	if (!e)
		return;
	*e = (struct dsmt_ev){.seq = e->seq, .ts = e->ts, .rec = DSMT_REC_SOURCE, .dev = -1};
	e->a = via;
	e->b = reason;
	e->c = name;
	ev_end(r, nh, 0);
}

void dsmt_ev_oom_py(int dev, uint64_t size, uint64_t tot_alloc, uint64_t tot_reserved, const void *site, int py)
{
	uint64_t tot[2] = {tot_alloc, tot_reserved};
	dsmt_ev_mem_py(DSMT_REC_OOM, 0, dev, 0, size, 0, site, tot, py);
}

void dsmt_ev_nvtx_py(uint8_t rec, uint32_t domain, uint32_t name, uint64_t range_id, int py)
{
	if (OFF())
		return;
	/* NVTX events do not start the writer: a process that never allocates
	 * creates no file.  They wait in the ring until the first allocation. */
	struct dsmt_ring *r = ring_get();
	if (!r)
		return;
	uint32_t pys = py_frames(py);
	uint64_t t0 = 0, nh;
	struct dsmt_ev *e = ev_begin(r, &nh);
	if (!e)
		return;
	*e = (struct dsmt_ev){.seq = e->seq, .ts = e->ts, .rec = rec, .dev = -1, .pystack = pys};
	e->a = domain;
	e->b = name;
	e->c = range_id;
	ev_end(r, nh, t0);
}

/* ---- pause / resume ---- */

#define MAX_DEVS 64
static _Atomic uint64_t last_tot[MAX_DEVS][2];
static _Atomic uint64_t tot_known; /* bit per device */
static pthread_mutex_t pause_mu = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int toggle_pending;

void dsmt_note_totals(int dev, uint64_t a, uint64_t b)
{
	if (dev < 0 || dev >= MAX_DEVS)
		return;
	atomic_store_explicit(&last_tot[dev][0], a, memory_order_relaxed);
	atomic_store_explicit(&last_tot[dev][1], b, memory_order_relaxed);
	if (!(atomic_load_explicit(&tot_known, memory_order_relaxed) & (1ull << dev)))
		atomic_fetch_or(&tot_known, 1ull << dev);
}

/* PAUSE/RESUME records, one per device with known totals (dev1 0 if none). */
static void emit_pause_records(uint8_t rec)
{
	struct dsmt_ring *r = ring_get();
	if (!r)
		return;
	uint64_t known = atomic_load(&tot_known);
	for (int d = -1; d < MAX_DEVS; d++) {
		if (d < 0 ? known != 0 : !(known & (1ull << d)))
			continue;
		uint64_t nh;
		struct dsmt_ev *e = ev_begin(r, &nh);
		if (!e)
			return;
		*e = (struct dsmt_ev){.seq = e->seq, .ts = e->ts, .rec = rec, .dev = (int16_t)d};
		if (d >= 0) {
			e->a = atomic_load_explicit(&last_tot[d][0], memory_order_relaxed);
			e->b = atomic_load_explicit(&last_tot[d][1], memory_order_relaxed);
		}
		ev_end(r, nh, 0);
	}
}

void dsmt_pause(void)
{
	if (dsmt_cfg.disabled)
		return;
	int saved = dsmt_in_hook;
	dsmt_in_hook = 1;
	pthread_mutex_lock(&pause_mu);
	if (!atomic_load(&dsmt_paused)) {
		/* before the writer starts, records wait in the ring like NVTX events */
		emit_pause_records(DSMT_REC_PAUSE);
		atomic_store(&dsmt_paused, 1);
	}
	pthread_mutex_unlock(&pause_mu);
	dsmt_in_hook = saved;
}

void dsmt_resume(void)
{
	if (dsmt_cfg.disabled)
		return;
	int saved = dsmt_in_hook;
	dsmt_in_hook = 1;
	pthread_mutex_lock(&pause_mu);
	if (atomic_load(&dsmt_paused)) {
		atomic_store(&dsmt_paused, 0);
		emit_pause_records(DSMT_REC_RESUME);
	}
	pthread_mutex_unlock(&pause_mu);
	dsmt_in_hook = saved;
}

/* Signal context: no locks.  The writer performs the toggle when it runs;
 * before it exists, the flag is flipped here without records, and a RESUME
 * is written when the writer starts (the decoder then takes the allocator's
 * totals). */
void dsmt_toggle_request(void)
{
	if (dsmt_writer_started()) {
		atomic_fetch_add(&toggle_pending, 1);
		dsmt_writer_wake();
	} else {
		atomic_store(&paused_before_start, 1);
		atomic_fetch_xor(&dsmt_paused, 1);
	}
}

/* Called by the writer thread at each wake-up. */
void dsmt_toggle_apply(void)
{
	int n = atomic_exchange(&toggle_pending, 0);
	for (; n > 0; n--) {
		if (atomic_load(&dsmt_paused))
			dsmt_resume();
		else
			dsmt_pause();
	}
}
