/* PyTorch's caching allocator: libc10_cuda.so calls these two c10 functions
 * through its PLT on every block allocation (size > 0), free (size < 0) and
 * OOM, carrying the allocator's running totals.  Our definitions come first
 * in the global scope; the originals live in libc10.so, which torch loads
 * RTLD_LOCAL, so they are found through libc10.so's own handle
 * (dlsym(RTLD_NEXT) returns NULL there).  The original is always called:
 * torch.profiler's memory events depend on it.  The hook runs inside the
 * allocator's mutex and never holds the GIL: Python frames are read without
 * it (pyframes.c). */
#include <stdint.h>
#include <stddef.h>

#include "format.h"
#include "preload.h"

#define C10 "/libc10.so"

struct c10_device { /* c10::Device: passed by value in one register */
	int8_t type;  /* c10::DeviceType; 1 = CUDA */
	int8_t index;
};

#define REPORT_SYM "_ZN3c1027reportMemoryUsageToProfilerEPvlmmNS_6DeviceE"
#define OOM_SYM "_ZN3c1027reportOutOfMemoryToProfilerElmmNS_6DeviceE"

DSMT_EXPORT void dsmt_report_usage(void *ptr, int64_t size, size_t total_allocated, size_t total_reserved,
				   struct c10_device dev) __asm__(REPORT_SYM);
DSMT_EXPORT void dsmt_report_oom(int64_t alloc_size, size_t total_allocated, size_t total_reserved,
				 struct c10_device dev) __asm__(OOM_SYM);

void dsmt_report_usage(void *ptr, int64_t size, size_t total_allocated, size_t total_reserved, struct c10_device dev)
{
	if (dev.type == 1 && size != 0) {
		dsmt_note_totals(dev.index, total_allocated, total_reserved);
		uint64_t tot[2] = {total_allocated, total_reserved};
		uint64_t n = size > 0 ? (uint64_t)size : (uint64_t)-size;
		DSMT_RECORD(dsmt_ev_mem_py(size > 0 ? DSMT_REC_ALLOC : DSMT_REC_FREE, DSMT_API_TORCH, dev.index,
					   (uintptr_t)ptr, n, 0, __builtin_return_address(0), tot, DSMT_PY_NOGIL));
	}
	__typeof__(&dsmt_report_usage) f = DSMT_REAL_NAMED(dsmt_report_usage, REPORT_SYM, C10);
	if (f)
		f(ptr, size, total_allocated, total_reserved, dev);
}

void dsmt_report_oom(int64_t alloc_size, size_t total_allocated, size_t total_reserved, struct c10_device dev)
{
	if (dev.type == 1)
		DSMT_RECORD(dsmt_ev_oom_py(dev.index, alloc_size > 0 ? (uint64_t)alloc_size : 0, total_allocated,
					   total_reserved, __builtin_return_address(0), DSMT_PY_NOGIL));
	__typeof__(&dsmt_report_oom) f = DSMT_REAL_NAMED(dsmt_report_oom, OOM_SYM, C10);
	if (f)
		f(alloc_size, total_allocated, total_reserved, dev);
}
