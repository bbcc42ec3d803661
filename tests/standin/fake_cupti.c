/* Stand-in for CUPTI, libcupti.so.13 (soname libcupti.so.13), with the real
 * headers' types and the behaviour measured on the real one
 * (MECHANICS.md §1):
 *
 *  - one subscriber at a time: a second cuptiSubscribe(_v2) fails with
 *    CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED (39) until the first one
 *    unsubscribes; STANDIN_CUPTI_REFUSE=1 makes every subscribe fail with 39,
 *    as when the application runs under Nsight Systems;
 *  - callbacks: nothing is enabled by a subscribe; cuptiEnableCallback /
 *    cuptiEnableDomain select (domain, cbid); the stand-in libcuda reports
 *    every driver API ENTER and EXIT (CUpti_CallbackData, params from
 *    generated_cuda_meta.h) and context creation / destruction
 *    (CUpti_ResourceData) on the calling thread;
 *  - activity: cuptiActivityRegisterCallbacks (process-wide; a second call
 *    replaces the first), cuptiActivityEnable/Disable, MEMORY2 records
 *    (CUpti_ActivityMemory4) and MEMORY_POOL records
 *    (CUpti_ActivityMemoryPool3), 8-byte aligned, in buffers obtained from
 *    the request callback.  Buffers reach the complete callback from
 *    cuptiActivityFlushAll (on the caller's thread) or, after
 *    cuptiActivityFlushPeriod(ms > 0), from a worker thread of the library
 *    every ms; a full buffer waits for the next of those.  Nothing is flushed
 *    at exit: the real CUPTI leaves that to the client ("can be done in the
 *    at-exit handler", cupti_activity.h).  Records that find no buffer are
 *    dropped and counted (cuptiActivityGetNumDroppedRecords);
 *  - cuptiGetTimestamp: CLOCK_REALTIME nanoseconds, like the real one.
 *
 * The driver side is reached through libcuda's standin_cupti_attach()
 * (standin_cupti.h); libcupti attaches at its first subscribe or activity
 * enable, dlopen()ing libcuda.so.1 like the real library.
 *
 * Test hooks (not in the real library): standin_cupti_subscribed() says
 * whether a subscriber is registered.
 */
#include "standin_cupti.h"

#include <cupti.h>
#include <dlfcn.h>
#include <signal.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))
#define NDOM CUPTI_CB_DOMAIN_SIZE
#define NCBID 1024

