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

#include "driver.h"
#include "preload.h"

/* Paths of loaded objects whose name contains the hint.  dlopen must not be
 * called from inside the dl_iterate_phdr callback: the two take glibc's
 * loader locks in opposite orders (a hang seen with the writer thread
 * loading libunwind at the same moment). */
struct find_arg {
	const char *hint;
	int n;
	char paths[8][512];
};

static int find_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	struct find_arg *a = arg;
	if (info->dlpi_name && *info->dlpi_name && strstr(info->dlpi_name, a->hint) && a->n < 8)
		snprintf(a->paths[a->n++], sizeof a->paths[0], "%s", info->dlpi_name);
	return 0;
}

void *dsmt_resolve(const char *sym, const char *hint, const void *self)
{
	int saved = dsmt_in_hook;
	dsmt_in_hook = 1;
	void *f = dlsym(RTLD_NEXT, sym);
	if (!f || f == self) {
		f = NULL;
		struct find_arg a = {.hint = hint};
		dl_iterate_phdr(find_cb, &a);
		for (int i = 0; i < a.n && !f; i++) {
			void *h = dlopen(a.paths[i], RTLD_NOW | RTLD_NOLOAD);
			if (!h)
				continue;
			void *g = dlsym(h, sym);
			dlclose(h); /* NOLOAD handle: drops the reference just taken */
			if (g && g != self)
				f = g;
		}
	}
	if (!f)
		dsmt_warn("cannot find the original %s (looked in the global scope and in %s*): "
			  "calls to it are not forwarded",
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
	/* libcuda reads this in cuInit and calls our InitializeInjection
	 * (cupti.c); a foreign value (nsys, ncu) is left alone and we subscribe
	 * at the first driver call instead */
	dsmt_driver_config();
	if (dsmt_cfg.self_path[0] && !dsmt_cfg.disabled && !dsmt_no_cupti)
		setenv("CUDA_INJECTION64_PATH", dsmt_cfg.self_path, 0);
	/* only when asked for: the default action of a toggle signal would
	 * otherwise kill a program that receives it before its first allocation */
	if (dsmt_cfg.toggle_signal && !dsmt_cfg.disabled)
		dsmt_toggle_signal_install();
}
