/* Given the preload and no libc10.so anywhere, when the report hook is called
 * 1000 times (as a stray caller might), then the program runs normally, the
 * library warns once (not per call) and still records the events. */
#include <dlfcn.h>
#include <stdint.h>

struct device {
	int8_t type, index;
};
typedef void (*report_fn)(void *, int64_t, uint64_t, uint64_t, struct device);

int main(void)
{
	report_fn rep = (report_fn)dlsym(RTLD_DEFAULT, "_ZN3c1027reportMemoryUsageToProfilerEPvlmmNS_6DeviceE");
	if (!rep)
		return 3; /* not preloaded */
	for (int i = 0; i < 1000; i++)
		rep((void *)(uintptr_t)(0x1000 + (i / 2) * 512), (i & 1) ? -512 : 512, (i & 1) ? 0 : 512, 0,
		    (struct device){1, 0});
	return 0;
}
