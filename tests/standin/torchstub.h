/* API of the stand-in libtorchstub.so.  Programs dlopen it and fetch these
 * with dlsym; the typedefs below are for that (TS_FN lists every function). */
#ifndef TORCHSTUB_H
#define TORCHSTUB_H
#include <stddef.h>
#include <stdint.h>

typedef void *ts_stream; /* cudaStream_t; NULL = default stream */

#define TS_FUNCTIONS(X)                                         \
	X(void *, ts_alloc, (size_t size, int dev, ts_stream s)) \
	X(int, ts_free, (void *ptr))                             \
	X(int, ts_record_stream, (void *ptr, ts_stream s))       \
	X(void, ts_stream_sync, (ts_stream s))                   \
	X(void, ts_sync, (void))                                 \
	X(void, ts_empty_cache, (int dev))                       \
	X(uint64_t, ts_memory_allocated, (int dev))              \
	X(uint64_t, ts_max_memory_allocated, (int dev))          \
	X(uint64_t, ts_memory_reserved, (int dev))               \
	X(uint64_t, ts_max_memory_reserved, (int dev))           \
	X(uint64_t, ts_segments, (int dev))                      \
	X(uint64_t, ts_num_ooms, (int dev))                      \
	X(void, ts_reset_peak, (int dev))                        \
	X(int, ts_device_count, (void))                          \
	X(ts_stream, ts_stream_create, (int dev))                \
	X(void, ts_stream_destroy, (ts_stream s))

#define TS_DECLARE(ret, name, args) ret name args;
TS_FUNCTIONS(TS_DECLARE)
#undef TS_DECLARE
#endif
