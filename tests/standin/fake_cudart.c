/* Stand-in for the CUDA runtime, libcudart.so.13 (soname libcudart.so.13).
 *
 * Links like the real one:
 *  - every export is versioned by cudart.map: cudaMalloc@@libcudart.so.13;
 *  - no DT_NEEDED on libcuda: at first use it does dlopen("libcuda.so.1"),
 *    dlsym(h, "cuGetProcAddress_v2"), asks that for "cuGetProcAddress" and
 *    fetches every driver entry point through the returned pointer, by base
 *    name and version (as the real libcudart does, MECHANICS §2.2);
 *  - linked -Bsymbolic: internal calls never go through a preloaded symbol.
 * The current device is per thread (default 0), the context is the device's
 * primary context made current on demand.
 */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define EXPORT __attribute__((visibility("default")))

typedef CUresult (*gpa_t)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);

static struct {
	gpa_t gpa;
	CUresult (*init)(unsigned);
	CUresult (*drv_version)(int *);
	CUresult (*dev_count)(int *);
	CUresult (*ctx_retain)(CUcontext *, CUdevice);
	CUresult (*ctx_set)(CUcontext);
	CUresult (*mem_alloc)(CUdeviceptr *, size_t);
	CUresult (*mem_free)(CUdeviceptr);
	CUresult (*alloc_async)(CUdeviceptr *, size_t, CUstream);
	CUresult (*free_async)(CUdeviceptr, CUstream);
	CUresult (*alloc_async_ptsz)(CUdeviceptr *, size_t, CUstream);
	CUresult (*alloc_managed)(CUdeviceptr *, size_t, unsigned);
	CUresult (*host_alloc)(void **, size_t, unsigned);
	CUresult (*free_host)(void *);
	CUresult (*host_register)(void *, size_t, unsigned);
	CUresult (*host_unregister)(void *);
	CUresult (*mem_info)(size_t *, size_t *);
	int ndev;
	cudaError_t init_error;
} drv;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static __thread int cur_dev;
static __thread int ctx_dev = -1;
static __thread cudaError_t last_error;

static int get(const char *name, void *slot, int version, cuuint64_t flags)
{
	CUdriverProcAddressQueryResult st;
	void **p = slot;
	if (drv.gpa(name, p, version, flags, &st) != CUDA_SUCCESS || !*p) {
		fprintf(stderr, "stand-in libcudart: driver entry point %s unavailable\n", name);
		return -1;
	}
	return 0;
}

static void load_driver(void)
{
	drv.init_error = cudaErrorInsufficientDriver;
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "stand-in libcudart: %s\n", dlerror());
		return;
	}
	gpa_t boot = (gpa_t)dlsym(h, "cuGetProcAddress_v2");
	if (!boot)
		return;
	drv.gpa = boot;
	gpa_t gpa2 = NULL;
	/* the real libcudart asks for cuGetProcAddress itself and uses the answer */
	if (get("cuGetProcAddress", &gpa2, 12000, 0))
		return;
	drv.gpa = gpa2;
	int bad = 0;
	bad |= get("cuInit", &drv.init, 2000, 0);
	bad |= get("cuDriverGetVersion", &drv.drv_version, 2020, 0);
	bad |= get("cuDeviceGetCount", &drv.dev_count, 2000, 0);
	bad |= get("cuDevicePrimaryCtxRetain", &drv.ctx_retain, 7000, 0);
	bad |= get("cuCtxSetCurrent", &drv.ctx_set, 4000, 0);
	bad |= get("cuMemAlloc", &drv.mem_alloc, 3020, 0);
	bad |= get("cuMemFree", &drv.mem_free, 3020, 0);
	bad |= get("cuMemAllocAsync", &drv.alloc_async, 11020, 0);
	bad |= get("cuMemAllocAsync", &drv.alloc_async_ptsz, 11020, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
	bad |= get("cuMemFreeAsync", &drv.free_async, 11020, 0);
	bad |= get("cuMemAllocManaged", &drv.alloc_managed, 6000, 0);
	bad |= get("cuMemHostAlloc", &drv.host_alloc, 2020, 0);
	bad |= get("cuMemFreeHost", &drv.free_host, 2000, 0);
	bad |= get("cuMemHostRegister", &drv.host_register, 6050, 0);
	bad |= get("cuMemHostUnregister", &drv.host_unregister, 4000, 0);
	bad |= get("cuMemGetInfo", &drv.mem_info, 3020, 0);
	if (bad)
		return;
	if (drv.init(0) != CUDA_SUCCESS || drv.dev_count(&drv.ndev) != CUDA_SUCCESS) {
		drv.init_error = cudaErrorNoDevice;
		return;
	}
	drv.init_error = cudaSuccess;
}

