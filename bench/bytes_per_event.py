#!/usr/bin/env python3
"""Trace size per event: compressed file bytes / events (every sequenced
record: allocator and driver events, NVTX, pauses), per file and overall,
for the traces under the given directories (default: the real H200 traces
in tests/decode/h200).

    python3 bench/bytes_per_event.py DSMEMDECODE [DIR ...]
"""
import glob
import json
import os
import struct
import subprocess
import sys


def header_bytes(path):
    """size of the leading zstd skippable frame (the header: META, modules)"""
    with open(path, "rb") as f:
        h = f.read(8)
    if len(h) == 8 and (struct.unpack("<I", h[:4])[0] & 0xFFFFFFF0) == 0x184D2A50:
        return 8 + struct.unpack("<I", h[4:])[0]
    return 0


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    dec = sys.argv[1]
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "decode", "h200")
    dirs = sys.argv[2:] or [os.path.normpath(root)]
    files = sorted(f for d in dirs for f in glob.glob(os.path.join(d, "**", "*.zst"), recursive=True))
    out = subprocess.run([dec, "--format", "json"] + files, capture_output=True, text=True)
    procs = json.loads(out.stdout)["processes"]
    tot_b = tot_e = tot_h = 0
    rows = []
    for p in procs:
        b, e = os.path.getsize(p["file"]), p["events"]
        tot_b += b
        tot_e += e
        tot_h += header_bytes(p["file"])
        rows.append((b / e if e else float("inf"), e, b, os.path.relpath(p["file"], dirs[0])))
    for r in sorted(rows):
        print(f"{r[0]:7.2f} B/event  {r[1]:9d} events  {r[2]:9d} bytes  {r[3]}")
    big = [r for r in rows if r[1] >= 100000]
    print(f"all {len(rows)} files: {tot_e} events, {tot_b} bytes, {tot_b / tot_e:.2f} B/event "
          f"({(tot_b - tot_h) / tot_e:.2f} without the {tot_h} bytes of header frames)")
    if big:
        be, bb = sum(r[1] for r in big), sum(r[2] for r in big)
        print(f"the {len(big)} files of >= 100 000 events: {be} events, {bb} bytes, {bb / be:.2f} B/event")
    ratios = sorted(r[0] for r in rows)
    print(f"per file: median {ratios[len(ratios) // 2]:.2f}, max {ratios[-1]:.2f} B/event")
    return 0


if __name__ == "__main__":
    sys.exit(main())
