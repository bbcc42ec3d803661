/* Stand-in for the torch API a training script uses (torch.empty/del,
 * Tensor.record_stream, torch.cuda.synchronize, torch.cuda.empty_cache,
 * torch.cuda.memory_allocated & co.).  NEEDED: libc10_cuda.so, which needs
 * libc10.so and libcudart.so.13 — the chain torch/_C.so has.  Programs load it
 * with dlopen(RTLD_LOCAL), so nothing below it enters the global scope.
 */
#include "torchstub.h"

#include <cuda_runtime_api.h>

#define EXPORT __attribute__((visibility("default")))

void *c10_cuda_malloc(size_t size, int dev, void *stream);
int c10_cuda_free(void *ptr);
int c10_cuda_record_stream(void *ptr, void *stream);
void c10_cuda_stream_sync(void *stream);
void c10_cuda_device_sync(void);
void c10_cuda_empty_cache(int dev);
uint64_t c10_cuda_stat(int dev, int which);
void c10_cuda_reset_peak(int dev);

EXPORT void *ts_alloc(size_t size, int dev, ts_stream stream) { return c10_cuda_malloc(size, dev, stream); }
EXPORT int ts_free(void *ptr) { return c10_cuda_free(ptr); }
EXPORT int ts_record_stream(void *ptr, ts_stream stream) { return c10_cuda_record_stream(ptr, stream); }
EXPORT void ts_stream_sync(ts_stream stream) { c10_cuda_stream_sync(stream); }
EXPORT void ts_sync(void) { c10_cuda_device_sync(); }
EXPORT void ts_empty_cache(int dev) { c10_cuda_empty_cache(dev); }
EXPORT uint64_t ts_memory_allocated(int dev) { return c10_cuda_stat(dev, 0); }
EXPORT uint64_t ts_max_memory_allocated(int dev) { return c10_cuda_stat(dev, 1); }
EXPORT uint64_t ts_memory_reserved(int dev) { return c10_cuda_stat(dev, 2); }
EXPORT uint64_t ts_max_memory_reserved(int dev) { return c10_cuda_stat(dev, 3); }
EXPORT uint64_t ts_segments(int dev) { return c10_cuda_stat(dev, 4); }
EXPORT uint64_t ts_num_ooms(int dev) { return c10_cuda_stat(dev, 5); }
EXPORT void ts_reset_peak(int dev) { c10_cuda_reset_peak(dev); }

EXPORT int ts_device_count(void)
{
	int n = 0;
	return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

EXPORT ts_stream ts_stream_create(int dev)
{
	int prev = 0;
	cudaStream_t s = NULL;
	cudaGetDevice(&prev);
	cudaSetDevice(dev);
	if (cudaStreamCreate(&s) != cudaSuccess)
		s = NULL;
	cudaSetDevice(prev);
	return (ts_stream)s;
}

EXPORT void ts_stream_destroy(ts_stream s) { cudaStreamDestroy((cudaStream_t)s); }