static cudaError_t fail(cudaError_t e)
{
	if (e != cudaSuccess)
		last_error = e;
	return e;
}

static cudaError_t ready(int need_ctx)
{
	pthread_once(&once, load_driver);
	if (drv.init_error)
		return drv.init_error;
	if (need_ctx && ctx_dev != cur_dev) {
		CUcontext c;
		if (drv.ctx_retain(&c, cur_dev) != CUDA_SUCCESS || drv.ctx_set(c) != CUDA_SUCCESS)
			return cudaErrorInvalidDevice;
		ctx_dev = cur_dev;
	}
	return cudaSuccess;
}

static cudaError_t map(CUresult r)
{
	switch (r) {
	case CUDA_SUCCESS: return cudaSuccess;
	case CUDA_ERROR_OUT_OF_MEMORY: return cudaErrorMemoryAllocation;
	case CUDA_ERROR_INVALID_VALUE: return cudaErrorInvalidValue;
	case CUDA_ERROR_INVALID_DEVICE: return cudaErrorInvalidDevice;
	case CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED: return cudaErrorHostMemoryAlreadyRegistered;
	case CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED: return cudaErrorHostMemoryNotRegistered;
	default: return cudaErrorUnknown;
	}
}

#define READY(need_ctx)                               \
	do {                                          \
		cudaError_t e_ = ready(need_ctx);     \
		if (e_)                               \
			return fail(e_);              \
	} while (0)

EXPORT cudaError_t CUDARTAPI cudaMalloc(void **devPtr, size_t size)
{
	if (!devPtr)
		return fail(cudaErrorInvalidValue);
	READY(1);
	*devPtr = NULL;
	if (size == 0)
		return cudaSuccess;
	CUdeviceptr p = 0;
	cudaError_t e = map(drv.mem_alloc(&p, size));
	if (!e)
		*devPtr = (void *)(uintptr_t)p;
	return fail(e);
}

EXPORT cudaError_t CUDARTAPI cudaFree(void *devPtr)
{
	READY(1);
	if (!devPtr)
		return cudaSuccess;
	return fail(map(drv.mem_free((CUdeviceptr)(uintptr_t)devPtr)));
}

EXPORT cudaError_t CUDARTAPI cudaMallocAsync(void **devPtr, size_t size, cudaStream_t s)
{
	if (!devPtr)
		return fail(cudaErrorInvalidValue);
	READY(1);
	CUdeviceptr p = 0;
	cudaError_t e = map(drv.alloc_async(&p, size, (CUstream)s));
	*devPtr = e ? NULL : (void *)(uintptr_t)p;
	return fail(e);
}

EXPORT cudaError_t CUDARTAPI cudaFreeAsync(void *devPtr, cudaStream_t s)
{
	READY(1);
	return fail(map(drv.free_async((CUdeviceptr)(uintptr_t)devPtr, (CUstream)s)));
}

EXPORT cudaError_t CUDARTAPI cudaMallocManaged(void **devPtr, size_t size, unsigned int flags)
{
	if (!devPtr)
		return fail(cudaErrorInvalidValue);
	READY(1);
	CUdeviceptr p = 0;
	cudaError_t e = map(drv.alloc_managed(&p, size, flags));
	*devPtr = e ? NULL : (void *)(uintptr_t)p;
	return fail(e);
}

EXPORT cudaError_t CUDARTAPI cudaHostAlloc(void **pHost, size_t size, unsigned int flags)
{
	if (!pHost)
		return fail(cudaErrorInvalidValue);
	READY(1);
	void *p = NULL;
	cudaError_t e = map(drv.host_alloc(&p, size, flags));
	*pHost = e ? NULL : p;
	return fail(e);
}

EXPORT cudaError_t CUDARTAPI cudaMallocHost(void **ptr, size_t size)
{
	return cudaHostAlloc(ptr, size, cudaHostAllocDefault);
}

EXPORT cudaError_t CUDARTAPI cudaFreeHost(void *ptr)
{
	READY(1);
	if (!ptr)
		return cudaSuccess;
	return fail(map(drv.free_host(ptr)));
}

