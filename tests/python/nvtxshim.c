/* NVTX for the Python victim: push/pop/mark through the nvtx3 header-only
 * library, which loads NVTX_INJECTION64_PATH (our library) at its first
 * call.  Called through ctypes.PyDLL the GIL stays held, as it does for
 * torch.cuda.nvtx.range_push. */
#include <nvtx3/nvToolsExt.h>

__attribute__((visibility("default"))) int shim_push(const char *s) { return nvtxRangePushA(s); }
__attribute__((visibility("default"))) int shim_pop(void) { return nvtxRangePop(); }
__attribute__((visibility("default"))) void shim_mark(const char *s) { nvtxMarkA(s); }
