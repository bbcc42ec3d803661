#!/usr/bin/env python3
"""Out-of-memory reports with several OOMs (oom/multi.txt): every listed OOM
gets the breakdown of what was live at it, per device, each block in the
category of its whole lifetime; without attribution (the plain table) no
breakdown; the table's `OOM n:` lines.  Expected values are worked by hand
in the script's comment.

usage: oom_multi.py MKTRACE DSMEMDECODE SRCDIR WORKDIR
"""
import json
import os
import shutil
import subprocess
import sys

MK, DEC, SRC, WORK = [os.path.abspath(a) for a in sys.argv[1:5]]
shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
fails = []
trace = os.path.join(WORK, "dsmemtrace.oomt.900.rank0.zst")
subprocess.run([MK, os.path.join(SRC, "oom", "multi.txt"), trace], check=True)

rep = json.loads(subprocess.run([DEC, "--format", "json", trace], capture_output=True, text=True,
                                check=True).stdout)["processes"][0]
want = [  # device, allocated, non-zero categories
    (0, 3000, {"temporaries": 2000, "other": 1000}),
    (1, 500, {"other": 500}),
    (0, 5000, {"temporaries": 4000, "other": 1000}),
]
ooms = rep.get("oom_reports") or []
if rep.get("ooms") != 3 or len(ooms) != 3:
    fails.append("expected 3 OOMs reported, got ooms=%r and %d reports" % (rep.get("ooms"), len(ooms)))
for i, (o, (dev, alloc, cats)) in enumerate(zip(ooms, want)):
    bk = o.get("breakdown")
    if o["device"] != dev or o["allocated"] != alloc:
        fails.append("OOM %d: device %r allocated %r, want %d %d" % (i + 1, o["device"], o["allocated"], dev, alloc))
    if bk is None:
        fails.append("OOM %d: no breakdown" % (i + 1))
        continue
    got = {k: v for k, v in bk.items() if isinstance(v, int) and v}
    if got != cats:
        fails.append("OOM %d: breakdown %r, want %r" % (i + 1, got, cats))

table = subprocess.run([DEC, trace], capture_output=True, text=True, check=True).stdout
lines = [l for l in table.splitlines() if l.startswith("OOM ")]
if len(lines) != 3 or not lines[1].startswith("OOM 2: device 1 in step 1: requested 2000000000 B"):
    fails.append("table OOM lines: %r" % lines)
if any("live, GiB" in l for l in lines):
    fails.append("the plain table (no attribution) printed a breakdown: %r" % lines)

for f in fails:
    print("FAIL:", f)
print("oom_multi: %s" % ("ok" if not fails else "%d failure(s)" % len(fails)))
sys.exit(1 if fails else 0)
