/* Stand-in for the CUDA driver, libcuda.so.1 (soname libcuda.so.1).
 *
 * Links like the real one: unversioned exports under the versioned names
 * cuda.h maps to (cuMemAlloc_v2, cuMemHostRegister_v2, cuCtxCreate_v4, ...),
 * and every entry point is also reachable through cuGetProcAddress_v2 (and
 * the legacy 4-argument cuGetProcAddress), which resolves a base name +
 * version + flags to the library's own exported function: the pointer equals
 * dlsym(libcuda, "<versioned name>"), as measured on the real driver
 * (MECHANICS.md §2.1-2.3); CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
 * picks the _ptsz flavour of the async APIs.  Linked -Bsymbolic so a
 * preloaded definition of the same name never changes what we hand out, and
 * no API calls another through its exported name (one CUPTI callback per
 * call the application made, as with the real driver).
 *
 * cuInit: when CUDA_INJECTION64_PATH is set, the first cuInit dlopen()s it
 * and calls its `int InitializeInjection(void)` once, on the calling thread,
 * like the real driver (MECHANICS §1.5).
 *
 * CUPTI: the stand-in libcupti attaches through standin_cupti_attach()
 * (standin_cupti.h); every API below then reports ENTER and EXIT in the
 * DRIVER_API domain with its generated_cuda_meta.h params struct and an
 * increasing correlationId, context creation/destruction in the RESOURCE
 * domain, and MEMORY2 / MEMORY_POOL activity the way real CUPTI does
 * (MECHANICS §1.1: DEVICE records for cuMemAlloc/Pitch/async, MANAGED,
 * PINNED for host allocations, VMM memory at cuMemSetAccess / cuMemUnmap,
 * DEVICE_STATIC with correlationId 0 for module statics).
 *
 * "Device memory" is host address space (mmap, never touched,
 * MAP_NORESERVE); each device has a capacity of STANDIN_DEVICE_MEM bytes
 * (default 1 GiB); beyond it allocations fail with CUDA_ERROR_OUT_OF_MEMORY.
 * STANDIN_DEVICE_COUNT (default 2) sets the number of devices.  Device bytes
 * in use (standin_used_bytes) = cuMemAlloc/Pitch/Managed/async allocations +
 * VMM physical memory on a device location + module statics.
 *
 * VMM: cuMemCreate commits physical bytes (granularity 2 MiB) that stay
 * committed until the last reference goes: the handle from cuMemCreate, one
 * per cuMemRetainAllocationHandle, one per live cuMemMap, and handles
 * imported from it.  Host-location handles (HOST, HOST_NUMA,
 * HOST_NUMA_CURRENT) are pinned host memory (STANDIN_NO_HOST_VMM=1: they
 * fail with CUDA_ERROR_NOT_PERMITTED, as in containers without host NUMA).
 * cuMemAddressReserve hands out address space only.
 *
 * Sharing inside one process (not possible with the real driver, allowed
 * here so one test process can exercise the paths):
 *  - cuMemExportToShareableHandle (POSIX fd only; the handle must have been
 *    created with that requested type) gives a memfd naming the allocation;
 *    cuMemImportFromShareableHandle on it returns a new handle to the same
 *    physical memory (no new bytes: it keeps them alive until released);
 *  - cuIpcGetMemHandle on a cuMemAlloc base address; cuIpcOpenMemHandle_v2
 *    in the same process returns a new address aliasing it (no new bytes);
 *    cuIpcCloseMemHandle unmaps it.
 *
 * Async pools hold nothing beyond their live allocations (release threshold
 * 0): cuMemFreeAsync returns the bytes at once, cuMemPoolTrimTo has nothing
 * to trim.  A destroyed pool's outstanding allocations stay valid.
 *
 * Contexts: a primary context is created by the first
 * cuDevicePrimaryCtxRetain of its device and destroyed when its references
 * drop to 0; cuCtxCreate_v4/cuCtxDestroy_v2 make and drop others.  The first
 * context of each device loads the "modules" of the process: their
 * __device__ statics take STANDIN_STATIC_BYTES (default 1 MiB, 0 = none) on
 * the device, reported as a MEMORY2 DEVICE_STATIC record; standin_load_module
 * loads more.  Statics go with their context.  Allocations are not freed
 * when their context is destroyed (the real driver frees them).
 */
#include "standin_cupti.h"

#include <cuda.h>
#include <cupti.h> /* also the _v1 types generated_cuda_meta.h needs */
#include <cupti_activity.h>
#include <cupti_callbacks.h>
#include <cupti_driver_cbid.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))
#define MAX_DEV 8
#define GRAN ((size_t)2 << 20)

struct CUctx_st {
	int dev;
	int primary;
	uint32_t uid;
};

static struct CUctx_st primary[MAX_DEV];
static int prim_refs[MAX_DEV];
static int nctx[MAX_DEV];           /* live contexts per device */
static int statics_loaded[MAX_DEV]; /* the automatic module load happened */
static int ndev = -1;
static size_t capacity, static_bytes;
static size_t used[MAX_DEV];
static size_t host_pinned;
static int initialised;
static uint32_t next_ctx_uid = 1;
static __thread CUcontext cur_ctx;

enum { K_DEVICE, K_MANAGED, K_HOST, K_REGISTERED, K_ASYNC, K_STATIC, K_IPC };
struct alloc {
	uintptr_t p;
	size_t size;
	int dev, kind;
	CUcontext ctx;       /* K_STATIC: owner */
	struct pool *pool;   /* K_ASYNC */
	struct alloc *ipc_src; /* K_IPC */
	struct alloc *next;
};
static struct alloc *allocs;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void config(void)
{
	if (ndev >= 0)
		return;
	const char *m = getenv("STANDIN_DEVICE_MEM");
	capacity = m && *m ? strtoull(m, NULL, 0) : (size_t)1 << 30;
	const char *s = getenv("STANDIN_STATIC_BYTES");
	static_bytes = s && *s ? strtoull(s, NULL, 0) : (size_t)1 << 20;
	const char *c = getenv("STANDIN_DEVICE_COUNT");
	int n = c && *c ? atoi(c) : 2;
	if (n < 1)
		n = 1;
	if (n > MAX_DEV)
		n = MAX_DEV;
	for (int i = 0; i < n; i++) {
		primary[i].dev = i;
		primary[i].primary = 1;
	}
	ndev = n;
}

/* ---- CUPTI delivery ---------------------------------------------------- */

static const struct standin_cupti_ops *cupti;
static uint32_t next_corr;
static __thread uint32_t cur_corr; /* correlationId of the API call running on this thread */

EXPORT void standin_cupti_attach(const struct standin_cupti_ops *ops)
{
	__atomic_store_n(&cupti, ops, __ATOMIC_RELEASE);
}

struct call {
	const struct standin_cupti_ops *ops;
	CUpti_CallbackId cbid;
	uint32_t outer_corr;
	uint64_t corr_data;
	CUpti_CallbackData d;
};

static void enter(struct call *c, CUpti_CallbackId cbid, const char *name, const void *params)
{
	c->ops = __atomic_load_n(&cupti, __ATOMIC_ACQUIRE);
	c->cbid = cbid;
	c->outer_corr = cur_corr;
	cur_corr = __atomic_add_fetch(&next_corr, 1, __ATOMIC_RELAXED);
	if (!c->ops)
		return;
	c->corr_data = 0;
	memset(&c->d, 0, sizeof c->d);
	c->d.callbackSite = CUPTI_API_ENTER;
	c->d.functionName = name;
	c->d.functionParams = params;
	c->d.context = cur_ctx;
	c->d.contextUid = cur_ctx ? cur_ctx->uid : 0;
	c->d.correlationData = &c->corr_data;
	c->d.correlationId = cur_corr;
	c->ops->api(CUPTI_CB_DOMAIN_DRIVER_API, cbid, &c->d);
}

