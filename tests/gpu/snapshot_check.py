#!/usr/bin/env python3
"""--torch-snapshot against torch's own snapshot, on a CUDA machine.

  snapshot_check.py run OUT_DIR
      (under LD_PRELOAD=libdsmemtrace.so) a small training loop, 6 steps in
      `train_step` ranges, then a few odd-sized tensors kept and some freed
      (gaps in segments); at the end tracing is paused
      (dsmemtrace_pause: nothing after it enters the trace, so interpreter
      teardown does not free the state away) and torch's own
      torch.cuda.memory._snapshot() is pickled to OUT_DIR/torch.pickle.

  snapshot_check.py compare TORCH.pickle OURS.pickle
      loads ours with torch.cuda._memory_viz (segsum, trace, memory,
      segments, compare, trace_plot, segment_plot: every one that exists in
      this torch) without error, and compares with torch's: allocated bytes
      by device, number of live blocks by device, the live blocks themselves
      (address, size); reserved bytes are printed for information.  Prints
      one PASS or FAIL line; exit 1 on a mismatch or an error.
"""
import ctypes
import os
import pickle
import sys


def run(out):
    import torch
    os.makedirs(out, exist_ok=True)
    lib = ctypes.CDLL(None)
    if not hasattr(lib, "dsmemtrace_pause"):
        print("FAIL: not running under LD_PRELOAD=libdsmemtrace.so")
        sys.exit(1)
    dev = torch.device("cuda")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 1024)).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _ in range(6):
        torch.cuda.nvtx.range_push("train_step")
        x = torch.randn(64, 1024, device=dev)
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.nvtx.range_pop()
    keep = [torch.empty(1000 + 777 * i, dtype=torch.uint8, device=dev) for i in range(12)]
    del keep[1::3]  # inactive gaps between live blocks
    big = torch.empty(3 << 20, dtype=torch.uint8, device=dev)  # a large-pool block
    torch.cuda.synchronize()
    lib.dsmemtrace_pause()
    snap = torch.cuda.memory._snapshot()
    with open(os.path.join(out, "torch.pickle"), "wb") as f:
        pickle.dump(snap, f)
    print("allocated %d reserved %d (torch)" % (torch.cuda.memory_allocated(), torch.cuda.memory_reserved()))
    del big, keep


def totals(snap):
    alloc, nblk, res, blocks = {}, {}, {}, set()
    for sg in snap["segments"]:
        d = sg["device"]
        res[d] = res.get(d, 0) + sg["total_size"]
        for b in sg["blocks"]:
            if b["state"] == "active_allocated":
                alloc[d] = alloc.get(d, 0) + b["size"]
                nblk[d] = nblk.get(d, 0) + 1
                blocks.add((d, b["address"], b["size"]))
    return alloc, nblk, res, blocks


def compare(torch_path, ours_path):
    from torch.cuda import _memory_viz as mv
    with open(torch_path, "rb") as f:
        theirs = pickle.load(f)
    with open(ours_path, "rb") as f:
        ours = pickle.load(f)
    problems = []
    flat = lambda s: s  # noqa: E731  (no flamegraph.pl download: the text is enough)
    calls = [("segsum", lambda: mv.segsum(ours)), ("trace", lambda: mv.trace(ours)),
             ("memory", lambda: mv.memory(ours, format_flamegraph=flat)),
             ("segments", lambda: mv.segments(ours, format_flamegraph=flat)),
             ("compare", lambda: mv.compare(theirs["segments"], ours["segments"], format_flamegraph=flat)),
             ("trace_plot", lambda: mv.trace_plot(ours)), ("segment_plot", lambda: mv.segment_plot(ours))]
    used = []
    for name, fn in calls:
        if not hasattr(mv, name):
            continue
        try:
            r = fn()
            used.append("%s(%d chars)" % (name, len(r) if isinstance(r, str) else -1))
        except Exception as e:  # noqa: BLE001
            problems.append("_memory_viz.%s on ours: %s: %s" % (name, type(e).__name__, e))
    ta, tn, tr, tb = totals(theirs)
    oa, on, orr, ob = totals(ours)
    for d in sorted(set(ta) | set(oa)):
        print("device %d: allocated torch %d ours %d; live blocks torch %d ours %d; reserved torch %d ours %d (info)"
              % (d, ta.get(d, 0), oa.get(d, 0), tn.get(d, 0), on.get(d, 0), tr.get(d, 0), orr.get(d, 0)))
        if ta.get(d, 0) != oa.get(d, 0):
            problems.append("device %d: allocated %d, torch %d" % (d, oa.get(d, 0), ta.get(d, 0)))
        if tn.get(d, 0) != on.get(d, 0):
            problems.append("device %d: %d live blocks, torch %d" % (d, on.get(d, 0), tn.get(d, 0)))
    if tb != ob:
        problems.append("live blocks differ: %d only in torch's (%s), %d only in ours (%s)" % (
            len(tb - ob), sorted(tb - ob)[:3], len(ob - tb), sorted(ob - tb)[:3]))
    if not ob:
        problems.append("no live block in ours: nothing compared")
    print("memory_viz on ours: " + ", ".join(used))
    if problems:
        for p in problems:
            print("  " + p)
        print("FAIL snapshot_check: %d problem(s)" % len(problems))
        return 1
    print("PASS snapshot_check: %d live blocks, %d bytes allocated, same as torch's snapshot" % (
        sum(on.values()), sum(oa.values())))
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "run":
        run(sys.argv[2])
    elif len(sys.argv) == 4 and sys.argv[1] == "compare":
        sys.exit(compare(sys.argv[2], sys.argv[3]))
    else:
        sys.exit(__doc__)
