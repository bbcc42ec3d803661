#!/usr/bin/env python3
"""Hostile input: dsmemdecode must never die by a signal, must exit 0 or 2
(1 for usage errors) and must say what is wrong, naming the file.

usage: hostile.py MKTRACE DSMEMDECODE SRCDIR WORKDIR
"""
import os
import random
import shutil
import subprocess
import sys

MK, DEC, SRC, WORK = [os.path.abspath(a) for a in sys.argv[1:5]]
# every STRIDE-th cut point and byte (DSMT_HOSTILE_STRIDE; scripts/run-tests.sh
# sets 16 for the sanitizer builds, where the fuzzer covers the rest)
STRIDE = max(1, int(os.environ.get("DSMT_HOSTILE_STRIDE", "1")))
fails = []


def run(args, expect=None, stderr_has=None, name=None):
    p = subprocess.run([DEC] + args, cwd=WORK, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    err = p.stderr.decode(errors="replace")
    what = name or " ".join(args)
    if p.returncode < 0 or p.returncode >= 128:
        fails.append("%s: died by a signal (status %d)" % (what, p.returncode))
    elif expect is not None and p.returncode not in expect:
        fails.append("%s: exit %d, expected %s\n%s" % (what, p.returncode, expect, err))
    if stderr_has is not None and stderr_has not in err:
        fails.append("%s: stderr lacks %r; got %r" % (what, stderr_has, err))
    return p.returncode, p.stdout, err


def mk(name, script):
    path = os.path.join(WORK, name + ".txt")
    with open(path, "w") as f:
        f.write(script)
    p = subprocess.run([MK, path, os.path.join(WORK, name + ".zst")], stderr=subprocess.PIPE)
    if p.returncode:
        fails.append("mktrace %s: %s" % (name, p.stderr.decode()))
    return name + ".zst"


def write(name, data):
    with open(os.path.join(WORK, name), "wb") as f:
        f.write(data)
    return name


shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)

# --- files that are not traces ---
run([write("empty.zst", b"")], {2}, "dsmemdecode: empty.zst: empty file")
run(["does-not-exist.zst"], {2}, "dsmemdecode: does-not-exist.zst: cannot open: No such file or directory")
run([WORK], {2}, "not a regular file", name="directory")
run([write("text.zst", b"hello world, not a trace\n")], {2}, "dsmemdecode: text.zst: not a dsmemtrace trace (bad magic)")
run([mk("foreign", "option noheader\nzstdframe just some zstd data\n")], {2},
    "dsmemdecode: foreign.zst: not a dsmemtrace trace (bad magic)")
if shutil.which("zstd"):
    write("plain.txt", b"plain text compressed by zstd\n" * 100)
    subprocess.run(["zstd", "-q", "-f", "plain.txt", "-o", "plain.zst"], cwd=WORK, check=True)
    run(["plain.zst"], {2}, "not a dsmemtrace trace (bad magic)")
run([mk("major2", "header major=2 minor=3\nmeta host x\nthread 1\nalloc ptr=1 size=1\n")], {2},
    "dsmemdecode: major2.zst: format version 2.3 is newer than this decoder (reads up to 1.*)")
run([mk("minor9", "header major=1 minor=9\nmeta host x\nthread 1\nalloc ptr=1 size=1\n")], {0})
# other skippable magic first: not ours
run([mk("otherskip", "option noheader\nskippable 0x184D2A50 0102\nzstdframe x\n")], {2}, "bad magic")
# header frame claiming 4 GiB
hdr = bytes.fromhex("5d2a4d18ffffffff") + b"DSMTRACE\x01\x00\x00\x00"
run([write("hugehdr.zst", hdr)], {2}, "truncated inside the header")
run([write("tinyhdr.zst", hdr[:3])], {2}, "truncated inside the header")
run([write("shorthdr.zst", bytes.fromhex("5d2a4d1802000000") + b"DSMTRACE\x01\x00\x00\x00")], {2},
    "malformed header frame")

# the history a header announces (META zstd_prefix_bytes) must make sense
run([mk("badprefix", "meta zstd_prefix_bytes abc\nmeta host x\nthread 1\nalloc ptr=1 size=1\n")], {2},
    "dsmemdecode: badprefix.zst: malformed header (META zstd_prefix_bytes \"abc\")")
run([mk("hugeprefix", "meta zstd_prefix_bytes 99999999999999999999\nmeta host x\nthread 1\n")], {2},
    "malformed header (META zstd_prefix_bytes")