struct CUpti_Subscriber_st {
	CUpti_CallbackFunc cb;
	void *userdata;
	char name[64];
	uint8_t enabled[NDOM][NCBID];
	int live;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct CUpti_Subscriber_st *current; /* read without the lock by dispatch */

/* ---- attaching to the driver ---- */

static void on_api(CUpti_CallbackDomain dom, CUpti_CallbackId cbid, const void *cbdata);
static void on_memory(const struct standin_mem_event *ev);
static void on_pool(const struct standin_pool_event *ev);
static const struct standin_cupti_ops ops = {on_api, on_memory, on_pool};
static int attached;
static standin_ctx_device_fn ctx_device;

static CUptiResult attach(void)
{
	if (__atomic_load_n(&attached, __ATOMIC_ACQUIRE))
		return CUPTI_SUCCESS;
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	standin_cupti_attach_fn f = h ? (standin_cupti_attach_fn)dlsym(h, "standin_cupti_attach") : NULL;
	if (!f)
		return CUPTI_ERROR_NOT_INITIALIZED;
	ctx_device = (standin_ctx_device_fn)dlsym(h, "standin_ctx_device");
	f(&ops);
	__atomic_store_n(&attached, 1, __ATOMIC_RELEASE);
	return CUPTI_SUCCESS;
}

/* ---- callback API ---- */

static void on_api(CUpti_CallbackDomain dom, CUpti_CallbackId cbid, const void *cbdata)
{
	struct CUpti_Subscriber_st *s = __atomic_load_n(&current, __ATOMIC_ACQUIRE);
	if (!s || dom <= 0 || dom >= NDOM || cbid >= NCBID || !s->enabled[dom][cbid])
		return;
	CUpti_CallbackFunc cb = s->cb;
	if (cb && __atomic_load_n(&s->live, __ATOMIC_ACQUIRE))
		cb(s->userdata, dom, cbid, cbdata);
}

static int refuse(void)
{
	const char *r = getenv("STANDIN_CUPTI_REFUSE");
	return r && *r == '1';
}

static CUptiResult subscribe(CUpti_SubscriberHandle *out, CUpti_CallbackFunc cb, void *ud, const char *name,
			     CUpti_SubscriberParams *params)
{
	if (!out)
		return CUPTI_ERROR_INVALID_PARAMETER;
	if (params && params->structSize == 0)
		return CUPTI_ERROR_INVALID_PARAMETER;
	CUptiResult r = attach();
	if (r != CUPTI_SUCCESS)
		return r;
	pthread_mutex_lock(&mu);
	const char *holder = refuse() ? "Nsight Systems" : current ? current->name : NULL;
	if (holder) {
		if (params && params->oldSubscriberName && params->oldSubscriberSize)
			snprintf(params->oldSubscriberName, params->oldSubscriberSize, "%s", holder);
		pthread_mutex_unlock(&mu);
		return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
	}
	struct CUpti_Subscriber_st *s = calloc(1, sizeof *s); /* never freed: dispatch reads it lock-free */
	if (!s) {
		pthread_mutex_unlock(&mu);
		return CUPTI_ERROR_OUT_OF_MEMORY;
	}
	s->cb = cb;
	s->userdata = ud;
	snprintf(s->name, sizeof s->name, "CUPTI for %s", name && *name ? name : "unnamed subscriber");
	s->live = 1;
	__atomic_store_n(&current, s, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&mu);
	*out = s;
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult CUPTIAPI cuptiSubscribe(CUpti_SubscriberHandle *subscriber, CUpti_CallbackFunc callback,
					   void *userdata)
{
	return subscribe(subscriber, callback, userdata, NULL, NULL);
}

EXPORT CUptiResult CUPTIAPI cuptiSubscribe_v2(CUpti_SubscriberHandle *subscriber, CUpti_CallbackFunc callback,
					      void *userdata, CUpti_SubscriberParams *pParams)
{
	return subscribe(subscriber, callback, userdata, pParams ? pParams->subscriberName : NULL, pParams);
}

EXPORT CUptiResult CUPTIAPI cuptiUnsubscribe(CUpti_SubscriberHandle subscriber)
{
	pthread_mutex_lock(&mu);
	CUptiResult r = CUPTI_SUCCESS;
	if (!subscriber || subscriber != current)
		r = CUPTI_ERROR_INVALID_PARAMETER;
	else {
		__atomic_store_n(&subscriber->live, 0, __ATOMIC_RELEASE);
		__atomic_store_n(&current, NULL, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&mu);
	return r;
}

static int valid_sub(CUpti_SubscriberHandle s)
{
	return s && s == __atomic_load_n(&current, __ATOMIC_ACQUIRE);
}

EXPORT CUptiResult CUPTIAPI cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle subscriber,
						CUpti_CallbackDomain domain, CUpti_CallbackId cbid)
{
	if (!valid_sub(subscriber) || domain <= 0 || domain >= NDOM || cbid >= NCBID)
		return CUPTI_ERROR_INVALID_PARAMETER;
	subscriber->enabled[domain][cbid] = enable != 0;
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult CUPTIAPI cuptiGetCallbackState(uint32_t *enable, CUpti_SubscriberHandle subscriber,
						  CUpti_CallbackDomain domain, CUpti_CallbackId cbid)
{
	if (!enable || !valid_sub(subscriber) || domain <= 0 || domain >= NDOM || cbid >= NCBID)
		return CUPTI_ERROR_INVALID_PARAMETER;
	*enable = subscriber->enabled[domain][cbid];
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult CUPTIAPI cuptiEnableDomain(uint32_t enable, CUpti_SubscriberHandle subscriber,
					      CUpti_CallbackDomain domain)
{
	if (!valid_sub(subscriber) || domain <= 0 || domain >= NDOM)
		return CUPTI_ERROR_INVALID_PARAMETER;
	memset(subscriber->enabled[domain], enable != 0, NCBID);
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult CUPTIAPI cuptiEnableAllDomains(uint32_t enable, CUpti_SubscriberHandle subscriber)
{
	if (!valid_sub(subscriber))
		return CUPTI_ERROR_INVALID_PARAMETER;
	for (int d = 1; d < NDOM; d++)
		memset(subscriber->enabled[d], enable != 0, NCBID);
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult CUPTIAPI cuptiGetDeviceId(CUcontext context, uint32_t *deviceId)
{
	if (!deviceId)
		return CUPTI_ERROR_INVALID_PARAMETER;
	if (attach() != CUPTI_SUCCESS || !ctx_device)
		return CUPTI_ERROR_NOT_INITIALIZED;
	int d = ctx_device(context);
	if (d < 0)
		return CUPTI_ERROR_INVALID_CONTEXT;
	*deviceId = (uint32_t)d;
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult CUPTIAPI cuptiGetResultString(CUptiResult result, const char **str)
{
	if (!str)
		return CUPTI_ERROR_INVALID_PARAMETER;
	switch (result) {
	case CUPTI_SUCCESS: *str = "CUPTI_SUCCESS"; break;
	case CUPTI_ERROR_INVALID_PARAMETER: *str = "CUPTI_ERROR_INVALID_PARAMETER"; break;
	case CUPTI_ERROR_INVALID_DEVICE: *str = "CUPTI_ERROR_INVALID_DEVICE"; break;
	case CUPTI_ERROR_INVALID_CONTEXT: *str = "CUPTI_ERROR_INVALID_CONTEXT"; break;
	case CUPTI_ERROR_INVALID_KIND: *str = "CUPTI_ERROR_INVALID_KIND"; break;
	case CUPTI_ERROR_MAX_LIMIT_REACHED: *str = "CUPTI_ERROR_MAX_LIMIT_REACHED"; break;
	case CUPTI_ERROR_NOT_INITIALIZED: *str = "CUPTI_ERROR_NOT_INITIALIZED"; break;
	case CUPTI_ERROR_INVALID_OPERATION: *str = "CUPTI_ERROR_INVALID_OPERATION"; break;
	case CUPTI_ERROR_OUT_OF_MEMORY: *str = "CUPTI_ERROR_OUT_OF_MEMORY"; break;
	case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
		*str = "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED";
		break;
	default: *str = "CUPTI_ERROR_UNKNOWN"; return CUPTI_ERROR_INVALID_PARAMETER;
	}
	return CUPTI_SUCCESS;
}

/* names of the driver callbacks the stand-in libcuda reports */
static const struct {
	CUpti_CallbackId id;
	const char *name;
} cb_names[] = {
#define N(n) {CUPTI_DRIVER_TRACE_CBID_##n, #n}
	N(cuMemAlloc_v2), N(cuMemAllocPitch_v2), N(cuMemFree_v2), N(cuMemAllocManaged), N(cuMemAllocHost_v2),
	N(cuMemHostAlloc), N(cuMemFreeHost), N(cuMemHostRegister_v2), N(cuMemHostUnregister), N(cuMemAllocAsync),
	N(cuMemAllocAsync_ptsz), N(cuMemFreeAsync), N(cuMemFreeAsync_ptsz), N(cuMemAllocFromPoolAsync),
	N(cuMemAllocFromPoolAsync_ptsz), N(cuMemPoolCreate), N(cuMemPoolDestroy), N(cuMemPoolTrimTo), N(cuMemCreate),
	N(cuMemRelease), N(cuMemRetainAllocationHandle), N(cuMemMap), N(cuMemUnmap), N(cuMemSetAccess),
	N(cuMemAddressReserve), N(cuMemAddressFree), N(cuMemExportToShareableHandle),
	N(cuMemImportFromShareableHandle), N(cuIpcGetMemHandle), N(cuIpcOpenMemHandle_v2), N(cuIpcCloseMemHandle),
	N(cuMemGetAddressRange_v2), N(cuCtxGetDevice), N(cuMemGetInfo_v2), N(cuDevicePrimaryCtxRetain),
	N(cuDevicePrimaryCtxRelease_v2), N(cuCtxCreate_v4), N(cuCtxDestroy_v2), N(cuCtxSetCurrent),
	N(cuCtxGetCurrent), N(cuMemGetAllocationGranularity),
#undef N
};

EXPORT CUptiResult CUPTIAPI cuptiGetCallbackName(CUpti_CallbackDomain domain, uint32_t cbid, const char **name)
{
	if (!name || domain != CUPTI_CB_DOMAIN_DRIVER_API)
		return CUPTI_ERROR_INVALID_PARAMETER;
	for (size_t i = 0; i < sizeof cb_names / sizeof *cb_names; i++)
		if (cb_names[i].id == cbid) {
			*name = cb_names[i].name;
			return CUPTI_SUCCESS;
		}
	return CUPTI_ERROR_INVALID_PARAMETER;
}

EXPORT CUptiResult CUPTIAPI cuptiGetTimestamp(uint64_t *timestamp)
{
	if (!timestamp)
		return CUPTI_ERROR_INVALID_PARAMETER;
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	*timestamp = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult CUPTIAPI cuptiGetVersion(uint32_t *version)
{
	if (!version)
		return CUPTI_ERROR_INVALID_PARAMETER;
	*version = CUPTI_API_VERSION;
	return CUPTI_SUCCESS;
}

/* ---- activity API ---- */

static pthread_mutex_t amu = PTHREAD_MUTEX_INITIALIZER;
static CUpti_BuffersCallbackRequestFunc req_fn;
static CUpti_BuffersCallbackCompleteFunc done_fn;
static uint8_t kinds[CUPTI_ACTIVITY_KIND_COUNT];
static struct buf {
	uint8_t *p;
	size_t size, valid;
	struct buf *next;
} *cur, *full, **full_tail = &full;
static size_t dropped;
static pthread_t flusher;
static unsigned flush_ms;
static int flusher_started;

EXPORT CUptiResult CUPTIAPI cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc funcBufferRequested,
							   CUpti_BuffersCallbackCompleteFunc funcBufferCompleted)
{
	if (!funcBufferRequested || !funcBufferCompleted)
		return CUPTI_ERROR_INVALID_PARAMETER;
	pthread_mutex_lock(&amu);
	req_fn = funcBufferRequested;
	done_fn = funcBufferCompleted;
	pthread_mutex_unlock(&amu);
	return CUPTI_SUCCESS;
}

static CUptiResult set_kind(CUpti_ActivityKind kind, int on)
{
	if ((int)kind <= CUPTI_ACTIVITY_KIND_INVALID || kind >= CUPTI_ACTIVITY_KIND_COUNT)
		return CUPTI_ERROR_INVALID_KIND;
	CUptiResult r = attach();
	if (r != CUPTI_SUCCESS)
		return r;
	pthread_mutex_lock(&amu);
	kinds[kind] = (uint8_t)on;
	pthread_mutex_unlock(&amu);
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult CUPTIAPI cuptiActivityEnable(CUpti_ActivityKind kind)
{
	return set_kind(kind, 1);
}

EXPORT CUptiResult CUPTIAPI cuptiActivityDisable(CUpti_ActivityKind kind)
{
	return set_kind(kind, 0);
}

/* under amu: room for n bytes in the current buffer, or NULL (dropped) */
static void *room_locked(size_t n)
{
	if (cur && cur->size - cur->valid < n) {
		*full_tail = cur; /* full: waits for the next flush */
		full_tail = &cur->next;
		cur = NULL;
	}
	if (!cur && req_fn) {
		uint8_t *p = NULL;
		size_t size = 0, maxrec = 0;
		req_fn(&p, &size, &maxrec);
		if (p && size >= n && !((uintptr_t)p & 7)) {
			cur = calloc(1, sizeof *cur);
			if (cur) {
				cur->p = p;
				cur->size = size;
			}
		}
	}
	if (!cur) {
		dropped++;
		return NULL;
	}
	void *r = cur->p + cur->valid;
	cur->valid += (n + 7) & ~(size_t)7;
	if (cur->valid > cur->size)
		cur->valid = cur->size;
	return r;
}

static uint64_t now_ns(void)
{
	uint64_t t;
	cuptiGetTimestamp(&t);
	return t;
}

static void on_memory(const struct standin_mem_event *ev)
{
	pthread_mutex_lock(&amu);
	if (!kinds[CUPTI_ACTIVITY_KIND_MEMORY2]) {
		pthread_mutex_unlock(&amu);
		return;
	}
	CUpti_ActivityMemory4 *m = room_locked(sizeof *m);
	if (m) {
		memset(m, 0, sizeof *m);
		m->kind = CUPTI_ACTIVITY_KIND_MEMORY2;
		m->memoryOperationType = (CUpti_ActivityMemoryOperationType)ev->op;
		m->memoryKind = (CUpti_ActivityMemoryKind)ev->kind;
		m->correlationId = ev->correlation_id;
		m->address = ev->address;
		m->bytes = ev->bytes;
		m->timestamp = now_ns();
		m->processId = (uint32_t)getpid();
		m->deviceId = ev->device;
		m->contextId = ev->context_id;
		m->streamId = ev->stream_id;
		m->isAsync = (uint32_t)ev->is_async;
		m->memoryPoolConfig.memoryPoolType = (CUpti_ActivityMemoryPoolType)ev->pool_type;
		m->memoryPoolConfig.address = ev->pool;
	}
	pthread_mutex_unlock(&amu);
}

static void on_pool(const struct standin_pool_event *ev)
{
	pthread_mutex_lock(&amu);
	if (!kinds[CUPTI_ACTIVITY_KIND_MEMORY_POOL]) {
		pthread_mutex_unlock(&amu);
		return;
	}
	CUpti_ActivityMemoryPool3 *m = room_locked(sizeof *m);
	if (m) {
		memset(m, 0, sizeof *m);
		m->kind = CUPTI_ACTIVITY_KIND_MEMORY_POOL;
		m->memoryPoolOperationType = (CUpti_ActivityMemoryPoolOperationType)ev->op;
		m->memoryPoolType = CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL;
		m->correlationId = ev->correlation_id;
		m->processId = (uint32_t)getpid();
		m->deviceId = ev->device;
		m->minBytesToKeep = ev->min_bytes_to_keep;
		m->address = ev->address;
		m->size = ev->size;
		m->timestamp = now_ns();
	}
	pthread_mutex_unlock(&amu);
}

/* hand every buffer with records (and, forced, the current one) to the client */
static CUptiResult flush(int forced)
{
	pthread_mutex_lock(&amu);
	if (!done_fn) {
		pthread_mutex_unlock(&amu);
		return CUPTI_ERROR_INVALID_OPERATION;
	}
	if (cur && (cur->valid || forced)) {
		*full_tail = cur;
		full_tail = &cur->next;
		cur = NULL;
	}
	struct buf *list = full;
	full = NULL;
	full_tail = &full;
	CUpti_BuffersCallbackCompleteFunc done = done_fn;
	pthread_mutex_unlock(&amu);
	while (list) {
		struct buf *b = list;
		list = b->next;
		done(NULL, 0, b->p, b->size, b->valid);
		free(b);
	}
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult CUPTIAPI cuptiActivityFlushAll(uint32_t flag)
{
	return flush((flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) != 0);
}

static void *flush_thread(void *arg)
{
	(void)arg;
	for (;;) {
		unsigned ms = __atomic_load_n(&flush_ms, __ATOMIC_RELAXED);
		struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
		nanosleep(&ts, NULL);
		if (__atomic_load_n(&flush_ms, __ATOMIC_RELAXED))
			flush(0);
	}
	return NULL;
}

EXPORT CUptiResult CUPTIAPI cuptiActivityFlushPeriod(uint32_t time)
{
	__atomic_store_n(&flush_ms, time, __ATOMIC_RELAXED);
	pthread_mutex_lock(&amu);
	if (time && !flusher_started) {
		sigset_t all, old;
		sigfillset(&all);
		pthread_sigmask(SIG_SETMASK, &all, &old);
		if (pthread_create(&flusher, NULL, flush_thread, NULL) == 0) {
			pthread_detach(flusher);
			flusher_started = 1;
		}
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	}
	pthread_mutex_unlock(&amu);
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult CUPTIAPI cuptiActivityGetNextRecord(uint8_t *buffer, size_t validBufferSizeBytes,
						       CUpti_Activity **record)
{
	if (!buffer || !record)
		return CUPTI_ERROR_INVALID_PARAMETER;
	size_t off = 0;
	if (*record) {
		size_t sz;
		switch ((*record)->kind) {
		case CUPTI_ACTIVITY_KIND_MEMORY2: sz = sizeof(CUpti_ActivityMemory4); break;
		case CUPTI_ACTIVITY_KIND_MEMORY_POOL: sz = sizeof(CUpti_ActivityMemoryPool3); break;
		default: return CUPTI_ERROR_INVALID_KIND;
		}
		off = (size_t)((uint8_t *)*record - buffer) + ((sz + 7) & ~(size_t)7);
	}
	if (off + sizeof(CUpti_Activity) > validBufferSizeBytes) {
		*record = NULL;
		return CUPTI_ERROR_MAX_LIMIT_REACHED;
	}
	*record = (CUpti_Activity *)(buffer + off);
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult CUPTIAPI cuptiActivityGetNumDroppedRecords(CUcontext context, uint32_t streamId, size_t *d)
{
	(void)context, (void)streamId;
	if (!d)
		return CUPTI_ERROR_INVALID_PARAMETER;
	pthread_mutex_lock(&amu);
	*d = dropped;
	dropped = 0;
	pthread_mutex_unlock(&amu);
	return CUPTI_SUCCESS;
}

EXPORT int standin_cupti_subscribed(void)
{
	return __atomic_load_n(&current, __ATOMIC_ACQUIRE) != NULL;
}
