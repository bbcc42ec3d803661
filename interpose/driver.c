/* Driver entry points.  A preloaded cuMemAlloc_v2 alone sees nothing:
 * libcudart, NCCL's static cudart and cuBLAS fetch the driver's functions
 * with dlsym(libcuda, ...) and cuGetProcAddress(_v2) (MECHANICS.md 2.2).  So
 * we interpose dlsym: a lookup of one of the driver functions below, or of
 * cuGetProcAddress itself, returns our wrapper, and our cuGetProcAddress
 * swaps the pointer it hands out for our wrapper when the pointer is one of
 * those functions (compared by identity with libcuda's exports, so the
 * (name, version, flags) -> variant mapping stays the driver's).  The same
 * wrappers are exported under the real names for code that links -lcuda.
 *
 * Every other dlsym is a tail call into glibc's: dlsym(RTLD_NEXT, ...)
 * looks at the caller's return address, which a tail call leaves alone
 * (checked by the dlsym_next test). */
#include <cuda.h>
#include <dlfcn.h>
#include <cupti.h> /* CUPTI ids and the generated_cuda_meta.h parameter structs */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "driver.h"
#include "format.h"
#include "preload.h"

#undef cuGetProcAddress

int dsmt_no_dlsym, dsmt_no_cupti;

/* ---- the real dlsym ---- */

typedef void *(*dlsym_fn)(void *, const char *);
static _Atomic(dlsym_fn) real_dlsym_p;

static __attribute__((noinline, cold)) dlsym_fn real_dlsym_slow(void)
{
	void *f = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
	if (!f)
		f = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
	atomic_store_explicit(&real_dlsym_p, (dlsym_fn)f, memory_order_release);
	return (dlsym_fn)f;
}

static inline dlsym_fn real_dlsym(void)
{
	dlsym_fn f = atomic_load_explicit(&real_dlsym_p, memory_order_acquire);
	return __builtin_expect(f != NULL, 1) ? f : real_dlsym_slow();
}

void *dsmt_real_dlsym(void *h, const char *s)
{
	dlsym_fn f = real_dlsym();
	return f ? f(h, s) : NULL;
}

/* ---- the wrapped functions ---- */

#define UNPAREN(...) __VA_ARGS__
/* X(name, (parameters), (arguments)); the CUPTI params struct of each has
 * the arguments in order, so it is initialised from them */
#define DRV_FUNCS(X)                                                                                       \
	X(cuMemAlloc_v2, (CUdeviceptr * dptr, size_t bytesize), (dptr, bytesize))                          \
	X(cuMemAllocPitch_v2,                                                                              \
	  (CUdeviceptr * dptr, size_t * pPitch, size_t WidthInBytes, size_t Height, unsigned int ElementSizeBytes), \
	  (dptr, pPitch, WidthInBytes, Height, ElementSizeBytes))                                          \
	X(cuMemFree_v2, (CUdeviceptr dptr), (dptr))                                                        \
	X(cuMemAllocManaged, (CUdeviceptr * dptr, size_t bytesize, unsigned int flags), (dptr, bytesize, flags)) \
	X(cuMemAllocHost_v2, (void **pp, size_t bytesize), (pp, bytesize))                                 \
	X(cuMemHostAlloc, (void **pp, size_t bytesize, unsigned int Flags), (pp, bytesize, Flags))         \
	X(cuMemFreeHost, (void *p), (p))                                                                   \
	X(cuMemHostRegister_v2, (void *p, size_t bytesize, unsigned int Flags), (p, bytesize, Flags))      \
	X(cuMemHostUnregister, (void *p), (p))                                                             \
	X(cuMemAllocAsync, (CUdeviceptr * dptr, size_t bytesize, CUstream hStream), (dptr, bytesize, hStream)) \
	X(cuMemAllocAsync_ptsz, (CUdeviceptr * dptr, size_t bytesize, CUstream hStream), (dptr, bytesize, hStream)) \
	X(cuMemAllocFromPoolAsync, (CUdeviceptr * dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream), \
	  (dptr, bytesize, pool, hStream))                                                                 \
	X(cuMemAllocFromPoolAsync_ptsz, (CUdeviceptr * dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream), \
	  (dptr, bytesize, pool, hStream))                                                                 \
	X(cuMemFreeAsync, (CUdeviceptr dptr, CUstream hStream), (dptr, hStream))                           \
	X(cuMemFreeAsync_ptsz, (CUdeviceptr dptr, CUstream hStream), (dptr, hStream))                      \
	X(cuMemCreate,                                                                                     \
	  (CUmemGenericAllocationHandle * handle, size_t size, const CUmemAllocationProp *prop, unsigned long long flags), \
	  (handle, size, prop, flags))                                                                     \
	X(cuMemRelease, (CUmemGenericAllocationHandle handle), (handle))                                   \
	X(cuMemRetainAllocationHandle, (CUmemGenericAllocationHandle * handle, void *addr), (handle, addr)) \
	X(cuMemMap,                                                                                        \
	  (CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle, unsigned long long flags), \
	  (ptr, size, offset, handle, flags))                                                              \
	X(cuMemUnmap, (CUdeviceptr ptr, size_t size), (ptr, size))                                         \
	X(cuMemSetAccess, (CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count),       \
	  (ptr, size, desc, count))                                                                        \
	X(cuMemAddressReserve,                                                                             \
	  (CUdeviceptr * ptr, size_t size, size_t alignment, CUdeviceptr addr, unsigned long long flags),   \
	  (ptr, size, alignment, addr, flags))                                                             \
	X(cuMemAddressFree, (CUdeviceptr ptr, size_t size), (ptr, size))                                   \
	X(cuMemImportFromShareableHandle,                                                                  \
	  (CUmemGenericAllocationHandle * handle, void *osHandle, CUmemAllocationHandleType shHandleType), \
	  (handle, osHandle, shHandleType))                                                                \
	X(cuIpcOpenMemHandle_v2, (CUdeviceptr * pdptr, CUipcMemHandle handle, unsigned int Flags),         \
	  (pdptr, handle, Flags))                                                                          \
	X(cuIpcCloseMemHandle, (CUdeviceptr dptr), (dptr))                                                 \
	X(cuMemPoolCreate, (CUmemoryPool * pool, const CUmemPoolProps *poolProps), (pool, poolProps))      \
	X(cuMemPoolDestroy, (CUmemoryPool pool), (pool))                                                   \
	X(cuMemPoolTrimTo, (CUmemoryPool pool, size_t minBytesToKeep), (pool, minBytesToKeep))

