/* NVML samples, taken by the writer thread: what the whole process holds on
 * each device (context, runtime, modules and every allocation together) and
 * what the device has in use.  The decoder sets them beside the driver-level
 * sum to estimate the context overhead that no hook sees.
 *
 * Nothing here touches a CUDA context: NVML needs none, and the device
 * mapping (CUDA ordinal -> NVML device, by PCI bus id, so that
 * CUDA_VISIBLE_DEVICES is honoured) uses only context-free driver calls.
 * libnvidia-ml and libcuda are looked up at run time; the few NVML entry
 * points are declared here with NVML's public ABI. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tracer.h"

typedef void *nvml_dev;
typedef struct {
	unsigned long long total, free, used;
} nvml_memory;
typedef struct {
	unsigned int pid;
	unsigned long long usedGpuMemory;
	unsigned int gpuInstanceId, computeInstanceId;
} nvml_proc; /* nvmlProcessInfo_t (v2/v3 layout) */

static struct {
	int (*init)(void);
	int (*by_index)(unsigned, nvml_dev *);
	int (*by_bus)(const char *, nvml_dev *);
	int (*meminfo)(nvml_dev, nvml_memory *);
	int (*procs)(nvml_dev, unsigned *, nvml_proc *);
	int (*cu_count)(int *);
	int (*cu_bus)(char *, int, int);
} f;

static int state; /* 0 untried, 1 ready, -1 unavailable */

#define MAXDEV 64
#define MAXPROC 256

static int setup(void)
{
	void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
	void *c = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
	if (!h || !c)
		return c ? dlclose(c), -1 : -1; /* without libcuda loaded: try again later */
	*(void **)&f.init = dlsym(h, "nvmlInit_v2");
	*(void **)&f.by_index = dlsym(h, "nvmlDeviceGetHandleByIndex_v2");
	*(void **)&f.by_bus = dlsym(h, "nvmlDeviceGetHandleByPciBusId_v2");
	*(void **)&f.meminfo = dlsym(h, "nvmlDeviceGetMemoryInfo");
	*(void **)&f.procs = dlsym(h, "nvmlDeviceGetComputeRunningProcesses_v3");
	*(void **)&f.cu_count = dlsym(c, "cuDeviceGetCount");
	*(void **)&f.cu_bus = dlsym(c, "cuDeviceGetPCIBusId");
	if (!f.init || !f.by_index || !f.meminfo || !f.cu_count || f.init() != 0)
		return -2;
	return 1;
}

void dsmt_nvml_sample(void (*emit)(int dev, unsigned flags, uint64_t proc, uint64_t used, uint64_t total))
{
	if (state == 0) {
		int r = setup();
		if (r == -1)
			return; /* libcuda not loaded yet (or no NVML): next time */
		state = r == 1 ? 1 : -1;
	}
	if (state != 1)
		return;
	int n = 0;
	if (f.cu_count(&n) != 0 || n <= 0)
		return; /* before cuInit */
	if (n > MAXDEV)
		n = MAXDEV;
	static nvml_proc pr[MAXPROC];
	unsigned pid = (unsigned)getpid();
	for (int d = 0; d < n; d++) {
		nvml_dev h = NULL;
		char bus[32];
		if (f.by_bus && f.cu_bus && f.cu_bus(bus, sizeof bus, d) == 0) {
			if (f.by_bus(bus, &h) != 0)
				h = NULL;
		} else if (f.by_index((unsigned)d, &h) != 0) {
			h = NULL;
		}
		nvml_memory m;
		if (!h || f.meminfo(h, &m) != 0)
			continue;
		unsigned cnt = MAXPROC, flags = 0;
		uint64_t mine = 0;
		if (f.procs && f.procs(h, &cnt, pr) == 0) {
			for (unsigned i = 0; i < cnt && i < MAXPROC; i++)
				if (pr[i].pid == pid) {
					mine = pr[i].usedGpuMemory;
					flags = 1;
				}
		}
		emit(d, flags, mine, m.used, m.total);
	}
}
