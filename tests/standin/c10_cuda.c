/* Stand-in for libc10_cuda.so: a miniature of PyTorch's CUDACachingAllocator
 * (c10/cuda/CUDACachingAllocator.cpp, DeviceCachingAllocator), close enough
 * that its counters behave like torch.cuda.memory_allocated() & co.:
 *
 *  - sizes rounded up to 512 bytes (kMinBlockSize);
 *  - requests <= 1 MiB (kSmallSize) come from the small pool, whose segments
 *    are 2 MiB (kSmallBuffer); larger ones from the large pool, segments of
 *    20 MiB (kLargeBuffer) below 10 MiB (kMinLargeAlloc), else rounded up
 *    to 2 MiB (kRoundLarge);
 *  - best-fit reuse of a cached free block of the same stream and pool
 *    (ordered by size, then address), split when the remainder is >= 512
 *    bytes (small) or > 1 MiB (large), else the whole block is handed out and
 *    counted (as in torch);
 *  - free blocks coalesce with free neighbours of the same segment;
 *  - new segments with cudaMalloc, called through the PLT as torch does;
 *    when it fails: wait for pending stream uses, cudaFree every cached
 *    whole-segment block, retry once; if that fails too, report OOM via
 *    c10::reportOutOfMemoryToProfiler and return NULL (torch raises
 *    OutOfMemoryError);
 *  - c10::reportMemoryUsageToProfiler(ptr, +size, allocated, reserved,
 *    {CUDA, dev}) at every block allocation and (ptr, -size, ...) at every
 *    free, through the PLT, with the allocator's recursive mutex held;
 *  - record_stream: a freed block used on other streams is counted as freed
 *    (allocated drops and the free is reported at free time, as in torch's
 *    free()), but stays unusable until those streams have passed the free
 *    (an "event" per stream use); pending events are processed at the start
 *    of every allocation, and synchronously by empty_cache and the OOM path;
 *  - stats per device: allocated/reserved current and peak, reset_peak
 *    sets peak = current.
 * Streams are cudaStream_t handles; the stand-in "GPU" completes a stream's
 * work when the program synchronises it (c10_cuda_stream_sync, or
 * c10_cuda_device_sync for all).
 */
#include "standin.h"

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

void report_memory_usage(void *ptr, int64_t size, size_t total_allocated, size_t total_reserved,
			 struct c10_device dev) __asm__("_ZN3c1027reportMemoryUsageToProfilerEPvlmmNS_6DeviceE");
void report_out_of_memory(int64_t size, size_t total_allocated, size_t total_reserved,
			  struct c10_device dev) __asm__("_ZN3c1027reportOutOfMemoryToProfilerElmmNS_6DeviceE");

enum {
	kMinBlockSize = 512,
	kSmallSize = 1 << 20,
	kSmallBuffer = 2 << 20,
	kLargeBuffer = 20 << 20,
	kMinLargeAlloc = 10 << 20,
	kRoundLarge = 2 << 20,
	MAX_DEV = 8,
	MAX_USES = 8,
	NBUCKET = 4096,
};

struct block {
	int dev, small;
	uintptr_t stream;
	size_t size;
	uintptr_t ptr;
	int allocated;
	int event_count;
	int n_uses;
	uintptr_t uses[MAX_USES];
	struct block *prev, *next;   /* neighbours in the segment */
	struct block *pnext, *pprev; /* free pool list, or allocated hash chain */
};

struct stat {
	size_t current, peak;
};

struct dev_alloc {
	struct block *pool[2]; /* [0] large, [1] small: free blocks */
	struct stat allocated, reserved;
	uint64_t n_segments, n_ooms;
};

struct event {
	struct block *b;
	uintptr_t stream;
	uint64_t ticket;
	struct event *next;
};

struct stream_state {
	uintptr_t stream;
	uint64_t submitted, completed;
	struct stream_state *next;
};

static pthread_mutex_t mutex;
static pthread_once_t mutex_once = PTHREAD_ONCE_INIT;
static struct dev_alloc devs[MAX_DEV];
static struct block *live[NBUCKET];
static struct event *events, **events_tail = &events;
static struct stream_state *streams;
static uint64_t n_reports, sum_reports, n_ooms, sum_ooms;

static void mutex_init(void)
{
	pthread_mutexattr_t a;
	pthread_mutexattr_init(&a);
	pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE); /* std::recursive_mutex */
	pthread_mutex_init(&mutex, &a);
	pthread_mutexattr_destroy(&a);
}

