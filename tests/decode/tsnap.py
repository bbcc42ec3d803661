#!/usr/bin/env python3
"""--torch-snapshot: the pickle memory_viz reads, checked without torch.

For golden scripts (frames, two devices, expandable segments, a pause) and a
real H200 DeepSpeed rank: pickle.load gives torch.cuda.memory._snapshot()'s
structure (segments with device, address, total_size, allocated_size,
active_size, requested_size, stream, segment_type, segment_pool_id,
is_expandable, frames, blocks; blocks with address, size, requested_size,
state, frames; device_traces: one list per device of entries with action,
addr, size, stream, time_us, frames; frames {filename, line, name}); the
blocks tile each segment exactly; per device the live blocks add up to the
decoder's allocated at the end of the trace (JSON: the last interval's
end_allocated) and so does the alloc - free_completed balance of
device_traces (traces without a pause); segments add up to its reserved
where every block lies in a segment of torch's.  Bad use gets one line.

usage: tsnap.py MKTRACE DSMEMDECODE SRCDIR WORKDIR
"""
import json
import os
import pickle
import subprocess
import sys

import outcheck
from outcheck import fail, run

MKTRACE, DECODE, SRC, WORK = sys.argv[1:5]



SEG_KEYS = {"device", "address", "total_size", "allocated_size", "active_size", "requested_size", "stream",
            "segment_type", "segment_pool_id", "is_expandable", "frames", "blocks"}
BLOCK_KEYS = {"address", "size", "requested_size", "state", "frames"}
ACTIONS = {"alloc", "free_requested", "free_completed", "segment_alloc", "segment_free", "oom"}


def check_frames(name, fr):
    if not isinstance(fr, list):
        fail("%s: frames is %r" % (name, type(fr)))
        return
    for f in fr:
        if set(f) != {"filename", "line", "name"} or not isinstance(f["filename"], str) or \
                not isinstance(f["name"], str) or not isinstance(f["line"], int):
            fail("%s: frame %r" % (name, f))
            return


