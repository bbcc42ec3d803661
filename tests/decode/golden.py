#!/usr/bin/env python3
"""Golden decode tests.

For each CASE.txt (a mktrace script): build the trace, run dsmemdecode with
--format json / table / csv and compare stdout with CASE.json / CASE.table /
CASE.csv, check the hand-computed numbers in the script's '#!' lines, the exit
status and stderr, and that --ignore-totals leaves stdout byte-identical.

  #! args ARGS...        extra dsmemdecode arguments
  #! exit N              expected exit status (default 0)
  #! stderr TEXT         stderr must contain TEXT (every run)
  #! nostderr TEXT       stderr must not contain TEXT
  #! expect [proc=I] step=S dev=D key=value...
                         a row of the JSON report (S: 1.., init, tail, evalK;
                         I: index in the report, default 0; paused absent = false)
  #! rows N              number of rows (steps + init + tail + eval, all devices)
  #! process [proc=I] key=value   process-level JSON fields
  #! breakdown [proc=I] dev=D key=value...
                         the device's entry of "driver"."device_breakdown"
  #! source [proc=I] idx=K key=value...
                         entry K (from 0) of "driver"."sources"
  #! nsources [proc=I] N number of "driver"."sources"
  #! drvevents [proc=I] op=N...   "driver"."events" is exactly this
  #! dump TEXT           `dsmemdecode --dump` output contains TEXT (a line's tail)
  #! file NAME           the lines up to the next `#! file` build trace NAME.zst;
                         the traces go to dsmemdecode in this order (default:
                         the whole script is one trace, CASE.zst)
  #! order NAME...       the processes of the report, by file (default: one)
  #! hostmem [proc=I] key=value...  "host_memory" (format 1.3 HOST records):
                         samples, peak_rss, peak_vsz; a phase name: its
                         phase_peak_rss entry (phase_peak_rss exactly these)

Attribution (JSON schema dsmemdecode-steps/3).  In values, `~` stands for a
space (frames such as "main~(train.py:12)").
  #! bk [proc=I] step=S dev=D at=peak|end CAT=N... [tmp.PHASE=N...]
                         the row's peak_breakdown or end_breakdown, exactly:
                         every category not named must be 0 (cached too), and
                         temporaries_by_phase is exactly the tmp.PHASE given
  #! peakphase [proc=I] step=S dev=D phase=P|null [nvtx=A,B|-]
  #! top [proc=I] step=S dev=D idx=K [bytes=N count=N category=C frameJ=F pystack=N stack=N]
  #! ntop [proc=I] step=S dev=D N
  #! growth [proc=I] idx=K [device=D bytes=N category=C first_step=A last_step=B
                         per_step=N,N,... frameJ=F]
  #! ngrowth [proc=I] N
  #! rbk [proc=I] dev=D CAT=N...   "driver" "device_breakdown" reserved_breakdown, exactly
  #! bktable             also compare `--format table --breakdown` (+ args) with CASE.bktable
Every row of every JSON report is checked: its categories (cached aside)
add up to peak_allocated / end_allocated and temporaries_by_phase to
temporaries.

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


CATS = ["parameters", "gathered_parameters", "master_weights", "optimizer_states", "gradients", "activations",
        "temporaries", "buckets", "communication", "workspace", "other", "cached"]


def unsp(v):
    return v.replace("~", " ")


def check_bk(what, b, want):
    fails = []
    if b is None:
        return ["%s: no breakdown" % what]
    tmp = {k[4:]: int(v) for k, v in want.items() if k.startswith("tmp.")}
    for c in CATS:
        w = int(want.get(c, 0))
        if b.get(c) != w:
            fails.append("%s: %s = %r, expected %d" % (what, c, b.get(c), w))
    if b.get("temporaries_by_phase") != tmp:
        fails.append("%s: temporaries_by_phase = %r, expected %r" % (what, b.get("temporaries_by_phase"), tmp))
    bad = [k for k in want if k not in CATS and not k.startswith("tmp.")]
    if bad:
        fails.append("%s: unknown categories %r" % (what, bad))
    return fails


def check_attrib(doc, rows_of, attrib):
    fails = []
    for pi, p in enumerate(doc["processes"]):  # invariants of every row
        for r in rows_of(p):
            for which, lvl in (("peak_breakdown", "peak_allocated"), ("end_breakdown", "end_allocated")):
                b = r.get(which)
                if b is None:
                    continue
                if sum(b[c] for c in CATS[:-1]) != r[lvl]:
                    fails.append("process %d step %s dev %d: %s adds up to %d, %s is %d" % (
                        pi, r["step"], r["device"], which, sum(b[c] for c in CATS[:-1]), lvl, r[lvl]))
                if sum(b["temporaries_by_phase"].values()) != b["temporaries"]:
                    fails.append("process %d step %s: %s temporaries_by_phase does not add up" % (pi, r["step"], which))
    for kind, e in attrib:
        e = dict(e)
        p = doc["processes"][int(e.pop("proc", 0))]
        if kind in ("bk", "peakphase", "top", "ntop"):
            step, dev = parse_value(e.pop("step")), int(e.pop("dev"))
            match = [r for r in rows_of(p) if r["step"] == step and r["device"] == dev]
            if len(match) != 1:
                fails.append("%s: no row for step %s device %d" % (kind, step, dev))
                continue
            r = match[0]
            what = "step %s dev %d" % (step, dev)
            if kind == "bk":
                at = e.pop("at")
                fails += check_bk("%s %s_breakdown" % (what, at), r.get(at + "_breakdown"), e)
            elif kind == "peakphase":
                pp = r.get("peak_phase") or {}
                if pp.get("phase") != parse_value(e["phase"]):
                    fails.append("%s: peak phase %r, expected %s" % (what, pp.get("phase"), e["phase"]))
                if "nvtx" in e:
                    want = [] if e["nvtx"] == "-" else [unsp(x) for x in e["nvtx"].split(",")]
                    if pp.get("nvtx") != want:
                        fails.append("%s: peak nvtx %r, expected %r" % (what, pp.get("nvtx"), want))
            elif kind == "ntop":
                if len(r.get("top_sites", [])) != int(e["n"]):
                    fails.append("%s: %d top sites, expected %s" % (what, len(r.get("top_sites", [])), e["n"]))
            else:
                idx = int(e.pop("idx"))
                ts = r.get("top_sites", [])
                if idx >= len(ts):
                    fails.append("%s: no top site %d" % (what, idx))
                    continue
                fails += check_entry("%s top %d" % (what, idx), ts[idx], e)
        elif kind in ("growth", "ngrowth"):
            g = p.get("growth") or []
            if kind == "ngrowth":
                if len(g) != int(e["n"]):
                    fails.append("%d growth entries, expected %s" % (len(g), e["n"]))
                continue
            idx = int(e.pop("idx"))
            if idx >= len(g):
                fails.append("no growth entry %d" % idx)
                continue
            fails += check_entry("growth %d" % idx, g[idx], e)
        elif kind == "rbk":
            dev = int(e.pop("dev"))
            d = p.get("driver") or {}
            match = [b for b in d.get("device_breakdown", []) if b["device"] == dev]
            if len(match) != 1:
                fails.append("rbk: no device_breakdown for device %d" % dev)
                continue
            fails += check_bk("device %d reserved_breakdown" % dev, match[0].get("reserved_breakdown"), e)
    return fails


def check_entry(what, got, want):
    fails = []
    for k, v in want.items():
        if k.startswith("frame"):
            j = int(k[5:])
            fr = got.get("frames", [])
            if j >= len(fr) or fr[j] != unsp(v):
                fails.append("%s: %s = %r, expected %r" % (what, k, fr[j] if j < len(fr) else None, unsp(v)))
        elif k == "per_step":
            if got.get(k) != [int(x) for x in v.split(",")]:
                fails.append("%s: per_step %r, expected %s" % (what, got.get(k), v))
        elif got.get(k, "(absent)") != parse_value(v):
            fails.append("%s: %s = %r, expected %s" % (what, k, got.get(k, "(absent)"), v))
    return fails


def check_case(mktrace, decode, srcdir, work, name, update):
    script = os.path.join(srcdir, name + ".txt")
    directives = [l[2:].strip() for l in open(script) if l.startswith("#!")]
    stderr_not = []
    args, exit_code, stderr_want, expects, rows, procs, order = [], 0, [], [], None, [], None
    drv = []  # (kind, dict)
    dump_want = []
    attrib = []  # (kind, dict)
    bktable = False
    hostmem = []  # dicts
    parts, cur = [], None  # (name, script lines)
    for l in open(script):
        if l.startswith("#! file "):
            cur = (l[8:].strip(), [])
            parts.append(cur)
        elif cur:
            cur[1].append(l)
    for d in directives:
        key, _, rest = d.partition(" ")
        if key == "args":
            args = rest.split()
        elif key == "exit":
            exit_code = int(rest)
        elif key == "stderr":
            stderr_want.append(rest)
        elif key == "nostderr":
            stderr_not.append(rest)
        elif key == "expect":
            expects.append(dict(kv.split("=", 1) for kv in rest.split()))
        elif key == "rows":
            rows = int(rest)
        elif key == "process":
            procs.append(dict(kv.split("=", 1) for kv in rest.split()))
        elif key in ("breakdown", "source", "nsources", "drvevents"):
            kv = [x for x in rest.split()]
            if key == "nsources":
                kv = [x if "=" in x else "n=" + x for x in kv]
            drv.append((key, dict(x.split("=", 1) for x in kv)))
        elif key == "dump":
            dump_want.append(rest)
        elif key in ("bk", "peakphase", "top", "growth", "rbk", "ntop", "ngrowth"):
            kv = rest.split()
            if key in ("ntop", "ngrowth"):
                kv = [x if "=" in x else "n=" + x for x in kv]
            attrib.append((key, dict(x.split("=", 1) for x in kv)))
        elif key == "hostmem":
            hostmem.append(dict(x.split("=", 1) for x in rest.split()))
        elif key == "bktable":
            bktable = True
        elif key == "file":
            pass
        elif key == "order":
            order = rest.split()
        else:
            raise AssertionError("%s: unknown directive %r" % (name, d))
    traces = []
    if not parts:
        traces = [name + ".zst"]
        rc, _, err = run([mktrace, script, os.path.join(work, traces[0])], work)
        if rc != 0:
            raise AssertionError("mktrace failed on %s: %s" % (name, err))
    for pname, lines in parts:
        traces.append(pname + ".zst")
        part = os.path.join(work, "%s.%s.txt" % (name, pname))
        with open(part, "w") as f:
            f.writelines(lines)
        rc, _, err = run([mktrace, part, os.path.join(work, traces[-1])], work)
        if rc != 0:
            raise AssertionError("mktrace failed on %s, file %s: %s" % (name, pname, err))

    fails = []
    outputs = {}
    for fmt in ("json", "table", "csv"):
        rc, out, err = run([decode, "--format", fmt] + args + traces, work)
        outputs[fmt] = out
        if rc != exit_code:
            fails.append("%s: exit %d, expected %d\n%s" % (fmt, rc, exit_code, err))
        for s in stderr_want:
            if s not in err:
                fails.append("%s: stderr lacks %r; got:\n%s" % (fmt, s, err))
        for s in stderr_not:
            if s in err:
                fails.append("%s: stderr has %r; got:\n%s" % (fmt, s, err))
        # --ignore-totals: byte-identical report
        rc2, out2, _ = run([decode, "--format", fmt, "--ignore-totals"] + args + traces, work)
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

    if bktable:
        rc, out, err = run([decode, "--format", "table", "--breakdown"] + args + traces, work)
        gold = os.path.join(srcdir, "%s.bktable" % name)
        if update:
            with open(gold, "wb") as f:
                f.write(out)
        elif not os.path.exists(gold):
            fails.append("missing golden file %s" % gold)
        elif open(gold, "rb").read() != out:
            fails.append("--breakdown table differs from %s:\n%s" % (gold, out.decode(errors="replace")))

    if dump_want:
        rc, out, err = run([decode, "--dump"] + traces, work)
        text = out.decode(errors="replace")
        for d in dump_want:
            if d not in text:
                fails.append("--dump lacks %r; got:\n%s" % (d, text))

    doc = json.loads(outputs["json"])
    files = [os.path.splitext(t)[0] for t in traces] if order is None else order
    if doc.get("format") != "dsmemdecode-steps/3" or len(doc["processes"]) != len(files):
        fails.append("bad JSON document")
    elif [os.path.splitext(p["file"])[0] for p in doc["processes"]] != files:
        fails.append("processes in the order %s, expected %s" % ([p["file"] for p in doc["processes"]], files))
    else:
        def rows_of(p):
            allrows = [dict(r, step=r["step"]) for r in p["steps"]]
            allrows += [dict(r, step="init") for r in p["init"]]
            allrows += [dict(r, step="tail") for r in p["tail"]]
            allrows += [dict(r, step="eval%d" % r["eval"]) for r in p["eval"]]
            return allrows
        if rows is not None and len(rows_of(doc["processes"][0])) != rows:
            fails.append("expected %d rows, got %d" % (rows, len(rows_of(doc["processes"][0]))))
        for e in expects:
            pi = int(e.pop("proc", 0))
            step = parse_value(e.pop("step"))
            dev = int(e.pop("dev"))
            match = [r for r in rows_of(doc["processes"][pi]) if r["step"] == step and r["device"] == dev]
            if len(match) != 1:
                fails.append("no row for step %s device %d of process %d" % (step, dev, pi))
                continue
            for k, v in e.items():
                got = match[0].get(k, False if k == "paused" else None)
                if got != parse_value(v):
                    fails.append("process %d step %s dev %d: %s = %r, expected %s" % (pi, step, dev, k, got, v))
        for kind, e in drv:
            p = doc["processes"][int(e.pop("proc", 0))]
            d = p.get("driver")
            if d is None:
                fails.append("%s: \"driver\" is null" % kind)
                continue
            if kind == "nsources":
                if len(d["sources"]) != int(e["n"]):
                    fails.append("%d sources, expected %s" % (len(d["sources"]), e["n"]))
                continue
            if kind == "drvevents":
                want = {k: int(v) for k, v in e.items()}
                if d["events"] != want:
                    fails.append("driver events %r, expected %r" % (d["events"], want))
                continue
            if kind == "breakdown":
                dev = int(e.pop("dev"))
                match = [b for b in d["device_breakdown"] if b["device"] == dev]
                what = "breakdown dev %d" % dev
            else:
                idx = int(e.pop("idx"))
                match = d["sources"][idx:idx + 1]
                what = "source %d" % idx
            if len(match) != 1:
                fails.append("no %s" % what)
                continue
            for k, v in e.items():
                if match[0].get(k, "(absent)") != parse_value(v):
                    fails.append("%s: %s = %r, expected %s" % (what, k, match[0].get(k, "(absent)"), v))
        fails += check_attrib(doc, rows_of, attrib)
        for hm in hostmem:
            hm = dict(hm)
            h = doc["processes"][int(hm.pop("proc", 0))].get("host_memory")
            if h is None:
                fails.append("host_memory is null")
                continue
            phases = {}
            for k, v in hm.items():
                if k in ("samples", "peak_rss", "peak_vsz"):
                    if h.get(k) != int(v):
                        fails.append("host_memory %s = %r, expected %s" % (k, h.get(k), v))
                else:
                    phases[k] = int(v)
            if h.get("phase_peak_rss") != phases:
                fails.append("host_memory phase_peak_rss = %r, expected %r" % (h.get("phase_peak_rss"), phases))
        for pr in procs:
            p = doc["processes"][int(pr.pop("proc", 0))]
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