static void lock(void)
{
	pthread_once(&mutex_once, mutex_init);
	pthread_mutex_lock(&mutex);
}

static void unlock(void)
{
	pthread_mutex_unlock(&mutex);
}

static void stat_inc(struct stat *s, size_t n)
{
	s->current += n;
	if (s->current > s->peak)
		s->peak = s->current;
}

static void stat_dec(struct stat *s, size_t n)
{
	s->current -= n;
}

static void report(struct dev_alloc *d, int dev, uintptr_t ptr, int64_t size)
{
	struct c10_device cd = {1, (int8_t)dev};
	n_reports++;
	sum_reports += standin_report_hash(ptr, size, d->allocated.current, d->reserved.current, cd);
	report_memory_usage((void *)ptr, size, d->allocated.current, d->reserved.current, cd);
}

static size_t round_size(size_t size)
{
	if (size < kMinBlockSize)
		return kMinBlockSize;
	return kMinBlockSize * ((size + kMinBlockSize - 1) / kMinBlockSize);
}

static size_t allocation_size(size_t size)
{
	if (size <= kSmallSize)
		return kSmallBuffer;
	if (size < kMinLargeAlloc)
		return kLargeBuffer;
	return kRoundLarge * ((size + kRoundLarge - 1) / kRoundLarge);
}

/* ---- free pools: unordered lists, best fit by (size, ptr) ---- */

static void pool_insert(struct dev_alloc *d, struct block *b)
{
	struct block **head = &d->pool[b->small];
	b->pprev = NULL;
	b->pnext = *head;
	if (*head)
		(*head)->pprev = b;
	*head = b;
}

static void pool_erase(struct dev_alloc *d, struct block *b)
{
	if (b->pprev)
		b->pprev->pnext = b->pnext;
	else
		d->pool[b->small] = b->pnext;
	if (b->pnext)
		b->pnext->pprev = b->pprev;
	b->pnext = b->pprev = NULL;
}

static struct block *pool_best(struct dev_alloc *d, int small, uintptr_t stream, size_t size)
{
	struct block *best = NULL;
	for (struct block *b = d->pool[small]; b; b = b->pnext) {
		if (b->stream != stream || b->size < size)
			continue;
		if (!best || b->size < best->size || (b->size == best->size && b->ptr < best->ptr))
			best = b;
	}
	return best;
}

/* ---- allocated blocks by pointer ---- */

static size_t bucket(uintptr_t p)
{
	return (p >> 9) * 11400714819323198485ULL >> 52; /* 12 bits */
}

static void live_insert(struct block *b)
{
	size_t i = bucket(b->ptr);
	b->pprev = NULL;
	b->pnext = live[i];
	if (live[i])
		live[i]->pprev = b;
	live[i] = b;
}

static struct block *live_take(uintptr_t p)
{
	size_t i = bucket(p);
	for (struct block *b = live[i]; b; b = b->pnext) {
		if (b->ptr != p)
			continue;
		if (b->pprev)
			b->pprev->pnext = b->pnext;
		else
			live[i] = b->pnext;
		if (b->pnext)
			b->pnext->pprev = b->pprev;
		b->pnext = b->pprev = NULL;
		return b;
	}
	return NULL;
}

static struct block *live_find(uintptr_t p)
{
	for (struct block *b = live[bucket(p)]; b; b = b->pnext)
		if (b->ptr == p)
			return b;
	return NULL;
}

/* ---- blocks back to the pool, coalescing ---- */

static void free_block(struct dev_alloc *d, struct block *b)
{
	struct block *p = b->prev;
	if (p && !p->allocated && p->event_count == 0) {
		pool_erase(d, p);
		b->ptr = p->ptr;
		b->size += p->size;
		b->prev = p->prev;
		if (b->prev)
			b->prev->next = b;
		free(p);
	}
	struct block *n = b->next;
	if (n && !n->allocated && n->event_count == 0) {
		pool_erase(d, n);
		b->size += n->size;
		b->next = n->next;
		if (b->next)
			b->next->prev = b;
		free(n);
	}
	b->n_uses = 0;
	pool_insert(d, b);
}

static struct stream_state *stream_state(uintptr_t s)
{
	for (struct stream_state *st = streams; st; st = st->next)
		if (st->stream == s)
			return st;
	struct stream_state *st = calloc(1, sizeof *st);
	if (!st)
		abort();
	st->stream = s;
	st->next = streams;
	streams = st;
	return st;
}

