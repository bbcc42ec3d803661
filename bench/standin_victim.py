#!/usr/bin/env python3
"""A Python "training loop" over the stand-in caching allocator (ctypes into
tests/standin's libtorchstub.so, loaded RTLD_LOCAL as torch loads libc10):
N x 10 layers x 8 blocks allocated and freed.  Used by
bench/standin_hook_cost.sh for hook cost and stack coverage without a GPU."""
import ctypes
import sys

t = ctypes.CDLL("libtorchstub.so", mode=ctypes.RTLD_LOCAL)
t.ts_alloc.restype = ctypes.c_void_p
t.ts_alloc.argtypes = [ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
t.ts_free.argtypes = [ctypes.c_void_p]


def layer(n):
    ps = [t.ts_alloc(4096 * (i + 1), 0, None) for i in range(n)]
    for p in ps:
        t.ts_free(p)


def model():
    for _ in range(10):
        layer(8)


for _ in range(int(sys.argv[1]) if len(sys.argv) > 1 else 400):
    model()
