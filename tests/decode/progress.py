#!/usr/bin/env python3
"""Progress on stderr (issue 7 part 6): a 147-frame synthetic trace decoded
with DSMEMDECODE_PROGRESS_DELAY_MS=0 (progress from the first frame on).
Quiet path: stderr a pipe (and a file) -> stderr empty.  Terminal: stderr a
pty (python3's pty module) -> percentages rewritten in place with \\r, the
line cleared at the end, stdout the same report as the quiet run; a
decoder message still arrives on a line of its own.  Skipped (77) without a
pty.

usage: progress.py MKTRACE DSMEMDECODE WORKDIR
"""
import os
import re
import subprocess
import sys

MK, DEC, WORK = [os.path.abspath(a) for a in sys.argv[1:4]]
os.makedirs(WORK, exist_ok=True)
fails = []
script = os.path.join(WORK, "synth.txt")
open(script, "w").write("synth events=300000 frame=32768\n")
trace = os.path.join(WORK, "synth.zst")
subprocess.run([MK, script, trace], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
env = dict(os.environ, DSMEMDECODE_PROGRESS_DELAY_MS="0")

# quiet: stderr a pipe, then a file
q = subprocess.run([DEC, trace], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
if q.returncode != 0 or q.stderr:
    fails.append("pipe: exit %d, stderr %r (expected nothing)" % (q.returncode, q.stderr[:200]))
with open(os.path.join(WORK, "err.txt"), "w+b") as ef:
    r = subprocess.run([DEC, trace], env=env, stdout=subprocess.PIPE, stderr=ef)
    ef.seek(0)
    if r.returncode != 0 or ef.read():
        fails.append("file: stderr not empty")

try:
    import pty
    master, slave = pty.openpty()
except (ImportError, OSError) as e:
    if fails:
        print("FAIL\n  " + "\n  ".join(fails))
        sys.exit(1)
    print("SKIP no pty (%s); quiet path ok" % e)
    sys.exit(77)


os.close(master)
os.close(slave)


def on_tty(args):
    master, slave = pty.openpty()
    outf = open(os.path.join(WORK, "out.txt"), "w+b")  # (a pipe could fill while the pty is read)
    p = subprocess.Popen([DEC] + args, env=env, stdout=outf, stderr=slave)
    os.close(slave)
    got = b""
    while True:
        try:
            b = os.read(master, 65536)
        except OSError:  # EIO: the other side closed
            break
        if not b:
            break
        got += b
    p.wait()
    outf.seek(0)
    out = outf.read()
    outf.close()
    os.close(master)
    return p.returncode, out, got.decode(errors="replace")


rc, out, err = on_tty([trace])
pct = [int(x) for x in re.findall(r"\rdsmemdecode: [^\r]*synth\.zst: +(\d+)%", err)]
if rc != 0 or out != q.stdout:
    fails.append("tty: exit %d, stdout differs from the quiet run" % rc)
if not pct or pct != sorted(pct) or not all(0 <= x < 100 for x in pct):  # (at most one per 200 ms)
    fails.append("tty: progress %r in %r" % (pct, err[:300]))
if not err.endswith("\r\x1b[K"):
    fails.append("tty: the progress line is not cleared at the end: %r" % err[-60:])
# two files: "(file i of 2)"; a message (the damaged second copy) on a clean line
bad = os.path.join(WORK, "cut.zst")
data = open(trace, "rb").read()
open(bad, "wb").write(data[: len(data) * 2 // 3])
rc, out, err = on_tty([trace, bad])
if "(file 1 of 2)" not in err or "(file 2 of 2)" not in err:
    fails.append("tty, two files: no file counter in %r" % err[:300])
if not re.search(r"(\r\x1b\[K|\n)dsmemdecode: \S*cut\.zst: truncated", err):
    fails.append("tty: the truncation message does not start a clean line: %r" % err[-400:])

if fails:
    print("FAIL\n  " + "\n  ".join(fails))
    sys.exit(1)
print("ok   %d progress updates on a pty, none on a pipe or a file" % len(pct))