static void insert_events(struct block *b)
{
	for (int i = 0; i < b->n_uses; i++) {
		struct event *e = calloc(1, sizeof *e);
		if (!e)
			abort();
		struct stream_state *st = stream_state(b->uses[i]);
		e->b = b;
		e->stream = b->uses[i];
		e->ticket = ++st->submitted; /* cudaEventRecord(ev, use_stream) */
		*events_tail = e;
		events_tail = &e->next;
		b->event_count++;
	}
	b->n_uses = 0;
}

/* process_events (sync == 0) / synchronize_and_free_events (sync == 1) */
static void process_events(int dev, int sync)
{
	struct event **pp = &events;
	while (*pp) {
		struct event *e = *pp;
		struct stream_state *st = stream_state(e->stream);
		if (dev >= 0 && e->b->dev != dev) {
			pp = &e->next;
			continue;
		}
		if (sync && st->completed < e->ticket)
			st->completed = e->ticket; /* cudaEventSynchronize */
		if (st->completed < e->ticket) {
			pp = &e->next;
			continue;
		}
		*pp = e->next;
		struct block *b = e->b;
		free(e);
		if (--b->event_count == 0)
			free_block(&devs[b->dev], b);
	}
	events_tail = &events;
	while (*events_tail)
		events_tail = &(*events_tail)->next;
}

/* ---- segments ---- */

static struct block *alloc_block(struct dev_alloc *d, int dev, int small, uintptr_t stream, size_t size)
{
	void *p = NULL;
	if (cudaMalloc(&p, size) != cudaSuccess) {
		(void)cudaGetLastError();
		return NULL;
	}
	struct block *b = calloc(1, sizeof *b);
	if (!b)
		abort();
	b->dev = dev;
	b->small = small;
	b->stream = stream;
	b->size = size;
	b->ptr = (uintptr_t)p;
	stat_inc(&d->reserved, size);
	d->n_segments++;
	return b;
}

static void release_block(struct dev_alloc *d, struct block *b)
{
	cudaFree((void *)b->ptr); /* no device guard: torch frees by pointer */
	stat_dec(&d->reserved, b->size);
	d->n_segments--;
	pool_erase(d, b);
	free(b);
}

static void release_cached_blocks(int dev)
{
	process_events(dev, 1);
	for (int i = 0; i < MAX_DEV; i++) {
		if (dev >= 0 && i != dev)
			continue;
		struct dev_alloc *d = &devs[i];
		for (int small = 0; small < 2; small++) {
			struct block *b = d->pool[small], *nx;
			for (; b; b = nx) {
				nx = b->pnext;
				if (!b->prev && !b->next)
					release_block(d, b);
			}
		}
	}
}

/* ---- the allocator API (what torch's NativeCachingAllocator offers) ---- */

EXPORT void *c10_cuda_malloc(size_t orig_size, int dev, void *stream_handle)
{
	if (orig_size == 0 || dev < 0 || dev >= MAX_DEV)
		return NULL;
	uintptr_t stream = (uintptr_t)stream_handle;
	int prev_dev = 0;
	cudaGetDevice(&prev_dev);
	if (prev_dev != dev && cudaSetDevice(dev) != cudaSuccess) /* CUDAGuard */
		return NULL;
	lock();
	struct dev_alloc *d = &devs[dev];
	process_events(-1, 0);
	size_t size = round_size(orig_size);
	int small = size <= kSmallSize;
	struct block *b = pool_best(d, small, stream, size);
	if (b) {
		pool_erase(d, b);
	} else {
		size_t asize = allocation_size(size);
		b = alloc_block(d, dev, small, stream, asize);
		if (!b) {
			release_cached_blocks(dev);
			b = alloc_block(d, dev, small, stream, asize);
		}
		if (!b) {
			struct c10_device cd = {1, (int8_t)dev};
			d->n_ooms++;
			n_ooms++;
			sum_ooms += standin_report_hash(0, (int64_t)size, d->allocated.current, d->reserved.current, cd);
			report_out_of_memory((int64_t)size, d->allocated.current, d->reserved.current, cd);
			unlock();
			if (prev_dev != dev)
				cudaSetDevice(prev_dev);
			return NULL;
		}
	}
	size_t remaining = b->size - size;
	if (small ? remaining >= kMinBlockSize : remaining > kSmallSize) {
		struct block *r = b; /* the remainder keeps the tail */
		b = calloc(1, sizeof *b);
		if (!b)
			abort();
		*b = (struct block){.dev = dev, .small = small, .stream = stream, .size = size, .ptr = r->ptr};
		b->prev = r->prev;
		if (b->prev)
			b->prev->next = b;
		b->next = r;
		r->prev = b;
		r->ptr += size;
		r->size -= size;
		pool_insert(d, r);
	}
	b->allocated = 1;
	live_insert(b);
	stat_inc(&d->allocated, b->size);
	report(d, dev, b->ptr, (int64_t)b->size);
	unlock();
	if (prev_dev != dev)
		cudaSetDevice(prev_dev);
	return (void *)b->ptr;
}

