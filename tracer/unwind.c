/* Native stacks through libunwind, loaded with dlopen(RTLD_LOCAL).
 *
 * libunwind.so.8 exports the whole _Unwind_* C++ exception ABI; as a NEEDED
 * entry of a preloaded library it would take over exception unwinding for
 * the process (MECHANICS.md 5.2), so it is never linked.  Without it, native
 * stacks are off and each event keeps only its call site. */
#include <dlfcn.h>
#include <link.h>
#include <stddef.h>
#include <stdint.h>

#include "tracer.h"

static int (*p_backtrace)(void **, int);
/* our own text: leading frames inside it are not part of the caller's stack */
static uintptr_t self_lo, self_hi;

/* the text of the Python interpreter (the executable or libpython that
 * defines _PyEval_EvalFrameDefault), 0..0 when there is none */
uintptr_t dsmt_interp_lo, dsmt_interp_hi;

struct text_range {
	uintptr_t base, lo, hi;
};

static int text_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	struct text_range *t = arg;
	if (info->dlpi_addr != t->base)
		return 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
			t->lo = info->dlpi_addr + ph->p_vaddr;
			t->hi = t->lo + ph->p_memsz;
		}
	}
	return 1;
}

static void text_of(const void *addr, uintptr_t *lo, uintptr_t *hi)
{
	Dl_info di;
	if (!addr || !dladdr(addr, &di) || !di.dli_fbase)
		return;
	struct text_range t = {.base = (uintptr_t)di.dli_fbase};
	dl_iterate_phdr(text_cb, &t);
	/* dlpi_addr is 0 for a non-PIE executable, whose dli_fbase is its address */
	if (!t.hi) {
		t.base = 0;
		dl_iterate_phdr(text_cb, &t);
	}
	if (t.hi && t.lo <= (uintptr_t)addr && (uintptr_t)addr < t.hi) {
		*lo = t.lo;
		*hi = t.hi;
	}
}

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
	text_of((const void *)dsmt_backtrace, &self_lo, &self_hi);
	text_of(dlsym(RTLD_DEFAULT, "_PyEval_EvalFrameDefault"), &dsmt_interp_lo, &dsmt_interp_hi);
	return 0;
}

/* Frames above our own code, innermost first (ips[0] is the hooked
 * function's caller).  Our frames (this function, the recorder, the hook:
 * 3 to 5 of them) are unwound and dropped. */
__attribute__((noinline)) int dsmt_backtrace(void **ips, int max)
{
	enum { OWN_MAX = 6 };
	void *buf[DSMT_MAX_DEPTH + OWN_MAX];
	if (!p_backtrace || max <= 0)
		return 0;
	if (max > DSMT_MAX_DEPTH)
		max = DSMT_MAX_DEPTH;
	int n = p_backtrace(buf, max + OWN_MAX), k = 0;
	while (k < n && k < OWN_MAX && (uintptr_t)buf[k] >= self_lo && (uintptr_t)buf[k] < self_hi)
		k++;
	int m = n - k < max ? n - k : max;
	for (int i = 0; i < m; i++)
		ips[i] = buf[k + i];
	return m;
}
