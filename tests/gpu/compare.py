#!/usr/bin/env python3
"""Compare PyTorch's own per-step counters (tests/gpu/loops.py JSON) with
dsmemdecode's per-step numbers (dsmemdecode --format json) for device 0.

    python3 tests/gpu/compare.py LOOP.json DECODED.json [--json-out F]
                                 [--expandable | --no-expandable] [--name NAME]

Compared byte for byte, every step:
    peak_allocated == max_allocated      end_allocated == allocated
    peak_reserved  == max_reserved       end_reserved  == reserved
The reserved pair too with expandable segments (PyTorch maps memory with
cuMemCreate/cuMemMap) when the trace carries the driver level; traces
without it (older ones) report those fields as "not comparable at this
level".

Prints a per-step table and one summary line; exits 0 when every compared
field agrees and the step counts match, 1 otherwise, 2 on unreadable input.
"""
import argparse
import json
import sys

ALLOC_PAIRS = (("peak_allocated", "max_allocated"), ("end_allocated", "allocated"))
RESERVED_PAIRS = (("peak_reserved", "max_reserved"), ("end_reserved", "reserved"))
NC = "not comparable at this level"


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise SystemExit(f"compare: cannot read {path}: {e}") from None


def pick_process(dec, pid):
    procs = dec.get("processes") or []
    if pid is not None:
        for p in procs:
            if str(p.get("pid")) == str(pid):
                return p, None
    if len(procs) == 1:
        note = None if pid is None else f"no process with pid {pid}; using the only one (pid {procs[0].get('pid')})"
        return procs[0], note
    with_steps = [p for p in procs if p.get("steps")]
    if len(with_steps) == 1:
        return with_steps[0], f"pid {pid} not found; using the only process with steps (pid {with_steps[0].get('pid')})"
    return None, f"cannot choose among {len(procs)} processes (pids {[p.get('pid') for p in procs]}; wanted {pid})"


def as_int(v):
    if isinstance(v, bool) or v is None:
        return None
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


def compare(loop, dec, expandable):
    res = {
        "loop": loop.get("loop"),
        "expandable": expandable,
        "reserved_compared": not expandable,
        "steps_torch": len(loop.get("steps") or []),
        "steps_trace": 0,
        "steps_compared": 0,
        "fields_compared": 0,
        "disagreements": 0,
        "step_count_mismatch": False,
        "problems": [],
        "notes": [],
        "rows": [],
    }
    proc, note = pick_process(dec, loop.get("pid"))
    if note:
        (res["problems"] if proc is None else res["notes"]).append(note)
    if proc is None:
        res["step_count_mismatch"] = True
        return res
    # a trace with the driver level records torch's cuMemCreate/cuMemMap:
    # reserved is comparable with expandable segments too
    if expandable and proc is not None and proc.get("driver") is not None:
        expandable = False
        res["expandable"] = True
        res["reserved_compared"] = True
        res["notes"].append("expandable segments: reserved from the driver level (cuMemCreate/cuMemMap)")
    if dec.get("format") not in ("dsmemdecode-steps/2", "dsmemdecode-steps/3"):
        res["notes"].append(f"decoder format is {dec.get('format')!r}, expected 'dsmemdecode-steps/3'")
    if proc.get("truncated"):
        res["problems"].append("trace is marked truncated")
    if proc.get("damaged"):
        res["problems"].append("trace is marked damaged")
    for k in ("lost_events", "missing_events"):
        if as_int(proc.get(k)):
            res["problems"].append(f"{k} = {proc.get(k)}")
    for k in ("events", "ooms", "lost_events", "missing_events"):
        if k in proc:
            res[f"trace_{k}"] = as_int(proc.get(k))
    if loop.get("oom_caught") is not None and "ooms" in proc:
        res["notes"].append(f"OutOfMemoryError caught by the loop: {loop.get('oom_caught')}, OOM events in the trace: {proc.get('ooms')}")
    all_steps = proc.get("steps") or []
    devices = sorted({as_int(s.get("device")) for s in all_steps}, key=lambda d: (d is None, d))
    tsteps = {}
    for s in all_steps:
        if as_int(s.get("device")) != 0:
            continue
        k = as_int(s.get("step"))
        if k in tsteps:
            res["problems"].append(f"step {k} appears twice for device 0 in the trace")
        tsteps[k] = s
    if devices and devices != [0]:
        res["notes"].append(f"devices in the trace: {devices} (only device 0 compared)")
    psteps = {}
    for s in loop.get("steps") or []:
        psteps[as_int(s.get("step"))] = s
    res["steps_trace"] = len(tsteps)
    if set(tsteps) != set(psteps):
        res["step_count_mismatch"] = True
        only_t = sorted(k for k in tsteps if k not in psteps and k is not None)
        only_p = sorted(k for k in psteps if k not in tsteps and k is not None)
        res["problems"].append(
            f"step sets differ: torch has {len(psteps)} steps, trace has {len(tsteps)} for device 0"
            + (f"; only in trace: {only_t}" if only_t else "")
            + (f"; only in torch: {only_p}" if only_p else ""))

    # a loop that pauses tracing (pause_step) expects exactly that step to be
    # flagged "paused" by the decoder; its numbers are not comparable, every
    # other step is (the decoder resynchronises from the allocator's totals)
    pause_step = as_int(loop.get("pause_step"))
    flagged = sorted(k for k, t in tsteps.items() if t.get("paused"))
    if pause_step is not None or flagged:
        want = [pause_step] if pause_step is not None else []
        if flagged != want:
            res["problems"].append(f"steps flagged paused by the decoder: {flagged}, expected {want}")
        else:
            res["notes"].append(f"step {pause_step} overlaps a pause: flagged, not compared")
    reserved_nonzero = 0
    for k in sorted(k for k in psteps if k in tsteps):
        if pause_step is not None and k == pause_step:
            continue
        t, p = tsteps[k], psteps[k]
        row = {"step": k, "fields": {}, "ok": True,
               "allocs": as_int(t.get("allocs")), "frees": as_int(t.get("frees"))}
        for tf, pf in ALLOC_PAIRS + RESERVED_PAIRS:
            tv, pv = as_int(t.get(tf)), as_int(p.get(pf))
            if (tf, pf) in RESERVED_PAIRS and expandable:
                row["fields"][tf] = {"trace": tv, "torch": pv, "status": NC}
                if tv:
                    reserved_nonzero += 1
                continue
            agree = tv is not None and pv is not None and tv == pv
            row["fields"][tf] = {"trace": tv, "torch": pv, "status": "ok" if agree else "DIFF"}
            res["fields_compared"] += 1
            if not agree:
                res["disagreements"] += 1
                row["ok"] = False
        res["steps_compared"] += 1
        res["rows"].append(row)
    if expandable:
        res["notes"].append("expandable segments: peak_reserved/end_reserved " + NC
                            + " (cuMemCreate/cuMemMap, recorded by a driver-level feature)")
        if reserved_nonzero:
            res["notes"].append(f"expandable segments: trace reserved is non-zero in {reserved_nonzero} field(s) "
                                "(expected 0 at this level)")
    res["ok"] = (res["disagreements"] == 0 and not res["step_count_mismatch"] and not res["problems"]
                 and res["steps_compared"] > 0)
    if res["steps_compared"] == 0 and not res["problems"]:
        res["problems"].append("no step compared")
    return res


