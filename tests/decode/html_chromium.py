#!/usr/bin/env python3
"""--html in a real browser: headless Chromium (Debian's `chromium`) loads the
report of a two-rank H200 DeepSpeed run and of a golden script without any
console message (errors, failed loads), the page's script ran (the selector
hid every chart but the first), the expected series are in the rendered
DOM, and a screenshot is taken.  Skipped (exit 77) without chromium.  The
harness proves it can fail: a page with a script error must be caught.

usage: html_chromium.py MKTRACE DSMEMDECODE SRCDIR WORKDIR
"""
import os
import re
import shutil
import struct
import subprocess
import sys

import outcheck
from outcheck import fail

MKTRACE, DECODE, SRC, WORK = sys.argv[1:5]
CHROMIUM = os.environ.get("DSMT_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
if not CHROMIUM:
    print("chromium not found: skipped")
    sys.exit(77)
os.makedirs(WORK, exist_ok=True)


FLAGS = ["--headless", "--disable-gpu", "--no-sandbox", "--enable-logging=stderr", "--v=0",
         "--user-data-dir=" + os.path.join(WORK, "profile"), "--hide-scrollbars"]


def chromium(*args):
    p = subprocess.run([CHROMIUM] + FLAGS + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


def console(err):
    return [l for l in err.splitlines() if re.search(r":CONSOLE[:(]", l)]


# the harness catches a broken page
bad = os.path.join(WORK, "broken.html")
with open(bad, "w") as f:
    f.write("<!DOCTYPE html><html><body><p>x</p><script>no_such_function();</script></body></html>")
rc, dom, err = chromium("--dump-dom", "file://" + bad)
if not console(err):
    print("chromium does not report console errors on stderr here; cannot check: skipped")
    sys.exit(77)


def report(name, traces, nsections, want_series):
    path = os.path.join(WORK, name + ".html")
    p = subprocess.run([DECODE, "--html", path] + traces, stderr=subprocess.PIPE)
    if p.returncode:
        fail("%s: dsmemdecode --html failed: %s" % (name, p.stderr.decode(errors="replace")))
        return
    rc, dom, err = chromium("--dump-dom", "file://" + path)
    if rc:
        fail("%s: chromium --dump-dom exit %d" % (name, rc))
    msgs = console(err)
    if msgs:
        fail("%s: console messages: %s" % (name, msgs[:3]))
    secs = re.findall(r"<section[^>]*>", dom)
    if len(secs) != nsections:
        fail("%s: %d sections in the rendered DOM, expected %d" % (name, len(secs), nsections))
    if nsections > 1 and (" hidden" in secs[0] or not all(" hidden" in s for s in secs[1:])):
        fail("%s: the page's script did not select the first chart: %s" % (name, secs))
    for s in want_series:
        if not re.search(r'<path class="(area|line)" data-series="%s"' % s, dom):
            fail("%s: series %s not in the rendered DOM" % (name, s))
    if not re.search(r'<circle class="peak" data-peak="\d+"', dom):
        fail("%s: no peak marker in the rendered DOM" % name)
    png = os.path.join(WORK, name + ".png")
    if os.path.exists(png):
        os.unlink(png)
    rc, _, err = chromium("--window-size=1200,1400", "--screenshot=" + png, "file://" + path)
    if rc or not os.path.exists(png):
        fail("%s: no screenshot (exit %d)" % (name, rc))
        return
    with open(png, "rb") as f:
        head = f.read(24)
    size = os.path.getsize(png)
    if head[:8] != b"\x89PNG\r\n\x1a\n" or struct.unpack(">II", head[16:24]) != (1200, 1400) or size < 20000:
        fail("%s: the screenshot is not a 1200x1400 PNG with content (%d bytes)" % (name, size))
    print("%s: loaded without console messages, screenshot %s (%d bytes)" % (name, png, size))


h200 = os.path.join(SRC, "h200", "driver", "ds13_z3")
report("ds13_z3", sorted(os.path.join(h200, f) for f in os.listdir(h200) if f.endswith(".zst")), 3,
       ["parameters", "gathered_parameters", "optimizer_states", "gradients", "activations", "buckets",
        "reserved", "device", "host_pinned"])
zst = os.path.join(WORK, "attrib_loop.zst")
if subprocess.run([MKTRACE, os.path.join(SRC, "attrib_loop.txt"), zst]).returncode:
    raise SystemExit("mktrace failed")
report("attrib_loop", [zst], 1, ["parameters", "gathered_parameters", "optimizer_states", "gradients",
                                 "activations", "temporaries", "buckets", "workspace", "other", "reserved"])
outcheck.finish("html_chromium")