run([mk("noprefix", "header announce=0\nmeta host x\nthread 1\nalloc seq=0 ptr=0x10 size=1\nframe\n"
        "thread 1\nalloc seq=1 ptr=0x10 size=1\n")], {0, 2})

# --- malformed records ---
base = "meta host x\nthread 1\nalloc seq=0 ptr=0x10 size=1\n"
run([mk("hugelen", base + "bytes 10 ffffffffff7f 00\n")], {2}, "record length runs past the end of the frame")
run([mk("lenoverflow", base + "bytes 10 ffffffffffffffffffff7f\n")], {2}, "damaged at byte offset")
run([mk("hugestr", base + "raw 0x02 01 ffffffffffffffff01 41\n")], {2}, "malformed STRING record")
run([mk("hugemeta", base + "raw 0x01 ffffffff0f 41\n")], {2}, "malformed META record")
run([mk("hugestack", base + "raw 0x03 01 ffffffffffffffff01 00\n")], {0})
run(["--dump", "hugestack.zst"], {0})
run([mk("badvarint", base + "raw 0x10 01 01 01 01 80808080808080808080 00\n")], {2},
    "malformed varint in an event")
run([mk("seqjump", base + "alloc seq=0x10000000000 ptr=0x20 size=1\n")], {2}, "reorder window exceeded")
run([mk("hugedev", base + "alloc seq=1 dev=100000 ptr=0x20 size=1\n")], {0}, "without a valid device")
run([mk("nothread", "option noautothread\n" + base + "frame\nalloc seq=1 ptr=0x20 size=1\n")], {2},
    "event before any THREAD record in the frame")
run([mk("garbage", base + "garbage 0102030405060708\n")], {2}, "unknown frame magic")
run([mk("deeppush", base + "push name=train_step\n" * 300 + "pop\n" * 301)], {0}, "NVTX pushes deeper than 256")
run([mk("hugeptr", base + "alloc seq=1 ptr=0xffffffffffffffff size=0xffffffffffffffff\n"
        "free seq=2 ptr=0 size=0\nfree seq=3 ptr=0xffffffffffffffff\n")], {0})

# --- driver-level records with hostile values: unknown ops and vias, huge
# sizes and devices, reference counts driven past zero, cut payloads ---
drvbase = "meta host x\nthread 1\nsource seq=0 via=cupti\n"
run([mk("drv_unknown", drvbase + "drv seq=1 op=200 via=15 ptr=0x10 size=5\n"
        "drv seq=2 op=0xffffffffffffffff via=0xffffffffffffffff dev=1000 ptr=0x20 size=1\n"
        "drv seq=3 op=0 ptr=0x30\nsource seq=4 via=77 reason=99 name=12345\n")], {0})
run(["--dump", "drv_unknown.zst"], {0})
run(["--format", "json", "drv_unknown.zst"], {0})
run([mk("drv_refs", drvbase + "drv seq=1 op=create ptr=0x1 size=100 aux=1\n"
        + "drv op=release ptr=0x1\n" * 5 + "drv op=unmap ptr=0x5\n" * 3
        + "drv op=map ptr=0x9 size=0xffffffffffffffff aux=0x1\n" * 3
        + "drv op=create ptr=0x1 size=0xffffffffffffffff aux=1\ndrv op=create ptr=0x1 size=7 aux=99\n"
        + "drv op=import ptr=0x1\ndrv op=map ptr=0x9 size=5 aux=0x1 dev=host\ndrv op=retain ptr=0x1\n"
        + "drv op=free ptr=0xffffffffffffffff\ndrv op=alloc dev=host ptr=0x3 size=1\n"
        + "drv op=alloc_host ptr=0x3 size=0xffffffffffffffff\nalloc api=hostalloc dev=host ptr=0x3 size=9\n"
        + "free api=freehost ptr=0x3\nfree api=free ptr=0x3\n")], {0}, "unknown VMM handles")
run([mk("drv_cut", drvbase + "raw 0x13 0a\nraw 0x31 01\nraw 0x07 05 01\nraw 0x13\n"
        "raw 0x07 ffffffffffffffffffff7f\n")], {2}, "malformed")
run([mk("drv_samples", drvbase + "".join("sample next=%d ts=%d dev=%d proc=%d\n" % (
        (7919 * i) % 5000, i, i % 300, i) for i in range(3000)) + "drv seq=1 op=alloc ptr=0x10 size=5\n")], {0})
run(["--format", "json", "drv_samples.zst"], {0})

