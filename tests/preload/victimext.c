/* libvictimext.so: an extension library (think of a custom CUDA op) that
 * links libcudart.so.13 and calls the runtime directly through its PLT.  None
 * of this memory belongs to torch's caching allocator: it must never show up
 * in the reserved numbers, whatever the tracer records about it. */
#include <cuda_runtime_api.h>
#include <stdlib.h>

#define EXPORT __attribute__((visibility("default")))
#define MiB (1024ul * 1024)

static void *workspace, *managed, *pinned, *pinned2, *registered;

EXPORT int victimext_init(void)
{
	void *tmp = NULL;
	int prev = 0;
	if (cudaGetDevice(&prev) || cudaSetDevice(0))
		return -1;
	if (cudaMalloc(&workspace, 8 * MiB))               /* a cuBLAS-like workspace */
		return -1;
	if (cudaMallocAsync(&tmp, 4 * MiB + 4096, NULL) || cudaFreeAsync(tmp, NULL))
		return -1;
	if (cudaMallocManaged(&managed, 2 * MiB, cudaMemAttachGlobal))
		return -1;
	if (cudaHostAlloc(&pinned, 1 * MiB, cudaHostAllocDefault) || cudaMallocHost(&pinned2, 64 * 1024))
		return -1;
	registered = aligned_alloc(4096, 256 * 1024);
	if (!registered || cudaHostRegister(registered, 256 * 1024, cudaHostRegisterDefault))
		return -1;
	return cudaSetDevice(prev) ? -1 : 0;
}

EXPORT int victimext_release(void)
{
	int bad = 0;
	bad |= cudaHostUnregister(registered) != cudaSuccess;
	free(registered);
	bad |= cudaFreeHost(pinned2) != cudaSuccess;
	bad |= cudaFreeHost(pinned) != cudaSuccess;
	bad |= cudaFree(managed) != cudaSuccess;
	bad |= cudaFree(workspace) != cudaSuccess;
	return bad ? -1 : 0;
}
