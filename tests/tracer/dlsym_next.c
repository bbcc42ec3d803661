/* Given libdsmemtrace.so preloaded (it interposes dlsym), when a library
 * asks dlsym(RTLD_NEXT, "dsmt_probe"), then it gets the definition after
 * itself (libprobe_b), exactly as without the preload.  glibc finds "next"
 * from the caller's return address: a pass-through that is not a tail call
 * would make the caller libdsmemtrace and answer libprobe_a.
 * Also: a "cu" name that is not there is still not found. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

const char *probe_next(void);
const char *dsmt_probe(void);
int probe_b_linked(void); /* keeps libprobe_b in the link map after libprobe_a */

int main(void)
{
	int bad = !probe_b_linked();
	const char *n = probe_next();
	if (strcmp(n, "b") != 0) {
		printf("FAIL: dlsym(RTLD_NEXT) from libprobe_a gave %s, want b\n", n);
		bad = 1;
	}
	if (strcmp(dsmt_probe(), "a") != 0) {
		printf("FAIL: dsmt_probe() bound to %s, want a\n", dsmt_probe());
		bad = 1;
	}
	void *p = dlsym(RTLD_DEFAULT, "cuNoSuchFunction");
	if (p) {
		printf("FAIL: cuNoSuchFunction found\n");
		bad = 1;
	}
	printf("%s\n", bad ? "dlsym_next: FAIL" : "dlsym_next: ok");
	return bad;
}
