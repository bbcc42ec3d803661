#!/usr/bin/env python3
"""Several files decoded at once (dsmemdecode --jobs N) give the same
stdout, stderr and exit status as one file after another (--jobs 1), for
every report: table, csv, json, --breakdown --top, --summary (table and
json), and after a bad regex (a usage error stops at the first file).

The inputs: the 24 smallest real H200 traces (tests/decode/h200/**.zst: 
ranks of several runs) and mktrace traces that make the decoder talk (damaged,
truncated, totals that disagree, lost events), an empty file, a missing one
and a foreign one, in an order that puts the noisy ones between the rest.

usage: parallel.py MKTRACE DSMEMDECODE SRCDIR WORKDIR
"""
import glob
import os
import subprocess
import sys


def main():
    mk, dec, src, work = sys.argv[1:5]
    os.makedirs(work, exist_ok=True)
    noisy = []
    for case in ["damaged", "truncated", "totals_bad", "lost_gaps", "pause", "deepspeed", "attrib_loop"]:
        out = os.path.join(work, case + ".zst")
        p = subprocess.run([mk, os.path.join(src, case + ".txt"), out], capture_output=True, text=True)
        if p.returncode != 0 or not os.path.exists(out):
            print(f"mktrace {case}: {p.returncode} {p.stderr}")
            return 1
        noisy.append(out)
    empty = os.path.join(work, "empty.zst")
    open(empty, "wb").close()
    foreign = os.path.join(work, "foreign.zst")
    with open(foreign, "wb") as f:
        f.write(b"not a trace at all\n" * 10)
    h200 = sorted(glob.glob(os.path.join(src, "h200", "**", "*.zst"), recursive=True))
    if len(h200) < 20:
        print(f"expected the H200 traces under {src}/h200, found {len(h200)}")
        return 1
    # the 24 smallest (the grid's ranks among them), in path order: time on the 2-core machine
    h200 = sorted(sorted(h200, key=os.path.getsize)[:24])
    files = []
    extra = noisy + [empty, os.path.join(work, "missing.zst"), foreign]
    for i, f in enumerate(h200):
        files.append(f)
        if i % 8 == 3 and extra:
            files.append(extra.pop(0))
    files += extra

    def run(args, jobs):
        p = subprocess.run([dec, "--jobs", str(jobs)] + args, capture_output=True)
        return p.returncode, p.stdout, p.stderr

    bad = 0
    configs = [
        ["--format", "table"],
        ["--format", "csv"],
        ["--format", "json"],
        ["--breakdown", "--top", "3"],
        ["--summary"],
        ["--summary", "--format", "json"],
        ["--step-marker", "(", "--format", "json"],  # bad regex: usage error
    ]
    for args in configs:
        ref = run(args + files, 1)
        if not ref[1] and "(" not in args:
            print(f"{args}: empty report with --jobs 1 (exit {ref[0]})")
            bad += 1
        if ref[0] != (1 if "(" in args else 2):
            print(f"{args}: exit {ref[0]} with --jobs 1, expected {1 if '(' in args else 2}")
            bad += 1
        if ref[2].count(b"\n") < (1 if "(" in args else 5):
            print(f"{args}: too few messages with --jobs 1:\n{ref[2].decode(errors='replace')}")
            bad += 1
        for jobs in (2, 5):
            got = run(args + files, jobs)
            for what, a, b in (("exit status", ref[0], got[0]), ("stdout", ref[1], got[1]), ("stderr", ref[2], got[2])):
                if a != b:
                    print(f"{' '.join(args)} --jobs {jobs}: {what} differs from --jobs 1")
                    if what != "exit status":
                        la, lb = a.splitlines(), b.splitlines()
                        for k in range(min(len(la), len(lb))):
                            if la[k] != lb[k]:
                                print(f"  line {k + 1}:\n  -j1: {la[k][:200]!r}\n  -j{jobs}: {lb[k][:200]!r}")
                                break
                        else:
                            print(f"  {len(la)} against {len(lb)} lines")
                    bad += 1
        nl = ref[2].count(b"\n")
        print(f"{' '.join(args)}: {len(files)} files, {len(ref[1])} bytes out, {nl} lines on stderr, exit {ref[0]}")
    # the default (no --jobs) is the same report
    p = subprocess.run([dec, "--summary"] + files, capture_output=True)
    ref = run(["--summary"] + files, 1)
    if (p.returncode, p.stdout, p.stderr) != ref:
        print("--summary without --jobs differs from --jobs 1")
        bad += 1
    for badj in ("0", "x", "257"):
        p = subprocess.run([dec, "--jobs", badj, files[0]], capture_output=True)
        if p.returncode != 1 or b"--jobs" not in p.stderr:
            print(f"--jobs {badj}: exit {p.returncode}, expected a usage error")
            bad += 1
    print("FAIL" if bad else "PASS", f"({bad} differences)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