static CUresult leave(struct call *c, CUresult r)
{
	if (c->ops) {
		c->d.callbackSite = CUPTI_API_EXIT;
		c->d.functionReturnValue = &r;
		c->d.context = cur_ctx;
		c->d.contextUid = cur_ctx ? cur_ctx->uid : 0;
		c->ops->api(CUPTI_CB_DOMAIN_DRIVER_API, c->cbid, &c->d);
	}
	cur_corr = c->outer_corr;
	return r;
}

/* TRACED(cuMemAlloc_v2, (dptr, bytesize), impl(...)): the API body */
#define TRACED(NAME, PARAMS, CALL)                                              \
	do {                                                                    \
		NAME##_params p_ = {UNPAREN PARAMS};                            \
		struct call c_;                                                 \
		enter(&c_, CUPTI_DRIVER_TRACE_CBID_##NAME, #NAME, &p_);         \
		return leave(&c_, CALL);                                        \
	} while (0)
#define UNPAREN(...) __VA_ARGS__

static void resource(CUpti_CallbackId cbid, CUcontext ctx)
{
	const struct standin_cupti_ops *ops = __atomic_load_n(&cupti, __ATOMIC_ACQUIRE);
	if (!ops)
		return;
	CUpti_ResourceData d = {.context = ctx};
	ops->api(CUPTI_CB_DOMAIN_RESOURCE, cbid, &d);
}

/* MEMORY2 record for what the current API call did (correlationId = the
 * call's; 0 for module statics) */
static void activity(int op, int kind, uintptr_t addr, size_t bytes, int dev, CUcontext ctx, int is_async,
		     uint64_t pool)
{
	const struct standin_cupti_ops *ops = __atomic_load_n(&cupti, __ATOMIC_ACQUIRE);
	if (!ops || !ops->memory)
		return;
	struct standin_mem_event ev = {
		.op = op,
		.kind = kind,
		.address = addr,
		.bytes = bytes,
		.device = dev < 0 ? 0 : (uint32_t)dev,
		.context_id = ctx ? ctx->uid : CUPTI_INVALID_CONTEXT_ID,
		.correlation_id = kind == CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC ? 0 : cur_corr,
		.stream_id = is_async ? 0 : CUPTI_INVALID_STREAM_ID,
		.is_async = is_async,
		.pool = pool,
		.pool_type = pool ? CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL : CUPTI_ACTIVITY_MEMORY_POOL_TYPE_INVALID,
	};
	ops->memory(&ev);
}

static void pool_activity(int op, int dev, uint64_t pool, size_t min_keep)
{
	const struct standin_cupti_ops *ops = __atomic_load_n(&cupti, __ATOMIC_ACQUIRE);
	if (!ops || !ops->pool)
		return;
	struct standin_pool_event ev = {op, (uint32_t)dev, cur_corr, pool, 0, min_keep};
	ops->pool(&ev);
}

#define ALLOC_OP CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION
#define RELEASE_OP CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE

/* ---- initialisation, devices ------------------------------------------- */

static pthread_once_t inj_once = PTHREAD_ONCE_INIT;

static void injection(void)
{
	const char *path = getenv("CUDA_INJECTION64_PATH");
	if (!path || !*path)
		return;
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h)
		return;
	int (*init)(void) = (int (*)(void))dlsym(h, "InitializeInjection");
	if (init)
		init();
}

