#!/usr/bin/env python3
"""--perfetto (Chrome trace-event JSON) on golden traces.

For every trace: the file parses with json; every event has the fields its
phase needs; timestamps never go back on a track (counters: strictly
increase); B/E slices nest per thread and all close.  Against the JSON
report of the same trace (not hard-coded numbers): each interval's peak and
end of the allocated, reserved, device and pinned counters equal the
report's, the category tracks of a device add up to its allocated track at
every microsecond and end at the last interval's end_breakdown, there is one
B slice per NVTX push of the script, one OOM instant per OOM, one instant per
interval after init.  perfetto/mix.txt: the hand-worked slices, instants and
counters of its comment.  Bad uses: one line, exit 1.

usage: perfetto.py MKTRACE DSMEMDECODE SRCDIR WORKDIR
"""
import json
import os
import re
import subprocess
import sys

MK, DEC, SRC, WORK = [os.path.abspath(a) for a in sys.argv[1:5]]
os.makedirs(WORK, exist_ok=True)
fails = []
CATS = ["parameters", "gathered_parameters", "master_weights", "optimizer_states", "gradients", "activations",
        "temporaries", "buckets", "communication", "workspace", "other"]

# (name, trace scripts or files, exact): exact: timestamps are one event per
# microsecond, so interval bounds fall between events and the category
# tracks can be compared with allocated at every microsecond (no pause, no
# frees of unknown blocks)
CASES = [
    ("basic", ["basic.txt"], True),
    ("attrib_loop", ["attrib_loop.txt"], True),
    ("attrib_torch", ["attrib_torch.txt"], True),
    ("attrib_zero3", ["attrib_zero3.txt"], True),
    ("deepspeed", ["deepspeed.txt"], True),
    ("host_mem", ["host_mem.txt"], True),
    ("drv_host", ["drv_host.txt"], True),
    ("drv_vmm", ["drv_vmm.txt"], True),
    ("drv_torch_async", ["drv_torch_async.txt"], True),
    ("marks", ["marks.txt"], True),
    ("startend", ["startend.txt"], True),
    ("twodev", ["twodev.txt"], False),  # a free of an unknown pointer
    ("pause", ["pause.txt"], False),
    ("two_ranks", ["summary/rank0.txt", "summary/rank1.txt"], True),
    ("mix", ["perfetto/mix.txt"], True),
    ("h200_oom", ["h200/oom.zst"], False),
]


