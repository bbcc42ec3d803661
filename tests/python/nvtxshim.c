/* NVTX for the Python victim: push/pop/mark through the nvtx3 header-only
 * library, which loads NVTX_INJECTION64_PATH (our library) at its first
 * call.  Called through ctypes.PyDLL the GIL stays held, as it does for
 * torch.cuda.nvtx.range_push. */
#include <nvtx3/nvToolsExt.h>

__attribute__((visibility("default"))) int shim_push(const char *s) { return nvtxRangePushA(s); }
__attribute__((visibility("default"))) int shim_pop(void) { return nvtxRangePop(); }
__attribute__((visibility("default"))) void shim_mark(const char *s) { nvtxMarkA(s); }

/* A thread Python never saw (like torch's autograd threads): allocates and
 * frees n bytes through the given functions, joined before returning; its
 * events must carry no Python frames.  Returns the thread's id. */
#include <pthread.h>
#include <stddef.h>
#include <sys/syscall.h>
#include <unistd.h>

struct native_arg {
	void *(*alloc)(size_t, int, void *);
	int (*free)(void *);
	size_t n;
	long tid;
};

static void *native_main(void *p)
{
	struct native_arg *a = p;
	a->tid = syscall(SYS_gettid);
	a->free(a->alloc(a->n, 0, NULL));
	return NULL;
}

__attribute__((visibility("default"))) long shim_native_thread(void *alloc, void *free_fn, size_t n)
{
	struct native_arg a = {(void *(*)(size_t, int, void *))alloc, (int (*)(void *))free_fn, n, 0};
	pthread_t t;
	if (pthread_create(&t, NULL, native_main, &a) != 0)
		return -1;
	pthread_join(t, NULL);
	return a.tid;
}