# --- HOST records (format 1.3): cut payloads, huge values, out-of-order and
# far-future next_seq, many of them, in a trace with and without steps ---
hostbase = "meta host x\nmeta pid 1\nthread 1 MainThread\nalloc seq=0 ptr=0x10 size=1\n"
run([mk("host_cut", hostbase + "raw 0x0a 05\nraw 0x0a\nraw 0x0a ffffffffffffffffffff7f\n")], {2},
    "malformed HOST record")
run([mk("host_vals", hostbase + "host next=0xffffffffffffffff ts=0xffffffffffffffff rss=0xffffffffffffffff "
        "vsz=0xffffffffffffffff\nhost next=0 ts=0 rss=0 vsz=0\npush seq=1 name=train_step\n"
        "host next=5 rss=7\npop seq=2\nraw 0x0a 01 02 03 04 05 06 07\n")], {0})
run([mk("host_many", hostbase + "push seq=1 name=train_step\npop seq=2\n" + "".join(
        "host next=%d ts=%d rss=%d vsz=%d\n" % ((7919 * i) % 5000, i, i * 4096, i) for i in range(3000)))], {0})
for args in (["--format", "json"], ["--format", "csv"], ["--dump"], []):
    for f in ("host_vals.zst", "host_many.zst"):
        run(args + [f], {0})

# --- Python frames (format 1.2): hostile definitions and references ---
pybase = ("meta host x\nmeta pid 1\nthread 1 MainThread\n"
          "pycode 1 /a/torch/optim/adam.py Adam._init_group 0xffffffffffffffff ffffffff 999999\n"
          "pycode 2 - - 0 - 0\npycode 3 /x\\x00y q\\x01 7 80 312\n")
run([mk("py_defs", pybase +
        "pystack 1 1:0 2:0xffffffffffffffff 3:5 99:1\npystack 2 2:0\npystack 2 1:1\npystack 0 1:0\n"
        "pystack 0xffffffffffffffff 1:0\n"
        "raw 0x09 05 ff7f 01\n"              # n = 16383 frames, one pair given
        "raw 0x09 06 00\n"                   # no frames at all
        "raw 0x08 07\n"                      # PYCODE with only an id
        "push seq=0 name=train_step pystack=1\n"
        "alloc seq=1 ptr=0x10 size=4096 pystack=1\nalloc seq=2 ptr=0x20 size=8 pystack=0xffffffffffffffff\n"
        "alloc seq=3 ptr=0x30 size=8 pystack=5 stack=0xffffffffffffffff\nfree seq=4 ptr=0x20 pystack=2\n"
        "pop seq=5 pystack=7\nmark seq=6 name=train_step pystack=6\nfree seq=7 ptr=0x10 pystack=3\n"
        "oom seq=8 size=5 pystack=1\ndrv seq=9 op=alloc ptr=0x40 size=1 pystack=2\n")], {0})
for args in (["--format", "json", "--top", "5"], ["--breakdown", "--top", "3"], ["--dump"]):
    run(args + ["py_defs.zst"], {0})
run([mk("py_cut", pybase + "raw 0x08 01 ffffffffff0f\n")], {2}, "malformed PYCODE record")
run([mk("py_cut2", pybase + "raw 0x09 01 03 01\n" + "alloc seq=0 ptr=0x10 size=1 pystack=1\n")], {0})
run([mk("py_badvar", pybase + "raw 0x09 01 ffffffffffffffffffff7f\n")], {2}, "malformed PYSTACK record")

# --- usage errors ---
run([], {1})
run(["--format", "xml", "x.zst"], {1}, "unknown format")
run(["--step-marker", "(", "foreign.zst", "minor9.zst"], {1, 2}, "bad --step-marker regex")
run(["--top", "0", "minor9.zst"], {1}, "--top wants a number")
run(["--top", "x", "minor9.zst"], {1}, "--top wants a number")
run(["--no-such-option"], {1})
run(["-o", os.path.join(WORK, "no/such/dir/out.json"), "minor9.zst"], {1})
run(["--help"], {0})
# several files, one missing: the others are still reported, exit 2
rc, out, err = run(["--format", "json", "minor9.zst", "does-not-exist.zst", "hugedev.zst"], {2})
if out.count(b'"file"') != 2:
    fails.append("multi-file: expected 2 processes in %r" % out)

