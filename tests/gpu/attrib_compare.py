#!/usr/bin/env python3
"""Judge the decoder's attribution against PyTorch's own ground truth
(tests/gpu/attrib_truth.py).

    python3 tests/gpu/attrib_compare.py TRUTH.json DECODED.json [--dump DUMP.txt --frames FRAMES.json]

DECODED.json: `dsmemdecode --format json --peak-blocks TRACE` (each step row
lists the blocks live at its allocated peak with their category).

Categories: for each step, the blocks live at the peak that PyTorch tagged
(parameters, gradients, optimizer_states, activations) and the category the
decoder gave them.  With --dump and tags that carry "nalloc" (the
allocator's running count of allocations when the tag was taken) a tag names
exactly one allocation; older truth files are matched by address and step.  Reported: the fraction of tagged peak bytes whose category
matches (target >= 98 %) and the share of the peak in `other` (target <= 2 %).

Frames (with --dump/--frames): the allocator's own trace recorded with
_record_memory_history(stacks="python") and the tracer's ALLOC events, in
allocator order; for the main thread's events the innermost Python frame
(function name, file, line) must match (target >= 98 %).

Prints a summary line per part and writes nothing; exit 0 when the targets
are met, 1 otherwise.
"""
import argparse
import gzip
import json
import re
import sys

TAGGED = ("parameters", "gradients", "optimizer_states", "activations")


PRIO = {"parameters": 0, "optimizer_states": 1, "gradients": 2, "activations": 3}
TALLOC = re.compile(r"^\d+ ALLOC seq=(\d+) ts=\d+ tid=\d+ api=torch dev=(\d+) ptr=0x([0-9a-f]+)")


def exact_truth(truth, dump_path):
    """Tags naming exact allocations: each tag's nalloc (torch's running count
    of allocations when the tag was taken) picks the latest allocation at its
    address up to that count; our torch ALLOC events on the device, in seq
    order, are those allocations one to one.  -> {alloc seq: category}"""
    dev = truth.get("device", 0)
    evs = []
    with open(dump_path) as f:
        for line in f:
            m = TALLOC.match(line)
            if m and int(m.group(2)) == dev:
                evs.append((int(m.group(1)), int(m.group(3), 16)))
    evs.sort()
    at = {}
    for n, (seq, ptr) in enumerate(evs, 1):
        at.setdefault(ptr, []).append((n, seq))
    out, unmatched = {}, 0
    for t in truth["tags"]:
        cands = [sq for n, sq in at.get(t["ptr"], []) if n <= t["nalloc"]]
        if not cands:
            unmatched += 1
            continue
        sq = cands[-1]
        if sq not in out or PRIO[t["category"]] < PRIO[out[sq]]:
            out[sq] = t["category"]
    return out, unmatched, len(evs)


def categories(truth, dec, exact=None):
    proc = dec["processes"][0]
    rows = [r for r in proc.get("steps", []) if r.get("device", 0) == truth.get("device", 0)]
    standing = {}
    per_step = {}
    for t in truth["tags"]:
        if t["step"] == 0 or t["category"] in ("parameters",):
            standing[t["ptr"]] = t["category"]
        else:
            per_step.setdefault(t["step"], {})[t["ptr"]] = t["category"]
    tot_tagged = tot_ok = tot_peak = tot_other = 0
    lines = []
    confusion = {}
    for r in rows:
        k = r.get("step")
        blocks = r.get("peak_blocks")
        if blocks is None:
            raise SystemExit("attrib_compare: the decoded JSON has no peak_blocks (run dsmemdecode with --peak-blocks)")
        tags = dict(standing)
        # optimizer states persist from the step that created them on
        for s in sorted(per_step):
            if s > k:
                break
            for p, c in per_step[s].items():
                if c == "optimizer_states" or s == k:
                    tags[p] = c
        tagged = ok = other = peak = 0
        for b in blocks:
            peak += b["size"]
            if b["category"] == "other":
                other += b["size"]
            want = exact.get(b["seq"]) if exact is not None else tags.get(b["ptr"])
            if want is None:
                continue
            tagged += b["size"]
            if b["category"] == want:
                ok += b["size"]
            else:
                confusion[(want, b["category"])] = confusion.get((want, b["category"]), 0) + b["size"]
        tot_tagged += tagged
        tot_ok += ok
        tot_peak += peak
        tot_other += other
        lines.append(f"  step {k}: peak {peak} B, tagged {tagged} B, matching {ok} B "
                     f"({100.0 * ok / tagged if tagged else 0:.2f} %), other {100.0 * other / peak if peak else 0:.2f} %")
    frac = 100.0 * tot_ok / tot_tagged if tot_tagged else 0.0
    oth = 100.0 * tot_other / tot_peak if tot_peak else 0.0
    return frac, oth, lines, confusion