EXPORT CUresult CUDAAPI cuInit(unsigned int flags)
{
	if (flags)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&lock);
	config();
	initialised = 1;
	pthread_mutex_unlock(&lock);
	pthread_once(&inj_once, injection);
	return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuDriverGetVersion(int *v)
{
	if (!v)
		return CUDA_ERROR_INVALID_VALUE;
	*v = 13000;
	return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuDeviceGetCount(int *count)
{
	if (!initialised)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!count)
		return CUDA_ERROR_INVALID_VALUE;
	*count = ndev;
	return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuDeviceGet(CUdevice *d, int ordinal)
{
	if (!initialised)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (ordinal < 0 || ordinal >= ndev)
		return CUDA_ERROR_INVALID_DEVICE;
	*d = ordinal;
	return CUDA_SUCCESS;
}

static CUresult pci_bus_id(char *out, int len, CUdevice dev)
{
	if (!initialised)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!out || len <= 0)
		return CUDA_ERROR_INVALID_VALUE;
	if (dev < 0 || dev >= ndev)
		return CUDA_ERROR_INVALID_DEVICE;
	snprintf(out, (size_t)len, "0000:%02X:00.0", 0x10 + dev); /* NVML enumerates in reverse (fake_nvml.c) */
	return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuDeviceGetPCIBusId(char *pciBusId, int len, CUdevice dev)
{
	TRACED(cuDeviceGetPCIBusId, (pciBusId, len, dev), pci_bus_id(pciBusId, len, dev));
}

/* ---- device address space ---------------------------------------------- */

/* Device memory comes from one reserved range per device, first fit, so the
 * relative order of addresses (which the caching allocator's best fit uses to
 * break ties) does not depend on what else the process maps. */
static uintptr_t arena[MAX_DEV];

static int in_arena(const struct alloc *a)
{
	return a->kind == K_DEVICE || a->kind == K_MANAGED || a->kind == K_ASYNC || a->kind == K_STATIC;
}

static uintptr_t arena_fit(int dev, size_t size)
{
	if (!arena[dev]) {
		void *a = mmap(NULL, capacity, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (a == MAP_FAILED)
			return 0;
		arena[dev] = (uintptr_t)a;
	}
	uintptr_t lo = arena[dev], hi = arena[dev] + capacity;
	/* gaps between this device's allocations, in address order */
	for (;;) {
		uintptr_t next_lo = lo;
		int clash = 0;
		for (struct alloc *a = allocs; a; a = a->next) {
			if (a->dev != dev || !in_arena(a))
				continue;
			uintptr_t end = a->p + ((a->size + 4095) & ~(size_t)4095);
			if (a->p < lo + size && end > lo) {
				clash = 1;
				if (end > next_lo)
					next_lo = end;
			}
		}
		if (!clash)
			return lo + size <= hi ? lo : 0;
		lo = next_lo;
		if (lo + size > hi)
			return 0;
	}
}

/* address space outside the arenas (VMM reservations, IPC mappings) */
static uintptr_t va_map(size_t size)
{
	void *m = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	return m == MAP_FAILED ? 0 : (uintptr_t)m;
}

/* under lock: a new device (dev >= 0) or host allocation record */
static struct alloc *add_locked(int dev, size_t size, int kind, CUresult *err)
{
	struct alloc *a = calloc(1, sizeof *a);
	if (!a) {
		*err = CUDA_ERROR_OUT_OF_MEMORY;
		return NULL;
	}
	uintptr_t p = 0;
	if (kind == K_IPC) {
		p = va_map(size);
	} else if (dev >= 0) {
		if (size <= capacity && used[dev] <= capacity - size)
			p = arena_fit(dev, size);
	} else {
		void *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		p = m == MAP_FAILED ? 0 : (uintptr_t)m;
	}
	if (!p) {
		free(a);
		*err = CUDA_ERROR_OUT_OF_MEMORY;
		return NULL;
	}
	if (kind == K_HOST)
		host_pinned += size;
	else if (dev >= 0 && kind != K_IPC)
		used[dev] += size;
	a->p = p;
	a->size = size;
	a->dev = dev;
	a->kind = kind;
	a->next = allocs;
	allocs = a;
	return a;
}

/* under lock: unlink and account; the caller frees */
static void drop_locked(struct alloc **pp)
{
	struct alloc *a = *pp;
	*pp = a->next;
	if (a->kind == K_HOST) {
		host_pinned -= a->size;
		munmap((void *)a->p, a->size);
	} else if (a->kind == K_IPC) {
		munmap((void *)a->p, a->size);
	} else if (a->dev >= 0) {
		used[a->dev] -= a->size; /* stays mapped in the arena */
	}
}

static struct alloc **find_locked(uintptr_t p, int kind_mask)
{
	for (struct alloc **pp = &allocs; *pp; pp = &(*pp)->next)
		if ((*pp)->p == p && (kind_mask >> (*pp)->kind & 1))
			return pp;
	return NULL;
}

#define KM(k) (1 << (k))

/* ---- contexts ----------------------------------------------------------- */

/* under no lock: the automatic module load of a device's first context */
static void load_statics(CUcontext ctx, size_t bytes)
{
	if (!bytes)
		return;
	CUresult err;
	pthread_mutex_lock(&lock);
	struct alloc *a = add_locked(ctx->dev, bytes, K_STATIC, &err);
	if (a)
		a->ctx = ctx;
	uintptr_t p = a ? a->p : 0;
	pthread_mutex_unlock(&lock);
	if (a)
		activity(ALLOC_OP, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC, p, bytes, ctx->dev, ctx, 0, 0);
}

static void context_created(CUcontext ctx)
{
	pthread_mutex_lock(&lock);
	nctx[ctx->dev]++;
	int first = !statics_loaded[ctx->dev];
	statics_loaded[ctx->dev] = 1;
	pthread_mutex_unlock(&lock);
	resource(CUPTI_CBID_RESOURCE_CONTEXT_CREATED, ctx);
	if (first)
		load_statics(ctx, static_bytes);
}

static void context_destroying(CUcontext ctx)
{
	resource(CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING, ctx);
	for (;;) { /* unload its modules */
		pthread_mutex_lock(&lock);
		struct alloc **pp = &allocs;
		while (*pp && !((*pp)->kind == K_STATIC && (*pp)->ctx == ctx))
			pp = &(*pp)->next;
		struct alloc *a = *pp;
		if (a)
			drop_locked(pp);
		pthread_mutex_unlock(&lock);
		if (!a)
			break;
		activity(RELEASE_OP, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC, a->p, a->size, a->dev, ctx, 0, 0);
		free(a);
	}
	pthread_mutex_lock(&lock);
	nctx[ctx->dev]--;
	pthread_mutex_unlock(&lock);
}

static CUresult primary_retain(CUcontext *pctx, CUdevice dev)
{
	if (!initialised)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	if (dev < 0 || dev >= ndev)
		return CUDA_ERROR_INVALID_DEVICE;
	pthread_mutex_lock(&lock);
	int created = prim_refs[dev]++ == 0;
	if (created)
		primary[dev].uid = next_ctx_uid++;
	pthread_mutex_unlock(&lock);
	if (created)
		context_created(&primary[dev]);
	*pctx = &primary[dev];
	return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
	TRACED(cuDevicePrimaryCtxRetain, (pctx, dev), primary_retain(pctx, dev));
}

static CUresult primary_release(CUdevice dev)
{
	if (!initialised)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (dev < 0 || dev >= ndev)
		return CUDA_ERROR_INVALID_DEVICE;
	pthread_mutex_lock(&lock);
	if (prim_refs[dev] == 0) {
		pthread_mutex_unlock(&lock);
		return CUDA_ERROR_INVALID_CONTEXT;
	}
	int destroy = --prim_refs[dev] == 0;
	pthread_mutex_unlock(&lock);
	if (destroy)
		context_destroying(&primary[dev]);
	return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice dev) /* _v2 */
{
	TRACED(cuDevicePrimaryCtxRelease_v2, (dev), primary_release(dev));
}

static CUresult ctx_create(CUcontext *pctx, CUdevice dev)
{
	if (!initialised)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	if (dev < 0 || dev >= ndev)
		return CUDA_ERROR_INVALID_DEVICE;
	struct CUctx_st *c = calloc(1, sizeof *c);
	if (!c)
		return CUDA_ERROR_OUT_OF_MEMORY;
	c->dev = dev;
	pthread_mutex_lock(&lock);
	c->uid = next_ctx_uid++;
	pthread_mutex_unlock(&lock);
	context_created(c);
	cur_ctx = c; /* pushed: current to the calling thread */
	*pctx = c;
	return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuCtxCreate(CUcontext *pctx, CUctxCreateParams *params, unsigned int flags, CUdevice dev) /* _v4 */
{
	TRACED(cuCtxCreate_v4, (pctx, params, flags, dev), ctx_create(pctx, dev));
}

static CUresult ctx_destroy(CUcontext ctx)
{
	if (!initialised)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!ctx || ctx->primary)
		return CUDA_ERROR_INVALID_CONTEXT;
	context_destroying(ctx);
	if (cur_ctx == ctx)
		cur_ctx = NULL;
	free(ctx);
	return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuCtxDestroy(CUcontext ctx) /* _v2 */
{
	TRACED(cuCtxDestroy_v2, (ctx), ctx_destroy(ctx));
}

EXPORT CUresult CUDAAPI cuCtxSetCurrent(CUcontext ctx)
{
	cuCtxSetCurrent_params p = {ctx};
	struct call c;
	enter(&c, CUPTI_DRIVER_TRACE_CBID_cuCtxSetCurrent, "cuCtxSetCurrent", &p);
	cur_ctx = ctx;
	return leave(&c, CUDA_SUCCESS);
}

static CUresult ctx_get_current(CUcontext *pctx)
{
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	*pctx = cur_ctx;
	return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuCtxGetCurrent(CUcontext *pctx)
{
	TRACED(cuCtxGetCurrent, (pctx), ctx_get_current(pctx));
}

static CUresult ctx_get_device(CUdevice *d)
{
	if (!d)
		return CUDA_ERROR_INVALID_VALUE;
	if (!cur_ctx)
		return CUDA_ERROR_INVALID_CONTEXT;
	*d = cur_ctx->dev;
	return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuCtxGetDevice(CUdevice *d)
{
	TRACED(cuCtxGetDevice, (d), ctx_get_device(d));
}

/* ---- cuMemAlloc family --------------------------------------------------- */

static int cur_dev_or_err(CUresult *err)
{
	if (!initialised) {
		*err = CUDA_ERROR_NOT_INITIALIZED;
		return -1;
	}
	if (!cur_ctx) {
		*err = CUDA_ERROR_INVALID_CONTEXT;
		return -1;
	}
	return cur_ctx->dev;
}

static CUresult dev_alloc(CUdeviceptr *out, size_t size, int kind, struct pool *pool, int pool_dev)
{
	CUresult err = CUDA_SUCCESS;
	if (!out)
		return CUDA_ERROR_INVALID_VALUE;
	int dev = pool ? pool_dev : cur_dev_or_err(&err);
	if (!initialised)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (dev < 0)
		return err;
	if (size == 0)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&lock);
	struct alloc *a = add_locked(dev, size, kind, &err);
	if (a)
		a->pool = pool;
	uintptr_t p = a ? a->p : 0;
	pthread_mutex_unlock(&lock);
	if (!a)
		return err;
	*out = p;
	activity(ALLOC_OP, kind == K_MANAGED ? CUPTI_ACTIVITY_MEMORY_KIND_MANAGED : CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, p,
		 size, dev, cur_ctx, kind == K_ASYNC, (uintptr_t)pool);
	return CUDA_SUCCESS;
}

static CUresult dev_free(uintptr_t p, int kind_mask)
{
	if (!initialised)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!p)
		return CUDA_SUCCESS;
	pthread_mutex_lock(&lock);
	struct alloc **pp = find_locked(p, kind_mask);
	struct alloc *a = pp ? *pp : NULL;
	if (a)
		drop_locked(pp);
	pthread_mutex_unlock(&lock);
	if (!a)
		return CUDA_ERROR_INVALID_VALUE;
	int kind = a->kind == K_MANAGED ? CUPTI_ACTIVITY_MEMORY_KIND_MANAGED
		 : a->kind == K_HOST  ? CUPTI_ACTIVITY_MEMORY_KIND_PINNED
				      : CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
	activity(RELEASE_OP, kind, a->p, a->size, a->dev, cur_ctx, a->kind == K_ASYNC, (uintptr_t)a->pool);
	free(a);
	return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuMemAlloc(CUdeviceptr *dptr, size_t bytesize) /* cuMemAlloc_v2 */
{
	TRACED(cuMemAlloc_v2, (dptr, bytesize), dev_alloc(dptr, bytesize, K_DEVICE, NULL, -1));
}

static CUresult alloc_pitch(CUdeviceptr *dptr, size_t *pitch, size_t width, size_t height, unsigned elem)
{
	if (!dptr || !pitch || !width || !height || (elem != 4 && elem != 8 && elem != 16))
		return CUDA_ERROR_INVALID_VALUE;
	size_t pt = (width + 511) & ~(size_t)511;
	CUresult r = dev_alloc(dptr, pt * height, K_DEVICE, NULL, -1);
	if (r == CUDA_SUCCESS)
		*pitch = pt;
	return r;
}

EXPORT CUresult CUDAAPI cuMemAllocPitch(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes, size_t Height,
					unsigned int ElementSizeBytes) /* _v2 */
{
	TRACED(cuMemAllocPitch_v2, (dptr, pPitch, WidthInBytes, Height, ElementSizeBytes),
	       alloc_pitch(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes));
}

EXPORT CUresult CUDAAPI cuMemFree(CUdeviceptr dptr) /* cuMemFree_v2 */
{
	TRACED(cuMemFree_v2, (dptr), dev_free(dptr, KM(K_DEVICE) | KM(K_MANAGED) | KM(K_ASYNC)));
}

static CUresult alloc_managed(CUdeviceptr *dptr, size_t size, unsigned flags)
{
	if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST)
		return CUDA_ERROR_INVALID_VALUE;
	return dev_alloc(dptr, size, K_MANAGED, NULL, -1);
}

EXPORT CUresult CUDAAPI cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
	TRACED(cuMemAllocManaged, (dptr, bytesize, flags), alloc_managed(dptr, bytesize, flags));
}

/* ---- pinned host memory -------------------------------------------------- */

static CUresult host_alloc(void **pp, size_t size, unsigned flags)
{
	if (!initialised)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!pp || !size || (flags & ~0xfu))
		return CUDA_ERROR_INVALID_VALUE;
	if (!cur_ctx)
		return CUDA_ERROR_INVALID_CONTEXT;
	CUresult err = CUDA_SUCCESS;
	pthread_mutex_lock(&lock);
	struct alloc *a = add_locked(-1, size, K_HOST, &err);
	uintptr_t p = a ? a->p : 0;
	pthread_mutex_unlock(&lock);
	if (!a)
		return err;
	*pp = (void *)p;
	activity(ALLOC_OP, CUPTI_ACTIVITY_MEMORY_KIND_PINNED, p, size, cur_ctx->dev, cur_ctx, 0, 0);
	return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
	TRACED(cuMemHostAlloc, (pp, bytesize, Flags), host_alloc(pp, bytesize, Flags));
}

EXPORT CUresult CUDAAPI cuMemAllocHost(void **pp, size_t bytesize) /* cuMemAllocHost_v2 */
{
	TRACED(cuMemAllocHost_v2, (pp, bytesize), host_alloc(pp, bytesize, 0));
}

EXPORT CUresult CUDAAPI cuMemFreeHost(void *p)
{
	TRACED(cuMemFreeHost, (p), p ? dev_free((uintptr_t)p, KM(K_HOST)) : CUDA_ERROR_INVALID_VALUE);
}

static CUresult host_register(void *p, size_t size, unsigned flags)
{
	if (!initialised)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!p || !size || (flags & ~0xfu))
		return CUDA_ERROR_INVALID_VALUE;
	CUresult err = CUDA_SUCCESS;
	pthread_mutex_lock(&lock);
	for (struct alloc *b = allocs; b; b = b->next)
		if (b->kind == K_REGISTERED && b->p < (uintptr_t)p + size && (uintptr_t)p < b->p + b->size) {
			pthread_mutex_unlock(&lock);
			return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
		}
	struct alloc *a = calloc(1, sizeof *a);
	if (a) {
		*a = (struct alloc){.p = (uintptr_t)p, .size = size, .dev = -1, .kind = K_REGISTERED, .next = allocs};
		allocs = a;
	} else {
		err = CUDA_ERROR_OUT_OF_MEMORY;
	}
	pthread_mutex_unlock(&lock);
	return err;
}