enum {
#define X(name, params, args) W_##name,
	DRV_FUNCS(X)
#undef X
	W_GPA2, /* cuGetProcAddress_v2 */
	W_GPA1, /* cuGetProcAddress (the 4-argument ABI) */
	W_N
};

/* prototypes of the wrappers (cuda.h declares most; the _ptsz ones only
 * under CUDA_API_PER_THREAD_DEFAULT_STREAM) */
#define X(name, params, args) DSMT_EXPORT CUresult CUDAAPI name params;
DRV_FUNCS(X)
#undef X
DSMT_EXPORT CUresult CUDAAPI cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
						 CUdriverProcAddressQueryResult *symbolStatus);
DSMT_EXPORT CUresult CUDAAPI cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags);

static const char *const wname[W_N] = {
#define X(name, params, args) #name,
	DRV_FUNCS(X)
#undef X
	"cuGetProcAddress_v2", "cuGetProcAddress",
};

static void *const wfn[W_N] = {
#define X(name, params, args) (void *)name,
	DRV_FUNCS(X)
#undef X
	(void *)cuGetProcAddress_v2, (void *)cuGetProcAddress,
};

/* libcuda's own functions, filled from its handle */
static _Atomic(void *) wreal[W_N];
static _Atomic(void *) cuda_handle;
static _Atomic int reals_filled;

static void *cuda_lib(void)
{
	void *h = atomic_load_explicit(&cuda_handle, memory_order_acquire);
	if (h)
		return h;
	int saved = dsmt_in_hook;
	dsmt_in_hook = 1;
	h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
	dsmt_in_hook = saved;
	if (h) /* keeps the reference: libcuda is never unloaded while in use */
		atomic_store_explicit(&cuda_handle, h, memory_order_release);
	return h;
}

static int is_ours(const void *p)
{
	for (int i = 0; i < W_N; i++)
		if (wfn[i] == p)
			return 1;
	return 0;
}

void *dsmt_cuda_sym(const char *name)
{
	void *h = cuda_lib();
	if (!h)
		return NULL;
	void *p = dsmt_real_dlsym(h, name);
	return p && !is_ours(p) ? p : NULL;
}

/* The real function for wrapper i (NULL: libcuda not loaded / no such). */
static void *real_of(int i)
{
	void *p = atomic_load_explicit(&wreal[i], memory_order_acquire);
	if (__builtin_expect(p != NULL, 1))
		return p;
	p = dsmt_cuda_sym(wname[i]);
	if (p) {
		void *expect = NULL;
		if (!atomic_compare_exchange_strong(&wreal[i], &expect, p))
			p = expect;
	}
	return p;
}

static void fill_reals(void)
{
	if (atomic_load_explicit(&reals_filled, memory_order_acquire))
		return;
	if (!cuda_lib())
		return;
	for (int i = 0; i < W_N; i++)
		real_of(i);
	atomic_store_explicit(&reals_filled, 1, memory_order_release);
}

/* Our wrapper for the driver function at p, or p itself. */
static void *wrap_identity(void *p)
{
	fill_reals();
	for (int i = 0; i < W_N; i++)
		if (atomic_load_explicit(&wreal[i], memory_order_relaxed) == p)
			return wfn[i];
	return p;
}

/* ---- dlsym ---- */

