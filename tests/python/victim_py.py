#!/usr/bin/env python3
"""Python victim for the Python-frames tests (run_pyframes.py).

Allocates through the stand-in caching allocator (ctypes -> libtorchstub ->
libc10_cuda -> the c10 report hook; ctypes releases the GIL around the call,
as torch does) from known Python functions, each allocation with its own
size (512 * k), and writes for each the Python stack it expects, computed
from sys._getframe() just before the allocation, as one JSON line to EXPECT:

  {"k": k, "size": bytes, "kind": "alloc" | "nvtx" | "mark", "tid": native
   thread id, "inner": [[start, end), ...] code units of the allocating line,
   "linetable": the innermost code's co_linetable (hex),
   "chain": [[qualname, file, firstlineno, instr], ...]}

chain is innermost first; instr (f_lasti // 2) is null for the innermost
frame, whose instruction is the ctypes call on the next line (or the same
line: `same` below).  Scenarios: nested calls, methods and closures,
comprehensions, generators, asyncio, except / finally blocks, threads,
non-ASCII function names (UCS-1, UCS-2, UCS-4), deep recursion, reused code
addresses, a C thread without a Python thread state, NVTX pushes
and marks with the GIL held (ctypes.PyDLL), an atexit handler, and a daemon
thread still allocating when the interpreter exits.  stdout is the same with
and without the preload.

usage: victim_py.py EXPECT NVTXSHIM
"""
import asyncio
import atexit
import ctypes
import json
import sys
import threading

