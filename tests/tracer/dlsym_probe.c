/* Two libraries built from this file define dsmt_probe() returning their
 * own name (PROBE_NAME); the first also asks dlsym(RTLD_NEXT) for it, as a
 * wrapper library would.  See dlsym_next.c. */
#include <dlfcn.h>

const char *dsmt_probe(void) { return PROBE_NAME; }

#ifdef PROBE_B
int probe_b_linked(void) { return 1; }
#endif

#ifdef PROBE_ASKS
const char *probe_next(void)
{
	const char *(*f)(void) = (const char *(*)(void))dlsym(RTLD_NEXT, "dsmt_probe");
	return f ? f() : "none";
}
#endif