static __attribute__((noinline)) void *dlsym_cu(dlsym_fn f, void *h, const char *s)
{
	void *r = f(h, s);
	if (!r || dsmt_no_dlsym)
		return r;
	int i;
	for (i = 0; i < W_N; i++)
		if (!strcmp(s, wname[i]))
			break;
	if (i == W_N || r == wfn[i])
		return r;
	if (h != RTLD_DEFAULT && !atomic_load_explicit(&cuda_handle, memory_order_relaxed) &&
	    (i == W_GPA2 || i == W_GPA1)) {
		/* the handle libcudart / NCCL / cuBLAS opened libcuda with */
		void *expect = NULL;
		atomic_compare_exchange_strong(&cuda_handle, &expect, h);
	}
	void *expect = NULL;
	if (!atomic_compare_exchange_strong(&wreal[i], &expect, r) && expect != r)
		return r; /* another library's function of that name: not ours to wrap */
	return wfn[i];
}

/* Built at -O2 whatever the build type: the pass-through must stay a
 * sibling call (jmp), or RTLD_NEXT lookups of our callers would start after
 * libdsmemtrace instead of after them. */
DSMT_EXPORT __attribute__((optimize("O2", "omit-frame-pointer"))) void *dlsym(void *restrict h,
									      const char *restrict s)
{
	dlsym_fn f = real_dlsym();
	if (__builtin_expect(s[0] == 'c' && s[1] == 'u' && h != RTLD_NEXT, 0))
		return dlsym_cu(f, h, s);
	return f(h, s);
}

/* ---- cuGetProcAddress ---- */

typedef CUresult (*gpa2_fn)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
typedef CUresult (*gpa1_fn)(const char *, void **, int, cuuint64_t);

CUresult CUDAAPI cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
				     CUdriverProcAddressQueryResult *symbolStatus)
{
	gpa2_fn f = (gpa2_fn)real_of(W_GPA2);
	if (!f)
		return CUDA_ERROR_NOT_INITIALIZED;
	CUresult r = f(symbol, pfn, cudaVersion, flags, symbolStatus);
	if (r == CUDA_SUCCESS && pfn && *pfn && !dsmt_no_dlsym)
		*pfn = wrap_identity(*pfn);
	return r;
}

CUresult CUDAAPI cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
	gpa1_fn f = (gpa1_fn)real_of(W_GPA1);
	if (!f)
		return CUDA_ERROR_NOT_INITIALIZED;
	CUresult r = f(symbol, pfn, cudaVersion, flags);
	if (r == CUDA_SUCCESS && pfn && *pfn && !dsmt_no_dlsym)
		*pfn = wrap_identity(*pfn);
	return r;
}

/* ---- the wrappers ---- */

static pthread_once_t lazy_once = PTHREAD_ONCE_INIT;

/* Before the real call: takes the call context; records a free-like call
 * now unless CUPTI (ours) will record it at API enter. */
static void drv_before(unsigned cbid, const void *params, struct dsmt_cc *saved, const void *site)
{
	pthread_once(&lazy_once, dsmt_cupti_lazy_init);
	*saved = dsmt_cc;
	if (!dsmt_cc.site)
		dsmt_cc.site = site;
	dsmt_cc.in_drv = 1;
	dsmt_cc.done = 0;
	if (!dsmt_no_dlsym && dsmt_drv_at_enter(cbid) == 1 &&
	    !atomic_load_explicit(&dsmt_cupti_live, memory_order_acquire)) {
		dsmt_drv_record(cbid, params, DSMT_VIA_DLSYM, -2);
		dsmt_cc.done = 1;
	}
}

/* After it: records what CUPTI did not (unless DSMEMTRACE_NO_DLSYM: then the
 * exported wrappers only forward, and give CUPTI the call site). */
static void drv_after(unsigned cbid, const void *params, CUresult r, const struct dsmt_cc *saved)
{
	if (!dsmt_cc.done && !dsmt_no_dlsym) {
		int at = dsmt_drv_at_enter(cbid);
		if (at == 1 || (at == 0 && r == CUDA_SUCCESS))
			dsmt_drv_record(cbid, params, DSMT_VIA_DLSYM, -2);
	}
	dsmt_cc = *saved;
}

#define X(name, params, args)                                                          \
	CUresult CUDAAPI name params                                                   \
	{                                                                              \
		typedef CUresult(CUDAAPI * fn_t) params;                               \
		fn_t f = (fn_t)real_of(W_##name);                                      \
		if (!f)                                                                \
			return CUDA_ERROR_NOT_INITIALIZED;                             \
		name##_params p_ = {UNPAREN args};                                     \
		struct dsmt_cc sv_;                                                    \
		drv_before(CUPTI_DRIVER_TRACE_CBID_##name, &p_, &sv_, __builtin_return_address(0)); \
		CUresult r_ = f args;                                                  \
		drv_after(CUPTI_DRIVER_TRACE_CBID_##name, &p_, r_, &sv_);              \
		return r_;                                                             \
	}
DRV_FUNCS(X)
#undef X

void dsmt_driver_config(void)
{
	const char *e = secure_getenv("DSMEMTRACE_NO_DLSYM");
	dsmt_no_dlsym = e && *e && strcmp(e, "0") != 0;
	e = secure_getenv("DSMEMTRACE_CUPTI");
	dsmt_no_cupti = e && !strcmp(e, "0");
	real_dlsym();
}
