/* CUPTI: driver-API callbacks for every memory call, resource callbacks for
 * contexts, and MEMORY2 activity records for module statics.
 *
 * libcupti is loaded at run time (never linked): DSMEMTRACE_CUPTI_LIB, else
 * the copy already mapped into the process (torch's libtorch_cuda needs
 * one), else libcupti.so.13 / libcupti.so from the library path, else the
 * toolkit's.  We subscribe from InitializeInjection — libcuda calls it during
 * cuInit because our constructor points CUDA_INJECTION64_PATH at us — or,
 * when another tool owns that variable, at the first driver call.
 *
 * CUPTI allows one subscriber.  When another tool subscribes later
 * (torch.profiler's kineto, through our exported cuptiSubscribe), it wins:
 * we flush, stop our activity kinds, unsubscribe and forward its call; from
 * then on our entry-point wrappers record the driver calls, and the trace
 * says so with a SOURCE record. */
#include <cuda.h>
#include <cupti.h>
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver.h"
#include "format.h"
#include "preload.h"

_Atomic int dsmt_cupti_live;

#define CUPTI_FNS(X)                  \
	X(cuptiSubscribe)             \
	X(cuptiUnsubscribe)           \
	X(cuptiEnableCallback)        \
	X(cuptiGetDeviceId)           \
	X(cuptiGetResultString)       \
	X(cuptiActivityRegisterCallbacks) \
	X(cuptiActivityEnable)        \
	X(cuptiActivityDisable)       \
	X(cuptiActivityFlushAll)      \
	X(cuptiActivityFlushPeriod)   \
	X(cuptiActivityGetNextRecord)

static struct {
#define X(n) __typeof__(&n) n;
	CUPTI_FNS(X)
#undef X
} cu;

static void *cupti_h;
static CUpti_SubscriberHandle sub;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t setup_once = PTHREAD_ONCE_INIT;
static int statics_on;    /* MEMORY2 activity enabled */
static uint8_t fallback;  /* who records driver calls when CUPTI does not */

/* driver callbacks we enable (and no others: every enabled id costs) */
static const CUpti_CallbackId cbids[] = {
	CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2,
	CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2,
	CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2,
	CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged,
	CUPTI_DRIVER_TRACE_CBID_cuMemAllocHost_v2,
	CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc,
	CUPTI_DRIVER_TRACE_CBID_cuMemFreeHost,
	CUPTI_DRIVER_TRACE_CBID_cuMemHostRegister_v2,
	CUPTI_DRIVER_TRACE_CBID_cuMemHostUnregister,
	CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync,
	CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz,
	CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync,
	CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz,
	CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync,
	CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz,
	CUPTI_DRIVER_TRACE_CBID_cuMemCreate,
	CUPTI_DRIVER_TRACE_CBID_cuMemRelease,
	CUPTI_DRIVER_TRACE_CBID_cuMemRetainAllocationHandle,
	CUPTI_DRIVER_TRACE_CBID_cuMemMap,
	CUPTI_DRIVER_TRACE_CBID_cuMemUnmap,
	CUPTI_DRIVER_TRACE_CBID_cuMemSetAccess,
	CUPTI_DRIVER_TRACE_CBID_cuMemAddressReserve,
	CUPTI_DRIVER_TRACE_CBID_cuMemAddressFree,
	CUPTI_DRIVER_TRACE_CBID_cuMemImportFromShareableHandle,
	CUPTI_DRIVER_TRACE_CBID_cuIpcOpenMemHandle_v2,
	CUPTI_DRIVER_TRACE_CBID_cuIpcCloseMemHandle,
	CUPTI_DRIVER_TRACE_CBID_cuMemPoolCreate,
	CUPTI_DRIVER_TRACE_CBID_cuMemPoolDestroy,
	CUPTI_DRIVER_TRACE_CBID_cuMemPoolTrimTo,
};

void dsmt_source(uint8_t via, uint8_t reason, const char *name)
{
	uint32_t id = name && *name ? dsmt_intern(name, strlen(name)) : 0;
	int saved = dsmt_in_hook;
	dsmt_in_hook = 1;
	dsmt_ev_source(via, reason, id);
	dsmt_in_hook = saved;
}

/* ---- callbacks ---- */

static int ctx_dev(CUcontext ctx)
{
	uint32_t id;
	if (ctx && cu.cuptiGetDeviceId && cu.cuptiGetDeviceId(ctx, &id) == CUPTI_SUCCESS)
		return (int)id;
	return -2;
}