EXPORT CUresult CUDAAPI cuMemHostRegister(void *p, size_t bytesize, unsigned int Flags) /* _v2 */
{
	TRACED(cuMemHostRegister_v2, (p, bytesize, Flags), host_register(p, bytesize, Flags));
}

static CUresult host_unregister(void *p)
{
	if (!initialised)
		return CUDA_ERROR_NOT_INITIALIZED;
	pthread_mutex_lock(&lock);
	struct alloc **pp = find_locked((uintptr_t)p, KM(K_REGISTERED));
	struct alloc *a = pp ? *pp : NULL;
	if (a)
		*pp = a->next;
	pthread_mutex_unlock(&lock);
	free(a);
	return a ? CUDA_SUCCESS : CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
}

EXPORT CUresult CUDAAPI cuMemHostUnregister(void *p)
{
	TRACED(cuMemHostUnregister, (p), host_unregister(p));
}

/* ---- stream-ordered allocation and pools --------------------------------- */

struct pool {
	int dev;
	int is_default, destroyed;
};
static struct pool default_pool[MAX_DEV];
struct pool_node {
	struct pool *pool;
	struct pool_node *next;
};
static struct pool_node *pools;

static int pool_valid_locked(struct pool *p)
{
	for (int d = 0; d < MAX_DEV; d++)
		if (p == &default_pool[d])
			return 1;
	for (struct pool_node *n = pools; n; n = n->next)
		if (n->pool == p && !p->destroyed)
			return 1;
	return 0;
}

static CUresult alloc_async(CUdeviceptr *dptr, size_t size)
{
	CUresult err = CUDA_SUCCESS;
	int dev = cur_dev_or_err(&err);
	if (dev < 0)
		return err;
	default_pool[dev].dev = dev;
	default_pool[dev].is_default = 1;
	return dev_alloc(dptr, size, K_ASYNC, &default_pool[dev], dev);
}

static CUresult alloc_from_pool(CUdeviceptr *dptr, size_t size, CUmemoryPool pool)
{
	if (!initialised)
		return CUDA_ERROR_NOT_INITIALIZED;
	struct pool *p = (struct pool *)pool;
	pthread_mutex_lock(&lock);
	int ok = p && pool_valid_locked(p);
	pthread_mutex_unlock(&lock);
	if (!ok)
		return CUDA_ERROR_INVALID_VALUE;
	return dev_alloc(dptr, size, K_ASYNC, p, p->dev);
}

EXPORT CUresult CUDAAPI cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
	TRACED(cuMemAllocAsync, (dptr, bytesize, hStream), alloc_async(dptr, bytesize));
}

EXPORT CUresult CUDAAPI cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
	TRACED(cuMemAllocAsync_ptsz, (dptr, bytesize, hStream), alloc_async(dptr, bytesize));
}

EXPORT CUresult CUDAAPI cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream)
{
	TRACED(cuMemAllocFromPoolAsync, (dptr, bytesize, pool, hStream), alloc_from_pool(dptr, bytesize, pool));
}

EXPORT CUresult CUDAAPI cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
						     CUstream hStream)
{
	TRACED(cuMemAllocFromPoolAsync_ptsz, (dptr, bytesize, pool, hStream), alloc_from_pool(dptr, bytesize, pool));
}

EXPORT CUresult CUDAAPI cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
	TRACED(cuMemFreeAsync, (dptr, hStream), dptr ? dev_free(dptr, KM(K_ASYNC)) : CUDA_ERROR_INVALID_VALUE);
}

