/* Private interface between the stand-in libcuda.so.1 (fake_cuda.c) and the
 * stand-in libcupti.so.13 (fake_cupti.c); not an API of the real libraries.
 *
 * The real CUPTI hooks itself into the driver through private export tables.
 * The stand-in does it with one exported function of libcuda:
 *   void standin_cupti_attach(const struct standin_cupti_ops *ops);
 * libcupti calls it (after dlopen("libcuda.so.1")) when it is first used;
 * from then on libcuda calls ops->api at every driver API enter and exit
 * (and for resource events), and ops->memory / ops->pool for what CUPTI's
 * MEMORY2 and MEMORY_POOL activity kinds report.  libcupti decides what is
 * enabled and who gets it.  attach(NULL) detaches.
 */
#ifndef STANDIN_CUPTI_H
#define STANDIN_CUPTI_H
#include <cuda.h>
#include <cupti_callbacks.h>
#include <stdint.h>

struct standin_mem_event {
	int op;   /* CUpti_ActivityMemoryOperationType */
	int kind; /* CUpti_ActivityMemoryKind */
	uint64_t address, bytes;
	uint32_t device, context_id, correlation_id, stream_id;
	int is_async;
	uint64_t pool; /* the pool an async allocation came from, 0 none */
	int pool_type; /* CUpti_ActivityMemoryPoolType */
};

struct standin_pool_event {
	int op; /* CUpti_ActivityMemoryPoolOperationType */
	uint32_t device, correlation_id;
	uint64_t address, size, min_bytes_to_keep;
};

struct standin_cupti_ops {
	/* domain DRIVER_API: cbdata is a CUpti_CallbackData; RESOURCE: CUpti_ResourceData */
	void (*api)(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void *cbdata);
	void (*memory)(const struct standin_mem_event *ev);
	void (*pool)(const struct standin_pool_event *ev);
};

typedef void (*standin_cupti_attach_fn)(const struct standin_cupti_ops *ops);
/* device of a context (NULL: the calling thread's current one), -1 if none */
typedef int (*standin_ctx_device_fn)(CUcontext ctx);
#endif