static void CUPTIAPI on_callback(void *ud, CUpti_CallbackDomain dom, CUpti_CallbackId cbid, const void *data)
{
	(void)ud;
	if (!atomic_load_explicit(&dsmt_cupti_live, memory_order_acquire) || dsmt_in_hook)
		return;
	if (dom == CUPTI_CB_DOMAIN_DRIVER_API) {
		const CUpti_CallbackData *d = data;
		int at = dsmt_drv_at_enter(cbid);
		if (at < 0)
			return;
		if (at == 1 && d->callbackSite != CUPTI_API_ENTER)
			return;
		if (at == 0 && (d->callbackSite != CUPTI_API_EXIT || !d->functionReturnValue ||
				*(const CUresult *)d->functionReturnValue != CUDA_SUCCESS))
			return;
		if (dsmt_cc.in_drv && dsmt_cc.done)
			return; /* our wrapper recorded it already */
		dsmt_drv_record(cbid, d->functionParams, DSMT_VIA_CUPTI, ctx_dev(d->context));
		if (dsmt_cc.in_drv)
			dsmt_cc.done = 1;
	} else if (dom == CUPTI_CB_DOMAIN_RESOURCE) {
		const CUpti_ResourceData *r = data;
		uint8_t op = cbid == CUPTI_CBID_RESOURCE_CONTEXT_CREATED ? DSMT_DRV_CTX_CREATE : DSMT_DRV_CTX_DESTROY;
		int dev = ctx_dev(r->context);
		DSMT_RECORD(dsmt_ev_drv(op, DSMT_VIA_CUPTI, dev < 0 ? -1 : dev, (uintptr_t)r->context, 0, 0, NULL));
	}
}

#define ACT_BUF (256u << 10)

static void CUPTIAPI buf_request(uint8_t **buf, size_t *size, size_t *max)
{
	*buf = aligned_alloc(8, ACT_BUF);
	*size = *buf ? ACT_BUF : 0;
	*max = 0;
}

static void CUPTIAPI buf_complete(CUcontext ctx, uint32_t stream, uint8_t *buf, size_t size, size_t valid)
{
	(void)ctx, (void)stream, (void)size;
	CUpti_Activity *rec = NULL;
	while (cu.cuptiActivityGetNextRecord && valid &&
	       cu.cuptiActivityGetNextRecord(buf, valid, &rec) == CUPTI_SUCCESS) {
		if (rec->kind != CUPTI_ACTIVITY_KIND_MEMORY2)
			continue;
		const CUpti_ActivityMemory4 *m = (const CUpti_ActivityMemory4 *)rec;
		if (m->memoryKind != CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC)
			continue; /* the callbacks have every other allocation, in order */
		uint8_t op = m->memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE
				     ? DSMT_DRV_STATIC_FREE
				     : DSMT_DRV_STATIC;
		DSMT_RECORD(dsmt_ev_drv(op, DSMT_VIA_ACTIVITY, (int)m->deviceId, m->address, m->bytes, m->timestamp,
					NULL));
	}
	free(buf);
}

/* at exit: the records CUPTI still holds (statics of a short run) */
static void flush_activity(void)
{
	pthread_mutex_lock(&mu);
	if (statics_on && atomic_load(&dsmt_cupti_live))
		cu.cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
	pthread_mutex_unlock(&mu);
}

/* ---- loading ---- */

struct find_arg {
	char path[512];
};

static int find_cupti(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	struct find_arg *a = arg;
	const char *n = info->dlpi_name;
	const char *b = n ? strrchr(n, '/') : NULL;
	b = b ? b + 1 : n;
	if (b && !strncmp(b, "libcupti.so", 11) && !a->path[0])
		snprintf(a->path, sizeof a->path, "%s", n);
	return 0;
}

static void *open_cupti(void)
{
	const char *e = secure_getenv("DSMEMTRACE_CUPTI_LIB");
	if (e && *e)
		return dlopen(e, RTLD_NOW | RTLD_LOCAL);
	struct find_arg a = {{0}};
	dl_iterate_phdr(find_cupti, &a); /* dlopen only after it returns (preload.c) */
	void *h = a.path[0] ? dlopen(a.path, RTLD_NOW | RTLD_LOCAL) : NULL;
	static const char *const names[] = {
		"libcupti.so.13",
		"libcupti.so",
		"/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13",
		"/usr/local/cuda/lib64/libcupti.so.13",
	};
	for (size_t i = 0; !h && i < sizeof names / sizeof *names; i++)
		h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
	return h;
}

static const char *result_str(CUptiResult r)
{
	const char *s = NULL;
	if (cu.cuptiGetResultString && cu.cuptiGetResultString(r, &s) == CUPTI_SUCCESS && s)
		return s;
	return "unknown error";
}

/* the library named by a foreign CUDA_INJECTION64_PATH, or NULL */
static const char *foreign_injection(void)
{
	const char *p = secure_getenv("CUDA_INJECTION64_PATH");
	if (!p || !*p || !strcmp(p, dsmt_cfg.self_path))
		return NULL;
	return p;
}

/* what a process without our CUPTI subscription still records */
static const char *without_cupti(void)
{
	return fallback ? "driver calls are recorded through the entry-point wrappers; module statics are not seen"
			: "driver calls are not recorded (DSMEMTRACE_NO_DLSYM=1)";
}

