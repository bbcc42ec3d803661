#!/usr/bin/env python3
"""Python frames cost: a loop allocating and freeing through the stand-in
caching allocator (ctypes -> libtorchstub -> libc10_cuda -> the c10 hook,
GIL released around each call as torch does) from a Python stack DEPTH
frames deep (default 10), 8 call sites per frame so the innermost
instruction varies.  usage: pyframes_victim.py [ROUNDS [DEPTH]]"""
import ctypes
import sys

t = ctypes.CDLL("libtorchstub.so", mode=ctypes.RTLD_LOCAL)
t.ts_alloc.restype = ctypes.c_void_p
t.ts_alloc.argtypes = [ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
t.ts_free.argtypes = [ctypes.c_void_p]
alloc, free = t.ts_alloc, t.ts_free


def layer():
    a = alloc(4096, 0, None)
    b = alloc(8192, 0, None)
    c = alloc(12288, 0, None)
    d = alloc(16384, 0, None)
    free(a)
    free(b)
    free(c)
    free(d)


def nest(n, rounds):
    if n > 1:
        return nest(n - 1, rounds)
    for _ in range(rounds):
        for _ in range(10):
            layer()


rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 400
depth = int(sys.argv[2]) if len(sys.argv) > 2 else 10
nest(depth - 2, rounds)  # + <module> and layer
