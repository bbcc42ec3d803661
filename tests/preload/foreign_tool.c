/* A stand-in for another tool that injects itself the way Nsight Systems
 * does: named by CUDA_INJECTION64_PATH (libcuda calls InitializeInjection
 * during cuInit: it subscribes to CUPTI and enables the driver domain) and by
 * NVTX_INJECTION64_PATH (each NVTX instance calls InitializeInjectionNvtx2).
 * At exit it writes what it saw to $FOREIGN_TOOL_OUT as one JSON line:
 * {"subscribe": result, "callbacks": N, "nvtx_inits": N}. */
#include <cupti.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define EXPORT __attribute__((visibility("default")))

static int sub_result = -1;
static unsigned long callbacks, nvtx_inits;

static void CUPTIAPI on_cb(void *ud, CUpti_CallbackDomain dom, CUpti_CallbackId cbid, const void *data)
{
	(void)ud, (void)dom, (void)cbid, (void)data;
	__atomic_add_fetch(&callbacks, 1, __ATOMIC_RELAXED);
}

static void report(void)
{
	const char *out = getenv("FOREIGN_TOOL_OUT");
	FILE *f = out ? fopen(out, "w") : NULL;
	if (!f)
		return;
	fprintf(f, "{\"subscribe\": %d, \"callbacks\": %lu, \"nvtx_inits\": %lu}\n", sub_result, callbacks, nvtx_inits);
	fclose(f);
}

EXPORT int InitializeInjection(void)
{
	CUpti_SubscriberHandle h;
	sub_result = (int)cuptiSubscribe(&h, on_cb, NULL);
	if (sub_result == CUPTI_SUCCESS)
		cuptiEnableDomain(1, h, CUPTI_CB_DOMAIN_DRIVER_API);
	atexit(report);
	return 1;
}

EXPORT int InitializeInjectionNvtx2(const void *(*get_export_table)(uint32_t))
{
	(void)get_export_table;
	if (__atomic_add_fetch(&nvtx_inits, 1, __ATOMIC_RELAXED) == 1 && sub_result == -1)
		atexit(report);
	return 1; /* attached, no handlers: the instance's calls become no-ops */
}
