/* Stand-in for the CUDA driver, libcuda.so.1 (soname libcuda.so.1).
 *
 * Links like the real one: unversioned exports, and every entry point is
 * also reachable through cuGetProcAddress_v2, which returns the library's
 * own exported function (the pointer equals dlsym(libcuda, "<name>_v2"),
 * as measured on the real driver).  The library is linked -Bsymbolic so a
 * preloaded definition of the same name never changes what we hand out.
 *
 * "Device memory" is host memory (mmap, never touched, MAP_NORESERVE); each
 * device has a capacity of STANDIN_DEVICE_MEM bytes (default 1 GiB);
 * beyond it allocations fail with CUDA_ERROR_OUT_OF_MEMORY.
 * STANDIN_DEVICE_COUNT (default 2) sets the number of devices.
 */
#include <cuda.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define EXPORT __attribute__((visibility("default")))
#define MAX_DEV 8

struct CUctx_st {
	int dev;
};

static struct CUctx_st primary[MAX_DEV];
static int ndev = -1;
static size_t capacity;
static size_t used[MAX_DEV];
static int initialised;
static __thread CUcontext cur_ctx;

enum { K_DEVICE, K_MANAGED, K_HOST, K_REGISTERED };
struct alloc {
	uintptr_t p;
	size_t size;
	int dev, kind;
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
	const char *c = getenv("STANDIN_DEVICE_COUNT");
	int n = c && *c ? atoi(c) : 2;
	if (n < 1)
		n = 1;
	if (n > MAX_DEV)
		n = MAX_DEV;
	for (int i = 0; i < n; i++)
		primary[i].dev = i;
	ndev = n;
}