EXPORT CUresult CUDAAPI cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{
	TRACED(cuMemFreeAsync_ptsz, (dptr, hStream), dptr ? dev_free(dptr, KM(K_ASYNC)) : CUDA_ERROR_INVALID_VALUE);
}

static CUresult pool_create(CUmemoryPool *out, const CUmemPoolProps *props)
{
	if (!initialised)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!out || !props || props->allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
	    props->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
		return CUDA_ERROR_INVALID_VALUE;
	if (props->location.id < 0 || props->location.id >= ndev)
		return CUDA_ERROR_INVALID_DEVICE;
	if (props->handleTypes & ~(unsigned)CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
		return CUDA_ERROR_NOT_SUPPORTED;
	struct pool *p = calloc(1, sizeof *p);
	struct pool_node *n = calloc(1, sizeof *n);
	if (!p || !n) {
		free(p);
		free(n);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	p->dev = props->location.id;
	pthread_mutex_lock(&lock);
	n->pool = p;
	n->next = pools;
	pools = n;
	pthread_mutex_unlock(&lock);
	*out = (CUmemoryPool)p;
	pool_activity(CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_CREATED, p->dev, (uintptr_t)p, 0);
	return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *poolProps)
{
	TRACED(cuMemPoolCreate, (pool, poolProps), pool_create(pool, poolProps));
}

static CUresult pool_destroy(CUmemoryPool pool)
{
	if (!initialised)
		return CUDA_ERROR_NOT_INITIALIZED;
	struct pool *p = (struct pool *)pool;
	pthread_mutex_lock(&lock);
	int ok = p && pool_valid_locked(p) && !p->is_default;
	for (int d = 0; ok && d < MAX_DEV; d++)
		if (p == &default_pool[d])
			ok = 0;
	if (ok)
		p->destroyed = 1; /* outstanding allocations stay valid (the struct is kept) */
	pthread_mutex_unlock(&lock);
	if (!ok)
		return CUDA_ERROR_INVALID_VALUE;
	pool_activity(CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_DESTROYED, p->dev, (uintptr_t)p, 0);
	return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuMemPoolDestroy(CUmemoryPool pool)
{
	TRACED(cuMemPoolDestroy, (pool), pool_destroy(pool));
}

static CUresult pool_trim(CUmemoryPool pool, size_t keep)
{
	if (!initialised)
		return CUDA_ERROR_NOT_INITIALIZED;
	struct pool *p = (struct pool *)pool;
	pthread_mutex_lock(&lock);
	int ok = p && pool_valid_locked(p);
	pthread_mutex_unlock(&lock);
	if (!ok)
		return CUDA_ERROR_INVALID_VALUE;
	pool_activity(CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_TRIMMED, p->dev, (uintptr_t)p, keep);
	return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep)
{
	TRACED(cuMemPoolTrimTo, (pool, minBytesToKeep), pool_trim(pool, minBytesToKeep));
}

/* ---- virtual memory management ------------------------------------------- */

struct phys {
	size_t size;
	int dev; /* -1: host location */
	int holders; /* handles referring to it */
};
struct handle {
	uint64_t id;
	struct phys *phys;
	int user_refs; /* create or import + retains, minus releases */
	int maps;      /* live mappings */
	int handle_types;
	struct handle *next;
};
struct mapping {
	uintptr_t va;
	size_t size;
	struct handle *h;
	int access;
	struct mapping *next;
};
struct reservation {
	uintptr_t va;
	size_t size;
	struct reservation *next;
};
static struct handle *handles;
static struct mapping *mappings;
static struct reservation *reservations;
static uint64_t next_handle = 0x100000;

static struct handle *handle_locked(uint64_t id)
{
	for (struct handle *h = handles; h; h = h->next)
		if (h->id == id)
			return h;
	return NULL;
}

static struct handle *new_handle_locked(struct phys *ph, int types)
{
	struct handle *h = calloc(1, sizeof *h);
	if (!h)
		return NULL;
	next_handle += 0x10;
	h->id = next_handle;
	h->phys = ph;
	h->user_refs = 1;
	h->handle_types = types;
	h->next = handles;
	handles = h;
	ph->holders++;
	return h;
}

/* under lock: drop the handle when its last reference went */
static void handle_gc_locked(struct handle *h)
{
	if (h->user_refs > 0 || h->maps > 0)
		return;
	for (struct handle **pp = &handles; *pp; pp = &(*pp)->next)
		if (*pp == h) {
			*pp = h->next;
			break;
		}
	struct phys *ph = h->phys;
	if (--ph->holders == 0) {
		if (ph->dev >= 0)
			used[ph->dev] -= ph->size;
		else
			host_pinned -= ph->size;
		free(ph);
	}
	free(h);
}

static int host_location(int type)
{
	return type == CU_MEM_LOCATION_TYPE_HOST || type == CU_MEM_LOCATION_TYPE_HOST_NUMA ||
	       type == CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT;
}

static CUresult granularity(size_t *g, const CUmemAllocationProp *prop, CUmemAllocationGranularity_flags option)
{
	(void)option;
	if (!initialised)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!g || !prop || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED)
		return CUDA_ERROR_INVALID_VALUE;
	if (prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE && (prop->location.id < 0 || prop->location.id >= ndev))
		return CUDA_ERROR_INVALID_DEVICE;
	*g = GRAN;
	return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuMemGetAllocationGranularity(size_t *g, const CUmemAllocationProp *prop,
						      CUmemAllocationGranularity_flags option)
{
	TRACED(cuMemGetAllocationGranularity, (g, prop, option), granularity(g, prop, option));
}

static CUresult mem_create(CUmemGenericAllocationHandle *out, size_t size, const CUmemAllocationProp *prop,
			   unsigned long long flags)
{
	if (!initialised)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!out || !prop || flags || !size || size % GRAN || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED)
		return CUDA_ERROR_INVALID_VALUE;
	if (prop->requestedHandleTypes & ~(unsigned)CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
		return CUDA_ERROR_NOT_SUPPORTED;
	int dev;
	if (prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE) {
		if (prop->location.id < 0 || prop->location.id >= ndev)
			return CUDA_ERROR_INVALID_DEVICE;
		dev = prop->location.id;
	} else if (host_location(prop->location.type)) {
		const char *no = getenv("STANDIN_NO_HOST_VMM");
		if (no && *no == '1')
			return CUDA_ERROR_NOT_PERMITTED;
		dev = -1;
	} else {
		return CUDA_ERROR_INVALID_VALUE;
	}
	struct phys *ph = calloc(1, sizeof *ph);
	if (!ph)
		return CUDA_ERROR_OUT_OF_MEMORY;
	pthread_mutex_lock(&lock);
	if (dev >= 0 && (size > capacity || used[dev] > capacity - size)) {
		pthread_mutex_unlock(&lock);
		free(ph);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	ph->size = size;
	ph->dev = dev;
	struct handle *h = new_handle_locked(ph, prop->requestedHandleTypes);
	if (!h) {
		pthread_mutex_unlock(&lock);
		free(ph);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	if (dev >= 0)
		used[dev] += size;
	else
		host_pinned += size;
	*out = h->id;
	pthread_mutex_unlock(&lock);
	return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
				    unsigned long long flags)
{
	TRACED(cuMemCreate, (handle, size, prop, flags), mem_create(handle, size, prop, flags));
}

static CUresult mem_release(CUmemGenericAllocationHandle id)
{
	if (!initialised)
		return CUDA_ERROR_NOT_INITIALIZED;
	pthread_mutex_lock(&lock);
	struct handle *h = handle_locked(id);
	CUresult r = CUDA_SUCCESS;
	if (!h || h->user_refs <= 0)
		r = CUDA_ERROR_INVALID_VALUE;
	else {
		h->user_refs--;
		handle_gc_locked(h);
	}
	pthread_mutex_unlock(&lock);
	return r;
}

EXPORT CUresult CUDAAPI cuMemRelease(CUmemGenericAllocationHandle handle)
{
	TRACED(cuMemRelease, (handle), mem_release(handle));
}

static struct mapping *mapping_at_locked(uintptr_t a)
{
	for (struct mapping *m = mappings; m; m = m->next)
		if (a >= m->va && a < m->va + m->size)
			return m;
	return NULL;
}

static CUresult mem_retain(CUmemGenericAllocationHandle *out, void *addr)
{
	if (!initialised)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!out)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&lock);
	struct mapping *m = mapping_at_locked((uintptr_t)addr);
	if (m) {
		m->h->user_refs++;
		*out = m->h->id;
	}
	pthread_mutex_unlock(&lock);
	return m ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult CUDAAPI cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr)
{
	TRACED(cuMemRetainAllocationHandle, (handle, addr), mem_retain(handle, addr));
}

static CUresult addr_reserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr, unsigned long long flags)
{
	(void)addr; /* a hint */
	if (!initialised)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!ptr || !size || size % GRAN || flags || (alignment & (alignment - 1)))
		return CUDA_ERROR_INVALID_VALUE;
	size_t al = alignment > GRAN ? alignment : GRAN;
	struct reservation *r = calloc(1, sizeof *r);
	if (!r)
		return CUDA_ERROR_OUT_OF_MEMORY;
	uintptr_t raw = va_map(size + al);
	if (!raw) {
		free(r);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	uintptr_t va = (raw + al - 1) & ~(uintptr_t)(al - 1);
	if (va > raw)
		munmap((void *)raw, va - raw);
	if (raw + size + al > va + size)
		munmap((void *)(va + size), raw + size + al - (va + size));
	r->va = va;
	r->size = size;
	pthread_mutex_lock(&lock);
	r->next = reservations;
	reservations = r;
	pthread_mutex_unlock(&lock);
	*ptr = va;
	return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
					    unsigned long long flags)
{
	TRACED(cuMemAddressReserve, (ptr, size, alignment, addr, flags), addr_reserve(ptr, size, alignment, addr, flags));
}

static CUresult addr_free(CUdeviceptr ptr, size_t size)
{
	if (!initialised)
		return CUDA_ERROR_NOT_INITIALIZED;
	pthread_mutex_lock(&lock);
	struct reservation **pp = &reservations;
	while (*pp && !((*pp)->va == ptr && (*pp)->size == size))
		pp = &(*pp)->next;
	struct reservation *r = *pp;
	CUresult res = CUDA_SUCCESS;
	if (!r)
		res = CUDA_ERROR_INVALID_VALUE;
	for (struct mapping *m = mappings; r && m; m = m->next)
		if (m->va >= ptr && m->va < ptr + size)
			res = CUDA_ERROR_INVALID_VALUE; /* still mapped */
	if (res == CUDA_SUCCESS)
		*pp = r->next;
	pthread_mutex_unlock(&lock);
	if (res == CUDA_SUCCESS) {
		munmap((void *)r->va, r->size);
		free(r);
	}
	return res;
}

EXPORT CUresult CUDAAPI cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
	TRACED(cuMemAddressFree, (ptr, size), addr_free(ptr, size));
}

static CUresult mem_map(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle id,
			unsigned long long flags)
{
	if (!initialised)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!size || size % GRAN || ptr % GRAN || offset || flags)
		return CUDA_ERROR_INVALID_VALUE;
	struct mapping *nm = calloc(1, sizeof *nm);
	if (!nm)
		return CUDA_ERROR_OUT_OF_MEMORY;
	pthread_mutex_lock(&lock);
	CUresult r = CUDA_SUCCESS;
	struct handle *h = handle_locked(id);
	int inside = 0;
	for (struct reservation *v = reservations; v; v = v->next)
		if (ptr >= v->va && ptr + size <= v->va + v->size)
			inside = 1;
	if (!h || h->user_refs <= 0 || size > h->phys->size || !inside)
		r = CUDA_ERROR_INVALID_VALUE;
	for (struct mapping *m = mappings; r == CUDA_SUCCESS && m; m = m->next)
		if (m->va < ptr + size && ptr < m->va + m->size)
			r = CUDA_ERROR_ALREADY_MAPPED;
	if (r == CUDA_SUCCESS) {
		*nm = (struct mapping){ptr, size, h, 0, mappings};
		mappings = nm;
		h->maps++;
	}
	pthread_mutex_unlock(&lock);
	if (r != CUDA_SUCCESS)
		free(nm);
	return r;
}

