/* A process that allocates through every path a real CUDA process uses to
 * reach the driver (MECHANICS.md §2.2, §2.7), over the stand-ins
 * (tests/standin), and prints its own ground truth, computed from what it did
 * and independent of any tracer or decoder:
 *
 *  (a) runtime over driver: cudaMalloc/cudaFree/cudaHostAlloc/cudaFreeHost/
 *      cudaMallocAsync/cudaFreeAsync/cudaMallocManaged/cudaHostRegister through
 *      libcudart.so.13's PLT (libcudart reaches the driver only through
 *      cuGetProcAddress_v2);
 *  (b) NCCL-like: dlsym(libcuda, "cuGetProcAddress_v2"), then (through the
 *      "cuGetProcAddress" it returns, as libcudart does) cuMemCreate,
 *      cuMemAddressReserve, cuMemMap, cuMemSetAccess and NCCL's free path
 *      (Retain, Release, GetAddressRange, Unmap, Release, AddressFree); a
 *      torch-expandable-segment-like handle released while still mapped (its
 *      bytes go at the unmap); a host-location cuMemCreate;
 *  (c) cuBLAS-like: dlsym(libcuda, "cuMemAlloc_v2"/"cuMemAllocPitch_v2"/
 *      "cuMemFree_v2"), and the legacy 4-argument "cuGetProcAddress";
 *  (d) async pools (create, alloc from pool plain and _ptsz, free async, trim,
 *      destroy), the default pool (_ptsz), managed, pinned host alloc and
 *      register, IPC open/close, shareable-handle export + import + map;
 *      a created context (cuCtxCreate_v4 / cuCtxDestroy_v2) and a primary
 *      context released to 0 (its statics go with it);
 *  (e) module loads (__device__ statics, MEMORY2 DEVICE_STATIC), besides the
 *      stand-in's automatic load at each device's first context;
 *  plus direct PLT calls to cuMemAlloc_v2/cuMemFree_v2 (the program links
 *  libcuda, as a custom extension would), two failing calls (not recorded),
 *  and one NVTX range.
 *
 * Output: one JSON line on stdout
 *   {"ops": [[op, dev, cat, delta, flags], ...], "static_bytes": N, ...}
 * one entry per driver-level event a tracer should record, in order: op is
 * the trace's DRV op name (alloc free alloc_managed ... static static_free),
 * dev the device (-1 host), cat what the bytes are (device managed static
 * host registered imported none), delta the change of those bytes (VMM
 * physical bytes change at cuMemCreate and at the last reference: release or
 * unmap), flags: 1 = after the --yield-after hand-over, 2 = made inside a
 * runtime call (cudaMalloc -> cuMemAlloc_v2), 4 = seen only by CUPTI
 * (context resource callbacks, MEMORY2 statics).  "rt": the runtime calls
 * [[api, dev, cat, delta], ...] a runtime-level hook sees.
 * run_driver.py derives per-op counts and per-device peaks from it.
 *
 * The victim checks its own bookkeeping after every event against the
 * stand-in driver (standin_used_bytes, standin_host_pinned_bytes) and exits
 * 3 on a difference.
 *
 * --yield-after N: after N events the victim subscribes to CUPTI itself
 * (cuptiSubscribe through its PLT, as kineto does when torch.profiler
 * starts), enables the driver domain and counts the callbacks it gets
 * ("own_cupti_callbacks"; "own_cupti_subscribe" is the result code).
 */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <cupti.h>
#include <dlfcn.h>
#include <nvtx3/nvToolsExt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MiB ((size_t)1 << 20)
#define MAXOPS 256

enum { F_AFTER_YIELD = 1, F_RT = 2, F_CUPTI_ONLY = 4 };

static struct ev {
	const char *op;
	int dev;
	const char *cat;
	long long delta;
	int flags;
} evs[MAXOPS];
static int nevs;
static struct rtev {
	const char *api;
	int dev;
	const char *cat;
	long long delta;
} rtevs[MAXOPS];
static int nrt;