# --- every cut point and every flipped byte of a multi-frame trace ---
for case in ("interleave", "basic", "twodev", "drv_sample", "drv_vmm", "host_mem"):
    subprocess.run([MK, os.path.join(SRC, case + ".txt"), os.path.join(WORK, case + ".zst")], check=True)
    data = open(os.path.join(WORK, case + ".zst"), "rb").read()
    for cut in range(0, len(data), STRIDE):
        name = write("cut.zst", data[:cut])
        rc, out, err = run([name], {0, 2}, name="%s cut at %d" % (case, cut))
        # a cut at a frame boundary leaves a complete, shorter trace
        if not err.startswith("dsmemdecode: cut.zst: ") and (rc != 0 or err):
            fails.append("%s cut at %d: no diagnostic: %r" % (case, cut, err))
    for i in range(0, len(data), STRIDE):
        for x in (0x01, 0x80, 0xff):
            b = bytearray(data)
            b[i] ^= x
            run([write("flip.zst", bytes(b))], {0, 2}, name="%s byte %d ^ 0x%02x" % (case, i, x))
        b = bytearray(data)
        b[i] ^= 0xff
        write("flip.zst", bytes(b))
        run(["--dump", "flip.zst"], {0, 2}, name="--dump %s byte %d ^ 0xff" % (case, i))

# --- attribution under damage: every cut and a flipped byte of the Python-frames golden,
# decoded with every attribution output on ---
subprocess.run([MK, os.path.join(SRC, "attrib_loop.txt"), os.path.join(WORK, "attrib_loop.zst")], check=True)
data = open(os.path.join(WORK, "attrib_loop.zst"), "rb").read()
for cut in range(0, len(data), 3 * STRIDE):
    run(["--format", "json", "--top", "3", write("cut.zst", data[:cut])], {0, 2}, name="attrib_loop cut at %d" % cut)
for i in range(0, len(data), STRIDE):
    b = bytearray(data)
    b[i] ^= 0xff if i % 2 else 0x01
    run(["--format", "json", "--top", "3", write("flip.zst", bytes(b))], {0, 2},
        name="attrib_loop byte %d flipped" % i)
    if i % 4 == 0:
        run(["--breakdown", "--top", "2", "flip.zst"], {0, 2}, name="--breakdown attrib_loop byte %d" % i)
    if i % 3 == 0:  # the replay's log: --html and --torch-snapshot
        run(["--html", "flip.html", "--torch-snapshot", "flip.pickle", "flip.zst"], {0, 2},
            name="--html --torch-snapshot attrib_loop byte %d" % i)
for case in ("twodev", "drv_vmm", "pause_resync", "drv_torch_async"):
    subprocess.run([MK, os.path.join(SRC, case + ".txt"), os.path.join(WORK, case + ".zst")], check=True)
    data = open(os.path.join(WORK, case + ".zst"), "rb").read()
    for cut in range(0, len(data), 3):
        run(["--html", "cut.html", "--torch-snapshot", "cut.pickle", write("cut.zst", data[:cut])], {0, 2},
            name="--html --torch-snapshot %s cut at %d" % (case, cut))

# --- a trace whose frames reference their history: every cut, flipped bytes ---
# (a flip in frame k may make frame k+1 undecodable too: reported as damage)
mk("histsynth", "meta host x\nsynth events=1300 threads=2 batch=16 frame=1500\n")
data = open(os.path.join(WORK, "histsynth.zst"), "rb").read()
for cut in range(0, len(data), STRIDE):
    name = write("cut.zst", data[:cut])
    run([name], {0, 2}, name="histsynth cut at %d" % cut)
for i in range(0, len(data), STRIDE):
    b = bytearray(data)
    b[i] ^= 0xff if i % 2 else 0x01
    rc, out, err = run([write("flip.zst", bytes(b))], {0, 2}, name="histsynth byte %d flipped" % i)
    if rc == 2 and "dsmemdecode: flip.zst: " not in err:
        fails.append("histsynth byte %d flipped: no diagnostic: %r" % (i, err))

# --- random bytes, with and without a valid header in front ---
rng = random.Random(1234)
hdr_ok = open(os.path.join(WORK, "minor9.zst"), "rb").read()
hdr_len = 8 + int.from_bytes(hdr_ok[4:8], "little")
for i in range(0, 300, STRIDE):
    n = rng.randrange(0, 3000)
    junk = bytes(rng.randrange(256) for _ in range(n))
    if i % 3 == 0:
        junk = hdr_ok[:hdr_len] + junk
    elif i % 3 == 1:
        junk = hdr_ok[:hdr_len] + bytes.fromhex("28b52ffd") + junk
    run([write("rand.zst", junk)], {0, 2}, name="random file %d" % i)
    run(["--dump", "rand.zst"], {0, 2}, name="--dump random file %d" % i)

if fails:
    print("\n".join(fails[:50]))
    print("%d failure(s)" % len(fails))
    sys.exit(1)
print("ok")
