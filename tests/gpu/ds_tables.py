#!/usr/bin/env python3
"""The tables of docs/deepspeed.md, from traced DeepSpeed runs
(tests/decode/h200/grid or a ds/ folder of scripts/run-gpu-deepspeed.sh):
everything but the ThroughputTimer column comes from the traces through
dsmemdecode; the ThroughputTimer column is rank 0's own line, beside ours.

usage: ds_tables.py DSMEMDECODE DIR
"""
import glob
import json
import os
import subprocess
import sys

GIB = 2 ** 30
CATS = ("parameters", "gathered_parameters", "master_weights", "optimizer_states", "gradients", "activations",
        "temporaries", "buckets", "communication", "workspace", "other")
SHORT = {"parameters": "params", "gathered_parameters": "gathered", "master_weights": "master",
         "optimizer_states": "optim", "gradients": "grads", "activations": "activ", "temporaries": "temps",
         "buckets": "buckets", "communication": "comm", "workspace": "wkspace", "other": "other"}


def g(x):
    return "%.2f" % (x / GIB)


def decode(dec, args):
    p = subprocess.run([dec] + args, capture_output=True, text=True)
    if p.returncode not in (0,):
        sys.exit("%s %s: exit %d: %s" % (dec, " ".join(args[:3]), p.returncode, p.stderr[:300]))
    return json.loads(p.stdout)


def main():
    dec, top = sys.argv[1], sys.argv[2]
    runs = sorted(d for d in glob.glob(os.path.join(top, "*")) if os.path.isdir(os.path.join(d, "trace")))
    grid, host, cats = [], [], []
    for run in runs:
        name = os.path.basename(run)
        traces = sorted(glob.glob(os.path.join(run, "trace", "*.zst")))
        s = decode(dec, ["--summary", "--format", "json"] + traces)["runs"][0]
        r0 = s["ranks"][0]
        with open(os.path.join(run, "torch.rank0.json")) as f:
            t0 = json.load(f)
        tt = [st["throughput_timer"] for st in t0["steps"] if st.get("throughput_timer")]
        proc = decode(dec, ["--format", "json", traces[0]])["processes"][0]
        rows = [x for x in proc["steps"] if x["device"] == t0["device"]]
        last = rows[-1] if rows else None
        pk = max(rows, key=lambda x: x["peak_allocated"]) if rows else None
        off = t0["config"]["offload_optimizer"] != "none", t0["config"]["offload_param"] != "none"
        offs = {(False, False): "no", (True, True): "opt+param", (True, False): "opt", (False, True): "param"}[off]
        knobs = []
        if t0["config"]["reduce_bucket_size"] != 5e8:
            knobs.append("reduce_bucket %.0e" % t0["config"]["reduce_bucket_size"])
        if t0["config"]["allgather_bucket_size"] != 5e8:
            knobs.append("allgather_bucket %.0e" % t0["config"]["allgather_bucket_size"])
        oom = " **OOM in step %d**" % t0["oom"]["step"] if t0.get("oom") else ""
        mx = s["max"]
        grid.append("| %s | %d | %d | %s%s | %d | %d | %s | %s | %s | %s | %s | %s | %s |%s" % (
            r0["model"], r0["gpus"], r0["zero_stage"], offs, (", " + ", ".join(knobs)) if knobs else "",
            r0["micro_batch"], r0["seq"],
            "%.1f" % mx["time_per_10_steps_s"] if mx.get("time_per_10_steps_s") is not None else "?",
            g(mx["max_mem_allocated"]), g(mx["mem_allocated"]),
            "%.2f / %.2f" % (tt[-1]["max_mem_allocated_gb"], tt[-1]["mem_allocated_gb"]) if tt else "-",
            g(mx["peak_reserved"]), g(mx["peak_device"]) if mx.get("peak_device") is not None else "?",
            ", ".join("%s %s" % (c["category"], g(c["bytes"])) for c in r0["breakdown_at_max"]), oom))
        hm = proc.get("host_memory") or {}
        init = [x for x in proc.get("init", []) if x["device"] == t0["device"]]
        host.append("| %s | %d | %s | %d | %d | %s | %s | %s | %s | %s |" % (
            r0["model"], r0["zero_stage"], offs, r0["micro_batch"], r0["seq"],
            g(init[-1]["end_host_rss"]) if init and init[-1].get("end_host_rss") else "?",
            g(max(x.get("peak_host_rss") or 0 for x in rows)) if rows else "?",
            g(hm["peak_vsz"]) if hm else "?",
            ", ".join("%s %s" % (k, g(v)) for k, v in (hm.get("phase_peak_rss") or {}).items()) or "?",
            g(r0["host_pinned_peak"]) if r0.get("host_pinned_peak") is not None else "?"))
        if pk and last:
            cats.append("| %s | %d | %d | %s | %d | %d | %s | %s | %s |" % (
                r0["model"], r0["gpus"], r0["zero_stage"], offs + ((", " + ", ".join(knobs)) if knobs else ""),
                r0["micro_batch"], r0["seq"], (pk.get("peak_phase") or {}).get("phase", "?"),
                " / ".join(g(pk["peak_breakdown"].get(c, 0)) for c in CATS),
                " / ".join(g(last["end_breakdown"].get(c, 0)) for c in CATS)))
    print("### Seed-style table (rank 0; max over ranks for the memory columns)\n")
    print("| model | GPUs | ZeRO | offload | mbs | seq | 10 steps s | MaxMemAllocated | MemAllocated |"
          " ThroughputTimer Max / Mem | peak reserved | peak device | breakdown at MaxMemAllocated (rank 0) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    print("\n".join(grid))
    print("\n### Host memory (rank 0, GiB): the seed's last table\n")
    print("| model | ZeRO | offload | mbs | seq | RSS at init end | peak RSS in training | peak virtual size |"
          " peak RSS by phase | peak pinned |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    print("\n".join(host))
    print("\n### By category (rank 0, GiB) at the largest step peak, then at the last step's end\n")
    print("Order: " + " / ".join(SHORT[c] for c in CATS) + "\n")
    print("| model | GPUs | ZeRO | offload | mbs | seq | peak phase | at the peak | at the last step's end |")
    print("|---|---|---|---|---|---|---|---|---|")
    print("\n".join(cats))


if __name__ == "__main__":
    main()