def fmt_cell(f):
    if f["status"] == NC:
        return f"n/c: trace {f['trace']} / torch {f['torch']}"
    if f["status"] == "ok":
        return str(f["trace"])
    tv, pv = f["trace"], f["torch"]
    d = "" if tv is None or pv is None else f" ({tv - pv:+d})"
    return f"{tv} != {pv}{d}"


def render(res, name):
    lines = [f"== {name}: trace (dsmemdecode) vs torch, device 0"
             + (" [expandable segments: reserved not comparable at this level]" if res["expandable"] and not res["reserved_compared"] else "")]
    hdr = ("step", "peak_allocated", "end_allocated", "peak_reserved", "end_reserved", "allocs", "frees", "")
    rows = [hdr]
    for r in res["rows"]:
        f = r["fields"]
        rows.append((str(r["step"]), fmt_cell(f["peak_allocated"]), fmt_cell(f["end_allocated"]),
                     fmt_cell(f["peak_reserved"]), fmt_cell(f["end_reserved"]),
                     str(r["allocs"]), str(r["frees"]), "ok" if r["ok"] else "DIFF"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(hdr))]
    for row in rows:
        lines.append("  ".join(c.rjust(w) if i < len(hdr) - 1 else c for i, (c, w) in enumerate(zip(row, widths))).rstrip())
    for p in res["problems"]:
        lines.append(f"  PROBLEM: {p}")
    for n in res["notes"]:
        lines.append(f"  note: {n}")
    lines.append(summary_line(res, name))
    return "\n".join(lines)


def summary_line(res, name):
    return (f"compare: {name}: steps torch={res['steps_torch']} trace={res['steps_trace']} "
            f"compared={res['steps_compared']} fields={res['fields_compared']} "
            f"disagreements={res['disagreements']} step_count_mismatch={int(res['step_count_mismatch'])} "
            f"problems={len(res['problems'])} -> {'OK' if res['ok'] else 'FAIL'}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("loop_json")
    ap.add_argument("decoded_json")
    ap.add_argument("--json-out", help="write the comparison as JSON here")
    ap.add_argument("--name", help="label for the output (default: the loop's name)")
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--expandable", dest="expandable", action="store_true", default=None,
                   help="treat as expandable segments (default: from the loop JSON)")
    g.add_argument("--no-expandable", dest="expandable", action="store_false")
    args = ap.parse_args(argv)

    try:
        loop = load(args.loop_json)
        dec = load(args.decoded_json)
    except SystemExit as e:
        print(e, file=sys.stderr)
        return 2
    expandable = args.expandable
    if expandable is None:
        expandable = bool(loop.get("expandable")) or "expandable_segments:True" in str(loop.get("alloc_conf", ""))
    res = compare(loop, dec, expandable)
    name = args.name or res["loop"] or "loop"
    res["name"] = name
    print(render(res, name))
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(res, f, indent=1)
            f.write("\n")
    return 0 if res["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
