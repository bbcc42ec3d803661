#!/usr/bin/env python3
"""Hook speed victim (bench/hook_speed.sh): allocates and frees through the
stand-in caching allocator (ctypes -> libtorchstub -> libc10_cuda -> the c10
hook, GIL released around each call as torch does) from a Python stack DEPTH
frames deep, 8 call sites per layer; with NVTX_SHIM (tests/python's
libnvtxshim.so) every 16 rounds (1 280 allocator events, about one step of
DESIGN.md's transformer loop) are a `train_step` NVTX range and every layer
a `layer` range inside it, so each event has an NVTX context (1 push and 1
pop per 8 allocator events).  usage: hook_speed_victim.py ROUNDS DEPTH [NVTX_SHIM]"""
import ctypes
import sys

t = ctypes.CDLL("libtorchstub.so", mode=ctypes.RTLD_LOCAL)
t.ts_alloc.restype = ctypes.c_void_p
t.ts_alloc.argtypes = [ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
t.ts_free.argtypes = [ctypes.c_void_p]
alloc, free = t.ts_alloc, t.ts_free
if len(sys.argv) > 3:
    nv = ctypes.PyDLL(sys.argv[3])  # the GIL stays held, as in torch.cuda.nvtx
    nv.shim_push.argtypes = [ctypes.c_char_p]
    push, pop = nv.shim_push, nv.shim_pop
else:
    def push(_):
        pass

    def pop():
        pass


def layer():
    push(b"layer")
    a = alloc(4096, 0, None)
    b = alloc(8192, 0, None)
    c = alloc(12288, 0, None)
    d = alloc(16384, 0, None)
    free(a)
    free(b)
    free(c)
    free(d)
    pop()


def nest(n, rounds):
    if n > 1:
        return nest(n - 1, rounds)
    for i in range(rounds):
        if i % 16 == 0:
            push(b"train_step")
        for _ in range(10):
            layer()
        if i % 16 == 15 or i == rounds - 1:
            pop()


nest(int(sys.argv[2]) - 2, int(sys.argv[1]))  # + <module> and layer
