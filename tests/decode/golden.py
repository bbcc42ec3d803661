#!/usr/bin/env python3
"""Golden decode tests.

For each CASE.txt (a mktrace script): build the trace, run dsmemdecode with
--format json / table / csv and compare stdout with CASE.json / CASE.table /
CASE.csv, check the hand-computed numbers in the script's '#!' lines, the exit
status and stderr, and that --ignore-totals leaves stdout byte-identical.

  #! args ARGS...        extra dsmemdecode arguments
  #! exit N              expected exit status (default 0)
  #! stderr TEXT         stderr must contain TEXT (every run)
  #! expect step=S dev=D key=value...   a row of the JSON report (S: 1.., init, tail)
  #! rows N              number of rows (steps + init + tail, all devices)
  #! process key=value   process-level JSON fields

usage: golden.py MKTRACE DSMEMDECODE SRCDIR WORKDIR [--update] CASE...
"""
import json
import os
import subprocess
import sys


def run(cmd, cwd):
    p = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if p.returncode < 0 or p.returncode >= 128:
        raise AssertionError("%s died by a signal (status %d)\n%s" % (cmd, p.returncode, p.stderr.decode(errors="replace")))
    return p.returncode, p.stdout, p.stderr.decode(errors="replace")


def parse_value(v):
    if v in ("true", "false"):
        return v == "true"
    if v == "null":
        return None
    try:
        return int(v)
    except ValueError:
        return v


def check_case(mktrace, decode, srcdir, work, name, update):
    script = os.path.join(srcdir, name + ".txt")
    directives = [l[2:].strip() for l in open(script) if l.startswith("#!")]
    args, exit_code, stderr_want, expects, rows, procs = [], 0, [], [], None, []
    for d in directives:
        key, _, rest = d.partition(" ")
        if key == "args":
            args = rest.split()
        elif key == "exit":
            exit_code = int(rest)
        elif key == "stderr":
            stderr_want.append(rest)
        elif key == "expect":
            expects.append(dict(kv.split("=", 1) for kv in rest.split()))
        elif key == "rows":
            rows = int(rest)
        elif key == "process":
            procs.append(dict(kv.split("=", 1) for kv in rest.split()))
        else:
            raise AssertionError("%s: unknown directive %r" % (name, d))
    trace = name + ".zst"
    rc, _, err = run([mktrace, script, os.path.join(work, trace)], work)
    if rc != 0:
        raise AssertionError("mktrace failed on %s: %s" % (name, err))

    fails = []
    outputs = {}
    for fmt in ("json", "table", "csv"):
        rc, out, err = run([decode, "--format", fmt] + args + [trace], work)
        outputs[fmt] = out
        if rc != exit_code:
            fails.append("%s: exit %d, expected %d\n%s" % (fmt, rc, exit_code, err))
        for s in stderr_want:
            if s not in err:
                fails.append("%s: stderr lacks %r; got:\n%s" % (fmt, s, err))
        # --ignore-totals: byte-identical report
        rc2, out2, _ = run([decode, "--format", fmt, "--ignore-totals"] + args + [trace], work)
        if out2 != out or rc2 != rc:
            fails.append("%s: --ignore-totals changed the output" % fmt)
        gold = os.path.join(srcdir, "%s.%s" % (name, fmt))
        if update:
            with open(gold, "wb") as f:
                f.write(out)
        elif not os.path.exists(gold):
            fails.append("missing golden file %s" % gold)
        elif open(gold, "rb").read() != out:
            fails.append("%s: output differs from %s:\n%s" % (fmt, gold, out.decode(errors="replace")))

    doc = json.loads(outputs["json"])
    if doc.get("format") != "dsmemdecode-steps/1" or len(doc["processes"]) != 1:
        fails.append("bad JSON document")
    else:
        p = doc["processes"][0]
        allrows = [dict(r, step=r["step"]) for r in p["steps"]]
        allrows += [dict(r, step="init") for r in p["init"]]
        allrows += [dict(r, step="tail") for r in p["tail"]]
        if rows is not None and len(allrows) != rows:
            fails.append("expected %d rows, got %d" % (rows, len(allrows)))
        for e in expects:
            step = parse_value(e.pop("step"))
            dev = int(e.pop("dev"))
            match = [r for r in allrows if r["step"] == step and r["device"] == dev]
            if len(match) != 1:
                fails.append("no row for step %s device %d" % (step, dev))
                continue
            for k, v in e.items():
                if match[0].get(k) != parse_value(v):
                    fails.append("step %s dev %d: %s = %r, expected %s" % (step, dev, k, match[0].get(k), v))
        for pr in procs:
            for k, v in pr.items():
                if p.get(k) != parse_value(v):
                    fails.append("process %s = %r, expected %s" % (k, p.get(k), v))
    if fails:
        raise AssertionError("%s:\n  %s" % (name, "\n  ".join(fails)))


def main():
    mktrace, decode, srcdir, work = [os.path.abspath(a) for a in sys.argv[1:5]]
    rest = sys.argv[5:]
    update = "--update" in rest
    cases = [c for c in rest if c != "--update"]
    os.makedirs(work, exist_ok=True)
    bad = 0
    for c in cases:
        try:
            check_case(mktrace, decode, srcdir, work, c, update)
            print("ok   %s" % c)
        except AssertionError as e:
            print("FAIL %s" % e)
            bad += 1
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
