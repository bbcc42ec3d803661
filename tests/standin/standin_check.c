/* Checks that the stand-ins link and resolve like the real libraries, and
 * that the stand-in caching allocator keeps torch's rules (known numbers).
 * Usage: standin_check STANDIN_LIBDIR   (run with STANDIN_DEVICE_MEM=256 MiB)
 */
#include "torchstub.h"

#include <cuda.h>
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MiB (1024ull * 1024)
static int failures;
#define CHECK(c)                                                                   \
	do {                                                                       \
		if (!(c)) {                                                        \
			fprintf(stderr, "standin_check:%d: FAILED: %s\n", __LINE__, #c); \
			failures++;                                                \
		}                                                                  \
	} while (0)
#define EQ(a, b)                                                                                   \
	do {                                                                                       \
		unsigned long long a_ = (a), b_ = (b);                                             \
		if (a_ != b_) {                                                                    \
			fprintf(stderr, "standin_check:%d: FAILED: %s == %llu, expected %llu\n", \
				__LINE__, #a, a_, b_);                                             \
			failures++;                                                        \
		}                                                                          \
	} while (0)

static const char *libdir;

static int loaded_from_libdir(void *h)
{
	struct link_map *lm = NULL;
	if (dlinfo(h, RTLD_DI_LINKMAP, &lm) || !lm)
		return 0;
	char *real = realpath(lm->l_name, NULL), *dir = realpath(libdir, NULL);
	int ok = real && dir && !strncmp(real, dir, strlen(dir));
	if (!ok)
		fprintf(stderr, "standin_check: %s is not under %s\n", lm->l_name, libdir);
	free(real);
	free(dir);
	return ok;
}

#define TS_PTR(ret, name, args) static ret(*p_##name) args;
TS_FUNCTIONS(TS_PTR)
#define ts_alloc p_ts_alloc
#define ts_free p_ts_free
#define ts_record_stream p_ts_record_stream
#define ts_stream_sync p_ts_stream_sync
#define ts_empty_cache p_ts_empty_cache
#define ts_memory_allocated p_ts_memory_allocated
#define ts_max_memory_allocated p_ts_max_memory_allocated
#define ts_memory_reserved p_ts_memory_reserved
#define ts_max_memory_reserved p_ts_max_memory_reserved
#define ts_num_ooms p_ts_num_ooms
#define ts_reset_peak p_ts_reset_peak
#define ts_stream_create p_ts_stream_create
#define ts_device_count p_ts_device_count

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: standin_check STANDIN_LIBDIR\n");
		return 2;
	}
	libdir = argv[1];

	/* linkage, as under torch (libtorch_global_deps loads cudart GLOBAL) */
	void *rt = dlopen("libcudart.so.13", RTLD_NOW | RTLD_GLOBAL);
	CHECK(rt && loaded_from_libdir(rt));
	CHECK(dlvsym(rt, "cudaMalloc", "libcudart.so.13") != NULL);
	CHECK(dlsym(rt, "load_driver") == NULL); /* version script: cuda* only */
	void *th = dlopen("libtorchstub.so", RTLD_NOW | RTLD_LOCAL);
	if (!th) {
		fprintf(stderr, "standin_check: %s\n", dlerror());
		return 1;
	}
	CHECK(loaded_from_libdir(th));
#define TS_LOAD(ret, name, args) CHECK((*(void **)&p_##name = dlsym(th, #name)) != NULL);
	TS_FUNCTIONS(TS_LOAD)
	if (failures)
		return 1;
	const char *report = "_ZN3c1027reportMemoryUsageToProfilerEPvlmmNS_6DeviceE";
	CHECK(dlsym(RTLD_DEFAULT, report) == NULL); /* libc10.so is local */
	CHECK(dlsym(th, report) != NULL);           /* but in torch's own scope */
	CHECK(dlsym(RTLD_DEFAULT, "cudaMalloc") != NULL);
	void *c10 = dlopen("libc10.so", RTLD_NOW | RTLD_NOLOAD);
	CHECK(c10 && loaded_from_libdir(c10));
	uint64_t (*c10_reports)(void) = (uint64_t(*)(void))dlsym(th, "standin_c10_reports");
	uint64_t (*alloc_reports)(void) = (uint64_t(*)(void))dlsym(th, "standin_alloc_reports");
	uint64_t (*c10_sum)(void) = (uint64_t(*)(void))dlsym(th, "standin_c10_report_sum");
	uint64_t (*alloc_sum)(void) = (uint64_t(*)(void))dlsym(th, "standin_alloc_report_sum");
	CHECK(c10_reports && alloc_reports && c10_sum && alloc_sum);
	if (failures)
		return 1;

	EQ(ts_device_count(), 2);
	/* the driver is loaded by cudart, locally, and handed out by pointer */
	CHECK(dlsym(RTLD_DEFAULT, "cuMemAlloc_v2") == NULL);
	void *cu = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
	CHECK(cu && loaded_from_libdir(cu));
	if (cu) {
		CUresult (*gpa)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *) =
			(CUresult(*)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *))dlsym(
				cu, "cuGetProcAddress_v2");
		void *fn = NULL;
		CUdriverProcAddressQueryResult st;
		CHECK(gpa && gpa("cuMemAlloc", &fn, 13000, 0, &st) == CUDA_SUCCESS);
		CHECK(fn && fn == dlsym(cu, "cuMemAlloc_v2"));
		CHECK(gpa && gpa("cuMemAllocAsync", &fn, 13000, 2, &st) == CUDA_SUCCESS &&
		      fn == dlsym(cu, "cuMemAllocAsync_ptsz"));
		CHECK(gpa && gpa("cuNoSuchThing", &fn, 13000, 0, &st) != CUDA_SUCCESS && !fn &&
		      st == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
	}
	int (*cuda_malloc)(void **, size_t) = (int (*)(void **, size_t))dlsym(rt, "cudaMalloc");
	int (*cuda_free)(void *) = (int (*)(void *))dlsym(rt, "cudaFree");
	void *big = NULL;
	EQ(cuda_malloc(&big, 300 * MiB), 2); /* cudaErrorMemoryAllocation */

	/* allocator rules, device 0 (capacity 256 MiB) */
	void *a = ts_alloc(1000, 0, NULL); /* small: 1024 bytes of a 2 MiB segment */
	EQ(ts_memory_allocated(0), 1024);
	EQ(ts_memory_reserved(0), 2 * MiB);
	void *b = ts_alloc(3 * MiB, 0, NULL); /* large: 20 MiB segment */
	EQ(ts_memory_allocated(0), 1024 + 3 * MiB);
	EQ(ts_memory_reserved(0), 22 * MiB);
	ts_free(b);
	void *b2 = ts_alloc(3 * MiB, 0, NULL); /* reuse (coalesced back, best fit) */
	CHECK(b2 == b);
	EQ(ts_memory_reserved(0), 22 * MiB);
	void *c9 = ts_alloc(9 * MiB, 0, NULL); /* best fit: the 17 MiB remainder */
	EQ(ts_memory_reserved(0), 22 * MiB);
	ts_free(c9);
	void *c = ts_alloc(18 * MiB + 1, 0, NULL); /* >= 10 MiB: new 20 MiB segment */
	EQ(ts_memory_reserved(0), 42 * MiB);
	EQ(ts_memory_allocated(0), 1024 + 3 * MiB + 18 * MiB + 512);
	EQ(ts_max_memory_allocated(0), 1024 + 3 * MiB + 18 * MiB + 512);
	ts_free(c);
	ts_free(b2);
	EQ(ts_memory_allocated(0), 1024);
	EQ(ts_max_memory_allocated(0), 1024 + 3 * MiB + 18 * MiB + 512);
	ts_reset_peak(0);
	EQ(ts_max_memory_allocated(0), 1024);
	EQ(ts_max_memory_reserved(0), 42 * MiB);
	ts_empty_cache(0);
	EQ(ts_memory_reserved(0), 2 * MiB); /* the small segment is still in use */
	/* a remainder <= 1 MiB of a large block is not split: the whole block counts */
	void *d = ts_alloc(20 * MiB - 512 * 1024, 0, NULL);
	EQ(ts_memory_allocated(0), 1024 + 20 * MiB);
	EQ(ts_memory_reserved(0), 22 * MiB);
	ts_free(d);
	/* record_stream: freed at once for the counters, reusable after the stream syncs */
	ts_stream s = ts_stream_create(0);
	CHECK(s != NULL);
	void *e = ts_alloc(4 * MiB, 0, NULL);
	CHECK(ts_record_stream(e, s) == 0);
	ts_free(e);
	EQ(ts_memory_allocated(0), 1024);
	void *f = ts_alloc(4 * MiB, 0, NULL);
	CHECK(f != e); /* still in use by stream s */
	ts_stream_sync(s);
	void *g = ts_alloc(4 * MiB, 0, NULL);
	CHECK(g == e);
	ts_free(f);
	ts_free(g);
	EQ(ts_memory_allocated(0), 1024);
	/* OOM: cached segments are released, then OOM is reported, NULL returned */
	void *keep = ts_alloc(100 * MiB, 0, NULL);
	CHECK(keep != NULL);
	ts_free(keep); /* cached: reserved stays */
	EQ(ts_memory_reserved(0), 122 * MiB);
	void *h = ts_alloc(200 * MiB, 0, NULL);
	CHECK(h != NULL); /* fits only after the cache was released */
	EQ(ts_memory_reserved(0), 202 * MiB);
	EQ(ts_num_ooms(0), 0);
	void *x = ts_alloc(100 * MiB, 0, NULL);
	CHECK(x == NULL);
	EQ(ts_num_ooms(0), 1);
	ts_free(h);
	/* second device, and the current device is left alone */
	void *y = ts_alloc(5 * MiB, 1, NULL);
	EQ(ts_memory_allocated(1), 5 * MiB);
	EQ(ts_memory_reserved(1), 20 * MiB);
	EQ(ts_memory_allocated(0), 1024);
	int (*get_device)(int *) = (int (*)(int *))dlsym(rt, "cudaGetDevice");
	int cur = -1;
	get_device(&cur);
	EQ(cur, 0);
	ts_free(y);
	ts_free(a);
	ts_empty_cache(-1);
	EQ(ts_memory_reserved(0), 0);
	EQ(ts_memory_reserved(1), 0);
	/* every report reached libc10 with its arguments */
	EQ(c10_reports(), alloc_reports());
	EQ(c10_sum(), alloc_sum());
	CHECK(c10_reports() > 10);
	(void)cuda_free;
	if (failures)
		return 1;
	printf("standin_check: ok\n");
	return 0;
}
