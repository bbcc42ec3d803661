/* CUDA runtime allocation hooks.  torch's caching allocator and anything
 * else linked against the shared libcudart reaches these through the PLT.
 * Allocations are recorded after the real call succeeds, frees before the
 * real free (so a racing allocation cannot reuse the address first); each
 * hook returns exactly what the real function returned.  The real call runs
 * inside DSMT_RT_ENTER/LEAVE: the driver call libcudart makes for it is
 * marked as part of this one (driver.h), and its site is our caller's. */
#include <cuda_runtime_api.h>
#include <stdint.h>

#include "driver.h"
#include "format.h"
#include "preload.h"

#define RT "libcudart"
#define SITE __builtin_return_address(0)

typedef cudaError_t (*get_device_fn)(int *);

static int cur_device(void)
{
	int d = -1;
	get_device_fn f = DSMT_LOOKUP(get_device_fn, "cudaGetDevice", RT);
	if (!f || f(&d) != cudaSuccess)
		return -1;
	return d;
}

static void rec_alloc(uint8_t api, int dev, const void *p, size_t n, uint64_t stream, const void *site)
{
	DSMT_RECORD(dsmt_ev_mem_py(DSMT_REC_ALLOC, api, dev, (uintptr_t)p, n, stream, site, NULL, DSMT_PY_NOGIL));
}

static void rec_free(uint8_t api, const void *p, uint64_t stream, const void *site)
{
	if (p)
		DSMT_RECORD(dsmt_ev_mem_py(DSMT_REC_FREE, api, -1, (uintptr_t)p, 0, stream, site, NULL, DSMT_PY_NOGIL));
}

DSMT_EXPORT cudaError_t cudaMalloc(void **devPtr, size_t size)
{
	__typeof__(&cudaMalloc) f = DSMT_REAL(cudaMalloc, RT);
	if (!f)
		return cudaErrorInitializationError;
	DSMT_RT_ENTER(SITE);
	cudaError_t r = f(devPtr, size);
	DSMT_RT_LEAVE();
	if (r == cudaSuccess && devPtr)
		rec_alloc(DSMT_API_CUDA_MALLOC, cur_device(), *devPtr, size, 0, SITE);
	return r;
}

DSMT_EXPORT cudaError_t cudaFree(void *devPtr)
{
	__typeof__(&cudaFree) f = DSMT_REAL(cudaFree, RT);
	if (!f)
		return cudaErrorInitializationError;
	rec_free(DSMT_API_CUDA_FREE, devPtr, 0, SITE);
	DSMT_RT_ENTER(SITE);
	cudaError_t r = f(devPtr);
	DSMT_RT_LEAVE();
	return r;
}

DSMT_EXPORT cudaError_t cudaMallocAsync(void **devPtr, size_t size, cudaStream_t hStream)
{
	__typeof__(&cudaMallocAsync) f = DSMT_REAL(cudaMallocAsync, RT);
	if (!f)
		return cudaErrorInitializationError;
	DSMT_RT_ENTER(SITE);
	cudaError_t r = f(devPtr, size, hStream);
	DSMT_RT_LEAVE();
	if (r == cudaSuccess && devPtr)
		rec_alloc(DSMT_API_CUDA_MALLOC_ASYNC, cur_device(), *devPtr, size, (uintptr_t)hStream, SITE);
	return r;
}

DSMT_EXPORT cudaError_t cudaFreeAsync(void *devPtr, cudaStream_t hStream)
{
	__typeof__(&cudaFreeAsync) f = DSMT_REAL(cudaFreeAsync, RT);
	if (!f)
		return cudaErrorInitializationError;
	rec_free(DSMT_API_CUDA_MALLOC_ASYNC, devPtr, (uintptr_t)hStream, SITE);
	DSMT_RT_ENTER(SITE);
	cudaError_t r = f(devPtr, hStream);
	DSMT_RT_LEAVE();
	return r;
}

DSMT_EXPORT cudaError_t cudaMallocManaged(void **devPtr, size_t size, unsigned int flags)
{
	__typeof__(&cudaMallocManaged) f = DSMT_REAL(cudaMallocManaged, RT);
	if (!f)
		return cudaErrorInitializationError;
	DSMT_RT_ENTER(SITE);
	cudaError_t r = f(devPtr, size, flags);
	DSMT_RT_LEAVE();
	if (r == cudaSuccess && devPtr)
		rec_alloc(DSMT_API_CUDA_MALLOC_MANAGED, cur_device(), *devPtr, size, 0, SITE);
	return r;
}

DSMT_EXPORT cudaError_t cudaHostAlloc(void **pHost, size_t size, unsigned int flags)
{
	__typeof__(&cudaHostAlloc) f = DSMT_REAL(cudaHostAlloc, RT);
	if (!f)
		return cudaErrorInitializationError;
	DSMT_RT_ENTER(SITE);
	cudaError_t r = f(pHost, size, flags);
	DSMT_RT_LEAVE();
	if (r == cudaSuccess && pHost)
		rec_alloc(DSMT_API_CUDA_HOST_ALLOC, -1, *pHost, size, 0, SITE);
	return r;
}

DSMT_EXPORT cudaError_t cudaMallocHost(void **ptr, size_t size)
{
	__typeof__(&cudaMallocHost) f = DSMT_REAL(cudaMallocHost, RT);
	if (!f)
		return cudaErrorInitializationError;
	DSMT_RT_ENTER(SITE);
	cudaError_t r = f(ptr, size);
	DSMT_RT_LEAVE();
	if (r == cudaSuccess && ptr)
		rec_alloc(DSMT_API_CUDA_HOST_ALLOC, -1, *ptr, size, 0, SITE);
	return r;
}

DSMT_EXPORT cudaError_t cudaFreeHost(void *ptr)
{
	__typeof__(&cudaFreeHost) f = DSMT_REAL(cudaFreeHost, RT);
	if (!f)
		return cudaErrorInitializationError;
	rec_free(DSMT_API_CUDA_FREE_HOST, ptr, 0, SITE);
	DSMT_RT_ENTER(SITE);
	cudaError_t r = f(ptr);
	DSMT_RT_LEAVE();
	return r;
}

DSMT_EXPORT cudaError_t cudaHostRegister(void *ptr, size_t size, unsigned int flags)
{
	__typeof__(&cudaHostRegister) f = DSMT_REAL(cudaHostRegister, RT);
	if (!f)
		return cudaErrorInitializationError;
	DSMT_RT_ENTER(SITE);
	cudaError_t r = f(ptr, size, flags);
	DSMT_RT_LEAVE();
	if (r == cudaSuccess)
		rec_alloc(DSMT_API_CUDA_HOST_REGISTER, -1, ptr, size, 0, SITE);
	return r;
}

DSMT_EXPORT cudaError_t cudaHostUnregister(void *ptr)
{
	__typeof__(&cudaHostUnregister) f = DSMT_REAL(cudaHostUnregister, RT);
	if (!f)
		return cudaErrorInitializationError;
	rec_free(DSMT_API_CUDA_HOST_REGISTER, ptr, 0, SITE);
	DSMT_RT_ENTER(SITE);
	cudaError_t r = f(ptr);
	DSMT_RT_LEAVE();
	return r;
}