EXPORT CUresult CUDAAPI cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
				 unsigned long long flags)
{
	TRACED(cuMemMap, (ptr, size, offset, handle, flags), mem_map(ptr, size, offset, handle, flags));
}

static CUresult mem_unmap(CUdeviceptr ptr, size_t size)
{
	if (!initialised)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!size)
		return CUDA_ERROR_INVALID_VALUE;
	struct released {
		uintptr_t va;
		size_t size;
		int dev, access;
	} rel[16];
	int nrel = 0;
	pthread_mutex_lock(&lock);
	CUresult r = CUDA_SUCCESS;
	int found = 0;
	for (struct mapping *m = mappings; m; m = m->next)
		if (m->va < ptr + size && ptr < m->va + m->size) {
			if (m->va < ptr || m->va + m->size > ptr + size)
				r = CUDA_ERROR_INVALID_VALUE; /* would split a mapping */
			found++;
		}
	if (!found)
		r = CUDA_ERROR_INVALID_VALUE;
	for (struct mapping **pp = &mappings; r == CUDA_SUCCESS && *pp;) {
		struct mapping *m = *pp;
		if (m->va >= ptr && m->va + m->size <= ptr + size) {
			*pp = m->next;
			if (nrel < 16)
				rel[nrel++] = (struct released){m->va, m->size, m->h->phys->dev, m->access};
			m->h->maps--;
			handle_gc_locked(m->h);
			free(m);
		} else {
			pp = &m->next;
		}
	}
	pthread_mutex_unlock(&lock);
	for (int i = 0; i < nrel; i++) /* CUPTI reports VMM memory released at unmap */
		if (rel[i].access)
			activity(RELEASE_OP,
				 rel[i].dev >= 0 ? CUPTI_ACTIVITY_MEMORY_KIND_DEVICE : CUPTI_ACTIVITY_MEMORY_KIND_PINNED,
				 rel[i].va, rel[i].size, rel[i].dev, cur_ctx, 0, 0);
	return r;
}

EXPORT CUresult CUDAAPI cuMemUnmap(CUdeviceptr ptr, size_t size)
{
	TRACED(cuMemUnmap, (ptr, size), mem_unmap(ptr, size));
}

static CUresult set_access(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count)
{
	if (!initialised)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!size || !desc || !count)
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; i < count; i++) {
		if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE && !host_location(desc[i].location.type))
			return CUDA_ERROR_INVALID_VALUE;
		if (desc[i].location.type == CU_MEM_LOCATION_TYPE_DEVICE &&
		    (desc[i].location.id < 0 || desc[i].location.id >= ndev))
			return CUDA_ERROR_INVALID_DEVICE;
	}
	struct granted {
		uintptr_t va;
		size_t size;
		int dev;
	} g[16];
	int ng = 0;
	pthread_mutex_lock(&lock);
	/* the whole range must be mapped */
	CUresult r = CUDA_SUCCESS;
	for (uintptr_t a = ptr; a < ptr + size;) {
		struct mapping *m = mapping_at_locked(a);
		if (!m) {
			r = CUDA_ERROR_INVALID_VALUE;
			break;
		}
		a = m->va + m->size;
	}
	for (struct mapping *m = mappings; r == CUDA_SUCCESS && m; m = m->next)
		if (m->va < ptr + size && ptr < m->va + m->size) {
			if (!m->access && ng < 16)
				g[ng++] = (struct granted){m->va, m->size, m->h->phys->dev};
			m->access = 1;
		}
	pthread_mutex_unlock(&lock);
	for (int i = 0; i < ng; i++) /* CUPTI reports VMM memory when access is granted */
		activity(ALLOC_OP, g[i].dev >= 0 ? CUPTI_ACTIVITY_MEMORY_KIND_DEVICE : CUPTI_ACTIVITY_MEMORY_KIND_PINNED,
			 g[i].va, g[i].size, g[i].dev, cur_ctx, 0, 0);
	return r;
}