ALLOC = re.compile(r"^\d+ ALLOC seq=(\d+) ts=\d+ tid=(\d+) api=torch .*?ptr=0x([0-9a-f]+) size=(\d+)")
PY0 = re.compile(r' py0="([^"]*) ([^" ]*):(-?\d+)"')


def frames(dump_path, frames_path, pid):
    ours = []
    with open(dump_path) as f:
        for line in f:
            m = ALLOC.match(line)
            if not m:
                continue
            p = PY0.search(line)
            ours.append({"seq": int(m.group(1)), "tid": int(m.group(2)), "addr": int(m.group(3), 16),
                         "size": int(m.group(4)),
                         "frame": p and {"name": p.group(1), "filename": p.group(2), "line": int(p.group(3))}})
    ours.sort(key=lambda e: e["seq"])
    with (gzip.open(frames_path, "rt") if frames_path.endswith(".gz") else open(frames_path)) as f:
        theirs = [e for e in json.load(f) if e["action"] == "alloc"]
    # torch's recorder was switched on right before the steps; ours ran from
    # the start: find where its first entries line up with ours.  Addresses
    # only: torch's trace gives the requested size, c10's hook the block's
    k = min(20, len(theirs))
    start = next((o for o in range(len(ours) - k + 1)
                  if all(ours[o + i]["addr"] == theirs[i]["addr"] for i in range(k))), None)
    if start is None:
        return 0, 0, len(ours), len(theirs), 0, 0, [("no alignment of the first entries", None)]
    ours = ours[start:]
    n = min(len(ours), len(theirs))
    aligned = sum(1 for a, b in zip(ours, theirs) if a["addr"] == b["addr"] and a["size"] >= b["size"])
    main = ok = 0
    misses = []
    for a, b in zip(ours, theirs):
        if a["tid"] != pid or a["addr"] != b["addr"]:
            continue
        main += 1
        fa, fb = a["frame"], b["frame"]
        good = bool(fa and fb and fa["line"] == fb["line"] and fa["filename"] == fb["filename"] and
                    (fa["name"] == fb["name"] or fa["name"].split(".")[-1] == fb["name"]))
        ok += good
        if not good and len(misses) < 5:
            misses.append((fa, fb))
    return n, aligned, len(ours), len(theirs), main, ok, misses


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("truth")
    ap.add_argument("decoded")
    ap.add_argument("--dump")
    ap.add_argument("--frames")
    ap.add_argument("--no-categories", action="store_true", help="judge the frames only")
    a = ap.parse_args()
    truth = json.load(open(a.truth))
    dec = json.load(open(a.decoded))
    good = True
    if not a.no_categories:
        exact = None
        if a.dump and truth["tags"] and "nalloc" in truth["tags"][0]:
            exact, unm, nev = exact_truth(truth, a.dump)
            print(f"tags name exact allocations: {len(truth['tags'])} tags, {unm} without an allocation "
                  f"at their address, over {nev} allocations")
        frac, oth, lines, conf = categories(truth, dec, exact)
        good &= frac >= 98.0 and oth <= 2.0
        print(f"categories {truth['loop']}: {frac:.2f} % of tagged peak bytes matched (target >= 98), "
              f"other {oth:.2f} % of peak (target <= 2) -> {'OK' if frac >= 98.0 and oth <= 2.0 else 'FAIL'}")
        for ln in lines:
            print(ln)
        for (w, g), b in sorted(conf.items(), key=lambda x: -x[1])[:8]:
            print(f"  tagged {w} but decoded {g}: {b} B")
    if a.dump and a.frames:
        n, aligned, no, nt, main_n, ok, misses = frames(a.dump, a.frames, truth["pid"])
        pct = 100.0 * ok / main_n if main_n else 0.0
        good &= pct >= 98.0 and aligned == n
        print(f"frames {truth['loop']}: {nt} torch allocs, {no} traced, {aligned}/{n} aligned by address (block size >= requested size); "
              f"main thread {main_n} events, innermost Python frame equal in {ok} ({pct:.2f} %, target >= 98) "
              f"-> {'OK' if pct >= 98.0 and aligned == n else 'FAIL'}")
        for fa, fb in misses:
            print(f"  ours {fa}  torch {fb}")
    return 0 if good else 1


if __name__ == "__main__":
    sys.exit(main())