def check(name, trace, exact_reserved=False, balance=True, want_frame=None, expandable=False):
    out = os.path.join(WORK, name + ".pickle")
    rc, so, err = run(DECODE, "--torch-snapshot", out, trace)
    if rc:
        fail("%s: exit %d: %s" % (name, rc, err))
        return
    if so:
        fail("%s: printed on stdout" % name)
    rc, js, err = run(DECODE, "--format", "json", trace)
    doc = json.loads(js)["processes"][0]
    rows = doc["steps"] + doc["init"] + doc["tail"] + doc["eval"]
    with open(out, "rb") as f:
        raw = f.read()
    if raw[:2] != b"\x80\x02":
        fail("%s: not pickle protocol 2" % name)
    s = pickle.loads(raw)
    if not isinstance(s, dict) or set(s) != {"segments", "device_traces", "allocator_settings"}:
        fail("%s: top level %r" % (name, type(s) if not isinstance(s, dict) else sorted(s)))
        return
    alloc, nblocks, reserved, all_in_torch_segs = {}, {}, {}, True
    for sg in s["segments"]:
        if set(sg) != SEG_KEYS:
            fail("%s: segment keys %s" % (name, sorted(sg)))
            return
        if sg["segment_type"] not in ("large", "small") or sg["segment_pool_id"] != (0, 0) or \
                not isinstance(sg["is_expandable"], bool) or sg["stream"] != 0:
            fail("%s: segment %r" % (name, {k: sg[k] for k in sg if k != "blocks"}))
        at, used = sg["address"], 0
        for b in sg["blocks"]:
            if set(b) != BLOCK_KEYS or b["state"] not in ("active_allocated", "inactive"):
                fail("%s: block %r" % (name, b))
                return
            if b["address"] != at:
                fail("%s: segment %#x: a block at %#x, expected %#x" % (name, sg["address"], b["address"], at))
            at += b["size"]
            check_frames(name, b["frames"])
            if b["state"] == "active_allocated":
                used += b["size"]
                alloc[sg["device"]] = alloc.get(sg["device"], 0) + b["size"]
                nblocks[sg["device"]] = nblocks.get(sg["device"], 0) + 1
                if want_frame and any(f["name"] == want_frame for f in b["frames"]):
                    want_frame = None
        if at != sg["address"] + sg["total_size"]:
            fail("%s: segment %#x: blocks cover %d of %d bytes" % (name, sg["address"], at - sg["address"],
                                                                   sg["total_size"]))
        if sg["allocated_size"] != used or sg["active_size"] != used:
            fail("%s: segment %#x allocated_size %d, its blocks %d" % (name, sg["address"], sg["allocated_size"], used))
        reserved[sg["device"]] = reserved.get(sg["device"], 0) + sg["total_size"]
        if expandable and not sg["is_expandable"]:
            fail("%s: segment %#x is not marked expandable" % (name, sg["address"]))
    if want_frame:
        fail("%s: no live block has the frame %r" % (name, want_frame))
    devs = sorted({r["device"] for r in rows})
    if len(s["device_traces"]) != max(devs) + 1:
        fail("%s: %d device traces for devices %s" % (name, len(s["device_traces"]), devs))
    for d in devs:
        last = max((r for r in rows if r["device"] == d), key=lambda r: r["end_ns"])
        if alloc.get(d, 0) != last["end_allocated"]:
            fail("%s: device %d: live blocks %d bytes, decoder's end_allocated %d" % (name, d, alloc.get(d, 0),
                                                                                     last["end_allocated"]))
        if exact_reserved and reserved.get(d, 0) != last["end_reserved"]:
            fail("%s: device %d: segments %d bytes, decoder's end_reserved %d" % (name, d, reserved.get(d, 0),
                                                                                 last["end_reserved"]))
        bal, last_t = 0, 0
        for e in s["device_traces"][d]:
            want = {"action", "addr", "size", "stream", "time_us", "frames"} if e.get("action") != "oom" else \
                {"action", "device_free", "size", "stream", "time_us", "frames"}
            if set(e) != want or e["action"] not in ACTIONS:
                fail("%s: trace entry %r" % (name, e))
                break
            check_frames(name, e["frames"])
            if e["time_us"] < last_t - 1000000:
                fail("%s: time_us goes back by more than a second" % name)
            last_t = max(last_t, e["time_us"])
            bal += e["size"] if e["action"] == "alloc" else -e["size"] if e["action"] == "free_completed" else 0
        if balance and bal != last["end_allocated"]:
            fail("%s: device %d: device_traces alloc - free %d, decoder's end_allocated %d" % (
                name, d, bal, last["end_allocated"]))
        nalloc = sum(1 for e in s["device_traces"][d] if e["action"] == "alloc")
        nfree = sum(1 for e in s["device_traces"][d] if e["action"] == "free_completed")
        if balance and nalloc - nfree != nblocks.get(d, 0):
            fail("%s: device %d: %d allocs - %d frees, %d live blocks" % (name, d, nalloc, nfree, nblocks.get(d, 0)))
    print("%s: %d segments, %s live bytes, %d trace entries, %d bytes" % (
        name, len(s["segments"]), alloc, sum(map(len, s["device_traces"])), len(raw)))


os.makedirs(WORK, exist_ok=True)


def mk(case):
    return outcheck.mk(MKTRACE, SRC, WORK, case)


check("attrib_loop", mk("attrib_loop"), want_frame="Module.to.<locals>.convert")
check("basic", mk("basic"), exact_reserved=True)
check("twodev", mk("twodev"), balance=False)  # frees of unknown pointers: not in the trace
check("drv_expandable", mk("drv_expandable"), expandable=True)
check("pause_resync", mk("pause_resync"), balance=False)  # blocks freed while paused never show a free
h200 = os.path.join(SRC, "h200", "driver", "ds13_z3", "dsmemtrace.vm.1183.rank0.zst")
check("ds13_z3_rank0", h200, exact_reserved=True, want_frame="Adam._init_group")

bad = [
    (["--torch-snapshot", os.path.join(WORK, "x.pickle"), mk("basic"), mk("twodev")], 1, "one process"),
    (["--torch-snapshot", os.path.join(WORK, "nodir", "x.pickle"), mk("basic")], 1, "cannot write"),
    (["--torch-snapshot", os.path.join(WORK, "x.pickle"), "--dump", mk("basic")], 1, "does not go with"),
    (["--torch-snapshot", os.path.join(WORK, "x.pickle"), os.path.join(SRC, "basic.txt")], 2, "basic.txt"),
]
for args, code, text in bad:
    rc, out, err = run(DECODE, *args)
    if rc != code or text not in err or len(err.strip().splitlines()) != 1:
        fail("dsmemdecode %s: exit %d (want %d), stderr %r" % (" ".join(args), rc, code, err))

outcheck.finish("tsnap")