EXPORT CUresult CUDAAPI cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count)
{
	TRACED(cuMemSetAccess, (ptr, size, desc, count), set_access(ptr, size, desc, count));
}

/* shareable handles: a memfd holding {pid, phys pointer} */
struct share_blob {
	char magic[8];
	pid_t pid;
	struct phys *phys;
};

static CUresult export_handle(void *out, CUmemGenericAllocationHandle id, CUmemAllocationHandleType type,
			      unsigned long long flags)
{
	if (!initialised)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!out || flags)
		return CUDA_ERROR_INVALID_VALUE;
	if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
		return CUDA_ERROR_NOT_SUPPORTED;
	pthread_mutex_lock(&lock);
	struct handle *h = handle_locked(id);
	struct share_blob b = {"STSHARE", getpid(), h ? h->phys : NULL};
	int ok = h && h->user_refs > 0, allowed = h && (h->handle_types & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
	pthread_mutex_unlock(&lock);
	if (!ok)
		return CUDA_ERROR_INVALID_VALUE;
	if (!allowed)
		return CUDA_ERROR_NOT_SUPPORTED;
	int fd = memfd_create("standin-cumem", MFD_CLOEXEC);
	if (fd < 0)
		return CUDA_ERROR_OPERATING_SYSTEM;
	if (pwrite(fd, &b, sizeof b, 0) != (ssize_t)sizeof b) {
		close(fd);
		return CUDA_ERROR_OPERATING_SYSTEM;
	}
	*(int *)out = fd;
	return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuMemExportToShareableHandle(void *shareableHandle, CUmemGenericAllocationHandle handle,
						     CUmemAllocationHandleType handleType, unsigned long long flags)
{
	TRACED(cuMemExportToShareableHandle, (shareableHandle, handle, handleType, flags),
	       export_handle(shareableHandle, handle, handleType, flags));
}

static CUresult import_handle(CUmemGenericAllocationHandle *out, void *os_handle, CUmemAllocationHandleType type)
{
	if (!initialised)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!out)
		return CUDA_ERROR_INVALID_VALUE;
	if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
		return CUDA_ERROR_NOT_SUPPORTED;
	struct share_blob b;
	int fd = (int)(intptr_t)os_handle;
	if (pread(fd, &b, sizeof b, 0) != (ssize_t)sizeof b || memcmp(b.magic, "STSHARE", 8) || b.pid != getpid())
		return CUDA_ERROR_INVALID_VALUE; /* other processes: not supported by the stand-in */
	pthread_mutex_lock(&lock);
	int live = 0;
	for (struct handle *h = handles; h; h = h->next)
		if (h->phys == b.phys)
			live = 1;
	struct handle *h = live ? new_handle_locked(b.phys, 0) : NULL;
	if (h)
		*out = h->id;
	pthread_mutex_unlock(&lock);
	return h ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult CUDAAPI cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *handle, void *osHandle,
						       CUmemAllocationHandleType shHandleType)
{
	TRACED(cuMemImportFromShareableHandle, (handle, osHandle, shHandleType),
	       import_handle(handle, osHandle, shHandleType));
}

/* ---- legacy IPC ------------------------------------------------------------ */

struct ipc_blob {
	char magic[8];
	pid_t pid;
	uintptr_t p;
	size_t size;
	int dev;
};

static CUresult ipc_get(CUipcMemHandle *out, CUdeviceptr dptr)
{
	if (!initialised)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!out)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&lock);
	struct alloc **pp = find_locked(dptr, KM(K_DEVICE));
	struct ipc_blob b = {"STIPC", getpid(), dptr, pp ? (*pp)->size : 0, pp ? (*pp)->dev : -1};
	pthread_mutex_unlock(&lock);
	if (!pp)
		return CUDA_ERROR_INVALID_VALUE;
	memset(out, 0, sizeof *out);
	memcpy(out->reserved, &b, sizeof b);
	return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuIpcGetMemHandle(CUipcMemHandle *pHandle, CUdeviceptr dptr)
{
	TRACED(cuIpcGetMemHandle, (pHandle, dptr), ipc_get(pHandle, dptr));
}

static CUresult ipc_open(CUdeviceptr *out, CUipcMemHandle handle, unsigned flags)
{
	if (!initialised)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!out || (flags & ~(unsigned)CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS))
		return CUDA_ERROR_INVALID_VALUE;
	if (!cur_ctx)
		return CUDA_ERROR_INVALID_CONTEXT;
	struct ipc_blob b;
	memcpy(&b, handle.reserved, sizeof b);
	if (memcmp(b.magic, "STIPC", 6) || b.pid != getpid())
		return CUDA_ERROR_INVALID_VALUE; /* other processes: not supported by the stand-in */
	CUresult err = CUDA_SUCCESS;
	pthread_mutex_lock(&lock);
	struct alloc **src = find_locked(b.p, KM(K_DEVICE));
	struct alloc *a = src ? add_locked(b.dev, b.size, K_IPC, &err) : NULL;
	if (a)
		a->ipc_src = *src;
	uintptr_t p = a ? a->p : 0;
	pthread_mutex_unlock(&lock);
	if (!src)
		return CUDA_ERROR_INVALID_VALUE;
	if (!a)
		return err;
	*out = p;
	return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuIpcOpenMemHandle(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int Flags) /* _v2 */
{
	TRACED(cuIpcOpenMemHandle_v2, (pdptr, handle, Flags), ipc_open(pdptr, handle, Flags));
}