EXPORT int c10_cuda_free(void *ptr)
{
	if (!ptr)
		return 0;
	lock();
	struct block *b = live_take((uintptr_t)ptr);
	if (!b) {
		unlock();
		return -1;
	}
	struct dev_alloc *d = &devs[b->dev];
	uintptr_t orig_ptr = b->ptr;
	size_t orig_size = b->size;
	int dev = b->dev;
	b->allocated = 0;
	stat_dec(&d->allocated, b->size);
	if (b->n_uses)
		insert_events(b);
	else
		free_block(d, b);
	report(d, dev, orig_ptr, -(int64_t)orig_size);
	unlock();
	return 0;
}

EXPORT int c10_cuda_record_stream(void *ptr, void *stream)
{
	lock();
	struct block *b = live_find((uintptr_t)ptr);
	int r = -1;
	if (b) {
		r = 0;
		if ((uintptr_t)stream != b->stream) {
			int i;
			for (i = 0; i < b->n_uses && b->uses[i] != (uintptr_t)stream; i++)
				;
			if (i == b->n_uses) {
				if (b->n_uses == MAX_USES)
					r = -1;
				else
					b->uses[b->n_uses++] = (uintptr_t)stream;
			}
		}
	}
	unlock();
	return r;
}

/* the stand-in GPU reaches the end of the work queued so far on a stream */
EXPORT void c10_cuda_stream_sync(void *stream)
{
	lock();
	struct stream_state *st = stream_state((uintptr_t)stream);
	st->completed = st->submitted;
	unlock();
}

EXPORT void c10_cuda_device_sync(void)
{
	lock();
	for (struct stream_state *st = streams; st; st = st->next)
		st->completed = st->submitted;
	unlock();
}

EXPORT void c10_cuda_empty_cache(int dev)
{
	lock();
	release_cached_blocks(dev);
	unlock();
}

enum { ST_ALLOC_CUR, ST_ALLOC_PEAK, ST_RES_CUR, ST_RES_PEAK, ST_SEGMENTS, ST_OOMS };

EXPORT uint64_t c10_cuda_stat(int dev, int which)
{
	if (dev < 0 || dev >= MAX_DEV)
		return 0;
	lock();
	struct dev_alloc *d = &devs[dev];
	uint64_t v = 0;
	switch (which) {
	case ST_ALLOC_CUR: v = d->allocated.current; break;
	case ST_ALLOC_PEAK: v = d->allocated.peak; break;
	case ST_RES_CUR: v = d->reserved.current; break;
	case ST_RES_PEAK: v = d->reserved.peak; break;
	case ST_SEGMENTS: v = d->n_segments; break;
	case ST_OOMS: v = d->n_ooms; break;
	}
	unlock();
	return v;
}

EXPORT void c10_cuda_reset_peak(int dev)
{
	if (dev < 0 || dev >= MAX_DEV)
		return;
	lock();
	devs[dev].allocated.peak = devs[dev].allocated.current;
	devs[dev].reserved.peak = devs[dev].reserved.current;
	unlock();
}

/* what the allocator sent to libc10: compare with standin_c10_* */
EXPORT uint64_t standin_alloc_reports(void) { return __atomic_load_n(&n_reports, __ATOMIC_RELAXED); }
EXPORT uint64_t standin_alloc_report_sum(void) { return __atomic_load_n(&sum_reports, __ATOMIC_RELAXED); }
EXPORT uint64_t standin_alloc_ooms(void) { return __atomic_load_n(&n_ooms, __ATOMIC_RELAXED); }
EXPORT uint64_t standin_alloc_oom_sum(void) { return __atomic_load_n(&sum_ooms, __ATOMIC_RELAXED); }