static int yield_after = -1, yielded;
static CUptiResult own_sub = (CUptiResult)-1;
static unsigned long own_callbacks;
static long long dev_live[8], host_live;
static size_t static_bytes;
static int failures;

static size_t (*used_bytes)(int);
static size_t (*host_bytes)(void);
static CUresult (*load_module)(int, size_t);

static void die(const char *what, int r)
{
	fprintf(stderr, "victim_driver: %s failed (%d)\n", what, r);
	exit(2);
}
#define CK(call)                                  \
	do {                                      \
		int r_ = (int)(call);             \
		if (r_)                           \
			die(#call, r_);           \
	} while (0)

static unsigned long by_cbid[1024];
static const char *cbid_name[1024];

/* counted: ENTER callbacks of the memory APIs except the cuMemGet* queries
 * (a tracer may call those itself);
 * every callback is listed by name on stderr (a tracer's own driver calls
 * show up there) */
static void CUPTIAPI own_cb(void *ud, CUpti_CallbackDomain dom, CUpti_CallbackId cbid, const void *data)
{
	(void)ud;
	const CUpti_CallbackData *d = data;
	if (dom != CUPTI_CB_DOMAIN_DRIVER_API || cbid >= 1024 || d->callbackSite != CUPTI_API_ENTER)
		return;
	__atomic_add_fetch(&by_cbid[cbid], 1, __ATOMIC_RELAXED);
	cbid_name[cbid] = d->functionName;
	if ((strncmp(d->functionName, "cuMem", 5) == 0 && strncmp(d->functionName, "cuMemGet", 8) != 0) ||
	    strncmp(d->functionName, "cuIpc", 5) == 0)
		__atomic_add_fetch(&own_callbacks, 1, __ATOMIC_RELAXED);
}

static void maybe_yield(void)
{
	if (yield_after < 0 || yielded || nevs < yield_after)
		return;
	yielded = 1;
	CUpti_SubscriberHandle h;
	own_sub = cuptiSubscribe(&h, own_cb, NULL);
	if (own_sub == CUPTI_SUCCESS)
		cuptiEnableDomain(1, h, CUPTI_CB_DOMAIN_DRIVER_API);
}

static void self_check(const char *op)
{
	for (int d = 0; d < 2; d++)
		if ((long long)used_bytes(d) != dev_live[d]) {
			fprintf(stderr, "victim_driver: after %s (event %d) device %d: stand-in uses %zu, victim counts %lld\n",
				op, nevs, d, used_bytes(d), dev_live[d]);
			failures++;
		}
	if ((long long)host_bytes() != host_live) {
		fprintf(stderr, "victim_driver: after %s (event %d): stand-in pins %zu host bytes, victim counts %lld\n", op,
			nevs, host_bytes(), host_live);
		failures++;
	}
}

static void ev_nc(const char *op, int dev, const char *cat, long long delta, int flags)
{
	if (nevs >= MAXOPS)
		die("too many events", 0);
	if (yielded)
		flags |= F_AFTER_YIELD;
	evs[nevs++] = (struct ev){op, dev, cat, delta, flags};
	if (!strcmp(cat, "device") || !strcmp(cat, "managed") || !strcmp(cat, "static"))
		dev_live[dev] += delta;
	else if (!strcmp(cat, "host"))
		host_live += delta;
}

static void ev(const char *op, int dev, const char *cat, long long delta, int flags)
{
	ev_nc(op, dev, cat, delta, flags);
	self_check(op);
	maybe_yield();
}

static void rt(const char *api, int dev, const char *cat, long long delta)
{
	rtevs[nrt++] = (struct rtev){api, dev, cat, delta};
}

/* driver entry points, fetched the way libcudart and NCCL fetch them */
typedef CUresult (*gpa_t)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
typedef CUresult (*gpa_legacy_t)(const char *, void **, int, cuuint64_t);
static gpa_t gpa;
static struct {
	__typeof__(&cuMemCreate) create;
	__typeof__(&cuMemRelease) release;
	__typeof__(&cuMemAddressReserve) reserve;
	__typeof__(&cuMemAddressFree) addr_free;
	__typeof__(&cuMemMap) map;
	__typeof__(&cuMemUnmap) unmap;
	__typeof__(&cuMemSetAccess) set_access;
	__typeof__(&cuMemRetainAllocationHandle) retain;
	__typeof__(&cuMemGetAddressRange) addr_range;
	__typeof__(&cuMemGetAllocationGranularity) granularity;
	__typeof__(&cuDevicePrimaryCtxRetain) prim_retain;
	__typeof__(&cuDevicePrimaryCtxRelease) prim_release;
	__typeof__(&cuCtxSetCurrent) set_current;
	__typeof__(&cuCtxGetCurrent) get_current;
	__typeof__(&cuCtxCreate) ctx_create;
	__typeof__(&cuCtxDestroy) ctx_destroy;
	__typeof__(&cuMemPoolCreate) pool_create;
	__typeof__(&cuMemPoolDestroy) pool_destroy;
	__typeof__(&cuMemPoolTrimTo) pool_trim;
	__typeof__(&cuMemAllocFromPoolAsync) from_pool, from_pool_ptsz;
	__typeof__(&cuMemAllocAsync) alloc_async_ptsz;
	__typeof__(&cuMemFreeAsync) free_async, free_async_ptsz;
	__typeof__(&cuMemAllocManaged) alloc_managed;
	__typeof__(&cuMemFree) mem_free;
	__typeof__(&cuMemAllocHost) alloc_host;
	__typeof__(&cuMemHostAlloc) host_alloc;
	__typeof__(&cuMemFreeHost) free_host;
	__typeof__(&cuMemHostRegister) host_register;
	__typeof__(&cuMemHostUnregister) host_unregister;
	__typeof__(&cuIpcGetMemHandle) ipc_get;
	__typeof__(&cuIpcOpenMemHandle) ipc_open;
	__typeof__(&cuIpcCloseMemHandle) ipc_close;
	__typeof__(&cuMemExportToShareableHandle) export_handle;
	__typeof__(&cuMemImportFromShareableHandle) import_handle;
	__typeof__(&cuMemAlloc) mem_alloc;
} drv;

static void get(const char *name, void *slot, int version, cuuint64_t flags)
{
	CUdriverProcAddressQueryResult st;
	if (gpa(name, (void **)slot, version, flags, &st) != CUDA_SUCCESS || !*(void **)slot || st)
		die(name, st);
}

static CUmemAllocationProp dev_prop(int dev, int handle_types)
{
	CUmemAllocationProp p;
	memset(&p, 0, sizeof p);
	p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	p.location.id = dev;
	p.requestedHandleTypes = (CUmemAllocationHandleType)handle_types;
	return p;
}

static CUmemAccessDesc access_desc(int dev)
{
	CUmemAccessDesc a;
	memset(&a, 0, sizeof a);
	a.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	a.location.id = dev;
	a.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	return a;
}

/* the stand-in's automatic module load at a device's first context
 * (checked with the next event) */
static void first_context(int dev)
{
	ev_nc("ctx_create", dev, "none", 0, F_CUPTI_ONLY);
	if (static_bytes)
		ev_nc("static", dev, "static", (long long)static_bytes, F_CUPTI_ONLY);
}

static void runtime_part(void)
{
	/* (a) the runtime over the driver, device 0 */
	void *a1, *a2, *s1, *m1, *h1;
	CK(cudaMalloc(&a1, 8 * MiB)); /* first call: cuInit, primary context of device 0 */
	rt("cudaMalloc", 0, "device", 8 * MiB);
	first_context(0);
	ev("alloc", 0, "device", 8 * MiB, F_RT);
	CK(cudaMalloc(&a2, 4 * MiB));
	rt("cudaMalloc", 0, "device", 4 * MiB);
	ev("alloc", 0, "device", 4 * MiB, F_RT);
	CK(cudaHostAlloc(&h1, 2 * MiB, cudaHostAllocDefault));
	rt("cudaHostAlloc", -1, "host", 2 * MiB);
	ev("alloc_host", -1, "host", 2 * MiB, F_RT);
	CK(cudaMallocAsync(&s1, 3 * MiB, 0));
	rt("cudaMallocAsync", 0, "device", 3 * MiB);
	ev("alloc_async", 0, "device", 3 * MiB, F_RT);
	CK(cudaMallocManaged(&m1, 1 * MiB, cudaMemAttachGlobal));
	rt("cudaMallocManaged", 0, "managed", 1 * MiB);
	ev("alloc_managed", 0, "managed", 1 * MiB, F_RT);
	CK(cudaFree(a2));
	rt("cudaFree", 0, "device", -4 * (long long)MiB);
	ev("free", 0, "device", -4 * (long long)MiB, F_RT);
	CK(cudaFreeAsync(s1, 0));
	rt("cudaFreeAsync", 0, "device", -3 * (long long)MiB);
	ev("free_async", 0, "device", -3 * (long long)MiB, F_RT);
	CK(cudaFreeHost(h1));
	rt("cudaFreeHost", -1, "host", -2 * (long long)MiB);
	ev("free_host", -1, "host", -2 * (long long)MiB, F_RT);
	CK(cudaFree(m1));
	rt("cudaFree", 0, "managed", -1 * (long long)MiB);
	ev("free", 0, "managed", -1 * (long long)MiB, F_RT);
	static char reg[1 << 20] __attribute__((aligned(4096)));
	CK(cudaHostRegister(reg, sizeof reg, cudaHostRegisterDefault));
	rt("cudaHostRegister", -1, "registered", sizeof reg);
	ev("host_register", -1, "registered", sizeof reg, F_RT);
	CK(cudaHostUnregister(reg));
	rt("cudaHostUnregister", -1, "registered", -(long long)sizeof reg);
	ev("host_unregister", -1, "registered", -(long long)sizeof reg, F_RT);
	/* a1 stays allocated */
}

#define DO(call, ...)              \
	do {                       \
		CK(call);          \
		ev(__VA_ARGS__);   \
	} while (0)

static void nccl_like(void *cuda)
{
	/* (b) the entry points, fetched like NCCL's static cudart does */
	gpa_t boot = (gpa_t)dlsym(cuda, "cuGetProcAddress_v2");
	if (!boot)
		die("dlsym cuGetProcAddress_v2", 0);
	gpa = boot;
	gpa_t gpa2 = NULL;
	get("cuGetProcAddress", &gpa2, 12000, 0); /* and used from then on, like libcudart */
	gpa = gpa2;
	get("cuMemCreate", &drv.create, 10020, 0);
	get("cuMemRelease", &drv.release, 10020, 0);
	get("cuMemAddressReserve", &drv.reserve, 10020, 0);
	get("cuMemAddressFree", &drv.addr_free, 10020, 0);
	get("cuMemMap", &drv.map, 10020, 0);
	get("cuMemUnmap", &drv.unmap, 10020, 0);
	get("cuMemSetAccess", &drv.set_access, 10020, 0);
	get("cuMemRetainAllocationHandle", &drv.retain, 11000, 0);
	get("cuMemGetAddressRange", &drv.addr_range, 3020, 0);
	get("cuMemGetAllocationGranularity", &drv.granularity, 10020, 0);
	get("cuDevicePrimaryCtxRetain", &drv.prim_retain, 7000, 0);
	get("cuDevicePrimaryCtxRelease", &drv.prim_release, 11000, 0);
	get("cuCtxSetCurrent", &drv.set_current, 4000, 0);
	get("cuCtxGetCurrent", &drv.get_current, 4000, 0);
	get("cuCtxCreate", &drv.ctx_create, 12050, 0);
	get("cuCtxDestroy", &drv.ctx_destroy, 4000, 0);
	get("cuMemPoolCreate", &drv.pool_create, 11020, 0);
	get("cuMemPoolDestroy", &drv.pool_destroy, 11020, 0);
	get("cuMemPoolTrimTo", &drv.pool_trim, 11020, 0);
	get("cuMemAllocFromPoolAsync", &drv.from_pool, 11020, 0);
	get("cuMemAllocFromPoolAsync", &drv.from_pool_ptsz, 11020, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
	get("cuMemAllocAsync", &drv.alloc_async_ptsz, 11020, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
	get("cuMemFreeAsync", &drv.free_async, 11020, 0);
	get("cuMemFreeAsync", &drv.free_async_ptsz, 11020, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
	get("cuMemAllocManaged", &drv.alloc_managed, 6000, 0);
	get("cuMemFree", &drv.mem_free, 3020, 0);
	get("cuMemAllocHost", &drv.alloc_host, 3020, 0);
	get("cuMemHostAlloc", &drv.host_alloc, 2020, 0);
	get("cuMemFreeHost", &drv.free_host, 2000, 0);
	get("cuMemHostRegister", &drv.host_register, 6050, 0);
	get("cuMemHostUnregister", &drv.host_unregister, 4000, 0);
	get("cuIpcGetMemHandle", &drv.ipc_get, 4010, 0);
	get("cuIpcOpenMemHandle", &drv.ipc_open, 11000, 0);
	get("cuIpcCloseMemHandle", &drv.ipc_close, 4010, 0);
	get("cuMemExportToShareableHandle", &drv.export_handle, 10020, 0);
	get("cuMemImportFromShareableHandle", &drv.import_handle, 10020, 0);
	get("cuMemAlloc", &drv.mem_alloc, 3020, 0);

	CUcontext prim0;
	CK(drv.get_current(&prim0)); /* libcudart made device 0's primary context current */
	CUmemAllocationProp p0 = dev_prop(0, 0);
	size_t gran = 0;
	CK(drv.granularity(&gran, &p0, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
	CUmemAccessDesc acc0 = access_desc(0);
	long long g = (long long)gran;

	/* NCCL's ncclCuMemAlloc, twice into one reservation */
	CUdeviceptr va;
	CUmemGenericAllocationHandle ha, hb, hr;
	DO(drv.reserve(&va, 4 * gran, 0, 0, 0), "reserve", 0, "none", 0, 0);
	DO(drv.create(&ha, 2 * gran, &p0, 0), "create", 0, "device", 2 * g, 0);
	DO(drv.create(&hb, 2 * gran, &p0, 0), "create", 0, "device", 2 * g, 0);
	DO(drv.map(va, 2 * gran, 0, ha, 0), "map", 0, "none", 0, 0);
	DO(drv.map(va + 2 * gran, 2 * gran, 0, hb, 0), "map", 0, "none", 0, 0);
	DO(drv.set_access(va, 4 * gran, &acc0, 1), "set_access", 0, "none", 0, 0);
	/* a failing create (size not a multiple of the granularity): not recorded */
	CUmemGenericAllocationHandle bad;
	if (drv.create(&bad, gran / 2, &p0, 0) == CUDA_SUCCESS)
		die("misaligned cuMemCreate succeeded", 0);
	/* NCCL's ncclCuMemFree of the first: Retain, Release, GetAddressRange, Unmap, Release */
	DO(drv.retain(&hr, (void *)va), "retain", 0, "none", 0, 0);
	if (hr != ha)
		die("cuMemRetainAllocationHandle returned another handle", 0);
	DO(drv.release(hr), "release", 0, "none", 0, 0);
	CUdeviceptr base;
	size_t sz;
	CK(drv.addr_range(&base, &sz, va));
	DO(drv.unmap(base, sz), "unmap", 0, "none", 0, 0);
	DO(drv.release(ha), "release", 0, "device", -2 * g, 0); /* the last reference */
	/* hb stays mapped and allocated; its reservation too */

	/* torch expandable segments: released while mapped, the bytes go at the unmap */
	CUdeviceptr va2;
	CUmemGenericAllocationHandle hc;
	DO(drv.reserve(&va2, 2 * gran, 0, 0, 0), "reserve", 0, "none", 0, 0);
	DO(drv.create(&hc, gran, &p0, 0), "create", 0, "device", g, 0);
	DO(drv.map(va2, gran, 0, hc, 0), "map", 0, "none", 0, 0);
	DO(drv.set_access(va2, gran, &acc0, 1), "set_access", 0, "none", 0, 0);
	DO(drv.release(hc), "release", 0, "none", 0, 0);
	DO(drv.unmap(va2, gran), "unmap", 0, "device", -g, 0);
	DO(drv.addr_free(va2, 2 * gran), "addr_free", 0, "none", 0, 0);

	/* NCCL's host-location cuMem (NCCL_CUMEM_HOST_ENABLE) */
	CUmemAllocationProp ph = dev_prop(0, 0);
	ph.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
	ph.location.id = 0;
	CUmemGenericAllocationHandle hh;
	CUdeviceptr vh;
	DO(drv.create(&hh, gran, &ph, 0), "create", -1, "host", g, 0);
	DO(drv.reserve(&vh, gran, 0, 0, 0), "reserve", -1, "none", 0, 0);
	DO(drv.map(vh, gran, 0, hh, 0), "map", -1, "none", 0, 0);
	DO(drv.set_access(vh, gran, &acc0, 1), "set_access", -1, "none", 0, 0);
	DO(drv.unmap(vh, gran), "unmap", -1, "none", 0, 0);
	DO(drv.release(hh), "release", -1, "host", -g, 0);
	DO(drv.addr_free(vh, gran), "addr_free", -1, "none", 0, 0);

	/* a context of our own on device 0 (no automatic module load: not the device's first) */
	CUcontext mine;
	CUdeviceptr x;
	DO(drv.ctx_create(&mine, NULL, 0, 0), "ctx_create", 0, "none", 0, F_CUPTI_ONLY);
	DO(drv.mem_alloc(&x, 1 * MiB), "alloc", 0, "device", 1 * MiB, 0);
	DO(drv.mem_free(x), "free", 0, "device", -1 * (long long)MiB, 0);
	DO(drv.ctx_destroy(mine), "ctx_destroy", 0, "none", 0, F_CUPTI_ONLY);
	CK(drv.set_current(prim0));

	/* (e) a module with statics on device 0, loaded for good */
	DO(load_module(0, 256 << 10), "static", 0, "static", 256 << 10, F_CUPTI_ONLY);
}

static void device1_part(void *cuda)
{
	CUcontext prim0, prim1;
	CK(drv.get_current(&prim0));
	CK(drv.prim_retain(&prim1, 1));
	first_context(1);
	CK(drv.set_current(prim1));

	/* (c) cuBLAS-like: entry points by versioned name */
	__typeof__(&cuMemAlloc) blas_alloc = (__typeof__(&cuMemAlloc))dlsym(cuda, "cuMemAlloc_v2");
	__typeof__(&cuMemAllocPitch) blas_pitch = (__typeof__(&cuMemAllocPitch))dlsym(cuda, "cuMemAllocPitch_v2");
	__typeof__(&cuMemFree) blas_free = (__typeof__(&cuMemFree))dlsym(cuda, "cuMemFree_v2");
	if (!blas_alloc || !blas_pitch || !blas_free)
		die("dlsym cuMemAlloc_v2/cuMemAllocPitch_v2/cuMemFree_v2", 0);
	CUdeviceptr w, pitched;
	size_t pitch = 0;
	DO(blas_alloc(&w, 16 * MiB), "alloc", 1, "device", 16 * MiB, 0);
	CK(blas_pitch(&pitched, &pitch, 1000, 64, 4));
	ev("alloc", 1, "device", (long long)(pitch * 64), 0);
	/* an allocation beyond the device: fails, not recorded */
	CUdeviceptr huge;
	if (blas_alloc(&huge, (size_t)64 << 30) != CUDA_ERROR_OUT_OF_MEMORY)
		die("64 GiB cuMemAlloc did not fail with OUT_OF_MEMORY", 0);
	DO(blas_free(pitched), "free", 1, "device", -(long long)(pitch * 64), 0);
	/* and the legacy 4-argument cuGetProcAddress */
	gpa_legacy_t legacy = (gpa_legacy_t)dlsym(cuda, "cuGetProcAddress");
	__typeof__(&cuMemAlloc) la = NULL;
	if (!legacy || legacy("cuMemAlloc", (void **)&la, 11030, 0) != CUDA_SUCCESS || !la)
		die("legacy cuGetProcAddress(cuMemAlloc)", 0);
	CUdeviceptr l;
	DO(la(&l, 2 * MiB), "alloc", 1, "device", 2 * MiB, 0);
	DO(blas_free(l), "free", 1, "device", -2 * (long long)MiB, 0);

	/* (d) pools */
	CUmemPoolProps pp;
	memset(&pp, 0, sizeof pp);
	pp.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
	pp.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	pp.location.id = 1;
	CUmemoryPool pool;
	CUdeviceptr q1, q2, q3;
	DO(drv.pool_create(&pool, &pp), "pool_create", 1, "none", 0, 0);
	DO(drv.from_pool(&q1, 2 * MiB, pool, 0), "alloc_async", 1, "device", 2 * MiB, 0);
	DO(drv.from_pool_ptsz(&q2, 1 * MiB, pool, 0), "alloc_async", 1, "device", 1 * MiB, 0);
	DO(drv.alloc_async_ptsz(&q3, 3 * MiB, 0), "alloc_async", 1, "device", 3 * MiB, 0); /* default pool */
	DO(drv.free_async(q1, 0), "free_async", 1, "device", -2 * (long long)MiB, 0);
	DO(drv.free_async_ptsz(q2, 0), "free_async", 1, "device", -1 * (long long)MiB, 0);
	DO(drv.free_async_ptsz(q3, 0), "free_async", 1, "device", -3 * (long long)MiB, 0);
	DO(drv.pool_trim(pool, 0), "pool_trim", 1, "none", 0, 0);
	DO(drv.pool_destroy(pool), "pool_destroy", 1, "none", 0, 0);

	/* managed and pinned host through the driver */
	CUdeviceptr mm;
	void *ha, *hb;
	static char reg[2 << 20] __attribute__((aligned(4096)));
	DO(drv.alloc_managed(&mm, 2 * MiB, CU_MEM_ATTACH_GLOBAL), "alloc_managed", 1, "managed", 2 * MiB, 0);
	DO(drv.alloc_host(&ha, 1 * MiB), "alloc_host", -1, "host", 1 * MiB, 0);
	DO(drv.host_alloc(&hb, 3 * MiB, CU_MEMHOSTALLOC_PORTABLE), "alloc_host", -1, "host", 3 * MiB, 0);
	DO(drv.mem_free(mm), "free", 1, "managed", -2 * (long long)MiB, 0);
	DO(drv.free_host(ha), "free_host", -1, "host", -1 * (long long)MiB, 0);
	DO(drv.host_register(reg, sizeof reg, 0), "host_register", -1, "registered", sizeof reg, 0);
	DO(drv.host_unregister(reg), "host_unregister", -1, "registered", -(long long)sizeof reg, 0);
	DO(drv.free_host(hb), "free_host", -1, "host", -3 * (long long)MiB, 0);

	/* legacy IPC, opened in this process (the stand-in allows it) */
	CUdeviceptr src, opened;
	CUipcMemHandle ih;
	DO(drv.mem_alloc(&src, 4 * MiB), "alloc", 1, "device", 4 * MiB, 0);
	CK(drv.ipc_get(&ih, src));
	DO(drv.ipc_open(&opened, ih, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS), "ipc_open", 1, "imported", 4 * MiB, 0);
	DO(drv.ipc_close(opened), "ipc_close", 1, "imported", -4 * (long long)MiB, 0);
	DO(drv.mem_free(src), "free", 1, "device", -4 * (long long)MiB, 0);

	/* shareable handle: export, import, map the import */
	CUmemAllocationProp p1 = dev_prop(1, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
	size_t gran = 0;
	CK(drv.granularity(&gran, &p1, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
	long long g = (long long)gran;
	CUmemGenericAllocationHandle hs, hi;
	CUdeviceptr vi;
	CUmemAccessDesc acc1 = access_desc(1);
	int fd = -1;
	DO(drv.create(&hs, gran, &p1, 0), "create", 1, "device", g, 0);
	CK(drv.export_handle(&fd, hs, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
	DO(drv.import_handle(&hi, (void *)(intptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR), "import", 1, "none", 0,
	   0);
	DO(drv.reserve(&vi, gran, 0, 0, 0), "reserve", 1, "none", 0, 0);
	DO(drv.map(vi, gran, 0, hi, 0), "map", 1, "imported", g, 0);
	DO(drv.set_access(vi, gran, &acc1, 1), "set_access", 1, "none", 0, 0);
	DO(drv.unmap(vi, gran), "unmap", 1, "imported", -g, 0);
	DO(drv.release(hi), "release", 1, "none", 0, 0);
	DO(drv.addr_free(vi, gran), "addr_free", 1, "none", 0, 0);
	DO(drv.release(hs), "release", 1, "device", -g, 0);
	close(fd);

	/* (e) a module on device 1, then the primary context goes (statics with it) */
	DO(load_module(1, 512 << 10), "static", 1, "static", 512 << 10, F_CUPTI_ONLY);
	DO(blas_free(w), "free", 1, "device", -16 * (long long)MiB, 0);
	CK(drv.set_current(prim0));
	CK(drv.prim_release(1));
	/* as the driver reports it: the context's destruction starts, then its
	 * modules are unloaded, the last loaded first (checked after all three) */
	ev_nc("ctx_destroy", 1, "none", 0, F_CUPTI_ONLY);
	if (static_bytes)
		ev_nc("static_free", 1, "static", -(512 << 10), F_CUPTI_ONLY);
	ev("static_free", 1, "static", -(long long)(static_bytes ? static_bytes : 512 << 10), F_CUPTI_ONLY);
}

/* PLT calls to driver exports (a program or extension linked with -lcuda) */
static void plt_part(void)
{
	CUdeviceptr p;
	DO(cuMemAlloc(&p, 1 * MiB), "alloc", 0, "device", 1 * MiB, 0);
	DO(cuMemFree(p), "free", 0, "device", -1 * (long long)MiB, 0);
}

int main(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--yield-after") && i + 1 < argc)
			yield_after = atoi(argv[++i]);
		else {
			fprintf(stderr, "usage: victim_driver [--yield-after N]\n");
			return 1;
		}
	}
	const char *sb = getenv("STANDIN_STATIC_BYTES");
	static_bytes = sb && *sb ? strtoull(sb, NULL, 0) : MiB; /* the stand-in's default */

	void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!cuda)
		die("dlopen libcuda.so.1", 0);
	*(void **)&used_bytes = dlsym(cuda, "standin_used_bytes");
	*(void **)&host_bytes = dlsym(cuda, "standin_host_pinned_bytes");
	*(void **)&load_module = dlsym(cuda, "standin_load_module");
	if (!used_bytes || !host_bytes || !load_module)
		die("not the stand-in libcuda", 0);

	nvtxRangePushA("victim_driver");
	runtime_part();
	nccl_like(cuda);
	device1_part(cuda);
	plt_part();
	nvtxRangePop();

	if (failures)
		return 3;
	if (yield_after >= 0) {
		fprintf(stderr, "victim_driver: own CUPTI ENTER callbacks:");
		for (int i = 0; i < 1024; i++)
			if (by_cbid[i])
				fprintf(stderr, " %s=%lu", cbid_name[i], by_cbid[i]);
		fprintf(stderr, "\n");
	}
	printf("{\"static_bytes\": %zu, \"own_cupti_subscribe\": %d, \"own_cupti_callbacks\": %lu, \"ops\": [", static_bytes,
	       yield_after >= 0 ? (int)own_sub : -1, own_callbacks);
	for (int i = 0; i < nevs; i++)
		printf("%s[\"%s\", %d, \"%s\", %lld, %d]", i ? ", " : "", evs[i].op, evs[i].dev, evs[i].cat, evs[i].delta,
		       evs[i].flags);
	printf("], \"rt\": [");
	for (int i = 0; i < nrt; i++)
		printf("%s[\"%s\", %d, \"%s\", %lld]", i ? ", " : "", rtevs[i].api, rtevs[i].dev, rtevs[i].cat,
		       rtevs[i].delta);
	printf("]}\n");
	return 0;
}