EXPORT CUresult CUDAAPI cuInit(unsigned int flags)
{
	(void)flags;
	pthread_mutex_lock(&lock);
	config();
	initialised = 1;
	pthread_mutex_unlock(&lock);
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

EXPORT CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
	if (!initialised)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (dev < 0 || dev >= ndev)
		return CUDA_ERROR_INVALID_DEVICE;
	*pctx = &primary[dev];
	return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuCtxSetCurrent(CUcontext ctx)
{
	cur_ctx = ctx;
	return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuCtxGetCurrent(CUcontext *pctx)
{
	*pctx = cur_ctx;
	return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuCtxGetDevice(CUdevice *d)
{
	if (!cur_ctx)
		return CUDA_ERROR_INVALID_CONTEXT;
	*d = cur_ctx->dev;
	return CUDA_SUCCESS;
}

/* Device memory comes from one reserved range per device, first fit, so the
 * relative order of addresses (which the caching allocator's best fit uses to
 * break ties) does not depend on what else the process maps. */
static uintptr_t arena[MAX_DEV];

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
			if (a->dev != dev || a->kind == K_HOST || a->kind == K_REGISTERED)
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

static CUresult do_alloc(uintptr_t *out, size_t size, int kind)
{
	if (!initialised)
		return CUDA_ERROR_NOT_INITIALIZED;
	int dev = -1;
	if (kind == K_DEVICE || kind == K_MANAGED) {
		if (!cur_ctx)
			return CUDA_ERROR_INVALID_CONTEXT;
		dev = cur_ctx->dev;
	}
	if (size == 0)
		return CUDA_ERROR_INVALID_VALUE;
	struct alloc *a = malloc(sizeof *a);
	if (!a)
		return CUDA_ERROR_OUT_OF_MEMORY;
	pthread_mutex_lock(&lock);
	uintptr_t p = 0;
	if (dev >= 0) {
		if (size <= capacity && used[dev] <= capacity - size)
			p = arena_fit(dev, size);
	} else {
		void *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		p = m == MAP_FAILED ? 0 : (uintptr_t)m;
	}
	if (!p) {
		pthread_mutex_unlock(&lock);
		free(a);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	if (dev >= 0)
		used[dev] += size;
	a->p = p;
	a->size = size;
	a->dev = dev;
	a->kind = kind;
	a->next = allocs;
	allocs = a;
	pthread_mutex_unlock(&lock);
	*out = p;
	return CUDA_SUCCESS;
}

static CUresult do_free(uintptr_t p, int host)
{
	if (!initialised)
		return CUDA_ERROR_NOT_INITIALIZED;
	pthread_mutex_lock(&lock);
	for (struct alloc **pp = &allocs; *pp; pp = &(*pp)->next) {
		struct alloc *a = *pp;
		if (a->p != p || a->kind == K_REGISTERED || (a->kind == K_HOST) != host)
			continue;
		*pp = a->next;
		if (a->dev >= 0)
			used[a->dev] -= a->size; /* stays mapped in the arena */
		else
			munmap((void *)a->p, a->size);
		pthread_mutex_unlock(&lock);
		free(a);
		return CUDA_SUCCESS;
	}
	pthread_mutex_unlock(&lock);
	return CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult CUDAAPI cuMemAlloc(CUdeviceptr *dptr, size_t size) /* cuMemAlloc_v2 */
{
	uintptr_t p = 0;
	CUresult r = do_alloc(&p, size, K_DEVICE);
	*dptr = p;
	return r;
}

EXPORT CUresult CUDAAPI cuMemFree(CUdeviceptr dptr) /* cuMemFree_v2 */
{
	return do_free(dptr, 0);
}

EXPORT CUresult CUDAAPI cuMemAllocAsync(CUdeviceptr *dptr, size_t size, CUstream s)
{
	(void)s;
	return cuMemAlloc(dptr, size);
}

EXPORT CUresult CUDAAPI cuMemFreeAsync(CUdeviceptr dptr, CUstream s)
{
	(void)s;
	return do_free(dptr, 0);
}

/* per-thread-default-stream flavours, as the real driver exports them */
EXPORT CUresult CUDAAPI cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t size, CUstream s)
{
	(void)s;
	return cuMemAlloc(dptr, size);
}

EXPORT CUresult CUDAAPI cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream s)
{
	(void)s;
	return do_free(dptr, 0);
}

EXPORT CUresult CUDAAPI cuMemAllocManaged(CUdeviceptr *dptr, size_t size, unsigned int flags)
{
	(void)flags;
	uintptr_t p = 0;
	CUresult r = do_alloc(&p, size, K_MANAGED);
	*dptr = p;
	return r;
}

EXPORT CUresult CUDAAPI cuMemHostAlloc(void **pp, size_t size, unsigned int flags)
{
	(void)flags;
	uintptr_t p = 0;
	CUresult r = do_alloc(&p, size, K_HOST);
	*pp = (void *)p;
	return r;
}

EXPORT CUresult CUDAAPI cuMemAllocHost(void **pp, size_t size) /* cuMemAllocHost_v2 */
{
	return cuMemHostAlloc(pp, size, 0);
}

EXPORT CUresult CUDAAPI cuMemFreeHost(void *p)
{
	return do_free((uintptr_t)p, 1);
}

EXPORT CUresult CUDAAPI cuMemHostRegister(void *p, size_t size, unsigned int flags) /* _v2 */
{
	(void)flags;
	if (!initialised)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!p || !size)
		return CUDA_ERROR_INVALID_VALUE;
	struct alloc *a = malloc(sizeof *a);
	if (!a)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*a = (struct alloc){(uintptr_t)p, size, -1, K_REGISTERED, NULL};
	pthread_mutex_lock(&lock);
	for (struct alloc *b = allocs; b; b = b->next)
		if (b->kind == K_REGISTERED && b->p == (uintptr_t)p) {
			pthread_mutex_unlock(&lock);
			free(a);
			return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
		}
	a->next = allocs;
	allocs = a;
	pthread_mutex_unlock(&lock);
	return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuMemHostUnregister(void *p)
{
	pthread_mutex_lock(&lock);
	for (struct alloc **pp = &allocs; *pp; pp = &(*pp)->next) {
		struct alloc *a = *pp;
		if (a->kind != K_REGISTERED || a->p != (uintptr_t)p)
			continue;
		*pp = a->next;
		pthread_mutex_unlock(&lock);
		free(a);
		return CUDA_SUCCESS;
	}
	pthread_mutex_unlock(&lock);
	return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
}

EXPORT CUresult CUDAAPI cuMemGetInfo(size_t *free_b, size_t *total) /* _v2 */
{
	if (!cur_ctx)
		return CUDA_ERROR_INVALID_CONTEXT;
	pthread_mutex_lock(&lock);
	*total = capacity;
	*free_b = capacity - used[cur_ctx->dev];
	pthread_mutex_unlock(&lock);
	return CUDA_SUCCESS;
}

/* Test hook (not in the real driver): bytes in use on a device. */
EXPORT size_t standin_cuda_used(int dev)
{
	pthread_mutex_lock(&lock);
	size_t u = dev >= 0 && dev < MAX_DEV ? used[dev] : 0;
	pthread_mutex_unlock(&lock);
	return u;
}

EXPORT CUresult CUDAAPI cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
					 CUdriverProcAddressQueryResult *status); /* cuGetProcAddress_v2 */

struct entry {
	const char *name;
	int min_version;
	void *fn, *fn_ptsz;
};

#define E(n, v, f) {n, v, (void *)(f), NULL}
static const struct entry table[] = {
	E("cuInit", 2000, cuInit),
	E("cuDriverGetVersion", 2020, cuDriverGetVersion),
	E("cuDeviceGet", 2000, cuDeviceGet),
	E("cuDeviceGetCount", 2000, cuDeviceGetCount),
	E("cuDevicePrimaryCtxRetain", 7000, cuDevicePrimaryCtxRetain),
	E("cuCtxSetCurrent", 4000, cuCtxSetCurrent),
	E("cuCtxGetCurrent", 4000, cuCtxGetCurrent),
	E("cuCtxGetDevice", 2000, cuCtxGetDevice),
	E("cuMemAlloc", 3020, cuMemAlloc),
	E("cuMemFree", 3020, cuMemFree),
	{"cuMemAllocAsync", 11020, (void *)cuMemAllocAsync, (void *)cuMemAllocAsync_ptsz},
	{"cuMemFreeAsync", 11020, (void *)cuMemFreeAsync, (void *)cuMemFreeAsync_ptsz},
	E("cuMemAllocManaged", 6000, cuMemAllocManaged),
	E("cuMemHostAlloc", 2020, cuMemHostAlloc),
	E("cuMemAllocHost", 3020, cuMemAllocHost),
	E("cuMemFreeHost", 2000, cuMemFreeHost),
	E("cuMemHostRegister", 6050, cuMemHostRegister),
	E("cuMemHostUnregister", 4000, cuMemHostUnregister),
	E("cuMemGetInfo", 3020, cuMemGetInfo),
	E("cuGetProcAddress", 12000, cuGetProcAddress),
};

EXPORT CUresult CUDAAPI cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
					 CUdriverProcAddressQueryResult *status)
{
	if (!symbol || !pfn)
		return CUDA_ERROR_INVALID_VALUE;
	*pfn = NULL;
	for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
		if (strcmp(table[i].name, symbol))
			continue;
		if (cudaVersion < table[i].min_version) {
			if (status)
				*status = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
			return CUDA_ERROR_NOT_FOUND;
		}
		*pfn = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) && table[i].fn_ptsz ? table[i].fn_ptsz
												   : table[i].fn;
		if (status)
			*status = CU_GET_PROC_ADDRESS_SUCCESS;
		return CUDA_SUCCESS;
	}
	if (status)
		*status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
	return CUDA_ERROR_NOT_FOUND;
}
