/* Stand-in for NVML, libnvidia-ml.so.1 (soname libnvidia-ml.so.1): the few
 * functions of NVML's public ABI a memory sampler uses.  nvml.h is not part
 * of the CUDA headers we build against, so the types are written out here as
 * nvml.h defines them (same layout).
 *
 * The numbers come from the stand-in driver when it is loaded in this
 * process (dlopen RTLD_NOLOAD: NVML never makes a CUDA context itself):
 *   device used   = standin_used_bytes(dev) + STANDIN_CONTEXT_BYTES
 *                   (default 300 MiB) while the device has a context
 *   device total  = STANDIN_DEVICE_MEM (default 1 GiB), free = total - used
 *   compute processes: one entry, getpid(), with usedGpuMemory = used, while
 *   the device has a context; none with STANDIN_NVML_NOPROC=1 (a container
 *   with its own PID namespace sees no processes).
 * STANDIN_DEVICE_COUNT (default 2) devices, like the stand-in driver, but
 * enumerated in the opposite order: NVML index i is CUDA device n-1-i (as
 * when CUDA_DEVICE_ORDER=FASTEST_FIRST reorders CUDA), so a sampler must map
 * them by PCI bus id (cuDeviceGetPCIBusId: CUDA device d sits on bus 0x10+d;
 * nvmlDeviceGetHandleByPciBusId_v2 takes "[domain:]bus:device.function").
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

typedef enum {
	NVML_SUCCESS = 0,
	NVML_ERROR_UNINITIALIZED = 1,
	NVML_ERROR_INVALID_ARGUMENT = 2,
	NVML_ERROR_NOT_FOUND = 6,
	NVML_ERROR_INSUFFICIENT_SIZE = 7,
} nvmlReturn_t;

typedef struct nvmlDevice_st *nvmlDevice_t;
typedef struct {
	unsigned long long total, free, used;
} nvmlMemory_t;
typedef struct {
	unsigned int pid;
	unsigned long long usedGpuMemory;
	unsigned int gpuInstanceId, computeInstanceId;
} nvmlProcessInfo_t;

#define MAX_DEV 8
struct nvmlDevice_st {
	int index;
};
static struct nvmlDevice_st devs[MAX_DEV];
static int inits;

static unsigned long long env_bytes(const char *name, unsigned long long dflt)
{
	const char *v = getenv(name);
	return v && *v ? strtoull(v, NULL, 0) : dflt;
}

static int ndev(void)
{
	long n = (long)env_bytes("STANDIN_DEVICE_COUNT", 2);
	return n < 1 ? 1 : n > MAX_DEV ? MAX_DEV : (int)n;
}

/* what the stand-in driver says about device d: used bytes, has a context */
static void driver_view(int d, unsigned long long *used, int *ctx)
{
	*used = 0;
	*ctx = 0;
	void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
	if (!h)
		return;
	size_t (*used_fn)(int) = (size_t (*)(int))dlsym(h, "standin_used_bytes");
	int (*ctx_fn)(int) = (int (*)(int))dlsym(h, "standin_device_contexts");
	if (used_fn && ctx_fn) {
		*ctx = ctx_fn(d) > 0;
		*used = *ctx ? used_fn(d) + env_bytes("STANDIN_CONTEXT_BYTES", 300ull << 20) : used_fn(d);
	}
	dlclose(h);
}

EXPORT nvmlReturn_t nvmlInit_v2(void)
{
	__atomic_add_fetch(&inits, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < MAX_DEV; i++)
		devs[i].index = i;
	return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlInit(void)
{
	return nvmlInit_v2();
}

EXPORT nvmlReturn_t nvmlShutdown(void)
{
	int n = __atomic_load_n(&inits, __ATOMIC_RELAXED);
	if (n <= 0)
		return NVML_ERROR_UNINITIALIZED;
	__atomic_sub_fetch(&inits, 1, __ATOMIC_RELAXED);
	return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count)
{
	if (__atomic_load_n(&inits, __ATOMIC_RELAXED) <= 0)
		return NVML_ERROR_UNINITIALIZED;
	if (!count)
		return NVML_ERROR_INVALID_ARGUMENT;
	*count = (unsigned)ndev();
	return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
	if (__atomic_load_n(&inits, __ATOMIC_RELAXED) <= 0)
		return NVML_ERROR_UNINITIALIZED;
	if (!device || index >= (unsigned)ndev())
		return NVML_ERROR_INVALID_ARGUMENT;
	*device = &devs[index];
	return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *bus_id, nvmlDevice_t *device)
{
	if (__atomic_load_n(&inits, __ATOMIC_RELAXED) <= 0)
		return NVML_ERROR_UNINITIALIZED;
	if (!bus_id || !device)
		return NVML_ERROR_INVALID_ARGUMENT;
	unsigned dom = 0, bus = 0, dv = 0, fn = 0;
	if (sscanf(bus_id, "%x:%x:%x.%x", &dom, &bus, &dv, &fn) != 4 &&
	    sscanf(bus_id, "%x:%x.%x", &bus, &dv, &fn) != 3)
		return NVML_ERROR_INVALID_ARGUMENT;
	int cuda = (int)bus - 0x10, n = ndev();
	if (dom || dv || fn || cuda < 0 || cuda >= n)
		return NVML_ERROR_NOT_FOUND;
	*device = &devs[n - 1 - cuda];
	return NVML_SUCCESS;
}

/* the CUDA ordinal of an NVML handle, -1 invalid, -2 not initialised */
static int dev_index(nvmlDevice_t d)
{
	if (__atomic_load_n(&inits, __ATOMIC_RELAXED) <= 0)
		return -2;
	if (!d || d < devs || d >= devs + ndev())
		return -1;
	return ndev() - 1 - d->index;
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
	int i = dev_index(device);
	if (i == -2)
		return NVML_ERROR_UNINITIALIZED;
	if (i < 0 || !memory)
		return NVML_ERROR_INVALID_ARGUMENT;
	unsigned long long used;
	int ctx;
	driver_view(i, &used, &ctx);
	memory->total = env_bytes("STANDIN_DEVICE_MEM", 1ull << 30);
	memory->used = used;
	memory->free = used < memory->total ? memory->total - used : 0;
	return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int *infoCount,
							   nvmlProcessInfo_t *infos)
{
	int i = dev_index(device);
	if (i == -2)
		return NVML_ERROR_UNINITIALIZED;
	if (i < 0 || !infoCount)
		return NVML_ERROR_INVALID_ARGUMENT;
	unsigned long long used;
	int ctx;
	driver_view(i, &used, &ctx);
	const char *noproc = getenv("STANDIN_NVML_NOPROC");
	unsigned n = ctx && !(noproc && *noproc == '1') ? 1 : 0;
	if (*infoCount < n || (n && !infos)) {
		*infoCount = n;
		return NVML_ERROR_INSUFFICIENT_SIZE;
	}
	*infoCount = n;
	if (n) {
		infos[0].pid = (unsigned)getpid();
		infos[0].usedGpuMemory = used;
		infos[0].gpuInstanceId = 0xFFFFFFFFu;
		infos[0].computeInstanceId = 0xFFFFFFFFu;
	}
	return NVML_SUCCESS;
}
