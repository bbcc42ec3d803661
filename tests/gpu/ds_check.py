#!/usr/bin/env python3
"""Check traced DeepSpeed runs (scripts/run-gpu-deepspeed.sh) against the
references each run carries: examples/deepspeed_sft/main.py's per-rank torch
counters, DeepSpeed's ThroughputTimer values and DeepSpeed's own partition
sizes (torch.rankR.json beside each run's trace/ folder).

For every run and rank:
  - steps: per-step peak_allocated / end_allocated / peak_reserved /
    end_reserved from the trace against max_memory_allocated /
    memory_allocated / max_memory_reserved / memory_reserved read after the
    step, byte for byte;
  - timer: rank r's ThroughputTimer values (round(x / 2**30, 2) of
    memory_allocated() and max_memory_allocated() at the end of
    DeepSpeedEngine.step) against the trace's rounded end_allocated and
    peak_allocated of the same step;
  - partitions: the trace's parameters, master_weights, gradients and
    optimizer_states at the last step's end against the bytes of DeepSpeed's
    GPU-resident partition tensors (main.py partition_sizes: padding
    included).  The trace counts torch's blocks, as memory_allocated() does:
    a tensor's size rounded up to 512 bytes, and for a large tensor given a
    fresh segment (its size rounded up to 2 MiB) the whole segment when the
    rest is under 1 MiB, which the allocator does not split off
    (CUDACachingAllocator: kRoundLarge, kSmallSize).  So per category
    -512 * n <= trace - DeepSpeed <= 512 + n * (1 MiB - 1) for n tensors;
  - oom: a run stopped by an out-of-memory error (main.py exits 3): the
    trace's OOM records, and torch's counters of the steps before it.

usage: ds_check.py [--decoder DSMEMDECODE] [--json OUT] DIR...
DIR: a folder of runs (each with trace/ and torch.rank*.json) or one run.
Without --decoder the JSON decoded on the GPU host beside the traces is used.
Exit 1 when any step field, timer value or partition size disagrees.
"""
import argparse
import glob
import json
import os
import re
import subprocess
import sys

FIELDS = (("peak_allocated", "max_allocated"), ("end_allocated", "allocated"),
          ("peak_reserved", "max_reserved"), ("end_reserved", "reserved"))
CATS = ("parameters", "master_weights", "gradients", "optimizer_states")
GIB = 2 ** 30


def runs_in(d):
    if glob.glob(os.path.join(d, "torch.rank*.json")):
        return [d]
    return sorted({os.path.dirname(p) for p in glob.glob(os.path.join(d, "*", "torch.rank*.json"))})


