#!/usr/bin/env python3
"""dsmemdecode diff A B on two synthetic 2-rank runs (diff/a_rank*.txt,
diff/b_rank*.txt: run B is run A with a larger forward block and one new
site, its library loaded elsewhere and its Python definitions numbered
differently).  Checks: table and JSON against diff/two_runs.table/.json;
every interval's numbers against each side's own --format json report and
their difference; the hand-worked deltas and sites of the scripts'
comments; pairing by rank (a rank missing on one side), two single files
paired whatever their rank; --top; bad operands (one line, exit 1 or 2);
and the H200 grid's real 2-rank ZeRO-2 and ZeRO-3 runs against their own
reports.

usage: diff.py MKTRACE DSMEMDECODE SRCDIR WORKDIR [--update]
"""
import json
import os
import shutil
import subprocess
import sys

MK, DEC, SRC, WORK = [os.path.abspath(a) for a in sys.argv[1:5]]
update = "--update" in sys.argv[5:]
D = os.path.join(SRC, "diff")
shutil.rmtree(WORK, ignore_errors=True)
fails = []
LAYOUT = {"A": [("a_rank0", "dsmemtrace.da.100.rank0.zst"), ("a_rank1", "dsmemtrace.da.101.rank1.zst")],
          "B": [("b_rank0", "dsmemtrace.db.200.rank0.zst"), ("b_rank1", "dsmemtrace.db.201.rank1.zst")],
          "B0": [("b_rank0", "dsmemtrace.db.200.rank0.zst")],
          "mixed": [("a_rank0", "dsmemtrace.da.100.rank0.zst"), ("other_run", "dsmemtrace.da.300.rank0.zst")],
          "empty": []}
for d, files in LAYOUT.items():
    os.makedirs(os.path.join(WORK, d))
    for script, name in files:
        subprocess.run([MK, os.path.join(D, script + ".txt"), os.path.join(WORK, d, name)], check=True,
                       stdout=subprocess.DEVNULL)


