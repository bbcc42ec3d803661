#!/usr/bin/env python3
"""Judge and summarize one driver-level check (tests/gpu/run_driver.sh).

    python3 tests/gpu/summarize_driver.py CHECK DIR     writes DIR/result.json, prints a line
    python3 tests/gpu/summarize_driver.py --all RESULTS  prints the table of every DIR/result.json

A check passes when:
  - the traced run computed the same loss and parameter checksum as the plain one;
  - every step's allocated (peak, end) equals torch's counters, and reserved
    (peak, end) too, except with backend:cudaMallocAsync, where torch's
    "reserved" is the driver pool's own figure (reported, not judged);
  - the trace carries the driver level (a SOURCE record and device-level numbers);
  - profiler: torch.profiler recorded the same number of CUDA events with and
    without the library, and the trace shows the hand-over (SOURCE yield);
  - nccl: each rank's device-level breakdown attributes bytes to NCCL.
"""
import glob
import json
import os
import sys

PAIRS = (("peak_allocated", "max_allocated"), ("end_allocated", "allocated"))
RES_PAIRS = (("peak_reserved", "max_reserved"), ("end_reserved", "reserved"))


def load(p):
    with open(p) as f:
        return json.load(f)


def judge(check, d):
    res = {"check": check, "ok": True, "problems": [], "ranks": []}

    def bad(msg):
        res["ok"] = False
        res["problems"].append(msg)

    plains = sorted(glob.glob(os.path.join(d, "plain*.json")))
    traced = sorted(glob.glob(os.path.join(d, "traced*.json")))
    decoded = sorted(glob.glob(os.path.join(d, "*.decoded.json")))
    replay = not plains  # a stored run replayed in CI: no plain run beside it
    if not traced or (plains and len(plains) != len(traced)):
        bad(f"runs missing: {len(plains)} plain, {len(traced)} traced")
        return res
    decs = []
    for p in decoded:
        try:
            for proc in load(p).get("processes", []):
                decs.append(proc)
        except (OSError, ValueError) as e:
            bad(f"{p}: {e}")
    for pp, tp in zip(plains or [None] * len(traced), traced):
        pj, tj = (load(pp) if pp else None), load(tp)
        if replay:  # only what the trace must show
            pj = {k: tj.get(k) for k in ("final_loss", "param_checksum", "cuda_events")}
            if check == "profiler":
                pj["cuda_events"] = tj.get("cuda_events_plain")
        for k in ("final_loss", "param_checksum"):
            if pj.get(k) != tj.get(k):
                bad(f"rank {tj.get('rank')}: {k} differs with the preload: {pj.get(k)} vs {tj.get(k)}")
        if check == "profiler" and pj.get("cuda_events") != tj.get("cuda_events"):
            bad(f"torch.profiler CUDA events: {pj.get('cuda_events')} without, {tj.get('cuda_events')} with the library")
        proc = next((x for x in decs if str(x.get("pid")) == str(tj.get("pid"))), None)
        if proc is None:
            bad(f"no decoded trace for pid {tj.get('pid')}")
            continue
        dev = tj.get("device", 0)
        steps = {s["step"]: s for s in proc.get("steps", []) if s.get("device") == dev}
        compared = disagree = 0
        pairs = PAIRS + (RES_PAIRS if check != "async" else ())
        for ts in tj["steps"]:
            ds = steps.get(ts["step"])
            if ds is None:
                bad(f"rank {tj.get('rank')}: step {ts['step']} missing in the trace")
                continue
            for a, b in pairs:
                compared += 1
                if ds.get(a) != ts[b]:
                    disagree += 1
                    if disagree <= 5:
                        bad(f"rank {tj.get('rank')} step {ts['step']}: {a}={ds.get(a)} torch {b}={ts[b]}")
        if len(steps) != len(tj["steps"]):
            bad(f"rank {tj.get('rank')}: {len(steps)} steps in the trace, {len(tj['steps'])} in torch's")
        drv = proc.get("driver") or {}
        srcs = drv.get("sources") or []
        bd = next((b for b in drv.get("device_breakdown") or [] if b.get("device") == dev), {})
        last = steps.get(max(steps)) if steps else {}
        r = {
            "rank": tj.get("rank"),
            "fields": compared,
            "disagreements": disagree,
            "sources": [f"{s.get('via')}:{s.get('reason')}" + (f"({s.get('name')})" if s.get("name") else "") for s in srcs],
            "events": drv.get("events"),
            "breakdown": bd,
            "end_device_last_step": last.get("end_device"),
            "peak_device_last_step": last.get("peak_device"),
            "torch_reserved_end": tj.get("reserved_end"),
            "device_used_end_mem_get_info": tj.get("device_used_end"),
            "cuda_events": (pj.get("cuda_events"), tj.get("cuda_events")),
        }
        res["ranks"].append(r)
        if not srcs:
            bad(f"rank {tj.get('rank')}: no SOURCE record (driver level missing)")
        if last.get("end_device") is None:
            bad(f"rank {tj.get('rank')}: no device-level numbers")
        if check == "profiler" and not any(s.get("reason") == "yield" for s in srcs):
            bad("no hand-over (SOURCE yield) in the trace of the profiled run")
        if check == "nccl" and not (bd.get("nccl") or 0) > 0:
            bad(f"rank {tj.get('rank')}: no bytes attributed to NCCL at the device-level peak")
    if not replay:
        with open(os.path.join(d, "result.json"), "w") as f:
            json.dump(res, f, indent=1)
    return res


def line(r):
    s = f"{r['check']:<11} {'PASS' if r['ok'] else 'FAIL'}"
    for k in r["ranks"]:
        bd = k["breakdown"] or {}
        s += (f" | rank {k['rank']}: {k['fields']} fields, {k['disagreements']} disagreements; sources {k['sources']};"
              f" peak_device {bd.get('peak_device')} (allocated {bd.get('allocated')}, cached {bd.get('cached')},"
              f" nccl {bd.get('nccl')}, workspace {bd.get('workspace')}, statics {bd.get('statics')},"
              f" other {bd.get('other')}, context {bd.get('context')}, nvml_used {bd.get('nvml_used')});"
              f" end_device {k['end_device_last_step']}, torch reserved {k['torch_reserved_end']},"
              f" device used (mem_get_info) {k['device_used_end_mem_get_info']}")
        if r["check"] == "profiler":
            s += f"; CUDA events without/with {k['cuda_events']}"
    for p in r["problems"]:
        s += f"\n    {p}"
    return s


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--all":
        ok = True
        for p in sorted(glob.glob(os.path.join(sys.argv[2], "*", "result.json"))):
            r = load(p)
            ok &= r["ok"]
            print(line(r))
        return 0 if ok else 1
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    r = judge(sys.argv[1], sys.argv[2])
    print(line(r))
    return 0 if r["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