EXPECT = open(sys.argv[1], "w")
t = ctypes.CDLL("libtorchstub.so", mode=ctypes.RTLD_LOCAL)
t.ts_alloc.restype = ctypes.c_void_p
t.ts_alloc.argtypes = [ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
t.ts_free.argtypes = [ctypes.c_void_p]
nvtx = ctypes.PyDLL(sys.argv[2])  # PyDLL: the GIL stays held in the call
nvtx.shim_push.argtypes = [ctypes.c_char_p]
nvtx.shim_mark.argtypes = [ctypes.c_char_p]
lock = threading.Lock()


def size(k):
    return 512 * k


def expect(k, same=False, kind="alloc"):
    """The stack of the caller, as the tracer should see it at the
    allocation on the caller's next line (same=True: on this line)."""
    f = sys._getframe(1)
    line = f.f_lineno + (0 if same else 1)
    inner = [[s // 2, (e + 1) // 2] for s, e, ln in f.f_code.co_lines() if ln == line]
    chain = []
    first = True
    while f is not None:
        co = f.f_code
        chain.append([co.co_qualname, co.co_filename, co.co_firstlineno, None if first else f.f_lasti // 2])
        first = False
        f = f.f_back
    with lock:
        EXPECT.write(json.dumps({"k": k, "size": size(k), "kind": kind, "tid": threading.get_native_id(),
                                 "inner": inner, "linetable": sys._getframe(1).f_code.co_linetable.hex(),
                                 "chain": chain}) + "\n")
        EXPECT.flush()


def free(p):
    t.ts_free(p)


# ---- nested calls ----
def leaf():
    expect(1)
    free(t.ts_alloc(size(1), 0, None))


def mid():
    leaf()


def top():
    mid()


# ---- methods, closures, comprehensions ----
class Model:
    def forward(self):
        expect(2)
        free(t.ts_alloc(size(2), 0, None))

    @staticmethod
    def make():
        def inner():
            expect(3)
            free(t.ts_alloc(size(3), 0, None))
        inner()


def comprehension():
    ps = [expect(4, same=True) or t.ts_alloc(size(4), 0, None) for _ in range(1)]
    free(ps[0])


# ---- generators ----
def gen(ks):
    for k in ks:
        expect(k)
        p = t.ts_alloc(size(k), 0, None)
        yield p


def consume():
    for p in gen((5, 6)):
        free(p)


# ---- asyncio ----
async def coro_leaf(k):
    await asyncio.sleep(0)
    expect(k)
    free(t.ts_alloc(size(k), 0, None))


async def coro_main():
    await coro_leaf(7)
    await asyncio.gather(coro_leaf(8), coro_leaf(9))


# ---- exceptions ----
def in_except():
    try:
        raise ValueError("x")
    except ValueError:
        expect(10)
        free(t.ts_alloc(size(10), 0, None))


def in_finally():
    try:
        return 1
    finally:
        expect(11)
        free(t.ts_alloc(size(11), 0, None))


def in_handler_of_failed_call():
    try:
        {}["missing"]
    except KeyError:
        try:
            raise RuntimeError("nested")
        except RuntimeError:
            expect(12)
            free(t.ts_alloc(size(12), 0, None))


# ---- threads ----
def thread_leaf(k):
    expect(k)
    free(t.ts_alloc(size(k), 0, None))


def thread_work(k):
    for _ in range(3):
        thread_leaf(k)


# ---- non-ASCII names: UCS-1, UCS-2 and UCS-4 compact strings ----
def größe():
    expect(20)
    free(t.ts_alloc(size(20), 0, None))


def 分配():
    expect(21)
    free(t.ts_alloc(size(21), 0, None))


def 𠀀分配():
    expect(22)
    free(t.ts_alloc(size(22), 0, None))


# ---- deep recursion (deeper than DSMEMTRACE_PY_DEPTH's default 32) ----
def deep(n):
    if n == 0:
        expect(23)
        free(t.ts_alloc(size(23), 0, None))
        return
    deep(n - 1)


# ---- NVTX with the GIL held ----
def nvtx_region():
    expect(0, kind="nvtx")
    nvtx.shim_push(b"py-region")
    nvtx.shim_pop()


def mark_here():
    expect(0, kind="mark")
    nvtx.shim_mark(b"py-mark")


# ---- interpreter shutdown ----
def at_exit():
    expect(30)
    free(t.ts_alloc(size(30), 0, None))


def daemon_loop():
    while True:
        free(t.ts_alloc(size(31), 0, None))


# ---- code objects freed and their addresses reused by other code ----
def reuse():
    for i in range(10):
        src = "def dyn_%d():\n    expect(%d)\n    free(t.ts_alloc(size(%d), 0, None))\n" % (i, 50 + i, 50 + i)
        ns = {"expect": expect, "free": free, "t": t, "size": size}
        exec(compile(src, "<dyn%d>" % i, "exec"), ns)
        fn = ns.pop("dyn_%d" % i)
        with lock:
            EXPECT.write(json.dumps({"k": 50 + i, "kind": "code_address", "address": id(fn.__code__)}) + "\n")
        fn()
        del fn, ns


# ---- a thread without a Python thread state (torch's autograd threads) ----
def native_thread():
    nvtx.shim_native_thread.restype = ctypes.c_long
    nvtx.shim_native_thread.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
    tid = nvtx.shim_native_thread(ctypes.cast(t.ts_alloc, ctypes.c_void_p), ctypes.cast(t.ts_free, ctypes.c_void_p),
                                  size(24))
    with lock:
        EXPECT.write(json.dumps({"k": 24, "size": size(24), "kind": "native", "tid": tid}) + "\n")


def warmup():
    # the first event schedules the layout check (a pending call on this
    # thread); nothing is walked until it has run
    free(t.ts_alloc(size(40), 0, None))


warmup()
for _ in range(1000):
    pass
warmup()

top()
Model().forward()
Model.make()
comprehension()
consume()
asyncio.run(coro_main())
in_except()
in_finally()
in_handler_of_failed_call()
ths = [threading.Thread(target=thread_work, args=(13 + i,), name="worker%d" % i) for i in range(4)]
for th in ths:
    th.start()
for th in ths:
    th.join()
größe()
分配()
𠀀分配()
deep(40)
reuse()
native_thread()
nvtx_region()
mark_here()
atexit.register(at_exit)
threading.Thread(target=daemon_loop, daemon=True, name="daemon").start()
print("victim_py: done")
sys.stdout.flush()