def run(args):
    p = subprocess.run([DEC] + args, cwd=WORK, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if p.returncode < 0:
        raise AssertionError("dsmemdecode %s died by signal %d" % (args, -p.returncode))
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def traces_of(files):
    out = []
    for f in files:
        if f.endswith(".zst"):
            out.append(os.path.join(SRC, f))
            continue
        z = os.path.join(WORK, f.replace("/", "_").replace(".txt", ".zst"))
        subprocess.run([MK, os.path.join(SRC, f), z], check=True, stdout=subprocess.DEVNULL)
        out.append(z)
    return out


def check_format(name, doc):
    """fields, monotonic tracks, nesting; returns the events"""
    f = []
    if doc.get("otherData", {}).get("format") != "dsmemdecode-perfetto/1":
        f.append("otherData.format missing")
    evs = doc.get("traceEvents")
    if not isinstance(evs, list) or not evs:
        return ["%s: no traceEvents" % name], []
    last = {}
    stacks = {}
    for i, e in enumerate(evs):
        ph = e.get("ph")
        what = "%s event %d %r" % (name, i, e)
        if ph not in ("M", "C", "B", "E", "i", "b", "e"):
            f.append("%s: unknown ph" % what)
            continue
        if not isinstance(e.get("pid"), int) or not isinstance(e.get("name"), str):
            f.append("%s: pid or name missing" % what)
        if ph == "M":
            if "args" not in e:
                f.append("%s: metadata without args" % what)
            continue
        ts = e.get("ts")
        if not isinstance(ts, (int, float)) or ts < 0:
            f.append("%s: bad ts" % what)
            continue
        if ph == "C":
            if not isinstance(e.get("args", {}).get("bytes"), int):
                f.append("%s: counter without integer args.bytes" % what)
            key, strict = ("C", e["pid"], e["name"]), True
        elif ph in ("B", "E") or (ph == "i" and e.get("s") == "t"):
            if not isinstance(e.get("tid"), int):
                f.append("%s: no tid" % what)
            key, strict = ("T", e["pid"], e.get("tid")), False
        elif ph in ("b", "e"):
            if not isinstance(e.get("id"), str) or not isinstance(e.get("tid"), int) or "cat" not in e:
                f.append("%s: async event without id, tid or cat" % what)
            key, strict = ("A", e["pid"], e.get("id")), False
        else:
            if e.get("s") != "p":
                f.append("%s: instant without scope" % what)
            key, strict = ("P", e["pid"]), False
        if key in last and (ts < last[key] or (strict and ts == last[key])):
            f.append("%s: time goes back on track %r (%r after %r)" % (what, key, ts, last[key]))
        last[key] = ts
        if ph in ("B", "E"):
            st = stacks.setdefault((e["pid"], e["tid"]), [])
            if ph == "B":
                st.append(e["name"])
            elif not st or st[-1] != e["name"]:
                f.append("%s: E does not close the innermost open slice %r" % (what, st[-1:]))
            else:
                st.pop()
    for k, st in stacks.items():
        if st:
            f.append("%s: thread %r ends with open slices %r" % (name, k, st))
    return f, evs


def series(evs, pid, track):
    return [(e["ts"], e["args"]["bytes"]) for e in evs if e["ph"] == "C" and e["pid"] == pid and e["name"] == track]


def value_at(s, t):
    v = 0
    for ts, x in s:
        if ts > t:
            break
        v = x
    return v


def check_report(name, evs, rep, t0, exact, scripts):
    f = []
    pids = {}
    for e in evs:
        if e["ph"] == "M" and e["name"] == "process_name":
            m = re.search(r"\(([^()]*)\)$", e["args"]["name"])
            pids[m.group(1) if m else None] = e["pid"]
    for p in rep["processes"]:
        pid = pids.get(p["file"])
        if pid is None:
            f.append("%s: no trace process for %s" % (name, p["file"]))
            continue
        rows = p["steps"] + p["init"] + p["tail"] + p["eval"]
        us = lambda ns: (ns - t0) / 1000.0
        mine = [e for e in evs if e["pid"] == pid]
        for dev in sorted({r["device"] for r in rows}):
            tracks = [("allocated", "peak_allocated", "end_allocated"), ("reserved", "peak_reserved", "end_reserved"),
                      ("device", "peak_device", "end_device")]
            for tr, pk, en in tracks:
                s = series(mine, pid, "cuda:%d %s" % (dev, tr))
                drows = [r for r in rows if r["device"] == dev and r[pk] is not None]
                if not drows:
                    if s:
                        f.append("%s: counter cuda:%d %s without the level in the report" % (name, dev, tr))
                    continue
                if exact:
                    for r in drows:
                        a, b = us(r["start_ns"]), us(r["end_ns"])
                        peak = max([value_at(s, a)] + [x for ts, x in s if a < ts <= b])
                        if peak != r[pk] or value_at(s, b) != r[en]:
                            f.append("%s: cuda:%d %s over [%s, %s]: peak %d end %d, report %d %d" % (
                                name, dev, tr, a, b, peak, value_at(s, b), r[pk], r[en]))
                else:  # the run's maximum and the final value
                    lastrow = max(drows, key=lambda r: r["end_ns"])
                    if max([0] + [x for _, x in s]) != max(r[pk] for r in drows) or (s[-1][1] if s else 0) != lastrow[en]:
                        f.append("%s: cuda:%d %s: max %d end %d, report %d %d" % (
                            name, dev, tr, max([0] + [x for _, x in s]), s[-1][1] if s else 0,
                            max(r[pk] for r in drows), lastrow[en]))
            alloc = series(mine, pid, "cuda:%d allocated" % dev)
            cats = {c: series(mine, pid, "cuda:%d %s" % (dev, c)) for c in CATS}
            if not any(cats.values()) and alloc:
                f.append("%s: cuda:%d has no category tracks" % (name, dev))
            if exact:
                ticks = sorted({int(ts) for s in [alloc] + list(cats.values()) for ts, _ in s})
                for t in ticks:
                    tot = sum(value_at(s, t + 0.999) for s in cats.values())
                    if tot != value_at(alloc, t + 0.999):
                        f.append("%s: cuda:%d at %d us: categories add up to %d, allocated %d" % (
                            name, dev, t, tot, value_at(alloc, t + 0.999)))
                        break
            lastrow = max((r for r in rows if r["device"] == dev), key=lambda r: r["end_ns"])
            eb = lastrow.get("end_breakdown")
            if eb:
                got = {c: (cats[c][-1][1] if cats[c] else 0) for c in CATS}
                want = {c: eb[c] for c in CATS}
                if got != want:
                    f.append("%s: cuda:%d categories end at %r, the report's end_breakdown %r" % (name, dev, got, want))
        for tr, pk in (("host pinned", "peak_host_pinned"), ("host rss", "peak_host_rss")):
            s = series(mine, pid, tr)
            want = [r[pk] for r in rows if r[pk] is not None]
            if not want:
                if s and any(x for _, x in s):
                    f.append("%s: counter %s without the level in the report" % (name, tr))
                continue
            if max([0] + [x for _, x in s]) != max(want):
                f.append("%s: %s max %d, report %d" % (name, tr, max([0] + [x for _, x in s]), max(want)))
        ooms = [e for e in mine if e["ph"] == "i" and e.get("cat") == "oom"]
        if len(ooms) != p["ooms"]:
            f.append("%s: %d OOM instants, report %d" % (name, len(ooms), p["ooms"]))
        ivs = {(k, r.get("step", r.get("eval"))) for k in ("steps", "eval", "tail") for r in p[k]}
        inst = [e for e in mine if e["ph"] == "i" and e.get("cat") == "interval"]
        if len(inst) != len(ivs):
            f.append("%s: %d interval instants, report %d intervals after init" % (name, len(inst), len(ivs)))
    if scripts is not None:
        pushes = sum(1 for s in scripts for l in open(s) if l.startswith("push "))
        bs = sum(1 for e in evs if e["ph"] == "B")
        if bs != pushes:
            f.append("%s: %d B slices, the scripts push %d ranges" % (name, bs, pushes))
    return f


for name, files, exact in CASES:
    tr = traces_of(files)
    out = os.path.join(WORK, name + ".perfetto.json")
    rc, _, err = run(["--perfetto", out] + tr)
    rc2, rep, err2 = run(["--format", "json"] + tr)
    if rc != rc2:
        fails.append("%s: exit %d with --perfetto, %d without\n%s" % (name, rc, rc2, err))
        continue
    try:
        doc = json.load(open(out))
    except ValueError as e:
        fails.append("%s: not JSON: %s" % (name, e))
        continue
    ff, evs = check_format(name, doc)
    fails += ff
    if not evs:
        continue
    scripts = [os.path.join(SRC, x) for x in files if x.endswith(".txt")] if name != "mix" else None
    fails += check_report(name, evs, json.loads(rep), doc["otherData"]["t0_realtime_ns"], exact,
                          scripts if scripts else None)
    if name == "two_ranks":
        names = sorted(e["args"]["name"] for e in evs if e["ph"] == "M" and e["name"] == "process_name")
        if len(names) != 2 or not names[0].startswith("rank 0 ") or not names[1].startswith("rank 1 "):
            fails.append("two_ranks: process names %r" % names)
        if len({e["pid"] for e in evs}) != 2:
            fails.append("two_ranks: not two trace processes")
    if name == "mix":  # the hand-worked events of perfetto/mix.txt
        sl = [(e["ph"], e["name"], e["ts"]) for e in evs if e["ph"] in ("B", "E", "i") and e.get("tid") == 700]
        want = [("B", "train_step", 1.0), ("B", "outerA", 3.0), ("B", "innerB", 4.0), ("E", "innerB", 5.0),
                ("E", "outerA", 5.0), ("B", "innerB", 5.001), ("E", "innerB", 7.0), ("i", "hello", 8.0),
                ("E", "train_step", 10.0), ("B", "never_closed", 13.0), ("E", "never_closed", 14.0)]
        if sl != want:
            fails.append("mix: thread 700 slices %r, expected %r" % (sl, want))
        asy = [(e["ph"], e["name"], e["id"], e["tid"], e["ts"]) for e in evs if e["ph"] in ("b", "e")]
        if asy != [("b", "async_work", "0x5", 701, 11.0), ("e", "async_work", "0x5", 701, 12.0)]:
            fails.append("mix: async slices %r" % asy)
        pi = [(e["name"], e["ts"], e.get("args")) for e in evs if e["ph"] == "i" and e.get("s") == "p"]
        if pi != [("step 1", 1.0, None), ("OOM cuda:0", 9.0, {"device": 0, "requested_bytes": 123456789}),
                  ("tail", 10.0, None)]:
            fails.append("mix: process instants %r" % pi)
        for tr, want in (("cuda:0 allocated", [(0.0, 4096), (14.0, 4608)]),
                         ("cuda:1 allocated", [(0.0, 0), (2.0, 1000), (6.0, 0)])):
            if series(evs, 700, tr) != want:
                fails.append("mix: %s %r, expected %r" % (tr, series(evs, 700, tr), want))
        tn = {e["tid"]: e["args"]["name"] for e in evs if e["ph"] == "M" and e["name"] == "thread_name"}
        if tn != {700: "MainThread", 701: "worker"}:
            fails.append("mix: thread names %r" % tn)

# two processes with one pid (the same trace twice: say, two hosts): the second gets its own
b = traces_of(["basic.txt"])[0]
out = os.path.join(WORK, "dup.json")
rc, _, err = run(["--perfetto", out, b, b])
doc = json.load(open(out)) if rc == 0 else {"traceEvents": []}
pids = sorted({e["pid"] for e in doc["traceEvents"]})
if rc or pids != [100, (1 << 30) + 1]:
    fails.append("same pid twice: exit %d, pids %r" % (rc, pids))

# --perfetto-window: fewer counter events, the run's peak and the final values kept
synth = os.path.join(WORK, "synth.txt")
open(synth, "w").write("synth events=100000\n")
subprocess.run([MK, synth, os.path.join(WORK, "synth.zst")], check=True, stdout=subprocess.DEVNULL,
               stderr=subprocess.DEVNULL)
for name, tr, win in (("attrib_loop", traces_of(["attrib_loop.txt"]), 3), ("synth", [os.path.join(WORK, "synth.zst")], 1000)):
    counts = []
    for w in (0, win):
        out = os.path.join(WORK, "%s.w%d.json" % (name, w))
        rc, _, err = run(["--perfetto", out, "--perfetto-window", str(w)] + tr)
        doc = json.load(open(out))
        ff, evs = check_format("%s window %d" % (name, w), doc)
        fails += ff
        counts.append(sum(1 for e in evs if e["ph"] == "C"))
        rep = json.loads(run(["--format", "json"] + tr)[1])["processes"][0]
        rows = rep["steps"] + rep["init"] + rep["tail"] + rep["eval"]
        pid = [e["pid"] for e in evs if e["ph"] == "M"][0]
        s = series(evs, pid, "cuda:0 allocated")
        last = max(rows, key=lambda r: r["end_ns"])
        if max(x for _, x in s) != max(r["peak_allocated"] for r in rows) or s[-1][1] != last["end_allocated"]:
            fails.append("%s window %d: allocated max %d end %d, report %d %d" % (
                name, w, max(x for _, x in s), s[-1][1], max(r["peak_allocated"] for r in rows), last["end_allocated"]))
        ends = {c: (series(evs, pid, "cuda:0 " + c) or [(0, 0)])[-1][1] for c in CATS}
        if ends != {c: last["end_breakdown"][c] for c in CATS}:
            fails.append("%s window %d: categories end at %r" % (name, w, ends))
    if not counts[1] < counts[0]:
        fails.append("%s: --perfetto-window %d left %d of %d counter events" % (name, win, counts[1], counts[0]))

# hostile: every cut and every byte flip of mix's trace: no crash; what is
# written (exit 0 or 2: a partial report) parses
mix = open(traces_of(["perfetto/mix.txt"])[0], "rb").read()
hz, hj = os.path.join(WORK, "hostile.zst"), os.path.join(WORK, "hostile.json")
bad = 0
for i in range(2 * len(mix)):
    data = mix[:i] if i < len(mix) else mix[:i - len(mix)] + bytes([mix[i - len(mix)] ^ 0x5a]) + mix[i - len(mix) + 1:]
    open(hz, "wb").write(data)
    rc, _, err = run(["--perfetto", hj, hz])
    if rc not in (0, 2) or len(err.strip().splitlines()) > 12:
        fails.append("hostile %d: exit %d %s" % (i, rc, err[:200]))
        bad += 1
    else:
        try:
            json.load(open(hj))
        except ValueError as e:
            fails.append("hostile %d: output not JSON (%s)" % (i, e))
            bad += 1
    if bad > 5:
        break

# bad uses: one line on stderr, exit 1, nothing written
basic = traces_of(["basic.txt"])[0]
for args, what in ((["--perfetto", os.path.join(WORK, "no", "such", "dir", "x.json"), basic], "No such file"),
                   (["--perfetto", os.path.join(WORK, "d.json"), "--dump", basic], "--perfetto"),
                   (["--perfetto", os.path.join(WORK, "w.json"), "--perfetto-window", "-1", basic], "--perfetto-window")):
    rc, out, err = run(args)
    if rc != 1 or len(err.strip().splitlines()) != 1 or what not in err:
        fails.append("%r: exit %d, stderr %r (expected exit 1 and one line naming %r)" % (args, rc, err, what))
if os.path.exists(os.path.join(WORK, "d.json")):
    fails.append("--perfetto with --dump wrote its file")

if fails:
    print("FAIL\n  " + "\n  ".join(fails))
    sys.exit(1)
print("ok   %d traces" % len(CASES))
