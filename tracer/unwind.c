/* Native stacks through libunwind, loaded with dlopen(RTLD_LOCAL).
 *
 * libunwind.so.8 exports the whole _Unwind_* C++ exception ABI; as a NEEDED
 * entry of a preloaded library it would take over exception unwinding for
 * the process (MECHANICS.md 5.2), so it is never linked.  Without it, native
 * stacks are off and each event keeps only its call site. */
#include <dlfcn.h>
#include <stddef.h>

#include "tracer.h"

static int (*p_backtrace)(void **, int);

int dsmt_unwind_init(void)
{
	void *h = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		dsmt_warn("libunwind.so.8 not found; native stacks off (set DSMEMTRACE_NATIVE_DEPTH=0 to silence)");
		return -1;
	}
	p_backtrace = (int (*)(void **, int))dlsym(h, "unw_backtrace");
	/* per-thread caches: what heaptrack and memray use; UNW_CACHE_PER_THREAD = 2 */
	int (*set_policy)(void *, int) = (int (*)(void *, int))dlsym(h, "_ULx86_64_set_caching_policy");
	void **as = dlsym(h, "_ULx86_64_local_addr_space");
	if (set_policy && as)
		set_policy(*as, 2);
	if (!p_backtrace) {
		dsmt_warn("libunwind.so.8 has no unw_backtrace; native stacks off");
		return -1;
	}
	return 0;
}

__attribute__((noinline)) int dsmt_backtrace(void **ips, int max)
{
	return p_backtrace ? p_backtrace(ips, max) : 0;
}