static CUresult ipc_close(CUdeviceptr dptr)
{
	if (!initialised)
		return CUDA_ERROR_NOT_INITIALIZED;
	pthread_mutex_lock(&lock);
	struct alloc **pp = find_locked(dptr, KM(K_IPC));
	struct alloc *a = pp ? *pp : NULL;
	if (a)
		drop_locked(pp);
	pthread_mutex_unlock(&lock);
	free(a);
	return a ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult CUDAAPI cuIpcCloseMemHandle(CUdeviceptr dptr)
{
	TRACED(cuIpcCloseMemHandle, (dptr), ipc_close(dptr));
}

/* ---- queries --------------------------------------------------------------- */

static CUresult addr_range(CUdeviceptr *base, size_t *size, CUdeviceptr p)
{
	if (!initialised)
		return CUDA_ERROR_NOT_INITIALIZED;
	uintptr_t b = 0;
	size_t s = 0;
	pthread_mutex_lock(&lock);
	for (struct alloc *a = allocs; a && !s; a = a->next)
		if (a->kind != K_HOST && a->kind != K_REGISTERED && p >= a->p && p < a->p + a->size) {
			b = a->p;
			s = a->size;
		}
	struct mapping *m = s ? NULL : mapping_at_locked(p);
	if (m) {
		b = m->va;
		s = m->size;
	}
	pthread_mutex_unlock(&lock);
	if (!s)
		return CUDA_ERROR_NOT_FOUND;
	if (base)
		*base = b;
	if (size)
		*size = s;
	return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuMemGetAddressRange(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr) /* _v2 */
{
	TRACED(cuMemGetAddressRange_v2, (pbase, psize, dptr), addr_range(pbase, psize, dptr));
}

static CUresult mem_info(size_t *free_b, size_t *total)
{
	if (!free_b || !total)
		return CUDA_ERROR_INVALID_VALUE;
	if (!cur_ctx)
		return CUDA_ERROR_INVALID_CONTEXT;
	pthread_mutex_lock(&lock);
	*total = capacity;
	*free_b = capacity - used[cur_ctx->dev];
	pthread_mutex_unlock(&lock);
	return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuMemGetInfo(size_t *free_b, size_t *total) /* _v2 */
{
	TRACED(cuMemGetInfo_v2, (free_b, total), mem_info(free_b, total));
}

/* ---- test hooks (not in the real driver) ------------------------------------ */

/* device bytes in use: allocations, VMM physical memory, module statics */
EXPORT size_t standin_used_bytes(int dev)
{
	pthread_mutex_lock(&lock);
	size_t u = dev >= 0 && dev < MAX_DEV ? used[dev] : 0;
	pthread_mutex_unlock(&lock);
	return u;
}

EXPORT size_t standin_cuda_used(int dev) /* older name */
{
	return standin_used_bytes(dev);
}

EXPORT size_t standin_host_pinned_bytes(void)
{
	pthread_mutex_lock(&lock);
	size_t u = host_pinned;
	pthread_mutex_unlock(&lock);
	return u;
}

/* live contexts on a device (NVML reports a context's own memory) */
EXPORT int standin_device_contexts(int dev)
{
	pthread_mutex_lock(&lock);
	int n = dev >= 0 && dev < MAX_DEV ? nctx[dev] : 0;
	pthread_mutex_unlock(&lock);
	return n;
}

EXPORT int standin_device_count(void)
{
	pthread_mutex_lock(&lock);
	config();
	int n = ndev;
	pthread_mutex_unlock(&lock);
	return n;
}

EXPORT int standin_ctx_device(CUcontext ctx)
{
	if (!ctx)
		ctx = cur_ctx;
	return ctx ? ctx->dev : -1;
}

/* "load a module" with `bytes` of __device__ statics into the device's
 * primary context (or the calling thread's current context if that is on
 * the device and the primary one is not active): a MEMORY2 DEVICE_STATIC
 * record with correlationId 0, like lazy module loading on the real driver */
EXPORT CUresult standin_load_module(int dev, size_t bytes)
{
	if (!initialised)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (dev < 0 || dev >= ndev)
		return CUDA_ERROR_INVALID_DEVICE;
	if (!bytes)
		return CUDA_ERROR_INVALID_VALUE;
	CUcontext ctx = NULL;
	pthread_mutex_lock(&lock);
	if (prim_refs[dev])
		ctx = &primary[dev];
	else if (cur_ctx && cur_ctx->dev == dev)
		ctx = cur_ctx;
	size_t before = used[dev];
	pthread_mutex_unlock(&lock);
	if (!ctx)
		return CUDA_ERROR_INVALID_CONTEXT;
	load_statics(ctx, bytes);
	return standin_used_bytes(dev) > before ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

/* ---- entry points ------------------------------------------------------------ */

EXPORT CUresult CUDAAPI cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
					 CUdriverProcAddressQueryResult *status); /* cuGetProcAddress_v2 */
/* the legacy 4-argument ABI, still exported as "cuGetProcAddress" */
EXPORT CUresult CUDAAPI gpa_legacy(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
	__asm__("cuGetProcAddress");

struct entry {
	const char *name;
	int min_version; /* rows of one name: newest ABI first */
	void *fn, *fn_ptsz;
};

#define E(n, v, f) {n, v, (void *)(f), NULL}
#define EP(n, v, f, fp) {n, v, (void *)(f), (void *)(fp)}
static const struct entry table[] = {
	E("cuInit", 2000, cuInit),
	E("cuDriverGetVersion", 2020, cuDriverGetVersion),
	E("cuDeviceGet", 2000, cuDeviceGet),
	E("cuDeviceGetCount", 2000, cuDeviceGetCount),
	E("cuDeviceGetPCIBusId", 4010, cuDeviceGetPCIBusId),
	E("cuDevicePrimaryCtxRetain", 7000, cuDevicePrimaryCtxRetain),
	E("cuDevicePrimaryCtxRelease", 11000, cuDevicePrimaryCtxRelease),
	E("cuCtxCreate", 12050, cuCtxCreate),
	E("cuCtxDestroy", 4000, cuCtxDestroy),
	E("cuCtxSetCurrent", 4000, cuCtxSetCurrent),
	E("cuCtxGetCurrent", 4000, cuCtxGetCurrent),
	E("cuCtxGetDevice", 2000, cuCtxGetDevice),
	E("cuMemAlloc", 3020, cuMemAlloc),
	E("cuMemAllocPitch", 3020, cuMemAllocPitch),
	E("cuMemFree", 3020, cuMemFree),
	EP("cuMemAllocAsync", 11020, cuMemAllocAsync, cuMemAllocAsync_ptsz),
	EP("cuMemFreeAsync", 11020, cuMemFreeAsync, cuMemFreeAsync_ptsz),
	EP("cuMemAllocFromPoolAsync", 11020, cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync_ptsz),
	E("cuMemPoolCreate", 11020, cuMemPoolCreate),
	E("cuMemPoolDestroy", 11020, cuMemPoolDestroy),
	E("cuMemPoolTrimTo", 11020, cuMemPoolTrimTo),
	E("cuMemAllocManaged", 6000, cuMemAllocManaged),
	E("cuMemHostAlloc", 2020, cuMemHostAlloc),
	E("cuMemAllocHost", 3020, cuMemAllocHost),
	E("cuMemFreeHost", 2000, cuMemFreeHost),
	E("cuMemHostRegister", 6050, cuMemHostRegister),
	E("cuMemHostUnregister", 4000, cuMemHostUnregister),
	E("cuMemGetInfo", 3020, cuMemGetInfo),
	E("cuMemGetAddressRange", 3020, cuMemGetAddressRange),
	E("cuMemGetAllocationGranularity", 10020, cuMemGetAllocationGranularity),
	E("cuMemCreate", 10020, cuMemCreate),
	E("cuMemRelease", 10020, cuMemRelease),
	E("cuMemRetainAllocationHandle", 11000, cuMemRetainAllocationHandle),
	E("cuMemMap", 10020, cuMemMap),
	E("cuMemUnmap", 10020, cuMemUnmap),
	E("cuMemSetAccess", 10020, cuMemSetAccess),
	E("cuMemAddressReserve", 10020, cuMemAddressReserve),
	E("cuMemAddressFree", 10020, cuMemAddressFree),
	E("cuMemExportToShareableHandle", 10020, cuMemExportToShareableHandle),
	E("cuMemImportFromShareableHandle", 10020, cuMemImportFromShareableHandle),
	E("cuIpcGetMemHandle", 4010, cuIpcGetMemHandle),
	E("cuIpcOpenMemHandle", 11000, cuIpcOpenMemHandle),
	E("cuIpcCloseMemHandle", 4010, cuIpcCloseMemHandle),
	E("cuGetProcAddress", 12000, cuGetProcAddress),
	E("cuGetProcAddress", 11030, gpa_legacy),
};

static CUresult lookup(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
		       CUdriverProcAddressQueryResult *status)
{
	if (!symbol || !pfn)
		return CUDA_ERROR_INVALID_VALUE;
	*pfn = NULL;
	int known = 0;
	for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
		if (strcmp(table[i].name, symbol))
			continue;
		known = 1;
		if (cudaVersion < table[i].min_version)
			continue;
		*pfn = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) && table[i].fn_ptsz ? table[i].fn_ptsz
												   : table[i].fn;
		if (status)
			*status = CU_GET_PROC_ADDRESS_SUCCESS;
		return CUDA_SUCCESS;
	}
	if (status)
		*status = known ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
	return CUDA_ERROR_NOT_FOUND;
}

EXPORT CUresult CUDAAPI cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
					 CUdriverProcAddressQueryResult *status)
{
	return lookup(symbol, pfn, cudaVersion, flags, status);
}

EXPORT CUresult CUDAAPI gpa_legacy(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
	return lookup(symbol, pfn, cudaVersion, flags, NULL);
}