def decoded(run, trace, decoder):
    if decoder:
        p = subprocess.run([decoder, "--format", "json", trace], capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError("%s: %s exited %d: %s" % (trace, decoder, p.returncode, p.stderr.strip()[:300]))
        return json.loads(p.stdout)
    with open(os.path.join(run, os.path.basename(trace)[:-4] + ".json")) as f:
        return json.load(f)


def check_rank(run, ref, proc):
    r = {"rank": ref["rank"], "steps": 0, "fields": 0, "disagree": [], "timer": 0, "timer_disagree": [],
         "partitions": {}, "partition_disagree": [], "oom": None}
    dev = ref.get("device", 0)  # the rank's CUDA device (its LOCAL_RANK)
    rows = {s["step"]: s for s in proc.get("steps", []) if s.get("device") == dev and "step" in s}
    for t in ref["steps"]:
        row = rows.get(t["step"])
        if row is None:
            r["disagree"].append("step %d: not in the trace" % t["step"])
            continue
        r["steps"] += 1
        for ours, theirs in FIELDS:
            r["fields"] += 1
            if row[ours] != t[theirs]:
                r["disagree"].append("step %d %s: trace %d, torch %d (%+d)"
                                     % (t["step"], ours, row[ours], t[theirs], row[ours] - t[theirs]))
        tt = t.get("throughput_timer")
        if tt:
            r["timer"] += 1
            for ours, key in (("peak_allocated", "max_mem_allocated_gb"), ("end_allocated", "mem_allocated_gb")):
                if round(row[ours] / GIB, 2) != tt[key]:
                    r["timer_disagree"].append("step %d %s: trace %.2f, ThroughputTimer %.2f"
                                               % (t["step"], key, round(row[ours] / GIB, 2), tt[key]))
    parts = ref.get("partitions") or {}
    if ref["steps"] and "error" not in parts:
        last = rows.get(ref["steps"][-1]["step"])
        bk = (last or {}).get("end_breakdown") or {}
        for c in CATS:
            p = parts.get(c)
            if p is None or c not in bk:
                continue
            diff = bk[c] - p["bytes"]
            n = p["tensors"]
            r["partitions"][c] = {"trace": bk[c], "deepspeed": p["bytes"], "tensors": n, "diff": diff}
            if not -512 * n <= diff <= 512 + n * (2 ** 20 - 1):
                r["partition_disagree"].append("%s: trace %d, DeepSpeed %d (%+d, %d tensors)"
                                               % (c, bk[c], p["bytes"], diff, p["tensors"]))
    elif "error" in parts:
        r["partition_disagree"].append("partition sizes not read: " + parts["error"])
    if ref.get("oom"):
        r["oom"] = {"torch": ref["oom"], "trace_ooms": proc.get("ooms"), "oom_reports": proc.get("oom_reports")}
        r["disagree"] += check_oom(ref["oom"], proc.get("oom_reports") or [])
    return r


def check_oom(t, reps):
    """The trace's first OOM report against torch's OutOfMemoryError message
    ("Tried to allocate X GiB ... Of the allocated memory Y GiB is allocated
    by PyTorch"): the request, the allocated bytes (ours and the allocator's
    own at the OOM), and a breakdown that adds up to them."""
    if not reps:
        return ["OOM: torch raised one, the trace reports none"]
    o, bad = reps[0], []
    m = re.search(r"Tried to allocate ([0-9.]+) GiB", t["message"])
    if m and round(o["requested"] / GIB, 2) != float(m.group(1)):
        bad.append("OOM: requested %.2f GiB, torch says %s" % (o["requested"] / GIB, m.group(1)))
    m = re.search(r"Of the allocated memory ([0-9.]+) GiB is allocated by PyTorch", t["message"])
    if m and round(o["allocated"] / GIB, 2) != float(m.group(1)):
        bad.append("OOM: allocated %.2f GiB, torch says %s" % (o["allocated"] / GIB, m.group(1)))
    if o["allocated"] != o["torch_allocated"]:
        bad.append("OOM: allocated %d, the allocator's total %d" % (o["allocated"], o["torch_allocated"]))
    bk = o.get("breakdown") or {}
    live = sum(v for k, v in bk.items() if k not in ("cached", "temporaries_by_phase"))
    if live != o["allocated"]:
        bad.append("OOM: breakdown adds up to %d, allocated %d" % (live, o["allocated"]))
    return bad


def oom_line(o):
    rep = (o.get("oom_reports") or [{}])[0]
    bk = {k: v for k, v in (rep.get("breakdown") or {}).items() if isinstance(v, int) and v}
    top = sorted(bk.items(), key=lambda kv: -kv[1])[:4]
    return "requested %.2f GiB with %.2f GiB allocated (%s)" % (
        rep.get("requested", 0) / GIB, rep.get("allocated", 0) / GIB,
        ", ".join("%s %.2f" % (k, v / GIB) for k, v in top))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--decoder")
    ap.add_argument("--json")
    ap.add_argument("dirs", nargs="+")
    a = ap.parse_args()
    results, bad = [], 0
    for d in a.dirs:
        rs = runs_in(d)
        if not rs:
            print("ds_check: %s: no runs (no torch.rank*.json)" % d, file=sys.stderr)
            return 2
        for run in rs:
            name = os.path.basename(os.path.normpath(run))
            for rf in sorted(glob.glob(os.path.join(run, "torch.rank*.json"))):
                with open(rf) as f:
                    ref = json.load(f)
                traces = [t for t in glob.glob(os.path.join(run, "trace", "*.zst"))
                          if re.search(r"\.rank%d\.zst$" % ref["rank"], t)]
                if len(traces) != 1:
                    print("%s rank %d: %d traces" % (name, ref["rank"], len(traces)))
                    bad += 1
                    continue
                try:
                    procs = decoded(run, traces[0], a.decoder)["processes"]
                except (OSError, ValueError, RuntimeError) as e:
                    print("%s rank %d: %s" % (name, ref["rank"], e))
                    bad += 1
                    continue
                r = check_rank(run, ref, procs[0])
                r["run"] = name
                results.append(r)
                bad += bool(r["disagree"] or r["timer_disagree"] or r["partition_disagree"])
                pd = ", ".join("%s %+d" % (c, v["diff"]) for c, v in r["partitions"].items())
                print("%-50s rank %d: %d steps x 4 fields, %d disagreements; ThroughputTimer %d steps, %d disagreements;"
                      " partitions (trace - DeepSpeed, bytes): %s%s"
                      % (name, r["rank"], r["steps"], len(r["disagree"]), r["timer"], len(r["timer_disagree"]),
                         pd or "-", "; OOM: trace has %s OOM records, the first: %s" % (r["oom"]["trace_ooms"], oom_line(r["oom"]))
                         if r["oom"] else ""))
                for m in r["disagree"] + r["timer_disagree"] + r["partition_disagree"]:
                    print("    " + m)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)
    print("%d rank(s) checked, %d with disagreements" % (len(results), bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
