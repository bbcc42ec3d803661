"""Shared by the tests of dsmemdecode's file outputs (html_report.py,
html_chromium.py, tsnap.py): failures are collected and reported at the end,
commands run with their output captured, golden scripts built into traces."""
import os
import subprocess
import sys

fails = []


def fail(msg):
    fails.append(msg)
    print("FAIL:", msg)


def run(*args):
    """(exit status, stdout, stderr) of a command; dying by a signal ends the test"""
    p = subprocess.run(list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if p.returncode < 0:
        raise SystemExit("%r died by signal %d" % (args, -p.returncode))
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


def mk(mktrace, src, work, case):
    """src/CASE.txt built into work/CASE.zst"""
    zst = os.path.join(work, case + ".zst")
    rc, _, err = run(mktrace, os.path.join(src, case + ".txt"), zst)
    if rc:
        raise SystemExit("mktrace %s: %s" % (case, err))
    return zst


def finish(name):
    if fails:
        print("%d failure(s)" % len(fails))
        sys.exit(1)
    print("%s: all checks passed" % name)
