/* What each driver memory API means to the trace: one switch over CUPTI's
 * callback ids, used by the CUPTI callback and by our entry-point wrappers
 * (both hand over the generated_cuda_meta.h parameter struct). */
#include <cuda.h>
#include <cupti.h> /* CUPTI ids and the generated_cuda_meta.h parameter structs */
#include <stdint.h>

#include "driver.h"
#include "format.h"
#include "preload.h"

__thread struct dsmt_cc dsmt_cc DSMT_TLS;

#define CB(name) CUPTI_DRIVER_TRACE_CBID_##name
#define P(type) const type##_params *p = params

int dsmt_drv_at_enter(unsigned cbid)
{
	switch (cbid) {
	case CB(cuMemFree_v2):
	case CB(cuMemFreeHost):
	case CB(cuMemHostUnregister):
	case CB(cuMemFreeAsync):
	case CB(cuMemFreeAsync_ptsz):
	case CB(cuMemRelease):
	case CB(cuMemUnmap):
	case CB(cuMemAddressFree):
	case CB(cuIpcCloseMemHandle):
	case CB(cuMemPoolDestroy):
		return 1;
	case CB(cuMemAlloc_v2):
	case CB(cuMemAllocPitch_v2):
	case CB(cuMemAllocManaged):
	case CB(cuMemAllocHost_v2):
	case CB(cuMemHostAlloc):
	case CB(cuMemHostRegister_v2):
	case CB(cuMemAllocAsync):
	case CB(cuMemAllocAsync_ptsz):
	case CB(cuMemAllocFromPoolAsync):
	case CB(cuMemAllocFromPoolAsync_ptsz):
	case CB(cuMemCreate):
	case CB(cuMemRetainAllocationHandle):
	case CB(cuMemMap):
	case CB(cuMemSetAccess):
	case CB(cuMemAddressReserve):
	case CB(cuMemImportFromShareableHandle):
	case CB(cuIpcOpenMemHandle_v2):
	case CB(cuMemPoolCreate):
	case CB(cuMemPoolTrimTo):
		return 0;
	default:
		return -1;
	}
}

typedef CUresult (*ctx_get_device_fn)(CUdevice *);
typedef CUresult (*get_range_fn)(CUdeviceptr *, size_t *, CUdeviceptr);

static int ctx_device(void)
{
	static _Atomic(ctx_get_device_fn) f;
	ctx_get_device_fn g = atomic_load_explicit(&f, memory_order_relaxed);
	if (!g) {
		g = (ctx_get_device_fn)dsmt_cuda_sym("cuCtxGetDevice");
		if (!g)
			return -1;
		atomic_store_explicit(&f, g, memory_order_relaxed);
	}
	CUdevice d = -1;
	return g(&d) == CUDA_SUCCESS ? (int)d : -1;
}

static int loc_device(const CUmemLocation *l)
{
	return l && l->type == CU_MEM_LOCATION_TYPE_DEVICE ? l->id : -1;
}