EXPORT cudaError_t CUDARTAPI cudaHostRegister(void *ptr, size_t size, unsigned int flags)
{
	READY(1);
	return fail(map(drv.host_register(ptr, size, flags)));
}

EXPORT cudaError_t CUDARTAPI cudaHostUnregister(void *ptr)
{
	READY(1);
	return fail(map(drv.host_unregister(ptr)));
}

EXPORT cudaError_t CUDARTAPI cudaMemGetInfo(size_t *free_b, size_t *total)
{
	READY(1);
	return fail(map(drv.mem_info(free_b, total)));
}

EXPORT cudaError_t CUDARTAPI cudaGetDeviceCount(int *count)
{
	READY(0);
	*count = drv.ndev;
	return cudaSuccess;
}

EXPORT cudaError_t CUDARTAPI cudaGetDevice(int *device)
{
	READY(0);
	*device = cur_dev;
	return cudaSuccess;
}

EXPORT cudaError_t CUDARTAPI cudaSetDevice(int device)
{
	READY(0);
	if (device < 0 || device >= drv.ndev)
		return fail(cudaErrorInvalidDevice);
	cur_dev = device;
	return cudaSuccess;
}

EXPORT cudaError_t CUDARTAPI cudaRuntimeGetVersion(int *v)
{
	*v = 13000;
	return cudaSuccess;
}

EXPORT cudaError_t CUDARTAPI cudaDriverGetVersion(int *v)
{
	pthread_once(&once, load_driver);
	if (!drv.drv_version) {
		*v = 0;
		return cudaSuccess;
	}
	return fail(map(drv.drv_version(v)));
}

EXPORT cudaError_t CUDARTAPI cudaGetDriverEntryPointByVersion(const char *symbol, void **funcPtr, unsigned int cudaVersion,
							      unsigned long long flags,
							      enum cudaDriverEntryPointQueryResult *st)
{
	READY(0);
	CUdriverProcAddressQueryResult q = CU_GET_PROC_ADDRESS_SUCCESS;
	CUresult r = drv.gpa(symbol, funcPtr, (int)cudaVersion, flags, &q);
	if (st)
		*st = (enum cudaDriverEntryPointQueryResult)q;
	return r == CUDA_SUCCESS ? cudaSuccess : (r == CUDA_ERROR_NOT_FOUND ? cudaSuccess : fail(map(r)));
}

struct CUstream_st {
	int dev;
	unsigned long id;
};

EXPORT cudaError_t CUDARTAPI cudaStreamCreate(cudaStream_t *pStream)
{
	static unsigned long next_id = 1;
	READY(1);
	struct CUstream_st *s = malloc(sizeof *s);
	if (!s)
		return fail(cudaErrorMemoryAllocation);
	s->dev = cur_dev;
	s->id = __atomic_fetch_add(&next_id, 1, __ATOMIC_RELAXED);
	*pStream = (cudaStream_t)s;
	return cudaSuccess;
}

EXPORT cudaError_t CUDARTAPI cudaStreamDestroy(cudaStream_t stream)
{
	if (!stream)
		return fail(cudaErrorInvalidResourceHandle);
	free(stream);
	return cudaSuccess;
}

EXPORT cudaError_t CUDARTAPI cudaStreamSynchronize(cudaStream_t stream)
{
	(void)stream;
	READY(1);
	return cudaSuccess;
}

EXPORT cudaError_t CUDARTAPI cudaDeviceSynchronize(void)
{
	READY(1);
	return cudaSuccess;
}

EXPORT cudaError_t CUDARTAPI cudaGetLastError(void)
{
	cudaError_t e = last_error;
	last_error = cudaSuccess;
	return e;
}

EXPORT cudaError_t CUDARTAPI cudaPeekAtLastError(void)
{
	return last_error;
}

EXPORT const char *CUDARTAPI cudaGetErrorString(cudaError_t error)
{
	switch (error) {
	case cudaSuccess: return "no error";
	case cudaErrorMemoryAllocation: return "out of memory";
	case cudaErrorInvalidValue: return "invalid argument";
	case cudaErrorInvalidDevice: return "invalid device ordinal";
	case cudaErrorInsufficientDriver: return "CUDA driver version is insufficient for CUDA runtime version";
	case cudaErrorNoDevice: return "no CUDA-capable device is detected";
	default: return "unknown error";
	}
}
