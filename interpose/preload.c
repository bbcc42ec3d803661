/* Constructor and symbol resolution.
 *
 * The constructor only reads configuration and points NVTX at us; the
 * writer thread and the trace file start at the first allocation event
 * (tracer.c), so processes that never allocate GPU memory stay untouched. */
#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "preload.h"

struct find_arg {
	const char *hint;
	const char *sym;
	const void *self;
	void *found;
};

static int find_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	struct find_arg *a = arg;
	if (!info->dlpi_name || !*info->dlpi_name || !strstr(info->dlpi_name, a->hint))
		return 0;
	void *h = dlopen(info->dlpi_name, RTLD_NOW | RTLD_NOLOAD);
	if (!h)
		return 0;
	void *f = dlsym(h, a->sym);
	dlclose(h); /* NOLOAD handle: drops the reference we just took */
	if (f && f != a->self) {
		a->found = f;
		return 1;
	}
	return 0;
}

void *dsmt_resolve(const char *sym, const char *hint, const void *self)
{
	int saved = dsmt_in_hook;
	dsmt_in_hook = 1;
	void *f = dlsym(RTLD_NEXT, sym);
	if (!f || f == self) {
		struct find_arg a = {hint, sym, self, NULL};
		dl_iterate_phdr(find_cb, &a);
		f = a.found;
	}
	if (!f)
		dsmt_warn("cannot find the original %s (looked in the global scope and in %s*); "
			  "this call fails instead",
			  sym, hint);
	dsmt_in_hook = saved;
	return f;
}

__attribute__((constructor)) static void dsmt_ctor(void)
{
	dsmt_config_init();
	Dl_info di;
	if (dladdr((void *)dsmt_ctor, &di) && di.dli_fname) {
		char abs[PATH_MAX];
		if (realpath(di.dli_fname, abs))
			snprintf(dsmt_cfg.self_path, sizeof dsmt_cfg.self_path, "%s", abs);
	}
	/* NVTX instances read this lazily, at their first call: setting it here
	 * is early enough.  A foreign value (nsys) is left alone. */
	if (dsmt_cfg.self_path[0] && !dsmt_cfg.disabled)
		setenv("NVTX_INJECTION64_PATH", dsmt_cfg.self_path, 0);
}