int dsmt_drv_record(unsigned cbid, const void *params, uint8_t via, int dev)
{
	uint8_t op = 0;
	uint64_t ptr = 0, size = 0, aux = 0;
	int need_dev = 0; /* the event's device is the calling context's */
	int host = 0;     /* host memory: no device */
	if (!params)
		return 0;
	switch (cbid) {
	case CB(cuMemAlloc_v2): {
		P(cuMemAlloc_v2);
		op = DSMT_DRV_ALLOC, ptr = p->dptr ? *p->dptr : 0, size = p->bytesize, need_dev = 1;
		break;
	}
	case CB(cuMemAllocPitch_v2): {
		P(cuMemAllocPitch_v2);
		op = DSMT_DRV_ALLOC, ptr = p->dptr ? *p->dptr : 0;
		size = (p->pPitch ? *p->pPitch : p->WidthInBytes) * p->Height, need_dev = 1;
		break;
	}
	case CB(cuMemFree_v2): {
		P(cuMemFree_v2);
		op = DSMT_DRV_FREE, ptr = p->dptr;
		break;
	}
	case CB(cuMemAllocManaged): {
		P(cuMemAllocManaged);
		op = DSMT_DRV_ALLOC_MANAGED, ptr = p->dptr ? *p->dptr : 0, size = p->bytesize, aux = p->flags;
		need_dev = 1;
		break;
	}
	case CB(cuMemAllocHost_v2): {
		P(cuMemAllocHost_v2);
		op = DSMT_DRV_ALLOC_HOST, ptr = p->pp ? (uintptr_t)*p->pp : 0, size = p->bytesize;
		host = 1;
		break;
	}
	case CB(cuMemHostAlloc): {
		P(cuMemHostAlloc);
		op = DSMT_DRV_ALLOC_HOST, ptr = p->pp ? (uintptr_t)*p->pp : 0, size = p->bytesize, aux = p->Flags;
		host = 1;
		break;
	}
	case CB(cuMemFreeHost): {
		P(cuMemFreeHost);
		op = DSMT_DRV_FREE_HOST, ptr = (uintptr_t)p->p;
		host = 1;
		break;
	}
	case CB(cuMemHostRegister_v2): {
		P(cuMemHostRegister_v2);
		op = DSMT_DRV_HOST_REGISTER, ptr = (uintptr_t)p->p, size = p->bytesize, aux = p->Flags;
		host = 1;
		break;
	}
	case CB(cuMemHostUnregister): {
		P(cuMemHostUnregister);
		op = DSMT_DRV_HOST_UNREGISTER, ptr = (uintptr_t)p->p;
		host = 1;
		break;
	}
	case CB(cuMemAllocAsync):
	case CB(cuMemAllocAsync_ptsz): { /* same layout */
		P(cuMemAllocAsync);
		op = DSMT_DRV_ALLOC_ASYNC, ptr = p->dptr ? *p->dptr : 0, size = p->bytesize, need_dev = 1;
		break;
	}
	case CB(cuMemAllocFromPoolAsync):
	case CB(cuMemAllocFromPoolAsync_ptsz): {
		P(cuMemAllocFromPoolAsync);
		op = DSMT_DRV_ALLOC_ASYNC, ptr = p->dptr ? *p->dptr : 0, size = p->bytesize;
		aux = (uintptr_t)p->pool, need_dev = 1;
		break;
	}
	case CB(cuMemFreeAsync):
	case CB(cuMemFreeAsync_ptsz): {
		P(cuMemFreeAsync);
		op = DSMT_DRV_FREE_ASYNC, ptr = p->dptr;
		break;
	}
	case CB(cuMemCreate): {
		P(cuMemCreate);
		op = DSMT_DRV_CREATE, ptr = p->handle ? *p->handle : 0, size = p->size;
		aux = p->prop ? (uint64_t)p->prop->location.type : 0;
		dev = p->prop ? loc_device(&p->prop->location) : -1;
		break;
	}
	case CB(cuMemRelease): {
		P(cuMemRelease);
		op = DSMT_DRV_RELEASE, ptr = p->handle;
		break;
	}
	case CB(cuMemRetainAllocationHandle): {
		P(cuMemRetainAllocationHandle);
		op = DSMT_DRV_RETAIN, ptr = p->handle ? *p->handle : 0, aux = (uintptr_t)p->addr;
		break;
	}
	case CB(cuMemMap): {
		P(cuMemMap);
		op = DSMT_DRV_MAP, ptr = p->ptr, size = p->size, aux = p->handle;
		break;
	}
	case CB(cuMemUnmap): {
		P(cuMemUnmap);
		op = DSMT_DRV_UNMAP, ptr = p->ptr, size = p->size;
		break;
	}
	case CB(cuMemSetAccess): {
		P(cuMemSetAccess);
		op = DSMT_DRV_SET_ACCESS, ptr = p->ptr, size = p->size, aux = p->count;
		dev = p->desc && p->count ? loc_device(&p->desc[0].location) : -1;
		break;
	}
	case CB(cuMemAddressReserve): {
		P(cuMemAddressReserve);
		op = DSMT_DRV_RESERVE, ptr = p->ptr ? *p->ptr : 0, size = p->size;
		break;
	}
	case CB(cuMemAddressFree): {
		P(cuMemAddressFree);
		op = DSMT_DRV_ADDR_FREE, ptr = p->ptr, size = p->size;
		break;
	}
	case CB(cuMemImportFromShareableHandle): {
		P(cuMemImportFromShareableHandle);
		op = DSMT_DRV_IMPORT, ptr = p->handle ? *p->handle : 0, aux = (uint64_t)p->shHandleType;
		break;
	}
	case CB(cuIpcOpenMemHandle_v2): {
		P(cuIpcOpenMemHandle_v2);
		op = DSMT_DRV_IPC_OPEN, ptr = p->pdptr ? *p->pdptr : 0, need_dev = 1;
		get_range_fn g = (get_range_fn)dsmt_cuda_sym("cuMemGetAddressRange_v2");
		CUdeviceptr base = 0;
		size_t n = 0;
		if (g && ptr && g(&base, &n, (CUdeviceptr)ptr) == CUDA_SUCCESS)
			size = n;
		break;
	}
	case CB(cuIpcCloseMemHandle): {
		P(cuIpcCloseMemHandle);
		op = DSMT_DRV_IPC_CLOSE, ptr = p->dptr;
		break;
	}
	case CB(cuMemPoolCreate): {
		P(cuMemPoolCreate);
		op = DSMT_DRV_POOL_CREATE, ptr = p->pool ? (uintptr_t)*p->pool : 0;
		dev = p->poolProps ? loc_device(&p->poolProps->location) : -1;
		break;
	}
	case CB(cuMemPoolDestroy): {
		P(cuMemPoolDestroy);
		op = DSMT_DRV_POOL_DESTROY, ptr = (uintptr_t)p->pool;
		break;
	}
	case CB(cuMemPoolTrimTo): {
		P(cuMemPoolTrimTo);
		op = DSMT_DRV_POOL_TRIM, ptr = (uintptr_t)p->pool, size = p->minBytesToKeep;
		break;
	}
	default:
		return 0;
	}
	if (host)
		dev = -1;
	else if (!need_dev)
		dev = dev >= 0 ? dev : -1;
	else if (dev == -2)
		dev = ctx_device();
	if (dsmt_cc.rt)
		via |= DSMT_VIA_UNDER_RT;
	int did = 0;
	DSMT_RECORD((dsmt_ev_drv_py(op, via, dev, ptr, size, aux, dsmt_cc.site, DSMT_PY_NOGIL), did = 1));
	return did;
}
