/* Stand-in for libc10.so: the two profiler-report functions that
 * libc10_cuda's caching allocator calls through its PLT, under their C++
 * mangled names:
 *   void c10::reportMemoryUsageToProfiler(void *ptr, int64_t alloc_size,
 *        size_t total_allocated, size_t total_reserved, c10::Device device)
 *   void c10::reportOutOfMemoryToProfiler(int64_t alloc_size,
 *        size_t total_allocated, size_t total_reserved, c10::Device device)
 * c10::Device is {int8_t type; int8_t index;}, passed by value (one register).
 *
 * Like torch.profiler, which depends on these calls, the stand-in counts every
 * call and folds its arguments into a checksum; the allocator computes the
 * same checksum over what it passed (standin_alloc_*), so a test can prove an
 * interposer forwarded every call with its arguments intact.
 */
#include "standin.h"

#define EXPORT __attribute__((visibility("default")))

static uint64_t n_reports, n_ooms, sum_reports, sum_ooms;

EXPORT void report_memory_usage(void *ptr, int64_t size, size_t total_allocated, size_t total_reserved,
				struct c10_device dev) __asm__("_ZN3c1027reportMemoryUsageToProfilerEPvlmmNS_6DeviceE");
EXPORT void report_out_of_memory(int64_t size, size_t total_allocated, size_t total_reserved,
				 struct c10_device dev) __asm__("_ZN3c1027reportOutOfMemoryToProfilerElmmNS_6DeviceE");

EXPORT void report_memory_usage(void *ptr, int64_t size, size_t total_allocated, size_t total_reserved,
				struct c10_device dev)
{
	uint64_t h = standin_report_hash((uintptr_t)ptr, size, total_allocated, total_reserved, dev);
	__atomic_add_fetch(&n_reports, 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&sum_reports, h, __ATOMIC_RELAXED);
}

EXPORT void report_out_of_memory(int64_t size, size_t total_allocated, size_t total_reserved, struct c10_device dev)
{
	uint64_t h = standin_report_hash(0, size, total_allocated, total_reserved, dev);
	__atomic_add_fetch(&n_ooms, 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&sum_ooms, h, __ATOMIC_RELAXED);
}

EXPORT uint64_t standin_c10_reports(void) { return __atomic_load_n(&n_reports, __ATOMIC_RELAXED); }
EXPORT uint64_t standin_c10_report_sum(void) { return __atomic_load_n(&sum_reports, __ATOMIC_RELAXED); }
EXPORT uint64_t standin_c10_ooms(void) { return __atomic_load_n(&n_ooms, __ATOMIC_RELAXED); }
EXPORT uint64_t standin_c10_oom_sum(void) { return __atomic_load_n(&sum_ooms, __ATOMIC_RELAXED); }