def run(args):
    p = subprocess.run([DEC] + args, cwd=WORK, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if p.returncode < 0:
        raise AssertionError("dsmemdecode %s died by signal %d" % (args, -p.returncode))
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def golden(name, out):
    path = os.path.join(D, name)
    if update:
        open(path, "w").write(out)
    elif open(path).read() != out:
        fails.append("%s differs:\n%s" % (name, out))


def report(path):
    rc, out, err = run(["--format", "json", path])
    if rc:
        raise AssertionError("report of %s: exit %d %s" % (path, rc, err))
    p = json.loads(out)["processes"][0]
    rows = {}
    for kind in ("steps", "init", "tail", "eval"):
        for r in p[kind]:
            label = str(r["step"]) if kind == "steps" else "eval%d" % r["eval"] if kind == "eval" else kind
            rows[(label, r["device"])] = r
    return rows


rc, table, err = run(["diff", "A", "B"])
if rc:
    fails.append("diff A B: exit %d %s" % (rc, err))
golden("two_runs.table", table)
rc, js, err = run(["diff", "--format", "json", "A", "B"])
if rc:
    fails.append("diff -f json A B: exit %d %s" % (rc, err))
golden("two_runs.json", js)
doc = json.loads(js)
if doc["format"] != "dsmemdecode-diff/1" or doc["a"]["run_id"] != "diff-a" or doc["b"]["run_id"] != "diff-b":
    fails.append("header: %r %r %r" % (doc["format"], doc["a"], doc["b"]))
if [p["rank"] for p in doc["pairs"]] != [0, 1] or doc["only_in_a"] or doc["only_in_b"]:
    fails.append("pairs by rank: %r, only %r %r" % ([p["rank"] for p in doc["pairs"]], doc["only_in_a"], doc["only_in_b"]))
LV = ["peak_allocated", "end_allocated", "peak_reserved", "end_reserved"]
CATS = ["parameters", "gathered_parameters", "master_weights", "optimizer_states", "gradients", "activations",
        "temporaries", "buckets", "communication", "workspace", "other", "cached"]


def check_against_reports(doc, cwd):
    """every interval, breakdown delta and MaxMemAllocated against each side's own report"""
    for pr in doc["pairs"]:
        ra, rb = report(os.path.join(cwd, pr["a"])), report(os.path.join(cwd, pr["b"]))
        if len(pr["intervals"]) != len(set(ra) | set(rb)):
            fails.append("rank %s: %d intervals, the reports have %d" % (pr["rank"], len(pr["intervals"]), len(set(ra) | set(rb))))
        for iv in pr["intervals"]:
            key = (iv["interval"], iv["device"])
            a, b = ra.get(key), rb.get(key)
            for lv in LV:
                if (iv["a"] or {}).get(lv) != (a or {}).get(lv) or (iv["b"] or {}).get(lv) != (b or {}).get(lv):
                    fails.append("rank %s %s: %s a/b %r/%r, reports %r/%r" % (pr["rank"], key, lv, iv["a"], iv["b"], a, b))
                if a and b and iv["delta"][lv] != b[lv] - a[lv]:
                    fails.append("rank %s %s: delta %s %r" % (pr["rank"], key, lv, iv["delta"][lv]))
            if a and b:
                for w in ("peak", "end"):
                    want = {c: b[w + "_breakdown"][c] - a[w + "_breakdown"][c] for c in CATS}
                    if iv[w + "_breakdown_delta"] != want:
                        fails.append("rank %s %s: %s_breakdown_delta %r, expected %r" % (
                            pr["rank"], key, w, iv[w + "_breakdown_delta"], want))
        m = pr["max_mem_allocated"]
        for side, rep in (("a", ra), ("b", rb)):
            best = max((r for k, r in rep.items() if k[0].isdigit()), key=lambda r: r["peak_allocated"])
            if m[side]["peak_allocated"] != best["peak_allocated"] or m[side]["breakdown"] != {c: best["peak_breakdown"][c] for c in CATS}:
                fails.append("rank %s: max_mem_allocated %s %r, report %r" % (pr["rank"], side, m[side], best))
        if m["delta"]["peak_allocated"] != m["b"]["peak_allocated"] - m["a"]["peak_allocated"]:
            fails.append("rank %s: max delta %r" % (pr["rank"], m["delta"]))
        for st in pr["sites"]:
            if st["delta"] != st["b_bytes"] - st["a_bytes"] or st["change"] != (
                    "new" if not st["a_bytes"] else "gone" if not st["b_bytes"] else
                    "grew" if st["b_bytes"] > st["a_bytes"] else "shrank"):
                fails.append("rank %s: site %r" % (pr["rank"], st))


check_against_reports(doc, WORK)

# hand-worked (the scripts' comments)
r0 = doc["pairs"][0]
d = {iv["interval"]: iv["delta"]["peak_allocated"] for iv in r0["intervals"]}
if d != {"init": 0, "1": 1000, "2": 4000, "tail": 0}:
    fails.append("rank 0 peak deltas %r" % d)
if (r0["max_mem_allocated"]["a"]["interval"], r0["max_mem_allocated"]["b"]["interval"]) != ("2", "2"):
    fails.append("rank 0 MaxMemAllocated intervals %r" % r0["max_mem_allocated"])
sites = [(s["change"], s["a_bytes"], s["b_bytes"], s["delta"], s["frames"][0]) for s in r0["sites"]]
if sites != [("new", 0, 3000, 3000, "Net.extra (/opt/d/model.py:32)"),
             ("grew", 1500, 2500, 1000, "Net.forward (/opt/d/model.py:22)")]:
    fails.append("rank 0 sites %r" % sites)
r1 = doc["pairs"][1]
if [(s["change"], s["a_bytes"], s["b_bytes"]) for s in r1["sites"]] != [("grew", 1000, 1500)]:
    fails.append("rank 1 sites %r" % r1["sites"])
if "2          0          5596          9596  +4000" not in table or "  new   " not in table:
    fails.append("table lacks the step 2 row or the new site:\n" + table)

# --top 1: one site; a rank missing on one side; two single files of different ranks
rc, js, err = run(["diff", "--top", "1", "-f", "json", "A", "B"])
if rc or len(json.loads(js)["pairs"][0]["sites"]) != 1:
    fails.append("--top 1: exit %d, %s" % (rc, js[:300]))
rc, js, err = run(["diff", "-f", "json", "A", "B0"])
doc = json.loads(js) if not rc else {}
if rc or [p["rank"] for p in doc["pairs"]] != [0] or doc["only_in_a"] != ["A/dsmemtrace.da.101.rank1.zst"] or doc["only_in_b"]:
    fails.append("diff A B0: exit %d %s" % (rc, js))
rc, out, err = run(["diff", "A", "B0"])
if rc or "only in A: A/dsmemtrace.da.101.rank1.zst (rank 1)" not in out:
    fails.append("diff A B0 table: exit %d\n%s" % (rc, out))
rc, js, err = run(["diff", "-f", "json", "A/dsmemtrace.da.101.rank1.zst", "B/dsmemtrace.db.200.rank0.zst"])
doc = json.loads(js) if not rc else {}
if rc or len(doc["pairs"]) != 1 or doc["pairs"][0]["rank"] != 1:
    fails.append("two single files: exit %d %s" % (rc, js[:300]))

# bad operands: one line, exit 1 (usage) or 2 (unreadable trace)
for args, code, what in ((["diff", "A"], 1, "two runs"),
                         (["diff", "A", "B", "B0"], 1, "two runs"),
                         (["diff", "mixed", "B"], 1, "more than one run"),
                         (["diff", "empty", "B"], 1, "no dsmemtrace"),
                         (["diff", "--summary", "A", "B"], 1, "diff prints"),
                         (["diff", "-f", "csv", "A", "B"], 1, "diff prints"),
                         (["diff", "A", "nosuch.zst"], 2, "nosuch.zst")):
    rc, out, err = run(args)
    if rc != code or len(err.strip().splitlines()) != 1 or what not in err:
        fails.append("%r: exit %d (expected %d), stderr %r" % (args, rc, code, err))

# real traces: the H200 grid's OPT-1.3b ZeRO-2 and ZeRO-3 runs, 2 ranks each
GRID = os.path.join(SRC, "h200", "grid")
z2, z3 = (os.path.join(GRID, "g2-z%d-opt-1.3b-mb4-seq512" % z, "trace") for z in (2, 3))
if os.path.isdir(z2) and os.path.isdir(z3):
    rc, js, err = run(["diff", "-f", "json", z2, z3])
    doc = json.loads(js) if rc == 0 else None
    if not doc or [p["rank"] for p in doc["pairs"]] != [0, 1]:
        fails.append("grid ZeRO-2 vs ZeRO-3: exit %d, %s" % (rc, err[-300:]))
    else:
        check_against_reports(doc, WORK)
        m = doc["pairs"][0]["max_mem_allocated"]["delta"]["breakdown"]
        if not (m["gathered_parameters"] > 0 and m["gradients"] < 0):  # what ZeRO-3 does (README)
            fails.append("grid: ZeRO-3 - ZeRO-2 at the peak %r" % m)

if fails:
    print("FAIL\n  " + "\n  ".join(fails))
    sys.exit(1)
print("ok")