static void setup(void)
{
	int saved = dsmt_in_hook;
	dsmt_in_hook = 1;
	fallback = dsmt_no_dlsym ? DSMT_VIA_NONE : DSMT_VIA_DLSYM;
	if (dsmt_cfg.disabled)
		goto out;
	if (dsmt_no_cupti) {
		dsmt_source(fallback, DSMT_SRC_DISABLED, NULL);
		goto out;
	}
	cupti_h = open_cupti();
	int ok = cupti_h != NULL;
#define X(n)                                                                 \
	if (ok && !(cu.n = (__typeof__(&n))dsmt_real_dlsym(cupti_h, #n))) \
		ok = 0;
	CUPTI_FNS(X)
#undef X
	if (!ok) {
		dsmt_warn("libcupti not found or unusable (set DSMEMTRACE_CUPTI_LIB=/path/libcupti.so): %s",
			  without_cupti());
		dsmt_source(fallback, DSMT_SRC_NO_CUPTI, NULL);
		goto out;
	}
	CUptiResult r = cu.cuptiSubscribe(&sub, on_callback, NULL);
	if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
		const char *f = foreign_injection();
		dsmt_warn("CUPTI is taken by another tool%s%s: %s", f ? " " : "", f ? f : "",
			  without_cupti());
		dsmt_source(fallback, f ? DSMT_SRC_FOREIGN : DSMT_SRC_REFUSED, f);
		goto out;
	}
	if (r != CUPTI_SUCCESS) {
		dsmt_warn("cuptiSubscribe failed (%s): %s", result_str(r),
			  without_cupti());
		dsmt_source(fallback, DSMT_SRC_NO_CUPTI, NULL);
		goto out;
	}
	for (size_t i = 0; i < sizeof cbids / sizeof *cbids; i++)
		cu.cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_DRIVER_API, cbids[i]);
	cu.cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_CREATED);
	cu.cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING);
	const char *st = secure_getenv("DSMEMTRACE_CUPTI_STATICS");
	if (!(st && !strcmp(st, "0")) && cu.cuptiActivityRegisterCallbacks(buf_request, buf_complete) == CUPTI_SUCCESS &&
	    cu.cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMORY2) == CUPTI_SUCCESS) {
		statics_on = 1;
		cu.cuptiActivityFlushPeriod(dsmt_cfg.flush_ms ? dsmt_cfg.flush_ms : 200);
		dsmt_before_final_drain = flush_activity;
	}
	dsmt_source(DSMT_VIA_CUPTI, DSMT_SRC_START, NULL);
	atomic_store_explicit(&dsmt_cupti_live, 1, memory_order_release);
out:
	dsmt_in_hook = saved;
}

void dsmt_cupti_lazy_init(void)
{
	pthread_once(&setup_once, setup);
}

/* libcuda calls this during cuInit when CUDA_INJECTION64_PATH names us. */
DSMT_EXPORT int InitializeInjection(void)
{
	pthread_once(&setup_once, setup);
	return 1;
}

/* ---- giving CUPTI away ---- */

static void yield_to(const void *caller)
{
	pthread_mutex_lock(&mu);
	if (atomic_load(&dsmt_cupti_live)) {
		/* first what CUPTI still holds (recorded by buf_complete here) */
		if (statics_on)
			cu.cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
		int saved = dsmt_in_hook;
		dsmt_in_hook = 1;
		Dl_info di;
		const char *who = caller && dladdr(caller, &di) && di.dli_fname ? di.dli_fname : NULL;
		const char *b = who ? strrchr(who, '/') : NULL;
		who = b ? b + 1 : who;
		/* from here the wrappers record (frees before the call again) */
		atomic_store_explicit(&dsmt_cupti_live, 0, memory_order_release);
		dsmt_source(fallback, DSMT_SRC_YIELD, who);
		if (statics_on) {
			cu.cuptiActivityDisable(CUPTI_ACTIVITY_KIND_MEMORY2);
			statics_on = 0;
		}
		cu.cuptiUnsubscribe(sub);
		dsmt_in_hook = saved;
		dsmt_warn("another tool%s%s subscribed to CUPTI (torch.profiler?): handed over; %s", who ? " in " : "",
			  who ? who : "",
			  fallback ? "driver calls are recorded through the entry-point wrappers from now on"
				   : "driver calls are no longer recorded (DSMEMTRACE_NO_DLSYM=1)");
	}
	pthread_mutex_unlock(&mu);
}

DSMT_EXPORT CUptiResult CUPTIAPI cuptiSubscribe(CUpti_SubscriberHandle *subscriber, CUpti_CallbackFunc callback,
						void *userdata)
{
	__typeof__(&cuptiSubscribe) f = cu.cuptiSubscribe ? cu.cuptiSubscribe : DSMT_REAL(cuptiSubscribe, "libcupti");
	if (!f)
		return CUPTI_ERROR_NOT_INITIALIZED;
	yield_to(__builtin_return_address(0));
	return f(subscriber, callback, userdata);
}

DSMT_EXPORT CUptiResult CUPTIAPI cuptiSubscribe_v2(CUpti_SubscriberHandle *subscriber, CUpti_CallbackFunc callback,
						   void *userdata, CUpti_SubscriberParams *params)
{
	__typeof__(&cuptiSubscribe_v2) f = DSMT_REAL(cuptiSubscribe_v2, "libcupti");
	if (!f)
		return CUPTI_ERROR_NOT_INITIALIZED;
	yield_to(__builtin_return_address(0));
	return f(subscriber, callback, userdata, params);
}
