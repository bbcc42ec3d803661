#!/usr/bin/env python3
"""Fuzz regressions: every file under tests/decode/fuzz-regressions/ (inputs
the fuzzer found, see the README there) decoded in every mode must exit 0 or
2 (with a message naming the file when 2), never die by a signal, and stay
under an RSS bound (512 MiB; 1 GiB when the decoder is built with a
sanitizer, DSMT_SANITIZED=1).

usage: fuzz_regressions.py DSMEMDECODE DIR
"""
import os
import resource
import subprocess
import sys

dec, d = sys.argv[1], sys.argv[2]
limit_kb = (1024 if os.environ.get("DSMT_SANITIZED") else 512) * 1024
modes = [[], ["--dump"], ["--format", "json"], ["--format", "csv"], ["--breakdown", "--top", "3"],
         ["--summary"], ["--summary", "--format", "json"], ["--peak-blocks", "--format", "json"],
         ["--grad-accum", "2"]]
files = sorted(f for f in os.listdir(d) if not f.endswith(".md"))
fails = []
if not files:
    fails.append("no regression inputs in %s" % d)
for f in files:
    path = os.path.join(d, f)
    for m in modes:
        before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        p = subprocess.run([dec] + m + [path], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=120)
        err = p.stderr.decode(errors="replace")
        rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        what = "%s %s" % (" ".join(m) or "(table)", f)
        if p.returncode < 0 or p.returncode > 2:
            fails.append("%s: exit %d\n%s" % (what, p.returncode, err[-2000:]))
        elif p.returncode == 2 and path not in err:
            fails.append("%s: exit 2 without a message naming the file: %r" % (what, err))
        if rss > limit_kb and rss > before:
            fails.append("%s: max RSS %d KiB > %d KiB" % (what, rss, limit_kb))
    print("%s: %d modes, ok so far (max RSS of children %d KiB)" % (f, len(modes),
          resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))
for x in fails:
    print("FAIL: " + x, file=sys.stderr)
sys.exit(1 if fails else 0)
